/* explorer-impl.h - private declarations of explorer/: the deque's quiescent visit (xp-deque.c,
 * for the pool's snapshots in xp-pool.c), and what the memory optimizer's search shares between
 * its files (xp-search.c: expansion, the driver, the result; xp-state.c: states as parent plus
 * rewrite, their materializations, the LRU cache and replay; xp-snapshot.c: snapshots of the
 * search and the rebuilding of its state tree on resume).
 *
 * Invariants:
 *  - a state's fields other than mat and the lru links are written once, before the state is
 *    handed to the pool (xp_emit), and never again: any thread may read them;
 *  - mat, in_lru and the lru links of every state are read and written under xs_ctx.mu only;
 *  - graphs (xs_graph) and materializations (xs_mat) are immutable once built and shared by
 *    reference counts; a worker holds a reference to every materialization it reads;
 *  - the root's materialization is pinned (never evicted), so replay always has a start. */
#ifndef MAGPIE_EXPLORER_IMPL_H
#define MAGPIE_EXPLORER_IMPL_H

#include "explorer.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>

/* Calls fn for every item of q from top (oldest) to bottom. Only while no thread operates on q
 * (workers paused or joined: that pause or join must give happens-before). */
void xp_deque_visit(const xp_deque *q, void (*fn)(void *arg, uint64_t item), void *arg);

/* An immutable graph shared by several materializations (an F-Tree mutation keeps G_b). */
typedef struct xs_graph {
    atomic_int refs;
    ir_graph *g;
} xs_graph;

/* A materialized state. ge == gb (one more reference) when no fission is enabled. */
typedef struct xs_mat {
    atomic_int refs;
    xs_graph *gb;  /* the base graph, without fission */
    xs_graph *ge;  /* the evaluated (one-copy) graph */
    int *config;   /* one n per F-Tree node (1: disabled); NULL when the tree is empty */
    int *order;    /* ge->g->n_nodes node indices of ge->g */
    uint32_t *fis; /* sorted: ids of the enabled groups' S and of ge's fission nodes */
    int n_fis;
    ir_hash_memo hm; /* ge's per-node hashes: a child's fingerprint is an update of them */
    size_t bytes;    /* what the cache charges for it (an estimate) */
} xs_mat;

typedef struct xs_state {
    struct xs_state *parent; /* a reference; NULL for the root */
    atomic_int refs;
    rw_rewrite rw; /* what made it from parent */
    int depth;     /* rewrites from the root */
    size_t peak;
    double lat;
    uint64_t fp;
    /* under xs_ctx.mu */
    xs_mat *mat;
    bool in_lru;
    struct xs_state *lru_prev, *lru_next;
} xs_state;

/* What a derived state evaluates to. */
typedef struct xs_eval {
    size_t peak;
    double lat;
    uint64_t fp;
} xs_eval;

/* A derived child waiting for its owner to emit it (xs_job.slot). */
typedef struct xs_child {
    atomic_int done; /* 0: not yet; 1: derived (cm, ev); 2: failed */
    xs_mat *cm;
    xs_eval ev;
} xs_child;

/* The children of one state being derived (xp-search.c, cb_expand), open to the other workers
 * (cb_help) when the pool shares children: whoever claims index i of cand[0..n) by next derives
 * that child into slot[i] (done, release), and the owner emits the slots in index order, so
 * its heap receives the children as one thread's expand would have pushed them. The
 * owner writes s, pm, cand and n while the job is closed and no helper is inside (active 0),
 * then opens it (release); a helper counts itself in active, then reads open (both seq_cst,
 * against the owner's closing store of open and load of active), and reads the fields only
 * when it is open. The owner returns only once the job is closed and active is 0 again, so
 * s, pm and every child a helper emitted outlive the helpers' use of them. */
typedef struct xs_job {
    atomic_int open;   /* helpers may claim children */
    atomic_int active; /* helpers inside */
    atomic_int next;   /* the next index of cand to claim */
    int n;
    xs_child *slot; /* XS_MAX_CANDIDATES, the owner's */
    xs_state *s;
    xs_mat *pm;
    const rw_rewrite *cand;
} xs_job;

