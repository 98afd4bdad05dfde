/* pet-split.c - PET's program splitting (§6.1): the multilinear sub-programs of a graph, cut at
 * its non-linear ops, grouped where independent ones can be batched, and their extraction as
 * standalone programs (pet-gen.h says what each step guarantees).
 *
 * Invariants: sub-programs are disjoint and convex (no path leaves one and comes back), so each
 * can be replaced by a mutant without creating a cycle; a group's sets have no path between
 * them, so computing them as one op (a grouped conv, a batched matmul) is legal. */
#include "pet-gen-impl.h"
#include "pet.h" /* pet_einsum_ok */

#include <stdio.h>

/* ---------------------------------------------------------------- the multilinear ops */

bool pet_node_is_multilinear(const ir_graph *g, const ir_node *n) {
    switch (n->op) {
    case IR_OP_Conv:
    case IR_OP_ConvTranspose:
    case IR_OP_MatMul:
    case IR_OP_Gemm:
    case IR_OP_Add:
    case IR_OP_Sub:
    case IR_OP_Mul:
    case IR_OP_Sum:
    case IR_OP_Neg:
    case IR_OP_Identity:
    case IR_OP_AveragePool:
    case IR_OP_GlobalAveragePool:
    case IR_OP_ReduceSum:
    case IR_OP_ReduceMean:
    case IR_OP_CumSum:
    case IR_OP_Transpose:
    case IR_OP_Reshape:
    case IR_OP_Flatten:
    case IR_OP_Squeeze:
    case IR_OP_Unsqueeze:
    case IR_OP_Concat:
    case IR_OP_Split:
    case IR_OP_Slice:
    case IR_OP_Expand:
    case IR_OP_Tile: break;
    case IR_OP_Pad:
        if (strcmp(ir_attr_str(n, "mode", "constant"), "constant") != 0) return false;
        break;
    case IR_OP_Einsum:
        if (!pet_einsum_ok(g, n)) return false;
        break;
    default: return false;
    }
    /* float data in and out; integer inputs after the first are parameters (shapes, axes) */
    const ir_value *x = ir_node_in(g, n, 0);
    if (!x || !ir_dtype_is_float(x->dtype)) return false;
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *o = ir_node_out(g, n, i);
        if (o && !ir_dtype_is_float(o->dtype)) return false;
    }
    return true;
}

/* ---------------------------------------------------------------- graph helpers */

static bool is_weight_value(const ir_value *v) {
    return ir_dtype_is_float(v->dtype) && v->producer < 0 &&
           ((v->flags & (IR_VF_PARAM | IR_VF_INITIALIZER)) ||
            ((v->flags & IR_VF_CONST) && v->blob));
}

unsigned char *gen_weight_values(const ir_graph *g) {
    unsigned char *w = calloc((size_t)g->n_values + 1, 1);
    if (!w) return NULL;
    for (int v = 0; v < g->n_values; v++) w[v] = is_weight_value(&g->values[v]);
    for (int i = 0; i < g->n_nodes; i++) { /* g->nodes is topological */
        const ir_node *n = &g->nodes[i];
        bool all = n->n_in > 0;
        for (int k = 0; k < n->n_in && all; k++) {
            int v = n->in[k];
            if (v < 0) continue;
            /* integer inputs are parameters: they do not make a value data */
            all = w[v] || !ir_dtype_is_float(g->values[v].dtype);
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) w[n->out[k]] = all && ir_dtype_is_float(g->values[n->out[k]].dtype);
    }
    return w;
}

