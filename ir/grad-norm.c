/* grad-norm.c - gradient builders of the normalizations and softmaxes, one fused backward op each
 * (ops-grad-norm.c), keeping alive what PyTorch's autograd keeps:
 *  - BatchNormalization: BatchNormGrad(dY, X, scale) in training mode (batch statistics
 *    recomputed in the kernel), BatchNormGrad(dY, X, scale, mean, var) in inference mode;
 *  - LayerNormalization: LayerNormGrad(dY, X, scale, Mean, InvStdDev), the statistics being the
 *    forward's optional outputs (added to it when absent);
 *  - InstanceNormalization: InstanceNormGrad(dY, X, scale);
 *  - Softmax / LogSoftmax: SoftmaxGrad / LogSoftmaxGrad(dY, Y) from the forward's output.
 * The per-channel or normalized-shape parameter gradients are outputs 1 and 2 of the same op.
 * Gradients of the running statistics (inference-mode inputs) are not supported. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <stdlib.h>

/* Emits a 3-output grad op and accumulates dX, dScale (reshaped to the scale's shape when it
 * holds as many values, otherwise summed by accumulate) and dBias. */
static ir_status three_grads(ir_grad_ctx *c, ir_op_kind op, int n_in, const int *in, int n_attrs,
                             const ir_attr *attrs) {
    int out[3];
    if (ir_grad_emit(c, op, n_in, in, 3, out, n_attrs, attrs)) return ir_grad_status(c);
    ir_grad_accumulate(c, 0, out[0]);
    for (int i = 1; i < 3; i++) {
        if (!ir_grad_needs(c, i)) continue;
        ir_shape ps = ir_grad_shape(c, c->in[i]), gs = ir_grad_shape(c, out[i]);
        int g =
            ir_shape_numel(&ps) == ir_shape_numel(&gs) ? ir_grad_reshape(c, out[i], &ps) : out[i];
        ir_grad_accumulate(c, i, g);
    }
    return ir_grad_status(c);
}

ir_status ir_grad_BatchNormalization(ir_grad_ctx *c) {
    const bool train = ir_bn_training(c->node);
    for (int i = 1; i < c->n_out; i++)
        if (c->gout[i] >= 0)
            return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "a gradient flows into output %d", i);
    if (!train && (ir_grad_needs(c, 3) || ir_grad_needs(c, 4)))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "gradient of the running mean or variance");
    ir_attr a[2] = {ir_grad_attr_float("epsilon", ir_attr_float(c->node, "epsilon", 1e-5f)),
                    ir_grad_attr_int("training_mode", train)};
    int in[5] = {ir_grad_gout(c, 0), c->in[0], c->in[1], c->in[3], c->in[4]};
    return three_grads(c, IR_OP_BatchNormGrad, train ? 3 : 5, in, 2, a);
}

ir_status ir_grad_LayerNormalization(ir_grad_ctx *c) {
    for (int i = 1; i < c->n_out; i++)
        if (c->gout[i] >= 0)
            return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "a gradient flows into output %d", i);
    int mean = ir_grad_fwd_output(c, 1), inv = ir_grad_fwd_output(c, 2);
    ir_attr a = ir_grad_attr_int("axis", ir_attr_int(c->node, "axis", -1));
    int in[5] = {ir_grad_gout(c, 0), c->in[0], c->in[1], mean, inv};
    return three_grads(c, IR_OP_LayerNormGrad, 5, in, 1, &a);
}

ir_status ir_grad_InstanceNormalization(ir_grad_ctx *c) {
    ir_attr a = ir_grad_attr_float("epsilon", ir_attr_float(c->node, "epsilon", 1e-5f));
    int in[3] = {ir_grad_gout(c, 0), c->in[0], c->in[1]};
    return three_grads(c, IR_OP_InstanceNormGrad, 3, in, 1, &a);
}

static ir_status softmax_grad(ir_grad_ctx *c, ir_op_kind op) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int in[2] = {ir_grad_gout(c, 0), c->out[0]};
    return ir_grad_accumulate(c, 0, ir_grad_op(c, op, 2, in, c->node->n_attrs, c->node->attrs));
}

ir_status ir_grad_Softmax(ir_grad_ctx *c) {
    return softmax_grad(c, IR_OP_SoftmaxGrad);
}

