/* cmd-verify.c - `magpie verify ORIGINAL OPTIMIZED`: runs the original in float32 and in float64
 * and the optimized graph in float32 on the CPU executor, on the same inputs (the -i files, bound
 * by input name in both; unbound data inputs and weights without values drawn from --seed and
 * the tensor's name, so all three runs get the same values), and judges every output of the
 * optimized graph against the float64 run of the original's output of the same name with
 * rt-check.h's criterion (--rtol, --k): it passes when it is as accurate as the original's own
 * float32 run, within a factor k, or within rtol of the exact result. Integer and boolean
 * outputs must equal the original's exactly. Exit 0 when every output passes, else 3. With
 * --train the original is built as a training graph (the optimized file already is one).
 * -o DIR writes the reference, the original's float64 outputs, as DIR/<output name>.npy (float64;
 * names sanitized as `magpie run` does), so that another runtime's results can be judged by the
 * same criterion (bench/ort_pet_plans.py). */
#include "cli.h"
#include "rt-check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_bindable(const ir_value *v) {
    return (v->flags & (IR_VF_INPUT | IR_VF_INITIALIZER)) != 0;
}

/* Bindings of g for the -i files: by name, positional files to the original's data inputs (by
 * their names, data_names[k]). */
static int bind(const char *model, const ir_graph *g, const cli_opts *o, const char **names,
                ir_blob **blobs, rt_binding *b) {
    for (int k = 0; k < o->n_inputs; k++) {
        int v = ir_graph_find_value(g, names[k]);
        if (v < 0 || !is_bindable(&g->values[v]))
            return cli_fail(CLI_EXIT_USAGE, "%s: -i %s: the model has no input named '%s'", model,
                            o->inputs[k].path, names[k]);
        ir_dtype t;
        ir_shape s;
        ir_diag d = {{0}};
        if (!blobs[k]) {
            ir_status st = ir_npy_read(o->inputs[k].path, &t, &s, &blobs[k], &d);
            if (st != IR_OK) return cli_fail_ir(st, &d, o->inputs[k].path);
        }
        b[k] = (rt_binding){.value = v,
                            .dtype = g->values[v].dtype,
                            .shape = g->values[v].shape,
                            .data = ir_blob_data(blobs[k])};
        if (ir_blob_bytes(blobs[k]) != ir_value_bytes(&g->values[v]))
            return cli_fail(CLI_EXIT_USAGE, "%s: input '%s' of %s: the file's size does not match",
                            o->inputs[k].path, names[k], model);
    }
    return CLI_EXIT_OK;
}

/* The text line of one output: its error, the original's, and the bound they are judged by. */
static void print_output(const char *name, const rt_out_check *c) {
    if (c->exact) {
        printf("  %-32s %s%s\n", name, c->pass ? "equal" : "differs", c->pass ? "" : "  MISMATCH");
        return;
    }
    if (c->why && strcmp(c->why, "not finite")) {
        printf("  %-32s %s  MISMATCH\n", name, c->why);
        return;
    }
    printf("  %-32s error %.3g, original's %.3g, bound %.3g (norm %.3g)%s\n", name, c->err_opt,
           c->err_orig, c->bound, c->ref_norm, c->pass ? "" : "  MISMATCH");
}

/* -o DIR: the float64 run's outputs, each written atomically (ir_npy_write). */
static ir_status write_reference(const char *dir, int n_out, char *const *names,
                                 const rt_result *r64, ir_diag *d) {
    ir_status st = cli_mkdirs(dir, NULL, NULL, d);
    for (int i = 0; st == IR_OK && i < n_out && i < r64->n_outputs; i++) {
        char base[256], path[1400];
        cli_sanitize_name(names[i], base, sizeof base);
        snprintf(path, sizeof path, "%s/%s.npy", dir, base);
        const ir_tensor *t = &r64->outputs[i];
        st = ir_npy_write(path, t->dtype, &t->shape, t->data, d);
    }
    return st;
}

static void json_output(cli_json *j, const char *name, const rt_out_check *c) {
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "name", name);
    cli_json_kv_str(j, "kind", rt_output_kind_name(c->kind));
    /* null where a mismatch (missing, dtype, shape, unequal integers) leaves nothing to measure */
    cli_json_kv_num(j, "error", c->err_opt);
    cli_json_kv_num(j, "original_error", c->err_orig);
    cli_json_kv_num(j, "reference_norm", c->ref_norm);
    cli_json_kv_num(j, "scale", c->scale);
    cli_json_kv_num(j, "bound", c->bound);
    if (c->why) cli_json_kv_str(j, "mismatch", c->why);
    cli_json_kv_bool(j, "agrees", c->pass);
    cli_json_obj_end(j);
}

