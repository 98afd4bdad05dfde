/* pet-build.h - small builders of PET programs for the PET tests (test_pet_*.c): float graph
 * inputs, int64 constants, any op with its outputs inferred (attribute int arrays copied into the
 * graph's arena, since nodes keep pointers to them), Reshape/Transpose shorthands, named graph
 * outputs, convolutions, the programs of the paper's figures 1 and 3, and a chain of parallel
 * convolution pairs with initializer weights (pb_parallel_blocks). Include after
 * test-util.h. */
#ifndef MAGPIE_TESTS_PET_BUILD_H
#define MAGPIE_TESTS_PET_BUILD_H

#include "test-util.h"

static inline int pb_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

/* A constant int64 vector (a shape, axes, pads) named after its value id. */
static inline int pb_ints(ir_graph *g, int n, const int64_t *vals) {
    char nm[64];
    snprintf(nm, sizeof nm, "ints.%d", g->n_values);
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    int v = ir_graph_add_value(g, nm, IR_I64, &s);
    ir_blob *b = ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}
#define PB_INTS(g, ...) pb_ints(g, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

/* Node k over in[0..n_in) with one float output, inferred; returns the output's value id. */
static inline int pb_op(ir_graph *g, ir_op_kind k, int n_in, const int *in, int n_attrs,
                        const ir_attr *attrs_in) {
    ir_attr attrs[8];
    assert_true(n_attrs <= 8);
    for (int i = 0; i < n_attrs; i++) {
        attrs[i] = attrs_in[i];
        if (attrs[i].type == IR_ATTR_INTS) {
            attrs[i].ints = ir_graph_alloc(g, sizeof(int64_t) * (size_t)attrs[i].n);
            memcpy(attrs[i].ints, attrs_in[i].ints, sizeof(int64_t) * (size_t)attrs[i].n);
        }
    }
    char nm[32];
    snprintf(nm, sizeof nm, "%s_%d", ir_op_name(k), g->n_nodes);
    int out;
    tu_add_node1(g, k, nm, n_in, in, n_attrs, attrs, &out);
    return out;
}

