/* nasnet.h - random NASNet-like graphs and the local rewrites the incremental-scheduling bench
 * applies to them (bench_incremental.c). Bench-only: the real rewrite rules live in rules/.
 *
 * A graph is a stem convolution followed by cells. Each cell squeezes its two inputs (the two
 * previous cell outputs) with 1x1 Conv+Relu, then builds 5 blocks; a block combines two of the
 * hidden states so far (the squeezed inputs and earlier blocks) through two ops drawn from
 * {3x3 Conv+Relu, 3x3 average pool, 3x3 max pool, identity} and an Add. The cell output is the
 * channel Concat of the blocks no other block reads. Reduction cells halve the spatial dims (the
 * squeeze convolutions stride) and double the channels. Weights are graph inputs without data. */
#ifndef MAGPIE_BENCH_NASNET_H
#define MAGPIE_BENCH_NASNET_H

#include "ir.h"

typedef struct nas_rng {
    uint64_t s;
} nas_rng;

static inline uint64_t nas_next(nas_rng *r) {
    r->s += 0x9e3779b97f4a7c15ULL;
    return ir_mix64(r->s);
}
static inline int nas_below(nas_rng *r, int n) {
    return (int)(nas_next(r) % (uint64_t)n);
}

/* A graph of about target_nodes nodes (it stops adding cells once it has at least that many) on a
 * 1 x channels x hw x hw float32 input. NULL on out of memory or an internal inference failure. */
ir_graph *nas_build(nas_rng *r, int target_nodes, int channels, int hw);

typedef enum nas_rewrite_kind {
    NAS_REMAT, /* duplicate the producer of a hot-spot value for its last user */
    NAS_SWAP,  /* Store/Load between a hot-spot value and its last user */
    NAS_SPLIT, /* split a Relu/Add/Conv on a hot-spot into two channel halves + Concat */
    NAS_KINDS,
} nas_rewrite_kind;

const char *nas_rewrite_name(nas_rewrite_kind k);

/* Applies one rewrite of kind k around a memory hot-spot of g under order (a random hot-spot
 * among those where k applies). Returns the rewritten copy (g is untouched) with its nodes
 * re-sorted topologically, and the stable ids of the nodes added, removed or rewired in
 * touched (at most max_touched). NULL when k applies nowhere. */
ir_graph *nas_rewrite(const ir_graph *g, const int *order, nas_rewrite_kind k, nas_rng *r,
                      uint32_t *touched, int *n_touched, int max_touched);

#endif
