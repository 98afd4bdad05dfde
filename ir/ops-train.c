/* ops-train.c - magpie-domain ops that training graphs add (ir-autodiff.h): fused backward
 * kernels of element-wise activations, Dropout and Gather/GatherElements, the softmax
 * cross-entropy loss with its backward, and the in-place optimizer updates.
 *
 * Every kernel runs float32 and float64 (float64 serves the finite-difference tests).
 * UnaryGrad(dY, T) computes dY * f'(.) for the forward op named by its `op` attribute, where T
 * is the forward input X or output Y, whichever PyTorch's own backward reads (Y for Relu,
 * Sigmoid, Tanh, Exp, Sqrt, Reciprocal; X for the rest), so the same tensor is kept alive.
 * The update ops are IR_OPF_INPLACE: output k is written over input k's buffer, and each
 * element is read before it is written at the same index, so the kernels work aliased or not.
 * Adam follows torch.optim.Adam (1.13, single-tensor): denom = sqrt(v)/sqrt(1-b2^t) + eps,
 * p -= lr/(1-b1^t) * m/denom. */
#include "ir-impl.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- shared helpers */

static ir_status need_float(const ir_node *n, const ir_value *v, const char *what, ir_diag *d) {
    if (ir_dtype_is_float(v->dtype)) return IR_OK;
    return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "%s is %s; expected a float type", what,
                        ir_dtype_name(v->dtype));
}

static ir_status need_same(const ir_node *n, const ir_value *a, const ir_value *b, const char *what,
                           ir_diag *d) {
    char s1[128], s2[128];
    if (a->dtype == b->dtype && ir_shape_eq(&a->shape, &b->shape)) return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "%s is %s %s, expected %s %s", what,
                        ir_dtype_name(b->dtype), ir_shape_str(&b->shape, s1, sizeof s1),
                        ir_dtype_name(a->dtype), ir_shape_str(&a->shape, s2, sizeof s2));
}

static inline int64_t idx_at(const ir_tensor *t, int64_t j) {
    return t->dtype == IR_I64 ? ((const int64_t *)t->data)[j] : ((const int32_t *)t->data)[j];
}

static double flops_out_numel(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
}

/* ---------------------------------------------------------------- UnaryGrad */

typedef enum ug_kind {
    UG_RELU,
    UG_LEAKYRELU,
    UG_SIGMOID,
    UG_HARDSIGMOID,
    UG_HARDSWISH,
    UG_TANH,
    UG_ERF,
    UG_EXP,
    UG_LOG,
    UG_SQRT,
    UG_ABS,
    UG_RECIPROCAL,
    UG_SOFTPLUS,
    UG_ELU,
    UG_CLIP,
    UG_GELU,
    UG_SIN,
    UG_COS,
    UG_SOFTSIGN,
    UG_SELU,
    UG_CELU,
    UG_MISH,
    UG_COUNT,
} ug_kind;

static const char *const ug_names[UG_COUNT] = {
    "Relu", "LeakyRelu", "Sigmoid",  "HardSigmoid", "HardSwish", "Tanh", "Erf",  "Exp",
    "Log",  "Sqrt",      "Abs",      "Reciprocal",  "Softplus",  "Elu",  "Clip", "Gelu",
    "Sin",  "Cos",       "Softsign", "Selu",        "Celu",      "Mish",
};

static int ug_find(const char *op) {
    for (int k = 0; op && k < UG_COUNT; k++)
        if (strcmp(ug_names[k], op) == 0) return k;
    return -1;
}

typedef struct ug_params {
    double alpha, beta, gamma, lo, hi;
    bool tanh; /* Gelu's approximate="tanh" */
} ug_params;

