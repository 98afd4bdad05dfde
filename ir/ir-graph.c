/* ir-graph.c - graph construction, copying, attribute lookup, topological sorting and
 * validation. Per-node arrays and strings live in the graph's arena; the value, node, input
 * and output arrays grow geometrically. */
#include "ir-impl.h"

#include <stdio.h>
#include <stdlib.h>

ir_graph *ir_graph_new(void) {
    ir_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = ir_arena_new();
    if (!g->arena) {
        free(g);
        return NULL;
    }
    g->name = "";
    g->source = "";
    g->opset = 17;
    return g;
}

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) ir_blob_unref(g->values[i].blob);
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++) ir_blob_unref(g->nodes[i].attrs[a].t_blob);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    ir_arena_free(g->arena);
    free(g);
}

void *ir_graph_alloc(ir_graph *g, size_t bytes) {
    return ir_arena_alloc(g->arena, bytes);
}
const char *ir_graph_strdup(ir_graph *g, const char *s) {
    return ir_arena_strdup(g->arena, s);
}

/* Grows *arr (of elem-sized items) so that it holds at least need items. */
static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

int ir_graph_add_value(ir_graph *g, const char *name, ir_dtype t, const ir_shape *s) {
    if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(ir_value))) return -1;
    ir_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = ir_arena_strdup(g->arena, name ? name : "");
    v->dtype = t;
    if (s) v->shape = *s;
    v->producer = -1;
    return g->n_values++;
}

int ir_graph_add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                      int n_out, const int *out, int n_attrs, const ir_attr *attrs) {
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(ir_node))) return -1;
    int idx = g->n_nodes;
    ir_node *n = &g->nodes[idx];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->id = g->next_node_id++;
    char gen[32];
    if (!name || !*name) {
        snprintf(gen, sizeof gen, "node_%u", n->id);
        name = gen;
    }
    n->name = ir_arena_strdup(g->arena, name);
    const ir_op_def *def = ir_op_get(op);
    n->op_type = def ? def->name : "";
    n->domain = def ? def->domain : "";
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = ir_arena_alloc(g->arena, sizeof(int) * (size_t)(n_in ? n_in : 1));
    n->out = ir_arena_alloc(g->arena, sizeof(int) * (size_t)(n_out ? n_out : 1));
    if (!n->name || !n->in || !n->out) return -1;
    if (n_in) memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    if (n_out) memcpy(n->out, out, sizeof(int) * (size_t)n_out);
    if (n_attrs) {
        n->attrs = ir_arena_alloc(g->arena, sizeof(ir_attr) * (size_t)n_attrs);
        if (!n->attrs) return -1;
        memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
        for (int a = 0; a < n_attrs; a++) ir_blob_ref(n->attrs[a].t_blob);
        n->n_attrs = n_attrs;
    }
    for (int i = 0; i < n_out; i++)
        if (out[i] >= 0) g->values[out[i]].producer = idx;
    g->n_nodes++;
    return idx;
}

void ir_graph_add_input(ir_graph *g, int value) {
    IR_ASSERT(grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(int)));
    g->inputs[g->n_inputs++] = value;
    g->values[value].flags |= IR_VF_INPUT;
}

void ir_graph_add_output(ir_graph *g, int value) {
    IR_ASSERT(grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(int)));
    g->outputs[g->n_outputs++] = value;
    g->values[value].flags |= IR_VF_OUTPUT;
}

int ir_graph_find_value(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i].name, name) == 0) return i;
    return -1;
}

/* Room for what a rewrite adds to a clone without growing its arrays at once. */
static int clone_cap(int n) {
    return n + n / 16 + 16;
}

/* A clone shares what no graph writes once it exists: names, op types, attribute names and
 * arrays (ints, floats, strings: a rewrite that changes one points the attribute at a new array),
 * and constant blobs (by reference count). It copies what rewrites edit in place: the value and
 * node structs, each node's input and output ids and its attribute structs (a fission rewrites a
 * shape attribute's array pointer, pruning clears t_blob). So a clone costs a few memcpys of the
 * graph's arrays and its arena references, not a copy of every string. */
