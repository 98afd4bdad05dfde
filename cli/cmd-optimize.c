/* cmd-optimize.c - `magpie optimize`: the memory optimizer's search (xs_search, MAGIS Algorithm
 * 3 over fission, remat, swap, substitution and the memory DP's order) under a memory or a
 * latency limit, its progress line, and the plan it writes:
 *  - DIR/optimized.onnx: the best graph with its fissions materialized (rw_fission_materialize:
 *    all n parts), rematerialized ops duplicated, Store/Load and the fission ops in domain
 *    "magpie", nodes in the schedule's order;
 *  - DIR/schedule.json (docs/schedule-json.md), DIR/report.json (also printed by --json) and
 *    DIR/memory.svg (live memory per step, the eager order against the plan, MAGIS fig. 16).
 * The figures reported are those of optimized.onnx read back and simulated in file order; the
 * search's own are checked equal in peak before anything is written. The limit not met is exit
 * 3 with the plan still written; SIGINT/SIGTERM stop the search, the plan is written, exit 4.
 *
 * Usage errors (options, the model) are found before anything is written. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "explorer.h"
#include "prof.h"
#include "schedule.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DEVICE "analytic:rtx3090"
#define DEFAULT_MAX_FRONTIER 100000
#define DEFAULT_OUT_DIR "magpie-out"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct opt_args {
    xs_options xs;
    cli_limit limit;
    const char *limit_text;
    unsigned rules;
} opt_args;

/* The --rules families, in the order report.json lists them. */
static const struct {
    const char *name;
    unsigned flag;
} families[] = {{"fission", XS_RULE_FISSION},
                {"remat", XS_RULE_REMAT},
                {"swap", XS_RULE_SWAP},
                {"reorder", XS_RULE_REORDER},
                {"subst", XS_RULE_SUBST}};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

