/* cmd-inspect.c - `magpie inspect`: what a model is made of and what its eager order costs in
 * memory. Imports with allow_opaque so that models with unsupported ops (whose shapes the file
 * declares) can still be sized; their FLOPs count as 0 and are reported as opaque nodes.
 *
 * Everything that can fail (import, schedule memory, the SVG) happens before anything is
 * printed, so a failure leaves stdout empty. */
#include "cli.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

typedef struct op_count {
    const char *op;
    int count;
} op_count;

typedef struct inspect_stats {
    uint64_t params, param_bytes, buffer_bytes, activation_bytes;
    double flops;
    int opaque;
    int n_ops;
    op_count *ops; /* sorted by count, then name */
} inspect_stats;

static int cmp_op_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->op, y->op);
}

static ir_status collect(const ir_graph *g, inspect_stats *s, ir_diag *d) {
    memset(s, 0, sizeof *s);
    s->ops = calloc((size_t)g->n_nodes + 1, sizeof *s->ops);
    if (!s->ops) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = &g->values[i];
        size_t bytes = ir_value_bytes(v);
        if (v->flags & IR_VF_PARAM) {
            s->params += (uint64_t)ir_shape_numel(&v->shape);
            s->param_bytes += bytes;
        } else if (v->flags & IR_VF_CONST) {
            s->buffer_bytes += bytes;
        }
        /* a buffer's bytes: views and in-place outputs own none (sched_value_device_bytes) */
        if (v->producer >= 0) s->activation_bytes += sched_value_device_bytes(g, i);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_OPAQUE)
            s->opaque++;
        else
            s->flops += ir_node_flops(g, n);
        const char *op = n->op_type && *n->op_type ? n->op_type : ir_op_name(n->op);
        int k = 0;
        while (k < s->n_ops && strcmp(s->ops[k].op, op) != 0) k++;
        if (k == s->n_ops) s->ops[s->n_ops++].op = op;
        s->ops[k].count++;
    }
    qsort(s->ops, (size_t)s->n_ops, sizeof *s->ops, cmp_op_count);
    return IR_OK;
}

static const char *input_kind(const ir_value *v) {
    if (v->flags & IR_VF_DATA) return "data";
    if (v->flags & IR_VF_PARAM) return "param";
    return "input";
}

static const char *model_name(const ir_graph *g, const char *path) {
    return g->name && *g->name ? g->name : path;
}

/* ---------------------------------------------------------------- --train: the parameters */

/* Why a parameter looks like a constant an exporter wrote rather than a weight of the module
 * (a scalar such as an attention scale, a generated name such as "val_12" or "onnx::MatMul_7"),
 * or NULL. Only models without the export helper's list are judged (DESIGN.md). */
static const char *exporter_constant(const ir_value *v) {
    const char *n = v->name;
    if (ir_shape_numel(&v->shape) == 1) return "a scalar";
    if (strncmp(n, "onnx::", 6) == 0) return "a name the exporter generated (onnx::...)";
    if (strncmp(n, "val_", 4) == 0 && n[4]) {
        const char *p = n + 4;
        while (*p >= '0' && *p <= '9') p++;
        if (!*p) return "a name the exporter generated (val_N)";
    }
    return NULL;
}

/* The values --train trains: residents flagged IR_VF_PARAM. */
static bool is_trained_param(const ir_value *v) {
    return (v->flags & IR_VF_PARAM) && v->producer < 0;
}

static void json_train_params(cli_json *j, const ir_graph *g) {
    cli_json_kv_str(j, "param_source", g->params_listed ? "metadata" : "rule");
    cli_json_key(j, "trained");
    cli_json_arr_begin(j);
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = &g->values[i];
        if (!is_trained_param(v)) continue;
        cli_json_obj_begin(j);
        cli_json_kv_str(j, "name", v->name);
        cli_json_key(j, "shape");
        cli_json_shape(j, &v->shape);
        const char *why = g->params_listed ? NULL : exporter_constant(v);
        if (why) cli_json_kv_str(j, "warning", why);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
}

