/* ir-op-table.c - the one op table: ir-ops.def expanded into an array of definitions. */
#include "ir-impl.h"

#include <string.h>

static const ir_op_def *const op_table[IR_OP_COUNT] = {
#define IR_OP(name, domain) [IR_OP_##name] = &ir_opdef_##name,
#include "ir-ops.def"
#undef IR_OP
};

const ir_op_def *ir_op_get(ir_op_kind k) {
    return (k >= 0 && k < IR_OP_COUNT) ? op_table[k] : NULL;
}

const char *ir_op_name(ir_op_kind k) {
    const ir_op_def *d = ir_op_get(k);
    return d ? d->name : "opaque";
}

ir_op_kind ir_op_find(const char *domain, const char *op_type) {
    if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
    for (int k = 0; k < IR_OP_COUNT; k++) {
        const ir_op_def *d = op_table[k];
        if (d && strcmp(d->name, op_type) == 0 && strcmp(d->domain, domain) == 0)
            return (ir_op_kind)k;
    }
    return IR_OP_OPAQUE;
}

ir_status ir_node_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->infer) return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "op is not supported");
    if (n->n_in < def->min_in || n->n_in > def->max_in || n->n_out < def->min_out ||
        n->n_out > def->max_out)
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "has %d inputs and %d outputs; %s takes %d-%d inputs and %d-%d "
                            "outputs",
                            n->n_in, n->n_out, def->name, def->min_in, def->max_in, def->min_out,
                            def->max_out);
    for (int i = 0; i < def->min_in && i < n->n_in; i++)
        if (n->in[i] < 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "required input %d is missing", i);
    return def->infer(g, n, d);
}

double ir_node_flops(const ir_graph *g, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    return (def && def->flops) ? def->flops(g, n) : 0.0;
}

int ir_node_dims(const ir_graph *g, const ir_node *n, ir_dimlink *out) {
    const ir_op_def *def = ir_op_get(n->op);
    return (def && def->dims) ? def->dims(g, n, out) : 0;
}

double ir_node_bytes(const ir_graph *g, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    if (def && def->bytes) return def->bytes(g, n);
    /* The op's own workspace: the widening copies of ir_node_run (ir-widen.c) are the CPU
     * executor's, a device reads its 16-bit floats directly. */
    double bytes = (def && def->workspace) ? (double)def->workspace(g, n) : 0.0;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        if (v) bytes += (double)ir_value_bytes(v);
    }
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *v = ir_node_out(g, n, i);
        if (v) bytes += (double)ir_value_bytes(v);
    }
    return bytes;
}
