/* ops-grad-norm-kern.h - the kernels of ops-grad-norm.c: BatchNormGrad, InstanceNormGrad,
 * LayerNormGrad, SoftmaxGrad and LogSoftmaxGrad. Sums run in double in both instances.
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Mean and biased variance, two-pass in double (the forward's order of operations). */
static void FN(ng_stats)(const ng *q, const FT *x, double *mean, double *var) {
    double s = 0, v = 0, cnt = (double)(q->np * q->IS);
    for (int64_t j = 0; j < q->np; j++)
        for (int64_t i = 0; i < q->IS; i++) s += x[j * q->pstride + i];
    double m = cnt > 0 ? s / cnt : 0;
    for (int64_t j = 0; j < q->np; j++)
        for (int64_t i = 0; i < q->IS; i++) {
            double e = x[j * q->pstride + i] - m;
            v += e * e;
        }
    *mean = m;
    *var = cnt > 0 ? v / cnt : 0;
}

/* sum(dy) and sum(dy * xhat), xhat = (x - m) * inv. */
static void FN(ng_sums)(const ng *q, const FT *x, const FT *dy, double m, double inv, double *sdy,
                        double *sdyx) {
    double a = 0, b = 0;
    for (int64_t j = 0; j < q->np; j++) {
        const FT *xr = x + j * q->pstride, *gr = dy + j * q->pstride;
        for (int64_t i = 0; i < q->IS; i++) {
            a += gr[i];
            b += gr[i] * ((xr[i] - m) * inv);
        }
    }
    *sdy = a;
    *sdyx = b;
}

/* dx = ka * dy + kb + kc * xhat. */
static void FN(ng_dx)(const ng *q, const FT *x, const FT *dy, FT *dx, double m, double inv,
                      double ka, double kb, double kc) {
    for (int64_t j = 0; j < q->np; j++) {
        const FT *xr = x + j * q->pstride, *gr = dy + j * q->pstride;
        FT *o = dx + j * q->pstride;
        for (int64_t i = 0; i < q->IS; i++) o[i] = (FT)(ka * gr[i] + kb + kc * ((xr[i] - m) * inv));
    }
}

/* dx of a group normalized with its own statistics (count values): the gradient through mean and
 * variance; returns sum(dy) and sum(dy * xhat) for the affine parameters. */
static void FN(ng_batch_grad)(const ng *q, const FT *x, const FT *dy, FT *dx, double scale,
                              double eps, double *sdy, double *sdyx) {
    double m, var, cnt = (double)(q->np * q->IS);
    FN(ng_stats)(q, x, &m, &var);
    double inv = 1.0 / sqrt(var + eps);
    FN(ng_sums)(q, x, dy, m, inv, sdy, sdyx);
    double k = scale * inv;
    if (cnt > 0) FN(ng_dx)(q, x, dy, dx, m, inv, k, -k * *sdy / cnt, -k * *sdyx / cnt);
}

/* The operands of BatchNormGrad and InstanceNormGrad (dY, X, scale, ... -> dX[, dScale[, dBias]]),
 * N x C planes of IS elements each. */
typedef struct FN(ng_io) {
    int64_t N, C, numel, IS;
    const FT *dy, *x, *scale;
    FT *dx, *dscale, *dbias; /* dscale and dbias NULL where the node has no such output */
    double eps;
} FN(ng_io);

static ir_status FN(ng_io_init)(const ir_kernel_ctx *k, FN(ng_io) * a) {
    const ir_shape *xs = &k->in[1].shape;
    a->N = xs->dims[0];
    a->C = xs->dims[1];
    a->numel = ir_tensor_numel(&k->in[1]);
    a->IS = a->N * a->C > 0 ? a->numel / (a->N * a->C) : 0;
    a->dy = k->in[0].data;
    a->x = k->in[1].data;
    a->scale = k->in[2].data;
    a->dx = k->out[0].data;
    a->dscale = k->n_out > 1 ? k->out[1].data : NULL;
    a->dbias = k->n_out > 2 ? k->out[2].data : NULL;
    a->eps = ir_attr_float(k->node, "epsilon", 1e-5f);
    return IR_OK;
}

static ir_status FN(bng_kernel)(const ir_kernel_ctx *k) {
    FN(ng_io) a;
    ir_status st = FN(ng_io_init)(k, &a);
    if (st) return st;
    const int64_t N = a.N, C = a.C, IS = a.IS;
    const FT *dy = a.dy, *x = a.x, *scale = a.scale;
    const bool train = ir_attr_int(k->node, "training_mode", 0) != 0;
    const FT *rm = train ? NULL : k->in[3].data, *rv = train ? NULL : k->in[4].data;
    FT *dx = a.dx, *dscale = a.dscale, *dbias = a.dbias;
    const double eps = a.eps;
    const ng q = {.np = N, .pstride = C * IS, .IS = IS};
    IR_PARALLEL_FOR(a.numel >= IR_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        const FT *xc = x + c * IS, *gc = dy + c * IS;
        double sdy, sdyx;
        if (train) {
            FN(ng_batch_grad)(&q, xc, gc, dx + c * IS, scale[c], eps, &sdy, &sdyx);
        } else {
            double inv = 1.0 / sqrt((double)rv[c] + eps);
            FN(ng_sums)(&q, xc, gc, rm[c], inv, &sdy, &sdyx);
            FN(ng_dx)(&q, xc, gc, dx + c * IS, rm[c], inv, scale[c] * inv, 0, 0);
        }
        if (dscale) dscale[c] = (FT)sdyx;
        if (dbias) dbias[c] = (FT)sdy;
    }
    return IR_OK;
}

