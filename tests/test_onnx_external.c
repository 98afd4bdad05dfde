/* test_onnx_external.c - ONNX external data: the fixture that ONNX's own writer made
 * (tests/fixtures/external/gelu_mlp, opset 20, weights in model.onnx.data) imports and runs
 * within 1e-4 of numpy's float64 output; a missing or short data file is refused naming the
 * initializer, the file and the cause; export writes external data when asked and when the model
 * would pass the size limit, and both read back to the same weights. */
#include "test-util.h"

#include <sys/stat.h>

#include "rt.h"

static char fixture[1024];

static ir_graph *load(const char *path, ir_status *st, ir_diag *d) {
    static const char *names[] = {"batch"};
    static ir_shape batch = {1, {4}};
    ir_import_opts o = {.n_shapes = 1, .shape_names = names, .shape_values = &batch};
    return ir_onnx_load(path, &o, st, d);
}

static void run_and_check(const ir_graph *g) {
    char path[1100];
    ir_dtype t;
    ir_shape s;
    ir_blob *x = NULL, *ref = NULL;
    ir_diag d = {{0}};
    snprintf(path, sizeof path, "%s/input_0.npy", fixture);
    assert_int_equal(ir_npy_read(path, &t, &s, &x, &d), IR_OK);
    snprintf(path, sizeof path, "%s/output_0.npy", fixture);
    assert_int_equal(ir_npy_read(path, &t, &s, &ref, &d), IR_OK);
    rt_binding b = {
        .value = g->inputs[0], .dtype = IR_F32, .shape = {2, {4, 32}}, .data = ir_blob_data(x)};
    rt_result r = {0};
    if (rt_run(g, &b, 1, NULL, &r, &d) != IR_OK) fail_msg("%s", d.msg);
    double err = tu_rel_err_f32(r.outputs[0].data, ir_blob_data(ref), ir_shape_numel(&s));
    assert_true(err <= 1e-4);
    rt_result_free(&r);
    ir_blob_unref(x);
    ir_blob_unref(ref);
}

static void test_fixture_runs(void **state) {
    char path[1100];
    ir_diag d = {{0}};
    ir_status st;
    snprintf(path, sizeof path, "%s/model.onnx", fixture);
    ir_graph *g = load(path, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->opset, 20);
    run_and_check(g);
    ir_graph_free(g);
}

static void copy_file(const char *from, const char *to, long keep) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[4096];
    size_t n;
    long done = 0;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0 && (keep < 0 || done < keep)) {
        if (keep >= 0 && done + (long)n > keep) n = (size_t)(keep - done);
        fwrite(buf, 1, n, b);
        done += (long)n;
    }
    fclose(a);
    fclose(b);
}

static void test_missing_and_short(void **state) {
    char dir[64], src[1100], dst[128], data[160];
    snprintf(dir, sizeof dir, "/tmp/magpie_ext_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(src, sizeof src, "%s/model.onnx", fixture);
    snprintf(dst, sizeof dst, "%s/model.onnx", dir);
    copy_file(src, dst, -1);
    ir_diag d = {{0}};
    ir_status st;
    assert_null(load(dst, &st, &d));
    assert_int_equal(st, IR_ERR_IO);
    assert_non_null(strstr(d.msg, "initializer 'fc1.weight'"));
    assert_non_null(strstr(d.msg, "model.onnx.data"));
    assert_non_null(strstr(d.msg, "No such file"));
    snprintf(src, sizeof src, "%s/model.onnx.data", fixture);
    snprintf(data, sizeof data, "%s/model.onnx.data", dir);
    copy_file(src, data, 9000); /* fc2.weight (64 x 16 floats at 8192) is cut short */
    assert_null(load(dst, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "initializer 'fc2.weight'"));
    assert_non_null(strstr(d.msg, "passes its end"));
    unlink(data);
    unlink(dst);
    rmdir(dir);
}

/* Saves g with o, checks whether PATH.data was written, reloads and runs it. */
static void save_reload(const ir_graph *g, const ir_onnx_save_opts *o, bool want_data) {
    char path[64], data[80];
    snprintf(path, sizeof path, "/tmp/magpie_ext_out_%d.onnx", (int)getpid());
    snprintf(data, sizeof data, "%s.data", path);
    unlink(data);
    ir_diag d = {{0}};
    ir_status st;
    if (ir_onnx_save_with(g, path, o, &d) != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(access(data, F_OK) == 0, want_data);
    ir_graph *g2 = ir_onnx_load(path, NULL, &st, &d); /* export resolved the batch dim */
    if (!g2) fail_msg("%s", d.msg);
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *a = &g->values[v];
        if (!a->blob) continue;
        int w = ir_graph_find_value(g2, a->name);
        assert_true(w >= 0);
        assert_memory_equal(ir_value_data(a), ir_value_data(&g2->values[w]), ir_value_bytes(a));
    }
    run_and_check(g2);
    ir_graph_free(g2);
    unlink(path);
    unlink(data);
}

static void test_export(void **state) {
    char path[1100];
    ir_diag d = {{0}};
    ir_status st;
    snprintf(path, sizeof path, "%s/model.onnx", fixture);
    ir_graph *g = load(path, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    save_reload(g, NULL, false);                                        /* small: inline */
    save_reload(g, &(ir_onnx_save_opts){.external_data = true}, true);  /* asked for */
    save_reload(g, &(ir_onnx_save_opts){.max_file_bytes = 4096}, true); /* over the limit */
    /* still over the limit without the weights: refused, no file left */
    char out[64];
    snprintf(out, sizeof out, "/tmp/magpie_ext_big_%d.onnx", (int)getpid());
    assert_int_equal(ir_onnx_save_with(g, out, &(ir_onnx_save_opts){.max_file_bytes = 64}, &d),
                     IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "limit"));
    assert_int_equal(access(out, F_OK), -1);
    char data[80];
    snprintf(data, sizeof data, "%s.data", out);
    assert_int_equal(access(data, F_OK), -1);
    ir_graph_free(g);
}

int main(void) {
    tu_src_path("tests/fixtures/external/gelu_mlp", fixture, sizeof fixture);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_runs),
        cmocka_unit_test(test_missing_and_short),
        cmocka_unit_test(test_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
