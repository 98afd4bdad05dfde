/* ops-resize-kern.h - the kernel of Resize (ops-resize.c).
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
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
    }
    return IR_OK;
}
