/* ops-reduce.c - ReduceMean/Sum/Max/Min/Prod/L2, ArgMax, ArgMin and CumSum.
 *
 * Axes come from the second input when it is present (ReduceSum from opset 13, every reduction
 * from opset 18) and from the `axes` attribute otherwise; they must be constant since they fix
 * the output shape. Reductions run for every numeric dtype because constant folding pushes shape
 * arithmetic through them: integers accumulate exactly in int64, floats in double.
 *
 * Two paths: float32 and float64 inputs whose reduced dims are one contiguous block ([outer, R,
 * inner]) run a fast loop (one template, ops-reduce-kern.h), parallel over `outer`; everything else
 * (other dtypes, scattered axes, empty reductions) walks the input once with an odometer and
 * accumulates into the output, which is exact for int64 and double, and accumulates in float for
 * float32. ReduceSum with ir_kernel_ctx.accumulate (a fused FissionAccumulate's part, written into
 * its buffer) adds its sums to what the output holds, on either path. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

typedef enum rop { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L2 } rop;

/* The largest (max) or smallest value of an integer dtype: the identity of ReduceMin/Max. */
static int64_t int_limit(ir_dtype t, bool max) {
    switch (t) {
    case IR_I32: return max ? INT32_MAX : INT32_MIN;
    case IR_I8: return max ? INT8_MAX : INT8_MIN;
    case IR_I16: return max ? INT16_MAX : INT16_MIN;
    case IR_U16: return max ? UINT16_MAX : 0;
    case IR_U32: return max ? UINT32_MAX : 0;
    case IR_U8:
    case IR_BOOL: return max ? 255 : 0;
    default: return max ? INT64_MAX : INT64_MIN;
    }
}

static bool numeric(ir_dtype t) {
    return t != IR_BOOL && t != IR_DTYPE_NONE;
}

/* Splits a shape into [outer, R, inner] around one axis. */
static void split_axis(const ir_shape *s, int axis, int64_t *outer, int64_t *R, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->dims[i];
    *R = s->dims[axis];
    for (int i = axis + 1; i < s->rank; i++) *inner *= s->dims[i];
}

/* ---------------------------------------------------------------- reductions */

/* mask[i] = dimension i is reduced; *noop when empty axes mean identity. */
ir_status ir_reduce_axes(const ir_graph *g, const ir_node *n, int rank, bool *mask, bool *noop,
                         ir_diag *d) {
    int64_t axes[IR_MAX_RANK * 2];
    int na;
    const int64_t *av;
    if (n->n_in > 1 && n->in[1] >= 0) {
        if (ir_const_ints(g, n, 1, axes, IR_MAX_RANK * 2, &na, d) != IR_OK)
            return IR_ERR_UNSUPPORTED;
    } else {
        na = ir_attr_ints(n, "axes", &av);
        if (na > IR_MAX_RANK * 2)
            return ir_node_fail(d, IR_ERR_INVALID, n, "axes has %d values", na);
        for (int i = 0; i < na; i++) axes[i] = av[i];
    }
    *noop = na <= 0 && ir_attr_int(n, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < rank; i++) mask[i] = na <= 0;
    for (int i = 0; i < na; i++) {
        int a;
        if (!ir_norm_axis(axes[i], rank, &a) || (rank == 0 && axes[i] != 0 && axes[i] != -1))
            return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                                (long long)axes[i], rank);
        if (rank > 0 && mask[a])
            return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is repeated", (long long)axes[i]);
        if (rank > 0) mask[a] = true;
    }
    return IR_OK;
}

