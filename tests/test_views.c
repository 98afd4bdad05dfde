/* test_views.c - views (DESIGN.md "Views", ir.h ir_value_view_of): which values are views, that
 * they own no bytes and run no kernel in the simulator and the executor alike (measured peak =
 * simulated peak, step by step), that a view keeps its base alive (chains of views, views of
 * residents, a view as graph output), that MatMul and Gemm compute right from transposed
 * operands (against a float64 reference), that an in-place update waits for every reader of a
 * view of what it overwrites and never takes over a view, and that a view is never swapped (its
 * base is, for a late reader of the view, which then reads a view of the Load). */
#include "test-util.h"

#include "rt.h"
#include "rules.h"
#include "schedule.h"

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int add_shape_const(ir_graph *g, const char *name, int n, const int64_t *dims) {
    ir_shape s = tu_shape(1, n);
    int v = ir_graph_add_value(g, name, IR_I64, &s);
    g->values[v].blob = ir_blob_new(sizeof(int64_t) * (size_t)n);
    memcpy(ir_blob_data(g->values[v].blob), dims, sizeof(int64_t) * (size_t)n);
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    return v;
}

static int reshape(ir_graph *g, const char *name, int x, int n, const int64_t *dims) {
    char cn[64];
    snprintf(cn, sizeof cn, "%s.shape", name);
    int out, s = add_shape_const(g, cn, n, dims);
    tu_add_node1(g, IR_OP_Reshape, name, 2, (int[]){x, s}, 0, NULL, &out);
    return out;
}

static int transpose(ir_graph *g, const char *name, int x, int rank, const int64_t *perm) {
    int out;
    ir_attr a = tu_attr_ints("perm", rank, (int64_t *)perm);
    tu_add_node1(g, IR_OP_Transpose, name, 1, &x, perm ? 1 : 0, perm ? &a : NULL, &out);
    return out;
}

static int node1(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in) {
    int out;
    tu_add_node1(g, op, name, n_in, in, 0, NULL, &out);
    return out;
}

/* Seeded data for every graph input (bind[i] for g->inputs[i]; data malloc'd, freed by caller). */
static int bind_all(const ir_graph *g, rt_binding *bind, float **data) {
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        int64_t n = ir_shape_numel(&v->shape);
        data[i] = malloc(sizeof(float) * (size_t)(n ? n : 1));
        tu_fill(data[i], n, 11 + (uint64_t)i);
        bind[i] = (rt_binding){
            .value = g->inputs[i], .dtype = IR_F32, .shape = v->shape, .data = data[i]};
    }
    return g->n_inputs;
}

/* Runs g in order (NULL: graph order) and checks the executor's bytes against the simulator's at
 * every step. */
static void run_checked(const ir_graph *g, const int *order, const rt_binding *b, int nb,
                        rt_result *r) {
    ir_diag d = {{0}};
    int *own = order ? NULL : sched_eager_order(g);
    rt_options o = {.order = order ? order : own, .n_order = g->n_nodes, .poison_freed = true};
    if (rt_run(g, b, nb, &o, r, &d) != IR_OK) fail_msg("rt_run: %s", d.msg);
    sched_memory m;
    if (sched_memory_compute(g, o.order, &m, &d) != IR_OK) fail_msg("sched: %s", d.msg);
    assert_int_equal(r->resident_bytes, m.resident_bytes);
    for (int s = 0; s < m.n_steps; s++)
        if (r->step_bytes[s] != m.step_bytes[s])
            fail_msg("step %d: executor %zu bytes, simulator %zu", s, r->step_bytes[s],
                     m.step_bytes[s]);
    assert_int_equal(r->peak_bytes, m.peak_bytes);
    sched_memory_free(&m);
    free(own);
}

static const float *output_of(const ir_graph *g, const rt_result *r, int v) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return r->outputs[i].data;
    fail_msg("'%s' is no graph output", g->values[v].name);
    return NULL;
}

/* C[b] = op(A[b]) op(B[b]) in float64 from row-major float32 storage: A stored as [M, K] (or
 * [K, M] when ta), B as [K, N] (or [N, K] when tb); sa, sb: each operand's batch stride (0 for a
 * broadcast matrix). */
static void ref_gemm(int nb, int M, int N, int K, const float *A, bool ta, int64_t sa,
                     const float *B, bool tb, int64_t sb, double *C) {
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int p = 0; p < K; p++) {
                    double a = A[b * sa + (ta ? p * M + i : i * K + p)];
                    double x = B[b * sb + (tb ? j * K + p : p * N + j)];
                    s += a * x;
                }
                C[((int64_t)b * M + i) * N + j] = s;
            }
}

static void expect_close(const float *got, const double *want, int64_t n, const char *what) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    if (!(num <= 1e-10 * den)) fail_msg("%s: relative error %g", what, sqrt(num / den));
}

/* ---------------------------------------------------------------- which values are views */

