/* ops-unary.c - element-wise unary ops: activations and math (Relu ... Elu), Clip, Not,
 * Identity, Dropout, Cast and CastLike.
 *
 * Every op maps input element i to output element i of the same shape, so one chunked parallel
 * driver (un_run) calls a contiguous loop generated per (op, dtype). Parameters (alpha, beta,
 * Clip's bounds) arrive through un_prm and are converted to the element type once per loop.
 *
 * Semantics (ONNX opsets 13-23; Gelu from opset 20, approximate "none" or "tanh"; Round halves
 * to even; Selu's gamma rides in un_prm.b; IsNaN/IsInf read any float dtype and write bool):
 *  - Clip takes min/max as optional scalar inputs (constant or computed at run time); the opset
 *    6 attributes are honoured when the inputs are absent; min(max(x, lo), hi);
 *  - Dropout copies its input (mask all true) unless training_mode is true and ratio > 0; then
 *    element i is kept when a counter-based draw from (seed, node name, i) is >= ratio, so the
 *    mask is the same for every thread count, and kept elements are scaled by 1/(1-ratio);
 *  - Cast follows C conversions except that float to integer truncates and saturates (NaN to
 *    0) instead of trapping; integer narrowing wraps; anything non-zero to bool is true;
 *    float16/bfloat16 go through float32.
 * FLOP convention: 1 per element for simple ops, IR_FLOPS_TRANSCENDENTAL for those calling libm
 * exp/log/tanh/erf/sqrt; Identity and Cast move data and count 0. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

/* Loops are IR_SIMD: none carries a dependence. */

/* ---------------------------------------------------------------- the driver */

/* Op parameters; integer element types read the i* fields so int64 bounds stay exact. */
typedef struct un_prm {
    double a, b;
    int64_t ia, ib;
} un_prm;

typedef void (*un_fn)(void *o, const void *x, int64_t n, const un_prm *P);

/* Runs fn over n elements in chunks (64-byte aligned starts), in parallel when worth it. */
static void un_run(un_fn fn, void *out, size_t osz, const void *in, size_t isz, int64_t n,
                   const un_prm *P) {
    int64_t nch = n / (IR_PAR_MIN / 2);
    if (nch < 1) nch = 1;
    if (nch > 64) nch = 64;
    IR_PARALLEL_FOR(nch > 1)
    for (int64_t c = 0; c < nch; c++) {
        int64_t lo = c == 0 ? 0 : (n * c / nch) & ~(int64_t)63;
        int64_t hi = c == nch - 1 ? n : (n * (c + 1) / nch) & ~(int64_t)63;
        if (lo < hi)
            fn((char *)out + (size_t)lo * osz, (const char *)in + (size_t)lo * isz, hi - lo, P);
    }
}

/* ---------------------------------------------------------------- generated loops */

#define PRM(T, fld) _Generic((T)0, float : (T)P->fld, double : (T)P->fld, default : (T)P->i##fld)
#define EXPX(x) _Generic((x), float : expf, default : exp)(x)
#define EXPM1X(x) _Generic((x), float : expm1f, default : expm1)(x)
#define LOGX(x) _Generic((x), float : logf, default : log)(x)
#define LOG1PX(x) _Generic((x), float : log1pf, default : log1p)(x)
#define TANHX(x) _Generic((x), float : tanhf, default : tanh)(x)
#define ERFX(x) _Generic((x), float : erff, default : erf)(x)
#define SQRTX(x) _Generic((x), float : sqrtf, default : sqrt)(x)
#define FLOORX(x) _Generic((x), float : floorf, default : floor)(x)
#define CEILX(x) _Generic((x), float : ceilf, default : ceil)(x)
#define SINX(x) _Generic((x), float : sinf, default : sin)(x)
#define COSX(x) _Generic((x), float : cosf, default : cos)(x)
#define RINTX(x) _Generic((x), float : rintf, default : rint)(x)
#define FABSX(x) _Generic((x), float : fabsf, default : fabs)(x)
#define CLAMP01(v) ((v) < 0 ? 0 : (v) > 1 ? 1 : (v))
/* Integer negation wraps (INT_MIN stays INT_MIN) rather than overflowing; unsigned types wrap
 * modulo 2^bits (ONNX's Neg does not take them; Abs and Sign do, where x < 0 never holds). */
#define NEGX(x)                                                                                    \
    _Generic((x), int64_t                                                                          \
             : (int64_t)(0u - (uint64_t)(x)), uint64_t                                             \
             : (uint64_t)(0u - (uint64_t)(x)), float                                               \
             : -(x), double                                                                        \
             : -(x), default                                                                       \
             : (__typeof__(x))(0u - (uint32_t)(x)))

