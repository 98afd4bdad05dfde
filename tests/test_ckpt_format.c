/* test_ckpt_format.c - the checkpoint container (checkpoints/ckpt.h): XXH64 against the
 * reference implementation's values, the section encoders and the fingerprint-set codec, a
 * round trip through a file, every class of corruption refused with its own message and the
 * file left as it was, truncation at every length and every single-bit flip refused, the
 * failure-injection hook, a crash (SIGKILL) at random moments during commits, stale temporary
 * files cleaned up, and the committed fuzz corpus still valid.
 *
 * MAGPIE_CKPT_WRITE_CORPUS=DIR regenerates the fuzz seed corpus into DIR (then commit it as
 * tests/fuzz/corpus_ckpt_reader/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "ckpt.h"
#include "ckpt-impl.h" /* white box: the layout offsets and LE helpers, to forge files */

/* ---------------------------------------------------------------- helpers */

static char g_dir[256];

static void rm_dir(const char *dir) {
    DIR *dh = opendir(dir);
    if (!dh) return;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(dh);
    rmdir(dir);
}

static int setup(void **state) {
    snprintf(g_dir, sizeof g_dir, "/tmp/magpie-ckpt-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    return 0;
}
static int teardown(void **state) {
    rm_dir(g_dir);
    return 0;
}

static const char *in_dir(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    assert_non_null(b);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

#define TAG_A CKPT_TAG('A', 'A', 'A', 'A')
#define MODEL_HASH UINT64_C(0x1122334455667788)
#define OPTIONS_HASH UINT64_C(0x99aabbccddeeff00)

/* A small checkpoint: options text, a fingerprint set, counters and an empty section. */
static ckpt_writer *small_writer(uint64_t salt) {
    ckpt_meta m = {
        .model_path = "models/tiny.onnx", .model_hash = MODEL_HASH, .options_hash = OPTIONS_HASH};
    ir_status st;
    ir_diag d = {{0}};
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    assert_non_null(w);
    ckpt_buf b = {0};
    ckpt_put_str(&b, "mode=memory limit=1.10 device=analytic:rtx3090 seed=7");
    assert_int_equal(ckpt_writer_section_buf(w, CKPT_TAG_OPTIONS, &b, &d), IR_OK);
    uint64_t fps[20], s = 42 + salt;
    for (int i = 0; i < 20; i++) fps[i] = splitmix(&s);
    ckpt_put_fpset(&b, fps, 20);
    assert_int_equal(ckpt_writer_section_buf(w, CKPT_TAG_FPSET, &b, &d), IR_OK);
    for (uint64_t i = 0; i < 4; i++) ckpt_put_u64(&b, 1000 * i + salt);
    assert_int_equal(ckpt_writer_section_buf(w, CKPT_TAG_COUNTERS, &b, &d), IR_OK);
    assert_int_equal(ckpt_writer_section(w, CKPT_TAG_TIME, NULL, 0, &d), IR_OK);
    return w;
}

static uint8_t *small_bytes(size_t *n) {
    ckpt_writer *w = small_writer(0);
    uint8_t *out;
    ir_diag d;
    assert_int_equal(ckpt_writer_encode(w, &out, n, &d), IR_OK);
    ckpt_writer_free(w);
    return out;
}

/* Header length of a valid file (fixed part plus its model path). */
static size_t header_len(const uint8_t *f) {
    return CKPT_HEADER_FIXED + ckpt_ld16(f + CKPT_OFF_PATH_LEN);
}
static uint8_t *tail_of(uint8_t *f) {
    return f + CKPT_OFF_PATH + ckpt_ld16(f + CKPT_OFF_PATH_LEN);
}
/* Recomputes the header checksum after a deliberate edit, so that a later check is reached. */
static void reseal_header(uint8_t *f) {
    size_t h = header_len(f);
    ckpt_st64(f + h - 8, ckpt_xxh64(f, h - 8, 0));
}

/* A file around an arbitrary uncompressed body (forged section tables), every checksum right. */
static uint8_t *forge(const uint8_t *raw, size_t rn, size_t *n) {
    const char *path = "forged.onnx";
    size_t plen = strlen(path), hlen = CKPT_HEADER_FIXED + plen;
    size_t cap = ZSTD_compressBound(rn);
    uint8_t *f = malloc(hlen + cap);
    assert_non_null(f);
    size_t z = ZSTD_compress(f + hlen, cap, raw, rn, 3);
    assert_false(ZSTD_isError(z));
    memcpy(f, CKPT_MAGIC, 8);
    ckpt_st32(f + 8, CKPT_VERSION);
    ckpt_st32(f + 12, 0);
    ckpt_st64(f + 16, MODEL_HASH);
    ckpt_st16(f + CKPT_OFF_PATH_LEN, (uint16_t)plen);
    memcpy(f + CKPT_OFF_PATH, path, plen);
    uint8_t *t = tail_of(f);
    ckpt_st64(t + CKPT_TAIL_OPTIONS, OPTIONS_HASH);
    ckpt_st64(t + CKPT_TAIL_RAW, rn);
    ckpt_st64(t + CKPT_TAIL_ZSIZE, z);
    ckpt_st64(t + CKPT_TAIL_BODYSUM, ckpt_xxh64(f + hlen, z, 0));
    reseal_header(f);
    *n = hlen + z;
    return f;
}

/* A raw body with n entries (tags, lengths, hashes as given) and `data` after the table. */
typedef struct fent {
    uint32_t tag;
    uint64_t len, hash;
} fent;
static uint8_t *raw_body(uint32_t count, int n, const fent *e, const void *data, size_t dn,
                         size_t *rn, bool good_table_sum) {
    size_t tb = (size_t)CKPT_TABLE_BYTES(n);
    uint8_t *b = malloc(tb + dn);
    assert_non_null(b);
    ckpt_st32(b, count);
    for (int i = 0; i < n; i++) {
        ckpt_st32(b + 4 + 20 * i, e[i].tag);
        ckpt_st64(b + 8 + 20 * i, e[i].len);
        ckpt_st64(b + 16 + 20 * i, e[i].hash);
    }
    ckpt_st64(b + tb - 8, ckpt_xxh64(b, tb - 8, 0) ^ (good_table_sum ? 0 : 1));
    if (dn) memcpy(b + tb, data, dn);
    *rn = tb + dn;
    return b;
}

/* Writes bytes to a file, opens it, expects refusal with status st and a message containing
 * `want` (prefixed with the path), and checks the file still holds exactly those bytes. */
static void expect_refused(const uint8_t *bytes, size_t n, ir_status want_st, const char *want) {
    char path[512];
    in_dir("bad.mpck", path, sizeof path);
    write_all(path, bytes, n);
    ir_status st = IR_OK;
    ir_diag d = {{0}};
    ckpt_reader *r = ckpt_open(path, &st, &d);
    if (r) fail_msg("opened a corrupt checkpoint (expected '%s')", want);
    if (st != want_st || !strstr(d.msg, want))
        fail_msg("status %s, message '%s'; expected %s with '%s'", ir_status_to_string(st), d.msg,
                 ir_status_to_string(want_st), want);
    assert_memory_equal(d.msg, path, strlen(path)); /* names the file */
    size_t m = 0;
    uint8_t *after = read_all(path, &m);
    assert_int_equal(m, n);
    assert_memory_equal(after, bytes, n);
    free(after);
    unlink(path);
}

/* ---------------------------------------------------------------- XXH64 */

typedef struct xvec {
    size_t len;
    uint64_t seed, hash;
} xvec;

/* Computed with the reference implementation (python3 xxhash 3.x, xxh64) over the pattern
 * byte i = (131 i + 7) mod 256. */
static const xvec XV[] = {
    {0, UINT64_C(0x0000000000000000), UINT64_C(0xef46db3751d8e999)},
    {0, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xc4349fc93c010000)},
    {1, UINT64_C(0x0000000000000000), UINT64_C(0xa96c7f0ce858bbb7)},
    {1, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x585882422a6165e7)},
    {3, UINT64_C(0x0000000000000000), UINT64_C(0xbed43740ee6332bb)},
    {3, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x45fa1406538fa168)},
    {4, UINT64_C(0x0000000000000000), UINT64_C(0xfa212ae44b3bb23d)},
    {4, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xa65107f22943365a)},
    {5, UINT64_C(0x0000000000000000), UINT64_C(0xd339dcc9ac8e6776)},
    {5, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xf51eda3a20de9b88)},
    {7, UINT64_C(0x0000000000000000), UINT64_C(0x2744460dd675d2c0)},
    {7, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xc9b637e2c4599de2)},
    {8, UINT64_C(0x0000000000000000), UINT64_C(0x994b676b71ce94dd)},
    {8, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xce592d5f53e192ec)},
    {9, UINT64_C(0x0000000000000000), UINT64_C(0x572b84c18b983af8)},
    {9, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x5495aa796de8ab73)},
    {15, UINT64_C(0x0000000000000000), UINT64_C(0x09e6451ed2ff8b1d)},
    {15, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x47a857d1f90c35e1)},
    {16, UINT64_C(0x0000000000000000), UINT64_C(0x94ad0095e72b24d5)},
    {16, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x3f8fea7c86a04013)},
    {31, UINT64_C(0x0000000000000000), UINT64_C(0x6711d55e306b5d8f)},
    {31, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x24c4e99ab0404b5e)},
    {32, UINT64_C(0x0000000000000000), UINT64_C(0x07f7b8e3bc5d6e25)},
    {32, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x046e99bbda1a814b)},
    {33, UINT64_C(0x0000000000000000), UINT64_C(0x09f85eeb4e1cbe9f)},
    {33, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xd7fe2bfee6e4cded)},
    {63, UINT64_C(0x0000000000000000), UINT64_C(0xb7c9968c066cb6a5)},
    {63, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xbd457f9ea47180c8)},
    {64, UINT64_C(0x0000000000000000), UINT64_C(0x50d4159a0411632e)},
    {64, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xa768f350a8e4fcf6)},
    {65, UINT64_C(0x0000000000000000), UINT64_C(0xd277176bff863efc)},
    {65, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0xfe99ab21e40d4b0c)},
    {100, UINT64_C(0x0000000000000000), UINT64_C(0x9ddada11d3dc2d8f)},
    {100, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x35546bd9a4779ae4)},
    {1000, UINT64_C(0x0000000000000000), UINT64_C(0x0bf0bdbcc82eb373)},
    {1000, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x3ecb5d7b5e7c64cf)},
    {200003, UINT64_C(0x0000000000000000), UINT64_C(0x1b84567c3fa4f562)},
    {200003, UINT64_C(0x9e3779b97f4a7c15), UINT64_C(0x6609ff579bbc16e0)},
};

