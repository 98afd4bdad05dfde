/* gpu-kernels.cu - the cost back-end's own CUDA kernels: one representative kernel per category
 * of element-wise and data-movement op (gpu-impl.h says why representative is enough).
 *
 * Element sizes are read at run time (a warp-uniform switch) rather than templated, so that one
 * kernel covers every dtype mix (Cast included) at the bandwidth of the real op. Index arithmetic
 * is 32-bit whenever the tensor allows it: 64-bit division costs tens of instructions per
 * dimension on the GPU and would make a transpose look compute-bound, which real ones are not.
 * Kernels never fail on data: indices are wrapped into range, so any bytes the timing buffers
 * hold are safe to read. */
#include "gpu-impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kBlock = 256;

/* Enough blocks to fill the device several times over; grid-stride loops do the rest. */
unsigned grid_for(int64_t n, int per_block = kBlock) {
    int64_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned)b;
}

__device__ __forceinline__ float ld(const void *p, int64_t i, int es) {
    switch (es) {
    case 1: return (float)static_cast<const uint8_t *>(p)[i];
    case 2: return __half2float(static_cast<const __half *>(p)[i]);
    case 8: return (float)static_cast<const double *>(p)[i];
    default: return static_cast<const float *>(p)[i];
    }
}

__device__ __forceinline__ void st(void *p, int64_t i, int es, float v) {
    switch (es) {
    case 1: static_cast<uint8_t *>(p)[i] = (uint8_t)(v > 0.0f); break;
    case 2: static_cast<__half *>(p)[i] = __float2half(v); break;
    case 8: static_cast<double *>(p)[i] = (double)v; break;
    default: static_cast<float *>(p)[i] = v; break;
    }
}

/* A hash in [-1, 1): values of the size activations and weights have, never NaN or Inf, so
 * that no kernel or library hits a slow path (denormals, NaN propagation) real data would not. */
__device__ __forceinline__ float hval(uint64_t i, uint64_t seed) {
    uint64_t x = i * 0x9e3779b97f4a7c15ULL + seed;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return (float)(x & 0xffffff) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_kernel(void *p, int64_t n, int t, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = hval((uint64_t)i, seed);
        switch (t) {
        case IR_F32: static_cast<float *>(p)[i] = v; break;
        case IR_F16: static_cast<__half *>(p)[i] = __float2half(v); break;
        case IR_BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16(v); break;
        case IR_F64: static_cast<double *>(p)[i] = v; break;
        /* integers: small non-negative values, so that index-like inputs stay in range */
        case IR_I64: static_cast<int64_t *>(p)[i] = (int64_t)((v + 1.0f) * 8.0f); break;
        case IR_I32: static_cast<int32_t *>(p)[i] = (int32_t)((v + 1.0f) * 8.0f); break;
        default: static_cast<uint8_t *>(p)[i] = (uint8_t)(v > 0.0f); break;
        }
    }
}

/* n / d and n % d: multiply-high and shift for 32-bit indices, plain division for 64-bit ones. */
__device__ __forceinline__ uint32_t udiv(uint32_t n, uint32_t, gpu_fdiv f) {
    return (__umulhi(n, f.m) + n) >> f.s;
}
__device__ __forceinline__ uint64_t udiv(uint64_t n, uint64_t d, gpu_fdiv) {
    return n / d;
}

template <typename I> __global__ void ew_kernel(gpu_ew_args a) {
    const I n = (I)a.n;
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < n;
         i += (I)(gridDim.x * blockDim.x)) {
        /* coordinates in registers: the loops run over the fixed maximum rank, unrolled */
        I c[IR_MAX_RANK];
        bool have_c = false;
        float acc = 0.0f;
        for (int k = 0; k < a.n_in; k++) {
            const gpu_ew_in &in = a.in[k];
            I off = i;
            if (!in.contiguous) {
                if (!have_c) {
                    I rem = i;
#pragma unroll
                    for (int d = IR_MAX_RANK - 1; d >= 0; d--) {
                        if (d >= a.rank) continue;
                        I q = udiv(rem, (I)a.dims[d], a.dim_div[d]);
                        c[d] = rem - q * (I)a.dims[d];
                        rem = q;
                    }
                    have_c = true;
                }
                off = (I)in.base;
#pragma unroll
                for (int d = 0; d < IR_MAX_RANK; d++) {
                    if (d >= a.rank) continue;
                    I cd = c[d];
                    if ((I)in.mod[d] != (I)a.dims[d])
                        cd -= udiv(cd, (I)in.mod[d], in.mod_div[d]) * (I)in.mod[d];
                    off += cd * (I)in.stride[d];
                }
            }
            float v = ld(in.p, (int64_t)off, in.es);
            acc = a.transcendental ? acc + tanhf(v) * __expf(-v * v) : fmaf(acc, 0.5f, v);
        }
        /* Beyond out_n nothing is stored, but the loads must still happen: the store's
         * condition depends on them (it never holds for the bounded values kernels see; when it
         * does, the store stays inside the output). */
        if ((int64_t)i < a.out_n)
            st(a.out, (int64_t)i, a.out_es, a.n_in ? acc : 0.0f);
        else if (acc == -3.0e38f)
            st(a.out, (int64_t)i % a.out_n, a.out_es, acc);
    }
}