static void test_which_values_are_views(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(2, 3, 4)), w = add_input(g, "W", TU_SHAPE(4, 5));
    int r = reshape(g, "r", x, 2, (int64_t[]){6, 4}); /* a view of a resident */
    int m = node1(g, IR_OP_MatMul, "m", 2, (int[]){r, w});
    int t = transpose(g, "t", m, 2, NULL); /* default perm of rank 2: the last two swapped */
    int p = node1(g, IR_OP_MatMul, "p", 2, (int[]){t, m});
    int c = transpose(g, "c", m, 2, (int64_t[]){1, 0}); /* read by a Relu: a copy */
    int cr = node1(g, IR_OP_Relu, "cr", 1, &c);
    int x3 = transpose(g, "x3", x, 3, (int64_t[]){0, 2, 1}); /* batched, MatMul operand A */
    int q = node1(g, IR_OP_MatMul, "q", 2, (int[]){x3, x});
    int x4 = transpose(g, "x4", x, 3, (int64_t[]){1, 0, 2}); /* not the last two: a copy */
    int q4 = node1(g, IR_OP_MatMul, "q4", 2, (int[]){x4, w});
    int o = transpose(g, "o", m, 2, NULL); /* a graph output: a copy */
    ir_attr ax = tu_attr_ints("axes", 1, (int64_t[]){0});
    int u, s;
    tu_add_node1(g, IR_OP_Unsqueeze, "u", 1, &p, 1, &ax, &u);
    tu_add_node1(g, IR_OP_Squeeze, "s", 1, &u, 1, &ax, &s); /* a view of a view */
    int f = node1(g, IR_OP_Flatten, "f", 1, &s);
    int outs[] = {cr, q, q4, o, f};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ir_graph_add_output(g, outs[i]);
    ir_diag d = {{0}};
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);

    assert_int_equal(ir_value_view_of(g, r), x);
    assert_int_equal(ir_value_view_of(g, t), m);
    assert_int_equal(ir_value_view_of(g, c), -1);
    assert_int_equal(ir_value_view_of(g, x3), x);
    assert_int_equal(ir_value_view_of(g, x4), -1);
    assert_int_equal(ir_value_view_of(g, o), -1);
    assert_int_equal(ir_value_view_of(g, u), p);
    assert_int_equal(ir_value_view_of(g, s), u);
    assert_int_equal(ir_value_view_of(g, f), s);
    assert_int_equal(ir_value_view_of(g, m), -1);

    int *root = malloc(sizeof(int) * (size_t)g->n_values);
    ir_graph_buffer_roots(g, root);
    for (int v = 0; v < g->n_values; v++) {
        /* the bulk roots follow the one-value rule to its end */
        int want = v, b;
        while ((b = ir_value_alias_of(g, want)) >= 0) want = b;
        assert_int_equal(root[v], want);
        if (g->values[v].producer >= 0 && root[v] != v)
            assert_int_equal(sched_value_device_bytes(g, v), 0);
    }
    assert_int_equal(root[f], p);
    assert_int_equal(root[r], x);

    /* a view costs no time; the op run as a kernel would */
    prof_model *cost = tu_analytic_cost();
    const ir_node *tn = &g->nodes[g->values[t].producer], *cn = &g->nodes[g->values[c].producer];
    assert_true(sched_node_seconds(cost, g, root, tn) == 0.0);
    assert_true(sched_node_seconds(cost, g, NULL, tn) == 0.0);
    assert_true(prof_node_seconds(cost, g, tn) > 0.0);
    assert_true(sched_node_seconds(cost, g, root, cn) == prof_node_seconds(cost, g, cn));
    /* the simulated latency is the sum over the nodes that run */
    sched_sim sim;
    assert_int_equal(sched_simulate(g, NULL, cost, &sim, &d), IR_OK);
    double sum = 0;
    for (int i = 0; i < g->n_nodes; i++) sum += sched_node_seconds(cost, g, root, &g->nodes[i]);
    assert_true(fabs(sim.latency_s - sum) <= 1e-12 * sum);
    sched_sim_free(&sim);
    prof_close(cost);

    /* it all executes as the simulator says */
    rt_binding bind[4];
    float *data[4];
    rt_result res;
    run_checked(g, NULL, bind, bind_all(g, bind, data), &res);
    double want[6 * 6];
    /* p = m^T m with m = x (as [6, 4]) W */
    double md[6 * 5];
    ref_gemm(1, 6, 5, 4, data[0], false, 0, data[1], false, 0, md);
    float mf[6 * 5];
    for (int i = 0; i < 30; i++) mf[i] = (float)md[i];
    ref_gemm(1, 5, 5, 6, mf, true, 0, mf, false, 0, want);
    expect_close(output_of(g, &res, f), want, 25, "m^T m through a transposed operand");
    rt_result_free(&res);
    for (int i = 0; i < g->n_inputs; i++) free(data[i]);
    free(root);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- transposed operands */

