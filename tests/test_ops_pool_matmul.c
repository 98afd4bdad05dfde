/* test_ops_pool_matmul.c - MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, MatMul and
 * Gemm against naive references written here: pads, strides, dilations, ceil_mode,
 * count_include_pad, auto_pad, Indices; MatMul broadcasting incl. 1-D operands and other
 * dtypes; Gemm transposes, alpha/beta and C broadcasting; and the shape errors. */
#include "test-util.h"

#include "ir-impl.h"

static void test_op_table(void **st) {
    const ir_op_def *defs[] = {
        &ir_opdef_MaxPool,       &ir_opdef_AveragePool, &ir_opdef_GlobalAveragePool,
        &ir_opdef_GlobalMaxPool, &ir_opdef_MatMul,      &ir_opdef_Gemm};
    ir_op_kind kinds[] = {IR_OP_MaxPool,       IR_OP_AveragePool, IR_OP_GlobalAveragePool,
                          IR_OP_GlobalMaxPool, IR_OP_MatMul,      IR_OP_Gemm};
    for (int i = 0; i < 6; i++) {
        assert_ptr_equal(ir_op_get(kinds[i]), defs[i]);
        assert_int_equal(ir_op_find("", defs[i]->name), kinds[i]);
    }
}

/* ---------------------------------------------------------------- pools */

typedef struct pl_case {
    int S;
    int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
    bool ceil_mode, count_pad, is_max;
} pl_case;

/* Output size with PyTorch's rule: a last window starting in the end padding is dropped. */
static int64_t pl_out(const pl_case *c, int i) {
    int64_t dk = (c->k[i] - 1) * c->d[i] + 1, span = c->in[i] + c->pads[i] + c->pads[c->S + i] - dk;
    int64_t o = (c->ceil_mode ? (span + c->s[i] - 1) / c->s[i] : span / c->s[i]) + 1;
    if (c->ceil_mode && (o - 1) * c->s[i] >= c->in[i] + c->pads[i]) o--;
    return o;
}

/* Reference over flattened spatial positions, any S: visits every window tap explicitly. */
static void pl_ref(const pl_case *c, const float *x, float *y, int64_t *idx) {
    int S = c->S;
    int64_t out[3] = {1, 1, 1}, IS = 1, OS = 1;
    for (int i = 0; i < S; i++) {
        out[i] = pl_out(c, i);
        IS *= c->in[i];
        OS *= out[i];
    }
    for (int64_t p = 0; p < c->N * c->C; p++)
        for (int64_t o = 0; o < OS; o++) {
            int64_t oi[3], rem = o;
            for (int i = S - 1; i >= 0; i--) {
                oi[i] = rem % out[i];
                rem /= out[i];
            }
            int64_t taps = 1;
            for (int i = 0; i < S; i++) taps *= c->k[i];
            double best = -INFINITY, sum = 0;
            int64_t bi = -1, cnt = 0, cnt_pad = 1;
            for (int i = 0; i < S; i++) {
                int64_t st = oi[i] * c->s[i] - c->pads[i];
                int64_t e = st + c->k[i] < c->in[i] + c->pads[S + i] ? st + c->k[i]
                                                                     : c->in[i] + c->pads[S + i];
                cnt_pad *= e - st;
            }
            for (int64_t t = 0; t < taps; t++) {
                int64_t ti[3], r2 = t, flat = 0;
                bool inside = true;
                for (int i = S - 1; i >= 0; i--) {
                    ti[i] = r2 % c->k[i];
                    r2 /= c->k[i];
                }
                for (int i = 0; i < S; i++) {
                    int64_t pos = oi[i] * c->s[i] - c->pads[i] + ti[i] * c->d[i];
                    if (pos < 0 || pos >= c->in[i]) inside = false;
                    flat = flat * c->in[i] + pos;
                }
                if (!inside) continue;
                float v = x[p * IS + flat];
                if (v > best) {
                    best = v;
                    bi = p * IS + flat;
                }
                sum += v;
                cnt++;
            }
            y[p * OS + o] = c->is_max ? (float)best : (float)(sum / (c->count_pad ? cnt_pad : cnt));
            if (idx) idx[p * OS + o] = bi;
        }
}