/* d/dx of x * Phi(x) = Phi(x) + x phi(x), or of tanh's approximation 0.5 x (1 + tanh(u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3). */
static inline double gelu_deriv(double x, bool tanh_form) {
    if (!tanh_form)
        return 0.5 * (1 + erf(x * 0.70710678118654752440)) +
               x * exp(-0.5 * x * x) * 0.39894228040143267794; /* 1/sqrt(2 pi) */
    const double k = 0.79788456080286535588, t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

/* f'(.) given T (X or Y, see the file comment). */
static inline double ug_deriv(int k, double t, const ug_params *p) {
    switch (k) {
    case UG_RELU: return t > 0 ? 1.0 : 0.0;
    case UG_LEAKYRELU: return t > 0 ? 1.0 : p->alpha;
    case UG_SIGMOID: return t * (1.0 - t);
    case UG_HARDSIGMOID: {
        double z = p->alpha * t + p->beta;
        return (z > 0 && z < 1) ? p->alpha : 0.0;
    }
    case UG_HARDSWISH: return t < -3 ? 0.0 : t <= 3 ? t / 3.0 + 0.5 : 1.0;
    case UG_TANH: return 1.0 - t * t;
    case UG_ERF: return 1.1283791670955126 * exp(-t * t); /* 2/sqrt(pi) */
    case UG_EXP: return t;
    case UG_LOG: return 1.0 / t;
    case UG_SQRT: return 0.5 / t;
    case UG_ABS: return t > 0 ? 1.0 : t < 0 ? -1.0 : 0.0;
    case UG_RECIPROCAL: return -t * t;
    case UG_SOFTPLUS: return 1.0 / (1.0 + exp(-t));
    case UG_ELU: return t > 0 ? 1.0 : p->alpha * exp(t);
    case UG_CLIP: return (t > p->lo && t < p->hi) ? 1.0 : 0.0; /* hardtanh's strict bounds */
    case UG_GELU: return gelu_deriv(t, p->tanh);
    case UG_SIN: return cos(t);
    case UG_COS: return -sin(t);
    case UG_SOFTSIGN: return 1.0 / ((1 + fabs(t)) * (1 + fabs(t)));
    case UG_SELU: return t > 0 ? p->gamma : p->gamma * p->alpha * exp(t);
    case UG_CELU: return t > 0 ? 1.0 : exp(t / p->alpha);
    case UG_MISH: { /* tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x) */
        double sp = (t > 0 ? t : 0) + log1p(exp(-fabs(t))), th = tanh(sp);
        return th + t * (1 - th * th) / (1 + exp(-t));
    }
    default: return 0.0;
    }
}

static ir_status ug_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *t = ir_node_in(g, n, 1);
    if (ug_find(ir_attr_str(n, "op", NULL)) < 0)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "unknown forward op '%s'",
                            ir_attr_str(n, "op", ""));
    ir_status st = need_float(n, dy, "dY", d);
    if (st == IR_OK) st = need_same(n, dy, t, "the forward tensor", d);
    if (st == IR_OK) ir_set_out(g, n, 0, dy->dtype, &dy->shape);
    return st;
}

static ir_status ug_kernel(const ir_kernel_ctx *k) {
    int kind = ug_find(ir_attr_str(k->node, "op", NULL));
    ug_params p = {.alpha = ir_attr_float(k->node, "alpha",
                                          kind == UG_HARDSIGMOID ? 0.2f
                                          : kind == UG_LEAKYRELU ? 0.01f
                                          : kind == UG_SELU      ? 1.67326319217681884765625f
                                                                 : 1.0f),
                   .gamma = ir_attr_float(k->node, "gamma", 1.05070102214813232421875f),
                   .beta = ir_attr_float(k->node, "beta", 0.5f),
                   .lo = ir_attr_float(k->node, "min", -INFINITY),
                   .hi = ir_attr_float(k->node, "max", INFINITY),
                   .tanh = strcmp(ir_attr_str(k->node, "approximate", "none"), "tanh") == 0};
    const ir_tensor *dy = &k->in[0], *t = &k->in[1];
    ir_dtype dt = dy->dtype;
    int64_t n = ir_tensor_numel(dy);
    IR_PARALLEL_FOR(n > IR_PAR_MIN / 4)
    for (int64_t i = 0; i < n; i++)
        IR_ST_F(dt, k->out[0].data, i,
                IR_LD_F(dt, dy->data, i) * ug_deriv(kind, IR_LD_F(dt, t->data, i), &p));
    return IR_OK;
}

/* ---------------------------------------------------------------- DropoutGrad */

