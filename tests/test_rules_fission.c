/* test_rules_fission.c - fission (rules/rules-fission*.c, MAGIS 4.2): rw_fission_check refuses
 * each violated constraint with a message naming it; on real training graphs (an MLP split
 * along the batch as in MAGIS figure 5, with its weight gradients accumulated; a small CNN with
 * batch normalization split along the batch between its normalizations; a transformer split
 * along batch x heads inside attention and along the batch outside it), at n = 2 and n = 4:
 *  - rw_fission_apply leaves its input alone, keeps the ids of S with the group tags, divides
 *    their D-dimensions, and reports S among the touched ids;
 *  - the one-copy graph is scheduled (eager and memory-minimizing orders) and simulated;
 *  - rw_fission_materialize's graph, executed in the materialized order, gives the original
 *    graph's outputs (test-check.h: judged against the original's float64 run, since the parts
 *    sum in another order) and measures
 *    exactly the peak sched_memory_compute gave for the one-copy graph and its order, and
 *    simulates to the one-copy graph's latency;
 * and applying on BERT-base's training graph takes milliseconds.
 *
 * The sub-graphs S are found by pick_s below: the nodes of a window (forward, backward, all) that
 * D splits cleanly by the per-node rules, then the largest weakly connected piece, made convex by
 * dropping what lies past a path that leaves it. rw_fission_check is the judge; pick_s only aims
 * at sub-graphs worth judging. */
#include "test-check.h"

#include <time.h>

#include "prof.h"
#include "rt.h"
#include "rules.h"
#include "schedule.h"

static prof_model *cost;

static int setup(void **state) {
    (void)state;
    cost = tu_analytic_cost();
    return cost ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    prof_close(cost);
    return 0;
}

/* ---------------------------------------------------------------- loading */

/* The training graph (sum loss, no optimizer) of fixture `name`, its data input given shape s. */
static ir_graph *load_train(const char *name, const char *input, ir_shape s) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", name);
    const char *names[1] = {input};
    ir_import_opts io = {.n_shapes = 1, .shape_names = names, .shape_values = &s};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(tu_src_path(rel, path, sizeof path), &io, &st, &d);
    if (!fwd) fail_msg("%s: import: %s", name, d.msg);
    ir_graph *tg = ir_build_training(fwd, NULL, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", name, d.msg);
    ir_graph_free(fwd);
    return tg;
}

/* ---------------------------------------------------------------- choosing S */

static int dims_in(const rw_dgraph *dg, const ir_graph *g, int v, int comp) {
    int cnt = 0;
    for (int k = 0; k < g->values[v].shape.rank; k++) cnt += rw_dgraph_value_comp(dg, v, k) == comp;
    return cnt;
}

/* The per-node rules of constraint (3), the op kinds fission takes, and "reads a split value". */
static bool splittable(const ir_graph *g, const rw_dgraph *dg, int comp, int i) {
    const ir_node *n = &g->nodes[i];
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->kernel ||
        (def->flags & (IR_OPF_RANDOM | IR_OPF_INPLACE | IR_OPF_HOST_OUTPUT)))
        return false;
    if (n->op == IR_OP_Load || n->op == IR_OP_FissionBuffer || n->op == IR_OP_FissionSlice ||
        n->op == IR_OP_FissionAssemble || n->op == IR_OP_FissionAccumulate)
        return false;
    int with = 0, without = 0, nr = 0, r = 0;
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        int c = dims_in(dg, g, n->out[k], comp);
        if (c > 1) return false;
        c ? with++ : without++;
    }
    for (int x = 1; rw_dgraph_reduce_comp(dg, i, x) >= 0; x++)
        if (rw_dgraph_reduce_comp(dg, i, x) == comp) nr++, r = x;
    bool ok = (with && !without && !nr) || (!with && nr == 1 && rw_dgraph_reduce_is_sum(dg, i, r));
    bool reads = false;
    for (int k = 0; k < n->n_in && ok; k++)
        if (n->in[k] >= 0 && dims_in(dg, g, n->in[k], comp) == 1) reads = true;
    return ok && reads;
}

static int find_root(int *p, int x) {
    while (p[x] != x) x = p[x] = p[p[x]];
    return x;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* S for D = comp within node indices [lo, hi): ids (sorted) into ids, their count returned. */
static int pick_s(const ir_graph *g, const rw_dgraph *dg, int comp, int lo, int hi, uint32_t *ids) {
    int n = g->n_nodes;
    unsigned char *cand = calloc((size_t)n, 1), *after = calloc((size_t)n, 1);
    int *par = malloc(sizeof(int) * (size_t)n), *size = calloc((size_t)n, sizeof(int));
    for (int i = lo; i < hi; i++) cand[i] = splittable(g, dg, comp, i);
    /* an edge inside S must carry D: drop readers of a candidate's value without it */
    for (int i = lo; i < hi; i++)
        for (int k = 0; k < g->nodes[i].n_in && cand[i]; k++) {
            int v = g->nodes[i].in[k], p = v >= 0 ? g->values[v].producer : -1;
            if (p >= 0 && cand[p] && dims_in(dg, g, v, comp) == 0) cand[i] = 0;
        }
    int cnt = 0;
    for (;;) {
        for (int i = 0; i < n; i++) par[i] = i, size[i] = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < g->nodes[i].n_in && cand[i]; k++) {
                int v = g->nodes[i].in[k], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && cand[p]) par[find_root(par, i)] = find_root(par, p);
            }
        int best = -1;
        for (int i = 0; i < n; i++)
            if (cand[i] && ++size[find_root(par, i)] > (best >= 0 ? size[best] : 0))
                best = find_root(par, i);
        if (best < 0) break;
        for (int i = 0; i < n; i++) cand[i] = cand[i] && find_root(par, i) == best;
        /* convexity: outside nodes both after and before S; drop S's nodes that come after one */
        memset(after, 0, (size_t)n);
        unsigned char *desc = calloc((size_t)n, 1), *anc = calloc((size_t)n, 1);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < g->nodes[i].n_in && !cand[i]; k++) {
                int v = g->nodes[i].in[k], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && (cand[p] || desc[p])) desc[i] = 1;
            }
        for (int i = n - 1; i >= 0; i--)
            if (cand[i] || anc[i])
                for (int k = 0; k < g->nodes[i].n_in; k++) {
                    int v = g->nodes[i].in[k], p = v >= 0 ? g->values[v].producer : -1;
                    if (p >= 0 && !cand[p]) anc[p] = 1;
                }
        bool convex = true;
        for (int i = 0; i < n; i++) {
            after[i] = !cand[i] && desc[i] && anc[i];
            convex = convex && !after[i];
            for (int k = 0; k < g->nodes[i].n_in && !after[i]; k++) {
                int v = g->nodes[i].in[k], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && after[p]) after[i] = 1;
            }
            if (after[i]) cand[i] = 0;
        }
        free(desc);
        free(anc);
        if (convex) break;
    }
    for (int i = 0; i < n; i++)
        if (cand[i]) ids[cnt++] = g->nodes[i].id;
    qsort(ids, (size_t)cnt, sizeof *ids, cmp_u32);
    free(cand);
    free(after);
    free(par);
    free(size);
    return cnt;
}

