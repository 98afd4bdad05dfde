/* cmd-run.c - `magpie run`: execute a model on the CPU, in eager order or with --order memory in
 * sched_order_memory's order, and write every graph output as a .npy file.
 *
 * All-or-nothing: every binding is resolved and checked (names, files, dtypes, shapes) before
 * the run, and outputs are first written under temporary names and renamed only once all of
 * them exist, so a failure at any point leaves neither partial nor stale-looking outputs. */
#include "cli.h"
#include "rt.h"
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct run_ctx {
    const char *model;
    const ir_graph *g;
    const cli_opts *o;
    int *bound_by;     /* per value: index into o->inputs, -1 when unbound */
    int *which;        /* per -i: the value it binds */
    ir_blob **blobs;   /* per -i: the file's data, read before the import */
    ir_dtype *dtypes;  /* per -i */
    ir_shape *shapes;  /* per -i: they bind the model's symbolic dimensions */
    rt_binding *binds; /* per -i */
    ir_diag d;
} run_ctx;

static bool is_bindable(const ir_value *v) {
    return (v->flags & (IR_VF_INPUT | IR_VF_INITIALIZER)) != 0;
}

static void list_data_inputs(const ir_graph *g, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->n_inputs && k < n; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (!(v->flags & IR_VF_DATA)) continue;
        int w = snprintf(buf + k, n - k, "%s'%s'", k ? ", " : "", v->name);
        if (w < 0) break;
        k += (size_t)w;
    }
}

/* Decides which value each -i binds: names first-class, positional files to the data inputs in
 * graph input order. */
static int resolve(run_ctx *c) {
    const ir_graph *g = c->g;
    const cli_opts *o = c->o;
    char list[512];
    int next_data = 0; /* index into g->inputs of the next data input to consider */
    for (int k = 0; k < o->n_inputs; k++) {
        const cli_input *in = &o->inputs[k];
        int v;
        if (in->name) {
            v = ir_graph_find_value(g, in->name);
            if (v < 0 || !is_bindable(&g->values[v]))
                return cli_fail(CLI_EXIT_USAGE, "%s: -i %s=%s: the model has no input named '%s'",
                                c->model, in->name, in->path, in->name);
        } else {
            while (next_data < g->n_inputs && !(g->values[g->inputs[next_data]].flags & IR_VF_DATA))
                next_data++;
            if (next_data == g->n_inputs) {
                list_data_inputs(g, list, sizeof list);
                return cli_fail(CLI_EXIT_USAGE,
                                "%s: -i %s: more -i files than data inputs (%s); bind other "
                                "inputs with -i NAME=FILE.npy",
                                c->model, in->path, *list ? list : "none");
            }
            v = g->inputs[next_data++];
        }
        if (c->bound_by[v] >= 0)
            return cli_fail(CLI_EXIT_USAGE, "%s: -i %s: input '%s' is already bound by -i %s",
                            c->model, in->path, g->values[v].name, o->inputs[c->bound_by[v]].path);
        c->bound_by[v] = k;
        c->which[k] = v;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if ((v->flags & IR_VF_DATA) && c->bound_by[g->inputs[i]] < 0)
            return cli_fail(CLI_EXIT_USAGE, "%s: missing input '%s': give it with -i", c->model,
                            v->name);
    }
    return CLI_EXIT_OK;
}

/* Reads every -i file, before the import: their shapes bind the model's symbolic dimensions. */
static int read_inputs(run_ctx *c) {
    for (int k = 0; k < c->o->n_inputs; k++) {
        const char *path = c->o->inputs[k].path;
        ir_status st = ir_npy_read(path, &c->dtypes[k], &c->shapes[k], &c->blobs[k], &c->d);
        if (st != IR_OK) return cli_fail_ir(st, &c->d, path);
    }
    return CLI_EXIT_OK;
}

