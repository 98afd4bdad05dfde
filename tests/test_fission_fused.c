/* test_fission_fused.c - a fused FissionAccumulate run as the cost model charges it
 * (ir_graph_fused_parts, ops-fission.c): the producer's kernel adds its part into the
 * accumulate's buffer (ir_kernel_ctx.accumulate, BLAS's beta = 1; beta = 0 for part 0 into an
 * unfilled buffer) and the part owns no buffer.
 *
 * For every producer the fission fuses (MatMul plain and batched, Gemm with transA and alpha,
 * ConvGradWeight dense and depthwise, ReduceSum on its fast and generic paths, GatherGrad), a
 * two-part chain buf -> P(part 0) -> acc0 -> P(part 1) -> acc1:
 *  - in the graph order both parts are fused: the executor's bytes equal sched_memory_compute's at
 *    every step, its peak is the unfused graph's less one part, and the sums pass the float64
 *    check against the unfused graph (`fused` 0);
 *  - in an order that runs part 1's producer before acc0 (the buffer does not hold part 0 yet),
 *    part 1 keeps its buffer and acc1 adds it: the same equalities, the unfused peak, and the
 *    simulator charges acc1 as the kernel the executor runs, acc0 as the epilogue;
 *  - a part with a second reader, or whose buffer a node reads between the producer and the
 *    accumulate, keeps its buffer. */
#include "test-check.h"

#include "rt.h"

enum { K_MATMUL, K_BMM, K_GEMM, K_CGW, K_CGW_DW, K_RSUM0, K_RSUM1, K_RSUM_GEN, K_GATHER, K_N };

static const char *const kind_name[K_N] = {
    "MatMul",           "batched MatMul",           "Gemm transA",
    "ConvGradWeight",   "depthwise ConvGradWeight", "ReduceSum axis 0",
    "ReduceSum axis 1", "ReduceSum axes 0, 2",      "GatherGrad"};

/* The inputs one part's producer reads: shapes, and whether input 1 is int64 indices. */
typedef struct kind_shapes {
    int n_in;
    ir_shape in[2];
    bool indices;
} kind_shapes;

static kind_shapes shapes_of(int kind) {
    switch (kind) {
    case K_MATMUL: return (kind_shapes){2, {TU_SHAPE(6, 5), TU_SHAPE(5, 7)}, false};
    case K_BMM: return (kind_shapes){2, {TU_SHAPE(3, 4, 5), TU_SHAPE(3, 5, 2)}, false};
    case K_GEMM: return (kind_shapes){2, {TU_SHAPE(5, 6), TU_SHAPE(5, 7)}, false};
    case K_CGW: return (kind_shapes){2, {TU_SHAPE(2, 3, 5, 5), TU_SHAPE(2, 4, 3, 3)}, false};
    case K_CGW_DW: return (kind_shapes){2, {TU_SHAPE(2, 4, 5, 5), TU_SHAPE(2, 4, 3, 3)}, false};
    case K_RSUM0:
    case K_RSUM1: return (kind_shapes){1, {TU_SHAPE(4, 6)}, false};
    case K_RSUM_GEN: return (kind_shapes){1, {TU_SHAPE(2, 3, 4)}, false};
    default: return (kind_shapes){2, {TU_SHAPE(5, 3), TU_SHAPE(5)}, true};
    }
}

/* The producer's attributes (in g's arena). */
static int kind_attrs(ir_graph *g, int kind, ir_attr *a) {
    int64_t *v = ir_graph_alloc(g, 8 * sizeof(int64_t));
    switch (kind) {
    case K_GEMM:
        a[0] = tu_attr_int("transA", 1);
        a[1] = tu_attr_float("alpha", 0.5f);
        return 2;
    case K_CGW:
    case K_CGW_DW:
        v[0] = v[1] = 3;
        a[0] = tu_attr_ints("kernel_shape", 2, v);
        a[1] = tu_attr_int("group", kind == K_CGW_DW ? 4 : 1);
        return 2;
    case K_RSUM0:
    case K_RSUM1:
        v[0] = kind == K_RSUM1;
        a[0] = tu_attr_ints("axes", 1, v);
        a[1] = tu_attr_int("keepdims", 0);
        return 2;
    case K_RSUM_GEN:
        v[0] = 0, v[1] = 2;
        a[0] = tu_attr_ints("axes", 2, v);
        a[1] = tu_attr_int("keepdims", 0);
        return 2;
    case K_GATHER:
        v[0] = 7, v[1] = 3;
        a[0] = tu_attr_ints("shape", 2, v);
        a[1] = tu_attr_int("axis", 0);
        return 2;
    default: return 0;
    }
}

