/* ckpt-fpset.c - the fingerprint-set codec: sort, take gaps, Rice-code them (format in ckpt.h).
 *
 * Why Rice: n random 64-bit values have gaps that are close to geometric with mean 2^64/n, and
 * a Rice code with 2^k near that mean is within a few percent of the set's entropy, while a
 * LEB128 varint spends whole 7-bit groups (7 bytes a gap at n = 10^6 instead of ~5.8).
 *
 * Bounds. With k = floor(log2(max/n)), 2^k <= max/n, so the unary parts add up to at most
 * max >> k < 2n bits: the encoder sizes its output once, exactly bounded. The decoder trusts no
 * count: n is checked against the bits present before anything is allocated, every gap against
 * 64-bit overflow, and the bit reader never reads past the cursor's bytes. */
#include "ckpt-impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- radix sort */

#define RADIX_BITS 11
#define RADIX_PASSES 6 /* 6 * 11 >= 64 */
#define RADIX_SIZE (1u << RADIX_BITS)

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* LSD radix sort, 11-bit digits; all six histograms come from one read pass, and a pass whose
 * digit is the same for every key is skipped (random fingerprints skip none, small test keys
 * most). Falls back on qsort for small n, and when the scratch allocation fails: sorting never
 * fails, it only gets slower. */
