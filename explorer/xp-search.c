/* xp-search.c - xs_search, the memory optimizer's search (MAGIS section 6.2, Algorithm 3) on the
 * best-first pool: the mode's BetterThan, the start state, the F-Tree and the PET table, the
 * expansion of a state into its children (remat/swap at G_e's hot-spots, substitutions and PET
 * candidates on G_b, F-Tree mutations), the calling thread's progress, interrupt and checkpoint
 * loop, resuming from a snapshot, the result (the best state's graph, chain and statistics, the
 * PET candidates applied) and xs_replay. States and their materializations: xp-state.c;
 * snapshots: xp-snapshot.c. See explorer.h. */
#define _POSIX_C_SOURCE 200809L
#include "explorer-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

const char *xs_phase_name(int phase) {
    static const char *const names[XS_PHASE_COUNT] = {"candidates", "rewrite", "schedule",
                                                      "simulate",   "hash",    "replay"};
    return phase >= 0 && phase < XS_PHASE_COUNT ? names[phase] : "?";
}

/* BetterThan on keys (k[0] the limited figure): (max(a0, limit), a1) < (max(delta b0, limit),
 * delta b1). With a target for the second figure (xs_options.target; 0 for none), the second
 * comparison is on (max(a1, target), a0): among states that meet both, the first figure decides. */
static bool key_better(double limit, double target, const xp_key *a, const xp_key *b,
                       double delta) {
    double x0 = fmax(a->k[0], limit), y0 = fmax(delta * b->k[0], limit);
    if (x0 != y0) return x0 < y0;
    double x1 = fmax(a->k[1], target), y1 = fmax(delta * b->k[1], target);
    /* equal and above the target: no tie-break, as without one (a latency tie-break among
     * states of one peak sends a latency-bounded search along cheap rewrites that free
     * nothing: ResNet-50, bound 1.144, 1,500 states: 0.448 of the eager peak against 0.356) */
    if (x1 != y1 || target <= 0 || x1 > target) return x1 < y1;
    return a->k[0] < delta * b->k[0];
}

bool xs_better(int mode, double limit, double target, size_t a_mem, double a_lat, size_t b_mem,
               double b_lat, double delta) {
    xp_key a = xs_mode_key(mode, a_mem, a_lat), b = xs_mode_key(mode, b_mem, b_lat);
    return key_better(limit, target, &a, &b, delta);
}

static xp_key key_of(const xs_ctx *c, size_t peak, double lat) {
    return xs_key(c, peak, lat);
}

bool xs_key_better(const xs_ctx *c, const xp_key *a, const xp_key *b, double delta) {
    return key_better(c->limit, c->o->target, a, b, delta);
}

static bool cb_better(void *ctx, const xp_key *a, const xp_key *b, double delta) {
    const xs_ctx *c = ctx;
    return key_better(c->limit, c->o->target, a, b, delta);
}

static void cb_free(void *ctx, void *state) {
    xs_state_unref(ctx, state);
}

static bool family_enabled(unsigned rules, int kind) {
    switch (kind) {
    case RW_REMAT:
    case RW_DEREMAT: return (rules & XS_RULE_REMAT) != 0;
    case RW_REMAT_CHAIN: return (rules & XS_RULE_CHAIN) != 0;
    case RW_SWAP:
    case RW_DESWAP: return (rules & XS_RULE_SWAP) != 0;
    case RW_SUBST: return (rules & XS_RULE_SUBST) != 0;
    case RW_FT_ENABLE:
    case RW_FT_LIFT:
    case RW_FT_DISABLE:
    case RW_FT_MUTATE: return (rules & XS_RULE_FISSION) != 0;
    case RW_PET: return (rules & XS_RULE_PET) != 0;
    }
    return false;
}

static bool id_in(const xs_mat *m, uint32_t id) {
    const uint32_t *a = m->fis;
    int lo = 0, hi = m->n_fis;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n_fis && a[lo] == id;
}

/* A cheap filter before applying: the named nodes of a G_b rewrite must lie outside every
 * enabled fission (xs_derive checks every node it touched afterwards). */
static bool crosses_fission(const xs_mat *m, const rw_rewrite *r) {
    if (!m->n_fis) return false;
    if (xs_rule_inside_fission(r->kind))
        /* only the fission ops themselves are out of reach (they are not in G_b) */
        return r->node_id >= m->gb->g->next_node_id ||
               (r->user_id && r->user_id >= m->gb->g->next_node_id);
    if (id_in(m, r->node_id)) return true;
    bool has_user = r->kind != RW_SUBST || r->user_id != 0;
    return has_user && id_in(m, r->user_id);
}

/* w->present grown to hold need bytes, cleared; NULL when out of memory. */
static unsigned char *id_mask(xs_worker *w, size_t need) {
    if (need > w->present_cap) {
        /* grown rarely: ids grow by a few per rewrite, so twice what is needed lasts */
        unsigned char *p = realloc(w->present, 2 * need);
        if (!p) return NULL;
        w->present = p;
        w->present_cap = 2 * need;
    }
    memset(w->present, 0, need);
    return w->present;
}

/* Keeps the substitutions in cand[0..n) that stay clear of m's fissions and returns how many.
 * A substitution touches the nodes it matches and, through the values it re-produces or
 * removes, their producers and readers; one that reaches a fission's node is refused by
 * xs_derive (MAGIS's rules do not cross an F-Trans region), but only after a clone of G_b and
 * the whole edit. On a fission of a training graph that can be most of the children (BERT's
 * layout-elim of the backward's weight transposes, before the autodiff read weights through
 * transposed views: 21,514 refused beside 27,320 evaluated in a minute), so candidates whose node
 * is a fission node or a neighbour of one are dropped here. That may drop one that would have
 * stayed clear (a merge whose outputs a region reads keeps them); a rename that rewires two steps
 * away is still caught by xs_derive. */
static int subst_clear_of_fission(const xs_mat *m, xs_worker *w, rw_rewrite *cand, int n) {
    if (!m->n_fis || n == 0) return n;
    const ir_graph *g = m->gb->g;
    size_t need = (size_t)g->next_node_id + 1;
    unsigned char *near = id_mask(w, need);
    if (!near) return n; /* xs_derive still refuses what crosses */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool in = id_in(m, nd->id);
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k], p = v >= 0 ? g->values[v].producer : -1;
            if (p < 0) continue;
            if (in) near[g->nodes[p].id] = 1;               /* it feeds the region */
            if (id_in(m, g->nodes[p].id)) near[nd->id] = 1; /* the region feeds it */
        }
        if (in) near[nd->id] = 1;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const rw_rewrite *r = &cand[i];
        bool crosses = r->node_id >= need || near[r->node_id] ||
                       (r->user_id && (r->user_id >= need || near[r->user_id]));
        if (!crosses) cand[kept++] = *r;
    }
    return kept;
}

typedef struct ranked {
    bool relieves; /* takes bytes off the peak moment (peak_relief) */
    size_t bytes;  /* those bytes, else what the rewrite moves or recomputes */
    int at;        /* its index in the candidate list */
} ranked;

