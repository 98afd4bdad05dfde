/* ir-widen.c - float16 and bfloat16 for every float op, through the one op table.
 *
 * Most compute kernels (convolutions, GEMM, normalizations, softmax, pools, reductions, resize,
 * their gradients) have a float32 and a float64 form only. ir_node_run gives each of them the
 * 16-bit floats as onnxruntime's CPU kernels do: the node's float16/bfloat16 inputs are widened to
 * float32 in the tail of its workspace, the float32 kernel runs with float32 outputs there, and
 * each 16-bit output is rounded once on the store. Ops whose kernels read 16-bit floats
 * themselves (IR_OPF_FLOAT16: element-wise math, data movement) run as they are.
 *
 * Invariant: ir_node_workspace counts exactly the bytes ir_node_run uses (the op's own workspace,
 * then one 64-byte aligned float32 copy per 16-bit float tensor, inputs then outputs), so the
 * simulated peak and the executed peak stay equal to the byte. */
#include "ir-impl.h"

/* Tensors of a node that ir_node_run can widen at once; an op with more 16-bit inputs refuses. */
enum { WIDEN_MAX_IN = 64, WIDEN_MAX_OUT = 16 };

static bool is16(ir_dtype t) {
    return t == IR_F16 || t == IR_BF16;
}

static size_t align64(size_t b) {
    return (b + 63) & ~(size_t)63;
}

static size_t own_workspace(const ir_op_def *def, const ir_graph *g, const ir_node *n) {
    return (def && def->workspace) ? def->workspace(g, n) : 0;
}

size_t ir_node_widen_bytes(const ir_graph *g, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->kernel || (def->flags & IR_OPF_FLOAT16)) return 0;
    size_t bytes = 0;
    for (int i = 0; i < n->n_in + n->n_out; i++) {
        const ir_value *v = i < n->n_in ? ir_node_in(g, n, i) : ir_node_out(g, n, i - n->n_in);
        if (v && is16(v->dtype))
            bytes += align64((size_t)ir_shape_numel(&v->shape) * sizeof(float));
    }
    return bytes;
}

size_t ir_node_workspace(const ir_graph *g, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    size_t own = own_workspace(def, g, n), widen = ir_node_widen_bytes(g, n);
    return widen ? align64(own) + widen : own;
}

static void widen(float *dst, const ir_tensor *t) {
    const uint16_t *src = t->data;
    int64_t n = ir_tensor_numel(t);
    if (t->dtype == IR_F16) {
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] = ir_f16_to_f32(src[i]);
    } else {
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] = ir_bf16_to_f32(src[i]);
    }
}

static void narrow(ir_tensor *t, const float *src) {
    uint16_t *dst = t->data;
    int64_t n = ir_tensor_numel(t);
    if (t->dtype == IR_F16) {
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] = ir_f32_to_f16(src[i]);
    } else {
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dst[i] = ir_f32_to_bf16(src[i]);
    }
}

static bool any16(const ir_kernel_ctx *k) {
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i].data && is16(k->in[i].dtype)) return true;
    for (int i = 0; i < k->n_out; i++)
        if (k->out[i].data && is16(k->out[i].dtype)) return true;
    return false;
}

ir_status ir_node_run(const ir_kernel_ctx *k) {
    const ir_op_def *def = ir_op_get(k->node->op);
    if (!def || !def->kernel)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node, "op has no CPU kernel");
    if ((def->flags & IR_OPF_FLOAT16) || !any16(k)) return def->kernel(k);
    if (k->n_in > WIDEN_MAX_IN || k->n_out > WIDEN_MAX_OUT)
        return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                            "%d inputs and %d outputs in float16/bfloat16: at most %d and %d",
                            k->n_in, k->n_out, WIDEN_MAX_IN, WIDEN_MAX_OUT);
    size_t own = own_workspace(def, k->graph, k->node);
    IR_ASSERT(k->workspace_bytes >= align64(own) + ir_node_widen_bytes(k->graph, k->node));
    char *at = (char *)k->workspace + align64(own);
    ir_tensor in[WIDEN_MAX_IN], out[WIDEN_MAX_OUT];
    for (int i = 0; i < k->n_in + k->n_out; i++) {
        const ir_tensor *t = i < k->n_in ? &k->in[i] : &k->out[i - k->n_in];
        ir_tensor *w = i < k->n_in ? &in[i] : &out[i - k->n_in];
        *w = *t;
        if (!t->data || !is16(t->dtype)) continue;
        w->dtype = IR_F32;
        w->data = at;
        at += align64((size_t)ir_tensor_numel(t) * sizeof(float));
        /* an output the kernel accumulates into starts from what it holds */
        if (i < k->n_in || (i == k->n_in && k->accumulate)) widen(w->data, t);
    }
    ir_kernel_ctx wk = *k;
    wk.in = in;
    wk.out = out;
    wk.workspace = own ? k->workspace : NULL;
    wk.workspace_bytes = own;
    ir_status st = def->kernel(&wk);
    if (st != IR_OK) return st;
    for (int i = 0; i < k->n_out; i++)
        if (k->out[i].data && is16(k->out[i].dtype)) narrow(&k->out[i], out[i].data);
    return IR_OK;
}
