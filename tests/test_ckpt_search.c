/* test_ckpt_search.c - the sections of a search checkpoint (checkpoints/ckpt-search.h): round
 * trips through a real container (ckpt_writer_encode, ckpt_open_mem) of a search snapshot
 * (several states, every rewrite kind, negative values, unfinished frontier states, 100k
 * fingerprints, worker cursors, counters at their extremes), of the command's arguments (empty,
 * UTF-8) and of a cost-model snapshot; then malformed sections, each written by hand into an
 * otherwise valid container (so checksums pass and the decoders are what is tested), each
 * refused with IR_ERR_PARSE, a message naming the section and the field, and nothing handed out.
 *
 * MAGPIE_CKPT_SECTIONS_CORPUS=DIR writes the seed corpus of fuzz_ckpt_sections into DIR (then
 * commit it as tests/fuzz/corpus_ckpt_sections/); its framing is described in that fuzzer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt-search.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A structurally valid snapshot: n states in a random tree (parents below), every rewrite kind,
 * negative and extreme rewrite fields, a frontier of distinct states with some unfinished, n_fps
 * random fingerprints, workers with cursors, and counters that need ten-byte varints. */
static xs_snapshot make_snapshot(uint32_t n, uint32_t n_frontier, size_t n_fps, int workers,
                                 uint64_t seed) {
    xs_snapshot s = {0};
    assert_true(n_frontier <= n);
    s.n_states = n;
    s.states = calloc(n, sizeof *s.states);
    assert_non_null(s.states);
    s.start_nodes = 1234;
    s.eager_peak = UINT64_C(3) << 33;
    s.eager_lat = 0.0123;
    s.start_peak = UINT64_C(5) << 31;
    s.start_lat = 0.0456;
    s.states[0] = (xs_snap_state){
        .parent = -1, .peak = s.start_peak, .lat = s.start_lat, .fp = splitmix(&seed)};
    for (uint32_t i = 1; i < n; i++) {
        xs_snap_state *st = &s.states[i];
        uint64_t r = splitmix(&seed);
        st->parent = (int32_t)(r % i);
        st->rw.kind = (int)(i % RW_KIND_COUNT);
        st->rw.node_id = i == 1 ? UINT32_MAX : (uint32_t)(r >> 40);
        st->rw.value = i == 2 ? INT32_MIN : i == 3 ? INT32_MAX : (int)(r >> 60) - 8;
        if (st->rw.kind == RW_SUBST) st->rw.value = (int)((r >> 60) % RW_SUBST_RULE_COUNT);
        st->rw.user_id = (uint32_t)(r >> 20);
        st->peak = i == 4 ? UINT64_MAX : splitmix(&seed) >> 20;
        st->lat = i == 5 ? 0.0 : (double)(splitmix(&seed) >> 11) * 0x1p-60;
        st->fp = splitmix(&seed);
    }
    s.n_frontier = n_frontier;
    s.frontier = n_frontier ? calloc(n_frontier, sizeof *s.frontier) : NULL;
    for (uint32_t i = 0; i < n_frontier; i++) {
        uint32_t state = n - 1 - i; /* distinct */
        s.frontier[i] = (xs_snap_item){.state = (int32_t)state,
                                       .seq = i == 0 ? UINT64_MAX : splitmix(&seed) >> (i % 64),
                                       .worker = (int32_t)(i % (uint32_t)workers),
                                       .unfinished = i % 3 == 1};
    }
    s.best = (int32_t)(n / 2);
    s.n_fps = n_fps;
    s.fps = malloc((n_fps ? n_fps : 1) * sizeof *s.fps);
    for (size_t i = 0; i < n_fps; i++) s.fps[i] = splitmix(&seed);
    if (n_fps > 2) s.fps[1] = 0, s.fps[2] = UINT64_MAX; /* the extremes of the codec */
    s.n_workers = workers;
    s.worker_seq = malloc((size_t)workers * sizeof *s.worker_seq);
    s.worker_rng = malloc((size_t)workers * sizeof *s.worker_rng);
    for (int i = 0; i < workers; i++) {
        s.worker_seq[i] = (uint64_t)i * 1000 + 7;
        s.worker_rng[i] = splitmix(&seed);
    }
    s.counters = (xp_worker_stats){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, UINT64_MAX};
    s.cache_hits = 100;
    s.cache_misses = UINT64_MAX - 1;
    s.replay_steps = 300;
    s.replay_mismatches = 0;
    s.failed_children = 42;
    for (int i = 0; i < XS_PHASE_COUNT; i++) s.phase_seconds[i] = 0.25 * i + 1e-9;
    s.elapsed_s = 3600.5;
    s.resumes = 3;
    return s;
}

static ckpt_writer *new_writer(void) {
    ckpt_meta m = {.model_path = "model.onnx", .model_hash = 11, .options_hash = 22};
    ir_status st;
    ir_diag d = {{0}};
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    if (!w) fail_msg("writer: %s", d.msg);
    return w;
}

/* Encodes w's sections into a container and opens it. */
static ckpt_reader *reopen(ckpt_writer *w) {
    uint8_t *buf = NULL;
    size_t n = 0;
    ir_diag d = {{0}};
    ir_status st;
    if (ckpt_writer_encode(w, &buf, &n, &d) != IR_OK) fail_msg("encode: %s", d.msg);
    ckpt_reader *r = ckpt_open_mem(buf, n, "test.mpck", &st, &d);
    free(buf);
    if (!r) fail_msg("open: %s", d.msg);
    return r;
}

