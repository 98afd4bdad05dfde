/* xp-pool.c - the parallel best-first search pool (explorer.h, "best-first search pool";
 * MAGIS §6.2 Algorithm 3 with local heaps, Chase-Lev stealing and one shared fingerprint set).
 *
 * Ownership of a state (wrapped in an xp_node):
 *  - from xp_emit until it is expanded it sits in exactly one place: its worker's heap, a
 *    deque, or (between a pop/steal and the end of its expand) one worker's hands;
 *  - after its expand the expander frees it, unless node->retired is set: a node that was
 *    ever offered as the best is on its emitter's retire list and freed only by xp_pool_free
 *    (xp_pool_best hands out the pointer, so it must outlive the run). The emitter sets
 *    retired before the node is published anywhere (best CAS, heap, deque), so whoever later
 *    holds the node sees the flag (same thread, or through the deque's release/acquire).
 *
 * Termination: pending counts states accepted and not yet fully expanded (in a heap, a deque
 * or in flight). A child's increment is sequenced before its parent's decrement, so pending
 * reads 0 only when no state is left anywhere, and it never rises from 0 again. A child emitted
 * through help (cb.help: another worker's expand, sharing children) is counted before that
 * expand returns (the help contract), hence before its parent's decrement too. An eviction
 * (the frontier bound) decrements it for a state of the evicting worker's heap after the child
 * that replaces it was counted, so it cannot reach 0 early either.
 *
 * Unfinished states (explorer.h, "pool snapshots and restore"): an expand that the pool told to
 * stop (xp_worker_should_stop returned true or xp_emit returned XP_EMIT_STOPPED to it) may have
 * emitted only part of its children, so its node is kept as the worker's `cut` (pending not
 * decremented, expanded not counted) and the worker ends; so each worker holds at most one. An
 * expand told nothing emitted all its children, even if the stop flag was set meanwhile (e.g. by
 * another worker's max_expanded ticket), and counts as expanded, which keeps that budget exact. A
 * restored pool puts the unfinished states it is given in its workers' `first` queues, which
 * find_work empties before the heap. A pause waits for every expand to end, so it never sees a cut
 * node while workers still run.
 *
 * Frontier bound (opts.max_frontier = N): each worker keeps at most cap = ceil(N / threads)
 * (N when sharing children, where one worker's expands may emit every state) states in its heap
 * plus its deque (the deque's size read at push time; thieves only shrink
 * it). A child accepted when that is full evicts the worst state of the heap if it is better
 * than it, else it is dropped; the worst is found by a scan of the heap's leaves (where a
 * binary min-heap keeps its maximum), O(cap) comparisons, paid only when full and small next
 * to the child's evaluation. Decisions are local: no lock, no shared counter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "explorer-impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define XP_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: XP_ASSERT(%s) failed\n", __FILE__, __LINE__, #x);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

typedef struct xp_node {
    void *state;
    xp_key key;
    uint64_t fp;
    uint64_t seq;                 /* push order within the emitting worker: heap tie-break */
    atomic_bool retired;          /* on a retire list (ever offered as best): never freed early */
    struct xp_node *next_retired; /* emitter's retire list; read only at xp_pool_free */
} xp_node;

/* Counters written by their worker only (load + store, no RMW needed), read by anyone. */
typedef struct xp_counters {
    atomic_uint_fast64_t expanded, generated, duplicates, rejected, pushed, exposed, steals,
        steal_attempts, improvements, evicted, dropped, frontier_peak;
} xp_counters;

struct xp_worker {
    alignas(64) xp_pool *pool;
    int index;
    uint64_t rng;   /* own stream: victim order */
    xp_node **heap; /* owner only */
    size_t heap_n, heap_cap;
    uint64_t seq;       /* owner only */
    uint64_t n_emitted; /* owner only: accepted children, for the exposure period */
    size_t cap;         /* frontier bound of this worker (heap + deque); 0: none */
    xp_deque *deque;    /* owner pushes/pops, others steal */
    xp_node *retired;   /* owner only until join */
    /* owner only (the controlling thread before start, and while paused or joined): restored
     * unfinished states first[first_at..first_n), expanded before the heap; cut: the state
     * whose expand the stop cut short (the worker ends right after, so at most one) */
    xp_node **first;
    size_t first_at, first_n;
    xp_node *cut;
    bool signaled; /* owner only: the running expand was told to stop (see worker_main) */
    xp_counters c;
    /* nanoseconds, written by the worker only (as the counters), read by anyone: wall time in
     * expand, wall time finding no work, and the thread's CPU time (updated after each expand
     * and at exit) */
    atomic_int_fast64_t expand_ns, idle_ns, cpu_ns;
    pthread_t thread;
    bool started;
};

struct xp_pool {
    xp_pool_opts o;
    xp_callbacks cb;
    void *ctx;
    int n;
    xp_worker *w;
    xp_fpset *fps;
    _Atomic(xp_node *) best;
    atomic_int stop; /* an xp_stop_reason; the first reason set wins (CAS from NONE) */
    atomic_int_fast64_t pending;
    atomic_uint_fast64_t expand_tickets; /* for max_expanded */
    struct timespec t0;
    int64_t deadline_ns;        /* 0: none */
    atomic_int_fast64_t end_ns; /* 0 while running */
    bool started, joined;
    /* pause barrier: all under mu, except pause_flag (the workers' fast check) */
    pthread_mutex_t mu;
    pthread_cond_t cv_parked, cv_resume;
    int paused, parked, exited;
    atomic_int pause_flag;
    /* distributed search (xp_pool_inject): states received, FIFO through next_retired (not yet
     * retired: they reach a retire list only through offer_best, after leaving the inbox), and
     * the search-wide best key; both under dist_mu, inbox_n the workers' fast check */
    pthread_mutex_t dist_mu;
    xp_node *inbox_head, *inbox_tail;
    atomic_size_t inbox_n;
    bool has_bound;
    xp_key bound;
};

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* This thread's CPU time (0 where the clock is missing). */
static int64_t thread_cpu_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void add_ns(atomic_int_fast64_t *c, int64_t ns) {
    /* single writer, as bump() */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + ns,
                          memory_order_relaxed);
}