static ir_status dg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *m = ir_node_in(g, n, 1);
    char s1[128];
    ir_status st = need_float(n, dy, "dY", d);
    if (st != IR_OK) return st;
    if (m->dtype != IR_BOOL || !ir_shape_eq(&m->shape, &dy->shape))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "mask is %s %s, expected bool of dY's shape",
                            ir_dtype_name(m->dtype), ir_shape_str(&m->shape, s1, sizeof s1));
    ir_set_out(g, n, 0, dy->dtype, &dy->shape);
    return IR_OK;
}

static ir_status dg_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *dy = &k->in[0];
    const uint8_t *m = k->in[1].data;
    double scale = ir_attr_float(k->node, "scale", 1.0f);
    int64_t n = ir_tensor_numel(dy);
    IR_PARALLEL_FOR(n > IR_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        IR_ST_F(dy->dtype, k->out[0].data, i, m[i] ? IR_LD_F(dy->dtype, dy->data, i) * scale : 0.0);
    return IR_OK;
}

/* ---------------------------------------------------------------- GatherGrad, GatherElementsGrad
 */

/* Output: zeros of the forward data's shape (attribute `shape`), into which dY is summed at the
 * gathered positions. */
static ir_status gg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *ix = ir_node_in(g, n, 1);
    const int64_t *dims;
    int r = ir_attr_ints(n, "shape", &dims), axis;
    ir_status st = need_float(n, dy, "dY", d);
    if (st != IR_OK) return st;
    if (ix->dtype != IR_I64 && ix->dtype != IR_I32)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "indices are %s, not int64 or int32",
                            ir_dtype_name(ix->dtype));
    if (r < 1 || r > IR_MAX_RANK || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "bad shape/axis attributes");
    ir_shape s = ir_shape_make(r, dims), want = {0};
    if (n->op == IR_OP_GatherGrad) {
        want.rank = r - 1 + ix->shape.rank;
        if (want.rank > IR_MAX_RANK)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "rank %d exceeds %d", want.rank,
                                IR_MAX_RANK);
        int o = 0;
        for (int i = 0; i < axis; i++) want.dims[o++] = dims[i];
        for (int i = 0; i < ix->shape.rank; i++) want.dims[o++] = ix->shape.dims[i];
        for (int i = axis + 1; i < r; i++) want.dims[o++] = dims[i];
    } else {
        want = ix->shape;
    }
    if (!ir_shape_eq(&want, &dy->shape)) {
        char s1[128], s2[128];
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY is %s, expected %s",
                            ir_shape_str(&dy->shape, s1, sizeof s1),
                            ir_shape_str(&want, s2, sizeof s2));
    }
    ir_set_out(g, n, 0, dy->dtype, &s);
    return IR_OK;
}

static ir_status bad_index(const ir_kernel_ctx *k, int64_t v, int64_t j, int64_t dim) {
    return ir_node_fail(k->diag, IR_ERR_INVALID, k->node,
                        "index %lld (at position %lld) is out of range for size %lld", (long long)v,
                        (long long)j, (long long)dim);
}

static ir_status gg_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *dy = &k->in[0], *ix = &k->in[1];
    ir_tensor *out = &k->out[0];
    ir_dtype t = dy->dtype;
    int axis = 0; /* shape inference checked the axis */
    ir_norm_axis(ir_attr_int(k->node, "axis", 0), out->shape.rank, &axis);
    int64_t dim = out->shape.dims[axis], outer = 1, inner = 1, cnt = ir_tensor_numel(ix);
    for (int i = 0; i < axis; i++) outer *= out->shape.dims[i];
    for (int i = axis + 1; i < out->shape.rank; i++) inner *= out->shape.dims[i];
    for (int64_t j = 0; j < cnt; j++) {
        int64_t v = idx_at(ix, j);
        if (v < -dim || v >= dim) return bad_index(k, v, j, dim);
    }
    /* accumulating (a fused FissionAccumulate's part): the rows add into the buffer as it is */
    if (!k->accumulate) memset(out->data, 0, (size_t)ir_tensor_numel(out) * ir_dtype_size(t));
    /* Parallel over outer rows: different rows never write the same output element. */
    IR_PARALLEL_FOR(outer > 1 && outer * cnt * inner > IR_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < cnt; j++) {
            int64_t v = idx_at(ix, j);
            if (v < 0) v += dim;
            int64_t src = (o * cnt + j) * inner, dst = (o * dim + v) * inner;
            if (t == IR_F32) {
                float *po = (float *)out->data + dst;
                const float *pi = (const float *)dy->data + src;
                for (int64_t i = 0; i < inner; i++) po[i] += pi[i];
            } else {
                double *po = (double *)out->data + dst;
                const double *pi = (const double *)dy->data + src;
                for (int64_t i = 0; i < inner; i++) po[i] += pi[i];
            }
        }
    return IR_OK;
}

