/* rules-ftree.c - builds the fission hierarchy tree (F-Tree) of a graph: MAGIS Algorithm 1.
 *
 * For every component D of the dimension graph that can be split (length >= 2): G' = the nodes
 * with a vertex in D (an output dimension or a reduce axis), with the edges of g among them; its
 * dominator tree, heat and score, the dominators selected per score interval
 * (rules-ftree-dom.c); each gives S = T.des(v_dom) \ {v_dom}, kept when (S, D, 1) passes
 * rw_fission_check. Then:
 *  - identical S found in several components are kept once, in the component of the longest
 *    dimension (more split counts to try; the earlier component on a tie);
 *  - the parent of a candidate is the smallest candidate of the same component whose S strictly
 *    contains it (within a component the S are subtrees of one dominator tree, so they nest or
 *    are disjoint); candidates of different components are separate roots;
 *  - tree nodes are ordered by component, then by size of S descending (then first id), so a
 *    parent comes before its children.
 * The tree, its nodes and every S live in one allocation (rw_ftree_free frees it in one call).
 * Hot-spot bytes: sched_value_device_bytes of each hot-spot a node produces; hot-spots that are
 * residents (weights, graph inputs) belong to no G' and count nowhere.
 *
 * Two details MAGIS's tensor-level graph gets for free and a node-level graph must restore:
 *  - data inputs are vertices: in MAGIS every tensor is a vertex, so a data input read by several
 *    nodes (a transformer's Q, K, V projections and its residual all read x) dominates them all,
 *    and S = des(x) \ {x} is the whole batch-carrying graph (x sliced: gradient accumulation
 *    as a fission). The analysis runs on a copy of g where each data input is read through one
 *    Identity node that stands for it; that node is never part of an S. The loss's own inputs
 *    (IR_VF_LOSS: an mse target, cross-entropy labels) get none: as sources of G' they would
 *    make the virtual root the only dominator of the loss and of the whole backward, which
 *    reads them, so no S could hold a loss but the sum of the outputs. Like a weight, such an
 *    input is a resident an S reads from outside (and slices: it has the batch dimension).
 *  - generators are not entries: a node of G' that reads nothing carrying D (the backward's seed
 *    gradient, an Expand of the constant 1 to the loss input's shape) creates the dimension
 *    from constants. As a source of G' it would cut the forward off from the backward in the
 *    dominator tree, though it needs no input memory at all. In a training graph the seed
 *    logically follows the loss (it is d loss / d loss), so generators hang below the loss
 *    node in the dominator analysis; elsewhere below G''s only other source (the data input's
 *    stand-in) when there is one. An S below it takes them in like any other node (they are
 *    sliced with the part; rw_fission_check allows them). With the seed below the loss, the
 *    backward of layers k..L is dominated by the forward activation entering layer k: the
 *    suffixes (forward and backward of the last layers) that MAGIS's training-graph fissions
 *    split. */
#include "rules-ftree-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct ft_cand {
    size_t ids_off; /* into the id buffer (it grows, so no pointer yet) */
    int n_ids;
    uint32_t seed_id;
    int seed_out, seed_dim;
    int comp;
    int64_t len;
    double heat, score;
    int parent; /* candidate index */
    bool dropped;
} ft_cand;

typedef struct ft_build {
    ft_cand *c;
    int n;
    size_t cap;
    uint32_t *ids;
    size_t n_ids, cap_ids;
} ft_build;

/* p with room for need elements (doubling *cap), or NULL with p left allocated. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(p, nc * elem);
    if (q) *cap = nc;
    return q;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The seed vertex of D on node i: its first output dimension that is D as a whole dim (a seed
 * names a dim's own vertex, never its inner factor's), else such a reduce axis. */
