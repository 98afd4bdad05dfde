/* test_fission_bn.c - a batch fission across training-mode batch norm, in two phases
 * (rules/rules-bn.c): rw_bn_two_phase writes each training BatchNormalization as standard ops
 * whose batch statistics are sums over the batch, rw_fission_phases cuts a fission along the
 * batch where S reads such a sum again, and the phases, applied, materialized and executed in 2
 * and 4 parts, compute what the original graph (with its fused BatchNormalization) computes:
 * every output judged against the float64 run of the original (test-check.h), the executed
 * peak equal to sched_memory_compute's of the one-copy graph.
 *
 *  - a hand-built BatchNormalization whose Y, running mean and running variance are graph
 *    outputs (batch 8, a mean far from zero against the deviation, as the centered second sum
 *    has to survive in float32);
 *  - the training graphs (--loss mse) of cnn_bn_train (conv, BN, ReLU, pool, conv, BN) and
 *    unet_transpose_train (14 batch norms), the whole graph split along the batch: the loss and
 *    every gradient, the backward's batch reductions in phases too. */
#include "test-fission.h"

#include "rules.h"
#include "schedule.h"

/* The nodes with a vertex in comp (an output dim or a reduce axis): S for a whole-graph
 * fission along it. Their ids into ids (room for g->n_nodes), the count returned. */
static int nodes_in(const ir_graph *g, const rw_dgraph *dg, int comp, uint32_t *ids) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool in = rw_dgraph_reduce_in(dg, i, comp) > 0;
        for (int k = 0; k < nd->n_out && !in; k++)
            in = nd->out[k] >= 0 && rw_dgraph_value_dim_in(dg, nd->out[k], comp) >= 0;
        if (in) ids[n++] = nd->id;
    }
    return n; /* node order is topological and ids grow along it only in fresh graphs: sort */
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* g along the component of input 0's dim 0, in phases, in `parts` parts, against ref. Returns
 * the number of phases. */
static int check_phases(const ir_graph *g, int parts, const tu_ref *ref, const rt_options *ro,
                        const char *what) {
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, g->inputs[0], 0);
    assert_true(comp >= 0);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    int n_ids = nodes_in(g, dg, comp, ids);
    qsort(ids, (size_t)n_ids, sizeof *ids, cmp_u32);
    rw_fission f = {.ids = ids, .n_ids = n_ids, .seed_dim = -1, .parts = parts};
    for (int i = 0; i < g->n_nodes && f.seed_dim < 0; i++)
        for (int k = 0; k < g->nodes[i].n_out && f.seed_dim < 0; k++)
            if (rw_dgraph_value_comp(dg, g->nodes[i].out[k], 0) == comp) {
                f.seed_id = g->nodes[i].id;
                f.seed_out = k;
                f.seed_dim = 0;
            }
    ir_diag d = {{0}};
    /* as one fission S is refused: it reads its own batch sums */
    assert_int_equal(rw_fission_check(g, dg, &f, &d), IR_ERR_INVALID);
    rw_fission *ph = NULL;
    int n_ph = rw_fission_phases(g, dg, &f, &ph, &d);
    if (n_ph < 2) fail_msg("%s: %d phases: %s", what, n_ph, d.msg);
    char name[160];
    snprintf(name, sizeof name, "%s, %d phases", what, n_ph);
    tu_fission_plan p = tu_fission_plan_make(g, ph, n_ph, name);
    double worst = tu_fission_plan_check(&p, NULL, 0, ref, ro, what);
    print_message("  %-44s %2d phases, %4d -> %4d nodes, worst error/bound %.2g\n", what, n_ph,
                  g->n_nodes, p.mat->n_nodes, worst);
    tu_fission_plan_free(&p);
    free(ph[0].ids);
    free(ph);
    free(ids);
    rw_dgraph_free(dg);
    return n_ph;
}

static int add_param(ir_graph *g, const char *name, int64_t c, float base, float step) {
    ir_shape s = TU_SHAPE(c);
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    g->values[v].blob = ir_blob_new(sizeof(float) * (size_t)c);
    float *p = ir_blob_data(g->values[v].blob);
    for (int64_t i = 0; i < c; i++) p[i] = base + step * (float)i;
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    return v;
}

/* x [8, 3, 4, 4] + 50 (a data input, shifted by an Add) -> BatchNormalization (training_mode 1,
 * Y and the running statistics graph outputs) -> Relu. */
