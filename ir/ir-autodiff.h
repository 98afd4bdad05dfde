/* ir-autodiff.h - reverse-mode autodiff inside ir/: the context a gradient builder
 * (ir_op_def.grad) receives, the helpers it emits backward ops with, and the builders of every
 * differentiable op. The public entry point is ir_build_training (ir.h).
 *
 * How a training graph is built (ir-autodiff.c):
 *  1. the forward graph is cloned (value ids stay the same), the loss nodes are appended;
 *  2. `needs`: a float value needs a gradient when it is a parameter (IR_VF_PARAM) or some
 *     node that produces it reads a value that needs one; `flows`: a gradient flows into a
 *     value when it reaches the loss; integer and bool values never get gradients;
 *  3. forward nodes are visited in REVERSE graph order (PyTorch autograd's order); a node whose
 *     some output has a gradient and some input needs one gets its builder called, which
 *     appends the backward ops to g->nodes, so g->nodes is the eager training order;
 *  4. optimizer updates are appended, outputs set, and unused nodes pruned (order kept).
 *
 * Contract of a builder `ir_status ir_grad_<Op>(ir_grad_ctx *c)`:
 *  - read the forward node from c->node / c->in / c->out (value ids valid in c->g), the
 *    incoming gradients from c->gout (-1: none flows into that output; ir_grad_gout gives
 *    zeros instead);
 *  - for each input i with ir_grad_needs(c, i), compute its gradient with ir_grad_op/_emit and
 *    hand it to ir_grad_accumulate(c, i, v) exactly once (or not at all: a zero gradient);
 *    the gradient may be broadcast (larger than the input): accumulate reduces it;
 *  - referencing a forward value from a backward op is what keeps it alive for the backward:
 *    there is no separate "save" call. ir_grad_fwd_output adds an optional forward output
 *    (saved statistics, masks) to the forward node when the builder wants it;
 *  - errors are sticky: after the first failure every helper returns -1 and does nothing,
 *    so a builder may chain helpers and check once, `return ir_grad_status(c);`. A case that
 *    is not differentiable: `return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "...")`;
 *  - pointers into c->g->values or c->g->nodes are invalidated by every helper that adds
 *    values or nodes: copy shapes (ir_grad_shape) before emitting, keep value ids, not
 *    pointers. */
#ifndef MAGPIE_IR_AUTODIFF_H
#define MAGPIE_IR_AUTODIFF_H

#include "ir.h"

struct ir_ad; /* the builder's private state (ir-train.h) */

typedef struct ir_grad_ctx {
    ir_graph *g;         /* the training graph being built */
    const ir_node *node; /* a copy of the forward node (arrays live in g's arena) */
    int node_index;      /* its index in g->nodes */
    int n_in, n_out;
    const int *in;   /* forward input value ids (-1: omitted optional input) */
    const int *out;  /* forward output value ids */
    const int *gout; /* per forward output: its gradient's value id, -1 when none flows */
    struct ir_ad *ad;
} ir_grad_ctx;

/* ---------------------------------------------------------------- queries */

/* True when forward input i is present and needs a gradient (leads to a parameter, float). */
bool ir_grad_needs(const ir_grad_ctx *c, int i);
/* The gradient of forward output i; when none flows, a zero tensor shaped like the output
 * (emitted on first use). -1 on failure. */
int ir_grad_gout(ir_grad_ctx *c, int i);
/* Copies of a value's shape / dtype (safe across emits). */
ir_shape ir_grad_shape(const ir_grad_ctx *c, int v);
ir_dtype ir_grad_dtype(const ir_grad_ctx *c, int v);
/* The value id of forward output i, adding the output to the forward node (with shape
 * inference) when the node has fewer outputs: e.g. Dropout's mask, LayerNormalization's
 * Mean/InvStdDev. -1 with an error when the op does not have that many outputs. */
int ir_grad_fwd_output(ir_grad_ctx *c, int i);
/* A constant input's values (Reshape shapes, Slice starts, Clip bounds): like ir_const_ints /
 * ir_const_scalar on the forward node's input i. Sticky error when not constant. */
int ir_grad_in_ints(ir_grad_ctx *c, int i, int64_t *out, int max); /* count, -2 absent, -1 */
bool ir_grad_in_scalar(ir_grad_ctx *c, int i, double *out);

/* ---------------------------------------------------------------- errors */

