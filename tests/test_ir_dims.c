/* test_ir_dims.c - the op table's dimension links (ir.h, ir_dimlink; the edges of MAGIS's
 * dimension graph D(G)).
 *
 * Per op family, hand-built nodes against the links their semantics allow, compared as exact
 * sets: a missing link loses a split, an extra one makes a fission compute something else. Then
 * real models through a small local union-find over (value, dim) and (node, reduce axis) (the
 * real D-graph is rules/'s): the batch of a ResNet training graph reaches every activation and
 * the summed batch axis of every weight gradient; training-mode BatchNorm cuts it; the heads of a
 * GPT-2 attention form their own component apart from the batch; every link of every node of a
 * set of fixtures joins dims of equal size. Finally every op kind has dims or is on the list of
 * ops that deliberately have none. */
#include "test-util.h"

#include "ir-impl.h"

/* ---------------------------------------------------------------- helpers */

typedef struct lk {
    int in, in_dim, out, out_dim; /* out_dim < 0: reduce axis -out_dim (out ignored) */
    bool sum;
    unsigned flags; /* a kept dim's IR_DIMLINK_*_INNER */
} lk;

#define K(i, id, o, od) ((lk){(i), (id), (o), (od), false, 0})
#define R(i, id, ax, s) ((lk){(i), (id), 0, -(ax), (s), 0})
/* a reshape's inner factors: of the output's dim (IO), of the input's (OI) */
#define IO(i, id, o, od) ((lk){(i), (id), (o), (od), false, IR_DIMLINK_OUT_INNER})
#define OI(i, id, o, od) ((lk){(i), (id), (o), (od), false, IR_DIMLINK_IN_INNER})

static void print_links(const ir_dimlink *l, int n) {
    for (int i = 0; i < n; i++)
        print_error("  in %d dim %d -> %s %d dim %d%s\n", l[i].in, l[i].in_dim,
                    l[i].out_dim < 0 ? "reduce" : "out", l[i].out_dim < 0 ? 0 : l[i].out,
                    l[i].out_dim < 0 ? -l[i].out_dim : l[i].out_dim,
                    (l[i].flags & IR_DIMLINK_SUM)         ? " (sum)"
                    : (l[i].flags & IR_DIMLINK_IN_INNER)  ? " (the input's inner factor)"
                    : (l[i].flags & IR_DIMLINK_OUT_INNER) ? " (the output's inner factor)"
                                                          : "");
}

static bool same_link(const ir_dimlink *a, const lk *e) {
    if (a->in != e->in || a->in_dim != e->in_dim || a->out_dim != e->out_dim) return false;
    if (e->out_dim >= 0) return a->out == e->out && a->flags == e->flags;
    return ((a->flags & IR_DIMLINK_SUM) != 0) == e->sum;
}

/* The links of node ni are exactly the n expected ones (in any order, without repeats). */
static void expect_links(const ir_graph *g, int ni, int n, const lk *exp) {
    ir_dimlink l[IR_MAX_DIMLINKS];
    const ir_node *nd = &g->nodes[ni];
    int cnt = ir_node_dims(g, nd, l);
    bool ok = cnt == n;
    for (int i = 0; ok && i < n; i++) {
        int hits = 0;
        for (int j = 0; j < cnt; j++) hits += same_link(&l[j], &exp[i]);
        ok = hits == 1;
    }
    if (!ok) {
        print_error("%s '%s': %d links, expected %d:\n", ir_op_name(nd->op), nd->name, cnt, n);
        print_links(l, cnt);
        fail_msg("wrong links for %s", nd->name);
    }
}
#define EXPECT(g, ni, ...)                                                                         \
    expect_links(g, ni, (int)(sizeof((lk[]){__VA_ARGS__}) / sizeof(lk)), (lk[]){__VA_ARGS__})
#define EXPECT_NONE(g, ni) expect_links(g, ni, 0, NULL)

/* A float32 graph input (or, with an int dtype, an index input). */
static int in_val(ir_graph *g, const char *name, ir_dtype t, ir_shape s) {
    int v = ir_graph_add_value(g, name, t, &s);
    ir_graph_add_input(g, v);
    return v;
}
static int fin(ir_graph *g, const char *name, ir_shape s) {
    return in_val(g, name, IR_F32, s);
}

/* A constant of n values of dtype t (int64 or float32 or bool), shape [n] or scalar (n < 0: one
 * value, rank 0). */
static int const_val(ir_graph *g, const char *name, ir_dtype t, int n, const void *data) {
    ir_shape s = n < 0 ? (ir_shape){0} : ir_shape_make(1, (int64_t[]){n});
    int cnt = n < 0 ? 1 : n;
    int v = ir_graph_add_value(g, name, t, &s);
    size_t bytes = (size_t)cnt * ir_dtype_size(t);
    ir_blob *b = ir_blob_new(bytes ? bytes : 1);
    if (bytes) memcpy(ir_blob_data(b), data, bytes);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}
static int ints(ir_graph *g, const char *name, int n, const int64_t *v) {
    return const_val(g, name, IR_I64, n, v);
}

/* One node with n_out outputs; returns its index. */
static int node(ir_graph *g, ir_op_kind op, int n_in, const int *in, int n_out, int n_attrs,
                const ir_attr *attrs) {
    int out[8];
    char name[32];
    snprintf(name, sizeof name, "n%d", g->n_nodes);
    return tu_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
}
#define NODE(g, op, n_out, attrs_n, attrs, ...)                                                    \
    node(g, op, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}, n_out,    \
         attrs_n, attrs)

/* ---------------------------------------------------------------- element-wise */

static void test_elementwise(void **state) {
    ir_graph *g = ir_graph_new();
    int a = fin(g, "a", TU_SHAPE(8, 1, 5)), b = fin(g, "b", TU_SHAPE(4, 1));
    /* [8,1,5] + [4,1] -> [8,4,5]: the size-1 dims are broadcast, not linked */
    int ni = NODE(g, IR_OP_Add, 1, 0, NULL, a, b);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), K(1, 0, 0, 1));
    int c = in_val(g, "c", IR_BOOL, TU_SHAPE(5));
    ni = NODE(g, IR_OP_Where, 1, 0, NULL, c, a, b);
    EXPECT(g, ni, K(0, 0, 0, 2), K(1, 0, 0, 0), K(1, 2, 0, 2), K(2, 0, 0, 1));
    int x = fin(g, "x", TU_SHAPE(2, 3));
    ni = NODE(g, IR_OP_Relu, 1, 0, NULL, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    float lo = 0, hi = 6;
    int vlo = const_val(g, "lo", IR_F32, -1, &lo), vhi = const_val(g, "hi", IR_F32, -1, &hi);
    ni = NODE(g, IR_OP_Clip, 1, 0, NULL, x, vlo, vhi);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    /* CastLike's second input only names a dtype: never linked, even when shaped like X */
    int t = in_val(g, "t", IR_F64, TU_SHAPE(2, 3));
    ni = NODE(g, IR_OP_CastLike, 1, 0, NULL, x, t);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    /* variadic Sum: every input */
    ni = NODE(g, IR_OP_Sum, 1, 0, NULL, x, x, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 0), K(1, 1, 0, 1), K(2, 0, 0, 0),
           K(2, 1, 0, 1));
    /* the backward ops of element-wise activations and Dropout */
    int dy = fin(g, "dy", TU_SHAPE(2, 3));
    ir_attr op = tu_attr_str("op", "Relu");
    ni = NODE(g, IR_OP_UnaryGrad, 1, 1, &op, dy, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 0), K(1, 1, 0, 1));
    int m = in_val(g, "m", IR_BOOL, TU_SHAPE(2, 3));
    ni = NODE(g, IR_OP_DropoutGrad, 1, 0, NULL, dy, m);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 0), K(1, 1, 0, 1));
    ni = NODE(g, IR_OP_Store, 1, 0, NULL, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_graph_free(g);
}

