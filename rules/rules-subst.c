/* rules-subst.c - fully equivalent substitutions in the spirit of TASO (MAGIS 5, "TASO rules"):
 * merging two MatMuls/Gemms or two Convs that read one input, moving a MatMul across a row
 * Concat (both ways), re-associating Add/Mul chains with constants, distributing a*x + b*x, and
 * eliminating layout ops (Transpose of Transpose, Reshape of Reshape, no-op Identity, Transpose
 * and Reshape). rules.h states each rule; rw_apply dispatches RW_SUBST here, and this file
 * hands fold-weights to rules-fold.c and conv-before-pool to rules-pool.c.
 *
 * Invariants:
 *  - one matcher per rule serves rw_subst_candidates (on g) and rw_subst_apply (on its clone),
 *    so every listed candidate applies and nothing else does;
 *  - the values a matched sub-graph hands to the rest of the graph stay the same values (name,
 *    dtype, shape, readers): the new nodes re-produce them (a merged GEMM's Split writes the two
 *    old outputs), so graph output names never change; only intermediates with no reader outside
 *    the sub-graph are removed, and a rule whose intermediate is a graph output or is read
 *    elsewhere does not apply (a removed no-op whose output is a graph output hands the name to
 *    its input's producer instead, or does not apply);
 *  - nodes tagged "magpie_*" (fission groups) are never matched;
 *  - constants are never modified: concatenated or folded constants are new values with new
 *    blobs (IR_VF_CONST, neither initializers nor parameters); constants that only removed nodes
 *    read are dropped;
 *  - concat-matmul names its match as node_id = the MatMul, user_id = its Concat (forward), or
 *    node_id = the Concat, user_id = 0 (back: Concat of MatMuls sharing B -> one MatMul); the
 *    op of node_id tells the two apart, since 0 is also a valid node id.
 * Rewrites follow rw_apply's conventions: clone then edit, stable ids, new ids from
 * next_node_id, touched ids (refused above RW_MAX_TOUCHED), stable re-sort, validation. */
#include "rules-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rw_subst_rule_name(int rule) {
    static const char *const names[RW_SUBST_RULE_COUNT] = {
        "merge-matmul", "merge-conv",  "concat-matmul", "reassoc",
        "distribute",   "layout-elim", "fold-weights",  "conv-before-pool"};
    return rule >= 0 && rule < RW_SUBST_RULE_COUNT ? names[rule] : "?";
}

/* ---------------------------------------------------------------- small predicates */

static bool reshape_like(ir_op_kind op) {
    return op == IR_OP_Reshape || op == IR_OP_Flatten || op == IR_OP_Squeeze ||
           op == IR_OP_Unsqueeze;
}

static bool has_zero_dim(const ir_shape *s) {
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] == 0) return true;
    return false;
}

/* Transpose's permutation for an input of rank r (the reversal when perm is absent); false
 * when the attribute is not a permutation of 0..r-1. */
static bool get_perm(const ir_node *n, int r, int *perm) {
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    if (np < 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
        return true;
    }
    if (np != r) return false;
    bool seen[IR_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]]) return false;
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return true;
}

/* A transpose of a tensor of shape s by perm moves no byte when it keeps the shape and the
 * order of the dims longer than 1 (size-1 dims may move freely in row-major order). */
static bool perm_is_noop(const int *perm, const ir_shape *s) {
    int last = -1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[perm[i]] != s->dims[i]) return false;
        if (s->dims[perm[i]] == 1) continue;
        if (perm[i] < last) return false;
        last = perm[i];
    }
    return true;
}

/* ---------------------------------------------------------------- constant data */

/* Broadcast strides of a tensor of shape in read as shape out (numpy alignment, 0 on broadcast
 * dims), in elements. */
static void bcast_strides(const ir_shape *in, const ir_shape *out, int64_t *st) {
    int64_t own[IR_MAX_RANK], s = 1;
    for (int i = in->rank - 1; i >= 0; i--) {
        own[i] = s;
        s *= in->dims[i];
    }
    for (int i = 0; i < out->rank; i++) {
        int j = in->rank - out->rank + i;
        st[i] = j >= 0 && in->dims[j] != 1 ? own[j] : 0;
    }
}

/* Odometer step over shape s: advances idx and the two offsets; no allocation, no division. */
static void odo_next(const ir_shape *s, int64_t *idx, const int64_t *sa, int64_t *oa,
                     const int64_t *sb, int64_t *ob) {
    for (int k = s->rank - 1; k >= 0; k--) {
        if (++idx[k] < s->dims[k]) {
            *oa += sa[k];
            *ob += sb[k];
            return;
        }
        *oa -= sa[k] * (s->dims[k] - 1);
        *ob -= sb[k] * (s->dims[k] - 1);
        idx[k] = 0;
    }
}

/* A new blob holding the constant v broadcast to shape out; NULL when out of memory. */
static ir_blob *bcast_blob(const ir_value *v, const ir_shape *out) {
    size_t es = ir_dtype_size(v->dtype);
    int64_t n = ir_shape_numel(out);
    size_t bytes = (size_t)n * es;
    ir_blob *b = ir_blob_new(bytes ? bytes : 1);
    if (!b) return NULL;
    int64_t st[IR_MAX_RANK], zero[IR_MAX_RANK] = {0}, idx[IR_MAX_RANK] = {0}, off = 0, dummy = 0;
    bcast_strides(&v->shape, out, st);
    const char *src = ir_value_data(v);
    char *dst = ir_blob_data(b);
    for (int64_t e = 0; e < n; e++) {
        memcpy(dst + (size_t)e * es, src + (size_t)off * es, es);
        odo_next(out, idx, st, &off, zero, &dummy);
    }
    return b;
}

