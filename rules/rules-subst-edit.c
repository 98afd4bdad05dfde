/* rules-subst-edit.c - what every substitution rule builds on (rules-impl.h, "substitution
 * edits"): predicates on the matched nodes, and rw_edit, the edit of a cloned graph that
 * records the nodes it removes and the stable ids it touches, then commits them at once. The
 * rules that edit this way are in rules-subst.c (TASO-style) and rules-pool.c. */
#include "rules-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- small predicates */

bool rw_is_const(const ir_graph *g, int v) {
    return v >= 0 && (g->values[v].flags & IR_VF_CONST) && g->values[v].blob;
}

bool rw_is_output(const ir_graph *g, int v) {
    return (g->values[v].flags & IR_VF_OUTPUT) != 0;
}

int rw_n_readers(const rw_users *u, int v) {
    return u->off[v + 1] - u->off[v];
}

/* v is read by node i alone and is not a graph output: removing i's reading leaves v dead. */
bool rw_only_reader(const ir_graph *g, const rw_users *u, int v, int i) {
    return !rw_is_output(g, v) && rw_n_readers(u, v) == 1 && u->node[u->off[v]] == i;
}

/* Nodes carrying magpie's own tags (a fission group's "magpie_fission_*") belong to another
 * rewrite's structure: substitutions leave them alone. */
bool rw_tagged(const ir_node *n) {
    for (int a = 0; a < n->n_attrs; a++)
        if (!strncmp(n->attrs[a].name, "magpie_", 7)) return true;
    return false;
}

/* The producer of v when it is an untagged node of op `op` with output 0 = v, else -1. */
int rw_producer_of(const ir_graph *g, int v, ir_op_kind op) {
    int p = v >= 0 ? g->values[v].producer : -1;
    return p >= 0 && g->nodes[p].op == op && g->nodes[p].out[0] == v && !rw_tagged(&g->nodes[p])
               ? p
               : -1;
}

/* ---------------------------------------------------------------- the edit in progress */

void rw_edit_touch(rw_edit *e, uint32_t id) {
    rw_touch(&e->touched, id);
}

/* Marks node i for removal at rw_edit_commit (and touches it). */
void rw_edit_kill(rw_edit *e, int i) {
    uint32_t id = e->g->nodes[i].id;
    rw_edit_touch(e, id);
    for (int k = 0; k < e->n_dead; k++)
        if (e->dead[k] == id) return;
    IR_ASSERT(e->n_dead < RW_EDIT_MAX_DEAD); /* matchers bound the nodes a rule removes */
    e->dead[e->n_dead++] = id;
}

ir_status rw_edit_nomem(rw_edit *e, const char *what) {
    return ir_diag_set(e->d, IR_ERR_NOMEM, "substitution: out of memory %s", what);
}

/* A new value named after base; -1 when out of memory. */
int rw_edit_value(ir_graph *g, const char *base, const char *suffix, ir_dtype t,
                  const ir_shape *s) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s%u", base, suffix, g->next_node_id);
    return ir_graph_add_value(g, name, t, s);
}

/* A new constant taking over blob b (released on failure). */
int rw_edit_const(ir_graph *g, const char *base, const char *suffix, ir_dtype t, const ir_shape *s,
                  ir_blob *b) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s%u", base, suffix, g->next_node_id);
    return rw_add_const_blob(g, name, t, s, b);
}

/* Adds a node named after base, infers it and touches it. Outputs that existed before keep
 * their dtype and shape or the rewrite fails as a bug (IR_ERR_INTERNAL): that is the check that
 * the new nodes compute the tensors the old ones did. */
ir_status rw_edit_node(rw_edit *e, ir_op_kind op, const char *base, const char *suffix, int n_in,
                       const int *in, int n_out, const int *out, int n_attrs,
                       const ir_attr *attrs) {
    ir_graph *g = e->g;
    enum { MAXO = 8 };
    IR_ASSERT(n_out <= MAXO);
    ir_shape old[MAXO];
    ir_dtype oldt[MAXO];
    for (int k = 0; k < n_out; k++) {
        old[k] = g->values[out[k]].shape;
        oldt[k] = g->values[out[k]].dtype;
    }
    char name[512];
    snprintf(name, sizeof name, "%.400s.%s%u", base, suffix, g->next_node_id);
    int ni = ir_graph_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    if (ni < 0) return rw_edit_nomem(e, "adding a node");
    rw_edit_touch(e, g->nodes[ni].id);
    ir_status st = ir_node_infer(g, &g->nodes[ni], e->d);
    if (st != IR_OK) return st;
    for (int k = 0; k < n_out; k++) {
        const ir_value *v = &g->values[out[k]];
        if (v->dtype != oldt[k] || !ir_shape_eq(&v->shape, &old[k]))
            return ir_node_fail(e->d, IR_ERR_INTERNAL, &g->nodes[ni],
                                "substitution changes the dtype or shape of '%s'", v->name);
    }
    return IR_OK;
}

/* Split(y) along axis into outs (sizes n[i]): the sizes as an input from opset 13, as the
 * `split` attribute before, which is what the executor and ONNX both read. */
