/* test_xp_route.c - the pool's hooks for a distributed search (explorer.h: xp_pool_opts.route,
 * xp_pool_inject, xp_pool_idle, xp_pool_set_bound, xp_pool_stop), without MPI: a route that
 * "sends" every child whose fingerprint is odd into a queue, and a controller (this thread) that
 * hands the queued states back with xp_pool_inject, as the owner rank would. On 12-bit strings
 * (children flip one bit, every state accepted):
 *  - the pool does not end by itself while states are queued outside it; the controller ends it
 *    when the pool is idle and the queue empty, and then every one of the 4096 states was
 *    expanded exactly once (nothing lost in flight, nothing twice: injected duplicates are
 *    refused), and every state allocated was freed;
 *  - a bound better than every state (delta 1) rejects every child: one expansion.
 * Run under TSan by `ctest -L explorer` (2 threads: the inbox is drained by whichever worker). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "explorer.h"

#define NBITS 12
#define NSTATES (1u << NBITS)

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct rt_ctx {
    atomic_uint count[NSTATES]; /* expansions per state */
    atomic_long allocs, frees;
    pthread_mutex_t mu; /* the "network": queued state values */
    uint32_t *queue;
    size_t n, cap;
    atomic_long sent;
} rt_ctx;

static xp_key key_of(uint32_t x) {
    return (xp_key){{100.0 + __builtin_popcount(x), (double)(x % 7)}};
}

static uint32_t *new_state(rt_ctx *c, uint32_t x) {
    uint32_t *s = malloc(sizeof *s);
    assert_non_null(s);
    *s = x;
    atomic_fetch_add(&c->allocs, 1);
    return s;
}

static void rt_free(void *ctx, void *state) {
    rt_ctx *c = ctx;
    atomic_fetch_add(&c->frees, 1);
    free(state);
}

static void rt_expand(void *ctx, xp_worker *w, const void *state) {
    rt_ctx *c = ctx;
    uint32_t x = *(const uint32_t *)state;
    atomic_fetch_add(&c->count[x], 1);
    for (int i = 0; i < NBITS; i++) {
        uint32_t y = x ^ (1u << i);
        xp_emit(w, new_state(c, y), mix64(y + 1), key_of(y));
    }
}

static bool rt_route(void *arg, const void *state, uint64_t fp, xp_key key) {
    (void)key;
    rt_ctx *c = arg;
    if (!(fp & 1)) return false;
    pthread_mutex_lock(&c->mu);
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->queue = realloc(c->queue, c->cap * sizeof *c->queue);
        assert_non_null(c->queue);
    }
    c->queue[c->n++] = *(const uint32_t *)state;
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->sent, 1);
    return true;
}

static xp_pool *make_pool(rt_ctx *c, double delta) {
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = 2;
    o.delta = delta;
    o.max_states = NSTATES * 2;
    o.route = rt_route;
    o.route_arg = c;
    xp_callbacks cb = {.expand = rt_expand, .free_state = rt_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_non_null(p);
    return p;
}

static void test_inject_all_states_once(void **st) {
    (void)st;
    rt_ctx *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    xp_pool *p = make_pool(c, 100.0);
    assert_true(xp_pool_start(p, new_state(c, 0), mix64(1), key_of(0)));
    long injected = 0, refused = 0;
    for (;;) {
        /* the sample order of xd-mpi.c: the pool first, then what its expands queued */
        bool idle = xp_pool_idle(p);
        pthread_mutex_lock(&c->mu);
        size_t n = c->n;
        uint32_t *batch = c->queue;
        c->queue = NULL;
        c->n = c->cap = 0;
        pthread_mutex_unlock(&c->mu);
        if (idle && n == 0) break;
        for (size_t i = 0; i < n; i++) {
            uint32_t y = batch[i];
            xp_emit_result r = xp_pool_inject(p, new_state(c, y), mix64(y + 1), key_of(y));
            assert_true(r == XP_EMIT_PUSHED || r == XP_EMIT_DUPLICATE);
            if (r == XP_EMIT_PUSHED)
                injected++;
            else
                refused++;
        }
        free(batch);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    xp_pool_stats ps;
    xp_pool_get_stats(p, &ps, NULL, 0);
    assert_int_equal(ps.reason, XP_STOP_NONE); /* an empty pool with a route does not end */
    xp_pool_stop(p, XP_STOP_EXHAUSTED);
    assert_int_equal(xp_pool_wait(p), XP_STOP_EXHAUSTED);
    for (uint32_t x = 0; x < NSTATES; x++) assert_int_equal(atomic_load(&c->count[x]), 1);
    assert_true(atomic_load(&c->sent) > 0);
    assert_true(injected > 0 && refused > 0);
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
    pthread_mutex_destroy(&c->mu);
    free(c->queue);
    free(c);
}

static void test_bound_prunes(void **st) {
    (void)st;
    rt_ctx *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    xp_pool *p = make_pool(c, 1.0);
    xp_pool_set_bound(p, (xp_key){{0.0, 0.0}}); /* another rank's best beats every state */
    assert_true(xp_pool_start(p, new_state(c, 0), mix64(1), key_of(0)));
    while (!xp_pool_idle(p)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    xp_pool_stop(p, XP_STOP_EXHAUSTED);
    xp_pool_wait(p);
    xp_pool_stats ps;
    xp_pool_get_stats(p, &ps, NULL, 0);
    assert_int_equal(ps.total.expanded, 1);
    assert_int_equal(ps.total.pushed, 0);
    xp_pool_free(p);
    assert_int_equal(atomic_load(&c->allocs), atomic_load(&c->frees));
    pthread_mutex_destroy(&c->mu);
    free(c->queue);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inject_all_states_once),
        cmocka_unit_test(test_bound_prunes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
