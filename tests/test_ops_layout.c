/* test_ops_layout.c - Transpose, Concat, Split, Slice, Expand, Tile and Pad against a naive
 * reference: each output element is found by mapping its multi-index back to the input, one
 * element at a time, which shares nothing with the kernels' strided and tiled copies. */
#include "test-util.h"

#include "ir-impl.h"

/* ---------------------------------------------------------------- naive reference */

/* Maps an output multi-index to an input flat index, or -1 for "the pad value". */
typedef int64_t (*map_fn)(const int64_t *oidx, const void *ctx);

/* ref[i] = in[map(idx(i))] (or *pad when map gives -1), for element size es. */
static void *naive(const ir_shape *out, size_t es, const void *in, const void *pad, map_fn f,
                   const void *ctx) {
    int64_t n = ir_shape_numel(out), idx[IR_MAX_RANK] = {0};
    char *ref = malloc((size_t)(n ? n : 1) * es);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i;
        for (int d = out->rank - 1; d >= 0; d--) {
            idx[d] = rem % out->dims[d];
            rem /= out->dims[d];
        }
        int64_t src = f(idx, ctx);
        memcpy(ref + (size_t)i * es, src < 0 ? pad : (const char *)in + (size_t)src * es, es);
    }
    return ref;
}

static int64_t flat(const ir_shape *s, const int64_t *idx) {
    int64_t f = 0;
    for (int d = 0; d < s->rank; d++) f = f * s->dims[d] + idx[d];
    return f;
}

static void fill_bytes(void *p, size_t bytes, uint64_t seed) {
    for (size_t i = 0; i < bytes; i++) ((unsigned char *)p)[i] = (unsigned char)ir_mix64(seed + i);
}

/* Runs a one-output op on x (dtype t, random bytes) plus extra inputs, and compares with the
 * naive reference of f. */