static ir_status FN(ing_kernel)(const ir_kernel_ctx *k) {
    FN(ng_io) a;
    ir_status st = FN(ng_io_init)(k, &a);
    if (st) return st;
    const int64_t N = a.N, C = a.C, IS = a.IS;
    const FT *dy = a.dy, *x = a.x, *scale = a.scale;
    FT *dx = a.dx, *dscale = a.dscale, *dbias = a.dbias;
    const double eps = a.eps;
    const ng q = {.np = 1, .pstride = IS, .IS = IS};
    IR_PARALLEL_FOR(a.numel >= IR_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        double as = 0, ab = 0;
        for (int64_t bn = 0; bn < N; bn++) {
            int64_t off = (bn * C + c) * IS;
            double sdy, sdyx;
            FN(ng_batch_grad)(&q, x + off, dy + off, dx + off, scale[c], eps, &sdy, &sdyx);
            as += sdyx;
            ab += sdy;
        }
        if (dscale) dscale[c] = (FT)as;
        if (dbias) dbias[c] = (FT)ab;
    }
    return IR_OK;
}

/* dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale, for one row. */
IR_HOT_CLONES static void FN(lng_row)(const FT *restrict x, const FT *restrict dy, FT *restrict dx,
                                      int64_t n, const FT *restrict sc, bool sc1, double m,
                                      double inv) {
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; i++) {
        double gi = (double)dy[i] * sc[sc1 ? 0 : i];
        sg += gi;
        sgx += gi * ((x[i] - m) * inv);
    }
    const double mg = sg / (double)n, mgx = sgx / (double)n;
    for (int64_t i = 0; i < n; i++)
        dx[i] = (FT)(inv * ((double)dy[i] * sc[sc1 ? 0 : i] - mg - (x[i] - m) * inv * mgx));
}

static ir_status FN(lng_kernel)(const ir_kernel_ctx *k) {
    int64_t rows = 0, inner = 0;
    int axis = 0;
    ir_status st;
    if ((st = lng_split(&k->in[1].shape, k->node, &rows, &inner, &axis, k->diag))) return st;
    const FT *dy = k->in[0].data, *x = k->in[1].data, *sc = k->in[2].data;
    /* the forward's stash type, float32 or float64 whatever X's (lng_kernel) */
    const void *mean = k->in[3].data, *inv = k->in[4].data;
    const ir_dtype mt = k->in[3].dtype, it = k->in[4].dtype;
    const bool sc1 = ir_tensor_numel(&k->in[2]) == 1 && inner != 1;
    FT *dx = k->out[0].data;
    FT *dscale = k->n_out > 1 ? k->out[1].data : NULL;
    FT *dbias = k->n_out > 2 ? k->out[2].data : NULL;
    const int64_t numel = rows * inner, nblk = (inner + LNG_BLOCK - 1) / LNG_BLOCK;
    IR_PARALLEL_FOR(numel >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) FN(lng_row)
    (x + r * inner, dy + r * inner, dx + r * inner, inner, sc, sc1, IR_LD_F(mt, mean, r),
     IR_LD_F(it, inv, r));
    IR_PARALLEL_FOR(numel >= IR_PAR_MIN && nblk > 1)
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * LNG_BLOCK, n = inner - i0 < LNG_BLOCK ? inner - i0 : LNG_BLOCK;
        double as[LNG_BLOCK] = {0}, ab[LNG_BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const FT *xr = x + r * inner + i0, *gr = dy + r * inner + i0;
            const double m = IR_LD_F(mt, mean, r), iv = IR_LD_F(it, inv, r);
            for (int64_t i = 0; i < n; i++) {
                as[i] += gr[i] * ((xr[i] - m) * iv);
                ab[i] += gr[i];
            }
        }
        for (int64_t i = 0; i < n; i++) {
            if (dscale) dscale[i0 + i] = (FT)as[i];
            if (dbias) dbias[i0 + i] = (FT)ab[i];
        }
    }
    return IR_OK;
}

static ir_status FN(smg_kernel)(const ir_kernel_ctx *k) {
    int64_t outer = 0, len = 0, inner = 0;
    ir_status st;
    if ((st = ir_softmax_split(k->graph, k->node, &k->in[1].shape, &outer, &len, &inner, k->diag)))
        return st;
    const bool log_sm = k->node->op == IR_OP_LogSoftmaxGrad;
    const FT *dy = k->in[0].data, *y = k->in[1].data;
    FT *dx = k->out[0].data;
    IR_PARALLEL_FOR(outer * len * inner >= IR_PAR_MIN)
    for (int64_t r = 0; r < outer * inner; r++) {
        const int64_t base = (r / inner) * len * inner + r % inner;
        const FT *gr = dy + base, *yr = y + base;
        FT *o = dx + base;
        double s = 0;
        for (int64_t i = 0; i < len; i++)
            s += log_sm ? gr[i * inner] : gr[i * inner] * yr[i * inner];
        if (log_sm)
            for (int64_t i = 0; i < len; i++)
                o[i * inner] = (FT)(gr[i * inner] - exp((double)yr[i * inner]) * s);
        else
            for (int64_t i = 0; i < len; i++)
                o[i * inner] = (FT)(yr[i * inner] * (gr[i * inner] - s));
    }
    return IR_OK;
}
