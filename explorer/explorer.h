/* explorer.h - the parallel search explorer (DESIGN.md decision 5): its lock-free building
 * blocks. Symbols carry the prefix xp_.
 *
 *  - xp_deque: a Chase-Lev work-stealing deque of 64-bit items (Lê, Pop, Cohen, Zappa Nardelli,
 *    "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013). One owner thread
 *    pushes and pops at the bottom (LIFO); any number of thieves steal at the top (FIFO).
 *  - xp_fpset: a concurrent, insert-only set of 64-bit state fingerprints shared by all
 *    workers; lock-free, fixed capacity chosen at init.
 *
 * Both are opaque handles with init/free; free accepts NULL. Free requires that no other
 * thread still uses the object (join the workers first). */
#ifndef MAGPIE_EXPLORER_H
#define MAGPIE_EXPLORER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- work-stealing deque */

typedef struct xp_deque xp_deque;

typedef enum xp_take {
    XP_TAKE_OK = 0, /* *item holds the item; it was taken by this caller and by nobody else */
    XP_TAKE_EMPTY,  /* the deque looked empty */
    XP_TAKE_ABORT,  /* steal only: lost a race with another thief or the owner; may retry */
} xp_take;

/* A deque with room for 2^log2_cap items before its first growth (log2_cap is clamped to
 * 1..40). Returns NULL when out of memory. */
xp_deque *xp_deque_init(unsigned log2_cap);
/* Frees the deque and every array it ever used. NULL-safe. No thread may use it any longer. */
void xp_deque_free(xp_deque *q);

/* Owner only (one fixed thread per deque, or several threads with happens-before between
 * their uses, e.g. handed over through a join). Push grows the array when full (doubling;
 * the old array stays allocated until xp_deque_free, as thieves may still be reading it);
 * returns false only when that growth fails for lack of memory (the item is not pushed).
 * Pop takes the most recently pushed item; it returns XP_TAKE_OK or XP_TAKE_EMPTY. */
bool xp_deque_push(xp_deque *q, uint64_t item);
xp_take xp_deque_pop(xp_deque *q, uint64_t *item);

/* Any thread, concurrently with the owner and other thieves: takes the oldest item. Memory
 * the pusher wrote before xp_deque_push happens-before what the thief does after a steal that
 * returns that item (release/acquire through bottom), so items may be pointers to states. */
xp_take xp_deque_steal(xp_deque *q, uint64_t *item);

/* Items in the deque at some recent moment (exact when no thread operates on it); any
 * thread; for heuristics (whom to steal from) and tests. */
size_t xp_deque_size(const xp_deque *q);

/* ---------------------------------------------------------------- fingerprint set */

typedef struct xp_fpset xp_fpset;

typedef enum xp_fp_result {
    XP_FP_NEW = 0, /* inserted by this call: exactly one caller gets NEW per fingerprint */
    XP_FP_PRESENT, /* it was already in the set (or a concurrent insert of it won) */
    XP_FP_FULL,    /* not in the set and the set is full: the caller must stop growing it */
} xp_fp_result;

/* Fingerprint 0 marks an empty slot, so it is stored as XP_FP_ZERO_ALIAS: 0 and the alias are
 * the same fingerprint to the set (one more 2^-64 collision among all the others). */
#define XP_FP_ZERO_ALIAS UINT64_C(0x9e3779b97f4a7c15)

/* Capacity: fixed at init, never grows. The search bounds its frontier and its visited count
 * (--max-states), so the caller sizes the set for that bound up front and treats FULL as the
 * "budget spent" signal; growth would need a stop-the-world rehash or a second level that
 * every lookup probes, for a table whose size is known in advance.
 * The table holds 2^k 8-byte slots, the least power of two with max_entries <= 3/4 of it, so
 * it costs between 10.7 and 21.4 bytes per entry of max_entries (8 bytes per slot).
 * Returns NULL when max_entries is 0 or too large, or out of memory. */
xp_fpset *xp_fpset_init(size_t max_entries);
void xp_fpset_free(xp_fpset *s); /* NULL-safe; no thread may use it any longer */

/* Any thread, concurrently with each other and with xp_fpset_contains. Lock-free: a thread
 * stalls others never. FULL is returned once max_entries fingerprints are in; under
 * concurrency a few (up to one per thread) may go past max_entries, which the 3/4 bound of
 * the table absorbs. */
xp_fp_result xp_fpset_insert(xp_fpset *s, uint64_t fp);
bool xp_fpset_contains(const xp_fpset *s, uint64_t fp);
/* Inserts n fingerprints (resume from a checkpoint); any thread, concurrently with the above.
 * *n_new (may be NULL) receives how many were new. Stops at the first FULL and returns it,
 * else XP_FP_NEW. */
xp_fp_result xp_fpset_insert_bulk(xp_fpset *s, const uint64_t *fps, size_t n, size_t *n_new);

/* Fingerprints in the set (exact once the inserting threads are joined). */
size_t xp_fpset_count(const xp_fpset *s);
size_t xp_fpset_max_entries(const xp_fpset *s);
/* Copies every fingerprint (as stored: 0 appears as XP_FP_ZERO_ALIAS), each once, in table
 * order, into out[0..cap) and returns how many the set holds; when that exceeds cap only cap
 * were written. Call only while no thread inserts (a checkpoint, with workers paused or
 * joined: that pause must give happens-before, e.g. a join or a barrier). */
size_t xp_fpset_copy(const xp_fpset *s, uint64_t *out, size_t cap);

#endif
