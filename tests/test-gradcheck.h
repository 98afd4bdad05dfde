/* test-gradcheck.h - finite-difference checks of gradient builders (ir-autodiff.h), shared by
 * the autodiff tests. gc_check builds a one-op forward graph whose inputs are parameters
 * (float constants flagged IR_VF_PARAM), data inputs or plain constants, weights each float
 * output by a random constant and concatenates them flat into the graph output y, so that the
 * training graph's sum loss is sum_k <out_k, R_k> and every output's gradient is a dense random
 * tensor. The gradients of ir_build_training, run by the executor, are compared with central
 * differences of the forward graph (run with each perturbed parameter bound over its constant).
 * float64 inputs use eps 1e-6; float32 ones eps 1e-3 (and need a looser tolerance).
 * Header-only, like test-util.h; needs rt.h (link magpie_runtime). */
#ifndef MAGPIE_TEST_GRADCHECK_H
#define MAGPIE_TEST_GRADCHECK_H

#include "test-util.h"

#include "rt.h"

typedef enum gc_kind {
    GC_PARAM = 0, /* differentiated: random values unless data is given */
    GC_DATA,      /* a graph input (IR_VF_DATA), no gradient */
    GC_CONST,     /* a constant that is not a parameter (shapes, indices, masks) */
} gc_kind;

typedef struct gc_in {
    gc_kind kind;
    ir_dtype dtype; /* IR_F32 is 0: float tests set IR_F64 explicitly */
    ir_shape shape;
    const void *data; /* NULL: random values in [lo, hi) (default [-1, 1)); for GC_CONST an
                       * omitted optional input */
    double lo, hi;
} gc_in;

#define GC_MAX_IN 8
#define GC_MAX_OUT 8
#define GC_MAX_SAMPLES 48 /* finite differences per parameter (evenly spread elements) */

static inline void gc_fill(void *p, ir_dtype t, int64_t n, uint64_t seed, double lo, double hi) {
    if (lo == 0 && hi == 0) lo = -1, hi = 1;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(ir_mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i) >> 11) /
                   (double)(1ULL << 53);
        ir_store_f64(p, t, i, lo + (hi - lo) * u);
    }
}

static inline int gc_const(ir_graph *g, const char *name, ir_dtype t, ir_shape s, const void *data,
                           unsigned flags) {
    int v = ir_graph_add_value(g, name, t, &s);
    size_t bytes = ir_value_bytes(&g->values[v]);
    g->values[v].blob = ir_blob_new(bytes ? bytes : 1);
    if (bytes) memcpy(ir_blob_data(g->values[v].blob), data, bytes);
    g->values[v].flags |= IR_VF_CONST | flags;
    return v;
}

static inline int gc_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                          int n_out, int *out, int n_attrs, const ir_attr *attrs) {
    tu_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    return out[0];
}

/* The forward graph of a check; ids[i] receives input i's value id. */
static inline ir_graph *gc_graph(ir_op_kind op, int n_in, const gc_in *in, int n_out, int n_attrs,
                                 const ir_attr *attrs, int *ids, void **owned) {
    ir_graph *g = ir_graph_new();
    for (int i = 0; i < n_in; i++) {
        ids[i] = -1;
        owned[i] = NULL;
        if (in[i].kind != GC_PARAM && !in[i].data && in[i].kind == GC_CONST) continue; /* omitted */
        char nm[16];
        snprintf(nm, sizeof nm, "%s%d", in[i].kind == GC_PARAM ? "p" : "in", i);
        int64_t n = ir_shape_numel(&in[i].shape);
        const void *data = in[i].data;
        if (!data) {
            owned[i] = calloc((size_t)(n ? n : 1), ir_dtype_size(in[i].dtype));
            gc_fill(owned[i], in[i].dtype, n, 100 + (uint64_t)i, in[i].lo, in[i].hi);
            data = owned[i];
        }
        if (in[i].kind == GC_DATA) {
            ids[i] = ir_graph_add_value(g, nm, in[i].dtype, &in[i].shape);
            ir_graph_add_input(g, ids[i]);
            g->values[ids[i]].flags |= IR_VF_DATA;
            if (!owned[i]) owned[i] = (void *)data; /* borrowed; not freed (see gc_free) */
        } else {
            unsigned fl = in[i].kind == GC_PARAM ? IR_VF_PARAM | IR_VF_INITIALIZER : 0;
            ids[i] = gc_const(g, nm, in[i].dtype, in[i].shape, data, fl);
        }
    }
    int outs[GC_MAX_OUT], flat[GC_MAX_OUT], nf = 0;
    gc_node(g, op, "op", n_in, ids, n_out, outs, n_attrs, attrs);
    int64_t minus1 = -1;
    int shp = gc_const(g, "flat", IR_I64, TU_SHAPE(1), &minus1, 0);
    for (int k = 0; k < n_out; k++) {
        const ir_value *v = &g->values[outs[k]];
        if (!ir_dtype_is_float(v->dtype)) continue;
        ir_dtype t = v->dtype;
        ir_shape s = v->shape;
        int64_t n = ir_shape_numel(&s);
        void *r = calloc((size_t)(n ? n : 1), ir_dtype_size(t));
        gc_fill(r, t, n, 900 + (uint64_t)k, -1, 1);
        char nm[32];
        snprintf(nm, sizeof nm, "R%d", k);
        int rv = gc_const(g, nm, t, s, r, 0);
        free(r);
        int m;
        snprintf(nm, sizeof nm, "weigh%d", k);
        gc_node(g, IR_OP_Mul, nm, 2, (int[]){outs[k], rv}, 1, &m, 0, NULL);
        snprintf(nm, sizeof nm, "flat%d", k);
        gc_node(g, IR_OP_Reshape, nm, 2, (int[]){m, shp}, 1, &flat[nf++], 0, NULL);
    }
    int y = flat[0];
    if (nf > 1) {
        ir_attr ax = tu_attr_int("axis", 0);
        gc_node(g, IR_OP_Concat, "cat", nf, flat, 1, &y, 1, &ax);
    }
    ir_graph_add_output(g, y);
    return g;
}

