/* ops-norm-kern.h - the kernels of ops-norm.c: BatchNormalization, LayerNormalization,
 * InstanceNormalization, Softmax and LogSoftmax. Statistics accumulate in double in both instances.
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Mean and biased (population) variance of n contiguous values, two-pass in double. */
static void FN(mean_var)(const FT *x, int64_t n, double *mean, double *var) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double m = n ? s / (double)n : 0;
    for (int64_t i = 0; i < n; i++) q += ((double)x[i] - m) * ((double)x[i] - m);
    *mean = m;
    *var = n ? q / (double)n : 0;
}

static void FN(scale_shift)(const FT *x, FT *y, int64_t n, FT a, FT b) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * a + b;
}

static ir_status FN(bn_kernel)(const ir_kernel_ctx *k) {
    const ir_shape *xs = &k->in[0].shape;
    const int64_t N = xs->dims[0], C = xs->dims[1], numel = ir_tensor_numel(&k->in[0]);
    const int64_t IS = N * C > 0 ? numel / (N * C) : 0;
    const FT *x = k->in[0].data, *scale = k->in[1].data, *bias = k->in[2].data,
             *mean = k->in[3].data, *var = k->in[4].data;
    FT *y = k->out[0].data;
    const double eps = ir_attr_float(k->node, "epsilon", 1e-5f);
    if (!ir_bn_training(k->node)) {
        IR_PARALLEL_FOR(numel >= IR_PAR_MIN)
        for (int64_t p = 0; p < N * C; p++) {
            int64_t c = p % C;
            double a = scale[c] / sqrt((double)var[c] + eps);
            FN(scale_shift)(x + p * IS, y + p * IS, IS, (FT)a, (FT)(bias[c] - mean[c] * a));
        }
        return IR_OK;
    }
    const double mom = ir_attr_float(k->node, "momentum", 0.9f);
    FT *run_mean = k->n_out > 1 ? k->out[1].data : NULL;
    FT *run_var = k->n_out > 2 ? k->out[2].data : NULL;
    FT *saved_mean = k->n_out > 3 ? k->out[3].data : NULL;
    FT *saved_var = k->n_out > 4 ? k->out[4].data : NULL;
    IR_PARALLEL_FOR(numel >= IR_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0, cnt = (double)(N * IS);
        for (int64_t bn = 0; bn < N; bn++) {
            const FT *xp = x + (bn * C + c) * IS;
            for (int64_t i = 0; i < IS; i++) s += xp[i];
        }
        double m = cnt > 0 ? s / cnt : 0;
        for (int64_t bn = 0; bn < N; bn++) {
            const FT *xp = x + (bn * C + c) * IS;
            for (int64_t i = 0; i < IS; i++) q += ((double)xp[i] - m) * ((double)xp[i] - m);
        }
        double v = cnt > 0 ? q / cnt : 0, a = scale[c] / sqrt(v + eps);
        for (int64_t bn = 0; bn < N; bn++) FN(scale_shift)
        (x + (bn * C + c) * IS, y + (bn * C + c) * IS, IS, (FT)a, (FT)(bias[c] - m * a));
        if (run_mean) run_mean[c] = (FT)(mean[c] * mom + m * (1 - mom));
        if (run_var) run_var[c] = (FT)(var[c] * mom + v * (1 - mom));
        if (saved_mean) saved_mean[c] = (FT)m;
        if (saved_var) saved_var[c] = (FT)v;
    }
    return IR_OK;
}

/* One row: y = (x - mean) * inv * scale + bias, scale/bias broadcast when *1 is set. */
IR_HOT_CLONES static void FN(ln_row)(const FT *restrict x, FT *restrict y, int64_t n,
                                     const FT *restrict sc, bool sc1, const FT *restrict b, bool b1,
                                     double eps, FT *mean_out, FT *inv_out) {
    FT s = 0, q = 0;
    IR_SIMD_REDUCE(+ : s)
    for (int64_t i = 0; i < n; i++) s += x[i];
    const FT m = n ? s / (FT)n : 0;
    IR_SIMD_REDUCE(+ : q)
    for (int64_t i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
    const FT inv = (FT)(1.0 / sqrt((n ? q / (FT)n : 0) + eps));
    if (!sc1 && b && !b1) {
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * inv * sc[i] + b[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] - m) * inv * sc[sc1 ? 0 : i] + (b ? b[b1 ? 0 : i] : 0.0f);
    }
    *mean_out = m;
    *inv_out = inv;
}