static void sort_u64(uint64_t *a, size_t n) {
    if (n < 1024) {
        qsort(a, n, sizeof *a, cmp_u64);
        return;
    }
    uint64_t *tmp = malloc(n * sizeof *tmp);
    size_t(*hist)[RADIX_SIZE] = calloc(RADIX_PASSES, sizeof *hist);
    if (!tmp || !hist) {
        free(tmp);
        free(hist);
        qsort(a, n, sizeof *a, cmp_u64);
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < RADIX_PASSES; p++)
            hist[p][(a[i] >> (p * RADIX_BITS)) & (RADIX_SIZE - 1)]++;
    uint64_t *src = a, *dst = tmp;
    for (int p = 0; p < RADIX_PASSES; p++) {
        size_t *h = hist[p];
        unsigned shift = (unsigned)(p * RADIX_BITS);
        if (h[(src[0] >> shift) & (RADIX_SIZE - 1)] == n) continue; /* one bucket: order kept */
        size_t sum = 0;
        for (unsigned b = 0; b < RADIX_SIZE; b++) {
            size_t c = h[b];
            h[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[h[(src[i] >> shift) & (RADIX_SIZE - 1)]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    free(tmp);
    free(hist);
}

/* ---------------------------------------------------------------- bit I/O, LSB first */

typedef struct bitw {
    uint8_t *out;
    uint64_t acc;
    unsigned n; /* bits in acc, < 32 between calls */
} bitw;

/* Appends the cnt (<= 32) low bits of v; whole 32-bit words go out little-endian. */
static inline void bw_put(bitw *w, uint64_t v, unsigned cnt) {
    v &= (UINT64_C(1) << cnt) - 1;
    w->acc |= v << w->n; /* n < 32 and cnt <= 32: fits in 64 bits */
    w->n += cnt;
    if (w->n >= 32) {
        ckpt_st32(w->out, (uint32_t)w->acc);
        w->out += 4;
        w->acc >>= 32;
        w->n -= 32;
    }
}

/* Writes the bits still in acc, the last byte zero-padded. */
static inline void bw_flush(bitw *w) {
    for (; w->n > 0; w->n = w->n > 8 ? w->n - 8 : 0) {
        *w->out++ = (uint8_t)w->acc;
        w->acc >>= 8;
    }
}

static inline void bw_put_wide(bitw *w, uint64_t v, unsigned cnt) { /* cnt <= 64 */
    if (cnt > 32) {
        bw_put(w, v, 32);
        bw_put(w, v >> 32, cnt - 32);
    } else {
        bw_put(w, v, cnt);
    }
}

typedef struct bitr {
    const uint8_t *p;
    size_t len, pos; /* bytes */
    uint64_t acc;
    unsigned n; /* bits in acc */
} bitr;

static inline void br_refill(bitr *r) {
    if (r->n <= 32 && r->len - r->pos >= 4) { /* a whole word while there is one */
        r->acc |= (uint64_t)ckpt_ld32(r->p + r->pos) << r->n;
        r->pos += 4;
        r->n += 32;
    }
    while (r->n <= 56 && r->pos < r->len) {
        r->acc |= (uint64_t)r->p[r->pos++] << r->n;
        r->n += 8;
    }
}

static inline bool br_get(bitr *r, unsigned cnt, uint64_t *v) { /* cnt <= 32 */
    br_refill(r);
    if (r->n < cnt) return false;
    *v = cnt ? r->acc & ((UINT64_C(1) << cnt) - 1) : 0;
    r->acc = cnt < 64 ? r->acc >> cnt : 0;
    r->n -= cnt;
    return true;
}

static inline bool br_get_wide(bitr *r, unsigned cnt, uint64_t *v) { /* cnt <= 64 */
    if (cnt <= 32) return br_get(r, cnt, v);
    uint64_t lo, hi;
    if (!br_get(r, 32, &lo) || !br_get(r, cnt - 32, &hi)) return false;
    *v = lo | hi << 32;
    return true;
}

/* Counts one-bits up to the terminating zero (consumed). False when the bits run out or the
 * count passes qmax. */
static inline bool br_unary(bitr *r, uint64_t qmax, uint64_t *q) {
    uint64_t c = 0;
    for (;;) {
        br_refill(r);
        if (r->n == 0) return false;
        uint64_t zeros = ~r->acc;
        if (r->n < 64) zeros &= (UINT64_C(1) << r->n) - 1;
        if (!zeros) { /* all n bits are ones */
            c += r->n;
            r->acc = 0;
            r->n = 0;
        } else {
            unsigned z = (unsigned)__builtin_ctzll(zeros);
            c += z;
            r->acc = z + 1 < 64 ? r->acc >> (z + 1) : 0;
            r->n -= z + 1;
            *q = c;
            return c <= qmax;
        }
        if (c > qmax) return false;
    }
}

/* ---------------------------------------------------------------- the codec */

void ckpt_put_fpset(ckpt_buf *b, uint64_t *fps, size_t n) {
    ckpt_put_varint(b, n);
    if (n == 0 || b->oom) return;
    sort_u64(fps, n);
    uint64_t q = fps[n - 1] / n;
    unsigned k = q ? 63u - (unsigned)__builtin_clzll(q) : 0;
    ckpt_put_u8(b, (uint8_t)k);
    /* n * (k + 1) bits of terminators and low bits, plus fewer than 2n unary ones (file
     * comment), plus the flush slack */
    size_t bytes = (n / 8 + 1) * (k + 1) + (size_t)((fps[n - 1] >> k) / 8) + 16;
    if (!ckpt_buf_reserve(b, bytes)) return;
    bitw w = {b->data + b->len, 0, 0};
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = fps[i] - prev, hi = d >> k;
        prev = fps[i];
        for (; hi >= 32; hi -= 32) bw_put(&w, UINT32_MAX, 32);
        bw_put(&w, (UINT64_C(1) << hi) - 1, (unsigned)hi + 1); /* hi ones, then a zero */
        bw_put_wide(&w, d, k);
    }
    bw_flush(&w);
    b->len = (size_t)(w.out - b->data);
}

bool ckpt_get_fpset(ckpt_cur *c, uint64_t **out, size_t *out_n) {
    uint64_t n = 0, *fps = NULL;
    uint8_t k = 0;
    *out = NULL;
    *out_n = 0;
    if (!ckpt_get_varint(c, &n)) return false;
    if (n == 0) {
        /* a valid empty set: *out stays NULL */
        return true;
    }
    if (!ckpt_get_u8(c, &k)) return false;
    if (k > 63) goto bad;
    size_t left = c->len - c->pos;
    /* each gap takes at least k + 1 bits: more than the bytes hold is a lie, refuse before
     * allocating anything */
    if (n > (uint64_t)left * 8 / (k + 1u)) goto bad;
    fps = malloc((size_t)n * sizeof *fps);
    if (!fps) goto bad;
    bitr r = {c->p + c->pos, left, 0, 0, 0};
    uint64_t v = 0, qmax = UINT64_MAX >> k;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t q, lo;
        if (!br_unary(&r, qmax, &q) || !br_get_wide(&r, k, &lo)) goto bad;
        uint64_t d = q << k | lo;
        if (v + d < v) goto bad; /* the values would wrap past 2^64 */
        v += d;
        fps[i] = v;
    }
    /* the padding bits of the last byte must be zero: the encoding is canonical */
    unsigned pad = r.n % 8;
    if (pad && (r.acc & ((UINT64_C(1) << pad) - 1))) goto bad;
    c->pos += r.pos - r.n / 8; /* bytes read ahead into acc go back */
    *out = fps;
    *out_n = (size_t)n;
    return true;
bad:
    free(fps);
    c->bad = true;
    return false;
}