static int cmp_rank(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->relieves != b->relieves) return a->relieves ? -1 : 1;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return (a->at > b->at) - (a->at < b->at); /* stable: deterministic */
}

static int cmp_at(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    return (a->at > b->at) - (a->at < b->at);
}

/* Does a remat or swap of value v for user ib free v at the moment the peak holds it? That
 * moment P is the peak step, or, when the peak is a fission group's replay, the step of the
 * scheduled copy where the replay peaks for the group's own values (sched_memory). It does when
 * v exists at P and ib is v's first reader after P: the rewrite serves ib and the late readers
 * (rules.h), so nothing holds v across P. A hot-spot read again right after the peak (a forward
 * activation whose next layer runs there) is not relieved by any single rewrite of it. A swap
 * also needs the compute between P and ib to cover its Load (t_at: compute seconds before each
 * step), or the Load would be on the device at P already, or stall ib.
 *
 * Returns the bytes the rewrite takes off P, 0 when it relieves nothing. A remat's recompute
 * reads its inputs (rw_remat_reads) at ib: each one not already live across P becomes so, and
 * is subtracted. Recomputing a Softmax from a Div output read by nothing else (BERT's
 * attention probabilities) moves 50 MB from one value to another and frees nothing; ranked by
 * the value's bytes it took a child slot from a swap that would. */
static size_t peak_relief(const ir_graph *g, const sched_memory *m, const double *t_at,
                          prof_model *cost, const rw_rewrite *r, int v, int ib) {
    int P = m->peak_step;
    if (P < 0) return 0;
    const sched_lifetime *lt = &m->lifetimes[v];
    if (m->replay_peak_step >= 0 && lt->def_step >= P) P = m->replay_peak_step;
    int sb = sched_node_step(g, m, ib);
    if (lt->def_step < 0 || lt->def_step > P || sb <= P) return 0;
    for (int j = 0; j < g->n_nodes; j++) {
        if (j == ib) continue;
        const ir_node *n = &g->nodes[j];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == v) {
                int s = sched_node_step(g, m, j);
                if (s >= P && s < sb) return 0;
                break;
            }
    }
    size_t freed = ir_value_bytes(&g->values[v]);
    if (r->kind == RW_SWAP)
        return t_at[sb] - t_at[P + 1] >= prof_transfer_seconds(cost, freed) ? freed : 0;
    int reads[XS_REMAT_READS], nr = rw_remat_reads(g, r, reads, XS_REMAT_READS);
    if (nr < 0) return 0;
    size_t extended = 0;
    for (int k = 0; k < nr; k++) {
        const sched_lifetime *lx = &m->lifetimes[reads[k]];
        if (lx->def_step < 0 || (lx->def_step <= P && lx->last_step > P)) continue;
        extended += sched_value_device_bytes(g, reads[k]);
    }
    return freed > extended ? freed - extended : 0;
}

/* Keeps the XS_MAX_SCHED_CHILDREN of the n schedule rewrites in cand that relieve the peak
 * (peak_relief), the ones taking the most bytes off the peak first, then the others by the bytes
 * they move or recompute (the value a remat or swap names, a node's output 0 for the inverses),
 * their order among themselves kept; returns the count. */
static int keep_best(const ir_graph *g, const int *order, const sched_memory *m, prof_model *cost,
                     rw_rewrite *cand, int n) {
    if (n <= XS_MAX_SCHED_CHILDREN) return n;
    uint32_t hi = 0;
    for (int i = 0; i < g->n_nodes; i++) hi = g->nodes[i].id > hi ? g->nodes[i].id : hi;
    int *index = malloc(sizeof(int) * ((size_t)hi + 1));
    ranked *rk = malloc(sizeof(ranked) * (size_t)n);
    double *t_at = malloc(sizeof(double) * ((size_t)g->n_nodes + 1));
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!index || !rk || !t_at || !root) {
        free(index);
        free(rk);
        free(t_at);
        free(root);
        return XS_MAX_SCHED_CHILDREN;
    }
    ir_graph_buffer_roots(g, root);
    t_at[0] = 0.0;
    for (int s = 0; s < g->n_nodes; s++) {
        const ir_node *x = &g->nodes[order[s]];
        bool copy = x->op == IR_OP_Store || x->op == IR_OP_Load;
        t_at[s + 1] = t_at[s] + (copy ? 0.0 : sched_node_seconds(cost, g, root, x));
    }
    free(root);
    for (uint32_t id = 0; id <= hi; id++) index[id] = -1;
    for (int i = 0; i < g->n_nodes; i++) index[g->nodes[i].id] = i;
    for (int c = 0; c < n; c++) {
        const rw_rewrite *r = &cand[c];
        int i = r->node_id <= hi ? index[r->node_id] : -1, k = 0;
        bool named = r->kind == RW_REMAT || r->kind == RW_REMAT_CHAIN || r->kind == RW_SWAP;
        if (named) k = r->value;
        const ir_node *nd = i >= 0 ? &g->nodes[i] : NULL;
        int v = nd && k < nd->n_out ? nd->out[k] : -1;
        int ib = named && r->user_id <= hi ? index[r->user_id] : -1;
        size_t relief = v >= 0 && ib >= 0 ? peak_relief(g, m, t_at, cost, r, v, ib) : 0;
        rk[c] = (ranked){.at = c,
                         .relieves = relief > 0,
                         .bytes = relief   ? relief
                                  : v >= 0 ? ir_value_bytes(&g->values[v])
                                           : 0};
    }
    /* A chain remat is for the value whose plain remat frees nothing (it would hold the
     * producer's input instead: a Softmax's) and that no swap relieves. Where either of those
     * relieves the peak, the chain recomputes more for the same bytes: under a latency limit
     * the search ranks states by memory alone and would spend the limit on it. It goes last
     * (BERT, --lat-limit 1.10, with chains: 0.61 of the eager peak without this, 0.57 with it;
     * 0.49 without chains, which is why XS_RULE_CHAIN is not a default family). */
    for (int c = 0; c < n; c++) {
        const rw_rewrite *r = &cand[c];
        if (r->kind != RW_REMAT_CHAIN || !rk[c].relieves) continue;
        for (int s = 0; s < n; s++)
            if (rk[s].relieves && (cand[s].kind == RW_SWAP || cand[s].kind == RW_REMAT) &&
                cand[s].node_id == r->node_id && cand[s].value == r->value &&
                cand[s].user_id == r->user_id) {
                rk[c].relieves = false;
                break;
            }
    }
    qsort(rk, (size_t)n, sizeof *rk, cmp_rank);
    qsort(rk, XS_MAX_SCHED_CHILDREN, sizeof *rk, cmp_at);
    /* ascending distinct indices: rk[j].at >= j, so the copy never overwrites what it reads */
    for (int j = 0; j < XS_MAX_SCHED_CHILDREN; j++) cand[j] = cand[rk[j].at];
    free(index);
    free(rk);
    free(t_at);
    return XS_MAX_SCHED_CHILDREN;
}

