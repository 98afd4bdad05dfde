/* test_sched_fission.c - in-place outputs over produced values and the accounting of fission
 * groups (schedule.h) against the executor:
 *  - an in-place chain over a FissionBuffer (FissionAssemble k = 0..n-1), run in every valid
 *    order: rt_run's bytes equal sched_memory_compute's step by step, the chain allocates
 *    nothing and its buffer lives until the chain's last use; write-after-read edges over a
 *    produced value; ordering-only inputs get none;
 *  - hand-built fissions (rows of y = Relu(x @ W); a weight-gradient-like x^T @ dy summed over the
 *    batch): the materialized graph, parts one after another, gives the original's outputs, and
 *    its measured peak equals sched_memory_compute of the one-copy graph (one part tagged with
 *    the group and its n) in the corresponding order; the simulated latency of the one-copy
 *    graph equals the materialized one's; hot-spots of a replay peak; the DP scheduler on a
 *    one-copy graph; the same fissions through rw_fission_apply and rw_fission_materialize. */
#include "test-check.h"

#include "rt.h"
#include "rules.h"

static int add_input(ir_graph *g, const char *name, ir_shape s, unsigned flags) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= flags;
    return v;
}

/* Adds node op over in with one fresh float32 output; attrs are the op's own, then the group
 * tags when parts > 0. Returns the output. */
static int node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in, int n_attrs,
                const ir_attr *attrs, int parts) {
    ir_attr a[8];
    int na = 0;
    for (int i = 0; i < n_attrs; i++) a[na++] = attrs[i];
    if (parts > 0) {
        a[na++] = tu_attr_int("magpie_fission_group", 0);
        a[na++] = tu_attr_int("magpie_fission_parts", parts);
    }
    /* the arena keeps the attribute array; its strings are static */
    ir_attr *keep = ir_graph_alloc(g, sizeof(ir_attr) * (size_t)(na ? na : 1));
    memcpy(keep, a, sizeof(ir_attr) * (size_t)na);
    int out;
    tu_add_node1(g, op, ir_graph_strdup(g, name), n_in, in, na, keep, &out);
    return out;
}

static int buffer(ir_graph *g, const char *name, int64_t d0, int64_t d1) {
    int64_t *dims = ir_graph_alloc(g, 2 * sizeof(int64_t));
    dims[0] = d0;
    dims[1] = d1;
    ir_attr a[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_F32)};
    return node(g, IR_OP_FissionBuffer, name, 0, NULL, 2, a, 0);
}

/* slice/assemble attributes: axis, parts, index (accumulate takes the last two) */
#define PART_ATTRS(axis, parts, index)                                                             \
    (ir_attr[]) {                                                                                  \
        tu_attr_int("axis", axis), tu_attr_int("parts", parts), tu_attr_int("index", index)        \
    }

/* Runs g in order (NULL: graph order) and checks the executor against sched_memory_compute,
 * byte for byte at every step. */
static void run_checked(const ir_graph *g, const int *order, const rt_binding *b, int nb,
                        rt_result *r) {
    ir_diag d = {{0}};
    rt_options o = {
        .order = order, .n_order = order ? g->n_nodes : 0, .seed = 3, .poison_freed = true};
    if (rt_run(g, b, nb, &o, r, &d) != IR_OK) fail_msg("rt_run: %s", d.msg);
    sched_memory m;
    if (sched_memory_compute(g, order, &m, &d) != IR_OK) fail_msg("sched: %s", d.msg);
    assert_int_equal(r->resident_bytes, m.resident_bytes);
    for (int s = 0; s < m.n_steps; s++)
        if (r->step_bytes[s] != m.step_bytes[s])
            fail_msg("step %d: executor %zu bytes, sched %zu", s, r->step_bytes[s],
                     m.step_bytes[s]);
    assert_int_equal(r->peak_bytes, m.peak_bytes);
    sched_memory_free(&m);
}

