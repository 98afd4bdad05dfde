/* test_onnx_expand.c - each standard function op that magpie expands at import, run on one-node
 * models (tests/fixtures/expand/, gen_expand.py) and judged against a float64 loop written here
 * from the ONNX spec: SoftmaxCrossEntropyLoss (weighted mean with ignore_index and log_prob;
 * none), NegativeLogLikelihoodLoss (weighted sum with ignore_index; mean over [N, C, d]),
 * RMSNormalization, CenterCropPad (crop and pad), AffineGrid (2-D with and without
 * align_corners, 3-D) in C (ir/ir-expand-*.c); MeanVarianceNormalization at opsets 13 and 18,
 * the Hann, Blackman and Hamming windows, Shrink and ThresholdedRelu by ONNX's own bodies
 * (ir/proto/onnx-functions.inc). The models are float64 (the bodies' own float32 steps: the
 * windows compute in float32, MeanVarianceNormalization's body types only for float32 inputs,
 * judged at float32's precision). DynamicQuantizeLinear (by its body, through QuantizeLinear)
 * against the spec's formula in float64, and Bernoulli (in C, through RandomUniformLike): 0/1
 * outputs with the right mean per probability, deterministic under its seed attribute. */
#include "test-util.h"

#include "rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXN 256
#define TOL64 1e-12
#define TOL32 1e-6

typedef struct input {
    const char *name;
    ir_dtype t;
    const void *data;
} input;

/* Runs tests/fixtures/expand/<name>.onnx (inputs shaped as the model declares) and returns its
 * outputs. */
static rt_result run_model(const char *name, int n_in, const input *in) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/expand/%s.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
    if (!g) fail_msg("%s: import: %s", name, d.msg);
    for (int i = 0; i < g->n_nodes; i++) /* nothing of the op itself is left */
        assert_true(g->nodes[i].op != IR_OP_OPAQUE);
    rt_binding b[4];
    for (int i = 0; i < n_in; i++) {
        int v = ir_graph_find_value(g, in[i].name);
        assert_true(v >= 0);
        b[i] = (rt_binding){
            .value = v, .dtype = in[i].t, .shape = g->values[v].shape, .data = in[i].data};
    }
    rt_options o = {.seed = 1};
    rt_result r = {0};
    if (rt_run(g, b, n_in, &o, &r, &d) != IR_OK) fail_msg("%s: run: %s", name, d.msg);
    ir_graph_free(g);
    return r;
}

/* Output k of r (float64, or float32 when f32) against want (n values), relative L2 error. */
static void expect(const char *name, const rt_result *r, int k, const double *want, int64_t n,
                   double tol) {
    const ir_tensor *t = &r->outputs[k];
    assert_int_equal(ir_shape_numel(&t->shape), n);
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double got =
            t->dtype == IR_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
        e += (got - want[i]) * (got - want[i]);
        s += want[i] * want[i];
    }
    double rel = sqrt(e) / fmax(sqrt(s), 1e-300);
    print_message("  %-20s output %d: relative error %.2g\n", name, k, rel);
    if (!(rel <= tol)) fail_msg("%s: output %d relative error %.3g > %.3g", name, k, rel, tol);
}

static void fill(double *x, int n, double phase) {
    for (int i = 0; i < n; i++) x[i] = 2.0 * sin(1.3 * i + phase);
}

/* log-softmax over axis 1 of [N, C, D] */
static void log_softmax(const double *s, int N, int C, int Dn, double *lp) {
    for (int n = 0; n < N; n++)
        for (int d = 0; d < Dn; d++) {
            double mx = -INFINITY, sum = 0;
            for (int c = 0; c < C; c++) mx = fmax(mx, s[(n * C + c) * Dn + d]);
            for (int c = 0; c < C; c++) sum += exp(s[(n * C + c) * Dn + d] - mx);
            for (int c = 0; c < C; c++)
                lp[(n * C + c) * Dn + d] = s[(n * C + c) * Dn + d] - mx - log(sum);
        }
}

static const double w4[4] = {0.5, 1.0, 2.0, 1.5};