static void test_bn_forward(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(8, 3, 4, 4);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    ir_shape one = TU_SHAPE(1);
    int sh = ir_graph_add_value(g, "shift", IR_F32, &one);
    g->values[sh].blob = ir_blob_new(sizeof(float));
    *(float *)ir_blob_data(g->values[sh].blob) = 50.0f;
    g->values[sh].flags |= IR_VF_CONST;
    int xp;
    tu_add_node1(g, IR_OP_Add, "shifted", 2, (int[]){x, sh}, 0, NULL, &xp);
    int sc = add_param(g, "scale", 3, 0.5f, 0.25f), bi = add_param(g, "bias", 3, -0.1f, 0.1f),
        rm = add_param(g, "rmean", 3, 1.0f, 1.0f), rv = add_param(g, "rvar", 3, 2.0f, 0.5f);
    int out[3];
    ir_attr a[2] = {tu_attr_int("training_mode", 1), tu_attr_float("momentum", 0.8f)};
    tu_add_node(g, IR_OP_BatchNormalization, "bn", 5, (int[]){xp, sc, bi, rm, rv}, 3, out, 2, a);
    int y;
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &out[0], 0, NULL, &y);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, out[1]);
    ir_graph_add_output(g, out[2]);
    rt_options ro = {.seed = 3, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &ro, &ref, "bn forward");
    ir_diag d = {{0}};
    int n_bn;
    ir_graph *two = rw_bn_two_phase(g, &n_bn, &d);
    if (!two) fail_msg("two phases: %s", d.msg);
    assert_int_equal(n_bn, 1);
    for (int i = 0; i < two->n_nodes; i++)
        assert_int_not_equal(two->nodes[i].op, IR_OP_BatchNormalization);
    /* unsplit, it computes what the fused op computes */
    rt_result r = {0};
    if (rt_run(two, NULL, 0, &ro, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
    tu_expect_close(&ref, two, &r, "bn forward, two-phase ops unsplit");
    rt_result_free(&r);
    /* the batch runs through it: the sums (mean, then the centered second sum) end two phases */
    for (int parts = 2; parts <= 4; parts *= 2) {
        char what[64];
        snprintf(what, sizeof what, "bn forward, %d parts", parts);
        assert_int_equal(check_phases(two, parts, &ref, &ro, what), 3);
    }
    tu_ref_free(&ref);
    ir_graph_free(two);
    ir_graph_free(g);
}

/* The model at rel (from the source tree) imported into *fwd, and its batch norms in two phases
 * (*n_bn of them); fails the test naming name. */
static ir_graph *load_two_phase(const char *rel, const char *name, ir_graph **fwd, int *n_bn) {
    char path[1024];
    ir_diag d = {{0}};
    ir_status st;
    *fwd = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
    if (!*fwd) fail_msg("import %s: %s", name, d.msg);
    ir_graph *two = rw_bn_two_phase(*fwd, n_bn, &d);
    if (!two) fail_msg("%s: two phases: %s", name, d.msg);
    return two;
}

/* A fixture's training graph (--loss mse) with its batch norms in two phases, split along the
 * batch, against the training graph of the original. */
static void check_fixture(const char *name, int expect_bn) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd;
    int n_bn;
    ir_graph *two = load_two_phase(rel, name, &fwd, &n_bn);
    assert_int_equal(n_bn, expect_bn);
    ir_train_opts to = {.loss = IR_LOSS_MSE};
    ir_graph *tg = ir_build_training(fwd, &to, &st, &d);
    if (!tg) fail_msg("%s: training graph: %s", name, d.msg);
    ir_graph *tg2 = ir_build_training(two, &to, &st, &d);
    if (!tg2) fail_msg("%s: training graph of the two-phase ops: %s", name, d.msg);
    rt_options ro = {.seed = 4, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(tg, NULL, 0, &ro, &ref, name);
    rt_result r = {0};
    if (rt_run(tg2, NULL, 0, &ro, &r, &d) != IR_OK) fail_msg("%s: run: %s", name, d.msg);
    char what[128];
    snprintf(what, sizeof what, "%s, two-phase ops unsplit", name);
    tu_expect_close(&ref, tg2, &r, what);
    rt_result_free(&r);
    rw_dgraph *dg = rw_dgraph_build(tg2);
    int comp = rw_dgraph_value_comp(dg, tg2->inputs[0], 0);
    int brk = rw_fission_break_at(tg2, dg, comp, 0, &d);
    /* nothing but its own batch sums stops the batch: each node splits or is a sum */
    if (brk != -1) fail_msg("%s: the batch is broken: %s", name, d.msg);
    rw_dgraph_free(dg);
    snprintf(what, sizeof what, "%s, 2 parts", name);
    int n_ph = check_phases(tg2, 2, &ref, &ro, what);
    assert_true(n_ph >= 4 * expect_bn); /* two forward and at least two backward per BN */
    tu_ref_free(&ref);
    ir_graph_free(tg2);
    ir_graph_free(tg);
    ir_graph_free(two);
    ir_graph_free(fwd);
}

static void test_cnn_bn_train(void **state) {
    (void)state;
    check_fixture("cnn_bn_train", 2);
}

static void test_unet_transpose_train(void **state) {
    (void)state;
    check_fixture("unet_transpose_train", 14);
}

/* What inspect --fission says of a fused training-mode batch norm (rw_fission_break_at): the
 * forward's and the backward's reason name the batch statistics and the input they reduce, where
 * the generic rule said "has no dimension and no reduce axis in D"; an inference-mode batch norm
 * links the batch and stops nothing. */
static void test_bn_break_reason(void **state) {
    (void)state;
    char path[1024];
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(
        tu_src_path("tests/fixtures/numeric/cnn_bn_train/model.onnx", path, sizeof path), NULL, &st,
        &d);
    if (!fwd) fail_msg("import: %s", d.msg);
    ir_train_opts to = {.loss = IR_LOSS_MSE};
    ir_graph *tg = ir_build_training(fwd, &to, &st, &d);
    if (!tg) fail_msg("training graph: %s", d.msg);
    rw_dgraph *dg = rw_dgraph_build(tg);
    int comp = rw_dgraph_value_comp(dg, tg->inputs[0], 0);
    assert_true(comp >= 0);
    int brk = rw_fission_break_at(tg, dg, comp, 0, &d);
    assert_true(brk >= 0);
    assert_int_equal(tg->nodes[brk].op, IR_OP_BatchNormalization);
    if (!strstr(d.msg, "a batch norm in training mode, whose batch statistics are a reduction "
                       "over D (dim 0 of "))
        fail_msg("forward: %s", d.msg);
    bool grad = false;
    for (int from = brk + 1; !grad && (brk = rw_fission_break_at(tg, dg, comp, from, &d)) >= 0;
         from = brk + 1) {
        if (tg->nodes[brk].op != IR_OP_BatchNormGrad) continue;
        grad = true;
        if (!strstr(d.msg, "the backward of a batch norm in training mode"))
            fail_msg("backward: %s", d.msg);
    }
    assert_true(grad);
    rw_dgraph_free(dg);
    ir_graph_free(tg);
    ir_graph_free(fwd);

    /* inference mode: x [8, 3, 4, 4] -> BatchNormalization (training_mode 0) -> Relu */
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(8, 3, 4, 4);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    int sc = add_param(g, "scale", 3, 0.5f, 0.25f), bi = add_param(g, "bias", 3, -0.1f, 0.1f),
        rm = add_param(g, "rmean", 3, 1.0f, 1.0f), rv = add_param(g, "rvar", 3, 2.0f, 0.5f);
    int y, r;
    ir_attr a = tu_attr_int("training_mode", 0);
    tu_add_node1(g, IR_OP_BatchNormalization, "bn", 5, (int[]){x, sc, bi, rm, rv}, 1, &a, &y);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &y, 0, NULL, &r);
    ir_graph_add_output(g, r);
    dg = rw_dgraph_build(g);
    comp = rw_dgraph_value_comp(dg, x, 0);
    assert_int_equal(rw_fission_break_at(g, dg, comp, 0, &d), -1);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* The corpus's batch-norm models (structure only), their batch norms in two phases: nothing but a
 * random op stops their batch. The U-Net's (ConvTranspose, Concat, MaxPool, --loss mse) runs
 * through the whole training graph; EfficientNet-B0's (squeeze-excitation pools and broadcasts,
 * SiLU as Sigmoid and Mul, --loss ce) stops only at the classifier's Dropout(0.2), which draws. */
