/* emit-torch-more.c - the PyTorch statements of the ops that opsets 13-23 brought into magpie's
 * table (emit-torch.h): PRelu, Mean, IsNaN, IsInf, DepthToSpace, SpaceToDepth, TopK,
 * GroupNormalization, Einsum, GatherND, ScatterElements, OneHot, QuantizeLinear,
 * DequantizeLinear and the four random draws, with the semantics of their kernels
 * (ir/ops-prelu-mean.c, ops-space.c, ops-topk.c, ops-groupnorm.c, ops-einsum.c, ops-index-more.c,
 * ops-quant.c, ops-random.c). Their gradients are composed of ops with forms of their own (Where,
 * Mul, GatherElementsGrad, InstanceNormGrad, Einsum...). The prelude's section "more" has the
 * helpers.
 */
#include "emit-torch.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static ir_status emit_prelu(et_ctx *e, const ir_node *n) {
    et_use(e, "more");
    et_line(e, "%s = _prelu(%s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1));
    return IR_OK;
}

/* Mean: the inputs added as Sum adds them, then scaled in place by 1 / n. */
static ir_status emit_mean(et_ctx *e, const ir_node *n) {
    const char *y = et_out(e, n, 0);
    if (n->n_in == 1) {
        et_line(e, "%s = %s.clone()", y, et_in(e, n, 0));
        return IR_OK;
    }
    et_line(e, "%s = torch.add(%s, %s)", y, et_in(e, n, 0), et_in(e, n, 1));
    for (int i = 2; i < n->n_in; i++) et_line(e, "%s = torch.add(%s, %s)", y, y, et_in(e, n, i));
    et_line(e, "%s.mul_(%s)", y, et_float(e, 1.0 / n->n_in));
    return IR_OK;
}

static ir_status emit_isnan_isinf(et_ctx *e, const ir_node *n) {
    const char *x = et_in(e, n, 0), *y = et_out(e, n, 0);
    if (n->op == IR_OP_IsNaN) {
        et_line(e, "%s = torch.isnan(%s)", y, x);
        return IR_OK;
    }
    bool pos = ir_attr_int(n, "detect_positive", 1) != 0,
         neg = ir_attr_int(n, "detect_negative", 1) != 0;
    if (pos && neg)
        et_line(e, "%s = torch.isinf(%s)", y, x);
    else if (pos || neg)
        et_line(e, "%s = torch.is%sinf(%s)", y, pos ? "pos" : "neg", x);
    else
        et_line(e, "%s = torch.zeros_like(%s, dtype=torch.bool)", y, x);
    return IR_OK;
}

static ir_status emit_space(et_ctx *e, const ir_node *n) {
    int64_t b = ir_attr_int(n, "blocksize", 0);
    if (b < 1) return et_refuse(e, n, "blocksize %lld", (long long)b);
    et_use(e, "more");
    if (n->op == IR_OP_DepthToSpace)
        et_line(e, "%s = _depth_to_space(%s, %lld, %s)", et_out(e, n, 0), et_in(e, n, 0),
                (long long)b, strcmp(ir_attr_str(n, "mode", "DCR"), "CRD") ? "False" : "True");
    else
        et_line(e, "%s = _space_to_depth(%s, %lld)", et_out(e, n, 0), et_in(e, n, 0), (long long)b);
    return IR_OK;
}

static ir_status emit_topk(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int64_t k[1];
    int axis;
    if (et_const_ints(e, n, 1, k, 1) != 1) return et_refuse(e, n, "K is not a constant");
    if (!et_axis(ir_attr_int(n, "axis", -1), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "more");
    et_line(e, "%s, %s = _topk(%s, %lld, %d, %s)", et_out(e, n, 0), et_out(e, n, 1), et_in(e, n, 0),
            (long long)k[0], axis, ir_attr_int(n, "largest", 1) ? "True" : "False");
    return IR_OK;
}

/* GroupNormalization: opset 21's scale and bias are per channel, opset 18's per group. */
static ir_status emit_group_norm(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    int64_t G = ir_attr_int(n, "num_groups", 0);
    if (G < 1) return et_refuse(e, n, "num_groups %lld", (long long)G);
    et_use(e, "more");
    et_line(e, "%s = _group_norm(%s, %lld, %s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
            (long long)G, et_in(e, n, 1), et_in(e, n, 2),
            et_float(e, ir_attr_float(n, "epsilon", 1e-5f)),
            g->opset > 0 && g->opset < 21 ? "True" : "False");
    return IR_OK;
}

static ir_status emit_einsum(et_ctx *e, const ir_node *n) {
    const char *eq = ir_attr_str(n, "equation", NULL);
    if (!eq) return et_refuse(e, n, "no equation");
    for (const char *c = eq; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            return et_refuse(e, n, "equation '%s'", eq);
    char buf[4096];
    if (!et_in_list(e, n, true, buf, sizeof buf)) return et_refuse(e, n, "too many operands");
    et_line(e, "%s = torch.einsum(\"%s\"%s)", et_out(e, n, 0), eq, buf);
    return IR_OK;
}

static ir_status emit_index_more(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0);
    int axis;
    et_use(e, "more");
    switch (n->op) {
    case IR_OP_GatherND:
        et_line(e, "%s = _gather_nd(%s, %s, %lld)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
                (long long)ir_attr_int(n, "batch_dims", 0));
        return IR_OK;
    case IR_OP_ScatterElements:
        if (!et_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis))
            return et_refuse(e, n, "axis out of range");
        et_line(e, "%s = _scatter_elements(%s, %s, %s, %d, \"%s\")", et_out(e, n, 0),
                et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), axis,
                ir_attr_str(n, "reduction", "none"));
        return IR_OK;
    default: { /* OneHot(indices, depth, values) */
        double depth[1];
        if (et_const_floats(e, n, 1, depth, 1) != 1) {
            int64_t di[1];
            if (et_const_ints(e, n, 1, di, 1) != 1)
                return et_refuse(e, n, "depth is not a constant");
            depth[0] = (double)di[0];
        }
        if (!et_axis(ir_attr_int(n, "axis", -1), x->shape.rank + 1, &axis))
            return et_refuse(e, n, "axis out of range");
        et_line(e, "%s = _one_hot(%s, %lld, %s, %d)", et_out(e, n, 0), et_in(e, n, 0),
                (long long)depth[0], et_in(e, n, 2), axis);
        return IR_OK;
    }
    }
}

