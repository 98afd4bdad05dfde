/* cli-opts.c - the one option parser of every sub-command. A table lists each option once with
 * its help line; a sub-command names the options it accepts (cli_cmd.opts), and everything else
 * is a usage error. Options take their value as `--opt VALUE`, `--opt=VALUE` or `-iVALUE`.
 *
 * All arrays are sized from argc before parsing, so the parser never reallocates; strings it
 * splits are copied into o->owned, everything else points into argv. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct opt_def {
    unsigned mask;
    const char *lng;     /* without "--"; NULL for short-only */
    char shrt;           /* 0 for long-only */
    const char *metavar; /* NULL for a flag */
    const char *help;
} opt_def;

static const opt_def defs[] = {
    {CLI_OPT_INPUT, NULL, 'i', "[NAME=]FILE.npy",
     "bind a graph input: positional files bind the data inputs in order, NAME=FILE any input"
     " by name (repeatable)"},
    {CLI_OPT_OUTDIR, NULL, 'o', "DIR",
     "directory for the output files, created if missing"
     " (default: . for run, magpie-out for optimize)"},
    {CLI_OPT_SHAPE, "shape", 0, "NAME=D0,D1,...",
     "shape of a graph input, or the value of a symbolic dimension (repeatable)"},
    {CLI_OPT_DATA, "data", 0, "NAME[,NAME]",
     "the data inputs (default: the first graph input) (repeatable)"},
    {CLI_OPT_SEED, "seed", 0, "S", "seed of the weights without values (default: 0)"},
    {CLI_OPT_JSON, "json", 0, NULL, "print one JSON object on stdout instead of text"},
    {CLI_OPT_PLOT, "plot", 0, "FILE.svg", "write an SVG plot of memory over schedule steps"},
    {CLI_OPT_DEVICE, "device", 0, "DEVICE",
     "cost model: cpu, cuda or analytic:<target> with target rtx3090, a100, h100 or h200"
     " (default: analytic:rtx3090)"},
    {CLI_OPT_PROFILE_DB, "profile-db", 0, "FILE",
     "profile database of measured costs (default: $XDG_CACHE_HOME/magpie/profile.db)"},
    {CLI_OPT_TOP, "top", 0, "N", "list the N costliest nodes, 0 for all (default: 20)"},
    {CLI_OPT_REPEAT, "repeat", 0, "N",
     "execute N more times after the first and report the median wall time (benchmarking)"},
    {CLI_OPT_ORDER, "order", 0, "eager|memory",
     "order of the nodes: eager (the model's node order) or memory (the memory-minimizing"
     " order); run defaults to eager"},
    {CLI_OPT_SEARCH, "mem-limit", 0, "X",
     "memory limit: a ratio of the unoptimized peak (0.5) or absolute (512MiB, 8GiB)"},
    {CLI_OPT_SEARCH, "lat-limit", 0, "X",
     "latency limit: a ratio of the unoptimized latency (1.10) or absolute (12ms, 1.5s)"},
    {CLI_OPT_BUDGET, "time", 0, "T",
     "search time budget (10s, 500ms; default: 10s); a resumed search counts its earlier runs"},
    {CLI_OPT_BUDGET, "max-states", 0, "K",
     "stop after K distinct states (default: 2^20); a resumed search counts its earlier runs"},
    {CLI_OPT_SEARCH, "max-frontier", 0, "N",
     "keep at most N states waiting to be expanded, evicting the worst (default: 100000)"},
    {CLI_OPT_BUDGET, "threads", 0, "N", "search threads (default: the CPUs available)"},
    {CLI_OPT_SEARCH, "rules", 0, "LIST",
     "rule families, comma-separated: fission, remat, swap, reorder, subst, pet, remat-chain"
     " (default: fission to subst)"},
    {CLI_OPT_SEARCH, "pet", 0, NULL,
     "search with PET's partially equivalent mutants (verified, corrected) too; alone (no"
     " limit) it minimizes latency with no memory bound (pet and subst); inference graphs only"},
    {CLI_OPT_SEARCH, "delta", 0, "D", "relaxed acceptance factor of the search (default: 1.1)"},
    {CLI_OPT_SEARCH, "refine", 0, NULL,
     "with --mem-limit: after a quarter of the budget, latency-bounded searches look for a"
     " faster plan within the limit (not MAGIS's Algorithm 3 alone; no --checkpoint)"},
    {CLI_OPT_BUDGET, "measure", 0, "N",
     "with --device cpu: execute the N best plans found alternately with the original and"
     " keep the best measured one (default: 3; 0: trust the cost model)"},
    {CLI_OPT_BUDGET, "measure-time", 0, "T",
     "time budget of --measure, besides --time (default: a quarter of --time)"},
    {CLI_OPT_BUDGET, "quiet", 0, NULL, "no progress line on stderr"},
    {CLI_OPT_CHECKPOINT, "checkpoint", 0, "FILE",
     "write the search's state to FILE periodically, on SIGUSR1, and when it ends (also on"
     " SIGINT/SIGTERM); `magpie resume FILE` continues it"},
    {CLI_OPT_CHECKPOINT, "checkpoint-every", 0, "T",
     "with --checkpoint: time between periodic checkpoints (60, 300s, 500ms; default: 60s)"},
    {CLI_OPT_MODEL, "model", 0, "PATH",
     "the model, when it is no longer at the path the checkpoint recorded (its content must be"
     " the same)"},
    {CLI_OPT_CHECK, "rtol", 0, "X",
     "an output passes when its error against the float64 run is at most X times its norm"
     " (floored at 1e-6 of the largest output of its kind; default: 1e-4)"},
    {CLI_OPT_CHECK, "k", 0, "X",
     "an output also passes when its error is at most X times the original's own float32"
     " error against the float64 run (default: 10; 0: --rtol alone)"},
    {CLI_OPT_FISSION, "fission", 0, NULL,
     "instead of the summary: the dimension graph's components, the F-Tree's candidates (heat,"
     " score) and the nodes that stop a fission along the batch, with the reasons"},
    {CLI_OPT_EXTERNAL, "external-data", 0, NULL,
     "write the initializers of 1 KiB or more to OUT.onnx.data (ONNX external data); done"
     " anyway when the model would pass protobuf's 2 GB limit"},
    {CLI_OPT_TORCH, "torch", 0, NULL,
     "emit the plan as a PyTorch module (step(params, inputs), params_from_module(module))"},
    {CLI_OPT_EMIT, "emit", 0, "torch",
     "also write the plan as a PyTorch step module, DIR/step.py (magpie emit --torch)"},
    {CLI_OPT_STANDARD, "standard", 0, NULL,
     "write the default ONNX domain only: lower Store/Load, the fission ops and PET's patches to"
     " standard ops; refuse (naming them) ops without a standard form"},
    {CLI_OPT_TRAIN, "train", 0, NULL,
     "work on the training graph: forward, loss, backward and the optional optimizer step"},
    {CLI_OPT_TRAIN, "loss", 0, "sum|mse|ce",
     "with --train: sum of the first output (default), mean squared error against --target,"
     " or softmax cross-entropy over its last axis against an int64 input 'labels'"},
    {CLI_OPT_TRAIN, "target", 0, "NAME",
     "with --loss mse: the graph input holding the target (default: a new input 'target')"},
    {CLI_OPT_TRAIN, "optimizer", 0, "none|sgd|momentum|adam",
     "with --train: one optimizer step after the backward (default: none)"},
    {CLI_OPT_TRAIN, "lr", 0, "LR", "with --optimizer: the learning rate (default: 0.01)"},
    {CLI_OPT_TRAIN, "frozen", 0, "REGEX",
     "parameters whose names match (POSIX extended) are not trained"},
    {CLI_OPT_TRAIN, "fuse-decomposed", 0, NULL,
     "read LayerNorm and exact GELU that the exporter decomposed into elementary ops (below"
     " opsets 17 and 20) as one LayerNormalization or Gelu node each, and bypass Dropouts that"
     " draw nothing, as the module computes them, so that the backward keeps what PyTorch's"
     " keeps"},
};
#define N_DEFS ((int)(sizeof defs / sizeof defs[0]))

