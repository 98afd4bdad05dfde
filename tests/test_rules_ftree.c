/* test_rules_ftree.c - the F-Tree (rules/rules-ftree*.c, MAGIS 4.3 Algorithm 1 and the mutation
 * rules of 5.1):
 *  - the dominator tree of random DAGs against the definition (u dominates v when v is
 *    unreachable from the virtual root once u is removed);
 *  - heat, the input bytes of S = des(v) \ {v} and score on random graphs with random sub-graphs
 *    G', random hot-spots and value sizes, against a direct evaluation of eq. 3 and 4;
 *  - the score intervals and the choice of v_dom on a hand-built G' whose scores are derived by
 *    hand in the comments;
 *  - each mutation rule's preconditions on a hand-made tree, mutate walking the divisors of 12;
 *  - rw_ftree_build on real training graphs: tree invariants, every candidate passes
 *    rw_fission_check, and rw_fission_apply of every candidate (and of a configuration of
 *    several) yields a graph that validates, and whose node order sched_memory_compute accepts
 *    (test_fission_results_schedule: optimizer updates after the readers of their parameters);
 *  - building BERT-base's training tree (1942 nodes) takes well under a second. */
#include "test-util.h"

#include <time.h>

#include "rules-ftree-impl.h"
#include "rules.h"
#include "schedule.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) { /* uniform-ish in [0, n) */
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)((ir_mix64(rng_state) >> 33) % n);
}

/* Immediate dominators by the definition: u dominates v when, with u removed, v cannot be
 * reached from the virtual root (which has an edge to every vertex without predecessors); the
 * immediate one is the strict dominator latest in topological order (strict dominators lie on
 * every path to v, so they form a chain). */
static void brute_idom(int n, const int *pred_off, const int *pred, int *idom) {
    bool *reach = malloc(sizeof(bool) * (size_t)(n + 1));
    for (int v = 0; v < n; v++) idom[v] = -1;
    for (int u = 0; u < n; u++) {
        for (int v = 0; v < n; v++) {
            if (v == u) {
                reach[v] = false;
                continue;
            }
            bool r = pred_off[v] == pred_off[v + 1];
            for (int k = pred_off[v]; k < pred_off[v + 1] && !r; k++) r = reach[pred[k]];
            reach[v] = r;
        }
        for (int v = u + 1; v < n; v++)
            if (!reach[v]) idom[v] = u; /* later u overwrite: the latest strict dominator */
    }
    free(reach);
}

/* ---------------------------------------------------------------- dominators */

static void test_idom_random_dags(void **state) {
    (void)state;
    rng_state = 1;
    int pred_off[41], pred[40 * 4], a[40], b[40];
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)rnd(40), e = 0;
        int density = 1 + (int)rnd(4);
        for (int v = 0; v < n; v++) {
            pred_off[v] = e;
            int k = v ? (int)rnd((uint32_t)density + 1) : 0;
            for (int j = 0; j < k; j++) pred[e++] = (int)rnd((uint32_t)v); /* dups allowed */
        }
        pred_off[n] = e;
        rw_ft_idom(n, pred_off, pred, a);
        brute_idom(n, pred_off, pred, b);
        for (int v = 0; v < n; v++)
            if (a[v] != b[v])
                fail_msg("trial %d: idom(%d) = %d, expected %d", trial, v, a[v], b[v]);
    }
}

/* ---------------------------------------------------------------- heat and score */

/* A graph of `Sum` nodes (never inferred: only the structure matters here) over n_res graph
 * inputs; node i has 1-2 outputs and 1-3 inputs drawn from the residents and earlier outputs. */
static ir_graph *random_graph(int n_res, int n_nodes) {
    ir_graph *g = ir_graph_new();
    ir_shape s = TU_SHAPE(1);
    for (int r = 0; r < n_res; r++) {
        char nm[16];
        snprintf(nm, sizeof nm, "r%d", r);
        ir_graph_add_input(g, ir_graph_add_value(g, nm, IR_F32, &s));
    }
    for (int i = 0; i < n_nodes; i++) {
        int in[3], out[2], n_in = 1 + (int)rnd(3), n_out = 1 + (int)rnd(2);
        for (int k = 0; k < n_in; k++) in[k] = (int)rnd((uint32_t)g->n_values);
        for (int k = 0; k < n_out; k++) {
            char nm[16];
            snprintf(nm, sizeof nm, "v%d_%d", i, k);
            out[k] = ir_graph_add_value(g, nm, IR_F32, &s);
        }
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", i);
        ir_graph_add_node(g, IR_OP_Sum, nm, n_in, in, n_out, out, 0, NULL);
    }
    return g;
}

static bool node_reads(const ir_node *nd, int x) {
    for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k] == x) return true;
    return false;
}

