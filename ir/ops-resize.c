/* ops-resize.c - Resize (opsets 10-19): modes nearest, linear (n-linear over every dim whose
 * mapping is not the identity) and cubic (cubic_coeff_a, exclude_outside), coordinate_
 * transformation_mode half_pixel, pytorch_half_pixel, align_corners, asymmetric,
 * tf_half_pixel_for_nn and (19) half_pixel_symmetric; opset 18's axes, keep_aspect_ratio_policy
 * and antialias (linear and cubic); tf_crop_and_resize (roi, extrapolation_value) with nearest
 * and linear. Cubic and antialias run as separable filters ("cubic and antialias" below), the
 * rest from two-tap tables.
 *
 * Scales or sizes must be constants (they fix the output shape). The kernel first tabulates,
 * per dim, the two source indices and the weight of every output coordinate (the workspace,
 * exactly resize_workspace() bytes), then fills output rows (all dims but the last) in
 * parallel. Source coordinates are clamped to [0, in-1], which equals ONNX's edge padding.
 * Below opset 11 the inputs are (X, scales) with asymmetric coordinates and floor rounding,
 * as Resize-10 behaves. The kernel runs float32 and float64 (ops-resize-kern.h), with its weights
 * in its own dtype. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>

enum rs_ctm {
    CTM_HALF_PIXEL,
    CTM_PYTORCH_HALF_PIXEL,
    CTM_ALIGN_CORNERS,
    CTM_ASYMMETRIC,
    CTM_TF_NN,
    CTM_HALF_PIXEL_SYMMETRIC, /* opset 19 */
    CTM_TF_CROP,              /* tf_crop_and_resize: the roi input's box, resized */
};
enum rs_keep { KEEP_STRETCH, KEEP_NOT_LARGER, KEEP_NOT_SMALLER }; /* opset 18 */
enum rs_round { RND_PREFER_FLOOR, RND_PREFER_CEIL, RND_FLOOR, RND_CEIL };

typedef struct rs_attrs {
    bool linear, cubic;   /* neither: nearest */
    bool antialias;       /* opset 18, linear and cubic */
    bool exclude_outside; /* taps outside the input get weight 0, the rest renormalized */
    double cubic_a;       /* cubic_coeff_a */
    enum rs_ctm ctm;
    enum rs_round rnd;
    enum rs_keep keep;
    int scales_in, sizes_in; /* input positions, -1 when the opset has none */
    int n_axes;              /* opset 18's axes (-1: every dim) */
    const int64_t *axes;
} rs_attrs;

