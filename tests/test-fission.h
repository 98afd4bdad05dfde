/* test-fission.h - a fission set made into the graph a plan executes, as the explorer does:
 * applied to g, ordered eagerly, materialized into standard ops in that order. The fission
 * tests share it; each step that refuses fails the test, naming `what` and the step.
 * tu_fission_plan_check executes it against the original's float64 reference. Header-only,
 * like test-util.h; needs rules.h, schedule.h and rt.h. */
#ifndef MAGPIE_TEST_FISSION_H
#define MAGPIE_TEST_FISSION_H

#include "rules.h"
#include "schedule.h"
#include "test-check.h"
#include "test-util.h"

typedef struct tu_fission_plan {
    ir_graph *one;  /* g with the fission groups marked */
    int *order;     /* one's eager order */
    ir_graph *mat;  /* the materialized graph */
    int *mat_order; /* its order (mat->n_nodes ids) */
} tu_fission_plan;

static inline tu_fission_plan tu_fission_plan_make(const ir_graph *g, const rw_fission *f, int n_f,
                                                   const char *what) {
    ir_diag d = {{0}};
    tu_fission_plan p = {0};
    if (!(p.one = rw_fission_apply(g, f, n_f, NULL, NULL, &d)))
        fail_msg("%s: apply: %s", what, d.msg);
    p.order = sched_eager_order(p.one);
    if (!(p.mat = rw_fission_materialize(p.one, p.order, &p.mat_order, &d)))
        fail_msg("%s: materialize: %s", what, d.msg);
    return p;
}

static inline void tu_fission_plan_free(tu_fission_plan *p) {
    free(p->order);
    free(p->mat_order);
    ir_graph_free(p->mat);
    ir_graph_free(p->one);
    *p = (tu_fission_plan){0};
}

/* p executed in its order (the bindings in and options ro, ro's order replaced): its outputs
 * judged against ref, its executed peak against the one-copy graph's simulated peak, which
 * must agree to the byte. Returns the worst error over its bound. */
static inline double tu_fission_plan_check(const tu_fission_plan *p, const rt_binding *in, int n_in,
                                           const tu_ref *ref, const rt_options *ro,
                                           const char *what) {
    ir_diag d = {{0}};
    sched_memory m;
    if (sched_memory_compute(p->one, p->order, &m, &d) != IR_OK)
        fail_msg("%s: memory: %s", what, d.msg);
    rt_options o = *ro;
    o.order = p->mat_order;
    o.n_order = p->mat->n_nodes;
    rt_result r = {0};
    if (rt_run(p->mat, in, n_in, &o, &r, &d) != IR_OK) fail_msg("%s: run: %s", what, d.msg);
    double worst = tu_expect_close(ref, p->mat, &r, what);
    if (r.peak_bytes != m.peak_bytes)
        fail_msg("%s: executed peak %zu bytes, the one-copy graph's %zu", what, r.peak_bytes,
                 m.peak_bytes);
    rt_result_free(&r);
    sched_memory_free(&m);
    return worst;
}

#endif
