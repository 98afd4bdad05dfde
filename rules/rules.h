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
 *              several users): adds A' reading A's inputs; B, and every other reader of v that
 *              is not an ancestor of B (the "late" readers), read A''s output instead of v.
 *              B may read v through views, as for RW_SWAP below: A' gets copies of them, and
 *              the original views left without a reader are removed.
 *              Random (Dropout), in-place and host-output ops are never rematerialized.
 *  RW_REMAT_CHAIN  as RW_REMAT, and A' reads copies of the producers it would otherwise keep
 *              alive for itself alone: a producer P of an input of a copied node joins the copy
 *              when every reader of every output of P is an ancestor of B (so nothing after B
 *              needs P's outputs, which the recompute would hold from P to B), P is recomputable
 *              and memory-bound (RW_REMAT_CHAIN_MAX_INTENSITY) and no output of P is a graph
 *              output; at most RW_REMAT_CHAIN_MAX nodes, and at least two (one is RW_REMAT).
 *              A softmax's output recomputed from the attention's Q and K, which its backward
 *              holds anyway: Softmax <- Div <- MatMul. The explorer offers it only with
 *              XS_RULE_CHAIN (`--rules ...,remat-chain`, and --refine's rounds).
 *  RW_DEREMAT  node_id = A, user_id = A2: same op, attributes and inputs; A2 is removed and its
 *              users read A's outputs. A2's outputs must not be graph outputs.
 *  RW_SWAP     node_id = A, value = output index of v, user_id = B: inserts Store(v) -> Load;
 *              B and v's other late readers (as for RW_REMAT; Stores excepted) read the Load's
 *              output instead of v. B may also read v through views (ir_value_view_of: a
 *              Reshape of v, a transposed operand of it, up to RW_REMAT_CHAIN_MAX links): then
 *              the Load gets copies of those views, and B and the other late readers of the view
 *              B reads read the copy; the original views left without a reader are removed (no
 *              node computes for nobody: the written plan would not have it, so the search must
 *              not count it). A view itself (v a view) is refused: it owns no bytes, its
 *              base is what to swap. A remat of a view recomputes it for free (no kernel, no
 *              bytes: ir.h) and holds its base until B. Views own no bytes, so they are never
 *              hot-spots and never candidates themselves.
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
    RW_SUBST,     /* a substitution rule (rules-subst.c): value = rw_subst_rule */
    RW_FT_ENABLE, /* F-Tree mutations (MAGIS 5.1, rules-ftree.c): node_id = F-Tree node index;
                   *   enable's value = its n (0: the least divisor) */
    RW_FT_LIFT,   /*   they change the fission configuration, not the base graph */
    RW_FT_DISABLE,
    RW_FT_MUTATE,
    RW_PET,         /* a PET candidate (pet-opt.h): node_id = its index in the search's pet_table;
                     *   applied to the base graph by pet_apply, not rw_apply */
    RW_REMAT_CHAIN, /* after the others, so that checkpoints keep their numbers */
    RW_KIND_COUNT,
} rw_kind;

typedef struct rw_rewrite {
    int kind; /* rw_kind */
    uint32_t node_id;
    int value; /* RW_REMAT(_CHAIN), RW_SWAP: output index of node_id; RW_SUBST: the rule; 0
                * otherwise */
    uint32_t user_id;
} rw_rewrite;

/* The most nodes one RW_REMAT_CHAIN recomputes, and the most FLOPs per byte read and written
 * of a producer it recomputes with A: memory-bound on every target magpie models (the
 * RTX 3090's ridge point is 35.6 TFLOP/s / 936 GB/s = 38 FLOP/B; attention's Q x K^T is
 * S*d / (2 (S + 2d)): 26 at S = 512, d = 64). */
#define RW_REMAT_CHAIN_MAX 8
#define RW_REMAT_CHAIN_MAX_INTENSITY 32.0

/* touched receives at most this many ids; rewrites that would touch more are refused. */
#define RW_MAX_TOUCHED 64

/* "remat", "deremat", "swap", "deswap", "subst", "ft-enable", "ft-lift", "ft-disable",
 * "ft-mutate", "pet", "remat-chain"; "?" otherwise */
const char *rw_kind_name(int kind);
/* The F-Tree mutations: they change the fission configuration, not the base graph. */
bool rw_is_ftree_kind(int kind);

/* Applies r to g and returns the new graph; g is left unchanged. touched (RW_MAX_TOUCHED
 * entries, may be NULL) receives the stable ids of the nodes added, removed or rewired (ids of g
 * or of the new graph, as sched_incremental takes them), *n_touched their count. On failure
 * returns NULL, *st (may be NULL) set (IR_ERR_INVALID when r does not apply to g) and d naming
 * the node and the cause. */
ir_graph *rw_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                   ir_status *st, ir_diag *d);