/* Records a failure "node 'NAME' (OP): gradient: <fmt>" (first one wins) and returns st. */
ir_status ir_grad_fail(ir_grad_ctx *c, ir_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ir_status ir_grad_status(const ir_grad_ctx *c);

/* ---------------------------------------------------------------- emitting backward ops */

/* Appends a node (named "<forward node>/grad/<OP>", domain from the op table) with the given
 * inputs (-1 for an omitted optional input) and attributes (names static or in g's arena;
 * array attributes via ir_grad_attr_ints/_floats), creates n_out values and runs shape
 * inference. out[i] receives the value ids. Sticky: IR_OK or the first failure. */
ir_status ir_grad_emit(ir_grad_ctx *c, ir_op_kind op, int n_in, const int *in, int n_out, int *out,
                       int n_attrs, const ir_attr *attrs);
/* Single-output forms; return the value id or -1. */
int ir_grad_op(ir_grad_ctx *c, ir_op_kind op, int n_in, const int *in, int n_attrs,
               const ir_attr *attrs);
int ir_grad_op1(ir_grad_ctx *c, ir_op_kind op, int a);
int ir_grad_op2(ir_grad_ctx *c, ir_op_kind op, int a, int b);

/* Attribute constructors. The _ints/_floats/_str forms copy into g's arena. */
ir_attr ir_grad_attr_int(const char *name, int64_t v);
ir_attr ir_grad_attr_float(const char *name, float v);
ir_attr ir_grad_attr_str(ir_grad_ctx *c, const char *name, const char *s);
ir_attr ir_grad_attr_ints(ir_grad_ctx *c, const char *name, int n, const int64_t *v);
ir_attr ir_grad_attr_floats(ir_grad_ctx *c, const char *name, int n, const float *v);

/* Constants (resident, deduplicated per graph): a rank-0 scalar of dtype t, a 1-D int64 tensor
 * (shapes, axes, starts), or any tensor (data copied). */
int ir_grad_scalar(ir_grad_ctx *c, ir_dtype t, double v);
int ir_grad_const_i64(ir_grad_ctx *c, int n, const int64_t *v);
int ir_grad_const(ir_grad_ctx *c, ir_dtype t, const ir_shape *s, const void *data);

/* Common compositions (each emits ops only when needed; v returned unchanged otherwise). */
int ir_grad_reshape(ir_grad_ctx *c, int v, const ir_shape *to); /* Reshape */
/* Transpose; when v = Transpose(x) and perm undoes it, x itself (a transposed view). */
int ir_grad_transpose(ir_grad_ctx *c, int v, int n, const int64_t *perm);
/* ReduceSum over axes (axes as a constant input; keepdims as given). */
int ir_grad_reduce_sum(ir_grad_ctx *c, int v, int n_axes, const int64_t *axes, bool keepdims);
/* Sums a gradient broadcast from shape `to` back to `to` (ReduceSum over the broadcast axes,
 * then Reshape to drop leading ones): the one `unbroadcast` every broadcasting op uses. */
int ir_grad_unbroadcast(ir_grad_ctx *c, int v, const ir_shape *to);
/* Zeros of dtype t and shape s (Expand of a scalar zero: an op, so not resident). */
int ir_grad_zeros(ir_grad_ctx *c, ir_dtype t, const ir_shape *s);
/* Multiplies by a scalar constant (nothing when k == 1). */
int ir_grad_scale(ir_grad_ctx *c, int v, double k);

/* Adds grad to the gradient of forward input i: unbroadcasts it to the input's shape, then
 * the first contribution is kept as is, later ones are summed with Add as they arrive (as
 * autograd's input buffers do). Ignored (IR_OK) when input i needs no gradient; grad -1
 * propagates a sticky failure. */
ir_status ir_grad_accumulate(ir_grad_ctx *c, int i, int grad);

/* ---------------------------------------------------------------- builders */

/* Every differentiable op's builder, referenced from its op definition (.grad = ir_grad_X).
 * ad: grad-elementwise.c, grad-shape.c, grad-matmul.c. adk: conv, pooling, norm, softmax,
 * reductions, resize (grad-*.c of their own). */
/* clang-format off */
#define IR_GRAD_BUILDERS_AD(X)                                                                     \
    X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Min) X(Max) X(Sum) X(Mod) X(Where)                        \
    X(Relu) X(LeakyRelu) X(Sigmoid) X(HardSigmoid) X(HardSwish) X(Tanh) X(Erf) X(Exp) X(Log)       \
    X(Sqrt) X(Neg) X(Abs) X(Reciprocal) X(Floor) X(Ceil) X(Sign) X(Clip) X(Softplus) X(Elu)        \
    X(Gelu) X(Sin) X(Cos) X(Round) X(Softsign) X(Selu) X(Celu) X(Mish)                             \
    X(Identity) X(Dropout) X(Cast) X(CastLike)                                                     \
    X(Reshape) X(Flatten) X(Squeeze) X(Unsqueeze) X(Expand) X(Tile)                                \
    X(Transpose) X(Concat) X(Split) X(Slice) X(Pad)                                                \
    X(Gather) X(GatherElements) X(Trilu)                                                           \
    X(MatMul) X(Gemm)
#define IR_GRAD_BUILDERS_ADK(X)                                                                    \
    X(Conv) X(ConvTranspose) X(MaxPool) X(AveragePool) X(GlobalAveragePool) X(GlobalMaxPool)       \
    X(Resize) X(BatchNormalization) X(LayerNormalization) X(InstanceNormalization) X(Softmax)      \
    X(LogSoftmax) X(ReduceMean) X(ReduceSum) X(ReduceMax) X(ReduceMin) X(ReduceProd) X(ReduceL2)   \
    X(CumSum) X(GroupNormalization) X(DepthToSpace) X(SpaceToDepth) X(TopK)        \
    X(ReduceL1) X(ReduceSumSquare) X(ReduceLogSum) X(ReduceLogSumExp)
/* clang-format on */
#define IR_GRAD_DECLARE(op) ir_status ir_grad_##op(ir_grad_ctx *c);
/* Defines ir_grad_<op> as fn(c), for ops whose gradients one builder makes. */
#define IR_GRAD_VIA(op, fn)                                                                        \
    ir_status ir_grad_##op(ir_grad_ctx *c) {                                                       \
        return fn(c);                                                                              \
    }
IR_GRAD_BUILDERS_AD(IR_GRAD_DECLARE)
IR_GRAD_BUILDERS_ADK(IR_GRAD_DECLARE)

#endif