static void check_corpus_breaks(const char *name, ir_loss_kind loss, const char *expect) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/corpus/%s.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd;
    int n_bn;
    ir_graph *two = load_two_phase(rel, name, &fwd, &n_bn);
    assert_true(n_bn > 0);
    ir_train_opts to = {.loss = loss, .optimizer = IR_OPTIM_SGD, .lr = 0.01};
    ir_graph *tg = ir_build_training(two, &to, &st, &d);
    if (!tg) fail_msg("%s: training graph: %s", name, d.msg);
    rw_dgraph *dg = rw_dgraph_build(tg);
    int comp = rw_dgraph_value_comp(dg, tg->inputs[0], 0), n = 0;
    assert_true(comp >= 0);
    for (int from = 0, b; (b = rw_fission_break_at(tg, dg, comp, from, &d)) >= 0; from = b + 1) {
        if (!expect || strcmp(tg->nodes[b].name, expect) != 0)
            fail_msg("%s: the batch is broken: %s", name, d.msg);
        n++;
    }
    assert_int_equal(n, expect ? 1 : 0);
    rw_dgraph_free(dg);
    ir_graph_free(tg);
    ir_graph_free(two);
    ir_graph_free(fwd);
}

static void test_corpus_breaks(void **state) {
    (void)state;
    check_corpus_breaks("unet_bn_train", IR_LOSS_MSE, NULL);
    check_corpus_breaks("efficientnet_b0", IR_LOSS_CE, "/classifier/classifier.0/Dropout");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bn_forward),           cmocka_unit_test(test_cnn_bn_train),
        cmocka_unit_test(test_unet_transpose_train), cmocka_unit_test(test_bn_break_reason),
        cmocka_unit_test(test_corpus_breaks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