/* Every way MatMul and Gemm read a transposed operand (A or B, batched or not, folded or not,
 * with Gemm's own trans flags), each against a float64 reference. */
static void test_transposed_operands(void **state) {
    (void)state;
    enum { M = 5, N = 3, K = 4 };
    ir_graph *g = ir_graph_new();
    int a1 = add_input(g, "a1", TU_SHAPE(K, M)), b1 = add_input(g, "b1", TU_SHAPE(K, N));
    int a2 = add_input(g, "a2", TU_SHAPE(2, M, K)), b2 = add_input(g, "b2", TU_SHAPE(2, N, K));
    int b3 = add_input(g, "b3", TU_SHAPE(N, K)), a4 = add_input(g, "a4", TU_SHAPE(2, K, M));
    int c5 = add_input(g, "c5", TU_SHAPE(M, N)), a6 = add_input(g, "a6", TU_SHAPE(M, K));
    int t1 = transpose(g, "t1", a1, 2, NULL);                  /* [M, K] */
    int y1 = node1(g, IR_OP_MatMul, "y1", 2, (int[]){t1, b1}); /* A transposed */
    int t2 = transpose(g, "t2", b2, 3, (int64_t[]){0, 2, 1});  /* [2, K, N] */
    int y2 = node1(g, IR_OP_MatMul, "y2", 2, (int[]){a2, t2}); /* B transposed, batched */
    int t3 = transpose(g, "t3", b3, 2, (int64_t[]){1, 0});     /* [K, N] */
    int y3 = node1(g, IR_OP_MatMul, "y3", 2, (int[]){a2, t3}); /* one B: A's batch folded */
    int t4 = transpose(g, "t4", a4, 3, (int64_t[]){0, 2, 1});  /* [2, M, K] */
    int y4 = node1(g, IR_OP_MatMul, "y4", 2, (int[]){t4, b1}); /* A transposed, one B */
    ir_attr tb = tu_attr_int("transB", 1), ta = tu_attr_int("transA", 1);
    int y5, y6;
    tu_add_node1(g, IR_OP_Gemm, "y5", 3, (int[]){t1, b3, c5}, 1, &tb, &y5); /* t1 b3^T + c5 */
    int t6 = transpose(g, "t6", a6, 2, NULL);                               /* [K, M] */
    tu_add_node1(g, IR_OP_Gemm, "y6", 2, (int[]){t6, b1}, 1, &ta, &y6);     /* t6^T b1 */
    int outs[] = {y1, y2, y3, y4, y5, y6};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ir_graph_add_output(g, outs[i]);
    int views[] = {t1, t2, t3, t4, t6};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        assert_true(ir_value_view_of(g, views[i]) >= 0);
        assert_int_equal(sched_value_device_bytes(g, views[i]), 0);
    }
    rt_binding bind[8];
    float *data[8];
    rt_result res;
    run_checked(g, NULL, bind, bind_all(g, bind, data), &res);
    const float *A1 = data[0], *B1 = data[1], *A2 = data[2], *B2 = data[3], *B3 = data[4],
                *A4 = data[5], *C5 = data[6], *A6 = data[7];
    double want[2 * M * N];
    ref_gemm(1, M, N, K, A1, true, 0, B1, false, 0, want);
    expect_close(output_of(g, &res, y1), want, M * N, "MatMul(A^T, B)");
    ref_gemm(2, M, N, K, A2, false, M * K, B2, true, N * K, want);
    expect_close(output_of(g, &res, y2), want, 2 * M * N, "batched MatMul(A, B^T)");
    ref_gemm(2, M, N, K, A2, false, M * K, B3, true, 0, want);
    expect_close(output_of(g, &res, y3), want, 2 * M * N, "MatMul(batched A, one B^T)");
    ref_gemm(2, M, N, K, A4, true, K * M, B1, false, 0, want);
    expect_close(output_of(g, &res, y4), want, 2 * M * N, "MatMul(batched A^T, one B)");
    ref_gemm(1, M, N, K, A1, true, 0, B3, true, 0, want);
    for (int i = 0; i < M * N; i++) want[i] += C5[i];
    expect_close(output_of(g, &res, y5), want, M * N, "Gemm(A^T, B, transB) + C");
    ref_gemm(1, M, N, K, A6, false, 0, B1, false, 0, want);
    expect_close(output_of(g, &res, y6), want, M * N, "Gemm(transA) of a transposed operand");
    rt_result_free(&res);
    for (int i = 0; i < g->n_inputs; i++) free(data[i]);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- lifetimes */

/* a = Relu(x) viewed three times over (Reshape, Unsqueeze, Flatten) and read through the last
 * view by c after b is allocated: a lives until c, the views own nothing; o = Reshape(b) is a
 * graph output, so b stays to the end. Steps: a, v1, v2, v3, b, c, o. */
