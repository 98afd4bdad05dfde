/* test_xp_snapshot.c - snapshots and resume of the memory optimizer's search (explorer.h,
 * "search snapshots"; explorer/xp-snapshot.c, xp-search.c) on the training graph of
 * cnn_bn_train under the analytic rtx3090 model, with small state budgets (TSan: `ctest -L
 * explorer`):
 *  - one thread, one seed: a run to K states equals a run to K/2 whose final snapshot (one state
 *    left unfinished by the full set) is resumed to K: same best fingerprint, figures and chain,
 *    same expanded and accepted counts, every replay exact; so does resuming the snapshot taken
 *    right after the start (workers paused at whatever point they were);
 *  - the cadence: one checkpoint right after the start, one per checkpoint_now (cleared by the
 *    search), periodic ones, one final (final = true, last); a failing periodic callback is
 *    reported and the search goes on, a failing final one fails the search;
 *  - a resume with another thread count (1 -> 2), then a second resume: they finish, never
 *    worse than the snapshot's best, and count the whole search;
 *  - a snapshot of another graph, a start state that differs, a best that does not rebuild to
 *    its recorded figures: IR_ERR_INVALID;
 *  - xs_snapshot_check refuses each kind of malformed snapshot with IR_ERR_PARSE. */
#include "test-util.h"

#include "explorer.h"
#include "prof.h"
#include "rules.h"

typedef struct fixture {
    ir_graph *g;   /* the training graph */
    ir_graph *fwd; /* its forward graph: another graph */
    prof_model *cost;
    double eager_lat;
} fixture;

static fixture *fx;

static int setup(void **state) {
    (void)state;
    fx = calloc(1, sizeof *fx);
    fx->g = tu_load_training("cnn_bn_train", &fx->fwd);
    ir_diag d = {{0}};
    ir_status st;
    if (ir_fold_constants(fx->g, &d) != IR_OK || ir_fold_constants(fx->fwd, &d) != IR_OK)
        fail_msg("fold: %s", d.msg);
    prof_options po = {.no_db = true};
    fx->cost = prof_open("analytic:rtx3090", &po, &st, &d);
    if (!fx->cost || prof_profile_graph(fx->cost, fx->g, &d) != IR_OK ||
        prof_profile_graph(fx->cost, fx->fwd, &d) != IR_OK)
        fail_msg("cost: %s", d.msg);
    sched_sim sim = {0};
    if (sched_simulate(fx->g, NULL, fx->cost, &sim, &d) != IR_OK) fail_msg("sim: %s", d.msg);
    fx->eager_lat = sim.latency_s;
    sched_sim_free(&sim);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    prof_close(fx->cost);
    ir_graph_free(fx->g);
    ir_graph_free(fx->fwd);
    free(fx);
    return 0;
}

/* Every rule family (F-Tree mutations among the replayed rewrites), peak minimised within 1.5x
 * the eager latency (as test_xp_search.c's fission cases). */
static xs_options opts(int threads, size_t max_states) {
    return (xs_options){.mode = XS_MODE_LAT,
                        .limit = 1.5 * fx->eager_lat,
                        .rules = XS_RULE_ALL,
                        .threads = threads,
                        .seed = 3,
                        .max_states = max_states,
                        .cost = fx->cost};
}

/* ---------------------------------------------------------------- snapshot copies */

static void *dup_mem(const void *p, size_t n) {
    if (!p || n == 0) return NULL;
    void *q = malloc(n);
    assert_non_null(q);
    memcpy(q, p, n);
    return q;
}

static void snap_copy(const xs_snapshot *s, xs_snapshot *c) {
    *c = *s;
    c->states = dup_mem(s->states, sizeof *s->states * s->n_states);
    c->frontier = dup_mem(s->frontier, sizeof *s->frontier * s->n_frontier);
    c->fps = dup_mem(s->fps, sizeof *s->fps * s->n_fps);
    c->worker_seq = dup_mem(s->worker_seq, sizeof(uint64_t) * (size_t)s->n_workers);
    c->worker_rng = dup_mem(s->worker_rng, sizeof(uint64_t) * (size_t)s->n_workers);
}

