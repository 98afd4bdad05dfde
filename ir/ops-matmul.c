/* ops-matmul.c - MatMul (numpy semantics: 1-D operands are promoted and the added dim removed,
 * batch dims broadcast) and Gemm (alpha, beta, transA, transB, C broadcast to (M, N)).
 *
 * float32 runs on cblas_sgemm and float64 on cblas_dgemm; integer dtypes (met when constant
 * folding runs shape arithmetic) take a plain triple loop in int64. When the right operand
 * has no batch (or a batch of ones), MatMul folds the left batch into M and issues one gemm.
 * An operand the executor flags as transposed (a transposed operand, ir.h) is read through the
 * gemm's trans flag. With ir_kernel_ctx.accumulate (a fused FissionAccumulate's part, written into
 * its buffer) both add the product to what the output holds: the gemm's beta = 1. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <cblas.h>

/* C[M,N] = alpha * op(A) op(B) + beta * C, row-major, for any dtype magpie stores. */
static void gemm_any(ir_dtype t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                     const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                     int64_t ldc) {
    if (M == 0 || N == 0) return;
    CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans, ctb = tb ? CblasTrans : CblasNoTrans;
    if (t == IR_F32) {
        cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B,
                    (int)ldb, (float)beta, C, (int)ldc);
        return;
    }
    if (t == IR_F64) {
        cblas_dgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
                    (int)ldb, beta, C, (int)ldc);
        return;
    }
    bool is_int = !ir_dtype_is_float(t);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t isum = 0;
            double fsum = 0;
            for (int64_t p = 0; p < K; p++) {
                int64_t ia = ta ? p * lda + i : i * lda + p, ib = tb ? j * ldb + p : p * ldb + j;
                if (is_int)
                    isum += ir_load_i64(A, t, ia) * ir_load_i64(B, t, ib);
                else
                    fsum += ir_load_f64(A, t, ia) * ir_load_f64(B, t, ib);
            }
            int64_t ic = i * ldc + j;
            if (is_int) {
                int64_t v =
                    (int64_t)alpha * isum + (beta != 0 ? (int64_t)beta * ir_load_i64(C, t, ic) : 0);
                ir_store_i64(C, t, ic, v);
            } else {
                double c0 = beta != 0 ? beta * ir_load_f64(C, t, ic) : 0;
                ir_store_f64(C, t, ic, alpha * fsum + c0);
            }
        }
}

static bool gemm_dtype_ok(ir_dtype t) {
    return t != IR_BOOL && t != IR_DTYPE_NONE;
}

/* ---------------------------------------------------------------- MatMul */

/* The operands as numpy sees them: A promoted to [..., M, K], B to [..., K, N]; batch the
 * broadcast batch shape. */
typedef struct mm_geom {
    ir_shape a, b, batch;
    int64_t M, K, N;
    bool a_vec, b_vec;
} mm_geom;

static ir_status mm_parse(const ir_shape *as, const ir_shape *bs, const ir_node *n, mm_geom *mg,
                          ir_diag *d) {
    char s1[96], s2[96];
    if (as->rank < 1 || bs->rank < 1)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "MatMul operands must have rank >= 1 (got %s, %s)",
                            ir_shape_str(as, s1, sizeof s1), ir_shape_str(bs, s2, sizeof s2));
    mg->a_vec = as->rank == 1;
    mg->b_vec = bs->rank == 1;
    mg->a = *as;
    mg->b = *bs;
    if (mg->a_vec) mg->a = ir_shape_make(2, (int64_t[]){1, as->dims[0]});
    if (mg->b_vec) mg->b = ir_shape_make(2, (int64_t[]){bs->dims[0], 1});
    int ra = mg->a.rank, rb = mg->b.rank;
    mg->M = mg->a.dims[ra - 2];
    mg->K = mg->a.dims[ra - 1];
    mg->N = mg->b.dims[rb - 1];
    if (mg->b.dims[rb - 2] != mg->K)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "MatMul of %s and %s: inner dimensions %lld and %lld differ",
                            ir_shape_str(as, s1, sizeof s1), ir_shape_str(bs, s2, sizeof s2),
                            (long long)mg->K, (long long)mg->b.dims[rb - 2]);
    ir_shape ba = ir_shape_make(ra - 2, mg->a.dims), bb = ir_shape_make(rb - 2, mg->b.dims);
    if (!ir_shape_broadcast(&ba, &bb, &mg->batch))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "MatMul of %s and %s: batch dims do not broadcast",
                            ir_shape_str(as, s1, sizeof s1), ir_shape_str(bs, s2, sizeof s2));
    return IR_OK;
}