static ir_op_kind kind_op(int kind) {
    switch (kind) {
    case K_MATMUL:
    case K_BMM: return IR_OP_MatMul;
    case K_GEMM: return IR_OP_Gemm;
    case K_CGW:
    case K_CGW_DW: return IR_OP_ConvGradWeight;
    case K_GATHER: return IR_OP_GatherGrad;
    default: return IR_OP_ReduceSum;
    }
}

/* The data of every graph input, bound by value id. */
typedef struct bound {
    rt_binding b[4];
    float f[4][256];
    int64_t idx[2][5];
    int n;
} bound;

/* Both parts' inputs of the producer (part 0's first one data), added to g and bound in bd with
 * the same contents on every call (seeded fills, fixed indices). */
static void add_part_inputs(ir_graph *g, const kind_shapes *ks, int in[2][2], bound *bd) {
    bd->n = 0;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < ks->n_in; j++) {
            char nm[16];
            snprintf(nm, sizeof nm, "in%d_p%d", j, k);
            bool ix = ks->indices && j == 1;
            int v = ir_graph_add_value(g, ir_graph_strdup(g, nm), ix ? IR_I64 : IR_F32, &ks->in[j]);
            ir_graph_add_input(g, v);
            if (bd->n == 0) g->values[v].flags |= IR_VF_DATA;
            in[k][j] = v;
            rt_binding *b = &bd->b[bd->n];
            *b = (rt_binding){.value = v, .dtype = ix ? IR_I64 : IR_F32, .shape = ks->in[j]};
            if (ix) {
                static const int64_t rows[2][5] = {{0, 3, 3, 6, -1}, {2, 2, 5, 0, 1}};
                memcpy(bd->idx[k], rows[k], sizeof rows[k]);
                b->data = bd->idx[k];
            } else {
                tu_fill(bd->f[bd->n], ir_shape_numel(&ks->in[j]), 100 + (uint64_t)bd->n);
                b->data = bd->f[bd->n];
            }
            bd->n++;
        }
}

/* buf = FissionBuffer (unfilled); p_k = P(inputs of part k); c0 = acc(buf, p0), c1 = acc(c0, p1),
 * `fused` as given; c1 the output. Nodes: buf 0, P0 1, acc0 2, P1 3, acc1 4. */
static ir_graph *chain(int kind, int fused, bound *bd, int *part) {
    ir_graph *g = ir_graph_new();
    kind_shapes ks = shapes_of(kind);
    int in[2][2];
    add_part_inputs(g, &ks, in, bd);
    ir_attr pa[4];
    int npa = kind_attrs(g, kind, pa);
    /* the buffer's shape: the producer's output, inferred on part 0's inputs */
    int probe;
    int pn = tu_add_node1(g, kind_op(kind), "P0", ks.n_in, in[0], npa, pa, &probe);
    (void)pn;
    const ir_shape os = g->values[probe].shape; /* a copy: g goes */
    const int64_t *dims = os.dims;
    int rank = os.rank;
    ir_graph_free(g); /* rebuilt in node order: buf first */
    g = ir_graph_new();
    add_part_inputs(g, &ks, in, bd);
    npa = kind_attrs(g, kind, pa);
    int64_t *gd = ir_graph_alloc(g, sizeof(int64_t) * (size_t)(rank + 1));
    memcpy(gd, dims, sizeof(int64_t) * (size_t)rank);
    ir_attr ba[] = {tu_attr_ints("shape", rank, gd), tu_attr_int("dtype", IR_F32),
                    tu_attr_int("fill", 0)};
    ir_attr a0[] = {tu_attr_int("parts", 2), tu_attr_int("index", 0), tu_attr_int("fused", fused)};
    ir_attr a1[] = {tu_attr_int("parts", 2), tu_attr_int("index", 1), tu_attr_int("fused", fused)};
    int buf, p0, p1, c0, c1;
    tu_add_node1(g, IR_OP_FissionBuffer, "buf", 0, NULL, 3, ba, &buf);
    tu_add_node1(g, kind_op(kind), "P0", ks.n_in, in[0], npa, pa, &p0);
    tu_add_node1(g, IR_OP_FissionAccumulate, "acc0", 2, (int[]){buf, p0}, 3, a0, &c0);
    tu_add_node1(g, kind_op(kind), "P1", ks.n_in, in[1], npa, pa, &p1);
    tu_add_node1(g, IR_OP_FissionAccumulate, "acc1", 2, (int[]){c0, p1}, 3, a1, &c1);
    ir_graph_add_output(g, c1);
    part[0] = p0;
    part[1] = p1;
    return g;
}