/* Prints text word-wrapped to width columns, continuation lines indented by indent. */
static void put_wrapped(FILE *f, const char *text, int indent, int width) {
    int col = indent;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (col > indent && col + 1 + (int)w > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        }
        if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
    }
    fputc('\n', f);
}

void cli_opts_help(FILE *f, unsigned mask) {
    for (int i = 0; i < N_DEFS; i++) {
        const opt_def *od = &defs[i];
        if (!(od->mask & mask)) continue;
        char head[64];
        if (od->lng)
            snprintf(head, sizeof head, "--%s%s%s", od->lng, od->metavar ? " " : "",
                     od->metavar ? od->metavar : "");
        else
            snprintf(head, sizeof head, "-%c %s", od->shrt, od->metavar ? od->metavar : "");
        fprintf(f, "  %-26s ", head);
        put_wrapped(f, od->help, 29, 100);
    }
}

static char *own(cli_opts *o, const char *s) {
    char *c = strdup(s);
    if (c) o->owned[o->n_owned++] = c;
    return c;
}

/* Parses one non-negative decimal integer that fills [s, end). */
static bool parse_dim(const char *s, const char *end, int64_t *out) {
    if (s == end) return false;
    int64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        if (v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

static int parse_shape(const cli_cmd *cmd, cli_opts *o, const char *arg) {
    /* Split at the last '=': dims never contain one, names might. */
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg)
        return cli_fail(CLI_EXIT_USAGE, "%s: --shape '%s': expected NAME=D0,D1,...", cmd->name,
                        arg);
    ir_shape s = {0};
    const char *p = eq + 1;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (s.rank == IR_MAX_RANK)
            return cli_fail(CLI_EXIT_USAGE, "%s: --shape '%s': more than %d dimensions", cmd->name,
                            arg, IR_MAX_RANK);
        if (!parse_dim(p, end, &s.dims[s.rank]))
            return cli_fail(CLI_EXIT_USAGE,
                            "%s: --shape '%s': '%.*s' is not a dimension (expected NAME=D0,D1,...)",
                            cmd->name, arg, (int)(end - p), p);
        s.rank++;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return cli_fail(CLI_EXIT_USAGE, "%s: --shape '%s': trailing ','", cmd->name, arg);
    }
    char *name = own(o, arg);
    if (!name) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    name[eq - arg] = '\0';
    int k = o->imp.n_shapes++;
    o->shape_names[k] = name;
    o->shape_values[k] = s;
    return CLI_EXIT_OK;
}