static ir_status gge_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *dy = &k->in[0], *ix = &k->in[1];
    ir_tensor *out = &k->out[0];
    ir_dtype t = dy->dtype;
    int axis = 0, r = out->shape.rank;
    if (!ir_norm_axis(ir_attr_int(k->node, "axis", 0), r, &axis)) /* inference checked it */
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "axis out of range");
    int64_t dim = out->shape.dims[axis], cnt = ir_tensor_numel(ix);
    int64_t ost[IR_MAX_RANK], ist[IR_MAX_RANK];
    ir_shape_strides(&out->shape, ost);
    ir_shape_strides(&ix->shape, ist);
    for (int64_t j = 0; j < cnt; j++) {
        int64_t v = idx_at(ix, j);
        if (v < -dim || v >= dim) return bad_index(k, v, j, dim);
    }
    memset(out->data, 0, (size_t)ir_tensor_numel(out) * ir_dtype_size(t));
    for (int64_t j = 0; j < cnt; j++) {
        int64_t rem = j, dst = 0;
        for (int a = 0; a < r; a++) {
            int64_t c = rem / ist[a];
            rem %= ist[a];
            if (a == axis) {
                c = idx_at(ix, j);
                if (c < 0) c += dim;
            }
            dst += c * ost[a];
        }
        IR_ST_F(t, out->data, dst, IR_LD_F(t, out->data, dst) + IR_LD_F(t, dy->data, j));
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- SoftmaxCrossEntropy */

/* Positions: every index of labels; classes: the logits' last axis. Labels equal to
 * ignore_index (PyTorch's default -100) count neither in the sum nor in the mean. */
typedef struct sce_geom {
    int64_t rows, C;
} sce_geom;

static ir_status sce_check(const ir_graph *g, const ir_node *n, const ir_value *x,
                           const ir_value *lab, ir_diag *d) {
    char s1[128], s2[128];
    ir_status st = need_float(n, x, "logits", d);
    if (st != IR_OK) return st;
    bool ok = (lab->dtype == IR_I64 || lab->dtype == IR_I32) && x->shape.rank >= 1 &&
              lab->shape.rank == x->shape.rank - 1;
    for (int i = 0; ok && i < lab->shape.rank; i++) ok = lab->shape.dims[i] == x->shape.dims[i];
    if (!ok)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "labels are %s %s; expected int64 of the logits' shape %s without "
                            "its last axis",
                            ir_dtype_name(lab->dtype), ir_shape_str(&lab->shape, s1, sizeof s1),
                            ir_shape_str(&x->shape, s2, sizeof s2));
    return IR_OK;
}

/* reduction "mean" (the default: the mean over the counted positions, as PyTorch's
 * cross_entropy) or "sum" (their sum; SoftmaxCrossEntropyGrad then scales by dLoss alone). A
 * sum splits over the batch, a mean does not: ir_build_training emits the sum and divides by
 * the count of the whole batch itself (ir-train.c). */
static bool sce_is_sum(const ir_node *n) {
    return strcmp(ir_attr_str(n, "reduction", "mean"), "sum") == 0;
}

static ir_status sce_check_reduction(const ir_node *n, ir_diag *d) {
    const char *r = ir_attr_str(n, "reduction", "mean");
    if (strcmp(r, "mean") && strcmp(r, "sum"))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "reduction '%s' (expected mean or sum)", r);
    return IR_OK;
}

