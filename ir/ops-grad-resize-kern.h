/* ops-grad-resize-kern.h - the kernel of ResizeGrad (ops-grad-resize.c).
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Adds dY row `row` (all dims but the last fixed) into dX. */
static void FN(scatter_row)(const ir_resize_tab *t, const ir_shape *ys, int64_t row, const FT *dyr,
                            FT *dx) {
    const int r = ys->rank;
    const int64_t ow = ys->dims[r - 1];
    const int64_t *l0 = t->i0 + t->base[r - 1], *l1 = t->i1 + t->base[r - 1];
#if FT_IS_F64
    const FT *tw = t->w64;
#else
    const FT *tw = t->w;
#endif
    const FT *lw = tw + t->base[r - 1];
    int64_t idx[IR_MAX_RANK], rem = row;
    for (int dd = r - 2; dd >= 0; dd--) {
        idx[dd] = rem % ys->dims[dd];
        rem /= ys->dims[dd];
    }
    const int nc = t->linear ? 1 << (r - 1) : 1; /* corner combinations of the outer dims */
    const uint8_t *le = t->ext ? t->ext + t->base[r - 1] : NULL;
    for (int dd = 0; le && dd < r - 1; dd++)
        if (t->ext[t->base[dd] + idx[dd]]) return; /* an extrapolated row reads nothing */
    for (int c = 0; c < nc; c++) {
        FT cw = 1;
        int64_t off = 0;
        for (int dd = 0; dd < r - 1; dd++) {
            int64_t at = t->base[dd] + idx[dd];
            bool hi = t->linear && ((c >> dd) & 1);
            cw *= !t->linear ? 1 : hi ? tw[at] : 1 - tw[at];
            off += hi ? t->i1[at] : t->i0[at];
        }
        if (cw == 0) continue; /* also keeps blocks from touching each other's rows */
        FT *dst = dx + off;
        if (!t->linear) {
            for (int64_t xo = 0; xo < ow; xo++)
                if (!le || !le[xo]) dst[l0[xo]] += dyr[xo];
            continue;
        }
        for (int64_t xo = 0; xo < ow; xo++) {
            if (le && le[xo]) continue;
            FT v = cw * dyr[xo];
            dst[l0[xo]] += v * (1 - lw[xo]);
            dst[l1[xo]] += v * lw[xo];
        }
    }
}

static ir_status FN(rg_kernel)(const ir_kernel_ctx *k) {
    const ir_shape *xs = &k->out[0].shape, *ys = &k->in[0].shape;
    const int r = xs->rank;
    ir_resize_tab tab;
    ir_status st = ir_resize_tabulate(k, xs, ys, &tab);
    if (st) return st;
    const FT *dy = k->in[0].data;
    FT *dx = k->out[0].data;
    memset(dx, 0, sizeof(FT) * (size_t)ir_tensor_numel(&k->out[0]));
    int64_t istr[IR_MAX_RANK], blocks = 1, per = 1;
    ir_shape_strides(xs, istr);
    int P = 0;
    while (P < r - 1 && identity_dim(&tab, P, xs->dims[P], ys->dims[P], istr[P])) P++;
    for (int dd = 0; dd < r - 1; dd++) *(dd < P ? &blocks : &per) *= ys->dims[dd];
    const int64_t ow = ys->dims[r - 1];
    IR_PARALLEL_FOR(blocks > 1 && ir_tensor_numel(&k->in[0]) >= IR_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t i = 0; i < per; i++)
            FN(scatter_row)(&tab, ys, b * per + i, dy + (b * per + i) * ow, dx);
    return IR_OK;
}
