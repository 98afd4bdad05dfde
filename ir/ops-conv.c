/* ops-conv.c - Conv and ConvTranspose with 1 to 3 spatial dims (ONNX opsets 11-17).
 *
 * Conv runs as im2col into the workspace + one sgemm per (batch, group, tile of output rows;
 * ir_conv_tile_rows bounds the tile). Two paths skip im2col: 1x1 stride-1 unpadded convs hand X
 * to sgemm as it is, and convs with one input channel per group (depthwise, any channel
 * multiplier) run a direct loop over output rows. ConvTranspose computes W_g^T X_g into the
 * workspace (sgemm), a tile of input rows at a time, and scatters it with col2im.
 *
 * Invariants: geometry is padded to 3 spatial dims (leading dims of size 1) so that one loop
 * nest serves 1-, 2- and 3-D; conv_workspace() returns exactly the bytes of the path the kernel
 * takes (conv_path() decides both), in elements of X's dtype. Kernels run float32 (sgemm) and
 * float64 (dgemm), one template (ops-conv-kern.h); other float dtypes infer and count but their
 * kernels answer IR_ERR_UNSUPPORTED. Conv and ConvTranspose are multilinear in (X, W) when they
 * have no bias. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <cblas.h>
#include <string.h>

enum conv_path { PATH_IM2COL, PATH_GEMM_DIRECT, PATH_DEPTHWISE };

int64_t ir_conv_col_bytes = IR_CONV_COL_BYTES;

/* Reads X, W (and B) shapes and the attributes of node n into cg, validating them. */
ir_status ir_conv_parse(const ir_graph *g, const ir_node *n, bool transpose, ir_conv_geom *cg,
                        ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *w = ir_node_in(g, n, 1), *b = ir_node_in(g, n, 2);
    char s1[96], s2[96];
    memset(cg, 0, sizeof *cg);
    int r = x->shape.rank, S = r - 2;
    if (r < 3 || r > 5)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "X has shape %s; expected rank 3 to 5 (N,C,spatial)",
                            ir_shape_str(&x->shape, s1, sizeof s1));
    if (w->shape.rank != r)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "W has shape %s but X has shape %s (ranks differ)",
                            ir_shape_str(&w->shape, s1, sizeof s1),
                            ir_shape_str(&x->shape, s2, sizeof s2));
    if (!ir_dtype_is_float(x->dtype) || w->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X (%s) and W (%s) must share one float dtype",
                            ir_dtype_name(x->dtype), ir_dtype_name(w->dtype));
    cg->S = S;
    cg->N = x->shape.dims[0];
    cg->C = x->shape.dims[1];
    cg->group = ir_attr_int(n, "group", 1);
    if (cg->group < 1)
        return ir_node_fail(d, IR_ERR_INVALID, n, "group is %lld", (long long)cg->group);
    if (cg->C % cg->group)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has %lld channels, not divisible by group %lld",
                            (long long)cg->C, (long long)cg->group);
    if (!transpose) {
        cg->M = w->shape.dims[0];
        if (w->shape.dims[1] * cg->group != cg->C || cg->M % cg->group)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "W has shape %s; with group %lld it needs %lld input channels "
                                "(X has %lld) and output channels divisible by the group",
                                ir_shape_str(&w->shape, s1, sizeof s1), (long long)cg->group,
                                (long long)(w->shape.dims[1] * cg->group), (long long)cg->C);
    } else {
        cg->M = w->shape.dims[1] * cg->group;
        if (w->shape.dims[0] != cg->C)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "W has shape %s; its first dim must equal X's channels (%lld)",
                                ir_shape_str(&w->shape, s1, sizeof s1), (long long)cg->C);
    }
    if (b) {
        if (b->shape.rank != 1 || b->shape.dims[0] != cg->M || b->dtype != x->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "B has shape %s (%s); expected [%lld] (%s)",
                                ir_shape_str(&b->shape, s1, sizeof s1), ir_dtype_name(b->dtype),
                                (long long)cg->M, ir_dtype_name(x->dtype));
        cg->bias = true;
    }
    int64_t ks[3], st[3], dl[3], pads[6], opad[3], oshape[5];
    ir_status rc;
    if ((rc = ir_attr_ints_n(n, "strides", S, 1, st, d)) ||
        (rc = ir_attr_ints_n(n, "dilations", S, 1, dl, d)) ||
        (rc = ir_attr_ints_n(n, "pads", 2 * S, 0, pads, d)) ||
        (rc = ir_attr_ints_n(n, "kernel_shape", S, 0, ks, d)) ||
        (rc = ir_attr_ints_n(n, "output_padding", S, 0, opad, d)))
        return rc;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same_up = !strcmp(ap, "SAME_UPPER"), same_lo = !strcmp(ap, "SAME_LOWER");
    bool valid = !strcmp(ap, "VALID"), notset = !strcmp(ap, "NOTSET");
    if (!same_up && !same_lo && !valid && !notset)
        return ir_node_fail(d, IR_ERR_INVALID, n, "auto_pad '%s' is not a valid value", ap);
    const int64_t *os = NULL;
    int n_os = transpose ? ir_attr_ints(n, "output_shape", &os) : -1;
    if (n_os >= 0 && n_os != S && n_os != S + 2)
        return ir_node_fail(d, IR_ERR_INVALID, n, "output_shape has %d values, expected %d", n_os,
                            S);
    for (int i = 0; i < S && n_os >= 0; i++) oshape[i] = os[n_os - S + i];

    for (int i = 0; i < 3; i++) {
        cg->in[i] = cg->out[i] = cg->k[i] = cg->s[i] = cg->d[i] = 1;
        cg->pb[i] = cg->pe[i] = 0;
    }
    for (int i = 0; i < S; i++) {
        int j = 3 - S + i;
        int64_t in = x->shape.dims[2 + i], k = w->shape.dims[2 + i];
        if (ks[i] && ks[i] != k)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "kernel_shape[%d]=%lld but W has %lld there", i,
                                (long long)ks[i], (long long)k);
        if (st[i] < 1 || dl[i] < 1 || k < 1 || in < 1)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "spatial dim %d: input %lld, kernel %lld, stride %lld, dilation "
                                "%lld must all be positive",
                                i, (long long)in, (long long)k, (long long)st[i], (long long)dl[i]);
        int64_t dk = (k - 1) * dl[i] + 1, out, pb = pads[i], pe = pads[S + i];
        if (!transpose) {
            if (valid) {
                pb = pe = 0;
            } else if (same_up || same_lo) {
                out = (in + st[i] - 1) / st[i];
                int64_t tot = (out - 1) * st[i] + dk - in;
                if (tot < 0) tot = 0;
                pb = same_up ? tot / 2 : tot - tot / 2;
                pe = tot - pb;
            }
            if (pb < 0 || pe < 0 || in + pb + pe < dk)
                return ir_node_fail(d, IR_ERR_SHAPE, n,
                                    "spatial dim %d: input %lld with pads %lld+%lld is smaller "
                                    "than the dilated kernel %lld",
                                    i, (long long)in, (long long)pb, (long long)pe, (long long)dk);
            out = (in + pb + pe - dk) / st[i] + 1;
        } else {
            int64_t full = st[i] * (in - 1) + opad[i] + dk;
            if (opad[i] < 0 || (opad[i] >= st[i] && opad[i] >= dl[i]))
                return ir_node_fail(d, IR_ERR_INVALID, n,
                                    "output_padding[%d]=%lld must be smaller than the stride or "
                                    "the dilation",
                                    i, (long long)opad[i]);
            if (n_os >= 0 || same_up || same_lo) {
                out = n_os >= 0 ? oshape[i] : in * st[i];
                /* ONNX's formula divides with Python's floor: a total of -1 (output_shape one
                 * larger than the full output) puts the extra row or column at the end */
                int64_t tot = full - out, half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2);
                pb = same_up ? half : tot - half;
                pe = tot - pb;
            } else if (valid) {
                pb = pe = 0;
            }
            out = full - pb - pe;
        }
        if (out < 1)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "spatial dim %d of the output would be %lld", i,
                                (long long)out);
        cg->in[j] = in;
        cg->out[j] = out;
        cg->k[j] = k;
        cg->s[j] = st[i];
        cg->d[j] = dl[i];
        cg->pb[j] = pb;
        cg->pe[j] = pe;
    }
    return IR_OK;
}