/* x < 0 without comparing an unsigned type with 0 (always false, and a warning). */
static inline bool isneg_s(int64_t v) {
    return v < 0;
}
static inline bool isneg_u(uint64_t v) {
    return false;
}
static inline bool isneg_f(float v) {
    return v < 0;
}
static inline bool isneg_d(double v) {
    return v < 0;
}
#define ISNEG(x)                                                                                   \
    _Generic((x), float                                                                            \
             : isneg_f, double                                                                     \
             : isneg_d, uint8_t                                                                    \
             : isneg_u, uint16_t                                                                   \
             : isneg_u, uint32_t                                                                   \
             : isneg_u, uint64_t                                                                   \
             : isneg_u, default                                                                    \
             : isneg_s)(x)

#define UN_ROW(fname, T, EXPR)                                                                     \
    static void fname(void *o_, const void *x_, int64_t n, const un_prm *P) {                      \
        T *o = o_;                                                                                 \
        const T *in = x_;                                                                          \
        const T A = PRM(T, a), B = PRM(T, b);                                                      \
        (void)A;                                                                                   \
        (void)B;                                                                                   \
        IR_SIMD for (int64_t i = 0; i < n; i++) {                                                  \
            const T x = in[i];                                                                     \
            o[i] = (T)(EXPR);                                                                      \
        }                                                                                          \
    }
/* float16/bfloat16: blocks widened to float32 on the stack, the float32 loop, rounded back once
 * per element (as onnxruntime's CPU kernels compute them). */
#define UN_ROW16(fname, f32fn, LD, ST)                                                             \
    static void fname(void *o_, const void *x_, int64_t n, const un_prm *P) {                      \
        uint16_t *o = o_;                                                                          \
        const uint16_t *in = x_;                                                                   \
        float xb[256], ob[256];                                                                    \
        for (int64_t i = 0; i < n; i += 256) {                                                     \
            int64_t m = n - i < 256 ? n - i : 256;                                                 \
            for (int64_t k = 0; k < m; k++) xb[k] = LD(in[i + k]);                                 \
            f32fn(ob, xb, m, P);                                                                   \
            for (int64_t k = 0; k < m; k++) o[i + k] = ST(ob[k]);                                  \
        }                                                                                          \
    }
