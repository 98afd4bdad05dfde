/* main.c - the `magpie` command: the table of sub-commands, help and version, and dispatch.
 * Each sub-command gets its options from the one shared parser (cli-opts.c), so help texts and
 * usage errors look the same everywhere. */
#include "cli-dist.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const cli_cmd cmds[] = {
    {
        .name = "inspect",
        .args = "MODEL.onnx",
        .summary = "print a model's size, FLOPs, ops and eager-order peak memory",
        .details = "Imports the model (unsupported ops are accepted when their output shapes are\n"
                   "declared) and reports its nodes, values, op histogram, parameters, buffers,\n"
                   "activations, FLOPs (a multiply-add counts 2), inputs and outputs, and the\n"
                   "peak memory of the eager order with a sparkline of memory over steps.\n"
                   "--fission reports instead what fission can split: the dimension graph's\n"
                   "components (length, ops, the graph inputs they split), the F-Tree's\n"
                   "candidates with heat and score, and the nodes that stop the batch.",
        .opts = CLI_OPT_SHAPE | CLI_OPT_DATA | CLI_OPT_JSON | CLI_OPT_PLOT | CLI_OPT_TRAIN |
                CLI_OPT_FISSION,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_inspect,
    },
    {
        .name = "run",
        .args = "MODEL.onnx",
        .summary = "execute a model on the CPU and write its outputs as .npy files",
        .details = "Positional -i FILE.npy bind the data inputs in order; -i NAME=FILE.npy binds\n"
                   "any graph input by name. Weights without values are filled from --seed.\n"
                   "Each graph output is written to DIR/<output name>.npy (characters outside\n"
                   "[A-Za-z0-9._-] become '_'); on failure no output file is left. With --train\n"
                   "it runs the training graph: DIR/loss.npy and DIR/<param>.grad.npy, or the\n"
                   "updated parameters and optimizer state with --optimizer.",
        .opts = CLI_OPT_INPUT | CLI_OPT_DATA | CLI_OPT_SHAPE | CLI_OPT_SEED | CLI_OPT_OUTDIR |
                CLI_OPT_JSON | CLI_OPT_TRAIN | CLI_OPT_ORDER | CLI_OPT_REPEAT,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_run,
    },
    {
        .name = "export",
        .args = "IN.onnx OUT.onnx",
        .summary = "import a model and write it back as ONNX (shapes resolved, constants folded)",
        .details = "With --standard the file uses the default ONNX domain only, for other\n"
                   "runtimes (onnxruntime): Store/Load become Identity, the fission ops Slice,\n"
                   "Concat, Add and ConstantOfShape, a PET patch Pad and Where. A plan with ops\n"
                   "that have no standard form (a training plan's backward ops) exits 2 naming\n"
                   "them, and nothing is written.",
        .opts = CLI_OPT_SHAPE | CLI_OPT_DATA | CLI_OPT_JSON | CLI_OPT_TRAIN | CLI_OPT_EXTERNAL |
                CLI_OPT_STANDARD,
        .min_pos = 2,
        .max_pos = 2,
        .run = cli_cmd_export,
    },
    {
        .name = "profile",
        .args = "MODEL.onnx",
        .summary = "measure or estimate every op's cost on a device, largest first",
        .details = "Fills the profile database with the cost of each distinct op signature of the\n"
                   "model on --device (cpu and cuda time the kernels; analytic:<target> is a\n"
                   "roofline over the target's datasheet figures and measures nothing), then\n"
                   "lists the costliest nodes with their share of the eager-order total, and how\n"
                   "many signatures were measured and how many the database already held.",
        .opts = CLI_OPT_SHAPE | CLI_OPT_DATA | CLI_OPT_DEVICE | CLI_OPT_PROFILE_DB | CLI_OPT_TOP |
                CLI_OPT_JSON | CLI_OPT_TRAIN,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_profile,
    },
    {
        .name = "schedule",
        .args = "MODEL.onnx",
        .summary = "order a model and simulate its peak memory and latency on a device",
        .details = "Orders the nodes (--order memory, the default: the memory-minimizing DP; or\n"
                   "eager) and simulates the order under the cost model of --device (default\n"
                   "analytic:rtx3090; cpu and cuda profile the graph first): peak device bytes,\n"
                   "latency with swaps on a copy stream, host bytes, and the hot-spots live at\n"
                   "the peak, with the eager order beside it. --plot draws both orders.\n"
                   "--train orders the training graph (forward, loss, backward, optimizer step).",
        .opts = CLI_OPT_SHAPE | CLI_OPT_DATA | CLI_OPT_ORDER | CLI_OPT_DEVICE | CLI_OPT_PROFILE_DB |
                CLI_OPT_JSON | CLI_OPT_PLOT | CLI_OPT_TRAIN,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_schedule,
    },
    {
        .name = "optimize",
        .args = "MODEL.onnx",
        .summary = "search for a plan within a memory or latency limit (fission, remat, swap, ...)",
        .details =
            "Searches (MAGIS Algorithm 3, best-first on --threads workers) over rewrites of\n"
            "the model or, with --train, its training graph: fission (F-Tree mutations),\n"
            "rematerialization, swapping (Store/Load to host memory) and their inverses at the\n"
            "memory hot-spots, and substitutions, starting from the memory DP's order; each\n"
            "child is re-scheduled incrementally and simulated under --device. Exactly one\n"
            "limit: --mem-limit X minimises latency with the peak within X; --lat-limit X\n"
            "minimises the peak with the latency within X. A plain number is a ratio of the\n"
            "unoptimized (eager) value, a unit makes it absolute (512MiB, 8GiB, 12ms, 1.5s).\n"
            "--threads 1 --seed S --max-states K gives the same plan on every run. Progress\n"
            "goes to stderr (a live line on a terminal). Writes DIR/optimized.onnx (fissions\n"
            "materialized, nodes in the schedule's order), DIR/schedule.json, DIR/report.json\n"
            "and DIR/memory.svg (default DIR: magpie-out). With --checkpoint FILE the search's\n"
            "state goes to FILE every --checkpoint-every, at once on SIGUSR1, and when it ends;\n"
            "SIGINT/SIGTERM stop it, write the final checkpoint and the plan, and exit 4.\n"
            "'magpie resume FILE' continues it. Exit 3 when the limit is not met (the plan is\n"
            "still written).",
        .opts = CLI_OPT_SHAPE | CLI_OPT_DATA | CLI_OPT_SEED | CLI_OPT_OUTDIR | CLI_OPT_JSON |
                CLI_OPT_DEVICE | CLI_OPT_PROFILE_DB | CLI_OPT_TRAIN | CLI_OPT_SEARCH |
                CLI_OPT_BUDGET | CLI_OPT_CHECKPOINT | CLI_OPT_EMIT,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_optimize,
    },
    {
        .name = "resume",
        .args = "FILE",
        .summary = "continue a search from the checkpoint optimize --checkpoint wrote",
        .details =
            "Continues the search exactly where the checkpoint left it: same model (at its\n"
            "recorded path, or --model PATH if it moved; refused when its content differs),\n"
            "same options (those of the optimize command, recorded in FILE), same costs (the\n"
            "profile recorded in FILE). No state already seen is explored again. --time and\n"
            "--max-states count the whole search, earlier runs included, and may be raised;\n"
            "--threads may differ. Checkpoints go on to FILE (or --checkpoint FILE2); the plan,\n"
            "report and exit statuses are optimize's. A bad checkpoint (truncated, corrupt,\n"
            "another version, another model) exits 2 and is left untouched.",
        .opts = CLI_OPT_OUTDIR | CLI_OPT_JSON | CLI_OPT_BUDGET | CLI_OPT_CHECKPOINT | CLI_OPT_MODEL,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_resume,
    },
    {
        .name = "emit",
        .args = "PLAN_DIR",
        .summary = "write a plan as a PyTorch module that runs its schedule step by step",
        .details =
            "With --torch, reads PLAN_DIR/optimized.onnx (or a plan's .onnx file) and writes -o\n"
            "FILE.py: a self-contained Python module (PyTorch its only import) whose\n"
            "step(params, inputs) runs the plan's nodes in the schedule's order with PyTorch\n"
            "ops, frees each tensor at its last use, recomputes rematerialized ops where the\n"
            "schedule puts them, fills fission buffers in place, swaps through pinned host\n"
            "memory on a second CUDA stream, and applies the optimizer step in place; and\n"
            "params_from_module(module) binds a torch.nn.Module's parameters and buffers by\n"
            "name. An op without a PyTorch form is refused (exit 2, naming it); no file is left.",
        .opts = CLI_OPT_TORCH | CLI_OPT_OUTDIR | CLI_OPT_JSON | CLI_OPT_SHAPE | CLI_OPT_DATA,
        .min_pos = 1,
        .max_pos = 1,
        .run = cli_cmd_emit,
    },
    {
        .name = "verify",
        .args = "ORIGINAL.onnx OPTIMIZED.onnx",
        .summary = "run a model and its optimized plan on the same inputs and compare outputs",
        .details = "Runs the original in float32 and in float64 and the plan in float32 on the\n"
                   "CPU executor with the same inputs (-i files bound by name; unbound inputs and\n"
                   "weights without values are drawn from --seed and the tensor's name). Each\n"
                   "output passes when its error against the float64 run is at most --k (10)\n"
                   "times the original's own float32 error, or at most --rtol (1e-4) times its\n"
                   "norm, floored at 1e-6 of the largest output of its kind (forward, gradient,\n"
                   "parameter, optimizer state). Reports the three errors and both measured\n"
                   "peaks. Exit 0 when every output passes, 3 otherwise. With --train the\n"
                   "original is built as a training graph; the optimized file already is one.\n"
                   "-o DIR writes the reference (the original's float64 outputs) as\n"
                   "DIR/<output>.npy.",
        .opts = CLI_OPT_INPUT | CLI_OPT_DATA | CLI_OPT_SHAPE | CLI_OPT_SEED | CLI_OPT_JSON |
                CLI_OPT_TRAIN | CLI_OPT_CHECK | CLI_OPT_OUTDIR,
        .min_pos = 2,
        .max_pos = 2,
        .run = cli_cmd_verify,
    },
};
#define N_CMDS ((int)(sizeof cmds / sizeof cmds[0]))

