/* test_npy.c - .npy reading and writing: round trips of every dtype and rank 0..4, numpy's exact
 * header bytes, hand-written headers (versions 1-3, odd spacing, scalars), and every way a file
 * can be wrong (Fortran order, big-endian, truncated data, missing file, garbage). */
#include "test-util.h"

#include <dirent.h>
#include <unistd.h>

static char tmpdir[256];

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/magpie_test_npy_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

/* Writes magic + version + header (padded to 64 like numpy unless raw_len) + data. */
static void write_raw(const char *path, int major, const char *dict, const void *data,
                      size_t bytes) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    size_t lb = major == 1 ? 2 : 4, dl = strlen(dict);
    size_t total = 8 + lb + dl + 1, pad = (64 - total % 64) % 64;
    size_t hlen = dl + pad + 1;
    unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
    for (size_t i = 0; i < lb; i++) pre[8 + i] = (unsigned char)(hlen >> (8 * i));
    fwrite(pre, 1, 8 + lb, f);
    fwrite(dict, 1, dl, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    if (bytes) fwrite(data, 1, bytes, f);
    fclose(f);
}

static void assert_starts_with(const char *s, const char *prefix) {
    if (strncmp(s, prefix, strlen(prefix)) != 0)
        fail_msg("'%s' does not start with '%s'", s, prefix);
}

static void test_round_trip(void **state) {
    static const ir_dtype types[] = {IR_F32, IR_F16, IR_F64, IR_I64, IR_I32, IR_I8, IR_U8, IR_BOOL};
    static const int64_t dims[] = {2, 3, 1, 4};
    unsigned char data[8 * 24], back[8 * 24];
    char path[300];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        for (int rank = 0; rank <= 4; rank++) {
            ir_dtype t = types[ti];
            ir_shape s = ir_shape_make(rank, dims);
            int64_t n = ir_shape_numel(&s);
            for (int64_t i = 0; i < n; i++) ir_store_f64(data, t, i, (double)(i * 7 % 11) - 3.5);
            tpath("rt.npy", path, sizeof path);
            ir_diag d = {{0}};
            assert_int_equal(ir_npy_write(path, t, &s, data, &d), IR_OK);
            ir_dtype rt;
            ir_shape rs;
            ir_blob *b = NULL;
            ir_status st = ir_npy_read(path, &rt, &rs, &b, &d);
            if (st != IR_OK) fail_msg("%s rank %d: %s", ir_dtype_name(t), rank, d.msg);
            assert_int_equal(rt, t);
            assert_true(ir_shape_eq(&rs, &s));
            size_t bytes = (size_t)n * ir_dtype_size(t);
            assert_int_equal(ir_blob_bytes(b), bytes);
            memcpy(back, ir_blob_data(b), bytes);
            assert_memory_equal(back, data, bytes);
            ir_blob_unref(b);
        }
    }
}

/* bfloat16 is written as ml_dtypes' np.save writes it (descr '<V2', the raw patterns) and reads
 * back as bfloat16, bit for bit. */
static void test_bf16_round_trip(void **state) {
    uint16_t src[5];
    float expect[5] = {1.0f, -2.5f, 0.15625f, 3e10f, -0.0f};
    for (int i = 0; i < 5; i++) src[i] = ir_f32_to_bf16(expect[i]);
    ir_shape s = TU_SHAPE(5);
    char path[300];
    ir_diag d = {{0}};
    assert_int_equal(ir_npy_write(tpath("bf.npy", path, sizeof path), IR_BF16, &s, src, &d), IR_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char head[129] = {0};
    assert_int_equal(fread(head, 1, 128, f), 128);
    fclose(f);
    assert_non_null(strstr(head + 10, "'descr': '<V2'"));
    ir_dtype t;
    ir_shape rs;
    ir_blob *b;
    assert_int_equal(ir_npy_read(path, &t, &rs, &b, &d), IR_OK);
    assert_int_equal(t, IR_BF16);
    assert_memory_equal(ir_blob_data(b), src, sizeof src);
    ir_blob_unref(b);
}

/* The integer dtypes added for ONNX's int16/uint16/uint32/uint64 round-trip with numpy's descrs. */
static void test_more_int_dtypes(void **state) {
    const ir_dtype ts[4] = {IR_I16, IR_U16, IR_U32, IR_U64};
    const uint64_t vals[3] = {1, 0x7f, 0xfe};
    for (int k = 0; k < 4; k++) {
        char buf[64];
        for (int i = 0; i < 3; i++) ir_store_f64(buf, ts[k], i, (double)vals[i]);
        ir_shape s = TU_SHAPE(3);
        char path[300];
        ir_diag d = {{0}};
        assert_int_equal(ir_npy_write(tpath("i.npy", path, sizeof path), ts[k], &s, buf, &d),
                         IR_OK);
        ir_dtype t;
        ir_shape rs;
        ir_blob *b;
        assert_int_equal(ir_npy_read(path, &t, &rs, &b, &d), IR_OK);
        assert_int_equal(t, ts[k]);
        for (int i = 0; i < 3; i++)
            assert_int_equal(ir_load_i64(ir_blob_data(b), t, i), (int64_t)vals[i]);
        ir_blob_unref(b);
    }
}

/* The bytes numpy (np.save) writes for np.zeros((2, 3), np.float32). */
static void test_numpy_identical(void **state) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    ir_shape s = TU_SHAPE(2, 3);
    char path[300];
    ir_diag d = {{0}};
    assert_int_equal(ir_npy_write(tpath("np.npy", path, sizeof path), IR_F32, &s, data, &d), IR_OK);
    char expect[128 + 24];
    const char head[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2, 3), }";
    memcpy(expect, head, sizeof head - 1);
    memset(expect + sizeof head - 1, ' ', 128 - (sizeof head - 1));
    expect[127] = '\n';
    memcpy(expect + 128, data, 24);
    FILE *f = fopen(path, "rb");
    char got[256];
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    assert_int_equal(n, sizeof expect);
    assert_memory_equal(got, expect, sizeof expect);
}