/* Bindings of the data inputs. */
static inline int gc_bind(const ir_graph *g, int n_in, const gc_in *in, const int *ids,
                          void *const *owned, rt_binding *b) {
    int nb = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i].kind == GC_DATA)
            b[nb++] = (rt_binding){
                .value = ids[i], .dtype = in[i].dtype, .shape = in[i].shape, .data = owned[i]};
    return nb;
}

/* Sum of the forward output with one extra binding (a perturbed parameter). */
static inline double gc_loss(const ir_graph *g, rt_binding *b, int nb, const rt_binding *extra) {
    rt_result r = {0};
    ir_diag d = {{0}};
    if (extra) b[nb++] = *extra;
    rt_options o = {.seed = 5};
    if (rt_run(g, b, nb, &o, &r, &d) != IR_OK) fail_msg("forward run: %s", d.msg);
    double s = 0;
    const ir_tensor *t = &r.outputs[0];
    for (int64_t i = 0; i < ir_shape_numel(&t->shape); i++) s += ir_load_f64(t->data, t->dtype, i);
    rt_result_free(&r);
    return s;
}

/* Runs the check; returns the worst relative error (DESIGN.md's, over the sampled elements of
 * each parameter) and fails the test when it exceeds tol or anything goes wrong. */
static inline double gc_check(ir_op_kind op, int n_in, const gc_in *in, int n_out, int n_attrs,
                              const ir_attr *attrs, double tol) {
    int ids[GC_MAX_IN];
    void *owned[GC_MAX_IN];
    rt_binding b[GC_MAX_IN + 1];
    ir_graph *g = gc_graph(op, n_in, in, n_out, n_attrs, attrs, ids, owned);
    int nb = gc_bind(g, n_in, in, ids, owned, b);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(g, NULL, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", ir_op_name(op), d.msg);
    rt_result r = {0};
    rt_options o = {.seed = 5, .poison_freed = true};
    if (rt_run(tg, b, nb, &o, &r, &d) != IR_OK)
        fail_msg("%s: training run: %s", ir_op_name(op), d.msg);
    double loss = ir_load_f64(r.outputs[0].data, r.outputs[0].dtype, 0);
    double ref_loss = gc_loss(g, b, nb, NULL);
    double ltol = r.outputs[0].dtype == IR_F64 ? 1e-9 : 1e-5;
    if (fabs(loss - ref_loss) > ltol * fmax(1, fabs(ref_loss)))
        fail_msg("%s: loss %.17g, forward sum %.17g", ir_op_name(op), loss, ref_loss);
    double worst = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i].kind != GC_PARAM) continue;
        const ir_value *pv = &g->values[ids[i]];
        char want[64];
        snprintf(want, sizeof want, "%s.grad", pv->name);
        int k = 0;
        while (k < tg->n_outputs && strcmp(tg->values[tg->outputs[k]].name, want) != 0) k++;
        if (k == tg->n_outputs) fail_msg("%s: no output %s", ir_op_name(op), want);
        const ir_tensor *gt = &r.outputs[k];
        int64_t n = ir_shape_numel(&pv->shape);
        size_t es = ir_dtype_size(pv->dtype);
        double eps = pv->dtype == IR_F64 ? 1e-6 : 1e-3, num = 0, den = 0;
        void *pert = malloc((size_t)(n ? n : 1) * es);
        int64_t step = n > GC_MAX_SAMPLES ? (n + GC_MAX_SAMPLES - 1) / GC_MAX_SAMPLES : 1;
        for (int64_t j = 0; j < n; j += step) {
            double x0 = ir_load_f64(ir_blob_data(pv->blob), pv->dtype, j), l[2];
            for (int s = 0; s < 2; s++) {
                memcpy(pert, ir_blob_data(pv->blob), (size_t)n * es);
                ir_store_f64(pert, pv->dtype, j, x0 + (s ? -eps : eps));
                rt_binding e = {
                    .value = ids[i], .dtype = pv->dtype, .shape = pv->shape, .data = pert};
                l[s] = gc_loss(g, b, nb, &e);
            }
            double fd = (l[0] - l[1]) / (2 * eps), an = ir_load_f64(gt->data, gt->dtype, j);
            num += (an - fd) * (an - fd);
            den += fd * fd;
        }
        free(pert);
        double err = sqrt(num) / fmax(sqrt(den), 1e-12);
        if (!(err <= tol))
            fail_msg("%s: gradient of input %d: relative error %.3g > %.3g", ir_op_name(op), i, err,
                     tol);
        worst = fmax(worst, err);
    }
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(g);
    for (int i = 0; i < n_in; i++)
        if (!(in[i].kind == GC_DATA && in[i].data)) free(owned[i]);
    return worst;
}

#endif
