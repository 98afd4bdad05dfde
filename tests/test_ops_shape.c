/* test_ops_shape.c - Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Constant,
 * ConstantOfShape and Range: output shapes against the ONNX rules, data against naive
 * references, and the error paths (bad shapes, dynamic shape inputs). */
#include "test-util.h"

#include "ir-impl.h"

static void test_op_table(void **state) {
    const ir_op_def *defs[] = {&ir_opdef_Reshape,   &ir_opdef_Flatten,         &ir_opdef_Squeeze,
                               &ir_opdef_Unsqueeze, &ir_opdef_Shape,           &ir_opdef_Size,
                               &ir_opdef_Constant,  &ir_opdef_ConstantOfShape, &ir_opdef_Range};
    ir_op_kind kinds[] = {IR_OP_Reshape,   IR_OP_Flatten,         IR_OP_Squeeze,
                          IR_OP_Unsqueeze, IR_OP_Shape,           IR_OP_Size,
                          IR_OP_Constant,  IR_OP_ConstantOfShape, IR_OP_Range};
    for (int i = 0; i < 9; i++) {
        assert_ptr_equal(ir_op_get(kinds[i]), defs[i]);
        assert_int_equal(ir_op_find("", defs[i]->name), kinds[i]);
        assert_null(defs[i]->flops); /* pure data movement */
    }
}

/* Runs a one-output op that only re-describes its input and checks shape and bytes. */
static void check_redescribe(ir_op_kind op, ir_shape in_shape, int n_extra, const tu_in *extra,
                             int n_attrs, const ir_attr *attrs, ir_shape want) {
    float x[256];
    int64_t n = ir_shape_numel(&in_shape);
    assert_true(n <= 256);
    tu_fill(x, n, 7);
    tu_in in[3] = {tu_data_in(IR_F32, in_shape, x)};
    for (int i = 0; i < n_extra; i++) in[1 + i] = extra[i];
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status st = tu_run_op(op, 1 + n_extra, in, 1, n_attrs, attrs, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(out[0].dtype, IR_F32);
    tu_expect_shape(&out[0], want);
    if (n) assert_memory_equal(out[0].data, x, (size_t)n * 4);
    tu_free_outputs(1, out);
}

static void test_reshape(void **state) {
    int64_t s1[] = {0, -1};
    tu_in e1[] = {tu_ints_in(2, s1)};
    check_redescribe(IR_OP_Reshape, TU_SHAPE(2, 3, 4), 1, e1, 0, NULL, TU_SHAPE(2, 12));
    int64_t s2[] = {-1, 3, 1};
    tu_in e2[] = {tu_ints_in(3, s2)};
    check_redescribe(IR_OP_Reshape, TU_SHAPE(2, 3, 4), 1, e2, 0, NULL, TU_SHAPE(8, 3, 1));
    int64_t s3[] = {-1};
    tu_in e3[] = {tu_ints_in(1, s3)};
    check_redescribe(IR_OP_Reshape, TU_SCALAR_SHAPE, 1, e3, 0, NULL, TU_SHAPE(1));
    tu_in e4[] = {tu_ints_in(0, s3)};
    check_redescribe(IR_OP_Reshape, TU_SHAPE(1, 1), 1, e4, 0, NULL, TU_SCALAR_SHAPE);
    /* allowzero=1 keeps a literal 0: an empty tensor */
    int64_t s5[] = {0, 3};
    tu_in e5[] = {tu_ints_in(2, s5)};
    ir_attr az = tu_attr_int("allowzero", 1);
    check_redescribe(IR_OP_Reshape, TU_SHAPE(3, 0), 1, e5, 1, &az, TU_SHAPE(0, 3));
    /* without allowzero the 0 copies dim 0 (3): [3,3] does not hold 0 elements */
    float x[9] = {0};
    ir_diag d = {{0}};
    tu_in bad[2] = {tu_data_in(IR_F32, TU_SHAPE(3, 0), x), tu_ints_in(2, s5)};
    assert_int_equal(tu_run_err(IR_OP_Reshape, 2, bad, 1, 0, NULL, &d), IR_ERR_SHAPE);
    int64_t s6[] = {5, -1};
    tu_in bad2[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 4), x), tu_ints_in(2, s6)};
    assert_int_equal(tu_run_err(IR_OP_Reshape, 2, bad2, 1, 0, NULL, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    int64_t s7[] = {-1, -1};
    tu_in bad3[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 4), x), tu_ints_in(2, s7)};
    assert_int_equal(tu_run_err(IR_OP_Reshape, 2, bad3, 1, 0, NULL, &d), IR_ERR_INVALID);
    tu_in dyn[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 4), x), tu_ints_in(2, s1)};
    dyn[1].constant = false;
    assert_int_equal(tu_run_err(IR_OP_Reshape, 2, dyn, 1, 0, NULL, &d), IR_ERR_UNSUPPORTED);
}