static inline int pb_reshape(ir_graph *g, int x, int rank, const int64_t *dims) {
    int s = pb_ints(g, rank, dims);
    return pb_op(g, IR_OP_Reshape, 2, (int[]){x, s}, 0, NULL);
}
#define RESHAPE(g, x, ...)                                                                         \
    pb_reshape(g, x, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

static inline int pb_transpose(ir_graph *g, int x, int rank, const int64_t *perm) {
    int64_t p[IR_MAX_RANK];
    memcpy(p, perm, sizeof(int64_t) * (size_t)rank);
    return pb_op(g, IR_OP_Transpose, 1, &x, 1, (ir_attr[]){tu_attr_ints("perm", rank, p)});
}
#define TRANSPOSE(g, x, ...)                                                                       \
    pb_transpose(g, x, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

/* Renames value v to name and makes it a graph output. */
static inline void pb_output(ir_graph *g, int v, const char *name) {
    g->values[v].name = ir_graph_strdup(g, name);
    ir_graph_add_output(g, v);
}

/* Conv(x, w[, b] when b >= 0) with pads, dilations (NULL: 1), strides (NULL: 1) and group. */
static inline int pb_conv_full(ir_graph *g, int x, int w, int b, const int64_t *pads,
                               const int64_t *dil, const int64_t *str, int group) {
    ir_attr at[4];
    int n = 0;
    /* pb_op copies the arrays into the graph: the casts only meet tu_attr_ints' signature */
    at[n++] = tu_attr_ints("pads", 4, (int64_t *)pads);
    if (dil) at[n++] = tu_attr_ints("dilations", 2, (int64_t *)dil);
    if (str) at[n++] = tu_attr_ints("strides", 2, (int64_t *)str);
    if (group != 1) at[n++] = tu_attr_int("group", group);
    return pb_op(g, IR_OP_Conv, b >= 0 ? 3 : 2, (int[]){x, w, b}, n, at);
}
static inline int pb_conv(ir_graph *g, int x, int w, const int64_t *pads, const int64_t *dil) {
    return pb_conv_full(g, x, w, -1, pads, dil, NULL, 1);
}

/* PET figure 1: the original, one 3x3 conv (pad 1) over a batch of two images; the mutant
 * (figure 5), the batch moved beside the width, one conv over an image twice as wide, back. */
static inline void pb_figure1(int64_t C, int64_t M, int64_t H, int64_t W, ir_graph **og,
                              ir_graph **mg) {
    static const int64_t pads1[4] = {1, 1, 1, 1};
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(2, C, H, W)), w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv(o, x, w, pads1, NULL), "y");
    x = pb_input(m, "x", TU_SHAPE(2, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    int t = RESHAPE(m, x, 1, 2, C, H, W);
    t = TRANSPOSE(m, t, 0, 2, 3, 1, 4); /* [1, C, H, 2, W] */
    t = RESHAPE(m, t, 1, C, H, 2 * W);
    t = pb_conv(m, t, w, pads1, NULL);
    t = RESHAPE(m, t, 1, M, H, 2, W);
    t = TRANSPOSE(m, t, 0, 3, 1, 2, 4); /* [1, 2, M, H, W] */
    pb_output(m, RESHAPE(m, t, 2, M, H, W), "y");
    *og = o;
    *mg = m;
}

/* PET figure 3's mutant of a 3x3 conv with dilation 2 (pad 2): the image split into its 2x2
 * phases, a regular conv (pad 1) over them laid side by side (batch false: along H and W) or
 * along the batch (batch true), and back. */
static inline ir_graph *pb_figure3_mutant(int64_t C, int64_t M, int64_t H, int64_t W, bool batch) {
    static const int64_t pads1[4] = {1, 1, 1, 1};
    ir_graph *m = ir_graph_new();
    int x = pb_input(m, "x", TU_SHAPE(1, C, H, W)), w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    int t = RESHAPE(m, x, 1, C, H / 2, 2, W / 2, 2); /* (c, h', a, w', b) */
    if (batch) {
        t = TRANSPOSE(m, t, 0, 3, 5, 1, 2, 4); /* [1, a, b, C, h', w'] */
        t = RESHAPE(m, t, 4, C, H / 2, W / 2);
        t = pb_conv(m, t, w, pads1, NULL);
        t = RESHAPE(m, t, 1, 2, 2, M, H / 2, W / 2);
        t = TRANSPOSE(m, t, 0, 3, 4, 1, 5, 2); /* [1, M, h', a, w', b] */
    } else {
        t = TRANSPOSE(m, t, 0, 1, 3, 2, 5, 4); /* [1, C, a, h', b, w'] */
        t = RESHAPE(m, t, 1, C, H, W);
        t = pb_conv(m, t, w, pads1, NULL);
        t = RESHAPE(m, t, 1, M, 2, H / 2, 2, W / 2);
        t = TRANSPOSE(m, t, 0, 1, 3, 2, 5, 4); /* [1, M, h', a, w', b] */
    }
    pb_output(m, RESHAPE(m, t, 1, M, H, W), "y");
    return m;
}

static inline int pb_count_op(const ir_graph *g, ir_op_kind k) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == k;
    return n;
}

/* A float weight initializer of shape s (a parameter with data), seeded, scaled by 0.3 (about
 * 1/sqrt(fan-in) for a 3x3 conv over 8 channels: outputs stay O(1)). */
static inline int pb_weight(ir_graph *g, const char *name, ir_shape s, uint64_t seed) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    int64_t n = ir_shape_numel(&s);
    ir_blob *b = ir_blob_new((size_t)n * sizeof(float));
    float *x = ir_blob_data(b);
    tu_fill(x, n, seed);
    for (int64_t i = 0; i < n; i++) x[i] *= 0.3f;
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER | IR_VF_PARAM;
    return v;
}

/* blocks of: a = Relu(Conv(x, Wa)), b = Relu(Conv(x, Wb)), 3x3 same-padded convs on c channels
 * of hw x hw, weights as initializers; a feeds the next block, b is a graph output, and so is
 * the last a. Each block's two convolutions form one sub-program (two connected sets reading a
 * common activation), which PET merges into one (merged-parallel). */
static inline ir_graph *pb_parallel_blocks(int blocks, int64_t c, int64_t hw) {
    ir_graph *g = ir_graph_new();
    g->opset = 13;
    ir_shape xs = TU_SHAPE(1, c, hw, hw);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    ir_graph_add_input(g, x);
    g->values[x].flags |= IR_VF_DATA;
    static int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
    ir_attr attrs[2] = {tu_attr_ints("pads", 4, pads), tu_attr_ints("kernel_shape", 2, ks)};
    for (int b = 0; b < blocks; b++) {
        char nm[64];
        int y[2];
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "w%d%c", b, 'a' + k);
            int w = pb_weight(g, nm, TU_SHAPE(c, c, 3, 3), (uint64_t)(10 * b + k + 1));
            snprintf(nm, sizeof nm, "conv%d%c", b, 'a' + k);
            int cv;
            tu_add_node1(g, IR_OP_Conv, nm, 2, (int[]){x, w}, 2, attrs, &cv);
            snprintf(nm, sizeof nm, "relu%d%c", b, 'a' + k);
            tu_add_node1(g, IR_OP_Relu, nm, 1, &cv, 0, NULL, &y[k]);
        }
        ir_graph_add_output(g, y[1]);
        x = y[0];
    }
    ir_graph_add_output(g, x);
    return g;
}

#endif
