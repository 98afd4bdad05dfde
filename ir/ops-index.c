/* ops-index.c - indexing: Gather, GatherElements, ScatterND and Trilu.
 *
 * The kernels move elements of 1/2/4/8 bytes, so every dtype works (ScatterND's add/mul/max/min
 * reductions compute in the dtype for float32/64 and int32/64, through float64 otherwise).
 * Indices are int64 or int32; negative ones count from the end of their axis. An index out of
 * range is bad input, not a programmer error: inference rejects it when the indices are
 * constant, and kernels check every index before they write, returning IR_ERR_INVALID with the
 * value. Gather is the embedding lookup of GPT models and the shape-index op of PyTorch
 * exports, so its kernel copies whole rows (memcpy of everything after the axis). */
#include "ir-autodiff.h"
#include "ir-impl.h"

/* ---------------------------------------------------------------- helpers */

static inline int64_t index_at(const void *p, ir_dtype t, int64_t j) {
    return t == IR_I64 ? ((const int64_t *)p)[j] : ((const int32_t *)p)[j];
}

static ir_status need_index_dtype(const ir_node *n, ir_dtype t, ir_diag *d) {
    if (t == IR_I64 || t == IR_I32) return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "indices are %s, not int64 or int32", ir_dtype_name(t));
}

/* Checks that every index lies in [-dim, dim). */
static ir_status check_indices(const ir_node *n, const void *idx, ir_dtype t, int64_t cnt,
                               int64_t dim, int axis, ir_diag *d) {
    for (int64_t j = 0; j < cnt; j++) {
        int64_t v = index_at(idx, t, j);
        if (v < -dim || v >= dim)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "index %lld (at position %lld) is out of range for axis %d of "
                                "size %lld",
                                (long long)v, (long long)j, axis, (long long)dim);
    }
    return IR_OK;
}

/* Constant element copies so that each is one move and type punning stays defined. */
static inline void copy_elem(char *d, const char *s, size_t es) {
    switch (es) {
    case 1: memcpy(d, s, 1); break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    default: memcpy(d, s, es); break;
    }
}

/* ---------------------------------------------------------------- Gather */

static ir_status gather_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    int r = x->shape.rank, q = ix->shape.rank, axis;
    ir_status st = need_index_dtype(n, ix->dtype, d);
    if (st != IR_OK) return st;
    if (r == 0 || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 0), r);
    if (r - 1 + q > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "output rank %d exceeds %d", r - 1 + q,
                            IR_MAX_RANK);
    if (ir_value_data(ix)) {
        st = check_indices(n, ir_value_data(ix), ix->dtype, ir_shape_numel(&ix->shape),
                           x->shape.dims[axis], axis, d);
        if (st != IR_OK) return st;
    }
    ir_shape out = {.rank = r - 1 + q};
    for (int i = 0; i < axis; i++) out.dims[i] = x->shape.dims[i];
    for (int i = 0; i < q; i++) out.dims[axis + i] = ix->shape.dims[i];
    for (int i = axis + 1; i < r; i++) out.dims[q + i - 1] = x->shape.dims[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static ir_status gather_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *ix = &k->in[1];
    int axis;
    if (!ir_norm_axis(ir_attr_int(k->node, "axis", 0), x->shape.rank, &axis))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "axis is out of range");
    int64_t outer = 1, inner = 1, dim = x->shape.dims[axis], nidx = ir_tensor_numel(ix);
    for (int i = 0; i < axis; i++) outer *= x->shape.dims[i];
    for (int i = axis + 1; i < x->shape.rank; i++) inner *= x->shape.dims[i];
    ir_status st = check_indices(k->node, ix->data, ix->dtype, nidx, dim, axis, k->diag);
    if (st != IR_OK) return st;
    size_t row = (size_t)inner * ir_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = k->out[0].data;
    IR_PARALLEL_FOR(outer * nidx * inner >= IR_PAR_MIN)
    for (int64_t u = 0; u < outer * nidx; u++) {
        int64_t o = u / nidx, v = index_at(ix->data, ix->dtype, u % nidx);
        if (v < 0) v += dim;
        const char *s = src + (size_t)(o * dim + v) * row;
        if (row <= 8)
            copy_elem(dst + (size_t)u * row, s, row);
        else
            memcpy(dst + (size_t)u * row, s, row);
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): the data's dims but the axis keep their order around the indices'
 * dims, which take the axis's place. Either side may be split alone: indices hold absolute
 * positions along the axis, which stays whole. */
static int gather_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    int r = x->shape.rank, q = ix->shape.rank, axis;
    if (r == 0 || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < r; i++)
        if (i != axis) ir_dims_keep(&o, 0, i, 0, i < axis ? i : q + i - 1);
    for (int j = 0; j < q; j++) ir_dims_keep(&o, 1, j, 0, axis + j);
    return ir_dims_end(&o);
}