/* a op b (Add or Mul) broadcast to shape out, in the operands' float dtype. */
static ir_blob *fold_blob(ir_op_kind op, const ir_value *a, const ir_value *b,
                          const ir_shape *out) {
    ir_dtype t = a->dtype;
    int64_t n = ir_shape_numel(out);
    size_t bytes = (size_t)n * ir_dtype_size(t);
    ir_blob *c = ir_blob_new(bytes ? bytes : 1);
    if (!c) return NULL;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, oa = 0, ob = 0;
    bcast_strides(&a->shape, out, sa);
    bcast_strides(&b->shape, out, sb);
    const void *pa = ir_value_data(a), *pb = ir_value_data(b);
    void *pc = ir_blob_data(c);
    for (int64_t e = 0; e < n; e++) {
        double x = ir_load_f64(pa, t, oa), y = ir_load_f64(pb, t, ob);
        ir_store_f64(pc, t, e, op == IR_OP_Add ? x + y : x * y);
        odo_next(out, idx, sa, &oa, sb, &ob);
    }
    return c;
}

/* The concatenation along axis of n parts (data and shapes; equal except on axis) into a new
 * blob of shape out. */
static ir_blob *concat_blob(int n, const void *const *data, const ir_shape *const *shapes, int axis,
                            const ir_shape *out, size_t es) {
    size_t bytes = (size_t)ir_shape_numel(out) * es;
    ir_blob *b = ir_blob_new(bytes ? bytes : 1);
    if (!b) return NULL;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= out->dims[i];
    for (int i = axis + 1; i < out->rank; i++) inner *= out->dims[i];
    char *dst = ir_blob_data(b);
    for (int64_t o = 0; o < outer; o++)
        for (int p = 0; p < n; p++) {
            size_t c = (size_t)(shapes[p]->dims[axis] * inner) * es;
            if (c) memcpy(dst, (const char *)data[p] + (size_t)o * c, c);
            dst += c;
        }
    return b;
}

/* ---------------------------------------------------------------- merge-matmul, merge-conv */

/* Two nodes on one input whose constant weights concatenate along w_axis into one node; its
 * output is cut along out_axis into n1 + n2. */
typedef struct merge_match {
    int w_axis, out_axis;
    int64_t n1, n2;
} merge_match;

static ir_status match_merge_mm(const ir_graph *g, int ia, int ib, merge_match *m, ir_diag *d) {
    const ir_node *a = &g->nodes[ia], *b = &g->nodes[ib];
    if (ia == ib || a->op != b->op || (a->op != IR_OP_MatMul && a->op != IR_OP_Gemm) ||
        rw_tagged(a) || rw_tagged(b))
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: needs two MatMuls or two Gemms");
    if (a->in[0] < 0 || a->in[0] != b->in[0])
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: does not read the input of '%s'",
                            a->name);
    if (a->out[0] < 0 || b->out[0] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: output omitted");
    int w1 = a->in[1], w2 = b->in[1];
    if (!rw_is_const(g, w1) || !rw_is_const(g, w2))
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: right-hand sides not constant");
    if (w1 == w2)
        return ir_node_fail(d, IR_ERR_INVALID, b,
                            "merge-matmul: same right-hand side as '%s' (a duplicate)", a->name);
    const ir_value *x = &g->values[a->in[0]], *v1 = &g->values[w1], *v2 = &g->values[w2];
    if (v1->dtype != x->dtype || v2->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: dtypes differ");
    int r = v1->shape.rank;
    if (r < 2 || v2->shape.rank != r)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: right-hand sides of rank %d, %d",
                            r, v2->shape.rank);
    if (a->op == IR_OP_MatMul) {
        m->w_axis = r - 1;
    } else {
        if (ir_attr_int(a, "transA", 0) || ir_attr_int(b, "transA", 0))
            return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: Gemm with transA");
        if (ir_attr_int(a, "transB", 0) != ir_attr_int(b, "transB", 0) ||
            ir_attr_float(a, "alpha", 1.0f) != ir_attr_float(b, "alpha", 1.0f) ||
            ir_attr_float(a, "beta", 1.0f) != ir_attr_float(b, "beta", 1.0f))
            return ir_node_fail(d, IR_ERR_INVALID, b,
                                "merge-matmul: transB, alpha or beta differ from '%s'", a->name);
        int c1 = a->n_in > 2 ? a->in[2] : -1, c2 = b->n_in > 2 ? b->in[2] : -1;
        if ((c1 < 0) != (c2 < 0))
            return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: only one Gemm has C");
        if (c1 >= 0 && (!rw_is_const(g, c1) || !rw_is_const(g, c2) ||
                        g->values[c1].dtype != x->dtype || g->values[c2].dtype != x->dtype))
            return ir_node_fail(d, IR_ERR_INVALID, b,
                                "merge-matmul: C not a constant of X's dtype");
        m->w_axis = ir_attr_int(a, "transB", 0) ? 0 : 1;
    }
    for (int k = 0; k < r; k++)
        if (k != m->w_axis && v1->shape.dims[k] != v2->shape.dims[k])
            return ir_node_fail(d, IR_ERR_INVALID, b,
                                "merge-matmul: right-hand sides differ beyond N (dim %d)", k);
    const ir_shape *y1 = &g->values[a->out[0]].shape, *y2 = &g->values[b->out[0]].shape;
    m->n1 = v1->shape.dims[m->w_axis];
    m->n2 = v2->shape.dims[m->w_axis];
    m->out_axis = y1->rank - 1;
    bool ok = y1->rank >= 1 && y2->rank == y1->rank && y1->dims[m->out_axis] == m->n1 &&
              y2->dims[m->out_axis] == m->n2;
    for (int k = 0; ok && k < m->out_axis; k++) ok = y1->dims[k] == y2->dims[k];
    if (!ok) return ir_node_fail(d, IR_ERR_INVALID, b, "merge-matmul: output shapes do not fit");
    return IR_OK;
}