static int node_of(const ir_graph *g, uint32_t id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id == id) return i;
    return -1;
}

/* f over S (ids, count) for D = comp, its seed the first vertex of S in D. */
static rw_fission make_fission(const ir_graph *g, const rw_dgraph *dg, int comp, uint32_t *ids,
                               int cnt, int parts) {
    rw_fission f = {.ids = ids, .n_ids = cnt, .parts = parts};
    for (int j = 0; j < cnt; j++) {
        int i = node_of(g, ids[j]);
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++) {
            int dim = n->out[k] >= 0 ? rw_dgraph_value_dim_in(dg, n->out[k], comp) : -1;
            if (dim >= 0) {
                f.seed_id = n->id, f.seed_out = k, f.seed_dim = dim;
                return f;
            }
        }
        int r = rw_dgraph_reduce_in(dg, i, comp);
        if (r) {
            f.seed_id = n->id, f.seed_out = 0, f.seed_dim = -r;
            return f;
        }
    }
    fail_msg("S has no vertex in D");
    return f;
}

/* ---------------------------------------------------------------- checking a one-copy graph */

static void run(const ir_graph *g, const int *order, rt_result *r, const char *what) {
    rt_options o = {
        .order = order, .n_order = order ? g->n_nodes : 0, .seed = 5, .fill_missing_data = true};
    ir_diag d = {{0}};
    if (rt_run(g, NULL, 0, &o, r, &d) != IR_OK) fail_msg("%s: run: %s", what, d.msg);
}

/* The original graph's float32 and float64 runs (the options of run). */
static void run_reference(const ir_graph *g, tu_ref *ref, const char *what) {
    rt_options o = {.seed = 5, .fill_missing_data = true};
    tu_ref_run(g, NULL, 0, &o, ref, what);
}

/* Structure of the one-copy graph: S keeps its ids, tagged, its D-dims divided; S is touched. */
static void check_structure(const ir_graph *g, const ir_graph *one, const rw_fission *fs, int nf,
                            const int *comps, const rw_dgraph *dg, const uint32_t *touched,
                            int n_touched, const char *what) {
    for (int k = 0; k < nf; k++)
        for (int j = 0; j < fs[k].n_ids; j++) {
            int i = node_of(g, fs[k].ids[j]), i1 = node_of(one, fs[k].ids[j]);
            if (i1 < 0) fail_msg("%s: node id %u of S is gone", what, fs[k].ids[j]);
            const ir_node *n = &g->nodes[i], *n1 = &one->nodes[i1];
            assert_int_equal(ir_attr_int(n1, "magpie_fission_group", -1), k);
            assert_int_equal(ir_attr_int(n1, "magpie_fission_parts", -1), fs[k].parts);
            for (int o = 0; o < n->n_out; o++) {
                if (n->out[o] < 0) continue;
                ir_shape want = g->values[n->out[o]].shape;
                int dim = rw_dgraph_value_dim_in(dg, n->out[o], comps[k]);
                if (dim >= 0) want.dims[dim] /= fs[k].parts;
                if (!ir_shape_eq(&want, &one->values[n1->out[o]].shape))
                    fail_msg("%s: node '%s' output %d not divided along D", what, n->name, o);
            }
            bool found = false;
            for (int t = 0; t < n_touched && !found; t++) found = touched[t] == fs[k].ids[j];
            if (!found) fail_msg("%s: id %u of S not among the touched", what, fs[k].ids[j]);
        }
    /* nothing removed; the new nodes have fresh ids; touched = S, its replicas (tagged old
     * nodes outside S: layout ops reading graph inputs only) and the new nodes */
    int n_s = 0, fresh = 0;
    for (int k = 0; k < nf; k++) n_s += fs[k].n_ids;
    for (int i = 0; i < one->n_nodes; i++) {
        const ir_node *n = &one->nodes[i];
        if (n->id >= g->next_node_id) {
            fresh++;
            continue;
        }
        if (node_of(g, n->id) < 0) fail_msg("%s: id %u is neither old nor fresh", what, n->id);
        bool in_s = false;
        for (int k = 0; k < nf; k++)
            for (int j = 0; j < fs[k].n_ids && !in_s; j++) in_s = fs[k].ids[j] == n->id;
        if (in_s || ir_attr_int(n, "magpie_fission_group", -1) < 0) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && one->values[n->in[k]].producer >= 0)
                fail_msg("%s: replica '%s' reads a computed value", what, n->name);
        n_s++;
    }
    assert_int_equal(fresh, one->n_nodes - g->n_nodes);
    assert_int_equal(n_touched, n_s + fresh);
    assert_int_equal(one->n_outputs, g->n_outputs);
    for (int k = 0; k < g->n_outputs; k++)
        assert_string_equal(one->values[one->outputs[k]].name, g->values[g->outputs[k]].name);
}

