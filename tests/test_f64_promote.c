/* test_f64_promote.c - ir_graph_to_f64 (ir-promote.c): the float64 copy of every numeric
 * fixture, inference and training, has no float value narrower than float64, the same nodes in
 * the same order, constants converted exactly, integer values untouched; the dtype-carrying
 * attributes (Cast, ConstantOfShape, Constant, LayerNormalization's stash_type, FissionBuffer)
 * follow; the input graph is not modified. */
#include "numeric-fixture.h"

/* Checks that f is the float64 twin of g. */
static void expect_twin(const ir_graph *g, const ir_graph *f, const char *what) {
    assert_int_equal(f->n_values, g->n_values);
    assert_int_equal(f->n_nodes, g->n_nodes);
    assert_int_equal(f->n_inputs, g->n_inputs);
    assert_int_equal(f->n_outputs, g->n_outputs);
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_equal(f->nodes[i].op, g->nodes[i].op);
        assert_int_equal(f->nodes[i].id, g->nodes[i].id);
    }
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *a = &g->values[i], *b = &f->values[i];
        if (!ir_shape_eq(&a->shape, &b->shape)) fail_msg("%s: '%s' changed shape", what, a->name);
        if (ir_dtype_is_float(a->dtype)) {
            if (b->dtype != IR_F64)
                fail_msg("%s: '%s' is %s, not float64", what, b->name, ir_dtype_name(b->dtype));
        } else if (b->dtype != a->dtype) {
            fail_msg("%s: integer value '%s' changed dtype to %s", what, a->name,
                     ir_dtype_name(b->dtype));
        }
        assert_true(!a->blob == !b->blob);
        if (!a->blob) continue;
        int64_t n = ir_shape_numel(&a->shape);
        for (int64_t k = 0; k < n; k++) {
            double x = ir_load_f64(ir_value_data(a), a->dtype, k),
                   y = ir_load_f64(ir_value_data(b), b->dtype, k);
            if (!(x == y) && !(isnan(x) && isnan(y)))
                fail_msg("%s: constant '%s'[%lld] is %g, originally %g", what, a->name,
                         (long long)k, y, x);
        }
    }
}

static ir_graph *promote_ok(const ir_graph *g, const char *what) {
    ir_diag d = {{0}};
    ir_status st = IR_ERR_INTERNAL;
    ir_graph *f = ir_graph_to_f64(g, &st, &d);
    if (!f) fail_msg("%s: ir_graph_to_f64: %s", what, d.msg);
    assert_int_equal(st, IR_OK);
    return f;
}

static void test_every_fixture(void **state) {
    (void)state;
    char *names[NF_MAX_FIXTURES];
    int n = nf_list(names, NF_MAX_FIXTURES);
    assert_true(n > 10);
    for (int i = 0; i < n; i++) {
        nf_fixture fx;
        nf_load(names[i], &fx);
        ir_graph *g = fx.g;
        uint64_t h = ir_graph_hash(g);
        ir_graph *f = promote_ok(g, names[i]);
        expect_twin(g, f, names[i]);
        assert_true(ir_graph_hash(g) == h); /* the input graph is left as it was */
        ir_graph_free(f);
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *tg = ir_build_training(g, &(ir_train_opts){.optimizer = IR_OPTIM_ADAM}, &st, &d);
        if (tg) { /* models with an op autodiff does not know have no training graph */
            ir_graph *tf = promote_ok(tg, names[i]);
            expect_twin(tg, tf, names[i]);
            ir_graph_free(tf);
            ir_graph_free(tg);
        }
        nf_free(&fx);
        free(names[i]);
    }
}

/* One node of op with the given attributes, inputs (value ids of g) and one output. */
static int add1(ir_graph *g, ir_op_kind op, int n_in, const int *in, int n_attrs,
                const ir_attr *attrs) {
    int out = ir_graph_add_value(g, NULL, IR_F32, NULL);
    char name[32];
    snprintf(name, sizeof name, "n%d", g->n_nodes);
    int ni = ir_graph_add_node(g, op, name, n_in, in, 1, &out, n_attrs, attrs);
    ir_diag d = {{0}};
    if (ir_node_infer(g, &g->nodes[ni], &d) != IR_OK) fail_msg("%s", d.msg);
    return out;
}

static const ir_attr *find_attr(const ir_graph *g, int node, const char *name) {
    return ir_attr_find(&g->nodes[node], name);
}

/* The attribute rules: casts to float become casts to double, casts to int stay; Constant's
 * value_float(s) and ConstantOfShape's default become float64 tensors with the same values. */
