/* sched-insert.c - re-scheduling after a rewrite that only adds nodes next to their readers or
 * removes nodes (remat, swap and their inverses; schedule.h, sched_insert_new), and moving a
 * fission group's nodes that read residents only next to their readers
 * (sched_sink_resident_readers), with the same anchoring.
 *
 * The old order is kept for every node both graphs have (matched by stable id); a node g_new
 * adds goes right before its first reader in that order (as late as it can run, which is where
 * a recompute or a Load belongs; sched_place_swaps then moves Stores and Loads to their own
 * places), new nodes read by new nodes before them. A node without readers goes last. Sorting
 * the new nodes by (anchor, node index) does both: node indices are topological. Removed nodes
 * drop out. The result is checked with sched_order_valid.
 *
 * A fission's one-copy graph is rebuilt for every state, its fission ops numbered in the order
 * they are made: when S changes (a swap's Store and Load join it) an id may name another fission
 * op than in the parent, or a node the rewrite added. Where either graph has a fission op under
 * an id, the node counts as the old one only if it has the same op, output shape and producers
 * of its inputs; otherwise it is placed like a new node.
 *
 * Why not the DP window (sched_incremental): a remat or swap touches its producer and its
 * readers, which a training graph puts a forward and a backward apart, so the window spans most
 * of the graph and its re-ordering replaces an order the search has refined with the DP's own,
 * often a worse one for the state at hand (BERT: a swap raised the peak it was meant to lower). */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct anchored {
    int at;   /* position in the old order it goes before (n_old: the end) */
    int node; /* its index in g_new */
} anchored;

static int cmp_anchored(const void *pa, const void *pb) {
    const anchored *a = pa, *b = pb;
    if (a->at != b->at) return (a->at > b->at) - (a->at < b->at);
    return (a->node > b->node) - (a->node < b->node);
}

static bool is_fission_op(ir_op_kind op) {
    return op == IR_OP_FissionSlice || op == IR_OP_FissionBuffer || op == IR_OP_FissionAssemble ||
           op == IR_OP_FissionAccumulate;
}

/* Is node a of g_old the same fission op as node b of g_new (see the top)? */
static bool same_fission_op(const ir_graph *g_old, int a, const ir_graph *g_new, int b) {
    const ir_node *x = &g_old->nodes[a], *y = &g_new->nodes[b];
    if (x->op != y->op || x->n_in != y->n_in || x->n_out != y->n_out) return false;
    for (int k = 0; k < x->n_out; k++) {
        if ((x->out[k] < 0) != (y->out[k] < 0)) return false;
        if (x->out[k] >= 0 &&
            !ir_shape_eq(&g_old->values[x->out[k]].shape, &g_new->values[y->out[k]].shape))
            return false;
    }
    for (int k = 0; k < x->n_in; k++) {
        int p = x->in[k] >= 0 ? g_old->values[x->in[k]].producer : -1;
        int q = y->in[k] >= 0 ? g_new->values[y->in[k]].producer : -1;
        if ((p < 0) != (q < 0) || (p >= 0 && g_old->nodes[p].id != g_new->nodes[q].id))
            return false;
    }
    return true;
}

