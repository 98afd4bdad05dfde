/* emit-torch-nn.c - the PyTorch statements of the compute ops: convolutions, matmuls, pooling,
 * normalizations, softmaxes, reductions and Resize (emit-torch.h), one function per family, with
 * the semantics of ir/ops-conv.c, ops-matmul.c, ops-pool.c, ops-norm.c, ops-reduce.c and
 * ops-resize.c. Geometry (pads from auto_pad, reduce axes from an input) is resolved here; the
 * prelude's helpers handle what PyTorch spells differently (asymmetric pads, old softmax axes). */
#include "emit-torch.h"
#include "ir-geom.h"

#include <stdlib.h>
#include <string.h>

/* Spatial geometry of a conv or pool node: kernel, strides, dilations and explicit pads (auto_pad
 * resolved against the known output shape). */
typedef struct et_geom {
    int S;
    int64_t k[3], s[3], dl[3], pads[6];
} et_geom;

static ir_status geom_of(et_ctx *e, const ir_node *n, const ir_shape *xs, const ir_shape *ys,
                         const int64_t *kernel, et_geom *gm) {
    const int64_t *p;
    int S = xs->rank - 2;
    if (S < 1 || S > 3) return et_refuse(e, n, "%d spatial dims (1 to 3 are emitted)", S);
    gm->S = S;
    int nk = ir_attr_ints(n, "kernel_shape", &p);
    for (int i = 0; i < S; i++) gm->k[i] = nk == S ? p[i] : kernel ? kernel[i] : 1;
    int ns = ir_attr_ints(n, "strides", &p);
    for (int i = 0; i < S; i++) gm->s[i] = ns == S ? p[i] : 1;
    int nd = ir_attr_ints(n, "dilations", &p);
    for (int i = 0; i < S; i++) gm->dl[i] = nd == S ? p[i] : 1;
    int np = ir_attr_ints(n, "pads", &p);
    for (int i = 0; i < 2 * S; i++) gm->pads[i] = np == 2 * S ? p[i] : 0;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 2 * S; i++) gm->pads[i] = 0;
    } else if (ys && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"))) {
        for (int i = 0; i < S; i++) {
            int64_t dk = (gm->k[i] - 1) * gm->dl[i] + 1;
            int64_t tot = (ys->dims[2 + i] - 1) * gm->s[i] + dk - xs->dims[2 + i];
            if (tot < 0) tot = 0;
            gm->pads[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
            gm->pads[S + i] = tot - gm->pads[i];
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- convolutions and matmuls */

static ir_status emit_conv(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0), *w = ir_node_in(g, n, 1), *y = ir_node_out(g, n, 0);
    et_geom gm;
    ir_status st =
        geom_of(e, n, &x->shape, n->op == IR_OP_Conv ? &y->shape : NULL, w->shape.dims + 2, &gm);
    if (st) return st;
    int S = gm.S;
    int64_t group = ir_attr_int(n, "group", 1);
    et_use(e, "conv");
    if (n->op == IR_OP_Conv) {
        et_line(e, "%s = _conv(%s, %s, %s, %s, %s, %s, %lld)", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), et_ints(e, gm.s, S, true),
                et_ints(e, gm.pads, 2 * S, true), et_ints(e, gm.dl, S, true), (long long)group);
        return IR_OK;
    }
    /* ConvTranspose: pads from the known output (output_shape and auto_pad included). */
    int64_t opad[3] = {0, 0, 0}, out_sp[3];
    const int64_t *p;
    int no = ir_attr_ints(n, "output_padding", &p);
    for (int i = 0; i < S; i++) opad[i] = no == S ? p[i] : 0;
    for (int i = 0; i < S; i++) out_sp[i] = y->shape.dims[2 + i];
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (ir_attr_find(n, "output_shape") || strcmp(ap, "NOTSET")) {
        for (int i = 0; i < S; i++) {
            int64_t full =
                (x->shape.dims[2 + i] - 1) * gm.s[i] + (gm.k[i] - 1) * gm.dl[i] + 1 + opad[i];
            int64_t tot = full - out_sp[i];
            if (tot < 0) return et_refuse(e, n, "an output larger than the full transposed conv");
            bool upper = strcmp(ap, "SAME_LOWER") != 0;
            gm.pads[i] = upper ? tot / 2 : tot - tot / 2;
            gm.pads[S + i] = tot - gm.pads[i];
            opad[i] = 0;
        }
    }
    /* the input rows of one tile of magpie's column buffer ([M/group * K, pixels]), 2-D */
    int64_t tile_rows = 0;
    if (S == 2) {
        const int64_t H = x->shape.dims[2], W = x->shape.dims[3];
        tile_rows = ir_conv_tile_rows(
            H, W, w->shape.dims[1] * gm.k[0] * gm.k[1] * W * (int64_t)ir_dtype_size(x->dtype));
    }
    et_line(e, "%s = _conv_t(%s, %s, %s, %s, %s, %s, %lld, %s, %s, %lld)", et_out(e, n, 0),
            et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), et_ints(e, gm.s, S, true),
            et_ints(e, gm.pads, 2 * S, true), et_ints(e, gm.dl, S, true), (long long)group,
            et_ints(e, opad, S, true), et_ints(e, out_sp, S, true), (long long)tile_rows);
    return IR_OK;
}

