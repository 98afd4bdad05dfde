/* ckpt.h - magpie's checkpoint container (DESIGN.md decision 6): a versioned, sectioned,
 * checksummed, zstd-compressed file written atomically, and a strict reader. Symbols carry the
 * prefix ckpt_.
 *
 * This layer knows nothing of the explorer: a checkpoint is a header that identifies the run
 * (model file, options) plus a set of opaque sections named by FourCC tags. What goes into each
 * section is the integrator's business; ckpt_buf/ckpt_cur and the fingerprint-set codec below
 * are the tools to encode it.
 *
 * ================================================================ file format, version 1
 *
 * Every integer is little-endian, written byte by byte (no struct dumps); offsets are in bytes.
 * L is the length of the model path. XXH64 is xxHash64 (ckpt_xxh64) with seed 0.
 *
 *   offset  size  field
 *   ------  ----  -----------------------------------------------------------------------
 *        0     8  magic: the ASCII bytes "MAGPIECK"
 *        8     4  u32 format version: CKPT_VERSION (1). A reader refuses any other.
 *       12     4  u32 flags: none defined in version 1; must be 0 (a reader refuses others)
 *       16     8  u64 model content hash: XXH64 of the model file's bytes (ckpt_file_hash)
 *       24     2  u16 L: length of the model path
 *       26     L  model path as given on the command line, UTF-8, not NUL-terminated
 *     26+L     8  u64 options hash: the caller's hash of the options that define the search
 *                 (mode, limits, device, rules, training options, seed; not threads, budgets
 *                 or output paths). Opaque to this layer.
 *     34+L     8  u64 R: uncompressed size of the body
 *     42+L     8  u64 Z: compressed size of the body
 *     50+L     8  u64 body checksum: XXH64 of the Z compressed bytes
 *     58+L     8  u64 header checksum: XXH64 of bytes [0, 58+L)
 *     66+L     Z  body: exactly one zstd frame whose frame header declares content size R
 *   66+L+Z        end of file: the file has exactly 66+L+Z bytes, nothing trails
 *
 * The body, once decompressed (R bytes), holds a section table then the sections:
 *
 *   offset  size  field
 *        0     4  u32 N: number of sections, 0..CKPT_MAX_SECTIONS
 *        4  20*N  N entries of { u32 tag (FourCC, CKPT_TAG), u64 length, u64 XXH64 of the
 *                 section's uncompressed bytes }; tags are pairwise distinct
 *   4+20*N     8  u64 table checksum: XXH64 of bytes [0, 4+20*N)
 *  12+20*N        the sections' bytes, back to back in table order; their lengths add up to
 *                 exactly R - (12 + 20*N)
 *
 * Every bit of the file is covered by a checksum: the header by its own, the compressed body by
 * the body checksum (zstd frames have bits a decoder ignores, so zstd's framing alone would let
 * some flips through), the section table and each section by their XXH64 (which also catch a
 * decompressor that went wrong). A reader (ckpt_open) validates all of it before it returns,
 * and refuses, with a message that says which check failed and where:
 *   - a file shorter than its header or than 66+L+Z bytes: "truncated at byte N";
 *   - wrong magic; unsupported version or flags;
 *   - header checksum mismatch; body checksum mismatch;
 *   - bytes after the body, or a frame whose content size is not R: "body size mismatch";
 *   - zstd errors; a malformed section table (counts, sizes, duplicate tags, its checksum);
 *   - a section checksum mismatch, naming the section's tag.
 * Reading never writes the file and never reads out of bounds, whatever its bytes.
 *
 * Status codes (ir_status; each maps to exit status 2, "bad input", in cli_exit_for):
 * IR_ERR_IO (cannot open or read), IR_ERR_PARSE (corrupt: every check above), IR_ERR_UNSUPPORTED
 * (version, flags), IR_ERR_INVALID (ckpt_check_model/ckpt_check_options: a checkpoint of
 * another model or other options). IR_ERR_NOMEM is the only other failure.
 *
 * ================================================================ atomic replacement
 *
 * ckpt_writer_commit writes PATH.tmp.<pid> in PATH's directory, fsyncs it, renames it over
 * PATH, then fsyncs the directory. rename(2) is atomic, so a crash at any moment leaves either
 * the previous checkpoint or the new one at PATH, never a torn file; it may leave a stale
 * PATH.tmp.<pid>, which ckpt_cleanup_stale removes.
 *
 * Test hook, honoured in every build (one getenv per commit): with the environment variable
 * MAGPIE_CKPT_FAIL_BEFORE_RENAME=1, commit writes and fsyncs the temporary file and then fails
 * (IR_ERR_IO) without renaming it, exactly as a crash at that point would leave things. */