static void test_dropout(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(4, 6));
    /* inference: an identity, and its mask too */
    int ni = NODE(g, IR_OP_Dropout, 2, 0, NULL, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 0, 1, 0), K(0, 1, 1, 1));
    uint8_t yes = 1, no = 0;
    float half = 0.5f, zero = 0;
    int ty = const_val(g, "ty", IR_BOOL, -1, &yes), tn = const_val(g, "tn", IR_BOOL, -1, &no);
    int rh = const_val(g, "rh", IR_F32, -1, &half), rz = const_val(g, "rz", IR_F32, -1, &zero);
    ni = NODE(g, IR_OP_Dropout, 1, 0, NULL, x, rh, tn);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    /* training: the mask is drawn per flat index, which a part would renumber */
    ni = NODE(g, IR_OP_Dropout, 1, 0, NULL, x, rh, ty);
    EXPECT_NONE(g, ni);
    ni = NODE(g, IR_OP_Dropout, 1, 0, NULL, x, rz, ty);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    int tdyn = in_val(g, "tdyn", IR_BOOL, TU_SCALAR_SHAPE);
    ni = NODE(g, IR_OP_Dropout, 1, 0, NULL, x, rh, tdyn);
    EXPECT_NONE(g, ni);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- MatMul, Gemm */

static void test_matmul(void **state) {
    ir_graph *g = ir_graph_new();
    /* [2,3,4] x [4,5]: batch and M from A, N from B, K a sum from both */
    int a = fin(g, "a", TU_SHAPE(2, 3, 4)), b = fin(g, "b", TU_SHAPE(4, 5));
    int ni = NODE(g, IR_OP_MatMul, 1, 0, NULL, a, b);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 1, 0, 2), R(0, 2, 1, true), R(1, 0, 1, true));
    /* batch broadcasting: [2,1,3,4] x [5,4,6] -> [2,5,3,6]; A's size-1 batch dim is shared */
    int a4 = fin(g, "a4", TU_SHAPE(2, 1, 3, 4)), b3 = fin(g, "b3", TU_SHAPE(5, 4, 6));
    ni = NODE(g, IR_OP_MatMul, 1, 0, NULL, a4, b3);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 1), K(0, 2, 0, 2), K(1, 2, 0, 3), R(0, 3, 1, true),
           R(1, 1, 1, true));
    /* 1-D operands: no M (or no N) */
    int v4 = fin(g, "v4", TU_SHAPE(4)), m34 = fin(g, "m34", TU_SHAPE(3, 4));
    ni = NODE(g, IR_OP_MatMul, 1, 0, NULL, v4, b);
    EXPECT(g, ni, K(1, 1, 0, 0), R(0, 0, 1, true), R(1, 0, 1, true));
    ni = NODE(g, IR_OP_MatMul, 1, 0, NULL, m34, v4);
    EXPECT(g, ni, K(0, 0, 0, 0), R(0, 1, 1, true), R(1, 0, 1, true));
    ir_graph_free(g);
}

static void test_gemm(void **state) {
    ir_graph *g = ir_graph_new();
    int a = fin(g, "a", TU_SHAPE(4, 3)), b = fin(g, "b", TU_SHAPE(5, 4)),
        c = fin(g, "c", TU_SHAPE(5));
    ir_attr t[] = {tu_attr_int("transA", 1), tu_attr_int("transB", 1)};
    /* with C: M, N and C's N; K is not a sum of parts (each would add C) */
    int ni = NODE(g, IR_OP_Gemm, 1, 2, t, a, b, c);
    EXPECT(g, ni, K(0, 1, 0, 0), K(1, 0, 0, 1), K(2, 0, 0, 1));
    ni = NODE(g, IR_OP_Gemm, 1, 2, t, a, b);
    EXPECT(g, ni, K(0, 1, 0, 0), K(1, 0, 0, 1), R(0, 0, 1, true), R(1, 1, 1, true));
    ir_attr tb[] = {tu_attr_int("transB", 1), tu_attr_float("beta", 0)};
    int a2 = fin(g, "a2", TU_SHAPE(3, 4)), c2 = fin(g, "c2", TU_SHAPE(3, 5));
    ni = NODE(g, IR_OP_Gemm, 1, 2, tb, a2, b, c2); /* beta 0: C is ignored */
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 1), R(0, 1, 1, true), R(1, 1, 1, true));
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- convolutions and pools */

static void test_conv(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 8, 5, 5));
    /* pointwise, group 1, no bias: everything but the kernel window */
    int w1 = fin(g, "w1", TU_SHAPE(16, 8, 1, 1));
    int ni = NODE(g, IR_OP_Conv, 1, 0, NULL, x, w1);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 1), K(0, 2, 0, 2), K(0, 3, 0, 3), R(0, 1, 1, true),
           R(1, 1, 1, true));
    /* 3x3 with pads and a bias: the halo cuts the spatial dims, the bias the channel sum */
    int w3 = fin(g, "w3", TU_SHAPE(16, 8, 3, 3)), b = fin(g, "b", TU_SHAPE(16));
    int64_t p1[] = {1, 1, 1, 1};
    ir_attr pads = tu_attr_ints("pads", 4, p1);
    ni = NODE(g, IR_OP_Conv, 1, 1, &pads, x, w3, b);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 1), K(2, 0, 0, 1));
    /* a pointwise conv with stride 2 keeps no spatial dim */
    int64_t s2[] = {2, 2};
    ir_attr strides = tu_attr_ints("strides", 2, s2);
    ni = NODE(g, IR_OP_Conv, 1, 1, &strides, x, w1);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 1), R(0, 1, 1, true), R(1, 1, 1, true));
    /* depthwise: channel c reads channel c */
    int wd = fin(g, "wd", TU_SHAPE(8, 1, 3, 3));
    ir_attr dw[] = {tu_attr_int("group", 8), pads};
    ni = NODE(g, IR_OP_Conv, 1, 2, dw, x, wd);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 1));
    /* two groups: only the batch */
    int wg = fin(g, "wg", TU_SHAPE(16, 4, 3, 3));
    ir_attr g2[] = {tu_attr_int("group", 2), pads};
    ni = NODE(g, IR_OP_Conv, 1, 2, g2, x, wg);
    EXPECT(g, ni, K(0, 0, 0, 0));
    /* ConvTranspose: W is [C_in, C_out, k...] */
    int wt = fin(g, "wt", TU_SHAPE(8, 4, 3, 3));
    ni = NODE(g, IR_OP_ConvTranspose, 1, 0, NULL, x, wt);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 1, 0, 1), R(0, 1, 1, true), R(1, 0, 1, true));
    ir_graph_free(g);
}

