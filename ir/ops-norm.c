/* ops-norm.c - BatchNormalization (inference and training), LayerNormalization (opset 17),
 * InstanceNormalization, Softmax and LogSoftmax.
 *
 * BatchNormalization trains when training_mode=1 (opsets 14/15), or, for the opset-9 form that
 * has no such attribute, when it has more than one output. Training normalizes with the batch
 * mean and the biased (population) batch variance and updates the running variance with that
 * same biased variance, as the ONNX spec (BatchNormalization-15, "ReduceVar refers to the
 * population variance") and its reference implementation say. PyTorch's own update uses the
 * unbiased variance, so exported running_var outputs differ from PyTorch's buffers by a factor
 * n/(n-1) on the batch term; Y does not. The opset-9 form's saved_mean/saved_var outputs get the
 * batch mean and biased batch variance.
 *
 * Softmax/LogSoftmax use opset-13 semantics (one axis, default -1); graphs below opset 13 get
 * the old semantics (default axis 1, the input coerced to 2-D at axis). All statistics are
 * accumulated in double. Kernels run float32 and float64, one template (ops-norm-kern.h). */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

/* Row helpers are IR_HOT_CLONES; their float sums are IR_SIMD_REDUCE (reassociation is fine for
 * these). */

/* e^x as plain arithmetic the compiler vectorizes (expf is one libm call per element): Cephes'
 * expf, x = n ln2 + r with a degree-5 polynomial for e^r and 2^n built in the exponent bits;
 * about 1 ulp on [-87, 88], inputs clamped to it. */
static inline float exp_approx_f32(float x) {
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* round to nearest by adding 1.5 * 2^23: floorf would keep the loop from vectorizing */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23}; /* a union, not memcpy: that one vectorizes */
    return p * scale.f;
}
/* The float64 instance computes the reference: libm's exp. */
static inline double exp_approx_f64(double x) {
    return exp(x);
}

static ir_status check_float_input(const ir_graph *g, const ir_node *n, int i, ir_diag *d) {
    const ir_value *v = ir_node_in(g, n, i);
    if (v && !ir_dtype_is_float(v->dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d has dtype %s; expected a float type", i,
                            ir_dtype_name(v->dtype));
    return IR_OK;
}

/* ---------------------------------------------------------------- BatchNormalization */

bool ir_bn_training(const ir_node *n) {
    int64_t tm = ir_attr_int(n, "training_mode", -1);
    if (tm >= 0) return tm != 0;
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) return true;
    return false;
}

/* Inputs of BatchNormalization and InstanceNormalization: X of rank >= min_rank (N, C, ...)
 * and n_in - 1 per-channel parameters (scale, B, mean, var) of shape [C], all float. */
static ir_status check_channel_inputs(const ir_graph *g, const ir_node *n, int min_rank, int n_in,
                                      ir_diag *d) {
    static const char *const names[5] = {"X", "scale", "B", "mean", "var"};
    const ir_value *x = ir_node_in(g, n, 0);
    char buf[96];
    if (x->shape.rank < min_rank)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s; expected rank >= %d (N,C,...)",
                            ir_shape_str(&x->shape, buf, sizeof buf), min_rank);
    int64_t C = x->shape.dims[1];
    for (int i = 0; i < n_in; i++) {
        ir_status st = check_float_input(g, n, i, d);
        if (st) return st;
        const ir_value *v = ir_node_in(g, n, i);
        if (i && (v->shape.rank != 1 || v->shape.dims[0] != C))
            return ir_node_fail(d, IR_ERR_SHAPE, n, "%s has shape %s; expected [%lld]", names[i],
                                ir_shape_str(&v->shape, buf, sizeof buf), (long long)C);
    }
    return IR_OK;
}

static ir_status bn_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    ir_status st = check_channel_inputs(g, n, 2, 5, d);
    if (st) return st;
    int64_t C = x->shape.dims[1];
    bool train = ir_bn_training(n);
    int extra = 0;
    for (int i = 1; i < n->n_out; i++) extra += n->out[i] >= 0;
    if (!train && extra)
        return ir_node_fail(d, IR_ERR_INVALID, n, "extra outputs need training_mode=1");
    if (n->n_out > 3 && ir_attr_find(n, "training_mode"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "BatchNormalization-14/15 has at most 3 outputs");
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    ir_shape cs = ir_shape_make(1, &C);
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) ir_set_out(g, n, i, ir_node_in(g, n, 3)->dtype, &cs);
    return IR_OK;
}

