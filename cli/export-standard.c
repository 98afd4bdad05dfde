/* export-standard.c - `magpie export --standard`: a plan in the default ONNX domain only, so that
 * any ONNX runtime can load it. The magpie-domain ops that have a standard equivalent are lowered:
 *  - Store, Load (a host copy and back): Identity;
 *  - FissionBuffer: ConstantOfShape (zeros);
 *  - FissionSlice: Slice of part `index` along `axis` (its ordering-only inputs dropped);
 *  - FissionAssemble: Concat of the buffer before the slot, the part and the buffer after it;
 *  - FissionAccumulate: Add;
 *  - PetPatch: Where(box mask, Pad(patch), out), the mask a bool constant of out's shape.
 * The in-place writes become ordinary values (the runtime plans its own memory). Any other
 * magpie-domain op (the backward ops, the loss and the optimizer updates of a training plan) has no
 * standard form: cli_export_standard names every such op and the caller writes nothing. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

typedef struct lower_ctx {
    ir_graph *g;
    ir_diag *d;
    int n_made;
} lower_ctx;

/* A new int64 constant [n] holding v. */
static int const_i64(lower_ctx *c, const int64_t *v, int n) {
    char name[64];
    snprintf(name, sizeof name, "magpie_std_const_%d", c->n_made++);
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    int id = ir_graph_add_value(c->g, name, IR_I64, &s);
    if (id < 0) return -1;
    ir_blob *b = ir_blob_new(sizeof(int64_t) * (size_t)n);
    if (!b) return -1;
    memcpy(ir_blob_data(b), v, sizeof(int64_t) * (size_t)n);
    c->g->values[id].blob = b;
    c->g->values[id].flags |= IR_VF_CONST;
    return id;
}

/* A new produced value shaped like shape, dtype t. */
static int temp_value(lower_ctx *c, ir_dtype t, const ir_shape *shape) {
    char name[64];
    snprintf(name, sizeof name, "magpie_std_%d", c->n_made++);
    return ir_graph_add_value(c->g, name, t, shape);
}

/* Slice(x, [start], [end], [axis]) into out (a value id, or -1 for a new one). */
static int add_slice(lower_ctx *c, const char *name, int x, int axis, int64_t start, int64_t end,
                     int out) {
    const ir_value *xv = &c->g->values[x];
    ir_shape s = xv->shape;
    s.dims[axis] = end - start;
    if (out < 0 && (out = temp_value(c, xv->dtype, &s)) < 0) return -1;
    int64_t ax = axis;
    int in[4] = {x, const_i64(c, &start, 1), const_i64(c, &end, 1), const_i64(c, &ax, 1)};
    if (in[1] < 0 || in[2] < 0 || in[3] < 0) return -1;
    return ir_graph_add_node(c->g, IR_OP_Slice, name, 4, in, 1, &out, 0, NULL) < 0 ? -1 : out;
}