ir_status ir_grad_LogSoftmax(ir_grad_ctx *c) {
    return softmax_grad(c, IR_OP_LogSoftmaxGrad);
}

/* GroupNormalization (ops-groupnorm.c) over the view [N, G, cpg, S] of X (cpg channels per
 * group, S spatial elements): Y = xhat * scale + bias, xhat normalized over each (n, g).
 *  - dX: InstanceNormGrad of dXhat = dY * scale over [N, G, cpg * S] with unit scale (the
 *    gradient of a normalization through its statistics);
 *  - dScale = sum over N and S of dY * xhat, xhat recomputed by InstanceNormalization with
 *    unit scale and zero bias (the forward keeps no statistics); dBias = sum of dY;
 * with opset 18's per-group scale and bias the channels of a group are summed too. */
ir_status ir_grad_GroupNormalization(ir_grad_ctx *c) {
    const ir_shape xs = ir_grad_shape(c, c->in[0]);
    const ir_dtype t = ir_grad_dtype(c, c->in[0]);
    const int64_t N = xs.dims[0], C = xs.dims[1], G = ir_attr_int(c->node, "num_groups", 1);
    int64_t S = 1;
    for (int i = 2; i < xs.rank; i++) S *= xs.dims[i];
    const int64_t cpg = C / G;
    const bool per_group = c->g->opset > 0 && c->g->opset < 21;
    const float eps = ir_attr_float(c->node, "epsilon", 1e-5f);
    const ir_shape v4 = {4, {N, G, cpg, S}}, v3 = {3, {N, G, cpg * S}};
    const ir_shape s4 = per_group ? (ir_shape){3, {G, 1, 1}} : (ir_shape){3, {G, cpg, 1}};
    const ir_shape gs = {1, {G}};
    int dy4 = ir_grad_reshape(c, ir_grad_gout(c, 0), &v4);
    int x3 = ir_grad_reshape(c, c->in[0], &v3);
    double *buf = calloc((size_t)(2 * G), sizeof(double));
    float *fbuf = calloc((size_t)(2 * G), sizeof(float));
    if (!buf || !fbuf) {
        free(buf);
        free(fbuf);
        return ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < G; i++) buf[i] = 1, fbuf[i] = 1;
    const void *ones = t == IR_F64 ? (const void *)buf : (const void *)fbuf;
    const void *zeros = t == IR_F64 ? (const void *)(buf + G) : (const void *)(fbuf + G);
    int one = ir_grad_const(c, t, &gs, ones), zero = ir_grad_const(c, t, &gs, zeros);
    free(buf);
    free(fbuf);
    if (ir_grad_needs(c, 0)) {
        int dxh = ir_grad_op2(c, IR_OP_Mul, dy4, ir_grad_reshape(c, c->in[1], &s4));
        ir_attr a = ir_grad_attr_float("epsilon", eps);
        int out[3];
        if (ir_grad_emit(c, IR_OP_InstanceNormGrad, 3,
                         (int[]){ir_grad_reshape(c, dxh, &v3), x3, one}, 1, out, 1, &a) == IR_OK)
            ir_grad_accumulate(c, 0, ir_grad_reshape(c, out[0], &xs));
    }
    const int64_t axes_c[2] = {0, 3}, axes_g[3] = {0, 2, 3};
    const int n_axes = per_group ? 3 : 2;
    const int64_t *axes = per_group ? axes_g : axes_c;
    const ir_shape ps = ir_grad_shape(c, c->in[1]);
    if (ir_grad_needs(c, 1)) {
        ir_attr a = ir_grad_attr_float("epsilon", eps);
        int xhat = ir_grad_op(c, IR_OP_InstanceNormalization, 3, (int[]){x3, one, zero}, 1, &a);
        int prod = ir_grad_op2(c, IR_OP_Mul, dy4, ir_grad_reshape(c, xhat, &v4));
        ir_grad_accumulate(
            c, 1, ir_grad_reshape(c, ir_grad_reduce_sum(c, prod, n_axes, axes, false), &ps));
    }
    if (ir_grad_needs(c, 2))
        ir_grad_accumulate(
            c, 2, ir_grad_reshape(c, ir_grad_reduce_sum(c, dy4, n_axes, axes, false), &ps));
    return ir_grad_status(c);
}
