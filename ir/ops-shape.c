/* ops-shape.c - ops that re-describe or generate shapes: Reshape, Flatten, Squeeze, Unsqueeze,
 * Shape, Size, Constant, ConstantOfShape and Range.
 *
 * Invariants:
 *  - shape-like inputs (Reshape's shape, Squeeze/Unsqueeze's axes, ConstantOfShape's shape,
 *    Range's scalars) must be constants at inference; a dynamic one is IR_ERR_UNSUPPORTED;
 *  - the re-describing kernels (Reshape, Flatten, Squeeze, Unsqueeze) copy the bytes into a
 *    fresh output: the executor runs every node as a real op, so outputs never alias inputs;
 *  - every kernel works on raw bytes (or, for Range, on the four dtypes ONNX allows), so each
 *    dtype of ir.h is supported. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

/* ---------------------------------------------------------------- helpers */

/* Axes of Squeeze/Unsqueeze: input 1 since opset 13, the `axes` attribute before. *cnt = -2
 * when neither is given. */
static ir_status axes_of(const ir_graph *g, const ir_node *n, int64_t *axes, int *cnt, ir_diag *d) {
    ir_status st = ir_const_ints(g, n, 1, axes, IR_MAX_RANK, cnt, d);
    if (st != IR_OK || *cnt != -2) return st;
    const int64_t *a;
    int na = ir_attr_ints(n, "axes", &a);
    if (na > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n, "%d axes, at most %d allowed", na, IR_MAX_RANK);
    if (na >= 0) memcpy(axes, a, sizeof(int64_t) * (size_t)na);
    *cnt = na >= 0 ? na : -2;
    return IR_OK;
}

/* Sets mark[a] for each of the cnt axes, normalized against rank, refusing one out of range or
 * repeated. For Squeeze, x is the input and each marked dim must have size 1; Unsqueeze passes
 * NULL and the output rank. */
static ir_status mark_axes(const ir_node *n, const int64_t *axes, int cnt, int rank,
                           const ir_shape *x, bool *mark, ir_diag *d) {
    for (int i = 0; i < cnt; i++) {
        int ax;
        if (!ir_norm_axis(axes[i], rank, &ax) || rank == 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for %srank %d",
                                (long long)axes[i], x ? "" : "output ", rank);
        if (mark[ax]) return ir_node_fail(d, IR_ERR_INVALID, n, "axis %d is repeated", ax);
        if (x && x->dims[ax] != 1)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "cannot squeeze axis %d of size %lld", ax,
                                (long long)x->dims[ax]);
        mark[ax] = true;
    }
    return IR_OK;
}

static ir_status copy_kernel(const ir_kernel_ctx *k) {
    size_t bytes = (size_t)ir_tensor_numel(&k->in[0]) * ir_dtype_size(k->in[0].dtype);
    if (bytes && k->out[0].data != k->in[0].data) memcpy(k->out[0].data, k->in[0].data, bytes);
    return IR_OK;
}

/* ---------------------------------------------------------------- Reshape */

