/* rules-pool.c - the substitution conv-before-pool (rules.h, RW_SUBST_CONV_BEFORE_POOL): a
 * 1x1 Conv that reads an AveragePool (itself reading a Pad, or not) runs first, on the pool's
 * input, and the pool (and the pad) then move M channels instead of C:
 *
 *     Conv1x1(AvgPool(Pad(x)))  ->  [Add bias](AvgPool(Pad(Conv1x1(x))))
 *
 * Both are linear; the conv mixes channels at one position, the pool (and the pad's remapping
 * of positions) treats every channel alike, so they commute. The bias is the one part that does
 * not: a zero pad, or padding that an average counts, turns the constant b into less than b at
 * the border, so then the bias is added after the pool. Inception v3's pooling branches are this
 * pattern (a 3x3 average over 768 channels feeding a 1x1 conv to 192): the pooling, 12% of the
 * network's time in magpie's executor, shrinks by the channel ratio.
 *
 * Proposed only when it is a saving on its face: fewer output channels than input channels,
 * and the conv's new grid (the pool's input) no larger than its old one (the pool's output). */
#include "rules-impl.h"

#include <string.h>

typedef struct pool_match {
    int conv, pool, pad; /* node indices; pad -1 when the pool reads x directly */
    int x;               /* what the pad (or the pool) reads: the new conv's input */
    bool bias_after;     /* the conv has a bias that must be added after the pool */
} pool_match;

static bool all_ones(const int64_t *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] != 1) return false;
    return true;
}

static int64_t spatial_volume(const ir_shape *s) {
    int64_t v = 1;
    for (int i = 2; i < s->rank; i++) v *= s->dims[i];
    return v;
}

/* A 1x1, stride-1, unpadded, ungrouped conv with constant weights (and bias). */
static bool pointwise_conv(const ir_graph *g, const ir_node *n) {
    rw_conv_geo c;
    if (n->op != IR_OP_Conv || n->n_in < 2 || n->in[0] < 0 || n->out[0] < 0 || rw_tagged(n) ||
        !rw_is_const(g, n->in[1]) || (n->n_in > 2 && n->in[2] >= 0 && !rw_is_const(g, n->in[2])))
        return false;
    if (!rw_conv_geometry(g, n, &c) || c.group != 1 || !all_ones(c.strides, c.S) ||
        !all_ones(c.dil, c.S) || !all_ones(g->values[n->in[1]].shape.dims + 2, c.S))
        return false;
    for (int i = 0; i < 2 * c.S; i++)
        if (c.pads[i] != 0) return false;
    return true;
}

/* Whether a pooling window may count padding as zeros (explicit or automatic pads that the
 * average includes), which would scale a constant down at the border. */