static bool lower_node(lower_ctx *c, int i) {
    ir_graph *g = c->g;
    ir_node n = g->nodes[i]; /* a copy: adding nodes may move the array */
    const char *name = n.name;
    int out = n.out[0];
    int axis = (int)ir_attr_int(&n, "axis", 0);
    int64_t parts = ir_attr_int(&n, "parts", 1), index = ir_attr_int(&n, "index", 0);
    g->nodes[i].n_out = 0; /* the old node produces nothing now: ir_graph_prune drops it */
    switch (n.op) {
    case IR_OP_Store:
    case IR_OP_Load:
        return ir_graph_add_node(g, IR_OP_Identity, name, 1, n.in, 1, &out, 0, NULL) >= 0;
    case IR_OP_FissionBuffer: {
        const ir_value *o = &g->values[out];
        int sh = const_i64(c, o->shape.dims, o->shape.rank);
        ir_blob *zero = ir_blob_new(ir_dtype_size(o->dtype));
        if (sh < 0 || !zero) return false;
        ir_attr a = {.name = "value",
                     .type = IR_ATTR_TENSOR,
                     .t_dtype = o->dtype,
                     .t_shape = ir_shape_make(1, (int64_t[]){1}),
                     .t_blob = zero};
        bool ok = ir_graph_add_node(g, IR_OP_ConstantOfShape, name, 1, &sh, 1, &out, 1, &a) >= 0;
        ir_blob_unref(zero); /* the node holds its own reference */
        return ok;
    }
    case IR_OP_FissionSlice: {
        const ir_value *x = &g->values[n.in[0]];
        int r = x->shape.rank;
        if (axis < 0) axis += r;
        int64_t len = x->shape.dims[axis] / (parts ? parts : 1);
        return add_slice(c, name, n.in[0], axis, index * len, (index + 1) * len, out) >= 0;
    }
    case IR_OP_FissionAssemble: {
        const ir_value *b = &g->values[n.in[0]];
        int r = b->shape.rank;
        if (axis < 0) axis += r;
        int64_t full = b->shape.dims[axis], len = full / (parts ? parts : 1);
        int64_t start = index * len, end = start + len;
        int pieces[3], np = 0;
        if (start > 0 && (pieces[np++] = add_slice(c, NULL, n.in[0], axis, 0, start, -1)) < 0)
            return false;
        pieces[np++] = n.in[1];
        if (end < full && (pieces[np++] = add_slice(c, NULL, n.in[0], axis, end, full, -1)) < 0)
            return false;
        ir_attr a = {.name = "axis", .type = IR_ATTR_INT, .i = axis};
        if (np == 1)
            return ir_graph_add_node(g, IR_OP_Identity, name, 1, pieces, 1, &out, 0, NULL) >= 0;
        return ir_graph_add_node(g, IR_OP_Concat, name, np, pieces, 1, &out, 1, &a) >= 0;
    }
    case IR_OP_FissionAccumulate:
        return ir_graph_add_node(g, IR_OP_Add, name, 2, n.in, 1, &out, 0, NULL) >= 0;
    case IR_OP_PetPatch: {
        const ir_value *o = &g->values[n.in[0]], *p = &g->values[n.in[1]];
        const int64_t *st;
        int r = o->shape.rank;
        if (ir_attr_ints(&n, "starts", &st) != r) return false;
        int64_t pads[2 * IR_MAX_RANK];
        for (int k = 0; k < r; k++) {
            pads[k] = st[k];
            pads[r + k] = o->shape.dims[k] - st[k] - p->shape.dims[k];
        }
        int mask = temp_value(c, IR_BOOL, &o->shape), padded = temp_value(c, p->dtype, &o->shape);
        int pv = const_i64(c, pads, 2 * r);
        if (mask < 0 || padded < 0 || pv < 0) return false;
        ir_blob *mb = ir_blob_new((size_t)ir_shape_numel(&o->shape));
        if (!mb) return false;
        int64_t strides[IR_MAX_RANK], total = ir_shape_numel(&o->shape);
        ir_shape_strides(&o->shape, strides);
        unsigned char *m = ir_blob_data(mb);
        for (int64_t e = 0; e < total; e++) {
            bool in = true;
            for (int k = 0; k < r && in; k++) {
                int64_t ck = (e / strides[k]) % o->shape.dims[k];
                in = ck >= st[k] && ck < st[k] + p->shape.dims[k];
            }
            m[e] = in;
        }
        g->values[mask].producer = -1;
        g->values[mask].blob = mb;
        g->values[mask].flags |= IR_VF_CONST;
        int pin[2] = {n.in[1], pv}, win[3] = {mask, padded, n.in[0]};
        return ir_graph_add_node(g, IR_OP_Pad, NULL, 2, pin, 1, &padded, 0, NULL) >= 0 &&
               ir_graph_add_node(g, IR_OP_Where, name, 3, win, 1, &out, 0, NULL) >= 0;
    }
    default: g->nodes[i].n_out = n.n_out; return true; /* not lowered */
    }
}

ir_status cli_export_standard(ir_graph *g, ir_diag *d) {
    lower_ctx c = {.g = g, .d = d};
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++)
        if (!lower_node(&c, i))
            return ir_node_fail(d, IR_ERR_NOMEM, &g->nodes[i], "lowering failed (out of memory)");
    /* what is left in magpie's domain has no standard form: name every op once */
    char list[768] = "";
    size_t len = 0;
    int left = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->n_out == 0 || !n->domain || strcmp(n->domain, "magpie") != 0) continue;
        left++;
        const char *op = n->op_type ? n->op_type : ir_op_name(n->op);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            const ir_node *m = &g->nodes[j];
            seen = m->n_out && m->domain && !strcmp(m->domain, "magpie") && m->op_type &&
                   !strcmp(m->op_type, op);
        }
        if (!seen && len + strlen(op) + 3 < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", op);
    }
    if (left)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "--standard: %d nodes of ops without a standard ONNX form: %s", left,
                           list);
    /* the lowered nodes were appended after their readers: order first, since pruning sweeps
     * the nodes backwards from the outputs */
    ir_status st = ir_graph_toposort(g, d);
    if (st == IR_OK) ir_graph_prune(g);
    return st;
}