static ir_status reshape_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t sh[IR_MAX_RANK];
    int cnt;
    ir_status st = ir_const_ints(g, n, 1, sh, IR_MAX_RANK, &cnt, d);
    if (st != IR_OK) return st;
    bool allowzero = ir_attr_int(n, "allowzero", 0) != 0;
    ir_shape out = {.rank = cnt};
    int free_dim = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (int i = 0; i < cnt; i++) {
        int64_t v = sh[i];
        if (v == -1) {
            if (free_dim >= 0)
                return ir_node_fail(d, IR_ERR_INVALID, n, "the shape has more than one -1");
            free_dim = i;
            continue;
        }
        if (v == 0 && !allowzero) {
            if (i >= x->shape.rank)
                return ir_node_fail(d, IR_ERR_SHAPE, n,
                                    "shape[%d] = 0 copies a dim the rank-%d input does not have", i,
                                    x->shape.rank);
            v = x->shape.dims[i];
        } else if (v < 0) {
            return ir_node_fail(d, IR_ERR_INVALID, n, "shape[%d] = %lld is negative", i,
                                (long long)v);
        }
        has_zero = has_zero || v == 0;
        out.dims[i] = v;
        if (__builtin_mul_overflow(known, v, &known))
            return ir_node_fail(d, IR_ERR_INVALID, n, "the shape's element count overflows");
    }
    int64_t numel = ir_shape_numel(&x->shape);
    char a[160], b[160];
    if (free_dim >= 0) {
        if (allowzero && has_zero)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "with allowzero=1 the shape may not hold both 0 and -1");
        if (known == 0 || numel % known)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "cannot infer the -1 of shape %s from %s",
                                ir_shape_str(&out, a, sizeof a),
                                ir_shape_str(&x->shape, b, sizeof b));
        out.dims[free_dim] = numel / known;
    }
    if (ir_shape_numel(&out) != numel)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "cannot reshape %s (%lld elements) to %s",
                            ir_shape_str(&x->shape, a, sizeof a), (long long)numel,
                            ir_shape_str(&out, b, sizeof b));
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

/* Dims of the four re-describing ops (ir.h, ir_dimlink): the dims that survive whole link
 * (ir_dims_regroup); merged or split dims get none. Shape, Size, Constant, ConstantOfShape and
 * Range have no dims: their outputs' dims are not their inputs' dims. */
IR_OP_DEF(Reshape, 2, 2, 1, 1, .flags = IR_OPF_VIEW | IR_OPF_FLOAT16, .infer = reshape_infer,
          .kernel = copy_kernel, .grad = ir_grad_Reshape, .dims = ir_dims_regroup_op);

/* ---------------------------------------------------------------- Flatten */

