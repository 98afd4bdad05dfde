/* test_rules_remat_swap.c - the schedule-based rules (rules/rules-sched.c, MAGIS 5.2): on a
 * hand-built graph and numeric fixtures, every rewrite kind keeps the outputs when executed (as
 * accurate as the original's float32 run against its float64 run, test-check.h), leaves the
 * original graph untouched, reports touched ids that sched_incremental turns into a valid order; a
 * swap's measured device peak equals sched_memory_compute's, with host bytes in use; remat then
 * deremat and swap then deswap give back the node count and outputs; and seeded random sequences of
 * 20 rewrites keep the outputs (the property test). */
#include "test-check.h"

#include "rt.h"
#include "rules.h"
#include "schedule.h"

#define MAX_CAND 4096

static const char *const fixtures[] = {"resnet_small", "unet_transpose", "transformer_encoder"};

static ir_graph *load_fixture(const char *name) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    /* transformer_encoder has a symbolic batch: bind src to input_0.npy's shape. */
    char npy_rel[256], npy[1024];
    snprintf(npy_rel, sizeof npy_rel, "tests/fixtures/numeric/%s/input_0.npy", name);
    ir_dtype t;
    ir_shape s;
    ir_blob *b = NULL;
    if (ir_npy_read(tu_src_path(npy_rel, npy, sizeof npy), &t, &s, &b, &d) != IR_OK)
        fail_msg("%s", d.msg);
    ir_blob_unref(b);
    const char *names[1] = {"src"};
    ir_import_opts o = {.n_shapes = 1, .shape_names = names, .shape_values = &s};
    bool sym = strcmp(name, "transformer_encoder") == 0;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), sym ? &o : NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    return g;
}

static void run(const ir_graph *g, const int *order, rt_result *r) {
    rt_options o = {
        .order = order, .n_order = order ? g->n_nodes : 0, .seed = 7, .fill_missing_data = true};
    ir_diag d = {{0}};
    if (rt_run(g, NULL, 0, &o, r, &d) != IR_OK) fail_msg("run: %s", d.msg);
}

/* The original graph's float32 and float64 runs, with run's options. */
static void run_reference(const ir_graph *g, tu_ref *ref) {
    rt_options o = {.seed = 7, .fill_missing_data = true};
    tu_ref_run(g, NULL, 0, &o, ref, "original");
}

/* What must not change in a graph a rewrite was applied to. */
typedef struct snap {
    int n_nodes, n_values;
    uint32_t next_id;
    uint64_t h;
} snap;

static snap take(const ir_graph *g) {
    snap s = {g->n_nodes, g->n_values, g->next_node_id, 0};
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        s.h = ir_mix64(s.h ^ n->id ^ ((uint64_t)n->op << 32));
        for (int k = 0; k < n->n_in; k++) s.h = ir_mix64(s.h ^ (uint64_t)(n->in[k] + 7));
        for (int k = 0; k < n->n_out; k++) s.h = ir_mix64(s.h ^ (uint64_t)(n->out[k] + 11));
    }
    for (int v = 0; v < g->n_values; v++)
        s.h = ir_mix64(s.h ^ (uint64_t)(g->values[v].producer + 3) ^
                       ((uint64_t)ir_shape_numel(&g->values[v].shape) << 20));
    return s;
}

static bool has_id(const ir_graph *g, uint32_t id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id == id) return true;
    return false;
}

static const sched_dp_options dpo = {.exact_max_nodes = 12, .beam_width = 16, .time_budget_s = 600};

/* Applies r to g, checks everything the header promises, and returns the new graph. ref holds
 * g's outputs. out_touched (may be NULL) receives the touched ids. */
