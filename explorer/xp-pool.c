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
 * reads 0 only when no state is left anywhere, and it never rises from 0 again. An eviction
 * (the frontier bound) decrements it for a state of the evicting worker's heap after the child
 * that replaces it was counted, so it cannot reach 0 early either.
 *
 * Frontier bound (opts.max_frontier = N): each worker keeps at most cap = ceil(N / threads)
 * states in its heap plus its deque (the deque's size read at push time; thieves only shrink
 * it). A child accepted when that is full evicts the worst state of the heap if it is better
 * than it, else it is dropped; the worst is found by a scan of the heap's leaves (where a
 * binary min-heap keeps its maximum), O(cap) comparisons, paid only when full and small next
 * to the child's evaluation. Decisions are local: no lock, no shared counter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "explorer.h"

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
    xp_counters c;
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
    if (atomic_load_explicit(&p->stop, memory_order_relaxed) != XP_STOP_NONE) return true;
    if (p->deadline_ns && now_ns() >= p->deadline_ns) {
        set_stop(p, XP_STOP_TIME);
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

xp_emit_result xp_emit(xp_worker *w, void *child, uint64_t fp, xp_key key) {
    xp_pool *p = w->pool;
    bump(&w->c.generated);
    xp_fp_result fr = xp_fpset_insert(p->fps, fp);
    if (fr != XP_FP_NEW) {
        if (fr == XP_FP_PRESENT)
            bump(&w->c.duplicates);
        else
            set_stop(p, XP_STOP_FULL);
        if (p->cb.free_state) p->cb.free_state(p->ctx, child);
        return fr == XP_FP_PRESENT ? XP_EMIT_DUPLICATE : XP_EMIT_STOPPED;
    }
    xp_node *n = malloc(sizeof *n);
    if (!n) {
        set_stop(p, XP_STOP_NOMEM);
        if (p->cb.free_state) p->cb.free_state(p->ctx, child);
        return XP_EMIT_STOPPED;
    }
    n->state = child;
    n->key = key;
    n->fp = fp;
    n->seq = w->seq++;
    n->next_retired = NULL;
    atomic_init(&n->retired, false);

    bool became_best = offer_best(w, n);
    /* acquire: as in offer_best */
    xp_node *best = atomic_load_explicit(&p->best, memory_order_acquire);
    if (!became_best && !better(p, &n->key, &best->key, p->o.delta)) {
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
    bool expose = p->n > 1 && ++w->n_emitted % p->o.expose_every == 0 && w->heap_n > 0 &&
                  !node_less(p, n, w->heap[0]);
    if (expose && xp_deque_push(w->deque, (uint64_t)(uintptr_t)n)) {
        bump(&w->c.exposed);
        note_frontier(w);
        return XP_EMIT_PUSHED;
    }
    if (!heap_push(w, n)) {
        set_stop(p, XP_STOP_NOMEM);
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

static xp_node *find_work(xp_worker *w) {
    xp_node *n = heap_pop(w);
    if (n) return n;
    uint64_t item;
    if (xp_deque_pop(w->deque, &item) == XP_TAKE_OK) return (xp_node *)(uintptr_t)item;
    xp_pool *p = w->pool;
    if (p->n == 1) return NULL;
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
    for (;;) {
        /* relaxed: a hint only; park() rechecks under the mutex, which carries the ordering */
        if (atomic_load_explicit(&p->pause_flag, memory_order_relaxed)) park(w);
        if (atomic_load_explicit(&p->stop, memory_order_relaxed) != XP_STOP_NONE) break;
        if (p->deadline_ns && now_ns() >= p->deadline_ns) {
            set_stop(p, XP_STOP_TIME);
            break;
        }
        xp_node *n = find_work(w);
        if (!n) {
            /* acquire: pairs with the acq_rel decrements, so all the expands (and their
             * frees) that brought pending to 0 happen-before this worker ends */
            if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) {
                set_stop(p, XP_STOP_EXHAUSTED);
                break;
            }
            if (++idle < 64) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        idle = 0;
        if (p->o.max_expanded &&
            /* relaxed: a ticket counter; no data travels with it */
            atomic_fetch_add_explicit(&p->expand_tickets, 1, memory_order_relaxed) >=
                p->o.max_expanded) {
            set_stop(p, XP_STOP_EXPANDED);
            if (!heap_push(w, n) && !atomic_load_explicit(&n->retired, memory_order_relaxed))
                free_node(p, n); /* no room to keep it: the search is over anyway */
            break;
        }
        p->cb.expand(p->ctx, w, n->state);
        bump(&w->c.expanded);
        /* relaxed: written by the emitter before the node reached this thread */
        if (!atomic_load_explicit(&n->retired, memory_order_relaxed)) free_node(p, n);
        /* acq_rel: release publishes this expand's effects to whoever reads pending == 0;
         * the children's increments above precede it in pending's modification order */
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
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
    if (!cb || !cb->expand) return NULL;
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
        w->cap = p->o.max_frontier ? (p->o.max_frontier + (size_t)p->n - 1) / (size_t)p->n : 0;
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
    }
    for (int i = 0; p->w && i < p->n; i++) {
        xp_worker *w = &p->w[i];
        for (xp_node *n = w->retired, *next; n; n = next) {
            next = n->next_retired;
            free_node(p, n);
        }
        free(w->heap);
        xp_deque_free(w->deque);
    }
    free(p->w);
    xp_fpset_free(p->fps);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_parked);
    pthread_cond_destroy(&p->cv_resume);
    free(p);
}

bool xp_pool_start(xp_pool *p, void *root, uint64_t root_fp, xp_key root_key) {
    XP_ASSERT(p && !p->started);
    p->started = true;
    xp_worker *w0 = &p->w[0];
    xp_node *n = malloc(sizeof *n);
    if (!n) {
        if (p->cb.free_state) p->cb.free_state(p->ctx, root);
        set_stop(p, XP_STOP_NOMEM);
        p->joined = true;
        return false;
    }
    *n = (xp_node){.state = root, .key = root_key, .fp = root_fp, .seq = w0->seq++};
    atomic_init(&n->retired, true);
    w0->retired = n;
    xp_fpset_insert(p->fps, root_fp);
    /* relaxed: the threads created below see it through pthread_create */
    atomic_store_explicit(&p->best, n, memory_order_relaxed);
    atomic_store_explicit(&p->pending, 1, memory_order_relaxed);
    bool ok = heap_push(w0, n);
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    int64_t t0 = (int64_t)p->t0.tv_sec * 1000000000 + p->t0.tv_nsec;
    p->deadline_ns = p->o.max_seconds > 0 ? t0 + (int64_t)(p->o.max_seconds * 1e9) : 0;
    for (int i = 0; ok && i < p->n; i++) {
        ok = pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) == 0;
        p->w[i].started = ok;
    }
    if (!ok) {
        set_stop(p, XP_STOP_NOMEM);
        xp_pool_wait(p);
        return false;
    }
    return true;
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

const void *xp_pool_best(const xp_pool *p, xp_key *key) {
    /* acquire: pairs with the publishing CAS, so the node's key and state are visible */
    xp_node *n = atomic_load_explicit(&((xp_pool *)p)->best, memory_order_acquire);
    if (!n) return NULL;
    if (key) *key = n->key;
    return n->state;
}

void xp_pool_get_stats(const xp_pool *p, xp_pool_stats *total, xp_worker_stats *per, int n_per) {
    xp_worker_stats sum = {0};
    for (int i = 0; i < p->n; i++) {
        const xp_counters *c = &p->w[i].c;
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
        sum.expanded += s.expanded;
        sum.generated += s.generated;
        sum.duplicates += s.duplicates;
        sum.rejected += s.rejected;
        sum.pushed += s.pushed;
        sum.exposed += s.exposed;
        sum.steals += s.steals;
        sum.steal_attempts += s.steal_attempts;
        sum.improvements += s.improvements;
        sum.evicted += s.evicted;
        sum.dropped += s.dropped;
        sum.frontier_peak += s.frontier_peak;
    }
    if (!total) return;
    total->total = sum;
    total->threads = p->n;
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