static uint8_t *pattern(size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131 + 7);
    return p;
}

static void test_xxh64_vectors(void **state) {
    /* the specification's best-known value */
    assert_true(ckpt_xxh64("abc", 3, 0) == UINT64_C(0x44bc2cf5ad770999));
    uint8_t *p = pattern(200003);
    for (size_t i = 0; i < sizeof XV / sizeof XV[0]; i++) {
        uint64_t h = ckpt_xxh64(p, XV[i].len, XV[i].seed);
        if (h != XV[i].hash)
            fail_msg("xxh64(len %zu, seed %llx) = %016llx, reference %016llx", XV[i].len,
                     (unsigned long long)XV[i].seed, (unsigned long long)h,
                     (unsigned long long)XV[i].hash);
        /* streaming, in uneven pieces (1, 2, 3, ... bytes, then 31, 32, 33 ...) */
        static const size_t step[] = {1, 2, 3, 7, 31, 32, 33, 4096};
        for (size_t s = 0; s < sizeof step / sizeof step[0]; s++) {
            ckpt_xxh64_state x;
            ckpt_xxh64_init(&x, XV[i].seed);
            for (size_t off = 0; off < XV[i].len; off += step[s]) {
                size_t k = XV[i].len - off < step[s] ? XV[i].len - off : step[s];
                ckpt_xxh64_update(&x, p + off, k);
            }
            assert_true(ckpt_xxh64_digest(&x) == XV[i].hash);
        }
    }
    free(p);
}