static ir_status matmul_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *a = ir_node_in(g, n, 0), *b = ir_node_in(g, n, 1);
    if (a->dtype != b->dtype || !gemm_dtype_ok(a->dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "MatMul of %s and %s: dtypes must match",
                            ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
    mm_geom mg;
    ir_status st = mm_parse(&a->shape, &b->shape, n, &mg, d);
    if (st) return st;
    ir_shape out = mg.batch;
    if (out.rank + 2 > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "rank above %d", IR_MAX_RANK);
    if (!mg.a_vec) out.dims[out.rank++] = mg.M;
    if (!mg.b_vec) out.dims[out.rank++] = mg.N;
    ir_set_out(g, n, 0, a->dtype, &out);
    return IR_OK;
}

static double matmul_flops(const ir_graph *g, const ir_node *n) {
    mm_geom mg;
    if (mm_parse(&ir_node_in(g, n, 0)->shape, &ir_node_in(g, n, 1)->shape, n, &mg, NULL)) return 0;
    return 2.0 * (double)ir_shape_numel(&mg.batch) * (double)mg.M * (double)mg.N * (double)mg.K;
}

static ir_status matmul_kernel(const ir_kernel_ctx *k) {
    mm_geom mg;
    ir_status st = mm_parse(&k->in[0].shape, &k->in[1].shape, k->node, &mg, k->diag);
    if (st) return st;
    ir_dtype t = k->in[0].dtype;
    const size_t es = ir_dtype_size(t);
    const char *A = k->in[0].data, *B = k->in[1].data;
    char *C = k->out[0].data;
    const int64_t M = mg.M, K = mg.K, N = mg.N, nb = ir_shape_numel(&mg.batch);
    /* a transposed operand (ir_kernel_ctx.in_transposed) holds each matrix as its transpose */
    const bool ta = k->in_transposed & 1u, tb = k->in_transposed & 2u;
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    const double beta = k->accumulate ? 1.0 : 0.0;
    ir_shape ba = ir_shape_make(mg.a.rank - 2, mg.a.dims),
             bb = ir_shape_make(mg.b.rank - 2, mg.b.dims);
    if (ir_shape_numel(&bb) == 1 && !ta) { /* B is one matrix: fold A's batch into M */
        gemm_any(t, false, tb, nb * M, N, K, 1, A, lda, B, ldb, beta, C, N);
        return IR_OK;
    }
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    ir_broadcast_strides(&ba, &mg.batch, sa);
    ir_broadcast_strides(&bb, &mg.batch, sb);
    for (int64_t i = 0; i < nb; i++) {
        int64_t oa = 0, ob = 0;
        for (int dd = 0; dd < mg.batch.rank; dd++) {
            oa += idx[dd] * sa[dd];
            ob += idx[dd] * sb[dd];
        }
        gemm_any(t, ta, tb, M, N, K, 1, A + (size_t)(oa * M * K) * es, lda,
                 B + (size_t)(ob * K * N) * es, ldb, beta, C + (size_t)(i * M * N) * es, N);
        for (int dd = mg.batch.rank - 1; dd >= 0; dd--) { /* odometer over the output batch */
            if (++idx[dd] < mg.batch.dims[dd]) break;
            idx[dd] = 0;
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- Gemm */

static ir_status gemm_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *a = ir_node_in(g, n, 0), *b = ir_node_in(g, n, 1), *c = ir_node_in(g, n, 2);
    char s1[96], s2[96];
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "Gemm needs 2-D A and B (got %s, %s)",
                            ir_shape_str(&a->shape, s1, sizeof s1),
                            ir_shape_str(&b->shape, s2, sizeof s2));
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype) || !gemm_dtype_ok(a->dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "Gemm operands must share one numeric dtype");
    bool ta = ir_attr_int(n, "transA", 0), tb = ir_attr_int(n, "transB", 0);
    int64_t M = a->shape.dims[ta ? 1 : 0], K = a->shape.dims[ta ? 0 : 1];
    int64_t Kb = b->shape.dims[tb ? 1 : 0], N = b->shape.dims[tb ? 0 : 1];
    if (K != Kb)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "Gemm of %s and %s (transA=%d, transB=%d): inner dims %lld and %lld "
                            "differ",
                            ir_shape_str(&a->shape, s1, sizeof s1),
                            ir_shape_str(&b->shape, s2, sizeof s2), ta, tb, (long long)K,
                            (long long)Kb);
    ir_shape out = ir_shape_make(2, (int64_t[]){M, N}), bc;
    if (c &&
        (c->shape.rank > 2 || !ir_shape_broadcast(&c->shape, &out, &bc) || !ir_shape_eq(&bc, &out)))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "C of shape %s does not broadcast to %s",
                            ir_shape_str(&c->shape, s1, sizeof s1),
                            ir_shape_str(&out, s2, sizeof s2));
    ir_set_out(g, n, 0, a->dtype, &out);
    return IR_OK;
}

static double gemm_flops(const ir_graph *g, const ir_node *n) {
    const ir_value *a = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    bool ta = ir_attr_int(n, "transA", 0);
    double MN = (double)ir_shape_numel(&y->shape), K = (double)a->shape.dims[ta ? 0 : 1];
    return 2.0 * MN * K + (ir_node_in(g, n, 2) ? 2.0 * MN : 0);
}