static ir_status match_merge_conv(const ir_graph *g, int ia, int ib, merge_match *m, ir_diag *d) {
    const ir_node *a = &g->nodes[ia], *b = &g->nodes[ib];
    if (ia == ib || a->op != IR_OP_Conv || b->op != IR_OP_Conv)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: needs two Convs");
    if (a->in[0] < 0 || a->in[0] != b->in[0])
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: does not read the input of '%s'",
                            a->name);
    if (a->out[0] < 0 || b->out[0] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: output omitted");
    int w1 = a->in[1], w2 = b->in[1];
    if (!rw_is_const(g, w1) || !rw_is_const(g, w2) || w1 == w2)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: weights not two constants");
    ir_dtype t = g->values[a->in[0]].dtype;
    const ir_shape *s1 = &g->values[w1].shape, *s2 = &g->values[w2].shape;
    if (g->values[w1].dtype != t || g->values[w2].dtype != t)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: dtypes differ");
    bool same = s1->rank == s2->rank;
    for (int k = 1; same && k < s1->rank; k++) same = s1->dims[k] == s2->dims[k];
    if (!same)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: kernels differ from '%s'", a->name);
    for (int k = 0; k < 2; k++) {
        const ir_node *n = k ? b : a;
        int bias = n->n_in > 2 ? n->in[2] : -1;
        if (bias >= 0 && (!rw_is_const(g, bias) || g->values[bias].dtype != t))
            return ir_node_fail(d, IR_ERR_INVALID, n, "merge-conv: bias not a constant");
    }
    rw_conv_geo c1, c2;
    if (!rw_conv_geometry(g, a, &c1) || !rw_conv_geometry(g, b, &c2))
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: unexpected attributes");
    if (c1.group != 1 || c2.group != 1)
        return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: grouped convolution");
    if (c1.S != c2.S || memcmp(c1.strides, c2.strides, sizeof c1.strides) ||
        memcmp(c1.dil, c2.dil, sizeof c1.dil) || memcmp(c1.pads, c2.pads, sizeof c1.pads) ||
        strcmp(c1.auto_pad, c2.auto_pad))
        return ir_node_fail(d, IR_ERR_INVALID, b,
                            "merge-conv: strides, pads or dilations differ from '%s'", a->name);
    const ir_shape *y1 = &g->values[a->out[0]].shape, *y2 = &g->values[b->out[0]].shape;
    m->w_axis = 0;
    m->out_axis = 1;
    m->n1 = s1->dims[0];
    m->n2 = s2->dims[0];
    bool ok = y1->rank == y2->rank && y1->dims[1] == m->n1 && y2->dims[1] == m->n2;
    for (int k = 0; ok && k < y1->rank; k++) ok = k == 1 || y1->dims[k] == y2->dims[k];
    if (!ok) return ir_node_fail(d, IR_ERR_INVALID, b, "merge-conv: output shapes do not fit");
    return IR_OK;
}

/* Gemm's C1, C2 as one constant [R, N1+N2] (R = 1 written as rank 1): each broadcast to
 * [R, Ni] first, R = M when either C has rows. */
static int merged_gemm_c(rw_edit *e, int c1, int c2, int64_t M, int64_t n1, int64_t n2) {
    ir_graph *g = e->g;
    const ir_value *v[2] = {&g->values[c1], &g->values[c2]};
    int64_t R = 1;
    for (int k = 0; k < 2; k++)
        if (v[k]->shape.rank == 2 && v[k]->shape.dims[0] != 1) R = M;
    ir_shape s[2] = {ir_shape_make(2, (int64_t[]){R, n1}), ir_shape_make(2, (int64_t[]){R, n2})};
    ir_blob *p[2] = {bcast_blob(v[0], &s[0]), bcast_blob(v[1], &s[1])};
    ir_blob *cat = NULL;
    ir_dtype t = v[0]->dtype;
    ir_shape out = ir_shape_make(2, (int64_t[]){R, n1 + n2});
    if (p[0] && p[1]) {
        const void *data[2] = {ir_blob_data(p[0]), ir_blob_data(p[1])};
        const ir_shape *sh[2] = {&s[0], &s[1]};
        cat = concat_blob(2, data, sh, 1, &out, ir_dtype_size(t));
    }
    ir_blob_unref(p[0]);
    ir_blob_unref(p[1]);
    if (R == 1) out = ir_shape_make(1, (int64_t[]){n1 + n2});
    return rw_edit_const(g, g->values[c1].name, "cat", t, &out, cat);
}

/* Conv bias i (or zeros when absent) for the merged conv. */
static int merged_conv_bias(rw_edit *e, int b1, int b2, ir_dtype t, int64_t n1, int64_t n2,
                            const char *base) {
    ir_graph *g = e->g;
    size_t es = ir_dtype_size(t);
    ir_shape out = ir_shape_make(1, (int64_t[]){n1 + n2});
    size_t bytes = (size_t)(n1 + n2) * es;
    ir_blob *cat = ir_blob_new(bytes ? bytes : 1);
    if (!cat) return -1;
    char *dst = ir_blob_data(cat); /* zero-filled: an absent bias adds zeros */
    if (b1 >= 0) memcpy(dst, ir_value_data(&g->values[b1]), (size_t)n1 * es);
    if (b2 >= 0) memcpy(dst + (size_t)n1 * es, ir_value_data(&g->values[b2]), (size_t)n2 * es);
    return rw_edit_const(g, base, "bias", t, &out, cat); /* base is the weight's: not its "cat" */
}