static ir_status rs_parse(const ir_graph *g, const ir_node *n, rs_attrs *ra, ir_diag *d) {
    bool old = g->opset > 0 && g->opset < 11;
    const char *mode = ir_attr_str(n, "mode", "nearest");
    const char *ctm =
        ir_attr_str(n, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel");
    const char *nm = ir_attr_str(n, "nearest_mode", old ? "floor" : "round_prefer_floor");
    static const char *ctms[] = {
        "half_pixel",           "pytorch_half_pixel",   "align_corners",     "asymmetric",
        "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"};
    static const char *rnds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    ra->linear = ra->cubic = false;
    if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear") || !strcmp(mode, "trilinear"))
        ra->linear = true;
    else if (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic"))
        ra->cubic = true;
    else if (strcmp(mode, "nearest"))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "mode '%s' is not supported", mode);
    int i;
    for (i = 0; i < 7 && strcmp(ctm, ctms[i]); i++) {
    }
    if (i == 7 || (i == CTM_TF_CROP && old))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "coordinate_transformation_mode '%s' is not supported", ctm);
    ra->ctm = (enum rs_ctm)i;
    for (i = 0; i < 4 && strcmp(nm, rnds[i]); i++) {
    }
    if (i == 4) return ir_node_fail(d, IR_ERR_INVALID, n, "nearest_mode '%s' is not valid", nm);
    ra->rnd = (enum rs_round)i;
    ra->antialias = ir_attr_int(n, "antialias", 0) != 0 && !old;
    ra->exclude_outside = ir_attr_int(n, "exclude_outside", 0) != 0;
    ra->cubic_a = ir_attr_float(n, "cubic_coeff_a", -0.75f);
    const char *kp = ir_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    ra->keep = !strcmp(kp, "not_larger")    ? KEEP_NOT_LARGER
               : !strcmp(kp, "not_smaller") ? KEEP_NOT_SMALLER
                                            : KEEP_STRETCH;
    if (ra->keep == KEEP_STRETCH && strcmp(kp, "stretch"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "keep_aspect_ratio_policy '%s' is not valid", kp);
    ra->n_axes = ir_attr_ints(n, "axes", &ra->axes);
    if (ra->n_axes > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axes has %d values", ra->n_axes);
    ra->scales_in = old ? 1 : 2;
    ra->sizes_in = old ? -1 : 3;
    return IR_OK;
}

/* Reads constant float input i; -2 when absent or empty, -1 (with a message) when not constant. */
static int const_floats(const ir_graph *g, const ir_node *n, int i, double *out, int max,
                        ir_diag *d) {
    const ir_value *v = i >= 0 ? ir_node_in(g, n, i) : NULL;
    if (!v || ir_shape_numel(&v->shape) == 0) return -2;
    const void *data = ir_value_data(v);
    if (!data || !ir_dtype_is_float(v->dtype)) {
        ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "scales must be a constant float tensor");
        return -1;
    }
    int64_t cnt = ir_shape_numel(&v->shape);
    if (cnt > max) {
        ir_node_fail(d, IR_ERR_INVALID, n, "scales has %lld values", (long long)cnt);
        return -1;
    }
    for (int64_t k = 0; k < cnt; k++) out[k] = ir_load_f64(data, v->dtype, k);
    return (int)cnt;
}

/* The output shape and the scale of every dim, from the scales (nsc values, -2 when absent) or
 * the sizes (nsz values), given for opset 18's axes or for every dim. With sizes the scale is
 * out/in per dim, or one common scale under keep_aspect_ratio_policy (the output then rounds
 * in * scale). */
static ir_status rs_geometry(const ir_node *n, const rs_attrs *ra, const ir_shape *is,
                             const double *sc, int nsc, const int64_t *sz, int nsz, ir_shape *os,
                             double *scale, ir_diag *d) {
    const int r = is->rank;
    int ax[IR_MAX_RANK], na = ra->n_axes >= 0 ? ra->n_axes : r;
    bool seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        if (ra->n_axes < 0) {
            ax[i] = i;
            continue;
        }
        if (!ir_norm_axis(ra->axes[i], r, &ax[i]) || seen[ax[i]])
            return ir_node_fail(d, IR_ERR_INVALID, n, "axes[%d]=%lld is out of range or repeated",
                                i, (long long)ra->axes[i]);
        seen[ax[i]] = true;
    }
    *os = *is;
    for (int i = 0; i < r; i++) scale[i] = 1.0;
    if (nsz >= 0) {
        if (nsz != na)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "sizes has %d values for %d axes", nsz, na);
        double common = ra->keep == KEEP_NOT_LARGER ? INFINITY : 0;
        for (int i = 0; i < na; i++) {
            double s = (double)sz[i] / (double)is->dims[ax[i]];
            if (ra->keep == KEEP_NOT_LARGER && s < common) common = s;
            if (ra->keep == KEEP_NOT_SMALLER && s > common) common = s;
            os->dims[ax[i]] = sz[i];
            scale[ax[i]] = s;
        }
        if (ra->keep != KEEP_STRETCH)
            for (int i = 0; i < na; i++) {
                scale[ax[i]] = common;
                os->dims[ax[i]] = (int64_t)floor((double)is->dims[ax[i]] * common + 0.5);
            }
    } else {
        if (nsc == -2)
            return ir_node_fail(d, IR_ERR_INVALID, n, "one of scales and sizes must be given");
        if (nsc != na)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "scales has %d values for %d axes", nsc, na);
        for (int i = 0; i < na; i++) {
            if (!(sc[i] > 0))
                return ir_node_fail(d, IR_ERR_INVALID, n, "scales[%d]=%g must be positive", i,
                                    sc[i]);
            scale[ax[i]] = sc[i];
            os->dims[ax[i]] = (int64_t)floor((double)is->dims[ax[i]] * sc[i]);
        }
    }
    for (int i = 0; i < r; i++)
        if (os->dims[i] < 0 || (os->dims[i] == 0 && is->dims[i] != 0))
            return ir_node_fail(d, IR_ERR_SHAPE, n, "output dim %d would be %lld", i,
                                (long long)os->dims[i]);
    return IR_OK;
}