static double bn_flops(const ir_graph *g, const ir_node *n) {
    double numel = (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
    return (ir_bn_training(n) ? 5.0 : 2.0) * numel;
}

/* ---------------------------------------------------------------- LayerNormalization */

/* Rows are X.shape[:axis] flattened; each row of `inner` values is normalized. */
static ir_status ln_axis(const ir_shape *xs, const ir_node *n, int *axis, ir_diag *d) {
    if (!ir_norm_axis(ir_attr_int(n, "axis", -1), xs->rank, axis) || xs->rank == 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", -1), xs->rank);
    return IR_OK;
}

static ir_status ln_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int axis = 0;
    ir_status st = ln_axis(&x->shape, n, &axis, d);
    if (st) return st;
    int64_t inner = 1;
    for (int i = axis; i < x->shape.rank; i++) inner *= x->shape.dims[i];
    for (int i = 0; i < 3; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        char buf[96];
        if ((st = check_float_input(g, n, i, d))) return st;
        if (i && v && ir_shape_numel(&v->shape) != inner && ir_shape_numel(&v->shape) != 1)
            return ir_node_fail(
                d, IR_ERR_SHAPE, n, "%s has shape %s; expected the normalized shape (%lld values)",
                i == 1 ? "Scale" : "B", ir_shape_str(&v->shape, buf, sizeof buf), (long long)inner);
    }
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    ir_shape ss = x->shape;
    for (int i = axis; i < ss.rank; i++) ss.dims[i] = 1;
    ir_dtype stash = ir_dtype_from_onnx((int)ir_attr_int(n, "stash_type", 1));
    if (stash == IR_DTYPE_NONE) stash = IR_F32;
    for (int i = 1; i < n->n_out && i < 3; i++)
        if (n->out[i] >= 0) ir_set_out(g, n, i, stash, &ss);
    return IR_OK;
}

static double ln_flops(const ir_graph *g, const ir_node *n) {
    return 7.0 * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

/* ---------------------------------------------------------------- InstanceNormalization */

static ir_status in_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    ir_status st = check_channel_inputs(g, n, 3, 3, d);
    if (st) return st;
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

/* ---------------------------------------------------------------- Softmax, LogSoftmax */

/* Splits X into [outer, len, inner] around the softmax axis (see the file comment for the
 * pre-13 coercion to 2-D). */
ir_status ir_softmax_split(const ir_graph *g, const ir_node *n, const ir_shape *xs, int64_t *outer,
                           int64_t *len, int64_t *inner, ir_diag *d) {
    bool old = g->opset > 0 && g->opset < 13;
    int64_t a = ir_attr_int(n, "axis", old ? 1 : -1);
    int axis = 0;
    if (xs->rank == 0 || !ir_norm_axis(a, xs->rank, &axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)a, xs->rank);
    *outer = *len = *inner = 1;
    for (int i = 0; i < xs->rank; i++) {
        if (i < axis)
            *outer *= xs->dims[i];
        else if (i == axis || old)
            *len *= xs->dims[i];
        else
            *inner *= xs->dims[i];
    }
    return IR_OK;
}

static ir_status sm_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t o, l, i;
    ir_status st = check_float_input(g, n, 0, d);
    if (st || (st = ir_softmax_split(g, n, &x->shape, &o, &l, &i, d))) return st;
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

static double sm_flops(const ir_graph *g, const ir_node *n) {
    return 4.0 * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

#define IR_TMPL "ops-norm-kern.h"
#include "ir-float-tmpl.h"

static ir_status bn_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, bn_kernel);
}
/* X, Scale and B share X's dtype; Mean and InvStdDev have the stash type, which ONNX defaults to
 * float32 whatever X is. */
static ir_status ln_kernel(const ir_kernel_ctx *k) {
    const ir_dtype t = k->in[0].dtype;
    bool ok = t == IR_F32 || t == IR_F64;
    for (int i = 1; i < k->n_in; i++) ok = ok && (!k->in[i].data || k->in[i].dtype == t);
    for (int i = 1; i < k->n_out; i++)
        ok = ok && (!k->out[i].data || k->out[i].dtype == IR_F32 || k->out[i].dtype == IR_F64);
    if (!ok)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "the CPU kernel runs X, Scale and B of one dtype, float32 or float64, "
                            "with a float32 or float64 stash_type; X is %s",
                            ir_dtype_name(t));
    return t == IR_F64 ? ln_kernel_f64(k) : ln_kernel_f32(k);
}
static ir_status in_kernel(const ir_kernel_ctx *k) {
    IR_KERNEL_BY_FLOAT(k, in_kernel);
}
static ir_status sm_run(const ir_kernel_ctx *k, bool log_sm) {
    ir_dtype t;
    ir_status st = ir_kernel_float(k, &t);
    if (st) return st;
    return t == IR_F64 ? sm_run_f64(k, log_sm) : sm_run_f32(k, log_sm);
}

