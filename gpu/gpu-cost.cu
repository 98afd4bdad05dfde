/* gpu-cost.cu - the "cuda" cost back-end: measures how long one node takes on the GPU.
 *
 * A node is timed on buffers of its own sizes and dtypes filled with bounded pseudo-random
 * values, on a private stream: a few warm-up launches, then `runs` launches each bracketed by two
 * CUDA events, and the median of those. Library work goes where a CUDA executor would send it:
 *  - Conv, ConvTranspose and ConvGradWeight: cuDNN's forward, backward-data and
 *    backward-filter passes, with the algorithm chosen as PET chooses it: cudnnFind*AlgorithmEx
 *    times every algorithm that fits the workspace cap and the fastest is kept (a bias is one
 *    cudnnAddTensor after it);
 *  - MatMul and Gemm: cuBLAS. FP32 products run with CUBLAS_TF32_TENSOR_OP_MATH and convolutions
 *    with CUDNN_TENSOR_OP_MATH, which allow TF32 tensor cores: the analytic targets' matmul/conv
 *    figures are TF32 tensor rates (DESIGN.md), so measured and analytic costs describe the same
 *    arithmetic;
 *  - pooling and batch-norm: cuDNN (inference or training forward, as the node asks; the
 *    training BatchNormGrad is cuDNN's backward pass);
 *  - everything else: the representative kernels of gpu-kernels.cu, or device-to-device copies
 *    for concatenation, splitting and re-shaping (magpie's executor gives every output its own
 *    buffer, so a Reshape is a copy there too).
 * Inputs stay in the L2 cache between the timed runs when they fit in it (50 MB on an H200), as
 * they often do in a network, where a node's inputs were just written by its producers.
 * Geometry cuDNN cannot express exactly (asymmetric padding, ceil-mode pooling) is
 * rounded to the nearest it can: the cost of a layer with one more or fewer output row differs
 * by that row's share, which is within the noise of a measurement.
 *
 * Errors are returned, never fatal, each naming the node and the failing call. A configuration
 * cuDNN or cuBLAS rejects is IR_ERR_UNSUPPORTED, and so is a node whose buffers do not fit in
 * device memory: the profiler keeps its analytic estimate for that node and goes on (it stops
 * on IR_ERR_NOMEM, kept for host memory). Any other failing CUDA call is IR_ERR_INTERNAL. */
#include "gpu-impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace {

constexpr int kMaxRuns = 255;
/* The largest workspace an algorithm may use. Generous, as PET's search is: the fastest
 * algorithm is the one a tuned executor would pick. Halved until it can be allocated. */
constexpr size_t kWorkspaceCap = (size_t)1 << 30;
constexpr size_t kAlign = 256;

struct gpu_ctx {
    int dev;
    char dev_name[320];
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    int blas_version;
    cudaEvent_t e0, e1;
    int warmup;  /* of the node being timed */
    char *arena; /* the node's inputs and outputs, grown on demand */
    size_t arena_cap;
    char *aux; /* small per-op scratch (batch-norm parameters) */
    size_t aux_cap;
    void *ws; /* library workspace */
    size_t ws_cap;
};

/* ------------------------------------------------------------- error reporting */

/* A failure at node n, or of the device alone when n is NULL (launch and transfer timing). */
__attribute__((format(printf, 4, 5))) ir_status nfail(ir_diag *d, ir_status st, const ir_node *n,
                                                      const char *fmt, ...) {
    char buf[sizeof d->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return n ? ir_node_fail(d, st, n, "%s", buf) : ir_diag_set(d, st, "%s", buf);
}

/* Device memory running out is IR_ERR_UNSUPPORTED, not IR_ERR_NOMEM: the profiler stops on the
 * latter, and one node too large for the device should only keep its analytic estimate. */
ir_status cuda_fail(ir_diag *d, const ir_node *n, const char *what, cudaError_t e) {
    ir_status st = e == cudaErrorMemoryAllocation ? IR_ERR_UNSUPPORTED : IR_ERR_INTERNAL;
    return nfail(d, st, n, "cuda: %s failed: %s", what, cudaGetErrorString(e));
}

ir_status dnn_fail(ir_diag *d, const ir_node *n, const char *what, cudnnStatus_t e) {
    ir_status st = IR_ERR_INTERNAL;
    if (e == CUDNN_STATUS_NOT_SUPPORTED || e == CUDNN_STATUS_BAD_PARAM) st = IR_ERR_UNSUPPORTED;
    if (e == CUDNN_STATUS_ALLOC_FAILED) st = IR_ERR_UNSUPPORTED;
    return nfail(d, st, n, "cuda: %s failed: %s", what, cudnnGetErrorString(e));
}

ir_status blas_fail(ir_diag *d, const ir_node *n, const char *what, cublasStatus_t e) {
    ir_status st = IR_ERR_INTERNAL;
    if (e == CUBLAS_STATUS_NOT_SUPPORTED || e == CUBLAS_STATUS_INVALID_VALUE)
        st = IR_ERR_UNSUPPORTED;
    if (e == CUBLAS_STATUS_ALLOC_FAILED) st = IR_ERR_UNSUPPORTED;
    return nfail(d, st, n, "cuda: %s failed: %s", what, cublasGetStatusString(e));
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return cuda_fail(d, n, #call, e_);                                  \
    } while (0)
#define DNN(call)                                                                                  \
    do {                                                                                           \
        cudnnStatus_t e_ = (call);                                                                 \
        if (e_ != CUDNN_STATUS_SUCCESS) return dnn_fail(d, n, #call, e_);                          \
    } while (0)
#define BLAS(call)                                                                                 \
    do {                                                                                           \
        cublasStatus_t e_ = (call);                                                                \
        if (e_ != CUBLAS_STATUS_SUCCESS) return blas_fail(d, n, #call, e_);                        \
    } while (0)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ir_status s_ = (expr);                                                                     \
        if (s_ != IR_OK) return s_;                                                                \
    } while (0)

/* cuDNN descriptors of one timing, destroyed however the timing ends. */
struct dnn_descs {
    cudnnTensorDescriptor_t t[4] = {};
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnPoolingDescriptor_t pool = nullptr;
    ~dnn_descs() {
        for (cudnnTensorDescriptor_t x : t)
            if (x) cudnnDestroyTensorDescriptor(x);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        if (pool) cudnnDestroyPoolingDescriptor(pool);
    }
};

/* ------------------------------------------------------------- buffers */

size_t align_up(size_t x) {
    return (x + kAlign - 1) & ~(kAlign - 1);
}

/* Grows a device buffer to at least `need` bytes; its old contents are not kept. */
ir_status grow(void **buf, size_t *cap, size_t need, ir_diag *d, const ir_node *n) {
    if (need <= *cap) return IR_OK;
    if (*buf) cudaFree(*buf);
    *buf = nullptr;
    *cap = 0;
    size_t want = need + need / 4; /* fewer re-allocations as signatures grow */
    cudaError_t e = cudaMalloc(buf, want);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* allocation failures are not sticky; clear the error */
        want = need;
        e = cudaMalloc(buf, want);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        *buf = nullptr;
        /* not IR_ERR_NOMEM, which would stop profiling: the other nodes may well fit, and
         * this one keeps its analytic estimate */
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: needs %zu bytes of device memory: cudaMalloc failed: %s", need,
                     cudaGetErrorString(e));
    }
    *cap = want;
    return IR_OK;
}

/* The device copies of a node's inputs and outputs (NULL for omitted ones), filled. */
struct node_bufs {
    void *in[64];
    void *out[16];
};

ir_status alloc_node(gpu_ctx *c, const ir_graph *g, const ir_node *n, node_bufs *b, ir_diag *d) {
    if (n->n_in > 64 || n->n_out > 16)
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: %d inputs and %d outputs exceed the "
                     "64 and 16 the timer handles",
                     n->n_in, n->n_out);
    size_t need = 0;
    for (int i = 0; i < n->n_in; i++)
        if (ir_node_in(g, n, i)) need += align_up(ir_value_bytes(ir_node_in(g, n, i)));
    for (int i = 0; i < n->n_out; i++)
        if (ir_node_out(g, n, i)) need += align_up(ir_value_bytes(ir_node_out(g, n, i)));
    TRY(grow((void **)&c->arena, &c->arena_cap, need ? need : kAlign, d, n));
    char *p = c->arena;
    uint64_t seed = 1;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        b->in[i] = nullptr;
        if (!v) continue;
        b->in[i] = p;
        /* constants keep their data (a Reshape's shape, a Gather's indices, weights), as the
         * interface asks; the rest get bounded random values */
        const void *data = ir_value_data(v);
        if (data && ir_value_bytes(v))
            CU(cudaMemcpyAsync(p, data, ir_value_bytes(v), cudaMemcpyHostToDevice, c->stream));
        else
            CU(gpu_k_fill(p, ir_shape_numel(&v->shape), v->dtype, seed, c->stream));
        seed++;
        p += align_up(ir_value_bytes(v));
    }
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *v = ir_node_out(g, n, i);
        b->out[i] = nullptr;
        if (!v) continue;
        b->out[i] = p;
        /* outputs are filled too: Gemm with beta=1 and in-place statistics read them */
        CU(gpu_k_fill(p, ir_shape_numel(&v->shape), v->dtype, seed++, c->stream));
        p += align_up(ir_value_bytes(v));
    }
    return IR_OK;
}

