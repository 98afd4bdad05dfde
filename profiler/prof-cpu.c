/* prof-cpu.c - the `cpu` back-end: times the executor's own kernels (the op table's CPU kernels)
 * one node at a time, with the threads the executor would use (this process's OpenMP and
 * OpenBLAS settings), in the profiling phase only.
 *
 * A node is timed by calling its kernel directly on buffers allocated once per signature: its
 * constant inputs keep their data (Reshape's shape, a Slice's starts, weights), every other input
 * gets seeded random values (rt_fill_seeded: integers are 0, a valid index everywhere). Warm-up
 * calls come first; then each of `runs` samples times enough back-to-back calls to last about
 * SAMPLE_S, so that a 1 us kernel is not lost in clock granularity, and the median sample wins.
 * What a call to rt_run adds around each kernel (allocating the outputs, freeing the dead
 * values) is measured once as the step overhead, on a chain of tiny Identity nodes run through
 * rt_run itself, and added to every node by the model.
 *
 * Timed alone, back to back, an op runs hot in L1/L2; inside the executor's run it does not
 * (prof.h, prof_retime). So the back-end also executes whole graphs with per-node times
 * (cpu_time_graph, rt_options.node_seconds), which prof_retime takes as the costs of the ops the
 * search compares.
 *
 * The clock. With one kernel thread (OMP_NUM_THREADS=1, what benchmarks on a shared machine use)
 * the samples are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which is the kernel's
 * latency on an otherwise idle core and does not grow while the thread waits for a core: on a
 * busy machine (two cores, four compilers) wall-clock samples of one 9 MiB Transpose measured
 * 6.5 ms at one moment and 22 ms at another, and the database kept whichever came first, so a
 * plan that removed such ops was predicted at 0.20 of ConvNeXt-T's latency while it ran at 0.40
 * (docs/BENCHMARKS.md, "PET, predicted and measured"). The detail string (the database key) says
 * which clock measured. With several threads the kernel's latency is the wall time, and so is
 * the clock. */
#include "prof-impl.h"
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define SAMPLE_S 5e-4       /* target length of one timed sample */
#define MAX_REPS 10000      /* calls per sample, at most */
#define OVERHEAD_CHAIN 64   /* Identity nodes in the step-overhead graph */
#define CPU_SEED 0x70726f66 /* "prof": values of non-constant inputs */

typedef struct cpu_ctx {
    char desc[256];
} cpu_ctx;

double prof_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, ir_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* 64-byte aligned, never NULL for 0 bytes (kernels may take the address). */
static void *alloc64(size_t bytes) {
    size_t padded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, padded ? padded : 64);
}

static int threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The sampling clock (the header comment): the thread's CPU time with one kernel thread. */
static double sample_now(void) {
    if (threads() > 1) return ir_now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "model name : Intel(R) Xeon(R) ..." from /proc/cpuinfo, or the empty string. */
static void cpu_model(char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *p = strchr(line, ':');
        if (!p) continue;
        for (p++; *p == ' ' || *p == '\t'; p++) {
        }
        snprintf(buf, n, "%s", p);
        buf[strcspn(buf, "\r\n")] = 0;
        break;
    }
    fclose(f);
}

static bool cpu_available(char *why, size_t n) {
    (void)why;
    (void)n;
    return true;
}

static ir_status cpu_open(void **ctx, ir_diag *d) {
    cpu_ctx *c = calloc(1, sizeof *c);
    *ctx = c;
    if (!c) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    char model[200];
    cpu_model(model, sizeof model);
    int t = threads();
    snprintf(c->desc, sizeof c->desc, "%s, %d thread%s", model[0] ? model : "unknown CPU", t,
             t == 1 ? ", thread CPU time" : "s");
    return IR_OK;
}

static void cpu_close(void *ctx) {
    free(ctx);
}

static void cpu_describe(void *ctx, char *buf, size_t n) {
    snprintf(buf, n, "%s", ((cpu_ctx *)ctx)->desc);
}

typedef struct node_bufs {
    ir_tensor *in, *out;
    void **owned; /* buffers to free */
    int n_owned;
    void *ws;
    size_t ws_bytes;
} node_bufs;

static void bufs_free(node_bufs *b) {
    for (int i = 0; i < b->n_owned; i++) free(b->owned[i]);
    free(b->owned);
    free(b->in);
    free(b->out);
    free(b->ws);
}

/* Whether output k of n takes over input k's buffer in the executor (rt-exec.c, IR_OPF_INPLACE
 * and ir_value_inplace_of): the kernel then writes only what changes (a PetPatch its box), and
 * timing it on separate buffers would time a copy of the whole tensor the executor never makes. */