static bool seed_at(const ir_graph *g, const rw_dgraph *dg, int i, int comp, ft_cand *c) {
    const ir_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->n_out; k++) {
        int v = nd->out[k];
        for (int dim = 0; v >= 0 && dim < g->values[v].shape.rank; dim++)
            if (rw_dgraph_value_comp(dg, v, dim) == comp) {
                c->seed_id = nd->id;
                c->seed_out = k;
                c->seed_dim = dim;
                return true;
            }
    }
    for (int r = 1, cr; (cr = rw_dgraph_reduce_comp(dg, i, r)) >= 0; r++)
        if (cr == comp) {
            c->seed_id = nd->id;
            c->seed_out = 0;
            c->seed_dim = -r;
            return true;
        }
    return false;
}

/* The seed of D in S (sub, m node indices): the first node that has one. */
static bool seed_of(const ir_graph *g, const rw_dgraph *dg, const int *sub, int m, int comp,
                    ft_cand *c) {
    for (int j = 0; j < m; j++)
        if (seed_at(g, dg, sub[j], comp, c)) return true;
    return false;
}

/* Per-build scratch: the generator flags of the component being analyzed, the loss node,
 * largest_piece's union-find. */
typedef struct ft_scratch {
    unsigned char *gen;
    int anchor;        /* the loss node of a training graph, -1 otherwise */
    int *piece, *size; /* largest_piece's union-find, -1 between calls */
} ft_scratch;

static bool scratch_init(ft_scratch *r, const ir_graph *g) {
    r->gen = calloc((size_t)g->n_nodes + 1, 1);
    r->piece = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    r->size = calloc((size_t)g->n_nodes + 1, sizeof(int));
    if (!r->gen || !r->piece || !r->size) return false;
    /* ir_build_training's graphs: output 0 is "loss"; the seed gradient d loss / d loss is a
     * generator that logically follows it */
    r->anchor = -1;
    if (g->n_outputs > 0 && strcmp(g->values[g->outputs[0]].name, "loss") == 0)
        r->anchor = g->values[g->outputs[0]].producer;
    for (int i = 0; i < g->n_nodes; i++) r->piece[i] = -1;
    return true;
}

static void scratch_free(ft_scratch *r) {
    free(r->gen);
    free(r->piece);
    free(r->size);
}

/* T.des(v_dom) \ {v_dom} may fall apart once v_dom is gone: a node that v_dom dominates but
 * that reads only v_dom's output and feeds nodes v_dom does not dominate (a LayerNorm's
 * gradient of (x - mean)^2, read where the gradients of x add up) hangs off S alone. Such
 * pieces are small and would make S fail constraint (1); the largest weakly connected piece is
 * kept (rw_fission_check still decides). sub (ascending node indices) is compacted in place;
 * returns its new count. */
static int largest_piece(const ir_graph *g, int *sub, int m, ft_scratch *sc) {
    if (m < 2) return m;
    int *root = sc->piece; /* per node index: union-find parent, -1 outside sub */
    for (int j = 0; j < m; j++) root[sub[j]] = sub[j];
    for (int j = 0; j < m; j++) {
        const ir_node *nd = &g->nodes[sub[j]];
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k] >= 0 ? g->values[nd->in[k]].producer : -1;
            if (p < 0 || root[p] < 0) continue;
            int a = sub[j], b = p;
            while (root[a] != a) a = root[a] = root[root[a]];
            while (root[b] != b) b = root[b] = root[root[b]];
            if (a != b) root[a > b ? a : b] = a < b ? a : b;
        }
    }
    int *size = sc->size, best = -1;
    for (int j = 0; j < m; j++) { /* flatten: every entry points at its root */
        int a = sub[j];
        while (root[a] != a) a = root[a];
        root[sub[j]] = a;
    }
    for (int j = 0; j < m; j++) size[root[sub[j]]] = 0;
    for (int j = 0; j < m; j++) {
        int a = root[sub[j]];
        if (++size[a] > (best < 0 ? 0 : size[best])) best = a;
    }
    int k = 0;
    for (int j = 0; j < m; j++) {
        int keep = root[sub[j]] == best;
        root[sub[j]] = -1;
        if (keep) sub[k++] = sub[j];
    }
    return k;
}

