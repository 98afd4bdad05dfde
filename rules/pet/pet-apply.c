/* pet-apply.c - pet_apply (pet-opt.h): a PET candidate spliced into a graph in place of its
 * sub-program.
 *
 * The sub-program's nodes are found by their stable ids; its boundary is found by name: each
 * graph input of the replacement is the graph's value of that name (produced outside the
 * sub-program, same dtype and shape), each output the value of that name that a node of the
 * sub-program produces. Those values are reused as they are, so every node outside keeps its
 * inputs, ids and names. The replacement's nodes get fresh ids (g->next_node_id onward) and
 * names "<first node of the sub-program>.pet<k>.<name>", as do its inner values; they are placed
 * where the sub-program's first node was, and a stable topological sort fixes the rare case of
 * a group whose later part reads a value computed after that point. Values that only the removed
 * nodes produced or read (inner values, their integer parameters, weights nothing reads any
 * more) are dropped; graph inputs never are.
 *
 * Invariants: g is not modified; the result validates (ir_graph_validate) and is topological;
 * touched holds the removed ids, then the added ones. */
#include "pet-opt.h"

#include "pet-correct-impl.h"
#include "rules.h"

#include <stdio.h>

typedef struct apply_ws {
    const ir_graph *g, *r;
    ir_graph *out;
    int *node_of;        /* g node index per stable id (-1), sized g->next_node_id */
    unsigned char *gone; /* per g node: in the sub-program */
    int *vmap;           /* g value -> out value (-1: dropped) */
    int *rmap;           /* replacement value -> out value */
    char prefix[160];
    ir_diag *d;
} apply_ws;

/* IR_ERR_INVALID: "PET candidate K: <why> '<name>'". */
static ir_status invalid(apply_ws *w, int k, const char *why, const char *name) {
    return ir_diag_set(w->d, IR_ERR_INVALID, "PET candidate %d: %s '%s'", k, why, name);
}

/* The g value named name, or -1. */
static int g_value(const ir_graph *g, const char *name) {
    return ir_graph_find_value(g, name);
}

/* Whether the replacement has an output named name. */
static bool r_output(const ir_graph *r, const char *name) {
    int v = ir_graph_find_value(r, name);
    return v >= 0 && (r->values[v].flags & IR_VF_OUTPUT);
}

/* Finds the sub-program's nodes and checks the boundary; IR_ERR_INVALID when g is not a graph
 * the candidate applies to. *first gets the sub-program's first node index. */
static ir_status locate(apply_ws *w, const pet_subprog *sp, int k, int *first) {
    const ir_graph *g = w->g, *r = w->r;
    *first = g->n_nodes;
    for (int i = 0; i < sp->n_nodes; i++) {
        uint32_t id = sp->node_ids[i];
        int ni = id < g->next_node_id ? w->node_of[id] : -1;
        if (ni < 0) {
            return ir_diag_set(w->d, IR_ERR_INVALID,
                               "PET candidate %d: node id %u of its sub-program is not in the "
                               "graph",
                               k, id);
        }
        if (!pet_node_is_multilinear(g, &g->nodes[ni]))
            return invalid(w, k, "node of the sub-program has changed:", g->nodes[ni].name);
        w->gone[ni] = 1;
        if (ni < *first) *first = ni;
    }
    for (int i = 0; i < r->n_inputs; i++) {
        const ir_value *rv = &r->values[r->inputs[i]];
        int v = g_value(g, rv->name);
        if (v < 0 || g->values[v].dtype != rv->dtype ||
            !ir_shape_eq(&g->values[v].shape, &rv->shape) ||
            (g->values[v].producer >= 0 && w->gone[g->values[v].producer]))
            return invalid(w, k, "the graph has no input of the sub-program named", rv->name);
        w->rmap[r->inputs[i]] = v; /* a g value for now; remapped once out exists */
    }
    for (int i = 0; i < r->n_outputs; i++) {
        const ir_value *rv = &r->values[r->outputs[i]];
        int v = g_value(g, rv->name);
        if (v < 0 || g->values[v].producer < 0 || !w->gone[g->values[v].producer] ||
            g->values[v].dtype != rv->dtype || !ir_shape_eq(&g->values[v].shape, &rv->shape))
            return invalid(w, k, "the sub-program does not produce its output", rv->name);
    }
    /* every value the sub-program produces that is used outside must be an output */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int q = 0; q < n->n_in; q++) {
            int v = n->in[q];
            if (v < 0 || w->gone[i] || g->values[v].producer < 0 || !w->gone[g->values[v].producer])
                continue;
            if (!r_output(r, g->values[v].name))
                return invalid(
                    w, k, "a value the sub-program produces is read outside:", g->values[v].name);
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i], p = g->values[v].producer;
        if (p >= 0 && w->gone[p] && !r_output(r, g->values[v].name))
            return invalid(w, k, "a graph output the sub-program produces is not replaced:",
                           g->values[v].name);
    }
    return IR_OK;
}