/* The PET children of m into out[0..max): one per candidate of the table whose sub-program is
 * intact in G_b (every node present; pet_apply checks that they are unchanged) and outside every
 * enabled fission (MAGIS's rules do not cross an F-Trans region, nor do PET's). */
static int pet_children(const xs_ctx *c, xs_worker *w, const xs_mat *m, rw_rewrite *out, int max) {
    const pet_table *t = c->pet;
    const ir_graph *gb = m->gb->g;
    size_t need = (size_t)gb->next_node_id + 1;
    if (!id_mask(w, need)) return 0;
    for (int i = 0; i < gb->n_nodes; i++) w->present[gb->nodes[i].id] = 1;
    int n = 0, last = -1;
    bool intact = false;
    /* candidates are grouped by sub-program: each is checked once */
    for (int k = 0; k < t->n && n < max; k++) {
        int sp = t->c[k].subprog;
        if (sp != last) {
            const pet_subprog *p = &t->split->progs[sp];
            intact = true;
            for (int j = 0; j < p->n_nodes && intact; j++) {
                uint32_t id = p->node_ids[j];
                intact = id < need && w->present[id] && !id_in(m, id);
            }
            last = sp;
        }
        if (intact) out[n++] = (rw_rewrite){.kind = RW_PET, .node_id = (uint32_t)k};
    }
    return n;
}

/* The children of m, in a fixed order: F-Tree mutations (few, and the big steps), substitutions
 * on G_b, PET candidates on G_b, then remat/swap candidates at G_e's hot-spots. A training graph's
 * peak holds hundreds of hot-spots, each with several users: evaluating every candidate (a
 * re-schedule and a simulation each) would make a search of a minute a handful of expansions
 * deep. So, in the spirit of H2, only XS_MAX_SCHED_CHILDREN are kept: those that free their value
 * at the peak moment first (keep_best), the largest first. */
static int list_children(const xs_ctx *c, xs_worker *w, const xs_mat *m, ir_diag *d) {
    unsigned rules = c->o->rules;
    int n = 0;
    if ((rules & XS_RULE_FISSION) && c->ft && c->ft->n > 0)
        n += rw_ftree_mutations(c->ft, m->config, w->cand + n, XS_MAX_CANDIDATES - n);
    if (rules & XS_RULE_SUBST) {
        int k = rw_subst_candidates(m->gb->g, w->cand + n, XS_MAX_CANDIDATES - n);
        n += subst_clear_of_fission(m, w, w->cand + n, k);
    }
    if ((rules & XS_RULE_PET) && c->pet)
        n += pet_children(c, w, m, w->cand + n, XS_MAX_CANDIDATES - n);
    if (rules & (XS_RULE_REMAT | XS_RULE_SWAP)) {
        sched_memory mem = {0};
        if (sched_memory_compute(m->ge->g, m->order, &mem, d) == IR_OK) {
            rw_rewrite *sc = w->cand + n;
            int k = rw_candidates(m->ge->g, &mem, (rules & XS_RULE_CHAIN) != 0, sc,
                                  XS_MAX_CANDIDATES - n),
                kept = 0;
            for (int i = 0; i < k; i++)
                if (family_enabled(rules, sc[i].kind) && !crosses_fission(m, &sc[i]))
                    sc[kept++] = sc[i];
            n += keep_best(m->ge->g, m->order, &mem, c->o->cost, sc, kept);
            sched_memory_free(&mem);
        }
    }
    return n;
}

/* A remat or swap child that lowers its parent's key, as the dive takes it. */
typedef struct improving {
    xs_state *s; /* the child (a reference, the expansion's) */
    int at;      /* its rewrite's index in w->cand */
    xp_key key;
} improving;

/* What an expansion's emits tell the dive after it. */
typedef struct expand_track {
    xp_key parent;                        /* the expanded state's key */
    improving imp[XS_MAX_SCHED_CHILDREN]; /* its improving remat and swap children */
    int n_imp;
    bool fission_improves; /* an F-Tree mutation lowered the key */
    bool stopped;          /* the search stops: no dive */
} expand_track;

#define XS_DIVE_MISSES 3 /* rewrites in a row that lower nothing end a dive */

/* The dive after an expansion. The remat and swap children that each lowered the parent's key
 * free different tensors at the peak moment: keep_best ranks them by the bytes they take off it,
 * and on a training graph 40 to 48 of its 48 do lower the peak, each by what it predicted. Yet
 * Algorithm 3 takes one of them per expansion and evaluates all 48 again at the next: a descent
 * of one tensor per 48 evaluations (61 expansions in 3,000 states on EfficientNet-B0) where the
 * peak holds hundreds. The dive composes them instead: from the best child, it applies the others
 * in the order of their keys (the order the search would expand them in), one evaluation each, and
 * emits every state that lowers the key of the one before. A rewrite that lowers nothing (the
 * peak moved to a moment it does not touch, or the latency went over the limit) is dropped,
 * XS_DIVE_MISSES in a row end the dive, and so does a state the pool does not push (seen
 * before, or worse than the relaxed best). Each dive state is an ordinary child (parent plus one
 * rewrite), so replay, checkpoints and the fingerprint set treat it as any other, and the
 * expansion's children stay in the frontier: the search can still turn back where the dive went
 * wrong. Ordering the dive by latency per byte freed instead (a knapsack's greedy order) did
 * worse: 0.472 against 0.448 on EfficientNet-B0 (3,000 states), 0.474 against 0.442 on the GPT
 * decoder (600). */
static void dive(xs_ctx *c, xs_worker *w, xp_worker *xw, improving *imp, int n_imp, ir_diag *d) {
    for (int i = 1; i < n_imp; i++) { /* stable insertion sort: n_imp <= XS_MAX_SCHED_CHILDREN */
        improving x = imp[i];
        int j = i;
        for (; j > 0 && xs_key_better(c, &x.key, &imp[j - 1].key, 1.0); j--) imp[j] = imp[j - 1];
        imp[j] = x;
    }
    xs_state *cur = imp[0].s;
    xs_mat *cm_cur = xs_materialize(c, w, cur, d); /* cached a moment ago: a hit, mostly */
    if (!cm_cur) return;
    xs_state_ref(cur);
    xp_key k_cur = key_of(c, cur->peak, cur->lat);
    const rw_rewrite *done[XS_MAX_SCHED_CHILDREN]; /* the rewrites on the dive */
    int misses = 0, n_done = 0;
    done[n_done++] = &w->cand[imp[0].at];
    for (int j = 1; j < n_imp && misses < XS_DIVE_MISSES && !xp_worker_should_stop(xw); j++) {
        const rw_rewrite *r = &w->cand[imp[j].at];
        /* another user's remat or swap of a tensor the dive freed already frees nothing more */
        bool freed = false;
        for (int k = 0; k < n_done && !freed; k++)
            freed = done[k]->node_id == r->node_id && done[k]->value == r->value;
        if (freed) continue;
        xs_mat *cm = NULL;
        xs_eval ev;
        if (xs_derive(c, w, cm_cur, r, &cm, &ev, d) != IR_OK) {
            w->failed++;
            misses++;
            continue;
        }
        xp_key k = key_of(c, ev.peak, ev.lat);
        if (!xs_key_better(c, &k, &k_cur, 1.0)) {
            xs_mat_unref(cm);
            misses++;
            continue;
        }
        xs_state *ch = xs_state_new(cur, r, &ev);
        if (!ch) {
            xs_mat_unref(cm);
            break;
        }
        xs_state_ref(ch); /* as in cb_expand: ours, beside the pool's */
        xp_emit_result er = xp_emit(xw, ch, ev.fp, k);
        if (er != XP_EMIT_PUSHED) {
            xs_mat_unref(cm);
            xs_state_unref(c, ch);
            break;
        }
        xs_cache_put(c, ch, cm);
        done[n_done++] = r;
        xs_mat_unref(cm_cur);
        xs_state_unref(c, cur);
        cur = ch;
        cm_cur = cm;
        k_cur = k;
        misses = 0;
    }
    xs_mat_unref(cm_cur);
    xs_state_unref(c, cur);
}