/* The library workspace: up to `want` bytes, or as much below it as can be allocated. */
void get_workspace(gpu_ctx *c, size_t want, size_t *got) {
    while (want > c->ws_cap) {
        if (c->ws) cudaFree(c->ws);
        c->ws = nullptr;
        c->ws_cap = 0;
        if (cudaMalloc(&c->ws, want) == cudaSuccess) {
            c->ws_cap = want;
            break;
        }
        cudaGetLastError();
        c->ws = nullptr;
        if (want <= ((size_t)1 << 20)) break; /* not even 1 MiB: run without one */
        want /= 2;
    }
    *got = c->ws_cap < want ? c->ws_cap : want;
}

/* ------------------------------------------------------------- timing */

int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}
int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Warm-up launches, then the median of `runs` event-bracketed launches. */
template <class F>
ir_status time_launches(gpu_ctx *c, const ir_node *n, int runs, F &&launch, double *seconds,
                        ir_diag *d) {
    if (runs < 1) runs = 1;
    if (runs > kMaxRuns) runs = kMaxRuns;
    float ms[kMaxRuns];
    /* at least one warm-up: the first launch of a kernel or algorithm loads its module */
    for (int i = 0; i < (c->warmup > 0 ? c->warmup : 1); i++) TRY(launch());
    CU(cudaStreamSynchronize(c->stream));
    for (int r = 0; r < runs; r++) {
        CU(cudaEventRecord(c->e0, c->stream));
        TRY(launch());
        CU(cudaEventRecord(c->e1, c->stream));
        CU(cudaEventSynchronize(c->e1));
        CU(cudaEventElapsedTime(&ms[r], c->e0, c->e1));
    }
    qsort(ms, (size_t)runs, sizeof ms[0], cmp_float);
    double med = runs % 2 ? ms[runs / 2] : 0.5 * ((double)ms[runs / 2 - 1] + ms[runs / 2]);
    *seconds = med * 1e-3;
    return IR_OK;
}

/* ------------------------------------------------------------- shapes and dtypes */

int64_t numel(const ir_value *v) {
    return ir_shape_numel(&v->shape);
}

int64_t prod_range(const ir_shape *s, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= s->dims[i];
    return p;
}

int norm_axis(int64_t a, int rank) {
    if (a < 0) a += rank;
    if (a < 0) a = 0;
    if (rank > 0 && a >= rank) a = rank - 1;
    return (int)a;
}

bool dnn_dtype(ir_dtype t, cudnnDataType_t *dt, cudnnDataType_t *compute) {
    switch (t) {
    case IR_F32:
        *dt = CUDNN_DATA_FLOAT;
        *compute = CUDNN_DATA_FLOAT;
        return true;
    case IR_F16:
        *dt = CUDNN_DATA_HALF;
        *compute = CUDNN_DATA_FLOAT;
        return true;
    case IR_BF16:
        *dt = CUDNN_DATA_BFLOAT16;
        *compute = CUDNN_DATA_FLOAT;
        return true;
    case IR_F64:
        *dt = CUDNN_DATA_DOUBLE;
        *compute = CUDNN_DATA_DOUBLE;
        return true;
    default: return false;
    }
}

/* cuDNN's scaling factors 1 and 0 in the type its data type asks: double for double data,
 * float otherwise. Static, so they outlive every launch that reads them. */
const void *dnn_one(cudnnDataType_t dt) {
    static const float one = 1.0f;
    static const double one_d = 1.0;
    return dt == CUDNN_DATA_DOUBLE ? (const void *)&one_d : (const void *)&one;
}
const void *dnn_zero(cudnnDataType_t dt) {
    static const float zero = 0.0f;
    static const double zero_d = 0.0;
    return dt == CUDNN_DATA_DOUBLE ? (const void *)&zero_d : (const void *)&zero;
}

/* dnn_dtype for the data of an `op` node, failing with IR_ERR_UNSUPPORTED where cuDNN has none. */
ir_status dnn_types(const ir_value *x, const char *op, cudnnDataType_t *dt,
                    cudnnDataType_t *compute, ir_diag *d, const ir_node *n) {
    if (!dnn_dtype(x->dtype, dt, compute))
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: %s on %s", op, ir_dtype_name(x->dtype));
    return IR_OK;
}

/* Packed NCHW-style descriptor of `rank` dims (at least 4 for cuDNN: padded with 1s). */
ir_status set_tensor(cudnnTensorDescriptor_t t, cudnnDataType_t dt, int rank, const int64_t *dims,
                     ir_diag *d, const ir_node *n) {
    int dd[IR_MAX_RANK], st[IR_MAX_RANK];
    int r = rank < 4 ? 4 : rank;
    for (int i = 0; i < r; i++) {
        int64_t v = i < rank ? dims[i] : 1;
        if (v > INT32_MAX)
            return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: dim %lld exceeds cuDNN's int",
                         (long long)v);
        dd[i] = (int)v;
    }
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        if (s > INT32_MAX)
            return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: tensor too large for cuDNN");
        st[i] = (int)s;
        s *= dd[i];
    }
    DNN(cudnnSetTensorNdDescriptor(t, dt, r, dd, st));
    return IR_OK;
}

/* Creates ds->t[slot] and sets it as set_tensor does. */
ir_status new_tensor(dnn_descs *ds, int slot, cudnnDataType_t dt, int rank, const int64_t *dims,
                     ir_diag *d, const ir_node *n) {
    DNN(cudnnCreateTensorDescriptor(&ds->t[slot]));
    return set_tensor(ds->t[slot], dt, rank, dims, d, n);
}

/* The first of the `got` algorithms cudnnFind*AlgorithmEx timed (fastest first) that succeeded
 * within ws bytes of workspace: its index in *best, or IR_ERR_UNSUPPORTED naming the `pass` and
 * `what` it was to run where none did. */
template <class Perf>
ir_status pick_algo(const Perf *perf, int got, size_t ws, const char *pass, const char *what,
                    int *best, ir_diag *d, const ir_node *n) {
    *best = -1;
    for (int i = 0; i < got && *best < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws) *best = i;
    if (*best < 0)
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: no cuDNN %s algorithm runs this %s within %zu bytes of workspace", pass,
                     what, ws);
    return IR_OK;
}

/* cuDNN's output dims yd[0..rank) widened into y64; returns their bytes in dtype t. */
int64_t widen_dims(const int *yd, int rank, ir_dtype t, int64_t *y64) {
    int64_t bytes = (int64_t)ir_dtype_size(t);
    for (int i = 0; i < rank; i++) y64[i] = yd[i], bytes *= yd[i];
    return bytes;
}

/* Reads an ints attribute into out[0..cnt) (def where absent or short). */
void attr_ints(const ir_node *n, const char *name, int cnt, int64_t def, int64_t *out) {
    const int64_t *v;
    int m = ir_attr_ints(n, name, &v);
    for (int i = 0; i < cnt; i++) out[i] = i < m ? v[i] : def;
}

/* ------------------------------------------------------------- convolutions */

/* cuDNN convolution geometry of a Conv / ConvTranspose node, padded to >= 2 spatial dims. */
struct conv_dims {
    int S; /* spatial dims given to cuDNN */
    int64_t x[IR_MAX_RANK], w[IR_MAX_RANK];
    int pad[3], stride[3], dil[3];
    int group;
};

/* The forward convolution of input x, filter w and output y (for ConvGradWeight: X, dW, dY),
 * whose input cd->x is X for Conv and the output for ConvTranspose (whose cuDNN form is the
 * backward-data pass of that forward convolution). Attributes as ONNX Conv's. */