static void check_op(ir_op_kind op, ir_dtype t, ir_shape xs, int n_extra, const tu_in *extra,
                     int n_attrs, const ir_attr *attrs, ir_shape want, const void *pad, map_fn f,
                     const void *ctx) {
    size_t es = ir_dtype_size(t), bytes = (size_t)ir_shape_numel(&xs) * es;
    void *x = malloc(bytes ? bytes : 1);
    fill_bytes(x, bytes, 99);
    tu_in in[5] = {tu_data_in(t, xs, x)};
    for (int i = 0; i < n_extra; i++) in[1 + i] = extra[i];
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status st = tu_run_op(op, 1 + n_extra, in, 1, n_attrs, attrs, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(out[0].dtype, t);
    tu_expect_shape(&out[0], want);
    void *ref = naive(&want, es, x, pad, f, ctx);
    size_t ob = (size_t)ir_shape_numel(&want) * es;
    if (ob) assert_memory_equal(out[0].data, ref, ob);
    free(ref);
    free(x);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- Transpose */

typedef struct {
    ir_shape in;
    int64_t perm[IR_MAX_RANK];
} tr_ctx;

static int64_t tr_map(const int64_t *o, const void *c) {
    const tr_ctx *t = c;
    int64_t idx[IR_MAX_RANK];
    for (int d = 0; d < t->in.rank; d++) idx[t->perm[d]] = o[d];
    return flat(&t->in, idx);
}

static void check_transpose(ir_dtype t, ir_shape xs, const int64_t *perm) {
    tr_ctx c = {.in = xs};
    ir_shape want = {.rank = xs.rank};
    for (int d = 0; d < xs.rank; d++) {
        c.perm[d] = perm ? perm[d] : xs.rank - 1 - d;
        want.dims[d] = xs.dims[c.perm[d]];
    }
    ir_attr a = tu_attr_ints("perm", xs.rank, c.perm);
    check_op(IR_OP_Transpose, t, xs, 0, NULL, perm ? 1 : 0, &a, want, NULL, tr_map, &c);
}

static void test_transpose(void **state) {
    ir_dtype types[] = {IR_F32, IR_U8, IR_F16, IR_I64};
    for (int ti = 0; ti < 4; ti++) {
        ir_dtype t = types[ti];
        check_transpose(t, TU_SHAPE(300, 257), NULL); /* tiled, ragged edges */
        check_transpose(t, TU_SHAPE(5, 7), NULL);
        int64_t p3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        for (int i = 0; i < 6; i++) check_transpose(t, TU_SHAPE(9, 1, 40), p3[i]);
        for (int i = 0; i < 6; i++) check_transpose(t, TU_SHAPE(17, 33, 12), p3[i]);
        int64_t p4[][4] = {{0, 2, 3, 1}, {0, 3, 1, 2}, {0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}};
        for (int i = 0; i < 5; i++) check_transpose(t, TU_SHAPE(2, 24, 10, 9), p4[i]);
    }
    check_transpose(IR_F32, TU_SCALAR_SHAPE, NULL);
    check_transpose(IR_F32, TU_SHAPE(3, 0, 4), NULL);
    check_transpose(IR_F64, TU_SHAPE(2, 3, 2, 3, 2, 3), NULL);
    /* a GPT-style head split [B, T, H, D] -> [B, H, T, D] with long inner rows */
    int64_t heads[] = {0, 2, 1, 3};
    check_transpose(IR_F32, TU_SHAPE(2, 64, 8, 64), heads);

    float x[6] = {0};
    ir_diag d = {{0}};
    int64_t bad[] = {0, 0};
    ir_attr a = tu_attr_ints("perm", 2, bad);
    tu_in in[1] = {tu_data_in(IR_F32, TU_SHAPE(2, 3), x)};
    assert_int_equal(tu_run_err(IR_OP_Transpose, 1, in, 1, 1, &a, &d), IR_ERR_INVALID);
    a.n = 1;
    assert_int_equal(tu_run_err(IR_OP_Transpose, 1, in, 1, 1, &a, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- Concat, Split */

static void test_concat(void **state) {
    for (int axis = -3; axis < 3; axis++) {
        int ax = axis < 0 ? axis + 3 : axis;
        int64_t sizes[3] = {1, 3, 0};
        ir_shape s[3];
        float *x[3];
        tu_in in[3];
        for (int i = 0; i < 3; i++) {
            s[i] = TU_SHAPE(2, 3, 4);
            s[i].dims[ax] = sizes[i];
            x[i] = malloc(sizeof(float) * 48);
            tu_fill(x[i], ir_shape_numel(&s[i]), (uint64_t)(i + 10));
            in[i] = tu_data_in(IR_F32, s[i], x[i]);
        }
        ir_attr a = tu_attr_int("axis", axis);
        ir_tensor out[1];
        ir_diag d = {{0}};
        assert_int_equal(tu_run_op(IR_OP_Concat, 3, in, 1, 1, &a, out, &d), IR_OK);
        ir_shape want = TU_SHAPE(2, 3, 4);
        want.dims[ax] = 4;
        tu_expect_shape(&out[0], want);
        const float *y = out[0].data;
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < want.dims[1]; j++)
                for (int64_t k = 0; k < want.dims[2]; k++) {
                    int64_t idx[3] = {i, j, k}, part = 0;
                    while (idx[ax] >= sizes[part]) idx[ax] -= sizes[part++];
                    float ref = x[part][flat(&s[part], idx)];
                    assert_true(y[flat(&want, (int64_t[]){i, j, k})] == ref);
                }
        tu_free_outputs(1, out);
        for (int i = 0; i < 3; i++) free(x[i]);
    }
    float x[24] = {0};
    ir_diag d = {{0}};
    tu_in bad[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3), x), tu_data_in(IR_F32, TU_SHAPE(3, 3), x)};
    ir_attr a1 = tu_attr_int("axis", 1), a2 = tu_attr_int("axis", 2);
    assert_int_equal(tu_run_err(IR_OP_Concat, 2, bad, 1, 1, &a1, &d), IR_ERR_SHAPE);
    assert_int_equal(tu_run_err(IR_OP_Concat, 2, bad, 1, 1, &a2, &d), IR_ERR_INVALID);
    tu_in mixed[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3), x), tu_data_in(IR_I32, TU_SHAPE(2, 3), x)};
    assert_int_equal(tu_run_err(IR_OP_Concat, 2, mixed, 1, 1, &a1, &d), IR_ERR_SHAPE);
}

