/* emit-torch-ops.c - the PyTorch statements of element-wise, shape, layout and indexing ops
 * (emit-torch.h), one function per op family, with ONNX's semantics as magpie's kernels implement
 * them (ir/ops-unary.c, ops-binary.c, ops-shape.c, ops-layout.c, ops-index.c).
 *
 * Shapes are static, so whatever ONNX passes as shape data (Reshape's shape, Slice's starts,
 * Expand's shape, ...) is resolved here from the plan's constants and written as literals. Every op
 * allocates its output, as magpie's kernels do, except the Reshape family (Reshape, Flatten,
 * Squeeze, Unsqueeze), which PyTorch and DESIGN.md's views alias, and a Transpose of the last two
 * axes read only as a MatMul/Gemm operand (ir_value_view_of: a transposed operand, a view in both).
 */
#include "emit-torch.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- element-wise */

static ir_status emit_unary(et_ctx *e, const ir_node *n) {
    const char *x = et_in(e, n, 0), *y = et_out(e, n, 0);
    float alpha;
    switch (n->op) {
    case IR_OP_Relu: et_line(e, "%s = torch.relu(%s)", y, x); break;
    case IR_OP_LeakyRelu:
        et_line(e, "%s = torch.nn.functional.leaky_relu(%s, %s)", y, x,
                et_float(e, ir_attr_float(n, "alpha", 0.01f)));
        break;
    case IR_OP_Sigmoid: et_line(e, "%s = torch.sigmoid(%s)", y, x); break;
    case IR_OP_HardSigmoid:
        et_line(e, "%s = torch.clamp(%s * %s + %s, 0.0, 1.0)", y, x,
                et_float(e, ir_attr_float(n, "alpha", 0.2f)),
                et_float(e, ir_attr_float(n, "beta", 0.5f)));
        break;
    case IR_OP_HardSwish: et_line(e, "%s = torch.nn.functional.hardswish(%s)", y, x); break;
    case IR_OP_Tanh: et_line(e, "%s = torch.tanh(%s)", y, x); break;
    case IR_OP_Erf: et_line(e, "%s = torch.erf(%s)", y, x); break;
    case IR_OP_Exp: et_line(e, "%s = torch.exp(%s)", y, x); break;
    case IR_OP_Log: et_line(e, "%s = torch.log(%s)", y, x); break;
    case IR_OP_Sqrt: et_line(e, "%s = torch.sqrt(%s)", y, x); break;
    case IR_OP_Neg: et_line(e, "%s = torch.neg(%s)", y, x); break;
    case IR_OP_Abs: et_line(e, "%s = torch.abs(%s)", y, x); break;
    case IR_OP_Reciprocal: et_line(e, "%s = torch.reciprocal(%s)", y, x); break;
    case IR_OP_Floor: et_line(e, "%s = torch.floor(%s)", y, x); break;
    case IR_OP_Ceil: et_line(e, "%s = torch.ceil(%s)", y, x); break;
    case IR_OP_Sign: et_line(e, "%s = torch.sign(%s)", y, x); break;
    case IR_OP_Not: et_line(e, "%s = torch.logical_not(%s)", y, x); break;
    case IR_OP_Softplus: et_line(e, "%s = torch.nn.functional.softplus(%s)", y, x); break;
    case IR_OP_Elu:
        alpha = ir_attr_float(n, "alpha", 1.0f);
        et_line(e, "%s = torch.nn.functional.elu(%s, %s)", y, x, et_float(e, alpha));
        break;
    case IR_OP_Identity: et_line(e, "%s = %s.clone()", y, x); break;
    case IR_OP_Gelu:
        et_line(e, "%s = torch.nn.functional.gelu(%s, approximate=\"%s\")", y, x,
                strcmp(ir_attr_str(n, "approximate", "none"), "tanh") ? "none" : "tanh");
        break;
    case IR_OP_Sin: et_line(e, "%s = torch.sin(%s)", y, x); break;
    case IR_OP_Cos: et_line(e, "%s = torch.cos(%s)", y, x); break;
    case IR_OP_Round: et_line(e, "%s = torch.round(%s)", y, x); break; /* halves to even */
    case IR_OP_Softsign: et_line(e, "%s = torch.nn.functional.softsign(%s)", y, x); break;
    case IR_OP_Selu: /* ONNX's alpha and gamma (PyTorch's selu has them fixed) */
        et_line(e, "%s = %s * torch.where(%s > 0, %s, %s * torch.expm1(%s))", y,
                et_float(e, ir_attr_float(n, "gamma", 1.05070102214813232421875f)), x, x,
                et_float(e, ir_attr_float(n, "alpha", 1.67326319217681884765625f)), x);
        break;
    case IR_OP_Celu:
        et_line(e, "%s = torch.celu(%s, %s)", y, x, et_float(e, ir_attr_float(n, "alpha", 1.0f)));
        break;
    case IR_OP_Mish: et_line(e, "%s = torch.nn.functional.mish(%s)", y, x); break;
    default: return et_refuse(e, n, "not an element-wise unary op");
    }
    return IR_OK;
}