/* Row-major plane offsets of idx (as pl_ref writes them) in column-major order per plane: the
 * first spatial dim varies fastest (storage_order=1). */
static void pl_col_major(const pl_case *c, int64_t *idx, int64_t n) {
    int64_t IS = 1;
    for (int i = 0; i < c->S; i++) IS *= c->in[i];
    for (int64_t j = 0; j < n; j++) {
        int64_t off = idx[j] % IS, col = 0, stride = 1, pos[3];
        for (int i = c->S - 1; i >= 0; i--) {
            pos[i] = off % c->in[i];
            off /= c->in[i];
        }
        for (int i = 0; i < c->S; i++) {
            col += pos[i] * stride;
            stride *= c->in[i];
        }
        idx[j] = idx[j] / IS * IS + col;
    }
}

/* MaxPool or AveragePool of float32 X, or MaxPool of int8/uint8 X (t; values on a coarse grid so
 * that windows hold ties, which take the first in row-major order), with Indices in
 * storage_order so (MaxPool), against pl_ref. */
static void run_pool_as(const pl_case *c, bool with_indices, ir_dtype t, int so) {
    int S = c->S;
    ir_shape xs = {.rank = S + 2, .dims = {c->N, c->C}};
    int64_t OS = 1, ks[3], st[3], dl[3], pads[6];
    for (int i = 0; i < S; i++) {
        xs.dims[2 + i] = c->in[i];
        OS *= pl_out(c, i);
        ks[i] = c->k[i];
        st[i] = c->s[i];
        dl[i] = c->d[i];
    }
    memcpy(pads, c->pads, sizeof pads);
    int64_t nx = ir_shape_numel(&xs), ny = c->N * c->C * OS;
    float *x = malloc(sizeof(float) * (size_t)nx), *ref = malloc(sizeof(float) * (size_t)ny);
    int64_t *ridx = malloc(sizeof(int64_t) * (size_t)ny);
    tu_fill(x, nx, 21);
    void *xt = x;
    if (t == IR_U8 || t == IR_I8) { /* integer values, the reference computed on them */
        xt = malloc((size_t)nx);
        for (int64_t i = 0; i < nx; i++) {
            int v = (int)lrintf(x[i] * 20) + (t == IR_U8 ? 200 : -100);
            x[i] = (float)v;
            if (t == IR_U8)
                ((uint8_t *)xt)[i] = (uint8_t)v;
            else
                ((int8_t *)xt)[i] = (int8_t)v;
        }
    }
    ir_attr at[7];
    int na = 0;
    at[na++] = tu_attr_ints("kernel_shape", S, ks);
    at[na++] = tu_attr_ints("strides", S, st);
    at[na++] = tu_attr_ints("pads", 2 * S, pads);
    at[na++] = tu_attr_int("ceil_mode", c->ceil_mode);
    if (c->is_max)
        at[na++] = tu_attr_ints("dilations", S, dl);
    else
        at[na++] = tu_attr_int("count_include_pad", c->count_pad);
    if (so) at[na++] = tu_attr_int("storage_order", so);
    tu_in in[1] = {{t, xs, xt, false}};
    ir_tensor out[2];
    ir_diag d = {{0}};
    int n_out = with_indices ? 2 : 1;
    ir_status s =
        tu_run_op(c->is_max ? IR_OP_MaxPool : IR_OP_AveragePool, 1, in, n_out, na, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    for (int i = 0; i < S; i++) assert_int_equal(out[0].shape.dims[2 + i], pl_out(c, i));
    pl_ref(c, x, ref, ridx);
    if (so) pl_col_major(c, ridx, ny);
    assert_int_equal(out[0].dtype, t);
    if (t == IR_F32) {
        assert_true(tu_rel_err_f32(out[0].data, ref, ny) < 1e-6);
    } else {
        for (int64_t i = 0; i < ny; i++)
            assert_int_equal(t == IR_U8 ? ((const uint8_t *)out[0].data)[i]
                                        : ((const int8_t *)out[0].data)[i],
                             (int)ref[i]);
    }
    if (with_indices) {
        assert_int_equal(out[1].dtype, IR_I64);
        assert_memory_equal(out[1].data, ridx, sizeof(int64_t) * (size_t)ny);
    }
    tu_free_outputs(n_out, out);
    if (xt != x) free(xt);
    free(x);
    free(ref);
    free(ridx);
}

static void run_pool(const pl_case *c, bool with_indices) {
    run_pool_as(c, with_indices, IR_F32, 0);
}

static void test_maxpool(void **st) {
    pl_case c = {.S = 2,
                 .N = 2,
                 .C = 3,
                 .in = {9, 10},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .pads = {1, 1, 1, 1},
                 .is_max = true};
    run_pool(&c, true);
    pl_case ceil = {.S = 2,
                    .N = 1,
                    .C = 2,
                    .in = {7, 8},
                    .k = {2, 3},
                    .s = {2, 2},
                    .d = {1, 1},
                    .ceil_mode = true,
                    .is_max = true};
    run_pool(&ceil, false);
    /* ceil_mode where the last window would start in the padding and is dropped */
    pl_case drop = {.S = 2,
                    .N = 1,
                    .C = 1,
                    .in = {5, 5},
                    .k = {2, 2},
                    .s = {2, 2},
                    .d = {1, 1},
                    .pads = {1, 1, 1, 1},
                    .ceil_mode = true,
                    .is_max = true};
    run_pool(&drop, false);
    pl_case dil = {.S = 2,
                   .N = 1,
                   .C = 2,
                   .in = {11, 9},
                   .k = {3, 2},
                   .s = {1, 2},
                   .d = {2, 3},
                   .pads = {2, 0, 1, 1},
                   .is_max = true};
    run_pool(&dil, true);
    pl_case one = {.S = 1,
                   .N = 2,
                   .C = 2,
                   .in = {13},
                   .k = {4},
                   .s = {3},
                   .d = {1},
                   .pads = {1, 2},
                   .is_max = true};
    run_pool(&one, false);
    pl_case three = {.S = 3,
                     .N = 1,
                     .C = 2,
                     .in = {5, 6, 7},
                     .k = {2, 3, 2},
                     .s = {2, 2, 1},
                     .d = {1, 1, 1},
                     .pads = {0, 1, 1, 1, 1, 0},
                     .is_max = true};
    run_pool(&three, false);
    /* int8 and uint8 (opset 12), and Indices in column-major order (storage_order=1) */
    for (int so = 0; so < 2; so++) {
        run_pool_as(&c, true, IR_U8, so);
        run_pool_as(&dil, true, IR_I8, so);
        run_pool_as(&three, true, IR_F32, so);
        run_pool_as(&three, true, IR_I8, so);
        run_pool_as(&one, true, IR_U8, so);
    }
}

static void test_avgpool(void **st) {
    pl_case c = {.S = 2,
                 .N = 2,
                 .C = 3,
                 .in = {9, 10},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .pads = {1, 1, 1, 1}};
    run_pool(&c, false);
    c.count_pad = true;
    run_pool(&c, false);
    /* ceil_mode overhang is not counted even with count_include_pad */
    pl_case ceil = {.S = 2,
                    .N = 1,
                    .C = 2,
                    .in = {7, 8},
                    .k = {3, 3},
                    .s = {2, 2},
                    .d = {1, 1},
                    .pads = {1, 0, 1, 0},
                    .ceil_mode = true,
                    .count_pad = true};
    run_pool(&ceil, false);
    ceil.count_pad = false;
    run_pool(&ceil, false);
    pl_case one = {.S = 1,
                   .N = 1,
                   .C = 3,
                   .in = {10},
                   .k = {3},
                   .s = {1},
                   .d = {1},
                   .pads = {1, 1},
                   .count_pad = true};
    run_pool(&one, false);
    pl_case three = {.S = 3,
                     .N = 1,
                     .C = 2,
                     .in = {4, 5, 6},
                     .k = {2, 2, 3},
                     .s = {2, 1, 2},
                     .d = {1, 1, 1},
                     .pads = {0, 1, 1, 1, 0, 1}};
    run_pool(&three, false);
}

static void test_pool_auto_pad_and_errors(void **st) {
    float x[1 * 1 * 7 * 7];
    tu_fill(x, 49, 5);
    int64_t ks[2] = {3, 3}, s2[2] = {2, 2};
    ir_attr at[3] = {tu_attr_ints("kernel_shape", 2, ks), tu_attr_ints("strides", 2, s2),
                     tu_attr_str("auto_pad", "SAME_UPPER")};
    tu_in in[1] = {{IR_F32, TU_SHAPE(1, 1, 7, 7), x, false}};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_MaxPool, 1, in, 1, 3, at, out, &d), IR_OK);
    /* out = ceil(7/2) = 4, total pad 2 -> 1 each side: same as explicit pads 1 */
    pl_case c = {.S = 2,
                 .N = 1,
                 .C = 1,
                 .in = {7, 7},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .pads = {1, 1, 1, 1},
                 .is_max = true};
    float ref[16];
    pl_ref(&c, x, ref, NULL);
    assert_int_equal(out[0].shape.dims[2], 4);
    assert_memory_equal(out[0].data, ref, sizeof ref);
    tu_free_outputs(1, out);
    /* no kernel_shape */
    assert_int_equal(tu_run_op(IR_OP_MaxPool, 1, in, 1, 1, &at[1], out, &d), IR_ERR_INVALID);
    /* rank 2 input */
    in[0].shape = TU_SHAPE(7, 7);
    assert_int_equal(tu_run_op(IR_OP_AveragePool, 1, in, 1, 2, at, out, &d), IR_ERR_SHAPE);
    assert_int_equal(tu_run_op(IR_OP_GlobalAveragePool, 1, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* window larger than the input */
    in[0].shape = TU_SHAPE(1, 1, 2, 2);
    assert_int_equal(tu_run_op(IR_OP_MaxPool, 1, in, 1, 1, at, out, &d), IR_ERR_SHAPE);
}

static void test_global_pools(void **st) {
    enum { N = 2, C = 3, H = 5, W = 7 };
    float x[N * C * H * W], avg[N * C], mx[N * C];
    tu_fill(x, N * C * H * W, 8);
    for (int p = 0; p < N * C; p++) {
        double s = 0;
        float m = -INFINITY;
        for (int i = 0; i < H * W; i++) {
            s += x[p * H * W + i];
            m = fmaxf(m, x[p * H * W + i]);
        }
        avg[p] = (float)(s / (H * W));
        mx[p] = m;
    }
    tu_in in[1] = {{IR_F32, TU_SHAPE(N, C, H, W), x, false}};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_GlobalAveragePool, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){4, {N, C, 1, 1}}));
    assert_true(tu_rel_err_f32(out[0].data, avg, N * C) < 1e-6);
    tu_free_outputs(1, out);
    in[0].shape = TU_SHAPE(N, C, H * W); /* 1-D spatial */
    assert_int_equal(tu_run_op(IR_OP_GlobalMaxPool, 1, in, 1, 0, NULL, out, &d), IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){3, {N, C, 1}}));
    assert_memory_equal(out[0].data, mx, sizeof mx);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- MatMul */

