/* ir-alias.c - which values share a buffer: views (DESIGN.md, "Views"; ir.h states the rule) and
 * the overwriters that in-place outputs make of them.
 *
 * A view re-describes its base's bytes: Reshape, Flatten, Squeeze and Unsqueeze of any device
 * value, and a Transpose swapping the last two axes whose only readers are MatMul/Gemm operands
 * (a transposed operand). Every device buffer is contiguous in the layout its shape says, except
 * a transposed operand's; and since a transposed operand is read by MatMul/Gemm only, no other
 * view ever reads one, so the reshape-like views always see a contiguous base.
 *
 * Invariants the rest of magpie relies on:
 *  - an in-place output never takes over a view, nor a value of which a graph output is a view
 *    (ir_view_blocks_inplace): the write would change bytes that another value still shows; the
 *    bulk functions mark those values once (viewed_by_outputs) rather than per in-place value;
 *  - a value's root (ir_graph_buffer_roots) owns the bytes of every value with that root, so
 *    counting bytes at roots and reads through any member counts each buffer once. */
#include "ir-impl.h"

#include <stdlib.h>
#include <string.h>

/* Transpose's perm swaps the last two axes and keeps the others (rank >= 2). */
static bool swaps_last_two(const ir_node *n, int rank) {
    if (rank < 2) return false;
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    if (np < 0) return rank == 2; /* the default reverses the axes */
    if (np != rank) return false;
    for (int i = 0; i < rank - 2; i++)
        if (p[i] != i) return false;
    return p[rank - 2] == rank - 1 && p[rank - 1] == rank - 2;
}

/* Reads input k of n as a GEMM operand (A or B), which the kernel can read transposed. */
static bool gemm_operand(const ir_node *n, int k) {
    return (n->op == IR_OP_MatMul || n->op == IR_OP_Gemm) && k < 2;
}

/* The base of v when v's producer could make it a view (its readers aside): the op is a view op,
 * v is its output 0, and input 0 is a device value; -1 otherwise. */
static int view_candidate(const ir_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return -1;
    int p = g->values[v].producer;
    if (p < 0 || p >= g->n_nodes) return -1;
    const ir_node *n = &g->nodes[p];
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !(def->flags & IR_OPF_VIEW) || n->n_out < 1 || n->out[0] != v || n->n_in < 1)
        return -1;
    int b = n->in[0];
    if (b < 0 || b >= g->n_values || ir_value_on_host(g, b)) return -1;
    if (g->values[b].producer < 0 && !(g->values[b].flags & IR_VF_INPUT) && !g->values[b].blob)
        return -1; /* no data anywhere: not a device value */
    if (n->op == IR_OP_Transpose && !swaps_last_two(n, g->values[b].shape.rank)) return -1;
    return b;
}

static bool is_transpose_output(const ir_graph *g, int v) {
    int p = g->values[v].producer;
    return p >= 0 && g->nodes[p].op == IR_OP_Transpose;
}

int ir_value_view_of(const ir_graph *g, int v) {
    int b = view_candidate(g, v);
    if (b < 0 || !is_transpose_output(g, v)) return b;
    if (g->values[v].flags & IR_VF_OUTPUT) return -1;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] != v) continue;
            if (!gemm_operand(n, k)) return -1;
            readers++;
        }
    }
    return readers ? b : -1;
}

int ir_value_alias_of(const ir_graph *g, int v) {
    int b = ir_value_view_of(g, v);
    return b >= 0 ? b : ir_value_inplace_of(g, v);
}

/* base[v] = ir_value_view_of(g, v) for every value, in O(nodes + values). */
static void view_bases(const ir_graph *g, int *base) {
    enum { UNREAD = -2, GEMM_ONLY = -3, COPY = -4 }; /* a Transpose candidate's readers so far */
    for (int v = 0; v < g->n_values; v++) base[v] = -1;
    /* Only output 0 of a view op can be a candidate: visit those instead of every value (this
     * runs in every topological sort and buffer-root pass of the search). */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->n_out < 1 || n->out[0] < 0 || n->out[0] >= g->n_values) continue;
        const ir_op_def *def = ir_op_get(n->op);
        if (!def || !(def->flags & IR_OPF_VIEW)) continue;
        int v = n->out[0];
        base[v] = view_candidate(g, v);
        if (base[v] >= 0 && is_transpose_output(g, v))
            base[v] = (g->values[v].flags & IR_VF_OUTPUT) ? COPY : UNREAD;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || v >= g->n_values || (base[v] != UNREAD && base[v] != GEMM_ONLY)) continue;
            base[v] = gemm_operand(n, k) ? GEMM_ONLY : COPY;
        }
    }
    for (int v = 0; v < g->n_values; v++) {
        if (base[v] == GEMM_ONLY)
            base[v] = g->nodes[g->values[v].producer].in[0];
        else if (base[v] < -1)
            base[v] = -1;
    }
}