/* The values a remat's recompute reads from outside itself (r: RW_REMAT or RW_REMAT_CHAIN on
 * g, which must name nodes of g): the inputs of A for RW_REMAT, the inputs of the chain's nodes
 * that no node of the chain produces for RW_REMAT_CHAIN. Each once, at most max, into vals;
 * returns the count, or -1 when r is not such a remat of g or memory ran out. What they cost:
 * each is held from where it was last read before to B's step, which the explorer weighs
 * against the bytes the remat frees (keep_best). */
int rw_remat_reads(const ir_graph *g, const rw_rewrite *r, int *vals, int max);

/* Lists up to max rewrites that apply to g into out and returns how many it wrote (out may be
 * NULL with max 0 to count nothing). Heuristic H2 of MAGIS 5.2: remat and swap candidates only
 * for memory hot-spots of m (a sched_memory_compute of g) that nodes produce (not weights or
 * graph inputs), one per user scheduled after the value's first user (a remat only for a user
 * that has another reader of the value among its ancestors, which keeps the original); a swap
 * also for the first user when it runs two steps or more after the producer, and for readers of
 * the value's views (RW_SWAP above); deremat candidates for
 * every pair of mergeable nodes and deswap candidates for every user of a Store/Load pair.
 * Order: remat, swap, deremat, deswap; deterministic. */
int rw_candidates(const ir_graph *g, const sched_memory *m, bool chains, rw_rewrite *out, int max);

/* ================================================================ substitution rules
 * (rules-subst.c) Fully equivalent rewrites in the spirit of TASO (MAGIS 5, "TASO rules") for
 * the ops magpie has. They keep mathematical equivalence; outputs may differ in the last bits
 * (a merged GEMM sums in another order), within the float32 tolerance of magpie verify. A
 * substitution is an rw_rewrite with kind RW_SUBST, value the rule, node_id and user_id the
 * matched nodes (see each rule), applied by rw_apply like the others. */
typedef enum rw_subst_rule {
    /* node_id, user_id: two MatMuls (or Gemms without transA) reading the same input A, with
     * constant right-hand sides B1, B2 of equal K: A @ concat(B1, B2) then Split. */
    RW_SUBST_MERGE_MATMUL = 0,
    /* node_id, user_id: two Convs on the same input with equal kernel, strides, pads,
     * dilations, group 1: one Conv with weights concatenated along Cout, then Split. */
    RW_SUBST_MERGE_CONV,
    /* node_id: a MatMul whose left input is a Concat along a row (non-last) axis:
     * concat(A1, A2) @ B -> concat(A1 @ B, A2 @ B); and back (user_id 0). */
    RW_SUBST_CONCAT_MATMUL,
    /* node_id: an Add or Mul whose one input is produced by the same op with a constant
     * operand, its other input constant: (x op a) op b -> x op (a op b), the constant folded. */
    RW_SUBST_REASSOC,
    /* node_id: an Add of two Muls sharing an operand: a*x + b*x -> (a + b)*x. */
    RW_SUBST_DISTRIBUTE,
    /* node_id: a Transpose of a Transpose (composed into one, or removed when the identity), or
     * a Reshape of a Reshape (one Reshape), or a Transpose/Reshape/Identity that changes
     * nothing (removed). */
    RW_SUBST_LAYOUT_ELIM,
    /* node_id: an op whose inputs are all weights with data (an inference graph's
     * initializers), computed once: its readers read the result as a constant (rules-fold.c). */
    RW_SUBST_FOLD_WEIGHTS,
    /* node_id: a 1x1 stride-1 Conv reading an AveragePool (reading a Pad, or not) that it alone
     * reads, with fewer output than input channels: the conv runs first, on the pool's input,
     * and the pool (and pad) move its output; a bias that the padding would scale is added after
     * the pool (rules-pool.c). */
    RW_SUBST_CONV_BEFORE_POOL,
    RW_SUBST_RULE_COUNT,
} rw_subst_rule;

