/* ops-conv.c - Conv and ConvTranspose with 1 to 3 spatial dims (ONNX opsets 11-17).
 *
 * Conv runs as im2col into the workspace + one sgemm per (batch, group). Two paths skip
 * im2col: 1x1 stride-1 unpadded convs hand X to sgemm as it is, and convs with one input
 * channel per group (depthwise, any channel multiplier) run a direct loop over output rows.
 * ConvTranspose computes W_g^T X_g into the workspace (sgemm) and scatters it with col2im.
 *
 * Invariants: geometry is padded to 3 spatial dims (leading dims of size 1) so that one loop
 * nest serves 1-, 2- and 3-D; conv_workspace() returns exactly the bytes of the path the kernel
 * takes (conv_path() decides both). Kernels run float32; other float dtypes infer and count but
 * their kernels answer IR_ERR_UNSUPPORTED. Conv and ConvTranspose are multilinear in (X, W)
 * when they have no bias. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <cblas.h>
#include <string.h>

enum conv_path { PATH_IM2COL, PATH_GEMM_DIRECT, PATH_DEPTHWISE };

/* Reads X, W (and B) shapes and the attributes of node n into cg, validating them. */
ir_status ir_conv_parse(const ir_graph *g, const ir_node *n, bool transpose, ir_conv_geom *cg,
                        ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0), *w = ir_node_in(g, n, 1), *b = ir_node_in(g, n, 2);
    char s1[96], s2[96];
    memset(cg, 0, sizeof *cg);
    int r = x->shape.rank, S = r - 2;
    if (r < 3 || r > 5)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "X has shape %s; expected rank 3 to 5 (N,C,spatial)",
                            ir_shape_str(&x->shape, s1, sizeof s1));
    if (w->shape.rank != r)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "W has shape %s but X has shape %s (ranks differ)",
                            ir_shape_str(&w->shape, s1, sizeof s1),
                            ir_shape_str(&x->shape, s2, sizeof s2));
    if (!ir_dtype_is_float(x->dtype) || w->dtype != x->dtype)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X (%s) and W (%s) must share one float dtype",
                            ir_dtype_name(x->dtype), ir_dtype_name(w->dtype));
    cg->S = S;
    cg->N = x->shape.dims[0];
    cg->C = x->shape.dims[1];
    cg->group = ir_attr_int(n, "group", 1);
    if (cg->group < 1)
        return ir_node_fail(d, IR_ERR_INVALID, n, "group is %lld", (long long)cg->group);
    if (cg->C % cg->group)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has %lld channels, not divisible by group %lld",
                            (long long)cg->C, (long long)cg->group);
    if (!transpose) {
        cg->M = w->shape.dims[0];
        if (w->shape.dims[1] * cg->group != cg->C || cg->M % cg->group)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "W has shape %s; with group %lld it needs %lld input channels "
                                "(X has %lld) and output channels divisible by the group",
                                ir_shape_str(&w->shape, s1, sizeof s1), (long long)cg->group,
                                (long long)(w->shape.dims[1] * cg->group), (long long)cg->C);
    } else {
        cg->M = w->shape.dims[1] * cg->group;
        if (w->shape.dims[0] != cg->C)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "W has shape %s; its first dim must equal X's channels (%lld)",
                                ir_shape_str(&w->shape, s1, sizeof s1), (long long)cg->C);
    }
    if (b) {
        if (b->shape.rank != 1 || b->shape.dims[0] != cg->M || b->dtype != x->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "B has shape %s (%s); expected [%lld] (%s)",
                                ir_shape_str(&b->shape, s1, sizeof s1), ir_dtype_name(b->dtype),
                                (long long)cg->M, ir_dtype_name(x->dtype));
        cg->bias = true;
    }
    int64_t ks[3], st[3], dl[3], pads[6], opad[3], oshape[5];
    ir_status rc;
    if ((rc = ir_attr_ints_n(n, "strides", S, 1, st, d)) ||
        (rc = ir_attr_ints_n(n, "dilations", S, 1, dl, d)) ||
        (rc = ir_attr_ints_n(n, "pads", 2 * S, 0, pads, d)) ||
        (rc = ir_attr_ints_n(n, "kernel_shape", S, 0, ks, d)) ||
        (rc = ir_attr_ints_n(n, "output_padding", S, 0, opad, d)))
        return rc;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same_up = !strcmp(ap, "SAME_UPPER"), same_lo = !strcmp(ap, "SAME_LOWER");
    bool valid = !strcmp(ap, "VALID"), notset = !strcmp(ap, "NOTSET");
    if (!same_up && !same_lo && !valid && !notset)
        return ir_node_fail(d, IR_ERR_INVALID, n, "auto_pad '%s' is not a valid value", ap);
    const int64_t *os = NULL;
    int n_os = transpose ? ir_attr_ints(n, "output_shape", &os) : -1;
    if (n_os >= 0 && n_os != S && n_os != S + 2)
        return ir_node_fail(d, IR_ERR_INVALID, n, "output_shape has %d values, expected %d", n_os,
                            S);
    for (int i = 0; i < S && n_os >= 0; i++) oshape[i] = os[n_os - S + i];

    for (int i = 0; i < 3; i++) {
        cg->in[i] = cg->out[i] = cg->k[i] = cg->s[i] = cg->d[i] = 1;
        cg->pb[i] = cg->pe[i] = 0;
    }
    for (int i = 0; i < S; i++) {
        int j = 3 - S + i;
        int64_t in = x->shape.dims[2 + i], k = w->shape.dims[2 + i];
        if (ks[i] && ks[i] != k)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "kernel_shape[%d]=%lld but W has %lld there", i,
                                (long long)ks[i], (long long)k);
        if (st[i] < 1 || dl[i] < 1 || k < 1 || in < 1)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "spatial dim %d: input %lld, kernel %lld, stride %lld, dilation "
                                "%lld must all be positive",
                                i, (long long)in, (long long)k, (long long)st[i], (long long)dl[i]);
        int64_t dk = (k - 1) * dl[i] + 1, out, pb = pads[i], pe = pads[S + i];
        if (!transpose) {
            if (valid) {
                pb = pe = 0;
            } else if (same_up || same_lo) {
                out = (in + st[i] - 1) / st[i];
                int64_t tot = (out - 1) * st[i] + dk - in;
                if (tot < 0) tot = 0;
                pb = same_up ? tot / 2 : tot - tot / 2;
                pe = tot - pb;
            }
            if (pb < 0 || pe < 0 || in + pb + pe < dk)
                return ir_node_fail(d, IR_ERR_SHAPE, n,
                                    "spatial dim %d: input %lld with pads %lld+%lld is smaller "
                                    "than the dilated kernel %lld",
                                    i, (long long)in, (long long)pb, (long long)pe, (long long)dk);
            out = (in + pb + pe - dk) / st[i] + 1;
        } else {
            int64_t full = st[i] * (in - 1) + opad[i] + dk;
            if (opad[i] < 0 || (opad[i] >= st[i] && opad[i] >= dl[i]))
                return ir_node_fail(d, IR_ERR_INVALID, n,
                                    "output_padding[%d]=%lld must be smaller than the stride or "
                                    "the dilation",
                                    i, (long long)opad[i]);
            if (n_os >= 0 || same_up || same_lo) {
                out = n_os >= 0 ? oshape[i] : in * st[i];
                /* ONNX's formula divides with Python's floor: a total of -1 (output_shape one
                 * larger than the full output) puts the extra row or column at the end */
                int64_t tot = full - out, half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2);
                pb = same_up ? half : tot - half;
                pe = tot - pb;
            } else if (valid) {
                pb = pe = 0;
            }
            out = full - pb - pe;
        }
        if (out < 1)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "spatial dim %d of the output would be %lld", i,
                                (long long)out);
        cg->in[j] = in;
        cg->out[j] = out;
        cg->k[j] = k;
        cg->s[j] = st[i];
        cg->d[j] = dl[i];
        cg->pb[j] = pb;
        cg->pe[j] = pe;
    }
    return IR_OK;
}

