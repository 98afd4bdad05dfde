/* test_xp_restore.c - the pool's snapshots and restore (explorer/xp-pool.c, explorer.h "pool
 * snapshots and restore") on synthetic problems, no graphs:
 *  - bits: states are 20-bit strings (malloc'ed uint32, so ownership is checked), children flip
 *    one bit, fingerprint = mix64(state), key = (a distance to a target, a pseudo-random tie).
 *    One thread, a key under which the search keeps accepting states of equal keys (so their
 *    order is decided by the push sequence numbers a restore must keep):
 *     - run to K expansions vs. run to K/2, snapshot (visit, fingerprints, cursors, counters
 *       after the wait), restore into a new pool, run to K: the expanded sequence is the same
 *       state for state, so are the best and the counters;
 *     - a full fingerprint set stops a run in the middle of an expand: that state is left
 *       unfinished (not counted as expanded), and the restored run, which re-expands it first,
 *       equals the uninterrupted one;
 *     - so does a stop requested inside an expand that had emitted children better than its
 *       state (the unfinished state goes before them: first, not into the heap);
 *    Four threads, plateaued keys as in test_xp_pool.c (a search that ends), a stop requested
 *    inside an expand while others run (slowed down so that some are cut): the
 *    restored run (4 threads, then 3: other cursors) expands every state of the snapshot's
 *    frontier, the unfinished ones included, and nothing the first run had finished;
 *  - edges: a spent time budget stops at once (nothing expanded), more fingerprints than the
 *    budget stop at once with the frontier kept, an empty frontier ends exhausted;
 *  - tree (endless, two children per state): pausing while four workers run, the visit sees
 *    exactly `frontier` (pending) states, all distinct, none unfinished.
 * Run under TSan by `ctest -L explorer`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "explorer.h"

#define NBITS 20
#define NSTATES (1u << NBITS)
#define TARGET 0x5A5A5u
#define MAX_SEQ 20000

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct bits_ctx {
    atomic_uchar *count; /* per state: expands started */
    atomic_long allocs, frees;
    uint32_t *seq; /* one thread: the expansion order */
    int n_seq;
    int spin; /* work between two children (so that a stop request cuts expands) */
    /* the stop_after-th expand requests a stop halfway through its children (0: never) */
    xp_pool *pool;
    long stop_after;
    atomic_long started;
    bool flat; /* bits_key */
} bits_ctx;

/* plateaus: the search converges (the optimum found, the rest rejected); flat: after the
 * optimum every state within 9 bits of it is still accepted, so the search keeps pushing states
 * of equal keys, whose order only the push sequence numbers decide */
static xp_key bits_key(const bits_ctx *c, uint32_t x) {
    int h = __builtin_popcount(x ^ TARGET);
    if (c->flat) return (xp_key){{100.0 + h, (double)(mix64(x + 7) % 2)}};
    return (xp_key){{100.0 + 13.0 * ((h + 1) / 2), (double)(mix64(x + 7) % 7)}};
}

static uint32_t *new_state(bits_ctx *c, uint32_t x) {
    uint32_t *s = malloc(sizeof *s);
    assert_non_null(s);
    *s = x;
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
    return s;
}

static void bits_free(void *ctx, void *state) {
    bits_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
    free(state);
}

static atomic_uint_fast64_t sink;

static void bits_expand(void *ctx, xp_worker *w, const void *state) {
    bits_ctx *c = ctx;
    uint32_t x = *(const uint32_t *)state;
    atomic_fetch_add_explicit(&c->count[x], 1, memory_order_relaxed);
    long nth = atomic_fetch_add_explicit(&c->started, 1, memory_order_relaxed) + 1;
    if (c->seq) {
        assert_true(c->n_seq < MAX_SEQ);
        c->seq[c->n_seq++] = x;
    }
    for (int i = 0; i < NBITS && !xp_worker_should_stop(w); i++) {
        uint64_t h = x;
        for (int k = 0; k < c->spin; k++) h = mix64(h + (uint64_t)k);
        if (h == 42) atomic_store_explicit(&sink, h, memory_order_relaxed);
        uint32_t y = x ^ (1u << i);
        xp_emit(w, new_state(c, y), mix64(y), bits_key(c, y));
        if (i == NBITS / 2 && nth == c->stop_after) xp_pool_request_stop(c->pool);
    }
}