static void expect_snapshot_equal(const xs_snapshot *a, const xs_snapshot *b) {
    assert_int_equal(a->n_states, b->n_states);
    for (uint32_t i = 0; i < a->n_states; i++) {
        const xs_snap_state *x = &a->states[i], *y = &b->states[i];
        assert_int_equal(x->parent, y->parent);
        assert_int_equal(x->rw.kind, y->rw.kind);
        assert_int_equal(x->rw.node_id, y->rw.node_id);
        assert_int_equal(x->rw.value, y->rw.value);
        assert_int_equal(x->rw.user_id, y->rw.user_id);
        assert_true(x->peak == y->peak);
        assert_memory_equal(&x->lat, &y->lat, sizeof x->lat); /* bit for bit */
        assert_true(x->fp == y->fp);
    }
    assert_int_equal(a->n_frontier, b->n_frontier);
    for (uint32_t i = 0; i < a->n_frontier; i++) {
        assert_int_equal(a->frontier[i].state, b->frontier[i].state);
        assert_true(a->frontier[i].seq == b->frontier[i].seq);
        assert_int_equal(a->frontier[i].worker, b->frontier[i].worker);
        assert_int_equal(a->frontier[i].unfinished, b->frontier[i].unfinished);
    }
    assert_int_equal(a->best, b->best);
    /* fingerprints as sets: the decoder hands them out ascending */
    assert_true(a->n_fps == b->n_fps);
    uint64_t *sa = malloc((a->n_fps ? a->n_fps : 1) * sizeof *sa);
    if (a->n_fps) memcpy(sa, a->fps, a->n_fps * sizeof *sa);
    qsort(sa, a->n_fps, sizeof *sa, cmp_u64);
    for (uint64_t i = 0; i < a->n_fps; i++)
        if (sa[i] != b->fps[i]) fail_msg("fingerprint %llu differs", (unsigned long long)i);
    free(sa);
    assert_int_equal(a->n_workers, b->n_workers);
    for (int i = 0; i < a->n_workers; i++) {
        assert_true(a->worker_seq[i] == b->worker_seq[i]);
        assert_true(a->worker_rng[i] == b->worker_rng[i]);
    }
    assert_memory_equal(&a->counters, &b->counters, sizeof a->counters);
    assert_true(a->cache_hits == b->cache_hits && a->cache_misses == b->cache_misses);
    assert_true(a->replay_steps == b->replay_steps);
    assert_true(a->replay_mismatches == b->replay_mismatches);
    assert_true(a->failed_children == b->failed_children);
    assert_memory_equal(a->phase_seconds, b->phase_seconds, sizeof a->phase_seconds);
    assert_memory_equal(&a->elapsed_s, &b->elapsed_s, sizeof a->elapsed_s);
    assert_int_equal(a->resumes, b->resumes);
    assert_int_equal(a->start_nodes, b->start_nodes);
    assert_true(a->eager_peak == b->eager_peak && a->start_peak == b->start_peak);
    assert_memory_equal(&a->eager_lat, &b->eager_lat, sizeof a->eager_lat);
    assert_memory_equal(&a->start_lat, &b->start_lat, sizeof a->start_lat);
}

static prof_snapshot make_profile(size_t n, bool long_detail) {
    prof_snapshot p = {0};
    snprintf(p.device, sizeof p.device, "cpu");
    if (long_detail) {
        memset(p.detail, 'x', sizeof p.detail - 1); /* the longest that fits */
        memcpy(p.detail, "cpu: ", 5);
    } else {
        snprintf(p.detail, sizeof p.detail, "cpu: Ünïcödé CPU ™, 2 threads");
    }
    p.measured = true;
    p.fallback = (prof_target){NULL, NULL, 1e11, 2e11, 3e9, 4e10, 5e9, 2e-6, 0.0};
    p.step_s = 1.5e-7;
    p.n_entries = n;
    p.entries = n ? calloc(n, sizeof *p.entries) : NULL;
    uint64_t s = 99;
    for (size_t i = 0; i < n; i++) {
        p.entries[i].sig = (i + 1) * (UINT64_MAX / (n + 1)) + (splitmix(&s) & 0xff);
        p.entries[i].seconds = i == 0 ? 0.0 : (double)(splitmix(&s) >> 11) * 0x1p-70;
        p.entries[i].runs = i == 1 ? UINT32_MAX : (uint32_t)(i % 7);
    }
    return p;
}

static void expect_profile_equal(const prof_snapshot *a, const prof_snapshot *b) {
    assert_string_equal(a->device, b->device);
    assert_string_equal(a->detail, b->detail);
    assert_int_equal(a->measured, b->measured);
    const prof_target *x = &a->fallback, *y = &b->fallback;
    assert_null(y->name);
    assert_null(y->description);
    assert_true(x->mm_f32_flops == y->mm_f32_flops && x->mm_f16_flops == y->mm_f16_flops);
    assert_true(x->other_f32_flops == y->other_f32_flops && x->mem_bw == y->mem_bw);
    assert_true(x->host_link_bw == y->host_link_bw && x->launch_s == y->launch_s);
    assert_true(x->knee_s == y->knee_s);
    assert_memory_equal(&a->step_s, &b->step_s, sizeof a->step_s);
    assert_int_equal(a->n_entries, b->n_entries);
    for (size_t i = 0; i < a->n_entries; i++) {
        assert_true(a->entries[i].sig == b->entries[i].sig);
        assert_memory_equal(&a->entries[i].seconds, &b->entries[i].seconds, sizeof(double));
        assert_int_equal(a->entries[i].runs, b->entries[i].runs);
    }
}

