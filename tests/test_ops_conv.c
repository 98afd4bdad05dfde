/* test_ops_conv.c - Conv and ConvTranspose against naive direct loops written here: 1-D, 2-D and
 * 3-D, strides, asymmetric pads, dilations, groups, depthwise (with channel multiplier), 1x1,
 * auto_pad, output_padding and output_shape; plus shape errors. */
#include "test-util.h"

#include "ir-impl.h"

typedef struct cv_case {
    int S;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3];
    int64_t pads[6]; /* begin[S], end[S]: given to the op unless auto_pad is set */
    int64_t ref_pads[6];
    int64_t opad[3];
    const char *auto_pad;
    bool bias, transpose, use_out_shape;
    int64_t out_shape[3];
} cv_case;

/* Spatial sizes padded to 3 (leading 1s) for the reference loops. */
static void pad3(int S, const int64_t *v, int64_t def, int64_t *o) {
    for (int i = 0; i < 3; i++) o[i] = i < 3 - S ? def : v[i - (3 - S)];
}

static void ref_conv(const cv_case *c, const float *x, const float *w, const float *b,
                     const int64_t *outd, float *y) {
    int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
    pad3(c->S, c->in, 1, in);
    pad3(c->S, c->k, 1, k);
    pad3(c->S, c->s, 1, s);
    pad3(c->S, c->d, 1, d);
    pad3(c->S, c->ref_pads, 0, pb);
    pad3(c->S, outd, 1, out);
    int64_t Cg = c->C / c->group, Mg = c->M / c->group;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t o0 = 0; o0 < out[0]; o0++)
                for (int64_t o1 = 0; o1 < out[1]; o1++)
                    for (int64_t o2 = 0; o2 < out[2]; o2++) {
                        double acc = b ? b[m] : 0;
                        int64_t gi = m / Mg;
                        for (int64_t ci = 0; ci < Cg; ci++)
                            for (int64_t a = 0; a < k[0]; a++)
                                for (int64_t bb = 0; bb < k[1]; bb++)
                                    for (int64_t cc = 0; cc < k[2]; cc++) {
                                        int64_t i0 = o0 * s[0] - pb[0] + a * d[0];
                                        int64_t i1 = o1 * s[1] - pb[1] + bb * d[1];
                                        int64_t i2 = o2 * s[2] - pb[2] + cc * d[2];
                                        if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] ||
                                            i2 < 0 || i2 >= in[2])
                                            continue;
                                        int64_t ch = gi * Cg + ci;
                                        acc +=
                                            (double)
                                                x[(((n * c->C + ch) * in[0] + i0) * in[1] + i1) *
                                                      in[2] +
                                                  i2] *
                                            w[(((m * Cg + ci) * k[0] + a) * k[1] + bb) * k[2] + cc];
                                    }
                        y[(((n * c->M + m) * out[0] + o0) * out[1] + o1) * out[2] + o2] =
                            (float)acc;
                    }
}

static void ref_convt(const cv_case *c, const float *x, const float *w, const float *b,
                      const int64_t *outd, float *y) {
    int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
    pad3(c->S, c->in, 1, in);
    pad3(c->S, c->k, 1, k);
    pad3(c->S, c->s, 1, s);
    pad3(c->S, c->d, 1, d);
    pad3(c->S, c->ref_pads, 0, pb);
    pad3(c->S, outd, 1, out);
    int64_t Cg = c->C / c->group, Mg = c->M / c->group, OS = out[0] * out[1] * out[2];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t i = 0; i < OS; i++) y[(n * c->M + m) * OS + i] = b ? b[m] : 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t i0 = 0; i0 < in[0]; i0++)
                for (int64_t i1 = 0; i1 < in[1]; i1++)
                    for (int64_t i2 = 0; i2 < in[2]; i2++) {
                        float xv = x[(((n * c->C + ch) * in[0] + i0) * in[1] + i1) * in[2] + i2];
                        int64_t gi = ch / Cg;
                        for (int64_t mm = 0; mm < Mg; mm++)
                            for (int64_t a = 0; a < k[0]; a++)
                                for (int64_t bb = 0; bb < k[1]; bb++)
                                    for (int64_t cc = 0; cc < k[2]; cc++) {
                                        int64_t o0 = i0 * s[0] - pb[0] + a * d[0];
                                        int64_t o1 = i1 * s[1] - pb[1] + bb * d[1];
                                        int64_t o2 = i2 * s[2] - pb[2] + cc * d[2];
                                        if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] ||
                                            o2 < 0 || o2 >= out[2])
                                            continue;
                                        int64_t m = gi * Mg + mm;
                                        y[(((n * c->M + m) * out[0] + o0) * out[1] + o1) * out[2] +
                                          o2] +=
                                            xv *
                                            w[(((ch * Mg + mm) * k[0] + a) * k[1] + bb) * k[2] +
                                              cc];
                                    }
                    }
}

