/* test_fission_links.c - the dimension links a GPT decoder's batch fission needs, each on a
 * hand-built training graph (ir_build_training, loss sum), then all of them on a real one:
 *  - the embedding gradient (Gather's backward, GatherGrad: a scatter-add of dY over batch x
 *    sequence into the table) is a sum over the split dimension: a partial node of S whose parts
 *    FissionAccumulate adds up;
 *  - a tied weight (one tensor read by the embedding and by the output head) has no dimension in
 *    the batch, so every part reads it whole (no FissionSlice), and its gradient is the sum over
 *    parts of both uses;
 *  - a constant mask that broadcasts over the batch (a causal mask added to the attention scores)
 *    is a shared input, never sliced;
 *  - a training-mode Dropout(p=0), as PyTorch's training export writes every Dropout(0.0), draws
 *    nothing, so it does not stop the batch (ir_node_draws_random).
 * Each fission, materialized into 2 and 4 parts, computes what the unsplit graph computes, judged
 * against its float64 run (test-check.h), with the executed peak equal to the simulated one. On
 * gpt_small_train (a GPT decoder with a tied head and a causal-mask buffer, ce loss, SGD step),
 * the F-Tree's largest batch candidate with the token embedding's Gather and GatherGrad added
 * passes rw_fission_check; its materialized plan, written as optimize writes one, passes `magpie
 * verify` on the loss and every updated parameter, and `magpie run` measures the peak the plan's
 * schedule predicts, to the byte. */
#include "test-fission.h"
#include "test-util.h"

#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"
#include "rules.h"
#include "schedule.h"

#define B 16
#define T 8
#define V 12
#define DM 6

static int add_data(ir_graph *g, const char *name, ir_dtype dt, ir_shape s) {
    int v = ir_graph_add_value(g, name, dt, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= IR_VF_DATA;
    return v;
}

/* A float initializer; a trained parameter when param. */
static int add_const(ir_graph *g, const char *name, ir_shape s, bool param, unsigned seed) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_blob *b = ir_blob_new((size_t)ir_shape_numel(&s) * sizeof(float));
    tu_fill(ir_blob_data(b), ir_shape_numel(&s), seed);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER | (param ? IR_VF_PARAM : 0);
    return v;
}

static ir_graph *training(const ir_graph *fwd) {
    ir_diag d = {{0}};
    ir_status st;
    ir_train_opts o = {.loss = IR_LOSS_SUM};
    ir_graph *tg = ir_build_training(fwd, &o, &st, &d);
    if (!tg) fail_msg("ir_build_training: %s", d.msg);
    return tg;
}

static int64_t tokens[B * T];

/* idx bound to fixed tokens (when g has it); the other data inputs filled from the seed. */
static int bind(const ir_graph *g, rt_binding *b) {
    int n = 0, v = ir_graph_find_value(g, "idx");
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 5 + i / 3) % V;
    if (v >= 0)
        b[n++] =
            (rt_binding){.value = v, .dtype = IR_I64, .shape = g->values[v].shape, .data = tokens};
    return n;
}

static const rt_options run_opts = {.seed = 3, .fill_missing_data = true};

/* The first node of op reading value v (any input), or -1. */
static int reader(const ir_graph *g, ir_op_kind op, int v) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != op) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == v) return i;
    }
    return -1;
}

static bool in_s(const rw_fission *f, uint32_t id) {
    for (int j = 0; j < f->n_ids; j++)
        if (f->ids[j] == id) return true;
    return false;
}

/* True when a FissionSlice of mat reads the value named name as the tensor it cuts. */
static bool sliced(const ir_graph *mat, const char *name) {
    int v = ir_graph_find_value(mat, name);
    for (int i = 0; v >= 0 && i < mat->n_nodes; i++)
        if (mat->nodes[i].op == IR_OP_FissionSlice && mat->nodes[i].in[0] == v) return true;
    return false;
}

static int count_op(const ir_graph *g, ir_op_kind op) {
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += g->nodes[i].op == op;
    return c;
}