/* Runs g in order and checks the executor against sched_memory_compute at every step. */
static void run_checked(const ir_graph *g, const int *order, const bound *bd, rt_result *r,
                        const char *what) {
    ir_diag d = {{0}};
    rt_options o = {.order = order, .n_order = g->n_nodes, .seed = 5, .poison_freed = true};
    if (rt_run(g, bd->b, bd->n, &o, r, &d) != IR_OK) fail_msg("%s: rt_run: %s", what, d.msg);
    sched_memory m;
    if (sched_memory_compute(g, order, &m, &d) != IR_OK) fail_msg("%s: sched: %s", what, d.msg);
    for (int s = 0; s < m.n_steps; s++)
        if (r->step_bytes[s] != m.step_bytes[s])
            fail_msg("%s, step %d: executor %zu bytes, sched %zu", what, s, r->step_bytes[s],
                     m.step_bytes[s]);
    assert_int_equal(r->peak_bytes, m.peak_bytes);
    sched_memory_free(&m);
}

/* The simulated seconds of acc1 (step 4 in both orders). */
static double acc1_seconds(const ir_graph *g, const int *order) {
    ir_diag d = {{0}};
    prof_model *cost = prof_open("analytic:rtx3090", NULL, NULL, &d);
    if (!cost) fail_msg("%s", d.msg);
    sched_sim s;
    if (sched_simulate(g, order, cost, &s, &d) != IR_OK) fail_msg("simulate: %s", d.msg);
    double t = s.end_s[4] - s.start_s[4];
    sched_sim_free(&s);
    prof_close(cost);
    return t;
}