static ir_status conv_infer_common(ir_graph *g, ir_node *n, bool transpose, ir_diag *d) {
    ir_conv_geom cg;
    ir_status st = ir_conv_parse(g, n, transpose, &cg, d);
    if (st) return st;
    ir_shape out = {.rank = cg.S + 2};
    out.dims[0] = cg.N;
    out.dims[1] = cg.M;
    for (int i = 0; i < cg.S; i++) out.dims[2 + i] = cg.out[3 - cg.S + i];
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &out);
    return IR_OK;
}

static ir_status conv_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return conv_infer_common(g, n, false, d);
}
static ir_status convt_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    return conv_infer_common(g, n, true, d);
}

static enum conv_path conv_path(const ir_conv_geom *cg) {
    if (cg->C / cg->group == 1) return PATH_DEPTHWISE;
    bool unit = true;
    for (int i = 0; i < 3; i++)
        unit = unit && cg->k[i] == 1 && cg->s[i] == 1 && cg->pb[i] == 0 && cg->pe[i] == 0;
    return unit ? PATH_GEMM_DIRECT : PATH_IM2COL;
}

static double conv_flops(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, false, &cg, NULL)) return 0;
    double outs = (double)cg.N * (double)cg.M * (double)ir_prod3(cg.out);
    return outs * (2.0 * (double)(cg.C / cg.group) * (double)ir_prod3(cg.k) + (cg.bias ? 1 : 0));
}

