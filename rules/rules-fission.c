/* rules-fission.c - the validity of a fission f = (S, D, n) (MAGIS 4.2; rules.h,
 * rw_fission_check). rules-fission-apply.c builds the one-copy graph on what this finds, and
 * rules-fission-mat.c materializes it.
 *
 * The checks, in the order their violations are reported:
 *  - f itself: ids sorted and present, the seed vertex exists, D's dims agree in length and n
 *    divides it;
 *  - every node of S can be split: known to the op table, not random, not in place, not a
 *    fission op, not already part of a fission group;
 *  - swaps are whole: a Store of S has every reader (its Loads) in S and a Load of S has its
 *    Store there, so a host value never crosses the border (each part swaps its own slice; a
 *    slice or an assemble of a host value would need device memory it does not have);
 *  - no redundant computation (constraint 3): each node has, in D, exactly one dimension per
 *    output and no reduce axis (a "split" node), or exactly one reduce axis, which is a sum, and
 *    at most one dimension per output (a "partial" node, e.g. a weight gradient summed over the
 *    batch; its outputs without the dimension are summed over the parts, those with it are
 *    concatenated, as MAGIS 4.2 treats each output tensor on its own: LayerNormGrad's dX and
 *    dScale);
 *  - every edge is linked in D: each value of S read in S has a D-dimension and its reader links
 *    that dimension; so does each input of S that has a D-dimension (it will be sliced, and a
 *    reader that does not link it would get a part where it expects the whole);
 *  - every node of S reads at least one value split along D, or none at all: a generator, which
 *    creates the dimension from shared values (the backward's seed gradient, an Expand of a
 *    constant). Every part starts at a slice, and the group's first step is its first slice
 *    (schedule.h): generators and what depends only on them read nothing from outside the
 *    group that the slices do not also wait for, so the materialized graph can run the other
 *    parts there (rules-fission-mat.c);
 *  - a border value (an input S slices, an output it assembles) with D as the inner factor of a
 *    dim only is a strided split: the factor's length is known and n divides it;
 *  - G[S] weakly connected (1) and convex (2).
 * Before the checks, S gains its replicas (add_replicas): layout copies of residents that only S
 * reads, recomputed by each part; they are exempt from the per-node rule of (3) and their
 * outputs from the edge rule, having no D-dimension by construction.
 * Everything is O(|V| + |E|) over the graph (an id map, one sweep over the nodes between S's
 * first and last) plus O(links of S). */
#include "rules-impl.h"

#include <stdlib.h>
#include <string.h>

bool rw_is_fission_op(ir_op_kind op) {
    return op == IR_OP_FissionBuffer || op == IR_OP_FissionSlice || op == IR_OP_FissionAssemble ||
           op == IR_OP_FissionAccumulate;
}

void rw_fission_info_free(rw_fission_info *fi) {
    if (!fi) return;
    free(fi->s);
    free(fi->in_s);
    free(fi->replica);
    fi->s = NULL;
    fi->in_s = NULL;
    fi->replica = NULL;
    fi->n_s = 0;
}

/* The number of dims of value v in comp, whole or by their inner factor (a value may, in a
 * degenerate D, have several). */
static int dims_in(const rw_dgraph *dg, int v, int comp, int *first) {
    int cnt = 0;
    *first = -1;
    for (int x = dg->voff[v]; x < dg->voff[v + 1]; x += RW_DG_SLOTS)
        if (dg->comp[x] == comp || dg->comp[x + 1] == comp) {
            if (cnt++ == 0) *first = (x - dg->voff[v]) / RW_DG_SLOTS;
        }
    return cnt;
}

/* True when comp is value v's dim `dim` by its inner factor only (a strided split of it). */
static bool inner_only(const rw_dgraph *dg, int v, int dim, int comp) {
    int x = dg->voff[v] + RW_DG_SLOTS * dim;
    return dg->comp[x] != comp && dg->comp[x + 1] == comp;
}

/* True when node i links dimension dim of its input k (to anything). */
static bool links_input(const rw_dgraph *dg, int i, int k, int dim) {
    for (int j = dg->loff[i]; j < dg->loff[i + 1]; j++)
        if (dg->links[j].in == k && dg->links[j].in_dim == dim) return true;
    return false;
}