static bits_ctx *ctx_new(bool record, bool flat) {
    bits_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->count = calloc(NSTATES, sizeof *c->count);
    assert_non_null(c->count);
    c->flat = flat;
    if (record) {
        c->seq = malloc(sizeof(uint32_t) * MAX_SEQ);
        assert_non_null(c->seq);
    }
    return c;
}

/* Every state the context allocated was freed exactly once. */
static void ctx_free(bits_ctx *c) {
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
    free(c->count);
    free(c->seq);
    free(c);
}

static xp_pool *bits_pool(bits_ctx *c, int threads, uint64_t max_expanded, size_t max_states) {
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = threads;
    o.seed = 5;
    o.max_expanded = max_expanded;
    o.max_states = max_states;
    xp_callbacks cb = {.expand = bits_expand, .free_state = bits_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_non_null(p);
    return p;
}

static void start_bits(xp_pool *p, bits_ctx *c) {
    uint32_t x0 = ~TARGET & (NSTATES - 1);
    assert_true(xp_pool_start(p, new_state(c, x0), mix64(x0), bits_key(c, x0)));
}

/* What a checkpoint takes from a stopped pool: plain data (state values, not pointers). */
typedef struct snap {
    uint32_t *val;
    xp_item *items; /* .state unused here */
    size_t n, cap;
    uint32_t best;
    xp_key best_key;
    uint64_t *fps;
    size_t n_fps;
    uint64_t seq[8], rng[8];
    int n_cursors;
    xp_worker_stats base;
    int n_unfinished;
} snap;

static void collect(void *arg, const xp_item *it) {
    snap *s = arg;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->val = realloc(s->val, sizeof *s->val * s->cap);
        s->items = realloc(s->items, sizeof *s->items * s->cap);
        assert_true(s->val && s->items);
    }
    s->val[s->n] = *(const uint32_t *)it->state;
    s->items[s->n] = *it;
    s->items[s->n].state = NULL;
    s->n_unfinished += it->unfinished;
    s->n++;
}

/* Paused or joined. */
static void take(xp_pool *p, int threads, snap *s) {
    memset(s, 0, sizeof *s);
    xp_pool_visit_frontier(p, collect, s);
    const uint32_t *b = xp_pool_best(p, &s->best_key);
    s->best = *b;
    s->n_fps = xp_pool_fp_count(p);
    s->fps = malloc(sizeof(uint64_t) * (s->n_fps + 1));
    assert_non_null(s->fps);
    assert_int_equal(xp_pool_fp_copy(p, s->fps, s->n_fps), s->n_fps);
    s->n_cursors = threads;
    for (int i = 0; i < threads; i++) xp_pool_worker_cursor(p, i, &s->seq[i], &s->rng[i]);
    xp_pool_stats st;
    xp_pool_get_stats(p, &st, NULL, 0);
    s->base = st.total;
    assert_int_equal(st.frontier, s->n); /* pending counts exactly the states visited */
}

static void snap_free(snap *s) {
    free(s->val);
    free(s->items);
    free(s->fps);
}

/* Starts p from s: every state a fresh copy owned by p. */
static bool restore(xp_pool *p, bits_ctx *c, const snap *s, double elapsed) {
    xp_item *items = malloc(sizeof *items * (s->n + 1));
    assert_non_null(items);
    xp_restore r = {.items = items,
                    .n_items = s->n,
                    .best_item = -1,
                    .best_fp = mix64(s->best),
                    .best_key = s->best_key,
                    .fps = s->fps,
                    .n_fps = s->n_fps,
                    .seq = s->seq,
                    .rng = s->rng,
                    .n_cursors = s->n_cursors,
                    .base = s->base,
                    .elapsed_s = elapsed};
    for (size_t i = 0; i < s->n; i++) {
        items[i] = s->items[i];
        items[i].state = new_state(c, s->val[i]);
        if (s->val[i] == s->best) r.best_item = (long)i;
    }
    if (r.best_item < 0) r.best_state = new_state(c, s->best);
    bool ok = xp_pool_start_restored(p, &r);
    free(items);
    return ok;
}