ir_status conv_geometry(const ir_node *n, const ir_value *x, const ir_value *w, const ir_value *y,
                        bool transpose, conv_dims *cd, ir_diag *d) {
    int S0 = x->shape.rank - 2;
    if (S0 < 1 || S0 > 3 || !w || !y || w->shape.rank != x->shape.rank ||
        y->shape.rank != x->shape.rank)
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: convolution of rank %d", x->shape.rank);
    int64_t st[3], dl[3], pads[6], opad[3];
    attr_ints(n, "strides", S0, 1, st);
    attr_ints(n, "dilations", S0, 1, dl);
    attr_ints(n, "pads", 2 * S0, 0, pads);
    attr_ints(n, "output_padding", S0, 0, opad);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool autopad = strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0;
    cd->S = S0 < 2 ? 2 : S0;
    cd->group = (int)ir_attr_int(n, "group", 1);
    memset(cd->x, 0, sizeof cd->x);
    memset(cd->w, 0, sizeof cd->w);
    /* the forward convolution's input: X, or the ConvTranspose's output */
    const ir_value *fin = transpose ? y : x;
    cd->x[0] = fin->shape.dims[0];
    cd->x[1] = fin->shape.dims[1];
    cd->w[0] = w->shape.dims[0];
    cd->w[1] = w->shape.dims[1];
    for (int i = 0; i < cd->S; i++) {
        cd->x[2 + i] = 1;
        cd->w[2 + i] = 1;
        cd->pad[i] = 0;
        cd->stride[i] = 1;
        cd->dil[i] = 1;
    }
    for (int i = 0; i < S0; i++) {
        int64_t in = x->shape.dims[2 + i], out = y->shape.dims[2 + i], k = w->shape.dims[2 + i];
        /* cuDNN pads both sides alike. Asymmetric padding takes the side that keeps cuDNN's
         * output within the node's: the smaller pad for Conv, the larger for ConvTranspose
         * (whose padding crops its output) */
        int64_t dk = (k - 1) * dl[i] + 1, pb = pads[i], pe = pads[S0 + i];
        if (transpose) {
            int64_t tot = st[i] * (in - 1) + opad[i] + dk - out;
            if (autopad || !ir_attr_find(n, "pads"))
                pb = (tot + 1) / 2;
            else if (pe > pb)
                pb = pe;
            if (pb < 0) pb = 0;
            /* the forward geometry cuDNN checks: (fout + 2pb - dk) / s + 1 == in */
            int64_t fout = st[i] * (in - 1) + dk - 2 * pb + (opad[i] < st[i] ? opad[i] : 0);
            if (fout < 1) fout = 1;
            cd->x[2 + i] = fout;
        } else {
            if (autopad) {
                int64_t tot = (out - 1) * st[i] + dk - in;
                pb = tot > 0 ? tot / 2 : 0;
            } else if (!strcmp(ap, "VALID")) {
                pb = 0;
            } else if (pe < pb) {
                pb = pe;
            }
            cd->x[2 + i] = in;
        }
        cd->w[2 + i] = k;
        if (pb > INT32_MAX || st[i] > INT32_MAX || dl[i] > INT32_MAX)
            return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: convolution geometry too large");
        cd->pad[i] = (int)pb;
        cd->stride[i] = (int)st[i];
        cd->dil[i] = (int)dl[i];
    }
    return IR_OK;
}

ir_status setup_conv(dnn_descs *ds, const conv_dims *cd, cudnnDataType_t dt,
                     cudnnDataType_t compute, ir_diag *d, const ir_node *n) {
    DNN(cudnnCreateFilterDescriptor(&ds->w));
    int wd[IR_MAX_RANK];
    for (int i = 0; i < cd->S + 2; i++) wd[i] = (int)cd->w[i];
    DNN(cudnnSetFilterNdDescriptor(ds->w, dt, CUDNN_TENSOR_NCHW, cd->S + 2, wd));
    DNN(cudnnCreateConvolutionDescriptor(&ds->conv));
    DNN(cudnnSetConvolutionNdDescriptor(ds->conv, cd->S, cd->pad, cd->stride, cd->dil,
                                        CUDNN_CROSS_CORRELATION, compute));
    DNN(cudnnSetConvolutionGroupCount(ds->conv, cd->group));
    /* tensor cores allowed: TF32 for float data, as the analytic figures assume */
    DNN(cudnnSetConvolutionMathType(ds->conv, CUDNN_TENSOR_OP_MATH));
    return IR_OK;
}

/* The bias of a convolution: one broadcast add over the output, as frameworks run it. */
ir_status setup_bias(dnn_descs *ds, int slot, cudnnDataType_t dt, int64_t M, int S, ir_diag *d,
                     const ir_node *n) {
    int64_t bd[IR_MAX_RANK] = {1, M, 1, 1, 1};
    return new_tensor(ds, slot, dt, S + 2, bd, d, n);
}

ir_status time_conv(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                    double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    cudnnDataType_t dt = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT; /* set by dnn_types */
    TRY(dnn_types(x, "Conv", &dt, &compute, d, n));
    conv_dims cd;
    TRY(conv_geometry(n, x, ir_node_in(g, n, 1), ir_node_out(g, n, 0), false, &cd, d));
    dnn_descs ds;
    TRY(setup_conv(&ds, &cd, dt, compute, d, n));
    TRY(new_tensor(&ds, 0, dt, cd.S + 2, cd.x, d, n));
    int yd[IR_MAX_RANK];
    DNN(cudnnGetConvolutionNdForwardOutputDim(ds.conv, ds.t[0], ds.w, cd.S + 2, yd));
    int64_t y64[IR_MAX_RANK];
    const int64_t ybytes = widen_dims(yd, cd.S + 2, x->dtype, y64);
    /* cuDNN's output may differ from the node's by a row where padding was asymmetric: never
     * write past the node's buffer */
    if ((size_t)ybytes > ir_value_bytes(ir_node_out(g, n, 0)))
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: cuDNN's output geometry exceeds the node's output");
    TRY(new_tensor(&ds, 1, dt, cd.S + 2, y64, d, n));
    bool bias = ir_node_in(g, n, 2) != nullptr;
    if (bias) TRY(setup_bias(&ds, 2, dt, yd[1], cd.S, d, n));

    size_t ws;
    get_workspace(c, kWorkspaceCap, &ws);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    DNN(cudnnFindConvolutionForwardAlgorithmEx(c->dnn, ds.t[0], b->in[0], ds.w, b->in[1], ds.conv,
                                               ds.t[1], b->out[0], CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                               &got, perf, c->ws, ws));
    int best;
    TRY(pick_algo(perf, got, ws, "forward", "convolution", &best, d, n));
    const cudnnConvolutionFwdAlgo_t algo = perf[best].algo;
    const size_t mem = perf[best].memory;
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            DNN(cudnnConvolutionForward(c->dnn, alpha, ds.t[0], b->in[0], ds.w, b->in[1], ds.conv,
                                        algo, c->ws, mem, beta0, ds.t[1], b->out[0]));
            if (bias)
                DNN(cudnnAddTensor(c->dnn, alpha, ds.t[2], b->in[2], alpha, ds.t[1], b->out[0]));
            return IR_OK;
        },
        sec, d);
}

ir_status time_conv_transpose(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                              int runs, double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    cudnnDataType_t dt = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT; /* set by dnn_types */
    TRY(dnn_types(x, "ConvTranspose", &dt, &compute, d, n));
    conv_dims cd;
    TRY(conv_geometry(n, x, ir_node_in(g, n, 1), ir_node_out(g, n, 0), true, &cd, d));
    /* the forward convolution maps the ConvTranspose's output (cd.x, M channels) to its input
     * X (C channels); the filter [C, M/group, k...] is that convolution's [K, C/group, k...] */
    int64_t dy[IR_MAX_RANK];
    for (int i = 0; i < cd.S + 2; i++) dy[i] = 1;
    for (int i = 0; i < x->shape.rank; i++) dy[i] = x->shape.dims[i];
    int64_t dxbytes = (int64_t)ir_dtype_size(x->dtype);
    for (int i = 0; i < cd.S + 2; i++) dxbytes *= cd.x[i];
    if ((size_t)dxbytes > ir_value_bytes(ir_node_out(g, n, 0)))
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: cuDNN's output geometry exceeds the node's output");
    dnn_descs ds;
    TRY(setup_conv(&ds, &cd, dt, compute, d, n));
    TRY(new_tensor(&ds, 0, dt, cd.S + 2, dy, d, n));
    TRY(new_tensor(&ds, 1, dt, cd.S + 2, cd.x, d, n));
    bool bias = ir_node_in(g, n, 2) != nullptr;
    if (bias) TRY(setup_bias(&ds, 2, dt, cd.x[1], cd.S, d, n));

    size_t ws;
    get_workspace(c, kWorkspaceCap, &ws);
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int got = 0;
    DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
        c->dnn, ds.w, b->in[1], ds.t[0], b->in[0], ds.conv, ds.t[1], b->out[0],
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf, c->ws, ws));
    int best;
    TRY(pick_algo(perf, got, ws, "backward-data", "transposed convolution", &best, d, n));
    const cudnnConvolutionBwdDataAlgo_t algo = perf[best].algo;
    const size_t mem = perf[best].memory;
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            DNN(cudnnConvolutionBackwardData(c->dnn, alpha, ds.w, b->in[1], ds.t[0], b->in[0],
                                             ds.conv, algo, c->ws, mem, beta0, ds.t[1], b->out[0]));
            if (bias)
                DNN(cudnnAddTensor(c->dnn, alpha, ds.t[2], b->in[2], alpha, ds.t[1], b->out[0]));
            return IR_OK;
        },
        sec, d);
}