static ir_status gemm_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *a = &k->in[0], *c = k->n_in > 2 && k->in[2].data ? &k->in[2] : NULL;
    ir_tensor *y = &k->out[0];
    ir_dtype t = a->dtype;
    bool ta = ir_attr_int(k->node, "transA", 0), tb = ir_attr_int(k->node, "transB", 0);
    double alpha = ir_attr_float(k->node, "alpha", 1.0f),
           beta = ir_attr_float(k->node, "beta", 1.0f);
    const int64_t M = y->shape.dims[0], N = y->shape.dims[1], K = a->shape.dims[ta ? 0 : 1];
    if (!c || beta == 0) beta = 0;
    if (!c && k->accumulate) beta = 1; /* Y += op(A) op(B): Y already holds the sum so far */
    if (c && beta != 0) {              /* Y = C broadcast, then gemm accumulates into it */
        int64_t st[2];
        ir_broadcast_strides(&c->shape, &y->shape, st);
        if (t == IR_F32) {
            const float *cs = c->data;
            float *yd = y->data;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) yd[i * N + j] = cs[i * st[0] + j * st[1]];
        } else {
            size_t es = ir_dtype_size(t);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    memcpy((char *)y->data + (size_t)(i * N + j) * es,
                           (const char *)c->data + (size_t)(i * st[0] + j * st[1]) * es, es);
        }
    }
    /* a transposed operand (ir_kernel_ctx.in_transposed) is stored as its transpose: flip the
     * flag and take its leading dimension from the stored layout */
    bool pa = k->in_transposed & 1u, pb = k->in_transposed & 2u;
    const ir_shape *as = &a->shape, *bs = &k->in[1].shape;
    gemm_any(t, ta != pa, tb != pb, M, N, K, alpha, a->data, as->dims[pa ? 0 : 1], k->in[1].data,
             bs->dims[pb ? 0 : 1], beta, y->data, N);
    return IR_OK;
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink) of MatMul: batch dims link from each operand where it is not broadcast
 * (numpy alignment, from the right), M from A, N from B (absent for 1-D operands), and K is
 * reduce axis 1, a sum, from both. */
static int matmul_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *a = ir_node_in(g, n, 0), *b = ir_node_in(g, n, 1), *y = ir_node_out(g, n, 0);
    mm_geom mg;
    if (mm_parse(&a->shape, &b->shape, n, &mg, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    int nb = mg.batch.rank, ra = a->shape.rank, rb = b->shape.rank;
    for (int i = 0; i < ra - 2; i++) /* batch dims of an operand of rank > 2 */
        if (a->shape.dims[i] == y->shape.dims[nb - (ra - 2) + i])
            ir_dims_keep(&o, 0, i, 0, nb - (ra - 2) + i);
    for (int i = 0; i < rb - 2; i++)
        if (b->shape.dims[i] == y->shape.dims[nb - (rb - 2) + i])
            ir_dims_keep(&o, 1, i, 0, nb - (rb - 2) + i);
    if (!mg.a_vec) ir_dims_keep(&o, 0, ra - 2, 0, nb);
    if (!mg.b_vec) ir_dims_keep(&o, 1, rb - 1, 0, y->shape.rank - 1);
    ir_dims_reduce(&o, 0, ra - 1, 1, true);
    ir_dims_reduce(&o, 1, mg.b_vec ? 0 : rb - 2, 1, true);
    return ir_dims_end(&o);
}

/* Dims of Gemm: M from A, N from B (through transA/transB), C where it is not broadcast; K is a
 * sum from A and B only when no C is added (beta 0 or no C): the parts would each add it. */
static int gemm_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *c = ir_node_in(g, n, 2);
    bool ta = ir_attr_int(n, "transA", 0), tb = ir_attr_int(n, "transB", 0);
    bool adds_c = c && ir_attr_float(n, "beta", 1.0f) != 0;
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, ta ? 1 : 0, 0, 0);
    ir_dims_keep(&o, 1, tb ? 0 : 1, 0, 1);
    if (adds_c) ir_dims_broadcast(g, n, 2, 0, &o);
    if (!adds_c) {
        ir_dims_reduce(&o, 0, ta ? 0 : 1, 1, true);
        ir_dims_reduce(&o, 1, tb ? 1 : 0, 1, true);
    }
    return ir_dims_end(&o);
}

IR_OP_DEF(MatMul, 2, 2, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = matmul_infer,
          .flops = matmul_flops, .kernel = matmul_kernel, .grad = ir_grad_MatMul,
          .dims = matmul_dims);

IR_OP_DEF(Gemm, 2, 3, 1, 1, .infer = gemm_infer, .flops = gemm_flops, .kernel = gemm_kernel,
          .grad = ir_grad_Gemm, .dims = gemm_dims);