static double convt_flops(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, true, &cg, NULL)) return 0;
    double macs = (double)cg.N * (double)cg.C * (double)ir_prod3(cg.in) *
                  (double)(cg.M / cg.group) * (double)ir_prod3(cg.k);
    return 2.0 * macs + (cg.bias ? (double)cg.N * (double)cg.M * (double)ir_prod3(cg.out) : 0);
}

static size_t conv_workspace(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, false, &cg, NULL) || conv_path(&cg) != PATH_IM2COL) return 0;
    return (size_t)(cg.C / cg.group * ir_prod3(cg.k) * ir_prod3(cg.out)) * sizeof(float);
}

static size_t convt_workspace(const ir_graph *g, const ir_node *n) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, true, &cg, NULL)) return 0;
    return (size_t)(cg.M / cg.group * ir_prod3(cg.k) * ir_prod3(cg.in)) * sizeof(float);
}

/* Fills `rows` rows of `len` floats with bias[0..rows) (or zeros). */
static void fill_rows(float *y, const float *bias, int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; r++) {
        float v = bias ? bias[r] : 0.0f;
        for (int64_t i = 0; i < len; i++) y[r * len + i] = v;
    }
}

/* col[(c,kd,kh,kw), (od,oh,ow)] = x[c, od*s-pb+kd*d, ...] (0 in the padding), for Cg channels. */
void ir_conv_im2col(const float *x, float *col, const ir_conv_geom *cg, int64_t Cg) {
    const int64_t K = ir_prod3(cg->k), OS = ir_prod3(cg->out), IS = ir_prod3(cg->in);
    const int64_t *in = cg->in, *out = cg->out, *k = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    IR_PARALLEL_FOR(Cg * K * OS >= IR_PAR_MIN)
    for (int64_t r = 0; r < Cg * K; r++) {
        int64_t c = r / K, kk = r % K;
        int64_t kd = kk / (k[1] * k[2]), kh = kk / k[2] % k[1], kw = kk % k[2];
        const float *xc = x + c * IS;
        float *dst = col + r * OS;
        int64_t off = kw * dl[2] - pb[2], lo, hi;
        ir_conv_valid_range(off, s[2], in[2], out[2], &lo, &hi);
        for (int64_t od = 0; od < out[0]; od++) {
            int64_t id = od * s[0] - pb[0] + kd * dl[0];
            for (int64_t oh = 0; oh < out[1]; oh++, dst += out[2]) {
                int64_t ih = oh * s[1] - pb[1] + kh * dl[1];
                if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1]) {
                    memset(dst, 0, sizeof(float) * (size_t)out[2]);
                    continue;
                }
                const float *xr = xc + (id * in[1] + ih) * in[2];
                for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
                if (s[2] == 1)
                    memcpy(dst + lo, xr + lo + off, sizeof(float) * (size_t)(hi - lo));
                else
                    for (int64_t ow = lo; ow < hi; ow++) dst[ow] = xr[ow * s[2] + off];
                for (int64_t ow = hi; ow < out[2]; ow++) dst[ow] = 0;
            }
        }
    }
}

/* The valid output columns of the first DW_TAB kernel columns, hoisted out of the row loops
 * (two divisions per row of ~50 multiply-adds would dominate otherwise). */
enum { DW_TAB = 32 };

/* Output columns [ilo, ihi) of one row where every one of the KW taps is inside the input:
 * with KW a constant the taps unroll and the column loop vectorizes with the sum in a
 * register (one load and store of y per column instead of one per tap). */
