/* optimize-run.h - what `magpie optimize` (cmd-optimize.c) and `magpie resume` (cmd-resume.c)
 * share, so that a resumed search runs through exactly the code of a new one:
 *  - optimize-opts.c: the search options parsed from cli_opts, and the hash of those that
 *    define the search (a checkpoint records it; resume refuses a mismatch);
 *  - optimize-run.c: the one run: load, profile (or apply a checkpoint's profile), search with
 *    signals and checkpoints, write the plan and the report, pick the exit status;
 *  - optimize-measure.c: with a measured device, the best plans timed against the original
 *    and the one to write chosen (--measure);
 *  - optimize-report.c: report.json, schedule.json, memory.svg and the text summary;
 *  - optimize-ckpt.c: the checkpoint callback the explorer calls, and what it counts.
 * Private to cli/. */
#ifndef MAGPIE_OPTIMIZE_RUN_H
#define MAGPIE_OPTIMIZE_RUN_H

#include "ckpt-search.h"
#include "cli.h"
#include "explorer.h"
#include "prof.h"
#include "schedule.h"

#define CLI_DEFAULT_DEVICE "analytic:rtx3090"
#define CLI_DEFAULT_CKPT_EVERY_S 60.0
#define CLI_DEFAULT_MEASURE 3
#define CLI_MAX_MEASURE 16

/* ---------------------------------------------------------------- options (optimize-opts.c) */

typedef struct cli_opt_args {
    xs_options xs; /* cost, limit, callbacks and resume are filled by the run */
    cli_limit limit;
    const char *limit_text;
    const char *device;        /* --device or CLI_DEFAULT_DEVICE */
    double checkpoint_every_s; /* with --checkpoint */
    bool refine;               /* --refine: xs_search_refined */
    int measure;               /* --measure N (default CLI_DEFAULT_MEASURE; 0: off) */
    double measure_s;          /* --measure-time, or a quarter of --time */
} cli_opt_args;

/* The --rules families, in the order report.json lists them. */
typedef struct cli_rule_family {
    const char *name;
    unsigned flag; /* xs_rule_flags */
} cli_rule_family;
extern const cli_rule_family cli_rule_families[];
extern const int cli_n_rule_families;

/* Parses and checks o's search options into *a (zeroed first); a usage error is reported and
 * returned (CLI_EXIT_USAGE), CLI_EXIT_OK otherwise. Nothing is read or written. */
int cli_optimize_parse(const cli_cmd *cmd, const cli_opts *o, cli_opt_args *a);

/* XXH64 of a canonical text of the options that define a search: mode and limit, device, rule
 * families, delta, max-frontier, seed, --train and its options, --frozen, --shape and --data.
 * Not the budgets (--time, --max-states), --threads, outputs, --quiet, --profile-db nor the
 * checkpoint options: resume may change those. */
uint64_t cli_optimize_options_hash(const cli_opts *o, const cli_opt_args *a);

/* ---------------------------------------------------------------- the run (optimize-run.c) */

typedef struct cli_optimize_job {
    const char *model; /* the model file */
    /* The optimize arguments a checkpoint records (OPTS): what resume parses again. */
    int argc;
    const char *const *argv;
    /* The model file's content hash when the caller has it already (resume checked it). */
    bool have_model_hash;
    uint64_t model_hash;
    /* Resume: the checkpoint's cost-model snapshot, applied instead of profiling, and its
     * search snapshot. NULL for a new search. */
    const prof_snapshot *prof;
    const xs_snapshot *resume;
} cli_optimize_job;

/* Runs the search job describes with options o (parsed into a by cli_optimize_parse) and writes
 * the plan; returns the exit status (DESIGN.md), having reported any failure. */
int cli_optimize_run(const cli_cmd *cmd, const cli_opts *o, cli_opt_args *a,
                     const cli_optimize_job *job);

/* ---------------------------------------------------------------- checkpoints (optimize-ckpt.c) */

typedef struct cli_ckpt {
    const char *path;
    ckpt_meta meta; /* model path and hashes */
    int argc;       /* OPTS */
    const char *const *argv;
    prof_snapshot prof; /* PROF: taken once, after profiling */
    uint32_t written, failed;
    uint64_t last_bytes; /* size of the last checkpoint written */
    bool failing;        /* the last one failed: one warning per streak of failures */
    bool final_failed;   /* the final one failed (the search then fails with its status) */
    char last_error[256];
} cli_ckpt;

/* Removes what crashed writers left next to path (ckpt_cleanup_stale) and fills c; the model's
 * hash is computed unless job has it. A failure (an unreadable directory or model) is reported
 * and its exit status returned. */
