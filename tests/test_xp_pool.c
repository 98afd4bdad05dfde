/* test_xp_pool.c - the parallel best-first search pool (explorer/xp-pool.c) on a synthetic
 * problem with a known optimum: states are 20-bit strings (uint32, malloc'ed so ownership is
 * checked), children flip one bit, fingerprint = mix64(state), key = (cost, tie) where cost
 * = 100 + 13 * ceil(hamming(x, T) / 2) has a unique minimum at T and plateaus of two levels,
 * and tie is a pseudo-random 0..6 that orders states inside a plateau.
 *  - 1 thread: two runs expand the same sequence (hash of the expansion order) and end alike;
 *  - 2 and 4 threads: the optimum is found, no state is expanded twice (atomic counters per
 *    state), duplicates are detected, every allocated state is freed exactly once;
 *  - budgets: max_expanded (exact), wall time, fingerprint-set capacity, a stop request;
 *  - pause/resume while workers run: when pause returns no worker is inside expand and the
 *    counters stand still;
 *  - throughput on an expand that does ~20 us of hashing, 1 vs 2 threads (printed; longer
 *    with MAGPIE_XP_BENCH=1). Run under TSan by `ctest -L explorer`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "explorer.h"

#define NBITS 20
#define NSTATES (1u << NBITS)
#define TARGET 0x5A5A5u

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct bits_ctx {
    atomic_uint *expanded_count; /* per state */
    atomic_long allocs, frees;
    atomic_int inside; /* workers inside expand */
    int record_seq;    /* single thread only: hash of the expansion order */
    uint64_t seq_hash;
    uint64_t n_seq;
} bits_ctx;

static xp_key bits_key(uint32_t x) {
    int h = __builtin_popcount(x ^ TARGET);
    xp_key k = {{100.0 + 13.0 * ((h + 1) / 2), (double)(mix64(x + 7) % 7)}};
    return k;
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

static void bits_expand(void *ctx, xp_worker *w, const void *state) {
    bits_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->inside, 1, memory_order_relaxed);
    uint32_t x = *(const uint32_t *)state;
    atomic_fetch_add_explicit(&c->expanded_count[x], 1, memory_order_relaxed);
    if (c->record_seq) {
        c->seq_hash = mix64(c->seq_hash ^ x) + c->n_seq;
        c->n_seq++;
    }
    for (int i = 0; i < NBITS; i++) {
        uint32_t y = x ^ (1u << i);
        xp_emit(w, new_state(c, y), mix64(y), bits_key(y));
    }
    atomic_fetch_sub_explicit(&c->inside, 1, memory_order_relaxed);
}

static bits_ctx *ctx_new(void) {
    bits_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->expanded_count = calloc(NSTATES, sizeof *c->expanded_count);
    assert_non_null(c->expanded_count);
    return c;
}

static void ctx_free(bits_ctx *c) {
    free(c->expanded_count);
    free(c);
}

static xp_pool *bits_pool(bits_ctx *c, int threads, uint64_t seed) {
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = threads;
    o.seed = seed;
    xp_callbacks cb = {.expand = bits_expand, .free_state = bits_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_non_null(p);
    return p;
}

static xp_stop_reason run_bits(xp_pool *p, bits_ctx *c) {
    uint32_t x0 = ~TARGET & (NSTATES - 1);
    return xp_pool_run(p, new_state(c, x0), mix64(x0), bits_key(x0));
}

static void check_optimum(xp_pool *p) {
    xp_key k;
    const uint32_t *b = xp_pool_best(p, &k);
    assert_non_null(b);
    assert_int_equal(*b, TARGET);
    assert_true(k.k[0] == 100.0);
}

/* no state expanded twice; returns how many were expanded */
static uint64_t check_once(bits_ctx *c) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < NSTATES; i++) {
        unsigned v = atomic_load_explicit(&c->expanded_count[i], memory_order_relaxed);
        assert_true(v <= 1);
        n += v;
    }
    return n;
}

static void test_api_edges(void **state) {
    (void)state;
    xp_pool_free(NULL);
    assert_true(xp_default_threads() >= 1);
    xp_callbacks none = {0};
    assert_null(xp_pool_init(NULL, &none, NULL));
    bits_ctx *c = ctx_new();
    xp_pool *p = bits_pool(c, 2, 1);
    xp_pool_free(p); /* never started */
    ctx_free(c);
    assert_string_equal(xp_stop_reason_to_string(XP_STOP_TIME), "time");
}