static int parse_data(const cli_cmd *cmd, cli_opts *o, const char *arg) {
    char *list = own(o, arg);
    if (!list) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    for (char *p = list;;) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        if (!*p)
            return cli_fail(CLI_EXIT_USAGE, "%s: --data '%s': empty input name", cmd->name, arg);
        o->data_names[o->imp.n_data++] = p;
        if (!end) break;
        p = end + 1;
    }
    return CLI_EXIT_OK;
}

static int parse_seed(const cli_cmd *cmd, cli_opts *o, const char *arg) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *arg == '-' || *end || errno)
        return cli_fail(CLI_EXIT_USAGE, "%s: --seed '%s': expected a non-negative integer",
                        cmd->name, arg);
    o->seed = v;
    return CLI_EXIT_OK;
}

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* An integer option value of at least min (--top, --repeat). */
static int parse_count(const cli_cmd *cmd, const char *opt, const char *arg, long min, int *out) {
    long long v;
    if (!cli_parse_int(arg, min, 1000000000, &v))
        return cli_fail(CLI_EXIT_USAGE, "%s: --%s '%s': expected an integer of at least %ld",
                        cmd->name, opt, arg, min);
    *out = (int)v;
    return CLI_EXIT_OK;
}

static int parse_input(const cli_cmd *cmd, cli_opts *o, const char *arg) {
    cli_input in = {.name = NULL, .path = arg};
    /* NAME=FILE, unless the whole argument names an existing file (paths may contain '='). */
    const char *eq = strchr(arg, '=');
    if (eq && access(arg, F_OK) != 0) {
        if (eq == arg || !eq[1])
            return cli_fail(CLI_EXIT_USAGE, "%s: -i '%s': expected FILE.npy or NAME=FILE.npy",
                            cmd->name, arg);
        char *name = own(o, arg);
        if (!name) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        name[eq - arg] = '\0';
        in.name = name;
        in.path = eq + 1;
    }
    if (!*in.path) return cli_fail(CLI_EXIT_USAGE, "%s: -i: empty file name", cmd->name);
    o->inputs[o->n_inputs++] = in;
    return CLI_EXIT_OK;
}

