/* sched-order-memory.c - sched_order_memory: the memory-minimizing order of a whole graph.
 *
 *  1. Parts: the graph is cut after every nw = 0 node (MAGIS 6.1). Every order runs the parts
 *     in sequence and a part's memory depends only on its own order (values crossing it are
 *     constant base bytes), so the best whole order is the concatenation of the parts' best
 *     orders and the peak is the max of the parts' peaks: cutting there loses nothing.
 *  2. Parts are visited by decreasing eager peak; a part whose eager peak is already below the
 *     peak some solved part cannot go below is left as it is (it cannot change the maximum).
 *  3. A part of at most exact_max_nodes nodes gets the exact DP (sched-dp.c), pruned against its
 *     eager peak. If the memo fills up, adaptive soft budgeting (Serenity) bisects a budget tau
 *     between a lower bound and the best peak found, searching again with states above tau
 *     dropped, which keeps the frontier small.
 *  4. A larger part is searched over chains contracted into units (sdp_units_build): a beam of
 *     beam_width states first (it always completes), then the DP with soft budgeting when there
 *     are at most 1.5 x exact_max_nodes units. Then it is refined around its peak step: windows
 *     of about exact_max_nodes units, then of exact_max_nodes single nodes (centred on the
 *     step, ending at it, starting at it, or starting after the nearest nw <= 1 node, MAGIS's
 *     partition points), are re-ordered exactly while that lowers the part's peak. Re-ordering
 *     a window never changes the memory outside it, so no step gets worse.
 *  5. The result is compared with the eager order by sched_memory_compute, and the eager
 *     order is returned unless the result is strictly better: never worse than eager.
 * Steps 3 and 4 are sdp_order_part (sched-impl.h), which sched_incremental uses for its parts too.
 * Memory is bounded by max_states records per search plus per-level tables bounded before the
 * search; time by time_budget_s (checked per level; a refining window gets at most a tenth of
 * it). The result is deterministic unless the budget runs out (schedule.h). */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

#define SDP_EXACT_MAX_DEFAULT 32
#define SDP_BEAM_DEFAULT 1024
#define SDP_TIME_DEFAULT 10.0
#define SDP_STATES_DEFAULT (1l << 22) /* memo records, 8 bytes each */
#define SDP_EXACT_WIDTH (1 << 18)     /* states per level of an exact search */
#define SDP_WINDOW_WIDTH (1 << 13)    /* states per level when refining a window */
#define SDP_WINDOW_SHARE 0.1          /* of the time budget, at most per refining window */

ir_status sdp_orderer_init(sdp_orderer *w, sdp_ctx *c, const sched_dp_options *o, int beam_default,
                           sched_dp_stats *st, ir_diag *d) {
    memset(w, 0, sizeof *w);
    double budget = o && o->time_budget_s > 0 ? o->time_budget_s : SDP_TIME_DEFAULT;
    w->c = c;
    w->st = st;
    w->exact_max = o && o->exact_max_nodes > 0 ? o->exact_max_nodes : SDP_EXACT_MAX_DEFAULT;
    w->beam = o && o->beam_width > 0 ? o->beam_width : beam_default;
    w->max_states = o && o->max_states > 0 ? o->max_states : SDP_STATES_DEFAULT;
    w->deadline = ir_now_seconds() + budget;
    w->window_s = SDP_WINDOW_SHARE * budget;
    size_t sn = (size_t)c->n + 1;
    w->ord = malloc(sizeof(int) * sn);
    w->pos = malloc(sizeof(int) * sn);
    w->lastpos = malloc(sizeof(int) * ((size_t)c->nv + 1));
    w->nw = malloc(sizeof(int) * sn);
    w->lorder = malloc(sizeof(int) * 2 * sn);
    w->ident = malloc(sizeof(int) * sn);
    if (!w->ord || !w->pos || !w->lastpos || !w->nw || !w->lorder || !w->ident) {
        sdp_orderer_free(w);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory scheduling %d nodes", c->n);
    }
    for (int i = 0; i < c->n; i++) w->ident[i] = i;
    return IR_OK;
}

void sdp_orderer_free(sdp_orderer *w) {
    if (!w) return;
    free(w->ord);
    free(w->pos);
    free(w->lastpos);
    free(w->nw);
    free(w->lorder);
    free(w->ident);
    memset(w, 0, sizeof *w);
}