static void test_one_thread_deterministic(void **state) {
    (void)state;
    uint64_t hash[2], n_seq[2], expanded[2];
    for (int r = 0; r < 2; r++) {
        bits_ctx *c = ctx_new();
        c->record_seq = 1;
        xp_pool *p = bits_pool(c, 1, 42);
        assert_int_equal(run_bits(p, c), XP_STOP_EXHAUSTED);
        check_optimum(p);
        xp_pool_stats st;
        xp_pool_get_stats(p, &st, NULL, 0);
        assert_int_equal(st.threads, 1);
        assert_int_equal(st.total.steals, 0);
        assert_int_equal(st.total.exposed, 0);
        assert_true(st.total.duplicates > 0);
        assert_int_equal(st.total.expanded, check_once(c));
        assert_int_equal(st.total.generated, NBITS * st.total.expanded);
        assert_int_equal(st.total.generated,
                         st.total.duplicates + st.total.rejected + st.total.pushed);
        hash[r] = c->seq_hash;
        n_seq[r] = c->n_seq;
        expanded[r] = st.total.expanded;
        if (r == 0)
            printf("1 thread: expanded %llu generated %llu duplicates %llu rejected %llu\n",
                   (unsigned long long)st.total.expanded, (unsigned long long)st.total.generated,
                   (unsigned long long)st.total.duplicates, (unsigned long long)st.total.rejected);
        xp_pool_free(p);
        assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
        ctx_free(c);
    }
    assert_int_equal(hash[0], hash[1]);
    assert_int_equal(n_seq[0], n_seq[1]);
    assert_int_equal(expanded[0], expanded[1]);
}

static void run_parallel(int threads) {
    bits_ctx *c = ctx_new();
    xp_pool *p = bits_pool(c, threads, 7);
    assert_int_equal(run_bits(p, c), XP_STOP_EXHAUSTED);
    check_optimum(p);
    xp_pool_stats st;
    xp_worker_stats per[4];
    xp_pool_get_stats(p, &st, per, 4);
    assert_int_equal(st.threads, threads);
    uint64_t once = check_once(c);
    assert_int_equal(st.total.expanded, once);
    assert_int_equal(st.total.pushed + 1, once); /* every accepted state (and the root) */
    assert_true(st.total.duplicates > 0);
    assert_int_equal(st.total.generated, st.total.duplicates + st.total.rejected + st.total.pushed);
    uint64_t sum = 0;
    for (int i = 0; i < threads; i++) sum += per[i].expanded;
    assert_int_equal(sum, st.total.expanded);
    printf("%d threads: expanded %llu duplicates %llu steals %llu exposed %llu, per worker:",
           threads, (unsigned long long)st.total.expanded, (unsigned long long)st.total.duplicates,
           (unsigned long long)st.total.steals, (unsigned long long)st.total.exposed);
    for (int i = 0; i < threads; i++) printf(" %llu", (unsigned long long)per[i].expanded);
    printf("\n");
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
    ctx_free(c);
}

static void test_two_threads(void **state) {
    (void)state;
    run_parallel(2);
}

static void test_four_threads(void **state) {
    (void)state;
    run_parallel(4);
}

static void test_budget_expanded(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        bits_ctx *c = ctx_new();
        xp_pool_opts o = xp_pool_opts_default();
        o.threads = threads;
        o.max_expanded = 300;
        xp_callbacks cb = {.expand = bits_expand, .free_state = bits_free};
        xp_pool *p = xp_pool_init(&o, &cb, c);
        assert_non_null(p);
        assert_int_equal(run_bits(p, c), XP_STOP_EXPANDED);
        xp_pool_stats st;
        xp_pool_get_stats(p, &st, NULL, 0);
        assert_int_equal(st.total.expanded, 300);
        assert_int_equal(check_once(c), 300);
        xp_pool_free(p);
        assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
        ctx_free(c);
    }
}

static void test_budget_states_full(void **state) {
    (void)state;
    bits_ctx *c = ctx_new();
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = 2;
    o.max_states = 100;
    xp_callbacks cb = {.expand = bits_expand, .free_state = bits_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_int_equal(run_bits(p, c), XP_STOP_FULL);
    check_once(c);
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
    ctx_free(c);
}

/* an endless problem: a tree of unique ids, every child accepted (equal keys) */
typedef struct tree_ctx {
    int spin;
    atomic_long allocs, frees;
    atomic_int inside;
} tree_ctx;

static void tree_free(void *ctx, void *state) {
    tree_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
    free(state);
}

static atomic_uint_fast64_t tree_sink; /* keeps the hashing from being optimized out */

static void tree_expand(void *ctx, xp_worker *w, const void *state) {
    tree_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->inside, 1, memory_order_relaxed);
    uint64_t id = *(const uint64_t *)state, h = id;
    for (int i = 0; i < c->spin; i++) h = mix64(h + (uint64_t)i);
    if (h == 42) atomic_store_explicit(&tree_sink, h, memory_order_relaxed);
    for (uint64_t k = 1; k <= 2; k++) {
        uint64_t *s = malloc(sizeof *s);
        assert_non_null(s);
        *s = mix64(id * 2 + k);
        atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
        xp_emit(w, s, *s, (xp_key){{1.0, 1.0}});
    }
    atomic_fetch_sub_explicit(&c->inside, 1, memory_order_relaxed);
}

