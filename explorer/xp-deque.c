/* xp-deque.c - Chase-Lev work-stealing deque in C11 atomics, after Lê, Pop, Cohen and Zappa
 * Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models" (PPoPP 2013), fig. 1.
 * Every memory order below is the paper's; the comments say what each one buys.
 *
 * Invariants:
 *  - items live at indices [top, bottom) of a circular array, slot i % size. top only grows
 *    (by CAS, thieves and the owner's last-item pop); bottom is written by the owner only.
 *  - indices are signed 64-bit so that bottom - 1 on an empty deque is -1, not a huge value
 *    (the paper's size_t version compares t <= b after b = 0 - 1).
 *  - an array is never modified after it is replaced, and never freed before xp_deque_free:
 *    a thief that loaded it may still read a slot of it, and the value it reads is right
 *    whenever its CAS on top succeeds (the owner copied [top, bottom) and only writes new
 *    slots in the new array).
 * Slots are atomics (relaxed) because a thief may read a slot the owner is overwriting after
 * a wrap-around; such a thief's CAS on top then fails and the value is discarded. */
#include "explorer-impl.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(__SANITIZE_THREAD__)
#define XP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define XP_TSAN 1
#endif
#endif
#ifndef XP_TSAN
#define XP_TSAN 0
#endif
#if XP_TSAN && defined(__GNUC__) && !defined(__clang__)
/* GCC warns that TSan does not model atomic_thread_fence (it still executes it); see the
 * bottom store in xp_deque_push for how the TSan build keeps the happens-before it needs. */
#pragma GCC diagnostic ignored "-Wtsan"
#endif

typedef struct xp_array {
    int64_t size;           /* power of two; written before the array is published */
    struct xp_array *older; /* owner only: the retired arrays, freed at xp_deque_free */
    _Atomic uint64_t slot[];
} xp_array;

struct xp_deque {
    /* top and bottom on their own cache lines: thieves hammer top, the owner bottom */
    alignas(64) _Atomic int64_t top;
    alignas(64) _Atomic int64_t bottom;
    _Atomic(xp_array *) array;
    xp_array *retired; /* owner only */
    alignas(64) char pad_end;
};

static xp_array *array_new(int64_t size) {
    xp_array *a = malloc(sizeof *a + (size_t)size * sizeof(_Atomic uint64_t));
    if (!a) return NULL;
    a->size = size;
    a->older = NULL;
    /* slots are left uninitialised on purpose: [top, bottom) is written before it is read */
    return a;
}

xp_deque *xp_deque_init(unsigned log2_cap) {
    if (log2_cap < 1) log2_cap = 1;
    if (log2_cap > 40) log2_cap = 40;
    xp_deque *q = aligned_alloc(64, sizeof *q);
    if (!q) return NULL;
    xp_array *a = array_new((int64_t)1 << log2_cap);
    if (!a) {
        free(q);
        return NULL;
    }
    /* before publication: plain initialisation, ordered by whatever hands q to other threads */
    atomic_init(&q->top, 0);
    atomic_init(&q->bottom, 0);
    atomic_init(&q->array, a);
    q->retired = NULL;
    return q;
}

void xp_deque_free(xp_deque *q) {
    if (!q) return;
    /* no other thread uses q any more (contract), so relaxed reads see the final values */
    xp_array *a = atomic_load_explicit(&q->array, memory_order_relaxed);
    free(a);
    for (xp_array *r = q->retired; r;) {
        xp_array *next = r->older;
        free(r);
        r = next;
    }
    free(q);
}

/* Owner only: doubles the array, copying [t, b). */
static xp_array *grow(xp_deque *q, xp_array *a, int64_t t, int64_t b) {
    xp_array *n = array_new(a->size * 2);
    if (!n) return NULL;
    for (int64_t i = t; i < b; i++) {
        /* relaxed: the slots are the owner's own writes; publication is the release below */
        uint64_t x = atomic_load_explicit(&a->slot[i & (a->size - 1)], memory_order_relaxed);
        atomic_store_explicit(&n->slot[i & (n->size - 1)], x, memory_order_relaxed);
    }
    /* release: a thief that loads n (consume/acquire in steal) sees n->size and the copies */
    atomic_store_explicit(&q->array, n, memory_order_release);
    a->older = q->retired;
    q->retired = a;
    return n;
}

