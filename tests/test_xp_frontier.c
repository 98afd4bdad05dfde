/* test_xp_frontier.c - the pool's frontier bound (xp_pool_opts.max_frontier, explorer/xp-pool.c)
 * on a synthetic problem: states are 16-bit strings, children flip one bit, key = (a coarse cost
 * to a target, a pseudo-random tie). With one thread the pool must expand exactly the sequence
 * of a reference bounded best-first search written here from the contract in explorer.h
 * (dedupe, Algorithm 3's acceptance with delta, evict the worst when a better child arrives at a
 * full frontier, else drop it, a new best never dropped), hold at most N states at any time, and
 * free every state once. With two threads (run under TSan by `ctest -L explorer`) every worker
 * keeps within ceil(N / 2) plus the exposed states its deque holds, and nothing leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "explorer.h"

#define NBITS 16
#define NSTATES (1u << NBITS)
#define TARGET 0x6B2Du
#define MAX_SEQ 4096

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static xp_key key_of(uint32_t x) {
    int h = __builtin_popcount(x ^ TARGET);
    return (xp_key){{10.0 + 3.0 * (double)((h + 2) / 3), (double)(mix64(x + 11) % 5)}};
}

typedef struct fr_ctx {
    atomic_long allocs, frees;
    uint32_t seq[MAX_SEQ]; /* expansion order (one thread) */
    int n_seq;
    bool record;
} fr_ctx;

static uint32_t *new_state(fr_ctx *c, uint32_t x) {
    uint32_t *s = malloc(sizeof *s);
    assert_non_null(s);
    *s = x;
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
    return s;
}

static void fr_free(void *ctx, void *state) {
    fr_ctx *c = ctx;
    atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
    free(state);
}

static void fr_expand(void *ctx, xp_worker *w, const void *state) {
    fr_ctx *c = ctx;
    uint32_t x = *(const uint32_t *)state;
    if (c->record && c->n_seq < MAX_SEQ) c->seq[c->n_seq++] = x;
    for (int i = 0; i < NBITS; i++) {
        uint32_t y = x ^ (1u << i);
        xp_emit(w, new_state(c, y), mix64(y), key_of(y));
    }
}

/* ---------------------------------------------------------------- the reference search */

static bool better(const xp_key *a, const xp_key *b, double d) {
    double b0 = d * b->k[0], b1 = d * b->k[1];
    return a->k[0] < b0 || (a->k[0] == b0 && a->k[1] < b1);
}

typedef struct ref_node {
    uint32_t x;
    xp_key key;
    uint64_t seq;
} ref_node;

/* a before b in the pool's heap order: better under delta 1, then push order */
static bool ref_less(const ref_node *a, const ref_node *b) {
    if (better(&a->key, &b->key, 1.0)) return true;
    if (better(&b->key, &a->key, 1.0)) return false;
    return a->seq < b->seq;
}

/* Expands up to max_expanded states of the bounded best-first search the contract describes;
 * returns how many, their order in out. */
static int reference(uint32_t x0, size_t cap, double delta, int max_expanded, uint32_t *out) {
    unsigned char *seen = calloc(NSTATES, 1);
    ref_node *fr = malloc(sizeof *fr * (cap + 2));
    assert_non_null(seen);
    assert_non_null(fr);
    size_t n = 0;
    uint64_t seq = 0;
    ref_node best = {x0, key_of(x0), seq++};
    seen[x0] = 1;
    fr[n++] = best;
    int done = 0;
    while (n > 0 && done < max_expanded) {
        size_t m = 0;
        for (size_t i = 1; i < n; i++)
            if (ref_less(&fr[i], &fr[m])) m = i;
        ref_node cur = fr[m];
        fr[m] = fr[--n];
        out[done++] = cur.x;
        for (int i = 0; i < NBITS; i++) {
            uint32_t y = cur.x ^ (1u << i);
            if (seen[y]) continue;
            seen[y] = 1;
            ref_node ch = {y, key_of(y), seq++};
            bool became_best = better(&ch.key, &best.key, 1.0);
            if (became_best) best = ch;
            if (!became_best && !better(&ch.key, &best.key, delta)) continue;
            if (n >= cap) {
                size_t worst = 0;
                for (size_t k = 1; k < n; k++)
                    if (ref_less(&fr[worst], &fr[k])) worst = k;
                if (n > 0 && ref_less(&ch, &fr[worst]))
                    fr[worst] = fr[--n];
                else if (!became_best)
                    continue;
            }
            fr[n++] = ch;
        }
    }
    free(seen);
    free(fr);
    return done;
}