/* ---------------------------------------------------------------- round trips */

static void test_snapshot_round_trip(void **state) {
    (void)state;
    xs_snapshot s = make_snapshot(300, 120, 100000, 3, 1);
    ckpt_writer *w = new_writer();
    ir_diag d = {{0}};
    if (ckpt_put_snapshot(w, &s, &d) != IR_OK) fail_msg("put: %s", d.msg);
    ckpt_reader *r = reopen(w);
    /* the seven sections, each once */
    uint32_t tags[] = {CKPT_TAG_GRAPH, CKPT_TAG_FRONTIER, CKPT_TAG_FPSET,   CKPT_TAG_BEST,
                       CKPT_TAG_RNG,   CKPT_TAG_TIME,     CKPT_TAG_COUNTERS};
    assert_int_equal(ckpt_header(r)->n_sections, 7);
    for (int i = 0; i < 7; i++) {
        const uint8_t *p;
        size_t len;
        assert_true(ckpt_section(r, tags[i], &p, &len));
    }
    xs_snapshot got;
    memset(&got, 0xab, sizeof got); /* the decoder zeroes it first */
    if (ckpt_get_snapshot(r, &got, &d) != IR_OK) fail_msg("get: %s", d.msg);
    expect_snapshot_equal(&s, &got);
    assert_int_equal(got.states[0].parent, -1);
    assert_int_equal(got.states[0].rw.kind, 0);
    xs_snapshot_free(&got);
    xs_snapshot_free(&got); /* idempotent */
    ckpt_close(r);
    ckpt_writer_free(w);
    xs_snapshot_free(&s);
}

static void test_snapshot_minimal_round_trip(void **state) {
    (void)state;
    xs_snapshot s = make_snapshot(1, 0, 0, 1, 2); /* only the start state, nothing else */
    s.best = 0;
    ckpt_writer *w = new_writer();
    ir_diag d = {{0}};
    assert_int_equal(ckpt_put_snapshot(w, &s, &d), IR_OK);
    ckpt_reader *r = reopen(w);
    xs_snapshot got;
    if (ckpt_get_snapshot(r, &got, &d) != IR_OK) fail_msg("get: %s", d.msg);
    expect_snapshot_equal(&s, &got);
    assert_null(got.frontier);
    xs_snapshot_free(&got);
    ckpt_close(r);
    ckpt_writer_free(w);
    xs_snapshot_free(&s);
}

static void test_args_round_trip(void **state) {
    (void)state;
    const char *argv[] = {"model.onnx", "", "--limit", "0.4", "-o", "résultats/模型", "", "x y"};
    int argc = (int)(sizeof argv / sizeof *argv);
    ckpt_writer *w = new_writer();
    ir_diag d = {{0}};
    assert_int_equal(ckpt_put_args(w, argc, argv, &d), IR_OK);
    ckpt_reader *r = reopen(w);
    int got_c = -1;
    char **got_v = NULL;
    if (ckpt_get_args(r, &got_c, &got_v, &d) != IR_OK) fail_msg("get: %s", d.msg);
    assert_int_equal(got_c, argc);
    for (int i = 0; i < argc; i++) assert_string_equal(got_v[i], argv[i]);
    assert_null(got_v[argc]);
    ckpt_args_free(got_c, got_v);
    ckpt_args_free(0, NULL);
    ckpt_close(r);
    ckpt_writer_free(w);

    /* no arguments at all: a valid, empty, NULL-terminated vector */
    w = new_writer();
    assert_int_equal(ckpt_put_args(w, 0, NULL, &d), IR_OK);
    r = reopen(w);
    if (ckpt_get_args(r, &got_c, &got_v, &d) != IR_OK) fail_msg("get: %s", d.msg);
    assert_int_equal(got_c, 0);
    assert_non_null(got_v);
    assert_null(got_v[0]);
    ckpt_args_free(got_c, got_v);
    ckpt_close(r);
    ckpt_writer_free(w);
}

static void test_profile_round_trip(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        prof_snapshot p = make_profile(k == 0 ? 0 : k == 1 ? 5 : 500, k == 2);
        ckpt_writer *w = new_writer();
        ir_diag d = {{0}};
        assert_int_equal(ckpt_put_profile(w, &p, &d), IR_OK);
        ckpt_reader *r = reopen(w);
        prof_snapshot got;
        memset(&got, 0xcd, sizeof got);
        if (ckpt_get_profile(r, &got, &d) != IR_OK) fail_msg("get: %s", d.msg);
        expect_profile_equal(&p, &got);
        prof_snapshot_free(&got);
        prof_snapshot_free(&got);
        prof_snapshot_free(NULL);
        ckpt_close(r);
        ckpt_writer_free(w);
        prof_snapshot_free(&p);
    }
}