/* Writes a window's new local order into the whole order and refreshes positions. */
static void apply_window(sdp_orderer *w, const sdp_prob *p, int lo, const int *lorder) {
    for (int s = 0; s < p->m; s++) w->ord[lo + s] = p->node[lorder[s]];
    sdp_positions_update(w->c, w->ord, lo, lo + p->m, w->pos, w->lastpos);
}

/* A lower bound of any order's peak: every node's step holds its inputs and outputs. */
static size_t lower_bound(const sdp_prob *p) {
    size_t lb = p->base;
    for (int x = 0; x < p->m; x++) {
        size_t b = p->base + p->add[x];
        for (int k = p->fo[x]; k < p->fo[x + 1]; k++) b += p->vb[p->fr[k]];
        if (b > lb) lb = b;
    }
    return lb;
}

/* How to search a window. */
typedef struct how {
    bool contract; /* over contracted chains (sdp_units_build) */
    bool prune;    /* drop states above the best known peak: exact search. Without, a beam
                    * always completes, which gives a bound when nothing is known yet. */
    bool soft;     /* adaptive soft budget after an overflow */
    int width;
    long max_rec;
    double deadline;
} how;

/* Searches p over units u for an order below *best (then updated, with lorder). With soft
 * budgeting, an overflowing search is followed by searches under a bisected budget. *exact
 * tells whether the result is proven optimal. */
static ir_status solve_units(sdp_orderer *w, const sdp_prob *p, const sdp_units *u, const how *h,
                             size_t *best, int *lorder, bool *exact, ir_diag *d) {
    sdp_search_result r;
    sdp_search_opts so = {.tau = h->prune ? *best - 1 : SIZE_MAX,
                          .width = h->width,
                          .max_records = h->max_rec,
                          .even = !h->prune,
                          .deadline = h->deadline};
    int *tmp = w->lorder + p->m; /* second half of the scratch */
    *exact = false;
    if (*best == 0) return IR_OK;
    ir_status st = sdp_search(p, u, &so, tmp, &r, d);
    w->st->states += r.states;
    if (st != IR_OK) return st;
    if (r.found && r.peak < *best) {
        *best = r.peak;
        memcpy(lorder, tmp, sizeof(int) * (size_t)p->m);
    }
    *exact = h->prune && !r.overflow && !r.timeout;
    if (!h->prune || !r.overflow || r.timeout || !h->soft) return IR_OK;
    /* Adaptive soft budget: the lowest tau that still finds an order, to a resolution of 1/128
     * of the best peak so far. An overflowing search that finds nothing counts as infeasible. */
    size_t lo = lower_bound(p), hi = *best - 1;
    while (lo <= hi && hi - lo > *best / 128 && ir_now_seconds() < h->deadline) {
        so.tau = lo + (hi - lo) / 2;
        st = sdp_search(p, u, &so, tmp, &r, d);
        w->st->states += r.states;
        if (st != IR_OK) return st;
        if (r.timeout) break;
        if (r.found) {
            *best = r.peak;
            memcpy(lorder, tmp, sizeof(int) * (size_t)p->m);
            hi = r.peak - 1;
        } else {
            lo = so.tau + 1;
        }
    }
    return IR_OK;
}

/* Re-orders window [lo, hi) of the current order as h says, keeping the result only when it
 * lowers the window's peak; *peak receives the window's peak afterwards. */
static ir_status solve_range(sdp_orderer *w, int lo, int hi, const how *h, bool *exact,
                             size_t *peak, ir_diag *d) {
    sdp_prob p;
    sdp_units u = {0};
    ir_status st = sdp_prob_build(w->c, w->ord, w->pos, w->lastpos, lo, hi, &p, d);
    if (st != IR_OK) return st;
    size_t seed = sdp_prob_eval(&p, w->ident, NULL, NULL), best = seed;
    st = sdp_units_build(&p, h->contract, &u, d);
    if (st == IR_OK) st = solve_units(w, &p, &u, h, &best, w->lorder, exact, d);
    if (st == IR_OK && best < seed) apply_window(w, &p, lo, w->lorder);
    *peak = best;
    sdp_units_free(&u);
    sdp_prob_free(&p);
    return st;
}

ir_status sdp_window_peak(sdp_orderer *w, int lo, int hi, size_t *peak, int *at, ir_diag *d) {
    sdp_prob p;
    ir_status st = sdp_prob_build(w->c, w->ord, w->pos, w->lastpos, lo, hi, &p, d);
    if (st != IR_OK) return st;
    *peak = sdp_prob_eval(&p, w->ident, NULL, at);
    *at += lo;
    sdp_prob_free(&p);
    return IR_OK;
}

