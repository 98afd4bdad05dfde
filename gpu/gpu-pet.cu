/* gpu-pet.cu - the "cuda" verification back-end of PET (rules/pet.h "back-ends"): evaluates
 * compiled programs over Z_p on the GPU, all input sets of a program batched in one launch per
 * step.
 *
 * Every value lives on the device as n_sets consecutive copies ([set][element]); a literal is
 * stored once and read by every set (set stride 0). Variables are drawn on the device with the
 * counter-based generator pet.h defines (the same residues as the CPU's, element by element).
 * Each step is one grid-stride kernel over (set, element): one thread computes one output
 * element from its inputs, the gather form of the CPU's per-element kernels (pet-kernels.c):
 * products and convolutions sum their terms in 64-bit with each product folded below 2^32, the
 * copies map indices, reductions and prefix sums loop. Threads of a warp take neighbouring
 * output elements of one set, so a conv's warp shares one output channel (its weights are
 * broadcast loads) and reads neighbouring input positions. The GPU always evaluates whole
 * tensors (PET_EVAL_DENSE): with every set batched, that is what it is good at.
 *
 * bench/pet_gpu_check.c checks that the residues equal the CPU back-end's at every tested
 * position of a corpus of programs. Errors are returned, never fatal: IR_ERR_NOMEM when device
 * memory runs out, IR_ERR_INTERNAL naming the failing CUDA call otherwise. */
#include "gpu-impl.h"

#include "pet.h"

#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