static ir_status resize_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    rs_attrs ra;
    ir_status st = rs_parse(g, n, &ra, d);
    if (st) return st;
    int r = x->shape.rank;
    if (r < 1 || x->dtype == IR_BOOL)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X must be a numeric tensor of rank >= 1");
    if (ra.ctm == CTM_TF_CROP && (ra.cubic || ra.antialias))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "tf_crop_and_resize runs nearest and linear, not %s",
                            ra.cubic ? "cubic" : "antialias");
    double sc[IR_MAX_RANK];
    int64_t sz[IR_MAX_RANK];
    int nsz = -2;
    if (ra.sizes_in >= 0 && ir_const_ints(g, n, ra.sizes_in, sz, IR_MAX_RANK, &nsz, d) != IR_OK)
        return IR_ERR_UNSUPPORTED;
    int nsc = -2;
    if (nsz < 0 && (nsc = const_floats(g, n, ra.scales_in, sc, IR_MAX_RANK, d)) == -1)
        return IR_ERR_UNSUPPORTED;
    ir_shape out;
    double scale[IR_MAX_RANK];
    if ((st = rs_geometry(n, &ra, &x->shape, sc, nsc, sz, nsz, &out, scale, d))) return st;
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static double resize_flops(const ir_graph *g, const ir_node *n) {
    rs_attrs ra;
    double outs = (double)ir_shape_numel(&ir_node_out(g, n, 0)->shape);
    if (rs_parse(g, n, &ra, NULL)) return 0;
    if (ra.cubic || ra.antialias) /* a multiply-add per tap and pass, 4 taps or more */
        return (ra.cubic ? 8.0 : 4.0) * outs * ir_node_in(g, n, 0)->shape.rank;
    return ra.linear ? 3.0 * outs * ir_node_in(g, n, 0)->shape.rank : 0;
}

/* Per output coordinate: two int64 source indices and a weight of the kernel's dtype. */
size_t ir_resize_tab_bytes(const ir_shape *os, ir_dtype t) {
    int64_t tot = 0;
    for (int i = 0; i < os->rank; i++) tot += os->dims[i];
    /* + one extrapolation flag per coordinate (tf_crop_and_resize) */
    return (size_t)tot * (2 * sizeof(int64_t) + (t == IR_F64 ? sizeof(double) : sizeof(float)) + 1);
}

static size_t resize_workspace(const ir_graph *g, const ir_node *n) {
    if (ir_resize_filtered(g, n))
        return ir_resize_filter_bytes(&ir_node_in(g, n, 0)->shape, &ir_node_out(g, n, 0)->shape,
                                      ir_node_in(g, n, 0)->dtype);
    return ir_resize_tab_bytes(&ir_node_out(g, n, 0)->shape, ir_node_in(g, n, 0)->dtype);
}

/* Source coordinate of output coordinate xo along a dim resized from `in` to `out` at `scale`.
 * align_corners and half_pixel_symmetric use the unrounded resized length in * scale, as ONNX
 * defines them (with sizes given, scale is out / in, so that is out). */
static double src_coord(enum rs_ctm ctm, double xo, double scale, int64_t in, int64_t out) {
    double len = (double)in * scale;
    switch (ctm) {
    case CTM_TF_CROP: return 0; /* tf_crop_coord: it needs the roi */
    case CTM_HALF_PIXEL: return (xo + 0.5) / scale - 0.5;
    case CTM_PYTORCH_HALF_PIXEL: return out > 1 ? (xo + 0.5) / scale - 0.5 : 0;
    case CTM_ALIGN_CORNERS: return len == 1 ? 0 : xo * (double)(in - 1) / (len - 1);
    case CTM_ASYMMETRIC: return xo / scale;
    case CTM_TF_NN: return (xo + 0.5) / scale;
    case CTM_HALF_PIXEL_SYMMETRIC: {
        double adj = (double)out / len, center = (double)in / 2;
        return center * (1 - adj) + (xo + 0.5) / scale - 0.5;
    }
    }
    return 0;
}

