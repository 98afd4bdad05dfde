/* test-check.h - the one way tests judge float results of a rewritten graph: rt-check.h's
 * criterion, against the float64 run of the original graph (rt_run_reference), the same
 * criterion `magpie verify` applies. A test runs the original once (tu_ref_run), then judges
 * each rewritten graph's float32 run with tu_expect_close, which fails naming the output, its
 * error, the original's own float32 error and the bound; tu_check returns the verdict instead
 * (for plans that must fail). Outputs are matched by name, else by position.
 * Header-only, like test-util.h; needs rt.h (link magpie_runtime). */
#ifndef MAGPIE_TEST_CHECK_H
#define MAGPIE_TEST_CHECK_H

#include "test-util.h"

#include "rt-check.h"

/* The original graph's two runs. */
typedef struct tu_ref {
    const ir_graph *g; /* borrowed: its output names */
    rt_result r32, r64;
} tu_ref;

/* Runs g in float32 and float64 (same bindings and options as rt_run), failing the test on
 * error. */
static inline void tu_ref_run(const ir_graph *g, const rt_binding *in, int n_in,
                              const rt_options *o, tu_ref *ref, const char *what) {
    ir_diag d = {{0}};
    ref->g = g;
    if (rt_run_reference(g, in, n_in, o, &ref->r32, &ref->r64, &d) != IR_OK)
        fail_msg("%s: reference run: %s", what, d.msg);
}

static inline void tu_ref_free(tu_ref *ref) {
    rt_result_free(&ref->r32);
    rt_result_free(&ref->r64);
}

/* The name of output k of g, or NULL. */
static inline const char *tu_output_name(const ir_graph *g, int k) {
    return g && k < g->n_outputs ? g->values[g->outputs[k]].name : NULL;
}

#define TU_MAX_CHECK 4096

/* Judges r, a float32 run of the rewritten graph gr (NULL: outputs by position), against ref
 * with options o (NULL: defaults). res gets each output's verdict (ref's output count, at most
 * TU_MAX_CHECK); returns whether all pass. *worst (may be NULL) gets the largest error over its
 * bound. */
static inline bool tu_check(const tu_ref *ref, const ir_graph *gr, const rt_result *r,
                            const rt_check_opts *o, rt_out_check *res, double *worst) {
    int n = ref->r32.n_outputs;
    assert_true(n <= TU_MAX_CHECK);
    static const char *names[TU_MAX_CHECK];
    static const ir_tensor *opt[TU_MAX_CHECK];
    for (int i = 0; i < n; i++) {
        names[i] = tu_output_name(ref->g, i);
        opt[i] = NULL;
        if (gr && names[i]) {
            for (int k = 0; k < r->n_outputs && !opt[i]; k++)
                if (!strcmp(tu_output_name(gr, k), names[i])) opt[i] = &r->outputs[k];
        } else if (i < r->n_outputs) {
            opt[i] = &r->outputs[i];
        }
    }
    bool ok = rt_check_outputs(n, names, opt, ref->r32.outputs, ref->r64.outputs, o, res);
    if (worst) {
        *worst = 0;
        for (int i = 0; i < n; i++)
            *worst = fmax(*worst, res[i].why     ? INFINITY
                                  : res[i].exact ? 0
                                                 : res[i].err_opt / fmax(res[i].bound, 1e-300));
    }
    return ok;
}

/* tu_check with the default criterion, failing the test on the first output that does not pass.
 * Returns the largest error over its bound (at most 1). */
static inline double tu_expect_close(const tu_ref *ref, const ir_graph *gr, const rt_result *r,
                                     const char *what) {
    static rt_out_check res[TU_MAX_CHECK];
    double worst;
    if (tu_check(ref, gr, r, NULL, res, &worst)) return worst;
    for (int i = 0; i < ref->r32.n_outputs; i++) {
        const rt_out_check *c = &res[i];
        if (c->pass) continue;
        const char *name = tu_output_name(ref->g, i);
        if (c->why) fail_msg("%s: output %d '%s': %s", what, i, name ? name : "?", c->why);
        fail_msg("%s: output %d '%s' (%s): error %.3g against float64, the original's float32 "
                 "error %.3g, bound %.3g (norm %.3g, scale %.3g)",
                 what, i, name ? name : "?", rt_output_kind_name(c->kind), c->err_opt, c->err_orig,
                 c->bound, c->ref_norm, c->scale);
    }
    return worst;
}

#endif
