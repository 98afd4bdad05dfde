/* optimize-measure.c - `magpie optimize --measure N`: plans timed before they are trusted.
 *
 * A measured cost model times each op alone, hot in the cache, and adds the costs up; a plan's
 * real latency can differ (a PET replacement that is fast alone and slow in the graph, the
 * cache state between ops), and a search that believes the model writes the plan it predicts
 * fastest. So with a device the executor runs (`cpu`), after the search the best plan and up to
 * N - 1 runners-up (earlier bests, xs_options.keep_plans) are executed alternately with the
 * original graph in its eager order:
 *  - each graph is run once to warm up, which also sizes the rest: a sample is the median of
 *    enough back-to-back runs to last SAMPLE_S; plans are dropped from the end of the list until
 *    MIN_ROUNDS rounds fit the budget (--measure-time), and as many rounds as fit are run, up to
 *    MAX_ROUNDS;
 *  - a round times, for each plan in turn, the original and the plan side by side, the order of
 *    the pair alternating from round to round, so that a machine growing busier or quieter
 *    weighs on both alike; a plan's ratio is the median over the rounds of its time over the
 *    original's in the same pair, its latency the median of its samples.
 * Then a plan is chosen:
 *  - memory mode (--mem-limit, and --pet alone: latency is the objective): the plan of lowest
 *    measured ratio among those within the memory limit; when it runs slower than the original
 *    (ratio > 1) the original order is written instead (the reason on stderr and in report.json),
 *    and the memory limit decides the exit status as for any plan. When no plan is within the
 *    limit, the search's best (the least memory) is written as without measuring: exit 3;
 *  - latency mode (--lat-limit): the first plan, in the search's order (least memory first),
 *    whose measured latency is within the limit (a ratio of the measured original, or absolute);
 *    when none is, the search's best is written and the limit is not met.
 * The clock is the profiler's (prof-cpu.c): with one kernel thread (OMP_NUM_THREADS=1) the
 * executing thread's CPU time (rt_result.cpu_seconds), which a busy machine's waits for a core
 * do not inflate, so that the plans compare as the cost model predicts them; with more threads
 * the wall time, which is then the latency.
 * The analytic targets have no executor here, nor has `cuda` (no GPU executor yet): their
 * figures stay predictions, and the report says so. */
#include "optimize-run.h"
#include "rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_S 5e-3 /* a sample's runs last at least this long (tiny graphs: many runs) */
#define MAX_REPS 64   /* runs in a sample, at most */
#define MIN_ROUNDS 3
#define MAX_ROUNDS CLI_MEASURE_MAX_ROUNDS

/* A graph to execute: a plan with its fissions materialized, or the original. */
typedef struct exec_graph {
    const ir_graph *g;
    const int *order;
    ir_graph *owned_g; /* when materialized */
    int *owned_order;
    int reps;      /* runs per sample */
    double warm_s; /* the wall time of one call (rt_run), for the budget */
} exec_graph;

static void exec_free(exec_graph *e) {
    ir_graph_free(e->owned_g);
    free(e->owned_order);
    memset(e, 0, sizeof *e);
}

/* The clock (the header comment): the thread's CPU time with one kernel thread, else wall. */
static bool thread_clock(void) {
    return rt_kernel_threads() == 1;
}

/* One execution's kernel seconds into *s; *call_s (may be NULL): the wall time of the whole call,
 * which also places the weights and copies the outputs, for the budget. */
static ir_status run_once(const exec_graph *e, uint64_t seed, double *s, double *call_s,
                          ir_diag *d) {
    rt_options ro = {
        .order = e->order, .n_order = e->g->n_nodes, .seed = seed, .fill_missing_data = true};
    rt_result res;
    double t0 = ir_now_seconds();
    ir_status st = rt_run(e->g, NULL, 0, &ro, &res, d);
    if (call_s) *call_s = ir_now_seconds() - t0;
    if (st != IR_OK) return st;
    *s = thread_clock() ? res.cpu_seconds : res.wall_seconds;
    rt_result_free(&res);
    return IR_OK;
}

