/* rules-sched.c - the schedule-based rules of MAGIS section 5.2 (rematerialize, de-rematerialize,
 * swap, de-swap) as rewrites of graph values, and their candidates under heuristic H2 (remat and
 * swap only around memory hot-spots).
 *
 * Invariants: rw_apply edits a clone, never its input; nodes are found by stable id; after an
 * edit the graph is re-sorted (stable, so untouched nodes keep their relative order), new nodes
 * are shape-inferred, removed nodes take their output values with them (value ids are compacted,
 * node ids never change), and the result is validated before it is returned. */
#include "rules-impl.h" /* rules.h, and rw_subst_apply */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rw_kind_name(int kind) {
    static const char *const names[RW_KIND_COUNT] = {
        "remat",   "deremat",    "swap",      "deswap", "subst",      "ft-enable",
        "ft-lift", "ft-disable", "ft-mutate", "pet",    "remat-chain"};
    return kind >= 0 && kind < RW_KIND_COUNT ? names[kind] : "?";
}

bool rw_is_ftree_kind(int kind) {
    return kind == RW_FT_ENABLE || kind == RW_FT_LIFT || kind == RW_FT_DISABLE ||
           kind == RW_FT_MUTATE;
}

/* ---------------------------------------------------------------- helpers */

static bool node_reads(const ir_node *n, int v) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == v) return true;
    return false;
}

static void replace_input(ir_node *n, int from, int to) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == from) n->in[k] = to;
}

/* True when a node other than skip (an index, -1 for none) reads v, or v is a graph output. */
static bool value_used(const ir_graph *g, int v, int skip) {
    if (g->values[v].flags & IR_VF_OUTPUT) return true;
    for (int i = 0; i < g->n_nodes; i++)
        if (i != skip && node_reads(&g->nodes[i], v)) return true;
    return false;
}

/* Ops whose recomputation gives the same bytes and that may be duplicated or merged: not random
 * (Dropout), not in-place updates, not host-output (Store), and known to the op table. */
static bool recomputable(const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    return def && def->kernel &&
           !(def->flags & (IR_OPF_RANDOM | IR_OPF_INPLACE | IR_OPF_HOST_OUTPUT));
}

static bool attr_equal(const ir_attr *a, const ir_attr *b) {
    if (a->type != b->type || strcmp(a->name, b->name) != 0) return false;
    switch (a->type) {
    case IR_ATTR_INT: return a->i == b->i;
    case IR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case IR_ATTR_STRING: return strcmp(a->s ? a->s : "", b->s ? b->s : "") == 0;
    case IR_ATTR_INTS:
        return a->n == b->n && (!a->n || memcmp(a->ints, b->ints, sizeof(int64_t) * a->n) == 0);
    case IR_ATTR_FLOATS:
        return a->n == b->n && (!a->n || memcmp(a->floats, b->floats, sizeof(float) * a->n) == 0);
    case IR_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->strings[i], b->strings[i]) != 0) return false;
        return true;
    case IR_ATTR_TENSOR:
        if (a->t_dtype != b->t_dtype || !ir_shape_eq(&a->t_shape, &b->t_shape)) return false;
        if (a->t_blob == b->t_blob) return true;
        if (!a->t_blob || !b->t_blob || ir_blob_bytes(a->t_blob) != ir_blob_bytes(b->t_blob))
            return false;
        return memcmp(ir_blob_data(a->t_blob), ir_blob_data(b->t_blob), ir_blob_bytes(a->t_blob)) ==
               0;
    }
    return false;
}

/* Same op, attributes (in any order) and inputs, and the same outputs present: two such nodes
 * compute the same bytes (for recomputable ops). */
static bool mergeable(const ir_node *a, const ir_node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->n_attrs != b->n_attrs)
        return false;
    if (!recomputable(a)) return false;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k] != b->in[k]) return false;
    for (int k = 0; k < a->n_out; k++)
        if ((a->out[k] < 0) != (b->out[k] < 0)) return false;
    for (int i = 0; i < a->n_attrs; i++) {
        int j = 0;
        while (j < b->n_attrs && strcmp(a->attrs[i].name, b->attrs[j].name) != 0) j++;
        if (j == b->n_attrs || !attr_equal(&a->attrs[i], &b->attrs[j])) return false;
    }
    return true;
}

static bool any_graph_output(const ir_graph *g, const ir_node *n) {
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && (g->values[n->out[k]].flags & IR_VF_OUTPUT)) return true;
    return false;
}

/* Removes the nodes dead[i] != 0, their output values (nobody may read them any more) and the
 * constants only they read (a Reshape's shape), as the importer drops them from a written plan. */
