/* test_run_symbolic.c - `magpie run -i FILE.npy` binds a model's symbolic dimensions to the
 * files' sizes, so a model exported with a dynamic batch runs without --shape; files that
 * disagree with each other, or with --shape, are one-line errors naming both sides, exit 2.
 * Also `run` and `run --train` of a float16 model (tests/fixtures/symbolic/mlp_f16.onnx), whose
 * outputs, loss and gradients stay float16.
 *
 * Models: tests/fixtures/numeric/resnet_small_op16 and gpt_small_op17 (PyTorch exports with
 * dynamic_axes) and tests/fixtures/symbolic/ (gen_symbolic.py: two inputs sharing 'batch'). */
#include "test-util.h"

#include <math.h>

#define SYM "tests/fixtures/symbolic"
#define RESNET "tests/fixtures/numeric/resnet_small_op16"
#define GPT "tests/fixtures/numeric/gpt_small_op17"

static void write_npy(const char *path, ir_dtype t, ir_shape s, double scale) {
    int64_t n = ir_shape_numel(&s);
    void *p = malloc((size_t)n * ir_dtype_size(t) + 1);
    for (int64_t i = 0; i < n; i++) ir_store_f64(p, t, i, scale * sin(0.7 * (double)i + 0.3));
    ir_diag d = {{0}};
    if (ir_npy_write(path, t, &s, p, &d) != IR_OK) fail_msg("%s", d.msg);
    free(p);
}

static bool shape_is(const ir_shape *s, ir_shape want) {
    return ir_shape_eq(s, &want);
}

static ir_blob *read_npy(const char *path, ir_dtype *t, ir_shape *s) {
    ir_blob *b = NULL;
    ir_diag d = {{0}};
    if (ir_npy_read(path, t, s, &b, &d) != IR_OK) fail_msg("%s", d.msg);
    return b;
}

/* Fails unless `magpie ARGS` exits 2 with one line on stderr holding each of the needles. */
static void expect_error(const char *args, const char *const *needles) {
    tu_proc *p = malloc(sizeof *p);
    tu_magpie(p, args);
    if (p->rc != 2) fail_msg("magpie %s: exit %d, expected 2: %s", args, p->rc, p->err);
    size_t len = strlen(p->err);
    if (!len || p->err[len - 1] != '\n' || strchr(p->err, '\n') != p->err + len - 1)
        fail_msg("magpie %s: stderr is not one line: '%s'", args, p->err);
    for (; *needles; needles++)
        if (!strstr(p->err, *needles))
            fail_msg("magpie %s: stderr '%s' does not name '%s'", args, p->err, *needles);
    free(p);
}

static void expect_ok(const char *args) {
    tu_proc *p = malloc(sizeof *p);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("magpie %s: exit %d: %s", args, p->rc, p->err);
    free(p);
}

/* The PyTorch export with a dynamic batch runs from its input file alone, and gives what it
 * gives with --shape (the same graph) and PyTorch's output. */
static void test_batch_from_file(void **state) {
    (void)state;
    char dir[256], args[2048], a[512], b[512];
    tu_make_dir(dir, sizeof dir, "runsym");
    snprintf(args, sizeof args, "run " RESNET "/model.onnx -i " RESNET "/input_0.npy -o %s/a", dir);
    expect_ok(args);
    snprintf(args, sizeof args,
             "run " RESNET "/model.onnx --shape batch=1 -i " RESNET "/input_0.npy -o %s/b", dir);
    expect_ok(args);
    snprintf(a, sizeof a, "%s/a/output.npy", dir);
    snprintf(b, sizeof b, "%s/b/output.npy", dir);
    ir_dtype ta, tb, tr;
    ir_shape sa, sb, sr;
    ir_blob *ba = read_npy(a, &ta, &sa), *bb = read_npy(b, &tb, &sb);
    char ref[512];
    ir_blob *br = read_npy(tu_src_path(RESNET "/output_0.npy", ref, sizeof ref), &tr, &sr);
    assert_int_equal(ta, IR_F32);
    assert_true(ir_shape_eq(&sa, &sb) && ir_shape_eq(&sa, &sr));
    assert_memory_equal(ir_blob_data(ba), ir_blob_data(bb), ir_blob_bytes(ba));
    double e = tu_rel_err_f32(ir_blob_data(ba), ir_blob_data(br), ir_shape_numel(&sa));
    if (!(e <= 1e-4)) fail_msg("relative error %g against PyTorch's output", e);
    ir_blob_unref(ba);
    ir_blob_unref(bb);
    ir_blob_unref(br);

    /* GPT's batch and seq both come from the token file, at sizes other than the export's. */
    snprintf(a, sizeof a, "%s/idx.npy", dir);
    write_npy(a, IR_I64, TU_SHAPE(3, 5), 0); /* token 0 everywhere: any valid id */
    snprintf(args, sizeof args, "run " GPT "/model.onnx -i %s -o %s/gpt", a, dir);
    expect_ok(args);
    snprintf(b, sizeof b, "%s/gpt/logits.npy", dir);
    ir_blob *bl = read_npy(b, &ta, &sa);
    char s1[64];
    if (!shape_is(&sa, TU_SHAPE(3, 5, 64)))
        fail_msg("logits %s, expected [3,5,64]", ir_shape_str(&sa, s1, sizeof s1));
    ir_blob_unref(bl);
    tu_remove_dir(dir);
}