int gen_copy_node(ir_graph *dst, const ir_node *n, const char *name, const int *in,
                  const int *out) {
    ir_attr *attrs = NULL;
    if (n->n_attrs) {
        attrs = ir_graph_alloc(dst, sizeof(ir_attr) * (size_t)n->n_attrs);
        if (!attrs) return -1;
        for (int a = 0; a < n->n_attrs; a++) {
            const ir_attr *sa = &n->attrs[a];
            ir_attr *da = &attrs[a];
            *da = *sa;
            da->name = ir_graph_strdup(dst, sa->name);
            da->s = sa->s ? ir_graph_strdup(dst, sa->s) : NULL;
            if (sa->ints) {
                da->ints = ir_graph_alloc(dst, sizeof(int64_t) * (size_t)(sa->n ? sa->n : 1));
                if (!da->ints) return -1;
                if (sa->n) memcpy(da->ints, sa->ints, sizeof(int64_t) * (size_t)sa->n);
            }
            if (sa->floats) {
                da->floats = ir_graph_alloc(dst, sizeof(float) * (size_t)(sa->n ? sa->n : 1));
                if (!da->floats) return -1;
                if (sa->n) memcpy(da->floats, sa->floats, sizeof(float) * (size_t)sa->n);
            }
            if (sa->strings) {
                da->strings = ir_graph_alloc(dst, sizeof(char *) * (size_t)(sa->n ? sa->n : 1));
                if (!da->strings) return -1;
                for (int k = 0; k < sa->n; k++)
                    da->strings[k] = ir_graph_strdup(dst, sa->strings[k]);
            }
        }
    }
    int idx = ir_graph_add_node(dst, n->op, name, n->n_in, in, n->n_out, out, n->n_attrs, attrs);
    if (idx < 0) return -1;
    ir_node *m = &dst->nodes[idx];
    m->op_type = ir_graph_strdup(dst, n->op_type);
    m->domain = ir_graph_strdup(dst, n->domain);
    return idx;
}

ir_graph *gen_extract(const ir_graph *g, const int *nodes, int n, const unsigned char *weight,
                      ir_status *st, ir_diag *d) {
    ir_status rc = IR_ERR_NOMEM;
    ir_graph *h = ir_graph_new();
    int *map = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    unsigned char *member = calloc((size_t)g->n_nodes + 1, 1);
    if (!h || !map || !member) goto fail;
    for (int v = 0; v < g->n_values; v++) map[v] = -1;
    for (int i = 0; i < n; i++) member[nodes[i]] = 1;
    h->name = ir_graph_strdup(h, g->name);
    h->source = ir_graph_strdup(h, g->source);
    h->opset = g->opset;
    /* inputs and constants, by first reader */
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k];
            if (v < 0 || map[v] >= 0) continue;
            const ir_value *sv = &g->values[v];
            if (sv->producer >= 0 && member[sv->producer]) continue; /* produced inside */
            int nv = ir_graph_add_value(h, sv->name, sv->dtype, &sv->shape);
            if (nv < 0) goto fail;
            map[v] = nv;
            ir_value *hv = &h->values[nv];
            bool literal = sv->producer < 0 && (sv->flags & IR_VF_CONST) && sv->blob &&
                           !(sv->flags & (IR_VF_PARAM | IR_VF_INITIALIZER));
            if (!ir_dtype_is_float(sv->dtype) || literal) {
                /* an integer parameter or a float literal: a constant sharing the data */
                if (!sv->blob) {
                    rc = ir_node_fail(d, IR_ERR_UNSUPPORTED, nd,
                                      "input '%s' is a non-constant integer tensor", sv->name);
                    goto fail;
                }
                hv->blob = ir_blob_ref(sv->blob);
                hv->flags = IR_VF_CONST;
                continue;
            }
            ir_graph_add_input(h, nv);
            if (is_weight_value(sv) || (weight && weight[v])) hv->flags |= IR_VF_PARAM;
            if (sv->flags & IR_VF_DATA) hv->flags |= IR_VF_DATA;
        }
    }
    /* nodes and the values they produce */
    int ins[64], outs[64];
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        if (nd->n_in > 64 || nd->n_out > 64) {
            rc = ir_node_fail(d, IR_ERR_UNSUPPORTED, nd, "more than 64 inputs or outputs");
            goto fail;
        }
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v < 0) {
                outs[k] = -1;
                continue;
            }
            const ir_value *sv = &g->values[v];
            int nv = ir_graph_add_value(h, sv->name, sv->dtype, &sv->shape);
            if (nv < 0) goto fail;
            map[v] = outs[k] = nv;
        }
        for (int k = 0; k < nd->n_in; k++) ins[k] = nd->in[k] < 0 ? -1 : map[nd->in[k]];
        if (gen_copy_node(h, nd, nd->name, ins, outs) < 0) goto fail;
    }
    /* outputs: read outside or graph outputs, in node order */
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v < 0) continue;
            bool out = (g->values[v].flags & IR_VF_OUTPUT) != 0;
            for (int j = 0; j < g->n_nodes && !out; j++) {
                if (member[j]) continue;
                for (int q = 0; q < g->nodes[j].n_in && !out; q++) out = g->nodes[j].in[q] == v;
            }
            if (out) ir_graph_add_output(h, map[v]);
        }
    }
    free(map);
    free(member);
    if (st) *st = IR_OK;
    return h;