static void test_fused_producers(void **state) {
    (void)state;
    static const int in_order[] = {0, 1, 2, 3, 4}, late[] = {0, 1, 3, 2, 4};
    const prof_target *t = prof_target_find("rtx3090");
    assert_non_null(t);
    for (int kind = 0; kind < K_N; kind++) {
        bound bf, bp;
        int pf[2], pp[2];
        ir_graph *gf = chain(kind, 1, &bf, pf), *gp = chain(kind, 0, &bp, pp);
        const char *what = kind_name[kind];
        size_t part = ir_value_bytes(&gf->values[pf[1]]);
        for (int k = 0; k < 2; k++)
            if (!ir_fission_accumulate_fused(gf, &gf->nodes[2 + 2 * k]))
                fail_msg("%s: acc%d is not fused", what, k);
        tu_ref ref;
        tu_ref_run(gp, bp.b, bp.n, &(rt_options){.seed = 5}, &ref, what);
        rt_result rp;
        run_checked(gp, in_order, &bp, &rp, what);

        /* the graph order: both parts go straight into the buffer */
        int *root = malloc(sizeof(int) * (size_t)gf->n_values),
            *into = malloc(sizeof(int) * (size_t)gf->n_values);
        assert_non_null(root);
        assert_non_null(into);
        ir_graph_buffer_roots(gf, root);
        assert_true(ir_graph_fused_parts(gf, in_order, in_order, root, into));
        assert_int_equal(into[pf[0]], 2);
        assert_int_equal(into[pf[1]], 4);
        rt_result rf;
        run_checked(gf, in_order, &bf, &rf, what);
        tu_expect_close(&ref, NULL, &rf, what);
        if (rf.peak_bytes + part != rp.peak_bytes)
            fail_msg("%s: fused peak %zu + part %zu, unfused %zu", what, rf.peak_bytes, part,
                     rp.peak_bytes);
        /* end - start: the clocks' rounding, not the cost's */
        double fused_s = acc1_seconds(gf, in_order), epilogue = (double)part / t->mem_bw;
        if (fabs(fused_s - epilogue) > 1e-9 * epilogue)
            fail_msg("%s: acc1 fused %g s, expected %g", what, fused_s, epilogue);
        rt_result_free(&rf);

        /* part 1's producer before acc0: it keeps its buffer, acc1 adds it */
        ir_graph_buffer_roots(gf, root);
        assert_true(ir_graph_fused_parts(gf, late, (int[]){0, 1, 3, 2, 4}, root, into));
        assert_int_equal(into[pf[0]], 2);
        assert_int_equal(into[pf[1]], -1);
        run_checked(gf, late, &bf, &rf, what);
        tu_expect_close(&ref, NULL, &rf, what);
        assert_int_equal(rf.peak_bytes, rp.peak_bytes);
        double late_s = acc1_seconds(gf, late), want = prof_roofline_seconds(t, gp, &gp->nodes[4]);
        if (fabs(late_s - want) > 1e-9 * want)
            fail_msg("%s: acc1 unfused %g s, expected %g", what, late_s, want);
        assert_true(late_s > fused_s);

        rt_result_free(&rf);
        rt_result_free(&rp);
        tu_ref_free(&ref);
        free(root);
        free(into);
        ir_graph_free(gf);
        ir_graph_free(gp);
    }
}

/* The structural view (no order) fuses both; a part with a second reader keeps its buffer. */
static void test_second_reader(void **state) {
    (void)state;
    bound bd;
    int p[2];
    ir_graph *g = chain(K_MATMUL, 1, &bd, p);
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 4));
    int *into = malloc(sizeof(int) * ((size_t)g->n_values + 4));
    assert_non_null(root);
    assert_non_null(into);
    ir_graph_buffer_roots(g, root);
    assert_true(ir_graph_fused_parts(g, NULL, NULL, root, into));
    assert_int_equal(into[p[0]], 2);
    assert_int_equal(into[p[1]], 4);
    assert_int_equal(root[p[1]], root[g->nodes[0].out[0]]);
    int y;
    tu_add_node1(g, IR_OP_Relu, "reader", 1, &p[1], 0, NULL, &y);
    ir_graph_add_output(g, y);
    free(root);
    free(into);
    root = malloc(sizeof(int) * (size_t)g->n_values);
    into = malloc(sizeof(int) * (size_t)g->n_values);
    assert_non_null(root);
    assert_non_null(into);
    ir_graph_buffer_roots(g, root);
    assert_true(ir_graph_fused_parts(g, NULL, NULL, root, into));
    assert_int_equal(into[p[0]], 2);
    assert_int_equal(into[p[1]], -1);
    assert_int_equal(root[p[1]], p[1]);
    free(root);
    free(into);
    ir_graph_free(g);
}

/* A node that reads the buffer between part 0's producer and acc0 needs the buffer without the
 * part (here the zeros of the unfilled buffer, as the executor leaves it): part 0 keeps its own
 * buffer there, part 1 is still fused; bytes as sched_memory_compute says, sums as the unfused
 * graph's. */
