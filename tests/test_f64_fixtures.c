/* test_f64_fixtures.c - every model of tests/fixtures/numeric/ run in float32 and, as its
 * ir_graph_to_f64 copy, in float64 on the same inputs and weights: the float64 run must execute
 * (no op left without a float64 kernel) and agree with the float32 run to float32 accuracy,
 * judged in double. The same for the training graphs (ir_build_training) of the training
 * fixtures: gradients, and one SGD, momentum and Adam step where the gradients are not rounding
 * noise. Prints one row per graph with the worst relative error; fails at the end naming every
 * graph that failed. */
#include "numeric-fixture.h"

/* float32 results agree with float64 to a few ulps of the accumulated sums: the fixtures' worst
 * is about 1e-6 (the table this test prints); 5e-5 leaves room for other BLAS kernels while
 * catching any kernel that computes something else. */
#define REL_TOL 5e-5
/* A gradient that is zero but for rounding (a conv bias feeding a training-mode BatchNorm) is
 * compared on the scale of the largest output of its kind: its denominator is floored at this
 * fraction of the largest output norm. */
#define NOISE_FLOOR 1e-3

static const char *const train_fixtures[] = {TU_NUMERIC_TRAIN_FIXTURES};

/* The op kinds some passing graph ran in float64 (reported at the end: test_f64_ops covers the
 * others op by op). */
static bool ran[IR_OP_COUNT];

static double norm2(const ir_tensor *t) {
    double s = 0;
    for (int64_t i = 0; i < ir_shape_numel(&t->shape); i++) {
        double v = ir_load_f64(t->data, t->dtype, i);
        s += v * v;
    }
    return sqrt(s);
}

/* The float64 copies of the float bindings of g into f (the float64 graph); blobs[] keeps them. */
static void bind_f64(const ir_graph *f, const rt_binding *in, int n, rt_binding *out,
                     ir_blob **blobs) {
    for (int i = 0; i < n; i++) {
        out[i] = in[i];
        blobs[i] = NULL;
        if (!ir_dtype_is_float(in[i].dtype)) continue;
        int64_t cnt = ir_shape_numel(&in[i].shape);
        blobs[i] = ir_blob_new((size_t)cnt * sizeof(double) + 1);
        double *d = ir_blob_data(blobs[i]);
        for (int64_t k = 0; k < cnt; k++) d[k] = ir_load_f64(in[i].data, in[i].dtype, k);
        out[i].dtype = IR_F64;
        out[i].data = d;
        assert_int_equal(f->values[in[i].value].dtype, IR_F64);
    }
}

/* Runs g in float32 and its float64 copy; true when every output agrees. */
static bool check_graph(const char *what, const ir_graph *g, const rt_binding *bind, int n_bind) {
    ir_diag d = {{0}};
    ir_status st;
    rt_result r32 = {0}, r64 = {0};
    ir_blob *blobs[NF_MAX_IO] = {0};
    rt_binding b64[NF_MAX_IO];
    char why[1400] = "";
    double worst = 0;
    bool ok = false;
    rt_options o = {.seed = 1, .fill_missing_data = true};
    ir_graph *f = ir_graph_to_f64(g, &st, &d);
    if (!f) {
        snprintf(why, sizeof why, "ir_graph_to_f64: %s", d.msg);
        goto out;
    }
    if (rt_run(g, bind, n_bind, &o, &r32, &d) != IR_OK) {
        snprintf(why, sizeof why, "float32 run: %s", d.msg);
        goto out;
    }
    bind_f64(f, bind, n_bind, b64, blobs);
    if (rt_run(f, b64, n_bind, &o, &r64, &d) != IR_OK) {
        snprintf(why, sizeof why, "float64 run: %s", d.msg);
        goto out;
    }
    double big = 0;
    for (int i = 0; i < r64.n_outputs; i++)
        if (ir_dtype_is_float(r64.outputs[i].dtype)) big = fmax(big, norm2(&r64.outputs[i]));
    for (int i = 0; i < r64.n_outputs; i++) {
        const ir_tensor *a = &r32.outputs[i], *b = &r64.outputs[i];
        const char *name = g->values[g->outputs[i]].name;
        int64_t n = ir_shape_numel(&a->shape);
        if (!ir_dtype_is_float(a->dtype)) { /* integer outputs (ArgMax) agree exactly */
            for (int64_t k = 0; k < n; k++)
                if (ir_load_i64(a->data, a->dtype, k) != ir_load_i64(b->data, b->dtype, k)) {
                    snprintf(why, sizeof why, "output '%s' element %lld differs", name,
                             (long long)k);
                    goto out;
                }
            continue;
        }
        if (b->dtype != IR_F64) {
            snprintf(why, sizeof why, "output '%s' is %s", name, ir_dtype_name(b->dtype));
            goto out;
        }
        double num = 0;
        for (int64_t k = 0; k < n; k++) {
            double e = ir_load_f64(a->data, a->dtype, k) - ((const double *)b->data)[k];
            num += e * e;
        }
        double rel = sqrt(num) / fmax(fmax(norm2(b), NOISE_FLOOR * big), 1e-30);
        if (!(rel <= REL_TOL)) { /* also NaN */
            snprintf(why, sizeof why, "output '%s': float32 vs float64 relative error %.3g > %g",
                     name, rel, REL_TOL);
            goto out;
        }
        worst = fmax(worst, rel);
    }
    ok = true;
    for (int i = 0; i < f->n_nodes; i++)
        if (f->nodes[i].op < IR_OP_COUNT) ran[f->nodes[i].op] = true;
out:
    if (ok)
        printf("  %-44s %10.2e %9.2f %9.2f\n", what, worst, r32.wall_seconds * 1e3,
               r64.wall_seconds * 1e3);
    else
        printf("FAIL %s: %s\n", what, why);
    rt_result_free(&r32);
    rt_result_free(&r64);
    ir_graph_free(f);
    for (int i = 0; i < NF_MAX_IO; i++) ir_blob_unref(blobs[i]);
    return ok;
}