static double latency(const ir_graph *g, const int *order) {
    ir_diag d = {{0}};
    prof_model *cost = prof_open("analytic:rtx3090", NULL, NULL, &d);
    if (!cost) fail_msg("%s", d.msg);
    sched_sim s;
    if (sched_simulate(g, order, cost, &s, &d) != IR_OK) fail_msg("simulate: %s", d.msg);
    double l = s.latency_s;
    sched_sim_free(&s);
    prof_close(cost);
    return l;
}

/* ---------------------------------------------------------------- in-place chains */

/* a = Relu(x [4, 6]); b = FissionBuffer [4, 6]; for i = 0, 1: s_i = FissionSlice(a, b) rows,
 * q_i = Neg(s_i), c_i = FissionAssemble(c_{i-1} (b for i = 0), q_i); y = Sigmoid(c_1). */
enum { CH_RELU, CH_BUF, CH_S0, CH_Q0, CH_C0, CH_S1, CH_Q1, CH_C1, CH_SIG, CH_N };

static ir_graph *chain_graph(int *x, int *b, int *c0, int *c1) {
    ir_graph *g = ir_graph_new();
    *x = add_input(g, "x", TU_SHAPE(4, 6), IR_VF_DATA);
    int a = node(g, IR_OP_Relu, "relu", 1, x, 0, NULL, 0);
    *b = buffer(g, "buf", 4, 6);
    int cur = *b;
    for (int i = 0; i < 2; i++) {
        int s = node(g, IR_OP_FissionSlice, i ? "s1" : "s0", 2, (int[]){a, *b}, 3,
                     PART_ATTRS(0, 2, i), 0);
        int q = node(g, IR_OP_Neg, i ? "q1" : "q0", 1, &s, 0, NULL, 0);
        cur = node(g, IR_OP_FissionAssemble, i ? "c1" : "c0", 2, (int[]){cur, q}, 3,
                   PART_ATTRS(0, 2, i), 0);
        *(i ? c1 : c0) = cur;
    }
    int y = node(g, IR_OP_Sigmoid, "sig", 1, &cur, 0, NULL, 0);
    ir_graph_add_output(g, y);
    return g;
}

typedef struct walk {
    const ir_graph *g;
    rt_binding bind;
    const float *x;
    int order[CH_N], pending[CH_N], n_orders;
    bool used[CH_N];
} walk;

/* Every topological order of the data edges; those sched_order_valid accepts are run. */
static void each_order(walk *w, int depth) {
    const ir_graph *g = w->g;
    if (depth == g->n_nodes) {
        if (!sched_order_valid(g, w->order, g->n_nodes)) return;
        rt_result r;
        run_checked(g, w->order, &w->bind, 1, &r);
        const float *y = r.outputs[0].data;
        for (int i = 0; i < 24; i++) {
            double want = 1.0 / (1.0 + exp(fmax(w->x[i], 0.0)));
            if (fabs(y[i] - want) > 1e-6) fail_msg("y[%d] = %g, expected %g", i, y[i], want);
        }
        rt_result_free(&r);
        w->n_orders++;
        return;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        if (w->used[k]) continue;
        bool ready = true;
        const ir_node *nd = &g->nodes[k];
        for (int i = 0; i < nd->n_in && ready; i++) {
            int p = g->values[nd->in[i]].producer;
            ready = p < 0 || w->used[p];
        }
        if (!ready) continue;
        w->used[k] = true;
        w->order[depth] = k;
        each_order(w, depth + 1);
        w->used[k] = false;
    }
}