/* Reduces over a warp; every lane gets the result. */
template <bool MAX> __device__ __forceinline__ float warp_reduce(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    return v;
}

/* Reduces over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it. */
template <bool MAX> __device__ float block_reduce(float v) {
    __shared__ float part[32];
    __shared__ float result;
    v = warp_reduce<MAX>(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        float u = lane < (int)(blockDim.x >> 5) ? part[lane] : (MAX ? -INFINITY : 0.0f);
        u = warp_reduce<MAX>(u);
        if (lane == 0) result = u;
    }
    __syncthreads();
    float r = result;
    __syncthreads(); /* part[] and result are reused by the caller's next reduction */
    return r;
}

/* Rows of `cols` contiguous elements. Short rows get one warp each (a block per row would leave
 * most threads idle), long rows one block each, as vendor libraries do. WARP selects which. A
 * row is uniform across the threads that share it, so the reductions' barriers and full-mask
 * shuffles are always reached by all of them. */
template <bool WARP> struct rows {
    int64_t first, step;
    int tid, lanes;
    __device__ rows() {
        if (WARP) {
            first = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
            step = (int64_t)gridDim.x * (blockDim.x >> 5);
            tid = threadIdx.x & 31;
            lanes = 32;
        } else {
            first = blockIdx.x;
            step = gridDim.x;
            tid = threadIdx.x;
            lanes = blockDim.x;
        }
    }
    __device__ static float sum(float v) {
        return WARP ? warp_reduce<false>(v) : block_reduce<false>(v);
    }
    __device__ static float max(float v) {
        return WARP ? warp_reduce<true>(v) : block_reduce<true>(v);
    }
};

template <bool WARP> __global__ void reduce_kernel(gpu_rows_args a) {
    rows<WARP> r;
    for (int64_t row = r.first; row < a.rows; row += r.step) {
        float s = 0.0f;
        for (int64_t j = r.tid; j < a.cols; j += r.lanes) s += ld(a.x, row * a.cols + j, a.x_es);
        s = r.sum(s);
        if (r.tid == 0) st(a.y, row, a.y_es, s);
    }
}

template <bool WARP> __global__ void softmax_kernel(gpu_rows_args a) {
    rows<WARP> r;
    for (int64_t row = r.first; row < a.rows; row += r.step) {
        const int64_t base = row * a.cols;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = r.tid; j < a.cols; j += r.lanes) m = fmaxf(m, ld(a.x, base + j, a.x_es));
        m = r.max(m);
        for (int64_t j = r.tid; j < a.cols; j += r.lanes)
            s += __expf(ld(a.x, base + j, a.x_es) - m);
        float inv = 1.0f / r.sum(s);
        for (int64_t j = r.tid; j < a.cols; j += r.lanes)
            st(a.y, base + j, a.y_es, __expf(ld(a.x, base + j, a.x_es) - m) * inv);
    }
}

template <bool WARP> __global__ void layernorm_kernel(gpu_rows_args a) {
    rows<WARP> r;
    for (int64_t row = r.first; row < a.rows; row += r.step) {
        const int64_t base = row * a.cols;
        float s = 0.0f, q = 0.0f;
        for (int64_t j = r.tid; j < a.cols; j += r.lanes) s += ld(a.x, base + j, a.x_es);
        const float mean = r.sum(s) / (float)a.cols;
        for (int64_t j = r.tid; j < a.cols; j += r.lanes) {
            float d = ld(a.x, base + j, a.x_es) - mean;
            q += d * d;
        }
        const float rstd = rsqrtf(r.sum(q) / (float)a.cols + 1e-5f);
        for (int64_t j = r.tid; j < a.cols; j += r.lanes) {
            float v = (ld(a.x, base + j, a.x_es) - mean) * rstd;
            if (a.scale) v *= ld(a.scale, j, a.p_es);
            if (a.bias) v += ld(a.bias, j, a.p_es);
            st(a.y, base + j, a.y_es, v);
        }
        if (r.tid == 0) {
            if (a.mean) static_cast<float *>(a.mean)[row] = mean;
            if (a.rstd) static_cast<float *>(a.rstd)[row] = rstd;
        }
    }
}