#define UN_FLT(op, EXPR)                                                                           \
    UN_ROW(row_##op##_f32, float, EXPR)                                                            \
    UN_ROW(row_##op##_f64, double, EXPR)                                                           \
    UN_ROW16(row_##op##_f16, row_##op##_f32, ir_f16_to_f32, ir_f32_to_f16)                         \
    UN_ROW16(row_##op##_bf16, row_##op##_f32, ir_bf16_to_f32, ir_f32_to_bf16)
#define UN_NUM(op, EXPR)                                                                           \
    UN_FLT(op, EXPR)                                                                               \
    UN_ROW(row_##op##_i64, int64_t, EXPR)                                                          \
    UN_ROW(row_##op##_i32, int32_t, EXPR)                                                          \
    UN_ROW(row_##op##_i16, int16_t, EXPR)                                                          \
    UN_ROW(row_##op##_i8, int8_t, EXPR)                                                            \
    UN_ROW(row_##op##_u64, uint64_t, EXPR)                                                         \
    UN_ROW(row_##op##_u32, uint32_t, EXPR)                                                         \
    UN_ROW(row_##op##_u16, uint16_t, EXPR)                                                         \
    UN_ROW(row_##op##_u8, uint8_t, EXPR)
#define FLT_FNS(op)                                                                                \
    {                                                                                              \
        [IR_F32] = row_##op##_f32, [IR_F64] = row_##op##_f64, [IR_F16] = row_##op##_f16,           \
        [IR_BF16] = row_##op##_bf16                                                                \
    }
#define NUM_FNS(op)                                                                                \
    {                                                                                              \
        [IR_F32] = row_##op##_f32, [IR_F64] = row_##op##_f64, [IR_F16] = row_##op##_f16,           \
        [IR_BF16] = row_##op##_bf16, [IR_I64] = row_##op##_i64, [IR_I32] = row_##op##_i32,         \
        [IR_I16] = row_##op##_i16, [IR_I8] = row_##op##_i8, [IR_U64] = row_##op##_u64,             \
        [IR_U32] = row_##op##_u32, [IR_U16] = row_##op##_u16, [IR_U8] = row_##op##_u8              \
    }

UN_NUM(relu, ISNEG(x) ? 0 : x) /* keeps NaN, as PyTorch does */
UN_FLT(leaky, x < 0 ? A * x : x)
UN_FLT(sigmoid, 1 / (1 + EXPX(-x)))
UN_FLT(hsigmoid, CLAMP01(A *x + B))
UN_FLT(hswish, x *CLAMP01(x / 6 + 0.5f))
UN_FLT(tanh, TANHX(x))
UN_FLT(erf, ERFX(x))
UN_FLT(exp, EXPX(x))
UN_FLT(log, LOGX(x))
UN_FLT(sqrt, SQRTX(x))
UN_NUM(neg, NEGX(x))
UN_NUM(abs, ISNEG(x) ? NEGX(x) : x)
UN_FLT(recip, 1 / x)
UN_FLT(floor, FLOORX(x))
UN_FLT(ceil, CEILX(x))
UN_NUM(sign, x > 0 ? (__typeof__(x))1 : ISNEG(x) ? (__typeof__(x))-1 : x) /* keeps 0, -0 and NaN */
/* log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|). */
UN_FLT(softplus, (x > 0 ? x : 0) + LOG1PX(EXPX(x > 0 ? -x : x)))
UN_FLT(elu, x < 0 ? A * EXPM1X(x) : x)
/* min > max sets every value to max, as ONNX specifies (std::clamp's order: max last) */
UN_NUM(clip, (x > B || A > B) ? B : x < A ? A : x)
UN_ROW(row_not_bool, uint8_t, x == 0)
/* Gelu (opset 20): x * Phi(x) with the normal CDF through erf, or tanh's approximation. */
UN_FLT(gelu, 0.5f * x * (1 + ERFX(x * (__typeof__(x))0.70710678118654752440)))
UN_FLT(gelu_tanh, 0.5f * x *
                      (1 + TANHX((__typeof__(x))0.79788456080286535588 *
                                 (x + (__typeof__(x))0.044715 * x * x * x))))

UN_FLT(sin, SINX(x))
UN_FLT(cos, COSX(x))
UN_FLT(round, RINTX(x)) /* halves to even, as ONNX's Round (the default rounding mode) */
UN_FLT(softsign, x / (1 + FABSX(x)))
UN_FLT(selu, x > 0 ? B * x : B * A * EXPM1X(x)) /* A = alpha, B = gamma */
UN_FLT(celu, x > 0 ? x : A * EXPM1X(x / A))
/* x tanh(softplus(x)), softplus as above */
UN_FLT(mish, x *TANHX((x > 0 ? x : 0) + LOG1PX(EXPX(x > 0 ? -x : x))))

/* ---------------------------------------------------------------- math ops */

typedef struct un_desc {
    double flops;              /* per element */
    double alpha, beta;        /* attribute defaults */
    un_fn fns[IR_DTYPE_COUNT]; /* NULL: dtype unsupported */
} un_desc;

static const un_desc d_relu = {1, 0, 0, NUM_FNS(relu)};
static const un_desc d_leaky = {1, 0.01, 0, FLT_FNS(leaky)};
static const un_desc d_sigmoid = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(sigmoid)};
static const un_desc d_hsigmoid = {1, 0.2, 0.5, FLT_FNS(hsigmoid)};
static const un_desc d_hswish = {1, 0, 0, FLT_FNS(hswish)};
static const un_desc d_tanh = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(tanh)};
static const un_desc d_erf = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(erf)};
static const un_desc d_exp = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(exp)};
static const un_desc d_log = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(log)};
static const un_desc d_sqrt = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(sqrt)};
static const un_desc d_neg = {1, 0, 0, NUM_FNS(neg)};
static const un_desc d_abs = {1, 0, 0, NUM_FNS(abs)};
static const un_desc d_recip = {1, 0, 0, FLT_FNS(recip)};
static const un_desc d_floor = {1, 0, 0, FLT_FNS(floor)};
static const un_desc d_ceil = {1, 0, 0, FLT_FNS(ceil)};
static const un_desc d_sign = {1, 0, 0, NUM_FNS(sign)};
static const un_desc d_not = {1, 0, 0, {[IR_BOOL] = row_not_bool}};
static const un_desc d_softplus = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(softplus)};
static const un_desc d_elu = {IR_FLOPS_TRANSCENDENTAL, 1.0, 0, FLT_FNS(elu)};
static const un_desc d_clip = {1, 0, 0, NUM_FNS(clip)};
static const un_desc d_sin = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(sin)};
static const un_desc d_cos = {IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(cos)};
static const un_desc d_round = {1, 0, 0, FLT_FNS(round)};
static const un_desc d_softsign = {3, 0, 0, FLT_FNS(softsign)};
static const un_desc d_selu = {IR_FLOPS_TRANSCENDENTAL, 1.67326319217681884765625,
                               1.05070102214813232421875, FLT_FNS(selu)};
static const un_desc d_celu = {IR_FLOPS_TRANSCENDENTAL, 1.0, 0, FLT_FNS(celu)};
static const un_desc d_mish = {3 * IR_FLOPS_TRANSCENDENTAL, 0, 0, FLT_FNS(mish)};
static const un_desc d_gelu = {IR_FLOPS_TRANSCENDENTAL + 4, 0, 0, FLT_FNS(gelu)};
static const un_desc d_gelu_tanh = {IR_FLOPS_TRANSCENDENTAL + 7, 0, 0, FLT_FNS(gelu_tanh)};

/* Gelu's `approximate`: "none" (the default) or "tanh"; anything else is refused by its
 * inference, so the kernel and counts see only these two. */
static bool gelu_is_tanh(const ir_node *n) {
    return strcmp(ir_attr_str(n, "approximate", "none"), "tanh") == 0;
}

static const un_desc *un_desc_of(const ir_node *n) {
    switch (n->op) {
    case IR_OP_Relu: return &d_relu;
    case IR_OP_LeakyRelu: return &d_leaky;
    case IR_OP_Sigmoid: return &d_sigmoid;
    case IR_OP_HardSigmoid: return &d_hsigmoid;
    case IR_OP_HardSwish: return &d_hswish;
    case IR_OP_Tanh: return &d_tanh;
    case IR_OP_Erf: return &d_erf;
    case IR_OP_Exp: return &d_exp;
    case IR_OP_Log: return &d_log;
    case IR_OP_Sqrt: return &d_sqrt;
    case IR_OP_Neg: return &d_neg;
    case IR_OP_Abs: return &d_abs;
    case IR_OP_Reciprocal: return &d_recip;
    case IR_OP_Floor: return &d_floor;
    case IR_OP_Ceil: return &d_ceil;
    case IR_OP_Sign: return &d_sign;
    case IR_OP_Not: return &d_not;
    case IR_OP_Softplus: return &d_softplus;
    case IR_OP_Elu: return &d_elu;
    case IR_OP_Clip: return &d_clip;
    case IR_OP_Gelu: return gelu_is_tanh(n) ? &d_gelu_tanh : &d_gelu;
    case IR_OP_Sin: return &d_sin;
    case IR_OP_Cos: return &d_cos;
    case IR_OP_Round: return &d_round;
    case IR_OP_Softsign: return &d_softsign;
    case IR_OP_Selu: return &d_selu;
    case IR_OP_Celu: return &d_celu;
    case IR_OP_Mish: return &d_mish;
    default: IR_ASSERT(!"not a unary math op"); return NULL;
    }
}

/* Output 0 gets input 0's dtype and shape once the dtype is one the op implements. */
static ir_status un_infer_same(ir_graph *g, ir_node *n, const un_fn *fns, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (fns && !fns[x->dtype])
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s is not supported",
                            ir_dtype_name(x->dtype));
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static ir_status un_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const char *approx = ir_attr_str(n, "approximate", "none");
    if (n->op == IR_OP_Gelu && strcmp(approx, "none") && strcmp(approx, "tanh"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "approximate '%s' is neither 'none' nor 'tanh'",
                            approx);
    return un_infer_same(g, n, un_desc_of(n)->fns, d);
}

static double un_flops(const ir_graph *g, const ir_node *n) {
    return un_desc_of(n)->flops * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

/* One per element, for ops outside the un_desc table (IsNaN, IsInf). */
static double un_flops_any(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

static double zero_flops(const ir_graph *g, const ir_node *n) {
    return 0;
}

static void un_apply(un_fn fn, const ir_tensor *out, const ir_tensor *in, const un_prm *P) {
    size_t sz = ir_dtype_size(in->dtype);
    un_run(fn, out->data, sz, in->data, sz, ir_tensor_numel(in), P);
}

static ir_status un_kernel(const ir_kernel_ctx *k) {
    const un_desc *ud = un_desc_of(k->node);
    const char *b_name = k->node->op == IR_OP_Selu ? "gamma" : "beta";
    un_prm P = {.a = ir_attr_float(k->node, "alpha", (float)ud->alpha),
                .b = ir_attr_float(k->node, b_name, (float)ud->beta)};
    un_apply(ud->fns[k->in[0].dtype], &k->out[0], &k->in[0], &P);
    return IR_OK;
}

/* ---------------------------------------------------------------- Clip */

static ir_status clip_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    for (int i = 1; i < n->n_in; i++) {
        const ir_value *b = ir_node_in(g, n, i);
        if (!b) continue;
        if (b->dtype != x->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "bound %d ('%s') is %s, input is %s", i,
                                b->name, ir_dtype_name(b->dtype), ir_dtype_name(x->dtype));
        if (ir_shape_numel(&b->shape) != 1)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "bound %d ('%s') is not a scalar", i, b->name);
    }
    return un_infer_same(g, n, d_clip.fns, d);
}

/* One bound: the input when present, else the opset-6 attribute, else the dtype's extreme. */
static void clip_bound(const ir_kernel_ctx *k, int i, const char *attr, double *f, int64_t *v) {
    const ir_tensor *t = i < k->n_in ? &k->in[i] : NULL;
    if (t && t->data) {
        *f = ir_load_f64(t->data, t->dtype, 0);
        *v = ir_load_i64(t->data, t->dtype, 0);
    } else if (ir_attr_find(k->node, attr)) {
        *f = ir_attr_float(k->node, attr, 0);
        *v = ir_sat_i64(*f);
    }
}

static ir_status clip_kernel(const ir_kernel_ctx *k) {
    un_prm P = {.a = -INFINITY, .b = INFINITY, .ia = INT64_MIN, .ib = INT64_MAX};
    /* Without bounds, the dtype's own range (uint64's top converts from -1) */
    switch (k->in[0].dtype) {
    case IR_I32: P.ia = INT32_MIN, P.ib = INT32_MAX; break;
    case IR_I16: P.ia = INT16_MIN, P.ib = INT16_MAX; break;
    case IR_I8: P.ia = INT8_MIN, P.ib = INT8_MAX; break;
    case IR_U32: P.ia = 0, P.ib = UINT32_MAX; break;
    case IR_U16: P.ia = 0, P.ib = UINT16_MAX; break;
    case IR_U8: P.ia = 0, P.ib = UINT8_MAX; break;
    case IR_U64: P.ia = 0, P.ib = -1; break;
    default: break;
    }
    clip_bound(k, 1, "min", &P.a, &P.ia);
    clip_bound(k, 2, "max", &P.b, &P.ib);
    un_apply(d_clip.fns[k->in[0].dtype], &k->out[0], &k->in[0], &P);
    return IR_OK;
}

/* ---------------------------------------------------------------- IsNaN, IsInf */

/* Float in (float16 and bfloat16 too), bool out. IsInf's detect_negative / detect_positive
 * (default 1) pick which infinities count. */
static ir_status isclass_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (!ir_dtype_is_float(x->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s is not supported",
                            ir_dtype_name(x->dtype));
    ir_set_out(g, n, 0, IR_BOOL, &x->shape);
    return IR_OK;
}

static ir_status isclass_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    uint8_t *o = k->out[0].data;
    const int64_t n = ir_tensor_numel(x);
    const bool nan = k->node->op == IR_OP_IsNaN;
    const bool neg = ir_attr_int(k->node, "detect_negative", 1) != 0,
               pos = ir_attr_int(k->node, "detect_positive", 1) != 0;
    IR_PARALLEL_FOR(n >= IR_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        double v = ir_load_f64(x->data, x->dtype, i);
        o[i] = nan ? isnan(v) : isinf(v) && (v > 0 ? pos : neg);
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- Identity */

static ir_status ident_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return un_infer_same(g, n, NULL, d);
}

static ir_status ident_kernel(const ir_kernel_ctx *k) {
    memcpy(k->out[0].data, k->in[0].data,
           (size_t)ir_tensor_numel(&k->in[0]) * ir_dtype_size(k->in[0].dtype));
    return IR_OK;
}

/* ---------------------------------------------------------------- Cast */

/* Loads: f16/bf16 widen to float; bool reads as 0/1. Stores: float to integer truncates and
 * saturates, integer narrowing wraps (the C conversion), anything to bool tests non-zero. */
#define LD_f32(p, i) (p)[i]
#define LD_f64(p, i) (p)[i]
#define LD_i64(p, i) (p)[i]
#define LD_i32(p, i) (p)[i]
#define LD_i8(p, i) (p)[i]
#define LD_u8(p, i) (p)[i]
#define LD_i16(p, i) (p)[i]
#define LD_u16(p, i) (p)[i]
#define LD_u32(p, i) (p)[i]
#define LD_u64(p, i) (p)[i]
#define LD_b8(p, i) (uint8_t)((p)[i] != 0)
#define LD_f16(p, i) ir_f16_to_f32((p)[i])
#define LD_bf16(p, i) ir_bf16_to_f32((p)[i])

#define DEF_WRAP(tag, T)                                                                           \
    static inline T wrap_##tag(int64_t v) {                                                        \
        return (T)v;                                                                               \
    }
DEF_WRAP(i64, int64_t)
DEF_WRAP(i32, int32_t)
DEF_WRAP(i8, int8_t)
DEF_WRAP(u8, uint8_t)
DEF_WRAP(i16, int16_t)
DEF_WRAP(u16, uint16_t)
DEF_WRAP(u32, uint32_t)
DEF_WRAP(u64, uint64_t)
#define TOINT(tag, x)                                                                              \
    _Generic((x), float : ir_sat_##tag, double : ir_sat_##tag, default : wrap_##tag)(x)

#define ST_f32(x) (float)(x)
#define ST_f64(x) (double)(x)
#define ST_i64(x) TOINT(i64, x)
#define ST_i32(x) TOINT(i32, x)
#define ST_i8(x) TOINT(i8, x)
#define ST_u8(x) TOINT(u8, x)
#define ST_i16(x) TOINT(i16, x)
#define ST_u16(x) TOINT(u16, x)
#define ST_u32(x) TOINT(u32, x)
#define ST_u64(x) TOINT(u64, x)
#define ST_b8(x) (uint8_t)((x) != 0)
#define ST_f16(x) ir_f32_to_f16((float)(x))
#define ST_bf16(x) ir_f32_to_bf16((float)(x))

#define CAST_FN(s, ST_T, d, DT_T)                                                                  \
    static void cast_##s##_##d(void *o_, const void *x_, int64_t n, const un_prm *P) {             \
        DT_T *o = o_;                                                                              \
        const ST_T *x = x_;                                                                        \
        IR_SIMD for (int64_t i = 0; i < n; i++) o[i] = ST_##d(LD_##s(x, i));                       \
    }
/* Two macro names, since a macro does not expand inside its own expansion. */
#define CAST_TO_ALL(X, s, T)                                                                       \
    X(s, T, f32, float)                                                                            \
    X(s, T, f64, double)                                                                           \
    X(s, T, i64, int64_t)                                                                          \
    X(s, T, i32, int32_t)                                                                          \
    X(s, T, i8, int8_t)                                                                            \
    X(s, T, u8, uint8_t)                                                                           \
    X(s, T, i16, int16_t)                                                                          \
    X(s, T, u16, uint16_t)                                                                         \
    X(s, T, u32, uint32_t)                                                                         \
    X(s, T, u64, uint64_t)                                                                         \
    X(s, T, b8, uint8_t) X(s, T, f16, uint16_t) X(s, T, bf16, uint16_t)
#define CAST_FROM_ALL(X, Y)                                                                        \
    X(Y, f32, float)                                                                               \
    X(Y, f64, double)                                                                              \
    X(Y, i64, int64_t)                                                                             \
    X(Y, i32, int32_t)                                                                             \
    X(Y, i8, int8_t)                                                                               \
    X(Y, u8, uint8_t)                                                                              \
    X(Y, i16, int16_t)                                                                             \
    X(Y, u16, uint16_t)                                                                            \
    X(Y, u32, uint32_t)                                                                            \
    X(Y, u64, uint64_t) X(Y, b8, uint8_t) X(Y, f16, uint16_t) X(Y, bf16, uint16_t)

CAST_FROM_ALL(CAST_TO_ALL, CAST_FN)

#define TAG_f32 IR_F32
#define TAG_f64 IR_F64
#define TAG_i64 IR_I64
#define TAG_i32 IR_I32
#define TAG_i8 IR_I8
#define TAG_u8 IR_U8
#define TAG_i16 IR_I16
#define TAG_u16 IR_U16
#define TAG_u32 IR_U32
#define TAG_u64 IR_U64
#define TAG_b8 IR_BOOL
#define TAG_f16 IR_F16
#define TAG_bf16 IR_BF16
#define CAST_ENTRY(s, ST_T, d, DT_T) [TAG_##s][TAG_##d] = cast_##s##_##d,
static const un_fn cast_fns[IR_DTYPE_COUNT][IR_DTYPE_COUNT] = {
    CAST_FROM_ALL(CAST_TO_ALL, CAST_ENTRY)};

static ir_status cast_to(ir_graph *g, ir_node *n, ir_dtype to, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (to < 0 || to >= IR_DTYPE_COUNT || x->dtype < 0 || x->dtype >= IR_DTYPE_COUNT)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "cast from %s is not supported",
                            ir_dtype_name(x->dtype));
    ir_set_out(g, n, 0, to, &x->shape);
    return IR_OK;
}

static ir_status cast_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_attr *a = ir_attr_find(n, "to");
    if (!a || a->type != IR_ATTR_INT)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute 'to' is missing");
    ir_dtype to = ir_dtype_from_onnx((int)a->i);
    if (to == IR_DTYPE_NONE)
        return ir_node_fail(
            d, IR_ERR_UNSUPPORTED, n, "cast to ONNX dtype %lld is not supported%s", (long long)a->i,
            a->i >= 17 && a->i <= 26 ? " (float8, int4, float4 and e8m0 types are out of scope)"
                                     : "");
    return cast_to(g, n, to, d);
}

static ir_status castlike_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return cast_to(g, n, ir_node_in(g, n, 1)->dtype, d);
}

