/* test_rules_dgraph.c - the dimension graph (rules/rules-dgraph.c, MAGIS 4.1): on hand-built
 * graphs, MatMul's i/k/j components as the paper's example gives them (k a summed reduce axis,
 * weights included as vertices), deterministic numbering by first vertex in node order, maxima
 * that are reduce axes but not sums, broadcast dims left out, out-of-range queries; on real
 * models, the batch dimension runs through every activation of an MLP's training graph (its
 * weight gradients' batch axis a summed reduce axis), and a transformer's batch splits into no
 * more than what its attention reshapes keep. */
#include "test-util.h"

#include <time.h>

#include "rules.h"

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int add_weight(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_blob *b = ir_blob_new((size_t)ir_shape_numel(&s) * sizeof(float));
    tu_fill(ir_blob_data(b), ir_shape_numel(&s), 3);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    return v;
}

/* y = Relu(A @ W), A [4,8] an input, W [8,6] a weight. */
static void test_matmul_paper_example(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int a = add_input(g, "A", TU_SHAPE(4, 8)), w = add_weight(g, "W", TU_SHAPE(8, 6)), c, y;
    int mm = tu_add_node1(g, IR_OP_MatMul, "mm", 2, (int[]){a, w}, 0, NULL, &c);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &c, 0, NULL, &y);
    ir_graph_add_output(g, y);
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    /* (A,1)-(mm,1)... in the paper's 1-based words: i: A0 C0 y0; k: A1 W0 mm's reduce axis;
     * j: W1 C1 y1. Numbered by first vertex: the MatMul meets A0 (i), A1 (k), W0, W1 (j). */
    assert_int_equal(rw_dgraph_n_components(dg), 3);
    int i = rw_dgraph_value_comp(dg, a, 0), k = rw_dgraph_value_comp(dg, a, 1),
        j = rw_dgraph_value_comp(dg, w, 1);
    assert_int_equal(i, 0);
    assert_int_equal(k, 1);
    assert_int_equal(j, 2);
    assert_int_equal(rw_dgraph_value_comp(dg, c, 0), i);
    assert_int_equal(rw_dgraph_value_comp(dg, y, 0), i);
    assert_int_equal(rw_dgraph_value_comp(dg, w, 0), k);
    assert_int_equal(rw_dgraph_reduce_comp(dg, mm, 1), k);
    assert_true(rw_dgraph_reduce_is_sum(dg, mm, 1));
    assert_int_equal(rw_dgraph_value_comp(dg, c, 1), j);
    assert_int_equal(rw_dgraph_value_comp(dg, y, 1), j);
    assert_int_equal(rw_dgraph_comp_length(dg, i), 4);
    assert_int_equal(rw_dgraph_comp_length(dg, k), 8);
    assert_int_equal(rw_dgraph_comp_length(dg, j), 6);
    assert_int_equal(rw_dgraph_value_dim_in(dg, y, j), 1);
    assert_int_equal(rw_dgraph_value_dim_in(dg, w, i), -1); /* the weight has no batch */
    assert_int_equal(rw_dgraph_reduce_in(dg, mm, k), 1);
    assert_int_equal(rw_dgraph_reduce_in(dg, mm, i), 0);
    /* out of range: no such dim, reduce axis, node or component */
    assert_int_equal(rw_dgraph_value_comp(dg, y, 2), -1);
    assert_int_equal(rw_dgraph_value_comp(dg, y, -1), -1);
    assert_int_equal(rw_dgraph_reduce_comp(dg, mm, 2), -1);
    assert_int_equal(rw_dgraph_reduce_comp(dg, mm + 1, 1), -1); /* Relu reduces nothing */
    assert_false(rw_dgraph_reduce_is_sum(dg, mm + 1, 1));
    assert_int_equal(rw_dgraph_comp_length(dg, 3), 0);
    assert_int_equal(rw_dgraph_value_dim_in(dg, g->n_values, i), -1);
    rw_dgraph_free(dg);
    rw_dgraph_free(NULL);
    ir_graph_free(g);
}

/* x [4,6] (+ b [1,6] broadcast): ReduceMax over axis 1 is a reduce axis but not a sum; ReduceSum
 * over axis 0 is a sum; b's size-1 dim is not linked to the batch. */
