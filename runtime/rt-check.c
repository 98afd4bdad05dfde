/* rt-check.c - the float64-referenced criterion of rt-check.h. */
#include "rt-check.h"

#include <math.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

rt_output_kind rt_output_kind_of(const char *name) {
    if (!name) return RT_OUT_FORWARD;
    if (ends_with(name, ".grad")) return RT_OUT_GRADIENT;
    if (ends_with(name, ".momentum_buffer.new") || ends_with(name, ".exp_avg.new") ||
        ends_with(name, ".exp_avg_sq.new"))
        return RT_OUT_STATE;
    if (ends_with(name, ".new")) return RT_OUT_PARAMETER;
    return RT_OUT_FORWARD;
}

const char *rt_output_kind_name(rt_output_kind k) {
    switch (k) {
    case RT_OUT_GRADIENT: return "gradient";
    case RT_OUT_PARAMETER: return "parameter";
    case RT_OUT_STATE: return "optimizer state";
    default: return "forward";
    }
}

static bool is_float(ir_dtype t) {
    return t == IR_F32 || t == IR_F64 || t == IR_F16 || t == IR_BF16;
}

/* ||a - b|| in double; INFINITY when a NaN or an infinity makes it meaningless. */
static double diff_norm(const ir_tensor *a, const ir_tensor *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ir_load_f64(a->data, a->dtype, i) - ir_load_f64(b->data, b->dtype, i);
        s += e * e;
    }
    return isfinite(s) ? sqrt(s) : INFINITY;
}

static double norm(const ir_tensor *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ir_load_f64(a->data, a->dtype, i);
        s += x * x;
    }
    return isfinite(s) ? sqrt(s) : INFINITY;
}

/* Everything of output i but the bound: errors, reference norm, or the mismatch's name. */
static void measure(const ir_tensor *opt, const ir_tensor *orig, const ir_tensor *ref,
                    rt_out_check *c) {
    c->err_opt = c->err_orig = c->ref_norm = INFINITY;
    c->exact = !is_float(orig->dtype);
    if (!opt) {
        c->why = "missing";
        return;
    }
    if (opt->dtype != orig->dtype) {
        c->why = "dtype";
        return;
    }
    if (!ir_shape_eq(&opt->shape, &orig->shape) || !ir_shape_eq(&ref->shape, &orig->shape)) {
        c->why = "shape";
        return;
    }
    int64_t n = ir_shape_numel(&orig->shape);
    if (c->exact) {
        size_t bytes = (size_t)n * ir_dtype_size(orig->dtype);
        bool eq = bytes == 0 || memcmp(opt->data, orig->data, bytes) == 0;
        c->err_opt = c->err_orig = eq ? 0 : INFINITY;
        c->ref_norm = 0;
        if (!eq) c->why = "unequal";
        return;
    }
    if (!is_float(ref->dtype)) {
        c->why = "reference dtype";
        return;
    }
    c->err_opt = diff_norm(opt, ref, n);
    c->err_orig = diff_norm(orig, ref, n);
    c->ref_norm = norm(ref, n);
    if (!isfinite(c->err_opt)) c->why = "not finite";
}

bool rt_check_outputs(int n, const char *const *names, const ir_tensor *const *opt,
                      const ir_tensor *orig32, const ir_tensor *ref64, const rt_check_opts *o,
                      rt_out_check *res) {
    double rtol = o && o->rtol > 0 ? o->rtol : RT_CHECK_RTOL;
    double k = o && o->k >= 0 ? o->k : RT_CHECK_K;
    double largest[RT_OUT_KINDS] = {0};
    for (int i = 0; i < n; i++) {
        rt_out_check *c = &res[i];
        *c = (rt_out_check){.kind = rt_output_kind_of(names ? names[i] : NULL)};
        measure(opt[i], &orig32[i], &ref64[i], c);
        if (!c->exact && isfinite(c->ref_norm))
            largest[c->kind] = fmax(largest[c->kind], c->ref_norm);
    }
    bool all = true;
    for (int i = 0; i < n; i++) {
        rt_out_check *c = &res[i];
        if (c->exact) {
            c->scale = c->bound = 0;
            c->pass = !c->why;
        } else {
            c->scale = fmax(c->ref_norm, RT_CHECK_FLOOR * largest[c->kind]);
            /* an original that overflows in float32 bounds nothing */
            double own = isfinite(c->err_orig) ? k * c->err_orig : 0;
            c->bound = fmax(rtol * c->scale, own);
            c->pass = !c->why && c->err_opt <= c->bound;
        }
        all = all && c->pass;
    }
    return all;
}