static void header(void) {
    printf("  %-44s %10s %9s %9s\n", "graph", "rel err", "f32 ms", "f64 ms");
}

static void test_inference(void **state) {
    (void)state;
    char *names[NF_MAX_FIXTURES];
    int n = nf_list(names, NF_MAX_FIXTURES), failed = 0;
    header();
    for (int i = 0; i < n; i++) {
        nf_fixture fx;
        nf_load(names[i], &fx);
        if (!check_graph(names[i], fx.g, fx.bind, fx.n_in)) failed++;
        nf_free(&fx);
        free(names[i]);
    }
    fflush(stdout);
    if (failed) fail_msg("%d of %d fixtures failed in float64 (FAIL lines above)", failed, n);
}

/* The training graphs: gradients for each training fixture, an SGD or a momentum step on each
 * (alternately), an Adam step where no gradient is rounding noise. */
static void test_training(void **state) {
    (void)state;
    int failed = 0, total = 0;
    header();
    for (size_t i = 0; i < sizeof train_fixtures / sizeof *train_fixtures; i++) {
        nf_fixture fx;
        nf_load(train_fixtures[i], &fx);
        /* Adam turns a gradient that is zero but for rounding into +-lr by its sign: batch norms
         * (a conv bias before one) and attention (the key bias) have such gradients, the MLP
         * none */
        bool adam = strcmp(fx.name, "mlp_dropout_train") == 0;
        ir_train_opts opts[] = {{.loss = IR_LOSS_SUM},
                                {.loss = IR_LOSS_MSE, .optimizer = IR_OPTIM_SGD},
                                {.loss = IR_LOSS_CE, .optimizer = IR_OPTIM_MOMENTUM},
                                {.loss = IR_LOSS_SUM, .optimizer = IR_OPTIM_ADAM}};
        static const char *const opt_names[] = {"sum grads", "mse sgd", "ce momentum", "sum adam"};
        for (int k = 0; k < 4; k++) {
            if (k == 3 && !adam) continue;
            if ((k == 1 || k == 2) && i % 2 != (size_t)(k % 2)) continue; /* half of them each */
            ir_diag d = {{0}};
            ir_status st;
            char what[200];
            snprintf(what, sizeof what, "%s train %s", fx.name, opt_names[k]);
            ir_graph *tg = ir_build_training(fx.g, &opts[k], &st, &d);
            if (!tg) fail_msg("%s: %s", what, d.msg);
            total++;
            if (!check_graph(what, tg, fx.bind, fx.n_in)) failed++;
            ir_graph_free(tg);
        }
        nf_free(&fx);
    }
    printf("op kinds no fixture graph runs (test_f64_ops runs them):");
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (!ran[op]) printf(" %s", ir_op_name((ir_op_kind)op));
    printf("\n");
    fflush(stdout);
    if (failed)
        fail_msg("%d of %d training graphs failed in float64 (FAIL lines above)", failed, total);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_inference),
                                       cmocka_unit_test(test_training)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
