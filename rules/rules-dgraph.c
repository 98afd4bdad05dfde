/* rules-dgraph.c - the dimension graph D(G) of MAGIS section 4.1 (rules.h, "dimension graph").
 *
 * Two vertices per (value, dimension) of every value, residents included, and per (node, reduce
 * axis): the dim itself (its outer factor where a reshape merged others into it) and its inner
 * factor; the op table's dimension links (ir_node_dims) are its edges, an IR_DIMLINK_*_INNER
 * flag naming an inner vertex, and a link between two dims of one length (the same dim) joins
 * their inner vertices too. A component of inner vertices alone (the inner factor of dims that
 * nothing was merged into) is no component. Components come from a
 * union-find over the vertices; each is one "dimension" that runs through the graph, the thing
 * a fission splits.
 *
 * Invariants: building is O(vertices + links) and allocates a fixed number of arrays; component
 * numbers depend only on the graph (first vertex met when walking the nodes in order: a node's
 * inputs, its reduce axes, its outputs; then values no node touches, by id). A reduce axis is a
 * sum only when every link into it says so. */
#include "rules-impl.h"

#include <stdlib.h>
#include <string.h>

static int uf_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]]; /* path halving */
        x = parent[x];
    }
    return x;
}

static void uf_union(int *parent, int a, int b) {
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    /* the smaller root wins: cheap, and trees stay shallow enough with path halving */
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

/* Keeps the links that name present values, asserting the rest is in range (a link out of range
 * is a bug in the op's dims callback, not bad input). Returns the count kept and the number of
 * reduce axes in *n_reduce. */
static int keep_links(const ir_graph *g, const ir_node *n, ir_dimlink *l, int cnt, int *n_reduce) {
    int kept = 0, r = 0;
    IR_ASSERT(cnt >= 0 && cnt <= IR_MAX_DIMLINKS);
    for (int i = 0; i < cnt; i++) {
        ir_dimlink x = l[i];
        IR_ASSERT(x.in >= 0 && x.in < n->n_in);
        if (n->in[x.in] < 0) continue;
        IR_ASSERT(x.in_dim >= 0 && x.in_dim < g->values[n->in[x.in]].shape.rank);
        if (x.out_dim >= 0) {
            IR_ASSERT(x.out >= 0 && x.out < n->n_out);
            if (n->out[x.out] < 0) continue;
            IR_ASSERT(x.out_dim < g->values[n->out[x.out]].shape.rank);
        } else if (-x.out_dim > r) {
            r = -x.out_dim;
        }
        l[kept++] = x;
    }
    *n_reduce = r;
    return kept;
}

void rw_dgraph_free(rw_dgraph *dg) {
    if (!dg) return;
    free(dg->voff);
    free(dg->roff);
    free(dg->comp);
    free(dg->rsum);
    free(dg->comp_len);
    free(dg->inner_len);
    free(dg->loff);
    free(dg->links);
    free(dg);
}

/* Numbers the component of vertex x when it is met first (real: per root, it has a vertex
 * that is a whole dim or reduce axis). */
static void number(rw_dgraph *dg, int *parent, const unsigned char *real, int x) {
    int root = uf_find(parent, x);
    if (dg->comp[root] < 0 && real[root]) dg->comp[root] = dg->n_comps++;
}

/* The length of the inner factor of dim i of s in a regrouping whose other shape is t (ir-dims.c,
 * regroup_inner): the dim's elements past the last prefix product of t strictly inside it; 0
 * when none lies inside (the dim is one factor). */
static int64_t regroup_inner_len(const ir_shape *s, int i, const ir_shape *t) {
    int64_t p = 1, q = 1, best = 0;
    for (int k = 0; k < i; k++) p *= s->dims[k];
    int64_t end = p * s->dims[i];
    for (int k = 0; k < t->rank; k++) {
        if (q > p && q < end && q > best) best = q;
        q *= t->dims[k];
    }
    return best > 0 && end % best == 0 ? end / best : 0;
}

/* Records K as the inner-factor length of the value-dim class of slot x (union-find same). */
static void note_inner(int64_t *len, int *same, int x, int64_t k) {
    int r = uf_find(same, x);
    if (k <= 0 || len[r] < 0) return;
    len[r] = len[r] == 0 || len[r] == k ? k : -1;
}

/* inner_len (rules-impl.h): the inner factor a reshape gives a dim, on every dim joined to it
 * whole along links between dims of one length. O(value dims + links). */
static bool build_inner_len(rw_dgraph *dg, const ir_graph *g) {
    int ns = dg->voff[g->n_values] / RW_DG_SLOTS;
    int *same = malloc(sizeof(int) * (size_t)(ns ? ns : 1));
    dg->inner_len = calloc((size_t)(ns ? ns : 1), sizeof(int64_t));
    if (!same || !dg->inner_len) {
        free(same);
        return false;
    }
    for (int x = 0; x < ns; x++) same[x] = x;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int j = dg->loff[i]; j < dg->loff[i + 1]; j++) {
            const ir_dimlink *l = &dg->links[j];
            if (l->out_dim < 0 || (l->flags & (IR_DIMLINK_IN_INNER | IR_DIMLINK_OUT_INNER)))
                continue;
            int vin = n->in[l->in], vout = n->out[l->out];
            if (g->values[vin].shape.dims[l->in_dim] == g->values[vout].shape.dims[l->out_dim])
                uf_union(same, dg->voff[vin] / RW_DG_SLOTS + l->in_dim,
                         dg->voff[vout] / RW_DG_SLOTS + l->out_dim);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int j = dg->loff[i]; j < dg->loff[i + 1]; j++) {
            const ir_dimlink *l = &dg->links[j];
            if (l->out_dim < 0) continue;
            const ir_shape *is = &g->values[n->in[l->in]].shape,
                           *os = &g->values[n->out[l->out]].shape;
            if (l->flags & IR_DIMLINK_IN_INNER)
                note_inner(dg->inner_len, same, dg->voff[n->in[l->in]] / RW_DG_SLOTS + l->in_dim,
                           regroup_inner_len(is, l->in_dim, os));
            if (l->flags & IR_DIMLINK_OUT_INNER)
                note_inner(dg->inner_len, same, dg->voff[n->out[l->out]] / RW_DG_SLOTS + l->out_dim,
                           regroup_inner_len(os, l->out_dim, is));
        }
    }
    for (int x = 0; x < ns; x++) dg->inner_len[x] = dg->inner_len[uf_find(same, x)];
    free(same);
    return true;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

