/* test_xp_deque.c - the Chase-Lev work-stealing deque (explorer/xp-deque.c):
 *  - one thread: pop is LIFO, steal is FIFO, both report EMPTY on an empty deque, the array
 *    grows from 2 slots to 2^16 items and keeps every item, a mix of pushes, pops and steals
 *    matches a reference model;
 *  - concurrency: one owner pushes 10^6 items (in random bursts, popping some of them back)
 *    into a deque that starts at 4 slots, so growth races the thieves, while 1 or 3 thieves
 *    steal: every item is taken exactly once (per-item counters), the sums agree, and the
 *    plain (non-atomic) payload the owner wrote before each push is visible to whoever takes
 *    the item. Run under TSan by `ctest -L explorer`, which checks that read is race-free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "explorer.h"

static uint64_t rnd(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void test_lifo_fifo(void **state) {
    (void)state;
    xp_deque_free(NULL);
    xp_deque *q = xp_deque_init(1);
    assert_non_null(q);
    uint64_t x = 0;
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_EMPTY);
    assert_int_equal(xp_deque_steal(q, &x), XP_TAKE_EMPTY);
    for (uint64_t i = 0; i < 100; i++) assert_true(xp_deque_push(q, i));
    assert_int_equal(xp_deque_size(q), 100);
    for (uint64_t i = 100; i-- > 0;) {
        assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_OK);
        assert_int_equal(x, i);
    }
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_EMPTY);
    for (uint64_t i = 0; i < 100; i++) assert_true(xp_deque_push(q, i));
    for (uint64_t i = 0; i < 100; i++) {
        assert_int_equal(xp_deque_steal(q, &x), XP_TAKE_OK);
        assert_int_equal(x, i);
    }
    assert_int_equal(xp_deque_steal(q, &x), XP_TAKE_EMPTY);
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_EMPTY);
    assert_int_equal(xp_deque_size(q), 0);
    /* the last item: pop takes it through the CAS on top */
    assert_true(xp_deque_push(q, 7));
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_OK);
    assert_int_equal(x, 7);
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_EMPTY);
    xp_deque_free(q);
}

static void test_growth(void **state) {
    (void)state;
    xp_deque *q = xp_deque_init(1);
    assert_non_null(q);
    uint64_t x = 0;
    /* wrap the indices around the small array first, so growth copies a wrapped range */
    for (int r = 0; r < 5; r++) {
        assert_true(xp_deque_push(q, 1));
        assert_int_equal(xp_deque_steal(q, &x), XP_TAKE_OK);
    }
    const uint64_t n = 1u << 16;
    for (uint64_t i = 0; i < n; i++) assert_true(xp_deque_push(q, i));
    assert_int_equal(xp_deque_size(q), n);
    for (uint64_t i = 0; i < n / 2; i++) {
        assert_int_equal(xp_deque_steal(q, &x), XP_TAKE_OK);
        assert_int_equal(x, i);
    }
    for (uint64_t i = n; i-- > n / 2;) {
        assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_OK);
        assert_int_equal(x, i);
    }
    assert_int_equal(xp_deque_pop(q, &x), XP_TAKE_EMPTY);
    xp_deque_free(q);
}

/* random pushes, pops and steals against an array model of the deque */
static void test_model(void **state) {
    (void)state;
    enum { N = 200000 };
    uint64_t *m = malloc(N * sizeof *m);
    assert_non_null(m);
    size_t lo = 0, hi = 0; /* model holds m[lo..hi) */
    xp_deque *q = xp_deque_init(2);
    uint64_t s = 42, next = 1, x = 0;
    for (int step = 0; step < N; step++) {
        uint64_t r = rnd(&s) % 8;
        if (r < 4 && hi < N) {
            assert_true(xp_deque_push(q, next));
            m[hi++] = next++;
        } else if (r < 6) {
            xp_take t = xp_deque_pop(q, &x);
            if (lo == hi) {
                assert_int_equal(t, XP_TAKE_EMPTY);
            } else {
                assert_int_equal(t, XP_TAKE_OK);
                assert_int_equal(x, m[--hi]);
            }
        } else {
            xp_take t = xp_deque_steal(q, &x);
            if (lo == hi) {
                assert_int_equal(t, XP_TAKE_EMPTY);
            } else {
                assert_int_equal(t, XP_TAKE_OK);
                assert_int_equal(x, m[lo++]);
            }
        }
        if (lo == hi) lo = hi = 0;
        assert_int_equal(xp_deque_size(q), hi - lo);
    }
    xp_deque_free(q);
    free(m);
}

/* ---------------------------------------------------------------- owner + thieves */

#define N_ITEMS 1000000u

typedef struct shared {
    xp_deque *q;
    _Atomic int done;               /* owner has emptied the deque for good */
    _Atomic uint8_t *taken;         /* per item: how many times it was taken */
    _Atomic uint64_t sum, count;    /* over every taken item */
    uint64_t *payload;              /* plain memory the owner writes before each push */
} shared;

typedef struct thief_arg {
    shared *sh;
    uint64_t steals, aborts;
} thief_arg;

