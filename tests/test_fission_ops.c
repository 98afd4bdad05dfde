/* test_fission_ops.c - the fission ops (ir/ops-fission.c): FissionBuffer, FissionSlice,
 * FissionAssemble and FissionAccumulate against hand-computed results, in place and not;
 * slicing a tensor into parts and assembling them back gives it again; shape-inference errors
 * name the node; byte and FLOP counts cover what the kernels touch; the in-place rule of
 * ir_value_inplace_of over produced values; and a graph of them survives ONNX export and import
 * (magpie verify re-imports optimized.onnx) with its buffer still an allocation, not a constant. */
#include "test-util.h"

#include "rt.h"

static tu_in f32_in(ir_shape s, const float *p) {
    return tu_data_in(IR_F32, s, p);
}

/* ---------------------------------------------------------------- FissionBuffer */

static void test_buffer(void **state) {
    (void)state;
    int64_t dims[] = {2, 3};
    ir_attr a[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_I64)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_FissionBuffer, 0, NULL, 1, 2, a, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    tu_expect_shape(&out[0], TU_SHAPE(2, 3));
    for (int i = 0; i < 6; i++) assert_int_equal(((int64_t *)out[0].data)[i], 0);
    tu_free_outputs(1, out);

    /* errors name the node and the cause */
    int64_t neg[] = {2, -1};
    ir_attr bad_dims[] = {tu_attr_ints("shape", 2, neg), tu_attr_int("dtype", IR_F32)};
    assert_int_equal(tu_run_err(IR_OP_FissionBuffer, 0, NULL, 1, 2, bad_dims, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "test_node"));
    assert_non_null(strstr(d.msg, "negative"));
    ir_attr bad_t[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_DTYPE_COUNT)};
    assert_int_equal(tu_run_err(IR_OP_FissionBuffer, 0, NULL, 1, 2, bad_t, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "dtype"));
    ir_attr no_shape[] = {tu_attr_int("dtype", IR_F32)};
    assert_int_equal(tu_run_err(IR_OP_FissionBuffer, 0, NULL, 1, 1, no_shape, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "shape is missing"));
}

/* ---------------------------------------------------------------- FissionSlice */