/* ConvGradWeight(X, dY) -> dW: cuDNN's backward-filter pass, algorithm found as for Conv. */
ir_status time_conv_grad_weight(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                                int runs, double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *dy = ir_node_in(g, n, 1), *dw = ir_node_out(g, n, 0);
    cudnnDataType_t dt = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT; /* set by dnn_types */
    TRY(dnn_types(x, "ConvGradWeight", &dt, &compute, d, n));
    conv_dims cd;
    TRY(conv_geometry(n, x, dw, dy, false, &cd, d));
    dnn_descs ds;
    TRY(setup_conv(&ds, &cd, dt, compute, d, n));
    TRY(new_tensor(&ds, 0, dt, cd.S + 2, cd.x, d, n));
    int yd[IR_MAX_RANK];
    DNN(cudnnGetConvolutionNdForwardOutputDim(ds.conv, ds.t[0], ds.w, cd.S + 2, yd));
    int64_t y64[IR_MAX_RANK];
    const int64_t ybytes = widen_dims(yd, cd.S + 2, x->dtype, y64);
    if ((size_t)ybytes > ir_value_bytes(dy)) /* dY is read: never past its buffer */
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: cuDNN's geometry exceeds dY");
    TRY(new_tensor(&ds, 1, dt, cd.S + 2, y64, d, n));

    size_t ws;
    get_workspace(c, kWorkspaceCap, &ws);
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        c->dnn, ds.t[0], b->in[0], ds.t[1], b->in[1], ds.conv, ds.w, b->out[0],
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf, c->ws, ws));
    int best;
    TRY(pick_algo(perf, got, ws, "backward-filter", "weight gradient", &best, d, n));
    const cudnnConvolutionBwdFilterAlgo_t algo = perf[best].algo;
    const size_t mem = perf[best].memory;
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            DNN(cudnnConvolutionBackwardFilter(c->dnn, alpha, ds.t[0], b->in[0], ds.t[1], b->in[1],
                                               ds.conv, algo, c->ws, mem, beta0, ds.w, b->out[0]));
            return IR_OK;
        },
        sec, d);
}

/* ------------------------------------------------------------- matrix products */

/* One (strided-batched) product C[b] = A[b] . B[b] in row-major terms, with the batch strides
 * of A and B (0 where the operand is broadcast). */
struct gemm_desc {
    int64_t batch, M, N, K;
    bool ta, tb; /* A is stored [K, M], B is stored [N, K] */
    int64_t sa, sb, sc;
    float alpha, beta;
};

ir_status matmul_desc(const ir_graph *g, const ir_node *n, gemm_desc *m, ir_diag *d) {
    const ir_value *a = ir_node_in(g, n, 0), *bv = ir_node_in(g, n, 1), *y = ir_node_out(g, n, 0);
    memset(m, 0, sizeof *m);
    m->alpha = 1.0f;
    if (n->op == IR_OP_Gemm) {
        m->ta = ir_attr_int(n, "transA", 0) != 0;
        m->tb = ir_attr_int(n, "transB", 0) != 0;
        m->alpha = ir_attr_float(n, "alpha", 1.0f);
        m->beta = ir_node_in(g, n, 2) ? ir_attr_float(n, "beta", 1.0f) : 0.0f;
        if (a->shape.rank != 2 || bv->shape.rank != 2)
            return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: Gemm of rank %d x %d", a->shape.rank,
                         bv->shape.rank);
        m->batch = 1;
        m->M = m->ta ? a->shape.dims[1] : a->shape.dims[0];
        m->K = m->ta ? a->shape.dims[0] : a->shape.dims[1];
        m->N = m->tb ? bv->shape.dims[0] : bv->shape.dims[1];
        return IR_OK;
    }
    int ra = a->shape.rank, rb = bv->shape.rank;
    if (ra < 1 || rb < 1) return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: MatMul of a scalar");
    m->M = ra >= 2 ? a->shape.dims[ra - 2] : 1;
    m->K = a->shape.dims[ra - 1];
    m->N = rb >= 2 ? bv->shape.dims[rb - 1] : 1;
    int64_t ba = ra > 2 ? prod_range(&a->shape, 0, ra - 2) : 1;
    int64_t bb = rb > 2 ? prod_range(&bv->shape, 0, rb - 2) : 1;
    m->batch = numel(y) / (m->M * m->N > 0 ? m->M * m->N : 1);
    if (m->batch < 1) m->batch = 1;
    /* A broadcast operand gets batch stride 0: strided batches keep the layout exact. A partly
     * broadcast one (neither 1 nor the whole batch) has no strided form: the profiler keeps its
     * analytic estimate for it. */
    m->sa = ba == 1 ? 0 : m->M * m->K;
    m->sb = bb == 1 ? 0 : m->K * m->N;
    m->sc = m->M * m->N;
    if ((ba != 1 && ba != m->batch) || (bb != 1 && bb != m->batch))
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: MatMul with a partly broadcast batch (%lld, %lld over %lld)",
                     (long long)ba, (long long)bb, (long long)m->batch);
    return IR_OK;
}

ir_status time_matmul(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                      double *sec, ir_diag *d) {
    const ir_value *a = ir_node_in(g, n, 0);
    gemm_desc m;
    TRY(matmul_desc(g, n, &m, d));
    if (m.M > INT32_MAX || m.N > INT32_MAX || m.K > INT32_MAX || m.batch > INT32_MAX)
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: product dims exceed cuBLAS's int");
    if (m.M == 0 || m.N == 0 || m.batch == 0) {
        *sec = 0;
        return IR_OK;
    }
    cudaDataType_t dt;
    cublasComputeType_t compute;
    switch (a->dtype) {
    case IR_F32: dt = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case IR_F16: dt = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F; break;
    case IR_BF16: dt = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    case IR_F64: dt = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    default:
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: %s on %s", ir_op_name(n->op),
                     ir_dtype_name(a->dtype));
    }
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. The
     * Gemm bias is read through beta on the output buffer (filled), which moves the same bytes
     * as a full-size C; a broadcast C costs its (smaller) copy, not counted. */
    const int M = (int)m.M, N = (int)m.N, K = (int)m.K, batch = (int)m.batch;
    const cublasOperation_t opb = m.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opa = m.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* leading dims are at least 1 even for empty K (cuBLAS rejects 0) */
    const int ldb = m.tb ? (K > 0 ? K : 1) : N, lda = m.ta ? M : (K > 0 ? K : 1), ldc = N;
    const float alpha = m.alpha, beta = m.beta;
    const double alpha_d = m.alpha, beta_d = m.beta;
    const void *pa = a->dtype == IR_F64 ? (const void *)&alpha_d : (const void *)&alpha;
    const void *pb = a->dtype == IR_F64 ? (const void *)&beta_d : (const void *)&beta;
    const float *A = (const float *)b->in[0], *B = (const float *)b->in[1];
    float *C = (float *)b->out[0];
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            if (a->dtype == IR_F32 && batch == 1) {
                BLAS(
                    cublasSgemm(c->blas, opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
            } else if (a->dtype == IR_F32) {
                BLAS(cublasSgemmStridedBatched(c->blas, opb, opa, N, M, K, &alpha, B, ldb, m.sb, A,
                                               lda, m.sa, &beta, C, ldc, m.sc, batch));
            } else {
                BLAS(cublasGemmStridedBatchedEx(c->blas, opb, opa, N, M, K, pa, B, dt, ldb, m.sb, A,
                                                dt, lda, m.sa, pb, C, dt, ldc, m.sc, batch, compute,
                                                CUBLAS_GEMM_DEFAULT));
            }
            return IR_OK;
        },
        sec, d);
}