/* A graph output is never a transposed operand, and a transposed operand is read by MatMul/Gemm
 * only (so never by an in-place node): only reshape-like chains lead from a graph output down to
 * the value an in-place node writes. */
static bool reshape_view(const ir_graph *g, int w, int *base) {
    *base = view_candidate(g, w);
    return *base >= 0 && !is_transpose_output(g, w);
}

/* viewed[v] = 1 when a graph output is a view of v (the bases down each output's chain). */
static void viewed_by_outputs(const ir_graph *g, uint8_t *viewed) {
    memset(viewed, 0, (size_t)g->n_values);
    for (int i = 0; i < g->n_outputs; i++) {
        int w = g->outputs[i], b, steps = 0;
        while (reshape_view(g, w, &b) && steps++ < g->n_values) viewed[w = b] = 1;
    }
}

bool ir_view_blocks_inplace(const ir_graph *g, int x, const uint8_t *viewed) {
    int b;
    if (reshape_view(g, x, &b)) return true;
    if (viewed) return viewed[x] != 0;
    for (int i = 0; i < g->n_outputs; i++) {
        int w = g->outputs[i], steps = 0;
        while (reshape_view(g, w, &b) && steps++ < g->n_values) {
            if (b == x) return true;
            w = b;
        }
    }
    return false;
}

void ir_graph_buffer_roots(const ir_graph *g, int *root) {
    /* without memory for the marks, each in-place value searches the outputs itself */
    uint8_t *viewed = malloc((size_t)g->n_values + 1);
    if (viewed) viewed_by_outputs(g, viewed);
    view_bases(g, root);
    for (int v = 0; v < g->n_values; v++) {
        if (root[v] < 0) root[v] = ir_inplace_input(g, v, viewed);
        if (root[v] < 0) root[v] = v;
    }
    free(viewed);
    /* Every link points from a value to the one whose buffer it uses, and chains are short (a
     * view of a view, a fission's parts); the bound only guards a malformed graph. */
    for (int v = 0; v < g->n_values; v++) {
        int r = v, steps = 0;
        while (root[r] != r && steps++ < g->n_values) r = root[r];
        root[v] = r;
    }
}

bool ir_graph_overwriters(const ir_graph *g, bool taken_only, int *owner) {
    int nv = g->n_values;
    for (int v = 0; v < nv; v++) owner[v] = -1;
    int *base = malloc(sizeof(int) * ((size_t)nv + 1));
    uint8_t *viewed = malloc((size_t)nv + 1);
    if (!base || !viewed) {
        free(base);
        free(viewed);
        return false;
    }
    if (taken_only) viewed_by_outputs(g, viewed); /* only ir_inplace_input below reads it */
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const ir_op_def *def = ir_op_get(n->op);
        if (!def || !(def->flags & IR_OPF_INPLACE)) continue;
        for (int k = 0; k < n->n_out && k < n->n_in; k++) {
            int x = n->in[k];
            if (x < 0 || x >= nv) continue;
            if (taken_only && (n->out[k] < 0 || ir_inplace_input(g, n->out[k], viewed) != x))
                continue;
            owner[x] = i;
            any = true;
        }
    }
    free(viewed);
    if (!any) {
        free(base);
        return true;
    }
    view_bases(g, base);
    /* A view reads its base's bytes: it gets the owner of the nearest value down its chain. */
    for (int v = 0; v < nv; v++) {
        int w = v, steps = 0;
        while (owner[w] < 0 && base[w] >= 0 && steps++ < nv) w = base[w];
        owner[v] = owner[w];
    }
    free(base);
    return true;
}