static ir_status apply_merge(rw_edit *e, const rw_rewrite *r, bool conv) {
    ir_graph *g = e->g;
    int ia = rw_find_node(g, r->node_id), ib = rw_find_node(g, r->user_id);
    if (ia < 0 || ib < 0)
        return ir_diag_set(e->d, IR_ERR_INVALID, "substitution: no node with id %u or %u",
                           r->node_id, r->user_id);
    merge_match m;
    ir_status st =
        conv ? match_merge_conv(g, ia, ib, &m, e->d) : match_merge_mm(g, ia, ib, &m, e->d);
    if (st != IR_OK) return st;
    /* Everything needed from the two nodes, before adding nodes moves the array. */
    const ir_node *a = &g->nodes[ia], *b = &g->nodes[ib];
    ir_op_kind op = a->op;
    const char *name = a->name;
    int x = a->in[0], w1 = a->in[1], w2 = b->in[1], y1 = a->out[0], y2 = b->out[0];
    int c1 = a->n_in > 2 ? a->in[2] : -1, c2 = b->n_in > 2 ? b->in[2] : -1;
    int n_attrs = a->n_attrs;
    const ir_attr *attrs = a->attrs;
    ir_dtype t = g->values[x].dtype;
    rw_edit_kill(e, ia);
    rw_edit_kill(e, ib);
    g->nodes[ia].out[0] = g->nodes[ib].out[0] = -1; /* the Split re-produces y1 and y2 */

    const ir_value *v1 = &g->values[w1], *v2 = &g->values[w2];
    ir_shape ws = v1->shape;
    ws.dims[m.w_axis] += v2->shape.dims[m.w_axis];
    const void *data[2] = {ir_value_data(v1), ir_value_data(v2)};
    const ir_shape *shapes[2] = {&v1->shape, &v2->shape};
    int wv = rw_edit_const(g, v1->name, "cat", t, &ws,
                           concat_blob(2, data, shapes, m.w_axis, &ws, ir_dtype_size(t)));
    if (wv < 0) return rw_edit_nomem(e, "concatenating weights");
    int cv = -1;
    if (conv && (c1 >= 0 || c2 >= 0))
        cv = merged_conv_bias(e, c1, c2, t, m.n1, m.n2, g->values[w1].name);
    else if (!conv && c1 >= 0)
        cv = merged_gemm_c(e, c1, c2, g->values[y1].shape.dims[0], m.n1, m.n2);
    if ((c1 >= 0 || c2 >= 0) && cv < 0) return rw_edit_nomem(e, "concatenating biases");
    ir_shape ys = g->values[y1].shape;
    ys.dims[m.out_axis] = m.n1 + m.n2;
    int yv = rw_edit_value(g, g->values[y1].name, "merged", t, &ys);
    if (yv < 0) return rw_edit_nomem(e, "adding the merged output");
    int in[3] = {x, wv, cv};
    if ((st = rw_edit_node(e, op, name, "merged", cv >= 0 ? 3 : 2, in, 1, &yv, n_attrs, attrs)) !=
        IR_OK)
        return st;
    int64_t sz[2] = {m.n1, m.n2};
    int outs[2] = {y1, y2};
    return rw_edit_split(e, name, yv, m.out_axis, 2, sz, outs);
}

/* ---------------------------------------------------------------- concat-matmul */

typedef struct cm_match {
    int mm, cat; /* forward: the MatMul and its Concat; back: -1 and the Concat */
    int a_axis;  /* the Concat axis in the left operands' coordinates */
    int y_axis;  /* the same axis in the MatMul outputs' */
} cm_match;

/* Whether concatenating left operands of rank ra along a_axis commutes with @ B: a row axis, or
 * a batch axis where B has no extent (absent or 1), so each part's product is its own rows. */
static bool row_axis_ok(int ra, int a_axis, const ir_shape *b) {
    if (ra < 2 || b->rank < 2 || a_axis < 0 || a_axis > ra - 2) return false;
    if (a_axis == ra - 2) return true;
    int rb_axis = a_axis - (ra - b->rank);
    return rb_axis < 0 || b->dims[rb_axis] == 1;
}

static int concat_axis(const ir_node *n, int rank) {
    int64_t a = ir_attr_int(n, "axis", 0);
    if (a < 0) a += rank;
    return a >= 0 && a < rank ? (int)a : -1;
}

static ir_status match_cm_forward(const ir_graph *g, int im, uint32_t cat_id, cm_match *m,
                                  ir_diag *d) {
    const ir_node *n = &g->nodes[im];
    if (n->op != IR_OP_MatMul || n->out[0] < 0 || n->in[0] < 0 || n->in[1] == n->in[0] ||
        rw_tagged(n))
        return ir_node_fail(d, IR_ERR_INVALID, n, "concat-matmul: not a MatMul of two values");
    int ic = rw_producer_of(g, n->in[0], IR_OP_Concat);
    if (ic < 0 || g->nodes[ic].id != cat_id)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "concat-matmul: left input not produced by Concat id %u", cat_id);
    const ir_node *c = &g->nodes[ic];
    if (c->n_in < 2 || c->n_in + 4 > RW_MAX_TOUCHED)
        return ir_node_fail(d, IR_ERR_INVALID, c, "concat-matmul: %d parts", c->n_in);
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k] < 0) return ir_node_fail(d, IR_ERR_INVALID, c, "concat-matmul: omitted part");
    const ir_shape *cs = &g->values[n->in[0]].shape, *ys = &g->values[n->out[0]].shape;
    m->a_axis = concat_axis(c, cs->rank);
    if (!row_axis_ok(cs->rank, m->a_axis, &g->values[n->in[1]].shape))
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "concat-matmul: Concat axis is not a row axis of the product");
    m->mm = im;
    m->cat = ic;
    m->y_axis = m->a_axis + (ys->rank - cs->rank);
    return IR_OK;
}

