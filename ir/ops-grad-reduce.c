/* ops-grad-reduce.c - ReduceGrad(dY, X, Y) -> dX for the reductions whose gradient reads the
 * forward's values: ReduceMax/ReduceMin, ReduceL2 and ReduceProd (attribute `mode`: "max", "min",
 * "l2", "prod"; `axes`: the reduced axes, normalized; Y and dY shaped like the forward's output,
 * with or without kept dims: the element order is the same). ReduceSum/Mean need no such op (an
 * Expand of dY does).
 *
 * One fused kernel instead of the Equal/Cast/ReduceSum/Div/Where chain, so the only full-size
 * tensor is dX, as in PyTorch's fused backward:
 *  - max/min: dY split evenly between the elements equal to the result (torch.amax/amin);
 *  - l2: dY * x / y, 0 where y == 0 (torch.norm);
 *  - prod: dY times the product of the other elements, exact with zeros (torch.prod).
 * Per-output tie counts / zero counts and products live in the workspace. float32 and float64
 * (the forward reductions run float64 too, which the finite-difference tests use). */
#include "ir-impl.h"

typedef enum rg_mode { RG_MAX, RG_MIN, RG_L2, RG_PROD, RG_BAD } rg_mode;

static rg_mode rg_get_mode(const ir_node *n) {
    static const char *const names[] = {"max", "min", "l2", "prod"};
    const char *m = ir_attr_str(n, "mode", "");
    for (int i = 0; i < RG_BAD; i++)
        if (!strcmp(m, names[i])) return (rg_mode)i;
    return RG_BAD;
}

/* mask of the reduced axes from attribute `axes`. */
static ir_status rg_mask(const ir_node *n, int rank, bool *mask, ir_diag *d) {
    const int64_t *ax;
    int na = ir_attr_ints(n, "axes", &ax);
    for (int i = 0; i < rank; i++) mask[i] = false;
    for (int i = 0; i < na; i++) {
        int a;
        if (!ir_norm_axis(ax[i], rank, &a) || rank == 0 || mask[a])
            return ir_node_fail(d, IR_ERR_INVALID, n, "axes[%d] = %lld is out of range or repeated",
                                i, (long long)ax[i]);
        mask[a] = true;
    }
    return IR_OK;
}

static ir_status rg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *x = ir_node_in(g, n, 1), *y = ir_node_in(g, n, 2);
    bool mask[IR_MAX_RANK];
    ir_status st = rg_mask(n, x->shape.rank, mask, d);
    if (st) return st;
    if (rg_get_mode(n) == RG_BAD)
        return ir_node_fail(d, IR_ERR_INVALID, n, "mode '%s' is not max, min, l2 or prod",
                            ir_attr_str(n, "mode", ""));
    if (!ir_dtype_is_float(x->dtype) || dy->dtype != x->dtype || y->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY, X and Y must share one float dtype");
    int64_t kept = 1;
    for (int i = 0; i < x->shape.rank; i++) kept *= mask[i] ? 1 : x->shape.dims[i];
    if (ir_shape_numel(&dy->shape) != kept || ir_shape_numel(&y->shape) != kept)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY and Y must hold the %lld reduced values",
                            (long long)kept);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static double rg_flops(const ir_graph *g, const ir_node *n) {
    return 3.0 * (double)ir_shape_numel(&ir_node_in(g, n, 1)->shape);
}

/* Two doubles per output value (tie count, or zero count and product of the non-zeros). */
static size_t rg_workspace(const ir_graph *g, const ir_node *n) {
    if (rg_get_mode(n) == RG_L2) return 0;
    return 2 * sizeof(double) * (size_t)ir_shape_numel(&ir_node_in(g, n, 2)->shape);
}

/* Walks X in memory order keeping o, the offset of the output that element i reduces into. */
typedef struct rg_walk {
    int rank;
    int64_t dims[IR_MAX_RANK], ostr[IR_MAX_RANK], idx[IR_MAX_RANK], o;
} rg_walk;

static void walk_init(rg_walk *w, const ir_shape *xs, const bool *mask) {
    int64_t st = 1;
    memset(w, 0, sizeof *w);
    w->rank = xs->rank;
    for (int i = xs->rank - 1; i >= 0; i--) {
        w->dims[i] = xs->dims[i];
        w->ostr[i] = mask[i] ? 0 : st;
        if (!mask[i]) st *= xs->dims[i];
    }
}