static void test_handmade_headers(void **state) {
    char path[300];
    ir_diag d = {{0}};
    ir_dtype t;
    ir_shape s;
    ir_blob *b;
    /* version 2, keys reordered, odd spacing, no trailing comma */
    double v2[3] = {1, 2, 3};
    write_raw(tpath("v2.npy", path, sizeof path), 2,
              "{ 'shape' :( 3 , ) ,'fortran_order':False,  \"descr\":'<f8'}", v2, sizeof v2);
    assert_int_equal(ir_npy_read(path, &t, &s, &b, &d), IR_OK);
    assert_int_equal(t, IR_F64);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.dims[0], 3);
    assert_memory_equal(ir_blob_data(b), v2, sizeof v2);
    ir_blob_unref(b);
    /* version 3, scalar */
    int64_t sc = -42;
    write_raw(path, 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", &sc, 8);
    assert_int_equal(ir_npy_read(path, &t, &s, &b, &d), IR_OK);
    assert_int_equal(t, IR_I64);
    assert_int_equal(s.rank, 0);
    assert_int_equal(*(int64_t *)ir_blob_data(b), -42);
    ir_blob_unref(b);
    /* byte-order variants of one-byte types, Python 2 longs */
    unsigned char u[4] = {1, 0, 1, 1};
    const char *variants[][2] = {{"'<u1'", "uint8"},
                                 {"'|b1'", "bool"},
                                 {"'>i1'", "int8"},
                                 {"'=u1'", "uint8"},
                                 {"'b1'", "bool"}};
    for (int i = 0; i < 5; i++) {
        char dict[200];
        snprintf(dict, sizeof dict, "{'descr': %s, 'fortran_order': False, 'shape': (2L, 2L), }",
                 variants[i][0]);
        write_raw(path, 1, dict, u, 4);
        if (ir_npy_read(path, &t, &s, &b, &d) != IR_OK) fail_msg("%s: %s", variants[i][0], d.msg);
        assert_string_equal(ir_dtype_name(t), variants[i][1]);
        assert_int_equal(ir_shape_numel(&s), 4);
        ir_blob_unref(b);
    }
    /* empty arrays */
    write_raw(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", NULL, 0);
    assert_int_equal(ir_npy_read(path, &t, &s, &b, &d), IR_OK);
    assert_int_equal(ir_shape_numel(&s), 0);
    ir_blob_unref(b);
}

static void expect_fail(const char *path, const char *dict, const void *data, size_t bytes,
                        ir_status want, const char *needle) {
    write_raw(path, 1, dict, data, bytes);
    ir_diag d = {{0}};
    ir_dtype t;
    ir_shape s;
    ir_blob *b = (ir_blob *)1;
    ir_status st = ir_npy_read(path, &t, &s, &b, &d);
    if (st != want || !strstr(d.msg, needle))
        fail_msg("%s: got %s '%s', wanted %s containing '%s'", dict, ir_status_to_string(st), d.msg,
                 ir_status_to_string(want), needle);
    assert_null(b);
    assert_starts_with(d.msg, path);
}

static void test_bad_files(void **state) {
    char path[300];
    float f[6] = {0};
    tpath("bad.npy", path, sizeof path);
    expect_fail(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f, 24,
                IR_ERR_UNSUPPORTED, "Fortran");
    expect_fail(path, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24,
                IR_ERR_UNSUPPORTED, "big-endian");
    expect_fail(path, "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", f, 24,
                IR_ERR_UNSUPPORTED, "<c8");
    expect_fail(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 8,
                IR_ERR_PARSE, "truncated: expected 24 bytes of data, found 8");
    expect_fail(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", f,
                4, IR_ERR_UNSUPPORTED, "rank");
    expect_fail(path, "{'descr': '<f4', 'shape': (2, 3), }", f, 24, IR_ERR_PARSE, "fortran_order");
    expect_fail(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", f, 24,
                IR_ERR_PARSE, "shape");
    expect_fail(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) ", f, 24,
                IR_ERR_PARSE, "header");
    expect_fail(path,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, "
                "99999999999), }",
                f, 24, IR_ERR_PARSE, "");

    /* missing file */
    ir_diag d = {{0}};
    ir_dtype t;
    ir_shape s;
    ir_blob *b;
    tpath("nope/missing.npy", path, sizeof path);
    assert_int_equal(ir_npy_read(path, &t, &s, &b, &d), IR_ERR_IO);
    assert_starts_with(d.msg, path);
    assert_non_null(strstr(d.msg, "cannot open: No such file"));

    /* writing into a missing directory fails cleanly and leaves nothing */
    assert_int_equal(ir_npy_write(path, IR_F32, &(ir_shape){0}, f, &d), IR_ERR_IO);
    assert_starts_with(d.msg, path);
}