static ir_status match_cm_back(const ir_graph *g, const rw_users *u, int ic, cm_match *m,
                               ir_diag *d) {
    const ir_node *c = &g->nodes[ic];
    if (c->op != IR_OP_Concat || c->out[0] < 0 || c->n_in < 2 || c->n_in + 3 > RW_MAX_TOUCHED ||
        c->n_in + 1 > RW_EDIT_MAX_DEAD || rw_tagged(c))
        return ir_node_fail(d, IR_ERR_INVALID, c, "concat-matmul: not a Concat of 2 to %d parts",
                            RW_MAX_TOUCHED - 3);
    int b = -1, ra = 0;
    const ir_shape *a0 = NULL;
    ir_dtype t = IR_DTYPE_NONE;
    for (int k = 0; k < c->n_in; k++) {
        int p = rw_producer_of(g, c->in[k], IR_OP_MatMul);
        if (p < 0 || !rw_only_reader(g, u, c->in[k], ic))
            return ir_node_fail(d, IR_ERR_INVALID, c,
                                "concat-matmul: part %d is not a MatMul only the Concat reads", k);
        const ir_node *pn = &g->nodes[p];
        if (pn->in[0] < 0 || (k && pn->in[1] != b))
            return ir_node_fail(d, IR_ERR_INVALID, c,
                                "concat-matmul: the MatMuls do not share a right-hand side");
        b = pn->in[1];
        const ir_value *a = &g->values[pn->in[0]];
        if (!k) {
            a0 = &a->shape;
            ra = a0->rank;
            t = a->dtype;
        } else if (a->shape.rank != ra || a->dtype != t) {
            return ir_node_fail(d, IR_ERR_INVALID, c,
                                "concat-matmul: left operands differ in rank or dtype");
        }
    }
    const ir_shape *ys = &g->values[c->out[0]].shape;
    int y_axis = concat_axis(c, ys->rank);
    m->a_axis = y_axis < 0 ? -1 : y_axis - (ys->rank - ra);
    if (!row_axis_ok(ra, m->a_axis, &g->values[b].shape))
        return ir_node_fail(d, IR_ERR_INVALID, c,
                            "concat-matmul: Concat axis is not a row axis of the products");
    for (int k = 1; k < c->n_in; k++) {
        const ir_shape *s = &g->values[g->nodes[g->values[c->in[k]].producer].in[0]].shape;
        for (int j = 0; j < ra; j++)
            if (j != m->a_axis && s->dims[j] != a0->dims[j])
                return ir_node_fail(d, IR_ERR_INVALID, c,
                                    "concat-matmul: left operands differ beyond the axis");
    }
    m->mm = -1;
    m->cat = ic;
    m->y_axis = y_axis;
    return IR_OK;
}

static ir_status apply_cm(rw_edit *e, const rw_rewrite *r) {
    ir_graph *g = e->g;
    int i0 = rw_find_node(g, r->node_id);
    if (i0 < 0)
        return ir_diag_set(e->d, IR_ERR_INVALID, "substitution: no node with id %u", r->node_id);
    cm_match m;
    bool back = g->nodes[i0].op == IR_OP_Concat; /* node ids start at 0: the op tells */
    if (back && r->user_id != 0)
        return ir_node_fail(e->d, IR_ERR_INVALID, &g->nodes[i0],
                            "concat-matmul: the back form takes user_id 0");
    ir_status st = back ? match_cm_back(g, &e->u, i0, &m, e->d)
                        : match_cm_forward(g, i0, r->user_id, &m, e->d);
    if (st != IR_OK) return st;
    const ir_node *c = &g->nodes[m.cat];
    int n = c->n_in;
    const int *parts = c->in; /* arena memory: stays put while nodes are added */
    if (!back) {
        /* concat(A1..An) @ B -> concat(A1 @ B, ..., An @ B) */
        const ir_node *mm = &g->nodes[m.mm];
        const char *name = mm->name;
        int b = mm->in[1], y = mm->out[0];
        rw_edit_kill(e, m.mm);
        if (rw_only_reader(g, &e->u, mm->in[0], m.mm)) rw_edit_kill(e, m.cat);
        g->nodes[m.mm].out[0] = -1;
        int *ys = malloc(sizeof(int) * (size_t)n);
        if (!ys) return rw_edit_nomem(e, "splitting a MatMul");
        for (int k = 0; k < n && st == IR_OK; k++) {
            ir_shape s = g->values[y].shape;
            s.dims[m.y_axis] = g->values[parts[k]].shape.dims[m.a_axis];
            ys[k] = rw_edit_value(g, g->values[y].name, "part", g->values[y].dtype, &s);
            if (ys[k] < 0) {
                st = rw_edit_nomem(e, "splitting a MatMul");
                break;
            }
            st = rw_edit_node(e, IR_OP_MatMul, name, "part", 2, (int[]){parts[k], b}, 1, &ys[k], 0,
                              NULL);
        }
        ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = m.y_axis};
        if (st == IR_OK) st = rw_edit_node(e, IR_OP_Concat, name, "concat", n, ys, 1, &y, 1, &ax);
        free(ys);
        return st;
    }
    /* concat(A1 @ B, ..., An @ B) -> concat(A1..An) @ B */
    const char *name = c->name;
    int y = c->out[0];
    int *as = malloc(sizeof(int) * (size_t)n);
    if (!as) return rw_edit_nomem(e, "merging MatMuls");
    ir_shape cs = {0};
    int b = -1;
    for (int k = 0; k < n; k++) {
        int p = g->values[parts[k]].producer;
        as[k] = g->nodes[p].in[0];
        b = g->nodes[p].in[1];
        const ir_shape *s = &g->values[as[k]].shape;
        if (!k)
            cs = *s;
        else
            cs.dims[m.a_axis] += s->dims[m.a_axis];
        rw_edit_kill(e, p);
    }
    rw_edit_kill(e, m.cat);
    g->nodes[m.cat].out[0] = -1;
    ir_dtype t = g->values[as[0]].dtype;
    int cv = rw_edit_value(g, g->values[y].name, "rows", t, &cs);
    ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = m.a_axis};
    if (cv < 0)
        st = rw_edit_nomem(e, "merging MatMuls");
    else if ((st = rw_edit_node(e, IR_OP_Concat, name, "rows", n, as, 1, &cv, 1, &ax)) == IR_OK)
        st = rw_edit_node(e, IR_OP_MatMul, name, "matmul", 2, (int[]){cv, b}, 1, &y, 0, NULL);
    free(as);
    return st;
}

/* ---------------------------------------------------------------- reassoc, distribute */

typedef struct arith_match {
    int outer, inner; /* reassoc: the nodes (x op a) op b; distribute: the Add and -1 */
    int p1, p2;       /* distribute: the two Muls */
    int x, a, b;      /* the operands: (x op a) op b, or a*x + b*x */
    ir_shape c;       /* the shape of a op b, or a + b */
} arith_match;

