/* test_ops_binary.c - broadcasting element-wise ops (ops-binary.c) against naive references that
 * index every element independently (unravel + broadcast), over the engine's paths: same shape,
 * scalar operand, row broadcast, per-channel and general broadcasting; integer semantics of
 * Div/Mod; comparisons, logic and Where; variadic Sum/Min/Max; error paths. */
#include "test-util.h"

#include "ir-impl.h"

/* Flat index into `in` of output element `flat`, numpy broadcasting, by plain division. */
static int64_t ref_index(const ir_shape *out, const ir_shape *in, int64_t flat) {
    int64_t idx = 0, mul = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t c = flat % out->dims[d];
        flat /= out->dims[d];
        int j = in->rank - out->rank + d;
        if (j >= 0) {
            if (in->dims[j] != 1) idx += c * mul;
            mul *= in->dims[j];
        }
    }
    return idx;
}

static double ref_f(ir_op_kind op, double x, double y) {
    switch (op) {
    case IR_OP_Add: return (float)x + (float)y;
    case IR_OP_Sub: return (float)x - (float)y;
    case IR_OP_Mul: return (float)x * (float)y;
    case IR_OP_Div: return (float)x / (float)y;
    case IR_OP_Pow: return pow(x, y);
    case IR_OP_Mod: return fmod(x, y);
    case IR_OP_Min: return x < y ? x : y;
    case IR_OP_Max: return x > y ? x : y;
    default: fail(); return 0;
    }
}

typedef struct shape_case {
    ir_shape a, b;
} shape_case;

static shape_case shape_cases[10];
static int n_shape_cases;

static int setup_shapes(void **state) {
    int i = 0;
    shape_cases[i++] = (shape_case){TU_SHAPE(3, 5, 7), TU_SHAPE(3, 5, 7)};       /* same */
    shape_cases[i++] = (shape_case){TU_SHAPE(3, 5, 7), TU_SCALAR_SHAPE};         /* scalar */
    shape_cases[i++] = (shape_case){TU_SHAPE(1), TU_SHAPE(4, 9)};                /* scalar */
    shape_cases[i++] = (shape_case){TU_SHAPE(8, 6), TU_SHAPE(6)};                /* bias */
    shape_cases[i++] = (shape_case){TU_SHAPE(2, 3, 4, 5), TU_SHAPE(1, 3, 1, 1)}; /* channel */
    shape_cases[i++] = (shape_case){TU_SHAPE(2, 1, 3), TU_SHAPE(4, 1)};          /* general */
    shape_cases[i++] = (shape_case){TU_SHAPE(3, 70000), TU_SHAPE(70000)};        /* parallel */
    shape_cases[i++] = (shape_case){TU_SHAPE(40, 1, 700), TU_SHAPE(1, 30, 1)};   /* parallel */
    shape_cases[i++] = (shape_case){TU_SHAPE(20000, 3), TU_SHAPE(3)};         /* many short rows */
    shape_cases[i++] = (shape_case){TU_SHAPE(5, 1, 4, 1), TU_SHAPE(3, 1, 6)}; /* 4-D general */
    n_shape_cases = i;
    return 0;
}

