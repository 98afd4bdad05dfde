/* grad-elementwise.c - gradient builders of the broadcasting binary ops, the activations and
 * the other element-wise unary ops, Dropout and Cast (ir-autodiff.h).
 *
 * Broadcast gradients are handed to ir_grad_accumulate as they are; it reduces them to each
 * input's shape. Activations use the fused UnaryGrad op (ops-train.c) with the tensor PyTorch's
 * own backward keeps (the output for Relu, Sigmoid, Tanh, Exp, Sqrt, Reciprocal, the input
 * otherwise), so that the same forward tensor stays alive. Floor, Ceil and Sign have a zero
 * gradient almost everywhere: they contribute nothing, as in PyTorch. */
#include "ir-autodiff.h"
#include "ir-impl.h"

/* ---------------------------------------------------------------- binary */

ir_status ir_grad_Add(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0);
    ir_grad_accumulate(c, 0, dy);
    return ir_grad_accumulate(c, 1, dy);
}

ir_status ir_grad_Sum(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0);
    for (int i = 0; i < c->n_in; i++) ir_grad_accumulate(c, i, dy);
    return ir_grad_status(c);
}

ir_status ir_grad_Sub(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0);
    ir_grad_accumulate(c, 0, dy);
    if (ir_grad_needs(c, 1)) ir_grad_accumulate(c, 1, ir_grad_op1(c, IR_OP_Neg, dy));
    return ir_grad_status(c);
}

ir_status ir_grad_Mul(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0);
    if (ir_grad_needs(c, 0)) ir_grad_accumulate(c, 0, ir_grad_op2(c, IR_OP_Mul, dy, c->in[1]));
    if (ir_grad_needs(c, 1)) ir_grad_accumulate(c, 1, ir_grad_op2(c, IR_OP_Mul, dy, c->in[0]));
    return ir_grad_status(c);
}

/* d(a/b)/db = -a/b^2 = -y/b, from the output y. */
ir_status ir_grad_Div(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0), b = c->in[1];
    if (ir_grad_needs(c, 0)) ir_grad_accumulate(c, 0, ir_grad_op2(c, IR_OP_Div, dy, b));
    if (ir_grad_needs(c, 1)) {
        int t = ir_grad_op2(c, IR_OP_Div, ir_grad_op2(c, IR_OP_Mul, dy, c->out[0]), b);
        ir_grad_accumulate(c, 1, ir_grad_op1(c, IR_OP_Neg, t));
    }
    return ir_grad_status(c);
}

/* d(a^b)/da = b a^(b-1); d(a^b)/db = y log a. A constant scalar exponent (x^2, x^0.5) gives a
 * constant factor, as torch's pow_backward with a Scalar exponent. */
ir_status ir_grad_Pow(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0), a = c->in[0], b = c->in[1];
    ir_dtype t = ir_grad_dtype(c, a);
    const ir_value *bv = &c->g->values[b];
    if (ir_grad_needs(c, 0)) {
        int da;
        if (bv->blob && ir_shape_numel(&bv->shape) == 1) {
            double e = ir_load_f64(ir_blob_data(bv->blob), bv->dtype, 0);
            if (e == 0) goto exponent; /* a^0 is constant */
            int p = e == 2 ? a : ir_grad_op2(c, IR_OP_Pow, a, ir_grad_scalar(c, t, e - 1));
            da = ir_grad_op2(c, IR_OP_Mul, dy, ir_grad_scale(c, p, e));
        } else {
            if (bv->dtype != t)
                return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "exponent of dtype %s is not constant",
                                    ir_dtype_name(bv->dtype));
            int bm1 = ir_grad_op2(c, IR_OP_Sub, b, ir_grad_scalar(c, t, 1.0));
            int p = ir_grad_op2(c, IR_OP_Mul, b, ir_grad_op2(c, IR_OP_Pow, a, bm1));
            da = ir_grad_op2(c, IR_OP_Mul, dy, p);
        }
        ir_grad_accumulate(c, 0, da);
    }
