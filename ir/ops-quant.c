/* ops-quant.c - QuantizeLinear and DequantizeLinear (ONNX opsets 13, 19, 21 and 23, as far as
 * magpie reads them), what DynamicQuantizeLinear's function body ends in.
 *
 *  - QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point), rounding half to even, and
 *    saturating to the range of y's type (uint8, int8, uint16, int16; float8, int4 and float4 are
 *    out of scope and refused). y's type is y_zero_point's, else the output_dtype attribute
 *    (opset 21), else uint8. NaN quantizes to the zero point. The division is done in x's
 *    precision (float32 for float32 and 16-bit floats, which ONNX also computes in float32;
 *    double for float64, the verification reference), so ties are the ones ONNX sees.
 *  - DequantizeLinear: y = (x - x_zero_point) * x_scale, of x_scale's type; x is uint8, int8,
 *    uint16, int16 or int32 (an int32 x has no zero point but 0).
 * The scale (and the zero point, of the same shape) is per tensor (one element), per axis (1-D of
 * x's size along `axis`, default 1) or, from opset 21, blocked (block_size > 0: x's rank, with
 * ceil(dim / block_size) along `axis` and x's dims elsewhere).
 * Neither op is differentiable (integer outputs; ONNX gives no gradient): no .grad.
 * Dims: every dim of x links to the same output dim; a per-axis scale and zero point link their
 * one dim to the output's axis; a blocked one links no axis dim (a part would straddle blocks). */
#include "ir-impl.h"

#include <math.h>

typedef struct qz_geom {
    int axis;                /* the scale's axis in x; -1 per tensor */
    int64_t outer, D, inner; /* x = [outer, D, inner] around axis */
    int64_t block;           /* block_size; 0 per axis (and per tensor, where axis is -1) */
    int64_t Db;              /* the scale's size along axis */
} qz_geom;

static bool qz_int_type(ir_dtype t) {
    return t == IR_U8 || t == IR_I8 || t == IR_U16 || t == IR_I16;
}

static void qz_range(ir_dtype t, double *lo, double *hi) {
    switch (t) {
    case IR_U8: *lo = 0, *hi = 255; break;
    case IR_I8: *lo = -128, *hi = 127; break;
    case IR_U16: *lo = 0, *hi = 65535; break;
    default: *lo = -32768, *hi = 32767; break; /* IR_I16 */
    }
}

/* The scale's layout against x, from the shapes (input 0 is x, 1 the scale, 2 the zero point). */
static ir_status qz_geometry(const ir_graph *g, const ir_node *n, qz_geom *q, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *s = ir_node_in(g, n, 1), *z = ir_node_in(g, n, 2);
    char s1[96], s2[96];
    *q = (qz_geom){.axis = -1, .outer = 1, .D = ir_shape_numel(&x->shape), .inner = 1};
    if (z && !ir_shape_eq(&z->shape, &s->shape))
        return ir_node_fail(
            d, IR_ERR_SHAPE, n, "the zero point's shape %s differs from the scale's %s",
            ir_shape_str(&z->shape, s1, sizeof s1), ir_shape_str(&s->shape, s2, sizeof s2));
    const int64_t block = ir_attr_int(n, "block_size", 0);
    if (block < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "block_size %lld < 0", (long long)block);
    if (block == 0 && ir_shape_numel(&s->shape) == 1 && s->shape.rank <= 1) return IR_OK;
    int axis;
    if (!ir_norm_axis(ir_attr_int(n, "axis", 1), x->shape.rank, &axis) || x->shape.rank == 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 1), x->shape.rank);
    q->axis = axis;
    q->D = x->shape.dims[axis];
    q->outer = q->inner = 1;
    for (int k = 0; k < axis; k++) q->outer *= x->shape.dims[k];
    for (int k = axis + 1; k < x->shape.rank; k++) q->inner *= x->shape.dims[k];
    q->block = block;
    bool ok;
    if (block == 0) {
        ok = s->shape.rank == 1 && s->shape.dims[0] == q->D;
        q->Db = q->D;
    } else {
        q->Db = (q->D + block - 1) / block;
        ok = s->shape.rank == x->shape.rank;
        for (int k = 0; ok && k < x->shape.rank; k++)
            ok = s->shape.dims[k] == (k == axis ? q->Db : x->shape.dims[k]);
    }
    if (!ok)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "the scale's shape %s fits x's shape %s neither per tensor, per axis "
                            "%d nor in blocks of %lld",
                            ir_shape_str(&s->shape, s1, sizeof s1),
                            ir_shape_str(&x->shape, s2, sizeof s2), axis, (long long)block);
    return IR_OK;
}

