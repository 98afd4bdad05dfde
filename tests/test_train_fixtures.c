/* test_train_fixtures.c - training graphs of the committed training-mode fixtures against
 * PyTorch (tests/fixtures/numeric/<name>/, references written by gen_fixtures.py --train-refs):
 * the sum loss and the gradient of every parameter, one SGD and one Adam step and the mse / ce
 * losses where the fixture has references for them, each judged by rt-check.h's criterion against
 * magpie's float64 run of the training graph with PyTorch's float32 result as the yardstick:
 * magpie's error is at most k = 10 times PyTorch's own, or 1e-3 of the output's norm (floored at
 * 1e-6 of the largest of its kind); the executor's
 * measured peak of the eager training order equals sched_memory_compute's byte for byte; and
 * the training graph exported to ONNX and imported again runs to the same outputs.
 * One cmocka test per fixture, so a failure names its fixture. */
#include "test-check.h"

#include <sys/wait.h>
#include <unistd.h>

#include "rt.h"
#include "schedule.h"

#define TOL 1e-3 /* rtol against float64: PyTorch sums in other orders */

static const char *const fixtures[] = {TU_NUMERIC_TRAIN_FIXTURES};

typedef struct fx {
    const char *name;
    char dir[1024];
    ir_graph *fwd;
    ir_blob *input;
    ir_dtype in_dtype;
    ir_shape in_shape;
} fx;

static bool exists(const fx *f, const char *file) {
    char p[2048];
    if (snprintf(p, sizeof p, "%s/%s", f->dir, file) >= (int)sizeof p)
        fail_msg("%s: path too long: %s/%s", f->name, f->dir, file);
    return access(p, R_OK) == 0;
}

static ir_blob *read_npy(const fx *f, const char *file, ir_dtype *t, ir_shape *s) {
    char p[2048];
    ir_diag d = {{0}};
    ir_blob *b = NULL;
    if (snprintf(p, sizeof p, "%s/%s", f->dir, file) >= (int)sizeof p)
        fail_msg("%s: path too long: %s/%s", f->name, f->dir, file);
    if (ir_npy_read(p, t, s, &b, &d) != IR_OK) fail_msg("%s: %s", f->name, d.msg);
    return b;
}

static void sanitize(const char *name, char *out, size_t n) {
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char c = name[k];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        out[k] = ok ? c : '_';
    }
    out[k] = 0;
}

/* Every output named "<param><suffix>" (param: a parameter of the forward graph) against
 * "<prefix><sanitized param>.npy", and the loss (output 0) against loss_file, all judged at once
 * (the floor of each kind's scale spans them): magpie's float32 output (r) against its float64
 * run (r64), PyTorch's float32 reference as the original's float32 result. Some gradients are
 * zero in exact arithmetic (the bias of a convolution that feeds a training-mode BatchNorm: the
 * batch mean removes it); both float32 results are then noise around the float64 one, and the
 * criterion judges magpie's noise by PyTorch's. *worst gets the largest error over its bound.
 * Returns the number of parameters checked. */
