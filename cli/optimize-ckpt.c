/* optimize-ckpt.c - the checkpoints of `magpie optimize --checkpoint FILE` (and of `magpie
 * resume`): the callback the explorer calls on its own thread with a snapshot (periodically, on
 * SIGUSR1, and once at the end), which lays it out with the command's arguments (OPTS) and the
 * cost model's snapshot (PROF) in the container of checkpoints/ckpt.h and commits it
 * atomically to FILE.
 *
 * Invariants: FILE is only ever replaced by rename (ckpt_writer_commit), so it always holds a
 * whole checkpoint or none; stale temporary files of crashed writers are removed before this
 * run writes its first one. A periodic failure is a warning (one per streak of failures, so a
 * full disk does not flood stderr) and the search goes on; the final checkpoint's failure fails
 * the command. */
#define _POSIX_C_SOURCE 200809L
#include "optimize-run.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_ckpt_prepare(cli_ckpt *c, const char *path, const cli_optimize_job *job,
                     uint64_t options_hash) {
    memset(c, 0, sizeof *c);
    c->path = path;
    c->argc = job->argc;
    c->argv = job->argv;
    ir_diag d = {{0}};
    ir_status st;
    if ((st = ckpt_cleanup_stale(path, NULL, &d)) != IR_OK)
        return cli_fail_ir(st, &d, "cannot write checkpoint");
    /* Found now, not after hours of search when the final checkpoint fails. */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    if (access(dir, W_OK | X_OK) != 0)
        return cli_fail(CLI_EXIT_USAGE, "cannot write checkpoint %s: directory %s: %s", path, dir,
                        strerror(errno));
    c->meta.model_path = job->model;
    c->meta.options_hash = options_hash;
    c->meta.model_hash = job->model_hash;
    if (!job->have_model_hash &&
        (st = ckpt_file_hash(job->model, &c->meta.model_hash, &d)) != IR_OK)
        return cli_fail_ir(st, &d, job->model);
    return CLI_EXIT_OK;
}

int cli_ckpt_take_profile(cli_ckpt *c, const prof_model *m) {
    ir_diag d = {{0}};
    ir_status st = prof_snapshot_take(m, &c->prof, &d);
    return st == IR_OK ? CLI_EXIT_OK : cli_fail_ir(st, &d, NULL);
}

static ir_status encode_and_commit(cli_ckpt *c, const xs_snapshot *s, ir_diag *d) {
    ir_status st;
    ckpt_writer *w = ckpt_writer_init(&c->meta, &st, d);
    if (!w) return st;
    if ((st = ckpt_put_args(w, c->argc, c->argv, d)) == IR_OK &&
        (st = ckpt_put_profile(w, &c->prof, d)) == IR_OK &&
        (st = ckpt_put_snapshot(w, s, d)) == IR_OK)
        st = ckpt_writer_commit(w, c->path, d);
    ckpt_writer_free(w);
    return st;
}

ir_status cli_ckpt_write(void *arg, const xs_snapshot *s, bool final, ir_diag *d) {
    cli_ckpt *c = arg;
    ir_status st = encode_and_commit(c, s, d);
    if (st == IR_OK) {
        c->written++;
        c->failing = false;
        struct stat sb;
        if (stat(c->path, &sb) == 0) c->last_bytes = (uint64_t)sb.st_size;
        return IR_OK;
    }
    c->failed++;
    c->final_failed = final;
    /* truncated to the field on purpose: the whole message went to stderr or goes to d */
    snprintf(c->last_error, sizeof c->last_error, "%.*s", (int)sizeof c->last_error - 1, d->msg);
    /* The final one fails the command, which reports d (prefixed, see cli_optimize_run). */
    if (!final && !c->failing)
        fprintf(stderr,
                "magpie: warning: cannot write checkpoint: %s; the search goes on (further "
                "failures in a row are counted in report.json)\n",
                d->msg);
    c->failing = true;
    return st;
}

void cli_ckpt_report(cli_json *j, const cli_ckpt *c, const xs_result *r) {
    if (!c) {
        cli_json_null(j);
        return;
    }
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "path", c->path);
    cli_json_kv_uint(j, "written", c->written);
    cli_json_kv_uint(j, "failed", c->failed);
    cli_json_kv_num(j, "pause_seconds", r->checkpoint_pause_s);
    cli_json_kv_num(j, "write_seconds", r->checkpoint_write_s);
    cli_json_kv_uint(j, "last_bytes", c->last_bytes);
    cli_json_kv_str(j, "last_error", c->failed ? c->last_error : NULL);
    cli_json_obj_end(j);
}

void cli_ckpt_free(cli_ckpt *c) {
    if (!c) return;
    prof_snapshot_free(&c->prof);
}
