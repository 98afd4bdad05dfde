/* ir-expand-attn.h - the ONNX ops that magpie expands at import into ops of the table, in C, when
 * shape inference reaches them: Attention 23 and RotaryEmbedding 23 (ir-expand-attn.c),
 * SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (ir-expand-loss.c), RMSNormalization,
 * CenterCropPad, AffineGrid and Bernoulli (ir-expand-misc.c). The table is in ir-expand-build.c.
 * Private to ir/. */
#ifndef MAGPIE_IR_EXPAND_ATTN_H
#define MAGPIE_IR_EXPAND_ATTN_H

#include "ir.h"

/* True for the ops ir_expand_node expands (default domain). */
bool ir_expandable_op(const char *domain, const char *op_type);
/* Replaces node idx of g, whose inputs have their shapes, by its expansion in its place in
 * g->nodes (shapes inferred), writing the node's output values. A clear message naming the node
 * for what the expansion does not read. */
ir_status ir_expand_node(ir_graph *g, int idx, ir_diag *d);

#endif