static int apply(const cli_cmd *cmd, cli_opts *o, const opt_def *od, const char *val) {
    switch (od->mask) {
    case CLI_OPT_SHAPE: return parse_shape(cmd, o, val);
    case CLI_OPT_DATA: return parse_data(cmd, o, val);
    case CLI_OPT_SEED: return parse_seed(cmd, o, val);
    case CLI_OPT_INPUT: return parse_input(cmd, o, val);
    case CLI_OPT_OUTDIR:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: -o: empty directory name", cmd->name);
        o->out_dir = val;
        return CLI_EXIT_OK;
    case CLI_OPT_JSON: o->json = true; return CLI_EXIT_OK;
    case CLI_OPT_FISSION: o->fission = true; return CLI_EXIT_OK;
    case CLI_OPT_PLOT:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --plot: empty file name", cmd->name);
        o->plot = val;
        return CLI_EXIT_OK;
    case CLI_OPT_DEVICE:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --device: empty device", cmd->name);
        o->device = val;
        return CLI_EXIT_OK;
    case CLI_OPT_PROFILE_DB:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --profile-db: empty file name", cmd->name);
        o->profile_db = val;
        return CLI_EXIT_OK;
    case CLI_OPT_TOP: return parse_count(cmd, "top", val, 0, &o->top);
    case CLI_OPT_REPEAT: return parse_count(cmd, "repeat", val, 1, &o->repeat);
    case CLI_OPT_ORDER:
        if (strcmp(val, "eager") && strcmp(val, "memory"))
            return cli_fail(CLI_EXIT_USAGE, "%s: --order '%s': expected eager or memory", cmd->name,
                            val);
        o->order = val;
        return CLI_EXIT_OK;
    case CLI_OPT_TRAIN: return cli_train_opt(cmd, o, od->lng, val);
    case CLI_OPT_CHECKPOINT:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --%s: empty value", cmd->name, od->lng);
        if (!strcmp(od->lng, "checkpoint"))
            o->checkpoint = val;
        else
            o->checkpoint_every = val;
        return CLI_EXIT_OK;
    case CLI_OPT_MODEL:
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --model: empty file name", cmd->name);
        o->model = val;
        return CLI_EXIT_OK;
    case CLI_OPT_EXTERNAL: o->external_data = true; return CLI_EXIT_OK;
    case CLI_OPT_CHECK: {
        char *end = NULL;
        errno = 0;
        double v = strtod(val, &end);
        bool rtol = !strcmp(od->lng, "rtol");
        if (!*val || *end || errno || !isfinite(v) || v < 0 || (rtol && v == 0))
            return cli_fail(CLI_EXIT_USAGE, "%s: --%s '%s': expected a %s number", cmd->name,
                            od->lng, val, rtol ? "positive" : "non-negative");
        if (rtol)
            o->rtol = v;
        else
            o->k = v;
        return CLI_EXIT_OK;
    }
    case CLI_OPT_STANDARD: o->standard = true; return CLI_EXIT_OK;
    case CLI_OPT_TORCH:
    case CLI_OPT_EMIT:
        if (!strcmp(od->lng, "emit") && strcmp(val, "torch"))
            return cli_fail(CLI_EXIT_USAGE, "%s: --emit '%s': the one kind is torch", cmd->name,
                            val);
        o->emit = "torch";
        return CLI_EXIT_OK;
    case CLI_OPT_SEARCH:
    case CLI_OPT_BUDGET: {
        if (!strcmp(od->lng, "quiet")) {
            o->quiet = true;
            return CLI_EXIT_OK;
        }
        if (!strcmp(od->lng, "pet")) {
            o->pet = true;
            return CLI_EXIT_OK;
        }
        if (!strcmp(od->lng, "refine")) {
            o->refine = true;
            return CLI_EXIT_OK;
        }
        const char **slot = !strcmp(od->lng, "mem-limit")      ? &o->mem_limit
                            : !strcmp(od->lng, "lat-limit")    ? &o->lat_limit
                            : !strcmp(od->lng, "time")         ? &o->time_budget
                            : !strcmp(od->lng, "max-states")   ? &o->max_states
                            : !strcmp(od->lng, "max-frontier") ? &o->max_frontier
                            : !strcmp(od->lng, "threads")      ? &o->threads
                            : !strcmp(od->lng, "rules")        ? &o->rules
                            : !strcmp(od->lng, "measure")      ? &o->measure
                            : !strcmp(od->lng, "measure-time") ? &o->measure_time
                                                               : &o->delta;
        *slot = val;
        return CLI_EXIT_OK;
    }
    }
    return cli_fail(CLI_EXIT_INTERNAL, "option table out of date");
}

