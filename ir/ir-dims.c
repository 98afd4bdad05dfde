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

/* The inner factor of dim i of s (prefix products p, the factor boundaries bounds[0..nb)): the
 * last boundary strictly inside the dim, where its innermost factor starts; 0 when no boundary
 * lies inside (the dim is one factor). */
static int64_t inner_start(const ir_shape *s, const int64_t *p, int i, const int64_t *bounds,
                           int nb) {
    int64_t end = p[i] * s->dims[i], best = 0;
    for (int k = 0; k < nb; k++)
        if (bounds[k] > p[i] && bounds[k] < end && bounds[k] > best) best = bounds[k];
    return best;
}

/* The first boundary strictly inside dim i, where its outer factor ends; the dim's end when
 * none. */
static int64_t outer_end(const ir_shape *s, const int64_t *p, int i, const int64_t *bounds,
                         int nb) {
    int64_t end = p[i] * s->dims[i], best = end;
    for (int k = 0; k < nb; k++)
        if (bounds[k] > p[i] && bounds[k] < best) best = bounds[k];
    return best;
}

static void keep_flags(ir_dims_out *o, int in, int in_dim, int out, int out_dim, unsigned flags) {
    ir_dims_keep(o, in, in_dim, out, out_dim);
    if (!o->overflow) o->l[o->n - 1].flags = (uint8_t)flags;
}

/* The inner-factor links of a regrouping (IR_DIMLINK_IN_INNER, IR_DIMLINK_OUT_INNER): the
 * factors of a reshape are the intervals between the prefix products of both shapes (a factor
 * is a run of elements strides apart); a factor that is the outer or the inner one of its dim
 * on both sides links them, when on one side at least it is an inner one (the outer-outer and
 * whole-dim links are ir_dims_regroup's). A factor in the middle of three is not linked. */
static void regroup_inner(const ir_shape *is, const ir_shape *os, const int64_t *pi,
                          const int64_t *po, int in, int out, ir_dims_out *o) {
    int64_t bounds[2 * IR_MAX_RANK];
    int nb = 0;
    for (int i = 0; i < is->rank; i++) bounds[nb++] = pi[i];
    for (int j = 0; j < os->rank; j++) bounds[nb++] = po[j];
    /* the boundaries must form a chain of divisors ([4,6] -> [6,4] has none: 4 and 6 start
     * factors of no common radix), or the intervals are no factors at all */
    for (int a = 0; a < nb; a++)
        for (int b = 0; b < nb; b++)
            if (bounds[a] < bounds[b] && bounds[b] % bounds[a] != 0) return;
    for (int i = 0; i < is->rank; i++) {
        if (is->dims[i] <= 1) continue;
        int64_t ie = pi[i] * is->dims[i], ii = inner_start(is, pi, i, bounds, nb),
                io = outer_end(is, pi, i, bounds, nb);
        for (int j = 0; j < os->rank; j++) {
            if (os->dims[j] <= 1) continue;
            int64_t oe = po[j] * os->dims[j], oi = inner_start(os, po, j, bounds, nb),
                    oo = outer_end(os, po, j, bounds, nb);
            if (oi && pi[i] == oi && io == oe) /* the input's outer factor, the output's inner */
                keep_flags(o, in, i, out, j, IR_DIMLINK_OUT_INNER);
            else if (ii && ii == po[j] && ie == oo) /* the input's inner, the output's outer */
                keep_flags(o, in, i, out, j, IR_DIMLINK_IN_INNER);
            else if (ii && oi && ii == oi && ie == oe && pi[i] != po[j]) /* inner and inner */
                keep_flags(o, in, i, out, j, IR_DIMLINK_IN_INNER | IR_DIMLINK_OUT_INNER);
        }
    }
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
    regroup_inner(is, os, pi, po, in, out, o);
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
