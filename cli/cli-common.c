/* cli-common.c - how every sub-command reports failures and loads its model, so that exit
 * statuses and the one-line error format are decided in one place. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* stderr is read by people and by scripts that expect one line per failure: a message that
 * spans lines (a multi-line diag, a file name with a newline) would break both. */
static void put_one_line(const char *s) {
    for (; *s; s++) fputc((*s == '\n' || *s == '\r') ? ' ' : *s, stderr);
}

int cli_fail(int code, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("magpie: ", stderr);
    put_one_line(msg);
    fputc('\n', stderr);
    fflush(stderr);
    return code;
}

int cli_exit_for(ir_status st) {
    switch (st) {
    case IR_OK: return CLI_EXIT_OK;
    case IR_ERR_IO:
    case IR_ERR_PARSE:
    case IR_ERR_INVALID:
    case IR_ERR_UNSUPPORTED:
    case IR_ERR_SHAPE: return CLI_EXIT_USAGE;
    case IR_ERR_NOMEM:
    case IR_ERR_INTERNAL: break;
    }
    return CLI_EXIT_INTERNAL;
}

int cli_fail_ir(ir_status st, ir_diag *d, const char *prefix) {
    if (st == IR_OK) st = IR_ERR_INTERNAL; /* a failure reported without a status */
    if (!d->msg[0]) snprintf(d->msg, sizeof d->msg, "%s", ir_status_to_string(st));
    if (prefix) ir_diag_prefix(d, prefix);
    return cli_fail(cli_exit_for(st), "%s", d->msg);
}

ir_graph *cli_load_model(const char *path, const cli_opts *o, bool allow_opaque, int *code) {
    ir_import_opts imp = o->imp;
    imp.allow_opaque = allow_opaque;
    ir_status st = IR_ERR_INTERNAL;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(path, &imp, &st, &d);
    if (!g) {
        *code = cli_fail_ir(st, &d, path);
        return NULL;
    }
    /* a plan written in the standard domain gets its in-place PET patches back */
    if ((st = cli_fuse_standard_patches(g, &d)) != IR_OK) {
        *code = cli_fail_ir(st, &d, path);
        ir_graph_free(g);
        return NULL;
    }
    *code = CLI_EXIT_OK;
    return g;
}
