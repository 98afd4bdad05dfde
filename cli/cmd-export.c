/* cmd-export.c - `magpie export`: import a model (unsupported ops kept opaque when their shapes
 * are declared) and write it back as ONNX, with --shape resolved and constants folded. The
 * writer is atomic, so a failure leaves no OUT.onnx behind. --external-data (or a model that
 * would pass protobuf's 2 GB limit) puts the weights in OUT.onnx.data beside it. */
#include "cli.h"

int cli_cmd_export(const cli_cmd *cmd, const cli_opts *o) {
    const char *in = o->pos[0], *out = o->pos[1];
    int code;
    ir_diag d = {{0}};
    ir_graph *g = cli_load_graph(in, o, true, &code);
    if (!g) return code;
    ir_status st = o->standard ? cli_export_standard(g, &d) : IR_OK;
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, in);
        goto out;
    }
    ir_onnx_save_opts so = {.external_data = o->external_data};
    st = ir_onnx_save_with(g, out, &so, &d);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, out);
        goto out;
    }
    if (o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "input", in);
        cli_json_kv_str(&j, "output", out);
        cli_json_kv_int(&j, "nodes", g->n_nodes);
        cli_json_kv_int(&j, "values", g->n_values);
        cli_json_obj_end(&j);
        cli_json_finish(&j);
    } else {
        printf("wrote %s (%d nodes, opset %lld)\n", out, g->n_nodes, (long long)g->opset);
    }
    code = CLI_EXIT_OK;
out:
    ir_graph_free(g);
    return code;
}