/* The component the seed vertex names, or -1 with d set. */
static int seed_comp(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f, const int *map,
                     ir_diag *d) {
    int i = f->seed_id < g->next_node_id ? map[f->seed_id] : -1;
    if (i < 0) {
        ir_diag_set(d, IR_ERR_INVALID, "fission: no seed node with id %u", f->seed_id);
        return -1;
    }
    const ir_node *n = &g->nodes[i];
    int c;
    if (f->seed_dim >= 0) {
        int v = f->seed_out >= 0 && f->seed_out < n->n_out ? n->out[f->seed_out] : -1;
        c = v >= 0 ? rw_dgraph_value_comp(dg, v, f->seed_dim) : -1;
        if (c < 0)
            ir_node_fail(d, IR_ERR_INVALID, n,
                         "fission: the seed names no dimension %d of output %d", f->seed_dim,
                         f->seed_out);
    } else {
        c = rw_dgraph_reduce_comp(dg, i, -f->seed_dim);
        if (c < 0)
            ir_node_fail(d, IR_ERR_INVALID, n, "fission: the seed names no reduce axis %d",
                         -f->seed_dim);
    }
    return c;
}

/* Per node: can it be split at all (op kind), and does D split it without redundancy. */
static ir_status check_node(const ir_graph *g, const rw_dgraph *dg, int i, int comp, ir_diag *d) {
    const ir_node *n = &g->nodes[i];
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->kernel)
        return ir_node_fail(d, IR_ERR_INVALID, n, "fission: an op of unknown semantics");
    if (rw_is_fission_op(n->op) || ir_attr_find(n, RW_FISSION_GROUP_ATTR))
        return ir_node_fail(d, IR_ERR_INVALID, n, "fission: already part of a fission");
    if (ir_node_draws_random(g, n))
        return ir_node_fail(d, IR_ERR_INVALID, n, "fission: a random op (parts would draw anew)");
    if (def->flags & IR_OPF_INPLACE)
        return ir_node_fail(d, IR_ERR_INVALID, n, "fission: an in-place update");
    if (rw_bn_batch_stats(n)) {
        /* The reason a user needs (inspect --fission): the generic ones below would say "no
         * dimension in D" or "outputs with and without", which names no cause. Only the message
         * differs: check_edges refuses an input split along a dim that the node does not link. */
        int first_x = n->op == IR_OP_BatchNormGrad ? 1 : 0;
        for (int k = 0; k <= first_x; k++) {
            int v = n->in[k], dim;
            if (v < 0 || dims_in(dg, v, comp, &dim) == 0 || dim == 1) continue;
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: %s batch norm in training mode, whose batch statistics "
                                "are a reduction over D (dim %d of '%s'): no part can compute "
                                "them alone",
                                n->op == IR_OP_BatchNormGrad ? "the backward of a" : "a", dim,
                                g->values[v].name);
        }
    }
    int with = 0, without = 0;
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k], dim;
        if (v < 0) continue;
        int cnt = dims_in(dg, v, comp, &dim);
        if (cnt > 1)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: output '%s' has %d dimensions in D (dims %d and more)",
                                g->values[v].name, cnt, dim);
        if (cnt)
            with++;
        else
            without++;
    }
    int nr = 0, r = 0;
    for (int x = dg->roff[i]; x < dg->roff[i + 1]; x += RW_DG_SLOTS)
        if (dg->comp[x] == comp || dg->comp[x + 1] == comp) {
            nr++;
            r = (x - dg->roff[i]) / RW_DG_SLOTS + 1;
        }
    if (with && !without && nr == 0) return IR_OK; /* split node */
    if (without &&
        nr == 1) { /* partial node, or mixed: a LayerNormGrad's dX split, dScale summed */
        if (!rw_dgraph_reduce_is_sum(dg, i, r))
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: D is its reduce axis %d, which is not a sum", r);
        return IR_OK;
    }
    if (with && without)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "fission: %d of its outputs have a dimension in D, %d do not", with,
                            without);
    if (nr > 1 || (with && nr))
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "fission: D meets it %d times (redundant computation)", with + nr);
    return ir_node_fail(d, IR_ERR_INVALID, n, "fission: has no dimension and no reduce axis in D");
}

