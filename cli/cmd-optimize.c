/* cmd-optimize.c - `magpie optimize MODEL.onnx`: a new search. The options are checked before
 * anything is read or written (optimize-opts.c); the run itself is the one `magpie resume`
 * shares (optimize-run.c). With --checkpoint, the checkpoints record this command's arguments as
 * given, so that resume parses them again and means the same search. */
#include "optimize-run.h"

int cli_cmd_optimize(const cli_cmd *cmd, const cli_opts *o) {
    cli_opt_args a;
    int code = cli_optimize_parse(cmd, o, &a);
    if (code != CLI_EXIT_OK) return code;
    cli_optimize_job job = {
        .model = o->pos[0], .argc = o->argc, .argv = (const char *const *)o->argv};
    return cli_optimize_run(cmd, o, &a, &job);
}