/* Runs the case through the op and compares against the reference. */
static void run_case(const cv_case *c) {
    int S = c->S;
    int64_t outd[3];
    for (int i = 0; i < S; i++) {
        int64_t dk = (c->k[i] - 1) * c->d[i] + 1, pb = c->ref_pads[i], pe = c->ref_pads[S + i];
        outd[i] = c->transpose ? c->s[i] * (c->in[i] - 1) + c->opad[i] + dk - pb - pe
                               : (c->in[i] + pb + pe - dk) / c->s[i] + 1;
    }
    ir_shape xs = {.rank = S + 2}, ws = {.rank = S + 2}, bs = {.rank = 1, .dims = {c->M}};
    xs.dims[0] = c->N;
    xs.dims[1] = c->C;
    ws.dims[0] = c->transpose ? c->C : c->M;
    ws.dims[1] = c->transpose ? c->M / c->group : c->C / c->group;
    int64_t osz = c->N * c->M;
    for (int i = 0; i < S; i++) {
        xs.dims[2 + i] = c->in[i];
        ws.dims[2 + i] = c->k[i];
        osz *= outd[i];
    }
    int64_t nx = ir_shape_numel(&xs), nw = ir_shape_numel(&ws);
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
    float *b = malloc(sizeof(float) * (size_t)c->M), *ref = malloc(sizeof(float) * (size_t)osz);
    tu_fill(x, nx, 11);
    tu_fill(w, nw, 12);
    tu_fill(b, c->M, 13);
    tu_in in[3] = {{IR_F32, xs, x, false}, {IR_F32, ws, w, true}, {IR_F32, bs, b, true}};
    int64_t st[3], dl[3], pads[6], opad[3], oshape[3], ks[3];
    for (int i = 0; i < S; i++) {
        st[i] = c->s[i];
        dl[i] = c->d[i];
        opad[i] = c->opad[i];
        oshape[i] = outd[i];
        ks[i] = c->k[i];
    }
    memcpy(pads, c->pads, sizeof pads);
    ir_attr at[8];
    int na = 0;
    at[na++] = tu_attr_ints("strides", S, st);
    at[na++] = tu_attr_ints("dilations", S, dl);
    at[na++] = tu_attr_int("group", c->group);
    at[na++] = tu_attr_ints("kernel_shape", S, ks);
    if (c->auto_pad)
        at[na++] = tu_attr_str("auto_pad", c->auto_pad);
    else if (!c->use_out_shape)
        at[na++] = tu_attr_ints("pads", 2 * S, pads);
    if (c->transpose) at[na++] = tu_attr_ints("output_padding", S, opad);
    if (c->use_out_shape) at[na++] = tu_attr_ints("output_shape", S, oshape);
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(c->transpose ? IR_OP_ConvTranspose : IR_OP_Conv, c->bias ? 3 : 2, in, 1,
                            na, at, out, &d);
    if (s != IR_OK) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_int_equal(out[0].shape.rank, S + 2);
    assert_int_equal(out[0].shape.dims[1], c->M);
    for (int i = 0; i < S; i++) assert_int_equal(out[0].shape.dims[2 + i], outd[i]);
    if (c->transpose)
        ref_convt(c, x, w, c->bias ? b : NULL, outd, ref);
    else
        ref_conv(c, x, w, c->bias ? b : NULL, outd, ref);
    double err = tu_rel_err_f32(out[0].data, ref, osz);
    if (err > 1e-5) fprintf(stderr, "rel err %g\n", err);
    assert_true(err < 1e-5);
    tu_free_outputs(1, out);
    free(x);
    free(w);
    free(b);
    free(ref);
}

