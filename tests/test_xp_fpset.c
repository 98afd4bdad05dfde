/* test_xp_fpset.c - the concurrent fingerprint set (explorer/xp-fpset.c):
 *  - one thread: insert says NEW once then PRESENT, contains agrees, fingerprint 0 is stored
 *    as XP_FP_ZERO_ALIAS, a set of max_entries m takes exactly m and then answers FULL (while
 *    still answering PRESENT for members), copy returns every member once, and a bulk insert
 *    of that copy rebuilds the same set;
 *  - concurrency: 2 and 4 threads insert overlapping random streams drawn from one universe:
 *    the NEW answers add up to the number of distinct fingerprints exactly, count agrees, and
 *    copy returns each distinct fingerprint once. Run under TSan by `ctest -L explorer`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explorer.h"

static uint64_t mix(uint64_t z) {
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_single(void **state) {
    (void)state;
    xp_fpset_free(NULL);
    assert_null(xp_fpset_init(0));
    enum { M = 1000 };
    xp_fpset *s = xp_fpset_init(M);
    assert_non_null(s);
    assert_int_equal(xp_fpset_max_entries(s), M);
    assert_false(xp_fpset_contains(s, 0));
    assert_int_equal(xp_fpset_insert(s, 0), XP_FP_NEW);
    assert_int_equal(xp_fpset_insert(s, 0), XP_FP_PRESENT);
    assert_int_equal(xp_fpset_insert(s, XP_FP_ZERO_ALIAS), XP_FP_PRESENT);
    assert_true(xp_fpset_contains(s, 0));
    assert_true(xp_fpset_contains(s, XP_FP_ZERO_ALIAS));
    for (uint64_t i = 1; i < M; i++) {
        assert_false(xp_fpset_contains(s, i));
        assert_int_equal(xp_fpset_insert(s, i), XP_FP_NEW); /* small keys: clustered input */
        assert_true(xp_fpset_contains(s, i));
    }
    assert_int_equal(xp_fpset_count(s), M);
    assert_int_equal(xp_fpset_insert(s, M), XP_FP_FULL);
    assert_int_equal(xp_fpset_insert(s, 5), XP_FP_PRESENT);
    assert_false(xp_fpset_contains(s, M));

    uint64_t *out = malloc(M * sizeof *out);
    assert_non_null(out);
    assert_int_equal(xp_fpset_copy(s, out, 10), M); /* short buffer: count, 10 written */
    assert_int_equal(xp_fpset_copy(s, out, M), M);
    qsort(out, M, sizeof *out, cmp_u64);
    for (uint64_t i = 1; i < M; i++) assert_int_equal(out[i - 1], i); /* 1..M-1, then alias */
    assert_int_equal(out[M - 1], XP_FP_ZERO_ALIAS);

    xp_fpset *t = xp_fpset_init(M);
    size_t n_new = 0;
    assert_int_equal(xp_fpset_insert_bulk(t, out, M, &n_new), XP_FP_NEW);
    assert_int_equal(n_new, M);
    assert_int_equal(xp_fpset_insert_bulk(t, out, 10, &n_new), XP_FP_NEW);
    assert_int_equal(n_new, 0);
    assert_true(xp_fpset_contains(t, 0));
    xp_fpset_free(t);

    /* bulk insert into a set too small stops at FULL with the count so far */
    t = xp_fpset_init(100);
    assert_int_equal(xp_fpset_insert_bulk(t, out, M, &n_new), XP_FP_FULL);
    assert_int_equal(n_new, 100);
    assert_int_equal(xp_fpset_count(t), 100);
    xp_fpset_free(t);
    free(out);
    xp_fpset_free(s);
}

/* ---------------------------------------------------------------- concurrent inserts */

#define UNIVERSE 400000u /* keys; fingerprint of key k: mix(k), and 0 for key 0 */
#define PER_THREAD 300000u

static uint64_t key_fp(uint64_t k) {
    return k == 0 ? 0 : mix(k);
}

typedef struct worker {
    xp_fpset *s;
    uint64_t seed, n_new, n_present;
    int full;
} worker;

/* the stream of thread w: keys mix(seed + i) % UNIVERSE, which the check regenerates */
static void *inserter(void *p) {
    worker *w = p;
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        uint64_t k = mix(w->seed + i) % UNIVERSE;
        switch (xp_fpset_insert(w->s, key_fp(k))) {
        case XP_FP_NEW: w->n_new++; break;
        case XP_FP_PRESENT: w->n_present++; break;
        case XP_FP_FULL: w->full = 1; break;
        }
    }
    return NULL;
}

static void run_concurrent(int n_threads) {
    xp_fpset *s = xp_fpset_init(UNIVERSE);
    assert_non_null(s);
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < n_threads; i++) {
        /* seeds PER_THREAD/2 apart: neighbouring streams share half their keys in the same
         * order, so threads race on the very same fingerprints, plus random overlap */
        w[i] = (worker){.s = s, .seed = (uint64_t)i * PER_THREAD / 2};
        assert_int_equal(pthread_create(&th[i], NULL, inserter, &w[i]), 0);
    }
    uint64_t n_new = 0;
    for (int i = 0; i < n_threads; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_false(w[i].full);
        assert_int_equal(w[i].n_new + w[i].n_present, PER_THREAD);
        n_new += w[i].n_new;
    }
    unsigned char *seen = calloc(UNIVERSE, 1);
    assert_non_null(seen);
    uint64_t distinct = 0;
    for (int t = 0; t < n_threads; t++)
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            uint64_t k = mix(w[t].seed + i) % UNIVERSE;
            distinct += !seen[k];
            seen[k] = 1;
        }
    print_message("%d threads: %llu inserts, %llu distinct\n", n_threads,
                  (unsigned long long)(n_threads * (uint64_t)PER_THREAD),
                  (unsigned long long)distinct);
    assert_int_equal(n_new, distinct);
    assert_int_equal(xp_fpset_count(s), distinct);
    for (uint64_t k = 0; k < UNIVERSE; k++)
        if (xp_fpset_contains(s, key_fp(k)) != (bool)seen[k])
            fail_msg("key %llu: contains disagrees", (unsigned long long)k);

    uint64_t *out = malloc(distinct * sizeof *out);
    assert_non_null(out);
    assert_int_equal(xp_fpset_copy(s, out, distinct), distinct);
    qsort(out, distinct, sizeof *out, cmp_u64);
    for (uint64_t i = 1; i < distinct; i++)
        if (out[i - 1] == out[i]) fail_msg("copy returned %llx twice", (unsigned long long)out[i]);
    for (uint64_t i = 0; i < distinct; i++) assert_true(xp_fpset_contains(s, out[i]));
    free(out);
    free(seen);
    xp_fpset_free(s);
}

static void test_two_threads(void **state) {
    (void)state;
    run_concurrent(2);
}
static void test_four_threads(void **state) {
    (void)state;
    run_concurrent(4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single),
        cmocka_unit_test(test_two_threads),
        cmocka_unit_test(test_four_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
