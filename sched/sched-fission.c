/* sched-fission.c - what sched/ needs to count in-place chains, views and fission groups
 * (sched-impl.h, schedule.h): buffer roots, the bytes and time of a value or node given them (a
 * view owns no bytes and takes no time), group tags, and the replay of a group's nodes alone, which
 * is the memory the n-1 other parts of a fission take when the materialized graph runs them one
 * after another right before the group's first step (rw_fission_materialize).
 *
 * Invariants: a replay reads only the graph and the group's node list, and leaves the scratch
 * arrays (lastg, at, until) all -1 as it found them, so one sfg_groups serves many replays. */
#include "sched-impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void sfg_roots(const ir_graph *g, int *root) {
    ir_graph_buffer_roots(g, root);
    /* fused accumulates as an order that runs each part after its first slice has them (out of
     * memory: the parts keep their buffers, an estimate that only over-counts) */
    ir_graph_fused_parts(g, NULL, NULL, root, NULL);
}

size_t sfg_value_bytes(const ir_graph *g, const int *root, int v) {
    if (v < 0 || v >= g->n_values || root[v] != v || ir_value_on_host(g, v)) return 0;
    return ir_value_bytes(&g->values[v]);
}

bool sfg_node_is_view(const ir_graph *g, const int *root, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    /* a view op's output 0 has another root exactly when it is a view: no view op is in place */
    return def && (def->flags & IR_OPF_VIEW) && n->n_out > 0 && n->out[0] >= 0 &&
           root[n->out[0]] != n->out[0];
}

double sched_node_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n) {
    if (root ? sfg_node_is_view(g, root, n)
             : (n->n_out > 0 && n->out[0] >= 0 && ir_value_view_of(g, n->out[0]) >= 0))
        return 0.0;
    return prof_node_seconds(cost, g, n);
}

int sfg_node_group(const ir_node *n, int *parts) {
    *parts = 1;
    /* one pass over the attributes, the names compared only where they start as the tags do:
     * the simulator asks this of every node several times per state */
    int64_t k = -1, p = 1;
    bool has_k = false, has_p = false;
    for (int a = 0; a < n->n_attrs && !(has_k && has_p); a++) {
        const ir_attr *at = &n->attrs[a];
        const char *nm = at->name;
        if (!nm || nm[0] != 'm' || strncmp(nm, "magpie_fission_", 15) != 0) continue;
        /* as ir_attr_int: the first of the name (which also saturates a float) */
        int64_t x = at->type == IR_ATTR_FLOAT ? ir_attr_int(n, nm, 0) : at->i;
        if (!has_k && strcmp(nm + 15, "group") == 0) {
            k = x;
            has_k = true;
        } else if (!has_p && strcmp(nm + 15, "parts") == 0) {
            p = x;
            has_p = true;
        }
    }
    if (k < 0 || k > INT_MAX || p < 2 || p > INT_MAX) return -1;
    *parts = (int)p;
    return (int)k;
}

/* A FissionAccumulate as another part or another order runs it, from a copy of the node: as part
 * 0 (first: index 0, where it copies, ops-fission.c) of the kept part's node (index parts - 1),
 * and as a kernel of its own (unfused: `fused` 0) where the order leaves its part a buffer of its
 * own (root[part] == part, ir_graph_fused_parts). -1 when n is no such node or nothing changes. */
static double accumulate_seconds(prof_model *cost, const ir_graph *g, const int *root,
                                 const ir_node *n, bool first) {
    enum { MAX_ATTRS = 8 };
    if (n->op != IR_OP_FissionAccumulate || n->n_attrs > MAX_ATTRS) return -1.0;
    bool unfused = root && n->n_in > 1 && n->in[1] >= 0 && root[n->in[1]] == n->in[1] &&
                   ir_fission_accumulate_fused(g, n);
    ir_attr a[MAX_ATTRS];
    ir_node copy = *n;
    bool changed = false;
    for (int i = 0; i < n->n_attrs; i++) {
        a[i] = n->attrs[i];
        if (a[i].type != IR_ATTR_INT) continue;
        if (first && strcmp(a[i].name, "index") == 0) a[i].i = 0, changed = true;
        if (unfused && strcmp(a[i].name, "fused") == 0) a[i].i = 0, changed = true;
    }
    if (!changed) return -1.0;
    copy.attrs = a;
    return sched_node_seconds(cost, g, root, &copy);
}

double sfg_part_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n,
                        bool first) {
    double t0 = accumulate_seconds(cost, g, root, n, first);
    return t0 >= 0 ? t0 : sched_node_seconds(cost, g, root, n);
}

double sfg_node_seconds_of(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n,
                           double t) {
    int parts;
    sfg_node_group(n, &parts);
    if (parts <= 1) return t;
    /* sfg_part_seconds(..., true) without its second roofline: t is what it falls back to */
    double t0 = accumulate_seconds(cost, g, root, n, true);
    return t * (parts - 1) + (t0 >= 0 ? t0 : t);
}

double sfg_node_seconds(prof_model *cost, const ir_graph *g, const int *root, const ir_node *n) {
    return sfg_node_seconds_of(cost, g, root, n, sched_node_seconds(cost, g, root, n));
}

/* The group of the node producing value v, or -1 (residents, untagged producers). */
static int group_of_value(const sfg_groups *f, const ir_graph *g, int v) {
    int p = g->values[v].producer;
    return p >= 0 ? f->of[p] : -1;
}

