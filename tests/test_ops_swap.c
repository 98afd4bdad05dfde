/* test_ops_swap.c - Store and Load (ops-swap.c): the op table entries (magpie domain, Store's
 * output on the host), shape inference, the copy kernels, and an ONNX export/import round trip
 * that keeps both ops in domain "magpie" and computes the same result. */
#include "test-util.h"

#include <unistd.h>

#include "rt.h"

static void test_table(void **state) {
    const ir_op_def *s = ir_op_get(IR_OP_Store), *l = ir_op_get(IR_OP_Load);
    assert_non_null(s);
    assert_non_null(l);
    assert_string_equal(s->domain, "magpie");
    assert_string_equal(l->domain, "magpie");
    assert_true(s->flags & IR_OPF_HOST_OUTPUT);
    assert_false(l->flags & IR_OPF_HOST_OUTPUT);
    assert_int_equal(ir_op_find("magpie", "Store"), IR_OP_Store);
    assert_int_equal(ir_op_find("magpie", "Load"), IR_OP_Load);
    assert_int_equal(ir_op_find("", "Store"), IR_OP_OPAQUE); /* not an ONNX op */
}

static void test_infer_and_kernel(void **state) {
    const ir_op_kind ops[2] = {IR_OP_Store, IR_OP_Load};
    int64_t data[6] = {1, -2, 3, INT64_MAX, 5, INT64_MIN};
    for (int o = 0; o < 2; o++) {
        tu_in in = {.dtype = IR_I64, .shape = TU_SHAPE(2, 3), .data = data};
        ir_tensor out;
        ir_diag d = {{0}};
        assert_int_equal(tu_run_op(ops[o], 1, &in, 1, 0, NULL, &out, &d), IR_OK);
        assert_int_equal(out.dtype, IR_I64);
        assert_true(ir_shape_eq(&out.shape, &in.shape));
        assert_memory_equal(out.data, data, sizeof data);
        tu_free_outputs(1, &out);
    }
}

/* x -> Relu -> a; Store(a) -> h; Neg(x) -> b; Load(h) -> l; Add(l, b) -> y */
static ir_graph *build(void) {
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape s = TU_SHAPE(2, 3);
    int x = ir_graph_add_value(g, "x", IR_F32, &s);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    int a = ir_graph_add_value(g, "a", IR_F32, NULL), h = ir_graph_add_value(g, "h", IR_F32, NULL),
        b = ir_graph_add_value(g, "b", IR_F32, NULL), l = ir_graph_add_value(g, "l", IR_F32, NULL),
        y = ir_graph_add_value(g, "y", IR_F32, NULL);
    ir_graph_add_node(g, IR_OP_Relu, "relu", 1, &x, 1, &a, 0, NULL);
    ir_graph_add_node(g, IR_OP_Store, "store", 1, &a, 1, &h, 0, NULL);
    ir_graph_add_node(g, IR_OP_Neg, "neg", 1, &x, 1, &b, 0, NULL);
    ir_graph_add_node(g, IR_OP_Load, "load", 1, &h, 1, &l, 0, NULL);
    ir_graph_add_node(g, IR_OP_Add, "add", 2, (int[]){l, b}, 1, &y, 0, NULL);
    ir_graph_add_output(g, y);
    ir_diag d = {{0}};
    for (int k = 0; k < g->n_nodes; k++)
        if (ir_node_infer(g, &g->nodes[k], &d) != IR_OK) fail_msg("%s", d.msg);
    return g;
}

static void run(const ir_graph *g, float *y) {
    float x[6] = {-1, 2, -3, 4, -5, 6};
    rt_binding b = {
        .value = ir_graph_find_value(g, "x"), .dtype = IR_F32, .shape = TU_SHAPE(2, 3), .data = x};
    rt_result r;
    ir_diag d = {{0}};
    if (rt_run(g, &b, 1, NULL, &r, &d) != IR_OK) fail_msg("%s", d.msg);
    memcpy(y, r.outputs[0].data, 6 * sizeof(float));
    rt_result_free(&r);
}

static void test_onnx_round_trip(void **state) {
    ir_graph *g = build();
    assert_true(ir_value_on_host(g, ir_graph_find_value(g, "h")));
    assert_false(ir_value_on_host(g, ir_graph_find_value(g, "l")));
    assert_false(ir_value_on_host(g, ir_graph_find_value(g, "x")));
    float y[6], y2[6];
    run(g, y);
    for (int i = 0; i < 6; i++) {
        float x = (float[]){-1, 2, -3, 4, -5, 6}[i];
        assert_true(y[i] == (x > 0 ? x : 0) - x);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie_test_swap_%d.onnx", (int)getpid());
    ir_diag d = {{0}};
    ir_status st;
    assert_int_equal(ir_onnx_save(g, path, &d), IR_OK);
    ir_graph *g2 = ir_onnx_load(path, NULL, &st, &d);
    unlink(path);
    if (!g2) fail_msg("%s", d.msg);
    int stores = 0, loads = 0;
    for (int k = 0; k < g2->n_nodes; k++) {
        const ir_node *n = &g2->nodes[k];
        if (n->op == IR_OP_Store || n->op == IR_OP_Load) {
            assert_string_equal(n->domain, "magpie");
            stores += n->op == IR_OP_Store;
            loads += n->op == IR_OP_Load;
        }
    }
    assert_int_equal(stores, 1);
    assert_int_equal(loads, 1);
    run(g2, y2);
    assert_memory_equal(y, y2, sizeof y);
    ir_graph_free(g2);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_infer_and_kernel),
        cmocka_unit_test(test_onnx_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