ir_graph *ir_graph_clone(const ir_graph *src) {
    ir_graph *g = ir_graph_new();
    if (!g) return NULL;
    if (!ir_arena_share(g->arena, src->arena)) goto fail;
    g->name = src->name;
    g->source = src->source;
    g->opset = src->opset;
    g->params_listed = src->params_listed;
    g->next_node_id = src->next_node_id;
    g->cap_values = clone_cap(src->n_values);
    g->cap_nodes = clone_cap(src->n_nodes);
    g->cap_inputs = clone_cap(src->n_inputs);
    g->cap_outputs = clone_cap(src->n_outputs);
    g->values = malloc(sizeof(ir_value) * (size_t)g->cap_values);
    g->nodes = malloc(sizeof(ir_node) * (size_t)g->cap_nodes);
    g->inputs = malloc(sizeof(int) * (size_t)g->cap_inputs);
    g->outputs = malloc(sizeof(int) * (size_t)g->cap_outputs);
    if (!g->values || !g->nodes || !g->inputs || !g->outputs) goto fail;
    if (src->n_values) memcpy(g->values, src->values, sizeof(ir_value) * (size_t)src->n_values);
    if (src->n_nodes) memcpy(g->nodes, src->nodes, sizeof(ir_node) * (size_t)src->n_nodes);
    if (src->n_inputs) memcpy(g->inputs, src->inputs, sizeof(int) * (size_t)src->n_inputs);
    if (src->n_outputs) memcpy(g->outputs, src->outputs, sizeof(int) * (size_t)src->n_outputs);
    g->n_inputs = src->n_inputs;
    g->n_outputs = src->n_outputs;
    /* n_values and n_nodes are set once the blobs are referenced, so a failure unrefs only
     * what this clone holds */
    size_t n_attrs = 0, n_ids = 0;
    for (int i = 0; i < src->n_nodes; i++) {
        const ir_node *sn = &src->nodes[i];
        n_attrs += (size_t)sn->n_attrs;
        n_ids += (size_t)(sn->n_in ? sn->n_in : 1) + (size_t)(sn->n_out ? sn->n_out : 1);
    }
    /* one block: the attribute structs (8-byte aligned first), then the ids */
    unsigned char *block =
        ir_arena_alloc_private(g->arena, sizeof(ir_attr) * n_attrs + sizeof(int) * n_ids);
    if (!block) goto fail;
    ir_attr *attrs = (ir_attr *)block;
    int *ids = (int *)(block + sizeof(ir_attr) * n_attrs);
    for (int i = 0; i < src->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        const ir_node *sn = &src->nodes[i];
        if (sn->n_attrs) {
            memcpy(attrs, sn->attrs, sizeof(ir_attr) * (size_t)sn->n_attrs);
            for (int a = 0; a < sn->n_attrs; a++) ir_blob_ref(attrs[a].t_blob);
            n->attrs = attrs;
            attrs += sn->n_attrs;
        }
        n->in = ids;
        if (sn->n_in) memcpy(ids, sn->in, sizeof(int) * (size_t)sn->n_in);
        ids += sn->n_in ? sn->n_in : 1;
        n->out = ids;
        if (sn->n_out) memcpy(ids, sn->out, sizeof(int) * (size_t)sn->n_out);
        ids += sn->n_out ? sn->n_out : 1;
    }
    g->n_nodes = src->n_nodes;
    for (int i = 0; i < src->n_values; i++) ir_blob_ref(g->values[i].blob);
    g->n_values = src->n_values;
    return g;
fail:
    ir_graph_free(g);
    return NULL;
}

/* ---------------------------------------------------------------- attributes */

const ir_attr *ir_attr_find(const ir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ir_attr_int(const ir_node *n, const char *name, int64_t def) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a) return def;
    return a->type == IR_ATTR_FLOAT ? ir_sat_i64(a->f) : a->i; /* no UB on 1e30 or NaN */
}