static sce_geom sce_geom_of(const ir_shape *x) {
    sce_geom s = {.C = x->dims[x->rank - 1]};
    s.rows = s.C ? ir_shape_numel(x) / s.C : 0;
    return s;
}

static ir_status sce_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *lab = ir_node_in(g, n, 1);
    ir_status st = sce_check(g, n, x, lab, d);
    if (st == IR_OK) st = sce_check_reduction(n, d);
    if (st != IR_OK) return st;
    ir_shape scalar = {0};
    ir_set_out(g, n, 0, x->dtype, &scalar);
    if (n->n_out > 1) ir_set_out(g, n, 1, x->dtype, &x->shape);
    return IR_OK;
}

static ir_status sce_label(const ir_kernel_ctx *k, const ir_tensor *lab, int64_t r, int64_t C,
                           int64_t ignore, int64_t *out) {
    int64_t v = idx_at(lab, r);
    if (v != ignore && (v < 0 || v >= C))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node,
                            "label %lld (at position %lld) is out of range for %lld classes",
                            (long long)v, (long long)r, (long long)C);
    *out = v;
    return IR_OK;
}

static ir_status sce_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *lab = &k->in[1];
    ir_dtype t = x->dtype;
    sce_geom s = sce_geom_of(&x->shape);
    int64_t ignore = ir_attr_int(k->node, "ignore_index", -100), count = 0;
    void *lp = k->n_out > 1 ? k->out[1].data : NULL;
    double sum = 0;
    for (int64_t r = 0; r < s.rows; r++) {
        int64_t y = 0;
        ir_status st = sce_label(k, lab, r, s.C, ignore, &y);
        if (st != IR_OK) return st;
        double mx = -INFINITY, z = 0;
        for (int64_t c = 0; c < s.C; c++) mx = fmax(mx, IR_LD_F(t, x->data, r * s.C + c));
        for (int64_t c = 0; c < s.C; c++) z += exp(IR_LD_F(t, x->data, r * s.C + c) - mx);
        double lse = mx + log(z);
        if (lp)
            for (int64_t c = 0; c < s.C; c++)
                IR_ST_F(t, lp, r * s.C + c, IR_LD_F(t, x->data, r * s.C + c) - lse);
        if (y == ignore) continue;
        sum += lse - IR_LD_F(t, x->data, r * s.C + y);
        count++;
    }
    /* a mean is NaN when every label is ignored, as in PyTorch */
    IR_ST_F(t, k->out[0].data, 0, sce_is_sum(k->node) ? sum : sum / (double)count);
    return IR_OK;
}

static ir_status sceg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dl = ir_node_in(g, n, 0), *lp = ir_node_in(g, n, 1), *lab = ir_node_in(g, n, 2);
    ir_status st = sce_check(g, n, lp, lab, d);
    if (st == IR_OK) st = sce_check_reduction(n, d);
    if (st != IR_OK) return st;
    if (dl->dtype != lp->dtype || ir_shape_numel(&dl->shape) != 1)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dLoss must be a %s scalar",
                            ir_dtype_name(lp->dtype));
    ir_set_out(g, n, 0, lp->dtype, &lp->shape);
    return IR_OK;
}

static ir_status sceg_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *dl = &k->in[0], *lp = &k->in[1], *lab = &k->in[2];
    ir_dtype t = lp->dtype;
    sce_geom s = sce_geom_of(&lp->shape);
    int64_t ignore = ir_attr_int(k->node, "ignore_index", -100), count = 0;
    for (int64_t r = 0; r < s.rows; r++) {
        int64_t y = 0;
        ir_status st = sce_label(k, lab, r, s.C, ignore, &y);
        if (st != IR_OK) return st;
        count += y != ignore;
    }
    double scale = IR_LD_F(t, dl->data, 0) / (sce_is_sum(k->node) ? 1.0 : (double)count);
    for (int64_t r = 0; r < s.rows; r++) {
        int64_t y = idx_at(lab, r);
        for (int64_t c = 0; c < s.C; c++) {
            int64_t i = r * s.C + c;
            double v = y == ignore ? 0.0 : scale * (exp(IR_LD_F(t, lp->data, i)) - (c == y));
            IR_ST_F(t, k->out[0].data, i, v);
        }
    }
    return IR_OK;
}

