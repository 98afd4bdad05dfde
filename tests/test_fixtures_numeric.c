/* test_fixtures_numeric.c - every model of tests/fixtures/numeric/ end to end: import
 * model.onnx, bind input_<i>.npy to the inputs meta.json names (their shapes also resolve any
 * symbolic dims), run in the eager order in float32 and (its ir_graph_to_f64 copy) in float64,
 * and judge each output against PyTorch's output_<i>.npy by rt-check.h's criterion: magpie's
 * float32 error against the float64 run is at most 10 times PyTorch's own float32 error, or 1e-4
 * of the norm; and the float64 run is within 1e-4 of PyTorch's (so the reference itself is
 * right); integers and booleans exactly. The measured
 * peak must equal sched_memory_compute's eager peak to the byte, and import -> export -> import
 * must give the same graph (ops, order, shapes) and bit-identical outputs. Prints one table row per
 * fixture; every failing fixture prints a FAIL line, and the test fails at the end. */
#include "numeric-fixture.h"
#include "test-check.h"

#include <dirent.h>
#include <unistd.h>

#include "rt.h"
#include "schedule.h"

#define MAX_IO 8
#define REL_TOL 1e-4

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/name/file into path; false when it does not fit. */
static bool fixture_file(char *path, size_t n, const char *dir, const char *name,
                         const char *file) {
    int len = snprintf(path, n, "%s/%s/%s", dir, name, file);
    return len >= 0 && (size_t)len < n;
}

/* The reference file as a tensor of out's dtype and shape (PyTorch may write another integer
 * width, or a scalar as (1)); *blob owns its data. False with a reason in why. */
static bool load_reference(const ir_tensor *out, const char *ref_path, ir_tensor *ref,
                           ir_blob **blob, char *why, size_t wn) {
    ir_dtype t;
    ir_shape s;
    ir_blob *b = NULL;
    ir_diag d = {{0}};
    if (ir_npy_read(ref_path, &t, &s, &b, &d) != IR_OK) {
        snprintf(why, wn, "%s", d.msg);
        return false;
    }
    char s1[128], s2[128];
    if (!ir_shape_eq(&s, &out->shape) || ir_dtype_is_float(t) != ir_dtype_is_float(out->dtype)) {
        snprintf(why, wn, "output is %s %s, reference %.400s is %s %s", ir_dtype_name(out->dtype),
                 ir_shape_str(&out->shape, s1, sizeof s1), ref_path, ir_dtype_name(t),
                 ir_shape_str(&s, s2, sizeof s2));
        ir_blob_unref(b);
        return false;
    }
    int64_t n = ir_shape_numel(&s);
    *blob = ir_blob_new((size_t)n * ir_dtype_size(out->dtype) + 1);
    for (int64_t i = 0; i < n; i++)
        ir_store_f64(ir_blob_data(*blob), out->dtype, i, ir_load_f64(ir_blob_data(b), t, i));
    ir_blob_unref(b);
    *ref = (ir_tensor){.dtype = out->dtype, .shape = out->shape, .data = ir_blob_data(*blob)};
    return true;
}

/* Judges the first n outputs of r (float32) and r64 (float64) against PyTorch's (torch): false
 * with a reason in why. *worst gets the largest error over its bound. */
static bool judge(const ir_graph *g, int n, const rt_result *r, const rt_result *r64,
                  const ir_tensor *torch, double *worst, char *why, size_t wn) {
    static const char *names[MAX_IO];
    static const ir_tensor *opt[MAX_IO];
    rt_out_check c[MAX_IO], ct[MAX_IO];
    for (int i = 0; i < n; i++) {
        names[i] = g->values[g->outputs[i]].name;
        opt[i] = &r->outputs[i];
    }
    rt_check_opts o = {.rtol = REL_TOL, .k = -1};
    rt_check_outputs(n, names, opt, torch, r64->outputs, &o, c);
    /* and the reference itself: PyTorch within REL_TOL of the float64 run */
    for (int i = 0; i < n; i++) opt[i] = &torch[i];
    rt_check_outputs(n, names, opt, r->outputs, r64->outputs, &(rt_check_opts){REL_TOL, 0}, ct);
    *worst = 0;
    for (int i = 0; i < n; i++) {
        if (!c[i].pass) {
            snprintf(why, wn,
                     "output %d ('%s'): %s error %.3g against float64, PyTorch's %.3g, bound %.3g",
                     i, names[i], c[i].why ? c[i].why : "", c[i].err_opt, c[i].err_orig,
                     c[i].bound);
            return false;
        }
        if (!ct[i].pass) {
            snprintf(why, wn,
                     "output %d ('%s'): the float64 run is %.3g from PyTorch's, bound %.3g", i,
                     names[i], ct[i].err_opt, ct[i].bound);
            return false;
        }
        if (!c[i].exact) *worst = fmax(*worst, c[i].err_opt / fmax(c[i].bound, 1e-300));
    }
    return true;
}