rw_dgraph *rw_dgraph_build(const ir_graph *g) {
    rw_dgraph *dg = calloc(1, sizeof *dg);
    int *parent = NULL;
    if (!dg) return NULL;
    dg->n_values = g->n_values;
    dg->n_nodes = g->n_nodes;
    dg->voff = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    dg->roff = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    dg->loff = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    if (!dg->voff || !dg->roff || !dg->loff) goto fail;

    /* Links of every node, kept in one growing array. */
    size_t cap = 256, n_links = 0;
    dg->links = malloc(sizeof(ir_dimlink) * cap);
    if (!dg->links) goto fail;
    int nv = 0;
    for (int v = 0; v < g->n_values; v++) {
        dg->voff[v] = nv;
        nv += RW_DG_SLOTS * g->values[v].shape.rank;
    }
    dg->voff[g->n_values] = nv;
    int nr = nv;
    for (int i = 0; i < g->n_nodes; i++) {
        if (n_links + IR_MAX_DIMLINKS > cap) {
            while (n_links + IR_MAX_DIMLINKS > cap) cap *= 2;
            ir_dimlink *p = realloc(dg->links, sizeof(ir_dimlink) * cap);
            if (!p) goto fail;
            dg->links = p;
        }
        const ir_node *n = &g->nodes[i];
        int r = 0, cnt = ir_node_dims(g, n, dg->links + n_links);
        cnt = keep_links(g, n, dg->links + n_links, cnt, &r);
        dg->loff[i] = (int)n_links;
        n_links += (size_t)cnt;
        dg->roff[i] = nr;
        nr += RW_DG_SLOTS * r;
    }
    dg->loff[g->n_nodes] = (int)n_links;
    dg->roff[g->n_nodes] = nr;
    dg->n_vertices = nr;

    parent = malloc(sizeof(int) * (size_t)(nr ? nr : 1));
    dg->comp = malloc(sizeof(int) * (size_t)(nr ? nr : 1));
    dg->rsum = malloc((size_t)(nr - nv) + 1);
    if (!parent || !dg->comp || !dg->rsum) goto fail;
    for (int x = 0; x < nr; x++) parent[x] = x;
    memset(dg->rsum, 1, (size_t)(nr - nv) + 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int j = dg->loff[i]; j < dg->loff[i + 1]; j++) {
            const ir_dimlink *l = &dg->links[j];
            int vin = n->in[l->in], a = dg->voff[vin] + RW_DG_SLOTS * l->in_dim, b;
            int64_t la = g->values[vin].shape.dims[l->in_dim], lb = la;
            if (l->out_dim >= 0) {
                int vout = n->out[l->out];
                b = dg->voff[vout] + RW_DG_SLOTS * l->out_dim;
                lb = g->values[vout].shape.dims[l->out_dim];
            } else {
                b = dg->roff[i] + RW_DG_SLOTS * (-l->out_dim - 1);
                if (!(l->flags & IR_DIMLINK_SUM)) dg->rsum[b - nv] = dg->rsum[b + 1 - nv] = 0;
            }
            bool inner = l->flags & (IR_DIMLINK_IN_INNER | IR_DIMLINK_OUT_INNER);
            uf_union(parent, a + ((l->flags & IR_DIMLINK_IN_INNER) != 0),
                     b + ((l->flags & IR_DIMLINK_OUT_INNER) != 0));
            /* a dim linked whole to a dim of its length is the same dim, inner factor and all */
            if (!inner && la == lb) uf_union(parent, a + 1, b + 1);
        }
    }
    /* a component of inner vertices alone is the inner factor of dims that have none but
     * themselves (no reshape merged anything into them): it stands for nothing */
    unsigned char *real = calloc((size_t)nr + 1, 1);
    if (!real) goto fail;
    for (int x = 0; x < nr; x += RW_DG_SLOTS) real[uf_find(parent, x)] = 1;

    /* Deterministic numbering: the order nodes meet their vertices, then untouched values. */
    for (int x = 0; x < nr; x++) dg->comp[x] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0)
                for (int x = dg->voff[n->in[k]]; x < dg->voff[n->in[k] + 1]; x++)
                    number(dg, parent, real, x);
        for (int x = dg->roff[i]; x < dg->roff[i + 1]; x++) number(dg, parent, real, x);
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0)
                for (int x = dg->voff[n->out[k]]; x < dg->voff[n->out[k] + 1]; x++)
                    number(dg, parent, real, x);
    }
    for (int x = 0; x < nv; x++) number(dg, parent, real, x);
    free(real);
    /* comp[] held numbers at roots only; give every vertex its root's number (-1: none) */
    for (int x = 0; x < nr; x++) dg->comp[x] = dg->comp[uf_find(parent, x)];

    /* Lengths: the gcd of the component's dim lengths (a reshape links B to B*H when B is the
     * outer factor: n parts of B are n blocks of B*H, so any n dividing both splits both);
     * -1 unset; an empty dim sticks as 0 through `bad`. */
    dg->comp_len = malloc(sizeof(int64_t) * (size_t)(dg->n_comps ? dg->n_comps : 1));
    unsigned char *bad = calloc((size_t)dg->n_comps + 1, 1);
    if (!dg->comp_len || !bad) {
        free(bad);
        goto fail;
    }
    for (int c = 0; c < dg->n_comps; c++) dg->comp_len[c] = -1;
    for (int v = 0; v < g->n_values; v++)
        for (int x = dg->voff[v]; x < dg->voff[v + 1]; x++) {
            int c = dg->comp[x];
            int64_t len = g->values[v].shape.dims[(x - dg->voff[v]) / RW_DG_SLOTS];
            if (c < 0) continue;
            if (len <= 0)
                bad[c] = 1;
            else if (dg->comp_len[c] < 0)
                dg->comp_len[c] = len;
            else
                dg->comp_len[c] = gcd64(dg->comp_len[c], len);
        }
    for (int c = 0; c < dg->n_comps; c++)
        if (bad[c] || dg->comp_len[c] < 0) dg->comp_len[c] = 0;
    free(bad);
    free(parent);
    if (!build_inner_len(dg, g)) {
        rw_dgraph_free(dg);
        return NULL;
    }
    return dg;