/* Clip: bounds from inputs 1 and 2 (opset 11+) or the min/max attributes (opset 6). */
static ir_status emit_clip(et_ctx *e, const ir_node *n) {
    const char *x = et_in(e, n, 0), *y = et_out(e, n, 0);
    if (ir_attr_find(n, "min") || ir_attr_find(n, "max")) {
        et_line(e, "%s = torch.clamp(%s, %s, %s)", y, x,
                et_float(e, ir_attr_float(n, "min", -3.4028234663852886e38f)),
                et_float(e, ir_attr_float(n, "max", 3.4028234663852886e38f)));
        return IR_OK;
    }
    const char *lo = et_in(e, n, 1), *hi = et_in(e, n, 2);
    et_line(e, "%s = torch.clamp(%s, %s, %s)", y, x, lo, hi);
    return IR_OK;
}

static ir_status emit_cast(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    et_line(e, "%s = %s.to(%s, copy=True)", et_out(e, n, 0), et_in(e, n, 0),
            et_run_dtype(e, o->dtype));
    return IR_OK;
}

static ir_status emit_dropout(et_ctx *e, const ir_node *n) {
    /* Dropout(x[, ratio, training_mode]) -> y[, mask]: training only with a true training_mode
     * input (opset 12+); opset 7-11 Dropout is inference-only in magpie as in ONNX. */
    double ratio = ir_attr_float(n, "ratio", 0.5f), r[1];
    int64_t tm[1] = {0};
    if (et_const_floats(e, n, 1, r, 1) == 1) ratio = r[0];
    const ir_value *t = ir_node_in(et_graph(e), n, 2);
    if (t && !t->blob) return et_refuse(e, n, "training_mode is not a constant");
    if (t) {
        const void *p = ir_value_data(t);
        tm[0] = ir_load_i64(p, t->dtype, 0);
    }
    if (n->n_in > 1 && n->in[1] >= 0 && et_const_floats(e, n, 1, r, 1) != 1)
        return et_refuse(e, n, "ratio is not a constant");
    et_use(e, "dropout");
    et_line(e, "%s, %s = _dropout(%s, %s, %s, %s)", et_out(e, n, 0), et_out(e, n, 1),
            et_in(e, n, 0), et_float(e, ratio), tm[0] ? "True" : "False",
            et_out_used(e, n, 1) ? "True" : "False");
    return IR_OK;
}

