/* test_fission_losses.c - real losses keep the batch splittable (ir/ir-train.c, rules/): with
 * --loss mse and --loss ce (and sum), with and without an SGD step, the training graph's batch
 * dimension is broken by no node (rw_fission_break_at), the F-Tree offers an S along it that
 * holds the loss, its seed and the whole backward, and that fission, materialized into 2 and 4
 * parts, computes what the unsplit graph computes: the loss (partial sums accumulated, then the
 * mean's 1/N or the labels' count), every gradient and every updated parameter, judged against
 * the unsplit graph's float64 run (test-check.h) with the executed peak the simulated one. The
 * targets and labels are sliced with the data; cross-entropy's labels include ignored ones (-100),
 * whose count the whole batch shares.
 *
 * Also the two cross-entropy ops with reduction "sum" against their default "mean": the sum is
 * the mean times the count of the labels that are not ignored, and the gradient of the sum
 * scaled by 1/count is the mean's; and rw_fission_break_at (inspect --fission's "first break")
 * on a mean over the batch and a Dropout. */
#include "test-fission.h"
#include "test-util.h"

#include "rt.h"
#include "rules.h"
#include "schedule.h"

#define TOL 1e-5
/* the MLP's F-Tree scores a batch split positive from about 32 rows on (below, its weights
 * outweigh what a part saves) */
#define BATCH 64

/* The model: a fixture, the --shape it is loaded with. */
typedef struct model {
    const char *fixture, *shape_name;
    ir_shape shape;
} model;

/* The MLP at batch BATCH; nn.TransformerEncoder (batch_first, exported with a dynamic batch)
 * at batch 8, whose attention merges the batch into [S*B, E] and [B*H, S, d]. */
static const model mlp = {"mlp", "input", {.rank = 2, .dims = {BATCH, 16}}};
static const model encoder = {"transformer_encoder", "batch", {.rank = 1, .dims = {8}}};

/* The model's training graph. */
static ir_graph *load_model(const model *mo, ir_loss_kind loss, ir_optimizer_kind optim) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", mo->fixture);
    const char *names[1] = {mo->shape_name};
    ir_import_opts io = {.n_shapes = 1, .shape_names = names, .shape_values = &mo->shape};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(tu_src_path(rel, path, sizeof path), &io, &st, &d);
    if (!fwd) fail_msg("import: %s", d.msg);
    ir_train_opts o = {.loss = loss, .optimizer = optim, .lr = 0.1};
    ir_graph *tg = ir_build_training(fwd, &o, &st, &d);
    if (!tg) fail_msg("ir_build_training: %s", d.msg);
    ir_graph_free(fwd);
    return tg;
}

/* Labels for the MLP's 10 classes, every fifth ignored (-100), so parts count differently. */
static int64_t labels[BATCH];

/* labels bound (when g has them); the other data inputs filled from the seed. */
static int bind(const ir_graph *g, rt_binding *b) {
    for (int i = 0; i < BATCH; i++) labels[i] = i % 5 == 3 ? -100 : (i * 7) % 10;
    int n = 0, v = ir_graph_find_value(g, "labels");
    if (v >= 0)
        b[n++] =
            (rt_binding){.value = v, .dtype = IR_I64, .shape = g->values[v].shape, .data = labels};
    return n;
}

static const rt_options run_opts = {.seed = 5, .fill_missing_data = true};

static bool in_s(const rw_fission *f, uint32_t id) {
    for (int j = 0; j < f->n_ids; j++)
        if (f->ids[j] == id) return true;
    return false;
}

/* The producer of the value g's node i reads at input k (a node index), or -1. */
static int producer_of_input(const ir_graph *g, int i, int k) {
    int v = g->nodes[i].in[k];
    return v >= 0 ? g->values[v].producer : -1;
}