static void test_heat_score_random(void **state) {
    (void)state;
    rng_state = 7;
    for (int trial = 0; trial < 150; trial++) {
        ir_graph *g = random_graph(1 + (int)rnd(4), 1 + (int)rnd(30));
        rw_ft_work *w = rw_ft_work_new(g);
        assert_non_null(w);
        int nn = g->n_nodes;
        double *hot = calloc((size_t)nn, sizeof *hot);
        double *vb = calloc((size_t)g->n_values, sizeof *vb);
        for (int i = 0; i < nn; i++) hot[i] = (double)rnd(10);
        for (int v = 0; v < g->n_values; v++) vb[v] = (double)rnd(10);
        int *nodes = malloc(sizeof(int) * (size_t)nn), *sub = malloc(sizeof(int) * (size_t)nn);
        int *loc = malloc(sizeof(int) * (size_t)nn), *po = malloc(sizeof(int) * (size_t)nn + 4);
        int *pr = malloc(sizeof(int) * (size_t)nn * 3 + 4), *bi = malloc(sizeof(int) * (size_t)nn);
        bool *ins = malloc(sizeof(bool) * (size_t)nn);
        /* several G' per graph: the work area must come back clean after each */
        for (int rep = 0; rep < 3; rep++) {
            int n = 0;
            for (int i = 0; i < nn; i++) {
                loc[i] = -1;
                if (rnd(10) < 7) {
                    loc[i] = n;
                    nodes[n++] = i;
                }
            }
            rw_ft_comp c;
            rw_ft_analyze(w, g, nodes, n, hot, vb, NULL, -1, &c);
            assert_int_equal(c.n, n);
            int e = 0;
            for (int v = 0; v < n; v++) {
                po[v] = e;
                const ir_node *nd = &g->nodes[nodes[v]];
                for (int k = 0; k < nd->n_in; k++) {
                    int p = g->values[nd->in[k]].producer;
                    if (p >= 0 && loc[p] >= 0) pr[e++] = loc[p];
                }
            }
            po[n] = e;
            brute_idom(n, po, pr, bi);
            for (int v = 0; v < n; v++) {
                if (c.idom[v] != bi[v])
                    fail_msg("trial %d: idom(%d) = %d, expected %d", trial, v, c.idom[v], bi[v]);
                /* S(v): the nodes strictly dominated by v (v on their idom chain) */
                double heat = hot[nodes[v]], inb = 0;
                int ns = 0;
                for (int u = 0; u < n; u++) {
                    ins[u] = false;
                    for (int a = bi[u]; a >= 0; a = bi[a])
                        if (a == v) ins[u] = true;
                    if (ins[u]) {
                        heat += hot[nodes[u]];
                        sub[ns++] = nodes[u];
                    }
                }
                /* every value some node of S reads whose producer is not in S, once */
                for (int x = 0; x < g->n_values; x++) {
                    int p = g->values[x].producer;
                    if (p >= 0 && loc[p] >= 0 && ins[loc[p]]) continue;
                    for (int u = 0; u < n; u++)
                        if (ins[u] && node_reads(&g->nodes[nodes[u]], x)) {
                            inb += vb[x];
                            break;
                        }
                }
                if (c.heat[v] != heat || c.in_bytes[v] != inb || c.score[v] != 0.5 * heat - inb)
                    fail_msg("trial %d rep %d node %d: heat %g in %g score %g, expected %g %g %g",
                             trial, rep, v, c.heat[v], c.in_bytes[v], c.score[v], heat, inb,
                             0.5 * heat - inb);
                int got[64];
                int m = rw_ft_strict_subtree(&c, v, got);
                assert_int_equal(m, ns);
                for (int j = 0; j < m; j++) assert_int_equal(got[j], sub[j]);
            }
        }
        free(hot);
        free(vb);
        free(nodes);
        free(sub);
        free(loc);
        free(po);
        free(pr);
        free(bi);
        free(ins);
        rw_ft_work_free(w);
        ir_graph_free(g);
    }
}

/* ---------------------------------------------------------------- selection by interval */

/* G' (node index = local index; each node one output o<i>, edges as listed):
 *   n0 -> n1 -> n2 -> n3,   n0 -> n4 -> n5 -> n6,   n3, n6 -> n7
 * Dominator tree: n0 -> {n1, n4, n7}, n1 -> n2 -> n3, n4 -> n5 -> n6 (n7 joins two branches).
 * Hot-spot bytes: n0 8, n1 4, n2 8, n5 8. Bytes of o0..o7: 2, 0, 1, 5, 0, 1, 5, 5.
 * heat: n3 0, n2 8, n1 12, n6 0, n5 8, n4 8, n7 0, n0 28.
 * S inputs: each S(v) is fed only by v's own output (o3 and o6 are read by n7, outside S(n3)
 * and S(n6), so they count nowhere): n0 2, n1 0, n2 1, n4 0, n5 1, leaves 0.
 * score = heat/2 - inputs: n0 12, n1 6, n2 3, n3 0, n4 4, n5 3, n6 0, n7 0.
 * L = 4, S_max = 12: level floor(4 s / 12): n0 4, n1 2 (exactly 1/2: [2/4, 3/4)), n2 1, n4 1,
 * n5 1, others 0.
 * v_dom: level 1 {n2, n4, n5}: n4 has n5 below it, so n2 and n5; level 2: n1; level 4: n0.
 * Their S: n2 {n3}, n5 {n6}, n1 {n2, n3}, n0 {n1..n7}. */