/* All three kinds in one container, as the CLI writes them. */
static void test_all_sections_together(void **state) {
    (void)state;
    xs_snapshot s = make_snapshot(40, 10, 1000, 2, 3);
    prof_snapshot p = make_profile(7, false);
    const char *argv[] = {"m.onnx", "--train"};
    ckpt_writer *w = new_writer();
    ir_diag d = {{0}};
    assert_int_equal(ckpt_put_args(w, 2, argv, &d), IR_OK);
    assert_int_equal(ckpt_put_snapshot(w, &s, &d), IR_OK);
    assert_int_equal(ckpt_put_profile(w, &p, &d), IR_OK);
    ckpt_reader *r = reopen(w);
    assert_int_equal(ckpt_header(r)->n_sections, 9);
    xs_snapshot gs;
    prof_snapshot gp;
    int argc;
    char **av;
    assert_int_equal(ckpt_get_snapshot(r, &gs, &d), IR_OK);
    assert_int_equal(ckpt_get_profile(r, &gp, &d), IR_OK);
    assert_int_equal(ckpt_get_args(r, &argc, &av, &d), IR_OK);
    expect_snapshot_equal(&s, &gs);
    expect_profile_equal(&p, &gp);
    assert_int_equal(argc, 2);
    assert_string_equal(av[1], "--train");
    xs_snapshot_free(&gs);
    prof_snapshot_free(&gp);
    ckpt_args_free(argc, av);
    ckpt_close(r);
    ckpt_writer_free(w);
    xs_snapshot_free(&s);
    prof_snapshot_free(&p);
}

/* ---------------------------------------------------------------- malformed sections */

/* A container holding every section of a valid checkpoint (snapshot, arguments, profile), except
 * that section `tag` holds bytes[0..len) instead, or is left out when bytes is NULL. */
static ckpt_reader *with_section(uint32_t tag, const void *bytes, size_t len) {
    xs_snapshot s = make_snapshot(6, 3, 100, 2, 4);
    s.best = 1; /* in range for the hand-made FRNT of 3 states too */
    prof_snapshot p = make_profile(3, false);
    const char *argv[] = {"m.onnx", "--threads", "2"};
    ir_diag d = {{0}};
    ckpt_writer *full = new_writer();
    assert_int_equal(ckpt_put_snapshot(full, &s, &d), IR_OK);
    assert_int_equal(ckpt_put_args(full, 3, argv, &d), IR_OK);
    assert_int_equal(ckpt_put_profile(full, &p, &d), IR_OK);
    ckpt_reader *valid = reopen(full);
    ckpt_writer *w = new_writer();
    for (uint32_t i = 0; i < ckpt_header(valid)->n_sections; i++) {
        uint32_t t;
        const uint8_t *sp;
        size_t sn;
        ckpt_section_at(valid, i, &t, &sp, &sn);
        if (t != tag) {
            assert_int_equal(ckpt_writer_section(w, t, sp, sn, &d), IR_OK);
        } else if (bytes) {
            assert_int_equal(ckpt_writer_section(w, t, bytes, len, &d), IR_OK);
        }
    }
    ckpt_reader *r = reopen(w);
    ckpt_writer_free(w);
    ckpt_close(valid);
    ckpt_writer_free(full);
    xs_snapshot_free(&s);
    prof_snapshot_free(&p);
    return r;
}

/* Every decoder whose section is `tag` fails on r with IR_ERR_PARSE, a message holding each of
 * the NULL-terminated strings, and hands nothing out. */
static void expect_refused(ckpt_reader *r, uint32_t tag, ...) {
    ir_diag d = {{0}};
    ir_status st;
    if (tag == CKPT_TAG_OPTIONS) {
        int argc = 5;
        char **argv = (char **)&argc;
        st = ckpt_get_args(r, &argc, &argv, &d);
        assert_int_equal(argc, 0);
        assert_null(argv);
    } else if (tag == CKPT_TAG_PROFILE) {
        prof_snapshot p;
        memset(&p, 0x5a, sizeof p);
        st = ckpt_get_profile(r, &p, &d);
        assert_null(p.entries);
        assert_int_equal(p.n_entries, 0);
    } else {
        xs_snapshot s;
        memset(&s, 0x5a, sizeof s);
        st = ckpt_get_snapshot(r, &s, &d);
        assert_null(s.states);
        assert_null(s.frontier);
        assert_null(s.fps);
        assert_null(s.worker_seq);
        assert_int_equal(s.n_states, 0);
    }
    if (st != IR_ERR_PARSE)
        fail_msg("status %s (%s), expected a parse error", ir_status_to_string(st), d.msg);
    va_list ap;
    va_start(ap, tag);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
        if (!strstr(d.msg, want)) fail_msg("message '%s' lacks '%s'", d.msg, want);
    va_end(ap);
    print_message("refused: %s\n", d.msg);
    ckpt_close(r);
}

/* Refuses the hand-made section b (then freed). */
#define REFUSED(tag, b, ...)                                                                       \
    do {                                                                                           \
        assert_false((b)->oom);                                                                    \
        expect_refused(with_section(tag, (b)->data, (b)->len), tag, __VA_ARGS__, NULL);            \
        ckpt_buf_free(b);                                                                          \
    } while (0)

/* A valid FRNT of 3 states (the start and two children) and `frontier` records. */
static void frnt_states(ckpt_buf *b, uint32_t version) {
    ckpt_put_u32(b, version);
    ckpt_put_varint(b, 3);
    for (int i = 1; i < 3; i++) {
        ckpt_put_varint(b, (uint64_t)i - 1); /* parent */
        ckpt_put_u8(b, RW_REMAT);
        ckpt_put_varint(b, 10);
        ckpt_put_varint(b, 0);
        ckpt_put_varint(b, 11);
        ckpt_put_u64(b, 1000);
        ckpt_put_f64(b, 0.5);
        ckpt_put_u64(b, 77 + (uint64_t)i);
    }
}

