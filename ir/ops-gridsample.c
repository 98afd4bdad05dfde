/* ops-gridsample.c - GridSample (opsets 16, 20, 22) and its gradients: GridSampleGrad for the
 * input X, GridSampleGridGrad for the grid.
 *
 * Y[n, c, o...] samples X[n, c] at the point grid[n, o..., :] gives, in normalized coordinates
 * (-1 and 1 the corner pixels' centres with align_corners, their outer edges without), the grid's
 * last axis listing them x first (the last spatial dim of X). Modes: nearest (rounded half to
 * even, as PyTorch), linear ("bilinear" at opset 16) and cubic ("bicubic"; Keys with A = -0.75),
 * padding zeros, border or reflection: onnx 1.22's reference (op_grid_sample.py), which follows
 * PyTorch's GridSampler.h. Any spatial rank 1 to 3 (4-D and 5-D X). float32/float64, in double.
 *
 * Each output point's taps (at most 4 per spatial dim) and weights are computed once and shared
 * by every channel: interpolation is separable, so a point is the sum over tap combinations of the
 * product of the per-dim weights; a tap outside X in zeros mode reads 0. GridSampleGrad scatters
 * dY through the same taps into dX. GridSampleGridGrad differentiates the same computation with
 * respect to each grid coordinate: the tap indices are piecewise constant in it, so only the
 * weights of its own dim vary, by d w / d x (linear: -1 and 1; cubic: the Keys polynomials'
 * derivatives; nearest: 0) times d x / d grid, the unnormalizing scale times the padding's
 * slope: 0 where border clips the point, +-1 where reflection folds it (PyTorch's
 * clip_coordinates_set_grad and reflect_coordinates_set_grad). */
#include "ir-autodiff.h"
#include "ir-impl.h"

typedef enum gs_mode { GS_NEAREST, GS_LINEAR, GS_CUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECT } gs_pad;

typedef struct gs_geom {
    int S;                 /* spatial rank */
    int64_t N, C, in[3];   /* X's batch, channels, spatial dims */
    int64_t out[3], n_out; /* output spatial dims and their product */
    gs_mode mode;
    gs_pad pad;
    bool align;
} gs_geom;

static ir_status gs_attrs(const ir_node *n, gs_geom *gg, ir_diag *d) {
    const char *m = ir_attr_str(n, "mode", "linear"), *p = ir_attr_str(n, "padding_mode", "zeros");
    if (!strcmp(m, "nearest"))
        gg->mode = GS_NEAREST;
    else if (!strcmp(m, "linear") || !strcmp(m, "bilinear"))
        gg->mode = GS_LINEAR;
    else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic"))
        gg->mode = GS_CUBIC;
    else
        return ir_node_fail(d, IR_ERR_INVALID, n, "mode '%s' (nearest, linear or cubic)", m);
    if (!strcmp(p, "zeros"))
        gg->pad = GS_ZEROS;
    else if (!strcmp(p, "border"))
        gg->pad = GS_BORDER;
    else if (!strcmp(p, "reflection"))
        gg->pad = GS_REFLECT;
    else
        return ir_node_fail(d, IR_ERR_INVALID, n, "padding_mode '%s' (zeros, border or reflection)",
                            p);
    gg->align = ir_attr_int(n, "align_corners", 0) != 0;
    return IR_OK;
}

/* From X's shape xs and the grid's shape gs. */
static ir_status gs_parse(const ir_node *n, const ir_shape *xs, const ir_shape *gs, gs_geom *gg,
                          ir_diag *d) {
    char s1[96], s2[96];
    ir_status st = gs_attrs(n, gg, d);
    if (st) return st;
    gg->S = xs->rank - 2;
    if (gg->S < 1 || gg->S > 3 || gs->rank != xs->rank || gs->dims[0] != xs->dims[0] ||
        gs->dims[gs->rank - 1] != gg->S)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "X %s and grid %s: expected X (N, C, D1..Dk) with k 1 to 3 and grid "
                            "(N, O1..Ok, k)",
                            ir_shape_str(xs, s1, sizeof s1), ir_shape_str(gs, s2, sizeof s2));
    gg->N = xs->dims[0];
    gg->C = xs->dims[1];
    gg->n_out = 1;
    for (int i = 0; i < gg->S; i++) {
        gg->in[i] = xs->dims[2 + i];
        gg->out[i] = gs->dims[1 + i];
        gg->n_out *= gg->out[i];
    }
    return IR_OK;
}

