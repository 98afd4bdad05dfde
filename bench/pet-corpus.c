/* pet-corpus.c - the PET programs of pet-corpus.h. Attribute int arrays are copied into each
 * graph's arena, since nodes keep pointers to them. */
#include "pet-corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ir_shape shp(int rank, const int64_t *d) {
    return ir_shape_make(rank, d);
}
#define SHP(...) shp(sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

static int input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int ints(ir_graph *g, int n, const int64_t *vals) {
    char nm[32];
    snprintf(nm, sizeof nm, "const_%d", g->n_values);
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    int v = ir_graph_add_value(g, nm, IR_I64, &s);
    ir_blob *b = ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}
#define INTS(g, ...) ints(g, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})

static ir_attr ai(const char *name, int64_t v) {
    ir_attr a = {.name = name, .type = IR_ATTR_INT, .i = v};
    return a;
}
static ir_attr af(const char *name, float v) {
    ir_attr a = {.name = name, .type = IR_ATTR_FLOAT, .f = v};
    return a;
}
static ir_attr ais(const char *name, int n, int64_t *v) {
    ir_attr a = {.name = name, .type = IR_ATTR_INTS, .n = n, .ints = v};
    return a;
}

/* Node k over in[] with n_out fresh outputs (ids into out[]); returns out[0]. */
static int node_n(ir_graph *g, ir_op_kind k, int n_in, const int *in, int n_out, int *out,
                  int n_attrs, const ir_attr *attrs) {
    char nm[32];
    snprintf(nm, sizeof nm, "%s_%d", ir_op_name(k), g->n_nodes);
    ir_attr a[8];
    for (int i = 0; i < n_attrs && i < 8; i++) {
        a[i] = attrs[i];
        if (a[i].type == IR_ATTR_INTS) {
            a[i].ints = ir_graph_alloc(g, sizeof(int64_t) * (size_t)a[i].n);
            memcpy(a[i].ints, attrs[i].ints, sizeof(int64_t) * (size_t)a[i].n);
        }
    }
    for (int i = 0; i < n_out; i++) {
        char vn[48];
        snprintf(vn, sizeof vn, "%s.%d", nm, i);
        out[i] = ir_graph_add_value(g, vn, IR_F32, NULL);
    }
    int ni = ir_graph_add_node(g, k, nm, n_in, in, n_out, out, n_attrs, a);
    ir_diag d = {{0}};
    if (ir_node_infer(g, &g->nodes[ni], &d) != IR_OK) {
        fprintf(stderr, "pet-corpus: %s\n", d.msg);
        abort();
    }
    return out[0];
}
static int node(ir_graph *g, ir_op_kind k, int n_in, const int *in, int n_attrs,
                const ir_attr *attrs) {
    int out;
    return node_n(g, k, n_in, in, 1, &out, n_attrs, attrs);
}
#define COMMA ,
#define NODE(g, k, ins, ...)                                                                       \
    node(g, k, sizeof((int[])ins) / sizeof(int), (int[])ins,                                       \
         sizeof((ir_attr[]){__VA_ARGS__}) / sizeof(ir_attr), (ir_attr[]){__VA_ARGS__})
#define NODE0(g, k, ...)                                                                           \
    node(g, k, sizeof((int[]){__VA_ARGS__}) / sizeof(int), (int[]){__VA_ARGS__}, 0, NULL)

static int reshape(ir_graph *g, int x, int rank, const int64_t *dims) {
    return node(g, IR_OP_Reshape, 2, (int[]){x, ints(g, rank, dims)}, 0, NULL);
}
#define RESHAPE(g, x, ...)                                                                         \
    reshape(g, x, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})
#define TRANSPOSE(g, x, ...)                                                                       \
    node(g, IR_OP_Transpose, 1, (int[]){x}, 1,                                                     \
         (ir_attr[]){ais("perm", sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})})

