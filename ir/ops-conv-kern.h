/* ops-conv-kern.h - the kernels of Conv and ConvTranspose (ops-conv.c): im2col, the depthwise
 * loops, col2im. Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and
 * the rest. */
/* Fills `rows` rows of `len` floats with bias[0..rows) (or zeros). */
static void FN(fill_rows)(FT *y, const FT *bias, int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; r++) {
        FT v = bias ? bias[r] : 0.0f;
        for (int64_t i = 0; i < len; i++) y[r * len + i] = v;
    }
}

/* col[(c,kd,kh,kw), (row - r0, ow)] = x[c, od*s-pb+kd*d, ...] (0 in the padding), for Cg
 * channels and the output rows [r0, r0 + nr) (row = od * out[1] + oh). */
void FN(ir_conv_im2col)(const FT *x, FT *col, const ir_conv_geom *cg, int64_t Cg, int64_t r0,
                        int64_t nr) {
    const int64_t K = ir_prod3(cg->k), TS = nr * cg->out[2], IS = ir_prod3(cg->in);
    const int64_t *in = cg->in, *out = cg->out, *k = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    IR_PARALLEL_FOR(Cg * K * TS >= IR_PAR_MIN)
    for (int64_t r = 0; r < Cg * K; r++) {
        int64_t c = r / K, kk = r % K;
        int64_t kd = kk / (k[1] * k[2]), kh = kk / k[2] % k[1], kw = kk % k[2];
        const FT *xc = x + c * IS;
        FT *dst = col + r * TS;
        int64_t off = kw * dl[2] - pb[2], lo, hi;
        ir_conv_valid_range(off, s[2], in[2], out[2], &lo, &hi);
        for (int64_t row = r0; row < r0 + nr; row++, dst += out[2]) {
            int64_t od = row / out[1], oh = row % out[1];
            int64_t id = od * s[0] - pb[0] + kd * dl[0], ih = oh * s[1] - pb[1] + kh * dl[1];
            if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1]) {
                memset(dst, 0, sizeof(FT) * (size_t)out[2]);
                continue;
            }
            const FT *xr = xc + (id * in[1] + ih) * in[2];
            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
            if (s[2] == 1)
                memcpy(dst + lo, xr + lo + off, sizeof(FT) * (size_t)(hi - lo));
            else
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = xr[ow * s[2] + off];
            for (int64_t ow = hi; ow < out[2]; ow++) dst[ow] = 0;
        }
    }
}

/* Output columns [ilo, ihi) of one row where every one of the KW taps is inside the input:
 * with KW a constant the taps unroll and the column loop vectorizes with the sum in a
 * register (one load and store of y per column instead of one per tap). */
static inline __attribute__((always_inline)) void
FN(dw_interior)(FT *restrict yr, const FT *restrict xr, const FT *restrict wr, int64_t ilo,
                int64_t ihi, int64_t off0, int64_t dil, int KW) {
    for (int64_t ow = ilo; ow < ihi; ow++) {
        FT acc = yr[ow];
        for (int kw = 0; kw < KW; kw++) acc += wr[kw] * xr[ow + off0 + kw * dil];
        yr[ow] = acc;
    }
}

/* One output plane of a conv with one input channel per group: xc is its input channel, wm its
 * kernel, ym the plane (already holding the bias). */
