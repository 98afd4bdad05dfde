/* optimize-run.c - the run `magpie optimize` and `magpie resume` share: load the model (or its
 * training graph), profile it (or, resuming, apply the checkpoint's cost-model snapshot so every
 * node costs what it cost before; with PET on a measured device, the candidates' ops too),
 * search (xs_search: MAGIS Algorithm 3 over fission, remat, swap, substitution, PET candidates
 * and the memory DP's order) under a memory or a latency limit (or none: --pet alone) with its
 * progress line and checkpoints, time the best plans against the original with a measured
 * device (optimize-measure.c: the plan written may then be a runner-up or the original), and
 * write the plan:
 *  - DIR/optimized.onnx: the best graph with its fissions materialized (rw_fission_materialize:
 *    all n parts), rematerialized ops duplicated, Store/Load and the fission ops in domain
 *    "magpie", nodes in the schedule's order;
 *  - DIR/schedule.json, DIR/report.json (also printed by --json) and DIR/memory.svg
 *    (optimize-report.c).
 * The figures reported are those of optimized.onnx read back and simulated in file order; the
 * search's own are checked equal in peak before anything is written.
 *
 * Signals: SIGINT and SIGTERM set a flag the search polls; it stops, writes its final
 * checkpoint (with --checkpoint), and the plan is written: exit 4. SIGUSR1 asks for a
 * checkpoint at once; the search goes on. The handlers only set flags: every write happens on
 * the calling thread, never in a handler. They are installed before the model is loaded, so a
 * signal during the load stops the search as soon as it has started, and restored once the
 * search has ended, so a second SIGINT while the plan is written ends the process at once (the
 * checkpoint is already on disk). The limit not met is exit 3 with the plan still written. */
#define _POSIX_C_SOURCE 200809L
#include "cli-dist.h"
#include "optimize-run.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_OUT_DIR "magpie-out"

/* volatile sig_atomic_t: what xs_options polls, and the one type a handler may write. */
static volatile sig_atomic_t interrupted, checkpoint_now;

static void on_stop(int sig) {
    (void)sig;
    interrupted = 1;
}

static void on_usr1(int sig) {
    (void)sig;
    checkpoint_now = 1;
}

typedef struct saved_signals {
    struct sigaction intr, term, usr1;
} saved_signals;

/* SA_RESTART: a signal landing on a thread in read or write (a checkpoint being written) must
 * not turn into an EINTR failure of that write. */
static void install_signals(saved_signals *old) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, &old->intr);
    sigaction(SIGTERM, &sa, &old->term);
    sa.sa_handler = on_usr1; /* without --checkpoint the flag is never read: ignored */
    sigaction(SIGUSR1, &sa, &old->usr1);
}