#define P2(a, b, c, d)                                                                             \
    { a, b, c, d, 0, 0 }

static void test_conv2d_basic(void **st) {
    cv_case c = {.S = 2,
                 .N = 2,
                 .C = 3,
                 .M = 4,
                 .group = 1,
                 .in = {8, 9},
                 .k = {3, 3},
                 .s = {1, 1},
                 .d = {1, 1},
                 .pads = P2(1, 1, 1, 1),
                 .ref_pads = P2(1, 1, 1, 1),
                 .bias = true};
    run_case(&c);
}

static void test_conv2d_stride_dilation_asym_pads(void **st) {
    cv_case c = {.S = 2,
                 .N = 1,
                 .C = 3,
                 .M = 5,
                 .group = 1,
                 .in = {11, 10},
                 .k = {3, 2},
                 .s = {2, 3},
                 .d = {2, 1},
                 .pads = P2(0, 1, 2, 1),
                 .ref_pads = P2(0, 1, 2, 1)};
    run_case(&c);
}

static void test_conv2d_groups(void **st) {
    cv_case c = {.S = 2,
                 .N = 2,
                 .C = 4,
                 .M = 6,
                 .group = 2,
                 .in = {7, 6},
                 .k = {3, 2},
                 .s = {1, 2},
                 .d = {1, 1},
                 .pads = P2(1, 0, 1, 1),
                 .ref_pads = P2(1, 0, 1, 1),
                 .bias = true};
    run_case(&c);
}

static void test_conv2d_depthwise(void **st) {
    cv_case c = {.S = 2,
                 .N = 2,
                 .C = 5,
                 .M = 5,
                 .group = 5,
                 .in = {9, 8},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .pads = P2(1, 1, 1, 1),
                 .ref_pads = P2(1, 1, 1, 1),
                 .bias = true};
    run_case(&c);
    /* ConvNeXt-style 7x7, and a channel multiplier of 2 with dilation */
    cv_case c2 = {.S = 2,
                  .N = 1,
                  .C = 3,
                  .M = 6,
                  .group = 3,
                  .in = {10, 12},
                  .k = {7, 7},
                  .s = {1, 1},
                  .d = {1, 2},
                  .pads = P2(3, 6, 3, 6),
                  .ref_pads = P2(3, 6, 3, 6)};
    run_case(&c2);
    /* the unrolled interior paths (3/5-wide, stride 1), incl. a row narrower than the kernel */
    cv_case c3 = {.S = 2,
                  .N = 2,
                  .C = 4,
                  .M = 4,
                  .group = 4,
                  .in = {6, 37},
                  .k = {3, 3},
                  .s = {1, 1},
                  .d = {1, 1},
                  .pads = P2(1, 1, 1, 1),
                  .ref_pads = P2(1, 1, 1, 1),
                  .bias = true};
    run_case(&c3);
    cv_case c5 = {.S = 2,
                  .N = 1,
                  .C = 2,
                  .M = 2,
                  .group = 2,
                  .in = {5, 3},
                  .k = {5, 5},
                  .s = {1, 1},
                  .d = {1, 1},
                  .pads = P2(2, 2, 2, 2),
                  .ref_pads = P2(2, 2, 2, 2)};
    run_case(&c5);
    cv_case c1d = {.S = 1,
                   .N = 1,
                   .C = 3,
                   .M = 3,
                   .group = 3,
                   .in = {40},
                   .k = {7},
                   .s = {1},
                   .d = {1},
                   .pads = {3, 0},
                   .ref_pads = {3, 0}};
    run_case(&c1d);
}

