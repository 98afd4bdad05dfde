/* emit-torch-train.c - the PyTorch statements of magpie's own ops (emit-torch.h), one function per
 * family: the backward ops of ir/ops-train.c and ops-grad-*.c, the loss, the in-place optimizer
 * updates, swapping (ops-swap.c), fission (ops-fission.c) and PET's correction (ops-pet.c).
 *
 * In-place ops return the tensor they wrote: an update's output is its parameter or state tensor,
 * a FissionAssemble's or FissionAccumulate's output is its buffer, whose slot (or whole) the part
 * was written into, so the n parts of a materialized fission fill one preallocated tensor as in
 * magpie's executor. A Store keeps its tensor in host memory (pinned, on the copy stream, on CUDA)
 * and a Load brings it back, ordered by CUDA events as the simulator's copy stream assumes. */
#include "emit-torch.h"
#include "ir-geom.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- element-wise backward */

static ir_status emit_unary_grad(et_ctx *e, const ir_node *n) {
    const char *op = ir_attr_str(n, "op", "");
    bool hs = !strcmp(op, "HardSigmoid"), lr = !strcmp(op, "LeakyRelu"), se = !strcmp(op, "Selu");
    if (!strcmp(op, "Gelu") && !strcmp(ir_attr_str(n, "approximate", "none"), "tanh"))
        op = "GeluTanh";
    et_use(e, "unary_grad");
    /* alpha, then beta (Selu: its gamma) */
    et_line(e, "%s = _unary_grad(\"%s\", %s, %s, %s, %s, %s, %s)", et_out(e, n, 0), op,
            et_in(e, n, 0), et_in(e, n, 1),
            et_float(e, ir_attr_float(n, "alpha",
                                      hs   ? 0.2f
                                      : lr ? 0.01f
                                      : se ? 1.67326319217681884765625f
                                           : 1.0f)),
            et_float(e, se ? ir_attr_float(n, "gamma", 1.05070102214813232421875f)
                           : ir_attr_float(n, "beta", 0.5f)),
            et_float(e, ir_attr_float(n, "min", -__builtin_inff())),
            et_float(e, ir_attr_float(n, "max", __builtin_inff())));
    return IR_OK;
}

static ir_status emit_dropout_grad(et_ctx *e, const ir_node *n) {
    et_line(e, "%s = %s * %s.to(%s.dtype) * %s", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
            et_in(e, n, 0), et_float(e, ir_attr_float(n, "scale", 1.0f)));
    return IR_OK;
}

static ir_status emit_gather_grad(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *o = ir_node_out(g, n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", 0), o->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "gather");
    et_use(e, "gather_grad");
    int acc = et_fused_into(e, n);
    if (acc >= 0 && n->op == IR_OP_GatherGrad) { /* the rows add into the accumulate's buffer */
        const ir_node *a = &g->nodes[acc];
        et_line(e, "%s = _gather_grad(%s, %s, %s, %d, %s%s)", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), et_shape(e, &o->shape), axis, et_in(e, a, 0),
                ir_fission_accumulate_overwrites(g, a) ? ".zero_()" : "");
        et_fused_done(e, n);
        return IR_OK;
    }
    et_line(e, "%s = %s(%s, %s, %s, %d)", et_out(e, n, 0),
            n->op == IR_OP_GatherGrad ? "_gather_grad" : "_gather_elements_grad", et_in(e, n, 0),
            et_in(e, n, 1), et_shape(e, &o->shape), axis);
    return IR_OK;
}

/* ---------------------------------------------------------------- loss */

/* The reduction is passed through: ir_build_training emits "sum" and divides by the count of
 * non-ignored labels itself (ir-train.c), an imported graph may use the default "mean". */