/* What the checkpoint callback saw. */
typedef struct capture {
    int calls, finals;
    bool final_last; /* the final one came last */
    xs_snapshot first, final;
    bool have_first;
    volatile sig_atomic_t *now; /* set on the first call (checkpoint_now), when not NULL */
    int now_seen_calls;         /* calls when the flag was found cleared again */
    ir_status fail_periodic, fail_final;
} capture;

static ir_status on_checkpoint(void *arg, const xs_snapshot *s, bool final, ir_diag *d) {
    capture *c = arg;
    ir_diag cd = {{0}};
    /* every snapshot handed out is well formed */
    if (xs_snapshot_check(s, "callback", &cd) != IR_OK) fail_msg("%s", cd.msg);
    c->calls++;
    c->final_last = final;
    if (final) {
        c->finals++;
        xs_snapshot_free(&c->final);
        snap_copy(s, &c->final);
        if (c->fail_final) return ir_diag_set(d, c->fail_final, "final write failed (test)");
        return IR_OK;
    }
    if (!c->have_first) {
        snap_copy(s, &c->first);
        c->have_first = true;
        if (c->now) *c->now = 1;
    }
    if (c->fail_periodic) return ir_diag_set(d, c->fail_periodic, "disk full (test)");
    return IR_OK;
}

static void capture_free(capture *c) {
    xs_snapshot_free(&c->first);
    xs_snapshot_free(&c->final);
}

static void search(const xs_options *o, xs_result *r) {
    ir_diag d = {{0}};
    if (xs_search(fx->g, o, r, &d) != IR_OK) fail_msg("search: %s", d.msg);
    assert_non_null(r->best);
    assert_int_equal(r->best_fingerprint, ir_graph_hash(r->best));
    assert_int_equal(r->replay_mismatches, 0);
}

static void expect_same_best(const xs_result *a, const xs_result *b) {
    assert_int_equal(a->best_fingerprint, b->best_fingerprint);
    assert_int_equal(a->best_peak_bytes, b->best_peak_bytes);
    assert_true(a->best_latency_s == b->best_latency_s);
    assert_int_equal(a->chain_len, b->chain_len);
    assert_memory_equal(a->chain, b->chain, sizeof(rw_rewrite) * (size_t)a->chain_len);
}

/* (1) K in one run == K/2, final snapshot, resume to K. */
static void test_resume_equals_uninterrupted(void **state) {
    (void)state;
    const size_t k = 60;
    xs_options o = opts(1, k);
    xs_result a;
    search(&o, &a);
    assert_true(a.stats.reason == XP_STOP_FULL);
    assert_int_equal(a.resumes, 0);

    capture cap = {0};
    o = opts(1, k / 2);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &cap;
    xs_result b;
    search(&o, &b);
    assert_true(b.stats.reason == XP_STOP_FULL);
    assert_int_equal(cap.finals, 1);
    assert_true(cap.final_last && cap.have_first);
    assert_int_equal(b.checkpoints, (uint32_t)cap.calls);
    const xs_snapshot *s = &cap.final;
    /* the final snapshot: the set, the best, the counters, one state cut by the full set */
    assert_int_equal(s->n_fps, k / 2);
    assert_int_equal(s->states[s->best].fp, b.best_fingerprint);
    assert_int_equal(s->states[s->best].peak, b.best_peak_bytes);
    assert_int_equal(s->counters.expanded, b.stats.total.expanded);
    assert_int_equal(s->n_workers, 1);
    assert_int_equal(s->start_nodes, fx->g->n_nodes);
    assert_int_equal(s->states[0].parent, -1);
    assert_int_equal(s->resumes, 0);
    assert_true(s->elapsed_s > 0);
    int unfinished = 0;
    for (uint32_t j = 0; j < s->n_frontier; j++) unfinished += s->frontier[j].unfinished;
    assert_int_equal(unfinished, 1);
    /* parents before children, each state once, the chain of the best recoverable */
    for (uint32_t i = 1; i < s->n_states; i++) assert_true(s->states[i].parent < (int32_t)i);

    o = opts(1, k);
    o.resume = s;
    xs_result c;
    search(&o, &c);
    expect_same_best(&a, &c);
    assert_int_equal(c.resumes, 1);
    assert_int_equal(c.stats.total.expanded, a.stats.total.expanded);
    assert_int_equal(c.stats.total.pushed, a.stats.total.pushed);
    assert_true(c.stats.seconds >= s->elapsed_s);
    assert_true(c.cache_misses > 0); /* the restored states were rebuilt by replay */
    xs_result_free(&c);

    /* the snapshot taken right after the start (wherever the worker was paused) resumes to
     * the same search as well */
    assert_true(cap.first.counters.expanded <= b.stats.total.expanded);
    o.resume = &cap.first;
    search(&o, &c);
    expect_same_best(&a, &c);
    assert_int_equal(c.stats.total.expanded, a.stats.total.expanded);
    xs_result_free(&c);

    xs_result_free(&a);
    xs_result_free(&b);
    capture_free(&cap);
}

