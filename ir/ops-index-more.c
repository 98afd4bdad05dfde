/* ops-index-more.c - GatherND (opsets 13), ScatterElements (13, 16, 18) and OneHot (11).
 *
 *  - GatherND(data, indices, batch_dims): the last dim of indices (q) indexes the first q dims of
 *    data after the batch dims; output indices.shape[:-1] + data.shape[batch_dims + q:];
 *  - ScatterElements(data, indices, updates, axis, reduction): a copy of data where
 *    out[... indices[j] (at axis) ...] = updates[j], or combined with none / add / mul (16) /
 *    max / min (18); duplicates with reduction none take the last, as the reference does;
 *  - OneHot(indices, depth, values [off, on], axis): a new axis of `depth` (constant) with `on`
 *    where the index (negative ones counted from depth) falls, `off` elsewhere.
 * Indices are int64 or int32; negative ones count from the end; an index out of range is
 * IR_ERR_INVALID naming it. Elements move by size (any dtype); ScatterElements' reductions
 * combine numerically (double for floats, int64 for integers). No gradients: training through
 * them is refused as not differentiable. */
#include "ir-impl.h"

static inline int64_t ix_at(const ir_tensor *t, int64_t j) {
    return t->dtype == IR_I64 ? ((const int64_t *)t->data)[j] : ((const int32_t *)t->data)[j];
}

static ir_status need_index(const ir_node *n, const ir_value *v, ir_diag *d) {
    if (v->dtype == IR_I64 || v->dtype == IR_I32) return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "indices are %s, not int64 or int32",
                        ir_dtype_name(v->dtype));
}

static ir_status out_of_range(const ir_kernel_ctx *k, int64_t v, int64_t j, int64_t dim) {
    return ir_node_fail(k->diag, IR_ERR_INVALID, k->node,
                        "index %lld (at position %lld) is out of range for size %lld", (long long)v,
                        (long long)j, (long long)dim);
}

/* ---------------------------------------------------------------- GatherND */

static ir_status gnd_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    ir_status st = need_index(n, ix, d);
    if (st) return st;
    int64_t b = ir_attr_int(n, "batch_dims", 0);
    int r = x->shape.rank, qr = ix->shape.rank;
    int64_t q = qr ? ix->shape.dims[qr - 1] : 0;
    if (qr < 1 || b < 0 || b >= qr || b >= r || q < 1 || b + q > r)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "indices of rank %d (last dim %lld) and batch_dims %lld do not fit "
                            "data of rank %d",
                            qr, (long long)q, (long long)b, r);
    for (int i = 0; i < b; i++)
        if (x->shape.dims[i] != ix->shape.dims[i])
            return ir_node_fail(d, IR_ERR_SHAPE, n, "batch dim %d differs (%lld and %lld)", i,
                                (long long)x->shape.dims[i], (long long)ix->shape.dims[i]);
    ir_shape out = {0};
    for (int i = 0; i < qr - 1; i++) out.dims[out.rank++] = ix->shape.dims[i];
    for (int i = (int)(b + q); i < r; i++) {
        if (out.rank == IR_MAX_RANK)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "output rank exceeds %d", IR_MAX_RANK);
        out.dims[out.rank++] = x->shape.dims[i];
    }
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static ir_status gnd_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *ix = &k->in[1];
    const int64_t b = ir_attr_int(k->node, "batch_dims", 0);
    const int r = x->shape.rank, qr = ix->shape.rank;
    const int64_t q = ix->shape.dims[qr - 1];
    const size_t es = ir_dtype_size(x->dtype);
    int64_t xstr[IR_MAX_RANK], slice = 1, nb = 1, per_batch = 1;
    ir_shape_strides(&x->shape, xstr);
    for (int i = (int)(b + q); i < r; i++) slice *= x->shape.dims[i];
    for (int i = 0; i < b; i++) nb *= x->shape.dims[i];
    for (int i = (int)b; i < qr - 1; i++) per_batch *= ix->shape.dims[i];
    const int64_t batch_stride = b ? xstr[b - 1] : 0;
    char *y = k->out[0].data;
    for (int64_t t = 0; t < nb * per_batch; t++) {
        int64_t off = (t / per_batch) * batch_stride;
        for (int64_t j = 0; j < q; j++) {
            int64_t v = ix_at(ix, t * q + j), dim = x->shape.dims[b + j];
            if (v < -dim || v >= dim) return out_of_range(k, v, t * q + j, dim);
            off += (v < 0 ? v + dim : v) * xstr[b + j];
        }
        memcpy(y + (size_t)(t * slice) * es, (const char *)x->data + (size_t)off * es,
               (size_t)slice * es);
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- ScatterElements */

enum se_red { SE_NONE, SE_ADD, SE_MUL, SE_MAX, SE_MIN };

static ir_status se_parse(const ir_graph *g, const ir_node *n, int *axis, enum se_red *red,
                          ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1), *u = ir_node_in(g, n, 2);
    ir_status st = need_index(n, ix, d);
    if (st) return st;
    char s1[96], s2[96];
    if (ix->shape.rank != x->shape.rank || !ir_shape_eq(&ix->shape, &u->shape) ||
        u->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "indices %s and updates %s (%s) must have one shape of data's rank "
                            "and data's dtype",
                            ir_shape_str(&ix->shape, s1, sizeof s1),
                            ir_shape_str(&u->shape, s2, sizeof s2), ir_dtype_name(u->dtype));
    int64_t a = ir_attr_int(n, "axis", 0);
    if (!ir_norm_axis(a, x->shape.rank, axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, x->shape.rank);
    const char *r = ir_attr_str(n, "reduction", "none");
    static const char *names[] = {"none", "add", "mul", "max", "min"};
    int i = 0;
    while (i < 5 && strcmp(r, names[i])) i++;
    if (i == 5) return ir_node_fail(d, IR_ERR_INVALID, n, "reduction '%s' is not valid", r);
    *red = (enum se_red)i;
    if (*red != SE_NONE && x->dtype == IR_BOOL)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "reduction '%s' of bool", r);
    return IR_OK;
}