static ir_status emit_sce(et_ctx *e, const ir_node *n) {
    long long ignore = (long long)ir_attr_int(n, "ignore_index", -100);
    const char *reduction = strcmp(ir_attr_str(n, "reduction", "mean"), "sum") ? "mean" : "sum";
    et_use(e, "sce");
    if (n->op == IR_OP_SoftmaxCrossEntropy)
        et_line(e, "%s, %s = _sce(%s, %s, %lld, \"%s\")", et_out(e, n, 0), et_out(e, n, 1),
                et_in(e, n, 0), et_in(e, n, 1), ignore, reduction);
    else
        et_line(e, "%s = _sce_grad(%s, %s, %s, %lld, \"%s\")", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), ignore, reduction);
    return IR_OK;
}

/* ---------------------------------------------------------------- optimizer updates */

static ir_status emit_update(et_ctx *e, const ir_node *n) {
    const char *lr = et_float(e, ir_attr_float(n, "lr", 0.01f));
    et_use(e, "update");
    switch (n->op) {
    case IR_OP_SGDUpdate:
        et_line(e, "%s = _sgd(%s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1), lr);
        break;
    case IR_OP_MomentumUpdate:
        et_line(e, "%s, %s = _momentum(%s, %s, %s, %s, %s)", et_out(e, n, 0), et_out(e, n, 1),
                et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), lr,
                et_float(e, ir_attr_float(n, "momentum", 0.9f)));
        break;
    default:
        et_line(e, "%s, %s, %s = _adam(%s, %s, %s, %s, %s, %s, %s, %s, %lld)", et_out(e, n, 0),
                et_out(e, n, 1), et_out(e, n, 2), et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2),
                et_in(e, n, 3), lr, et_float(e, ir_attr_float(n, "beta1", 0.9f)),
                et_float(e, ir_attr_float(n, "beta2", 0.999f)),
                et_float(e, ir_attr_float(n, "epsilon", 1e-8f)),
                (long long)ir_attr_int(n, "step", 1));
        break;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- compute-op backward */

/* Geometry of a conv/pool backward node from its (the forward's) attributes. */
static ir_status attr_geom(et_ctx *e, const ir_node *n, int S, int64_t *k, int64_t *s, int64_t *dl,
                           int64_t *pads) {
    const int64_t *p;
    int nk = ir_attr_ints(n, "kernel_shape", &p);
    if (nk != S) return et_refuse(e, n, "kernel_shape has %d values for %d spatial dims", nk, S);
    for (int i = 0; i < S; i++) k[i] = p[i];
    int ns = ir_attr_ints(n, "strides", &p);
    for (int i = 0; i < S; i++) s[i] = ns == S ? p[i] : 1;
    int nd = ir_attr_ints(n, "dilations", &p);
    for (int i = 0; i < S; i++) dl[i] = nd == S ? p[i] : 1;
    int np = ir_attr_ints(n, "pads", &p);
    for (int i = 0; i < 2 * S; i++) pads[i] = np == 2 * S ? p[i] : 0;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return et_refuse(e, n, "auto_pad %s in a backward op", ap);
    if (!strcmp(ap, "VALID"))
        for (int i = 0; i < 2 * S; i++) pads[i] = 0;
    return IR_OK;
}

static ir_status emit_conv_grad_weight(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0), *dw = ir_node_out(g, n, 0);
    int S = x->shape.rank - 2;
    int64_t k[3], s[3], dl[3], pads[6];
    if (S < 1 || S > 3) return et_refuse(e, n, "%d spatial dims", S);
    ir_status st = attr_geom(e, n, S, k, s, dl, pads);
    if (st) return st;
    /* the output rows of one im2col tile, as magpie's kernel takes them (2-D: rows are OH) */
    const int64_t group = ir_attr_int(n, "group", 1), C = x->shape.dims[1];
    const int64_t OW = ir_node_in(g, n, 1)->shape.dims[x->shape.rank - 1];
    int64_t K = 1;
    for (int i = 0; i < S; i++) K *= k[i];
    const int64_t tile_rows =
        S == 2 && group > 0
            ? ir_conv_tile_rows(ir_node_in(g, n, 1)->shape.dims[2], OW,
                                C / group * K * OW * (int64_t)ir_dtype_size(x->dtype))
            : 0;
    et_use(e, "conv_grad_weight");
    /* fused: dW (+)= into the accumulate's buffer (first: part 0 over an unfilled one) */
    int acc = et_fused_into(e, n);
    const char *out = acc >= 0 ? et_in(e, &g->nodes[acc], 0) : "None";
    bool first = acc >= 0 && ir_fission_accumulate_overwrites(g, &g->nodes[acc]);
    et_line(e, "%s = _conv_grad_weight(%s, %s, %s, %s, %s, %s, %lld, %lld, %s, %s)",
            et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1), et_shape(e, &dw->shape),
            et_ints(e, s, S, true), et_ints(e, pads, 2 * S, true), et_ints(e, dl, S, true),
            (long long)group, (long long)tile_rows, out, first ? "True" : "False");
    if (acc >= 0) et_fused_done(e, n);
    return IR_OK;
}

