/* test_exec_memory.c - the executor against the simulator: on hand-built and random graphs run in
 * several orders, rt_run's measured peak and per-step bytes equal sched_memory_compute's to the
 * byte (DESIGN.md decision 2); outputs are right; bad orders, bindings and ops are refused with
 * messages that name the culprit; seeded weights are deterministic. */
#include "test-util.h"

#include "rt.h"
#include "schedule.h"

/* Skips the test when another engineer's op file has not landed yet. */
#define NEED_OP(op)                                                                                \
    do {                                                                                           \
        if (!ir_op_get(op) || !ir_op_get(op)->kernel) {                                            \
            print_message("op %s not available yet: skipped\n", #op);                              \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static int add_input(ir_graph *g, const char *name, ir_dtype t, ir_shape s, unsigned flags) {
    int v = ir_graph_add_value(g, name, t, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= flags;
    return v;
}

static int add_const(ir_graph *g, const char *name, ir_dtype t, ir_shape s, const void *data) {
    int v = ir_graph_add_value(g, name, t, &s);
    size_t bytes = ir_value_bytes(&g->values[v]);
    g->values[v].blob = ir_blob_new(bytes);
    if (bytes) memcpy(ir_blob_data(g->values[v].blob), data, bytes);
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
    return v;
}

/* Adds a node with n_out fresh outputs named NAME.0, NAME.1, ... and infers them; returns the id
 * of the first output. */
static int add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                    int n_out, int n_attrs, const ir_attr *attrs) {
    int out[8];
    tu_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    return out[0];
}

/* Runs g in order and checks the measurement against the simulation, byte for byte. */
static void run_checked(const ir_graph *g, const int *order, const rt_binding *b, int nb,
                        rt_result *r) {
    ir_diag d = {{0}};
    rt_options o = {.order = order, .n_order = g->n_nodes, .seed = 7, .poison_freed = true};
    ir_status st = rt_run(g, b, nb, &o, r, &d);
    if (st != IR_OK) fail_msg("rt_run: %s", d.msg);
    sched_memory m;
    if (sched_memory_compute(g, order, &m, &d) != IR_OK) fail_msg("sched: %s", d.msg);
    assert_int_equal(r->n_steps, m.n_steps);
    assert_int_equal(r->resident_bytes, m.resident_bytes);
    for (int s = 0; s < m.n_steps; s++)
        if (r->step_bytes[s] != m.step_bytes[s])
            fail_msg("step %d: executor %zu bytes, simulator %zu", s, r->step_bytes[s],
                     m.step_bytes[s]);
    assert_int_equal(r->peak_bytes, m.peak_bytes);
    sched_memory_free(&m);
}

static float xdata[6] = {-1.5f, 2.0f, -0.25f, 3.0f, 0.0f, -4.0f};

/* x -> Relu -> a; x -> Neg -> b; Add(a, b) -> y */
static ir_graph *diamond(int *x_out) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", IR_F32, TU_SHAPE(2, 3), IR_VF_DATA);
    int a = add_node(g, IR_OP_Relu, "relu", 1, &x, 1, 0, NULL);
    int b = add_node(g, IR_OP_Neg, "neg", 1, &x, 1, 0, NULL);
    int y = add_node(g, IR_OP_Add, "add", 2, (int[]){a, b}, 1, 0, NULL);
    ir_graph_add_output(g, y);
    *x_out = x;
    return g;
}

static void test_diamond(void **state) {
    NEED_OP(IR_OP_Relu);
    NEED_OP(IR_OP_Neg);
    NEED_OP(IR_OP_Add);
    int x;
    ir_graph *g = diamond(&x);
    rt_binding b = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(2, 3), .data = xdata};
    const int orders[2][3] = {{0, 1, 2}, {1, 0, 2}};
    for (int k = 0; k < 2; k++) {
        rt_result r;
        run_checked(g, orders[k], &b, 1, &r);
        assert_int_equal(r.resident_bytes, 24);
        assert_int_equal(r.step_bytes[0], 48);
        assert_int_equal(r.step_bytes[1], 72);
        assert_int_equal(r.step_bytes[2], 96);
        assert_int_equal(r.peak_bytes, 96);
        assert_int_equal(r.n_outputs, 1);
        const float *y = r.outputs[0].data;
        for (int i = 0; i < 6; i++) assert_true(y[i] == (xdata[i] > 0 ? 0.0f : -xdata[i]));
        rt_result_free(&r);
        rt_result_free(&r); /* idempotent */
    }
    /* hot-spots at the peak (step 2): x, a, b, y */
    sched_memory m;
    assert_int_equal(sched_memory_compute(g, NULL, &m, NULL), IR_OK);
    assert_int_equal(m.peak_step, 2);
    assert_int_equal(m.n_hotspots, 4);
    assert_int_equal(m.lifetimes[x].def_step, -1);
    assert_int_equal(m.lifetimes[x].last_step, 3);
    sched_memory_free(&m);
    sched_memory_free(&m);
    ir_graph_free(g);
}