const char *rw_subst_rule_name(int rule); /* "merge-matmul", ...; "?" otherwise */
/* Lists up to max substitutions that apply to g (deterministic order), like rw_candidates. */
int rw_subst_candidates(const ir_graph *g, rw_rewrite *out, int max);

/* ================================================================ dimension graph
 * (rules-dgraph.c, MAGIS 4.1) D(G): a vertex per (value, dimension) of every value a node
 * produces, and per (node, reduce axis), and one more for each one's inner factor (a reshape
 * that merges B into S*B, as nn.MultiheadAttention's export does around its output projection,
 * links B to the inner factor of S*B: IR_DIMLINK_OUT_INNER); edges from the op table's dimension
 * links (ir_node_dims), a link between two dims of one length joining their inner factors too.
 * Residents (weights, graph inputs) are vertices too, so a component says which inputs of a
 * sub-graph are sliced and which are shared. Components are numbered 0..n_components-1 in a
 * deterministic order (by first vertex in node order). */
typedef struct rw_dgraph rw_dgraph;

rw_dgraph *rw_dgraph_build(const ir_graph *g); /* NULL when out of memory */
void rw_dgraph_free(rw_dgraph *dg);            /* NULL-safe */
int rw_dgraph_n_components(const rw_dgraph *dg);
/* Component of value v's dimension dim (0-based), or -1 when it has none (a scalar, or dim out
 * of range). */
int rw_dgraph_value_comp(const rw_dgraph *dg, int v, int dim);
/* Component of node index i's reduce axis r (1-based, as -ir_dimlink.out_dim), or -1. */
int rw_dgraph_reduce_comp(const rw_dgraph *dg, int node, int r);
/* The component of the inner factor of value v's dimension dim (a reshape merged dims into it:
 * B in [S*B, E], IR_DIMLINK_OUT_INNER), or of node i's reduce axis r; -1 when it has none. A
 * fission along it splits the dim into strided parts (rw_fission_check). */
int rw_dgraph_value_inner_comp(const rw_dgraph *dg, int v, int dim);
int rw_dgraph_reduce_inner_comp(const rw_dgraph *dg, int node, int r);
/* The length of value v's dimension dim's inner factor (B of S*B, or B*H where [S, B*H, d] was
 * merged into [S*B*H, d]): what a reshape that names it gives it, carried along links between
 * dims of one length; 0 when none names it, -1 when two disagree. A strided split into n parts
 * views the dim as [len / K, K] and cuts K into n blocks (rw_fission_apply). */
int64_t rw_dgraph_value_inner_len(const rw_dgraph *dg, int v, int dim);
/* True when that reduce axis is a sum (IR_DIMLINK_SUM on every link into it). */
bool rw_dgraph_reduce_is_sum(const rw_dgraph *dg, int node, int r);
/* The length of the dimension the component stands for: the greatest common divisor of its
 * value dims' lengths, which are all equal except where a reshape links a dim to a merged one
 * whose outer factor it is (B to B*H): n parts of B are then n contiguous blocks of B*H, so a
 * fission into n parts needs n to divide this length. 0 when a dim is empty. */