static ir_graph *check_apply(const ir_graph *g, const rw_rewrite *r, const tu_ref *ref,
                             const char *what, uint32_t *out_touched, int *out_nt) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s(%u,%d,%u)", what, rw_kind_name(r->kind), r->node_id, r->value,
             r->user_id);
    snap before = take(g);
    uint32_t touched[RW_MAX_TOUCHED];
    int nt = -1;
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g2 = rw_apply(g, r, touched, &nt, &st, &d);
    if (!g2) fail_msg("%s: %s", msg, d.msg);
    snap after = take(g);
    assert_int_equal(before.n_nodes, after.n_nodes);
    assert_int_equal(before.n_values, after.n_values);
    assert_int_equal(before.next_id, after.next_id);
    assert_true(before.h == after.h);
    assert_int_equal(ir_graph_validate(g2, &d), IR_OK);
    assert_true(nt >= 2);
    for (int i = 0; i < nt; i++)
        if (!has_id(g, touched[i]) && !has_id(g2, touched[i]))
            fail_msg("%s: touched id %u is in neither graph", msg, touched[i]);
    if (r->kind == RW_REMAT || r->kind == RW_REMAT_CHAIN || r->kind == RW_SWAP) {
        assert_true(g2->n_nodes > g->n_nodes);
        assert_true(g2->next_node_id > g->next_node_id);
    } else {
        /* deremat always drops a node; deswap drops its Load/Store only when no other user
         * reads them (a Load merged by deremat can serve two users) */
        bool shrinks = r->kind == RW_DEREMAT ? g2->n_nodes < g->n_nodes : g2->n_nodes <= g->n_nodes;
        if (!shrinks) fail_msg("%s: %d nodes -> %d", msg, g->n_nodes, g2->n_nodes);
    }
    rt_result r2;
    run(g2, NULL, &r2);
    tu_expect_close(ref, g2, &r2, msg);
    rt_result_free(&r2);

    /* Incremental rescheduling from g's eager order. */
    int *old = sched_eager_order(g), *inc = malloc(sizeof(int) * (size_t)g2->n_nodes);
    if (sched_incremental(g, old, g2, touched, nt, &dpo, inc, &d) != IR_OK)
        fail_msg("%s: incremental: %s", msg, d.msg);
    assert_true(sched_order_valid(g2, inc, g2->n_nodes));
    /* Re-scheduling by insertion keeps g's order and puts each new node right before its first
     * reader (a Store before its Load); in that order the outputs are the same. */
    int *ins = malloc(sizeof(int) * (size_t)g2->n_nodes);
    if (sched_insert_new(g, old, g2, ins, &d) != IR_OK) fail_msg("%s: insertion: %s", msg, d.msg);
    assert_true(sched_order_valid(g2, ins, g2->n_nodes));
    for (int s = 0, prev = -1; s < g2->n_nodes; s++) {
        const ir_node *x = &g2->nodes[ins[s]];
        if (x->id >= g->next_node_id) {
            /* a reader follows within the run of new nodes, or right after it (a chain's
             * copies are anchored together at their last one's reader) */
            bool reads = false;
            for (int s2 = s + 1; s2 < g2->n_nodes && !reads; s2++) {
                const ir_node *next = &g2->nodes[ins[s2]];
                for (int o = 0; o < x->n_out; o++)
                    for (int k = 0; k < next->n_in; k++)
                        reads |= x->out[o] >= 0 && next->in[k] == x->out[o];
                if (next->id < g->next_node_id) break;
            }
            if (!reads) fail_msg("%s: new node '%s' is not right before a reader", msg, x->name);
            continue;
        }
        /* the old nodes keep their relative order */
        int at = -1;
        for (int j = 0; j < g->n_nodes; j++)
            if (g->nodes[old[j]].id == x->id) at = j;
        assert_true(at > prev);
        prev = at;
    }
    rt_result r4;
    run(g2, ins, &r4);
    tu_expect_close(ref, g2, &r4, msg);
    rt_result_free(&r4);
    free(ins);
    if (r->kind == RW_SWAP) {
        /* The executor measures what the analysis predicts, in this order and the eager one. */
        for (int o = 0; o < 2; o++) {
            const int *ord = o ? inc : NULL;
            sched_memory m;
            assert_int_equal(sched_memory_compute(g2, ord, &m, &d), IR_OK);
            rt_result r3;
            run(g2, ord, &r3);
            if (r3.peak_bytes != m.peak_bytes)
                fail_msg("%s: measured peak %zu, computed %zu", msg, r3.peak_bytes, m.peak_bytes);
            assert_true(r3.peak_host_bytes > 0);
            tu_expect_close(ref, g2, &r3, msg);
            rt_result_free(&r3);
            sched_memory_free(&m);
        }
    }
    free(old);
    free(inc);
    if (out_touched) memcpy(out_touched, touched, sizeof(uint32_t) * (size_t)nt);
    if (out_nt) *out_nt = nt;
    return g2;
}

