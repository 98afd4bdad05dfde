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
 * outputs that take over a resident's buffer count no bytes of their own either (both are
 * sched_value_device_bytes, the one definition sched/ counts with).
 * Hot-spots are every value live at the first step that reaches the peak, residents included
 * (MAGIS's H is "the tensors live at the peak"; weights are part of that memory). When there are
 * no steps, the peak is the resident bytes, peak_step is -1 and the hot-spots are the residents. */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

size_t sched_value_device_bytes(const ir_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return 0;
    if (ir_value_on_host(g, v) || ir_value_inplace_of(g, v) >= 0) return 0;
    return ir_value_bytes(&g->values[v]);
}

ir_status sched_memory_compute(const ir_graph *g, const int *order, sched_memory *m, ir_diag *d) {
    memset(m, 0, sizeof *m);
    int n = g->n_nodes;
    ir_status st = IR_OK;
    int *own = NULL, *pos = NULL;
    long long *delta = NULL;
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
    delta = calloc(ns + 1, sizeof(long long));
    if (!m->step_bytes || !m->lifetimes || !m->hotspots || !pos || !delta) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory computing lifetimes");
        goto out;
    }
    for (int s = 0; s < n; s++) pos[order[s]] = s;

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
        /* Store outputs keep their lifetime (the simulator counts them as host bytes). */
        long long b = (long long)sched_value_device_bytes(g, v);
        if (!b) continue;
        delta[lt[v].def_step] += b;
        delta[lt[v].last_step + 1 <= n ? lt[v].last_step + 1 : n] -= b;
    }
    long long live = 0;
    m->peak_bytes = m->resident_bytes;
    m->peak_step = -1;
    for (int s = 0; s < n; s++) {
        live += delta[s];
        m->step_bytes[s] =
            m->resident_bytes + (size_t)live + ir_node_workspace(g, &g->nodes[order[s]]);
        if (m->step_bytes[s] > m->peak_bytes ||
            (m->peak_step < 0 && n > 0 && m->step_bytes[s] >= m->peak_bytes)) {
            m->peak_bytes = m->step_bytes[s];
            m->peak_step = s;
        }
    }
    int p = m->peak_step;
    for (int v = 0; v < g->n_values; v++) {
        bool resident = lt[v].def_step < 0 && lt[v].last_step == n;
        bool at_peak = p >= 0 && lt[v].def_step >= 0 && lt[v].def_step <= p &&
                       lt[v].last_step >= p && sched_value_device_bytes(g, v) > 0;
        if (resident || at_peak) m->hotspots[m->n_hotspots++] = v;
    }
out:
    free(own);
    free(pos);
    free(delta);
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
