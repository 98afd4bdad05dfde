/* test_sched_train.c - the memory-minimizing order of training graphs (ir_build_training), whose
 * optimizer updates write over their parameters in place (IR_OPF_INPLACE): sched_order_memory
 * returns IR_OK, its claimed peak is sched_memory_compute's and rt_run's measured peak, to the
 * byte, never above the eager peak, and the outputs (updated parameters, optimizer state) are those
 * of the eager order bit for bit. The write-after-read edges of the updates are part of an order's
 * validity: an update run before another reader of its parameter is rejected. */
#include "test-util.h"

#include "rt.h"
#include "schedule.h"

static const char *const fixtures[] = {"mlp_dropout_train", "cnn_bn_train", "resnet_small_train",
                                       "transformer_encoder_train"};

static ir_graph *load_training(const char *name, ir_optimizer_kind k) {
    char path[1200];
    tu_src_path("tests/fixtures/numeric/", path, sizeof path);
    strncat(path, name, sizeof path - strlen(path) - 1);
    strncat(path, "/model.onnx", sizeof path - strlen(path) - 1);
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts io = {0};
    ir_graph *fwd = ir_onnx_load(path, &io, &st, &d);
    if (!fwd) fail_msg("%s: import: %s", name, d.msg);
    ir_graph *tg = ir_build_training(fwd, &(ir_train_opts){.optimizer = k, .lr = 0.01}, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", name, d.msg);
    ir_graph_free(fwd);
    return tg;
}

static void run_order(const char *name, const ir_graph *g, const int *order, rt_result *r) {
    ir_diag d = {{0}};
    rt_options ro = {
        .order = order, .n_order = order ? g->n_nodes : 0, .seed = 1, .fill_missing_data = true};
    if (rt_run(g, NULL, 0, &ro, r, &d) != IR_OK) fail_msg("%s: run: %s", name, d.msg);
}

static void test_memory_order_of_training_graphs(void **state) {
    (void)state;
    static const ir_optimizer_kind optim[] = {IR_OPTIM_NONE, IR_OPTIM_SGD, IR_OPTIM_ADAM};
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        for (size_t k = 0; k < sizeof optim / sizeof optim[0]; k++) {
            ir_graph *g = load_training(fixtures[i], optim[k]);
            ir_diag d = {{0}};
            int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
            sched_dp_stats st;
            /* a budget far above what the searches take: the result is reproducible */
            sched_dp_options o = {.time_budget_s = 600};
            ir_status s = sched_order_memory(g, &o, order, &st, &d);
            if (s != IR_OK) fail_msg("%s/%d: sched_order_memory: %s", fixtures[i], (int)k, d.msg);
            assert_true(sched_order_valid(g, order, g->n_nodes));
            sched_memory m, e;
            assert_int_equal(sched_memory_compute(g, order, &m, &d), IR_OK);
            assert_int_equal(sched_memory_compute(g, NULL, &e, &d), IR_OK);
            assert_true(m.peak_bytes == st.peak_bytes);
            assert_true(m.peak_bytes <= e.peak_bytes);
            rt_result rm, re;
            run_order(fixtures[i], g, order, &rm);
            run_order(fixtures[i], g, NULL, &re);
            if (rm.peak_bytes != m.peak_bytes || re.peak_bytes != e.peak_bytes)
                fail_msg("%s/%d: measured %zu/%zu bytes (memory/eager), computed %zu/%zu",
                         fixtures[i], (int)k, rm.peak_bytes, re.peak_bytes, m.peak_bytes,
                         e.peak_bytes);
            assert_int_equal(rm.n_outputs, re.n_outputs);
            for (int j = 0; j < rm.n_outputs; j++) {
                size_t b = ir_value_bytes(&g->values[g->outputs[j]]);
                if (memcmp(rm.outputs[j].data, re.outputs[j].data, b) != 0)
                    fail_msg("%s/%d: output '%s' differs between the memory and eager orders",
                             fixtures[i], (int)k, g->values[g->outputs[j]].name);
            }
            print_message("%s/%d: peak %zu bytes (eager %zu)\n", fixtures[i], (int)k, m.peak_bytes,
                          e.peak_bytes);
            rt_result_free(&rm);
            rt_result_free(&re);
            sched_memory_free(&m);
            sched_memory_free(&e);
            free(order);
            ir_graph_free(g);
        }
}

/* sched_value_device_bytes: 0 for in-place updates and views, the value's bytes for the rest. */
static void test_device_bytes(void **state) {
    (void)state;
    ir_graph *g = load_training("mlp_dropout_train", IR_OPTIM_ADAM);
    int n_inplace = 0, n_views = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (g->values[v].producer < 0) continue;
        if (ir_value_inplace_of(g, v) >= 0 || ir_value_view_of(g, v) >= 0) {
            n_inplace += ir_value_inplace_of(g, v) >= 0;
            n_views += ir_value_view_of(g, v) >= 0;
            assert_int_equal(sched_value_device_bytes(g, v), 0);
        } else {
            assert_true(sched_value_device_bytes(g, v) == ir_value_bytes(&g->values[v]));
        }
    }
    assert_true(n_inplace > 0);
    assert_true(n_views > 0); /* the backward's transposed operands of its MatMuls */
    ir_graph_free(g);
}