/* Edges: every value read in S that has a D-dimension is linked there by its reader; a value of
 * S read in S must have one; and every node reads at least one such value. */
static ir_status check_edges(const ir_graph *g, const rw_dgraph *dg, int i, int comp,
                             const unsigned char *in_s, const unsigned char *replica, ir_diag *d) {
    const ir_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k], dim;
        if (v < 0) continue;
        int p = g->values[v].producer;
        int cnt = dims_in(dg, v, comp, &dim);
        bool inner = p >= 0 && in_s[p];
        if (inner && cnt == 0 && !replica[p])
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: edge from '%s' is not linked in D ('%s' has no "
                                "dimension in D)",
                                g->nodes[p].name, g->values[v].name);
        if (cnt == 0) continue;
        if (cnt > 1)
            return ir_node_fail(d, IR_ERR_INVALID, n, "fission: input '%s' has %d dimensions in D",
                                g->values[v].name, cnt);
        if (!links_input(dg, i, k, dim))
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: %s '%s' is split along its dim %d, which this node does "
                                "not link",
                                inner ? "edge value" : "input", g->values[v].name, dim);
    }
    return IR_OK; /* a node reading no split value is a generator (see the top) */
}

/* Host values stay inside S or outside it (see the top): one pass over the readers. */
static ir_status check_swaps(const ir_graph *g, const rw_fission_info *fi, ir_diag *d) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], p = v >= 0 ? g->values[v].producer : -1;
            if (p < 0 || !ir_value_on_host(g, v) || fi->in_s[p] == fi->in_s[i]) continue;
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "fission: the host value '%s' crosses the border of S (its Store "
                                "and this reader are on different sides)",
                                g->values[v].name);
        }
    }
    return IR_OK;
}

/* Some value produced outside S and read in S has a dimension in D: the group gets a slice. */
static bool slices_something(const ir_graph *g, const rw_dgraph *dg, const rw_fission_info *fi) {
    for (int j = 0; j < fi->n_s; j++) {
        const ir_node *n = &g->nodes[fi->s[j]];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], dim, p = v >= 0 ? g->values[v].producer : -1;
            if (v >= 0 && !(p >= 0 && fi->in_s[p]) && dims_in(dg, v, fi->comp, &dim) > 0)
                return true;
        }
    }
    return false;
}

/* A border value v split along the inner factor of its dim `dim` (B in [S*B, E]: rows b, b + B,
 * ...): rw_fission_apply views the dim as [len / K, K] (K the inner factor's length), slices or
 * assembles K's axis and views the part back, so K must be known, and n must divide it. */
static ir_status check_strided(const ir_graph *g, const rw_dgraph *dg, const ir_node *n, int v,
                               int dim, int parts, const char *what, ir_diag *d) {
    int64_t k = rw_dgraph_value_inner_len(dg, v, dim);
    if (k <= 0)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "fission: %s '%s' is split along the inner factor of its dim %d, "
                            "whose length %s",
                            what, g->values[v].name, dim,
                            k < 0 ? "two reshapes give differently" : "no reshape names");
    if (k % parts)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "fission: %d parts do not divide %lld, the inner factor of dim %d of "
                            "%s '%s' (a strided split)",
                            parts, (long long)k, dim, what, g->values[v].name);
    if (g->values[v].shape.rank >= IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "fission: %s '%s' has rank %d: no room to expose the inner factor of "
                            "its dim %d",
                            what, g->values[v].name, g->values[v].shape.rank, dim);
    return IR_OK;
}

/* S's border values (inputs it slices, outputs it assembles) with D as the inner factor of a dim
 * only: strided parts, which rw_fission_apply cuts through a view that exposes the factor
 * (check_strided). Inside S such a dim is divided like any other (each op that keeps S*B whole
 * computes the part's rows apart). */
