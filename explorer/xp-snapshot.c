/* xp-snapshot.c - snapshots of the memory optimizer's search (explorer.h, "search snapshots"):
 * taking one from a paused (or joined) pool, checking a decoded one, and rebuilding its state
 * tree to restart a pool from it (resume).
 *
 * Taking: the frontier walk of xp_pool_visit_frontier, then the best, each followed up its
 * ancestors until a state already met; a pointer -> index open-addressing table (grown by
 * doubling, never one allocation per state) makes every state appear once. Sorting by (depth,
 * first appearance) puts parents before children (a parent is one shallower) and is
 * deterministic, so two snapshots of the same one-thread search are byte-equal. Everything is
 * copied out while the workers are paused: states are only guaranteed alive while they hold
 * them (the pool frees expanded states as soon as it resumes).
 *
 * Restoring: every state is rebuilt as parent + rewrite + recorded evaluation, without its
 * materialization; the pool rebuilds each lazily by replay from the root (xs_materialize), which
 * checks the recorded evaluation again (replay_mismatches). Only the best is replayed at once,
 * so that a checkpoint whose best does not rebuild is refused before any work. */
#define _POSIX_C_SOURCE 200809L
#include "explorer-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void xs_snapshot_free(xs_snapshot *s) {
    if (!s) return;
    free(s->states);
    free(s->frontier);
    free(s->fps);
    free(s->worker_seq);
    free(s->worker_rng);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- checking */

static bool finite_nonneg(double x) {
    return isfinite(x) && x >= 0;
}

static ir_status bad(ir_diag *d, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ir_status bad(ir_diag *d, const char *name, const char *fmt, ...) {
    if (d) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
        if (name) ir_diag_prefix(d, name);
    }
    return IR_ERR_PARSE;
}

ir_status xs_snapshot_check(const xs_snapshot *s, const char *name, ir_diag *d) {
    if (!s) return bad(d, name, "search snapshot: none");
    if (s->n_states == 0 || !s->states) return bad(d, name, "search snapshot: no states");
    if (s->n_states > (uint32_t)INT32_MAX)
        return bad(d, name, "search snapshot: %u states, more than an index holds", s->n_states);
    if (s->states[0].parent != -1)
        return bad(d, name, "search snapshot: state 0 (the start state) has parent %d",
                   s->states[0].parent);
    for (uint32_t i = 0; i < s->n_states; i++) {
        const xs_snap_state *x = &s->states[i];
        if (i > 0 && (x->parent < 0 || (uint32_t)x->parent >= i))
            return bad(d, name, "search snapshot: state %u has parent %d, not an earlier state", i,
                       x->parent);
        if (i > 0 && (x->rw.kind < 0 || x->rw.kind >= RW_KIND_COUNT))
            return bad(d, name, "search snapshot: state %u: rewrite kind %d out of range", i,
                       x->rw.kind);
        if (i > 0 && x->rw.kind == RW_SUBST &&
            (x->rw.value < 0 || x->rw.value >= RW_SUBST_RULE_COUNT))
            return bad(d, name, "search snapshot: state %u: substitution rule %d out of range", i,
                       x->rw.value);
        if (!finite_nonneg(x->lat))
            return bad(d, name,
                       "search snapshot: state %u: latency %g is not a finite, "
                       "non-negative number",
                       i, x->lat);
    }
    if (s->n_workers < 1 || !s->worker_seq || !s->worker_rng)
        return bad(d, name, "search snapshot: %d workers (at least one, with their cursors)",
                   s->n_workers);
    if (s->best < 0 || (uint32_t)s->best >= s->n_states)
        return bad(d, name, "search snapshot: best state %d out of range (%u states)", s->best,
                   s->n_states);
    if (s->n_frontier > 0 && !s->frontier)
        return bad(d, name, "search snapshot: %u frontier entries missing", s->n_frontier);
    if (s->n_fps > 0 && !s->fps)
        return bad(d, name, "search snapshot: %llu fingerprints missing",
                   (unsigned long long)s->n_fps);
    if (!finite_nonneg(s->elapsed_s) || !finite_nonneg(s->eager_lat) ||
        !finite_nonneg(s->start_lat))
        return bad(d, name,
                   "search snapshot: elapsed %g s, eager latency %g s, start latency "
                   "%g s: not all finite, non-negative numbers",
                   s->elapsed_s, s->eager_lat, s->start_lat);
    for (int k = 0; k < XS_PHASE_COUNT; k++)
        if (!finite_nonneg(s->phase_seconds[k]))
            return bad(d, name,
                       "search snapshot: phase %s seconds %g is not a finite, "
                       "non-negative number",
                       xs_phase_name(k), s->phase_seconds[k]);
    /* frontier entries: in range, each state once (a bitmap over the states) */
    if (s->n_frontier == 0) return IR_OK;
    uint8_t *seen = calloc((size_t)s->n_states / 8 + 1, 1);
    if (!seen) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory checking a search snapshot");
    ir_status st = IR_OK;
    for (uint32_t j = 0; j < s->n_frontier && st == IR_OK; j++) {
        const xs_snap_item *it = &s->frontier[j];
        if (it->state < 0 || (uint32_t)it->state >= s->n_states)
            st = bad(d, name, "search snapshot: frontier entry %u: state %d out of range (%u)", j,
                     it->state, s->n_states);
        else if (it->worker < 0 || it->worker >= s->n_workers)
            st = bad(d, name, "search snapshot: frontier entry %u: worker %d out of range (%d)", j,
                     it->worker, s->n_workers);
        else if (seen[it->state / 8] & (1u << (it->state % 8)))
            st = bad(d, name,
                     "search snapshot: frontier entry %u: state %d is in the frontier twice", j,
                     it->state);
        else
            seen[it->state / 8] |= (uint8_t)(1u << (it->state % 8));
    }
    free(seen);
    return st;
}