static void expect_counters(const xp_worker_stats *a, const xp_worker_stats *b) {
    assert_int_equal(a->expanded, b->expanded);
    assert_int_equal(a->pushed, b->pushed);
    assert_int_equal(a->rejected, b->rejected);
    assert_int_equal(a->improvements, b->improvements);
}

/* Run to k expansions in one go vs. to k/2, snapshot, restore, to k. */
static void test_expanded_budget_one_thread(void **state) {
    (void)state;
    const uint64_t k = 400;
    bits_ctx *a = ctx_new(true, true);
    xp_pool *pa = bits_pool(a, 1, k, 0);
    start_bits(pa, a);
    assert_int_equal(xp_pool_wait(pa), XP_STOP_EXPANDED);
    xp_pool_stats sa;
    xp_pool_get_stats(pa, &sa, NULL, 0);
    assert_int_equal(sa.total.expanded, k);
    assert_int_equal(a->n_seq, (int)k);

    bits_ctx *b = ctx_new(true, true);
    xp_pool *pb = bits_pool(b, 1, k / 2, 0);
    start_bits(pb, b);
    assert_int_equal(xp_pool_wait(pb), XP_STOP_EXPANDED);
    snap s;
    take(pb, 1, &s);
    assert_int_equal(s.base.expanded, k / 2);
    assert_int_equal(s.n_unfinished, 0); /* the ticket path keeps its state in the heap */
    assert_true(s.n > 0);
    xp_pool_free(pb);

    bits_ctx *c = ctx_new(true, true);
    xp_pool *pc = bits_pool(c, 1, k, 0);
    assert_true(restore(pc, c, &s, 0.0));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_EXPANDED);
    xp_pool_stats sc;
    xp_pool_get_stats(pc, &sc, NULL, 0);
    assert_int_equal(sc.total.expanded, k); /* the base counts */
    expect_counters(&sa.total, &sc.total);
    assert_int_equal(sa.total.generated, sc.total.generated);
    assert_int_equal(sa.total.duplicates, sc.total.duplicates);
    assert_int_equal(b->n_seq + c->n_seq, (int)k);
    assert_memory_equal(a->seq, b->seq, sizeof(uint32_t) * (size_t)b->n_seq);
    assert_memory_equal(a->seq + b->n_seq, c->seq, sizeof(uint32_t) * (size_t)c->n_seq);
    xp_key ka, kc;
    assert_int_equal(*(const uint32_t *)xp_pool_best(pa, &ka),
                     *(const uint32_t *)xp_pool_best(pc, &kc));
    assert_memory_equal(&ka, &kc, sizeof ka);
    assert_int_equal(xp_pool_fp_count(pa), xp_pool_fp_count(pc));
    xp_pool_free(pa);
    xp_pool_free(pc);
    snap_free(&s);
    ctx_free(a);
    ctx_free(b);
    ctx_free(c);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A full fingerprint set stops the run inside an expand: unfinished, then re-expanded first. */