#ifndef MAGPIE_CKPT_H
#define MAGPIE_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_MAGIC "MAGPIECK" /* 8 bytes, no NUL in the file */
#define CKPT_VERSION 1u
#define CKPT_HEADER_FIXED 66u     /* header bytes besides the model path */
#define CKPT_MAX_PATH 65535u      /* the u16 length field */
#define CKPT_MAX_SECTIONS 256u    /* a reader refuses more: bounds the table it allocates */
#define CKPT_ZSTD_LEVEL_DEFAULT 3 /* zstd's own default: ~300 MB/s, a fraction of a second */
#define CKPT_FAIL_ENV "MAGPIE_CKPT_FAIL_BEFORE_RENAME"

/* A FourCC tag whose bytes in the file spell a, b, c, d. */
#define CKPT_TAG(a, b, c, d)                                                                       \
    ((uint32_t)(uint8_t)(a) | (uint32_t)(uint8_t)(b) << 8 | (uint32_t)(uint8_t)(c) << 16 |         \
     (uint32_t)(uint8_t)(d) << 24)

/* Tags the explorer's checkpoints use (the list); the container accepts any tag. */
#define CKPT_TAG_OPTIONS CKPT_TAG('O', 'P', 'T', 'S')  /* the options, to re-check and re-print */
#define CKPT_TAG_GRAPH CKPT_TAG('G', 'R', 'P', 'H')    /* the graph, or how to rebuild it */
#define CKPT_TAG_FRONTIER CKPT_TAG('F', 'R', 'N', 'T') /* incl. states popped, not expanded */
#define CKPT_TAG_FPSET CKPT_TAG('F', 'P', 'S', 'T')    /* the fingerprint set (ckpt_put_fpset) */
#define CKPT_TAG_BEST CKPT_TAG('B', 'E', 'S', 'T')     /* the best state */
#define CKPT_TAG_PROFILE CKPT_TAG('P', 'R', 'O', 'F')  /* profile cache entries used */
#define CKPT_TAG_RNG CKPT_TAG('R', 'N', 'G', 'S')      /* random-number state */
#define CKPT_TAG_TIME CKPT_TAG('T', 'I', 'M', 'E')     /* elapsed time */
#define CKPT_TAG_COUNTERS CKPT_TAG('C', 'N', 'T', 'R') /* counters */

/* Writes tag's four characters and a NUL into out[5]; bytes outside printable ASCII as '?'.
 * Returns out. */
char *ckpt_tag_str(uint32_t tag, char out[5]);

/* ---------------------------------------------------------------- XXH64 */

/* xxHash64 (Yann Collet's public specification), bit-exact with the reference implementation. */
uint64_t ckpt_xxh64(const void *p, size_t n, uint64_t seed);

/* Streaming XXH64: init, any number of updates, digest (which does not end the stream). */
typedef struct ckpt_xxh64_state {
    uint64_t total, seed, v[4];
    uint8_t mem[32];
    unsigned memsize;
} ckpt_xxh64_state;
void ckpt_xxh64_init(ckpt_xxh64_state *s, uint64_t seed);
void ckpt_xxh64_update(ckpt_xxh64_state *s, const void *p, size_t n);
uint64_t ckpt_xxh64_digest(const ckpt_xxh64_state *s);

/* The model content hash of the header: XXH64 (seed 0) of the file's bytes, read in chunks. */
ir_status ckpt_file_hash(const char *path, uint64_t *hash, ir_diag *d);

/* ---------------------------------------------------------------- section encoding */

/* A growable byte buffer. Zero-initialise it ({0}). Puts never fail one by one: an allocation
 * failure sets `oom`, later puts do nothing, and whoever consumes the buffer checks it once
 * (ckpt_writer_section_buf does). */
typedef struct ckpt_buf {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} ckpt_buf;

void ckpt_buf_free(ckpt_buf *b); /* frees data and zeroes *b; NULL-safe */
/* Makes room for n more bytes (sets oom and returns false when that fails). */
bool ckpt_buf_reserve(ckpt_buf *b, size_t n);
void ckpt_put_u8(ckpt_buf *b, uint8_t v);
void ckpt_put_u16(ckpt_buf *b, uint16_t v);
void ckpt_put_u32(ckpt_buf *b, uint32_t v);
void ckpt_put_u64(ckpt_buf *b, uint64_t v);
void ckpt_put_i64(ckpt_buf *b, int64_t v);     /* two's complement, as u64 */
void ckpt_put_f64(ckpt_buf *b, double v);      /* IEEE-754 bits, as u64: NaNs and -0 survive */
void ckpt_put_varint(ckpt_buf *b, uint64_t v); /* LEB128: 7 bits a byte, 1 to 10 bytes */
void ckpt_put_bytes(ckpt_buf *b, const void *p, size_t n);
void ckpt_put_str(ckpt_buf *b, const char *s); /* varint length, then the bytes without NUL */