static void take(shared *sh, uint64_t x, uint64_t *sum, uint64_t *cnt) {
    /* relaxed: a counter per item; the join orders these before the checks */
    atomic_fetch_add_explicit(&sh->taken[x - 1], 1, memory_order_relaxed);
    /* a non-atomic read of what the pusher wrote: the deque's push -> steal happens-before
     * makes it race-free (TSan checks) */
    if (sh->payload[x - 1] != 3 * x) fail_msg("payload of %llu not visible", (unsigned long long)x);
    *sum += x;
    (*cnt)++;
}

static void *thief(void *p) {
    thief_arg *a = p;
    shared *sh = a->sh;
    uint64_t sum = 0, cnt = 0, x = 0;
    for (;;) {
        xp_take t = xp_deque_steal(sh->q, &x);
        if (t == XP_TAKE_OK) {
            take(sh, x, &sum, &cnt);
            a->steals++;
        } else if (t == XP_TAKE_ABORT) {
            a->aborts++;
        } else if (atomic_load_explicit(&sh->done, memory_order_acquire)) {
            /* acquire: pairs with the owner's release store of done; after it the deque is
             * empty for good, so a last EMPTY is final */
            xp_take last = xp_deque_steal(sh->q, &x);
            if (last == XP_TAKE_EMPTY) break;
            if (last == XP_TAKE_OK) take(sh, x, &sum, &cnt); /* a bug: the checks catch it */
        }
    }
    atomic_fetch_add_explicit(&sh->sum, sum, memory_order_relaxed);
    atomic_fetch_add_explicit(&sh->count, cnt, memory_order_relaxed);
    return NULL;
}

static void run_owner_thieves(int n_thieves) {
    shared sh;
    sh.q = xp_deque_init(2);
    assert_non_null(sh.q);
    atomic_init(&sh.done, 0);
    atomic_init(&sh.sum, 0);
    atomic_init(&sh.count, 0);
    sh.taken = calloc(N_ITEMS, sizeof *sh.taken);
    assert_non_null(sh.taken);
    sh.payload = malloc(N_ITEMS * sizeof *sh.payload);
    assert_non_null(sh.payload);
    thief_arg args[3] = {{&sh, 0, 0}, {&sh, 0, 0}, {&sh, 0, 0}};
    pthread_t th[3];
    for (int i = 0; i < n_thieves; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thief, &args[i]), 0);

    uint64_t s = 7 + (uint64_t)n_thieves, next = 1, sum = 0, cnt = 0, x = 0, pops = 0;
    while (next <= N_ITEMS) {
        uint64_t burst = 1 + rnd(&s) % 64;
        for (uint64_t i = 0; i < burst && next <= N_ITEMS; i++, next++) {
            sh.payload[next - 1] = 3 * next;
            assert_true(xp_deque_push(sh.q, next));
        }
        uint64_t back = rnd(&s) % (burst + 1) / 2;
        for (uint64_t i = 0; i < back; i++) {
            if (xp_deque_pop(sh.q, &x) != XP_TAKE_OK) break;
            take(&sh, x, &sum, &cnt);
            pops++;
        }
    }
    while (xp_deque_pop(sh.q, &x) == XP_TAKE_OK) {
        take(&sh, x, &sum, &cnt);
        pops++;
    }
    /* release: the thieves that see done also see the deque emptied */
    atomic_store_explicit(&sh.done, 1, memory_order_release);
    uint64_t steals = 0, aborts = 0;
    for (int i = 0; i < n_thieves; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        steals += args[i].steals;
        aborts += args[i].aborts;
    }
    atomic_fetch_add_explicit(&sh.sum, sum, memory_order_relaxed);
    atomic_fetch_add_explicit(&sh.count, cnt, memory_order_relaxed);

    uint64_t n = N_ITEMS;
    assert_int_equal(atomic_load_explicit(&sh.count, memory_order_relaxed), n);
    assert_int_equal(atomic_load_explicit(&sh.sum, memory_order_relaxed), n * (n + 1) / 2);
    for (uint64_t i = 0; i < n; i++)
        if (atomic_load_explicit(&sh.taken[i], memory_order_relaxed) != 1)
            fail_msg("item %llu taken %d times", (unsigned long long)(i + 1),
                     (int)atomic_load_explicit(&sh.taken[i], memory_order_relaxed));
    assert_int_equal(pops + steals, n);
    print_message("%d thieves: %llu popped by the owner, %llu stolen, %llu aborted steals\n",
                  n_thieves, (unsigned long long)pops, (unsigned long long)steals,
                  (unsigned long long)aborts);
    free((void *)sh.taken);
    free(sh.payload);
    xp_deque_free(sh.q);
}

static void test_one_thief(void **state) {
    (void)state;
    run_owner_thieves(1);
}
static void test_three_thieves(void **state) {
    (void)state;
    run_owner_thieves(3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifo_fifo),   cmocka_unit_test(test_growth),
        cmocka_unit_test(test_model),       cmocka_unit_test(test_one_thief),
        cmocka_unit_test(test_three_thieves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
