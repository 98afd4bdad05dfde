/* explorer.h - the parallel search explorer (DESIGN.md decision 5): its lock-free building
 * blocks. Symbols carry the prefix xp_.
 *
 *  - xp_deque: a Chase-Lev work-stealing deque of 64-bit items (Lê, Pop, Cohen, Zappa Nardelli,
 *    "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013). One owner thread
 *    pushes and pops at the bottom (LIFO); any number of thieves steal at the top (FIFO).
 *  - xp_fpset: a concurrent, insert-only set of 64-bit state fingerprints shared by all
 *    workers; lock-free, fixed capacity chosen at init.
 *  - xp_pool: the parallel best-first search built on both (section "best-first search pool").
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

/* ---------------------------------------------------------------- best-first search pool */

/* xp_pool: a parallel best-first search (MAGIS §6.2, Algorithm 3) generic over the state
 * type; graph rewrites plug in through the callbacks.
 *
 *  - N workers (pthreads). Each keeps a local binary min-heap of its own states, ordered by
 *    better(a, b, 1) on their keys (ties: the order they were pushed in), and a Chase-Lev
 *    deque (xp_deque) through which others steal from it.
 *  - A worker expands its best local state. With its heap empty it pops its own deque, then
 *    steals: victims in a random rotation (start drawn from its own RNG stream, seeded from
 *    opts.seed and the worker index), each once per round.
 *  - Exposure policy (threads > 1 only): every expose_every-th child a worker accepts goes
 *    into its deque instead of its heap, unless that child is better than the heap's top (the
 *    best is always kept locally, so a worker never gives away what it would expand next).
 *  - Children are deduplicated at push: xp_emit inserts the fingerprint into one shared
 *    xp_fpset; a fingerprint already present is a duplicate and its child is freed. So every
 *    fingerprint is accepted (and expanded) at most once.
 *  - Relaxed acceptance (Algorithm 3, lines 17-18): a child that is better(child, best, 1)
 *    becomes the best; a child is pushed iff it became the best or better(child, best, delta)
 *    holds for the best seen after that update (delta: opts.delta, default 1.1).
 *  - The best is a pointer published with CAS (release) and read with acquire. A state that
 *    was ever published as best is never freed before xp_pool_free (retire lists), so the
 *    pointer xp_pool_best returns stays valid while the pool exists.
 *  - Ends when no state is left anywhere and no expansion is in flight, or at a budget
 *    (max_expanded, max_seconds, fingerprint-set capacity) or on xp_pool_request_stop.
 *  - Frontier bound (opts.max_frontier = N > 0): each worker holds at most ceil(N / threads)
 *    accepted states in its heap plus its deque (the deque's size as read at push time;
 *    thieves only shrink it). A child accepted while that is full evicts the worst state of
 *    the worker's heap when it is better than it (the evicted state is freed, unless it was
 *    ever the best), else it is dropped (XP_EMIT_DROPPED). A child that became the best is
 *    never dropped: with an empty heap and a full deque it goes one over the bound. The
 *    decision is local to the worker (no lock, no shared counter), so with threads == 1 the
 *    frontier never exceeds N and the search stays deterministic. Evicted and dropped states
 *    keep their fingerprints in the set: they are never generated again.
 *  - Determinism: with threads == 1 there is no deque, no stealing and no randomness, so the
 *    expansion order is exactly that of a sequential best-first search (the heap breaks ties
 *    by push order); with a deterministic expand and no time budget, runs are identical.
 *  - Sharing children (opts.share_children): no exposure and no stealing; a worker with no
 *    state of its own calls xp_callbacks.help, through which the expand of another worker
 *    hands it children to derive. The frontier bound is then N per worker (one worker's
 *    expands may emit every state). An expand that emits every child itself, in its order
 *    (xs_search's), makes the run one thread's search for any number of threads. */

typedef struct xp_key {
    double k[2]; /* a priority pair; the default order is lexicographic, k[0] first */
} xp_key;

typedef struct xp_pool xp_pool;
typedef struct xp_worker xp_worker;

typedef struct xp_callbacks {
    /* Generates the children of state by calling xp_emit(w, ...) for each; runs on worker
     * w's thread, concurrently with other workers' expands. state stays owned by the pool
     * (read it, don't free it). Required. */
    void (*expand)(void *ctx, xp_worker *w, const void *state);
    /* Relaxed BetterThan: is a better than b relaxed by delta? Must be a strict weak order for
     * delta == 1 (it orders the heaps). NULL: the default, (a.k0, a.k1) < (delta * b.k0,
     * delta * b.k1) lexicographically (as Algorithm 3 with M = 0; meant for keys >= 0). */
    bool (*better)(void *ctx, const xp_key *a, const xp_key *b, double delta);
    /* Frees a state the pool owns (duplicates, rejected and expanded children, and at
     * xp_pool_free all the rest). NULL: states are not freed. */
    void (*free_state)(void *ctx, void *state);
    /* Work on another worker's running expand: with several threads, a worker calls it before
     * it takes a state of its own, so that the children of one state, not only whole states,
     * are shared out (an expand of a large graph's state is hundreds of children of several
     * milliseconds each: with whole states the only unit, a second worker must take a state
     * that one thread would not have expanded yet, which changes the search and what its
     * states cost). It may call xp_emit(w, ...) for children of a state another worker is
     * expanding; the expand that owns that state must not return before every such call has
     * returned (that keeps pending's termination argument: the child is counted before its
     * parent is done). Returns whether it did anything; false makes the worker look for a
     * state. Never called with one thread, nor while the pool is paused. NULL: none. */
    bool (*help)(void *ctx, xp_worker *w);
} xp_callbacks;