static void frnt_item(ckpt_buf *b, uint64_t state, uint64_t seq, uint64_t worker, uint8_t flags) {
    ckpt_put_varint(b, state);
    ckpt_put_varint(b, seq);
    ckpt_put_varint(b, worker);
    ckpt_put_u8(b, flags);
}

static void test_valid_hand_made_frontier(void **state) {
    /* the hand-made FRNT the malformed cases start from is itself accepted */
    (void)state;
    ckpt_buf b = {0};
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 2);
    frnt_item(&b, 2, 5, 0, 1);
    frnt_item(&b, 1, 6, 1, 0);
    ckpt_reader *r = with_section(CKPT_TAG_FRONTIER, b.data, b.len);
    ckpt_buf_free(&b);
    xs_snapshot s;
    ir_diag d = {{0}};
    if (ckpt_get_snapshot(r, &s, &d) != IR_OK) fail_msg("get: %s", d.msg);
    assert_int_equal(s.n_states, 3);
    assert_int_equal(s.states[2].parent, 1);
    assert_int_equal(s.states[2].rw.kind, RW_REMAT);
    assert_int_equal(s.states[2].rw.node_id, 10);
    assert_int_equal(s.states[2].rw.user_id, 11);
    assert_true(s.states[2].fp == 79 && s.states[2].lat == 0.5);
    assert_int_equal(s.n_frontier, 2);
    assert_int_equal(s.frontier[0].state, 2);
    assert_true(s.frontier[0].unfinished && !s.frontier[1].unfinished);
    assert_int_equal(s.frontier[1].worker, 1);
    assert_int_equal(s.best, 1);
    xs_snapshot_free(&s);
    ckpt_close(r);
}

static void test_refuses_wrong_version(void **state) {
    (void)state;
    ckpt_buf b = {0};
    frnt_states(&b, 2);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "version 2");
    ckpt_put_u32(&b, 0);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_BEST, &b, "section BEST", "version 0");
    ckpt_put_u32(&b, 7);
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "version 7");
    ckpt_put_u32(&b, UINT32_MAX);
    REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "version 4294967295");
    ckpt_put_u16(&b, 1); /* too short for the version itself */
    REFUSED(CKPT_TAG_TIME, &b, "section TIME", "truncated", "version");
}

static void test_refuses_trailing_bytes(void **state) {
    (void)state;
    ckpt_buf b = {0};
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 1);
    ckpt_put_u8(&b, 0);
    REFUSED(CKPT_TAG_BEST, &b, "section BEST", "1 trailing bytes");
    ckpt_put_u32(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_varint(&b, 0);
    ckpt_put_u32(&b, 0);
    REFUSED(CKPT_TAG_TIME, &b, "section TIME", "4 trailing bytes");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 1);
    ckpt_put_str(&b, "a");
    ckpt_put_str(&b, "b");
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "trailing");
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 0);
    ckpt_put_u8(&b, 9);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "1 trailing bytes");
    ckpt_put_u32(&b, 1);
    ckpt_put_fpset(&b, (uint64_t[]){3, 1}, 2);
    ckpt_put_u8(&b, 0);
    REFUSED(CKPT_TAG_FPSET, &b, "section FPST", "trailing");
}

static void test_refuses_truncated_records(void **state) {
    (void)state;
    ckpt_buf b = {0};
    /* a state record cut in its fingerprint (the count still fits the bytes) */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 0);
    ckpt_put_u8(&b, RW_SWAP);
    ckpt_put_varint(&b, UINT32_MAX); /* 5 bytes */
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 0);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_u32(&b, 0); /* 4 of the fingerprint's 8 bytes */
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 1: truncated");
    /* a frontier record cut in its sequence number */
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 2);
    frnt_item(&b, 1, UINT64_MAX, 0, 0);
    ckpt_put_varint(&b, 2);
    ckpt_put_bytes(&b, "\xff\xff\xff", 3); /* a varint that never ends */
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "frontier record 1: truncated");
    /* the worker cursors cut short */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 1);
    ckpt_put_u64(&b, 5);
    ckpt_put_u32(&b, 5); /* 4 bytes short: the count check sees it first */
    REFUSED(CKPT_TAG_RNG, &b, "section RNGS", "n_workers 1", "bytes left");
    /* the counters stop after a few fields */
    ckpt_put_u32(&b, 1);
    for (int i = 0; i < 12; i++) ckpt_put_varint(&b, (uint64_t)i);
    REFUSED(CKPT_TAG_COUNTERS, &b, "section CNTR", "truncated");
    /* the graph figures, a profile entry, an argument */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 5);
    ckpt_put_u64(&b, 5);
    REFUSED(CKPT_TAG_GRAPH, &b, "section GRPH", "truncated");
    ckpt_put_u32(&b, 1);
    ckpt_put_str(&b, "cpu");
    ckpt_put_str(&b, "cpu: x");
    ckpt_put_u8(&b, 1);
    for (int i = 0; i < 8; i++) ckpt_put_f64(&b, 1.0);
    ckpt_put_varint(&b, 1);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_u8(&b, 0x80); /* runs: a varint that never ends */
    ckpt_put_u32(&b, 0x80808080);
    REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "entry 0: truncated");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_str(&b, "abc");
    ckpt_put_varint(&b, 10); /* ten bytes announced, two present */
    ckpt_put_bytes(&b, "ab", 2);
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "argument 1: truncated");
}

