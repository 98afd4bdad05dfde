/* test_fission_strided.c - strided splits at the border of a fission (rules/rules-fission-apply.c):
 * where S's border values have the split dimension D only as the inner factor of a merged dim
 * (B in [S*B, E], as nn.MultiheadAttention's export puts the batch around its output
 * projection), rw_fission_apply views the dim as [len / K, K], slices or assembles K's axis and
 * views the part back; a summed output (a weight gradient over those rows) accumulates as usual.
 *
 *  - the inner factor's length K the dimension graph finds (B of S*B; B*H of S*B*H, whose outer
 *    factor B is what D splits);
 *  - hand-built graphs whose S reads and writes strided values, split into 2 and 3 parts,
 *    materialized and executed: every output judged against the float64 run of the unsplit
 *    graph (test-check.h), the executed peak equal to sched_memory_compute's of the one-copy
 *    graph;
 *  - nn.TransformerEncoder (PyTorch 1.13, opset 17, batch_first True and False) trained with mse
 *    and SGD: every F-Tree candidate along the batch, a strided border or not, in 2 parts, the
 *    same checks; some of them must have strided borders. */
#include "test-fission.h"

#include "rules.h"
#include "schedule.h"

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= IR_VF_DATA;
    return v;
}

static int reshape(ir_graph *g, const char *name, int x, ir_shape s) {
    char cn[64];
    snprintf(cn, sizeof cn, "%.50s.shape", name);
    ir_shape cs = tu_shape(1, s.rank);
    int c = ir_graph_add_value(g, ir_graph_strdup(g, cn), IR_I64, &cs);
    g->values[c].blob = ir_blob_new(sizeof(int64_t) * (size_t)s.rank);
    memcpy(ir_blob_data(g->values[c].blob), s.dims, sizeof(int64_t) * (size_t)s.rank);
    g->values[c].flags |= IR_VF_CONST;
    int y;
    tu_add_node1(g, IR_OP_Reshape, ir_graph_strdup(g, name), 2, (int[]){x, c}, 0, NULL, &y);
    return y;
}

static int node1(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in, int na,
                 const ir_attr *a) {
    int y;
    tu_add_node1(g, op, ir_graph_strdup(g, name), n_in, in, na, a, &y);
    return y;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The count of nodes of g whose name holds s. */
static int count_named(const ir_graph *g, const char *s) {
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += strstr(g->nodes[i].name, s) != NULL;
    return c;
}

/* f on g in `parts` parts: applied, materialized in the one-copy graph's eager order, executed;
 * outputs judged against ref, the executed peak against the one-copy graph's. Returns the
 * materialized graph's count of views that expose an inner factor (strided border values). */
static int check_split(const ir_graph *g, const rw_fission *f0, int parts, const tu_ref *ref,
                       const rt_options *ro, const char *what) {
    rw_fission f = *f0;
    f.parts = parts;
    tu_fission_plan p = tu_fission_plan_make(g, &f, 1, what);
    tu_fission_plan_check(&p, NULL, 0, ref, ro, what);
    int strided = count_named(p.mat, ".fisexpose") + count_named(p.mat, ".fismerged");
    tu_fission_plan_free(&p);
    return strided;
}

/* x [S, B, E] -> Reshape [S*B, E] = a -> Relu = r -> Reshape [S, B, E] = y, and the product
 * w = a^T r [E, E] (a weight gradient's shape: a sum over S*B's rows). S = {Relu, Transpose,
 * MatMul} reads a and writes r and w: a is sliced strided (rows b, b + B, ... of part b), r is
 * assembled strided, w accumulated. B = 6: 2 and 3 parts. */
static void test_rows(void **state) {
    (void)state;
    enum { SQ = 4, B = 6, E = 3 };
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(SQ, B, E));
    int a = reshape(g, "merge", x, TU_SHAPE(SQ * B, E));
    int r = node1(g, IR_OP_Relu, "relu", 1, &a, 0, NULL);
    int64_t perm[2] = {1, 0};
    ir_attr pa = tu_attr_ints("perm", 2, perm);
    int at = node1(g, IR_OP_Transpose, "at", 1, &a, 1, &pa);
    int w = node1(g, IR_OP_MatMul, "w", 2, (int[]){at, r}, 0, NULL);
    int y = reshape(g, "split", r, TU_SHAPE(SQ, B, E));
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, w);
    rw_dgraph *dg = rw_dgraph_build(g);
    int b = rw_dgraph_value_comp(dg, x, 1);
    assert_int_equal(rw_dgraph_value_inner_comp(dg, a, 0), b);
    assert_int_equal(rw_dgraph_value_inner_len(dg, a, 0), B);
    assert_int_equal(rw_dgraph_value_inner_len(dg, r, 0), B); /* through the Relu */
    assert_int_equal(rw_dgraph_value_inner_len(dg, x, 1), 0); /* B itself: no inner factor */
    uint32_t ids[3] = {g->nodes[g->values[r].producer].id, g->nodes[g->values[at].producer].id,
                       g->nodes[g->values[w].producer].id};
    qsort(ids, 3, sizeof *ids, cmp_u32);
    /* the seed names B by the split node's output (outside S: the component is what counts) */
    rw_fission f = {.ids = ids,
                    .n_ids = 3,
                    .seed_id = g->nodes[g->values[y].producer].id,
                    .seed_out = 0,
                    .seed_dim = 1,
                    .parts = 1};
    ir_diag d = {{0}};
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("refused: %s", d.msg);
    f.parts = 4; /* 4 does not divide B = 6 */
    assert_int_equal(rw_fission_check(g, dg, &f, &d), IR_ERR_INVALID);
    rt_options ro = {.seed = 7, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &ro, &ref, "rows");
    for (int parts = 2; parts <= 3; parts++) {
        char what[64];
        snprintf(what, sizeof what, "rows, %d parts", parts);
        /* a strided input and a strided output: two views that expose B */
        assert_int_equal(check_split(g, &f, parts, &ref, &ro, what), 2);
    }
    tu_ref_free(&ref);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* The heads merged into the rows: x [S, B, H, d] -> [S, B*H, d] -> [S*B*H, d] = a: the inner
 * factor of S*B*H is B*H (K = 6), of which B (2) is the outer factor, so n parts of B are n
 * blocks of B*H within each of S's rows. S = {Sigmoid} reads a and writes s, which Reshapes
 * back to [S, B*H, d] and [S, B, H, d] outside S read. (Straight from [S*B*H, d] to
 * [S, B, H, d], the inner factor would be H, which that reshape names: two reshapes that
 * disagree, which the dimension graph reports as -1.) */
