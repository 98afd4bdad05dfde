/* export-standard.c - plans in the default ONNX domain only, so that any ONNX runtime can load
 * them: `magpie export --standard`, and `optimize`'s optimized.onnx for a plan that needs no host
 * memory and no fission (substitutions, PET, reordering: cli_plan_standard). The magpie-domain
 * ops that have a standard equivalent are lowered:
 *  - Store, Load (a host copy and back): Identity;
 *  - FissionBuffer: ConstantOfShape (zeros);
 *  - FissionSlice: Slice of part `index` along `axis` (its ordering-only inputs dropped);
 *  - FissionAssemble: Concat of the buffer before the slot, the part and the buffer after it;
 *  - FissionAccumulate: Add;
 *  - PetPatch: Where(box mask, Pad(patch), out), the mask a bool constant of out's shape.
 * The in-place writes become ordinary values (the runtime plans its own memory). The nodes a
 * lowered node becomes take its place in the node order, so the plan's schedule survives. Any
 * other magpie-domain op (the backward ops, the loss and the optimizer updates of a training plan)
 * has no standard form: cli_export_standard names every such op and the caller writes nothing.
 *
 * The way back (cli_fuse_standard_patches, on every model magpie loads): Where(box mask,
 * Pad(patch), out) is PetPatch(out, patch) again, so that magpie's executor and cost model see
 * the in-place patch the search costed, not a full-size Pad and Where. */
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

/* Moves the nodes appended while lowering node i (first[i] .. first[i + 1] - 1) to i's place in
 * the node order: every input they read is produced before i, and i's readers follow it. */
static ir_status place_lowered(ir_graph *g, int n0, const int *first, ir_diag *d) {
    int n = g->n_nodes;
    int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
    ir_node *nn = malloc(sizeof(ir_node) * (size_t)(n ? n : 1));
    if (!order || !nn) {
        free(order);
        free(nn);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory ordering the lowered nodes");
    }
    int k = 0;
    for (int i = 0; i < n0; i++) {
        order[k++] = i; /* a lowered node produces nothing now: ir_graph_prune drops it */
        for (int j = first[i]; j < first[i + 1]; j++) order[k++] = j;
    }
    IR_ASSERT(k == n);
    for (int s = 0; s < n; s++) nn[s] = g->nodes[order[s]];
    memcpy(g->nodes, nn, sizeof(ir_node) * (size_t)n);
    for (int s = 0; s < n; s++)
        for (int o = 0; o < g->nodes[s].n_out; o++)
            if (g->nodes[s].out[o] >= 0) g->values[g->nodes[s].out[o]].producer = s;
    free(order);
    free(nn);
    return IR_OK;
}

ir_status cli_export_standard(ir_graph *g, ir_diag *d) {
    lower_ctx c = {.g = g, .d = d};
    int n0 = g->n_nodes;
    int *first = malloc(sizeof(int) * ((size_t)n0 + 1));
    if (!first) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory lowering the plan");
    for (int i = 0; i < n0; i++) {
        first[i] = g->n_nodes;
        if (!lower_node(&c, i)) {
            free(first);
            return ir_node_fail(d, IR_ERR_NOMEM, &g->nodes[i], "lowering failed (out of memory)");
        }
    }
    first[n0] = g->n_nodes;
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
    if (left) {
        free(first);
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "--standard: %d nodes of ops without a standard ONNX form: %s", left,
                           list);
    }
    /* the lowered nodes were appended after their readers: to their nodes' places, since
     * pruning sweeps the nodes backwards from the outputs */
    ir_status st = place_lowered(g, n0, first, d);
    free(first);
    if (st == IR_OK) ir_graph_prune(g);
    return st;
}

bool cli_plan_standard(const ir_graph *g) {
    bool magpie = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (!n->domain || strcmp(n->domain, "magpie") != 0) continue;
        if (n->op != IR_OP_PetPatch) return false; /* host copies, fission, training ops */
        magpie = true;
    }
    return magpie;
}

/* ---------------------------------------------------------------- the way back */

/* The box of patch p in out o that node `where` (Where(mask, Pad(p, pads), o)) writes, in
 * starts[]; false when the node is not exactly a lowered PetPatch. */