/* The parameters in text, and on stderr a warning per likely exporter constant. */
static void text_train_params(const ir_graph *g) {
    int n = 0, warned = 0;
    char sh[128];
    printf("trained      %s:\n", g->params_listed ? "the parameters the model's metadata lists"
                                                  : "every float initializer and non-data input "
                                                    "but batch-norm statistics and --frozen");
    for (int i = 0; i < g->n_values; i++) {
        const ir_value *v = &g->values[i];
        if (!is_trained_param(v)) continue;
        const char *why = g->params_listed ? NULL : exporter_constant(v);
        printf("  %-40s %s%s%s\n", v->name, ir_shape_str(&v->shape, sh, sizeof sh),
               why ? "  looks like an exporter constant: " : "", why ? why : "");
        n++;
        warned += why != NULL;
    }
    if (warned)
        fprintf(stderr,
                "magpie: warning: %d of the %d parameters --train trains look like constants the "
                "exporter wrote; exclude them with --frozen REGEX, or export with "
                "scripts/export_for_training.py, which lists the module's parameters\n",
                warned, n);
}

/* --train: what the training graph's memory is made of. */
static void json_train(cli_json *j, const ir_train_summary *t) {
    cli_json_key(j, "train");
    cli_json_obj_begin(j);
    cli_json_kv_int(j, "params", t->n_params);
    cli_json_kv_uint(j, "param_bytes", t->param_bytes);
    cli_json_kv_uint(j, "gradient_bytes", t->grad_bytes);
    cli_json_kv_uint(j, "activation_bytes", t->activation_bytes);
    cli_json_kv_uint(j, "backward_bytes", t->backward_bytes);
    cli_json_kv_uint(j, "optimizer_state_bytes", t->state_bytes);
    cli_json_kv_int(j, "forward_nodes", t->n_forward_nodes);
    cli_json_kv_int(j, "backward_nodes", t->n_backward_nodes);
    cli_json_kv_int(j, "update_nodes", t->n_update_nodes);
    cli_json_obj_end(j);
}

static void text_train(const ir_train_summary *t) {
    char a[32], b[32], c[32], e[32], f[32];
    printf(
        "training     %d params %s, gradients %s, activations %s, backward temporaries %s, "
        "optimizer state %s\n",
        t->n_params, cli_fmt_bytes(t->param_bytes, a, sizeof a),
        cli_fmt_bytes(t->grad_bytes, b, sizeof b), cli_fmt_bytes(t->activation_bytes, c, sizeof c),
        cli_fmt_bytes(t->backward_bytes, e, sizeof e), cli_fmt_bytes(t->state_bytes, f, sizeof f));
    printf("             %d forward, %d backward, %d update nodes\n", t->n_forward_nodes,
           t->n_backward_nodes, t->n_update_nodes);
}

static void print_json(const ir_graph *g, const char *path, const inspect_stats *s,
                       const sched_memory *m, const char *plot, const ir_train_summary *t) {
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_obj_begin(&j);
    cli_json_kv_str(&j, "model", model_name(g, path));
    cli_json_kv_str(&j, "file", path);
    cli_json_kv_int(&j, "opset", g->opset);
    cli_json_kv_int(&j, "nodes", g->n_nodes);
    cli_json_kv_int(&j, "values", g->n_values);
    cli_json_kv_int(&j, "opaque_nodes", s->opaque);
    cli_json_kv_uint(&j, "params", s->params);
    cli_json_kv_uint(&j, "param_bytes", s->param_bytes);
    cli_json_kv_uint(&j, "buffer_bytes", s->buffer_bytes);
    cli_json_kv_uint(&j, "activation_bytes", s->activation_bytes);
    cli_json_kv_num(&j, "flops", s->flops);
    cli_json_kv_uint(&j, "eager_peak_bytes", m->peak_bytes);
    cli_json_kv_int(&j, "eager_peak_step", m->peak_step);
    cli_json_kv_uint(&j, "resident_bytes", m->resident_bytes);
    cli_json_kv_int(&j, "steps", m->n_steps);
    cli_json_key(&j, "ops");
    cli_json_obj_begin(&j);
    for (int i = 0; i < s->n_ops; i++) {
        cli_json_kv_int(&j, s->ops[i].op, s->ops[i].count);
    }
    cli_json_obj_end(&j);
    cli_json_key(&j, "inputs");
    cli_json_arr_begin(&j);
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        cli_json_tensor(&j, v->name, v->dtype, &v->shape);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "data_inputs");
    cli_json_arr_begin(&j);
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (v->flags & IR_VF_DATA) cli_json_str(&j, v->name);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "outputs");
    cli_json_arr_begin(&j);
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        cli_json_tensor(&j, v->name, v->dtype, &v->shape);
    }
    cli_json_arr_end(&j);
    if (plot) {
        cli_json_kv_str(&j, "plot", plot);
    }
    if (t) {
        json_train(&j, t);
        json_train_params(&j, g);
    }
    cli_json_obj_end(&j);
    cli_json_finish(&j);
}