static int parse_args(const cli_cmd *cmd, const cli_opts *o, opt_args *a) {
    const char *n = cmd->name;
    memset(a, 0, sizeof *a);
    if (!!o->mem_limit == !!o->lat_limit)
        return cli_fail(CLI_EXIT_USAGE, "%s: give exactly one of --mem-limit and --lat-limit", n);
    a->xs.mode = o->mem_limit ? XS_MODE_MEM : XS_MODE_LAT;
    a->limit_text = o->mem_limit ? o->mem_limit : o->lat_limit;
    cli_limit_kind want = o->mem_limit ? CLI_LIMIT_BYTES : CLI_LIMIT_SECONDS;
    if (!cli_parse_limit(a->limit_text, &a->limit) ||
        (a->limit.kind != CLI_LIMIT_RATIO && a->limit.kind != want))
        return cli_fail(
            CLI_EXIT_USAGE,
            "%s: --%s '%s': expected a ratio of the unoptimized value (e.g. %s) or %s", n,
            o->mem_limit ? "mem-limit" : "lat-limit", a->limit_text, o->mem_limit ? "0.5" : "1.10",
            o->mem_limit ? "bytes with a unit (512MiB, 8GiB)" : "a time with a unit (12ms, 1.5s)");
    a->xs.max_seconds = 10.0;
    if (o->time_budget) {
        cli_limit t;
        if (!cli_parse_limit(o->time_budget, &t) || t.kind == CLI_LIMIT_BYTES)
            return cli_fail(CLI_EXIT_USAGE, "%s: --time '%s': expected seconds (10, 10s, 500ms)", n,
                            o->time_budget);
        a->xs.max_seconds = t.value;
    }
    long long v;
    if (o->max_states) {
        if (!cli_parse_int(o->max_states, 1, 1LL << 32, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --max-states '%s': expected an integer >= 1", n,
                            o->max_states);
        a->xs.max_states = (size_t)v;
    }
    a->xs.max_frontier = DEFAULT_MAX_FRONTIER;
    if (o->max_frontier) {
        if (!cli_parse_int(o->max_frontier, 1, 1LL << 32, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --max-frontier '%s': expected an integer >= 1", n,
                            o->max_frontier);
        a->xs.max_frontier = (size_t)v;
    }
    if (o->threads) {
        if (!cli_parse_int(o->threads, 1, 1024, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --threads '%s': expected an integer in 1..1024", n,
                            o->threads);
        a->xs.threads = (int)v;
    } else {
        a->xs.threads = xp_default_threads();
    }
    a->xs.delta = 1.1;
    if (o->delta) {
        char *end = NULL;
        errno = 0;
        double v = strtod(o->delta, &end);
        if (!*o->delta || *end || errno || !isfinite(v) || v < 1.0 || v > 100.0)
            return cli_fail(CLI_EXIT_USAGE, "%s: --delta '%s': expected a number in [1, 100]", n,
                            o->delta);
        a->xs.delta = v;
    }
    a->xs.rules = XS_RULE_ALL;
    if (o->rules) {
        a->xs.rules = 0;
        const char *p = o->rules;
        for (;;) {
            size_t len = strcspn(p, ",");
            int k = 0;
            while (k < N_FAMILIES &&
                   (strlen(families[k].name) != len || strncmp(p, families[k].name, len)))
                k++;
            if (k == N_FAMILIES)
                return cli_fail(CLI_EXIT_USAGE,
                                "%s: --rules '%s': unknown rule family '%.*s' (expected fission, "
                                "remat, swap, reorder, subst)",
                                n, o->rules, (int)len, p);
            a->xs.rules |= families[k].flag;
            if (!p[len]) break;
            p += len + 1;
        }
    }
    a->xs.seed = o->seed;
    return CLI_EXIT_OK;
}

/* g->nodes in the order of order (a topological permutation), producers renumbered. */
static ir_status reorder_nodes(ir_graph *g, const int *order, ir_diag *d) {
    ir_node *nn = malloc(sizeof(ir_node) * ((size_t)g->n_nodes + 1));
    if (!nn) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int s = 0; s < g->n_nodes; s++) nn[s] = g->nodes[order[s]];
    memcpy(g->nodes, nn, sizeof(ir_node) * (size_t)g->n_nodes);
    free(nn);
    for (int s = 0; s < g->n_nodes; s++)
        for (int k = 0; k < g->nodes[s].n_out; k++)
            if (g->nodes[s].out[k] >= 0) g->values[g->nodes[s].out[k]].producer = s;
    return IR_OK;
}

typedef struct report {
    const char *model, *device, *out_dir;
    const opt_args *a;
    const xs_result *r;
    const ir_graph *best; /* the plan as read back: file order = schedule */
    const sched_sim *sim; /* of best in file order */
    double limit_abs;
    bool met;
    int threads;
    double t_load, t_profile, t_write;
    int n_store, n_load, n_fission_ops;
} report;

static void report_json(cli_json *j, const report *p) {
    const xs_result *r = p->r;
    const xp_worker_stats *t = &r->stats.total;
    char buf[32];
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "model", p->model);
    cli_json_kv_str(j, "device", p->device);
    cli_json_kv_str(j, "output_dir", p->out_dir);
    cli_json_key(j, "limit");
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "kind", p->a->xs.mode == XS_MODE_MEM ? "memory" : "latency");
    cli_json_kv_str(j, "given", p->a->limit_text);
    cli_json_kv_num(j, p->a->xs.mode == XS_MODE_MEM ? "bytes" : "seconds", p->limit_abs);
    cli_json_kv_bool(j, "met", p->met);
    cli_json_obj_end(j);
    cli_json_kv_uint(j, "baseline_peak_bytes", r->eager_peak_bytes);
    cli_json_kv_num(j, "baseline_latency_seconds", r->eager_latency_s);
    cli_json_kv_uint(j, "start_peak_bytes", r->start_peak_bytes);
    cli_json_kv_num(j, "start_latency_seconds", r->start_latency_s);
    cli_json_kv_uint(j, "best_peak_bytes", p->sim->peak_device_bytes);
    cli_json_kv_num(j, "best_latency_seconds", p->sim->latency_s);
    cli_json_kv_uint(j, "search_best_peak_bytes", r->best_peak_bytes);
    cli_json_kv_num(j, "search_best_latency_seconds", r->best_latency_s);
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)r->best_fingerprint);
    cli_json_kv_str(j, "best_fingerprint", buf);
    cli_json_kv_uint(j, "best_peak_host_bytes", p->sim->peak_host_bytes);
    cli_json_kv_num(j, "peak_ratio",
                    r->eager_peak_bytes
                        ? (double)p->sim->peak_device_bytes / (double)r->eager_peak_bytes
                        : NAN);
    cli_json_kv_num(j, "latency_ratio",
                    r->eager_latency_s > 0 ? p->sim->latency_s / r->eager_latency_s : NAN);
    cli_json_kv_int(j, "nodes", p->best->n_nodes);
    cli_json_key(j, "states_explored"); /* children scheduled and simulated, plus the start */
    cli_json_uint(j, t->generated + 1);
    cli_json_kv_uint(j, "states_expanded", t->expanded);
    cli_json_kv_uint(j, "states_duplicate", t->duplicates);
    cli_json_kv_uint(j, "states_rejected", t->rejected);
    cli_json_kv_uint(j, "states_failed", r->failed_children);
    cli_json_kv_num(j, "states_per_second",
                    r->search_seconds > 0 ? (double)(t->generated + 1) / r->search_seconds : NAN);
    cli_json_kv_str(j, "stop_reason", xp_stop_reason_to_string(r->stats.reason));
    cli_json_kv_bool(j, "interrupted", r->interrupted);
    cli_json_key(j, "frontier");
    cli_json_obj_begin(j);
    cli_json_kv_uint(j, "max", p->a->xs.max_frontier);
    cli_json_kv_uint(j, "peak", t->frontier_peak); /* summed over the workers: a bound */
    cli_json_kv_uint(j, "left", r->stats.frontier);
    cli_json_kv_uint(j, "evicted", t->evicted);
    cli_json_kv_uint(j, "dropped", t->dropped);
    cli_json_obj_end(j);
    cli_json_key(j, "cache");
    cli_json_obj_begin(j);
    cli_json_kv_uint(j, "hits", r->cache_hits);
    cli_json_kv_uint(j, "misses", r->cache_misses);
    cli_json_kv_uint(j, "replayed_rewrites", r->replay_steps);
    cli_json_kv_uint(j, "replay_mismatches", r->replay_mismatches);
    cli_json_obj_end(j);
    /* the rewrites on the best state's chain */
    cli_json_key(j, "rules");
    cli_json_obj_begin(j);
    for (int k = 0; k < RW_KIND_COUNT; k++) cli_json_kv_int(j, rw_kind_name(k), r->applied[k]);
    cli_json_obj_end(j);
    cli_json_key(j, "subst_rules");
    cli_json_obj_begin(j);
    for (int k = 0; k < RW_SUBST_RULE_COUNT; k++)
        cli_json_kv_int(j, rw_subst_rule_name(k), r->subst_applied[k]);
    cli_json_obj_end(j);
    cli_json_kv_int(j, "ftree_nodes", r->ftree_nodes);
    cli_json_key(j, "fissions");
    cli_json_arr_begin(j);
    for (int i = 0; i < r->n_fissions; i++) {
        cli_json_obj_begin(j);
        cli_json_kv_int(j, "ftree_node", r->fissions[i].tree_node);
        cli_json_kv_int(j, "nodes", r->fissions[i].n_ids);
        cli_json_kv_int(j, "dimension_length", r->fissions[i].dim_len);
        cli_json_kv_int(j, "parts", r->fissions[i].parts);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
    cli_json_kv_int(j, "store_nodes", p->n_store);
    cli_json_kv_int(j, "load_nodes", p->n_load);
    cli_json_kv_int(j, "fission_nodes", p->n_fission_ops);
    cli_json_key(j, "rule_families");
    cli_json_arr_begin(j);
    for (int k = 0; k < N_FAMILIES; k++)
        if (p->a->xs.rules & families[k].flag) cli_json_str(j, families[k].name);
    cli_json_arr_end(j);
    cli_json_kv_int(j, "threads", p->threads);
    cli_json_kv_uint(j, "seed", p->a->xs.seed);
    cli_json_kv_num(j, "delta", p->a->xs.delta);
    /* the workers' time by phase, summed over the workers */
    cli_json_key(j, "phase_seconds");
    cli_json_obj_begin(j);
    for (int k = 0; k < XS_PHASE_COUNT; k++)
        cli_json_kv_num(j, xs_phase_name(k), r->phase_seconds[k]);
    cli_json_obj_end(j);
    /* the command's wall time by step */
    cli_json_key(j, "wall_seconds");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "load", p->t_load);
    cli_json_kv_num(j, "profile", p->t_profile);
    cli_json_kv_num(j, "start", r->start_seconds);
    cli_json_kv_num(j, "search", r->search_seconds);
    cli_json_kv_num(j, "write", p->t_write);
    cli_json_obj_end(j);
    cli_json_obj_end(j);
}