/* ---------------------------------------------------------------- taking */

/* A state met by the walk, and the pointer -> index table. */
typedef struct walk_node {
    xs_state *s;
    uint32_t first; /* order of first appearance */
} walk_node;

typedef struct walk {
    /* the frontier as visited */
    xs_snap_item *items;
    xs_state **item_state;
    uint32_t n_items, cap_items;
    /* the states met, each once */
    walk_node *nodes;
    uint32_t n_nodes, cap_nodes;
    /* open addressing: keys (NULL: empty) and the index into nodes */
    xs_state **keys;
    uint32_t *vals;
    size_t mask;
    bool nomem;
} walk;

static size_t slot_of(const walk *w, const xs_state *s) {
    uint64_t h = (uint64_t)(uintptr_t)s * UINT64_C(0x9e3779b97f4a7c15);
    size_t i = (size_t)(h >> 20) & w->mask;
    while (w->keys[i] && w->keys[i] != s) i = (i + 1) & w->mask;
    return i;
}

static bool table_grow(walk *w) {
    size_t cap = w->keys ? 2 * (w->mask + 1) : 1024;
    xs_state **ok = w->keys;
    uint32_t *ov = w->vals;
    size_t omask = w->mask;
    w->keys = calloc(cap, sizeof *w->keys);
    w->vals = malloc(cap * sizeof *w->vals);
    if (!w->keys || !w->vals) {
        free(w->keys);
        free(w->vals);
        w->keys = ok;
        w->vals = ov;
        return false;
    }
    w->mask = cap - 1;
    for (size_t i = 0; ok && i <= omask; i++)
        if (ok[i]) {
            size_t k = slot_of(w, ok[i]);
            w->keys[k] = ok[i];
            w->vals[k] = ov[i];
        }
    free(ok);
    free(ov);
    return true;
}