/* Splits a [4, 6] int32 tensor (x[i][j] = 10 i + j) along axis into n parts of the given
 * sizes and checks every part. */
static void check_split(int n_in, const tu_in *extra, int n_attrs, const ir_attr *attrs, int axis,
                        int n, const int64_t *sizes) {
    int32_t x[24];
    for (int i = 0; i < 24; i++) x[i] = (int32_t)(10 * (i / 6) + i % 6);
    tu_in in[2] = {tu_data_in(IR_I32, TU_SHAPE(4, 6), x)};
    if (n_in > 1) in[1] = extra[0];
    ir_tensor out[8];
    ir_diag d = {{0}};
    ir_status st = tu_run_op(IR_OP_Split, n_in, in, n, n_attrs, attrs, out, &d);
    if (st != IR_OK) fail_msg("%s", d.msg);
    int64_t off = 0;
    for (int p = 0; p < n; p++) {
        ir_shape want = TU_SHAPE(4, 6);
        want.dims[axis] = sizes[p];
        tu_expect_shape(&out[p], want);
        const int32_t *y = out[p].data;
        for (int64_t i = 0; i < want.dims[0]; i++)
            for (int64_t j = 0; j < want.dims[1]; j++) {
                int64_t r = axis == 0 ? i + off : i, c = axis == 1 ? j + off : j;
                assert_int_equal(y[i * want.dims[1] + j], 10 * r + c);
            }
        off += sizes[p];
    }
    tu_free_outputs(n, out);
}

