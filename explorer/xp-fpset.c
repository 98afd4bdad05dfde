/* xp-fpset.c - concurrent insert-only set of 64-bit fingerprints: one open-addressing table of
 * 2^k atomic 64-bit slots, linear probing, a slot claimed by CAS from 0 (empty) to the
 * fingerprint. No deletes, so a slot once non-zero never changes again, and a probe sequence
 * that reaches an empty slot proves the fingerprint absent at that moment.
 *
 * Memory orders: the slots publish nothing but their own value (no payload travels with a
 * fingerprint), and the one-winner property of an insert comes from the atomicity of the CAS
 * on one location, whatever its order. So slot accesses are relaxed. The entry counter is a
 * statistic and the "full" threshold, also relaxed. Readers that need more (xp_fpset_copy at a
 * checkpoint) get happens-before from the pause/join that the contract requires.
 *
 * Capacity is fixed (see explorer.h): load stays <= 3/4 (+ one entry per racing thread), so
 * probe sequences stay short and an empty slot always exists, which bounds every probe loop. */
#include "explorer.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

struct xp_fpset {
    size_t mask;        /* slots - 1 */
    size_t max_entries; /* FULL once this many are in */
    alignas(64) _Atomic size_t count;
    alignas(64) _Atomic uint64_t *slot;
};

static inline uint64_t canon(uint64_t fp) {
    return fp ? fp : XP_FP_ZERO_ALIAS;
}

/* splitmix64's finaliser: fingerprints are usually hashes already, but a caller's weak ones
 * (small integers in tests) must not cluster. */
static inline size_t home(const xp_fpset *s, uint64_t fp) {
    fp ^= fp >> 30;
    fp *= UINT64_C(0xbf58476d1ce4e5b9);
    fp ^= fp >> 27;
    fp *= UINT64_C(0x94d049bb133111eb);
    fp ^= fp >> 31;
    return (size_t)fp & s->mask;
}

xp_fpset *xp_fpset_init(size_t max_entries) {
    if (max_entries == 0 || max_entries > ((size_t)1 << 40)) return NULL;
    size_t slots = 8;
    while (slots / 4 * 3 < max_entries) slots *= 2;
    xp_fpset *s = aligned_alloc(64, sizeof *s);
    if (!s) return NULL;
    /* calloc: all-zero bits is 0 in every slot, i.e. empty (lock-free uint64 atomics have no
     * hidden state on the platforms we build for) */
    s->slot = calloc(slots, sizeof *s->slot);
    if (!s->slot) {
        free(s);
        return NULL;
    }
    s->mask = slots - 1;
    s->max_entries = max_entries;
    atomic_init(&s->count, 0);
    return s;
}

void xp_fpset_free(xp_fpset *s) {
    if (!s) return;
    free((void *)s->slot);
    free(s);
}

xp_fp_result xp_fpset_insert(xp_fpset *s, uint64_t fp) {
    fp = canon(fp);
    /* the probe bound only matters if more threads than slack raced past the threshold on a
     * tiny table and filled it: never loop forever */
    size_t i = home(s, fp);
    for (size_t probes = 0; probes <= s->mask; probes++, i = (i + 1) & s->mask) {
        /* relaxed: see the file comment; a stale 0 only costs a failed CAS below */
        uint64_t v = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
        if (v == fp) return XP_FP_PRESENT;
        if (v != 0) continue;
        /* an empty slot ends fp's probe sequence: fp is absent, so claiming counts */
        if (atomic_load_explicit(&s->count, memory_order_relaxed) >= s->max_entries)
            return XP_FP_FULL;
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong_explicit(&s->slot[i], &expected, fp,
                                                    memory_order_relaxed, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
            return XP_FP_NEW;
        }
        if (expected == fp) return XP_FP_PRESENT; /* a concurrent insert of fp won the slot */
        /* another fingerprint took the slot: keep probing */
    }
    return XP_FP_FULL;
}

bool xp_fpset_contains(const xp_fpset *s, uint64_t fp) {
    fp = canon(fp);
    size_t i = home(s, fp);
    for (size_t probes = 0; probes <= s->mask; probes++, i = (i + 1) & s->mask) {
        /* relaxed: see the file comment */
        uint64_t v = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
        if (v == fp) return true;
        if (v == 0) return false;
    }
    return false;
}

xp_fp_result xp_fpset_insert_bulk(xp_fpset *s, const uint64_t *fps, size_t n, size_t *n_new) {
    size_t fresh = 0;
    xp_fp_result r = XP_FP_NEW;
    for (size_t i = 0; i < n; i++) {
        xp_fp_result ri = xp_fpset_insert(s, fps[i]);
        if (ri == XP_FP_FULL) {
            r = XP_FP_FULL;
            break;
        }
        fresh += ri == XP_FP_NEW;
    }
    if (n_new) *n_new = fresh;
    return r;
}

size_t xp_fpset_count(const xp_fpset *s) {
    return atomic_load_explicit(&s->count, memory_order_relaxed); /* a statistic */
}

size_t xp_fpset_max_entries(const xp_fpset *s) {
    return s->max_entries;
}

size_t xp_fpset_copy(const xp_fpset *s, uint64_t *out, size_t cap) {
    /* relaxed: no writer runs (contract), and the pause that stopped them ordered their
     * stores before these loads */
    size_t k = 0;
    for (size_t i = 0; i <= s->mask; i++) {
        uint64_t v = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
        if (v == 0) continue;
        if (k < cap) out[k] = v;
        k++;
    }
    return k;
}
