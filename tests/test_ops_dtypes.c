/* test_ops_dtypes.c - the element-wise, comparison and Min/Max ops in the integer dtypes of 8 to
 * 64 bits (signed and unsigned) and in float16/bfloat16.
 *
 * Integers are judged exactly against a reference computed here in 64-bit arithmetic and
 * narrowed as C narrows (the kernels wrap on overflow). float16/bfloat16 compute in float32 and
 * round once on the store, so each result is judged against the float64 result on the same
 * (rounded) inputs: within one unit in the last place of the 16-bit type (2^-10 relative for
 * float16, 2^-7 for bfloat16). */
#include "test-util.h"

#include "ir-impl.h"

#include <math.h>

#define N 16

static const ir_dtype int_types[] = {IR_I8, IR_I16, IR_I32, IR_I64, IR_U8, IR_U16, IR_U32, IR_U64};

static bool is_unsigned(ir_dtype t) {
    return t == IR_U8 || t == IR_U16 || t == IR_U32 || t == IR_U64;
}

/* Python's modulus (the sign of the divisor), ONNX's Mod with fmod=0. */
static int64_t py_mod(int64_t x, int64_t y) {
    int64_t r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

/* The reference of op on int64 operands, before narrowing; *is_bool for comparisons. */
static int64_t int_ref(ir_op_kind op, int fmod, int64_t x, int64_t y, bool *is_bool) {
    *is_bool = false;
    switch (op) {
    case IR_OP_Add: return x + y;
    case IR_OP_Sub: return x - y;
    case IR_OP_Mul: return x * y;
    case IR_OP_Div: return x / y;
    case IR_OP_Mod: return fmod ? x % y : py_mod(x, y);
    case IR_OP_Min: return x < y ? x : y;
    case IR_OP_Max: return x > y ? x : y;
    default: break;
    }
    *is_bool = true;
    switch (op) {
    case IR_OP_Less: return x < y;
    case IR_OP_LessOrEqual: return x <= y;
    case IR_OP_Greater: return x > y;
    case IR_OP_GreaterOrEqual: return x >= y;
    case IR_OP_Equal: return x == y;
    default: fail_msg("no reference for op %d", op); return 0;
    }
}

static void test_integer_ops(void **state) {
    const ir_op_kind ops[] = {IR_OP_Add,  IR_OP_Sub,         IR_OP_Mul,     IR_OP_Div,
                              IR_OP_Mod,  IR_OP_Mod,         IR_OP_Min,     IR_OP_Max,
                              IR_OP_Less, IR_OP_LessOrEqual, IR_OP_Greater, IR_OP_GreaterOrEqual,
                              IR_OP_Equal};
    const int fmods[] = {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    /* Signed values include negatives and, for 8 bits, sums and products that wrap. */
    const int64_t sa[N] = {0, 1, -1, 7, -7, 100, -100, 127, -128, 13, -13, 50, 3, -3, 99, 64};
    const int64_t sb[N] = {1, 3, 2, -2, 3, 100, 7, 1, 3, -5, 5, 50, -4, 4, 98, 2};
    const int64_t ua[N] = {0, 1, 255, 7, 200, 100, 128, 127, 254, 13, 65, 50, 3, 250, 99, 64};
    const int64_t ub[N] = {1, 3, 2, 2, 3, 100, 7, 1, 3, 5, 5, 50, 4, 4, 98, 2};
    for (size_t ti = 0; ti < sizeof int_types / sizeof int_types[0]; ti++) {
        ir_dtype t = int_types[ti];
        const int64_t *va = is_unsigned(t) ? ua : sa, *vb = is_unsigned(t) ? ub : sb;
        char a[N * 8], b[N * 8];
        for (int i = 0; i < N; i++) {
            ir_store_f64(a, t, i, (double)va[i]);
            ir_store_f64(b, t, i, (double)vb[i]);
        }
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            ir_attr at = tu_attr_int("fmod", fmods[oi]);
            tu_in in[2] = {tu_data_in(t, TU_SHAPE(N), a), tu_data_in(t, TU_SHAPE(N), b)};
            ir_tensor out[1];
            ir_diag d = {{0}};
            ir_status st = tu_run_op(ops[oi], 2, in, 1, ops[oi] == IR_OP_Mod ? 1 : 0, &at, out, &d);
            if (st != IR_OK)
                fail_msg("%s %s: %s", ir_op_get(ops[oi])->name, ir_dtype_name(t), d.msg);
            for (int i = 0; i < N; i++) {
                /* the narrowed operands, as the kernel sees them */
                int64_t x = ir_load_i64(a, t, i), y = ir_load_i64(b, t, i);
                bool is_bool;
                int64_t r = int_ref(ops[oi], fmods[oi], x, y, &is_bool);
                char want[8];
                ir_dtype rt = is_bool ? IR_BOOL : t;
                ir_store_i64(want, rt, 0, r);
                assert_int_equal(out[0].dtype, rt);
                if (ir_load_i64(out[0].data, rt, i) != ir_load_i64(want, rt, 0))
                    fail_msg("%s %s element %d (%lld, %lld): got %lld, want %lld",
                             ir_op_get(ops[oi])->name, ir_dtype_name(t), i, (long long)x,
                             (long long)y, (long long)ir_load_i64(out[0].data, rt, i),
                             (long long)ir_load_i64(want, rt, 0));
            }
            tu_free_outputs(1, out);
        }
    }
}

/* uint64 above 2^63: compared and added as unsigned, not as int64. */
static void test_uint64_range(void **state) {
    const uint64_t a[2] = {UINT64_MAX, (1ull << 63) + 5}, b[2] = {1, 3};
    tu_in in[2] = {tu_data_in(IR_U64, TU_SHAPE(2), a), tu_data_in(IR_U64, TU_SHAPE(2), b)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Add, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_true(((uint64_t *)out[0].data)[0] == 0 && ((uint64_t *)out[0].data)[1] == a[1] + 3);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Greater, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((uint8_t[]){1, 1}), 2);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Div, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_true(((uint64_t *)out[0].data)[1] == a[1] / 3);
    tu_free_outputs(1, out);
    /* Clip without bounds keeps the whole uint64 range */
    tu_in x = tu_data_in(IR_U64, TU_SHAPE(2), a);
    assert_int_equal(tu_run_op(IR_OP_Clip, 1, &x, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, a, sizeof a);
    tu_free_outputs(1, out);
}

static void test_int8_clip_and_unary(void **state) {
    const int8_t x[6] = {-128, -5, 0, 5, 100, 127}, lo = -10, hi = 50;
    tu_in in[3] = {tu_data_in(IR_I8, TU_SHAPE(6), x), tu_data_in(IR_I8, TU_SHAPE(), &lo),
                   tu_data_in(IR_I8, TU_SHAPE(), &hi)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Clip, 3, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((int8_t[]){-10, -5, 0, 5, 50, 50}), 6);
    tu_free_outputs(1, out);
    /* no bounds: int8's own range, so nothing changes */
    assert_int_equal(tu_run_op(IR_OP_Clip, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, x, 6);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Abs, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((int8_t[]){-128, 5, 0, 5, 100, 127}), 6); /* -128 wraps */
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_Sign, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, ((int8_t[]){-1, -1, 0, 1, 1, 1}), 6);
    tu_free_outputs(1, out);
    const uint16_t u[3] = {0, 7, 65535};
    tu_in uin = tu_data_in(IR_U16, TU_SHAPE(3), u);
    assert_int_equal(tu_run_op(IR_OP_Relu, 1, &uin, 1, 0, NULL, out, &d), IR_OK);
    assert_memory_equal(out[0].data, u, sizeof u);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- float16 and bfloat16 */

static double f64_binary(ir_op_kind op, double x, double y) {
    switch (op) {
    case IR_OP_Add: return x + y;
    case IR_OP_Sub: return x - y;
    case IR_OP_Mul: return x * y;
    case IR_OP_Div: return x / y;
    case IR_OP_Pow: return pow(x, y);
    case IR_OP_Mod: return fmod(x, y);
    case IR_OP_Min: return fmin(x, y);
    case IR_OP_Max: return fmax(x, y);
    case IR_OP_Less: return x < y;
    case IR_OP_Greater: return x > y;
    case IR_OP_Equal: return x == y;
    default: fail_msg("no reference for op %d", op); return 0;
    }
}

static double f64_unary(ir_op_kind op, double x) {
    switch (op) {
    case IR_OP_Exp: return exp(x);
    case IR_OP_Sqrt: return sqrt(fabs(x));
    case IR_OP_Sigmoid: return 1 / (1 + exp(-x));
    case IR_OP_Tanh: return tanh(x);
    case IR_OP_Relu: return x < 0 ? 0 : x;
    case IR_OP_Neg: return -x;
    case IR_OP_Abs: return fabs(x);
    case IR_OP_Gelu: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    default: fail_msg("no reference for op %d", op); return 0;
    }
}

/* One unit in the last place of the 16-bit type t, relative. */
static double half_ulp(ir_dtype t) {
    return t == IR_F16 ? 0x1p-10 : 0x1p-7;
}

static void check_close(const char *what, ir_dtype t, int i, double got, double ref) {
    double tol = half_ulp(t) * fabs(ref) + 1e-7;
    if (!(fabs(got - ref) <= tol))
        fail_msg("%s %s element %d: got %.9g, float64 %.9g", what, ir_dtype_name(t), i, got, ref);
}

static void test_half_binary(void **state) {
    const ir_op_kind ops[] = {IR_OP_Add,  IR_OP_Sub,     IR_OP_Mul,  IR_OP_Div,
                              IR_OP_Pow,  IR_OP_Mod,     IR_OP_Min,  IR_OP_Max,
                              IR_OP_Less, IR_OP_Greater, IR_OP_Equal};
    const ir_dtype types[2] = {IR_F16, IR_BF16};
    uint64_t seed = 7;
    for (int ti = 0; ti < 2; ti++) {
        ir_dtype t = types[ti];
        uint16_t a[N], b[N];
        for (int i = 0; i < N; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(seed >> 11) * 0x1p-53, v = (double)((seed >> 7) & 0xffff) / 65536.0;
            ir_store_f64(a, t, i, (u - 0.5) * 20);
            ir_store_f64(b, t, i, i == 3 ? ir_load_f64(a, t, i) : 0.25 + v * 4); /* b > 0 */
        }
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            ir_op_kind op = ops[oi];
            /* Pow of a negative base to a fractional exponent is NaN: use |a| */
            uint16_t pa[N];
            for (int i = 0; i < N; i++)
                ir_store_f64(pa, t, i,
                             op == IR_OP_Pow ? fabs(ir_load_f64(a, t, i)) : ir_load_f64(a, t, i));
            ir_attr at = tu_attr_int("fmod", 1);
            tu_in in[2] = {tu_data_in(t, TU_SHAPE(N), pa), tu_data_in(t, TU_SHAPE(N), b)};
            ir_tensor out[1];
            ir_diag d = {{0}};
            ir_status st = tu_run_op(op, 2, in, 1, op == IR_OP_Mod ? 1 : 0, &at, out, &d);
            if (st != IR_OK) fail_msg("%s %s: %s", ir_op_get(op)->name, ir_dtype_name(t), d.msg);
            for (int i = 0; i < N; i++) {
                double ref = f64_binary(op, ir_load_f64(pa, t, i), ir_load_f64(b, t, i));
                check_close(ir_op_get(op)->name, t, i, ir_load_f64(out[0].data, out[0].dtype, i),
                            ref);
            }
            tu_free_outputs(1, out);
        }
    }
}

static void test_half_unary(void **state) {
    const ir_op_kind ops[] = {IR_OP_Exp,  IR_OP_Sqrt, IR_OP_Sigmoid, IR_OP_Tanh,
                              IR_OP_Relu, IR_OP_Neg,  IR_OP_Abs,     IR_OP_Gelu};
    const ir_dtype types[2] = {IR_F16, IR_BF16};
    for (int ti = 0; ti < 2; ti++) {
        ir_dtype t = types[ti];
        /* 300 elements: more than one of the kernel's 256-element blocks */
        uint16_t x[300];
        for (int i = 0; i < 300; i++) ir_store_f64(x, t, i, (i - 150) / 37.0);
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            ir_op_kind op = ops[oi];
            uint16_t in_x[300];
            for (int i = 0; i < 300; i++)
                ir_store_f64(in_x, t, i,
                             op == IR_OP_Sqrt ? fabs(ir_load_f64(x, t, i)) : ir_load_f64(x, t, i));
            tu_in in = tu_data_in(t, TU_SHAPE(300), in_x);
            ir_tensor out[1];
            ir_diag d = {{0}};
            ir_status st = tu_run_op(op, 1, &in, 1, 0, NULL, out, &d);
            if (st != IR_OK) fail_msg("%s %s: %s", ir_op_get(op)->name, ir_dtype_name(t), d.msg);
            assert_int_equal(out[0].dtype, t);
            for (int i = 0; i < 300; i++)
                check_close(ir_op_get(op)->name, t, i, ir_load_f64(out[0].data, t, i),
                            f64_unary(op, ir_load_f64(in_x, t, i)));
            tu_free_outputs(1, out);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integer_ops),         cmocka_unit_test(test_uint64_range),
        cmocka_unit_test(test_int8_clip_and_unary), cmocka_unit_test(test_half_binary),
        cmocka_unit_test(test_half_unary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