static ir_status flatten_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int r = x->shape.rank;
    int64_t axis = ir_attr_int(n, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 1), r);
    ir_shape out = {.rank = 2, .dims = {1, 1}};
    for (int i = 0; i < r; i++) out.dims[i < axis ? 0 : 1] *= x->shape.dims[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

IR_OP_DEF(Flatten, 1, 1, 1, 1, .flags = IR_OPF_VIEW | IR_OPF_FLOAT16, .infer = flatten_infer,
          .kernel = copy_kernel, .grad = ir_grad_Flatten, .dims = ir_dims_regroup_op);

/* ---------------------------------------------------------------- Squeeze, Unsqueeze */

static ir_status squeeze_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int r = x->shape.rank, cnt;
    int64_t axes[IR_MAX_RANK];
    ir_status st = axes_of(g, n, axes, &cnt, d);
    if (st != IR_OK) return st;
    bool drop[IR_MAX_RANK] = {false};
    if (cnt == -2) { /* no axes: every dim of size 1 */
        for (int i = 0; i < r; i++) drop[i] = x->shape.dims[i] == 1;
    }
    if ((st = mark_axes(n, axes, cnt, r, &x->shape, drop, d)) != IR_OK) return st;
    ir_shape out = {0};
    for (int i = 0; i < r; i++)
        if (!drop[i]) out.dims[out.rank++] = x->shape.dims[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

IR_OP_DEF(Squeeze, 1, 2, 1, 1, .flags = IR_OPF_VIEW | IR_OPF_FLOAT16, .infer = squeeze_infer,
          .kernel = copy_kernel, .grad = ir_grad_Squeeze, .dims = ir_dims_regroup_op);

static ir_status unsqueeze_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int r = x->shape.rank, cnt;
    int64_t axes[IR_MAX_RANK];
    ir_status st = axes_of(g, n, axes, &cnt, d);
    if (st != IR_OK) return st;
    if (cnt == -2) return ir_node_fail(d, IR_ERR_INVALID, n, "axes are required");
    int orank = r + cnt;
    if (orank > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "output rank %d exceeds %d", orank,
                            IR_MAX_RANK);
    bool ins[IR_MAX_RANK] = {false};
    if ((st = mark_axes(n, axes, cnt, orank, NULL, ins, d)) != IR_OK) return st;
    ir_shape out = {.rank = orank};
    for (int i = 0, j = 0; i < orank; i++) out.dims[i] = ins[i] ? 1 : x->shape.dims[j++];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

IR_OP_DEF(Unsqueeze, 1, 2, 1, 1, .flags = IR_OPF_VIEW | IR_OPF_FLOAT16, .infer = unsqueeze_infer,
          .kernel = copy_kernel, .grad = ir_grad_Unsqueeze, .dims = ir_dims_regroup_op);

/* ---------------------------------------------------------------- Shape, Size */

/* Opset 15's start/end: negative counts from the back, both clamped to [0, rank]. */
static void shape_range(const ir_node *n, int rank, int64_t *start, int64_t *len) {
    int64_t s = ir_attr_int(n, "start", 0), e = ir_attr_int(n, "end", rank);
    if (s < 0) s += rank;
    if (e < 0) e += rank;
    s = s < 0 ? 0 : s > rank ? rank : s;
    e = e < 0 ? 0 : e > rank ? rank : e;
    *start = s;
    *len = e > s ? e - s : 0;
}

static ir_status shape_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    int64_t s, len;
    shape_range(n, ir_node_in(g, n, 0)->shape.rank, &s, &len);
    ir_shape out = {.rank = 1, .dims = {len}};
    ir_set_out(g, n, 0, IR_I64, &out);
    return IR_OK;
}

static ir_status shape_kernel(const ir_kernel_ctx *k) {
    int64_t s, len;
    shape_range(k->node, k->in[0].shape.rank, &s, &len);
    if (len) memcpy(k->out[0].data, &k->in[0].shape.dims[s], sizeof(int64_t) * (size_t)len);
    return IR_OK;
}

IR_OP_DEF(Shape, 1, 1, 1, 1, .flags = IR_OPF_SHAPE_ONLY | IR_OPF_FLOAT16, .infer = shape_infer,
          .kernel = shape_kernel);

static ir_status size_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_shape out = {0};
    ir_set_out(g, n, 0, IR_I64, &out);
    return IR_OK;
}

static ir_status size_kernel(const ir_kernel_ctx *k) {
    *(int64_t *)k->out[0].data = ir_tensor_numel(&k->in[0]);
    return IR_OK;
}

IR_OP_DEF(Size, 1, 1, 1, 1, .flags = IR_OPF_SHAPE_ONLY | IR_OPF_FLOAT16, .infer = size_infer,
          .kernel = size_kernel);

/* ---------------------------------------------------------------- Constant */

/* The one value attribute of a Constant node, as dtype, shape and bytes. */
static ir_status constant_value(const ir_node *n, ir_dtype *t, ir_shape *s, const void **data,
                                ir_diag *d) {
    const ir_attr *found = NULL;
    for (int i = 0; i < n->n_attrs; i++) {
        const ir_attr *a = &n->attrs[i];
        if (strncmp(a->name, "value", 5) != 0 && strcmp(a->name, "sparse_value") != 0) continue;
        if (found)
            return ir_node_fail(d, IR_ERR_INVALID, n, "has both '%s' and '%s'", found->name,
                                a->name);
        found = a;
    }
    if (!found) return ir_node_fail(d, IR_ERR_INVALID, n, "has no value attribute");
    const ir_attr *a = found;
    static const struct {
        const char *name;
        ir_attr_type type;
    } kinds[] = {{"value", IR_ATTR_TENSOR},
                 {"value_float", IR_ATTR_FLOAT},
                 {"value_floats", IR_ATTR_FLOATS},
                 {"value_int", IR_ATTR_INT},
                 {"value_ints", IR_ATTR_INTS}};
    int kind = -1;
    for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++)
        if (strcmp(a->name, kinds[i].name) == 0) kind = i;
    if (kind < 0)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "attribute '%s' is not supported", a->name);
    if (a->type != kinds[kind].type)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute '%s' has the wrong type", a->name);
    *s = (ir_shape){0};
    switch (kind) {
    case 0: {
        *t = a->t_dtype;
        *s = a->t_shape;
        *data = a->t_blob ? ir_blob_data(a->t_blob) : NULL;
        size_t es = ir_dtype_size(*t), need = (size_t)ir_shape_numel(s) * es;
        if (!es || (need && (!a->t_blob || ir_blob_bytes(a->t_blob) < need)))
            return ir_node_fail(d, IR_ERR_INVALID, n, "its tensor value has no data or dtype");
        break;
    }
    case 1: *t = IR_F32, *data = &a->f; break;
    case 2: *t = IR_F32, *s = (ir_shape){.rank = 1, .dims = {a->n}}, *data = a->floats; break;
    case 3: *t = IR_I64, *data = &a->i; break;
    default: *t = IR_I64, *s = (ir_shape){.rank = 1, .dims = {a->n}}, *data = a->ints; break;
    }
    return IR_OK;
}

