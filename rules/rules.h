/* rules.h - graph rewrites of magpie's memory optimizer (DESIGN.md: rules/ may use ir, profiler,
 * sched). This header holds the schedule-based rules of MAGIS section 5.2: rematerialization,
 * de-rematerialization, swapping (Store/Load) and de-swapping, and their candidates.
 *
 * Contracts:
 *  - graphs are values (DESIGN.md decision 3): rw_apply never modifies its input graph; it
 *    returns a new graph (ir_graph_clone, then edited) that the caller frees;
 *  - a rewrite names nodes by stable id (ir_node.id), never by index, so it can be replayed on a
 *    re-materialized graph of the same lineage; nodes it adds get fresh ids from
 *    g->next_node_id;
 *  - every rewrite keeps exact equivalence (decision 4): the new graph computes bit-identical
 *    outputs; it is re-sorted topologically (ir_graph_toposort keeps the old order where it
 *    can), new nodes are shape-inferred, and the result passes ir_graph_validate (debug builds,
 *    MAGPIE_DEBUG, also re-infer every node and compare shapes).
 *
 * The kinds (A, B are nodes; v = A's output r->value):
 *  RW_REMAT    node_id = A, value = output index of v, user_id = B (a user of v, v having
 *              several users): adds A' reading A's inputs; B reads A''s output instead of v.
 *              Random (Dropout), in-place and host-output ops are never rematerialized.
 *  RW_DEREMAT  node_id = A, user_id = A2: same op, attributes and inputs; A2 is removed and its
 *              users read A's outputs. A2's outputs must not be graph outputs.
 *  RW_SWAP     node_id = A, value = output index of v, user_id = B: inserts Store(v) -> Load ->
 *              B, B reading the Load's output instead of v.
 *  RW_DESWAP   node_id = L (a Load whose input a Store produces), user_id = B (a user of L): B
 *              reads the Store's input again; L and then the Store are removed once unused.
 */
#ifndef MAGPIE_RULES_H
#define MAGPIE_RULES_H

#include "ir.h"
#include "schedule.h"

typedef enum rw_kind {
    RW_REMAT = 0,
    RW_DEREMAT,
    RW_SWAP,
    RW_DESWAP,
    RW_KIND_COUNT,
} rw_kind;

typedef struct rw_rewrite {
    int kind; /* rw_kind */
    uint32_t node_id;
    int value; /* RW_REMAT, RW_SWAP: output index of node_id; 0 otherwise */
    uint32_t user_id;
} rw_rewrite;

/* touched receives at most this many ids; rewrites that would touch more are refused. */
#define RW_MAX_TOUCHED 64

const char *rw_kind_name(int kind); /* "remat", "deremat", "swap", "deswap"; "?" otherwise */

/* Applies r to g and returns the new graph; g is left unchanged. touched (RW_MAX_TOUCHED
 * entries, may be NULL) receives the stable ids of the nodes added, removed or rewired (ids of g
 * or of the new graph, as sched_incremental takes them), *n_touched their count. On failure
 * returns NULL, *st (may be NULL) set (IR_ERR_INVALID when r does not apply to g) and d naming
 * the node and the cause. */
ir_graph *rw_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                   ir_status *st, ir_diag *d);

/* Lists up to max rewrites that apply to g into out and returns how many it wrote (out may be
 * NULL with max 0 to count nothing). Heuristic H2 of MAGIS 5.2: remat and swap candidates only
 * for memory hot-spots of m (a sched_memory_compute of g) that nodes produce (not weights or
 * graph inputs), one per user scheduled after the value's first user; deremat candidates for
 * every pair of mergeable nodes and deswap candidates for every user of a Store/Load pair.
 * Order: remat, swap, deremat, deswap; deterministic. */
int rw_candidates(const ir_graph *g, const sched_memory *m, rw_rewrite *out, int max);

#endif