static ir_status remove_nodes(ir_graph *g, const unsigned char *dead, ir_diag *d) {
    unsigned char *vdead = calloc((size_t)g->n_values + 1, 1),
                  *read = calloc((size_t)g->n_values + 1, 1);
    if (!vdead || !read) {
        free(vdead);
        free(read);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory removing nodes");
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in && !dead[i]; k++)
            if (g->nodes[i].in[k] >= 0) read[g->nodes[i].in[k]] = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (!dead[i]) continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) vdead[n->out[k]] = 1;
        rw_mark_unread_constants(g, n, read, vdead);
    }
    ir_status st = rw_remove(g, dead, vdead, d);
    free(vdead);
    free(read);
    return st;
}

/* A fresh value named after v with suffix and the new node's id (names stay unique). */
static int fresh_value(ir_graph *g, int v, const char *suffix, uint32_t id) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s%u", g->values[v].name, suffix, id);
    ir_shape shape = g->values[v].shape; /* adding a value may move g->values */
    return ir_graph_add_value(g, name, g->values[v].dtype, &shape);
}

/* Adds a node named after base (suffix and its id) and infers its outputs. */
static ir_status add_node(ir_graph *g, ir_op_kind op, const char *base, const char *suffix,
                          int n_in, const int *in, int n_out, const int *out, int n_attrs,
                          const ir_attr *attrs, ir_diag *d) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s%u", base, suffix, g->next_node_id);
    int ni = ir_graph_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    if (ni < 0) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory adding node '%s'", name);
    return ir_node_infer(g, &g->nodes[ni], d);
}

/* Sorts, re-checks and validates the edited graph. */
static ir_status finish(ir_graph *g, ir_diag *d) {
    ir_status st = ir_graph_toposort(g, d);
    if (st != IR_OK) return st;
#ifdef MAGPIE_DEBUG
    /* Debug builds re-infer every node (DESIGN.md decision 4): a rewrite must leave shapes
     * consistent everywhere, not only at the nodes it added. */
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        ir_shape old[16];
        ir_dtype oldt[16];
        int no = n->n_out < 16 ? n->n_out : 16;
        for (int k = 0; k < no; k++)
            if (n->out[k] >= 0) {
                old[k] = g->values[n->out[k]].shape;
                oldt[k] = g->values[n->out[k]].dtype;
            }
        if (!ir_op_get(n->op)) continue;
        if ((st = ir_node_infer(g, n, d)) != IR_OK) return st;
        for (int k = 0; k < no; k++)
            if (n->out[k] >= 0 && (!ir_shape_eq(&old[k], &g->values[n->out[k]].shape) ||
                                   oldt[k] != g->values[n->out[k]].dtype))
                return ir_node_fail(d, IR_ERR_INTERNAL, n,
                                    "output %d changed shape on re-inference", k);
    }
#endif
    return ir_graph_validate(g, d);
}

/* ---------------------------------------------------------------- the rules */

static ir_status need_node(const ir_graph *g, uint32_t id, const char *role, int *idx, ir_diag *d) {
    *idx = rw_find_node(g, id);
    if (*idx < 0)
        return ir_diag_set(d, IR_ERR_INVALID, "rewrite: no node with id %u (%s)", id, role);
    return IR_OK;
}

/* The ancestors of node ib, by one reverse sweep (g->nodes is topological); ib itself is not
 * marked. NULL when out of memory. */
static unsigned char *ancestors_of(const ir_graph *g, int ib) {
    unsigned char *anc = calloc((size_t)g->n_nodes + 1, 1);
    if (!anc) return NULL;
    anc[ib] = 1;
    for (int i = ib; i >= 0; i--) {
        if (!anc[i]) continue;
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p >= 0) anc[p] = 1;
        }
    }
    anc[ib] = 0;
    return anc;
}

/* The rewired readers of a remat or swap of v for user B (node ib): B and every other reader of
 * v that is not an ancestor of B, all of them made to read `to` instead (nodes with ids from
 * first_new on, the rewrite's own, and Stores excluded). A reader that is an ancestor of B runs
 * before it in every order, so it keeps v; the others may run as late as B, and serving them too
 * is what frees v in between: with a Load or recompute for B alone, v stays on the device until
 * its last other late reader (a forward activation read by two backward ops), and the rewrite
 * saves nothing until a second one follows. */
static void rewire_late_readers(ir_graph *g, int v, const unsigned char *anc, int to,
                                uint32_t first_new, rw_touch_set *t) {
    for (int j = 0; j < g->n_nodes; j++) {
        ir_node *n = &g->nodes[j];
        /* new nodes (ids from first_new) lie past anc's end: test the id first */
        if (n->id >= first_new || anc[j] || n->op == IR_OP_Store || !node_reads(n, v)) continue;
        replace_input(n, v, to);
        rw_touch(t, n->id);
    }
}

/* Is n memory-bound: at most RW_REMAT_CHAIN_MAX_INTENSITY FLOPs per byte it reads and writes?
 * A chain recomputes such producers for about what moving their bytes costs, the price of any
 * remat of an elementwise op; a compute-bound one (a Linear layer's MatMul, 268 FLOP/B in BERT's
 * FFN) would cost its full FLOPs again for the same bytes freed, and the search, which ranks
 * children by bytes under a latency limit, would spend the limit on it. */