/* A bounds-checked read cursor over bytes it does not own. A get that would read past the end
 * (or a malformed varint) returns false, stores 0 / NULL, and makes the cursor `bad` for good,
 * so a decoder may check once at the end; nothing is ever read out of bounds. */
typedef struct ckpt_cur {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} ckpt_cur;

static inline ckpt_cur ckpt_cur_make(const void *p, size_t len) {
    ckpt_cur c = {(const uint8_t *)p, len, 0, false};
    return c;
}
/* True when every byte was consumed and no get failed. */
static inline bool ckpt_cur_done(const ckpt_cur *c) {
    return !c->bad && c->pos == c->len;
}
bool ckpt_get_u8(ckpt_cur *c, uint8_t *v);
bool ckpt_get_u16(ckpt_cur *c, uint16_t *v);
bool ckpt_get_u32(ckpt_cur *c, uint32_t *v);
bool ckpt_get_u64(ckpt_cur *c, uint64_t *v);
bool ckpt_get_i64(ckpt_cur *c, int64_t *v);
bool ckpt_get_f64(ckpt_cur *c, double *v);
/* Refuses encodings longer than 10 bytes or above 2^64-1. Overlong but in-range ones (0x80 0x00
 * for 0) are accepted: canonical form is the writer's habit, not something to enforce. */
bool ckpt_get_varint(ckpt_cur *c, uint64_t *v);
/* *p points into the cursor's bytes (n of them). */
bool ckpt_get_bytes(ckpt_cur *c, size_t n, const uint8_t **p);
/* *s points into the cursor's bytes and is NOT NUL-terminated; *n is its length. */
bool ckpt_get_str(ckpt_cur *c, const char **s, size_t *n);

/* The fingerprint set codec. Random 64-bit fingerprints do not compress, but a sorted set of n
 * of them has gaps of about 2^64/n, which a Rice code (k low bits verbatim, the rest in unary)
 * stores in about log2(2^64/n) + 2 bits: ~5.8 bytes a fingerprint at n = 10^6, against 8 raw.
 * Encoding: varint n; if n > 0, u8 k (0..63), then the n gaps (the first from 0) as Rice codes,
 * bits packed LSB-first, the last byte zero-padded.
 *
 * ckpt_put_fpset sorts fps[0..n) in place (radix sort; it allocates one n-sized scratch array,
 * and sets b->oom if that fails). Duplicates are kept. */
void ckpt_put_fpset(ckpt_buf *b, uint64_t *fps, size_t n);
/* Decodes what ckpt_put_fpset wrote: *fps (malloc'd, free it) gets the n fingerprints in
 * ascending order. The allocation is bounded by the bytes present (n <= 8 * remaining bytes),
 * whatever the count says. Returns false (cursor bad, *fps NULL, *n 0) on malformed input,
 * including gaps that overflow 64 bits; on allocation failure too. */
bool ckpt_get_fpset(ckpt_cur *c, uint64_t **fps, size_t *n);

/* ---------------------------------------------------------------- writer */

typedef struct ckpt_meta {
    const char *model_path; /* copied; at most CKPT_MAX_PATH bytes; NULL means "" */
    uint64_t model_hash;    /* ckpt_file_hash of the model */
    uint64_t options_hash;
    int zstd_level; /* 0: CKPT_ZSTD_LEVEL_DEFAULT */
} ckpt_meta;

typedef struct ckpt_writer ckpt_writer;

/* NULL with *st and d set when the path is too long (IR_ERR_INVALID) or memory is short. */
ckpt_writer *ckpt_writer_init(const ckpt_meta *m, ir_status *st, ir_diag *d);
void ckpt_writer_free(ckpt_writer *w); /* NULL-safe */
/* Adds a section holding a copy of bytes[0..len). A tag added twice, or more than
 * CKPT_MAX_SECTIONS sections, is a programmer error (assert). IR_ERR_NOMEM only. */
ir_status ckpt_writer_section(ckpt_writer *w, uint32_t tag, const void *bytes, size_t len,
                              ir_diag *d);
/* Adds a section that takes over b's storage without a copy and leaves *b empty ({0}, ready for
 * reuse). IR_ERR_NOMEM (and b freed) when b->oom is set. */