static ir_status se_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    int axis;
    enum se_red red = SE_NONE;
    ir_status st = se_parse(g, n, &axis, &red, d);
    if (st) return st;
    const ir_value *x = ir_node_in(g, n, 0);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static ir_status se_kernel(const ir_kernel_ctx *k) {
    int axis = 0;
    enum se_red red = SE_NONE;
    ir_status st = se_parse(k->graph, k->node, &axis, &red, k->diag);
    if (st) return st;
    const ir_tensor *x = &k->in[0], *ix = &k->in[1], *u = &k->in[2];
    ir_tensor *y = &k->out[0];
    const size_t es = ir_dtype_size(x->dtype);
    memcpy(y->data, x->data, (size_t)ir_tensor_numel(x) * es);
    int64_t xstr[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    ir_shape_strides(&x->shape, xstr);
    const int r = ix->shape.rank;
    const int64_t n = ir_tensor_numel(ix), dim = x->shape.dims[axis];
    const bool is_float = ir_dtype_is_float(x->dtype);
    for (int64_t j = 0; j < n; j++) {
        int64_t v = ix_at(ix, j);
        if (v < -dim || v >= dim) return out_of_range(k, v, j, dim);
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += (i == axis ? (v < 0 ? v + dim : v) : idx[i]) * xstr[i];
        if (red == SE_NONE) {
            memcpy((char *)y->data + (size_t)off * es, (const char *)u->data + (size_t)j * es, es);
        } else if (is_float) {
            double a = ir_load_f64(y->data, x->dtype, off), b = ir_load_f64(u->data, u->dtype, j);
            a = red == SE_ADD   ? a + b
                : red == SE_MUL ? a * b
                : red == SE_MAX ? (b > a ? b : a)
                                : (b < a ? b : a);
            ir_store_f64(y->data, x->dtype, off, a);
        } else {
            int64_t a = ir_load_i64(y->data, x->dtype, off), b = ir_load_i64(u->data, u->dtype, j);
            a = red == SE_ADD   ? a + b
                : red == SE_MUL ? a * b
                : red == SE_MAX ? (b > a ? b : a)
                                : (b < a ? b : a);
            ir_store_i64(y->data, x->dtype, off, a);
        }
        for (int dd = r - 1; dd >= 0; dd--) { /* odometer over the indices' shape */
            if (++idx[dd] < ix->shape.dims[dd]) break;
            idx[dd] = 0;
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- OneHot */

static ir_status oh_parse(const ir_graph *g, const ir_node *n, int *axis, int64_t *depth,
                          ir_diag *d) {
    const ir_value *ix = ir_node_in(g, n, 0), *vals = ir_node_in(g, n, 2);
    const ir_value *dv = ir_node_in(g, n, 1);
    if (ix->dtype == IR_BOOL || ir_dtype_size(ix->dtype) == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "indices are %s", ir_dtype_name(ix->dtype));
    if (ir_shape_numel(&vals->shape) != 2)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "values must hold two elements [off, on]");
    if (!ir_value_data(dv) || ir_shape_numel(&dv->shape) != 1)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "depth ('%s') must be a constant scalar (it fixes the output shape)",
                            dv->name);
    double dd = ir_load_f64(ir_value_data(dv), dv->dtype, 0);
    *depth = (int64_t)dd;
    if (*depth < 1) return ir_node_fail(d, IR_ERR_INVALID, n, "depth %g must be positive", dd);
    int64_t a = ir_attr_int(n, "axis", -1);
    if (ix->shape.rank + 1 > IR_MAX_RANK || !ir_norm_axis(a, ix->shape.rank + 1, axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, ix->shape.rank + 1);
    return IR_OK;
}

static ir_status oh_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    int axis;
    int64_t depth;
    ir_status st = oh_parse(g, n, &axis, &depth, d);
    if (st) return st;
    const ir_value *ix = ir_node_in(g, n, 0);
    ir_shape out = {ix->shape.rank + 1, {0}};
    for (int i = 0, j = 0; i < out.rank; i++) out.dims[i] = i == axis ? depth : ix->shape.dims[j++];
    ir_set_out(g, n, 0, ir_node_in(g, n, 2)->dtype, &out);
    return IR_OK;
}

static ir_status oh_kernel(const ir_kernel_ctx *k) {
    int axis;
    int64_t depth;
    ir_status st = oh_parse(k->graph, k->node, &axis, &depth, k->diag);
    if (st) return st;
    const ir_tensor *ix = &k->in[0], *vals = &k->in[2];
    const size_t es = ir_dtype_size(vals->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= ix->shape.dims[i];
    for (int i = axis; i < ix->shape.rank; i++) inner *= ix->shape.dims[i];
    char *y = k->out[0].data;
    const char *off = vals->data, *on = (const char *)vals->data + es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t dd = 0; dd < depth; dd++)
            for (int64_t i = 0; i < inner; i++) {
                double v = ir_load_f64(ix->data, ix->dtype, o * inner + i);
                int64_t at = (int64_t)v < 0 ? (int64_t)v + depth : (int64_t)v;
                memcpy(y + (size_t)((o * depth + dd) * inner + i) * es, at == dd ? on : off, es);
            }
    return IR_OK;
}

/* ---------------------------------------------------------------- dims */

/* GatherND: batch dims link from data and indices; the other leading dims of indices (one
 * gathered slice each) and the slice dims of data link to the output. */
static int gnd_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    const int64_t b = ir_attr_int(n, "batch_dims", 0);
    const int qr = ix->shape.rank, r = x->shape.rank;
    if (qr < 1) return 0;
    const int64_t q = ix->shape.dims[qr - 1];
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < qr - 1; i++) {
        ir_dims_keep(&o, 1, i, 0, i);
        if (i < b) ir_dims_keep(&o, 0, i, 0, i);
    }
    for (int i = (int)(b + q); i < r; i++) ir_dims_keep(&o, 0, i, 0, qr - 1 + i - (int)(b + q));
    return ir_dims_end(&o);
}