/* ---------------------------------------------------------------- tests */

static xp_pool *fr_pool(fr_ctx *c, int threads, size_t max_frontier, double delta,
                        uint64_t max_expanded) {
    xp_pool_opts o = xp_pool_opts_default();
    o.threads = threads;
    o.delta = delta;
    o.max_frontier = max_frontier;
    o.max_expanded = max_expanded;
    xp_callbacks cb = {.expand = fr_expand, .free_state = fr_free};
    xp_pool *p = xp_pool_init(&o, &cb, c);
    assert_non_null(p);
    return p;
}

static void one_thread_matches_reference(size_t cap, double delta) {
    const int budget = 400;
    uint32_t x0 = ~TARGET & (NSTATES - 1);
    fr_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->record = true;
    xp_pool *p = fr_pool(c, 1, cap, delta, (uint64_t)budget);
    xp_pool_run(p, new_state(c, x0), mix64(x0), key_of(x0));
    xp_pool_stats st;
    xp_pool_get_stats(p, &st, NULL, 0);
    uint32_t *want = malloc(sizeof *want * (size_t)budget);
    assert_non_null(want);
    int n = reference(x0, cap, delta, budget, want);
    if (n != c->n_seq) fail_msg("cap %zu: pool expanded %d, reference %d", cap, c->n_seq, n);
    for (int i = 0; i < n; i++)
        if (want[i] != c->seq[i])
            fail_msg("cap %zu: expansion %d is %#x, reference %#x", cap, i, c->seq[i], want[i]);
    assert_true(st.total.frontier_peak <= cap);
    if (cap < 64) assert_true(st.total.evicted + st.total.dropped > 0);
    xp_pool_free(p);
    assert_int_equal(c->allocs, c->frees);
    free(want);
    free(c);
}

static void test_one_thread_bounded(void **state) {
    (void)state;
    one_thread_matches_reference(3, 1.1);
    one_thread_matches_reference(8, 1.3);
    one_thread_matches_reference(40, 2.0);
}

/* Unbounded (0) is the plain best-first search: a bound above what it ever holds changes
 * nothing. */
static void test_unbounded_equals_large_bound(void **state) {
    (void)state;
    uint32_t x0 = ~TARGET & (NSTATES - 1);
    fr_ctx *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    a->record = b->record = true;
    xp_pool *pa = fr_pool(a, 1, 0, 1.3, 300), *pb = fr_pool(b, 1, 1u << 20, 1.3, 300);
    xp_pool_run(pa, new_state(a, x0), mix64(x0), key_of(x0));
    xp_pool_run(pb, new_state(b, x0), mix64(x0), key_of(x0));
    assert_int_equal(a->n_seq, b->n_seq);
    assert_memory_equal(a->seq, b->seq, sizeof(uint32_t) * (size_t)a->n_seq);
    xp_pool_stats st;
    xp_pool_get_stats(pb, &st, NULL, 0);
    assert_true(st.total.evicted == 0 && st.total.dropped == 0);
    xp_pool_free(pa);
    xp_pool_free(pb);
    free(a);
    free(b);
}

static void test_two_threads_bounded(void **state) {
    (void)state;
    const size_t cap = 10;
    uint32_t x0 = ~TARGET & (NSTATES - 1);
    fr_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    xp_pool *p = fr_pool(c, 2, cap, 1.5, 2000);
    xp_pool_run(p, new_state(c, x0), mix64(x0), key_of(x0));
    xp_pool_stats st;
    xp_worker_stats per[2];
    xp_pool_get_stats(p, &st, per, 2);
    /* per worker: its share of the bound; the deque's exposed states count in it, so the bound
     * holds up to thieves' races on the deque size (which only shrink it) and one new best */
    for (int i = 0; i < 2; i++) assert_true(per[i].frontier_peak <= cap / 2 + 1);
    assert_true(st.total.evicted + st.total.dropped > 0);
    xp_key k;
    assert_non_null(xp_pool_best(p, &k));
    xp_pool_free(p);
    assert_int_equal(c->allocs, c->frees);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_thread_bounded),
        cmocka_unit_test(test_unbounded_equals_large_bound),
        cmocka_unit_test(test_two_threads_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