/* The F-Tree's largest candidate along comp (its ids borrowed from t), failing without one. */
static rw_fission largest(const rw_ftree *t, int comp, const char *what) {
    int best = -1;
    for (int k = 0; k < t->n; k++)
        if (t->nodes[k].comp == comp && (best < 0 || t->nodes[k].f.n_ids > t->nodes[best].f.n_ids))
            best = k;
    if (best < 0) fail_msg("%s: no F-Tree candidate along the batch", what);
    return t->nodes[best].f;
}

/* f materialized into 2 and 4 parts computes every output of g as g does; the values named in
 * shared (NULL-terminated) are read whole by every part: no FissionSlice cuts them. */
static void check_parts(const ir_graph *g, const rw_dgraph *dg, rw_fission f, const char *what,
                        const char *const *shared) {
    rt_binding in[1];
    int n_in = bind(g, in);
    tu_ref ref;
    tu_ref_run(g, in, n_in, &run_opts, &ref, what);
    ir_diag d = {{0}};
    for (int parts = 2; parts <= 4; parts *= 2) {
        char name[160];
        snprintf(name, sizeof name, "%s, %d parts", what, parts);
        f.parts = parts;
        if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("%s: refused: %s", name, d.msg);
        tu_fission_plan p = tu_fission_plan_make(g, &f, 1, name);
        assert_true(sliced(p.mat, "idx") || sliced(p.mat, "x"));
        for (int s = 0; shared && shared[s]; s++)
            if (sliced(p.mat, shared[s])) fail_msg("%s: '%s' is sliced", name, shared[s]);
        /* the gradients summed over parts */
        assert_true(count_op(p.mat, IR_OP_FissionAccumulate) >= 1);
        n_in = bind(p.mat, in);
        tu_fission_plan_check(&p, in, n_in, &ref, &run_opts, name);
        tu_fission_plan_free(&p);
    }
    tu_ref_free(&ref);
}

static rw_ftree *ftree_of(const ir_graph *g, sched_memory *m) {
    ir_diag d = {{0}};
    if (sched_memory_compute(g, NULL, m, &d) != IR_OK) fail_msg("memory: %s", d.msg);
    rw_ftree *t = rw_ftree_build(g, m, 0);
    assert_non_null(t);
    return t;
}

/* y = Gather(W, idx) * Gather(W, idx): W [V, DM] a parameter, idx [B, T] the token ids. */
static void test_embedding_gradient_is_a_sum(void **state) {
    (void)state;
    ir_graph *fwd = ir_graph_new();
    int idx = add_data(fwd, "idx", IR_I64, TU_SHAPE(B, T));
    int w = add_const(fwd, "W", TU_SHAPE(V, DM), true, 7), e, y;
    tu_add_node1(fwd, IR_OP_Gather, "embed", 2, (int[]){w, idx}, 0, NULL, &e);
    tu_add_node1(fwd, IR_OP_Mul, "square", 2, (int[]){e, e}, 0, NULL, &y);
    ir_graph_add_output(fwd, y);
    ir_graph *g = training(fwd);
    rw_dgraph *dg = rw_dgraph_build(g);
    int gidx = ir_graph_find_value(g, "idx"), gw = ir_graph_find_value(g, "W");
    int batch = rw_dgraph_value_comp(dg, gidx, 0), seq = rw_dgraph_value_comp(dg, gidx, 1);
    assert_true(batch >= 0 && seq >= 0 && batch != seq);
    assert_int_equal(rw_dgraph_comp_length(dg, batch), B);
    int gg = reader(g, IR_OP_GatherGrad, gidx);
    assert_true(gg >= 0);
    /* one summed reduce axis per dim of the indices: batch, then sequence */
    assert_int_equal(rw_dgraph_reduce_in(dg, gg, batch), 1);
    assert_int_equal(rw_dgraph_reduce_in(dg, gg, seq), 2);
    assert_true(rw_dgraph_reduce_is_sum(dg, gg, 1));
    assert_true(rw_dgraph_reduce_is_sum(dg, gg, 2));
    /* the table and its gradient have no batch: the vocabulary is not the batch */
    int grad = g->nodes[gg].out[0];
    assert_int_equal(rw_dgraph_value_dim_in(dg, gw, batch), -1);
    assert_int_equal(rw_dgraph_value_dim_in(dg, grad, batch), -1);
    ir_diag d = {{0}};
    assert_int_equal(rw_fission_break_at(g, dg, batch, 0, &d), -1);

    sched_memory m;
    rw_ftree *t = ftree_of(g, &m);
    rw_fission f = largest(t, batch, "embedding");
    if (!in_s(&f, g->nodes[gg].id)) fail_msg("embedding: S lacks the GatherGrad");
    check_parts(g, dg, f, "embedding", (const char *const[]){"W", NULL});
    rw_ftree_free(t);
    sched_memory_free(&m);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    ir_graph_free(fwd);
}