static bool write_report(FILE *f, void *arg, ir_diag *d) {
    (void)d;
    cli_json j;
    cli_json_init(&j, f);
    report_json(&j, arg);
    cli_json_finish(&j);
    return !ferror(f);
}

/* The format is docs/schedule-json.md's; change both together. */
static bool write_schedule(FILE *f, void *arg, ir_diag *d) {
    (void)d;
    const report *p = arg;
    cli_json j;
    cli_json_init(&j, f);
    cli_json_obj_begin(&j);
    cli_json_kv_int(&j, "version", 1);
    cli_json_kv_str(&j, "model", p->model);
    cli_json_kv_str(&j, "device", p->device);
    cli_json_kv_uint(&j, "peak_bytes", p->sim->peak_device_bytes);
    cli_json_kv_uint(&j, "peak_host_bytes", p->sim->peak_host_bytes);
    cli_json_kv_num(&j, "latency_seconds", p->sim->latency_s);
    cli_json_key(&j, "steps");
    cli_json_arr_begin(&j);
    for (int s = 0; s < p->best->n_nodes; s++) {
        const ir_node *n = &p->best->nodes[s];
        cli_json_obj_begin(&j);
        cli_json_kv_int(&j, "step", s);
        cli_json_kv_str(&j, "node", n->name);
        cli_json_kv_str(&j, "op", n->op_type ? n->op_type : ir_op_name(n->op));
        cli_json_kv_str(&j, "domain", n->domain ? n->domain : "");
        cli_json_kv_num(&j, "start_seconds", p->sim->start_s[s]);
        cli_json_kv_num(&j, "end_seconds", p->sim->end_s[s]);
        cli_json_kv_uint(&j, "device_bytes", p->sim->device_bytes[s]);
        cli_json_kv_uint(&j, "host_bytes", p->sim->host_bytes[s]);
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_obj_end(&j);
    cli_json_finish(&j);
    return !ferror(f);
}

/* ---------------------------------------------------------------- progress */

/* On a terminal one line rewritten in place about 4 times a second; otherwise (a log, a pipe)
 * one plain line every PLAIN_INTERVAL_S and one at the end. */
#define TTY_INTERVAL_S 0.25
#define PLAIN_INTERVAL_S 10.0

typedef struct progress_ctx {
    bool tty;
    size_t base_peak;
    double base_lat;
} progress_ctx;

static void progress(void *arg, const xs_progress *p, bool final) {
    const progress_ctx *c = arg;
    char line[256];
    uint64_t states = p->generated + 1;
    snprintf(line, sizeof line,
             "magpie: optimize %6.1fs  %llu states (%.0f/s)  frontier %llu  best peak %.3fx"
             "  latency %.3fx",
             p->seconds, (unsigned long long)states,
             p->seconds > 0 ? (double)states / p->seconds : 0.0, (unsigned long long)p->frontier,
             c->base_peak ? (double)p->best_peak_bytes / (double)c->base_peak : 0.0,
             c->base_lat > 0 ? p->best_latency_s / c->base_lat : 0.0);
    if (c->tty) /* \r back to the line's start, ESC[K clears what a longer line left behind */
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

/* ---------------------------------------------------------------- the command */

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int peak_step(const size_t *v, int n) {
    int best = n > 0 ? 0 : -1;
    for (int s = 1; s < n; s++)
        if (v[s] > v[best]) best = s;
    return best;
}

/* memory.svg: live device bytes per step of the plan, the eager order beside it. */
static ir_status write_plot(const char *path, const sched_sim *eager, const sched_sim *plan,
                            size_t resident, ir_diag *d) {
    char a[32], b[32], la[96], lb[96];
    snprintf(la, sizeof la, "optimized plan (peak %s)",
             cli_fmt_bytes(plan->peak_device_bytes, a, sizeof a));
    snprintf(lb, sizeof lb, "eager order (peak %s)",
             cli_fmt_bytes(eager->peak_device_bytes, b, sizeof b));
    cli_mem_plot pl = {.title = "magpie optimize: live memory, eager order vs optimized plan",
                       .step_bytes = plan->device_bytes,
                       .n_steps = plan->n_steps,
                       .resident_bytes = resident,
                       .peak_step = peak_step(plan->device_bytes, plan->n_steps),
                       .ref_bytes = eager->device_bytes,
                       .ref_n_steps = eager->n_steps,
                       .label = la,
                       .ref_label = lb};
    return cli_plot_svg(path, &pl, d);
}

int cli_cmd_optimize(const cli_cmd *cmd, const cli_opts *o) {
    const char *path = o->pos[0], *dir = o->out_dir ? o->out_dir : DEFAULT_OUT_DIR;
    char device[128] = "";
    opt_args a;
    int code = parse_args(cmd, o, &a);
    if (code != CLI_EXIT_OK) return code;
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    prof_model *m = NULL;
    xs_result r = {0};
    sched_sim eager = {0}, sim = {0}, plan_sim = {0};
    sched_memory plan_mem = {0};
    ir_graph *plan = NULL, *mat = NULL;
    int *mat_order = NULL;
    char *p_onnx = NULL, *p_sched = NULL, *p_report = NULL, *p_svg = NULL, **made = NULL;
    int n_made = 0;
    double t0 = now_s();
    ir_graph *g = cli_load_graph(path, o, false, &code);
    if (!g) return code;
    double t_load = now_s() - t0;
    prof_options po = {.db_path = o->profile_db};
    m = prof_open(o->device ? o->device : DEFAULT_DEVICE, &po, &st, &d);
    if (!m) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    t0 = now_s();
    if ((st = prof_profile_graph(m, g, &d)) != IR_OK ||
        (st = sched_simulate(g, NULL, m, &eager, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    double t_profile = now_s() - t0;
    snprintf(device, sizeof device, "%s", prof_device(m));
    a.xs.cost = m;
    a.xs.limit = cli_limit_resolve(
        &a.limit, a.xs.mode == XS_MODE_MEM ? (double)eager.peak_device_bytes : eager.latency_s);
    progress_ctx pc = {.tty = isatty(STDERR_FILENO) == 1,
                       .base_peak = eager.peak_device_bytes,
                       .base_lat = eager.latency_s};
    a.xs.progress = o->quiet ? NULL : progress;
    a.xs.progress_arg = &pc;
    a.xs.progress_interval_s = pc.tty ? TTY_INTERVAL_S : PLAIN_INTERVAL_S;
    a.xs.interrupt = &interrupted;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    /* The search works on the graph as the importer would read it back (constants folded:
     * a training graph's seed gradient, for one), so the plan's figures survive the round
     * trip through optimized.onnx; the baseline stays the graph as loaded. */
    if ((st = ir_fold_constants(g, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    st = xs_search(g, &a.xs, &r, &d);
    r.eager_peak_bytes = eager.peak_device_bytes;
    r.eager_latency_s = eager.latency_s;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    t0 = now_s();
    /* the plan: the best graph with its fissions materialized (every part), nodes in the
     * schedule's order */
    ir_graph *best = r.best;
    const int *best_order = r.best_order;
    if (r.n_fissions > 0) {
        if (!(mat = rw_fission_materialize(r.best, r.best_order, &mat_order, &d))) {
            code = cli_fail(CLI_EXIT_INTERNAL, "%s: materializing the fissions: %s", path, d.msg);
            goto out;
        }
        best = mat;
        best_order = mat_order;
    }
    if ((st = reorder_nodes(best, best_order, &d)) != IR_OK ||
        (st = sched_simulate(best, NULL, m, &sim, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    if (sim.peak_device_bytes != r.best_peak_bytes) {
        code = cli_fail(CLI_EXIT_INTERNAL,
                        "%s: the plan's peak in file order (%zu) differs from the search's (%zu)",
                        path, sim.peak_device_bytes, r.best_peak_bytes);
        goto out;
    }
    report rep = {.model = path,
                  .device = device,
                  .out_dir = dir,
                  .a = &a,
                  .r = &r,
                  .limit_abs = a.xs.limit,
                  .threads = r.stats.threads,
                  .t_load = t_load,
                  .t_profile = t_profile};
    p_onnx = join(dir, "optimized.onnx");
    p_sched = join(dir, "schedule.json");
    p_report = join(dir, "report.json");
    p_svg = join(dir, "memory.svg");
    if (!p_onnx || !p_sched || !p_report || !p_svg) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if ((st = cli_mkdirs(dir, &made, &n_made, &d)) != IR_OK ||
        (st = ir_onnx_save(best, p_onnx, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    /* The plan as written: the importer folds what it can (e.g. a training graph's constant
     * seed gradient), so the figures reported are those of the file read back in file order,
     * what `magpie run` measures; the search's own figures are reported beside them. */
    if (!(plan = cli_load_model(p_onnx, o, false, &code))) goto out;
    if ((st = prof_profile_graph(m, plan, &d)) != IR_OK ||
        (st = sched_simulate(plan, NULL, m, &plan_sim, &d)) != IR_OK ||
        (st = sched_memory_compute(plan, NULL, &plan_mem, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, p_onnx);
        goto out;
    }
    rep.best = plan;
    rep.sim = &plan_sim;
    rep.met = a.xs.mode == XS_MODE_MEM ? (double)plan_sim.peak_device_bytes <= a.xs.limit
                                       : plan_sim.latency_s <= a.xs.limit;
    for (int i = 0; i < plan->n_nodes; i++) {
        ir_op_kind op = plan->nodes[i].op;
        rep.n_store += op == IR_OP_Store;
        rep.n_load += op == IR_OP_Load;
        rep.n_fission_ops += op == IR_OP_FissionBuffer || op == IR_OP_FissionSlice ||
                             op == IR_OP_FissionAssemble || op == IR_OP_FissionAccumulate;
    }
    if ((st = cli_write_atomic(p_sched, write_schedule, &rep, &d)) != IR_OK ||
        (st = write_plot(p_svg, &eager, &plan_sim, plan_mem.resident_bytes, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    rep.t_write = now_s() - t0;
    if ((st = cli_write_atomic(p_report, write_report, &rep, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    prof_close(m);
    m = NULL;
    if (o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        report_json(&j, &rep);
        cli_json_finish(&j);
    } else {
        char b1[32], b2[32], b3[32], b4[32];
        printf("model        %s\n", path);
        printf("device       %s\n", rep.device);
        printf("peak         %s -> %s (%.1f%%)\n", cli_fmt_bytes(r.eager_peak_bytes, b1, sizeof b1),
               cli_fmt_bytes(plan_sim.peak_device_bytes, b2, sizeof b2),
               r.eager_peak_bytes
                   ? 100.0 * ((double)plan_sim.peak_device_bytes / (double)r.eager_peak_bytes - 1)
                   : 0.0);
        printf("latency      %s -> %s (%.1f%%)\n",
               cli_fmt_seconds(r.eager_latency_s, b3, sizeof b3),
               cli_fmt_seconds(plan_sim.latency_s, b4, sizeof b4),
               r.eager_latency_s > 0 ? 100.0 * (plan_sim.latency_s / r.eager_latency_s - 1) : 0.0);
        printf("rewrites    ");
        for (int k = 0; k < RW_KIND_COUNT; k++)
            printf(" %s %d%s", rw_kind_name(k), r.applied[k], k + 1 < RW_KIND_COUNT ? "," : "\n");
        printf("fissions     %d enabled (F-Tree of %d nodes)\n", r.n_fissions, r.ftree_nodes);
        printf("search       %llu states, %s, %s\n",
               (unsigned long long)r.stats.total.generated + 1,
               cli_fmt_seconds(r.search_seconds, b1, sizeof b1),
               xp_stop_reason_to_string(r.stats.reason));
        printf("plan         %s, %s, %s, %s\n", p_onnx, p_sched, p_report, p_svg);
    }
    if (r.interrupted) {
        fprintf(stderr, "magpie: optimize: interrupted; the best plan so far is in %s\n", dir);
        code = CLI_EXIT_INTERRUPTED;
    } else if (!rep.met) {
        char b1[32];
        if (a.xs.mode == XS_MODE_MEM)
            fprintf(stderr, "magpie: warning: memory limit %s not met: best peak %s; plan in %s\n",
                    a.limit_text, cli_fmt_bytes(plan_sim.peak_device_bytes, b1, sizeof b1), dir);
        else
            fprintf(stderr,
                    "magpie: warning: latency limit %s not met: best latency %s; plan in %s\n",
                    a.limit_text, cli_fmt_seconds(plan_sim.latency_s, b1, sizeof b1), dir);
        code = CLI_EXIT_LIMIT;
    } else {
        code = CLI_EXIT_OK;
    }
out:
    for (int i = 0; i < n_made; i++) free(made[i]);
    free(made);
    free(p_onnx);
    free(p_sched);
    free(p_report);
    free(p_svg);
    prof_close(m);
    sched_sim_free(&eager);
    sched_sim_free(&sim);
    sched_sim_free(&plan_sim);
    sched_memory_free(&plan_mem);
    ir_graph_free(plan);
    ir_graph_free(mat);
    free(mat_order);
    xs_result_free(&r);
    ir_graph_free(g);
    return code;
}
