/* ops-grad-conv.c - ConvGradWeight(X, dY) -> dW, the weight gradient of Conv, one fused op as
 * cuDNN's backward-filter kernel is (grad-conv.c also uses it, with X and dY swapped, for
 * ConvTranspose's weight). The input gradients are plain ConvTranspose / Conv nodes.
 *
 * dW[m, c, k] = sum_n sum_o dY[n, m, o] * X[n, g*Cg + c, o*s - pb + k*d] for m in group g: per
 * (batch, group) and tile of output rows (ir_conv_tile_rows), im2col of X into the workspace
 * (the forward's own ir_conv_im2col, so the two agree on every window) and one sgemm
 * dW_g += dY_g[:, tile] col_tile^T. A pointwise conv (kernel 1, stride 1,
 * no pads) hands X to sgemm as it is, and a conv with one input channel per group (depthwise)
 * runs direct row dot products, as the forward's depthwise path does: neither needs workspace.
 * gw_workspace() returns exactly what the kernel uses.
 *
 * Attributes: kernel_shape (required: it fixes dW's shape), strides, dilations, pads (explicit,
 * the builder resolves auto_pad) and group, with the forward Conv's meaning. float32 and float64
 * (sgemm / dgemm, one template: ops-grad-conv-kern.h), like the forward Conv. With
 * ir_kernel_ctx.accumulate the first sgemm adds to dW too (beta = 1) and the depthwise path adds
 * its sums: a fused FissionAccumulate's part written into its buffer. */
#include "ir-impl.h"

#include <cblas.h>

/* Reads X, dY and the attributes into cg; dY's spatial dims must be the conv's output dims. */
static ir_status gw_parse(const ir_graph *g, const ir_node *n, ir_conv_geom *cg, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *dy = ir_node_in(g, n, 1);
    char s1[96], s2[96];
    int r = x->shape.rank, S = r - 2;
    memset(cg, 0, sizeof *cg);
    if (r < 3 || r > 5 || dy->shape.rank != r || dy->shape.dims[0] != x->shape.dims[0])
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X %s and dY %s must be (N,C,spatial) of one rank",
                            ir_shape_str(&x->shape, s1, sizeof s1),
                            ir_shape_str(&dy->shape, s2, sizeof s2));
    if (!ir_dtype_is_float(x->dtype) || dy->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X (%s) and dY (%s) must share one float dtype",
                            ir_dtype_name(x->dtype), ir_dtype_name(dy->dtype));
    if (strcmp(ir_attr_str(n, "auto_pad", "NOTSET"), "NOTSET"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "pads must be explicit (auto_pad NOTSET)");
    cg->S = S;
    cg->N = x->shape.dims[0];
    cg->C = x->shape.dims[1];
    cg->M = dy->shape.dims[1];
    cg->group = ir_attr_int(n, "group", 1);
    if (cg->group < 1 || cg->C % cg->group || cg->M % cg->group)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "group %lld must divide X's %lld and dY's %lld "
                            "channels",
                            (long long)cg->group, (long long)cg->C, (long long)cg->M);
    int64_t ks[3], st[3], dl[3], pads[6];
    ir_status rc;
    const int64_t *kv;
    if (ir_attr_ints(n, "kernel_shape", &kv) != S)
        return ir_node_fail(d, IR_ERR_INVALID, n, "kernel_shape must have %d values", S);
    if ((rc = ir_attr_ints_n(n, "kernel_shape", S, 1, ks, d)) ||
        (rc = ir_attr_ints_n(n, "strides", S, 1, st, d)) ||
        (rc = ir_attr_ints_n(n, "dilations", S, 1, dl, d)) ||
        (rc = ir_attr_ints_n(n, "pads", 2 * S, 0, pads, d)))
        return rc;
    for (int i = 0; i < 3; i++) {
        cg->in[i] = cg->out[i] = cg->k[i] = cg->s[i] = cg->d[i] = 1;
        cg->pb[i] = cg->pe[i] = 0;
    }
    for (int i = 0; i < S; i++) {
        int j = 3 - S + i;
        int64_t in = x->shape.dims[2 + i], dk = (ks[i] - 1) * dl[i] + 1;
        if (ks[i] < 1 || st[i] < 1 || dl[i] < 1 || pads[i] < 0 || pads[S + i] < 0 ||
            in + pads[i] + pads[S + i] < dk)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "spatial dim %d: kernel %lld, stride %lld, dilation %lld, pads "
                                "%lld+%lld do not fit input %lld",
                                i, (long long)ks[i], (long long)st[i], (long long)dl[i],
                                (long long)pads[i], (long long)pads[S + i], (long long)in);
        int64_t out = (in + pads[i] + pads[S + i] - dk) / st[i] + 1;
        if (out != dy->shape.dims[2 + i])
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "dY has shape %s but the conv of X %s gives %lld in spatial dim %d",
                                ir_shape_str(&dy->shape, s1, sizeof s1),
                                ir_shape_str(&x->shape, s2, sizeof s2), (long long)out, i);
        cg->in[j] = in;
        cg->out[j] = out;
        cg->k[j] = ks[i];
        cg->s[j] = st[i];
        cg->d[j] = dl[i];
        cg->pb[j] = pads[i];
        cg->pe[j] = pads[S + i];
    }
    return IR_OK;
}