float ir_attr_float(const ir_node *n, const char *name, float def) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a) return def;
    return a->type == IR_ATTR_INT ? (float)a->i : a->f;
}

const char *ir_attr_str(const ir_node *n, const char *name, const char *def) {
    const ir_attr *a = ir_attr_find(n, name);
    return (a && a->type == IR_ATTR_STRING && a->s) ? a->s : def;
}

int ir_attr_ints(const ir_node *n, const char *name, const int64_t **out) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a || a->type != IR_ATTR_INTS) return -1;
    *out = a->ints;
    return a->n;
}

/* ---------------------------------------------------------------- constant inputs */

ir_status ir_const_ints(const ir_graph *g, const ir_node *n, int i, int64_t *out, int max, int *cnt,
                        ir_diag *d) {
    const ir_value *v = ir_node_in(g, n, i);
    *cnt = -1;
    if (!v) {
        *cnt = -2;
        return IR_OK;
    }
    const void *data = ir_value_data(v);
    if (!data)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "input %d ('%s') must be a constant after folding (dynamic shapes are "
                            "not supported)",
                            i, v->name);
    if (ir_dtype_is_float(v->dtype))
        return ir_node_fail(d, IR_ERR_INVALID, n, "input %d ('%s') must be an integer tensor", i,
                            v->name);
    int64_t numel = ir_shape_numel(&v->shape);
    if (numel > max)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "input %d ('%s') has %lld values, at most %d allowed", i, v->name,
                            (long long)numel, max);
    for (int64_t k = 0; k < numel; k++) out[k] = ir_load_i64(data, v->dtype, k);
    *cnt = (int)numel;
    return IR_OK;
}

bool ir_const_scalar(const ir_graph *g, const ir_node *n, int i, double *out, ir_diag *d) {
    const ir_value *v = ir_node_in(g, n, i);
    const void *data = v ? ir_value_data(v) : NULL;
    if (!data || ir_shape_numel(&v->shape) != 1) {
        ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "input %d must be a constant scalar", i);
        return false;
    }
    *out = ir_load_f64(data, v->dtype, 0);
    return true;
}

/* ---------------------------------------------------------------- ordering and validation */

/* The write-after-read edges of g's in-place nodes, as a CSR over the reading node (*off has
 * n_nodes + 1 entries), each counted into indeg of the in-place node. *off stays NULL when g
 * has no in-place node. */
static ir_status war_edges(const ir_graph *g, int *indeg, int **off, int **succ, ir_diag *d) {
    int n = g->n_nodes;
    *off = NULL;
    *succ = NULL;
    /* owner[v] = the in-place node that overwrites value v, or -1 */
    int *owner = NULL, *cnt = NULL, *list = NULL;
    bool any = false;
    for (int i = 0; i < n && !any; i++) {
        const ir_op_def *def = ir_op_get(g->nodes[i].op);
        any = def && (def->flags & IR_OPF_INPLACE);
    }
    if (!any) return IR_OK;
    owner = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    cnt = calloc((size_t)n + 1, sizeof(int));
    /* the written inputs and every view of them (a reader of a view reads the written bytes) */
    if (!owner || !cnt || !ir_graph_overwriters(g, false, owner)) goto nomem;
    /* two passes: count, then fill (edges r -> owner for each reader r != owner) */
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < n; r++) {
            const ir_node *nd = &g->nodes[r];
            for (int k = 0; k < nd->n_in; k++) {
                int v = nd->in[k], u = v >= 0 ? owner[v] : -1;
                /* an ordering-only input (a FissionSlice's buffers) reads no data */
                if (u < 0 || u == r || ir_input_order_only(nd, k)) continue;
                if (pass == 0) {
                    cnt[r + 1]++;
                    indeg[u]++;
                } else {
                    list[cnt[r]++] = u;
                }
            }
        }
        if (pass == 0) {
            for (int r = 0; r < n; r++) cnt[r + 1] += cnt[r];
            list = malloc(sizeof(int) * ((size_t)cnt[n] + 1));
            *off = malloc(sizeof(int) * ((size_t)n + 1));
            if (!list || !*off) goto nomem;
            memcpy(*off, cnt, sizeof(int) * ((size_t)n + 1));
        }
    }
    free(owner);
    free(cnt);
    *succ = list;
    return IR_OK;
