/* test_gpu_cost.c - the "cuda" cost back-end (gpu/gpu-cost.cu) through the profiler.
 *
 * Without CUDA in the build, or without a usable GPU, the back-end must refuse cleanly:
 * prof_open("cuda") fails with IR_ERR_UNSUPPORTED and a message saying why, and the test passes
 * after printing it. With a GPU, a small fixture graph (a Conv, a MatMul, an Add and a Softmax)
 * is profiled and each node's measured time is compared with the analytic h200 roofline: times
 * must be positive and finite, and measured/analytic within 0.05x..50x (a sanity bound, not an
 * accuracy claim: the ratio is printed). Then every node of several structure fixtures (3-D
 * convs, transposed convs, concatenations, layer-norms, attention) and of two training graphs
 * (weight gradients, norm gradients, a loss, Adam) must be timed without the back-end failing
 * on any of them. */
#include "test-util.h"

#include "prof.h"

#include <strings.h>

/* Whether this build and machine can time on a GPU; the reason when not. */
static bool cuda_usable(char *why, size_t n) {
    const prof_backend *be = prof_cuda_backend();
    if (!be) {
        snprintf(why, n, "magpie was built without CUDA");
        return false;
    }
    return be->available(why, n);
}

static void test_refuses_without_gpu(void **state) {
    (void)state;
    char why[256] = "";
    if (cuda_usable(why, sizeof why)) skip();
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    prof_options o = {.no_db = true};
    prof_model *m = prof_open("cuda", &o, &st, &d);
    assert_null(m);
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_true(d.msg[0] != 0);
    assert_non_null(strcasestr(d.msg, "cuda"));
    printf("cuda back-end unavailable (%s): prof_open says: %s\n", why, d.msg);
}

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                    int n_attrs, const ir_attr *attrs) {
    int v;
    tu_add_node1(g, op, name, n_in, in, n_attrs, attrs, &v);
    return v;
}

/* Sizes large enough that each op runs well past launch overhead on an H200. */
static ir_graph *fixture(void) {
    static int64_t pads[4] = {1, 1, 1, 1};
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(16, 64, 56, 56));
    int w = add_input(g, "w", TU_SHAPE(64, 64, 3, 3));
    ir_attr conv_attrs[] = {tu_attr_ints("pads", 4, pads)};
    int cin[] = {x, w};
    int y = add_node(g, IR_OP_Conv, "conv", 2, cin, 1, conv_attrs);
    int ain[] = {y, x};
    int s = add_node(g, IR_OP_Add, "add", 2, ain, 0, NULL);
    ir_graph_add_output(g, s);
    int a = add_input(g, "a", TU_SHAPE(4096, 2048));
    int b = add_input(g, "b", TU_SHAPE(2048, 2048));
    int min[] = {a, b};
    int p = add_node(g, IR_OP_MatMul, "matmul", 2, min, 0, NULL);
    ir_attr sm_attrs[] = {tu_attr_int("axis", -1)};
    int q = add_node(g, IR_OP_Softmax, "softmax", 1, &p, 1, sm_attrs);
    ir_graph_add_output(g, q);
    g->opset = 17;
    return g;
}

static void warn_print(void *ctx, const char *msg) {
    int *count = ctx;
    (*count)++;
    printf("  warning: %s\n", msg);
}

static void test_times_against_h200(void **state) {
    (void)state;
    char why[256] = "";
    if (!cuda_usable(why, sizeof why)) {
        printf("skipped: %s\n", why);
        skip();
    }
    ir_graph *g = fixture();
    int warnings = 0;
    prof_options o = {
        .no_db = true, .runs = 11, .warmup = 3, .warn = warn_print, .warn_ctx = &warnings};
    ir_diag d = {{0}};
    ir_status st;
    prof_model *cu = prof_open("cuda", &o, &st, &d);
    if (!cu) fail_msg("prof_open(cuda): %s", d.msg);
    prof_model *an = prof_open("analytic:h200", NULL, &st, &d);
    if (!an) fail_msg("prof_open(analytic:h200): %s", d.msg);
    printf("device: %s\n", prof_device_detail(cu));
    if (prof_profile_graph(cu, g, &d) != IR_OK) fail_msg("profile: %s", d.msg);
    prof_stats ps;
    prof_get_stats(cu, &ps);
    assert_int_equal(ps.failed, 0);
    assert_true(ps.measured >= g->n_nodes);
    printf("%-10s %14s %14s %8s\n", "node", "measured (us)", "h200 (us)", "ratio");
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        double t = prof_node_seconds(cu, g, n), ref = prof_node_seconds(an, g, n);
        double r = t / ref;
        printf("%-10s %14.2f %14.2f %8.3f\n", n->name, t * 1e6, ref * 1e6, r);
        assert_true(isfinite(t) && t > 0);
        assert_true(r > 0.05 && r < 50);
    }
    prof_close(an);
    prof_close(cu);
    ir_graph_free(g);
}

