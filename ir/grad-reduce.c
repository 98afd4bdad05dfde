/* grad-reduce.c - gradient builders of the reductions and CumSum.
 *  - ReduceSum / ReduceMean: dY (scaled by 1/R for the mean, while it is small) reshaped to the
 *    kept-dims shape and expanded to X: existing ops express it exactly;
 *  - ReduceMax / ReduceMin / ReduceL2 / ReduceProd: one fused ReduceGrad(dY, X, Y) (ties share
 *    the gradient evenly, as torch.amax does);
 *  - CumSum: the cumulative sum of dY in the other direction (same axis, same exclusive).
 * A reduction with empty axes and noop_with_empty_axes is the identity. The axes are resolved with
 * the forward's own ir_reduce_axes. */
#include "ir-autodiff.h"
#include "ir-impl.h"

/* The reduced-axes mask of the forward node; false when the node is the identity (then dY is
 * X's gradient and has been accumulated). */
static bool axes_or_identity(ir_grad_ctx *c, bool *mask) {
    ir_diag d = {{0}};
    bool noop = false;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_status st = ir_reduce_axes(c->g, c->node, xs.rank, mask, &noop, &d);
    if (st) {
        ir_grad_fail(c, st, "%s", d.msg);
        return false;
    }
    if (noop) ir_grad_accumulate(c, 0, ir_grad_gout(c, 0));
    return !noop;
}

static ir_status sum_like(ir_grad_ctx *c, bool mean) {
    bool mask[IR_MAX_RANK];
    if (!ir_grad_needs(c, 0) || !axes_or_identity(c, mask)) return ir_grad_status(c);
    ir_shape xs = ir_grad_shape(c, c->in[0]), ks = xs;
    int64_t R = 1;
    for (int i = 0; i < xs.rank; i++)
        if (mask[i]) {
            R *= xs.dims[i];
            ks.dims[i] = 1;
        }
    int dy = ir_grad_gout(c, 0);
    if (mean && R > 0) dy = ir_grad_scale(c, dy, 1.0 / (double)R);
    dy = ir_grad_reshape(c, dy, &ks);
    int dx = ir_grad_op2(c, IR_OP_Expand, dy, ir_grad_const_i64(c, xs.rank, xs.dims));
    return ir_grad_accumulate(c, 0, dx);
}

ir_status ir_grad_ReduceSum(ir_grad_ctx *c) {
    return sum_like(c, false);
}

ir_status ir_grad_ReduceMean(ir_grad_ctx *c) {
    return sum_like(c, true);
}

static ir_status fused(ir_grad_ctx *c, const char *mode) {
    bool mask[IR_MAX_RANK];
    if (!ir_grad_needs(c, 0) || !axes_or_identity(c, mask)) return ir_grad_status(c);
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    int64_t axes[IR_MAX_RANK];
    int na = 0;
    for (int i = 0; i < xs.rank; i++)
        if (mask[i]) axes[na++] = i;
    ir_attr a[2] = {ir_grad_attr_str(c, "mode", mode), ir_grad_attr_ints(c, "axes", na, axes)};
    int in[3] = {ir_grad_gout(c, 0), c->in[0], c->out[0]};
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_ReduceGrad, 3, in, 2, a));
}

ir_status ir_grad_ReduceMax(ir_grad_ctx *c) {
    return fused(c, "max");
}

ir_status ir_grad_ReduceMin(ir_grad_ctx *c) {
    return fused(c, "min");
}

ir_status ir_grad_ReduceL2(ir_grad_ctx *c) {
    return fused(c, "l2");
}

ir_status ir_grad_ReduceProd(ir_grad_ctx *c) {
    return fused(c, "prod");
}

ir_status ir_grad_CumSum(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_attr a[2] = {ir_grad_attr_int("exclusive", ir_attr_int(c->node, "exclusive", 0)),
                    ir_grad_attr_int("reverse", !ir_attr_int(c->node, "reverse", 0))};
    int in[2] = {ir_grad_gout(c, 0), c->in[1]};
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_CumSum, 2, in, 2, a));
}