static void test_inplace_chain(void **state) {
    (void)state;
    int x, b, c0 = -1, c1 = -1;
    ir_graph *g = chain_graph(&x, &b, &c0, &c1);
    assert_int_equal(g->n_nodes, CH_N);
    assert_int_equal(ir_value_inplace_of(g, c0), b);
    assert_int_equal(ir_value_inplace_of(g, c1), c0);
    assert_int_equal(sched_value_device_bytes(g, c0), 0);
    assert_int_equal(sched_value_device_bytes(g, c1), 0);
    float xd[24];
    tu_fill(xd, 24, 11);

    /* Graph order, derived by hand (x, a, b: 96 bytes each; parts 48): 192, 288, 336, 384 (s0
     * freed after q0), 336 (c0 allocates nothing; q0 freed), 336 (a freed after s1), 288, 240,
     * 288 (y; the buffer is freed after Sigmoid, its chain's last use). s1 reads the buffer
     * after c0 wrote it: an ordering-only input, so the order is valid. */
    static const size_t want[CH_N] = {192, 288, 336, 384, 336, 336, 288, 240, 288};
    rt_result r;
    rt_binding bind = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(4, 6), .data = xd};
    run_checked(g, NULL, &bind, 1, &r);
    for (int s = 0; s < CH_N; s++) assert_int_equal(r.step_bytes[s], want[s]);
    rt_result_free(&r);
    sched_memory m;
    assert_int_equal(sched_memory_compute(g, NULL, &m, NULL), IR_OK);
    assert_int_equal(m.lifetimes[b].last_step, CH_SIG);
    assert_int_equal(m.peak_step, CH_Q0);
    sched_memory_free(&m);

    /* every valid order: measured == computed, outputs right */
    walk w = {.g = g, .bind = bind, .x = xd};
    each_order(&w, 0);
    /* relu and buf in either order, then s1 -> q1 interleaved into s0 -> q0 -> c0 before c1:
     * 2 * C(5, 2) = 20 (no write-after-read edge: the slices read the buffer for order only) */
    assert_int_equal(w.n_orders, 20);
    ir_graph_free(g);
}

/* b = Relu(x); p = Neg(x); c = FissionAccumulate(b, p) writes over b; e = Exp(b) needs the old b:
 * it must run first (a write-after-read edge over a produced value). */
static void test_war_over_produced(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(2, 3), IR_VF_DATA);
    int b = node(g, IR_OP_Relu, "relu", 1, &x, 0, NULL, 0);
    int p = node(g, IR_OP_Neg, "neg", 1, &x, 0, NULL, 0);
    int e = node(g, IR_OP_Exp, "exp", 1, &b, 0, NULL, 0);
    int c =
        node(g, IR_OP_FissionAccumulate, "acc", 2, (int[]){b, p}, 2, PART_ATTRS(0, 2, 0) + 1, 0);
    ir_graph_add_output(g, c);
    ir_graph_add_output(g, e);
    assert_int_equal(ir_value_inplace_of(g, c), b);
    static const int bad[] = {0, 1, 3, 2}, good[] = {0, 2, 1, 3};
    assert_false(sched_order_valid(g, bad, 4));
    assert_true(sched_order_valid(g, good, 4));
    ir_diag d = {{0}};
    sched_memory m;
    assert_int_equal(sched_memory_compute(g, bad, &m, &d), IR_ERR_INVALID);
    rt_result r;
    rt_options ro = {.order = bad, .n_order = 4, .fill_missing_data = true};
    assert_int_equal(rt_run(g, NULL, 0, &ro, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "overwrites in place"));

    int order[4];
    assert_int_equal(sched_order_memory(g, NULL, order, NULL, &d), IR_OK);
    assert_true(sched_order_valid(g, order, 4));
    float xd[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
    rt_binding bind = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(2, 3), .data = xd};
    run_checked(g, order, &bind, 1, &r);
    const float *co = r.outputs[0].data, *eo = r.outputs[1].data;
    for (int i = 0; i < 6; i++) {
        float rl = xd[i] > 0 ? xd[i] : 0;
        assert_true(co[i] == rl - xd[i]);
        assert_true(fabsf(eo[i] - expf(rl)) <= 1e-6f * expf(rl));
    }
    /* 24-byte tensors: residents 24; b, p and e live at once, c allocates nothing */
    assert_int_equal(r.peak_bytes, 24 + 3 * 24);
    rt_result_free(&r);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- one copy vs materialized */