static bool memory_bound(const ir_graph *g, const ir_node *n) {
    double bytes = 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0) bytes += (double)ir_value_bytes(&g->values[n->in[k]]);
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) bytes += (double)ir_value_bytes(&g->values[n->out[k]]);
    return ir_node_flops(g, n) <= RW_REMAT_CHAIN_MAX_INTENSITY * bytes;
}

/* The nodes an RW_REMAT_CHAIN recomputes for v = A's output read by B (rules.h): A, then every
 * producer of a chain node's input whose outputs only ancestors of B read (anc, from
 * ancestors_of(B): B itself is not one, so a value B reads stays), breadth first, at most
 * RW_REMAT_CHAIN_MAX; in ascending index order (topological) into chain. */
static int remat_chain(const ir_graph *g, int ia, const unsigned char *anc, int *chain) {
    int n = 1;
    chain[0] = ia;
    for (int c = 0; c < n; c++) {
        const ir_node *x = &g->nodes[chain[c]];
        for (int k = 0; k < x->n_in && n < RW_REMAT_CHAIN_MAX; k++) {
            int p = x->in[k] >= 0 ? g->values[x->in[k]].producer : -1, j = 0;
            while (j < n && chain[j] != p) j++;
            if (p < 0 || j < n || !recomputable(&g->nodes[p]) ||
                any_graph_output(g, &g->nodes[p]) || rw_is_fission_op(g->nodes[p].op) ||
                !memory_bound(g, &g->nodes[p]))
                continue;
            const ir_node *pn = &g->nodes[p];
            bool early = true;
            for (int o = 0; o < pn->n_out && early; o++)
                for (int r = p + 1; r < g->n_nodes && early && pn->out[o] >= 0; r++)
                    early = anc[r] || !node_reads(&g->nodes[r], pn->out[o]);
            if (early) chain[n++] = p;
        }
    }
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && chain[j - 1] > chain[j]; j--) {
            int tmp = chain[j];
            chain[j] = chain[j - 1];
            chain[j - 1] = tmp;
        }
    return n;
}

/* The chain (remat_chain) of A = node ia for B = node ib, into chain; its length, -1 when out of
 * memory. For the callers that need B's ancestors for nothing else. */
static int remat_chain_for(const ir_graph *g, int ia, int ib, int *chain) {
    unsigned char *anc = ancestors_of(g, ib);
    if (!anc) return -1;
    int n = remat_chain(g, ia, anc, chain);
    free(anc);
    return n;
}

/* Adds a copy of node i whose inputs read remap[x] where that is set (>= 0) and whose outputs are
 * fresh values, recorded in remap; returns the copy's id through *id. */