static void test_file_hash(void **state) {
    char path[512];
    in_dir("model.bin", path, sizeof path);
    uint8_t *p = pattern(200003); /* several 64 KiB read chunks and a tail */
    write_all(path, p, 200003);
    uint64_t h = 0;
    ir_diag d = {{0}};
    assert_int_equal(ckpt_file_hash(path, &h, &d), IR_OK);
    assert_true(h == UINT64_C(0x1b84567c3fa4f562)); /* XV's 200003-byte, seed-0 value */
    free(p);
    unlink(path);
    assert_int_equal(ckpt_file_hash(path, &h, &d), IR_ERR_IO);
    assert_non_null(strstr(d.msg, "model.bin"));
}

/* ---------------------------------------------------------------- encoders */

static void test_buf_cursor(void **state) {
    static const uint64_t vs[] = {
        0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, UINT64_C(1) << 63, UINT64_MAX};
    ckpt_buf b = {0};
    ckpt_put_u8(&b, 0xab);
    ckpt_put_u16(&b, 0xbeef);
    ckpt_put_u32(&b, 0xdeadbeef);
    ckpt_put_u64(&b, UINT64_C(0x0123456789abcdef));
    ckpt_put_i64(&b, -5);
    ckpt_put_f64(&b, -0.0);
    ckpt_put_f64(&b, 3.25);
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) ckpt_put_varint(&b, vs[i]);
    ckpt_put_str(&b, "frontier");
    ckpt_put_str(&b, "");
    ckpt_put_bytes(&b, "xyz", 3);
    assert_false(b.oom);
    /* explicit little-endian: the u16 and u32 bytes in file order */
    assert_int_equal(b.data[1], 0xef);
    assert_int_equal(b.data[2], 0xbe);
    assert_int_equal(b.data[3], 0xef);
    assert_int_equal(b.data[6], 0xde);

    ckpt_cur c = ckpt_cur_make(b.data, b.len);
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    double f;
    assert_true(ckpt_get_u8(&c, &u8) && u8 == 0xab);
    assert_true(ckpt_get_u16(&c, &u16) && u16 == 0xbeef);
    assert_true(ckpt_get_u32(&c, &u32) && u32 == 0xdeadbeef);
    assert_true(ckpt_get_u64(&c, &u64) && u64 == UINT64_C(0x0123456789abcdef));
    assert_true(ckpt_get_i64(&c, &i64) && i64 == -5);
    assert_true(ckpt_get_f64(&c, &f) && f == 0.0 && signbit(f));
    assert_true(ckpt_get_f64(&c, &f) && f == 3.25);
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        assert_true(ckpt_get_varint(&c, &u64));
        assert_true(u64 == vs[i]);
    }
    const char *s;
    size_t n;
    assert_true(ckpt_get_str(&c, &s, &n) && n == 8 && !memcmp(s, "frontier", 8));
    assert_true(ckpt_get_str(&c, &s, &n) && n == 0);
    const uint8_t *p;
    assert_true(ckpt_get_bytes(&c, 3, &p) && !memcmp(p, "xyz", 3));
    assert_true(ckpt_cur_done(&c));
    /* past the end: fails, zeroes, and stays failed */
    assert_false(ckpt_get_u8(&c, &u8));
    assert_int_equal(u8, 0);
    assert_true(c.bad);
    assert_false(ckpt_cur_done(&c));

    /* every truncation of the stream fails somewhere, never reads past it (ASan watches) */
    for (size_t len = 0; len < b.len; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, b.data, len);
        ckpt_cur t = ckpt_cur_make(copy, len);
        ckpt_get_u8(&t, &u8);
        ckpt_get_u16(&t, &u16);
        ckpt_get_u32(&t, &u32);
        ckpt_get_u64(&t, &u64);
        ckpt_get_i64(&t, &i64);
        ckpt_get_f64(&t, &f);
        ckpt_get_f64(&t, &f);
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) ckpt_get_varint(&t, &u64);
        ckpt_get_str(&t, &s, &n);
        ckpt_get_str(&t, &s, &n);
        ckpt_get_bytes(&t, 3, &p);
        assert_true(t.bad);
        free(copy);
    }
    ckpt_buf_free(&b);
    assert_null(b.data);

    /* malformed varints: 11 bytes, and a 10th byte above 1 (past 2^64) */
    static const uint8_t eleven[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                       0x80, 0x80, 0x80, 0x80, 0};
    static const uint8_t over[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    ckpt_cur e = ckpt_cur_make(eleven, sizeof eleven);
    assert_false(ckpt_get_varint(&e, &u64));
    e = ckpt_cur_make(over, sizeof over);
    assert_false(ckpt_get_varint(&e, &u64));
    /* a string whose length runs past the bytes */
    static const uint8_t longstr[3] = {0x05, 'a', 'b'};
    e = ckpt_cur_make(longstr, sizeof longstr);
    assert_false(ckpt_get_str(&e, &s, &n));
    assert_null(s);
}

static int cmp64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Encodes fps (n), decodes, and checks the result is the sorted input; returns the encoding's
 * size in bytes. */