static ir_status emit_binary(et_ctx *e, const ir_node *n) {
    const char *a = et_in(e, n, 0), *b = et_in(e, n, 1), *y = et_out(e, n, 0);
    switch (n->op) {
    case IR_OP_Add: et_line(e, "%s = torch.add(%s, %s)", y, a, b); break;
    case IR_OP_Sub: et_line(e, "%s = torch.sub(%s, %s)", y, a, b); break;
    case IR_OP_Mul: et_line(e, "%s = torch.mul(%s, %s)", y, a, b); break;
    case IR_OP_Div: et_line(e, "%s = _int_div(%s, %s)", y, a, b); break;
    case IR_OP_Pow: et_line(e, "%s = torch.pow(%s, %s).to(%s.dtype)", y, a, b, a); break;
    case IR_OP_Mod:
        et_line(e, "%s = torch.%s(%s, %s)", y, ir_attr_int(n, "fmod", 0) ? "fmod" : "remainder", a,
                b);
        break;
    case IR_OP_Equal: et_line(e, "%s = torch.eq(%s, %s)", y, a, b); break;
    case IR_OP_Less: et_line(e, "%s = torch.lt(%s, %s)", y, a, b); break;
    case IR_OP_LessOrEqual: et_line(e, "%s = torch.le(%s, %s)", y, a, b); break;
    case IR_OP_Greater: et_line(e, "%s = torch.gt(%s, %s)", y, a, b); break;
    case IR_OP_GreaterOrEqual: et_line(e, "%s = torch.ge(%s, %s)", y, a, b); break;
    case IR_OP_And: et_line(e, "%s = torch.logical_and(%s, %s)", y, a, b); break;
    case IR_OP_Or: et_line(e, "%s = torch.logical_or(%s, %s)", y, a, b); break;
    case IR_OP_Xor: et_line(e, "%s = torch.logical_xor(%s, %s)", y, a, b); break;
    default: return et_refuse(e, n, "not a binary op");
    }
    return IR_OK;
}

/* Min, Max, Sum: variadic, broadcasting. */
static ir_status emit_variadic(et_ctx *e, const ir_node *n) {
    const char *fn = n->op == IR_OP_Min   ? "torch.minimum"
                     : n->op == IR_OP_Max ? "torch.maximum"
                                          : "torch.add";
    const char *y = et_out(e, n, 0);
    if (n->n_in == 1) {
        et_line(e, "%s = %s.clone()", y, et_in(e, n, 0));
        return IR_OK;
    }
    et_line(e, "%s = %s(%s, %s)", y, fn, et_in(e, n, 0), et_in(e, n, 1));
    for (int i = 2; i < n->n_in; i++) et_line(e, "%s = %s(%s, %s)", y, fn, y, et_in(e, n, i));
    return IR_OK;
}

static ir_status emit_where(et_ctx *e, const ir_node *n) {
    et_line(e, "%s = torch.where(%s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
            et_in(e, n, 2));
    return IR_OK;
}

/* ---------------------------------------------------------------- shapes */

/* Reshape, Flatten, Squeeze, Unsqueeze: the output shape is known; a view as in PyTorch. */
static ir_status emit_reshape(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    et_line(e, "%s = %s.reshape(%s)", et_out(e, n, 0), et_in(e, n, 0), et_shape(e, &o->shape));
    return IR_OK;
}

/* Shape, Size and every op whose output the plan's shapes fix: Constant, ConstantOfShape. */
static ir_status emit_shape(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0);
    if (n->op == IR_OP_Size) {
        et_line(e, "%s = torch.tensor(%lld, dtype=torch.int64, device=dev)", et_out(e, n, 0),
                (long long)ir_shape_numel(&x->shape));
        return IR_OK;
    }
    int r = x->shape.rank, s, end;
    if (!et_axis(ir_attr_int(n, "start", 0), r + 1, &s)) s = 0;
    int64_t ea = ir_attr_int(n, "end", r);
    end = ea >= r ? r : ea < -r ? 0 : (int)(ea < 0 ? ea + r : ea);
    if (s > end) s = end;
    et_line(e, "%s = torch.tensor(%s, dtype=torch.int64, device=dev)", et_out(e, n, 0),
            et_ints(e, x->shape.dims + s, end - s, true));
    return IR_OK;
}