static void test_attributes(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape s = TU_SHAPE(2, 3);
    int x = ir_graph_add_value(g, "x", IR_I64, &s);
    ir_graph_add_input(g, x);
    int xf = add1(g, IR_OP_Cast, 1, &x, 1, (ir_attr[]){tu_attr_int("to", 1)});
    int xh = add1(g, IR_OP_Cast, 1, &xf, 1, (ir_attr[]){tu_attr_int("to", 10)});
    int xi = add1(g, IR_OP_Cast, 1, &xh, 1, (ir_attr[]){tu_attr_int("to", 7)});
    float fl[3] = {0.1f, -2.5f, 3e-8f};
    ir_attr cf = {.name = "value_floats", .type = IR_ATTR_FLOATS, .n = 3, .floats = fl};
    int c = add1(g, IR_OP_Constant, 0, NULL, 1, &cf);
    ir_attr c1 = {.name = "value_float", .type = IR_ATTR_FLOAT, .f = 0.3f};
    int cs = add1(g, IR_OP_Constant, 0, NULL, 1, &c1);
    int64_t shp[2] = {2, 3};
    ir_blob *sb = ir_blob_new(sizeof shp);
    memcpy(ir_blob_data(sb), shp, sizeof shp);
    int sv = ir_graph_add_value(g, "shape", IR_I64, &(ir_shape){.rank = 1, .dims = {2}});
    g->values[sv].blob = sb;
    g->values[sv].flags |= IR_VF_CONST;
    int z = add1(g, IR_OP_ConstantOfShape, 1, &sv, 0, NULL);
    int y = add1(g, IR_OP_Add, 2, (int[]){xf, z}, 0, NULL);
    int ln = add1(g, IR_OP_LayerNormalization, 2, (int[]){y, c}, 1,
                  (ir_attr[]){tu_attr_int("axis", -1)});
    int buf = add1(g, IR_OP_FissionBuffer, 0, NULL, 2,
                   (ir_attr[]){tu_attr_int("dtype", IR_F32), tu_attr_ints("shape", 2, shp)});
    int outs[] = {xi, cs, ln, buf, xh};
    for (int i = 0; i < 5; i++) ir_graph_add_output(g, outs[i]);

    ir_graph *f = promote_ok(g, "attributes");
    expect_twin(g, f, "attributes");
    assert_int_equal(find_attr(f, 0, "to")->i, 11);
    assert_int_equal(find_attr(f, 1, "to")->i, 11); /* float16 is promoted too */
    assert_int_equal(find_attr(f, 2, "to")->i, 7);
    assert_int_equal(f->values[xi].dtype, IR_I64);
    const ir_attr *v = find_attr(f, 3, "value");
    assert_non_null(v);
    assert_int_equal(v->t_dtype, IR_F64);
    for (int i = 0; i < 3; i++)
        assert_true(((const double *)ir_blob_data(v->t_blob))[i] == (double)fl[i]);
    v = find_attr(f, 4, "value");
    assert_int_equal(v->t_dtype, IR_F64);
    assert_true(*(const double *)ir_blob_data(v->t_blob) == (double)0.3f);
    v = find_attr(f, 5, "value");
    assert_int_equal(v->t_dtype, IR_F64);
    assert_true(*(const double *)ir_blob_data(v->t_blob) == 0.0);
    assert_int_equal(find_attr(f, 7, "stash_type")->i, 11);
    assert_int_equal(find_attr(f, 8, "dtype")->i, IR_F64);
    /* both run, to the same values: the float64 kernels of Cast, Constant, ConstantOfShape,
     * LayerNormalization and FissionBuffer */
    int64_t xv[6] = {1, -2, 3, 7, 5, -6};
    rt_binding b = {.value = x, .dtype = IR_I64, .shape = s, .data = xv};
    rt_result r32 = {0}, r64 = {0};
    ir_diag d = {{0}};
    if (rt_run(g, &b, 1, NULL, &r32, &d) != IR_OK) fail_msg("float32: %s", d.msg);
    if (rt_run(f, &b, 1, NULL, &r64, &d) != IR_OK) fail_msg("float64: %s", d.msg);
    for (int i = 0; i < r32.n_outputs; i++) {
        const ir_tensor *a = &r32.outputs[i], *o = &r64.outputs[i];
        assert_int_equal(o->dtype, ir_dtype_is_float(a->dtype) ? IR_F64 : a->dtype);
        for (int64_t k = 0; k < ir_shape_numel(&a->shape); k++) {
            double u = ir_load_f64(a->data, a->dtype, k), v = ir_load_f64(o->data, o->dtype, k);
            if (!(fabs(u - v) <= 1e-6 * fmax(1, fabs(v))))
                fail_msg("output %d element %lld: float32 %.9g, float64 %.9g", i, (long long)k, u,
                         v);
        }
    }
    rt_result_free(&r32);
    rt_result_free(&r64);
    /* the original keeps its float32 attributes */
    assert_int_equal(find_attr(g, 0, "to")->i, 1);
    assert_null(find_attr(g, 7, "stash_type"));
    assert_int_equal(g->values[ln].dtype, IR_F32);
    ir_graph_free(f);
    ir_graph_free(g);
}

/* A float Range whose length float32 rounding decides: 0.03f to 1.3f by 0.01f has 128 values
 * in float32 (1.3f - 0.03f rounds to float first) and 127 in float64. The copy would not
 * correspond to the original, so it is refused, naming the node. */
static void test_shape_change_refused(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    const float vals[3] = {0.03f, 1.3f, 0.01f};
    int in[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        in[i] = ir_graph_add_value(g, name, IR_F32, &(ir_shape){0});
        g->values[in[i]].blob = ir_blob_new(sizeof(float));
        memcpy(ir_blob_data(g->values[in[i]].blob), &vals[i], sizeof(float));
        g->values[in[i]].flags |= IR_VF_CONST;
    }
    int r = add1(g, IR_OP_Range, 3, in, 0, NULL);
    ir_graph_add_output(g, r);
    assert_int_equal(g->values[r].shape.dims[0], 128);
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    assert_null(ir_graph_to_f64(g, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "(Range)"));
    assert_non_null(strstr(d.msg, "[127]"));
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_fixture),
                                       cmocka_unit_test(test_attributes),
                                       cmocka_unit_test(test_shape_change_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