static size_t fpset_roundtrip(uint64_t *fps, size_t n) {
    uint64_t *want = malloc((n ? n : 1) * sizeof *want);
    if (n) memcpy(want, fps, n * sizeof *want);
    qsort(want, n, sizeof *want, cmp64);
    ckpt_buf b = {0};
    ckpt_put_u8(&b, 0x5a); /* something before and after: the codec must stop at its end */
    ckpt_put_fpset(&b, fps, n);
    ckpt_put_u8(&b, 0xa5);
    assert_false(b.oom);
    if (n) assert_memory_equal(fps, want, n * sizeof *want); /* sorted in place */
    ckpt_cur c = ckpt_cur_make(b.data, b.len);
    uint8_t u8;
    uint64_t *got;
    size_t m;
    assert_true(ckpt_get_u8(&c, &u8));
    assert_true(ckpt_get_fpset(&c, &got, &m));
    assert_true(ckpt_get_u8(&c, &u8) && u8 == 0xa5);
    assert_true(ckpt_cur_done(&c));
    assert_int_equal(m, n);
    if (n) assert_memory_equal(got, want, n * sizeof *want);
    size_t size = b.len - 2;
    free(got);
    free(want);
    ckpt_buf_free(&b);
    return size;
}

static void test_fpset_codec(void **state) {
    uint64_t s = 1;
    /* empty, one, the extremes, duplicates */
    assert_int_equal(fpset_roundtrip(NULL, 0), 1);
    uint64_t one[1] = {UINT64_MAX};
    fpset_roundtrip(one, 1);
    uint64_t edge[6] = {UINT64_MAX, 0, 5, 5, UINT64_C(1) << 63, 0};
    fpset_roundtrip(edge, 6);
    uint64_t small[3000]; /* small keys: most radix passes skipped */
    for (size_t i = 0; i < 3000; i++) small[i] = splitmix(&s) % 5000;
    fpset_roundtrip(small, 3000);

    /* random fingerprints: within the codec's proven bound of (k + 3) bits each, with
     * k = floor(log2(max / n)) (ckpt-fpset.c), hence below a 7-byte varint */
    size_t n = 100000;
    uint64_t *fps = malloc(n * sizeof *fps);
    for (size_t i = 0; i < n; i++) fps[i] = splitmix(&s);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) max = fps[i] > max ? fps[i] : max;
    unsigned k = 63 - (unsigned)__builtin_clzll(max / n);
    size_t size = fpset_roundtrip(fps, n);
    size_t bound = (n * (k + 3) + 7) / 8 + 1 + 10; /* + k byte + count varint */
    if (size > bound) fail_msg("%zu bytes for %zu fingerprints, bound %zu", size, n, bound);
    assert_true(size < 7 * n);
    free(fps);
}

static void test_fpset_malformed(void **state) {
    uint64_t s = 9, fps[50];
    for (int i = 0; i < 50; i++) fps[i] = splitmix(&s);
    ckpt_buf b = {0};
    ckpt_put_fpset(&b, fps, 50);
    uint64_t *got;
    size_t m;
    /* every truncation refused, cleanly */
    for (size_t len = 0; len < b.len; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, b.data, len);
        ckpt_cur c = ckpt_cur_make(copy, len);
        if (ckpt_get_fpset(&c, &got, &m)) fail_msg("decoded a %zu-byte prefix", len);
        assert_null(got);
        assert_true(c.bad);
        free(copy);
    }
    ckpt_buf_free(&b);

    /* a count the bytes cannot hold: refused before allocating 2^60 entries */
    ckpt_put_varint(&b, UINT64_C(1) << 60);
    ckpt_put_u8(&b, 10);
    ckpt_put_u64(&b, 0);
    ckpt_cur c = ckpt_cur_make(b.data, b.len);
    assert_false(ckpt_get_fpset(&c, &got, &m));
    ckpt_buf_free(&b);

    /* k above 63 */
    ckpt_put_varint(&b, 1);
    ckpt_put_u8(&b, 64);
    ckpt_put_u64(&b, 0);
    c = ckpt_cur_make(b.data, b.len);
    assert_false(ckpt_get_fpset(&c, &got, &m));
    ckpt_buf_free(&b);

    /* gaps that add up past 2^64: two gaps of 2^63 with k = 63, each "1 0" + 63 zero bits */
    ckpt_put_varint(&b, 2);
    ckpt_put_u8(&b, 63);
    uint8_t bits[17] = {0};
    bits[0] = 0x01; /* gap 1: unary 1, terminator 0, then 63 zero low bits (bits 2..64) */
    bits[65 / 8] |= 1 << (65 % 8); /* gap 2 starts at bit 65 */
    ckpt_put_bytes(&b, bits, sizeof bits);
    c = ckpt_cur_make(b.data, b.len);
    assert_false(ckpt_get_fpset(&c, &got, &m));
    /* the same with one gap decodes: the refusal above was the overflow */
    ckpt_buf_free(&b);
    ckpt_put_varint(&b, 1);
    ckpt_put_u8(&b, 63);
    uint8_t bits1[9] = {0x01}; /* the first gap alone, zero padding */
    ckpt_put_bytes(&b, bits1, sizeof bits1);
    c = ckpt_cur_make(b.data, b.len);
    assert_true(ckpt_get_fpset(&c, &got, &m));
    assert_int_equal(m, 1);
    assert_true(got[0] == UINT64_C(1) << 63);
    free(got);
    ckpt_buf_free(&b);

    /* non-zero padding bits refused: one value 0 with k = 0 is the bits "0", padded */
    ckpt_put_varint(&b, 1);
    ckpt_put_u8(&b, 0);
    ckpt_put_u8(&b, 0x00);
    c = ckpt_cur_make(b.data, b.len);
    assert_true(ckpt_get_fpset(&c, &got, &m) && m == 1 && got[0] == 0);
    free(got);
    b.data[b.len - 1] = 0x80;
    c = ckpt_cur_make(b.data, b.len);
    assert_false(ckpt_get_fpset(&c, &got, &m));
    ckpt_buf_free(&b);
}

/* ---------------------------------------------------------------- round trip */

