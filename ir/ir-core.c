/* ir-core.c - status strings, diagnostics, dtypes, shapes, blobs and hashing: the vocabulary
 * every other file of magpie speaks. */
#include "ir-impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const char *ir_status_to_string(ir_status s) {
    switch (s) {
    case IR_OK: return "ok";
    case IR_ERR_IO: return "I/O error";
    case IR_ERR_PARSE: return "parse error";
    case IR_ERR_INVALID: return "invalid model";
    case IR_ERR_UNSUPPORTED: return "unsupported";
    case IR_ERR_SHAPE: return "shape error";
    case IR_ERR_NOMEM: return "out of memory";
    case IR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

ir_status ir_diag_set(ir_diag *d, ir_status st, const char *fmt, ...) {
    if (d) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

void ir_diag_prefix(ir_diag *d, const char *prefix) {
    if (!d || !prefix) return;
    size_t pl = strlen(prefix);
    if (strncmp(d->msg, prefix, pl) == 0 && d->msg[pl] == ':') return;
    char tmp[sizeof d->msg];
    memcpy(tmp, d->msg, sizeof tmp);
    int n = snprintf(d->msg, sizeof d->msg, "%.200s: ", prefix);
    if (n > 0 && (size_t)n < sizeof d->msg)
        snprintf(d->msg + n, sizeof d->msg - (size_t)n, "%.*s", (int)(sizeof d->msg) - n - 1, tmp);
}

ir_status ir_node_fail(ir_diag *d, ir_status st, const ir_node *n, const char *fmt, ...) {
    if (!d) return st;
    int off = snprintf(d->msg, sizeof d->msg, "node '%s' (%s): ", n->name, n->op_type);
    if (off < 0 || (size_t)off >= sizeof d->msg) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg + off, sizeof d->msg - (size_t)off, fmt, ap);
    va_end(ap);
    return st;
}

_Noreturn void ir_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "magpie: internal error: %s:%d: assertion '%s' failed\n", file, line, expr);
    abort();
}

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
    int onnx;
} dtype_info[IR_DTYPE_COUNT] = {
    [IR_F32] = {"float32", 4, 1},  [IR_F16] = {"float16", 2, 10}, [IR_BF16] = {"bfloat16", 2, 16},
    [IR_F64] = {"float64", 8, 11}, [IR_I64] = {"int64", 8, 7},    [IR_I32] = {"int32", 4, 6},
    [IR_I8] = {"int8", 1, 3},      [IR_U8] = {"uint8", 1, 2},     [IR_BOOL] = {"bool", 1, 9},
    [IR_I16] = {"int16", 2, 5},    [IR_U16] = {"uint16", 2, 4},   [IR_U32] = {"uint32", 4, 12},
    [IR_U64] = {"uint64", 8, 13},
};

size_t ir_dtype_size(ir_dtype t) {
    return (t >= 0 && t < IR_DTYPE_COUNT) ? dtype_info[t].size : 0;
}
const char *ir_dtype_name(ir_dtype t) {
    return (t >= 0 && t < IR_DTYPE_COUNT) ? dtype_info[t].name : "none";
}
bool ir_dtype_is_float(ir_dtype t) {
    return t == IR_F32 || t == IR_F16 || t == IR_BF16 || t == IR_F64;
}
int ir_dtype_to_onnx(ir_dtype t) {
    return (t >= 0 && t < IR_DTYPE_COUNT) ? dtype_info[t].onnx : 0;
}
ir_dtype ir_dtype_from_onnx(int onnx_type) {
    for (int t = 0; t < IR_DTYPE_COUNT; t++)
        if (dtype_info[t].onnx == onnx_type) return (ir_dtype)t;
    return IR_DTYPE_NONE;
}

float ir_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ir_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* round to nearest even */
    return (uint16_t)h;
}

float ir_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ir_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double ir_load_f64(const void *buf, ir_dtype t, int64_t i) {
    switch (t) {
    case IR_F32: return ((const float *)buf)[i];
    case IR_F16: return ir_f16_to_f32(((const uint16_t *)buf)[i]);
    case IR_BF16: return ir_bf16_to_f32(((const uint16_t *)buf)[i]);
    case IR_F64: return ((const double *)buf)[i];
    case IR_I64: return (double)((const int64_t *)buf)[i];
    case IR_I32: return ((const int32_t *)buf)[i];
    case IR_I8: return ((const int8_t *)buf)[i];
    case IR_U8: return ((const uint8_t *)buf)[i];
    case IR_I16: return ((const int16_t *)buf)[i];
    case IR_U16: return ((const uint16_t *)buf)[i];
    case IR_U32: return ((const uint32_t *)buf)[i];
    case IR_U64: return (double)((const uint64_t *)buf)[i];
    case IR_BOOL: return ((const uint8_t *)buf)[i] != 0;
    default: return 0;
    }
}