/* ------------------------------------------------------------- pooling and batch-norm */

void ew_write_only(gpu_ew_args *a, const ir_value *y, void *p);

ir_status time_pool(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                    double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    cudnnDataType_t dt = CUDNN_DATA_FLOAT, compute = CUDNN_DATA_FLOAT; /* set by dnn_types */
    TRY(dnn_types(x, "pooling", &dt, &compute, d, n));
    const int S0 = x->shape.rank - 2;
    if (S0 < 1 || S0 > 3)
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: pooling of rank %d", x->shape.rank);
    const bool global = n->op == IR_OP_GlobalAveragePool || n->op == IR_OP_GlobalMaxPool;
    const bool maxp = n->op == IR_OP_MaxPool || n->op == IR_OP_GlobalMaxPool;
    int64_t ks[3], st[3], pads[6];
    attr_ints(n, "kernel_shape", S0, 1, ks);
    attr_ints(n, "strides", S0, 1, st);
    attr_ints(n, "pads", 2 * S0, 0, pads);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    const int S = S0 < 2 ? 2 : S0;
    int win[3], pad[3], str[3];
    int64_t xd[IR_MAX_RANK] = {x->shape.dims[0], x->shape.dims[1], 1, 1, 1};
    for (int i = 0; i < S; i++) win[i] = 1, pad[i] = 0, str[i] = 1;
    for (int i = 0; i < S0; i++) {
        int64_t in = x->shape.dims[2 + i];
        xd[2 + i] = in;
        /* the smaller pad of the two sides keeps cuDNN's output within the node's */
        int64_t k = global ? in : ks[i], pb = global ? 0 : pads[i];
        if (!global && pads[S0 + i] < pb) pb = pads[S0 + i];
        if (!global && strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
            int64_t out = (in + st[i] - 1) / st[i], tot = (out - 1) * st[i] + k - in;
            pb = tot > 0 ? tot / 2 : 0;
        }
        if (pb >= k) pb = k - 1; /* cuDNN requires the padding inside the window */
        if (k > INT32_MAX || st[i] > INT32_MAX)
            return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: pooling window too large");
        win[i] = (int)k;
        pad[i] = (int)pb;
        str[i] = global ? 1 : (int)st[i];
    }
    cudnnPoolingMode_t mode = maxp ? CUDNN_POOLING_MAX
                                   : (ir_attr_int(n, "count_include_pad", 0)
                                          ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
    dnn_descs ds;
    DNN(cudnnCreatePoolingDescriptor(&ds.pool));
    DNN(cudnnSetPoolingNdDescriptor(ds.pool, mode, CUDNN_NOT_PROPAGATE_NAN, S, win, pad, str));
    TRY(new_tensor(&ds, 0, dt, S + 2, xd, d, n));
    int yd[IR_MAX_RANK];
    DNN(cudnnGetPoolingNdForwardOutputDim(ds.pool, ds.t[0], S + 2, yd));
    int64_t y64[IR_MAX_RANK];
    const int64_t ybytes = widen_dims(yd, S + 2, x->dtype, y64);
    if ((size_t)ybytes > ir_value_bytes(ir_node_out(g, n, 0)))
        return nfail(d, IR_ERR_UNSUPPORTED, n,
                     "cuda: cuDNN's pooling geometry exceeds the node's output");
    TRY(new_tensor(&ds, 1, dt, S + 2, y64, d, n));
    /* MaxPool's optional Indices: cuDNN keeps none, so their bytes are written separately */
    const ir_value *idx = ir_node_out(g, n, 1);
    gpu_ew_args ia;
    memset(&ia, 0, sizeof ia);
    if (idx) ew_write_only(&ia, idx, b->out[1]);
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            DNN(cudnnPoolingForward(c->dnn, ds.pool, alpha, ds.t[0], b->in[0], beta0, ds.t[1],
                                    b->out[0]));
            if (idx) CU(gpu_k_elementwise(&ia, c->stream));
            return IR_OK;
        },
        sec, d);
}

bool bn_training(const ir_node *n) {
    int64_t tm = ir_attr_int(n, "training_mode", -1);
    if (tm >= 0) return tm != 0;
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) return true;
    return false;
}

/* cuDNN's view of a batch-norm over x: ds->t[0] the data (4-D or 5-D: lower ranks get unit
 * spatial dims, higher ones one merged dim), ds->t[1] the per-channel parameters, and six
 * private arrays of C parameters in cuDNN's own dtype (float, or double for double data)
 * whatever the node's are, filled. */
ir_status bn_setup(gpu_ctx *c, const ir_node *n, const ir_value *x, dnn_descs *ds,
                   cudnnDataType_t *dt, void *p[6], ir_diag *d) {
    cudnnDataType_t compute;
    if (!dnn_dtype(x->dtype, dt, &compute) || x->shape.rank < 2)
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: batch-norm on %s of rank %d",
                     ir_dtype_name(x->dtype), x->shape.rank);
    const int r = x->shape.rank;
    int64_t xd[5] = {x->shape.dims[0], x->shape.dims[1], 1, 1, 1};
    int rank = 4;
    if (r <= 4) {
        for (int i = 2; i < r; i++) xd[i] = x->shape.dims[i];
    } else if (r == 5) {
        for (int i = 2; i < 5; i++) xd[i] = x->shape.dims[i];
        rank = 5;
    } else {
        xd[2] = prod_range(&x->shape, 2, r);
    }
    const int64_t C = xd[1];
    TRY(new_tensor(ds, 0, *dt, rank, xd, d, n));
    DNN(cudnnCreateTensorDescriptor(&ds->t[1]));
    DNN(cudnnDeriveBNTensorDescriptor(ds->t[1], ds->t[0], CUDNN_BATCHNORM_SPATIAL));
    const size_t pes = *dt == CUDNN_DATA_DOUBLE ? 8 : 4, pbytes = align_up((size_t)C * pes);
    TRY(grow((void **)&c->aux, &c->aux_cap, 6 * pbytes, d, n));
    for (int i = 0; i < 6; i++) {
        p[i] = c->aux + i * pbytes;
        CU(gpu_k_fill(p[i], C, pes == 8 ? IR_F64 : IR_F32, 100 + (uint64_t)i, c->stream));
    }
    return IR_OK;
}

/* cuDNN's epsilon: the node's, raised to the least cuDNN accepts. */
double bn_eps(const ir_node *n) {
    double eps = ir_attr_float(n, "epsilon", 1e-5f);
    return eps < CUDNN_BN_MIN_EPSILON ? CUDNN_BN_MIN_EPSILON : eps;
}

ir_status time_batchnorm(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                         int runs, double *sec, ir_diag *d) {
    dnn_descs ds;
    cudnnDataType_t dt;
    void *p[6];
    TRY(bn_setup(c, n, ir_node_in(g, n, 0), &ds, &dt, p, d));
    const bool train = bn_training(n);
    const double eps = bn_eps(n), mom = ir_attr_float(n, "momentum", 0.9f);
    const bool save = n->n_out > 3 && n->out[3] >= 0;
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            if (train) {
                /* ONNX's momentum weighs the old running value; cuDNN's factor the new one */
                DNN(cudnnBatchNormalizationForwardTraining(
                    c->dnn, CUDNN_BATCHNORM_SPATIAL, alpha, beta0, ds.t[0], b->in[0], ds.t[0],
                    b->out[0], ds.t[1], p[0], p[1], 1.0 - mom, p[2], p[3], eps,
                    save ? p[4] : nullptr, save ? p[5] : nullptr));
            } else {
                DNN(cudnnBatchNormalizationForwardInference(
                    c->dnn, CUDNN_BATCHNORM_SPATIAL, alpha, beta0, ds.t[0], b->in[0], ds.t[0],
                    b->out[0], ds.t[1], p[0], p[1], p[2], p[3], eps));
            }
            return IR_OK;
        },
        sec, d);
}

/* BatchNormGrad(dY, X, scale[, mean, var]) -> dX, dScale, dBias with training_mode=1: cuDNN's
 * backward pass, recomputing the batch statistics from X (no saved ones), as the op does. The
 * affine form (training_mode=0) is element-wise and takes the generic path. */