ir_status sched_insert_new(const ir_graph *g_old, const int *old_order, const ir_graph *g_new,
                           int *new_order, ir_diag *d) {
    int n_old = g_old->n_nodes, n = g_new->n_nodes;
    uint32_t hi = 0;
    for (int i = 0; i < n; i++) hi = g_new->nodes[i].id > hi ? g_new->nodes[i].id : hi;
    for (int i = 0; i < n_old; i++) hi = g_old->nodes[i].id > hi ? g_old->nodes[i].id : hi;
    size_t nn = (size_t)n + 1;
    int *new_of_id = malloc(sizeof(int) * ((size_t)hi + 1));
    int *pos = malloc(sizeof(int) * nn); /* g_new node -> old position, -1 for new nodes */
    int *anchor = malloc(sizeof(int) * nn);
    anchored *fresh = malloc(sizeof(anchored) * nn);
    ir_status st = IR_OK;
    if (!new_of_id || !pos || !anchor || !fresh) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory re-scheduling %d nodes", n);
        goto out;
    }
    for (uint32_t id = 0; id <= hi; id++) new_of_id[id] = -1;
    for (int i = 0; i < n; i++) {
        new_of_id[g_new->nodes[i].id] = i;
        pos[i] = -1;
    }
    for (int s = 0; s < n_old; s++) {
        int o = old_order[s], x = new_of_id[g_old->nodes[o].id];
        if (x >= 0 && (is_fission_op(g_old->nodes[o].op) || is_fission_op(g_new->nodes[x].op)) &&
            !same_fission_op(g_old, o, g_new, x))
            x = -1;
        if (x >= 0) pos[x] = s;
    }
    /* Anchors in reverse index order (reverse topological): every reader of a node has a higher
     * index, so a new node's anchor is final when the loop reaches it. */
    for (int i = 0; i < n; i++) anchor[i] = pos[i] >= 0 ? pos[i] : n_old;
    int n_fresh = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (pos[i] < 0) fresh[n_fresh++] = (anchored){.at = anchor[i], .node = i};
        const ir_node *nd = &g_new->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k] >= 0 ? g_new->values[nd->in[k]].producer : -1;
            if (p >= 0 && pos[p] < 0 && anchor[i] < anchor[p]) anchor[p] = anchor[i];
        }
    }
    qsort(fresh, (size_t)n_fresh, sizeof *fresh, cmp_anchored);
    int w = 0, f = 0;
    for (int s = 0; s <= n_old; s++) {
        while (f < n_fresh && fresh[f].at == s) new_order[w++] = fresh[f++].node;
        if (s == n_old) break;
        int x = new_of_id[g_old->nodes[old_order[s]].id];
        if (x >= 0 && pos[x] == s) new_order[w++] = x;
    }
    if (w != n || !sched_order_valid(g_new, new_order, n))
        st = ir_diag_set(d, IR_ERR_INVALID,
                         "re-scheduling by insertion: the new nodes cannot go before their "
                         "readers in the old order");
out:
    free(new_of_id);
    free(pos);
    free(anchor);
    free(fresh);
    return st;
}

/* A node of a fission group (not a fission op) that reads residents only. */
static bool reads_residents_in_group(const ir_graph *g, const ir_node *nd) {
    int parts;
    if (is_fission_op(nd->op) || sfg_node_group(nd, &parts) < 0) return false;
    for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k] >= 0 && g->values[nd->in[k]].producer >= 0) return false;
    return true;
}

ir_status sched_sink_resident_readers(const ir_graph *g, int *order, ir_diag *d) {
    int n = g->n_nodes, n_sink = 0, i0 = 0;
    /* the common case (no fission, or none of its nodes reads residents only) allocates nothing */
    while (i0 < n && !reads_residents_in_group(g, &g->nodes[i0])) i0++;
    if (i0 == n) return IR_OK;
    int *pos = malloc(sizeof(int) * ((size_t)n + 1)), *out = malloc(sizeof(int) * ((size_t)n + 1));
    anchored *sink = malloc(sizeof(anchored) * ((size_t)n + 1));
    ir_status st = IR_OK;
    if (!pos || !out || !sink) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory re-scheduling %d nodes", n);
        goto done;
    }
    for (int s = 0; s < n; s++) pos[order[s]] = s;
    /* a sink node's anchor: the step of its first reader (n while it has none) */
    int *anchor = out; /* out is written only after the anchors are read */
    for (int i = 0; i < n; i++)
        anchor[i] = i >= i0 && reads_residents_in_group(g, &g->nodes[i]) ? n : -1;
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k] >= 0 ? g->values[nd->in[k]].producer : -1;
            if (p >= 0 && anchor[p] >= 0 && pos[i] < anchor[p]) anchor[p] = pos[i];
        }
    }
    for (int i = 0; i < n; i++)
        if (anchor[i] >= 0 && anchor[i] < n && anchor[i] > pos[i])
            sink[n_sink++] = (anchored){.at = anchor[i], .node = i};
    if (n_sink == 0) goto done;
    qsort(sink, (size_t)n_sink, sizeof *sink, cmp_anchored);
    for (int j = 0; j < n_sink; j++) pos[sink[j].node] = -1; /* leaves its old step */
    int w = 0, f = 0;
    for (int s = 0; s < n; s++) {
        while (f < n_sink && sink[f].at == s) out[w++] = sink[f++].node;
        if (pos[order[s]] >= 0) out[w++] = order[s];
    }
    IR_ASSERT(w == n);
    memcpy(order, out, sizeof(int) * (size_t)n);
done:
    free(pos);
    free(out);
    free(sink);
    return st;
}