static ir_status cast_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *o = &k->out[0];
    if (x->dtype == o->dtype) return ident_kernel(k);
    un_run(cast_fns[x->dtype][o->dtype], o->data, ir_dtype_size(o->dtype), x->data,
           ir_dtype_size(x->dtype), ir_tensor_numel(x), NULL);
    return IR_OK;
}

/* ---------------------------------------------------------------- Dropout */

static ir_status dropout_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *r = ir_node_in(g, n, 1), *t = ir_node_in(g, n, 2);
    if (!ir_dtype_is_float(x->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s is not supported",
                            ir_dtype_name(x->dtype));
    if (r && (!ir_dtype_is_float(r->dtype) || ir_shape_numel(&r->shape) != 1))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "ratio ('%s') must be a float scalar", r->name);
    if (t && (t->dtype != IR_BOOL || ir_shape_numel(&t->shape) != 1))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "training_mode ('%s') must be a bool scalar",
                            t->name);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    if (ir_node_out(g, n, 1)) ir_set_out(g, n, 1, IR_BOOL, &x->shape);
    return IR_OK;
}

static double dropout_flops(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

/* Element i is kept when its draw, uniform in [0, 1), is >= ratio. Counter-based: the draw
 * depends only on (key, i), never on which thread computes it. */
static inline bool dropout_keep(uint64_t key, int64_t i, double ratio) {
    uint64_t u = ir_mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
    return (double)(u >> 11) * 0x1p-53 >= ratio;
}

#define DROPOUT_ROW(T)                                                                             \
    static void dropout_##T(T *o, const T *x, uint8_t *mask, int64_t lo, int64_t hi, uint64_t key, \
                            double ratio) {                                                        \
        const T scale = (T)(1.0 / (1.0 - ratio));                                                  \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            bool keep = dropout_keep(key, i, ratio);                                               \
            o[i] = keep ? x[i] * scale : (T)0;                                                     \
            if (mask) mask[i] = keep;                                                              \
        }                                                                                          \
    }