/* tf_crop_and_resize's source coordinate: the box [start, end] (fractions of in - 1) resized. */
static double tf_crop_coord(double xo, double start, double end, int64_t in, int64_t out) {
    if (out > 1)
        return start * (double)(in - 1) + xo * (end - start) * (double)(in - 1) / (out - 1);
    return 0.5 * (start + end) * (double)(in - 1);
}

/* The roi of every dim (start, end; 0 and 1 where none is given) from its 2 * naxes values
 * (all starts, then all ends, for opset 18's axes or every dim). */
static ir_status rs_roi(const ir_node *n, const rs_attrs *ra, int r, const double *roi, int nroi,
                        double *start, double *end, ir_diag *d) {
    int na = ra->n_axes >= 0 ? ra->n_axes : r;
    for (int i = 0; i < r; i++) start[i] = 0, end[i] = 1;
    if (nroi != 2 * na)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "tf_crop_and_resize needs roi of %d values (starts, then ends), not %d",
                            2 * na, nroi < 0 ? 0 : nroi);
    for (int i = 0; i < na; i++) {
        int ax = i;
        if (ra->n_axes >= 0 && !ir_norm_axis(ra->axes[i], r, &ax))
            return ir_node_fail(d, IR_ERR_INVALID, n, "axes[%d] is out of range", i);
        start[ax] = roi[i];
        end[ax] = roi[na + i];
    }
    return IR_OK;
}

static int64_t round_nearest(enum rs_round rnd, double x) {
    double f = floor(x), frac = x - f;
    switch (rnd) {
    case RND_PREFER_FLOOR: return (int64_t)(frac <= 0.5 ? f : f + 1);
    case RND_PREFER_CEIL: return (int64_t)(frac < 0.5 ? f : f + 1);
    case RND_FLOOR: return (int64_t)f;
    case RND_CEIL: return (int64_t)ceil(x);
    }
    return 0;
}

/* The scale of every dim for a resize from is to os, from k's scales or sizes input (as the
 * forward's inference computed them), or out/in where neither is a constant. */
static ir_status rs_kernel_scales(const ir_kernel_ctx *k, const rs_attrs *ra, const ir_shape *is,
                                  const ir_shape *os, double *scales) {
    const int r = is->rank;
    const ir_tensor *sct = ra->scales_in < k->n_in ? &k->in[ra->scales_in] : NULL;
    const ir_tensor *szt =
        ra->sizes_in >= 0 && ra->sizes_in < k->n_in ? &k->in[ra->sizes_in] : NULL;
    double sc[IR_MAX_RANK];
    int64_t sz[IR_MAX_RANK];
    int nsc = -2, nsz = -2;
    if (szt && szt->data && ir_tensor_numel(szt) > 0 && ir_tensor_numel(szt) <= IR_MAX_RANK) {
        nsz = (int)ir_tensor_numel(szt);
        for (int i = 0; i < nsz; i++) sz[i] = ir_load_i64(szt->data, szt->dtype, i);
    } else if (sct && sct->data && ir_tensor_numel(sct) > 0 &&
               ir_tensor_numel(sct) <= IR_MAX_RANK) {
        nsc = (int)ir_tensor_numel(sct);
        for (int i = 0; i < nsc; i++) sc[i] = ir_load_f64(sct->data, sct->dtype, i);
    }
    ir_shape want;
    if (nsz >= 0 || nsc >= 0)
        return rs_geometry(k->node, ra, is, sc, nsc, sz, nsz, &want, scales, k->diag);
    for (int i = 0; i < r; i++) scales[i] = (double)os->dims[i] / (double)is->dims[i];
    return IR_OK;
}

