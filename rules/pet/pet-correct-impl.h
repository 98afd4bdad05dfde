/* pet-correct-impl.h - private declarations of PET's corrector (pet-correct.c, pet-region.c,
 * pet-fuse.c): the context in which the original program is rebuilt on a region of one of its
 * values, inside the replacement graph under construction. The contract is pet-opt.h's
 * pet_correct; nothing here is part of it.
 *
 * A region is a pet_box of a value of the original program (prog). pc_region(v, R) returns a
 * value of the replacement h holding exactly v restricted to R (shape hi - lo per dim), built
 * from Slices of prog's inputs and copies of prog's ops on sliced operands (pet-region.c).
 * Results are memoized per (value, box), so a value that several ops read on the same region is
 * computed once. Nodes the corrector adds to h come after the mutant's own nodes (indices from
 * n_mutant on) until the final topological sort. */
#ifndef MAGPIE_PET_CORRECT_IMPL_H
#define MAGPIE_PET_CORRECT_IMPL_H

#include "pet.h"

#include <stdlib.h>
#include <string.h>

typedef struct pc_memo {
    int v; /* prog value */
    pet_box box;
    int res; /* h value */
} pc_memo;

typedef struct pc_ctx {
    const ir_graph *prog;
    ir_graph *h;  /* the replacement: the mutant's clone plus corrections */
    int n_mutant; /* h's nodes below this index are the mutant's */
    int *vmap;    /* prog value -> h value, for prog's inputs and constants (-1: not yet) */
    pc_memo *memo;
    int n_memo, cap_memo;
    int corr;   /* the correction being built (value and node names) */
    int *convs; /* h node indices of correction Convs (fusion candidates) */
    int n_convs, cap_convs;
    ir_diag *d;
} pc_ctx;

/* pet-region.c */

/* The h value holding prog value v on box R (R inside v's shape). IR_ERR_UNSUPPORTED naming the
 * op whose input region is not expressible (a Reshape that maps R to no box, an op outside the
 * corrector's set); IR_ERR_NOMEM. */
ir_status pc_region(pc_ctx *c, int v, const pet_box *R, int *res);
/* The h value of prog input or constant pv (added to h on first use). */
ir_status pc_input(pc_ctx *c, int pv, int *res);
/* Adds node op to h with n_out fresh outputs named after hint, infers them, and returns the node
 * index (its outputs in out), or -1 with *st set. attrs live in h's arena or are static. */
int pc_emit(pc_ctx *c, ir_op_kind op, const char *hint, int n_in, const int *in, int n_out,
            int *out, int n_attrs, const ir_attr *attrs, ir_status *st);
/* A fresh int64 constant of h holding vals[0..n); -1 when out of memory. */
int pc_ints(pc_ctx *c, int n, const int64_t *vals);
/* A name for a new h value or node: "pet.c<corr>.<base>", made unique among h's values. */
const char *pc_name(pc_ctx *c, const char *base);
/* A deep copy of n's attributes in dst's arena (n->n_attrs of them); NULL when out of memory.
 * Shared with pet-post.c and pet-apply.c, which copy nodes between graphs. */
ir_attr *pc_copy_attrs(ir_graph *dst, const ir_node *n);
/* Node n of prog again, on h's values in[] (n_in of them: n's data inputs on their regions and
 * its parameters mapped with pc_input), with n's attributes except those named in skip
 * (NULL-terminated; may be NULL) plus extra. Returns the node index, outputs in out. */
int pc_emit_like(pc_ctx *c, const ir_node *n, int n_in, const int *in, int n_out, int *out,
                 const char *const *skip, int n_extra, const ir_attr *extra, ir_status *st);
/* The h value of parameter input k of prog node n (an integer constant: axes, shapes), -1 when
 * absent. */
ir_status pc_param(pc_ctx *c, const ir_node *n, int k, int *res);
/* The box of input shape is that output box R of shape os reads under numpy broadcasting:
 * R's range where the input dim has the output's size, [0, 1) where it is broadcast. */
void pc_bcast_box(const ir_shape *is, const ir_shape *os, const pet_box *R, pet_box *B);
/* h value x (a region of shape xs) cut to box B of it: x itself when B is all of xs. */
ir_status pc_slice(pc_ctx *c, int x, const pet_box *B, int *res);
/* Constant integer input i of prog node n into out (at most max); *cnt = -2 when absent.
 * IR_ERR_UNSUPPORTED when it is not a constant. */
ir_status pc_const_ints(pc_ctx *c, const ir_node *n, int i, int64_t *out, int max, int *cnt);
/* Records h node ni as a correction Conv (a fusion candidate). */
ir_status pc_note_conv(pc_ctx *c, int ni);

/* Sliding-window geometry of a Conv or AveragePool, per spatial dim i < S (not right-aligned),
 * auto_pad resolved. */
typedef struct pc_geom {
    int S;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} pc_geom;
/* Reads the geometry of node n of g: a Conv (pool false: kernel from W) or an AveragePool (pool
 * true: kernel_shape, dilation 1, ceil_mode 0), checked against the inferred output shape. */
ir_status pc_window_geom(const ir_graph *g, const ir_node *n, bool pool, pc_geom *out, ir_diag *d);
/* Outputs [o0, o1) of spatial dim i read input [lo, hi) with pads pb (before) and pe (after):
 * the windows' span clipped to the input; the clipped part is what the pads give back. false
 * when the region reads only padding. */
bool pc_window(const pc_geom *g, int i, int64_t o0, int64_t o1, int64_t *lo, int64_t *hi,
               int64_t *pb, int64_t *pe);

/* pet-region-compute.c: the compute ops (Conv, AveragePool, GlobalAveragePool, MatMul, Gemm,
 * ReduceSum, ReduceMean) on region R of output 0 of prog node n. IR_ERR_UNSUPPORTED for any
 * other op. */
ir_status pc_region_compute(pc_ctx *c, const ir_node *n, const pet_box *R, int *res);

/* Box helpers. */
void pc_box_full(const ir_shape *s, pet_box *b);
bool pc_box_is_full(const pet_box *b, const ir_shape *s);
ir_shape pc_box_shape(const pet_box *b);

/* pet-fuse.c: PET figure 6. Every correction Conv in c->convs that reads the weight (and bias,
 * group, strides, dilations) of a Conv of the mutant is computed by that Conv: one conv on the
 * concatenation of both data inputs (along the batch, or along a spatial dim with explicit zero
 * padding where the pads differ), its output split back. Adds the count to *n_fused. Leaves h
 * unsorted (the caller sorts and prunes the correction Convs it detached). */
ir_status pc_fuse(pc_ctx *c, int *n_fused);

#endif