static inline __attribute__((always_inline)) void
dw_interior(float *restrict yr, const float *restrict xr, const float *restrict wr, int64_t ilo,
            int64_t ihi, int64_t off0, int64_t dil, int KW) {
    for (int64_t ow = ilo; ow < ihi; ow++) {
        float acc = yr[ow];
        for (int kw = 0; kw < KW; kw++) acc += wr[kw] * xr[ow + off0 + kw * dil];
        yr[ow] = acc;
    }
}

/* One output plane of a conv with one input channel per group: xc is its input channel, wm its
 * kernel, ym the plane (already holding the bias). */
IR_HOT_CLONES static void dw_plane(const float *restrict xc, const float *restrict wm,
                                   float *restrict ym, const ir_conv_geom *cg, const int64_t *lo_t,
                                   const int64_t *hi_t) {
    const int64_t *in = cg->in, *out = cg->out, *k = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    /* unit-stride rows with a 3-, 5- or 7-wide kernel take the unrolled interior path; the
     * columns outside it (and every other shape) go tap by tap */
    const bool unrolled = s[2] == 1 && (k[2] == 3 || k[2] == 5 || k[2] == 7);
    int64_t ilo = 0, ihi = 0;
    if (unrolled) {
        ilo = lo_t[0];
        ihi = hi_t[0];
        for (int64_t kw = 1; kw < k[2]; kw++) {
            ilo = lo_t[kw] > ilo ? lo_t[kw] : ilo;
            ihi = hi_t[kw] < ihi ? hi_t[kw] : ihi;
        }
        if (ihi < ilo) ihi = ilo;
    }
    for (int64_t od = 0; od < out[0]; od++)
        for (int64_t kd = 0; kd < k[0]; kd++) {
            int64_t id = od * s[0] - pb[0] + kd * dl[0];
            if (id < 0 || id >= in[0]) continue;
            for (int64_t oh = 0; oh < out[1]; oh++) {
                float *restrict yr = ym + (od * out[1] + oh) * out[2];
                for (int64_t kh = 0; kh < k[1]; kh++) {
                    int64_t ih = oh * s[1] - pb[1] + kh * dl[1];
                    if (ih < 0 || ih >= in[1]) continue;
                    const float *restrict xr = xc + (id * in[1] + ih) * in[2];
                    const float *wr = wm + (kd * k[1] + kh) * k[2];
                    if (unrolled) {
                        int64_t off0 = -pb[2];
                        if (k[2] == 3) dw_interior(yr, xr, wr, ilo, ihi, off0, dl[2], 3);
                        if (k[2] == 5) dw_interior(yr, xr, wr, ilo, ihi, off0, dl[2], 5);
                        if (k[2] == 7) dw_interior(yr, xr, wr, ilo, ihi, off0, dl[2], 7);
                    }
                    for (int64_t kw = 0; kw < k[2]; kw++) {
                        int64_t off = kw * dl[2] - pb[2], lo, hi;
                        if (kw < DW_TAB) {
                            lo = lo_t[kw];
                            hi = hi_t[kw];
                        } else {
                            ir_conv_valid_range(off, s[2], in[2], out[2], &lo, &hi);
                        }
                        const float wv = wr[kw];
                        if (s[2] != 1) {
                            for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * s[2] + off];
                            continue;
                        }
                        /* with the interior done, only [lo, ilo) and [ihi, hi) remain */
                        int64_t e1 = unrolled && ilo < hi ? ilo : hi;
                        for (int64_t ow = lo; ow < e1; ow++) yr[ow] += wv * xr[ow + off];
                        int64_t b2 = unrolled ? (ihi > lo ? ihi : lo) : hi;
                        for (int64_t ow = b2; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
                    }
                }
            }
        }
}

/* Convs with one input channel per group: each output channel m reads input channel
 * m / (M/group) only, so a direct loop over output rows beats im2col + a 1-row gemm. */