/* Candidates of g under its eager schedule. The small fixtures peak at their first convolution
 * (its workspace), whose hot-spots have one user each, so H2 leaves no remat or swap there;
 * widen=true makes every value a hot-spot (H2 off, MAGIS's naive-sch-rules) to reach the rules
 * all over those graphs. Either way every remat/swap candidate must be a hot-spot of m. */
static bool widen = false;

static int candidates(const ir_graph *g, rw_rewrite *c) {
    sched_memory m;
    ir_diag d = {{0}};
    if (sched_memory_compute(g, NULL, &m, &d) != IR_OK) fail_msg("%s", d.msg);
    if (widen) {
        int *all = malloc(sizeof(int) * (size_t)g->n_values);
        for (int v = 0; v < g->n_values; v++) all[v] = v;
        free(m.hotspots);
        m.hotspots = all;
        m.n_hotspots = g->n_values;
    }
    int n = rw_candidates(g, &m, true, c, MAX_CAND);
    /* H2: every remat/swap candidate is a hot-spot produced by a node. */
    for (int i = 0; i < n; i++) {
        if (c[i].kind != RW_REMAT && c[i].kind != RW_REMAT_CHAIN && c[i].kind != RW_SWAP) continue;
        int a = -1;
        for (int k = 0; k < g->n_nodes; k++)
            if (g->nodes[k].id == c[i].node_id) a = k;
        assert_true(a >= 0);
        int v = g->nodes[a].out[c[i].value];
        bool hot = false;
        for (int h = 0; h < m.n_hotspots; h++) hot |= m.hotspots[h] == v;
        assert_true(hot);
        assert_true(g->values[v].producer == a);
    }
    sched_memory_free(&m);
    return n;
}

/* The first candidate of kind k in g whose node_id (or user_id for deswap's Load) is id (any when
 * id is 0), or -1. */
static int find_kind(const rw_rewrite *c, int n, int k, uint32_t id, uint32_t id2) {
    for (int i = 0; i < n; i++)
        if (c[i].kind == k && (!id || ((c[i].node_id == id && c[i].user_id == id2) ||
                                       (c[i].node_id == id2 && c[i].user_id == id))))
            return i;
    return -1;
}

/* One candidate of each of remat and swap, then their inverses, back to g's node count. */
static void check_kinds(const ir_graph *g, const char *what) {
    rw_rewrite *c = malloc(sizeof(rw_rewrite) * MAX_CAND), *c2 = malloc(sizeof *c2 * MAX_CAND);
    int n = candidates(g, c);
    tu_ref ref;
    run_reference(g, &ref);
    for (int k = 0; k < 2; k++) {
        int kind = k ? RW_SWAP : RW_REMAT;
        int i = find_kind(c, n, kind, 0, 0);
        if (i < 0) fail_msg("%s: no %s candidate", what, rw_kind_name(kind));
        uint32_t t[RW_MAX_TOUCHED];
        int nt;
        ir_graph *g2 = check_apply(g, &c[i], &ref, what, t, &nt);
        /* The new node(s) got the first fresh ids. */
        assert_true(has_id(g2, g->next_node_id));
        int n2 = candidates(g2, c2), j;
        if (kind == RW_REMAT) /* merge A' back into A */
            j = find_kind(c2, n2, RW_DEREMAT, c[i].node_id, g->next_node_id);
        else /* the Load (second fresh id) feeding B */
            j = find_kind(c2, n2, RW_DESWAP, g->next_node_id + 1, c[i].user_id);
        if (j < 0) fail_msg("%s: no inverse of %s", what, rw_kind_name(kind));
        ir_graph *g3 = check_apply(g2, &c2[j], &ref, what, NULL, NULL);
        assert_int_equal(g3->n_nodes, g->n_nodes);
        assert_int_equal(g3->n_values, g->n_values);
        ir_graph_free(g3);
        ir_graph_free(g2);
    }
    tu_ref_free(&ref);
    free(c);
    free(c2);
}