static ir_status check_border(const ir_graph *g, const rw_dgraph *dg, const rw_fission_info *fi,
                              int parts, ir_diag *d) {
    ir_status st;
    for (int j = 0; j < fi->n_s; j++) {
        const ir_node *n = &g->nodes[fi->s[j]];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], dim, p = v >= 0 ? g->values[v].producer : -1;
            if (v < 0 || (p >= 0 && fi->in_s[p]) || dims_in(dg, v, fi->comp, &dim) == 0) continue;
            if (inner_only(dg, v, dim, fi->comp) &&
                (st = check_strided(g, dg, n, v, dim, parts, "input", d)) != IR_OK)
                return st;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) { /* outputs of S read outside it, or graph outputs */
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < (fi->in_s[i] ? n->n_out : n->n_in); k++) {
            int v = fi->in_s[i] ? n->out[k] : n->in[k], dim;
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p < 0 || !fi->in_s[p] || (fi->in_s[i] && !(g->values[v].flags & IR_VF_OUTPUT)))
                continue;
            if (dims_in(dg, v, fi->comp, &dim) == 0 || !inner_only(dg, v, dim, fi->comp)) continue;
            if ((st = check_strided(g, dg, &g->nodes[p], v, dim, parts, "output", d)) != IR_OK)
                return st;
        }
    }
    return IR_OK;
}

/* Constraint (1): G[S] weakly connected, by union-find over S's inner edges. */
static ir_status check_connected(const ir_graph *g, const rw_fission_info *fi, ir_diag *d) {
    int *parent = malloc(sizeof(int) * (size_t)g->n_nodes);
    if (!parent) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory checking a fission");
    for (int j = 0; j < fi->n_s; j++) parent[fi->s[j]] = fi->s[j];
    for (int j = 0; j < fi->n_s; j++) {
        const ir_node *n = &g->nodes[fi->s[j]];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p < 0 || !fi->in_s[p]) continue;
            int a = fi->s[j], b = p;
            while (parent[a] != a) a = parent[a] = parent[parent[a]];
            while (parent[b] != b) b = parent[b] = parent[parent[b]];
            if (a != b) parent[a > b ? a : b] = a < b ? a : b;
        }
    }
    int root = fi->s[0];
    ir_status st = IR_OK;
    for (int j = 1; j < fi->n_s && st == IR_OK; j++) {
        int a = fi->s[j];
        while (parent[a] != a) a = parent[a];
        if (a != root)
            st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[fi->s[j]],
                              "fission: S is not connected (this node is apart from '%s')",
                              g->nodes[root].name);
    }
    free(parent);
    return st;
}

/* Constraint (2): no node outside S is both a descendant and an ancestor of S. Nodes are in
 * topological order, so such a node lies strictly between S's first and last node, and one
 * forward sweep (descendants) and one backward sweep (ancestors) over that range decide it. */
static ir_status check_convex(const ir_graph *g, const rw_fission_info *fi, ir_diag *d) {
    int lo = fi->s[0], hi = fi->s[fi->n_s - 1];
    unsigned char *desc = calloc((size_t)g->n_nodes, 1), *anc = calloc((size_t)g->n_nodes, 1);
    ir_status st = IR_OK;
    if (!desc || !anc) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory checking a fission");
        goto out;
    }
    for (int i = lo + 1; i < hi; i++) {
        if (fi->in_s[i]) continue;
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in && !desc[i]; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p >= 0 && (fi->in_s[p] || desc[p])) desc[i] = 1;
        }
    }
    for (int i = hi; i > lo; i--) {
        if (!fi->in_s[i] && !anc[i]) continue;
        if (!fi->in_s[i] && desc[i]) {
            st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[i],
                              "fission: S is not convex (a path leaves S through this node and "
                              "comes back)");
            goto out;
        }
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p > lo && !fi->in_s[p]) anc[p] = 1;
        }
    }
out:
    free(desc);
    free(anc);
    return st;
}

/* Ops that only copy or re-lay-out their input: recomputing one costs a pass over its bytes. */
static bool layout_op(ir_op_kind op) {
    return op == IR_OP_Transpose || op == IR_OP_Reshape || op == IR_OP_Flatten ||
           op == IR_OP_Squeeze || op == IR_OP_Unsqueeze || op == IR_OP_Identity || op == IR_OP_Cast;
}

