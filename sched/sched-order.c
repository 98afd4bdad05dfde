/* sched-order.c - orders of a graph: the eager order and the validity check every scheduler's
 * result goes through. An order is a permutation of the node indices in which every node comes
 * after the producers of its inputs and every in-place output after the other readers of the
 * value it overwrites, a resident or a produced value, and of its views (they need the value
 * from before the write; ordering-only reads, ir_input_order_only, need none). */
#include "sched-impl.h"

#include <stdlib.h>

int *sched_eager_order(const ir_graph *g) {
    /* The importer keeps g->nodes in file order whenever that order is topological, and in a
     * stable topological sort of it otherwise: that is the eager order (DESIGN.md). */
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!order) return NULL;
    for (int i = 0; i < g->n_nodes; i++) order[i] = i;
    return order;
}

bool sdp_war_preds(const ir_graph *g, int **off_out, int **pred_out) {
    int n = g->n_nodes, nv = g->n_values;
    int *ow = malloc(sizeof(int) * ((size_t)nv + 1)), *off = calloc((size_t)n + 2, sizeof(int));
    int *pred = NULL;
    /* ow[v]: the node writing over the bytes v reads (the value it takes over, or a view of it) */
    if (!ow || !off || !ir_graph_overwriters(g, true, ow)) goto fail;
    /* off[x + 2] counts x's edges, so that after the prefix sum off[x + 1] is x's write cursor.
     * An ordering-only read needs no old value: no edge. */
    for (int y = 0; y < n; y++) {
        const ir_node *nd = &g->nodes[y];
        for (int i = 0; i < nd->n_in; i++) {
            int r = nd->in[i], x = r >= 0 && r < nv ? ow[r] : -1;
            if (x >= 0 && x != y && !ir_input_order_only(nd, i)) off[x + 2]++;
        }
    }
    for (int x = 0; x < n; x++) off[x + 2] += off[x + 1];
    if (!(pred = malloc(sizeof(int) * ((size_t)off[n + 1] + 1)))) goto fail;
    for (int y = 0; y < n; y++) {
        const ir_node *nd = &g->nodes[y];
        for (int i = 0; i < nd->n_in; i++) {
            int r = nd->in[i], x = r >= 0 && r < nv ? ow[r] : -1;
            if (x >= 0 && x != y && !ir_input_order_only(nd, i)) pred[off[x + 1]++] = y;
        }
    }
    free(ow);
    *off_out = off;
    *pred_out = pred;
    return true;
fail:
    free(ow);
    free(off);
    *off_out = *pred_out = NULL;
    return false;
}

bool sched_order_valid(const ir_graph *g, const int *order, int n) {
    if (n != g->n_nodes || (n > 0 && !order)) return false;
    int *pos = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!pos) return false;
    bool ok = true;
    for (int i = 0; i < n; i++) pos[i] = -1;
    for (int s = 0; s < n && ok; s++) {
        int k = order[s];
        if (k < 0 || k >= n || pos[k] >= 0)
            ok = false;
        else
            pos[k] = s;
    }
    for (int s = 0; s < n && ok; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        for (int i = 0; i < nd->n_in && ok; i++) {
            int v = nd->in[i];
            if (v < 0) continue;
            if (v >= g->n_values) {
                ok = false;
                break;
            }
            int p = g->values[v].producer;
            if (p >= n || (p >= 0 && pos[p] >= s)) ok = false;
        }
    }
    /* the write-after-read edges of sdp_war_preds, checked as they are found (no CSR: every
     * child of the explorer's search goes through here) */
    int nv = g->n_values, *ow = ok ? malloc(sizeof(int) * ((size_t)nv + 1)) : NULL;
    if (ok && (!ow || !ir_graph_overwriters(g, true, ow))) ok = false;
    for (int y = 0; y < n && ok; y++) {
        const ir_node *nd = &g->nodes[y];
        for (int i = 0; i < nd->n_in && ok; i++) {
            int r = nd->in[i], x = r >= 0 && r < nv ? ow[r] : -1;
            if (x >= 0 && x != y && !ir_input_order_only(nd, i) && pos[y] >= pos[x]) ok = false;
        }
    }
    free(ow);
    free(pos);
    return ok;
}