static void check_loss(const model *mo, ir_loss_kind loss, ir_optimizer_kind optim,
                       const char *what) {
    ir_graph *g = load_model(mo, loss, optim);
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, g->inputs[0], 0);
    assert_int_equal(rw_dgraph_comp_length(dg, comp), g->values[g->inputs[0]].shape.dims[0]);
    ir_diag d = {{0}};
    int brk = rw_fission_break_at(g, dg, comp, 0, &d);
    if (brk != -1) fail_msg("%s: the batch is broken: %s", what, d.msg);
    /* the loss's inputs are sliced with the data: the batch is their dimension 0 */
    int tgt = ir_graph_find_value(g, loss == IR_LOSS_CE ? "labels" : "target");
    if (loss != IR_LOSS_SUM) {
        assert_true(tgt >= 0);
        assert_int_equal(rw_dgraph_value_comp(dg, tgt, 0), comp);
    }

    sched_memory m;
    if (sched_memory_compute(g, NULL, &m, &d) != IR_OK) fail_msg("%s: memory: %s", what, d.msg);
    rw_ftree *t = rw_ftree_build(g, &m, 0);
    assert_non_null(t);
    int best = -1;
    for (int k = 0; k < t->n; k++)
        if (t->nodes[k].comp == comp && (best < 0 || t->nodes[k].f.n_ids > t->nodes[best].f.n_ids))
            best = k;
    if (best < 0) fail_msg("%s: no F-Tree candidate along the batch", what);
    rw_fission f = t->nodes[best].f;
    /* S holds the loss's partial sum (the node before the scale that makes the mean: mse's
     * 1/N, ce's division by the count), the seed of the backward and every gradient */
    int loss_node = g->values[g->outputs[0]].producer, sum_node = loss_node;
    if (loss != IR_LOSS_SUM) sum_node = producer_of_input(g, loss_node, 0);
    assert_true(sum_node >= 0);
    if (!in_s(&f, g->nodes[sum_node].id))
        fail_msg("%s: S (%d nodes) lacks the loss's sum '%s'", what, f.n_ids,
                 g->nodes[sum_node].name);
    int n_grad = 0;
    for (int i = loss_node + 1; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_SGDUpdate) {
            int p = producer_of_input(g, i, 1);
            /* a bias gradient is reshaped to the bias's shape after its accumulation */
            while (p >= 0 && !in_s(&f, g->nodes[p].id) &&
                   (g->nodes[p].op == IR_OP_Reshape || g->nodes[p].op == IR_OP_Transpose))
                p = producer_of_input(g, p, 0);
            if (!(p >= 0 && in_s(&f, g->nodes[p].id)))
                fail_msg("%s: gradient producer '%s' (%s) outside S", what,
                         p >= 0 ? g->nodes[p].name : "-", p >= 0 ? g->nodes[p].op_type : "-");
            n_grad++;
        }
    }
    assert_int_equal(n_grad > 0, optim == IR_OPTIM_SGD);

    rt_binding in[1];
    int n_in = bind(g, in);
    tu_ref ref;
    tu_ref_run(g, in, n_in, &run_opts, &ref, what);
    /* the loss is output 0 and a finite number */
    assert_string_equal(g->values[g->outputs[0]].name, "loss");
    assert_true(isfinite(((const float *)ref.r32.outputs[0].data)[0]));
    for (int parts = 2; parts <= 4; parts *= 2) {
        char name[160];
        snprintf(name, sizeof name, "%s, %d parts", what, parts);
        f.parts = parts;
        if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("%s: refused: %s", name, d.msg);
        tu_fission_plan p = tu_fission_plan_make(g, &f, 1, name);
        n_in = bind(p.mat, in);
        double worst = tu_fission_plan_check(&p, in, n_in, &ref, &run_opts, name);
        print_message("  %-40s S %3d nodes, %3d -> %3d nodes, worst error/bound %.2g\n", name,
                      f.n_ids, g->n_nodes, p.mat->n_nodes, worst);
        tu_fission_plan_free(&p);
    }
    tu_ref_free(&ref);
    rw_ftree_free(t);
    sched_memory_free(&m);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

static void test_mse(void **state) {
    (void)state;
    check_loss(&mlp, IR_LOSS_MSE, IR_OPTIM_NONE, "mse");
    check_loss(&mlp, IR_LOSS_MSE, IR_OPTIM_SGD, "mse, sgd");
}

static void test_ce(void **state) {
    (void)state;
    check_loss(&mlp, IR_LOSS_CE, IR_OPTIM_NONE, "ce");
    check_loss(&mlp, IR_LOSS_CE, IR_OPTIM_SGD, "ce, sgd");
}

static void test_sum(void **state) {
    (void)state;
    check_loss(&mlp, IR_LOSS_SUM, IR_OPTIM_SGD, "sum, sgd");
}

/* nn.TransformerEncoder: the batch runs through the inner factors of the attention's merged
 * dims (IR_DIMLINK_*_INNER), so the F-Tree's largest S along it is the whole training graph,
 * and its strided parts inside S compute what the unsplit graph does. */
static void test_encoder(void **state) {
    (void)state;
    check_loss(&encoder, IR_LOSS_MSE, IR_OPTIM_SGD, "encoder mse, sgd");
    check_loss(&encoder, IR_LOSS_SUM, IR_OPTIM_NONE, "encoder sum");
}

/* The inner-factor vertices: x [S, B, E] -> Reshape [S*B, E] -> Relu -> Reshape [S, B, E]:
 * B is the inner factor of S*B (and S its outer one, a component of its own), so B's component
 * holds x's dim 1, the inner factors of both [S*B, E] values and y's dim 1; a fission of all
 * three nodes along B is valid (its border values have B as a dim of their own), and so is a
 * fission of the Relu alone, whose input and output are cut into strided sets of rows
 * (test_fission_strided.c executes such splits). */
