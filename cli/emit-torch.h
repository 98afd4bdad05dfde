/* emit-torch.h - `magpie emit --torch`: a plan (optimized.onnx, nodes in the schedule's order) as
 * a self-contained Python module whose step() runs the schedule with PyTorch ops.
 *
 * emit-torch.c walks the nodes in order, binds every value to a Python variable, deletes each
 * tensor right after its last reader (so PyTorch frees it where magpie's schedule frees it) and
 * writes the module around the body; the per-op statements come from one function per op family
 * (emit-torch-ops.c: element-wise and shape ops, emit-torch-nn.c: convolutions, matmuls,
 * normalizations, pooling, reductions; emit-torch-train.c: gradient, loss, optimizer, fission,
 * swap and PET ops; emit-torch-grid.c: GridSample and its gradients; emit-torch-more.c: the ops of
 * opsets 13-23 that issue 22 added). The Python helpers those statements call are sections of
 * emit_torch_prelude.py, embedded at build time; only the sections a plan uses are copied. An op
 * without a PyTorch form is refused before anything is written, naming the node and the op. */
#ifndef MAGPIE_EMIT_TORCH_H
#define MAGPIE_EMIT_TORCH_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"

typedef struct et_ctx et_ctx;

/* Writes the module for plan g (a graph read from a plan's optimized.onnx) to f. On a refusal
 * returns IR_ERR_UNSUPPORTED with d naming the node and the op; nothing is written then (the
 * module is assembled in memory first). */
ir_status et_emit_module(const ir_graph *g, FILE *f, ir_diag *d);

/* ---------------------------------------------------------------- for the op families */

/* Emits node n of e's graph: one or more statements that assign every used output variable.
 * Returns IR_OK, or a refusal through et_refuse. */
typedef ir_status (*et_op_fn)(et_ctx *e, const ir_node *n);
/* The family function for op k, or NULL when the op has no PyTorch form (emit-torch-ops.c). */
et_op_fn et_op_lookup(ir_op_kind k);
et_op_fn et_nn_lookup(ir_op_kind k);
et_op_fn et_train_lookup(ir_op_kind k);
et_op_fn et_grid_lookup(ir_op_kind k);
et_op_fn et_more_lookup(ir_op_kind k);

const ir_graph *et_graph(const et_ctx *e);
/* The Python expression of input i of n ("None" when omitted): a variable, or for a constant the
 * plan's value on the step's device. */
const char *et_in(et_ctx *e, const ir_node *n, int i);
/* Every input of n, as et_in gives them, joined by ", " into buf (cap bytes), with a leading ", "
 * when lead; false when they do not fit. */
bool et_in_list(et_ctx *e, const ir_node *n, bool lead, char *buf, size_t cap);
/* The variable for output i of n ("_" when the output is omitted). */
const char *et_out(et_ctx *e, const ir_node *n, int i);
/* Fused accumulates (ir_graph_fused_parts in the plan's order): the FissionAccumulate whose buffer
 * n's output 0 goes into, or -1. A producer that writes its part into that buffer itself (the
 * accumulate's input 0, adding to it: addmm_, baddbmm_, index_add_; beta 0 where the accumulate
 * overwrites) calls et_fused_done, and the accumulate then emits no add (et_fused_written of its
 * part). A producer without such a PyTorch form writes a part of its own, which the accumulate
 * adds. */
int et_fused_into(const et_ctx *e, const ir_node *n);
void et_fused_done(et_ctx *e, const ir_node *n);
bool et_fused_written(const et_ctx *e, int v);
/* True when output i of n is read by some node or is a graph output. */
bool et_out_used(const et_ctx *e, const ir_node *n, int i);
/* Appends one statement line (indented into the step function). */
void et_line(et_ctx *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks the prelude section `name` as needed by the module. */
void et_use(et_ctx *e, const char *name);
/* A refusal: IR_ERR_UNSUPPORTED naming the node, its op and why. */
ir_status et_refuse(et_ctx *e, const ir_node *n, const char *why, ...)
    __attribute__((format(printf, 3, 4)));

/* Python literals for attribute values and shapes, in a buffer of e that lives until the module
 * is written: "(1, 2, 3)" / "[1, 2]" and "torch.float32". */
const char *et_ints(et_ctx *e, const int64_t *v, int n, bool list);
const char *et_shape(et_ctx *e, const ir_shape *s);
const char *et_dtype(ir_dtype t);
/* The dtype of a tensor the step creates: et_dtype for integers and bool; for a float dtype, the
 * run's float dtype (_fd: float64 when the caller runs the step in float64, a reference run). */
const char *et_run_dtype(et_ctx *e, ir_dtype t);
/* A float as a Python literal that reads back exactly ("float('inf')" for infinities). */
const char *et_float(et_ctx *e, double v);
/* The integers of constant input i of n (int64/int32 data), into out (at most cap); -1 when the
 * input is absent or not a constant. */
int et_const_ints(const et_ctx *e, const ir_node *n, int i, int64_t *out, int cap);
/* The floats of constant input i of n; -1 when absent or not a constant. */
int et_const_floats(const et_ctx *e, const ir_node *n, int i, double *out, int cap);
/* The Python arguments describing a Resize, or a ResizeGrad (whose attributes are the forward's):
 * "scales, ctm, rounding, linear", scales read from constant input scales_in; malloc'd (the caller
 * frees it), NULL for a mode without a PyTorch form (cubic). */
char *et_resize_args(et_ctx *e, const ir_node *n, int scales_in, int rank);
/* Normalizes axis a against rank r into *out; false when out of range. */
bool et_axis(int64_t a, int r, int *out);

#endif
