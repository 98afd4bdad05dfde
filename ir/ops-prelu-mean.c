/* ops-prelu-mean.c - PRelu (opsets 9 and 16) and the variadic Mean (opsets 8 and 13), what
 * PyTorch exports for nn.PReLU and for torch.mean over stacked tensors.
 *
 * PRelu: Y = X where X >= 0, slope * X where X < 0; slope broadcasts to X one way (numpy rules,
 * the output is X's shape). float32/float64, and int32/int64 (opset 16). Mean: the element-wise
 * mean of 1..64 inputs broadcast together (numpy rules), float32/float64, summed in double.
 *
 * Both run one plain loop: the output is walked row by row (its last dim), and each operand is
 * read through broadcast strides (0 along a broadcast dim), so that a per-channel slope or a
 * scalar costs no copy. Gradients compose existing ops: PRelu dX = Where(X < 0, dY * slope, dY),
 * dslope = Where(X < 0, dY * X, 0) summed back to slope's shape; Mean dY / n to each input. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#define PM_MAX_IN 64

/* ---------------------------------------------------------------- shapes */

static bool pm_float(ir_dtype t) {
    return ir_dtype_is_float(t);
}

static ir_status prelu_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *s = ir_node_in(g, n, 1);
    char s1[96], s2[96];
    if (!pm_float(x->dtype) && x->dtype != IR_I32 && x->dtype != IR_I64)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "X is %s; floats, int32 and int64 are supported",
                            ir_dtype_name(x->dtype));
    if (s->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "slope is %s but X is %s", ir_dtype_name(s->dtype),
                            ir_dtype_name(x->dtype));
    ir_shape b;
    if (!ir_shape_broadcast(&x->shape, &s->shape, &b) || !ir_shape_eq(&b, &x->shape))
        return ir_node_fail(
            d, IR_ERR_SHAPE, n, "slope of shape %s does not broadcast to X's shape %s",
            ir_shape_str(&s->shape, s1, sizeof s1), ir_shape_str(&x->shape, s2, sizeof s2));
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static ir_status mean_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *v0 = ir_node_in(g, n, 0);
    if (!v0) return ir_node_fail(d, IR_ERR_INVALID, n, "input 0 is missing");
    if (!pm_float(v0->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "input 0 is %s; expected a float type",
                            ir_dtype_name(v0->dtype));
    ir_shape out = v0->shape;
    for (int i = 1; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        char s1[96], s2[96];
        if (!v) return ir_node_fail(d, IR_ERR_INVALID, n, "input %d is missing", i);
        if (v->dtype != v0->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d ('%s') is %s but input 0 is %s", i,
                                v->name, ir_dtype_name(v->dtype), ir_dtype_name(v0->dtype));
        if (!ir_shape_broadcast(&out, &v->shape, &out))
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "input shapes do not broadcast: %s and input %d ('%s') %s",
                                ir_shape_str(&out, s1, sizeof s1), i, v->name,
                                ir_shape_str(&v->shape, s2, sizeof s2));
    }
    ir_set_out(g, n, 0, v0->dtype, &out);
    return IR_OK;
}

static double prelu_flops(const ir_graph *g, const ir_node *n) {
    return 2.0 * (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
}

/* n - 1 additions and one division per output element */
static double mean_flops(const ir_graph *g, const ir_node *n) {
    return (double)n->n_in * (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
}

/* ---------------------------------------------------------------- kernels */

/* Operand k's element offset for the first element of output row r (rows of the last dim), and
 * its stride along the row, from broadcast strides st[k]. */
static int64_t pm_row_offset(const ir_shape *os, const int64_t *st, int64_t r) {
    int64_t off = 0;
    for (int d = os->rank - 2; d >= 0; d--) {
        off += (r % os->dims[d]) * st[d];
        r /= os->dims[d];
    }
    return off;
}

#define PRELU_ROW(sfx, T)                                                                          \
    static void prelu_row_##sfx(const T *x, const T *s, int64_t ss, T *y, int64_t len) {           \
        for (int64_t i = 0; i < len; i++) {                                                        \
            T v = x[i];                                                                            \
            y[i] = v < 0 ? (T)(s[i * ss] * v) : v;                                                 \
        }                                                                                          \
    }
PRELU_ROW(f32, float)
PRELU_ROW(f64, double)
PRELU_ROW(i32, int32_t)
PRELU_ROW(i64, int64_t)

static ir_status prelu_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *s = &k->in[1];
    ir_tensor *y = &k->out[0];
    const ir_shape *os = &y->shape;
    int64_t st[IR_MAX_RANK];
    ir_broadcast_strides(&s->shape, os, st);
    const int64_t len = os->rank ? os->dims[os->rank - 1] : 1;
    const int64_t rows = len ? ir_tensor_numel(y) / len : 0, ss = os->rank ? st[os->rank - 1] : 0;
    const ir_dtype t = x->dtype;
    IR_PARALLEL_FOR(ir_tensor_numel(y) >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t so = pm_row_offset(os, st, r), xo = r * len;
        switch (t) {
        case IR_F32:
            prelu_row_f32((const float *)x->data + xo, (const float *)s->data + so, ss,
                          (float *)y->data + xo, len);
            break;
        case IR_F64:
            prelu_row_f64((const double *)x->data + xo, (const double *)s->data + so, ss,
                          (double *)y->data + xo, len);
            break;
        case IR_I32:
            prelu_row_i32((const int32_t *)x->data + xo, (const int32_t *)s->data + so, ss,
                          (int32_t *)y->data + xo, len);
            break;
        default:
            prelu_row_i64((const int64_t *)x->data + xo, (const int64_t *)s->data + so, ss,
                          (int64_t *)y->data + xo, len);
            break;
        }
    }
    return IR_OK;
}

