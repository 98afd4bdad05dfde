/* cli.h - private declarations of the `magpie` command: the sub-command table, the option
 * parser every sub-command shares, the JSON writer, formatting, file helpers and plots.
 *
 * Exit statuses follow DESIGN.md: 0 success, 1 internal error, 2 bad input or usage (one line on
 * stderr naming the file, node or byte and the cause, no partial output left). Only the
 * sub-command's result goes to stdout; with --json that is exactly one JSON object. */
#ifndef MAGPIE_CLI_H
#define MAGPIE_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

#define MAGPIE_VERSION "0.1.0"

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_INTERNAL = 1,
    CLI_EXIT_USAGE = 2, /* bad input or usage */
    CLI_EXIT_LIMIT = 3, /* completed, but the limit was not met or `verify` found a mismatch */
    CLI_EXIT_INTERRUPTED = 4, /* SIGINT/SIGTERM, after the final checkpoint and the plan */
};

/* ---------------------------------------------------------------- options */

/* The options a sub-command accepts (cli_cmd.opts); anything else is a usage error. */
enum cli_opt_mask {
    CLI_OPT_SHAPE = 1u << 0,      /* --shape NAME=D0,D1,... (repeatable) */
    CLI_OPT_DATA = 1u << 1,       /* --data NAME[,NAME] (repeatable) */
    CLI_OPT_SEED = 1u << 2,       /* --seed S */
    CLI_OPT_INPUT = 1u << 3,      /* -i FILE.npy | -i NAME=FILE.npy (repeatable) */
    CLI_OPT_OUTDIR = 1u << 4,     /* -o DIR */
    CLI_OPT_JSON = 1u << 5,       /* --json */
    CLI_OPT_PLOT = 1u << 6,       /* --plot FILE.svg */
    CLI_OPT_DEVICE = 1u << 7,     /* --device cpu|cuda|analytic:<target> */
    CLI_OPT_PROFILE_DB = 1u << 8, /* --profile-db FILE */
    CLI_OPT_TOP = 1u << 9,        /* --top N */
    /* --train, --loss, --target, --optimizer, --lr, --frozen (cli-train.c) */
    CLI_OPT_TRAIN = 1u << 10,
    CLI_OPT_ORDER = 1u << 11,  /* --order eager|memory */
    CLI_OPT_REPEAT = 1u << 12, /* --repeat N */
    /* --mem-limit, --lat-limit, --max-frontier, --rules, --delta, --pet: what defines a search
     * (optimize-opts.c parses the values) */
    CLI_OPT_SEARCH = 1u << 13,
    /* --time, --max-states, --threads, --quiet: a search's budgets and how it runs, which
     * `resume` may change */
    CLI_OPT_BUDGET = 1u << 14,
    CLI_OPT_CHECKPOINT = 1u << 15, /* --checkpoint FILE, --checkpoint-every T */
    CLI_OPT_MODEL = 1u << 16,      /* --model PATH (resume: the model moved) */
    CLI_OPT_CHECK = 1u << 17,      /* --rtol X, --k X (verify: rt-check.h's criterion) */
    CLI_OPT_FISSION = 1u << 18,    /* --fission (inspect) */
    CLI_OPT_EXTERNAL = 1u << 19,   /* --external-data (export) */
    CLI_OPT_TORCH = 1u << 20,      /* --torch (emit) */
    CLI_OPT_EMIT = 1u << 21,       /* --emit torch (optimize) */
    CLI_OPT_STANDARD = 1u << 22,   /* --standard (export) */
};

typedef struct cli_input {
    const char *name; /* NULL for a positional -i FILE.npy */
    const char *path;
} cli_input;