static void test_conv_grad_weight(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 8, 5, 5)), dy = fin(g, "dy", TU_SHAPE(2, 16, 5, 5));
    int64_t k3[] = {3, 3}, k1[] = {1, 1}, p1[] = {1, 1, 1, 1};
    ir_attr a3[] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("pads", 4, p1)};
    /* dW sums over the batch (the training-graph fission of MAGIS figure 5) */
    int ni = NODE(g, IR_OP_ConvGradWeight, 1, 2, a3, x, dy);
    EXPECT(g, ni, R(0, 0, 1, true), R(1, 0, 1, true), K(1, 1, 0, 0), K(0, 1, 0, 1));
    /* pointwise: and over each spatial dim */
    ir_attr a1 = tu_attr_ints("kernel_shape", 2, k1);
    ni = NODE(g, IR_OP_ConvGradWeight, 1, 1, &a1, x, dy);
    EXPECT(g, ni, R(0, 0, 1, true), R(1, 0, 1, true), K(1, 1, 0, 0), K(0, 1, 0, 1),
           R(0, 2, 2, true), R(1, 2, 2, true), R(0, 3, 3, true), R(1, 3, 3, true));
    ir_graph_free(g);
}

static void test_pools(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 8, 6, 6));
    int64_t k3[] = {3, 3}, s2[] = {2, 2}, k1[] = {1, 1};
    ir_attr mp[] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("strides", 2, s2)};
    int ni = NODE(g, IR_OP_MaxPool, 1, 2, mp, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_attr one = tu_attr_ints("kernel_shape", 2, k1);
    ni = NODE(g, IR_OP_AveragePool, 1, 1, &one, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 2, 0, 2), K(0, 3, 0, 3));
    /* Indices are flat offsets into the whole X: no links at all */
    ni = NODE(g, IR_OP_MaxPool, 2, 2, mp, x);
    EXPECT_NONE(g, ni);
    ni = NODE(g, IR_OP_GlobalAveragePool, 1, 0, NULL, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), R(0, 2, 1, false), R(0, 3, 2, false));
    /* the backward: planes of dY (and X) to planes of dX */
    int dy = fin(g, "dy", TU_SHAPE(2, 8, 2, 2));
    ni = NODE(g, IR_OP_MaxPoolGrad, 1, 2, mp, dy, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 0), K(1, 1, 0, 1));
    int64_t xs[] = {2, 8, 6, 6};
    ir_attr ap[] = {mp[0], mp[1], tu_attr_ints("shape", 4, xs)};
    ni = NODE(g, IR_OP_AveragePoolGrad, 1, 3, ap, dy);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- reshapes and layout */

static void test_reshape(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(8, 128, 768));
    /* the Q projection split into heads: batch and sequence survive, 768 becomes 12 x 64 and
     * links to the outer factor 12 (n parts of 768 are n parts of 12 heads) */
    int64_t heads[] = {8, 128, 12, 64}, flat[] = {1024, 768};
    int ni = NODE(g, IR_OP_Reshape, 1, 0, NULL, x, ints(g, "s1", 4, heads));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 2, 0, 2), OI(0, 2, 0, 3));
    /* batch and sequence merged: the hidden dim survives, the batch is the outer factor of
     * 1024 (n parts of the batch are n blocks of rows), the sequence its inner factor (n parts
     * of it are n strided sets of rows) */
    ni = NODE(g, IR_OP_Reshape, 1, 0, NULL, x, ints(g, "s2", 2, flat));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1), IO(0, 1, 0, 0));
    /* equal sizes at other places are other elements: [4,6] -> [6,4] links only the outer
     * dims (4 and 6 both start at element 0: n blocks of rows either way; 4 and 6 are factors
     * of no common radix, so nothing else), and of [6,2,6] -> [2,6,6] the outer dims, the
     * last 6 (after 12 elements on both sides), and the factors 3 (the first 6's inner, the
     * second's outer) and 2 (the second 6's inner) */
    int64_t t64[] = {6, 4}, t266[] = {2, 6, 6};
    int x46 = fin(g, "x46", TU_SHAPE(4, 6)), x626 = fin(g, "x626", TU_SHAPE(6, 2, 6));
    ni = NODE(g, IR_OP_Reshape, 1, 0, NULL, x46, ints(g, "s4", 2, t64));
    EXPECT(g, ni, K(0, 0, 0, 0));
    ni = NODE(g, IR_OP_Reshape, 1, 0, NULL, x626, ints(g, "s5", 3, t266));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), OI(0, 0, 0, 1), IO(0, 1, 0, 1));
    /* size-1 dims pair up where their runs are alike */
    int x1 = fin(g, "x1", TU_SHAPE(1, 128, 768));
    int64_t h1[] = {1, 128, 12, 64}, ax0[] = {0};
    ni = NODE(g, IR_OP_Reshape, 1, 0, NULL, x1, ints(g, "s3", 4, h1));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 2, 0, 2), OI(0, 2, 0, 3));
    ni = NODE(g, IR_OP_Unsqueeze, 1, 0, NULL, x1, ints(g, "a0", 1, ax0));
    EXPECT(g, ni, K(0, 1, 0, 2), K(0, 2, 0, 3));
    int y = fin(g, "y", TU_SHAPE(4, 1, 6));
    int64_t ax1[] = {1};
    ni = NODE(g, IR_OP_Squeeze, 1, 0, NULL, y, ints(g, "a1", 1, ax1));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1));
    int z = fin(g, "z", TU_SHAPE(4, 3, 5));
    ni = NODE(g, IR_OP_Flatten, 1, 0, NULL, z); /* axis 1: [4, 15], 3 and 5 the factors of 15 */
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), IO(0, 2, 0, 1));
    ir_attr fa = tu_attr_int("axis", 2);
    ni = NODE(g, IR_OP_Flatten, 1, 1, &fa, z); /* [12, 5], 4 and 3 the factors of 12 */
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1), IO(0, 1, 0, 0));
    ir_graph_free(g);
}