/* One order of the one-copy graph: materialize, execute, compare outputs, peak and latency. */
static void check_order(const ir_graph *one, const int *order, const tu_ref *ref, const char *what,
                        size_t *peak_out) {
    ir_diag d = {{0}};
    sched_memory m;
    if (sched_memory_compute(one, order, &m, &d) != IR_OK) fail_msg("%s: memory: %s", what, d.msg);
    sched_sim s1, s2;
    if (sched_simulate(one, order, cost, &s1, &d) != IR_OK)
        fail_msg("%s: simulate: %s", what, d.msg);
    assert_int_equal(s1.peak_device_bytes, m.peak_bytes);
    int *morder = NULL;
    ir_graph *mat = rw_fission_materialize(one, order, &morder, &d);
    if (!mat) fail_msg("%s: materialize: %s", what, d.msg);
    if (ir_graph_validate(mat, &d) != IR_OK) fail_msg("%s: materialized: %s", what, d.msg);
    for (int i = 0; i < mat->n_nodes; i++)
        if (ir_attr_find(&mat->nodes[i], "magpie_fission_group"))
            fail_msg("%s: a tag is left on '%s'", what, mat->nodes[i].name);
    rt_result r = {0};
    run(mat, morder, &r, what);
    assert_int_equal(r.n_outputs, ref->r32.n_outputs);
    double worst = tu_expect_close(ref, mat, &r, what);
    if (r.peak_bytes != m.peak_bytes)
        fail_msg("%s: materialized graph measures %zu bytes, the one-copy graph's accounting says "
                 "%zu",
                 what, r.peak_bytes, m.peak_bytes);
    if (sched_simulate(mat, morder, cost, &s2, &d) != IR_OK)
        fail_msg("%s: simulate the materialized graph: %s", what, d.msg);
    if (!(fabs(s2.latency_s - s1.latency_s) <= 1e-9 * s2.latency_s))
        fail_msg("%s: materialized latency %.9g s, one-copy %.9g s", what, s2.latency_s,
                 s1.latency_s);
    print_message("  %-44s %4d -> %4d nodes, peak %8zu B, latency %.3g us, error/bound %.2g\n",
                  what, one->n_nodes, mat->n_nodes, m.peak_bytes, s1.latency_s * 1e6, worst);
    *peak_out = m.peak_bytes;
    sched_sim_free(&s1);
    sched_sim_free(&s2);
    sched_memory_free(&m);
    rt_result_free(&r);
    free(morder);
    ir_graph_free(mat);
}

/* Accumulates that ir_fission_accumulate_fused takes for their producer's epilogue, over every
 * case: the MLP's weight gradients (Gemms) must be among them. */
static int n_fused_seen;

/* `fused` is set only where the accumulate is its part's one reader: the producer's epilogue
 * cannot also hand the part to another node. */
static void check_fused(const ir_graph *one, const char *what) {
    for (int i = 0; i < one->n_nodes; i++) {
        const ir_node *n = &one->nodes[i];
        if (n->op != IR_OP_FissionAccumulate || ir_attr_int(n, "fused", 0) != 1) continue;
        int readers = 0;
        for (int j = 0; j < one->n_nodes; j++)
            for (int k = 0; k < one->nodes[j].n_in; k++) readers += one->nodes[j].in[k] == n->in[1];
        if (readers != 1)
            fail_msg("%s: fused accumulate '%s': its part has %d readers", what, n->name, readers);
        n_fused_seen += ir_fission_accumulate_fused(one, n);
    }
}

/* A fission case: the fissions fs (already checked), applied to g, every check above in the
 * eager and the memory-minimizing orders. */
static void check_case(const ir_graph *g, rw_fission *fs, int nf, const int *comps,
                       const rw_dgraph *dg, const char *what) {
    ir_diag d = {{0}};
    for (int k = 0; k < nf; k++)
        if (rw_fission_check(g, dg, &fs[k], &d) != IR_OK)
            fail_msg("%s: fission %d refused: %s", what, k, d.msg);
    uint64_t h0 = ir_graph_hash(g);
    int n0 = g->n_nodes;
    uint32_t *touched = malloc(sizeof(uint32_t) * RW_MAX_FISSION_TOUCHED);
    int n_touched = 0;
    ir_graph *one = rw_fission_apply(g, fs, nf, touched, &n_touched, &d);
    if (!one) fail_msg("%s: apply: %s", what, d.msg);
    assert_int_equal(g->n_nodes, n0);
    assert_true(ir_graph_hash(g) == h0);
    check_structure(g, one, fs, nf, comps, dg, touched, n_touched, what);
    check_fused(one, what);
    tu_ref ref = {0};
    run_reference(g, &ref, what);
    print_message("%s: the original graph's eager peak is %zu B\n", what, ref.r32.peak_bytes);
    char name[256];
    size_t peak;
    int *order = sched_eager_order(one);
    snprintf(name, sizeof name, "%s, eager", what);
    check_order(one, order, &ref, name, &peak);
    /* bounded by states, not time: reproducible, and fast enough for a unit test */
    sched_dp_options o = {.time_budget_s = 600, .max_states = 1 << 14};
    if (sched_order_memory(one, &o, order, NULL, &d) != IR_OK)
        fail_msg("%s: memory order: %s", what, d.msg);
    snprintf(name, sizeof name, "%s, memory order", what);
    check_order(one, order, &ref, name, &peak);
    free(order);
    tu_ref_free(&ref);
    ir_graph_free(one);
    free(touched);
}

/* The training graph's forward: nodes up to the loss. */
static int forward_end(const ir_graph *g) {
    return g->values[g->outputs[0]].producer + 1;
}

/* ---------------------------------------------------------------- the models */

/* MLP (batch 8) along the batch: the forward with the loss (the loss accumulated over the
 * parts), the backward (MAGIS figure 5: weight gradients accumulated, input gradients
 * assembled), both at once as two groups, and the whole training graph as one S. */