static ir_status constant_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_dtype t;
    ir_shape s;
    const void *data;
    ir_status st = constant_value(n, &t, &s, &data, d);
    if (st == IR_OK) ir_set_out(g, n, 0, t, &s);
    return st;
}

static ir_status constant_kernel(const ir_kernel_ctx *k) {
    ir_dtype t;
    ir_shape s;
    const void *data;
    ir_status st = constant_value(k->node, &t, &s, &data, k->diag);
    size_t bytes = (size_t)ir_shape_numel(&s) * ir_dtype_size(t);
    if (st == IR_OK && bytes) memcpy(k->out[0].data, data, bytes);
    return st;
}

IR_OP_DEF(Constant, 0, 0, 1, 1, .flags = IR_OPF_FLOAT16, .infer = constant_infer,
          .kernel = constant_kernel);

/* ---------------------------------------------------------------- ConstantOfShape */

static const float cos_default_value = 0.0f;

/* The fill element: the one-element tensor attribute `value`, float32 0 by default. */
static ir_status cos_value(const ir_node *n, ir_dtype *t, const void **elem, ir_diag *d) {
    const ir_attr *a = ir_attr_find(n, "value");
    *t = IR_F32;
    *elem = &cos_default_value;
    if (!a) return IR_OK;
    if (a->type != IR_ATTR_TENSOR || ir_shape_numel(&a->t_shape) != 1 || !a->t_blob ||
        !ir_dtype_size(a->t_dtype) || ir_blob_bytes(a->t_blob) < ir_dtype_size(a->t_dtype))
        return ir_node_fail(d, IR_ERR_INVALID, n, "'value' must be a one-element tensor");
    *t = a->t_dtype;
    *elem = ir_blob_data(a->t_blob);
    return IR_OK;
}

static ir_status cos_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    int64_t sh[IR_MAX_RANK];
    int cnt;
    ir_dtype t;
    const void *elem;
    ir_status st = ir_const_ints(g, n, 0, sh, IR_MAX_RANK, &cnt, d);
    if (st == IR_OK) st = cos_value(n, &t, &elem, d);
    if (st == IR_OK) st = ir_check_sizes(n, "shape", sh, cnt, d);
    if (st != IR_OK) return st;
    ir_shape out = ir_shape_make(cnt, sh);
    ir_set_out(g, n, 0, t, &out);
    return IR_OK;
}

static ir_status cos_kernel(const ir_kernel_ctx *k) {
    ir_dtype t;
    const void *elem;
    ir_status st = cos_value(k->node, &t, &elem, k->diag);
    if (st == IR_OK)
        ir_fill_elems(k->out[0].data, ir_tensor_numel(&k->out[0]), elem, ir_dtype_size(t));
    return st;
}