typedef struct cli_opts {
    ir_import_opts imp; /* points into the arrays below */
    const char **shape_names;
    ir_shape *shape_values;
    const char **data_names;
    int n_inputs;
    cli_input *inputs;
    uint64_t seed;
    const char *out_dir; /* NULL when -o was not given */
    bool json;
    const char *plot;
    const char *device;       /* NULL when --device was not given */
    const char *profile_db;   /* NULL: the default database */
    int top;                  /* -1 when --top was not given */
    const char *order;        /* --order: "eager" or "memory"; NULL when not given */
    int repeat;               /* --repeat N: timed executions after one warm-up (default 1, none) */
    bool train;               /* --train: work on the training graph (cli_load_graph) */
    ir_train_opts train_opts; /* --loss, --target, --optimizer, --lr */
    const char *train_only;   /* the first option given that needs --train, for the error */
    /* CLI_OPT_SEARCH and CLI_OPT_BUDGET values as given (NULL when absent); optimize-opts.c
     * parses them */
    const char *mem_limit, *lat_limit, *time_budget, *max_states, *threads, *rules, *delta,
        *max_frontier, *measure, *measure_time;
    bool pet;    /* --pet (CLI_OPT_SEARCH): PET candidates join the search */
    bool refine; /* --refine (CLI_OPT_SEARCH): xs_search_refined */
    bool quiet;
    const char *checkpoint, *checkpoint_every; /* CLI_OPT_CHECKPOINT values as given, or NULL */
    const char *model;                         /* --model, or NULL */
    double rtol, k; /* --rtol, --k (verify): -1 when not given (rt-check.h's defaults) */
    bool fission;   /* --fission (inspect): the dimension graph, F-Tree and what stops the batch */
    bool external_data; /* --external-data (export) */
    const char *emit;   /* --torch (emit) or --emit KIND (optimize): "torch"; NULL when absent */
    bool standard;      /* --standard (export): the default ONNX domain only */
    /* The arguments parsed (after the sub-command's name), as given: optimize records them in
     * its checkpoints so that resume can parse them again. */
    int argc;
    char **argv;
    int end_of_opts; /* index in argv of the "--" that ended the options, argc when none */
    int n_pos;
    const char **pos; /* positional arguments, in order */
    bool help;        /* --help / -h was given: print the sub-command's help */
    char **owned;     /* copies of arguments split in place (--data lists) */
    int n_owned;
} cli_opts;

struct cli_cmd;

/* Parses argv (the arguments after the sub-command's name). On a usage error prints one line on
 * stderr and returns CLI_EXIT_USAGE; otherwise CLI_EXIT_OK (and the caller checks o->help). */
int cli_opts_parse(const struct cli_cmd *cmd, int argc, char **argv, cli_opts *o);
void cli_opts_free(cli_opts *o); /* NULL-safe, idempotent */
/* The option lines of the help for the options in mask. */
void cli_opts_help(FILE *f, unsigned mask);

/* ---------------------------------------------------------------- training (cli-train.c) */

/* Applies one CLI_OPT_TRAIN option (its long name without "--", and its value). */
int cli_train_opt(const struct cli_cmd *cmd, cli_opts *o, const char *name, const char *val);
/* The graph a sub-command works on: the model (cli_load_model), or with --train its training
 * graph built from o->train_opts. On failure reports it and returns NULL with *code set. */
ir_graph *cli_load_graph(const char *path, const cli_opts *o, bool allow_opaque, int *code);

/* ---------------------------------------------------------------- sub-commands */

typedef struct cli_cmd {
    const char *name;
    const char *args;    /* positional arguments for the usage line, e.g. "IN.onnx OUT.onnx" */
    const char *summary; /* one line */
    const char *details; /* paragraph for `magpie help CMD`; may be NULL */
    unsigned opts;       /* cli_opt_mask */
    int min_pos, max_pos;
    int (*run)(const struct cli_cmd *cmd, const cli_opts *o);
} cli_cmd;