/* A fused accumulate's part written into the accumulate's buffer buf (et_fused_into): Tensor.addmm_
 * for 2-D operands and Gemm, baddbmm_ for two 3-D operands of one batch, both with beta 0 where
 * the accumulate overwrites (part 0 into an unfilled buffer; PyTorch then ignores buf's data).
 * False for other shapes (broadcast batches, vectors): a part of its own, which the accumulate
 * adds. */
static bool emit_matmul_into(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    int acc = et_fused_into(e, n);
    if (acc >= 0 && n->op == IR_OP_Gemm && n->n_in > 2 && n->in[2] >= 0) acc = -1;
    if (acc < 0) return false;
    const ir_node *a = &g->nodes[acc];
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_in(g, n, 1);
    int r = x->shape.rank;
    const char *beta = ir_fission_accumulate_overwrites(g, a) ? "0.0" : "1.0";
    const char *buf = et_in(e, a, 0), *A = et_in(e, n, 0), *B = et_in(e, n, 1);
    if (n->op == IR_OP_Gemm) {
        et_line(e, "%s.addmm_(%s%s, %s%s, beta=%s, alpha=%s)", buf, A,
                ir_attr_int(n, "transA", 0) ? ".t()" : "", B,
                ir_attr_int(n, "transB", 0) ? ".t()" : "", beta,
                et_float(e, ir_attr_float(n, "alpha", 1.0f)));
    } else if (r == 2 && y->shape.rank == 2) {
        et_line(e, "%s.addmm_(%s, %s, beta=%s)", buf, A, B, beta);
    } else if (r == 3 && y->shape.rank == 3 && x->shape.dims[0] == y->shape.dims[0]) {
        et_line(e, "%s.baddbmm_(%s, %s, beta=%s)", buf, A, B, beta);
    } else {
        return false;
    }
    et_line(e, "%s = %s", et_out(e, n, 0), buf);
    et_fused_done(e, n);
    return true;
}

