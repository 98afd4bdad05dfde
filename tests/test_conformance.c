/* test_conformance.c - ONNX's backend node tests (tests/conformance/node/, converted from onnx
 * 1.22 by tests/conformance/gen_node_tests.py, each at its own opset) through import and the CPU
 * executor. Floats are judged by the relative error of DESIGN.md against ONNX's expected outputs
 * (||a - b|| / max(||b||, 1e-12) in float64, at most 1e-4; 1e-2 for float16/bfloat16 outputs,
 * whose reference is itself rounded to 8 or 11 bits), with NaN matching NaN and infinities
 * matching exactly; integers and booleans exactly.
 *
 * docs/onnx-conformance.md lists the tests magpie does not pass, one table row each
 * ("| `test_name` | reason |"). A listed test must fail (with any one-line message: a refusal,
 * or a result outside the criterion) and an unlisted one must pass, so the list can neither hide
 * a regression nor go stale. Prints the counts and every unexpected result. */
#include "test-util.h"

#include <dirent.h>

#include "rt.h"

#define MAX_IO 16
#define MAX_LISTED 4096

static char *listed[MAX_LISTED];
static int n_listed;

/* The test names of docs/onnx-conformance.md's table rows. */
static void read_listed(void) {
    char path[1024], line[2048];
    tu_src_path("docs/onnx-conformance.md", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    while (fgets(line, sizeof line, f) && n_listed < MAX_LISTED) {
        if (strncmp(line, "| `test_", 8) != 0) continue;
        char *e = strchr(line + 3, '`');
        if (!e) continue;
        *e = 0;
        listed[n_listed++] = strdup(line + 3);
    }
    fclose(f);
}

static bool is_listed(const char *name) {
    for (int i = 0; i < n_listed; i++)
        if (!strcmp(listed[i], name)) return true;
    return false;
}

static bool is_16bit(ir_dtype t) {
    return t == IR_F16 || t == IR_BF16;
}

/* Compares out with the reference file; false with the reason in why. */
static bool compare(const ir_tensor *out, ir_dtype out_dtype, const char *ref_path, char *why,
                    size_t wn) {
    ir_dtype t;
    ir_shape s;
    ir_blob *b = NULL;
    ir_diag d = {{0}};
    if (ir_npy_read(ref_path, &t, &s, &b, &d) != IR_OK) {
        snprintf(why, wn, "%s", d.msg);
        return false;
    }
    bool ok = true;
    char s1[128], s2[128];
    /* bfloat16 references are stored as float32 (numpy has no bfloat16) */
    bool same_type = t == out_dtype || (out_dtype == IR_BF16 && t == IR_F32);
    if (!ir_shape_eq(&s, &out->shape) || !same_type) {
        snprintf(why, wn, "output is %s %s, expected %s %s", ir_dtype_name(out_dtype),
                 ir_shape_str(&out->shape, s1, sizeof s1), ir_dtype_name(t),
                 ir_shape_str(&s, s2, sizeof s2));
        ok = false;
        goto out;
    }
    int64_t n = ir_shape_numel(&s);
    const void *ref = ir_blob_data(b);
    if (!ir_dtype_is_float(t)) {
        for (int64_t i = 0; i < n && ok; i++)
            if (ir_load_i64(out->data, out->dtype, i) != ir_load_i64(ref, t, i)) {
                snprintf(why, wn, "element %lld is %lld, expected %lld", (long long)i,
                         (long long)ir_load_i64(out->data, out->dtype, i),
                         (long long)ir_load_i64(ref, t, i));
                ok = false;
            }
        goto out;
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = ir_load_f64(out->data, out->dtype, i), r = ir_load_f64(ref, t, i);
        if ((isnan(a) && isnan(r)) || a == r) {
            if (isfinite(r)) den += r * r;
            continue;
        }
        if (!isfinite(a) || !isfinite(r)) {
            snprintf(why, wn, "element %lld is %g, expected %g", (long long)i, a, r);
            ok = false;
            goto out;
        }
        num += (a - r) * (a - r);
        den += r * r;
    }
    double tol = is_16bit(out_dtype) ? 1e-2 : 1e-4;
    double rel = sqrt(num) / fmax(sqrt(den), 1e-12);
    if (!(rel <= tol)) {
        snprintf(why, wn, "relative error %.3g > %g", rel, tol);
        ok = false;
    }
out:
    ir_blob_unref(b);
    return ok;
}

/* Does bf16.txt of the test name input `name` (a bfloat16 input stored as float32)? */
static bool input_is_bf16(const char *dir, const char *name) {
    char path[2200], line[300];
    snprintf(path, sizeof path, "%s/bf16.txt", dir);
    FILE *f = fopen(path, "r");
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        found = !strcmp(line, name);
    }
    if (f) fclose(f);
    return found;
}