static void test_select_intervals(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape s = TU_SHAPE(1);
    int o[8];
    static const int preds[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {2, -1},
                                    {0, -1},  {4, -1}, {5, -1}, {3, 6}};
    int x = ir_graph_add_value(g, "x", IR_F32, &s);
    ir_graph_add_input(g, x);
    for (int i = 0; i < 8; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "o%d", i);
        o[i] = ir_graph_add_value(g, nm, IR_F32, &s);
        int in[2], k = 0;
        for (int j = 0; j < 2; j++)
            if (preds[i][j] >= 0) in[k++] = o[preds[i][j]];
        if (!k) in[k++] = x;
        snprintf(nm, sizeof nm, "n%d", i);
        ir_graph_add_node(g, IR_OP_Sum, nm, k, in, 1, &o[i], 0, NULL);
    }
    double hot[8] = {8, 4, 8, 0, 0, 8, 0, 0};
    double vb[9] = {0}; /* x: 0 bytes, so the source's input does not matter */
    const double ob[8] = {2, 0, 1, 5, 0, 1, 5, 5};
    for (int i = 0; i < 8; i++) vb[o[i]] = ob[i];
    int nodes[8] = {0, 1, 2, 3, 4, 5, 6, 7}, sel[8], sub[8];
    rw_ft_work *w = rw_ft_work_new(g);
    rw_ft_comp c;
    rw_ft_analyze(w, g, nodes, 8, hot, vb, NULL, -1, &c);
    const int idom[8] = {-1, 0, 1, 2, 0, 4, 5, 0};
    const double heat[8] = {28, 12, 8, 0, 8, 8, 0, 0}, score[8] = {12, 6, 3, 0, 4, 3, 0, 0};
    for (int v = 0; v < 8; v++) {
        assert_int_equal(c.idom[v], idom[v]);
        assert_true(c.heat[v] == heat[v]);
        assert_true(c.score[v] == score[v]);
    }
    int k = rw_ft_select(w, &c, 4, sel);
    assert_int_equal(k, 4);
    const int want[4] = {2, 5, 1, 0};
    for (int i = 0; i < 4; i++) assert_int_equal(sel[i], want[i]);
    assert_int_equal(rw_ft_strict_subtree(&c, 2, sub), 1);
    assert_int_equal(sub[0], 3);
    assert_int_equal(rw_ft_strict_subtree(&c, 5, sub), 1);
    assert_int_equal(sub[0], 6);
    assert_int_equal(rw_ft_strict_subtree(&c, 1, sub), 2);
    assert_int_equal(sub[0], 2);
    assert_int_equal(sub[1], 3);
    assert_int_equal(rw_ft_strict_subtree(&c, 0, sub), 7);
    for (int i = 0; i < 7; i++) assert_int_equal(sub[i], i + 1);
    /* L = 2: levels floor(2 s / 12): n0 2, n1 1 (exactly 1/2), others 0: v_dom n1, n0 */
    k = rw_ft_select(w, &c, 2, sel);
    assert_int_equal(k, 2);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 0);
    /* all scores <= 0: nothing (line 8) */
    for (int i = 0; i < 8; i++) vb[o[i]] = 100;
    rw_ft_analyze(w, g, nodes, 8, hot, vb, NULL, -1, &c);
    assert_true(c.score[0] < 0);
    assert_int_equal(rw_ft_select(w, &c, 4, sel), 0);
    rw_ft_work_free(w);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- mutation rules */

/* A hand-made tree. Component 0 (dim_len 12): t0 S {1..10}; t1 (child of t0) S {2, 3, 4};
 * t2 (child of t0) S {6, 7}; t3 (child of t1) S {3, 4}. Component 1 (dim_len 7): t4 S {7, 8, 9},
 * a root overlapping t0 and t2. Leaves: t2, t3, t4. */
static uint32_t s0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, s1[] = {2, 3, 4}, s2[] = {6, 7},
                s3[] = {3, 4}, s4[] = {7, 8, 9};
static rw_ftree_node hand_nodes[] = {
    {.f = {.ids = s0, .n_ids = 10, .parts = 1}, .parent = -1, .dim_len = 12, .comp = 0},
    {.f = {.ids = s1, .n_ids = 3, .parts = 1}, .parent = 0, .dim_len = 12, .comp = 0},
    {.f = {.ids = s2, .n_ids = 2, .parts = 1}, .parent = 0, .dim_len = 12, .comp = 0},
    {.f = {.ids = s3, .n_ids = 2, .parts = 1}, .parent = 1, .dim_len = 12, .comp = 0},
    {.f = {.ids = s4, .n_ids = 3, .parts = 1}, .parent = -1, .dim_len = 7, .comp = 1},
};
static const rw_ftree hand_tree = {.n = 5, .nodes = hand_nodes};