static void test_layout(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 3, 4, 5));
    int64_t perm[] = {0, 2, 1, 3};
    ir_attr pa = tu_attr_ints("perm", 4, perm);
    int ni = NODE(g, IR_OP_Transpose, 1, 1, &pa, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1), K(0, 1, 0, 2), K(0, 3, 0, 3));
    int y = fin(g, "y", TU_SHAPE(2, 7, 4, 5));
    ir_attr ax1 = tu_attr_int("axis", 1);
    ni = NODE(g, IR_OP_Concat, 1, 1, &ax1, x, y);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), K(0, 3, 0, 3), K(1, 0, 0, 0), K(1, 2, 0, 2),
           K(1, 3, 0, 3));
    int64_t sp[] = {1, 2};
    ni = NODE(g, IR_OP_Split, 2, 1, &ax1, x, ints(g, "sp", 2, sp));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), K(0, 3, 0, 3), K(0, 0, 1, 0), K(0, 2, 1, 2),
           K(0, 3, 1, 3));
    /* Slice: dim 1 cut to [1, 3), dim 3 reversed in full, dim 2 taken whole by a slice */
    int64_t st[] = {1, 0, -1}, en[] = {3, 4, -6}, ax[] = {1, 2, 3}, stp[] = {1, 1, -1};
    ni = NODE(g, IR_OP_Slice, 1, 0, NULL, x, ints(g, "st", 3, st), ints(g, "en", 3, en),
              ints(g, "ax", 3, ax), ints(g, "stp", 3, stp));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2));
    /* Pad: dims 0 and 3 untouched; -1 + 1 on dim 2 shifts it */
    int64_t pads[] = {0, 1, -1, 0, 0, 0, 1, 0};
    ni = NODE(g, IR_OP_Pad, 1, 0, NULL, x, ints(g, "pads", 8, pads));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 3, 0, 3));
    /* Expand [3,1] to [2,3,4]; Tile [2,3,4,5] by [1,2,1,1] */
    int e = fin(g, "e", TU_SHAPE(3, 1));
    int64_t es[] = {2, 3, 4}, rep[] = {1, 2, 1, 1};
    ni = NODE(g, IR_OP_Expand, 1, 0, NULL, e, ints(g, "es", 3, es));
    EXPECT(g, ni, K(0, 0, 0, 1));
    ni = NODE(g, IR_OP_Tile, 1, 0, NULL, x, ints(g, "rep", 4, rep));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), K(0, 3, 0, 3));
    ir_graph_free(g);
}

static void test_resize(void **state) {
    ir_graph *g = ir_graph_new();
    g->opset = 13;
    int x = fin(g, "x", TU_SHAPE(2, 3, 4, 4));
    float sc[] = {1, 1, 2, 2}, sc1[] = {1, 1, 1, 2};
    int64_t sz[] = {2, 3, 8, 6};
    int scales = const_val(g, "sc", IR_F32, 4, sc), scales1 = const_val(g, "sc1", IR_F32, 4, sc1);
    int sizes = ints(g, "sz", 4, sz);
    /* batch and channels map identically; the interpolated dims do not */
    int ni = NODE(g, IR_OP_Resize, 1, 0, NULL, x, -1, scales);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_attr lin = tu_attr_str("mode", "linear");
    ni = NODE(g, IR_OP_Resize, 1, 1, &lin, x, -1, scales1); /* dim 2 has scale 1 */
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 2, 0, 2));
    /* a scale of 1.1 keeps 3 channels (floor 3.3) but interpolates between them */
    float sc11[] = {1, 1.1f, 1, 2};
    ni = NODE(g, IR_OP_Resize, 1, 1, &lin, x, -1, const_val(g, "sc11", IR_F32, 4, sc11));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2));
    ni = NODE(g, IR_OP_Resize, 1, 0, NULL, x, -1, -1, sizes);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    /* tf_half_pixel_for_nn reads x + 0.5 even at scale 1: no dim is provably the identity */
    ir_attr tf = tu_attr_str("coordinate_transformation_mode", "tf_half_pixel_for_nn");
    ni = NODE(g, IR_OP_Resize, 1, 1, &tf, x, -1, scales);
    EXPECT_NONE(g, ni);
    /* the backward, from dY [2,3,8,8] to dX of X's shape */
    int dy = fin(g, "dy", TU_SHAPE(2, 3, 8, 8));
    int64_t xs[] = {2, 3, 4, 4};
    ir_attr rg = tu_attr_ints("shape", 4, xs);
    ni = NODE(g, IR_OP_ResizeGrad, 1, 1, &rg, dy, -1, scales);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_graph_free(g);
}

static void test_index(void **state) {
    ir_graph *g = ir_graph_new();
    int emb = fin(g, "emb", TU_SHAPE(10, 4)), ids = in_val(g, "ids", IR_I64, TU_SHAPE(2, 3));
    /* an embedding lookup: the indices' dims take the axis's place */
    int ni = NODE(g, IR_OP_Gather, 1, 0, NULL, emb, ids);
    EXPECT(g, ni, K(0, 1, 0, 2), K(1, 0, 0, 0), K(1, 1, 0, 1));
    /* its gradient sums the gathered rows: each index dim is a summed reduce axis */
    int dy = fin(g, "dy", TU_SHAPE(2, 3, 4));
    int64_t shape[] = {10, 4};
    ir_attr sa = tu_attr_ints("shape", 2, shape);
    ni = NODE(g, IR_OP_GatherGrad, 1, 1, &sa, dy, ids);
    EXPECT(g, ni, K(0, 2, 0, 1), R(0, 0, 1, true), R(1, 0, 1, true), R(0, 1, 2, true),
           R(1, 1, 2, true));
    /* GatherElements along axis 1; dim 0 of the data is longer than the indices' */
    int d = fin(g, "d", TU_SHAPE(3, 5)), ie = in_val(g, "ie", IR_I64, TU_SHAPE(3, 2));
    int d2 = fin(g, "d2", TU_SHAPE(4, 5));
    ir_attr a1 = tu_attr_int("axis", 1);
    ni = NODE(g, IR_OP_GatherElements, 1, 1, &a1, d, ie);
    EXPECT(g, ni, K(0, 0, 0, 0), K(1, 0, 0, 0), K(1, 1, 0, 1));
    ni = NODE(g, IR_OP_GatherElements, 1, 1, &a1, d2, ie);
    EXPECT(g, ni, K(1, 1, 0, 1));
    /* ScatterND into [4,5,6] with indices [2,1]: only the trailing dims are untouched */
    int sx = fin(g, "sx", TU_SHAPE(4, 5, 6)), si = in_val(g, "si", IR_I64, TU_SHAPE(2, 1));
    int su = fin(g, "su", TU_SHAPE(2, 5, 6));
    ni = NODE(g, IR_OP_ScatterND, 1, 0, NULL, sx, si, su);
    EXPECT(g, ni, K(0, 1, 0, 1), K(0, 2, 0, 2), K(2, 1, 0, 1), K(2, 2, 0, 2));
    int tx = fin(g, "tx", TU_SHAPE(2, 3, 4, 4));
    ni = NODE(g, IR_OP_Trilu, 1, 0, NULL, tx);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- normalizations, reductions */

static void test_softmax(void **state) {
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    int x = fin(g, "x", TU_SHAPE(2, 3, 4));
    ir_attr a1 = tu_attr_int("axis", 1);
    int ni = NODE(g, IR_OP_Softmax, 1, 1, &a1, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2));
    ni = NODE(g, IR_OP_LogSoftmax, 1, 0, NULL, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1));
    int dy = fin(g, "dy", TU_SHAPE(2, 3, 4));
    ni = NODE(g, IR_OP_SoftmaxGrad, 1, 1, &a1, dy, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), K(1, 0, 0, 0), K(1, 2, 0, 2));
    /* before opset 13 the input is coerced to 2-D at the axis: everything from it is the line */
    g->opset = 11;
    ni = NODE(g, IR_OP_Softmax, 1, 1, &a1, x);
    EXPECT(g, ni, K(0, 0, 0, 0));
    ir_graph_free(g);
}

