/* gpu-impl.h - private declarations of the CUDA cost back-end (gpu-cost.cu) and of the small
 * kernels it times (gpu-kernels.cu).
 *
 * The back-end measures how long one node takes on the GPU: cuDNN for convolutions, pooling and
 * batch-norm, cuBLAS for matrix products, and the kernels below for everything element-wise or
 * data-moving. Those kernels are representative, not exact: a node's cost on the device is
 * dominated by the bytes it moves, so one kernel per category (element-wise with broadcast,
 * reduction over the last axis, softmax, layer-norm, gather, fill) reads and writes exactly the
 * node's tensors and does comparable arithmetic, without reproducing the op's semantics.
 *
 * The C part (the exported symbol) is what the registry, gpu/gpu-registry.c, sees; the C++ part
 * is shared by the two .cu files only. */
#ifndef MAGPIE_GPU_IMPL_H
#define MAGPIE_GPU_IMPL_H

#ifdef __cplusplus
/* ir.h is C11: its _Noreturn is spelled [[noreturn]] in C++. */
#ifndef _Noreturn
#define _Noreturn [[noreturn]]
#endif
extern "C" {
#endif
#include "prof.h"

/* The "cuda" cost back-end (gpu-cost.cu); gpu-registry.c hands it to the profiler as
 * prof_cuda_backend() in builds with CUDA. */
const prof_backend *gpu_prof_backend(void);
#ifdef __cplusplus
}

#include <cuda_runtime_api.h>
#include <stdint.h>

/* Largest number of inputs the element-wise kernel reads (Where and Clip have 3). A variadic
 * Sum/Max of more is timed on its first four, an under-estimate of its traffic. */
#define GPU_EW_MAX_IN 4

/* Division by a fixed 32-bit divisor as a multiply-high and a shift (Granlund-Montgomery, as
 * PyTorch's IntDivider): q = (umulhi(n, m) + n) >> s for n, d < 2^31. Filled by
 * gpu_k_elementwise; callers leave them zero. */
typedef struct gpu_fdiv {
    uint32_t m, s;
} gpu_fdiv;

/* How the element-wise kernel finds input element `off` for output element i with coordinates
 * c[0..rank): off = base + sum_d (c[d] % mod[d]) * stride[d]. stride 0 is a broadcast dim,
 * mod < out dim a repeated one (Tile, a smaller input read wrapped), a permuted stride a
 * transpose; contiguous inputs skip the arithmetic (off = i). */
typedef struct gpu_ew_in {
    const void *p;
    int es;         /* element size in bytes: 1, 2, 4 or 8 */
    int contiguous; /* same shape as the output: off = i */
    int64_t base;
    int64_t stride[IR_MAX_RANK];
    int64_t mod[IR_MAX_RANK];
    gpu_fdiv mod_div[IR_MAX_RANK]; /* internal */
} gpu_ew_in;

typedef struct gpu_ew_args {
    int rank;
    int64_t dims[IR_MAX_RANK]; /* the iteration space: the output's shape, or one flat dim */
    int64_t n;                 /* its element count */
    /* Elements written: n, or fewer when an input is larger than the output (a loss, a weight
     * gradient): every element of the iteration space is still read, only the first out_n
     * are stored. */
    int64_t out_n;
    int n_in;
    gpu_ew_in in[GPU_EW_MAX_IN];
    void *out;
    int out_es;
    int transcendental;            /* exp/tanh/erf-class arithmetic instead of one FMA per input */
    gpu_fdiv dim_div[IR_MAX_RANK]; /* internal */
} gpu_ew_args;

/* A reduction, softmax or layer-norm over rows of `cols` contiguous elements. */
typedef struct gpu_rows_args {
    const void *x;
    int x_es;
    void *y;
    int y_es;
    int64_t rows, cols;
    const void *scale, *bias; /* layer-norm only, `cols` elements each (may be NULL) */
    int p_es;
    void *mean, *rstd; /* layer-norm's optional statistics, one float per row */
} gpu_rows_args;

/* Every launcher returns the launch's cudaError_t (cudaGetLastError after the launch). */
cudaError_t gpu_k_empty(cudaStream_t s); /* an empty kernel: what a launch costs by itself */
cudaError_t gpu_k_fill(void *p, int64_t n, ir_dtype t, uint64_t seed, cudaStream_t s);
cudaError_t gpu_k_elementwise(const gpu_ew_args *a, cudaStream_t s);
cudaError_t gpu_k_reduce_rows(const gpu_rows_args *a, cudaStream_t s);
cudaError_t gpu_k_softmax_rows(const gpu_rows_args *a, cudaStream_t s);
cudaError_t gpu_k_layernorm_rows(const gpu_rows_args *a, cudaStream_t s);
/* out[o, t, r] = data[o, idx[t] mod A, r]: data [outer, A, inner], idx n_idx values of idx_es
 * bytes (4 or 8), out [outer, n_idx, inner]; es is the element size of data and out. */
cudaError_t gpu_k_gather(const void *data, int es, int64_t outer, int64_t A, int64_t inner,
                         const void *idx, int idx_es, int64_t n_idx, void *out, cudaStream_t s);
#endif

#endif