static void test_inner_factor(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(4, 6, 3);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), a, r, y;
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    ir_shape s1 = TU_SHAPE(2), s2 = TU_SHAPE(3);
    int c1 = ir_graph_add_value(g, "c1", IR_I64, &s1),
        c2 = ir_graph_add_value(g, "c2", IR_I64, &s2);
    int64_t d1[2] = {24, 3}, d2[3] = {4, 6, 3};
    g->values[c1].blob = ir_blob_new(sizeof d1);
    memcpy(ir_blob_data(g->values[c1].blob), d1, sizeof d1);
    g->values[c2].blob = ir_blob_new(sizeof d2);
    memcpy(ir_blob_data(g->values[c2].blob), d2, sizeof d2);
    g->values[c1].flags |= IR_VF_CONST;
    g->values[c2].flags |= IR_VF_CONST;
    tu_add_node1(g, IR_OP_Reshape, "merge", 2, (int[]){x, c1}, 0, NULL, &a);
    int ir = tu_add_node1(g, IR_OP_Relu, "relu", 1, &a, 0, NULL, &r);
    tu_add_node1(g, IR_OP_Reshape, "split", 2, (int[]){r, c2}, 0, NULL, &y);
    ir_graph_add_output(g, y);
    rw_dgraph *dg = rw_dgraph_build(g);
    int b = rw_dgraph_value_comp(dg, x, 1), sq = rw_dgraph_value_comp(dg, x, 0);
    assert_true(b >= 0 && sq >= 0 && b != sq);
    assert_int_equal(rw_dgraph_value_comp(dg, a, 0), sq); /* S*B: S outer */
    assert_int_equal(rw_dgraph_value_inner_comp(dg, a, 0), b);
    assert_int_equal(rw_dgraph_value_inner_comp(dg, r, 0), b); /* through the Relu */
    assert_int_equal(rw_dgraph_value_comp(dg, y, 1), b);
    assert_int_equal(rw_dgraph_value_dim_in(dg, r, b), 0);
    assert_int_equal(rw_dgraph_comp_length(dg, b), 6);
    assert_int_equal(rw_dgraph_value_inner_comp(dg, x, 2), -1); /* E has no inner factor */
    uint32_t all[3] = {g->nodes[0].id, g->nodes[1].id, g->nodes[2].id};
    rw_fission f = {
        .ids = all, .n_ids = 3, .seed_id = all[2], .seed_out = 0, .seed_dim = 1, .parts = 2};
    ir_diag d = {{0}};
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("refused: %s", d.msg);
    ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
    if (!one) fail_msg("apply: %s", d.msg);
    int relu1 = -1;
    for (int i = 0; i < one->n_nodes; i++)
        if (one->nodes[i].id == all[1]) relu1 = i;
    assert_true(relu1 >= 0);
    ir_shape half = TU_SHAPE(12, 3); /* S * B/2 rows */
    assert_true(ir_shape_eq(&one->values[one->nodes[relu1].out[0]].shape, &half));
    ir_graph_free(one);
    uint32_t relu_only[1] = {g->nodes[ir].id};
    rw_fission f1 = {
        .ids = relu_only, .n_ids = 1, .seed_id = all[2], .seed_out = 0, .seed_dim = 1, .parts = 2};
    /* the seed is outside S here on purpose: the component is what matters */
    if (rw_fission_check(g, dg, &f1, &d) != IR_OK) fail_msg("strided border refused: %s", d.msg);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* The ops: reduction "sum" is the mean times the count; the gradient of the sum with
 * dLoss = 1/count is the mean's with dLoss = 1. */
