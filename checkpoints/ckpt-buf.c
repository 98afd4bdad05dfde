/* ckpt-buf.c - the section encoding tools: a growable byte buffer with sticky out-of-memory
 * (puts never fail one by one, so encoders stay linear code) and a bounds-checked cursor whose
 * failures are sticky too (decoders check once). Every get tests the bytes left before it
 * touches them: a cursor never reads outside [p, p + len). */
#include "ckpt-impl.h"

#include <stdlib.h>
#include <string.h>

char *ckpt_tag_str(uint32_t tag, char out[5]) {
    for (int i = 0; i < 4; i++) {
        char ch = (char)(tag >> (8 * i));
        out[i] = ch >= 0x20 && ch < 0x7f ? ch : '?';
    }
    out[4] = 0;
    return out;
}

void ckpt_buf_free(ckpt_buf *b) {
    if (!b) return;
    free(b->data);
    memset(b, 0, sizeof *b);
}

bool ckpt_buf_reserve(ckpt_buf *b, size_t n) {
    if (b->oom) return false;
    if (b->cap - b->len >= n) return true;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) cap *= 2; /* doubling: amortised O(1) a byte */
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void ckpt_put_bytes(ckpt_buf *b, const void *p, size_t n) {
    if (!n || !ckpt_buf_reserve(b, n)) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void ckpt_put_u8(ckpt_buf *b, uint8_t v) {
    ckpt_put_bytes(b, &v, 1);
}
void ckpt_put_u16(ckpt_buf *b, uint16_t v) {
    uint8_t t[2];
    ckpt_st16(t, v);
    ckpt_put_bytes(b, t, 2);
}
void ckpt_put_u32(ckpt_buf *b, uint32_t v) {
    uint8_t t[4];
    ckpt_st32(t, v);
    ckpt_put_bytes(b, t, 4);
}
void ckpt_put_u64(ckpt_buf *b, uint64_t v) {
    uint8_t t[8];
    ckpt_st64(t, v);
    ckpt_put_bytes(b, t, 8);
}
void ckpt_put_i64(ckpt_buf *b, int64_t v) {
    ckpt_put_u64(b, (uint64_t)v);
}
void ckpt_put_f64(ckpt_buf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    ckpt_put_u64(b, u);
}
void ckpt_put_varint(ckpt_buf *b, uint64_t v) {
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    ckpt_put_bytes(b, t, n);
}
void ckpt_put_str(ckpt_buf *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    ckpt_put_varint(b, n);
    ckpt_put_bytes(b, s, n);
}

/* ---------------------------------------------------------------- cursor */

/* n bytes at the cursor, or NULL (and the cursor bad) when fewer are left. */
static const uint8_t *take(ckpt_cur *c, size_t n) {
    if (c->bad || n > c->len - c->pos) {
        c->bad = true;
        return NULL;
    }
    const uint8_t *p = c->p + c->pos;
    c->pos += n;
    return p;
}

bool ckpt_get_u8(ckpt_cur *c, uint8_t *v) {
    const uint8_t *p = take(c, 1);
    *v = p ? p[0] : 0;
    return p != NULL;
}
bool ckpt_get_u16(ckpt_cur *c, uint16_t *v) {
    const uint8_t *p = take(c, 2);
    *v = p ? ckpt_ld16(p) : 0;
    return p != NULL;
}
bool ckpt_get_u32(ckpt_cur *c, uint32_t *v) {
    const uint8_t *p = take(c, 4);
    *v = p ? ckpt_ld32(p) : 0;
    return p != NULL;
}
bool ckpt_get_u64(ckpt_cur *c, uint64_t *v) {
    const uint8_t *p = take(c, 8);
    *v = p ? ckpt_ld64(p) : 0;
    return p != NULL;
}
bool ckpt_get_i64(ckpt_cur *c, int64_t *v) {
    uint64_t u;
    bool ok = ckpt_get_u64(c, &u);
    *v = (int64_t)u;
    return ok;
}
bool ckpt_get_f64(ckpt_cur *c, double *v) {
    uint64_t u;
    bool ok = ckpt_get_u64(c, &u);
    memcpy(v, &u, 8);
    return ok;
}

bool ckpt_get_varint(ckpt_cur *c, uint64_t *v) {
    uint64_t x = 0;
    *v = 0;
    for (int i = 0; i < 10; i++) {
        const uint8_t *p = take(c, 1);
        if (!p) return false;
        /* the 10th byte holds bit 63 only: anything more would overflow */
        if (i == 9 && *p > 1) break;
        x |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            *v = x;
            return true;
        }
    }
    c->bad = true;
    return false;
}

bool ckpt_get_bytes(ckpt_cur *c, size_t n, const uint8_t **p) {
    *p = take(c, n);
    return *p != NULL;
}

bool ckpt_get_str(ckpt_cur *c, const char **s, size_t *n) {
    uint64_t len;
    const uint8_t *p = NULL;
    *s = NULL;
    *n = 0;
    if (!ckpt_get_varint(c, &len)) return false;
    if (len > c->len - c->pos) { /* before the size_t cast: a 64-bit length on any host */
        c->bad = true;
        return false;
    }
    if (!ckpt_get_bytes(c, (size_t)len, &p)) return false;
    *s = (const char *)p;
    *n = (size_t)len;
    return true;
}