static void test_heads(void **state) {
    (void)state;
    enum { SQ = 3, B = 2, H = 3, DH = 4 };
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(SQ, B, H, DH));
    int bh = reshape(g, "heads", x, TU_SHAPE(SQ, B * H, DH));
    int a = reshape(g, "rows", bh, TU_SHAPE(SQ * B * H, DH));
    int s = node1(g, IR_OP_Sigmoid, "sig", 1, &a, 0, NULL);
    int y = reshape(g, "back", reshape(g, "unrows", s, TU_SHAPE(SQ, B * H, DH)),
                    TU_SHAPE(SQ, B, H, DH));
    ir_graph_add_output(g, y);
    rw_dgraph *dg = rw_dgraph_build(g);
    int b = rw_dgraph_value_comp(dg, x, 1);
    assert_int_equal(rw_dgraph_value_comp(dg, bh, 1), b);
    assert_int_equal(rw_dgraph_value_inner_comp(dg, a, 0), b);
    assert_int_equal(rw_dgraph_value_inner_len(dg, a, 0), B * H);
    assert_int_equal(rw_dgraph_comp_length(dg, b), B);
    uint32_t ids[1] = {g->nodes[g->values[s].producer].id};
    rw_fission f = {.ids = ids,
                    .n_ids = 1,
                    .seed_id = g->nodes[g->values[y].producer].id,
                    .seed_out = 0,
                    .seed_dim = 1,
                    .parts = 2};
    ir_diag d = {{0}};
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("refused: %s", d.msg);
    rt_options ro = {.seed = 9, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &ro, &ref, "heads");
    assert_int_equal(check_split(g, &f, 2, &ref, &ro, "heads, 2 parts"), 2);
    tu_ref_free(&ref);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* A seed naming comp (the first node output with a dim of its own in comp: a seed names a dim,
 * never an inner factor) into f's seed fields. */
static void find_seed(const ir_graph *g, const rw_dgraph *dg, int comp, rw_fission *f) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            for (int dim = 0; dim < IR_MAX_RANK; dim++)
                if (rw_dgraph_value_comp(dg, g->nodes[i].out[k], dim) == comp) {
                    *f = (rw_fission){.seed_id = g->nodes[i].id, .seed_out = k, .seed_dim = dim};
                    return;
                }
    fail_msg("no node output has a dim in component %d", comp);
}

