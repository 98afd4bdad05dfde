/* ir-impl.h - private declarations shared by the files of ir/: the arena, and the helpers that
 * op definitions (ops-*.c) use for shape inference and kernels. Not part of the public API. */
#ifndef MAGPIE_IR_IMPL_H
#define MAGPIE_IR_IMPL_H

#include "ir.h"
#include "ir-geom.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

/* A bump allocator freed in one call: one per graph lifetime (ir-arena.c: its shared and private
 * parts). */
ir_arena *ir_arena_new(void);
/* Frees the private part now and drops the owner's reference to the shared part. */
void ir_arena_free(ir_arena *a);
void *ir_arena_alloc(ir_arena *a, size_t bytes); /* shared part: zeroed, 16-byte aligned */
char *ir_arena_strdup(ir_arena *a, const char *s);
/* The private part: not zeroed, freed by ir_arena_free; NULL on OOM. */
void *ir_arena_alloc_private(ir_arena *a, size_t bytes);
/* dst keeps src's shared bytes (and what they point into) alive; false on OOM. */
bool ir_arena_share(ir_arena *dst, ir_arena *src);

/* ---------------------------------------------------------------- views (ir-alias.c) */

/* True when an in-place output must not take over x's buffer: x is a view, or a graph output is
 * a view of x (the write would change bytes another value still shows). viewed: per value, 1
 * when a graph output is a view of it (ir_viewed_by_outputs), or NULL to search the outputs. */
bool ir_view_blocks_inplace(const ir_graph *g, int x, const uint8_t *viewed);
/* ir_value_inplace_of with ir_view_blocks_inplace's viewed marks (may be NULL): O(1) with them. */
int ir_inplace_input(const ir_graph *g, int v, const uint8_t *viewed);

/* ---------------------------------------------------------------- op definitions */

/* Every op file defines `const ir_op_def ir_opdef_<name>` for each of its ops. */
#define IR_OP(name, domain) extern const ir_op_def ir_opdef_##name;
#include "ir-ops.def"
#undef IR_OP

/* Defines ir_opdef_<name> for the ONNX-domain op <name> taking in_lo..in_hi inputs and
 * out_lo..out_hi outputs; the other fields follow as designated initializers
 * (`.infer = f, .kernel = k`). */
#define IR_OP_DEF(name_, in_lo, in_hi, out_lo, out_hi, ...)                                        \
    const ir_op_def ir_opdef_##name_ = {.name = #name_,                                            \
                                        .domain = "",                                              \
                                        .min_in = (in_lo),                                         \
                                        .max_in = (in_hi),                                         \
                                        .min_out = (out_lo),                                       \
                                        .max_out = (out_hi),                                       \
                                        __VA_ARGS__}
/* The same for an op of the "magpie" domain (backward and training ops). */
#define IR_MAGPIE_OP_DEF(name_, in_lo, in_hi, out_lo, out_hi, ...)                                 \
    const ir_op_def ir_opdef_##name_ = {.name = #name_,                                            \
                                        .domain = "magpie",                                        \
                                        .min_in = (in_lo),                                         \
                                        .max_in = (in_hi),                                         \
                                        .min_out = (out_lo),                                       \
                                        .max_out = (out_hi),                                       \
                                        __VA_ARGS__}

/* Sets output i's dtype and shape. */
static inline void ir_set_out(ir_graph *g, ir_node *n, int i, ir_dtype t, const ir_shape *s) {
    ir_value *v = &g->values[n->out[i]];
    v->dtype = t;
    v->shape = *s;
}

/* Reads constant input i as int64 values (any integer dtype) into out and their count into
 * *cnt. An absent input is IR_OK with *cnt = -2 (no message), so optional inputs can default.
 * Failures set *cnt = -1 and a message: IR_ERR_UNSUPPORTED when the input is not a constant
 * (dynamic shapes), IR_ERR_INVALID when it is a float tensor or has more than max values. */
ir_status ir_const_ints(const ir_graph *g, const ir_node *n, int i, int64_t *out, int max, int *cnt,
                        ir_diag *d);