typedef struct xp_pool_opts {
    int threads;           /* <= 0: xp_default_threads() */
    uint64_t seed;         /* the workers' RNG streams (victim order) */
    double delta;          /* relaxed acceptance; <= 0: 1.1 */
    uint64_t max_expanded; /* budget: states expanded in all; 0: none */
    double max_seconds;    /* budget: wall time from xp_pool_start; <= 0: none */
    size_t max_states;     /* fingerprint-set capacity (a budget: full stops); 0: 2^20 */
    unsigned expose_every; /* exposure period (above); 0: 4 */
    size_t max_frontier;   /* frontier bound (above); 0: none */
    /* Share children, not states: no exposure and no stealing; a worker without a state of its
     * own only helps (xp_callbacks.help, required then) the others' expands. With an expand
     * that hands each helper's children back to its owner to emit in their order, the pool then
     * runs one thread's search, its states in the same order, each expand's children derived by
     * every worker at once. */
    bool share_children;
    /* Distributed search (xs_dist, one pool per MPI rank; NULL route: one process). route is
     * called by xp_emit first, on the emitting worker's thread: true when the child belongs to
     * another process, which route has taken a copy for (the child is then freed here,
     * XP_EMIT_SENT). With route set, an empty pool does not end (XP_STOP_EXHAUSTED): it waits for
     * xp_pool_inject, and only xp_pool_stop ends it. */
    bool (*route)(void *arg, const void *state, uint64_t fp, xp_key key);
    void *route_arg;
} xp_pool_opts;

typedef enum xp_stop_reason {
    XP_STOP_NONE = 0,  /* still running (or never started) */
    XP_STOP_EXHAUSTED, /* no state left: the search is complete */
    XP_STOP_EXPANDED,  /* max_expanded states were expanded */
    XP_STOP_TIME,      /* max_seconds passed */
    XP_STOP_FULL,      /* the fingerprint set reached max_states */
    XP_STOP_REQUESTED, /* xp_pool_request_stop */
    XP_STOP_NOMEM,     /* out of memory */
} xp_stop_reason;

typedef enum xp_emit_result {
    XP_EMIT_PUSHED = 0, /* accepted: the pool will expand it */
    XP_EMIT_DUPLICATE,  /* its fingerprint was seen before: freed */
    XP_EMIT_REJECTED,   /* worse than delta x best: freed (unless it was ever the best) */
    XP_EMIT_STOPPED,    /* the set is full or memory ran out: the search stops; freed */
    XP_EMIT_DROPPED,    /* the frontier is full and it is no better than its worst: freed */
    XP_EMIT_SENT,       /* owned by another process (xp_pool_opts.route): sent there, freed */
} xp_emit_result;

typedef struct xp_worker_stats {
    uint64_t expanded;       /* states expanded */
    uint64_t generated;      /* xp_emit calls */
    uint64_t duplicates;     /* ... that were duplicates */
    uint64_t rejected;       /* ... that failed the relaxed acceptance */
    uint64_t pushed;         /* ... that were accepted */
    uint64_t exposed;        /* ... that went into the worker's deque */
    uint64_t steals;         /* states taken from another worker's deque */
    uint64_t steal_attempts; /* xp_deque_steal calls on others */
    uint64_t improvements;   /* times this worker published a new best */
    uint64_t evicted;        /* frontier states evicted by a better child (frontier bound) */
    uint64_t dropped;        /* accepted children dropped for the frontier bound */
    uint64_t frontier_peak;  /* most states this worker held (heap + deque); summed: a bound */
} xp_worker_stats;

typedef struct xp_pool_stats {
    xp_worker_stats total; /* the sum over the workers */
    int threads;
    double seconds; /* from start to the end of the run (to now while it runs) */
    xp_stop_reason reason;
    uint64_t frontier; /* states accepted and not yet expanded, in flight included (a gauge) */
    /* Where the workers' time went, summed over the workers (exact once they are joined; this
     * run's only, like seconds): wall seconds inside expand, wall seconds looking for work and
     * finding none (an idle worker: too few ready states), and the workers' thread CPU seconds
     * (CLOCK_THREAD_CPUTIME_ID), which a loaded machine does not stretch as it does wall time. */
    double expand_seconds, idle_seconds, cpu_seconds;
} xp_pool_stats;

/* CPUs in this thread's affinity mask (sched_getaffinity), at least 1. */
int xp_default_threads(void);
/* The defaults above (threads 0, seed 0, delta 1.1, no budgets, 2^20 states, expose 4, no
 * frontier bound). */
xp_pool_opts xp_pool_opts_default(void);

/* A pool; copies opts and cb. NULL on bad arguments (cb->expand NULL) or out of memory. */
xp_pool *xp_pool_init(const xp_pool_opts *opts, const xp_callbacks *cb, void *ctx);
/* Frees every state still owned by the pool (frontier, retired bests) and the pool. NULL-safe.
 * Call after xp_pool_wait (or before xp_pool_start). */