static void test_ce_sum_reduction(void **state) {
    (void)state;
    enum { R = 6, C = 5 };
    float x[R * C];
    tu_fill(x, R * C, 11);
    int64_t lab[R] = {4, -100, 0, 2, -100, 1};
    float one = 1.0f, inv = 0.25f; /* 4 labels count */
    ir_attr sum = tu_attr_str("reduction", "sum");
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(R, C), x), tu_data_in(IR_I64, TU_SHAPE(R), lab)};
    ir_tensor mean_out[2] = {{0}}, sum_out[2] = {{0}};
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_SoftmaxCrossEntropy, 2, in, 2, 0, NULL, mean_out, &d), IR_OK);
    assert_int_equal(tu_run_op(IR_OP_SoftmaxCrossEntropy, 2, in, 2, 1, &sum, sum_out, &d), IR_OK);
    float ms = ((float *)mean_out[0].data)[0] * 4, ss = ((float *)sum_out[0].data)[0];
    assert_true(tu_rel_err_f32(&ss, &ms, 1) <= TOL);
    assert_true(tu_rel_err_f32(sum_out[1].data, mean_out[1].data, R * C) <= TOL);

    tu_in gm[3] = {tu_data_in(IR_F32, TU_SCALAR_SHAPE, &one),
                   tu_data_in(IR_F32, TU_SHAPE(R, C), mean_out[1].data),
                   tu_data_in(IR_I64, TU_SHAPE(R), lab)};
    tu_in gs[3] = {tu_data_in(IR_F32, TU_SCALAR_SHAPE, &inv), gm[1], gm[2]};
    ir_tensor dm = {0}, ds = {0};
    assert_int_equal(tu_run_op(IR_OP_SoftmaxCrossEntropyGrad, 3, gm, 1, 0, NULL, &dm, &d), IR_OK);
    assert_int_equal(tu_run_op(IR_OP_SoftmaxCrossEntropyGrad, 3, gs, 1, 1, &sum, &ds, &d), IR_OK);
    assert_true(tu_rel_err_f32(ds.data, dm.data, R * C) <= TOL);
    for (int c = 0; c < C; c++) assert_true(((float *)ds.data)[1 * C + c] == 0.0f); /* ignored */

    ir_attr bad = tu_attr_str("reduction", "none");
    assert_int_equal(tu_run_err(IR_OP_SoftmaxCrossEntropy, 2, in, 2, 1, &bad, &d),
                     IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "reduction 'none'"));
    tu_free_outputs(2, mean_out);
    tu_free_outputs(2, sum_out);
    tu_free_outputs(1, &dm);
    tu_free_outputs(1, &ds);
}

/* rw_fission_break_at on a mean over the batch (the loss mse was before it became a sum times
 * 1/N) and a training-mode Dropout(0.5): each is found in node order with the checker's reason, and
 * the walk from past the last ends with -1. */
static void test_break_at(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(8, 4);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), r, m, dr;
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    tu_add_node1(g, IR_OP_Relu, "r", 1, &x, 0, NULL, &r);
    ir_attr kd = tu_attr_int("keepdims", 0);
    int im = tu_add_node1(g, IR_OP_ReduceMean, "m", 1, &r, 1, &kd, &m);
    /* a training-mode Dropout(0.5): an inference one (no training_mode) is an identity */
    ir_shape sc = {.rank = 0};
    int ratio = ir_graph_add_value(g, "ratio", IR_F32, &sc);
    int train = ir_graph_add_value(g, "training_mode", IR_BOOL, &sc);
    g->values[ratio].blob = ir_blob_new(sizeof(float));
    *(float *)ir_blob_data(g->values[ratio].blob) = 0.5f;
    g->values[train].blob = ir_blob_new(1);
    *(uint8_t *)ir_blob_data(g->values[train].blob) = 1;
    g->values[ratio].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    g->values[train].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    int id = tu_add_node1(g, IR_OP_Dropout, "dr", 3, (int[]){r, ratio, train}, 0, NULL, &dr);
    /* and a training-mode Dropout(0), as PyTorch exports nn.Dropout(0.0): it draws nothing */
    int zero = ir_graph_add_value(g, "ratio0", IR_F32, &sc), d0;
    g->values[zero].blob = ir_blob_new(sizeof(float));
    *(float *)ir_blob_data(g->values[zero].blob) = 0.0f;
    g->values[zero].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    int id0 = tu_add_node1(g, IR_OP_Dropout, "dr0", 3, (int[]){r, zero, train}, 0, NULL, &d0);
    ir_graph_add_output(g, d0);
    ir_graph_add_output(g, m);
    ir_graph_add_output(g, dr);
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, x, 0);
    ir_diag d = {{0}};
    int first = rw_fission_break_at(g, dg, comp, 0, &d);
    assert_int_equal(first, im);
    assert_non_null(strstr(d.msg, "node 'm' (ReduceMean): fission: D is its reduce axis 1, which "
                                  "is not a sum"));
    int next = rw_fission_break_at(g, dg, comp, first + 1, &d);
    assert_int_equal(next, id);
    assert_non_null(strstr(d.msg, "a random op"));
    assert_int_equal(rw_fission_break_at(g, dg, comp, next + 1, &d), -1);
    assert_false(ir_node_draws_random(g, &g->nodes[id0]));
    assert_true(ir_node_draws_random(g, &g->nodes[id]));
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_break_at), cmocka_unit_test(test_ce_sum_reduction),
        cmocka_unit_test(test_sum),      cmocka_unit_test(test_mse),
        cmocka_unit_test(test_ce),       cmocka_unit_test(test_inner_factor),
        cmocka_unit_test(test_encoder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
