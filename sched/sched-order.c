/* sched-order.c - orders of a graph: the eager order and the validity check every scheduler's
 * result goes through. An order is a permutation of the node indices in which every node comes
 * after the producers of its inputs. */
#include "schedule.h"

#include <stdlib.h>

int *sched_eager_order(const ir_graph *g) {
    /* The importer keeps g->nodes in file order whenever that order is topological, and in a
     * stable topological sort of it otherwise: that is the eager order (DESIGN.md). */
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    if (!order) return NULL;
    for (int i = 0; i < g->n_nodes; i++) order[i] = i;
    return order;
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
    free(pos);
    return ok;
}