void xp_pool_free(xp_pool *p);

/* Starts the workers on the root state (which becomes the first best and is expanded first).
 * The pool owns root in every case. Once per pool. Returns false when threads cannot be
 * started or memory runs out (the pool can then only be freed). */
bool xp_pool_start(xp_pool *p, void *root, uint64_t root_fp, xp_key root_key);
/* Joins the workers; returns why the search ended. Resume first if paused. */
xp_stop_reason xp_pool_wait(xp_pool *p);
/* xp_pool_start then xp_pool_wait. */
xp_stop_reason xp_pool_run(xp_pool *p, void *root, uint64_t root_fp, xp_key root_key);

/* Asks the workers to stop at their next safe point. Async-signal-safe (one lock-free atomic
 * compare-exchange), so a SIGINT handler may call it. A paused pool stops once resumed. */
void xp_pool_request_stop(xp_pool *p);

/* Brings every worker to a safe point and keeps it there: on return each worker is parked
 * (or has ended) and holds no state, no expand is in flight, and everything the workers did
 * happens-before the caller's next step (mutex + condition variable), so the frontier, the
 * set and the best may be read (a checkpoint). Only from one controlling thread, between
 * xp_pool_start and xp_pool_wait; pause and resume alternate. */
void xp_pool_pause(xp_pool *p);
void xp_pool_resume(xp_pool *p);

/* Distributed search (xp_pool_opts.route), from the controlling thread while the pool runs or is
 * paused:
 *  - xp_pool_inject hands a state received from another process (owned by the pool from now on):
 *    deduplicated at once against the fingerprint set (XP_EMIT_DUPLICATE: freed; XP_EMIT_STOPPED:
 *    the set is full, the pool stops), else queued (XP_EMIT_PUSHED) for the next worker looking
 *    for work, which applies the relaxed acceptance and the frontier bound to it as xp_emit does;
 *    queued states are part of the frontier (xp_pool_visit_frontier, pending);
 *  - xp_pool_idle: no state is queued, in a heap, a deque or being expanded (pending == 0);
 *  - xp_pool_set_bound: the best key of the whole search (the other processes' included);
 *    the relaxed acceptance also requires better(child, bound, delta) or better(child, bound, 1);
 *  - xp_pool_stop: ends the search with reason r (the first reason set wins). */
xp_emit_result xp_pool_inject(xp_pool *p, void *state, uint64_t fp, xp_key key);
bool xp_pool_idle(const xp_pool *p);
void xp_pool_set_bound(xp_pool *p, xp_key bound);
void xp_pool_stop(xp_pool *p, xp_stop_reason r);

/* Called from expand or help only, on its worker's thread: hands child (owned by the pool from now
 * on, whatever the result) with its fingerprint and key to the search. */
xp_emit_result xp_emit(xp_worker *w, void *child, uint64_t fp, xp_key key);
/* The worker's index in 0..threads-1 (for per-worker scratch in ctx). */
int xp_worker_index(const xp_worker *w);
/* From expand or help only: true once the search is stopping (a budget, a request, the time limit,
 * which this call checks), so an expand with many costly children can end early: the children
 * it does not emit are lost, as the search ends anyway. */
bool xp_worker_should_stop(xp_worker *w);

/* The best state so far and its key (key may be NULL); any thread, any time after start.
 * The state stays valid until xp_pool_free; the caller must not modify or free it. */
const void *xp_pool_best(const xp_pool *p, xp_key *key);
/* Calls fn for every state ever offered as the best (the workers' retire lists: the root and
 * each best in turn), in no particular order. Only after xp_pool_wait, from the controlling
 * thread. The states stay the pool's. */
void xp_pool_visit_bests(const xp_pool *p, void (*fn)(void *arg, const void *state, xp_key key),
                         void *arg);
/* Statistics; any thread, any time (exact after xp_pool_wait or while paused). per (may be
 * NULL) receives up to n_per workers' counts. */
void xp_pool_get_stats(const xp_pool *p, xp_pool_stats *total, xp_worker_stats *per, int n_per);
/* into's counters += from's, all but frontier_peak: a gauge, which the caller combines as it
 * means (workers of one pool hold theirs at once: a sum; searches one after another: a max). */
void xp_worker_stats_add(xp_worker_stats *into, const xp_worker_stats *from);
const char *xp_stop_reason_to_string(xp_stop_reason r);

/* ---------------------------------------------------------------- pool snapshots and restore
 *
 * What a checkpoint needs from the pool (DESIGN.md decision 6), generic over the state type.
 *
 * Unfinished states. A state whose expand was running when the search stopped (a budget, a
 * request, a full fingerprint set) and that was told so (xp_worker_should_stop returned true or
 * xp_emit XP_EMIT_STOPPED during it) may have emitted only some of its children. It is neither
 * freed nor counted as expanded: the worker keeps it as unfinished, and a restored pool expands
 * its unfinished states before anything else (each on the worker it is given to, before that
 * worker's heap). Re-expanding it is exact: the children it had emitted are duplicates now
 * (their fingerprints are in the set), the others are generated as they would have been. A
 * pause never leaves unfinished states (it waits for every expand to end).
 *
 * Determinism across a restore: with threads == 1 in both runs, a pool restored from a snapshot
 * of the frontier (keys, fingerprints, push sequence numbers), the fingerprint set, the best, the
 * worker's next sequence number and the counters continues exactly as the snapshotted run would
 * have, so "run to K/2, snapshot, restore, run to K" equals one run to K. */