__global__ void gather_kernel(const void *data, int es, int64_t A, int64_t inner, const void *idx,
                              int idx_es, int64_t n_idx, void *out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i % inner, t = (i / inner) % n_idx, o = i / (inner * n_idx);
        int64_t k = idx_es == 8 ? static_cast<const int64_t *>(idx)[t]
                                : (int64_t) static_cast<const int32_t *>(idx)[t];
        k %= A;
        if (k < 0) k += A;
        st(out, i, es, ld(data, (o * A + k) * inner + r, es));
    }
}

/* The multiplier and shift that divide by d (1 <= d < 2^31) as udiv does. */
gpu_fdiv fdiv_make(int64_t d) {
    gpu_fdiv f = {0, 0};
    if (d < 1) return f;
    uint32_t s = 0;
    while (s < 32 && (1ULL << s) < (uint64_t)d) s++;
    const uint64_t one = 1;
    f.m = (uint32_t)(((one << 32) * ((one << s) - (uint64_t)d)) / (uint64_t)d + 1);
    f.s = s;
    return f;
}

/* Launches a row kernel with a warp per row for short rows, a block per row for long ones. */
cudaError_t launch_rows(void (*warp_k)(gpu_rows_args), void (*block_k)(gpu_rows_args),
                        const gpu_rows_args *a, cudaStream_t s) {
    if (a->rows <= 0 || a->cols <= 0) return cudaSuccess;
    if (a->cols <= 1024) {
        const int rows_per_block = kBlock / 32;
        warp_k<<<grid_for(a->rows, rows_per_block), kBlock, 0, s>>>(*a);
    } else {
        int64_t b = a->rows < 65535LL * 16 ? a->rows : 65535LL * 16;
        int threads = a->cols >= 4096 ? 1024 : 512;
        block_k<<<(unsigned)b, threads, 0, s>>>(*a);
    }
    return cudaGetLastError();
}

__global__ void empty_kernel() {}

} // namespace

cudaError_t gpu_k_empty(cudaStream_t s) {
    empty_kernel<<<1, 32, 0, s>>>();
    return cudaGetLastError();
}

cudaError_t gpu_k_fill(void *p, int64_t n, ir_dtype t, uint64_t seed, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    fill_kernel<<<grid_for(n), kBlock, 0, s>>>(p, n, (int)t, seed);
    return cudaGetLastError();
}

cudaError_t gpu_k_elementwise(const gpu_ew_args *a, cudaStream_t s) {
    if (a->n <= 0 || a->out_n <= 0) return cudaSuccess;
    /* the largest offset any input can reach bounds the index type too */
    bool small = a->n < (1LL << 31);
    for (int k = 0; k < a->n_in && small; k++) {
        int64_t reach = a->in[k].base;
        for (int d = 0; d < a->rank; d++) {
            int64_t st = a->in[k].stride[d];
            reach += (a->in[k].mod[d] - 1) * (st < 0 ? -st : st);
        }
        small = reach < (1LL << 31);
    }
    if (!small) {
        ew_kernel<uint64_t><<<grid_for(a->n), kBlock, 0, s>>>(*a);
        return cudaGetLastError();
    }
    gpu_ew_args b = *a;
    for (int d = 0; d < b.rank; d++) b.dim_div[d] = fdiv_make(b.dims[d]);
    for (int k = 0; k < b.n_in; k++)
        for (int d = 0; d < b.rank; d++) b.in[k].mod_div[d] = fdiv_make(b.in[k].mod[d]);
    ew_kernel<uint32_t><<<grid_for(b.n), kBlock, 0, s>>>(b);
    return cudaGetLastError();
}

cudaError_t gpu_k_reduce_rows(const gpu_rows_args *a, cudaStream_t s) {
    return launch_rows(reduce_kernel<true>, reduce_kernel<false>, a, s);
}

cudaError_t gpu_k_softmax_rows(const gpu_rows_args *a, cudaStream_t s) {
    return launch_rows(softmax_kernel<true>, softmax_kernel<false>, a, s);
}

cudaError_t gpu_k_layernorm_rows(const gpu_rows_args *a, cudaStream_t s) {
    return launch_rows(layernorm_kernel<true>, layernorm_kernel<false>, a, s);
}

cudaError_t gpu_k_gather(const void *data, int es, int64_t outer, int64_t A, int64_t inner,
                         const void *idx, int idx_es, int64_t n_idx, void *out, cudaStream_t s) {
    int64_t n = outer * n_idx * inner;
    if (n <= 0 || A <= 0) return cudaSuccess;
    gather_kernel<<<grid_for(n), kBlock, 0, s>>>(data, es, A, inner, idx, idx_es, n_idx, out, n);
    return cudaGetLastError();
}
