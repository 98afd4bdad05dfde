/* rules-util.c - graph helpers shared by the rewrites of rules/ (rules-impl.h): lookups by
 * stable id, reader lists, attribute edits, int64 constants, the set of touched ids, and the
 * final sort-and-validate.
 *
 * Invariants: nothing here changes a node's id or a value's id; attribute arrays and names live
 * in the graph's arena (or are static), so graphs stay freeable in one call. */
#include "rules-impl.h"

#include <stdlib.h>
#include <string.h>

void rw_touch(rw_touch_set *t, uint32_t id) {
    for (int i = 0; i < t->n; i++)
        if (t->ids[i] == id) return;
    if (t->n == RW_MAX_TOUCHED)
        t->overflow = true;
    else
        t->ids[t->n++] = id;
}

int rw_find_node(const ir_graph *g, uint32_t id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id == id) return i;
    return -1;
}

int *rw_id_index(const ir_graph *g) {
    size_t n = (size_t)g->next_node_id + 1;
    int *map = malloc(sizeof(int) * n);
    if (!map) return NULL;
    for (size_t i = 0; i < n; i++) map[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        IR_ASSERT(g->nodes[i].id < g->next_node_id); /* ids come from next_node_id */
        map[g->nodes[i].id] = i;
    }
    return map;
}

ir_status rw_users_build(const ir_graph *g, rw_users *u, ir_diag *d) {
    u->off = calloc((size_t)g->n_values + 2, sizeof(int));
    u->node = NULL;
    if (!u->off) goto nomem;
    /* A node reading v at several inputs counts once: the last node counted per value is
     * remembered in `last`, which works because nodes are visited in order. */
    int *last = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!last) goto nomem;
    for (int v = 0; v < g->n_values; v++) last[v] = -1;
    int total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0 || last[v] == i) continue;
            last[v] = i;
            u->off[v + 1]++;
            total++;
        }
    for (int v = 0; v < g->n_values; v++) u->off[v + 1] += u->off[v];
    u->node = malloc(sizeof(int) * (size_t)(total ? total : 1));
    if (!u->node) {
        free(last);
        goto nomem;
    }
    for (int v = 0; v < g->n_values; v++) last[v] = -1;
    /* second pass: a write cursor per value fills its range in node order */
    int *cur = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!cur) {
        free(last);
        goto nomem;
    }
    memcpy(cur, u->off, sizeof(int) * (size_t)g->n_values);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0 || last[v] == i) continue;
            last[v] = i;
            u->node[cur[v]++] = i;
        }
    free(cur);
    free(last);
    return IR_OK;
nomem:
    rw_users_free(u);
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory listing the readers of values");
}

void rw_users_free(rw_users *u) {
    if (!u) return;
    free(u->off);
    free(u->node);
    u->off = NULL;
    u->node = NULL;
}

bool rw_set_attr_int(ir_graph *g, ir_node *n, const char *name, int64_t v) {
    for (int a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, name) == 0) {
            ir_blob_unref(n->attrs[a].t_blob);
            n->attrs[a] = (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v};
            return true;
        }
    ir_attr *attrs = ir_graph_alloc(g, sizeof(ir_attr) * (size_t)(n->n_attrs + 1));
    if (!attrs) return false;
    if (n->n_attrs) memcpy(attrs, n->attrs, sizeof(ir_attr) * (size_t)n->n_attrs);
    attrs[n->n_attrs] = (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v};
    n->attrs = attrs; /* the old array stays in the arena; its blobs moved with the copy */
    n->n_attrs++;
    return true;
}

void rw_drop_attr(ir_node *n, const char *name) {
    for (int a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, name) == 0) {
            ir_blob_unref(n->attrs[a].t_blob);
            memmove(&n->attrs[a], &n->attrs[a + 1], sizeof(ir_attr) * (size_t)(n->n_attrs - a - 1));
            n->n_attrs--;
            return;
        }
}

int rw_add_const_blob(ir_graph *g, const char *name, ir_dtype t, const ir_shape *s, ir_blob *b) {
    if (!b) return -1;
    int v = ir_graph_add_value(g, name, t, s);
    if (v < 0) {
        ir_blob_unref(b);
        return -1;
    }
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}

