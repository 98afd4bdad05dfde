/* rules-fission-mat.c - materializing a one-copy graph (rules.h, rw_fission_materialize): the
 * graph that actually runs every part of every fission, in the order whose memory
 * sched_memory_compute predicted for the one-copy graph.
 *
 * For a group k of n parts whose first slice the order runs at step t0, parts 0..n-2 are cloned
 * from the kept part (n-1): each clone reads what the kept part reads from outside the group
 * (buffers, shared weights, the unsliced inputs of the slices), its own part's values inside, and
 * slices and assembles get index p. The assembles of one output form a chain through the buffer,
 * part 0 first: each reads the value the previous part's assemble wrote, the kept part's last, so
 * executing the in-place writes in order leaves the whole result in the buffer. The clones run part
 * after part right before t0, which is exactly what the accounting of schedule.h assumes;
 * rw_fission_apply's ordering inputs guarantee that everything they read from outside the group
 * exists there.
 *
 * The returned graph's node array is the materialized order itself (so *out_order is the
 * identity), tags are dropped, and the graph is validated: an order that does not suit (a clone
 * would read a value before it is produced) is refused. */
#include "rules-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mat_group {
    int64_t k, parts;
    int first;      /* its first step in order */
    int n, off;     /* its nodes: list[off .. off+n), in step order */
    int clones_off; /* its clones: cl[clones_off .. + (parts-1) * n), part after part */
} mat_group;

typedef struct mat_work {
    const ir_graph *g; /* the one-copy graph */
    ir_graph *m;       /* the materialized graph being built */
    mat_group *groups;
    int n_groups;
    int *gidx; /* per node of g: its group, -1 when untagged */
    int *list; /* group node lists */
    int *cl;   /* clone node indices in m */
    int *vmap; /* per value of g: its clone in the current part, -1 */
    int *last; /* per value of g (a buffer): the latest value of its assemble chain, -1 */
} mat_work;

static ir_status nomem(ir_diag *d) {
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory materializing fissions");
}

static bool is_assemble(ir_op_kind op) {
    return op == IR_OP_FissionAssemble || op == IR_OP_FissionAccumulate;
}

/* Groups from the tags, each with its node list in step order. */
static ir_status find_groups(mat_work *w, const int *order, ir_diag *d) {
    const ir_graph *g = w->g;
    int cap = 4;
    w->groups = malloc(sizeof(mat_group) * (size_t)cap);
    if (!w->groups) return nomem(d);
    for (int s = 0; s < g->n_nodes; s++) {
        const ir_node *n = &g->nodes[order[s]];
        const ir_attr *ga = ir_attr_find(n, RW_FISSION_GROUP_ATTR);
        w->gidx[order[s]] = -1;
        if (!ga) continue;
        int64_t parts = ir_attr_int(n, RW_FISSION_PARTS_ATTR, 0);
        int j = 0;
        while (j < w->n_groups && w->groups[j].k != ga->i) j++;
        if (j == w->n_groups) {
            if (w->n_groups == cap) {
                mat_group *p = realloc(w->groups, sizeof(mat_group) * (size_t)(cap *= 2));
                if (!p) return nomem(d);
                w->groups = p;
            }
            w->groups[w->n_groups++] = (mat_group){.k = ga->i, .parts = parts, .first = -1};
        }
        /* the group starts at its first slice: tagged nodes before it are generators (they read
         * only shared values), and the buffers exist from there on (schedule.h) */
        if (n->op == IR_OP_FissionSlice && w->groups[j].first < 0) w->groups[j].first = s;
        if (parts < 2 || parts != w->groups[j].parts)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "materialize: fission group %lld has %lld parts here, %lld before",
                                (long long)ga->i, (long long)parts, (long long)w->groups[j].parts);
        w->gidx[order[s]] = j;
        w->groups[j].n++;
    }
    int off = 0, coff = 0;
    for (int j = 0; j < w->n_groups; j++) {
        w->groups[j].off = off;
        w->groups[j].clones_off = coff;
        off += w->groups[j].n;
        coff += (int)(w->groups[j].parts - 1) * w->groups[j].n;
        w->groups[j].n = 0;
    }
    w->list = malloc(sizeof(int) * (size_t)(off ? off : 1));
    w->cl = malloc(sizeof(int) * (size_t)(coff ? coff : 1));
    if (!w->list || !w->cl) return nomem(d);
    for (int s = 0; s < g->n_nodes; s++) {
        int j = w->gidx[order[s]];
        if (j >= 0) w->list[w->groups[j].off + w->groups[j].n++] = order[s];
    }
    return IR_OK;
}