/* w (a parameter) and d are inputs; g1 = Neg(d); a = Relu(w); w.new = SGDUpdate(w, g1). The order
 * g1, update, Relu keeps every data edge but runs the update before Relu reads w: not a valid
 * order for sched_order_valid, sched_memory_compute or rt_run, and sched_order_memory never
 * returns it. */
static void test_update_before_reader_is_invalid(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape s = TU_SHAPE(2, 3);
    int w = ir_graph_add_value(g, "w", IR_F32, &s), dv = ir_graph_add_value(g, "d", IR_F32, &s);
    ir_graph_add_input(g, w);
    ir_graph_add_input(g, dv);
    g->values[dv].flags |= IR_VF_DATA;
    int g1 = ir_graph_add_value(g, "g1", IR_F32, NULL),
        a = ir_graph_add_value(g, "a", IR_F32, NULL),
        wn = ir_graph_add_value(g, "w.new", IR_F32, NULL);
    ir_graph_add_node(g, IR_OP_Neg, "neg", 1, &dv, 1, &g1, 0, NULL);
    ir_graph_add_node(g, IR_OP_Relu, "relu", 1, &w, 1, &a, 0, NULL);
    ir_graph_add_node(g, IR_OP_SGDUpdate, "update", 2, (int[]){w, g1}, 1, &wn, 0, NULL);
    ir_graph_add_output(g, a);
    ir_graph_add_output(g, wn);
    ir_diag d = {{0}};
    for (int k = 0; k < g->n_nodes; k++)
        if (ir_node_infer(g, &g->nodes[k], &d) != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(ir_value_inplace_of(g, wn), w);
    assert_int_equal(sched_value_device_bytes(g, wn), 0);

    static const int bad[] = {0, 2, 1}, good[] = {1, 0, 2};
    assert_false(sched_order_valid(g, bad, 3));
    assert_true(sched_order_valid(g, good, 3));
    sched_memory m;
    assert_int_equal(sched_memory_compute(g, bad, &m, &d), IR_ERR_INVALID);
    rt_result r;
    rt_options ro = {.order = bad, .n_order = 3, .seed = 1, .fill_missing_data = true};
    assert_int_equal(rt_run(g, NULL, 0, &ro, &r, &d), IR_ERR_INVALID);
    int order[3];
    sched_dp_stats st;
    assert_int_equal(sched_order_memory(g, NULL, order, &st, &d), IR_OK);
    assert_true(sched_order_valid(g, order, 3));
    ro.order = order;
    assert_int_equal(rt_run(g, NULL, 0, &ro, &r, &d), IR_OK);
    rt_result_free(&r);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_bytes),
        cmocka_unit_test(test_update_before_reader_is_invalid),
        cmocka_unit_test(test_memory_order_of_training_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