static void check_small_sections(const ckpt_reader *r, uint64_t salt) {
    const uint8_t *p;
    size_t n;
    assert_true(ckpt_section(r, CKPT_TAG_OPTIONS, &p, &n));
    ckpt_cur c = ckpt_cur_make(p, n);
    const char *s;
    size_t sn;
    assert_true(ckpt_get_str(&c, &s, &sn) && ckpt_cur_done(&c));
    assert_memory_equal(s, "mode=memory", 11);
    assert_true(ckpt_section(r, CKPT_TAG_FPSET, &p, &n));
    c = ckpt_cur_make(p, n);
    uint64_t *fps, want[20], st = 42 + salt;
    size_t m;
    for (int i = 0; i < 20; i++) want[i] = splitmix(&st);
    qsort(want, 20, 8, cmp64);
    assert_true(ckpt_get_fpset(&c, &fps, &m) && ckpt_cur_done(&c));
    assert_int_equal(m, 20);
    assert_memory_equal(fps, want, sizeof want);
    free(fps);
    assert_true(ckpt_section(r, CKPT_TAG_COUNTERS, &p, &n));
    assert_int_equal(n, 32);
    c = ckpt_cur_make(p, n);
    for (uint64_t i = 0; i < 4; i++) {
        uint64_t v;
        assert_true(ckpt_get_u64(&c, &v));
        assert_true(v == 1000 * i + salt);
    }
    assert_true(ckpt_section(r, CKPT_TAG_TIME, &p, &n));
    assert_int_equal(n, 0);
    assert_false(ckpt_section(r, CKPT_TAG_FRONTIER, &p, &n));
    assert_null(p);
}