fail:
    free(parent);
    rw_dgraph_free(dg);
    return NULL;
}

int rw_dgraph_n_components(const rw_dgraph *dg) {
    return dg->n_comps;
}

int rw_dgraph_value_comp(const rw_dgraph *dg, int v, int dim) {
    if (v < 0 || v >= dg->n_values || dim < 0 ||
        dim >= (dg->voff[v + 1] - dg->voff[v]) / RW_DG_SLOTS)
        return -1;
    return dg->comp[dg->voff[v] + RW_DG_SLOTS * dim];
}

int rw_dgraph_value_inner_comp(const rw_dgraph *dg, int v, int dim) {
    if (v < 0 || v >= dg->n_values || dim < 0 ||
        dim >= (dg->voff[v + 1] - dg->voff[v]) / RW_DG_SLOTS)
        return -1;
    return dg->comp[dg->voff[v] + RW_DG_SLOTS * dim + 1];
}

int64_t rw_dgraph_value_inner_len(const rw_dgraph *dg, int v, int dim) {
    if (v < 0 || v >= dg->n_values || dim < 0 ||
        dim >= (dg->voff[v + 1] - dg->voff[v]) / RW_DG_SLOTS)
        return 0;
    return dg->inner_len[dg->voff[v] / RW_DG_SLOTS + dim];
}