/* QuantizeLinear and DequantizeLinear: the scale per tensor, per axis or in blocks (block_size,
 * opset 21), resolved against x's shape by the prelude; the integer type is the plan's. */
static ir_status emit_quant(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    int axis = 0;
    int64_t block = ir_attr_int(n, "block_size", 0);
    if (x->shape.rank > 0 && !et_axis(ir_attr_int(n, "axis", 1), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    const char *lo = "0", *hi = "0";
    if (n->op == IR_OP_QuantizeLinear) {
        switch (y->dtype) {
        case IR_U8: lo = "0", hi = "255"; break;
        case IR_I8: lo = "-128", hi = "127"; break;
        case IR_U16: lo = "0", hi = "65535"; break;
        case IR_I16: lo = "-32768", hi = "32767"; break;
        default: return et_refuse(e, n, "quantizing to %s", ir_dtype_name(y->dtype));
        }
    }
    et_use(e, "quant");
    if (n->op == IR_OP_QuantizeLinear)
        et_line(e, "%s = _quantize(%s, %s, %s, %d, %lld, %s, %s, %s)", et_out(e, n, 0),
                et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), axis, (long long)block,
                et_dtype(y->dtype), lo, hi);
    else
        et_line(e, "%s = _dequantize(%s, %s, %s, %d, %lld)", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), axis, (long long)block);
    return IR_OK;
}

/* RandomUniform, RandomNormal and their *Like forms: draws of PyTorch's generator, the
 * distribution magpie's kernel draws from but not its numbers (as training-mode Dropout's mask).
 * A seed attribute seeds a generator of the node's own, so its output is the same on every step,
 * as ONNX asks; the seed is passed as its float's bits. */
static ir_status emit_random(et_ctx *e, const ir_node *n) {
    const ir_value *y = ir_node_out(et_graph(e), n, 0);
    bool normal = n->op == IR_OP_RandomNormal || n->op == IR_OP_RandomNormalLike;
    const ir_attr *sa = ir_attr_find(n, "seed");
    char seed[32] = "None";
    if (sa) {
        float f = sa->f;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        snprintf(seed, sizeof seed, "%u", bits);
    }
    et_use(e, "random");
    et_line(e, "%s = _random(%s, %s, dev, %s, %s, %s, %s)", et_out(e, n, 0), et_shape(e, &y->shape),
            et_run_dtype(e, y->dtype), normal ? "True" : "False",
            et_float(e, ir_attr_float(n, normal ? "mean" : "low", 0.0f)),
            et_float(e, ir_attr_float(n, normal ? "scale" : "high", 1.0f)), seed);
    return IR_OK;
}

et_op_fn et_more_lookup(ir_op_kind k) {
    switch (k) {
    case IR_OP_PRelu: return emit_prelu;
    case IR_OP_Mean: return emit_mean;
    case IR_OP_IsNaN:
    case IR_OP_IsInf: return emit_isnan_isinf;
    case IR_OP_DepthToSpace:
    case IR_OP_SpaceToDepth: return emit_space;
    case IR_OP_TopK: return emit_topk;
    case IR_OP_GroupNormalization: return emit_group_norm;
    case IR_OP_Einsum: return emit_einsum;
    case IR_OP_GatherND:
    case IR_OP_ScatterElements:
    case IR_OP_OneHot: return emit_index_more;
    case IR_OP_QuantizeLinear:
    case IR_OP_DequantizeLinear: return emit_quant;
    case IR_OP_RandomUniform:
    case IR_OP_RandomUniformLike:
    case IR_OP_RandomNormal:
    case IR_OP_RandomNormalLike: return emit_random;
    default: return NULL;
    }
}