static void test_reduce(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 3, 4));
    int64_t ax1[] = {1}, ax12[] = {1, 2};
    ir_attr a[] = {tu_attr_ints("axes", 1, ax1), tu_attr_int("keepdims", 1)};
    int ni = NODE(g, IR_OP_ReduceMean, 1, 2, a, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2), R(0, 1, 1, false));
    a[1] = tu_attr_int("keepdims", 0);
    ni = NODE(g, IR_OP_ReduceMean, 1, 2, a, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1), R(0, 1, 1, false));
    ni = NODE(g, IR_OP_ReduceMax, 1, 2, a, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 1), R(0, 1, 1, false));
    /* ReduceSum (axes as an input): the reduced dims are sums, one axis each */
    ni = NODE(g, IR_OP_ReduceSum, 1, 0, NULL, x, ints(g, "ax", 2, ax12));
    EXPECT(g, ni, K(0, 0, 0, 0), R(0, 1, 1, true), R(0, 2, 2, true));
    ir_attr am[] = {tu_attr_int("axis", 2), tu_attr_int("keepdims", 0)};
    ni = NODE(g, IR_OP_ArgMax, 1, 2, am, x);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), R(0, 2, 1, false));
    int64_t one = 1;
    ni = NODE(g, IR_OP_CumSum, 1, 0, NULL, x, const_val(g, "cax", IR_I64, -1, &one));
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 2, 0, 2));
    /* ReduceGrad of a ReduceMax over axis 1 without kept dims */
    int dy = fin(g, "dy", TU_SHAPE(2, 4)), y = fin(g, "y", TU_SHAPE(2, 4));
    ir_attr rg[] = {tu_attr_str("mode", "max"), tu_attr_ints("axes", 1, ax1)};
    ni = NODE(g, IR_OP_ReduceGrad, 1, 2, rg, dy, x, y);
    EXPECT(g, ni, K(1, 0, 0, 0), K(1, 2, 0, 2), K(0, 0, 0, 0), K(0, 1, 0, 2), K(2, 0, 0, 0),
           K(2, 1, 0, 2));
    ir_graph_free(g);
}

static void test_norms(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 3, 4)), s = fin(g, "s", TU_SHAPE(4)),
        b = fin(g, "b", TU_SHAPE(4));
    /* LayerNormalization: the leading dims to Y, Mean and InvStdDev; the row gets nothing */
    int ni = NODE(g, IR_OP_LayerNormalization, 3, 0, NULL, x, s, b);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 0, 1, 0), K(0, 1, 1, 1), K(0, 0, 2, 0),
           K(0, 1, 2, 1));
    int mean = g->nodes[ni].out[1], inv = g->nodes[ni].out[2];
    int dy = fin(g, "dy", TU_SHAPE(2, 3, 4));
    /* LayerNormGrad: the leading dims to dX and, as sums, to dScale/dBias */
    ni = NODE(g, IR_OP_LayerNormGrad, 3, 0, NULL, dy, x, s, mean, inv);
    lk want[24];
    int nw = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 5; i++) {
            if (i == 2) continue;
            want[nw++] = K(i, d, 0, d);
            want[nw++] = R(i, d, d + 1, true);
        }
    expect_links(g, ni, nw, want);
    /* BatchNormalization, inference: per element; every per-channel input on C */
    int xb = fin(g, "xb", TU_SHAPE(2, 3, 5, 5));
    int c[4];
    for (int i = 0; i < 4; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "c%d", i);
        c[i] = fin(g, nm, TU_SHAPE(3));
    }
    ni = NODE(g, IR_OP_BatchNormalization, 1, 0, NULL, xb, c[0], c[1], c[2], c[3]);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(0, 2, 0, 2), K(0, 3, 0, 3), K(1, 0, 0, 1),
           K(2, 0, 0, 1), K(3, 0, 0, 1), K(4, 0, 0, 1));
    /* training mode: statistics over the batch and the planes; only C survives */
    ir_attr tm = tu_attr_int("training_mode", 1);
    ni = NODE(g, IR_OP_BatchNormalization, 3, 1, &tm, xb, c[0], c[1], c[2], c[3]);
    lk bt[15];
    nw = 0;
    for (int k = 0; k < 3; k++) {
        bt[nw++] = K(0, 1, k, k == 0 ? 1 : 0);
        for (int i = 1; i < 5; i++) bt[nw++] = K(i, 0, k, k == 0 ? 1 : 0);
    }
    expect_links(g, ni, nw, bt);
    int dyb = fin(g, "dyb", TU_SHAPE(2, 3, 5, 5));
    ni = NODE(g, IR_OP_BatchNormGrad, 3, 1, &tm, dyb, xb, c[0]);
    nw = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) bt[nw++] = K(i, i < 2 ? 1 : 0, k, k == 0 ? 1 : 0);
    expect_links(g, ni, nw, bt);
    /* BatchNormGrad with running statistics: per element, so N and the planes link to dX and
     * are sums for dScale/dBias */
    ir_attr tm0 = tu_attr_int("training_mode", 0);
    ni = NODE(g, IR_OP_BatchNormGrad, 3, 1, &tm0, dyb, xb, c[0], c[2], c[3]);
    lk bi[40];
    nw = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 5; i++) bi[nw++] = K(i, i < 2 ? 1 : 0, k, k == 0 ? 1 : 0);
    for (int d = 0, ax = 1; d < 4; d++) {
        if (d == 1) continue;
        for (int i = 0; i < 2; i++) {
            bi[nw++] = K(i, d, 0, d);
            bi[nw++] = R(i, d, ax, true);
        }
        ax++;
    }
    expect_links(g, ni, nw, bi);
    ni = NODE(g, IR_OP_InstanceNormGrad, 3, 0, NULL, dyb, xb, c[0]);
    nw = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++) bi[nw++] = K(i, i < 2 ? 1 : 0, k, k == 0 ? 1 : 0);
    for (int i = 0; i < 2; i++) {
        bi[nw++] = K(i, 0, 0, 0);
        bi[nw++] = R(i, 0, 1, true);
    }
    expect_links(g, ni, nw, bi);
    /* InstanceNormalization: per (n, c) plane */
    ni = NODE(g, IR_OP_InstanceNormalization, 1, 0, NULL, xb, c[0], c[1]);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 1), K(2, 0, 0, 1));
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- losses and updates */