static void test_refuses_counts_beyond_the_bytes(void **state) {
    (void)state;
    ckpt_buf b = {0};
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 1000000);
    ckpt_put_bytes(&b, "0123456789", 10);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "n_states 1000000", "bytes left");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, UINT64_MAX);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "n_states", "too large");
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 3); /* three frontier records, 8 bytes */
    ckpt_put_u64(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "n_frontier 3", "bytes left");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, INT32_MAX);
    ckpt_put_u64(&b, 1);
    ckpt_put_u64(&b, 1);
    REFUSED(CKPT_TAG_RNG, &b, "section RNGS", "n_workers 2147483647", "bytes left");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, UINT64_MAX >> 1);
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "argc", "too large");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 100);
    ckpt_put_str(&b, "a");
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "argc 100", "bytes left");
    ckpt_put_u32(&b, 1);
    ckpt_put_str(&b, "cpu");
    ckpt_put_str(&b, "cpu: x");
    ckpt_put_u8(&b, 1);
    for (int i = 0; i < 8; i++) ckpt_put_f64(&b, 1.0);
    ckpt_put_varint(&b, 2); /* two entries, one present */
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_varint(&b, 3);
    REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "n 2", "bytes left");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 1000); /* a fingerprint set of 1000 in 3 bytes */
    ckpt_put_u8(&b, 10);
    ckpt_put_u16(&b, 0xffff);
    REFUSED(CKPT_TAG_FPSET, &b, "section FPST", "malformed fingerprint set");
}

static void test_refuses_bad_indices_and_flags(void **state) {
    (void)state;
    ckpt_buf b = {0};
    /* state 2 naming itself, then state 1 naming a later state */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 3);
    for (int i = 1; i < 3; i++) {
        ckpt_put_varint(&b, i == 2 ? 2 : 0);
        ckpt_put_u8(&b, RW_DEREMAT);
        ckpt_put_varint(&b, 1);
        ckpt_put_varint(&b, 1);
        ckpt_put_varint(&b, 1);
        ckpt_put_u64(&b, 1);
        ckpt_put_f64(&b, 1.0);
        ckpt_put_u64(&b, (uint64_t)i);
    }
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 2: parent 2 is not below 2");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 20);
    ckpt_put_u8(&b, RW_DEREMAT);
    ckpt_put_bytes(&b, "\x01\x01\x01", 3);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_u64(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 1: parent 20 is not below 1");
    /* a rewrite kind beyond the table, a node id beyond 32 bits, a negative latency */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 0);
    ckpt_put_u8(&b, RW_KIND_COUNT);
    ckpt_put_bytes(&b, "\x01\x01\x01", 3);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_u64(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 1: rewrite kind");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 0);
    ckpt_put_u8(&b, RW_SWAP);
    ckpt_put_varint(&b, UINT64_C(1) << 32);
    ckpt_put_bytes(&b, "\x01\x01", 2);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, 1.0);
    ckpt_put_u64(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 1: rewrite node 4294967296");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 2);
    ckpt_put_varint(&b, 0);
    ckpt_put_u8(&b, RW_SWAP);
    ckpt_put_bytes(&b, "\x01\x01\x01", 3);
    ckpt_put_u64(&b, 1);
    ckpt_put_f64(&b, -1.0);
    ckpt_put_u64(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "state 1: latency -1");
    /* frontier: a flag bit other than bit 0, a state out of range */
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 2);
    frnt_item(&b, 1, 1, 0, 1);
    frnt_item(&b, 2, 2, 0, 2);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "frontier record 1: flags 0x02");
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 1);
    frnt_item(&b, 0, 0, 0, 0x81);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "frontier record 0: flags 0x81");
    frnt_states(&b, 1);
    ckpt_put_varint(&b, 1);
    frnt_item(&b, 3, 0, 0, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "frontier record 0: state 3 out of range");
    /* best out of range (the base snapshot has 6 states), no workers */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 6);
    REFUSED(CKPT_TAG_BEST, &b, "section BEST", "best 6 out of range");
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_RNG, &b, "section RNGS", "n_workers 0");
    /* no states at all */
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_FRONTIER, &b, "section FRNT", "n_states 0");
    /* a NaN elapsed time */
    ckpt_put_u32(&b, 1);
    ckpt_put_f64(&b, NAN);
    ckpt_put_varint(&b, 0);
    REFUSED(CKPT_TAG_TIME, &b, "section TIME", "elapsed");
}

/* The structural check of the whole snapshot (xs_snapshot_check) runs after the sections
 * decode: a state listed twice in the frontier passes every section's own checks. */
static void test_refuses_what_only_the_snapshot_check_sees(void **state) {
    (void)state;
    ckpt_buf b = {0};
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 6);
    xs_snapshot s = make_snapshot(6, 3, 100, 2, 4); /* the base of with_section */
    for (uint32_t i = 1; i < 6; i++) {
        const xs_snap_state *st = &s.states[i];
        ckpt_put_varint(&b, (uint64_t)st->parent);
        ckpt_put_u8(&b, (uint8_t)st->rw.kind);
        ckpt_put_varint(&b, st->rw.node_id);
        ckpt_put_varint(&b, st->rw.value < 0 ? 2 * (uint64_t)(-(int64_t)st->rw.value) - 1
                                             : 2 * (uint64_t)st->rw.value);
        ckpt_put_varint(&b, st->rw.user_id);
        ckpt_put_u64(&b, st->peak);
        ckpt_put_f64(&b, st->lat);
        ckpt_put_u64(&b, st->fp);
    }
    ckpt_put_varint(&b, 2);
    frnt_item(&b, 4, 1, 0, 0);
    frnt_item(&b, 4, 2, 1, 0);
    xs_snapshot_free(&s);
    REFUSED(CKPT_TAG_FRONTIER, &b, "search snapshot");
}

