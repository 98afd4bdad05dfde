/* grad-matmul.c - gradient builders of MatMul (numpy semantics: 1-D promotion, broadcast
 * batch dims) and Gemm (transA, transB, alpha, beta, broadcast C) (ir-autodiff.h).
 *
 * 2-D products use Gemm's transpose flags, so no transposed copy is made (PyTorch's mm
 * backward uses transposed views the same way). A batched product against a 2-D weight (the
 * Linear layer of transformers, [B,T,K] x [K,N]) folds the batch into rows for the weight's
 * gradient: one [K,BT] x [BT,N] Gemm instead of B products and a reduction. Other batched
 * cases transpose the last two dims, multiply, and let ir_grad_accumulate sum the broadcast. */
#include "ir-autodiff.h"
#include "ir-impl.h"

static int gemm(ir_grad_ctx *c, int a, int b, bool ta, bool tb, double alpha) {
    ir_attr at[3] = {ir_grad_attr_int("transA", ta), ir_grad_attr_int("transB", tb),
                     ir_grad_attr_float("alpha", (float)alpha)};
    return ir_grad_op(c, IR_OP_Gemm, 2, (int[]){a, b}, alpha == 1.0 ? 2 : 3, at);
}

/* Swaps the last two dims. */
static int transpose_last2(ir_grad_ctx *c, int v) {
    int r = ir_grad_shape(c, v).rank;
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    return ir_grad_transpose(c, v, r, perm);
}

ir_status ir_grad_MatMul(ir_grad_ctx *c) {
    ir_shape as = ir_grad_shape(c, c->in[0]), bs = ir_grad_shape(c, c->in[1]);
    /* numpy's promotion: A [K] -> [1,K], B [K] -> [K,1]; dY viewed with M and N restored */
    ir_shape ap = as, bp = bs, yp, ab = {0}, bb = {0};
    if (as.rank == 1) ap = ir_shape_make(2, (int64_t[]){1, as.dims[0]});
    if (bs.rank == 1) bp = ir_shape_make(2, (int64_t[]){bs.dims[0], 1});
    ab = ir_shape_make(ap.rank - 2, ap.dims);
    bb = ir_shape_make(bp.rank - 2, bp.dims);
    if (!ir_shape_broadcast(&ab, &bb, &yp) || yp.rank + 2 > IR_MAX_RANK)
        return ir_grad_fail(c, IR_ERR_SHAPE, "batch dims do not broadcast");
    int64_t M = ap.dims[ap.rank - 2], K = ap.dims[ap.rank - 1], N = bp.dims[bp.rank - 1];
    yp.dims[yp.rank++] = M;
    yp.dims[yp.rank++] = N;
    int a = ir_grad_reshape(c, c->in[0], &ap), b = ir_grad_reshape(c, c->in[1], &bp);
    int dy = ir_grad_reshape(c, ir_grad_gout(c, 0), &yp);
    if (ir_grad_needs(c, 0)) {
        int da = bp.rank == 2 && yp.rank == 2
                     ? gemm(c, dy, b, false, true, 1.0)
                     : ir_grad_op2(c, IR_OP_MatMul, dy, transpose_last2(c, b));
        ir_grad_accumulate(c, 0, da); /* sums the broadcast batch, drops a promoted M = 1 */
    }
    if (ir_grad_needs(c, 1)) {
        int db;
        if (bp.rank == 2) { /* fold every batch dim of A and dY into rows */
            ir_shape a2 = ir_shape_make(2, (int64_t[]){ir_shape_numel(&ap) / (K ? K : 1), K});
            ir_shape y2 = ir_shape_make(2, (int64_t[]){ir_shape_numel(&yp) / (N ? N : 1), N});
            db = gemm(c, ir_grad_reshape(c, a, &a2), ir_grad_reshape(c, dy, &y2), true, false, 1.0);
            db = ir_grad_reshape(c, db, &bs); /* [K,1] -> [K] for a promoted B */
        } else {
            db = ir_grad_op2(c, IR_OP_MatMul, transpose_last2(c, a), dy);
        }
        ir_grad_accumulate(c, 1, db);
    }
    return ir_grad_status(c);
}

/* Y = alpha op(A) op(B) + beta C, op(X) = X or X^T:
 *   dA = alpha dY op(B)^T  (transA=0)   or alpha op(B) dY^T  (transA=1)
 *   dB = alpha op(A)^T dY  (transB=0)   or alpha dY^T op(A)  (transB=1)
 *   dC = beta dY, summed over C's broadcast. */
ir_status ir_grad_Gemm(ir_grad_ctx *c) {
    bool ta = ir_attr_int(c->node, "transA", 0) != 0, tb = ir_attr_int(c->node, "transB", 0) != 0;
    double alpha = ir_attr_float(c->node, "alpha", 1.0f),
           beta = ir_attr_float(c->node, "beta", 1.0f);
    int dy = ir_grad_gout(c, 0), a = c->in[0], b = c->in[1];
    if (ir_grad_needs(c, 0))
        ir_grad_accumulate(
            c, 0, ta ? gemm(c, b, dy, tb, true, alpha) : gemm(c, dy, b, false, !tb, alpha));
    if (ir_grad_needs(c, 1))
        ir_grad_accumulate(
            c, 1, tb ? gemm(c, dy, a, true, ta, alpha) : gemm(c, a, dy, !ta, false, alpha));
    if (ir_grad_needs(c, 2)) ir_grad_accumulate(c, 2, ir_grad_scale(c, dy, beta));
    return ir_grad_status(c);
}
