/* xp-refine.c - xs_search_refined (explorer.h): the memory-limit search followed by
 * latency-bounded searches that bisect the latency of the best plan within the limit. Each
 * search is a whole xs_search from the start state (its own pool, fingerprint set and
 * F-Tree); what carries over is the best plan and the bounds. When the first search finds no
 * plan within the limit, the rounds run all the same: any plan within it, or else the lowest
 * peak, becomes the best. */
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
    size_t states_left = o->max_states ? o->max_states - first.max_states : 0;
    if ((double)r->best_peak_bytes > o->limit) {
        /* no plan within the limit yet: the memory-limit search gets half of what is left (from
         * the start state again, so it reaches further than the first one: the U-Net of the
         * corpus gets within 0.4 between 375 and 562 states), and the rounds the other half */
        xs_options more = first;
        if (o->max_seconds > 0) {
            more.max_seconds = 0.5 * (o->max_seconds - (ir_now_seconds() - t0));
            if (more.max_seconds <= 0) return st;
        }
        if (o->max_states) {
            more.max_states = states_left / 2 ? states_left / 2 : 1;
            states_left -= more.max_states;
        }
        xs_result r2;
        if ((st = xs_search(g, &more, &r2, d)) != IR_OK) {
            xs_result_free(r);
            return st;
        }
        if (r2.best_peak_bytes < r->best_peak_bytes) {
            add_counts(&r2, r);
            xs_result_free(r);
            *r = r2;
        } else {
            add_counts(r, &r2);
            xs_result_free(&r2);
        }
        if (r->interrupted) return st;
    }
    /* Still not within the limit: Algorithm 3 ranks the states above it by memory alone, so it
     * frees the most bytes first whatever they cost, and can end where no single remat or swap
     * lowers the peak (ResNet-50: 0.456 of the eager peak at 1.289 of its latency, 38 rewrites
     * deep, 10 of them swaps, and 360 expansions later still there), while a search that ranks
     * by memory within a latency bound takes the cheap rewrites first and gets lower (0.356 at
     * 1.135 under --lat-limit 1.144 in 1,500 states). So the rounds run all the same, and until
     * one meets the limit a plan of lower peak becomes the best. */
    bool met = (double)r->best_peak_bytes <= o->limit;
    double lo = r->start_latency_s, hi = r->best_latency_s;
    /* a best above the limit that spent no latency still leaves the rounds a range */
    if (!met && hi < XS_REFINE_MISSED_HI * lo) hi = XS_REFINE_MISSED_HI * lo;
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
            size_t share = states_left / XS_REFINE_ROUNDS;
            lat.max_states = share ? share : 1;
        }
        xs_result r2;
        if ((st = xs_search(g, &lat, &r2, d)) != IR_OK) {
            xs_result_free(r);
            return st;
        }
        bool stop = r2.interrupted;
        r->refine_rounds++;
        bool r2_met = (double)r2.best_peak_bytes <= o->limit;
        bool took = r2_met ? !met || r2.best_latency_s < r->best_latency_s
                           : !met && r2.best_peak_bytes < r->best_peak_bytes;
        if (took) {
            /* r2 becomes the result, with the counts of every search so far */
            add_counts(&r2, r);
            r2.refine_rounds = r->refine_rounds;
            r2.refine_improved = r->refine_improved + 1;
            r2.refine_bound_s = lat.limit;
            xs_result_free(r);
            *r = r2;
        } else {
            add_counts(r, &r2);
            xs_result_free(&r2);
        }
        if (took && r2_met)
            hi = r->best_latency_s;
        else
            lo = lat.limit;
        met = met || r2_met;
        if (stop) {
            r->interrupted = true;
            break;
        }
    }
    return IR_OK;
}