static void test_conv_1x1(void **st) {
    cv_case c = {.S = 2,
                 .N = 2,
                 .C = 8,
                 .M = 4,
                 .group = 1,
                 .in = {5, 6},
                 .k = {1, 1},
                 .s = {1, 1},
                 .d = {1, 1},
                 .bias = true};
    run_case(&c);
    cv_case c2 = {.S = 2,
                  .N = 2,
                  .C = 8,
                  .M = 6,
                  .group = 2,
                  .in = {5, 6},
                  .k = {1, 1},
                  .s = {1, 1},
                  .d = {1, 1}};
    run_case(&c2);
    /* strided 1x1 still needs im2col */
    cv_case c3 = {.S = 2,
                  .N = 1,
                  .C = 4,
                  .M = 3,
                  .group = 1,
                  .in = {7, 6},
                  .k = {1, 1},
                  .s = {2, 2},
                  .d = {1, 1},
                  .bias = true};
    run_case(&c3);
}

static void test_conv1d_3d(void **st) {
    cv_case c = {.S = 1,
                 .N = 2,
                 .C = 3,
                 .M = 2,
                 .group = 1,
                 .in = {10},
                 .k = {3},
                 .s = {2},
                 .d = {2},
                 .pads = {1, 2},
                 .ref_pads = {1, 2},
                 .bias = true};
    run_case(&c);
    cv_case c3 = {.S = 3,
                  .N = 1,
                  .C = 2,
                  .M = 3,
                  .group = 1,
                  .in = {4, 5, 6},
                  .k = {3, 2, 3},
                  .s = {1, 2, 1},
                  .d = {1, 1, 1},
                  .pads = {1, 1, 1, 1, 0, 1},
                  .ref_pads = {1, 1, 1, 1, 0, 1},
                  .bias = true};
    run_case(&c3);
    cv_case dw3 = {.S = 3,
                   .N = 1,
                   .C = 4,
                   .M = 4,
                   .group = 4,
                   .in = {4, 5, 6},
                   .k = {3, 3, 3},
                   .s = {2, 1, 2},
                   .d = {1, 1, 1},
                   .pads = {1, 1, 1, 1, 1, 1},
                   .ref_pads = {1, 1, 1, 1, 1, 1}};
    run_case(&dw3);
}

static void test_conv_auto_pad(void **st) {
    /* 7 with k=4, s=2: out 4, total pad 3 -> SAME_UPPER 1+2, SAME_LOWER 2+1 */
    cv_case up = {.S = 2,
                  .N = 1,
                  .C = 2,
                  .M = 3,
                  .group = 1,
                  .in = {7, 7},
                  .k = {4, 4},
                  .s = {2, 2},
                  .d = {1, 1},
                  .auto_pad = "SAME_UPPER",
                  .ref_pads = P2(1, 1, 2, 2)};
    run_case(&up);
    cv_case lo = up;
    lo.auto_pad = "SAME_LOWER";
    int64_t lp[6] = P2(2, 2, 1, 1);
    memcpy(lo.ref_pads, lp, sizeof lp);
    run_case(&lo);
    cv_case va = up;
    va.auto_pad = "VALID";
    memset(va.ref_pads, 0, sizeof va.ref_pads);
    run_case(&va);
}