nomem:
    free(owner);
    free(cnt);
    free(list);
    free(*off);
    *off = NULL;
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory sorting the graph");
}

/* 1 when g's order is already topological: every input that has a producer is output by an
 * earlier node (and by one node only), and every write-after-read edge of war_edges points
 * forward. The stable sort below returns such an order unchanged (at each step the least ready
 * index is the next one), so the check lets most of a search's sorts skip the sort's tables:
 * a rewrite that keeps its parent's order, or inserts its new nodes in place, leaves a sorted
 * graph. 0 when not (or g is malformed: the sort reports it), -1 out of memory. */
static int order_is_topological(const ir_graph *g) {
    int n = g->n_nodes, nv = g->n_values;
    int *pos = malloc(sizeof(int) * ((size_t)nv + 1));
    if (!pos) return -1;
    for (int v = 0; v < nv; v++) pos[v] = -1;
    int ok = 1;
    bool inplace = false;
    for (int i = 0; i < n && ok; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in && ok; k++) {
            int v = nd->in[k];
            if (v >= 0 && v < nv && g->values[v].producer >= 0 && !(pos[v] >= 0 && pos[v] < i))
                ok = 0;
        }
        for (int k = 0; k < nd->n_out && ok; k++) {
            int v = nd->out[k];
            if (v < 0) continue;
            if (v >= nv || pos[v] >= 0)
                ok = 0;
            else
                pos[v] = i;
        }
        const ir_op_def *def = ir_op_get(nd->op);
        inplace = inplace || (def && (def->flags & IR_OPF_INPLACE));
    }
    if (ok && inplace) {
        int *owner = pos; /* reused: one entry per value */
        if (!ir_graph_overwriters(g, false, owner)) ok = -1;
        for (int r = 0; r < n && ok == 1; r++) {
            const ir_node *nd = &g->nodes[r];
            for (int k = 0; k < nd->n_in && ok == 1; k++) {
                int v = nd->in[k], u = v >= 0 ? owner[v] : -1;
                if (u < 0 || u == r || ir_input_order_only(nd, k)) continue;
                if (u < r) ok = 0;
            }
        }
    }
    free(pos);
    return ok;
}

ir_status ir_graph_toposort(ir_graph *g, ir_diag *d) {
    int n = g->n_nodes;
    if (n == 0) return IR_OK;
    int sorted_already = order_is_topological(g);
    if (sorted_already < 0) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory sorting the graph");
    if (sorted_already) {
        for (int i = 0; i < n; i++)
            for (int k = 0; k < g->nodes[i].n_out; k++)
                if (g->nodes[i].out[k] >= 0) g->values[g->nodes[i].out[k]].producer = i;
        return IR_OK;
    }
    /* indeg[i] = inputs of node i produced by nodes; users = CSR of value -> consumer nodes */
    int *indeg = calloc((size_t)n, sizeof(int));
    int *ucount = calloc((size_t)g->n_values + 1, sizeof(int));
    int *heap = malloc(sizeof(int) * (size_t)n);
    int *order = malloc(sizeof(int) * (size_t)n);
    ir_node *sorted = malloc(sizeof(ir_node) * (size_t)n);
    int *users = NULL;
    ir_status st = IR_OK;
    if (!indeg || !ucount || !heap || !order || !sorted) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    int total = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && g->values[v].producer >= 0) {
                ucount[v + 1]++;
                indeg[i]++;
                total++;
            }
        }
    for (int v = 0; v < g->n_values; v++) ucount[v + 1] += ucount[v];
    users = malloc(sizeof(int) * (size_t)(total ? total : 1));
    int *fill = calloc((size_t)g->n_values, sizeof(int));
    if (!users || !fill) {
        free(fill);
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && g->values[v].producer >= 0) users[ucount[v] + fill[v]++] = i;
        }
    free(fill);
    /* Write-after-read edges: an in-place node (IR_OPF_INPLACE) overwrites input k with output
     * k, so every other reader of that input, or of a view of it, must run before it (DESIGN.md,
     * optimizer updates; fission assembles). war_off/war_succ: CSR of node -> in-place nodes that
     * must follow. */
    int *war_off = NULL, *war_succ = NULL;
    if ((st = war_edges(g, indeg, &war_off, &war_succ, d)) != IR_OK) goto out;
    /* Stable Kahn: a min-heap on the current index keeps the existing order wherever it is
     * already topological. */
    int hn = 0, done = 0;
