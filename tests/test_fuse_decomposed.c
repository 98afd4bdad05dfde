/* test_fuse_decomposed.c - ir_fuse_decomposed (import option fuse_decomposed): the LayerNorm and
 * exact GELU that PyTorch's exporter writes as elementary ops at opset 13 become one
 * LayerNormalization or Gelu node each.
 *  - On the transformer training fixtures (gpt_small_train, vit_small_train,
 *    transformer_encoder_train: training-mode exports at opset 13) every LayerNorm and GELU
 *    fuses, no elementary op of them is left and every Dropout(p=0) is bypassed; the fused training
 * graph's loss and every gradient agree with the float64 run of the file's own graph
 * (test-check.h), and its eager peak is lower.
 *  - On hand-built patterns: the exact pattern fuses, with the file's epsilon, and computes what
 *    it computed; a different exponent, a reduction over another axis, an intermediate read
 *    elsewhere, a trainable epsilon and a GELU constant that is not 0.5 each keep the pattern as
 *    it is. A Dropout that draws nothing is bypassed; one that drops, or whose mask is read, is
 *    kept. */
#include "test-check.h"
#include "test-util.h"

#include "rt.h"
#include "schedule.h"

/* the fixtures' Dropout(p=0) nodes (PyTorch's training export: ratio 0, training mode on) */
enum { GPT_DROPOUTS = 4, VIT_DROPOUTS = 7, ENC_DROPOUTS = 6 };

static int count_op(const ir_graph *g, ir_op_kind op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
    return n;
}

static ir_graph *load(const char *name, bool fuse) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", name);
    ir_import_opts o = {.fuse_decomposed = fuse};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), &o, &st, &d);
    if (!g) fail_msg("import %s: %s", name, d.msg);
    return g;
}

static void check_fixture(const char *name, int n_ln, int n_gelu, int n_dropout) {
    ir_graph *f0 = load(name, false), *f1 = load(name, true);
    assert_int_equal(count_op(f0, IR_OP_LayerNormalization), 0);
    assert_int_equal(count_op(f0, IR_OP_Dropout) - count_op(f1, IR_OP_Dropout), n_dropout);
    assert_int_equal(count_op(f1, IR_OP_LayerNormalization), n_ln);
    assert_int_equal(count_op(f1, IR_OP_Gelu), n_gelu);
    assert_int_equal(count_op(f1, IR_OP_Pow), 0);
    assert_int_equal(count_op(f1, IR_OP_Sqrt), 0);
    assert_int_equal(count_op(f1, IR_OP_Erf), 0);
    assert_int_equal(count_op(f1, IR_OP_ReduceMean), count_op(f0, IR_OP_ReduceMean) - 2 * n_ln);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *t0 = ir_build_training(f0, &(ir_train_opts){0}, &st, &d);
    if (!t0) fail_msg("training graph of %s: %s", name, d.msg);
    ir_graph *t1 = ir_build_training(f1, &(ir_train_opts){0}, &st, &d);
    if (!t1) fail_msg("fused training graph of %s: %s", name, d.msg);
    assert_int_equal(t0->n_outputs, t1->n_outputs); /* the same parameters get gradients */
    rt_options o = {.fill_missing_data = true, .seed = 3};
    tu_ref ref;
    tu_ref_run(t0, NULL, 0, &o, &ref, name);
    rt_result r;
    if (rt_run(t1, NULL, 0, &o, &r, &d) != IR_OK) fail_msg("%s fused: %s", name, d.msg);
    tu_expect_close(&ref, t1, &r, name);
    size_t p0 = tu_peak(t0, NULL), p1 = tu_peak(t1, NULL);
    printf("%s: %d LayerNorm, %d GELU fused, %d Dropout bypassed; eager peak %zu -> %zu B\n", name,
           n_ln, n_gelu, n_dropout, p0, p1);
    assert_true(p1 < p0);
    rt_result_free(&r);
    tu_ref_free(&ref);
    ir_graph_free(t0);
    ir_graph_free(t1);
    ir_graph_free(f0);
    ir_graph_free(f1);
}

static void test_gpt_small(void **st) {
    check_fixture("gpt_small_train", 5, 2, GPT_DROPOUTS);
}
static void test_vit_small(void **st) {
    check_fixture("vit_small_train", 5, 2, VIT_DROPOUTS);
}
static void test_transformer_encoder(void **st) {
    check_fixture("transformer_encoder_train", 4, 0, ENC_DROPOUTS);
}

/* ---------------------------------------------------------------- hand-built patterns */