static ir_status gw_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_conv_geom cg;
    ir_status st = gw_parse(g, n, &cg, d);
    if (st) return st;
    ir_shape w = {.rank = cg.S + 2, .dims = {cg.M, cg.C / cg.group}};
    for (int i = 0; i < cg.S; i++) w.dims[2 + i] = cg.k[3 - cg.S + i];
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &w);
    return IR_OK;
}

static bool pointwise(const ir_conv_geom *cg) {
    bool unit = true;
    for (int i = 0; i < 3; i++)
        unit = unit && cg->k[i] == 1 && cg->s[i] == 1 && cg->pb[i] == 0 && cg->pe[i] == 0;
    return unit;
}

static double gw_flops(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (gw_parse(g, n, &cg, NULL)) return 0;
    return 2.0 * (double)cg.N * (double)cg.M * (double)ir_prod3(cg.out) *
           (double)(cg.C / cg.group) * (double)ir_prod3(cg.k);
}

static size_t gw_workspace(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (gw_parse(g, n, &cg, NULL) || pointwise(&cg) || cg.C == cg.group) return 0;
    const size_t es = ir_dtype_size(ir_kernel_dtype(ir_node_in(g, n, 0)->dtype));
    const int64_t Cg = cg.C / cg.group;
    return (size_t)(Cg * ir_prod3(cg.k) * ir_conv_col_rows(&cg, Cg, es) * cg.out[2]) * es;
}

#define IR_TMPL "ops-grad-conv-kern.h"
#include "ir-float-tmpl.h"

static ir_status gw_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, gw_kernel);
}

/* Dims (ir.h, ir_dimlink): dW sums over the batch of X and dY (reduce axis 1, a sum: the split
 * of a training graph along its batch, MAGIS figure 5), and for a pointwise window (kernel 1,
 * stride 1, no pads) over each spatial dim too (axes 2...). dW's output channels come from dY's
 * and its input channels from X's for group 1; depthwise (one channel per group on both sides),
 * filter c reads X's and dY's channel c alone. Other groupings get no channel links. */
static int gw_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_conv_geom cg;
    if (gw_parse(g, n, &cg, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_reduce(&o, 0, 0, 1, true);
    ir_dims_reduce(&o, 1, 0, 1, true);
    if (cg.group == 1) {
        ir_dims_keep(&o, 1, 1, 0, 0);
        ir_dims_keep(&o, 0, 1, 0, 1);
    } else if (cg.group == cg.C && cg.group == cg.M) {
        ir_dims_keep(&o, 1, 1, 0, 0);
        ir_dims_keep(&o, 0, 1, 0, 0);
    }
    for (int i = 0; i < cg.S; i++) {
        int j = 3 - cg.S + i;
        if (cg.k[j] == 1 && cg.s[j] == 1 && cg.pb[j] == 0 && cg.pe[j] == 0) {
            ir_dims_reduce(&o, 0, 2 + i, 2 + i, true);
            ir_dims_reduce(&o, 1, 2 + i, 2 + i, true);
        }
    }
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(ConvGradWeight, 2, 2, 1, 1, .infer = gw_infer, .flops = gw_flops,
                 .workspace = gw_workspace, .kernel = gw_kernel, .dims = gw_dims);