static ir_status add_copy(ir_graph *g, int i, int *remap, uint32_t *id, ir_diag *d) {
    /* the node array may move while nodes are added; in/out/attrs live in the arena and stay */
    const ir_node *a = &g->nodes[i];
    ir_op_kind op = a->op;
    const char *name = a->name;
    int n_in = a->n_in, n_out = a->n_out, n_attrs = a->n_attrs;
    const int *in = a->in, *out = a->out;
    const ir_attr *attrs = a->attrs;
    uint32_t nid = *id = g->next_node_id;
    int *ins = malloc(sizeof(int) * (size_t)(n_in + n_out + 1)), *outs = ins + n_in;
    if (!ins) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory rematerializing");
    for (int k = 0; k < n_in; k++) ins[k] = in[k] >= 0 && remap[in[k]] >= 0 ? remap[in[k]] : in[k];
    ir_status st = IR_OK;
    for (int k = 0; k < n_out && st == IR_OK; k++) {
        outs[k] = out[k] >= 0 ? fresh_value(g, out[k], "remat", nid) : -1;
        if (out[k] >= 0 && outs[k] < 0) st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    if (st == IR_OK) st = add_node(g, op, name, "remat", n_in, ins, n_out, outs, n_attrs, attrs, d);
    for (int k = 0; k < n_out && st == IR_OK; k++)
        if (out[k] >= 0) remap[out[k]] = outs[k];
    free(ins);
    return st;
}

/* The view nodes leading from v up to one of n's inputs (n reads v through views: a Reshape of
 * v, a transposed operand of a Reshape of v, ...), lowest first, into chain; their count, or 0
 * when n reads no view of v. At most RW_REMAT_CHAIN_MAX links. */
static int view_path(const ir_graph *g, const ir_node *n, int v, int *chain) {
    for (int k = 0; k < n->n_in; k++) {
        int x = n->in[k], depth = 0, b;
        while (x >= 0 && x != v && depth < RW_REMAT_CHAIN_MAX &&
               (b = ir_value_view_of(g, x)) >= 0) {
            chain[depth++] = g->values[x].producer;
            x = b;
        }
        if (x != v || depth == 0) continue;
        for (int i = 0; i < depth / 2; i++) { /* lowest first */
            int tmp = chain[i];
            chain[i] = chain[depth - 1 - i];
            chain[depth - 1 - i] = tmp;
        }
        return depth;
    }
    return 0;
}

/* The views chain[0..n) (view_path's, lowest first; chain[c + 1] reads chain[c]) that a swap left
 * without a reader, removed from the top down: when every reader of the view B read was late,
 * they all read the copies over the Load now, and the original views would stay in the graph for
 * nobody. Left there, the search would count them (a Transpose that no MatMul reads is a copy
 * again: a kernel, and its bytes at its step) and the written plan would not have them (the
 * importer drops nodes nobody reads), so the search's latency and peak would not be the plan's. */
static ir_status remove_unread_views(ir_graph *g, const int *chain, int n, rw_touch_set *t,
                                     ir_diag *d) {
    unsigned char *dead = calloc((size_t)g->n_nodes + 1, 1);
    if (!dead) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory removing views");
    bool any = false;
    for (int c = n - 1; c >= 0; c--) {
        const ir_node *x = &g->nodes[chain[c]];
        int above = c + 1 < n ? chain[c + 1] : -1; /* removed already, or none */
        bool read = any_graph_output(g, x);
        for (int k = 0; k < x->n_out && !read; k++)
            read = x->out[k] >= 0 && value_used(g, x->out[k], above);
        if (read) break;
        dead[chain[c]] = 1;
        rw_touch(t, x->id);
        any = true;
    }
    ir_status st = any ? remove_nodes(g, dead, d) : IR_OK;
    free(dead);
    return st;
}

static ir_status apply_remat(ir_graph *g, const rw_rewrite *r, rw_touch_set *t, ir_diag *d) {
    int ia, ib, v = -1, chain[RW_REMAT_CHAIN_MAX], n_chain = 1, views[RW_REMAT_CHAIN_MAX],
                n_views = 0;
    ir_status st;
    if ((st = need_node(g, r->node_id, "producer", &ia, d)) != IR_OK) return st;
    if ((st = need_node(g, r->user_id, "user", &ib, d)) != IR_OK) return st;
    if (r->value < 0 || r->value >= g->nodes[ia].n_out || g->nodes[ia].out[r->value] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ia], "rewrite: no output %d", r->value);
    v = g->nodes[ia].out[r->value];
    /* B reads v, or a view of it (a weight gradient's Reshape of a forward activation): then
     * the recompute gets copies of those views, as a swap's Load does */
    if (ia == ib ||
        (!node_reads(&g->nodes[ib], v) && (n_views = view_path(g, &g->nodes[ib], v, views)) == 0))
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ib],
                            "rewrite: reads neither '%s' nor a view of it", g->values[v].name);
    if (!recomputable(&g->nodes[ia]))
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ia],
                            "rewrite: this op cannot be rematerialized");
    uint32_t aid = g->nodes[ia].id, bid = g->nodes[ib].id, first_new = g->next_node_id;
    int n_values = g->n_values;
    unsigned char *anc = ancestors_of(g, ib);
    int *remap = malloc(sizeof(int) * ((size_t)n_values + 1));
    if (!anc || !remap) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory rematerializing");
        goto out;
    }
    chain[0] = ia;
    if (r->kind == RW_REMAT_CHAIN && (n_chain = remat_chain(g, ia, anc, chain)) < 2) {
        st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ia],
                          "rewrite: no producer of '%s' to recompute with it", g->values[v].name);
        goto out;
    }
    for (int x = 0; x < n_values; x++) remap[x] = -1;
    rw_touch(t, aid);
    for (int c = 0; c < n_chain && st == IR_OK; c++) {
        uint32_t id;
        st = add_copy(g, chain[c], remap, &id, d);
        rw_touch(t, id);
    }
    /* the views B reads v through, again over the recompute: no bytes, no kernel (ir.h) */
    for (int c = 0; c < n_views && st == IR_OK; c++) {
        uint32_t id;
        st = add_copy(g, views[c], remap, &id, d);
        rw_touch(t, id);
    }
    if (st != IR_OK) goto out;
    rw_touch(t, bid);
    int u = n_views > 0 ? g->nodes[views[n_views - 1]].out[0] : -1;
    rewire_late_readers(g, v, anc, remap[v], first_new, t);
    if (u >= 0) rewire_late_readers(g, u, anc, remap[u], first_new, t);
    /* the original views that only late readers read go (remove_unread_views) before the
     * check: a view read by nobody any more is no reader of v */
    if (n_views > 0 && (st = remove_unread_views(g, views, n_views, t, d)) != IR_OK) goto out;
    bool kept = false;
    for (int j = 0; j < g->n_nodes && !kept; j++)
        kept = g->nodes[j].id < first_new && node_reads(&g->nodes[j], v);
    /* every reader moved: A would compute v for nobody (no reader of v is an ancestor of B) */
    if (!kept)
        st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[rw_find_node(g, bid)],
                          "rewrite: every reader of '%s' would read the copy", g->values[v].name);