ir_status time_batchnorm_grad(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                              int runs, double *sec, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *x = ir_node_in(g, n, 1);
    if (!x || !dy || !ir_shape_eq(&x->shape, &dy->shape) || x->dtype != dy->dtype ||
        !ir_node_out(g, n, 0))
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: BatchNormGrad with unlike X and dY");
    dnn_descs ds;
    cudnnDataType_t dt;
    void *p[6];
    TRY(bn_setup(c, n, x, &ds, &dt, p, d));
    const double eps = bn_eps(n);
    const void *alpha = dnn_one(dt), *beta0 = dnn_zero(dt);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            DNN(cudnnBatchNormalizationBackward(c->dnn, CUDNN_BATCHNORM_SPATIAL, alpha, beta0,
                                                alpha, beta0, ds.t[0], b->in[1], ds.t[0], b->in[0],
                                                ds.t[0], b->out[0], ds.t[1], p[0], p[1], p[2], eps,
                                                nullptr, nullptr));
            return IR_OK;
        },
        sec, d);
}

/* ------------------------------------------------------------- the project's own kernels */

/* How input v, whose shape broadcasts onto `out`, is read for every element of it (gpu_ew_in):
 * stride 0 along the broadcast dims. */
void ew_map(const ir_value *v, const void *p, const ir_shape *out, gpu_ew_in *in) {
    memset(in, 0, sizeof *in);
    in->p = p;
    in->es = (int)ir_dtype_size(v->dtype);
    const ir_shape *s = &v->shape;
    const int R = out->rank;
    in->contiguous = ir_shape_eq(s, out);
    int64_t stride = 1;
    for (int d = R - 1; d >= 0; d--) {
        int sdim = d - (R - s->rank);
        int64_t sd = sdim >= 0 ? s->dims[sdim] : 1;
        in->mod[d] = out->dims[d] > 0 ? out->dims[d] : 1;
        in->stride[d] = sd == 1 ? 0 : stride;
        stride *= sd;
    }
}

bool is_transcendental(ir_op_kind op) {
    switch (op) {
    case IR_OP_Sigmoid:
    case IR_OP_Tanh:
    case IR_OP_Erf:
    case IR_OP_Exp:
    case IR_OP_Log:
    case IR_OP_Pow:
    case IR_OP_Softplus:
    case IR_OP_Elu: return true;
    default: return false;
    }
}

/* Whether every element the element-wise kernel can touch lies inside the buffers (input k
 * holds in_numel[k] elements): a wrong mapping fails the node, never the device. */
bool ew_fits(const gpu_ew_args &a, const int64_t *in_numel) {
    if (a.out_n > a.n) return false;
    for (int k = 0; k < a.n_in; k++) {
        const gpu_ew_in &in = a.in[k];
        if (in.contiguous) {
            if (a.n > in_numel[k]) return false;
            continue;
        }
        int64_t lo = in.base, hi = in.base;
        for (int dd = 0; dd < a.rank; dd++) {
            int64_t m = in.mod[dd] < a.dims[dd] ? in.mod[dd] : a.dims[dd];
            if (m < 1) return false;
            (in.stride[dd] < 0 ? lo : hi) += (m - 1) * in.stride[dd];
        }
        if (lo < 0 || hi >= in_numel[k]) return false;
    }
    return true;
}

/* Fills `a` for a launch that only writes output y (its extra outputs: a mask, statistics). */
void ew_write_only(gpu_ew_args *a, const ir_value *y, void *p) {
    memset(a, 0, sizeof *a);
    a->rank = 1;
    a->n = a->out_n = a->dims[0] = numel(y);
    a->out = p;
    a->out_es = (int)ir_dtype_size(y->dtype);
}

/* The generic path: one launch per output. The largest output's launch reads up to
 * GPU_EW_MAX_IN of the node's inputs, the others are only written (reading the inputs once per
 * output would count a gradient's dScale and dBias as extra passes over X). Inputs that match
 * or broadcast onto that output are read as such; otherwise (Slice, Pad, Resize, a loss, a
 * pooling gradient) every input and the output are flat arrays over an iteration space as
 * large as the largest of them, smaller ones read wrapped: each byte is moved once, as the op
 * moves it. */
ir_status time_elementwise(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                           int runs, double *sec, ir_diag *d) {
    gpu_ew_args args[16];
    int n_args = 0, big = -1;
    for (int o = 0; o < n->n_out && o < 16; o++)
        if (ir_node_out(g, n, o) &&
            (big < 0 || numel(ir_node_out(g, n, o)) > numel(ir_node_out(g, n, big))))
            big = o;
    for (int o = 0; o < n->n_out && o < 16; o++) {
        const ir_value *y = ir_node_out(g, n, o);
        if (!y) continue;
        gpu_ew_args &a = args[n_args++];
        ew_write_only(&a, y, b->out[o]);
        if (o != big) continue;
        bool flat_view = false;
        int64_t space = numel(y);
        for (int i = 0; i < n->n_in; i++) {
            const ir_value *v = ir_node_in(g, n, i);
            if (!v) continue;
            ir_shape tmp;
            if (!ir_shape_eq(&v->shape, &y->shape) &&
                !(ir_shape_broadcast(&v->shape, &y->shape, &tmp) && ir_shape_eq(&tmp, &y->shape)))
                flat_view = true;
            if (numel(v) > space) space = numel(v);
        }
        if (!flat_view && y->shape.rank > 0) {
            a.rank = y->shape.rank;
            for (int k = 0; k < a.rank; k++) a.dims[k] = y->shape.dims[k];
        } else {
            a.n = a.dims[0] = space;
        }
        int64_t in_numel[GPU_EW_MAX_IN];
        for (int i = 0; i < n->n_in && a.n_in < GPU_EW_MAX_IN; i++) {
            const ir_value *v = ir_node_in(g, n, i);
            if (!v) continue;
            in_numel[a.n_in] = numel(v);
            gpu_ew_in &in = a.in[a.n_in++];
            if (!flat_view && y->shape.rank > 0) {
                ew_map(v, b->in[i], &y->shape, &in);
                continue;
            }
            /* flat (or a scalar output, whose inputs are scalars too when not flat) */
            const int64_t ne = numel(v);
            memset(&in, 0, sizeof in);
            in.p = b->in[i];
            in.es = (int)ir_dtype_size(v->dtype);
            in.contiguous = ne == a.n;
            in.stride[0] = 1;
            in.mod[0] = ne > 0 && ne < a.n ? ne : a.n;
        }
        a.transcendental = is_transcendental(n->op);
        if (!ew_fits(a, in_numel))
            return nfail(d, IR_ERR_INTERNAL, n, "cuda: element-wise mapping out of bounds");
    }
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            for (int i = 0; i < n_args; i++) CU(gpu_k_elementwise(&args[i], c->stream));
            return IR_OK;
        },
        sec, d);
}

ir_status time_transpose(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                         int runs, double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    const int R = x->shape.rank;
    int64_t perm[IR_MAX_RANK], xs[IR_MAX_RANK];
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    for (int i = 0; i < R; i++) perm[i] = np == R ? p[i] : R - 1 - i;
    ir_shape_strides(&x->shape, xs);
    gpu_ew_args a;
    memset(&a, 0, sizeof a);
    a.rank = R > 0 ? R : 1;
    a.dims[0] = 1;
    for (int i = 0; i < R; i++) a.dims[i] = y->shape.dims[i];
    a.n = a.out_n = numel(y);
    a.n_in = 1;
    a.in[0].p = b->in[0];
    a.in[0].es = (int)ir_dtype_size(x->dtype);
    a.in[0].contiguous = R <= 1;
    for (int i = 0; i < a.rank; i++) {
        a.in[0].mod[i] = a.dims[i];
        a.in[0].stride[i] = i < R && perm[i] >= 0 && perm[i] < R ? xs[perm[i]] : 0;
    }
    a.out = b->out[0];
    a.out_es = a.in[0].es;
    const int64_t xn = numel(x);
    if (!ew_fits(a, &xn))
        return nfail(d, IR_ERR_INTERNAL, n, "cuda: transpose mapping out of bounds");
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            CU(gpu_k_elementwise(&a, c->stream));
            return IR_OK;
        },
        sec, d);
}

