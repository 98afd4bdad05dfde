/* ops-reduce-more.c - ReduceL1, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp (opsets 13
 * and 18: axes as an attribute, then as an input; keepdims, noop_with_empty_axes), the
 * reductions PyTorch exports for norm(p=1), sum of squares, log(sum) and logsumexp.
 *
 * Axes and the output shape follow the other reductions (ir_reduce_axes). The kernel visits,
 * for each output element (in parallel), the reduced positions through precomputed strides and
 * accumulates in double: |x|, x^2, x, and for LogSumExp the max first, then sum(exp(x - max)),
 * so that large inputs do not overflow. float32 and float64; L1 and SumSquare also int32/int64
 * (exact in int64). Gradients are built from existing ops on dY reshaped to keepdims form:
 * L1 sign(x) dY, SumSquare 2 x dY, LogSum dY / exp(Y), LogSumExp dY exp(x - Y). */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

typedef enum rm_op { RM_L1, RM_SUMSQ, RM_LOGSUM, RM_LSE } rm_op;

static rm_op rm_of(const ir_node *n) {
    switch (n->op) {
    case IR_OP_ReduceL1: return RM_L1;
    case IR_OP_ReduceSumSquare: return RM_SUMSQ;
    case IR_OP_ReduceLogSum: return RM_LOGSUM;
    default: return RM_LSE;
    }
}

/* The output shape (keepdims or not) and the keepdims form (reduced dims of size 1). */
static ir_status rm_shapes(const ir_graph *g, const ir_node *n, const ir_shape *xs, bool *mask,
                           bool *noop, ir_shape *out, ir_shape *kept, ir_diag *d) {
    ir_status st = ir_reduce_axes(g, n, xs->rank, mask, noop, d);
    if (st) return st;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    *out = (ir_shape){0};
    *kept = *xs;
    for (int i = 0; i < xs->rank; i++) {
        if (*noop || !mask[i]) {
            out->dims[out->rank++] = xs->dims[i];
        } else {
            kept->dims[i] = 1;
            if (keep) out->dims[out->rank++] = 1;
        }
    }
    if (*noop) *kept = *xs;
    return IR_OK;
}

static ir_status rm_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    rm_op op = rm_of(n);
    bool ints_ok = op == RM_L1 || op == RM_SUMSQ;
    if (!(ir_dtype_is_float(x->dtype) || (ints_ok && (x->dtype == IR_I64 || x->dtype == IR_I32))))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s is not supported",
                            ir_dtype_name(x->dtype));
    bool mask[IR_MAX_RANK], noop;
    ir_shape out, kept;
    ir_status st = rm_shapes(g, n, &x->shape, mask, &noop, &out, &kept, d);
    if (st) return st;
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static double rm_flops(const ir_graph *g, const ir_node *n) {
    double e = (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
    return rm_of(n) == RM_LSE ? e * (1 + IR_FLOPS_TRANSCENDENTAL) : 2 * e;
}

static inline double rm_finish(rm_op op, double acc, double mx) {
    switch (op) {
    case RM_LOGSUM: return log(acc);
    case RM_LSE: return isfinite(mx) ? mx + log(acc) : mx;
    default: return acc;
    }
}

static ir_status rm_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    ir_tensor *y = &k->out[0];
    const rm_op op = rm_of(k->node);
    bool mask[IR_MAX_RANK], noop;
    ir_shape out, kept;
    ir_status st = rm_shapes(k->graph, k->node, &x->shape, mask, &noop, &out, &kept, k->diag);
    if (st) return st;
    const ir_shape *xs = &x->shape;
    int64_t xstr[IR_MAX_RANK], kdim[IR_MAX_RANK], kstr[IR_MAX_RANK], rdim[IR_MAX_RANK],
        rstr[IR_MAX_RANK];
    int nk = 0, nr = 0;
    ir_shape_strides(xs, xstr);
    for (int i = 0; i < xs->rank; i++) {
        if (!noop && mask[i]) {
            rdim[nr] = xs->dims[i];
            rstr[nr++] = xstr[i];
        } else {
            kdim[nk] = xs->dims[i];
            kstr[nk++] = xstr[i];
        }
    }
    int64_t R = 1, ny = ir_tensor_numel(y);
    for (int i = 0; i < nr; i++) R *= rdim[i];
    const bool is_int = !ir_dtype_is_float(x->dtype);
    IR_PARALLEL_FOR(ny * R >= IR_PAR_MIN)
    for (int64_t o = 0; o < ny; o++) {
        int64_t base = 0, rem = o;
        for (int i = nk - 1; i >= 0; i--) {
            base += (rem % kdim[i]) * kstr[i];
            rem /= kdim[i];
        }
        double mx = -INFINITY, acc = 0;
        int64_t iacc = 0;
        for (int pass = op == RM_LSE ? 0 : 1; pass < 2; pass++) {
            int64_t idx[IR_MAX_RANK] = {0}, off = base;
            for (int64_t r = 0; r < R; r++) {
                if (is_int) {
                    int64_t v = ir_load_i64(x->data, x->dtype, off);
                    iacc += op == RM_L1 ? (v < 0 ? -v : v) : v * v;
                } else {
                    double v = ir_load_f64(x->data, x->dtype, off);
                    if (pass == 0)
                        mx = v > mx ? v : mx;
                    else
                        acc += op == RM_L1      ? fabs(v)
                               : op == RM_SUMSQ ? v * v
                               : op == RM_LSE   ? (isfinite(mx) ? exp(v - mx) : 0)
                                                : v;
                }
                for (int dd = nr - 1; dd >= 0; dd--) { /* odometer over the reduced dims */
                    off += rstr[dd];
                    if (++idx[dd] < rdim[dd]) break;
                    off -= rstr[dd] * rdim[dd];
                    idx[dd] = 0;
                }
            }
        }
        if (is_int)
            ir_store_i64(y->data, x->dtype, o, iacc);
        else
            ir_store_f64(y->data, x->dtype, o, rm_finish(op, acc, mx));
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): kept dims link; reduced dims are reduce axes, sums for L1 and
 * SumSquare (the parts' partial results add up), not for the logarithms. */
static int rm_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    bool mask[IR_MAX_RANK], noop;
    ir_shape out, kept;
    if (rm_shapes(g, n, &x->shape, mask, &noop, &out, &kept, NULL) != IR_OK) return 0;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0, sum = rm_of(n) <= RM_SUMSQ;
    ir_dims_out o = ir_dims_begin(l);
    int od = 0, axis = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        if (noop || !mask[i]) {
            ir_dims_keep(&o, 0, i, 0, od++);
        } else {
            ir_dims_reduce(&o, 0, i, ++axis, sum);
            if (keep) od++;
        }
    }
    return ir_dims_end(&o);
}