out:
    free(anc);
    free(remap);
    return st;
}

static ir_status apply_deremat(ir_graph *g, const rw_rewrite *r, rw_touch_set *t, ir_diag *d) {
    int ia, ib;
    ir_status st;
    if ((st = need_node(g, r->node_id, "kept", &ia, d)) != IR_OK) return st;
    if ((st = need_node(g, r->user_id, "merged", &ib, d)) != IR_OK) return st;
    const ir_node *a = &g->nodes[ia], *b = &g->nodes[ib];
    if (ia == ib || !mergeable(a, b))
        return ir_node_fail(d, IR_ERR_INVALID, b, "rewrite: cannot merge into node '%s'", a->name);
    if (any_graph_output(g, b))
        return ir_node_fail(d, IR_ERR_INVALID, b, "rewrite: produces a graph output");
    rw_touch(t, a->id);
    rw_touch(t, b->id);
    for (int i = 0; i < g->n_nodes; i++) {
        if (i == ib) continue;
        ir_node *u = &g->nodes[i];
        for (int k = 0; k < b->n_out; k++)
            if (b->out[k] >= 0 && node_reads(u, b->out[k])) {
                replace_input(u, b->out[k], a->out[k]);
                rw_touch(t, u->id);
            }
    }
    if (t->overflow)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, b, "rewrite: touches over %d nodes",
                            RW_MAX_TOUCHED);
    unsigned char *dead = calloc((size_t)g->n_nodes, 1);
    if (!dead) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory merging nodes");
    dead[ib] = 1;
    st = remove_nodes(g, dead, d);
    free(dead);
    return st;
}

static ir_status apply_swap(ir_graph *g, const rw_rewrite *r, rw_touch_set *t, ir_diag *d) {
    int ia, ib, v, chain[RW_REMAT_CHAIN_MAX], n_chain = 0;
    ir_status st;
    if ((st = need_node(g, r->node_id, "producer", &ia, d)) != IR_OK) return st;
    if ((st = need_node(g, r->user_id, "user", &ib, d)) != IR_OK) return st;
    const ir_node *a = &g->nodes[ia];
    if (r->value < 0 || r->value >= a->n_out || a->out[r->value] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, a, "rewrite: no output %d", r->value);
    v = a->out[r->value];
    /* B reads v, or a view of it: then the Load gets copies of the views B reads it through */
    if (ia == ib ||
        (!node_reads(&g->nodes[ib], v) && (n_chain = view_path(g, &g->nodes[ib], v, chain)) == 0))
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ib],
                            "rewrite: reads neither '%s' nor a view of it", g->values[v].name);
    if (ir_value_on_host(g, v))
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ia],
                            "rewrite: '%s' is already on the host", g->values[v].name);
    if (g->nodes[ib].op == IR_OP_Store)
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ib], "rewrite: swapping into a Store");
    /* A view has no bytes of its own to move: its base's buffer would stay on the device for the
     * view's other readers, and the Store would copy the base's bytes. Swapping the base is the
     * rewrite that frees them. */
    int viewed = ir_value_view_of(g, v);
    if (viewed >= 0)
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ia],
                            "rewrite: '%s' is a view of '%s': swap its base instead",
                            g->values[v].name, g->values[viewed].name);
    uint32_t aid = g->nodes[ia].id, bid = g->nodes[ib].id, sid = g->next_node_id;
    const char *base = g->values[v].name;
    int n_values = g->n_values;
    int h = fresh_value(g, v, "host", sid), l = fresh_value(g, v, "load", sid + 1);
    if (h < 0 || l < 0) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory swapping");
    if ((st = add_node(g, IR_OP_Store, base, "store", 1, &v, 1, &h, 0, NULL, d)) != IR_OK ||
        (st = add_node(g, IR_OP_Load, base, "load", 1, &h, 1, &l, 0, NULL, d)) != IR_OK)
        return st;
    rw_touch(t, aid);
    rw_touch(t, sid);
    rw_touch(t, sid + 1);
    rw_touch(t, bid);
    int u = -1, *remap = NULL;
    if (n_chain > 0) { /* the views again, over the Load: no bytes, no kernel (ir.h) */
        if (!(remap = malloc(sizeof(int) * ((size_t)n_values + 1))))
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory swapping");
        for (int x = 0; x < n_values; x++) remap[x] = -1;
        remap[v] = l;
        for (int c = 0; c < n_chain && st == IR_OK; c++) {
            uint32_t id;
            st = add_copy(g, chain[c], remap, &id, d);
            rw_touch(t, id);
        }
        u = g->nodes[chain[n_chain - 1]].out[0];
    }
    unsigned char *anc = st == IR_OK ? ancestors_of(g, ib) : NULL;
    if (st == IR_OK && !anc)
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory finding the late readers");
    if (st == IR_OK) {
        rewire_late_readers(g, v, anc, l, sid, t);
        if (u >= 0) rewire_late_readers(g, u, anc, remap[u], sid, t);
    }
    free(anc);
    free(remap);
    if (st == IR_OK && n_chain > 0) st = remove_unread_views(g, chain, n_chain, t, d);
    return st;
}

