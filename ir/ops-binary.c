/* ops-binary.c - broadcasting element-wise ops: arithmetic (Add Sub Mul Div Pow Mod), the
 * variadic Sum/Min/Max, comparisons (bool out), logic (bool in and out) and Where.
 *
 * One broadcast engine (ew_*) serves every op. It views each operand through broadcast strides,
 * drops size-1 dims and merges adjacent dims that every operand walks contiguously, so that the
 * common cases (same shape, scalar operand, bias row [N,C]+[C], per-channel [N,C,H,W]*[1,C,1,1])
 * become a short odometer over rows around one contiguous inner loop whose per-operand stride is
 * 0 or 1. Inner loops are generated per (op, dtype) so that the compiler vectorizes them.
 *
 * Dtypes: float32/float64, float16/bfloat16 (computed in float32, rounded once on the store, as
 * onnxruntime's CPU kernels do), the signed and unsigned integers of 8 to 64 bits; And/Or/Xor
 * bool; Equal bool too.
 *
 * Semantics (ONNX opsets 13-23):
 *  - integer Div truncates toward zero; integer Mod with fmod=0 takes the sign of the divisor
 *    (Python), fmod=1 the sign of the dividend (C); float Mod requires fmod=1 (ONNX's rule);
 *  - an integer divisor of zero is IR_ERR_INVALID (checked before computing); INT_MIN / -1 and
 *    integer Add/Sub/Mul overflow wrap instead of trapping;
 *  - Min/Max propagate NaN;
 *  - integer Pow with a negative exponent is 0 (1 or -1 for a base of 1 or -1); when Pow's
 *    exponent dtype differs from the base's, it is first converted to the base dtype in the
 *    workspace.
 * FLOP convention: 1 per output element and per pairwise step (Sum/Min/Max of n inputs count
 * n-1), comparisons, logic and Where included; Pow counts IR_FLOPS_TRANSCENDENTAL. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

/* Inner loops are IR_SIMD: none carries a dependence (in-place Sum writes o[i] after reading a[i]
 * at the same index only). */

/* ---------------------------------------------------------------- the broadcast engine */

#define EW_MAX_OPS 3

/* Computes `rows` runs of n contiguous output elements each (the output advances n per run,
 * operand k advances os[k]). Within a run s[k] is 0 (operand k repeats its element) or 1
 * (operand k advances with the output). Walking rows inside the loop keeps short rows, such as
 * [N,3]+[3], from paying a call and an odometer step per row. */
typedef void (*ew_row_fn)(char *o, const char *const *p, const int64_t *s, int64_t n, int64_t rows,
                          const int64_t *os);

typedef struct ew_plan {
    int rank, nops;
    int64_t dims[IR_MAX_RANK];
    int64_t st[EW_MAX_OPS][IR_MAX_RANK]; /* element strides of each operand, 0 = broadcast */
    size_t esz[EW_MAX_OPS], osz;
    const char *base[EW_MAX_OPS];
    char *out;
    int64_t total;
} ew_plan;