/* A sample: the median of e->reps runs. */
static ir_status sample(const exec_graph *e, uint64_t seed, double *s, ir_diag *d) {
    double t[MAX_REPS];
    for (int i = 0; i < e->reps; i++) {
        ir_status st = run_once(e, seed, &t[i], NULL, d);
        if (st != IR_OK) return st;
    }
    qsort(t, (size_t)e->reps, sizeof *t, ir_cmp_double);
    *s = e->reps % 2 ? t[e->reps / 2] : 0.5 * (t[e->reps / 2 - 1] + t[e->reps / 2]);
    return IR_OK;
}

static ir_status warm(exec_graph *e, uint64_t seed, ir_diag *d) {
    double s;
    ir_status st = run_once(e, seed, &s, &e->warm_s, d);
    if (st != IR_OK) return st;
    /* the first run pages everything in; the second says what a run costs (its kernels: the
     * runs of a sample; the whole call: the budget) */
    if ((st = run_once(e, seed, &s, &e->warm_s, d)) != IR_OK) return st;
    int reps = s > 0 ? (int)ceil(SAMPLE_S / s) : MAX_REPS;
    e->reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    return IR_OK;
}

static double median(const double *v, int n) {
    double t[MAX_ROUNDS];
    memcpy(t, v, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, ir_cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Plan i of the candidates: 0 the result's best, i > 0 r->plans[i - 1]. */
static void plan_at(const xs_result *r, int i, const ir_graph **g, const int **order, size_t *peak,
                    double *lat, int *n_fissions) {
    if (i == 0) {
        *g = r->best;
        *order = r->best_order;
        *peak = r->best_peak_bytes;
        *lat = r->best_latency_s;
        *n_fissions = r->n_fissions;
    } else {
        const xs_plan *p = &r->plans[i - 1];
        *g = p->g;
        *order = p->order;
        *peak = p->peak_bytes;
        *lat = p->latency_s;
        *n_fissions = p->n_fissions;
    }
}

static ir_status exec_of_plan(const xs_result *r, int i, exec_graph *e, ir_diag *d) {
    const ir_graph *g;
    const int *order;
    size_t peak;
    double lat;
    int nf;
    plan_at(r, i, &g, &order, &peak, &lat, &nf);
    memset(e, 0, sizeof *e);
    if (nf > 0) {
        /* as optimize writes it: every part of each fission */
        if (!(e->owned_g = rw_fission_materialize(g, order, &e->owned_order, d)))
            return IR_ERR_INTERNAL;
        g = e->owned_g;
        order = e->owned_order;
    }
    e->g = g;
    e->order = order;
    return IR_OK;
}

/* The original graph in its eager order, as a plan with no rewrite (the fall-back). */
static ir_status original_plan(const ir_graph *g, const int *eager, prof_model *m, xs_plan *p,
                               ir_diag *d) {
    memset(p, 0, sizeof *p);
    sched_sim sim = {0};
    ir_status st = sched_simulate(g, eager, m, &sim, d);
    if (st != IR_OK) return st;
    p->peak_bytes = sim.peak_device_bytes;
    p->latency_s = sim.latency_s;
    sched_sim_free(&sim);
    p->g = ir_graph_clone(g);
    p->order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    if (!p->g || !p->order) {
        xs_plan_free(p);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    memcpy(p->order, eager, sizeof(int) * (size_t)g->n_nodes);
    p->fingerprint = ir_graph_hash(g);
    return IR_OK;
}

/* Whether plan i's measured latency meets a --lat-limit. */
static bool lat_ok(const cli_opt_args *a, const cli_measure_plan *p) {
    return a->limit.kind == CLI_LIMIT_RATIO ? p->ratio <= a->limit.value
                                            : p->measured_s <= a->xs.limit;
}

int cli_optimize_measure(const cli_cmd *cmd, const cli_opts *o, const cli_opt_args *a,
                         const ir_graph *g, prof_model *m, xs_result *r, cli_measure *out) {
    memset(out, 0, sizeof *out);
    out->chosen = 0;
    out->base_predicted_s = r->eager_latency_s;
    out->budget_s = a->measure_s;
    const char *dev = prof_device(m);
    if (!a->measure) {
        out->why_not = "--measure 0: the latencies are the cost model's predictions";
        return CLI_EXIT_OK;
    }
    if (!prof_is_measured(m)) {
        out->why_not = "an analytic device: the latencies are predictions";
        return CLI_EXIT_OK;
    }
    if (strcmp(dev, "cpu") != 0) {
        out->why_not = "no executor for this device: the latencies are predictions";
        return CLI_EXIT_OK;
    }
    if (r->interrupted) {
        out->why_not = "interrupted: the latencies are predictions";
        return CLI_EXIT_OK;
    }
    out->on = true;
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    int code = CLI_EXIT_OK;
    double t0 = ir_now_seconds();
    bool mem = a->xs.mode == XS_MODE_MEM;
    int n = 1 + r->n_plans;
    if (n > a->measure) n = a->measure;
    exec_graph orig = {.g = g}, cand[CLI_MAX_MEASURE] = {{0}};
    int idx[CLI_MAX_MEASURE], n_cand = 0; /* the candidates timed: indices into out->plans */
    xs_plan fallback = {0};
    int *eager = sched_eager_order(g);
    if (!eager) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    orig.order = eager;
    out->n_plans = n;
    for (int i = 0; i < n; i++) {
        cli_measure_plan *p = &out->plans[i];
        const ir_graph *pg;
        const int *po;
        int nf;
        plan_at(r, i, &pg, &po, &p->peak_bytes, &p->predicted_s, &nf);
        p->chain_len = i == 0 ? r->chain_len : r->plans[i - 1].chain_len;
        p->within_memory = !mem || (double)p->peak_bytes <= a->xs.limit;
        p->measured_s = p->ratio = NAN;
        /* a plan beyond the memory limit cannot be chosen: not timed (but the best, which is
         * then the plan written whatever it measures) */
        if (!p->within_memory && i > 0) continue;
        if ((st = exec_of_plan(r, i, &cand[n_cand], &d)) != IR_OK) goto fail;
        idx[n_cand++] = i;
    }
    if ((st = warm(&orig, a->xs.seed, &d)) != IR_OK) goto fail;
    for (int k = 0; k < n_cand; k++)
        if ((st = warm(&cand[k], a->xs.seed, &d)) != IR_OK) goto fail;
    /* plans from the end of the list until MIN_ROUNDS rounds fit what is left of the budget */
    double left = a->measure_s - (ir_now_seconds() - t0), round_s = 0;
    for (;;) {
        round_s = 0;
        for (int k = 0; k < n_cand; k++)
            round_s += orig.reps * orig.warm_s + cand[k].reps * cand[k].warm_s;
        if (n_cand <= 1 || MIN_ROUNDS * round_s <= left) break;
        n_cand--;
    }
    int rounds = round_s > 0 ? (int)(left / round_s) : MAX_ROUNDS;
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    double ratio[CLI_MAX_MEASURE][MAX_ROUNDS], base[CLI_MAX_MEASURE * MAX_ROUNDS];
    int n_base = 0;
    for (int rd = 0; rd < rounds; rd++) {
        for (int k = 0; k < n_cand; k++) {
            double to, tp;
            bool orig_first = (rd + k) % 2 == 0;
            if (orig_first && (st = sample(&orig, a->xs.seed, &to, &d)) != IR_OK) goto fail;
            if ((st = sample(&cand[k], a->xs.seed, &tp, &d)) != IR_OK) goto fail;
            if (!orig_first && (st = sample(&orig, a->xs.seed, &to, &d)) != IR_OK) goto fail;
            out->plans[idx[k]].rounds_s[rd] = tp;
            ratio[k][rd] = to > 0 ? tp / to : NAN;
            base[n_base++] = to;
            if (k == 0) out->base_rounds_s[rd] = to;
        }
        out->rounds = rd + 1;
        /* past the budget: stop once MIN_ROUNDS are in (they were sized to fit) */
        if (rd + 1 >= MIN_ROUNDS && ir_now_seconds() - t0 > a->measure_s) break;
    }
    {
        double tb[CLI_MAX_MEASURE * MAX_ROUNDS];
        memcpy(tb, base, sizeof *tb * (size_t)n_base);
        qsort(tb, (size_t)n_base, sizeof *tb, ir_cmp_double);
        out->base_measured_s =
            n_base % 2 ? tb[n_base / 2] : 0.5 * (tb[n_base / 2 - 1] + tb[n_base / 2]);
    }
    for (int k = 0; k < n_cand; k++) {
        cli_measure_plan *p = &out->plans[idx[k]];
        p->measured = true;
        p->measured_s = median(p->rounds_s, out->rounds);
        p->ratio = median(ratio[k], out->rounds);
    }
    out->seconds = ir_now_seconds() - t0;

    /* the choice */
    int pick = -1;
    if (mem) {
        for (int k = 0; k < n_cand; k++) {
            const cli_measure_plan *p = &out->plans[idx[k]];
            if (p->within_memory && (pick < 0 || p->ratio < out->plans[pick].ratio)) pick = idx[k];
        }
        /* none within the limit: the search's best, the least memory, is written whatever it
         * measures (above the limit memory comes first, as in the search's order) */
        bool none_within = pick < 0;
        if (none_within) pick = 0;
        const cli_measure_plan *p = &out->plans[pick];
        if (!none_within && p->ratio > 1.0) {
            snprintf(out->fallback, sizeof out->fallback,
                     "the fastest plan measured ran %.3fx the original's latency (predicted "
                     "%.3fx): the original order is written instead",
                     p->ratio, p->predicted_s / r->eager_latency_s);
            pick = -1;
        } else if (pick > 0) {
            snprintf(out->fallback, sizeof out->fallback,
                     "plan %d (predicted %.3fx) measured %.3fx the original's latency, faster "
                     "than the search's best (predicted %.3fx, measured %.3fx): it is written "
                     "instead",
                     pick + 1, p->predicted_s / r->eager_latency_s, p->ratio,
                     out->plans[0].predicted_s / r->eager_latency_s, out->plans[0].ratio);
        }
        out->lat_met = true;
    } else {
        for (int k = 0; k < n_cand && pick < 0; k++)
            if (lat_ok(a, &out->plans[idx[k]])) pick = idx[k];
        out->lat_met = pick >= 0;
        if (pick < 0) {
            pick = 0;
            snprintf(out->fallback, sizeof out->fallback,
                     "no plan measured met the latency limit %s (the search's best ran %.3fx the "
                     "original's latency, predicted %.3fx)",
                     a->limit_text, out->plans[0].ratio,
                     out->plans[0].predicted_s / r->eager_latency_s);
        } else if (pick > 0) {
            snprintf(out->fallback, sizeof out->fallback,
                     "the search's best measured %.3fx the original's latency, beyond the limit "
                     "%s: plan %d (measured %.3fx) is written instead",
                     out->plans[0].ratio, a->limit_text, pick + 1, out->plans[pick].ratio);
        }
    }
    out->chosen = pick;
    if (pick > 0) {
        xs_result_swap_plan(r, &r->plans[pick - 1]);
    } else if (pick < 0) {
        if ((st = original_plan(g, eager, m, &fallback, &d)) != IR_OK) goto fail;
        xs_result_swap_plan(r, &fallback);
    }
    if (!o->quiet || out->fallback[0]) {
        fprintf(stderr,
                "magpie: %s: measured %d plan%s against the original, %d round%s in %.1f s: ",
                cmd->name, n_cand, n_cand == 1 ? "" : "s", out->rounds, out->rounds == 1 ? "" : "s",
                out->seconds);
        if (pick < 0)
            fprintf(stderr, "%s\n", out->fallback);
        else
            fprintf(stderr, "plan %d written, %.3fx the original's latency (predicted %.3fx)%s%s\n",
                    pick + 1, out->plans[pick].ratio,
                    out->plans[pick].predicted_s / r->eager_latency_s, out->fallback[0] ? "; " : "",
                    out->fallback);
    }
    goto out;
fail:
    ir_diag_prefix(&d, "measuring the plans");
    code = cli_fail_ir(st, &d, NULL);
out:
    for (int k = 0; k < CLI_MAX_MEASURE; k++) exec_free(&cand[k]);
    xs_plan_free(&fallback);
    free(eager);
    return code;
}

const cli_measure_plan *cli_measure_written(const cli_measure *mz) {
    return mz->on && mz->chosen >= 0 ? &mz->plans[mz->chosen] : NULL;
}

void cli_measure_report(cli_json *j, const cli_measure *mz, double best_predicted_s) {
    const cli_measure_plan *w = cli_measure_written(mz);
    bool orig = mz->on && mz->chosen < 0;
    cli_json_key(j, "predicted_latency_seconds");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "baseline", mz->base_predicted_s);
    cli_json_kv_num(j, "best", best_predicted_s);
    cli_json_obj_end(j);
    cli_json_key(j, "measured_latency_seconds");
    if (!mz->on) {
        cli_json_null(j);
    } else {
        cli_json_obj_begin(j);
        cli_json_kv_num(j, "baseline", mz->base_measured_s);
        cli_json_kv_num(j, "best", orig ? mz->base_measured_s : w->measured_s);
        cli_json_kv_num(j, "ratio", orig ? 1.0 : w->ratio);
        cli_json_key(j, "baseline_rounds");
        cli_json_arr_begin(j);
        for (int i = 0; i < mz->rounds; i++) cli_json_num(j, mz->base_rounds_s[i]);
        cli_json_arr_end(j);
        cli_json_key(j, "best_rounds");
        cli_json_arr_begin(j);
        for (int i = 0; i < mz->rounds; i++)
            cli_json_num(j, orig ? mz->base_rounds_s[i] : w->rounds_s[i]);
        cli_json_arr_end(j);
        cli_json_obj_end(j);
    }
    cli_json_key(j, "measurement");
    cli_json_obj_begin(j);
    cli_json_kv_bool(j, "measured", mz->on);
    if (!mz->on) {
        cli_json_kv_str(j, "note", mz->why_not);
        cli_json_obj_end(j);
        return;
    }
    cli_json_kv_str(j, "clock", thread_clock() ? "thread-cpu" : "wall");
    cli_json_kv_int(j, "rounds", mz->rounds);
    cli_json_kv_num(j, "seconds", mz->seconds);
    cli_json_kv_num(j, "budget_seconds", mz->budget_s);
    /* the plan written: its index in "plans" (0: the search's best), or null for the original */
    cli_json_key(j, "written");
    if (orig)
        cli_json_null(j);
    else
        cli_json_int(j, mz->chosen);
    cli_json_kv_bool(j, "fell_back_to_original", orig);
    cli_json_kv_str(j, "reason", mz->fallback[0] ? mz->fallback : NULL);
    cli_json_key(j, "plans");
    cli_json_arr_begin(j);
    for (int i = 0; i < mz->n_plans; i++) {
        const cli_measure_plan *p = &mz->plans[i];
        cli_json_obj_begin(j);
        cli_json_kv_int(j, "rewrites", p->chain_len);
        cli_json_kv_uint(j, "peak_bytes", p->peak_bytes);
        cli_json_kv_bool(j, "within_memory_limit", p->within_memory);
        cli_json_kv_num(j, "predicted_latency_seconds", p->predicted_s);
        cli_json_kv_num(j, "predicted_ratio",
                        mz->base_predicted_s > 0 ? p->predicted_s / mz->base_predicted_s : NAN);
        cli_json_kv_bool(j, "timed", p->measured);
        cli_json_kv_num(j, "measured_latency_seconds", p->measured_s);
        cli_json_kv_num(j, "measured_ratio", p->ratio);
        cli_json_key(j, "rounds");
        cli_json_arr_begin(j);
        for (int k = 0; p->measured && k < mz->rounds; k++) cli_json_num(j, p->rounds_s[k]);
        cli_json_arr_end(j);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
    cli_json_obj_end(j);
}