/* Exports g, imports the file again with the same options and checks that the graph is the same
 * (node count, op sequence, output shapes) and computes bit-identical outputs. */
static bool check_round_trip(const ir_graph *g, const ir_import_opts *opts, const rt_binding *bind,
                             int n_bind, const rt_result *ref, char *why, size_t wn) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie-roundtrip-%d.onnx", (int)getpid());
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g2 = NULL;
    rt_result r2 = {0};
    bool ok = false;
    if (ir_onnx_save(g, path, &d) != IR_OK || !(g2 = ir_onnx_load(path, opts, &st, &d))) {
        snprintf(why, wn, "round trip: %s", d.msg);
        goto out;
    }
    if (g2->n_nodes != g->n_nodes || g2->n_outputs != g->n_outputs) {
        snprintf(why, wn, "round trip: %d nodes and %d outputs, originally %d and %d", g2->n_nodes,
                 g2->n_outputs, g->n_nodes, g->n_outputs);
        goto out;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g2->nodes[i].op != g->nodes[i].op) {
            snprintf(why, wn, "round trip: node %d is %s, originally %s", i, g2->nodes[i].op_type,
                     g->nodes[i].op_type);
            goto out;
        }
    rt_binding b2[MAX_IO];
    for (int i = 0; i < n_bind; i++) {
        b2[i] = bind[i];
        b2[i].value = ir_graph_find_value(g2, g->values[bind[i].value].name);
    }
    rt_options o = {.seed = 1};
    if (rt_run(g2, b2, n_bind, &o, &r2, &d) != IR_OK) {
        snprintf(why, wn, "round trip: run: %s", d.msg);
        goto out;
    }
    for (int i = 0; i < r2.n_outputs; i++) {
        const ir_tensor *a = &ref->outputs[i], *b = &r2.outputs[i];
        size_t bytes = (size_t)ir_shape_numel(&a->shape) * ir_dtype_size(a->dtype);
        if (!ir_shape_eq(&a->shape, &b->shape) || a->dtype != b->dtype ||
            memcmp(a->data, b->data, bytes) != 0) {
            snprintf(why, wn, "round trip: output %d differs", i);
            goto out;
        }
    }
    ok = true;
out:
    rt_result_free(&r2);
    ir_graph_free(g2);
    unlink(path);
    return ok;
}