/* Naive numpy matmul reference in double for shapes already promoted to >= 2-D. */
static void mm_ref(const ir_shape *a, const ir_shape *b, const float *A, const float *B,
                   const ir_shape *batch, double *C) {
    int ra = a->rank, rb = b->rank, R = batch->rank;
    int64_t M = a->dims[ra - 2], K = a->dims[ra - 1], N = b->dims[rb - 1];
    int64_t nb = ir_shape_numel(batch);
    for (int64_t i = 0; i < nb; i++) {
        int64_t bi[IR_MAX_RANK], rem = i, oa = 0, ob = 0;
        for (int dd = R - 1; dd >= 0; dd--) {
            bi[dd] = rem % batch->dims[dd];
            rem /= batch->dims[dd];
        }
        for (int dd = 0; dd < ra - 2; dd++) {
            int64_t dim = a->dims[dd];
            oa = oa * dim + (dim == 1 ? 0 : bi[R - (ra - 2) + dd]);
        }
        for (int dd = 0; dd < rb - 2; dd++) {
            int64_t dim = b->dims[dd];
            ob = ob * dim + (dim == 1 ? 0 : bi[R - (rb - 2) + dd]);
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)A[oa * M * K + m * K + k] * B[ob * K * N + k * N + n];
                C[i * M * N + m * N + n] = s;
            }
    }
}

