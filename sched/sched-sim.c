/* sched-sim.c - the simulator (MAGIS 6.2, "performance evaluation"): latency and memory of an
 * order under a cost model, without running anything.
 *
 * Timing model: two streams.
 *  - The compute stream runs every op but Store and Load one after another, each for
 *    sched_node_seconds (a view runs no kernel: 0). A fission group (schedule.h) stands for its n
 * parts: the n-1 others run one after another right before the group's first slice, each its nodes
 * in the group's order on both streams (its swaps overlapping its compute), exactly where
 * rw_fission_materialize puts them; so the one-copy graph's timeline is the materialized graph's,
 * swaps inside and around the group included.
 *  - Two copy streams, one per direction of the host link: Stores (device to host) one after
 *    another on one, Loads (host to device) on the other, each for prof_transfer_seconds of the
 *    tensor it moves, overlapping compute and each other. The target's host_link_bw is each way
 *    (prof.h): PCIe is full duplex, and a GPU with two copy engines (asyncEngineCount 2, as
 *    GeForce Ampere cards such as the RTX 3090 report) copies both ways at once; the emitted
 *    PyTorch step issues each direction on its own stream. One stream for both directions
 *    made a Load queue behind Stores it does not read (the forward's, still in flight when the
 *    backward starts reading back).
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

/* The fission groups' replays: at[s] = the group whose first slice is step s (-1 elsewhere; at
 * is NULL when g has no group). */
typedef struct replay_blocks {
    sfg_groups f;
    int *root, *at;
    double *saved; /* per value: its ready time while a replay overwrites it */
} replay_blocks;

static void replay_blocks_free(replay_blocks *rb) {
    sfg_free(&rb->f);
    free(rb->root);
    free(rb->at);
    free(rb->saved);
    memset(rb, 0, sizeof *rb);
}

/* rb->root and rb->f are sched_memory_compute_keep's. */
static ir_status find_replay_blocks(const ir_graph *g, const int *order, replay_blocks *rb,
                                    ir_diag *d) {
    if (rb->f.n == 0) return IR_OK;
    int n = g->n_nodes, *pos = malloc(sizeof(int) * ((size_t)n + 1));
    rb->at = malloc(sizeof(int) * ((size_t)n + 1));
    rb->saved = malloc(sizeof(double) * ((size_t)g->n_values + 1));
    if (!pos || !rb->at || !rb->saved) {
        free(pos);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory simulating the fission groups");
    }
    for (int s = 0; s < n; s++) {
        pos[order[s]] = s;
        rb->at[s] = -1;
    }
    for (int k = 0; k < rb->f.n; k++) {
        int first = -1; /* as sched_memory_compute: the group starts at its first slice */
        for (int j = rb->f.off[k]; j < rb->f.off[k + 1]; j++)
            if (first < 0 && g->nodes[rb->f.node[j]].op == IR_OP_FissionSlice)
                first = rb->f.node[j];
        if (first < 0) first = rb->f.node[rb->f.off[k]];
        rb->at[pos[first]] = k;
    }
    free(pos);
    return IR_OK;
}

/* The streams' clocks: compute, and the copy stream of each direction. */
typedef struct streams {
    double compute_free, store_free, load_free, last_compute_end;
} streams;

/* The seconds each node of g takes on its stream, by node index: sec[i] as any part runs it,
 * sec0[i] as part 0 runs it (a FissionAccumulate's part 0 copies instead of adding:
 * sfg_part_seconds). A group's node runs once per part, and is costed once. */
static void node_seconds(const ir_graph *g, const int *root, prof_model *cost, double *sec,
                         double *sec0) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        /* a fused accumulate whose part this order leaves a buffer of its own (root, from
         * sched_memory_compute_keep) is the kernel the executor runs: sfg_part_seconds */
        sec[i] = on_copy_stream(nd) ? prof_transfer_seconds(cost, swap_bytes(g, nd))
                 : nd->op == IR_OP_FissionAccumulate ? sfg_part_seconds(cost, g, root, nd, false)
                                                     : sched_node_seconds(cost, g, root, nd);
        sec0[i] =
            nd->op == IR_OP_FissionAccumulate ? sfg_part_seconds(cost, g, root, nd, true) : sec[i];
    }
}

/* Runs node nd (of seconds sec) on its stream once its inputs are ready (ready[], by value) and
 * returns when it ends; the caller records the outputs' ready times. */
