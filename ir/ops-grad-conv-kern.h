/* ops-grad-conv-kern.h - the kernel of ConvGradWeight (ops-grad-conv.c).
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* sum of g[o] * x[o * s] over o in [lo, hi), vectorized (the sum may reassociate); inlined,
 * since a call per row of a few dozen elements would cost more than the row. */
static inline __attribute__((always_inline)) FT
FN(row_dot)(const FT *restrict g, const FT *restrict x, int64_t lo, int64_t hi, int64_t s) {
    FT acc = 0;
    if (s == 1) {
        IR_SIMD_REDUCE(+ : acc)
        for (int64_t o = lo; o < hi; o++) acc += g[o] * x[o];
    } else {
        IR_SIMD_REDUCE(+ : acc)
        for (int64_t o = lo; o < hi; o++) acc += g[o] * x[o * s];
    }
    return acc;
}

/* One input channel per group (depthwise, any multiplier): each dW element is a sum of row dot
 * products, dW[m, 0, k] = sum_n sum_o dY[n, m, o] * X[n, m / Mg, o*s - pb + k*d]; one
 * (channel, tap) per iteration, so parallel iterations write distinct elements. */
static void FN(gw_depthwise)(const FT *x, const FT *dy, FT *dw, const ir_conv_geom *cg, bool add) {
    const int64_t K = ir_prod3(cg->k), OS = ir_prod3(cg->out), IS = ir_prod3(cg->in);
    const int64_t Mg = cg->M / cg->group;
    const int64_t *in = cg->in, *out = cg->out, *kk3 = cg->k, *s = cg->s, *dl = cg->d, *pb = cg->pb;
    IR_PARALLEL_FOR(cg->N * cg->M * OS * K >= IR_PAR_MIN)
    for (int64_t mk = 0; mk < cg->M * K; mk++) {
        const int64_t m = mk / K, kk = mk % K;
        const int64_t kd = kk / (kk3[1] * kk3[2]), kh = kk / kk3[2] % kk3[1], kw = kk % kk3[2];
        const int64_t off = kw * dl[2] - pb[2];
        int64_t lo, hi;
        ir_conv_valid_range(off, s[2], in[2], out[2], &lo, &hi);
        double acc = 0;
        for (int64_t bn = 0; bn < cg->N; bn++) {
            const FT *xc = x + (bn * cg->C + m / Mg) * IS, *dym = dy + (bn * cg->M + m) * OS;
            for (int64_t od = 0; od < out[0]; od++) {
                const int64_t id = od * s[0] - pb[0] + kd * dl[0];
                if (id < 0 || id >= in[0]) continue;
                for (int64_t oh = 0; oh < out[1]; oh++) {
                    const int64_t ih = oh * s[1] - pb[1] + kh * dl[1];
                    if (ih < 0 || ih >= in[1]) continue;
                    const FT *xr = xc + (id * in[1] + ih) * in[2] + off;
                    const FT *gr = dym + (od * out[1] + oh) * out[2];
                    acc += FN(row_dot)(gr, xr, lo, hi, s[2]);
                }
            }
        }
        dw[mk] = add ? (FT)(dw[mk] + acc) : (FT)acc;
    }
}

static ir_status FN(gw_kernel)(const ir_kernel_ctx *k) {
    ir_conv_geom cg;
    ir_status st = gw_parse(k->graph, k->node, &cg, k->diag);
    if (st) return st;
    const FT *x = k->in[0].data, *dy = k->in[1].data;
    FT *dw = k->out[0].data, *col = k->workspace;
    const int64_t Cg = cg.C / cg.group, Mg = cg.M / cg.group, K = ir_prod3(cg.k);
    const int64_t IS = ir_prod3(cg.in), OS = ir_prod3(cg.out);
    if (Cg == 1) {
        FN(gw_depthwise)(x, dy, dw, &cg, k->accumulate);
        return IR_OK;
    }
    const bool direct = pointwise(&cg);
    const int64_t rows = cg.out[0] * cg.out[1], W2 = cg.out[2], CK = Cg * K;
    const int64_t tr = direct ? rows : ir_conv_col_rows(&cg, Cg, sizeof(FT));
    IR_ASSERT(direct || k->workspace_bytes >= (size_t)(CK * tr * W2) * sizeof(FT));
    if (cg.N == 0 && !k->accumulate)
        memset(dw, 0, (size_t)ir_tensor_numel(&k->out[0]) * sizeof(FT));
    for (int64_t bn = 0; bn < cg.N; bn++)
        for (int64_t gi = 0; gi < cg.group; gi++) {
            const FT *xg = x + (bn * cg.C + gi * Cg) * IS, *dyg = dy + (bn * cg.M + gi * Mg) * OS;
            /* dW_g [Mg, Cg*K] (+)= dY_g[:, tile] col_tile^T, col_tile being [Cg*K, tile], one
             * tile of output rows at a time (X itself for a pointwise conv) */
            for (int64_t r0 = 0; r0 < rows; r0 += tr) {
                const int64_t nr = rows - r0 < tr ? rows - r0 : tr, TS = nr * W2;
                if (!direct) FN(ir_conv_im2col)(xg, col, &cg, Cg, r0, nr);
                FT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Mg, (int)CK, (int)TS, 1.0f,
                        dyg + r0 * W2, (int)OS, direct ? xg : col, (int)TS,
                        bn || r0 || k->accumulate ? 1.0f : 0.0f, dw + gi * Mg * CK, (int)CK);
            }
        }
    return IR_OK;
}