int cli_cmd_inspect(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_run(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_export(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_profile(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_schedule(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_optimize(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_verify(const cli_cmd *cmd, const cli_opts *o);
int cli_cmd_resume(const cli_cmd *cmd, const cli_opts *o);
/* `inspect --fission` (inspect-fission.c): prints g's dimension-graph components, F-Tree
 * candidates (built on m, g's eager memory) and the nodes that stop the batch dimension, as
 * text or JSON; returns the exit status. */
struct sched_memory;
int cli_inspect_fission(const char *path, const ir_graph *g, const struct sched_memory *m,
                        bool json);
int cli_cmd_emit(const cli_cmd *cmd, const cli_opts *o);
/* Writes plan g (read from a plan's optimized.onnx) as a PyTorch step module at path, atomically
 * (cmd-emit.c); on a refusal or failure reports it and returns the exit status. */
int cli_emit_torch_file(const ir_graph *g, const char *path);
/* Lowers g's magpie-domain ops to standard ONNX in place (export-standard.c); IR_ERR_UNSUPPORTED
 * naming every op without a standard form (g is then partly lowered: the caller writes nothing). */
ir_status cli_export_standard(ir_graph *g, ir_diag *d);
/* True when g's magpie-domain ops are PetPatch only, and there is one: cli_export_standard then
 * makes it a standard ONNX plan with nothing lost but the patch's in-place write, which
 * cli_fuse_standard_patches restores (no host copies, no fission, no training ops). */
bool cli_plan_standard(const ir_graph *g);
/* Turns every Where(box mask, Pad(patch), out) whose out may be overwritten in place back into
 * PetPatch(out, patch): the inverse of cli_export_standard's lowering (export-standard.c). */
ir_status cli_fuse_standard_patches(ir_graph *g, ir_diag *d);
/* The sub-command named name in main.c's table, or NULL (resume parses a checkpoint's arguments
 * with optimize's). */
const cli_cmd *cli_find_cmd(const char *name);

/* ---------------------------------------------------------------- limits (limits.c) */

/* DESIGN.md "Limits": a plain number is a ratio of the unoptimized value; with a unit it is
 * absolute: bytes (B, KiB, MiB, GiB, TiB; binary) or seconds (us, ms, s). */
typedef enum cli_limit_kind {
    CLI_LIMIT_RATIO = 0,
    CLI_LIMIT_BYTES,
    CLI_LIMIT_SECONDS,
} cli_limit_kind;

typedef struct cli_limit {
    cli_limit_kind kind;
    double value; /* > 0 and finite */
} cli_limit;

/* Parses s; false when it is not a positive finite number with an optional known unit. */
bool cli_parse_limit(const char *s, cli_limit *out);
/* Parses s as a whole decimal integer in [lo, hi]; false otherwise (the caller names the option
 * in its message). */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
/* The absolute value of l against the unoptimized value base (a ratio times base). */
double cli_limit_resolve(const cli_limit *l, double base);

/* ---------------------------------------------------------------- errors */

/* Prints "magpie: <message>" as exactly one line on stderr (newlines in the message become
 * spaces) and returns code. */
int cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit status for a library failure: bad input (I/O, parse, invalid, unsupported, shape) is
 * CLI_EXIT_USAGE, out of memory and internal errors CLI_EXIT_INTERNAL. */
int cli_exit_for(ir_status st);
/* Reports a library failure: prints d's message (prefixed with `prefix` unless it already starts
 * with it; prefix may be NULL) and returns cli_exit_for(st). */
int cli_fail_ir(ir_status st, ir_diag *d, const char *prefix);
/* Loads a model with o's import options and allow_opaque; on failure reports it and returns
 * NULL with *code set. */
ir_graph *cli_load_model(const char *path, const cli_opts *o, bool allow_opaque, int *code);

/* ---------------------------------------------------------------- JSON writer */

/* A streaming writer: commas and key/value separators are inserted by the writer, strings are
 * escaped per RFC 8259 (control characters as \u00XX; bytes >= 0x80 pass through as UTF-8). */
#define CLI_JSON_MAX_DEPTH 32
typedef struct cli_json {
    FILE *f;
    int depth;
    bool first[CLI_JSON_MAX_DEPTH]; /* no element written yet at this depth */
    bool after_key;
} cli_json;

void cli_json_init(cli_json *j, FILE *f);
void cli_json_obj_begin(cli_json *j);
void cli_json_obj_end(cli_json *j);
void cli_json_arr_begin(cli_json *j);
void cli_json_arr_end(cli_json *j);
void cli_json_key(cli_json *j, const char *key);
void cli_json_str(cli_json *j, const char *s); /* NULL writes null */
void cli_json_int(cli_json *j, int64_t v);
void cli_json_uint(cli_json *j, uint64_t v);
void cli_json_num(cli_json *j, double v); /* non-finite values write null */
void cli_json_bool(cli_json *j, bool v);
/* A key and its value in one call: the common case of an object member. */
void cli_json_kv_str(cli_json *j, const char *key, const char *s);
void cli_json_kv_int(cli_json *j, const char *key, int64_t v);
void cli_json_kv_uint(cli_json *j, const char *key, uint64_t v);
void cli_json_kv_num(cli_json *j, const char *key, double v);
void cli_json_kv_bool(cli_json *j, const char *key, bool v);
void cli_json_null(cli_json *j);
/* [D0, D1, ...] */
void cli_json_shape(cli_json *j, const ir_shape *s);
/* {"name": ..., "dtype": ..., "shape": [...]}, the description of a tensor every command uses. */
void cli_json_tensor(cli_json *j, const char *name, ir_dtype t, const ir_shape *s);
/* Ends the document with a newline. */
void cli_json_finish(cli_json *j);

/* ---------------------------------------------------------------- formatting */

/* "512 B", "1.5 KiB", "12.3 MiB", ... into buf; returns buf. */
const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t n);
/* "812", "1.23 k", "4.56 G" (SI prefixes) into buf; returns buf. */
const char *cli_fmt_si(double v, char *buf, size_t n);
/* "1.23 ms", "4.5 s" into buf; returns buf. */
const char *cli_fmt_seconds(double s, char *buf, size_t n);

/* ---------------------------------------------------------------- files */

/* Replaces each character outside [A-Za-z0-9._-] by '_' (an empty name becomes "_"). */
void cli_sanitize_name(const char *name, char *buf, size_t n);
/* Creates dir and its missing parents. *created (may be NULL) receives a malloc'd array of the
 * directories it created, outermost first, *n_created their count, so a failure can remove
 * them again (cli_rmdirs). */
ir_status cli_mkdirs(const char *dir, char ***created, int *n_created, ir_diag *d);
/* Removes the directories cli_mkdirs created (innermost first, only when empty) and frees the
 * array. */
void cli_rmdirs(char **created, int n_created);
/* Writes path atomically: write(f, arg) fills a temporary file in the same directory, which is
 * flushed, fsync'ed and renamed over path. On failure no file is left. write returns false on
 * its own failure (with a message in d). */
ir_status cli_write_atomic(const char *path, bool (*write)(FILE *f, void *arg, ir_diag *d),
                           void *arg, ir_diag *d);

/* ---------------------------------------------------------------- plots */

/* A one-line sparkline of v (downsampled by max to at most width columns) with the block
 * characters U+2581..U+2588, scaled from the smallest to the largest column. */
void cli_sparkline(FILE *f, const size_t *v, int n, int width);

typedef struct cli_mem_plot {
    const char *title;
    const size_t *step_bytes; /* live bytes at each step */
    int n_steps;
    size_t resident_bytes; /* drawn as a reference line */
    int peak_step;
    /* Optional second series over the same steps (e.g. the eager order beside a schedule), drawn
     * as a dashed line; NULL for none. The labels name the two series in a legend (NULL: no
     * legend). */
    const size_t *ref_bytes;
    const char *label, *ref_label;
    int ref_n_steps; /* steps of ref_bytes when they differ from n_steps; 0: n_steps */
} cli_mem_plot;

/* Writes an SVG plot of live memory over schedule steps (axes, MiB labels, title, the peak
 * marked, the optional second series and legend) atomically to path. */
ir_status cli_plot_svg(const char *path, const cli_mem_plot *p, ir_diag *d);

#endif