static double sce_flops(const ir_graph *g, const ir_node *n) {
    return IR_FLOPS_TRANSCENDENTAL * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}
static double sceg_flops(const ir_graph *g, const ir_node *n) {
    return (IR_FLOPS_TRANSCENDENTAL + 2) * flops_out_numel(g, n);
}

/* ---------------------------------------------------------------- optimizer updates */

/* Inputs (param, state..., grad); outputs (param', state'...), output k shaped as input k. */
static ir_status upd_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *p = ir_node_in(g, n, 0);
    ir_status st = need_float(n, p, "the parameter", d);
    for (int i = 1; i < n->n_in && st == IR_OK; i++)
        st = need_same(n, p, ir_node_in(g, n, i), i == n->n_in - 1 ? "the gradient" : "a state", d);
    if (st == IR_OK && n->n_out != n->n_in - 1)
        st = ir_node_fail(d, IR_ERR_INVALID, n, "has %d outputs, expected %d", n->n_out,
                          n->n_in - 1);
    for (int i = 0; i < n->n_out && st == IR_OK; i++) ir_set_out(g, n, i, p->dtype, &p->shape);
    return st;
}

static ir_status sgd_kernel(const ir_kernel_ctx *k) {
    ir_dtype t = k->in[0].dtype;
    double lr = ir_attr_float(k->node, "lr", 0.01f);
    int64_t n = ir_tensor_numel(&k->in[0]);
    const void *p = k->in[0].data, *gr = k->in[1].data;
    void *po = k->out[0].data;
    for (int64_t i = 0; i < n; i++) IR_ST_F(t, po, i, IR_LD_F(t, p, i) - lr * IR_LD_F(t, gr, i));
    return IR_OK;
}

static ir_status momentum_kernel(const ir_kernel_ctx *k) {
    ir_dtype t = k->in[0].dtype;
    double lr = ir_attr_float(k->node, "lr", 0.01f), mu = ir_attr_float(k->node, "momentum", 0.9f);
    int64_t n = ir_tensor_numel(&k->in[0]);
    const void *p = k->in[0].data, *b = k->in[1].data, *gr = k->in[2].data;
    void *po = k->out[0].data, *bo = k->out[1].data;
    for (int64_t i = 0; i < n; i++) {
        double nb = mu * IR_LD_F(t, b, i) + IR_LD_F(t, gr, i);
        if (t == IR_F32) nb = (float)nb; /* PyTorch stores the buffer, then reads it back */
        IR_ST_F(t, bo, i, nb);
        IR_ST_F(t, po, i, IR_LD_F(t, p, i) - lr * nb);
    }
    return IR_OK;
}

static ir_status adam_kernel(const ir_kernel_ctx *k) {
    ir_dtype t = k->in[0].dtype;
    double lr = ir_attr_float(k->node, "lr", 0.01f), b1 = ir_attr_float(k->node, "beta1", 0.9f),
           b2 = ir_attr_float(k->node, "beta2", 0.999f),
           eps = ir_attr_float(k->node, "epsilon", 1e-8f);
    double step = (double)ir_attr_int(k->node, "step", 1);
    double bc1 = 1 - pow(b1, step), bc2s = sqrt(1 - pow(b2, step)), step_size = lr / bc1;
    int64_t n = ir_tensor_numel(&k->in[0]);
    const void *p = k->in[0].data, *m = k->in[1].data, *v = k->in[2].data, *gr = k->in[3].data;
    void *po = k->out[0].data, *mo = k->out[1].data, *vo = k->out[2].data;
    for (int64_t i = 0; i < n; i++) {
        double gi = IR_LD_F(t, gr, i);
        double nm = b1 * IR_LD_F(t, m, i) + (1 - b1) * gi,
               nv = b2 * IR_LD_F(t, v, i) + (1 - b2) * gi * gi;
        if (t == IR_F32) { /* the state is stored in float32 before the update reads it */
            nm = (float)nm;
            nv = (float)nv;
        }
        IR_ST_F(t, mo, i, nm);
        IR_ST_F(t, vo, i, nv);
        IR_ST_F(t, po, i, IR_LD_F(t, p, i) - step_size * nm / (sqrt(nv) / bc2s + eps));
    }
    return IR_OK;
}