static ir_status rm_grad(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    const ir_shape xs = ir_grad_shape(c, c->in[0]);
    bool mask[IR_MAX_RANK], noop;
    ir_shape out, kept;
    if (rm_shapes(c->g, c->node, &xs, mask, &noop, &out, &kept, NULL) != IR_OK)
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "axes that are not constant");
    int dy = ir_grad_reshape(c, ir_grad_gout(c, 0), &kept), x = c->in[0], g;
    switch (rm_of(c->node)) {
    case RM_L1: g = ir_grad_op2(c, IR_OP_Mul, dy, ir_grad_op1(c, IR_OP_Sign, x)); break;
    case RM_SUMSQ: g = ir_grad_op2(c, IR_OP_Mul, dy, ir_grad_scale(c, x, 2.0)); break;
    case RM_LOGSUM: {
        int y = ir_grad_reshape(c, c->out[0], &kept);
        g = ir_grad_op2(c, IR_OP_Div, dy, ir_grad_op1(c, IR_OP_Exp, y));
        /* the same for every element of a reduced set: expanded to X's shape */
        g = ir_grad_op2(c, IR_OP_Expand, g, ir_grad_const_i64(c, xs.rank, xs.dims));
        break;
    }
    default: {
        int y = ir_grad_reshape(c, c->out[0], &kept);
        g = ir_grad_op2(c, IR_OP_Mul, dy,
                        ir_grad_op1(c, IR_OP_Exp, ir_grad_op2(c, IR_OP_Sub, x, y)));
        break;
    }
    }
    return ir_grad_accumulate(c, 0, g);
}
IR_GRAD_VIA(ReduceL1, rm_grad)
IR_GRAD_VIA(ReduceSumSquare, rm_grad)
IR_GRAD_VIA(ReduceLogSum, rm_grad)
IR_GRAD_VIA(ReduceLogSumExp, rm_grad)

#define RM_DEF(NAME)                                                                               \
    IR_OP_DEF(NAME, 1, 2, 1, 1, .infer = rm_infer, .flops = rm_flops, .kernel = rm_kernel,         \
              .grad = ir_grad_##NAME, .dims = rm_dims);
RM_DEF(ReduceL1)
RM_DEF(ReduceSumSquare)
RM_DEF(ReduceLogSum)
RM_DEF(ReduceLogSumExp)