static int conv(ir_graph *g, int x, int w, int64_t pad, int64_t dil) {
    int64_t p[4] = {pad, pad, pad, pad}, dl[2] = {dil, dil};
    return node(g, IR_OP_Conv, 2, (int[]){x, w}, 2,
                (ir_attr[]){ais("pads", 4, p), ais("dilations", 2, dl)});
}

static void output(ir_graph *g, int v, const char *name) {
    g->values[v].name = ir_graph_strdup(g, name);
    ir_graph_add_output(g, v);
}

void pc_figure1(int64_t C, int64_t H, int64_t W, ir_graph **og, ir_graph **mg) {
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    output(o, conv(o, input(o, "x", SHP(2, C, H, W)), input(o, "w", SHP(C, C, 3, 3)), 1, 1), "y");
    int x = input(m, "x", SHP(2, C, H, W)), w = input(m, "w", SHP(C, C, 3, 3));
    int t = RESHAPE(m, x, 1, 2, C, H, W);
    t = TRANSPOSE(m, t, 0, 2, 3, 1, 4);
    t = RESHAPE(m, t, 1, C, H, 2 * W);
    t = conv(m, t, w, 1, 1);
    t = RESHAPE(m, t, 1, C, H, 2, W);
    t = TRANSPOSE(m, t, 0, 3, 1, 2, 4);
    output(m, RESHAPE(m, t, 2, C, H, W), "y");
    *og = o;
    *mg = m;
}

void pc_figure3(int64_t C, int64_t H, int64_t W, ir_graph **og, ir_graph **mg) {
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    output(o, conv(o, input(o, "x", SHP(1, C, H, W)), input(o, "w", SHP(C, C, 3, 3)), 2, 2), "y");
    int x = input(m, "x", SHP(1, C, H, W)), w = input(m, "w", SHP(C, C, 3, 3));
    int t = RESHAPE(m, x, 1, C, H / 2, 2, W / 2, 2);
    t = TRANSPOSE(m, t, 0, 1, 3, 2, 5, 4);
    t = RESHAPE(m, t, 1, C, H, W);
    t = conv(m, t, w, 1, 1);
    t = RESHAPE(m, t, 1, C, 2, H / 2, 2, W / 2);
    t = TRANSPOSE(m, t, 0, 1, 3, 2, 5, 4);
    output(m, RESHAPE(m, t, 1, C, H, W), "y");
    *og = o;
    *mg = m;
}

void pc_planted(int64_t C, int64_t H, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                ir_graph **og, ir_graph **mg) {
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    output(o, conv(o, input(o, "x", SHP(1, C, H, W)), input(o, "w", SHP(C, C, 3, 3)), 1, 1), "y");
    int x = input(m, "x", SHP(1, C, H, W)), w = input(m, "w", SHP(C, C, 3, 3));
    int y = conv(m, x, w, 1, 1);
    int sl = NODE0(m, IR_OP_Slice, x, INTS(m, h0, w0), INTS(m, h1, w1), INTS(m, 2, 3));
    int pd = NODE0(m, IR_OP_Pad, sl, INTS(m, 0, 0, h0, w0, 0, 0, H - h1, W - w1));
    output(m, NODE0(m, IR_OP_Add, y, pd), "y");
    *og = o;
    *mg = m;
}