int64_t rw_dgraph_comp_length(const rw_dgraph *dg, int comp);
/* The dimension of value v in component comp (0-based; the dim or its inner factor), or -1; the
 * reduce axis (1-based) of node i in comp, or 0. */
int rw_dgraph_value_dim_in(const rw_dgraph *dg, int v, int comp);
int rw_dgraph_reduce_in(const rw_dgraph *dg, int node, int comp);

/* ================================================================ fission (MAGIS 4.2)
 * f = (S, D, n): the sub-graph S (stable node ids) split along the D-graph component D into n
 * parts. D is named by a seed vertex so it can be found again on any graph of the same lineage
 * (ids are stable): output seed_out of node seed_id, its dimension seed_dim (>= 0), or the
 * node's reduce axis -seed_dim (< 0). */
typedef struct rw_fission {
    uint32_t *ids; /* S, sorted ascending */
    int n_ids;
    uint32_t seed_id;
    int seed_out, seed_dim;
    int parts; /* n >= 2 when applied */
} rw_fission;

/* Checks f on g: every id present (ids sorted ascending, parts >= 1; 1 is the F-Tree's
 * candidate); G[S] weakly connected and convex (MAGIS 4.2 constraints (1), (2)); no redundant
 * computation (3): each node of S has, in D, exactly one dimension per output and no reduce axis
 * (a split node), or no output dimension and exactly one reduce axis that is a sum (a partial
 * node, e.g. a weight gradient over the batch); every edge inside S is linked in D: the value on
 * it has a D-dimension and its reader links that dimension, and so does every reader in S of an
 * input of S that has a D-dimension (it reads a slice); every node of S reads at least one value
 * with a D-dimension (so every part starts at a slice: a node of S reading only constants, such
 * as Expand of the loss seed, is refused); no node of S is opaque, random, in place, a swap, a
 * fission op or already tagged; parts divides D's length (all of D's dims have one length); a
 * value on S's border (an input it slices, an output it assembles) with D as the inner factor
 * of a dim only (a strided split: its parts are strided sets of elements) has that factor's
 * length known (rw_dgraph_value_inner_len) and divisible by parts: rw_fission_apply cuts it
 * through views that expose the factor. Inside S such a dim is divided like any other.
 * S's replicas join it first: a layout op outside S (Transpose, Reshape, ...) of residents
 * without a D-dimension whose outputs only S reads, such as a weight's Transpose before a
 * Linear layer's MatMul, which each part then recomputes instead of holding it through all of
 * them (the one deliberate exception to (3); rules-fission.c).
 * IR_ERR_INVALID with d naming the node of the first violation and its cause. */
ir_status rw_fission_check(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f, ir_diag *d);

/* Why D (component comp of dg, g's dimension graph) cannot be split as a whole: the first node
 * at index >= from, in node order, among D's nodes (those with an output dimension or a reduce
 * axis in D) and their readers, that rw_fission_check refuses on its own or on one of its
 * edges (the per-node rule of constraint (3), the edge rule; S taken as all of those nodes,
 * without replicas). Returns its index with d naming it and the cause in rw_fission_check's
 * words; -1 when none is left, -2 when out of memory. For `magpie inspect
 * --fission`: the node that stops a user's batch. */
int rw_fission_break_at(const ir_graph *g, const rw_dgraph *dg, int comp, int from, ir_diag *d);

/* The ids of S's convex closure in g, sorted ascending, into *out (malloc'd; the count is
 * returned): S and every node of g on a path between two nodes of S. On the graph S was found on
 * that is S itself (a valid S is convex); on a graph rewritten since, it adds what a rewrite put
 * inside the region (a copy rematerialized between two nodes of S), which then joins the
 * fission: MAGIS's schedule rules transform the one copy inside an F-Trans region, and the
 * copies are split with it. A node of S that a rewrite removed since (an unread view: RW_SWAP)
 * is left out. -1 (and *out NULL) when an id of S was never in g or out of memory. */