/* IR_ERR_INVALID naming what[i] unless each of the cnt values is >= 0 (shapes, repeats). */
ir_status ir_check_sizes(const ir_node *n, const char *what, const int64_t *v, int cnt, ir_diag *d);
/* Reads constant scalar input i as double; false with a message when not constant. */
bool ir_const_scalar(const ir_graph *g, const ir_node *n, int i, double *out, ir_diag *d);

/* Normalizes a possibly negative axis against rank; false when out of range. */
static inline bool ir_norm_axis(int64_t axis, int rank, int *out) {
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= (rank > 0 ? rank : 1)) return false;
    *out = (int)axis;
    return true;
}

/* Reads an optional ints attribute that must have exactly cnt values; every value is def when
 * the attribute is absent. IR_ERR_INVALID with a message for another count. */
ir_status ir_attr_ints_n(const ir_node *n, const char *name, int cnt, int64_t def, int64_t *out,
                         ir_diag *d);

/* Product of a geometry padded to 3 spatial dims (conv, pooling). */
static inline int64_t ir_prod3(const int64_t *v) {
    return v[0] * v[1] * v[2];
}

/* ---------------------------------------------------------------- kernel helpers */

/* Number of elements of a kernel tensor. */
static inline int64_t ir_tensor_numel(const ir_tensor *t) {
    return ir_shape_numel(&t->shape);
}

/* Kernel-side twin of ir_const_ints: input i's values, -2 when it is absent, -1 when there are
 * more than max (inference has already rejected that). */
int ir_tensor_ints(const ir_kernel_ctx *k, int i, int64_t *out, int max);

/* The dtype the kernel of an op without IR_OPF_FLOAT16 computes a value of dtype t in: ir_node_run
 * widens float16 and bfloat16 to float32 for it. Workspace callbacks that size scratch by the
 * element type use this, not the value's own dtype. */
static inline ir_dtype ir_kernel_dtype(ir_dtype t) {
    return (t == IR_F16 || t == IR_BF16) ? IR_F32 : t;
}

/* IR_ERR_UNSUPPORTED (with a message) unless every present float input is float32: for a kernel
 * that runs float32 only. No op of the table has one today (every float op also runs float64, the
 * reference of ir_graph_to_f64): a new kernel should be a template instantiated by
 * ir-float-tmpl.h and dispatch with IR_KERNEL_BY_FLOAT instead. Integer inputs are not checked. */
ir_status ir_check_f32(const ir_kernel_ctx *k);
/* The float dtype a kernel instantiated for float32 and float64 (ir-float-tmpl.h) runs in: every
 * present float input and output float32, or every one float64 (float32 when there are none).
 * IR_ERR_UNSUPPORTED naming the dtypes otherwise (a mix). Such a kernel never sees float16 or
 * bfloat16: ir_node_run widens them to float32 for every op without IR_OPF_FLOAT16. */
ir_status ir_kernel_float(const ir_kernel_ctx *k, ir_dtype *t);
/* The body of a kernel with instances fn_f32 and fn_f64 (ir-float-tmpl.h): picks by dtype. */
#define IR_KERNEL_BY_FLOAT(k, fn)                                                                  \
    do {                                                                                           \
        ir_dtype t_;                                                                               \
        ir_status s_ = ir_kernel_float((k), &t_);                                                  \
        if (s_ != IR_OK) return s_;                                                                \
        return t_ == IR_F64 ? fn##_f64(k) : fn##_f32(k);                                           \
    } while (0)

/* Fills n elements of es bytes with *elem: memset when the pattern is all zero bits (zero in
 * every dtype), otherwise by doubling memcpy so that the work is a few large copies. */
void ir_fill_elems(void *dst, int64_t n, const void *elem, size_t es);

/* Float to integer, truncating toward zero and saturating at the type's limits, NaN to 0: the
 * conversion never traps (ONNX leaves out-of-range values implementation-defined). */
#define IR_DEF_SAT(tag, T, LO, HI)                                                                 \
    static inline T ir_sat_##tag(double v) {                                                       \
        if (isnan(v)) return 0;                                                                    \
        if (v <= (double)(LO)) return LO;                                                          \
        if (v >= (double)(HI)) return HI;                                                          \
        return (T)v;                                                                               \
    }