static ir_status gs_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *grid = ir_node_in(g, n, 1);
    if (!ir_dtype_is_float(x->dtype) || grid->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "X %s and grid %s: floats of one dtype",
                            ir_dtype_name(x->dtype), ir_dtype_name(grid->dtype));
    gs_geom gg;
    ir_status st = gs_parse(n, &x->shape, &grid->shape, &gg, d);
    if (st) return st;
    ir_shape out = {.rank = 2 + gg.S, .dims = {gg.N, gg.C}};
    for (int i = 0; i < gg.S; i++) out.dims[2 + i] = gg.out[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static int gs_taps_per_dim(gs_mode m) {
    return m == GS_NEAREST ? 1 : m == GS_LINEAR ? 2 : 4;
}

static double gs_flops(const ir_graph *g, const ir_node *n) {
    gs_geom gg;
    const ir_node *nn = n;
    const ir_value *y = ir_node_out(g, n, 0);
    if (gs_attrs(nn, &gg, NULL)) return 0;
    double taps = 1;
    for (int i = 2; i < y->shape.rank; i++) taps *= gs_taps_per_dim(gg.mode);
    return 2.0 * taps * (double)ir_shape_numel(&y->shape);
}

/* ---------------------------------------------------------------- taps */

static double gs_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t k = (int64_t)(dx / rng);
        double r = dx - (double)k * rng;
        return k % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t k = (int64_t)(dx / rng);
        double r = dx - (double)k * rng;
        return k % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

/* Tap index i of a dim of length len as the padding mode reads it; -1 reads zero. */
static int64_t gs_index(const gs_geom *gg, int64_t i, int64_t len, double lo, double hi) {
    switch (gg->pad) {
    case GS_ZEROS: return i >= 0 && i < len ? i : -1;
    case GS_BORDER: return i < 0 ? 0 : i >= len ? len - 1 : i;
    default: {
        int64_t r = (int64_t)gs_reflect((double)i, lo, hi);
        return r < 0 ? 0 : r >= len ? len - 1 : r;
    }
    }
}

static void gs_cubic(double t, double *c) {
    const double A = -0.75;
    t = fabs(t);
    double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
    c[0] = ((A * t1 - 5 * A) * t1 + 8 * A) * t1 - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
    c[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
}

/* d c[j] / d t of gs_cubic, for t in [0, 1) (the fraction x - floor(x)). */
static void gs_cubic_slope(double t, double *c) {
    const double A = -0.75;
    double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
    c[0] = (3 * A * t1 - 10 * A) * t1 + 8 * A;
    c[1] = (3 * (A + 2) * t - 2 * (A + 3)) * t;
    c[2] = -(3 * (A + 2) * t2 - 2 * (A + 3)) * t2;
    c[3] = -((3 * A * t3 - 10 * A) * t3 + 8 * A);
}

/* d gs_reflect(x, lo, hi) / d x: each fold mirrors, so the slope alternates -1, +1, ... */
static double gs_reflect_slope(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0) return 0;
    if (x >= lo && x <= hi) return 1;
    int64_t k = (int64_t)((x < lo ? lo - x : x - hi) / rng);
    return k % 2 == 0 ? -1 : 1;
}

/* The taps of one output point along every spatial dim: idx[i][j] (-1: zero) and w[i][j]; with
 * slopes, dw[i][j] = d w[i][j] / d (the grid coordinate of dim i). */
typedef struct gs_taps {
    int nt;
    int64_t idx[3][4];
    double w[3][4], dw[3][4];
} gs_taps;

/* coord: the point's grid entries, x first (the last spatial dim). */
static void gs_point(const gs_geom *gg, const double *coord, gs_taps *t, bool slopes) {
    t->nt = gs_taps_per_dim(gg->mode);
    for (int i = 0; i < gg->S; i++) {
        const int64_t len = gg->in[i];
        const double nrm = coord[gg->S - 1 - i];
        const double lo = gg->align ? 0 : -0.5, hi = gg->align ? (double)len - 1 : len - 0.5;
        double x = gg->align ? (nrm + 1) / 2.0 * (double)(len - 1) : ((nrm + 1) * len - 1) / 2.0;
        double dx = gg->align ? (double)(len - 1) / 2.0 : (double)len / 2.0; /* d x / d nrm */
        if (gg->mode == GS_NEAREST) x = nearbyint(x);                        /* half to even */
        if (x < lo || x > hi) {
            if (gg->pad == GS_BORDER) {
                x = x < 0 ? 0 : x > len - 1 ? (double)(len - 1) : x;
                dx = 0; /* x < lo <= 0 or x > hi >= len - 1: clipped */
            } else if (gg->pad == GS_REFLECT) {
                dx *= gs_reflect_slope(x, lo, hi);
                x = gs_reflect(x, lo, hi);
            }
        }
        if (gg->mode == GS_NEAREST) {
            t->idx[i][0] = gs_index(gg, (int64_t)x, len, lo, hi);
            t->w[i][0] = 1;
            t->dw[i][0] = 0;
            continue;
        }
        const double f = floor(x);
        const int64_t x0 = (int64_t)f;
        if (gg->mode == GS_LINEAR) {
            t->w[i][0] = 1 - (x - f);
            t->w[i][1] = x - f;
            t->dw[i][0] = -dx;
            t->dw[i][1] = dx;
            for (int j = 0; j < 2; j++) t->idx[i][j] = gs_index(gg, x0 + j, len, lo, hi);
        } else {
            gs_cubic(x - f, t->w[i]);
            if (slopes) {
                gs_cubic_slope(x - f, t->dw[i]);
                for (int j = 0; j < 4; j++) t->dw[i][j] *= dx;
            }
            for (int j = 0; j < 4; j++) t->idx[i][j] = gs_index(gg, x0 - 1 + j, len, lo, hi);
        }
    }
    for (int i = gg->S; i < 3; i++) { /* unused dims: one tap at 0 */
        t->idx[i][0] = 0;
        t->w[i][0] = 1;
        t->dw[i][0] = 0;
    }
}

/* Calls BODY(offset, a, b, c) for every tap combination of t that reads X: tap a of spatial dim
 * 0, b of dim 1, c of dim 2, at offset within a plane of the padded dims [in0, in1, in2]. */
#define GS_FOR_TAP_IDX(gg, t, BODY)                                                                \
    do {                                                                                           \
        const int n0 = (t).nt, n1 = (gg)->S > 1 ? (t).nt : 1, n2 = (gg)->S > 2 ? (t).nt : 1;       \
        const int64_t d1 = (gg)->S > 1 ? (gg)->in[1] : 1, d2 = (gg)->S > 2 ? (gg)->in[2] : 1;      \
        for (int a_ = 0; a_ < n0; a_++) {                                                          \
            if ((t).idx[0][a_] < 0) continue;                                                      \
            for (int b_ = 0; b_ < n1; b_++) {                                                      \
                if ((t).idx[1][b_] < 0) continue;                                                  \
                for (int c_ = 0; c_ < n2; c_++) {                                                  \
                    if ((t).idx[2][c_] < 0) continue;                                              \
                    BODY(((t).idx[0][a_] * d1 + (t).idx[1][b_]) * d2 + (t).idx[2][c_], a_, b_,     \
                         c_);                                                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* The weight of tap combination (a, b, c). */
static inline double gs_weight(const gs_taps *t, int a, int b, int c) {
    return t->w[0][a] * t->w[1][b] * t->w[2][c];
}

static ir_status gs_kernel(const ir_kernel_ctx *k) {
    gs_geom gg;
    ir_status st = gs_parse(k->node, &k->in[0].shape, &k->in[1].shape, &gg, k->diag);
    if (st) return st;
    const ir_dtype t = k->in[0].dtype;
    const void *X = k->in[0].data, *G = k->in[1].data;
    void *Y = k->out[0].data;
    const int64_t plane = ir_shape_numel(&k->in[0].shape) / (gg.N * gg.C > 0 ? gg.N * gg.C : 1);
    const int64_t pts = gg.N * gg.n_out;
    IR_PARALLEL_FOR(pts * gg.C >= IR_PAR_MIN / 16)
    for (int64_t p = 0; p < pts; p++) {
        const int64_t n = p / gg.n_out, o = p % gg.n_out;
        double coord[3];
        for (int i = 0; i < gg.S; i++) coord[i] = IR_LD_F(t, G, p * gg.S + i);
        gs_taps tp;
        gs_point(&gg, coord, &tp, false);
        for (int64_t c = 0; c < gg.C; c++) {
            const int64_t base = (n * gg.C + c) * plane;
            double acc = 0;
#define GS_ACC(off, a, b, c) acc += gs_weight(&tp, a, b, c) * IR_LD_F(t, X, base + (off))
            GS_FOR_TAP_IDX(&gg, tp, GS_ACC);
#undef GS_ACC
            IR_ST_F(t, Y, (n * gg.C + c) * gg.n_out + o, acc);
        }
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): N from X and the grid, C from X, the output's spatial dims from the
 * grid's; X's spatial dims are read anywhere the grid points and cut. */
static int gs_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, 0, 0, 0);
    ir_dims_keep(&o, 1, 0, 0, 0);
    ir_dims_keep(&o, 0, 1, 0, 1);
    for (int i = 2; i < x->shape.rank; i++) ir_dims_keep(&o, 1, i - 1, 0, i);
    return ir_dims_end(&o);
}

/* ---------------------------------------------------------------- the gradient */

/* GridSampleGrad(dY, grid) -> dX, X's shape in attribute shape (the attribute a fission rewrites
 * with its output, as for every backward op of magpie's domain), GridSample's attributes. */
static ir_status gsg_shapes(const ir_graph *g, const ir_node *n, ir_shape *xs, ir_diag *d) {
    const int64_t *dims;
    int r = ir_attr_ints(n, "shape", &dims);
    if (r < 3 || r > 5)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute shape (X's, rank 3 to 5) is required");
    *xs = ir_shape_make(r, dims);
    (void)g;
    return IR_OK;
}

static ir_status gsg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_shape xs;
    ir_status st = gsg_shapes(g, n, &xs, d);
    if (st) return st;
    gs_geom gg;
    if ((st = gs_parse(n, &xs, &ir_node_in(g, n, 1)->shape, &gg, d))) return st;
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &xs);
    return IR_OK;
}

static ir_status gsg_kernel(const ir_kernel_ctx *k) {
    ir_shape xs;
    ir_status st = gsg_shapes(k->graph, k->node, &xs, k->diag);
    if (st) return st;
    gs_geom gg;
    if ((st = gs_parse(k->node, &xs, &k->in[1].shape, &gg, k->diag))) return st;
    const ir_dtype t = k->in[0].dtype;
    const void *dY = k->in[0].data, *G = k->in[1].data;
    void *dX = k->out[0].data;
    const int64_t plane = ir_shape_numel(&xs) / (gg.N * gg.C > 0 ? gg.N * gg.C : 1);
    memset(dX, 0, (size_t)ir_shape_numel(&xs) * ir_dtype_size(t));
    /* each (n, c) plane of dX is written by one iteration alone */
    IR_PARALLEL_FOR(gg.N * gg.C * gg.n_out >= IR_PAR_MIN / 16)
    for (int64_t nc = 0; nc < gg.N * gg.C; nc++) {
        const int64_t n = nc / gg.C, base = nc * plane;
        for (int64_t o = 0; o < gg.n_out; o++) {
            double coord[3];
            for (int i = 0; i < gg.S; i++) coord[i] = IR_LD_F(t, G, (n * gg.n_out + o) * gg.S + i);
            gs_taps tp;
            gs_point(&gg, coord, &tp, false);
            const double gy = IR_LD_F(t, dY, nc * gg.n_out + o);
#define GS_SCATTER(off, a, b, c)                                                                   \
    IR_ST_F(t, dX, base + (off), IR_LD_F(t, dX, base + (off)) + gs_weight(&tp, a, b, c) * gy)
            GS_FOR_TAP_IDX(&gg, tp, GS_SCATTER);
#undef GS_SCATTER
        }
    }
    return IR_OK;
}

static double gsg_flops(const ir_graph *g, const ir_node *n) {
    gs_geom gg;
    const ir_value *dy = ir_node_in(g, n, 0);
    if (gs_attrs(n, &gg, NULL)) return 0;
    double taps = 1;
    for (int i = 2; i < dy->shape.rank; i++) taps *= gs_taps_per_dim(gg.mode);
    return 2.0 * taps * (double)ir_shape_numel(&dy->shape);
}

/* dX's N and C link from dY's; the grid's N too. dX sums over the output points: each of their
 * dims (dY's and the grid's) is a summed reduce axis. */
static int gsg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *dy = ir_node_in(g, n, 0);
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, 0, 0, 0);
    ir_dims_keep(&o, 1, 0, 0, 0);
    ir_dims_keep(&o, 0, 1, 0, 1);
    for (int i = 2; i < dy->shape.rank; i++) {
        ir_dims_reduce(&o, 0, i, i - 1, true);
        ir_dims_reduce(&o, 1, i - 1, i - 1, true);
    }
    return ir_dims_end(&o);
}

/* GridSampleGridGrad(dY, X, grid) -> dgrid, grid's shape, GridSample's attributes. */
static ir_status gsgg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0), *x = ir_node_in(g, n, 1), *grid = ir_node_in(g, n, 2);
    gs_geom gg;
    ir_status st = gs_parse(n, &x->shape, &grid->shape, &gg, d);
    if (st) return st;
    ir_shape ys = {.rank = 2 + gg.S, .dims = {gg.N, gg.C}};
    for (int i = 0; i < gg.S; i++) ys.dims[2 + i] = gg.out[i];
    char s1[96], s2[96];
    if (!ir_shape_eq(&dy->shape, &ys) || dy->dtype != x->dtype || grid->dtype != x->dtype ||
        (x->dtype != IR_F32 && x->dtype != IR_F64))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "dY %s %s: expected %s %s",
                            ir_dtype_name(dy->dtype), ir_shape_str(&dy->shape, s1, sizeof s1),
                            ir_dtype_name(x->dtype), ir_shape_str(&ys, s2, sizeof s2));
    ir_set_out(g, n, 0, grid->dtype, &grid->shape);
    return IR_OK;
}

