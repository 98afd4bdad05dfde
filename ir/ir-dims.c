/* ir-dims.c - shared pieces of the op table's dims callbacks: the bounded link writer, numpy
 * broadcasting, the regrouping of a reshape, and the ready-made callbacks of element-wise and
 * reshaping ops.
 *
 * A link says that splitting a dim into n equal parts splits the node (ir.h, ir_dimlink), so
 * every helper here links only what provably keeps its place: a broadcast size-1 dim is shared,
 * not split, and a reshape dim that merges or splits other dims changes which elements go
 * together. Callbacks stay pure functions of the node's attributes and shapes. */
#include "ir-impl.h"

void ir_dims_keep(ir_dims_out *o, int in, int in_dim, int out, int out_dim) {
    IR_ASSERT(in_dim >= 0 && in_dim < IR_MAX_RANK && out_dim >= 0 && out_dim < IR_MAX_RANK);
    if (o->n >= IR_MAX_DIMLINKS || in > INT8_MAX || out > INT8_MAX) {
        o->overflow = true;
        return;
    }
    o->l[o->n++] = (ir_dimlink){.in = (int8_t)in,
                                .in_dim = (int8_t)in_dim,
                                .out = (int8_t)out,
                                .out_dim = (int8_t)out_dim,
                                .flags = 0};
}

void ir_dims_reduce(ir_dims_out *o, int in, int in_dim, int axis, bool sum) {
    IR_ASSERT(in_dim >= 0 && in_dim < IR_MAX_RANK && axis >= 1);
    if (o->n >= IR_MAX_DIMLINKS || in > INT8_MAX || axis > INT8_MAX) {
        o->overflow = true;
        return;
    }
    o->l[o->n++] = (ir_dimlink){.in = (int8_t)in,
                                .in_dim = (int8_t)in_dim,
                                .out = 0,
                                .out_dim = (int8_t)-axis,
                                .flags = sum ? IR_DIMLINK_SUM : 0};
}

void ir_dims_broadcast(const ir_graph *g, const ir_node *n, int in, int out, ir_dims_out *o) {
    const ir_value *x = ir_node_in(g, n, in), *y = ir_node_out(g, n, out);
    if (!x || !y || x->shape.rank > y->shape.rank) return;
    int off = y->shape.rank - x->shape.rank;
    for (int i = 0; i < x->shape.rank; i++)
        if (x->shape.dims[i] == y->shape.dims[off + i]) ir_dims_keep(o, in, i, out, off + i);
}

/* prefix[i] = product of the dims before dim i. */
static void prefix_products(const ir_shape *s, int64_t *prefix) {
    int64_t p = 1;
    for (int i = 0; i < s->rank; i++) {
        prefix[i] = p;
        p *= s->dims[i];
    }
}

/* Rank of size-1 dim i among the size-1 dims of s that share its prefix product; their count goes
 * to *cnt. */
static int ones_rank(const ir_shape *s, const int64_t *prefix, int i, int *cnt) {
    int k = 0, before = 0;
    for (int j = 0; j < s->rank; j++) {
        if (s->dims[j] != 1 || prefix[j] != prefix[i]) continue;
        if (j < i) before++;
        k++;
    }
    *cnt = k;
    return before;
}

void ir_dims_regroup(const ir_shape *is, const ir_shape *os, int in, int out, ir_dims_out *o) {
    if (ir_shape_numel(is) == 0 || ir_shape_numel(is) != ir_shape_numel(os)) return;
    int64_t pi[IR_MAX_RANK], po[IR_MAX_RANK];
    prefix_products(is, pi);
    prefix_products(os, po);
    for (int i = 0; i < is->rank; i++)
        for (int j = 0; j < os->rank; j++) {
            if (pi[i] != po[j]) continue;
            if (is->dims[i] != os->dims[j]) {
                /* the outer dims of a merged or split group ([S, B, E] -> [S, B*H, hd]): both
                 * start at the same flat offset within each outer index, so n equal parts of one
                 * are n contiguous blocks of the group, the same blocks as n parts of the other
                 * (the D-graph splits a component into a divisor of all its lengths) */
                if (is->dims[i] > 1 && os->dims[j] > 1) ir_dims_keep(o, in, i, out, j);
                continue;
            }
            if (is->dims[i] == 1) { /* pair the size-1 runs in order, when they are alike */
                int ci, cj, ri = ones_rank(is, pi, i, &ci), rj = ones_rank(os, po, j, &cj);
                if (ci != cj || ri != rj) continue;
            }
            /* dims of size > 1 have strictly growing prefixes after them: j is unique */
            ir_dims_keep(o, in, i, out, j);
        }
}

int ir_dims_elementwise(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    for (int k = 0; k < n->n_out; k++)
        for (int i = 0; i < n->n_in; i++) ir_dims_broadcast(g, n, i, k, &o);
    return ir_dims_end(&o);
}

int ir_dims_first_input(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    for (int k = 0; k < n->n_out; k++) ir_dims_broadcast(g, n, 0, k, &o);
    return ir_dims_end(&o);
}

int ir_dims_regroup_op(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    if (x && y) ir_dims_regroup(&x->shape, &y->shape, 0, 0, &o);
    return ir_dims_end(&o);
}
