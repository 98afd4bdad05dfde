/* xp-state.c - the memory optimizer's search states (explorer-impl.h): a state is its parent plus
 * the rewrite that made it; its materialization (G_b, the fission configuration, G_e and its
 * order) is derived from the parent's by xs_derive, kept in a bounded LRU cache and rebuilt on a
 * miss by replaying the rewrites from the nearest cached ancestor with the same xs_derive, so a
 * rebuilt state is bit-identical to the one the search evaluated.
 *
 * Reference counts: the pool holds one per state it owns, every child one on its parent, and a
 * worker one while it uses a state; materializations and graphs are counted the same way, the
 * cache holding one per cached materialization. Increments are relaxed (whoever increments
 * already holds a reference); decrements are acq_rel, so everything done through a reference
 * happens-before the free that follows the last decrement. */
#define _POSIX_C_SOURCE 200809L
#include "explorer-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Fission nodes get ids from G_b's next id rounded up to this: a rewrite of G_b adds a few ids,
 * which leaves the rounded base, hence every fission node's id, unchanged, so the incremental
 * scheduler's window stays around the rewrite; ids stay dense (sched_incremental indexes arrays
 * by id). When G_b's ids reach the base, the base moves up: the parent's fission ids and the
 * child's are then different sets, and their symmetric difference is touched, so the scheduler
 * re-places every fission node (and the G_b node that took a former fission id, touched by the
 * rewrite anyway). */
#define FISSION_ID_ALIGN 1024u

/* The first fission node id of a materialization whose G_b has next id next. */
static uint32_t fission_base(uint32_t next) {
    return (next + FISSION_ID_ALIGN - 1) / FISSION_ID_ALIGN * FISSION_ID_ALIGN;
}

/* ---------------------------------------------------------------- shared graphs */

static xs_graph *graph_wrap(ir_graph *g) {
    xs_graph *x = malloc(sizeof *x);
    if (!x) return NULL;
    atomic_init(&x->refs, 1);
    x->g = g;
    return x;
}

static xs_graph *graph_ref(xs_graph *x) {
    /* relaxed: the caller already holds a reference */
    atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
    return x;
}

static void graph_unref(xs_graph *x) {
    /* acq_rel: every use through other references happens-before the free */
    if (x && atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1) {
        ir_graph_free(x->g);
        free(x);
    }
}

/* What a graph costs in memory, roughly (nodes with their arrays and attributes, values). */
static size_t graph_bytes(const ir_graph *g) {
    return sizeof *g + (size_t)g->n_nodes * (sizeof(ir_node) + 96) +
           (size_t)g->n_values * (sizeof(ir_value) + 32);
}