static void test_convtranspose(void **st) {
    cv_case unet = {.S = 2,
                    .N = 2,
                    .C = 4,
                    .M = 3,
                    .group = 1,
                    .in = {5, 6},
                    .k = {2, 2},
                    .s = {2, 2},
                    .d = {1, 1},
                    .bias = true,
                    .transpose = true};
    run_case(&unet);
    cv_case g2 = {.S = 2,
                  .N = 1,
                  .C = 4,
                  .M = 6,
                  .group = 2,
                  .in = {4, 5},
                  .k = {3, 3},
                  .s = {2, 2},
                  .d = {1, 1},
                  .pads = P2(1, 1, 1, 1),
                  .ref_pads = P2(1, 1, 1, 1),
                  .opad = {1, 0},
                  .bias = true,
                  .transpose = true};
    run_case(&g2);
    cv_case c1 = {.S = 1,
                  .N = 2,
                  .C = 3,
                  .M = 2,
                  .group = 1,
                  .in = {7},
                  .k = {3},
                  .s = {1},
                  .d = {2},
                  .pads = {1, 0},
                  .ref_pads = {1, 0},
                  .transpose = true};
    run_case(&c1);
    cv_case c3 = {.S = 3,
                  .N = 1,
                  .C = 2,
                  .M = 2,
                  .group = 1,
                  .in = {3, 4, 3},
                  .k = {2, 3, 3},
                  .s = {1, 2, 2},
                  .d = {1, 1, 1},
                  .pads = {0, 1, 1, 0, 1, 0},
                  .ref_pads = {0, 1, 1, 0, 1, 0},
                  .opad = {0, 1, 1},
                  .bias = true,
                  .transpose = true};
    run_case(&c3);
}

/* Convs whose column buffer is tiled (ir_conv_tile_rows: more than IR_CONV_COL_BYTES in one
 * piece), with a shorter last tile and padded rows in the first and last: 2-D, 3-D with tiles
 * that start inside an output plane, and ConvTranspose over tiles of input rows. */
static void test_conv_tiled(void **st) {
    /* rows of 16*9*36 floats (20,736 B): 38 rows in 4 tiles of 10, 10, 10 and 8 */
    assert_int_equal(ir_conv_tile_rows(38, 36, 16 * 9 * 36 * 4), 10);
    assert_int_equal(ir_conv_tile_rows(5, 36, 1000), 5);
    assert_int_equal(ir_conv_tile_rows(4, 300, IR_CONV_COL_BYTES * 2), 1);
    /* never fewer than IR_CONV_COL_MIN pixels: 14-pixel rows go 19 at a time, here all 14 */
    assert_int_equal(ir_conv_tile_rows(14, 14, IR_CONV_COL_BYTES), 14);
    assert_int_equal(ir_conv_tile_rows(28, 28, 128 * 9 * 28 * 4), 10);
    cv_case c2 = {.S = 2,
                  .N = 2,
                  .C = 16,
                  .M = 8,
                  .group = 1,
                  .in = {38, 36},
                  .k = {3, 3},
                  .s = {1, 1},
                  .d = {1, 1},
                  .pads = P2(1, 1, 1, 1),
                  .ref_pads = P2(1, 1, 1, 1),
                  .bias = true};
    run_case(&c2);
    /* 7x5 planes of 8*27*19-float rows (16,416 B): 35 rows in tiles of 12, the first ending at
     * od 2, oh 1 */
    assert_int_equal(ir_conv_tile_rows(35, 19, 8 * 27 * 19 * 4), 12);
    cv_case c3 = {.S = 3,
                  .N = 1,
                  .C = 8,
                  .M = 3,
                  .group = 1,
                  .in = {7, 5, 19},
                  .k = {3, 3, 3},
                  .s = {1, 1, 1},
                  .d = {1, 1, 1},
                  .pads = {1, 1, 1, 1, 1, 1},
                  .ref_pads = {1, 1, 1, 1, 1, 1}};
    run_case(&c3);
    /* ConvTranspose: input rows of 16*9*40 floats (23,040 B), 29 rows in tiles of 10 */
    cv_case t = {.S = 2,
                 .N = 2,
                 .C = 4,
                 .M = 16,
                 .group = 1,
                 .in = {29, 40},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .pads = P2(1, 1, 1, 1),
                 .ref_pads = P2(1, 1, 1, 1),
                 .opad = {1, 1},
                 .bias = true,
                 .transpose = true};
    run_case(&t);
    /* the workspace is the tile, not the whole [C*K, pixels] buffer */
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(2, 16, 38, 36), ws = TU_SHAPE(8, 16, 3, 3), ts = TU_SHAPE(16, 4, 3, 3);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), w = ir_graph_add_value(g, "w", IR_F32, &ws);
    int wt = ir_graph_add_value(g, "wt", IR_F32, &ts);
    int y = ir_graph_add_value(g, "y", IR_F32, NULL),
        y2 = ir_graph_add_value(g, "y2", IR_F32, NULL);
    int64_t pads[4] = {1, 1, 1, 1};
    ir_attr at[1] = {tu_attr_ints("pads", 4, pads)};
    int ins[2] = {x, w}, ins2[2] = {x, wt};
    int ni = ir_graph_add_node(g, IR_OP_Conv, "c", 2, ins, 1, &y, 1, at);
    ir_diag d;
    assert_int_equal(ir_node_infer(g, &g->nodes[ni], &d), IR_OK);
    assert_int_equal(ir_node_workspace(g, &g->nodes[ni]), 16 * 9 * 10 * 36 * sizeof(float));
    /* ConvTranspose of the same X: [4*9, 36-pixel rows] tiles, 38 rows * 5,184 B in one piece */
    ni = ir_graph_add_node(g, IR_OP_ConvTranspose, "t", 2, ins2, 1, &y2, 1, at);
    assert_int_equal(ir_node_infer(g, &g->nodes[ni], &d), IR_OK);
    assert_int_equal(ir_node_workspace(g, &g->nodes[ni]), 4 * 9 * 38 * 36 * sizeof(float));
    ir_graph_free(g);
}