static void test_view_lifetimes(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(4, 8));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int v1 = reshape(g, "v1", a, 1, (int64_t[]){32});
    ir_attr ax = tu_attr_ints("axes", 1, (int64_t[]){0});
    int v2, v3;
    tu_add_node1(g, IR_OP_Unsqueeze, "v2", 1, &v1, 1, &ax, &v2);
    tu_add_node1(g, IR_OP_Flatten, "v3", 1, &v2, 0, NULL, &v3);
    int b = node1(g, IR_OP_Neg, "b", 1, &x);
    int c = node1(g, IR_OP_Neg, "c", 1, &v3);
    int o = reshape(g, "o", b, 1, (int64_t[]){32});
    ir_graph_add_output(g, c);
    ir_graph_add_output(g, o);
    sched_memory m;
    ir_diag d = {{0}};
    assert_int_equal(sched_memory_compute(g, NULL, &m, &d), IR_OK);
    const size_t T = 4 * 8 * sizeof(float);
    assert_int_equal(m.lifetimes[a].last_step, 5); /* c reads a's bytes through v3 */
    assert_int_equal(m.lifetimes[b].last_step, m.n_steps);
    size_t want[] = {T, T, T, T, 2 * T, 3 * T, 2 * T};
    for (int s = 0; s < m.n_steps; s++)
        assert_int_equal(m.step_bytes[s] - m.resident_bytes, want[s]);
    for (int s = 0; s < m.n_hotspots; s++) /* views are never hot-spots: they own nothing */
        assert_true(ir_value_view_of(g, m.hotspots[s]) < 0);
    sched_memory_free(&m);
    rt_binding bind[1];
    float *data[1];
    rt_result r;
    run_checked(g, NULL, bind, bind_all(g, bind, data), &r);
    const float *cv = output_of(g, &r, c), *ov = output_of(g, &r, o);
    for (int i = 0; i < 32; i++) {
        assert_true(cv[i] == -(data[0][i] > 0 ? data[0][i] : 0.0f));
        assert_true(ov[i] == -data[0][i]);
    }
    rt_result_free(&r);
    free(data[0]);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- in-place updates */

/* w is a parameter read through two views, wt = Transpose(w) (x @ wt: a transposed operand) and
 * n = Neg(Reshape(w)), and updated in place, w' = SGDUpdate(w, gr). The update must follow the
 * MatMul and the Neg, which read w's bytes, not only the view nodes that read w itself. */
static void test_update_after_view_readers(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(2, 8)), w = add_input(g, "w", TU_SHAPE(4, 8)),
        gr = add_input(g, "gr", TU_SHAPE(4, 8));
    g->values[w].flags |= IR_VF_PARAM;
    int wn;
    ir_attr lr = tu_attr_float("lr", 0.5f);
    tu_add_node1(g, IR_OP_SGDUpdate, "upd", 2, (int[]){w, gr}, 1, &lr, &wn); /* listed first */
    int wt = transpose(g, "wt", w, 2, NULL);
    int v = reshape(g, "v", w, 1, (int64_t[]){32});
    int y = node1(g, IR_OP_MatMul, "y", 2, (int[]){x, wt});
    int n = node1(g, IR_OP_Neg, "n", 1, &v);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, n);
    ir_graph_add_output(g, wn);
    ir_diag d = {{0}};
    assert_int_equal(ir_value_view_of(g, wt), w);
    assert_int_equal(ir_value_inplace_of(g, wn), w);
    assert_int_equal(ir_graph_toposort(g, &d), IR_OK);
    int pu = g->values[wn].producer, py = g->values[y].producer, pn = g->values[n].producer;
    assert_true(pu > py && pu > pn);
    /* topological orders that run the update before a reader of a view are refused */
    int pwt = g->values[wt].producer, pv = g->values[v].producer;
    int bad1[] = {pwt, pv, pn, pu, py}, bad2[] = {pwt, pv, py, pu, pn};
    int good[] = {pwt, pv, py, pn, pu};
    assert_false(sched_order_valid(g, bad1, 5));
    assert_false(sched_order_valid(g, bad2, 5));
    assert_true(sched_order_valid(g, good, 5));
    rt_binding bind[3];
    float *data[3];
    int nb = bind_all(g, bind, data);
    rt_result r;
    rt_options o = {.order = bad1, .n_order = 5};
    assert_int_equal(rt_run(g, bind, nb, &o, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "overwrites in place"));
    run_checked(g, good, bind, nb, &r);
    /* y and n saw the old w, w' is the update */
    double want[2 * 4];
    ref_gemm(1, 2, 4, 8, data[0], false, 0, data[1], true, 0, want);
    expect_close(output_of(g, &r, y), want, 8, "x w^T before the update");
    const float *nv = output_of(g, &r, n), *wv = output_of(g, &r, wn);
    for (int i = 0; i < 32; i++) {
        assert_true(nv[i] == -data[1][i]);
        assert_true(wv[i] == data[1][i] - 0.5f * data[2][i]);
    }
    rt_result_free(&r);
    for (int i = 0; i < nb; i++) free(data[i]);
    ir_graph_free(g);
}