/* Two inputs share 'batch': files that agree bind it; files that disagree, a --shape that
 * disagrees with a file, or a file of the wrong rank are refused, naming both sides. */
static void test_conflicts(void **state) {
    (void)state;
    char dir[256], x3[512], y3[512], y5[512], r1[512], args[4096];
    tu_make_dir(dir, sizeof dir, "runsym");
    snprintf(x3, sizeof x3, "%s/x3.npy", dir);
    snprintf(y3, sizeof y3, "%s/y3.npy", dir);
    snprintf(y5, sizeof y5, "%s/y5.npy", dir);
    snprintf(r1, sizeof r1, "%s/r1.npy", dir);
    write_npy(x3, IR_F32, TU_SHAPE(3, 4), 1);
    write_npy(y3, IR_F32, TU_SHAPE(3, 4), 0.5);
    write_npy(y5, IR_F32, TU_SHAPE(5, 4), 0.5);
    write_npy(r1, IR_F32, TU_SHAPE(12), 1);
    const char *m = SYM "/two_inputs.onnx";

    snprintf(args, sizeof args, "run %s -i x=%s -i y=%s -o %s/ok", m, x3, y3, dir);
    expect_ok(args);
    char z[512];
    snprintf(z, sizeof z, "%s/ok/z.npy", dir);
    ir_dtype t;
    ir_shape s;
    ir_blob *bz = read_npy(z, &t, &s);
    assert_true(shape_is(&s, TU_SHAPE(3, 3)));
    ir_blob_unref(bz);

    snprintf(args, sizeof args, "run %s -i x=%s -i y=%s -o %s/bad", m, x3, y5, dir);
    expect_error(args, (const char *[]){"'batch'", "'x'", "'y'", x3, y5, NULL});
    snprintf(args, sizeof args, "run %s --shape batch=2 -i x=%s -i y=%s -o %s/bad", m, x3, y3, dir);
    expect_error(args, (const char *[]){"--shape batch=2", x3, "disagrees", NULL});
    snprintf(args, sizeof args, "run %s --shape x=4,4 -i x=%s -i y=%s -o %s/bad", m, x3, y3, dir);
    expect_error(args, (const char *[]){"--shape x=[4,4]", x3, "disagrees", NULL});
    snprintf(args, sizeof args, "run %s -i x=%s -i y=%s -o %s/bad", m, r1, y3, dir);
    expect_error(args, (const char *[]){r1, "rank", "'x'", NULL});
    /* positional -i binds the data input (the first, x); y still comes from its own file */
    snprintf(args, sizeof args, "run %s --data x,y -i %s -i %s -o %s/pos", m, x3, y5, dir);
    expect_error(args, (const char *[]){"'batch'", x3, y5, NULL});
    snprintf(args, sizeof args, "run %s --data x,y -i %s -i %s -o %s/pos", m, x3, y3, dir);
    expect_ok(args);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad", dir);
    assert_false(tu_exists(bad)); /* a refused run writes nothing */
    tu_remove_dir(dir);
}

/* A float16 model runs, and trains, in float16: --train's loss and gradients are float16 too. */
static void test_float16_run_and_train(void **state) {
    (void)state;
    char dir[256], x[512], args[2048], f[512];
    tu_make_dir(dir, sizeof dir, "runsym");
    snprintf(x, sizeof x, "%s/x.npy", dir);
    write_npy(x, IR_F16, TU_SHAPE(4, 8), 1);
    snprintf(args, sizeof args, "run " SYM "/mlp_f16.onnx -i %s -o %s/fwd", x, dir);
    expect_ok(args);
    ir_dtype t;
    ir_shape s;
    snprintf(f, sizeof f, "%s/fwd/y.npy", dir);
    ir_blob *b = read_npy(f, &t, &s);
    assert_int_equal(t, IR_F16);
    assert_true(shape_is(&s, TU_SHAPE(4, 3)));
    /* log-probabilities: each row's exp sums to 1 within float16 rounding */
    for (int r = 0; r < 4; r++) {
        double sum = 0;
        for (int c = 0; c < 3; c++) sum += exp(ir_load_f64(ir_blob_data(b), t, r * 3 + c));
        if (fabs(sum - 1) > 4e-3) fail_msg("row %d: sum of probabilities %g", r, sum);
    }
    ir_blob_unref(b);

    snprintf(args, sizeof args, "run --train " SYM "/mlp_f16.onnx -i %s -o %s/train", x, dir);
    expect_ok(args);
    const char *outs[] = {"loss", "w1.grad", "b1.grad", "ln.scale.grad", "ln.bias.grad", "w2.grad"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        snprintf(f, sizeof f, "%s/train/%s.npy", dir, outs[i]);
        b = read_npy(f, &t, &s);
        assert_int_equal(t, IR_F16);
        double norm = 0;
        for (int64_t k = 0; k < ir_shape_numel(&s); k++) {
            double v = ir_load_f64(ir_blob_data(b), t, k);
            if (!isfinite(v)) fail_msg("%s[%lld] = %g", outs[i], (long long)k, v);
            norm += v * v;
        }
        if (!(norm > 0)) fail_msg("%s is all zero", outs[i]);
        ir_blob_unref(b);
    }
    tu_remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_from_file),
        cmocka_unit_test(test_conflicts),
        cmocka_unit_test(test_float16_run_and_train),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