ir_status sdp_refine(sdp_orderer *w, int lo, int hi, int kc, size_t *peak, ir_diag *d) {
    ir_status st = IR_OK;
    int kn = w->exact_max, q;
    if (!w->have_nw) { /* for the windows that start at a narrow waist */
        if ((st = sdp_narrow_waist(w->c, w->nw, d)) != IR_OK) return st;
        w->have_nw = true;
    }
    for (;;) {
        if ((st = sdp_window_peak(w, lo, hi, peak, &q, d)) != IR_OK) return st;
        if (ir_now_seconds() >= w->deadline) break;
        bool improved = false;
        for (int pass = 0; pass < 2 && !improved; pass++) {
            int K = pass == 0 ? kc : kn;
            if (K < 2 || (pass == 1 && kc >= 2 && kn >= kc) || hi - lo <= K) continue;
            /* Windows holding q: centred, ending at q, starting at q, and starting after the
             * nearest narrow-waist (nw <= 1) node before q. */
            int starts[4], ns = 0;
            starts[ns++] = q - K / 2;
            starts[ns++] = q - K + 1;
            starts[ns++] = q;
            for (int s = q - 1; s > q - K && s >= lo; s--)
                if (w->nw[w->ord[s]] <= 1) {
                    starts[ns++] = s + 1;
                    break;
                }
            double now = ir_now_seconds(), left = w->deadline - now;
            how h = {.contract = pass == 0,
                     .prune = true,
                     .width = pass == 0 ? SDP_EXACT_WIDTH : SDP_WINDOW_WIDTH,
                     .max_rec = w->max_states / 4,
                     .deadline = now + (left < w->window_s ? left : w->window_s)};
            for (int i = 0; i < ns && !improved; i++) {
                int a = starts[i];
                if (a > hi - K) a = hi - K;
                if (a < lo) a = lo;
                bool exact;
                size_t wp;
                st = solve_range(w, a, a + K, &h, &exact, &wp, d);
                if (st != IR_OK) return st;
                improved = wp < *peak;
            }
        }
        if (!improved) break;
    }
    return st;
}

/* A part larger than exact_max_nodes: a beam over contracted chains, the DP over them when
 * they are few, then refinement. */
static ir_status solve_big(sdp_orderer *w, int lo, int hi, size_t *peak, ir_diag *d) {
    sdp_prob p;
    sdp_units u = {0};
    ir_status st = sdp_prob_build(w->c, w->ord, w->pos, w->lastpos, lo, hi, &p, d);
    if (st != IR_OK) return st;
    size_t seed = sdp_prob_eval(&p, w->ident, NULL, NULL), best = seed;
    st = sdp_units_build(&p, true, &u, d);
    if (st != IR_OK) goto out;
    bool exact;
    /* Half the time left goes to the search, the rest to refinement and later parts. */
    double now = ir_now_seconds();
    how h = {.contract = true,
             .prune = false,
             .width = w->beam,
             .max_rec = w->max_states,
             .deadline = now + (w->deadline - now) / 2};
    st = solve_units(w, &p, &u, &h, &best, w->lorder, &exact, d);
    if (st == IR_OK && 2 * u.nu <= 3 * w->exact_max) {
        h.prune = h.soft = true;
        h.width = SDP_EXACT_WIDTH;
        st = solve_units(w, &p, &u, &h, &best, w->lorder, &exact, d);
    }
    if (st != IR_OK) goto out;
    if (best < seed) apply_window(w, &p, lo, w->lorder);
    *peak = best;
    /* Contracted windows of about exact_max units. */
    long kc = (long)w->exact_max * p.m / (u.nu ? u.nu : 1);
    st = sdp_refine(w, lo, hi, kc < hi - lo ? (int)kc : hi - lo, peak, d);
out:
    sdp_units_free(&u);
    sdp_prob_free(&p);
    return st;
}

ir_status sdp_order_part(sdp_orderer *w, int lo, int hi, size_t *peak, bool *exact, ir_diag *d) {
    *exact = false;
    if (hi - lo > w->exact_max) return solve_big(w, lo, hi, peak, d);
    how h = {.prune = true,
             .soft = true,
             .width = SDP_EXACT_WIDTH,
             .max_rec = w->max_states,
             .deadline = w->deadline};
    return solve_range(w, lo, hi, &h, exact, peak, d);
}

typedef struct part {
    int lo, hi;
    size_t seed; /* peak of the part's steps in index order */
    size_t peak; /* after scheduling */
} part;

static int part_cmp(const void *a, const void *b) {
    const part *x = a, *y = b;
    if (x->seed != y->seed) return x->seed > y->seed ? -1 : 1;
    return x->lo - y->lo;
}