const cli_cmd *cli_find_cmd(const char *name) {
    for (int i = 0; i < N_CMDS; i++)
        if (strcmp(cmds[i].name, name) == 0) return &cmds[i];
    return NULL;
}

static void print_main_help(FILE *f) {
    fprintf(f, "usage: magpie COMMAND [options]\n"
               "       magpie help COMMAND | magpie COMMAND --help | magpie --version\n\n"
               "magpie optimizes deep-learning graphs for memory and speed.\n\ncommands:\n");
    for (int i = 0; i < N_CMDS; i++) fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "\nexit status: 0 success, 1 internal error, 2 bad input or usage, 3 limit not met\n"
               "or verify mismatch, 4 interrupted (after the final checkpoint and the plan).\n");
}

static void print_cmd_help(FILE *f, const cli_cmd *c) {
    fprintf(f, "usage: magpie %s %s [options]\n\n%s.\n", c->name, c->args, c->summary);
    if (c->details) fprintf(f, "\n%s\n", c->details);
    fprintf(f, "\noptions:\n");
    cli_opts_help(f, c->opts);
    fprintf(f, "  -h, --help                 show this help\n");
}

/* Flushes stdout and turns a failed write (a full disk, a closed pipe) into an internal error
 * rather than a silent success. */
static int finish(int code) {
    if (fflush(stdout) != 0 && code == CLI_EXIT_OK)
        return cli_fail(CLI_EXIT_INTERNAL, "cannot write to standard output");
    return code;
}

