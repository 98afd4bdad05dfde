/* schedule.h - schedules of a graph: orders, tensor lifetimes and the memory they need.
 *
 * An order is an array of node indices (a permutation of 0..n_nodes-1 that is topological).
 * Memory is accounted per step exactly as runtime/rt.h describes, in bytes; the simulator's
 * peak and the executor's measured peak are equal for the same graph and order (a test). */
#ifndef MAGPIE_SCHEDULE_H
#define MAGPIE_SCHEDULE_H

#include "ir.h"

/* The eager order (DESIGN.md): the graph's node order, which the importer keeps equal to the
 * file order whenever that is topological. Returns a malloc'd array of g->n_nodes entries. */
int *sched_eager_order(const ir_graph *g);
/* True when order is a topological permutation of g's nodes. */
bool sched_order_valid(const ir_graph *g, const int *order, int n);

/* Residents are graph inputs and constants read by a node or a graph output. A produced value
 * is live over [def_step, last_step], both included (an output nobody reads: [d, d]). Values
 * never on the device (unread constants, leftovers of rewrites) have def = last = -1. */
typedef struct sched_lifetime {
    int def_step;  /* step that produces it; -1 for residents (constants, graph inputs) */
    int last_step; /* last step that reads it; n_steps for graph outputs and residents */
} sched_lifetime;

typedef struct sched_memory {
    int n_steps;
    size_t resident_bytes;     /* constants + graph inputs, live throughout */
    size_t peak_bytes;         /* max(resident_bytes, every step_bytes) */
    int peak_step;             /* first step reaching the peak; -1 when there are no steps */
    size_t *step_bytes;        /* live bytes at each step's peak moment */
    sched_lifetime *lifetimes; /* one per value */
    /* memory hot-spots (MAGIS section 2.1): the values live at the peak moment, residents
     * included (weights are part of that memory), in value-id order */
    int n_hotspots;
    int *hotspots;
} sched_memory;

/* Computes lifetimes, live bytes per step, the peak and the hot-spots of order (NULL = eager),
 * analytically from lifetimes (never by running anything). Workspace bytes come from the op
 * table (ir_node_workspace). IR_ERR_INVALID when order is not a topological permutation. On
 * failure *m is zeroed. */
ir_status sched_memory_compute(const ir_graph *g, const int *order, sched_memory *m, ir_diag *d);
void sched_memory_free(sched_memory *m); /* NULL-safe, idempotent */

#endif