/* Adds s and its ancestors not met yet. */
static void meet(walk *w, xs_state *s) {
    for (; s && !w->nomem; s = s->parent) {
        if (2 * ((size_t)w->n_nodes + 1) > (w->keys ? w->mask + 1 : 0) && !table_grow(w)) {
            w->nomem = true;
            return;
        }
        size_t k = slot_of(w, s);
        if (w->keys[k]) return; /* met, and so were its ancestors */
        if (w->n_nodes == w->cap_nodes) {
            uint32_t cap = w->cap_nodes ? 2 * w->cap_nodes : 256;
            walk_node *n = realloc(w->nodes, sizeof *n * cap);
            if (!n) {
                w->nomem = true;
                return;
            }
            w->nodes = n;
            w->cap_nodes = cap;
        }
        w->keys[k] = s;
        w->vals[k] = w->n_nodes;
        w->nodes[w->n_nodes] = (walk_node){.s = s, .first = w->n_nodes};
        w->n_nodes++;
    }
}

static void visit_item(void *arg, const xp_item *it) {
    walk *w = arg;
    if (w->nomem) return;
    if (w->n_items == w->cap_items) {
        uint32_t cap = w->cap_items ? 2 * w->cap_items : 256;
        xs_snap_item *a = realloc(w->items, sizeof *a * cap);
        if (a) w->items = a;
        xs_state **b = realloc(w->item_state, sizeof *b * cap);
        if (b) w->item_state = b;
        if (!a || !b) {
            w->nomem = true;
            return;
        }
        w->cap_items = cap;
    }
    w->items[w->n_items] = (xs_snap_item){
        .state = -1, .seq = it->seq, .worker = it->worker, .unfinished = it->unfinished};
    w->item_state[w->n_items++] = it->state;
}

static int cmp_node(const void *pa, const void *pb) {
    const walk_node *a = pa, *b = pb;
    if (a->s->depth != b->s->depth) return a->s->depth < b->s->depth ? -1 : 1;
    return (a->first > b->first) - (a->first < b->first);
}

static int32_t index_of(const walk *w, const xs_state *s) {
    return (int32_t)w->vals[slot_of(w, s)];
}

