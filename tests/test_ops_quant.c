/* test_ops_quant.c - QuantizeLinear and DequantizeLinear against values worked out by hand from
 * the ONNX spec (ties rounding to even, saturation, per axis, in blocks, float64), and the random
 * draws (RandomUniformLike, RandomNormal): range, moments, and determinism (the same run seed
 * draws the same numbers, another draws others, a seed attribute fixes them). One-node models:
 * tests/fixtures/quant/ (gen_quant.py). */
#include "test-util.h"

#include "rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static rt_result run_seeded(const char *name, ir_dtype t, const void *x, uint64_t seed) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/quant/%s.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
    if (!g) fail_msg("%s: import: %s", name, d.msg);
    rt_binding b[1];
    int nb = 0;
    if (x) {
        int v = ir_graph_find_value(g, "x");
        assert_true(v >= 0);
        b[nb++] = (rt_binding){.value = v, .dtype = t, .shape = g->values[v].shape, .data = x};
    }
    rt_options o = {.seed = seed};
    rt_result r = {0};
    if (rt_run(g, b, nb, &o, &r, &d) != IR_OK) fail_msg("%s: run: %s", name, d.msg);
    ir_graph_free(g);
    return r;
}

static rt_result run_model(const char *name, ir_dtype t, const void *x) {
    return run_seeded(name, t, x, 1);
}

static void expect_ints(const char *name, const rt_result *r, const int64_t *want, int n) {
    const ir_tensor *y = &r->outputs[0];
    assert_int_equal(ir_shape_numel(&y->shape), n);
    for (int i = 0; i < n; i++) {
        double got = ir_load_f64(y->data, y->dtype, i);
        if (got != (double)want[i])
            fail_msg("%s: y[%d] = %g, expected %lld", name, i, got, (long long)want[i]);
    }
}

static void test_quantize(void **state) {
    (void)state;
    /* scale 0.5, zero point 128: x / 0.5 = 0.5, 1.5, -0.5, -1.5, 2.5 round to 0, 2, -0, -2, 2
     * (half to even); 200 and -200 saturate */
    const float x1[8] = {0.25f, 0.75f, -0.25f, -0.75f, 1.25f, 100.f, -100.f, 0.3f};
    const int64_t y1[8] = {128, 130, 128, 126, 130, 255, 0, 129};
    rt_result r = run_model("q_tensor", IR_F32, x1);
    assert_int_equal(r.outputs[0].dtype, IR_U8);
    expect_ints("q_tensor", &r, y1, 8);
    rt_result_free(&r);
    /* axis 1 of [2, 3, 2]: scales 0.5, 1, 2 and int8 zero points 0, -1, 3 */
    const float x2[12] = {1.25f,  -70.f, 2.5f,   -2.5f, 5.f,  300.f,
                          -1.75f, 64.f,  -200.f, 0.5f,  -3.f, 3.f};
    const int64_t y2[12] = {2, -128, 1, -3, 5, 127, -4, 127, -128, -1, 1, 5};
    r = run_model("q_axis_i8", IR_F32, x2);
    assert_int_equal(r.outputs[0].dtype, IR_I8);
    expect_ints("q_axis_i8", &r, y2, 12);
    rt_result_free(&r);
    /* blocks of 2 along axis 1 of [2, 4], scales [[1, 0.01], [2, 4]], int16 without zero point */
    const float x3[8] = {3.5f, -4.5f, 400.f, -400.f, 5.f, 7.f, 10.f, 1e6f};
    const int64_t y3[8] = {4, -4, 32767, -32768, 2, 4, 2, 32767};
    r = run_model("q_block_i16", IR_F32, x3);
    assert_int_equal(r.outputs[0].dtype, IR_I16);
    expect_ints("q_block_i16", &r, y3, 8);
    rt_result_free(&r);
    /* float64 all through (the verification reference's path), against the formula in double:
     * 0.25 / 0.1 is 2.4999999999999996 there, so no tie */
    const double x4[6] = {0.25, 0.35, -1.0, 25.5, 30.0, 0.05};
    int64_t y4[6];
    for (int i = 0; i < 6; i++) {
        double q = nearbyint(x4[i] / 0.1);
        y4[i] = q < 0 ? 0 : q > 255 ? 255 : (int64_t)q;
    }
    r = run_model("q_f64", IR_F64, x4);
    expect_ints("q_f64", &r, y4, 6);
    rt_result_free(&r);
}