static void test_train_ops(void **state) {
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(4, 10)), lab = in_val(g, "lab", IR_I64, TU_SHAPE(4));
    /* the loss is a mean over the batch, not a sum; log-probabilities keep the batch */
    int ni = NODE(g, IR_OP_SoftmaxCrossEntropy, 2, 0, NULL, x, lab);
    EXPECT(g, ni, K(0, 0, 1, 0), K(1, 0, 1, 0), R(0, 0, 1, false), R(1, 0, 1, false));
    int lp = g->nodes[ni].out[1];
    float one = 1;
    int dl = const_val(g, "dl", IR_F32, -1, &one);
    /* its gradient divides by the count of the whole batch's labels: no links */
    ni = NODE(g, IR_OP_SoftmaxCrossEntropyGrad, 1, 0, NULL, dl, lp, lab);
    EXPECT_NONE(g, ni);
    /* reduction "sum" (what ir_build_training emits): the loss is a sum over the batch, and the
     * gradient, scaled by dLoss alone, is element-wise in the log-probabilities and per row in
     * the labels */
    ir_attr sum = tu_attr_str("reduction", "sum");
    ni = NODE(g, IR_OP_SoftmaxCrossEntropy, 2, 1, &sum, x, lab);
    EXPECT(g, ni, K(0, 0, 1, 0), K(1, 0, 1, 0), R(0, 0, 1, true), R(1, 0, 1, true));
    ni = NODE(g, IR_OP_SoftmaxCrossEntropyGrad, 1, 1, &sum, dl, g->nodes[ni].out[1], lab);
    EXPECT(g, ni, K(1, 0, 0, 0), K(2, 0, 0, 0), K(1, 1, 0, 1));
    /* Adam: each new tensor from what it reads */
    int p = fin(g, "p", TU_SHAPE(3, 2)), m = fin(g, "m", TU_SHAPE(3, 2)),
        v = fin(g, "v", TU_SHAPE(3, 2));
    int gr = fin(g, "gr", TU_SHAPE(3, 2));
    ni = NODE(g, IR_OP_AdamUpdate, 3, 0, NULL, p, m, v, gr);
    lk want[16];
    int nw = 0;
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 4; i++) want[nw++] = K(i, d, 0, d);
        want[nw++] = K(1, d, 1, d);
        want[nw++] = K(3, d, 1, d);
        want[nw++] = K(2, d, 2, d);
        want[nw++] = K(3, d, 2, d);
    }
    expect_links(g, ni, nw, want);
    ni = NODE(g, IR_OP_SGDUpdate, 1, 0, NULL, p, gr);
    EXPECT(g, ni, K(0, 0, 0, 0), K(0, 1, 0, 1), K(1, 0, 0, 0), K(1, 1, 0, 1));
    ir_graph_free(g);
}

/* A node whose links do not all fit gets none: a partial set would leave an input that varies
 * along a split dim unlinked, and so shared whole. Concat of rank-4 inputs on axis 1 has 3 links
 * per input. */
static void test_overflow(void **state) {
    enum { FIT = IR_MAX_DIMLINKS / 3 };
    assert_true(FIT + 1 <= INT8_MAX);
    ir_graph *g = ir_graph_new();
    int x = fin(g, "x", TU_SHAPE(2, 1, 3, 3)), in[INT8_MAX + 2];
    for (int i = 0; i < INT8_MAX + 2; i++) in[i] = x;
    ir_attr ax = tu_attr_int("axis", 1);
    ir_dimlink l[IR_MAX_DIMLINKS];
    int ni = node(g, IR_OP_Concat, FIT, in, 1, 1, &ax);
    assert_int_equal(ir_node_dims(g, &g->nodes[ni], l), 3 * FIT);
    ni = node(g, IR_OP_Concat, FIT + 1, in, 1, 1, &ax);
    assert_int_equal(ir_node_dims(g, &g->nodes[ni], l), 0);
    /* an input index beyond int8 cannot be named either */
    int y = fin(g, "y", TU_SHAPE(2, 1));
    for (int i = 0; i < INT8_MAX + 2; i++) in[i] = y;
    ni = node(g, IR_OP_Concat, INT8_MAX + 2, in, 1, 1, &ax);
    assert_int_equal(ir_node_dims(g, &g->nodes[ni], l), 0);
    ni = node(g, IR_OP_Concat, INT8_MAX + 1, in, 1, 1, &ax);
    assert_int_equal(ir_node_dims(g, &g->nodes[ni], l), INT8_MAX + 1);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- the op table */

/* Ops whose outputs' dims are not their inputs' dims, or whose parts cannot be computed apart
 * (the random draws: a part would draw other numbers, ops-random.c). */
static const char *const no_dims[] = {
    "Shape",
    "Size",
    "Constant",
    "ConstantOfShape",
    "Range",
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
};

static void test_every_op_has_dims(void **state) {
    for (int k = 0; k < IR_OP_COUNT; k++) {
        const ir_op_def *def = ir_op_get((ir_op_kind)k);
        assert_non_null(def);
        /* the fission plumbing (ops-fission.c) is what fission emits, not what it splits */
        if (strcmp(def->domain, "magpie") == 0 && strncmp(def->name, "Fission", 7) == 0) continue;
        bool listed = false;
        for (size_t i = 0; i < sizeof no_dims / sizeof *no_dims; i++)
            listed = listed || strcmp(no_dims[i], def->name) == 0;
        if (listed && def->dims) fail_msg("%s is listed without dims but has them", def->name);
        if (!listed && !def->dims) fail_msg("%s has no dims and is not listed", def->name);
    }
}

/* ---------------------------------------------------------------- components on real models */

/* A union-find over the vertices of D(G): (value, dim) for every value, (node, reduce axis). */
typedef struct dgraph {
    const ir_graph *g;
    int *voff, *roff, *parent, n;
} dgraph;

static int uf_find(int *p, int x) {
    while (p[x] != x) x = p[x] = p[p[x]];
    return x;
}

static dgraph dg_build(const ir_graph *g) {
    dgraph d = {.g = g};
    d.voff = calloc((size_t)g->n_values + 1, sizeof(int));
    d.roff = calloc((size_t)g->n_nodes + 1, sizeof(int));
    for (int v = 0; v < g->n_values; v++) d.voff[v + 1] = d.voff[v] + g->values[v].shape.rank;
    d.roff[0] = d.voff[g->n_values];
    ir_dimlink l[IR_MAX_DIMLINKS];
    for (int i = 0; i < g->n_nodes; i++) {
        int cnt = ir_node_dims(g, &g->nodes[i], l), r = 0;
        for (int j = 0; j < cnt; j++) r = l[j].out_dim < -r ? -l[j].out_dim : r;
        d.roff[i + 1] = d.roff[i] + r;
    }
    d.n = d.roff[g->n_nodes];
    d.parent = malloc(sizeof(int) * (size_t)(d.n ? d.n : 1));
    for (int x = 0; x < d.n; x++) d.parent[x] = x;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        int cnt = ir_node_dims(g, nd, l);
        for (int j = 0; j < cnt; j++) {
            if (nd->in[l[j].in] < 0) continue;
            int a = d.voff[nd->in[l[j].in]] + l[j].in_dim;
            int b = l[j].out_dim >= 0 ? d.voff[nd->out[l[j].out]] + l[j].out_dim
                                      : d.roff[i] - l[j].out_dim - 1;
            a = uf_find(d.parent, a);
            b = uf_find(d.parent, b);
            d.parent[a < b ? b : a] = a < b ? a : b;
        }
    }
    return d;
}