/* One iteration per output point: its grid entries are written by it alone. */
static ir_status gsgg_kernel(const ir_kernel_ctx *k) {
    gs_geom gg;
    ir_status st = gs_parse(k->node, &k->in[1].shape, &k->in[2].shape, &gg, k->diag);
    if (st) return st;
    const ir_dtype t = k->in[1].dtype;
    const void *dY = k->in[0].data, *X = k->in[1].data, *G = k->in[2].data;
    void *dG = k->out[0].data;
    const int64_t plane = ir_shape_numel(&k->in[1].shape) / (gg.N * gg.C > 0 ? gg.N * gg.C : 1);
    const int64_t pts = gg.N * gg.n_out;
    IR_PARALLEL_FOR(pts * gg.C >= IR_PAR_MIN / 16)
    for (int64_t p = 0; p < pts; p++) {
        const int64_t n = p / gg.n_out, o = p % gg.n_out;
        double coord[3], dg[3] = {0, 0, 0};
        for (int i = 0; i < gg.S; i++) coord[i] = IR_LD_F(t, G, p * gg.S + i);
        gs_taps tp;
        gs_point(&gg, coord, &tp, true);
        if (gg.mode != GS_NEAREST) /* nearest: piecewise constant, a zero gradient */
            for (int64_t c = 0; c < gg.C; c++) {
                const int64_t base = (n * gg.C + c) * plane;
                const double gy = IR_LD_F(t, dY, (n * gg.C + c) * gg.n_out + o);
#define GS_SLOPES(off, a, b, c)                                                                    \
    do {                                                                                           \
        const double v_ = gy * IR_LD_F(t, X, base + (off));                                        \
        dg[0] += v_ * tp.dw[0][a] * tp.w[1][b] * tp.w[2][c];                                       \
        dg[1] += v_ * tp.w[0][a] * tp.dw[1][b] * tp.w[2][c];                                       \
        dg[2] += v_ * tp.w[0][a] * tp.w[1][b] * tp.dw[2][c];                                       \
    } while (0)
                GS_FOR_TAP_IDX(&gg, tp, GS_SLOPES);
#undef GS_SLOPES
            }
        for (int i = 0; i < gg.S; i++) IR_ST_F(t, dG, p * gg.S + (gg.S - 1 - i), dg[i]);
    }
    return IR_OK;
}