static ir_status mean_kernel(const ir_kernel_ctx *k) {
    ir_tensor *y = &k->out[0];
    const ir_shape *os = &y->shape;
    const int nin = k->n_in;
    if (nin > PM_MAX_IN)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node, "more than %d inputs", PM_MAX_IN);
    int64_t st[PM_MAX_IN][IR_MAX_RANK], ss[PM_MAX_IN];
    for (int i = 0; i < nin; i++) {
        ir_broadcast_strides(&k->in[i].shape, os, st[i]);
        ss[i] = os->rank ? st[i][os->rank - 1] : 0;
    }
    const int64_t len = os->rank ? os->dims[os->rank - 1] : 1;
    const int64_t rows = len ? ir_tensor_numel(y) / len : 0;
    const ir_dtype t = y->dtype;
    const double inv = 1.0 / nin;
    IR_PARALLEL_FOR(ir_tensor_numel(y) * nin >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[PM_MAX_IN];
        for (int i = 0; i < nin; i++) off[i] = pm_row_offset(os, st[i], r);
        for (int64_t j = 0; j < len; j++) {
            double acc = 0;
            for (int i = 0; i < nin; i++) acc += IR_LD_F(t, k->in[i].data, off[i] + j * ss[i]);
            IR_ST_F(t, y->data, r * len + j, acc * inv);
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- gradients */

static ir_status prelu_grad(ir_grad_ctx *c) {
    int dy = ir_grad_gout(c, 0), x = c->in[0], s = c->in[1];
    ir_dtype t = ir_grad_dtype(c, x);
    int zero = ir_grad_scalar(c, t, 0.0);
    int neg = ir_grad_op2(c, IR_OP_Less, x, zero);
    if (ir_grad_needs(c, 0)) {
        int ds = ir_grad_op2(c, IR_OP_Mul, dy, s);
        ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_Where, 3, (int[]){neg, ds, dy}, 0, NULL));
    }
    if (ir_grad_needs(c, 1)) {
        int dx = ir_grad_op2(c, IR_OP_Mul, dy, x);
        ir_grad_accumulate(c, 1, ir_grad_op(c, IR_OP_Where, 3, (int[]){neg, dx, zero}, 0, NULL));
    }
    return ir_grad_status(c);
}

static ir_status mean_grad(ir_grad_ctx *c) {
    int g = ir_grad_scale(c, ir_grad_gout(c, 0), 1.0 / c->n_in);
    for (int i = 0; i < c->n_in; i++) ir_grad_accumulate(c, i, g);
    return ir_grad_status(c);
}

IR_OP_DEF(PRelu, 2, 2, 1, 1, .flags = IR_OPF_ELEMENTWISE, .infer = prelu_infer,
          .flops = prelu_flops, .kernel = prelu_kernel, .grad = prelu_grad,
          .dims = ir_dims_elementwise);
IR_OP_DEF(Mean, 1, PM_MAX_IN, 1, 1, .flags = IR_OPF_ELEMENTWISE, .infer = mean_infer,
          .flops = mean_flops, .kernel = mean_kernel, .grad = mean_grad,
          .dims = ir_dims_elementwise);
