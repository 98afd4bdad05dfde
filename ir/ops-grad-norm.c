/* ops-grad-norm.c - fused backward kernels of the normalizations and softmaxes, as PyTorch runs
 * them (native_batch_norm_backward, native_layer_norm_backward, _softmax_backward_data, ...):
 *  - BatchNormGrad(dY, X, scale[, mean, var]) -> dX, dScale, dBias. training_mode=1 (always set
 *    by the builder) differentiates through the batch statistics, which it recomputes from X
 *    exactly as the forward does (ONNX BatchNormalization-14/15 has no saved-statistics outputs;
 *    the [C] statistics are all PyTorch saves beyond X); training_mode=0 is the affine map with the
 *    running statistics mean, var;
 *  - LayerNormGrad(dY, X, scale, Mean, InvStdDev) -> dX, dScale, dBias, from the forward's own
 *    saved statistics; dScale/dBias have the normalized shape X.shape[axis:];
 *  - InstanceNormGrad(dY, X, scale) -> dX, dScale, dBias (statistics per (n, c) plane, recomputed);
 *  - SoftmaxGrad(dY, Y) = Y * (dY - sum(dY * Y)), LogSoftmaxGrad(dY, Y) = dY - exp(Y) * sum(dY),
 *    from the forward's output, with the forward's axis semantics (ir_softmax_split).
 * Sums run in double. Channels (BN, IN), rows (LN, softmax) and column blocks (LN's dScale/dBias)
 * run in parallel, each writing only its own outputs. float32 and float64, like the forward
 * kernels (one template, ops-grad-norm-kern.h). */
#include "ir-impl.h"

#include <math.h>

static ir_status same_float(const ir_graph *g, const ir_node *n, int a, int b, ir_diag *d) {
    const ir_value *va = ir_node_in(g, n, a), *vb = ir_node_in(g, n, b);
    char s1[96], s2[96];
    if (ir_dtype_is_float(va->dtype) && va->dtype == vb->dtype &&
        ir_shape_eq(&va->shape, &vb->shape))
        return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "inputs %d (%s %s) and %d (%s %s) must be alike floats",
                        a, ir_dtype_name(va->dtype), ir_shape_str(&va->shape, s1, sizeof s1), b,
                        ir_dtype_name(vb->dtype), ir_shape_str(&vb->shape, s2, sizeof s2));
}

static ir_status need_numel(const ir_graph *g, const ir_node *n, int i, int64_t cnt, ir_diag *d) {
    const ir_value *v = ir_node_in(g, n, i);
    if (v && ir_dtype_is_float(v->dtype) && ir_shape_numel(&v->shape) == cnt) return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d must be a float tensor of %lld values", i,
                        (long long)cnt);
}

/* ---------------------------------------------------------------- per-channel groups */

/* A normalization group: np planes of IS values, plane j at offset j * pstride. */
typedef struct ng {
    int64_t np, pstride, IS;
} ng;

/* Shared inference of BatchNormGrad / InstanceNormGrad: dY and X alike, per-channel inputs
 * 2..n_chan-1 of [C] values; outputs dX and two [C] tensors. */
static ir_status chan_infer(ir_graph *g, ir_node *n, int n_chan, ir_diag *d) {
    ir_status st = same_float(g, n, 0, 1, d);
    if (st) return st;
    const ir_value *x = ir_node_in(g, n, 1);
    char buf[96];
    if (x->shape.rank < 2)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s; expected (N,C,...)",
                            ir_shape_str(&x->shape, buf, sizeof buf));
    int64_t C = x->shape.dims[1];
    for (int i = 2; i < n_chan; i++)
        if ((st = need_numel(g, n, i, C, d))) return st;
    ir_shape cs = ir_shape_make(1, &C);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    for (int i = 1; i < 3; i++)
        if (i < n->n_out && n->out[i] >= 0) ir_set_out(g, n, i, ir_node_in(g, n, 2)->dtype, &cs);
    return IR_OK;
}

static double chan_flops(const ir_graph *g, const ir_node *n) {
    return 8.0 * (double)ir_shape_numel(&ir_node_in(g, n, 1)->shape);
}

/* ---------------------------------------------------------------- BatchNormGrad */