/* (2) initial, checkpoint_now, periodic and final callbacks; failures. */
static void test_cadence(void **state) {
    (void)state;
    volatile sig_atomic_t now = 0;
    capture cap = {.now = &now};
    xs_options o = opts(2, 1u << 16);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &cap;
    o.checkpoint_now = &now;
    o.checkpoint_every_s = 0; /* never periodically: initial + the requested one + final */
    o.max_seconds = 0.3;
    xs_result r;
    search(&o, &r);
    assert_true(r.stats.reason == XP_STOP_TIME);
    assert_int_equal(now, 0); /* seen and cleared by the search */
    assert_int_equal(cap.calls, 3);
    assert_int_equal(cap.finals, 1);
    assert_true(cap.final_last);
    assert_int_equal(r.checkpoints, (uint32_t)cap.calls);
    assert_true(r.checkpoint_pause_s >= 0 && r.checkpoint_write_s >= 0);
    assert_string_equal(r.checkpoint_error, "");
    xs_result_free(&r);
    capture_free(&cap);

    /* periodic: every 10 ms over a search of 0.3 s (a pause waits for the running expands) */
    capture per = {0};
    o = opts(2, 1u << 16);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &per;
    o.checkpoint_every_s = 0.01;
    o.max_seconds = 0.3;
    search(&o, &r);
    printf("periodic: %d checkpoints in %.2f s (%s), paused %.4f s, callbacks %.4f s\n", per.calls,
           r.search_seconds, xp_stop_reason_to_string(r.stats.reason), r.checkpoint_pause_s,
           r.checkpoint_write_s);
    assert_true(r.stats.reason == XP_STOP_TIME);
    assert_true(per.calls >= 3); /* initial, at least one periodic, final */
    assert_int_equal(per.finals, 1);
    assert_true(per.final_last);
    assert_true(r.checkpoint_pause_s > 0);
    xs_result_free(&r);
    capture_free(&per);

    /* a failing periodic callback: reported, the search goes on and succeeds */
    capture bad = {.fail_periodic = IR_ERR_IO};
    o = opts(1, 30);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &bad;
    search(&o, &r);
    assert_string_equal(r.checkpoint_error, "disk full (test)");
    assert_int_equal(r.checkpoints, 1); /* only the final one was written */
    xs_result_free(&r);
    capture_free(&bad);

    /* a failing final one fails the search */
    capture badf = {.fail_final = IR_ERR_IO};
    o.checkpoint_arg = &badf;
    ir_diag d = {{0}};
    assert_int_equal(xs_search(fx->g, &o, &r, &d), IR_ERR_IO);
    assert_string_equal(d.msg, "final write failed (test)");
    assert_null(r.best);
    capture_free(&badf);
}