bool xp_deque_push(xp_deque *q, uint64_t item) {
    int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed); /* own variable */
    /* acquire: pairs with the thieves' CAS on top, so the slots they emptied may be reused */
    int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
    xp_array *a = atomic_load_explicit(&q->array, memory_order_relaxed); /* own writes only */
    if (b - t > a->size - 1) {
        a = grow(q, a, t, b);
        if (!a) return false;
    }
    atomic_store_explicit(&a->slot[b & (a->size - 1)], item, memory_order_relaxed);
    /* Fence (release): forbids moving the slot store above (and everything the owner wrote
     * before the push, e.g. the state an item points to) after the store of bottom below; a
     * thief that acquires bottom = b + 1 then reads the item, not a stale slot. */
    atomic_thread_fence(memory_order_release);
#if XP_TSAN
    /* TSan does not model fences: the release store gives the same edge in a form it sees. */
    atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
#else
    atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
#endif
    return true;
}

xp_take xp_deque_pop(xp_deque *q, uint64_t *item) {
    int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed) - 1; /* own variable */
    xp_array *a = atomic_load_explicit(&q->array, memory_order_relaxed);    /* own writes */
    atomic_store_explicit(&q->bottom, b, memory_order_relaxed);
    /* Fence (seq_cst): forbids the load of top below from moving above the store of bottom
     * (store-load reordering). With the thieves' seq_cst fence between their load of top and
     * of bottom, the owner and a thief cannot both miss each other's claim on the last item. */
    atomic_thread_fence(memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
    xp_take r = XP_TAKE_OK;
    if (t <= b) {
        /* non-empty */
        *item = atomic_load_explicit(&a->slot[b & (a->size - 1)], memory_order_relaxed);
        if (t == b) {
            /* the last item: race the thieves for it on top. seq_cst as in the paper (the
             * success order must be at least as strong as the thieves' for the total order
             * on top); relaxed on failure since nothing is read on that path. */
            if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                                         memory_order_relaxed))
                r = XP_TAKE_EMPTY; /* a thief won it */
            atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
        }
    } else {
        r = XP_TAKE_EMPTY;
        atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
    }
    return r;
}

xp_take xp_deque_steal(xp_deque *q, uint64_t *item) {
    /* acquire: pairs with other thieves' (and the owner's) CAS on top */
    int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
    /* Fence (seq_cst): forbids the load of bottom below from moving above the load of top;
     * pairs with the seq_cst fence of pop (see there). */
    atomic_thread_fence(memory_order_seq_cst);
    /* acquire: pairs with push's release fence + store of bottom, so the slot is visible */
    int64_t b = atomic_load_explicit(&q->bottom, memory_order_acquire);
    if (t >= b) return XP_TAKE_EMPTY;
    /* consume (compilers treat it as acquire): pairs with grow's release store, so a->size and
     * the copied slots of a new array are visible */
    xp_array *a = atomic_load_explicit(&q->array, memory_order_consume);
    uint64_t x = atomic_load_explicit(&a->slot[t & (a->size - 1)], memory_order_relaxed);
    /* seq_cst on success: the claim on top is totally ordered with the owner's; relaxed on
     * failure since x is discarded. */
    if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return XP_TAKE_ABORT;
    *item = x;
    return XP_TAKE_OK;
}

size_t xp_deque_size(const xp_deque *q) {
    /* relaxed: a hint, exact only when the deque is quiescent */
    int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
    return b > t ? (size_t)(b - t) : 0;
}

void xp_deque_visit(const xp_deque *q, void (*fn)(void *arg, uint64_t item), void *arg) {
    /* relaxed: quiescent (contract), and whatever stopped the other threads (a pause or a
     * join) ordered their writes before these loads */
    int64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
    int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
    xp_array *a = atomic_load_explicit(&((xp_deque *)q)->array, memory_order_relaxed);
    for (int64_t i = t; i < b; i++)
        fn(arg, atomic_load_explicit(&a->slot[i & (a->size - 1)], memory_order_relaxed));
}