static void run_matmul(ir_shape as, ir_shape bs, ir_shape expect) {
    int64_t na = ir_shape_numel(&as), nb = ir_shape_numel(&bs), ny = ir_shape_numel(&expect);
    float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
    double *ref = malloc(sizeof(double) * (size_t)ny);
    float *reff = malloc(sizeof(float) * (size_t)ny);
    tu_fill(A, na, 31);
    tu_fill(B, nb, 32);
    ir_shape a2 = as, b2 = bs, ba = {0}, bb = {0}, batch;
    if (as.rank == 1) a2 = TU_SHAPE(1, as.dims[0]);
    if (bs.rank == 1) b2 = TU_SHAPE(bs.dims[0], 1);
    ba.rank = a2.rank - 2;
    bb.rank = b2.rank - 2;
    memcpy(ba.dims, a2.dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, b2.dims, sizeof(int64_t) * (size_t)bb.rank);
    assert_true(ir_shape_broadcast(&ba, &bb, &batch));
    mm_ref(&a2, &b2, A, B, &batch, ref);
    for (int64_t i = 0; i < ny; i++) reff[i] = (float)ref[i];
    tu_in in[2] = {{IR_F32, as, A, false}, {IR_F32, bs, B, true}};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_MatMul, 2, in, 1, 0, NULL, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &expect));
    assert_true(tu_rel_err_f32(out[0].data, reff, ny) < 1e-6);
    tu_free_outputs(1, out);
    free(A);
    free(B);
    free(ref);
    free(reff);
}

