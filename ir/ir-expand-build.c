/* ir-expand-build.c - the builder of ir-expand-build.h and the table of import-time expansions
 * (ir-expand-attn.h's entry points). */
#include "ir-expand-attn.h"
#include "ir-expand-build.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- a small graph builder */

int xb_fail(xb *b, ir_status st) {
    if (b->st == IR_OK) b->st = st;
    return -1;
}

/* A node of op with the given inputs; its output is value out, or a new value when out < 0.
 * Shape inference runs at once, so that the builder can read the shapes it has made. */
int xb_op(xb *b, ir_op_kind op, int n_in, const int *in, int out, int n_attrs,
          const ir_attr *attrs) {
    if (b->st) return -1;
    for (int i = 0; i < n_in; i++)
        if (in[i] < -1) return xb_fail(b, IR_ERR_INTERNAL);
    char name[256];
    snprintf(name, sizeof name, "%s/%s_%d", b->base, ir_op_name(op), b->count++);
    if (out < 0 && (out = ir_graph_add_value(b->g, name, IR_DTYPE_NONE, NULL)) < 0)
        return xb_fail(b, IR_ERR_NOMEM);
    int idx = ir_graph_add_node(b->g, op, name, n_in, in, 1, &out, n_attrs, attrs);
    if (idx < 0) return xb_fail(b, IR_ERR_NOMEM);
    ir_status st = ir_node_infer(b->g, &b->g->nodes[idx], b->d);
    if (st) return xb_fail(b, st);
    return out;
}

int xb_op2(xb *b, ir_op_kind op, int x, int y) {
    return xb_op(b, op, 2, (int[]){x, y}, -1, 0, NULL);
}

/* A constant of dtype t and shape s (data: numel elements as double, converted). */
int xb_const(xb *b, ir_dtype t, const ir_shape *s, const double *data) {
    if (b->st) return -1;
    int64_t n = ir_shape_numel(s);
    char name[256];
    snprintf(name, sizeof name, "%s/const_%d", b->base, b->count++);
    ir_blob *bl = ir_blob_new((size_t)n * ir_dtype_size(t) + 1);
    int v = bl ? ir_graph_add_value(b->g, name, t, s) : -1;
    if (v < 0) {
        ir_blob_unref(bl);
        return xb_fail(b, IR_ERR_NOMEM);
    }
    for (int64_t i = 0; i < n; i++) ir_store_f64(ir_blob_data(bl), t, i, data[i]);
    b->g->values[v].blob = bl;
    b->g->values[v].flags |= IR_VF_CONST;
    return v;
}

int xb_scalar(xb *b, ir_dtype t, double v) {
    return xb_const(b, t, &(ir_shape){0}, &v);
}

int xb_ints(xb *b, int n, const int64_t *v) {
    double dv[2 * IR_MAX_RANK + 2];
    if (n < 0 || n > 2 * IR_MAX_RANK + 2) return xb_fail(b, IR_ERR_INTERNAL);
    for (int i = 0; i < n; i++) dv[i] = (double)v[i];
    return xb_const(b, IR_I64, &(ir_shape){.rank = 1, .dims = {n}}, dv);
}

ir_shape xb_shape(const xb *b, int v) {
    return v >= 0 ? b->g->values[v].shape : (ir_shape){0};
}

int xb_reshape(xb *b, int x, int rank, const int64_t *dims, int out) {
    return xb_op(b, IR_OP_Reshape, 2, (int[]){x, xb_ints(b, rank, dims)}, out, 0, NULL);
}

int xb_transpose(xb *b, int x, int rank, const int64_t *perm, int out) {
    int64_t *p = ir_graph_alloc(b->g, sizeof(int64_t) * (size_t)rank);
    if (!p) return xb_fail(b, IR_ERR_NOMEM);
    memcpy(p, perm, sizeof(int64_t) * (size_t)rank);
    ir_attr a = {.name = "perm", .type = IR_ATTR_INTS, .n = rank, .ints = p};
    return xb_op(b, IR_OP_Transpose, 1, &x, out, 1, &a);
}

int xb_concat(xb *b, int x, int y, int64_t axis, int out) {
    ir_attr a = {.name = "axis", .type = IR_ATTR_INT, .i = axis};
    return xb_op(b, IR_OP_Concat, 2, (int[]){x, y}, out, 1, &a);
}

/* x[..., lo:hi] along axis (opset-13 Slice with constant starts, ends, axes). */
int xb_slice(xb *b, int x, int64_t axis, int64_t lo, int64_t hi) {
    int in[4] = {x, xb_ints(b, 1, &lo), xb_ints(b, 1, &hi), xb_ints(b, 1, &axis)};
    return xb_op(b, IR_OP_Slice, 4, in, -1, 0, NULL);
}

