/* pet-gen.h - PET's program splitting (PET paper §6.1) and mutation generator (§4.1 Algorithm 1,
 * §6.2 rounds and operator subsets). The verifier (pet.h) decides later which mutants, or which
 * of their boxes, are equivalent; nothing here verifies.
 *
 * Splitting (pet-split.c). An op is multilinear for splitting (pet_node_is_multilinear) when the
 * verifier can evaluate it over Z_p: Conv, ConvTranspose, MatMul, Gemm, Add, Sub, Mul, Sum, Neg,
 * Identity, AveragePool, GlobalAveragePool, ReduceSum, ReduceMean, CumSum, Transpose, Reshape,
 * Flatten, Squeeze, Unsqueeze, Concat, Split, Slice, Pad in constant mode, Expand, Tile, with
 * every data input and output of a float dtype. Everything else cuts: activations, Softmax, the
 * normalizations, MaxPool, Resize, Div, Pow, Gather, Cast, opaque ops (§6.1: non-linear ops are
 * the splitting points). A sub-program is a set of multilinear nodes that is
 *  - connected: a maximal set linked by values one member produces and another reads, cut
 *    further where that set is not convex (a path leaves it through a non-linear op and comes
 *    back, as in a gating x * sigmoid(mean(x))): such a set is split by "non-linear depth" (the
 *    most non-linear ops on any path from the graph's inputs), which makes every part convex;
 *  - or a group of such sets (§6.1 "combined into one"): sets with no path between them that
 *    read a common activation (the parallel branches of an Inception block, the 1x1 and 3x3
 *    convs of a ResNet down-sampling block) or that have the same ops on the same input shapes
 *    (batchable), at most pet_split_opts.max_group sets and max_group_nodes nodes per group.
 * Affine parts stay with their op: a Conv's bias (input 2) and a Gemm's C are inputs of the
 * sub-program marked input_bias; the verifier evaluates the program's multilinear part (biases
 * as zero, pet.h), and the generator keeps every bias attached to the weight it was added with
 * (see "Biases" below), so the biases land on the same outputs in the mutant.
 *
 * Generation (pet-gen.c, pet-gen-ops.c). pet_gen_mutants runs Algorithm 1 on one program (a
 * standalone ir_graph, e.g. from pet_subprog_extract): a depth-first enumeration that starts
 * from the program's inputs and adds one op at a time from the set O, to `depth` ops, by
 * iterative deepening (depth 1, then 2, ...: all mutants of d ops come before any of d + 1, so
 * the state budget max_states only ever cuts the deepest level; stats.truncated says so):
 *   Conv (strided, dilated, grouped), MatMul (batched), Gemm (only where the program has one),
 *   Add, Mul, Concat, Split, Pad, Slice, and one "layout" op: a Reshape, Transpose, Reshape
 *   chain counted as one op (§4.2), materialized as up to three ONNX nodes.
 * Operands are the program's inputs (graph inputs and float constants) and the outputs of the
 * ops added so far. Attributes come from finite sets derived from the program:
 *  - Conv: each original Conv's (strides, dilations, pads, group); its regular variant (stride
 *    1, dilation 1, pads divided by the dilation); the group times 2..n for n original convs
 *    (grouping parallel convs);
 *  - Gemm: each original Gemm's (alpha, beta, transA, transB);
 *  - layout: a swap of two dims; a rotation of all dims by one; a merge of two adjacent dims; a
 *    split of a dim by a factor f; a move of the outer f-part of one dim to the outer part of
 *    another (f the whole dim: "concatenate along another dim", batch-to-width); space-to-batch
 *    and batch-to-space by f over every dim after the first two (a dilated conv's phases,
 *    figure 3). The factors f come from the program: its dims 0 (batch) > 1 of inputs and
 *    outputs of rank >= 3, and its convs' strides, dilations and groups > 1;
 *  - Concat: 2 to m operands in operand order (other orders give the same mutants up to the
 *    output assignment), on any axis where the shapes fit; m (at most 4) is the number of
 *    Conv/MatMul/Gemm nodes, of outputs, or of operands of an original Concat, whichever is
 *    largest;
 *  - Split: an axis into (s, L - s) for s a length of a dim of the program's inputs and
 *    outputs, into f equal parts, or into the lengths of the original outputs along that axis;
 *  - Slice: the first or last s of an axis, s such a length;
 *  - Pad: an original conv's spatial pads or an original Pad's pads; a weight's kernel dims
 *    padded (centred) to another weight's kernel size (merging a 1x1 into a 3x3, §4.2).
 * Kept: programs whose dangling tensors (op outputs nobody reads) match the original's outputs
 * one to one in dtype, shape and degree (below), that read every input and differ from the
 * original (pet_gen_graph_hash). When several assignments of dangling tensors to outputs fit,
 * each is a mutant.
 * Pruning (counted in pet_gen_stats):
 *  - order: a set of ops is built in one order only: an op that reads nothing the previous op
 *    produced must have a larger canonical hash than that op (each op hashes its kind,
 *    attributes and operands' hashes, name-free); the set's hash-least topological order
 *    always qualifies, so nothing is lost;
 *  - visited: a state (the set of ops) is expanded once (what the order rule leaves, such as
 *    two ops that build the same tensor);
 *  - repeat: no op twice on the same operands with the same attributes;
 *  - inverse: no split of a concat into its operands, no concat of a split's parts in order, and
 *    no layout op on a layout op's output (the two fuse into one layout op, §6.3; so a
 *    transpose and its inverse never meet);
 *  - shape: shape inference (ir_node_infer, or the layout's own arithmetic) rejects the op;
 *  - size: no tensor above max_size_factor x the largest tensor of the original;
 *  - degree: every tensor is a polynomial in the inputs of some degree in each (a bound over
 *    the whole tensor: a split part keeps its whole's); a tensor of higher degree in an input
 *    than every original output is useless (a product of a weight with itself), and so is one
 *    of a higher total degree (a product of two convolutions); an output must involve every
 *    input its original involves;
 *  - dangling: k outputs, D tensors still waiting for a reader (op outputs and unused inputs,
 *    biases aside) and r ops to go: an op reduces D by at most m - 1 for m operands, so states
 *    with D - k > r * (m_max - 1) are cut (in any order of a complete program's ops each
 *    intermediate state meets this bound, so nothing is lost); on the last op this admits only
 *    ops that consume what is left, and that add the biases still unused.
 * Biases. A weight read as a Conv's W or a Gemm's B carries its bias (the original node's
 * input 2) as a companion: a Conv/Gemm of the mutant on that weight adds that bias; a Concat of
 * weights along the output-channel axis concatenates their biases (one Concat of the biases,
 * not counted as an op: it is pre-processing of weights, §6.3); a Pad or Split of another axis
 * keeps it; anything else drops it. A bias is "used" only through its weight.
 *
 * Rounds and subsets (pet_gen_optimize, pet-gen-opt.c, §6.2 Algorithm 2 lines 7-26): round 1
 * mutates the program; each later round mutates the top_k cheapest programs of the round before
 * (ties: the first found). Ops are counted as the generator counts them (a chain of
 * Reshape/Transpose nodes is one op). A program of more than subset_ops ops is mutated through
 * its connected convex subsets of at most subset_ops ops holding a Conv/MatMul/Gemm (linked by
 * data edges or a common input), each extracted as a program, mutated, and spliced back (new
 * values and nodes named "pet.s<n>.*"). Costs: pet_gen_cost, then the judge's. The result holds
 * the top_k cheapest distinct programs of all rounds (each a mutant of the whole program, with
 * its input and output names). Without a judge the candidates are unverified, so later rounds
 * mutate programs that may be wrong everywhere; PET verifies before ranking, hence the judge.
 *
 * Classes (pet_mutant_classify, pet-gen-class.c), assigned after generation from what the
 * mutant contains, first rule that holds:
 *  1. dilated-to-regular: the original has a Conv with a dilation > 1 and the mutant has a
 *     Conv on the same weight (traced through layout ops) with every dilation 1 whose data
 *     input's batch dim holds elements of spatial dims of its source (the phases, figure 3);
 *  2. batch-to-width / batch-to-height: a Conv of the mutant whose data input's last dim (width)
 *     / second-to-last dim (height) holds elements of the batch dim (dim 0, length > 1) of a
 *     program input, traced back through Reshape/Transpose/Concat;
 *  3. merged-parallel: the mutant has fewer Conv/MatMul/Gemm nodes than the original and one
 *     of them reads a Concat (possibly through Pad/layout ops) of several program inputs;
 *  4. matmul-transpose: a MatMul/Gemm of the mutant reads an operand, or produces a value,
 *     whose last two dims are swapped by a Transpose;
 *  5. layout: the mutant has Reshape/Transpose/Concat/Split nodes (other data movement);
 *  6. other.
 *
 * Everything here is re-entrant; a call runs on the calling thread. */