fail:
    if (rc == IR_ERR_NOMEM) ir_diag_set(d, rc, "out of memory extracting a sub-program");
    if (st) *st = rc;
    free(map);
    free(member);
    ir_graph_free(h);
    return NULL;
}

ir_graph *pet_subprog_extract(const ir_graph *g, const pet_subprog *sp, ir_status *st, ir_diag *d) {
    ir_graph *h = gen_extract(g, sp->nodes, sp->n_nodes, NULL, st, d);
    if (!h) return NULL;
    /* outputs in sp's order (gen_extract's order is the same rule; keep sp authoritative) */
    IR_ASSERT(h->n_outputs == sp->n_outputs);
#ifdef MAGPIE_DEBUG
    ir_status vs = ir_graph_validate(h, d);
    if (vs != IR_OK) {
        if (st) *st = vs;
        ir_graph_free(h);
        return NULL;
    }
#endif
    return h;
}

/* ---------------------------------------------------------------- splitting */

typedef struct split_ws {
    const ir_graph *g;
    int n, nv;
    unsigned char *ml; /* per node */
    int *uf;           /* union-find over nodes */
    int *level;        /* per node: most non-linear ops on a path from the inputs */
    int *uoff, *unode; /* readers of each value (CSR) */
    int *comp;         /* per node: component (set) index, -1 for cut nodes */
    int n_comps;
    int *stack;
    unsigned char *seen;
} split_ws;

static int uf_find(int *uf, int x) {
    while (uf[x] != x) x = uf[x] = uf[uf[x]];
    return x;
}
static void uf_union(int *uf, int a, int b) {
    a = uf_find(uf, a);
    b = uf_find(uf, b);
    if (a != b) uf[a > b ? a : b] = a < b ? a : b; /* the smaller index is the root */
}

static bool build_readers(split_ws *w) {
    const ir_graph *g = w->g;
    w->uoff = calloc((size_t)w->nv + 2, sizeof(int));
    if (!w->uoff) return false;
    int tot = 0;
    for (int i = 0; i < w->n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) w->uoff[g->nodes[i].in[k] + 1]++, tot++;
    for (int v = 0; v < w->nv; v++) w->uoff[v + 1] += w->uoff[v];
    w->unode = malloc(sizeof(int) * ((size_t)tot + 1));
    int *fill = malloc(sizeof(int) * ((size_t)w->nv + 1));
    if (!w->unode || !fill) {
        free(fill);
        return false;
    }
    memcpy(fill, w->uoff, sizeof(int) * (size_t)w->nv);
    for (int i = 0; i < w->n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) w->unode[fill[g->nodes[i].in[k]]++] = i;
    free(fill);
    return true;
}

/* Whether a path leaves the set of nodes with comp == c and comes back into it: a forward
 * search from the set's outputs through non-members. */