static void test_split(void **state) {
    ir_attr a0 = tu_attr_int("axis", 0), a1 = tu_attr_int("axis", -1);
    int64_t eq3[] = {2, 2, 2}, eq2[] = {2, 2};
    check_split(1, NULL, 1, &a1, 1, 3, eq3);
    check_split(1, NULL, 0, NULL, 0, 2, eq2);
    int64_t sp[] = {1, 0, 5};
    tu_in e[1] = {tu_ints_in(3, sp)};
    check_split(2, e, 1, &a1, 1, 3, sp);
    int64_t sp0[] = {3, 1};
    ir_attr attrs[] = {a0, tu_attr_ints("split", 2, sp0)}; /* before opset 13 */
    check_split(1, NULL, 2, attrs, 0, 2, sp0);
    /* opset 18 num_outputs: the last part is smaller */
    ir_attr nat[] = {a0, tu_attr_int("num_outputs", 3)};
    int64_t un2[] = {2, 2, 0};
    check_split(1, NULL, 2, nat, 0, 3, un2);

    int32_t x[24] = {0};
    ir_diag d = {{0}};
    tu_in bad[2] = {tu_data_in(IR_I32, TU_SHAPE(4, 6), x)};
    assert_int_equal(tu_run_err(IR_OP_Split, 1, bad, 4, 1, &a1, &d), IR_ERR_SHAPE);
    int64_t wrong[] = {2, 3};
    bad[1] = tu_ints_in(2, wrong);
    assert_int_equal(tu_run_err(IR_OP_Split, 2, bad, 2, 1, &a1, &d), IR_ERR_SHAPE);
    assert_int_equal(tu_run_err(IR_OP_Split, 2, bad, 3, 1, &a1, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- Slice */

typedef struct {
    ir_shape in;
    int64_t first[IR_MAX_RANK], step[IR_MAX_RANK];
} sl_ctx;

static int64_t sl_map(const int64_t *o, const void *c) {
    const sl_ctx *s = c;
    int64_t idx[IR_MAX_RANK];
    for (int d = 0; d < s->in.rank; d++) idx[d] = s->first[d] + o[d] * s->step[d];
    return flat(&s->in, idx);
}

/* ctx holds the expected first index and step per dim, want the expected shape. */
static void check_slice(ir_dtype t, ir_shape xs, int n, const int64_t *starts, const int64_t *ends,
                        const int64_t *axes, const int64_t *steps, ir_shape want, const sl_ctx *c) {
    tu_in e[4] = {tu_ints_in(n, starts), tu_ints_in(n, ends), tu_ints_in(n, axes),
                  tu_ints_in(n, steps)};
    if (!axes) e[2].data = NULL;
    check_op(IR_OP_Slice, t, xs, steps ? 4 : axes ? 3 : 2, e, 0, NULL, want, NULL, sl_map, c);
}

static void test_slice(void **state) {
    ir_shape xs = TU_SHAPE(5, 6, 7);
    /* plain: [1:4, :, 2:-1] */
    int64_t s1[] = {1, 2}, e1[] = {4, -1}, a1[] = {0, 2};
    sl_ctx c1 = {xs, {1, 0, 2}, {1, 1, 1}};
    check_slice(IR_F32, xs, 2, s1, e1, a1, NULL, TU_SHAPE(3, 6, 4), &c1);
    /* negative steps with clamped ends: [::-1, 5:0:-2, ::-3] */
    int64_t s2[] = {-1, 5, INT64_MAX}, e2[] = {INT64_MIN, 0, INT64_MIN}, a2[] = {0, -2, 2},
            t2[] = {-1, -2, -3};
    sl_ctx c2 = {xs, {4, 5, 6}, {-1, -2, -3}};
    check_slice(IR_F32, xs, 3, s2, e2, a2, t2, TU_SHAPE(5, 3, 3), &c2);
    check_slice(IR_U8, xs, 3, s2, e2, a2, t2, TU_SHAPE(5, 3, 3), &c2);
    check_slice(IR_I64, xs, 3, s2, e2, a2, t2, TU_SHAPE(5, 3, 3), &c2);
    /* positive steps, huge end, negative start below -dim clamps to 0 */
    int64_t s3[] = {-100, 1}, e3[] = {INT64_MAX, 1000}, t3[] = {2, 3};
    sl_ctx c3 = {xs, {0, 1, 0}, {2, 3, 1}};
    check_slice(IR_F16, xs, 2, s3, e3, NULL, NULL, TU_SHAPE(5, 5, 7),
                &(sl_ctx){xs, {0, 1, 0}, {1, 1, 1}});
    int64_t a3[] = {0, 1};
    check_slice(IR_F16, xs, 2, s3, e3, a3, t3, TU_SHAPE(3, 2, 7), &c3);
    /* empty results: start past end */
    int64_t s4[] = {4}, e4[] = {2}, a4[] = {1};
    sl_ctx c4 = {xs, {0}, {1, 1, 1}};
    check_slice(IR_F32, xs, 1, s4, e4, a4, NULL, TU_SHAPE(5, 0, 7), &c4);

    float x[210] = {0};
    ir_diag d = {{0}};
    int64_t z[] = {0};
    tu_in bad[5] = {tu_data_in(IR_F32, xs, x), tu_ints_in(1, z), tu_ints_in(1, s4),
                    tu_ints_in(1, z), tu_ints_in(1, z)};
    assert_int_equal(tu_run_err(IR_OP_Slice, 5, bad, 1, 0, NULL, &d), IR_ERR_INVALID); /* step 0 */
    int64_t far[] = {3};
    bad[3] = tu_ints_in(1, far);
    bad[4] = tu_ints_in(1, a4);
    assert_int_equal(tu_run_err(IR_OP_Slice, 5, bad, 1, 0, NULL, &d), IR_ERR_INVALID); /* axis 3 */
    bad[2] = tu_ints_in(2, e1);
    assert_int_equal(tu_run_err(IR_OP_Slice, 3, bad, 1, 0, NULL, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- Expand, Tile */

typedef struct {
    ir_shape in, out;
} bc_ctx;

/* Broadcast (Expand) and modulo (Tile) maps of an output index to the input. */
static int64_t bc_map(const int64_t *o, const void *c) {
    const bc_ctx *b = c;
    int64_t idx[IR_MAX_RANK];
    for (int d = 0; d < b->in.rank; d++) {
        int od = b->out.rank - b->in.rank + d;
        idx[d] = b->in.dims[d] == 1 ? 0 : o[od];
    }
    return flat(&b->in, idx);
}
static int64_t tile_map(const int64_t *o, const void *c) {
    const bc_ctx *b = c;
    int64_t idx[IR_MAX_RANK];
    for (int d = 0; d < b->in.rank; d++) idx[d] = o[d] % b->in.dims[d];
    return flat(&b->in, idx);
}

static void test_expand(void **state) {
    int64_t s1[] = {2, 3, 4};
    tu_in e1[] = {tu_ints_in(3, s1)};
    bc_ctx c1 = {TU_SHAPE(3, 1), TU_SHAPE(2, 3, 4)};
    check_op(IR_OP_Expand, IR_F32, c1.in, 1, e1, 0, NULL, c1.out, NULL, bc_map, &c1);
    /* bidirectional: the shape may be smaller and broadcast against the input */
    int64_t s2[] = {3, 1};
    tu_in e2[] = {tu_ints_in(2, s2)};
    bc_ctx c2 = {TU_SHAPE(2, 1, 5), TU_SHAPE(2, 3, 5)};
    check_op(IR_OP_Expand, IR_I8, c2.in, 1, e2, 0, NULL, c2.out, NULL, bc_map, &c2);
    int64_t s3[] = {4, 1, 1000};
    tu_in e3[] = {tu_ints_in(3, s3)};
    bc_ctx c3 = {TU_SCALAR_SHAPE, TU_SHAPE(4, 1, 1000)};
    check_op(IR_OP_Expand, IR_F64, c3.in, 1, e3, 0, NULL, c3.out, NULL, bc_map, &c3);
    int64_t s4[] = {0, 3};
    tu_in e4[] = {tu_ints_in(2, s4)};
    bc_ctx c4 = {TU_SHAPE(1, 3), TU_SHAPE(0, 3)};
    check_op(IR_OP_Expand, IR_F32, c4.in, 1, e4, 0, NULL, c4.out, NULL, bc_map, &c4);

    float x[6] = {0};
    ir_diag d = {{0}};
    int64_t bad[] = {4, 3};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3), x), tu_ints_in(2, bad)};
    assert_int_equal(tu_run_err(IR_OP_Expand, 2, in, 1, 0, NULL, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "[2,3]"));
}

static void test_tile(void **state) {
    int64_t r1[] = {2, 3};
    tu_in e1[] = {tu_ints_in(2, r1)};
    bc_ctx c1 = {TU_SHAPE(2, 3), TU_SHAPE(4, 9)};
    check_op(IR_OP_Tile, IR_F32, c1.in, 1, e1, 0, NULL, c1.out, NULL, tile_map, &c1);
    int64_t r2[] = {1, 4, 2};
    tu_in e2[] = {tu_ints_in(3, r2)};
    bc_ctx c2 = {TU_SHAPE(3, 1, 5), TU_SHAPE(3, 4, 10)};
    check_op(IR_OP_Tile, IR_F16, c2.in, 1, e2, 0, NULL, c2.out, NULL, tile_map, &c2);
    int64_t r3[] = {2, 0};
    tu_in e3[] = {tu_ints_in(2, r3)};
    bc_ctx c3 = {TU_SHAPE(2, 3), TU_SHAPE(4, 0)};
    check_op(IR_OP_Tile, IR_F32, c3.in, 1, e3, 0, NULL, c3.out, NULL, tile_map, &c3);

    float x[6] = {0};
    ir_diag d = {{0}};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3), x), tu_ints_in(3, r2)};
    assert_int_equal(tu_run_err(IR_OP_Tile, 2, in, 1, 0, NULL, &d), IR_ERR_INVALID);
    int64_t neg[] = {1, -1};
    in[1] = tu_ints_in(2, neg);
    assert_int_equal(tu_run_err(IR_OP_Tile, 2, in, 1, 0, NULL, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- Pad */

typedef struct {
    ir_shape in;
    int64_t pb[IR_MAX_RANK];
    int mode; /* 0 constant, 1 reflect, 2 edge, 3 wrap */
} pad_ctx;

static int64_t pad_map(const int64_t *o, const void *c) {
    const pad_ctx *p = c;
    int64_t idx[IR_MAX_RANK];
    for (int d = 0; d < p->in.rank; d++) {
        int64_t i = o[d] - p->pb[d], n = p->in.dims[d];
        if (p->mode == 0 && (i < 0 || i >= n)) return -1;
        if (p->mode == 2) i = i < 0 ? 0 : i >= n ? n - 1 : i;
        while (p->mode == 3 && i < 0) i += n; /* wrap: the input repeated */
        while (p->mode == 3 && i >= n) i -= n;
        /* reflect by walking, one bounce at a time */
        while (p->mode == 1 && n > 1 && (i < 0 || i >= n)) i = i < 0 ? -i : 2 * (n - 1) - i;
        if (p->mode == 1 && n == 1) i = 0;
        idx[d] = i;
    }
    return flat(&p->in, idx);
}

static void check_pad(ir_dtype t, ir_shape xs, const char *mode, const int64_t *pads,
                      const void *cval, const int64_t *axes, int naxes) {
    pad_ctx c = {.in = xs,
                 .mode = strcmp(mode, "constant") == 0  ? 0
                         : strcmp(mode, "reflect") == 0 ? 1
                         : strcmp(mode, "edge") == 0    ? 2
                                                        : 3};
    ir_shape want = xs;
    int na = axes ? naxes : xs.rank;
    for (int i = 0; i < na; i++) {
        int ax = axes ? (int)(axes[i] < 0 ? axes[i] + xs.rank : axes[i]) : i;
        c.pb[ax] = pads[i];
        want.dims[ax] += pads[i] + pads[na + i];
    }
    tu_in e[3] = {tu_ints_in(2 * na, pads),
                  {.dtype = t, .shape = TU_SCALAR_SHAPE, .data = cval},
                  tu_ints_in(naxes, axes)};
    ir_attr m = tu_attr_str("mode", mode);
    unsigned char zero[8] = {0};
    check_op(IR_OP_Pad, t, xs,
             axes   ? 3
             : cval ? 2
                    : 1,
             e, 1, &m, want, cval ? cval : zero, pad_map, &c);
}

static void test_pad(void **state) {
    int64_t p1[] = {1, 2, 3, 0, 2, 1};
    float cv = 7.5f;
    check_pad(IR_F32, TU_SHAPE(2, 3, 4), "constant", p1, &cv, NULL, 0);
    check_pad(IR_F32, TU_SHAPE(2, 3, 4), "constant", p1, NULL, NULL, 0);
    check_pad(IR_F32, TU_SHAPE(2, 3, 4), "reflect", p1, NULL, NULL, 0);
    check_pad(IR_F32, TU_SHAPE(2, 3, 4), "edge", p1, NULL, NULL, 0);
    /* NCHW image padding as CNNs use it, on 2-byte and 8-byte dtypes */
    int64_t p2[] = {0, 0, 2, 2, 0, 0, 2, 2};
    check_pad(IR_F16, TU_SHAPE(1, 3, 9, 11), "reflect", p2, NULL, NULL, 0);
    check_pad(IR_I64, TU_SHAPE(1, 3, 9, 11), "edge", p2, NULL, NULL, 0);
    int64_t i64cv = -3;
    check_pad(IR_I64, TU_SHAPE(1, 3, 9, 11), "constant", p2, &i64cv, NULL, 0);
    /* reflect wider than the input bounces more than once; size-1 dims reflect to themselves */
    int64_t p3[] = {5, 1, 4, 3};
    check_pad(IR_U8, TU_SHAPE(3, 1), "reflect", p3, NULL, NULL, 0);
    /* negative pads crop (constant mode) */
    int64_t p4[] = {-1, 2, 1, -2};
    check_pad(IR_F32, TU_SHAPE(4, 5), "constant", p4, &cv, NULL, 0);
    /* an empty input is all padding */
    int64_t p5[] = {1, 1, 1, 1};
    check_pad(IR_F32, TU_SHAPE(0, 2), "constant", p5, &cv, NULL, 0);
    /* opset 18 axes */
    int64_t ax[] = {-1}, p6[] = {2, 1};
    check_pad(IR_F32, TU_SHAPE(3, 4), "edge", p6, NULL, ax, 1);
    /* opset 19 wrap: pads wider than the input wrap more than once; with axes too */
    check_pad(IR_F32, TU_SHAPE(2, 3, 4), "wrap", p1, NULL, NULL, 0);
    check_pad(IR_U8, TU_SHAPE(3, 1), "wrap", p3, NULL, NULL, 0);
    int64_t ax0[] = {0}, p7[] = {7, 5};
    check_pad(IR_I32, TU_SHAPE(3, 4), "wrap", p7, NULL, ax0, 1);

    float x[12] = {0};
    ir_diag d = {{0}};
    int64_t odd[] = {1, 1, 1};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(3, 4), x), tu_ints_in(3, odd)};
    assert_int_equal(tu_run_err(IR_OP_Pad, 2, in, 1, 0, NULL, &d), IR_ERR_INVALID);
    int64_t crop[] = {-4, 0, 0, 0};
    in[1] = tu_ints_in(4, crop);
    assert_int_equal(tu_run_err(IR_OP_Pad, 2, in, 1, 0, NULL, &d), IR_ERR_INVALID);
    ir_attr wrap = tu_attr_str("mode", "circular");
    in[1] = tu_ints_in(4, p5);
    assert_int_equal(tu_run_err(IR_OP_Pad, 2, in, 1, 1, &wrap, &d), IR_ERR_UNSUPPORTED);
    ir_attr refl = tu_attr_str("mode", "reflect");
    tu_in empty[2] = {tu_data_in(IR_F32, TU_SHAPE(0, 4), x), tu_ints_in(4, p5)};
    assert_int_equal(tu_run_err(IR_OP_Pad, 2, empty, 1, 1, &refl, &d), IR_ERR_INVALID);
}

static void test_op_table(void **state) {
    /* strong references: they pull ops-layout.o out of the static library while the op table
     * refers to definitions weakly */
    const ir_op_def *defs[] = {&ir_opdef_Transpose, &ir_opdef_Concat, &ir_opdef_Split,
                               &ir_opdef_Slice,     &ir_opdef_Expand, &ir_opdef_Tile,
                               &ir_opdef_Pad};
    ir_op_kind kinds[] = {IR_OP_Transpose, IR_OP_Concat, IR_OP_Split, IR_OP_Slice,
                          IR_OP_Expand,    IR_OP_Tile,   IR_OP_Pad};
    for (int i = 0; i < 7; i++) {
        assert_ptr_equal(ir_op_get(kinds[i]), defs[i]);
        assert_null(defs[i]->flops);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table), cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_concat),   cmocka_unit_test(test_split),
        cmocka_unit_test(test_slice),    cmocka_unit_test(test_expand),
        cmocka_unit_test(test_tile),     cmocka_unit_test(test_pad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