/* A chain with an unused output, a constant weight and a Conv that needs workspace:
 * x -> Split -> (p, q unused); p -> Conv(W) -> c -> Relu -> y; also outputs x and W directly. */
static void test_chain_unused_workspace(void **state) {
    NEED_OP(IR_OP_Split);
    NEED_OP(IR_OP_Conv);
    NEED_OP(IR_OP_Relu);
    ir_graph *g = ir_graph_new();
    float xin[2 * 2 * 5 * 5], w[3 * 2 * 3 * 3];
    tu_fill(xin, 100, 1);
    tu_fill(w, 54, 2);
    int x = add_input(g, "x", IR_F32, TU_SHAPE(2, 2, 5, 5), IR_VF_DATA);
    int W = add_const(g, "W", IR_F32, TU_SHAPE(3, 2, 3, 3), w);
    int unused = add_const(g, "unused_const", IR_F32, TU_SHAPE(100), xin);
    (void)unused;
    ir_attr sa = tu_attr_int("axis", 0);
    int p = add_node(g, IR_OP_Split, "split", 1, &x, 2, 1, &sa);
    static int64_t pads[] = {1, 1, 1, 1}, ks[] = {3, 3};
    ir_attr ca[2] = {tu_attr_ints("pads", 4, pads), tu_attr_ints("kernel_shape", 2, ks)};
    int c = add_node(g, IR_OP_Conv, "conv", 2, (int[]){p, W}, 1, 2, ca);
    int y = add_node(g, IR_OP_Relu, "relu", 1, &c, 1, 0, NULL);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, x);
    ir_graph_add_output(g, W);
    size_t ws = ir_node_workspace(g, &g->nodes[1]);
    assert_true(ws > 0);
    rt_binding b = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(2, 2, 5, 5), .data = xin};
    rt_result r;
    run_checked(g, NULL, &b, 1, &r);
    size_t xb = 100 * 4, wb = 54 * 4, half = 50 * 4, cb = 75 * 4;
    assert_int_equal(r.resident_bytes, xb + wb); /* the unused constant is not on the device */
    assert_int_equal(r.step_bytes[0], xb + wb + 2 * half);
    assert_int_equal(r.step_bytes[1], xb + wb + half + cb + ws); /* q was freed at its step */
    assert_int_equal(r.step_bytes[2], xb + wb + cb + cb);
    assert_int_equal(r.n_outputs, 3);
    assert_memory_equal(r.outputs[1].data, xin, xb);
    assert_memory_equal(r.outputs[2].data, w, wb);
    /* reference convolution of batch 0 */
    const float *yo = r.outputs[0].data;
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) {
                double acc = 0;
                for (int ci = 0; ci < 2; ci++)
                    for (int di = 0; di < 3; di++)
                        for (int dj = 0; dj < 3; dj++) {
                            int ii = i + di - 1, jj = j + dj - 1;
                            if (ii < 0 || jj < 0 || ii >= 5 || jj >= 5) continue;
                            acc += (double)xin[(ci * 5 + ii) * 5 + jj] *
                                   w[((o * 2 + ci) * 3 + di) * 3 + dj];
                        }
                double want = acc > 0 ? acc : 0;
                assert_true(fabs(yo[(o * 5 + i) * 5 + j] - want) < 1e-4);
            }
    rt_result_free(&r);
    ir_graph_free(g);
}

