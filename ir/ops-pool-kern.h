/* ops-pool-kern.h - the kernels of the pooling ops (ops-pool.c): windows and global pools.
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Runs the max or average window of every output position of plane p. */
static void FN(pool_plane)(const ir_pool_geom *pg, const FT *x, FT *y, int64_t *idx, int64_t p,
                           bool is_max, bool count_pad) {
    const int64_t *in = pg->in, *out = pg->out, *dl = pg->d;
    const int64_t IS = ir_prod3(in), OS = ir_prod3(out);
    const FT *xp = x + p * IS;
    FT *yp = y + p * OS;
    int64_t *ip = idx ? idx + p * OS : NULL;
    int64_t st[3], kl[3], kh[3];
    for (int64_t od = 0; od < out[0]; od++) {
        ir_pool_window_dim(pg, 0, od, st, kl, kh);
        for (int64_t oh = 0; oh < out[1]; oh++) {
            ir_pool_window_dim(pg, 1, oh, st, kl, kh);
            for (int64_t ow = 0; ow < out[2]; ow++) {
                ir_pool_window_dim(pg, 2, ow, st, kl, kh);
                int64_t o = (od * out[1] + oh) * out[2] + ow;
                if (is_max && ip) {
                    int64_t bi = FN(ir_pool_argmax)(pg, xp, st, kl, kh);
                    yp[o] = bi >= 0 ? xp[bi] : -INFINITY;
                    ip[o] = p * IS + bi;
                } else if (is_max) {
                    FT best = -INFINITY;
                    for (int64_t a = kl[0]; a < kh[0]; a++)
                        for (int64_t b = kl[1]; b < kh[1]; b++) {
                            int64_t row = ((st[0] + a * dl[0]) * in[1] + st[1] + b * dl[1]) * in[2];
                            const FT *xr = xp + row + st[2];
                            /* branch-free max: data-dependent branches mispredict */
                            for (int64_t c = kl[2]; c < kh[2]; c++) {
                                FT v = xr[c * dl[2]];
                                best = v > best ? v : best;
                            }
                        }
                    yp[o] = best;
                } else {
                    double sum = 0;
                    for (int64_t a = kl[0]; a < kh[0]; a++)
                        for (int64_t b = kl[1]; b < kh[1]; b++) {
                            int64_t row = ((st[0] + a * dl[0]) * in[1] + st[1] + b * dl[1]) * in[2];
                            const FT *xr = xp + row + st[2];
                            for (int64_t c = kl[2]; c < kh[2]; c++) sum += xr[c * dl[2]];
                        }
                    int64_t div = ir_pool_avg_div(pg, st, kl, kh, count_pad);
                    yp[o] = div > 0 ? (FT)(sum / (double)div) : 0.0f;
                }
            }
        }
    }
}

static ir_status FN(pool_run)(const ir_kernel_ctx *k, bool is_max) {
    ir_pool_geom pg;
    ir_status st = pool_parse(k->graph, k->node, &pg, k->diag);
    if (st) return st;
    bool count_pad = ir_attr_int(k->node, "count_include_pad", 0) != 0;
    const FT *x = k->in[0].data;
    FT *y = k->out[0].data;
    int64_t *idx = (is_max && k->n_out > 1) ? k->out[1].data : NULL;
    const int64_t OS = ir_prod3(pg.out);
    IR_PARALLEL_FOR(pg.NC * OS * ir_prod3(pg.k) >= IR_PAR_MIN)
    for (int64_t p = 0; p < pg.NC; p++) FN(pool_plane)(&pg, x, y, idx, p, is_max, count_pad);
    return IR_OK;
}

static ir_status FN(global_run)(const ir_kernel_ctx *k, bool is_max) {
    const ir_shape *xs = &k->in[0].shape;
    const int64_t NC = xs->dims[0] * xs->dims[1], IS = ir_tensor_numel(&k->in[0]) / (NC ? NC : 1);
    const FT *x = k->in[0].data;
    FT *y = k->out[0].data;
    IR_PARALLEL_FOR(NC * IS >= IR_PAR_MIN)
    for (int64_t p = 0; p < NC; p++) {
        const FT *xp = x + p * IS;
        if (is_max) {
            FT m = IS ? xp[0] : -INFINITY;
            for (int64_t i = 1; i < IS; i++) m = xp[i] > m ? xp[i] : m;
            y[p] = m;
        } else {
            double sum = 0;
            for (int64_t i = 0; i < IS; i++) sum += xp[i];
            y[p] = IS ? (FT)(sum / (double)IS) : 0.0f;
        }
    }
    return IR_OK;
}
