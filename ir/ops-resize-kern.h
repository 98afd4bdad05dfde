/* ops-resize-kern.h - the kernel of Resize (ops-resize.c).
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* tf_crop_and_resize: the elements of output row yr (outer indices idx) with a coordinate outside
 * the input take the extrapolation value. */
static void FN(rs_extrapolate)(const ir_resize_tab *t, const int64_t *idx, int r, FT *yr,
                               int64_t ow) {
    bool all = false;
    for (int dd = 0; dd < r - 1 && !all; dd++) all = t->ext[t->base[dd] + idx[dd]];
    const uint8_t *le = t->ext + t->base[r - 1];
    for (int64_t xo = 0; xo < ow; xo++)
        if (all || le[xo]) yr[xo] = (FT)t->extrapolation;
}

static ir_status FN(resize_kernel)(const ir_kernel_ctx *k) {
    const ir_shape *is = &k->in[0].shape, *os = &k->out[0].shape;
    const int r = is->rank;
    ir_resize_tab tab;
    ir_status st = ir_resize_tabulate(k, is, os, &tab);
    if (st) return st;
    const int64_t *i0 = tab.i0, *i1 = tab.i1, *base = tab.base;
#if FT_IS_F64
    const FT *w = tab.w64;
#else
    const FT *w = tab.w;
#endif
    const FT *x = k->in[0].data;
    FT *y = k->out[0].data;
    const int64_t ow = os->dims[r - 1], rows = ow ? ir_tensor_numel(&k->out[0]) / ow : 0;
    const int64_t *l0 = i0 + base[r - 1], *l1 = i1 + base[r - 1];
    const FT *lw = w + base[r - 1];
    const int nc = tab.linear ? 1 << (r - 1) : 1; /* corner combinations of the outer dims */
    IR_PARALLEL_FOR(rows * ow * nc >= IR_PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t idx[IR_MAX_RANK], rem = row;
        for (int dd = r - 2; dd >= 0; dd--) {
            idx[dd] = rem % os->dims[dd];
            rem /= os->dims[dd];
        }
        FT *yr = y + row * ow;
        if (!tab.linear) {
            int64_t off = 0;
            for (int dd = 0; dd < r - 1; dd++) off += i0[base[dd] + idx[dd]];
            for (int64_t xo = 0; xo < ow; xo++) yr[xo] = x[off + l0[xo]];
            if (tab.ext) FN(rs_extrapolate)(&tab, idx, r, yr, ow);
            continue;
        }
        for (int64_t xo = 0; xo < ow; xo++) yr[xo] = 0;
        for (int c = 0; c < nc; c++) {
            FT cw = 1;
            int64_t off = 0;
            for (int dd = 0; dd < r - 1; dd++) {
                int64_t t = base[dd] + idx[dd];
                bool hi = (c >> dd) & 1;
                cw *= hi ? w[t] : 1 - w[t];
                off += hi ? i1[t] : i0[t];
            }
            if (cw == 0) continue;
            const FT *src = x + off;
            for (int64_t xo = 0; xo < ow; xo++)
                yr[xo] += cw * (src[l0[xo]] * (1 - lw[xo]) + src[l1[xo]] * lw[xo]);
        }
        if (tab.ext) FN(rs_extrapolate)(&tab, idx, r, yr, ow);
    }
    return IR_OK;
}

/* One filtered pass (ops-resize.c, "cubic and antialias") along dim d of a tensor viewed as
 * [outer, len, inner]: forward, dst[o, xo, i] = sum_t w_t src[o, idx_t, i]; adjoint, the
 * transpose, dst[o, idx_t, i] += w_t src[o, xo, i] (dst zeroed first). Output coordinates run in
 * parallel forward; the adjoint scatters, so its outer rows run in parallel instead. */
static void FN(rs_pass)(const rs_attrs *ra, double scale, int64_t outer, int64_t in, int64_t out,
                        int64_t inner, const FT *src, FT *dst, bool adjoint) {
    if (!adjoint) {
        IR_PARALLEL_FOR(outer * out * inner >= IR_PAR_MIN)
        for (int64_t xo = 0; xo < out; xo++) {
            int64_t idx[RS_MAX_TAPS];
            double w[RS_MAX_TAPS];
            int nt = rs_taps(ra, (double)xo, scale, in, out, idx, w);
            for (int64_t o = 0; o < outer; o++) {
                FT *y = dst + (o * out + xo) * inner;
                const FT *x = src + o * in * inner;
                for (int64_t i = 0; i < inner; i++) y[i] = 0;
                for (int t = 0; t < nt; t++) {
                    if (w[t] == 0) continue;
                    const FT wt = (FT)w[t], *xr = x + idx[t] * inner;
                    for (int64_t i = 0; i < inner; i++) y[i] += wt * xr[i];
                }
            }
        }
        return;
    }
    memset(dst, 0, sizeof(FT) * (size_t)(outer * in * inner));
    IR_PARALLEL_FOR(outer > 1 && outer * out * inner >= IR_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        int64_t idx[RS_MAX_TAPS];
        double w[RS_MAX_TAPS];
        for (int64_t xo = 0; xo < out; xo++) {
            int nt = rs_taps(ra, (double)xo, scale, in, out, idx, w);
            const FT *y = src + (o * out + xo) * inner;
            FT *x = dst + o * in * inner;
            for (int t = 0; t < nt; t++) {
                if (w[t] == 0) continue;
                const FT wt = (FT)w[t];
                FT *xr = x + idx[t] * inner;
                for (int64_t i = 0; i < inner; i++) xr[i] += wt * y[i];
            }
        }
    }
}

/* The passes over dims[0..np) (forward in order, adjoint in reverse), between the workspace's two
 * buffers, the first reading src and the last writing dst. */
static ir_status FN(rs_filter)(const ir_kernel_ctx *k, const rs_attrs *ra, const ir_shape *is,
                               const ir_shape *os, const double *scales, const int *dims, int np,
                               const void *src, void *dst, bool adjoint) {
    const size_t half = ir_resize_filter_bytes(is, os, FT_DTYPE) / 2;
    FT *buf[2] = {k->workspace, (FT *)((char *)k->workspace + half)};
    /* forward: the shape before pass p has os's dims for the dims already passed */
    ir_shape cur = adjoint ? *os : *is;
    if (np == 0) {
        memcpy(dst, src, sizeof(FT) * (size_t)ir_shape_numel(&cur));
        return IR_OK;
    }
    const FT *from = src;
    for (int p = 0; p < np; p++) {
        int d = dims[adjoint ? np - 1 - p : p];
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < d; i++) outer *= cur.dims[i];
        for (int i = d + 1; i < cur.rank; i++) inner *= cur.dims[i];
        FT *to = p == np - 1 ? (FT *)dst : buf[p & 1];
        FN(rs_pass)(ra, scales[d], outer, is->dims[d], os->dims[d], inner, from, to, adjoint);
        cur.dims[d] = adjoint ? is->dims[d] : os->dims[d];
        from = to;
    }
    return IR_OK;
}