static ir_status apply_deswap(ir_graph *g, const rw_rewrite *r, rw_touch_set *t, ir_diag *d) {
    int il, ib;
    ir_status st;
    if ((st = need_node(g, r->node_id, "Load", &il, d)) != IR_OK) return st;
    if ((st = need_node(g, r->user_id, "user", &ib, d)) != IR_OK) return st;
    const ir_node *ld = &g->nodes[il];
    int h = ld->n_in == 1 ? ld->in[0] : -1;
    int is = h >= 0 ? g->values[h].producer : -1;
    if (ld->op != IR_OP_Load || is < 0 || g->nodes[is].op != IR_OP_Store)
        return ir_node_fail(d, IR_ERR_INVALID, ld, "rewrite: not a Load of a Store");
    int l = ld->out[0], x = g->nodes[is].in[0];
    if (il == ib || l < 0 || !node_reads(&g->nodes[ib], l))
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[ib], "rewrite: does not read the Load");
    replace_input(&g->nodes[ib], l, x);
    rw_touch(t, g->nodes[is].id);
    rw_touch(t, ld->id);
    rw_touch(t, g->nodes[ib].id);
    unsigned char *dead = calloc((size_t)g->n_nodes, 1);
    if (!dead) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory removing swap ops");
    if (!value_used(g, l, -1)) {
        dead[il] = 1;
        if (!value_used(g, h, il)) dead[is] = 1;
    }
    st = remove_nodes(g, dead, d);
    free(dead);
    return st;
}

ir_graph *rw_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                   ir_status *st, ir_diag *d) {
    if (r->kind == RW_SUBST) return rw_subst_apply(g, r, touched, n_touched, st, d);
    ir_status s = IR_OK;
    rw_touch_set t = {.n = 0};
    if (n_touched) *n_touched = 0;
    ir_graph *g2 = ir_graph_clone(g);
    if (!g2) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory copying the graph");
        goto out;
    }
    switch (r->kind) {
    case RW_REMAT:
    case RW_REMAT_CHAIN: s = apply_remat(g2, r, &t, d); break;
    case RW_DEREMAT: s = apply_deremat(g2, r, &t, d); break;
    case RW_SWAP: s = apply_swap(g2, r, &t, d); break;
    case RW_DESWAP: s = apply_deswap(g2, r, &t, d); break;
    default: s = ir_diag_set(d, IR_ERR_INVALID, "rewrite: unknown kind %d", r->kind); break;
    }
    if (s == IR_OK) s = finish(g2, d);
    if (s != IR_OK) {
        ir_graph_free(g2);
        g2 = NULL;
        goto out;
    }
    if (touched) memcpy(touched, t.ids, sizeof(uint32_t) * (size_t)t.n);
    if (n_touched) *n_touched = t.n;
out:
    if (st) *st = s;
    return g2;
}

