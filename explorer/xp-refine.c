/* xp-refine.c - xs_search_refined (explorer.h): the memory-limit search followed by
 * latency-bounded searches that bisect the latency of the best plan within the limit. Each
 * search is a whole xs_search from the start state (its own pool, fingerprint set and
 * F-Tree); what carries over is the best plan and the bounds. When the first search finds no
 * plan within the limit, a second memory-limit search gets the rest of the budget. */
#include "explorer-impl.h"

/* into's counters += from's: the refined result reports the work of every search. */
static void add_counts(xs_result *into, const xs_result *from) {
    xp_worker_stats *a = &into->stats.total;
    const xp_worker_stats *b = &from->stats.total;
    xp_worker_stats_add(a, b);
    /* the searches run one after another: their frontiers never coexist */
    if (b->frontier_peak > a->frontier_peak) a->frontier_peak = b->frontier_peak;
    into->stats.seconds += from->stats.seconds;
    into->stats.expand_seconds += from->stats.expand_seconds;
    into->stats.idle_seconds += from->stats.idle_seconds;
    into->stats.cpu_seconds += from->stats.cpu_seconds;
    into->search_seconds += from->search_seconds;
    into->start_seconds += from->start_seconds;
    for (int k = 0; k < XS_PHASE_COUNT; k++) into->phase_seconds[k] += from->phase_seconds[k];
    into->cache_hits += from->cache_hits;
    into->cache_misses += from->cache_misses;
    into->replay_steps += from->replay_steps;
    into->replay_mismatches += from->replay_mismatches;
    into->failed_children += from->failed_children;
    into->pet_seconds += from->pet_seconds;
}

ir_status xs_search_refined(const ir_graph *g, const xs_options *o, xs_result *r, ir_diag *d) {
    if (o->mode != XS_MODE_MEM || (o->max_seconds <= 0 && !o->max_states))
        return xs_search(g, o, r, d);
    xs_options first = *o;
    if (o->max_seconds > 0) first.max_seconds = XS_REFINE_FIRST_SHARE * o->max_seconds;
    /* at least one state each: 0 would mean xs_search's default budget */
    if (o->max_states) {
        first.max_states = (size_t)(XS_REFINE_FIRST_SHARE * (double)o->max_states);
        if (!first.max_states) first.max_states = 1;
    }
    first.checkpoint = NULL;
    first.resume = NULL;
    double t0 = ir_now_seconds();
    ir_status st = xs_search(g, &first, r, d);
    if (st != IR_OK || r->interrupted) return st;
    if ((double)r->best_peak_bytes > o->limit) {
        /* no plan within the limit yet: the memory-limit search gets the rest of the budget
         * (from the start state again, so it reaches at least as far as the first one), and
         * the rounds whatever that leaves */
        xs_options more = first;
        if (o->max_seconds > 0) {
            more.max_seconds = o->max_seconds - (ir_now_seconds() - t0);
            if (more.max_seconds <= 0) return st;
        }
        if (o->max_states) more.max_states = o->max_states - first.max_states;
        if (!more.max_states && o->max_states) return st;
        xs_result r2;
        if ((st = xs_search(g, &more, &r2, d)) != IR_OK) {
            xs_result_free(r);
            return st;
        }
        bool better = r2.best_peak_bytes < r->best_peak_bytes;
        if (better) {
            add_counts(&r2, r);
            xs_result_free(r);
            *r = r2;
        } else {
            add_counts(r, &r2);
            xs_result_free(&r2);
        }
        if (r->interrupted || (double)r->best_peak_bytes > o->limit) return st;
    }
    double lo = r->start_latency_s, hi = r->best_latency_s;
    for (int k = 0; k < XS_REFINE_ROUNDS && lo < hi; k++) {
        xs_options lat = first;
        lat.mode = XS_MODE_LAT;
        lat.limit = 0.5 * (lo + hi);
        /* within the memory limit, the faster plan is the better (explorer.h) */
        lat.target = o->limit;
        if (o->rules & XS_RULE_REMAT) lat.rules |= XS_RULE_CHAIN;
        if (o->max_seconds > 0) {
            double left = o->max_seconds - (ir_now_seconds() - t0);
            if (left <= 0) break;
            lat.max_seconds = left / (XS_REFINE_ROUNDS - k);
        }
        if (o->max_states) {
            size_t share = (o->max_states - first.max_states) / XS_REFINE_ROUNDS;
            lat.max_states = share ? share : 1;
        }
        xs_result r2;
        if ((st = xs_search(g, &lat, &r2, d)) != IR_OK) {
            xs_result_free(r);
            return st;
        }
        bool stop = r2.interrupted;
        r->refine_rounds++;
        if ((double)r2.best_peak_bytes <= o->limit && r2.best_latency_s < r->best_latency_s) {
            /* r2 becomes the result, with the counts of every search so far */
            add_counts(&r2, r);
            r2.refine_rounds = r->refine_rounds;
            r2.refine_improved = r->refine_improved + 1;
            r2.refine_bound_s = lat.limit;
            xs_result_free(r);
            *r = r2;
            hi = r->best_latency_s;
        } else {
            add_counts(r, &r2);
            xs_result_free(&r2);
            lo = lat.limit;
        }
        if (stop) {
            r->interrupted = true;
            break;
        }
    }
    return IR_OK;
}