static void test_roundtrip(void **state) {
    char path[512];
    in_dir("run.mpck", path, sizeof path);
    ckpt_writer *w = small_writer(0);
    ir_diag d = {{0}};
    assert_int_equal(ckpt_writer_commit(w, path, &d), IR_OK);
    ir_status st;
    ckpt_reader *r = ckpt_open(path, &st, &d);
    if (!r) fail_msg("%s", d.msg);
    assert_int_equal(st, IR_OK);
    const ckpt_info *h = ckpt_header(r);
    assert_int_equal(h->version, CKPT_VERSION);
    assert_string_equal(h->model_path, "models/tiny.onnx");
    assert_true(h->model_hash == MODEL_HASH);
    assert_true(h->options_hash == OPTIONS_HASH);
    assert_int_equal(h->n_sections, 4);
    uint32_t tag;
    const uint8_t *p;
    size_t n;
    ckpt_section_at(r, 0, &tag, &p, &n);
    assert_int_equal(tag, CKPT_TAG_OPTIONS);
    ckpt_section_at(r, 3, &tag, &p, &n);
    assert_int_equal(tag, CKPT_TAG_TIME);
    check_small_sections(r, 0);
    /* the file is what encode produces, byte for byte */
    size_t fn, en;
    uint8_t *file = read_all(path, &fn), *enc;
    assert_int_equal(ckpt_writer_encode(w, &enc, &en, &d), IR_OK);
    assert_int_equal(fn, en);
    assert_int_equal(h->file_size, fn);
    assert_memory_equal(file, enc, fn);
    free(file);
    free(enc);

    /* the model and options checks */
    assert_int_equal(ckpt_check_model(r, "models/tiny.onnx", MODEL_HASH, &d), IR_OK);
    assert_int_equal(ckpt_check_options(r, OPTIONS_HASH, &d), IR_OK);
    assert_int_equal(ckpt_check_model(r, "models/other.onnx", MODEL_HASH ^ 1, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "different model file"));
    assert_non_null(strstr(d.msg, "models/other.onnx"));
    assert_int_equal(ckpt_check_options(r, OPTIONS_HASH + 1, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "different search options"));
    ckpt_close(r);

    /* a second commit replaces the file; no temporary file stays */
    ckpt_writer *w2 = small_writer(7);
    assert_int_equal(ckpt_writer_commit(w2, path, &d), IR_OK);
    r = ckpt_open(path, &st, &d);
    assert_non_null(r);
    check_small_sections(r, 7);
    ckpt_close(r);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_false(file_exists(tmp));
    ckpt_writer_free(w);
    ckpt_writer_free(w2);

    /* no sections, empty model path, a relative path in the working directory */
    ckpt_meta m = {0};
    ckpt_writer *w3 = ckpt_writer_init(&m, &st, &d);
    uint8_t *bytes;
    assert_int_equal(ckpt_writer_encode(w3, &bytes, &n, &d), IR_OK);
    r = ckpt_open_mem(bytes, n, "mem", &st, &d);
    assert_non_null(r);
    assert_int_equal(ckpt_header(r)->n_sections, 0);
    assert_string_equal(ckpt_header(r)->model_path, "");
    ckpt_close(r);
    free(bytes);
    ckpt_writer_free(w3);

    /* a model path longer than the u16 field: refused at init */
    char *lp = malloc(CKPT_MAX_PATH + 2);
    memset(lp, 'x', CKPT_MAX_PATH + 1);
    lp[CKPT_MAX_PATH + 1] = 0;
    m.model_path = lp;
    assert_null(ckpt_writer_init(&m, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    free(lp);
}

/* ---------------------------------------------------------------- corruption classes */

static void test_corruptions(void **state) {
    size_t n;
    uint8_t *good = small_bytes(&n);
    uint8_t *f = malloc(n + 1);
    size_t h = header_len(good);

    /* too short for a header, and a body cut short */
    expect_refused(good, 20, IR_ERR_PARSE, "truncated at byte 20");
    expect_refused(good, n - 3, IR_ERR_PARSE, "truncated at byte");
    /* wrong magic */
    memcpy(f, good, n);
    memcpy(f, "GGUFxxxx", 8);
    expect_refused(f, n, IR_ERR_PARSE, "bad magic");
    /* unsupported version, header otherwise consistent */
    memcpy(f, good, n);
    ckpt_st32(f + 8, CKPT_VERSION + 1);
    reseal_header(f);
    expect_refused(f, n, IR_ERR_UNSUPPORTED, "unsupported checkpoint version 2");
    /* unknown flags */
    memcpy(f, good, n);
    ckpt_st32(f + 12, 4);
    reseal_header(f);
    expect_refused(f, n, IR_ERR_UNSUPPORTED, "unsupported checkpoint flags 0x4");
    /* header checksum: a changed model hash without resealing */
    memcpy(f, good, n);
    f[17] ^= 0x10;
    expect_refused(f, n, IR_ERR_PARSE, "header checksum mismatch");
    /* body size mismatch: a trailing byte; a declared R that the frame contradicts */
    memcpy(f, good, n);
    f[n] = 0;
    expect_refused(f, n + 1, IR_ERR_PARSE, "body size mismatch");
    ckpt_st64(tail_of(f) + CKPT_TAIL_RAW, ckpt_ld64(tail_of(f) + CKPT_TAIL_RAW) + 1);
    reseal_header(f);
    expect_refused(f, n, IR_ERR_PARSE, "body size mismatch");
    /* body checksum: one flipped compressed byte */
    memcpy(f, good, n);
    f[h + (n - h) / 2] ^= 0x01;
    expect_refused(f, n, IR_ERR_PARSE, "body checksum mismatch");
    /* zstd error: the frame's magic broken, every checksum re-made */
    memcpy(f, good, n);
    f[h] ^= 0xff;
    ckpt_st64(tail_of(f) + CKPT_TAIL_BODYSUM, ckpt_xxh64(f + h, n - h, 0));
    reseal_header(f);
    expect_refused(f, n, IR_ERR_PARSE, "zstd error");
    free(f);
    free(good);

    /* forged bodies, every file-level checksum right: the section table's own checks */
    uint8_t data[64];
    for (int i = 0; i < 64; i++) data[i] = (uint8_t)i;
    uint64_t h16 = ckpt_xxh64(data, 16, 0), h48 = ckpt_xxh64(data + 16, 48, 0),
             h40 = ckpt_xxh64(data + 16, 40, 0);
    const uint32_t A = CKPT_TAG_FRONTIER, B = CKPT_TAG_BEST;
    struct {
        uint32_t count;
        int n;
        fent e[2];
        size_t dn;
        bool table_sum;
        const char *want;
    } cases[] = {
        {2, 2, {{A, 16, h16}, {B, 48, h48}}, 64, true, NULL}, /* the control: valid */
        {CKPT_MAX_SECTIONS + 1, 2, {{A, 16, h16}, {B, 48, h48}}, 64, true, "sections (at most"},
        {9, 2, {{A, 16, h16}, {B, 48, h48}}, 64, true, "entries need"},
        {2, 2, {{A, 16, h16}, {B, 48, h48}}, 64, false, "section table checksum mismatch"},
        {2, 2, {{A, 16, h16}, {A, 48, h48}}, 64, true, "section 'FRNT' appears twice"},
        {2, 2, {{A, 16, h16}, {B, 49, h48}}, 64, true, "section 'BEST' of 49 bytes overruns"},
        {2, 2, {{A, 16, h16}, {B, 40, h40}}, 64, true, "belong to no section"},
        {2, 2, {{A, 16, h16}, {B, 48, h48 ^ 1}}, 64, true, "section 'BEST' checksum mismatch"},
        {2, 2, {{A, 16, h16 + 1}, {B, 48, h48}}, 64, true, "section 'FRNT' checksum mismatch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t rn, fn;
        uint8_t *raw = raw_body(cases[i].count, cases[i].n, cases[i].e, data, cases[i].dn, &rn,
                                cases[i].table_sum);
        uint8_t *file = forge(raw, rn, &fn);
        if (!cases[i].want) {
            ir_diag d;
            ir_status st;
            ckpt_reader *r = ckpt_open_mem(file, fn, "forged", &st, &d);
            if (!r) fail_msg("control refused: %s", d.msg);
            const uint8_t *p;
            size_t len;
            assert_true(ckpt_section(r, B, &p, &len) && len == 48 && !memcmp(p, data + 16, 48));
            ckpt_close(r);
        } else {
            expect_refused(file, fn, IR_ERR_PARSE, cases[i].want);
        }
        free(raw);
        free(file);
    }
    /* a body too small for even an empty table */
    size_t fn;
    uint8_t *file = forge(data, 5, &fn);
    expect_refused(file, fn, IR_ERR_PARSE, "section table malformed");
    free(file);

    /* not there / not a file */
    char path[512];
    ir_diag d;
    ir_status st;
    assert_null(ckpt_open(in_dir("absent.mpck", path, sizeof path), &st, &d));
    assert_int_equal(st, IR_ERR_IO);
    assert_non_null(strstr(d.msg, "absent.mpck"));
    assert_null(ckpt_open(g_dir, &st, &d));
    assert_int_equal(st, IR_ERR_IO);
}

/* Every prefix of a valid file is refused as truncated at its length. */
static void test_truncation_every_offset(void **state) {
    size_t n;
    uint8_t *good = small_bytes(&n);
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1); /* exact size: ASan sees any overread */
        memcpy(cut, good, len);
        ir_diag d = {{0}};
        ir_status st = IR_OK;
        ckpt_reader *r = ckpt_open_mem(cut, len, "cut", &st, &d);
        if (r) fail_msg("opened a checkpoint cut at byte %zu of %zu", len, n);
        char want[64];
        snprintf(want, sizeof want, "truncated at byte %zu", len);
        if (st != IR_ERR_PARSE || !strstr(d.msg, want))
            fail_msg("cut at %zu: %s (%s)", len, d.msg, ir_status_to_string(st));
        free(cut);
    }
    /* and through a file, which stays as it was */
    expect_refused(good, n / 2, IR_ERR_PARSE, "truncated at byte");
    free(good);
}

/* Every single-bit flip anywhere in the file is refused. */
static void test_every_bit_flip(void **state) {
    size_t n;
    uint8_t *good = small_bytes(&n);
    size_t h = header_len(good);
    uint8_t *f = malloc(n);
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(f, good, n);
            f[i] ^= (uint8_t)(1u << bit);
            ir_diag d = {{0}};
            ir_status st = IR_OK;
            ckpt_reader *r = ckpt_open_mem(f, n, "flip", &st, &d);
            if (r) fail_msg("opened a checkpoint with bit %d of byte %zu flipped", bit, i);
            assert_true(st == IR_ERR_PARSE || st == IR_ERR_UNSUPPORTED);
            /* in the body, the body checksum is what catches it */
            if (i >= h && !strstr(d.msg, "body checksum mismatch"))
                fail_msg("byte %zu bit %d: %s", i, bit, d.msg);
        }
    free(f);
    free(good);
}

