/* cmd-optimize.c - `magpie optimize`: the memory optimizer's search (xs_search, MAGIS Algorithm
 * 3 with the remat/swap rules and the memory DP's order) under a memory or a latency limit, and
 * the plan it writes: DIR/optimized.onnx (the best graph, nodes in the schedule's order, swap ops
 * in domain "magpie"), DIR/schedule.json and DIR/report.json. The limit not met is exit 3 with
 * the plan still written; SIGINT/SIGTERM stop the search, the plan is written, exit 4.
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

#define DEFAULT_DEVICE "analytic:rtx3090"
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
    if (o->max_states) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(o->max_states, &end, 10);
        if (!*o->max_states || *end || errno || v < 1 || v > (1LL << 32))
            return cli_fail(CLI_EXIT_USAGE, "%s: --max-states '%s': expected an integer >= 1", n,
                            o->max_states);
        a->xs.max_states = (size_t)v;
    }
    if (o->threads) {
        char *end = NULL;
        errno = 0;
        long v = strtol(o->threads, &end, 10);
        if (!*o->threads || *end || errno || v < 1 || v > 1024)
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
            if (len == 5 && !strncmp(p, "remat", 5))
                a->xs.rules |= XS_RULE_REMAT;
            else if (len == 4 && !strncmp(p, "swap", 4))
                a->xs.rules |= XS_RULE_SWAP;
            else if (len == 7 && !strncmp(p, "reorder", 7))
                a->xs.rules |= XS_RULE_REORDER;
            else
                return cli_fail(CLI_EXIT_USAGE,
                                "%s: --rules '%s': unknown rule family '%.*s' (expected remat, "
                                "swap, reorder)",
                                n, o->rules, (int)len, p);
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
    const ir_graph *best; /* reordered: file order = schedule */
    const sched_sim *sim; /* of best in file order */
    double limit_abs;
    bool met;
    int threads;
    double t_load, t_profile, t_write;
    int n_store, n_load;
} report;

static void report_json(cli_json *j, const report *p) {
    const xs_result *r = p->r;
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
    cli_json_kv_uint(j, "best_peak_host_bytes", p->sim->peak_host_bytes);
    cli_json_kv_num(j, "peak_ratio",
                    r->eager_peak_bytes
                        ? (double)p->sim->peak_device_bytes / (double)r->eager_peak_bytes
                        : NAN);
    cli_json_kv_num(j, "latency_ratio",
                    r->eager_latency_s > 0 ? p->sim->latency_s / r->eager_latency_s : NAN);
    cli_json_kv_int(j, "nodes", p->best->n_nodes);
    cli_json_key(j, "states_explored"); /* children scheduled and simulated, plus the start */
    cli_json_uint(j, r->stats.total.generated + 1);
    cli_json_kv_uint(j, "states_expanded", r->stats.total.expanded);
    cli_json_kv_uint(j, "states_duplicate", r->stats.total.duplicates);
    cli_json_kv_num(
        j, "states_per_second",
        r->search_seconds > 0 ? (double)(r->stats.total.generated + 1) / r->search_seconds : NAN);
    cli_json_kv_str(j, "stop_reason", xp_stop_reason_to_string(r->stats.reason));
    cli_json_kv_bool(j, "interrupted", r->interrupted);
    cli_json_key(j, "rules");
    cli_json_obj_begin(j);
    static const char *const names[] = {"remat", "deremat", "swap", "deswap"};
    for (int k = 0; k < 4; k++) {
        cli_json_kv_int(j, names[k], r->applied[k]);
    }
    cli_json_obj_end(j);
    cli_json_kv_int(j, "store_nodes", p->n_store);
    cli_json_kv_int(j, "load_nodes", p->n_load);
    cli_json_key(j, "rule_families");
    cli_json_arr_begin(j);
    if (p->a->xs.rules & XS_RULE_REMAT) cli_json_str(j, "remat");
    if (p->a->xs.rules & XS_RULE_SWAP) cli_json_str(j, "swap");
    if (p->a->xs.rules & XS_RULE_REORDER) cli_json_str(j, "reorder");
    cli_json_arr_end(j);
    cli_json_kv_int(j, "threads", p->threads);
    cli_json_kv_uint(j, "seed", p->a->xs.seed);
    cli_json_kv_num(j, "delta", p->a->xs.delta);
    cli_json_key(j, "phase_seconds");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "load", p->t_load);
    cli_json_kv_num(j, "profile", p->t_profile);
    cli_json_kv_num(j, "start_schedule", r->start_seconds);
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