#ifndef MAGPIE_PET_GEN_H
#define MAGPIE_PET_GEN_H

#include "ir.h"
#include "prof.h"
#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- splitting (pet-split.c) */

/* True when node n of g may belong to a sub-program (the op list above, float data). */
bool pet_node_is_multilinear(const ir_graph *g, const ir_node *n);

/* What an input of a sub-program is in the source graph. */
typedef enum pet_input_kind {
    PET_IN_ACTIVATION = 0, /* produced by a node outside, or a data graph input */
    PET_IN_WEIGHT,         /* a parameter graph input without a value (export_params=False) */
    PET_IN_INITIALIZER,    /* a float initializer with its value: a constant weight */
    PET_IN_LITERAL,        /* a float constant that is no weight (a folded scale): stays a
                            * constant in the extracted program, where the verifier reads its
                            * exact value */
} pet_input_kind;

typedef struct pet_subprog {
    int n_nodes;
    int *nodes;         /* node indices in the source graph, ascending (a topological order) */
    uint32_t *node_ids; /* their stable ids, in the same order */
    int n_inputs;
    int *inputs;               /* float values it reads and does not produce, by first reader;
                                * integer constants (shapes, axes, pads) are op parameters, not
                                * inputs: the extracted program copies them as constants */
    unsigned char *input_kind; /* pet_input_kind per input */
    unsigned char *input_bias; /* 1 when every reader in it reads the input as a Conv/
                                * ConvTranspose bias or a Gemm's C (an affine part) */
    int n_outputs;
    int *outputs;  /* values it produces that a node outside reads or the graph outputs, in node
                    * order (by producer, then output index) */
    int n_parts;   /* connected sets grouped into it (1: one connected set) */
    int n_compute; /* its Conv, ConvTranspose, MatMul and Gemm nodes */
} pet_subprog;