int rw_dgraph_reduce_comp(const rw_dgraph *dg, int node, int r) {
    if (node < 0 || node >= dg->n_nodes || r < 1 ||
        r > (dg->roff[node + 1] - dg->roff[node]) / RW_DG_SLOTS)
        return -1;
    return dg->comp[dg->roff[node] + RW_DG_SLOTS * (r - 1)];
}

int rw_dgraph_reduce_inner_comp(const rw_dgraph *dg, int node, int r) {
    if (node < 0 || node >= dg->n_nodes || r < 1 ||
        r > (dg->roff[node + 1] - dg->roff[node]) / RW_DG_SLOTS)
        return -1;
    return dg->comp[dg->roff[node] + RW_DG_SLOTS * (r - 1) + 1];
}

bool rw_dgraph_reduce_is_sum(const rw_dgraph *dg, int node, int r) {
    if (node < 0 || node >= dg->n_nodes || r < 1 ||
        r > (dg->roff[node + 1] - dg->roff[node]) / RW_DG_SLOTS)
        return false;
    return dg->rsum[dg->roff[node] + RW_DG_SLOTS * (r - 1) - dg->roff[0]] != 0;
}

int64_t rw_dgraph_comp_length(const rw_dgraph *dg, int comp) {
    return comp >= 0 && comp < dg->n_comps ? dg->comp_len[comp] : 0;
}

int rw_dgraph_value_dim_in(const rw_dgraph *dg, int v, int comp) {
    if (v < 0 || v >= dg->n_values || comp < 0) return -1;
    for (int x = dg->voff[v]; x < dg->voff[v + 1]; x++)
        if (dg->comp[x] == comp) return (x - dg->voff[v]) / RW_DG_SLOTS;
    return -1;
}

int rw_dgraph_reduce_in(const rw_dgraph *dg, int node, int comp) {
    if (node < 0 || node >= dg->n_nodes || comp < 0) return 0;
    for (int x = dg->roff[node]; x < dg->roff[node + 1]; x++)
        if (dg->comp[x] == comp) return (x - dg->roff[node]) / RW_DG_SLOTS + 1;
    return 0;
}