/* Emits child i of w's job (derived into ev and cm, which it takes) as a child of job.s, and
 * notes in tr what the dive needs of it; returns false when the search stops (the emit said so). */
static bool emit_child(xs_ctx *c, xp_worker *xw, const xs_job *j, int i, xs_mat *cm,
                       const xs_eval *ev, expand_track *tr) {
    xs_state *ch = xs_state_new(j->s, &j->cand[i], ev);
    if (!ch) {
        xs_mat_unref(cm);
        return true; /* this child is lost; the others may still fit */
    }
    /* our own reference keeps ch alive after xp_emit, which may free or (with several threads)
     * hand it to another worker that expands and frees it */
    xs_state_ref(ch);
    xp_key k = key_of(c, ev->peak, ev->lat);
    xp_emit_result er = xp_emit(xw, ch, ev->fp, k);
    if (er == XP_EMIT_PUSHED) xs_cache_put(c, ch, cm);
    xs_mat_unref(cm);
    int kind = j->cand[i].kind;
    bool better = er == XP_EMIT_PUSHED && xs_key_better(c, &k, &tr->parent, 1.0);
    if (better && rw_is_ftree_kind(kind)) tr->fission_improves = true;
    if (better && (kind == RW_REMAT || kind == RW_SWAP) && tr->n_imp < XS_MAX_SCHED_CHILDREN)
        tr->imp[tr->n_imp++] = (improving){.s = ch, .at = i, .key = k}; /* our reference, its */
    else
        xs_state_unref(c, ch);
    if (er == XP_EMIT_STOPPED) tr->stopped = true;
    return er != XP_EMIT_STOPPED;
}

/* Derives child i of j on w's scratch into j->slot[i] (done: release, for the owner). */
static void derive_slot(xs_ctx *c, xs_worker *w, xs_job *j, int i) {
    ir_diag d = {{0}};
    xs_child *sl = &j->slot[i];
    sl->cm = NULL;
    bool ok = xs_derive(c, w, j->pm, &j->cand[i], &sl->cm, &sl->ev, &d) == IR_OK;
    if (!ok) w->failed++;
    atomic_store_explicit(&sl->done, ok ? 1 : 2, memory_order_release);
}

/* The owner's emits of j's derived slots *at .. upto - 1, in index order, stopping at the first
 * one not derived yet (*at is then that one). Once an emit said the search stops (*stopped),
 * the slots after it are freed without an emit; returns !*stopped. */
static bool emit_slots(xs_ctx *c, xp_worker *xw, xs_job *j, int *at, int upto, bool *stopped,
                       expand_track *tr) {
    for (; *at < upto; (*at)++) {
        xs_child *sl = &j->slot[*at];
        /* acquire: the helper's derivation into the slot happens-before the emit */
        int done = atomic_load_explicit(&sl->done, memory_order_acquire);
        if (done == 0) return !*stopped;
        atomic_store_explicit(&sl->done, 0, memory_order_relaxed); /* ready for the next job */
        if (done != 1) continue;
        if (*stopped)
            xs_mat_unref(sl->cm);
        else if (!emit_child(c, xw, j, *at, sl->cm, &sl->ev, tr))
            *stopped = true;
    }
    return !*stopped;
}

/* Expands s: lists its children, then derives and emits them in their order. With the pool
 * sharing children (c->share), the list is a job whose children the idle workers derive too
 * (cb_help) while this worker emits them all, in the same order, so the pool's states and
 * their order are one thread's. */
/* After an expansion's emits: the dive, then the tracker's references dropped. An F-Tree
 * mutation that lowers the key is a big step the search takes first: a dive beside it would fill
 * the frontier with states below it that spend the latency limit without the fission (BERT-base:
 * 0.59 against 0.42 with it, in 2,000 states). The dive runs on the owner alone, after the job
 * closed, so a search that shares children is still one thread's search. */
static void finish_expand(xs_ctx *c, xs_worker *w, xp_worker *xw, expand_track *tr, ir_diag *d) {
    if (!tr->stopped && !tr->fission_improves && tr->n_imp >= 2)
        dive(c, w, xw, tr->imp, tr->n_imp, d);
    for (int i = 0; i < tr->n_imp; i++) xs_state_unref(c, tr->imp[i].s);
}

