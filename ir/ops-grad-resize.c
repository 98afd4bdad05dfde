/* ops-grad-resize.c - ResizeGrad(dY, [roi, scales, sizes]) -> dX: the adjoint of Resize (nearest
 * and linear here; cubic and antialias by ir_resize_filter_run's transposed passes), scattering
 * each dY element into the input positions the forward read it from, with the forward's weights.
 *
 * Inputs 1.. are the forward's own roi/scales/sizes at the same positions, and the attributes are
 * the forward's plus `shape` (X's shape), so that ir_resize_tabulate builds exactly the forward's
 * coefficient tables (from X's shape to dY's) in the workspace. The scatter adds into dX, so rows
 * that may share a target run serially; only leading dims that Resize maps identically (each
 * output index reads its own input index with weight 0 on the neighbour: batch and channels)
 * split the work into independent parallel blocks. float32 and float64 (ops-grad-resize-kern.h),
 * like the forward kernel. */
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
    if (ir_resize_filtered(g, n)) return 8.0 * ys->rank * (double)ir_shape_numel(ys);
    return (linear ? 3.0 * ys->rank : 1.0) * (double)ir_shape_numel(ys);
}

static size_t rg_workspace(const ir_graph *g, const ir_node *n) {
    if (ir_resize_filtered(g, n))
        return ir_resize_filter_bytes(&ir_node_out(g, n, 0)->shape, &ir_node_in(g, n, 0)->shape,
                                      ir_node_in(g, n, 0)->dtype);
    return ir_resize_tab_bytes(&ir_node_in(g, n, 0)->shape, ir_node_in(g, n, 0)->dtype);
}

/* True when Resize maps dim dd identically: output index i reads input index i alone. */
static bool identity_dim(const ir_resize_tab *t, int dd, int64_t n_in, int64_t n_out,
                         int64_t stride) {
    if (n_in != n_out) return false;
    for (int64_t i = 0; i < n_out; i++) {
        int64_t at = t->base[dd] + i;
        double w = t->w ? t->w[at] : t->w64[at];
        if (t->i0[at] != i * stride || (t->i1[at] != t->i0[at] && w != 0)) return false;
    }
    return true;
}

#define IR_TMPL "ops-grad-resize-kern.h"
#include "ir-float-tmpl.h"

/* The dtype is dY's alone (scales may stay float32). */
static ir_status rg_kernel(const ir_kernel_ctx *k) {
    ir_dtype t = k->in[0].dtype;
    if ((t == IR_F32 || t == IR_F64) && ir_resize_filtered(k->graph, k->node))
        return ir_resize_filter_run(k, &k->out[0].shape, &k->in[0].shape, k->in[0].data,
                                    k->out[0].data, true);
    if (t == IR_F32) return rg_kernel_f32(k);
    if (t == IR_F64) return rg_kernel_f64(k);
    return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                        "the CPU kernel runs float32 and float64, not %s", ir_dtype_name(t));
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