static int dispatch(const cli_cmd *c, int argc, char **argv) {
    cli_opts o;
    int code = cli_opts_parse(c, argc, argv, &o);
    if (code != CLI_EXIT_OK) goto out;
    if (o.help) {
        print_cmd_help(stdout, c);
        goto out;
    }
    if (o.n_pos < c->min_pos || o.n_pos > c->max_pos) {
        code =
            cli_fail(CLI_EXIT_USAGE, "%s: expected %s, got %d argument%s (try 'magpie %s --help')",
                     c->name, c->args, o.n_pos, o.n_pos == 1 ? "" : "s", c->name);
        goto out;
    }
    code = c->run(c, &o);
out:
    cli_opts_free(&o);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 2) return cli_fail(CLI_EXIT_USAGE, "no command given (try 'magpie --help')");
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        print_main_help(stdout);
        return finish(CLI_EXIT_OK);
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "version") == 0) {
        printf("magpie %s\n", MAGPIE_VERSION);
        return finish(CLI_EXIT_OK);
    }
    if (strcmp(a, "help") == 0) {
        if (argc == 2) {
            print_main_help(stdout);
            return finish(CLI_EXIT_OK);
        }
        const cli_cmd *c = cli_find_cmd(argv[2]);
        if (!c)
            return cli_fail(CLI_EXIT_USAGE, "help: unknown command '%s' (try 'magpie --help')",
                            argv[2]);
        if (argc > 3)
            return cli_fail(CLI_EXIT_USAGE, "help: too many arguments (try 'magpie --help')");
        print_cmd_help(stdout, c);
        return finish(CLI_EXIT_OK);
    }
    if (a[0] == '-')
        return cli_fail(CLI_EXIT_USAGE, "unknown option '%s' (try 'magpie --help')", a);
    const cli_cmd *c = cli_find_cmd(a);
    if (!c) return cli_fail(CLI_EXIT_USAGE, "unknown command '%s' (try 'magpie --help')", a);
    cli_dist_init(&argc, &argv, c->name); /* under mpirun: one search across the ranks */
    return cli_dist_exit(finish(dispatch(c, argc - 2, argv + 2)));
}