IR_OP_DEF(ConstantOfShape, 1, 1, 1, 1, .flags = IR_OPF_FLOAT16, .infer = cos_infer,
          .kernel = cos_kernel);

/* ---------------------------------------------------------------- Range */

/* Element count max(ceil((limit - start) / delta), 0). Integers are computed exactly; floats
 * subtract in their own precision first, as onnxruntime does, so that borderline counts agree. */
static ir_status range_len(const ir_node *n, ir_dtype t, const void *s, const void *l,
                           const void *dl, int64_t *len, ir_diag *d) {
    if (t == IR_I64 || t == IR_I32) {
        int64_t a = ir_load_i64(s, t, 0), b = ir_load_i64(l, t, 0), c = ir_load_i64(dl, t, 0), diff;
        if (c == 0) return ir_node_fail(d, IR_ERR_INVALID, n, "delta is 0");
        if (__builtin_sub_overflow(b, a, &diff))
            return ir_node_fail(d, IR_ERR_INVALID, n, "limit - start overflows");
        int64_t q = diff / c;
        if (diff % c != 0 && (diff > 0) == (c > 0)) q++;
        *len = q > 0 ? q : 0;
        return IR_OK;
    }
    double a = ir_load_f64(s, t, 0), b = ir_load_f64(l, t, 0), c = ir_load_f64(dl, t, 0);
    double diff = t == IR_F32 ? (double)((float)b - (float)a) : b - a;
    double q = ceil(diff / c);
    if (c == 0 || isnan(q) || q >= 9.0e18)
        return ir_node_fail(d, IR_ERR_INVALID, n, "start %g, limit %g, delta %g give no count", a,
                            b, c);
    *len = q > 0 ? (int64_t)q : 0;
    return IR_OK;
}

static ir_status range_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = ir_node_in(g, n, i);
        if (ir_shape_numel(&v[i]->shape) != 1 || v[i]->shape.rank > 1)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d must be a scalar", i);
        if (v[i]->dtype != v[0]->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "inputs have different dtypes (%s, %s)",
                                ir_dtype_name(v[0]->dtype), ir_dtype_name(v[i]->dtype));
        if (!ir_value_data(v[i]))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                "input %d ('%s') must be a constant after folding (dynamic "
                                "shapes are not supported)",
                                i, v[i]->name);
    }
    ir_dtype t = v[0]->dtype;
    if (t != IR_F32 && t != IR_F64 && t != IR_I64 && t != IR_I32)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dtype %s is not float32/64 or int32/64",
                            ir_dtype_name(t));
    int64_t len = 0;
    ir_status st =
        range_len(n, t, ir_value_data(v[0]), ir_value_data(v[1]), ir_value_data(v[2]), &len, d);
    if (st != IR_OK) return st;
    ir_shape out = {.rank = 1, .dims = {len}};
    ir_set_out(g, n, 0, t, &out);
    return IR_OK;
}

/* output[i] = start + i * delta in the dtype itself (the spec's formula, which does not
 * accumulate rounding error as repeated addition would). */
#define RANGE_FILL(T)                                                                              \
    do {                                                                                           \
        T s0 = *(const T *)k->in[0].data, dl = *(const T *)k->in[2].data, *o = k->out[0].data;     \
        for (int64_t i = 0; i < len; i++) o[i] = (T)(s0 + (T)i * dl);                              \
    } while (0)

static ir_status range_kernel(const ir_kernel_ctx *k) {
    int64_t len = ir_tensor_numel(&k->out[0]);
    switch (k->out[0].dtype) {
    case IR_F32: RANGE_FILL(float); break;
    case IR_F64: RANGE_FILL(double); break;
    case IR_I64: RANGE_FILL(int64_t); break;
    case IR_I32: RANGE_FILL(int32_t); break;
    default:
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node, "dtype %s",
                            ir_dtype_name(k->out[0].dtype));
    }
    return IR_OK;
}

IR_OP_DEF(Range, 3, 3, 1, 1, .infer = range_infer, .kernel = range_kernel);
