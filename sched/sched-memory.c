/* sched-memory.c - lifetimes, live bytes per step, the peak and the hot-spots of an order,
 * computed analytically (the simulator's side of DESIGN.md decision 2; it never calls runtime/).
 *
 * The rules are runtime/rt.h's, restated as intervals:
 *  - residents (graph inputs, and constants that a node or a graph output reads) are live
 *    throughout: def_step = -1, last_step = n_steps;
 *  - a value produced at step d and last read at step l is live over [d, l], both ends included
 *    (it is allocated before step d's peak moment and freed after step l's); never read: [d, d];
 *    a graph output: [d, n_steps];
 *  - other values are never live: def_step = last_step = -1;
 *  - live(s) = resident + workspace(s) + sum of bytes of produced values whose interval holds s,
 *    evaluated with a difference array in O(values + steps).
 * Values in host memory (outputs of IR_OPF_HOST_OUTPUT ops: Store) keep their lifetime, which
 * the simulator uses for host bytes, but never count as device bytes nor as hot-spots; in-place
 * outputs count no bytes of their own either (both are sched_value_device_bytes, the one
 * definition sched/ counts with), and neither do views (ir_value_view_of). The root of an in-place
 * chain or of views over a produced value holds the buffer: its last_step is the last step of any
 * value with that root (ir_graph_buffer_roots); views of a resident are resident. A fused
 * FissionAccumulate's part that the order lets its producer write into the accumulate's buffer
 * (ir_graph_fused_parts, as the executor decides it) joins that buffer's root and owns no bytes.
 * Fission groups (schedule.h): at a group's first step t0, step_bytes is what is live before t0
 * allocates plus the group's replay peak (sfg_replay), when that is more.
 * Hot-spots are every value live at the first step that reaches the peak, residents included
 * (MAGIS's H is "the tensors live at the peak"; weights are part of that memory); at a peak that
 * a group's replay sets, the values live before t0 plus the group's buffers live at the replay's
 * peak moment. When there are no steps, the peak is the resident bytes, peak_step is -1 and the
 * hot-spots are the residents. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

size_t sched_value_device_bytes(const ir_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return 0;
    if (ir_value_on_host(g, v) || ir_value_alias_of(g, v) >= 0) return 0;
    return ir_value_bytes(&g->values[v]);
}

/* The hot-spots of a peak that a group's replay sets at its first step t0: residents, the values
 * live at t0 before it allocates, and the group's buffers live at the replay's peak moment. */
static ir_status replay_hotspots(const ir_graph *g, sfg_groups *f, const int *root, int k, int t0,
                                 const int *pos, sched_memory *m, ir_diag *d) {
    uint8_t *live = calloc((size_t)g->n_values + 1, 1);
    if (!live) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the hot-spots");
    int pk = -1;
    sfg_replay(f, g, root, k, &pk, live);
    if (pk >= 0) m->replay_peak_step = pos[f->node[f->off[k] + pk]];
    const sched_lifetime *lt = m->lifetimes;
    for (int v = 0; v < g->n_values; v++) {
        bool resident = lt[v].def_step < 0 && lt[v].last_step == m->n_steps;
        bool before = lt[v].def_step >= 0 && lt[v].def_step < t0 && lt[v].last_step >= t0 &&
                      sfg_value_bytes(g, root, v) > 0;
        if (resident || before || live[v]) m->hotspots[m->n_hotspots++] = v;
    }
    free(live);
    return IR_OK;
}

ir_status sched_memory_compute(const ir_graph *g, const int *order, sched_memory *m, ir_diag *d) {
    return sched_memory_compute_keep(g, order, m, NULL, NULL, d);
}