static ir_status match_reassoc(const ir_graph *g, const rw_users *u, int i, arith_match *m,
                               ir_diag *d) {
    const ir_node *n = &g->nodes[i];
    if ((n->op != IR_OP_Add && n->op != IR_OP_Mul) || n->n_in != 2 || n->out[0] < 0 || rw_tagged(n))
        return ir_node_fail(d, IR_ERR_INVALID, n, "reassoc: not a binary Add or Mul");
    m->inner = -1;
    for (int k = 0; k < 2 && m->inner < 0; k++) {
        int p = rw_producer_of(g, n->in[k], n->op);
        if (p < 0 || !rw_is_const(g, n->in[1 - k]) || !rw_only_reader(g, u, n->in[k], i) ||
            g->nodes[p].n_in != 2)
            continue;
        const ir_node *pn = &g->nodes[p];
        int j = rw_is_const(g, pn->in[1]) ? 1 : rw_is_const(g, pn->in[0]) ? 0 : -1;
        if (j < 0 || pn->in[1 - j] < 0) continue;
        m->inner = p;
        m->x = pn->in[1 - j];
        m->a = pn->in[j];
        m->b = n->in[1 - k];
    }
    if (m->inner < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "reassoc: no operand is the same op with a constant, read only here");
    m->outer = i;
    ir_dtype t = g->values[n->out[0]].dtype;
    if (!ir_dtype_is_float(t) || g->values[m->x].dtype != t || g->values[m->a].dtype != t ||
        g->values[m->b].dtype != t)
        return ir_node_fail(d, IR_ERR_INVALID, n, "reassoc: operands not of one float dtype");
    ir_shape s;
    if (!ir_shape_broadcast(&g->values[m->a].shape, &g->values[m->b].shape, &m->c) ||
        !ir_shape_broadcast(&g->values[m->x].shape, &m->c, &s) ||
        !ir_shape_eq(&s, &g->values[n->out[0]].shape))
        return ir_node_fail(d, IR_ERR_INVALID, n, "reassoc: folded shape changes the output");
    return IR_OK;
}

static ir_status match_distribute(const ir_graph *g, const rw_users *u, int i, arith_match *m,
                                  ir_diag *d) {
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_Add || n->n_in != 2 || n->out[0] < 0 || rw_tagged(n))
        return ir_node_fail(d, IR_ERR_INVALID, n, "distribute: not a binary Add");
    int p1 = rw_producer_of(g, n->in[0], IR_OP_Mul), p2 = rw_producer_of(g, n->in[1], IR_OP_Mul);
    if (p1 < 0 || p2 < 0 || p1 == p2 || !rw_only_reader(g, u, n->in[0], i) ||
        !rw_only_reader(g, u, n->in[1], i) || g->nodes[p1].n_in != 2 || g->nodes[p2].n_in != 2)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "distribute: operands are not two Muls only this Add reads");
    const ir_node *m1 = &g->nodes[p1], *m2 = &g->nodes[p2];
    m->x = -1;
    for (int s1 = 0; s1 < 2 && m->x < 0; s1++)
        for (int s2 = 0; s2 < 2 && m->x < 0; s2++)
            if (m1->in[s1] >= 0 && m1->in[s1] == m2->in[s2]) {
                m->x = m1->in[s1];
                m->a = m1->in[1 - s1];
                m->b = m2->in[1 - s2];
            }
    if (m->x < 0 || m->a < 0 || m->b < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "distribute: the Muls share no operand");
    ir_dtype t = g->values[n->out[0]].dtype;
    if (t == IR_BOOL || g->values[m->x].dtype != t || g->values[m->a].dtype != t ||
        g->values[m->b].dtype != t)
        return ir_node_fail(d, IR_ERR_INVALID, n, "distribute: operands not of one dtype");
    ir_shape s;
    if (!ir_shape_broadcast(&g->values[m->a].shape, &g->values[m->b].shape, &m->c) ||
        !ir_shape_broadcast(&m->c, &g->values[m->x].shape, &s) ||
        !ir_shape_eq(&s, &g->values[n->out[0]].shape))
        return ir_node_fail(d, IR_ERR_INVALID, n, "distribute: the sum's shape changes the output");
    m->outer = i;
    m->inner = -1;
    m->p1 = p1;
    m->p2 = p2;
    return IR_OK;
}

static ir_status apply_arith(rw_edit *e, const rw_rewrite *r, bool distribute) {
    ir_graph *g = e->g;
    int i = rw_find_node(g, r->node_id);
    if (i < 0)
        return ir_diag_set(e->d, IR_ERR_INVALID, "substitution: no node with id %u", r->node_id);
    arith_match m;
    ir_status st =
        distribute ? match_distribute(g, &e->u, i, &m, e->d) : match_reassoc(g, &e->u, i, &m, e->d);
    if (st != IR_OK) return st;
    const ir_node *n = &g->nodes[i];
    ir_op_kind op = distribute ? IR_OP_Mul : n->op, fold_op = distribute ? IR_OP_Add : n->op;
    const char *name = n->name;
    int y = n->out[0];
    ir_dtype t = g->values[y].dtype;
    rw_edit_kill(e, i);
    if (distribute) {
        rw_edit_kill(e, m.p1);
        rw_edit_kill(e, m.p2);
    } else {
        rw_edit_kill(e, m.inner);
    }
    g->nodes[i].out[0] = -1;
    int cv;
    if (rw_is_const(g, m.a) && rw_is_const(g, m.b) && ir_dtype_is_float(t)) {
        /* both constant: fold them now into a new constant (never into an old blob) */
        cv = rw_edit_const(g, g->values[m.a].name, "fold", t, &m.c,
                           fold_blob(fold_op, &g->values[m.a], &g->values[m.b], &m.c));
        if (cv < 0) return rw_edit_nomem(e, "folding constants");
    } else {
        cv = rw_edit_value(g, g->values[y].name, "sum", t, &m.c);
        if (cv < 0) return rw_edit_nomem(e, "adding a sum");
        if ((st = rw_edit_node(e, fold_op, name, "sum", 2, (int[]){m.a, m.b}, 1, &cv, 0, NULL)) !=
            IR_OK)
            return st;
    }
    int in[2] = {distribute ? cv : m.x, distribute ? m.x : cv};
    return rw_edit_node(e, op, name, distribute ? "dist" : "reassoc", 2, in, 1, &y, 0, NULL);
}