/* A node of G' that reads no value with a dimension in comp: it creates the dimension. */
static bool is_generator(const ir_graph *g, const rw_dgraph *dg, int i, int comp) {
    const ir_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k] >= 0 && rw_dgraph_value_dim_in(dg, nd->in[k], comp) >= 0) return false;
    return true;
}

/* Candidates of one component (Algorithm 1 lines 4-15). False when out of memory. */
static bool component_candidates(ft_build *b, const ir_graph *g, const rw_dgraph *dg, rw_ft_work *w,
                                 int comp, const int *nodes, int n, int L, const double *hot,
                                 const double *vbytes, int *sel, int *sub, ft_scratch *sc) {
    for (int i = 0; i < n; i++) sc->gen[nodes[i]] = is_generator(g, dg, nodes[i], comp);
    rw_ft_comp c;
    rw_ft_analyze(w, g, nodes, n, hot, vbytes, sc->gen, sc->anchor, &c);
    for (int i = 0; i < n; i++) sc->gen[nodes[i]] = 0;
    int k = rw_ft_select(w, &c, L, sel);
    for (int s = 0; s < k; s++) {
        int v = sel[s];
        int m = rw_ft_strict_subtree(&c, v, sub);
        m = largest_piece(g, sub, m, sc);
        if (m == 0) continue; /* a leaf dominates nothing */
        ft_cand cd = {.comp = comp,
                      .len = rw_dgraph_comp_length(dg, comp),
                      .heat = c.heat[v],
                      .score = c.score[v],
                      .parent = -1};
        if (!seed_of(g, dg, sub, m, comp, &cd)) continue;
        uint32_t *grown = grow(b->ids, &b->cap_ids, b->n_ids + (size_t)m, sizeof *b->ids);
        if (!grown) return false;
        b->ids = grown;
        uint32_t *ids = b->ids + b->n_ids;
        for (int j = 0; j < m; j++) ids[j] = g->nodes[sub[j]].id;
        qsort(ids, (size_t)m, sizeof *ids, cmp_u32);
        rw_fission f = {.ids = ids,
                        .n_ids = m,
                        .seed_id = cd.seed_id,
                        .seed_out = cd.seed_out,
                        .seed_dim = cd.seed_dim,
                        .parts = 1};
        ir_diag d = {{0}};
        if (rw_fission_check(g, dg, &f, &d) != IR_OK) continue; /* line 15: f is not valid */
        cd.ids_off = b->n_ids;
        cd.n_ids = m;
        ft_cand *more = grow(b->c, &b->cap, (size_t)b->n + 1, sizeof *b->c);
        if (!more) return false;
        b->c = more;
        b->c[b->n++] = cd;
        b->n_ids += (size_t)m;
    }
    return true;
}