int rw_fission_closure(const ir_graph *g, const rw_fission *f, uint32_t **out);

/* The one-copy graph of g under the fissions fs[0..n) (disjoint S; each passes
 * rw_fission_check, which apply re-runs on the graph the previous fissions left):
 * MAGIS's F-Tree keeps one of the n isomorphic parts, and so does magpie.
 * For each f (its group number k is its index in fs):
 *  - FissionBuffer nodes (run once, untagged) allocate each output of S at its full shape; the
 *    outputs of S are its values read outside S or graph outputs;
 *  - a border value with D as the inner factor K of its dim (B of [S*B, E]) is viewed as
 *    [len / K, K] by a Reshape (a view: no bytes), sliced or assembled on K's axis, and the part
 *    viewed back (for an input, the exposing view is untagged and an ordering input of every
 *    slice; for an output, the buffer has the exposed shape and an untagged view of the
 *    assembled whole, under the output's name, replaces it);
 *  - for each input of S with a dimension in D: one FissionSlice(input, buffers..., others...)
 *    cuts the part (axis, parts, index = parts-1), shared by every reader in S; its inputs after
 *    the first are ordering-only: every buffer of the group and every other value that S reads
 *    from outside and a node produces, so in any order everything a part needs from outside
 *    exists before the group's first step, where the materialized graph runs the other parts;
 *    inputs of S without a dimension in D (weights) are shared as they are;
 *  - the nodes of S, keeping their ids and value ids, with every value's D-dimension divided by
 *    n: shape-carrying inputs and attributes (Reshape's and Expand's shape, Resize's and
 *    ResizeGrad's sizes, the `shape` attribute of magpie's backward ops) are re-written, every
 *    node re-inferred, and each output must come out as its old shape with the D-dimension
 *    divided, else IR_ERR_INVALID (something in S depends on the whole length);
 *  - for each output of S: FissionAssemble(buffer, part) (axis, parts, index) for an output
 *    with a dimension in D, FissionAccumulate(buffer, part) for one summed over a reduce axis:
 *    both write into the buffer in place (IR_OPF_INPLACE) and their output replaces the old
 *    output value for its readers outside S and among the graph outputs. The assembled value
 *    takes the old value's name (graph outputs keep their names); the part is renamed
 *    "<name>.part<assemble id>".
 * Every node of the part (slices, S, assembles) carries the int attributes
 * "magpie_fission_group" = k and "magpie_fission_parts" = n: sched_memory_compute and
 * sched_simulate read them to account the n-1 other parts (see schedule.h), so the one-copy
 * graph is scheduled and simulated with the exact peak and latency of the materialized one.
 * New nodes get fresh ids from g->next_node_id. touched (may be NULL; room for
 * RW_MAX_FISSION_TOUCHED) receives the ids of S and of the nodes added, *n_touched their count.
 * NULL on failure with d set. */
#define RW_MAX_FISSION_TOUCHED 65536
ir_graph *rw_fission_apply(const ir_graph *g, const rw_fission *fs, int n, uint32_t *touched,
                           int *n_touched, ir_diag *d);

/* rw_apply(g_b, r) carried over to its one-copy graph ge = rw_fission_apply(g_b, ...) without
 * re-applying the fissions (rules-fission-direct.c): r applied to ge directly, its new nodes
 * given the ids they got in g_b (first_new = g_b's next id, new_next = the rewritten g_b's; at
 * most base, ge's first fission id) and, inside a region, the group's tags; ge's next id is kept.
 * touched_b[0..nt_b) are the ids rw_apply touched in g_b; touched (RW_MAX_TOUCHED) and
 * *n_touched get those it touched in ge, the same set. The result is the graph re-applying the
 * fissions to the rewritten g_b would give, up to node order and the names of new nodes and
 * constants. NULL with *st = IR_ERR_INVALID where that cannot be relied on (r touches nodes on
 * both sides of a region's border, a new node would lie outside the region it was made in, r
 * acts otherwise on ge, r is not a remat, swap, their inverses or a substitution): re-apply
 * the fissions then. IR_ERR_NOMEM when out of memory. */