/* An in-place output never takes over a view, nor a value a graph output views: the write would
 * change bytes that another value still shows. It does take over a plain produced value. */
static void test_inplace_never_over_a_view(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(4, 8)), gr = add_input(g, "gr", TU_SHAPE(32));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int av = reshape(g, "av", a, 1, (int64_t[]){32});
    int u1 = node1(g, IR_OP_SGDUpdate, "u1", 2, (int[]){av, gr}); /* over a view */
    int b = node1(g, IR_OP_Neg, "b", 1, &x);
    int bv = reshape(g, "bv", b, 2, (int64_t[]){8, 4}); /* a graph output viewing b */
    int gb = reshape(g, "gb", gr, 2, (int64_t[]){4, 8});
    int u2 = node1(g, IR_OP_SGDUpdate, "u2", 2, (int[]){b, gb});
    int c = node1(g, IR_OP_Neg, "c", 1, &x);
    int u3 = node1(g, IR_OP_SGDUpdate, "u3", 2, (int[]){c, gb}); /* a plain value: taken over */
    int outs[] = {u1, bv, u2, u3};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ir_graph_add_output(g, outs[i]);
    assert_int_equal(ir_value_inplace_of(g, u1), -1);
    assert_int_equal(ir_value_inplace_of(g, u2), -1);
    assert_int_equal(ir_value_inplace_of(g, u3), c);
    assert_true(sched_value_device_bytes(g, u1) > 0);
    assert_true(sched_value_device_bytes(g, u2) > 0);
    assert_int_equal(sched_value_device_bytes(g, u3), 0);
    ir_diag d = {{0}};
    assert_int_equal(ir_graph_toposort(g, &d), IR_OK);
    rt_binding bind[2];
    float *data[2];
    int nb = bind_all(g, bind, data);
    rt_result r;
    run_checked(g, NULL, bind, nb, &r);
    const float *bo = output_of(g, &r, bv), *u1o = output_of(g, &r, u1);
    for (int i = 0; i < 32; i++) {
        assert_true(bo[i] == -data[0][i]); /* b's bytes as they were before u2 */
        double ai = data[0][i] > 0 ? data[0][i] : 0.0;
        assert_true(u1o[i] == (float)(ai - (double)0.01f * data[1][i]));
    }
    rt_result_free(&r);
    for (int i = 0; i < nb; i++) free(data[i]);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- swap and remat */

/* A view owns no bytes to move: swapping it is refused and names its base. Rematerializing it
 * is allowed and free: the copy is a view again, no kernel, no bytes. */
static void test_swap_and_remat_of_a_view(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(4, 8));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int v = reshape(g, "v", a, 1, (int64_t[]){32});
    int b = node1(g, IR_OP_Neg, "b", 1, &v);
    int e = node1(g, IR_OP_Exp, "e", 1, &b);
    int c = node1(g, IR_OP_Add, "c", 2, (int[]){e, v});
    ir_graph_add_output(g, c);
    const ir_node *vn = &g->nodes[g->values[v].producer], *cn = &g->nodes[g->values[c].producer];
    rw_rewrite sw = {.kind = RW_SWAP, .node_id = vn->id, .value = 0, .user_id = cn->id};
    ir_status st;
    ir_diag d = {{0}};
    assert_null(rw_apply(g, &sw, NULL, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "view"));
    rw_rewrite rm = sw;
    rm.kind = RW_REMAT;
    ir_graph *g2 = rw_apply(g, &rm, NULL, NULL, &st, &d);
    if (!g2) fail_msg("remat of a view: %s", d.msg);
    int nviews = 0;
    for (int i = 0; i < g2->n_nodes; i++)
        if (g2->nodes[i].op == IR_OP_Reshape) {
            assert_true(ir_value_view_of(g2, g2->nodes[i].out[0]) >= 0);
            nviews++;
        }
    assert_int_equal(nviews, 2);
    prof_model *cost = tu_analytic_cost();
    sched_sim s1, s2;
    assert_int_equal(sched_simulate(g, NULL, cost, &s1, &d), IR_OK);
    assert_int_equal(sched_simulate(g2, NULL, cost, &s2, &d), IR_OK);
    assert_true(s1.latency_s == s2.latency_s);                    /* the recompute costs nothing */
    assert_int_equal(s1.peak_device_bytes, s2.peak_device_bytes); /* and a holds on anyway */
    sched_sim_free(&s1);
    sched_sim_free(&s2);
    prof_close(cost);
    rt_binding bind[1];
    float *data[1];
    rt_result r;
    run_checked(g2, NULL, bind, bind_all(g2, bind, data), &r);
    rt_result_free(&r);
    free(data[0]);
    ir_graph_free(g2);
    ir_graph_free(g);
}

