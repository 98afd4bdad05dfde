/* ops-grad-pool-kern.h - the kernel of MaxPoolGrad and AveragePoolGrad (ops-grad-pool.c).
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Scatters plane p of dY into plane p of dX (zeroed here) through the forward's windows. */
static void FN(pool_grad_plane)(const ir_pool_geom *pg, const FT *x, const FT *dy, FT *dx,
                                int64_t p, bool is_max, bool count_pad) {
    const int64_t *in = pg->in, *out = pg->out;
    const int64_t IS = ir_prod3(in), OS = ir_prod3(out);
    const FT *xp = is_max ? x + p * IS : NULL, *dyp = dy + p * OS;
    FT *dxp = dx + p * IS;
    int64_t st[3], kl[3], kh[3];
    memset(dxp, 0, sizeof(FT) * (size_t)IS);
    for (int64_t od = 0; od < out[0]; od++) {
        ir_pool_window_dim(pg, 0, od, st, kl, kh);
        for (int64_t oh = 0; oh < out[1]; oh++) {
            ir_pool_window_dim(pg, 1, oh, st, kl, kh);
            for (int64_t ow = 0; ow < out[2]; ow++) {
                ir_pool_window_dim(pg, 2, ow, st, kl, kh);
                const FT g = dyp[(od * out[1] + oh) * out[2] + ow];
                if (is_max) { /* the forward's rule: the first strictly greater value wins */
                    int64_t bi = FN(ir_pool_argmax)(pg, xp, st, kl, kh);
                    if (bi >= 0) dxp[bi] += g;
                    continue;
                }
                int64_t div = ir_pool_avg_div(pg, st, kl, kh, count_pad);
                if (div <= 0) continue;
                const FT v = g / (FT)div;
                const int64_t *dl = pg->d;
                for (int64_t a = kl[0]; a < kh[0]; a++)
                    for (int64_t b = kl[1]; b < kh[1]; b++) {
                        FT *r =
                            dxp + ((st[0] + a * dl[0]) * in[1] + st[1] + b * dl[1]) * in[2] + st[2];
                        for (int64_t c = kl[2]; c < kh[2]; c++) r[c * dl[2]] += v;
                    }
            }
        }
    }
}

static ir_status FN(pool_grad_kernel)(const ir_kernel_ctx *k) {
    ir_shape xs = k->out[0].shape;
    ir_pool_geom pg;
    ir_status st = ir_pool_parse(k->node, &xs, &pg, k->diag);
    if (st) return st;
    const bool is_max = k->node->op == IR_OP_MaxPoolGrad;
    const bool count_pad = ir_attr_int(k->node, "count_include_pad", 0) != 0;
    const FT *x = is_max ? k->in[1].data : NULL, *dy = k->in[0].data;
    FT *dx = k->out[0].data;
    IR_PARALLEL_FOR(pg.NC * ir_prod3(pg.out) * ir_prod3(pg.k) >= IR_PAR_MIN)
    for (int64_t p = 0; p < pg.NC; p++) FN(pool_grad_plane)(&pg, x, dy, dx, p, is_max, count_pad);
    return IR_OK;
}