/* Runs a float32 binary op over every shape case and compares with ref_f. */
static void check_f32_op(ir_op_kind op, int n_attrs, const ir_attr *attrs, bool positive_base) {
    for (int c = 0; c < n_shape_cases; c++) {
        const ir_shape *sa = &shape_cases[c].a, *sb = &shape_cases[c].b;
        int64_t na = ir_shape_numel(sa), nb = ir_shape_numel(sb);
        float *a = malloc((size_t)na * 4), *b = malloc((size_t)nb * 4);
        tu_fill(a, na, 11 + c);
        tu_fill(b, nb, 23 + c);
        for (int64_t i = 0; i < nb; i++) b[i] += b[i] < 0 ? -0.25f : 0.25f; /* no zero divisor */
        if (positive_base)
            for (int64_t i = 0; i < na; i++) a[i] = fabsf(a[i]) + 0.1f;
        tu_in in[2] = {{IR_F32, *sa, a, false}, {IR_F32, *sb, b, false}};
        ir_tensor out[1];
        ir_diag d = {{0}};
        assert_int_equal(tu_run_op(op, 2, in, 1, n_attrs, attrs, out, &d), IR_OK);
        ir_shape want;
        assert_true(ir_shape_broadcast(sa, sb, &want));
        assert_true(ir_shape_eq(&out[0].shape, &want));
        assert_int_equal(out[0].dtype, IR_F32);
        int64_t n = ir_shape_numel(&want);
        float *ref = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++)
            ref[i] = (float)ref_f(op, a[ref_index(&want, sa, i)], b[ref_index(&want, sb, i)]);
        double err = tu_rel_err_f32(out[0].data, ref, n);
        if (err > 1e-6) fprintf(stderr, "%s case %d: rel err %g\n", ir_op_name(op), c, err);
        assert_true(err <= 1e-6);
        free(ref);
        free(a);
        free(b);
        tu_free_outputs(1, out);
    }
}

static void test_f32_arith(void **state) {
    ir_op_kind ops[] = {IR_OP_Add, IR_OP_Sub, IR_OP_Mul, IR_OP_Div, IR_OP_Min, IR_OP_Max};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) check_f32_op(ops[i], 0, NULL, false);
    check_f32_op(IR_OP_Pow, 0, NULL, true);
    ir_attr fm = tu_attr_int("fmod", 1);
    check_f32_op(IR_OP_Mod, 1, &fm, false);
}