/* A tensor attribute (Constant's value, ConstantOfShape's value) as a Python expression. */
/* Returns a malloc'd string (the caller frees it) or NULL. */
static char *tensor_attr(et_ctx *e, const ir_attr *a) {
    if (!a) return NULL;
    if (a->type == IR_ATTR_TENSOR && a->t_blob) {
        const void *p = ir_blob_data(a->t_blob);
        int64_t cnt = ir_shape_numel(&a->t_shape);
        char *s = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);
        if (!f) return NULL;
        fputs("torch.tensor([", f);
        for (int64_t i = 0; i < cnt; i++) {
            if (ir_dtype_is_float(a->t_dtype))
                fprintf(f, "%s%s", i ? ", " : "", et_float(e, ir_load_f64(p, a->t_dtype, i)));
            else
                fprintf(f, "%s%lld", i ? ", " : "", (long long)ir_load_i64(p, a->t_dtype, i));
        }
        fprintf(f, "], dtype=%s, device=dev).reshape(%s)", et_run_dtype(e, a->t_dtype),
                et_shape(e, &a->t_shape));
        fclose(f);
        return s;
    }
    return NULL;
}

static ir_status emit_constant(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *o = ir_node_out(g, n, 0);
    const ir_attr *a = ir_attr_find(n, "value");
    if (a && a->type == IR_ATTR_TENSOR) {
        char *s = tensor_attr(e, a);
        if (!s) return et_refuse(e, n, "unreadable value");
        et_line(e, "%s = %s", et_out(e, n, 0), s);
        free(s);
        return IR_OK;
    }
    if ((a = ir_attr_find(n, "value_float")))
        et_line(e, "%s = torch.tensor(%s, dtype=%s, device=dev)", et_out(e, n, 0),
                et_float(e, a->f), et_run_dtype(e, o->dtype));
    else if ((a = ir_attr_find(n, "value_int")))
        et_line(e, "%s = torch.tensor(%lld, dtype=%s, device=dev)", et_out(e, n, 0),
                (long long)a->i, et_dtype(o->dtype));
    else if ((a = ir_attr_find(n, "value_ints")))
        et_line(e, "%s = torch.tensor(%s, dtype=%s, device=dev)", et_out(e, n, 0),
                et_ints(e, a->ints, a->n, true), et_dtype(o->dtype));
    else
        return et_refuse(e, n, "a Constant without value, value_float, value_int or value_ints");
    return IR_OK;
}

static ir_status emit_constant_of_shape(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    const ir_attr *a = ir_attr_find(n, "value");
    double v = 0;
    if (a && a->type == IR_ATTR_TENSOR && a->t_blob)
        v = ir_load_f64(ir_blob_data(a->t_blob), a->t_dtype, 0);
    et_line(e, "%s = torch.full(%s, %s, dtype=%s, device=dev)", et_out(e, n, 0),
            et_shape(e, &o->shape), et_float(e, v), et_run_dtype(e, o->dtype));
    return IR_OK;
}

static ir_status emit_range(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    et_use(e, "range");
    et_line(e, "%s = _range(%s, %s, %s, %lld, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
            et_in(e, n, 2), (long long)ir_shape_numel(&o->shape), et_run_dtype(e, o->dtype));
    return IR_OK;
}

/* ---------------------------------------------------------------- layout */