ir_status xs_snapshot_take(xs_ctx *c, const xp_pool *p, const ir_graph *g, const xs_result *r,
                           xs_snapshot *out, ir_diag *d) {
    memset(out, 0, sizeof *out);
    const xs_snapshot *base = c->o->resume;
    walk w = {0};
    ir_status st = IR_OK;
    xp_pool_visit_frontier(p, visit_item, &w);
    for (uint32_t j = 0; j < w.n_items; j++) meet(&w, w.item_state[j]);
    xs_state *best = (xs_state *)xp_pool_best(p, NULL);
    meet(&w, best);
    if (w.nomem) goto nomem;
    qsort(w.nodes, w.n_nodes, sizeof *w.nodes, cmp_node);
    for (uint32_t i = 0; i < w.n_nodes; i++) w.vals[slot_of(&w, w.nodes[i].s)] = i;

    out->n_states = w.n_nodes;
    out->states = malloc(sizeof *out->states * w.n_nodes);
    out->n_frontier = w.n_items;
    out->frontier = w.n_items ? malloc(sizeof *out->frontier * w.n_items) : NULL;
    xp_pool_stats ps;
    xp_pool_get_stats(p, &ps, NULL, 0);
    out->n_workers = ps.threads;
    out->worker_seq = malloc(sizeof(uint64_t) * (size_t)ps.threads);
    out->worker_rng = malloc(sizeof(uint64_t) * (size_t)ps.threads);
    size_t n_fps = xp_pool_fp_count(p);
    out->fps = malloc(sizeof(uint64_t) * (n_fps + 1));
    if (!out->states || (w.n_items && !out->frontier) || !out->worker_seq || !out->worker_rng ||
        !out->fps)
        goto nomem;
    for (uint32_t i = 0; i < w.n_nodes; i++) {
        const xs_state *s = w.nodes[i].s;
        xs_snap_state *x = &out->states[i];
        *x = (xs_snap_state){.parent = s->parent ? index_of(&w, s->parent) : -1,
                             .peak = s->peak,
                             .lat = s->lat,
                             .fp = s->fp};
        if (s->parent) x->rw = s->rw;
    }
    for (uint32_t j = 0; j < w.n_items; j++) {
        out->frontier[j] = w.items[j];
        out->frontier[j].state = index_of(&w, w.item_state[j]);
    }
    out->best = index_of(&w, best);
    size_t got = xp_pool_fp_copy(p, out->fps, n_fps);
    out->n_fps = got < n_fps ? got : n_fps; /* exact while paused or joined */
    for (int i = 0; i < ps.threads; i++)
        xp_pool_worker_cursor(p, i, &out->worker_seq[i], &out->worker_rng[i]);

    /* counters: the pool's include the earlier runs' (worker 0 started from them); the search's
     * own are this run's workers' plus the snapshot resumed from. The workers are paused or
     * joined, which orders their plain writes before these reads. */
    out->counters = ps.total;
    for (int i = 0; i < c->n_w; i++) {
        const xs_worker *x = &c->w[i];
        out->cache_hits += x->hits;
        out->cache_misses += x->misses;
        out->replay_steps += x->replay_steps;
        out->failed_children += x->failed;
        for (int k = 0; k < XS_PHASE_COUNT; k++) out->phase_seconds[k] += x->phase[k];
    }
    /* relaxed: a counter; the pause or join orders the workers' increments before this */
    out->replay_mismatches = atomic_load_explicit(&c->mismatches, memory_order_relaxed);
    out->elapsed_s = ps.seconds;
    if (base) {
        out->cache_hits += base->cache_hits;
        out->cache_misses += base->cache_misses;
        out->replay_steps += base->replay_steps;
        out->replay_mismatches += base->replay_mismatches;
        out->failed_children += base->failed_children;
        for (int k = 0; k < XS_PHASE_COUNT; k++) out->phase_seconds[k] += base->phase_seconds[k];
        out->elapsed_s += base->elapsed_s;
    }
    out->resumes = r->resumes;
    out->start_nodes = (uint32_t)g->n_nodes;
    out->eager_peak = r->eager_peak_bytes;
    out->eager_lat = r->eager_latency_s;
    out->start_peak = r->start_peak_bytes;
    out->start_lat = r->start_latency_s;
    goto out;
nomem:
    xs_snapshot_free(out);
    st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory taking a search snapshot");
out:
    free(w.items);
    free(w.item_state);
    free(w.nodes);
    free(w.keys);
    free(w.vals);
    return st;
}

/* ---------------------------------------------------------------- restoring */

ir_status xs_snapshot_match(const xs_snapshot *s, const ir_graph *g, const xs_ctx *c,
                            const xs_result *r, ir_diag *d) {
    const xs_state *root = c->root;
    const char *what = NULL;
    if (s->start_nodes != (uint32_t)g->n_nodes)
        what = "node count";
    else if (s->eager_peak != r->eager_peak_bytes || s->eager_lat != r->eager_latency_s)
        what = "eager-order peak or latency";
    else if (s->start_peak != r->start_peak_bytes || s->start_lat != r->start_latency_s)
        what = "start state's peak or latency";
    else if (s->states[0].fp != root->fp)
        what = "start state's fingerprint";
    if (!what) return IR_OK;
    return ir_diag_set(d, IR_ERR_INVALID,
                       "the model or its options do not rebuild the checkpointed graph (%s "
                       "differs: %u nodes, peak %llu B, latency %.9g s checkpointed; %d nodes, "
                       "peak %zu B, latency %.9g s rebuilt)",
                       what, s->start_nodes, (unsigned long long)s->start_peak, s->start_lat,
                       g->n_nodes, r->start_peak_bytes, r->start_latency_s);
}