/* The rewrite of kind that rw_candidates offers for hot-spot a and late reader c, applied; fails
 * the test (naming what) when none is offered or the rewrite is refused. */
static ir_graph *apply_offered(const ir_graph *g, rw_kind kind, int a, int c, const char *what) {
    sched_memory m;
    ir_diag d = {{0}};
    assert_int_equal(sched_memory_compute(g, NULL, &m, &d), IR_OK);
    rw_rewrite cand[64];
    int n = rw_candidates(g, &m, false, cand, 64), found = -1;
    sched_memory_free(&m);
    uint32_t aid = g->nodes[g->values[a].producer].id, cid = g->nodes[g->values[c].producer].id;
    for (int i = 0; i < n; i++)
        if (cand[i].kind == (int)kind && cand[i].node_id == aid && cand[i].user_id == cid)
            found = i;
    if (found < 0) fail_msg("%s: no such candidate", what);
    ir_status st;
    ir_graph *g2 = rw_apply(g, &cand[found], NULL, NULL, &st, &d);
    if (!g2) fail_msg("%s: %s", what, d.msg);
    return g2;
}

/* g and its rewrite g2 (in order, or g2's own when NULL) compute the same bytes: the rewrites
 * here only move, copy or recompute elementwise kernels on the same inputs. */
static void expect_same_outputs(const ir_graph *g, const ir_graph *g2, const int *order) {
    rt_binding bind[1];
    float *data[1];
    rt_result r1, r2;
    bind_all(g, bind, data);
    run_checked(g, NULL, bind, 1, &r1);
    run_checked(g2, order, bind, 1, &r2);
    for (int i = 0; i < g->n_outputs; i++)
        assert_memory_equal(r1.outputs[i].data, r2.outputs[i].data, 64 * sizeof(float));
    rt_result_free(&r1);
    rt_result_free(&r2);
    free(data[0]);
}

/* Swapping a base for a late reader of its view: a = Relu(x) is viewed early (v = Reshape(a),
 * read by e) and read late through v (c = v + ...). The swap candidate of the hot-spot a names c;
 * applied, it stores a, loads it back and views the Load again for c, so a's buffer dies at its
 * early readers; the plan computes the same bytes, at the simulated peak. */
static void test_swap_through_a_view(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(64));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int v = reshape(g, "v", a, 2, (int64_t[]){8, 8});
    int e = node1(g, IR_OP_Neg, "e", 1, &v);
    int f = node1(g, IR_OP_Neg, "f", 1, &x);
    int f2 = node1(g, IR_OP_Relu, "f2", 1, &f);
    int f3 = node1(g, IR_OP_Neg, "f3", 1, &f2);
    int f4 = reshape(g, "f4", f3, 2, (int64_t[]){8, 8});
    int c = node1(g, IR_OP_Add, "c", 2, (int[]){v, f4});
    ir_graph_add_output(g, e);
    ir_graph_add_output(g, c);
    ir_graph *g2 = apply_offered(g, RW_SWAP, a, c, "swap through a view");
    uint32_t aid = g->nodes[g->values[a].producer].id, cid = g->nodes[g->values[c].producer].id;
    ir_diag d = {{0}};
    int c2 = -1, a2 = -1;
    for (int i = 0; i < g2->n_nodes; i++) {
        if (g2->nodes[i].id == cid) c2 = i;
        if (g2->nodes[i].id == aid) a2 = i;
    }
    /* c reads a Reshape of the Load now */
    int vin = g2->nodes[c2].in[0], pv = g2->values[vin].producer;
    assert_int_equal(g2->nodes[pv].op, IR_OP_Reshape);
    int load = g2->values[g2->nodes[pv].in[0]].producer;
    assert_int_equal(g2->nodes[load].op, IR_OP_Load);
    assert_true(ir_value_view_of(g2, vin) >= 0);
    prof_model *cost = tu_analytic_cost();
    int *order = malloc(sizeof(int) * (size_t)g2->n_nodes);
    int *eager = sched_eager_order(g2);
    assert_int_equal(sched_place_swaps(g2, eager, cost, order, &d), IR_OK);
    sched_memory m2;
    assert_int_equal(sched_memory_compute(g2, order, &m2, &d), IR_OK);
    int a_out = g2->nodes[a2].out[0];
    assert_true(m2.lifetimes[a_out].last_step < sched_node_step(g2, &m2, c2));
    sched_memory_free(&m2);
    expect_same_outputs(g, g2, order);
    free(order);
    free(eager);
    prof_close(cost);
    ir_graph_free(g2);
    ir_graph_free(g);
}

/* Recomputing a base for a late reader of its view, as a swap does (a weight gradient reads
 * a forward activation through a Reshape: ViT's LayerNorm outputs): a = Relu(x) is read early
 * by e (an ancestor of c) and late through v = Reshape(a) by c. The remat candidate of the
 * hot-spot a names c; applied, it recomputes a, views the copy again for c and removes the
 * original view, which nobody reads any more; a's buffer dies at e, and the plan computes the
 * same bytes at the simulated peak. Before, a remat had to name a direct reader: the view's
 * Reshape, early, so nothing was freed. */
