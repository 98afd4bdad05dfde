/* test_sched_incremental.c - incremental rescheduling (sched-incremental.c): after random local
 * rewrites (remat, swap, split: bench/nasnet.c's, applied around memory hot-spots) of fixture
 * models, NASNet-like graphs and random DAGs, the incremental order is a topological order of the
 * new graph whose peak stays within a small factor of a full reschedule's; when the touched nodes
 * span the whole old order, the result is exactly the full reschedule; bad input is refused. */
#include "test-util.h"

#include "schedule.h"

/* The bench's graph generator and rewrites, compiled into this test. */
#include "../bench/nasnet.c"

/* Peak of the incremental order may exceed the full reschedule's by at most this factor. */
#define PEAK_FACTOR 1.5

/* Small searches keep the test fast; both schedulers get the same options. The time budget is
 * one no machine load can exhaust, so the orders compared below do not depend on timing. */
static const sched_dp_options dpo = {.exact_max_nodes = 14, .beam_width = 32, .time_budget_s = 600};

/* One rewrite of each kind that applies to g; checks the incremental order of each. Returns the
 * number of rewrites checked. */
static int check_rewrites(const ir_graph *g, nas_rng *r, const char *what) {
    ir_diag d = {{0}};
    int n = g->n_nodes, checked = 0;
    int *order = malloc(sizeof(int) * (size_t)n);
    if (sched_order_memory(g, &dpo, order, NULL, &d) != IR_OK) fail_msg("%s: %s", what, d.msg);
    for (int k = 0; k < NAS_KINDS; k++) {
        uint32_t touched[64];
        int nt;
        ir_graph *g2 = nas_rewrite(g, order, (nas_rewrite_kind)k, r, touched, &nt, 64);
        if (!g2) continue;
        assert_int_equal(ir_graph_validate(g2, &d), IR_OK);
        int n2 = g2->n_nodes;
        int *inc = malloc(sizeof(int) * (size_t)n2), *full = malloc(sizeof(int) * (size_t)n2);
        if (sched_incremental(g, order, g2, touched, nt, &dpo, inc, &d) != IR_OK)
            fail_msg("%s %s: %s", what, nas_rewrite_name(k), d.msg);
        if (!sched_order_valid(g2, inc, n2))
            fail_msg("%s %s: the incremental order is not topological", what, nas_rewrite_name(k));
        assert_int_equal(sched_order_memory(g2, &dpo, full, NULL, &d), IR_OK);
        size_t pi = tu_peak(g2, inc), pf = tu_peak(g2, full);
        if ((double)pi > PEAK_FACTOR * (double)pf)
            fail_msg("%s %s: incremental peak %zu, full reschedule %zu", what, nas_rewrite_name(k),
                     pi, pf);
        free(inc);
        free(full);
        ir_graph_free(g2);
        checked++;
    }
    free(order);
    return checked;
}

static void test_fixtures(void **state) {
    static const char *const models[] = {"resnet_small", "densenet_small", "inception_small",
                                         "mobilenet_v2", "unet_upsample",  "vit_small",
                                         "gpt_small"};
    nas_rng r = {.s = 11};
    int checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[256], path[1024];
        snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", models[i]);
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
        if (!g) fail_msg("%s", d.msg);
        checked += check_rewrites(g, &r, models[i]);
        ir_graph_free(g);
    }
    assert_true(checked >= 12);
}

static void test_nasnet(void **state) {
    nas_rng r = {.s = 5};
    int checked = 0;
    for (int i = 0; i < 6; i++) {
        ir_graph *g = nas_build(&r, 60 + 20 * i, 8, 16);
        assert_non_null(g);
        char what[32];
        snprintf(what, sizeof what, "nasnet %d", i);
        checked += check_rewrites(g, &r, what);
        ir_graph_free(g);
    }
    assert_true(checked >= 15);
}

