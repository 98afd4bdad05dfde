/* prof.h - the cost model: how long an op takes on a device, and how long a host transfer takes.
 *
 * A cost model is opened from a device string:
 *   "analytic:<target>"  a roofline over the target's datasheet figures (rtx3090 = the default
 *                        device, a100, h100, h200); deterministic, what tests use;
 *   "cpu"                measured: times the executor's own kernels per distinct op signature
 *                        (median of several runs after warm-up), in a profiling phase before any
 *                        search (prof_profile_graph), never while search threads compete;
 *   "cuda"               measured with cuDNN/cuBLAS and small CUDA kernels (gpu/), where a GPU
 *                        is present; asking for it elsewhere is a clear error.
 * Measured costs live in a persistent profile database keyed by (op, attributes, input shapes and
 * dtypes, device), reused across runs. Lookups of a model are thread-safe after profiling.
 *
 * The roofline (prof-analytic.c), for a node with F FLOPs (ir_node_flops) moving B bytes
 * (ir_node_bytes: inputs + outputs + workspace) on a target with peak rate P (mm_f32 for Conv,
 * ConvTranspose, MatMul and Gemm, mm_f16 for their 16-bit forms, other_f32 otherwise), bandwidth
 * W and launch L:
 *     seconds = max(F / (P * eff), B / W) + L,   eff = F / (F + P * knee_s)
 * so an op reaches half the peak rate when it would take knee_s at full rate. Store and Load
 * (magpie-domain swap ops) cost prof_transfer_seconds; Constant, Shape and Size cost L.
 *
 * Measured back-ends implement prof_backend. The CPU one lives here (prof-cpu.c); the CUDA one
 * lives in gpu/ and is reached through prof_cuda_backend(), which gpu/gpu-registry.c defines
 * (the one file that tests the MAGPIE_HAVE_CUDA build flag). Dependencies point one way: gpu/
 * implements this interface and links magpie_profiler; the final executables (cli, tests,
 * benchmarks) link magpie_gpu, which supplies the definition. */
#ifndef MAGPIE_PROF_H
#define MAGPIE_PROF_H

#include "ir.h"
#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A named target's figures (DESIGN.md). Rates in FLOP/s, bandwidths in bytes/s. */
typedef struct prof_target {
    const char *name;
    const char *description;
    double mm_f32_flops;    /* FP32 matmul/conv (TF32 tensor rate, dense) */
    double mm_f16_flops;    /* 16-bit matmul/conv */
    double other_f32_flops; /* other FP32 work */
    double mem_bw;          /* device memory bandwidth */
    double host_link_bw;    /* host link, each way */
    double launch_s;        /* kernel launch overhead */
    double knee_s;          /* small-op ramp: an op that would take knee_s at peak runs at half
                             * the peak rate (see the roofline above) */
} prof_target;

/* The table of named targets; *n receives its length. */
const prof_target *prof_targets(int *n);
const prof_target *prof_target_find(const char *name); /* NULL if unknown */
/* "rtx3090, a100, h100, h200" into buf (for messages); returns buf. */
const char *prof_target_names(char *buf, size_t n);

/* The roofline estimate of one node on target t (the formula above). Deterministic. */
double prof_roofline_seconds(const prof_target *t, const ir_graph *g, const ir_node *n);

typedef struct prof_model prof_model;

/* Receives one-line warnings (a corrupt database moved aside, an unwritable location, a node
 * that could not be timed). */
typedef void (*prof_warn_fn)(void *ctx, const char *msg);

typedef struct prof_options {
    const char *db_path; /* NULL: $XDG_CACHE_HOME/magpie/profile.db (or ~/.cache/...) */
    bool no_db;          /* keep measurements in memory only (tests) */
    int runs;            /* timed runs per signature after warm-up (default 5) */
    int warmup;          /* untimed runs before timing (default 2) */
    prof_warn_fn warn;   /* NULL: "magpie: warning: ..." on stderr */
    void *warn_ctx;
    /* Non-NULL: polled between measurements; once non-zero (a SIGINT/SIGTERM handler sets it)
     * prof_profile_graph measures nothing more (the ops left keep the analytic estimate) and
     * prof_retime keeps the samples it has, so that an interrupted optimize stops promptly. */
    volatile sig_atomic_t *interrupt;
} prof_options;

/* Opens a cost model for device (see above). IR_ERR_INVALID for an unknown device string,
 * IR_ERR_UNSUPPORTED for "cuda" without a usable GPU; the message says which. st may be NULL. */
