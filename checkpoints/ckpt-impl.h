/* ckpt-impl.h - private to checkpoints/: explicit little-endian loads and stores (the format is
 * little-endian on every host; no struct is ever dumped) and the layout constants that the
 * writer and the reader share. */
#ifndef MAGPIE_CKPT_IMPL_H
#define MAGPIE_CKPT_IMPL_H

#include <stdint.h>

#include "ckpt.h"

/* Header offsets relative to the end of the model path (see ckpt.h): L is the path length. */
#define CKPT_OFF_PATH_LEN 24u
#define CKPT_OFF_PATH 26u
#define CKPT_TAIL_OPTIONS 0u   /* + 26 + L */
#define CKPT_TAIL_RAW 8u       /* + 26 + L */
#define CKPT_TAIL_ZSIZE 16u    /* + 26 + L */
#define CKPT_TAIL_BODYSUM 24u  /* + 26 + L */
#define CKPT_TAIL_CHECKSUM 32u /* + 26 + L */

#define CKPT_ENTRY_BYTES 20u /* u32 tag, u64 length, u64 xxh64 */
/* Section table bytes for n sections: count, entries, table checksum. */
#define CKPT_TABLE_BYTES(n) (4u + CKPT_ENTRY_BYTES * (uint64_t)(n) + 8u)

/* A valid zstd frame cannot expand more than this: every block yields at most 128 KiB and takes
 * at least 4 bytes (3-byte header + 1 RLE byte). The reader refuses a declared body size above
 * Z times this before allocating it, so a forged header cannot make it allocate more than the
 * compressed bytes could possibly produce. */
#define CKPT_ZSTD_MAX_RATIO 32768u

static inline void ckpt_st16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ckpt_st32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ckpt_st64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t ckpt_ld16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t ckpt_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ckpt_ld64(const uint8_t *p) {
    return (uint64_t)ckpt_ld32(p) | (uint64_t)ckpt_ld32(p + 4) << 32;
}

#endif