namespace {

/* ------------------------------------------------------------- Z_p on the device */

__device__ __forceinline__ uint64_t d_fold1(uint64_t x) {
    return (x & PET_P) + (x >> 31);
}
__device__ __forceinline__ uint32_t d_fold(uint64_t x) {
    x = d_fold1(d_fold1(x));
    return (uint32_t)(x >= PET_P ? x - PET_P : x);
}
__device__ __forceinline__ uint32_t d_add(uint32_t a, uint32_t b) {
    uint32_t s = a + b;
    return s >= PET_P ? s - PET_P : s;
}
__device__ __forceinline__ uint32_t d_sub(uint32_t a, uint32_t b) {
    return a >= b ? a - b : a + PET_P - b;
}
__device__ __forceinline__ uint32_t d_mul(uint32_t a, uint32_t b) {
    return d_fold((uint64_t)a * b);
}
/* ir_mix64 and pet_rand_stream / pet_rand_at, bit for bit */
__device__ __forceinline__ uint64_t d_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
__device__ __forceinline__ uint64_t d_stream(uint64_t seed, uint32_t set, uint64_t key) {
    return d_mix64(d_mix64(d_mix64(seed ^ 0x5045545f7665726bULL) + key) +
                   (uint64_t)(set + 1) * 0xd1b54a32d192ed03ULL);
}

/* ------------------------------------------------------------- kernels */

struct dshape {
    int rank;
    int64_t dims[IR_MAX_RANK];
    int64_t st[IR_MAX_RANK]; /* row-major strides */
};

/* One step's launch: the step, its values' shapes, and their buffers for set 0 with the
 * distance between sets (0 for a literal). The iteration space is `it` (the copied region for
 * COPY, the output otherwise); its coords plus `base` are the output coords. */
struct dargs {
    pet_step s;
    dshape a, b, o, it;
    int64_t base[IR_MAX_RANK];
    const uint32_t *A, *B;
    uint32_t *O;
    int64_t sa, sb, so;
    int64_t n; /* elements of the iteration space */
    int n_sets;
};

__device__ uint32_t elem(const dargs &g, const uint32_t *A, const uint32_t *B, const int64_t *c) {
    const pet_step &s = g.s;
    uint64_t acc = 0;
    switch (s.kind) {
    case PET_COPY: {
        const pet_copy &cp = s.u.copy;
        int64_t off = 0;
        for (int i = 0; i < g.o.rank; i++) {
            int sd = cp.src_dim[i];
            if (sd < 0) continue;
            int64_t idx = cp.src_start[i] + (c[i] - cp.ostart[i]) * cp.src_step[i];
            if (cp.src_mod[i] > 0) idx %= cp.src_mod[i];
            off += idx * g.a.st[sd];
        }
        return A[off];
    }
    case PET_RESHAPE:
    case PET_SCALE: {
        int64_t e = 0;
        for (int i = 0; i < g.o.rank; i++) e += c[i] * g.o.st[i];
        return s.kind == PET_SCALE ? d_mul(A[e], s.u.scale) : A[e];
    }
    case PET_BINARY: {
        int64_t ia = 0, ib = 0;
        for (int i = 0; i < g.o.rank; i++) {
            if (s.u.bin.a_dim[i] >= 0) ia += c[i] * g.a.st[s.u.bin.a_dim[i]];
            if (s.u.bin.b_dim[i] >= 0) ib += c[i] * g.b.st[s.u.bin.b_dim[i]];
        }
        uint32_t x = A[ia], y = B[ib];
        return s.u.bin.op == PET_OP_ADD   ? d_add(x, y)
               : s.u.bin.op == PET_OP_SUB ? d_sub(x, y)
                                          : d_mul(x, y);
    }
    case PET_MATMUL: {
        const pet_matmul &mm = s.u.mm;
        int64_t a0 = 0, b0 = 0;
        for (int i = 0; i < mm.nb; i++) {
            if (mm.a_bdim[i] >= 0) a0 += c[i] * g.a.st[mm.a_bdim[i]];
            if (mm.b_bdim[i] >= 0) b0 += c[i] * g.b.st[mm.b_bdim[i]];
        }
        if (mm.a_mdim >= 0) a0 += c[mm.o_mdim] * g.a.st[mm.a_mdim];
        if (mm.b_ndim >= 0) b0 += c[mm.o_ndim] * g.b.st[mm.b_ndim];
        const int64_t ak = g.a.st[mm.a_kdim], bk = g.b.st[mm.b_kdim];
        for (int64_t k = 0; k < mm.K; k++)
            acc += d_fold1((uint64_t)A[a0 + k * ak] * B[b0 + k * bk]);
        return d_fold(acc);
    }
    case PET_CONV:
    case PET_CONVT:
    case PET_AVGPOOL: {
        const pet_conv &cg = s.u.conv;
        int64_t o[3] = {0, 0, 0};
        for (int i = 0; i < cg.S; i++) o[3 - cg.S + i] = c[2 + i];
        const int64_t n = c[0], m = c[1], Cg = cg.C / cg.group, Mg = cg.M / cg.group, grp = m / Mg;
        const int64_t IS = cg.in[0] * cg.in[1] * cg.in[2], KS = cg.k[0] * cg.k[1] * cg.k[2];
        if (s.kind == PET_CONVT) {
            const int64_t mg = m % Mg;
            for (int64_t ch = grp * Cg; ch < (grp + 1) * Cg; ch++)
                for (int64_t t = 0; t < KS; t++) {
                    int64_t tt[3] = {t / (cg.k[1] * cg.k[2]), (t / cg.k[2]) % cg.k[1], t % cg.k[2]},
                            xo = 0;
                    bool ok = true;
                    for (int q = 0; q < 3 && ok; q++) {
                        int64_t num = o[q] + cg.pb[q] - tt[q] * cg.d[q];
                        ok = num >= 0 && num % cg.s[q] == 0 && num / cg.s[q] < cg.in[q];
                        xo = xo * cg.in[q] + (ok ? num / cg.s[q] : 0);
                    }
                    if (ok)
                        acc += d_fold1((uint64_t)A[(n * cg.C + ch) * IS + xo] *
                                       B[(ch * Mg + mg) * KS + t]);
                }
            return d_fold(acc);
        }
        int64_t st[3], lo[3], hi[3], cp = 1, cr = 1;
        for (int q = 0; q < 3; q++) {
            int64_t dq = s.kind == PET_AVGPOOL ? 1 : cg.d[q];
            st[q] = o[q] * cg.s[q] - cg.pb[q];
            lo[q] = st[q] < 0 ? (-st[q] + dq - 1) / dq : 0;
            int64_t h = cg.in[q] - st[q] <= 0 ? 0 : (cg.in[q] - st[q] + dq - 1) / dq;
            hi[q] = h > cg.k[q] ? cg.k[q] : h;
            if (hi[q] < lo[q]) hi[q] = lo[q];
            int64_t e = st[q] + cg.k[q], lim = cg.in[q] + cg.pe[q];
            cp *= (e > lim ? lim : e) - st[q];
            cr *= hi[q] - lo[q];
        }
        if (s.kind == PET_AVGPOOL) {
            const uint32_t *xp = A + (n * cg.C + m) * IS;
            for (int64_t a = lo[0]; a < hi[0]; a++)
                for (int64_t b = lo[1]; b < hi[1]; b++)
                    for (int64_t e = lo[2]; e < hi[2]; e++)
                        acc += xp[((st[0] + a) * cg.in[1] + st[1] + b) * cg.in[2] + st[2] + e];
            int64_t div = cg.count_pad ? cp : cr;
            return div > 0 ? d_mul(d_fold(acc), cg.inv[div]) : 0;
        }
        const uint32_t *xb = A + (n * cg.C + grp * Cg) * IS, *wb = B + m * Cg * KS;
        for (int64_t ch = 0; ch < Cg; ch++)
            for (int64_t a = lo[0]; a < hi[0]; a++)
                for (int64_t b = lo[1]; b < hi[1]; b++) {
                    const uint32_t *xr =
                        xb + ch * IS +
                        ((st[0] + a * cg.d[0]) * cg.in[1] + st[1] + b * cg.d[1]) * cg.in[2] + st[2];
                    const uint32_t *wr = wb + ch * KS + (a * cg.k[1] + b) * cg.k[2];
                    for (int64_t e = lo[2]; e < hi[2]; e++)
                        acc += d_fold1((uint64_t)xr[e * cg.d[2]] * wr[e]);
                }
        return d_fold(acc);
    }
    case PET_REDUCE: {
        const pet_reduce &rd = s.u.red;
        int64_t base = 0, rext[IR_MAX_RANK], rst[IR_MAX_RANK], idx[IR_MAX_RANK], tot = 1;
        int nr = 0;
        for (int i = 0; i < rd.rank; i++) {
            if (rd.reduced[i]) {
                rext[nr] = g.a.dims[i];
                rst[nr] = g.a.st[i];
                idx[nr] = 0;
                tot *= rext[nr++];
            } else if (rd.out_dim[i] >= 0) {
                base += c[rd.out_dim[i]] * g.a.st[i];
            }
        }
        for (int64_t t = 0; t < tot; t++) {
            acc += A[base];
            for (int q = nr - 1; q >= 0; q--) {
                base += rst[q];
                if (++idx[q] < rext[q]) break;
                base -= rext[q] * rst[q];
                idx[q] = 0;
            }
        }
        return d_fold(acc);
    }
    case PET_CUMSUM: {
        const pet_cumsum &cs = s.u.cum;
        int64_t b = 0;
        for (int i = 0; i < g.a.rank; i++)
            if (i != cs.axis) b += c[i] * g.a.st[i];
        int64_t j = c[cs.axis], len = g.a.dims[cs.axis], lo, hi;
        if (!cs.reverse) {
            lo = 0;
            hi = cs.exclusive ? j : j + 1;
        } else {
            lo = cs.exclusive ? j + 1 : j;
            hi = len;
        }
        for (int64_t q = lo; q < hi; q++) acc += A[b + q * g.a.st[cs.axis]];
        return d_fold(acc);
    }
    default: return 0;
    }
}

__global__ void k_step(const __grid_constant__ dargs g) {
    const int64_t total = g.n * g.n_sets;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int set = (int)(t / g.n);
        int64_t e = t % g.n, c[IR_MAX_RANK], off = 0;
        for (int i = g.it.rank - 1; i >= 0; i--) {
            int64_t dd = g.it.dims[i];
            c[i] = e % dd + g.base[i];
            e /= dd;
        }
        for (int i = 0; i < g.o.rank; i++) off += c[i] * g.o.st[i];
        g.O[set * g.so + off] = elem(g, g.A + set * g.sa, g.B ? g.B + set * g.sb : nullptr, c);
    }
}

