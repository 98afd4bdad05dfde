/* ir-expand-loss.c - SoftmaxCrossEntropyLoss (opsets 12, 13) and NegativeLogLikelihoodLoss
 * (12, 13, 22) expanded at import into ops of the table, as their (context-dependent) ONNX
 * function bodies do: LogSoftmax over the classes (axis 1), GatherElements of each position's
 * label, Neg, the weights gathered per label, ReduceSum. They are what PyTorch's
 * nn.CrossEntropyLoss and nn.NLLLoss export to. Every op they become has its gradient, dims and
 * float64 kernel, so --train differentiates through them and fission splits them.
 *
 * Semantics (the ONNX spec and onnx 1.22's reference): scores [N, C] or [N, C, d1..dk], labels
 * [N] or [N, d1..dk] (int32 or int64), weights [C] optional; loss[n, d] = -w[l] * logp[n, l, d]
 * with l = labels[n, d], and 0 where l == ignore_index (when given). reduction "none" keeps the
 * per-position losses, "sum" adds them, "mean" (the default) divides the sum by the sum of the
 * weights of the counted positions (their count without weights). A label equal to ignore_index
 * is replaced by 0 before the gathers, so that an out-of-range ignore_index (PyTorch's -100)
 * reads nothing out of bounds.
 *
 * The mean is written as a sum divided by a sum, never as ReduceMean, as ir-train.c writes its
 * own losses: a sum over the batch is a reduce axis a fission splits (the parts' partial sums
 * accumulate), a mean is not. The divisor comes from the labels and weights alone, so it needs
 * no gradient. */
#include "ir-expand-build.h"

#include <stdio.h>

typedef struct loss_spec {
    int logp;     /* log-probabilities [N, C, ...] */
    int labels;   /* [N, ...] */
    int weights;  /* [C] or -1 */
    int out_loss; /* the node's output 0 */
} loss_spec;

static ir_status nll_body(xb *b, const ir_node *n, const loss_spec *s) {
    ir_graph *g = b->g;
    const ir_value lp = g->values[s->logp], lab = g->values[s->labels];
    char s1[128], s2[128];
    if (!ir_dtype_is_float(lp.dtype) || lp.shape.rank < 2)
        return ir_node_fail(b->d, IR_ERR_SHAPE, n,
                            "the scores must be float of rank >= 2, not %s %s",
                            ir_dtype_name(lp.dtype), ir_shape_str(&lp.shape, s1, sizeof s1));
    bool ok = (lab.dtype == IR_I64 || lab.dtype == IR_I32) && lab.shape.rank == lp.shape.rank - 1 &&
              lab.shape.dims[0] == lp.shape.dims[0];
    for (int i = 1; ok && i < lab.shape.rank; i++) ok = lab.shape.dims[i] == lp.shape.dims[i + 1];
    if (!ok)
        return ir_node_fail(b->d, IR_ERR_SHAPE, n,
                            "labels are %s %s; expected int32 or int64 of the scores' shape %s "
                            "without axis 1",
                            ir_dtype_name(lab.dtype), ir_shape_str(&lab.shape, s1, sizeof s1),
                            ir_shape_str(&lp.shape, s2, sizeof s2));
    const int64_t C = lp.shape.dims[1];
    if (s->weights >= 0) {
        const ir_value w = g->values[s->weights];
        if (w.dtype != lp.dtype || w.shape.rank != 1 || w.shape.dims[0] != C)
            return ir_node_fail(b->d, IR_ERR_SHAPE, n, "weights are %s %s; expected %s [%lld]",
                                ir_dtype_name(w.dtype), ir_shape_str(&w.shape, s1, sizeof s1),
                                ir_dtype_name(lp.dtype), (long long)C);
    }
    const char *red = ir_attr_str(n, "reduction", "mean");
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
        return ir_node_fail(b->d, IR_ERR_INVALID, n, "reduction '%s' (expected mean, sum or none)",
                            red);
    const ir_dtype t = lp.dtype;
    int safe = s->labels, keep = -1;
    if (ir_attr_find(n, "ignore_index")) {
        const double ii = (double)ir_attr_int(n, "ignore_index", 0);
        int ign = xb_op2(b, IR_OP_Equal, s->labels, xb_scalar(b, lab.dtype, ii));
        safe = xb_op(b, IR_OP_Where, 3, (int[]){ign, xb_scalar(b, lab.dtype, 0), s->labels}, -1, 0,
                     NULL);
        keep = xb_cast(b, xb_op1(b, IR_OP_Not, ign), t);
    }
    int idx = xb_unsqueeze(b, safe, 1);
    int picked = xb_squeeze(
        b, xb_op_int(b, IR_OP_GatherElements, 2, (int[]){s->logp, idx}, -1, "axis", 1), 1, -1);
    int w = -1; /* each position's weight, 0 where ignored */
    if (s->weights >= 0)
        w = xb_op_int(b, IR_OP_Gather, 2, (int[]){s->weights, safe}, -1, "axis", 0);
    if (keep >= 0) w = w >= 0 ? xb_op2(b, IR_OP_Mul, w, keep) : keep;
    int per = xb_op1(b, IR_OP_Neg, picked);
    if (w >= 0) per = xb_op2(b, IR_OP_Mul, per, w);
    if (b->st) return b->st;
    if (!strcmp(red, "none")) {
        xb_identity(b, per, s->out_loss);
        return b->st;
    }
    int total = xb_reduce(b, IR_OP_ReduceSum, per, 0, NULL, false, -1);
    if (!strcmp(red, "sum")) {
        xb_identity(b, total, s->out_loss);
        return b->st;
    }
    int count;
    if (w >= 0) {
        count = xb_reduce(b, IR_OP_ReduceSum, w, 0, NULL, false, -1);
    } else {
        const ir_shape ls = lab.shape;
        count = xb_scalar(b, t, (double)ir_shape_numel(&ls));
    }
    xb_op(b, IR_OP_Div, 2, (int[]){total, count}, s->out_loss, 0, NULL);
    return b->st;
}

ir_status ir_expand_nll_loss(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || n->n_out < 1 || n->out[0] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "input, target and loss are required");
    loss_spec s = {.logp = n->in[0],
                   .labels = n->in[1],
                   .weights = n->n_in > 2 ? n->in[2] : -1,
                   .out_loss = n->out[0]};
    return nll_body(&b, n, &s);
}

ir_status ir_expand_sce_loss(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || n->n_out < 1 || n->out[0] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "scores, labels and output are required");
    const ir_value sc = g->values[n->in[0]];
    if (!ir_dtype_is_float(sc.dtype) || sc.shape.rank < 2) {
        char s1[128];
        return ir_node_fail(d, IR_ERR_SHAPE, n, "the scores must be float of rank >= 2, not %s %s",
                            ir_dtype_name(sc.dtype), ir_shape_str(&sc.shape, s1, sizeof s1));
    }
    const int log_prob = n->n_out > 1 ? n->out[1] : -1;
    int lp = xb_op_int(&b, IR_OP_LogSoftmax, 1, &n->in[0], log_prob, "axis", 1);
    if (b.st) return b.st;
    loss_spec s = {.logp = lp,
                   .labels = n->in[1],
                   .weights = n->n_in > 2 ? n->in[2] : -1,
                   .out_loss = n->out[0]};
    return nll_body(&b, n, &s);
}
