/* rt.h - the CPU executor: runs a graph in a given order with the op table's CPU kernels,
 * taking every byte of memory from a counting allocator, and reports the measured peak.
 *
 * Memory accounting (DESIGN.md "Memory is accounted per schedule step"):
 *  - resident for the whole run: graph inputs, and constants (weights, folded buffers) that a
 *    node or a graph output reads (a constant nobody reads is not on the device);
 *  - at step s the node's outputs and its workspace are allocated; the peak is sampled; then the
 *    workspace is freed, and every input whose last use is step s is freed (never graph
 *    outputs, inputs or constants); an output nobody reads is freed at its own step;
 *  - an in-place output (IR_OPF_INPLACE, ir_value_inplace_of) allocates nothing: it takes over
 *    its input's buffer, which is freed after the last use of the last value of that chain (never
 *    when one of them is a graph output, or when the chain starts at a resident);
 *  - a view (ir_value_view_of: Reshape, Flatten, Squeeze, Unsqueeze, and a Transpose read only
 *    as a MatMul/Gemm operand) allocates nothing and runs no kernel: its output is its base's
 *    buffer, which is freed after the last use of any view of it, under the same rule (both are
 *    ir_graph_buffer_roots); MatMul and Gemm read a transposed operand through BLAS's trans flags
 *    (ir_kernel_ctx.in_transposed);
 *  - the part of a fused FissionAccumulate (ir_graph_fused_parts, in the run's order) allocates
 *    nothing: its producer's kernel writes it into the accumulate's buffer, adding to the parts
 *    before it (ir_kernel_ctx.accumulate, BLAS's beta = 1), and the accumulate runs no kernel;
 *  - bytes are counted exactly as ir_value_bytes, never rounded;
 *  - outputs of IR_OPF_HOST_OUTPUT ops (Store) live in host memory: they come from a separate
 *    host pool, follow the same allocate/free rules, and count as host bytes (peak_host_bytes),
 *    never as device bytes.
 * The executor measures this itself; it does not reuse sched/'s computation, so that tests can
 * compare the two.
 *
 * Kernels' OpenMP loops follow OMP_NUM_THREADS; OpenBLAS keeps its own default thread count
 * (GEMM kernels call it outside OpenMP regions, so the two never nest). */
#ifndef MAGPIE_RT_H
#define MAGPIE_RT_H

#include "ir.h"

typedef struct rt_binding {
    int value;        /* value id of a graph input, or of a constant to override */
    ir_dtype dtype;   /* must equal the value's dtype */
    ir_shape shape;   /* must equal the value's shape */
    const void *data; /* borrowed for the duration of rt_run */
} rt_binding;

typedef struct rt_options {
    const int *order; /* node indices, a topological order; NULL = graph order */
    int n_order;
    uint64_t seed;          /* weights without values and random ops (Dropout) */
    bool fill_missing_data; /* unbound data inputs get seeded random values instead of an error */
    bool poison_freed;      /* overwrite freed buffers with 0xFF (always on in debug builds) */
    /* NULL, or g->n_nodes entries: each node's time inside this run (node index, not step),
     * its whole step from allocating its outputs to freeing its dead inputs, on the clock of
     * rt_result.cpu_seconds with one kernel thread (the thread's CPU time), else wall time. This
     * is what a node costs where the executor runs it: its output a block the allocator hands
     * out afresh, its inputs as the previous steps left them in the cache, its weights wherever
     * the rest of the graph pushed them (the cpu cost model measures ops so, prof-cpu.c).
     * Reading the clock costs a few hundred nanoseconds per step. */
    double *node_seconds;
} rt_options;

typedef struct rt_result {
    int n_outputs;
    ir_tensor *outputs;     /* one per graph output, malloc'd data; freed by rt_result_free */
    size_t peak_bytes;      /* measured device peak, bytes */
    size_t resident_bytes;  /* constants + graph inputs */
    size_t peak_host_bytes; /* measured peak of the host pool (Store outputs), bytes */
    int n_steps;
    size_t *step_bytes;  /* live bytes at each step's peak moment (n_steps entries) */
    double wall_seconds; /* kernel execution only, excluding input conversion and output copy */
    /* the calling thread's CPU time over the same steps: with one kernel thread (OpenMP and
     * OpenBLAS on 1), the latency on an otherwise idle core, which a busy machine's waits for a
     * core do not inflate; with more threads it misses the others' work */
    double cpu_seconds;
} rt_result;

/* Runs g (o may be NULL: graph order, seed 0). Unbound data inputs (IR_VF_DATA; when no graph
 * input carries the flag, the first graph input) are an error ("missing data input 'x'") unless
 * fill_missing_data; every other unbound graph input is a weight without values and is filled as
 * DESIGN.md defines (rt_fill_seeded). Errors: IR_ERR_INVALID for an order that is not a
 * topological permutation or a binding of a computed value; IR_ERR_SHAPE naming the input, its
 * expected and given dtype and shape, for a mismatched binding; IR_ERR_UNSUPPORTED for a node
 * without a CPU kernel; a kernel's own status and message (e.g. an index out of range in user
 * data). Messages are prefixed with g->source when it is set. On failure *r is zeroed. */
ir_status rt_run(const ir_graph *g, const rt_binding *inputs, int n_inputs, const rt_options *o,
                 rt_result *r, ir_diag *d);
void rt_result_free(rt_result *r); /* NULL-safe, idempotent */
/* The threads a kernel may use (OpenMP's maximum; 1 without OpenMP). */
int rt_kernel_threads(void);

/* Deterministic values for a weight without values: uniform in +-1/sqrt(fan_in) (fan_in = the
 * product of all dims but the first, 1 for rank <= 1), or uniform in [0.5, 1.5] for names ending
 * in "running_var"; drawn from (seed, name, index) so graphs sharing names share weights (a
 * float64 weight gets the float32 value, so a graph's ir_graph_to_f64 copy shares them too). Also
 * used for random data inputs (uniform in [-1, 1)) with fan_in forced to 1. */
void rt_fill_seeded(const ir_value *v, uint64_t seed, void *data);

#endif