static void restore_signals(const saved_signals *old) {
    sigaction(SIGINT, &old->intr, NULL);
    sigaction(SIGTERM, &old->term, NULL);
    sigaction(SIGUSR1, &old->usr1, NULL);
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

/* Writes plan g to path: in the default ONNX domain when it needs no host memory and no fission
 * (substitutions, PET, reordering: cli_plan_standard), so that other runtimes load it; the
 * importer turns the lowered PET patches back into in-place PetPatch (export-standard.c). */
static ir_status save_plan(const ir_graph *g, const char *path, ir_diag *d) {
    if (!cli_plan_standard(g)) return ir_onnx_save(g, path, d);
    ir_graph *std = ir_graph_clone(g);
    if (!std) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    ir_status st = cli_export_standard(std, d);
    if (st == IR_OK) st = ir_onnx_save(std, path, d);
    ir_graph_free(std);
    return st;
}

/* ---------------------------------------------------------------- progress */

/* On a terminal one line rewritten in place about 4 times a second; otherwise (a log, a pipe)
 * one plain line every PLAIN_INTERVAL_S and one at the end. */
#define TTY_INTERVAL_S 0.25
#define PLAIN_INTERVAL_S 10.0

typedef struct progress_ctx {
    const char *cmd;
    bool tty;
    size_t base_peak;
    double base_lat;
} progress_ctx;

static void progress(void *arg, const xs_progress *p, bool final) {
    const progress_ctx *c = arg;
    char line[256];
    uint64_t states = p->generated + 1;
    snprintf(line, sizeof line,
             "magpie: %s %6.1fs  %llu states (%.0f/s)  frontier %llu  best peak %.3fx"
             "  latency %.3fx",
             c->cmd, p->seconds, (unsigned long long)states,
             p->seconds > 0 ? (double)states / p->seconds : 0.0, (unsigned long long)p->frontier,
             c->base_peak ? (double)p->best_peak_bytes / (double)c->base_peak : 0.0,
             c->base_lat > 0 ? p->best_latency_s / c->base_lat : 0.0);
    if (c->tty) /* \r back to the line's start, ESC[K clears what a longer line left behind */
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

/* ---------------------------------------------------------------- the run */

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The output directory, checked before the search so that a search is never spent on a plan
 * that cannot be written: dir is created (with its missing parents, recorded in *made so that a
 * failure before the plan is written removes them again) and a file is created in it and
 * removed. -o under a regular file fails here, as does a directory the user cannot write. */
static int prepare_out_dir(const char *dir, char ***made, int *n_made) {
    ir_diag d = {{0}};
    ir_status st = cli_mkdirs(dir, made, n_made, &d);
    if (st != IR_OK) return cli_fail(cli_exit_for(st), "-o: %s", d.msg);
    char *probe = join(dir, ".magpie-write-test.XXXXXX");
    if (!probe) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    int fd = mkstemp(probe), err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    free(probe);
    if (fd < 0)
        return cli_fail(CLI_EXIT_USAGE, "-o %s: cannot write in the output directory: %s", dir,
                        strerror(err));
    return CLI_EXIT_OK;
}

/* A failure once optimized.onnx is on disk: the plan stays, and the message says where. */
static int fail_after_plan(int code, const char *plan) {
    fprintf(stderr, "magpie: the plan is written: %s\n", plan);
    return code;
}

/* --emit torch: the plan as read back, as a PyTorch step module DIR/step.py (cmd-emit.c). */
static int emit_step(const ir_graph *plan, const char *dir) {
    char *p = join(dir, "step.py");
    if (!p) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    int code = cli_emit_torch_file(plan, p);
    free(p);
    return code;
}

/* The cost model: profiled for g, or resuming, the checkpoint's snapshot applied. */
static prof_model *open_cost(const cli_opts *o, const cli_opt_args *a, const cli_optimize_job *job,
                             const ir_graph *g, int *code) {
    ir_diag d = {{0}};
    ir_status st;
    /* a signal while the model's ops are measured stops that too (prof.h) */
    prof_options po = {.db_path = o->profile_db, .interrupt = &interrupted};
    prof_model *m = prof_open(a->device, &po, &st, &d);
    if (!m) {
        *code = cli_fail_ir(st, &d, NULL);
        return NULL;
    }
    st = job->prof ? prof_snapshot_apply(m, job->prof, &d) : prof_profile_graph(m, g, &d);
    if (st != IR_OK) {
        *code = cli_fail_ir(st, &d, job->prof ? NULL : job->model);
        prof_close(m);
        return NULL;
    }
    return m;
}

/* A measured cost model knows the model's op signatures only: the ops of PET's replacements
 * (a merged conv, a correction's convolution on a region) would be estimates, which can be
 * off by several times on a CPU, and an optimistic one makes a candidate of a replacement that
 * is slower. So the table the search will build is built here and its replacements' ops
 * measured, before the cost model's snapshot is taken; measured costs can change which mutants
 * rank and are kept, so again until a table brings no new signature (at most PROFILE_ROUNDS
 * times). The search's own table, built from the same model state, is then the last one here,
 * every op of it measured, and the one a resume rebuilds from the checkpoint's snapshot. */
#define PROFILE_ROUNDS 4

/* Graphs whose ops were profiled, kept for prof_retime: the PET replacements and the
 * substitutions' children. */
typedef struct kept_graphs {
    const ir_graph **g;
    int n, cap;
} kept_graphs;

/* Takes ownership of h (freed by kept_free), or frees it when out of memory. */
static bool keep_graph(kept_graphs *k, ir_graph *h) {
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 64;
        const ir_graph **ng = realloc(k->g, sizeof *ng * (size_t)cap);
        if (!ng) {
            ir_graph_free(h);
            return false;
        }
        k->g = ng;
        k->cap = cap;
    }
    k->g[k->n++] = h;
    return true;
}

static void kept_free(kept_graphs *k) {
    for (int i = 0; i < k->n; i++) ir_graph_free((ir_graph *)k->g[i]);
    free(k->g);
    memset(k, 0, sizeof *k);
}

/* The graphs that time t's replacements in place (prof_retime runs them whole): g with the j-th
 * candidate of every sub-program applied, for each rank j (candidates are ordered by
 * sub-program, and those of different sub-programs touch different nodes). A mutant's op timed
 * alone and hot can look faster than the op it replaces while the two cost the same in the
 * run (docs/BENCHMARKS.md): its cost must come from where it will run. A candidate that cannot
 * be applied is kept standalone (its replacement graph). */
static ir_status keep_pet_graphs(const ir_graph *g, const pet_table *t, kept_graphs *kept,
                                 ir_diag *d) {
    int *rank = malloc(sizeof *rank * (size_t)(t->n + 1)), max_rank = -1;
    if (!rank) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->n; k++) {
        rank[k] = k > 0 && t->c[k].subprog == t->c[k - 1].subprog ? rank[k - 1] + 1 : 0;
        if (rank[k] > max_rank) max_rank = rank[k];
    }
    ir_status st = IR_OK;
    for (int j = 0; j <= max_rank && st == IR_OK; j++) {
        ir_graph *cur = NULL;
        for (int k = 0; k < t->n && st == IR_OK; k++) {
            if (rank[k] != j) continue;
            ir_status ast;
            ir_diag ad = {{0}};
            ir_graph *next = pet_apply(cur ? cur : g, t, k, NULL, NULL, &ast, &ad);
            if (next) {
                ir_graph_free(cur);
                cur = next;
                continue;
            }
            ir_graph *c = ir_graph_clone(t->c[k].replacement);
            if (!c || !keep_graph(kept, c)) st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        }
        if (cur && !keep_graph(kept, cur) && st == IR_OK)
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    free(rank);
    return st;
}

/* *fresh (may be NULL): whether a signature was measured for the first time. */
static int profile_pet(prof_model *m, const ir_graph *g, const xs_options *xo, kept_graphs *kept,
                       bool *fresh) {
    ir_diag d = {{0}};
    pet_find_opts po;
    xs_pet_options(xo, &po);
    ir_status st = IR_OK;
    prof_stats start;
    prof_get_stats(m, &start);
    for (int round = 0; round < PROFILE_ROUNDS && st == IR_OK; round++) {
        pet_table *t = NULL;
        prof_stats before, after;
        prof_get_stats(m, &before);
        st = pet_find_candidates(g, &po, &t, &d);
        for (int k = 0; st == IR_OK && k < t->n && !interrupted; k++)
            st = prof_profile_graph(m, t->c[k].replacement, &d);
        if (st == IR_OK && kept) st = keep_pet_graphs(g, t, kept, &d);
        pet_table_free(t);
        prof_get_stats(m, &after);
        if (after.measured + after.failed == before.measured + before.failed) break;
    }
    if (fresh) {
        prof_stats end;
        prof_get_stats(m, &end);
        *fresh = end.measured + end.failed != start.measured + start.failed;
    }
    if (st == IR_OK) return CLI_EXIT_OK;
    ir_diag_prefix(&d, "PET candidates");
    return cli_fail_ir(st, &d, NULL);
}

/* The same for the substitutions: a merged convolution, a 1x1 convolution moved before its
 * pooling, a concatenated matmul are ops of new shapes, which the search would cost with the
 * roofline fallback while the plan written is costed with measured ones. On Inception v3 at
 * 96x96 the search so chose a plan it predicted at 0.942 of the original's latency which, its
 * new ops measured when it was written, was predicted at 1.062. So the substitutions that apply
 * to the start graph are applied one after another, and each child's new ops measured, for
 * SUBST_ROUNDS rounds (a round lists the candidates of the graph the previous one made, which
 * the merges of merges need). */
#define SUBST_ROUNDS 3
#define SUBST_MAX 4096

static int profile_subst(prof_model *m, const ir_graph *g, kept_graphs *kept) {
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    rw_rewrite *cand = malloc(sizeof *cand * SUBST_MAX);
    ir_graph *cur = ir_graph_clone(g);
    if (!cand || !cur) {
        free(cand);
        ir_graph_free(cur);
        return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    }
    for (int round = 0; round < SUBST_ROUNDS && st == IR_OK; round++) {
        int n = rw_subst_candidates(cur, cand, SUBST_MAX), applied = 0;
        for (int k = 0; k < n && st == IR_OK && !interrupted; k++) {
            ir_status ast;
            ir_diag ad = {{0}};
            ir_graph *child = rw_apply(cur, &cand[k], NULL, NULL, &ast, &ad);
            if (!child) continue; /* an earlier one of this round changed its site */
            st = prof_profile_graph(m, child, &d);
            if (!keep_graph(kept, cur)) st = ir_diag_set(&d, IR_ERR_NOMEM, "out of memory");
            cur = child;
            applied++;
        }
        if (!applied) break;
    }
    free(cand);
    if (!keep_graph(kept, cur) && st == IR_OK) st = ir_diag_set(&d, IR_ERR_NOMEM, "out of memory");
    if (st == IR_OK) return CLI_EXIT_OK;
    ir_diag_prefix(&d, "substitutions");
    return cli_fail_ir(st, &d, NULL);
}

/* The new ops the substitutions and PET propose, measured (profile_subst, profile_pet), and
 * then every op the search will compare timed again side by side (prof_retime): the model's ops
 * were measured first, the replacements' seconds to minutes later, or in an earlier run whose
 * entries the database kept, and on a shared machine a conv profiled at a busy moment was
 * costed at 1.9 times what it cost in the run beside its PET mutants profiled at a quiet one
 * (CSRNet's, predicted at 0.69 of the original and measured at 1.11; docs/BENCHMARKS.md). The
 * PET table can change with the costs: its new ops, if any, are measured last. */
static int profile_rewrites(prof_model *m, const ir_graph *g, cli_opt_args *a,
                            const cli_optimize_job *job) {
    bool subst = (a->xs.rules & XS_RULE_SUBST) != 0, pet = (a->xs.rules & XS_RULE_PET) != 0;
    if (!prof_is_measured(m) || job->prof || (!subst && !pet)) return CLI_EXIT_OK;
    kept_graphs kept = {0};
    int code = CLI_EXIT_OK;
    if (!keep_graph(&kept, ir_graph_clone(g))) code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    if (code == CLI_EXIT_OK && subst) code = profile_subst(m, g, &kept);
    if (code == CLI_EXIT_OK && pet) code = profile_pet(m, g, &a->xs, &kept, NULL);
    ir_diag d = {{0}};
    ir_status st = code == CLI_EXIT_OK ? prof_retime(m, kept.g, kept.n, &d) : IR_OK;
    kept_free(&kept);
    /* The costs re-timed rank other mutants, whose ops were timed alone (or by an earlier run,
     * kept by the database) if at all: the table they give is re-timed too, in its graphs beside
     * the original, and again while a table brings an op never measured before. */
    for (int round = 0; pet && st == IR_OK && code == CLI_EXIT_OK && round < PROFILE_ROUNDS;
         round++) {
        bool fresh = false;
        if (!keep_graph(&kept, ir_graph_clone(g)))
            code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        if (code == CLI_EXIT_OK) code = profile_pet(m, g, &a->xs, &kept, &fresh);
        if (code == CLI_EXIT_OK) st = prof_retime(m, kept.g, kept.n, &d);
        kept_free(&kept);
        if (!fresh) break;
    }
    if (st != IR_OK) return cli_fail_ir(st, &d, "re-timing the profile");
    return code;
}

int cli_optimize_run(const cli_cmd *cmd, const cli_opts *o, cli_opt_args *a,
                     const cli_optimize_job *job) {
    const char *path = job->model, *dir = o->out_dir ? o->out_dir : DEFAULT_OUT_DIR;
    char device[128] = "";
    int code = CLI_EXIT_OK;
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    prof_model *m = NULL;
    xs_result r = {0};
    sched_sim eager = {0}, sim = {0}, plan_sim = {0};
    sched_memory plan_mem = {0};
    ir_graph *g = NULL, *plan = NULL, *mat = NULL, *loaded = NULL;
    int *mat_order = NULL;
    char *p_onnx = NULL, *p_sched = NULL, *p_report = NULL, *p_svg = NULL, **made = NULL;
    int n_made = 0;
    cli_ckpt ck_store, *ck = NULL;
    saved_signals old_sig;
    bool searching = true;   /* the signal handlers are installed */
    bool wrote_plan = false; /* optimized.onnx is on disk: the directory stays */
    interrupted = 0;
    checkpoint_now = 0;
    install_signals(&old_sig);
    if ((code = cli_dist_check(o, (a->xs.rules & XS_RULE_PET) != 0, a->refine)) != CLI_EXIT_OK)
        goto out;
    a->xs.dist = cli_dist_search();
    bool rank0 = cli_dist_rank() == 0; /* alone prints and writes the plan (cli-dist.h) */
    if (o->checkpoint) {
        ck = &ck_store;
        if ((code = cli_ckpt_prepare(ck, o->checkpoint, job, cli_optimize_options_hash(o, a))) !=
            CLI_EXIT_OK)
            goto out;
    }
    /* every rank checks -o (each fails alike, before any collective), but only rank 0 writes
     * there, so only it records the directories it made: another rank, done first, would
     * remove them under rank 0 as it writes the plan */
    if ((code = prepare_out_dir(dir, rank0 ? &made : NULL, rank0 ? &n_made : NULL)) != CLI_EXIT_OK)
        goto out;
    double t0 = ir_now_seconds();
    if (!(g = cli_load_graph(path, o, false, &code))) goto out;
    double t_load = ir_now_seconds() - t0;
    t0 = ir_now_seconds();
    if (!(m = open_cost(o, a, job, g, &code))) goto out;
    /* The search works on the graph as the importer would read it back (constants folded:
     * a training graph's seed gradient, for one), so the plan's figures survive the round
     * trip through optimized.onnx; the baseline stays the graph as loaded, simulated once its
     * ops are costed as the search will cost them (profile_rewrites re-times them). */
    if (!(loaded = ir_graph_clone(g))) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if ((st = ir_fold_constants(g, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    a->xs.cost = m;
    /* before profile_rewrites: PET's candidate search there polls it too (xs_pet_options) */
    a->xs.interrupt = &interrupted;
    if ((code = profile_rewrites(m, g, a, job)) != CLI_EXIT_OK) goto out;
    if ((st = sched_simulate(loaded, NULL, m, &eager, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    double t_profile = ir_now_seconds() - t0;
    if (ck && (code = cli_ckpt_take_profile(ck, m)) != CLI_EXIT_OK) goto out;
    snprintf(device, sizeof device, "%s", prof_device(m));
    a->xs.limit = cli_limit_resolve(
        &a->limit, a->xs.mode == XS_MODE_MEM ? (double)eager.peak_device_bytes : eager.latency_s);
    progress_ctx pc = {.cmd = cmd->name,
                       .tty = isatty(STDERR_FILENO) == 1,
                       .base_peak = eager.peak_device_bytes,
                       .base_lat = eager.latency_s};
    a->xs.progress = o->quiet || !rank0 ? NULL : progress;
    a->xs.progress_arg = &pc;
    a->xs.progress_interval_s = pc.tty ? TTY_INTERVAL_S : PLAIN_INTERVAL_S;
    if (ck) {
        a->xs.checkpoint = a->xs.dist ? cli_dist_ckpt_write : cli_ckpt_write;
        a->xs.checkpoint_arg = ck;
        a->xs.checkpoint_every_s = a->checkpoint_every_s;
        a->xs.checkpoint_now = &checkpoint_now;
    }
    a->xs.resume = job->resume;
    /* the runners-up --measure times beside the best */
    a->xs.keep_plans = prof_is_measured(m) && a->measure > 1 ? a->measure - 1 : 0;
    st = a->refine ? xs_search_refined(g, &a->xs, &r, &d) : xs_search(g, &a->xs, &r, &d);
    r.eager_peak_bytes = eager.peak_device_bytes;
    r.eager_latency_s = eager.latency_s;
    restore_signals(&old_sig);
    searching = false;
    if (st != IR_OK) {
        /* the final checkpoint's failure names the checkpoint, not the model */
        bool ck_failed = ck && ck->final_failed;
        if (ck_failed) ir_diag_prefix(&d, "cannot write the final checkpoint");
        code = cli_fail_ir(st, &d, ck_failed ? NULL : path);
        goto out;
    }
    if (!rank0) {
        code = r.interrupted ? CLI_EXIT_INTERRUPTED : CLI_EXIT_OK; /* rank 0's is the job's */
        goto out;
    }
    cli_measure mz;
    if ((code = cli_optimize_measure(cmd, o, a, g, m, &r, &mz)) != CLI_EXIT_OK) goto out;
    t0 = ir_now_seconds();
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
    cli_opt_report rep = {.model = path,
                          .device = device,
                          .out_dir = dir,
                          .a = a,
                          .r = &r,
                          .ckpt = ck,
                          .measure = &mz,
                          .limit_abs = a->xs.limit,
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
    /* the directory was made before the search; made again should it have gone since */
    if ((st = cli_mkdirs(dir, NULL, NULL, &d)) != IR_OK ||
        (st = save_plan(best, p_onnx, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    wrote_plan = true;
    /* The plan as written: the importer folds what it can (e.g. a training graph's constant
     * seed gradient), so the figures reported are those of the file read back in file order,
     * what `magpie run` measures; the search's own figures are reported beside them. Its
     * shapes are the ones --shape bound when the model was loaded (the file has no symbolic
     * dimension left to bind), so it is read back without --shape; --data and --frozen still
     * say which of its inputs are data and parameters. */
    cli_opts back = *o;
    back.imp.n_shapes = 0;
    if (!(plan = cli_load_model(p_onnx, &back, false, &code))) {
        code = fail_after_plan(code, p_onnx);
        goto out;
    }
    if ((st = prof_profile_graph(m, plan, &d)) != IR_OK ||
        (st = sched_simulate(plan, NULL, m, &plan_sim, &d)) != IR_OK ||
        (st = sched_memory_compute(plan, NULL, &plan_mem, &d)) != IR_OK) {
        code = fail_after_plan(cli_fail_ir(st, &d, p_onnx), p_onnx);
        goto out;
    }
    rep.best = plan;
    rep.sim = &plan_sim;
    /* a measured latency decides a latency limit; the simulated peak is exact */
    rep.met = a->xs.mode == XS_MODE_MEM ? (double)plan_sim.peak_device_bytes <= a->xs.limit
              : mz.on                   ? mz.lat_met
                                        : plan_sim.latency_s <= a->xs.limit;
    for (int i = 0; i < plan->n_nodes; i++) {
        ir_op_kind op = plan->nodes[i].op;
        rep.n_store += op == IR_OP_Store;
        rep.n_load += op == IR_OP_Load;
        rep.n_fission_ops += op == IR_OP_FissionBuffer || op == IR_OP_FissionSlice ||
                             op == IR_OP_FissionAssemble || op == IR_OP_FissionAccumulate;
    }
    if ((st = cli_write_atomic(p_sched, cli_optimize_write_schedule, &rep, &d)) != IR_OK ||
        (st = cli_optimize_write_plot(p_svg, &eager, &plan_sim, plan_mem.resident_bytes, &d)) !=
            IR_OK) {
        code = fail_after_plan(cli_fail_ir(st, &d, NULL), p_onnx);
        goto out;
    }
    rep.t_write = ir_now_seconds() - t0;
    if ((st = cli_write_atomic(p_report, cli_optimize_write_report, &rep, &d)) != IR_OK) {
        code = fail_after_plan(cli_fail_ir(st, &d, NULL), p_onnx);
        goto out;
    }
    /* last, so that an op without a PyTorch form costs neither the plan nor its report */
    if (o->emit && (code = emit_step(plan, dir)) != CLI_EXIT_OK) {
        code = fail_after_plan(code, p_onnx);
        goto out;
    }
    prof_close(m);
    m = NULL;
    if (o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_optimize_report_json(&j, &rep);
        cli_json_finish(&j);
    } else {
        const char *const files[4] = {p_onnx, p_sched, p_report, p_svg};
        cli_optimize_print_text(&rep, files);
    }
    if (r.interrupted) {
        if (ck)
            fprintf(stderr,
                    "magpie: %s: interrupted; the best plan so far is in %s; continue with "
                    "'magpie resume %s'\n",
                    cmd->name, dir, ck->path);
        else
            fprintf(stderr, "magpie: %s: interrupted; the best plan so far is in %s\n", cmd->name,
                    dir);
        code = CLI_EXIT_INTERRUPTED;
    } else if (!rep.met) {
        char b1[32];
        if (a->xs.mode == XS_MODE_MEM)
            fprintf(stderr, "magpie: warning: memory limit %s not met: best peak %s; plan in %s\n",
                    a->limit_text, cli_fmt_bytes(plan_sim.peak_device_bytes, b1, sizeof b1), dir);
        else
            fprintf(stderr,
                    "magpie: warning: latency limit %s not met: best latency %s; plan in %s\n",
                    a->limit_text, cli_fmt_seconds(plan_sim.latency_s, b1, sizeof b1), dir);
        code = CLI_EXIT_LIMIT;
    } else {
        code = CLI_EXIT_OK;
    }
out:
    if (searching) restore_signals(&old_sig);
    if (wrote_plan) {
        for (int i = 0; i < n_made; i++) free(made[i]);
        free(made);
    } else {
        cli_rmdirs(made, n_made); /* nothing written: the directories made for it go (if empty) */
    }
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
    ir_graph_free(loaded);
    free(mat_order);
    xs_result_free(&r);
    ir_graph_free(g);
    cli_ckpt_free(ck);
    return code;
}