#define HPUSH(x)                                                                                   \
    do {                                                                                           \
        int _i = hn++;                                                                             \
        heap[_i] = (x);                                                                            \
        while (_i > 0 && heap[(_i - 1) / 2] > heap[_i]) {                                          \
            int _p = (_i - 1) / 2, _t = heap[_p];                                                  \
            heap[_p] = heap[_i];                                                                   \
            heap[_i] = _t;                                                                         \
            _i = _p;                                                                               \
        }                                                                                          \
    } while (0)
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) HPUSH(i);
    while (hn > 0) {
        int top = heap[0];
        heap[0] = heap[--hn];
        for (int i = 0;;) {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && heap[l] < heap[m]) m = l;
            if (r < hn && heap[r] < heap[m]) m = r;
            if (m == i) break;
            int t = heap[m];
            heap[m] = heap[i];
            heap[i] = t;
            i = m;
        }
        order[done++] = top;
        const ir_node *nd = &g->nodes[top];
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v < 0) continue;
            for (int u = ucount[v]; u < ucount[v + 1]; u++)
                if (--indeg[users[u]] == 0) HPUSH(users[u]);
        }
        if (war_off)
            for (int e = war_off[top]; e < war_off[top + 1]; e++)
                if (--indeg[war_succ[e]] == 0) HPUSH(war_succ[e]);
    }
#undef HPUSH
    free(war_off);
    free(war_succ);
    if (done < n) {
        int bad = 0;
        while (bad < n && indeg[bad] == 0) bad++;
        st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[bad],
                          "the graph has a cycle through this node");
        goto out;
    }
    for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
    memcpy(g->nodes, sorted, sizeof(ir_node) * (size_t)n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0) g->values[g->nodes[i].out[k]].producer = i;
out:
    free(indeg);
    free(ucount);
    free(heap);
    free(order);
    free(sorted);
    free(users);
    return st;
}

ir_status ir_graph_validate(const ir_graph *g, ir_diag *d) {
    unsigned char *seen = calloc((size_t)g->n_values + 1, 1);
    if (!seen) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory validating the graph");
    ir_status st = IR_OK;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].producer < 0) seen[v] = 1; /* inputs and constants */
    for (int i = 0; i < g->n_nodes && st == IR_OK; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < -1 || v >= g->n_values)
                st = ir_node_fail(d, IR_ERR_INTERNAL, n, "input %d refers to no value", k);
            else if (v >= 0 && !seen[v])
                st = ir_node_fail(d, IR_ERR_INTERNAL, n, "input '%s' is used before it is produced",
                                  g->values[v].name);
        }
        for (int k = 0; k < n->n_out && st == IR_OK; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            if (v >= g->n_values || g->values[v].producer != i)
                st = ir_node_fail(d, IR_ERR_INTERNAL, n, "output %d has a wrong producer", k);
            else
                seen[v] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs && st == IR_OK; i++)
        if (!seen[g->outputs[i]])
            st = ir_diag_set(d, IR_ERR_INVALID, "graph output '%s' is never produced",
                             g->values[g->outputs[i]].name);
    free(seen);
    return st;
}