ir_status sched_order_memory(const ir_graph *g, const sched_dp_options *o, int *order,
                             sched_dp_stats *st_out, ir_diag *d) {
    double t0 = ir_now_seconds();
    sched_dp_stats stats = {0};
    int n = g->n_nodes;
    sdp_ctx c;
    sdp_orderer w = {0};
    sched_memory mem = {0}, eager_mem = {0};
    part *parts = NULL;
    int *start = NULL;
    ir_status st = sdp_ctx_init(&c, g, d);
    if (st != IR_OK) return st;
    if ((st = sdp_orderer_init(&w, &c, o, SDP_BEAM_DEFAULT, &stats, d)) != IR_OK) goto out;
    size_t sn = (size_t)n + 1;
    start = malloc(sizeof(int) * (sn + 1));
    parts = malloc(sizeof(part) * sn);
    if (!start || !parts) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory scheduling %d nodes", n);
        goto out;
    }
    /* The working order starts as the node index order, which is topological (ir.h) and keeps
     * each part contiguous; the eager order (sched_eager_order) is the baseline. */
    for (int i = 0; i < n; i++) w.ord[i] = i;
    if ((st = sched_memory_compute(g, w.ord, &mem, d)) != IR_OK) goto out;
    if ((st = sched_memory_compute(g, NULL, &eager_mem, d)) != IR_OK) goto out;
    if ((st = sdp_narrow_waist(&c, w.nw, d)) != IR_OK) goto out;
    w.have_nw = true;
    sdp_positions(&c, w.ord, w.pos, w.lastpos);

    int np = n ? sdp_partition(w.nw, n, start) : 0;
    for (int i = 0; i < np; i++) {
        parts[i] = (part){.lo = start[i], .hi = start[i + 1], .seed = 0};
        for (int s = start[i]; s < start[i + 1]; s++)
            if (mem.step_bytes[s] > parts[i].seed) parts[i].seed = mem.step_bytes[s];
        parts[i].peak = parts[i].seed;
    }
    qsort(parts, (size_t)np, sizeof(part), part_cmp);
    stats.parts = np;
    size_t reached = 0; /* the peak of the parts solved so far: no order goes below it */
    for (int i = 0; i < np && ir_now_seconds() < w.deadline; i++) {
        part *pt = &parts[i];
        if (pt->seed <= reached || pt->hi - pt->lo < 2) continue;
        size_t peak;
        bool exact;
        if ((st = sdp_order_part(&w, pt->lo, pt->hi, &peak, &exact, d)) != IR_OK) goto out;
        if (exact)
            stats.exact_parts++;
        else
            stats.beam_parts++;
        pt->peak = peak;
        if (peak > reached) reached = peak;
    }

    /* The search's own account of the result: the max over parts of their window peaks (a part
     * left alone keeps its steps, hence its peak). It must be what sched_memory_compute finds
     * for the order, or the model is out of step with it; with fission groups the search only
     * estimates their replays (sdp_ctx.floor), and sched_memory_compute's peak is the one. */
    size_t claim = mem.resident_bytes;
    for (int i = 0; i < np; i++)
        if (parts[i].peak > claim) claim = parts[i].peak;
    sched_memory_free(&mem);
    if (!sched_order_valid(g, w.ord, n) || sched_memory_compute(g, w.ord, &mem, d) != IR_OK ||
        (!c.floor && mem.peak_bytes != claim)) {
        st = ir_diag_set(d, IR_ERR_INTERNAL,
                         "%s: the memory order is invalid or its peak (%zu bytes) is not the "
                         "searched one (%zu bytes)",
                         g->source ? g->source : "graph", mem.peak_bytes, claim);
        goto out;
    }
    stats.peak_bytes = mem.peak_bytes;
    if (mem.peak_bytes < eager_mem.peak_bytes) {
        memcpy(order, w.ord, sizeof(int) * (size_t)n);
    } else {
        int *eager = sched_eager_order(g);
        if (!eager) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the eager order");
            goto out;
        }
        memcpy(order, eager, sizeof(int) * (size_t)n);
        free(eager);
        stats.peak_bytes = eager_mem.peak_bytes;
    }
out:
    stats.seconds = ir_now_seconds() - t0;
    if (st_out) *st_out = stats;
    sched_memory_free(&mem);
    sched_memory_free(&eager_mem);
    free(start);
    free(parts);
    sdp_orderer_free(&w);
    sdp_ctx_free(&c);
    return st;
}