/* The optimized model: a plan `magpie optimize --shape` wrote has the shapes that --shape bound
 * and no symbolic dimension left for it to name, so it is read as written; --shape applies to
 * it only when it still has symbolic dimensions (another export of the model). */
static ir_graph *load_plan(const char *path, const cli_opts *o, int *code) {
    if (o->imp.n_shapes == 0) return cli_load_model(path, o, false, code);
    ir_import_opts imp = o->imp;
    imp.n_shapes = 0;
    imp.allow_opaque = false;
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(path, &imp, &st, &d);
    if (g) {
        *code = CLI_EXIT_OK;
        return g;
    }
    return cli_load_model(path, o, false, code);
}

int cli_cmd_verify(const cli_cmd *cmd, const cli_opts *o) {
    (void)cmd;
    const char *p_orig = o->pos[0], *p_opt = o->pos[1];
    int code = CLI_EXIT_INTERNAL;
    ir_graph *ga = NULL, *gb = NULL;
    rt_result ra = {0}, ra64 = {0}, rb = {0};
    size_t ni = (size_t)o->n_inputs + 1;
    const char **names = calloc(ni, sizeof *names);
    ir_blob **blobs = calloc(ni, sizeof *blobs);
    rt_binding *ba = calloc(ni, sizeof *ba), *bb = calloc(ni, sizeof *bb);
    rt_out_check *res = NULL;
    const ir_tensor **opt = NULL;
    char **out_names = NULL, **data_names = NULL, **owned_names = calloc(ni, sizeof(char *));
    int n_out = 0, n_data = 0;
    if (!names || !blobs || !ba || !bb || !owned_names) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (!(ga = cli_load_graph(p_orig, o, false, &code))) goto out;
    int next = 0;
    for (int k = 0; k < o->n_inputs; k++) {
        if (o->inputs[k].name) {
            names[k] = o->inputs[k].name;
            continue;
        }
        while (next < ga->n_inputs && !(ga->values[ga->inputs[next]].flags & IR_VF_DATA)) next++;
        if (next == ga->n_inputs) {
            code = cli_fail(CLI_EXIT_USAGE, "%s: -i %s: more -i files than data inputs", p_orig,
                            o->inputs[k].path);
            goto out;
        }
        /* a copy: the original graph is freed before the plan is loaded */
        if (!(names[k] = owned_names[k] = strdup(ga->values[ga->inputs[next++]].name))) {
            code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
            goto out;
        }
    }
    if ((code = bind(p_orig, ga, o, names, blobs, ba)) != CLI_EXIT_OK) goto out;
    rt_options ro = {.seed = o->seed, .fill_missing_data = true};
    ir_diag d = {{0}};
    ir_status st = rt_run_reference(ga, ba, o->n_inputs, &ro, &ra, &ra64, &d);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, p_orig);
        goto out;
    }
    /* The original's runs are done: what the rest needs of it is its outputs' names and its data
     * inputs' names, and its weights go before the plan's are read (peak memory: one graph's
     * weights and one run's buffers at a time, besides the outputs kept). */
    n_out = ga->n_outputs;
    out_names = calloc((size_t)n_out + 1, sizeof *out_names);
    data_names = calloc((size_t)ga->n_inputs + 1, sizeof *data_names);
    if (!out_names || !data_names) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n_out; i++)
        if (!(out_names[i] = strdup(ga->values[ga->outputs[i]].name))) {
            code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
            goto out;
        }
    for (int i = 0; i < ga->n_inputs; i++) {
        const ir_value *v = &ga->values[ga->inputs[i]];
        if (!(v->flags & IR_VF_DATA) || !(v->flags & IR_VF_INPUT)) continue;
        if (!(data_names[n_data++] = strdup(v->name))) {
            code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
            goto out;
        }
    }
    ir_graph_free(ga);
    ga = NULL;
    if (!(gb = load_plan(p_opt, o, &code))) goto out;
    /* The plan's data inputs are the original's: a training graph's target or labels is data
     * there (ir_build_training adds it), but in the plan's file it is one more graph input, and
     * filled as a weight it would differ from the original's. */
    for (int i = 0; i < gb->n_inputs; i++) {
        ir_value *v = &gb->values[gb->inputs[i]];
        for (int k = 0; k < n_data; k++)
            if (!strcmp(data_names[k], v->name))
                v->flags = (v->flags & ~(unsigned)IR_VF_PARAM) | IR_VF_DATA;
    }
    if ((code = bind(p_opt, gb, o, names, blobs, bb)) != CLI_EXIT_OK) goto out;
    if ((st = rt_run(gb, bb, o->n_inputs, &ro, &rb, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, p_opt);
        goto out;
    }
    if (o->out_dir && (st = write_reference(o->out_dir, n_out, out_names, &ra64, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, o->out_dir);
        goto out;
    }
    size_t no = (size_t)n_out + 1;
    res = calloc(no, sizeof *res);
    opt = calloc(no, sizeof *opt);
    if (!res || !opt) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n_out; i++) {
        for (int k = 0; k < gb->n_outputs && !opt[i]; k++)
            if (!strcmp(gb->values[gb->outputs[k]].name, out_names[i])) opt[i] = &rb.outputs[k];
    }
    rt_check_opts co = {.rtol = o->rtol, .k = o->k};
    bool ok = rt_check_outputs(n_out, (const char *const *)out_names, opt, ra.outputs, ra64.outputs,
                               &co, res);
    /* the worst output: the largest error over its bound */
    double worst = 0;
    int worst_i = -1;
    for (int i = 0; i < n_out; i++) {
        const rt_out_check *c = &res[i];
        double r = c->why ? INFINITY : c->exact ? 0 : c->err_opt / fmax(c->bound, 1e-300);
        if (worst_i < 0 || r > worst) worst = r, worst_i = i;
    }
    if (o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "original", p_orig);
        cli_json_kv_str(&j, "optimized", p_opt);
        cli_json_kv_bool(&j, "match", ok);
        cli_json_kv_str(&j, "reference", "float64");
        cli_json_kv_num(&j, "rtol", co.rtol > 0 ? co.rtol : RT_CHECK_RTOL);
        cli_json_kv_num(&j, "k", co.k >= 0 ? co.k : RT_CHECK_K);
        /* the worst output's error over its bound: at most 1 when all agree */
        cli_json_kv_num(&j, "worst_error_over_bound", worst);
        cli_json_kv_uint(&j, "original_peak_bytes", ra.peak_bytes);
        cli_json_kv_uint(&j, "optimized_peak_bytes", rb.peak_bytes);
        cli_json_kv_uint(&j, "optimized_peak_host_bytes", rb.peak_host_bytes);
        cli_json_key(&j, "outputs");
        cli_json_arr_begin(&j);
        for (int i = 0; i < n_out; i++) json_output(&j, out_names[i], &res[i]);
        cli_json_arr_end(&j);
        cli_json_obj_end(&j);
        cli_json_finish(&j);
    } else {
        char b1[32], b2[32];
        printf("peak         original %s, optimized %s\n",
               cli_fmt_bytes(ra.peak_bytes, b1, sizeof b1),
               cli_fmt_bytes(rb.peak_bytes, b2, sizeof b2));
        printf("errors against the original in float64 (L2 norms; bound = max(rtol * norm, k * "
               "original's error))\n");
        for (int i = 0; i < n_out; i++) print_output(out_names[i], &res[i]);
        printf("%s\n", ok ? "match" : "mismatch");
    }
    if (!ok && worst_i >= 0) {
        const rt_out_check *c = &res[worst_i];
        if (c->why)
            fprintf(stderr, "magpie: verify: outputs differ (output '%s': %s)\n",
                    out_names[worst_i], c->why);
        else
            fprintf(stderr,
                    "magpie: verify: outputs differ (output '%s': error %.3g, bound %.3g)\n",
                    out_names[worst_i], c->err_opt, c->bound);
    }
    code = ok ? CLI_EXIT_OK : CLI_EXIT_LIMIT;
out:
    free(res);
    free(opt);
    for (int i = 0; out_names && i < n_out; i++) free(out_names[i]);
    free(out_names);
    for (int i = 0; i < n_data; i++) free(data_names[i]);
    free(data_names);
    for (int k = 0; owned_names && k < o->n_inputs; k++) free(owned_names[k]);
    free(owned_names);
    rt_result_free(&ra);
    rt_result_free(&ra64);
    rt_result_free(&rb);
    for (int k = 0; blobs && k < o->n_inputs; k++) ir_blob_unref(blobs[k]);
    free(blobs);
    free(names);
    free(ba);
    free(bb);
    ir_graph_free(ga);
    ir_graph_free(gb);
    return code;
}
