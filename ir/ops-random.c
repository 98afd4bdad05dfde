/* ops-random.c - RandomUniform, RandomUniformLike, RandomNormal and RandomNormalLike (ONNX opset
 * 1, 22 adds types only), what Bernoulli's function body draws with.
 *
 * The draws are counter-based, as training-mode Dropout's (ops-unary.c): element i's number
 * depends only on a key and i, never on the thread that computes it. The key is the node name
 * hashed with the run's seed (ir_kernel_ctx.seed), or, when the node has a `seed` attribute, that
 * seed alone: ONNX's seed makes a node's output the same on every run. Uniform: low + (high -
 * low) * u, u in [0, 1) from 53 bits, kept below high after rounding to the output type. Normal:
 * mean + scale * z, z from Box-Muller on two draws of element i. Output dtype: the `dtype`
 * attribute, else the input's (the *Like forms), else float32; float16/bfloat16 go through
 * float32 (ir_node_run). The *Like forms read only their input's shape.
 *
 * IR_OPF_RANDOM: never constant-folded, and no dimension links (a part of a split node would
 * draw other numbers), so fission never splits them (ir_node_draws_random). No gradient. */
#include "ir-impl.h"

#include <math.h>

static bool rnd_normal(const ir_node *n) {
    return n->op == IR_OP_RandomNormal || n->op == IR_OP_RandomNormalLike;
}

static ir_status rnd_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    ir_shape s = {0};
    ir_dtype t = x ? x->dtype : IR_F32;
    if (!x) {
        const int64_t *dims = NULL;
        if (!ir_attr_find(n, "shape"))
            return ir_node_fail(d, IR_ERR_INVALID, n, "the shape attribute is required");
        int r = ir_attr_ints(n, "shape", &dims);
        if (r < 0 || r > IR_MAX_RANK)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "a shape of rank %d (at most %d)", r,
                                IR_MAX_RANK);
        s.rank = r;
        for (int k = 0; k < r; k++) {
            if (dims[k] < 0)
                return ir_node_fail(d, IR_ERR_INVALID, n, "shape[%d] is %lld", k,
                                    (long long)dims[k]);
            s.dims[k] = dims[k];
        }
    } else {
        s = x->shape;
    }
    if (ir_attr_find(n, "dtype")) {
        int64_t od = ir_attr_int(n, "dtype", 1);
        t = ir_dtype_from_onnx((int)od);
        if (t == IR_DTYPE_NONE)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %lld is not supported",
                                (long long)od);
    }
    if (!ir_dtype_is_float(t))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "the output would be %s; expected a float type", ir_dtype_name(t));
    if (!rnd_normal(n) && !(ir_attr_float(n, "low", 0) < ir_attr_float(n, "high", 1)))
        return ir_node_fail(d, IR_ERR_INVALID, n, "low %g is not below high %g",
                            ir_attr_float(n, "low", 0), ir_attr_float(n, "high", 1));
    ir_set_out(g, n, 0, t, &s);
    return IR_OK;
}

static double rnd_flops(const ir_graph *g, const ir_node *n) {
    double e = (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
    return rnd_normal(n) ? 3 * IR_FLOPS_TRANSCENDENTAL * e : 2 * e;
}

/* Only the output is touched: the *Like input's data is never read. */
static double rnd_bytes(const ir_graph *g, const ir_node *n) {
    const ir_value *y = ir_node_out(g, n, 0);
    return (double)ir_shape_numel(&y->shape) * (double)ir_dtype_size(y->dtype);
}

/* Draw j of the key, uniform in [0, 1). */
static inline double rnd_u(uint64_t key, uint64_t j) {
    return (double)(ir_mix64(key + j * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}

static uint64_t rnd_key(const ir_node *n, uint64_t run_seed) {
    const ir_attr *a = ir_attr_find(n, "seed");
    if (a) {
        double s = a->f;
        return ir_hash_bytes(&s, sizeof s, 0x5eedULL);
    }
    return ir_hash_bytes(n->name, strlen(n->name), run_seed);
}

static ir_status rnd_kernel(const ir_kernel_ctx *k) {
    ir_tensor *y = &k->out[0];
    const int64_t n = ir_tensor_numel(y);
    const uint64_t key = rnd_key(k->node, k->seed);
    const bool normal = rnd_normal(k->node), f64 = y->dtype == IR_F64;
    const double a = normal ? ir_attr_float(k->node, "mean", 0) : ir_attr_float(k->node, "low", 0);
    const double b =
        normal ? ir_attr_float(k->node, "scale", 1) : ir_attr_float(k->node, "high", 1);
    IR_PARALLEL_FOR(n >= IR_PAR_MIN / 4)
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (normal) {
            double u1 = rnd_u(key, 2 * (uint64_t)i), u2 = rnd_u(key, 2 * (uint64_t)i + 1);
            v = a + b * sqrt(-2.0 * log1p(-u1)) * cos(2 * M_PI * u2);
        } else {
            v = a + (b - a) * rnd_u(key, (uint64_t)i);
            if (f64 ? v >= b : (float)v >= (float)b)
                v = f64 ? nextafter(b, a) : nextafterf((float)b, (float)a);
        }
        if (f64)
            ((double *)y->data)[i] = v;
        else
            ((float *)y->data)[i] = (float)v;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- the op table entries */

/* Random draws (IR_OPF_RANDOM), no dimension links, not differentiable: no .grad. */
#define RND_DEF(name_, in_)                                                                        \
    IR_OP_DEF(name_, in_, in_, 1, 1, .flags = IR_OPF_RANDOM, .infer = rnd_infer,                   \
              .flops = rnd_flops, .kernel = rnd_kernel, .bytes = rnd_bytes);
RND_DEF(RandomUniform, 0)
RND_DEF(RandomUniformLike, 1)
RND_DEF(RandomNormal, 0)
RND_DEF(RandomNormalLike, 1)