int rw_remat_reads(const ir_graph *g, const rw_rewrite *r, int *vals, int max) {
    if (r->kind != RW_REMAT && r->kind != RW_REMAT_CHAIN) return -1;
    int ia = rw_find_node(g, r->node_id), ib = rw_find_node(g, r->user_id);
    if (ia < 0 || ib < 0) return -1;
    int chain[RW_REMAT_CHAIN_MAX], n_chain = 1, n = 0;
    chain[0] = ia;
    if (r->kind == RW_REMAT_CHAIN && (n_chain = remat_chain_for(g, ia, ib, chain)) < 0) return -1;
    for (int c = 0; c < n_chain; c++) {
        const ir_node *x = &g->nodes[chain[c]];
        for (int k = 0; k < x->n_in; k++) {
            int v = x->in[k], p = v >= 0 ? g->values[v].producer : -1, j = 0;
            while (j < n_chain && chain[j] != p) j++;
            if (v < 0 || j < n_chain) continue; /* produced inside the chain */
            j = 0;
            while (j < n && vals[j] != v) j++;
            if (j == n && n < max) vals[n++] = v;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- candidates (heuristic H2) */

static bool push(rw_rewrite *out, int max, int *cnt, rw_rewrite r) {
    if (*cnt >= max) return false;
    out[(*cnt)++] = r;
    return true;
}

/* The readers users[0..nu) of v (ascending node indices) that have another reader among their
 * ancestors, marked in one forward pass: mark[i] gets bit 1 when node i is a reader and bit 2
 * when it descends from one (it reads a value that a reader or a descendant of one produces).
 * Node indices are topological, so nodes between the lowest and the highest reader are all a
 * path between two readers can run through. The same answers as reader_is_ancestor per reader,
 * in one O(edges) pass per hot-spot instead of a search per reader (7.8 % of a worker's time on
 * the GPT-Neo-1.3B-shaped training graph, whose hot-spots have many readers). mark (n bytes,
 * zero) is zero again after readers_unmark. */
static void readers_mark(const ir_graph *g, const int *users, int nu, unsigned char *mark) {
    if (nu == 0) return;
    int lo = users[0], hi = users[nu - 1];
    for (int u = 0; u < nu; u++) mark[users[u]] = 1;
    for (int i = lo + 1; i <= hi; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p >= lo && mark[p]) {
                mark[i] |= 2;
                break;
            }
        }
    }
}

static void readers_unmark(const int *users, int nu, unsigned char *mark) {
    if (nu > 0) memset(mark + users[0], 0, (size_t)(users[nu - 1] - users[0] + 1));
}

/* For a remat for B = node ib that reads v through the views skip[0..ns) (view_path's): is a
 * reader of v other than those views an ancestor of B? The views are ancestors of B and read v,
 * but the rewrite removes them once B reads their copies, so they keep nothing (apply_remat
 * refuses it then). A reverse search from ib that stays within node indices from the lowest
 * reader's on (g->nodes is topological, so no ancestor that is a reader lies below it); stack is
 * a queue: [n_seen, top) is pending, all of [0, top) is unmarked at the end. seen (n bytes, zero)
 * and stack (n ints) are scratch, seen zero again on return. Only for readers through views,
 * which are few (and for Debug builds' check of readers_mark). */
static bool kept_beside_views(const ir_graph *g, const int *users, int nu, int ib, const int *skip,
                              int ns, unsigned char *seen, int *stack) {
    int lo = ib;
    for (int u = 0; u < nu; u++) lo = users[u] < lo ? users[u] : lo;
    int top = 0, n_seen = 0;
    bool found = false;
    stack[top++] = ib;
    seen[ib] = 1;
    while (n_seen < top && !found) {
        const ir_node *n = &g->nodes[stack[n_seen++]];
        for (int k = 0; k < n->n_in && !found; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p < lo || seen[p]) continue;
            seen[p] = 1;
            stack[top++] = p;
            bool view = false;
            for (int c = 0; c < ns; c++) view |= skip[c] == p;
            for (int u = 0; u < nu && !view; u++) found |= users[u] == p;
        }
    }
    for (int j = 0; j < top; j++) seen[stack[j]] = 0;
    return found;
}

#ifndef NDEBUG
/* (Debug builds check readers_mark with it.) Is one of the readers users[0..nu) of v an
 * ancestor of node ib? kept_beside_views with no views to skip. */
static bool reader_is_ancestor(const ir_graph *g, const int *users, int nu, int ib,
                               unsigned char *seen, int *stack) {
    return kept_beside_views(g, users, nu, ib, NULL, 0, seen, stack);
}
#endif

/* Could an RW_REMAT_CHAIN of A for a reader at step sb recompute a producer with A? Only if an
 * input of A has a recomputable producer whose outputs all die before sb under m (the order at
 * hand): that is necessary for them to have only ancestors of B as readers, which rw_apply then
 * checks exactly (it refuses a chain of one). O(inputs x outputs) with m's lifetimes. */
static bool chain_may_grow(const ir_graph *g, const sched_memory *m, const ir_node *a, int sb) {
    for (int k = 0; k < a->n_in; k++) {
        int q = a->in[k] >= 0 ? g->values[a->in[k]].producer : -1;
        if (q < 0 || !recomputable(&g->nodes[q]) || any_graph_output(g, &g->nodes[q])) continue;
        const ir_node *p = &g->nodes[q];
        bool early = true;
        for (int o = 0; o < p->n_out && early; o++)
            early = p->out[o] < 0 || m->lifetimes[p->out[o]].last_step < sb;
        if (early) return true;
    }
    return false;
}

/* Does n read a view of v, and is n no view itself? A cheap filter (buffer roots) before
 * view_path: n's input shares v's buffer without being v, and n's output has a buffer of its
 * own (the readers of a view's view are the users, not the link between). */
static bool reads_view_root(const ir_graph *g, const int *root, const ir_node *n, int v) {
    if (n->n_out > 0 && n->out[0] >= 0 && root[n->out[0]] == v) return false;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && n->in[k] != v && root[n->in[k]] == v) return true;
    return false;
}