typedef struct xp_item {
    void *state;
    xp_key key;
    uint64_t fp;
    uint64_t seq;    /* push order in its worker's heap (the tie-break of equal keys) */
    int worker;      /* the worker that holds it (a restore with fewer workers: modulo) */
    bool unfinished; /* its expand was cut short by the stop (above) */
} xp_item;

/* Calls fn once for every state the pool holds that is accepted and not yet expanded: each
 * worker's unfinished states, heap and deque, in a deterministic order (worker by worker;
 * unfinished, then the heap in array order, then the deque from top to bottom). Only while
 * paused or after xp_pool_wait, from the controlling thread. The states stay the pool's. */
void xp_pool_visit_frontier(const xp_pool *p, void (*fn)(void *arg, const xp_item *it), void *arg);
/* The fingerprint set: its count, and a copy as xp_fpset_copy makes it. Paused or joined only. */
size_t xp_pool_fp_count(const xp_pool *p);
size_t xp_pool_fp_copy(const xp_pool *p, uint64_t *out, size_t cap);
/* Worker i's next push sequence number and RNG stream state. Paused or joined only. */
void xp_pool_worker_cursor(const xp_pool *p, int i, uint64_t *seq, uint64_t *rng);

typedef struct xp_restore {
    /* The frontier: every state becomes the pool's (whatever the result of the start), each
     * exactly once. Item i goes to worker items[i].worker % threads; unfinished items are
     * expanded first, in the order given. */
    const xp_item *items;
    size_t n_items;
    /* The best: items[best_item].state when best_item >= 0, else best_state (then a state the
     * pool owns from now on, not in items). Required. */
    long best_item;
    void *best_state;
    uint64_t best_fp;
    xp_key best_key;
    /* The fingerprint set (the frontier's and the best's included). More than opts.max_states
     * of them (a resume with a smaller budget): the set is made to hold them all and the pool
     * stops at once with XP_STOP_FULL, nothing expanded, its frontier kept (a final snapshot
     * loses nothing). */
    const uint64_t *fps;
    size_t n_fps;
    /* Per worker of the snapshotted run (n_cursors of them; may be 0): the next sequence number
     * and RNG state, restored when n_cursors == threads; otherwise every worker's sequence
     * starts above the largest given and its RNG stream is re-derived from opts.seed and the
     * number of expansions so far (another run's streams, as a new thread count must be). */
    const uint64_t *seq, *rng;
    int n_cursors;
    /* The counters of the earlier runs, added to worker 0's (so budgets and statistics count
     * the whole search): max_expanded counts from base.expanded. */
    xp_worker_stats base;
    /* Search time already spent: max_seconds counts from it (a budget already spent stops the
     * restored pool at once with XP_STOP_TIME, after nothing was expanded). */
    double elapsed_s;
} xp_restore;

/* xp_pool_start from a snapshot instead of a root (same contract otherwise: once per pool;
 * false when threads cannot be started or memory runs out; the pool owns every state given in
 * r whatever happens). With an empty frontier the pool ends at once (XP_STOP_EXHAUSTED). */
bool xp_pool_start_restored(xp_pool *p, const xp_restore *r);

/* ---------------------------------------------------------------- memory-optimizer search */