static ir_status softmax_kernel(const ir_kernel_ctx *k) {
    return sm_run(k, false);
}
static ir_status logsoftmax_kernel(const ir_kernel_ctx *k) {
    return sm_run(k, true);
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink) of BatchNormalization: the channel links from X and every per-channel
 * input to Y and to every [C] output (running and saved statistics). With running statistics
 * (inference) each element is an affine map of itself, so N and the spatial dims link too; in
 * training mode the statistics are over N and the spatial dims, so those get no link. */
static int bn_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (x->shape.rank < 2) return 0;
    bool train = ir_bn_training(n);
    ir_dims_out o = ir_dims_begin(l);
    for (int k = 0; k < n->n_out; k++) {
        if (!ir_node_out(g, n, k)) continue;
        int cd = k == 0 ? 1 : 0; /* Y is [N, C, ...], the statistics [C] */
        ir_dims_keep(&o, 0, 1, k, cd);
        for (int i = 1; i < n->n_in; i++) ir_dims_keep(&o, i, 0, k, cd);
    }
    for (int i = 0; !train && i < x->shape.rank; i++)
        if (i != 1) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

/* LayerNormalization: the dims before `axis` link from X to Y and to Mean and InvStdDev (shaped
 * like X with ones from axis on). The normalized dims get no link at all: every element of Y
 * depends on its whole row. Scale and B are shared by every row and stay unlinked. */
static int ln_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    int axis = 0;
    if (ln_axis(&x->shape, n, &axis, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int k = 0; k < n->n_out; k++)
        if (ir_node_out(g, n, k))
            for (int i = 0; i < axis; i++) ir_dims_keep(&o, 0, i, k, i);
    return ir_dims_end(&o);
}

/* InstanceNormalization: statistics per (n, c) plane, so N and C link (scale and B per channel)
 * and the spatial dims get none. */
static int in_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    if (ir_node_in(g, n, 0)->shape.rank < 3) return 0;
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, 0, 0, 0);
    ir_dims_keep(&o, 0, 1, 0, 1);
    ir_dims_keep(&o, 1, 0, 0, 1);
    ir_dims_keep(&o, 2, 0, 0, 1);
    return ir_dims_end(&o);
}

/* Softmax/LogSoftmax, and their gradients (ops-grad-norm.c, inputs dY and Y): every dim outside
 * the normalized line links from every input to output 0. The line is the axis (opset 13), or
 * every dim from the axis on (the coercion to 2-D of older opsets); it gets no link. */
int ir_dims_softmax(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *xs = &ir_node_in(g, n, n->n_in - 1)->shape;
    bool old = g->opset > 0 && g->opset < 13;
    int axis = 0;
    if (xs->rank == 0 || !ir_norm_axis(ir_attr_int(n, "axis", old ? 1 : -1), xs->rank, &axis))
        return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int in = 0; in < n->n_in; in++)
        for (int i = 0; i < xs->rank; i++)
            if (i < axis || (i > axis && !old)) ir_dims_keep(&o, in, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(BatchNormalization, 5, 5, 1, 5, .infer = bn_infer, .flops = bn_flops, .kernel = bn_kernel,
          .grad = ir_grad_BatchNormalization, .dims = bn_dims);

IR_OP_DEF(LayerNormalization, 2, 3, 1, 3, .infer = ln_infer, .flops = ln_flops, .kernel = ln_kernel,
          .grad = ir_grad_LayerNormalization, .dims = ln_dims);

IR_OP_DEF(InstanceNormalization, 3, 3, 1, 1, .infer = in_infer, .flops = ln_flops,
          .kernel = in_kernel, .grad = ir_grad_InstanceNormalization, .dims = in_dims);

IR_OP_DEF(Softmax, 1, 1, 1, 1, .infer = sm_infer, .flops = sm_flops, .kernel = softmax_kernel,
          .grad = ir_grad_Softmax, .dims = ir_dims_softmax);

IR_OP_DEF(LogSoftmax, 1, 1, 1, 1, .infer = sm_infer, .flops = sm_flops, .kernel = logsoftmax_kernel,
          .grad = ir_grad_LogSoftmax, .dims = ir_dims_softmax);
