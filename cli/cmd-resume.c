/* cmd-resume.c - `magpie resume FILE`: continues the search a checkpoint holds, through the very
 * run `magpie optimize` uses (optimize-run.c).
 *
 * The options are the optimize command's own, recorded in the checkpoint (OPTS) and parsed again
 * with optimize's parser, so they mean what they meant. Resume's options are appended after the
 * recorded ones (before a "--" that ended them), where the parser lets the later one win: --time,
 * --max-states, --threads, --quiet, --json, -o, --checkpoint-every and --checkpoint (by default
 * FILE itself). The model is the path the checkpoint recorded, or --model; its content hash must
 * be the recorded one, and the options hash recomputed from the parsed options must be the
 * recorded one. The checkpoint's cost-model snapshot replaces profiling, so every node costs what
 * it cost before. Checkpoints this run writes record the effective arguments, so a resumed
 * search resumes again the same way.
 *
 * Every refusal (a bad file, another model, other options) happens before anything is written,
 * with exit status 2; FILE is opened read-only and replaced only by a new checkpoint of this
 * run (atomically). */
#include "cli-dist.h"
#include "optimize-run.h"

#include <stdlib.h>
#include <string.h>

/* The effective optimize arguments: the recorded ones with the model replaced, resume's
 * overrides inserted where options end. The strings point into rec, model and ro. */
typedef struct eff_args {
    int argc;
    const char **argv;
} eff_args;

static bool build_args(const cli_opts *rec, const char *model, const cli_opts *ro,
                       const char *ckpt_path, eff_args *e) {
    e->argc = 0;
    e->argv = calloc((size_t)rec->argc + 16, sizeof *e->argv);
    if (!e->argv) return false;
    for (int i = 0; i < rec->end_of_opts; i++)
        e->argv[e->argc++] = rec->argv[i] == rec->pos[0] ? model : rec->argv[i];
    /* the later option wins (cli-opts.c stores the last value given) */
    const char *const pairs[][2] = {
        {"--time", ro->time_budget}, {"--max-states", ro->max_states},
        {"--threads", ro->threads},  {"-o", ro->out_dir},
        {"--checkpoint", ckpt_path}, {"--checkpoint-every", ro->checkpoint_every}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        if (!pairs[k][1]) continue;
        e->argv[e->argc++] = pairs[k][0];
        e->argv[e->argc++] = pairs[k][1];
    }
    if (ro->quiet) e->argv[e->argc++] = "--quiet";
    if (ro->json) e->argv[e->argc++] = "--json";
    for (int i = rec->end_of_opts; i < rec->argc; i++)
        e->argv[e->argc++] = rec->argv[i] == rec->pos[0] ? model : rec->argv[i];
    e->argv[e->argc] = NULL;
    return true;
}

int cli_cmd_resume(const cli_cmd *cmd, const cli_opts *ro) {
    const char *file = ro->pos[0];
    const cli_cmd *opt_cmd = cli_find_cmd("optimize");
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    int code = CLI_EXIT_OK, rec_argc = 0;
    char **rec_argv = NULL, *model = NULL;
    cli_opts rec, o;
    bool have_rec = false, have_o = false;
    eff_args e = {0, NULL};
    prof_snapshot ps = {0};
    xs_snapshot snap = {0};
    cli_opt_args a;

    /* under mpirun, FILE is a checkpoint set's manifest and this rank reads its own part */
    char *part = NULL;
    if ((code = cli_dist_resume_part(file, &part)) != CLI_EXIT_OK) return code;
    ckpt_reader *rd = ckpt_open(part ? part : file, &st, &d);
    free(part);
    if (!rd) return cli_fail_ir(st, &d, NULL); /* the message starts with file */
    if ((st = ckpt_get_args(rd, &rec_argc, &rec_argv, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, file);
        goto out;
    }
    /* The recorded arguments alone first: a failure here is the checkpoint's, not resume's. */
    have_rec = true;
    if ((code = cli_opts_parse(opt_cmd, rec_argc, rec_argv, &rec)) != CLI_EXIT_OK) goto out;
    if (rec.n_pos != 1) {
        code = cli_fail(CLI_EXIT_USAGE, "%s: the recorded optimize arguments name %d models", file,
                        rec.n_pos);
        goto out;
    }
    /* a copy: the reader is closed before the search, the header's strings with it */
    if (!(model = strdup(ro->model ? ro->model : ckpt_header(rd)->model_path)) ||
        !build_args(&rec, model, ro, ro->checkpoint ? ro->checkpoint : file, &e)) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    have_o = true;
    if ((code = cli_opts_parse(opt_cmd, e.argc, (char **)e.argv, &o)) != CLI_EXIT_OK ||
        (code = cli_optimize_parse(cmd, &o, &a)) != CLI_EXIT_OK)
        goto out;

    /* the same model, byte for byte */
    uint64_t model_hash;
    if ((st = ckpt_file_hash(model, &model_hash, &d)) != IR_OK) {
        if (!ro->model)
            ir_diag_prefix(&d, "the checkpoint's model (give --model PATH if it moved)");
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    if ((st = ckpt_check_model(rd, model, model_hash, &d)) != IR_OK ||
        (st = ckpt_check_options(rd, cli_optimize_options_hash(&o, &a), &d)) != IR_OK ||
        (st = ckpt_get_profile(rd, &ps, &d)) != IR_OK ||
        (st = ckpt_get_snapshot(rd, &snap, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, file);
        goto out;
    }
    ckpt_close(rd); /* everything is decoded: the search may replace file from now on */
    rd = NULL;
    cli_optimize_job job = {.model = model,
                            .argc = e.argc,
                            .argv = e.argv,
                            .have_model_hash = true,
                            .model_hash = model_hash,
                            .prof = &ps,
                            .resume = &snap};
    code = cli_optimize_run(cmd, &o, &a, &job);
out:
    if (have_o) cli_opts_free(&o);
    if (have_rec) cli_opts_free(&rec);
    free(e.argv);
    free(model);
    xs_snapshot_free(&snap);
    prof_snapshot_free(&ps);
    ckpt_args_free(rec_argc, rec_argv);
    ckpt_close(rd);
    return code;
}
