/* ops-swap.c - Store and Load, the magpie-domain ops that swap a tensor to host memory and back
 * (MAGIS 5.2). Both are identities on data: the output has the input's dtype and shape.
 *
 * Invariants the rest of magpie relies on:
 *  - Store's output lives in host memory (IR_OPF_HOST_OUTPUT): sched/ and runtime/ count it as
 *    host bytes and never as device bytes; its input's device bytes are freed after the Store
 *    step by the ordinary last-use rule when Store is that input's last device use;
 *  - Load reads a host value and allocates its output on the device at its own step;
 *  - neither does arithmetic (0 FLOPs); their cost is a host-link transfer, which the cost model
 *    charges on the simulator's copy stream (sched-sim.c). */
#include "ir-impl.h"

bool ir_value_on_host(const ir_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return false;
    int p = g->values[v].producer;
    if (p < 0 || p >= g->n_nodes) return false;
    const ir_op_def *def = ir_op_get(g->nodes[p].op);
    return def && (def->flags & IR_OPF_HOST_OUTPUT);
}

static ir_status swap_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (ir_dtype_size(x->dtype) == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "input '%s' has no dtype", x->name);
    ir_set_out(g, n, 0, x->dtype, &x->shape);
    return IR_OK;
}

/* On the CPU both directions are a copy between two buffers of the executor (rt-exec.c takes
 * Store's output from its host pool). */
static ir_status swap_kernel(const ir_kernel_ctx *k) {
    size_t bytes = (size_t)ir_tensor_numel(&k->in[0]) * ir_dtype_size(k->in[0].dtype);
    if (bytes) memcpy(k->out[0].data, k->in[0].data, bytes);
    return IR_OK;
}

/* Store and Load differ only in where their output lives. */
#define SWAP_OP_DEF(NAME, FLAGS)                                                                   \
    const ir_op_def ir_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .domain = "magpie",                                                                        \
        .min_in = 1,                                                                               \
        .max_in = 1,                                                                               \
        .min_out = 1,                                                                              \
        .max_out = 1,                                                                              \
        .flags = IR_OPF_FLOAT16 | (FLAGS),                                                         \
        .infer = swap_infer,                                                                       \
        .kernel = swap_kernel,                                                                     \
        .dims = ir_dims_first_input, /* identities: every dim links */                             \
    }

SWAP_OP_DEF(Store, IR_OPF_HOST_OUTPUT);
SWAP_OP_DEF(Load, 0);