/* Random DAGs of Relu/Neg/Add/Concat, run in random topological orders. */
static void random_order(const ir_graph *g, uint64_t seed, int *order) {
    int n = g->n_nodes, done = 0;
    unsigned char *placed = calloc((size_t)n, 1);
    int *ready = malloc(sizeof(int) * (size_t)n);
    while (done < n) {
        int nr = 0;
        for (int i = 0; i < n; i++) {
            if (placed[i]) continue;
            bool ok = true;
            for (int k = 0; k < g->nodes[i].n_in; k++) {
                int p = g->values[g->nodes[i].in[k]].producer;
                if (p >= 0 && !placed[p]) ok = false;
            }
            if (ok) ready[nr++] = i;
        }
        int pick = ready[ir_mix64(seed + (uint64_t)done) % (uint64_t)nr];
        placed[pick] = 1;
        order[done++] = pick;
    }
    free(placed);
    free(ready);
}

static void test_random_dags(void **state) {
    NEED_OP(IR_OP_Relu);
    NEED_OP(IR_OP_Neg);
    NEED_OP(IR_OP_Add);
    NEED_OP(IR_OP_Concat);
    for (uint64_t gs = 1; gs <= 30; gs++) {
        ir_graph *g = ir_graph_new();
        int vals[64], nv = 0;
        vals[nv++] = add_input(g, "x", IR_F32, TU_SHAPE(4), IR_VF_DATA);
        float c[3] = {1, 2, 3};
        vals[nv++] = add_const(g, "c", IR_F32, TU_SHAPE(3), c);
        int nodes = 4 + (int)(ir_mix64(gs) % 12);
        for (int i = 0; i < nodes; i++) {
            uint64_t r = ir_mix64(gs * 1000 + (uint64_t)i);
            int a = vals[r % (uint64_t)nv], b = vals[(r >> 16) % (uint64_t)nv];
            char nm[32];
            snprintf(nm, sizeof nm, "n%d", i);
            int kind = (int)((r >> 32) % 4);
            const ir_shape *sa = &g->values[a].shape, *sb = &g->values[b].shape;
            if (kind == 2 && !ir_shape_eq(sa, sb)) kind = 3;
            if (kind == 3 && sa->dims[0] + sb->dims[0] > 64) kind = 0;
            ir_attr ax = tu_attr_int("axis", 0);
            switch (kind) {
            case 0: vals[nv++] = add_node(g, IR_OP_Relu, nm, 1, &a, 1, 0, NULL); break;
            case 1: vals[nv++] = add_node(g, IR_OP_Neg, nm, 1, &a, 1, 0, NULL); break;
            case 2: vals[nv++] = add_node(g, IR_OP_Add, nm, 2, (int[]){a, b}, 1, 0, NULL); break;
            default: vals[nv++] = add_node(g, IR_OP_Concat, nm, 2, (int[]){a, b}, 1, 1, &ax);
            }
        }
        ir_graph_add_output(g, vals[nv - 1]);
        if (gs % 3 == 0) ir_graph_add_output(g, vals[2 + (int)(gs % (uint64_t)(nv - 2))]);
        if (gs % 5 == 0) ir_graph_add_output(g, vals[1]);
        float xin[4] = {0.5f, -1, 2, -3};
        rt_binding b = {.value = vals[0], .dtype = IR_F32, .shape = TU_SHAPE(4), .data = xin};
        rt_result ref;
        run_checked(g, NULL, &b, 1, &ref);
        int order[64];
        for (uint64_t os = 0; os < 6; os++) {
            random_order(g, gs * 77 + os, order);
            assert_true(sched_order_valid(g, order, g->n_nodes));
            rt_result r;
            run_checked(g, order, &b, 1, &r);
            for (int o = 0; o < r.n_outputs; o++)
                assert_memory_equal(r.outputs[o].data, ref.outputs[o].data,
                                    ir_value_bytes(&g->values[g->outputs[o]]));
            rt_result_free(&r);
        }
        rt_result_free(&ref);
        ir_graph_free(g);
    }
}

static void test_bad_orders(void **state) {
    NEED_OP(IR_OP_Relu);
    NEED_OP(IR_OP_Neg);
    NEED_OP(IR_OP_Add);
    int x;
    ir_graph *g = diamond(&x);
    rt_binding b = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(2, 3), .data = xdata};
    struct {
        int order[3], n;
        const char *needle;
    } bad[] = {{{2, 0, 1}, 3, "not topological"},
               {{0, 1, 1}, 3, "twice"},
               {{0, 1, 0}, 2, "has 2 steps"},
               {{0, 1, 5}, 3, "not a node index"}};
    for (int i = 0; i < 4; i++) {
        ir_diag d = {{0}};
        rt_options o = {.order = bad[i].order, .n_order = bad[i].n};
        rt_result r;
        assert_int_equal(rt_run(g, &b, 1, &o, &r, &d), IR_ERR_INVALID);
        if (!strstr(d.msg, bad[i].needle)) fail_msg("'%s' lacks '%s'", d.msg, bad[i].needle);
        assert_false(sched_order_valid(g, bad[i].order, bad[i].n));
        sched_memory m;
        assert_int_equal(sched_memory_compute(g, bad[i].order, &m, &d), IR_ERR_INVALID);
        rt_result_free(&r);
    }
    int *eager = sched_eager_order(g);
    assert_true(sched_order_valid(g, eager, 3));
    free(eager);
    ir_graph_free(g);
}