int rw_candidates(const ir_graph *g, const sched_memory *m, bool chains, rw_rewrite *out, int max) {
    int cnt = 0;
    if (!out || max <= 0) return 0;
    bool have_m = m && m->lifetimes && m->n_steps == g->n_nodes;
    int *users = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int *stack = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    unsigned char *seen = calloc((size_t)g->n_nodes + 1, 1);
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    unsigned char *mark = calloc((size_t)g->n_nodes + 1, 1);
    if (!users || !stack || !seen || !root || !mark) {
        free(users);
        free(stack);
        free(seen);
        free(root);
        free(mark);
        return 0;
    }
    ir_graph_buffer_roots(g, root);
    /* Remat, then swap, for each hot-spot produced by a node. Remat: every user after the first
     * (the first keeps the original). Swap: every user that runs at least two steps after the
     * producer, the first included: a lone far user is the classic swap, the tensor sits on the
     * host across the gap. */
    for (int pass = 0; pass < 2 && have_m; pass++)
        for (int h = 0; h < m->n_hotspots; h++) {
            int v = m->hotspots[h], p = g->values[v].producer;
            if (p < 0 || ir_value_on_host(g, v)) continue;
            const ir_node *a = &g->nodes[p];
            if (pass == 0 && !recomputable(a)) continue;
            /* a view has no bytes to move (rw_apply refuses it; its base is the candidate) */
            if (pass == 1 && ir_value_view_of(g, v) >= 0) continue;
            int k = 0;
            while (k < a->n_out && a->out[k] != v) k++;
            int nu = 0, first = -1, chain[RW_REMAT_CHAIN_MAX];
            for (int i = 0; i < g->n_nodes; i++) {
                const ir_node *n = &g->nodes[i];
                /* a swap or remat serves a reader of a view of v too (the Load or the
                 * recompute gets the views again); the views' own nodes are no such readers,
                 * their readers are */
                bool direct = node_reads(n, v), via = !direct && root &&
                                                      reads_view_root(g, root, n, v) &&
                                                      view_path(g, n, v, chain) > 0;
                if (i == p || !(direct || via)) continue;
                users[nu++] = i;
                int s = sched_node_step(g, m, i);
                if (first < 0 || s < first) first = s;
            }
            if (nu < 2 && pass == 0) continue;
            int earliest = pass == 0 ? first : sched_node_step(g, m, p) + 1;
            bool marked = false;
            for (int u = 0; u < nu; u++) {
                const ir_node *b = &g->nodes[users[u]];
                if (sched_node_step(g, m, users[u]) <= earliest || b->op == IR_OP_Store) continue;
                /* a remat keeps v for the readers that are ancestors of B: without one, the
                 * original would be computed for nobody (rw_apply refuses it) */
                if (pass == 0 && !marked) {
                    readers_mark(g, users, nu, mark);
                    marked = true;
                }
#ifndef NDEBUG
                if (pass == 0 && ((mark[users[u]] & 2) != 0) !=
                                     reader_is_ancestor(g, users, nu, users[u], seen, stack))
                    abort(); /* the one pass and the per-reader search disagree */
#endif
                if (pass == 0 && !(mark[users[u]] & 2)) continue;
                int vc[RW_REMAT_CHAIN_MAX], nvc;
                if (pass == 0 && !node_reads(b, v) && (nvc = view_path(g, b, v, vc)) > 0 &&
                    !kept_beside_views(g, users, nu, users[u], vc, nvc, seen, stack))
                    continue;
                rw_rewrite r = {.kind = pass == 0 ? RW_REMAT : RW_SWAP,
                                .node_id = a->id,
                                .value = k,
                                .user_id = b->id};
                if (!push(out, max, &cnt, r)) goto out;
                if (pass == 1 || !chains ||
                    !chain_may_grow(g, m, a, sched_node_step(g, m, users[u])))
                    continue;
                int chain[RW_REMAT_CHAIN_MAX];
                r.kind = RW_REMAT_CHAIN;
                if (remat_chain_for(g, p, users[u], chain) > 1 && !push(out, max, &cnt, r))
                    goto out;
            }
            if (marked) readers_unmark(users, nu, mark);
        }
    /* Deremat: every mergeable pair, the later one (by index) merged into the earlier. */
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = i + 1; j < g->n_nodes; j++) {
            const ir_node *a = &g->nodes[i], *b = &g->nodes[j];
            if (a->op != b->op || !mergeable(a, b) || any_graph_output(g, b)) continue;
            int nu = 0;
            for (int x = 0; x < g->n_nodes; x++)
                for (int k = 0; k < b->n_out; k++)
                    if (b->out[k] >= 0 && node_reads(&g->nodes[x], b->out[k])) {
                        nu++;
                        break;
                    }
            if (nu + 2 > RW_MAX_TOUCHED) continue;
            rw_rewrite r = {.kind = RW_DEREMAT, .node_id = a->id, .user_id = b->id};
            if (!push(out, max, &cnt, r)) goto out;
        }
    /* Deswap: every user of a Load of a Store. */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *ld = &g->nodes[i];
        if (ld->op != IR_OP_Load || ld->in[0] < 0 || ld->out[0] < 0) continue;
        int p = g->values[ld->in[0]].producer;
        if (p < 0 || g->nodes[p].op != IR_OP_Store) continue;
        for (int j = 0; j < g->n_nodes; j++)
            if (j != i && node_reads(&g->nodes[j], ld->out[0])) {
                rw_rewrite r = {.kind = RW_DESWAP, .node_id = ld->id, .user_id = g->nodes[j].id};
                if (!push(out, max, &cnt, r)) goto out;
            }
    }
out:
    free(users);
    free(stack);
    free(seen);
    free(root);
    free(mark);
    return cnt;
}
