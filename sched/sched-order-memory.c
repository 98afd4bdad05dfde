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
 * Memory is bounded by max_states records per search plus per-level tables sized before the
 * search; time by time_budget_s (checked per level). The result is deterministic unless the
 * budget runs out. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

#define SDP_EXACT_MAX_DEFAULT 32
#define SDP_BEAM_DEFAULT 1024
#define SDP_TIME_DEFAULT 10.0
#define SDP_STATES_DEFAULT (1l << 22) /* memo records, 8 bytes each */
#define SDP_EXACT_WIDTH (1 << 18)     /* states per level of an exact search */
#define SDP_WINDOW_WIDTH (1 << 13)    /* states per level when refining a window */
#define SDP_WINDOW_SECONDS 1.0        /* at most per refining window */

typedef struct driver {
    sdp_ctx c;
    int exact_max, beam;
    long max_states;
    double deadline;
    int *ord, *pos, *lastpos, *nw;
    int *lorder; /* n scratch: a window's new local order */
    int *ident;  /* 0..n-1 */
    sched_dp_stats *st;
} driver;

/* Writes a window's new local order into the whole order and refreshes positions. */
static void apply_window(driver *dr, const sdp_prob *p, int lo, const int *lorder) {
    for (int s = 0; s < p->m; s++) dr->ord[lo + s] = p->node[lorder[s]];
    sdp_positions_update(&dr->c, dr->ord, lo, lo + p->m, dr->pos, dr->lastpos);
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
static ir_status solve_units(driver *dr, const sdp_prob *p, const sdp_units *u, const how *h,
                             size_t *best, int *lorder, bool *exact, ir_diag *d) {
    sdp_search_result r;
    sdp_search_opts so = {.tau = h->prune ? *best - 1 : SIZE_MAX,
                          .width = h->width,
                          .max_records = h->max_rec,
                          .even = !h->prune,
                          .deadline = h->deadline};
    int *tmp = dr->lorder + p->m; /* second half of the scratch */
    *exact = false;
    if (*best == 0) return IR_OK;
    ir_status st = sdp_search(p, u, &so, tmp, &r, d);
    dr->st->states += r.states;
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
    while (lo <= hi && hi - lo > *best / 128 && sdp_now() < h->deadline) {
        so.tau = lo + (hi - lo) / 2;
        st = sdp_search(p, u, &so, tmp, &r, d);
        dr->st->states += r.states;
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
static ir_status solve_range(driver *dr, int lo, int hi, const how *h, bool *exact, size_t *peak,
                             ir_diag *d) {
    sdp_prob p;
    sdp_units u = {0};
    ir_status st = sdp_prob_build(&dr->c, dr->ord, dr->pos, dr->lastpos, lo, hi, &p, d);
    if (st != IR_OK) return st;
    size_t seed = sdp_prob_eval(&p, dr->ident, NULL, NULL), best = seed;
    st = sdp_units_build(&p, h->contract, &u, d);
    if (st == IR_OK) st = solve_units(dr, &p, &u, h, &best, dr->lorder, exact, d);
    if (st == IR_OK && best < seed) apply_window(dr, &p, lo, dr->lorder);
    *peak = best;
    sdp_units_free(&u);
    sdp_prob_free(&p);
    return st;
}

/* Windows around the peak step of part [lo, hi), re-ordered exactly while that lowers the
 * part's peak: first windows of about exact_max contracted units (kc nodes), then of
 * exact_max single nodes. */
static ir_status refine(driver *dr, int lo, int hi, int kc, size_t *peak, ir_diag *d) {
    ir_status st = IR_OK;
    int kn = dr->exact_max;
    for (;;) {
        sdp_prob p;
        int q;
        st = sdp_prob_build(&dr->c, dr->ord, dr->pos, dr->lastpos, lo, hi, &p, d);
        if (st != IR_OK) return st;
        *peak = sdp_prob_eval(&p, dr->ident, NULL, &q);
        sdp_prob_free(&p);
        if (sdp_now() >= dr->deadline) break;
        q += lo;
        bool improved = false;
        for (int pass = 0; pass < 2 && !improved; pass++) {
            int K = pass == 0 ? kc : kn;
            if (K < 2 || (pass == 1 && kn >= kc) || hi - lo <= K) continue;
            /* Windows holding q: centred, ending at q, starting at q, and starting after the
             * nearest narrow-waist (nw <= 1) node before q. */
            int starts[4], ns = 0;
            starts[ns++] = q - K / 2;
            starts[ns++] = q - K + 1;
            starts[ns++] = q;
            for (int s = q - 1; s > q - K && s >= lo; s--)
                if (dr->nw[dr->ord[s]] <= 1) {
                    starts[ns++] = s + 1;
                    break;
                }
            double now = sdp_now(), left = dr->deadline - now;
            how h = {.contract = pass == 0,
                     .prune = true,
                     .width = pass == 0 ? SDP_EXACT_WIDTH : SDP_WINDOW_WIDTH,
                     .max_rec = dr->max_states / 4,
                     .deadline = now + (left < SDP_WINDOW_SECONDS ? left : SDP_WINDOW_SECONDS)};
            for (int i = 0; i < ns && !improved; i++) {
                int a = starts[i];
                if (a > hi - K) a = hi - K;
                if (a < lo) a = lo;
                bool exact;
                size_t wp;
                st = solve_range(dr, a, a + K, &h, &exact, &wp, d);
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
static ir_status solve_big(driver *dr, int lo, int hi, size_t *peak, ir_diag *d) {
    sdp_prob p;
    sdp_units u = {0};
    ir_status st = sdp_prob_build(&dr->c, dr->ord, dr->pos, dr->lastpos, lo, hi, &p, d);
    if (st != IR_OK) return st;
    size_t seed = sdp_prob_eval(&p, dr->ident, NULL, NULL), best = seed;
    st = sdp_units_build(&p, true, &u, d);
    if (st != IR_OK) goto out;
    bool exact;
    /* Half the time left goes to the search, the rest to refinement and later parts. */
    double now = sdp_now();
    how h = {.contract = true,
             .prune = false,
             .width = dr->beam,
             .max_rec = dr->max_states,
             .deadline = now + (dr->deadline - now) / 2};
    st = solve_units(dr, &p, &u, &h, &best, dr->lorder, &exact, d);
    if (st == IR_OK && 2 * u.nu <= 3 * dr->exact_max) {
        h.prune = h.soft = true;
        h.width = SDP_EXACT_WIDTH;
        st = solve_units(dr, &p, &u, &h, &best, dr->lorder, &exact, d);
    }
    if (st != IR_OK) goto out;
    if (best < seed) apply_window(dr, &p, lo, dr->lorder);
    *peak = best;
    /* Contracted windows of about exact_max units. */
    long kc = (long)dr->exact_max * p.m / (u.nu ? u.nu : 1);
    st = refine(dr, lo, hi, kc < hi - lo ? (int)kc : hi - lo, peak, d);
out:
    sdp_units_free(&u);
    sdp_prob_free(&p);
    return st;
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
    double t0 = sdp_now();
    sched_dp_options defaults = {0};
    sched_dp_stats stats = {0};
    if (!o) o = &defaults;
    int n = g->n_nodes;
    driver dr = {.st = &stats};
    dr.exact_max = o->exact_max_nodes > 0 ? o->exact_max_nodes : SDP_EXACT_MAX_DEFAULT;
    dr.beam = o->beam_width > 0 ? o->beam_width : SDP_BEAM_DEFAULT;
    dr.max_states = o->max_states > 0 ? o->max_states : SDP_STATES_DEFAULT;
    dr.deadline = t0 + (o->time_budget_s > 0 ? o->time_budget_s : SDP_TIME_DEFAULT);
    sched_memory mem = {0}, eager_mem = {0};
    part *parts = NULL;
    int *start = NULL;
    ir_status st = sdp_ctx_init(&dr.c, g, d);
    if (st != IR_OK) return st;
    size_t sn = (size_t)n + 1;
    dr.ord = malloc(sizeof(int) * sn);
    dr.pos = malloc(sizeof(int) * sn);
    dr.lastpos = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    dr.nw = malloc(sizeof(int) * sn);
    dr.lorder = malloc(sizeof(int) * 2 * sn);
    dr.ident = malloc(sizeof(int) * sn);
    start = malloc(sizeof(int) * (sn + 1));
    parts = malloc(sizeof(part) * sn);
    if (!dr.ord || !dr.pos || !dr.lastpos || !dr.nw || !dr.lorder || !dr.ident || !start ||
        !parts) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory scheduling %d nodes", n);
        goto out;
    }
    /* The working order starts as the node index order, which is topological (ir.h) and keeps
     * each part contiguous; the eager order (sched_eager_order) is the baseline. */
    for (int i = 0; i < n; i++) dr.ord[i] = dr.ident[i] = i;
    if ((st = sched_memory_compute(g, dr.ord, &mem, d)) != IR_OK) goto out;
    if ((st = sched_memory_compute(g, NULL, &eager_mem, d)) != IR_OK) goto out;
    if ((st = sdp_narrow_waist(&dr.c, dr.nw, d)) != IR_OK) goto out;
    sdp_positions(&dr.c, dr.ord, dr.pos, dr.lastpos);

    int np = n ? sdp_partition(dr.nw, n, start) : 0;
    for (int i = 0; i < np; i++) {
        parts[i] = (part){.lo = start[i], .hi = start[i + 1], .seed = 0};
        for (int s = start[i]; s < start[i + 1]; s++)
            if (mem.step_bytes[s] > parts[i].seed) parts[i].seed = mem.step_bytes[s];
        parts[i].peak = parts[i].seed;
    }
    qsort(parts, (size_t)np, sizeof(part), part_cmp);
    stats.parts = np;
    size_t reached = 0; /* the peak of the parts solved so far: no order goes below it */
    for (int i = 0; i < np && sdp_now() < dr.deadline; i++) {
        part *pt = &parts[i];
        if (pt->seed <= reached || pt->hi - pt->lo < 2) continue;
        size_t peak;
        bool exact = false;
        if (pt->hi - pt->lo <= dr.exact_max) {
            how h = {.prune = true,
                     .soft = true,
                     .width = SDP_EXACT_WIDTH,
                     .max_rec = dr.max_states,
                     .deadline = dr.deadline};
            st = solve_range(&dr, pt->lo, pt->hi, &h, &exact, &peak, d);
        } else {
            st = solve_big(&dr, pt->lo, pt->hi, &peak, d);
        }
        if (st != IR_OK) goto out;
        if (exact)
            stats.exact_parts++;
        else
            stats.beam_parts++;
        pt->peak = peak;
        if (peak > reached) reached = peak;
    }

    /* The search's own account of the result: the max over parts of their window peaks (a part
     * left alone keeps its steps, hence its peak). It must be what sched_memory_compute finds
     * for the order, or the model is out of step with it. */
    size_t claim = mem.resident_bytes;
    for (int i = 0; i < np; i++)
        if (parts[i].peak > claim) claim = parts[i].peak;
    sched_memory_free(&mem);
    if (!sched_order_valid(g, dr.ord, n) || sched_memory_compute(g, dr.ord, &mem, d) != IR_OK ||
        mem.peak_bytes != claim) {
        st = ir_diag_set(d, IR_ERR_INTERNAL,
                         "%s: the memory order is invalid or its peak (%zu bytes) is not the "
                         "searched one (%zu bytes)",
                         g->source ? g->source : "graph", mem.peak_bytes, claim);
        goto out;
    }
    stats.peak_bytes = claim;
    if (mem.peak_bytes < eager_mem.peak_bytes) {
        memcpy(order, dr.ord, sizeof(int) * (size_t)n);
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
    stats.seconds = sdp_now() - t0;
    if (st_out) *st_out = stats;
    sched_memory_free(&mem);
    sched_memory_free(&eager_mem);
    free(dr.ord);
    free(dr.pos);
    free(dr.lastpos);
    free(dr.nw);
    free(dr.lorder);
    free(dr.ident);
    free(start);
    free(parts);
    sdp_ctx_free(&dr.c);
    return st;
}