/* ---------------------------------------------------------------- shapes */

static ir_status qz_check_scale(const ir_node *n, const ir_value *s, ir_diag *d) {
    if (!s || !ir_dtype_is_float(s->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "the scale must be a float tensor, not %s",
                            s ? ir_dtype_name(s->dtype) : "absent");
    return IR_OK;
}

static ir_status quant_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *s = ir_node_in(g, n, 1), *z = ir_node_in(g, n, 2);
    if (!ir_dtype_is_float(x->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "x is %s; expected a float type",
                            ir_dtype_name(x->dtype));
    ir_status st = qz_check_scale(n, s, d);
    if (st) return st;
    const int64_t od = ir_attr_int(n, "output_dtype", 0);
    ir_dtype t = IR_U8;
    if (od != 0) {
        t = ir_dtype_from_onnx((int)od);
        if (t == IR_DTYPE_NONE || !qz_int_type(t))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                "output_dtype %lld is not supported (magpie quantizes to uint8, "
                                "int8, uint16 and int16; float8, int4 and float4 are out of scope)",
                                (long long)od);
    }
    if (z) {
        if (od != 0 && z->dtype != t)
            return ir_node_fail(d, IR_ERR_INVALID, n, "output_dtype is %s but the zero point is %s",
                                ir_dtype_name(t), ir_dtype_name(z->dtype));
        t = z->dtype;
    }
    if (!qz_int_type(t))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "quantizing to %s is not supported (uint8, int8, uint16, int16 are)",
                            ir_dtype_name(t));
    qz_geom q;
    if ((st = qz_geometry(g, n, &q, d))) return st;
    ir_set_out(g, n, 0, t, &x->shape);
    return IR_OK;
}

static ir_status dequant_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *s = ir_node_in(g, n, 1), *z = ir_node_in(g, n, 2);
    if (!qz_int_type(x->dtype) && x->dtype != IR_I32)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "x is %s; magpie dequantizes uint8, int8, uint16, int16 and int32 "
                            "(float8, int4 and float4 are out of scope)",
                            ir_dtype_name(x->dtype));
    ir_status st = qz_check_scale(n, s, d);
    if (st) return st;
    if (z && z->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_INVALID, n, "the zero point is %s but x is %s",
                            ir_dtype_name(z->dtype), ir_dtype_name(x->dtype));
    ir_dtype t = s->dtype;
    const int64_t od = ir_attr_int(n, "output_dtype", 0);
    if (od != 0) {
        t = ir_dtype_from_onnx((int)od);
        if (t == IR_DTYPE_NONE || !ir_dtype_is_float(t))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "output_dtype %lld is not a float type",
                                (long long)od);
    }
    qz_geom q;
    if ((st = qz_geometry(g, n, &q, d))) return st;
    ir_set_out(g, n, 0, t, &x->shape);
    return IR_OK;
}