static void cb_expand(void *ctx, xp_worker *xw, const void *state) {
    xs_ctx *c = ctx;
    xs_state *s = (xs_state *)state; /* the pool's: read-only but for its reference count */
    xs_worker *w = &c->w[xp_worker_index(xw)];
    ir_diag d = {{0}};
    xs_mat *pm = xs_materialize(c, w, s, &d);
    if (!pm) {
        w->failed++;
        return;
    }
    double t = ir_now_seconds();
    int n = list_children(c, w, pm, &d);
    w->phase[XS_PHASE_CANDIDATES] += ir_now_seconds() - t;
    xs_job *j = &w->job;
    j->s = s;
    j->pm = pm;
    j->cand = w->cand;
    j->n = n;
    expand_track tr = {.parent = key_of(c, s->peak, s->lat)};
    if (!c->share) {
        for (int i = 0; i < n && !(tr.stopped = xp_worker_should_stop(xw)); i++) {
            xs_mat *cm = NULL;
            xs_eval ev;
            if (xs_derive(c, w, pm, &w->cand[i], &cm, &ev, &d) != IR_OK) {
                w->failed++;
                continue;
            }
            if (!emit_child(c, xw, j, i, cm, &ev, &tr)) break;
        }
        finish_expand(c, w, xw, &tr, &d);
        xs_mat_unref(pm);
        return;
    }
    /* closed, and no helper inside since the last expand returned: the fields above are ours;
     * every slot's done is 0 (emit_slots cleared the ones it read, and no other was set) */
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    /* release: a helper that reads open == 1 (acquire) sees the fields above */
    atomic_store_explicit(&j->open, 1, memory_order_release);
    int at = 0;
    bool stopped = false;
    for (;;) {
        /* relaxed: the claim carries no data (the fields were published by open) */
        int i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= n) break;
        if ((tr.stopped = xp_worker_should_stop(xw))) break; /* i and the unclaimed are left out */
        derive_slot(c, w, j, i);
        if (!emit_slots(c, xw, j, &at, i + 1, &stopped, &tr)) break;
    }
    /* seq_cst: with the helper's seq_cst increment of active and load of open, either it sees
     * the job closed or this load sees it inside (then it is waited for) */
    atomic_store_explicit(&j->open, 0, memory_order_seq_cst);
    while (atomic_load_explicit(&j->active, memory_order_seq_cst) > 0) sched_yield();
    /* every claimed slot is derived now; the ones left out stay 0 and end the emits there. The
     * slots past a hole (claimed by helpers before the stop) are freed without an emit, and the
     * pool keeps s as unfinished, as should_stop or the stopping emit told it. */
    emit_slots(c, xw, j, &at, n, &stopped, &tr);
    for (int i = at; i < n; i++) {
        xs_child *sl = &j->slot[i];
        int done = atomic_load_explicit(&sl->done, memory_order_acquire);
        atomic_store_explicit(&sl->done, 0, memory_order_relaxed);
        if (done == 1) xs_mat_unref(sl->cm);
    }
    finish_expand(c, w, xw, &tr, &d);
    xs_mat_unref(pm);
}

/* An idle worker's share of another's expand (xp_callbacks.help, with c->share): one child of
 * the first open job with children left, derived into the job's slot. Returns whether it
 * derived one. */
static bool cb_help(void *ctx, xp_worker *xw) {
    xs_ctx *c = ctx;
    int me = xp_worker_index(xw), n_pool = c->n_w - 1; /* the last slot is the caller's */
    xs_worker *w = &c->w[me];
    if (xp_worker_should_stop(xw)) return false; /* the worker loop ends on it */
    for (int k = 0; k < n_pool; k++) {
        if (k == me) continue;
        xs_job *j = &c->w[k].job;
        /* relaxed: a hint (most looks find it closed); the check under active is exact */
        if (!atomic_load_explicit(&j->open, memory_order_relaxed)) continue;
        atomic_fetch_add_explicit(&j->active, 1, memory_order_seq_cst);
        bool did = false;
        if (atomic_load_explicit(&j->open, memory_order_seq_cst)) {
            /* relaxed: as the owner's claims */
            int i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            if (i < j->n) {
                derive_slot(c, w, j, i);
                did = true;
            }
        }
        /* release: what this helper read of the job happens-before the owner's next writes */
        atomic_fetch_sub_explicit(&j->active, 1, memory_order_release);
        if (did) return true;
    }
    return false;
}

/* The start state's order: the memory DP's (XS_RULE_REORDER) when better under the mode's key,
 * else the eager order; the eager and start figures go to r. order: g->n_nodes + 1 entries. */
static ir_status start_order(const ir_graph *g, const xs_ctx *c, xs_result *r, int *order,
                             size_t *peak, double *lat, ir_diag *d) {
    ir_status st;
    int *eager = sched_eager_order(g), *mo = NULL;
    if (!eager) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    size_t ep, mp;
    double el, ml;
    if ((st = xs_evaluate(c, g, eager, &ep, &el, d)) != IR_OK) goto out;
    r->eager_peak_bytes = ep;
    r->eager_latency_s = el;
    memcpy(order, eager, sizeof(int) * (size_t)g->n_nodes);
    *peak = ep;
    *lat = el;
    if (c->o->rules & XS_RULE_REORDER) {
        if (!(mo = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)))) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
            goto out;
        }
        sched_dp_stats dps;
        if ((st = sched_order_memory(g, NULL, mo, &dps, d)) != IR_OK ||
            (st = xs_evaluate(c, g, mo, &mp, &ml, d)) != IR_OK)
            goto out;
        xp_key km = key_of(c, mp, ml), ke = key_of(c, ep, el);
        if (key_better(c->limit, c->o->target, &km, &ke, 1.0)) {
            memcpy(order, mo, sizeof(int) * (size_t)g->n_nodes);
            *peak = mp;
            *lat = ml;
        }
    }
    r->start_peak_bytes = *peak;
    r->start_latency_s = *lat;
out:
    free(eager);
    free(mo);
    return st;
}

void xs_pet_options(const xs_options *o, pet_find_opts *out) {
    if (o->pet) {
        *out = *o->pet;
    } else {
        /* pet-gen.h's defaults (depth 4, 4 rounds, top 8) take minutes on one sub-program of
         * seven ops. Depth 3 holds a merge of parallel convolutions (concatenated weights, one
         * conv, a split) and the matmul transpositions; one round with a wide top-K, because
         * the generator ranks mutants by their cost before correction: on Inception v3 the
         * cheapest 8 of a block are partial merges whose 16-18 corrections cost more than the
         * block, and the exact merge that pays ranks below them. The state bound keeps the
         * largest enumerations to about a second. */
        memset(out, 0, sizeof *out);
        out->gen.depth = 3;
        out->gen.rounds = 1;
        out->gen.top_k = 32;
        out->gen.max_states = 1 << 18;
        out->gen.max_subsets = 16;
        /* a mutant whose output has thousands of boxes (a reshape splits at every row) costs
         * seconds to verify and would need as many corrections where it differs: refused */
        out->verify.max_cells = 1024;
        out->verify.seed = o->seed;
    }
    out->gen.cost = o->cost;
    out->gen.interrupt = o->interrupt; /* a signal stops the table's search too */
    out->threads = o->threads > 0 ? o->threads : xp_default_threads();
}

/* The context, the start state (root), the F-Tree and the PET table, shared by xs_search and
 * xs_replay. */
static ir_status setup(const ir_graph *g, const xs_options *o, int threads, xs_ctx *c, xs_result *r,
                       ir_diag *d) {
    ir_status st = xs_ctx_init(c, o, threads, d);
    if (st != IR_OK) return st;
    c->share = threads > 1 && (o->share == XS_SHARE_CHILDREN ||
                               (o->share == XS_SHARE_AUTO && g->n_nodes >= XS_SHARE_MIN_NODES));
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    size_t peak = 0;
    double lat = 0;
    if (!order) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    if ((st = start_order(g, c, r, order, &peak, &lat, d)) != IR_OK) goto out;
    if (o->rules & XS_RULE_FISSION) {
        sched_memory m = {0};
        if ((st = sched_memory_compute(g, order, &m, d)) != IR_OK) goto out;
        c->ft = rw_ftree_build(g, &m, o->ftree_levels);
        sched_memory_free(&m);
        if (!c->ft) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory building the F-Tree");
            goto out;
        }
    }
    if (o->rules & XS_RULE_PET) {
        /* on G_b = g, so the table's node ids are the start state's; the thread count does not
         * change the table (pet-opt.h) */
        pet_find_opts po;
        xs_pet_options(o, &po);
        po.threads = threads;
        double t0 = ir_now_seconds();
        if ((st = pet_find_candidates(g, &po, &c->pet, d)) != IR_OK) {
            ir_diag_prefix(d, "PET candidates");
            goto out;
        }
        r->pet_seconds = ir_now_seconds() - t0;
    }
    if (!(c->root = xs_root_new(c, g, order, d))) {
        st = IR_ERR_NOMEM;
        goto out;
    }
    c->root->peak = peak;
    c->root->lat = lat;
    c->root->fp = ir_graph_hash(g);