static void test_read_between(void **state) {
    (void)state;
    static const int order[] = {0, 1, 5, 2, 3, 4}, pos[] = {0, 1, 3, 4, 5, 2};
    bound bf, bp;
    int pf[2], pp[2];
    ir_graph *gf = chain(K_MATMUL, 1, &bf, pf), *gp = chain(K_MATMUL, 0, &bp, pp);
    int b = gf->nodes[0].out[0], y;
    tu_add_node1(gf, IR_OP_Neg, "reads_buf", 1, &b, 0, NULL, &y);
    ir_graph_add_output(gf, y);
    int *root = malloc(sizeof(int) * (size_t)gf->n_values),
        *into = malloc(sizeof(int) * (size_t)gf->n_values);
    assert_non_null(root);
    assert_non_null(into);
    ir_graph_buffer_roots(gf, root);
    assert_true(ir_graph_fused_parts(gf, order, pos, root, into));
    assert_int_equal(into[pf[0]], -1);
    assert_int_equal(into[pf[1]], 4);
    tu_ref ref;
    tu_ref_run(gp, bp.b, bp.n, &(rt_options){.seed = 5}, &ref, "read between");
    rt_result rf;
    run_checked(gf, order, &bf, &rf, "read between");
    tu_expect_close(&ref, gf, &rf, "read between"); /* the sums, by name */
    const float *nb = rf.outputs[1].data;
    for (int64_t i = 0; i < ir_shape_numel(&rf.outputs[1].shape); i++)
        if (nb[i] != 0.0f)
            fail_msg("the reader saw %g at %lld, not the empty buffer", nb[i], (long long)i);
    rt_result_free(&rf);
    tu_ref_free(&ref);
    free(root);
    free(into);
    ir_graph_free(gf);
    ir_graph_free(gp);
}

/* A float16 MatMul with ir_kernel_ctx.accumulate: ir_node_run widens the output's contents too,
 * so the float32 kernel adds the product to them before the one rounding. */
static void test_accumulate_float16(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(2, 3), ws = TU_SHAPE(3, 2);
    int x = ir_graph_add_value(g, "x", IR_F16, &xs), w = ir_graph_add_value(g, "w", IR_F16, &ws);
    ir_graph_add_input(g, x);
    ir_graph_add_input(g, w);
    int y = ir_graph_add_value(g, "y", IR_F16, NULL);
    int ni = tu_infer_node(g, IR_OP_MatMul, "mm", 2, (int[]){x, w}, 1, &y, 0, NULL);
    const float xf[6] = {1, -2, 0.5f, 3, 0.25f, -1}, wf[6] = {2, 1, -1, 0.5f, 4, -3},
                yf[4] = {10, -20, 0.75f, 6};
    uint16_t xh[6], wh[6], yh[4];
    for (int i = 0; i < 6; i++) xh[i] = ir_f32_to_f16(xf[i]), wh[i] = ir_f32_to_f16(wf[i]);
    for (int i = 0; i < 4; i++) yh[i] = ir_f32_to_f16(yf[i]);
    size_t wsb = ir_node_workspace(g, &g->nodes[ni]);
    void *wsp = aligned_alloc(64, (wsb + 63) / 64 * 64 + 64);
    assert_non_null(wsp);
    ir_tensor in[2] = {{.dtype = IR_F16, .shape = xs, .data = xh},
                       {.dtype = IR_F16, .shape = ws, .data = wh}},
              out = {.dtype = IR_F16, .shape = TU_SHAPE(2, 2), .data = yh};
    ir_diag d = {{0}};
    ir_kernel_ctx k = {.graph = g,
                       .node = &g->nodes[ni],
                       .n_in = 2,
                       .n_out = 1,
                       .in = in,
                       .out = &out,
                       .workspace = wsp,
                       .workspace_bytes = wsb,
                       .accumulate = true,
                       .diag = &d};
    if (ir_node_run(&k) != IR_OK) fail_msg("run: %s", d.msg);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float want = yf[i * 2 + j];
            for (int q = 0; q < 3; q++) want += xf[i * 3 + q] * wf[q * 2 + j];
            assert_float_equal(ir_f16_to_f32(yh[i * 2 + j]), want, 1e-2);
        }
    free(wsp);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_producers),
        cmocka_unit_test(test_second_reader),
        cmocka_unit_test(test_read_between),
        cmocka_unit_test(test_accumulate_float16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
