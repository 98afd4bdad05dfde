/* test_rt_check.c - the float64-referenced criterion (runtime/rt-check.h) that `magpie verify`
 * and the tests share:
 *  - on hand-made tensors: an output passes within rtol of the float64 result or within k times
 *    the original's own float32 error, and fails beyond both; an output that is zero but for
 *    rounding is judged on the scale of its kind's largest output (1e-6 of it), never on its own
 *    noise, and kinds do not lend each other their scale; missing outputs, shape and dtype
 *    mismatches, NaN and unequal integers fail; kinds come from ir_build_training's names;
 *  - on a real training graph (cnn_bn_train: convolutions, batch norms, its bias gradients zero
 *    but for rounding): the graph itself passes against its float64 run, and a deliberately wrong
 *    plan fails: one gradient perturbed by 1e-3 relative, or one slice of one weight perturbed
 *    in the "optimized" graph;
 *  - `magpie verify` of that model against itself exported exits 0, against the export with the
 *    perturbed weight slice exits 3 and names the output. */
#include "test-check.h"

#include <unistd.h>

#define N 64

static ir_tensor f32(float *p, int64_t n) {
    return (ir_tensor){.dtype = IR_F32, .shape = {.rank = 1, .dims = {n}}, .data = p};
}
static ir_tensor f64(double *p, int64_t n) {
    return (ir_tensor){.dtype = IR_F64, .shape = {.rank = 1, .dims = {n}}, .data = p};
}

/* One output: ref64[i] = r, orig32 = r + e_orig (rounded to float), opt = r + e_opt. */
static bool judge1(double r_scale, double e_orig, double e_opt, const rt_check_opts *o,
                   rt_out_check *c) {
    static double ref[N];
    static float orig[N], opt[N];
    for (int i = 0; i < N; i++) {
        ref[i] = r_scale * sin(1.0 + i);
        double dir = cos(3.0 * i) / sqrt(N / 2.0); /* about unit norm */
        orig[i] = (float)(ref[i] + e_orig * dir);
        opt[i] = (float)(ref[i] + e_opt * dir);
    }
    ir_tensor to = f32(opt, N), tg = f32(orig, N), tr = f64(ref, N);
    const ir_tensor *po = &to;
    const char *name = "y";
    return rt_check_outputs(1, &name, &po, &tg, &tr, o, c);
}

static void test_bound(void **state) {
    (void)state;
    rt_out_check c;
    /* norm ~ sqrt(32) = 5.7: rtol 1e-4 allows ~5.7e-4 */
    assert_true(judge1(1, 0, 1e-4, NULL, &c));
    assert_true(c.err_opt < c.bound);
    assert_false(judge1(1, 0, 1e-2, NULL, &c));
    assert_true(c.err_opt > c.bound && !c.why);
    /* an original that is itself off by 1e-2 (an ill-conditioned output) allows 10 times that */
    assert_true(judge1(1, 1e-2, 5e-2, NULL, &c));
    assert_true(fabs(c.bound - 10 * c.err_orig) < 1e-12);
    assert_false(judge1(1, 1e-2, 2e-1, NULL, &c));
    /* k 0: rtol alone; a looser rtol */
    assert_false(judge1(1, 1e-2, 5e-2, &(rt_check_opts){.k = 0}, &c));
    assert_true(judge1(1, 0, 1e-2, &(rt_check_opts){.rtol = 1e-2, .k = -1}, &c));
    /* all norms in double, reported */
    assert_true(c.ref_norm > 5 && c.ref_norm < 6.5);
    assert_true(c.scale == c.ref_norm);
}

/* A gradient that is zero but for rounding (b.grad) next to one of norm ~6 (w.grad), and a
 * forward output (the loss) of its own small scale. */
static void test_floor_per_kind(void **state) {
    (void)state;
    static double ref[3][N];
    static float orig[3][N], opt[3][N];
    for (int i = 0; i < N; i++) {
        ref[0][i] = sin(1.0 + i);
        ref[1][i] = 1e-9 * cos(2.0 * i);
        ref[2][i] = 1e-9 * cos(5.0 * i);
        for (int k = 0; k < 3; k++) orig[k][i] = opt[k][i] = (float)ref[k][i];
        opt[1][i] = (float)(ref[1][i] + 5e-11 * sin(7.0 * i)); /* ~4e-10: 1e-10 of w.grad */
    }
    const char *names[3] = {"w.grad", "b.grad", "loss"};
    ir_tensor to[3], tg[3], tr[3];
    const ir_tensor *po[3];
    for (int k = 0; k < 3; k++) {
        to[k] = f32(opt[k], N);
        tg[k] = f32(orig[k], N);
        tr[k] = f64(ref[k], N);
        po[k] = &to[k];
    }
    rt_out_check c[3];
    /* k 0 and an original exact but for its rounding to float: the floor alone carries b.grad,
     * whose own norm (5.7e-9) would allow 5.7e-13 */
    rt_check_opts k0 = {.k = 0};
    assert_true(rt_check_outputs(3, names, po, tg, tr, &k0, c));
    assert_int_equal(c[1].kind, RT_OUT_GRADIENT);
    assert_true(fabs(c[1].scale - 1e-6 * c[0].ref_norm) < 1e-9 * c[1].scale);
    /* the loss is a forward output: the gradients' scale is not lent to it */
    opt[2][5] += 1e-10f;
    assert_false(rt_check_outputs(3, names, po, tg, tr, &k0, c));
    assert_true(c[0].pass && c[1].pass && !c[2].pass);
    assert_int_equal(c[2].kind, RT_OUT_FORWARD);
    opt[2][5] = orig[2][5];
    /* float32 noise 10x the exact value in the original: other noise of that size in the plan
     * (a relative error of ~2 against the original) passes by k, 100x more fails */
    for (int i = 0; i < N; i++) {
        orig[1][i] = (float)(1e-8 * sin(7.0 * i));
        opt[1][i] = (float)(-1e-8 * sin(7.0 * i));
    }
    assert_true(rt_check_outputs(3, names, po, tg, tr, NULL, c));
    assert_true(c[1].bound >= 9 * c[1].err_orig);
    for (int i = 0; i < N; i++) opt[1][i] = (float)(1e-6 * sin(7.0 * i));
    assert_false(rt_check_outputs(3, names, po, tg, tr, NULL, c));
    assert_false(c[1].pass);
}