/* Per-worker scratch and counters, written by its own thread only (one cache line apart). */
typedef struct xs_worker {
    alignas(64) double phase[XS_PHASE_COUNT];
    uint64_t hits, misses, replay_steps, failed;
    rw_rewrite *cand;       /* XS_MAX_CANDIDATES */
    uint32_t *touched;      /* XS_TOUCHED_CAP */
    uint32_t *touched_e;    /* RW_MAX_TOUCHED: a G_b rewrite's touched ids on G_e (xs_derive) */
    uint32_t *fis_buf;      /* RW_MAX_FISSION_TOUCHED */
    rw_fission *fissions;   /* the F-Tree's size */
    unsigned char *present; /* PET children: present[id] for G_b's node ids (grown as needed) */
    size_t present_cap;
    alignas(64) xs_job job; /* the expand this worker runs, shared with the others */
} xs_worker;

#define XS_MAX_CANDIDATES 1024
/* Remat/swap children per expansion: the ones moving or recomputing the most bytes
 * (xp-search.c, list_children). */
#define XS_MAX_SCHED_CHILDREN 48
/* The most values one remat's recompute reads that keep_best weighs (rw_remat_reads): a chain
 * of RW_REMAT_CHAIN_MAX nodes of a few inputs each. */
#define XS_REMAT_READS 64
#define XS_TOUCHED_CAP (2 * RW_MAX_FISSION_TOUCHED + RW_MAX_TOUCHED)

typedef struct xs_ctx {
    const xs_options *o;
    double limit, delta;
    sched_dp_options dp;
    rw_ftree *ft;   /* NULL without XS_RULE_FISSION */
    pet_table *pet; /* NULL without XS_RULE_PET; read-only once built */
    xs_state *root;
    /* the LRU cache of materializations: most recent at head */
    pthread_mutex_t mu;
    xs_state *lru_head, *lru_tail;
    size_t cache_bytes, cache_cap;
    int cache_n;
    atomic_uint_fast64_t mismatches;
    xs_worker *w; /* n_w: the pool's workers, then the calling thread */
    bool share;   /* the pool shares children (xp_pool_opts.share_children) */
    int n_w;
} xs_ctx;

/* The key of (peak, lat) under mode (xs_better's order: the limited figure first). */
static inline xp_key xs_mode_key(int mode, size_t peak, double lat) {
    return mode == XS_MODE_LAT ? (xp_key){{lat, (double)peak}} : (xp_key){{(double)peak, lat}};
}

/* The pool's key of a state under the search's mode. */
static inline xp_key xs_key(const xs_ctx *c, size_t peak, double lat) {
    return xs_mode_key(c->o->mode, peak, lat);
}

/* xp-state.c */
ir_status xs_ctx_init(xs_ctx *c, const xs_options *o, int n_workers, ir_diag *d);
void xs_ctx_free(xs_ctx *c);  /* after every state is gone */
void xs_mat_unref(xs_mat *m); /* NULL-safe */
/* The root: g cloned, order copied (g->n_nodes entries), every fission disabled; pinned. */
xs_state *xs_root_new(xs_ctx *c, const ir_graph *g, const int *order, ir_diag *d);
/* A child of parent made by r (one reference, the caller's), or NULL when out of memory. */
xs_state *xs_state_new(xs_state *parent, const rw_rewrite *r, const xs_eval *ev);
void xs_state_ref(xs_state *s);
void xs_state_unref(xs_ctx *c, xs_state *s); /* NULL-safe; frees when the last one goes */
/* Applies r to the materialization p: the child's materialization (one reference) in *out and
 * its evaluation in *ev. Phase times go to w->phase. IR_ERR_INVALID when r does not apply. */
ir_status xs_derive(xs_ctx *c, xs_worker *w, const xs_mat *p, const rw_rewrite *r, xs_mat **out,
                    xs_eval *ev, ir_diag *d);
/* s's materialization (one reference, the caller's): from the cache, or rebuilt by replay from
 * the nearest cached ancestor (the rebuilt states enter the cache). NULL on failure. */