ir_status rw_edit_split(rw_edit *e, const char *base, int y, int axis, int n, const int64_t *sz,
                        const int *outs) {
    ir_graph *g = e->g;
    ir_attr at[2] = {{.name = "axis", .type = IR_ATTR_INT, .i = axis}};
    int n_attrs = 1, in[2] = {y, -1}, n_in = 1;
    if (g->opset >= 13) {
        char name[512];
        snprintf(name, sizeof name, "%.400s.split%u", base, g->next_node_id);
        if ((in[1] = rw_add_const_i64(g, name, n, sz)) < 0)
            return rw_edit_nomem(e, "adding split sizes");
        n_in = 2;
    } else {
        int64_t *ints = ir_graph_alloc(g, sizeof(int64_t) * (size_t)n);
        if (!ints) return rw_edit_nomem(e, "adding split sizes");
        memcpy(ints, sz, sizeof(int64_t) * (size_t)n);
        at[1] = (ir_attr){.name = "split", .type = IR_ATTR_INTS, .n = n, .ints = ints};
        n_attrs = 2;
    }
    return rw_edit_node(e, IR_OP_Split, base, "split", n_in, in, n, outs, n_attrs, at);
}

/* Readers (pre-edit) of `from` except the dead read `to` instead, each touched. */
void rw_edit_rewire(rw_edit *e, int from, int to) {
    for (int r = e->u.off[from]; r < e->u.off[from + 1]; r++) {
        ir_node *n = &e->g->nodes[e->u.node[r]];
        bool dead = false;
        for (int k = 0; k < e->n_dead; k++) dead |= e->dead[k] == n->id;
        if (dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) n->in[k] = to;
        rw_edit_touch(e, n->id);
    }
}

/* Removes the dead nodes, their remaining outputs, dead_val, and the constants only dead nodes
 * read; compacts value ids (node ids never change). */
ir_status rw_edit_commit(rw_edit *e) {
    ir_graph *g = e->g;
    int nn = g->n_nodes, nv = g->n_values;
    unsigned char *dead = calloc((size_t)nn + 1, 1), *vdead = calloc((size_t)nv + 1, 1),
                  *read = calloc((size_t)nv + 1, 1);
    ir_status st = IR_OK;
    if (!dead || !vdead || !read) {
        st = rw_edit_nomem(e, "removing nodes");
        goto out;
    }
    for (int k = 0; k < e->n_dead; k++) {
        int i = rw_find_node(g, e->dead[k]);
        IR_ASSERT(i >= 0);
        dead[i] = 1;
    }
    for (int i = 0; i < nn; i++)
        if (!dead[i])
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] >= 0) read[g->nodes[i].in[k]] = 1;
    for (int i = 0; i < nn; i++) {
        if (!dead[i]) continue;
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) {
                /* the rule re-produced every output that someone still needs */
                IR_ASSERT(!read[n->out[k]] && !rw_is_output(g, n->out[k]));
                vdead[n->out[k]] = 1;
            }
        rw_mark_unread_constants(g, n, read, vdead);
    }
    if (e->dead_val >= 0) {
        IR_ASSERT(!read[e->dead_val] && !rw_is_output(g, e->dead_val));
        vdead[e->dead_val] = 1;
    }
    st = rw_remove(g, dead, vdead, e->d);
out:
    free(dead);
    free(vdead);
    free(read);
    return st;
}

static bool ints_attr(const ir_attr *at, int n, int64_t *out) {
    if (at->type != IR_ATTR_INTS || at->n != n) return false;
    memcpy(out, at->ints, sizeof(int64_t) * (size_t)n);
    return true;
}

bool rw_conv_geometry(const ir_graph *g, const ir_node *n, rw_conv_geo *c) {
    const ir_shape *w = &g->values[n->in[1]].shape;
    memset(c, 0, sizeof *c); /* compared with memcmp: unused entries are 0 */
    c->S = w->rank - 2;
    if (c->S < 1 || c->S > 3) return false;
    for (int i = 0; i < c->S; i++) c->strides[i] = c->dil[i] = 1;
    for (int i = 0; i < 2 * c->S; i++) c->pads[i] = 0;
    c->group = 1;
    c->auto_pad = "NOTSET";
    for (int a = 0; a < n->n_attrs; a++) {
        const ir_attr *at = &n->attrs[a];
        int64_t ks[3];
        bool ok;
        if (!strcmp(at->name, "strides"))
            ok = ints_attr(at, c->S, c->strides);
        else if (!strcmp(at->name, "dilations"))
            ok = ints_attr(at, c->S, c->dil);
        else if (!strcmp(at->name, "pads"))
            ok = ints_attr(at, 2 * c->S, c->pads);
        else if (!strcmp(at->name, "kernel_shape"))
            ok = ints_attr(at, c->S, ks) && !memcmp(ks, w->dims + 2, sizeof(int64_t) * c->S);
        else if (!strcmp(at->name, "group"))
            ok = at->type == IR_ATTR_INT && (c->group = at->i, true);
        else if (!strcmp(at->name, "auto_pad"))
            ok = at->type == IR_ATTR_STRING && (c->auto_pad = at->s ? at->s : "", true);
        else
            ok = false;
        if (!ok) return false;
    }
    return true;
}