static void test_losses(void **state) {
    (void)state;
    double s[MAXN], lp[MAXN], want;
    { /* sce_mean_ii: [3, 4, 2], weights, mean, ignore_index 2 */
        int64_t lab[6] = {0, 2, 3, 1, 2, 2};
        fill(s, 24, 0.3);
        log_softmax(s, 3, 4, 2, lp);
        double num = 0, den = 0;
        for (int n = 0; n < 3; n++)
            for (int d = 0; d < 2; d++) {
                int64_t l = lab[n * 2 + d];
                if (l == 2) continue;
                num -= w4[l] * lp[(n * 4 + l) * 2 + d];
                den += w4[l];
            }
        want = num / den;
        input in[2] = {{"scores", IR_F64, s}, {"labels", IR_I64, lab}};
        rt_result r = run_model("sce_mean_ii", 2, in);
        expect("sce_mean_ii", &r, 0, &want, 1, TOL64);
        expect("sce_mean_ii", &r, 1, lp, 24, TOL64);
        rt_result_free(&r);
    }
    { /* sce_none: [4, 5] */
        int64_t lab[4] = {1, 0, 4, 2};
        double per[4];
        fill(s, 20, 1.1);
        log_softmax(s, 4, 5, 1, lp);
        for (int n = 0; n < 4; n++) per[n] = -lp[n * 5 + lab[n]];
        input in[2] = {{"scores", IR_F64, s}, {"labels", IR_I64, lab}};
        rt_result r = run_model("sce_none", 2, in);
        expect("sce_none", &r, 0, per, 4, TOL64);
        rt_result_free(&r);
    }
    { /* nll_sum_ii: [3, 4], weights, sum, ignore_index -1 */
        int64_t t[3] = {3, -1, 0};
        fill(s, 12, 0.1);
        want = 0;
        for (int n = 0; n < 3; n++)
            if (t[n] != -1) want -= w4[t[n]] * s[n * 4 + t[n]];
        input in[2] = {{"input", IR_F64, s}, {"target", IR_I64, t}};
        rt_result r = run_model("nll_sum_ii", 2, in);
        expect("nll_sum_ii", &r, 0, &want, 1, TOL64);
        rt_result_free(&r);
    }
    { /* nll_mean: [2, 4, 3] */
        int64_t t[6] = {0, 3, 1, 2, 2, 0};
        fill(s, 24, 0.9);
        want = 0;
        for (int n = 0; n < 2; n++)
            for (int d = 0; d < 3; d++) want -= s[(n * 4 + t[n * 3 + d]) * 3 + d] / 6.0;
        input in[2] = {{"input", IR_F64, s}, {"target", IR_I64, t}};
        rt_result r = run_model("nll_mean", 2, in);
        expect("nll_mean", &r, 0, &want, 1, TOL64);
        rt_result_free(&r);
    }
}

static void test_norms(void **state) {
    (void)state;
    double x[MAXN], y[MAXN];
    { /* rms_axis1: [2, 3, 4] over axes 1, 2; scale linspace(0.5, 1.6, 12); epsilon 1e-3 as the
         float32 attribute holds it */
        fill(x, 24, 0.2);
        for (int n = 0; n < 2; n++) {
            double ms = 0;
            for (int k = 0; k < 12; k++) ms += x[n * 12 + k] * x[n * 12 + k] / 12.0;
            for (int k = 0; k < 12; k++)
                y[n * 12 + k] = x[n * 12 + k] / sqrt(ms + (double)1e-3f) * (0.5 + 0.1 * k);
        }
        input in[1] = {{"X", IR_F64, x}};
        rt_result r = run_model("rms_axis1", 1, in);
        expect("rms_axis1", &r, 0, y, 24, TOL64);
        rt_result_free(&r);
    }
    /* mvn at opsets 13 and 18: [2, 3, 2, 2] float32 over axes 0, 2, 3 */
    const char *mvn[2] = {"mvn_13", "mvn_18"};
    float xf[24];
    for (int i = 0; i < 24; i++) xf[i] = (float)(2.0 * sin(0.7 * i));
    for (int c = 0; c < 3; c++) {
        double m = 0, m2 = 0;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 4; k++) {
                double v = xf[(n * 3 + c) * 4 + k];
                m += v / 8.0;
                m2 += v * v / 8.0;
            }
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 4; k++)
                y[(n * 3 + c) * 4 + k] = (xf[(n * 3 + c) * 4 + k] - m) / (sqrt(m2 - m * m) + 1e-9);
    }
    for (int k = 0; k < 2; k++) {
        input in[1] = {{"X", IR_F32, xf}};
        rt_result r = run_model(mvn[k], 1, in);
        expect(mvn[k], &r, 0, y, 24, TOL32);
        rt_result_free(&r);
    }
}