static int add_const(ir_graph *g, const char *name, ir_dtype t, ir_shape s, double v, bool param) {
    int id = ir_graph_add_value(g, name, t, &s);
    int64_t n = ir_shape_numel(&s);
    g->values[id].blob = ir_blob_new(ir_value_bytes(&g->values[id]));
    for (int64_t i = 0; i < n; i++)
        ir_store_f64(ir_blob_data(g->values[id].blob), t, i, v + 0.01 * (double)i);
    g->values[id].flags |= IR_VF_CONST | IR_VF_INITIALIZER | (param ? IR_VF_PARAM : 0u);
    return id;
}

static int node1(ir_graph *g, ir_op_kind op, const char *name, int a, int b, int n_at,
                 const ir_attr *at) {
    int in[2] = {a, b}, out;
    tu_add_node1(g, op, name, b < 0 ? 1 : 2, in, n_at, at, &out);
    return out;
}

typedef enum variant {
    EXACT,
    POW3,          /* (x - m) ^ 3 */
    OTHER_AXIS,    /* the variance over axis 0 */
    SHARED_NORM,   /* the normalized rows are a graph output too */
    PARAM_EPS,     /* epsilon a trainable parameter */
    GELU_NOT_HALF, /* x (erf + 1) * 0.6 */
} variant;

/* y = GELU(LayerNorm(x)) over x [4, 8], decomposed as the exporter writes them. */
static ir_graph *build(variant v, double eps) {
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(4, 8);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    static int64_t last = -1, first = 0; /* attributes outlive build(): the graph's copies */
    ir_attr ax = tu_attr_ints("axes", 1, &last), ax0 = tu_attr_ints("axes", 1, &first);
    int m = node1(g, IR_OP_ReduceMean, "mean", x, -1, 1, &ax);
    int dv = node1(g, IR_OP_Sub, "sub", x, m, 0, NULL);
    int p =
        node1(g, IR_OP_Pow, "pow", dv,
              add_const(g, "two", IR_F32, TU_SCALAR_SHAPE, v == POW3 ? 3.0 : 2.0, false), 0, NULL);
    int var = node1(g, IR_OP_ReduceMean, "var", p, -1, 1, v == OTHER_AXIS ? &ax0 : &ax);
    int ve = node1(g, IR_OP_Add, "add_eps", var,
                   add_const(g, "eps", IR_F32, TU_SCALAR_SHAPE, eps, v == PARAM_EPS), 0, NULL);
    int s = node1(g, IR_OP_Sqrt, "sqrt", ve, -1, 0, NULL);
    int nrm = node1(g, IR_OP_Div, "div", dv, s, 0, NULL);
    int sc = node1(g, IR_OP_Mul, "scale", nrm, add_const(g, "w", IR_F32, TU_SHAPE(8), 1.0, true), 0,
                   NULL);
    int ln =
        node1(g, IR_OP_Add, "bias", add_const(g, "b", IR_F32, TU_SHAPE(8), 0.1, true), sc, 0, NULL);
    int a =
        node1(g, IR_OP_Div, "gdiv", ln,
              add_const(g, "sqrt2", IR_F32, TU_SCALAR_SHAPE, 1.4142135381698608, false), 0, NULL);
    int e = node1(g, IR_OP_Erf, "erf", a, -1, 0, NULL);
    int e1 = node1(g, IR_OP_Add, "gadd", e,
                   add_const(g, "one", IR_F32, TU_SCALAR_SHAPE, 1.0, false), 0, NULL);
    int xm = node1(g, IR_OP_Mul, "gmul", ln, e1, 0, NULL);
    int y =
        node1(g, IR_OP_Mul, "ghalf", xm,
              add_const(g, "half", IR_F32, TU_SCALAR_SHAPE, v == GELU_NOT_HALF ? 0.6 : 0.5, false),
              0, NULL);
    ir_graph_add_output(g, y);
    if (v == SHARED_NORM) ir_graph_add_output(g, nrm);
    return g;
}

