/* ops-groupnorm.c - GroupNormalization (opsets 18 and 21).
 *
 * Y = (X - mean) / sqrt(var + epsilon) * scale + bias, with mean and the biased variance taken
 * over each group of C / num_groups channels and all spatial positions of one sample. Opset 21
 * gives scale and bias per channel ([C]); opset 18 gave them per group ([num_groups]), which
 * this kernel honours by reading index c / (C / G) instead of c. stash_type (21) asks for the
 * statistics in float32 at least: they are accumulated in double either way. float32 and
 * float64 run the same generic loop; each (sample, group) is independent and runs in parallel.
 * The gradient (grad-norm.c) is composed of InstanceNormGrad over the [N, G, cpg * S] view. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

typedef struct gn_geom {
    int64_t N, C, G, S; /* samples, channels, groups, spatial elements per channel */
    bool per_group;     /* opset 18: scale and bias have G values */
} gn_geom;

static ir_status gn_parse(const ir_graph *g, const ir_node *n, gn_geom *gg, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *sc = ir_node_in(g, n, 1), *b = ir_node_in(g, n, 2);
    char s1[96];
    if (!ir_dtype_is_float(x->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "X is %s; expected a float type",
                            ir_dtype_name(x->dtype));
    if (x->shape.rank < 2)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s; expected (N, C, ...)",
                            ir_shape_str(&x->shape, s1, sizeof s1));
    const ir_attr *ga = ir_attr_find(n, "num_groups");
    if (!ga || ga->type != IR_ATTR_INT)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute num_groups is required");
    gg->N = x->shape.dims[0];
    gg->C = x->shape.dims[1];
    gg->G = ga->i;
    gg->S = 1;
    for (int i = 2; i < x->shape.rank; i++) gg->S *= x->shape.dims[i];
    if (gg->G < 1 || gg->C % gg->G != 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "num_groups %lld does not divide %lld channels",
                            (long long)gg->G, (long long)gg->C);
    gg->per_group = g->opset > 0 && g->opset < 21;
    int64_t want = gg->per_group ? gg->G : gg->C;
    for (int i = 1; i <= 2; i++) {
        const ir_value *v = i == 1 ? sc : b;
        if (v->dtype != x->dtype || v->shape.rank != 1 || v->shape.dims[0] != want)
            return ir_node_fail(
                d, IR_ERR_SHAPE, n, "%s has %s %s; expected %s [%lld] (per %s at opset %lld)",
                i == 1 ? "scale" : "bias", ir_dtype_name(v->dtype),
                ir_shape_str(&v->shape, s1, sizeof s1), ir_dtype_name(x->dtype), (long long)want,
                gg->per_group ? "group" : "channel", (long long)g->opset);
    }
    return IR_OK;
}

static ir_status gn_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    gn_geom gg;
    ir_status st = gn_parse(g, n, &gg, d);
    if (st) return st;
    const ir_value *x = ir_node_in(g, n, 0);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

/* Two passes for the statistics (sum, then squared deviations) and one for the output. */
static double gn_flops(const ir_graph *g, const ir_node *n) {
    return 6.0 * (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

#define GN_GROUP(T)                                                                                \
    static void gn_group_##T(const gn_geom *gg, const T *x, const T *sc, const T *b, T *y,         \
                             int64_t ng, double eps) {                                             \
        const int64_t cpg = gg->C / gg->G, len = cpg * gg->S, g0 = ng % gg->G;                     \
        const T *xg = x + ng * len;                                                                \
        T *yg = y + ng * len;                                                                      \
        double s = 0, q = 0;                                                                       \
        for (int64_t i = 0; i < len; i++) s += (double)xg[i];                                      \
        const double mean = len ? s / (double)len : 0;                                             \
        for (int64_t i = 0; i < len; i++) q += ((double)xg[i] - mean) * ((double)xg[i] - mean);    \
        const double inv = 1.0 / sqrt((len ? q / (double)len : 0) + eps);                          \
        for (int64_t c = 0; c < cpg; c++) {                                                        \
            const int64_t ch = gg->per_group ? g0 : g0 * cpg + c;                                  \
            const double a = inv * (double)sc[ch], o = (double)b[ch] - mean * a;                   \
            const T *xc = xg + c * gg->S;                                                          \
            T *yc = yg + c * gg->S;                                                                \
            for (int64_t i = 0; i < gg->S; i++) yc[i] = (T)((double)xc[i] * a + o);                \
        }                                                                                          \
    }
GN_GROUP(float)
GN_GROUP(double)

static ir_status gn_kernel(const ir_kernel_ctx *k) {
    gn_geom gg;
    ir_status st = gn_parse(k->graph, k->node, &gg, k->diag);
    if (st) return st;
    const double eps = ir_attr_float(k->node, "epsilon", 1e-5f);
    const int64_t groups = gg.N * gg.G;
    const bool f32 = k->in[0].dtype == IR_F32;
    IR_PARALLEL_FOR(ir_tensor_numel(&k->in[0]) >= IR_PAR_MIN)
    for (int64_t ng = 0; ng < groups; ng++) {
        if (f32)
            gn_group_float(&gg, k->in[0].data, k->in[1].data, k->in[2].data, k->out[0].data, ng,
                           eps);
        else
            gn_group_double(&gg, k->in[0].data, k->in[1].data, k->in[2].data, k->out[0].data, ng,
                            eps);
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): samples are normalized independently, so N links; channels and
 * spatial positions share a group's statistics and cut. */
static int gn_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    if (ir_node_in(g, n, 0)->shape.rank >= 2) ir_dims_keep(&o, 0, 0, 0, 0);
    return ir_dims_end(&o);
}

IR_OP_DEF(GroupNormalization, 3, 3, 1, 1, .infer = gn_infer, .flops = gn_flops, .kernel = gn_kernel,
          .grad = ir_grad_GroupNormalization, .dims = gn_dims);