static ir_status emit_pool_grad(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *dx = ir_node_out(g, n, 0);
    int S = dx->shape.rank - 2;
    int64_t k[3], s[3], dl[3], pads[6];
    if (S < 1 || S > 3) return et_refuse(e, n, "%d spatial dims", S);
    ir_status st = attr_geom(e, n, S, k, s, dl, pads);
    if (st) return st;
    bool ceil = ir_attr_int(n, "ceil_mode", 0) != 0;
    et_use(e, "pool");
    et_use(e, "pool_grad");
    if (n->op == IR_OP_MaxPoolGrad) {
        et_line(e, "%s = _maxpool_grad(%s, %s, %s, %s, %s, %s, %s)", et_out(e, n, 0),
                et_in(e, n, 0), et_in(e, n, 1), et_ints(e, k, S, true), et_ints(e, s, S, true),
                et_ints(e, pads, 2 * S, true), et_ints(e, dl, S, true), ceil ? "True" : "False");
        return IR_OK;
    }
    bool global = true;
    for (int i = 0; i < S; i++) global &= k[i] == dx->shape.dims[2 + i] && pads[i] == 0;
    if (global) {
        et_line(e, "%s = _global_pool_grad(%s, %s)", et_out(e, n, 0), et_in(e, n, 0),
                et_shape(e, &dx->shape));
        return IR_OK;
    }
    for (int i = 0; i < S; i++)
        if (pads[i] != pads[S + i] || 2 * pads[i] > k[i] || dl[i] != 1)
            return et_refuse(e, n, "asymmetric pads or dilation in an average pool's backward");
    et_line(e, "%s = _avgpool_grad(%s, %s, %s, %s, %s, %s, %lld)", et_out(e, n, 0), et_in(e, n, 0),
            et_shape(e, &dx->shape), et_ints(e, k, S, true), et_ints(e, s, S, true),
            et_ints(e, pads, 2 * S, true), ceil ? "True" : "False",
            (long long)ir_attr_int(n, "count_include_pad", 0));
    return IR_OK;
}

static ir_status emit_reduce_grad(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 1);
    const int64_t *p;
    int na = ir_attr_ints(n, "axes", &p);
    int64_t ax[IR_MAX_RANK];
    for (int i = 0; i < na && i < IR_MAX_RANK; i++) {
        int a;
        if (!et_axis(p[i], x->shape.rank, &a)) return et_refuse(e, n, "axis out of range");
        ax[i] = a;
    }
    if (na < 0) return et_refuse(e, n, "no axes attribute");
    et_use(e, "reduce_grad");
    et_line(e, "%s = _reduce_grad(\"%s\", %s, %s, %s, %s)", et_out(e, n, 0),
            ir_attr_str(n, "mode", ""), et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2),
            et_ints(e, ax, na, true));
    return IR_OK;
}

