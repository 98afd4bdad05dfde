/* prof-analytic.c - the roofline cost of one node on a named target (prof.h gives the formula;
 * prof-targets.c the figures). Deterministic: it depends only on the node's counts and the
 * target, so tests and the default device agree across machines and runs.
 *
 *   seconds = max(F / (P * eff), B / W) + L        eff = F / (F + P * knee_s)
 *
 * F  FLOPs of the op table (ir_node_flops), a multiply-add counting 2;
 * B  bytes of every present input and output plus the kernel's workspace, or what the op table
 *    counts for ops that touch only part of a tensor (ir_node_bytes);
 * P  mm_f32_flops for Conv, ConvTranspose, MatMul, Gemm (mm_f16_flops when their first input is
 *    float16 or bfloat16), other_f32_flops for every other op and dtype;
 * W  mem_bw; L launch_s.
 * With that efficiency the compute term is (F + P * knee_s) / P: a fixed ramp of knee_s added
 * to the ideal time, which is what a kernel too small to fill the GPU pays. An op with F = 0
 * pays no ramp. Constant, Shape and Size move no data (their outputs are descriptions, not
 * tensors the device reads) and cost L. Store and Load cost bytes / host_link_bw + L. A
 * FissionBuffer without a fill (ir_fission_buffer_unfilled) is an allocation and runs no kernel:
 * 0. A fused FissionAccumulate (ir_fission_accumulate_fused) is its producer's epilogue: B / W
 * for the buffer it reads (0 where it overwrites), no launch, no ramp. */
#include "prof-impl.h"

#include <string.h>

/* Ops that run on the tensor cores: convolutions (forward and weight gradient) and GEMMs. */
static bool is_mm(ir_op_kind op) {
    return op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_ConvGradWeight ||
           op == IR_OP_MatMul || op == IR_OP_Gemm;
}

bool prof_is_transfer(const ir_graph *g, const ir_node *n, size_t *bytes) {
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || strcmp(def->domain, "magpie") != 0) return false;
    /* Store is the op whose output lives on the host; Load is its inverse. Both move the one
     * tensor they copy. */
    bool store = (def->flags & IR_OPF_HOST_OUTPUT) != 0;
    if (!store && strcmp(def->name, "Load") != 0) return false;
    const ir_value *v = store ? ir_node_in(g, n, 0) : ir_node_out(g, n, 0);
    *bytes = v ? ir_value_bytes(v) : 0;
    return true;
}

double prof_roofline_transfer(const prof_target *t, size_t bytes) {
    return (double)bytes / t->host_link_bw + t->launch_s;
}

double prof_roofline_seconds(const prof_target *t, const ir_graph *g, const ir_node *n) {
    size_t xfer;
    if (prof_is_transfer(g, n, &xfer)) return prof_roofline_transfer(t, xfer);
    const ir_op_def *def = ir_op_get(n->op);
    if (n->op == IR_OP_Constant || (def && (def->flags & IR_OPF_SHAPE_ONLY))) return t->launch_s;
    if (ir_fission_buffer_unfilled(n)) return 0.0;

    double bytes = ir_node_bytes(g, n);
    if (ir_fission_accumulate_fused(g, n)) return bytes / t->mem_bw;

    double flops = ir_node_flops(g, n), rate = t->other_f32_flops;
    if (is_mm(n->op)) {
        const ir_value *x = ir_node_in(g, n, 0);
        bool half = x && (x->dtype == IR_F16 || x->dtype == IR_BF16);
        rate = half ? t->mm_f16_flops : t->mm_f32_flops;
    }
    double compute = flops > 0 ? (flops + rate * t->knee_s) / rate : 0.0;
    double memory = bytes / t->mem_bw;
    return (compute > memory ? compute : memory) + t->launch_s;
}