/* xs_search (xp-search.c, xp-state.c): MAGIS Algorithm 3 on the xp_pool above, over the rules of
 * rules.h: rematerialization and swapping (and their inverses), substitutions, and the F-Tree
 * mutations that enable, lift, disable and re-split fissions.
 *
 * A state is its parent, the rw_rewrite that made it from the parent, its key (peak device
 * bytes, latency), its fingerprint and its depth: a few dozen bytes, so a large frontier fits
 * in memory (DESIGN.md decision 3). Its materialization (the base graph G_b without fission,
 * the fission configuration, one int per F-Tree node, the evaluated one-copy graph G_e =
 * rw_fission_apply(G_b, enabled fissions), or G_b itself when none is enabled, and G_e's order)
 * lives in a bounded LRU cache shared by the workers (one mutex; a lookup per expansion) and is
 * rebuilt on a miss by replaying the rewrites from the nearest cached ancestor, exactly as the
 * search made them (same rewrite, same incremental re-schedule, same simulation): replay is
 * deterministic, so a rebuilt state has the fingerprint and key it was generated with (counted
 * in xs_result.replay_mismatches otherwise). Expanded states stay alive, by reference counts,
 * while a descendant of theirs is in the frontier. The F-Tree is built once, by rw_ftree_build
 * on the start state's graph and memory, and shared read-only.
 *
 * Expanding a state: rw_candidates on G_e's memory hot-spots (remat, swap; not those that touch
 * a node of an enabled fission group or a fission op: MAGIS's rules do not cross an F-Trans
 * region; applied to G_b, whose ids G_e shares), rw_subst_candidates on G_b (the same
 * restriction), rw_ftree_mutations of the configuration. Each child is re-scheduled
 * incrementally from the parent's order (sched_incremental with the rewrite's touched ids; for
 * a fission change, the old and new groups' S and fission nodes), its swaps re-placed,
 * simulated under the cost model and fingerprinted with ir_graph_hash(G_e), which sees the
 * fission state (tags and sliced shapes are in G_e), free of node names and ids.
 *
 * BetterThan (Algorithm 3, line 2), per mode, with limit X and relaxation delta:
 *   XS_MODE_MEM: (max(a.mem, X), a.lat) < (max(delta * b.mem, X), delta * b.lat)
 *   XS_MODE_LAT: (max(a.lat, X), a.mem) < (max(delta * b.lat, X), delta * b.mem)
 * lexicographically.
 *
 * PET (XS_RULE_PET, issue #7): setup builds the table of verified PET candidates once, with
 * pet_find_candidates on the start graph G_b (xs_pet_options), so replay and resume, which run
 * setup again on the same model and options, rebuild the same table. Expanding a state adds one
 * RW_PET child per candidate (node_id = its index in the table) whose sub-program is intact in
 * the state's G_b (every node still there) and outside every enabled fission; xs_derive applies
 * it to G_b with pet_apply, which refuses (IR_ERR_INVALID, a failed child) a sub-program another
 * rewrite changed. PET states are ordinary states: a checkpoint holds their rewrites.
 *
 * Determinism: with threads == 1 and no time budget reached, (g, options, seed, max_states)
 * determine the result, fingerprint included, whatever the cache size. */

#include "ir.h"
#include "pet-opt.h"
#include "prof.h"
#include "rules.h"
#include "schedule.h"

#include <signal.h>

typedef enum xs_mode {
    XS_MODE_MEM = 0, /* limit in bytes: minimise latency within a memory limit */
    XS_MODE_LAT,     /* limit in seconds: minimise memory within a latency limit */
} xs_mode;

enum xs_rule_flags {
    XS_RULE_REMAT = 1u << 0,   /* rematerialization and its inverse */
    XS_RULE_SWAP = 1u << 1,    /* swapping (Store/Load) and its inverse */
    XS_RULE_REORDER = 1u << 2, /* start from the memory DP's order */
    XS_RULE_FISSION = 1u << 3, /* F-Tree mutations (fission) */
    XS_RULE_SUBST = 1u << 4,   /* substitution rules */
    XS_RULE_ALL = 31u,         /* the memory optimizer's families (PET is not among them) */
    XS_RULE_PET = 1u << 5,     /* PET candidates (partially equivalent, corrected mutants) */
    XS_RULE_CHAIN = 1u << 6,   /* chain remats (RW_REMAT_CHAIN); not in XS_RULE_ALL */
};

enum { XS_SHARE_AUTO = 0, XS_SHARE_CHILDREN, XS_SHARE_STATES };
/* From this many nodes of the start graph on, XS_SHARE_AUTO shares children: an expand there is
 * hundreds of children of milliseconds each (a training graph of a transformer), and a second
 * worker with states of its own would expand one that one thread would not have yet (the second
 * best of the other half of the frontier), whose children cost other amounts: on the
 * GPT-Neo-1.3B-shaped graph, enabling a second fission on a fission state, 30 ms a child
 * against 6-8 ms for the children one thread was deriving. Small graphs keep stealing states:
 * their children cost tens of microseconds, next to which listing them is not small. */
#define XS_SHARE_MIN_NODES 2048

/* The phases of the workers' time (xs_result.phase_seconds, summed over workers). */
typedef enum xs_phase {
    XS_PHASE_CANDIDATES = 0, /* memory of the parent, candidate lists */
    XS_PHASE_REWRITE,        /* rw_apply, F-Tree mutation, fission checks and rw_fission_apply */
    XS_PHASE_SCHEDULE,       /* sched_incremental and swap placement */
    XS_PHASE_SIMULATE,       /* sched_simulate */
    XS_PHASE_HASH,           /* ir_graph_hash */
    XS_PHASE_REPLAY,         /* rebuilding evicted materializations (all of its own phases) */
    XS_PHASE_COUNT,
} xs_phase;
const char *xs_phase_name(int phase); /* "candidates", "rewrite", ...; "?" otherwise */

/* ---------------------------------------------------------------- search snapshots
 *
 * A snapshot of a search (what a checkpoint holds; checkpoints/ serializes it): plain data, no
 * pointers into the search. The states form a tree rooted at states[0], the start state: each
 * other state names its parent (an index below its own) and the rewrite that made it, so the
 * search rebuilds it by replay. The states listed are the frontier's, the best and all their
 * ancestors, each once, parents before children (ordered by depth, then by first appearance in
 * the frontier walk). */

typedef struct xs_snap_state {
    int32_t parent; /* index of the parent state; -1 for states[0] only */
    rw_rewrite rw;  /* what made it from the parent (zeroed for states[0]) */
    uint64_t peak;  /* its evaluation, as the search computed it (checked again on replay) */
    double lat;
    uint64_t fp;
} xs_snap_state;