static void test_dequantize(void **state) {
    (void)state;
    /* axis 1 of [2, 3]: scales 0.5, 0.25, 2; zero points 128, 0, 255 */
    const uint8_t x[6] = {0, 255, 255, 129, 4, 0};
    const double want[6] = {-64, 63.75, 0, 0.5, 1, -510};
    rt_result r = run_model("dq_axis", IR_U8, x);
    const ir_tensor *y = &r.outputs[0];
    assert_int_equal(y->dtype, IR_F32);
    for (int i = 0; i < 6; i++) assert_true(((const float *)y->data)[i] == (float)want[i]);
    rt_result_free(&r);
    const int32_t xi[4] = {-2147483647 - 1, -3, 0, 1000000};
    r = run_model("dq_i32", IR_I32, xi);
    y = &r.outputs[0];
    assert_int_equal(y->dtype, IR_F64);
    for (int i = 0; i < 4; i++) assert_true(((const double *)y->data)[i] == xi[i] * 0.125);
    rt_result_free(&r);
}

static double at(const ir_tensor *t, int64_t i) {
    return ir_load_f64(t->data, t->dtype, i);
}

static void test_random(void **state) {
    (void)state;
    { /* a random draw: never folded, never split by fission */
        char path[1024];
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *g = ir_onnx_load(
            tu_src_path("tests/fixtures/quant/ru_like.onnx", path, sizeof path), NULL, &st, &d);
        assert_non_null(g);
        assert_int_equal(g->nodes[0].op, IR_OP_RandomUniformLike);
        assert_true(ir_node_draws_random(g, &g->nodes[0]));
        ir_dimlink l[IR_MAX_DIMLINKS];
        assert_int_equal(ir_node_dims(g, &g->nodes[0], l), 0);
        ir_graph_free(g);
    }
    enum { N = 20000 };
    float *x = calloc(N, sizeof *x);
    assert_non_null(x);
    rt_result a = run_seeded("ru_like", IR_F32, x, 1), b = run_seeded("ru_like", IR_F32, x, 1),
              c = run_seeded("ru_like", IR_F32, x, 2);
    double mean = 0;
    int same_c = 0;
    for (int i = 0; i < N; i++) {
        double v = at(&a.outputs[0], i);
        if (!(v >= -2 && v < 3)) fail_msg("ru_like: y[%d] = %g outside [-2, 3)", i, v);
        assert_true(v == at(&b.outputs[0], i)); /* the same run seed draws the same */
        same_c += v == at(&c.outputs[0], i);
        mean += v / N;
    }
    print_message("  ru_like: mean %.4f (0.5 expected, sd of the mean 0.010)\n", mean);
    assert_true(fabs(mean - 0.5) < 0.05);
    assert_true(same_c < 10); /* another run seed draws others */
    rt_result_free(&a);
    rt_result_free(&b);
    rt_result_free(&c);
    /* a seed attribute fixes the draws whatever the run seed */
    a = run_seeded("ru_like_seed", IR_F32, x, 1);
    b = run_seeded("ru_like_seed", IR_F32, x, 2);
    assert_int_equal(a.outputs[0].dtype, IR_F64);
    for (int i = 0; i < N; i++) {
        double v = at(&a.outputs[0], i);
        assert_true(v >= 0 && v < 1);
        assert_true(v == at(&b.outputs[0], i));
    }
    rt_result_free(&a);
    rt_result_free(&b);
    free(x);
    a = run_seeded("rn_seed", IR_F32, NULL, 1);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        double v = at(&a.outputs[0], i);
        s1 += v;
        s2 += v * v;
    }
    mean = s1 / N;
    double var = s2 / N - mean * mean;
    print_message("  rn_seed: mean %.4f (1), variance %.4f (4)\n", mean, var);
    assert_true(fabs(mean - 1) < 0.07);
    assert_true(fabs(var - 4) < 0.25);
    rt_result_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_dequantize),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