static void test_mlp_batch(void **state) {
    (void)state;
    ir_graph *g = load_train("mlp", "input", TU_SHAPE(8, 16));
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, g->inputs[0], 0), fe = forward_end(g);
    assert_int_equal(rw_dgraph_comp_length(dg, comp), 8);
    uint32_t *fwd = malloc(sizeof(uint32_t) * (size_t)g->n_nodes),
             *bwd = malloc(sizeof(uint32_t) * (size_t)g->n_nodes),
             *all = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    int nfwd = pick_s(g, dg, comp, 0, fe, fwd), nbwd = pick_s(g, dg, comp, fe, g->n_nodes, bwd),
        nall = pick_s(g, dg, comp, 0, g->n_nodes, all);
    /* forward: 3 Gemms, 2 ReLUs, the loss; backward: per layer a weight gradient, a bias
     * gradient, and between layers an input gradient and a ReLU gradient, less the last layer's
     * weight and bias gradients, which read only the loss gradient and an activation (no value of
     * S: not connected); with the forward in S, that weight gradient joins through the
     * activation, but the bias gradient still reads only the loss gradient */
    assert_int_equal(nfwd, 6);
    assert_int_equal(nbwd, 3 * 2 + 2 * 2 - 2);
    assert_int_equal(nall, nfwd + nbwd + 1);
    static const int parts[] = {2, 4};
    for (int p = 0; p < 2; p++) {
        char what[128];
        int comps[2] = {comp, comp};
        rw_fission f[2] = {make_fission(g, dg, comp, fwd, nfwd, parts[p]),
                           make_fission(g, dg, comp, bwd, nbwd, parts[p])};
        snprintf(what, sizeof what, "mlp forward n=%d", parts[p]);
        check_case(g, f, 1, comps, dg, what);
        snprintf(what, sizeof what, "mlp backward n=%d", parts[p]);
        check_case(g, f + 1, 1, comps, dg, what);
        snprintf(what, sizeof what, "mlp forward+backward n=%d", parts[p]);
        check_case(g, f, 2, comps, dg, what);
        rw_fission fa = make_fission(g, dg, comp, all, nall, parts[p]);
        snprintf(what, sizeof what, "mlp whole n=%d", parts[p]);
        check_case(g, &fa, 1, comps, dg, what);
    }
    assert_true(n_fused_seen > 0); /* the weight gradients' Gemms add into their buffers */
    free(fwd);
    free(bwd);
    free(all);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* CNN with training-mode batch normalization (batch 4): the batch statistics cut the batch, so
 * S lies between normalizations: after the first (forward, then backward), and after the
 * second through the loss and back to it (fc's weight gradient accumulated). */
static void test_cnn_batch(void **state) {
    (void)state;
    ir_graph *g = load_train("cnn_bn_train", "input", TU_SHAPE(4, 3, 32, 32));
    rw_dgraph *dg = rw_dgraph_build(g);
    int bn[2], nbn = 0, fe = forward_end(g);
    for (int i = 0; i < fe && nbn < 2; i++)
        if (g->nodes[i].op == IR_OP_BatchNormalization) bn[nbn++] = i;
    assert_int_equal(nbn, 2);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    static const int parts[] = {2, 4};
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < 3; c++) {
            /* D: the batch of a normalization's output */
            int comp = rw_dgraph_value_comp(dg, g->nodes[bn[c == 2]].out[0], 0);
            assert_int_equal(rw_dgraph_comp_length(dg, comp), 4);
            int lo = c == 1 ? fe : 0, hi = c == 0 ? fe : g->n_nodes;
            int cnt = pick_s(g, dg, comp, lo, hi, ids);
            /* ReLU, MaxPool, Conv; MaxPool's and ReLU's gradients and the Conv's input gradient;
             * ReLU, pooling, flatten, fc, loss and their gradients but the fc bias's */
            static const int want[3] = {3, 3, 10};
            assert_int_equal(cnt, want[c]);
            rw_fission f = make_fission(g, dg, comp, ids, cnt, parts[p]);
            char what[128];
            static const char *const names[3] = {"block 2 forward", "block 2 backward",
                                                 "head and loss"};
            snprintf(what, sizeof what, "cnn %s n=%d", names[c], parts[p]);
            check_case(g, &f, 1, &comp, dg, what);
        }
    free(ids);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* Applies a remat or swap (kind) to the output of the first ReLU of S (ids all[0..nall)) that
 * has two readers, for its last reader, which must be in S too; returns the new graph. */
static ir_graph *rewrite_first_relu(const ir_graph *g, const uint32_t *all, int nall, int kind) {
    rw_rewrite r = {.kind = kind};
    for (int i = 0; i < g->n_nodes && !r.node_id; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_Relu || !bsearch(&n->id, all, (size_t)nall, sizeof *all, cmp_u32))
            continue;
        int last = -1, readers = 0;
        for (int j = i + 1; j < g->n_nodes; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == n->out[0]) last = j, readers++;
        if (readers >= 2 && bsearch(&g->nodes[last].id, all, (size_t)nall, sizeof *all, cmp_u32))
            r.node_id = n->id, r.user_id = g->nodes[last].id;
    }
    assert_true(r.node_id != 0);
    ir_diag d = {{0}};
    ir_status st;
    uint32_t touched[RW_MAX_TOUCHED];
    int nt = 0;
    ir_graph *g2 = rw_apply(g, &r, touched, &nt, &st, &d);
    if (!g2) fail_msg("%s: %s", rw_kind_name(kind), d.msg);
    return g2;
}

/* The MLP's training graph (batch 8), its D-graph, the batch's component and S = every node
 * it splits (the whole training graph). */
static ir_graph *mlp_whole(rw_dgraph **dg, int *comp, uint32_t **all, int *nall) {
    ir_graph *g = load_train("mlp", "input", TU_SHAPE(8, 16));
    *dg = rw_dgraph_build(g);
    *comp = rw_dgraph_value_comp(*dg, g->inputs[0], 0);
    *all = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    *nall = pick_s(g, *dg, *comp, 0, g->n_nodes, *all);
    return g;
}

/* A remat inside a region (MAGIS 5.2 rules on the F-Trans region's one copy): in the MLP's
 * whole training graph, a ReLU's output is rematerialized for its later reader; the copy lies
 * between two nodes of S, rw_fission_closure adds it (and nothing else), and the fission of the
 * closure applies, executes to the original's outputs and its executed peak equals the
 * simulated one (check_case). On the graph S was found on, the closure is S itself. */
