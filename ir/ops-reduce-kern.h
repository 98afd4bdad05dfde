/* ops-reduce-kern.h - the fast path of the reductions (ops-reduce.c): contiguous reduced dims.
 * Instantiated for float32 and float64 by ir-float-tmpl.h; see there for FT, FN and the rest. */
/* Reduces R contiguous values (R >= 1): vectorized partial sums over blocks of 4096, combined in
 * double so long float32 rows keep their precision. */
IR_HOT_CLONES static FT FN(reduce_row)(rop op, const FT *restrict x, int64_t R) {
    double acc = op == R_PROD ? 1 : 0;
    FT mx = x[0], mn = x[0];
    for (int64_t b0 = 0; b0 < R; b0 += 4096) {
        const int64_t e = b0 + 4096 < R ? b0 + 4096 : R;
        FT s = op == R_PROD ? 1.0f : 0.0f;
        switch (op) {
        case R_SUM:
        case R_MEAN:
            IR_SIMD_REDUCE(+ : s)
            for (int64_t r = b0; r < e; r++) s += x[r];
            break;
        case R_L2:
            IR_SIMD_REDUCE(+ : s)
            for (int64_t r = b0; r < e; r++) s += x[r] * x[r];
            break;
        case R_PROD:
            IR_SIMD_REDUCE(* : s)
            for (int64_t r = b0; r < e; r++) s *= x[r];
            break;
        case R_MAX:
            IR_SIMD_REDUCE(max : mx)
            for (int64_t r = b0; r < e; r++) mx = x[r] > mx ? x[r] : mx;
            break;
        case R_MIN:
            IR_SIMD_REDUCE(min : mn)
            for (int64_t r = b0; r < e; r++) mn = x[r] < mn ? x[r] : mn;
            break;
        }
        acc = op == R_PROD ? acc * s : acc + s;
    }
    switch (op) {
    case R_MEAN: return (FT)(acc / (double)R);
    case R_L2: return (FT)sqrt(acc);
    case R_MAX: return mx;
    case R_MIN: return mn;
    default: return (FT)acc;
    }
}

/* The fast FT path over [outer, R, inner]; R >= 1. add (R_SUM only): y += the sums. */
static void FN(reduce_fast)(rop op, const FT *x, FT *y, int64_t outer, int64_t R, int64_t inner,
                            bool add) {
    IR_PARALLEL_FOR(outer * R * inner >= IR_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        const FT *xo = x + o * R * inner;
        FT *yo = y + o * inner;
        if (inner == 1) {
            yo[0] = add ? yo[0] + FN(reduce_row)(op, xo, R) : FN(reduce_row)(op, xo, R);
            continue;
        }
        if (add)
            for (int64_t i = 0; i < inner; i++) yo[i] += xo[i];
        else
            for (int64_t i = 0; i < inner; i++) yo[i] = op == R_L2 ? xo[i] * xo[i] : xo[i];
        for (int64_t r = 1; r < R; r++) {
            const FT *xr = xo + r * inner;
            switch (op) {
            case R_SUM:
            case R_MEAN:
                for (int64_t i = 0; i < inner; i++) yo[i] += xr[i];
                break;
            case R_L2:
                for (int64_t i = 0; i < inner; i++) yo[i] += xr[i] * xr[i];
                break;
            case R_PROD:
                for (int64_t i = 0; i < inner; i++) yo[i] *= xr[i];
                break;
            case R_MAX:
                for (int64_t i = 0; i < inner; i++) yo[i] = xr[i] > yo[i] ? xr[i] : yo[i];
                break;
            case R_MIN:
                for (int64_t i = 0; i < inner; i++) yo[i] = xr[i] < yo[i] ? xr[i] : yo[i];
                break;
            }
        }
        if (op == R_MEAN)
            for (int64_t i = 0; i < inner; i++) yo[i] /= (FT)R;
        if (op == R_L2)
            for (int64_t i = 0; i < inner; i++) yo[i] = FT_SQRT(yo[i]);
    }
}
