/* test_onnx_functions.c - model-local ONNX functions expanded at import (ir-onnx-functions.c) on
 * tests/fixtures/functions/ (made by its gen_functions.py with onnx's python API): nested calls,
 * an attribute by ref_attr_name given at the call and left to the function's default, internal
 * names that collide with the caller's, two calls of one function; the run judged against the
 * float64 reference the generator computed with numpy. A function that calls itself is refused
 * in one line. */
#include "test-util.h"

#include "rt.h"

static void test_expand_and_run(void **state) {
    char path[1024], ipath[1024], opath[1024];
    tu_src_path("tests/fixtures/functions/functions.onnx", path, sizeof path);
    tu_src_path("tests/fixtures/functions/input.npy", ipath, sizeof ipath);
    tu_src_path("tests/fixtures/functions/output.npy", opath, sizeof opath);
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(path, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    /* 1 Relu + 2 Blocks x (2 ScaledSilu x (Constant folded away or not, 2 Mul, Sigmoid) + Add) */
    int relu = 0, sigmoid = 0, add = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_not_equal(g->nodes[i].op, IR_OP_OPAQUE);
        relu += g->nodes[i].op == IR_OP_Relu;
        sigmoid += g->nodes[i].op == IR_OP_Sigmoid;
        add += g->nodes[i].op == IR_OP_Add;
    }
    assert_int_equal(relu, 1);
    assert_int_equal(sigmoid, 4);
    assert_int_equal(add, 2);
    /* the caller's "t" is Relu's output; the bodies' own "t"s were renamed per call */
    int t = ir_graph_find_value(g, "t");
    assert_true(t >= 0 && g->values[t].producer >= 0);
    assert_int_equal(g->nodes[g->values[t].producer].op, IR_OP_Relu);
    ir_dtype xt, yt;
    ir_shape xs, ys;
    ir_blob *xb, *yb;
    assert_int_equal(ir_npy_read(ipath, &xt, &xs, &xb, &d), IR_OK);
    assert_int_equal(ir_npy_read(opath, &yt, &ys, &yb, &d), IR_OK);
    rt_binding bind = {.value = g->inputs[0], .dtype = xt, .shape = xs, .data = ir_blob_data(xb)};
    rt_options o = {.seed = 1};
    rt_result r = {0};
    if (rt_run(g, &bind, 1, &o, &r, &d) != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(r.n_outputs, 1);
    const float *got = r.outputs[0].data;
    const double *ref = ir_blob_data(yb);
    double num = 0, den = 0;
    for (int64_t i = 0; i < ir_shape_numel(&ys); i++) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double rel = sqrt(num / den);
    if (!(rel <= 1e-6)) fail_msg("relative error %g against float64", rel);
    rt_result_free(&r);
    ir_blob_unref(xb);
    ir_blob_unref(yb);
    ir_graph_free(g);
}

static void test_recursive_refused(void **state) {
    char path[1024];
    tu_src_path("tests/fixtures/functions/recursive.onnx", path, sizeof path);
    ir_status st;
    ir_diag d = {{0}};
    assert_null(ir_onnx_load(path, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "function 'Loop1' calls itself"));
    assert_null(strchr(d.msg, '\n'));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_and_run),
        cmocka_unit_test(test_recursive_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