static ir_status FN(ln_kernel)(const ir_kernel_ctx *k) {
    int axis = 0;
    ir_status st;
    if ((st = ln_axis(&k->in[0].shape, k->node, &axis, k->diag))) return st;
    const int64_t numel = ir_tensor_numel(&k->in[0]);
    int64_t inner = 1;
    for (int i = axis; i < k->in[0].shape.rank; i++) inner *= k->in[0].shape.dims[i];
    const int64_t rows = inner ? numel / inner : 0;
    const FT *x = k->in[0].data, *sc = k->in[1].data;
    const FT *b = k->n_in > 2 ? k->in[2].data : NULL;
    const bool sc1 = ir_tensor_numel(&k->in[1]) == 1 && inner != 1,
               b1 = b && ir_tensor_numel(&k->in[2]) == 1 && inner != 1;
    FT *y = k->out[0].data;
    /* Mean and InvStdDev in the stash type, float32 or float64 whatever X's (ln_kernel) */
    void *mo = k->n_out > 1 ? k->out[1].data : NULL, *io = k->n_out > 2 ? k->out[2].data : NULL;
    const ir_dtype mt = mo ? k->out[1].dtype : FT_DTYPE, it = io ? k->out[2].dtype : FT_DTYPE;
    const double eps = ir_attr_float(k->node, "epsilon", 1e-5f);
    IR_PARALLEL_FOR(numel >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        FT m, inv;
        FN(ln_row)(x + r * inner, y + r * inner, inner, sc, sc1, b, b1, eps, &m, &inv);
        if (mo) IR_ST_F(mt, mo, r, m);
        if (io) IR_ST_F(it, io, r, inv);
    }
    return IR_OK;
}

static ir_status FN(in_kernel)(const ir_kernel_ctx *k) {
    const ir_shape *xs = &k->in[0].shape;
    const int64_t NC = xs->dims[0] * xs->dims[1], numel = ir_tensor_numel(&k->in[0]);
    const int64_t IS = NC ? numel / NC : 0, C = xs->dims[1];
    const FT *x = k->in[0].data, *sc = k->in[1].data, *b = k->in[2].data;
    FT *y = k->out[0].data;
    const double eps = ir_attr_float(k->node, "epsilon", 1e-5f);
    IR_PARALLEL_FOR(numel >= IR_PAR_MIN)
    for (int64_t p = 0; p < NC; p++) {
        double m, v;
        FN(mean_var)(x + p * IS, IS, &m, &v);
        double a = sc[p % C] / sqrt(v + eps);
        FN(scale_shift)(x + p * IS, y + p * IS, IS, (FT)a, (FT)(b[p % C] - m * a));
    }
    return IR_OK;
}

/* One softmax line of len values `stride` apart (inlined into the two wrappers below so that the
 * contiguous case vectorizes). */
static inline __attribute__((always_inline)) void
FN(softmax_line)(const FT *restrict x, FT *restrict y, int64_t len, int64_t stride, bool log_sm) {
    FT mx = -INFINITY, sum = 0;
    IR_SIMD_REDUCE(max : mx)
    for (int64_t i = 0; i < len; i++) mx = x[i * stride] > mx ? x[i * stride] : mx;
    /* separate map and sum loops: fused, GCC leaves the exp loop scalar */
    IR_SIMD for (int64_t i = 0; i < len; i++) y[i * stride] = FN(exp_approx)(x[i * stride] - mx);
    IR_SIMD_REDUCE(+ : sum)
    for (int64_t i = 0; i < len; i++) sum += y[i * stride];
    if (log_sm) {
        const FT lse = mx + FT_LOG(sum);
        for (int64_t i = 0; i < len; i++) y[i * stride] = x[i * stride] - lse;
        return;
    }
    const FT inv = 1.0f / sum;
    for (int64_t i = 0; i < len; i++) y[i * stride] *= inv;
}

IR_HOT_CLONES static void FN(softmax_row)(const FT *x, FT *y, int64_t len, bool log_sm) {
    FN(softmax_line)(x, y, len, 1, log_sm);
}
IR_HOT_CLONES static void FN(softmax_strided)(const FT *x, FT *y, int64_t len, int64_t stride,
                                              bool log_sm) {
    FN(softmax_line)(x, y, len, stride, log_sm);
}

static ir_status FN(sm_run)(const ir_kernel_ctx *k, bool log_sm) {
    int64_t outer, len, inner;
    ir_status st;
    if ((st = ir_softmax_split(k->graph, k->node, &k->in[0].shape, &outer, &len, &inner, k->diag)))
        return st;
    const FT *x = k->in[0].data;
    FT *y = k->out[0].data;
    IR_PARALLEL_FOR(outer * len * inner >= IR_PAR_MIN)
    for (int64_t r = 0; r < outer * inner; r++) {
        int64_t base = (r / inner) * len * inner + r % inner;
        if (inner == 1)
            FN(softmax_row)(x + base, y + base, len, log_sm);
        else
            FN(softmax_strided)(x + base, y + base, len, inner, log_sm);
    }
    return IR_OK;
}