/* Per channel and tap combination: a multiply-add per spatial dim, after the product. */
static double gsgg_flops(const ir_graph *g, const ir_node *n) {
    gs_geom gg;
    const ir_value *dy = ir_node_in(g, n, 0);
    if (gs_attrs(n, &gg, NULL) || gg.mode == GS_NEAREST) return 0;
    double taps = 1;
    int S = dy->shape.rank - 2;
    for (int i = 0; i < S; i++) taps *= gs_taps_per_dim(gg.mode);
    return (2.0 + 2.0 * S) * taps * (double)ir_shape_numel(&dy->shape);
}

/* N links dY's, X's and the grid's to dgrid's; the output points' dims dY's and the grid's; C is
 * summed over (dY's and X's dim 1). */
static int gsgg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *dy = ir_node_in(g, n, 0);
    ir_dims_out o = ir_dims_begin(l);
    for (int in = 0; in < 3; in++) ir_dims_keep(&o, in, 0, 0, 0);
    for (int i = 2; i < dy->shape.rank; i++) {
        ir_dims_keep(&o, 0, i, 0, i - 1);
        ir_dims_keep(&o, 2, i - 1, 0, i - 1);
    }
    ir_dims_keep(&o, 2, dy->shape.rank - 1, 0, dy->shape.rank - 1);
    ir_dims_reduce(&o, 0, 1, 1, true);
    ir_dims_reduce(&o, 1, 1, 1, true);
    return ir_dims_end(&o);
}