IR_OP_DEF(Gather, 2, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = gather_infer,
          .kernel = gather_kernel, .grad = ir_grad_Gather, .dims = gather_dims);

/* ---------------------------------------------------------------- GatherElements */

static ir_status gather_elements_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    int r = x->shape.rank, axis;
    ir_status st = need_index_dtype(n, ix->dtype, d);
    if (st != IR_OK) return st;
    if (r == 0 || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 0), r);
    char a[160], b[160];
    bool ok = ix->shape.rank == r;
    for (int i = 0; ok && i < r; i++) ok = i == axis || ix->shape.dims[i] <= x->shape.dims[i];
    if (!ok)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "indices of shape %s do not fit data of shape %s",
                            ir_shape_str(&ix->shape, a, sizeof a),
                            ir_shape_str(&x->shape, b, sizeof b));
    if (ir_value_data(ix)) {
        st = check_indices(n, ir_value_data(ix), ix->dtype, ir_shape_numel(&ix->shape),
                           x->shape.dims[axis], axis, d);
        if (st != IR_OK) return st;
    }
    ir_set_out(g, n, 0, x->dtype, &ix->shape);
    return IR_OK;
}

/* Rows of the indices' innermost dim: a row's data offset covers every coordinate but the
 * axis and the innermost one, which vary inside the row. */
static ir_status gather_elements_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *ix = &k->in[1];
    int r = x->shape.rank, last = r - 1, axis;
    if (!ir_norm_axis(ir_attr_int(k->node, "axis", 0), r, &axis))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "axis is out of range");
    int64_t dim = x->shape.dims[axis], nidx = ir_tensor_numel(ix), xs[IR_MAX_RANK];
    ir_status st = check_indices(k->node, ix->data, ix->dtype, nidx, dim, axis, k->diag);
    if (st != IR_OK || nidx == 0) return st;
    ir_shape_strides(&x->shape, xs);
    int64_t n = ix->shape.dims[last], rows = nidx / n, step = axis == last ? 0 : xs[last];
    size_t es = ir_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = k->out[0].data;
    IR_PARALLEL_FOR(nidx >= IR_PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t base = 0, rem = row;
        for (int i = last - 1; i >= 0; i--) {
            int64_t c = rem % ix->shape.dims[i];
            rem /= ix->shape.dims[i];
            if (i != axis) base += c * xs[i];
        }
        for (int64_t j = 0; j < n; j++) {
            int64_t v = index_at(ix->data, ix->dtype, row * n + j);
            if (v < 0) v += dim;
            copy_elem(dst + (size_t)(row * n + j) * es,
                      src + (size_t)(base + j * step + v * xs[axis]) * es, es);
        }
    }
    return IR_OK;
}

/* Dims: output element i reads the data at i with the axis coordinate replaced by indices[i]. So
 * the indices link on every dim and the data on each other dim, together: the data dim must be
 * split like the indices (a dim where the data is longer than the indices gets no link). Along
 * the axis the data stays whole. */
static int gather_elements_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *xs = &ir_node_in(g, n, 0)->shape, *is = &ir_node_in(g, n, 1)->shape;
    int r = xs->rank, axis;
    if (r == 0 || is->rank != r || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < r; i++) {
        if (i == axis) {
            ir_dims_keep(&o, 1, i, 0, i);
        } else if (xs->dims[i] == is->dims[i]) {
            ir_dims_keep(&o, 0, i, 0, i);
            ir_dims_keep(&o, 1, i, 0, i);
        }
    }
    return ir_dims_end(&o);
}

IR_OP_DEF(GatherElements, 2, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = gather_elements_infer,
          .kernel = gather_elements_kernel, .grad = ir_grad_GatherElements,
          .dims = gather_elements_dims);

/* ---------------------------------------------------------------- ScatterND */

enum scatter_red { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static ir_status scatter_reduction(const ir_node *n, enum scatter_red *red, ir_diag *d) {
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const char *s = ir_attr_str(n, "reduction", "none");
    *red = RED_NONE;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *red = (enum scatter_red)i;
            return IR_OK;
        }
    return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "reduction '%s' is not supported", s);
}

/* Checks the nup index tuples of kk coordinates against the data's leading dims. */
static ir_status scatter_check(const ir_node *n, const void *idx, ir_dtype t, int64_t nup, int kk,
                               const ir_shape *xs, ir_diag *d) {
    for (int64_t u = 0; u < nup; u++)
        for (int i = 0; i < kk; i++) {
            int64_t v = index_at(idx, t, u * kk + i), dim = xs->dims[i];
            if (v < -dim || v >= dim)
                return ir_node_fail(d, IR_ERR_INVALID, n,
                                    "index %lld (update %lld) is out of range for axis %d of "
                                    "size %lld",
                                    (long long)v, (long long)u, i, (long long)dim);
        }
    return IR_OK;
}