/* The mutations of config as words: "E2/3" enables node 2 at n = 3, "M1" mutates node 1. */
static void mutations_str(const int *config, char *buf, size_t n) {
    rw_rewrite r[32];
    int k = rw_ftree_mutations(&hand_tree, config, r, 32);
    buf[0] = 0;
    for (int i = 0; i < k; i++) {
        static const char letter[] = {
            [RW_FT_ENABLE] = 'E', [RW_FT_LIFT] = 'L', [RW_FT_DISABLE] = 'D', [RW_FT_MUTATE] = 'M'};
        char w[24];
        if (r[i].kind == RW_FT_ENABLE)
            snprintf(w, sizeof w, "%sE%u/%d", i ? " " : "", r[i].node_id, r[i].value);
        else
            snprintf(w, sizeof w, "%s%c%u", i ? " " : "", letter[r[i].kind], r[i].node_id);
        strncat(buf, w, n - strlen(buf) - 1);
    }
}

static void expect_mutations(const int *config, const char *want) {
    char got[256];
    mutations_str(config, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("mutations '%s', expected '%s'", got, want);
}

static bool mut(const int *config, int kind, int node, int *out) {
    rw_rewrite r = {.kind = kind, .node_id = (uint32_t)node};
    return rw_ftree_mutate(&hand_tree, config, &r, out);
}

static void test_mutation_rules(void **state) {
    (void)state;
    int c[5] = {1, 1, 1, 1, 1}, d[5];
    /* every free node can be enabled, the inner t0 and t1 too (rules-ftree-mut.c: magpie does
     * not restrict enable to leaves) */
    expect_mutations(c, "E0/2 E0/3 E0/4 E1/2 E1/3 E1/4 E2/2 E2/3 E2/4 E3/2 E3/3 E3/4 E4/7");
    assert_true(mut(c, RW_FT_ENABLE, 0, d));
    assert_int_equal(d[0], 2);
    assert_true(mut(c, RW_FT_ENABLE, 1, d));
    assert_false(mut(c, RW_FT_LIFT, 3, d));    /* not enabled */
    assert_false(mut(c, RW_FT_DISABLE, 3, d)); /* not enabled */
    assert_false(mut(c, RW_FT_MUTATE, 3, d));  /* not enabled */
    assert_false(mut(c, RW_FT_ENABLE, 5, d));  /* no such node */
    assert_false(mut(c, RW_SWAP, 2, d));       /* not an F-Tree rule */

    /* enable t3: n = 2, the least divisor of 12 */
    assert_true(mut(c, RW_FT_ENABLE, 3, d));
    assert_int_equal(d[3], 2);
    memcpy(c, d, sizeof c);
    expect_mutations(c, "E2/2 E2/3 E2/4 E4/7 L3 D3 M3");
    /* mutate walks the divisors of 12 (figure 7(d)), in place (new_config aliases config) */
    int e[5];
    memcpy(e, c, sizeof e);
    const int walk[] = {3, 4, 6, 12};
    for (int i = 0; i < 4; i++) {
        assert_true(mut(e, RW_FT_MUTATE, 3, e));
        assert_int_equal(e[3], walk[i]);
    }
    assert_false(mut(e, RW_FT_MUTATE, 3, e)); /* 12 is the last */
    expect_mutations(e, "E2/2 E2/3 E2/4 E4/7 L3 D3");

    /* enable t2 as well; now t4 overlaps an enabled node (id 7) and cannot be enabled */
    assert_true(mut(c, RW_FT_ENABLE, 2, c));
    assert_int_equal(c[2], 2);
    expect_mutations(c, "L3 D2 D3 M2 M3");
    assert_false(mut(c, RW_FT_ENABLE, 4, d));
    /* lift t3 (n = 4): t1 takes n = 4, t3 is disabled */
    c[3] = 4;
    assert_true(mut(c, RW_FT_LIFT, 3, d));
    int want1[5] = {1, 4, 2, 1, 1};
    assert_memory_equal(d, want1, sizeof want1);
    memcpy(c, d, sizeof c);
    /* t1 cannot lift to t0: t0's S contains the enabled t2 (no nesting) */
    assert_false(mut(c, RW_FT_LIFT, 1, d));
    expect_mutations(c, "D1 D2 M1 M2");
    /* t3 is a disabled leaf under the enabled t1: no enabling inside a split */
    assert_false(mut(c, RW_FT_ENABLE, 3, d));
    /* disable t2, then t1 lifts to the root */
    assert_true(mut(c, RW_FT_DISABLE, 2, c));
    assert_true(mut(c, RW_FT_LIFT, 1, c));
    int want2[5] = {4, 1, 1, 1, 1};
    assert_memory_equal(c, want2, sizeof want2);
    /* the root of component 0 overlaps t4: t4 stays disabled, t0 cannot lift further */
    expect_mutations(c, "D0 M0");

    /* t4: dim_len 7 is prime, so enable gives 7 and mutate has nowhere to go */
    int f[5] = {1, 1, 1, 1, 1};
    assert_true(mut(f, RW_FT_ENABLE, 4, f));
    assert_int_equal(f[4], 7);
    expect_mutations(f, "E1/2 E1/3 E1/4 E3/2 E3/3 E3/4 D4"); /* t0, t2 overlap t4 (id 7) */

    /* rw_ftree_enabled: the enabled fissions with their n, sharing the tree's ids */
    int g[5] = {1, 1, 3, 6, 1};
    rw_fission fs[5];
    assert_int_equal(rw_ftree_enabled(&hand_tree, g, fs), 2);
    assert_ptr_equal(fs[0].ids, s2);
    assert_int_equal(fs[0].parts, 3);
    assert_ptr_equal(fs[1].ids, s3);
    assert_int_equal(fs[1].parts, 6);
    assert_int_equal(hand_nodes[2].f.parts, 1); /* the tree itself is untouched */
}

/* Enable takes its n from the rewrite: each listed enable applies at its own n, a divisor of
 * dim_len; n = 0 (a checkpoint written before enable carried its n) is the least divisor; an n
 * that does not divide dim_len, or 1, does not apply. Listing stops at max, inside one node's
 * enables too. */
static void test_enable_part_counts(void **state) {
    (void)state;
    int c[5] = {1, 1, 1, 1, 1}, d[5];
    rw_rewrite r[32];
    int k = rw_ftree_mutations(&hand_tree, c, r, 32);
    assert_int_equal(k, 13);
    for (int i = 0; i < k; i++) {
        assert_int_equal(r[i].kind, RW_FT_ENABLE);
        assert_true(rw_ftree_mutate(&hand_tree, c, &r[i], d));
        assert_int_equal(d[r[i].node_id], r[i].value);
        for (int j = 0; j < 5; j++)
            if (j != (int)r[i].node_id) assert_int_equal(d[j], 1);
    }
    rw_rewrite e = {.kind = RW_FT_ENABLE, .node_id = 0, .value = 6};
    assert_true(rw_ftree_mutate(&hand_tree, c, &e, d)); /* 6 divides 12, though not listed */
    assert_int_equal(d[0], 6);
    e.value = 0;
    assert_true(rw_ftree_mutate(&hand_tree, c, &e, d));
    assert_int_equal(d[0], 2);
    const int bad[] = {1, 5, 24, -2};
    for (int i = 0; i < 4; i++) {
        e.value = bad[i];
        assert_false(rw_ftree_mutate(&hand_tree, c, &e, d));
    }
    e = (rw_rewrite){.kind = RW_FT_ENABLE, .node_id = 4, .value = 7};
    assert_true(rw_ftree_mutate(&hand_tree, c, &e, d));
    e.value = 14; /* beyond dim_len 7 */
    assert_false(rw_ftree_mutate(&hand_tree, c, &e, d));
    /* max: two of node 0's three */
    assert_int_equal(rw_ftree_mutations(&hand_tree, c, r, 2), 2);
    assert_int_equal(r[1].node_id, 0);
    assert_int_equal(r[1].value, 3);
}

/* Lift to a parent whose dimension n does not divide takes the parent's least divisor; disable
 * refuses a node with an enabled descendant (a configuration the rules never make, built by
 * hand). */
static void test_mutation_lift_and_disable_edges(void **state) {
    (void)state;
    static uint32_t a[] = {1, 2, 3}, b[] = {2, 3};
    rw_ftree_node nodes[] = {
        {.f = {.ids = a, .n_ids = 3, .parts = 1}, .parent = -1, .dim_len = 10},
        {.f = {.ids = b, .n_ids = 2, .parts = 1}, .parent = 0, .dim_len = 9},
    };
    rw_ftree t = {.n = 2, .nodes = nodes};
    int c[2] = {1, 3}, d[2];
    rw_rewrite lift = {.kind = RW_FT_LIFT, .node_id = 1};
    assert_true(rw_ftree_mutate(&t, c, &lift, d));
    assert_int_equal(d[0], 2); /* 3 does not divide 10 */
    assert_int_equal(d[1], 1);
    c[1] = 5;
    d[0] = d[1] = 0;
    assert_true(rw_ftree_mutate(&t, c, &lift, d));
    assert_int_equal(d[0], 5); /* 5 divides 10: kept */
    int nested[2] = {2, 3};
    rw_rewrite dis0 = {.kind = RW_FT_DISABLE, .node_id = 0};
    rw_rewrite dis1 = {.kind = RW_FT_DISABLE, .node_id = 1};
    assert_false(rw_ftree_mutate(&t, nested, &dis0, d));
    assert_true(rw_ftree_mutate(&t, nested, &dis1, d));
    assert_int_equal(rw_ftree_mutations(&t, c, NULL, 0), 0); /* max 0 writes nothing */
}

/* ---------------------------------------------------------------- Algorithm 1, by hand */

/* x [4, 6] (a graph input) -> n0 Relu -> a -> n1 Relu -> b -> n2 Relu -> c; n3 Add(b, c) -> d;
 * n4 Relu(d) -> e (the output). Every value is 96 bytes and, by the memory given, a hot-spot.
 * Element-wise ops link both dims, so D(G) has two components holding every node: dim 0
 * (length 4) and dim 1 (length 6), with the same G' and the same candidates.
 * Dominator tree: n0 -> n1 -> {n2, n3}, n3 -> n4 (n3 reads b and c, so idom(n3) = n1).
 * heat: n4 96, n3 192, n2 96, n1 96 + 96 + 192 = 384, n0 480.
 * inputs of S(v) = des(v) \ {v}: n0 a (96), n1 b (96), n2 nothing (S empty), n3 d (96),
 * n4 nothing. score = heat/2 - inputs: n0 144, n1 96, n2 48, n3 0, n4 48.
 * L = 4, S_max = 144, level floor(4 s / 144): n0 4, n1 2, n2 1, n4 1, n3 0.
 * v_dom: level 1 {n2, n4}: leaves, S empty, no candidate; level 2 n1: S {n2, n3, n4}; level 4
 * n0: S {n1, n2, n3, n4}. Both S are valid (element-wise, connected, convex). The same two S
 * in the dim-0 component are duplicates: the dim-1 ones are kept (6 > 4). Tree: t0 = S(n0), a
 * root; t1 = S(n1), its child. */
static void test_build_by_hand(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape s = TU_SHAPE(4, 6);
    int x = ir_graph_add_value(g, "x", IR_F32, &s), a, b, c, dd, e;
    ir_graph_add_input(g, x);
    int n0 = tu_add_node1(g, IR_OP_Relu, "n0", 1, &x, 0, NULL, &a);
    int n1 = tu_add_node1(g, IR_OP_Relu, "n1", 1, &a, 0, NULL, &b);
    int n2 = tu_add_node1(g, IR_OP_Relu, "n2", 1, &b, 0, NULL, &c);
    int n3 = tu_add_node1(g, IR_OP_Add, "n3", 2, (int[]){b, c}, 0, NULL, &dd);
    int n4 = tu_add_node1(g, IR_OP_Relu, "n4", 1, &dd, 0, NULL, &e);
    ir_graph_add_output(g, e);
    int hs[5] = {a, b, c, dd, e};
    sched_memory m = {.n_hotspots = 5, .hotspots = hs};
    rw_ftree *t = rw_ftree_build(g, &m, 4);
    assert_non_null(t);
    assert_int_equal(t->n, 2);
    rw_dgraph *dg = rw_dgraph_build(g);
    int c1 = rw_dgraph_value_comp(dg, a, 1);
    assert_true(c1 >= 0 && c1 != rw_dgraph_value_comp(dg, a, 0));
    const uint32_t want0[] = {g->nodes[n1].id, g->nodes[n2].id, g->nodes[n3].id, g->nodes[n4].id};
    const struct {
        int parent, n_ids;
        const uint32_t *ids;
        double heat, score;
    } want[2] = {{-1, 4, want0, 480, 144}, {0, 3, want0 + 1, 384, 96}};
    for (int i = 0; i < 2; i++) {
        const rw_ftree_node *x = &t->nodes[i];
        assert_int_equal(x->parent, want[i].parent);
        assert_int_equal(x->comp, c1);
        assert_int_equal(x->dim_len, 6);
        assert_int_equal(x->f.parts, 1);
        assert_int_equal(x->f.n_ids, want[i].n_ids);
        assert_memory_equal(x->f.ids, want[i].ids, sizeof(uint32_t) * (size_t)want[i].n_ids);
        assert_true(x->heat == want[i].heat && x->score == want[i].score);
        /* the seed: S's first node's output, dim 1 */
        assert_int_equal(x->f.seed_id, want[i].ids[0]);
        assert_int_equal(x->f.seed_out, 0);
        assert_int_equal(x->f.seed_dim, 1);
    }
    (void)n0;
    /* enable the leaf, lift it to the root, mutate: 2 -> 3 -> 6; then the fission applies */
    int config[2] = {1, 1};
    rw_rewrite en = {.kind = RW_FT_ENABLE, .node_id = 1}, lift = {.kind = RW_FT_LIFT, .node_id = 1},
               mu = {.kind = RW_FT_MUTATE, .node_id = 0};
    assert_true(rw_ftree_mutate(t, config, &en, config));
    assert_true(rw_ftree_mutate(t, config, &lift, config));
    assert_int_equal(config[0], 2);
    assert_int_equal(config[1], 1);
    assert_true(rw_ftree_mutate(t, config, &mu, config));
    assert_true(rw_ftree_mutate(t, config, &mu, config));
    assert_int_equal(config[0], 6);
    rw_fission fs[2];
    assert_int_equal(rw_ftree_enabled(t, config, fs), 1);
    assert_int_equal(fs[0].parts, 6);
    ir_diag d = {{0}};
    ir_graph *ng = rw_fission_apply(g, fs, 1, NULL, NULL, &d);
    if (!ng) fail_msg("rw_fission_apply: %s", d.msg);
    assert_int_equal(ir_graph_validate(ng, &d), IR_OK);
    ir_graph_free(ng);
    /* with L = 1 only the maximum's level is selected: n0 alone */
    rw_ftree *t1 = rw_ftree_build(g, &m, 1);
    assert_int_equal(t1->n, 1);
    assert_int_equal(t1->nodes[0].f.n_ids, 4);
    rw_ftree_free(t1);
    /* no hot-spots: every score <= 0, an empty tree */
    sched_memory none = {0};
    rw_ftree *t0 = rw_ftree_build(g, &none, 4);
    assert_non_null(t0);
    assert_int_equal(t0->n, 0);
    rw_ftree_free(t0);
    rw_dgraph_free(dg);
    rw_ftree_free(t);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- Algorithm 1 on real graphs */

/* The training graph (sum loss, Adam) of a model; shape: one "NAME=D0,D1,..." or NULL. */
static ir_graph *load_training(const char *rel, const char *shape) {
    char path[1024], nm[64] = "";
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts io = {0};
    ir_shape s = {0};
    const char *names[1] = {nm};
    if (shape) {
        const char *eq = strchr(shape, '=');
        snprintf(nm, sizeof nm, "%.*s", (int)(eq - shape), shape);
        for (const char *p = eq + 1; *p;) {
            char *e;
            s.dims[s.rank++] = strtoll(p, &e, 10);
            p = *e == ',' ? e + 1 : e;
        }
        io = (ir_import_opts){.n_shapes = 1, .shape_names = names, .shape_values = &s};
    }
    ir_graph *fwd = ir_onnx_load(tu_src_path(rel, path, sizeof path), &io, &st, &d);
    if (!fwd) fail_msg("%s: import: %s", rel, d.msg);
    /* Adam: the in-place updates (no batch dimension) must stay out of every S */
    ir_train_opts o = {.optimizer = IR_OPTIM_ADAM};
    ir_graph *tg = ir_build_training(fwd, &o, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", rel, d.msg);
    ir_graph_free(fwd);
    return tg;
}

static bool ids_subset(const rw_fission *a, const rw_fission *b) {
    int j = 0;
    for (int i = 0; i < a->n_ids; i++) {
        while (j < b->n_ids && b->ids[j] < a->ids[i]) j++;
        if (j == b->n_ids || b->ids[j] != a->ids[i]) return false;
    }
    return true;
}

static int least_divisor(int64_t len) {
    for (int d = 2; d <= len; d++)
        if (len % d == 0) return d;
    return 0;
}

/* The contract of rules.h on t: S sorted, present and valid for its component; parents before
 * children, in the same component, the smallest strict superset; no S twice. */
static void check_tree(const char *name, const ir_graph *g, const rw_ftree *t) {
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    for (int i = 0; i < t->n; i++) {
        const rw_ftree_node *x = &t->nodes[i];
        assert_int_equal(x->f.parts, 1);
        assert_true(x->f.n_ids >= 1);
        assert_true(x->dim_len >= 2);
        assert_int_equal(x->dim_len, rw_dgraph_comp_length(dg, x->comp));
        /* selected nodes have a normalized score >= 1/L > 0; score = heat/2 - inputs */
        assert_true(x->score > 0 && x->heat >= 2 * x->score);
        for (int k = 1; k < x->f.n_ids; k++) assert_true(x->f.ids[k - 1] < x->f.ids[k]);
        ir_diag d = {{0}};
        if (rw_fission_check(g, dg, &x->f, &d) != IR_OK)
            fail_msg("%s: tree node %d: %s", name, i, d.msg);
        if (x->parent >= 0) {
            const rw_ftree_node *p = &t->nodes[x->parent];
            assert_true(x->parent < i);
            assert_int_equal(p->comp, x->comp);
            assert_true(p->f.n_ids > x->f.n_ids && ids_subset(&x->f, &p->f));
        }
        for (int j = 0; j < t->n; j++) {
            const rw_ftree_node *y = &t->nodes[j];
            if (j == i) continue;
            if (y->f.n_ids == x->f.n_ids && ids_subset(&x->f, &y->f))
                fail_msg("%s: tree nodes %d and %d have the same S", name, i, j);
            /* no candidate of the component lies strictly between x and its parent */
            if (y->comp == x->comp && y->f.n_ids > x->f.n_ids && ids_subset(&x->f, &y->f)) {
                assert_true(x->parent >= 0);
                assert_true(y->f.n_ids >= t->nodes[x->parent].f.n_ids);
            }
        }
    }
    rw_dgraph_free(dg);
}

/* rw_fission_apply of fs gives a graph that validates; with schedulable, one whose node order is
 * also a valid order for sched_memory_compute (in-place optimizer updates after the readers of
 * the parameters they overwrite, which S's nodes are). */
static bool schedulable;

static void expect_applies(const char *name, const ir_graph *g, const rw_fission *fs, int n) {
    ir_diag d = {{0}};
    int nt = 0;
    ir_graph *ng = rw_fission_apply(g, fs, n, NULL, &nt, &d);
    if (!ng) fail_msg("%s: rw_fission_apply of %d fissions: %s", name, n, d.msg);
    if (ir_graph_validate(ng, &d) != IR_OK) fail_msg("%s: fission result: %s", name, d.msg);
    sched_memory m;
    if (schedulable && sched_memory_compute(ng, NULL, &m, &d) != IR_OK)
        fail_msg("%s: memory of the fission result: %s", name, d.msg);
    if (schedulable) sched_memory_free(&m);
    ir_graph_free(ng);
}

/* Builds the tree of rel's training graph, checks it, applies every candidate (split in its
 * least n) and a configuration the rules reach; returns the tree size. */
static int check_model(const char *rel, const char *shape) {
    ir_graph *g = load_training(rel, shape);
    ir_diag d = {{0}};
    sched_memory m;
    if (sched_memory_compute(g, NULL, &m, &d) != IR_OK) fail_msg("%s: %s", rel, d.msg);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rw_ftree *t = rw_ftree_build(g, &m, 4);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(t);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%-48s %5d nodes: %2d tree nodes in %.1f ms\n", rel, g->n_nodes, t->n, ms);
    /* MAGIS's analyzer runs again after rewrites: it must stay far below a second even on BERT
     * (1942 nodes) in a debug build */
    assert_true(ms < 1000);
    check_tree(rel, g, t);
    for (int i = 0; i < t->n; i++) {
        rw_fission f = t->nodes[i].f;
        f.parts = least_divisor(t->nodes[i].dim_len);
        expect_applies(rel, g, &f, 1);
    }
    /* enable leaves while any can be, then one lift or mutate where one applies */
    int *config = malloc(sizeof(int) * ((size_t)t->n + 1));
    rw_rewrite *r = malloc(sizeof(rw_rewrite) * ((size_t)t->n * 4 + 1));
    for (int i = 0; i < t->n; i++) config[i] = 1;
    for (;;) {
        int k = rw_ftree_mutations(t, config, r, t->n * 4);
        if (k == 0 || r[0].kind != RW_FT_ENABLE) break;
        assert_true(rw_ftree_mutate(t, config, &r[0], config));
    }
    int k = rw_ftree_mutations(t, config, r, t->n * 4);
    for (int j = 0; j < k; j++)
        if (r[j].kind == RW_FT_LIFT || r[j].kind == RW_FT_MUTATE) {
            assert_true(rw_ftree_mutate(t, config, &r[j], config));
            break;
        }
    rw_fission *fs = malloc(sizeof(rw_fission) * ((size_t)t->n + 1));
    int nf = rw_ftree_enabled(t, config, fs);
    if (nf) expect_applies(rel, g, fs, nf);
    int n = t->n;
    free(fs);
    free(r);
    free(config);
    rw_ftree_free(t);
    sched_memory_free(&m);
    ir_graph_free(g);
    return n;
}

static void test_build_training_graphs(void **state) {
    (void)state;
    /* the small numeric fixtures (batch 2): their peaks are mostly weights and optimizer
     * state, so few or no candidates; the checks hold either way */
    static const char *const fixtures[] = {
        "tests/fixtures/numeric/resnet_small_train/model.onnx",
        "tests/fixtures/numeric/transformer_encoder_train/model.onnx",
        "tests/fixtures/numeric/gpt_small_train/model.onnx",
        "tests/fixtures/numeric/mlp_dropout_train/model.onnx",
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        check_model(fixtures[i], NULL);
    check_model("tests/fixtures/numeric/cnn_bn_train/model.onnx", "input=32,3,32,32");
    /* full-size models, where activations dominate the peak: the batch split of the forward
     * (ResNet-50) and of each encoder layer (BERT) must be found */
    assert_true(check_model("tests/fixtures/structure/resnet50.onnx", "input=8,3,224,224") > 0);
    assert_true(check_model("tests/fixtures/structure/bert_base_s512_b8.onnx", NULL) > 0);
}

/* The same candidates, their fission results scheduled in their node order. */
static void test_fission_results_schedule(void **state) {
    (void)state;
    schedulable = true;
    check_model("tests/fixtures/numeric/cnn_bn_train/model.onnx", "input=32,3,32,32");
    check_model("tests/fixtures/structure/resnet50.onnx", "input=8,3,224,224");
    check_model("tests/fixtures/structure/bert_base_s512_b8.onnx", NULL);
    schedulable = false;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idom_random_dags),
        cmocka_unit_test(test_heat_score_random),
        cmocka_unit_test(test_select_intervals),
        cmocka_unit_test(test_mutation_rules),
        cmocka_unit_test(test_enable_part_counts),
        cmocka_unit_test(test_mutation_lift_and_disable_edges),
        cmocka_unit_test(test_build_by_hand),
        cmocka_unit_test(test_build_training_graphs),
        cmocka_unit_test(test_fission_results_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