static void test_bad_bindings(void **state) {
    NEED_OP(IR_OP_Relu);
    NEED_OP(IR_OP_Neg);
    NEED_OP(IR_OP_Add);
    int x;
    ir_graph *g = diamond(&x);
    g->source = "diamond.onnx";
    ir_diag d = {{0}};
    rt_result r;
    rt_binding b = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(3, 2), .data = xdata};
    assert_int_equal(rt_run(g, &b, 1, NULL, &r, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "diamond.onnx: input 'x': expected float32 [2,3], given "
                                  "float32 [3,2]"));
    b.shape = TU_SHAPE(2, 3);
    b.dtype = IR_F64;
    assert_int_equal(rt_run(g, &b, 1, NULL, &r, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "given float64 [2,3]"));
    b.value = g->outputs[0];
    b.dtype = IR_F32;
    assert_int_equal(rt_run(g, &b, 1, NULL, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "computed by node 'add'"));

    /* missing data input, then filled */
    assert_int_equal(rt_run(g, NULL, 0, NULL, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "missing data input 'x'"));
    rt_options o = {.fill_missing_data = true, .seed = 3};
    rt_result r2;
    assert_int_equal(rt_run(g, NULL, 0, &o, &r, &d), IR_OK);
    assert_int_equal(rt_run(g, NULL, 0, &o, &r2, &d), IR_OK);
    assert_memory_equal(r.outputs[0].data, r2.outputs[0].data, 24);
    const float *y = r.outputs[0].data;
    for (int i = 0; i < 6; i++) assert_true(y[i] >= 0 && y[i] <= 1); /* relu(x)-x, x in [-1,1) */
    rt_result_free(&r);
    rt_result_free(&r2);
    ir_graph_free(g);
}

static void test_unsupported_and_kernel_failure(void **state) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", IR_F32, TU_SHAPE(2), IR_VF_DATA);
    int y = ir_graph_add_value(g, "y", IR_F32, &(ir_shape){1, {2}});
    int ni = ir_graph_add_node(g, IR_OP_OPAQUE, "n", 1, &x, 1, &y, 0, NULL);
    g->nodes[ni].op_type = "Foo";
    ir_graph_add_output(g, y);
    ir_diag d = {{0}};
    rt_result r;
    rt_options o = {.fill_missing_data = true};
    assert_int_equal(rt_run(g, NULL, 0, &o, &r, &d), IR_ERR_UNSUPPORTED);
    assert_string_equal(d.msg, "node 'n' (Foo): cannot run an unsupported op");
    ir_graph_free(g);

    NEED_OP(IR_OP_Gather);
    g = ir_graph_new();
    float table[6] = {1, 2, 3, 4, 5, 6};
    int t = add_const(g, "table", IR_F32, TU_SHAPE(3, 2), table);
    int idx = add_input(g, "idx", IR_I64, TU_SHAPE(2), IR_VF_DATA);
    int out = add_node(g, IR_OP_Gather, "gather", 2, (int[]){t, idx}, 1, 0, NULL);
    ir_graph_add_output(g, out);
    int64_t good[2] = {2, 0}, bad[2] = {1, 7};
    rt_binding b = {.value = idx, .dtype = IR_I64, .shape = TU_SHAPE(2), .data = good};
    assert_int_equal(rt_run(g, &b, 1, NULL, &r, &d), IR_OK);
    const float *go = r.outputs[0].data;
    assert_true(go[0] == 5 && go[1] == 6 && go[2] == 1 && go[3] == 2);
    rt_result_free(&r);
    b.data = bad;
    ir_status st = rt_run(g, &b, 1, NULL, &r, &d);
    assert_int_not_equal(st, IR_OK);
    assert_non_null(strstr(d.msg, "node 'gather' (Gather)"));
    assert_null(r.outputs);
    ir_graph_free(g);
}