static bool set_is_convex(split_ws *w, int c) {
    const ir_graph *g = w->g;
    int sp = 0;
    memset(w->seen, 0, (size_t)w->n);
    for (int i = 0; i < w->n; i++) {
        if (w->comp[i] != c) continue;
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int v = g->nodes[i].out[k];
            if (v < 0) continue;
            for (int u = w->uoff[v]; u < w->uoff[v + 1]; u++) {
                int j = w->unode[u];
                if (w->comp[j] != c && !w->seen[j]) w->seen[j] = 1, w->stack[sp++] = j;
            }
        }
    }
    while (sp > 0) {
        int i = w->stack[--sp];
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int v = g->nodes[i].out[k];
            if (v < 0) continue;
            for (int u = w->uoff[v]; u < w->uoff[v + 1]; u++) {
                int j = w->unode[u];
                if (w->comp[j] == c) return false;
                if (!w->seen[j]) w->seen[j] = 1, w->stack[sp++] = j;
            }
        }
    }
    return true;
}

/* Connected sets: union over data edges between multilinear nodes (same_level: only between
 * nodes of equal level), then numbered by first node. */
static void number_sets(split_ws *w) {
    int *root_comp = w->stack; /* scratch: per root, its set number */
    for (int i = 0; i < w->n; i++) root_comp[i] = -1;
    w->n_comps = 0;
    for (int i = 0; i < w->n; i++) {
        if (!w->ml[i]) {
            w->comp[i] = -1;
            continue;
        }
        int r = uf_find(w->uf, i);
        if (root_comp[r] < 0) root_comp[r] = w->n_comps++;
        w->comp[i] = root_comp[r];
    }
}

static void union_edges(split_ws *w, bool same_level, const unsigned char *only) {
    const ir_graph *g = w->g;
    for (int i = 0; i < w->n; i++) {
        if (!w->ml[i] || (only && !only[i])) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0) continue;
            int p = g->values[v].producer;
            if (p < 0 || !w->ml[p] || (only && !only[p])) continue;
            if (same_level && w->level[p] != w->level[i]) continue;
            uf_union(w->uf, i, p);
        }
    }
}

/* Per set: its node count, activation inputs and a signature of its ops and input shapes. */
typedef struct set_info {
    int first, n_nodes;
    uint64_t sig;
    int group; /* the group's representative set */
} set_info;

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* Whether node i (or what it reaches) reaches a node of the sets with group == grp. */
static bool reaches_group(split_ws *w, const set_info *si, int grp, int from_grp) {
    const ir_graph *g = w->g;
    int sp = 0;
    memset(w->seen, 0, (size_t)w->n);
    for (int i = 0; i < w->n; i++)
        if (w->comp[i] >= 0 && si[w->comp[i]].group == from_grp) w->seen[i] = 1, w->stack[sp++] = i;
    while (sp > 0) {
        int i = w->stack[--sp];
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int v = g->nodes[i].out[k];
            if (v < 0) continue;
            for (int u = w->uoff[v]; u < w->uoff[v + 1]; u++) {
                int j = w->unode[u];
                if (w->seen[j]) continue;
                if (w->comp[j] >= 0 && si[w->comp[j]].group == grp) return true;
                w->seen[j] = 1;
                w->stack[sp++] = j;
            }
        }
    }
    return false;
}

static int cmp_pair(const void *a, const void *b) {
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static int cmp_sig(const void *a, const void *b, void *si_) {
    const set_info *si = si_;
    int x = *(const int *)a, y = *(const int *)b;
    if (si[x].sig != si[y].sig) return si[x].sig < si[y].sig ? -1 : 1;
    return (x > y) - (x < y);
}

/* Appends the pair (a, b), a < b, to *pairs (growing it); false when out of memory. */
static bool add_pair(int **pairs, int *n, int *cap, int a, int b) {
    if (a == b) return true;
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        int *p = realloc(*pairs, sizeof(int) * 2 * (size_t)nc);
        if (!p) return false;
        *pairs = p;
        *cap = nc;
    }
    (*pairs)[2 * *n] = a < b ? a : b;
    (*pairs)[2 * *n + 1] = a < b ? b : a;
    (*n)++;
    return true;
}

/* The pairs of sets worth grouping: sets reading a common activation (a float value that is
 * no weight, produced outside both), and sets of equal signature; sorted, without repeats. */