static ir_status emit_matmul(et_ctx *e, const ir_node *n) {
    if (emit_matmul_into(e, n)) return IR_OK;
    if (n->op == IR_OP_MatMul) {
        et_line(e, "%s = torch.matmul(%s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1));
        return IR_OK;
    }
    et_use(e, "gemm");
    et_line(e, "%s = _gemm(%s, %s, %s, %s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
            et_in(e, n, 1), et_in(e, n, 2), et_float(e, ir_attr_float(n, "alpha", 1.0f)),
            et_float(e, ir_attr_float(n, "beta", 1.0f)),
            ir_attr_int(n, "transA", 0) ? "True" : "False",
            ir_attr_int(n, "transB", 0) ? "True" : "False");
    return IR_OK;
}

/* ---------------------------------------------------------------- pooling */

static ir_status emit_pool(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    int r = x->shape.rank;
    int64_t axes[IR_MAX_RANK];
    if (n->op == IR_OP_GlobalAveragePool || n->op == IR_OP_GlobalMaxPool) {
        for (int i = 2; i < r; i++) axes[i - 2] = i;
        et_line(e, "%s = torch.%s(%s, dim=%s, keepdim=True)", et_out(e, n, 0),
                n->op == IR_OP_GlobalAveragePool ? "mean" : "amax", et_in(e, n, 0),
                et_ints(e, axes, r - 2, false));
        return IR_OK;
    }
    et_geom gm;
    ir_status st = geom_of(e, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    int S = gm.S;
    bool ceil = ir_attr_int(n, "ceil_mode", 0) != 0;
    et_use(e, "pool");
    if (n->op == IR_OP_MaxPool) {
        if (et_out_used(e, n, 1)) return et_refuse(e, n, "the Indices output");
        et_line(e, "%s = _maxpool(%s, %s, %s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
                et_ints(e, gm.k, S, true), et_ints(e, gm.s, S, true),
                et_ints(e, gm.pads, 2 * S, true), et_ints(e, gm.dl, S, true),
                ceil ? "True" : "False");
        return IR_OK;
    }
    for (int i = 0; i < S; i++) {
        if (gm.pads[i] != gm.pads[S + i] || 2 * gm.pads[i] > gm.k[i])
            return et_refuse(e, n, "asymmetric (or over half-kernel) pads in an AveragePool");
        if (gm.dl[i] != 1) return et_refuse(e, n, "a dilated AveragePool");
    }
    et_line(e, "%s = _avgpool(%s, %s, %s, %s, %s, %lld)", et_out(e, n, 0), et_in(e, n, 0),
            et_ints(e, gm.k, S, true), et_ints(e, gm.s, S, true), et_ints(e, gm.pads, 2 * S, true),
            ceil ? "True" : "False", (long long)ir_attr_int(n, "count_include_pad", 0));
    return IR_OK;
}

/* ---------------------------------------------------------------- normalizations */

static ir_status emit_batchnorm(et_ctx *e, const ir_node *n) {
    int64_t tm = ir_attr_int(n, "training_mode", -1);
    bool train = tm >= 0 ? tm != 0 : false;
    for (int i = 1; tm < 0 && i < n->n_out; i++) train |= n->out[i] >= 0;
    const char *eps = et_float(e, ir_attr_float(n, "epsilon", 1e-5f));
    et_use(e, "batchnorm");
    if (!train) {
        et_line(e, "%s = _bn_eval(%s, %s, %s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), et_in(e, n, 2), et_in(e, n, 3), et_in(e, n, 4), eps);
        return IR_OK;
    }
    et_line(e, "%s, %s, %s, %s, %s = _bn_train(%s, %s, %s, %s, %s, %s, %s)", et_out(e, n, 0),
            et_out(e, n, 1), et_out(e, n, 2), et_out(e, n, 3), et_out(e, n, 4), et_in(e, n, 0),
            et_in(e, n, 1), et_in(e, n, 2), et_in(e, n, 3), et_in(e, n, 4), eps,
            et_float(e, ir_attr_float(n, "momentum", 0.9f)));
    return IR_OK;
}

static ir_status emit_layernorm(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", -1), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "layernorm");
    et_line(e, "%s, %s, %s = _layernorm(%s, %s, %s, %d, %s)", et_out(e, n, 0), et_out(e, n, 1),
            et_out(e, n, 2), et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), axis,
            et_float(e, ir_attr_float(n, "epsilon", 1e-5f)));
    return IR_OK;
}

static ir_status emit_instnorm(et_ctx *e, const ir_node *n) {
    et_use(e, "instancenorm");
    et_line(e, "%s = _instnorm(%s, %s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_in(e, n, 1),
            et_in(e, n, 2), et_float(e, ir_attr_float(n, "epsilon", 1e-5f)));
    return IR_OK;
}

/* The softmax axis and whether the pre-13 semantics (flatten at axis) apply. */
static ir_status softmax_axis(et_ctx *e, const ir_node *n, const ir_value *x, int *axis,
                              bool *old) {
    const ir_graph *g = et_graph(e);
    *old = g->opset > 0 && g->opset < 13;
    if (!et_axis(ir_attr_int(n, "axis", *old ? 1 : -1), x->shape.rank, axis))
        return et_refuse(e, n, "axis out of range");
    return IR_OK;
}

static ir_status emit_softmax(et_ctx *e, const ir_node *n) {
    int axis;
    bool old;
    ir_status st = softmax_axis(e, n, ir_node_in(et_graph(e), n, 0), &axis, &old);
    if (st) return st;
    et_use(e, "softmax");
    et_line(e, "%s = _softmax(%s, %d, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), axis,
            old ? "True" : "False", n->op == IR_OP_LogSoftmax ? "True" : "False");
    return IR_OK;
}

/* ---------------------------------------------------------------- reductions */

static ir_status emit_reduce(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int r = x->shape.rank, na;
    int64_t ax[IR_MAX_RANK], axes[IR_MAX_RANK];
    const int64_t *p;
    if (n->n_in > 1 && n->in[1] >= 0) {
        na = et_const_ints(e, n, 1, ax, IR_MAX_RANK);
        if (na < 0) return et_refuse(e, n, "axes is not a constant");
    } else {
        na = ir_attr_ints(n, "axes", &p);
        for (int i = 0; i < na && i < IR_MAX_RANK; i++) ax[i] = p[i];
        if (na < 0) na = 0;
    }
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    if (na == 0 && ir_attr_int(n, "noop_with_empty_axes", 0)) {
        et_line(e, "%s = %s.clone()", et_out(e, n, 0), et_in(e, n, 0));
        return IR_OK;
    }
    int cnt = 0;
    bool mask[IR_MAX_RANK] = {false};
    for (int i = 0; i < (na ? na : r); i++) {
        int a;
        if (!et_axis(na ? ax[i] : i, r, &a)) return et_refuse(e, n, "axis out of range");
        mask[a] = true;
    }
    for (int i = 0; i < r; i++)
        if (mask[i]) axes[cnt++] = i;
    const char *kind = n->op == IR_OP_ReduceMean        ? "mean"
                       : n->op == IR_OP_ReduceSum       ? "sum"
                       : n->op == IR_OP_ReduceMax       ? "max"
                       : n->op == IR_OP_ReduceMin       ? "min"
                       : n->op == IR_OP_ReduceL2        ? "l2"
                       : n->op == IR_OP_ReduceL1        ? "l1"
                       : n->op == IR_OP_ReduceSumSquare ? "sumsquare"
                       : n->op == IR_OP_ReduceLogSum    ? "logsum"
                       : n->op == IR_OP_ReduceLogSumExp ? "logsumexp"
                                                        : "prod";
    et_use(e, "reduce");
    et_line(e, "%s = _reduce(\"%s\", %s, %s, %s)", et_out(e, n, 0), kind, et_in(e, n, 0),
            et_ints(e, axes, cnt, true), keep ? "True" : "False");
    return IR_OK;
}

static ir_status emit_argmax(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int axis;
    if (!et_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return et_refuse(e, n, "axis out of range");
    et_use(e, "argmax");
    et_line(e, "%s = _argmax(%s, %d, %s, %s%s)", et_out(e, n, 0), et_in(e, n, 0), axis,
            ir_attr_int(n, "keepdims", 1) ? "True" : "False",
            ir_attr_int(n, "select_last_index", 0) ? "True" : "False",
            n->op == IR_OP_ArgMin ? ", True" : "");
    return IR_OK;
}

static ir_status emit_cumsum(et_ctx *e, const ir_node *n) {
    const ir_value *x = ir_node_in(et_graph(e), n, 0);
    int64_t a[1];
    int axis;
    if (et_const_ints(e, n, 1, a, 1) != 1) return et_refuse(e, n, "axis is not a constant");
    if (!et_axis(a[0], x->shape.rank, &axis)) return et_refuse(e, n, "axis out of range");
    et_use(e, "cumsum");
    et_line(e, "%s = _cumsum(%s, %d, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), axis,
            ir_attr_int(n, "exclusive", 0) ? "True" : "False",
            ir_attr_int(n, "reverse", 0) ? "True" : "False");
    return IR_OK;
}

/* ---------------------------------------------------------------- Resize */

char *et_resize_args(et_ctx *e, const ir_node *n, int scales_in, int rank) {
    const ir_graph *g = et_graph(e);
    bool old = g->opset > 0 && g->opset < 11;
    const char *mode = ir_attr_str(n, "mode", "nearest");
    const char *ctm =
        ir_attr_str(n, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel");
    const char *rnd = ir_attr_str(n, "nearest_mode", old ? "floor" : "round_prefer_floor");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear")) return NULL;
    double sc[IR_MAX_RANK];
    int ns = et_const_floats(e, n, scales_in, sc, IR_MAX_RANK);
    char buf[512];
    size_t len = 0;
    if (ns == rank) {
        len += (size_t)snprintf(buf, sizeof buf, "[");
        for (int i = 0; i < ns; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "",
                                    et_float(e, sc[i]));
        snprintf(buf + len, sizeof buf - len, "]");
    } else {
        snprintf(buf, sizeof buf, "None");
    }
    char out[768];
    snprintf(out, sizeof out, "%s, \"%s\", \"%s\", %s", buf, ctm, rnd,
             strcmp(mode, "linear") ? "False" : "True");
    return strdup(out);
}

static ir_status emit_resize(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    int scales_in = g->opset > 0 && g->opset < 11 ? 1 : 2;
    char *args = et_resize_args(e, n, scales_in, x->shape.rank);
    if (!args) return et_refuse(e, n, "mode '%s'", ir_attr_str(n, "mode", "nearest"));
    et_use(e, "resize");
    et_line(e, "%s = _resize(%s, %s, %s)", et_out(e, n, 0), et_in(e, n, 0), et_shape(e, &y->shape),
            args);
    free(args);
    return IR_OK;
}

et_op_fn et_nn_lookup(ir_op_kind k) {
    switch (k) {
    case IR_OP_Conv:
    case IR_OP_ConvTranspose: return emit_conv;
    case IR_OP_MatMul:
    case IR_OP_Gemm: return emit_matmul;
    case IR_OP_MaxPool:
    case IR_OP_AveragePool:
    case IR_OP_GlobalAveragePool:
    case IR_OP_GlobalMaxPool: return emit_pool;
    case IR_OP_BatchNormalization: return emit_batchnorm;
    case IR_OP_LayerNormalization: return emit_layernorm;
    case IR_OP_InstanceNormalization: return emit_instnorm;
    case IR_OP_Softmax:
    case IR_OP_LogSoftmax: return emit_softmax;
    case IR_OP_ReduceMean:
    case IR_OP_ReduceSum:
    case IR_OP_ReduceMax:
    case IR_OP_ReduceMin:
    case IR_OP_ReduceProd:
    case IR_OP_ReduceL2:
    case IR_OP_ReduceL1:
    case IR_OP_ReduceSumSquare:
    case IR_OP_ReduceLogSum:
    case IR_OP_ReduceLogSumExp: return emit_reduce;
    case IR_OP_ArgMax:
    case IR_OP_ArgMin: return emit_argmax;
    case IR_OP_CumSum: return emit_cumsum;
    case IR_OP_Resize: return emit_resize;
    default: return NULL;
    }
}
