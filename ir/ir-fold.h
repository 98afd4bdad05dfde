/* ir-fold.h - private to ir/: folding one node at a time, so that the ONNX importer can
 * interleave shape inference and folding (Reshape's inference needs the data of the shape
 * sub-graph that precedes it). ir_fold_constants (ir.h) is the whole-graph entry point. */
#ifndef MAGPIE_IR_FOLD_H
#define MAGPIE_IR_FOLD_H

#include "ir-impl.h"

/* A node whose outputs would exceed this many bytes stays a node: folding it would trade a
 * cheap op for a large weight. */
#define IR_FOLD_MAX_BYTES ((size_t)64 << 20)
/* A broadcast (Expand, Tile, ConstantOfShape) whose output exceeds this and twice its inputs
 * stays a node (ir-fold.c says why). */
#define IR_FOLD_BROADCAST_BYTES ((size_t)4 << 10)

/* Evaluates node idx when it can be folded (its op has a CPU kernel and is not IR_OPF_RANDOM,
 * and every present input is a constant that is not a trainable parameter; IR_OPF_SHAPE_ONLY
 * ops need only their inputs' shapes). Its outputs' dtypes and shapes must already be
 * inferred. On folding, every output becomes a constant (IR_VF_CONST in a fresh blob, producer
 * -1, neither initializer nor parameter) and *folded is set; the node stays in g->nodes,
 * detached from its outputs, until ir_graph_prune removes it, which the caller must do before
 * the graph is used. A kernel that reports IR_ERR_UNSUPPORTED leaves the node unfolded; any
 * other kernel failure is returned with a message naming the node. */
ir_status ir_fold_node(ir_graph *g, int idx, bool *folded, ir_diag *d);

#endif