/* Every node of these models must be timed by the back-end itself, not left to the fallback:
 * together they reach each of its paths (cuDNN 2-D and 3-D convs, transposed convs, pooling,
 * batch-norm; cuBLAS batched products; the row kernels; transposes, concatenations, gathers). */
static void test_times_every_node(void **state) {
    (void)state;
    char why[256] = "";
    if (!cuda_usable(why, sizeof why)) {
        printf("skipped: %s\n", why);
        skip();
    }
    static const char *models[] = {
        "tests/fixtures/structure/resnet50.onnx",
        "tests/fixtures/structure/r3d_18.onnx",
        "tests/fixtures/structure/unet.onnx",
        "tests/fixtures/structure/densenet121.onnx",
        "tests/fixtures/structure/inception_v3.onnx",
        "tests/fixtures/structure/swin_t.onnx",
        "tests/fixtures/structure/gpt2_small.onnx",
        "tests/fixtures/structure/mobilenet_v3_large.onnx",
    };
    /* training graphs reach the backward ops (weight gradients, batch-norm and layer-norm
     * gradients, losses, optimizer updates) */
    static const char *train_models[] = {
        "tests/fixtures/structure/resnet50.onnx",
        "tests/fixtures/structure/bert_base_encoder.onnx",
    };
    const size_t n_fwd = sizeof models / sizeof models[0];
    const size_t n_all = n_fwd + sizeof train_models / sizeof train_models[0];
    int warnings = 0;
    prof_options o = {
        .no_db = true, .runs = 3, .warmup = 1, .warn = warn_print, .warn_ctx = &warnings};
    ir_diag d = {{0}};
    ir_status st;
    prof_model *cu = prof_open("cuda", &o, &st, &d);
    if (!cu) fail_msg("prof_open(cuda): %s", d.msg);
    int total_failed = 0;
    for (size_t k = 0; k < n_all; k++) {
        const bool train = k >= n_fwd;
        const char *rel = train ? train_models[k - n_fwd] : models[k];
        char path[1024];
        tu_src_path(rel, path, sizeof path);
        ir_import_opts io = {0};
        ir_graph *g = ir_onnx_load(path, &io, &st, &d);
        if (!g) fail_msg("%s", d.msg);
        if (train) {
            ir_train_opts to = {.loss = IR_LOSS_CE, .optimizer = IR_OPTIM_ADAM};
            ir_graph *tg = ir_build_training(g, &to, &st, &d);
            ir_graph_free(g);
            if (!tg && st == IR_ERR_UNSUPPORTED) { /* autodiff's coverage is not tested here */
                printf("%-48s training: not built (%s)\n", rel, d.msg);
                continue;
            }
            if (!tg) fail_msg("training graph of %s: %s", path, d.msg);
            g = tg;
        }
        prof_stats before, after;
        prof_get_stats(cu, &before);
        if (prof_profile_graph(cu, g, &d) != IR_OK) fail_msg("profile %s: %s", path, d.msg);
        prof_get_stats(cu, &after);
        int failed = after.failed - before.failed;
        printf("%-48s %-9s %5d nodes, %4d signatures timed, %d failed\n", rel,
               train ? "training" : "inference", g->n_nodes, after.measured - before.measured,
               failed);
        total_failed += failed;
        for (int i = 0; i < g->n_nodes; i++) {
            double t = prof_node_seconds(cu, g, &g->nodes[i]);
            if (!(isfinite(t) && t >= 0)) fail_msg("%s: node %s: %g s", path, g->nodes[i].name, t);
        }
        ir_graph_free(g);
    }
    prof_close(cu);
    assert_int_equal(total_failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_without_gpu),
        cmocka_unit_test(test_times_against_h200),
        cmocka_unit_test(test_times_every_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