static bool lowered_patch(const ir_graph *g, const ir_node *w, int64_t *starts, int *patch) {
    if (w->op != IR_OP_Where || w->n_in != 3 || w->n_out != 1) return false;
    int mv = w->in[0], xv = w->in[1], ov = w->in[2];
    if (mv < 0 || xv < 0 || ov < 0 || w->out[0] < 0) return false;
    const ir_value *mask = &g->values[mv], *o = &g->values[ov], *y = &g->values[w->out[0]];
    int pn = g->values[xv].producer;
    if (pn < 0 || mask->dtype != IR_BOOL || !mask->blob || !ir_shape_eq(&mask->shape, &o->shape) ||
        !ir_shape_eq(&y->shape, &o->shape) || y->dtype != o->dtype)
        return false;
    const ir_node *pad = &g->nodes[pn];
    if (pad->op != IR_OP_Pad || pad->n_in < 2 || pad->in[0] < 0 || pad->in[1] < 0) return false;
    if (pad->n_in > 3 && pad->in[3] >= 0) return false; /* axes: not written by the lowering */
    const ir_value *p = &g->values[pad->in[0]], *pads = &g->values[pad->in[1]];
    int r = o->shape.rank;
    if (p->dtype != o->dtype || p->shape.rank != r || pads->dtype != IR_I64 || !pads->blob ||
        ir_shape_numel(&pads->shape) != 2 * r ||
        ir_blob_bytes(pads->blob) < sizeof(int64_t) * (size_t)(2 * r))
        return false;
    const int64_t *pv = ir_blob_data(pads->blob);
    for (int k = 0; k < r; k++) {
        if (pv[k] < 0 || pv[r + k] < 0 || pv[k] + p->shape.dims[k] + pv[r + k] != o->shape.dims[k])
            return false;
        starts[k] = pv[k];
    }
    int64_t total = ir_shape_numel(&o->shape), strides[IR_MAX_RANK];
    if (ir_blob_bytes(mask->blob) < (size_t)total) return false;
    ir_shape_strides(&o->shape, strides);
    const unsigned char *m = ir_blob_data(mask->blob);
    for (int64_t e = 0; e < total; e++) {
        bool in = true;
        for (int k = 0; k < r && in; k++) {
            int64_t ck = (e / strides[k]) % o->shape.dims[k];
            in = ck >= starts[k] && ck < starts[k] + p->shape.dims[k];
        }
        if ((m[e] != 0) != in) return false;
    }
    *patch = pad->in[0];
    return true;
}

/* Whether PetPatch may overwrite value o's buffer at node index at: o is computed, no graph
 * output, and nothing after `at` reads it or a value sharing its buffer (a view of it). */
static bool patch_in_place_ok(const ir_graph *g, int o, int at, const int *root) {
    if (g->values[o].producer < 0 || (g->values[o].flags & IR_VF_OUTPUT)) return false;
    for (int j = at + 1; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_in; k++) {
            int v = g->nodes[j].in[k];
            if (v >= 0 && root[v] == root[o]) return false;
        }
    for (int k = 0; k < g->n_outputs; k++)
        if (root[g->outputs[k]] == root[o]) return false;
    return true;
}

ir_status cli_fuse_standard_patches(ir_graph *g, ir_diag *d) {
    int fused = 0;
    int *root = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        int64_t starts[IR_MAX_RANK];
        int patch;
        if (g->nodes[i].op != IR_OP_Where || !lowered_patch(g, &g->nodes[i], starts, &patch))
            continue;
        if (!root && !(root = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1))))
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        ir_graph_buffer_roots(g, root);
        ir_node w = g->nodes[i]; /* a copy: adding a node may move the array */
        if (!patch_in_place_ok(g, w.in[2], i, root)) continue;
        int r = g->values[w.in[2]].shape.rank;
        int64_t *st = ir_graph_alloc(g, sizeof(int64_t) * (size_t)(r + 1)); /* attrs: the arena */
        if (!st) {
            free(root);
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        }
        memcpy(st, starts, sizeof(int64_t) * (size_t)r);
        ir_attr a = {.name = "starts", .type = IR_ATTR_INTS, .n = r, .ints = st};
        int in[2] = {w.in[2], patch}, out = w.out[0];
        g->nodes[i].n_out = 0; /* the Where produces nothing now: ir_graph_prune drops it */
        int id = ir_graph_add_node(g, IR_OP_PetPatch, w.name, 2, in, 1, &out, 1, &a);
        if (id < 0) {
            free(root);
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        }
        /* the PetPatch to the Where's place: every node from i + 1 on moves one down */
        ir_node pn = g->nodes[id];
        memmove(&g->nodes[i + 2], &g->nodes[i + 1], sizeof(ir_node) * (size_t)(id - i - 1));
        g->nodes[i + 1] = pn;
        for (int s = i + 1; s < g->n_nodes; s++)
            for (int k = 0; k < g->nodes[s].n_out; k++)
                if (g->nodes[s].out[k] >= 0) g->values[g->nodes[s].out[k]].producer = s;
        fused++;
        i++;
    }
    free(root);
    if (fused) ir_graph_prune(g);
    return IR_OK;
}