int pc_single_ops(ir_graph **gs, const char **names, int max) {
    int n = 0;
    ir_graph *g;
    int x, w, a, b, c, parts[3];
#define BEGIN(name)                                                                                \
    if (n < max) {                                                                                 \
        names[n] = name;                                                                           \
        g = ir_graph_new();
#define END(v)                                                                                     \
    output(g, v, "y");                                                                             \
    gs[n++] = g;                                                                                   \
    }
    BEGIN("conv_grouped_strided_dilated")
    x = input(g, "x", SHP(2, 8, 13, 11));
    w = input(g, "w", SHP(6, 4, 3, 3));
    END(NODE(g, IR_OP_Conv, {x COMMA w}, ai("group", 2), ais("strides", 2, (int64_t[]){2, 1}),
             ais("dilations", 2, (int64_t[]){2, 3}), ais("pads", 4, (int64_t[]){1, 2, 0, 1})))
    BEGIN("conv3d")
    x = input(g, "x", SHP(1, 3, 9, 7, 5));
    w = input(g, "w", SHP(4, 3, 3, 2, 3));
    END(NODE(g, IR_OP_Conv, {x COMMA w}, ais("pads", 6, (int64_t[]){1, 0, 1, 1, 1, 1})))
    BEGIN("conv_transpose")
    x = input(g, "x", SHP(2, 4, 5, 6));
    w = input(g, "w", SHP(4, 3, 3, 3));
    END(NODE(g, IR_OP_ConvTranspose, {x COMMA w}, ai("group", 2),
             ais("strides", 2, (int64_t[]){2, 2}), ais("pads", 4, (int64_t[]){1, 0, 0, 1}),
             ais("output_padding", 2, (int64_t[]){1, 1})))
    BEGIN("avgpool_gap")
    x = input(g, "x", SHP(2, 3, 9, 8));
    a = NODE(g, IR_OP_AveragePool, {x}, ais("kernel_shape", 2, (int64_t[]){3, 3}),
             ais("strides", 2, (int64_t[]){2, 2}), ais("pads", 4, (int64_t[]){1, 1, 1, 1}),
             ai("ceil_mode", 1));
    END(NODE0(g, IR_OP_GlobalAveragePool, a))
    BEGIN("matmul_batched_broadcast")
    a = input(g, "a", SHP(3, 1, 17, 40));
    b = input(g, "b", SHP(1, 2, 40, 23));
    END(NODE0(g, IR_OP_MatMul, a, b))
    BEGIN("gemm_alpha_trans")
    a = input(g, "a", SHP(30, 20));
    b = input(g, "b", SHP(25, 30));
    END(NODE(g, IR_OP_Gemm, {a COMMA b}, ai("transA", 1), ai("transB", 1), af("alpha", 0.5f)))
    BEGIN("elementwise")
    a = input(g, "a", SHP(4, 1, 6));
    b = input(g, "b", SHP(5, 1));
    c = input(g, "c", SHP(4, 5, 6));
    int s = NODE0(g, IR_OP_Sum, a, b, c);
    int d = NODE0(g, IR_OP_Sub, NODE0(g, IR_OP_Mul, s, b), a);
    END(NODE0(g, IR_OP_Neg, d))
    BEGIN("layout")
    x = input(g, "x", SHP(4, 6, 5));
    int t = TRANSPOSE(g, x, 2, 0, 1);
    int cat = NODE(g, IR_OP_Concat, {t COMMA t}, ai("axis", 1));
    node_n(g, IR_OP_Split, 2, (int[]){cat, INTS(g, 3, 5)}, 2, parts, 1, (ir_attr[]){ai("axis", 1)});
    int sl = NODE0(g, IR_OP_Slice, parts[1], INTS(g, -1, 1), INTS(g, INT64_MIN, 6), INTS(g, 1, 2),
                   INTS(g, -2, 2));
    int pd = NODE0(g, IR_OP_Pad, sl, INTS(g, 1, -1, 2, 0, 2, 1));
    int ex = NODE0(g, IR_OP_Expand, RESHAPE(g, pd, 1, 12, 2, 6), INTS(g, 3, 12, 2, 6));
    END(NODE0(g, IR_OP_Tile, ex, INTS(g, 1, 2, 1, 3)))
    BEGIN("reductions")
    x = input(g, "x", SHP(3, 7, 4));
    a = NODE(g, IR_OP_ReduceSum, {x COMMA INTS(g, 1)}, ai("keepdims", 0));
    b = NODE(g, IR_OP_ReduceMean, {x COMMA INTS(g, 1)}, ai("keepdims", 0));
    c = NODE(g, IR_OP_CumSum, {a COMMA INTS(g, 1)}, ai("reverse", 1), ai("exclusive", 1));
    END(NODE0(g, IR_OP_Add, c, b))
#undef BEGIN
#undef END
    return n;
}