/* logits = Gather(W, idx) @ W^T: the head tied to the embedding table W. */
static void test_tied_weight_is_shared(void **state) {
    (void)state;
    ir_graph *fwd = ir_graph_new();
    int idx = add_data(fwd, "idx", IR_I64, TU_SHAPE(B, T));
    int w = add_const(fwd, "W", TU_SHAPE(V, DM), true, 9), e, wt, y;
    tu_add_node1(fwd, IR_OP_Gather, "embed", 2, (int[]){w, idx}, 0, NULL, &e);
    ir_attr perm = {.name = "perm", .type = IR_ATTR_INTS, .n = 2, .ints = (int64_t[]){1, 0}};
    tu_add_node1(fwd, IR_OP_Transpose, "head_t", 1, &w, 1, &perm, &wt);
    tu_add_node1(fwd, IR_OP_MatMul, "head", 2, (int[]){e, wt}, 0, NULL, &y);
    ir_graph_add_output(fwd, y);
    ir_graph *g = training(fwd);
    rw_dgraph *dg = rw_dgraph_build(g);
    int gidx = ir_graph_find_value(g, "idx"), gw = ir_graph_find_value(g, "W");
    int batch = rw_dgraph_value_comp(dg, gidx, 0);
    assert_int_equal(rw_dgraph_value_dim_in(dg, gw, batch), -1);
    /* both uses' gradients are sums over the batch: the scatter-add and the head's weight
     * gradient (a Gemm over the [B*T, DM] rows, whose reduce axis is their outer factor) */
    int gg = reader(g, IR_OP_GatherGrad, gidx);
    assert_true(gg >= 0);
    assert_true(rw_dgraph_reduce_is_sum(dg, gg, rw_dgraph_reduce_in(dg, gg, batch)));
    int n_sum = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int r = rw_dgraph_reduce_in(dg, i, batch);
        if (r > 0 && g->nodes[i].op == IR_OP_Gemm) {
            assert_true(rw_dgraph_reduce_is_sum(dg, i, r));
            n_sum++;
        }
    }
    assert_true(n_sum >= 1);
    /* W's gradient adds the two uses: that Add has no batch, so it stays outside S and reads
     * the two accumulated sums */
    int gout = ir_graph_find_value(g, "W.grad");
    assert_true(gout >= 0);
    int add = g->values[gout].producer;
    assert_true(add >= 0);
    sched_memory m;
    rw_ftree *t = ftree_of(g, &m);
    rw_fission f = largest(t, batch, "tied");
    if (!in_s(&f, g->nodes[gg].id)) fail_msg("tied: S lacks the GatherGrad");
    assert_false(in_s(&f, g->nodes[add].id));
    check_parts(g, dg, f, "tied", (const char *const[]){"W", NULL});
    rw_ftree_free(t);
    sched_memory_free(&m);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    ir_graph_free(fwd);
}

/* y = Softmax(x + mask) @ v-less attention: x [B, T, T] the scores, mask [T, T] a constant
 * (not trained) that broadcasts over the batch, as nn.MultiheadAttention adds attn_mask. */