static void ew_plan_init(ew_plan *pl, const ir_tensor *out, int nops, const ir_tensor *const *ops) {
    const ir_shape *os = &out->shape;
    int64_t st[EW_MAX_OPS][IR_MAX_RANK];
    for (int k = 0; k < nops; k++) ir_broadcast_strides(&ops[k]->shape, os, st[k]);
    pl->nops = nops;
    pl->out = out->data;
    pl->osz = ir_dtype_size(out->dtype);
    pl->total = ir_shape_numel(os);
    for (int k = 0; k < nops; k++) {
        pl->base[k] = ops[k]->data;
        pl->esz[k] = ir_dtype_size(ops[k]->dtype);
    }
    /* Drop size-1 dims, then merge dim d into the previous kept one when every operand's stride
     * there equals its stride at d times dims[d] (the output is contiguous, so it always fits). */
    int r = 0;
    for (int d = 0; d < os->rank; d++) {
        if (os->dims[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < nops && merge; k++) merge = pl->st[k][r - 1] == st[k][d] * os->dims[d];
        if (merge) {
            pl->dims[r - 1] *= os->dims[d];
            for (int k = 0; k < nops; k++) pl->st[k][r - 1] = st[k][d];
        } else {
            pl->dims[r] = os->dims[d];
            for (int k = 0; k < nops; k++) pl->st[k][r] = st[k][d];
            r++;
        }
    }
    if (r == 0) { /* a single element */
        pl->dims[0] = 1;
        for (int k = 0; k < nops; k++) pl->st[k][0] = 0;
        r = 1;
    }
    pl->rank = r;
    for (int k = 0; k < nops; k++) IR_ASSERT(pl->st[k][r - 1] == 0 || pl->st[k][r - 1] == 1);
}

/* Output elements [lo, hi): one division to find the start, then an odometer over rows; whole
 * rows along the second-innermost dim go to the row function in one call. */
static void ew_range(const ew_plan *pl, ew_row_fn fn, int64_t lo, int64_t hi) {
    int r = pl->rank, nops = pl->nops;
    int64_t n = pl->dims[r - 1], row = lo / n, col = lo % n;
    int64_t idx[IR_MAX_RANK], off[EW_MAX_OPS] = {0}, s[EW_MAX_OPS], os[EW_MAX_OPS] = {0};
    for (int d = r - 2; d >= 0; d--) {
        idx[d] = row % pl->dims[d];
        row /= pl->dims[d];
        for (int k = 0; k < nops; k++) off[k] += idx[d] * pl->st[k][d];
    }
    for (int k = 0; k < nops; k++) {
        s[k] = pl->st[k][r - 1];
        if (r >= 2) os[k] = pl->st[k][r - 2];
    }
    while (lo < hi) {
        int64_t len = n - col < hi - lo ? n - col : hi - lo, rows = 1;
        if (col == 0 && r >= 2 && hi - lo >= 2 * n) {
            rows = pl->dims[r - 2] - idx[r - 2];
            if (rows > (hi - lo) / n) rows = (hi - lo) / n;
        }
        const char *p[EW_MAX_OPS];
        for (int k = 0; k < nops; k++)
            p[k] = pl->base[k] + (size_t)(off[k] + col * s[k]) * pl->esz[k];
        fn(pl->out + (size_t)lo * pl->osz, p, s, len, rows, os);
        lo += len * rows;
        col = 0;
        if (r < 2) break; /* a single row */
        /* Advance the odometer by `rows` at dim r-2 (never past its end), then carry. */
        idx[r - 2] += rows;
        for (int k = 0; k < nops; k++) off[k] += rows * pl->st[k][r - 2];
        for (int d = r - 2; d >= 0 && idx[d] == pl->dims[d]; d--) {
            for (int k = 0; k < nops; k++) off[k] -= pl->st[k][d] * pl->dims[d];
            idx[d] = 0;
            if (d == 0) break;
            idx[d - 1]++;
            for (int k = 0; k < nops; k++) off[k] += pl->st[k][d - 1];
        }
    }
}

/* Splits the output into chunks (boundaries rounded to 16 elements to keep vector loops
 * aligned) and runs them in parallel when the work is big enough. */
static void ew_run(const ir_tensor *out, int nops, const ir_tensor *const *ops, ew_row_fn fn) {
    ew_plan pl;
    ew_plan_init(&pl, out, nops, ops);
    if (pl.total == 0) return;
    int64_t nch = pl.total / (IR_PAR_MIN / 2);
    if (nch < 1) nch = 1;
    if (nch > 64) nch = 64;
    IR_PARALLEL_FOR(nch > 1)
    for (int64_t c = 0; c < nch; c++) {
        int64_t lo = c == 0 ? 0 : (pl.total * c / nch) & ~(int64_t)15;
        int64_t hi = c == nch - 1 ? pl.total : (pl.total * (c + 1) / nch) & ~(int64_t)15;
        if (lo < hi) ew_range(&pl, fn, lo, hi);
    }
}

/* ---------------------------------------------------------------- scalar semantics */

/* Integer arithmetic wraps (through unsigned) rather than invoking undefined behaviour; 8- and
 * 16-bit operands would promote to int, whose product of two uint16 can overflow, so they go
 * through uint32 too. */
#define WRAP_OP(x, y, OP)                                                                          \
    _Generic((x), int64_t                                                                          \
             : (int64_t)((uint64_t)(x)OP(uint64_t)(y)), int32_t                                    \
             : (int32_t)((uint32_t)(x)OP(uint32_t)(y)), int16_t                                    \
             : (int16_t)((uint32_t)(x)OP(uint32_t)(y)), uint16_t                                   \
             : (uint16_t)((uint32_t)(x)OP(uint32_t)(y)), int8_t                                    \
             : (int8_t)((uint32_t)(x)OP(uint32_t)(y)), uint8_t                                     \
             : (uint8_t)((uint32_t)(x)OP(uint32_t)(y)), default                                    \
             : (x)OP(y))

/* UT: the unsigned type the arithmetic wraps in (at least 32 bits, see WRAP_OP). */
#define DEF_INT_HELPERS(tag, T, UT)                                                                \
    static inline T div_##tag(T x, T y) {                                                          \
        if (y == 0) return 0; /* rejected before the kernel runs; never trap */                    \
        if (y == -1) return (T)(0u - (UT)x);                                                       \
        return (T)(x / y);                                                                         \
    }                                                                                              \
    static inline T cmod_##tag(T x, T y) {                                                         \
        return (y == 0 || y == -1) ? 0 : (T)(x % y);                                               \
    }                                                                                              \
    static inline T pymod_##tag(T x, T y) {                                                        \
        T r = cmod_##tag(x, y);                                                                    \
        return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r;                                  \
    }                                                                                              \
    static inline T pow_##tag(T x, T y) {                                                          \
        if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;                           \
        UT r = 1, b = (UT)x;                                                                       \
        for (; y; y >>= 1, b *= b)                                                                 \
            if (y & 1) r *= b;                                                                     \
        return (T)r;                                                                               \
    }