static ir_status emit_resize_grad(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *dx = ir_node_out(g, n, 0);
    int scales_in = g->opset > 0 && g->opset < 11 ? 1 : 2;
    char *args = et_resize_args(e, n, scales_in, dx->shape.rank);
    if (!args) return et_refuse(e, n, "mode '%s'", ir_attr_str(n, "mode", "nearest"));
    et_use(e, "resize");
    et_line(e, "%s = _resize_grad(%s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
            et_shape(e, &dx->shape), args);
    free(args);
    return IR_OK;
}

/* PadGrad (reflect, edge, wrap): pads from the attribute, every dim's begin then end. */
static ir_status emit_pad_grad(et_ctx *e, const ir_node *n) {
    const ir_value *dy = ir_node_in(et_graph(e), n, 0);
    const int64_t *p;
    int np = ir_attr_ints(n, "pads", &p);
    const char *mode = ir_attr_str(n, "mode", "");
    if (np != 2 * dy->shape.rank) return et_refuse(e, n, "pads has %d values", np);
    if (strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
        return et_refuse(e, n, "mode '%s'", mode);
    et_use(e, "pad");
    et_line(e, "%s = _pad_grad(%s, %s, \"%s\")", et_out(e, n, 0), et_in(e, n, 0),
            et_ints(e, p, np, true), mode);
    return IR_OK;
}

static ir_status emit_norm_grad(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 1);
    const char *eps = et_float(e, ir_attr_float(n, "epsilon", 1e-5f));
    const char *o0 = et_out(e, n, 0), *o1 = et_out(e, n, 1), *o2 = et_out(e, n, 2);
    switch (n->op) {
    case IR_OP_BatchNormGrad:
        et_use(e, "batchnorm_grad");
        et_line(e, "%s, %s, %s = _bn_grad(%s, %s, %s, %s, %s, %s, %s)", o0, o1, o2, et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), et_in(e, n, 3), et_in(e, n, 4), eps,
                ir_attr_int(n, "training_mode", 0) ? "True" : "False");
        break;
    case IR_OP_LayerNormGrad: {
        int axis;
        if (!et_axis(ir_attr_int(n, "axis", -1), x->shape.rank, &axis))
            return et_refuse(e, n, "axis out of range");
        et_use(e, "layernorm");
        et_line(e, "%s, %s, %s = _layernorm_grad(%s, %s, %s, %s, %s, %d)", o0, o1, o2,
                et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), et_in(e, n, 3), et_in(e, n, 4),
                axis);
        break;
    }
    default:
        et_use(e, "instancenorm");
        et_line(e, "%s, %s, %s = _instnorm_grad(%s, %s, %s, %s)", o0, o1, o2, et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), eps);
        break;
    }
    return IR_OK;
}

static ir_status emit_softmax_grad(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *y = ir_node_in(g, n, 1);
    bool old = g->opset > 0 && g->opset < 13;
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", old ? 1 : -1), y->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "softmax");
    et_line(e, "%s = _softmax_grad(%s, %s, %d, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
            et_in(e, n, 1), axis, old ? "True" : "False",
            n->op == IR_OP_LogSoftmaxGrad ? "True" : "False");
    return IR_OK;
}

/* ---------------------------------------------------------------- swapping */

static ir_status emit_swap(et_ctx *e, const ir_node *n) {
    et_use(e, "swap");
    if (n->op == IR_OP_Store)
        et_line(e, "%s = _store(%s)", et_out(e, n, 0), et_in(e, n, 0));
    else
        et_line(e, "%s = _load(%s, dev)", et_out(e, n, 0), et_in(e, n, 0));
    return IR_OK;
}

/* ---------------------------------------------------------------- fission */