static void test_full_set_unfinished(void **state) {
    (void)state;
    const size_t m1 = 1500, m2 = 4000;
    bits_ctx *a = ctx_new(true, true);
    xp_pool *pa = bits_pool(a, 1, 0, m2);
    start_bits(pa, a);
    assert_int_equal(xp_pool_wait(pa), XP_STOP_FULL);

    bits_ctx *b = ctx_new(true, true);
    xp_pool *pb = bits_pool(b, 1, 0, m1);
    start_bits(pb, b);
    assert_int_equal(xp_pool_wait(pb), XP_STOP_FULL);
    snap s;
    take(pb, 1, &s);
    assert_int_equal(s.n_fps, m1);
    /* the state being expanded when the set filled: kept, first, not counted */
    assert_int_equal(s.n_unfinished, 1);
    assert_true(s.items[0].unfinished);
    assert_int_equal(s.val[0], b->seq[b->n_seq - 1]);
    assert_int_equal(s.base.expanded, (uint64_t)b->n_seq - 1);
    xp_pool_free(pb);

    bits_ctx *c = ctx_new(true, true);
    xp_pool *pc = bits_pool(c, 1, 0, m2);
    assert_true(restore(pc, c, &s, 0.0));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_FULL);
    /* b's last expand is c's first: together they are a's sequence */
    assert_int_equal(b->n_seq - 1 + c->n_seq, a->n_seq);
    assert_memory_equal(a->seq, b->seq, sizeof(uint32_t) * (size_t)b->n_seq);
    assert_memory_equal(a->seq + b->n_seq - 1, c->seq, sizeof(uint32_t) * (size_t)c->n_seq);
    xp_pool_stats sa, sc;
    xp_pool_get_stats(pa, &sa, NULL, 0);
    xp_pool_get_stats(pc, &sc, NULL, 0);
    expect_counters(&sa.total, &sc.total);
    xp_key ka, kc;
    assert_int_equal(*(const uint32_t *)xp_pool_best(pa, &ka),
                     *(const uint32_t *)xp_pool_best(pc, &kc));
    assert_memory_equal(&ka, &kc, sizeof ka);
    assert_int_equal(xp_pool_fp_count(pc), m2);
    /* both final frontiers hold the same states (c's unfinished one included) */
    snap fa, fc;
    take(pa, 1, &fa);
    take(pc, 1, &fc);
    assert_int_equal(fa.n, fc.n);
    assert_int_equal(fa.n_unfinished, 1);
    assert_int_equal(fc.n_unfinished, 1);
    /* (the heaps' array orders may differ: same contents, another history of pushes) */
    assert_int_equal(fa.val[0], fc.val[0]);
    qsort(fa.val, fa.n, sizeof *fa.val, cmp_u32);
    qsort(fc.val, fc.n, sizeof *fc.val, cmp_u32);
    assert_memory_equal(fa.val, fc.val, sizeof(uint32_t) * fa.n);
    snap_free(&fa);
    snap_free(&fc);
    xp_pool_free(pa);
    xp_pool_free(pc);
    snap_free(&s);
    ctx_free(a);
    ctx_free(b);
    ctx_free(c);
}

/* A stop requested inside an expand after it emitted children better than itself: restored, the
 * cut state must be expanded again before them (it is first, not in the heap). */
static void test_requested_unfinished_first(void **state) {
    (void)state;
    const uint64_t k = 300;
    bits_ctx *a = ctx_new(true, true);
    xp_pool *pa = bits_pool(a, 1, k, 0);
    start_bits(pa, a);
    assert_int_equal(xp_pool_wait(pa), XP_STOP_EXPANDED);

    bits_ctx *b = ctx_new(true, true);
    b->stop_after = 5; /* still descending: half of its children are better than it, and new */
    xp_pool *pb = bits_pool(b, 1, k, 0);
    b->pool = pb;
    start_bits(pb, b);
    assert_int_equal(xp_pool_wait(pb), XP_STOP_REQUESTED);
    snap s;
    take(pb, 1, &s);
    assert_int_equal(s.n_unfinished, 1);
    assert_int_equal(s.val[0], b->seq[4]);
    assert_int_equal(s.base.expanded, 4);
    /* some child it emitted is better than it: only the first queue puts it before them */
    bool better_child = false;
    for (size_t i = 1; i < s.n; i++) better_child |= s.items[i].key.k[0] < s.items[0].key.k[0];
    assert_true(better_child);
    xp_pool_free(pb);

    bits_ctx *c = ctx_new(true, true);
    xp_pool *pc = bits_pool(c, 1, k, 0);
    assert_true(restore(pc, c, &s, 0.0));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_EXPANDED);
    assert_int_equal(4 + c->n_seq, a->n_seq);
    assert_memory_equal(a->seq, b->seq, sizeof(uint32_t) * 5);
    assert_memory_equal(a->seq + 4, c->seq, sizeof(uint32_t) * (size_t)c->n_seq);
    xp_pool_stats sa, sc;
    xp_pool_get_stats(pa, &sa, NULL, 0);
    xp_pool_get_stats(pc, &sc, NULL, 0);
    expect_counters(&sa.total, &sc.total);
    xp_pool_free(pa);
    xp_pool_free(pc);
    snap_free(&s);
    ctx_free(a);
    ctx_free(b);
    ctx_free(c);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Four threads, stopped by a request inside an expand while others run; restored with 4 and with 3
 * threads and run to the end: every frontier state is expanded there once, nothing finished before
 * again. */