int64_t ir_load_i64(const void *buf, ir_dtype t, int64_t i) {
    switch (t) {
    case IR_I64: return ((const int64_t *)buf)[i];
    case IR_I32: return ((const int32_t *)buf)[i];
    case IR_I8: return ((const int8_t *)buf)[i];
    case IR_U8: return ((const uint8_t *)buf)[i];
    case IR_I16: return ((const int16_t *)buf)[i];
    case IR_U16: return ((const uint16_t *)buf)[i];
    case IR_U32: return ((const uint32_t *)buf)[i];
    case IR_U64: return (int64_t)((const uint64_t *)buf)[i]; /* wraps above INT64_MAX */
    case IR_BOOL: return ((const uint8_t *)buf)[i] != 0;
    default: return (int64_t)ir_load_f64(buf, t, i);
    }
}

/* Float to integer saturates to int64 (never traps), then narrows as C does. */
void ir_store_f64(void *buf, ir_dtype t, int64_t i, double v) {
    switch (t) {
    case IR_F32: ((float *)buf)[i] = (float)v; break;
    case IR_F16: ((uint16_t *)buf)[i] = ir_f32_to_f16((float)v); break;
    case IR_BF16: ((uint16_t *)buf)[i] = ir_f32_to_bf16((float)v); break;
    case IR_F64: ((double *)buf)[i] = v; break;
    case IR_I64: ((int64_t *)buf)[i] = ir_sat_i64(v); break;
    case IR_I32: ((int32_t *)buf)[i] = (int32_t)ir_sat_i64(v); break;
    case IR_I8: ((int8_t *)buf)[i] = (int8_t)ir_sat_i64(v); break;
    case IR_U8: ((uint8_t *)buf)[i] = (uint8_t)ir_sat_i64(v); break;
    case IR_I16: ((int16_t *)buf)[i] = (int16_t)ir_sat_i64(v); break;
    case IR_U16: ((uint16_t *)buf)[i] = (uint16_t)ir_sat_i64(v); break;
    case IR_U32: ((uint32_t *)buf)[i] = (uint32_t)ir_sat_i64(v); break;
    case IR_U64: /* values at or above 2^63 do not fit int64 */
        ((uint64_t *)buf)[i] =
            v >= 0x1p63 ? (v < 0x1p64 ? (uint64_t)v : UINT64_MAX) : (uint64_t)ir_sat_i64(v);
        break;
    case IR_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
    default: break;
    }
}

/* ---------------------------------------------------------------- shapes */

int64_t ir_shape_numel(const ir_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

bool ir_shape_eq(const ir_shape *a, const ir_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

ir_shape ir_shape_make(int rank, const int64_t *dims) {
    ir_shape s = {0};
    IR_ASSERT(rank >= 0 && rank <= IR_MAX_RANK);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}

char *ir_shape_str(const ir_shape *s, char *buf, size_t n) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, n - off, "[");
    for (int i = 0; i < s->rank && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (off < n) snprintf(buf + off, n - off, "]");
    return buf;
}

bool ir_shape_broadcast(const ir_shape *a, const ir_shape *b, ir_shape *out) {
    ir_shape r = {0};
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

void ir_shape_strides(const ir_shape *s, int64_t *strides) {
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i];
    }
}

void ir_broadcast_strides(const ir_shape *in, const ir_shape *out, int64_t *strides) {
    int64_t st = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        int j = in->rank - out->rank + i;
        if (j >= 0 && in->dims[j] != 1) {
            strides[i] = st;
        } else {
            strides[i] = 0;
        }
        if (j >= 0) st *= in->dims[j];
    }
}

/* ---------------------------------------------------------------- blobs */

struct ir_blob {
    atomic_int refs;
    size_t bytes;
    void *data;
};

ir_blob *ir_blob_new(size_t bytes) {
    ir_blob *b = malloc(sizeof *b);
    if (!b) return NULL;
    size_t padded = (bytes + 63) & ~(size_t)63;
    b->data = aligned_alloc(64, padded ? padded : 64);
    if (!b->data) {
        free(b);
        return NULL;
    }
    memset(b->data, 0, padded ? padded : 64);
    atomic_init(&b->refs, 1);
    b->bytes = bytes;
    return b;
}

ir_blob *ir_blob_ref(ir_blob *b) {
    /* relaxed: taking a reference needs no ordering, the caller already holds one */
    if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void ir_blob_unref(ir_blob *b) {
    if (!b) return;
    /* acq_rel: the last owner must see every other owner's writes before freeing */
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        free(b->data);
        free(b);
    }
}

void *ir_blob_data(ir_blob *b) {
    return b->data;
}
size_t ir_blob_bytes(const ir_blob *b) {
    return b->bytes;
}

/* ---------------------------------------------------------------- hashing */

uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed) {
    /* FNV-1a over 8-byte words, finished with a strong mixer: fast and well distributed. */
    const unsigned char *c = p;
    uint64_t h = seed ^ 0xcbf29ce484222325ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ULL;
    return ir_mix64(h ^ n);
}

double ir_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ir_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