static void test_matmul_broadcast(void **st) {
    run_matmul(TU_SHAPE(2, 3, 4, 5), TU_SHAPE(5, 6), TU_SHAPE(2, 3, 4, 6));    /* folded */
    run_matmul(TU_SHAPE(3, 1, 4, 5), TU_SHAPE(2, 5, 6), TU_SHAPE(3, 2, 4, 6)); /* broadcast */
    run_matmul(TU_SHAPE(4, 5), TU_SHAPE(2, 5, 6), TU_SHAPE(2, 4, 6));
    run_matmul(TU_SHAPE(2, 4, 5), TU_SHAPE(1, 5, 3), TU_SHAPE(2, 4, 3));
    run_matmul(TU_SHAPE(5), TU_SHAPE(5, 6), TU_SHAPE(6));
    run_matmul(TU_SHAPE(2, 4, 5), TU_SHAPE(5), TU_SHAPE(2, 4));
    run_matmul(TU_SHAPE(5), TU_SHAPE(3, 5, 2), TU_SHAPE(3, 2));
    run_matmul(TU_SHAPE(7), TU_SHAPE(7), TU_SCALAR_SHAPE);
}

static void test_matmul_dtypes_and_errors(void **st) {
    double a64[6] = {1, 2, 3, 4, 5, 6}, b64[6] = {1, 0, -1, 2, 0.5, 3};
    int64_t ai[6] = {1, 2, 3, 4, 5, 6}, bi[6] = {7, 8, 9, 10, 11, 12};
    tu_in in[2] = {{IR_F64, TU_SHAPE(2, 3), a64, false}, {IR_F64, TU_SHAPE(3, 2), b64, false}};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_MatMul, 2, in, 1, 0, NULL, out, &d), IR_OK);
    double e64[4] = {1 * 1 + 2 * -1 + 3 * 0.5, 1 * 0 + 2 * 2 + 3 * 3, 4 * 1 + 5 * -1 + 6 * 0.5,
                     4 * 0 + 5 * 2 + 6 * 3};
    assert_int_equal(out[0].dtype, IR_F64);
    for (int i = 0; i < 4; i++) assert_true(fabs(((double *)out[0].data)[i] - e64[i]) < 1e-12);
    tu_free_outputs(1, out);
    in[0] = (tu_in){IR_I64, TU_SHAPE(2, 3), ai, false};
    in[1] = (tu_in){IR_I64, TU_SHAPE(3, 2), bi, false};
    assert_int_equal(tu_run_op(IR_OP_MatMul, 2, in, 1, 0, NULL, out, &d), IR_OK);
    int64_t ei[4] = {58, 64, 139, 154};
    assert_memory_equal(out[0].data, ei, sizeof ei);
    tu_free_outputs(1, out);
    /* inner dims differ */
    in[1].shape = TU_SHAPE(2, 3);
    assert_int_equal(tu_run_op(IR_OP_MatMul, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    /* batch dims that do not broadcast */
    float f[64] = {0};
    tu_in fin[2] = {{IR_F32, TU_SHAPE(2, 2, 2), f, false}, {IR_F32, TU_SHAPE(3, 2, 2), f, false}};
    assert_int_equal(tu_run_op(IR_OP_MatMul, 2, fin, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* mixed dtypes */
    fin[1] = (tu_in){IR_F64, TU_SHAPE(2, 2), a64, false};
    assert_int_equal(tu_run_op(IR_OP_MatMul, 2, fin, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
}

/* ---------------------------------------------------------------- Gemm */

static void run_gemm(bool ta, bool tb, float alpha, float beta, const ir_shape *cs) {
    enum { M = 5, K = 7, N = 6 };
    float A[M * K], B[K * N], C[M * N], ref[M * N];
    tu_fill(A, M * K, 41);
    tu_fill(B, K * N, 42);
    tu_fill(C, M * N, 43);
    int64_t cst[2] = {0, 0};
    if (cs) {
        ir_shape full = TU_SHAPE(M, N);
        ir_broadcast_strides(cs, &full, cst);
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s +=
                    (double)(ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[n * K + k] : B[k * N + n]);
            ref[m * N + n] = (float)(alpha * s + (cs ? beta * C[m * cst[0] + n * cst[1]] : 0));
        }
    ir_attr at[4] = {tu_attr_int("transA", ta), tu_attr_int("transB", tb),
                     tu_attr_float("alpha", alpha), tu_attr_float("beta", beta)};
    tu_in in[3] = {{IR_F32, ta ? TU_SHAPE(K, M) : TU_SHAPE(M, K), A, false},
                   {IR_F32, tb ? TU_SHAPE(N, K) : TU_SHAPE(K, N), B, true},
                   {IR_F32, cs ? *cs : TU_SCALAR_SHAPE, cs ? C : NULL, true}};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_Gemm, 3, in, 1, 4, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){2, {M, N}}));
    assert_true(tu_rel_err_f32(out[0].data, ref, M * N) < 1e-6);
    tu_free_outputs(1, out);
}

static void test_gemm(void **st) {
    ir_shape cn = TU_SHAPE(6), cm1 = TU_SHAPE(5, 1), cmn = TU_SHAPE(5, 6), c0 = TU_SCALAR_SHAPE;
    ir_shape c1n = TU_SHAPE(1, 6);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) run_gemm(ta, tb, 1.0f, 1.0f, &cn);
    run_gemm(false, true, 0.5f, 2.0f, &cmn);
    run_gemm(true, false, -1.5f, 0.25f, &cm1);
    run_gemm(false, false, 2.0f, 3.0f, &c0);
    run_gemm(true, true, 1.0f, -1.0f, &c1n);
    run_gemm(false, true, 1.0f, 1.0f, NULL);
    run_gemm(false, false, 1.0f, 0.0f, &cmn);
}

static void test_gemm_errors(void **st) {
    float f[64] = {0};
    ir_tensor out[1];
    ir_diag d = {{0}};
    tu_in in[3] = {{IR_F32, TU_SHAPE(3, 4), f, false},
                   {IR_F32, TU_SHAPE(5, 6), f, false},
                   {IR_F32, TU_SHAPE(6), f, false}};
    assert_int_equal(tu_run_op(IR_OP_Gemm, 3, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    in[1].shape = TU_SHAPE(4, 6);
    in[2].shape = TU_SHAPE(4);
    assert_int_equal(tu_run_op(IR_OP_Gemm, 3, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    in[2].shape = TU_SHAPE(3, 6);
    assert_int_equal(tu_run_op(IR_OP_Gemm, 3, in, 1, 0, NULL, out, &d), IR_OK);
    tu_free_outputs(1, out);
    in[0].shape = TU_SHAPE(3, 4, 1);
    assert_int_equal(tu_run_op(IR_OP_Gemm, 3, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_avgpool),
        cmocka_unit_test(test_pool_auto_pad_and_errors),
        cmocka_unit_test(test_global_pools),
        cmocka_unit_test(test_matmul_broadcast),
        cmocka_unit_test(test_matmul_dtypes_and_errors),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
