/* grad-pool.c - gradient builders of the pooling ops and Resize, each one fused backward op
 * (ops-grad-pool.c, ops-grad-resize.c) carrying the forward node's attributes, so the backward
 * walks the forward's own windows and coordinates:
 *  - MaxPool: MaxPoolGrad(dY, X) (the argmax recomputed from X; no Indices kept alive);
 *  - AveragePool: AveragePoolGrad(dY), X's shape as attribute `shape`;
 *  - GlobalMaxPool / GlobalAveragePool: the same ops with the whole plane as the window;
 *  - Resize: ResizeGrad(dY, roi, scales, sizes), the forward's inputs and attributes plus `shape`.
 * The forward's attributes are shared, not copied: they live in the training graph's arena. */
#include "ir-autodiff.h"
#include "ir-impl.h"

enum { MAX_ATTRS = 24 };

/* The forward node's attributes followed by `extra`; returns the count (-1 when too many). */
static int fwd_attrs_plus(ir_grad_ctx *c, ir_attr *a, int n_extra, const ir_attr *extra) {
    const ir_node *n = c->node;
    if (n->n_attrs + n_extra > MAX_ATTRS) {
        ir_grad_fail(c, IR_ERR_UNSUPPORTED, "%d attributes", n->n_attrs);
        return -1;
    }
    for (int i = 0; i < n->n_attrs; i++) a[i] = n->attrs[i];
    for (int i = 0; i < n_extra; i++) a[n->n_attrs + i] = extra[i];
    return n->n_attrs + n_extra;
}

static ir_attr shape_attr(ir_grad_ctx *c, const ir_shape *s) {
    return ir_grad_attr_ints(c, "shape", s->rank, s->dims);
}

ir_status ir_grad_MaxPool(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int dy = ir_grad_gout(c, 0);
    int dx = ir_grad_op(c, IR_OP_MaxPoolGrad, 2, (int[]){dy, c->in[0]}, c->node->n_attrs,
                        c->node->attrs);
    return ir_grad_accumulate(c, 0, dx);
}

ir_status ir_grad_AveragePool(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_attr extra = shape_attr(c, &xs), a[MAX_ATTRS];
    int na = fwd_attrs_plus(c, a, 1, &extra), dy = ir_grad_gout(c, 0);
    if (na < 0) return ir_grad_status(c);
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_AveragePoolGrad, 1, &dy, na, a));
}

/* kernel_shape covering X's whole spatial extent. */
static ir_attr plane_kernel(ir_grad_ctx *c, const ir_shape *xs) {
    return ir_grad_attr_ints(c, "kernel_shape", xs->rank - 2, xs->dims + 2);
}

ir_status ir_grad_GlobalAveragePool(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_attr a[2] = {plane_kernel(c, &xs), shape_attr(c, &xs)};
    int dy = ir_grad_gout(c, 0);
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_AveragePoolGrad, 1, &dy, 2, a));
}

ir_status ir_grad_GlobalMaxPool(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_attr a = plane_kernel(c, &xs);
    int dy = ir_grad_gout(c, 0);
    int dx = ir_grad_op(c, IR_OP_MaxPoolGrad, 2, (int[]){dy, c->in[0]}, 1, &a);
    return ir_grad_accumulate(c, 0, dx);
}

ir_status ir_grad_Resize(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_attr extra = shape_attr(c, &xs), a[MAX_ATTRS];
    int na = fwd_attrs_plus(c, a, 1, &extra), in[4] = {ir_grad_gout(c, 0), -1, -1, -1};
    if (na < 0) return ir_grad_status(c);
    for (int i = 1; i < c->n_in && i < 4; i++) in[i] = c->in[i];
    int n_in = c->n_in < 4 ? c->n_in : 4;
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_ResizeGrad, n_in, in, na, a));
}