static bool pool_counts_padding(const ir_node *p) {
    if (!ir_attr_int(p, "count_include_pad", 0)) return false;
    const char *ap = ir_attr_str(p, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return true;
    const int64_t *pads;
    int np = ir_attr_ints(p, "pads", &pads);
    for (int i = 0; i < np; i++)
        if (pads[i] != 0) return true;
    return false;
}

/* A Pad that only remaps positions: spatial dims only, and a constant mode pads with zero.
 * *zero tells whether it pads with zeros (which a bias must then skip). */
static bool spatial_pad(const ir_graph *g, const ir_node *q, bool *zero) {
    const ir_shape *a = &g->values[q->in[0]].shape, *b = &g->values[q->out[0]].shape;
    if (a->rank < 3 || a->dims[0] != b->dims[0] || a->dims[1] != b->dims[1]) return false;
    *zero = !strcmp(ir_attr_str(q, "mode", "constant"), "constant");
    if (!*zero) return true;
    if (ir_attr_float(q, "value", 0.0f) != 0.0f) return false;
    if (q->n_in < 3 || q->in[2] < 0) return true;
    int v = q->in[2];
    if (!rw_is_const(g, v) || g->values[v].dtype != IR_F32) return false;
    const float *c = ir_value_data(&g->values[v]);
    for (int64_t i = 0; i < ir_shape_numel(&g->values[v].shape); i++)
        if (c[i] != 0.0f) return false;
    return true;
}

static ir_status match_conv_pool(const ir_graph *g, const rw_users *u, int ic, pool_match *m,
                                 ir_diag *d) {
    const ir_node *c = &g->nodes[ic];
    *m = (pool_match){.conv = ic, .pool = -1, .pad = -1};
    if (!pointwise_conv(g, c))
        return ir_diag_set(d, IR_ERR_INVALID,
                           "conv-before-pool: node id %u is not a 1x1 stride-1 conv with "
                           "constant weights",
                           c->id);
    m->pool = rw_producer_of(g, c->in[0], IR_OP_AveragePool);
    if (m->pool < 0 || !rw_only_reader(g, u, c->in[0], ic))
        return ir_node_fail(d, IR_ERR_INVALID, c,
                            "conv-before-pool: its input is not an AveragePool it alone reads");
    const ir_node *p = &g->nodes[m->pool];
    m->x = p->in[0];
    bool zero_pad = false;
    int q = rw_producer_of(g, p->in[0], IR_OP_Pad);
    if (q >= 0 && rw_only_reader(g, u, p->in[0], m->pool) &&
        spatial_pad(g, &g->nodes[q], &zero_pad)) {
        m->pad = q;
        m->x = g->nodes[q].in[0];
    }
    const ir_value *x = &g->values[m->x], *y = &g->values[c->out[0]];
    if (x->dtype != IR_F32 || x->shape.rank < 3 || y->shape.dims[1] >= x->shape.dims[1] ||
        spatial_volume(&x->shape) > spatial_volume(&y->shape))
        return ir_node_fail(d, IR_ERR_INVALID, c,
                            "conv-before-pool: no saving (%lld -> %lld channels, %lld -> %lld "
                            "positions)",
                            (long long)x->shape.dims[1], (long long)y->shape.dims[1],
                            (long long)spatial_volume(&y->shape),
                            (long long)spatial_volume(&x->shape));
    bool bias = c->n_in > 2 && c->in[2] >= 0;
    m->bias_after = bias && (zero_pad || pool_counts_padding(p));
    return IR_OK;
}

int rw_pool_candidates(const ir_graph *g, const rw_users *u, rw_rewrite *out, int max) {
    int cnt = 0;
    for (int i = 0; i < g->n_nodes && cnt < max; i++) {
        pool_match m;
        if (g->nodes[i].op == IR_OP_Conv && match_conv_pool(g, u, i, &m, NULL) == IR_OK)
            out[cnt++] = (rw_rewrite){
                .kind = RW_SUBST, .node_id = g->nodes[i].id, .value = RW_SUBST_CONV_BEFORE_POOL};
    }
    return cnt;
}

ir_status rw_pool_apply(rw_edit *e, const rw_rewrite *r) {
    ir_graph *g = e->g;
    int ic = rw_find_node(g, r->node_id);
    if (ic < 0)
        return ir_diag_set(e->d, IR_ERR_INVALID, "conv-before-pool: no node with id %u",
                           r->node_id);
    pool_match m;
    ir_status st = match_conv_pool(g, &e->u, ic, &m, e->d);
    if (st != IR_OK) return st;
    /* Everything needed from the matched nodes, before adding nodes moves the array. */
    const ir_node *c = &g->nodes[ic], *p = &g->nodes[m.pool];
    const ir_node *q = m.pad >= 0 ? &g->nodes[m.pad] : NULL;
    const char *name = c->name;
    int w = c->in[1], b = c->n_in > 2 ? c->in[2] : -1, y = c->out[0];
    int c_attrs = c->n_attrs, p_attrs = p->n_attrs, q_attrs = q ? q->n_attrs : 0;
    const ir_attr *ca = c->attrs, *pa = p->attrs, *qa = q ? q->attrs : NULL;
    int q_in[4] = {-1, -1, -1, -1}, q_n_in = q ? q->n_in : 0;
    for (int k = 0; k < q_n_in && k < 4; k++) q_in[k] = q->in[k];
    ir_shape ys = g->values[y].shape, s = g->values[m.x].shape;
    rw_edit_kill(e, ic);
    rw_edit_kill(e, m.pool);
    if (q) rw_edit_kill(e, m.pad);
    g->nodes[ic].out[0] = -1; /* the last new node re-produces y */

    /* conv on x: [N, M, x's positions] */
    s.dims[1] = ys.dims[1];
    int cv = rw_edit_value(g, g->values[y].name, "pre", IR_F32, &s);
    if (cv < 0) return rw_edit_nomem(e, "adding the moved conv's output");
    int cin[3] = {m.x, w, b};
    int cn = b >= 0 && !m.bias_after ? 3 : 2;
    if ((st = rw_edit_node(e, IR_OP_Conv, name, "pre", cn, cin, 1, &cv, c_attrs, ca)) != IR_OK)
        return st;
    int pin = cv;
    if (q) {
        ir_shape ps = g->values[g->nodes[m.pad].out[0]].shape;
        ps.dims[1] = ys.dims[1];
        int pv = rw_edit_value(g, g->values[y].name, "pad", IR_F32, &ps);
        if (pv < 0) return rw_edit_nomem(e, "adding the moved pad's output");
        q_in[0] = cv;
        if ((st = rw_edit_node(e, IR_OP_Pad, name, "pad", q_n_in, q_in, 1, &pv, q_attrs, qa)) !=
            IR_OK)
            return st;
        pin = pv;
    }
    if (!m.bias_after)
        return rw_edit_node(e, IR_OP_AveragePool, name, "pool", 1, &pin, 1, &y, p_attrs, pa);
    int pv = rw_edit_value(g, g->values[y].name, "pool", IR_F32, &ys);
    if (pv < 0) return rw_edit_nomem(e, "adding the moved pool's output");
    if ((st = rw_edit_node(e, IR_OP_AveragePool, name, "pool", 1, &pin, 1, &pv, p_attrs, pa)) !=
        IR_OK)
        return st;
    /* bias [M] read as [M, 1, ..., 1] broadcasts over [N, M, positions] */
    ir_shape bs = ys;
    bs.rank = ys.rank - 1;
    for (int i = 1; i < bs.rank; i++) bs.dims[i] = 1;
    bs.dims[0] = ys.dims[1];
    int bv =
        rw_edit_const(g, g->values[b].name, "bias", IR_F32, &bs, ir_blob_ref(g->values[b].blob));
    if (bv < 0) return rw_edit_nomem(e, "adding the bias");
    return rw_edit_node(e, IR_OP_Add, name, "bias", 2, (int[]){pv, bv}, 1, &y, 0, NULL);
}