/* Finds the option a names; *attached receives a value written in the same argument
 * ("--opt=V", "-iV") or NULL. */
static const opt_def *lookup(const char *a, const char **attached) {
    *attached = NULL;
    if (a[1] == '-') {
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        for (int i = 0; i < N_DEFS; i++) {
            if (defs[i].lng && strlen(defs[i].lng) == len && !strncmp(defs[i].lng, name, len)) {
                if (eq) *attached = eq + 1;
                return &defs[i];
            }
        }
        return NULL;
    }
    for (int i = 0; i < N_DEFS; i++) {
        if (defs[i].shrt && defs[i].shrt == a[1]) {
            if (a[2]) *attached = a + 2;
            return &defs[i];
        }
    }
    return NULL;
}

static int parse_args(const cli_cmd *cmd, int argc, char **argv, cli_opts *o) {
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') { /* "-" alone is a file name */
            o->pos[o->n_pos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            o->end_of_opts = i;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            continue;
        }
        const char *val;
        const opt_def *od = lookup(a, &val);
        if (!od || !(od->mask & cmd->opts))
            return cli_fail(CLI_EXIT_USAGE, "%s: unknown option '%s' (try 'magpie %s --help')",
                            cmd->name, a, cmd->name);
        if (!od->metavar && val)
            return cli_fail(CLI_EXIT_USAGE, "%s: option '--%s' takes no value", cmd->name, od->lng);
        if (od->metavar && !val) {
            if (i + 1 >= argc)
                return cli_fail(CLI_EXIT_USAGE, "%s: option '%s' needs a value %s", cmd->name, a,
                                od->metavar);
            val = argv[++i];
        }
        int code = apply(cmd, o, od, val);
        if (code != CLI_EXIT_OK) return code;
    }
    return CLI_EXIT_OK;
}

int cli_opts_parse(const cli_cmd *cmd, int argc, char **argv, cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->top = -1;
    o->repeat = 0;
    o->rtol = o->k = -1;
    /* Upper bounds: one entry per argument, and one data name per ',' besides. */
    size_t n = (size_t)argc + 1, n_data = n;
    for (int i = 0; i < argc; i++)
        for (const char *p = argv[i]; *p; p++) n_data += *p == ',';
    o->shape_names = calloc(n, sizeof *o->shape_names);
    o->shape_values = calloc(n, sizeof *o->shape_values);
    o->data_names = calloc(n_data, sizeof *o->data_names);
    o->inputs = calloc(n, sizeof *o->inputs);
    o->pos = calloc(n, sizeof *o->pos);
    o->owned = calloc(2 * n, sizeof *o->owned);
    if (!o->shape_names || !o->shape_values || !o->data_names || !o->inputs || !o->pos || !o->owned)
        return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    o->imp.shape_names = o->shape_names;
    o->imp.shape_values = o->shape_values;
    o->imp.data_names = o->data_names;
    o->argc = argc;
    o->argv = argv;
    o->end_of_opts = argc;
    return parse_args(cmd, argc, argv, o);
}

void cli_opts_free(cli_opts *o) {
    if (!o) return;
    for (int i = 0; i < o->n_owned; i++) free(o->owned[i]);
    free(o->owned);
    free(o->shape_names);
    free(o->shape_values);
    free(o->data_names);
    free(o->inputs);
    free(o->pos);
    memset(o, 0, sizeof *o);
    o->top = -1;
}