static ir_status emit_transpose(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int64_t perm[IR_MAX_RANK];
    const int64_t *p;
    int r = x->shape.rank, np = ir_attr_ints(n, "perm", &p);
    for (int i = 0; i < r; i++) perm[i] = np == r ? p[i] : r - 1 - i;
    /* a view exactly where magpie's executor and peak count one (a transposed operand: the last
     * two axes swapped, read only as a MatMul/Gemm operand); elsewhere a copy, as magpie's */
    bool view = ir_value_view_of(et_graph(e), n->out[0]) >= 0, identity = true;
    for (int i = 0; i < r; i++) identity &= perm[i] == i;
    if (identity) /* permute(identity).contiguous() would alias x */
        et_line(e, "%s = %s.clone()", et_out(e, n, 0), et_in(e, n, 0));
    else if (!view && r == 2) /* a 2-D transposed copy_ on the CPU goes through a 60x60 block
                               * buffer (14,400 B of float) that magpie's kernel does not need:
                               * copied as 3-D, it is the output alone */
        et_line(e, "%s = %s.permute((1, 0)).unsqueeze(0).contiguous()[0]", et_out(e, n, 0),
                et_in(e, n, 0));
    else
        et_line(e, "%s = %s.permute(%s)%s", et_out(e, n, 0), et_in(e, n, 0),
                et_ints(e, perm, r, false), view ? "" : ".contiguous()");
    return IR_OK;
}

static ir_status emit_concat(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", 0), o->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    char buf[4096];
    if (!et_in_list(e, n, false, buf, sizeof buf)) return et_refuse(e, n, "too many inputs");
    et_line(e, "%s = torch.cat([%s], %d)", et_out(e, n, 0), buf, axis);
    return IR_OK;
}

static ir_status emit_split(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    int64_t off = 0;
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *o = ir_node_out(g, n, i);
        if (!o) continue;
        int64_t len = o->shape.dims[axis];
        if (et_out_used(e, n, i))
            et_line(e,
                    "%s = %s.narrow(%d, %lld, %lld).clone(memory_format=torch.contiguous_format)",
                    et_out(e, n, i), et_in(e, n, 0), axis, (long long)off, (long long)len);
        off += len;
    }
    /* parts without readers are never computed (nothing to free) */
    for (int i = 0; i < n->n_out; i++)
        if (n->out[i] >= 0 && !et_out_used(e, n, i)) et_line(e, "%s = None", et_out(e, n, i));
    return IR_OK;
}

/* Slice: starts/ends/axes/steps from inputs (opset 10+) or attributes (opset 1-9), clamped as
 * ONNX says, resolved here. */
static ir_status emit_slice(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int r = x->shape.rank;
    int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
    int ns, ne, na, nstep;
    if (n->n_in > 1) {
        ns = et_const_ints(e, n, 1, st, IR_MAX_RANK);
        ne = et_const_ints(e, n, 2, en, IR_MAX_RANK);
        na = n->n_in > 3 && n->in[3] >= 0 ? et_const_ints(e, n, 3, ax, IR_MAX_RANK) : -2;
        nstep = n->n_in > 4 && n->in[4] >= 0 ? et_const_ints(e, n, 4, sp, IR_MAX_RANK) : -2;
        if (ns < 0 || ne != ns || na == -1 || nstep == -1)
            return et_refuse(e, n, "starts, ends, axes or steps is not a constant");
    } else {
        const int64_t *p;
        ns = ir_attr_ints(n, "starts", &p);
        for (int i = 0; i < ns && i < IR_MAX_RANK; i++) st[i] = p[i];
        ne = ir_attr_ints(n, "ends", &p);
        for (int i = 0; i < ne && i < IR_MAX_RANK; i++) en[i] = p[i];
        na = ir_attr_ints(n, "axes", &p);
        for (int i = 0; i < na && i < IR_MAX_RANK; i++) ax[i] = p[i];
        if (na < 0) na = -2;
        nstep = -2;
        if (ns < 0 || ne != ns) return et_refuse(e, n, "bad starts/ends");
    }
    int64_t A[IR_MAX_RANK], S[IR_MAX_RANK], E[IR_MAX_RANK], P[IR_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        int a;
        if (!et_axis(na == -2 ? i : ax[i], r, &a)) return et_refuse(e, n, "axis out of range");
        int64_t dim = x->shape.dims[a], step = nstep == -2 ? 1 : sp[i], s = st[i], t = en[i];
        if (step == 0) return et_refuse(e, n, "step 0");
        if (s < 0) s += dim;
        if (t < 0) t += dim;
        if (step > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            t = t < 0 ? 0 : t > dim ? dim : t;
        } else {
            s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
            t = t < -1 ? -1 : t > dim - 1 ? dim - 1 : t;
        }
        A[i] = a;
        S[i] = s;
        E[i] = t;
        P[i] = step;
    }
    et_use(e, "slice");
    et_line(e, "%s = _slice(%s, %s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
            et_ints(e, A, ns, true), et_ints(e, S, ns, true), et_ints(e, E, ns, true),
            et_ints(e, P, ns, true));
    return IR_OK;
}