static void dg_free(dgraph *d) {
    free(d->voff);
    free(d->roff);
    free(d->parent);
}

static int dg_dim(dgraph *d, int v, int dim) {
    IR_ASSERT(dim < d->g->values[v].shape.rank);
    return uf_find(d->parent, d->voff[v] + dim);
}
/* The component of reduce axis ax (1-based) of node i, -1 when it has none. */
static int dg_reduce(dgraph *d, int i, int ax) {
    if (d->roff[i] + ax - 1 >= d->roff[i + 1]) return -1;
    return uf_find(d->parent, d->roff[i] + ax - 1);
}

/* Every link of every node joins dims of equal size (reduce axes: every dim linked to one axis
 * has one size) and names dims that exist. */
static void check_sizes(const ir_graph *g, const char *what) {
    ir_dimlink l[IR_MAX_DIMLINKS];
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        int cnt = ir_node_dims(g, nd, l);
        int64_t red[IR_MAX_DIMLINKS + 1];
        for (int j = 0; j <= IR_MAX_DIMLINKS; j++) red[j] = -1;
        for (int j = 0; j < cnt; j++) {
            if (l[j].in < 0 || l[j].in >= nd->n_in || nd->in[l[j].in] < 0)
                fail_msg("%s: %s: link %d names input %d", what, nd->name, j, l[j].in);
            const ir_value *x = &g->values[nd->in[l[j].in]];
            if (l[j].in_dim < 0 || l[j].in_dim >= x->shape.rank)
                fail_msg("%s: %s: link %d names dim %d of a rank-%d input", what, nd->name, j,
                         l[j].in_dim, x->shape.rank);
            int64_t sz = x->shape.dims[l[j].in_dim];
            if (l[j].out_dim < 0) {
                int ax = -l[j].out_dim;
                if (ax > IR_MAX_DIMLINKS) fail_msg("%s: %s: reduce axis %d", what, nd->name, ax);
                if (red[ax] >= 0 && red[ax] != sz)
                    fail_msg("%s: %s: reduce axis %d joins sizes %lld and %lld", what, nd->name, ax,
                             (long long)red[ax], (long long)sz);
                red[ax] = sz;
                continue;
            }
            if (l[j].out < 0 || l[j].out >= nd->n_out || nd->out[l[j].out] < 0)
                fail_msg("%s: %s: link %d names output %d", what, nd->name, j, l[j].out);
            const ir_value *y = &g->values[nd->out[l[j].out]];
            /* a regrouping links the outer dims of a merged group, of different sizes */
            bool regroup = nd->op == IR_OP_Reshape || nd->op == IR_OP_Flatten ||
                           nd->op == IR_OP_Squeeze || nd->op == IR_OP_Unsqueeze;
            if (l[j].out_dim >= y->shape.rank || (y->shape.dims[l[j].out_dim] != sz && !regroup))
                fail_msg("%s: %s (%s): input %d dim %d (size %lld) linked to output %d dim %d",
                         what, nd->name, ir_op_name(nd->op), l[j].in, l[j].in_dim, (long long)sz,
                         l[j].out, l[j].out_dim);
        }
    }
}

static ir_graph *load_model(const char *rel, int n_shapes, const char *const *names,
                            const ir_shape *shapes) {
    char p[1024];
    ir_import_opts io = {.n_shapes = n_shapes, .shape_names = names, .shape_values = shapes};
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(tu_src_path(rel, p, sizeof p), &io, &st, &d);
    if (!g) fail_msg("%s: %s", rel, d.msg);
    return g;
}

/* A fixture as it is, or at batch 3 when its batch dim is the symbolic "batch". */
static ir_graph *load_fixture(const char *rel) {
    char p[1024];
    ir_import_opts io = {0};
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(tu_src_path(rel, p, sizeof p), &io, &st, &d);
    if (g) return g;
    const char *names[] = {"batch"};
    const ir_shape three[] = {TU_SHAPE(3)};
    return load_model(rel, 1, names, three);
}

static ir_graph *training_graph(const ir_graph *fwd, const char *what) {
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *tg = ir_build_training(fwd, &(ir_train_opts){.loss = IR_LOSS_SUM}, &st, &d);
    if (!tg) fail_msg("%s: ir_build_training: %s", what, d.msg);
    return tg;
}

/* The ResNet's training graph (torchvision ResNet at batch 5, BatchNorm folded into the convs
 * by the eval export): the batch of the data input is the batch of every tensor that has one
 * (every value of rank >= 2 whose first dim is 5: no channel count or class count is 5), and
 * every weight gradient sums over it. */
static void test_resnet_training_batch(void **state) {
    const char *names[] = {"input"};
    ir_shape shapes[] = {TU_SHAPE(5, 3, 64, 64)};
    ir_graph *fwd = load_model("tests/fixtures/numeric/resnet_small/model.onnx", 1, names, shapes);
    ir_graph *tg = training_graph(fwd, "resnet_small");
    check_sizes(tg, "resnet_small training");
    dgraph d = dg_build(tg);
    int x = tg->inputs[0];
    assert_int_equal(tg->values[x].shape.dims[0], 5);
    int batch = dg_dim(&d, x, 0), n_act = 0, n_gw = 0, n_gemm_gw = 0;
    for (int v = 0; v < tg->n_values; v++) {
        const ir_value *val = &tg->values[v];
        if (val->shape.rank < 2 || val->shape.dims[0] != 5) continue;
        if (dg_dim(&d, v, 0) != batch) fail_msg("'%s' is not in the batch component", val->name);
        n_act++;
    }
    for (int i = 0; i < tg->n_nodes; i++) {
        const ir_node *nd = &tg->nodes[i];
        ir_dimlink l[IR_MAX_DIMLINKS];
        int cnt = ir_node_dims(tg, nd, l);
        if (nd->op == IR_OP_ConvGradWeight) {
            if (dg_reduce(&d, i, 1) != batch)
                fail_msg("%s: reduce axis 1 is not the batch", nd->name);
            for (int j = 0; j < cnt; j++)
                if (l[j].out_dim == -1) assert_true(l[j].flags & IR_DIMLINK_SUM);
            n_gw++;
        }
        /* the fc layer's weight gradient: a Gemm (or MatMul) summing over the batch */
        if ((nd->op == IR_OP_Gemm || nd->op == IR_OP_MatMul) && dg_reduce(&d, i, 1) == batch)
            n_gemm_gw++;
    }
    assert_int_equal(n_gw, 12); /* one per Conv */
    assert_true(n_gemm_gw >= 1);
    assert_true(n_act > 40);
    dg_free(&d);
    ir_graph_free(tg);
    ir_graph_free(fwd);
}

/* DenseNet-121 at batch 3: its dense blocks concatenate up to 25 feature maps, and the batch
 * still runs through every one of them to every activation. */
