/* pet-post.h - what PET does to a replacement once it is built (PET paper §6.3), and how a
 * replacement with corrections is verified.
 *
 * Post-optimizations (pet_post_optimize), within one standalone program:
 *  - layout fusion: a Reshape (or Flatten, Squeeze, Unsqueeze) of a Reshape becomes one Reshape,
 *    a Transpose of a Transpose one Transpose (composed permutation), and a Transpose that keeps
 *    the order of every dim longer than 1 is the Reshape it amounts to;
 *  - inverse elimination: a Reshape to its input's shape, an identity Transpose, an Identity,
 *    and any chain of layout ops whose randomized test (pet_verify against the identity) says it
 *    maps its input to itself, are removed, their readers reading the chain's input;
 *  - pre-processing: nodes whose inputs are all constants that are not parameters are computed
 *    once (ir_fold_constants). A replacement's weights are graph inputs flagged as parameters
 *    (pet_subprog_extract), so this folds what reads literals only; weight pre-processing on a
 *    real graph is pet_gen_cost's assumption, not done here.
 * Only values with one reader that are not graph outputs are fused or bypassed, so every output
 * keeps its name and value; the program stays topologically ordered and is pruned.
 *
 * Verification (pet_verify_replacement). The verifier's compiler (pet-compile.c) knows no
 * PetPatch, so a replacement is verified through its lowering: every PetPatch(out, patch) with
 * box B becomes out - Pad(Slice(out, B)) + Pad(patch), zero padding to out's shape, which is the
 * same function, multilinear, and cuts its boxes at B's faces (pet_patch_lower). The lowering
 * also drops every Conv, ConvTranspose and Gemm bias (input 2): the verifier evaluates programs
 * without their affine parts anyway, and a correction reads slices of a bias, which the
 * verifier would otherwise take for data the original does not read. */
#ifndef MAGPIE_PET_POST_H
#define MAGPIE_PET_POST_H

#include "pet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pet_post_stats {
    int layout_fused;     /* layout ops fused into the next one */
    int inverses_removed; /* identity layout ops and chains removed */
    int folded;           /* nodes pre-computed */
} pet_post_stats;

/* Post-optimizes g in place (above); s may be NULL. IR_ERR_NOMEM; a verifier error on a chain is
 * not one (the chain is kept). */
ir_status pet_post_optimize(ir_graph *g, pet_post_stats *s, ir_diag *d);

/* g with every PetPatch lowered (above), topologically ordered; NULL on failure with *st (may be
 * NULL) and d set. */
ir_graph *pet_patch_lower(const ir_graph *g, ir_status *st, ir_diag *d);

/* pet_verify(prog, pet_patch_lower(repl), o, r, d). */
ir_status pet_verify_replacement(const ir_graph *prog, const ir_graph *repl, const pet_options *o,
                                 pet_result *r, ir_diag *d);

#ifdef __cplusplus
}
#endif
#endif
