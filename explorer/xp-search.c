/* xp-search.c - xs_search, the memory optimizer's search (MAGIS section 6.2, Algorithm 3) on the
 * best-first pool: states, their expansion by the schedule-based rules of rules.h, the mode's
 * BetterThan, and the calling thread's progress and interrupt loop. See explorer.h. */
#define _POSIX_C_SOURCE 200809L
#include "explorer.h"
#include "rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CANDIDATES 512

typedef struct xs_state {
    ir_graph *g;
    int *order;
    size_t peak;
    double lat;
    int applied[RW_KIND_COUNT];
} xs_state;

typedef struct xs_ctx {
    const xs_options *o;
    double limit, delta;
    sched_dp_options dp;
} xs_ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool xs_better(int mode, double limit, size_t a_mem, double a_lat, size_t b_mem, double b_lat,
               double delta) {
    double a0, a1, b0, b1;
    if (mode == XS_MODE_LAT) {
        a0 = a_lat, a1 = (double)a_mem, b0 = b_lat, b1 = (double)b_mem;
    } else {
        a0 = (double)a_mem, a1 = a_lat, b0 = (double)b_mem, b1 = b_lat;
    }
    double x0 = fmax(a0, limit), y0 = fmax(delta * b0, limit);
    if (x0 != y0) return x0 < y0;
    return a1 < delta * b1;
}

static xp_key key_of(const xs_ctx *c, size_t peak, double lat) {
    xp_key k;
    if (c->o->mode == XS_MODE_LAT) {
        k.k[0] = lat;
        k.k[1] = (double)peak;
    } else {
        k.k[0] = (double)peak;
        k.k[1] = lat;
    }
    return k;
}

static bool cb_better(void *ctx, const xp_key *a, const xp_key *b, double delta) {
    const xs_ctx *c = ctx;
    double x0 = fmax(a->k[0], c->limit), y0 = fmax(delta * b->k[0], c->limit);
    if (x0 != y0) return x0 < y0;
    return a->k[1] < delta * b->k[1];
}

static void state_free(xs_state *s) {
    if (!s) return;
    ir_graph_free(s->g);
    free(s->order);
    free(s);
}

static void cb_free(void *ctx, void *state) {
    (void)ctx;
    state_free(state);
}

static bool has_swaps(const ir_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_Store || g->nodes[i].op == IR_OP_Load) return true;
    return false;
}

/* Places swaps (when any) and simulates s->order into s->peak, s->lat. */
static ir_status evaluate(const xs_ctx *c, xs_state *s, ir_diag *d) {
    ir_status st;
    if (has_swaps(s->g) &&
        (st = sched_place_swaps(s->g, s->order, c->o->cost, s->order, d)) != IR_OK)
        return st;
    sched_sim sim = {0};
    if ((st = sched_simulate(s->g, s->order, c->o->cost, &sim, d)) != IR_OK) return st;
    s->peak = sim.peak_device_bytes;
    s->lat = sim.latency_s;
    sched_sim_free(&sim);
    return IR_OK;
}

static bool family_enabled(unsigned rules, int kind) {
    if (kind == RW_REMAT || kind == RW_DEREMAT) return (rules & XS_RULE_REMAT) != 0;
    if (kind == RW_SWAP || kind == RW_DESWAP) return (rules & XS_RULE_SWAP) != 0;
    return false;
}

static void cb_expand(void *ctx, xp_worker *w, const void *state) {
    const xs_ctx *c = ctx;
    const xs_state *s = state;
    ir_diag d = {{0}};
    sched_memory m = {0};
    rw_rewrite *cand = malloc(sizeof(rw_rewrite) * MAX_CANDIDATES);
    if (!cand || sched_memory_compute(s->g, s->order, &m, &d) != IR_OK) {
        free(cand);
        return;
    }
    int n = rw_candidates(s->g, &m, cand, MAX_CANDIDATES);
    sched_memory_free(&m);
    for (int i = 0; i < n; i++) {
        if (!family_enabled(c->o->rules, cand[i].kind)) continue;
        uint32_t touched[RW_MAX_TOUCHED];
        int n_touched = 0;
        ir_graph *ng = rw_apply(s->g, &cand[i], touched, &n_touched, NULL, &d);
        if (!ng) continue;
        xs_state *ch = calloc(1, sizeof *ch);
        int *ord = malloc(sizeof(int) * ((size_t)ng->n_nodes + 1));
        if (!ch || !ord) {
            free(ch);
            free(ord);
            ir_graph_free(ng);
            continue;
        }
        ch->g = ng;
        ch->order = ord;
        memcpy(ch->applied, s->applied, sizeof ch->applied);
        ch->applied[cand[i].kind]++;
        if (sched_incremental(s->g, s->order, ng, touched, n_touched, &c->dp, ord, &d) != IR_OK ||
            evaluate(c, ch, &d) != IR_OK) {
            state_free(ch);
            continue;
        }
        uint64_t fp = ir_graph_hash(ng);
        xp_emit_result er = xp_emit(w, ch, fp, key_of(c, ch->peak, ch->lat));
        if (er == XP_EMIT_STOPPED) break;
    }
    free(cand);
}

