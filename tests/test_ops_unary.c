/* test_ops_unary.c - element-wise unary ops (ops-unary.c) against libm references computed in
 * double here; Clip with and without bounds; every Cast pair plus float16/bfloat16 round trips
 * and saturation; CastLike; Dropout in inference and training mode (determinism across thread
 * counts, keep rate, scaling). */
#include "test-util.h"

#include "ir-impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef double (*ref_fn)(double x, double a, double b);

static double r_relu(double x, double a, double b) {
    return x < 0 ? 0 : x;
}
static double r_leaky(double x, double a, double b) {
    return x < 0 ? a * x : x;
}
static double r_sigmoid(double x, double a, double b) {
    return 1 / (1 + exp(-x));
}
static double r_hsigmoid(double x, double a, double b) {
    return fmax(0, fmin(1, a * x + b));
}
static double r_hswish(double x, double a, double b) {
    return x * fmax(0, fmin(1, x / 6 + 0.5));
}
static double r_tanh(double x, double a, double b) {
    return tanh(x);
}
static double r_erf(double x, double a, double b) {
    return erf(x);
}
static double r_exp(double x, double a, double b) {
    return exp(x);
}
static double r_log(double x, double a, double b) {
    return log(x);
}
static double r_sqrt(double x, double a, double b) {
    return sqrt(x);
}
static double r_neg(double x, double a, double b) {
    return -x;
}
static double r_abs(double x, double a, double b) {
    return fabs(x);
}
static double r_recip(double x, double a, double b) {
    return 1 / x;
}
static double r_floor(double x, double a, double b) {
    return floor(x);
}
static double r_ceil(double x, double a, double b) {
    return ceil(x);
}
static double r_sign(double x, double a, double b) {
    return x > 0 ? 1 : x < 0 ? -1 : 0;
}
static double r_softplus(double x, double a, double b) {
    return log(exp(x) + 1);
}
static double r_elu(double x, double a, double b) {
    return x < 0 ? a * (exp(x) - 1) : x;
}