ir_graph *rw_apply_one_copy(const ir_graph *ge, uint32_t first_new, uint32_t new_next,
                            uint32_t base, const rw_rewrite *r, const uint32_t *touched_b, int nt_b,
                            uint32_t *touched, int *n_touched, ir_status *st, ir_diag *d);

/* Materializes a one-copy graph (rw_fission_apply's) scheduled by order: each group's n-1 other
 * parts are cloned (slice and assemble indices 0..n-2) and placed, one part after another, just
 * before the group's first node in order; the assembles of one output chain through the buffer
 * (part 0's reads the buffer, each next one the previous one's output, the kept part's last);
 * the tags are dropped; clones are named "<name>.fis<k>p<part>". The materialized graph's node
 * array is that order, so *out_order (malloc'd) is the identity; executing it measures the peak
 * that sched_memory_compute gives for (one_copy, order). NULL on failure with d set
 * (IR_ERR_INVALID when order is not a permutation or does not suit the groups). */
ir_graph *rw_fission_materialize(const ir_graph *one_copy, const int *order, int **out_order,
                                 ir_diag *d);

/* ================================================================ batch norm in two phases
 * (rules-bn.c) A copy of g (a forward graph, before ir_build_training) whose training-mode
 * BatchNormalization nodes are standard ops: the batch statistics as ReduceSums over the batch
 * and the centered second sum, per-channel arithmetic on them, Y and the running statistics per
 * element or per channel, so that the dimension graph follows the batch through them and
 * autodiff gives a backward whose batch reductions are sums too. It computes what g computes.
 * *n_done gets the count; NULL with d set (IR_ERR_UNSUPPORTED where a node's saved statistics
 * are read) on failure. */
ir_graph *rw_bn_two_phase(const ir_graph *g, int *n_done, ir_diag *d);
/* f = (S, D, n) cut into phases (rw_fission_apply takes them as one array): a node's phase is the
 * largest number of S's partial results (nodes of S with no output dimension in D, such as the
 * batch sums of a batch norm) that S reads again on a path to it; each phase's connected pieces
 * are one fission, with f's seed and parts. Every part's partial sums of a phase are
 * accumulated before any part of the next phase starts; per-channel nodes between them run
 * once. Returns the count, *out malloc'd with every ids array in one block that (*out)[0].ids
 * owns (free it, then *out); -1 with d set on failure. */
int rw_fission_phases(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f, rw_fission **out,
                      ir_diag *d);

/* ================================================================ F-Tree (MAGIS 4.3, 5.1)
 * Built by Algorithm 1 on a graph and its memory hot-spots: for every component D of D(G)
 * (that can be split: length >= 2), the sub-graph G' induced by D's nodes (those with an output
 * dimension or a reduce axis in D, with every edge of g between them), its dominator tree
 * T (from a virtual root before G''s sources), heat (eq. 3) and score (eq. 4, n = 2) per node,
 * L score intervals; each selected v_dom gives the candidate S = T.des(v_dom) \ {v_dom} when
 * S is not empty and (S, D, 1) is a valid fission (rw_fission_check).
 *  - heat(v): bytes (sched_value_device_bytes) of the hot-spots produced by the nodes v
 *    dominates, v included; hot-spots that are residents count nowhere;
 *  - score(v) = heat(v) / 2 - the bytes of the values nodes of S read and S does not produce
 *    (v's outputs, residents at ir_value_bytes, values of nodes outside G');
 *  - interval l = 1..L holds normalized scores in [l/L, (l+1)/L) (the last: exactly the
 *    maximum); below 1/L, or a maximum <= 0, selects nothing; v_dom: no strict T-descendant in
 *    the same interval.
 * The same S found in several components is kept once, in the one with the longest dimension
 * (the first on a tie). A node's parent is the smallest node of its component whose S strictly
 * contains its S (within a component the S nest or are disjoint); nodes of different
 * components are separate roots, and their S may overlap. Nodes are ordered by component,
 * then by |S| descending, so a parent precedes its children; roots have parent -1. The tree
 * and every S are one allocation; building is reentrant (explorer threads may build at once). */