ir_status ir_resize_tabulate(const ir_kernel_ctx *k, const ir_shape *is, const ir_shape *os,
                             ir_resize_tab *t) {
    rs_attrs ra;
    ir_status st = rs_parse(k->graph, k->node, &ra, k->diag);
    if (st) return st;
    if (ra.cubic || ra.antialias) /* callers take ir_resize_filter_run's path first */
        return ir_node_fail(k->diag, IR_ERR_INTERNAL, k->node, "no two-tap table for this mode");
    const int r = is->rank;
    double scales[IR_MAX_RANK];
    if ((st = rs_kernel_scales(k, &ra, is, os, scales))) return st;
    int64_t tot = 0, *base = t->base, istr[IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        base[i] = tot;
        tot += os->dims[i];
    }
    const bool f64 = k->in[0].dtype == IR_F64;
    IR_ASSERT(k->workspace_bytes >= ir_resize_tab_bytes(os, k->in[0].dtype));
    int64_t *i0 = t->i0 = k->workspace, *i1 = t->i1 = i0 + tot;
    float *w = t->w = f64 ? NULL : (float *)(i1 + tot);
    double *w64 = t->w64 = f64 ? (double *)(i1 + tot) : NULL;
    uint8_t *ext = (uint8_t *)(i1 + tot) + (size_t)tot * (f64 ? sizeof(double) : sizeof(float));
    t->linear = ra.linear;
    t->ext = NULL;
    double start[IR_MAX_RANK], end[IR_MAX_RANK];
    if (ra.ctm == CTM_TF_CROP) {
        const ir_tensor *roi = k->n_in > 1 && k->in[1].data ? &k->in[1] : NULL;
        double rv[2 * IR_MAX_RANK];
        int nroi = roi && ir_tensor_numel(roi) <= 2 * IR_MAX_RANK ? (int)ir_tensor_numel(roi) : -1;
        for (int i = 0; i < nroi; i++) rv[i] = ir_load_f64(roi->data, roi->dtype, i);
        if ((st = rs_roi(k->node, &ra, r, rv, nroi, start, end, k->diag))) return st;
        t->ext = ext;
        t->extrapolation = ir_attr_float(k->node, "extrapolation_value", 0.0f);
    }
    ir_shape_strides(is, istr);
    for (int dd = 0; dd < r; dd++) {
        const int64_t in = is->dims[dd], out = os->dims[dd];
        double scale = scales[dd];
        for (int64_t xo = 0; xo < out; xo++) {
            double xs = ra.ctm == CTM_TF_CROP
                            ? tf_crop_coord((double)xo, start[dd], end[dd], in, out)
                            : src_coord(ra.ctm, (double)xo, scale, in, out);
            if (t->ext) ext[base[dd] + xo] = xs < 0 || xs > (double)(in - 1);
            int64_t a, b;
            double wt = 0;
            if (ra.linear) {
                xs = xs < 0 ? 0 : xs > (double)(in - 1) ? (double)(in - 1) : xs;
                a = (int64_t)floor(xs);
                b = a + 1 < in ? a + 1 : in - 1;
                wt = xs - (double)a;
            } else {
                a = round_nearest(ra.rnd, xs);
                a = a < 0 ? 0 : a >= in ? in - 1 : a;
                b = a;
            }
            i0[base[dd] + xo] = a * istr[dd];
            i1[base[dd] + xo] = b * istr[dd];
            if (w)
                w[base[dd] + xo] = (float)wt;
            else
                w64[base[dd] + xo] = wt;
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- cubic and antialias */

/* Cubic (any scale) and linear or cubic with antialias run as separable filters, one 1-D pass
 * per dim that is not an identity, as ONNX's reference defines them (onnx/reference/ops/
 * op_resize.py): at source coordinate xs, with left = ceil(xs) - 1 and ratio = xs - left in
 * (0, 1], the taps are left + i for i in [1 - m, m], each weighted by the kernel at
 * (left + i - xs) * s, s = min(scale, 1) under antialias (the kernel widened by 1/scale when
 * downsampling) and 1 otherwise, normalized to sum 1 under antialias; m = 2 for cubic, 1 for
 * linear, m = 1 - floor(-support / s) - 1 widened. Taps outside [0, in) read the edge value,
 * or get weight 0 under exclude_outside (the others then renormalized). */
#define RS_MAX_TAPS 256

bool ir_resize_filtered(const ir_graph *g, const ir_node *n) {
    rs_attrs ra;
    return rs_parse(g, n, &ra, NULL) == IR_OK && (ra.cubic || (ra.linear && ra.antialias));
}

/* Keys' cubic convolution kernel with parameter a. */
static double cubic_kernel(double x, double a) {
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* The taps of output coordinate xo along a dim: source indices (clamped to the edge) and
 * weights; returns their number, or -1 when more than RS_MAX_TAPS would be needed. */
static int rs_taps(const rs_attrs *ra, double xo, double scale, int64_t in, int64_t out,
                   int64_t *idx, double *w) {
    double xs = src_coord(ra->ctm, xo, scale, in, out);
    double left = ceil(xs) - 1;
    double s = ra->antialias && scale < 1 ? scale : 1;
    double support = ra->cubic ? 2 : 1;
    int64_t start = (int64_t)floor(-support / s) + 1; /* i runs from start to 1 - start */
    int64_t nt = 2 - 2 * start;
    if (nt > RS_MAX_TAPS) return -1;
    double sum = 0;
    for (int64_t i = 0; i < nt; i++) {
        double pos = left + (double)(start + i);
        double arg = (pos - xs) * s;
        double wt = ra->cubic ? cubic_kernel(arg, ra->cubic_a) : fmax(0, 1 - fabs(arg));
        if (ra->exclude_outside && (pos < 0 || pos >= (double)in)) wt = 0;
        int64_t p = (int64_t)pos;
        idx[i] = p < 0 ? 0 : p >= in ? in - 1 : p;
        w[i] = wt;
        sum += wt;
    }
    if ((ra->antialias || ra->exclude_outside) && sum != 0)
        for (int64_t i = 0; i < nt; i++) w[i] /= sum;
    return (int)nt;
}

/* The dims a filtered resize passes over (the others are identities), in order. */
static int rs_pass_dims(const rs_attrs *ra, const ir_shape *is, const ir_shape *os,
                        const double *scales, int *dims) {
    int np = 0;
    for (int i = 0; i < is->rank; i++)
        if (!(is->dims[i] == os->dims[i] && scales[i] == 1.0 && ra->ctm != CTM_TF_NN))
            dims[np++] = i;
    return np;
}

/* Two intermediate buffers of the largest shape between passes. */
size_t ir_resize_filter_bytes(const ir_shape *is, const ir_shape *os, ir_dtype t) {
    int64_t cur = ir_shape_numel(is), best = 0;
    for (int i = 0; i < is->rank; i++) {
        if (is->dims[i]) cur = cur / is->dims[i] * os->dims[i];
        if (cur > best) best = cur;
    }
    return 2 * (size_t)best * (t == IR_F64 ? sizeof(double) : sizeof(float));
}

#define IR_TMPL "ops-resize-kern.h"
#include "ir-float-tmpl.h"

/* The separable passes from src (shape is) to dst (shape os), or with adjoint from dY (shape os)
 * into dX (shape is), k's workspace holding ir_resize_filter_bytes(is, os, t). */
ir_status ir_resize_filter_run(const ir_kernel_ctx *k, const ir_shape *is, const ir_shape *os,
                               const void *src, void *dst, bool adjoint) {
    rs_attrs ra;
    ir_status st = rs_parse(k->graph, k->node, &ra, k->diag);
    if (st) return st;
    double scales[IR_MAX_RANK];
    if ((st = rs_kernel_scales(k, &ra, is, os, scales))) return st;
    int dims[IR_MAX_RANK], np = rs_pass_dims(&ra, is, os, scales, dims);
    for (int i = 0; i < np; i++) {
        int64_t idx[RS_MAX_TAPS];
        double w[RS_MAX_TAPS];
        int d = dims[i];
        if (is->dims[d] && os->dims[d] &&
            rs_taps(&ra, 0, scales[d], is->dims[d], os->dims[d], idx, w) < 0)
            return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                                "antialias over dim %d (scale %g) needs more than %d taps", d,
                                scales[d], RS_MAX_TAPS);
    }
    IR_ASSERT(k->workspace_bytes >= ir_resize_filter_bytes(is, os, k->in[0].dtype));
    if (k->in[0].dtype == IR_F64)
        return rs_filter_f64(k, &ra, is, os, scales, dims, np, src, dst, adjoint);
    return rs_filter_f32(k, &ra, is, os, scales, dims, np, src, dst, adjoint);
}

/* The dtype is X's alone: scales, an input too, may be float32 under a float64 X. */
static ir_status resize_kernel(const ir_kernel_ctx *k) {
    ir_dtype t = k->in[0].dtype;
    if ((t == IR_F32 || t == IR_F64) && ir_resize_filtered(k->graph, k->node))
        return ir_resize_filter_run(k, &k->in[0].shape, &k->out[0].shape, k->in[0].data,
                                    k->out[0].data, false);
    if (t == IR_F32) return resize_kernel_f32(k);
    if (t == IR_F64) return resize_kernel_f64(k);
    return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                        "the CPU kernel runs float32 and float64, not %s", ir_dtype_name(t));
}

/* ---------------------------------------------------------------- dims */

/* A dim maps identically when its size is unchanged, its scale (given, or out/in) is exactly 1
 * and the coordinate transformation maps x to x at scale 1: half_pixel ((x + 0.5) / 1 - 0.5),
 * pytorch_half_pixel, align_corners (x * (in - 1) / (out - 1)) and asymmetric do, exactly in
 * double; tf_half_pixel_for_nn's x + 0.5 may round up, so it is left out. Then the source index
 * is x and a linear weight is 0, whatever the other dims do. */
bool ir_resize_identity_dims(const ir_graph *g, const ir_node *n, const ir_shape *is,
                             const ir_shape *os, bool *mask) {
    rs_attrs ra;
    double sc[IR_MAX_RANK];
    if (is->rank != os->rank || rs_parse(g, n, &ra, NULL) != IR_OK) return false;
    int64_t sz[IR_MAX_RANK];
    int nsz = -2;
    if (ra.sizes_in >= 0 && ir_const_ints(g, n, ra.sizes_in, sz, IR_MAX_RANK, &nsz, NULL) != IR_OK)
        return false;
    int nsc = nsz >= 0 ? -2 : const_floats(g, n, ra.scales_in, sc, IR_MAX_RANK, NULL);
    double scale[IR_MAX_RANK];
    ir_shape want;
    if (nsc == -1 || rs_geometry(n, &ra, is, sc, nsc, sz, nsz, &want, scale, NULL) != IR_OK)
        return false;
    double start[IR_MAX_RANK], end[IR_MAX_RANK], roi[2 * IR_MAX_RANK];
    if (ra.ctm == CTM_TF_CROP) { /* identity where the box is the whole dim: x * (in-1)/(in-1) */
        int nroi = const_floats(g, n, 1, roi, 2 * IR_MAX_RANK, NULL);
        if (rs_roi(n, &ra, is->rank, roi, nroi, start, end, NULL) != IR_OK) return false;
    }
    for (int i = 0; i < is->rank; i++)
        mask[i] = is->dims[i] == os->dims[i] && scale[i] == 1.0 && ra.ctm != CTM_TF_NN &&
                  (ra.ctm != CTM_TF_CROP || (start[i] == 0 && end[i] == 1));
    return true;
}

/* Dims (ir.h, ir_dimlink): the dims that Resize maps identically (batch and channels, in
 * practice) link; the others interpolate across a split. */
static int resize_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0), *y = ir_node_out(g, n, 0);
    bool same[IR_MAX_RANK];
    if (!ir_resize_identity_dims(g, n, &x->shape, &y->shape, same)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++)
        if (same[i]) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Resize, 1, 4, 1, 1, .infer = resize_infer, .flops = resize_flops,
          .workspace = resize_workspace, .kernel = resize_kernel, .grad = ir_grad_Resize,
          .dims = resize_dims);