static void test_four_threads_no_loss(void **state) {
    (void)state;
    for (int threads = 4; threads >= 3; threads--) {
        bits_ctx *b = ctx_new(false, false);
        b->spin = 300;
        b->stop_after = 60; /* of ~800: before the optimum is found */
        xp_pool *pb = bits_pool(b, 4, 0, 0);
        b->pool = pb;
        start_bits(pb, b);
        assert_int_equal(xp_pool_wait(pb), XP_STOP_REQUESTED);
        snap s;
        take(pb, 4, &s);
        xp_pool_stats sb;
        xp_pool_get_stats(pb, &sb, NULL, 0);
        xp_pool_free(pb);
        assert_true(s.n > 0);
        assert_true(s.n_unfinished >= 1); /* the expand that asked for the stop, at least */

        bits_ctx *c = ctx_new(false, false);
        xp_pool *pc = bits_pool(c, threads, 0, 0);
        assert_true(restore(pc, c, &s, 0.0));
        assert_int_equal(xp_pool_wait(pc), XP_STOP_EXHAUSTED);
        bool *in_frontier = calloc(NSTATES, sizeof *in_frontier);
        assert_non_null(in_frontier);
        for (size_t i = 0; i < s.n; i++) {
            assert_false(in_frontier[s.val[i]]); /* each state once in the frontier */
            in_frontier[s.val[i]] = true;
            /* restored: expanded exactly once */
            assert_int_equal(atomic_load(&c->count[s.val[i]]), 1);
            /* before: never started, or started and cut (unfinished) */
            assert_int_equal(atomic_load(&b->count[s.val[i]]), s.items[i].unfinished ? 1 : 0);
        }
        uint64_t finished_b = 0;
        for (uint32_t x = 0; x < NSTATES; x++) {
            unsigned nb = atomic_load(&b->count[x]), nc = atomic_load(&c->count[x]);
            assert_true(nc <= 1);
            if (!in_frontier[x]) {
                assert_true(nb + nc <= 1); /* finished in b: never again */
                finished_b += nb;
            }
        }
        assert_int_equal(finished_b, sb.total.expanded);
        const uint32_t *best = xp_pool_best(pc, NULL);
        assert_int_equal(*best, TARGET);
        xp_pool_stats sc;
        xp_pool_get_stats(pc, &sc, NULL, 0);
        assert_true(sc.total.expanded >= sb.total.expanded + s.n); /* base included */
        printf("%d -> %d threads: %zu frontier states (%d unfinished), %llu + %llu expanded\n", 4,
               threads, s.n, s.n_unfinished, (unsigned long long)sb.total.expanded,
               (unsigned long long)(sc.total.expanded - sb.total.expanded));
        free(in_frontier);
        xp_pool_free(pc);
        snap_free(&s);
        ctx_free(b);
        ctx_free(c);
    }
}

static void test_edges(void **state) {
    (void)state;
    /* a snapshot of a short run */
    bits_ctx *b = ctx_new(false, false);
    xp_pool *pb = bits_pool(b, 1, 50, 0);
    start_bits(pb, b);
    assert_int_equal(xp_pool_wait(pb), XP_STOP_EXPANDED);
    snap s;
    take(pb, 1, &s);
    xp_pool_free(pb);

    /* the time budget is spent already: stops at once, nothing expanded */
    bits_ctx *c = ctx_new(false, false);
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = 2;
    o.max_seconds = 5.0;
    xp_callbacks cb = {.expand = bits_expand, .free_state = bits_free};
    xp_pool *pc = xp_pool_init(&o, &cb, c);
    assert_non_null(pc);
    assert_true(restore(pc, c, &s, 5.5));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_TIME);
    xp_pool_stats sc;
    xp_pool_get_stats(pc, &sc, NULL, 0);
    assert_int_equal(sc.total.expanded, 50);
    for (uint32_t x = 0; x < NSTATES; x++) assert_int_equal(atomic_load(&c->count[x]), 0);
    xp_pool_free(pc);

    /* more fingerprints than the budget: stops at once, the frontier and the set kept */
    pc = bits_pool(c, 2, 0, s.n_fps / 2);
    assert_true(restore(pc, c, &s, 0.0));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_FULL);
    assert_int_equal(xp_pool_fp_count(pc), s.n_fps);
    snap t;
    take(pc, 2, &t);
    assert_int_equal(t.n, s.n);
    for (uint32_t x = 0; x < NSTATES; x++) assert_int_equal(atomic_load(&c->count[x]), 0);
    snap_free(&t);
    xp_pool_free(pc);

    /* an empty frontier: the search is complete */
    snap e = s;
    e.n = 0;
    pc = bits_pool(c, 1, 0, 0);
    assert_true(restore(pc, c, &e, 0.0));
    assert_int_equal(xp_pool_wait(pc), XP_STOP_EXHAUSTED);
    assert_int_equal(*(const uint32_t *)xp_pool_best(pc, NULL), s.best);
    xp_pool_free(pc);
    snap_free(&s);
    ctx_free(b);
    ctx_free(c);
}