static bool in_place(const ir_graph *g, const ir_node *n, int k) {
    return k < n->n_out && k < n->n_in && n->out[k] >= 0 &&
           ir_value_inplace_of(g, n->out[k]) == n->in[k];
}

static ir_status bufs_alloc(const ir_graph *g, const ir_node *n, node_bufs *b, ir_diag *d) {
    memset(b, 0, sizeof *b);
    b->in = calloc((size_t)n->n_in + 1, sizeof *b->in);
    b->out = calloc((size_t)n->n_out + 1, sizeof *b->out);
    b->owned = calloc((size_t)(n->n_in + n->n_out) + 1, sizeof *b->owned);
    if (!b->in || !b->out || !b->owned) goto nomem;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        b->in[i] = (ir_tensor){.dtype = IR_DTYPE_NONE};
        if (!v) continue;
        b->in[i].dtype = v->dtype;
        b->in[i].shape = v->shape;
        size_t bytes = ir_value_bytes(v);
        bool has_blob = v->blob && ir_blob_bytes(v->blob) >= bytes;
        /* an in-place output writes into this buffer: never into the graph's constant */
        if (has_blob && !in_place(g, n, i)) {
            b->in[i].data = ir_blob_data(v->blob);
            continue;
        }
        void *p = alloc64(bytes);
        if (!p) goto nomem;
        b->owned[b->n_owned++] = p;
        if (has_blob)
            memcpy(p, ir_blob_data(v->blob), bytes);
        else
            rt_fill_seeded(v, CPU_SEED, p);
        b->in[i].data = p;
    }
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *v = ir_node_out(g, n, i);
        b->out[i] = (ir_tensor){.dtype = IR_DTYPE_NONE};
        if (!v) continue;
        if (in_place(g, n, i) && b->in[i].data) {
            b->out[i] = (ir_tensor){.dtype = v->dtype, .shape = v->shape, .data = b->in[i].data};
            continue;
        }
        void *p = alloc64(ir_value_bytes(v));
        if (!p) goto nomem;
        b->owned[b->n_owned++] = p;
        b->out[i] = (ir_tensor){.dtype = v->dtype, .shape = v->shape, .data = p};
    }
    b->ws_bytes = ir_node_workspace(g, n);
    if (b->ws_bytes && !(b->ws = alloc64(b->ws_bytes))) goto nomem;
    return IR_OK;
nomem:
    bufs_free(b);
    memset(b, 0, sizeof *b);
    return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory for the buffers of a timing run");
}

static ir_status cpu_time_node(void *ctx, const ir_graph *g, const ir_node *n, int warmup, int runs,
                               double *seconds, ir_diag *d) {
    (void)ctx;
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->kernel)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "no CPU kernel to time");
    node_bufs b;
    ir_status st = bufs_alloc(g, n, &b, d);
    if (st != IR_OK) return st;
    /* a fused accumulate: where the order allows (ir_graph_fused_parts) the executor's producer
     * has already added the part into the buffer, and the kernel finds it there and does nothing;
     * timed so, not as the Add it no longer runs */
    if (ir_fission_accumulate_fused(g, n) && b.out[0].data && b.out[0].data == b.in[0].data)
        b.in[1].data = b.out[0].data;
    double *samples = malloc(sizeof *samples * (size_t)(runs > 0 ? runs : 1));
    if (!samples) {
        bufs_free(&b);
        return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory");
    }
    ir_diag kd = {{0}};
    ir_kernel_ctx k = {.graph = g,
                       .node = n,
                       .n_in = n->n_in,
                       .n_out = n->n_out,
                       .in = b.in,
                       .out = b.out,
                       .workspace = b.ws,
                       .workspace_bytes = b.ws_bytes,
                       .seed = CPU_SEED,
                       .diag = &kd};
    /* Warm-up: page in the buffers, start the thread pools, fill the caches. The last call is
     * timed to size the samples. */
    double one = 0;
    for (int w = 0; w < (warmup > 0 ? warmup : 1); w++) {
        double t0 = sample_now();
        st = ir_node_run(&k);
        one = sample_now() - t0;
        if (st != IR_OK) goto fail;
    }
    int reps = one >= SAMPLE_S ? 1 : (int)(SAMPLE_S / (one > 1e-8 ? one : 1e-8));
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;
    for (int r = 0; r < runs; r++) {
        double t0 = sample_now();
        for (int i = 0; i < reps && st == IR_OK; i++) st = ir_node_run(&k);
        samples[r] = (sample_now() - t0) / reps;
        if (st != IR_OK) goto fail;
    }
    *seconds = prof_median(samples, runs);
    free(samples);
    bufs_free(&b);
    return IR_OK;
