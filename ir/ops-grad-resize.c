/* ops-grad-resize.c - ResizeGrad(dY, [roi, scales, sizes]) -> dX: the adjoint of Resize (nearest
 * and linear), scattering each dY element into the input positions the forward read it from,
 * with the forward's weights.
 *
 * Inputs 1.. are the forward's own roi/scales/sizes at the same positions, and the attributes are
 * the forward's plus `shape` (X's shape), so that ir_resize_tabulate builds exactly the forward's
 * coefficient tables (from X's shape to dY's) in the workspace. The scatter adds into dX, so rows
 * that may share a target run serially; only leading dims that Resize maps identically (each
 * output index reads its own input index with weight 0 on the neighbour: batch and channels)
 * split the work into independent parallel blocks. float32, like the forward kernel. */
#include "ir-impl.h"

static ir_status rg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0);
    const int64_t *dims;
    int r = ir_attr_ints(n, "shape", &dims);
    char buf[96];
    if (r < 1 || r > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute shape (X's shape) is required");
    if (r != dy->shape.rank || !ir_dtype_is_float(dy->dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY is %s %s; expected a float tensor of rank %d",
                            ir_dtype_name(dy->dtype), ir_shape_str(&dy->shape, buf, sizeof buf), r);
    ir_status st = ir_check_sizes(n, "shape", dims, r, d);
    if (st) return st;
    ir_shape xs = ir_shape_make(r, dims);
    ir_set_out(g, n, 0, dy->dtype, &xs);
    return IR_OK;
}

static double rg_flops(const ir_graph *g, const ir_node *n) {
    const ir_shape *ys = &ir_node_in(g, n, 0)->shape;
    bool linear = strcmp(ir_attr_str(n, "mode", "nearest"), "nearest") != 0;
    return (linear ? 3.0 * ys->rank : 1.0) * (double)ir_shape_numel(ys);
}

static size_t rg_workspace(const ir_graph *g, const ir_node *n) {
    return ir_resize_tab_bytes(&ir_node_in(g, n, 0)->shape);
}

/* True when Resize maps dim dd identically: output index i reads input index i alone. */
static bool identity_dim(const ir_resize_tab *t, int dd, int64_t n_in, int64_t n_out,
                         int64_t stride) {
    if (n_in != n_out) return false;
    for (int64_t i = 0; i < n_out; i++) {
        int64_t at = t->base[dd] + i;
        if (t->i0[at] != i * stride || (t->i1[at] != t->i0[at] && t->w[at] != 0)) return false;
    }
    return true;
}

/* Adds dY row `row` (all dims but the last fixed) into dX. */
static void scatter_row(const ir_resize_tab *t, const ir_shape *ys, int64_t row, const float *dyr,
                        float *dx) {
    const int r = ys->rank;
    const int64_t ow = ys->dims[r - 1];
    const int64_t *l0 = t->i0 + t->base[r - 1], *l1 = t->i1 + t->base[r - 1];
    const float *lw = t->w + t->base[r - 1];
    int64_t idx[IR_MAX_RANK], rem = row;
    for (int dd = r - 2; dd >= 0; dd--) {
        idx[dd] = rem % ys->dims[dd];
        rem /= ys->dims[dd];
    }
    const int nc = t->linear ? 1 << (r - 1) : 1; /* corner combinations of the outer dims */
    for (int c = 0; c < nc; c++) {
        float cw = 1;
        int64_t off = 0;
        for (int dd = 0; dd < r - 1; dd++) {
            int64_t at = t->base[dd] + idx[dd];
            bool hi = t->linear && ((c >> dd) & 1);
            cw *= !t->linear ? 1 : hi ? t->w[at] : 1 - t->w[at];
            off += hi ? t->i1[at] : t->i0[at];
        }
        if (cw == 0) continue; /* also keeps blocks from touching each other's rows */
        float *dst = dx + off;
        if (!t->linear) {
            for (int64_t xo = 0; xo < ow; xo++) dst[l0[xo]] += dyr[xo];
            continue;
        }
        for (int64_t xo = 0; xo < ow; xo++) {
            float v = cw * dyr[xo];
            dst[l0[xo]] += v * (1 - lw[xo]);
            dst[l1[xo]] += v * lw[xo];
        }
    }
}

static ir_status rg_kernel(const ir_kernel_ctx *k) {
    if (k->in[0].dtype != IR_F32)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "the CPU kernel runs float32 only, not %s",
                            ir_dtype_name(k->in[0].dtype));
    const ir_shape *xs = &k->out[0].shape, *ys = &k->in[0].shape;
    const int r = xs->rank;
    ir_resize_tab tab;
    ir_status st = ir_resize_tabulate(k, xs, ys, &tab);
    if (st) return st;
    const float *dy = k->in[0].data;
    float *dx = k->out[0].data;
    memset(dx, 0, sizeof(float) * (size_t)ir_tensor_numel(&k->out[0]));
    int64_t istr[IR_MAX_RANK], blocks = 1, per = 1;
    ir_shape_strides(xs, istr);
    int P = 0;
    while (P < r - 1 && identity_dim(&tab, P, xs->dims[P], ys->dims[P], istr[P])) P++;
    for (int dd = 0; dd < r - 1; dd++) *(dd < P ? &blocks : &per) *= ys->dims[dd];
    const int64_t ow = ys->dims[r - 1];
    IR_PARALLEL_FOR(blocks > 1 && ir_tensor_numel(&k->in[0]) >= IR_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t i = 0; i < per; i++)
            scatter_row(&tab, ys, b * per + i, dy + (b * per + i) * ow, dx);
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): the dims that the forward Resize maps identically link dY to dX. */
static int rg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *dy = ir_node_in(g, n, 0), *dx = ir_node_out(g, n, 0);
    bool same[IR_MAX_RANK];
    if (!ir_resize_identity_dims(g, n, &dx->shape, &dy->shape, same)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < dx->shape.rank; i++)
        if (same[i]) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(ResizeGrad, 1, 4, 1, 1, .infer = rg_infer, .flops = rg_flops,
                 .workspace = rg_workspace, .kernel = rg_kernel, .dims = rg_dims);