static double grid_coord(int i, int n, bool align) {
    if (align) return n > 1 ? -1.0 + 2.0 * i / (n - 1) : -1.0;
    return -1.0 + (2.0 * i + 1.0) / n;
}

static void test_layout(void **state) {
    (void)state;
    double x[MAXN], y[MAXN];
    { /* ccp: [5, 4, 3] -> [3, 7, 3]: axis 0 cropped from 1, axis 1 padded 1 before, 2 after */
        fill(x, 60, 0.4);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 7; j++)
                for (int k = 0; k < 3; k++)
                    y[(i * 7 + j) * 3 + k] =
                        j >= 1 && j < 5 ? x[((i + 1) * 4 + (j - 1)) * 3 + k] : 0.0;
        input in[1] = {{"X", IR_F64, x}};
        rt_result r = run_model("ccp", 1, in);
        expect("ccp", &r, 0, y, 63, TOL64);
        rt_result_free(&r);
    }
    const double theta2[12] = {0.9, -0.2, 0.1, 0.3, 1.1, -0.4, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0};
    for (int ac = 0; ac < 2; ac++) { /* affine 2-D: size [2, 1, 3, 4] */
        for (int n = 0; n < 2; n++)
            for (int h = 0; h < 3; h++)
                for (int w = 0; w < 4; w++) {
                    double p[3] = {grid_coord(w, 4, ac), grid_coord(h, 3, ac), 1};
                    for (int k = 0; k < 2; k++) {
                        double v = 0;
                        for (int j = 0; j < 3; j++) v += theta2[(n * 2 + k) * 3 + j] * p[j];
                        y[((n * 3 + h) * 4 + w) * 2 + k] = v;
                    }
                }
        char name[32];
        snprintf(name, sizeof name, "affine_2d_ac%d", ac);
        input in[1] = {{"theta", IR_F64, theta2}};
        rt_result r = run_model(name, 1, in);
        expect(name, &r, 0, y, 48, TOL64);
        rt_result_free(&r);
    }
    { /* affine 3-D: size [1, 1, 2, 3, 2], align_corners */
        double th[12];
        fill(th, 12, 0.5);
        for (int dd = 0; dd < 2; dd++)
            for (int h = 0; h < 3; h++)
                for (int w = 0; w < 2; w++) {
                    double p[4] = {grid_coord(w, 2, 1), grid_coord(h, 3, 1), grid_coord(dd, 2, 1),
                                   1};
                    for (int k = 0; k < 3; k++) {
                        double v = 0;
                        for (int j = 0; j < 4; j++) v += th[k * 4 + j] * p[j];
                        y[((dd * 3 + h) * 2 + w) * 3 + k] = v;
                    }
                }
        input in[1] = {{"theta", IR_F64, th}};
        rt_result r = run_model("affine_3d", 1, in);
        expect("affine_3d", &r, 0, y, 36, TOL64);
        rt_result_free(&r);
    }
}

static void test_static_bodies(void **state) {
    (void)state;
    double y[MAXN], x[9];
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < 7; i++) y[i] = 0.5 - 0.5 * cos(2 * pi * i / 7);
    rt_result r = run_model("hann_periodic", 0, NULL);
    expect("hann_periodic", &r, 0, y, 7, TOL32);
    rt_result_free(&r);
    for (int i = 0; i < 6; i++)
        y[i] = 0.42 - 0.5 * cos(2 * pi * i / 5) + 0.08 * cos(4 * pi * i / 5);
    r = run_model("blackman_symmetric", 0, NULL);
    expect("blackman_symmetric", &r, 0, y, 6, TOL32);
    rt_result_free(&r);
    for (int i = 0; i < 5; i++) y[i] = 25.0 / 46 - 21.0 / 46 * cos(2 * pi * i / 5);
    r = run_model("hamming_periodic", 0, NULL);
    expect("hamming_periodic", &r, 0, y, 5, TOL32);
    rt_result_free(&r);
    for (int i = 0; i < 9; i++) x[i] = -2.0 + 0.5 * i;
    for (int i = 0; i < 9; i++) y[i] = x[i] < -1 ? x[i] + 0.5 : x[i] > 1 ? x[i] - 0.5 : 0;
    input in[1] = {{"X", IR_F64, x}};
    r = run_model("shrink", 1, in);
    expect("shrink", &r, 0, y, 9, TOL64);
    rt_result_free(&r);
    for (int i = 0; i < 9; i++) y[i] = x[i] > 0.3 ? x[i] : 0;
    r = run_model("thresholdedrelu", 1, in);
    expect("thresholdedrelu", &r, 0, y, 9, TOL64);
    rt_result_free(&r);
}