static void test_refuses_bad_profiles(void **state) {
    (void)state;
    ckpt_buf b = {0};
    /* sigs not strictly ascending: descending, then equal */
    for (int equal = 0; equal < 2; equal++) {
        ckpt_put_u32(&b, 1);
        ckpt_put_str(&b, "cpu");
        ckpt_put_str(&b, "cpu: x");
        ckpt_put_u8(&b, 1);
        for (int i = 0; i < 8; i++) ckpt_put_f64(&b, 1.0);
        ckpt_put_varint(&b, 3);
        uint64_t sigs[3] = {5, 9, equal ? 9 : 3};
        for (int i = 0; i < 3; i++) {
            ckpt_put_u64(&b, sigs[i]);
            ckpt_put_f64(&b, 1e-6);
            ckpt_put_varint(&b, 5);
        }
        REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "entry 2: sig",
                equal ? "0000000000000009 not above" : "0000000000000003 not above");
    }
    /* a device string too long for prof_snapshot.device, a NUL inside the detail */
    char dev[65];
    memset(dev, 'a', 64);
    dev[64] = 0;
    ckpt_put_u32(&b, 1);
    ckpt_put_str(&b, dev);
    REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "device of 64 bytes (at most 63)");
    ckpt_put_u32(&b, 1);
    ckpt_put_str(&b, "cpu");
    ckpt_put_varint(&b, 3);
    ckpt_put_bytes(&b, "a\0b", 3);
    REFUSED(CKPT_TAG_PROFILE, &b, "section PROF", "detail holds a NUL byte");
    /* measured other than 0/1; an infinite figure; a negative entry time */
    for (int k = 0; k < 3; k++) {
        ckpt_put_u32(&b, 1);
        ckpt_put_str(&b, "cpu");
        ckpt_put_str(&b, "cpu: x");
        ckpt_put_u8(&b, k == 0 ? 2 : 1);
        for (int i = 0; i < 8; i++) ckpt_put_f64(&b, k == 1 && i == 3 ? INFINITY : 1.0);
        ckpt_put_varint(&b, 1);
        ckpt_put_u64(&b, 1);
        ckpt_put_f64(&b, k == 2 ? -1e-6 : 1e-6);
        ckpt_put_varint(&b, 1);
        REFUSED(CKPT_TAG_PROFILE, &b, "section PROF",
                k == 0   ? "measured 2"
                : k == 1 ? "fallback mem_bw inf"
                         : "entry 0: -1e-06");
    }
}

static void test_refuses_nul_in_argument(void **state) {
    (void)state;
    ckpt_buf b = {0};
    ckpt_put_u32(&b, 1);
    ckpt_put_varint(&b, 3);
    ckpt_put_str(&b, "model.onnx");
    ckpt_put_varint(&b, 5);
    ckpt_put_bytes(&b, "--l\0x", 5);
    ckpt_put_str(&b, "0.4");
    REFUSED(CKPT_TAG_OPTIONS, &b, "section OPTS", "argument 1 holds a NUL byte");
}

static void test_refuses_missing_sections(void **state) {
    (void)state;
    const uint32_t snap[] = {CKPT_TAG_GRAPH, CKPT_TAG_FRONTIER, CKPT_TAG_FPSET,   CKPT_TAG_BEST,
                             CKPT_TAG_RNG,   CKPT_TAG_TIME,     CKPT_TAG_COUNTERS};
    for (int i = 0; i < 7; i++) {
        char t[5], want[32];
        snprintf(want, sizeof want, "section %s is missing", ckpt_tag_str(snap[i], t));
        expect_refused(with_section(snap[i], NULL, 0), snap[i], want, NULL);
    }
    expect_refused(with_section(CKPT_TAG_OPTIONS, NULL, 0), CKPT_TAG_OPTIONS,
                   "section OPTS is missing", NULL);
    expect_refused(with_section(CKPT_TAG_PROFILE, NULL, 0), CKPT_TAG_PROFILE,
                   "section PROF is missing", NULL);
    /* an empty section: not even the version */
    expect_refused(with_section(CKPT_TAG_COUNTERS, "", 0), CKPT_TAG_COUNTERS, "section CNTR",
                   "truncated", NULL);
}

/* ---------------------------------------------------------------- fuzz seed corpus */

/* The fuzzer's framing (fuzz_ckpt_sections.c): per section, a u8 tag selector (an index into
 * its table of nine tags, modulo 9), a u16 little-endian length, then the bytes. */
static const uint32_t fuzz_tags[9] = {CKPT_TAG_OPTIONS, CKPT_TAG_GRAPH, CKPT_TAG_FRONTIER,
                                      CKPT_TAG_FPSET,   CKPT_TAG_BEST,  CKPT_TAG_PROFILE,
                                      CKPT_TAG_RNG,     CKPT_TAG_TIME,  CKPT_TAG_COUNTERS};