static int check_all(const fx *f, const ir_graph *tg, const rt_result *r, const rt_result *r64,
                     const char *suffix, const char *prefix, const char *loss_file, double *worst) {
    enum { MAXP = 1024 };
    static char files[MAXP][600];
    static const char *names[MAXP];
    static const ir_tensor *opt[MAXP];
    static ir_tensor torch[MAXP], ref[MAXP];
    static rt_out_check res[MAXP];
    static ir_blob *blobs[MAXP];
    int n = 0, ks[MAXP];
    size_t sl = strlen(suffix);
    snprintf(files[n], sizeof files[n], "%s", loss_file);
    ks[n++] = 0;
    for (int k = 1; k < tg->n_outputs && n < MAXP; k++) {
        const char *name = tg->values[tg->outputs[k]].name;
        size_t l = strlen(name);
        if (l <= sl || strcmp(name + l - sl, suffix) != 0) continue;
        char base[512], san[512];
        snprintf(base, sizeof base, "%.*s", (int)(l - sl), name);
        int pv = ir_graph_find_value(f->fwd, base);
        if (pv < 0 || !(f->fwd->values[pv].flags & IR_VF_PARAM)) continue; /* optimizer state */
        sanitize(base, san, sizeof san);
        snprintf(files[n], sizeof files[n], "%s%s.npy", prefix, san);
        if (!exists(f, files[n]))
            fail_msg("%s: no reference %s for output '%s'", f->name, files[n], name);
        ks[n++] = k;
    }
    for (int i = 0; i < n; i++) {
        int k = ks[i];
        names[i] = tg->values[tg->outputs[k]].name;
        opt[i] = &r->outputs[k];
        ref[i] = r64->outputs[k];
        ir_dtype t;
        ir_shape s;
        blobs[i] = read_npy(f, files[i], &t, &s);
        if (ir_shape_numel(&s) != ir_shape_numel(&opt[i]->shape))
            fail_msg("%s: output '%s' has %lld elements, %s has %lld", f->name, names[i],
                     (long long)ir_shape_numel(&opt[i]->shape), files[i],
                     (long long)ir_shape_numel(&s));
        /* PyTorch's scalar loss may be shaped () or (1): the output's shape */
        torch[i] = (ir_tensor){.dtype = t, .shape = opt[i]->shape, .data = ir_blob_data(blobs[i])};
    }
    rt_check_opts o = {.rtol = TOL, .k = -1};
    bool ok = rt_check_outputs(n, names, opt, torch, ref, &o, res);
    *worst = 0;
    for (int i = 0; i < n; i++) {
        const rt_out_check *c = &res[i];
        if (!c->pass)
            fail_msg("%s: output '%s' vs %s: %s error %.3g against float64, PyTorch's %.3g, "
                     "bound %.3g (norm %.3g)",
                     f->name, names[i], files[i], c->why ? c->why : "", c->err_opt, c->err_orig,
                     c->bound, c->ref_norm);
        *worst = fmax(*worst, c->err_opt / fmax(c->bound, 1e-300));
        ir_blob_unref(blobs[i]);
    }
    assert_true(ok);
    return n - 1;
}

static int load(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->name = *state;
    tu_src_path("tests/fixtures/numeric/", f->dir, sizeof f->dir);
    strncat(f->dir, f->name, sizeof f->dir - strlen(f->dir) - 1);
    *state = f;
    if (!exists(f, "loss.npy")) return 0; /* reported by the test */
    ir_diag d = {{0}};
    ir_status st;
    char p[2048];
    snprintf(p, sizeof p, "%s/model.onnx", f->dir);
    ir_import_opts io = {0};
    f->fwd = ir_onnx_load(p, &io, &st, &d);
    if (!f->fwd) {
        print_error("%s: import: %s\n", f->name, d.msg);
        return -1;
    }
    f->input = read_npy(f, "input_0.npy", &f->in_dtype, &f->in_shape);
    return 0;
}

static int unload(void **state) {
    fx *f = *state;
    ir_graph_free(f->fwd);
    ir_blob_unref(f->input);
    free(f);
    return 0;
}

/* Builds, runs (in float32 and float64) and checks memory; on return r holds the outputs.
 * extra binds the loss's target or labels. */