typedef struct xs_snap_item {
    int32_t state; /* index into states */
    uint64_t seq;  /* xp_item's */
    int32_t worker;
    bool unfinished;
} xs_snap_item;

typedef struct xs_snapshot {
    xs_snap_state *states; /* malloc'd, n_states >= 1 */
    uint32_t n_states;
    xs_snap_item *frontier; /* malloc'd (may be NULL when empty) */
    uint32_t n_frontier;
    int32_t best;  /* index into states */
    uint64_t *fps; /* malloc'd: the fingerprint set, any order */
    uint64_t n_fps;
    /* per worker of the run that took it: next push sequence number, RNG stream */
    uint64_t *worker_seq, *worker_rng; /* malloc'd, n_workers each */
    int32_t n_workers;
    xp_worker_stats counters; /* summed over the workers, earlier runs included */
    /* xs_result's counters, earlier runs included */
    uint64_t cache_hits, cache_misses, replay_steps, replay_mismatches, failed_children;
    double phase_seconds[XS_PHASE_COUNT];
    double elapsed_s; /* search seconds (the pool's runs), earlier runs included */
    uint32_t resumes; /* how many times this search was resumed before this snapshot */
    /* the start state, to check that a resume rebuilt the same graph */
    uint32_t start_nodes;
    uint64_t eager_peak, start_peak;
    double eager_lat, start_lat;
} xs_snapshot;

void xs_snapshot_free(xs_snapshot *s); /* NULL-safe, idempotent; zeroes *s */

/* Structural checks of a decoded snapshot (what a checkpoint reader must not trust): at least
 * one state, states[0] the only one without a parent, every parent index below its child's,
 * rewrite kinds in range, frontier and best indices in range, no state twice in the frontier,
 * finite non-negative figures, n_workers >= 1 with its arrays. IR_ERR_PARSE with the first
 * violation in d (prefixed with name) otherwise. */
ir_status xs_snapshot_check(const xs_snapshot *s, const char *name, ir_diag *d);

typedef struct xs_progress {
    double seconds;
    uint64_t expanded, generated;
    uint64_t frontier; /* states waiting (xp_pool_stats.frontier) */
    size_t best_peak_bytes;
    double best_latency_s;
} xs_progress;

typedef struct xs_options {
    int mode;     /* xs_mode */
    double limit; /* bytes (XS_MODE_MEM) or seconds (XS_MODE_LAT), absolute */
    /* A target for the other figure (seconds in XS_MODE_MEM, bytes in XS_MODE_LAT; 0: none):
     * states that meet both compare by the limited figure, so a search that has met the target
     * goes on to improve the limited one (xs_search_refined's rounds). Not Algorithm 3. */
    double target;
    double delta; /* <= 0: 1.1 */
    unsigned rules;
    int threads;         /* <= 0: xp_default_threads() */
    uint64_t seed;       /* the pool's victim order */
    double max_seconds;  /* <= 0: none */
    size_t max_states;   /* fingerprints; 0: 2^20 */
    size_t max_frontier; /* xp_pool_opts.max_frontier; 0: none */
    /* How several threads share the work (xp_pool_opts.share_children): XS_SHARE_AUTO (0)
     * shares children on graphs of XS_SHARE_MIN_NODES nodes or more, states below; or
     * XS_SHARE_CHILDREN, XS_SHARE_STATES. */
    int share;
    size_t cache_bytes; /* materialization cache (an estimate of graph bytes); 0: 256 MiB */
    int ftree_levels;   /* L of rw_ftree_build; <= 0: 4 */
    prof_model *cost;   /* profiled for g already when measured */
    /* Called every progress_interval_s (<= 0: 1 s) from the calling thread while the search
     * runs, and once at its end (final = true); may be NULL. */
    void (*progress)(void *arg, const xs_progress *p, bool final);
    void *progress_arg;
    double progress_interval_s;
    /* Polled by the calling thread: once non-zero the search stops (a SIGINT handler sets it). */
    volatile sig_atomic_t *interrupt;
    /* Checkpoints. checkpoint (may be NULL: none) is called on the calling thread with a
     * snapshot taken at a safe point: every checkpoint_every_s seconds (<= 0: never
     * periodically), as soon as *checkpoint_now (may be NULL) is non-zero (a SIGUSR1 handler
     * sets it; the search clears it), once right after the search starts (so a checkpoint exists
     * from the first seconds on) and once when the search has ended, for whatever reason
     * (final = true; the unfinished states are in that one). The workers are paused only while
     * the snapshot is copied; they run again while the callback encodes and writes it. The
     * snapshot is the callback's to read during the call only. A failing callback (its status
     * not IR_OK) is reported in xs_result.checkpoint_error and the search goes on; the final
     * one's failure makes xs_search fail with its status. */
    ir_status (*checkpoint)(void *arg, const xs_snapshot *s, bool final, ir_diag *d);
    void *checkpoint_arg;
    double checkpoint_every_s;
    volatile sig_atomic_t *checkpoint_now;
    /* Resume: start from this snapshot (checked with xs_snapshot_check, then against the start
     * state rebuilt from g: node count, eager and start figures, states[0]'s fingerprint; a
     * mismatch is IR_ERR_INVALID, "the model or its options do not rebuild the checkpointed
     * graph") instead of the start state. max_seconds and max_states count the whole search,
     * the snapshot's part included. NULL: a new search. */
    const xs_snapshot *resume;
    /* PET (XS_RULE_PET): the candidates' options; NULL: the search's defaults (see
     * xs_pet_options). Part of what defines the search, like the rules. */
    const pet_find_opts *pet;
    /* Besides the best, up to this many other states ever published as the best, the better
     * first (the mode's BetterThan with delta 1), the start state excepted, go to
     * xs_result.plans: what `optimize` times beside the best when the cost model may be wrong.
     * 0: none. Not part of what defines the search. */
    int keep_plans;
    /* One search across the processes of an MPI job (xd-mpi.c, built with MAGPIE_MPI; see
     * xd.h): this process's part of it, or NULL for a search in one process. */
    struct xs_dist *dist;
} xs_options;