static void test_reduce_and_broadcast(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(4, 6)), b = add_weight(g, "b", TU_SHAPE(1, 6)), s, mx, sm;
    tu_add_node1(g, IR_OP_Add, "add", 2, (int[]){x, b}, 0, NULL, &s);
    int64_t one[1] = {1};
    ir_attr amax[2] = {tu_attr_ints("axes", 1, one), tu_attr_int("keepdims", 0)};
    int imax = tu_add_node1(g, IR_OP_ReduceMax, "max", 1, &s, 2, amax, &mx);
    int64_t zero[1] = {0};
    ir_shape s1 = TU_SHAPE(1);
    int ax = ir_graph_add_value(g, "axes0", IR_I64, &s1);
    ir_blob *blob = ir_blob_new(sizeof zero);
    memcpy(ir_blob_data(blob), zero, sizeof zero);
    g->values[ax].blob = blob;
    g->values[ax].flags |= IR_VF_CONST;
    ir_attr asum = tu_attr_int("keepdims", 0);
    int isum = tu_add_node1(g, IR_OP_ReduceSum, "sum", 2, (int[]){s, ax}, 1, &asum, &sm);
    ir_graph_add_output(g, mx);
    ir_graph_add_output(g, sm);
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    int batch = rw_dgraph_value_comp(dg, x, 0), col = rw_dgraph_value_comp(dg, x, 1);
    assert_int_not_equal(batch, col);
    assert_int_equal(rw_dgraph_value_comp(dg, s, 0), batch);
    assert_int_equal(rw_dgraph_value_comp(dg, s, 1), col);
    assert_int_equal(rw_dgraph_value_comp(dg, b, 1), col);
    assert_int_not_equal(rw_dgraph_value_comp(dg, b, 0), batch); /* broadcast: its own */
    assert_int_equal(rw_dgraph_comp_length(dg, rw_dgraph_value_comp(dg, b, 0)), 1);
    /* max over the columns: batch kept, columns a reduce axis that is not a sum */
    assert_int_equal(rw_dgraph_value_comp(dg, mx, 0), batch);
    assert_int_equal(rw_dgraph_reduce_comp(dg, imax, 1), col);
    assert_false(rw_dgraph_reduce_is_sum(dg, imax, 1));
    /* sum over the batch: a sum, and the output [6] keeps the columns */
    assert_int_equal(rw_dgraph_reduce_comp(dg, isum, 1), batch);
    assert_true(rw_dgraph_reduce_is_sum(dg, isum, 1));
    assert_int_equal(rw_dgraph_value_comp(dg, sm, 0), col);
    assert_int_equal(rw_dgraph_comp_length(dg, batch), 4);
    assert_int_equal(rw_dgraph_comp_length(dg, col), 6);
    /* the axes constant [1] is a vertex too, linked to nothing */
    int cax = rw_dgraph_value_comp(dg, ax, 0);
    assert_true(cax >= 0 && cax != batch && cax != col);
    /* numbering is a function of the graph: a second build agrees vertex for vertex */
    rw_dgraph *dg2 = rw_dgraph_build(g);
    assert_int_equal(rw_dgraph_n_components(dg2), rw_dgraph_n_components(dg));
    for (int v = 0; v < g->n_values; v++)
        for (int k = 0; k < g->values[v].shape.rank; k++)
            assert_int_equal(rw_dgraph_value_comp(dg2, v, k), rw_dgraph_value_comp(dg, v, k));
    rw_dgraph_free(dg2);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

static ir_graph *load(const char *rel, int n_shapes, const char **names, const ir_shape *shapes) {
    char path[1024];
    ir_import_opts o = {.n_shapes = n_shapes, .shape_names = names, .shape_values = shapes};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), &o, &st, &d);
    if (!g) fail_msg("%s: %s", rel, d.msg);
    return g;
}

/* The MLP's training graph: the batch of the input reaches the logits, every activation and
 * activation gradient, and the weight gradients' reduce axes (sums); the weights have none. */
static void test_mlp_training_batch(void **state) {
    (void)state;
    ir_graph *fwd = load("tests/fixtures/numeric/mlp/model.onnx", 0, NULL, NULL);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_build_training(fwd, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    int x = g->inputs[0], batch = rw_dgraph_value_comp(dg, x, 0);
    int64_t nb = g->values[x].shape.dims[0];
    assert_int_equal(rw_dgraph_comp_length(dg, batch), nb);
    int reduces = 0, with_batch = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int r = rw_dgraph_reduce_in(dg, i, batch);
        if (r) {
            reduces++;
            assert_true(rw_dgraph_reduce_is_sum(dg, i, r));
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && rw_dgraph_value_dim_in(dg, n->out[k], batch) >= 0) with_batch++;
    }
    /* summed over the batch: the sum loss, and per Gemm layer (3) its weight gradient (a Gemm)
     * and its bias gradient (a ReduceSum) */
    assert_int_equal(reduces, 1 + 3 * 2);
    /* with a batch dim: 5 forward activations, the loss gradient expanded to the logits, then
     * per hidden layer (2) the gradient of its input (a Gemm) and of its ReLU; the first layer
     * needs no input gradient */
    assert_int_equal(with_batch, 5 + 1 + 2 * 2);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].flags & IR_VF_PARAM)
            assert_int_equal(rw_dgraph_value_dim_in(dg, v, batch), -1);
    print_message("mlp training graph: %d nodes, %d components, batch in %d outputs and %d reduce "
                  "axes\n",
                  g->n_nodes, rw_dgraph_n_components(dg), with_batch, reduces);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    ir_graph_free(fwd);
}

/* The transformer encoder: batch runs from the input to the output. Building on BERT-base's
 * training graph (~1800 nodes) takes about a millisecond. */
static void test_transformer_and_speed(void **state) {
    (void)state;
    const char *names[1] = {"src"};
    ir_shape s = TU_SHAPE(2, 16, 32);
    ir_graph *g = load("tests/fixtures/numeric/transformer_encoder/model.onnx", 1, names, &s);
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    int batch = rw_dgraph_value_comp(dg, g->inputs[0], 0);
    int out = g->outputs[0];
    assert_int_equal(rw_dgraph_value_dim_in(dg, out, batch), 0);
    assert_int_equal(rw_dgraph_comp_length(dg, batch), 2);
    rw_dgraph_free(dg);
    ir_graph_free(g);

    ir_graph *b = load("tests/fixtures/structure/bert_base_encoder.onnx", 0, NULL, NULL);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(b, NULL, &st, &d);
    if (!tg) fail_msg("%s", d.msg);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dg = rw_dgraph_build(tg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(dg);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("bert training graph: %d nodes, %d components, D-graph in %.2f ms\n", tg->n_nodes,
                  rw_dgraph_n_components(dg), ms);
    assert_true(ms < 500); /* linear: milliseconds, with a wide margin for a loaded machine */
    rw_dgraph_free(dg);
    ir_graph_free(tg);
    ir_graph_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_paper_example),
        cmocka_unit_test(test_reduce_and_broadcast),
        cmocka_unit_test(test_mlp_training_batch),
        cmocka_unit_test(test_transformer_and_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