static ir_status bng_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    if (!ir_attr_find(n, "training_mode"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute training_mode is required");
    bool train = ir_attr_int(n, "training_mode", 0) != 0;
    if (!train && n->n_in < 5)
        return ir_node_fail(d, IR_ERR_INVALID, n, "training_mode=0 needs the running mean and var");
    return chan_infer(g, n, train ? 3 : 5, d);
}

/* ---------------------------------------------------------------- InstanceNormGrad */

static ir_status ing_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return chan_infer(g, n, 3, d);
}

/* ---------------------------------------------------------------- LayerNormGrad */

/* Rows are X.shape[:axis] flattened, each of `inner` values. */
static ir_status lng_split(const ir_shape *xs, const ir_node *n, int64_t *rows, int64_t *inner,
                           int *axis, ir_diag *d) {
    if (xs->rank == 0 || !ir_norm_axis(ir_attr_int(n, "axis", -1), xs->rank, axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", -1), xs->rank);
    *inner = 1;
    for (int i = *axis; i < xs->rank; i++) *inner *= xs->dims[i];
    *rows = *inner ? ir_shape_numel(xs) / *inner : 0;
    return IR_OK;
}

static ir_status lng_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 1), *sc = ir_node_in(g, n, 2);
    int64_t rows = 0, inner = 0;
    int axis = 0;
    ir_status st = same_float(g, n, 0, 1, d);
    if (st || (st = lng_split(&x->shape, n, &rows, &inner, &axis, d))) return st;
    if (ir_shape_numel(&sc->shape) != inner && (st = need_numel(g, n, 2, 1, d))) return st;
    if ((st = need_numel(g, n, 3, rows, d)) || (st = need_numel(g, n, 4, rows, d))) return st;
    for (int i = 3; i < 5; i++) /* the forward's stash type */
        if (!ir_dtype_is_float(ir_node_in(g, n, i)->dtype))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                "Mean and InvStdDev must be floats, not %s",
                                ir_dtype_name(ir_node_in(g, n, i)->dtype));
    ir_shape ns = {.rank = x->shape.rank - axis};
    for (int i = axis; i < x->shape.rank; i++) ns.dims[i - axis] = x->shape.dims[i];
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    for (int i = 1; i < 3; i++)
        if (i < n->n_out && n->out[i] >= 0) ir_set_out(g, n, i, sc->dtype, &ns);
    return IR_OK;
}

static double lng_flops(const ir_graph *g, const ir_node *n) {
    return 10.0 * (double)ir_shape_numel(&ir_node_in(g, n, 1)->shape);
}

/* ---------------------------------------------------------------- SoftmaxGrad, LogSoftmaxGrad */

static ir_status smg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *y = ir_node_in(g, n, 1);
    int64_t o = 0, l = 0, i = 0;
    ir_status st = same_float(g, n, 0, 1, d);
    if (st || (st = ir_softmax_split(g, n, &y->shape, &o, &l, &i, d))) return st;
    ir_set_out(g, n, 0, y->dtype, &y->shape);
    return IR_OK;
}

static double smg_flops(const ir_graph *g, const ir_node *n) {
    return 4.0 * (double)ir_shape_numel(&ir_node_in(g, n, 1)->shape);
}

enum { LNG_BLOCK = 64 }; /* columns per parallel block of dScale/dBias */

#define IR_TMPL "ops-grad-norm-kern.h"
#include "ir-float-tmpl.h"

static ir_status bng_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, bng_kernel);
}
static ir_status ing_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, ing_kernel);
}
/* dY, X, Scale and the outputs share X's dtype; Mean and InvStdDev have the forward's stash
 * type, float32 or float64. */
static ir_status lng_kernel(const ir_kernel_ctx *k) {
    const ir_dtype t = k->in[1].dtype;
    bool ok = t == IR_F32 || t == IR_F64;
    for (int i = 0; i < 3; i++) ok = ok && k->in[i].dtype == t;
    for (int i = 0; i < k->n_out; i++) ok = ok && (!k->out[i].data || k->out[i].dtype == t);
    if (!ok)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "the CPU kernel runs dY, X and Scale of one dtype, float32 or float64; "
                            "X is %s",
                            ir_dtype_name(t));
    return t == IR_F64 ? lng_kernel_f64(k) : lng_kernel_f32(k);
}
static ir_status smg_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, smg_kernel);
}