static ir_graph *train_and_run(const fx *f, const ir_train_opts *o, rt_binding *extra, int n_extra,
                               tu_ref *ref) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(f->fwd, o, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", f->name, d.msg);
    rt_binding b[2];
    b[0] = (rt_binding){.value = tg->inputs[0],
                        .dtype = f->in_dtype,
                        .shape = f->in_shape,
                        .data = ir_blob_data(f->input)};
    if (n_extra) {
        b[1] = *extra;
        b[1].value = ir_graph_find_value(tg, o->loss == IR_LOSS_CE ? "labels" : "target");
    }
    rt_options ro = {.seed = 1};
    tu_ref_run(tg, b, 1 + n_extra, &ro, ref, f->name);
    const rt_result *r = &ref->r32;
    sched_memory m;
    if (sched_memory_compute(tg, NULL, &m, &d) != IR_OK) fail_msg("%s: %s", f->name, d.msg);
    if (m.peak_bytes != r->peak_bytes)
        fail_msg("%s: measured peak %zu bytes, simulated %zu", f->name, r->peak_bytes,
                 m.peak_bytes);
    for (int s = 0; s < m.n_steps; s++)
        if (m.step_bytes[s] != r->step_bytes[s])
            fail_msg("%s: step %d: measured %zu bytes, simulated %zu", f->name, s, r->step_bytes[s],
                     m.step_bytes[s]);
    sched_memory_free(&m);
    return tg;
}

/* Saves tg, imports it again with its data inputs named, runs it and judges every output against
 * the first run's float64 reference. */
static void round_trip(const fx *f, const ir_graph *tg, const tu_ref *ref) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/magpie_train_%s_%d.onnx", f->name, (int)getpid());
    ir_diag d = {{0}};
    ir_status st;
    if (ir_onnx_save(tg, path, &d) != IR_OK) fail_msg("%s: export: %s", f->name, d.msg);
    const char *data[1] = {tg->values[tg->inputs[0]].name};
    ir_import_opts io = {.n_data = 1, .data_names = data};
    ir_graph *g2 = ir_onnx_load(path, &io, &st, &d);
    unlink(path);
    if (!g2) fail_msg("%s: re-import: %s", f->name, d.msg);
    assert_int_equal(g2->n_outputs, tg->n_outputs);
    rt_binding b = {.value = g2->inputs[0],
                    .dtype = f->in_dtype,
                    .shape = f->in_shape,
                    .data = ir_blob_data(f->input)};
    rt_result r2 = {0};
    rt_options ro = {.seed = 1};
    if (rt_run(g2, &b, 1, &ro, &r2, &d) != IR_OK)
        fail_msg("%s: re-imported run: %s", f->name, d.msg);
    for (int k = 0; k < tg->n_outputs; k++)
        assert_string_equal(g2->values[g2->outputs[k]].name, tg->values[tg->outputs[k]].name);
    tu_expect_close(ref, g2, &r2, "re-imported");
    rt_result_free(&r2);
    ir_graph_free(g2);
}