static ir_status emit_expand(et_ctx *e, const ir_node *n) {
    const ir_value *o = ir_node_out(et_graph(e), n, 0);
    et_line(e, "%s = %s.expand(%s).clone(memory_format=torch.contiguous_format)", et_out(e, n, 0),
            et_in(e, n, 0), et_shape(e, &o->shape));
    return IR_OK;
}

static ir_status emit_tile(et_ctx *e, const ir_node *n) {
    int64_t reps[IR_MAX_RANK];
    int nr = et_const_ints(e, n, 1, reps, IR_MAX_RANK);
    if (nr < 0) return et_refuse(e, n, "repeats is not a constant");
    et_line(e, "%s = %s.repeat(%s)", et_out(e, n, 0), et_in(e, n, 0), et_ints(e, reps, nr, false));
    return IR_OK;
}

/* Pad: pads from input 1 (opset 11+) or the attribute, over the axes of input 3 (opset 18) or
 * every dim, resolved here to every dim's begin then end; reflect, edge and wrap go through the
 * prelude's general form (any dims, pads over a dim's length), constant through F.pad. */
static ir_status emit_pad(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int r = x->shape.rank;
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
    int np, na = r;
    if (n->n_in > 1 && n->in[1] >= 0) {
        np = et_const_ints(e, n, 1, raw, 2 * IR_MAX_RANK);
        if (np < 0) return et_refuse(e, n, "pads is not a constant");
    } else {
        const int64_t *p;
        np = ir_attr_ints(n, "pads", &p);
        for (int i = 0; i < np && i < 2 * IR_MAX_RANK; i++) raw[i] = p[i];
    }
    if (n->n_in > 3 && n->in[3] >= 0) {
        na = et_const_ints(e, n, 3, axes, IR_MAX_RANK);
        if (na < 0) return et_refuse(e, n, "axes is not a constant");
    } else {
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na) return et_refuse(e, n, "pads has %d values for %d axes", np, na);
    for (int i = 0; i < 2 * r; i++) pads[i] = 0;
    for (int i = 0; i < na; i++) {
        int a;
        if (!et_axis(axes[i], r, &a)) return et_refuse(e, n, "axis %lld", (long long)axes[i]);
        pads[a] = raw[i];
        pads[r + a] = raw[na + i];
    }
    const char *mode = ir_attr_str(n, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") &&
        strcmp(mode, "wrap"))
        return et_refuse(e, n, "mode '%s'", mode);
    double v = ir_attr_float(n, "value", 0.0f), cv[1];
    if (n->n_in > 2 && n->in[2] >= 0) {
        int64_t iv[1];
        if (et_const_floats(e, n, 2, cv, 1) == 1)
            v = cv[0];
        else if (et_const_ints(e, n, 2, iv, 1) == 1)
            v = (double)iv[0];
        else
            return et_refuse(e, n, "constant_value is not a constant");
    }
    et_use(e, "pad");
    et_line(e, "%s = _pad(%s, %s, \"%s\", %s)", et_out(e, n, 0), et_in(e, n, 0),
            et_ints(e, pads, 2 * r, true), mode, et_float(e, v));
    return IR_OK;
}

/* ---------------------------------------------------------------- indexing */

static ir_status emit_gather(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "gather");
    et_line(e, "%s = %s(%s, %s, %d)", et_out(e, n, 0),
            n->op == IR_OP_Gather ? "_gather" : "_gather_elements", et_in(e, n, 0), et_in(e, n, 1),
            axis);
    return IR_OK;
}