static double r_gelu(double x, double a, double b) {
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double r_sin(double x, double a, double b) {
    return sin(x);
}
static double r_cos(double x, double a, double b) {
    return cos(x);
}
static double r_round(double x, double a, double b) {
    return nearbyint(x);
}
static double r_softsign(double x, double a, double b) {
    return x / (1 + fabs(x));
}
static double r_selu(double x, double a, double b) {
    return x > 0 ? b * x : b * a * (exp(x) - 1);
}
static double r_celu(double x, double a, double b) {
    return x > 0 ? x : a * (exp(x / a) - 1);
}
static double r_mish(double x, double a, double b) {
    return x * tanh(log1p(exp(x)));
}

typedef struct math_case {
    ir_op_kind op;
    ref_fn ref;
    bool positive; /* domain x > 0 */
    double a, b;   /* attributes alpha, beta when set */
    int n_attrs;
} math_case;

static const math_case math_cases[] = {
    {IR_OP_Relu, r_relu, false, 0, 0, 0},
    {IR_OP_LeakyRelu, r_leaky, false, 0.01, 0, 0}, /* default alpha */
    {IR_OP_LeakyRelu, r_leaky, false, 0.3, 0, 1},
    {IR_OP_Sigmoid, r_sigmoid, false, 0, 0, 0},
    {IR_OP_HardSigmoid, r_hsigmoid, false, 0.2, 0.5, 0},
    {IR_OP_HardSigmoid, r_hsigmoid, false, 0.4, 0.25, 2},
    {IR_OP_HardSwish, r_hswish, false, 0, 0, 0},
    {IR_OP_Tanh, r_tanh, false, 0, 0, 0},
    {IR_OP_Erf, r_erf, false, 0, 0, 0},
    {IR_OP_Exp, r_exp, false, 0, 0, 0},
    {IR_OP_Log, r_log, true, 0, 0, 0},
    {IR_OP_Sqrt, r_sqrt, true, 0, 0, 0},
    {IR_OP_Neg, r_neg, false, 0, 0, 0},
    {IR_OP_Abs, r_abs, false, 0, 0, 0},
    {IR_OP_Reciprocal, r_recip, true, 0, 0, 0},
    {IR_OP_Floor, r_floor, false, 0, 0, 0},
    {IR_OP_Ceil, r_ceil, false, 0, 0, 0},
    {IR_OP_Sign, r_sign, false, 0, 0, 0},
    {IR_OP_Softplus, r_softplus, false, 0, 0, 0},
    {IR_OP_Elu, r_elu, false, 1.0, 0, 0},
    {IR_OP_Elu, r_elu, false, 0.5, 0, 1},
    {IR_OP_Gelu, r_gelu, false, 0, 0, 0},
    {IR_OP_Sin, r_sin, false, 0, 0, 0},
    {IR_OP_Cos, r_cos, false, 0, 0, 0},
    {IR_OP_Round, r_round, false, 0, 0, 0},
    {IR_OP_Softsign, r_softsign, false, 0, 0, 0},
    {IR_OP_Selu, r_selu, false, 1.67326319217681884765625, 1.05070102214813232421875, 0},
    {IR_OP_Celu, r_celu, false, 1.0, 0, 0},
    {IR_OP_Celu, r_celu, false, 0.5, 0, 1},
    {IR_OP_Mish, r_mish, false, 0, 0, 0},
};

/* Inputs in [-8, 8) (or (0, 8]) so that activations see both saturated and linear regions. */
static void fill_domain(float *x, int64_t n, bool positive, uint64_t seed) {
    tu_fill(x, n, seed);
    for (int64_t i = 0; i < n; i++) x[i] = positive ? fabsf(x[i]) * 8 + 1e-3f : x[i] * 8;
    if (!positive && n > 3) x[0] = 0, x[1] = -3, x[2] = 3; /* kinks of HardSwish/HardSigmoid */
}

static void test_math_f32(void **state) {
    const int64_t sizes[] = {1000, 150001}; /* the second runs in parallel chunks */
    for (size_t c = 0; c < sizeof math_cases / sizeof math_cases[0]; c++) {
        const math_case *mc = &math_cases[c];
        for (int s = 0; s < 2; s++) {
            int64_t n = sizes[s];
            float *x = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4);
            fill_domain(x, n, mc->positive, c + 1);
            ir_attr attrs[2] = {tu_attr_float("alpha", (float)mc->a),
                                tu_attr_float("beta", (float)mc->b)};
            tu_in in = {IR_F32, tu_shape_arr(&n, 1), x, false};
            ir_tensor out[1];
            ir_diag d;
            assert_int_equal(tu_run_op(mc->op, 1, &in, 1, mc->n_attrs, attrs, out, &d), IR_OK);
            assert_int_equal(out[0].dtype, IR_F32);
            assert_true(ir_shape_eq(&out[0].shape, &in.shape));
            for (int64_t i = 0; i < n; i++)
                ref[i] = (float)mc->ref(x[i], (float)mc->a, (float)mc->b);
            double err = tu_rel_err_f32(out[0].data, ref, n);
            if (err > 2e-7) fprintf(stderr, "%s: rel err %g\n", ir_op_name(mc->op), err);
            assert_true(err <= 2e-7);
            tu_free_outputs(1, out);
            free(x);
            free(ref);
        }
    }
}

static void test_math_f64(void **state) {
    enum { N = 257 };
    for (size_t c = 0; c < sizeof math_cases / sizeof math_cases[0]; c++) {
        const math_case *mc = &math_cases[c];
        float xf[N];
        double x[N];
        fill_domain(xf, N, mc->positive, 100 + c);
        for (int i = 0; i < N; i++) x[i] = xf[i];
        ir_attr attrs[2] = {tu_attr_float("alpha", (float)mc->a),
                            tu_attr_float("beta", (float)mc->b)};
        tu_in in = {IR_F64, TU_SHAPE(N), x, false};
        ir_tensor out[1];
        ir_diag d;
        assert_int_equal(tu_run_op(mc->op, 1, &in, 1, mc->n_attrs, attrs, out, &d), IR_OK);
        assert_int_equal(out[0].dtype, IR_F64);
        const double *o = out[0].data;
        for (int i = 0; i < N; i++) {
            double r = mc->ref(x[i], (float)mc->a, (float)mc->b);
            assert_true(fabs(o[i] - r) <= 1e-12 * fmax(1, fabs(r)));
        }
        tu_free_outputs(1, out);
    }
}