/* A division (or subtraction and product), a rounding and a clamp per element. */
static double qz_flops(const ir_graph *g, const ir_node *n) {
    return 3.0 * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

/* ---------------------------------------------------------------- kernels */

/* The scale's element for x element (o, c, i) of [outer, D, inner]. */
static inline int64_t qz_sidx(const qz_geom *q, int64_t o, int64_t c, int64_t i) {
    if (q->axis < 0) return 0;
    if (q->block == 0) return c;
    return (o * q->Db + c / q->block) * q->inner + i;
}

/* x / scale in x's precision, rounded half to even; + zero point; clamped to [lo, hi]. */
static inline double qz_one(double x, double s, double z, bool f64, double lo, double hi) {
    double r = f64 ? nearbyint(x / s) : (double)nearbyintf((float)x / (float)s);
    if (isnan(r)) r = 0;
    r += z;
    return r < lo ? lo : r > hi ? hi : r;
}

static ir_status quant_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *s = &k->in[1];
    const ir_tensor *z = k->n_in > 2 && k->in[2].data ? &k->in[2] : NULL;
    ir_tensor *y = &k->out[0];
    qz_geom q;
    ir_status st = qz_geometry(k->graph, k->node, &q, k->diag);
    if (st) return st;
    double lo, hi;
    qz_range(y->dtype, &lo, &hi);
    const bool f64 = x->dtype == IR_F64;
    IR_PARALLEL_FOR(q.outer * q.D * q.inner >= IR_PAR_MIN && q.outer > 1)
    for (int64_t o = 0; o < q.outer; o++)
        for (int64_t c = 0; c < q.D; c++)
            for (int64_t i = 0; i < q.inner; i++) {
                int64_t e = (o * q.D + c) * q.inner + i, si = qz_sidx(&q, o, c, i);
                double zp = z ? ir_load_f64(z->data, z->dtype, si) : 0;
                double v = qz_one(ir_load_f64(x->data, x->dtype, e),
                                  ir_load_f64(s->data, s->dtype, si), zp, f64, lo, hi);
                ir_store_f64(y->data, y->dtype, e, v);
            }
    return IR_OK;
}

static ir_status dequant_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *s = &k->in[1];
    const ir_tensor *z = k->n_in > 2 && k->in[2].data ? &k->in[2] : NULL;
    ir_tensor *y = &k->out[0];
    qz_geom q;
    ir_status st = qz_geometry(k->graph, k->node, &q, k->diag);
    if (st) return st;
    const bool f64 = y->dtype == IR_F64;
    IR_PARALLEL_FOR(q.outer * q.D * q.inner >= IR_PAR_MIN && q.outer > 1)
    for (int64_t o = 0; o < q.outer; o++)
        for (int64_t c = 0; c < q.D; c++)
            for (int64_t i = 0; i < q.inner; i++) {
                int64_t e = (o * q.D + c) * q.inner + i, si = qz_sidx(&q, o, c, i);
                double dx = ir_load_f64(x->data, x->dtype, e) -
                            (z ? ir_load_f64(z->data, z->dtype, si) : 0);
                double sc = ir_load_f64(s->data, s->dtype, si);
                double v = f64 ? dx * sc : (double)((float)dx * (float)sc);
                ir_store_f64(y->data, y->dtype, e, v);
            }
    return IR_OK;
}

/* ---------------------------------------------------------------- dims */

static int qz_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    qz_geom q;
    ir_diag d = {0};
    if (qz_geometry(g, n, &q, &d) != IR_OK) return 0;
    const ir_value *x = ir_node_in(g, n, 0);
    for (int k = 0; k < x->shape.rank; k++) {
        if (k == q.axis && q.block > 0) continue;
        if (x->shape.dims[k] == 1) continue;
        ir_dims_keep(&o, 0, k, 0, k);
        if (k == q.axis)
            for (int in = 1; in < n->n_in; in++)
                if (n->in[in] >= 0) ir_dims_keep(&o, in, 0, 0, k);
    }
    return ir_dims_end(&o);
}

/* ---------------------------------------------------------------- the op table entries */

/* Not differentiable: no .grad. */
IR_OP_DEF(QuantizeLinear, 2, 3, 1, 1, .flags = IR_OPF_ELEMENTWISE, .infer = quant_infer,
          .flops = qz_flops, .kernel = quant_kernel, .dims = qz_dims);
/* Not differentiable (its input is an integer tensor): no .grad. */
IR_OP_DEF(DequantizeLinear, 2, 3, 1, 1, .flags = IR_OPF_ELEMENTWISE, .infer = dequant_infer,
          .flops = qz_flops, .kernel = dequant_kernel, .dims = qz_dims);