out:
    free(order);
    return st;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The PET candidates on r's chain into r->pet_applied; g is the start graph (the table's). */
static ir_status fill_pet(const xs_ctx *c, const ir_graph *g, xs_result *r, ir_diag *d) {
    if (!c->pet || !r->applied[RW_PET]) return IR_OK;
    r->pet_applied = calloc((size_t)r->applied[RW_PET], sizeof *r->pet_applied);
    if (!r->pet_applied) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r->chain_len; i++) {
        const rw_rewrite *rw = &r->chain[i];
        if (rw->kind != RW_PET || rw->node_id >= (uint32_t)c->pet->n) continue;
        const pet_candidate *pc = &c->pet->c[rw->node_id];
        const pet_subprog *sp = &c->pet->split->progs[pc->subprog];
        xs_pet_applied *a = &r->pet_applied[r->n_pet_applied++];
        *a = (xs_pet_applied){.candidate = (int)rw->node_id,
                              .subprog = pc->subprog,
                              .cls = pc->cls,
                              .n_boxes = pc->n_boxes,
                              .n_failed = pc->n_failed,
                              .n_fused = pc->n_fused,
                              .orig_cost = pc->orig_cost,
                              .cost = pc->cost,
                              .false_accept_bound = pc->false_accept_bound};
        const char *name = sp->n_nodes > 0 ? g->nodes[sp->nodes[0]].name : NULL;
        snprintf(a->first_node, sizeof a->first_node, "%s", name ? name : "");
    }
    return IR_OK;
}

