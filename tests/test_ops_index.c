/* test_ops_index.c - Gather, GatherElements, ScatterND, Trilu and TopK against naive loops written
 * from the ONNX definitions, plus their error paths (out-of-range indices name the value). */
#include "test-util.h"

#include "ir-impl.h"

static ir_status run_one(ir_op_kind op, int n_in, const tu_in *in, int n_attrs,
                         const ir_attr *attrs, ir_tensor *out, ir_diag *d) {
    out[0].data = NULL; /* a kernel that fails still leaves its allocated output */
    ir_status st = tu_run_op(op, n_in, in, 1, n_attrs, attrs, out, d);
    if (st != IR_OK) tu_free_outputs(1, out);
    return st;
}

/* ---------------------------------------------------------------- Gather */

/* data [4, 5, 3] float (value 100 i + 10 j + k) gathered on axis with indices. */
static void check_gather(int axis, ir_dtype it, ir_shape is, const int64_t *idx, bool constant) {
    float x[60];
    for (int i = 0; i < 60; i++) x[i] = (float)(100 * (i / 15) + 10 * (i / 3 % 5) + i % 3);
    ir_shape xs = TU_SHAPE(4, 5, 3);
    int64_t n = ir_shape_numel(&is);
    int32_t idx32[64];
    for (int64_t i = 0; i < n; i++) idx32[i] = (int32_t)idx[i];
    tu_in in[2] = {tu_data_in(IR_F32, xs, x),
                   {.dtype = it,
                    .shape = is,
                    .data = it == IR_I64 ? (void *)idx : (void *)idx32,
                    .constant = constant}};
    ir_attr a = tu_attr_int("axis", axis);
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status st = run_one(IR_OP_Gather, 2, in, 1, &a, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    int ax = axis < 0 ? axis + 3 : axis;
    ir_shape want = {.rank = 2 + is.rank};
    for (int i = 0, j = 0; i < 3; i++) {
        if (i == ax)
            for (int q = 0; q < is.rank; q++) want.dims[j++] = is.dims[q];
        else
            want.dims[j++] = xs.dims[i];
    }
    tu_expect_shape(&out[0], want);
    /* out[pre, q, post] = x[pre, idx[q], post] */
    int64_t pre = 1, post = 1;
    for (int i = 0; i < ax; i++) pre *= xs.dims[i];
    for (int i = ax + 1; i < 3; i++) post *= xs.dims[i];
    const float *y = out[0].data;
    for (int64_t p = 0; p < pre; p++)
        for (int64_t q = 0; q < n; q++)
            for (int64_t s = 0; s < post; s++) {
                int64_t v = idx[q] < 0 ? idx[q] + xs.dims[ax] : idx[q];
                float ref = x[(p * xs.dims[ax] + v) * post + s];
                assert_true(y[(p * n + q) * post + s] == ref);
            }
    tu_free_outputs(1, out);
}

static void test_gather(void **state) {
    int64_t i1[] = {3, 0, 0, 2, 1, 3};
    check_gather(0, IR_I64, TU_SHAPE(2, 3), i1, false);
    check_gather(0, IR_I32, TU_SHAPE(6), i1, true);
    int64_t i2[] = {4, -1, -5, 2};
    check_gather(1, IR_I64, TU_SHAPE(4), i2, false);
    check_gather(-2, IR_I32, TU_SHAPE(2, 2), i2, false);
    int64_t i3[] = {-1};
    check_gather(2, IR_I64, TU_SCALAR_SHAPE, i3, true); /* a scalar index removes the axis */
    check_gather(0, IR_I64, TU_SCALAR_SHAPE, i1, false);
    check_gather(1, IR_I64, TU_SHAPE(0), i1, false);

    /* an embedding lookup: [vocab, dim] rows by int64 token ids */
    enum { V = 50, D = 64, T = 7 };
    static float emb[V * D];
    tu_fill(emb, V * D, 3);
    int64_t tok[T] = {49, 0, 7, 7, -50, 13, 1};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(V, D), emb),
                   tu_data_in(IR_I64, TU_SHAPE(1, T), tok)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(run_one(IR_OP_Gather, 2, in, 0, NULL, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SHAPE(1, T, D));
    for (int t = 0; t < T; t++)
        assert_memory_equal((float *)out[0].data + t * D, emb + (tok[t] + (tok[t] < 0 ? V : 0)) * D,
                            sizeof(float) * D);
    tu_free_outputs(1, out);

    /* out of range: the kernel (dynamic indices) and inference (constant ones) name the value */
    int64_t bad[] = {1, 5};
    in[1] = tu_data_in(IR_I64, TU_SHAPE(2), bad);
    in[0].shape = TU_SHAPE(5, 320);
    assert_int_equal(run_one(IR_OP_Gather, 2, in, 0, NULL, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index 5"));
    assert_non_null(strstr(d.msg, "test_node"));
    int64_t neg[] = {-6};
    in[1] = (tu_in){IR_I64, TU_SHAPE(1), neg, true};
    assert_int_equal(run_one(IR_OP_Gather, 2, in, 0, NULL, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index -6"));
    float fi[] = {0};
    in[1] = tu_data_in(IR_F32, TU_SHAPE(1), fi);
    assert_int_equal(run_one(IR_OP_Gather, 2, in, 0, NULL, out, &d), IR_ERR_SHAPE);
    in[0].shape = TU_SCALAR_SHAPE;
    in[1] = tu_data_in(IR_I64, TU_SHAPE(1), bad);
    assert_int_equal(run_one(IR_OP_Gather, 2, in, 0, NULL, out, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- GatherElements */

static void test_gather_elements(void **state) {
    /* ONNX example: axis 1 of [[1,2],[3,4]] with [[0,0],[1,0]] */
    float x1[] = {1, 2, 3, 4}, w1[] = {1, 1, 4, 3};
    int64_t i1[] = {0, 0, 1, 0};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 2), x1), tu_data_in(IR_I64, TU_SHAPE(2, 2), i1)};
    ir_attr a1 = tu_attr_int("axis", 1);
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(run_one(IR_OP_GatherElements, 2, in, 1, &a1, out, &d), IR_OK);
    assert_memory_equal(out[0].data, w1, sizeof w1);
    tu_free_outputs(1, out);

    /* rank 3, each axis, indices smaller than data in the other dims, negative indices */
    enum { A = 3, B = 4, C = 5 };
    int16_t x[A * B * C];
    for (int i = 0; i < A * B * C; i++) x[i] = (int16_t)(i * 7 - 100);
    for (int axis = 0; axis < 3; axis++) {
        int64_t dims[3] = {A, B, C}, id[3] = {2, 3, 4}; /* index shape */
        int64_t idx[24];
        for (int i = 0; i < 24; i++)
            idx[i] = (int64_t)(ir_mix64((uint64_t)(i + axis * 31)) % (uint64_t)(2 * dims[axis])) -
                     dims[axis];
        int32_t idx32[24];
        for (int i = 0; i < 24; i++) idx32[i] = (int32_t)idx[i];
        tu_in in3[2] = {tu_data_in(IR_F16, TU_SHAPE(A, B, C), x),
                        tu_data_in(axis == 1 ? IR_I32 : IR_I64, TU_SHAPE(2, 3, 4),
                                   axis == 1 ? (void *)idx32 : (void *)idx)};
        ir_attr a = tu_attr_int("axis", axis - 3);
        assert_int_equal(run_one(IR_OP_GatherElements, 2, in3, 1, &a, out, &d), IR_OK);
        tu_expect_shape(&out[0], TU_SHAPE(2, 3, 4));
        const int16_t *y = out[0].data;
        for (int64_t i = 0; i < id[0]; i++)
            for (int64_t j = 0; j < id[1]; j++)
                for (int64_t k = 0; k < id[2]; k++) {
                    int64_t pos = (i * id[1] + j) * id[2] + k, c[3] = {i, j, k};
                    int64_t v = idx[pos];
                    c[axis] = v < 0 ? v + dims[axis] : v;
                    assert_int_equal(y[pos], x[(c[0] * B + c[1]) * C + c[2]]);
                }
        tu_free_outputs(1, out);
    }
    int64_t bad[] = {0, 2, 1, 0};
    in[1] = tu_data_in(IR_I64, TU_SHAPE(2, 2), bad);
    assert_int_equal(run_one(IR_OP_GatherElements, 2, in, 1, &a1, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index 2"));
    in[1] = tu_data_in(IR_I64, TU_SHAPE(3, 1), bad);
    assert_int_equal(run_one(IR_OP_GatherElements, 2, in, 1, &a1, out, &d), IR_ERR_SHAPE);
}

/* ---------------------------------------------------------------- ScatterND */

static void test_scatter_nd(void **state) {
    /* ONNX example 2: data [4,4,4], indices [[0],[2]], updates [2,4,4] */
    float x[64], up[32];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    for (int i = 0; i < 32; i++) up[i] = (float)(1000 + i);
    int64_t idx[] = {0, 2};
    tu_in in[3] = {tu_data_in(IR_F32, TU_SHAPE(4, 4, 4), x),
                   tu_data_in(IR_I64, TU_SHAPE(2, 1), idx),
                   tu_data_in(IR_F32, TU_SHAPE(2, 4, 4), up)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(run_one(IR_OP_ScatterND, 3, in, 0, NULL, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SHAPE(4, 4, 4));
    const float *y = out[0].data;
    for (int i = 0; i < 64; i++) {
        int s = i / 16;
        float ref = s == 0 ? up[i % 16] : s == 2 ? up[16 + i % 16] : x[i];
        assert_true(y[i] == ref);
    }
    tu_free_outputs(1, out);

    /* element updates (k = rank) with add and mul reductions, a repeated index accumulating */
    int64_t i2[] = {1, 2, -3, 0, 1, 2};
    float u2[] = {10, 20, 30};
    in[1] = tu_data_in(IR_I64, TU_SHAPE(3, 2), i2);
    in[2] = tu_data_in(IR_F32, TU_SHAPE(3), u2);
    in[0].shape = TU_SHAPE(4, 16);
    const char *reds[] = {"add", "mul", "max", "none"};
    for (int r = 0; r < 4; r++) {
        ir_attr a = tu_attr_str("reduction", reds[r]);
        assert_int_equal(run_one(IR_OP_ScatterND, 3, in, 1, &a, out, &d), IR_OK);
        float ref[64];
        memcpy(ref, x, sizeof ref);
        for (int u = 0; u < 3; u++) {
            int64_t r0 = i2[2 * u] < 0 ? i2[2 * u] + 4 : i2[2 * u];
            float *p = &ref[r0 * 16 + i2[2 * u + 1]];
            *p = r == 0 ? *p + u2[u] : r == 1 ? *p * u2[u] : r == 2 ? fmaxf(*p, u2[u]) : u2[u];
        }
        if (r == 3) ref[1 * 16 + 2] = 30; /* "none" with a repeat: the last one wins here */
        assert_memory_equal(out[0].data, ref, sizeof ref);
        tu_free_outputs(1, out);
    }
    /* an int64 add */
    int64_t xi[4] = {1, 2, 3, 4}, ui[2] = {100, -100}, ii[2] = {3, 0};
    tu_in in2[3] = {tu_data_in(IR_I64, TU_SHAPE(4), xi), tu_data_in(IR_I64, TU_SHAPE(2, 1), ii),
                    tu_data_in(IR_I64, TU_SHAPE(2), ui)};
    ir_attr add = tu_attr_str("reduction", "add");
    assert_int_equal(run_one(IR_OP_ScatterND, 3, in2, 1, &add, out, &d), IR_OK);
    int64_t wi[4] = {-99, 2, 3, 104};
    assert_memory_equal(out[0].data, wi, sizeof wi);
    tu_free_outputs(1, out);

    int64_t oob[] = {4, 0};
    in2[1] = tu_data_in(IR_I64, TU_SHAPE(2, 1), oob);
    assert_int_equal(run_one(IR_OP_ScatterND, 3, in2, 0, NULL, out, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "index 4"));
    in2[2] = tu_data_in(IR_I64, TU_SHAPE(3), ui);
    assert_int_equal(run_one(IR_OP_ScatterND, 3, in2, 0, NULL, out, &d), IR_ERR_SHAPE);
    ir_attr bad = tu_attr_str("reduction", "avg");
    in2[2] = tu_data_in(IR_I64, TU_SHAPE(2), ui);
    assert_int_equal(run_one(IR_OP_ScatterND, 3, in2, 1, &bad, out, &d), IR_ERR_UNSUPPORTED);
}

/* ---------------------------------------------------------------- Trilu */

static void check_trilu(ir_dtype t, ir_shape xs, bool upper, const int64_t *k) {
    size_t es = ir_dtype_size(t);
    int64_t n = ir_shape_numel(&xs), rows = xs.dims[xs.rank - 2], cols = xs.dims[xs.rank - 1];
    unsigned char *x = malloc((size_t)n * es + 1);
    for (size_t i = 0; i < (size_t)n * es; i++) x[i] = (unsigned char)(i % 251 + 1);
    tu_in in[2] = {tu_data_in(t, xs, x), tu_data_in(IR_I64, TU_SCALAR_SHAPE, k)};
    ir_attr a = tu_attr_int("upper", upper);
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(run_one(IR_OP_Trilu, k ? 2 : 1, in, 1, &a, out, &d), IR_OK);
    tu_expect_shape(&out[0], xs);
    int64_t kk = k ? *k : 0;
    const unsigned char *y = out[0].data;
    for (int64_t e = 0; e < n; e++) {
        int64_t i = e / cols % rows, j = e % cols;
        bool keep = upper ? j - i >= kk : j - i <= kk;
        for (size_t b = 0; b < es; b++)
            assert_int_equal(y[(size_t)e * es + b], keep ? x[(size_t)e * es + b] : 0);
    }
    free(x);
    tu_free_outputs(1, out);
}

static void test_trilu(void **state) {
    int64_t ks[] = {0, 1, -1, 2, -3, 100, -100, INT64_MAX, INT64_MIN};
    for (int u = 0; u < 2; u++) {
        check_trilu(IR_F32, TU_SHAPE(4, 5), u, NULL);
        for (int i = 0; i < 9; i++) {
            check_trilu(IR_F32, TU_SHAPE(4, 5), u, &ks[i]);
            check_trilu(IR_F64, TU_SHAPE(2, 3, 6, 3), u, &ks[i]);
            check_trilu(IR_U8, TU_SHAPE(3, 0), u, &ks[i]);
        }
    }
    float x[4] = {0};
    ir_diag d = {{0}};
    ir_tensor out[1];
    tu_in in[1] = {tu_data_in(IR_F32, TU_SHAPE(4), x)};
    assert_int_equal(run_one(IR_OP_Trilu, 1, in, 0, NULL, out, &d), IR_ERR_SHAPE);
}

/* ---------------------------------------------------------------- TopK */

/* TopK along the last axis: values and indices, ties in index order, largest and smallest. */
static void test_topk(void **state) {
    float x[2 * 5] = {3, 1, 4, 1, 5, /* */ 9, 2, 6, 5, 3};
    double xd[2 * 5];
    for (int i = 0; i < 10; i++) xd[i] = x[i];
    int64_t k3 = 3;
    for (int f64 = 0; f64 < 2; f64++)
        for (int largest = 0; largest < 2; largest++) {
            tu_in in[2] = {tu_data_in(f64 ? IR_F64 : IR_F32, TU_SHAPE(2, 5), f64 ? (void *)xd : x),
                           {.dtype = IR_I64, .shape = TU_SHAPE(1), .data = &k3, .constant = true}};
            ir_attr a = tu_attr_int("largest", largest);
            ir_tensor out[2];
            ir_diag d = {{0}};
            if (tu_run_op(IR_OP_TopK, 2, in, 2, 1, &a, out, &d) != IR_OK) fail_msg("%s", d.msg);
            tu_expect_shape(&out[0], TU_SHAPE(2, 3));
            static const int64_t big[6] = {4, 2, 0, 0, 2, 3}, small[6] = {1, 3, 0, 1, 4, 3};
            const int64_t *want = largest ? big : small;
            assert_memory_equal(out[1].data, want, sizeof big);
            for (int i = 0; i < 6; i++) {
                double v = f64 ? ((double *)out[0].data)[i] : ((float *)out[0].data)[i];
                assert_true(v == x[(i / 3) * 5 + want[i]]);
            }
            tu_free_outputs(2, out);
        }
}

static void test_op_table(void **state) {
    /* strong references: they pull ops-index.o out of the static library while the op table
     * refers to definitions weakly */
    const ir_op_def *defs[] = {&ir_opdef_Gather, &ir_opdef_GatherElements, &ir_opdef_ScatterND,
                               &ir_opdef_Trilu};
    ir_op_kind kinds[] = {IR_OP_Gather, IR_OP_GatherElements, IR_OP_ScatterND, IR_OP_Trilu};
    for (int i = 0; i < 4; i++) assert_ptr_equal(ir_op_get(kinds[i]), defs[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_elements), cmocka_unit_test(test_scatter_nd),
        cmocka_unit_test(test_trilu),           cmocka_unit_test(test_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