IR_DEF_SAT(i64, int64_t, INT64_MIN, INT64_MAX)
IR_DEF_SAT(i32, int32_t, INT32_MIN, INT32_MAX)
IR_DEF_SAT(i8, int8_t, INT8_MIN, INT8_MAX)
IR_DEF_SAT(u8, uint8_t, 0, UINT8_MAX)
IR_DEF_SAT(i16, int16_t, INT16_MIN, INT16_MAX)
IR_DEF_SAT(u16, uint16_t, 0, UINT16_MAX)
IR_DEF_SAT(u32, uint32_t, 0, UINT32_MAX)
IR_DEF_SAT(u64, uint64_t, 0, UINT64_MAX)
#undef IR_DEF_SAT

/* Writes an int64 into element i of a buffer of dtype t without a round trip through double, so
 * large int64 values stay exact (integer narrowing wraps, bool tests non-zero). */
void ir_store_i64(void *buf, ir_dtype t, int64_t i, int64_t v);

/* FLOPs counted per element for an op that calls libm's exp/log/tanh/erf/sqrt/pow. */
#define IR_FLOPS_TRANSCENDENTAL 4.0

/* Parallel loops: OpenMP when the build has it (both cores), serial otherwise. Use for loops
 * whose iterations are independent and each worth at least a few microseconds in total. */
#ifdef _OPENMP
#define IR_PRAGMA(x) _Pragma(#x)
#define IR_PARALLEL_FOR(cond) IR_PRAGMA(omp parallel for schedule(static) if (cond))
/* -O2 (GCC's very-cheap cost model) vectorizes few inner loops by itself; `omp simd` asks for
 * it. Only for loops that carry no dependence; IR_SIMD also lets GCC if-convert float compares
 * (trapping math), IR_SIMD_REDUCE lets float accumulations reassociate. */
#define IR_SIMD IR_PRAGMA(omp simd)
#define IR_SIMD_REDUCE(clause) IR_PRAGMA(omp simd reduction(clause))
#else
#define IR_PARALLEL_FOR(cond)
#define IR_SIMD
#define IR_SIMD_REDUCE(clause)
#endif
/* Loops with fewer element-operations than this stay serial. */
#define IR_PAR_MIN 32768

/* Hot loops get AVX2 and AVX-512 clones chosen at load time, since the build targets baseline
 * x86-64 (SSE2). Only plain functions are cloned: OpenMP's outlined bodies would not be. Not
 * under TSan: its runtime is not up yet when the loader runs the clones' ifunc resolvers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define IR_HOT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define IR_HOT_CLONES
#endif

/* ---------------------------------------------------------------- shared with backward ops */

/* Geometry and helpers of forward kernels that their backward kernels (ops-grad-*.c) reuse, so
 * that both sides agree on windows, pads and coordinates by construction. */

/* col[(c,kd,kh,kw), (od,oh,ow)] = x[c, od*s-pb+kd*d, ...] (0 in the padding), for Cg channels
 * and the nr output rows (od,oh) from r0 (row r is od = r / out[1], oh = r % out[1]): col holds
 * Cg * prod3(k) * nr * out[2] elements. One per float dtype. */
void ir_conv_im2col_f32(const float *x, float *col, const ir_conv_geom *cg, int64_t Cg, int64_t r0,
                        int64_t nr);
void ir_conv_im2col_f64(const double *x, double *col, const ir_conv_geom *cg, int64_t Cg,
                        int64_t r0, int64_t nr);
/* The output rows one im2col tile of Cg channels holds (ir_conv_tile_rows), for elements of
 * elem_bytes: what Conv's and ConvGradWeight's kernels and workspace() use. */
static inline int64_t ir_conv_col_rows(const ir_conv_geom *cg, int64_t Cg, size_t elem_bytes) {
    return ir_conv_tile_rows(cg->out[0] * cg->out[1], cg->out[2],
                             Cg * ir_prod3(cg->k) * cg->out[2] * (int64_t)elem_bytes);
}
/* The input rows (id, ih) one tile of ConvTranspose's column buffer ([M/group * K, pixels])
 * holds. */