static void test_patterns(void **st) {
    ir_diag d = {{0}};
    ir_fuse_counts c;
    /* the exact pattern fuses, keeps its epsilon, and computes what it computed */
    ir_graph *g0 = build(EXACT, 1e-5), *g1 = build(EXACT, 1e-5);
    assert_int_equal(ir_fuse_decomposed(g1, &c, &d), IR_OK);
    assert_int_equal(c.layernorm, 1);
    assert_int_equal(c.gelu, 1);
    assert_int_equal(g1->n_nodes, 2);
    const ir_node *ln = &g1->nodes[0];
    assert_int_equal(ln->op, IR_OP_LayerNormalization);
    assert_true(ir_attr_float(ln, "epsilon", 0) == 1e-5f);
    assert_int_equal(ir_attr_int(ln, "axis", 0), -1);
    assert_int_equal(g1->nodes[1].op, IR_OP_Gelu);
    assert_int_equal(ir_graph_validate(g1, &d), IR_OK);
    rt_options o = {.fill_missing_data = true, .seed = 5};
    tu_ref ref;
    tu_ref_run(g0, NULL, 0, &o, &ref, "exact");
    rt_result r;
    assert_int_equal(rt_run(g1, NULL, 0, &o, &r, &d), IR_OK);
    tu_expect_close(&ref, g1, &r, "fused");
    rt_result_free(&r);
    tu_ref_free(&ref);
    ir_graph_free(g0);
    ir_graph_free(g1);
    /* the others keep the LayerNorm (and the GELU, for GELU_NOT_HALF) decomposed */
    const variant keep_ln[] = {POW3, OTHER_AXIS, SHARED_NORM, PARAM_EPS};
    for (size_t i = 0; i < sizeof keep_ln / sizeof keep_ln[0]; i++) {
        ir_graph *g = build(keep_ln[i], 1e-5);
        int n = g->n_nodes;
        assert_int_equal(ir_fuse_decomposed(g, &c, &d), IR_OK);
        assert_int_equal(c.layernorm, 0);
        assert_int_equal(c.gelu, 1);
        assert_int_equal(g->n_nodes, n - 4); /* the GELU's five nodes are one */
        assert_int_equal(count_op(g, IR_OP_LayerNormalization), 0);
        ir_graph_free(g);
    }
    ir_graph *g = build(GELU_NOT_HALF, 1e-5);
    assert_int_equal(ir_fuse_decomposed(g, &c, &d), IR_OK);
    assert_int_equal(c.layernorm, 1);
    assert_int_equal(c.gelu, 0);
    assert_int_equal(count_op(g, IR_OP_Erf), 1);
    ir_graph_free(g);
}

/* y = Relu(Dropout(x)): a Dropout that draws nothing (ratio 0 in training mode, or training mode
 * off) is bypassed, one that drops or whose mask is read is kept. */
static void test_dropouts(void **st) {
    const struct {
        double ratio;
        bool training, mask_out, bypassed;
    } cases[] = {{0, true, false, true},
                 {0.5, false, false, true},
                 {0.1, true, false, false},
                 {0, true, true, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_graph *g = ir_graph_new();
        ir_shape xs = TU_SHAPE(4, 8);
        int x = ir_graph_add_value(g, "x", IR_F32, &xs);
        ir_graph_add_input(g, x);
        g->values[x].flags |= IR_VF_DATA;
        int r = add_const(g, "ratio", IR_F32, TU_SCALAR_SHAPE, cases[i].ratio, false);
        ir_shape one = TU_SCALAR_SHAPE;
        int t = ir_graph_add_value(g, "training", IR_BOOL, &one);
        g->values[t].blob = ir_blob_new(1);
        ((uint8_t *)ir_blob_data(g->values[t].blob))[0] = cases[i].training;
        g->values[t].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
        int out[2], in[3] = {x, r, t};
        out[0] = ir_graph_add_value(g, "drop.y", IR_F32, NULL);
        out[1] = ir_graph_add_value(g, "drop.mask", IR_BOOL, NULL);
        tu_infer_node(g, IR_OP_Dropout, "drop", 3, in, 2, out, 0, NULL);
        int y = node1(g, IR_OP_Relu, "relu", out[0], -1, 0, NULL);
        ir_graph_add_output(g, y);
        if (cases[i].mask_out) ir_graph_add_output(g, out[1]);
        ir_fuse_counts c;
        ir_diag d = {{0}};
        assert_int_equal(ir_fuse_decomposed(g, &c, &d), IR_OK);
        assert_int_equal(c.dropout, cases[i].bypassed);
        assert_int_equal(count_op(g, IR_OP_Dropout), !cases[i].bypassed);
        assert_int_equal(g->nodes[g->n_nodes - 1].in[0] == x, cases[i].bypassed);
        assert_int_equal(ir_graph_validate(g, &d), IR_OK);
        ir_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_dropouts),
        cmocka_unit_test(test_gpt_small),
        cmocka_unit_test(test_vit_small),
        cmocka_unit_test(test_transformer_encoder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
