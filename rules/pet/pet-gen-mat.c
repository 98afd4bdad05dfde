/* pet-gen-mat.c - materialization of an enumeration state of PET's mutation generator as a
 * standalone ir_graph (pet-gen.h): the program's inputs with their names and flags, each op as
 * ONNX nodes (a layout op as up to three: Reshape, Transpose, Reshape; a bias made of several
 * biases as a Concat of them), integer parameters as constants, the chosen tensors as the
 * outputs under the original's names. Every node is shape-inferred as it is added. */
#include "pet-gen-impl.h"
#include "rules.h"

#include <stdio.h>

/* ---------------------------------------------------------------- materialization */

typedef struct mat {
    ir_graph *g;
    char prefix[32];
    int serial;
    bool oom;
} mat;

static int mat_value(mat *m, const char *name, ir_dtype t, const ir_shape *s) {
    char nm[96];
    if (!name) {
        snprintf(nm, sizeof nm, "%sv%d", m->prefix, m->serial++);
        name = nm;
    }
    int v = ir_graph_add_value(m->g, name, t, s);
    if (v < 0) m->oom = true;
    return v;
}

static int mat_ints(mat *m, int n, const int64_t *vals) {
    char nm[96];
    snprintf(nm, sizeof nm, "%sc%d", m->prefix, m->serial++);
    int v = rw_add_const_i64(m->g, nm, n, vals);
    if (v < 0) m->oom = true;
    return v;
}

/* Adds a node and infers it; returns false on failure (out of memory, or an inference the
 * enumeration should not have admitted: an internal error). */
static bool mat_node(mat *m, ir_op_kind op, int n_in, const int *in, int n_out, const int *out,
                     int n_attrs, const ir_attr *attrs) {
    char nm[96];
    snprintf(nm, sizeof nm, "%sn%d", m->prefix, m->serial++);
    if (m->oom) return false;
    ir_attr at[8];
    for (int a = 0; a < n_attrs; a++) {
        at[a] = attrs[a];
        if (at[a].type == IR_ATTR_INTS) {
            int64_t *p = ir_graph_alloc(m->g, sizeof(int64_t) * (size_t)(at[a].n ? at[a].n : 1));
            if (!p) return m->oom = true, false;
            memcpy(p, attrs[a].ints, sizeof(int64_t) * (size_t)at[a].n);
            at[a].ints = p;
        }
    }
    int idx = ir_graph_add_node(m->g, op, nm, n_in, in, n_out, out, n_attrs, at);
    if (idx < 0) return m->oom = true, false;
    ir_diag d;
    ir_status st = ir_node_infer(m->g, &m->g->nodes[idx], &d);
    IR_ASSERT(st == IR_OK || st == IR_ERR_NOMEM);
    return st == IR_OK;
}

static ir_attr ints_attr(const char *name, int n, const int64_t *v) {
    return (ir_attr){.name = name, .type = IR_ATTR_INTS, .n = n, .ints = (int64_t *)v};
}

/* The bias of a conv/gemm op: the single bias input, or a Concat of several. */
static int mat_bias(mat *m, const gen_ctx *c, const gen_op *op, const int *tv) {
    if (op->n_bias == 0) return -1;
    if (op->n_bias == 1) return tv[op->bias[0]];
    int in[GEN_MAX_BIAS];
    int64_t len = 0;
    for (int i = 0; i < op->n_bias; i++) {
        in[i] = tv[op->bias[i]];
        len += c->t[op->bias[i]].shape.dims[0];
    }
    ir_shape s = ir_shape_make(1, (int64_t[]){len});
    int out = mat_value(m, NULL, c->t[op->bias[0]].dtype, &s);
    ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = 0};
    return mat_node(m, IR_OP_Concat, op->n_bias, in, 1, &out, 1, &ax) ? out : -1;
}

static bool mat_layout(mat *m, const gen_layout *l, int x, int out) {
    const ir_value *xv = &m->g->values[x];
    ir_dtype t = xv->dtype;
    ir_shape in = xv->shape, atoms = ir_shape_make(l->n_atoms, l->atom), tr;
    bool ident = true;
    tr.rank = l->n_atoms;
    for (int p = 0; p < l->n_atoms; p++) {
        tr.dims[p] = l->atom[l->perm[p]];
        ident = ident && l->perm[p] == p;
    }
    int cur = x;
    if (!ident && !ir_shape_eq(&atoms, &in)) {
        int sv = mat_ints(m, atoms.rank, atoms.dims);
        int nv = mat_value(m, NULL, t, &atoms);
        if (!mat_node(m, IR_OP_Reshape, 2, (int[]){cur, sv}, 1, &nv, 0, NULL)) return false;
        cur = nv;
    }
    if (!ident) {
        int64_t perm[IR_MAX_RANK];
        for (int p = 0; p < l->n_atoms; p++) perm[p] = l->perm[p];
        bool last = ir_shape_eq(&tr, &l->out);
        int nv = last ? out : mat_value(m, NULL, t, &tr);
        ir_attr pa = ints_attr("perm", l->n_atoms, perm);
        if (!mat_node(m, IR_OP_Transpose, 1, &cur, 1, &nv, 1, &pa)) return false;
        if (last) return true;
        cur = nv;
    }
    int sv = mat_ints(m, l->out.rank, l->out.dims);
    return mat_node(m, IR_OP_Reshape, 2, (int[]){cur, sv}, 1, &out, 0, NULL);
}