static void test_reshape_f16(void **state) {
    uint16_t x[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[] = {3, -1};
    tu_in in[2] = {tu_data_in(IR_F16, TU_SHAPE(6), x), tu_ints_in(2, s)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Reshape, 2, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F16);
    tu_expect_shape(&out[0], TU_SHAPE(3, 2));
    assert_memory_equal(out[0].data, x, sizeof x);
    tu_free_outputs(1, out);
}

static void test_flatten(void **state) {
    ir_attr a0 = tu_attr_int("axis", 0), a2 = tu_attr_int("axis", 2), am = tu_attr_int("axis", -1);
    check_redescribe(IR_OP_Flatten, TU_SHAPE(2, 3, 4), 0, NULL, 0, NULL, TU_SHAPE(2, 12));
    check_redescribe(IR_OP_Flatten, TU_SHAPE(2, 3, 4), 0, NULL, 1, &a0, TU_SHAPE(1, 24));
    check_redescribe(IR_OP_Flatten, TU_SHAPE(2, 3, 4), 0, NULL, 1, &a2, TU_SHAPE(6, 4));
    check_redescribe(IR_OP_Flatten, TU_SHAPE(2, 3, 4), 0, NULL, 1, &am, TU_SHAPE(6, 4));
    check_redescribe(IR_OP_Flatten, TU_SCALAR_SHAPE, 0, NULL, 1, &a0, TU_SHAPE(1, 1));
    ir_attr a4 = tu_attr_int("axis", 4);
    float x[24] = {0};
    tu_in in[1] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 4), x)};
    ir_diag d = {{0}};
    assert_int_equal(tu_run_err(IR_OP_Flatten, 1, in, 1, 1, &a4, &d), IR_ERR_INVALID);
}