prof_model *prof_open(const char *device, const prof_options *o, ir_status *st, ir_diag *d);
void prof_close(prof_model *m); /* NULL-safe; saves new measurements to the database */
const char *prof_device(const prof_model *m);
bool prof_is_measured(const prof_model *m); /* cpu / cuda */

/* Measures every distinct op signature of g that the database does not hold yet (measured
 * back-ends; a no-op for analytic ones). Call before any search. A node the back-end cannot
 * time (no kernel, a failed launch) is warned about and keeps the analytic estimate; only
 * running out of memory is an error. */
ir_status prof_profile_graph(prof_model *m, const ir_graph *g, ir_diag *d);
/* Times again every distinct signature of gs[0..n) that the database holds (the ones measured
 * or reused by prof_profile_graph), in interleaved rounds, so that the costs a search compares
 * (the original's ops against the replacements' that PET and the substitutions propose) are
 * measured side by side, in the same moments, instead of once each at different moments of a
 * busy machine (or of earlier runs, kept by the database).
 *  - In-run (a back-end with time_graph: the CPU): the graphs are executed whole, one after
 *    another in each round, and every node's time inside the run is a sample of its signature
 *    (views, which run no kernel, are not); an entry becomes the median of its samples less the
 *    step overhead that every node gets added back. An op timed alone runs back to back on the
 *    same buffers, hot in L1/L2; inside a run its output is a block the allocator hands out
 *    afresh and its weights come from wherever the other ops pushed them, and that costs a
 *    MatMul 1.2 to 1.6 times, a small element-wise op 2 to 5 times, its time alone (on the
 *    encoder of bench_pet_measured.sh: a layout mutant's MatMul 112 us alone, 183 in the run,
 *    against the original's 150 and 192, so the mutant was predicted 4.6 % faster and ran even).
 *    Only the graphs that bring a signature the ones before them lack are run: gs[0] always,
 *    then the others from the last (the most rewritten) back, as long as the model's runs of
 *    them fit PROF_RETIME_BUDGET_S; rounds are as many as fit it (at least the model's runs, at
 *    most PROF_RETIME_MAX_ROUNDS).
 *  - Otherwise, and for signatures no graph run sampled (a graph that failed to run): each of
 *    the model's runs is one sample of every signature in turn, timed alone, and an entry
 *    becomes the median of its samples.
 * A no-op for analytic models; call after profiling, before the search. */
#define PROF_RETIME_BUDGET_S 3.0
#define PROF_RETIME_MAX_ROUNDS 31
ir_status prof_retime(prof_model *m, const ir_graph *const *gs, int n, ir_diag *d);
/* Seconds one node takes on the device (from the database or the analytic model; a measured
 * model that has not seen the signature falls back to its analytic estimate). */
double prof_node_seconds(prof_model *m, const ir_graph *g, const ir_node *n);
/* Seconds to move bytes over the host link, one way. */
double prof_transfer_seconds(const prof_model *m, size_t bytes);

/* The database key of a node's signature (op, attributes, input shapes and dtypes). */
uint64_t prof_signature(const ir_graph *g, const ir_node *n);

/* What a model has done so far (distinct signatures over all prof_profile_graph calls). */
typedef struct prof_stats {
    int measured;    /* signatures timed by this model */
    int reused;      /* signatures the database already held */
    int failed;      /* signatures the back-end could not time (analytic estimate kept) */
    int db_entries;  /* database entries of this device */
    bool calibrated; /* the fallback roofline comes from measurements, not defaults */
} prof_stats;
void prof_get_stats(const prof_model *m, prof_stats *s);
/* The database file, NULL for analytic models and no_db. */
const char *prof_db_path(const prof_model *m);
/* The physical device measured ("cpu: <model name>, 2 threads"); the device string for
 * analytic models. Database entries are keyed by a hash of this string. */
const char *prof_device_detail(const prof_model *m);
/* The figures estimates fall back to: the named target of an analytic model, or the roofline
 * calibrated for a measured one. */
const prof_target *prof_fallback_target(const prof_model *m);

/* ---------------------------------------------------------------- snapshots (checkpoints)
 *
 * Everything a model's estimates depend on, so that a resumed search costs every node exactly as
 * the interrupted one did, even if the profile database changed or another machine resumes: the
 * database entries of the model's device (all of them, calibration entries included), the
 * fallback figures and the per-step overhead. Analytic models have no entries. */
typedef struct prof_snapshot_entry {
    uint64_t sig; /* prof_signature, or a calibration tag */
    double seconds;
    uint32_t runs;
} prof_snapshot_entry;