static ir_status scatter_nd_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1), *up = ir_node_in(g, n, 2);
    enum scatter_red red;
    ir_status st = need_index_dtype(n, ix->dtype, d);
    if (st == IR_OK) st = scatter_reduction(n, &red, d);
    if (st != IR_OK) return st;
    int r = x->shape.rank, q = ix->shape.rank;
    if (r == 0 || q == 0 || ix->shape.dims[q - 1] > r)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "needs data of rank >= 1 and indices of rank >= 1 whose last dim "
                            "is at most the data's rank");
    int kk = (int)ix->shape.dims[q - 1];
    /* updates = indices.shape[:-1] + data.shape[k:] */
    ir_shape want = {.rank = q - 1 + r - kk};
    char a[160], b[160];
    if (want.rank > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "updates would have rank %d", want.rank);
    for (int i = 0; i < q - 1; i++) want.dims[i] = ix->shape.dims[i];
    for (int i = kk; i < r; i++) want.dims[q - 1 + i - kk] = x->shape.dims[i];
    if (!ir_shape_eq(&want, &up->shape) || up->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "updates are %s %s, expected %s %s",
                            ir_dtype_name(up->dtype), ir_shape_str(&up->shape, a, sizeof a),
                            ir_dtype_name(x->dtype), ir_shape_str(&want, b, sizeof b));
    if (ir_value_data(ix)) {
        int64_t nup = kk ? ir_shape_numel(&ix->shape) / kk : 0;
        st = scatter_check(n, ir_value_data(ix), ix->dtype, nup, kk, &x->shape, d);
        if (st != IR_OK) return st;
    }
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static double scatter_flops(const ir_graph *g, const ir_node *n) {
    enum scatter_red red;
    if (scatter_reduction(n, &red, NULL) != IR_OK || red == RED_NONE) return 0;
    return (double)ir_shape_numel(&ir_node_in(g, n, 2)->shape);
}

static inline double red_f64(double a, double b, enum scatter_red red) {
    switch (red) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return a > b ? a : b;
    case RED_MIN: return a < b ? a : b;
    default: return b;
    }
}

#define REDUCE_LOOP(T)                                                                             \
    do {                                                                                           \
        T *o = (T *)dst;                                                                           \
        const T *u = (const T *)src;                                                               \
        for (int64_t j = 0; j < n; j++) {                                                          \
            T a = o[j], b = u[j];                                                                  \
            o[j] = red == RED_ADD   ? (T)(a + b)                                                   \
                   : red == RED_MUL ? (T)(a * b)                                                   \
                   : red == RED_MAX ? (a > b ? a : b)                                              \
                                    : (a < b ? a : b);                                             \
        }                                                                                          \
    } while (0)

/* dst[j] = dst[j] (red) src[j] for n elements of dtype t. */
static void reduce_into(void *dst, const void *src, int64_t n, ir_dtype t, enum scatter_red red) {
    switch (t) {
    case IR_F32: REDUCE_LOOP(float); break;
    case IR_F64: REDUCE_LOOP(double); break;
    case IR_I64: REDUCE_LOOP(int64_t); break;
    case IR_I32: REDUCE_LOOP(int32_t); break;
    default:
        for (int64_t j = 0; j < n; j++)
            ir_store_f64(dst, t, j, red_f64(ir_load_f64(dst, t, j), ir_load_f64(src, t, j), red));
        break;
    }
}

/* Updates apply in index order (serially), so repeated indices reduce deterministically. */
static ir_status scatter_nd_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *ix = &k->in[1], *up = &k->in[2];
    enum scatter_red red;
    ir_status st = scatter_reduction(k->node, &red, k->diag);
    if (st != IR_OK) return st;
    int q = ix->shape.rank, kk = (int)ix->shape.dims[q - 1];
    int64_t xs[IR_MAX_RANK], slice = 1, nup = 1;
    ir_shape_strides(&x->shape, xs);
    for (int i = kk; i < x->shape.rank; i++) slice *= x->shape.dims[i];
    for (int i = 0; i < q - 1; i++) nup *= ix->shape.dims[i];
    /* Every index is checked before anything is written. */
    st = scatter_check(k->node, ix->data, ix->dtype, nup, kk, &x->shape, k->diag);
    if (st != IR_OK) return st;
    size_t es = ir_dtype_size(x->dtype), bytes = (size_t)slice * es;
    if (k->out[0].data != x->data && ir_tensor_numel(x))
        memcpy(k->out[0].data, x->data, (size_t)ir_tensor_numel(x) * es);
    for (int64_t u = 0; u < nup; u++) {
        int64_t off = 0;
        for (int i = 0; i < kk; i++) {
            int64_t v = index_at(ix->data, ix->dtype, u * kk + i);
            off += (v < 0 ? v + x->shape.dims[i] : v) * xs[i];
        }
        char *dst = (char *)k->out[0].data + (size_t)off * es;
        const char *src = (const char *)up->data + (size_t)u * bytes;
        if (red == RED_NONE) {
            if (bytes) memcpy(dst, src, bytes);
        } else {
            reduce_into(dst, src, slice, x->dtype, red);
        }
    }
    return IR_OK;
}