static ir_status gs_grad(ir_grad_ctx *c) {
    ir_attr at[4];
    int na = 1; /* at[0]: X's shape, for GridSampleGrad */
    static const char *const names[] = {"mode", "padding_mode"};
    for (int i = 0; i < 2; i++) {
        const char *s = ir_attr_str(c->node, names[i], NULL);
        if (s) at[na++] = ir_grad_attr_str(c, names[i], s);
    }
    at[na++] = ir_grad_attr_int("align_corners", ir_attr_int(c->node, "align_corners", 0));
    gs_geom gg;
    if (gs_attrs(c->node, &gg, NULL) != IR_OK)
        return ir_grad_fail(c, IR_ERR_INVALID, "bad mode or padding_mode");
    int dy = ir_grad_gout(c, 0);
    /* nearest reads X at a piecewise constant point: the grid's gradient is zero (none emitted) */
    if (ir_grad_needs(c, 1) && gg.mode != GS_NEAREST)
        ir_grad_accumulate(c, 1,
                           ir_grad_op(c, IR_OP_GridSampleGridGrad, 3,
                                      (int[]){dy, c->in[0], c->in[1]}, na - 1, at + 1));
    if (ir_grad_needs(c, 0)) {
        const ir_shape xs = ir_grad_shape(c, c->in[0]);
        at[0] = ir_grad_attr_ints(c, "shape", xs.rank, xs.dims);
        ir_grad_accumulate(c, 0,
                           ir_grad_op(c, IR_OP_GridSampleGrad, 2, (int[]){dy, c->in[1]}, na, at));
    }
    return ir_grad_status(c);
}

IR_OP_DEF(GridSample, 2, 2, 1, 1, .infer = gs_infer, .flops = gs_flops, .kernel = gs_kernel,
          .grad = gs_grad, .dims = gs_dims);
IR_MAGPIE_OP_DEF(GridSampleGrad, 2, 2, 1, 1, .infer = gsg_infer, .flops = gsg_flops,
                 .kernel = gsg_kernel, .dims = gsg_dims);
IR_MAGPIE_OP_DEF(GridSampleGridGrad, 3, 3, 1, 1, .infer = gsgg_infer, .flops = gsgg_flops,
                 .kernel = gsgg_kernel, .dims = gsgg_dims);