static void test_remat_inside(void **state) {
    (void)state;
    rw_dgraph *dg;
    uint32_t *all;
    int comp, nall;
    ir_graph *g = mlp_whole(&dg, &comp, &all, &nall);
    rw_fission f = make_fission(g, dg, comp, all, nall, 2);
    uint32_t *closed = NULL;
    assert_int_equal(rw_fission_closure(g, &f, &closed), nall);
    assert_memory_equal(closed, all, sizeof(uint32_t) * (size_t)nall);
    free(closed);
    /* the first ReLU of S with two readers in S: remat it for the later one */
    ir_graph *g2 = rewrite_first_relu(g, all, nall, RW_REMAT);
    ir_diag d = {{0}};
    rw_dgraph *dg2 = rw_dgraph_build(g2);
    /* without the copy, S is not convex any more */
    rw_fission f2 = make_fission(g2, dg2, comp, all, nall, 2);
    assert_int_equal(rw_fission_check(g2, dg2, &f2, &d), IR_ERR_INVALID);
    int nc = rw_fission_closure(g2, &f2, &closed);
    assert_int_equal(nc, nall + 1);
    rw_fission fc = make_fission(g2, dg2, comp, closed, nc, 2);
    int comps[1] = {comp};
    check_case(g2, &fc, 1, comps, dg2, "mlp whole n=2 with a remat inside");
    fc.parts = 4;
    check_case(g2, &fc, 1, comps, dg2, "mlp whole n=4 with a remat inside");
    free(closed);
    rw_dgraph_free(dg2);
    ir_graph_free(g2);
    free(all);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* A swap inside a region: in the MLP's whole training graph, the first ReLU's output goes to the
 * host for its later reader (a backward op of S). The closure adds the Store and the Load (and
 * nothing else); each part swaps its own slice, so the materialized graph has n Store/Load
 * pairs, executes to the original's outputs with the simulated peak, and its simulated latency
 * (every part's transfers on the copy stream) equals the one-copy graph's (check_case). A
 * region holding the Store but not its Load would carry a host value across its border, and is
 * refused. */
static void test_swap_inside(void **state) {
    (void)state;
    rw_dgraph *dg;
    uint32_t *all;
    int comp, nall;
    ir_graph *g = mlp_whole(&dg, &comp, &all, &nall);
    ir_graph *g2 = rewrite_first_relu(g, all, nall, RW_SWAP);
    ir_diag d = {{0}};
    rw_dgraph *dg2 = rw_dgraph_build(g2);
    rw_fission f2 = make_fission(g2, dg2, comp, all, nall, 2);
    uint32_t *closed = NULL;
    int nc = rw_fission_closure(g2, &f2, &closed);
    assert_int_equal(nc, nall + 2);
    int stores = 0, loads = 0;
    for (int j = 0; j < nc; j++) {
        int op = g2->nodes[node_of(g2, closed[j])].op;
        stores += op == IR_OP_Store;
        loads += op == IR_OP_Load;
    }
    assert_int_equal(stores, 1);
    assert_int_equal(loads, 1);
    rw_fission fc = make_fission(g2, dg2, comp, closed, nc, 2);
    int comps[1] = {comp};
    check_case(g2, &fc, 1, comps, dg2, "mlp whole n=2 with a swap inside");
    /* The one-copy graph re-made after the swap numbers its fission ops anew (two ids later):
     * re-scheduling by insertion from the one-copy graph before it still gives a valid order. */
    rw_fission f0 = make_fission(g, dg, comp, all, nall, 2);
    uint32_t *tb = malloc(sizeof(uint32_t) * RW_MAX_FISSION_TOUCHED);
    int ntb = 0;
    ir_graph *one = rw_fission_apply(g, &f0, 1, tb, &ntb, &d),
             *one2 = rw_fission_apply(g2, &fc, 1, tb, &ntb, &d);
    assert_non_null(one);
    assert_non_null(one2);
    int *o1 = sched_eager_order(one), *o2 = malloc(sizeof(int) * (size_t)one2->n_nodes);
    if (sched_insert_new(one, o1, one2, o2, &d) != IR_OK) fail_msg("insertion: %s", d.msg);
    assert_true(sched_order_valid(one2, o2, one2->n_nodes));
    free(o1);
    free(o2);
    free(tb);
    ir_graph_free(one);
    ir_graph_free(one2);
    fc.parts = 4;
    check_case(g2, &fc, 1, comps, dg2, "mlp whole n=4 with a swap inside");
    /* the Store without its Load: the host value would leave the region */
    uint32_t *part = malloc(sizeof(uint32_t) * (size_t)nc);
    int np = 0;
    for (int j = 0; j < nc; j++)
        if (g2->nodes[node_of(g2, closed[j])].op != IR_OP_Load) part[np++] = closed[j];
    rw_fission fp = make_fission(g2, dg2, comp, part, np, 2);
    assert_int_equal(rw_fission_check(g2, dg2, &fp, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "crosses the border"));
    free(part);
    free(closed);
    rw_dgraph_free(dg2);
    ir_graph_free(g2);
    free(all);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* Transformer encoder (2 layers, 4 heads): inside attention PyTorch's export merges batch and
 * heads into one dim (2 x 4 = 8); the batch is its outer factor, so the D-graph keeps them in
 * one component whose length is the batch (n parts of the batch are n blocks of batch x heads).
 * Split from the first Softmax's component and from the input's, forward and backward. */
static void test_transformer(void **state) {
    (void)state;
    static const int parts[] = {2, 4};
    for (int b = 0; b < 2; b++) {
        ir_graph *g = load_train("transformer_encoder", "src", TU_SHAPE(2 + 2 * b, 16, 32));
        rw_dgraph *dg = rw_dgraph_build(g);
        int fe = forward_end(g), comp = -1;
        if (b == 0) { /* the first Softmax's row dim 0 is batch x heads */
            for (int i = 0; i < fe && comp < 0; i++)
                if (g->nodes[i].op == IR_OP_Softmax)
                    comp = rw_dgraph_value_comp(dg, g->nodes[i].out[0], 0);
            assert_int_equal(rw_dgraph_comp_length(dg, comp), 2); /* gcd(2, 2 x 4) */
            assert_int_equal(comp, rw_dgraph_value_comp(dg, g->inputs[0], 0));
        } else {
            comp = rw_dgraph_value_comp(dg, g->inputs[0], 0);
            assert_int_equal(rw_dgraph_comp_length(dg, comp), 4);
        }
        uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
        for (int half = 0; half < 2; half++) {
            int cnt = pick_s(g, dg, comp, half ? fe : 0, half ? g->n_nodes : fe, ids);
            assert_true(cnt >= 8);
            for (int p = 0; p < 2; p++) {
                if (rw_dgraph_comp_length(dg, comp) % parts[p]) continue;
                rw_fission f = make_fission(g, dg, comp, ids, cnt, parts[p]);
                char what[128];
                snprintf(what, sizeof what, "transformer %s %s (%d nodes) n=%d",
                         b ? "batch" : "batch x heads", half ? "backward" : "forward", cnt,
                         parts[p]);
                check_case(g, &f, 1, &comp, dg, what);
            }
        }
        free(ids);
        rw_dgraph_free(dg);
        ir_graph_free(g);
    }
}

/* ---------------------------------------------------------------- refusals */

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int add_const(ir_graph *g, const char *name, ir_dtype t, ir_shape s, const void *data) {
    int v = ir_graph_add_value(g, name, t, &s);
    size_t bytes = (size_t)ir_shape_numel(&s) * ir_dtype_size(t);
    ir_blob *b = ir_blob_new(bytes ? bytes : 1);
    if (data) memcpy(ir_blob_data(b), data, bytes);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}

/* Expects f refused by rw_fission_check with a message containing `cause`. */
static void expect_refused(const ir_graph *g, const rw_dgraph *dg, rw_fission f, const char *cause,
                           const char *what) {
    ir_diag d = {{0}};
    ir_status st = rw_fission_check(g, dg, &f, &d);
    if (st != IR_ERR_INVALID) fail_msg("%s: accepted (status %d)", what, (int)st);
    if (!strstr(d.msg, cause)) fail_msg("%s: message '%s' lacks '%s'", what, d.msg, cause);
    print_message("  refused, %-28s %s\n", what, d.msg);
}

/* A graph with one of everything a check refuses:
 *   a = x @ W1 [8,16]; r = Relu(a); c = r @ W2; s = Add(r, c); t = Relu(s); e = Exp(s)
 *   m = ReduceMax(t, axis 0) [16]; q = x @ transpose(x) [8,8]; dr = Dropout(r) (training)
 *   k = Expand(one, [8,16]); u = Add(k, t); p = ReduceSum(r, axis 0, keepdims) [1,16];
 *   v = Add(r, p); W3' = SGDUpdate(W3, u) */
static void test_refusals(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    float w[16 * 16];
    tu_fill(w, 16 * 16, 9);
    int x = add_input(g, "x", TU_SHAPE(8, 16));
    int w1 = add_const(g, "W1", IR_F32, TU_SHAPE(16, 16), w),
        w2 = add_const(g, "W2", IR_F32, TU_SHAPE(16, 16), w);
    int a, r, c, s, t, e, m, xt, q, dr, k, u, upd;
    int ia = tu_add_node1(g, IR_OP_MatMul, "a", 2, (int[]){x, w1}, 0, NULL, &a);
    int ir_ = tu_add_node1(g, IR_OP_Relu, "r", 1, &a, 0, NULL, &r);
    int ic = tu_add_node1(g, IR_OP_MatMul, "c", 2, (int[]){r, w2}, 0, NULL, &c);
    int is = tu_add_node1(g, IR_OP_Add, "s", 2, (int[]){r, c}, 0, NULL, &s);
    int it = tu_add_node1(g, IR_OP_Relu, "t", 1, &s, 0, NULL, &t);
    int ie = tu_add_node1(g, IR_OP_Exp, "e", 1, &s, 0, NULL, &e);
    int64_t ax0[1] = {0};
    ir_attr am[2] = {tu_attr_ints("axes", 1, ax0), tu_attr_int("keepdims", 0)};
    int im = tu_add_node1(g, IR_OP_ReduceMax, "m", 1, &t, 2, am, &m);
    int64_t perm[2] = {1, 0};
    ir_attr ap = tu_attr_ints("perm", 2, perm);
    int ixt = tu_add_node1(g, IR_OP_Transpose, "xt", 1, &x, 1, &ap, &xt);
    int iq = tu_add_node1(g, IR_OP_MatMul, "q", 2, (int[]){x, xt}, 0, NULL, &q);
    bool yes = true;
    int tm = add_const(g, "training", IR_BOOL, TU_SCALAR_SHAPE, &yes);
    float half = 0.5f;
    int ratio = add_const(g, "ratio", IR_F32, TU_SCALAR_SHAPE, &half);
    int idr = tu_add_node1(g, IR_OP_Dropout, "dr", 3, (int[]){r, ratio, tm}, 0, NULL, &dr);
    float onef = 1;
    int64_t shp[2] = {8, 16};
    int cone = add_const(g, "one", IR_F32, TU_SCALAR_SHAPE, &onef),
        cshp = add_const(g, "shape", IR_I64, TU_SHAPE(2), shp);
    int ik = tu_add_node1(g, IR_OP_Expand, "k", 2, (int[]){cone, cshp}, 0, NULL, &k);
    int iu = tu_add_node1(g, IR_OP_Add, "u", 2, (int[]){k, t}, 0, NULL, &u);
    int64_t zero[1] = {0};
    int caxes = add_const(g, "axes0", IR_I64, TU_SHAPE(1), zero), p, v;
    int ip = tu_add_node1(g, IR_OP_ReduceSum, "p", 2, (int[]){r, caxes}, 0, NULL, &p);
    int iv = tu_add_node1(g, IR_OP_Add, "v", 2, (int[]){r, p}, 0, NULL, &v);
    int w3 = add_input(g, "W3", TU_SHAPE(8, 16));
    ir_attr alr = tu_attr_float("lr", 0.1f);
    int iupd = tu_add_node1(g, IR_OP_SGDUpdate, "upd", 2, (int[]){w3, u}, 1, &alr, &upd);
    int outs[] = {e, m, q, dr, upd, v};
    for (int i = 0; i < 6; i++) ir_graph_add_output(g, outs[i]);
    ir_diag d = {{0}};
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    rw_dgraph *dg = rw_dgraph_build(g);
    int batch = rw_dgraph_value_comp(dg, x, 0), kax = rw_dgraph_value_comp(dg, x, 1);
    assert_int_equal(rw_dgraph_value_comp(dg, u, 0), batch);
    uint32_t id[16];
#define F(parts_, ...)                                                                             \
    ((rw_fission){.ids = id,                                                                       \
                  .n_ids = (int)(sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)),            \
                  .seed_id = g->nodes[ia].id,                                                      \
                  .seed_out = 0,                                                                   \
                  .seed_dim = 0,                                                                   \
                  .parts = (parts_)})
#define IDS(...) memcpy(id, (uint32_t[]){__VA_ARGS__}, sizeof((uint32_t[]){__VA_ARGS__}))
    const ir_node *N = g->nodes;
    /* a valid one first: a, r, c, s, t, e along the batch */
    IDS(N[ia].id, N[ir_].id, N[ic].id, N[is].id, N[it].id, N[ie].id);
    rw_fission ok = F(2, 0, 0, 0, 0, 0, 0);
    assert_int_equal(rw_fission_check(g, dg, &ok, &d), IR_OK);
    ok.parts = 1; /* the F-Tree's candidates: n = 1 is valid */
    assert_int_equal(rw_fission_check(g, dg, &ok, &d), IR_OK);

    ok.parts = 3;
    expect_refused(g, dg, ok, "do not divide", "3 parts of 8");
    IDS(N[ia].id, 999);
    expect_refused(g, dg, F(2, 0, 0), "no node with id 999", "a missing id");
    IDS(N[ir_].id, N[ia].id);
    expect_refused(g, dg, F(2, 0, 0), "not sorted", "unsorted ids");
    IDS(N[ia].id, N[ir_].id, N[ic].id, N[is].id, N[it].id, N[ie].id);
    rw_fission bad = ok;
    bad.parts = 2;
    bad.seed_dim = 5;
    expect_refused(g, dg, bad, "no dimension 5", "a seed out of range");
    /* (1) weakly connected: t and e hang off s, which is left out */
    IDS(N[it].id, N[ie].id);
    expect_refused(g, dg, F(2, 0, 0), "not connected", "two pieces");
    /* (2) convex: r -> c -> s with c left out */
    IDS(N[ir_].id, N[is].id);
    expect_refused(g, dg, F(2, 0, 0), "not convex", "a path around S");
    /* (3) redundancy: ReduceMax over the batch is not a sum */
    IDS(N[it].id, N[im].id);
    expect_refused(g, dg, F(2, 0, 0), "not a sum", "a max over D");
    /* (3) redundancy: D twice in x @ x^T's output */
    IDS(N[ixt].id, N[iq].id);
    expect_refused(g, dg, F(2, 0, 0), "dimensions in D", "D twice in one output");
    /* (3) a split along k makes a: a partial sum, which r cannot take */
    IDS(N[ia].id, N[ir_].id);
    rw_fission fk = F(2, 0, 0);
    fk.seed_dim = -1; /* a's reduce axis: k */
    assert_int_equal(rw_dgraph_reduce_comp(dg, ia, 1), kax);
    expect_refused(g, dg, fk, "no dimension and no reduce axis", "Relu of a split along k");
    /* (3) edge not linked: p sums r over the batch (a partial node), v = r + p broadcasts p over
     * the batch, so the edge p -> v carries no batch: v would add a partial sum */
    IDS(N[ir_].id, N[ip].id, N[iv].id);
    expect_refused(g, dg, F(2, 0, 0, 0), "not linked", "a partial sum read in S");
    /* op kinds: random, in place */
    IDS(N[ir_].id, N[idr].id);
    expect_refused(g, dg, F(2, 0, 0), "random", "Dropout");
    IDS(N[iu].id, N[iupd].id);
    expect_refused(g, dg, F(2, 0, 0), "in-place", "an optimizer update");
    /* a generator (k = Expand(1, [8,16]) reads only constants) joins an S that slices
     * something, but alone it has nothing to slice */
    IDS(N[ik].id, N[iu].id);
    {
        rw_fission fg = F(2, 0, 0);
        ir_diag dd = {{0}};
        assert_int_equal(rw_fission_check(g, dg, &fg, &dd), IR_OK);
    }
    IDS(N[ik].id);
    expect_refused(g, dg, F(2, 0), "reads no input split", "a generator alone");
    /* apply refuses n < 2 and what the check refuses */
    IDS(N[ia].id, N[ir_].id, N[ic].id, N[is].id, N[it].id, N[ie].id);
    ok.parts = 1;
    assert_null(rw_fission_apply(g, &ok, 1, NULL, NULL, &d));
    assert_non_null(strstr(d.msg, "parts"));
    IDS(N[ir_].id, N[is].id);
    rw_fission nc = F(2, 0, 0);
    assert_null(rw_fission_apply(g, &nc, 1, NULL, NULL, &d));
    assert_non_null(strstr(d.msg, "not convex"));
    /* a fission op is never in another fission's S */
    IDS(N[ia].id, N[ir_].id, N[ic].id, N[is].id, N[it].id, N[ie].id);
    ok.parts = 2;
    ir_graph *one = rw_fission_apply(g, &ok, 1, NULL, NULL, &d);
    if (!one) fail_msg("apply: %s", d.msg);
    rw_dgraph *dg1 = rw_dgraph_build(one);
    for (int i = 0; i < one->n_nodes; i++)
        if (one->nodes[i].op == IR_OP_FissionAssemble) {
            uint32_t two[2] = {one->nodes[i].id, 0};
            int reader = -1;
            for (int j = 0; j < one->n_nodes && reader < 0; j++)
                for (int q2 = 0; q2 < one->nodes[j].n_in; q2++)
                    if (one->nodes[j].in[q2] == one->nodes[i].out[0]) reader = j;
            if (reader < 0) continue;
            two[1] = one->nodes[reader].id;
            if (two[1] < two[0]) two[0] = two[1], two[1] = one->nodes[i].id;
            rw_fission ff = {.ids = two, .n_ids = 2, .seed_id = one->nodes[reader].id, .parts = 2};
            expect_refused(one, dg1, ff, "already part of a fission", "a fission op in S");
            break;
        }
    /* S's nodes are tagged: a second fission over them is refused too */
    rw_fission again = ok;
    expect_refused(one, dg1, again, "already part of a fission", "S split twice");
    /* materialize refuses an order that is not a permutation */
    int *bad_order = calloc((size_t)one->n_nodes, sizeof(int)), *mo = NULL;
    assert_null(rw_fission_materialize(one, bad_order, &mo, &d));
    assert_null(mo);
    assert_non_null(strstr(d.msg, "permutation"));
    free(bad_order);
    rw_dgraph_free(dg1);
    ir_graph_free(one);
    rw_dgraph_free(dg);
    ir_graph_free(g);
#undef F
#undef IDS
}

/* ---------------------------------------------------------------- speed */

/* Generators in S: k = Expand(1, [8,16]) creates the batch from constants, and its sum over the
 * batch (a seed gradient's bias gradient) depends on nothing else. The eager order of the
 * one-copy graph runs that part of S before the group's first slice; its Accumulate must still
 * wait for the slice (the other parts run there), so the materialized graph is valid and
 * measures the one-copy peak:
 *   a = x @ W [8,16]; k = Expand(one, [8,16]); y = Mul(a, k); z = ReduceSum(k, axis 0) [16] */
static void test_generators(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(8, 4)), w = add_input(g, "W", TU_SHAPE(4, 16)), a, k, y, z;
    float onef = 1;
    int64_t shp[2] = {8, 16}, ax0[1] = {0};
    int cone = add_const(g, "one", IR_F32, TU_SCALAR_SHAPE, &onef),
        cshp = add_const(g, "shape", IR_I64, TU_SHAPE(2), shp),
        caxes = add_const(g, "axes0", IR_I64, TU_SHAPE(1), ax0);
    /* the generator first in file order, so that the eager order runs it before any slice */
    tu_add_node1(g, IR_OP_Expand, "k", 2, (int[]){cone, cshp}, 0, NULL, &k);
    ir_attr kd = tu_attr_int("keepdims", 0);
    tu_add_node1(g, IR_OP_ReduceSum, "z", 2, (int[]){k, caxes}, 1, &kd, &z);
    tu_add_node1(g, IR_OP_MatMul, "a", 2, (int[]){x, w}, 0, NULL, &a);
    tu_add_node1(g, IR_OP_Mul, "y", 2, (int[]){a, k}, 0, NULL, &y);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, z);
    ir_diag d = {{0}};
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, x, 0);
    assert_int_equal(rw_dgraph_value_comp(dg, k, 0), comp);
    uint32_t ids[4];
    int cnt = g->n_nodes; /* S is the whole graph: node ids 0..3 */
    assert_int_equal(cnt, 4);
    for (int i = 0; i < cnt; i++) ids[i] = g->nodes[i].id;
    qsort(ids, (size_t)cnt, sizeof *ids, cmp_u32);
    for (int p = 2; p <= 4; p += 2) {
        rw_fission f = make_fission(g, dg, comp, ids, cnt, p);
        char what[64];
        snprintf(what, sizeof what, "generators n=%d", p);
        check_case(g, &f, 1, &comp, dg, what);
        /* z's Accumulate depends on the group's slice, so no valid order runs it first (the
         * memory-minimizing order of a training graph did, before the ordering input) */
        ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
        assert_non_null(one);
        int acc = -1;
        for (int i = 0; i < one->n_nodes; i++)
            if (one->nodes[i].op == IR_OP_FissionAccumulate) acc = i;
        assert_true(acc >= 0);
        bool after_slice = false;
        for (int q = 0; q < one->nodes[acc].n_in; q++) {
            int v = one->nodes[acc].in[q], pr = v >= 0 ? one->values[v].producer : -1;
            after_slice |= pr >= 0 && one->nodes[pr].op == IR_OP_FissionSlice;
        }
        assert_true(after_slice);
        ir_graph_free(one);
    }
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