static double upd_flops(const ir_graph *g, const ir_node *n) {
    static const double per[] = {2, 4, 12}; /* SGD, Momentum, Adam per element */
    int k = n->op == IR_OP_SGDUpdate ? 0 : n->op == IR_OP_MomentumUpdate ? 1 : 2;
    return per[k] * flops_out_numel(g, n);
}

/* A produced input is taken over only when its buffer is the device's and nobody needs its value
 * at the end: a graph output keeps its own bytes, and a host value (Store's) is no device buffer
 * to write in; both leave output k an ordinary allocation. So does an input that is a view or
 * that a graph output views (ir-alias.c). */
int ir_inplace_input(const ir_graph *g, int v, const uint8_t *viewed) {
    int p = g->values[v].producer;
    if (p < 0) return -1;
    const ir_node *n = &g->nodes[p];
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !(def->flags & IR_OPF_INPLACE)) return -1;
    for (int k = 0; k < n->n_out && k < n->n_in; k++) {
        if (n->out[k] != v) continue;
        int in = n->in[k];
        const ir_value *iv = in >= 0 ? &g->values[in] : NULL;
        if (!iv || ir_view_blocks_inplace(g, in, viewed)) return -1;
        if (iv->producer < 0) return ((iv->flags & IR_VF_INPUT) || iv->blob) ? in : -1;
        if ((iv->flags & IR_VF_OUTPUT) || ir_value_on_host(g, in)) return -1;
        return in;
    }
    return -1;
}

int ir_value_inplace_of(const ir_graph *g, int v) {
    return ir_inplace_input(g, v, NULL);
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink). UnaryGrad and DropoutGrad are element-wise over operands of one shape
 * (ir_dims_elementwise). */

/* GatherGrad (dY, indices -> dData): dY's dims around the indices' dims keep their place in the
 * data's shape; each dim of the indices, with its place in dY, is a sum (one reduce axis per dim):
 * the rows gathered by a part of the indices add into the whole dData. The axis of dData gets no
 * link. GatherElementsGrad (dY, indices alike): the axis is the sum; each other dim links from dY
 * and the indices where dData is as long (elsewhere the parts would not line up). */
static int gg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *ds = &ir_node_out(g, n, 0)->shape, *is = &ir_node_in(g, n, 1)->shape;
    int r = ds->rank, q = is->rank, axis;
    if (r == 0 || !ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    if (n->op == IR_OP_GatherGrad) {
        for (int i = 0; i < r; i++)
            if (i != axis) ir_dims_keep(&o, 0, i < axis ? i : q + i - 1, 0, i);
        for (int j = 0; j < q; j++) {
            ir_dims_reduce(&o, 0, axis + j, j + 1, true);
            ir_dims_reduce(&o, 1, j, j + 1, true);
        }
        return ir_dims_end(&o);
    }
    if (q != r) return 0;
    for (int i = 0; i < r; i++) {
        if (i == axis) {
            ir_dims_reduce(&o, 0, i, 1, true);
            ir_dims_reduce(&o, 1, i, 1, true);
        } else if (ds->dims[i] == is->dims[i]) {
            ir_dims_keep(&o, 0, i, 0, i);
            ir_dims_keep(&o, 1, i, 0, i);
        }
    }
    return ir_dims_end(&o);
}

/* SoftmaxCrossEntropy (logits, labels -> loss[, log-probabilities]): every position (each dim
 * but the classes) links from the logits and the labels to the log-probabilities, and to a reduce
 * axis of its own for the loss: a sum with reduction "sum"; a mean over the counted positions,
 * not a sum, by default. The classes get no link (each row normalizes over them). */
static int sce_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    int r = ir_node_in(g, n, 0)->shape.rank;
    bool lp = ir_node_out(g, n, 1) != NULL, sum = sce_is_sum(n);
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < r - 1; i++)
        for (int in = 0; in < 2; in++) {
            if (lp) ir_dims_keep(&o, in, i, 1, i);
            ir_dims_reduce(&o, in, i, i + 1, sum);
        }
    return ir_dims_end(&o);
}