static void test_causal_mask_is_shared(void **state) {
    (void)state;
    ir_graph *fwd = ir_graph_new();
    int x = add_data(fwd, "x", IR_F32, TU_SHAPE(B, T, T));
    int mask = add_const(fwd, "mask", TU_SHAPE(T, T), false, 11);
    float *mv = ir_blob_data(fwd->values[mask].blob);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) mv[i * T + j] = j > i ? -1e9f : 0.0f;
    int w = add_const(fwd, "w", TU_SHAPE(T, DM), true, 13), s, p, y;
    tu_add_node1(fwd, IR_OP_Add, "masked", 2, (int[]){x, mask}, 0, NULL, &s);
    ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = -1};
    tu_add_node1(fwd, IR_OP_Softmax, "probs", 1, &s, 1, &ax, &p);
    tu_add_node1(fwd, IR_OP_MatMul, "mix", 2, (int[]){p, w}, 0, NULL, &y);
    ir_graph_add_output(fwd, y);
    ir_graph *g = training(fwd);
    rw_dgraph *dg = rw_dgraph_build(g);
    int gx = ir_graph_find_value(g, "x"), gm = ir_graph_find_value(g, "mask");
    int batch = rw_dgraph_value_comp(dg, gx, 0);
    assert_true(batch >= 0);
    assert_int_equal(rw_dgraph_value_dim_in(dg, gm, batch), -1);
    /* the mask's own dims are the sequence dims of the scores, not the batch */
    assert_int_equal(rw_dgraph_value_comp(dg, gm, 0), rw_dgraph_value_comp(dg, gx, 1));
    assert_int_equal(rw_dgraph_value_comp(dg, gm, 1), rw_dgraph_value_comp(dg, gx, 2));
    /* S: every node with a batch dim or a reduce axis over it that reads a value with one (the
     * F-Tree offers nothing on a graph this small: no S scores above its inputs) */
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    int n = 0, seed = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool has = rw_dgraph_reduce_in(dg, i, batch) > 0, reads = false;
        for (int k = 0; k < nd->n_out; k++)
            has |= nd->out[k] >= 0 && rw_dgraph_value_dim_in(dg, nd->out[k], batch) >= 0;
        for (int k = 0; k < nd->n_in; k++)
            reads |= nd->in[k] >= 0 && rw_dgraph_value_dim_in(dg, nd->in[k], batch) >= 0;
        if (!has || !reads) continue;
        if (seed < 0) seed = i;
        ids[n++] = nd->id;
    }
    int add = reader(g, IR_OP_Add, gm);
    assert_true(seed == add);
    rw_fission f = {.ids = ids, .n_ids = n, .seed_id = g->nodes[add].id, .seed_dim = 0};
    check_parts(g, dg, f, "mask", (const char *const[]){"mask", "w", NULL});
    free(ids);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    ir_graph_free(fwd);
}

/* ---------------------------------------------------------------- the GPT decoder */

#define GPT "tests/fixtures/numeric/gpt_small_train/"