ir_status xs_snapshot_restore(xs_ctx *c, xp_pool *p, const xs_snapshot *s, ir_diag *d) {
    ir_status st = IR_OK;
    uint32_t n = s->n_states, built_n = 0;
    xs_state **built = malloc(sizeof *built * n);
    int32_t *at = malloc(sizeof *at * n); /* a state's position in the frontier, or -1 */
    xp_item *items = malloc(sizeof *items * ((size_t)s->n_frontier + 1));
    if (!built || !at || !items) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory restoring a search snapshot");
        goto out;
    }
    built[built_n++] = c->root; /* its reference is ours now, dropped below */
    c->root = NULL;
    for (uint32_t i = 1; i < n; i++) {
        const xs_snap_state *x = &s->states[i];
        int nft = c->ft ? c->ft->n : 0;
        if (rw_is_ftree_kind(x->rw.kind) && x->rw.node_id >= (uint32_t)nft) {
            st = ir_diag_set(d, IR_ERR_INVALID,
                             "search snapshot: state %u: %s of F-Tree node %u, the tree has %d", i,
                             rw_kind_name(x->rw.kind), x->rw.node_id, nft);
            goto out;
        }
        xs_eval ev = {.peak = (size_t)x->peak, .lat = x->lat, .fp = x->fp};
        if (!(built[built_n] = xs_state_new(built[x->parent], &x->rw, &ev))) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory restoring a search snapshot");
            goto out;
        }
        built_n++;
    }
    /* the best is rebuilt now, on the calling thread's slot: a checkpoint whose best does not
     * replay to its recorded evaluation is refused before the search spends anything */
    xs_state *best = built[s->best];
    uint64_t before = atomic_load_explicit(&c->mismatches, memory_order_relaxed); /* one thread */
    ir_diag md = {{0}};
    xs_mat *bm = xs_materialize(c, &c->w[c->n_w - 1], best, &md);
    xs_mat_unref(bm);
    if (!bm || atomic_load_explicit(&c->mismatches, memory_order_relaxed) != before) {
        st = ir_diag_set(d, IR_ERR_INVALID,
                         "the checkpoint's best state (state %d, %d rewrites from the start) "
                         "does not rebuild to its recorded figures%s%s",
                         s->best, best->depth, bm ? "" : ": ", bm ? "" : md.msg);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) at[i] = -1;
    for (uint32_t j = 0; j < s->n_frontier; j++) {
        const xs_snap_item *it = &s->frontier[j];
        xs_state *x = built[it->state];
        xs_state_ref(x); /* the pool's */
        at[it->state] = (int32_t)j;
        items[j] = (xp_item){.state = x,
                             .key = xs_key(c, x->peak, x->lat),
                             .fp = x->fp,
                             .seq = it->seq,
                             .worker = it->worker,
                             .unfinished = it->unfinished};
    }
    xp_restore rr = {.items = items,
                     .n_items = s->n_frontier,
                     .best_item = at[s->best],
                     .best_fp = best->fp,
                     .best_key = xs_key(c, best->peak, best->lat),
                     .fps = s->fps,
                     .n_fps = (size_t)s->n_fps,
                     .seq = s->worker_seq,
                     .rng = s->worker_rng,
                     .n_cursors = s->n_workers,
                     .base = s->counters,
                     .elapsed_s = s->elapsed_s};
    if (rr.best_item < 0) {
        xs_state_ref(best); /* the pool's */
        rr.best_state = best;
    }
    if (!xp_pool_start_restored(p, &rr))
        st = ir_diag_set(d, IR_ERR_INTERNAL, "cannot start the search threads");
out:
    /* our references: what the pool does not hold goes (a snapshot lists nothing else, but a
     * decoded one might) */
    for (uint32_t i = built_n; i-- > 0;) xs_state_unref(c, built[i]);
    free(built);
    free(at);
    free(items);
    return st;
}