/* The best state's figures, chain and enabled fissions into r (its graph and order from m). */
static ir_status fill_result(const xs_ctx *c, const xs_state *b, const xs_mat *m, xs_result *r,
                             ir_diag *d) {
    r->best_peak_bytes = b->peak;
    r->best_latency_s = b->lat;
    r->best_fingerprint = b->fp;
    r->best = ir_graph_clone(m->ge->g);
    r->best_order = malloc(sizeof(int) * ((size_t)m->ge->g->n_nodes + 1));
    r->chain = malloc(sizeof(rw_rewrite) * ((size_t)b->depth + 1));
    int nft = c->ft ? c->ft->n : 0;
    r->fissions = malloc(sizeof(xs_fission_info) * ((size_t)nft + 1));
    if (!r->best || !r->best_order || !r->chain || !r->fissions)
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    memcpy(r->best_order, m->order, sizeof(int) * (size_t)m->ge->g->n_nodes);
    r->chain_len = b->depth;
    for (const xs_state *s = b; s->parent; s = s->parent) {
        r->chain[s->depth - 1] = s->rw;
        r->applied[s->rw.kind]++;
        if (s->rw.kind == RW_SUBST && s->rw.value >= 0 && s->rw.value < RW_SUBST_RULE_COUNT)
            r->subst_applied[s->rw.value]++;
    }
    r->ftree_nodes = nft;
    for (int i = 0; i < nft; i++) {
        if (m->config[i] <= 1) continue;
        r->fissions[r->n_fissions++] = (xs_fission_info){.tree_node = i,
                                                         .n_ids = c->ft->nodes[i].f.n_ids,
                                                         .dim_len = c->ft->nodes[i].dim_len,
                                                         .parts = m->config[i]};
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- runners-up (keep_plans) */

typedef struct bests_list {
    const xs_state **s;
    xp_key *k;
    size_t n, cap;
    bool nomem;
} bests_list;

static void collect_best(void *arg, const void *state, xp_key key) {
    bests_list *l = arg;
    if (l->nomem) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        const xs_state **s = realloc(l->s, cap * sizeof *s);
        if (s) l->s = s;
        xp_key *k = realloc(l->k, cap * sizeof *k);
        if (k) l->k = k;
        if (!s || !k) {
            l->nomem = true;
            return;
        }
        l->cap = cap;
    }
    l->s[l->n] = state;
    l->k[l->n++] = key;
}

/* The result's best-state fields moved into p (r's are zeroed). */
static void move_plan(xs_result *r, xs_plan *p) {
    *p = (xs_plan){.g = r->best,
                   .order = r->best_order,
                   .peak_bytes = r->best_peak_bytes,
                   .latency_s = r->best_latency_s,
                   .fingerprint = r->best_fingerprint,
                   .chain = r->chain,
                   .chain_len = r->chain_len,
                   .fissions = r->fissions,
                   .n_fissions = r->n_fissions,
                   .pet_applied = r->pet_applied,
                   .n_pet_applied = r->n_pet_applied};
    memcpy(p->applied, r->applied, sizeof p->applied);
    memcpy(p->subst_applied, r->subst_applied, sizeof p->subst_applied);
    r->best = NULL;
    r->best_order = NULL;
    r->chain = NULL;
    r->fissions = NULL;
    r->pet_applied = NULL;
    r->n_fissions = r->n_pet_applied = r->chain_len = 0;
    memset(r->applied, 0, sizeof r->applied);
    memset(r->subst_applied, 0, sizeof r->subst_applied);
}

/* Up to o->keep_plans states the pool ever published as best, other than b and the start
 * state, the better first, into r->plans. Each earlier best was better than every best before
 * it, so these are the search's best states but for the ones never published. */
static ir_status fill_plans(xs_ctx *c, xp_pool *p, const ir_graph *g, const xs_state *b,
                            int threads, xs_result *r, ir_diag *d) {
    bests_list l = {0};
    ir_status st = IR_OK;
    xp_pool_visit_bests(p, collect_best, &l);
    if (l.nomem) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    r->plans = calloc((size_t)c->o->keep_plans, sizeof *r->plans);
    if (!r->plans) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    while (r->n_plans < c->o->keep_plans) {
        size_t pick = l.n;
        for (size_t i = 0; i < l.n; i++) {
            if (!l.s[i] || l.s[i] == b || !l.s[i]->parent) continue;
            if (pick == l.n || cb_better(c, &l.k[i], &l.k[pick], 1.0)) pick = i;
        }
        if (pick == l.n) break;
        xs_state *s = (xs_state *)l.s[pick];
        l.s[pick] = NULL;
        xs_mat *m = xs_materialize(c, &c->w[threads], s, d);
        if (!m) {
            st = IR_ERR_INTERNAL;
            goto out;
        }
        xs_result one = {0};
        st = fill_result(c, s, m, &one, d);
        xs_mat_unref(m);
        if (st == IR_OK) st = fill_pet(c, g, &one, d);
        move_plan(&one, &r->plans[r->n_plans++]);
        xs_result_free(&one);
        if (st != IR_OK) goto out;
    }
out:
    free(l.s);
    free(l.k);
    return st;
}

void xs_plan_free(xs_plan *p) {
    if (!p) return;
    ir_graph_free(p->g);
    free(p->order);
    free(p->chain);
    free(p->fissions);
    free(p->pet_applied);
    memset(p, 0, sizeof *p);
}

void xs_result_swap_plan(xs_result *r, xs_plan *p) {
    xs_plan old;
    move_plan(r, &old);
    r->best = p->g;
    r->best_order = p->order;
    r->best_peak_bytes = p->peak_bytes;
    r->best_latency_s = p->latency_s;
    r->best_fingerprint = p->fingerprint;
    r->chain = p->chain;
    r->chain_len = p->chain_len;
    memcpy(r->applied, p->applied, sizeof r->applied);
    memcpy(r->subst_applied, p->subst_applied, sizeof r->subst_applied);
    r->fissions = p->fissions;
    r->n_fissions = p->n_fissions;
    r->pet_applied = p->pet_applied;
    r->n_pet_applied = p->n_pet_applied;
    *p = old;
}

/* Takes a snapshot and hands it to o->checkpoint: the workers paused while it is copied (not
 * for the final one, taken after xp_pool_wait), running while the callback writes it. A failure
 * of a periodic one is recorded in r->checkpoint_error and the search goes on (IR_OK); the
 * final one's is returned. */
static ir_status checkpoint(xs_ctx *c, xp_pool *p, const ir_graph *g, xs_result *r, bool final,
                            ir_diag *d) {
    const xs_options *o = c->o;
    xs_snapshot s;
    ir_diag cd = {{0}};
    double t0 = ir_now_seconds();
    if (!final) xp_pool_pause(p);
    /* a distributed search's cut: nothing in flight (the final one's quiesce came before) */
    ir_status st = !final && o->dist ? o->dist->ops->quiesce(o->dist, &cd) : IR_OK;
    if (st == IR_OK) st = xs_snapshot_take(c, p, g, r, &s, &cd);
    if (!final) {
        xp_pool_resume(p);
        r->checkpoint_pause_s += ir_now_seconds() - t0;
    }
    if (st == IR_OK) {
        double t1 = ir_now_seconds();
        st = o->checkpoint(o->checkpoint_arg, &s, final, &cd);
        r->checkpoint_write_s += ir_now_seconds() - t1;
        if (st == IR_OK) r->checkpoints++;
    }
    xs_snapshot_free(&s);
    if (st == IR_OK) return IR_OK;
    size_t n = strnlen(cd.msg, sizeof r->checkpoint_error - 1); /* the message, cut to fit */
    memcpy(r->checkpoint_error, cd.msg, n);
    r->checkpoint_error[n] = '\0';
    if (!final) return IR_OK;
    if (d) *d = cd;
    return st;
}

/* The pool's options for a search of o. */
static xp_pool_opts pool_opts(const xs_options *o, const xs_ctx *c, int threads) {
    xp_pool_opts po = xp_pool_opts_default();
    po.threads = threads;
    po.seed = o->seed;
    po.delta = c->delta;
    po.max_seconds = o->max_seconds;
    po.max_states = o->max_states;
    po.max_frontier = o->max_frontier;
    po.share_children = c->share;
    if (o->dist) {
        po.route = o->dist->ops->route;
        po.route_arg = o->dist;
    }
    return po;
}

ir_status xs_search(const ir_graph *g, const xs_options *o, xs_result *r, ir_diag *d) {
    memset(r, 0, sizeof *r);
    int threads = o->threads > 0 ? o->threads : xp_default_threads();
    const xs_snapshot *rs = o->resume;
    double base_s = rs ? rs->elapsed_s : 0.0; /* search seconds of the earlier runs */
    xs_ctx c;
    xp_pool *p = NULL;
    double t0 = ir_now_seconds();
    ir_status st = setup(g, o, threads, &c, r, d);
    if (st != IR_OK) goto out;
    if (rs && ((st = xs_snapshot_check(rs, "checkpoint", d)) != IR_OK ||
               (st = xs_snapshot_match(rs, g, &c, r, d)) != IR_OK))
        goto out;
    r->resumes = rs ? rs->resumes + 1 : 0;
    r->start_seconds = ir_now_seconds() - t0;
    xp_pool_opts po = pool_opts(o, &c, threads);
    xp_callbacks cb = {.expand = cb_expand,
                       .better = cb_better,
                       .free_state = cb_free,
                       .help = c.share ? cb_help : NULL};
    if (!(p = xp_pool_init(&po, &cb, &c))) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "cannot create the search pool");
        goto out;
    }
    if (o->interrupt && *o->interrupt) {
        /* a signal during the setup (the PET table's search polls it and stops short): no state
         * is expanded with what was cut short; the start state is the plan and the checkpoint's
         * frontier, as on any interrupt */
        r->interrupted = true;
        xp_pool_request_stop(p);
    }
    if (rs) {
        /* the pool owns the rebuilt states (c.root among them) whatever happens */
        if ((st = xs_snapshot_restore(&c, p, rs, d)) != IR_OK) goto out;
    } else {
        xs_state *root = c.root;
        c.root = NULL; /* the pool owns it now */
        xp_key rk = key_of(&c, root->peak, root->lat);
        /* distributed: the start state is its owner's; the others start empty, with it as the
         * best, and wait for states */
        xp_restore none = {
            .best_item = -1, .best_state = root, .best_fp = root->fp, .best_key = rk};
        bool started = !o->dist || o->dist->ops->owns(o->dist, root->fp)
                           ? xp_pool_start(p, root, root->fp, rk)
                           : xp_pool_start_restored(p, &none);
        if (!started) {
            st = ir_diag_set(d, IR_ERR_INTERNAL, "cannot start the search threads");
            goto out;
        }
    }
    if (o->dist && (st = o->dist->ops->begin(o->dist, &c, p, d)) != IR_OK) {
        xp_pool_request_stop(p);
        xp_pool_wait(p);
        goto out;
    }
    double interval = o->progress_interval_s > 0 ? o->progress_interval_s : 1.0;
    double t1 = ir_now_seconds(), next = t1 + interval;
    /* one checkpoint at once, so that one exists from the first seconds on */
    if (o->checkpoint) checkpoint(&c, p, g, r, false, d);
    double every = o->checkpoint_every_s, next_ckpt = ir_now_seconds() + every;
    xp_pool_stats ps;
    for (;;) {
        xp_pool_get_stats(p, &ps, NULL, 0);
        if (ps.reason != XP_STOP_NONE && !o->dist) break;
        if (o->interrupt && *o->interrupt && !r->interrupted) {
            r->interrupted = true;
            xp_pool_request_stop(p);
        }
        double t = ir_now_seconds();
        bool now = o->checkpoint_now && *o->checkpoint_now;
        bool due = o->checkpoint && (now || (every > 0 && t >= next_ckpt));
        if (o->dist) {
            /* every rank stops and checkpoints on the same wave (xd.h) */
            xp_stop_reason why = XP_STOP_NONE;
            xs_dist_act act = o->dist->ops->step(o->dist, due, &why);
            if (act == XS_DIST_STOP) {
                xp_pool_stop(p, why);
                if (why == XP_STOP_REQUESTED) r->interrupted = true;
                break;
            }
            due = act == XS_DIST_CHECKPOINT && o->checkpoint;
            now = now && due;
        }
        if (due) {
            if (now) *o->checkpoint_now = 0;
            checkpoint(&c, p, g, r, false, d);
            next_ckpt = ir_now_seconds() + every;
        }
        if (o->progress && t >= next) {
            const xs_state *b = xp_pool_best(p, NULL);
            xs_progress pr = {.seconds = base_s + t - t1,
                              .expanded = ps.total.expanded,
                              .generated = ps.total.generated,
                              .frontier = ps.frontier,
                              .best_peak_bytes = b->peak,
                              .best_latency_s = b->lat};
            o->progress(o->progress_arg, &pr, false);
            while (next <= t) next += interval;
        }
        sleep_s(o->dist ? 0.0002 : 0.01);
    }
    xp_pool_wait(p);
    if (o->dist && (st = o->dist->ops->quiesce(o->dist, d)) != IR_OK) goto out;
    r->search_seconds = ir_now_seconds() - t1;
    xp_pool_get_stats(p, &r->stats, NULL, 0);
    r->stats.seconds += base_s; /* the pool counts this run; the result the whole search */
    xs_state *b = (xs_state *)xp_pool_best(p, NULL);
    if (o->progress) {
        xs_progress pr = {.seconds = r->stats.seconds,
                          .expanded = r->stats.total.expanded,
                          .generated = r->stats.total.generated,
                          .frontier = r->stats.frontier,
                          .best_peak_bytes = b->peak,
                          .best_latency_s = b->lat};
        o->progress(o->progress_arg, &pr, true);
    }
    /* the final checkpoint, unfinished states included; before the result's own replay, so its
     * counters are the search's */
    if (o->checkpoint && (st = checkpoint(&c, p, g, r, true, d)) != IR_OK) goto out;
    xs_state *gb = NULL; /* a distributed search's best of all ranks (rank 0) */
    if (o->dist && (st = o->dist->ops->finish(o->dist, r, &gb, d)) != IR_OK) goto out;
    if (gb) b = gb;
    /* the calling thread's slot: the workers are joined */
    xs_mat *m = xs_materialize(&c, &c.w[threads], b, d);
    if (!m) {
        xs_state_unref(&c, gb);
        st = IR_ERR_INTERNAL;
        goto out;
    }
    st = fill_result(&c, b, m, r, d);
    xs_mat_unref(m);
    xs_state_unref(&c, gb);
    if (st == IR_OK) st = fill_pet(&c, g, r, d);
    if (st == IR_OK && o->keep_plans > 0) st = fill_plans(&c, p, g, b, threads, r, d);
    r->pet = c.pet; /* the report's: the ctx is freed below */
    c.pet = NULL;
    for (int i = 0; i < c.n_w; i++) {
        for (int k = 0; k < XS_PHASE_COUNT; k++) r->phase_seconds[k] += c.w[i].phase[k];
        r->cache_hits += c.w[i].hits;
        r->cache_misses += c.w[i].misses;
        r->replay_steps += c.w[i].replay_steps;
        r->failed_children += c.w[i].failed;
    }
    /* relaxed: the workers are joined */
    r->replay_mismatches = atomic_load_explicit(&c.mismatches, memory_order_relaxed);
    if (rs) {
        for (int k = 0; k < XS_PHASE_COUNT; k++) r->phase_seconds[k] += rs->phase_seconds[k];
        r->cache_hits += rs->cache_hits;
        r->cache_misses += rs->cache_misses;
        r->replay_steps += rs->replay_steps;
        r->replay_mismatches += rs->replay_mismatches;
        r->failed_children += rs->failed_children;
    }