/* ---------------------------------------------------------------- the op table entries */

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink). These nodes have two kinds of outputs: dX, shaped like X, and the
 * parameter gradients dScale/dBias, sums over the dims that the parameters are shared along. So a
 * dim that both keeps its place in dX and is summed into dScale/dBias links to both: split along
 * it, the parts of dX are put together and those of dScale/dBias added (a reduce axis that is a
 * sum).
 *
 * BatchNormGrad and InstanceNormGrad (dY, X, scale[, mean, var] -> dX, dScale, dBias): the
 * channel links from dY, X and every per-channel input to every output. Statistics per (n, c)
 * plane (InstanceNormGrad) add N to dX and as a sum (axis 1) to dScale/dBias. The running
 * statistics of BatchNormGrad's inference mode add N and the spatial dims that way (axes 1...);
 * its training mode differentiates through the batch statistics, so they get no link. */
static int chan_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 1);
    int r = x->shape.rank;
    bool in_norm = n->op == IR_OP_InstanceNormGrad;
    bool train = !in_norm && ir_attr_int(n, "training_mode", 0) != 0;
    if (r < 2 || (in_norm && r < 3)) return 0;
    bool summed = (n->n_out > 1 && n->out[1] >= 0) || (n->n_out > 2 && n->out[2] >= 0);
    ir_dims_out o = ir_dims_begin(l);
    for (int k = 0; k < n->n_out; k++) {
        if (!ir_node_out(g, n, k)) continue;
        int cd = k == 0 ? 1 : 0; /* dX is [N, C, ...], dScale and dBias [C] */
        for (int i = 0; i < n->n_in; i++)
            if (ir_node_in(g, n, i)) ir_dims_keep(&o, i, i < 2 ? 1 : 0, k, cd);
    }
    int kept = train ? 0 : in_norm ? 1 : r; /* dims 0..kept-1 but C: per element, or per plane */
    for (int d = 0, axis = 1; d < kept; d++) {
        if (d == 1) continue;
        for (int i = 0; i < 2; i++) {
            ir_dims_keep(&o, i, d, 0, d);
            if (summed) ir_dims_reduce(&o, i, d, axis, true);
        }
        axis++;
    }
    return ir_dims_end(&o);
}

/* LayerNormGrad (dY, X, scale, Mean, InvStdDev -> dX, dScale, dBias): the dims before `axis` link
 * from dY, X, Mean and InvStdDev to dX, and as sums to dScale/dBias (one reduce axis per dim).
 * Mean and InvStdDev must hold those dims where X does (shaped like X with ones from axis on, or
 * X's leading dims alone); otherwise nothing links. The normalized dims get no link: each element
 * of dX depends on its whole row. */
static int lng_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 1);
    int64_t rows = 0, inner = 0;
    int axis = 0;
    if (lng_split(&x->shape, n, &rows, &inner, &axis, NULL) != IR_OK) return 0;
    for (int i = 3; i < 5; i++) {
        const ir_shape *s = &ir_node_in(g, n, i)->shape;
        if (s->rank != x->shape.rank && s->rank != axis) return 0;
        for (int d = 0; d < axis; d++)
            if (s->dims[d] != x->shape.dims[d]) return 0;
    }
    bool summed = (n->n_out > 1 && n->out[1] >= 0) || (n->n_out > 2 && n->out[2] >= 0);
    ir_dims_out o = ir_dims_begin(l);
    for (int d = 0; d < axis; d++)
        for (int i = 0; i < 5; i++) {
            if (i == 2) continue; /* scale is shared by every row */
            ir_dims_keep(&o, i, d, 0, d);
            if (summed) ir_dims_reduce(&o, i, d, d + 1, true);
        }
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(BatchNormGrad, 3, 5, 1, 3, .infer = bng_infer, .flops = chan_flops,
                 .kernel = bng_kernel, .dims = chan_dims);

IR_MAGPIE_OP_DEF(LayerNormGrad, 5, 5, 1, 3, .infer = lng_infer, .flops = lng_flops,
                 .kernel = lng_kernel, .dims = lng_dims);

IR_MAGPIE_OP_DEF(InstanceNormGrad, 3, 3, 1, 3, .infer = ing_infer, .flops = chan_flops,
                 .kernel = ing_kernel, .dims = chan_dims);

IR_MAGPIE_OP_DEF(SoftmaxGrad, 2, 2, 1, 1, .infer = smg_infer, .flops = smg_flops,
                 .kernel = smg_kernel, .dims = ir_dims_softmax);

IR_MAGPIE_OP_DEF(LogSoftmaxGrad, 2, 2, 1, 1, .infer = smg_infer, .flops = smg_flops,
                 .kernel = smg_kernel, .dims = ir_dims_softmax);