/* (3) 1 thread -> 2 threads -> 1 thread. */
static void test_resume_other_threads(void **state) {
    (void)state;
    capture cap = {0};
    xs_options o = opts(1, 30);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &cap;
    xs_result b;
    search(&o, &b);
    xs_snapshot s1;
    snap_copy(&cap.final, &s1);
    capture_free(&cap);
    const xs_snap_state *sb = &s1.states[s1.best];

    capture cap2 = {0};
    o = opts(2, 80);
    o.resume = &s1;
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &cap2;
    xs_result c;
    search(&o, &c);
    assert_int_equal(c.resumes, 1);
    assert_false(xs_better(o.mode, o.limit, 0, (size_t)sb->peak, sb->lat, c.best_peak_bytes,
                           c.best_latency_s, 1.0));
    assert_true(c.stats.total.expanded >= s1.counters.expanded);
    assert_int_equal(cap2.final.resumes, 1);
    assert_int_equal(cap2.final.n_workers, 2);
    assert_true(cap2.final.n_fps >= s1.n_fps);

    o = opts(1, 120);
    o.resume = &cap2.final;
    xs_result e;
    search(&o, &e);
    assert_int_equal(e.resumes, 2);
    assert_false(xs_better(o.mode, o.limit, 0, c.best_peak_bytes, c.best_latency_s, e.best_peak_bytes,
                           e.best_latency_s, 1.0));
    /* xs_replay of the resumed best's chain from the start rebuilds it */
    xs_replayed rp;
    ir_diag d = {{0}};
    if (xs_replay(fx->g, &o, e.chain, e.chain_len, &rp, &d) != IR_OK) fail_msg("replay: %s", d.msg);
    assert_int_equal(rp.fingerprint, e.best_fingerprint);
    xs_replayed_free(&rp);
    xs_result_free(&b);
    xs_result_free(&c);
    xs_result_free(&e);
    xs_snapshot_free(&s1);
    capture_free(&cap2);
}

/* (4) a snapshot that does not belong to the graph. */
static void test_resume_refused(void **state) {
    (void)state;
    capture cap = {0};
    xs_options o = opts(1, 30);
    o.checkpoint = on_checkpoint;
    o.checkpoint_arg = &cap;
    xs_result r;
    search(&o, &r);
    xs_result_free(&r);
    o = opts(1, 60);
    o.resume = &cap.final;
    ir_diag d = {{0}};
    /* another graph */
    assert_int_equal(xs_search(fx->fwd, &o, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "do not rebuild the checkpointed graph"));
    assert_null(r.best);
    /* the same graph, but a start state with another fingerprint */
    xs_snapshot t;
    snap_copy(&cap.final, &t);
    t.states[0].fp ^= 1;
    o.resume = &t;
    assert_int_equal(xs_search(fx->g, &o, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "fingerprint"));
    xs_snapshot_free(&t);
    /* a best whose recorded figures its replay does not reproduce */
    snap_copy(&cap.final, &t);
    assert_true(t.best > 0);
    t.states[t.best].peak += 1;
    assert_int_equal(xs_search(fx->g, &o, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "best state"));
    xs_snapshot_free(&t);
    /* malformed: refused by the check before anything runs */
    snap_copy(&cap.final, &t);
    t.best = (int32_t)t.n_states;
    assert_int_equal(xs_search(fx->g, &o, &r, &d), IR_ERR_PARSE);
    assert_non_null(strstr(d.msg, "checkpoint: "));
    xs_snapshot_free(&t);
    capture_free(&cap);
}

/* (5) xs_snapshot_check on malformed snapshots (no graph needed). */
static xs_snap_state st3[3];
static xs_snap_item fr2[2];
static uint64_t fps3[3] = {11, 22, 33}, wseq[1] = {7}, wrng[1] = {9};

static xs_snapshot valid(void) {
    st3[0] = (xs_snap_state){.parent = -1, .peak = 100, .lat = 1e-3, .fp = 11};
    st3[1] = (xs_snap_state){
        .parent = 0, .rw = {.kind = RW_REMAT, .node_id = 4}, .peak = 90, .lat = 1e-3, .fp = 22};
    st3[2] = (xs_snap_state){.parent = 1,
                             .rw = {.kind = RW_SUBST, .node_id = 5, .value = 0},
                             .peak = 80,
                             .lat = 2e-3,
                             .fp = 33};
    fr2[0] = (xs_snap_item){.state = 1, .seq = 1, .worker = 0};
    fr2[1] = (xs_snap_item){.state = 2, .seq = 2, .worker = 0, .unfinished = true};
    return (xs_snapshot){.states = st3,
                         .n_states = 3,
                         .frontier = fr2,
                         .n_frontier = 2,
                         .best = 2,
                         .fps = fps3,
                         .n_fps = 3,
                         .worker_seq = wseq,
                         .worker_rng = wrng,
                         .n_workers = 1,
                         .elapsed_s = 1.5,
                         .start_nodes = 10,
                         .eager_lat = 1e-3,
                         .start_lat = 1e-3};
}