static void test_squeeze_unsqueeze(void **state) {
    int64_t ax1[] = {-1, 0};
    tu_in e1[] = {tu_ints_in(2, ax1)};
    check_redescribe(IR_OP_Squeeze, TU_SHAPE(1, 3, 1, 1), 1, e1, 0, NULL, TU_SHAPE(3, 1));
    check_redescribe(IR_OP_Squeeze, TU_SHAPE(1, 3, 1, 1), 0, NULL, 0, NULL, TU_SHAPE(3));
    /* before opset 13: the axes attribute */
    int64_t ax2[] = {-2};
    ir_attr at = tu_attr_ints("axes", 1, ax2);
    check_redescribe(IR_OP_Squeeze, TU_SHAPE(1, 3, 1, 1), 0, NULL, 1, &at, TU_SHAPE(1, 3, 1));
    check_redescribe(IR_OP_Squeeze, TU_SHAPE(1), 0, NULL, 0, NULL, TU_SCALAR_SHAPE);

    int64_t ax3[] = {-1, 0};
    tu_in e3[] = {tu_ints_in(2, ax3)};
    check_redescribe(IR_OP_Unsqueeze, TU_SHAPE(3, 4), 1, e3, 0, NULL, TU_SHAPE(1, 3, 4, 1));
    int64_t ax4[] = {0};
    tu_in e4[] = {tu_ints_in(1, ax4)};
    check_redescribe(IR_OP_Unsqueeze, TU_SCALAR_SHAPE, 1, e4, 0, NULL, TU_SHAPE(1));
    int64_t ax5[] = {1, -2};
    tu_in e5[] = {tu_ints_in(2, ax5)};
    check_redescribe(IR_OP_Unsqueeze, TU_SHAPE(2, 0), 1, e5, 0, NULL, TU_SHAPE(2, 1, 1, 0));

    float x[12] = {0};
    ir_diag d = {{0}};
    int64_t bad_ax[] = {1};
    tu_in b1[2] = {tu_data_in(IR_F32, TU_SHAPE(1, 3), x), tu_ints_in(1, bad_ax)};
    assert_int_equal(tu_run_err(IR_OP_Squeeze, 2, b1, 1, 0, NULL, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "size 3"));
    int64_t far[] = {5};
    tu_in b2[2] = {tu_data_in(IR_F32, TU_SHAPE(1, 3), x), tu_ints_in(1, far)};
    assert_int_equal(tu_run_err(IR_OP_Squeeze, 2, b2, 1, 0, NULL, &d), IR_ERR_INVALID);
    int64_t dup[] = {0, -4}; /* -4 is 0 of the rank-4 output */
    tu_in b3[2] = {tu_data_in(IR_F32, TU_SHAPE(1, 3), x), tu_ints_in(2, dup)};
    assert_int_equal(tu_run_err(IR_OP_Unsqueeze, 2, b3, 1, 0, NULL, &d), IR_ERR_INVALID);
    tu_in b4[1] = {tu_data_in(IR_F32, TU_SHAPE(1, 3), x)};
    assert_int_equal(tu_run_err(IR_OP_Unsqueeze, 1, b4, 1, 0, NULL, &d), IR_ERR_INVALID);
}