DROPOUT_ROW(float)
DROPOUT_ROW(double)

static ir_status dropout_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    const ir_tensor *tr = k->n_in > 2 ? &k->in[2] : NULL, *rt = k->n_in > 1 ? &k->in[1] : NULL;
    uint8_t *mask = k->n_out > 1 ? k->out[1].data : NULL;
    int64_t n = ir_tensor_numel(x);
    bool training = tr && tr->data && ((const uint8_t *)tr->data)[0];
    double ratio = rt && rt->data ? ir_load_f64(rt->data, rt->dtype, 0)
                                  : ir_attr_float(k->node, "ratio", 0.5f);
    if (training && !(ratio >= 0 && ratio < 1))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node,
                            "ratio %g is outside [0, 1) in training mode", ratio);
    if (!training || ratio == 0) {
        ident_kernel(k);
        if (mask) memset(mask, 1, (size_t)n);
        return IR_OK;
    }
    if (x->dtype != IR_F32 && x->dtype != IR_F64)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "training-mode dropout of %s is not supported",
                            ir_dtype_name(x->dtype));
    const char *name = k->node->name;
    uint64_t key = ir_hash_bytes(name, strlen(name), k->seed);
    int64_t nch = n / (IR_PAR_MIN / 4);
    if (nch < 1) nch = 1;
    if (nch > 64) nch = 64;
    IR_PARALLEL_FOR(nch > 1)
    for (int64_t c = 0; c < nch; c++) {
        int64_t lo = n * c / nch, hi = n * (c + 1) / nch;
        if (x->dtype == IR_F32)
            dropout_float(k->out[0].data, x->data, mask, lo, hi, key, ratio);
        else
            dropout_double(k->out[0].data, x->data, mask, lo, hi, key, ratio);
    }
    return IR_OK;
}

