/* schedule.h - schedules of a graph: orders, tensor lifetimes and the memory they need.
 *
 * An order is an array of node indices (a permutation of 0..n_nodes-1 that is topological).
 * Memory is accounted per step exactly as runtime/rt.h describes, in bytes; the simulator's
 * peak and the executor's measured peak are equal for the same graph and order (a test). */
#ifndef MAGPIE_SCHEDULE_H
#define MAGPIE_SCHEDULE_H

#include "ir.h"
#include "prof.h"

/* The eager order (DESIGN.md): the graph's node order, which the importer keeps equal to the
 * file order whenever that is topological. Returns a malloc'd array of g->n_nodes entries. */
int *sched_eager_order(const ir_graph *g);
/* True when order is a topological permutation of g's nodes that also runs every in-place
 * output (IR_OPF_INPLACE) after every other reader of the value it overwrites, a resident or a
 * produced value, and after every reader of a view of it (a write-after-read edge: the readers
 * need the old value, ir_graph_overwriters; an ordering-only input, ir_input_order_only, reads
 * no value and gets no edge). */
bool sched_order_valid(const ir_graph *g, const int *order, int n);

/* Residents are graph inputs and constants read by a node or a graph output. A produced value
 * is live over [def_step, last_step], both included (an output nobody reads: [d, d]). Values
 * never on the device (unread constants, leftovers of rewrites) have def = last = -1. */
typedef struct sched_lifetime {
    int def_step;  /* step that produces it; -1 for residents (constants, graph inputs) */
    int last_step; /* last step that reads it; n_steps for graph outputs and residents; for
                    * the root of an in-place chain, the chain's last step (its buffer's end) */
} sched_lifetime;

/* The device bytes value v occupies as a produced value, the one definition every counter in
 * sched/ uses (and runtime/rt-exec.c's allocation rules restated): 0 for a value in host memory
 * (a Store output, IR_OPF_HOST_OUTPUT), for an in-place output that takes over its input's
 * buffer (ir_value_inplace_of(g, v) >= 0: an optimizer update, a FissionAssemble) and for a view
 * (ir_value_view_of(g, v) >= 0: a Reshape, Flatten, Squeeze, Unsqueeze, or a transposed operand);
 * ir_value_bytes otherwise. O(1) except for a Transpose output (O(nodes)).
 * Residents (graph inputs, constants) are counted apart, as resident bytes. */
size_t sched_value_device_bytes(const ir_graph *g, int v);
/* The time node n takes on the compute stream: 0 for a view (no kernel runs; ir.h), else
 * prof_node_seconds. root: ir_graph_buffer_roots of g, or NULL (then a Transpose's readers are
 * searched, O(nodes)). Every latency sched/ computes uses it. */
double sched_node_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n);

typedef struct sched_memory {
    int n_steps;
    size_t resident_bytes; /* constants + graph inputs, live throughout */
    size_t peak_bytes;     /* max(resident_bytes, every step_bytes) */
    int peak_step;         /* first step reaching the peak; -1 when there are no steps */
    /* when the peak is a fission group's replay (at its first slice, peak_step): the step of
     * the group's node at which the replayed part peaks, where the group's own hot-spots are
     * live in the scheduled copy too; -1 otherwise */
    int replay_peak_step;
    size_t *step_bytes;        /* live bytes at each step's peak moment */
    sched_lifetime *lifetimes; /* one per value */
    /* memory hot-spots (MAGIS section 2.1): the values live at the peak moment, residents
     * included (weights are part of that memory), in value-id order */
    int n_hotspots;
    int *hotspots;
} sched_memory;

/* In-place outputs (IR_OPF_INPLACE) over a produced value x (not a resident): output k takes
 * over input k's buffer, which stays live until the last use of the last value of the chain;
 * the output itself allocates nothing (sched_value_device_bytes 0) and x is not freed at that
 * step. (FissionAssemble/FissionAccumulate write parts into a FissionBuffer this way.) Views
 * (ir_value_view_of) join their base's chain the same way: a view allocates nothing, the base's
 * buffer lives until the last read of any view of it (to the end when one is a graph output),
 * and a view of a resident is resident (ir_graph_buffer_roots gives every value its buffer's
 * root).
 *
 * Fission groups (rules.h, rw_fission_apply): nodes tagged "magpie_fission_group" = k,
 * "magpie_fission_parts" = n are one part of n. The accounting adds the n-1 other parts as the
 * materialized graph runs them (rw_fission_materialize): one after another, right before the
 * group's first FissionSlice step t0 (tagged nodes before it are generators, which read only
 * shared values), on top of what is live at t0 before t0 allocates. So step_bytes[t0] is
 * at least that live set plus the peak of the group's nodes run alone in order (values
 * produced and last read inside the group freed at their last use, workspaces included), and
 * the simulator's latency counts each tagged node n times.
 *
 * Computes lifetimes, live bytes per step, the peak and the hot-spots of order (NULL = eager),
 * analytically from lifetimes (never by running anything). Workspace bytes come from the op
 * table (ir_node_workspace). IR_ERR_INVALID when order is not a topological permutation. On
 * failure *m is zeroed. */
ir_status sched_memory_compute(const ir_graph *g, const int *order, sched_memory *m, ir_diag *d);
/* The step of node i under m: the def step of its first output (-1 when it has none). */
int sched_node_step(const ir_graph *g, const sched_memory *m, int i);
void sched_memory_free(sched_memory *m); /* NULL-safe, idempotent */

/* ---------------------------------------------------------------- memory-minimizing order */