__global__ void k_rand(uint32_t *dst, int64_t numel, int n_sets, uint64_t seed, uint64_t key) {
    const int64_t total = numel * n_sets;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int set = (int)(t / numel);
        const uint64_t i = (uint64_t)(t % numel);
        dst[t] =
            d_fold(d_mix64(d_stream(seed, (uint32_t)set, key) + (i + 1) * 0x9e3779b97f4a7c15ULL));
    }
}

/* vals[s * n + i] = output probes[i].output of set s at probes[i].index */
__global__ void k_gather(const pet_probe *probes, int64_t n, int n_sets, uint32_t *const *outs,
                         const int64_t *set_stride, uint32_t *vals) {
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n * n_sets;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int s = (int)(t / n);
        const pet_probe p = probes[t % n];
        vals[t] = outs[p.output][s * set_stride[p.output] + p.index];
    }
}

/* ------------------------------------------------------------- the host side */

struct pet_gpu_ctx {
    int dev;
    cudaStream_t stream;
    int sms;
};

ir_status cfail(ir_diag *d, cudaError_t e, const char *what) {
    cudaGetLastError(); /* clear a sticky-free error */
    return ir_diag_set(d, e == cudaErrorMemoryAllocation ? IR_ERR_NOMEM : IR_ERR_INTERNAL,
                       "PET cuda: %s: %s", what, cudaGetErrorString(e));
}
#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = cfail(d, e_, what);                                                               \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