static double run_node(const ir_node *nd, double sec, const double *ready, streams *t,
                       double *start_out) {
    double at = 0.0, start, end;
    for (int i = 0; i < nd->n_in; i++)
        if (nd->in[i] >= 0 && ready[nd->in[i]] > at) at = ready[nd->in[i]];
    if (on_copy_stream(nd)) {
        double *copy_free = nd->op == IR_OP_Store ? &t->store_free : &t->load_free;
        start = at > *copy_free ? at : *copy_free;
        if (t->last_compute_end > start) start = t->last_compute_end;
        end = start + sec;
        *copy_free = end;
    } else {
        start = at > t->compute_free ? at : t->compute_free;
        end = start + sec;
        t->compute_free = t->last_compute_end = end;
    }
    if (start_out) *start_out = start;
    return end;
}

/* The n-1 other parts of group k, one after another, each its nodes in the group's order on the
 * same two streams, as rw_fission_materialize lays them out (the first is part 0, whose
 * FissionAccumulates copy: sfg_part_seconds): a part's swaps overlap its compute
 * as the scheduled copy's do. Values the group produces get part-local ready times in ready[]
 * and their own back afterwards (a generator of the scheduled copy may have run already); what
 * the group reads from outside is ready as the simulation so far says. */
static void replay_parts(const ir_graph *g, const replay_blocks *rb, int k, const double *sec,
                         const double *sec0, double *ready, streams *t) {
    const int *nodes = rb->f.node + rb->f.off[k];
    int cnt = rb->f.off[k + 1] - rb->f.off[k];
    for (int i = 0; i < cnt; i++) {
        const ir_node *x = &g->nodes[nodes[i]];
        for (int o = 0; o < x->n_out; o++)
            if (x->out[o] >= 0) rb->saved[x->out[o]] = ready[x->out[o]];
    }
    for (int part = 1; part < rb->f.parts[k]; part++)
        for (int i = 0; i < cnt; i++) {
            const ir_node *x = &g->nodes[nodes[i]];
            double end = run_node(x, part == 1 ? sec0[nodes[i]] : sec[nodes[i]], ready, t, NULL);
            for (int o = 0; o < x->n_out; o++)
                if (x->out[o] >= 0) ready[x->out[o]] = end;
        }
    for (int i = 0; i < cnt; i++) {
        const ir_node *x = &g->nodes[nodes[i]];
        for (int o = 0; o < x->n_out; o++)
            if (x->out[o] >= 0) ready[x->out[o]] = rb->saved[x->out[o]];
    }
}

ir_status sched_simulate(const ir_graph *g, const int *order, prof_model *cost, sched_sim *out,
                         ir_diag *d) {
    memset(out, 0, sizeof *out);
    replay_blocks rb = {0};
    sched_memory m;
    ir_status st = sched_memory_compute_keep(g, order, &m, &rb.root, &rb.f, d);
    if (st != IR_OK) return st;
    int n = g->n_nodes;
    size_t ns = (size_t)(n ? n : 1);
    int *own = NULL;
    double *ready = malloc(sizeof(double) * (size_t)(g->n_values ? g->n_values : 1));
    double *sec = malloc(sizeof(double) * ns * 2), *sec0 = sec ? sec + ns : NULL;
    long long *delta = malloc(sizeof(long long) * (ns + 1));
    out->start_s = malloc(sizeof(double) * ns);
    out->end_s = malloc(sizeof(double) * ns);
    out->device_bytes = malloc(sizeof(size_t) * ns);
    out->host_bytes = malloc(sizeof(size_t) * ns);
    if (!order) order = own = sched_eager_order(g);
    if (!ready || !sec || !delta || !order || !out->start_s || !out->end_s || !out->device_bytes ||
        !out->host_bytes) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory simulating %d steps", n);
        goto out;
    }
    out->n_steps = n;
    for (int v = 0; v < g->n_values; v++) ready[v] = 0.0;

    if ((st = find_replay_blocks(g, order, &rb, d)) != IR_OK) goto out;
    node_seconds(g, rb.root, cost, sec, sec0);
    streams t = {0};
    double latency = 0.0;
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        if (rb.at && rb.at[s] >= 0) replay_parts(g, &rb, rb.at[s], sec, sec0, ready, &t);
        double start, end = run_node(nd, sec[order[s]], ready, &t, &start);
        for (int i = 0; i < nd->n_out; i++)
            if (nd->out[i] >= 0) ready[nd->out[i]] = end;
        out->start_s[s] = start;
        out->end_s[s] = end;
        if (end > latency) latency = end;
        /* a replayed part's copy may end after every op of the scheduled copy */
        if (t.store_free > latency) latency = t.store_free;
        if (t.load_free > latency) latency = t.load_free;
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
    free(sec);
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