static int candidate_pairs(split_ws *w, const set_info *si, int **out) {
    const ir_graph *g = w->g;
    int *pairs = NULL, n = 0, cap = 0, *readers = malloc(sizeof(int) * ((size_t)w->n + 1));
    int *order = malloc(sizeof(int) * ((size_t)w->n_comps + 1));
    bool ok = readers && order;
    for (int v = 0; v < w->nv && ok; v++) {
        const ir_value *val = &g->values[v];
        if (is_weight_value(val) || !ir_dtype_is_float(val->dtype)) continue;
        int pc = val->producer >= 0 ? w->comp[val->producer] : -1, nr = 0;
        for (int u = w->uoff[v]; u < w->uoff[v + 1]; u++) {
            int c = w->comp[w->unode[u]];
            bool dup = c < 0 || c == pc;
            for (int k = 0; k < nr && !dup; k++) dup = readers[k] == c;
            if (!dup) readers[nr++] = c;
        }
        for (int a = 0; a < nr && ok; a++)
            for (int b = a + 1; b < nr && ok; b++)
                ok = add_pair(&pairs, &n, &cap, readers[a], readers[b]);
    }
    if (ok) {
        for (int c = 0; c < w->n_comps; c++) order[c] = c;
        qsort_r(order, (size_t)w->n_comps, sizeof(int), cmp_sig, (void *)si);
        for (int i = 0; i < w->n_comps && ok; i++) /* a run of equal signatures: its pairs */
            for (int j = i + 1; j < w->n_comps && si[order[j]].sig == si[order[i]].sig && ok; j++)
                ok = add_pair(&pairs, &n, &cap, order[i], order[j]);
    }
    free(readers);
    free(order);
    if (!ok) {
        free(pairs);
        *out = NULL;
        return 0; /* out of memory: no grouping */
    }
    if (n > 1) qsort(pairs, (size_t)n, 2 * sizeof(int), cmp_pair); /* pairs is NULL when n is 0 */
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!m || pairs[2 * i] != pairs[2 * (m - 1)] ||
            pairs[2 * i + 1] != pairs[2 * (m - 1) + 1]) {
            pairs[2 * m] = pairs[2 * i];
            pairs[2 * m + 1] = pairs[2 * i + 1];
            m++;
        }
    *out = pairs;
    return m;
}

static void group_sets(split_ws *w, set_info *si, const pet_split_opts *o) {
    int max_group = o && o->max_group > 0 ? o->max_group : 4;
    int max_nodes = o && o->max_group_nodes > 0 ? o->max_group_nodes : 16;
    int *gsize = calloc((size_t)w->n_comps + 1, sizeof(int));
    int *gnodes = calloc((size_t)w->n_comps + 1, sizeof(int));
    int *pairs = NULL, np = gsize && gnodes ? candidate_pairs(w, si, &pairs) : 0;
    for (int c = 0; c < w->n_comps && gsize; c++) gsize[c] = 1, gnodes[c] = si[c].n_nodes;
    for (int i = 0; i < np; i++) { /* in (a, b) order: deterministic */
        int a = pairs[2 * i], b = pairs[2 * i + 1];
        int ga = si[a].group, gb = si[b].group;
        if (ga == gb || gsize[ga] + gsize[gb] > max_group || gnodes[ga] + gnodes[gb] > max_nodes)
            continue;
        if (reaches_group(w, si, gb, ga) || reaches_group(w, si, ga, gb)) continue;
        int keep = ga < gb ? ga : gb, drop = ga < gb ? gb : ga;
        for (int c = 0; c < w->n_comps; c++)
            if (si[c].group == drop) si[c].group = keep;
        gsize[keep] += gsize[drop];
        gnodes[keep] += gnodes[drop];
    }
    free(pairs);
    free(gsize);
    free(gnodes);
}

static void ws_free(split_ws *w) {
    free(w->ml);
    free(w->uf);
    free(w->level);
    free(w->uoff);
    free(w->unode);
    free(w->comp);
    free(w->stack);
    free(w->seen);
}