fail:
    free(samples);
    bufs_free(&b);
    if (kd.msg[0] && !strstr(kd.msg, n->name))
        return ir_node_fail(d, st, n, "kernel failed while timing: %.900s", kd.msg);
    if (kd.msg[0]) return ir_diag_set(d, st, "%s", kd.msg);
    return ir_node_fail(d, st, n, "kernel failed while timing: %s", ir_status_to_string(st));
}

/* rt_run over x -> Identity -> ... -> Identity (OVERHEAD_CHAIN nodes, one float each): what the
 * executor spends per step besides the kernel. */
static ir_status cpu_step_overhead(void *ctx, int runs, double *seconds, ir_diag *d) {
    (void)ctx;
    ir_status st = IR_OK;
    double *samples = malloc(sizeof *samples * (size_t)(runs > 0 ? runs : 1));
    ir_graph *g = ir_graph_new();
    if (!samples || !g) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    ir_shape one = {.rank = 1, .dims = {1}};
    int prev = ir_graph_add_value(g, "x", IR_F32, &one);
    if (prev < 0) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    g->values[prev].flags |= IR_VF_INPUT | IR_VF_DATA;
    ir_graph_add_input(g, prev);
    for (int i = 0; i < OVERHEAD_CHAIN; i++) {
        char name[32];
        snprintf(name, sizeof name, "y%d", i);
        int v = ir_graph_add_value(g, name, IR_F32, &one);
        if (v < 0 || ir_graph_add_node(g, IR_OP_Identity, name, 1, &prev, 1, &v, 0, NULL) < 0) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
            goto out;
        }
        prev = v;
    }
    ir_graph_add_output(g, prev);
    rt_options o = {.fill_missing_data = true};
    for (int r = -2; r < runs; r++) { /* two warm-up runs */
        rt_result res;
        if ((st = rt_run(g, NULL, 0, &o, &res, d)) != IR_OK) goto out;
        if (r >= 0)
            samples[r] = (threads() > 1 ? res.wall_seconds : res.cpu_seconds) / OVERHEAD_CHAIN;
        rt_result_free(&res);
    }
    *seconds = prof_median(samples, runs);
out:
    ir_graph_free(g);
    free(samples);
    return st;
}

/* One execution of g by the executor with per-node times (rt_options.node_seconds), on the
 * sampling clock: the thread's CPU time with one kernel thread. */
static ir_status cpu_time_graph(void *ctx, const ir_graph *g, double *node_seconds,
                                double *run_seconds, ir_diag *d) {
    (void)ctx;
    rt_options o = {.fill_missing_data = true, .seed = CPU_SEED, .node_seconds = node_seconds};
    rt_result res;
    double t0 = ir_now_seconds();
    ir_status st = rt_run(g, NULL, 0, &o, &res, d);
    *run_seconds = ir_now_seconds() - t0;
    if (st == IR_OK) rt_result_free(&res);
    return st;
}

/* A "transfer" on the CPU is a copy between two buffers of the executor (Store and Load's CPU
 * kernels are memcpy). */
static ir_status cpu_time_transfer(void *ctx, size_t bytes, int runs, double *seconds, ir_diag *d) {
    (void)ctx;
    unsigned char *a = alloc64(bytes), *b = alloc64(bytes);
    double *samples = malloc(sizeof *samples * (size_t)(runs > 0 ? runs : 1));
    ir_status st = IR_OK;
    if (!a || !b || !samples) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for a %zu-byte copy", bytes);
        goto out;
    }
    memset(a, 1, bytes);
    memset(b, 0, bytes);
    for (int r = -2; r < runs; r++) {
        double t0 = sample_now();
        memcpy(b, a, bytes);
        double t = sample_now() - t0;
        a[r & 63] ^= b[(r + 1) & 63]; /* keeps the copy observable */
        if (r >= 0) samples[r] = t;
    }
    *seconds = prof_median(samples, runs);
out:
    free(a);
    free(b);
    free(samples);
    return st;
}

static const prof_backend cpu_backend = {
    .name = "cpu",
    .available = cpu_available,
    .open = cpu_open,
    .close = cpu_close,
    .describe = cpu_describe,
    .time_node = cpu_time_node,
    .time_step_overhead = cpu_step_overhead,
    .time_transfer = cpu_time_transfer,
    .fallback_target = NULL,
    .time_graph = cpu_time_graph,
};

const prof_backend *prof_cpu_backend(void) {
    return &cpu_backend;
}