static ir_status conv_infer_common(ir_graph *g, ir_node *n, bool transpose, ir_diag *d) {
    ir_conv_geom cg;
    ir_status st = ir_conv_parse(g, n, transpose, &cg, d);
    if (st) return st;
    ir_shape out = {.rank = cg.S + 2};
    out.dims[0] = cg.N;
    out.dims[1] = cg.M;
    for (int i = 0; i < cg.S; i++) out.dims[2 + i] = cg.out[3 - cg.S + i];
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &out);
    return IR_OK;
}

static ir_status conv_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return conv_infer_common(g, n, false, d);
}
static ir_status convt_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return conv_infer_common(g, n, true, d);
}

static enum conv_path conv_path(const ir_conv_geom *cg) {
    if (cg->C / cg->group == 1) return PATH_DEPTHWISE;
    bool unit = true;
    for (int i = 0; i < 3; i++)
        unit = unit && cg->k[i] == 1 && cg->s[i] == 1 && cg->pb[i] == 0 && cg->pe[i] == 0;
    return unit ? PATH_GEMM_DIRECT : PATH_IM2COL;
}

static double conv_flops(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, false, &cg, NULL)) return 0;
    double outs = (double)cg.N * (double)cg.M * (double)ir_prod3(cg.out);
    return outs * (2.0 * (double)(cg.C / cg.group) * (double)ir_prod3(cg.k) + (cg.bias ? 1 : 0));
}