/* Single-node fissions of g along comp whose node reads a value with comp as the inner factor of
 * a dim only (the attention's output projection on [S*B, E], its weight gradient), at most
 * `max` of them, each in 2 parts; returns how many were checked. */
static int check_strided_nodes(const ir_graph *g, const rw_dgraph *dg, int comp,
                               const rw_fission *seed, int max, const tu_ref *ref,
                               const rt_options *ro, const char *fixture) {
    int done = 0;
    ir_diag d = {{0}};
    for (int i = 0; i < g->n_nodes && done < max; i++) {
        const ir_node *n = &g->nodes[i];
        bool strided_in = false;
        for (int k = 0; k < n->n_in && !strided_in; k++) {
            int v = n->in[k], dim = rw_dgraph_value_dim_in(dg, v, comp);
            strided_in = dim >= 0 && rw_dgraph_value_comp(dg, v, dim) != comp;
        }
        if (!strided_in || n->op == IR_OP_Reshape) continue;
        uint32_t id = n->id;
        rw_fission f = *seed;
        f.ids = &id;
        f.n_ids = 1;
        f.parts = 2;
        if (rw_fission_check(g, dg, &f, &d) != IR_OK) continue;
        char what[200];
        snprintf(what, sizeof what, "%s, node '%s' (%s) alone, 2 parts", fixture, n->name,
                 n->op_type);
        int s = check_split(g, &f, 2, ref, ro, what);
        print_message("  %-60s %d strided views\n", what, s);
        assert_true(s > 0);
        done++;
    }
    return done;
}

/* nn.TransformerEncoder (d 32, 4 heads, 2 layers) at batch 4, trained with mse and SGD: every
 * F-Tree candidate along the batch in 2 parts, then single nodes that read strided values.
 * Returns how many candidates had strided borders, plus the single nodes. */
static int check_encoder(const char *fixture, int batch_dim, int *n_cand) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", fixture);
    const char *names[1] = {"batch"};
    ir_shape b4 = TU_SHAPE(4);
    ir_import_opts io = {.n_shapes = 1, .shape_names = names, .shape_values = &b4};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(tu_src_path(rel, path, sizeof path), &io, &st, &d);
    if (!fwd) fail_msg("import %s: %s", fixture, d.msg);
    ir_train_opts to = {.loss = IR_LOSS_MSE, .optimizer = IR_OPTIM_SGD, .lr = 0.1};
    ir_graph *g = ir_build_training(fwd, &to, &st, &d);
    if (!g) fail_msg("training graph of %s: %s", fixture, d.msg);
    ir_graph_free(fwd);
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, g->inputs[0], batch_dim);
    assert_int_equal(rw_dgraph_comp_length(dg, comp), 4);
    sched_memory m;
    if (sched_memory_compute(g, NULL, &m, &d) != IR_OK) fail_msg("memory: %s", d.msg);
    rw_ftree *t = rw_ftree_build(g, &m, 0);
    assert_non_null(t);
    rt_options ro = {.seed = 5, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &ro, &ref, fixture);
    int strided = 0;
    *n_cand = 0;
    for (int k = 0; k < t->n; k++) {
        if (t->nodes[k].comp != comp) continue;
        char what[160];
        snprintf(what, sizeof what, "%s, candidate %d (%d nodes), 2 parts", fixture, k,
                 t->nodes[k].f.n_ids);
        int s = check_split(g, &t->nodes[k].f, 2, &ref, &ro, what);
        print_message("  %-60s %s\n", what, s ? "strided border" : "");
        strided += s > 0;
        (*n_cand)++;
    }
    rw_fission seed;
    find_seed(g, dg, comp, &seed);
    strided += check_strided_nodes(g, dg, comp, &seed, 4, &ref, &ro, fixture);
    tu_ref_free(&ref);
    rw_ftree_free(t);
    sched_memory_free(&m);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    return strided;
}

static void test_encoder_batch_first(void **state) {
    (void)state;
    int n, s = check_encoder("transformer_encoder_op17", 0, &n);
    assert_true(n > 1);
    assert_true(s > 0);
}

static void test_encoder_seq_first(void **state) {
    (void)state;
    int n, s = check_encoder("transformer_encoder_seqfirst_op17", 1, &n);
    assert_true(n > 1);
    assert_true(s > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_heads),
        cmocka_unit_test(test_encoder_batch_first),
        cmocka_unit_test(test_encoder_seq_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