/* True when the Dropout node is provably an identity: training_mode absent or a constant false,
 * or a constant ratio of 0 (what PyTorch's training-mode export of Dropout(p=0) writes). */
static bool dropout_is_identity(const ir_graph *g, const ir_node *n) {
    const ir_value *rt = ir_node_in(g, n, 1), *tr = ir_node_in(g, n, 2);
    bool identity = !tr || (ir_value_data(tr) && !((const uint8_t *)ir_value_data(tr))[0]);
    if (!identity && ir_value_data(tr)) {
        bool have_ratio = !rt || ir_value_data(rt);
        double ratio = rt ? (have_ratio ? ir_load_f64(ir_value_data(rt), rt->dtype, 0) : 1)
                          : ir_attr_float(n, "ratio", 0.5f);
        identity = have_ratio && ratio == 0;
    }
    return identity;
}

bool ir_node_draws_random(const ir_graph *g, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !(def->flags & IR_OPF_RANDOM)) return false;
    return !(n->op == IR_OP_Dropout && dropout_is_identity(g, n));
}

/* Dims: element i of the output (and of the mask) comes from element i of X, except in training
 * mode, where the mask is drawn from the flat index i and the node name: a part of a split node
 * would draw other masks. So the links exist only when the node is provably an identity. */
static int dropout_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    return dropout_is_identity(g, n) ? ir_dims_first_input(g, n, l) : 0;
}