/* x -> Relu -> a; Neg(a) -> b; Sigmoid(b) -> c; Add(a, c) -> y: a has a late second user. */
/* A graph with one data input x[4,64] (its value id into *x). */
static ir_graph *graph_with_input(int *x) {
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape s = TU_SHAPE(4, 64);
    *x = ir_graph_add_value(g, "x", IR_F32, &s);
    ir_graph_add_input(g, *x);
    g->values[*x].flags |= IR_VF_DATA;
    return g;
}

static ir_graph *build_small(void) {
    int x, a, b, c, y;
    ir_graph *g = graph_with_input(&x);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &x, 0, NULL, &a);
    tu_add_node1(g, IR_OP_Neg, "neg", 1, &a, 0, NULL, &b);
    tu_add_node1(g, IR_OP_Sigmoid, "sig", 1, &b, 0, NULL, &c);
    tu_add_node1(g, IR_OP_Add, "add", 2, (int[]){a, c}, 0, NULL, &y);
    ir_graph_add_output(g, y);
    g->values[y].flags |= IR_VF_OUTPUT;
    return g;
}

static void test_hand_built(void **state) {
    ir_graph *g = build_small();
    check_kinds(g, "small");
    /* Bad rewrites are refused with IR_ERR_INVALID and leave nothing behind. */
    ir_diag d = {{0}};
    ir_status st;
    uint32_t t[RW_MAX_TOUCHED];
    int nt;
    const rw_rewrite bad[] = {
        {.kind = RW_REMAT, .node_id = 99, .user_id = 1},
        {.kind = RW_REMAT, .node_id = g->nodes[0].id, .user_id = g->nodes[2].id}, /* not a user */
        {.kind = RW_SWAP, .node_id = g->nodes[0].id, .value = 3, .user_id = g->nodes[1].id},
        {.kind = RW_DEREMAT, .node_id = g->nodes[0].id, .user_id = g->nodes[1].id},
        {.kind = RW_DESWAP, .node_id = g->nodes[1].id, .user_id = g->nodes[2].id},
        {.kind = 42},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(rw_apply(g, &bad[i], t, &nt, &st, &d));
        assert_int_equal(st, IR_ERR_INVALID);
        assert_int_equal(nt, 0);
    }
    ir_graph_free(g);
}