/* A random DAG of Relu/Sigmoid/Add/Concat nodes over [1, c, 8, 8] tensors of random widths. */
static ir_graph *random_dag(nas_rng *r, int n_nodes) {
    nb b = {.g = ir_graph_new(), .r = r};
    ir_shape s = ir_shape_make(4, (int64_t[]){1, 4, 8, 8});
    int *vals = malloc(sizeof(int) * (size_t)(n_nodes + 1));
    int nv = 0;
    vals[nv] = value(&b, "x", IR_F32, &s);
    ir_graph_add_input(b.g, vals[nv]);
    b.g->values[vals[nv++]].flags |= IR_VF_DATA;
    bool *read = calloc((size_t)n_nodes + 1, sizeof(bool));
    for (int i = 0; i < n_nodes; i++) {
        /* inputs among the last few values keep the graph long rather than flat */
        int lo = nv > 6 ? nv - 6 : 0;
        int a = lo + nas_below(r, nv - lo), c = lo + nas_below(r, nv - lo);
        int op = nas_below(r, 4), out;
        if (op == 0) {
            out = node(&b, IR_OP_Relu, 1, &vals[a], 0, NULL);
        } else if (op == 1) {
            out = node(&b, IR_OP_Sigmoid, 1, &vals[a], 0, NULL);
        } else if (op == 2 &&
                   ir_shape_eq(&b.g->values[vals[a]].shape, &b.g->values[vals[c]].shape)) {
            out = node(&b, IR_OP_Add, 2, (int[]){vals[a], vals[c]}, 0, NULL);
            read[c] = true;
        } else if (b.g->values[vals[a]].shape.dims[1] + b.g->values[vals[c]].shape.dims[1] > 32) {
            out = node(&b, IR_OP_Relu, 1, &vals[c], 0, NULL);
            read[c] = true;
        } else {
            ir_attr axis = {.name = "axis", .type = IR_ATTR_INT, .i = 1};
            out = node(&b, IR_OP_Concat, 2, (int[]){vals[a], vals[c]}, 1, &axis);
            read[c] = true;
        }
        read[a] = true;
        assert_false(b.failed);
        vals[nv++] = out;
    }
    for (int i = 1; i < nv; i++)
        if (!read[i]) ir_graph_add_output(b.g, vals[i]);
    free(vals);
    free(read);
    return b.g;
}

static void test_random_dags(void **state) {
    nas_rng r = {.s = 99};
    int checked = 0;
    for (int i = 0; i < 30; i++) {
        ir_graph *g = random_dag(&r, 10 + nas_below(&r, 40));
        char what[32];
        snprintf(what, sizeof what, "dag %d", i);
        checked += check_rewrites(g, &r, what);
        ir_graph_free(g);
    }
    assert_true(checked >= 60);
}

/* Touching every node makes the window the whole order: exactly the full reschedule. */
static void test_whole_window_is_full(void **state) {
    nas_rng r = {.s = 3};
    ir_graph *g = nas_build(&r, 80, 8, 16);
    ir_diag d = {{0}};
    int n = g->n_nodes;
    int *order = malloc(sizeof(int) * (size_t)n);
    assert_int_equal(sched_order_memory(g, &dpo, order, NULL, &d), IR_OK);
    uint32_t touched[64];
    int nt;
    ir_graph *g2 = nas_rewrite(g, order, NAS_SWAP, &r, touched, &nt, 64);
    assert_non_null(g2);
    int n2 = g2->n_nodes;
    uint32_t *all = malloc(sizeof(uint32_t) * (size_t)n);
    all[0] = g->nodes[order[0]].id;
    all[1] = g->nodes[order[n - 1]].id;
    int *inc = malloc(sizeof(int) * (size_t)n2), *full = malloc(sizeof(int) * (size_t)n2);
    assert_int_equal(sched_incremental(g, order, g2, all, 2, &dpo, inc, &d), IR_OK);
    assert_int_equal(sched_order_memory(g2, &dpo, full, NULL, &d), IR_OK);
    assert_memory_equal(inc, full, sizeof(int) * (size_t)n2);
    /* Nothing touched: still a valid order (a full reschedule). */
    assert_int_equal(sched_incremental(g, order, g2, NULL, 0, &dpo, inc, &d), IR_OK);
    assert_true(sched_order_valid(g2, inc, n2));
    /* A bad old order is refused. */
    int t = order[0];
    order[0] = order[n - 1];
    order[n - 1] = t;
    assert_int_equal(sched_incremental(g, order, g2, touched, nt, &dpo, inc, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "old order"));
    free(all);
    free(inc);
    free(full);
    free(order);
    ir_graph_free(g2);
    ir_graph_free(g);
}

/* On an unchanged chain the window is a few positions and the result is the old order. */
static void test_chain_keeps_order(void **state) {
    nas_rng r = {.s = 1};
    nb b = {.g = ir_graph_new(), .r = &r};
    ir_shape s = ir_shape_make(4, (int64_t[]){1, 4, 8, 8});
    int v = value(&b, "x", IR_F32, &s);
    ir_graph_add_input(b.g, v);
    b.g->values[v].flags |= IR_VF_DATA;
    for (int i = 0; i < 100; i++) v = node(&b, i % 2 ? IR_OP_Relu : IR_OP_Sigmoid, 1, &v, 0, NULL);
    ir_graph_add_output(b.g, v);
    ir_graph *g2 = ir_graph_clone(b.g);
    int order[100], inc[100];
    for (int i = 0; i < 100; i++) order[i] = i;
    uint32_t t = b.g->nodes[50].id;
    ir_diag d = {{0}};
    assert_int_equal(sched_incremental(b.g, order, g2, &t, 1, NULL, inc, &d), IR_OK);
    assert_memory_equal(inc, order, sizeof order);
    ir_graph_free(g2);
    ir_graph_free(b.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),          cmocka_unit_test(test_nasnet),
        cmocka_unit_test(test_random_dags),       cmocka_unit_test(test_whole_window_is_full),
        cmocka_unit_test(test_chain_keeps_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