static void test_convtranspose_output_shape(void **st) {
    /* in 4, k 3, s 2: full 9; output_shape 8 -> total pad 1 -> begin 1, end 0 */
    cv_case c = {.S = 2,
                 .N = 1,
                 .C = 2,
                 .M = 3,
                 .group = 1,
                 .in = {4, 4},
                 .k = {3, 3},
                 .s = {2, 2},
                 .d = {1, 1},
                 .ref_pads = P2(1, 1, 0, 0),
                 .bias = true,
                 .transpose = true,
                 .use_out_shape = true};
    run_case(&c);
}

static void test_conv_bad_shapes(void **st) {
    float buf[4096] = {0};
    ir_tensor out[1];
    ir_diag d = {{0}};
    int64_t grp = 2;
    ir_attr ag = tu_attr_int("group", grp);
    /* W expects 4 input channels, X has 3 */
    tu_in in[2] = {{IR_F32, TU_SHAPE(1, 3, 8, 8), buf, false},
                   {IR_F32, TU_SHAPE(2, 4, 3, 3), buf, true}};
    assert_int_equal(tu_run_op(IR_OP_Conv, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    /* 3 channels with group 2 */
    in[1].shape = TU_SHAPE(2, 1, 3, 3);
    assert_int_equal(tu_run_op(IR_OP_Conv, 2, in, 1, 1, &ag, out, &d), IR_ERR_SHAPE);
    /* rank mismatch */
    in[1].shape = TU_SHAPE(2, 3, 3);
    assert_int_equal(tu_run_op(IR_OP_Conv, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* kernel larger than the padded input */
    in[0].shape = TU_SHAPE(1, 3, 2, 2);
    in[1].shape = TU_SHAPE(2, 3, 3, 3);
    assert_int_equal(tu_run_op(IR_OP_Conv, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* bias of the wrong length */
    in[0].shape = TU_SHAPE(1, 3, 8, 8);
    tu_in in3[3] = {in[0], in[1], {IR_F32, TU_SHAPE(3), buf, true}};
    assert_int_equal(tu_run_op(IR_OP_Conv, 3, in3, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* ConvTranspose: W's first dim must be X's channels */
    in[1].shape = TU_SHAPE(4, 2, 3, 3);
    assert_int_equal(tu_run_op(IR_OP_ConvTranspose, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
}

/* Strong references pull ops-conv.o out of the static library while the op table refers to op
 * definitions weakly; also checks the FLOP and workspace counts of one node of each kind. */
static void test_op_table_counts(void **st) {
    assert_ptr_equal(ir_op_get(IR_OP_Conv), &ir_opdef_Conv);
    assert_ptr_equal(ir_op_get(IR_OP_ConvTranspose), &ir_opdef_ConvTranspose);
    ir_graph *g = ir_graph_new();
    ir_shape xs = TU_SHAPE(2, 4, 8, 8), ws = TU_SHAPE(6, 2, 3, 3), bs = TU_SHAPE(6);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), w = ir_graph_add_value(g, "w", IR_F32, &ws);
    int b = ir_graph_add_value(g, "b", IR_F32, &bs), y = ir_graph_add_value(g, "y", IR_F32, NULL);
    int64_t pads[4] = {1, 1, 1, 1};
    ir_attr at[2] = {tu_attr_int("group", 2), tu_attr_ints("pads", 4, pads)};
    int ins[3] = {x, w, b};
    int ni = ir_graph_add_node(g, IR_OP_Conv, "c", 3, ins, 1, &y, 2, at);
    ir_diag d;
    assert_int_equal(ir_node_infer(g, &g->nodes[ni], &d), IR_OK);
    /* outputs 2*6*8*8, each 2*(2*9) flops + 1 bias add */
    assert_true(ir_node_flops(g, &g->nodes[ni]) == 2.0 * 6 * 64 * (2 * 2 * 9 + 1));
    /* im2col of one group: (2 channels * 9) rows of 64 floats */
    assert_int_equal(ir_node_workspace(g, &g->nodes[ni]), 2 * 9 * 64 * sizeof(float));
    ir_shape w1 = TU_SHAPE(6, 4, 1, 1);
    int w1v = ir_graph_add_value(g, "w1", IR_F32, &w1),
        y1 = ir_graph_add_value(g, "y1", IR_F32, NULL);
    int ins1[2] = {x, w1v};
    ni = ir_graph_add_node(g, IR_OP_Conv, "c1", 2, ins1, 1, &y1, 0, NULL);
    assert_int_equal(ir_node_infer(g, &g->nodes[ni], &d), IR_OK);
    assert_int_equal(ir_node_workspace(g, &g->nodes[ni]), 0); /* 1x1: no im2col */
    ir_shape wt = TU_SHAPE(4, 3, 2, 2);
    int wtv = ir_graph_add_value(g, "wt", IR_F32, &wt),
        y2 = ir_graph_add_value(g, "y2", IR_F32, NULL);
    int64_t st2[2] = {2, 2};
    ir_attr at2[1] = {tu_attr_ints("strides", 2, st2)};
    int ins2[2] = {x, wtv};
    ni = ir_graph_add_node(g, IR_OP_ConvTranspose, "t", 2, ins2, 1, &y2, 1, at2);
    assert_int_equal(ir_node_infer(g, &g->nodes[ni], &d), IR_OK);
    assert_int_equal(g->values[y2].shape.dims[2], 16);
    assert_true(ir_node_flops(g, &g->nodes[ni]) == 2.0 * 2 * 4 * 64 * 3 * 4);
    assert_int_equal(ir_node_workspace(g, &g->nodes[ni]), 3 * 4 * 64 * sizeof(float));
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table_counts),
        cmocka_unit_test(test_conv2d_basic),
        cmocka_unit_test(test_conv2d_stride_dilation_asym_pads),
        cmocka_unit_test(test_conv2d_groups),
        cmocka_unit_test(test_conv2d_depthwise),
        cmocka_unit_test(test_conv_1x1),
        cmocka_unit_test(test_conv1d_3d),
        cmocka_unit_test(test_conv_auto_pad),
        cmocka_unit_test(test_convtranspose),
        cmocka_unit_test(test_conv_tiled),
        cmocka_unit_test(test_convtranspose_output_shape),
        cmocka_unit_test(test_conv_bad_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
