/* sched-swap.c - placement of the swap ops in an order (MAGIS 6.2): each Store as early as
 * possible, each Load as late as still hides its transfer.
 *
 * The compute ops (everything but Store and Load) keep their relative order; the swap ops are
 * re-inserted into that sequence at "slots" (slot k = just before the k-th compute op, slot nb =
 * at the end):
 *  - a Store goes right after the producer of its input (slot 0 for a resident input; a Store of
 *    a value a swap op produced shares that op's slot, after it);
 *  - a Load goes before its first user, moved earlier one compute op at a time until the compute
 *    time of the ops it has passed (sfg_node_seconds: a fission group's node counts its n parts,
 *    which the simulator runs as a block at the group's first slice, close enough here) covers its
 *    transfer time (prof_transfer_seconds): in the simulator (sched-sim.c) a swap op starts
 *    after the compute op before it ends, so exactly those ops overlap the transfer. It never
 *    moves before the slot of the op that produces its input (its Store).
 * Swap ops sharing a slot keep their relative order of the input order, which is topological, so
 * chains such as Store -> Load -> Store stay in order. The result is checked with
 * sched_order_valid. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

static bool is_swap(const ir_node *n) {
    return n->op == IR_OP_Store || n->op == IR_OP_Load;
}

ir_status sched_place_swaps(const ir_graph *g, const int *order, prof_model *cost, int *new_order,
                            ir_diag *d) {
    int n = g->n_nodes;
    if (!sched_order_valid(g, order, n))
        return ir_diag_set(d, IR_ERR_INVALID,
                           "the order is not a topological permutation of the graph's %d nodes", n);
    size_t ns = (size_t)(n ? n : 1);
    ir_status st = IR_OK;
    int *base = malloc(sizeof(int) * ns);      /* compute ops in order */
    int *slot = malloc(sizeof(int) * ns);      /* node -> base index (compute) or slot (swap) */
    int *before = malloc(sizeof(int) * ns);    /* node -> compute ops before it in order */
    int *first_use = malloc(sizeof(int) * ns); /* swap node -> earliest slot bound of its users */
    int *tmp = malloc(sizeof(int) * ns);
    int *cnt = calloc(ns + 2, sizeof(int));
    if (!base || !slot || !before || !first_use || !tmp || !cnt) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory placing swaps");
        goto out;
    }
    int nb = 0;
    for (int s = 0; s < n; s++) {
        int k = order[s];
        before[k] = nb;
        if (!is_swap(&g->nodes[k])) {
            slot[k] = nb;
            base[nb++] = k;
        }
    }
    /* Upper bound of each swap op's slot: the slot of its earliest user (a compute user's base
     * index; for a swap user, the compute ops before it in the input order, which bounds the
     * slot it can get). No user: the end. */
    for (int k = 0; k < n; k++) first_use[k] = nb;
    for (int s = 0; s < n; s++) {
        const ir_node *u = &g->nodes[order[s]];
        int bound = is_swap(u) ? before[order[s]] : slot[order[s]];
        for (int i = 0; i < u->n_in; i++) {
            int v = u->in[i];
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p >= 0 && is_swap(&g->nodes[p]) && bound < first_use[p]) first_use[p] = bound;
        }
    }
    /* Slots in input order: a swap op's producer (if a swap op) has its slot already. */
    for (int s = 0; s < n; s++) {
        int k = order[s];
        const ir_node *nd = &g->nodes[k];
        if (!is_swap(nd)) continue;
        const ir_value *x = ir_node_in(g, nd, 0);
        int p = x ? x->producer : -1;
        int lo = p < 0 ? 0 : is_swap(&g->nodes[p]) ? slot[p] : slot[p] + 1;
        int at;
        if (nd->op == IR_OP_Store) {
            at = lo;
        } else {
            double need = prof_transfer_seconds(cost, ir_value_bytes(ir_node_out(g, nd, 0))),
                   acc = 0.0;
            at = first_use[k] > lo ? first_use[k] : lo;
            while (at > lo && acc < need) acc += sfg_node_seconds(cost, g, &g->nodes[base[--at]]);
        }
        /* Every user comes after the producer of k's input in a topological order, so lo never
         * exceeds the earliest user's slot and k lands before its users. */
        IR_ASSERT(at <= first_use[k]);
        slot[k] = at;
    }
    /* Emit slot by slot: swap ops of slot k (in input order), then base[k]. A counting sort of
     * the swap ops by slot keeps the input order within a slot. */
    for (int s = 0; s < n; s++)
        if (is_swap(&g->nodes[order[s]])) cnt[slot[order[s]] + 1]++;
    for (int k = 0; k <= nb; k++) cnt[k + 1] += cnt[k];
    int n_swaps = cnt[nb + 1];
    for (int s = 0; s < n; s++)
        if (is_swap(&g->nodes[order[s]])) before[cnt[slot[order[s]]]++] = order[s];
    /* before[] now holds the swap ops sorted by slot; cnt[k] is the end of slot k's run. */
    int w = 0, r = 0;
    for (int k = 0; k <= nb; k++) {
        while (r < n_swaps && slot[before[r]] == k) tmp[w++] = before[r++];
        if (k < nb) tmp[w++] = base[k];
    }
    IR_ASSERT(w == n);
    if (!sched_order_valid(g, tmp, n)) {
        st = ir_diag_set(d, IR_ERR_INTERNAL, "swap placement produced an invalid order");
        goto out;
    }
    memcpy(new_order, tmp, sizeof(int) * (size_t)n);
out:
    free(base);
    free(slot);
    free(before);
    free(first_use);
    free(tmp);
    free(cnt);
    return st;
}