typedef struct pet_split {
    int n;
    pet_subprog *progs;      /* ordered by their first node */
    int n_multilinear_nodes; /* nodes in some sub-program */
    int n_cut_nodes;         /* nodes in none (non-linear ops and the like) */
    int n_grouped;           /* sub-programs with n_parts > 1 */
} pet_split;

typedef struct pet_split_opts {
    int max_group;       /* connected sets per group; 0: 4; 1: no grouping */
    int max_group_nodes; /* nodes per group; 0: 16 */
} pet_split_opts;

/* Splits g (an inference graph) into sub-programs; o may be NULL (defaults). IR_ERR_NOMEM
 * only. *out is NULL on failure. */
ir_status pet_split_graph(const ir_graph *g, const pet_split_opts *o, pet_split **out, ir_diag *d);
void pet_split_free(pet_split *s); /* NULL-safe */

/* The sub-program as a standalone program: its inputs become graph inputs with their names,
 * dtypes and shapes (weights and initializers flagged IR_VF_PARAM, so the verifier and the
 * generator treat them as variables; literals stay constants sharing their data), its nodes
 * are copied (names, attributes, integer constant parameters), its outputs become graph
 * outputs in sp->outputs order. opset and name follow g. NULL on failure with *st (may be NULL)
 * and d set. */
ir_graph *pet_subprog_extract(const ir_graph *g, const pet_subprog *sp, ir_status *st, ir_diag *d);

/* ---------------------------------------------------------------- mutants */

typedef enum pet_mutant_class {
    PET_MC_BATCH_TO_WIDTH = 0,
    PET_MC_BATCH_TO_HEIGHT,
    PET_MC_DILATED_TO_REGULAR,
    PET_MC_MERGED_PARALLEL,
    PET_MC_MATMUL_TRANSPOSE,
    PET_MC_LAYOUT,
    PET_MC_OTHER,
    PET_MC_COUNT
} pet_mutant_class;

/* "batch-to-width", "batch-to-height", "dilated-to-regular", "merged-parallel",
 * "matmul-transpose", "layout", "other"; "?" otherwise. */
const char *pet_mutant_class_name(int c);
/* The class of mutant, a mutant of orig (the rules above). */
int pet_mutant_classify(const ir_graph *orig, const ir_graph *mutant);

/* A structural hash free of node names, node ids, node order and the names of values that
 * nodes produce: ops, attributes, shapes, which value each node reads, variables (graph inputs
 * and initializers) by name, other constants by content, and the graph outputs in order. Two
 * programs that compute the same thing the same way hash alike. */
uint64_t pet_gen_graph_hash(const ir_graph *g);

/* The cost of a program: the sum of prof_node_seconds over its nodes, except nodes that read
 * only weights and literals (directly or through such nodes): those are pre-computed once
 * (§6.3 pre-processing) and cost nothing. */