/* Fills sp from the nodes of group grp (set_info.group == grp). */
static bool fill_subprog(split_ws *w, const set_info *si, int grp, pet_subprog *sp) {
    const ir_graph *g = w->g;
    int n = 0;
    for (int i = 0; i < w->n; i++)
        if (w->comp[i] >= 0 && si[w->comp[i]].group == grp) n++;
    sp->nodes = malloc(sizeof(int) * (size_t)n);
    sp->node_ids = malloc(sizeof(uint32_t) * (size_t)n);
    int cap_in = 0, cap_out = 0;
    for (int i = 0; i < w->n; i++)
        if (w->comp[i] >= 0 && si[w->comp[i]].group == grp)
            cap_in += g->nodes[i].n_in, cap_out += g->nodes[i].n_out;
    sp->inputs = malloc(sizeof(int) * ((size_t)cap_in + 1));
    sp->input_kind = calloc((size_t)cap_in + 1, 1);
    sp->input_bias = calloc((size_t)cap_in + 1, 1);
    sp->outputs = malloc(sizeof(int) * ((size_t)cap_out + 1));
    if (!sp->nodes || !sp->node_ids || !sp->inputs || !sp->input_kind || !sp->input_bias ||
        !sp->outputs)
        return false;
    sp->n_nodes = 0;
    for (int i = 0; i < w->n; i++) {
        if (w->comp[i] < 0 || si[w->comp[i]].group != grp) continue;
        sp->nodes[sp->n_nodes] = i;
        sp->node_ids[sp->n_nodes++] = g->nodes[i].id;
    }
    sp->n_inputs = sp->n_outputs = sp->n_compute = 0;
    for (int q = 0; q < sp->n_nodes; q++) {
        const ir_node *nd = &g->nodes[sp->nodes[q]];
        if (nd->op == IR_OP_Conv || nd->op == IR_OP_ConvTranspose || nd->op == IR_OP_MatMul ||
            nd->op == IR_OP_Gemm)
            sp->n_compute++;
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k];
            if (v < 0 || !ir_dtype_is_float(g->values[v].dtype)) continue;
            int p = g->values[v].producer;
            if (p >= 0 && w->comp[p] >= 0 && si[w->comp[p]].group == grp) continue;
            bool bias = k == 2 && (nd->op == IR_OP_Conv || nd->op == IR_OP_ConvTranspose ||
                                   nd->op == IR_OP_Gemm);
            int j = 0;
            while (j < sp->n_inputs && sp->inputs[j] != v) j++;
            if (j < sp->n_inputs) {
                if (!bias) sp->input_bias[j] = 0;
                continue;
            }
            const ir_value *sv = &g->values[v];
            sp->inputs[j] = v;
            sp->input_bias[j] = bias;
            if (p >= 0)
                sp->input_kind[j] = PET_IN_ACTIVATION;
            else if ((sv->flags & IR_VF_CONST) && sv->blob)
                sp->input_kind[j] = (sv->flags & (IR_VF_PARAM | IR_VF_INITIALIZER))
                                        ? PET_IN_INITIALIZER
                                        : PET_IN_LITERAL;
            else
                sp->input_kind[j] = (sv->flags & IR_VF_PARAM) ? PET_IN_WEIGHT : PET_IN_ACTIVATION;
            sp->n_inputs++;
        }
    }
    for (int q = 0; q < sp->n_nodes; q++) {
        const ir_node *nd = &g->nodes[sp->nodes[q]];
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v < 0) continue;
            bool out = (g->values[v].flags & IR_VF_OUTPUT) != 0;
            for (int u = w->uoff[v]; u < w->uoff[v + 1] && !out; u++) {
                int j = w->unode[u];
                out = w->comp[j] < 0 || si[w->comp[j]].group != grp;
            }
            if (out) sp->outputs[sp->n_outputs++] = v;
        }
    }
    return true;
}

static void subprog_free(pet_subprog *sp) {
    free(sp->nodes);
    free(sp->node_ids);
    free(sp->inputs);
    free(sp->input_kind);
    free(sp->input_bias);
    free(sp->outputs);
}

void pet_split_free(pet_split *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) subprog_free(&s->progs[i]);
    free(s->progs);
    free(s);
}