static void bump(atomic_uint_fast64_t *c) {
    /* single writer: relaxed load + store; readers only need an untorn value */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static bool default_better(const xp_key *a, const xp_key *b, double d) {
    double b0 = d * b->k[0], b1 = d * b->k[1];
    return a->k[0] < b0 || (a->k[0] == b0 && a->k[1] < b1);
}

static bool better(const xp_pool *p, const xp_key *a, const xp_key *b, double d) {
    return p->cb.better ? p->cb.better(p->ctx, a, b, d) : default_better(a, b, d);
}

static void set_stop(xp_pool *p, xp_stop_reason r) {
    int none = XP_STOP_NONE;
    /* relaxed: the flag carries no data; workers only need to see it eventually */
    atomic_compare_exchange_strong_explicit(&p->stop, &none, (int)r, memory_order_relaxed,
                                            memory_order_relaxed);
}

static void free_node(xp_pool *p, xp_node *n) {
    if (p->cb.free_state) p->cb.free_state(p->ctx, n->state);
    free(n);
}

/* ---------------------------------------------------------------- the local heap */

static bool node_less(const xp_pool *p, const xp_node *a, const xp_node *b) {
    if (better(p, &a->key, &b->key, 1.0)) return true;
    if (better(p, &b->key, &a->key, 1.0)) return false;
    return a->seq < b->seq;
}

static bool heap_push(xp_worker *w, xp_node *x) {
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? 2 * w->heap_cap : 64;
        xp_node **h = realloc(w->heap, cap * sizeof *h);
        if (!h) return false;
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!node_less(w->pool, x, w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = x;
    return true;
}

/* Removes w->heap[i] (sift up, then down, the element moved into its place). */
static void heap_remove_at(xp_worker *w, size_t i) {
    size_t n = --w->heap_n;
    if (i == n) return;
    xp_node *x = w->heap[n];
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!node_less(w->pool, x, w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && node_less(w->pool, w->heap[c + 1], w->heap[c])) c++;
        if (!node_less(w->pool, w->heap[c], x)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    w->heap[i] = x;
}

static xp_node *heap_pop(xp_worker *w) {
    if (w->heap_n == 0) return NULL;
    xp_node *top = w->heap[0];
    heap_remove_at(w, 0);
    return top;
}

/* Index of the heap's worst element (heap_n > 0): every non-leaf has a worse child, so it is
 * one of the leaves, indices heap_n/2 .. heap_n-1. */
static size_t heap_worst(const xp_worker *w) {
    size_t worst = w->heap_n / 2;
    for (size_t i = worst + 1; i < w->heap_n; i++)
        if (node_less(w->pool, w->heap[worst], w->heap[i])) worst = i;
    return worst;
}

/* ---------------------------------------------------------------- emit */

int xp_worker_index(const xp_worker *w) {
    return w->index;
}

bool xp_worker_should_stop(xp_worker *w) {
    xp_pool *p = w->pool;
    /* relaxed: a hint, as in worker_main */
    if (atomic_load_explicit(&p->stop, memory_order_relaxed) != XP_STOP_NONE) {
        w->signaled = true;
        return true;
    }
    if (p->deadline_ns && now_ns() >= p->deadline_ns) {
        set_stop(p, XP_STOP_TIME);
        w->signaled = true;
        return true;
    }
    return false;
}

/* Offers n as the best (Algorithm 3 line 17); returns whether this call published it. */
static bool offer_best(xp_worker *w, xp_node *n) {
    xp_pool *p = w->pool;
    /* acquire: the current best's key, written before its publishing CAS, is read below */
    xp_node *cur = atomic_load_explicit(&p->best, memory_order_acquire);
    while (better(p, &n->key, &cur->key, 1.0)) {
        if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) {
            /* relaxed: only this thread writes the flag; others read it after the node
             * reaches them through the best CAS (release) or the deque (release/acquire) */
            atomic_store_explicit(&n->retired, true, memory_order_relaxed);
            n->next_retired = w->retired;
            w->retired = n;
        }
        /* release on success: n's fields and state happen-before any acquire load of best;
         * acquire on failure: the new cur's key is read in the loop condition */
        if (atomic_compare_exchange_weak_explicit(&p->best, &cur, n, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            bump(&w->c.improvements);
            return true;
        }
    }
    return false;
}

/* Records the largest frontier this worker held (heap + own deque). */
static void note_frontier(xp_worker *w) {
    uint64_t size = w->heap_n + (w->pool->n > 1 ? xp_deque_size(w->deque) : 0);
    /* single writer: relaxed, as in bump() */
    if (size > atomic_load_explicit(&w->c.frontier_peak, memory_order_relaxed))
        atomic_store_explicit(&w->c.frontier_peak, size, memory_order_relaxed);
}

static xp_emit_result accept(xp_worker *w, xp_node *n);

xp_emit_result xp_emit(xp_worker *w, void *child, uint64_t fp, xp_key key) {
    xp_pool *p = w->pool;
    bump(&w->c.generated);
    if (p->o.route && p->o.route(p->o.route_arg, child, fp, key)) {
        if (p->cb.free_state) p->cb.free_state(p->ctx, child);
        return XP_EMIT_SENT;
    }
    xp_fp_result fr = xp_fpset_insert(p->fps, fp);
    if (fr != XP_FP_NEW) {
        if (fr == XP_FP_PRESENT) {
            bump(&w->c.duplicates);
        } else {
            set_stop(p, XP_STOP_FULL);
            w->signaled = true;
        }
        if (p->cb.free_state) p->cb.free_state(p->ctx, child);
        return fr == XP_FP_PRESENT ? XP_EMIT_DUPLICATE : XP_EMIT_STOPPED;
    }
    xp_node *n = malloc(sizeof *n);
    if (!n) {
        set_stop(p, XP_STOP_NOMEM);
        w->signaled = true;
        if (p->cb.free_state) p->cb.free_state(p->ctx, child);
        return XP_EMIT_STOPPED;
    }
    n->state = child;
    n->key = key;
    n->fp = fp;
    n->next_retired = NULL;
    atomic_init(&n->retired, false);
    return accept(w, n);
}

/* Whether n fails the search-wide bound of a distributed search (xp_pool_set_bound). */
static bool beyond_bound(xp_pool *p, const xp_node *n) {
    if (!p->o.route) return false;
    pthread_mutex_lock(&p->dist_mu);
    bool has = p->has_bound;
    xp_key b = p->bound;
    pthread_mutex_unlock(&p->dist_mu);
    return has && !better(p, &n->key, &b, 1.0) && !better(p, &n->key, &b, p->o.delta);
}

/* The relaxed acceptance and the frontier bound for a new node n (its fingerprint in the set). */
static xp_emit_result accept(xp_worker *w, xp_node *n) {
    xp_pool *p = w->pool;
    n->seq = w->seq++;
    bool became_best = offer_best(w, n);
    /* acquire: as in offer_best */
    xp_node *best = atomic_load_explicit(&p->best, memory_order_acquire);
    if ((!became_best && !better(p, &n->key, &best->key, p->o.delta)) || beyond_bound(p, n)) {
        bump(&w->c.rejected);
        /* relaxed: only this thread ever wrote it */
        if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
        return XP_EMIT_REJECTED;
    }
    xp_node *evict = NULL;
    if (w->cap) {
        size_t size = w->heap_n + (p->n > 1 ? xp_deque_size(w->deque) : 0);
        if (size >= w->cap) {
            size_t worst = w->heap_n ? heap_worst(w) : 0;
            if (w->heap_n && node_less(p, n, w->heap[worst])) {
                evict = w->heap[worst];
                heap_remove_at(w, worst);
            } else if (!became_best) {
                /* a new best is kept even over the bound (by one): it must be expanded */
                bump(&w->c.dropped);
                /* relaxed: only this thread ever wrote it */
                if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
                return XP_EMIT_DROPPED;
            }
        }
    }
    /* relaxed: the increment precedes (in this thread, hence in pending's modification
     * order) the decrement for the parent being expanded, which is all termination needs */
    atomic_fetch_add_explicit(&p->pending, 1, memory_order_relaxed);
    bump(&w->c.pushed);
    if (evict) {
        /* relaxed: the evicted state was counted when it was accepted, and the child's
         * increment above precedes this decrement in this thread, so pending stays above 0 */
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_relaxed);
        bump(&w->c.evicted);
        /* relaxed: written by its emitter before the node reached this heap */
        if (!atomic_load_explicit(&evict->retired, memory_order_relaxed)) free_node(p, evict);
    }
    bool expose = p->n > 1 && !p->o.share_children && ++w->n_emitted % p->o.expose_every == 0 &&
                  w->heap_n > 0 && !node_less(p, n, w->heap[0]);
    if (expose && xp_deque_push(w->deque, (uint64_t)(uintptr_t)n)) {
        bump(&w->c.exposed);
        note_frontier(w);
        return XP_EMIT_PUSHED;
    }
    if (!heap_push(w, n)) {
        set_stop(p, XP_STOP_NOMEM);
        w->signaled = true;
        /* pending stays raised: the search stops, so termination by pending is moot */
        if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
        return XP_EMIT_STOPPED;
    }
    note_frontier(w);
    return XP_EMIT_PUSHED;
}

/* ---------------------------------------------------------------- workers */

static void park(xp_worker *w) {
    xp_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    if (p->paused) {
        p->parked++;
        pthread_cond_broadcast(&p->cv_parked);
        while (p->paused) pthread_cond_wait(&p->cv_resume, &p->mu);
        p->parked--;
    }
    pthread_mutex_unlock(&p->mu);
}

/* The next state to expand: a restored unfinished one (*from_first set), the heap's best, the own
 * deque's newest, or one stolen. */
/* Moves the received states (xp_pool_inject) into this worker's frontier, each through the
 * relaxed acceptance. Each was counted in pending when queued; accept() counts it again when it
 * keeps it, before the queue's count is taken back, so pending cannot read 0 meanwhile. */
static void drain_inbox(xp_worker *w) {
    xp_pool *p = w->pool;
    /* relaxed: a hint; the list itself is read under dist_mu */
    if (!p->o.route || atomic_load_explicit(&p->inbox_n, memory_order_relaxed) == 0) return;
    pthread_mutex_lock(&p->dist_mu);
    xp_node *n = p->inbox_head;
    p->inbox_head = p->inbox_tail = NULL;
    atomic_store_explicit(&p->inbox_n, 0, memory_order_relaxed);
    pthread_mutex_unlock(&p->dist_mu);
    while (n) {
        xp_node *next = n->next_retired;
        n->next_retired = NULL;
        accept(w, n);
        /* acq_rel: as the expand's decrement in worker_main */
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
        n = next;
    }
}

static xp_node *find_work(xp_worker *w, bool *from_first) {
    *from_first = w->first_at < w->first_n;
    if (*from_first) return w->first[w->first_at++];
    drain_inbox(w);
    xp_node *n = heap_pop(w);
    if (n) return n;
    uint64_t item;
    if (xp_deque_pop(w->deque, &item) == XP_TAKE_OK) return (xp_node *)(uintptr_t)item;
    xp_pool *p = w->pool;
    if (p->n == 1 || p->o.share_children) return NULL;
    /* victims: a random rotation of the others, each tried once (ABORT: retried once) */
    int start = (int)(splitmix(&w->rng) % (uint64_t)p->n);
    for (int i = 0; i < p->n; i++) {
        int v = (start + i) % p->n;
        if (v == w->index) continue;
        for (int tries = 0; tries < 2; tries++) {
            bump(&w->c.steal_attempts);
            xp_take t = xp_deque_steal(p->w[v].deque, &item);
            if (t == XP_TAKE_OK) {
                bump(&w->c.steals);
                return (xp_node *)(uintptr_t)item;
            }
            if (t == XP_TAKE_EMPTY) break;
        }
    }
    return NULL;
}

static void *worker_main(void *arg) {
    xp_worker *w = arg;
    xp_pool *p = w->pool;
    unsigned idle = 0;
    int64_t cpu0 = thread_cpu_ns(), idle_since = 0; /* 0: not idle */
    for (;;) {
        /* relaxed: a hint only; park() rechecks under the mutex, which carries the ordering */
        if (atomic_load_explicit(&p->pause_flag, memory_order_relaxed)) {
            /* a pause is the controller's, not a lack of work */
            if (idle_since) add_ns(&w->idle_ns, now_ns() - idle_since);
            park(w);
            if (idle_since) idle_since = now_ns();
        }
        if (atomic_load_explicit(&p->stop, memory_order_relaxed) != XP_STOP_NONE) break;
        if (p->deadline_ns && now_ns() >= p->deadline_ns) {
            set_stop(p, XP_STOP_TIME);
            break;
        }
        if (p->cb.help && p->n > 1) {
            int64_t t_help = now_ns();
            if (p->cb.help(p->ctx, w)) {
                if (idle_since) add_ns(&w->idle_ns, t_help - idle_since);
                idle_since = 0;
                idle = 0;
                add_ns(&w->expand_ns, now_ns() - t_help);
                continue;
            }
        }
        bool from_first;
        xp_node *n = find_work(w, &from_first);
        if (!n) {
            /* acquire: pairs with the acq_rel decrements, so all the expands (and their
             * frees) that brought pending to 0 happen-before this worker ends */
            if (!p->o.route && atomic_load_explicit(&p->pending, memory_order_acquire) == 0) {
                set_stop(p, XP_STOP_EXHAUSTED);
                break;
            }
            if (!idle_since) idle_since = now_ns();
            if (++idle < 64) {
                sched_yield();
            } else {
                /* sharing children, the next work is a job that opens after its owner lists
                 * a state's children (a tenth of a second and more on a large graph): the
                 * wait backs off to a millisecond, so that polling takes no CPU the owner
                 * could use (on a loaded machine a process's threads share its time) */
                unsigned shift = p->o.share_children && idle > 64 ? idle - 64 : 0;
                long ns = 50000L << (shift < 5 ? shift : 5);
                struct timespec ts = {0, ns < 1000000 ? ns : 1000000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        idle = 0;
        int64_t t_start = now_ns();
        if (idle_since) add_ns(&w->idle_ns, t_start - idle_since);
        idle_since = 0;
        if (p->o.max_expanded &&
            /* relaxed: a ticket counter; no data travels with it */
            atomic_fetch_add_explicit(&p->expand_tickets, 1, memory_order_relaxed) >=
                p->o.max_expanded) {
            set_stop(p, XP_STOP_EXPANDED);
            if (from_first)
                w->first[--w->first_at] = n; /* back where it was: still unfinished */
            else if (!heap_push(w, n) && !atomic_load_explicit(&n->retired, memory_order_relaxed))
                free_node(p, n); /* no room to keep it: the search is over anyway */
            break;
        }
        w->signaled = false;
        p->cb.expand(p->ctx, w, n->state);
        add_ns(&w->expand_ns, now_ns() - t_start);
        atomic_store_explicit(&w->cpu_ns, thread_cpu_ns() - cpu0, memory_order_relaxed);
        if (w->signaled) {
            /* the expand was told the search stops (should_stop, or an emit STOPPED), so it may
             * have left children out: unfinished, kept for a snapshot; pending keeps counting
             * it, expanded does not. One told nothing ran to its end, whatever the flag says
             * now (a budget met by another worker), and counts as expanded as always. */
            w->cut = n;
            break;
        }
        bump(&w->c.expanded);
        /* relaxed: written by the emitter before the node reached this thread */
        if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
        /* acq_rel: release publishes this expand's effects to whoever reads pending == 0;
         * the children's increments above precede it in pending's modification order */
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
    if (idle_since) add_ns(&w->idle_ns, now_ns() - idle_since);
    /* relaxed: single writer; xp_pool_wait's join orders it before the final read */
    atomic_store_explicit(&w->cpu_ns, thread_cpu_ns() - cpu0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    p->exited++;
    pthread_cond_broadcast(&p->cv_parked);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---------------------------------------------------------------- the pool */

int xp_default_threads(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

xp_pool_opts xp_pool_opts_default(void) {
    return (xp_pool_opts){.threads = 0,
                          .seed = 0,
                          .delta = 1.1,
                          .max_expanded = 0,
                          .max_seconds = 0,
                          .max_states = (size_t)1 << 20,
                          .expose_every = 4,
                          .max_frontier = 0};
}

xp_pool *xp_pool_init(const xp_pool_opts *opts, const xp_callbacks *cb, void *ctx) {
    if (!cb || !cb->expand || (opts && opts->share_children && !cb->help)) return NULL;
    xp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = opts ? *opts : xp_pool_opts_default();
    if (p->o.threads <= 0) p->o.threads = xp_default_threads();
    if (!(p->o.delta > 0)) p->o.delta = 1.1;
    if (p->o.max_states == 0) p->o.max_states = (size_t)1 << 20;
    if (p->o.expose_every == 0) p->o.expose_every = 4;
    p->cb = *cb;
    p->ctx = ctx;
    p->n = p->o.threads;
    atomic_init(&p->best, NULL);
    atomic_init(&p->stop, XP_STOP_NONE);
    atomic_init(&p->pending, 0);
    atomic_init(&p->expand_tickets, 0);
    atomic_init(&p->end_ns, 0);
    atomic_init(&p->pause_flag, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->dist_mu, NULL);
    atomic_init(&p->inbox_n, 0);
    pthread_cond_init(&p->cv_parked, NULL);
    pthread_cond_init(&p->cv_resume, NULL);
    p->w = aligned_alloc(64, ((sizeof(xp_worker) * (size_t)p->n + 63) / 64) * 64);
    p->fps = xp_fpset_init(p->o.max_states);
    if (!p->w || !p->fps) goto out_fail;
    for (int i = 0; i < p->n; i++) {
        xp_worker *w = &p->w[i];
        *w = (xp_worker){.pool = p, .index = i};
        w->rng = p->o.seed ^ (UINT64_C(0xd1b54a32d192ed03) * (uint64_t)(i + 1));
        splitmix(&w->rng);
        atomic_init(&w->c.expanded, 0);
        atomic_init(&w->c.generated, 0);
        atomic_init(&w->c.duplicates, 0);
        atomic_init(&w->c.rejected, 0);
        atomic_init(&w->c.pushed, 0);
        atomic_init(&w->c.exposed, 0);
        atomic_init(&w->c.steals, 0);
        atomic_init(&w->c.steal_attempts, 0);
        atomic_init(&w->c.improvements, 0);
        atomic_init(&w->c.evicted, 0);
        atomic_init(&w->c.dropped, 0);
        atomic_init(&w->c.frontier_peak, 0);
        atomic_init(&w->expand_ns, 0);
        atomic_init(&w->idle_ns, 0);
        atomic_init(&w->cpu_ns, 0);
        /* sharing children, the states are in the heaps of the workers whose expands emitted
         * them, with one start state all in one: each may hold the whole bound */
        size_t share = p->o.share_children ? 1 : (size_t)p->n;
        w->cap = p->o.max_frontier ? (p->o.max_frontier + share - 1) / share : 0;
    }
    for (int i = 0; i < p->n; i++)
        if (!(p->w[i].deque = xp_deque_init(6))) goto out_fail;
    return p;
out_fail:
    xp_pool_free(p);
    return NULL;
}

void xp_pool_free(xp_pool *p) {
    if (!p) return;
    XP_ASSERT(!p->started || p->joined);
    /* single-threaded now (joined): relaxed loads suffice below */
    for (int i = 0; p->w && i < p->n; i++) {
        xp_worker *w = &p->w[i];
        for (size_t k = 0; k < w->heap_n; k++)
            if (!atomic_load_explicit(&w->heap[k]->retired, memory_order_relaxed))
                free_node(p, w->heap[k]);
        uint64_t item;
        while (w->deque && xp_deque_pop(w->deque, &item) == XP_TAKE_OK) {
            xp_node *n = (xp_node *)(uintptr_t)item;
            if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
        }
        for (size_t k = w->first_at; k < w->first_n; k++)
            if (!atomic_load_explicit(&w->first[k]->retired, memory_order_relaxed))
                free_node(p, w->first[k]);
        if (w->cut && !atomic_load_explicit(&w->cut->retired, memory_order_relaxed))
            free_node(p, w->cut);
    }
    for (xp_node *n = p->inbox_head, *next; n; n = next) {
        next = n->next_retired;
        free_node(p, n);
    }
    for (int i = 0; p->w && i < p->n; i++) {
        xp_worker *w = &p->w[i];
        for (xp_node *n = w->retired, *next; n; n = next) {
            next = n->next_retired;
            free_node(p, n);
        }
        free(w->heap);
        free(w->first);
        xp_deque_free(w->deque);
    }
    free(p->w);
    xp_fpset_free(p->fps);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->dist_mu);
    pthread_cond_destroy(&p->cv_parked);
    pthread_cond_destroy(&p->cv_resume);
    free(p);
}

/* A start that failed before any thread ran: out of memory, the pool ended (joined) at once. */
static void fail_start(xp_pool *p) {
    set_stop(p, XP_STOP_NOMEM);
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    /* relaxed: no other thread exists */
    atomic_store_explicit(&p->end_ns, now_ns(), memory_order_relaxed);
    p->joined = true;
}

/* Starts the workers, with the deadline counted from now minus spent seconds; false (the pool
 * stopped and joined) when a thread cannot be created. */
static bool launch(xp_pool *p, double spent_s) {
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    int64_t t0 = (int64_t)p->t0.tv_sec * 1000000000 + p->t0.tv_nsec;
    p->deadline_ns = 0;
    if (p->o.max_seconds > 0) {
        double left = p->o.max_seconds - spent_s;
        if (!(left > 0)) {
            set_stop(p, XP_STOP_TIME); /* spent already: the workers end at their first check */
            left = 0;
        }
        p->deadline_ns = t0 + (int64_t)(left * 1e9);
        if (p->deadline_ns == 0) p->deadline_ns = 1; /* 0 means none */
    }
    bool ok = true;
    for (int i = 0; ok && i < p->n; i++) {
        ok = pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) == 0;
        p->w[i].started = ok;
    }
    if (!ok) {
        set_stop(p, XP_STOP_NOMEM);
        xp_pool_wait(p);
    }
    return ok;
}

bool xp_pool_start(xp_pool *p, void *root, uint64_t root_fp, xp_key root_key) {
    XP_ASSERT(p && !p->started);
    p->started = true;
    xp_worker *w0 = &p->w[0];
    xp_node *n = malloc(sizeof *n);
    if (!n) {
        if (p->cb.free_state) p->cb.free_state(p->ctx, root);
        fail_start(p);
        return false;
    }
    *n = (xp_node){.state = root, .key = root_key, .fp = root_fp, .seq = w0->seq++};
    atomic_init(&n->retired, true);
    w0->retired = n;
    xp_fpset_insert(p->fps, root_fp);
    /* relaxed: the threads created below see it through pthread_create */
    atomic_store_explicit(&p->best, n, memory_order_relaxed);
    atomic_store_explicit(&p->pending, 1, memory_order_relaxed);
    if (!heap_push(w0, n)) {
        fail_start(p); /* the root is on the retire list: xp_pool_free frees it */
        return false;
    }
    return launch(p, 0.0);
}

static void first_push(xp_worker *w, xp_node *n) {
    /* sized at restore for every unfinished state of w; it only shrinks afterwards (the ticket
     * path puts back the one it took) */
    w->first[w->first_n++] = n;
}

/* Marks n as ever offered as the best (xp_pool_free frees it, from w's retire list). */
static void retire(xp_worker *w, xp_node *n) {
    /* relaxed: no worker runs yet; pthread_create orders this before their reads */
    atomic_store_explicit(&n->retired, true, memory_order_relaxed);
    n->next_retired = w->retired;
    w->retired = n;
}

/* Worker 0's counters start at the earlier runs' (budgets and statistics count the whole
 * search). No worker runs yet: relaxed stores, published by pthread_create. */
static void set_base(xp_counters *c, const xp_worker_stats *b) {
    atomic_store_explicit(&c->expanded, b->expanded, memory_order_relaxed);
    atomic_store_explicit(&c->generated, b->generated, memory_order_relaxed);
    atomic_store_explicit(&c->duplicates, b->duplicates, memory_order_relaxed);
    atomic_store_explicit(&c->rejected, b->rejected, memory_order_relaxed);
    atomic_store_explicit(&c->pushed, b->pushed, memory_order_relaxed);
    atomic_store_explicit(&c->exposed, b->exposed, memory_order_relaxed);
    atomic_store_explicit(&c->steals, b->steals, memory_order_relaxed);
    atomic_store_explicit(&c->steal_attempts, b->steal_attempts, memory_order_relaxed);
    atomic_store_explicit(&c->improvements, b->improvements, memory_order_relaxed);
    atomic_store_explicit(&c->evicted, b->evicted, memory_order_relaxed);
    atomic_store_explicit(&c->dropped, b->dropped, memory_order_relaxed);
    atomic_store_explicit(&c->frontier_peak, b->frontier_peak, memory_order_relaxed);
}

/* The sequence numbers and RNG streams of the workers (see xp_restore). */
static void set_cursors(xp_pool *p, const xp_restore *r) {
    if (r->n_cursors == p->n && r->seq && r->rng) {
        for (int i = 0; i < p->n; i++) {
            p->w[i].seq = r->seq[i];
            p->w[i].rng = r->rng[i];
        }
        return;
    }
    uint64_t above = 0;
    for (int i = 0; r->seq && i < r->n_cursors; i++) above = r->seq[i] > above ? r->seq[i] : above;
    for (size_t i = 0; i < r->n_items; i++)
        if (r->items[i].seq >= above) above = r->items[i].seq + 1;
    for (int i = 0; i < p->n; i++) {
        xp_worker *w = &p->w[i];
        w->seq = above;
        /* another thread count is another run: fresh streams, but still a function of the
         * seed and of how far the search got, so that a resumed run is reproducible */
        w->rng = p->o.seed ^ (UINT64_C(0xd1b54a32d192ed03) * (uint64_t)(i + 1)) ^
                 (UINT64_C(0x8cb92ba72f3d8dd7) * (r->base.expanded + 1));
        splitmix(&w->rng);
    }
}

/* The worker a restored item goes to. */
static size_t item_worker(const xp_pool *p, const xp_item *it) {
    return (size_t)(it->worker < 0 ? 0 : it->worker) % (size_t)p->n;
}

bool xp_pool_start_restored(xp_pool *p, const xp_restore *r) {
    XP_ASSERT(p && !p->started && r);
    XP_ASSERT(r->best_item < (long)r->n_items && (r->best_item >= 0 || r->best_state));
    p->started = true;
    size_t i = 0;
    xp_node *best = NULL;
    /* A snapshot with more fingerprints than this run's budget (a resume with a smaller one):
     * the set is made to hold them all, so a later snapshot loses none, and the run stops at
     * once (it has nothing left to spend). */
    if (r->n_fps > p->o.max_states) {
        xp_fpset *all = xp_fpset_init(r->n_fps);
        if (!all) goto nomem;
        xp_fpset_free(p->fps);
        p->fps = all;
        set_stop(p, XP_STOP_FULL);
    }
    if (xp_fpset_insert_bulk(p->fps, r->fps, r->n_fps, NULL) == XP_FP_FULL)
        set_stop(p, XP_STOP_FULL); /* cannot happen with the sizing above; kept as a guard */
    /* the first queues, sized for each worker's unfinished states (first_n counts them here) */
    for (size_t j = 0; j < r->n_items; j++)
        if (r->items[j].unfinished) p->w[item_worker(p, &r->items[j])].first_n++;
    for (int k = 0; k < p->n; k++) {
        xp_worker *w = &p->w[k];
        if (w->first_n && !(w->first = malloc(sizeof(xp_node *) * w->first_n))) goto nomem;
        w->first_n = 0;
    }
    for (; i < r->n_items; i++) {
        const xp_item *it = &r->items[i];
        xp_worker *w = &p->w[item_worker(p, it)];
        xp_node *n = malloc(sizeof *n);
        if (!n) goto nomem;
        *n = (xp_node){.state = it->state, .key = it->key, .fp = it->fp, .seq = it->seq};
        atomic_init(&n->retired, false);
        if (it->unfinished) {
            first_push(w, n);
        } else if (!heap_push(w, n)) {
            free(n);
            goto nomem;
        }
        if ((long)i == r->best_item) best = n;
    }
    if (!best) {
        if (!(best = malloc(sizeof *best))) goto nomem;
        *best = (xp_node){.state = r->best_state, .key = r->best_key, .fp = r->best_fp};
        atomic_init(&best->retired, false);
    }
    retire(&p->w[0], best);
    /* relaxed: the threads created in launch() see these through pthread_create */
    atomic_store_explicit(&p->best, best, memory_order_relaxed);
    atomic_store_explicit(&p->pending, (int_fast64_t)r->n_items, memory_order_relaxed);
    atomic_store_explicit(&p->expand_tickets, r->base.expanded, memory_order_relaxed);
    set_base(&p->w[0].c, &r->base);
    for (int k = 0; k < p->n; k++) note_frontier(&p->w[k]);
    set_cursors(p, r);
    return launch(p, r->elapsed_s);
nomem:
    /* the states not yet wrapped (items i.. and a separate best) are freed here; the wrapped
     * ones sit in heaps and first queues, which xp_pool_free empties (a queue not allocated
     * still holds its count: zeroed) */
    for (int k = 0; k < p->n; k++)
        if (!p->w[k].first) p->w[k].first_n = 0;
    for (; i < r->n_items; i++)
        if (p->cb.free_state) p->cb.free_state(p->ctx, r->items[i].state);
    if (r->best_item < 0 && p->cb.free_state) p->cb.free_state(p->ctx, r->best_state);
    fail_start(p);
    return false;
}

xp_stop_reason xp_pool_wait(xp_pool *p) {
    XP_ASSERT(p && p->started);
    if (!p->joined) {
        for (int i = 0; i < p->n; i++)
            if (p->w[i].started) pthread_join(p->w[i].thread, NULL);
        p->joined = true;
        /* relaxed: read by xp_pool_get_stats only */
        atomic_store_explicit(&p->end_ns, now_ns(), memory_order_relaxed);
    }
    return (xp_stop_reason)atomic_load_explicit(&p->stop, memory_order_relaxed);
}

xp_stop_reason xp_pool_run(xp_pool *p, void *root, uint64_t root_fp, xp_key root_key) {
    if (!xp_pool_start(p, root, root_fp, root_key)) return xp_pool_wait(p);
    return xp_pool_wait(p);
}

void xp_pool_request_stop(xp_pool *p) {
    set_stop(p, XP_STOP_REQUESTED);
}

void xp_pool_stop(xp_pool *p, xp_stop_reason r) {
    set_stop(p, r);
}

xp_emit_result xp_pool_inject(xp_pool *p, void *state, uint64_t fp, xp_key key) {
    xp_fp_result fr = xp_fpset_insert(p->fps, fp);
    xp_node *n = fr == XP_FP_NEW ? malloc(sizeof *n) : NULL;
    if (!n) {
        if (fr != XP_FP_PRESENT) set_stop(p, fr == XP_FP_FULL ? XP_STOP_FULL : XP_STOP_NOMEM);
        if (p->cb.free_state) p->cb.free_state(p->ctx, state);
        return fr == XP_FP_PRESENT ? XP_EMIT_DUPLICATE : XP_EMIT_STOPPED;
    }
    *n = (xp_node){.state = state, .key = key, .fp = fp};
    atomic_init(&n->retired, false);
    /* relaxed: counted before it is visible to any worker (the mutex below orders the rest) */
    atomic_fetch_add_explicit(&p->pending, 1, memory_order_relaxed);
    pthread_mutex_lock(&p->dist_mu);
    if (p->inbox_tail)
        p->inbox_tail->next_retired = n;
    else
        p->inbox_head = n;
    p->inbox_tail = n;
    atomic_fetch_add_explicit(&p->inbox_n, 1, memory_order_relaxed);
    pthread_mutex_unlock(&p->dist_mu);
    return XP_EMIT_PUSHED;
}

bool xp_pool_idle(const xp_pool *p) {
    /* acquire: as in worker_main's pending check */
    return atomic_load_explicit(&((xp_pool *)p)->pending, memory_order_acquire) == 0;
}

void xp_pool_set_bound(xp_pool *p, xp_key bound) {
    pthread_mutex_lock(&p->dist_mu);
    p->bound = bound;
    p->has_bound = true;
    pthread_mutex_unlock(&p->dist_mu);
}

void xp_pool_pause(xp_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->paused = 1;
    /* relaxed: a hint for the workers' fast path; the hand-over itself is under mu */
    atomic_store_explicit(&p->pause_flag, 1, memory_order_relaxed);
    while (p->parked + p->exited < p->n) pthread_cond_wait(&p->cv_parked, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void xp_pool_resume(xp_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->paused = 0;
    /* relaxed: as in xp_pool_pause */
    atomic_store_explicit(&p->pause_flag, 0, memory_order_relaxed);
    pthread_cond_broadcast(&p->cv_resume);
    pthread_mutex_unlock(&p->mu);
}

/* ---------------------------------------------------------------- snapshots */

typedef struct visit_arg {
    void (*fn)(void *arg, const xp_item *it);
    void *arg;
    int worker;
} visit_arg;

static void visit_node(const visit_arg *v, const xp_node *n, bool unfinished) {
    xp_item it = {.state = n->state,
                  .key = n->key,
                  .fp = n->fp,
                  .seq = n->seq,
                  .worker = v->worker,
                  .unfinished = unfinished};
    v->fn(v->arg, &it);
}

static void visit_deque_item(void *arg, uint64_t item) {
    visit_node(arg, (const xp_node *)(uintptr_t)item, false);
}

/* Paused or joined (contract): every worker's writes happen-before these plain reads, through
 * the pause mutex or the join. */
void xp_pool_visit_frontier(const xp_pool *p, void (*fn)(void *arg, const xp_item *it), void *arg) {
    for (int i = 0; i < p->n; i++) {
        const xp_worker *w = &p->w[i];
        visit_arg v = {.fn = fn, .arg = arg, .worker = i};
        /* the cut state first: it was taken before the rest of the first queue */
        if (w->cut) visit_node(&v, w->cut, true);
        for (size_t k = w->first_at; k < w->first_n; k++) visit_node(&v, w->first[k], true);
        for (size_t k = 0; k < w->heap_n; k++) visit_node(&v, w->heap[k], false);
        if (w->deque) xp_deque_visit(w->deque, visit_deque_item, &v);
    }
    /* received states not yet accepted by a worker (a distributed search) */
    visit_arg v = {.fn = fn, .arg = arg, .worker = 0};
    for (const xp_node *n = p->inbox_head; n; n = n->next_retired) visit_node(&v, n, false);
}

void xp_pool_visit_bests(const xp_pool *p, void (*fn)(void *arg, const void *state, xp_key key),
                         void *arg) {
    XP_ASSERT(!p->started || p->joined);
    for (int i = 0; i < p->n; i++)
        for (const xp_node *n = p->w[i].retired; n; n = n->next_retired) fn(arg, n->state, n->key);
}

size_t xp_pool_fp_count(const xp_pool *p) {
    return xp_fpset_count(p->fps);
}

size_t xp_pool_fp_copy(const xp_pool *p, uint64_t *out, size_t cap) {
    return xp_fpset_copy(p->fps, out, cap);
}

void xp_pool_worker_cursor(const xp_pool *p, int i, uint64_t *seq, uint64_t *rng) {
    XP_ASSERT(i >= 0 && i < p->n);
    if (seq) *seq = p->w[i].seq;
    if (rng) *rng = p->w[i].rng;
}

const void *xp_pool_best(const xp_pool *p, xp_key *key) {
    /* acquire: pairs with the publishing CAS, so the node's key and state are visible */
    xp_node *n = atomic_load_explicit(&((xp_pool *)p)->best, memory_order_acquire);
    if (!n) return NULL;
    if (key) *key = n->key;
    return n->state;
}

void xp_worker_stats_add(xp_worker_stats *into, const xp_worker_stats *from) {
    into->expanded += from->expanded;
    into->generated += from->generated;
    into->duplicates += from->duplicates;
    into->rejected += from->rejected;
    into->pushed += from->pushed;
    into->exposed += from->exposed;
    into->steals += from->steals;
    into->steal_attempts += from->steal_attempts;
    into->improvements += from->improvements;
    into->evicted += from->evicted;
    into->dropped += from->dropped;
}

void xp_pool_get_stats(const xp_pool *p, xp_pool_stats *total, xp_worker_stats *per, int n_per) {
    xp_worker_stats sum = {0};
    int64_t expand_ns = 0, idle_ns = 0, cpu_ns = 0;
    for (int i = 0; i < p->n; i++) {
        const xp_counters *c = &p->w[i].c;
        /* relaxed: as the counters */
        expand_ns += atomic_load_explicit(&p->w[i].expand_ns, memory_order_relaxed);
        idle_ns += atomic_load_explicit(&p->w[i].idle_ns, memory_order_relaxed);
        cpu_ns += atomic_load_explicit(&p->w[i].cpu_ns, memory_order_relaxed);
        /* relaxed: counters; exact once the writer is joined or parked (mutex) */
        xp_worker_stats s = {
            .expanded = atomic_load_explicit(&c->expanded, memory_order_relaxed),
            .generated = atomic_load_explicit(&c->generated, memory_order_relaxed),
            .duplicates = atomic_load_explicit(&c->duplicates, memory_order_relaxed),
            .rejected = atomic_load_explicit(&c->rejected, memory_order_relaxed),
            .pushed = atomic_load_explicit(&c->pushed, memory_order_relaxed),
            .exposed = atomic_load_explicit(&c->exposed, memory_order_relaxed),
            .steals = atomic_load_explicit(&c->steals, memory_order_relaxed),
            .steal_attempts = atomic_load_explicit(&c->steal_attempts, memory_order_relaxed),
            .improvements = atomic_load_explicit(&c->improvements, memory_order_relaxed),
            .evicted = atomic_load_explicit(&c->evicted, memory_order_relaxed),
            .dropped = atomic_load_explicit(&c->dropped, memory_order_relaxed),
            .frontier_peak = atomic_load_explicit(&c->frontier_peak, memory_order_relaxed),
        };
        if (per && i < n_per) per[i] = s;
        xp_worker_stats_add(&sum, &s);
        sum.frontier_peak += s.frontier_peak;
    }
    if (!total) return;
    total->total = sum;
    total->threads = p->n;
    total->expand_seconds = (double)expand_ns * 1e-9;
    total->idle_seconds = (double)idle_ns * 1e-9;
    total->cpu_seconds = (double)cpu_ns * 1e-9;
    total->reason = (xp_stop_reason)atomic_load_explicit(&p->stop, memory_order_relaxed);
    /* relaxed: a gauge for progress lines; exact once the workers are joined */
    int_fast64_t pend = atomic_load_explicit(&p->pending, memory_order_relaxed);
    total->frontier = pend > 0 ? (uint64_t)pend : 0;
    int64_t t0 = (int64_t)p->t0.tv_sec * 1000000000 + p->t0.tv_nsec;
    int64_t end = atomic_load_explicit(&p->end_ns, memory_order_relaxed);
    total->seconds = p->started ? (double)((end ? end : now_ns()) - t0) * 1e-9 : 0.0;
}

const char *xp_stop_reason_to_string(xp_stop_reason r) {
    switch (r) {
    case XP_STOP_NONE: return "running";
    case XP_STOP_EXHAUSTED: return "exhausted";
    case XP_STOP_EXPANDED: return "max-expanded";
    case XP_STOP_TIME: return "time";
    case XP_STOP_FULL: return "states-full";
    case XP_STOP_REQUESTED: return "requested";
    case XP_STOP_NOMEM: return "out-of-memory";
    }
    return "?";
}