/* Concat and Split as one 2-D device copy per part: [outer rows] x [part's bytes per row]. */
ir_status time_concat_split(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b,
                            int runs, double *sec, ir_diag *d) {
    const bool concat = n->op == IR_OP_Concat;
    const ir_value *whole = concat ? ir_node_out(g, n, 0) : ir_node_in(g, n, 0);
    const int R = whole->shape.rank;
    const int axis = norm_axis(ir_attr_int(n, "axis", 0), R);
    const size_t es = ir_dtype_size(whole->dtype);
    const int64_t outer = prod_range(&whole->shape, 0, axis);
    const int64_t inner = prod_range(&whole->shape, axis + 1, R) * (int64_t)es;
    const size_t pitch = (size_t)(R ? whole->shape.dims[axis] : 1) * (size_t)inner;
    const int parts = concat ? n->n_in : n->n_out;
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            size_t off = 0;
            for (int j = 0; j < parts; j++) {
                const ir_value *v = concat ? ir_node_in(g, n, j) : ir_node_out(g, n, j);
                if (!v) continue;
                const size_t width = (size_t)(R ? v->shape.dims[axis] : 1) * (size_t)inner;
                if (off + width > pitch) break; /* parts that overrun the whole: never copied */
                if (width && outer == 1) {
                    char *w = (char *)(concat ? b->out[0] : b->in[0]) + off;
                    CU(cudaMemcpyAsync(concat ? w : b->out[j], concat ? b->in[j] : w, width,
                                       cudaMemcpyDeviceToDevice, c->stream));
                } else if (width && outer) {
                    char *w = (char *)(concat ? b->out[0] : b->in[0]) + off;
                    if (concat)
                        CU(cudaMemcpy2DAsync(w, pitch, b->in[j], width, width, (size_t)outer,
                                             cudaMemcpyDeviceToDevice, c->stream));
                    else
                        CU(cudaMemcpy2DAsync(b->out[j], width, w, pitch, width, (size_t)outer,
                                             cudaMemcpyDeviceToDevice, c->stream));
                }
                off += width;
            }
            return IR_OK;
        },
        sec, d);
}

ir_status time_copy(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                    double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    size_t bytes = ir_value_bytes(y) < ir_value_bytes(x) ? ir_value_bytes(y) : ir_value_bytes(x);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            if (bytes)
                CU(cudaMemcpyAsync(b->out[0], b->in[0], bytes, cudaMemcpyDeviceToDevice,
                                   c->stream));
            return IR_OK;
        },
        sec, d);
}

ir_status time_rows(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                    double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    const int R = x->shape.rank;
    gpu_rows_args a;
    memset(&a, 0, sizeof a);
    a.x = b->in[0];
    a.x_es = (int)ir_dtype_size(x->dtype);
    a.y = b->out[0];
    a.y_es = (int)ir_dtype_size(y->dtype);
    const int64_t total = numel(x);
    cudaError_t (*launch)(const gpu_rows_args *, cudaStream_t) = gpu_k_reduce_rows;
    switch (n->op) {
    case IR_OP_Softmax:
    case IR_OP_LogSoftmax: {
        /* opset < 13 flattens from `axis` (default 1); later opsets take one axis (default -1) */
        const bool old = g->opset > 0 && g->opset < 13;
        const int axis = norm_axis(ir_attr_int(n, "axis", old ? 1 : -1), R);
        a.cols = old ? prod_range(&x->shape, axis, R) : (R ? x->shape.dims[axis] : 1);
        launch = gpu_k_softmax_rows;
        break;
    }
    case IR_OP_LayerNormalization: {
        const int axis = norm_axis(ir_attr_int(n, "axis", -1), R);
        a.cols = prod_range(&x->shape, axis, R);
        const ir_value *s = ir_node_in(g, n, 1), *bi = ir_node_in(g, n, 2);
        if (s && numel(s) == a.cols) a.scale = b->in[1];
        if (bi && numel(bi) == a.cols) a.bias = b->in[2];
        a.p_es = s ? (int)ir_dtype_size(s->dtype) : 4;
        if (bi && (int)ir_dtype_size(bi->dtype) != a.p_es) a.bias = nullptr;
        launch = gpu_k_layernorm_rows;
        break;
    }
    case IR_OP_InstanceNormalization:
        a.cols = R > 2 ? prod_range(&x->shape, 2, R) : 1;
        launch = gpu_k_layernorm_rows;
        break;
    default: { /* reductions: each output element reduces the same number of inputs */
        int64_t no = numel(y);
        a.cols = no > 0 ? total / no : 0;
        break;
    }
    }
    a.rows = a.cols > 0 ? total / a.cols : 0;
    /* a reduction writes one element per row: never more rows than its output holds */
    if (launch == gpu_k_reduce_rows && a.rows > numel(y)) a.rows = numel(y);
    if (launch != gpu_k_reduce_rows && a.rows * a.cols > numel(y))
        return nfail(d, IR_ERR_INTERNAL, n, "cuda: output smaller than its input's rows");
    if (n->op == IR_OP_LayerNormalization) {
        /* the optional statistics, when they are one float per row */
        const ir_value *m = ir_node_out(g, n, 1), *r = ir_node_out(g, n, 2);
        if (m && m->dtype == IR_F32 && numel(m) == a.rows) a.mean = b->out[1];
        if (r && r->dtype == IR_F32 && numel(r) == a.rows) a.rstd = b->out[2];
    }
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            CU(launch(&a, c->stream));
            return IR_OK;
        },
        sec, d);
}

ir_status time_gather(gpu_ctx *c, const ir_graph *g, const ir_node *n, const node_bufs *b, int runs,
                      double *sec, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *idx = ir_node_in(g, n, 1);
    const int R = x->shape.rank;
    if (R < 1 || !idx || (idx->dtype != IR_I64 && idx->dtype != IR_I32))
        return time_elementwise(c, g, n, b, runs, sec, d);
    const int axis = norm_axis(ir_attr_int(n, "axis", 0), R);
    const int64_t outer = prod_range(&x->shape, 0, axis), A = x->shape.dims[axis];
    const int64_t inner = prod_range(&x->shape, axis + 1, R);
    const int es = (int)ir_dtype_size(x->dtype), ies = (int)ir_dtype_size(idx->dtype);
    const int64_t n_idx = numel(idx);
    if (outer * n_idx * inner != numel(ir_node_out(g, n, 0)))
        return time_elementwise(c, g, n, b, runs, sec, d);
    return time_launches(
        c, n, runs,
        [&]() -> ir_status {
            CU(gpu_k_gather(b->in[0], es, outer, A, inner, b->in[1], ies, n_idx, b->out[0],
                            c->stream));
            return IR_OK;
        },
        sec, d);
}

/* ------------------------------------------------------------- the back-end */

bool cuda_available(char *why, size_t why_len) {
    if (!why) why_len = 0; /* snprintf(NULL, 0, ...) is valid */
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        /* Without any driver the runtime says its version is "insufficient", which misleads:
         * say that the driver library is missing when it is. */
        void *drv = e == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY) : nullptr;
        if (e == cudaErrorInsufficientDriver && !drv)
            snprintf(why, why_len, "no NVIDIA driver: libcuda.so.1 cannot be loaded");
        else
            snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        if (drv) dlclose(drv);
        return false;
    }
    if (count < 1) {
        snprintf(why, why_len, "the driver reports no device");
        return false;
    }
    return true;
}

void cuda_describe(void *ctx, char *buf, size_t n) {
    const gpu_ctx *c = (const gpu_ctx *)ctx;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    snprintf(buf, n, "%s, CUDA runtime %d.%d, driver %d.%d, cuDNN %zu, cuBLAS %d", c->dev_name,
             rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, cudnnGetVersion(),
             c->blas_version);
}

/* The named target whose datasheet figures stand in until calibration: matched on the device's
 * name, so an H200 starts from the h200 roofline. */
const char *cuda_fallback_target(void *ctx) {
    const gpu_ctx *c = (const gpu_ctx *)ctx;
    static const struct {
        const char *needle, *target;
    } map[] = {{"H200", "h200"}, {"H100", "h100"}, {"A100", "a100"}, {"3090", "rtx3090"}};
    for (const auto &m : map)
        if (strstr(c->dev_name, m.needle)) return m.target;
    return nullptr;
}

/* What every node pays besides its kernel: the launch. Measured as the wall-clock cost per
 * launch of a batch of back-to-back empty kernels (a stream of small nodes is bound by it),
 * median over `runs` batches. */
ir_status cuda_time_launch(void *ctx, int runs, double *seconds, ir_diag *d) {
    gpu_ctx *c = (gpu_ctx *)ctx;
    const ir_node *n = nullptr;
    constexpr int kBatch = 200;
    if (runs < 1) runs = 1;
    if (runs > kMaxRuns) runs = kMaxRuns;
    double per[kMaxRuns];
    CU(gpu_k_empty(c->stream));
    CU(cudaStreamSynchronize(c->stream));
    for (int r = 0; r < runs; r++) {
        timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < kBatch; i++) CU(gpu_k_empty(c->stream));
        CU(cudaStreamSynchronize(c->stream));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        per[r] =
            ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / kBatch;
    }
    qsort(per, (size_t)runs, sizeof per[0], cmp_double);
    *seconds = runs % 2 ? per[runs / 2] : 0.5 * (per[runs / 2 - 1] + per[runs / 2]);
    return IR_OK;
}