/* y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min / y_scale)),
 * y = saturate(round(x / y_scale) + y_zero_point), rounding half to even. */
static void test_dynamic_quantize(void **state) {
    (void)state;
    enum { N = 64 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(3.0 * sin(0.7 * i) + 1.1);
    double lo = 0, hi = 0;
    for (int i = 0; i < N; i++) lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
    const double scale = (hi - lo) / 255;
    const double zp = fmin(fmax(nearbyint(-lo / scale), 0), 255);
    input in[1] = {{"x", IR_F32, x}};
    rt_result r = run_model("dql", 1, in);
    assert_int_equal(r.outputs[0].dtype, IR_U8);
    assert_int_equal(r.outputs[2].dtype, IR_U8);
    const double got_scale = ((const float *)r.outputs[1].data)[0];
    print_message("  dql: scale %.9g (float64 %.9g), zero point %d (%g)\n", got_scale, scale,
                  ((const uint8_t *)r.outputs[2].data)[0], zp);
    assert_true(fabs(got_scale - scale) <= 1e-6 * scale);
    assert_int_equal(((const uint8_t *)r.outputs[2].data)[0], (int)zp);
    for (int i = 0; i < N; i++) {
        double q = x[i] / scale, want = fmin(fmax(nearbyint(q) + zp, 0), 255);
        int got = ((const uint8_t *)r.outputs[0].data)[i];
        /* float32's quotient may fall on the other side of a tie that float64's just misses */
        double tol = fabs(q - floor(q) - 0.5) < 1e-4 ? 1 : 0;
        if (fabs(got - want) > tol) fail_msg("dql: y[%d] = %d, expected %g", i, got, want);
    }
    rt_result_free(&r);
}

/* Rows of p = 0.1, 0.5, 0.9, 0: the mean of each row of 4096 draws is p within 5 standard
 * deviations (at most 0.039), every output 0 or 1. */
static void test_bernoulli(void **state) {
    (void)state;
    enum { W = 4096 };
    const double p[4] = {0.1, 0.5, 0.9, 0};
    double *x = malloc(sizeof(double) * 4 * W);
    float *xf = malloc(sizeof(float) * 4 * W);
    assert_true(x && xf);
    for (int i = 0; i < 4 * W; i++) xf[i] = (float)(x[i] = p[i / W]);
    input in[1] = {{"x", IR_F64, x}}, inf[1] = {{"x", IR_F32, xf}};
    rt_result r = run_model("bernoulli_15", 1, in), r22 = run_model("bernoulli_22", 1, inf);
    rt_result r22b = run_model("bernoulli_22", 1, inf);
    assert_int_equal(r.outputs[0].dtype, IR_F64);
    assert_int_equal(r22.outputs[0].dtype, IR_BOOL);
    for (int row = 0; row < 4; row++) {
        double m = 0, m22 = 0;
        for (int i = row * W; i < (row + 1) * W; i++) {
            double v = ((const double *)r.outputs[0].data)[i];
            uint8_t b = ((const uint8_t *)r22.outputs[0].data)[i];
            if (v != 0 && v != 1) fail_msg("bernoulli_15: y[%d] = %g", i, v);
            assert_true(b <= 1);
            assert_true(b == ((const uint8_t *)r22b.outputs[0].data)[i]); /* seed 5 */
            m += v / W;
            m22 += b / (double)W;
        }
        print_message("  bernoulli p %.1f: means %.4f (opset 15), %.4f (opset 22)\n", p[row], m,
                      m22);
        const double tol = 5 * sqrt(p[row] * (1 - p[row]) / W);
        assert_true(fabs(m - p[row]) <= tol && fabs(m22 - p[row]) <= tol);
    }
    rt_result_free(&r);
    rt_result_free(&r22);
    rt_result_free(&r22b);
    free(x);
    free(xf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_losses),           cmocka_unit_test(test_norms),
        cmocka_unit_test(test_layout),           cmocka_unit_test(test_static_bodies),
        cmocka_unit_test(test_dynamic_quantize), cmocka_unit_test(test_bernoulli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