/* ---------------------------------------------------------------- atomicity */

static long dead_pid(void) {
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) _exit(0);
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    return (long)c; /* reaped: no process has it (until the kernel reuses it, far later) */
}

static void test_fail_before_rename(void **state) {
    char path[512], tmp[600], dead[600], live[600], odd[600], other[600];
    in_dir("inj.mpck", path, sizeof path);
    ckpt_writer *w1 = small_writer(1), *w2 = small_writer(2);
    ir_diag d = {{0}};
    assert_int_equal(ckpt_writer_commit(w1, path, &d), IR_OK);
    size_t n1;
    uint8_t *v1 = read_all(path, &n1);

    setenv(CKPT_FAIL_ENV, "1", 1);
    ir_status st = ckpt_writer_commit(w2, path, &d);
    unsetenv(CKPT_FAIL_ENV);
    assert_int_equal(st, IR_ERR_IO);
    assert_non_null(strstr(d.msg, "failure injected before rename"));
    /* the previous checkpoint is intact */
    size_t m;
    uint8_t *now = read_all(path, &m);
    assert_int_equal(m, n1);
    assert_memory_equal(now, v1, n1);
    free(now);
    /* the temporary file holds the complete new checkpoint, as a crash would leave it */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    ckpt_reader *r = ckpt_open(tmp, &st, &d);
    if (!r) fail_msg("%s", d.msg);
    check_small_sections(r, 2);
    ckpt_close(r);

    /* other leftovers: a dead writer's (removed), a live one's (kept: it may be writing), names
     * that are not ours (kept) */
    snprintf(dead, sizeof dead, "%s.tmp.%ld", path, dead_pid());
    snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
    snprintf(odd, sizeof odd, "%s.tmp.12ab", path);
    in_dir("other.mpck.tmp.1", other, sizeof other);
    write_all(dead, "x", 1);
    write_all(live, "x", 1);
    write_all(odd, "x", 1);
    write_all(other, "x", 1);
    int removed = -1;
    assert_int_equal(ckpt_cleanup_stale(path, &removed, &d), IR_OK);
    assert_int_equal(removed, 2);
    assert_false(file_exists(tmp));
    assert_false(file_exists(dead));
    assert_true(file_exists(live));
    assert_true(file_exists(odd));
    assert_true(file_exists(other));
    unlink(live);
    unlink(odd);
    unlink(other);

    /* without the hook the commit goes through */
    assert_int_equal(ckpt_writer_commit(w2, path, &d), IR_OK);
    r = ckpt_open(path, &st, &d);
    assert_non_null(r);
    check_small_sections(r, 2);
    ckpt_close(r);
    free(v1);
    ckpt_writer_free(w1);
    ckpt_writer_free(w2);

    /* a directory that does not exist: IR_ERR_IO naming it, nothing created */
    assert_int_equal(ckpt_writer_commit(w2 = small_writer(3), "/nonexistent-dir/x.mpck", &d),
                     IR_ERR_IO);
    assert_non_null(strstr(d.msg, "/nonexistent-dir/x.mpck"));
    ckpt_writer_free(w2);
    assert_int_equal(ckpt_cleanup_stale("/nonexistent-dir/x.mpck", NULL, &d), IR_ERR_IO);
}

/* A writer killed (SIGKILL) at arbitrary moments of its commits never leaves a torn file: the
 * path always opens, and holds one of the two versions it alternates between. */
static void test_crash_never_tears(void **state) {
    char path[512];
    in_dir("crash.mpck", path, sizeof path);
    /* version A first, so the path exists from the start */
    ckpt_writer *wa = small_writer(100);
    ir_diag d;
    assert_int_equal(ckpt_writer_commit(wa, path, &d), IR_OK);
    ckpt_writer_free(wa);
    uint64_t seed = 3;
    for (int round = 0; round < 12; round++) {
        pid_t c = fork();
        assert_true(c >= 0);
        if (c == 0) {
            /* a body large enough that writing it takes a while (256 KiB, incompressible) */
            uint64_t s = 77;
            uint8_t *big = malloc(1 << 18);
            for (size_t i = 0; i < (1u << 18) / 8; i++) {
                uint64_t v = splitmix(&s);
                memcpy(big + 8 * i, &v, 8);
            }
            for (uint64_t k = 0;; k++) {
                ckpt_writer *w = small_writer(100 + (k & 1));
                ckpt_writer_section(w, TAG_A, big, 1 << 18, NULL);
                ckpt_writer_commit(w, path, NULL);
                ckpt_writer_free(w);
            }
        }
        struct timespec ts = {0, (long)(splitmix(&seed) % 20000000)}; /* 0-20 ms */
        nanosleep(&ts, NULL);
        kill(c, SIGKILL);
        int status;
        waitpid(c, &status, 0);
        ir_status st;
        ckpt_reader *r = ckpt_open(path, &st, &d);
        if (!r) fail_msg("round %d: torn checkpoint: %s", round, d.msg);
        const uint8_t *p;
        size_t n;
        assert_true(ckpt_section(r, CKPT_TAG_COUNTERS, &p, &n));
        ckpt_cur cur = ckpt_cur_make(p, n);
        uint64_t v;
        assert_true(ckpt_get_u64(&cur, &v)); /* counter 0 is the salt */
        assert_true(v == 100 || v == 101);
        check_small_sections(r, v);
        ckpt_close(r);
        int removed;
        assert_int_equal(ckpt_cleanup_stale(path, &removed, &d), IR_OK);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)c);
        assert_false(file_exists(tmp));
    }
}