/* an endless problem: a tree of unique ids, every child accepted (equal keys) */
typedef struct tree_ctx {
    atomic_long allocs, frees;
} tree_ctx;

static void tree_free(void *ctx, void *state) {
    tree_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
    free(state);
}

static void tree_expand(void *ctx, xp_worker *w, const void *state) {
    tree_ctx *c = ctx;
    uint64_t id = *(const uint64_t *)state, h = id;
    for (int i = 0; i < 200; i++) h = mix64(h + (uint64_t)i);
    if (h == 42) atomic_store_explicit(&sink, h, memory_order_relaxed);
    for (uint64_t k = 1; k <= 2; k++) {
        uint64_t *s = malloc(sizeof *s);
        assert_non_null(s);
        *s = mix64(id * 2 + k);
        atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
        xp_emit(w, s, *s, (xp_key){{1.0, 1.0}});
    }
}

typedef struct tree_visit {
    uint64_t *fps;
    size_t n, cap;
    int unfinished;
} tree_visit;

static void tree_collect(void *arg, const xp_item *it) {
    tree_visit *v = arg;
    if (v->n < v->cap) v->fps[v->n] = it->fp;
    assert_int_equal(it->fp, *(const uint64_t *)it->state);
    v->unfinished += it->unfinished;
    v->n++;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_pause_visit(void **state) {
    (void)state;
    tree_ctx c = {0};
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = 4;
    o.max_states = (size_t)1 << 20;
    xp_callbacks cb = {.expand = tree_expand, .free_state = tree_free};
    xp_pool *p = xp_pool_init(&o, &cb, &c);
    assert_non_null(p);
    uint64_t *root = malloc(sizeof *root);
    assert_non_null(root);
    *root = 1;
    atomic_fetch_add_explicit(&c.allocs, 1, memory_order_relaxed);
    assert_true(xp_pool_start(p, root, 1, (xp_key){{1.0, 1.0}}));
    tree_visit v = {.cap = (size_t)1 << 20};
    v.fps = malloc(sizeof(uint64_t) * v.cap);
    assert_non_null(v.fps);
    for (int r = 0; r < 10; r++) {
        sleep_ms(3);
        xp_pool_pause(p);
        v.n = 0;
        v.unfinished = 0;
        xp_pool_visit_frontier(p, tree_collect, &v);
        xp_pool_stats st;
        xp_pool_get_stats(p, &st, NULL, 0);
        assert_int_equal(v.n, st.frontier);
        assert_int_equal(v.unfinished, 0);
        assert_true(v.n <= v.cap);
        qsort(v.fps, v.n, sizeof *v.fps, cmp_u64);
        for (size_t i = 1; i < v.n; i++) assert_true(v.fps[i - 1] != v.fps[i]);
        /* every state the set holds was pushed, so the frontier's are in it */
        assert_true(xp_pool_fp_count(p) >= v.n);
        uint64_t seq, rng;
        xp_pool_worker_cursor(p, 3, &seq, &rng);
        xp_pool_resume(p);
    }
    xp_pool_request_stop(p);
    assert_int_equal(xp_pool_wait(p), XP_STOP_REQUESTED);
    free(v.fps);
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c.allocs), atomic_load(&c.frees));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expanded_budget_one_thread),
        cmocka_unit_test(test_full_set_unfinished),
        cmocka_unit_test(test_requested_unfinished_first),
        cmocka_unit_test(test_four_threads_no_loss),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_pause_visit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