static void print_tensor_line(const ir_value *v, const char *kind) {
    char sh[256];
    printf("  %-24s %-8s %s%s%s%s\n", v->name, ir_dtype_name(v->dtype),
           ir_shape_str(&v->shape, sh, sizeof sh), kind ? " (" : "", kind ? kind : "",
           kind ? ")" : "");
}

static void print_text(const ir_graph *g, const char *path, const inspect_stats *s,
                       const sched_memory *m, const char *plot, const ir_train_summary *t) {
    char a[32], b[32];
    printf("model        %s (%s)\n", model_name(g, path), path);
    printf("opset        %lld\n", (long long)g->opset);
    printf("nodes        %d", g->n_nodes);
    if (s->opaque) printf(" (%d opaque: unsupported ops with declared shapes)", s->opaque);
    printf("\nvalues       %d\n", g->n_values);
    printf("params       %s (%s)\n", cli_fmt_si((double)s->params, a, sizeof a),
           cli_fmt_bytes(s->param_bytes, b, sizeof b));
    printf("buffers      %s\n", cli_fmt_bytes(s->buffer_bytes, a, sizeof a));
    printf("activations  %s\n", cli_fmt_bytes(s->activation_bytes, a, sizeof a));
    printf("FLOPs        %s%s\n", cli_fmt_si(s->flops, a, sizeof a),
           s->opaque ? " (opaque nodes not counted)" : "");
    printf("eager peak   %s at step %d of %d (resident %s)\n",
           cli_fmt_bytes(m->peak_bytes, a, sizeof a), m->peak_step, m->n_steps,
           cli_fmt_bytes(m->resident_bytes, b, sizeof b));
    if (m->n_steps > 0) {
        printf("memory       ");
        cli_sparkline(stdout, m->step_bytes, m->n_steps, 60);
        printf("\n");
    }
    if (plot) printf("plot         %s\n", plot);
    if (t) {
        text_train(t);
        text_train_params(g);
    }
    printf("inputs:\n");
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        print_tensor_line(v, input_kind(v));
    }
    printf("outputs:\n");
    for (int i = 0; i < g->n_outputs; i++) print_tensor_line(&g->values[g->outputs[i]], NULL);
    printf("ops:\n");
    for (int i = 0; i < s->n_ops; i++) printf("  %-24s %d\n", s->ops[i].op, s->ops[i].count);
}

int cli_cmd_inspect(const cli_cmd *cmd, const cli_opts *o) {
    const char *path = o->pos[0];
    int code;
    inspect_stats s = {0};
    sched_memory m = {0};
    ir_diag d = {{0}};
    ir_train_summary ts;
    ir_graph *g = cli_load_graph(path, o, true, &code);
    if (!g) return code;
    if (o->train) ir_train_summarize(g, &ts);
    ir_status st = collect(g, &s, &d);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    st = sched_memory_compute(g, NULL, &m, &d);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    if (o->plot) {
        char title[512];
        snprintf(title, sizeof title, "%s: live memory, eager order", path);
        cli_mem_plot p = {.title = title,
                          .step_bytes = m.step_bytes,
                          .n_steps = m.n_steps,
                          .resident_bytes = m.resident_bytes,
                          .peak_step = m.peak_step};
        st = cli_plot_svg(o->plot, &p, &d);
        if (st != IR_OK) {
            code = cli_fail_ir(st, &d, o->plot);
            goto out;
        }
    }
    if (o->fission) {
        code = cli_inspect_fission(path, g, &m, o->json);
        goto out;
    }
    if (o->json)
        print_json(g, path, &s, &m, o->plot, o->train ? &ts : NULL);
    else
        print_text(g, path, &s, &m, o->plot, o->train ? &ts : NULL);
    code = CLI_EXIT_OK;
out:
    sched_memory_free(&m);
    free(s.ops);
    ir_graph_free(g);
    return code;
}
