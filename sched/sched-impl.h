/* sched-impl.h - private declarations of sched/: the graph facts the memory-minimizing scheduler
 * precomputes once per call (sdp_ctx), the "window" problem it solves (sdp_prob: a contiguous
 * block of an order re-ordered while everything before and after stays put), its contraction
 * into units, and the search engine (exact DP over downsets, or a beam).
 *
 * The memory model is sched_memory_compute's, restated for a window [lo, hi) of an order:
 *  - base: residents plus every value produced before lo that is read at or after hi (or is a
 *    graph output); constant over the window;
 *  - init: values produced before lo whose readers all lie in the window ("entering"); each is
 *    freed after the step of its last reader in the window;
 *  - at the step of node x: add[x] = bytes of x's outputs + its workspace is allocated, the peak
 *    sampled, then keep[x] = the part of those outputs still needed (read later or graph
 *    output) stays and every freeable input whose readers are now all scheduled is freed.
 * So step bytes = base + live + add[x], which is sched_memory_compute's step_bytes at that
 * position, to the byte (test_sched_dp checks it). Value bytes are sched_value_device_bytes, as
 * there (0 for Store outputs and in-place outputs). An in-place chain's buffer is its root's
 * (sfg_roots): a node reading any value of the chain also reads the root, so the root is freed
 * after the chain's last use, as sched_memory_compute has it. Edges are data edges plus the
 * write-after-read edges of in-place outputs (sched_order_valid), so every window order keeps
 * them. */
#ifndef MAGPIE_SCHED_IMPL_H
#define MAGPIE_SCHED_IMPL_H

#include "schedule.h"

#include <stdint.h>

/* Set bits of x. __builtin_popcountll is an out-of-line libgcc call unless the target has POPCNT
 * (the default x86-64 target does not), and the DP's bitset counts are hot. */
static inline int sdp_popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

/* Facts about g every window needs; built once (sdp_ctx_init) and read-only afterwards apart
 * from the scratch map. Lists are CSR (off[i]..off[i+1]) and hold distinct entries. */
typedef struct sdp_ctx {
    const ir_graph *g;
    int n, nv;
    size_t resident;    /* bytes of residents, as sched_memory_compute counts them */
    size_t *vbytes;     /* per produced value: sched_value_device_bytes */
    uint8_t *is_out;    /* per value: graph output */
    size_t *ws;         /* per node: workspace bytes */
    int *in_off, *in;   /* per node: produced values it reads */
    int *out_off, *out; /* per node: values it writes */
    int *rd_off, *rd;   /* per value: nodes that read it */
    int *pr_off, *pr;   /* per node: producer nodes of its inputs, and for an in-place update
                         * the other readers of the residents it overwrites */
    int *su_off, *su;   /* per node: the transpose of pr */
    int *vmap;          /* scratch: value -> local id, all -1 between uses */
    /* per node: what its step samples at least, or NULL when g has no fission groups. A group's
     * nodes without a producer in the group (its slices) get the group's replay peak (sfg_replay
     * in node index order): the n-1 other parts run right before the group's first step, so
     * there the step holds what is live plus that replay. Exact for a group with one slice run
     * first and replayed in index order; an estimate otherwise (sched_order_memory then trusts
     * sched_memory_compute's peak rather than the search's own). */
    size_t *floor;
} sdp_ctx;

ir_status sdp_ctx_init(sdp_ctx *c, const ir_graph *g, ir_diag *d);

/* Write-after-read edges of in-place outputs: for each node x, the nodes other than x that read
 * a value x overwrites (ir_value_inplace_of: a resident or a produced value) or a view of it
 * (ir_graph_overwriters), which must run
 * before x; ordering-only reads (ir_input_order_only) need no old value and get no edge. CSR over
 * nodes (off has n_nodes + 1 entries; a reader may repeat); both malloc'd. False when out of
 * memory. */
bool sdp_war_preds(const ir_graph *g, int **off, int **pred);
void sdp_ctx_free(sdp_ctx *c); /* NULL-safe */

/* nw(v) for every node (sched_narrow_waist on a built context). */
ir_status sdp_narrow_waist(const sdp_ctx *c, int *nw, ir_diag *d);
/* Splits node indices 0..n-1 (the eager order) into parts that end right after each nw = 0 node:
 * every order keeps the parts in sequence. start receives n_parts + 1 bounds; returns n_parts. */
int sdp_partition(const int *nw, int n, int *start);

/* Positions of an order: pos[node] and lastpos[value] (the last reader's position, -1 if none). */
void sdp_positions(const sdp_ctx *c, const int *order, int *pos, int *lastpos);
/* Updates pos and lastpos after order[lo..hi) was permuted in place. */
void sdp_positions_update(const sdp_ctx *c, const int *order, int lo, int hi, int *pos,
                          int *lastpos);

/* A window [lo, hi) of an order as a self-contained problem over local nodes 0..m-1 (local i is
 * order[lo + i]). All arrays live in one arena. */
