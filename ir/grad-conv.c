/* grad-conv.c - gradient builders of Conv and ConvTranspose: the three kernels PyTorch's
 * convolution_backward runs (backward-data, backward-filter, the bias reduction).
 *
 * Conv:          dX = ConvTranspose(dY, W), same strides, dilations, group and pads, with
 *                     output_padding = the input rows the conv's floor division left unread,
 *                     so that it lands exactly on X's shape (those rows get zero gradient);
 *                dW = ConvGradWeight(X, dY);  dB = ReduceSum(dY) over batch and spatial axes.
 * ConvTranspose: the adjoint pair swapped: dX = Conv(dY, W), dW = ConvGradWeight(dY, X), dB as
 *                above.
 * Pads are always explicit: ir_conv_parse resolves auto_pad and output_shape the way the forward
 * kernel does, so both directions use one geometry. */
#include "ir-autodiff.h"
#include "ir-impl.h"

/* Attributes strides, dilations, pads, group, kernel_shape of cg into a[0..5); returns 5. */
static int geom_attrs(ir_grad_ctx *c, const ir_conv_geom *cg, ir_attr *a) {
    int64_t s[3], dl[3], k[3], pads[6];
    const int S = cg->S;
    for (int i = 0; i < S; i++) {
        int j = 3 - S + i;
        s[i] = cg->s[j];
        dl[i] = cg->d[j];
        k[i] = cg->k[j];
        pads[i] = cg->pb[j];
        pads[S + i] = cg->pe[j];
    }
    a[0] = ir_grad_attr_ints(c, "strides", S, s);
    a[1] = ir_grad_attr_ints(c, "dilations", S, dl);
    a[2] = ir_grad_attr_ints(c, "pads", 2 * S, pads);
    a[3] = ir_grad_attr_int("group", cg->group);
    a[4] = ir_grad_attr_ints(c, "kernel_shape", S, k);
    return 5;
}

static ir_status parse(ir_grad_ctx *c, bool transpose, ir_conv_geom *cg) {
    ir_diag d = {{0}};
    ir_status st = ir_conv_parse(c->g, c->node, transpose, cg, &d);
    return st ? ir_grad_fail(c, st, "%s", d.msg) : IR_OK;
}

/* dB = sum of dY over every axis but the channels. */
static ir_status bias_grad(ir_grad_ctx *c, int dy, int S) {
    int64_t axes[4] = {0, 2, 3, 4};
    return ir_grad_accumulate(c, 2, ir_grad_reduce_sum(c, dy, S + 1, axes, false));
}

ir_status ir_grad_Conv(ir_grad_ctx *c) {
    ir_conv_geom cg;
    if (parse(c, false, &cg)) return ir_grad_status(c);
    int dy = ir_grad_gout(c, 0), x = c->in[0], w = c->in[1];
    ir_attr a[6];
    int na = geom_attrs(c, &cg, a);
    if (ir_grad_needs(c, 0)) {
        int64_t opad[3];
        for (int i = 0; i < cg.S; i++) {
            int j = 3 - cg.S + i;
            int64_t span = cg.in[j] + cg.pb[j] + cg.pe[j] - ((cg.k[j] - 1) * cg.d[j] + 1);
            opad[i] = span % cg.s[j];
        }
        a[na] = ir_grad_attr_ints(c, "output_padding", cg.S, opad);
        ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_ConvTranspose, 2, (int[]){dy, w}, na + 1, a));
    }
    if (ir_grad_needs(c, 1))
        ir_grad_accumulate(c, 1, ir_grad_op(c, IR_OP_ConvGradWeight, 2, (int[]){x, dy}, na, a));
    if (ir_grad_needs(c, 2)) bias_grad(c, dy, cg.S);
    return ir_grad_status(c);
}

ir_status ir_grad_ConvTranspose(ir_grad_ctx *c) {
    ir_conv_geom cg;
    if (parse(c, true, &cg)) return ir_grad_status(c);
    int dy = ir_grad_gout(c, 0), x = c->in[0], w = c->in[1];
    ir_attr a[5];
    int na = geom_attrs(c, &cg, a);
    /* the Conv of dY must land on X: it does unless output_padding reaches a whole stride */
    for (int j = 3 - cg.S; j < 3; j++) {
        int64_t span = cg.out[j] + cg.pb[j] + cg.pe[j] - ((cg.k[j] - 1) * cg.d[j] + 1);
        if (span < 0 || span / cg.s[j] + 1 != cg.in[j])
            return ir_grad_fail(c, IR_ERR_UNSUPPORTED,
                                "output_padding of a stride or more (spatial dim %d)",
                                j - 3 + cg.S);
    }
    if (ir_grad_needs(c, 0))
        ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_Conv, 2, (int[]){dy, w}, na, a));
    if (ir_grad_needs(c, 1))
        ir_grad_accumulate(c, 1, ir_grad_op(c, IR_OP_ConvGradWeight, 2, (int[]){dy, x}, na, a));
    if (ir_grad_needs(c, 2)) bias_grad(c, dy, cg.S);
    return ir_grad_status(c);
}