out:
    if (p) {
        /* a started pool is joined here (a failed start ends it) */
        if (o->dist) o->dist->ops->end(o->dist);
        xp_pool_free(p); /* frees every state, hence every cached materialization */
    }
    xs_state_unref(&c, c.root); /* only when the pool never took it */
    xs_ctx_free(&c);
    if (st != IR_OK) xs_result_free(r);
    return st;
}

void xs_result_free(xs_result *r) {
    if (!r) return;
    ir_graph_free(r->best);
    free(r->best_order);
    free(r->chain);
    free(r->fissions);
    pet_table_free(r->pet);
    free(r->pet_applied);
    for (int i = 0; i < r->n_plans; i++) xs_plan_free(&r->plans[i]);
    free(r->plans);
    memset(r, 0, sizeof *r);
}

ir_status xs_replay(const ir_graph *g, const xs_options *o, const rw_rewrite *chain, int n,
                    xs_replayed *out, ir_diag *d) {
    memset(out, 0, sizeof *out);
    xs_ctx c;
    xs_result r = {0};
    ir_status st = setup(g, o, 1, &c, &r, d);
    xs_mat *cur = NULL;
    xs_eval ev = {0};
    if (st != IR_OK) goto out;
    pthread_mutex_lock(&c.mu);
    cur = c.root->mat;
    atomic_fetch_add_explicit(&cur->refs, 1, memory_order_relaxed); /* single thread here */
    pthread_mutex_unlock(&c.mu);
    ev = (xs_eval){.peak = c.root->peak, .lat = c.root->lat, .fp = c.root->fp};
    for (int i = 0; i < n; i++) {
        xs_mat *next = NULL;
        st = xs_derive(&c, &c.w[0], cur, &chain[i], &next, &ev, d);
        xs_mat_unref(cur);
        cur = next;
        if (st != IR_OK) goto out;
    }
    out->g = ir_graph_clone(cur->ge->g);
    out->order = malloc(sizeof(int) * ((size_t)cur->ge->g->n_nodes + 1));
    if (!out->g || !out->order) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(out->order, cur->order, sizeof(int) * (size_t)cur->ge->g->n_nodes);
    out->peak_bytes = ev.peak;
    out->latency_s = ev.lat;
    out->fingerprint = ev.fp;
out:
    xs_mat_unref(cur);
    xs_state_unref(&c, c.root);
    xs_ctx_free(&c);
    if (st != IR_OK) xs_replayed_free(out);
    return st;
}

void xs_replayed_free(xs_replayed *r) {
    if (!r) return;
    ir_graph_free(r->g);
    free(r->order);
    memset(r, 0, sizeof *r);
}
