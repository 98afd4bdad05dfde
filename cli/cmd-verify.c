/* cmd-verify.c - `magpie verify ORIGINAL OPTIMIZED`: runs both graphs on the CPU executor on the
 * same inputs (the -i files, bound by input name in both; unbound data inputs and weights
 * without values drawn from --seed and the tensor's name, so both graphs get the same values)
 * and compares every output of the original with the optimized graph's output of the same
 * name: the relative error of DESIGN.md (float64, ||a-b|| / max(||b||, 1e-12)), exact equality
 * for integer and boolean outputs. Exit 0 when every output agrees within 1e-4, else 3. With
 * --train the original is built as a training graph (the optimized file already is one). */
#include "cli.h"
#include "rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOLERANCE 1e-4

static double to_f64(ir_dtype t, const void *p, int64_t i) {
    switch (t) {
    case IR_F32: return ((const float *)p)[i];
    case IR_F64: return ((const double *)p)[i];
    case IR_I64: return (double)((const int64_t *)p)[i];
    case IR_I32: return ((const int32_t *)p)[i];
    case IR_I8: return ((const int8_t *)p)[i];
    case IR_U8: return ((const uint8_t *)p)[i];
    case IR_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return NAN;
    }
}

/* How far a is from the reference b: the relative error ||a - b|| / ||b|| and the root mean
 * square of a - b (*rms). Both INFINITY on a dtype or shape mismatch or an unequal integer or
 * half-precision output. */
static double rel_error(const ir_tensor *a, const ir_tensor *b, double *rms) {
    *rms = INFINITY;
    if (a->dtype != b->dtype || !ir_shape_eq(&a->shape, &b->shape)) return INFINITY;
    int64_t n = ir_shape_numel(&a->shape);
    if (a->dtype == IR_F16 || a->dtype == IR_BF16) { /* compared bytewise: rewrites are exact */
        if (memcmp(a->data, b->data, (size_t)n * ir_dtype_size(a->dtype))) return INFINITY;
        *rms = 0;
        return 0;
    }
    bool exact = a->dtype != IR_F32 && a->dtype != IR_F64;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = to_f64(a->dtype, a->data, i), y = to_f64(b->dtype, b->data, i);
        if (exact && x != y) return INFINITY;
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (isnan(num)) return INFINITY;
    *rms = n ? sqrt(num / (double)n) : 0;
    return sqrt(num) / fmax(sqrt(den), 1e-12);
}

/* An output agrees within the relative tolerance, or (--atol) when its difference is below
 * an absolute one: the gradient of a key's bias in attention is zero but for rounding (softmax
 * ignores a constant added to a row), so its relative error compares noise with noise. */
typedef struct out_error {
    double rel, rms; /* rel_error's */
} out_error;

static bool agrees(out_error e, double atol) {
    return e.rel <= TOLERANCE || (atol > 0 && e.rms <= atol);
}

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
    rt_result ra = {0}, rb = {0};
    size_t ni = (size_t)o->n_inputs + 1;
    const char **names = calloc(ni, sizeof *names);
    ir_blob **blobs = calloc(ni, sizeof *blobs);
    rt_binding *ba = calloc(ni, sizeof *ba), *bb = calloc(ni, sizeof *bb);
    out_error *err = NULL;
    if (!names || !blobs || !ba || !bb) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (!(ga = cli_load_graph(p_orig, o, false, &code))) goto out;
    if (!(gb = load_plan(p_opt, o, &code))) goto out;
    /* The plan's data inputs are the original's: a training graph's target or labels is data
     * there (ir_build_training adds it), but in the plan's file it is one more graph input, and
     * filled as a weight it would differ from the original's. */
    for (int i = 0; i < gb->n_inputs; i++) {
        ir_value *v = &gb->values[gb->inputs[i]];
        int a = ir_graph_find_value(ga, v->name);
        if (a >= 0 && (ga->values[a].flags & IR_VF_DATA) && (ga->values[a].flags & IR_VF_INPUT))
            v->flags = (v->flags & ~(unsigned)IR_VF_PARAM) | IR_VF_DATA;
    }
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
        names[k] = ga->values[ga->inputs[next++]].name;
    }
    if ((code = bind(p_orig, ga, o, names, blobs, ba)) != CLI_EXIT_OK ||
        (code = bind(p_opt, gb, o, names, blobs, bb)) != CLI_EXIT_OK)
        goto out;
    rt_options ro = {.seed = o->seed, .fill_missing_data = true};
    ir_diag d = {{0}};
    ir_status st = rt_run(ga, ba, o->n_inputs, &ro, &ra, &d);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, p_orig);
        goto out;
    }
    if ((st = rt_run(gb, bb, o->n_inputs, &ro, &rb, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, p_opt);
        goto out;
    }
    err = calloc((size_t)ga->n_outputs + 1, sizeof *err);
    if (!err) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    bool ok = true;
    double worst = 0;
    for (int i = 0; i < ga->n_outputs; i++) {
        const char *name = ga->values[ga->outputs[i]].name;
        int k = 0;
        while (k < gb->n_outputs && strcmp(gb->values[gb->outputs[k]].name, name)) k++;
        err[i] = (out_error){INFINITY, INFINITY}; /* no output of that name */
        if (k < gb->n_outputs) err[i].rel = rel_error(&rb.outputs[k], &ra.outputs[i], &err[i].rms);
        if (!agrees(err[i], o->atol)) ok = false;
        worst = fmax(worst, err[i].rel);
    }
    if (o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "original", p_orig);
        cli_json_kv_str(&j, "optimized", p_opt);
        cli_json_kv_bool(&j, "match", ok);
        cli_json_kv_num(&j, "tolerance", TOLERANCE);
        cli_json_kv_num(&j, "atol", o->atol);
        cli_json_kv_num(&j, "max_relative_error", worst);
        cli_json_kv_uint(&j, "original_peak_bytes", ra.peak_bytes);
        cli_json_kv_uint(&j, "optimized_peak_bytes", rb.peak_bytes);
        cli_json_kv_uint(&j, "optimized_peak_host_bytes", rb.peak_host_bytes);
        cli_json_key(&j, "outputs");
        cli_json_arr_begin(&j);
        for (int i = 0; i < ga->n_outputs; i++) {
            cli_json_obj_begin(&j);
            cli_json_kv_str(&j, "name", ga->values[ga->outputs[i]].name);
            /* null: missing, mismatched or unequal */
            cli_json_kv_num(&j, "relative_error", err[i].rel);
            cli_json_kv_num(&j, "rms_error", err[i].rms);
            cli_json_kv_bool(&j, "agrees", agrees(err[i], o->atol));
            cli_json_obj_end(&j);
        }
        cli_json_arr_end(&j);
        cli_json_obj_end(&j);
        cli_json_finish(&j);
    } else {
        char b1[32], b2[32];
        printf("peak         original %s, optimized %s\n",
               cli_fmt_bytes(ra.peak_bytes, b1, sizeof b1),
               cli_fmt_bytes(rb.peak_bytes, b2, sizeof b2));
        for (int i = 0; i < ga->n_outputs; i++)
            printf("  %-32s relative error %.3g, rms %.3g%s\n", ga->values[ga->outputs[i]].name,
                   err[i].rel, err[i].rms, agrees(err[i], o->atol) ? "" : "  MISMATCH");
        printf("%s\n", ok ? "match" : "mismatch");
    }
    if (!ok) fprintf(stderr, "magpie: verify: outputs differ (largest relative error %g)\n", worst);
    code = ok ? CLI_EXIT_OK : CLI_EXIT_LIMIT;
out:
    free(err);
    rt_result_free(&ra);
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