/* rw_apply refuses r on g as not applicable, with a message containing why. */
static void expect_refused(const ir_graph *g, const rw_rewrite *r, const char *why) {
    ir_diag d = {{0}};
    ir_status st;
    int nt;
    uint32_t t[RW_MAX_TOUCHED];
    assert_null(rw_apply(g, r, t, &nt, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    if (!strstr(d.msg, why)) fail_msg("refused with '%s', expected '%s'", d.msg, why);
}

/* The readers a remat or swap serves (rules.h): B and every reader of v that is not an ancestor
 * of B. x -> Relu -> a; f = Neg(a); b = Mul(a, Sigmoid(f)) reads a after f (f is an ancestor of
 * b); c = Exp(a) is independent of both; y = Add(b, c). For B = b: f keeps a, b and c read the
 * new value. For B = c no reader is an ancestor: a swap moves all three (a lives until its
 * Store), a remat is refused (the original would be computed for nobody). */
static ir_graph *build_late(int *f, int *b, int *c) {
    int x, a, fv, sg, bv, cv, y;
    ir_graph *g = graph_with_input(&x);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &x, 0, NULL, &a);
    *f = tu_add_node1(g, IR_OP_Neg, "f", 1, &a, 0, NULL, &fv);
    tu_add_node1(g, IR_OP_Sigmoid, "sig", 1, &fv, 0, NULL, &sg);
    *b = tu_add_node1(g, IR_OP_Mul, "b", 2, (int[]){a, sg}, 0, NULL, &bv);
    *c = tu_add_node1(g, IR_OP_Exp, "c", 1, &a, 0, NULL, &cv);
    tu_add_node1(g, IR_OP_Add, "y", 2, (int[]){bv, cv}, 0, NULL, &y);
    ir_graph_add_output(g, y);
    g->values[y].flags |= IR_VF_OUTPUT;
    return g;
}

static void test_late_readers(void **state) {
    (void)state;
    int f, b, c;
    ir_graph *g = build_late(&f, &b, &c);
    tu_ref ref;
    run_reference(g, &ref);
    uint32_t relu = g->nodes[0].id, fid = g->nodes[f].id;
    for (int kind = 0; kind < 2; kind++)
        for (int which = 0; which < 2; which++) {
            rw_rewrite r = {.kind = kind ? RW_SWAP : RW_REMAT,
                            .node_id = relu,
                            .user_id = g->nodes[which ? c : b].id};
            if (kind == 0 && which == 1) {
                expect_refused(g, &r, "every reader");
                continue;
            }
            ir_graph *g2 = check_apply(g, &r, &ref, "late readers", NULL, NULL);
            int a = g->nodes[0].out[0];
            for (int i = 0; i < g2->n_nodes; i++) {
                const ir_node *n = &g2->nodes[i];
                if (n->op != IR_OP_Neg && n->op != IR_OP_Mul && n->op != IR_OP_Exp) continue;
                bool keeps = n->in[0] == a; /* the value ids below a are unchanged */
                if (keeps != (n->id == fid && which == 0))
                    fail_msg("%s for %s: '%s' %s the original", rw_kind_name(r.kind),
                             which ? "c" : "b", n->name, keeps ? "reads" : "does not read");
            }
            ir_graph_free(g2);
        }
    tu_ref_free(&ref);
    ir_graph_free(g);
}

/* RW_REMAT_CHAIN on an attention-like graph: q = Relu(x), k = Relu(Neg(x));
 * s = MatMul(q, kT) with kT = Transpose(k); z = Div(s, 8); y = Softmax(z); o = MatMul(y, k);
 * then a "backward" that reads y late, g1 = Mul(y, e) with e = Exp(MatMul(o, kT)), and q and kT
 * after it: out = Add(MatMul(g1, kT), q). For B = g1 the chain recomputes Softmax <- Div <-
 * MatMul and stops at q and kT (read after B). A plain remat of y would hold z until B instead; the
 * chain holds nothing new. The candidates list it; the outputs are kept; a chain of one is
 * refused. */
static void test_remat_chain(void **state) {
    (void)state;
    int x, q, nk, k, kt, sv, z, y, o, oe, e, g1, h, out;
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape xs = TU_SHAPE(16, 16);
    x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    float eight = 8;
    ir_shape sc = TU_SCALAR_SHAPE;
    int c8 = ir_graph_add_value(g, "eight", IR_F32, &sc);
    g->values[c8].blob = ir_blob_new(sizeof eight);
    memcpy(ir_blob_data(g->values[c8].blob), &eight, sizeof eight);
    g->values[c8].flags |= IR_VF_CONST;
    ir_attr perm = tu_attr_ints("perm", 2, (int64_t[]){1, 0}), ax = tu_attr_int("axis", -1);
    tu_add_node1(g, IR_OP_Relu, "q", 1, &x, 0, NULL, &q);
    tu_add_node1(g, IR_OP_Neg, "nk", 1, &x, 0, NULL, &nk);
    tu_add_node1(g, IR_OP_Relu, "k", 1, &nk, 0, NULL, &k);
    tu_add_node1(g, IR_OP_Transpose, "kt", 1, &k, 1, &perm, &kt);
    int is = tu_add_node1(g, IR_OP_MatMul, "s", 2, (int[]){q, kt}, 0, NULL, &sv);
    int iz = tu_add_node1(g, IR_OP_Div, "z", 2, (int[]){sv, c8}, 0, NULL, &z);
    int iy = tu_add_node1(g, IR_OP_Softmax, "y", 1, &z, 1, &ax, &y);
    tu_add_node1(g, IR_OP_MatMul, "o", 2, (int[]){y, k}, 0, NULL, &o);
    tu_add_node1(g, IR_OP_MatMul, "oe", 2, (int[]){o, kt}, 0, NULL, &oe);
    tu_add_node1(g, IR_OP_Exp, "e", 1, &oe, 0, NULL, &e);
    int ig1 = tu_add_node1(g, IR_OP_Mul, "g1", 2, (int[]){y, e}, 0, NULL, &g1);
    tu_add_node1(g, IR_OP_MatMul, "h", 2, (int[]){g1, kt}, 0, NULL, &h);
    tu_add_node1(g, IR_OP_Add, "out", 2, (int[]){h, q}, 0, NULL, &out);
    ir_graph_add_output(g, out);
    g->values[out].flags |= IR_VF_OUTPUT;
    ir_diag d = {{0}};
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    tu_ref ref;
    run_reference(g, &ref);
    rw_rewrite *c = malloc(sizeof(rw_rewrite) * MAX_CAND);
    widen = true;
    int n = candidates(g, c);
    widen = false;
    rw_rewrite r = {
        .kind = RW_REMAT_CHAIN, .node_id = g->nodes[iy].id, .user_id = g->nodes[ig1].id};
    bool listed = false;
    for (int i = 0; i < n; i++)
        listed |= c[i].kind == r.kind && c[i].node_id == r.node_id && c[i].user_id == r.user_id;
    assert_true(listed);
    /* what each recompute reads (the explorer weighs them against the bytes freed): the plain
     * remat of y reads z, which nothing else holds past y; the chain reads q, kT and the
     * constant */
    int reads[8];
    rw_rewrite plain = r;
    plain.kind = RW_REMAT;
    assert_int_equal(rw_remat_reads(g, &plain, reads, 8), 1);
    assert_int_equal(reads[0], z);
    assert_int_equal(rw_remat_reads(g, &r, reads, 8), 3);
    assert_int_equal(reads[0], q);
    assert_int_equal(reads[1], kt);
    assert_int_equal(reads[2], c8);
    rw_rewrite swap = r;
    swap.kind = RW_SWAP;
    assert_int_equal(rw_remat_reads(g, &swap, reads, 8), -1);
    ir_graph *g2 = check_apply(g, &r, &ref, "remat chain", NULL, NULL);
    assert_int_equal(g2->n_nodes, g->n_nodes + 3);
    /* the copies: MatMul reading q and kT, Div reading its copy, Softmax read by g1 */
    const ir_node *cs = NULL, *cz = NULL, *cy = NULL, *b = NULL;
    for (int i = 0; i < g2->n_nodes; i++) {
        const ir_node *nd = &g2->nodes[i];
        if (nd->id == g->nodes[ig1].id) b = nd;
        if (nd->id < g->next_node_id) continue;
        if (nd->op == IR_OP_MatMul) cs = nd;
        if (nd->op == IR_OP_Div) cz = nd;
        if (nd->op == IR_OP_Softmax) cy = nd;
    }
    assert_true(cs && cz && cy && b);
    assert_int_equal(cs->in[0], q);
    assert_int_equal(cs->in[1], kt);
    assert_int_equal(cz->in[0], cs->out[0]);
    assert_int_equal(cy->in[0], cz->out[0]);
    assert_int_equal(b->in[0], cy->out[0]);
    /* the eager order of the original holds y from Softmax to g1; with the chain, y dies at o */
    sched_memory m0, m1;
    assert_int_equal(sched_memory_compute(g, NULL, &m0, &d), IR_OK);
    int *ins = malloc(sizeof(int) * (size_t)g2->n_nodes), *old = sched_eager_order(g);
    assert_int_equal(sched_insert_new(g, old, g2, ins, &d), IR_OK);
    assert_int_equal(sched_memory_compute(g2, ins, &m1, &d), IR_OK);
    assert_true(m1.lifetimes[y].last_step < m1.lifetimes[o].last_step);
    sched_memory_free(&m0);
    sched_memory_free(&m1);
    free(ins);
    free(old);
    ir_graph_free(g2);
    /* a chain of one is refused: Relu's input x is a graph input, nothing to recompute with q */
    rw_rewrite one = {
        .kind = RW_REMAT_CHAIN, .node_id = g->nodes[0].id, .user_id = g->nodes[g->n_nodes - 1].id};
    expect_refused(g, &one, "no producer");
    (void)is;
    (void)iz;
    tu_ref_free(&ref);
    free(c);
    ir_graph_free(g);
}

/* H2 proper: on the fixtures' own hot-spots there is nothing to rematerialize or swap. */
static void test_h2_filters(void **state) {
    rw_rewrite *c = malloc(sizeof(rw_rewrite) * MAX_CAND);
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        ir_graph *g = load_fixture(fixtures[f]);
        int n = candidates(g, c); /* asserts every remat/swap candidate is a hot-spot */
        widen = true;
        int nw = candidates(g, c);
        widen = false;
        assert_true(nw > n);
        ir_graph_free(g);
    }
    free(c);
}

