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
 * dtypes, device), reused across runs. Lookups of a model are thread-safe after profiling. */
#ifndef MAGPIE_PROF_H
#define MAGPIE_PROF_H

#include "ir.h"

/* A named target's figures (DESIGN.md). Rates in FLOP/s, bandwidths in bytes/s. */
typedef struct prof_target {
    const char *name;
    const char *description;
    double mm_f32_flops;   /* FP32 matmul/conv (TF32 tensor rate, dense) */
    double mm_f16_flops;   /* 16-bit matmul/conv */
    double other_f32_flops;/* other FP32 work */
    double mem_bw;         /* device memory bandwidth */
    double host_link_bw;   /* host link, each way */
    double launch_s;       /* kernel launch overhead */
} prof_target;

/* The table of named targets; *n receives its length. */
const prof_target *prof_targets(int *n);
const prof_target *prof_target_find(const char *name); /* NULL if unknown */

typedef struct prof_model prof_model;

typedef struct prof_options {
    const char *db_path; /* NULL: $XDG_CACHE_HOME/magpie/profile.db (or ~/.cache/...) */
    bool no_db;          /* keep measurements in memory only (tests) */
    int runs;            /* timed runs per signature after warm-up (default 5) */
} prof_options;

/* Opens a cost model for device (see above). IR_ERR_INVALID for an unknown device string,
 * IR_ERR_UNSUPPORTED for "cuda" without a usable GPU; the message says which. */
prof_model *prof_open(const char *device, const prof_options *o, ir_status *st, ir_diag *d);
void prof_close(prof_model *m); /* NULL-safe; saves new measurements to the database */
const char *prof_device(const prof_model *m);
bool prof_is_measured(const prof_model *m); /* cpu / cuda */

/* Measures every distinct op signature of g that the database does not hold yet (measured
 * back-ends; a no-op for analytic ones). Call before any search. */
ir_status prof_profile_graph(prof_model *m, const ir_graph *g, ir_diag *d);
/* Seconds one node takes on the device (from the database or the analytic model; a measured
 * model that has not seen the signature falls back to its analytic estimate). */
double prof_node_seconds(prof_model *m, const ir_graph *g, const ir_node *n);
/* Seconds to move bytes over the host link, one way. */
double prof_transfer_seconds(const prof_model *m, size_t bytes);

/* The database key of a node's signature (op, attributes, input shapes and dtypes). */
uint64_t prof_signature(const ir_graph *g, const ir_node *n);

#endif