/* The attributes of a clone for part p: the kept part's, without the tags, with index p. */
static ir_attr *clone_attrs(ir_graph *m, const ir_node *n, int p, int *n_attrs) {
    ir_attr *a = ir_graph_alloc(m, sizeof(ir_attr) * (size_t)(n->n_attrs ? n->n_attrs : 1));
    int cnt = 0;
    if (!a) return NULL;
    for (int i = 0; i < n->n_attrs; i++) {
        const ir_attr *x = &n->attrs[i];
        if (strcmp(x->name, RW_FISSION_GROUP_ATTR) == 0 ||
            strcmp(x->name, RW_FISSION_PARTS_ATTR) == 0)
            continue;
        a[cnt] = *x;
        if (rw_is_fission_op(n->op) && strcmp(x->name, "index") == 0) a[cnt].i = p;
        cnt++;
    }
    *n_attrs = cnt;
    return a;
}

/* Clones node i of g (in group gr) as part p into m. */
static ir_status clone_node(mat_work *w, const mat_group *gr, int i, int p, int *out_idx,
                            ir_diag *d) {
    const ir_graph *g = w->g;
    ir_graph *m = w->m;
    const ir_node *n = &g->nodes[i];
    int *in = malloc(sizeof(int) * (size_t)(n->n_in + n->n_out + 2));
    if (!in) return nomem(d);
    int *out = in + n->n_in + 1;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        in[k] = v >= 0 && w->vmap[v] >= 0 ? w->vmap[v] : v;
    }
    if (is_assemble(n->op) && n->in[0] >= 0 && w->last[n->in[0]] >= 0) in[0] = w->last[n->in[0]];
    ir_status st = IR_OK;
    char name[512];
    for (int k = 0; k < n->n_out && st == IR_OK; k++) {
        int v = n->out[k];
        out[k] = -1;
        if (v < 0) continue;
        snprintf(name, sizeof name, "%.400s.fis%lldp%d", g->values[v].name, (long long)gr->k, p);
        ir_shape s = g->values[v].shape;
        out[k] = ir_graph_add_value(m, name, g->values[v].dtype, &s);
        if (out[k] < 0) st = nomem(d);
    }
    int n_attrs = 0;
    ir_attr *attrs = st == IR_OK ? clone_attrs(m, n, p, &n_attrs) : NULL;
    if (st == IR_OK && !attrs) st = nomem(d);
    if (st == IR_OK) {
        snprintf(name, sizeof name, "%.400s.fis%lldp%d", n->name, (long long)gr->k, p);
        int ni = ir_graph_add_node(m, n->op, name, n->n_in, in, n->n_out, out, n_attrs, attrs);
        if (ni < 0) st = nomem(d);
        *out_idx = ni;
    }
    if (st == IR_OK) {
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) w->vmap[n->out[k]] = out[k];
        if (is_assemble(n->op) && n->in[0] >= 0) w->last[n->in[0]] = out[0];
    }
    free(in);
    return st;
}