typedef struct sdp_prob {
    int m, nv;          /* local nodes, local (freeable) values */
    int *node;          /* local -> graph node index */
    size_t base, init;  /* see the file comment */
    size_t *add, *keep; /* per node */
    int *fo, *fr;       /* per node: freeable local values it reads */
    size_t *vb;         /* per local value: bytes */
    int *co, *cn;       /* per local value: reader local nodes */
    int *po, *pr;       /* per node: local predecessors */
    int *so, *su;       /* per node: local successors */
    int *gval;          /* per local value: its graph value id */
    int *scratch;       /* nv ints for sdp_prob_eval */
    void *arena;
} sdp_prob;

ir_status sdp_prob_build(sdp_ctx *c, const int *order, const int *pos, const int *lastpos, int lo,
                         int hi, sdp_prob *p, ir_diag *d);
void sdp_prob_free(sdp_prob *p); /* NULL-safe */
/* Peak over the window's steps, base included, of the local order lorder (m entries); steps
 * (may be NULL) receives each step's bytes and *at (may be NULL) the first step at the peak. */
size_t sdp_prob_eval(const sdp_prob *p, const int *lorder, size_t *steps, int *at);

/* Units: chains of local nodes always scheduled back to back. The identity contraction (one node
 * per unit) keeps the search exact; `contract` merges x -> w whenever x's only successor is w and
 * w's only predecessor is x (a heuristic for large windows: it can miss schedules that delay w). */
typedef struct sdp_units {
    int nu;
    int *qo, *q;  /* per unit: its nodes in order */
    int *uof;     /* per node: its unit */
    int *po, *pr; /* per unit: predecessor units */
    int *so, *su; /* per unit: successor units */
    int *fo, *fr; /* per node: values it frees when their readers outside its unit are done */
    int *co, *cu; /* per local value: reader units */
    void *arena;
} sdp_units;

ir_status sdp_units_build(const sdp_prob *p, bool contract, sdp_units *u, ir_diag *d);
void sdp_units_free(sdp_units *u); /* NULL-safe */

typedef struct sdp_search_opts {
    size_t tau;       /* keep only states whose peak (base included) is <= tau */
    int width;        /* states kept per level; more are cut to the best (peak, live) ones.
                       * Also bounded so that two levels fit in 64 MiB. The tables grow to it
                       * only as levels need (cheap when it is large and the window small). */
    long max_records; /* bound on the states kept over all levels (the memo) */
    bool even;        /* share max_records evenly among levels (a beam fills every level);
                       * otherwise a level takes what it needs while later ones keep one each */
    double deadline;  /* ir_now_seconds() value after which the search gives up */
} sdp_search_opts;

typedef struct sdp_search_result {
    bool found;    /* a complete order with peak <= tau was found (in lorder) */
    bool overflow; /* some level was cut: the result is not proven optimal */
    bool timeout;
    size_t peak; /* base included */
    long states; /* states expanded */
} sdp_search_result;

/* Level-synchronous search over sets of scheduled units (downsets): level k holds the sets of k
 * units, each with the least peak reaching it (ties: order of discovery). With width and
 * max_records large enough it is exact; otherwise it is a beam. lorder receives m local nodes. */
ir_status sdp_search(const sdp_prob *p, const sdp_units *u, const sdp_search_opts *o, int *lorder,
                     sdp_search_result *r, ir_diag *d);

/* ---------------------------------------------------------------- ordering parts */

/* A working order of c's graph whose parts and windows are re-ordered in place, with its
 * positions kept in step, the resolved search options and the scratch every window shares.
 * sched_order_memory and sched_incremental both order their parts through it
 * (sched-order-memory.c). */
typedef struct sdp_orderer {
    sdp_ctx *c;
    int *ord, *pos, *lastpos; /* the order; pos[node], lastpos[value] (sdp_positions) */
    int *nw;                  /* per node; filled by the caller or on the first refinement */
    bool have_nw;
    int exact_max, beam;
    long max_states;
    double deadline;    /* of the whole call */
    double window_s;    /* at most per refining window: a tenth of the time budget */
    int *lorder;        /* 2 * n scratch: a window's local order */
    int *ident;         /* 0..n-1 */
    sched_dp_stats *st; /* states are added to st->states */
} sdp_orderer;

/* Resolves o's defaults (beam_default for beam_width; the time budget starts now) and allocates
 * the order and scratch for c's graph; ord is left for the caller to fill, then sdp_positions. */
ir_status sdp_orderer_init(sdp_orderer *w, sdp_ctx *c, const sched_dp_options *o, int beam_default,
                           sched_dp_stats *st, ir_diag *d);
void sdp_orderer_free(sdp_orderer *w); /* NULL-safe */

/* Peak of ord[lo, hi) (base included) and the first position at it (an index of ord). */
ir_status sdp_window_peak(sdp_orderer *w, int lo, int hi, size_t *peak, int *at, ir_diag *d);

/* Re-orders ord[lo, hi), a block whose order does not change the memory outside it, to lower its
 * peak: the exact DP when it holds at most exact_max nodes (*exact: proven optimal), otherwise a
 * beam over contracted chains, the DP over them when they are few, then sdp_refine. *peak
 * receives the block's peak afterwards; never higher than before. */