/* x [8, 16], W [16, 12]; z = Relu(x), w = ReduceSum(z) (all axes; a graph output); y = Relu(x @ W).
 * kind 0: the original (z, w, mm, relu). kind 1: the one-copy graph of y split along rows into
 * n parts: buf, z, slice (part n-1), w, mm, relu, assemble, the part tagged group 0 with n.
 * kind 2: its materialization, untagged: buf, z, parts 0..n-2 (slice, mm, relu, assemble), then
 * the last part in the one-copy's order. The graph order is the order used. */
static ir_graph *rows_graph(int kind, int n, int *x, int *w_in, int *ids) {
    ir_graph *g = ir_graph_new();
    *x = add_input(g, "x", TU_SHAPE(8, 16), IR_VF_DATA);
    *w_in = add_input(g, "W", TU_SHAPE(16, 12), IR_VF_PARAM);
    int buf = kind ? buffer(g, "buf", 8, 12) : -1;
    int z = node(g, IR_OP_Relu, "z", 1, x, 0, NULL, 0);
    int cur = buf, wsum = -1, s = -1, m = -1, y = -1;
    for (int i = kind == 2 ? 0 : n - 1; i < n; i++) {
        char nm[4][24];
        snprintf(nm[0], 24, "slice%d", i);
        snprintf(nm[1], 24, "mm%d", i);
        snprintf(nm[2], 24, "relu%d", i);
        snprintf(nm[3], 24, "asm%d", i);
        int tag = kind == 1 ? n : 0, last = i == n - 1;
        s = kind ? node(g, IR_OP_FissionSlice, nm[0], 2, (int[]){*x, buf}, 3, PART_ATTRS(0, n, i),
                        tag)
                 : *x;
        if (last) wsum = node(g, IR_OP_ReduceSum, "w", 1, &z, 0, NULL, 0);
        m = node(g, IR_OP_MatMul, nm[1], 2, (int[]){s, *w_in}, 0, NULL, tag);
        y = node(g, IR_OP_Relu, nm[2], 1, &m, 0, NULL, tag);
        if (kind)
            y = cur = node(g, IR_OP_FissionAssemble, nm[3], 2, (int[]){cur, y}, 3,
                           PART_ATTRS(0, n, i), tag);
    }
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, wsum);
    if (ids) ids[0] = buf, ids[1] = z, ids[2] = s, ids[3] = m;
    return g;
}

/* The original graph's float32 and float64 runs on bindings b (rt_run's default options). */
static void run_reference(const ir_graph *g, const rt_binding *b, int nb, tu_ref *ref) {
    tu_ref_run(g, b, nb, NULL, ref, "original");
}

