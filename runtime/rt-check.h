/* rt-check.h - is a rewritten graph's float32 result right? One criterion, shared by `magpie
 * verify` and the tests, that judges each output against a float64 run of the original graph
 * rather than against the original's float32 run: two float32 runs that sum in different orders
 * differ by rounding, and on an output that is zero but for rounding (the gradient of a bias
 * that feeds a batch norm, of a key's bias in attention) a relative error of one against the
 * other compares noise with noise.
 *
 * Per output, with opt (the rewritten graph in float32), orig32 (the original in float32) and
 * ref64 (the original in float64, same inputs), all norms L2 and in double:
 *
 *     pass  <=>  ||opt - ref64|| <= max(rtol * s, k * ||orig32 - ref64||)
 *
 * where s = max(||ref64||, 1e-6 * the largest ||ref64|| among outputs of the same kind). Said
 * plainly: the plan is as accurate as the original's own float32 execution (within a factor k),
 * or within rtol of the exact result. The floor judges an output that is zero but for rounding
 * on the scale of its neighbours. Kinds (rt_output_kind, by ir_build_training's names): forward
 * outputs, gradients ("<p>.grad"), updated parameters ("<p>.new") and optimizer state
 * ("<p>.momentum_buffer.new", "<p>.exp_avg.new", "<p>.exp_avg_sq.new"), each its own scale.
 *
 * Integer and boolean outputs must equal the original's float32 run exactly. A missing output,
 * a dtype or shape mismatch, or a non-finite ||opt - ref64|| fails. */
#ifndef MAGPIE_RT_CHECK_H
#define MAGPIE_RT_CHECK_H

#include "rt.h"

#define RT_CHECK_RTOL 1e-4
#define RT_CHECK_K 10.0
#define RT_CHECK_FLOOR 1e-6 /* of the largest reference norm of the same kind */

typedef enum rt_output_kind {
    RT_OUT_FORWARD = 0,
    RT_OUT_GRADIENT,
    RT_OUT_PARAMETER, /* an updated parameter */
    RT_OUT_STATE,     /* updated optimizer state */
    RT_OUT_KINDS
} rt_output_kind;

rt_output_kind rt_output_kind_of(const char *name);
const char *rt_output_kind_name(rt_output_kind k); /* "forward", "gradient", ... */

typedef struct rt_check_opts {
    double rtol; /* <= 0: RT_CHECK_RTOL */
    double k;    /* < 0: RT_CHECK_K (0 is allowed: then only rtol counts) */
} rt_check_opts;

/* One output's verdict; the errors are INFINITY on a mismatch the norms cannot measure. */
typedef struct rt_out_check {
    rt_output_kind kind;
    bool exact;      /* an integer or boolean output: compared bit for bit with orig32 */
    double err_opt;  /* ||opt - ref64|| */
    double err_orig; /* ||orig32 - ref64|| */
    double ref_norm; /* ||ref64|| */
    double scale;    /* s: ref_norm floored */
    double bound;    /* max(rtol * s, k * err_orig) */
    bool pass;
    const char *why; /* for a failure that is not the bound: "missing", "dtype", "shape", ... */
} rt_out_check;

/* Judges n outputs: opt[i] (NULL where the rewritten graph lacks the output), orig32[i] and
 * ref64[i] are output i's three tensors, names[i] its name (for its kind). res[i] gets each
 * verdict; returns whether all pass. o may be NULL (defaults). */
bool rt_check_outputs(int n, const char *const *names, const ir_tensor *const *opt,
                      const ir_tensor *orig32, const ir_tensor *ref64, const rt_check_opts *o,
                      rt_out_check *res);

/* The original's two reference runs: g in float32 (with o, as rt_run) and its float64 copy
 * (ir_graph_to_f64) on the same inputs: the bindings widened, unbound inputs drawn by rt_run,
 * which gives a float64 input the float32 values (rt_fill_seeded), so the two runs differ only in
 * their arithmetic. r64's outputs are float64 where g's are float. The float64 run comes first
 * and its graph copy is freed before the float32 run, so that the two runs' buffers and the
 * copy's weights (twice the original's bytes) never live at once. On failure both results are
 * zeroed and d names the failing run. */
ir_status rt_run_reference(const ir_graph *g, const rt_binding *in, int n_in, const rt_options *o,
                           rt_result *r32, rt_result *r64, ir_diag *d);

#endif