static void test_mismatches(void **state) {
    (void)state;
    static double ref[N];
    static float a[N], nan_[N];
    for (int i = 0; i < N; i++) ref[i] = a[i] = nan_[i] = (float)i;
    nan_[3] = NAN;
    ir_tensor tr = f64(ref, N), ta = f32(a, N), tn = f32(nan_, N), short_ = f32(a, N - 1);
    const char *name = "y";
    rt_out_check c;
    const ir_tensor *none = NULL, *pn = &tn, *ps = &short_, *pa = &ta;
    assert_false(rt_check_outputs(1, &name, &none, &ta, &tr, NULL, &c));
    assert_string_equal(c.why, "missing");
    assert_false(rt_check_outputs(1, &name, &pn, &ta, &tr, NULL, &c));
    assert_string_equal(c.why, "not finite");
    assert_false(rt_check_outputs(1, &name, &ps, &ta, &tr, NULL, &c));
    assert_string_equal(c.why, "shape");
    ir_tensor td = f64(ref, N);
    const ir_tensor *pd = &td;
    assert_false(rt_check_outputs(1, &name, &pd, &ta, &tr, NULL, &c));
    assert_string_equal(c.why, "dtype");
    /* NaN in the original bounds nothing: the plan must still be finite and close */
    assert_true(rt_check_outputs(1, &name, &pa, &tn, &tr, NULL, &c));
    /* integers: equal to the original's float32 run, bit for bit */
    int64_t i1[4] = {1, 2, 3, 4}, i2[4] = {1, 2, 3, 5};
    ir_tensor t1 = {.dtype = IR_I64, .shape = {.rank = 1, .dims = {4}}, .data = i1};
    ir_tensor t2 = t1;
    t2.data = i2;
    const ir_tensor *p1 = &t1, *p2 = &t2;
    assert_true(rt_check_outputs(1, &name, &p1, &t1, &t1, NULL, &c));
    assert_true(c.exact);
    assert_false(rt_check_outputs(1, &name, &p2, &t1, &t1, NULL, &c));
    assert_string_equal(c.why, "unequal");
}

static void test_kinds(void **state) {
    (void)state;
    assert_int_equal(rt_output_kind_of("loss"), RT_OUT_FORWARD);
    assert_int_equal(rt_output_kind_of("features.4.bias.grad"), RT_OUT_GRADIENT);
    assert_int_equal(rt_output_kind_of("fc.weight.new"), RT_OUT_PARAMETER);
    assert_int_equal(rt_output_kind_of("fc.weight.momentum_buffer.new"), RT_OUT_STATE);
    assert_int_equal(rt_output_kind_of("fc.weight.exp_avg.new"), RT_OUT_STATE);
    assert_int_equal(rt_output_kind_of("fc.weight.exp_avg_sq.new"), RT_OUT_STATE);
    assert_int_equal(rt_output_kind_of("output"), RT_OUT_FORWARD);
}

/* ---------------------------------------------------------------- a wrong plan fails */

#define FIXTURE "cnn_bn_train"

static void run32(const ir_graph *g, rt_result *r) {
    rt_options o = {.seed = 3, .fill_missing_data = true};
    ir_diag d = {{0}};
    if (rt_run(g, NULL, 0, &o, r, &d) != IR_OK) fail_msg("run: %s", d.msg);
}

/* Index of the gradient output with the largest norm in r. */
static int largest_gradient(const ir_graph *g, const rt_result *r) {
    int best = -1;
    double bn = -1;
    for (int k = 0; k < g->n_outputs; k++) {
        if (rt_output_kind_of(tu_output_name(g, k)) != RT_OUT_GRADIENT) continue;
        double s = 0;
        for (int64_t i = 0; i < ir_shape_numel(&r->outputs[k].shape); i++) {
            double x = ((const float *)r->outputs[k].data)[i];
            s += x * x;
        }
        if (s > bn) bn = s, best = k;
    }
    assert_true(best >= 0);
    return best;
}