static double convt_flops(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, true, &cg, NULL)) return 0;
    double macs = (double)cg.N * (double)cg.C * (double)ir_prod3(cg.in) *
                  (double)(cg.M / cg.group) * (double)ir_prod3(cg.k);
    return 2.0 * macs + (cg.bias ? (double)cg.N * (double)cg.M * (double)ir_prod3(cg.out) : 0);
}

static size_t conv_workspace(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, false, &cg, NULL) || conv_path(&cg) != PATH_IM2COL) return 0;
    const size_t es = ir_dtype_size(ir_kernel_dtype(ir_node_in(g, n, 0)->dtype));
    const int64_t Cg = cg.C / cg.group;
    return (size_t)(Cg * ir_prod3(cg.k) * ir_conv_col_rows(&cg, Cg, es) * cg.out[2]) * es;
}

static size_t convt_workspace(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, true, &cg, NULL)) return 0;
    const size_t es = ir_dtype_size(ir_kernel_dtype(ir_node_in(g, n, 0)->dtype));
    return (size_t)(cg.M / cg.group * ir_prod3(cg.k) * ir_convt_col_rows(&cg, es) * cg.in[2]) * es;
}

/* The valid output columns of the first DW_TAB kernel columns, hoisted out of the row loops
 * (two divisions per row of ~50 multiply-adds would dominate otherwise). */
enum { DW_TAB = 32 };

#define IR_TMPL "ops-conv-kern.h"
#include "ir-float-tmpl.h"

static ir_status conv_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, conv_kernel);
}
static ir_status convt_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, convt_kernel);
}

/* Dims (ir.h, ir_dimlink). The batch always links. The output channels link when each reads its
 * own filter over whole inputs: group 1 (W's output-channel dim, with the bias), or depthwise with
 * one channel per group on both sides (then X's channel too: output channel c reads input
 * channel c alone); other groupings would need X split by groups, so they get none. The input
 * channels are a sum over X's and W's channel dims for group 1 without bias (with a bias, the
 * parts would each add it). A spatial dim links only for a pointwise window (kernel 1, stride 1,
 * no pads, no output padding): any other window reads a halo across a split. */
static int conv_dims_common(const ir_graph *g, const ir_node *n, ir_dimlink *l, bool transpose) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, transpose, &cg, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    bool depthwise = cg.group > 1 && cg.group == cg.C && cg.group == cg.M;
    /* W is [M, C/group, k...] for Conv and [C, M/group, k...] for ConvTranspose */
    int w_out = transpose && !depthwise ? 1 : 0, w_in = transpose ? 0 : 1;
    ir_dims_keep(&o, 0, 0, 0, 0);
    if (cg.group == 1 || depthwise) {
        ir_dims_keep(&o, 1, w_out, 0, 1);
        if (depthwise) ir_dims_keep(&o, 0, 1, 0, 1);
        if (cg.bias) ir_dims_keep(&o, 2, 0, 0, 1);
    }
    if (cg.group == 1 && !cg.bias) {
        ir_dims_reduce(&o, 0, 1, 1, true);
        ir_dims_reduce(&o, 1, w_in, 1, true);
    }
    for (int i = 0; i < cg.S; i++) {
        int j = 3 - cg.S + i;
        if (cg.k[j] == 1 && cg.s[j] == 1 && cg.pb[j] == 0 && cg.pe[j] == 0 && cg.in[j] == cg.out[j])
            ir_dims_keep(&o, 0, 2 + i, 0, 2 + i);
    }
    return ir_dims_end(&o);
}

static int conv_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    return conv_dims_common(g, n, l, false);
}
static int convt_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    return conv_dims_common(g, n, l, true);
}

IR_OP_DEF(Conv, 2, 3, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = conv_infer, .flops = conv_flops,
          .workspace = conv_workspace, .kernel = conv_kernel, .grad = ir_grad_Conv,
          .dims = conv_dims);

IR_OP_DEF(ConvTranspose, 2, 3, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = convt_infer,
          .flops = convt_flops, .workspace = convt_workspace, .kernel = convt_kernel,
          .grad = ir_grad_ConvTranspose, .dims = convt_dims);
