/* pet-build.h - small builders of PET programs for the PET tests (test_pet_*.c): float graph
 * inputs, int64 constants, any op with its outputs inferred (attribute int arrays copied into the
 * graph's arena, since nodes keep pointers to them), Reshape/Transpose shorthands, named graph
 * outputs. Include after test-util.h. */
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

static inline int pb_count_op(const ir_graph *g, ir_op_kind k) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == k;
    return n;
}

#endif