/* Copies the values of g the result keeps into out (vmap). */
static ir_status copy_values(apply_ws *w) {
    const ir_graph *g = w->g;
    unsigned char *read = calloc((size_t)g->n_values + 1, 1),
                  *read_gone = calloc((size_t)g->n_values + 1, 1);
    if (!read || !read_gone) {
        free(read);
        free(read_gone);
        return ir_diag_set(w->d, IR_ERR_NOMEM, "PET: out of memory applying a candidate");
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int q = 0; q < g->nodes[i].n_in; q++)
            if (g->nodes[i].in[q] >= 0) (w->gone[i] ? read_gone : read)[g->nodes[i].in[q]] = 1;
    for (int i = 0; i < w->r->n_inputs; i++) read[w->rmap[w->r->inputs[i]]] = 1;
    ir_status st = IR_OK;
    for (int v = 0; v < g->n_values && st == IR_OK; v++) {
        const ir_value *sv = &g->values[v];
        bool keep;
        if (sv->producer >= 0) { /* computed: kept unless only the sub-program needed it */
            keep = !w->gone[sv->producer] || r_output(w->r, sv->name);
        } else { /* a resident: dropped only when nothing but the removed nodes read it */
            keep = read[v] || (sv->flags & (IR_VF_INPUT | IR_VF_OUTPUT)) || !read_gone[v];
        }
        w->vmap[v] = -1;
        if (!keep) continue;
        int nv = ir_graph_add_value(w->out, sv->name, sv->dtype, &sv->shape);
        if (nv < 0) {
            st = ir_diag_set(w->d, IR_ERR_NOMEM, "PET: out of memory applying a candidate");
            break;
        }
        w->out->values[nv].flags = sv->flags;
        w->out->values[nv].blob = ir_blob_ref(sv->blob);
        w->vmap[v] = nv;
    }
    free(read);
    free(read_gone);
    return st;
}

/* Adds a copy of node n (of src) to out on inputs in / outputs o, with id `id`. */
static int add_copy(ir_graph *out, const ir_node *n, const char *name, const int *in, const int *o,
                    uint32_t id) {
    ir_attr *at = pc_copy_attrs(out, n);
    if (!at) return -1;
    uint32_t next = out->next_node_id;
    int ni = ir_graph_add_node(out, n->op, name, n->n_in, in, n->n_out, o, n->n_attrs, at);
    if (ni < 0) return -1;
    ir_node *m = &out->nodes[ni];
    m->id = id;
    out->next_node_id = next > id + 1 ? next : id + 1;
    m->op_type = ir_graph_strdup(out, n->op_type);
    m->domain = ir_graph_strdup(out, n->domain);
    return m->op_type && m->domain ? ni : -1;
}

/* The replacement's nodes, after the boundary values are mapped (rmap of its inputs and of the
 * outputs its nodes produce); new ids into touched. Its other values get fresh names; an output
 * it does not compute (a pass-through of an input or a constant) is copied by an Identity. */
static ir_status add_replacement(apply_ws *w, uint32_t *touched, int *nt) {
    const ir_graph *r = w->r;
    ir_graph *out = w->out;
    char nm[512];
    int ins[64], outs[64];
    for (int v = 0; v < r->n_values; v++) {
        if (w->rmap[v] >= 0) continue;
        const ir_value *rv = &r->values[v];
        snprintf(nm, sizeof nm, "%s%s", w->prefix, rv->name);
        int nv = ir_graph_add_value(out, nm, rv->dtype, &rv->shape);
        if (nv < 0) goto nomem;
        out->values[nv].flags = rv->flags & ~(unsigned)(IR_VF_INPUT | IR_VF_OUTPUT);
        out->values[nv].blob = ir_blob_ref(rv->blob);
        w->rmap[v] = nv;
    }
    for (int i = 0; i < r->n_nodes; i++) {
        const ir_node *n = &r->nodes[i];
        if (n->n_in > 64 || n->n_out > 64)
            return ir_node_fail(w->d, IR_ERR_UNSUPPORTED, n, "more than 64 inputs or outputs");
        for (int q = 0; q < n->n_in; q++) ins[q] = n->in[q] < 0 ? -1 : w->rmap[n->in[q]];
        for (int q = 0; q < n->n_out; q++) outs[q] = n->out[q] < 0 ? -1 : w->rmap[n->out[q]];
        snprintf(nm, sizeof nm, "%s%s", w->prefix, n->name);
        if (add_copy(out, n, nm, ins, outs, out->next_node_id) < 0) goto nomem;
        touched[(*nt)++] = out->nodes[out->n_nodes - 1].id;
    }
    for (int i = 0; i < r->n_outputs; i++) {
        int v = r->outputs[i], gv = w->vmap[g_value(w->g, r->values[v].name)];
        if (w->rmap[v] == gv) continue; /* written by its node */
        snprintf(nm, sizeof nm, "%s%s.identity", w->prefix, r->values[v].name);
        if (ir_graph_add_node(out, IR_OP_Identity, nm, 1, &w->rmap[v], 1, &gv, 0, NULL) < 0)
            goto nomem;
        touched[(*nt)++] = out->nodes[out->n_nodes - 1].id;
    }
    return IR_OK;
nomem:
    return ir_diag_set(w->d, IR_ERR_NOMEM, "PET: out of memory applying a candidate");
}