ir_status ckpt_writer_section_buf(ckpt_writer *w, uint32_t tag, ckpt_buf *b, ir_diag *d);
/* The whole file in memory (*out malloc'd, *n bytes), as commit would write it. */
ir_status ckpt_writer_encode(const ckpt_writer *w, uint8_t **out, size_t *n, ir_diag *d);
/* Encodes and atomically replaces path (see "atomic replacement" above). On failure path is
 * untouched, the temporary file removed (unless the test hook asked to keep it), and d names
 * the file and the cause. The writer stays valid: commit may be called again. */
ir_status ckpt_writer_commit(const ckpt_writer *w, const char *path, ir_diag *d);

/* Atomically replaces path with data[0..n) (temporary file, fsync, rename, directory fsync;
 * honours CKPT_FAIL_ENV). What commit uses; usable for any output that must never be torn. */
ir_status ckpt_write_atomic(const char *path, const void *data, size_t n, ir_diag *d);

/* ---------------------------------------------------------------- checkpoint sets (ckpt-set.c)
 *
 * A distributed search checkpoints as a set: one ordinary checkpoint per rank (its part, at
 * ckpt_set_part_path(PATH, G, r)) and a manifest at PATH naming the ranks, the generation G and
 * each part's XXH64 (ckpt_file_hash), written last and atomically once every part is
 * committed. */
typedef struct ckpt_set {
    uint32_t ranks;
    uint64_t generation;
    uint64_t *hash; /* ranks of them (owned) */
} ckpt_set;

/* "PATH.g<generation>.r<rank>", malloc'd (NULL when out of memory). */
char *ckpt_set_part_path(const char *path, uint64_t generation, int rank);
ir_status ckpt_set_write(const char *path, const ckpt_set *s, ir_diag *d);
/* Reads path as a manifest: *is_set false (IR_OK) when it is not one (an ordinary checkpoint, or
 * a file that does not open: the checkpoint reader then names the cause);
 * IR_ERR_PARSE naming path for a manifest that does not parse. */
ir_status ckpt_set_read(const char *path, ckpt_set *s, bool *is_set, ir_diag *d);
void ckpt_set_free(ckpt_set *s); /* NULL-safe */

/* Removes the temporary files PATH.tmp.<pid> that crashed writers left next to path.
 * Policy: a file is removed when its <pid> is this process's own (no commit of ours is in
 * flight while the caller runs this: call it before the first commit or between commits) or
 * names no live process (kill(pid, 0) fails with ESRCH). Files of live processes, which may
 * be writing right now, stay; so do names that do not end in a decimal pid. *removed (may be
 * NULL) gets the count. IR_ERR_IO when the directory cannot be read; a file that cannot be
 * removed is skipped, not an error (the next cleanup tries again). */
ir_status ckpt_cleanup_stale(const char *path, int *removed, ir_diag *d);

/* ---------------------------------------------------------------- reader */

typedef struct ckpt_reader ckpt_reader;

typedef struct ckpt_info {
    uint32_t version, flags;
    uint64_t model_hash;
    const char *model_path; /* NUL-terminated copy; owned by the reader */
    uint64_t options_hash;
    uint64_t body_raw_size, body_zsize, file_size;
    uint32_t n_sections;
} ckpt_info;

/* Reads and validates the whole file (see the format above) and returns a reader, or NULL with
 * *st (may be NULL) and d set, the message prefixed with path. The file is opened read-only. */
ckpt_reader *ckpt_open(const char *path, ir_status *st, ir_diag *d);
/* The same over bytes in memory (copied where needed: data may go away after the call); name
 * prefixes the messages. */
ckpt_reader *ckpt_open_mem(const void *data, size_t n, const char *name, ir_status *st, ir_diag *d);
void ckpt_close(ckpt_reader *r); /* NULL-safe */

const ckpt_info *ckpt_header(const ckpt_reader *r);
/* The section tagged tag: *p (owned by the reader, valid until ckpt_close, no particular
 * alignment) and *len. False when there is none. */
bool ckpt_section(const ckpt_reader *r, uint32_t tag, const uint8_t **p, size_t *len);
/* The i-th section in file order, 0 <= i < n_sections. */
void ckpt_section_at(const ckpt_reader *r, uint32_t i, uint32_t *tag, const uint8_t **p,
                     size_t *len);

/* IR_ERR_INVALID, naming both files and hashes, unless the checkpoint was made from a model
 * whose bytes hash to model_hash; then IR_OK. */
ir_status ckpt_check_model(const ckpt_reader *r, const char *model_path, uint64_t model_hash,
                           ir_diag *d);
/* IR_ERR_INVALID unless the checkpoint's options hash is options_hash. */
ir_status ckpt_check_options(const ckpt_reader *r, uint64_t options_hash, ir_diag *d);

#ifdef __cplusplus
}
#endif
#endif
