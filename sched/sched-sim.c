/* sched-sim.c - the simulator (MAGIS 6.2, "performance evaluation"): latency and memory of an
 * order under a cost model, without running anything.
 *
 * Timing model: two streams.
 *  - The compute stream runs every op but Store and Load one after another, each for
 *    prof_node_seconds. A fission group (schedule.h) stands for its n parts: the n-1 others run
 *    as one block on the compute stream right before the group's first slice, once the values
 *    the group reads from outside are ready, exactly where rw_fission_materialize puts them; so
 *    the one-copy graph's timeline is the materialized graph's, swaps around it included.
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

/* The replay blocks of the fission groups: at[s] = the group whose first slice is step s (-1
 * elsewhere; at is NULL when g has no group), seconds[k] = (n-1) times the group's one-part
 * cost. */
typedef struct replay_blocks {
    sfg_groups f;
    int *root, *at;
    double *seconds;
} replay_blocks;

static void replay_blocks_free(replay_blocks *rb) {
    sfg_free(&rb->f);
    free(rb->root);
    free(rb->at);
    free(rb->seconds);
    memset(rb, 0, sizeof *rb);
}

static ir_status find_replay_blocks(const ir_graph *g, const int *order, prof_model *cost,
                                    replay_blocks *rb, ir_diag *d) {
    memset(rb, 0, sizeof *rb);
    if (!(rb->root = malloc(sizeof(int) * ((size_t)g->n_values + 1))))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory simulating the fission groups");
    sfg_roots(g, rb->root);
    ir_status st = sfg_find(&rb->f, g, order, rb->root, d);
    if (st != IR_OK || rb->f.n == 0) return st;
    int n = g->n_nodes, *pos = malloc(sizeof(int) * ((size_t)n + 1));
    rb->at = malloc(sizeof(int) * ((size_t)n + 1));
    rb->seconds = calloc((size_t)rb->f.n, sizeof(double));
    if (!pos || !rb->at || !rb->seconds) {
        free(pos);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory simulating the fission groups");
    }
    for (int s = 0; s < n; s++) {
        pos[order[s]] = s;
        rb->at[s] = -1;
    }
    for (int k = 0; k < rb->f.n; k++) {
        int first = -1; /* as sched_memory_compute: the group starts at its first slice */
        for (int j = rb->f.off[k]; j < rb->f.off[k + 1]; j++) {
            const ir_node *x = &g->nodes[rb->f.node[j]];
            rb->seconds[k] += prof_node_seconds(cost, g, x);
            if (first < 0 && x->op == IR_OP_FissionSlice) first = rb->f.node[j];
        }
        if (first < 0) first = rb->f.node[rb->f.off[k]];
        rb->seconds[k] *= rb->f.parts[k] - 1;
        rb->at[pos[first]] = k;
    }
    free(pos);
    return IR_OK;
}

ir_status sched_simulate(const ir_graph *g, const int *order, prof_model *cost, sched_sim *out,
                         ir_diag *d) {
    memset(out, 0, sizeof *out);
    replay_blocks rb = {0};
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

    if ((st = find_replay_blocks(g, order, cost, &rb, d)) != IR_OK) goto out;
    double compute_free = 0.0, copy_free = 0.0, last_compute_end = 0.0, latency = 0.0;
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        if (rb.at && rb.at[s] >= 0) { /* the other parts of group rb.at[s] */
            int k = rb.at[s];
            double t_ext = 0.0;
            for (int j = rb.f.off[k]; j < rb.f.off[k + 1]; j++) {
                const ir_node *x = &g->nodes[rb.f.node[j]];
                for (int i = 0; i < x->n_in; i++) {
                    int v = x->in[i], p = v >= 0 ? g->values[v].producer : -1;
                    if (v >= 0 && (p < 0 || rb.f.of[p] != k) && ready[v] > t_ext) t_ext = ready[v];
                }
            }
            double b0 = t_ext > compute_free ? t_ext : compute_free;
            compute_free = last_compute_end = b0 + rb.seconds[k];
        }
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
            end = start + prof_node_seconds(cost, g, nd);
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
    replay_blocks_free(&rb);
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