/* float64 shares the engine; one broadcast case checks its loops are wired. */
static void test_f64(void **state) {
    double a[6] = {1, -2, 3.5, 4, 5, -6}, b[3] = {0.5, 2, -4};
    tu_in in[2] = {{IR_F64, TU_SHAPE(2, 3), a, false}, {IR_F64, TU_SHAPE(3), b, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Div, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F64);
    for (int i = 0; i < 6; i++) assert_true(((double *)out[0].data)[i] == a[i] / b[i % 3]);
    tu_free_outputs(1, out);
}

/* Runs an int64 binary op with b broadcast as a scalar or row and returns the output. */
static ir_status run_i64(ir_op_kind op, const int64_t *a, int na, const int64_t *b, int nb,
                         int n_attrs, const ir_attr *attrs, ir_tensor *out, ir_diag *d) {
    tu_in in[2] = {{IR_I64, tu_shape_arr((int64_t[]){na}, 1), a, false},
                   {IR_I64, tu_shape_arr((int64_t[]){nb}, 1), b, false}};
    return tu_run_op(op, 2, in, 1, n_attrs, attrs, out, d);
}

static void test_i64_arith(void **state) {
    const int64_t a[] = {-7, 7, -7, 7, 6, INT64_MIN, 0};
    const int64_t b[] = {2, -2, -2, 2, 3, -1, 5};
    const int64_t div[] = {-3, -3, 3, 3, 2, INT64_MIN, 0}; /* truncation toward zero */
    const int64_t pymod[] = {1, -1, -1, 1, 0, 0, 0};       /* sign of the divisor */
    const int64_t cmod[] = {-1, 1, -1, 1, 0, 0, 0};        /* sign of the dividend */
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(run_i64(IR_OP_Div, a, 7, b, 7, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, div, sizeof div);
    tu_free_outputs(1, out);
    assert_int_equal(run_i64(IR_OP_Mod, a, 7, b, 7, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, pymod, sizeof pymod);
    tu_free_outputs(1, out);
    ir_attr fm = tu_attr_int("fmod", 1);
    assert_int_equal(run_i64(IR_OP_Mod, a, 7, b, 7, 1, &fm, out, &d), IR_OK);
    assert_memory_equal(out[0].data, cmod, sizeof cmod);
    tu_free_outputs(1, out);
    /* Add/Sub/Mul/Min/Max with a scalar, as shape arithmetic does. */
    const int64_t s[] = {3};
    struct {
        ir_op_kind op;
        int64_t want[7];
    } cases[] = {
        {IR_OP_Add, {-4, 10, -4, 10, 9, INT64_MIN + 3, 3}},
        {IR_OP_Sub, {-10, 4, -10, 4, 3, INT64_MAX - 2, -3}},
        {IR_OP_Mul, {-21, 21, -21, 21, 18, INT64_MIN, 0}}, /* INT64_MIN * 3 wraps */
        {IR_OP_Min, {-7, 3, -7, 3, 3, INT64_MIN, 0}},
        {IR_OP_Max, {3, 7, 3, 7, 6, 3, 3}},
        {IR_OP_Pow, {-343, 343, -343, 343, 216, 0, 0}}, /* INT64_MIN^3 wraps to 0 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(run_i64(cases[c].op, a, 7, s, 1, 0, NULL, out, &d), IR_OK);
        assert_memory_equal(out[0].data, cases[c].want, sizeof cases[c].want);
        tu_free_outputs(1, out);
    }
    /* Integer division by zero is an error, not a crash, for Div and both Mods. */
    const int64_t z[] = {1, 0};
    assert_int_equal(run_i64(IR_OP_Div, a, 2, z, 2, 0, NULL, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "division by zero"));
    assert_non_null(strstr(d.msg, "test_node"));
    tu_free_outputs(1, out); /* the kernel failed after its outputs were allocated */
    assert_int_equal(run_i64(IR_OP_Mod, a, 2, z, 2, 0, NULL, out, &d), IR_ERR_INVALID);
    tu_free_outputs(1, out);
    assert_int_equal(run_i64(IR_OP_Mod, a, 2, z, 2, 1, &fm, out, &d), IR_ERR_INVALID);
    tu_free_outputs(1, out);
}

static void test_i32_arith(void **state) {
    const int32_t a[] = {-7, 7, INT32_MIN, 9}, b[] = {2, -2, -1, 4};
    tu_in in[2] = {{IR_I32, TU_SHAPE(4), a, false}, {IR_I32, TU_SHAPE(4), b, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Div, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I32);
    const int32_t div[] = {-3, -3, INT32_MIN, 2};
    assert_memory_equal(out[0].data, div, sizeof div);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Mod, 2, in, 1, 0, NULL, out, &d), IR_OK);
    const int32_t mod[] = {1, -1, 0, 1};
    assert_memory_equal(out[0].data, mod, sizeof mod);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Sub, 2, in, 1, 0, NULL, out, &d), IR_OK);
    const int32_t sub[] = {-9, 9, INT32_MIN + 1, 5};
    assert_memory_equal(out[0].data, sub, sizeof sub);
    tu_free_outputs(1, out);
}

/* Comparisons on quantized values (so that ties occur) over every shape case. */
static void test_compare(void **state) {
    ir_op_kind ops[] = {IR_OP_Equal, IR_OP_Less, IR_OP_LessOrEqual, IR_OP_Greater,
                        IR_OP_GreaterOrEqual};
    for (int c = 0; c < n_shape_cases; c++) {
        const ir_shape *sa = &shape_cases[c].a, *sb = &shape_cases[c].b;
        int64_t na = ir_shape_numel(sa), nb = ir_shape_numel(sb);
        float *a = malloc((size_t)na * 4), *b = malloc((size_t)nb * 4);
        tu_fill(a, na, 5 + c);
        tu_fill(b, nb, 7 + c);
        for (int64_t i = 0; i < na; i++) a[i] = roundf(a[i] * 2);
        for (int64_t i = 0; i < nb; i++) b[i] = roundf(b[i] * 2);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            tu_in in[2] = {{IR_F32, *sa, a, false}, {IR_F32, *sb, b, false}};
            ir_tensor out[1];
            ir_diag d;
            assert_int_equal(tu_run_op(ops[o], 2, in, 1, 0, NULL, out, &d), IR_OK);
            assert_int_equal(out[0].dtype, IR_BOOL);
            const uint8_t *r = out[0].data;
            int64_t n = ir_tensor_numel(&out[0]);
            for (int64_t i = 0; i < n; i++) {
                float x = a[ref_index(&out[0].shape, sa, i)],
                      y = b[ref_index(&out[0].shape, sb, i)];
                bool want = ops[o] == IR_OP_Equal         ? x == y
                            : ops[o] == IR_OP_Less        ? x < y
                            : ops[o] == IR_OP_LessOrEqual ? x <= y
                            : ops[o] == IR_OP_Greater     ? x > y
                                                          : x >= y;
                assert_int_equal(r[i], want);
            }
            tu_free_outputs(1, out);
        }
        free(a);
        free(b);
    }
    /* Equal on int64 and on bool. */
    const int64_t ia[] = {1, 2, 3}, ib[] = {2};
    tu_in in[2] = {{IR_I64, TU_SHAPE(3), ia, false}, {IR_I64, TU_SHAPE(1), ib, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Equal, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((uint8_t[]){0, 1, 0}), 3);
    tu_free_outputs(1, out);
    const uint8_t ba[] = {0, 1, 0, 1}, bb[] = {0, 0, 1, 1};
    tu_in bin[2] = {{IR_BOOL, TU_SHAPE(4), ba, false}, {IR_BOOL, TU_SHAPE(4), bb, false}};
    assert_int_equal(tu_run_op(IR_OP_Equal, 2, bin, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((uint8_t[]){1, 0, 0, 1}), 4);
    tu_free_outputs(1, out);
}

static void test_logic(void **state) {
    /* [2,1] x [3] broadcast: rows a, columns b. */
    const uint8_t a[] = {0, 1}, b[] = {0, 1, 1};
    tu_in in[2] = {{IR_BOOL, TU_SHAPE(2, 1), a, false}, {IR_BOOL, TU_SHAPE(3), b, false}};
    struct {
        ir_op_kind op;
        uint8_t want[6];
    } cases[] = {{IR_OP_And, {0, 0, 0, 0, 1, 1}},
                 {IR_OP_Or, {0, 1, 1, 1, 1, 1}},
                 {IR_OP_Xor, {0, 1, 1, 1, 0, 0}}};
    for (int c = 0; c < 3; c++) {
        ir_tensor out[1];
        ir_diag d;
        assert_int_equal(tu_run_op(cases[c].op, 2, in, 1, 0, NULL, out, &d), IR_OK);
        assert_int_equal(out[0].dtype, IR_BOOL);
        ir_shape want = TU_SHAPE(2, 3);
        assert_true(ir_shape_eq(&out[0].shape, &want));
        assert_memory_equal(out[0].data, cases[c].want, 6);
        tu_free_outputs(1, out);
    }
}

static void test_where(void **state) {
    /* cond [3,1], X [1,4], Y scalar -> [3,4] */
    const uint8_t c[] = {1, 0, 1};
    const float x[] = {1, 2, 3, 4}, y[] = {-1};
    tu_in in[3] = {{IR_BOOL, TU_SHAPE(3, 1), c, false},
                   {IR_F32, TU_SHAPE(1, 4), x, false},
                   {IR_F32, TU_SCALAR_SHAPE, y, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Where, 3, in, 1, 0, NULL, out, &d), IR_OK);
    ir_shape want_shape = TU_SHAPE(3, 4);
    assert_true(ir_shape_eq(&out[0].shape, &want_shape));
    const float want[] = {1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4};
    assert_memory_equal(out[0].data, want, sizeof want);
    tu_free_outputs(1, out);
    /* int64 and bool data, large and same-shape (parallel contiguous path). */
    enum { N = 100000 };
    uint8_t *cc = malloc(N), *bx = malloc(N), *by = malloc(N);
    int64_t *ix = malloc(N * 8), *iy = malloc(N * 8);
    for (int i = 0; i < N; i++) {
        cc[i] = (ir_mix64((uint64_t)i) & 1) != 0;
        ix[i] = i;
        iy[i] = -i;
        bx[i] = 1;
        by[i] = 0;
    }
    tu_in iin[3] = {{IR_BOOL, TU_SHAPE(N), cc, false},
                    {IR_I64, TU_SHAPE(N), ix, false},
                    {IR_I64, TU_SHAPE(N), iy, false}};
    assert_int_equal(tu_run_op(IR_OP_Where, 3, iin, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    for (int i = 0; i < N; i++) assert_true(((int64_t *)out[0].data)[i] == (cc[i] ? i : -i));
    tu_free_outputs(1, out);
    tu_in bin[3] = {{IR_BOOL, TU_SHAPE(N), cc, false},
                    {IR_BOOL, TU_SHAPE(N), bx, false},
                    {IR_BOOL, TU_SHAPE(N), by, false}};
    assert_int_equal(tu_run_op(IR_OP_Where, 3, bin, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, cc, N);
    tu_free_outputs(1, out);
    free(cc), free(bx), free(by), free(ix), free(iy);
    /* A non-bool condition is rejected. */
    tu_in bad[3] = {{IR_F32, TU_SHAPE(4), x, false},
                    {IR_F32, TU_SHAPE(4), x, false},
                    {IR_F32, TU_SHAPE(4), x, false}};
    assert_int_equal(tu_run_op(IR_OP_Where, 3, bad, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
}

static void test_variadic(void **state) {
    const float a[] = {1, 5, -3, 4, 0, 2}, b[] = {2, -1, 7}, c[] = {10};
    tu_in in[3] = {{IR_F32, TU_SHAPE(2, 3), a, false},
                   {IR_F32, TU_SHAPE(3), b, false},
                   {IR_F32, TU_SHAPE(1), c, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Sum, 3, in, 1, 0, NULL, out, &d), IR_OK);
    const float sum[] = {13, 14, 14, 16, 9, 19};
    assert_memory_equal(out[0].data, sum, sizeof sum);
    tu_free_outputs(1, out);
    /* The broadcast operand may come first. */
    tu_in rin[3] = {in[1], in[2], in[0]};
    assert_int_equal(tu_run_op(IR_OP_Max, 3, rin, 1, 0, NULL, out, &d), IR_OK);
    const float mx[] = {10, 10, 10, 10, 10, 10};
    assert_memory_equal(out[0].data, mx, sizeof mx);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Min, 2, in, 1, 0, NULL, out, &d), IR_OK);
    const float mn[] = {1, -1, -3, 2, -1, 2};
    assert_memory_equal(out[0].data, mn, sizeof mn);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Sum, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, a, sizeof a);
    tu_free_outputs(1, out);
    /* NaN propagates through Min and Max, in either position. */
    const float n1[] = {NAN, 1}, n2[] = {0, NAN};
    tu_in nin[2] = {{IR_F32, TU_SHAPE(2), n1, false}, {IR_F32, TU_SHAPE(2), n2, false}};
    assert_int_equal(tu_run_op(IR_OP_Max, 2, nin, 1, 0, NULL, out, &d), IR_OK);
    assert_true(isnan(((float *)out[0].data)[0]) && isnan(((float *)out[0].data)[1]));
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Min, 2, nin, 1, 0, NULL, out, &d), IR_OK);
    assert_true(isnan(((float *)out[0].data)[0]) && isnan(((float *)out[0].data)[1]));
    tu_free_outputs(1, out);
}

/* An exponent of another dtype goes through the workspace. */
static void test_pow_mixed(void **state) {
    const float x[] = {1.5f, -2, 3};
    const int64_t e[] = {2};
    tu_in in[2] = {{IR_F32, TU_SHAPE(3), x, false}, {IR_I64, TU_SCALAR_SHAPE, e, true}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Pow, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F32);
    const float want[] = {2.25f, 4, 9};
    assert_memory_equal(out[0].data, want, sizeof want);
    tu_free_outputs(1, out);
}

static void test_errors(void **state) {
    const float a[8] = {0};
    const int64_t i[8] = {0};
    ir_tensor out[1];
    ir_diag d = {{0}};
    tu_in mis[2] = {{IR_F32, TU_SHAPE(2, 3), a, false}, {IR_F32, TU_SHAPE(4), a, false}};
    assert_int_equal(tu_run_op(IR_OP_Add, 2, mis, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "[2,3]"));
    assert_non_null(strstr(d.msg, "[4]"));
    tu_in mixed[2] = {{IR_F32, TU_SHAPE(2), a, false}, {IR_I64, TU_SHAPE(2), i, false}};
    assert_int_equal(tu_run_op(IR_OP_Mul, 2, mixed, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    tu_in fl[2] = {{IR_F32, TU_SHAPE(2), a, false}, {IR_F32, TU_SHAPE(2), a, false}};
    assert_int_equal(tu_run_op(IR_OP_And, 2, fl, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "float32"));
    assert_int_equal(tu_run_op(IR_OP_Mod, 2, fl, 1, 0, NULL, out, &d), IR_ERR_INVALID);
    /* float16 Mod: fmod=0 is the integer modulus, which ONNX defines for integers only */
    const uint16_t h[2] = {0x3c00, 0x3c00};
    tu_in f16[2] = {{IR_F16, TU_SHAPE(2), h, false}, {IR_F16, TU_SHAPE(2), h, false}};
    assert_int_equal(tu_run_op(IR_OP_Mod, 2, f16, 1, 0, NULL, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "Mod of float16 requires fmod=1"));
    tu_in bl[2] = {{IR_BOOL, TU_SHAPE(2), h, false}, {IR_BOOL, TU_SHAPE(2), h, false}};
    assert_int_equal(tu_run_op(IR_OP_Add, 2, bl, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "bool"));
}

static void test_table(void **state) {
    /* Also makes the linker keep ops-binary.o: the op table refers to it only weakly for now. */
    assert_ptr_equal(ir_op_get(IR_OP_Add), &ir_opdef_Add);
    assert_true(ir_op_get(IR_OP_Add)->flags & IR_OPF_MULTILINEAR);
    assert_true(ir_op_get(IR_OP_Sub)->flags & IR_OPF_MULTILINEAR);
    assert_true(ir_op_get(IR_OP_Mul)->flags & IR_OPF_MULTILINEAR);
    assert_true(ir_op_get(IR_OP_Sum)->flags & IR_OPF_MULTILINEAR);
    assert_false(ir_op_get(IR_OP_Div)->flags & IR_OPF_MULTILINEAR);
    assert_false(ir_op_get(IR_OP_Max)->flags & IR_OPF_MULTILINEAR);
    ir_op_kind all[] = {IR_OP_Add,     IR_OP_Sub,
                        IR_OP_Mul,     IR_OP_Div,
                        IR_OP_Pow,     IR_OP_Mod,
                        IR_OP_Min,     IR_OP_Max,
                        IR_OP_Sum,     IR_OP_Equal,
                        IR_OP_Less,    IR_OP_LessOrEqual,
                        IR_OP_Greater, IR_OP_GreaterOrEqual,
                        IR_OP_And,     IR_OP_Or,
                        IR_OP_Xor,     IR_OP_Where};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        assert_true(ir_op_get(all[k])->flags & IR_OPF_ELEMENTWISE);
        assert_int_equal(ir_op_find("", ir_op_name(all[k])), all[k]);
    }
    /* FLOPs: one per output element, n-1 steps for variadic ops. */
    ir_graph *g = ir_graph_new();
    ir_shape s = TU_SHAPE(4, 5);
    int v[4];
    for (int k = 0; k < 4; k++) v[k] = ir_graph_add_value(g, "v", IR_F32, &s);
    int n = ir_graph_add_node(g, IR_OP_Sum, "sum", 3, v, 1, &v[3], 0, NULL);
    ir_diag d;
    assert_int_equal(ir_node_infer(g, &g->nodes[n], &d), IR_OK);
    assert_true(ir_node_flops(g, &g->nodes[n]) == 40);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_arith), cmocka_unit_test(test_f64),
        cmocka_unit_test(test_i64_arith), cmocka_unit_test(test_i32_arith),
        cmocka_unit_test(test_compare),   cmocka_unit_test(test_logic),
        cmocka_unit_test(test_where),     cmocka_unit_test(test_variadic),
        cmocka_unit_test(test_pow_mixed), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, setup_shapes, NULL);
}