/* Random bytes and random corruptions of a valid file: always a clean status, never a crash. */
static void test_garbage(void **state) {
    char path[300];
    tpath("garbage.npy", path, sizeof path);
    unsigned char buf[256];
    float data[6] = {1, 2, 3, 4, 5, 6};
    ir_shape s6 = TU_SHAPE(2, 3);
    ir_diag d;
    assert_int_equal(ir_npy_write(path, IR_F32, &s6, data, &d), IR_OK);
    FILE *f = fopen(path, "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (uint64_t it = 0; it < 2000; it++) {
        unsigned char m[256];
        memcpy(m, buf, n);
        uint64_t r = ir_mix64(it + 1);
        size_t len = n;
        if (it < 200) { /* pure random bytes */
            for (size_t i = 0; i < n; i++) m[i] = (unsigned char)ir_mix64(it * 977 + i);
        } else {
            for (int k = 0; k < 3; k++) {
                size_t at = (size_t)(ir_mix64(r + (uint64_t)k) % n);
                m[at] = (unsigned char)ir_mix64(r ^ (uint64_t)k << 8);
            }
            len = (size_t)(r >> 40) % (n + 1);
        }
        f = fopen(path, "wb");
        fwrite(m, 1, len, f);
        fclose(f);
        ir_dtype t;
        ir_shape s;
        ir_blob *b = NULL;
        ir_status st = ir_npy_read(path, &t, &s, &b, &d);
        if (st == IR_OK) {
            assert_int_equal(ir_blob_bytes(b), (size_t)ir_shape_numel(&s) * ir_dtype_size(t));
            ir_blob_unref(b);
        } else {
            assert_null(b);
            assert_starts_with(d.msg, path);
        }
    }
}

/* Every .npy numpy wrote for the fixtures, read and written back, is the same bytes. */
static void test_fixture_files_identical(void **state) {
    char dir[1024], path[1400], out[300];
    tu_src_path("tests/fixtures/numeric", dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) skip();
    struct dirent *e;
    int checked = 0;
    tpath("copy.npy", out, sizeof out);
    while ((e = readdir(dp))) {
        static const char *const files[] = {"input_0.npy", "output_0.npy"};
        for (int k = 0; k < 2 && e->d_name[0] != '.'; k++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, files[k]);
            ir_dtype t;
            ir_shape s;
            ir_blob *b;
            ir_diag d = {{0}};
            if (access(path, F_OK) != 0) continue;
            if (ir_npy_read(path, &t, &s, &b, &d) != IR_OK) fail_msg("%s", d.msg);
            assert_int_equal(ir_npy_write(out, t, &s, ir_blob_data(b), &d), IR_OK);
            ir_blob_unref(b);
            FILE *f1 = fopen(path, "rb"), *f2 = fopen(out, "rb");
            int c1, c2;
            long at = 0;
            do {
                c1 = fgetc(f1);
                c2 = fgetc(f2);
                if (c1 != c2) fail_msg("%s: byte %ld differs after a round trip", path, at);
                at++;
            } while (c1 != EOF);
            fclose(f1);
            fclose(f2);
            checked++;
        }
    }
    closedir(dp);
    print_message("%d fixture files byte-identical\n", checked);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_more_int_dtypes),  cmocka_unit_test(test_numpy_identical),
        cmocka_unit_test(test_handmade_headers), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_garbage),          cmocka_unit_test(test_fixture_files_identical),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