static void test_slice(void **state) {
    (void)state;
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i; /* [[0..5], [6..11]] */
    float buf[4] = {0};
    ir_tensor out[1];
    ir_diag d = {{0}};
    /* axis 1 (given as -1), 3 parts, part 1: columns 2 and 3; the buffer input is ignored */
    tu_in in[] = {f32_in(TU_SHAPE(2, 6), x), f32_in(TU_SHAPE(4), buf)};
    ir_attr a[] = {tu_attr_int("axis", -1), tu_attr_int("parts", 3), tu_attr_int("index", 1)};
    assert_int_equal(tu_run_op(IR_OP_FissionSlice, 2, in, 1, 3, a, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SHAPE(2, 2));
    const float want[] = {2, 3, 8, 9};
    assert_memory_equal(out[0].data, want, sizeof want);
    tu_free_outputs(1, out);

    /* axis 0, 2 parts, part 1: the second row; int64 moves as well as float */
    int64_t xi[12];
    for (int i = 0; i < 12; i++) xi[i] = 100 + i;
    tu_in ini[] = {tu_data_in(IR_I64, TU_SHAPE(2, 6), xi)};
    ir_attr a0[] = {tu_attr_int("axis", 0), tu_attr_int("parts", 2), tu_attr_int("index", 1)};
    assert_int_equal(tu_run_op(IR_OP_FissionSlice, 1, ini, 1, 3, a0, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    tu_expect_shape(&out[0], TU_SHAPE(1, 6));
    assert_memory_equal(out[0].data, xi + 6, 6 * sizeof(int64_t));
    tu_free_outputs(1, out);

    /* errors */
    ir_attr four[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 4), tu_attr_int("index", 0)};
    assert_int_equal(tu_run_err(IR_OP_FissionSlice, 1, in, 1, 3, four, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    assert_non_null(strstr(d.msg, "not divisible into 4 parts"));
    ir_attr idx[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 3), tu_attr_int("index", 3)};
    assert_int_equal(tu_run_err(IR_OP_FissionSlice, 1, in, 1, 3, idx, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index is 3"));
    ir_attr zero[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 0), tu_attr_int("index", 0)};
    assert_int_equal(tu_run_err(IR_OP_FissionSlice, 1, in, 1, 3, zero, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "parts is 0"));
    ir_attr ax[] = {tu_attr_int("axis", 2), tu_attr_int("parts", 2), tu_attr_int("index", 0)};
    assert_int_equal(tu_run_err(IR_OP_FissionSlice, 1, in, 1, 3, ax, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "axis 2 is out of range"));
}

/* ---------------------------------------------------------------- FissionAssemble */

/* Runs the kernel of node 0 of g with out[0].data == in[0].data, as the executor does in place. */
static void run_aliased(ir_graph *g, ir_tensor *in, int n_in) {
    ir_tensor out = in[0];
    ir_diag d = {{0}};
    ir_kernel_ctx k = {.graph = g,
                       .node = &g->nodes[0],
                       .n_in = n_in,
                       .n_out = 1,
                       .in = in,
                       .out = &out,
                       .diag = &d};
    if (ir_op_get(g->nodes[0].op)->kernel(&k) != IR_OK) fail_msg("%s", d.msg);
}

/* A graph holding one node op(b, p) over inputs of the given shapes, inferred. */
static ir_graph *one_node(ir_op_kind op, ir_shape bs, ir_shape ps, int n_attrs, const ir_attr *a) {
    ir_graph *g = ir_graph_new();
    int b = ir_graph_add_value(g, "b", IR_F32, &bs), p = ir_graph_add_value(g, "p", IR_F32, &ps);
    ir_graph_add_input(g, b);
    ir_graph_add_input(g, p);
    int o;
    tu_add_node1(g, op, "n", 2, (int[]){b, p}, n_attrs, a, &o);
    return g;
}

static void test_assemble(void **state) {
    (void)state;
    float b[12], p[4] = {-1, -2, -3, -4};
    for (int i = 0; i < 12; i++) b[i] = (float)i;
    /* slot 2 of 3 along axis 1 of [2, 6]: columns 4 and 5 */
    ir_attr a[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 3), tu_attr_int("index", 2)};
    const float want[] = {0, 1, 2, 3, -1, -2, 6, 7, 8, 9, -3, -4};
    tu_in in[] = {f32_in(TU_SHAPE(2, 6), b), f32_in(TU_SHAPE(2, 2), p)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_FissionAssemble, 2, in, 1, 3, a, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SHAPE(2, 6));
    assert_memory_equal(out[0].data, want, sizeof want); /* not in place: the rest copied */
    tu_free_outputs(1, out);

    ir_graph *g = one_node(IR_OP_FissionAssemble, TU_SHAPE(2, 6), TU_SHAPE(2, 2), 3, a);
    ir_tensor tin[] = {{IR_F32, TU_SHAPE(2, 6), b}, {IR_F32, TU_SHAPE(2, 2), p}};
    run_aliased(g, tin, 2);
    assert_memory_equal(b, want, sizeof want);
    ir_graph_free(g);

    /* errors: a part of the wrong shape or dtype, a buffer that does not divide */
    tu_in wrong[] = {f32_in(TU_SHAPE(2, 6), b), f32_in(TU_SHAPE(2, 3), p)};
    assert_int_equal(tu_run_err(IR_OP_FissionAssemble, 2, wrong, 1, 3, a, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    assert_non_null(strstr(d.msg, "expected float32 [2,2]"));
    double pd[4] = {0};
    tu_in dt[] = {f32_in(TU_SHAPE(2, 6), b), tu_data_in(IR_F64, TU_SHAPE(2, 2), pd)};
    assert_int_equal(tu_run_err(IR_OP_FissionAssemble, 2, dt, 1, 3, a, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "float64"));
    ir_attr five[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 5), tu_attr_int("index", 0)};
    assert_int_equal(tu_run_err(IR_OP_FissionAssemble, 2, in, 1, 3, five, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "not divisible into 5 parts"));
}

/* Every axis of a [2, 6, 4] tensor, every part count that divides it: slicing into parts and
 * assembling them into a zero buffer gives the tensor back, element for element. */
static void test_slice_assemble_roundtrip(void **state) {
    (void)state;
    const ir_shape s = TU_SHAPE(2, 6, 4);
    float x[48], buf[48];
    tu_fill(x, 48, 3);
    ir_diag d = {{0}};
    for (int axis = 0; axis < 3; axis++)
        for (int parts = 1; parts <= s.dims[axis]; parts++) {
            if (s.dims[axis] % parts) continue;
            memset(buf, 0, sizeof buf);
            for (int i = 0; i < parts; i++) {
                ir_attr a[] = {tu_attr_int("axis", axis), tu_attr_int("parts", parts),
                               tu_attr_int("index", i)};
                tu_in in[] = {f32_in(s, x)};
                ir_tensor part[1], out[1];
                assert_int_equal(tu_run_op(IR_OP_FissionSlice, 1, in, 1, 3, a, part, &d), IR_OK);
                tu_in asm_in[] = {f32_in(s, buf), f32_in(part[0].shape, part[0].data)};
                assert_int_equal(tu_run_op(IR_OP_FissionAssemble, 2, asm_in, 1, 3, a, out, &d),
                                 IR_OK);
                memcpy(buf, out[0].data, sizeof buf);
                tu_free_outputs(1, part);
                tu_free_outputs(1, out);
            }
            if (memcmp(buf, x, sizeof x) != 0) fail_msg("axis %d, %d parts", axis, parts);
        }
}

/* ---------------------------------------------------------------- FissionAccumulate */

static void test_accumulate(void **state) {
    (void)state;
    float b[4] = {1, 2, 3, 4}, p[4] = {0.5f, -2, 10, 0};
    const float want[] = {1.5f, 0, 13, 4};
    ir_attr a[] = {tu_attr_int("parts", 4), tu_attr_int("index", 0)};
    tu_in in[] = {f32_in(TU_SHAPE(2, 2), b), f32_in(TU_SHAPE(2, 2), p)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_FissionAccumulate, 2, in, 1, 2, a, out, &d), IR_OK);
    assert_memory_equal(out[0].data, want, sizeof want);
    tu_free_outputs(1, out);

    double bd[3] = {1e300, 1, -1}, pd[3] = {1e300, 1e-20, 1};
    const double wd[] = {2e300, 1 + 1e-20, 0};
    tu_in ind[] = {tu_data_in(IR_F64, TU_SHAPE(3), bd), tu_data_in(IR_F64, TU_SHAPE(3), pd)};
    assert_int_equal(tu_run_op(IR_OP_FissionAccumulate, 2, ind, 1, 2, a, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_F64);
    assert_memory_equal(out[0].data, wd, sizeof wd);
    tu_free_outputs(1, out);

    ir_graph *g = one_node(IR_OP_FissionAccumulate, TU_SHAPE(2, 2), TU_SHAPE(2, 2), 2, a);
    ir_tensor tin[] = {{IR_F32, TU_SHAPE(2, 2), b}, {IR_F32, TU_SHAPE(2, 2), p}};
    run_aliased(g, tin, 2);
    assert_memory_equal(b, want, sizeof want);
    ir_graph_free(g);

    /* errors: shapes that differ, integers */
    tu_in wrong[] = {f32_in(TU_SHAPE(2, 2), b), f32_in(TU_SHAPE(4), p)};
    assert_int_equal(tu_run_err(IR_OP_FissionAccumulate, 2, wrong, 1, 2, a, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    assert_non_null(strstr(d.msg, "expected float32 [2,2]"));
    int64_t bi[2] = {0}, pi[2] = {0};
    tu_in ints[] = {tu_data_in(IR_I64, TU_SHAPE(2), bi), tu_data_in(IR_I64, TU_SHAPE(2), pi)};
    assert_int_equal(tu_run_err(IR_OP_FissionAccumulate, 2, ints, 1, 2, a, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "int64"));
    ir_attr idx[] = {tu_attr_int("parts", 2), tu_attr_int("index", -1)};
    assert_int_equal(tu_run_err(IR_OP_FissionAccumulate, 2, in, 1, 2, idx, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index is -1"));
}

/* ---------------------------------------------------------------- counts and op-table facts */

/* buf = FissionBuffer [8, 12]; s = FissionSlice(x [8, 16], buf) 4 parts; r = Relu(MatMul(s, W));
 * y = FissionAssemble(buf, r); z = FissionAccumulate(FissionBuffer [2, 12], r). */
/* A chain into an unfilled buffer (`fill` 0, rw_fission_apply's for an accumulated output):
 * part 0 writes its part over the buffer (a copy: 2 x the part's bytes, no FLOPs), part 1 adds
 * (3 x); the buffer costs no bytes and, on the roofline, no kernel. Into a zero-filled buffer,
 * part 0 adds as before. */
static void test_accumulate_unfilled(void **state) {
    (void)state;
    for (int fill = 0; fill <= 1; fill++) {
        ir_graph *g = ir_graph_new();
        ir_shape xs = TU_SHAPE(2, 3);
        int x = ir_graph_add_value(g, "x", IR_F32, &xs);
        ir_graph_add_input(g, x);
        g->values[x].flags |= IR_VF_DATA;
        int64_t dims[] = {2, 3};
        ir_attr ba[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_F32),
                        tu_attr_int("fill", fill)};
        ir_attr a0[] = {tu_attr_int("parts", 2), tu_attr_int("index", 0)};
        ir_attr a1[] = {tu_attr_int("parts", 2), tu_attr_int("index", 1)};
        int buf, p, q, c0, c1;
        int nb = tu_add_node1(g, IR_OP_FissionBuffer, "buf", 0, NULL, 3, ba, &buf);
        tu_add_node1(g, IR_OP_Neg, "neg", 1, &x, 0, NULL, &p);
        tu_add_node1(g, IR_OP_Relu, "relu", 1, &x, 0, NULL, &q);
        int n0 = tu_add_node1(g, IR_OP_FissionAccumulate, "acc0", 2, (int[]){buf, p}, 2, a0, &c0);
        int n1 = tu_add_node1(g, IR_OP_FissionAccumulate, "acc1", 2, (int[]){c0, q}, 2, a1, &c1);
        ir_graph_add_output(g, c1);
        const double part = 2 * 3 * 4;
        assert_int_equal(ir_fission_buffer_unfilled(&g->nodes[nb]), !fill);
        assert_int_equal(ir_fission_accumulate_overwrites(g, &g->nodes[n0]), !fill);
        assert_false(ir_fission_accumulate_overwrites(g, &g->nodes[n1]));
        assert_true(ir_node_bytes(g, &g->nodes[n0]) == (fill ? 3 : 2) * part);
        assert_true(ir_node_flops(g, &g->nodes[n0]) == (fill ? 6 : 0));
        assert_true(ir_node_bytes(g, &g->nodes[n1]) == 3 * part);
        assert_true(ir_node_bytes(g, &g->nodes[nb]) == (fill ? part : 0));
        const prof_target *t = prof_target_find("rtx3090");
        assert_non_null(t);
        if (!fill) assert_true(prof_roofline_seconds(t, g, &g->nodes[nb]) == 0.0);
        float xd[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
        rt_binding b = {.value = x, .dtype = IR_F32, .shape = xs, .data = xd};
        rt_result r;
        ir_diag d = {{0}};
        if (rt_run(g, &b, 1, NULL, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
        const float *o = r.outputs[0].data;
        for (int i = 0; i < 6; i++) assert_true(o[i] == -xd[i] + (xd[i] > 0 ? xd[i] : 0));
        rt_result_free(&r);
        ir_graph_free(g);
    }
}

/* `fused` 1 on an accumulate whose part a MatMul produces (no graph output): on the roofline it
 * is the MatMul's epilogue, one read of the buffer and no launch, nothing for part 0 into an
 * unfilled buffer; with a Relu producer, a graph-output part, or `fused` 0 it is a kernel of its
 * own. The executor computes the same sums either way. */
static void test_accumulate_fused(void **state) {
    (void)state;
    const prof_target *t = prof_target_find("rtx3090");
    assert_non_null(t);
    for (int variant = 0; variant < 4; variant++) { /* fused, fused 0, Relu, part an output */
        ir_graph *g = ir_graph_new();
        ir_shape xs = TU_SHAPE(2, 3), ws = TU_SHAPE(3, 3);
        int x = ir_graph_add_value(g, "x", IR_F32, &xs),
            w = ir_graph_add_value(g, "w", IR_F32, &ws);
        ir_graph_add_input(g, x);
        ir_graph_add_input(g, w);
        g->values[x].flags |= IR_VF_DATA;
        int64_t dims[] = {2, 3};
        ir_attr ba[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_F32),
                        tu_attr_int("fill", 0)};
        int fused = variant != 1;
        ir_attr a0[] = {tu_attr_int("parts", 2), tu_attr_int("index", 0),
                        tu_attr_int("fused", fused)};
        ir_attr a1[] = {tu_attr_int("parts", 2), tu_attr_int("index", 1),
                        tu_attr_int("fused", fused)};
        int buf, p, q, c0, c1;
        tu_add_node1(g, IR_OP_FissionBuffer, "buf", 0, NULL, 3, ba, &buf);
        if (variant == 2)
            tu_add_node1(g, IR_OP_Relu, "relu", 1, &x, 0, NULL, &p);
        else
            tu_add_node1(g, IR_OP_MatMul, "mm0", 2, (int[]){x, w}, 0, NULL, &p);
        tu_add_node1(g, IR_OP_MatMul, "mm1", 2, (int[]){x, w}, 0, NULL, &q);
        int n0 = tu_add_node1(g, IR_OP_FissionAccumulate, "acc0", 2, (int[]){buf, p}, 3, a0, &c0);
        int n1 = tu_add_node1(g, IR_OP_FissionAccumulate, "acc1", 2, (int[]){c0, q}, 3, a1, &c1);
        ir_graph_add_output(g, c1);
        if (variant == 3) ir_graph_add_output(g, p);
        const double part = 2 * 3 * 4;
        bool f0 = variant == 0, f1 = variant != 1;
        assert_int_equal(ir_fission_accumulate_fused(g, &g->nodes[n0]), f0);
        assert_int_equal(ir_fission_accumulate_fused(g, &g->nodes[n1]), f1);
        assert_true(ir_node_bytes(g, &g->nodes[n0]) == (f0 ? 0 : 2) * part);
        assert_true(ir_node_bytes(g, &g->nodes[n1]) == (f1 ? 1 : 3) * part);
        assert_true(ir_node_flops(g, &g->nodes[n1]) == (f1 ? 0 : 6));
        double s0 = prof_roofline_seconds(t, g, &g->nodes[n0]);
        double s1 = prof_roofline_seconds(t, g, &g->nodes[n1]);
        if (f0)
            assert_true(s0 == 0.0);
        else
            assert_true(s0 >= t->launch_s);
        if (f1)
            assert_true(s1 == part / t->mem_bw);
        else
            assert_true(s1 >= t->launch_s);
        float xd[6] = {-1, 2, -3, 4, 0.5f, -0.25f}, wd[9] = {1, 0, 2, -1, 3, 0, 0.5f, 1, -2};
        rt_binding b[] = {{.value = x, .dtype = IR_F32, .shape = xs, .data = xd},
                          {.value = w, .dtype = IR_F32, .shape = ws, .data = wd}};
        rt_result r;
        ir_diag d = {{0}};
        if (rt_run(g, b, 2, NULL, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
        const float *o = r.outputs[0].data;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                float mm = 0;
                for (int k = 0; k < 3; k++) mm += xd[i * 3 + k] * wd[k * 3 + j];
                float first = variant == 2 ? (xd[i * 3 + j] > 0 ? xd[i * 3 + j] : 0) : mm;
                assert_float_equal(o[i * 3 + j], first + mm, 1e-6);
            }
        rt_result_free(&r);
        ir_graph_free(g);
    }
}

static void test_counts_and_flags(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(8, 16), ws = TU_SHAPE(16, 12);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), w = ir_graph_add_value(g, "W", IR_F32, &ws);
    ir_graph_add_input(g, x);
    ir_graph_add_input(g, w);
    int64_t bdims[] = {8, 12}, adims[] = {2, 12};
    ir_attr ba[] = {tu_attr_ints("shape", 2, bdims), tu_attr_int("dtype", IR_F32)};
    ir_attr aa[] = {tu_attr_ints("shape", 2, adims), tu_attr_int("dtype", IR_F32)};
    ir_attr sa[] = {tu_attr_int("axis", 0), tu_attr_int("parts", 4), tu_attr_int("index", 3)};
    int buf, acc, s, m, r, y, z;
    int nb = tu_add_node1(g, IR_OP_FissionBuffer, "buf", 0, NULL, 2, ba, &buf);
    tu_add_node1(g, IR_OP_FissionBuffer, "acc", 0, NULL, 2, aa, &acc);
    int ns = tu_add_node1(g, IR_OP_FissionSlice, "slice", 2, (int[]){x, buf}, 3, sa, &s);
    tu_add_node1(g, IR_OP_MatMul, "mm", 2, (int[]){s, w}, 0, NULL, &m);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &m, 0, NULL, &r);
    /* the third inputs are ordering-only (the group's first slice, as rw_fission_apply adds) */
    int na = tu_add_node1(g, IR_OP_FissionAssemble, "asm", 3, (int[]){buf, r, s}, 3, sa, &y);
    int nc = tu_add_node1(g, IR_OP_FissionAccumulate, "sum", 3, (int[]){acc, r, s}, 2, sa + 1, &z);
    ir_graph_add_output(g, y);
    ir_graph_add_output(g, z);
    const double part = 2 * 12 * 4; /* r: [2, 12] float32 */
    /* a slice reads and writes its part, whatever buffers it is ordered after */
    assert_true(ir_node_bytes(g, &g->nodes[ns]) == 2 * (2 * 16 * 4));
    assert_true(ir_node_bytes(g, &g->nodes[na]) == 2 * part);
    assert_true(ir_node_bytes(g, &g->nodes[nc]) == 3 * part); /* buffer, part in; buffer out */
    assert_true(ir_input_order_only(&g->nodes[na], 2) && ir_input_order_only(&g->nodes[nc], 2));
    assert_false(ir_input_order_only(&g->nodes[nc], 1));
    assert_true(ir_node_bytes(g, &g->nodes[nb]) == 8 * 12 * 4);
    assert_true(ir_node_flops(g, &g->nodes[nc]) == 2 * 12);
    assert_true(ir_node_flops(g, &g->nodes[ns]) == 0 && ir_node_flops(g, &g->nodes[na]) == 0);
    /* a roofline over those bytes: the assemble costs its part, not the buffer */
    const prof_target *t = prof_target_find("rtx3090");
    assert_non_null(t);
    assert_true(prof_roofline_seconds(t, g, &g->nodes[na]) == 2 * part / t->mem_bw + t->launch_s);

    static const ir_op_kind ops[] = {IR_OP_FissionBuffer, IR_OP_FissionSlice, IR_OP_FissionAssemble,
                                     IR_OP_FissionAccumulate};
    for (int i = 0; i < 4; i++) {
        const ir_op_def *def = ir_op_get(ops[i]);
        assert_non_null(def);
        assert_string_equal(def->domain, "magpie");
        assert_null(def->dims); /* a fission is never applied across them */
        assert_int_equal(ir_op_find("magpie", def->name), ops[i]);
        assert_int_equal((def->flags & IR_OPF_INPLACE) != 0, i >= 2);
    }
    assert_false(ir_input_order_only(&g->nodes[ns], 0));
    assert_true(ir_input_order_only(&g->nodes[ns], 1));
    assert_false(ir_input_order_only(&g->nodes[na], 0));

    /* in place over produced buffers: y and z take theirs over */
    assert_int_equal(ir_value_inplace_of(g, y), buf);
    assert_int_equal(ir_value_inplace_of(g, z), acc);
    assert_int_equal(ir_value_inplace_of(g, r), -1);
    assert_int_equal(sched_value_device_bytes(g, y), 0);
    /* a buffer that is itself a graph output keeps its value: the assemble allocates */
    ir_graph_add_output(g, buf);
    assert_int_equal(ir_value_inplace_of(g, y), -1);
    assert_int_equal(sched_value_device_bytes(g, y), 8 * 12 * 4);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- ONNX round trip */

/* x [4, 6] -> buf; two parts along axis 1: Neg of each slice (tagged as a fission group),
 * assembled in place; exported, imported back and run: same outputs, same memory. */
static void test_onnx_roundtrip(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape xs = TU_SHAPE(4, 6);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    int64_t dims[] = {4, 6};
    ir_attr ba[] = {tu_attr_ints("shape", 2, dims), tu_attr_int("dtype", IR_F32)};
    ir_attr tag[] = {tu_attr_int("magpie_fission_group", 0),
                     tu_attr_int("magpie_fission_parts", 2)};
    int buf, cur;
    tu_add_node1(g, IR_OP_FissionBuffer, "buf", 0, NULL, 2, ba, &buf);
    cur = buf;
    for (int i = 0; i < 2; i++) {
        ir_attr sa[] = {tu_attr_int("axis", 1), tu_attr_int("parts", 2), tu_attr_int("index", i)};
        char nm[3][24];
        snprintf(nm[0], 24, "slice%d", i);
        snprintf(nm[1], 24, "neg%d", i);
        snprintf(nm[2], 24, "asm%d", i);
        int s, n;
        tu_add_node1(g, IR_OP_FissionSlice, nm[0], 2, (int[]){x, buf}, 3, sa, &s);
        tu_add_node1(g, IR_OP_Neg, nm[1], 1, &s, 2, tag, &n);
        tu_add_node1(g, IR_OP_FissionAssemble, nm[2], 2, (int[]){cur, n}, 3, sa, &cur);
    }
    ir_graph_add_output(g, cur);

    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie-fission-ops-%d.onnx", (int)getpid());
    ir_diag d = {{0}};
    if (ir_onnx_save(g, path, &d) != IR_OK) fail_msg("save: %s", d.msg);
    ir_status st;
    ir_graph *h = ir_onnx_load(path, NULL, &st, &d);
    unlink(path);
    if (!h) fail_msg("load: %s", d.msg);
    assert_int_equal(h->n_nodes, g->n_nodes);
    int n_buf = 0, n_tagged = 0;
    for (int i = 0; i < h->n_nodes; i++) {
        const ir_node *n = &h->nodes[i];
        n_buf += n->op == IR_OP_FissionBuffer; /* still a node: not folded into a constant */
        if (ir_attr_int(n, "magpie_fission_parts", 0) == 2) n_tagged++;
        if (n->op == IR_OP_FissionSlice) assert_int_equal(ir_attr_int(n, "axis", -1), 1);
    }
    assert_int_equal(n_buf, 1);
    assert_int_equal(n_tagged, 2);

    float xd[24];
    tu_fill(xd, 24, 5);
    rt_result r1, r2;
    rt_binding b1 = {.value = x, .dtype = IR_F32, .shape = xs, .data = xd};
    rt_binding b2 = {.value = h->inputs[0], .dtype = IR_F32, .shape = xs, .data = xd};
    if (rt_run(g, &b1, 1, NULL, &r1, &d) != IR_OK) fail_msg("run: %s", d.msg);
    if (rt_run(h, &b2, 1, NULL, &r2, &d) != IR_OK) fail_msg("run imported: %s", d.msg);
    const float *y = r1.outputs[0].data;
    for (int i = 0; i < 24; i++) assert_true(y[i] == -xd[i]);
    assert_memory_equal(r2.outputs[0].data, y, sizeof xd);
    assert_int_equal(r2.peak_bytes, r1.peak_bytes);
    rt_result_free(&r1);
    rt_result_free(&r2);
    ir_graph_free(h);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer),           cmocka_unit_test(test_slice),
        cmocka_unit_test(test_assemble),         cmocka_unit_test(test_slice_assemble_roundtrip),
        cmocka_unit_test(test_accumulate),       cmocka_unit_test(test_accumulate_unfilled),
        cmocka_unit_test(test_accumulate_fused), cmocka_unit_test(test_counts_and_flags),
        cmocka_unit_test(test_onnx_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