static void conv_depthwise(const float *x, const float *w, const float *b, float *y,
                           const ir_conv_geom *cg) {
    const int64_t K = ir_prod3(cg->k), OS = ir_prod3(cg->out), IS = ir_prod3(cg->in);
    const int64_t Mg = cg->M / cg->group;
    int64_t lo_t[DW_TAB], hi_t[DW_TAB];
    for (int64_t kw = 0; kw < cg->k[2] && kw < DW_TAB; kw++)
        ir_conv_valid_range(kw * cg->d[2] - cg->pb[2], cg->s[2], cg->in[2], cg->out[2], &lo_t[kw],
                            &hi_t[kw]);
    IR_PARALLEL_FOR(cg->N * cg->M * OS * K >= IR_PAR_MIN)
    for (int64_t nm = 0; nm < cg->N * cg->M; nm++) {
        int64_t bn = nm / cg->M, m = nm % cg->M;
        fill_rows(y + nm * OS, b ? b + m : NULL, 1, OS);
        dw_plane(x + (bn * cg->C + m / Mg) * IS, w + m * K, y + nm * OS, cg, lo_t, hi_t);
    }
}

/* A Conv or ConvTranspose kernel's geometry and float32 operands (X, W, the optional bias B, Y
 * and the workspace), with the per-group channels Cg and Mg, the taps K and the plane sizes. */
typedef struct conv_io {
    ir_conv_geom cg;
    const float *x, *w, *b;
    float *y, *col;
    int64_t Cg, Mg, K, IS, OS;
} conv_io;

static ir_status conv_io_init(const ir_kernel_ctx *k, bool transpose, conv_io *a) {
    ir_status st = ir_conv_parse(k->graph, k->node, transpose, &a->cg, k->diag);
    if (st || (st = ir_check_f32(k))) return st;
    const ir_conv_geom *cg = &a->cg;
    a->x = k->in[0].data;
    a->w = k->in[1].data;
    a->b = k->n_in > 2 ? k->in[2].data : NULL;
    a->y = k->out[0].data;
    a->col = k->workspace;
    a->Cg = cg->C / cg->group;
    a->Mg = cg->M / cg->group;
    a->K = ir_prod3(cg->k);
    a->IS = ir_prod3(cg->in);
    a->OS = ir_prod3(cg->out);
    return IR_OK;
}

static ir_status conv_kernel(const ir_kernel_ctx *k) {
    conv_io a;
    ir_status st = conv_io_init(k, false, &a);
    if (st) return st;
    const ir_conv_geom *cg = &a.cg;
    enum conv_path path = conv_path(cg);
    if (path == PATH_DEPTHWISE) {
        conv_depthwise(a.x, a.w, a.b, a.y, cg);
        return IR_OK;
    }
    IR_ASSERT(path != PATH_IM2COL ||
              k->workspace_bytes >= (size_t)(a.Cg * a.K * a.OS) * sizeof(float));
    for (int64_t bn = 0; bn < cg->N; bn++)
        for (int64_t gi = 0; gi < cg->group; gi++) {
            const float *xg = a.x + (bn * cg->C + gi * a.Cg) * a.IS,
                        *wg = a.w + gi * a.Mg * a.Cg * a.K;
            float *yg = a.y + (bn * cg->M + gi * a.Mg) * a.OS;
            if (path == PATH_IM2COL) ir_conv_im2col(xg, a.col, cg, a.Cg);
            if (a.b) fill_rows(yg, a.b + gi * a.Mg, a.Mg, a.OS);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a.Mg, (int)a.OS,
                        (int)(a.Cg * a.K), 1.0f, wg, (int)(a.Cg * a.K),
                        path == PATH_IM2COL ? a.col : xg, (int)a.OS, a.b ? 1.0f : 0.0f, yg,
                        (int)a.OS);
        }
    return IR_OK;
}

/* y[m, o*s - pb + k*d] += col[(m,k), i]: the adjoint of im2col, one output channel per
 * iteration so that parallel iterations never write the same element. */
static void col2im(const float *col, float *y, const ir_conv_geom *cg, int64_t Mg) {
    const int64_t K = ir_prod3(cg->k), OS = ir_prod3(cg->out), IS = ir_prod3(cg->in);
    const int64_t *in = cg->in, *out = cg->out, *k = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    IR_PARALLEL_FOR(Mg * K * IS >= IR_PAR_MIN)
    for (int64_t m = 0; m < Mg; m++) {
        float *ym = y + m * OS;
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t kd = kk / (k[1] * k[2]), kh = kk / k[2] % k[1], kw = kk % k[2];
            const float *src = col + (m * K + kk) * IS;
            int64_t off = kw * dl[2] - pb[2], lo, hi;
            ir_conv_valid_range(off, s[2], out[2], in[2], &lo, &hi);
            for (int64_t id = 0; id < in[0]; id++) {
                int64_t od = id * s[0] - pb[0] + kd * dl[0];
                for (int64_t ih = 0; ih < in[1]; ih++) {
                    int64_t oh = ih * s[1] - pb[1] + kh * dl[1];
                    if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1]) continue;
                    const float *sr = src + (id * in[1] + ih) * in[2];
                    float *yr = ym + (od * out[1] + oh) * out[2];
                    for (int64_t iw = lo; iw < hi; iw++) yr[iw * s[2] + off] += sr[iw];
                }
            }
        }
    }
}