exponent:
    if (ir_grad_needs(c, 1)) {
        int yl = ir_grad_op2(c, IR_OP_Mul, c->out[0], ir_grad_op1(c, IR_OP_Log, a));
        ir_grad_accumulate(c, 1, ir_grad_op2(c, IR_OP_Mul, dy, yl));
    }
    return ir_grad_status(c);
}

/* The gradient goes to the inputs equal to the output (to each of them on ties). */
static ir_status minmax_grad(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0);
    int zero = ir_grad_scalar(c, ir_grad_dtype(c, dy), 0.0);
    for (int i = 0; i < c->n_in; i++) {
        if (!ir_grad_needs(c, i)) continue;
        int mask = ir_grad_op2(c, IR_OP_Equal, c->in[i], c->out[0]);
        ir_grad_accumulate(c, i, ir_grad_op(c, IR_OP_Where, 3, (int[]){mask, dy, zero}, 0, NULL));
    }
    return ir_grad_status(c);
}

IR_GRAD_VIA(Min, minmax_grad)
IR_GRAD_VIA(Max, minmax_grad)

ir_status ir_grad_Mod(ir_grad_ctx *c) {
    if (ir_grad_needs(c, 1))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED,
                            "the gradient with respect to the divisor "
                            "of Mod is not implemented");
    return ir_grad_accumulate(c, 0, ir_grad_gout(c, 0));
}

ir_status ir_grad_Where(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0), cond = c->in[0];
    int zero = ir_grad_scalar(c, ir_grad_dtype(c, dy), 0.0);
    if (ir_grad_needs(c, 1))
        ir_grad_accumulate(c, 1, ir_grad_op(c, IR_OP_Where, 3, (int[]){cond, dy, zero}, 0, NULL));
    if (ir_grad_needs(c, 2))
        ir_grad_accumulate(c, 2, ir_grad_op(c, IR_OP_Where, 3, (int[]){cond, zero, dy}, 0, NULL));
    return ir_grad_status(c);
}

/* ---------------------------------------------------------------- activations */

/* UnaryGrad(dY, T) with T the forward output (use_y) or input, and the forward op's float
 * attributes that the derivative depends on. */
static ir_status unary_grad(ir_grad_ctx *c, bool use_y) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_attr at[5];
    int na = 0;
    at[na++] = ir_grad_attr_str(c, "op", c->node->op_type);
    static const char *const copied[] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 3; i++) {
        const ir_attr *a = ir_attr_find(c->node, copied[i]);
        if (a) at[na++] = ir_grad_attr_float(copied[i], a->f);
    }
    const char *approx = ir_attr_str(c->node, "approximate", NULL); /* Gelu's form */
    if (approx) at[na++] = ir_grad_attr_str(c, "approximate", approx);
    int dy = ir_grad_gout(c, 0);
    int g = ir_grad_op(c, IR_OP_UnaryGrad, 2, (int[]){dy, use_y ? c->out[0] : c->in[0]}, na, at);
    return ir_grad_accumulate(c, 0, g);
}

#define UNARY_GRAD(op, use_y)                                                                      \
    ir_status ir_grad_##op(ir_grad_ctx *c) {                                                       \
        return unary_grad(c, use_y);                                                               \
    }
UNARY_GRAD(Relu, true)
UNARY_GRAD(Sigmoid, true)
UNARY_GRAD(Tanh, true)
UNARY_GRAD(Exp, true)
UNARY_GRAD(Sqrt, true)
UNARY_GRAD(Reciprocal, true)
UNARY_GRAD(LeakyRelu, false)
UNARY_GRAD(HardSigmoid, false)
UNARY_GRAD(HardSwish, false)
UNARY_GRAD(Erf, false)
UNARY_GRAD(Log, false)
UNARY_GRAD(Abs, false)
UNARY_GRAD(Softplus, false)
UNARY_GRAD(Elu, false)
UNARY_GRAD(Gelu, false)
UNARY_GRAD(Sin, false)
UNARY_GRAD(Cos, false)
UNARY_GRAD(Softsign, false)
UNARY_GRAD(Selu, false)
UNARY_GRAD(Celu, false)
UNARY_GRAD(Mish, false)