static inline int64_t ir_convt_col_rows(const ir_conv_geom *cg, size_t elem_bytes) {
    return ir_conv_tile_rows(cg->in[0] * cg->in[1], cg->in[2],
                             cg->M / cg->group * ir_prod3(cg->k) * cg->in[2] * (int64_t)elem_bytes);
}
/* The positions o in [0, n_pos) for which o*s + off lands in [0, bound): [*lo, *hi). */
static inline void ir_conv_valid_range(int64_t off, int64_t s, int64_t bound, int64_t n_pos,
                                       int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = bound - 1 - off < 0 ? 0 : (bound - 1 - off) / s + 1;
    if (h > n_pos) h = n_pos;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Element i of a float32/float64 buffer of dtype t as double, and back. */
#define IR_LD_F(t, p, i)                                                                           \
    ((t) == IR_F32 ? (double)((const float *)(p))[i] : ((const double *)(p))[i])
#define IR_ST_F(t, p, i, v)                                                                        \
    do {                                                                                           \
        if ((t) == IR_F32)                                                                         \
            ((float *)(p))[i] = (float)(v);                                                        \
        else                                                                                       \
            ((double *)(p))[i] = (v);                                                              \
    } while (0)

/* The kernel taps [*kl, *kh) of a window starting at `start` that land inside [0, in). */
static inline void ir_pool_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t *kl,
                                int64_t *kh) {
    int64_t l, h;
    if (d == 1) { /* the common case, without the divisions that would dominate a 3x3 window */
        l = start < 0 ? -start : 0;
        h = in - start <= 0 ? 0 : in - start;
    } else {
        l = start < 0 ? (-start + d - 1) / d : 0;
        h = in - start <= 0 ? 0 : (in - start + d - 1) / d;
    }
    if (h > k) h = k;
    *kl = l;
    *kh = h > l ? h : l;
}
/* Window start st[i] of output position o along spatial dim i, and its taps [kl[i], kh[i]). */
static inline void ir_pool_window_dim(const ir_pool_geom *pg, int i, int64_t o, int64_t *st,
                                      int64_t *kl, int64_t *kh) {
    st[i] = o * pg->s[i] - pg->pb[i];
    ir_pool_taps(st[i], pg->k[i], pg->d[i], pg->in[i], &kl[i], &kh[i]);
}
/* MaxPool's rule: the index in plane xp of the window's first strictly greater value, scanned in
 * row-major order (-1 for a window with no taps). One per dtype MaxPool runs:
 * ir_pool_argmax_f32/_f64/_u8/_i8. */
#define IR_DEF_POOL_ARGMAX(sfx, T)                                                                 \
    static inline int64_t ir_pool_argmax_##sfx(const ir_pool_geom *pg, const T *xp,                \
                                               const int64_t *st, const int64_t *kl,               \
                                               const int64_t *kh) {                                \
        const int64_t *in = pg->in, *dl = pg->d;                                                   \
        int64_t bi = -1;                                                                           \
        for (int64_t a = kl[0]; a < kh[0]; a++)                                                    \
            for (int64_t b = kl[1]; b < kh[1]; b++) {                                              \
                int64_t row = ((st[0] + a * dl[0]) * in[1] + st[1] + b * dl[1]) * in[2];           \
                for (int64_t c = kl[2]; c < kh[2]; c++) {                                          \
                    int64_t at = row + st[2] + c * dl[2];                                          \
                    if (bi < 0 || xp[at] > xp[bi]) bi = at;                                        \
                }                                                                                  \
            }                                                                                      \
        return bi;                                                                                 \
    }
IR_DEF_POOL_ARGMAX(f32, float)
IR_DEF_POOL_ARGMAX(f64, double)
IR_DEF_POOL_ARGMAX(u8, uint8_t)
IR_DEF_POOL_ARGMAX(i8, int8_t)
#undef IR_DEF_POOL_ARGMAX
/* AveragePool's divisor for the window starting at st with taps [kl, kh): with
 * count_include_pad the taps inside the padded input (the window clipped to it), else the real
 * elements. Taps are dilation d apart (opset 19). */
