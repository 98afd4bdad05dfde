/* cli-nompi.c - cli-dist.h in a build without MPI: one process, and checkpoint sets refused. */
#include "cli-dist.h"
#include "ckpt.h"

#include <stdlib.h>

void cli_dist_init(int *argc, char ***argv, const char *cmd) {
    (void)argc;
    (void)argv;
    (void)cmd;
}

int cli_dist_rank(void) {
    return 0;
}

int cli_dist_size(void) {
    return 1;
}

struct xs_dist *cli_dist_search(void) {
    return NULL;
}

int cli_dist_check(const cli_opts *o, bool pet, bool refine) {
    (void)o;
    (void)pet;
    (void)refine;
    return CLI_EXIT_OK;
}

ir_status cli_dist_ckpt_write(void *arg, const xs_snapshot *s, bool final, ir_diag *d) {
    (void)arg;
    (void)s;
    (void) final;
    return ir_diag_set(d, IR_ERR_INTERNAL, "checkpoint sets need a build with MPI");
}

int cli_dist_resume_part(const char *file, char **part) {
    *part = NULL;
    ckpt_set set;
    bool is_set = false;
    ir_diag d = {{0}};
    ir_status st = ckpt_set_read(file, &set, &is_set, &d);
    if (st != IR_OK) return cli_fail_ir(st, &d, NULL);
    if (!is_set) return CLI_EXIT_OK;
    unsigned k = set.ranks;
    ckpt_set_free(&set);
    return cli_fail(CLI_EXIT_USAGE,
                    "%s: a checkpoint set of %u ranks: resume it with 'mpirun -np %u magpie resume "
                    "%s' (this magpie was built without MPI)",
                    file, k, k, file);
}

void cli_dist_report(cli_json *j, const xs_result *r) {
    (void)r;
    cli_json_null(j);
}

int cli_dist_exit(int code) {
    return code;
}
