/* ir-fold.c - constant folding and pruning.
 *
 * Folding evaluates a node with its own CPU kernel (the op table's, so folded results are
 * exactly what the executor would compute) into fresh blobs and turns its outputs into
 * constants. Trainable parameters are never folded into other values: their data changes
 * during training, and autodiff must still see the ops that read them.
 *
 * Pruning keeps graph inputs (even unused: they are part of the model's signature), graph
 * outputs (a constant output is legal), and whatever a node that reaches an output reads or
 * writes; it compacts the value array so ids stay dense. */
#include "ir-fold.h"

#include <stdlib.h>

/* Shape-only kernels read no input data, but a NULL data pointer means "omitted optional
 * input" to kernels, so non-constant inputs of Shape/Size get this placeholder. */
static const _Alignas(64) unsigned char shape_only_placeholder[64];

/* weights: parameters with data count as constants (ir_fold_weights_node). */
static bool can_fold(const ir_graph *g, const ir_node *n, const ir_op_def *def, bool weights) {
    if (!def || !def->kernel || (def->flags & IR_OPF_RANDOM) || n->n_out == 0) return false;
    if (weights && (def->flags & (IR_OPF_INPLACE | IR_OPF_HOST_OUTPUT))) return false;
    /* A FissionBuffer's zeros stand for an allocation at its step (ops-fission.c); as a constant
     * the buffer would be resident for the whole run. */
    if (n->op == IR_OP_FissionBuffer) return false;
    bool shape_only = (def->flags & IR_OPF_SHAPE_ONLY) != 0;
    for (int k = 0; k < n->n_in; k++) {
        const ir_value *v = ir_node_in(g, n, k);
        if (!v) continue;
        if (v->dtype == IR_DTYPE_NONE) return false;
        if (shape_only) continue;
        if (!(v->flags & IR_VF_CONST) || (!weights && (v->flags & IR_VF_PARAM)) || !v->blob)
            return false;
    }
    size_t total = 0, in_bytes = 0;
    bool any_out = false;
    for (int k = 0; k < n->n_out; k++) {
        const ir_value *v = ir_node_out(g, n, k);
        if (!v) continue;
        if (v->dtype == IR_DTYPE_NONE || (weights && (v->flags & IR_VF_OUTPUT))) return false;
        total += ir_value_bytes(v);
        if (total > IR_FOLD_MAX_BYTES) return false;
        any_out = true;
    }
    /* A broadcast of a small constant to a large tensor (a training graph's seed gradient,
     * Expand(1, shape of the output)) stays an op: as a constant it would be resident for the
     * whole run, while the op allocates it only for its lifetime, and a fission can slice it.
     * Shape arithmetic (small int64 tensors) still folds. */
    if (n->op == IR_OP_Expand || n->op == IR_OP_Tile || n->op == IR_OP_ConstantOfShape) {
        for (int k = 0; k < n->n_in; k++) {
            const ir_value *v = ir_node_in(g, n, k);
            if (v) in_bytes += ir_value_bytes(v);
        }
        if (total > IR_FOLD_BROADCAST_BYTES && total > 2 * in_bytes) return false;
    }
    return any_out;
}

static ir_status fold_node(ir_graph *g, int idx, bool weights, bool *folded, ir_diag *d) {
    ir_node *n = &g->nodes[idx];
    const ir_op_def *def = ir_op_get(n->op);
    *folded = false;
    if (!can_fold(g, n, def, weights)) return IR_OK;

    ir_status st = IR_OK;
    ir_tensor *tin = calloc((size_t)n->n_in + 1, sizeof *tin);
    ir_tensor *tout = calloc((size_t)n->n_out, sizeof *tout);
    ir_blob **blobs = calloc((size_t)n->n_out, sizeof *blobs);
    void *ws = NULL;
    size_t ws_bytes = ir_node_workspace(g, n);
    if (!tin || !tout || !blobs) goto out_nomem;
    if (ws_bytes && !(ws = aligned_alloc(64, (ws_bytes + 63) & ~(size_t)63))) goto out_nomem;
    for (int k = 0; k < n->n_in; k++) {
        const ir_value *v = ir_node_in(g, n, k);
        tin[k].dtype = v ? v->dtype : IR_DTYPE_NONE;
        if (!v) continue;
        tin[k].shape = v->shape;
        tin[k].data = v->blob ? ir_blob_data(v->blob) : (void *)shape_only_placeholder;
    }
    for (int k = 0; k < n->n_out; k++) {
        const ir_value *v = ir_node_out(g, n, k);
        tout[k].dtype = v ? v->dtype : IR_DTYPE_NONE;
        if (!v) continue;
        tout[k].shape = v->shape;
        if (!(blobs[k] = ir_blob_new(ir_value_bytes(v)))) goto out_nomem;
        tout[k].data = ir_blob_data(blobs[k]);
    }

    ir_diag kd = {{0}};
    ir_kernel_ctx k = {.graph = g,
                       .node = n,
                       .n_in = n->n_in,
                       .n_out = n->n_out,
                       .in = tin,
                       .out = tout,
                       .workspace = ws,
                       .workspace_bytes = ws_bytes,
                       .seed = 0,
                       .diag = &kd};
    ir_status kst = ir_node_run(&k);
    if (kst == IR_ERR_UNSUPPORTED) goto out; /* the executor may still run it; keep the node */
    if (kst != IR_OK) {
        if (kd.msg[0] && strncmp(kd.msg, "node '", 6) == 0)
            st = ir_diag_set(d, kst, "%s", kd.msg);
        else
            st = ir_node_fail(d, kst, n, "constant folding failed: %s",
                              kd.msg[0] ? kd.msg : ir_status_to_string(kst));
        goto out;
    }
    for (int k = 0; k < n->n_out; k++) {
        ir_value *v = ir_node_out(g, n, k);
        if (!v) continue;
        ir_blob_unref(v->blob);
        v->blob = blobs[k];
        blobs[k] = NULL;
        v->flags = (v->flags & ~(unsigned)(IR_VF_INITIALIZER | IR_VF_PARAM)) | IR_VF_CONST;
        v->producer = -1;
    }
    *folded = true;
    goto out;

out_nomem:
    st = ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory while folding constants");
out:
    if (blobs)
        for (int k = 0; k < n->n_out; k++) ir_blob_unref(blobs[k]);
    free(blobs);
    free(tin);
    free(tout);
    free(ws);
    return st;
}