static inline int64_t ir_pool_avg_div(const ir_pool_geom *pg, const int64_t *st, const int64_t *kl,
                                      const int64_t *kh, bool count_pad) {
    int64_t cnt_pad = 1, cnt = 1;
    for (int i = 0; i < 3; i++) {
        int64_t lim = pg->in[i] + pg->pe[i] - st[i], d = pg->d[i];
        int64_t taps = lim <= 0 ? 0 : (lim + d - 1) / d;
        cnt_pad *= taps > pg->k[i] ? pg->k[i] : taps;
        cnt *= kh[i] - kl[i];
    }
    return count_pad ? cnt_pad : cnt;
}

/* Pad's modes, from its `mode` attribute (ops-layout.c; NULL: constant). -1 for an unknown one. */
enum ir_pad_mode { IR_PAD_CONSTANT, IR_PAD_REFLECT, IR_PAD_EDGE, IR_PAD_WRAP /* opset 19 */ };
int ir_pad_mode_of(const char *mode);
/* The input index that output index o of a dim padded by pb before, of input length len, reads
 * in reflect, edge or wrap mode (numpy's rules); PadGrad adds dY back along the same map. */
int64_t ir_pad_source(int64_t o, int64_t pb, int64_t len, enum ir_pad_mode mode);

/* BatchNormalization normalizes with batch statistics (training_mode, or the opset-9 form with
 * extra outputs; ops-norm.c). */
bool ir_bn_training(const ir_node *n);

/* Reductions (ops-reduce.c): mask[i] = dim i is reduced (axes from input 1 or the attribute,
 * none = all); *noop when empty axes mean the identity (noop_with_empty_axes). */
ir_status ir_reduce_axes(const ir_graph *g, const ir_node *n, int rank, bool *mask, bool *noop,
                         ir_diag *d);

/* Softmax/LogSoftmax: X as [outer, len, inner] around the axis (opset-dependent, ops-norm.c). */
ir_status ir_softmax_split(const ir_graph *g, const ir_node *n, const ir_shape *xs, int64_t *outer,
                           int64_t *len, int64_t *inner, ir_diag *d);

/* Resize's coefficient tables (ops-resize.c) from the attributes and scales input of k->node
 * (same input positions as Resize), for a resize from shape is to shape os, in k->workspace
 * (ir_resize_tab_bytes(os, t), t the dtype of k's input 0). Per output coordinate xo of dim d, at
 * base[d] + xo: the two source offsets (index * input stride) i0, i1 and the weight of i1 (0 for
 * nearest, i1 == i0), in the kernel's dtype: w for float32 (w64 NULL), w64 for float64 (w NULL). */
typedef struct ir_resize_tab {
    bool linear;
    int64_t base[IR_MAX_RANK];
    int64_t *i0, *i1;
    float *w;
    double *w64;
    /* tf_crop_and_resize only (else NULL): ext[base[d] + xo] is 1 where the coordinate falls
     * outside the input; an output element with any such coordinate is extrapolation (the
     * forward writes the value, the adjoint reads nothing from it) */
    const uint8_t *ext;
    double extrapolation;
} ir_resize_tab;
size_t ir_resize_tab_bytes(const ir_shape *os, ir_dtype t);
/* Cubic, and linear or cubic with antialias, have no two-tap table: they run as separable
 * filters (ops-resize.c), forward or adjoint (ResizeGrad), float32 and float64, in a workspace of
 * ir_resize_filter_bytes(X's shape, Y's shape, t). */
bool ir_resize_filtered(const ir_graph *g, const ir_node *n);
size_t ir_resize_filter_bytes(const ir_shape *is, const ir_shape *os, ir_dtype t);
ir_status ir_resize_filter_run(const ir_kernel_ctx *k, const ir_shape *is, const ir_shape *os,
                               const void *src, void *dst, bool adjoint);
ir_status ir_resize_tabulate(const ir_kernel_ctx *k, const ir_shape *is, const ir_shape *os,
                             ir_resize_tab *t);

/* ---------------------------------------------------------------- files */

/* Writes len bytes to path atomically: to PATH.tmp.<pid>, fsync, rename, then fsync of the
 * directory. On failure no file is left (nor the temporary) and d names path and the cause. */
ir_status ir_write_atomic(const char *path, const void *buf, size_t len, ir_diag *d);
/* The same with the bytes produced by emit, which writes them to fd with ir_write_all and
 * returns 0 or an errno value. */
ir_status ir_write_atomic_with(const char *path, int (*emit)(int fd, void *ctx), void *ctx,
                               ir_diag *d);
