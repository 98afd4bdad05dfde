/* rt-fill.c - deterministic values for weights without values (DESIGN.md "Weights without
 * values") and for random data inputs.
 *
 * Each element is drawn from a counter-based generator keyed by (seed, name, index), never from a
 * running stream, so a tensor's values do not depend on which other tensors were filled before
 * it, on the order of filling or on the thread that fills it: two graphs that share a weight's
 * name and the seed get the same weight. Float64 weights get the float32 values exactly, so the
 * float64 copy of a graph (ir_graph_to_f64) computes on the same weights as the original. */
#include "rt-impl.h"

#include <math.h>
#include <string.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

void rt_fill_seeded(const ir_value *v, uint64_t seed, void *data) {
    int64_t n = ir_shape_numel(&v->shape);
    size_t bytes = (size_t)n * ir_dtype_size(v->dtype);
    if (!ir_dtype_is_float(v->dtype)) {
        /* integer and boolean weights are indices or masks: zero is always valid */
        if (bytes) memset(data, 0, bytes);
        return;
    }
    double lo, hi;
    if (ends_with(v->name, "running_var")) {
        lo = 0.5;
        hi = 1.5;
    } else {
        int64_t fan_in = 1;
        if (!(v->flags & IR_VF_DATA))
            for (int i = 1; i < v->shape.rank; i++) fan_in *= v->shape.dims[i];
        double b = 1.0 / sqrt((double)(fan_in > 0 ? fan_in : 1));
        lo = -b;
        hi = b;
    }
    uint64_t key = ir_hash_bytes(v->name, strlen(v->name), 0) ^ ir_mix64(seed);
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = ir_mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ULL);
        double u = (double)(x >> 11) * 0x1.0p-53; /* [0, 1) */
        double val = lo + (hi - lo) * u;
        if (v->dtype == IR_F32)
            ((float *)data)[i] = (float)val;
        else if (v->dtype == IR_F64) /* the float32 value: a float64 twin shares the weights */
            ((double *)data)[i] = (double)(float)val;
        else
            ir_store_f64(data, v->dtype, i, val);
    }
}