ir_status sdp_order_part(sdp_orderer *w, int lo, int hi, size_t *peak, bool *exact, ir_diag *d);

/* Windows around the peak step of ord[lo, hi), re-ordered exactly while that lowers the block's
 * peak: first of about exact_max contracted units spanning kc nodes (none when kc < 2), then of
 * exact_max single nodes. *peak receives the block's peak afterwards. */
ir_status sdp_refine(sdp_orderer *w, int lo, int hi, int kc, size_t *peak, ir_diag *d);

/* ---------------------------------------------------------------- in-place chains, fission groups
 * (sched-fission.c; schedule.h states the rules)
 *
 * An in-place output takes over its input's buffer (ir_value_inplace_of); following that from a
 * value reaches the root of its chain, the value that owns the buffer. Every counter in sched/
 * gives the root the buffer's bytes (the other values of the chain have none) and makes a read
 * of any value of the chain a read of the root, so the buffer lives until the chain's last use.
 *
 * Fission groups: nodes tagged "magpie_fission_group" = k with "magpie_fission_parts" = n >= 2.
 * A tag with n < 2 is no group (nothing is repeated). */

/* root[v] for every value of g (ir_graph_buffer_roots): v itself unless v is an in-place output
 * or a view, else the value owning the buffer it lives in (a resident for an optimizer update or
 * a view of a weight, a produced value otherwise), and a fused FissionAccumulate's part joins its
 * accumulate's buffer as every order that runs it after its first slice has it
 * (ir_graph_fused_parts without an order: the DP's and the swap placement's view;
 * sched_memory_compute decides it for its own order, as the executor does). */
void sfg_roots(const ir_graph *g, int *root);
/* sched_value_device_bytes in O(1) with g's roots: the bytes of a root on the device, else 0. */
size_t sfg_value_bytes(const ir_graph *g, const int *root, int v);
/* n is a view (ir_value_view_of of its output 0): no kernel, no time, no bytes. */
bool sfg_node_is_view(const ir_graph *g, const int *root, const ir_node *n);
/* n's group tag when it is tagged with >= 2 parts, else -1; *parts receives n (1 if none). */
int sfg_node_group(const ir_node *n, int *parts);
/* sched_node_seconds times the node's parts: the compute time a node of a fission group stands
 * for (sched_place_swaps's estimate; the simulator runs the other parts as one block). A
 * FissionAccumulate's part 0 copies instead of adding, and costs what sfg_part_seconds says. */
double sfg_node_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n);
/* sfg_node_seconds given t = sched_node_seconds(cost, g, root, n), for a caller that has it. */
double sfg_node_seconds_of(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n,
                           double t);
/* The time of one part of group node n (the kept part's node, index parts - 1): first for part 0,
 * where a FissionAccumulate costs as index 0 (a copy), else sched_node_seconds; and a fused
 * FissionAccumulate whose part root leaves a buffer of its own (root[part] == part: the order does
 * not let its producer write into the buffer, ir_graph_fused_parts) costs as `fused` 0, the
 * kernel of its own that the executor then runs. */
double sfg_part_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n,
                        bool first);

/* The fission groups of g under an order: numbered 0..n-1 by their first step. */
typedef struct sfg_groups {
    int n;
    int *parts;      /* per group */
    int *off, *node; /* per group: its node indices in order (CSR) */
    int *of;         /* per node: its group, or -1 */
    /* per root value produced in a group: some value of its chain (or view of it) is read by a node
     * outside that group or is a graph output, so a replay keeps it */
    uint8_t *ext;
    int *lastg, *at, *until; /* per value: replay scratch, -1 between uses */
} sfg_groups;

/* Finds the groups of g in order (a valid order; root from sfg_roots). When g has none, f->n is 0
 * and nothing is allocated. IR_ERR_NOMEM naming the graph size otherwise on failure. */
ir_status sfg_find(sfg_groups *f, const ir_graph *g, const int *order, const int *root, ir_diag *d);
void sfg_free(sfg_groups *f); /* NULL-safe */
/* The peak bytes of group k's nodes run alone in their order: each node's outputs (device bytes;
 * in-place outputs none) and workspace allocated, the peak sampled, then the workspace and every
 * buffer produced in the group whose chain is last read there (and not kept: ext) freed; outputs
 * nobody reads are freed at their step. *peak_at (may be NULL) receives the index in the group's
 * node list of the first node at the peak; live (may be NULL, one byte per value, zeroed by the
 * caller) gets a 1 for each buffer of the group live at that moment. */
size_t sfg_replay(sfg_groups *f, const ir_graph *g, const int *root, int k, int *peak_at,
                  uint8_t *live);

/* sched_memory_compute, handing the caller what it found on the way: the roots (sfg_roots; a
 * malloc'd array of g->n_values entries) in *root_out and the groups (sfg_find; sfg_free them) in
 * *fg_out, either may be NULL; set on success only. The simulator reads both again. */
ir_status sched_memory_compute_keep(const ir_graph *g, const int *order, sched_memory *m,
                                    int **root_out, sfg_groups *fg_out, ir_diag *d);

#endif