void make_shape(const ir_shape *s, dshape *o) {
    memset(o, 0, sizeof *o);
    o->rank = s->rank;
    int64_t m = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        o->dims[i] = s->dims[i];
        o->st[i] = m;
        m *= s->dims[i];
    }
}

unsigned grid_for(const pet_gpu_ctx *c, int64_t total) {
    int64_t blocks = (total + 255) / 256, cap = (int64_t)c->sms * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

/* All values of p for every set, then the probes. */
ir_status run_prog(pet_gpu_ctx *c, const pet_eval_req *rq, uint64_t seed, int n_sets,
                   int64_t *evaluated, ir_diag *d) {
    const pet_prog *p = rq->prog;
    ir_status st = IR_OK;
    std::vector<uint32_t *> buf((size_t)p->n_values, nullptr);
    std::vector<int64_t> stride((size_t)p->n_values, 0);
    std::vector<uint32_t *> inv_tabs;
    std::vector<uint32_t *> outs((size_t)p->n_outputs + 1, nullptr);
    std::vector<int64_t> ostride((size_t)p->n_outputs + 1, 0);
    pet_probe *dprobes = nullptr;
    uint32_t **douts = nullptr, *dvals = nullptr;
    int64_t *dostride = nullptr;
    const int64_t np = rq->n_probes;
    for (int v = 0; v < p->n_values; v++) {
        const pet_value *pv = &p->values[v];
        int64_t n = pv->numel > 0 ? pv->numel : 1;
        if (pv->kind == PET_V_LITERAL) {
            CK(cudaMalloc((void **)&buf[v], sizeof(uint32_t) * (size_t)n), "cudaMalloc");
            CK(cudaMemcpyAsync(buf[v], pv->lit, sizeof(uint32_t) * (size_t)pv->numel,
                               cudaMemcpyHostToDevice, c->stream),
               "cudaMemcpyAsync");
            stride[v] = 0;
            continue;
        }
        CK(cudaMalloc((void **)&buf[v], sizeof(uint32_t) * (size_t)n * (size_t)n_sets),
           "cudaMalloc");
        stride[v] = pv->numel;
        if (pv->kind == PET_V_VAR && pv->numel > 0) {
            int64_t total = pv->numel * n_sets;
            k_rand<<<grid_for(c, total), 256, 0, c->stream>>>(buf[v], pv->numel, n_sets, seed,
                                                              pv->key);
            CK(cudaGetLastError(), "k_rand");
        }
    }
    for (int si = 0; si < p->n_steps; si++) {
        const pet_step *s = &p->steps[si];
        const pet_value *ov = &p->values[s->out];
        if (ov->numel == 0) continue;
        if (s->kind == PET_ZERO) {
            CK(cudaMemsetAsync(buf[s->out], 0, sizeof(uint32_t) * (size_t)(ov->numel * n_sets),
                               c->stream),
               "cudaMemsetAsync");
            continue;
        }
        dargs g;
        memset(&g, 0, sizeof g);
        g.s = *s;
        make_shape(&ov->shape, &g.o);
        make_shape(&p->values[s->in[0]].shape, &g.a);
        if (s->in[1] >= 0) make_shape(&p->values[s->in[1]].shape, &g.b);
        if (s->kind == PET_COPY) {
            ir_shape reg = ir_shape_make(ov->shape.rank, s->u.copy.ext);
            make_shape(&reg, &g.it);
            for (int i = 0; i < ov->shape.rank; i++) g.base[i] = s->u.copy.ostart[i];
        } else {
            g.it = g.o;
        }
        g.n = 1;
        for (int i = 0; i < g.it.rank; i++) g.n *= g.it.dims[i];
        if (g.n == 0) continue;
        if (s->kind == PET_AVGPOOL) { /* the inverse table, on the device */
            const pet_conv *cg = &s->u.conv;
            int64_t kmax = cg->k[0] * cg->k[1] * cg->k[2];
            uint32_t *tab = nullptr;
            CK(cudaMalloc((void **)&tab, sizeof(uint32_t) * (size_t)(kmax + 1)), "cudaMalloc");
            inv_tabs.push_back(tab);
            CK(cudaMemcpyAsync(tab, cg->inv, sizeof(uint32_t) * (size_t)(kmax + 1),
                               cudaMemcpyHostToDevice, c->stream),
               "cudaMemcpyAsync");
            g.s.u.conv.inv = tab;
        }
        g.A = buf[s->in[0]];
        g.sa = stride[s->in[0]];
        g.B = s->in[1] >= 0 ? buf[s->in[1]] : nullptr;
        g.sb = s->in[1] >= 0 ? stride[s->in[1]] : 0;
        g.O = buf[s->out];
        g.so = stride[s->out];
        g.n_sets = n_sets;
        k_step<<<grid_for(c, g.n * n_sets), 256, 0, c->stream>>>(g);
        CK(cudaGetLastError(), "k_step");
        *evaluated += g.n * n_sets;
    }
    for (int k = 0; k < p->n_outputs; k++) {
        outs[(size_t)k] = buf[p->outputs[k]];
        ostride[(size_t)k] = stride[p->outputs[k]];
    }
    if (np > 0) {
        CK(cudaMalloc((void **)&dprobes, sizeof(pet_probe) * (size_t)np), "cudaMalloc");
        CK(cudaMalloc((void **)&douts, sizeof(uint32_t *) * (size_t)(p->n_outputs + 1)),
           "cudaMalloc");
        CK(cudaMalloc((void **)&dostride, sizeof(int64_t) * (size_t)(p->n_outputs + 1)),
           "cudaMalloc");
        CK(cudaMalloc((void **)&dvals, sizeof(uint32_t) * (size_t)(np * n_sets)), "cudaMalloc");
        CK(cudaMemcpyAsync(dprobes, rq->probes, sizeof(pet_probe) * (size_t)np,
                           cudaMemcpyHostToDevice, c->stream),
           "cudaMemcpyAsync");
        CK(cudaMemcpyAsync(douts, outs.data(), sizeof(uint32_t *) * outs.size(),
                           cudaMemcpyHostToDevice, c->stream),
           "cudaMemcpyAsync");
        CK(cudaMemcpyAsync(dostride, ostride.data(), sizeof(int64_t) * ostride.size(),
                           cudaMemcpyHostToDevice, c->stream),
           "cudaMemcpyAsync");
        k_gather<<<grid_for(c, np * n_sets), 256, 0, c->stream>>>(dprobes, np, n_sets, douts,
                                                                  dostride, dvals);
        CK(cudaGetLastError(), "k_gather");
        CK(cudaMemcpyAsync(rq->vals, dvals, sizeof(uint32_t) * (size_t)(np * n_sets),
                           cudaMemcpyDeviceToHost, c->stream),
           "cudaMemcpyAsync");
    }
    CK(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
out:
    cudaStreamSynchronize(c->stream);
    for (uint32_t *b : buf) cudaFree(b);
    for (uint32_t *t : inv_tabs) cudaFree(t);
    cudaFree(dprobes);
    cudaFree(douts);
    cudaFree(dostride);
    cudaFree(dvals);
    return st;
}

bool pet_cuda_available(char *why, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        cudaGetLastError();
        if (why && n)
            snprintf(why, n, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return false;
    }
    return true;
}

ir_status pet_cuda_open(void **ctx, int threads, ir_diag *d) {
    (void)threads;
    ir_status st = IR_OK;
    pet_gpu_ctx *c = (pet_gpu_ctx *)calloc(1, sizeof *c);
    if (!c) return ir_diag_set(d, IR_ERR_NOMEM, "PET cuda: out of memory");
    CK(cudaGetDevice(&c->dev), "cudaGetDevice");
    CK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, c->dev),
       "cudaDeviceGetAttribute");
    CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    *ctx = c;
    return IR_OK;
out:
    free(c);
    return st;
}

void pet_cuda_close(void *ctx) {
    pet_gpu_ctx *c = (pet_gpu_ctx *)ctx;
    if (!c) return;
    cudaStreamDestroy(c->stream);
    free(c);
}

ir_status pet_cuda_eval(void *ctx, pet_eval_req *reqs, int n_reqs, uint64_t seed, int n_sets,
                        pet_eval_mode mode, int64_t *evaluated, ir_diag *d) {
    (void)mode; /* always whole tensors, see the file's comment */
    pet_gpu_ctx *c = (pet_gpu_ctx *)ctx;
    int64_t done = 0;
    for (int r = 0; r < n_reqs; r++) {
        ir_status st = run_prog(c, &reqs[r], seed, n_sets, &done, d);
        if (st != IR_OK) return st;
    }
    if (evaluated) *evaluated = done;
    return IR_OK;
}

const pet_backend kBackend = {"cuda", pet_cuda_available, pet_cuda_open, pet_cuda_close,
                              pet_cuda_eval};

} // namespace

/* The back-end gpu/gpu-registry.c hands out as pet_cuda_backend(). */
extern "C" const pet_backend *gpu_pet_backend(void) {
    return &kBackend;
}