ir_status sfg_find(sfg_groups *f, const ir_graph *g, const int *order, const int *root,
                   ir_diag *d) {
    memset(f, 0, sizeof *f);
    int n = g->n_nodes, nv = g->n_values, n_tags = 0;
    int *tags = NULL;
    bool any = false;
    for (int i = 0; i < n && !any; i++) {
        int parts;
        any = sfg_node_group(&g->nodes[i], &parts) >= 0;
    }
    if (!any) return IR_OK; /* the common case: no group, nothing allocated */
    size_t sn = (size_t)n + 1, sv = (size_t)nv + 1;
    f->of = malloc(sizeof(int) * sn);
    tags = malloc(sizeof(int) * sn);
    f->parts = malloc(sizeof(int) * sn);
    f->off = calloc(sn + 1, sizeof(int));
    f->node = malloc(sizeof(int) * sn);
    f->ext = calloc(sv, 1);
    f->lastg = malloc(sizeof(int) * sv);
    f->at = malloc(sizeof(int) * sv);
    f->until = malloc(sizeof(int) * sv);
    if (!f->of || !tags || !f->parts || !f->off || !f->node || !f->ext || !f->lastg || !f->at ||
        !f->until) {
        free(tags);
        sfg_free(f);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the fission groups of %d nodes", n);
    }
    /* Groups numbered by first step: walk the order, giving each new tag the next number. A
     * graph has few groups, so a linear search over the tags seen is enough. */
    for (int i = 0; i < n; i++) f->of[i] = -1;
    for (int s = 0; s < n; s++) {
        int x = order[s], parts, t = sfg_node_group(&g->nodes[x], &parts), k = 0;
        if (t < 0) continue;
        while (k < n_tags && tags[k] != t) k++;
        if (k == n_tags) {
            tags[n_tags++] = t;
            f->parts[k] = parts;
        }
        f->of[x] = k;
        f->off[k + 1]++;
    }
    f->n = n_tags;
    for (int k = 0; k < n_tags; k++) f->off[k + 1] += f->off[k];
    int *cur = tags; /* the tags are numbered now: their array becomes the fill cursors */
    for (int k = 0; k < n_tags; k++) cur[k] = f->off[k];
    for (int s = 0; s < n; s++) {
        int x = order[s];
        if (f->of[x] >= 0) f->node[cur[f->of[x]]++] = x;
    }
    free(tags);
    for (int v = 0; v < nv; v++) f->lastg[v] = f->at[v] = f->until[v] = -1;
    /* A chain read by a node outside its producer's group, or holding a graph output, is kept. */
    for (int y = 0; y < n; y++) {
        const ir_node *nd = &g->nodes[y];
        for (int i = 0; i < nd->n_in; i++) {
            if (nd->in[i] < 0) continue;
            int r = root[nd->in[i]], k = group_of_value(f, g, r);
            if (k >= 0 && k != f->of[y]) f->ext[r] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) f->ext[root[g->outputs[i]]] = 1;
    return IR_OK;
}

void sfg_free(sfg_groups *f) {
    if (!f) return;
    free(f->parts);
    free(f->off);
    free(f->node);
    free(f->of);
    free(f->ext);
    free(f->lastg);
    free(f->at);
    free(f->until);
    memset(f, 0, sizeof *f);
}

size_t sfg_replay(sfg_groups *f, const ir_graph *g, const int *root, int k, int *peak_at,
                  uint8_t *live) {
    const int *nodes = f->node + f->off[k];
    int cnt = f->off[k + 1] - f->off[k], pk = -1;
    /* The last read of each of the group's buffers within the group (reads of any value of a
     * chain count for its root). */
    for (int i = 0; i < cnt; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        for (int j = 0; j < nd->n_in; j++) {
            if (nd->in[j] < 0) continue;
            int r = root[nd->in[j]];
            if (group_of_value(f, g, r) == k) f->lastg[r] = i;
        }
    }
    size_t cur = 0, peak = 0;
    for (int i = 0; i < cnt; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        size_t alloc = ir_node_workspace(g, nd);
        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0) alloc += sfg_value_bytes(g, root, nd->out[j]);
        if (pk < 0 || cur + alloc > peak) {
            peak = cur + alloc;
            pk = i;
        }
        for (int j = 0; j < nd->n_out; j++) {
            int o = nd->out[j];
            size_t b = o >= 0 ? sfg_value_bytes(g, root, o) : 0;
            if (!b) continue;
            cur += b;
            f->at[o] = i;
            f->until[o] = INT_MAX;
            if (!f->ext[o] && f->lastg[o] < 0) { /* nobody in the group reads it */
                cur -= b;
                f->until[o] = i;
            }
        }
        for (int j = 0; j < nd->n_in; j++) {
            if (nd->in[j] < 0) continue;
            int r = root[nd->in[j]];
            if (f->lastg[r] != i || f->ext[r] || f->until[r] != INT_MAX) continue;
            cur -= sfg_value_bytes(g, root, r);
            f->until[r] = i;
        }
    }
    if (peak_at) *peak_at = pk;
    /* Marks what was live at the peak, then restores the scratch (every entry set above belongs
     * to an input or an output of the group's nodes). */
    for (int i = 0; i < cnt; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        for (int j = 0; j < nd->n_out; j++) {
            int o = nd->out[j];
            if (o < 0) continue;
            if (live && f->at[o] >= 0 && f->at[o] <= pk && f->until[o] >= pk) live[o] = 1;
            f->at[o] = f->until[o] = f->lastg[o] = -1;
        }
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] >= 0) f->lastg[root[nd->in[j]]] = -1;
    }
    return peak;
}