ir_status pet_split_graph(const ir_graph *g, const pet_split_opts *o, pet_split **out, ir_diag *d) {
    *out = NULL;
    split_ws w = {.g = g, .n = g->n_nodes, .nv = g->n_values};
    set_info *si = NULL;
    unsigned char *bad = NULL;
    pet_split *s = calloc(1, sizeof *s);
    size_t nn = (size_t)w.n + 1;
    w.ml = calloc(nn, 1);
    w.uf = malloc(sizeof(int) * nn);
    w.level = calloc(nn, sizeof(int));
    w.comp = malloc(sizeof(int) * nn);
    w.stack = malloc(sizeof(int) * nn);
    w.seen = calloc(nn, 1);
    if (!s || !w.ml || !w.uf || !w.level || !w.comp || !w.stack || !w.seen || !build_readers(&w))
        goto oom;
    for (int i = 0; i < w.n; i++) {
        const ir_node *nd = &g->nodes[i];
        w.ml[i] = pet_node_is_multilinear(g, nd);
        w.uf[i] = i;
        int lv = 0;
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k], p = v >= 0 ? g->values[v].producer : -1;
            if (p < 0) continue;
            int l = w.level[p] + (w.ml[p] ? 0 : 1);
            if (l > lv) lv = l;
        }
        w.level[i] = lv;
    }
    /* maximal connected sets; those that are not convex are re-cut by level */
    union_edges(&w, false, NULL);
    number_sets(&w);
    bad = calloc(nn, 1);
    if (!bad) goto oom;
    bool any_bad = false;
    for (int c = 0; c < w.n_comps; c++) {
        if (set_is_convex(&w, c)) continue;
        any_bad = true;
        for (int i = 0; i < w.n; i++)
            if (w.comp[i] == c) bad[i] = 1;
    }
    if (any_bad) {
        for (int i = 0; i < w.n; i++)
            if (bad[i]) w.uf[i] = i;
        union_edges(&w, true, bad);
        number_sets(&w);
    }
    si = calloc((size_t)w.n_comps + 1, sizeof *si);
    if (!si) goto oom;
    for (int c = 0; c < w.n_comps; c++) si[c].first = -1, si[c].group = c;
    for (int i = 0; i < w.n; i++) {
        int c = w.comp[i];
        if (c < 0) continue;
        if (si[c].first < 0) si[c].first = i;
        si[c].n_nodes++;
        /* the signature: a sum (order-free) of each node's op and input shapes */
        const ir_node *nd = &g->nodes[i];
        uint64_t h = mixh(0x51ed27, (uint64_t)nd->op);
        for (int k = 0; k < nd->n_in; k++) {
            const ir_value *v = ir_node_in(g, nd, k);
            if (!v) continue;
            h = mixh(h, (uint64_t)v->shape.rank);
            for (int r = 0; r < v->shape.rank; r++) h = mixh(h, (uint64_t)v->shape.dims[r]);
        }
        si[c].sig += h;
    }
    if (!o || o->max_group != 1) group_sets(&w, si, o);
    int n_groups = 0;
    for (int c = 0; c < w.n_comps; c++) n_groups += si[c].group == c;
    s->progs = calloc((size_t)n_groups + 1, sizeof *s->progs);
    if (!s->progs) goto oom;
    for (int c = 0; c < w.n_comps; c++) { /* sets are numbered by first node: so are groups */
        if (si[c].group != c) continue;
        pet_subprog *sp = &s->progs[s->n++];
        if (!fill_subprog(&w, si, c, sp)) goto oom;
        for (int q = 0; q < w.n_comps; q++) sp->n_parts += si[q].group == c;
        if (sp->n_parts > 1) s->n_grouped++;
        s->n_multilinear_nodes += sp->n_nodes;
    }
    s->n_cut_nodes = w.n - s->n_multilinear_nodes;
    free(si);
    free(bad);
    ws_free(&w);
    *out = s;
    return IR_OK;
oom:
    free(si);
    free(bad);
    ws_free(&w);
    pet_split_free(s);
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory splitting the program");
}
