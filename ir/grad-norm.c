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