DEF_INT_HELPERS(i64, int64_t, uint64_t)
DEF_INT_HELPERS(i32, int32_t, uint32_t)
DEF_INT_HELPERS(i16, int16_t, uint32_t)
DEF_INT_HELPERS(i8, int8_t, uint32_t)

/* Unsigned: no negative divisor, so both Mods are C's remainder. */
#define DEF_UINT_HELPERS(tag, T, UT)                                                               \
    static inline T div_##tag(T x, T y) {                                                          \
        return y == 0 ? 0 : (T)(x / y);                                                            \
    }                                                                                              \
    static inline T cmod_##tag(T x, T y) {                                                         \
        return y == 0 ? 0 : (T)(x % y);                                                            \
    }                                                                                              \
    static inline T pow_##tag(T x, T y) {                                                          \
        UT r = 1, b = (UT)x;                                                                       \
        for (; y; y >>= 1, b *= b)                                                                 \
            if (y & 1) r *= b;                                                                     \
        return (T)r;                                                                               \
    }
DEF_UINT_HELPERS(u64, uint64_t, uint64_t)
DEF_UINT_HELPERS(u32, uint32_t, uint32_t)
DEF_UINT_HELPERS(u16, uint16_t, uint32_t)
DEF_UINT_HELPERS(u8, uint8_t, uint32_t)

static inline int isnan_f(float x) {
    return isnan(x);
}
static inline int isnan_d(double x) {
    return isnan(x);
}
static inline int isnan_never(int64_t x) {
    return 0;
}
#define ISNANX(x) _Generic((x), float : isnan_f, double : isnan_d, default : isnan_never)(x)

#define INT_GENERIC(x, fn)                                                                         \
    int64_t:                                                                                       \
    fn##_i64, int32_t : fn##_i32,                                                                  \
                        int16_t : fn##_i16,                                                        \
                                  int8_t : fn##_i8,                                                \
                                           uint64_t : fn##_u64,                                    \
                                                      uint32_t : fn##_u32,                         \
                                                                 uint16_t : fn##_u16,              \
                                                                            uint8_t : fn##_u8
