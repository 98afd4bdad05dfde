/* sched-sim.c - the simulator (MAGIS 6.2, "performance evaluation"): latency and memory of an
 * order under a cost model, without running anything.
 *
 * Timing model: two streams.
 *  - The compute stream runs every op but Store and Load one after another, each for
 *    prof_node_seconds; a node of a fission group (schedule.h) stands for its n parts, which run
 *    one after another: its duration counts n times.
 *  - The copy stream runs Store and Load one after another, each for prof_transfer_seconds of the
 *    tensor it moves, overlapping compute.
 *  - Every op starts once its stream is free and its inputs are ready; a value is ready when its
 *    producer ends (residents at time 0), so a user waits for a Load still in flight and a Store
 *    waits for its input's producer.
 *  - A swap op is issued at its place in the order: it starts no earlier than the end of the last
 *    compute op before it in the order. Its device buffer (a Load's output) is memory that the
 *    earlier steps released, so it cannot start before they are done; this is also what makes the
 *    place of a Load matter, as sched_place_swaps assumes (a Load overlaps the compute ops between
 *    it and its user).
 * Latency is the latest end. Memory is not a function of time: device bytes per step are
 * sched_memory_compute's (the executor's accounting, to the byte); host bytes per step are the
 * live host values (Store outputs, live from their Store step through their last Load). */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

static bool on_copy_stream(const ir_node *n) {
    return n->op == IR_OP_Store || n->op == IR_OP_Load;
}

/* Bytes a swap op moves over the host link: its output's (equal to its input's). */
static size_t swap_bytes(const ir_graph *g, const ir_node *n) {
    const ir_value *v = ir_node_out(g, n, 0);
    if (!v) v = ir_node_in(g, n, 0);
    return v ? ir_value_bytes(v) : 0;
}

/* Host bytes per step from the lifetimes sched_memory_compute derived, with a difference array. */
static size_t host_bytes_per_step(const ir_graph *g, const sched_memory *m, size_t *host,
                                  long long *delta) {
    int n = m->n_steps;
    memset(delta, 0, sizeof(long long) * (size_t)(n + 1));
    for (int v = 0; v < g->n_values; v++) {
        const sched_lifetime *lt = &m->lifetimes[v];
        if (lt->def_step < 0 || !ir_value_on_host(g, v)) continue;
        long long b = (long long)ir_value_bytes(&g->values[v]);
        int end = lt->last_step + 1 <= n ? lt->last_step + 1 : n;
        delta[lt->def_step] += b;
        delta[end] -= b;
    }
    long long live = 0;
    size_t peak = 0;
    for (int s = 0; s < n; s++) {
        live += delta[s];
        host[s] = (size_t)live;
        if (host[s] > peak) peak = host[s];
    }
    return peak;
}

ir_status sched_simulate(const ir_graph *g, const int *order, prof_model *cost, sched_sim *out,
                         ir_diag *d) {
    memset(out, 0, sizeof *out);
    sched_memory m;
    ir_status st = sched_memory_compute(g, order, &m, d);
    if (st != IR_OK) return st;
    int n = g->n_nodes;
    size_t ns = (size_t)(n ? n : 1);
    int *own = NULL;
    double *ready = malloc(sizeof(double) * (size_t)(g->n_values ? g->n_values : 1));
    long long *delta = malloc(sizeof(long long) * (ns + 1));
    out->start_s = malloc(sizeof(double) * ns);
    out->end_s = malloc(sizeof(double) * ns);
    out->device_bytes = malloc(sizeof(size_t) * ns);
    out->host_bytes = malloc(sizeof(size_t) * ns);
    if (!order) order = own = sched_eager_order(g);
    if (!ready || !delta || !order || !out->start_s || !out->end_s || !out->device_bytes ||
        !out->host_bytes) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory simulating %d steps", n);
        goto out;
    }
    out->n_steps = n;
    for (int v = 0; v < g->n_values; v++) ready[v] = 0.0;

    double compute_free = 0.0, copy_free = 0.0, last_compute_end = 0.0, latency = 0.0;
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        double t = 0.0;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0 && ready[nd->in[i]] > t) t = ready[nd->in[i]];
        double start, end;
        if (on_copy_stream(nd)) {
            start = t > copy_free ? t : copy_free;
            if (last_compute_end > start) start = last_compute_end;
            end = start + prof_transfer_seconds(cost, swap_bytes(g, nd));
            copy_free = end;
        } else {
            start = t > compute_free ? t : compute_free;
            end = start + sfg_node_seconds(cost, g, nd);
            compute_free = last_compute_end = end;
        }
        for (int i = 0; i < nd->n_out; i++)
            if (nd->out[i] >= 0) ready[nd->out[i]] = end;
        out->start_s[s] = start;
        out->end_s[s] = end;
        if (end > latency) latency = end;
    }
    out->latency_s = latency;
    if (n > 0) memcpy(out->device_bytes, m.step_bytes, sizeof(size_t) * (size_t)n);
    out->peak_device_bytes = m.peak_bytes;
    out->peak_host_bytes = host_bytes_per_step(g, &m, out->host_bytes, delta);
out:
    sched_memory_free(&m);
    free(own);
    free(ready);
    free(delta);
    if (st != IR_OK) sched_sim_free(out);
    return st;
}

void sched_sim_free(sched_sim *s) {
    if (!s) return;
    free(s->start_s);
    free(s->end_s);
    free(s->device_bytes);
    free(s->host_bytes);
    memset(s, 0, sizeof *s);
}
