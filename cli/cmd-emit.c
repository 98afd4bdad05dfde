/* cmd-emit.c - `magpie emit PLAN_DIR --torch -o step.py`: a plan (PLAN_DIR/optimized.onnx, or a
 * plan's .onnx file itself) as a self-contained PyTorch module (emit-torch.h). The module is built
 * in memory and written atomically, so a refused op or a failed write leaves no file behind. */
#include "cli.h"
#include "emit-torch.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool write_module(FILE *f, void *arg, ir_diag *d) {
    return et_emit_module(arg, f, d) == IR_OK;
}

int cli_emit_torch_file(const ir_graph *g, const char *path) {
    ir_diag d = {{0}};
    /* Refusals are found before the file is opened: emit once into a scratch stream. */
    char *buf = NULL;
    size_t len = 0;
    FILE *scratch = open_memstream(&buf, &len);
    if (!scratch) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    ir_status st = et_emit_module(g, scratch, &d);
    fclose(scratch);
    free(buf);
    if (st == IR_OK) st = cli_write_atomic(path, write_module, (void *)g, &d);
    if (st != IR_OK) return cli_fail_ir(st, &d, g->source);
    return CLI_EXIT_OK;
}

int cli_cmd_emit(const cli_cmd *cmd, const cli_opts *o) {
    if (!o->emit)
        return cli_fail(CLI_EXIT_USAGE, "%s: say which form to emit: --torch (the one there is)",
                        cmd->name);
    if (!o->out_dir) return cli_fail(CLI_EXIT_USAGE, "%s: -o FILE.py is required", cmd->name);
    const char *in = o->pos[0];
    struct stat sb;
    char *path = NULL;
    if (stat(in, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (asprintf(&path, "%s/optimized.onnx", in) < 0)
            return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    } else if (!(path = strdup(in))) {
        return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    }
    int code;
    ir_graph *g = cli_load_model(path, o, false, &code);
    if (!g) {
        free(path);
        return code;
    }
    code = cli_emit_torch_file(g, o->out_dir);
    if (code == CLI_EXIT_OK) {
        if (o->json) {
            cli_json j;
            cli_json_init(&j, stdout);
            cli_json_obj_begin(&j);
            cli_json_kv_str(&j, "plan", path);
            cli_json_kv_str(&j, "output", o->out_dir);
            cli_json_kv_int(&j, "nodes", g->n_nodes);
            cli_json_kv_bool(&j, "training", ir_graph_is_training(g));
            cli_json_obj_end(&j);
            cli_json_finish(&j);
        } else {
            printf("wrote %s (%d nodes of %s)\n", o->out_dir, g->n_nodes, path);
        }
    }
    ir_graph_free(g);
    free(path);
    return code;
}