/* ---------------------------------------------------------------- the fuzz corpus */

/* The seed corpus: small, valid, varied checkpoints (tests/fuzz/corpus_ckpt_reader/). */
static int corpus(uint8_t **files, size_t *sizes, int max) {
    int k = 0;
    ir_diag d;
    ir_status st;
    /* 0: no sections, no path */
    ckpt_meta m0 = {0};
    ckpt_writer *w = ckpt_writer_init(&m0, &st, &d);
    assert_int_equal(ckpt_writer_encode(w, &files[k], &sizes[k], &d), IR_OK);
    k++;
    ckpt_writer_free(w);
    /* 1: the small checkpoint of these tests */
    w = small_writer(0);
    assert_int_equal(ckpt_writer_encode(w, &files[k], &sizes[k], &d), IR_OK);
    k++;
    ckpt_writer_free(w);
    /* 2: every explorer tag, mixed encodings, level 19 */
    ckpt_meta m2 = {.model_path = "tests/fixtures/structure/resnet18.onnx",
                    .model_hash = 3,
                    .options_hash = 4,
                    .zstd_level = 19};
    w = ckpt_writer_init(&m2, &st, &d);
    const uint32_t tags[] = {CKPT_TAG_OPTIONS, CKPT_TAG_GRAPH, CKPT_TAG_FRONTIER,
                             CKPT_TAG_FPSET,   CKPT_TAG_BEST,  CKPT_TAG_PROFILE,
                             CKPT_TAG_RNG,     CKPT_TAG_TIME,  CKPT_TAG_COUNTERS};
    uint64_t s = 5;
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
        ckpt_buf b = {0};
        if (tags[t] == CKPT_TAG_FPSET) {
            uint64_t fps[64];
            for (int i = 0; i < 64; i++) fps[i] = splitmix(&s);
            ckpt_put_fpset(&b, fps, 64);
        } else {
            for (uint64_t i = 0; i < 6; i++) {
                ckpt_put_varint(&b, splitmix(&s) >> (8 * i));
                ckpt_put_str(&b, "state");
                ckpt_put_f64(&b, 1.5 * (double)i);
            }
        }
        ckpt_writer_section_buf(w, tags[t], &b, &d);
    }
    assert_int_equal(ckpt_writer_encode(w, &files[k], &sizes[k], &d), IR_OK);
    k++;
    ckpt_writer_free(w);
    /* 3: one compressible section (long runs) */
    w = small_writer(9);
    uint8_t zeros[3000] = {0};
    ckpt_writer_section(w, TAG_A, zeros, sizeof zeros, &d);
    assert_int_equal(ckpt_writer_encode(w, &files[k], &sizes[k], &d), IR_OK);
    k++;
    ckpt_writer_free(w);
    assert_true(k <= max);
    return k;
}

static void test_fuzz_corpus(void **state) {
    uint8_t *files[8];
    size_t sizes[8];
    int k = corpus(files, sizes, 8);
    const char *out = getenv("MAGPIE_CKPT_WRITE_CORPUS");
    for (int i = 0; i < k; i++) {
        char name[600];
        if (out) {
            snprintf(name, sizeof name, "%s/seed%d.mpck", out, i);
            write_all(name, files[i], sizes[i]);
        }
        /* the committed file must open and hold what this build writes: a format change that
         * forgot to regenerate the corpus fails here. Compared decoded, not byte for byte: the
         * compressed bytes may differ between zstd versions. */
        char rel[128], path[1024];
        snprintf(rel, sizeof rel, "tests/fuzz/corpus_ckpt_reader/seed%d.mpck", i);
        const char *root = getenv("MAGPIE_SOURCE_DIR");
        snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
        size_t n;
        uint8_t *committed = read_all(path, &n);
        if (!committed) fail_msg("%s missing (MAGPIE_CKPT_WRITE_CORPUS=DIR writes it)", path);
        ir_diag d;
        ir_status st;
        ckpt_reader *r = ckpt_open(path, &st, &d);
        if (!r) fail_msg("%s", d.msg);
        ckpt_reader *want = ckpt_open_mem(files[i], sizes[i], "generated", &st, &d);
        assert_non_null(want);
        const ckpt_info *a = ckpt_header(r), *b = ckpt_header(want);
        assert_string_equal(a->model_path, b->model_path);
        assert_true(a->model_hash == b->model_hash && a->options_hash == b->options_hash);
        assert_int_equal(a->n_sections, b->n_sections);
        for (uint32_t j = 0; j < a->n_sections; j++) {
            uint32_t ta, tb;
            const uint8_t *pa, *pb;
            size_t na, nb;
            ckpt_section_at(r, j, &ta, &pa, &na);
            ckpt_section_at(want, j, &tb, &pb, &nb);
            assert_int_equal(ta, tb);
            assert_int_equal(na, nb);
            if (na) assert_memory_equal(pa, pb, na);
        }
        ckpt_close(r);
        ckpt_close(want);
        free(committed);
        free(files[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xxh64_vectors),     cmocka_unit_test(test_file_hash),
        cmocka_unit_test(test_buf_cursor),        cmocka_unit_test(test_fpset_codec),
        cmocka_unit_test(test_fpset_malformed),   cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_corruptions),       cmocka_unit_test(test_truncation_every_offset),
        cmocka_unit_test(test_every_bit_flip),    cmocka_unit_test(test_fail_before_rename),
        cmocka_unit_test(test_crash_never_tears), cmocka_unit_test(test_fuzz_corpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