static void test_remat_through_a_view(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(64));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int e = node1(g, IR_OP_Neg, "e", 1, &a);
    int f = node1(g, IR_OP_Exp, "f", 1, &e);
    int f2 = node1(g, IR_OP_Neg, "f2", 1, &f);
    int f3 = reshape(g, "f3", f2, 2, (int64_t[]){8, 8});
    int v = reshape(g, "v", a, 2, (int64_t[]){8, 8});
    int c = node1(g, IR_OP_Add, "c", 2, (int[]){v, f3});
    ir_graph_add_output(g, c);
    ir_graph *g2 = apply_offered(g, RW_REMAT, a, c, "remat through a view");
    uint32_t aid = g->nodes[g->values[a].producer].id, cid = g->nodes[g->values[c].producer].id;
    ir_diag d = {{0}};
    int c2 = -1, a2 = -1, n_relu = 0, n_reshape = 0;
    for (int i = 0; i < g2->n_nodes; i++) {
        if (g2->nodes[i].id == cid) c2 = i;
        if (g2->nodes[i].id == aid) a2 = i;
        n_relu += g2->nodes[i].op == IR_OP_Relu;
        n_reshape += g2->nodes[i].op == IR_OP_Reshape;
    }
    assert_int_equal(n_relu, 2);    /* a and its recompute */
    assert_int_equal(n_reshape, 2); /* f3, and v over the recompute (the original removed) */
    /* c reads a Reshape of the recompute now, a view */
    int vin = g2->nodes[c2].in[0], pv = g2->values[vin].producer;
    assert_int_equal(g2->nodes[pv].op, IR_OP_Reshape);
    int rc = g2->values[g2->nodes[pv].in[0]].producer;
    assert_int_equal(g2->nodes[rc].op, IR_OP_Relu);
    assert_true(rc != a2);
    assert_true(ir_value_view_of(g2, vin) >= 0);
    sched_memory m2;
    assert_int_equal(sched_memory_compute(g2, NULL, &m2, &d), IR_OK);
    int a_out = g2->nodes[a2].out[0];
    assert_true(m2.lifetimes[a_out].last_step < sched_node_step(g2, &m2, c2));
    sched_memory_free(&m2);
    expect_same_outputs(g, g2, NULL);
    ir_graph_free(g2);
    ir_graph_free(g);
}

/* Swapping a base whose views only a late reader reads: a = Relu(x) is read early by e (an
 * ancestor of c) and late through v = Reshape(a) and t = Transpose(v), a transposed operand of
 * c = MatMul(f, t). The swap for c gives the Load copies of both views, and c reads those: the
 * original views would then compute for nobody (t, no MatMul's operand any more, a copy with a
 * kernel and bytes of its own), which the written plan would not have (the importer drops unread
 * nodes), so the rewrite removes them. De-swapping the Load gives the original graph back. */
static void test_swap_leaves_no_unread_view(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(64));
    int a = node1(g, IR_OP_Relu, "a", 1, &x);
    int e = node1(g, IR_OP_Neg, "e", 1, &a);
    int v = reshape(g, "v", a, 2, (int64_t[]){8, 8});
    int t = transpose(g, "t", v, 2, NULL);
    int f = reshape(g, "f", node1(g, IR_OP_Exp, "f0", 1, &e), 2, (int64_t[]){8, 8});
    int c = node1(g, IR_OP_MatMul, "c", 2, (int[]){f, t});
    ir_graph_add_output(g, e);
    ir_graph_add_output(g, c);
    assert_true(ir_value_view_of(g, t) >= 0);
    uint32_t aid = g->nodes[g->values[a].producer].id, cid = g->nodes[g->values[c].producer].id;
    rw_rewrite sw = {.kind = RW_SWAP, .node_id = aid, .value = 0, .user_id = cid};
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g2 = rw_apply(g, &sw, NULL, NULL, &st, &d);
    if (!g2) fail_msg("swap through two views: %s", d.msg);
    int n_reshape = 0, n_transpose = 0, load = -1;
    for (int i = 0; i < g2->n_nodes; i++) {
        const ir_node *n = &g2->nodes[i];
        bool read = false;
        for (int k = 0; k < n->n_out; k++)
            for (int j = 0; j < g2->n_nodes && !read && n->out[k] >= 0; j++)
                for (int q = 0; q < g2->nodes[j].n_in; q++) read |= g2->nodes[j].in[q] == n->out[k];
        for (int k = 0; k < n->n_out; k++)
            read |= n->out[k] >= 0 && (g2->values[n->out[k]].flags & IR_VF_OUTPUT);
        if (!read) fail_msg("node '%s' (%s) is read by nobody", n->name, ir_op_name(n->op));
        n_reshape += n->op == IR_OP_Reshape;
        n_transpose += n->op == IR_OP_Transpose;
        if (n->op == IR_OP_Transpose) assert_true(ir_value_view_of(g2, n->out[0]) >= 0);
        if (n->op == IR_OP_Load) load = i;
    }
    assert_int_equal(n_reshape, 2); /* f, and v over the Load */
    assert_int_equal(n_transpose, 1);
    assert_true(load >= 0);
    expect_same_outputs(g, g2, NULL);
    /* the inverse: the view's copy reads a again, the Store and the Load go */
    int user = -1;
    for (int i = 0; i < g2->n_nodes; i++)
        for (int q = 0; q < g2->nodes[i].n_in; q++)
            if (g2->nodes[i].in[q] == g2->nodes[load].out[0]) user = i;
    assert_true(user >= 0);
    rw_rewrite ds = {
        .kind = RW_DESWAP, .node_id = g2->nodes[load].id, .user_id = g2->nodes[user].id};
    ir_graph *g3 = rw_apply(g2, &ds, NULL, NULL, &st, &d);
    if (!g3) fail_msg("deswap: %s", d.msg);
    assert_int_equal(g3->n_nodes, g->n_nodes);
    assert_true(ir_graph_hash(g3) == ir_graph_hash(g));
    ir_graph_free(g3);
    ir_graph_free(g2);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- fixtures */