static bool write_schedule(FILE *f, void *arg, ir_diag *d) {
    (void)d;
    const report *p = arg;
    cli_json j;
    cli_json_init(&j, f);
    cli_json_obj_begin(&j);
    cli_json_kv_str(&j, "device", p->device);
    cli_json_kv_uint(&j, "peak_bytes", p->sim->peak_device_bytes);
    cli_json_kv_num(&j, "latency_seconds", p->sim->latency_s);
    cli_json_key(&j, "steps");
    cli_json_arr_begin(&j);
    for (int s = 0; s < p->best->n_nodes; s++) {
        const ir_node *n = &p->best->nodes[s];
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "node", n->name);
        cli_json_kv_str(&j, "op", n->op_type ? n->op_type : ir_op_name(n->op));
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

static void progress(void *arg, const xs_progress *p) {
    (void)arg;
    char a[32], b[32];
    fprintf(stderr, "magpie: optimize %.0fs: %llu states (%llu expanded), best %s, %s\n",
            p->seconds, (unsigned long long)p->generated + 1, (unsigned long long)p->expanded,
            cli_fmt_bytes(p->best_peak_bytes, a, sizeof a),
            cli_fmt_seconds(p->best_latency_s, b, sizeof b));
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
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
    ir_graph *plan = NULL;
    char *p_onnx = NULL, *p_sched = NULL, *p_report = NULL, **made = NULL;
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
    a.xs.progress = o->quiet ? NULL : progress;
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
    /* the plan: the best graph with its nodes in the schedule's order */
    if ((st = reorder_nodes(r.best, r.best_order, &d)) != IR_OK ||
        (st = sched_simulate(r.best, NULL, m, &sim, &d)) != IR_OK) {
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
                  .best = r.best,
                  .sim = &sim,
                  .limit_abs = a.xs.limit,
                  .threads = r.stats.threads,
                  .t_load = t_load,
                  .t_profile = t_profile};
    rep.met = a.xs.mode == XS_MODE_MEM ? (double)r.best_peak_bytes <= a.xs.limit
                                       : r.best_latency_s <= a.xs.limit;
    for (int i = 0; i < r.best->n_nodes; i++) {
        rep.n_store += r.best->nodes[i].op == IR_OP_Store;
        rep.n_load += r.best->nodes[i].op == IR_OP_Load;
    }
    p_onnx = join(dir, "optimized.onnx");
    p_sched = join(dir, "schedule.json");
    p_report = join(dir, "report.json");
    if (!p_onnx || !p_sched || !p_report) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if ((st = cli_mkdirs(dir, &made, &n_made, &d)) != IR_OK ||
        (st = ir_onnx_save(r.best, p_onnx, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    /* The plan as written: the importer folds what it can (e.g. a training graph's constant
     * seed gradient), so the figures reported are those of the file read back in file order,
     * what `magpie run` measures; the search's own figures are reported beside them. */
    if (!(plan = cli_load_model(p_onnx, o, false, &code))) goto out;
    if ((st = prof_profile_graph(m, plan, &d)) != IR_OK ||
        (st = sched_simulate(plan, NULL, m, &plan_sim, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, p_onnx);
        goto out;
    }
    rep.best = plan;
    rep.sim = &plan_sim;
    rep.met = a.xs.mode == XS_MODE_MEM ? (double)plan_sim.peak_device_bytes <= a.xs.limit
                                       : plan_sim.latency_s <= a.xs.limit;
    rep.n_store = rep.n_load = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        rep.n_store += plan->nodes[i].op == IR_OP_Store;
        rep.n_load += plan->nodes[i].op == IR_OP_Load;
    }
    if ((st = cli_write_atomic(p_sched, write_schedule, &rep, &d)) != IR_OK) {
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
        printf("rewrites     remat %d, deremat %d, swap %d, deswap %d\n", r.applied[0],
               r.applied[1], r.applied[2], r.applied[3]);
        printf("search       %llu states, %s, %s\n",
               (unsigned long long)r.stats.total.generated + 1,
               cli_fmt_seconds(r.search_seconds, b1, sizeof b1),
               xp_stop_reason_to_string(r.stats.reason));
        printf("plan         %s, %s, %s\n", p_onnx, p_sched, p_report);
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
    prof_close(m);
    sched_sim_free(&eager);
    sched_sim_free(&sim);
    sched_sim_free(&plan_sim);
    ir_graph_free(plan);
    xs_result_free(&r);
    ir_graph_free(g);
    return code;
}