/* The options setup() builds the PET table with: *o->pet, or the search's defaults (a shallower
 * generator than pet-gen.h's own defaults, bounded per enumeration, so that a model of a hundred
 * sub-programs takes a minute or less), with o's cost model and thread count. A caller that
 * needs the same table before the search (to profile the replacements' ops, say) calls
 * pet_find_candidates with these. */
void xs_pet_options(const xs_options *o, pet_find_opts *out);

/* A fission enabled in the best state. */
typedef struct xs_fission_info {
    int tree_node; /* F-Tree node index */
    int n_ids;     /* |S| */
    int64_t dim_len;
    int parts; /* n */
} xs_fission_info;

/* A PET candidate applied in the best state (from the table and the chain). */
typedef struct xs_pet_applied {
    int candidate;        /* index in xs_result.pet */
    int subprog;          /* index in the table's split */
    char first_node[160]; /* the name of the sub-program's first node (cut to fit) */
    int cls;              /* pet_mutant_class */
    int n_boxes, n_failed, n_fused;
    double orig_cost, cost; /* predicted seconds: the gain is orig_cost / cost */
    double false_accept_bound;
} xs_pet_applied;

/* A state of the search as a plan: what xs_result holds of its best, for one of the runners-up
 * (xs_options.keep_plans). xs_result_use_plan swaps a plan with the best. */
typedef struct xs_plan {
    ir_graph *g; /* owned: the state's G_e */
    int *order;  /* g->n_nodes node indices */
    size_t peak_bytes;
    double latency_s;
    uint64_t fingerprint;
    rw_rewrite *chain; /* from the start state, in order (owned) */
    int chain_len;
    int applied[RW_KIND_COUNT];
    int subst_applied[RW_SUBST_RULE_COUNT];
    xs_fission_info *fissions; /* owned */
    int n_fissions;
    xs_pet_applied *pet_applied; /* owned */
    int n_pet_applied;
} xs_plan;

void xs_plan_free(xs_plan *p); /* NULL-safe, idempotent; zeroes *p */

typedef struct xs_result {
    ir_graph *best;  /* owned: the best state's G_e (one-copy when fission is enabled) */
    int *best_order; /* best->n_nodes node indices */
    size_t best_peak_bytes;
    double best_latency_s;
    uint64_t best_fingerprint;
    rw_rewrite *chain; /* the rewrites from the start state to the best, in order (owned) */
    int chain_len;
    int applied[RW_KIND_COUNT];             /* the chain's rewrites by rw_kind */
    int subst_applied[RW_SUBST_RULE_COUNT]; /* its RW_SUBST rewrites by rule */
    xs_fission_info *fissions;              /* owned */
    int n_fissions;                         /* enabled in the best state */
    int ftree_nodes;                        /* of the F-Tree (0 without XS_RULE_FISSION) */
    size_t eager_peak_bytes;                /* the model in its eager order */
    double eager_latency_s;
    size_t start_peak_bytes; /* the start state */
    double start_latency_s;
    double start_seconds, search_seconds; /* the start state and F-Tree; the pool's run */
    double phase_seconds[XS_PHASE_COUNT]; /* summed over the workers */
    uint64_t cache_hits, cache_misses;    /* materializations found / rebuilt */
    uint64_t replay_steps;                /* rewrites replayed to rebuild them */
    uint64_t replay_mismatches;           /* rebuilt states whose fingerprint or key differed */
    uint64_t failed_children;             /* candidates that did not apply or schedule */
    xp_pool_stats stats; /* this run's pool; stats.total and stats.seconds count the whole
                          * search, earlier runs of a resumed one included */
    bool interrupted;
    uint32_t resumes; /* times the search was resumed (0 for a new one) */
    /* checkpoints written by this run: how many, the seconds the workers were paused to take
     * the snapshots, the seconds the callback took (encoding and writing, workers running),
     * and the last failure's message (empty when none failed) */
    uint32_t checkpoints;
    double checkpoint_pause_s, checkpoint_write_s;
    char checkpoint_error[256];
    /* PET: the table (owned; NULL without XS_RULE_PET), the wall time setup took to build it,
     * and the candidates applied in the best state, in chain order (owned) */
    pet_table *pet;
    double pet_seconds;
    xs_pet_applied *pet_applied;
    int n_pet_applied;
    /* xs_search_refined: the latency-bounded searches run after the first (0 for xs_search),
     * how many of them found the best plan, and the bound of the one that found it (seconds;
     * 0 when the first search's plan stayed the best). The counters above (stats.total,
     * phase_seconds, cache, failed children, search_seconds) then sum every search. */
    int refine_rounds, refine_improved;
    double refine_bound_s;
    /* xs_options.keep_plans: runners-up, the better first (owned) */
    xs_plan *plans;
    int n_plans;
    /* a distributed search (xs_options.dist): the processes (0 otherwise) and, on rank 0 only,
     * each one's figures (owned; n_ranks of them); stats.total then sums every rank's */
    int n_ranks, rank;
    struct xs_rank_stats *per_rank;
} xs_result;