static ir_status reduce_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    /* ReduceMax/ReduceMin-20 take bool (any / all) */
    bool bool_ok = x->dtype == IR_BOOL && (n->op == IR_OP_ReduceMax || n->op == IR_OP_ReduceMin);
    if (!numeric(x->dtype) && !bool_ok)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has dtype %s", ir_dtype_name(x->dtype));
    bool mask[IR_MAX_RANK], noop;
    ir_status st = ir_reduce_axes(g, n, x->shape.rank, mask, &noop, d);
    if (st) return st;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    ir_shape out = {0};
    for (int i = 0; i < x->shape.rank; i++) {
        if (noop || !mask[i])
            out.dims[out.rank++] = x->shape.dims[i];
        else if (keep)
            out.dims[out.rank++] = 1;
    }
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static double reduce_flops(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

#define IR_TMPL "ops-reduce-kern.h"
#include "ir-float-tmpl.h"

/* a = a (op) v for an accumulator of any arithmetic type (int64 or double). */
#define ACCUMULATE(op, a, v)                                                                       \
    do {                                                                                           \
        switch (op) {                                                                              \
        case R_SUM:                                                                                \
        case R_MEAN: (a) += (v); break;                                                            \
        case R_L2: (a) += (v) * (v); break;                                                        \
        case R_PROD: (a) *= (v); break;                                                            \
        case R_MAX: (a) = (v) > (a) ? (v) : (a); break;                                            \
        case R_MIN: (a) = (v) < (a) ? (v) : (a); break;                                            \
        }                                                                                          \
    } while (0)

/* Any dtype, any axes: one pass over the input accumulating into the output (from what it holds
 * when add: R_SUM only). */
static void reduce_generic(rop op, const ir_tensor *xt, ir_tensor *yt, const bool *mask, bool add) {
    const ir_shape *xs = &xt->shape;
    const ir_dtype t = xt->dtype;
    const bool is_int = !ir_dtype_is_float(t);
    const int64_t nx = ir_tensor_numel(xt), ny = ir_tensor_numel(yt);
    const int64_t R = ny ? nx / ny : 0;
    int64_t ostr[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, st = 1;
    for (int i = xs->rank - 1; i >= 0; i--) { /* output strides, 0 along reduced dims */
        ostr[i] = mask[i] ? 0 : st;
        if (!mask[i]) st *= xs->dims[i];
    }
    for (int64_t o = 0; o < ny && !add; o++) {
        if (is_int)
            ir_store_i64(yt->data, t, o,
                         op == R_PROD  ? 1
                         : op == R_MAX ? int_limit(t, false)
                         : op == R_MIN ? int_limit(t, true)
                                       : 0);
        else
            ir_store_f64(yt->data, t, o,
                         op == R_PROD  ? 1
                         : op == R_MAX ? -INFINITY
                         : op == R_MIN ? INFINITY
                                       : 0);
    }
    for (int64_t i = 0, o = 0; i < nx; i++) {
        if (is_int) {
            int64_t v = ir_load_i64(xt->data, t, i), a = ir_load_i64(yt->data, t, o);
            ACCUMULATE(op, a, v);
            ir_store_i64(yt->data, t, o, a);
        } else {
            double v = ir_load_f64(xt->data, t, i), a = ir_load_f64(yt->data, t, o);
            ACCUMULATE(op, a, v);
            ir_store_f64(yt->data, t, o, a);
        }
        for (int dd = xs->rank - 1; dd >= 0; dd--) { /* odometer, tracking the output offset */
            o += ostr[dd];
            if (++idx[dd] < xs->dims[dd]) break;
            o -= ostr[dd] * xs->dims[dd];
            idx[dd] = 0;
        }
    }
    if (op != R_MEAN && op != R_L2) return;
    for (int64_t o = 0; o < ny; o++) {
        if (is_int) {
            int64_t a = ir_load_i64(yt->data, t, o);
            ir_store_i64(yt->data, t, o, op == R_MEAN ? (R ? a / R : 0) : (int64_t)sqrt((double)a));
        } else {
            double a = ir_load_f64(yt->data, t, o);
            ir_store_f64(yt->data, t, o, op == R_MEAN ? a / (double)R : sqrt(a));
        }
    }
}

static ir_status reduce_run(const ir_kernel_ctx *k, rop op) {
    const ir_tensor *x = &k->in[0];
    ir_tensor *y = &k->out[0];
    bool mask[IR_MAX_RANK], noop;
    ir_status st = ir_reduce_axes(k->graph, k->node, x->shape.rank, mask, &noop, k->diag);
    if (st) return st;
    const bool add = op == R_SUM && k->accumulate;
    if (noop && add) {
        for (int64_t i = 0, n = ir_tensor_numel(x); i < n; i++)
            ir_store_f64(y->data, x->dtype, i,
                         ir_load_f64(y->data, x->dtype, i) + ir_load_f64(x->data, x->dtype, i));
        return IR_OK;
    }
    if (noop) {
        memcpy(y->data, x->data, (size_t)ir_tensor_numel(x) * ir_dtype_size(x->dtype));
        return IR_OK;
    }
    /* fast path: the reduced dims of size > 1 form one contiguous block */
    int first = -1, last = -1;
    bool contiguous = true;
    for (int i = 0; i < x->shape.rank; i++) {
        if (!mask[i] || x->shape.dims[i] == 1) continue;
        if (first < 0) first = i;
        last = i;
    }
    for (int i = first + 1; first >= 0 && i < last; i++)
        if (!mask[i] && x->shape.dims[i] != 1) contiguous = false;
    int64_t outer = 1, R = 1, inner = 1;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t dim = x->shape.dims[i];
        if (first < 0 || i < first)
            outer *= dim;
        else if (i <= last)
            R *= mask[i] ? dim : 1; /* kept dims inside the block have size 1 */
        else
            inner *= dim;
    }
    const bool fast = contiguous && R > 0 && ir_tensor_numel(x) > 0;
    if (fast && x->dtype == IR_F32)
        reduce_fast_f32(op, x->data, y->data, outer, R, inner, add);
    else if (fast && x->dtype == IR_F64)
        reduce_fast_f64(op, x->data, y->data, outer, R, inner, add);
    else
        reduce_generic(op, x, y, mask, add);
    return IR_OK;
}

#define REDUCE_KERNEL(fn, op)                                                                      \
    static ir_status fn(const ir_kernel_ctx *k) {                                                  \
        return reduce_run(k, op);                                                                  \
    }
REDUCE_KERNEL(rsum_kernel, R_SUM)
REDUCE_KERNEL(rmean_kernel, R_MEAN)
REDUCE_KERNEL(rmax_kernel, R_MAX)
REDUCE_KERNEL(rmin_kernel, R_MIN)
REDUCE_KERNEL(rprod_kernel, R_PROD)
REDUCE_KERNEL(rl2_kernel, R_L2)

/* ---------------------------------------------------------------- ArgMax */

static ir_status argmax_axis(const ir_shape *xs, const ir_node *n, int *axis, ir_diag *d) {
    int64_t a = ir_attr_int(n, "axis", 0);
    if (xs->rank == 0 || !ir_norm_axis(a, xs->rank, axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, xs->rank);
    return IR_OK;
}

static ir_status argmax_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int axis = 0;
    ir_status st = argmax_axis(&x->shape, n, &axis, d);
    if (st) return st;
    if (!numeric(x->dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has dtype %s", ir_dtype_name(x->dtype));
    if (x->shape.dims[axis] == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "%s over an empty axis", ir_op_name(n->op));
    ir_shape out = x->shape;
    if (ir_attr_int(n, "keepdims", 1)) {
        out.dims[axis] = 1;
    } else {
        for (int i = axis; i + 1 < out.rank; i++) out.dims[i] = out.dims[i + 1];
        out.rank--;
    }
    ir_set_out(g, n, 0, IR_I64, &out);
    return IR_OK;
}

static ir_status argmax_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    int axis = 0;
    ir_status st = argmax_axis(&x->shape, k->node, &axis, k->diag);
    if (st) return st;
    const bool last = ir_attr_int(k->node, "select_last_index", 0) != 0;
    const bool is_min = k->node->op == IR_OP_ArgMin;
    int64_t outer, R, inner;
    split_axis(&x->shape, axis, &outer, &R, &inner);
    int64_t *y = k->out[0].data;
    const float *xf = x->dtype == IR_F32 ? x->data : NULL;
    IR_PARALLEL_FOR(outer * R * inner >= IR_PAR_MIN)
    for (int64_t oi = 0; oi < outer * inner; oi++) {
        int64_t base = (oi / inner) * R * inner + oi % inner, best = 0;
        double bv = xf ? xf[base] : ir_load_f64(x->data, x->dtype, base);
        for (int64_t r = 1; r < R; r++) {
            int64_t at = base + r * inner;
            double v = xf ? xf[at] : ir_load_f64(x->data, x->dtype, at);
            if ((is_min ? v < bv : v > bv) || (last && v == bv)) {
                bv = v;
                best = r;
            }
        }
        y[oi] = best;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- CumSum */

static ir_status cumsum_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ax = ir_node_in(g, n, 1);
    if (!numeric(x->dtype) || x->shape.rank == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X must be a numeric tensor of rank >= 1");
    if (ir_dtype_is_float(ax->dtype) || ir_shape_numel(&ax->shape) != 1)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "axis must be an integer scalar");
    int64_t a;
    int axis = 0, na = 0;
    if (ir_value_data(ax) && ir_const_ints(g, n, 1, &a, 1, &na, d) == IR_OK && na == 1 &&
        !ir_norm_axis(a, x->shape.rank, &axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, x->shape.rank);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static ir_status cumsum_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    const ir_dtype t = x->dtype;
    int64_t a = ir_load_i64(k->in[1].data, k->in[1].dtype, 0);
    int axis = 0;
    if (!ir_norm_axis(a, x->shape.rank, &axis))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node,
                            "axis %lld is out of range for rank %d", (long long)a, x->shape.rank);
    const bool excl = ir_attr_int(k->node, "exclusive", 0) != 0;
    const bool rev = ir_attr_int(k->node, "reverse", 0) != 0;
    int64_t outer, R, inner;
    split_axis(&x->shape, axis, &outer, &R, &inner);
    const bool is_int = !ir_dtype_is_float(t);
    void *y = k->out[0].data;
    const int64_t dir = rev ? -1 : 1;
    /* y[r] = y[r - dir] + x[r - dir] (exclusive) or x[r] (inclusive), from the start edge */
    IR_PARALLEL_FOR(outer * R * inner >= IR_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < R; s++) {
            int64_t r = rev ? R - 1 - s : s;
            for (int64_t i = 0; i < inner; i++) {
                int64_t at = (o * R + r) * inner + i, prev = at - dir * inner;
                int64_t src = excl ? prev : at;
                bool has_src = !excl || s > 0;
                if (t == IR_F32) {
                    float *yf = y;
                    const float *xf = x->data;
                    yf[at] = (s ? yf[prev] : 0.0f) + (has_src ? xf[src] : 0.0f);
                } else if (is_int) {
                    int64_t v = (s ? ir_load_i64(y, t, prev) : 0) +
                                (has_src ? ir_load_i64(x->data, t, src) : 0);
                    ir_store_i64(y, t, at, v);
                } else {
                    double v = (s ? ir_load_f64(y, t, prev) : 0) +
                               (has_src ? ir_load_f64(x->data, t, src) : 0);
                    ir_store_f64(y, t, at, v);
                }
            }
        }
    return IR_OK;
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink) of the reductions: each kept dim links to its place in the output (with
 * or without keepdims), each reduced dim is a reduce axis of its own (numbered in order), a sum
 * for ReduceSum only: the partial maxima, means, products or norms of a split do not add up. An
 * empty axes list with noop_with_empty_axes is the identity. */
static int reduce_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    bool mask[IR_MAX_RANK], noop, keep = ir_attr_int(n, "keepdims", 1) != 0;
    if (ir_reduce_axes(g, n, x->shape.rank, mask, &noop, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0, j = 0, axis = 1; i < x->shape.rank; i++) {
        if (noop || !mask[i]) {
            ir_dims_keep(&o, 0, i, 0, j++);
            continue;
        }
        ir_dims_reduce(&o, 0, i, axis++, n->op == IR_OP_ReduceSum);
        if (keep) j++;
    }
    return ir_dims_end(&o);
}

/* ArgMax: the kept dims link; the axis is a reduce axis, and not a sum. */
static int argmax_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    int axis = 0;
    if (argmax_axis(&x->shape, n, &axis, NULL) != IR_OK) return 0;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++) {
        if (i == axis)
            ir_dims_reduce(&o, 0, i, 1, false);
        else
            ir_dims_keep(&o, 0, i, 0, i < axis || keep ? i : i - 1);
    }
    return ir_dims_end(&o);
}

/* CumSum: every dim but the (constant) axis links; along the axis each prefix needs all that
 * comes before it. */
static int cumsum_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t a;
    int axis = 0, na = 0;
    if (ir_const_ints(g, n, 1, &a, 1, &na, NULL) != IR_OK || na != 1 ||
        !ir_norm_axis(a, x->shape.rank, &axis))
        return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++)
        if (i != axis) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

