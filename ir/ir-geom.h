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

/* The im2col buffer of Conv and ConvGradWeight (and ConvTranspose's column buffer) is tiled by
 * whole output rows (input rows for ConvTranspose) so that it holds at most ir_conv_col_bytes
 * (IR_CONV_COL_BYTES), but never fewer than IR_CONV_COL_MIN pixels (gemm's other dim: below
 * that a deep layer's small planes would make a thin gemm, up to twice as slow): a full
 * [C*K, pixels] buffer is several activations for a wide layer, and a tile stays in cache
 * between its fill and the gemm that reads it. Of `rows` rows of `row_pixels` pixels and
 * `row_bytes` bytes each, the rows one tile holds: all of them when they fit, else the fewest
 * equal tiles that fit (the last one may be shorter). The kernels, their workspace() and the
 * emitted PyTorch step (cli/emit-torch-train.c) all take the tile from here. ir_conv_col_bytes
 * is a process-wide setting for benchmarks (bench_conv_tiles sets it to compare against one
 * whole buffer): set it before building any graph, never after. */
#define IR_CONV_COL_BYTES ((int64_t)256 * 1024)
#define IR_CONV_COL_MIN ((int64_t)256)
extern int64_t ir_conv_col_bytes;
static inline int64_t ir_conv_tile_rows(int64_t rows, int64_t row_pixels, int64_t row_bytes) {
    const int64_t bound = ir_conv_col_bytes;
    if (rows <= 1 || row_bytes <= 0 || rows * row_bytes <= bound) return rows;
    int64_t per = bound / row_bytes, least = (IR_CONV_COL_MIN + row_pixels - 1) / row_pixels;
    if (per < least) per = least;
    if (per < 1) per = 1;
    if (per >= rows) return rows;
    int64_t tiles = (rows + per - 1) / per;
    return (rows + tiles - 1) / tiles;
}

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