static ir_status emit_fission(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    int64_t parts = ir_attr_int(n, "parts", 1), index = ir_attr_int(n, "index", 0);
    int axis = 0;
    switch (n->op) {
    case IR_OP_FissionBuffer: {
        const ir_value *o = ir_node_out(g, n, 0);
        /* an unfilled buffer is written whole by its chain's part 0 (ops-fission.c) */
        et_line(e, "%s = torch.%s(%s, dtype=%s, device=dev)", et_out(e, n, 0),
                ir_fission_buffer_unfilled(n) ? "empty" : "zeros", et_shape(e, &o->shape),
                et_run_dtype(e, o->dtype));
        return IR_OK;
    }
    case IR_OP_FissionSlice: {
        const ir_value *x = ir_node_in(g, n, 0);
        if (!et_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis) || parts < 1)
            return et_refuse(e, n, "bad axis or parts");
        int64_t len = x->shape.dims[axis] / parts;
        /* a slice of x for part `index`: the readers of the part see only it */
        et_line(e, "%s = %s.narrow(%d, %lld, %lld)", et_out(e, n, 0), et_in(e, n, 0), axis,
                (long long)(index * len), (long long)len);
        return IR_OK;
    }
    case IR_OP_FissionAssemble: {
        const ir_value *b = ir_node_in(g, n, 0);
        if (!et_axis(ir_attr_int(n, "axis", 0), b->shape.rank, &axis) || parts < 1)
            return et_refuse(e, n, "bad axis or parts");
        int64_t len = b->shape.dims[axis] / parts;
        const char *buf = et_in(e, n, 0);
        et_line(e, "%s.narrow(%d, %lld, %lld).copy_(%s)", buf, axis, (long long)(index * len),
                (long long)len, et_in(e, n, 1));
        et_line(e, "%s = %s", et_out(e, n, 0), buf);
        return IR_OK;
    }
    default: {
        const char *buf = et_in(e, n, 0);
        /* fused: the producer already wrote the part into buf (et_fused_into) */
        if (!et_fused_written(e, n->in[1]))
            et_line(e, "%s.%s(%s)", buf, ir_fission_accumulate_overwrites(g, n) ? "copy_" : "add_",
                    et_in(e, n, 1));
        et_line(e, "%s = %s", et_out(e, n, 0), buf);
        return IR_OK;
    }
    }
}

/* ---------------------------------------------------------------- PET */

static ir_status emit_patch(et_ctx *e, const ir_node *n) {
    const int64_t *p;
    int ns = ir_attr_ints(n, "starts", &p);
    if (ns < 0) return et_refuse(e, n, "no starts attribute");
    et_use(e, "patch");
    et_line(e, "%s = _patch(%s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
            et_ints(e, p, ns, true));
    return IR_OK;
}

et_op_fn et_train_lookup(ir_op_kind k) {
    switch (k) {
    case IR_OP_UnaryGrad: return emit_unary_grad;
    case IR_OP_DropoutGrad: return emit_dropout_grad;
    case IR_OP_GatherGrad:
    case IR_OP_GatherElementsGrad: return emit_gather_grad;
    case IR_OP_SoftmaxCrossEntropy:
    case IR_OP_SoftmaxCrossEntropyGrad: return emit_sce;
    case IR_OP_SGDUpdate:
    case IR_OP_MomentumUpdate:
    case IR_OP_AdamUpdate: return emit_update;
    case IR_OP_ConvGradWeight: return emit_conv_grad_weight;
    case IR_OP_MaxPoolGrad:
    case IR_OP_AveragePoolGrad: return emit_pool_grad;
    case IR_OP_ReduceGrad: return emit_reduce_grad;
    case IR_OP_ResizeGrad: return emit_resize_grad;
    case IR_OP_PadGrad: return emit_pad_grad;
    case IR_OP_BatchNormGrad:
    case IR_OP_LayerNormGrad:
    case IR_OP_InstanceNormGrad: return emit_norm_grad;
    case IR_OP_SoftmaxGrad:
    case IR_OP_LogSoftmaxGrad: return emit_softmax_grad;
    case IR_OP_Store:
    case IR_OP_Load: return emit_swap;
    case IR_OP_FissionBuffer:
    case IR_OP_FissionSlice:
    case IR_OP_FissionAssemble:
    case IR_OP_FissionAccumulate: return emit_fission;
    case IR_OP_PetPatch: return emit_patch;
    default: return NULL;
    }
}