/* Replicas: t = Identity(W) of a weight W (a layout copy; a Transpose that MatMul reads would be
 * a transposed operand, a view of W without bytes), read only by S = {a = x @ t, r = Relu(a)},
 * joins S (tagged, its shape whole) and each part recomputes it; the materialized graph gives the
 * original's outputs. File order runs t before the slice, where it is held through the other
 * part's replay; sched_sink_resident_readers moves it right before a, and the peak drops by its
 * bytes. Read outside S too (u = Relu(t)), or computed from a produced value, it stays shared. */
static void test_replicas(void **state) {
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        ir_graph *g = ir_graph_new();
        int x = add_input(g, "x", TU_SHAPE(8, 4)), w = add_input(g, "W", TU_SHAPE(4, 16)), t, a, r,
            u, w2;
        if (variant == 2) { /* t = Identity(Relu(W)): not a layout copy of a resident */
            tu_add_node1(g, IR_OP_Relu, "w2", 1, &w, 0, NULL, &w2);
            w = w2;
        }
        tu_add_node1(g, IR_OP_Identity, "t", 1, &w, 0, NULL, &t);
        tu_add_node1(g, IR_OP_MatMul, "a", 2, (int[]){x, t}, 0, NULL, &a);
        tu_add_node1(g, IR_OP_Relu, "r", 1, &a, 0, NULL, &r);
        ir_graph_add_output(g, r);
        if (variant == 1) {
            tu_add_node1(g, IR_OP_Relu, "u", 1, &t, 0, NULL, &u);
            ir_graph_add_output(g, u);
        }
        ir_diag d = {{0}};
        assert_int_equal(ir_graph_validate(g, &d), IR_OK);
        rw_dgraph *dg = rw_dgraph_build(g);
        int comp = rw_dgraph_value_comp(dg, x, 0), it = g->values[t].producer;
        uint32_t ids[2] = {g->nodes[g->values[a].producer].id, g->nodes[g->values[r].producer].id};
        rw_fission f = make_fission(g, dg, comp, ids, 2, 2);
        const char *what[3] = {"replica t", "t read outside S", "t of a computed value"};
        check_case(g, &f, 1, &comp, dg, what[variant]);
        ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
        if (!one) fail_msg("%s: apply: %s", what[variant], d.msg);
        int ot = node_of(one, g->nodes[it].id);
        bool tagged = ir_attr_int(&one->nodes[ot], "magpie_fission_group", -1) == 0;
        assert_int_equal(tagged, variant == 0);
        ir_shape whole = TU_SHAPE(4, 16);
        assert_true(ir_shape_eq(&one->values[one->nodes[ot].out[0]].shape, &whole));
        int *order = sched_eager_order(one), *sunk = sched_eager_order(one);
        if (sched_sink_resident_readers(one, sunk, &d) != IR_OK) fail_msg("sink: %s", d.msg);
        assert_true(sched_order_valid(one, sunk, one->n_nodes));
        int pos_t = -1, pos_a = -1;
        for (int s = 0; s < one->n_nodes; s++) {
            if (sunk[s] == ot) pos_t = s;
            if (one->nodes[sunk[s]].id == ids[0]) pos_a = s;
        }
        sched_memory m0, m1;
        assert_int_equal(sched_memory_compute(one, order, &m0, &d), IR_OK);
        assert_int_equal(sched_memory_compute(one, sunk, &m1, &d), IR_OK);
        if (variant == 0) {
            assert_int_equal(pos_t + 1, pos_a);
            assert_int_equal(m1.peak_bytes + 16 * 4 * sizeof(float), m0.peak_bytes);
            tu_ref ref = {0};
            size_t peak;
            run_reference(g, &ref, what[variant]);
            check_order(one, sunk, &ref, "replica t, sunk", &peak);
            tu_ref_free(&ref);
        } else {
            assert_memory_equal(order, sunk, sizeof(int) * (size_t)one->n_nodes);
        }
        sched_memory_free(&m0);
        sched_memory_free(&m1);
        free(order);
        free(sunk);
        ir_graph_free(one);
        rw_dgraph_free(dg);
        ir_graph_free(g);
    }
}