/* SoftmaxCrossEntropyGrad (dLoss, log-probabilities, labels -> dLogits): with reduction "sum"
 * each element depends on its own log-probability and its row's label, so every dim links from
 * the log-probabilities and the positions from the labels (dLoss is a shared scalar). By
 * default it has none: every element is scaled by 1 / (the count of non-ignored labels of the
 * whole batch), which a part cannot know. */
static int sceg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    int r = ir_node_in(g, n, 1)->shape.rank;
    ir_dims_out o = ir_dims_begin(l);
    if (!sce_is_sum(n)) return ir_dims_end(&o);
    for (int i = 0; i < r; i++) {
        ir_dims_keep(&o, 1, i, 0, i);
        if (i < r - 1) ir_dims_keep(&o, 2, i, 0, i);
    }
    return ir_dims_end(&o);
}

/* The updates: element-wise over operands of the parameter's shape. Each output links from the
 * inputs it reads: SGD p' (p, g); Momentum b' (b, g) and p' (p, b, g); Adam m' (m, g), v' (v, g)
 * and p' (every input). Fission refuses in-place nodes anyway. */
static int upd_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    int r = ir_node_in(g, n, 0)->shape.rank, grad = n->n_in - 1;
    ir_dims_out o = ir_dims_begin(l);
    for (int d = 0; d < r; d++) {
        for (int in = 0; in < n->n_in; in++) ir_dims_keep(&o, in, d, 0, d);
        for (int k = 1; k < n->n_out; k++) {
            ir_dims_keep(&o, k, d, k, d);
            ir_dims_keep(&o, grad, d, k, d);
        }
    }
    return ir_dims_end(&o);
}

/* ---------------------------------------------------------------- the op table entries */

static double ug_flops(const ir_graph *g, const ir_node *n) {
    return 2 * flops_out_numel(g, n);
}

#define TRAIN_DEF(name_, lo_in, hi_in, lo_out, hi_out, flags_, infer_, flops_, kernel_, dims_)     \
    IR_MAGPIE_OP_DEF(name_, lo_in, hi_in, lo_out, hi_out, .flags = (flags_), .infer = infer_,      \
                     .flops = flops_, .kernel = kernel_, .dims = dims_);

TRAIN_DEF(UnaryGrad, 2, 2, 1, 1, IR_OPF_ELEMENTWISE, ug_infer, ug_flops, ug_kernel,
          ir_dims_elementwise)
TRAIN_DEF(DropoutGrad, 2, 2, 1, 1, IR_OPF_ELEMENTWISE, dg_infer, ug_flops, dg_kernel,
          ir_dims_elementwise)
TRAIN_DEF(GatherGrad, 2, 2, 1, 1, 0, gg_infer, flops_out_numel, gg_kernel, gg_dims)
TRAIN_DEF(GatherElementsGrad, 2, 2, 1, 1, 0, gg_infer, flops_out_numel, gge_kernel, gg_dims)
TRAIN_DEF(SoftmaxCrossEntropy, 2, 2, 1, 2, 0, sce_infer, sce_flops, sce_kernel, sce_dims)
TRAIN_DEF(SoftmaxCrossEntropyGrad, 3, 3, 1, 1, 0, sceg_infer, sceg_flops, sceg_kernel, sceg_dims)
TRAIN_DEF(SGDUpdate, 2, 2, 1, 1, IR_OPF_ELEMENTWISE | IR_OPF_INPLACE, upd_infer, upd_flops,
          sgd_kernel, upd_dims)
TRAIN_DEF(MomentumUpdate, 3, 3, 2, 2, IR_OPF_ELEMENTWISE | IR_OPF_INPLACE, upd_infer, upd_flops,
          momentum_kernel, upd_dims)
TRAIN_DEF(AdamUpdate, 4, 4, 3, 3, IR_OPF_ELEMENTWISE | IR_OPF_INPLACE, upd_infer, upd_flops,
          adam_kernel, upd_dims)
