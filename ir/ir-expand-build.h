/* ir-expand-build.h - private to ir/: the small graph builder the import-time expansions of
 * ONNX function ops write their bodies with (ir-expand-build.c), and the table of those
 * expansions (ir-expand-attn.c, ir-expand-loss.c, ir-expand-misc.c).
 *
 * An expansion runs when shape inference reaches the node: its inputs' shapes are known, so the
 * body is written with static shapes and folded constants. Each builder call appends one node
 * (shape inference runs at once) and returns its output value, or -1 once anything failed: the
 * first failure is kept in b->st and every later call does nothing, so a body reads as a
 * straight sequence of calls with one status check at the end. */
#ifndef MAGPIE_IR_EXPAND_BUILD_H
#define MAGPIE_IR_EXPAND_BUILD_H

#include "ir-impl.h"

typedef struct xb {
    ir_graph *g;
    const char *base; /* the expanded node's name */
    int count;
    ir_diag *d;
    ir_status st;
} xb;

int xb_fail(xb *b, ir_status st);
/* A node of op; its output is value out, or a new value when out < 0. */
int xb_op(xb *b, ir_op_kind op, int n_in, const int *in, int out, int n_attrs,
          const ir_attr *attrs);
int xb_op1(xb *b, ir_op_kind op, int x);
int xb_op2(xb *b, ir_op_kind op, int x, int y);
/* op with one int attribute name = v. */
int xb_op_int(xb *b, ir_op_kind op, int n_in, const int *in, int out, const char *name, int64_t v);
/* A constant of dtype t and shape s (data: numel elements as double, converted). */
int xb_const(xb *b, ir_dtype t, const ir_shape *s, const double *data);
int xb_scalar(xb *b, ir_dtype t, double v);
/* An int64 vector of n (at most 2 * IR_MAX_RANK + 2) values. */
int xb_ints(xb *b, int n, const int64_t *v);
ir_shape xb_shape(const xb *b, int v);
ir_dtype xb_dtype(const xb *b, int v);
int xb_reshape(xb *b, int x, int rank, const int64_t *dims, int out);
int xb_transpose(xb *b, int x, int rank, const int64_t *perm, int out);
int xb_concat(xb *b, int x, int y, int64_t axis, int out);
/* x[..., lo:hi] along axis (opset-13 Slice with constant starts, ends, axes). */
int xb_slice(xb *b, int x, int64_t axis, int64_t lo, int64_t hi);
int xb_identity(xb *b, int x, int out);
int xb_cast(xb *b, int x, ir_dtype to);
/* ReduceOp over the n axes (all when n == 0), keepdims as given. */
int xb_reduce(xb *b, ir_op_kind op, int x, int n, const int64_t *axes, bool keepdims, int out);
int xb_unsqueeze(xb *b, int x, int64_t axis);
int xb_squeeze(xb *b, int x, int64_t axis, int out);

/* Moves the nodes appended from index n0 on into the place of node idx, which is dropped, and
 * re-derives every producer index. */
ir_status xb_splice(ir_graph *g, int idx, int n0, ir_diag *d, const ir_node *n);

/* An expansion: writes node idx's body at the end of g->nodes, to the node's output values.
 * (A copy of the node is passed: adding nodes moves g->nodes.) */
typedef ir_status (*ir_expand_fn)(ir_graph *g, const ir_node *n, ir_diag *d);

ir_status ir_expand_attention(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_rotary(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_sce_loss(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_nll_loss(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_rms_norm(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_center_crop_pad(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_affine_grid(ir_graph *g, const ir_node *n, ir_diag *d);
ir_status ir_expand_bernoulli(ir_graph *g, const ir_node *n, ir_diag *d);

#endif