int rw_add_const_i64(ir_graph *g, const char *name, int n, const int64_t *vals) {
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    ir_blob *b = ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (b && n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    return rw_add_const_blob(g, name, IR_I64, &s, b);
}

#ifdef MAGPIE_DEBUG
/* Re-runs shape inference on every node and fails where an output's dtype or shape moves: a
 * rewrite must leave the whole graph consistent, not only the nodes it added. */
static ir_status reinfer_all(ir_graph *g, ir_diag *d) {
    enum { MAXO = 32 };
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (!ir_op_get(n->op)) continue; /* opaque: shapes come from the file */
        ir_shape shp[MAXO];
        ir_dtype dt[MAXO];
        int no = n->n_out < MAXO ? n->n_out : MAXO;
        for (int k = 0; k < no; k++)
            if (n->out[k] >= 0) {
                shp[k] = g->values[n->out[k]].shape;
                dt[k] = g->values[n->out[k]].dtype;
            }
        ir_status st = ir_node_infer(g, n, d);
        if (st != IR_OK) return st;
        for (int k = 0; k < no; k++) {
            int v = n->out[k];
            if (v >= 0 &&
                (dt[k] != g->values[v].dtype || !ir_shape_eq(&shp[k], &g->values[v].shape)))
                return ir_node_fail(d, IR_ERR_INTERNAL, n, "output '%s' changes on re-inference",
                                    g->values[v].name);
        }
    }
    return IR_OK;
}
#endif

ir_status rw_finish_graph(ir_graph *g, ir_diag *d) {
    ir_status st = ir_graph_toposort(g, d);
    if (st != IR_OK) return st;
#ifdef MAGPIE_DEBUG
    if ((st = reinfer_all(g, d)) != IR_OK) return st;
#endif
    return ir_graph_validate(g, d);
}

void rw_mark_unread_constants(const ir_graph *g, const ir_node *n, const unsigned char *read,
                              unsigned char *dead_value) {
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v >= 0 && !read[v] && g->values[v].producer < 0 && (g->values[v].flags & IR_VF_CONST) &&
            !(g->values[v].flags & (IR_VF_INPUT | IR_VF_OUTPUT)))
            dead_value[v] = 1;
    }
}

ir_status rw_remove(ir_graph *g, const unsigned char *dead_node, const unsigned char *dead_value,
                    ir_diag *d) {
    int nv = g->n_values, nn = g->n_nodes;
    int *remap = malloc(sizeof(int) * ((size_t)nv + 1));
    unsigned char *had = malloc((size_t)nv + 1);
    if (!remap || !had) {
        free(remap);
        free(had);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory removing nodes");
    }
    int m = 0;
    for (int v = 0; v < nv; v++) {
        if (dead_value[v]) {
            ir_blob_unref(g->values[v].blob);
            remap[v] = -1;
            continue;
        }
        remap[v] = m;
        g->values[m++] = g->values[v];
    }
    g->n_values = m;
    int kept = 0;
    for (int i = 0; i < nn; i++) {
        ir_node *n = &g->nodes[i];
        if (dead_node[i]) {
            for (int a = 0; a < n->n_attrs; a++) {
                ir_blob_unref(n->attrs[a].t_blob);
                n->attrs[a].t_blob = NULL;
            }
            continue;
        }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) {
                IR_ASSERT(remap[n->in[k]] >= 0); /* the caller rewired every reader */
                n->in[k] = remap[n->in[k]];
            }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) n->out[k] = remap[n->out[k]];
        g->nodes[kept++] = *n;
    }
    g->n_nodes = kept;
    for (int i = 0; i < g->n_inputs; i++) g->inputs[i] = remap[g->inputs[i]];
    for (int i = 0; i < g->n_outputs; i++) {
        IR_ASSERT(remap[g->outputs[i]] >= 0);
        g->outputs[i] = remap[g->outputs[i]];
    }
    /* Producers from scratch: a value that had one and has none now was orphaned (an output
     * detached but never re-produced), which validation alone would not see. */
    for (int v = 0; v < m; v++) {
        had[v] = g->values[v].producer >= 0;
        g->values[v].producer = -1;
    }
    for (int i = 0; i < kept; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0) g->values[g->nodes[i].out[k]].producer = i;
    for (int v = 0; v < m; v++) IR_ASSERT(!had[v] || g->values[v].producer >= 0);
    free(remap);
    free(had);
    return IR_OK;
}

int rw_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}