static ir_status clone_parts(mat_work *w, ir_diag *d) {
    for (int j = 0; j < w->n_groups; j++) {
        const mat_group *gr = &w->groups[j];
        int c = gr->clones_off;
        for (int p = 0; p < gr->parts - 1; p++) {
            for (int x = 0; x < gr->n; x++) {
                ir_status st = clone_node(w, gr, w->list[gr->off + x], p, &w->cl[c++], d);
                if (st != IR_OK) return st;
            }
            for (int x = 0; x < gr->n; x++) { /* the next part starts afresh */
                const ir_node *n = &w->g->nodes[w->list[gr->off + x]];
                for (int k = 0; k < n->n_out; k++)
                    if (n->out[k] >= 0) w->vmap[n->out[k]] = -1;
            }
        }
        /* the kept part's assembles close the chains */
        for (int x = 0; x < gr->n; x++) {
            int i = w->list[gr->off + x];
            ir_node *n = &w->m->nodes[i];
            if (is_assemble(n->op) && n->in[0] >= 0 && w->last[n->in[0]] >= 0)
                n->in[0] = w->last[n->in[0]];
        }
    }
    for (int i = 0; i < w->g->n_nodes; i++) { /* tags dropped: the parts are all there now */
        rw_drop_attr(&w->m->nodes[i], RW_FISSION_GROUP_ATTR);
        rw_drop_attr(&w->m->nodes[i], RW_FISSION_PARTS_ATTR);
    }
    return IR_OK;
}

/* Re-orders m's nodes into the materialized order: clones of a group right before its first
 * step, then the order. */
static ir_status permute(mat_work *w, const int *order, ir_diag *d) {
    ir_graph *m = w->m;
    int total = m->n_nodes, cnt = 0;
    ir_node *nodes = malloc(sizeof(ir_node) * (size_t)(total ? total : 1));
    if (!nodes) return nomem(d);
    for (int s = 0; s < w->g->n_nodes; s++) {
        int i = order[s], j = w->gidx[i];
        if (j >= 0 && w->groups[j].first == s) {
            const mat_group *gr = &w->groups[j];
            for (int c = 0; c < (int)(gr->parts - 1) * gr->n; c++)
                nodes[cnt++] = m->nodes[w->cl[gr->clones_off + c]];
        }
        nodes[cnt++] = m->nodes[i];
    }
    IR_ASSERT(cnt == total);
    memcpy(m->nodes, nodes, sizeof(ir_node) * (size_t)total);
    free(nodes);
    for (int i = 0; i < total; i++)
        for (int k = 0; k < m->nodes[i].n_out; k++)
            if (m->nodes[i].out[k] >= 0) m->values[m->nodes[i].out[k]].producer = i;
    return IR_OK;
}

ir_graph *rw_fission_materialize(const ir_graph *one_copy, const int *order, int **out_order,
                                 ir_diag *d) {
    const ir_graph *g = one_copy;
    mat_work w = {.g = g};
    ir_status st = IR_OK;
    *out_order = NULL;
    unsigned char *seen = calloc((size_t)g->n_nodes + 1, 1);
    w.gidx = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    w.vmap = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    w.last = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!seen || !w.gidx || !w.vmap || !w.last) {
        st = nomem(d);
        goto out;
    }
    for (int s = 0; s < g->n_nodes; s++) {
        if (order[s] < 0 || order[s] >= g->n_nodes || seen[order[s]]) {
            st = ir_diag_set(d, IR_ERR_INVALID, "materialize: the order is not a permutation");
            goto out;
        }
        seen[order[s]] = 1;
    }
    for (int v = 0; v < g->n_values; v++) w.vmap[v] = w.last[v] = -1;
    if ((st = find_groups(&w, order, d)) != IR_OK) goto out;
    if (!(w.m = ir_graph_clone(g))) {
        st = nomem(d);
        goto out;
    }
    if ((st = clone_parts(&w, d)) != IR_OK) goto out;
    if ((st = permute(&w, order, d)) != IR_OK) goto out;
    if ((st = ir_graph_validate(w.m, d)) != IR_OK) {
        ir_diag_prefix(d, "materialize: the order does not suit the fission groups");
        goto out;
    }
    *out_order = malloc(sizeof(int) * (size_t)(w.m->n_nodes ? w.m->n_nodes : 1));
    if (!*out_order) {
        st = nomem(d);
        goto out;
    }
    for (int i = 0; i < w.m->n_nodes; i++) (*out_order)[i] = i;
out:
    free(seen);
    free(w.gidx);
    free(w.vmap);
    free(w.last);
    free(w.groups);
    free(w.list);
    free(w.cl);
    if (st != IR_OK) {
        ir_graph_free(w.m);
        return NULL;
    }
    return w.m;
}