typedef struct prof_snapshot {
    char device[64];  /* prof_device */
    char detail[320]; /* prof_device_detail */
    bool measured;
    /* the fallback target's figures (name and description are not kept: NULL) */
    prof_target fallback;
    double step_s;
    prof_snapshot_entry *entries; /* malloc'd, sorted by sig */
    size_t n_entries;
} prof_snapshot;

/* Takes m's snapshot. IR_ERR_NOMEM only. */
ir_status prof_snapshot_take(const prof_model *m, prof_snapshot *s, ir_diag *d);
/* Makes m estimate exactly as the model the snapshot was taken from: m must have been opened
 * for the same device string (IR_ERR_INVALID otherwise, naming both); the entries replace those
 * of m's device (kept in memory, never saved to the database file: they are not this run's
 * measurements), and the fallback figures and step overhead are the snapshot's. Call instead of
 * prof_profile_graph, before any search. The physical device may differ (a job resumed on
 * another node): the snapshot's detail string then wins, with the same warning as any. */
ir_status prof_snapshot_apply(prof_model *m, const prof_snapshot *s, ir_diag *d);
void prof_snapshot_free(prof_snapshot *s); /* NULL-safe, idempotent */

/* ---------------------------------------------------------------- measured back-ends */

/* A measured back-end (the CPU one in prof-cpu.c, the CUDA one in gpu/). Callbacks run only in
 * the profiling phase (prof_open, prof_profile_graph, prof_close), from one thread. */
#define MAGPIE_PROF_BACKEND_DEFINED 1
typedef struct prof_backend {
    const char *name; /* the device string: "cpu", "cuda" */
    /* Whether the back-end can run here; when not, one line of why into why. */
    bool (*available)(char *why, size_t n);
    /* Opens a context (device, streams, library handles) into *ctx. IR_ERR_UNSUPPORTED with a
     * message in d when the device cannot be used after all, IR_ERR_NOMEM when out of memory. */
    ir_status (*open)(void **ctx, ir_diag *d);
    void (*close)(void *ctx); /* NULL-safe */
    /* Names the physical device, e.g. "NVIDIA H200, sm_90": database entries are keyed by a
     * hash of "<name>: <this>", so two devices never share timings. */
    void (*describe)(void *ctx, char *buf, size_t n);
    /* Times node n of g: warm-up runs, then `runs` timed runs; *seconds receives the median.
     * Inputs without constant data get random values; constant inputs (Reshape's shape, a
     * Slice's starts) keep theirs. IR_ERR_UNSUPPORTED when the back-end cannot run the op (the
     * model keeps its analytic estimate); IR_ERR_NOMEM is the only failure that stops
     * profiling. */
    ir_status (*time_node)(void *ctx, const ir_graph *g, const ir_node *n, int warmup, int runs,
                           double *seconds, ir_diag *d);
    /* Optional. The fixed cost every node pays outside its kernel (the executor's per-step work
     * on the CPU, the launch on a GPU), added to every measured node. NULL: 0. */
    ir_status (*time_step_overhead)(void *ctx, int runs, double *seconds, ir_diag *d);
    /* Optional. Times one host-to-device copy of bytes (pinned memory), median of runs. NULL:
     * transfers use the fallback target's host link. */
    ir_status (*time_transfer)(void *ctx, size_t bytes, int runs, double *seconds, ir_diag *d);
    /* Optional. The named target whose roofline stands in before calibration (e.g. "h200" on
     * an H200). NULL or an unknown name: built-in CPU defaults. */
    const char *(*fallback_target)(void *ctx);
    /* Optional. Executes the whole of g once as its executor runs it (graph order, inputs
     * without data seeded), each node's time inside that run into node_seconds[node index] (its
     * whole step, the executor's per-step work included), and the run's wall time into
     * *run_seconds. prof_retime times ops so where it can. NULL: ops are only timed alone. */
    ir_status (*time_graph)(void *ctx, const ir_graph *g, double *node_seconds, double *run_seconds,
                            ir_diag *d);
} prof_backend;

/* The CUDA back-end, or NULL when magpie was built without CUDA. Defined by gpu/gpu-registry.c,
 * which every executable links through magpie_gpu. */
const prof_backend *prof_cuda_backend(void);
/* The CPU back-end (prof-cpu.c). */
const prof_backend *prof_cpu_backend(void);
/* Sorts v[0..n) (n >= 1) and returns its median: the mean of the middle two for even n. */
double prof_median(double *v, int n);

#ifdef __cplusplus
}
#endif
#endif