static void check_shape_op(ir_shape in_shape, int n_attrs, const ir_attr *attrs, int n,
                           const int64_t *want) {
    float x[1] = {0};
    tu_in in[1] = {tu_data_in(IR_F32, in_shape, x)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Shape, 1, in, 1, n_attrs, attrs, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    tu_expect_shape(&out[0], TU_SHAPE(n));
    if (n) assert_memory_equal(out[0].data, want, sizeof(int64_t) * (size_t)n);
    tu_free_outputs(1, out);
}

static void test_shape_size(void **state) {
    int64_t all[] = {2, 3, 4, 5}, mid[] = {3, 4};
    check_shape_op(TU_SHAPE(2, 3, 4, 5), 0, NULL, 4, all);
    ir_attr se[] = {tu_attr_int("start", 1), tu_attr_int("end", -1)};
    check_shape_op(TU_SHAPE(2, 3, 4, 5), 2, se, 2, mid);
    ir_attr far[] = {tu_attr_int("start", -10), tu_attr_int("end", 10)};
    check_shape_op(TU_SHAPE(2, 3, 4, 5), 2, far, 4, all);
    ir_attr empty[] = {tu_attr_int("start", 3), tu_attr_int("end", 1)};
    check_shape_op(TU_SHAPE(2, 3, 4, 5), 2, empty, 0, NULL);
    check_shape_op(TU_SCALAR_SHAPE, 0, NULL, 0, NULL);
    assert_true(ir_op_get(IR_OP_Shape)->flags & IR_OPF_SHAPE_ONLY);

    float x[30] = {0};
    ir_shape shapes[] = {TU_SHAPE(2, 3, 5), TU_SCALAR_SHAPE, TU_SHAPE(4, 0)};
    int64_t want[] = {30, 1, 0};
    for (int i = 0; i < 3; i++) {
        tu_in in[1] = {tu_data_in(IR_F32, shapes[i], x)};
        ir_tensor out[1];
        ir_diag d = {{0}};
        assert_int_equal(tu_run_op(IR_OP_Size, 1, in, 1, 0, NULL, out, &d), IR_OK);
        assert_int_equal(out[0].dtype, IR_I64);
        tu_expect_shape(&out[0], TU_SCALAR_SHAPE);
        assert_int_equal(*(int64_t *)out[0].data, want[i]);
        tu_free_outputs(1, out);
    }
    assert_true(ir_op_get(IR_OP_Size)->flags & IR_OPF_SHAPE_ONLY);
}

static void run_constant(int n_attrs, const ir_attr *attrs, ir_dtype t, ir_shape s,
                         const void *want) {
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status st = tu_run_op(IR_OP_Constant, 0, NULL, 1, n_attrs, attrs, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(out[0].dtype, t);
    tu_expect_shape(&out[0], s);
    size_t bytes = (size_t)ir_shape_numel(&s) * ir_dtype_size(t);
    if (bytes) assert_memory_equal(out[0].data, want, bytes);
    tu_free_outputs(1, out);
}

static void test_constant(void **state) {
    int32_t vals[6] = {1, -2, 3, -4, 5, -6};
    ir_blob *b = ir_blob_new(sizeof vals);
    memcpy(ir_blob_data(b), vals, sizeof vals);
    ir_attr v = {.name = "value",
                 .type = IR_ATTR_TENSOR,
                 .t_dtype = IR_I32,
                 .t_shape = TU_SHAPE(2, 3),
                 .t_blob = b};
    run_constant(1, &v, IR_I32, TU_SHAPE(2, 3), vals);
    ir_blob_unref(b);

    int64_t ints[] = {4, 5, 6};
    ir_attr vi = tu_attr_ints("value_ints", 3, ints);
    run_constant(1, &vi, IR_I64, TU_SHAPE(3), ints);
    ir_attr vf = tu_attr_float("value_float", 2.5f);
    float f = 2.5f;
    run_constant(1, &vf, IR_F32, TU_SCALAR_SHAPE, &f);
    ir_attr vn = tu_attr_int("value_int", -9);
    int64_t i = -9;
    run_constant(1, &vn, IR_I64, TU_SCALAR_SHAPE, &i);
    float fl[] = {1.5f, -0.25f};
    ir_attr vfs = {.name = "value_floats", .type = IR_ATTR_FLOATS, .n = 2, .floats = fl};
    run_constant(1, &vfs, IR_F32, TU_SHAPE(2), fl);

    ir_diag d = {{0}};
    assert_int_equal(tu_run_err(IR_OP_Constant, 0, NULL, 1, 0, NULL, &d), IR_ERR_INVALID);
    ir_attr two[] = {vf, vn};
    assert_int_equal(tu_run_err(IR_OP_Constant, 0, NULL, 1, 2, two, &d), IR_ERR_INVALID);
    ir_attr str = tu_attr_str("value_string", "x");
    assert_int_equal(tu_run_err(IR_OP_Constant, 0, NULL, 1, 1, &str, &d), IR_ERR_UNSUPPORTED);
}

static void test_constant_of_shape(void **state) {
    int64_t sh[] = {2, 3};
    tu_in in[1] = {tu_ints_in(2, sh)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_ConstantOfShape, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F32);
    tu_expect_shape(&out[0], TU_SHAPE(2, 3));
    for (int i = 0; i < 6; i++) assert_true(((float *)out[0].data)[i] == 0.0f);
    tu_free_outputs(1, out);

    ir_blob *b = ir_blob_new(8);
    int64_t seven = 7;
    memcpy(ir_blob_data(b), &seven, 8);
    ir_attr v = {.name = "value",
                 .type = IR_ATTR_TENSOR,
                 .t_dtype = IR_I64,
                 .t_shape = TU_SHAPE(1),
                 .t_blob = b};
    int64_t sh2[] = {3, 1, 5};
    tu_in in2[1] = {tu_ints_in(3, sh2)};
    assert_int_equal(tu_run_op(IR_OP_ConstantOfShape, 1, in2, 1, 1, &v, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    tu_expect_shape(&out[0], TU_SHAPE(3, 1, 5));
    for (int i = 0; i < 15; i++) assert_int_equal(((int64_t *)out[0].data)[i], 7);
    tu_free_outputs(1, out);

    /* an empty shape gives a scalar */
    tu_in in3[1] = {tu_ints_in(0, sh)};
    assert_int_equal(tu_run_op(IR_OP_ConstantOfShape, 1, in3, 1, 1, &v, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SCALAR_SHAPE);
    assert_int_equal(*(int64_t *)out[0].data, 7);
    tu_free_outputs(1, out);
    ir_blob_unref(b);

    int64_t neg[] = {2, -1};
    tu_in in4[1] = {tu_ints_in(2, neg)};
    assert_int_equal(tu_run_err(IR_OP_ConstantOfShape, 1, in4, 1, 0, NULL, &d), IR_ERR_INVALID);
}

static void run_range(ir_dtype t, const void *s, const void *l, const void *dl, int64_t n,
                      const double *want) {
    tu_in in[3];
    const void *p[3] = {s, l, dl};
    for (int i = 0; i < 3; i++)
        in[i] = (tu_in){.dtype = t, .shape = TU_SCALAR_SHAPE, .data = p[i], .constant = true};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status st = tu_run_op(IR_OP_Range, 3, in, 1, 0, NULL, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(out[0].dtype, t);
    tu_expect_shape(&out[0], TU_SHAPE(n));
    for (int64_t i = 0; i < n; i++) {
        double got = ir_load_f64(out[0].data, t, i);
        if (fabs(got - want[i]) > 1e-6)
            fail_msg("range[%lld] = %g, want %g", (long long)i, got, want[i]);
    }
    tu_free_outputs(1, out);
}

static void test_range(void **state) {
    float fs = 1.0f, fl = 2.05f, fd = 0.5f;
    double w1[] = {1.0, 1.5, 2.0};
    run_range(IR_F32, &fs, &fl, &fd, 3, w1);
    double ds = 0.0, dl = -1.0, dd = -0.25, w2[] = {0, -0.25, -0.5, -0.75};
    run_range(IR_F64, &ds, &dl, &dd, 4, w2);
    int64_t is = 10, il = 4, id = -3;
    double w3[] = {10, 7};
    run_range(IR_I64, &is, &il, &id, 2, w3);
    int32_t js = -3, jl = 3, jd = 2;
    double w4[] = {-3, -1, 1};
    run_range(IR_I32, &js, &jl, &jd, 3, w4);
    int64_t es = 5, el = 1, ed = 2; /* empty: limit below start with a positive delta */
    run_range(IR_I64, &es, &el, &ed, 0, NULL);
    float fe = 3.0f;
    run_range(IR_F32, &fe, &fs, &fd, 0, NULL);

    ir_diag d = {{0}};
    int64_t zero = 0;
    tu_in in[3] = {{IR_I64, TU_SCALAR_SHAPE, &is, true},
                   {IR_I64, TU_SCALAR_SHAPE, &il, true},
                   {IR_I64, TU_SCALAR_SHAPE, &zero, true}};
    assert_int_equal(tu_run_err(IR_OP_Range, 3, in, 1, 0, NULL, &d), IR_ERR_INVALID);
    in[2].data = &id;
    in[1].constant = false;
    assert_int_equal(tu_run_err(IR_OP_Range, 3, in, 1, 0, NULL, &d), IR_ERR_UNSUPPORTED);
    in[1] = (tu_in){IR_F32, TU_SCALAR_SHAPE, &fl, true};
    assert_int_equal(tu_run_err(IR_OP_Range, 3, in, 1, 0, NULL, &d), IR_ERR_SHAPE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_reshape_f16),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_squeeze_unsqueeze),
        cmocka_unit_test(test_shape_size),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_constant_of_shape),
        cmocka_unit_test(test_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