static void test_int_and_bool(void **state) {
    const int64_t x[] = {-5, 0, 7, INT64_MIN};
    struct {
        ir_op_kind op;
        int64_t want[4];
    } cases[] = {{IR_OP_Neg, {5, 0, -7, INT64_MIN}},
                 {IR_OP_Abs, {5, 0, 7, INT64_MIN}}, /* wraps, does not trap */
                 {IR_OP_Sign, {-1, 0, 1, -1}},
                 {IR_OP_Relu, {0, 0, 7, 0}},
                 {IR_OP_Identity, {-5, 0, 7, INT64_MIN}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tu_in in = {IR_I64, TU_SHAPE(4), x, false};
        ir_tensor out[1];
        ir_diag d;
        assert_int_equal(tu_run_op(cases[c].op, 1, &in, 1, 0, NULL, out, &d), IR_OK);
        assert_int_equal(out[0].dtype, IR_I64);
        assert_memory_equal(out[0].data, cases[c].want, sizeof cases[c].want);
        tu_free_outputs(1, out);
    }
    const int32_t x32[] = {-5, 3};
    tu_in in32 = {IR_I32, TU_SHAPE(2), x32, false};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Neg, 1, &in32, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((int32_t[]){5, -3}), 8);
    tu_free_outputs(1, out);
    const uint8_t b[] = {0, 1, 1, 0};
    tu_in bin = {IR_BOOL, TU_SHAPE(2, 2), b, false};
    assert_int_equal(tu_run_op(IR_OP_Not, 1, &bin, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_BOOL);
    assert_memory_equal(out[0].data, ((uint8_t[]){1, 0, 0, 1}), 4);
    tu_free_outputs(1, out);
    /* Identity copies any dtype. */
    const uint16_t h[] = {0x3c00, 0xc000};
    tu_in hin = {IR_F16, TU_SHAPE(2), h, false};
    assert_int_equal(tu_run_op(IR_OP_Identity, 1, &hin, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F16);
    assert_memory_equal(out[0].data, h, sizeof h);
    tu_free_outputs(1, out);
    /* Unsupported dtypes are named. */
    tu_in iin = {IR_I64, TU_SHAPE(4), x, false};
    assert_int_equal(tu_run_op(IR_OP_Exp, 1, &iin, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "int64"));
    assert_int_equal(tu_run_op(IR_OP_Not, 1, &iin, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
    const uint8_t bools[] = {1, 0};
    tu_in boolin = {IR_BOOL, TU_SHAPE(2), bools, false};
    assert_int_equal(tu_run_op(IR_OP_Sqrt, 1, &boolin, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "bool"));
}

static void test_clip(void **state) {
    const float x[] = {-3, -1, 0, 0.5f, 2, 9};
    const float lo[] = {-1.5f}, hi[] = {1};
    ir_tensor out[1];
    ir_diag d;
    /* No bounds: a copy. */
    tu_in none[1] = {{IR_F32, TU_SHAPE(6), x, false}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 1, none, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, x, sizeof x);
    tu_free_outputs(1, out);
    /* Both bounds, constant and computed at run time. */
    for (int constant = 0; constant < 2; constant++) {
        tu_in both[3] = {{IR_F32, TU_SHAPE(6), x, false},
                         {IR_F32, TU_SCALAR_SHAPE, lo, constant},
                         {IR_F32, TU_SCALAR_SHAPE, hi, constant}};
        assert_int_equal(tu_run_op(IR_OP_Clip, 3, both, 1, 0, NULL, out, &d), IR_OK);
        assert_memory_equal(out[0].data, ((float[]){-1.5f, -1, 0, 0.5f, 1, 1}), sizeof x);
        tu_free_outputs(1, out);
    }
    /* Only max (min omitted), only min. */
    tu_in only_max[3] = {{IR_F32, TU_SHAPE(6), x, false},
                         {IR_F32, TU_SCALAR_SHAPE, NULL, false},
                         {IR_F32, TU_SCALAR_SHAPE, hi, true}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 3, only_max, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((float[]){-3, -1, 0, 0.5f, 1, 1}), sizeof x);
    tu_free_outputs(1, out);
    tu_in only_min[2] = {{IR_F32, TU_SHAPE(6), x, false}, {IR_F32, TU_SHAPE(1), lo, false}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 2, only_min, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((float[]){-1.5f, -1, 0, 0.5f, 2, 9}), sizeof x);
    tu_free_outputs(1, out);
    /* int64, with bounds beyond double precision. */
    const int64_t xi[] = {INT64_MIN, -4, 0, 5, INT64_MAX};
    const int64_t ilo[] = {-3}, ihi[] = {INT64_MAX - 1};
    tu_in iin[3] = {{IR_I64, TU_SHAPE(5), xi, false},
                    {IR_I64, TU_SCALAR_SHAPE, ilo, true},
                    {IR_I64, TU_SCALAR_SHAPE, ihi, true}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 3, iin, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((int64_t[]){-3, -3, 0, 5, INT64_MAX - 1}), 40);
    tu_free_outputs(1, out);
    tu_in iin1[1] = {{IR_I64, TU_SHAPE(5), xi, false}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 1, iin1, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, xi, sizeof xi);
    tu_free_outputs(1, out);
    /* A bound of another dtype, or not a scalar, is rejected. */
    tu_in bad[2] = {{IR_F32, TU_SHAPE(6), x, false}, {IR_I64, TU_SCALAR_SHAPE, ilo, true}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 2, bad, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    tu_in vec[2] = {{IR_F32, TU_SHAPE(6), x, false}, {IR_F32, TU_SHAPE(2), x, false}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 2, vec, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
}

static ir_status run_cast(ir_dtype from, const void *x, int64_t n, ir_dtype to, ir_tensor *out) {
    ir_attr a = tu_attr_int("to", ir_dtype_to_onnx(to));
    tu_in in = {from, tu_shape_arr(&n, 1), x, false};
    ir_diag d;
    return tu_run_op(IR_OP_Cast, 1, &in, 1, 1, &a, out, &d);
}

/* Every (from, to) pair on values every dtype holds exactly. */
static void test_cast_all_pairs(void **state) {
    const double vals[] = {0, 1, 0, 5, 100, 1};
    enum { N = 6 };
    for (int f = 0; f < IR_DTYPE_COUNT; f++) {
        unsigned char src[N * 8];
        for (int i = 0; i < N; i++)
            ir_store_f64(src, (ir_dtype)f, i, f == IR_BOOL ? vals[i] != 0 : vals[i]);
        for (int t = 0; t < IR_DTYPE_COUNT; t++) {
            ir_tensor out[1];
            assert_int_equal(run_cast((ir_dtype)f, src, N, (ir_dtype)t, out), IR_OK);
            assert_int_equal(out[0].dtype, t);
            for (int i = 0; i < N; i++) {
                double want = (f == IR_BOOL || t == IR_BOOL) ? vals[i] != 0 : vals[i];
                if (ir_load_f64(out[0].data, out[0].dtype, i) != want)
                    fprintf(stderr, "%s -> %s [%d]\n", ir_dtype_name(f), ir_dtype_name(t), i);
                assert_true(ir_load_f64(out[0].data, out[0].dtype, i) == want);
            }
            tu_free_outputs(1, out);
        }
    }
}

static void test_cast_semantics(void **state) {
    ir_tensor out[1], back[1];
    /* float16 / bfloat16 round trips: exact for representable values, rounded to nearest like
     * the reference converters otherwise. */
    enum { N = 4096 };
    float *x = malloc(N * 4);
    tu_fill(x, N, 3);
    for (int i = 0; i < N; i++) x[i] *= 1000;
    x[0] = 0.5f, x[1] = -2.25f, x[2] = 65504, x[3] = 1e-5f;
    ir_dtype halves[2] = {IR_F16, IR_BF16};
    for (int h = 0; h < 2; h++) {
        assert_int_equal(run_cast(IR_F32, x, N, halves[h], out), IR_OK);
        const uint16_t *hv = out[0].data;
        for (int i = 0; i < N; i++)
            assert_int_equal(hv[i], h ? ir_f32_to_bf16(x[i]) : ir_f32_to_f16(x[i]));
        assert_int_equal(run_cast(halves[h], out[0].data, N, IR_F32, back), IR_OK);
        const float *bv = back[0].data;
        for (int i = 0; i < N; i++) {
            float want = h ? ir_bf16_to_f32(hv[i]) : ir_f16_to_f32(hv[i]);
            assert_true(bv[i] == want);
            assert_true(fabsf(bv[i] - x[i]) <= fabsf(x[i]) * (h ? 4e-3f : 5e-4f) + 1e-7f);
        }
        assert_true(bv[0] == 0.5f && bv[1] == -2.25f);
        tu_free_outputs(1, out);
        tu_free_outputs(1, back);
    }
    /* f32 -> f64 -> f32 is exact. */
    assert_int_equal(run_cast(IR_F32, x, N, IR_F64, out), IR_OK);
    assert_int_equal(run_cast(IR_F64, out[0].data, N, IR_F32, back), IR_OK);
    assert_memory_equal(back[0].data, x, N * 4);
    tu_free_outputs(1, out);
    tu_free_outputs(1, back);
    free(x);
    /* float -> int truncates toward zero and saturates; NaN is 0. */
    const float f[] = {-2.7f, 2.7f, 1e30f, -1e30f, NAN, 300.f, -200.f};
    assert_int_equal(run_cast(IR_F32, f, 7, IR_I64, out), IR_OK);
    assert_memory_equal(out[0].data, ((int64_t[]){-2, 2, INT64_MAX, INT64_MIN, 0, 300, -200}), 56);
    tu_free_outputs(1, out);
    assert_int_equal(run_cast(IR_F32, f, 7, IR_I32, out), IR_OK);
    assert_memory_equal(out[0].data, ((int32_t[]){-2, 2, INT32_MAX, INT32_MIN, 0, 300, -200}), 28);
    tu_free_outputs(1, out);
    assert_int_equal(run_cast(IR_F32, f, 7, IR_U8, out), IR_OK);
    assert_memory_equal(out[0].data, ((uint8_t[]){0, 2, 255, 0, 0, 255, 0}), 7);
    tu_free_outputs(1, out);
    assert_int_equal(run_cast(IR_F32, f, 7, IR_I8, out), IR_OK);
    assert_memory_equal(out[0].data, ((int8_t[]){-2, 2, 127, -128, 0, 127, -128}), 7);
    tu_free_outputs(1, out);
    assert_int_equal(run_cast(IR_F32, f, 7, IR_BOOL, out), IR_OK);
    assert_memory_equal(out[0].data, ((uint8_t[]){1, 1, 1, 1, 1, 1, 1}), 7);
    tu_free_outputs(1, out);
    /* int64 <-> int32 wraps on narrowing; int64 -> float64. */
    const int64_t i64[] = {-1, 1LL << 32 | 7, 123456789012345LL};
    assert_int_equal(run_cast(IR_I64, i64, 3, IR_I32, out), IR_OK);
    assert_memory_equal(out[0].data, ((int32_t[]){-1, 7, (int32_t)123456789012345LL}), 12);
    assert_int_equal(run_cast(IR_I32, out[0].data, 3, IR_I64, back), IR_OK);
    assert_memory_equal(back[0].data, ((int64_t[]){-1, 7, (int32_t)123456789012345LL}), 24);
    tu_free_outputs(1, out);
    tu_free_outputs(1, back);
    assert_int_equal(run_cast(IR_I64, i64, 3, IR_F64, out), IR_OK);
    assert_memory_equal(out[0].data, ((double[]){-1, (double)(1LL << 32 | 7), 123456789012345.0}),
                        24);
    tu_free_outputs(1, out);
    /* A large cast runs in parallel chunks. */
    enum { M = 200003 };
    int64_t *big = malloc(M * 8);
    for (int i = 0; i < M; i++) big[i] = i - M / 2;
    assert_int_equal(run_cast(IR_I64, big, M, IR_F32, out), IR_OK);
    for (int i = 0; i < M; i++) assert_true(((float *)out[0].data)[i] == (float)(i - M / 2));
    tu_free_outputs(1, out);
    free(big);
    /* Errors: missing or unsupported 'to'. */
    ir_diag d;
    tu_in in = {IR_F32, TU_SHAPE(7), f, false};
    assert_int_equal(tu_run_op(IR_OP_Cast, 1, &in, 1, 0, NULL, out, &d), IR_ERR_INVALID);
    ir_attr str = tu_attr_int("to", 8); /* STRING */
    assert_int_equal(tu_run_op(IR_OP_Cast, 1, &in, 1, 1, &str, out, &d), IR_ERR_UNSUPPORTED);
}

static void test_castlike(void **state) {
    const float x[] = {1.9f, -1.9f};
    const int64_t like[] = {0};
    tu_in in[2] = {{IR_F32, TU_SHAPE(2), x, false}, {IR_I64, TU_SHAPE(1), like, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_CastLike, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    assert_memory_equal(out[0].data, ((int64_t[]){1, -1}), 16);
    tu_free_outputs(1, out);
}

/* Runs Dropout on x (n elements) with the given ratio and training flag (NULL = absent). */
static ir_status run_dropout(const float *x, int64_t n, const float *ratio, const uint8_t *train,
                             ir_tensor *out) {
    tu_in in[3] = {{IR_F32, tu_shape_arr(&n, 1), x, false},
                   {IR_F32, TU_SCALAR_SHAPE, ratio, true},
                   {IR_BOOL, TU_SCALAR_SHAPE, train, false}};
    ir_diag d;
    return tu_run_op(IR_OP_Dropout, 3, in, 2, 0, NULL, out, &d);
}

static void test_dropout(void **state) {
    enum { N = 200000 };
    float *x = malloc(N * 4);
    tu_fill(x, N, 9);
    for (int i = 0; i < N; i++) x[i] += 2; /* never zero */
    const float r = 0.3f;
    const uint8_t on = 1, off = 0;
    ir_tensor out[2], again[2];
    /* Inference: absent or false training_mode copies, mask all true. */
    const uint8_t *modes[2] = {NULL, &off};
    for (int m = 0; m < 2; m++) {
        assert_int_equal(run_dropout(x, N, &r, modes[m], out), IR_OK);
        assert_int_equal(out[1].dtype, IR_BOOL);
        assert_memory_equal(out[0].data, x, N * 4);
        for (int i = 0; i < N; i++) assert_int_equal(((uint8_t *)out[1].data)[i], 1);
        tu_free_outputs(2, out);
    }
    /* Training: keep rate ~ 1-r, kept elements scaled by 1/(1-r), dropped are zero. */
    assert_int_equal(run_dropout(x, N, &r, &on, out), IR_OK);
    const float *o = out[0].data;
    const uint8_t *mask = out[1].data;
    int64_t kept = 0;
    for (int i = 0; i < N; i++) {
        if (mask[i]) {
            kept++;
            assert_true(fabsf(o[i] - x[i] / (1 - r)) <= 1e-6f * fabsf(o[i]));
        } else {
            assert_true(o[i] == 0);
        }
    }
    double rate = (double)kept / N; /* sigma = sqrt(0.21 / N) ~ 0.001 */
    assert_true(fabs(rate - 0.7) < 0.006);
    /* Same seed, same node: same mask, whatever the thread count. */
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    assert_int_equal(run_dropout(x, N, &r, &on, again), IR_OK);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    assert_memory_equal(again[1].data, mask, N);
    assert_memory_equal(again[0].data, o, N * 4);
    tu_free_outputs(2, again);
    tu_free_outputs(2, out);
    /* Ratio 0 in training keeps everything; a ratio outside [0, 1) is an error. */
    const float zero = 0, bad = 1.5f;
    assert_int_equal(run_dropout(x, N, &zero, &on, out), IR_OK);
    assert_memory_equal(out[0].data, x, N * 4);
    tu_free_outputs(2, out);
    assert_int_equal(run_dropout(x, N, &bad, &on, out), IR_ERR_INVALID);
    tu_free_outputs(2, out);
    /* Without the mask output, and with the default ratio. */
    tu_in one = {IR_F32, TU_SHAPE(16), x, false};
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Dropout, 1, &one, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, x, 64);
    tu_free_outputs(1, out);
    free(x);
    assert_true(ir_op_get(IR_OP_Dropout)->flags & IR_OPF_RANDOM);
}

static void test_table(void **state) {
    /* Also makes the linker keep ops-unary.o: the op table refers to it only weakly for now. */
    assert_ptr_equal(ir_op_get(IR_OP_Relu), &ir_opdef_Relu);
    for (int k = IR_OP_Relu; k <= IR_OP_CastLike; k++) {
        const ir_op_def *def = ir_op_get((ir_op_kind)k);
        assert_non_null(def);
        assert_true(def->flags & IR_OPF_ELEMENTWISE);
        bool ml = k == IR_OP_Neg || k == IR_OP_Identity;
        assert_int_equal(!!(def->flags & IR_OPF_MULTILINEAR), ml);
        assert_int_equal(!!(def->flags & IR_OPF_RANDOM), k == IR_OP_Dropout);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_math_f32),       cmocka_unit_test(test_math_f64),
        cmocka_unit_test(test_int_and_bool),   cmocka_unit_test(test_clip),
        cmocka_unit_test(test_cast_all_pairs), cmocka_unit_test(test_cast_semantics),
        cmocka_unit_test(test_castlike),       cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