/* Bounds come from the optional inputs 1 and 2 (opset 11+) or the opset-6 attributes. */
ir_status ir_grad_Clip(ir_grad_ctx *c) {
    if (ir_grad_needs(c, 1) || ir_grad_needs(c, 2))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "Clip bounds that need a gradient");
    if (!ir_grad_needs(c, 0)) return IR_OK;
    double lo = ir_attr_float(c->node, "min", -INFINITY),
           hi = ir_attr_float(c->node, "max", INFINITY);
    if (c->n_in > 1 && c->in[1] >= 0) ir_grad_in_scalar(c, 1, &lo);
    if (c->n_in > 2 && c->in[2] >= 0) ir_grad_in_scalar(c, 2, &hi);
    ir_attr at[3] = {ir_grad_attr_str(c, "op", "Clip"), ir_grad_attr_float("min", (float)lo),
                     ir_grad_attr_float("max", (float)hi)};
    int dy = ir_grad_gout(c, 0);
    return ir_grad_accumulate(c, 0,
                              ir_grad_op(c, IR_OP_UnaryGrad, 2, (int[]){dy, c->in[0]}, 3, at));
}

ir_status ir_grad_Neg(ir_grad_ctx *c) {
    return ir_grad_accumulate(c, 0, ir_grad_op1(c, IR_OP_Neg, ir_grad_gout(c, 0)));
}

ir_status ir_grad_Identity(ir_grad_ctx *c) {
    return ir_grad_accumulate(c, 0, ir_grad_gout(c, 0));
}

static ir_status zero_grad(ir_grad_ctx *c) {
    return IR_OK;
}
IR_GRAD_VIA(Floor, zero_grad)
IR_GRAD_VIA(Ceil, zero_grad)
IR_GRAD_VIA(Sign, zero_grad)
IR_GRAD_VIA(Round, zero_grad)

/* ---------------------------------------------------------------- Dropout, Cast */

/* Identity unless it drops in training mode; then dY * mask / (1 - ratio) from the forward
 * mask (added to the forward node when the file did not ask for it). */
ir_status ir_grad_Dropout(ir_grad_ctx *c) {
    double ratio = ir_attr_float(c->node, "ratio", 0.5f);
    bool training = false;
    if (c->n_in > 1 && c->in[1] >= 0 && !ir_grad_in_scalar(c, 1, &ratio)) return ir_grad_status(c);
    if (c->n_in > 2 && c->in[2] >= 0) {
        double tm = 0;
        const ir_value *v = &c->g->values[c->in[2]];
        if (!v->blob) return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "training_mode is not a constant");
        tm = ir_load_f64(ir_blob_data(v->blob), v->dtype, 0);
        training = tm != 0;
    }
    int dy = ir_grad_gout(c, 0);
    if (!training || ratio == 0) return ir_grad_accumulate(c, 0, dy);
    int mask = ir_grad_fwd_output(c, 1);
    ir_attr a = ir_grad_attr_float("scale", (float)(1.0 / (1.0 - ratio)));
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_DropoutGrad, 2, (int[]){dy, mask}, 1, &a));
}

/* Casts the gradient back to the input's float dtype; integer inputs get none. */
static ir_status cast_grad(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int dy = ir_grad_gout(c, 0);
    ir_dtype t = ir_grad_dtype(c, c->in[0]);
    if (ir_grad_dtype(c, dy) != t) {
        ir_attr a = ir_grad_attr_int("to", ir_dtype_to_onnx(t));
        dy = ir_grad_op(c, IR_OP_Cast, 1, &dy, 1, &a);
    }
    return ir_grad_accumulate(c, 0, dy);
}

IR_GRAD_VIA(Cast, cast_grad)
IR_GRAD_VIA(CastLike, cast_grad)