static void expect_refused(const xs_snapshot *s, const char *what) {
    ir_diag d = {{0}};
    assert_int_equal(xs_snapshot_check(s, "ckpt.mpck", &d), IR_ERR_PARSE);
    assert_non_null(strstr(d.msg, "ckpt.mpck: "));
    if (!strstr(d.msg, what)) fail_msg("expected \"%s\" in \"%s\"", what, d.msg);
}

static void test_check_malformed(void **state) {
    (void)state;
    ir_diag d = {{0}};
    xs_snapshot s = valid();
    assert_int_equal(xs_snapshot_check(&s, "ckpt.mpck", &d), IR_OK);
    expect_refused(NULL, "none");
    s.n_states = 0;
    expect_refused(&s, "no states");
    s = valid();
    s.states = NULL;
    expect_refused(&s, "no states");
    s = valid();
    st3[0].parent = 0;
    expect_refused(&s, "state 0");
    s = valid();
    st3[2].parent = 2; /* its own index */
    expect_refused(&s, "state 2 has parent 2");
    s = valid();
    st3[1].parent = 2; /* a later state */
    expect_refused(&s, "state 1 has parent 2");
    s = valid();
    st3[1].parent = -1; /* a second root */
    expect_refused(&s, "state 1 has parent -1");
    s = valid();
    st3[1].rw.kind = RW_KIND_COUNT;
    expect_refused(&s, "rewrite kind");
    s = valid();
    st3[2].rw.kind = -1;
    expect_refused(&s, "rewrite kind");
    s = valid();
    st3[2].rw.value = RW_SUBST_RULE_COUNT;
    expect_refused(&s, "substitution rule");
    s = valid();
    st3[1].lat = NAN;
    expect_refused(&s, "latency");
    s = valid();
    st3[2].lat = -1e-3;
    expect_refused(&s, "latency");
    s = valid();
    s.elapsed_s = INFINITY;
    expect_refused(&s, "elapsed");
    s = valid();
    s.start_lat = NAN;
    expect_refused(&s, "start latency");
    s = valid();
    s.phase_seconds[XS_PHASE_HASH] = NAN;
    expect_refused(&s, "phase hash");
    s = valid();
    s.n_workers = 0;
    expect_refused(&s, "0 workers");
    s = valid();
    s.worker_rng = NULL;
    expect_refused(&s, "workers");
    s = valid();
    s.best = 3;
    expect_refused(&s, "best state 3");
    s = valid();
    s.best = -1;
    expect_refused(&s, "best state -1");
    s = valid();
    s.frontier = NULL;
    expect_refused(&s, "frontier");
    s = valid();
    s.fps = NULL;
    expect_refused(&s, "fingerprints");
    s = valid();
    fr2[1].state = 3;
    expect_refused(&s, "frontier entry 1: state 3 out of range");
    s = valid();
    fr2[0].state = -1;
    expect_refused(&s, "frontier entry 0: state -1 out of range");
    s = valid();
    fr2[1].state = 1; /* duplicate */
    expect_refused(&s, "twice");
    s = valid();
    fr2[0].worker = 1;
    expect_refused(&s, "worker 1 out of range");
    /* an empty frontier with NULL, no fingerprints with NULL: fine */
    s = valid();
    s.frontier = NULL;
    s.n_frontier = 0;
    s.fps = NULL;
    s.n_fps = 0;
    assert_int_equal(xs_snapshot_check(&s, NULL, &d), IR_OK);
    /* free: NULL-safe and idempotent */
    xs_snapshot_free(NULL);
    xs_snapshot h = {0};
    snap_copy(&(xs_snapshot){.states = st3, .n_states = 3, .n_workers = 0}, &h);
    xs_snapshot_free(&h);
    xs_snapshot_free(&h);
    assert_null(h.states);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_cadence),
        cmocka_unit_test(test_resume_other_threads),
        cmocka_unit_test(test_resume_refused),
        cmocka_unit_test(test_check_malformed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