/* One host-to-device copy of `bytes` from pinned memory, as a swap Load would run. */
ir_status cuda_time_transfer(void *ctx, size_t bytes, int runs, double *seconds, ir_diag *d) {
    gpu_ctx *c = (gpu_ctx *)ctx;
    const ir_node *n = nullptr;
    if (runs < 1) runs = 1;
    if (runs > kMaxRuns) runs = kMaxRuns;
    void *host = nullptr;
    cudaError_t e = cudaMallocHost(&host, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "cuda: cudaMallocHost of %zu bytes failed: %s",
                           bytes, cudaGetErrorString(e));
    }
    memset(host, 0x3c, bytes);
    ir_status st = grow((void **)&c->arena, &c->arena_cap, bytes ? bytes : 1, d, nullptr);
    float ms[kMaxRuns];
    for (int r = 0; r <= runs && st == IR_OK; r++) { /* r == 0 is the warm-up */
        if ((e = cudaEventRecord(c->e0, c->stream)) != cudaSuccess ||
            (e = cudaMemcpyAsync(c->arena, host, bytes, cudaMemcpyHostToDevice, c->stream)) !=
                cudaSuccess ||
            (e = cudaEventRecord(c->e1, c->stream)) != cudaSuccess ||
            (e = cudaEventSynchronize(c->e1)) != cudaSuccess ||
            (e = cudaEventElapsedTime(&ms[r ? r - 1 : 0], c->e0, c->e1)) != cudaSuccess)
            st = cuda_fail(d, n, "a host-to-device copy", e);
    }
    cudaFreeHost(host);
    if (st != IR_OK) return st;
    qsort(ms, (size_t)runs, sizeof ms[0], cmp_float);
    *seconds = 1e-3 * (runs % 2 ? ms[runs / 2] : 0.5 * ((double)ms[runs / 2 - 1] + ms[runs / 2]));
    return IR_OK;
}

void cuda_close(void *ctx) {
    gpu_ctx *c = (gpu_ctx *)ctx;
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->arena) cudaFree(c->arena);
    if (c->aux) cudaFree(c->aux);
    if (c->ws) cudaFree(c->ws);
    if (c->e0) cudaEventDestroy(c->e0);
    if (c->e1) cudaEventDestroy(c->e1);
    if (c->blas) cublasDestroy(c->blas);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

ir_status cuda_open(void **out, ir_diag *d) {
    *out = nullptr;
    char why[256];
    if (!cuda_available(why, sizeof why))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "cuda: %s", why);
    gpu_ctx *c = (gpu_ctx *)calloc(1, sizeof *c);
    if (!c) return ir_diag_set(d, IR_ERR_NOMEM, "cuda: out of host memory");
    ir_status st = IR_ERR_UNSUPPORTED;
    cudaError_t e;
    cudnnStatus_t de;
    cublasStatus_t be;
    cudaDeviceProp prop;
    /* device 0 of those CUDA_VISIBLE_DEVICES leaves: one GPU measured, as one runs the model */
#define OPEN_CU(call)                                                                              \
    if ((e = (call)) != cudaSuccess) {                                                             \
        ir_diag_set(d, st, "cuda: %s failed: %s", #call, cudaGetErrorString(e));                   \
        goto fail;                                                                                 \
    }
    c->dev = 0;
    OPEN_CU(cudaSetDevice(c->dev));
    OPEN_CU(cudaGetDeviceProperties(&prop, c->dev));
    snprintf(c->dev_name, sizeof c->dev_name, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    OPEN_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    OPEN_CU(cudaEventCreate(&c->e0));
    OPEN_CU(cudaEventCreate(&c->e1));
#undef OPEN_CU
    if ((de = cudnnCreate(&c->dnn)) != CUDNN_STATUS_SUCCESS ||
        (de = cudnnSetStream(c->dnn, c->stream)) != CUDNN_STATUS_SUCCESS) {
        ir_diag_set(d, st, "cuda: cuDNN could not start on %s: %s", c->dev_name,
                    cudnnGetErrorString(de));
        goto fail;
    }
    if ((be = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS ||
        (be = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
        /* TF32 tensor cores for FP32 products: the analytic figures are TF32 rates */
        (be = cublasSetMathMode(c->blas, CUBLAS_TF32_TENSOR_OP_MATH)) != CUBLAS_STATUS_SUCCESS ||
        (be = cublasGetVersion(c->blas, &c->blas_version)) != CUBLAS_STATUS_SUCCESS) {
        ir_diag_set(d, st, "cuda: cuBLAS could not start on %s: %s", c->dev_name,
                    cublasGetStatusString(be));
        goto fail;
    }
    *out = c;
    return IR_OK;
fail:
    cuda_close(c);
    return st;
}

ir_status cuda_time_node(void *ctx, const ir_graph *g, const ir_node *n, int warmup, int runs,
                         double *seconds, ir_diag *d) {
    gpu_ctx *c = (gpu_ctx *)ctx;
    *seconds = 0;
    if (n->op == IR_OP_OPAQUE)
        return nfail(d, IR_ERR_UNSUPPORTED, n, "cuda: op %s has no GPU timing",
                     n->op_type ? n->op_type : "?");
    for (int i = 0; i < n->n_out; i++)
        if (ir_node_out(g, n, i) && ir_node_out(g, n, i)->dtype == IR_DTYPE_NONE)
            return nfail(d, IR_ERR_INVALID, n, "cuda: output %d has no inferred dtype", i);
    /* ops that exist only on the host cost nothing on the device */
    switch (n->op) {
    case IR_OP_Shape:
    case IR_OP_Size:
    case IR_OP_Constant: return IR_OK;
    default: break;
    }
    c->warmup = warmup;
    node_bufs b;
    TRY(alloc_node(c, g, n, &b, d));
    ir_status st;
    switch (n->op) {
    case IR_OP_Conv: st = time_conv(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_ConvTranspose: st = time_conv_transpose(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_MatMul:
    case IR_OP_Gemm: st = time_matmul(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_MaxPool:
    case IR_OP_AveragePool:
    case IR_OP_GlobalAveragePool:
    case IR_OP_GlobalMaxPool: st = time_pool(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_BatchNormalization: st = time_batchnorm(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_ConvGradWeight: st = time_conv_grad_weight(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_BatchNormGrad:
        st = ir_attr_int(n, "training_mode", 0) ? time_batchnorm_grad(c, g, n, &b, runs, seconds, d)
                                                : time_elementwise(c, g, n, &b, runs, seconds, d);
        break;
    case IR_OP_Softmax:
    case IR_OP_LogSoftmax:
    case IR_OP_LayerNormalization:
    case IR_OP_InstanceNormalization:
    case IR_OP_ReduceMean:
    case IR_OP_ReduceSum:
    case IR_OP_ReduceMax:
    case IR_OP_ReduceMin:
    case IR_OP_ReduceProd:
    case IR_OP_ReduceL2:
    case IR_OP_ArgMax: st = time_rows(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_Transpose: st = time_transpose(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_Concat:
    case IR_OP_Split: st = time_concat_split(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_Gather: st = time_gather(c, g, n, &b, runs, seconds, d); break;
    case IR_OP_Reshape:
    case IR_OP_Flatten:
    case IR_OP_Squeeze:
    case IR_OP_Unsqueeze:
    case IR_OP_Identity: st = time_copy(c, g, n, &b, runs, seconds, d); break;
    default: st = time_elementwise(c, g, n, &b, runs, seconds, d); break;
    }
    if (st == IR_OK) {
        /* an asynchronous fault surfaces at the next call: catch it here, not a node later */
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e == cudaSuccess) e = cudaGetLastError();
        if (e != cudaSuccess) return cuda_fail(d, n, "the timed launches", e);
        if (!isfinite(*seconds) || *seconds < 0)
            return nfail(d, IR_ERR_INTERNAL, n, "cuda: timing gave %g s", *seconds);
    } else {
        cudaStreamSynchronize(c->stream);
        cudaGetLastError(); /* leave no non-sticky error for the next node */
    }
    return st;
}

const prof_backend gpu_cost_backend = {
    "cuda",         cuda_available,   cuda_open,          cuda_close,           cuda_describe,
    cuda_time_node, cuda_time_launch, cuda_time_transfer, cuda_fallback_target, nullptr,
};

} // namespace

extern "C" const prof_backend *gpu_prof_backend(void) {
    return &gpu_cost_backend;
}