int cli_ckpt_prepare(cli_ckpt *c, const char *path, const cli_optimize_job *job,
                     uint64_t options_hash);
/* Takes the cost model's snapshot for the PROF section, once the model is profiled. */
int cli_ckpt_take_profile(cli_ckpt *c, const prof_model *m);
/* xs_options.checkpoint: encodes s with the OPTS and PROF sections and commits it to c->path. A
 * periodic failure is a warning on stderr (the explorer goes on); the final one's status makes
 * the search fail. */
ir_status cli_ckpt_write(void *arg, const xs_snapshot *s, bool final, ir_diag *d);
/* report.json's "checkpoint" object (null without c). */
void cli_ckpt_report(cli_json *j, const cli_ckpt *c, const xs_result *r);
void cli_ckpt_free(cli_ckpt *c); /* NULL-safe */

/* ---------------------------------------------------------------- measuring (optimize-measure.c)
 */

#define CLI_MEASURE_MAX_ROUNDS 15

/* One plan as measured: [0] the search's best, then its runners-up (xs_result.plans). */
typedef struct cli_measure_plan {
    int chain_len; /* rewrites from the start state */
    size_t peak_bytes;
    bool within_memory; /* within the memory limit (always in latency mode) */
    double predicted_s;
    bool measured;     /* timed: within the memory limit and the budget */
    double measured_s; /* the median of its samples (NAN when not timed) */
    double ratio;      /* the median over the rounds of its sample over the original's */
    double rounds_s[CLI_MEASURE_MAX_ROUNDS];
} cli_measure_plan;

typedef struct cli_measure {
    bool on;             /* measured (a cpu device, --measure > 0, not interrupted) */
    const char *why_not; /* when not: why the figures are predictions */
    int n_plans;
    cli_measure_plan plans[CLI_MAX_MEASURE];
    int rounds;
    double budget_s, seconds;
    double base_predicted_s, base_measured_s;     /* the original in its eager order */
    double base_rounds_s[CLI_MEASURE_MAX_ROUNDS]; /* its samples beside plan 0 */
    int chosen;         /* the plan written: an index into plans, or -1 for the original */
    char fallback[320]; /* why another plan than the search's best was written ("" if none) */
    bool lat_met;       /* latency mode: the written plan's measured latency is within limit */
} cli_measure;

/* With a measured device, times the search's best plan and runners-up (r->plans) against the
 * original g (constant-folded, the search's start graph) in its eager order, within
 * a->measure_s, and chooses the plan to write (the file's header comment): r's best is then that
 * plan (xs_result_swap_plan), or the original in its eager order. Otherwise only records why
 * not. Returns the exit status of a failure (reported), CLI_EXIT_OK otherwise. */
int cli_optimize_measure(const cli_cmd *cmd, const cli_opts *o, const cli_opt_args *a,
                         const ir_graph *g, prof_model *m, xs_result *r, cli_measure *out);
/* The written plan's measurement, or NULL (not measured, or the original written). */
const cli_measure_plan *cli_measure_written(const cli_measure *mz);
/* report.json's "predicted_latency_seconds", "measured_latency_seconds" and "measurement". */
void cli_measure_report(cli_json *j, const cli_measure *mz, double best_predicted_s);

/* ---------------------------------------------------------------- report (optimize-report.c) */

typedef struct cli_opt_report {
    const char *model, *device, *out_dir;
    const cli_opt_args *a;
    const xs_result *r;
    const cli_ckpt *ckpt; /* NULL without --checkpoint */
    const cli_measure *measure;
    const ir_graph *best; /* the plan as read back: file order = schedule */
    const sched_sim *sim; /* of best in file order */
    double limit_abs;
    bool met;
    int threads;
    double t_load, t_profile, t_write;
    int n_store, n_load, n_fission_ops;
} cli_opt_report;

void cli_optimize_report_json(cli_json *j, const cli_opt_report *p);
/* cli_write_atomic writers: report.json and schedule.json (arg: the cli_opt_report). */
bool cli_optimize_write_report(FILE *f, void *arg, ir_diag *d);
bool cli_optimize_write_schedule(FILE *f, void *arg, ir_diag *d);
/* memory.svg: live device bytes per step of the plan, the eager order beside it. */
ir_status cli_optimize_write_plot(const char *path, const sched_sim *eager, const sched_sim *plan,
                                  size_t resident, ir_diag *d);
/* The summary on stdout without --json. */
void cli_optimize_print_text(const cli_opt_report *p, const char *const files[4]);

#endif