/* ---------------------------------------------------------------- layout-elim */

enum { LE_REMOVE, LE_TRANSPOSE, LE_RESHAPE };

typedef struct le_match {
    int kind;
    int node, inner; /* the node, and the Transpose/Reshape feeding it (-1 for a lone no-op) */
    bool kill_inner; /* inner has no reader left after the rewrite */
    int x;           /* what the result reads: the input of inner, else of node */
    bool rename;     /* LE_REMOVE of a graph output: x's producer writes the output instead */
    int perm[IR_MAX_RANK];
} le_match;

static ir_status match_layout(const ir_graph *g, const rw_users *u, int i, le_match *m,
                              ir_diag *d) {
    const ir_node *n = &g->nodes[i];
    bool tr = n->op == IR_OP_Transpose, rs = reshape_like(n->op);
    if ((!tr && !rs && n->op != IR_OP_Identity) || n->n_out != 1 || n->out[0] < 0 || n->in[0] < 0 ||
        rw_tagged(n))
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "layout-elim: not a Transpose, Reshape or Identity");
    int y = n->out[0], x0 = n->in[0];
    const ir_shape *ys = &g->values[y].shape, *xs = &g->values[x0].shape;
    int perm[IR_MAX_RANK];
    m->node = i;
    m->inner = -1;
    m->x = x0;
    m->kind = -1;
    if (tr && !get_perm(n, xs->rank, perm))
        return ir_node_fail(d, IR_ERR_INVALID, n, "layout-elim: invalid perm");
    if (n->op == IR_OP_Identity || (tr && perm_is_noop(perm, xs)) || (rs && ir_shape_eq(xs, ys))) {
        m->kind = LE_REMOVE;
    } else if (tr) {
        int p = rw_producer_of(g, x0, IR_OP_Transpose);
        int p1[IR_MAX_RANK];
        if (p >= 0 && g->nodes[p].in[0] >= 0 &&
            get_perm(&g->nodes[p], g->values[g->nodes[p].in[0]].shape.rank, p1)) {
            m->inner = p;
            m->x = g->nodes[p].in[0];
            for (int k = 0; k < xs->rank; k++) m->perm[k] = p1[perm[k]];
            m->kind = perm_is_noop(m->perm, &g->values[m->x].shape) ? LE_REMOVE : LE_TRANSPOSE;
        }
    } else if (rs) {
        int p = g->values[x0].producer;
        if (p >= 0 && reshape_like(g->nodes[p].op) && g->nodes[p].out[0] == x0 &&
            !rw_tagged(&g->nodes[p]) && g->nodes[p].in[0] >= 0) {
            m->inner = p;
            m->x = g->nodes[p].in[0];
            m->kind = ir_shape_eq(&g->values[m->x].shape, ys) ? LE_REMOVE : LE_RESHAPE;
            if (m->kind == LE_RESHAPE && has_zero_dim(ys))
                return ir_node_fail(d, IR_ERR_INVALID, n, "layout-elim: empty shape");
        }
    }
    if (m->kind < 0) return ir_node_fail(d, IR_ERR_INVALID, n, "layout-elim: nothing to eliminate");
    m->kill_inner = m->inner >= 0 && rw_only_reader(g, u, x0, i);
    m->rename = false;
    int rewired = 0;
    if (m->kind == LE_REMOVE) {
        if (ir_value_on_host(g, m->x))
            return ir_node_fail(d, IR_ERR_INVALID, n, "layout-elim: reads a host tensor");
        if (rw_is_output(g, y)) {
            /* Keep the output's name: x's producer writes y instead of x. */
            int px = g->values[m->x].producer;
            if (px < 0 || rw_is_output(g, m->x))
                return ir_node_fail(d, IR_ERR_INVALID, n,
                                    "layout-elim: its output is a graph output and its input is "
                                    "a graph input, a constant or another graph output");
            m->rename = true;
            rewired = rw_n_readers(u, m->x) + 1;
        } else {
            rewired = rw_n_readers(u, y);
        }
    }
    if (rewired + 3 > RW_MAX_TOUCHED)
        return ir_node_fail(d, IR_ERR_INVALID, n, "layout-elim: touches over %d nodes",
                            RW_MAX_TOUCHED);
    return IR_OK;
}

static ir_status apply_layout(rw_edit *e, const rw_rewrite *r) {
    ir_graph *g = e->g;
    int i = rw_find_node(g, r->node_id);
    if (i < 0)
        return ir_diag_set(e->d, IR_ERR_INVALID, "substitution: no node with id %u", r->node_id);
    le_match m;
    ir_status st = match_layout(g, &e->u, i, &m, e->d);
    if (st != IR_OK) return st;
    const char *name = g->nodes[i].name;
    int y = g->nodes[i].out[0];
    rw_edit_kill(e, i);
    if (m.kill_inner) rw_edit_kill(e, m.inner);
    if (m.kind != LE_REMOVE || m.rename) g->nodes[i].out[0] = -1; /* y gets another producer */
    if (m.kind == LE_TRANSPOSE) {
        int rank = g->values[m.x].shape.rank;
        int64_t *p = ir_graph_alloc(g, sizeof(int64_t) * (size_t)rank);
        if (!p) return rw_edit_nomem(e, "composing transposes");
        for (int k = 0; k < rank; k++) p[k] = m.perm[k];
        ir_attr at = {.name = "perm", .type = IR_ATTR_INTS, .n = rank, .ints = p};
        return rw_edit_node(e, IR_OP_Transpose, name, "perm", 1, &m.x, 1, &y, 1, &at);
    }
    if (m.kind == LE_RESHAPE) {
        char sname[512];
        snprintf(sname, sizeof sname, "%.400s.shape%u", name, g->next_node_id);
        ir_shape ys = g->values[y].shape;
        int sv = rw_add_const_i64(g, sname, ys.rank, ys.dims);
        if (sv < 0) return rw_edit_nomem(e, "adding a shape");
        return rw_edit_node(e, IR_OP_Reshape, name, "reshape", 2, (int[]){m.x, sv}, 1, &y, 0, NULL);
    }
    if (!m.rename) {
        rw_edit_rewire(e, y, m.x);
        return IR_OK;
    }
    int px = g->values[m.x].producer;
    ir_node *p = &g->nodes[px];
    for (int k = 0; k < p->n_out; k++)
        if (p->out[k] == m.x) p->out[k] = y;
    g->values[y].producer = px;
    rw_edit_touch(e, p->id);
    rw_edit_rewire(e, m.x, y);
    e->dead_val = m.x;
    return IR_OK;
}