/* A copy of g whose first parameter of rank 4 (a convolution's weight) has its first output
 * channel's slice scaled by (1 + rel). */
static ir_graph *perturbed_weight(const ir_graph *g, double rel, const char **which) {
    ir_graph *c = ir_graph_clone(g);
    assert_non_null(c);
    for (int v = 0; v < c->n_values; v++) {
        ir_value *x = &c->values[v];
        if (!(x->flags & IR_VF_PARAM) || !x->blob || x->dtype != IR_F32 || x->shape.rank != 4)
            continue;
        size_t bytes = ir_value_bytes(x);
        ir_blob *b = ir_blob_new(bytes);
        memcpy(ir_blob_data(b), ir_blob_data(x->blob), bytes);
        float *w = ir_blob_data(b);
        int64_t slice = ir_shape_numel(&x->shape) / x->shape.dims[0];
        for (int64_t i = 0; i < slice; i++) w[i] = (float)(w[i] * (1 + rel));
        ir_blob_unref(x->blob);
        x->blob = b;
        *which = x->name;
        return c;
    }
    fail_msg("no convolution weight with values");
    return NULL;
}

static void test_wrong_plan_fails(void **state) {
    (void)state;
    ir_graph *g = tu_load_training(FIXTURE, NULL);
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &(rt_options){.seed = 3, .fill_missing_data = true}, &ref, FIXTURE);
    rt_result r;
    run32(g, &r);
    double worst = tu_expect_close(&ref, g, &r, FIXTURE " itself");
    print_message(FIXTURE ": the graph itself, worst error/bound %.3g\n", worst);

    /* one gradient 1e-3 off, relative to its norm */
    static rt_out_check res[TU_MAX_CHECK];
    int k = largest_gradient(g, &r);
    float *p = r.outputs[k].data;
    int64_t n = ir_shape_numel(&r.outputs[k].shape);
    for (int64_t i = 0; i < n; i++) p[i] *= 1 + 1e-3f;
    if (tu_check(&ref, g, &r, NULL, res, NULL))
        fail_msg("gradient '%s' 1e-3 off passes", tu_output_name(g, k));
    print_message(FIXTURE ": '%s' 1e-3 off: error %.3g, bound %.3g\n", tu_output_name(g, k),
                  res[k].err_opt, res[k].bound);
    for (int i = 0; i < g->n_outputs; i++)
        if (i != k && !res[i].pass) fail_msg("output %d fails with the others untouched", i);
    rt_result_free(&r);

    /* one slice of one weight 1e-3 off in the "optimized" graph */
    const char *which = NULL;
    ir_graph *bad = perturbed_weight(g, 1e-3, &which);
    run32(bad, &r);
    if (tu_check(&ref, bad, &r, NULL, res, &worst))
        fail_msg("weight '%s' with a slice 1e-3 off passes", which);
    int failed = 0;
    for (int i = 0; i < g->n_outputs; i++) failed += !res[i].pass;
    print_message(FIXTURE ": '%s' slice 1e-3 off: %d of %d outputs fail, worst error/bound %.3g\n",
                  which, failed, g->n_outputs, worst);
    rt_result_free(&r);

    /* magpie verify: the model's export passes, the perturbed one exits 3 */
    char good_path[64], bad_path[64], model[1024], args[2048];
    snprintf(good_path, sizeof good_path, "/tmp/magpie-check-good-%d.onnx", (int)getpid());
    snprintf(bad_path, sizeof bad_path, "/tmp/magpie-check-bad-%d.onnx", (int)getpid());
    ir_diag d = {{0}};
    if (ir_onnx_save(g, good_path, &d) != IR_OK) fail_msg("save: %s", d.msg);
    if (ir_onnx_save(bad, bad_path, &d) != IR_OK) fail_msg("save: %s", d.msg);
    tu_src_path("tests/fixtures/numeric/" FIXTURE "/model.onnx", model, sizeof model);
    tu_proc *pr = malloc(sizeof *pr);
    snprintf(args, sizeof args, "verify %s %s --train --json", model, good_path);
    tu_magpie(pr, args);
    if (pr->rc != 0) fail_msg("verify of the export: exit %d: %s %s", pr->rc, pr->out, pr->err);
    assert_non_null(strstr(pr->out, "\"match\":true"));
    assert_non_null(strstr(pr->out, "\"reference\":\"float64\""));
    assert_non_null(strstr(pr->out, "\"original_error\":"));
    snprintf(args, sizeof args, "verify %s %s --train", model, bad_path);
    tu_magpie(pr, args);
    if (pr->rc != 3)
        fail_msg("verify of the perturbed export: exit %d: %s %s", pr->rc, pr->out, pr->err);
    assert_non_null(strstr(pr->out, "MISMATCH"));
    assert_non_null(strstr(pr->err, "outputs differ"));
    free(pr);
    unlink(good_path);
    unlink(bad_path);
    ir_graph_free(bad);
    tu_ref_free(&ref);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_floor_per_kind),
        cmocka_unit_test(test_mismatches),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_wrong_plan_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