static ir_status convt_kernel(const ir_kernel_ctx *k) {
    conv_io a;
    ir_status st = conv_io_init(k, true, &a);
    if (st) return st;
    const ir_conv_geom *cg = &a.cg;
    IR_ASSERT(k->workspace_bytes >= (size_t)(a.Mg * a.K * a.IS) * sizeof(float));
    for (int64_t bn = 0; bn < cg->N; bn++)
        for (int64_t gi = 0; gi < cg->group; gi++) {
            const float *xg = a.x + (bn * cg->C + gi * a.Cg) * a.IS,
                        *wg = a.w + gi * a.Cg * a.Mg * a.K;
            float *yg = a.y + (bn * cg->M + gi * a.Mg) * a.OS;
            /* W_g is [Cg, Mg*K]: col = W_g^T X_g is [Mg*K, IS] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(a.Mg * a.K), (int)a.IS,
                        (int)a.Cg, 1.0f, wg, (int)(a.Mg * a.K), xg, (int)a.IS, 0.0f, a.col,
                        (int)a.IS);
            fill_rows(yg, a.b ? a.b + gi * a.Mg : NULL, a.Mg, a.OS);
            col2im(a.col, yg, cg, a.Mg);
        }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink). The batch always links. The output channels link when each reads its
 * own filter over whole inputs: group 1 (W's output-channel dim, with the bias), or depthwise with
 * one channel per group on both sides (then X's channel too: output channel c reads input
 * channel c alone); other groupings would need X split by groups, so they get none. The input
 * channels are a sum over X's and W's channel dims for group 1 without bias (with a bias, the
 * parts would each add it). A spatial dim links only for a pointwise window (kernel 1, stride 1,
 * no pads, no output padding): any other window reads a halo across a split. */
static int conv_dims_common(const ir_graph *g, const ir_node *n, ir_dimlink *l, bool transpose) {
    ir_conv_geom cg;
    if (ir_conv_parse(g, n, transpose, &cg, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    bool depthwise = cg.group > 1 && cg.group == cg.C && cg.group == cg.M;
    /* W is [M, C/group, k...] for Conv and [C, M/group, k...] for ConvTranspose */
    int w_out = transpose && !depthwise ? 1 : 0, w_in = transpose ? 0 : 1;
    ir_dims_keep(&o, 0, 0, 0, 0);
    if (cg.group == 1 || depthwise) {
        ir_dims_keep(&o, 1, w_out, 0, 1);
        if (depthwise) ir_dims_keep(&o, 0, 1, 0, 1);
        if (cg.bias) ir_dims_keep(&o, 2, 0, 0, 1);
    }
    if (cg.group == 1 && !cg.bias) {
        ir_dims_reduce(&o, 0, 1, 1, true);
        ir_dims_reduce(&o, 1, w_in, 1, true);
    }
    for (int i = 0; i < cg.S; i++) {
        int j = 3 - cg.S + i;
        if (cg.k[j] == 1 && cg.s[j] == 1 && cg.pb[j] == 0 && cg.pe[j] == 0 && cg.in[j] == cg.out[j])
            ir_dims_keep(&o, 0, 2 + i, 0, 2 + i);
    }
    return ir_dims_end(&o);
}

static int conv_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    return conv_dims_common(g, n, l, false);
}
static int convt_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    return conv_dims_common(g, n, l, true);
}

IR_OP_DEF(Conv, 2, 3, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = conv_infer, .flops = conv_flops,
          .workspace = conv_workspace, .kernel = conv_kernel, .grad = ir_grad_Conv,
          .dims = conv_dims);

IR_OP_DEF(ConvTranspose, 2, 3, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = convt_infer,
          .flops = convt_flops, .workspace = convt_workspace, .kernel = convt_kernel,
          .grad = ir_grad_ConvTranspose, .dims = convt_dims);
