/* ops-topk.c - TopK (opsets 11 to 23): the K largest (or smallest, largest=0) elements of each
 * line of X along `axis`, as Values and their int64 Indices.
 *
 * K is the constant second input (it fixes the output shape). Ties keep the smaller index first,
 * as ONNX specifies; the output is in sorted order (sorted=0 is served sorted too, which the spec
 * allows). Each line's indices are merge-sorted stably by value in the workspace (2 R int64), so
 * lines run one after another; any numeric dtype, values compared as double (int64 as int64).
 * Gradient: dX = GatherElementsGrad(dValues, Indices) along the axis (the gathered positions);
 * no gradient flows into Indices. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

typedef struct tk_geom {
    int axis;
    int64_t K, outer, R, inner;
} tk_geom;

static ir_status tk_parse(const ir_graph *g, const ir_node *n, tk_geom *tg, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (x->dtype == IR_BOOL || ir_dtype_size(x->dtype) == 0 || x->shape.rank == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X must be a numeric tensor of rank >= 1, not %s",
                            ir_dtype_name(x->dtype));
    int64_t a = ir_attr_int(n, "axis", -1), k[2];
    if (!ir_norm_axis(a, x->shape.rank, &tg->axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, x->shape.rank);
    int nk;
    if (ir_const_ints(g, n, 1, k, 2, &nk, d) != IR_OK) return IR_ERR_UNSUPPORTED;
    if (nk != 1 || k[0] < 0 || k[0] > x->shape.dims[tg->axis])
        return ir_node_fail(d, IR_ERR_INVALID, n, "K must be one value in [0, %lld]",
                            (long long)x->shape.dims[tg->axis]);
    tg->K = k[0];
    tg->outer = tg->inner = 1;
    for (int i = 0; i < tg->axis; i++) tg->outer *= x->shape.dims[i];
    tg->R = x->shape.dims[tg->axis];
    for (int i = tg->axis + 1; i < x->shape.rank; i++) tg->inner *= x->shape.dims[i];
    return IR_OK;
}

static ir_status tk_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    tk_geom tg = {0}; /* set by tk_parse; zeroed for gcc -O3, which cannot see that */
    ir_status st = tk_parse(g, n, &tg, d);
    if (st) return st;
    const ir_value *x = ir_node_in(g, n, 0);
    ir_shape s = x->shape;
    s.dims[tg.axis] = tg.K;
    ir_set_out(g, n, 0, x->dtype, &s);
    if (ir_node_out(g, n, 1)) ir_set_out(g, n, 1, IR_I64, &s);
    return IR_OK;
}

/* R log R comparisons per line. */
static double tk_flops(const ir_graph *g, const ir_node *n) {
    tk_geom tg = {0}; /* set by tk_parse; zeroed for gcc -O3, which cannot see that */
    if (tk_parse(g, n, &tg, NULL)) return 0;
    double R = (double)tg.R;
    return (double)(tg.outer * tg.inner) * R * (R > 1 ? log2(R) : 1);
}

static size_t tk_workspace(const ir_graph *g, const ir_node *n) {
    tk_geom tg = {0}; /* set by tk_parse; zeroed for gcc -O3, which cannot see that */
    if (tk_parse(g, n, &tg, NULL)) return 0;
    return (size_t)(2 * tg.R) * sizeof(int64_t);
}

/* Does element a come before b (a < b as indices into the line)? Larger first when largest,
 * and the earlier index on ties (the merge keeps that by taking from the left on equality). */
static inline bool tk_before(const ir_tensor *x, bool is_int, bool largest, int64_t a, int64_t b) {
    if (is_int) {
        int64_t va = ir_load_i64(x->data, x->dtype, a), vb = ir_load_i64(x->data, x->dtype, b);
        return largest ? va > vb : va < vb;
    }
    double va = ir_load_f64(x->data, x->dtype, a), vb = ir_load_f64(x->data, x->dtype, b);
    return largest ? va > vb : va < vb;
}

static ir_status tk_kernel(const ir_kernel_ctx *k) {
    tk_geom tg = {0}; /* set by tk_parse; zeroed for gcc -O3, which cannot see that */
    ir_status st = tk_parse(k->graph, k->node, &tg, k->diag);
    if (st) return st;
    const ir_tensor *x = &k->in[0];
    const bool largest = ir_attr_int(k->node, "largest", 1) != 0;
    const bool is_int = !ir_dtype_is_float(x->dtype);
    const size_t es = ir_dtype_size(x->dtype);
    int64_t *idx = k->workspace, *tmp = idx + tg.R;
    char *vals = k->out[0].data;
    int64_t *inds = k->n_out > 1 ? k->out[1].data : NULL;
    for (int64_t line = 0; line < tg.outer * tg.inner; line++) {
        const int64_t o = line / tg.inner, in = line % tg.inner;
        const int64_t base = o * tg.R * tg.inner + in;
        for (int64_t r = 0; r < tg.R; r++) idx[r] = base + r * tg.inner;
        /* bottom-up merge sort of the flat offsets (stable) */
        for (int64_t w = 1; w < tg.R; w *= 2) {
            for (int64_t lo = 0; lo < tg.R; lo += 2 * w) {
                int64_t mid = lo + w < tg.R ? lo + w : tg.R,
                        hi = lo + 2 * w < tg.R ? lo + 2 * w : tg.R;
                int64_t i = lo, j = mid, t = lo;
                while (i < mid && j < hi)
                    tmp[t++] = tk_before(x, is_int, largest, idx[j], idx[i]) ? idx[j++] : idx[i++];
                while (i < mid) tmp[t++] = idx[i++];
                while (j < hi) tmp[t++] = idx[j++];
            }
            memcpy(idx, tmp, sizeof(int64_t) * (size_t)tg.R);
        }
        for (int64_t r = 0; r < tg.K; r++) {
            const int64_t at = (o * tg.K + r) * tg.inner + in;
            memcpy(vals + (size_t)at * es, (const char *)x->data + (size_t)idx[r] * es, es);
            if (inds) inds[at] = (idx[r] - base) / tg.inner;
        }
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): every dim but the axis links from X to both outputs. */
static int tk_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    tk_geom tg = {0}; /* set by tk_parse; zeroed for gcc -O3, which cannot see that */
    if (tk_parse(g, n, &tg, NULL)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < ir_node_in(g, n, 0)->shape.rank; i++) {
        if (i == tg.axis) continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) ir_dims_keep(&o, 0, i, k, i);
    }
    return ir_dims_end(&o);
}

ir_status ir_grad_TopK(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    int axis = 0;
    ir_norm_axis(ir_attr_int(c->node, "axis", -1), xs.rank, &axis);
    int indices = ir_grad_fwd_output(c, 1);
    ir_attr at[2] = {ir_grad_attr_int("axis", axis),
                     ir_grad_attr_ints(c, "shape", xs.rank, xs.dims)};
    int dy = ir_grad_gout(c, 0);
    return ir_grad_accumulate(
        c, 0, ir_grad_op(c, IR_OP_GatherElementsGrad, 2, (int[]){dy, indices}, 2, at));
}

IR_OP_DEF(TopK, 2, 2, 1, 2, .infer = tk_infer, .flops = tk_flops, .workspace = tk_workspace,
          .kernel = tk_kernel, .grad = ir_grad_TopK, .dims = tk_dims);