/* Writes all len bytes to fd (retrying short writes and EINTR); 0 or an errno value. */
int ir_write_all(int fd, const void *buf, size_t len);

/* Index helpers for broadcasting: strides of `in` viewed as shape `out` (0 where broadcast). */
void ir_broadcast_strides(const ir_shape *in, const ir_shape *out, int64_t *strides);

/* ---------------------------------------------------------------- dimension links (ir-dims.c) */

/* Helpers of the op table's dims callbacks (ir.h, ir_dimlink). A callback collects its links in
 * an ir_dims_out and returns ir_dims_end(). Every link set is all or nothing per iteration axis:
 * an input left unlinked is shared whole by a fission, which is right only when the input does
 * not vary along the split axis (a weight, a broadcast size-1 dim). So when the links of a node
 * do not all fit in IR_MAX_DIMLINKS (or name an input or output beyond int8), the node gets none
 * at all: no link is always safe, a partial set is not. */
typedef struct ir_dims_out {
    ir_dimlink *l; /* IR_MAX_DIMLINKS entries */
    int n;
    bool overflow;
} ir_dims_out;

static inline ir_dims_out ir_dims_begin(ir_dimlink *l) {
    ir_dims_out o = {.l = l, .n = 0, .overflow = false};
    return o;
}
/* The link count to return: 0 after an overflow. */
static inline int ir_dims_end(const ir_dims_out *o) {
    return o->overflow ? 0 : o->n;
}
/* Dim in_dim of input in is dim out_dim of output out. */
void ir_dims_keep(ir_dims_out *o, int in, int in_dim, int out, int out_dim);
/* Dim in_dim of input in is the node's reduce axis number axis (1, 2, ...: out_dim = -axis);
 * sum: the axis is a sum (IR_DIMLINK_SUM). */
void ir_dims_reduce(ir_dims_out *o, int in, int in_dim, int axis, bool sum);
/* Numpy broadcasting of input in to output out, right-aligned: each input dim whose size equals
 * the output's there (not a broadcast size-1 dim) is linked. */
void ir_dims_broadcast(const ir_graph *g, const ir_node *n, int in, int out, ir_dims_out *o);
/* Input in, of shape is, re-described (Reshape, Flatten, Squeeze, Unsqueeze) as output out, of
 * shape os: links the dims that survive whole, those of one size with one product of the dims
 * before them on both sides (so also after them): row-major element (a, i, c) stays (a, i, c).
 * Dims of different sizes > 1 with one product before them are the outer dims of a merged or
 * split group (B and B*H): they link too, since n parts of either are the same n contiguous
 * blocks of the group (the D-graph splits a component by a divisor of all its lengths).
 * Size-1 dims link only where the run of them at one such product has one length on both sides
 * (matched in order); a shape without elements links nothing. */
void ir_dims_regroup(const ir_shape *is, const ir_shape *os, int in, int out, ir_dims_out *o);

/* Ready-made dims callbacks. */
/* Element-wise with broadcasting: every present input broadcast to every output. */
int ir_dims_elementwise(const ir_graph *g, const ir_node *n, ir_dimlink *l);
/* Element-wise in input 0 alone (the other inputs are scalars or only say a dtype): input 0
 * broadcast to every output. */
int ir_dims_first_input(const ir_graph *g, const ir_node *n, ir_dimlink *l);
/* A re-description of input 0's elements as output 0 (ir_dims_regroup). */
int ir_dims_regroup_op(const ir_graph *g, const ir_node *n, ir_dimlink *l);

/* Softmax, LogSoftmax and their gradients (ops-norm.c): every dim outside the normalized line
 * links from every input to output 0. */
int ir_dims_softmax(const ir_graph *g, const ir_node *n, ir_dimlink *l);
/* Resize / ResizeGrad (ops-resize.c): mask[d] = the resize from shape is to shape os (inputs and
 * attributes of n, at Resize's positions) maps dim d identically: output index i reads input
 * index i alone. False (no mask) when the attributes do not parse. */
bool ir_resize_identity_dims(const ir_graph *g, const ir_node *n, const ir_shape *is,
                             const ir_shape *os, bool *mask);

#endif