/* ---------------------------------------------------------------- the op table entries */

/* Every op maps element i of X to element i of the output (the other inputs are scalar bounds or,
 * for CastLike, a dtype): dims_ is ir_dims_first_input but for Dropout. */
#define UN_DEF(name_, lo_in, hi_in, hi_out, flags_, infer_, flops_, kernel_, dims_, ...)           \
    IR_OP_DEF(name_, lo_in, hi_in, 1, hi_out, .flags = IR_OPF_ELEMENTWISE | (flags_),              \
              .infer = infer_, .flops = flops_, .kernel = kernel_, .dims = dims_, __VA_ARGS__);
#define UN_MATH(name_, flags_, ...)                                                                \
    UN_DEF(name_, 1, 1, 1, IR_OPF_FLOAT16 | (flags_), un_infer, un_flops, un_kernel,               \
           ir_dims_first_input, __VA_ARGS__)

UN_MATH(Relu, 0, .grad = ir_grad_Relu)
UN_MATH(LeakyRelu, 0, .grad = ir_grad_LeakyRelu)
UN_MATH(Sigmoid, 0, .grad = ir_grad_Sigmoid)
UN_MATH(HardSigmoid, 0, .grad = ir_grad_HardSigmoid)
UN_MATH(HardSwish, 0, .grad = ir_grad_HardSwish)
UN_MATH(Tanh, 0, .grad = ir_grad_Tanh)
UN_MATH(Erf, 0, .grad = ir_grad_Erf)
UN_MATH(Exp, 0, .grad = ir_grad_Exp)
UN_MATH(Log, 0, .grad = ir_grad_Log)
UN_MATH(Sqrt, 0, .grad = ir_grad_Sqrt)
UN_MATH(Neg, IR_OPF_MULTILINEAR, .grad = ir_grad_Neg)
UN_MATH(Abs, 0, .grad = ir_grad_Abs)
UN_MATH(Reciprocal, 0, .grad = ir_grad_Reciprocal)
UN_MATH(Floor, 0, .grad = ir_grad_Floor)
UN_MATH(Ceil, 0, .grad = ir_grad_Ceil)
UN_MATH(Sign, 0, .grad = ir_grad_Sign)
UN_MATH(Not, 0)
UN_MATH(Softplus, 0, .grad = ir_grad_Softplus)
UN_MATH(Elu, 0, .grad = ir_grad_Elu)
UN_MATH(Gelu, 0, .grad = ir_grad_Gelu)
UN_MATH(Sin, 0, .grad = ir_grad_Sin)
UN_MATH(Cos, 0, .grad = ir_grad_Cos)
UN_MATH(Round, 0, .grad = ir_grad_Round)
UN_MATH(Softsign, 0, .grad = ir_grad_Softsign)
UN_MATH(Selu, 0, .grad = ir_grad_Selu)
UN_MATH(Celu, 0, .grad = ir_grad_Celu)
UN_MATH(Mish, 0, .grad = ir_grad_Mish)
UN_DEF(IsNaN, 1, 1, 1, IR_OPF_FLOAT16, isclass_infer, un_flops_any, isclass_kernel,
       ir_dims_first_input)
UN_DEF(IsInf, 1, 1, 1, IR_OPF_FLOAT16, isclass_infer, un_flops_any, isclass_kernel,
       ir_dims_first_input)
UN_DEF(Clip, 1, 3, 1, IR_OPF_FLOAT16, clip_infer, un_flops, clip_kernel, ir_dims_first_input,
       .grad = ir_grad_Clip)
UN_DEF(Identity, 1, 1, 1, IR_OPF_MULTILINEAR | IR_OPF_FLOAT16, ident_infer, zero_flops,
       ident_kernel, ir_dims_first_input, .grad = ir_grad_Identity)
UN_DEF(Dropout, 1, 3, 2, IR_OPF_RANDOM, dropout_infer, dropout_flops, dropout_kernel, dropout_dims,
       .grad = ir_grad_Dropout)
UN_DEF(Cast, 1, 1, 1, IR_OPF_FLOAT16, cast_infer, zero_flops, cast_kernel, ir_dims_first_input,
       .grad = ir_grad_Cast)
UN_DEF(CastLike, 2, 2, 1, IR_OPF_FLOAT16, castlike_infer, zero_flops, cast_kernel,
       ir_dims_first_input, .grad = ir_grad_CastLike)