/* Checks every -i file against the input it binds, naming the file on a mismatch. */
static int load_inputs(run_ctx *c) {
    const ir_graph *g = c->g;
    for (int k = 0; k < c->o->n_inputs; k++) {
        const char *path = c->o->inputs[k].path;
        const ir_value *v = &g->values[c->which[k]];
        ir_dtype t = c->dtypes[k];
        ir_shape s = c->shapes[k];
        if (t != v->dtype || !ir_shape_eq(&s, &v->shape)) {
            char want[256], got[256];
            return cli_fail(CLI_EXIT_USAGE,
                            "%s: input '%s' of %s expects %s %s, the file holds %s %s", path,
                            v->name, c->model, ir_dtype_name(v->dtype),
                            ir_shape_str(&v->shape, want, sizeof want), ir_dtype_name(t),
                            ir_shape_str(&s, got, sizeof got));
        }
        c->binds[k] = (rt_binding){
            .value = c->which[k], .dtype = t, .shape = s, .data = ir_blob_data(c->blobs[k])};
    }
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- output files */

typedef struct out_file {
    char *final; /* DIR/<name>.npy */
    char *tmp;   /* DIR/.<name>.npy.<pid>.tmp, then NULL once renamed */
} out_file;

static char *join(const char *dir, const char *prefix, const char *name, const char *suffix) {
    size_t dl = strlen(dir);
    bool slash = dl > 0 && dir[dl - 1] != '/';
    size_t n = dl + 1 + strlen(prefix) + strlen(name) + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s%s%s", dir, slash ? "/" : "", prefix, name, suffix);
    return p;
}

/* File names for each output: sanitized, with _1, _2, ... against collisions. */
static ir_status name_outputs(const ir_graph *g, const char *dir, out_file *f, ir_diag *d) {
    char pid[32];
    snprintf(pid, sizeof pid, ".%ld.tmp", (long)getpid());
    for (int i = 0; i < g->n_outputs; i++) {
        char base[256], cand[300];
        cli_sanitize_name(g->values[g->outputs[i]].name, base, sizeof base);
        snprintf(cand, sizeof cand, "%s", base);
        for (int suffix = 1;; suffix++) {
            bool taken = false;
            for (int k = 0; k < i && !taken; k++) {
                const char *prev = strrchr(f[k].final, '/');
                prev = prev ? prev + 1 : f[k].final;
                size_t cl = strlen(cand);
                taken = strncmp(prev, cand, cl) == 0 && strcmp(prev + cl, ".npy") == 0;
            }
            if (!taken) break;
            snprintf(cand, sizeof cand, "%s_%d", base, suffix);
        }
        char tname[340];
        snprintf(tname, sizeof tname, "%s.npy%s", cand, pid);
        f[i].final = join(dir, "", cand, ".npy");
        f[i].tmp = join(dir, ".", tname, "");
        if (!f[i].final || !f[i].tmp) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    return IR_OK;
}

/* Writes all outputs under temporary names, then renames them into place. On failure removes
 * whatever it wrote. */
static ir_status write_outputs(const ir_graph *g, const rt_result *r, out_file *f, ir_diag *d) {
    ir_status st = IR_OK;
    int n = g->n_outputs, renamed = 0;
    for (int i = 0; i < n; i++) {
        const ir_tensor *t = &r->outputs[i];
        st = ir_npy_write(f[i].tmp, t->dtype, &t->shape, t->data, d);
        if (st != IR_OK) {
            ir_diag_prefix(d, f[i].final);
            goto out_unlink;
        }
    }
    for (; renamed < n; renamed++) {
        if (rename(f[renamed].tmp, f[renamed].final) != 0) {
            st = ir_diag_set(d, IR_ERR_IO, "%s: cannot rename into place: %s", f[renamed].final,
                             strerror(errno));
            goto out_unlink;
        }
    }
    return IR_OK;
out_unlink:
    for (int i = 0; i < n; i++) unlink(i < renamed ? f[i].final : f[i].tmp);
    return st;
}

static void print_result(const run_ctx *c, const rt_result *r, const out_file *f) {
    const ir_graph *g = c->g;
    if (c->o->json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "model", c->model);
        cli_json_kv_uint(&j, "peak_bytes", r->peak_bytes);
        cli_json_kv_uint(&j, "resident_bytes", r->resident_bytes);
        cli_json_kv_int(&j, "steps", r->n_steps);
        cli_json_kv_num(&j, "wall_seconds", r->wall_seconds);
        cli_json_kv_num(&j, "cpu_seconds", r->cpu_seconds);
        cli_json_kv_uint(&j, "seed", c->o->seed);
        cli_json_key(&j, "outputs");
        cli_json_arr_begin(&j);
        for (int i = 0; i < g->n_outputs; i++) {
            const ir_tensor *t = &r->outputs[i];
            cli_json_obj_begin(&j);
            cli_json_kv_str(&j, "name", g->values[g->outputs[i]].name);
            cli_json_kv_str(&j, "file", f[i].final);
            cli_json_kv_str(&j, "dtype", ir_dtype_name(t->dtype));
            /* numpy has no bfloat16: such outputs are written as ml_dtypes saves them ('<V2') */
            cli_json_kv_str(&j, "file_dtype", ir_dtype_name(t->dtype));
            cli_json_key(&j, "shape");
            cli_json_shape(&j, &t->shape);
            cli_json_obj_end(&j);
        }
        cli_json_arr_end(&j);
        cli_json_obj_end(&j);
        cli_json_finish(&j);
        return;
    }
    char a[32], b[32];
    printf("peak memory  %s (resident %s, %d steps)\n", cli_fmt_bytes(r->peak_bytes, a, sizeof a),
           cli_fmt_bytes(r->resident_bytes, b, sizeof b), r->n_steps);
    printf("wall time    %s\n", cli_fmt_seconds(r->wall_seconds, a, sizeof a));
    printf("outputs:\n");
    for (int i = 0; i < g->n_outputs; i++) {
        char sh[256];
        const ir_tensor *t = &r->outputs[i];
        printf("  %-24s %-8s %-16s -> %s%s\n", g->values[g->outputs[i]].name,
               ir_dtype_name(t->dtype), ir_shape_str(&t->shape, sh, sizeof sh), f[i].final,
               t->dtype == IR_BF16 ? " (bfloat16 bits, descr '<V2' as ml_dtypes saves them: "
                                     "np.load(f).view(ml_dtypes.bfloat16))"
                                   : "");
    }
}

/* --repeat N: the first run warmed the heap, the caches and the thread pool; N more runs are
 * timed and r->wall_seconds becomes their median, the steady state a benchmark compares. The
 * outputs and measured peak are those of the last run (every run computes the same). */
static ir_status repeat_runs(run_ctx *c, const rt_options *ro, int n, rt_result *r) {
    double *t = malloc(sizeof(double) * 2 * (size_t)n), *c_s = t + n;
    if (!t) return ir_diag_set(&c->d, IR_ERR_NOMEM, "out of memory");
    ir_status st = IR_OK;
    for (int i = 0; i < n && st == IR_OK; i++) {
        rt_result_free(r);
        st = rt_run(c->g, c->binds, c->o->n_inputs, ro, r, &c->d);
        t[i] = r->wall_seconds;
        c_s[i] = r->cpu_seconds;
    }
    if (st == IR_OK) {
        qsort(t, (size_t)n, sizeof *t, ir_cmp_double);
        qsort(c_s, (size_t)n, sizeof *c_s, ir_cmp_double);
        r->wall_seconds = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        r->cpu_seconds = n % 2 ? c_s[n / 2] : 0.5 * (c_s[n / 2 - 1] + c_s[n / 2]);
    }
    free(t);
    return st;
}

int cli_cmd_run(const cli_cmd *cmd, const cli_opts *o) {
    const char *dir = o->out_dir ? o->out_dir : ".";
    int code = CLI_EXIT_INTERNAL;
    run_ctx c = {.model = o->pos[0], .o = o};
    rt_result r = {0};
    out_file *files = NULL;
    char **made = NULL;
    int n_made = 0, *order = NULL;
    ir_graph *g = NULL;
    size_t ni = (size_t)o->n_inputs + 1;
    c.blobs = calloc(ni, sizeof *c.blobs);
    c.dtypes = calloc(ni, sizeof *c.dtypes);
    c.shapes = calloc(ni, sizeof *c.shapes);
    const char **names = calloc(ni, sizeof *names), **labels = calloc(ni, sizeof *labels);
    if (!c.blobs || !c.dtypes || !c.shapes || !names || !labels) {
        free(names);
        free(labels);
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    code = read_inputs(&c);
    /* The import binds symbolic dimensions to the files' sizes (ir_import_opts.input_shape_*). */
    cli_opts oi = *o;
    for (int k = 0; k < o->n_inputs; k++) {
        names[k] = o->inputs[k].name;
        labels[k] = o->inputs[k].path;
    }
    oi.imp.n_input_shapes = o->n_inputs;
    oi.imp.input_shape_names = names;
    oi.imp.input_shape_values = c.shapes;
    oi.imp.input_shape_labels = labels;
    if (code == CLI_EXIT_OK) g = cli_load_graph(c.model, &oi, false, &code);
    free(names);
    free(labels);
    if (!g) goto out;
    c.g = g;
    c.bound_by = malloc((size_t)g->n_values * sizeof *c.bound_by + 1);
    c.which = calloc(ni, sizeof *c.which);
    c.binds = calloc(ni, sizeof *c.binds);
    files = calloc((size_t)g->n_outputs + 1, sizeof *files);
    if (!c.bound_by || !c.which || !c.binds || !files) {
        code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->n_values; i++) c.bound_by[i] = -1;

    if ((code = resolve(&c)) != CLI_EXIT_OK) goto out;
    if ((code = load_inputs(&c)) != CLI_EXIT_OK) goto out;

    rt_options ro = {.seed = o->seed, .fill_missing_data = false};
    ir_status st = IR_OK;
    if (o->order && !strcmp(o->order, "memory")) { /* --order memory: sched_order_memory's */
        sched_dp_stats dps;
        if (!(order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)))) {
            code = cli_fail(CLI_EXIT_INTERNAL, "out of memory");
            goto out;
        }
        st = sched_order_memory(g, NULL, order, &dps, &c.d);
        ro.order = order;
        ro.n_order = g->n_nodes;
    }
    if (st == IR_OK) st = rt_run(g, c.binds, o->n_inputs, &ro, &r, &c.d);
    if (st == IR_OK && o->repeat > 0) st = repeat_runs(&c, &ro, o->repeat, &r);
    if (st != IR_OK) {
        code = cli_fail_ir(st, &c.d, c.model);
        goto out;
    }
    if (r.n_outputs != g->n_outputs) {
        code = cli_fail(CLI_EXIT_INTERNAL, "%s: the executor returned %d outputs, expected %d",
                        c.model, r.n_outputs, g->n_outputs);
        goto out;
    }
    st = cli_mkdirs(dir, &made, &n_made, &c.d);
    if (st == IR_OK) st = name_outputs(g, dir, files, &c.d);
    if (st == IR_OK) st = write_outputs(g, &r, files, &c.d);
    if (st != IR_OK) {
        cli_rmdirs(made, n_made);
        made = NULL;
        n_made = 0;
        code = cli_fail_ir(st, &c.d, NULL);
        goto out;
    }
    print_result(&c, &r, files);
    code = CLI_EXIT_OK;
out:
    for (int i = 0; i < n_made; i++) free(made[i]); /* success: the directories stay */
    free(made);
    for (int i = 0; files && g && i < g->n_outputs; i++) {
        free(files[i].final);
        free(files[i].tmp);
    }
    free(files);
    free(order);
    rt_result_free(&r);
    for (int k = 0; c.blobs && k < o->n_inputs; k++) ir_blob_unref(c.blobs[k]);
    free(c.blobs);
    free(c.dtypes);
    free(c.shapes);
    free(c.binds);
    free(c.which);
    free(c.bound_by);
    ir_graph_free(g);
    return code;
}