static ir_status emit_scatter_nd(et_ctx *e, const ir_node *n) {
    et_use(e, "gather");
    et_line(e, "%s = _scatter_nd(%s, %s, %s, \"%s\")", et_out(e, n, 0), et_in(e, n, 0),
            et_in(e, n, 1), et_in(e, n, 2), ir_attr_str(n, "reduction", "none"));
    return IR_OK;
}

static ir_status emit_trilu(et_ctx *e, const ir_node *n) {
    int64_t k[1] = {0};
    if (n->n_in > 1 && n->in[1] >= 0 && et_const_ints(e, n, 1, k, 1) != 1)
        return et_refuse(e, n, "k is not a constant");
    et_use(e, "trilu");
    et_line(e, "%s = _trilu(%s, %lld, %s)", et_out(e, n, 0), et_in(e, n, 0), (long long)k[0],
            ir_attr_int(n, "upper", 1) ? "True" : "False");
    return IR_OK;
}

et_op_fn et_op_lookup(ir_op_kind k) {
    switch (k) {
    case IR_OP_Relu:
    case IR_OP_LeakyRelu:
    case IR_OP_Sigmoid:
    case IR_OP_HardSigmoid:
    case IR_OP_HardSwish:
    case IR_OP_Tanh:
    case IR_OP_Erf:
    case IR_OP_Exp:
    case IR_OP_Log:
    case IR_OP_Sqrt:
    case IR_OP_Neg:
    case IR_OP_Abs:
    case IR_OP_Reciprocal:
    case IR_OP_Floor:
    case IR_OP_Ceil:
    case IR_OP_Sign:
    case IR_OP_Not:
    case IR_OP_Softplus:
    case IR_OP_Elu:
    case IR_OP_Identity:
    case IR_OP_Gelu:
    case IR_OP_Sin:
    case IR_OP_Cos:
    case IR_OP_Round:
    case IR_OP_Softsign:
    case IR_OP_Selu:
    case IR_OP_Celu:
    case IR_OP_Mish: return emit_unary;
    case IR_OP_Clip: return emit_clip;
    case IR_OP_Cast:
    case IR_OP_CastLike: return emit_cast;
    case IR_OP_Dropout: return emit_dropout;
    case IR_OP_Add:
    case IR_OP_Sub:
    case IR_OP_Mul:
    case IR_OP_Div:
    case IR_OP_Pow:
    case IR_OP_Mod:
    case IR_OP_Equal:
    case IR_OP_Less:
    case IR_OP_LessOrEqual:
    case IR_OP_Greater:
    case IR_OP_GreaterOrEqual:
    case IR_OP_And:
    case IR_OP_Or:
    case IR_OP_Xor: return emit_binary;
    case IR_OP_Min:
    case IR_OP_Max:
    case IR_OP_Sum: return emit_variadic;
    case IR_OP_Where: return emit_where;
    case IR_OP_Reshape:
    case IR_OP_Flatten:
    case IR_OP_Squeeze:
    case IR_OP_Unsqueeze: return emit_reshape;
    case IR_OP_Shape:
    case IR_OP_Size: return emit_shape;
    case IR_OP_Constant: return emit_constant;
    case IR_OP_ConstantOfShape: return emit_constant_of_shape;
    case IR_OP_Range: return emit_range;
    case IR_OP_Transpose: return emit_transpose;
    case IR_OP_Concat: return emit_concat;
    case IR_OP_Split: return emit_split;
    case IR_OP_Slice: return emit_slice;
    case IR_OP_Expand: return emit_expand;
    case IR_OP_Tile: return emit_tile;
    case IR_OP_Pad: return emit_pad;
    case IR_OP_Gather:
    case IR_OP_GatherElements: return emit_gather;
    case IR_OP_ScatterND: return emit_scatter_nd;
    case IR_OP_Trilu: return emit_trilu;
    default: return NULL;
    }
}