static void test_rows_fission(void **state) {
    (void)state;
    float xd[128], wd[192];
    tu_fill(xd, 128, 21);
    tu_fill(wd, 192, 22);
    static const int ns[] = {2, 4, 8};
    for (int t = 0; t < 3; t++) {
        int n = ns[t], x, w, ids[4];
        ir_graph *orig = rows_graph(0, n, &x, &w, NULL), *one = rows_graph(1, n, &x, &w, ids),
                 *mat = rows_graph(2, n, &x, &w, NULL);
        rt_binding b[] = {{.value = x, .dtype = IR_F32, .shape = TU_SHAPE(8, 16), .data = xd},
                          {.value = w, .dtype = IR_F32, .shape = TU_SHAPE(16, 12), .data = wd}};
        rt_result rm;
        tu_ref ro;
        ir_diag d = {{0}};
        run_reference(orig, b, 2, &ro);
        run_checked(mat, NULL, b, 2, &rm); /* plain graph: executor == sched as ever */
        tu_expect_close(&ro, NULL, &rm, "rows, materialized");

        /* The one copy's peak is the materialized graph's, measured. By hand: residents 1280
         * (x 512, W 768); at the slice (t0) the buffer (384) and z (512) are live, and the
         * replay peaks at a part's MatMul: its slice (8/n rows of 16) and product (of 12). */
        sched_memory m;
        assert_int_equal(sched_memory_compute(one, NULL, &m, &d), IR_OK);
        size_t want = 1280 + 384 + 512 + (size_t)(8 / n) * (16 + 12) * 4;
        assert_int_equal(m.peak_bytes, want);
        assert_int_equal(rm.peak_bytes, want);
        assert_int_equal(m.peak_step, 2);
        /* hot-spots at that replay peak: x, W, the buffer, z, and the part's slice and product */
        int hs[] = {x, w, ids[0], ids[1], ids[2], ids[3]};
        assert_int_equal(m.n_hotspots, 6);
        for (int i = 0; i < 6; i++) assert_int_equal(m.hotspots[i], hs[i]);
        sched_memory_free(&m);
        /* Without the tags the same graph peaks lower (at w: the slice, not the part's MatMul,
         * is live with z): the replay is what the n-1 other parts add. */
        ir_graph *plain = rows_graph(1, n, &x, &w, NULL);
        for (int i = 0; i < plain->n_nodes; i++)
            for (int k = 0; k < plain->nodes[i].n_attrs; k++)
                if (strcmp(plain->nodes[i].attrs[k].name, "magpie_fission_parts") == 0)
                    plain->nodes[i].attrs[k].i = 1; /* one part: no group */
        size_t untagged = 1280 + 384 + 512 + (size_t)(8 / n) * 16 * 4 + 4;
        assert_int_equal(tu_peak(plain, NULL), untagged);
        assert_true(untagged < want);

        /* latency: one copy with a repeat count == the n parts */
        double lo = latency(one, NULL), lm = latency(mat, NULL), lp = latency(plain, NULL);
        if (fabs(lo - lm) > 1e-12 * lm)
            fail_msg("n=%d: one copy %.17g s, materialized %.17g", n, lo, lm);
        assert_true(lp < lo);
        tu_ref_free(&ro);
        rt_result_free(&rm);
        ir_graph_free(plain);
        ir_graph_free(orig);
        ir_graph_free(one);
        ir_graph_free(mat);
    }
}

/* Every node runs once for its cost; the n-1 other parts of the group run as one block of
 * (n-1) x the group's cost on the compute stream right before its first slice. */
static void test_sim_durations(void **state) {
    (void)state;
    int x, w;
    ir_graph *g = rows_graph(1, 4, &x, &w, NULL);
    ir_diag d = {{0}};
    prof_model *cost = prof_open("analytic:rtx3090", NULL, NULL, &d);
    assert_non_null(cost);
    sched_sim s;
    assert_int_equal(sched_simulate(g, NULL, cost, &s, &d), IR_OK);
    int tagged = 0, first_slice = -1;
    double group = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool in_group = ir_attr_int(nd, "magpie_fission_parts", 1) > 1;
        tagged += in_group;
        if (in_group) group += prof_node_seconds(cost, g, nd);
        if (first_slice < 0 && nd->op == IR_OP_FissionSlice) first_slice = i;
        double want = prof_node_seconds(cost, g, nd), got = s.end_s[i] - s.start_s[i];
        if (fabs(got - want) > 1e-12 * want) fail_msg("%s: %g s, expected %g", nd->name, got, want);
    }
    assert_int_equal(tagged, 4);
    assert_true(first_slice > 0);
    /* the eager order runs the nodes in index order, each right after the one before */
    double gap = s.start_s[first_slice] - s.end_s[first_slice - 1];
    if (fabs(gap - 3 * group) > 1e-12 * group)
        fail_msg("block before the first slice: %g s, expected %g", gap, 3 * group);
    sched_sim_free(&s);
    prof_close(cost);
    ir_graph_free(g);
}

/* dW = x^T @ dy (x [8, 16], dy [8, 12]) split along the batch, the reduce axis, into n parts that
 * accumulate. kind 0 original, 1 one copy (part n-1 tagged), 2 materialized, as rows_graph. */
