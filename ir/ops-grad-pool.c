/* ops-grad-pool.c - MaxPoolGrad(dY, X) and AveragePoolGrad(dY) -> dX, the fused backward kernels
 * of MaxPool / GlobalMaxPool and AveragePool / GlobalAveragePool (the global forms are pools
 * whose window is the whole plane).
 *
 * Both carry the forward node's attributes and walk its windows with the forward's own geometry
 * (ir_pool_parse, ir_pool_taps, ir_pool_avg_div), so they route gradient exactly where the
 * forward read from. MaxPoolGrad recomputes each window's argmax from X with the forward's rule
 * (the first maximum wins) instead of keeping an int64 Indices tensor alive: X is what the
 * backward keeps, as PyTorch keeps `self`. AveragePoolGrad needs only X's shape (attribute
 * `shape`), so X need not stay alive. Each (n, c) plane of dX is written by its own plane of dY,
 * so planes run in parallel. float32 and float64 (ops-grad-pool-kern.h), like the forward kernels.
 */
#include "ir-impl.h"

static ir_status pool_check(const ir_node *n, const ir_shape *xs, ir_dtype t, ir_diag *d) {
    char buf[96];
    if (xs->rank < 3 || xs->rank > 5)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s; expected rank 3 to 5",
                            ir_shape_str(xs, buf, sizeof buf));
    if (!ir_dtype_is_float(t))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY has dtype %s; expected a float type",
                            ir_dtype_name(t));
    return IR_OK;
}

/* Checks that dY has the pooled shape of X (shape xs). */
static ir_status pool_grad_geom(const ir_node *n, const ir_shape *xs, const ir_value *dy,
                                ir_pool_geom *pg, ir_diag *d) {
    ir_status st = pool_check(n, xs, dy->dtype, d);
    if (st || (st = ir_pool_parse(n, xs, pg, d))) return st;
    ir_shape want = *xs;
    for (int i = 0; i < pg->S; i++) want.dims[2 + i] = pg->out[3 - pg->S + i];
    if (!ir_shape_eq(&want, &dy->shape)) {
        char s1[96], s2[96];
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY has shape %s; the pooled X gives %s",
                            ir_shape_str(&dy->shape, s1, sizeof s1),
                            ir_shape_str(&want, s2, sizeof s2));
    }
    return IR_OK;
}

/* X's shape: input 1 (MaxPoolGrad) or the attribute `shape` (AveragePoolGrad). */
static ir_status x_shape(const ir_graph *g, const ir_node *n, ir_shape *xs, ir_diag *d) {
    if (n->op == IR_OP_MaxPoolGrad) {
        const ir_value *x = ir_node_in(g, n, 1);
        if (x->dtype != ir_node_in(g, n, 0)->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "X and dY have different dtypes");
        *xs = x->shape;
        return IR_OK;
    }
    const int64_t *dims;
    int r = ir_attr_ints(n, "shape", &dims);
    if (r < 0 || r > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute shape (X's shape) is required");
    *xs = ir_shape_make(r, dims);
    return ir_check_sizes(n, "shape", dims, r, d);
}

static ir_status pool_grad_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0);
    ir_shape xs;
    ir_pool_geom pg;
    ir_status st = x_shape(g, n, &xs, d);
    if (st || (st = pool_grad_geom(n, &xs, dy, &pg, d))) return st;
    ir_set_out(g, n, 0, dy->dtype, &xs);
    return IR_OK;
}

static double pool_grad_flops(const ir_graph *g, const ir_node *n) {
    ir_shape xs;
    ir_pool_geom pg;
    if (x_shape(g, n, &xs, NULL) || ir_pool_parse(n, &xs, &pg, NULL)) return 0;
    return (double)pg.NC * (double)ir_prod3(pg.out) * (double)(ir_prod3(pg.k) + 1);
}

#define IR_TMPL "ops-grad-pool-kern.h"
#include "ir-float-tmpl.h"

static ir_status pool_grad_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, pool_grad_kernel);
}

/* Dims (ir.h, ir_dimlink): as the forward's, planes (n, c) of dX come from the same planes of dY
 * (and X), and a spatial dim links only for a window of 1 (kernel 1, stride 1, no pads). */
static int pool_grad_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_shape xs;
    ir_pool_geom pg;
    if (x_shape(g, n, &xs, NULL) != IR_OK || xs.rank < 3 ||
        ir_pool_parse(n, &xs, &pg, NULL) != IR_OK)
        return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int in = 0; in < n->n_in; in++) { /* dY, and X for MaxPoolGrad */
        ir_dims_keep(&o, in, 0, 0, 0);
        ir_dims_keep(&o, in, 1, 0, 1);
        for (int i = 0; i < pg.S; i++) {
            int j = 3 - pg.S + i;
            if (pg.k[j] == 1 && pg.s[j] == 1 && pg.pb[j] == 0 && pg.pe[j] == 0 &&
                pg.in[j] == pg.out[j])
                ir_dims_keep(&o, in, 2 + i, 0, 2 + i);
        }
    }
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(MaxPoolGrad, 2, 2, 1, 1, .infer = pool_grad_infer, .flops = pool_grad_flops,
                 .kernel = pool_grad_kernel, .dims = pool_grad_dims);

IR_MAGPIE_OP_DEF(AveragePoolGrad, 1, 1, 1, 1, .infer = pool_grad_infer, .flops = pool_grad_flops,
                 .kernel = pool_grad_kernel, .dims = pool_grad_dims);