/* ScatterElements: a dim other than the axis links where indices and updates span all of it. */
static int se_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    int axis;
    if (!ir_norm_axis(ir_attr_int(n, "axis", 0), x->shape.rank, &axis) ||
        ix->shape.rank != x->shape.rank)
        return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++) {
        if (i == axis || ix->shape.dims[i] != x->shape.dims[i]) continue;
        for (int in = 0; in < 3; in++) ir_dims_keep(&o, in, i, 0, i);
    }
    return ir_dims_end(&o);
}

/* OneHot: each dim of indices is an output dim (the new axis aside). */
static int oh_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *ix = ir_node_in(g, n, 0);
    int axis;
    if (!ir_norm_axis(ir_attr_int(n, "axis", -1), ix->shape.rank + 1, &axis)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < ix->shape.rank; i++) ir_dims_keep(&o, 0, i, 0, i < axis ? i : i + 1);
    return ir_dims_end(&o);
}

IR_OP_DEF(GatherND, 2, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = gnd_infer, .kernel = gnd_kernel,
          .dims = gnd_dims);
IR_OP_DEF(ScatterElements, 3, 3, 1, 1, .flags = IR_OPF_FLOAT16, .infer = se_infer,
          .kernel = se_kernel, .dims = se_dims);
IR_OP_DEF(OneHot, 3, 3, 1, 1, .flags = IR_OPF_FLOAT16, .infer = oh_infer, .kernel = oh_kernel,
          .dims = oh_dims);
