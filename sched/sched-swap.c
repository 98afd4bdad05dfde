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
 *  - the Loads share one copy stream (the host-to-device one; the Stores run on the other,
 *    sched-sim.c), so a Load placed to finish just in time may still wait for
 *    the one before it: a second pass takes the Loads from the latest deadline back, each to end
 *    by its user's start and by the start of the Load after it, and moves it earlier while the
 *    compute before its slot ends after the moment it must start (Stores are left out: they run
 *    where values are produced, Loads where they are read again). The compute timeline here is
 *    the simulator's without waiting: each op once, and a fission group's n-1 other parts as one
 *    block right before its first slice.
 * Swap ops sharing a slot keep their relative order of the input order, which is topological, so
 * chains such as Store -> Load -> Store stay in order. The result is checked with
 * sched_order_valid. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

static bool is_swap(const ir_node *n) {
    return n->op == IR_OP_Store || n->op == IR_OP_Load;
}

/* end[k] = when the compute ops base[0..k) have run, without waiting (k = 0..nb), and
 * deadline[k] = when base[k] starts: a fission group's replay block runs between the two when
 * base[k] is the group's first slice. */
static ir_status compute_timeline(const ir_graph *g, const int *order, const int *base, int nb,
                                  prof_model *cost, double *end, double *deadline, double *secs,
                                  ir_diag *d) {
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    /* each compute op's sched_node_seconds, once: the group blocks, the timeline and secs all
     * read it (a roofline per node, the bulk of this pass on a large graph) */
    double *t = malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    sfg_groups f = {0};
    ir_status st = IR_OK;
    if (!root || !t) {
        free(root);
        free(t);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory placing swaps");
    }
    sfg_roots(g, root);
    for (int k = 0; k < nb; k++) t[base[k]] = sched_node_seconds(cost, g, root, &g->nodes[base[k]]);
    if ((st = sfg_find(&f, g, order, root, d)) != IR_OK) goto out;
    double *block = f.n ? calloc((size_t)f.n, sizeof(double)) : NULL;
    int *first = f.n ? malloc(sizeof(int) * (size_t)f.n) : NULL;
    if (f.n && (!block || !first)) {
        free(block);
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory placing swaps");
        goto out;
    }
    for (int k = 0; k < f.n; k++) {
        first[k] = -1;
        for (int j = f.off[k]; j < f.off[k + 1]; j++) {
            const ir_node *x = &g->nodes[f.node[j]];
            if (!is_swap(x)) block[k] += t[f.node[j]];
            if (first[k] < 0 && x->op == IR_OP_FissionSlice) first[k] = f.node[j];
        }
        if (first[k] < 0) first[k] = f.node[f.off[k]];
        block[k] *= f.parts[k] - 1;
    }
    end[0] = 0.0;
    for (int k = 0; k < nb; k++) {
        int x = base[k], grp = f.n ? f.of[x] : -1;
        deadline[k] = end[k] + (grp >= 0 && first[grp] == x ? block[grp] : 0.0);
        end[k + 1] = deadline[k] + t[x];
        secs[k] = sfg_node_seconds_of(cost, g, root, &g->nodes[x], t[x]);
    }
    deadline[nb] = end[nb];
    free(block);
    free(first);
out:
    sfg_free(&f);
    free(root);
    free(t);
    return st;
}

typedef struct load_due {
    double due;
    int s; /* position in the input order: the tie-break */
} load_due;

static int cmp_due_desc(const void *pa, const void *pb) {
    const load_due *a = pa, *b = pb;
    if (a->due != b->due) return a->due < b->due ? 1 : -1;
    return (a->s < b->s) - (a->s > b->s);
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
    double *end = malloc(sizeof(double) * (ns + 1)), *deadline = malloc(sizeof(double) * (ns + 1));
    load_due *loads = malloc(sizeof(load_due) * ns);
    double *secs = malloc(sizeof(double) * ns); /* per base index: sfg_node_seconds */
    if (!base || !slot || !before || !first_use || !tmp || !cnt || !end || !deadline || !loads ||
        !secs) {
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
    /* The compute timeline (and each compute op's time, which the Loads' slots below add up) */
    if ((st = compute_timeline(g, order, base, nb, cost, end, deadline, secs, d)) != IR_OK)
        goto out;
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
            while (at > lo && acc < need) acc += secs[--at];
        }
        /* Every user comes after the producer of k's input in a topological order, so lo never
         * exceeds the earliest user's slot and k lands before its users. */
        IR_ASSERT(at <= first_use[k]);
        slot[k] = at;
    }
    /* Copy-stream contention (see the top): Loads from the latest deadline back. */
    int n_loads = 0;
    for (int s = 0; s < n; s++) {
        int k = order[s];
        if (g->nodes[k].op == IR_OP_Load) loads[n_loads++] = (load_due){deadline[first_use[k]], s};
    }
    qsort(loads, (size_t)n_loads, sizeof *loads, cmp_due_desc);
    double stream_free = 1e300;
    for (int i = 0; i < n_loads; i++) {
        int k = order[loads[i].s];
        double must_end = loads[i].due < stream_free ? loads[i].due : stream_free;
        double must_start =
            must_end - prof_transfer_seconds(cost, ir_value_bytes(ir_node_out(g, &g->nodes[k], 0)));
        const ir_value *x = ir_node_in(g, &g->nodes[k], 0);
        int p = x ? x->producer : -1;
        int lo = p < 0 ? 0 : is_swap(&g->nodes[p]) ? slot[p] : slot[p] + 1;
        while (slot[k] > lo && end[slot[k]] > must_start) slot[k]--;
        stream_free = must_start;
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
    free(end);
    free(deadline);
    free(loads);
    free(secs);
    return st;
}
