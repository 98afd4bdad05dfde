/* ckpt-xxh64.c - xxHash64, written from the public specification (xxhash.com, "xxHash fast
 * digest algorithm", XXH64) and checked bit for bit against the reference implementation's
 * values in tests/test_ckpt_format.c. Also the streamed model-file hash.
 *
 * The streaming form keeps the 32-byte stripe accumulators v[0..3] and up to 31 bytes not yet
 * folded into them (mem); the digest treats those bytes exactly as the one-shot form treats its
 * tail, so both agree for any split of the input. */
#include "ckpt-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)
#define P4 UINT64_C(0x85EBCA77C2B2AE63)
#define P5 UINT64_C(0x27D4EB2F165667C5)

static inline uint64_t rotl(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}
static inline uint64_t round64(uint64_t acc, uint64_t in) {
    acc += in * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}
static inline uint64_t merge64(uint64_t h, uint64_t v) {
    h ^= round64(0, v);
    return h * P1 + P4;
}

/* Folds the tail (< 32 bytes) into h and avalanches: the common end of both forms. */
static uint64_t finish(uint64_t h, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        h ^= round64(0, ckpt_ld64(p));
        h = rotl(h, 27) * P1 + P4;
    }
    if (n >= 4) {
        h ^= (uint64_t)ckpt_ld32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--) {
        h ^= (uint64_t)*p * P5;
        h = rotl(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

static inline void stripe(uint64_t v[4], const uint8_t *p) {
    v[0] = round64(v[0], ckpt_ld64(p));
    v[1] = round64(v[1], ckpt_ld64(p + 8));
    v[2] = round64(v[2], ckpt_ld64(p + 16));
    v[3] = round64(v[3], ckpt_ld64(p + 24));
}

static inline uint64_t converge(const uint64_t v[4]) {
    uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
    for (int i = 0; i < 4; i++) h = merge64(h, v[i]);
    return h;
}

static inline void seed_lanes(uint64_t v[4], uint64_t seed) {
    v[0] = seed + P1 + P2;
    v[1] = seed + P2;
    v[2] = seed;
    v[3] = seed - P1;
}

uint64_t ckpt_xxh64(const void *data, size_t n, uint64_t seed) {
    const uint8_t *p = data;
    uint64_t h;
    size_t len = n;
    if (n >= 32) {
        uint64_t v[4];
        seed_lanes(v, seed);
        for (; n >= 32; p += 32, n -= 32) stripe(v, p);
        h = converge(v);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)len;
    return finish(h, p, n);
}

void ckpt_xxh64_init(ckpt_xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    seed_lanes(s->v, seed);
}

void ckpt_xxh64_update(ckpt_xxh64_state *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->total += n;
    if (s->memsize + n < 32) {
        if (n) memcpy(s->mem + s->memsize, p, n);
        s->memsize += (unsigned)n;
        return;
    }
    if (s->memsize) {
        size_t fill = 32 - s->memsize;
        memcpy(s->mem + s->memsize, p, fill);
        stripe(s->v, s->mem);
        p += fill;
        n -= fill;
        s->memsize = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(s->v, p);
    if (n) memcpy(s->mem, p, n);
    s->memsize = (unsigned)n;
}

uint64_t ckpt_xxh64_digest(const ckpt_xxh64_state *s) {
    uint64_t h = s->total >= 32 ? converge(s->v) : s->seed + P5;
    h += s->total;
    return finish(h, s->mem, s->memsize);
}

ir_status ckpt_file_hash(const char *path, uint64_t *hash, ir_diag *d) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ckpt_xxh64_state s;
    ckpt_xxh64_init(&s, 0);
    uint8_t chunk[1 << 16]; /* a stack chunk: the model may be gigabytes, never hold it all */
    ir_status st = IR_OK;
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            st = ir_diag_set(d, IR_ERR_IO, "%s: read error after byte %llu: %s", path,
                             (unsigned long long)s.total, strerror(errno));
            break;
        }
        if (got == 0) break;
        ckpt_xxh64_update(&s, chunk, (size_t)got);
    }
    close(fd);
    if (st == IR_OK) *hash = ckpt_xxh64_digest(&s);
    return st;
}