static void test_fixture_kinds(void **state) {
    widen = true;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        ir_graph *g = load_fixture(fixtures[f]);
        check_kinds(g, fixtures[f]);
        ir_graph_free(g);
    }
    widen = false;
}

/* Every kind over a sequence of 20 seeded random rewrites, outputs checked after each. */
static void test_random_sequences(void **state) {
    rw_rewrite *c = malloc(sizeof(rw_rewrite) * MAX_CAND);
    widen = true;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        ir_graph *g0 = load_fixture(fixtures[f]), *g = ir_graph_clone(g0);
        tu_ref ref;
        run_reference(g0, &ref);
        uint64_t seed = 1234 + f;
        int kinds[RW_KIND_COUNT] = {0};
        for (int step = 0; step < 20; step++) {
            int n = candidates(g, c);
            if (!n) break;
            seed = ir_mix64(seed);
            const rw_rewrite *r = &c[seed % (uint64_t)n];
            kinds[r->kind]++;
            char what[64];
            snprintf(what, sizeof what, "%s step %d", fixtures[f], step);
            ir_graph *g2 = check_apply(g, r, &ref, what, NULL, NULL);
            ir_graph_free(g);
            g = g2;
        }
        assert_true(kinds[RW_REMAT] + kinds[RW_SWAP] > 0);
        print_message("%s: remat %d remat-chain %d deremat %d swap %d deswap %d\n", fixtures[f],
                      kinds[RW_REMAT], kinds[RW_REMAT_CHAIN], kinds[RW_DEREMAT], kinds[RW_SWAP],
                      kinds[RW_DESWAP]);
        tu_ref_free(&ref);
        ir_graph_free(g);
        ir_graph_free(g0);
    }
    widen = false;
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_built),       cmocka_unit_test(test_late_readers),
        cmocka_unit_test(test_h2_filters),       cmocka_unit_test(test_fixture_kinds),
        cmocka_unit_test(test_random_sequences), cmocka_unit_test(test_remat_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