static ir_graph *wgrad_graph(int kind, int n, int *x, int *dy) {
    ir_graph *g = ir_graph_new();
    *x = add_input(g, "x", TU_SHAPE(8, 16), IR_VF_DATA);
    *dy = add_input(g, "dy", TU_SHAPE(8, 12), 0);
    int acc = kind ? buffer(g, "acc", 16, 12) : -1, cur = acc, out = -1;
    static int64_t perm[] = {1, 0};
    ir_attr ta[] = {tu_attr_ints("perm", 2, perm)};
    for (int i = kind == 2 ? 0 : n - 1; i < n; i++) {
        char nm[5][24];
        snprintf(nm[0], 24, "sx%d", i);
        snprintf(nm[1], 24, "sdy%d", i);
        snprintf(nm[2], 24, "t%d", i);
        snprintf(nm[3], 24, "mm%d", i);
        snprintf(nm[4], 24, "acc%d", i);
        int tag = kind == 1 ? n : 0;
        int sx = kind ? node(g, IR_OP_FissionSlice, nm[0], 2, (int[]){*x, acc}, 3,
                             PART_ATTRS(0, n, i), tag)
                      : *x;
        int sdy = kind ? node(g, IR_OP_FissionSlice, nm[1], 2, (int[]){*dy, acc}, 3,
                              PART_ATTRS(0, n, i), tag)
                       : *dy;
        int t = node(g, IR_OP_Transpose, nm[2], 1, &sx, 1, ta, tag);
        out = node(g, IR_OP_MatMul, nm[3], 2, (int[]){t, sdy}, 0, NULL, tag);
        if (kind)
            out = cur = node(g, IR_OP_FissionAccumulate, nm[4], 2, (int[]){cur, out}, 2,
                             PART_ATTRS(0, n, i) + 1, tag);
    }
    ir_graph_add_output(g, out);
    return g;
}

static void test_wgrad_fission(void **state) {
    (void)state;
    float xd[128], dyd[96];
    tu_fill(xd, 128, 31);
    tu_fill(dyd, 96, 32);
    static const int ns[] = {2, 4, 8};
    for (int t = 0; t < 3; t++) {
        int n = ns[t], x, dy;
        ir_graph *orig = wgrad_graph(0, n, &x, &dy), *one = wgrad_graph(1, n, &x, &dy),
                 *mat = wgrad_graph(2, n, &x, &dy);
        rt_binding b[] = {{.value = x, .dtype = IR_F32, .shape = TU_SHAPE(8, 16), .data = xd},
                          {.value = dy, .dtype = IR_F32, .shape = TU_SHAPE(8, 12), .data = dyd}};
        rt_result rm;
        tu_ref ro;
        run_reference(orig, b, 2, &ro);
        run_checked(mat, NULL, b, 2, &rm);
        tu_expect_close(&ro, NULL, &rm, "weight gradient, materialized"); /* another sum order */
        /* By hand: residents 896 (x 512, dy 384), the accumulator 768; a part's replay peaks at
         * its MatMul: the slice of dy and the transposed slice of x (8/n rows of 12 and 16; the
         * slice of x died at the Transpose) and the [16, 12] product. */
        size_t want = 896 + 768 + (size_t)(8 / n) * (12 + 16) * 4 + 768;
        assert_int_equal(tu_peak(one, NULL), want);
        assert_int_equal(rm.peak_bytes, want);
        double lo = latency(one, NULL), lm = latency(mat, NULL);
        if (fabs(lo - lm) > 1e-12 * lm)
            fail_msg("n=%d: one copy %.17g s, materialized %.17g", n, lo, lm);
        tu_ref_free(&ro);
        rt_result_free(&rm);
        ir_graph_free(orig);
        ir_graph_free(one);
        ir_graph_free(mat);
    }
}

/* The memory DP orders a one-copy graph into a valid order whose reported peak is
 * sched_memory_compute's, never above the eager order's. */
static void test_dp_on_one_copy(void **state) {
    (void)state;
    int x, w;
    ir_graph *g = rows_graph(1, 4, &x, &w, NULL);
    int order[16];
    sched_dp_stats st;
    ir_diag d = {{0}};
    if (sched_order_memory(g, NULL, order, &st, &d) != IR_OK) fail_msg("%s", d.msg);
    assert_true(sched_order_valid(g, order, g->n_nodes));
    size_t peak = tu_peak(g, order);
    assert_int_equal(st.peak_bytes, peak);
    assert_true(peak <= tu_peak(g, NULL));
    ir_graph_free(g);
}