/* ---------------------------------------------------------------- apply and candidates */

ir_graph *rw_subst_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                         ir_status *st, ir_diag *d) {
    IR_ASSERT(r->kind == RW_SUBST);
    if (r->value == RW_SUBST_FOLD_WEIGHTS) return rw_fold_apply(g, r, touched, n_touched, st, d);
    ir_status s = IR_OK;
    rw_edit e = {.dead_val = -1, .d = d};
    if (n_touched) *n_touched = 0;
    ir_graph *g2 = ir_graph_clone(g);
    if (!g2) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory copying the graph");
        goto out;
    }
    e.g = g2;
    if ((s = rw_users_build(g2, &e.u, d)) != IR_OK) goto out;
    switch (r->value) {
    case RW_SUBST_MERGE_MATMUL: s = apply_merge(&e, r, false); break;
    case RW_SUBST_MERGE_CONV: s = apply_merge(&e, r, true); break;
    case RW_SUBST_CONCAT_MATMUL: s = apply_cm(&e, r); break;
    case RW_SUBST_REASSOC: s = apply_arith(&e, r, false); break;
    case RW_SUBST_DISTRIBUTE: s = apply_arith(&e, r, true); break;
    case RW_SUBST_LAYOUT_ELIM: s = apply_layout(&e, r); break;
    case RW_SUBST_CONV_BEFORE_POOL: s = rw_pool_apply(&e, r); break;
    default: s = ir_diag_set(d, IR_ERR_INVALID, "substitution: unknown rule %d", r->value); break;
    }
    if (s == IR_OK && e.touched.overflow)
        s = ir_diag_set(d, IR_ERR_UNSUPPORTED,
                        "substitution %s at node id %u touches over %d nodes",
                        rw_subst_rule_name(r->value), r->node_id, RW_MAX_TOUCHED);
    if (s == IR_OK) s = rw_edit_commit(&e);
    if (s == IR_OK) s = rw_finish_graph(g2, d);
out:
    rw_users_free(&e.u);
    if (s != IR_OK) {
        ir_graph_free(g2);
        g2 = NULL;
    } else {
        if (touched) memcpy(touched, e.touched.ids, sizeof(uint32_t) * (size_t)e.touched.n);
        if (n_touched) *n_touched = e.touched.n;
    }
    if (st) *st = s;
    return g2;
}

static bool push(rw_rewrite *out, int max, int *cnt, int rule, uint32_t id, uint32_t user) {
    if (*cnt >= max) return false;
    out[(*cnt)++] = (rw_rewrite){.kind = RW_SUBST, .node_id = id, .value = rule, .user_id = user};
    return true;
}

int rw_subst_candidates(const ir_graph *g, rw_rewrite *out, int max) {
    int cnt = 0;
    if (!out || max <= 0) return 0;
    rw_users u;
    if (rw_users_build(g, &u, NULL) != IR_OK) return 0;
    /* Pairs (i, j), i before j, of readers of one input: merge-matmul, then merge-conv. */
    for (int rule = RW_SUBST_MERGE_MATMUL; rule <= RW_SUBST_MERGE_CONV; rule++)
        for (int i = 0; i < g->n_nodes; i++) {
            const ir_node *a = &g->nodes[i];
            bool mm = a->op == IR_OP_MatMul || a->op == IR_OP_Gemm;
            if ((rule == RW_SUBST_MERGE_MATMUL ? !mm : a->op != IR_OP_Conv) || a->in[0] < 0)
                continue;
            int v = a->in[0];
            for (int k = u.off[v]; k < u.off[v + 1]; k++) {
                int j = u.node[k];
                merge_match m;
                if (j <= i) continue;
                ir_status s = rule == RW_SUBST_MERGE_MATMUL ? match_merge_mm(g, i, j, &m, NULL)
                                                            : match_merge_conv(g, i, j, &m, NULL);
                if (s == IR_OK && !push(out, max, &cnt, rule, a->id, g->nodes[j].id)) goto out;
            }
        }
    for (int i = 0; i < g->n_nodes; i++) {
        cm_match m;
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_MatMul && n->in[0] >= 0) {
            int c = rw_producer_of(g, n->in[0], IR_OP_Concat);
            if (c >= 0 && match_cm_forward(g, i, g->nodes[c].id, &m, NULL) == IR_OK &&
                !push(out, max, &cnt, RW_SUBST_CONCAT_MATMUL, n->id, g->nodes[c].id))
                goto out;
        }
        if (n->op == IR_OP_Concat && match_cm_back(g, &u, i, &m, NULL) == IR_OK &&
            !push(out, max, &cnt, RW_SUBST_CONCAT_MATMUL, n->id, 0))
            goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        arith_match m;
        if (match_reassoc(g, &u, i, &m, NULL) == IR_OK &&
            !push(out, max, &cnt, RW_SUBST_REASSOC, g->nodes[i].id, 0))
            goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        arith_match m;
        if (match_distribute(g, &u, i, &m, NULL) == IR_OK &&
            !push(out, max, &cnt, RW_SUBST_DISTRIBUTE, g->nodes[i].id, 0))
            goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        le_match m;
        if (match_layout(g, &u, i, &m, NULL) == IR_OK &&
            !push(out, max, &cnt, RW_SUBST_LAYOUT_ELIM, g->nodes[i].id, 0))
            goto out;
    }
    cnt += rw_pool_candidates(g, &u, out + cnt, max - cnt);
    cnt += rw_fold_candidates(g, out + cnt, max - cnt);
out:
    rw_users_free(&u);
    return cnt;
}