static bool mat_op(mat *m, const gen_ctx *c, const gen_op *op, const int *tv) {
    int in[GEN_MAX_CAT + 1], out[GEN_MAX_OUTS];
    for (int i = 0; i < op->n_in; i++) in[i] = tv[op->in[i]];
    for (int i = 0; i < op->n_out; i++) out[i] = tv[op->out0 + i];
    const ir_shape *xs = &c->t[op->in[0]].shape;
    switch (op->kind) {
    case GK_CONV: {
        const gen_conv_attr *a = &c->conv[op->attr];
        int b = mat_bias(m, c, op, tv), n = 2;
        if (b >= 0) in[n++] = b;
        ir_attr at[4] = {ints_attr("strides", (int)a->S, a->strides),
                         ints_attr("dilations", (int)a->S, a->dil),
                         ints_attr("pads", (int)(2 * a->S), a->pads),
                         {.name = "group", .type = IR_ATTR_INT, .i = a->group}};
        return !m->oom && mat_node(m, IR_OP_Conv, n, in, 1, out, 4, at);
    }
    case GK_GEMM: {
        const gen_gemm_attr *a = &c->gemm[op->attr];
        int b = mat_bias(m, c, op, tv), n = 2;
        if (b >= 0) in[n++] = b;
        ir_attr at[4] = {{.name = "alpha", .type = IR_ATTR_FLOAT, .f = a->alpha},
                         {.name = "beta", .type = IR_ATTR_FLOAT, .f = a->beta},
                         {.name = "transA", .type = IR_ATTR_INT, .i = a->ta},
                         {.name = "transB", .type = IR_ATTR_INT, .i = a->tb}};
        return !m->oom && mat_node(m, IR_OP_Gemm, n, in, 1, out, 4, at);
    }
    case GK_MATMUL: return mat_node(m, IR_OP_MatMul, 2, in, 1, out, 0, NULL);
    case GK_ADD: return mat_node(m, IR_OP_Add, 2, in, 1, out, 0, NULL);
    case GK_MUL: return mat_node(m, IR_OP_Mul, 2, in, 1, out, 0, NULL);
    case GK_CONCAT: {
        ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = op->attr};
        return mat_node(m, IR_OP_Concat, op->n_in, in, 1, out, 1, &ax);
    }
    case GK_SPLIT: {
        ir_attr at[2] = {{.name = "axis", .type = IR_ATTR_INT, .i = op->attr},
                         ints_attr("split", op->n_out, op->sizes)};
        if (m->g->opset < 13) return mat_node(m, IR_OP_Split, 1, in, op->n_out, out, 2, at);
        in[1] = mat_ints(m, op->n_out, op->sizes);
        return mat_node(m, IR_OP_Split, 2, in, op->n_out, out, 1, at);
    }
    case GK_PAD: {
        in[1] = mat_ints(m, 2 * xs->rank, op->pads);
        return mat_node(m, IR_OP_Pad, 2, in, 1, out, 0, NULL);
    }
    case GK_SLICE: {
        int64_t ax = op->attr;
        in[1] = mat_ints(m, 1, &op->sizes[0]);
        in[2] = mat_ints(m, 1, &op->sizes[1]);
        in[3] = mat_ints(m, 1, &ax);
        return mat_node(m, IR_OP_Slice, 4, in, 1, out, 0, NULL);
    }
    case GK_LAYOUT: return mat_layout(m, &op->lay, in[0], out[0]);
    }
    return false;
}

ir_graph *gen_materialize(gen_ctx *c, const int *assign) {
    const ir_graph *p = c->prog;
    mat m = {.g = ir_graph_new()};
    if (!m.g) return NULL;
    snprintf(m.prefix, sizeof m.prefix, "pet.m%d.", c->serial++);
    m.g->name = ir_graph_strdup(m.g, p->name);
    m.g->source = ir_graph_strdup(m.g, p->source);
    m.g->opset = p->opset;
    int tv[GEN_MAX_T];
    for (int i = 0; i < c->n_in; i++) {
        const ir_value *sv = &p->values[c->in_val[i]];
        int v = mat_value(&m, sv->name, sv->dtype, &sv->shape);
        if (v < 0) goto fail;
        tv[i] = v;
        ir_value *nv = &m.g->values[v];
        nv->flags = sv->flags & ~(IR_VF_INPUT | IR_VF_OUTPUT);
        if (sv->flags & IR_VF_INPUT)
            ir_graph_add_input(m.g, v);
        else
            nv->blob = ir_blob_ref(sv->blob);
    }
    for (int i = c->n_in; i < c->n_t; i++) {
        const char *name = NULL;
        for (int o = 0; o < c->n_out; o++)
            if (assign[o] == i) name = p->values[c->out_val[o]].name;
        tv[i] = mat_value(&m, name, c->t[i].dtype, &c->t[i].shape);
        if (tv[i] < 0) goto fail;
    }
    for (int k = 0; k < c->n_ops; k++)
        if (!mat_op(&m, c, &c->ops[k], tv)) goto fail;
    for (int o = 0; o < c->n_out; o++) ir_graph_add_output(m.g, tv[assign[o]]);
#ifdef MAGPIE_DEBUG
    for (int i = c->n_in; i < c->n_t; i++)
        IR_ASSERT(ir_shape_eq(&m.g->values[tv[i]].shape, &c->t[i].shape));
    IR_ASSERT(ir_graph_validate(m.g, NULL) == IR_OK);
#endif
    return m.g;
fail:
    ir_graph_free(m.g);
    return NULL;
}