static xs_mat *mat_ref(xs_mat *m) {
    /* relaxed: the caller holds a reference (or the cache's, under the mutex) */
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void xs_mat_unref(xs_mat *m) {
    /* acq_rel: as graph_unref */
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    graph_unref(m->gb);
    graph_unref(m->ge);
    free(m->config);
    free(m->order);
    free(m->fis);
    ir_hash_memo_free(&m->hm);
    free(m);
}

static size_t mat_bytes(const xs_mat *m, int n_config) {
    size_t b = sizeof *m + graph_bytes(m->gb->g) + sizeof(int) * (size_t)m->ge->g->n_nodes +
               sizeof(int) * (size_t)n_config + sizeof(uint32_t) * (size_t)m->n_fis +
               2 * sizeof(uint64_t) * ((size_t)m->hm.cap + 1);
    return m->ge == m->gb ? b : b + graph_bytes(m->ge->g);
}

/* ---------------------------------------------------------------- context */

/* Every child of a large graph allocates and frees its arrays (a 10k-node training graph's
 * values and nodes are a few MiB): with glibc's defaults these go to mmap and back, or the heap
 * is trimmed after each free, so each child faults its pages in again (12% of a worker's time on
 * the GPT-Neo-1.3B-shaped graph, plus the page-table lock that serializes the faults and unmaps
 * of two workers). Keeping them below the mmap threshold and the freed memory in the heap makes
 * it reusable at once. Process-wide, set once, by the first search. */
static void tune_malloc(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest: bigger blocks are still mapped */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

ir_status xs_ctx_init(xs_ctx *c, const xs_options *o, int n_workers, ir_diag *d) {
    static pthread_once_t malloc_once = PTHREAD_ONCE_INIT;
    pthread_once(&malloc_once, tune_malloc);
    memset(c, 0, sizeof *c);
    c->o = o;
    c->limit = o->limit;
    c->delta = o->delta > 0 ? o->delta : 1.1;
    /* Bounds one incremental re-schedule: a state budget (deterministic) and a time budget
     * that only a pathological window reaches. On the BERT-base training graph (8 x 512) 4 Ki
     * DP states per window gave 5x the search states of 64 Ki in a minute, at the same best
     * plan; the incremental re-schedule is still most of a worker's time. */
    c->dp.time_budget_s = 2.0;
    c->dp.max_states = 4096;
    c->cache_cap = o->cache_bytes ? o->cache_bytes : (size_t)256 << 20;
    atomic_init(&c->mismatches, 0);
    pthread_mutex_init(&c->mu, NULL);
    c->n_w = n_workers + 1;
    c->w = aligned_alloc(64, ((sizeof(xs_worker) * (size_t)c->n_w + 63) / 64) * 64);
    if (!c->w) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    memset(c->w, 0, sizeof(xs_worker) * (size_t)c->n_w);
    for (int i = 0; i < c->n_w; i++) {
        xs_job *j = &c->w[i].job;
        atomic_init(&j->open, 0);
        atomic_init(&j->active, 0);
        atomic_init(&j->next, 0);
        j->slot = NULL;
    }
    return IR_OK;
}

/* The workers' scratch; after the F-Tree is known (c->ft). */
static ir_status ctx_scratch(xs_ctx *c, ir_diag *d) {
    int nft = c->ft ? c->ft->n : 0;
    for (int i = 0; i < c->n_w; i++) {
        xs_worker *w = &c->w[i];
        w->cand = malloc(sizeof(rw_rewrite) * XS_MAX_CANDIDATES);
        w->touched = malloc(sizeof(uint32_t) * XS_TOUCHED_CAP);
        w->touched_e = malloc(sizeof(uint32_t) * RW_MAX_TOUCHED);
        w->fis_buf = nft ? malloc(sizeof(uint32_t) * RW_MAX_FISSION_TOUCHED) : NULL;
        w->fissions = nft ? malloc(sizeof(rw_fission) * (size_t)nft) : NULL;
        if (!w->cand || !w->touched || !w->touched_e || (nft && (!w->fis_buf || !w->fissions)))
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        if (c->share && !(w->job.slot = malloc(sizeof(xs_child) * XS_MAX_CANDIDATES)))
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        for (int k = 0; c->share && k < XS_MAX_CANDIDATES; k++)
            atomic_init(&w->job.slot[k].done, 0);
    }
    return IR_OK;
}

void xs_ctx_free(xs_ctx *c) {
    for (int i = 0; c->w && i < c->n_w; i++) {
        free(c->w[i].cand);
        free(c->w[i].touched);
        free(c->w[i].touched_e);
        free(c->w[i].fis_buf);
        free(c->w[i].fissions);
        free(c->w[i].present);
        free(c->w[i].job.slot);
    }
    free(c->w);
    rw_ftree_free(c->ft);
    pet_table_free(c->pet);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- states */

xs_state *xs_root_new(xs_ctx *c, const ir_graph *g, const int *order, ir_diag *d) {
    if (ctx_scratch(c, d) != IR_OK) return NULL;
    int nft = c->ft ? c->ft->n : 0;
    xs_state *s = calloc(1, sizeof *s);
    xs_mat *m = calloc(1, sizeof *m);
    ir_graph *gc = ir_graph_clone(g);
    if (!s || !m || !gc) goto nomem;
    atomic_init(&m->refs, 1);
    if (!(m->gb = graph_wrap(gc))) goto nomem;
    gc = NULL;
    m->ge = graph_ref(m->gb);
    m->order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    m->config = nft ? malloc(sizeof(int) * (size_t)nft) : NULL;
    if (!m->order || (nft && !m->config)) goto nomem;
    memcpy(m->order, order, sizeof(int) * (size_t)g->n_nodes);
    for (int i = 0; i < nft; i++) m->config[i] = 1;
    if (!ir_graph_hash_memo(m->ge->g, &m->hm)) goto nomem;
    m->bytes = mat_bytes(m, nft);
    atomic_init(&s->refs, 1);
    s->mat = m; /* pinned: never in the LRU list, so never evicted */
    return s;
nomem:
    ir_graph_free(gc);
    xs_mat_unref(m);
    free(s);
    ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    return NULL;
}

xs_state *xs_state_new(xs_state *parent, const rw_rewrite *r, const xs_eval *ev) {
    xs_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    xs_state_ref(parent);
    s->parent = parent;
    s->rw = *r;
    s->depth = parent->depth + 1;
    s->peak = ev->peak;
    s->lat = ev->lat;
    s->fp = ev->fp;
    return s;
}

void xs_state_ref(xs_state *s) {
    /* relaxed: the caller holds a reference */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

static void lru_unlink(xs_ctx *c, xs_state *s) {
    if (s->lru_prev)
        s->lru_prev->lru_next = s->lru_next;
    else
        c->lru_head = s->lru_next;
    if (s->lru_next)
        s->lru_next->lru_prev = s->lru_prev;
    else
        c->lru_tail = s->lru_prev;
    s->lru_prev = s->lru_next = NULL;
    s->in_lru = false;
}

static void lru_push_front(xs_ctx *c, xs_state *s) {
    s->lru_prev = NULL;
    s->lru_next = c->lru_head;
    if (c->lru_head) c->lru_head->lru_prev = s;
    c->lru_head = s;
    if (!c->lru_tail) c->lru_tail = s;
    s->in_lru = true;
}

void xs_state_unref(xs_ctx *c, xs_state *s) {
    /* iterative: a long chain of ancestors may go at once */
    /* acq_rel: every read of the state through other references happens-before its free */
    while (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&c->mu);
        xs_mat *m = s->mat;
        if (s->in_lru) {
            lru_unlink(c, s);
            c->cache_bytes -= m->bytes;
            c->cache_n--;
        }
        s->mat = NULL;
        pthread_mutex_unlock(&c->mu);
        xs_mat_unref(m);
        xs_state *p = s->parent;
        free(s);
        s = p;
    }
}

/* ---------------------------------------------------------------- the cache */

void xs_cache_put(xs_ctx *c, xs_state *s, xs_mat *m) {
    xs_mat *evicted[16];
    int n_ev = 0;
    pthread_mutex_lock(&c->mu);
    if (!s->mat) {
        s->mat = mat_ref(m);
        lru_push_front(c, s);
        c->cache_bytes += m->bytes;
        c->cache_n++;
        /* at most 16 per call (the next puts continue); s itself, the newest, stays */
        while (c->cache_bytes > c->cache_cap && c->cache_n > 1 && n_ev < 16) {
            xs_state *t = c->lru_tail;
            lru_unlink(c, t);
            c->cache_bytes -= t->mat->bytes;
            c->cache_n--;
            evicted[n_ev++] = t->mat;
            t->mat = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    /* graphs are freed outside the lock */
    for (int i = 0; i < n_ev; i++) xs_mat_unref(evicted[i]);
}

xs_mat *xs_materialize(xs_ctx *c, xs_worker *w, xs_state *s, ir_diag *d) {
    xs_mat *cur = NULL;
    pthread_mutex_lock(&c->mu);
    if (s->mat) {
        cur = mat_ref(s->mat);
        if (s->in_lru) {
            lru_unlink(c, s);
            lru_push_front(c, s);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (cur) {
        w->hits++;
        return cur;
    }
    w->misses++;
    double t0 = ir_now_seconds(), saved[XS_PHASE_COUNT];
    memcpy(saved, w->phase, sizeof saved);
    /* the path from s up to its nearest ancestor with a materialization (the pinned root at
     * worst); the states on it stay alive through s's references */
    xs_state **path = malloc(sizeof *path * ((size_t)s->depth + 1));
    if (!path) {
        ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (xs_state *a = s; a; a = a->parent) {
        if (a->mat) {
            cur = mat_ref(a->mat);
            if (a->in_lru) {
                lru_unlink(c, a);
                lru_push_front(c, a);
            }
            break;
        }
        path[n++] = a;
    }
    pthread_mutex_unlock(&c->mu);
    for (int i = n - 1; i >= 0 && cur; i--) {
        xs_mat *next = NULL;
        xs_eval ev;
        ir_status st = xs_derive(c, w, cur, &path[i]->rw, &next, &ev, d);
        xs_mat_unref(cur);
        cur = NULL;
        if (st != IR_OK) break;
        w->replay_steps++;
        if (ev.fp != path[i]->fp || ev.peak != path[i]->peak || ev.lat != path[i]->lat)
            /* relaxed: a counter read after the workers are joined */
            atomic_fetch_add_explicit(&c->mismatches, 1, memory_order_relaxed);
        xs_cache_put(c, path[i], next);
        cur = next;
    }
    free(path);
    /* the replay's own rewrite/schedule/... time is charged to the replay phase alone */
    memcpy(w->phase, saved, sizeof saved);
    w->phase[XS_PHASE_REPLAY] += ir_now_seconds() - t0;
    return cur;
}

/* ---------------------------------------------------------------- deriving a child */

/* new_order (b->n_nodes entries) = old_order of a carried over by node id, when a and b have
 * the same node ids; false otherwise. */
static bool same_order(const ir_graph *a, const int *old_order, const ir_graph *b, int *new_order) {
    if (a->n_nodes != b->n_nodes) return false;
    uint32_t hi = 0;
    for (int i = 0; i < b->n_nodes; i++) hi = b->nodes[i].id > hi ? b->nodes[i].id : hi;
    int *at = malloc(sizeof(int) * ((size_t)hi + 1));
    if (!at) return false;
    for (uint32_t k = 0; k <= hi; k++) at[k] = -1;
    for (int i = 0; i < b->n_nodes; i++) at[b->nodes[i].id] = i;
    bool ok = true;
    for (int s = 0; s < a->n_nodes && ok; s++) {
        uint32_t id = a->nodes[old_order[s]].id;
        ok = id <= hi && at[id] >= 0;
        if (ok) new_order[s] = at[id];
    }
    free(at);
    return ok;
}

static bool has_swaps(const ir_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_Store || g->nodes[i].op == IR_OP_Load) return true;
    return false;
}

ir_status xs_evaluate(const xs_ctx *c, const ir_graph *g, int *order, size_t *peak, double *lat,
                      ir_diag *d) {
    ir_status st;
    if (has_swaps(g) && (st = sched_place_swaps(g, order, c->o->cost, order, d)) != IR_OK)
        return st;
    sched_sim sim = {0};
    if ((st = sched_simulate(g, order, c->o->cost, &sim, d)) != IR_OK) return st;
    *peak = sim.peak_device_bytes;
    *lat = sim.latency_s;
    sched_sim_free(&sim);
    return IR_OK;
}

static bool in_sorted(const uint32_t *a, int n, uint32_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == x;
}

/* Appends to out[*n..cap) the ids of sorted a and b: all of them (both = true) or those in
 * exactly one (the symmetric difference). */
static void merge_ids(const uint32_t *a, int na, const uint32_t *b, int nb, bool both,
                      uint32_t *out, int *n, int cap) {
    int i = 0, j = 0;
    while ((i < na || j < nb) && *n < cap) {
        if (j >= nb || (i < na && a[i] < b[j])) {
            out[(*n)++] = a[i++];
        } else if (i >= na || b[j] < a[i]) {
            out[(*n)++] = b[j++];
        } else {
            if (both) out[(*n)++] = a[i];
            i++, j++;
        }
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* m->ge and m->fis from m->gb and the n enabled fissions in w->fissions. Each S is taken with
 * its convex closure in G_b (rw_fission_closure), so what a remat put inside a region is split
 * with it. rw_fission_apply checks each fission on G_b (S was found on the start graph;
 * rewrites since may have made it invalid there) and fails when one does not hold. */
static ir_status apply_fissions(xs_worker *w, xs_mat *m, int n, ir_diag *d) {
    const ir_graph *gb = m->gb->g;
    ir_graph *ge = NULL;
    uint32_t **closed = calloc((size_t)n + 1, sizeof *closed);
    ir_status st = IR_OK;
    int nt = 0;
    if (!closed) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        int len = rw_fission_closure(gb, &w->fissions[k], &closed[k]);
        if (len < 0) {
            st = ir_diag_set(d, IR_ERR_INVALID, "fission %d: S is not in the graph", k);
            goto out;
        }
        w->fissions[k].ids = closed[k]; /* the F-Tree's S stays as it is */
        w->fissions[k].n_ids = len;
    }
    /* G_b with its next id rounded up: a shallow copy of the struct, which rw_fission_apply
     * only reads (it clones it), so G_b is not copied twice */
    ir_graph based = *gb;
    based.next_node_id = fission_base(gb->next_node_id);
    if (!(ge = rw_fission_apply(&based, w->fissions, n, w->fis_buf, &nt, d))) {
        st = IR_ERR_INVALID;
        goto out;
    }
    if (!(m->ge = graph_wrap(ge))) goto nomem;
    ge = NULL;
    if (!(m->fis = malloc(sizeof(uint32_t) * ((size_t)nt + 1)))) goto nomem;
    memcpy(m->fis, w->fis_buf, sizeof(uint32_t) * (size_t)nt);
    qsort(m->fis, (size_t)nt, sizeof *m->fis, cmp_u32);
    m->n_fis = nt;
    goto out;
nomem:
    st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
out:
    ir_graph_free(ge);
    for (int k = 0; k < n; k++) free(closed[k]);
    free(closed);
    return st;
}

/* m->ge and m->fis of a child of p made by a G_b rewrite r (m->gb is p's G_b rewritten, r having
 * touched touched[0..nt) there): r carried over to p's G_e (rw_apply_one_copy) instead of every
 * enabled fission re-applied to m's G_b (apply_fissions: per fission a D-graph, an analysis, a
 * split and two sorts of the whole graph; 40 % of a child's time on the GPT-Neo-1.3B-shaped
 * training graph, where nearly every remat, swap and substitution child has a fission enabled).
 * The fission ids stay p's: m->fis is p's less the nodes r removed, plus, inside a region, the
 * nodes it added (the convex closure that apply_fissions would take holds them). inside: some
 * node r touched is in p's regions. IR_ERR_INVALID where rw_apply_one_copy refuses or the
 * child's G_b ids reach the fission base (the fission ids would move): apply_fissions then. */
static ir_status derive_ge_direct(xs_worker *w, const xs_mat *p, xs_mat *m, const rw_rewrite *r,
                                  const uint32_t *touched, int nt, bool inside, ir_diag *d) {
    const ir_graph *pb = p->gb->g, *nb = m->gb->g;
    uint32_t base = fission_base(pb->next_node_id);
    if (fission_base(nb->next_node_id) != base) return IR_ERR_INVALID;
    int ne = 0;
    ir_status st;
    ir_diag quiet = {{0}};
    ir_graph *ge = rw_apply_one_copy(p->ge->g, pb->next_node_id, nb->next_node_id, base, r, touched,
                                     nt, w->touched_e, &ne, &st, &quiet);
    if (!ge) return st == IR_ERR_NOMEM ? ir_diag_set(d, st, "out of memory") : IR_ERR_INVALID;
    if (!(m->ge = graph_wrap(ge))) {
        ir_graph_free(ge);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    /* which touched ids are left in G_e (w->touched_e, sorted, is the same set as touched) */
    uint32_t *ids = w->touched_e;
    qsort(ids, (size_t)ne, sizeof *ids, cmp_u32);
    bool left[RW_MAX_TOUCHED] = {false};
    for (int i = 0; i < ge->n_nodes; i++) {
        uint32_t id = ge->nodes[i].id;
        int lo = 0, hi = ne;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (ids[mid] < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < ne && ids[lo] == id) left[lo] = true;
    }
    if (!(m->fis = malloc(sizeof(uint32_t) * ((size_t)p->n_fis + (size_t)ne + 1))))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0, j = 0; i < p->n_fis; i++) {
        uint32_t id = p->fis[i];
        while (j < ne && ids[j] < id) j++;
        if (j == ne || ids[j] != id || left[j]) m->fis[n++] = id;
    }
    for (int j = 0; j < ne && inside; j++)
        if (ids[j] >= pb->next_node_id && left[j]) m->fis[n++] = ids[j];
    qsort(m->fis, (size_t)n, sizeof *m->fis, cmp_u32);
    m->n_fis = n;
    return IR_OK;
}

/* ---------------------------------------------------------------- PET's weight pre-processing */

/* PET's pre-processing of weights (§6.3) after pet_apply: the nodes it added (ids from first_id
 * on) that read weights only (a Concat of two convolutions' weights, a Pad of a kernel) are
 * computed once, as pet_gen_cost assumed when it ranked the candidate. Only on an inference
 * graph's initializers (weights without values are graph inputs, which stay inputs). The folded
 * nodes' ids leave touched[0..*nt) (they exist in neither graph); their readers, added by the
 * same rewrite, are in it already. */
static ir_status precompute_weights(ir_graph *g, uint32_t first_id, uint32_t *touched, int *nt,
                                    ir_diag *d) {
    int folded = 0;
    /* nodes are topological: a node whose inputs an earlier one folded is seen after it */
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].id < first_id) continue;
        bool done;
        ir_status st = ir_fold_weights_node(g, i, &done, d);
        if (st != IR_OK) return st;
        if (!done) continue;
        uint32_t id = g->nodes[i].id;
        int k = 0;
        for (int j = 0; j < *nt; j++)
            if (touched[j] != id) touched[k++] = touched[j];
        *nt = k;
        folded++;
    }
    if (folded) ir_graph_prune(g);
    return IR_OK;
}

bool xs_rule_inside_fission(int kind) {
    /* A remat or swap inside a region is one of its one copy: the new nodes join S
     * (apply_fissions takes S's convex closure) and are split with it, so each part recomputes
     * or swaps its own slice (the simulator replays the parts' swaps on the copy stream). A
     * rewrite that would cross the region's border makes the fission invalid, which
     * rw_fission_apply reports. Substitutions stay outside: they may change what D links. */
    return kind == RW_REMAT || kind == RW_REMAT_CHAIN || kind == RW_DEREMAT || kind == RW_SWAP ||
           kind == RW_DESWAP;
}

/* The child's order. A rewrite of G_b (remat, swap, their inverses, a substitution, a PET
 * mutant) adds nodes that serve the readers it rewired and removes nodes: the parent's order
 * with the new nodes right before their first readers (sched_insert_new) keeps what the search
 * refined and costs O(n), where the DP window around everything it touched (a remat's producer
 * and reader are a forward and a backward apart) would re-order most of a training graph, often
 * worse for the state at hand, at several times the cost (BERT's schedule phase: 5.8 ms a state
 * before, 0.7 ms after). A fission change rebuilds G_e's groups and goes through incremental
 * rescheduling (MAGIS Algorithm 2), as does an insertion that is not a valid order. Either way
 * the groups' nodes that read residents only then move next to their readers
 * (sched_sink_resident_readers). */
static ir_status reschedule(const xs_ctx *c, const xs_mat *p, const rw_rewrite *r,
                            const ir_graph *ge, const uint32_t *touched, int nt, int *order,
                            ir_diag *d) {
    ir_status st = IR_ERR_INVALID;
    if (!rw_is_ftree_kind(r->kind)) st = sched_insert_new(p->ge->g, p->order, ge, order, d);
    if (st != IR_OK) st = sched_incremental(p->ge->g, p->order, ge, touched, nt, &c->dp, order, d);
    return st == IR_OK ? sched_sink_resident_readers(ge, order, d) : st;
}

#ifndef NDEBUG
/* Debug builds check derive_ge_direct against re-applying the fissions to m's G_b: the same
 * graph up to node order (the fingerprint), with the same fission nodes. */
static void check_direct(xs_worker *w, const xs_mat *m, int ne, const rw_rewrite *r) {
    xs_mat full = {.gb = m->gb};
    ir_diag d = {{0}};
    if (apply_fissions(w, &full, ne, &d) != IR_OK) {
        fprintf(stderr,
                "%s of node %u: applied to G_e directly, but its fissions fail on G_b: %s\n",
                rw_kind_name(r->kind), r->node_id, d.msg);
        abort();
    }
    const ir_graph *a = m->ge->g, *b = full.ge->g;
    if (a->n_nodes != b->n_nodes || ir_graph_hash(a) != ir_graph_hash(b) ||
        m->n_fis != full.n_fis || memcmp(m->fis, full.fis, sizeof(uint32_t) * m->n_fis) != 0) {
        fprintf(stderr,
                "%s of node %u: G_e rewritten directly differs from its fissions re-applied "
                "(%d and %d nodes, %d and %d fission ids)\n",
                rw_kind_name(r->kind), r->node_id, a->n_nodes, b->n_nodes, m->n_fis, full.n_fis);
        abort();
    }
    graph_unref(full.ge);
    free(full.fis);
}
#endif

ir_status xs_derive(xs_ctx *c, xs_worker *w, const xs_mat *p, const rw_rewrite *r, xs_mat **out,
                    xs_eval *ev, ir_diag *d) {
    *out = NULL;
    int nft = c->ft ? c->ft->n : 0;
    bool ft_kind = rw_is_ftree_kind(r->kind);
    ir_status st = IR_OK;
    xs_mat *m = calloc(1, sizeof *m);
    if (!m) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    atomic_init(&m->refs, 1);
    int nt = 0;
    double t = ir_now_seconds();
    if (!ft_kind) {
        ir_graph *nb = NULL;
        if (r->kind != RW_PET) {
            nb = rw_apply(p->gb->g, r, w->touched, &nt, &st, d);
        } else if (!c->pet || r->node_id >= (uint32_t)c->pet->n) {
            st = ir_diag_set(d, IR_ERR_INVALID, "pet candidate %u: the table has %d", r->node_id,
                             c->pet ? c->pet->n : 0);
        } else {
            /* a G_b rewrite like the others: pet_apply names the nodes it removed and added */
            nb = pet_apply(p->gb->g, c->pet, (int)r->node_id, w->touched, &nt, &st, d);
            if (nb && (st = precompute_weights(nb, p->gb->g->next_node_id, w->touched, &nt, d)) !=
                          IR_OK) {
                ir_graph_free(nb);
                nb = NULL;
            }
        }
        if (!nb) goto fail;
        for (int i = 0; i < nt && !xs_rule_inside_fission(r->kind); i++)
            if (in_sorted(p->fis, p->n_fis, w->touched[i])) {
                /* MAGIS: the rules do not transform sub-graphs crossing an F-Trans region */
                ir_graph_free(nb);
                st = ir_diag_set(d, IR_ERR_INVALID, "%s of node %u touches node %u of a fission",
                                 rw_kind_name(r->kind), r->node_id, w->touched[i]);
                goto fail;
            }
        if (!(m->gb = graph_wrap(nb))) {
            ir_graph_free(nb);
            goto nomem;
        }
    } else if (!nft) {
        st = ir_diag_set(d, IR_ERR_INVALID, "%s of F-Tree node %u: no F-Tree",
                         rw_kind_name(r->kind), r->node_id);
        goto fail;
    } else {
        m->gb = graph_ref(p->gb);
    }
    if (nft) {
        if (!(m->config = malloc(sizeof(int) * (size_t)nft))) goto nomem;
        if (!ft_kind) {
            memcpy(m->config, p->config, sizeof(int) * (size_t)nft);
        } else if (!rw_ftree_mutate(c->ft, p->config, r, m->config)) {
            st = ir_diag_set(d, IR_ERR_INVALID, "%s of F-Tree node %u does not apply",
                             rw_kind_name(r->kind), r->node_id);
            goto fail;
        }
    }
    int ne = nft ? rw_ftree_enabled(c->ft, m->config, w->fissions) : 0;
    bool inside = false, direct = false;
    for (int i = 0; i < nt && !ft_kind && !inside; i++)
        inside = in_sorted(p->fis, p->n_fis, w->touched[i]);
    if (ne == 0) {
        m->ge = graph_ref(m->gb);
    } else if (!ft_kind && r->kind != RW_PET &&
               (st = derive_ge_direct(w, p, m, r, w->touched, nt, inside, d)) != IR_ERR_INVALID) {
        if (st != IR_OK) goto fail;
#ifndef NDEBUG
        check_direct(w, m, ne, r);
#endif
        direct = true;
    } else if ((st = apply_fissions(w, m, ne, d)) != IR_OK) {
        goto fail;
    }
    /* a fission change re-schedules around the old and the new groups; a rewrite of G_b around
     * what it touched, plus fission nodes that appeared or went (none unless ids moved). A
     * rewrite inside a region (a remat or swap joining S) whose group was re-materialized
     * counts the group's nodes as touched too: its parts' shapes and borders may change beyond
     * the nodes the rewrite named (ir_graph_hash_update's contract). Carried over to G_e
     * directly, it changed nothing but what it touched. */
    if (!direct)
        merge_ids(p->fis, p->n_fis, m->fis, m->n_fis, ft_kind || inside, w->touched, &nt,
                  XS_TOUCHED_CAP);
    w->phase[XS_PHASE_REWRITE] += ir_now_seconds() - t;

    t = ir_now_seconds();
    const ir_graph *ge = m->ge->g;
    if (!(m->order = malloc(sizeof(int) * ((size_t)ge->n_nodes + 1)))) goto nomem;
    if (r->kind == RW_FT_MUTATE && same_order(p->ge->g, p->order, ge, m->order)) {
        /* a new n leaves the one-copy graph's structure as it was (same nodes, same ids; only
         * the split dimension's length changes), so the parent's order stays valid: re-using it
         * spares re-scheduling the whole group */
        if (has_swaps(ge) &&
            (st = sched_place_swaps(ge, m->order, c->o->cost, m->order, d)) != IR_OK)
            goto fail;
    } else if ((st = reschedule(c, p, r, ge, w->touched, nt, m->order, d)) != IR_OK ||
               (has_swaps(ge) &&
                (st = sched_place_swaps(ge, m->order, c->o->cost, m->order, d)) != IR_OK))
        goto fail;
    w->phase[XS_PHASE_SCHEDULE] += ir_now_seconds() - t;

    t = ir_now_seconds();
    sched_sim sim = {0};
    if ((st = sched_simulate(ge, m->order, c->o->cost, &sim, d)) != IR_OK) goto fail;
    ev->peak = sim.peak_device_bytes;
    ev->lat = sim.latency_s;
    sched_sim_free(&sim);
    w->phase[XS_PHASE_SIMULATE] += ir_now_seconds() - t;

    t = ir_now_seconds();
    /* the touched ids are those the scheduler re-placed: every node the rewrite or a fission
     * change added, removed, rewired or reshaped (ir_graph_hash_update's contract) */
    ev->fp = ir_graph_hash_update(ge, p->ge->g, &p->hm, w->touched, nt, &m->hm);
    if (!ev->fp && !m->hm.x) goto nomem;
#ifndef NDEBUG
    /* debug builds check the contract: an incomplete touched list would make fingerprints
     * depend on the path a state was reached by */
    if (ev->fp != ir_graph_hash(ge)) {
        fprintf(stderr, "%s of node %u: the incremental fingerprint differs from the full one\n",
                rw_kind_name(r->kind), r->node_id);
        abort();
    }
#endif
    w->phase[XS_PHASE_HASH] += ir_now_seconds() - t;
    m->bytes = mat_bytes(m, nft);
    *out = m;
    return IR_OK;
nomem:
    st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
fail:
    xs_mat_unref(m);
    return st;
}