/* The numeric fixtures' training graphs hold every kind of view, so the fixture tests that compare
 * the executor's peak with the simulator's (test_train_fixtures, test_sched_train) exercise them:
 * reshape-like views and transposed operands, views of residents (a weight's W^T), and views that
 * an optimizer update must wait for (their readers read the parameter's old bytes). Here the
 * eager and memory orders of the SGD graph also run at the simulated peak, step for step. */
static void test_fixture_views(void **state) {
    (void)state;
    char path[1024];
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *f =
        ir_onnx_load(tu_src_path("tests/fixtures/numeric/transformer_encoder_train/model.onnx",
                                 path, sizeof path),
                     NULL, &st, &d);
    if (!f) fail_msg("import: %s", d.msg);
    ir_graph *g =
        ir_build_training(f, &(ir_train_opts){.optimizer = IR_OPTIM_SGD, .lr = 0.01}, &st, &d);
    if (!g) fail_msg("training graph: %s", d.msg);
    ir_graph_free(f);
    int *owner = malloc(sizeof(int) * (size_t)g->n_values);
    assert_true(ir_graph_overwriters(g, true, owner));
    int reshapes = 0, operands = 0, of_residents = 0, waited_for = 0;
    for (int v = 0; v < g->n_values; v++) {
        int b = ir_value_view_of(g, v);
        if (b < 0) continue;
        bool tr = g->nodes[g->values[v].producer].op == IR_OP_Transpose;
        operands += tr;
        reshapes += !tr;
        of_residents += g->values[b].producer < 0;
        waited_for += owner[v] >= 0;
    }
    print_message("transformer_encoder_train + SGD: %d reshape-like views, %d transposed operands, "
                  "%d views of residents, %d read before an update\n",
                  reshapes, operands, of_residents, waited_for);
    assert_true(reshapes > 0 && operands > 0 && of_residents > 0 && waited_for > 0);
    int *order = malloc(sizeof(int) * (size_t)g->n_nodes);
    sched_dp_stats ds;
    sched_dp_options o = {.time_budget_s = 600};
    assert_int_equal(sched_order_memory(g, &o, order, &ds, &d), IR_OK);
    for (int k = 0; k < 2; k++) {
        rt_result r;
        rt_options ro = {.order = k ? order : NULL,
                         .n_order = k ? g->n_nodes : 0,
                         .seed = 1,
                         .fill_missing_data = true};
        if (rt_run(g, NULL, 0, &ro, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
        sched_memory m;
        assert_int_equal(sched_memory_compute(g, k ? order : NULL, &m, &d), IR_OK);
        for (int s = 0; s < m.n_steps; s++)
            if (r.step_bytes[s] != m.step_bytes[s])
                fail_msg("order %d, step %d: executor %zu bytes, simulator %zu", k, s,
                         r.step_bytes[s], m.step_bytes[s]);
        assert_int_equal(r.peak_bytes, m.peak_bytes);
        sched_memory_free(&m);
        rt_result_free(&r);
    }
    free(order);
    free(owner);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_values_are_views),
        cmocka_unit_test(test_transposed_operands),
        cmocka_unit_test(test_view_lifetimes),
        cmocka_unit_test(test_update_after_view_readers),
        cmocka_unit_test(test_inplace_never_over_a_view),
        cmocka_unit_test(test_swap_and_remat_of_a_view),
        cmocka_unit_test(test_swap_through_a_view),
        cmocka_unit_test(test_swap_leaves_no_unread_view),
        cmocka_unit_test(test_remat_through_a_view),
        cmocka_unit_test(test_fixture_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