/* S's replicas: a layout op outside S that reads only residents without a D-dimension and whose
 * every output, none with a D-dimension and none a graph output, is read in S and nowhere else
 * (a weight's Transpose before a Linear layer's MatMul, as PyTorch exports it when the weights
 * are graph inputs). Left outside, such a value is a shared input of the group: computed before
 * the first part and held through all n of them, so at every part's peak (a transposed copy of
 * every weight: 0.34 GB of ViT-B/16's 2-part training plan). As a replica it joins S and each
 * part recomputes it, holding it only from there to its last reader in the part, for n - 1 more
 * passes over a weight-sized tensor. Its parts compute the same bytes from the same residents:
 * the one exception to constraint (3), a deliberate recomputation like a remat's. Marks them in
 * fi->in_s and fi->replica; O(|V| + |E|). */
static void add_replicas(const ir_graph *g, const rw_dgraph *dg, rw_fission_info *fi) {
    unsigned char *mark = fi->replica; /* 1: a candidate, 3: one read in S, 0: not (or no more) */
    int dim;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (fi->in_s[i] || !layout_op(n->op) || ir_attr_find(n, RW_FISSION_GROUP_ATTR) ||
            rw_dgraph_reduce_in(dg, i, fi->comp) > 0)
            continue;
        bool ok = n->n_out > 0;
        for (int k = 0; k < n->n_in && ok; k++) {
            int v = n->in[k];
            ok = v < 0 || (g->values[v].producer < 0 && dims_in(dg, v, fi->comp, &dim) == 0);
        }
        for (int k = 0; k < n->n_out && ok; k++) {
            int v = n->out[k];
            ok = v < 0 ||
                 (!(g->values[v].flags & IR_VF_OUTPUT) && dims_in(dg, v, fi->comp, &dim) == 0);
        }
        mark[i] = ok;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p >= 0 && mark[p]) mark[p] = fi->in_s[i] ? 3 : 0;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        mark[i] = mark[i] == 3;
        if (mark[i]) fi->in_s[i] = 1;
    }
}

ir_status rw_fission_analyze(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f,
                             rw_fission_info *fi, ir_diag *d) {
    memset(fi, 0, sizeof *fi);
    fi->comp = -1;
    IR_ASSERT(dg->n_nodes == g->n_nodes && dg->n_values == g->n_values);
    if (!f->ids || f->n_ids < 1) return ir_diag_set(d, IR_ERR_INVALID, "fission: S is empty");
    if (f->parts < 1) return ir_diag_set(d, IR_ERR_INVALID, "fission: %d parts", f->parts);
    for (int j = 1; j < f->n_ids; j++)
        if (f->ids[j] <= f->ids[j - 1])
            return ir_diag_set(d, IR_ERR_INVALID,
                               "fission: ids of S not sorted ascending (%u after %u)", f->ids[j],
                               f->ids[j - 1]);
    int *map = rw_id_index(g);
    fi->s = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    fi->in_s = calloc((size_t)g->n_nodes + 1, 1);
    fi->replica = calloc((size_t)g->n_nodes + 1, 1);
    ir_status st = IR_OK;
    if (!map || !fi->s || !fi->in_s || !fi->replica) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory checking a fission");
        goto out;
    }
    for (int j = 0; j < f->n_ids; j++) {
        int i = f->ids[j] < g->next_node_id ? map[f->ids[j]] : -1;
        if (i < 0) {
            st = ir_diag_set(d, IR_ERR_INVALID, "fission: no node with id %u in S", f->ids[j]);
            goto out;
        }
        fi->in_s[i] = 1;
    }
    if ((fi->comp = seed_comp(g, dg, f, map, d)) < 0) {
        st = IR_ERR_INVALID;
        goto out;
    }
    add_replicas(g, dg, fi);
    for (int i = 0; i < g->n_nodes; i++)
        if (fi->in_s[i]) fi->s[fi->n_s++] = i;
    fi->len = rw_dgraph_comp_length(dg, fi->comp);
    if (fi->len <= 0) {
        st = ir_diag_set(d, IR_ERR_INVALID,
                         "fission: the dimensions of D differ in length (or D has none)");
        goto out;
    }
    if (fi->len % f->parts) {
        st = ir_diag_set(d, IR_ERR_INVALID, "fission: %d parts do not divide D's length %lld",
                         f->parts, (long long)fi->len);
        goto out;
    }
    for (int j = 0; j < fi->n_s && st == IR_OK; j++)
        if (!fi->replica[fi->s[j]]) st = check_node(g, dg, fi->s[j], fi->comp, d);
    for (int j = 0; j < fi->n_s && st == IR_OK; j++)
        st = check_edges(g, dg, fi->s[j], fi->comp, fi->in_s, fi->replica, d);
    if (st == IR_OK) st = check_swaps(g, fi, d);
    if (st == IR_OK) st = check_border(g, dg, fi, f->parts, d);
    if (st == IR_OK && !slices_something(g, dg, fi))
        st = ir_diag_set(d, IR_ERR_INVALID,
                         "fission: S reads no input split along D (its parts would be identical)");
    if (st == IR_OK) st = check_connected(g, fi, d);
    if (st == IR_OK) st = check_convex(g, fi, d);