static void test_fixture(void **state) {
    fx *f = *state;
    if (!exists(f, "loss.npy"))
        fail_msg("%s: no training references (run gen_fixtures.py --train-refs)", f->name);
    double worst;
    tu_ref r = {0};
    ir_graph *tg = train_and_run(f, &(ir_train_opts){0}, NULL, 0, &r);
    int n = check_all(f, tg, &r.r32, &r.r64, ".grad", "grad_", "loss.npy", &worst);
    assert_int_equal(n, tg->n_outputs - 1);
    print_message("%s: %d parameters, worst error/bound %.2g, eager peak %zu bytes\n", f->name, n,
                  worst, r.r32.peak_bytes);
    round_trip(f, tg, &r);
    tu_ref_free(&r);
    ir_graph_free(tg);

    static const struct {
        ir_optimizer_kind k;
        const char *prefix;
    } optim[] = {{IR_OPTIM_SGD, "sgd_"}, {IR_OPTIM_ADAM, "adam_"}};
    for (int i = 0; i < 2; i++) {
        bool have = false;
        for (int k = 0; k < f->fwd->n_values && !have; k++) {
            char san[512], file[600];
            sanitize(f->fwd->values[k].name, san, sizeof san);
            snprintf(file, sizeof file, "%s%s.npy", optim[i].prefix, san);
            have = (f->fwd->values[k].flags & IR_VF_PARAM) && exists(f, file);
        }
        if (!have) continue;
        tg = train_and_run(f, &(ir_train_opts){.optimizer = optim[i].k, .lr = 0.01}, NULL, 0, &r);
        n = check_all(f, tg, &r.r32, &r.r64, ".new", optim[i].prefix, "loss.npy", &worst);
        assert_true(n > 0);
        print_message("%s: %s step, %d parameters, worst error/bound %.2g\n", f->name,
                      optim[i].prefix, n, worst);
        tu_ref_free(&r);
        ir_graph_free(tg);
    }
    if (exists(f, "target.npy")) {
        ir_dtype t;
        ir_shape s;
        ir_blob *tb = read_npy(f, "target.npy", &t, &s);
        rt_binding e = {.dtype = t, .shape = s, .data = ir_blob_data(tb)};
        tg = train_and_run(f, &(ir_train_opts){.loss = IR_LOSS_MSE}, &e, 1, &r);
        n = check_all(f, tg, &r.r32, &r.r64, ".grad", "grad_mse_", "loss_mse.npy", &worst);
        print_message("%s: mse loss, %d parameters, worst error/bound %.2g\n", f->name, n, worst);
        tu_ref_free(&r);
        ir_graph_free(tg);
        ir_blob_unref(tb);
        tb = read_npy(f, "labels.npy", &t, &s);
        e = (rt_binding){.dtype = t, .shape = s, .data = ir_blob_data(tb)};
        tg = train_and_run(f, &(ir_train_opts){.loss = IR_LOSS_CE}, &e, 1, &r);
        n = check_all(f, tg, &r.r32, &r.r64, ".grad", "grad_ce_", "loss_ce.npy", &worst);
        print_message("%s: ce loss, %d parameters, worst error/bound %.2g\n", f->name, n, worst);
        tu_ref_free(&r);
        ir_graph_free(tg);
        ir_blob_unref(tb);
    }
}

/* Every full-size structure model (weights as graph inputs, so nothing runs) gets a training
 * graph: builder coverage of real architectures, and the eager training graph's memory. */
static void test_structure_models(void **state) {
    static const char *const models[] = {
        "bert_base_encoder", "convnext_tiny", "densenet121",  "efficientnet_b0",    "fcn_resnet50",
        "gpt2_small",        "inception_v3",  "mobilenet_v2", "mobilenet_v3_large", "r3d_18",
        "resnet50",          "swin_t",        "unet",         "vit_b_16",
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[256], path[1024];
        snprintf(rel, sizeof rel, "tests/fixtures/structure/%s.onnx", models[i]);
        tu_src_path(rel, path, sizeof path);
        ir_import_opts io = {0};
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *g = ir_onnx_load(path, &io, &st, &d);
        if (!g) fail_msg("%s: import: %s", models[i], d.msg);
        ir_graph *tg = ir_build_training(g, &(ir_train_opts){.optimizer = IR_OPTIM_ADAM}, &st, &d);
        if (!tg) fail_msg("%s: %s", models[i], d.msg);
        ir_train_summary ts;
        ir_train_summarize(tg, &ts);
        assert_int_equal(ts.grad_bytes, ts.param_bytes);
        assert_int_equal(ts.state_bytes, 2 * ts.param_bytes);
        sched_memory m;
        if (sched_memory_compute(tg, NULL, &m, &d) != IR_OK) fail_msg("%s: %s", models[i], d.msg);
        print_message("%-20s %5d -> %5d nodes, %3d params, eager training peak %.1f MiB\n",
                      models[i], g->n_nodes, tg->n_nodes, ts.n_params,
                      (double)m.peak_bytes / (1 << 20));
        sched_memory_free(&m);
        ir_graph_free(tg);
        ir_graph_free(g);
    }
}