/* The same fissions through the real builder (rules.h): S = {MatMul, Relu} of rows_graph's
 * original split along the rows (seed: the MatMul's output dim 0), and S = {Transpose, MatMul} of
 * wgrad_graph's split along the batch (seed: the MatMul's reduce axis); rw_fission_apply's
 * one-copy graph in its eager order, rw_fission_materialize's graph run in the order it gives:
 * the original's outputs, and the measured peak and simulated latency that the one-copy graph's
 * accounting gives. */
static void check_builder(const ir_graph *g, uint32_t a_id, uint32_t b_id, int seed_dim, int n,
                          const rt_binding *bind) {
    ir_diag d = {{0}};
    uint32_t ids[] = {a_id, b_id};
    rw_fission f = {.ids = ids, .n_ids = 2, .seed_id = b_id, .seed_dim = seed_dim, .parts = n};
    rw_dgraph *dg = rw_dgraph_build(g);
    assert_non_null(dg);
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("check: %s", d.msg);
    ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
    if (!one) fail_msg("apply: %s", d.msg);
    int *order = sched_eager_order(one), *morder = NULL;
    ir_graph *mat = rw_fission_materialize(one, order, &morder, &d);
    if (!mat) fail_msg("materialize: %s", d.msg);
    rt_result rm;
    tu_ref ro;
    run_reference(g, bind, 2, &ro);
    rt_binding mb[2];
    for (int i = 0; i < 2; i++) {
        mb[i] = bind[i];
        mb[i].value = ir_graph_find_value(mat, g->values[bind[i].value].name);
    }
    run_checked(mat, morder, mb, 2, &rm);
    tu_expect_close(&ro, NULL, &rm, "builder, materialized");
    assert_int_equal(rm.peak_bytes, tu_peak(one, order));
    double lo = latency(one, order), lm = latency(mat, morder);
    if (fabs(lo - lm) > 1e-12 * lm) fail_msg("one copy %.17g s, materialized %.17g", lo, lm);
    tu_ref_free(&ro);
    rt_result_free(&rm);
    free(order);
    free(morder);
    ir_graph_free(mat);
    ir_graph_free(one);
    rw_dgraph_free(dg);
}

static void test_through_builder(void **state) {
    (void)state;
    float xd[128], wd[192], dyd[96];
    tu_fill(xd, 128, 41);
    tu_fill(wd, 192, 42);
    tu_fill(dyd, 96, 43);
    for (int n = 2; n <= 4; n += 2) {
        int x, w;
        ir_graph *g = rows_graph(0, n, &x, &w, NULL); /* z, w, mm, relu */
        rt_binding b[] = {{.value = x, .dtype = IR_F32, .shape = TU_SHAPE(8, 16), .data = xd},
                          {.value = w, .dtype = IR_F32, .shape = TU_SHAPE(16, 12), .data = wd}};
        check_builder(g, g->nodes[2].id, g->nodes[3].id, 0, n, b);
        ir_graph_free(g);
        int dy;
        g = wgrad_graph(0, n, &x, &dy); /* t, mm */
        rt_binding b2[] = {{.value = x, .dtype = IR_F32, .shape = TU_SHAPE(8, 16), .data = xd},
                           {.value = dy, .dtype = IR_F32, .shape = TU_SHAPE(8, 12), .data = dyd}};
        check_builder(g, g->nodes[0].id, g->nodes[1].id, -1, n, b2);
        ir_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inplace_chain),   cmocka_unit_test(test_war_over_produced),
        cmocka_unit_test(test_rows_fission),    cmocka_unit_test(test_sim_durations),
        cmocka_unit_test(test_wgrad_fission),   cmocka_unit_test(test_dp_on_one_copy),
        cmocka_unit_test(test_through_builder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