/* Runs one fixture; returns false (after printing a FAIL line) when it does not pass. */
static bool run_fixture(const char *dir, const char *name) {
    char path[1024], why[1200] = "";
    char names[MAX_IO][128];
    const char *shape_names[MAX_IO];
    ir_shape shapes[MAX_IO];
    ir_blob *blobs[MAX_IO] = {0};
    ir_dtype dtypes[MAX_IO];
    rt_binding bind[MAX_IO];
    ir_graph *g = NULL;
    rt_result r = {0}, r64 = {0};
    ir_tensor torch[MAX_IO];
    ir_blob *torch_blobs[MAX_IO] = {0};
    sched_memory m = {0};
    ir_diag d = {{0}};
    ir_status st;
    bool ok = false;
    double worst = 0;

    char file[32];
    int n_meta = fixture_file(path, sizeof path, dir, name, "meta.json")
                     ? nf_meta_inputs(path, names, MAX_IO)
                     : 0,
        n_in = 0;
    for (; n_in < MAX_IO; n_in++) {
        snprintf(file, sizeof file, "input_%d.npy", n_in);
        if (!fixture_file(path, sizeof path, dir, name, file) || access(path, F_OK) != 0) break;
        if ((st = ir_npy_read(path, &dtypes[n_in], &shapes[n_in], &blobs[n_in], &d)) != IR_OK) {
            snprintf(why, sizeof why, "%s", d.msg);
            goto out;
        }
        shape_names[n_in] = n_in < n_meta ? names[n_in] : NULL;
    }
    int n_named = n_meta < n_in ? n_meta : n_in;
    ir_import_opts opts = {.n_shapes = n_named,
                           .shape_names = shape_names,
                           .shape_values = shapes,
                           .n_data = n_named,
                           .data_names = shape_names};
    if (!fixture_file(path, sizeof path, dir, name, "model.onnx")) {
        snprintf(why, sizeof why, "path too long");
        goto out;
    }
    if (!(g = ir_onnx_load(path, &opts, &st, &d))) {
        snprintf(why, sizeof why, "import: %s", d.msg);
        goto out;
    }
    for (int i = 0; i < n_in; i++) {
        int v =
            i < n_named ? ir_graph_find_value(g, names[i]) : (i < g->n_inputs ? g->inputs[i] : -1);
        if (v < 0) {
            snprintf(why, sizeof why, "input %d ('%s') is not in the graph", i,
                     i < n_named ? names[i] : "?");
            goto out;
        }
        bind[i] = (rt_binding){
            .value = v, .dtype = dtypes[i], .shape = shapes[i], .data = ir_blob_data(blobs[i])};
    }
    rt_options o = {.seed = 1};
    if ((st = rt_run_reference(g, bind, n_in, &o, &r, &r64, &d)) != IR_OK) {
        snprintf(why, sizeof why, "run: %s", d.msg);
        goto out;
    }
    int n_ref = 0;
    for (int i = 0; i < r.n_outputs && i < MAX_IO; i++) {
        char w[1024];
        snprintf(file, sizeof file, "output_%d.npy", i);
        if (!fixture_file(path, sizeof path, dir, name, file) || access(path, F_OK) != 0) {
            if (i == 0) {
                snprintf(why, sizeof why, "no reference output_0.npy");
                goto out;
            }
            break; /* graph outputs beyond the references are not compared */
        }
        if (!load_reference(&r.outputs[i], path, &torch[i], &torch_blobs[i], w, sizeof w)) {
            snprintf(why, sizeof why, "output %d ('%s'): %s", i, g->values[g->outputs[i]].name, w);
            goto out;
        }
        n_ref++;
    }
    if (!judge(g, n_ref, &r, &r64, torch, &worst, why, sizeof why)) goto out;
    if ((st = sched_memory_compute(g, NULL, &m, &d)) != IR_OK) {
        snprintf(why, sizeof why, "sched: %s", d.msg);
        goto out;
    }
    if (m.peak_bytes != r.peak_bytes) {
        snprintf(why, sizeof why, "measured peak %zu bytes, simulated %zu", r.peak_bytes,
                 m.peak_bytes);
        goto out;
    }
    if (!check_round_trip(g, &opts, bind, n_in, &r, why, sizeof why)) goto out;
    ok = true;
out:
    if (ok)
        printf("  %-34s %10.2e %12zu %9.2f\n", name, worst, r.peak_bytes, r.wall_seconds * 1e3);
    else
        printf("FAIL %s: %s\n", name, why);
    sched_memory_free(&m);
    rt_result_free(&r);
    rt_result_free(&r64);
    ir_graph_free(g);
    for (int i = 0; i < MAX_IO; i++) ir_blob_unref(blobs[i]), ir_blob_unref(torch_blobs[i]);
    return ok;
}

static void test_numeric_fixtures(void **state) {
    char dir[1024];
    tu_src_path("tests/fixtures/numeric", dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("no fixtures at %s", dir);
    char *list[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 512) {
        char p[1300];
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (e->d_name[0] != '.' && access(p, F_OK) == 0) list[n++] = strdup(e->d_name);
    }
    closedir(dp);
    qsort(list, (size_t)n, sizeof *list, cmp_str);
    printf("  %-34s %10s %12s %9s\n", "fixture", "err/bound", "peak bytes", "ms");
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (!run_fixture(dir, list[i])) failed++;
        free(list[i]);
    }
    fflush(stdout);
    if (failed) fail_msg("%d of %d numeric fixtures failed (FAIL lines above)", failed, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_numeric_fixtures)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