IR_HOT_CLONES static void FN(dw_plane)(const FT *restrict xc, const FT *restrict wm,
                                       FT *restrict ym, const ir_conv_geom *cg, const int64_t *lo_t,
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
                FT *restrict yr = ym + (od * out[1] + oh) * out[2];
                for (int64_t kh = 0; kh < k[1]; kh++) {
                    int64_t ih = oh * s[1] - pb[1] + kh * dl[1];
                    if (ih < 0 || ih >= in[1]) continue;
                    const FT *restrict xr = xc + (id * in[1] + ih) * in[2];
                    const FT *wr = wm + (kd * k[1] + kh) * k[2];
                    if (unrolled) {
                        int64_t off0 = -pb[2];
                        if (k[2] == 3) FN(dw_interior)(yr, xr, wr, ilo, ihi, off0, dl[2], 3);
                        if (k[2] == 5) FN(dw_interior)(yr, xr, wr, ilo, ihi, off0, dl[2], 5);
                        if (k[2] == 7) FN(dw_interior)(yr, xr, wr, ilo, ihi, off0, dl[2], 7);
                    }
                    for (int64_t kw = 0; kw < k[2]; kw++) {
                        int64_t off = kw * dl[2] - pb[2], lo, hi;
                        if (kw < DW_TAB) {
                            lo = lo_t[kw];
                            hi = hi_t[kw];
                        } else {
                            ir_conv_valid_range(off, s[2], in[2], out[2], &lo, &hi);
                        }
                        const FT wv = wr[kw];
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
static void FN(conv_depthwise)(const FT *x, const FT *w, const FT *b, FT *y,
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
        FN(fill_rows)(y + nm * OS, b ? b + m : NULL, 1, OS);
        FN(dw_plane)(x + (bn * cg->C + m / Mg) * IS, w + m * K, y + nm * OS, cg, lo_t, hi_t);
    }
}

/* A Conv or ConvTranspose kernel's geometry and operands (X, W, the optional bias B, Y
 * and the workspace), with the per-group channels Cg and Mg, the taps K and the plane sizes. */
typedef struct FN(conv_io) {
    ir_conv_geom cg;
    const FT *x, *w, *b;
    FT *y, *col;
    int64_t Cg, Mg, K, IS, OS;
} FN(conv_io);

static ir_status FN(conv_io_init)(const ir_kernel_ctx *k, bool transpose, FN(conv_io) * a) {
    ir_status st = ir_conv_parse(k->graph, k->node, transpose, &a->cg, k->diag);
    if (st) return st;
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

static ir_status FN(conv_kernel)(const ir_kernel_ctx *k) {
    FN(conv_io) a;
    ir_status st = FN(conv_io_init)(k, false, &a);
    if (st) return st;
    const ir_conv_geom *cg = &a.cg;
    enum conv_path path = conv_path(cg);
    if (path == PATH_DEPTHWISE) {
        FN(conv_depthwise)(a.x, a.w, a.b, a.y, cg);
        return IR_OK;
    }
    const int64_t rows = cg->out[0] * cg->out[1], W2 = cg->out[2], CK = a.Cg * a.K;
    const int64_t tr = ir_conv_col_rows(cg, a.Cg, sizeof(FT));
    IR_ASSERT(path != PATH_IM2COL || k->workspace_bytes >= (size_t)(CK * tr * W2) * sizeof(FT));
    for (int64_t bn = 0; bn < cg->N; bn++)
        for (int64_t gi = 0; gi < cg->group; gi++) {
            const FT *xg = a.x + (bn * cg->C + gi * a.Cg) * a.IS,
                     *wg = a.w + gi * a.Mg * a.Cg * a.K;
            FT *yg = a.y + (bn * cg->M + gi * a.Mg) * a.OS;
            if (a.b) FN(fill_rows)(yg, a.b + gi * a.Mg, a.Mg, a.OS);
            if (path != PATH_IM2COL) {
                FT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a.Mg, (int)a.OS, (int)CK,
                        1.0f, wg, (int)CK, xg, (int)a.OS, a.b ? 1.0f : 0.0f, yg, (int)a.OS);
                continue;
            }
            /* Y_g[:, tile] (+)= W_g col_tile, one tile of output rows at a time */
            for (int64_t r0 = 0; r0 < rows; r0 += tr) {
                const int64_t nr = rows - r0 < tr ? rows - r0 : tr, TS = nr * W2;
                FN(ir_conv_im2col)(xg, a.col, cg, a.Cg, r0, nr);
                FT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a.Mg, (int)TS, (int)CK,
                        1.0f, wg, (int)CK, a.col, (int)TS, a.b ? 1.0f : 0.0f, yg + r0 * W2,
                        (int)a.OS);
            }
        }
    return IR_OK;
}

/* y[m, o*s - pb + k*d] += col[(m,k), i - i0] for the input pixels i of the input rows [r0, r0 +
 * nr) (row = id * in[1] + ih; i0 the first pixel of row r0): the adjoint of im2col, one output
 * channel per iteration so that parallel iterations never write the same element. */
static void FN(col2im)(const FT *col, FT *y, const ir_conv_geom *cg, int64_t Mg, int64_t r0,
                       int64_t nr) {
    const int64_t K = ir_prod3(cg->k), OS = ir_prod3(cg->out), TS = nr * cg->in[2];
    const int64_t *in = cg->in, *out = cg->out, *k = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    IR_PARALLEL_FOR(Mg * K * TS >= IR_PAR_MIN)
    for (int64_t m = 0; m < Mg; m++) {
        FT *ym = y + m * OS;
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t kd = kk / (k[1] * k[2]), kh = kk / k[2] % k[1], kw = kk % k[2];
            const FT *src = col + (m * K + kk) * TS;
            int64_t off = kw * dl[2] - pb[2], lo, hi;
            ir_conv_valid_range(off, s[2], out[2], in[2], &lo, &hi);
            for (int64_t row = r0; row < r0 + nr; row++) {
                int64_t id = row / in[1], ih = row % in[1];
                int64_t od = id * s[0] - pb[0] + kd * dl[0], oh = ih * s[1] - pb[1] + kh * dl[1];
                if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1]) continue;
                const FT *sr = src + (row - r0) * in[2];
                FT *yr = ym + (od * out[1] + oh) * out[2];
                for (int64_t iw = lo; iw < hi; iw++) yr[iw * s[2] + off] += sr[iw];
            }
        }
    }
}

static ir_status FN(convt_kernel)(const ir_kernel_ctx *k) {
    FN(conv_io) a;
    ir_status st = FN(conv_io_init)(k, true, &a);
    if (st) return st;
    const ir_conv_geom *cg = &a.cg;
    const int64_t rows = cg->in[0] * cg->in[1], W2 = cg->in[2], MK = a.Mg * a.K;
    const int64_t tr = ir_convt_col_rows(cg, sizeof(FT));
    IR_ASSERT(k->workspace_bytes >= (size_t)(MK * tr * W2) * sizeof(FT));
    for (int64_t bn = 0; bn < cg->N; bn++)
        for (int64_t gi = 0; gi < cg->group; gi++) {
            const FT *xg = a.x + (bn * cg->C + gi * a.Cg) * a.IS,
                     *wg = a.w + gi * a.Cg * a.Mg * a.K;
            FT *yg = a.y + (bn * cg->M + gi * a.Mg) * a.OS;
            FN(fill_rows)(yg, a.b ? a.b + gi * a.Mg : NULL, a.Mg, a.OS);
            /* W_g is [Cg, Mg*K]: col = W_g^T X_g[:, tile] is [Mg*K, tile], one tile of input
             * rows at a time, scattered into Y_g */
            for (int64_t r0 = 0; r0 < rows; r0 += tr) {
                const int64_t nr = rows - r0 < tr ? rows - r0 : tr, TS = nr * W2;
                FT_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)MK, (int)TS, (int)a.Cg, 1.0f,
                        wg, (int)MK, xg + r0 * W2, (int)a.IS, 0.0f, a.col, (int)TS);
                FN(col2im)(a.col, yg, cg, a.Mg, r0, nr);
            }
        }
    return IR_OK;
}