static xp_pool *tree_start(tree_ctx *c, int threads, double seconds) {
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = threads;
    o.max_seconds = seconds;
    o.max_states = (size_t)1 << 21;
    xp_callbacks cb = {.expand = tree_expand, .free_state = tree_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_non_null(p);
    uint64_t *root = malloc(sizeof *root);
    assert_non_null(root);
    *root = 1;
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
    assert_true(xp_pool_start(p, root, 1, (xp_key){{1.0, 1.0}}));
    return p;
}

static void tree_end(xp_pool *p, tree_ctx *c) {
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
}

static void test_budget_time(void **state) {
    (void)state;
    tree_ctx c = {.spin = 50};
    double t0 = ir_now_seconds();
    xp_pool *p = tree_start(&c, 2, 0.2);
    assert_int_equal(xp_pool_wait(p), XP_STOP_TIME);
    double dt = ir_now_seconds() - t0;
    assert_true(dt >= 0.2 && dt < 3.0);
    tree_end(p, &c);
}

static void test_stop_request(void **state) {
    (void)state;
    tree_ctx c = {.spin = 50};
    xp_pool *p = tree_start(&c, 2, 0);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    xp_pool_request_stop(p);
    assert_int_equal(xp_pool_wait(p), XP_STOP_REQUESTED);
    tree_end(p, &c);
}

static void test_pause_resume(void **state) {
    (void)state;
    tree_ctx c = {.spin = 100};
    xp_pool *p = tree_start(&c, 2, 0);
    struct timespec ts = {0, 2 * 1000 * 1000};
    uint64_t last = 0;
    for (int r = 0; r < 20; r++) {
        nanosleep(&ts, NULL);
        xp_pool_pause(p);
        assert_int_equal(atomic_load_explicit(&c.inside, memory_order_relaxed), 0);
        xp_pool_stats a, b;
        xp_pool_get_stats(p, &a, NULL, 0);
        nanosleep(&ts, NULL);
        xp_pool_get_stats(p, &b, NULL, 0);
        assert_int_equal(a.total.expanded, b.total.expanded);
        assert_int_equal(a.total.generated, b.total.generated);
        assert_int_equal(atomic_load_explicit(&c.inside, memory_order_relaxed), 0);
        assert_true(a.total.expanded >= last);
        last = a.total.expanded;
        xp_pool_resume(p);
    }
    xp_pool_request_stop(p);
    assert_int_equal(xp_pool_wait(p), XP_STOP_REQUESTED);
    xp_pool_stats st;
    xp_pool_get_stats(p, &st, NULL, 0);
    assert_true(st.total.expanded > 0);
    tree_end(p, &c);
}

/* ~20 us of hashing per expand: states expanded per second with 1 and 2 threads */
static void test_throughput(void **state) {
    (void)state;
    const char *env = getenv("MAGPIE_XP_BENCH");
    double secs = env && *env == '1' ? 1.0 : 0.1;
    /* calibrate the spin to ~20 us */
    uint64_t h = 0;
    double t0 = ir_now_seconds();
    for (int i = 0; i < 200000; i++) h = mix64(h + (uint64_t)i);
    double per = (ir_now_seconds() - t0) / 200000;
    if (h == 42) atomic_store_explicit(&tree_sink, h, memory_order_relaxed);
    int spin = (int)(20e-6 / per);
    double rate[2];
    for (int threads = 1; threads <= 2; threads++) {
        tree_ctx c = {.spin = spin};
        xp_pool *p = tree_start(&c, threads, secs);
        assert_int_equal(xp_pool_wait(p), XP_STOP_TIME);
        xp_pool_stats st;
        xp_pool_get_stats(p, &st, NULL, 0);
        rate[threads - 1] = (double)st.total.expanded / st.seconds;
        printf(
            "throughput %d thread(s): %.0f states/s (%llu in %.2f s, steals %llu exposed %llu)\n",
            threads, rate[threads - 1], (unsigned long long)st.total.expanded, st.seconds,
            (unsigned long long)st.total.steals, (unsigned long long)st.total.exposed);
        tree_end(p, &c);
    }
    printf("throughput ratio 2/1 threads: %.2f (spin %d = ~20 us)\n", rate[1] / rate[0], spin);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_edges),       cmocka_unit_test(test_one_thread_deterministic),
        cmocka_unit_test(test_two_threads),     cmocka_unit_test(test_four_threads),
        cmocka_unit_test(test_budget_expanded), cmocka_unit_test(test_budget_states_full),
        cmocka_unit_test(test_budget_time),     cmocka_unit_test(test_stop_request),
        cmocka_unit_test(test_pause_resume),    cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