xs_mat *xs_materialize(xs_ctx *c, xs_worker *w, xs_state *s, ir_diag *d);
/* Offers m as s's materialization to the cache (which takes its own reference). */
void xs_cache_put(xs_ctx *c, xs_state *s, xs_mat *m);
/* Whether rewrites of this rw_kind may act inside an enabled fission's region (on its one
 * copy); the others are kept out of regions, as MAGIS's rules are. */
bool xs_rule_inside_fission(int kind);
/* Places swaps (when any) and simulates order on g. */
ir_status xs_evaluate(const xs_ctx *c, const ir_graph *g, int *order, size_t *peak, double *lat,
                      ir_diag *d);

/* xp-search.c: the search's BetterThan on two keys (the pool's order). */
bool xs_key_better(const xs_ctx *c, const xp_key *a, const xp_key *b, double delta);

/* ---------------------------------------------------------------- the distributed layer
 *
 * What xs_search calls when xs_options.dist is set (one process of an MPI job); xd-mpi.c, built
 * only with MAGPIE_MPI, implements it (xd.h makes one). Every call but route is made on the
 * calling (control) thread, which alone talks to MPI. */
typedef enum xs_dist_act {
    XS_DIST_RUN = 0,    /* go on */
    XS_DIST_CHECKPOINT, /* every rank takes a checkpoint now */
    XS_DIST_STOP,       /* every rank stops now, for the reason given */
} xs_dist_act;

typedef struct xs_dist_ops {
    /* whether this rank owns fingerprint fp (the start state starts on its owner) */
    bool (*owns)(struct xs_dist *x, uint64_t fp);
    /* once the pool runs: records c and p, waits for every rank to get there */
    ir_status (*begin)(struct xs_dist *x, xs_ctx *c, xp_pool *p, ir_diag *d);
    /* one communication step (sends, receives, the termination and best-sharing wave):
     * want_checkpoint is this rank's wish; on XS_DIST_STOP *why is the reason, the same on all */
    xs_dist_act (*step)(struct xs_dist *x, bool want_checkpoint, xp_stop_reason *why);
    /* with the pool paused or joined: sends what is queued and receives until no state is in
     * flight anywhere (every rank calls it together); received states join the frontier */
    ir_status (*quiesce)(struct xs_dist *x, ir_diag *d);
    /* after the final quiesce: rank 0 gets every rank's figures (r->per_rank, r->stats.total
     * summed) and the best state of all (*best: a reference, the caller's; NULL elsewhere) */
    ir_status (*finish)(struct xs_dist *x, xs_result *r, xs_state **best, ir_diag *d);
    /* drops the layer's references to states (before the context is freed) */
    void (*end)(struct xs_dist *x);
    /* xp_pool_opts.route (arg: the xs_dist); any worker thread */
    bool (*route)(void *arg, const void *state, uint64_t fp, xp_key key);
} xs_dist_ops;

struct xs_dist {
    const xs_dist_ops *ops;
};

/* xp-snapshot.c */
/* The snapshot of the search c runs on p, while p is paused or after xp_pool_wait: r holds this
 * run's start figures and resumes; c->o->resume (may be NULL) the snapshot this run resumed,
 * whose counters are added. IR_ERR_NOMEM only (*out is then empty). */
ir_status xs_snapshot_take(xs_ctx *c, const xp_pool *p, const ir_graph *g, const xs_result *r,
                           xs_snapshot *out, ir_diag *d);
/* Whether the start state that setup() rebuilt from g (c->root, the figures in r) is the one
 * s was taken from; IR_ERR_INVALID naming what differs. s passed xs_snapshot_check. */
ir_status xs_snapshot_match(const xs_snapshot *s, const ir_graph *g, const xs_ctx *c,
                            const xs_result *r, ir_diag *d);
/* Rebuilds s's state tree below c->root (which it takes: c->root is NULL afterwards), replays
 * the best once to check it (IR_ERR_INVALID when it does not rebuild), and starts p from the
 * frontier (xp_pool_start_restored). p owns the states whatever happens; on failure p never
 * started or has ended already (xp_pool_free it). */
ir_status xs_snapshot_restore(xs_ctx *c, xp_pool *p, const xs_snapshot *s, ir_diag *d);

#endif