static ir_status start_state(const ir_graph *g, const xs_ctx *c, xs_result *r, xs_state **out,
                             ir_diag *d) {
    ir_status st;
    xs_state *e = calloc(1, sizeof *e), *mo = NULL;
    if (!e || !(e->g = ir_graph_clone(g)) || !(e->order = sched_eager_order(g))) {
        state_free(e);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    if ((st = evaluate(c, e, d)) != IR_OK) goto fail;
    r->eager_peak_bytes = e->peak;
    r->eager_latency_s = e->lat;
    if (c->o->rules & XS_RULE_REORDER) {
        mo = calloc(1, sizeof *mo);
        if (!mo || !(mo->g = ir_graph_clone(g)) ||
            !(mo->order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)))) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
            goto fail;
        }
        sched_dp_stats dps;
        if ((st = sched_order_memory(g, NULL, mo->order, &dps, d)) != IR_OK ||
            (st = evaluate(c, mo, d)) != IR_OK)
            goto fail;
        if (xs_better(c->o->mode, c->limit, mo->peak, mo->lat, e->peak, e->lat, 1.0)) {
            state_free(e);
            e = mo;
        } else {
            state_free(mo);
        }
        mo = NULL;
    }
    r->start_peak_bytes = e->peak;
    r->start_latency_s = e->lat;
    *out = e;
    return IR_OK;
fail:
    state_free(e);
    state_free(mo);
    return st;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

ir_status xs_search(const ir_graph *g, const xs_options *o, xs_result *r, ir_diag *d) {
    memset(r, 0, sizeof *r);
    xs_ctx c = {.o = o, .limit = o->limit, .delta = o->delta > 0 ? o->delta : 1.1};
    /* Bounds one incremental re-schedule: a state budget (deterministic; on the training
     * fixtures 64 Ki states gave more states per second than the default at a similar best)
     * and a time budget that only a pathological window reaches. */
    c.dp.time_budget_s = 2.0;
    c.dp.max_states = 65536;
    double t0 = now_s();
    xs_state *root = NULL;
    ir_status st = start_state(g, &c, r, &root, d);
    if (st != IR_OK) return st;
    r->start_seconds = now_s() - t0;
    xp_pool_opts po = xp_pool_opts_default();
    po.threads = o->threads;
    po.seed = o->seed;
    po.delta = c.delta;
    po.max_seconds = o->max_seconds;
    po.max_states = o->max_states;
    xp_callbacks cb = {.expand = cb_expand, .better = cb_better, .free_state = cb_free};
    xp_pool *p = xp_pool_init(&po, &cb, &c);
    if (!p) {
        state_free(root);
        return ir_diag_set(d, IR_ERR_NOMEM, "cannot create the search pool");
    }
    uint64_t root_fp = ir_graph_hash(root->g);
    xp_key root_key = key_of(&c, root->peak, root->lat);
    if (!xp_pool_start(p, root, root_fp, root_key)) {
        xp_pool_free(p);
        return ir_diag_set(d, IR_ERR_INTERNAL, "cannot start the search threads");
    }
    double t1 = now_s(), next = t1 + 1.0;
    for (;;) {
        xp_pool_stats ps;
        xp_pool_get_stats(p, &ps, NULL, 0);
        if (ps.reason != XP_STOP_NONE) break;
        if (o->interrupt && *o->interrupt && !r->interrupted) {
            r->interrupted = true;
            xp_pool_request_stop(p);
        }
        double t = now_s();
        if (o->progress && t >= next) {
            const xs_state *b = xp_pool_best(p, NULL);
            xs_progress pr = {.seconds = t - t1,
                              .expanded = ps.total.expanded,
                              .generated = ps.total.generated,
                              .best_peak_bytes = b->peak,
                              .best_latency_s = b->lat};
            o->progress(o->progress_arg, &pr);
            next += 1.0;
        }
        sleep_s(0.01);
    }
    xp_pool_wait(p);
    r->search_seconds = now_s() - t1;
    xp_pool_get_stats(p, &r->stats, NULL, 0);
    const xs_state *b = xp_pool_best(p, NULL);
    r->best = ir_graph_clone(b->g);
    r->best_order = malloc(sizeof(int) * ((size_t)b->g->n_nodes + 1));
    if (!r->best || !r->best_order) {
        xp_pool_free(p);
        xs_result_free(r);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    memcpy(r->best_order, b->order, sizeof(int) * (size_t)b->g->n_nodes);
    r->best_peak_bytes = b->peak;
    r->best_latency_s = b->lat;
    memcpy(r->applied, b->applied, sizeof r->applied);
    xp_pool_free(p);
    return IR_OK;
}

void xs_result_free(xs_result *r) {
    if (!r) return;
    ir_graph_free(r->best);
    free(r->best_order);
    memset(r, 0, sizeof *r);
}