#define DIVX(x, y) _Generic((x), INT_GENERIC(x, div), float : fdiv_f, default : fdiv_d)(x, y)
#define CMODX(x, y) _Generic((x), INT_GENERIC(x, cmod), float : fmodf, default : fmod)(x, y)
#define PYMODX(x, y)                                                                               \
    _Generic((x), int64_t                                                                          \
             : pymod_i64, int32_t                                                                  \
             : pymod_i32, int16_t                                                                  \
             : pymod_i16, int8_t                                                                   \
             : pymod_i8, uint64_t                                                                  \
             : cmod_u64, uint32_t                                                                  \
             : cmod_u32, uint16_t                                                                  \
             : cmod_u16, default                                                                   \
             : cmod_u8)(x, y)
#define POWX(x, y) _Generic((x), INT_GENERIC(x, pow), float : pow_f, default : pow_d)(x, y)
/* Squaring is what exported LayerNorms and MSE losses do with Pow: x*x is the same correctly
 * rounded result as pow(x, 2) without the libm call. */
static inline float pow_f(float x, float y) {
    return y == 2.0f ? x * x : powf(x, y);
}
static inline double pow_d(double x, double y) {
    return y == 2.0 ? x * x : pow(x, y);
}
#define MINX(x, y) (((x) < (y) || ISNANX(x)) ? (x) : (y))
#define MAXX(x, y) (((x) > (y) || ISNANX(x)) ? (x) : (y))
static inline float fdiv_f(float x, float y) {
    return x / y;
}
static inline double fdiv_d(double x, double y) {
    return x / y;
}

/* ---------------------------------------------------------------- generated inner loops */

/* One inner loop per stride combination, so that each is a plain vectorizable loop. Elements of
 * storage type T load as TC (LD) and the result is stored as TO (ST): float16 and bfloat16 load
 * to float32, compute there and round once on the store, as onnxruntime's CPU kernels do. */
