/* ir-geom.h - the geometry of ops whose index maps others must reproduce exactly: convolution,
 * pooling and slicing. One definition, read by the CPU kernels and their gradients (ops-*.c) and
 * by PET's prime-field compiler (rules/pet/pet-compile.c), so that every consumer agrees on
 * windows, pads and strides by construction. Part of ir's public interface. */
#ifndef MAGPIE_IR_GEOM_H
#define MAGPIE_IR_GEOM_H

#include "ir.h"

/* Conv / ConvTranspose geometry (ops-conv.c), padded to 3 spatial dims, right-aligned. */
typedef struct ir_conv_geom {
    int S;                  /* spatial rank, 1..3 */
    int64_t N, C, M, group; /* batch, input channels, output channels, groups */
    bool bias;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} ir_conv_geom;
/* Reads X, W (and B) of node n and its attributes (auto_pad resolved into pb/pe). */
ir_status ir_conv_parse(const ir_graph *g, const ir_node *n, bool transpose, ir_conv_geom *cg,
                        ir_diag *d);

/* Pooling geometry (ops-pool.c), padded to 3 spatial dims like ir_conv_geom. */
typedef struct ir_pool_geom {
    int S;
    int64_t NC; /* planes */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} ir_pool_geom;
/* Window geometry of pooling node n over an input of shape xs (rank 3..5, not checked here). */
ir_status ir_pool_parse(const ir_node *n, const ir_shape *xs, ir_pool_geom *pg, ir_diag *d);

/* Slice (ops-layout.c): resolves starts/ends/axes/steps (counts ns, ne, na (-2: absent), nt
 * (-2: absent)) against the input shape into a first index and a step per dim, and the output
 * shape. */
ir_status ir_slice_resolve(const ir_node *n, const ir_shape *in, const int64_t *starts, int ns,
                           const int64_t *ends, int ne, const int64_t *axes, int na,
                           const int64_t *steps, int nt, int64_t *first, int64_t *step,
                           ir_shape *out, ir_diag *d);

#endif