double pet_gen_cost(prof_model *m, const ir_graph *g);

typedef struct pet_gen_opts {
    int depth;              /* ops per enumeration (a layout op counts one); 0: 4 */
    int rounds;             /* r; 0: 4 */
    int top_k;              /* K, programs kept per round and in the result; 0: 8 */
    int subset_ops;         /* d, the largest operator subset mutated at once; 0: 4 */
    double max_size_factor; /* the size bound k; 0: 4 */
    int64_t max_states;     /* per enumeration: stop after this many states (stats.truncated);
                             * 0: 1 << 18 (about a second; a one-conv program needs ~10^5, a
                             * 4-output group of parallel convs ~10^7 for depth 4) */
    int max_mutants;        /* per enumeration: stop after this many mutants; 0: 1 << 16 */
    int max_subsets;        /* per program and round, subsets mutated (when there are more:
                             * the sizes in turn, largest first); 0: 16 */
    prof_model *cost;       /* ranks candidates (pet_gen_optimize); NULL: analytic:rtx3090 */
    /* pet_gen_optimize: decides about each candidate (a mutant of the whole program, cost its
     * pet_gen_cost) before it is ranked, returning the cost to rank it by, or INFINITY to drop
     * it: where the integrator verifies it (pet_verify) and adds its corrections' cost, so that
     * later rounds mutate verified programs (§6.2). NULL: every candidate at its cost. */
    double (*judge)(void *ctx, const ir_graph *orig, const ir_graph *cand, double cost);
    void *judge_ctx;
    /* Non-NULL: polled (every few thousand states, and between mutants and sub-programs in
     * pet_find_candidates); once it reads non-zero (a SIGINT/SIGTERM handler sets it) the
     * enumeration stops as a budget does (stats.truncated) and the caller gets what was found
     * so far, so that an interrupted search stops within about a second, not after minutes of
     * PET work. */
    volatile sig_atomic_t *interrupt;
} pet_gen_opts;

typedef struct pet_gen_stats {
    int64_t states;          /* distinct states expanded */
    int64_t candidates;      /* ops tried */
    int64_t pruned_visited;  /* states reached again in another order */
    int64_t pruned_repeat;   /* ops repeated on the same operands */
    int64_t pruned_inverse;  /* inverse pairs and layout-on-layout */
    int64_t pruned_shape;    /* rejected by shape inference */
    int64_t pruned_size;     /* above the size bound */
    int64_t pruned_degree;   /* above the degree bound */
    int64_t pruned_dangling; /* too many tensors waiting for a reader */
    int64_t pruned_order;    /* independent ops out of canonical order */
    int64_t complete;        /* states whose dangling tensors match the outputs */
    int64_t mutants;         /* distinct mutants emitted */
    int64_t duplicates;      /* complete states equal to the original or an earlier mutant */
    int64_t enumerations;    /* Algorithm 1 runs (pet_gen_optimize: one per subset and round) */
    int64_t rejected;        /* candidates the judge dropped (pet_gen_optimize) */
    double seconds;
    bool truncated; /* max_states or max_mutants stopped an enumeration */
} pet_gen_stats;

typedef struct pet_mutant {
    ir_graph *graph; /* standalone: the original's input and output names, dtypes and shapes */
    uint64_t hash;   /* pet_gen_graph_hash(graph) */
    int cls;         /* pet_mutant_class */
    double cost;     /* pet_gen_cost (or the FLOP proxy) */
    int n_ops;       /* ops, a Reshape/Transpose chain counting one (as the generator
                      * counts them) */
    int round;       /* 1-based round that produced it (pet_gen_mutants: 1) */
} pet_mutant;

typedef struct pet_mutant_list {
    int n, cap;
    pet_mutant *items;
    double orig_cost; /* the original program's cost */
    pet_gen_stats stats;
} pet_mutant_list;

/* Algorithm 1 on prog: every mutant up to o->depth ops, in the order found, appended to out
 * (zero it first). o may be NULL. IR_ERR_UNSUPPORTED when prog has more than 32 inputs or
 * outputs or an input of rank above 6; IR_ERR_NOMEM. */
ir_status pet_gen_mutants(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                          ir_diag *d);

/* Rounds, subsets and top-K on prog (above): the top_k cheapest distinct mutants of the whole
 * program over all rounds, cheapest first, into out (zero it first). o may be NULL. */
ir_status pet_gen_optimize(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                           ir_diag *d);

void pet_mutant_list_free(pet_mutant_list *l); /* NULL-safe, idempotent */

#ifdef __cplusplus
}
#endif
#endif