ir_graph *pet_apply(const ir_graph *g, const pet_table *t, int k, uint32_t *touched, int *n_touched,
                    ir_status *st, ir_diag *d) {
    IR_ASSERT(t && k >= 0 && k < t->n);
    const pet_candidate *cand = &t->c[k];
    const pet_subprog *sp = &t->split->progs[cand->subprog];
    const ir_graph *r = cand->replacement;
    apply_ws w = {.g = g, .r = r, .d = d};
    ir_status rc = IR_OK;
    int nt = 0, first;
    uint32_t *tt = NULL;
    if (n_touched) *n_touched = 0;
    w.node_of = malloc(sizeof(int) * ((size_t)g->next_node_id + 1));
    w.gone = calloc((size_t)g->n_nodes + 1, 1);
    w.vmap = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    w.rmap = malloc(sizeof(int) * ((size_t)r->n_values + 1));
    tt = malloc(sizeof *tt * ((size_t)sp->n_nodes + (size_t)r->n_nodes + (size_t)r->n_outputs + 1));
    w.out = ir_graph_new();
    if (!w.node_of || !w.gone || !w.vmap || !w.rmap || !tt || !w.out) goto nomem;
    for (uint32_t id = 0; id < g->next_node_id; id++) w.node_of[id] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id < g->next_node_id) w.node_of[g->nodes[i].id] = i;
    for (int v = 0; v < r->n_values; v++) w.rmap[v] = -1;
    if ((rc = locate(&w, sp, k, &first)) != IR_OK) goto fail;
    snprintf(w.prefix, sizeof w.prefix, "%.120s.pet%d.", g->nodes[first].name, k);
    ir_graph *o = w.out;
    o->name = ir_graph_strdup(o, g->name);
    o->source = ir_graph_strdup(o, g->source);
    o->opset = g->opset;
    o->next_node_id = g->next_node_id;
    if ((rc = copy_values(&w)) != IR_OK) goto fail;
    for (int i = 0; i < g->n_inputs; i++) ir_graph_add_input(o, w.vmap[g->inputs[i]]);
    for (int i = 0; i < g->n_outputs; i++) ir_graph_add_output(o, w.vmap[g->outputs[i]]);
    /* boundary: the replacement's inputs and outputs are the graph's values of those names */
    for (int i = 0; i < r->n_inputs; i++) w.rmap[r->inputs[i]] = w.vmap[w.rmap[r->inputs[i]]];
    for (int i = 0; i < r->n_outputs; i++) { /* outputs its nodes compute write g's values */
        int v = r->outputs[i];
        if (r->values[v].producer >= 0) w.rmap[v] = w.vmap[g_value(g, r->values[v].name)];
    }
    for (int i = 0; i < sp->n_nodes; i++) tt[nt++] = sp->node_ids[i];
    int ins[64], outs[64];
    for (int i = 0; i < g->n_nodes; i++) {
        if (i == first && (rc = add_replacement(&w, tt, &nt)) != IR_OK) goto fail;
        if (w.gone[i]) continue;
        const ir_node *n = &g->nodes[i];
        int *in = n->n_in <= 64 ? ins : malloc(sizeof(int) * (size_t)n->n_in);
        int *ou = n->n_out <= 64 ? outs : malloc(sizeof(int) * (size_t)n->n_out);
        bool ok = in && ou;
        for (int q = 0; ok && q < n->n_in; q++) in[q] = n->in[q] < 0 ? -1 : w.vmap[n->in[q]];
        for (int q = 0; ok && q < n->n_out; q++) ou[q] = n->out[q] < 0 ? -1 : w.vmap[n->out[q]];
        ok = ok && add_copy(o, n, n->name, in, ou, n->id) >= 0;
        if (in != ins) free(in);
        if (ou != outs) free(ou);
        if (!ok) goto nomem;
    }
    for (int i = 0; i < o->n_nodes; i++) /* the new nodes' outputs: shapes as ir infers them */
        if (o->nodes[i].id >= g->next_node_id && (rc = ir_node_infer(o, &o->nodes[i], d)) != IR_OK)
            goto fail;
    if ((rc = ir_graph_toposort(o, d)) != IR_OK || (rc = ir_graph_validate(o, d)) != IR_OK)
        goto fail;
    if (nt > RW_MAX_FISSION_TOUCHED) {
        rc = ir_diag_set(d, IR_ERR_UNSUPPORTED, "PET candidate %d touches %d nodes (at most %d)", k,
                         nt, RW_MAX_FISSION_TOUCHED);
        goto fail;
    }
    if (touched) memcpy(touched, tt, sizeof *tt * (size_t)nt);
    if (n_touched) *n_touched = nt;
    free(w.node_of);
    free(w.gone);
    free(w.vmap);
    free(w.rmap);
    free(tt);
    if (st) *st = IR_OK;
    return o;
nomem:
    rc = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory applying a candidate");
fail:
    free(w.node_of);
    free(w.gone);
    free(w.vmap);
    free(w.rmap);
    free(tt);
    ir_graph_free(w.out);
    if (st) *st = rc;
    return NULL;
}