ir_status ir_fold_node(ir_graph *g, int idx, bool *folded, ir_diag *d) {
    return fold_node(g, idx, false, folded, d);
}

bool ir_can_fold_weights_node(const ir_graph *g, int idx) {
    const ir_node *n = &g->nodes[idx];
    return can_fold(g, n, ir_op_get(n->op), true);
}

ir_status ir_fold_weights_node(ir_graph *g, int idx, bool *folded, ir_diag *d) {
    return fold_node(g, idx, true, folded, d);
}

ir_status ir_fold_constants(ir_graph *g, ir_diag *d) {
    for (int i = 0; i < g->n_nodes; i++) {
        bool folded;
        ir_status st = ir_fold_node(g, i, &folded, d);
        if (st != IR_OK) return st;
    }
    ir_graph_prune(g);
    return IR_OK;
}

void ir_graph_prune(ir_graph *g) {
    unsigned char *needed = calloc((size_t)g->n_values + 1, 1);
    unsigned char *live = calloc((size_t)g->n_nodes + 1, 1);
    int *remap = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    /* Out of memory: nothing is removed; ir_graph_validate then reports any folded node still
     * in the graph, so the failure cannot go unnoticed. */
    if (!needed || !live || !remap) goto out;

    for (int i = 0; i < g->n_outputs; i++) needed[g->outputs[i]] = 1;
    /* g->nodes is topological, so one reverse pass sees every consumer before its producer. A
     * node is live when it still produces (folded nodes are detached: producer != i) a needed
     * value. */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out && !live[i]; k++) {
            int v = n->out[k];
            if (v >= 0 && needed[v] && g->values[v].producer == i) live[i] = 1;
        }
        if (!live[i]) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) needed[n->in[k]] = 1;
    }
    /* Values a live node writes stay too (e.g. an unused Dropout mask): the node refers to them. */
    for (int i = 0; i < g->n_nodes; i++)
        if (live[i])
            for (int k = 0; k < g->nodes[i].n_out; k++)
                if (g->nodes[i].out[k] >= 0) needed[g->nodes[i].out[k]] = 1;
    for (int i = 0; i < g->n_inputs; i++) needed[g->inputs[i]] = 1;

    int nv = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (!needed[v]) {
            ir_blob_unref(g->values[v].blob);
            remap[v] = -1;
            continue;
        }
        remap[v] = nv;
        g->values[nv++] = g->values[v];
    }
    g->n_values = nv;

    int nn = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!live[i]) {
            for (int a = 0; a < g->nodes[i].n_attrs; a++) {
                ir_blob_unref(g->nodes[i].attrs[a].t_blob);
                g->nodes[i].attrs[a].t_blob = NULL;
            }
            continue;
        }
        ir_node *n = &g->nodes[nn];
        *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) n->in[k] = remap[n->in[k]];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) n->out[k] = remap[n->out[k]];
        nn++;
    }
    g->n_nodes = nn;
    for (int i = 0; i < g->n_inputs; i++) g->inputs[i] = remap[g->inputs[i]];
    for (int i = 0; i < g->n_outputs; i++) g->outputs[i] = remap[g->outputs[i]];
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0) g->values[g->nodes[i].out[k]].producer = i;
out:
    free(needed);
    free(live);
    free(remap);
}