/* BERT-base's training graph (~1800 nodes; its export fixes batch 1): the biggest clean piece of
 * the forward split along the sequence, applied in milliseconds. */
static void test_apply_speed(void **state) {
    (void)state;
    char path[1024];
    ir_import_opts io = {0};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *b = ir_onnx_load(
        tu_src_path("tests/fixtures/structure/bert_base_encoder.onnx", path, sizeof path), &io, &st,
        &d);
    if (!b) fail_msg("%s", d.msg);
    ir_graph *g = ir_build_training(b, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    rw_dgraph *dg = rw_dgraph_build(g);
    int comp = rw_dgraph_value_comp(dg, g->inputs[0], 1);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    int cnt = pick_s(g, dg, comp, 0, forward_end(g), ids);
    assert_true(cnt >= 10);
    assert_int_equal(rw_dgraph_comp_length(dg, comp), 128);
    rw_fission f = make_fission(g, dg, comp, ids, cnt, 2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!one) fail_msg("apply: %s", d.msg);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("bert: %d nodes, S of %d nodes split in %d, applied in %.1f ms\n", g->n_nodes,
                  cnt, f.parts, ms);
    assert_true(ms < 1000); /* milliseconds; a wide margin for a loaded machine */
    ir_graph_free(one);
    free(ids);
    rw_dgraph_free(dg);
    ir_graph_free(g);
    ir_graph_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_mlp_batch),
        cmocka_unit_test(test_cnn_batch),    cmocka_unit_test(test_transformer),
        cmocka_unit_test(test_remat_inside), cmocka_unit_test(test_swap_inside),
        cmocka_unit_test(test_generators),   cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_apply_speed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