#define BIN_ROWX(fname, T, TC, TO, LD, ST, EXPR)                                                   \
    static void fname(char *o_, const char *const *p, const int64_t *s, int64_t n, int64_t rows,   \
                      const int64_t *os) {                                                         \
        TO *o = (TO *)o_;                                                                          \
        const T *a = (const T *)p[0], *b = (const T *)p[1];                                        \
        for (int64_t r = 0; r < rows; r++, o += n, a += os[0], b += os[1]) {                       \
            if (s[0] && s[1]) {                                                                    \
                IR_SIMD for (int64_t i = 0; i < n; i++) {                                          \
                    TC x = LD(a[i]), y = LD(b[i]);                                                 \
                    o[i] = ST(EXPR);                                                               \
                }                                                                                  \
            } else if (s[0]) {                                                                     \
                const TC y = LD(b[0]);                                                             \
                IR_SIMD for (int64_t i = 0; i < n; i++) {                                          \
                    TC x = LD(a[i]);                                                               \
                    o[i] = ST(EXPR);                                                               \
                }                                                                                  \
            } else if (s[1]) {                                                                     \
                const TC x = LD(a[0]);                                                             \
                IR_SIMD for (int64_t i = 0; i < n; i++) {                                          \
                    TC y = LD(b[i]);                                                               \
                    o[i] = ST(EXPR);                                                               \
                }                                                                                  \
            } else {                                                                               \
                const TC x = LD(a[0]), y = LD(b[0]);                                               \
                const TO v = ST(EXPR);                                                             \
                IR_SIMD for (int64_t i = 0; i < n; i++) o[i] = v;                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define LD_SAME(v) (v)
#define BIN_ROW(fname, T, TO, EXPR) BIN_ROWX(fname, T, T, TO, LD_SAME, (TO), EXPR)
#define ST_F16(v) ir_f32_to_f16((float)(v))
#define ST_BF16(v) ir_f32_to_bf16((float)(v))

/* NUM: every numeric dtype with the input dtype out; CMP: the same dtypes with bool out. */
#define BIN_NUM(op, EXPR)                                                                          \
    BIN_ROW(row_##op##_f32, float, float, EXPR)                                                    \
    BIN_ROW(row_##op##_f64, double, double, EXPR)                                                  \
    BIN_ROWX(row_##op##_f16, uint16_t, float, uint16_t, ir_f16_to_f32, ST_F16, EXPR)               \
    BIN_ROWX(row_##op##_bf16, uint16_t, float, uint16_t, ir_bf16_to_f32, ST_BF16, EXPR)            \
    BIN_INT_ROWS(op, EXPR, int64_t, int32_t, int16_t, int8_t, uint64_t, uint32_t, uint16_t, uint8_t)
#define BIN_CMP(op, EXPR)                                                                          \
    BIN_ROW(row_##op##_f32, float, uint8_t, EXPR)                                                  \
    BIN_ROW(row_##op##_f64, double, uint8_t, EXPR)                                                 \
    BIN_ROWX(row_##op##_f16, uint16_t, float, uint8_t, ir_f16_to_f32, (uint8_t), EXPR)             \
    BIN_ROWX(row_##op##_bf16, uint16_t, float, uint8_t, ir_bf16_to_f32, (uint8_t), EXPR)           \
    BIN_INT_ROWS(op, EXPR, uint8_t, uint8_t, uint8_t, uint8_t, uint8_t, uint8_t, uint8_t, uint8_t)
/* The eight integer rows; the output types name each input type's (NUM) or bool (CMP). */
#define BIN_INT_ROWS(op, EXPR, O64, O32, O16, O8, OU64, OU32, OU16, OU8)                           \
    BIN_ROW(row_##op##_i64, int64_t, O64, EXPR)                                                    \
    BIN_ROW(row_##op##_i32, int32_t, O32, EXPR)                                                    \
    BIN_ROW(row_##op##_i16, int16_t, O16, EXPR)                                                    \
    BIN_ROW(row_##op##_i8, int8_t, O8, EXPR)                                                       \
    BIN_ROW(row_##op##_u64, uint64_t, OU64, EXPR)                                                  \
    BIN_ROW(row_##op##_u32, uint32_t, OU32, EXPR)                                                  \
    BIN_ROW(row_##op##_u16, uint16_t, OU16, EXPR)                                                  \
    BIN_ROW(row_##op##_u8, uint8_t, OU8, EXPR)
#define INT_FNS(op)                                                                                \
    [IR_I64] = row_##op##_i64, [IR_I32] = row_##op##_i32, [IR_I16] = row_##op##_i16,               \
    [IR_I8] = row_##op##_i8, [IR_U64] = row_##op##_u64, [IR_U32] = row_##op##_u32,                 \
    [IR_U16] = row_##op##_u16, [IR_U8] = row_##op##_u8
#define NUM_FNS(op)                                                                                \
    {                                                                                              \
        [IR_F32] = row_##op##_f32, [IR_F64] = row_##op##_f64, [IR_F16] = row_##op##_f16,           \
        [IR_BF16] = row_##op##_bf16, INT_FNS(op)                                                   \
    }

BIN_NUM(add, WRAP_OP(x, y, +))
BIN_NUM(sub, WRAP_OP(x, y, -))
BIN_NUM(mul, WRAP_OP(x, y, *))
BIN_NUM(div, DIVX(x, y))
BIN_NUM(pow, POWX(x, y))
BIN_NUM(cmod, CMODX(x, y))
BIN_INT_ROWS(pymod, PYMODX(x, y), int64_t, int32_t, int16_t, int8_t, uint64_t, uint32_t, uint16_t,
             uint8_t)
BIN_NUM(min, MINX(x, y))
BIN_NUM(max, MAXX(x, y))
BIN_CMP(eq, x == y)
BIN_ROW(row_eq_bool, uint8_t, uint8_t, (x != 0) == (y != 0))
BIN_CMP(lt, x < y)
BIN_CMP(le, x <= y)
BIN_CMP(gt, x > y)
BIN_CMP(ge, x >= y)
BIN_ROW(row_and_bool, uint8_t, uint8_t, (x != 0) & (y != 0))
BIN_ROW(row_or_bool, uint8_t, uint8_t, (x != 0) | (y != 0))
BIN_ROW(row_xor_bool, uint8_t, uint8_t, (x != 0) ^ (y != 0))

/* Where selects whole elements, so one loop per element size serves every dtype. */
#define WHERE_ROW(bits)                                                                            \
    static void where_##bits(char *o_, const char *const *p, const int64_t *s, int64_t n,          \
                             int64_t rows, const int64_t *os) {                                    \
        typedef uint##bits##_t E;                                                                  \
        E *o = (E *)o_;                                                                            \
        const uint8_t *c = (const uint8_t *)p[0];                                                  \
        const E *x = (const E *)p[1], *y = (const E *)p[2];                                        \
        const int64_t sc = s[0], sx = s[1], sy = s[2];                                             \
        for (int64_t r = 0; r < rows; r++, o += n, c += os[0], x += os[1], y += os[2]) {           \
            if (sc && sx && sy) {                                                                  \
                IR_SIMD for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];                 \
            } else {                                                                               \
                for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];          \
            }                                                                                      \
        }                                                                                          \
    }
WHERE_ROW(8)
WHERE_ROW(16)
WHERE_ROW(32)
WHERE_ROW(64)

/* ---------------------------------------------------------------- op descriptors */

typedef enum bin_kind { BK_ARITH, BK_VARIADIC, BK_CMP, BK_LOGIC, BK_WHERE } bin_kind;

typedef struct bin_desc {
    bin_kind kind;
    bool int_div; /* integer divisor zero is an error */
    double flops; /* per output element (per pairwise step for variadic ops) */
    ew_row_fn fns[IR_DTYPE_COUNT];
} bin_desc;

static const bin_desc d_add = {BK_ARITH, false, 1, NUM_FNS(add)};
static const bin_desc d_sub = {BK_ARITH, false, 1, NUM_FNS(sub)};
static const bin_desc d_mul = {BK_ARITH, false, 1, NUM_FNS(mul)};
static const bin_desc d_div = {BK_ARITH, true, 1, NUM_FNS(div)};
static const bin_desc d_pow = {BK_ARITH, false, IR_FLOPS_TRANSCENDENTAL, NUM_FNS(pow)};
static const bin_desc d_cmod = {BK_ARITH, true, 1, NUM_FNS(cmod)};
static const bin_desc d_pymod = {BK_ARITH, true, 1, {INT_FNS(pymod)}};
static const bin_desc d_sum = {BK_VARIADIC, false, 1, NUM_FNS(add)};
static const bin_desc d_min = {BK_VARIADIC, false, 1, NUM_FNS(min)};
static const bin_desc d_max = {BK_VARIADIC, false, 1, NUM_FNS(max)};
static const bin_desc d_eq = {BK_CMP,
                              false,
                              1,
                              {[IR_F32] = row_eq_f32,
                               [IR_F64] = row_eq_f64,
                               [IR_F16] = row_eq_f16,
                               [IR_BF16] = row_eq_bf16,
                               INT_FNS(eq),
                               [IR_BOOL] = row_eq_bool}};
static const bin_desc d_lt = {BK_CMP, false, 1, NUM_FNS(lt)};
static const bin_desc d_le = {BK_CMP, false, 1, NUM_FNS(le)};
static const bin_desc d_gt = {BK_CMP, false, 1, NUM_FNS(gt)};
static const bin_desc d_ge = {BK_CMP, false, 1, NUM_FNS(ge)};
static const bin_desc d_and = {BK_LOGIC, false, 1, {[IR_BOOL] = row_and_bool}};
static const bin_desc d_or = {BK_LOGIC, false, 1, {[IR_BOOL] = row_or_bool}};
static const bin_desc d_xor = {BK_LOGIC, false, 1, {[IR_BOOL] = row_xor_bool}};
static const bin_desc d_where = {BK_WHERE, false, 1, {0}};

static const bin_desc *bin_desc_of(const ir_node *n) {
    switch (n->op) {
    case IR_OP_Add: return &d_add;
    case IR_OP_Sub: return &d_sub;
    case IR_OP_Mul: return &d_mul;
    case IR_OP_Div: return &d_div;
    case IR_OP_Pow: return &d_pow;
    case IR_OP_Mod: return ir_attr_int(n, "fmod", 0) ? &d_cmod : &d_pymod;
    case IR_OP_Sum: return &d_sum;
    case IR_OP_Min: return &d_min;
    case IR_OP_Max: return &d_max;
    case IR_OP_Equal: return &d_eq;
    case IR_OP_Less: return &d_lt;
    case IR_OP_LessOrEqual: return &d_le;
    case IR_OP_Greater: return &d_gt;
    case IR_OP_GreaterOrEqual: return &d_ge;
    case IR_OP_And: return &d_and;
    case IR_OP_Or: return &d_or;
    case IR_OP_Xor: return &d_xor;
    case IR_OP_Where: return &d_where;
    default: IR_ASSERT(!"not a binary op"); return NULL;
    }
}

/* ---------------------------------------------------------------- inference and counts */

static ir_status bin_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const bin_desc *bd = bin_desc_of(n);
    const ir_value *v0 = ir_node_in(g, n, 0);
    /* Where's condition is not the data dtype; Pow's exponent may differ from the base. */
    int first = bd->kind == BK_WHERE ? 1 : 0;
    ir_dtype dt = ir_node_in(g, n, first)->dtype;
    ir_shape shape = v0->shape;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        if (!v) return ir_node_fail(d, IR_ERR_INVALID, n, "input %d is missing", i);
        char sa[96], sb[96];
        if (!ir_shape_broadcast(&shape, &v->shape, &shape))
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "input shapes do not broadcast: %s and input %d ('%s') %s",
                                ir_shape_str(&shape, sa, sizeof sa), i, v->name,
                                ir_shape_str(&v->shape, sb, sizeof sb));
        if (i < first || (n->op == IR_OP_Pow && i == 1)) continue;
        if (v->dtype != dt)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d ('%s') is %s but input %d is %s", i,
                                v->name, ir_dtype_name(v->dtype), first, ir_dtype_name(dt));
    }
    if (bd->kind == BK_WHERE) {
        if (v0->dtype != IR_BOOL)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "condition is %s, not bool",
                                ir_dtype_name(v0->dtype));
        if (ir_dtype_size(dt) == 0)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s", ir_dtype_name(dt));
    } else if (!bd->fns[dt]) {
        if (n->op == IR_OP_Mod && ir_dtype_is_float(dt) && !ir_attr_int(n, "fmod", 0))
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "Mod of %s requires fmod=1 (ONNX defines fmod=0, the integer "
                                "modulus, for integer inputs only)",
                                ir_dtype_name(dt));
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s is not supported",
                            ir_dtype_name(dt));
    }
    if (n->op == IR_OP_Pow) {
        ir_dtype et = ir_node_in(g, n, 1)->dtype;
        if (!d_pow.fns[et])
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "exponent dtype %s is not supported",
                                ir_dtype_name(et));
    }
    ir_set_out(g, n, 0, bd->kind == BK_CMP ? IR_BOOL : dt, &shape);
    return IR_OK;
}

static double bin_flops(const ir_graph *g, const ir_node *n) {
    const bin_desc *bd = bin_desc_of(n);
    double steps = bd->kind == BK_VARIADIC ? n->n_in - 1 : 1;
    return bd->flops * steps * (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
}

/* Pow with an exponent of another dtype converts it to the base dtype first. */
static size_t pow_workspace(const ir_graph *g, const ir_node *n) {
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_in(g, n, 1);
    if (!x || !y || x->dtype == y->dtype) return 0;
    return (size_t)ir_shape_numel(&y->shape) * ir_dtype_size(x->dtype);
}

/* ---------------------------------------------------------------- kernels */

static bool has_zero(const ir_tensor *t) {
    int64_t n = ir_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (ir_load_i64(t->data, t->dtype, i) == 0) return true;
    return false;
}

static ir_status bin_kernel(const ir_kernel_ctx *k) {
    const bin_desc *bd = bin_desc_of(k->node);
    ir_tensor *out = &k->out[0];
    if (ir_tensor_numel(out) == 0) return IR_OK;
    if (bd->kind == BK_WHERE) {
        static const ew_row_fn by_size[9] = {
            [1] = where_8, [2] = where_16, [4] = where_32, [8] = where_64};
        const ir_tensor *ops[3] = {&k->in[0], &k->in[1], &k->in[2]};
        ew_run(out, 3, ops, by_size[ir_dtype_size(out->dtype)]);
        return IR_OK;
    }
    ir_dtype dt = k->in[0].dtype;
    ew_row_fn fn = bd->fns[dt];
    IR_ASSERT(fn);
    if (bd->kind == BK_VARIADIC) {
        if (k->n_in == 1) {
            memcpy(out->data, k->in[0].data, (size_t)ir_tensor_numel(out) * ir_dtype_size(dt));
            return IR_OK;
        }
        /* Pairwise into the output: out = in0 op in1, then out = out op in_i. */
        const ir_tensor *ops[2] = {&k->in[0], &k->in[1]};
        ew_run(out, 2, ops, fn);
        for (int i = 2; i < k->n_in; i++) {
            const ir_tensor *acc[2] = {out, &k->in[i]};
            ew_run(out, 2, acc, fn);
        }
        return IR_OK;
    }
    ir_tensor y = k->in[1];
    if (y.dtype != dt) { /* Pow's exponent: convert to the base dtype in the workspace */
        int64_t ny = ir_tensor_numel(&y);
        for (int64_t i = 0; i < ny; i++)
            ir_store_f64(k->workspace, dt, i, ir_load_f64(y.data, y.dtype, i));
        y.data = k->workspace;
        y.dtype = dt;
    }
    if (bd->int_div && !ir_dtype_is_float(dt) && has_zero(&y))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "integer division by zero");
    const ir_tensor *ops[2] = {&k->in[0], &y};
    ew_run(out, 2, ops, fn);
    return IR_OK;
}

/* ---------------------------------------------------------------- the op table entries */

#define BIN_DEF(name_, lo_in, hi_in, flags_, ws, ...)                                              \
    IR_OP_DEF(name_, lo_in, hi_in, 1, 1, .flags = IR_OPF_ELEMENTWISE | IR_OPF_FLOAT16 | (flags_),  \
              .infer = bin_infer, .flops = bin_flops, .workspace = ws, .kernel = bin_kernel,       \
              .dims = ir_dims_elementwise, __VA_ARGS__);

BIN_DEF(Add, 2, 2, IR_OPF_MULTILINEAR, NULL, .grad = ir_grad_Add)
BIN_DEF(Sub, 2, 2, IR_OPF_MULTILINEAR, NULL, .grad = ir_grad_Sub)
BIN_DEF(Mul, 2, 2, IR_OPF_MULTILINEAR, NULL, .grad = ir_grad_Mul)
BIN_DEF(Div, 2, 2, 0, NULL, .grad = ir_grad_Div)
BIN_DEF(Pow, 2, 2, 0, pow_workspace, .grad = ir_grad_Pow)
BIN_DEF(Mod, 2, 2, 0, NULL, .grad = ir_grad_Mod)
BIN_DEF(Sum, 1, 64, IR_OPF_MULTILINEAR, NULL, .grad = ir_grad_Sum)
BIN_DEF(Min, 1, 64, 0, NULL, .grad = ir_grad_Min)
BIN_DEF(Max, 1, 64, 0, NULL, .grad = ir_grad_Max)
BIN_DEF(Equal, 2, 2, 0, NULL)
BIN_DEF(Less, 2, 2, 0, NULL)
BIN_DEF(LessOrEqual, 2, 2, 0, NULL)
BIN_DEF(Greater, 2, 2, 0, NULL)
BIN_DEF(GreaterOrEqual, 2, 2, 0, NULL)
BIN_DEF(And, 2, 2, 0, NULL)
BIN_DEF(Or, 2, 2, 0, NULL)
BIN_DEF(Xor, 2, 2, 0, NULL)
BIN_DEF(Where, 3, 3, 0, NULL, .grad = ir_grad_Where)
