/* pet-opt.h - PET's optimizer on a whole model (PET paper §5.2 step 3, §5.3, §6): the verified
 * candidates of every sub-program (split, generated, verified, corrected, costed) and their
 * application to a graph, which the explorer uses as one more rewrite kind (RW_PET).
 *
 * Candidates (pet_find_candidates). For each sub-program of pet_split_graph(g): extract it
 * (pet_subprog_extract), run pet_gen_optimize on it, and for each mutant run pet_verify against
 * the sub-program. A rejected mutant is dropped. An equivalent one is kept as it is. One with
 * failed cells gets a correction per failed cell (pet_correct, below): the original program
 * computed on that region only, written over the mutant's output there; where a correction
 * cannot be built (an op whose region of inputs is not expressible), the mutant is dropped. The
 * replacement (mutant + corrections, after the post-optimizations of §6.3) is costed with
 * pet_gen_cost; a candidate is kept when it is predicted faster than the sub-program (cost below
 * orig_cost by more than pet_find_opts.min_gain, relative). Candidates are ordered by
 * sub-program, then by predicted gain (largest first), then by mutant hash: the order, like
 * everything here, is deterministic (the explorer's replay and resume rebuild the same table).
 *
 * Corrections (pet_correct). For a failed cell R of an output of the sub-program: for every op of
 * the original program, from the output back, the region of each input that the op's region
 * reads (conv: the receptive field, clipped to the input, with the pads that the region's border
 * needs; matmul: the rows of A and columns of B; element-wise: the same region with
 * broadcasting; layout ops: the mapped region when it is a box, else refused), then the ops
 * on Slices of their inputs, and one in-place PetPatch(out, patch) (magpie domain: writes patch
 * into out at attribute `starts`) per region. Where a correction and a mutant op share a weight
 * and differ only in the data they read (PET figure 6), they are fused: one op on the
 * concatenation of both inputs, its output split.
 *
 * Application (pet_apply). Candidate k replaces the nodes of its sub-program in g (found by
 * their stable ids: a graph derived from the one the table was built on, where those nodes are
 * unchanged) by the replacement's nodes with fresh ids, reading the same input values and
 * producing the same output values (so the rest of g is untouched). */
#ifndef MAGPIE_PET_OPT_H
#define MAGPIE_PET_OPT_H

#include "pet-gen.h"
#include "pet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pet_candidate {
    int subprog;            /* index into the split's progs */
    int cls;                /* pet_mutant_class of the mutant */
    uint64_t hash;          /* pet_gen_graph_hash of the mutant */
    ir_graph *replacement;  /* owned: the mutant with its corrections, standalone, the
                             * sub-program's input and output names */
    int n_boxes;            /* boxes of the mutant's outputs (pet_output_report.mutant_boxes) */
    int n_failed;           /* failed cells, each corrected */
    int n_fused;            /* corrections fused with a mutant op (figure 6) */
    double orig_cost, cost; /* predicted seconds of the sub-program and of the replacement */
    double false_accept_bound;
} pet_candidate;

typedef struct pet_table {
    pet_split *split;
    int n;
    pet_candidate *c;
    /* what it took: sub-programs mutated, mutants generated, verified, rejected, kept; seconds
     * in generation, verification and correction; box-tests run */
    int subprogs, mutants, verified, rejected, uncorrectable, kept;
    double gen_seconds, verify_seconds, correct_seconds;
    int64_t box_tests;
} pet_table;

typedef struct pet_find_opts {
    pet_gen_opts gen;    /* generator options (gen.cost: the cost model) */
    pet_options verify;  /* verifier options (tests, seed, threads, back-end) */
    double min_gain;     /* relative predicted gain a candidate must have; 0: 0.02 */
    int max_per_subprog; /* candidates kept per sub-program; 0: 4 */
    int threads;         /* sub-programs processed at once; 0: the CPUs available */
} pet_find_opts;

/* The candidates of g (an inference graph). IR_ERR_NOMEM; sub-programs that fail to generate
 * or verify (unsupported) are skipped and counted, not errors. *out NULL on failure. */
ir_status pet_find_candidates(const ir_graph *g, const pet_find_opts *o, pet_table **out,
                              ir_diag *d);
void pet_table_free(pet_table *t); /* NULL-safe */

/* The corrected replacement of prog (a sub-program) by mutant, given pet_verify's result r:
 * mutant's nodes, then one correction per failed cell (fused where figure 6 applies). NULL with
 * *st = IR_ERR_UNSUPPORTED (d says which op) when a correction cannot be built. */
ir_graph *pet_correct(const ir_graph *prog, const ir_graph *mutant, const pet_result *r,
                      int *n_fused, ir_status *st, ir_diag *d);

/* Applies candidate k of t to g: a new graph (g unchanged) and the ids of the nodes removed and
 * added in touched (room for RW_MAX_FISSION_TOUCHED; may be NULL). IR_ERR_INVALID when a node
 * of the sub-program is missing or changed in g. */
ir_graph *pet_apply(const ir_graph *g, const pet_table *t, int k, uint32_t *touched, int *n_touched,
                    ir_status *st, ir_diag *d);

#ifdef __cplusplus
}
#endif
#endif