static void test_densenet_batch(void **state) {
    const char *names[] = {"input"};
    ir_shape shapes[] = {TU_SHAPE(3, 3, 224, 224)};
    ir_graph *g = load_model("tests/fixtures/structure/densenet121.onnx", 1, names, shapes);
    check_sizes(g, "densenet121");
    dgraph d = dg_build(g);
    int batch = dg_dim(&d, g->inputs[0], 0), n_act = 0, widest = 0;
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if (val->shape.rank < 2 || val->shape.dims[0] != 3) continue;
        if (dg_dim(&d, v, 0) != batch) fail_msg("'%s' is not in the batch component", val->name);
        n_act++;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_Concat && g->nodes[i].n_in > widest) widest = g->nodes[i].n_in;
    assert_true(widest >= 25);
    assert_true(n_act > 300);
    dg_free(&d);
    ir_graph_free(g);
}

/* The train-mode export: BatchNormalization (and BatchNormGrad) with batch statistics links no
 * batch, so the data input's batch does not reach past the first BatchNorm, while its weight
 * gradient still sums over the batch it sees. */
static void test_resnet_train_bn_cuts(void **state) {
    ir_graph *fwd =
        load_model("tests/fixtures/numeric/resnet_small_train/model.onnx", 0, NULL, NULL);
    ir_graph *tg = training_graph(fwd, "resnet_small_train");
    check_sizes(tg, "resnet_small_train training");
    dgraph d = dg_build(tg);
    int batch = dg_dim(&d, tg->inputs[0], 0), n_bn = 0;
    for (int i = 0; i < tg->n_nodes; i++) {
        const ir_node *nd = &tg->nodes[i];
        if (nd->op != IR_OP_BatchNormalization && nd->op != IR_OP_BatchNormGrad) continue;
        assert_true(nd->op == IR_OP_BatchNormGrad ? ir_attr_int(nd, "training_mode", 0) != 0
                                                  : ir_bn_training(nd));
        const ir_value *in_x = &tg->values[nd->in[nd->op == IR_OP_BatchNormGrad ? 1 : 0]];
        ir_dimlink l[IR_MAX_DIMLINKS];
        int cnt = ir_node_dims(tg, nd, l);
        for (int j = 0; j < cnt; j++)
            if (l[j].in_dim == 0 && tg->values[nd->in[l[j].in]].shape.rank == in_x->shape.rank)
                fail_msg("%s links the batch", nd->name);
        n_bn++;
    }
    assert_true(n_bn >= 2);
    /* the stem: conv -> BN; the BN's output is cut from the input's batch */
    const ir_node *bn = NULL;
    for (int i = 0; i < tg->n_nodes && !bn; i++)
        if (tg->nodes[i].op == IR_OP_BatchNormalization) bn = &tg->nodes[i];
    assert_non_null(bn);
    assert_int_equal(dg_dim(&d, bn->in[0], 0), batch);
    assert_int_not_equal(dg_dim(&d, bn->out[0], 0), batch);
    dg_free(&d);
    ir_graph_free(tg);
    ir_graph_free(fwd);
}

/* GPT-2 small at batch 8, sequence 512: Q is reshaped to [8,512,12,64] and transposed to
 * [8,12,512,64]; its head dim is the head dim of the attention scores [8,12,512,512] (and of
 * K's), in a component apart from the batch, while the batch runs from the token ids to the
 * scores. */
static void test_gpt2_heads(void **state) {
    ir_graph *g = load_model("tests/fixtures/structure/gpt2_small_s512_b8.onnx", 0, NULL, NULL);
    check_sizes(g, "gpt2_small_s512_b8");
    dgraph d = dg_build(g);
    int batch = dg_dim(&d, g->inputs[0], 0), n_att = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->op != IR_OP_MatMul) continue;
        const ir_value *q = &g->values[nd->in[0]], *s = &g->values[nd->out[0]];
        if (s->shape.rank != 4 || s->shape.dims[1] != 12 || s->shape.dims[3] != 512) continue;
        /* the scores: Q comes from a Transpose of a Reshape of the projection */
        int qp = q->producer;
        assert_true(qp >= 0 && g->nodes[qp].op == IR_OP_Transpose);
        int rp = g->values[g->nodes[qp].in[0]].producer;
        assert_true(rp >= 0 && g->nodes[rp].op == IR_OP_Reshape);
        int head = dg_dim(&d, nd->out[0], 1);
        assert_int_equal(dg_dim(&d, nd->in[0], 1), head);
        assert_int_equal(dg_dim(&d, nd->in[1], 1), head);
        assert_int_equal(dg_dim(&d, g->nodes[rp].out[0], 2), head); /* [8,512,12,64] */
        assert_int_not_equal(head, batch);
        assert_int_equal(dg_dim(&d, nd->out[0], 0), batch);
        /* of the reshape's input [8,512,768] only the hidden dim is in the head component: 12
         * is its outer factor, so n parts of the heads are n blocks of 768 */
        for (int k = 0; k < 2; k++) assert_int_not_equal(dg_dim(&d, g->nodes[rp].in[0], k), head);
        assert_int_equal(dg_dim(&d, g->nodes[rp].in[0], 2), head);
        n_att++;
    }
    assert_int_equal(n_att, 12);
    dg_free(&d);
    ir_graph_free(g);
}

/* Every link of the forward graphs of a spread of fixtures, and of training graphs, joins dims of
 * one size (check_sizes). */
static void test_fixture_sizes(void **state) {
    static const char *const fwd[] = {
        "numeric/transformer_encoder",
        "numeric/vit_small",
        "numeric/mobilenet_v2",
        "numeric/densenet_small",
        "numeric/unet_upsample",
        "numeric/swin_small",
        "numeric/cnn_bn",
        "numeric/r3d_small",
        "numeric/inception_small",
        "numeric/efficientnet_small",
        "numeric/convnext_small",
        "numeric/unetpp_small",
        "numeric/fcn_small",
        "numeric/unet_transpose",
        "numeric/gpt_small",
    };
    for (size_t i = 0; i < sizeof fwd / sizeof *fwd; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/fixtures/%s/model.onnx", fwd[i]);
        ir_graph *g = load_fixture(rel);
        check_sizes(g, fwd[i]);
        ir_graph_free(g);
    }
    static const char *const train[] = {"numeric/transformer_encoder_train",
                                        "numeric/gpt_small_train", "numeric/unet_transpose_train",
                                        "numeric/vit_small_train", "numeric/mlp_dropout_train"};
    for (size_t i = 0; i < sizeof train / sizeof *train; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/fixtures/%s/model.onnx", train[i]);
        ir_graph *g = load_fixture(rel);
        ir_graph *tg = training_graph(g, train[i]);
        check_sizes(tg, train[i]);
        ir_graph_free(tg);
        ir_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_grad_weight),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_train_ops),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_every_op_has_dims),
        cmocka_unit_test(test_resnet_training_batch),
        cmocka_unit_test(test_densenet_batch),
        cmocka_unit_test(test_resnet_train_bn_cuts),
        cmocka_unit_test(test_gpt2_heads),
        cmocka_unit_test(test_fixture_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