out:
    free(map);
    return st;
}

int rw_fission_break_at(const ir_graph *g, const rw_dgraph *dg, int comp, int from, ir_diag *d) {
    IR_ASSERT(dg->n_nodes == g->n_nodes && dg->n_values == g->n_values);
    unsigned char *reached = calloc((size_t)g->n_nodes + 1, 1);
    unsigned char *none = calloc((size_t)g->n_nodes + 1, 1); /* no replicas: S is all of D */
    int found = -1, dim;
    if (!reached || !none) {
        found = -2;
        goto out;
    }
    /* D's nodes (a vertex in D) and its readers: the S a whole-graph fission along D needs */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool r = rw_dgraph_reduce_in(dg, i, comp) > 0;
        for (int k = 0; k < n->n_in && !r; k++)
            r = n->in[k] >= 0 && dims_in(dg, n->in[k], comp, &dim) > 0;
        for (int k = 0; k < n->n_out && !r; k++)
            r = n->out[k] >= 0 && dims_in(dg, n->out[k], comp, &dim) > 0;
        reached[i] = r;
    }
    for (int i = from < 0 ? 0 : from; i < g->n_nodes && found < 0; i++) {
        if (!reached[i]) continue;
        if (check_node(g, dg, i, comp, d) != IR_OK ||
            check_edges(g, dg, i, comp, reached, none, d) != IR_OK)
            found = i;
    }
out:
    free(reached);
    free(none);
    return found;
}

ir_status rw_fission_check(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f,
                           ir_diag *d) {
    rw_fission_info fi;
    ir_status st = rw_fission_analyze(g, dg, f, &fi, d);
    rw_fission_info_free(&fi);
    return st;
}

int rw_fission_closure(const ir_graph *g, const rw_fission *f, uint32_t **out) {
    *out = NULL;
    int *map = rw_id_index(g);
    unsigned char *mark = calloc((size_t)g->n_nodes + 1, 1); /* 1: S, 2: below S, 4: above S */
    int lo = g->n_nodes, hi = -1, n = -1;
    if (!map || !mark) goto out;
    for (int j = 0; j < f->n_ids; j++) {
        if (f->ids[j] >= g->next_node_id) goto out;
        int i = map[f->ids[j]];
        if (i < 0) continue; /* removed by a rewrite since (a view a swap left unread) */
        mark[i] = 1;
        lo = i < lo ? i : lo;
        hi = i > hi ? i : hi;
    }
    /* nodes array is topological: a path between two nodes of S stays within [lo, hi] */
    for (int i = lo + 1; i < hi; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in && !(mark[i] & 3); k++) {
            int p = nd->in[k] >= 0 ? g->values[nd->in[k]].producer : -1;
            if (p >= lo && (mark[p] & 3)) mark[i] |= 2;
        }
    }
    for (int i = hi; i >= lo; i--) {
        if (!(mark[i] & 5)) continue;
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k] >= 0 ? g->values[nd->in[k]].producer : -1;
            if (p >= lo) mark[p] |= 4;
        }
    }
    n = 0;
    for (int i = lo; i <= hi; i++) n += (mark[i] & 1) || (mark[i] & 6) == 6;
    if (!(*out = malloc(sizeof(uint32_t) * ((size_t)n + 1)))) {
        n = -1;
        goto out;
    }
    n = 0;
    for (int i = lo; i <= hi; i++)
        if ((mark[i] & 1) || (mark[i] & 6) == 6) (*out)[n++] = g->nodes[i].id;
    qsort(*out, (size_t)n, sizeof **out, rw_cmp_u32);
out:
    free(map);
    free(mark);
    return n;
}