ir_status sched_memory_compute_keep(const ir_graph *g, const int *order, sched_memory *m,
                                    int **root_out, sfg_groups *fg_out, ir_diag *d) {
    memset(m, 0, sizeof *m);
    if (root_out) *root_out = NULL;
    if (fg_out) memset(fg_out, 0, sizeof *fg_out);
    int n = g->n_nodes;
    ir_status st = IR_OK;
    int *own = NULL, *pos = NULL, *root = NULL, *t0_group = NULL;
    long long *delta = NULL;
    sfg_groups fg = {0};
    if (!order) order = own = sched_eager_order(g);
    if (!order) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the eager order");
    if (!sched_order_valid(g, order, n)) {
        st = ir_diag_set(d, IR_ERR_INVALID,
                         "the order is not a topological permutation of the graph's %d nodes", n);
        goto out;
    }
    size_t nv = (size_t)(g->n_values ? g->n_values : 1), ns = (size_t)(n ? n : 1);
    m->n_steps = n;
    m->step_bytes = calloc(ns, sizeof(size_t));
    m->lifetimes = malloc(sizeof(sched_lifetime) * nv);
    m->hotspots = malloc(sizeof(int) * nv);
    pos = malloc(sizeof(int) * ns);
    root = malloc(sizeof(int) * nv);
    t0_group = malloc(sizeof(int) * ns);
    delta = calloc(ns + 1, sizeof(long long));
    if (!m->step_bytes || !m->lifetimes || !m->hotspots || !pos || !root || !t0_group || !delta) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory computing lifetimes");
        goto out;
    }
    for (int s = 0; s < n; s++) pos[order[s]] = s;
    /* the order's own fused accumulates (the executor's rule, not sfg_roots' assumption) */
    ir_graph_buffer_roots(g, root);
    if (!ir_graph_fused_parts(g, order, pos, root, NULL)) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory placing the fused accumulates");
        goto out;
    }

    sched_lifetime *lt = m->lifetimes;
    for (int v = 0; v < g->n_values; v++) {
        int p = g->values[v].producer;
        lt[v].def_step = p >= 0 ? pos[p] : -1;
        lt[v].last_step = -1;
    }
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0 && lt[nd->in[i]].last_step < s) lt[nd->in[i]].last_step = s;
    }
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        bool read = lt[v].last_step >= 0, out = val->flags & IR_VF_OUTPUT;
        if (val->producer < 0) {
            if ((val->flags & IR_VF_INPUT) || (val->blob && (read || out))) {
                lt[v].last_step = n;
                m->resident_bytes += ir_value_bytes(val);
            } else {
                lt[v].last_step = -1; /* never on the device */
            }
            continue;
        }
        if (out)
            lt[v].last_step = n;
        else if (!read)
            lt[v].last_step = lt[v].def_step;
    }
    /* An in-place chain's buffer is its root's, and so is a view's: it lives until the last use
     * of any value of the chain or view of it (graph outputs included). */
    for (int v = 0; v < g->n_values; v++) {
        int r = root[v];
        if (r != v && g->values[r].producer >= 0 && lt[v].last_step > lt[r].last_step)
            lt[r].last_step = lt[v].last_step;
    }
    for (int v = 0; v < g->n_values; v++) {
        /* Store outputs keep their lifetime (the simulator counts them as host bytes). */
        long long b = g->values[v].producer >= 0 ? (long long)sfg_value_bytes(g, root, v) : 0;
        if (!b) continue;
        delta[lt[v].def_step] += b;
        delta[lt[v].last_step + 1 <= n ? lt[v].last_step + 1 : n] -= b;
    }
    long long live = 0;
    for (int s = 0; s < n; s++) {
        live += delta[s];
        m->step_bytes[s] =
            m->resident_bytes + (size_t)live + ir_node_workspace(g, &g->nodes[order[s]]);
        t0_group[s] = -1;
    }
    /* Fission groups: the n-1 other parts run alone right before the group's first step t0, on
     * top of what is live there before t0 allocates (L0 = step bytes minus t0's own outputs and
     * workspace). */
    if ((st = sfg_find(&fg, g, order, root, d)) != IR_OK) goto out;
    for (int k = 0; k < fg.n; k++) {
        /* t0 is the group's first slice (schedule.h): tagged nodes before it are generators */
        int x = fg.node[fg.off[k]];
        for (int j = fg.off[k]; j < fg.off[k + 1]; j++)
            if (g->nodes[fg.node[j]].op == IR_OP_FissionSlice) {
                x = fg.node[j];
                break;
            }
        int t0 = pos[x];
        const ir_node *nd = &g->nodes[x];
        size_t own_bytes = ir_node_workspace(g, nd);
        for (int i = 0; i < nd->n_out; i++)
            if (nd->out[i] >= 0) own_bytes += sfg_value_bytes(g, root, nd->out[i]);
        size_t with = m->step_bytes[t0] - own_bytes + sfg_replay(&fg, g, root, k, NULL, NULL);
        if (with >= m->step_bytes[t0]) {
            m->step_bytes[t0] = with;
            t0_group[t0] = k;
        }
    }
    m->peak_bytes = m->resident_bytes;
    m->peak_step = m->replay_peak_step = -1;
    for (int s = 0; s < n; s++) {
        if (m->step_bytes[s] > m->peak_bytes ||
            (m->peak_step < 0 && n > 0 && m->step_bytes[s] >= m->peak_bytes)) {
            m->peak_bytes = m->step_bytes[s];
            m->peak_step = s;
        }
    }
    int p = m->peak_step;
    if (p >= 0 && t0_group[p] >= 0) {
        st = replay_hotspots(g, &fg, root, t0_group[p], p, pos, m, d);
        goto out;
    }
    for (int v = 0; v < g->n_values; v++) {
        bool resident = lt[v].def_step < 0 && lt[v].last_step == n;
        bool at_peak = p >= 0 && lt[v].def_step >= 0 && lt[v].def_step <= p &&
                       lt[v].last_step >= p && sfg_value_bytes(g, root, v) > 0;
        if (resident || at_peak) m->hotspots[m->n_hotspots++] = v;
    }
out:
    free(own);
    free(pos);
    free(t0_group);
    free(delta);
    if (st == IR_OK && root_out) {
        *root_out = root;
        root = NULL;
    }
    if (st == IR_OK && fg_out) {
        *fg_out = fg;
        memset(&fg, 0, sizeof fg);
    }
    free(root);
    sfg_free(&fg);
    if (st != IR_OK) sched_memory_free(m);
    return st;
}

void sched_memory_free(sched_memory *m) {
    if (!m) return;
    free(m->step_bytes);
    free(m->lifetimes);
    free(m->hotspots);
    memset(m, 0, sizeof *m);
}

int sched_node_step(const ir_graph *g, const sched_memory *m, int i) {
    const ir_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) return m->lifetimes[n->out[k]].def_step;
    return -1;
}