/* Dims: the indices address the data's first k dims only, so each later dim links from the data
 * and from its place in the updates (after the indices' leading dims) to the output; the first k
 * dims and the indices get no link (which update lands where, and in which order, is data). */
static int scatter_nd_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *xs = &ir_node_in(g, n, 0)->shape, *is = &ir_node_in(g, n, 1)->shape;
    int r = xs->rank, q = is->rank;
    if (q == 0 || is->dims[q - 1] > r) return 0;
    int kk = (int)is->dims[q - 1];
    ir_dims_out o = ir_dims_begin(l);
    for (int i = kk; i < r; i++) {
        ir_dims_keep(&o, 0, i, 0, i);
        ir_dims_keep(&o, 2, q - 1 + i - kk, 0, i);
    }
    return ir_dims_end(&o);
}

IR_OP_DEF(ScatterND, 3, 3, 1, 1, .flags = IR_OPF_FLOAT16, .infer = scatter_nd_infer,
          .flops = scatter_flops, .kernel = scatter_nd_kernel, .dims = scatter_nd_dims);

/* ---------------------------------------------------------------- Trilu */

static ir_status trilu_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *kv = ir_node_in(g, n, 1);
    if (x->shape.rank < 2)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "input has rank %d, needs at least 2",
                            x->shape.rank);
    if (kv &&
        (ir_dtype_is_float(kv->dtype) || kv->dtype == IR_BOOL || ir_shape_numel(&kv->shape) != 1))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "k must be one integer");
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

/* Each row keeps one contiguous column range [c0, c1) (j - i >= k above, <= k below) and
 * zeroes the rest; zero is all-zero bits in every dtype. */
static ir_status trilu_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    int r = x->shape.rank;
    int64_t kd = (k->n_in > 1 && k->in[1].data) ? ir_load_i64(k->in[1].data, k->in[1].dtype, 0) : 0;
    bool upper = ir_attr_int(k->node, "upper", 1) != 0;
    int64_t nr = x->shape.dims[r - 2], nc = x->shape.dims[r - 1],
            rows = ir_tensor_numel(x) / (nc ? nc : 1);
    if (nc == 0 || rows == 0) return IR_OK;
    /* clamp k so that i + k cannot overflow; beyond +-(rows + cols) nothing changes */
    int64_t lim = nr + nc;
    kd = kd > lim ? lim : kd < -lim ? -lim : kd;
    size_t es = ir_dtype_size(x->dtype), row = (size_t)nc * es;
    const char *src = x->data;
    char *dst = k->out[0].data;
    IR_PARALLEL_FOR(rows * nc >= IR_PAR_MIN)
    for (int64_t rr = 0; rr < rows; rr++) {
        int64_t i = rr % nr, c0, c1;
        if (upper) {
            c0 = i + kd, c1 = nc;
        } else {
            c0 = 0, c1 = i + kd + 1;
        }
        c0 = c0 < 0 ? 0 : c0 > nc ? nc : c0;
        c1 = c1 < c0 ? c0 : c1 > nc ? nc : c1;
        char *o = dst + (size_t)rr * row;
        const char *s = src + (size_t)rr * row;
        if (c0) memset(o, 0, (size_t)c0 * es);
        if (c1 > c0) memcpy(o + (size_t)c0 * es, s + (size_t)c0 * es, (size_t)(c1 - c0) * es);
        if (c1 < nc) memset(o + (size_t)c1 * es, 0, (size_t)(nc - c1) * es);
    }
    return IR_OK;
}

/* Dims: the batch of matrices (every dim before the last two) links; rows and columns are
 * compared with each other and with k. */
static int trilu_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    int r = ir_node_in(g, n, 0)->shape.rank;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < r - 2; i++) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Trilu, 1, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = trilu_infer, .kernel = trilu_kernel,
          .grad = ir_grad_Trilu, .dims = trilu_dims);