static inline void walk_next(rg_walk *w) {
    for (int dd = w->rank - 1; dd >= 0; dd--) {
        w->o += w->ostr[dd];
        if (++w->idx[dd] < w->dims[dd]) return;
        w->o -= w->ostr[dd] * w->dims[dd];
        w->idx[dd] = 0;
    }
}

static ir_status rg_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *dy = &k->in[0], *x = &k->in[1], *y = &k->in[2];
    const ir_dtype t = x->dtype;
    if (t != IR_F32 && t != IR_F64)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "the CPU kernel runs float32 and float64 only, not %s",
                            ir_dtype_name(t));
    bool mask[IR_MAX_RANK];
    ir_status st = rg_mask(k->node, x->shape.rank, mask, k->diag);
    if (st) return st;
    const rg_mode mode = rg_get_mode(k->node);
    const int64_t nx = ir_tensor_numel(x), ny = ir_tensor_numel(y);
    double *cnt = k->workspace, *prod = cnt ? cnt + ny : NULL;
    void *dx = k->out[0].data;
    IR_ASSERT(mode == RG_L2 || k->workspace_bytes >= 2 * sizeof(double) * (size_t)ny);
    rg_walk w;
    if (mode != RG_L2) { /* per output: ties (max/min), or zeros and the non-zero product */
        for (int64_t o = 0; o < ny; o++) {
            cnt[o] = 0;
            prod[o] = 1;
        }
        walk_init(&w, &x->shape, mask);
        for (int64_t i = 0; i < nx; i++, walk_next(&w)) {
            double v = IR_LD_F(t, x->data, i);
            if (mode == RG_PROD) {
                if (v == 0)
                    cnt[w.o] += 1;
                else
                    prod[w.o] *= v;
            } else if (v == IR_LD_F(t, y->data, w.o)) {
                cnt[w.o] += 1;
            }
        }
    }
    walk_init(&w, &x->shape, mask);
    for (int64_t i = 0; i < nx; i++, walk_next(&w)) {
        const double v = IR_LD_F(t, x->data, i), yo = IR_LD_F(t, y->data, w.o),
                     g = IR_LD_F(t, dy->data, w.o);
        double r = 0;
        switch (mode) {
        case RG_MAX:
        case RG_MIN: r = v == yo ? g / cnt[w.o] : 0; break;
        case RG_L2: r = yo != 0 ? g * v / yo : 0; break;
        case RG_PROD:
            if (cnt[w.o] == 0)
                r = g * prod[w.o] / v;
            else if (cnt[w.o] == 1 && v == 0)
                r = g * prod[w.o];
            break;
        default: break;
        }
        IR_ST_F(t, dx, i, r);
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): each dim that the forward kept links from X, dY and Y to the same dim
 * of dX; dY and Y (alike) are matched to X with the kept dims in place of ones (keepdims) or
 * alone, else nothing links. The reduced dims get no link: with ties, zeros and norms, each
 * element's gradient depends on its whole reduction group. */
static int rg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *xs = &ir_node_in(g, n, 1)->shape, *ys = &ir_node_in(g, n, 0)->shape;
    bool mask[IR_MAX_RANK];
    int kept = 0, pos[IR_MAX_RANK];
    if (rg_mask(n, xs->rank, mask, NULL) != IR_OK || !ir_shape_eq(ys, &ir_node_in(g, n, 2)->shape))
        return 0;
    for (int i = 0; i < xs->rank; i++)
        if (!mask[i]) pos[i] = kept++;
    bool with_ones = ys->rank == xs->rank, alone = !with_ones && ys->rank == kept;
    if (!with_ones && !alone) return 0;
    for (int i = 0; i < xs->rank; i++)
        if (!mask[i] && ys->dims[with_ones ? i : pos[i]] != xs->dims[i]) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < xs->rank; i++) {
        if (mask[i]) continue;
        ir_dims_keep(&o, 1, i, 0, i);
        ir_dims_keep(&o, 0, with_ones ? i : pos[i], 0, i);
        ir_dims_keep(&o, 2, with_ones ? i : pos[i], 0, i);
    }
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(ReduceGrad, 3, 3, 1, 1, .infer = rg_infer, .flops = rg_flops,
                 .workspace = rg_workspace, .kernel = rg_kernel, .dims = rg_dims);