/* Weights without values: deterministic, keyed by name and seed, within the documented range. */
static void test_seeded_weights(void **state) {
    ir_graph *g = ir_graph_new();
    int a = add_input(g, "layer.weight", IR_F32, TU_SHAPE(8, 4, 3, 3), IR_VF_PARAM);
    int bn = add_input(g, "bn.running_var", IR_F32, TU_SHAPE(16), 0);
    int h = add_input(g, "half", IR_F16, TU_SHAPE(10), IR_VF_PARAM);
    int i64 = add_input(g, "ids", IR_I64, TU_SHAPE(4), 0);
    float w1[288], w2[288], w3[288], rv[16];
    uint16_t hv[10];
    int64_t iv[4] = {9, 9, 9, 9};
    rt_fill_seeded(&g->values[a], 5, w1);
    rt_fill_seeded(&g->values[a], 5, w2);
    assert_memory_equal(w1, w2, sizeof w1);
    rt_fill_seeded(&g->values[a], 6, w3);
    assert_memory_not_equal(w1, w3, sizeof w1);
    double bound = 1.0 / sqrt(36.0);
    for (int i = 0; i < 288; i++) assert_true(w1[i] >= -bound && w1[i] <= bound);
    /* the same name in another graph gives the same values; another name different ones */
    ir_graph *g2 = ir_graph_new();
    int a2 = add_input(g2, "layer.weight", IR_F32, TU_SHAPE(8, 4, 3, 3), 0);
    int b2 = add_input(g2, "layer.weight2", IR_F32, TU_SHAPE(8, 4, 3, 3), 0);
    rt_fill_seeded(&g2->values[a2], 5, w2);
    assert_memory_equal(w1, w2, sizeof w1);
    rt_fill_seeded(&g2->values[b2], 5, w2);
    assert_memory_not_equal(w1, w2, sizeof w1);
    rt_fill_seeded(&g->values[bn], 5, rv);
    for (int i = 0; i < 16; i++) assert_true(rv[i] >= 0.5f && rv[i] <= 1.5f);
    rt_fill_seeded(&g->values[h], 5, hv);
    for (int i = 0; i < 10; i++) assert_true(fabsf(ir_f16_to_f32(hv[i])) <= 1.0f / sqrtf(1) + 1e-3);
    rt_fill_seeded(&g->values[i64], 5, iv);
    for (int i = 0; i < 4; i++) assert_int_equal(iv[i], 0);
    ir_graph_free(g);
    ir_graph_free(g2);

    /* through rt_run: an unbound parameter is filled, the same way at every run */
    NEED_OP(IR_OP_MatMul);
    g = ir_graph_new();
    int x = add_input(g, "x", IR_F32, TU_SHAPE(2, 4), IR_VF_DATA);
    int w = add_input(g, "w", IR_F32, TU_SHAPE(4, 3), IR_VF_PARAM);
    int y = add_node(g, IR_OP_MatMul, "mm", 2, (int[]){x, w}, 1, 0, NULL);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, w);
    float xin[8] = {1, 0, 0, 0, 0, 1, 0, 0};
    rt_binding b = {.value = x, .dtype = IR_F32, .shape = TU_SHAPE(2, 4), .data = xin};
    rt_result r1, r2;
    run_checked(g, NULL, &b, 1, &r1);
    run_checked(g, NULL, &b, 1, &r2);
    assert_memory_equal(r1.outputs[0].data, r2.outputs[0].data, 24);
    float wexp[12];
    rt_fill_seeded(&g->values[w], 7, wexp); /* run_checked uses seed 7 */
    assert_memory_equal(r1.outputs[1].data, wexp, sizeof wexp);
    const float *yo = r1.outputs[0].data;
    for (int j = 0; j < 3; j++) { /* rows of x select rows of w */
        assert_true(fabsf(yo[j] - wexp[j]) < 1e-6f);
        assert_true(fabsf(yo[3 + j] - wexp[3 + j]) < 1e-6f);
    }
    assert_int_equal(r1.resident_bytes, 32 + 48);
    rt_result_free(&r1);
    rt_result_free(&r2);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_chain_unused_workspace),
        cmocka_unit_test(test_random_dags),
        cmocka_unit_test(test_bad_orders),
        cmocka_unit_test(test_bad_bindings),
        cmocka_unit_test(test_unsupported_and_kernel_failure),
        cmocka_unit_test(test_seeded_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