int xb_identity(xb *b, int x, int out) {
    return xb_op(b, IR_OP_Identity, 1, &x, out, 0, NULL);
}

/* ---------------------------------------------------------------- splicing */

/* Moves the nodes appended from index n0 on into the place of node idx, which is dropped, and
 * re-derives every producer index. */
ir_status xb_splice(ir_graph *g, int idx, int n0, ir_diag *d, const ir_node *n) {
    int n_new = g->n_nodes - n0;
    ir_node *tmp = malloc(sizeof(ir_node) * (size_t)(n_new ? n_new : 1));
    if (!tmp) return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory expanding the node");
    memcpy(tmp, &g->nodes[n0], sizeof(ir_node) * (size_t)n_new);
    memmove(&g->nodes[idx + n_new], &g->nodes[idx + 1], sizeof(ir_node) * (size_t)(n0 - idx - 1));
    memcpy(&g->nodes[idx], tmp, sizeof(ir_node) * (size_t)n_new);
    free(tmp);
    g->n_nodes = n0 - 1 + n_new;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].producer >= 0) g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0) g->values[g->nodes[i].out[k]].producer = i;
    return IR_OK;
}

int xb_op1(xb *b, ir_op_kind op, int x) {
    return xb_op(b, op, 1, &x, -1, 0, NULL);
}

int xb_op_int(xb *b, ir_op_kind op, int n_in, const int *in, int out, const char *name, int64_t v) {
    ir_attr a = {.name = name, .type = IR_ATTR_INT, .i = v};
    return xb_op(b, op, n_in, in, out, 1, &a);
}

ir_dtype xb_dtype(const xb *b, int v) {
    return v >= 0 ? b->g->values[v].dtype : IR_DTYPE_NONE;
}

int xb_cast(xb *b, int x, ir_dtype to) {
    if (b->st) return -1;
    if (xb_dtype(b, x) == to) return x;
    return xb_op_int(b, IR_OP_Cast, 1, &x, -1, "to", ir_dtype_to_onnx(to));
}

int xb_reduce(xb *b, ir_op_kind op, int x, int n, const int64_t *axes, bool keepdims, int out) {
    ir_attr a = {.name = "keepdims", .type = IR_ATTR_INT, .i = keepdims};
    if (n == 0) return xb_op(b, op, 1, &x, out, 1, &a);
    return xb_op(b, op, 2, (int[]){x, xb_ints(b, n, axes)}, out, 1, &a);
}

int xb_unsqueeze(xb *b, int x, int64_t axis) {
    return xb_op2(b, IR_OP_Unsqueeze, x, xb_ints(b, 1, &axis));
}

int xb_squeeze(xb *b, int x, int64_t axis, int out) {
    return xb_op(b, IR_OP_Squeeze, 2, (int[]){x, xb_ints(b, 1, &axis)}, out, 0, NULL);
}

/* ---------------------------------------------------------------- the table */

static const struct {
    const char *op_type;
    ir_expand_fn fn;
} expansions[] = {
    {"Attention", ir_expand_attention},
    {"RotaryEmbedding", ir_expand_rotary},
    {"SoftmaxCrossEntropyLoss", ir_expand_sce_loss},
    {"NegativeLogLikelihoodLoss", ir_expand_nll_loss},
    {"RMSNormalization", ir_expand_rms_norm},
    {"CenterCropPad", ir_expand_center_crop_pad},
    {"AffineGrid", ir_expand_affine_grid},
    {"Bernoulli", ir_expand_bernoulli},
};

static ir_expand_fn find_expansion(const char *domain, const char *op_type) {
    if (*domain && strcmp(domain, "ai.onnx") != 0) return NULL;
    for (size_t i = 0; i < sizeof expansions / sizeof expansions[0]; i++)
        if (strcmp(op_type, expansions[i].op_type) == 0) return expansions[i].fn;
    return NULL;
}

bool ir_expandable_op(const char *domain, const char *op_type) {
    return find_expansion(domain, op_type) != NULL;
}

ir_status ir_expand_node(ir_graph *g, int idx, ir_diag *d) {
    const ir_node node = g->nodes[idx]; /* a copy: adding nodes moves g->nodes */
    for (int i = 0; i < node.n_in; i++)
        if (node.in[i] >= 0 && g->values[node.in[i]].dtype == IR_DTYPE_NONE)
            return ir_node_fail(d, IR_ERR_INTERNAL, &node, "input %d has no shape yet", i);
    ir_expand_fn fn = find_expansion(node.domain, node.op_type);
    if (!fn) return ir_node_fail(d, IR_ERR_INTERNAL, &node, "no expansion");
    const int n0 = g->n_nodes;
    ir_status st = fn(g, &node, d);
    if (st) return st;
    return xb_splice(g, idx, n0, d, &g->nodes[idx]);
}
