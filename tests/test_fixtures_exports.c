/* test_fixtures_exports.c - the models of tests/fixtures/exports/ as today's PyTorch exports them
 * by default (torch.onnx.export's dynamo exporter: opset 20, weights in model.onnx.data beside the
 * model, Gelu; and two dynamo=False exports), read as written: no re-stamping, external data in
 * place. Each runs on input_0.npy and is judged against PyTorch by rt-check.h's criterion with
 * PyTorch's float64 run (ref64_0.npy) as the reference and its float32 run (output_0.npy) as the
 * original: ||magpie - torch64|| <= max(1e-4 ||torch64||, 10 ||torch32 - torch64||). Its training
 * graph is built (loss: the sum of the output) and runs to a finite loss and finite gradients.
 * Prints one row per fixture; every failing fixture prints a FAIL line and the test fails at the
 * end. Made by tests/fixtures/exports/gen_exports.py. */
#include "test-util.h"

#include <dirent.h>
#include <math.h>
#include <unistd.h>

#include "rt-check.h"
#include "rt.h"

#define MAX_FIXTURES 32

/* dir/name/file into path; false when it does not fit. */
static bool fixture_file(char *path, size_t n, const char *dir, const char *name,
                         const char *file) {
    int len = snprintf(path, n, "%s/%s/%s", dir, name, file);
    return len >= 0 && (size_t)len < n;
}

/* An .npy file as a tensor; *blob owns its data. */
static bool read_npy(const char *path, ir_tensor *t, ir_blob **blob, char *why, size_t wn) {
    ir_diag d = {{0}};
    if (ir_npy_read(path, &t->dtype, &t->shape, blob, &d) != IR_OK) {
        snprintf(why, wn, "%s", d.msg);
        return false;
    }
    t->data = ir_blob_data(*blob);
    return true;
}

static bool all_finite(const ir_tensor *t) {
    int64_t n = ir_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(ir_load_f64(t->data, t->dtype, i))) return false;
    return true;
}

/* Builds g's training graph and runs it once: a finite loss and finite gradients. */
static bool check_training(const ir_graph *g, const rt_binding *x, char *why, size_t wn) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(g, NULL, &st, &d);
    if (!tg) {
        snprintf(why, wn, "training graph: %s", d.msg);
        return false;
    }
    rt_binding b = *x;
    b.value = ir_graph_find_value(tg, g->values[x->value].name);
    rt_result r = {0};
    bool ok = false;
    if (b.value < 0 || rt_run(tg, &b, 1, &(rt_options){.seed = 1}, &r, &d) != IR_OK) {
        snprintf(why, wn, "training run: %s", b.value < 0 ? "no input" : d.msg);
    } else if (r.n_outputs < 2) {
        snprintf(why, wn, "training graph has %d outputs", r.n_outputs);
    } else {
        ok = true;
        for (int i = 0; i < r.n_outputs && ok; i++)
            if (!all_finite(&r.outputs[i])) {
                snprintf(why, wn, "training output '%s' is not finite",
                         tg->values[tg->outputs[i]].name);
                ok = false;
            }
    }
    rt_result_free(&r);
    ir_graph_free(tg);
    return ok;
}

static bool run_fixture(const char *dir, const char *name) {
    char path[1100], why[1200] = "";
    ir_tensor x = {0}, t32 = {0}, t64 = {0};
    ir_blob *bx = NULL, *b32 = NULL, *b64 = NULL;
    ir_graph *g = NULL;
    rt_result r = {0};
    rt_out_check c = {0};
    ir_diag d = {{0}};
    ir_status st;
    bool ok = false, ext;

    fixture_file(path, sizeof path, dir, name, "model.onnx.data");
    ext = access(path, F_OK) == 0;
    if (!fixture_file(path, sizeof path, dir, name, "input_0.npy") ||
        !read_npy(path, &x, &bx, why, sizeof why))
        goto out;
    if (!fixture_file(path, sizeof path, dir, name, "output_0.npy") ||
        !read_npy(path, &t32, &b32, why, sizeof why))
        goto out;
    if (!fixture_file(path, sizeof path, dir, name, "ref64_0.npy") ||
        !read_npy(path, &t64, &b64, why, sizeof why))
        goto out;
    fixture_file(path, sizeof path, dir, name, "model.onnx");
    if (!(g = ir_onnx_load(path, NULL, &st, &d))) {
        snprintf(why, sizeof why, "import: %s", d.msg);
        goto out;
    }
    if (g->n_outputs != 1) {
        snprintf(why, sizeof why, "%d outputs, the fixture has 1", g->n_outputs);
        goto out;
    }
    rt_binding b = {.value = g->inputs[0], .dtype = x.dtype, .shape = x.shape, .data = x.data};
    if (rt_run(g, &b, 1, NULL, &r, &d) != IR_OK) {
        snprintf(why, sizeof why, "run: %s", d.msg);
        goto out;
    }
    const char *out_name = g->values[g->outputs[0]].name;
    const ir_tensor *opt = &r.outputs[0];
    rt_check_outputs(1, &out_name, &opt, &t32, &t64, NULL, &c);
    if (!c.pass) {
        snprintf(why, sizeof why,
                 "output '%s': error %.3g against PyTorch's float64, bound %.3g%s%s", out_name,
                 c.err_opt, c.bound, c.why ? ": " : "", c.why ? c.why : "");
        goto out;
    }
    if (!check_training(g, &b, why, sizeof why)) goto out;
    ok = true;
out:
    if (ok)
        printf("  %-24s opset %d%s  %4d nodes  error %.2e  bound %.2e  training graph ok\n", name,
               (int)g->opset, ext ? " (external data)" : "                ", g->n_nodes, c.err_opt,
               c.bound);
    else
        printf("  FAIL %s: %s\n", name, why);
    rt_result_free(&r);
    ir_graph_free(g);
    ir_blob_unref(bx);
    ir_blob_unref(b32);
    ir_blob_unref(b64);
    return ok;
}

static void test_exports(void **state) {
    (void)state;
    char dir[1024];
    tu_src_path("tests/fixtures/exports", dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("no fixtures at %s", dir);
    char *names[MAX_FIXTURES];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < MAX_FIXTURES) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (e->d_name[0] != '.' && access(p, F_OK) == 0) names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    for (int i = 1; i < n; i++) /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    int failed = 0, external = 0;
    for (int i = 0; i < n; i++) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s/model.onnx.data", dir, names[i]);
        external += access(p, F_OK) == 0;
        failed += !run_fixture(dir, names[i]);
        free(names[i]);
    }
    printf("%d fixtures, %d with external data, %d failed\n", n, external, failed);
    assert_true(n >= 5 && external >= 1);
    assert_int_equal(failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exports)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