/* Swaps the best state's plan (best, best_order, its figures, chain, counts, fissions and PET
 * candidates) with *p, so that p becomes the best and the former best is left in *p. */
void xs_result_swap_plan(xs_result *r, xs_plan *p);

/* One process's part of a distributed search (xs_result.per_rank). */
typedef struct xs_rank_stats {
    uint64_t distinct;                 /* fingerprints it owns (deduplicated states) */
    uint64_t expanded, generated;      /* its pool's */
    uint64_t msgs_sent, bytes_sent;    /* batches of states sent, and their bytes */
    uint64_t states_sent, states_recv; /* states routed to and received from other ranks */
    uint64_t replay_steps;             /* rewrites replayed to rebuild states (received ones) */
    double replay_s;                   /* the workers' seconds in replay */
    double search_s;                   /* its search's wall seconds */
    double idle_s;                     /* seconds its pool had no state, waiting for the network */
    double blocked_s; /* seconds its control thread waited in collectives (drains, checkpoints) */
} xs_rank_stats;

/* Runs the search on g (not modified). On failure returns the status with d set and *r
 * zeroed. */
ir_status xs_search(const ir_graph *g, const xs_options *o, xs_result *r, ir_diag *d);
void xs_result_free(xs_result *r); /* NULL-safe, idempotent */
/* XS_MODE_MEM with refinement (`magpie optimize --mem-limit X --refine`): xs_search with
 * XS_REFINE_FIRST_SHARE of o's budgets (time and states), then XS_REFINE_ROUNDS searches in
 * XS_MODE_LAT that share the rest, their latency bounds bisecting [start latency, best plan's
 * latency], with the memory limit as their target (xs_options.target: once within it, a round
 * goes on to lower the latency) and chain remats (XS_RULE_CHAIN) among their rules when o has
 * XS_RULE_REMAT. A plan one of them finds within the memory limit and faster than the best
 * becomes the best (and the upper end); otherwise the bound becomes the lower end. Why: in memory
 * mode Algorithm 3 orders the states above the limit by memory alone, so it reaches the limit
 * through the largest drops (a whole-graph fission's n = 4 or 8), and once a plan is under the
 * limit its relaxed acceptance prunes every state above it, among them those that swaps and remats
 * would bring under it at a lower latency; a latency-bounded search explores those first. When
 * the first search does not meet the limit, a second XS_MODE_MEM search from the start state gets
 * half of what is left (the lower peak of the two is kept), and the rounds share the other half
 * whether or not it met it, over [start latency, max(best's latency, XS_REFINE_MISSED_HI x
 * start)]: above the limit Algorithm 3 frees the most
 * bytes first whatever they cost and can end where no single rewrite lowers the peak, where a
 * search ranked by memory within a latency bound takes the cheap rewrites first and gets further
 * (ResNet-50). Until one meets the limit, a round's plan of lower peak becomes the best. Needs a
 * budget in o; o's checkpoint and resume are not used. Not Algorithm 3: plain xs_search is. */
#define XS_REFINE_ROUNDS 3
/* The first search finds its plan within the limit early (the largest drops first), then
 * mostly waits; the rounds need the time (BERT-base's plan within 0.4 of the peak is some 60
 * rewrites deep: 15 s on 2 threads). */
#define XS_REFINE_FIRST_SHARE 0.25
/* When the first search misses the limit, the rounds' range reaches at least this far over the
 * start's latency (their first bound is then 1.125 of it). */
#define XS_REFINE_MISSED_HI 1.25
ir_status xs_search_refined(const ir_graph *g, const xs_options *o, xs_result *r, ir_diag *d);
/* The relaxed BetterThan above on (peak bytes, latency) pairs, with xs_options.target (0: none). */
bool xs_better(int mode, double limit, double target, size_t a_mem, double a_lat, size_t b_mem,
               double b_lat, double delta);

/* A state rebuilt by xs_replay. */
typedef struct xs_replayed {
    ir_graph *g; /* owned: G_e */
    int *order;  /* owned */
    size_t peak_bytes;
    double latency_s;
    uint64_t fingerprint;
} xs_replayed;

/* Rebuilds, from g and o (as given to xs_search: the same start state and F-Tree), the state
 * that chain[0..n) makes, by applying each rewrite as the search does. IR_ERR_INVALID when a
 * rewrite does not apply. */
ir_status xs_replay(const ir_graph *g, const xs_options *o, const rw_rewrite *chain, int n,
                    xs_replayed *out, ir_diag *d);
void xs_replayed_free(xs_replayed *r); /* NULL-safe, idempotent */

#endif