static void write_seed(const char *dir, const char *name, ckpt_writer *w) {
    ckpt_reader *r = reopen(w);
    ckpt_buf out = {0};
    for (uint32_t i = 0; i < ckpt_header(r)->n_sections; i++) {
        uint32_t tag;
        const uint8_t *p;
        size_t n;
        ckpt_section_at(r, i, &tag, &p, &n);
        int k = 0;
        while (fuzz_tags[k] != tag) k++;
        assert_true(n <= UINT16_MAX);
        ckpt_put_u8(&out, (uint8_t)k);
        ckpt_put_u16(&out, (uint16_t)n);
        ckpt_put_bytes(&out, p, n);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out.data, 1, out.len, f), out.len);
    fclose(f);
    ckpt_buf_free(&out);
    ckpt_close(r);
}

static void test_write_fuzz_corpus(void **state) {
    (void)state;
    const char *dir = getenv("MAGPIE_CKPT_SECTIONS_CORPUS");
    if (!dir) skip();
    ir_diag d = {{0}};
    const char *argv[] = {"model.onnx", "--limit", "0.5", ""};
    struct {
        const char *name;
        uint32_t states, frontier;
        size_t fps;
        int workers, profile_entries, args;
    } seeds[] = {
        {"seed_all", 8, 4, 40, 2, 3, 4},
        {"seed_minimal", 1, 0, 0, 1, 0, 0},
        {"seed_snapshot", 20, 12, 200, 3, -1, -1},
        {"seed_profile_args", 0, 0, 0, 0, 6, 3},
    };
    for (size_t k = 0; k < sizeof seeds / sizeof *seeds; k++) {
        ckpt_writer *w = new_writer();
        if (seeds[k].args >= 0) assert_int_equal(ckpt_put_args(w, seeds[k].args, argv, &d), IR_OK);
        if (seeds[k].states) {
            xs_snapshot s = make_snapshot(seeds[k].states, seeds[k].frontier, seeds[k].fps,
                                          seeds[k].workers, 100 + k);
            if (seeds[k].states == 1) s.best = 0;
            assert_int_equal(ckpt_put_snapshot(w, &s, &d), IR_OK);
            xs_snapshot_free(&s);
        }
        if (seeds[k].profile_entries >= 0) {
            prof_snapshot p = make_profile((size_t)seeds[k].profile_entries, false);
            assert_int_equal(ckpt_put_profile(w, &p, &d), IR_OK);
            prof_snapshot_free(&p);
        }
        write_seed(dir, seeds[k].name, w);
        ckpt_writer_free(w);
    }
}

/* The committed seed corpus still holds valid sections: each seed's framing is undone, its
 * sections put into a container, and every kind it holds decodes. */
static void test_committed_corpus_decodes(void **state) {
    (void)state;
    static const char *const seeds[] = {"seed_all", "seed_minimal", "seed_snapshot",
                                        "seed_profile_args"};
    const char *root = getenv("MAGPIE_SOURCE_DIR");
    for (size_t k = 0; k < sizeof seeds / sizeof *seeds; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus_ckpt_sections/%s", root ? root : ".",
                 seeds[k]);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        ckpt_writer *w = new_writer();
        ir_diag d = {{0}};
        bool has[9] = {false};
        for (size_t pos = 0; pos < n;) {
            assert_true(pos + 3 <= n);
            unsigned t = buf[pos] % 9u;
            size_t len = (size_t)buf[pos + 1] | (size_t)buf[pos + 2] << 8;
            pos += 3;
            assert_true(len <= n - pos);
            assert_int_equal(ckpt_writer_section(w, fuzz_tags[t], buf + pos, len, &d), IR_OK);
            has[t] = true;
            pos += len;
        }
        ckpt_reader *r = reopen(w);
        if (has[2]) { /* FRNT: the whole snapshot */
            xs_snapshot s;
            if (ckpt_get_snapshot(r, &s, &d) != IR_OK) fail_msg("%s: %s", seeds[k], d.msg);
            xs_snapshot_free(&s);
        }
        if (has[0]) {
            int argc;
            char **argv;
            if (ckpt_get_args(r, &argc, &argv, &d) != IR_OK) fail_msg("%s: %s", seeds[k], d.msg);
            ckpt_args_free(argc, argv);
        }
        if (has[5]) {
            prof_snapshot p;
            if (ckpt_get_profile(r, &p, &d) != IR_OK) fail_msg("%s: %s", seeds[k], d.msg);
            prof_snapshot_free(&p);
        }
        assert_true(has[0] || has[2] || has[5]);
        ckpt_close(r);
        ckpt_writer_free(w);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_round_trip),
        cmocka_unit_test(test_snapshot_minimal_round_trip),
        cmocka_unit_test(test_args_round_trip),
        cmocka_unit_test(test_profile_round_trip),
        cmocka_unit_test(test_all_sections_together),
        cmocka_unit_test(test_valid_hand_made_frontier),
        cmocka_unit_test(test_refuses_wrong_version),
        cmocka_unit_test(test_refuses_trailing_bytes),
        cmocka_unit_test(test_refuses_truncated_records),
        cmocka_unit_test(test_refuses_counts_beyond_the_bytes),
        cmocka_unit_test(test_refuses_bad_indices_and_flags),
        cmocka_unit_test(test_refuses_what_only_the_snapshot_check_sees),
        cmocka_unit_test(test_refuses_bad_profiles),
        cmocka_unit_test(test_refuses_nul_in_argument),
        cmocka_unit_test(test_refuses_missing_sections),
        cmocka_unit_test(test_write_fuzz_corpus),
        cmocka_unit_test(test_committed_corpus_decodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