#define REDUCE_DEF(NAME, kern, fl)                                                                 \
    IR_OP_DEF(NAME, 1, 2, 1, 1, .flags = (fl), .infer = reduce_infer, .flops = reduce_flops,       \
              .kernel = kern, .grad = ir_grad_##NAME, .dims = reduce_dims);
REDUCE_DEF(ReduceMean, rmean_kernel, IR_OPF_MULTILINEAR)
REDUCE_DEF(ReduceSum, rsum_kernel, IR_OPF_MULTILINEAR)
REDUCE_DEF(ReduceMax, rmax_kernel, 0)
REDUCE_DEF(ReduceMin, rmin_kernel, 0)
REDUCE_DEF(ReduceProd, rprod_kernel, 0)
REDUCE_DEF(ReduceL2, rl2_kernel, 0)

IR_OP_DEF(ArgMax, 1, 1, 1, 1, .infer = argmax_infer, .flops = reduce_flops, .kernel = argmax_kernel,
          .dims = argmax_dims);
/* ArgMin (opset 13): ArgMax's entry with the comparison reversed in its kernel. */
IR_OP_DEF(ArgMin, 1, 1, 1, 1, .infer = argmax_infer, .flops = reduce_flops, .kernel = argmax_kernel,
          .dims = argmax_dims);

IR_OP_DEF(CumSum, 2, 2, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = cumsum_infer,
          .flops = reduce_flops, .kernel = cumsum_kernel, .grad = ir_grad_CumSum,
          .dims = cumsum_dims);