static bool same_ids(const uint32_t *a, int na, const uint32_t *b, int nb) {
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

/* a is a subset of b (both sorted). */
static bool subset(const uint32_t *a, int na, const uint32_t *b, int nb) {
    int j = 0;
    for (int i = 0; i < na; i++) {
        while (j < nb && b[j] < a[i]) j++;
        if (j == nb || b[j] != a[i]) return false;
    }
    return true;
}

/* The order of the tree's nodes (qsort has no context argument, and builds may run on several
 * explorer threads at once, so the key is copied next to the index). */
typedef struct ft_key {
    int comp, n_ids;
    uint32_t first;
    int idx;
} ft_key;

static int cmp_key(const void *pa, const void *pb) {
    const ft_key *a = pa, *b = pb;
    if (a->comp != b->comp) return a->comp < b->comp ? -1 : 1;
    if (a->n_ids != b->n_ids) return a->n_ids > b->n_ids ? -1 : 1;
    return cmp_u32(&a->first, &b->first);
}

/* Dedupe, parents, order, and the one-allocation tree. */
static rw_ftree *assemble(ft_build *b) {
    ft_cand *c = b->c;
    for (int i = 0; i < b->n; i++)
        for (int j = i + 1; j < b->n && !c[i].dropped; j++) {
            if (c[j].dropped || c[i].comp == c[j].comp ||
                !same_ids(b->ids + c[i].ids_off, c[i].n_ids, b->ids + c[j].ids_off, c[j].n_ids))
                continue;
            if (c[j].len > c[i].len)
                c[i].dropped = true;
            else
                c[j].dropped = true;
        }
    int n = 0;
    size_t n_ids = 0;
    int *idx = malloc(((size_t)b->n + 1) * 2 * sizeof(int));
    ft_key *key = malloc(((size_t)b->n + 1) * sizeof *key);
    if (!idx || !key) {
        free(idx);
        free(key);
        return NULL;
    }
    int *pos = idx + b->n + 1;
    for (int i = 0; i < b->n; i++)
        if (!c[i].dropped) {
            idx[n++] = i;
            n_ids += (size_t)c[i].n_ids;
        }
    for (int a = 0; a < n; a++) {
        ft_cand *x = &c[idx[a]];
        for (int q = 0; q < n; q++) {
            ft_cand *y = &c[idx[q]];
            if (q == a || y->comp != x->comp || y->n_ids <= x->n_ids ||
                (x->parent >= 0 && c[x->parent].n_ids <= y->n_ids) ||
                !subset(b->ids + x->ids_off, x->n_ids, b->ids + y->ids_off, y->n_ids))
                continue;
            x->parent = idx[q];
        }
    }
    for (int a = 0; a < n; a++) {
        const ft_cand *x = &c[idx[a]];
        key[a] = (ft_key){
            .comp = x->comp, .n_ids = x->n_ids, .first = b->ids[x->ids_off], .idx = idx[a]};
    }
    qsort(key, (size_t)n, sizeof *key, cmp_key);
    for (int a = 0; a < n; a++) {
        idx[a] = key[a].idx;
        pos[idx[a]] = a;
    }
    free(key);

    size_t head = (sizeof(rw_ftree) + 15) & ~(size_t)15;
    size_t body = ((size_t)n * sizeof(rw_ftree_node) + 15) & ~(size_t)15;
    char *mem = malloc(head + body + n_ids * sizeof(uint32_t) + 1);
    if (!mem) {
        free(idx);
        return NULL;
    }
    rw_ftree *t = (rw_ftree *)mem;
    t->n = n;
    t->nodes = (rw_ftree_node *)(mem + head);
    uint32_t *ids = (uint32_t *)(mem + head + body);
    for (int a = 0; a < n; a++) {
        const ft_cand *x = &c[idx[a]];
        memcpy(ids, b->ids + x->ids_off, (size_t)x->n_ids * sizeof *ids);
        t->nodes[a] = (rw_ftree_node){.f = {.ids = ids,
                                            .n_ids = x->n_ids,
                                            .seed_id = x->seed_id,
                                            .seed_out = x->seed_out,
                                            .seed_dim = x->seed_dim,
                                            .parts = 1},
                                      .parent = x->parent >= 0 ? pos[x->parent] : -1,
                                      .dim_len = x->len,
                                      .heat = x->heat,
                                      .score = x->score,
                                      .comp = x->comp};
        IR_ASSERT(t->nodes[a].parent < a);
        ids += x->n_ids;
    }
    free(idx);
    return t;
}

/* A copy of g where each data input (a graph input that is neither a parameter nor constant)
 * is read through one Identity node standing for it (see the top of the file); the stand-ins
 * get fresh ids, so no S (ids of g) ever names one. NULL when out of memory. */
static ir_graph *with_input_stand_ins(const ir_graph *g) {
    ir_graph *h = ir_graph_clone(g);
    if (!h) return NULL;
    int nv = h->n_values;
    for (int v = 0; v < nv; v++) {
        unsigned f = h->values[v].flags;
        if (h->values[v].producer >= 0 || !(f & IR_VF_INPUT) ||
            (f & (IR_VF_PARAM | IR_VF_CONST | IR_VF_LOSS)))
            continue;
        bool read = false;
        for (int i = 0; i < h->n_nodes && !read; i++)
            for (int k = 0; k < h->nodes[i].n_in; k++) read |= h->nodes[i].in[k] == v;
        if (!read) continue;
        ir_shape sh = h->values[v].shape;
        int nvv = ir_graph_add_value(h, "magpie_ftree_input", h->values[v].dtype, &sh);
        if (nvv < 0) goto fail;
        int n_before = h->n_nodes;
        for (int i = 0; i < n_before; i++)
            for (int k = 0; k < h->nodes[i].n_in; k++)
                if (h->nodes[i].in[k] == v) h->nodes[i].in[k] = nvv;
        if (ir_graph_add_node(h, IR_OP_Identity, NULL, 1, &v, 1, &nvv, 0, NULL) < 0) goto fail;
    }
    /* the stand-ins go first (they read only graph inputs), so that the order, and with it the
     * analysis's local numbering, has them before the generators they are to precede */
    int k = h->n_nodes - g->n_nodes;
    if (k > 0) {
        ir_node *tmp = malloc(sizeof(ir_node) * (size_t)k);
        if (!tmp) goto fail;
        memcpy(tmp, h->nodes + g->n_nodes, sizeof(ir_node) * (size_t)k);
        memmove(h->nodes + k, h->nodes, sizeof(ir_node) * (size_t)g->n_nodes);
        memcpy(h->nodes, tmp, sizeof(ir_node) * (size_t)k);
        free(tmp);
        for (int i = 0; i < h->n_nodes; i++)
            for (int o = 0; o < h->nodes[i].n_out; o++)
                if (h->nodes[i].out[o] >= 0) h->values[h->nodes[i].out[o]].producer = i;
    }
    ir_diag d = {{0}};
    if (ir_graph_toposort(h, &d) != IR_OK) goto fail;
    return h;
fail:
    ir_graph_free(h);
    return NULL;
}

rw_ftree *rw_ftree_build(const ir_graph *g0, const sched_memory *m, int L) {
    IR_ASSERT(g0 && m);
    if (L <= 0) L = 4;
    rw_ftree *t = NULL;
    ft_build b = {0};
    ft_scratch sc = {0};
    ir_graph *g = with_input_stand_ins(g0);
    if (!g) return NULL;
    rw_dgraph *dg = rw_dgraph_build(g);
    rw_ft_work *w = rw_ft_work_new(g);
    int nn = g->n_nodes, nc = dg ? rw_dgraph_n_components(dg) : 0;
    size_t n_pairs = 0, cap_pairs = 0;
    int *comp_of = NULL, *node_of = NULL; /* (component, node) memberships */
    double *hot = calloc((size_t)nn + 1, sizeof *hot);
    double *vbytes = malloc(((size_t)g->n_values + 1) * sizeof *vbytes);
    int *start = calloc((size_t)nc + 2, sizeof *start);
    int *last = malloc(((size_t)nc + 1) * sizeof *last);
    int *members = NULL;
    int *sel = malloc(((size_t)nn + 1) * sizeof *sel);
    int *sub = malloc(((size_t)nn + 1) * sizeof *sub);
    if (!dg || !w || !hot || !vbytes || !start || !last || !sel || !sub || !scratch_init(&sc, g))
        goto out;

    for (int v = 0; v < g->n_values; v++)
        vbytes[v] = g->values[v].producer < 0 ? (double)ir_value_bytes(&g->values[v])
                                              : (double)sched_value_device_bytes(g, v);
    for (int h = 0; h < m->n_hotspots; h++) {
        int v = m->hotspots[h]; /* a value id of g0, the same in g */
        IR_ASSERT(v >= 0 && v < g0->n_values);
        if (g->values[v].producer >= 0)
            hot[g->values[v].producer] += (double)sched_value_device_bytes(g, v);
    }

    /* every node's components: its output dims' and its reduce axes' (sized in a first pass) */
    for (int i = 0; i < nn; i++) {
        const ir_node *nd = &g->nodes[i];
        ir_dimlink links[IR_MAX_DIMLINKS];
        int nl = ir_node_dims(g, nd, links), n_red = 0;
        for (int l = 0; l < nl; l++)
            if (-links[l].out_dim > n_red) n_red = -links[l].out_dim;
        sel[i] = n_red;                 /* sel is free until the components are analyzed */
        cap_pairs += 2 * (size_t)n_red; /* a reduce axis and its inner factor */
        for (int k = 0; k < nd->n_out; k++)
            if (nd->out[k] >= 0) cap_pairs += 2 * (size_t)g->values[nd->out[k]].shape.rank;
    }
    comp_of = malloc((cap_pairs + 1) * sizeof *comp_of);
    node_of = malloc((cap_pairs + 1) * sizeof *node_of);
    if (!comp_of || !node_of) goto out;
    for (int c = 0; c < nc; c++) last[c] = -1;
    for (int i = 0; i < nn; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_out; k++) {
            if (nd->out[k] < 0) continue;
            for (int x = 0; x < 2 * g->values[nd->out[k]].shape.rank; x++) {
                int c = x & 1 ? rw_dgraph_value_inner_comp(dg, nd->out[k], x / 2)
                              : rw_dgraph_value_comp(dg, nd->out[k], x / 2);
                if (c < 0 || last[c] == i) continue;
                last[c] = i;
                comp_of[n_pairs] = c;
                node_of[n_pairs++] = i;
            }
        }
        for (int x = 0; x < 2 * sel[i]; x++) {
            int c = x & 1 ? rw_dgraph_reduce_inner_comp(dg, i, x / 2 + 1)
                          : rw_dgraph_reduce_comp(dg, i, x / 2 + 1);
            if (c < 0 || last[c] == i) continue;
            last[c] = i;
            comp_of[n_pairs] = c;
            node_of[n_pairs++] = i;
        }
    }
    /* bucket by component; nodes stay ascending inside a bucket */
    members = malloc((n_pairs + 1) * sizeof *members);
    if (!members) goto out;
    for (size_t p = 0; p < n_pairs; p++) start[comp_of[p] + 1]++;
    for (int c = 0; c < nc; c++) start[c + 1] += start[c];
    for (int c = 0; c < nc; c++) last[c] = start[c];
    for (size_t p = 0; p < n_pairs; p++) members[last[comp_of[p]]++] = node_of[p];

    for (int c = 0; c < nc; c++) {
        int n = start[c + 1] - start[c];
        if (n < 2 || rw_dgraph_comp_length(dg, c) < 2) continue;
        if (!component_candidates(&b, g, dg, w, c, members + start[c], n, L, hot, vbytes, sel, sub,
                                  &sc))
            goto out;
    }
    /* the caller knows g0's D-graph, not the stand-in copy's: renumber by the seed vertex */
    rw_dgraph *dg0 = b.n ? rw_dgraph_build(g0) : NULL;
    if (b.n && !dg0) goto out;
    for (int i = 0; i < b.n; i++) {
        int at = -1;
        for (int j = 0; j < g0->n_nodes && at < 0; j++)
            if (g0->nodes[j].id == b.c[i].seed_id) at = j;
        IR_ASSERT(at >= 0); /* seeds are nodes of S, never stand-ins */
        b.c[i].comp =
            b.c[i].seed_dim >= 0
                ? rw_dgraph_value_comp(dg0, g0->nodes[at].out[b.c[i].seed_out], b.c[i].seed_dim)
                : rw_dgraph_reduce_comp(dg0, at, -b.c[i].seed_dim);
    }
    rw_dgraph_free(dg0);
    t = assemble(&b);
out:
    free(b.c);
    free(b.ids);
    free(comp_of);
    free(node_of);
    free(members);
    free(hot);
    free(vbytes);
    free(start);
    free(last);
    free(sel);
    free(sub);
    rw_ft_work_free(w);
    rw_dgraph_free(dg);
    scratch_free(&sc);
    ir_graph_free(g);
    return t;
}

void rw_ftree_free(rw_ftree *t) {
    free(t);
}