/* Narrow-waist values (MAGIS section 6.1): nw(v) = |V| - |anc(v)| - |des(v)| - 1 for every node
 * index v, into nw (g->n_nodes entries). */
ir_status sched_narrow_waist(const ir_graph *g, int *nw, ir_diag *d);

typedef struct sched_dp_options {
    /* Parts of at most this many nodes are scheduled exactly (DP over sets of scheduled nodes
     * with memoization and pruning); larger parts are cut at nw <= 1 nodes and, where still
     * too large, scheduled by a bounded beam. 0 = default. */
    int exact_max_nodes;
    int beam_width;       /* 0 = default */
    double time_budget_s; /* soft bound for one call; 0 = default (10 s) */
    long max_states;      /* bound on the states a search keeps (its memo); 0 = default (4 Mi) */
} sched_dp_options;
/* Determinism: exact_max_nodes, beam_width and max_states (with the graph and, for
 * sched_incremental, the old order and the touched ids) determine the result, the same on every
 * machine and under any load, as long as time_budget_s does not run out; they also bound the work,
 * so every call ends without it. time_budget_s is the only input that depends on the machine: a
 * search that stops on time (the call's budget, a tenth of it for each refining window) returns
 * the best order found by then. A caller that needs a reproducible result (tests) sets
 * time_budget_s far above what its searches take, or bounds them by max_states. */

typedef struct sched_dp_stats {
    int parts;       /* independent parts after cutting at narrow waists */
    int exact_parts; /* scheduled by the exact DP */
    int beam_parts;  /* scheduled by the heuristics (contracted search, beam, windows) */
    long states;     /* DP/beam states expanded */
    double seconds;
    size_t peak_bytes; /* the peak the search computed for the returned order (base included) */
} sched_dp_stats;

/* Memory-minimizing order of all of g (Serenity-style DP with narrow-waist cuts; MAGIS 6.1).
 * order receives g->n_nodes node indices. Never worse than the eager order: when the search
 * finds nothing better, the eager order is returned. */
ir_status sched_order_memory(const ir_graph *g, const sched_dp_options *o, int *order,
                             sched_dp_stats *st, ir_diag *d);

/* Incremental rescheduling (MAGIS Algorithm 2). old_order is a schedule of g_old (node
 * indices of g_old); touched holds the stable ids (ir_node.id) of the nodes a rewrite added,
 * removed or rewired (ids of g_old or g_new). Re-schedules only a window of old_order around
 * them, partitioned at nw <= 1 nodes and scheduled by the DP, and merges it back. new_order
 * receives g_new->n_nodes node indices of g_new. */
ir_status sched_incremental(const ir_graph *g_old, const int *old_order, const ir_graph *g_new,
                            const uint32_t *touched, int n_touched, const sched_dp_options *o,
                            int *new_order, ir_diag *d);

/* Re-scheduling after a rewrite that adds nodes only to serve readers it rewired (a recompute,
 * a Store and its Load) or removes nodes (sched-insert.c): the old order (matched by stable id)
 * with each new node right before its first reader and removed nodes left out. Keeps what the
 * search refined and costs O(n). IR_ERR_INVALID when that is not a valid order of g_new (the
 * caller then re-schedules another way). new_order receives g_new->n_nodes entries. */
ir_status sched_insert_new(const ir_graph *g_old, const int *old_order, const ir_graph *g_new,
                           int *new_order, ir_diag *d);

/* Moves every node of a fission group that reads residents only (a replica of a weight's
 * layout copy, a generator of constants: rules.h) to right before its first reader in order, in
 * place. Such a node can run anywhere before that reader, and later only shortens its output's
 * life; an order inherited from a graph without the group (the DP window of a fission change
 * keeps nodes far from what it touched where they were) leaves it where the graph had it, often
 * before the group's first slice, so held through the replay of every other part. O(n). */
ir_status sched_sink_resident_readers(const ir_graph *g, int *order, ir_diag *d);

/* ---------------------------------------------------------------- simulator */

/* Latency and memory of an order under a cost model (MAGIS section 6.2, "performance
 * evaluation"): ops run one after another on a compute stream; Stores and Loads (magpie-domain
 * swap ops) run on two copy streams, one per direction (device to host, host to device), each at
 * the target's host-link bandwidth, overlapping compute and each other; an op
 * starts when the stream is free and its inputs are ready, a Load still in flight included.
 * Memory is the per-step accounting above (so the simulated device peak equals
 * sched_memory_compute's and the executor's to the byte); Store outputs count as host bytes (on
 * a one-copy graph, those of the scheduled part only: host memory bounds nothing in the search,
 * and the materialized plan's figure counts every part's). A fission group's n-1 other parts run
 * right before its first slice, each on both streams, as the materialized graph runs them. */
typedef struct sched_sim {
    double latency_s;
    size_t peak_device_bytes;
    size_t peak_host_bytes;
    int n_steps;
    double *start_s, *end_s; /* per step: when its op starts and ends */
    size_t *device_bytes;    /* per step: live device bytes at the step's peak moment */
    size_t *host_bytes;      /* per step: live host bytes */
} sched_sim;

ir_status sched_simulate(const ir_graph *g, const int *order, prof_model *cost, sched_sim *out,
                         ir_diag *d);
void sched_sim_free(sched_sim *s); /* NULL-safe, idempotent */

/* Re-places the swap ops of order (MAGIS 6.2): each Store as early as possible, each Load as
 * late as still hides its transfer behind compute before its first user. new_order receives
 * g->n_nodes entries (it may alias order). */
ir_status sched_place_swaps(const ir_graph *g, const int *order, prof_model *cost, int *new_order,
                            ir_diag *d);

#endif