/* --frozen (the importer's regex) leaves the matching initializers without gradients. */
static void test_frozen_import(void **state) {
    char path[1024];
    tu_src_path("tests/fixtures/numeric/mlp_dropout_train/model.onnx", path, sizeof path);
    ir_import_opts io = {.frozen_regex = "^net\\.0\\."};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(path, &io, &st, &d);
    if (!g) fail_msg("import: %s", d.msg);
    ir_graph *tg = ir_build_training(g, NULL, &st, &d);
    if (!tg) fail_msg("%s", d.msg);
    assert_int_equal(tg->n_outputs, 5); /* loss and net.3.*, net.6.* */
    assert_true(ir_graph_find_value(tg, "net.0.weight.grad") < 0);
    assert_true(ir_graph_find_value(tg, "net.3.weight.grad") >= 0);
    ir_graph_free(tg);
    ir_graph_free(g);
}

/* The relative error of a against ref (n elements of dtype rt): whether `magpie run` wrote the
 * gradients it computes (outputs far from zero; their numerics are test_fixture's). */
static double rel_err(const ir_tensor *a, const void *ref, ir_dtype rt, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ir_load_f64(a->data, a->dtype, i), y = ir_load_f64(ref, rt, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return sqrt(num) / fmax(sqrt(den), 1e-12);
}

/* `magpie run --train` writes DIR/loss.npy and DIR/<param>.grad.npy, equal to PyTorch's;
 * `magpie inspect --train --json` reports the training memory. */
static void test_cli_train(void **state) {
    const char *bin = getenv("MAGPIE_BIN");
    if (!bin) skip();
    char fixture[1024], dir[256], cmd[4096];
    tu_src_path("tests/fixtures/numeric/mlp_dropout_train", fixture, sizeof fixture);
    snprintf(dir, sizeof dir, "/tmp/magpie_cli_train_%d", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "'%s' run '%s/model.onnx' --train --loss mse -i '%s/input_0.npy' -i '%s/target.npy' "
             "-o '%s' >/dev/null",
             bin, fixture, fixture, fixture, dir);
    assert_int_equal(system(cmd), 0);
    fx f = {.name = "cli"};
    snprintf(f.dir, sizeof f.dir, "%s", dir);
    static const char *const pairs[][2] = {{"loss.npy", "loss_mse.npy"},
                                           {"net.0.weight.grad.npy", "grad_mse_net.0.weight.npy"},
                                           {"net.6.bias.grad.npy", "grad_mse_net.6.bias.npy"}};
    for (int i = 0; i < 3; i++) {
        ir_dtype t1, t2;
        ir_shape s1, s2;
        ir_blob *got = read_npy(&f, pairs[i][0], &t1, &s1);
        fx ref = {.name = "ref"};
        snprintf(ref.dir, sizeof ref.dir, "%s", fixture);
        ir_blob *want = read_npy(&ref, pairs[i][1], &t2, &s2);
        ir_tensor g = {.dtype = t1, .shape = s1, .data = ir_blob_data(got)};
        assert_true(ir_shape_eq(&s1, &s2));
        double e = rel_err(&g, ir_blob_data(want), t2, ir_shape_numel(&s2));
        if (!(e <= TOL)) fail_msg("%s: relative error %.3g", pairs[i][0], e);
        ir_blob_unref(got);
        ir_blob_unref(want);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    /* a training option without --train is a usage error */
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s/model.onnx' --optimizer adam 2>/dev/null", bin,
             fixture);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd,
             "'%s' inspect '%s/model.onnx' --train --optimizer adam --json | grep -q "
             "'\"optimizer_state_bytes\":15440'", /* 2 x the parameters' 7720 */
             bin, fixture);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    struct CMUnitTest tests[sizeof fixtures / sizeof fixtures[0]];
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        tests[i] = (struct CMUnitTest){.name = fixtures[i],
                                       .test_func = test_fixture,
                                       .setup_func = load,
                                       .teardown_func = unload,
                                       .initial_state = (void *)fixtures[i]};
    const struct CMUnitTest more[] = {cmocka_unit_test(test_structure_models),
                                      cmocka_unit_test(test_frozen_import),
                                      cmocka_unit_test(test_cli_train)};
    int failed = cmocka_run_group_tests_name("train_fixtures", tests, NULL, NULL);
    return failed + cmocka_run_group_tests_name("train_models", more, NULL, NULL);
}