typedef struct rw_ftree_node {
    rw_fission f;    /* f.parts is 1 in the tree; the configuration holds the state's n */
    int parent;      /* index or -1 */
    int64_t dim_len; /* length of the dimension D splits */
    double heat, score;
    int comp; /* D-graph component on the graph the tree was built from */
} rw_ftree_node;

typedef struct rw_ftree {
    int n;
    rw_ftree_node *nodes;
} rw_ftree;

/* Algorithm 1 with L levels (L <= 0: 4) on g with the memory m of one of its orders. Returns
 * NULL when out of memory; an empty tree (n = 0) when nothing can be split. */
rw_ftree *rw_ftree_build(const ir_graph *g, const sched_memory *m, int L);
void rw_ftree_free(rw_ftree *t); /* NULL-safe */

/* A fission configuration is an int per tree node: its n (1 = disabled). The mutation rules of
 * MAGIS 5.1, as rw_rewrites of kind RW_FT_* with node_id = tree node index (value, user_id 0).
 * They keep the enabled nodes' S pairwise disjoint, as rw_fission_apply requires: no enabled
 * node has an enabled ancestor or descendant, and enabled nodes of different components never
 * share a graph node. (magpie does not nest fissions: the paper's enabling of the parent of an
 * enabled node would split a split, so enabling a parent is only done by lift, which moves the
 * split up.)
 *  - enable: a disabled node whose S meets no enabled node's S (so without enabled ancestors
 *    or descendants; MAGIS enables leaves only, rules-ftree-mut.c says why magpie does not);
 *    n = r.value, a divisor >= 2 of dim_len (0: the least). Listed once per n at the three
 *    least divisors (2, 4 and 8 for 8; MAGIS enables at the least only, and
 *    RW_FT_ENABLE_COUNTS in rules-ftree-mut.c says why magpie offers more);
 *  - lift: an enabled node with a parent whose S meets no other enabled node's S: the node is
 *    disabled and its parent enabled with the same n (when n divides the parent's dim_len,
 *    else its least divisor);
 *  - disable: an enabled node without enabled descendants;
 *  - mutate: an enabled node's n goes to the next divisor of dim_len above it (none after
 *    dim_len itself).
 * Lists up to max of them, by kind (enable, lift, disable, mutate), then by node index, and
 * returns the count. */
int rw_ftree_mutations(const rw_ftree *t, const int *config, rw_rewrite *out, int max);
/* Applies a mutation: new_config (t->n entries; may alias config) receives the result. False
 * when it does not apply. */
bool rw_ftree_mutate(const rw_ftree *t, const int *config, const rw_rewrite *r, int *new_config);
/* The enabled fissions of config, as rw_fission_apply takes them (f.parts set; ids shared with
 * the tree); returns their count (at most t->n). */
int rw_ftree_enabled(const rw_ftree *t, const int *config, rw_fission *out);

/* ---------------------------------------------------------------- graph-building helpers */

/* Shared by the rewrites here and by PET's mutant generator (rules/pet/), which builds graphs
 * the same way. */
/* Adds a 1-D int64 constant of n entries named `name` (copied); its value id, -1 when out of
 * memory. */
int rw_add_const_i64(ir_graph *g, const char *name, int n, const int64_t *vals);
/* Adds a constant value named `name` (copied) holding blob b, which it takes over (released on
 * failure; b NULL fails); its value id, -1 when out of memory. */
int rw_add_const_blob(ir_graph *g, const char *name, ir_dtype t, const ir_shape *s, ir_blob *b);

#endif