static ir_graph *gpt_training(void) {
    char path[1024];
    ir_import_opts io = {0};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(tu_src_path(GPT "model.onnx", path, sizeof path), &io, &st, &d);
    if (!fwd) fail_msg("import: %s", d.msg);
    ir_train_opts o = {.loss = IR_LOSS_CE, .optimizer = IR_OPTIM_SGD, .lr = 0.01};
    ir_graph *tg = ir_build_training(fwd, &o, &st, &d);
    if (!tg) fail_msg("ir_build_training: %s", d.msg);
    ir_graph_free(fwd);
    return tg;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void test_gpt_embedding_fission_verifies(void **state) {
    (void)state;
    ir_graph *g = gpt_training();
    rw_dgraph *dg = rw_dgraph_build(g);
    int idx = ir_graph_find_value(g, "idx");
    int batch = rw_dgraph_value_comp(dg, idx, 0);
    ir_diag d = {{0}};
    /* no node breaks the batch: the Dropout(p=0) of the training export draws nothing */
    assert_true(count_op(g, IR_OP_Dropout) > 0);
    int brk = rw_fission_break_at(g, dg, batch, 0, &d);
    if (brk != -1) fail_msg("gpt: the batch is broken: %s", d.msg);
    /* the tied table and the causal-mask buffers have no batch dimension */
    int wte = ir_graph_find_value(g, "wte.weight");
    assert_true(wte >= 0);
    assert_int_equal(rw_dgraph_value_dim_in(dg, wte, batch), -1);
    for (int v = 0; v < g->n_values; v++)
        if (strstr(g->values[v].name, "causal") && (g->values[v].flags & IR_VF_CONST))
            assert_int_equal(rw_dgraph_value_dim_in(dg, v, batch), -1);

    /* S: the F-Tree's largest batch candidate (from the first layer norm on) with the token
     * embedding added: its Gather, the Add of the positions, and the scatter-add */
    sched_memory m;
    rw_ftree *t = ftree_of(g, &m);
    rw_fission c = largest(t, batch, "gpt");
    int gather = reader(g, IR_OP_Gather, idx), gg = reader(g, IR_OP_GatherGrad, idx);
    assert_true(gather >= 0 && gg >= 0);
    int emb = g->nodes[gather].out[0], add = reader(g, IR_OP_Add, emb);
    assert_true(add >= 0);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)(c.n_ids + 3));
    memcpy(ids, c.ids, sizeof(uint32_t) * (size_t)c.n_ids);
    int n = c.n_ids;
    const int extra[3] = {gather, add, gg};
    for (int k = 0; k < 3; k++)
        if (!in_s(&c, g->nodes[extra[k]].id)) ids[n++] = g->nodes[extra[k]].id;
    qsort(ids, (size_t)n, sizeof *ids, cmp_u32);
    rw_fission f = {.ids = ids,
                    .n_ids = n,
                    .seed_id = g->nodes[gather].id,
                    .seed_out = 0,
                    .seed_dim = 0,
                    .parts = 2};
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("gpt: refused: %s", d.msg);
    tu_fission_plan fp = tu_fission_plan_make(g, &f, 1, "gpt");
    ir_graph *mat = fp.mat;
    assert_true(sliced(mat, "idx") && sliced(mat, "labels"));
    assert_false(sliced(mat, "wte.weight"));
    for (int v = 0; v < mat->n_values; v++)
        if (strstr(mat->values[v].name, "causal") && !strstr(mat->values[v].name, "slice"))
            assert_false(sliced(mat, mat->values[v].name));
    assert_int_equal(count_op(mat, IR_OP_GatherGrad) >= 3, true); /* wte's twice, wpe's once */

    /* written as optimize writes a plan: the nodes in the schedule's order */
    char dir[64], plan[128], args[1024];
    snprintf(dir, sizeof dir, "/tmp/magpie-links-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(plan, sizeof plan, "%s/optimized.onnx", dir);
    if (ir_onnx_save(mat, plan, &d) != IR_OK) fail_msg("save: %s", d.msg);
    ir_import_opts io = {0};
    ir_status st;
    ir_graph *back = ir_onnx_load(plan, &io, &st, &d);
    if (!back) fail_msg("read back: %s", d.msg);
    size_t predicted = tu_peak(back, NULL);
    tu_proc *p = malloc(sizeof *p);
    snprintf(args, sizeof args,
             "verify " GPT "model.onnx %s --train --loss ce --optimizer sgd --json", plan);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("gpt: verify exit %d: %s %s", p->rc, p->out, p->err);
    assert_non_null(strstr(p->out, "\"match\":true"));
    if (tu_json_num(p->out, "optimized_peak_bytes") != (double)predicted)
        fail_msg("gpt: verify measures %.0f, the plan predicts %zu",
                 tu_json_num(p->out, "optimized_peak_bytes"), predicted);
    print_message("  gpt: S %d nodes (the F-Tree's %d + the embedding), %d -> %d nodes, peak %zu "
                  "(unsplit %zu)\n",
                  n, c.n_ids, g->n_nodes, mat->n_nodes, predicted, m.peak_bytes);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
    free(p);
    ir_graph_free(back);
    tu_fission_plan_free(&fp);
    free(ids);
    rw_ftree_free(t);
    sched_memory_free(&m);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_gradient_is_a_sum),
        cmocka_unit_test(test_tied_weight_is_shared),
        cmocka_unit_test(test_causal_mask_is_shared),
        cmocka_unit_test(test_gpt_embedding_fission_verifies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