/* Runs one test; true when it passes, else the reason in why. */
static bool run_node_test(const char *dir, char *why, size_t wn) {
    char path[2200], names[MAX_IO][256];
    const char *shape_names[MAX_IO];
    ir_shape shapes[MAX_IO];
    ir_blob *blobs[MAX_IO] = {0};
    ir_dtype dtypes[MAX_IO];
    rt_binding bind[MAX_IO];
    ir_graph *g = NULL;
    rt_result r = {0};
    ir_diag d = {{0}};
    ir_status st;
    bool ok = false;
    int n_in = 0;

    snprintf(path, sizeof path, "%s/inputs.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, wn, "no inputs.txt");
        return false;
    }
    while (n_in < MAX_IO && fgets(names[n_in], sizeof names[n_in], f)) {
        names[n_in][strcspn(names[n_in], "\n")] = 0;
        shape_names[n_in] = names[n_in];
        n_in++;
    }
    fclose(f);
    for (int i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, "%s/input_%d.npy", dir, i);
        if (ir_npy_read(path, &dtypes[i], &shapes[i], &blobs[i], &d) != IR_OK) {
            snprintf(why, wn, "%s", d.msg);
            goto out;
        }
    }
    for (int i = 0; i < n_in; i++) /* bfloat16 inputs are stored as float32: convert */
        if (input_is_bf16(dir, names[i]) && dtypes[i] == IR_F32) {
            int64_t cnt = ir_shape_numel(&shapes[i]);
            ir_blob *nb = ir_blob_new((size_t)cnt * 2 + 1);
            for (int64_t k = 0; k < cnt; k++)
                ((uint16_t *)ir_blob_data(nb))[k] =
                    ir_f32_to_bf16(((const float *)ir_blob_data(blobs[i]))[k]);
            ir_blob_unref(blobs[i]);
            blobs[i] = nb;
            dtypes[i] = IR_BF16;
        }
    /* magpie's shapes are static: an input that shape inference needs as data (Reshape's shape,
     * Slice's starts, Resize's scales: ONNX's tests feed them as inputs) is given at import as a
     * constant. First none, then all but the first input, then all. */
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    int first_const = n_in;
    for (int attempt = 0; attempt < 3 && !g; attempt++) {
        first_const = attempt == 0 ? n_in : attempt == 1 ? 1 : 0;
        if (attempt > 0 && first_const >= n_in) continue;
        ir_import_opts opts = {.n_shapes = first_const,
                               .shape_names = shape_names,
                               .shape_values = shapes,
                               .n_data = first_const,
                               .data_names = shape_names,
                               .n_consts = n_in - first_const,
                               .const_names = shape_names + first_const,
                               .const_dtypes = dtypes + first_const,
                               .const_shapes = shapes + first_const,
                               .const_blobs = blobs + first_const};
        g = ir_onnx_load(path, &opts, &st, &d);
        if (!g && !strstr(d.msg, "must be a constant")) break;
    }
    if (!g) {
        snprintf(why, wn, "import: %s", d.msg);
        goto out;
    }
    n_in = first_const;
    for (int i = 0; i < n_in; i++) {
        int v = ir_graph_find_value(g, names[i]);
        if (v < 0) {
            snprintf(why, wn, "input '%.200s' is not in the graph", names[i]);
            goto out;
        }
        bind[i] = (rt_binding){
            .value = v, .dtype = dtypes[i], .shape = shapes[i], .data = ir_blob_data(blobs[i])};
    }
    rt_options o = {.seed = 1};
    if ((st = rt_run(g, bind, n_in, &o, &r, &d)) != IR_OK) {
        snprintf(why, wn, "run: %s", d.msg);
        goto out;
    }
    for (int i = 0; i < r.n_outputs; i++) {
        char w[1024];
        snprintf(path, sizeof path, "%s/output_%d.npy", dir, i);
        if (access(path, F_OK) != 0) break;
        if (!compare(&r.outputs[i], g->values[g->outputs[i]].dtype, path, w, sizeof w)) {
            snprintf(why, wn, "output %d: %s", i, w);
            goto out;
        }
    }
    ok = true;
out:
    rt_result_free(&r);
    ir_graph_free(g);
    for (int i = 0; i < MAX_IO; i++) ir_blob_unref(blobs[i]);
    return ok;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_node_suite(void **state) {
    (void)state;
    read_listed();
    char root[1024];
    tu_src_path("tests/conformance/node", root, sizeof root);
    DIR *dp = opendir(root);
    assert_non_null(dp);
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (strncmp(e->d_name, "test_", 5) != 0) continue;
        if (n == cap) names = realloc(names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 1024));
        names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int pass = 0, expected_fail = 0, bad = 0;
    const char *verbose = getenv("MAGPIE_CONFORMANCE_VERBOSE");
    for (int i = 0; i < n; i++) {
        char dir[2048], why[4096] = "";
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        bool ok = run_node_test(dir, why, sizeof why);
        bool lst = is_listed(names[i]);
        if (ok && !lst)
            pass++;
        else if (!ok && lst)
            expected_fail++;
        else {
            bad++;
            printf(ok ? "UNEXPECTED PASS %s (listed in docs/onnx-conformance.md)\n"
                      : "FAIL %s: %s\n",
                   names[i], why);
        }
        if (verbose) printf("%s %s %s\n", ok ? "pass" : "fail", names[i], why);
        free(names[i]);
    }
    free(names);
    printf("node tests: %d passed, %d listed as not passing, %d unexpected (of %d)\n", pass,
           expected_fail, bad, n);
    for (int i = 0; i < n_listed; i++) free(listed[i]);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_node_suite)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
