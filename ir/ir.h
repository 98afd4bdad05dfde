/* ir.h - magpie's intermediate representation: dtypes, tensors, the op table, graphs,
 * ONNX import/export, constant folding and .npy I/O.
 *
 * Invariants every module relies on:
 *  - shapes are static; every value has a dtype and a shape once a graph is imported;
 *  - memory is counted in bytes (ir_value_bytes), never in elements;
 *  - graph->nodes is kept in a topological order; for an imported model this is the file's
 *    order whenever that order was topological (the "eager order" of DESIGN.md);
 *  - constant data lives in reference-counted blobs so that graphs can share weights;
 *  - every op kind has exactly one ir_op_def (ir_op_get), which holds its shape inference,
 *    FLOP and workspace counts and its CPU kernel. */
#ifndef MAGPIE_IR_H
#define MAGPIE_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status and errors */

typedef enum ir_status {
    IR_OK = 0,
    IR_ERR_IO,          /* a file could not be read or written */
    IR_ERR_PARSE,       /* bytes that are not what they claim to be (protobuf, .npy) */
    IR_ERR_INVALID,     /* a well-formed file describing an invalid model or tensor */
    IR_ERR_UNSUPPORTED, /* a valid model using something magpie does not implement */
    IR_ERR_SHAPE,       /* shapes or dtypes that do not fit together */
    IR_ERR_NOMEM,
    IR_ERR_INTERNAL,
} ir_status;

const char *ir_status_to_string(ir_status s);

/* One-line, human-readable cause of the last failure: "FILE: node 'NAME' (OP): cause". */
typedef struct ir_diag {
    char msg[1024];
} ir_diag;

/* Formats into d->msg (d may be NULL) and returns st, so callers can write
 * `return ir_diag_set(d, IR_ERR_SHAPE, "...", ...);`. */
ir_status ir_diag_set(ir_diag *d, ir_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes d->msg with "prefix: " (e.g. the file name) unless it already starts with it. */
void ir_diag_prefix(ir_diag *d, const char *prefix);
/* Formats a failure at node n into d (may be NULL): "node 'NAME' (OP): <fmt>". Returns st.
 * The arguments must not point into d->msg. */
struct ir_node;
ir_status ir_node_fail(ir_diag *d, ir_status st, const struct ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Programmer errors abort with file and line; bad input never reaches these. */
#define IR_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x)) ir_assert_fail(__FILE__, __LINE__, #x);                                          \
    } while (0)
_Noreturn void ir_assert_fail(const char *file, int line, const char *expr);

/* ---------------------------------------------------------------- dtypes and shapes */

typedef enum ir_dtype {
    IR_F32 = 0,
    IR_F16,
    IR_BF16,
    IR_F64,
    IR_I64,
    IR_I32,
    IR_I8,
    IR_U8,
    IR_BOOL,
    /* appended after the first nine, so that checkpoints keep their dtype numbers */
    IR_I16,
    IR_U16,
    IR_U32,
    IR_U64,
    IR_DTYPE_COUNT,
    IR_DTYPE_NONE = -1,
} ir_dtype;

size_t ir_dtype_size(ir_dtype t);
const char *ir_dtype_name(ir_dtype t);      /* "float32", "int64", ... */
bool ir_dtype_is_float(ir_dtype t);         /* f32, f16, bf16, f64 */
int ir_dtype_to_onnx(ir_dtype t);           /* TensorProto.DataType, 0 if none */
ir_dtype ir_dtype_from_onnx(int onnx_type); /* IR_DTYPE_NONE if unsupported */
float ir_f16_to_f32(uint16_t h);
uint16_t ir_f32_to_f16(float f);
float ir_bf16_to_f32(uint16_t h);
uint16_t ir_f32_to_bf16(float f);
/* Reads element i of a buffer of dtype t as double / writes it (casts as ONNX Cast does;
 * float to integer truncates toward zero, anything non-zero to bool is 1). Slow path only:
 * folding, .npy conversion, tests. */
double ir_load_f64(const void *buf, ir_dtype t, int64_t i);
void ir_store_f64(void *buf, ir_dtype t, int64_t i, double v);
int64_t ir_load_i64(const void *buf, ir_dtype t, int64_t i);

#define IR_MAX_RANK 8

typedef struct ir_shape {
    int rank;
    int64_t dims[IR_MAX_RANK];
} ir_shape;

int64_t ir_shape_numel(const ir_shape *s); /* 1 for rank 0 */
bool ir_shape_eq(const ir_shape *a, const ir_shape *b);
ir_shape ir_shape_make(int rank, const int64_t *dims);
/* "[1,3,224,224]" into buf; returns buf. */
char *ir_shape_str(const ir_shape *s, char *buf, size_t n);
/* Numpy-style broadcast of a and b into out; false when they do not broadcast. */
bool ir_shape_broadcast(const ir_shape *a, const ir_shape *b, ir_shape *out);
/* Row-major strides in elements. */
void ir_shape_strides(const ir_shape *s, int64_t *strides);

/* ---------------------------------------------------------------- blobs: shared constant data */

/* Immutable, reference-counted, 64-byte aligned bytes. Refcounts are atomic so graphs owned by
 * different threads may share weights. */
typedef struct ir_blob ir_blob;
ir_blob *ir_blob_new(size_t bytes); /* zero-filled; NULL on out of memory */
ir_blob *ir_blob_ref(ir_blob *b);   /* NULL-safe */
void ir_blob_unref(ir_blob *b);     /* NULL-safe */
void *ir_blob_data(ir_blob *b);
size_t ir_blob_bytes(const ir_blob *b);

/* ---------------------------------------------------------------- attributes */

typedef enum ir_attr_type {
    IR_ATTR_INT,
    IR_ATTR_FLOAT,
    IR_ATTR_STRING,
    IR_ATTR_INTS,
    IR_ATTR_FLOATS,
    IR_ATTR_STRINGS,
    IR_ATTR_TENSOR,
} ir_attr_type;

typedef struct ir_attr {
    const char *name;
    ir_attr_type type;
    int64_t i;
    float f;
    const char *s; /* STRING (NUL-terminated) */
    int n;         /* count of ints / floats / strings */
    int64_t *ints;
    float *floats;
    const char **strings;
    /* TENSOR */
    ir_dtype t_dtype;
    ir_shape t_shape;
    ir_blob *t_blob;
} ir_attr;

/* ---------------------------------------------------------------- values and nodes */

enum ir_value_flags {
    IR_VF_INPUT = 1u << 0,       /* a graph input (no data unless bound at run time) */
    IR_VF_OUTPUT = 1u << 1,      /* a graph output */
    IR_VF_INITIALIZER = 1u << 2, /* data came from the file's initializers */
    IR_VF_PARAM = 1u << 3,       /* trainable parameter (DESIGN.md "data inputs vs parameters") */
    IR_VF_DATA = 1u << 4,        /* a data input (--data, default the first graph input) */
    IR_VF_CONST = 1u << 5,       /* has data in blob (initializer or folded constant) */
    /* a data input that only the training loss reads (its target or labels, ir_build_training):
     * a fission slices it with the data, and the F-Tree treats it as a resident (rules.h) */
    IR_VF_LOSS = 1u << 6,
};

typedef struct ir_value {
    const char *name;
    ir_dtype dtype;
    ir_shape shape;
    int producer;   /* node index, -1 for inputs and constants */
    unsigned flags; /* ir_value_flags */
    ir_blob *blob;  /* constant data, NULL otherwise */
} ir_value;

/* The op kinds. ir-ops.def lists every op once; see ir_op_def below. */
typedef enum ir_op_kind {
#define IR_OP(name, domain) IR_OP_##name,
#include "ir-ops.def"
#undef IR_OP
    IR_OP_COUNT,
    IR_OP_OPAQUE = IR_OP_COUNT, /* unsupported op whose output shapes the file declares */
} ir_op_kind;

typedef struct ir_node {
    const char *name;    /* never NULL; generated when the file has none */
    const char *op_type; /* as in the file (kept for opaque nodes and export) */
    const char *domain;  /* "" for the ONNX domain */
    ir_op_kind op;
    uint32_t id; /* stable id, unique within a graph lineage (rewrites refer to it) */
    int n_in, n_out;
    int *in; /* value ids; -1 for an omitted optional input */
    int *out;
    int n_attrs;
    ir_attr *attrs;
} ir_node;

typedef struct ir_arena ir_arena;

typedef struct ir_graph {
    ir_value *values;
    int n_values, cap_values;
    ir_node *nodes; /* topological order */
    int n_nodes, cap_nodes;
    int *inputs; /* graph inputs without initializer, file order */
    int n_inputs, cap_inputs;
    int *outputs; /* graph outputs, file order */
    int n_outputs, cap_outputs;
    const char *name;
    const char *source; /* path it was read from, for messages */
    int64_t opset;      /* default-domain opset */
    /* The trainable parameters (IR_VF_PARAM) are exactly those the model's metadata lists
     * (IR_ONNX_TRAINABLE_KEY, written by scripts/export_for_training.py), not DESIGN.md's rule
     * for models without the list. */
    bool params_listed;
    uint32_t next_node_id;
    ir_arena *arena; /* strings, attributes, per-node arrays */
} ir_graph;

ir_graph *ir_graph_new(void);
void ir_graph_free(ir_graph *g); /* NULL-safe; drops blob references */
/* Copy of the structure (values, nodes, their ids and attribute structs), which the copy may
 * edit; names, attribute arrays and constant blobs, which no graph writes, are shared with g by
 * reference (ir-arena.c), so g may be freed first. */
ir_graph *ir_graph_clone(const ir_graph *g);

/* Arena-backed helpers: the returned memory lives as long as the graph. */
void *ir_graph_alloc(ir_graph *g, size_t bytes); /* zeroed, 16-byte aligned */
const char *ir_graph_strdup(ir_graph *g, const char *s);

/* Adds a value; name is copied. Returns its id, or -1 on out of memory. */
int ir_graph_add_value(ir_graph *g, const char *name, ir_dtype t, const ir_shape *s);
/* Adds a node at the end of g->nodes with copies of the given arrays (attrs are copied
 * shallowly: their strings/arrays must already live in g's arena or be static). Sets the
 * producer of each output. Returns the node index or -1. */
int ir_graph_add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                      int n_out, const int *out, int n_attrs, const ir_attr *attrs);
void ir_graph_add_input(ir_graph *g, int value);
void ir_graph_add_output(ir_graph *g, int value);
int ir_graph_find_value(const ir_graph *g, const char *name); /* -1 if absent (linear) */

/* Attribute lookup; the default is returned when absent. */
const ir_attr *ir_attr_find(const ir_node *n, const char *name);
int64_t ir_attr_int(const ir_node *n, const char *name, int64_t def);
float ir_attr_float(const ir_node *n, const char *name, float def);
const char *ir_attr_str(const ir_node *n, const char *name, const char *def);
/* Number of ints (and *out) or -1 when absent. */
int ir_attr_ints(const ir_node *n, const char *name, const int64_t **out);

static inline ir_value *ir_node_in(const ir_graph *g, const ir_node *n, int i) {
    return (i < n->n_in && n->in[i] >= 0) ? &g->values[n->in[i]] : NULL;
}
static inline ir_value *ir_node_out(const ir_graph *g, const ir_node *n, int i) {
    return (i < n->n_out && n->out[i] >= 0) ? &g->values[n->out[i]] : NULL;
}
static inline size_t ir_value_bytes(const ir_value *v) {
    return (size_t)ir_shape_numel(&v->shape) * ir_dtype_size(v->dtype);
}
static inline const void *ir_value_data(const ir_value *v) {
    return v->blob ? ir_blob_data(v->blob) : NULL;
}

/* Checks structure: value ids in range, each value produced once, topological order, shapes
 * consistent with a re-run of shape inference. Debug builds call it after every rewrite. */
ir_status ir_graph_validate(const ir_graph *g, ir_diag *d);

/* Re-orders g->nodes topologically, keeping the current order wherever it already is
 * topological (stable Kahn by current index). IR_ERR_INVALID naming a node on a cycle. */
ir_status ir_graph_toposort(ir_graph *g, ir_diag *d);

/* ---------------------------------------------------------------- the op table */

/* What a CPU kernel sees. Output buffers are allocated by the caller (the executor's counting
 * allocator or the folder); kernels never allocate. */
typedef struct ir_tensor {
    ir_dtype dtype;
    ir_shape shape;
    void *data; /* NULL for an omitted optional input */
} ir_tensor;

typedef struct ir_kernel_ctx {
    const ir_graph *graph;
    const ir_node *node;
    int n_in, n_out;
    const ir_tensor *in;
    ir_tensor *out;
    /* ir_node_workspace(graph, node) bytes, 64-byte aligned; the op's kernel itself sees its own
     * op_def->workspace bytes (ir_node_run keeps the rest for its 16-bit widening) */
    void *workspace;
    size_t workspace_bytes;
    /* Bit i: in[i] is a transposed operand (ir_value_view_of): its data is the base's, laid out
     * with in[i].shape's last two axes swapped. Only the executor sets it, and only for MatMul's
     * and Gemm's operands, whose kernels read such an input through BLAS's trans flags. */
    uint32_t in_transposed;
    /* out[0] already holds a sum the kernel adds its result to instead of overwriting it (BLAS's
     * beta = 1): the part of a fused FissionAccumulate written straight into the accumulate's
     * buffer (ir_graph_fused_parts). Only the executor sets it, and only for the producers
     * ir_fission_accumulate_fused names (MatMul, Gemm without C, ConvGradWeight, ReduceSum,
     * GatherGrad), whose kernels add in their store. */
    bool accumulate;
    uint64_t seed; /* for ops that draw random numbers (Dropout in training mode) */
    ir_diag *diag;
} ir_kernel_ctx;

typedef ir_status (*ir_kernel_fn)(const ir_kernel_ctx *k);

enum ir_op_flags {
    IR_OPF_MULTILINEAR = 1u << 0, /* linear in each input separately (PET) */
    IR_OPF_ELEMENTWISE = 1u << 1,
    IR_OPF_SHAPE_ONLY = 1u << 2,  /* output depends only on input shapes (Shape, Size) */
    IR_OPF_RANDOM = 1u << 3,      /* may draw random numbers: never constant-folded */
    IR_OPF_HOST_OUTPUT = 1u << 4, /* outputs live in host memory, not on the device (Store) */
    /* Output k overwrites input k, for every output k (optimizer updates: param, state ->
     * param', state', in place as PyTorch does them; FissionAssemble/FissionAccumulate writing a
     * part into a FissionBuffer). When input k is a resident (a graph input or a constant), or a
     * produced device value that is not a graph output, output k takes over its buffer: memory
     * accounting allocates nothing for it (ir_value_inplace_of), the kernel gets out[k].data ==
     * in[k].data, and a produced buffer lives until the last use of the last value of the chain
     * (schedule.h); otherwise output k is an ordinary allocation (kernels handle both). The
     * builder guarantees that nothing reads input k later. */
    IR_OPF_INPLACE = 1u << 5,
    /* Output 0 may be a view of input 0: the same bytes re-described, no buffer and no kernel
     * (Reshape, Flatten, Squeeze, Unsqueeze; Transpose when it is a transposed operand).
     * ir_value_view_of says when it is one. */
    IR_OPF_VIEW = 1u << 6,
    /* The kernel reads and writes float16 and bfloat16 itself: the element-wise ops (in float32
     * blocks, rounded once on the store) and the ops that only move or select elements. Without
     * it, ir_node_run widens a node's 16-bit float tensors to float32 for the kernel. */
    IR_OPF_FLOAT16 = 1u << 7,
};

struct ir_grad_ctx; /* ir-autodiff.h */

/* One dimension link of a node (MAGIS section 4.1, the edges of the dimension graph D(G)):
 * dimension in_dim of input in corresponds to dimension out_dim of output out (out_dim >= 0),
 * or to the node's reduce axis number -out_dim (out_dim < 0: -1 is its first reduce axis, -2 its
 * second; out is then 0 and ignored). A reduce axis is an index the op sums (or maxes, ...)
 * over: MatMul's k, a convolution's input channels and kernel window, a weight gradient's batch.
 * Links exist only where splitting that dimension into n equal parts splits the computation:
 * output part i needs only input part i (out_dim >= 0), or the n partial results combine into
 * the whole (reduce axes). So a broadcast (size-1) input dim, a convolution's spatial dims
 * with a halo, or a Reshape dim that merges or splits dims get no link. */
typedef struct ir_dimlink {
    int8_t in, in_dim;
    int8_t out, out_dim;
    uint8_t flags; /* ir_dimlink_flags */
} ir_dimlink;

enum ir_dimlink_flags {
    /* The reduce axis is a sum: outputs computed on the n parts add up to the whole (MatMul's
     * k, a weight gradient's batch). Max, mean, normalizing (Softmax) axes are not: a fission
     * along them is refused. */
    IR_DIMLINK_SUM = 1u << 0,
    /* The link names the inner factor of a merged dim on the input side (in_dim) or on the
     * output side (out_dim), not the dim itself: a Reshape of [S, B, E] to [S*B, E] links B to
     * the inner factor of S*B (IR_DIMLINK_OUT_INNER), and [S*B, E] back to [S, B, E] the inner
     * factor to B (IR_DIMLINK_IN_INNER). n parts of B are then n strided sets of S*B's rows,
     * which every op that keeps S*B whole (a row-wise Gemm) computes apart; the dimension graph
     * gives each dim a second vertex for its inner factor (rules.h). */
    IR_DIMLINK_IN_INNER = 1u << 1,
    IR_DIMLINK_OUT_INNER = 1u << 2,
};

/* True when node n draws random numbers when it runs: an IR_OPF_RANDOM op, except a Dropout
 * that is provably an identity (training_mode absent or constant false, or a constant ratio of
 * 0), which draws nothing and may be split, recomputed or folded like any deterministic op. */
bool ir_node_draws_random(const ir_graph *g, const ir_node *n);

/* Most links a node may have (the dims callback is given room for this many). */
#define IR_MAX_DIMLINKS 256

typedef struct ir_op_def {
    const char *name;   /* ONNX op_type */
    const char *domain; /* "" or "magpie" */
    int min_in, max_in, min_out, max_out;
    unsigned flags;
    /* Sets dtype and shape of every output from the inputs' (and, for shape-like inputs such as
     * Reshape's, their constant data: an input needed as data but not constant is
     * IR_ERR_UNSUPPORTED naming it). Messages name the node; the caller adds the file. */
    ir_status (*infer)(ir_graph *g, ir_node *n, ir_diag *d);
    /* Floating-point operations, a multiply-add counting 2. NULL means 0. */
    double (*flops)(const ir_graph *g, const ir_node *n);
    /* Bytes of scratch the CPU kernel needs while it runs. NULL means 0. */
    size_t (*workspace)(const ir_graph *g, const ir_node *n);
    ir_kernel_fn kernel; /* CPU kernel; NULL only for ops that cannot run */
    /* Emits the backward ops of one node (ir-autodiff.h). NULL: not differentiable. */
    ir_status (*grad)(struct ir_grad_ctx *c);
    /* Writes the node's dimension links (ir_dimlink above; at most IR_MAX_DIMLINKS) into out
     * and returns how many, from the node's attributes and its inputs' and outputs' shapes.
     * NULL: no links (the op cuts every dimension, as for ops of unknown semantics). */
    int (*dims)(const ir_graph *g, const ir_node *n, ir_dimlink *out);
    /* Bytes the kernel moves through device memory, for the roofline (prof-analytic.c). NULL:
     * every present input and output plus the workspace (ir_node_bytes). Ops that touch only
     * part of a tensor they take (FissionSlice, FissionAssemble) count what they touch. */
    double (*bytes)(const ir_graph *g, const ir_node *n);
} ir_op_def;

const ir_op_def *ir_op_get(ir_op_kind k); /* NULL for IR_OP_OPAQUE */
/* Looks up an op by domain ("" or "ai.onnx" for ONNX) and op_type; IR_OP_OPAQUE if unknown. */
ir_op_kind ir_op_find(const char *domain, const char *op_type);
const char *ir_op_name(ir_op_kind k);
/* True when value v lives in host memory: an output of an IR_OPF_HOST_OUTPUT op (Store). Memory
 * accounting counts such values as host bytes, never as device bytes (ops-swap.c). */
bool ir_value_on_host(const ir_graph *g, int v);

/* The value whose buffer value v takes over as output k of an IR_OPF_INPLACE node (its input k:
 * a resident, i.e. a graph input or constant, or a produced device value that is not a graph
 * output), or -1 when v is an ordinary allocation (ops-train.c). Following it repeatedly from v
 * reaches the chain's root, the value that owns the buffer. */
int ir_value_inplace_of(const ir_graph *g, int v);

/* Views (DESIGN.md, "Views"; ir-alias.c). Value v is a view of its base b, and owns no bytes,
 * when its producer is
 *  - a Reshape, Flatten, Squeeze or Unsqueeze (output 0) of a device value b (every device
 *    buffer is contiguous: a transposed operand, the one view that is not, is read only by
 *    MatMul and Gemm), or
 *  - a Transpose of a device value b that swaps the last two axes, when v is no graph output
 *    and every reader of v reads it as operand A or B of a MatMul or a Gemm: a transposed
 *    operand, which those kernels read through BLAS's trans flags (ir_kernel_ctx.in_transposed).
 * A device value is a resident or a produced value outside host memory. A view of a view is a
 * view of the same buffer, so a view of a resident is resident; its base's buffer lives until
 * the last read of any view of it, and a view that is a graph output keeps it to the end.
 * Returns b, or -1 when v owns its bytes. O(1), but O(nodes) for a Transpose output (its
 * readers are searched): bulk callers use ir_graph_buffer_roots. */
int ir_value_view_of(const ir_graph *g, int v);
/* The value whose buffer v uses directly: ir_value_inplace_of(g, v) or ir_value_view_of(g, v);
 * -1 when v owns its buffer. */
int ir_value_alias_of(const ir_graph *g, int v);
/* root[v] for every value: v itself when it owns its buffer, otherwise the value that owns the
 * buffer v lives in, reached by following ir_value_alias_of (in-place chains and views). Every
 * memory counter gives a buffer's bytes to its root, and a read of any value with that root is a
 * read of the buffer. O(nodes + values). */
void ir_graph_buffer_roots(const ir_graph *g, int *root);
/* owner[v] for every value: the node that overwrites the bytes v reads in place, or -1. Those are
 * input k of an IR_OPF_INPLACE node that writes output k over it (taken_only: only where
 * ir_value_inplace_of says the output takes over the buffer), and every view of such an input,
 * transitively: a reader of any of them needs the old bytes, so it must run before the writer
 * (the write-after-read edges of ir_graph_toposort and sched_order_valid). O(nodes + values);
 * false when out of memory. */
bool ir_graph_overwriters(const ir_graph *g, bool taken_only, int *owner);
/* True when input i of n only orders n after its producer and its data is never read
 * (FissionSlice's buffers, ops-fission.c): an in-place writer of that value need not wait for
 * such a reader (no write-after-read edge), though the reader still keeps the buffer live. */
bool ir_input_order_only(const ir_node *n, int i);
/* True for a FissionBuffer with `fill` 0: a FissionAccumulate chain's buffer, which part 0 writes
 * whole before anything reads it, so a device allocates it without a fill (ops-fission.c). */
bool ir_fission_buffer_unfilled(const ir_node *n);
/* True for a FissionAccumulate of part 0 (`index` 0) whose buffer input is an unfilled
 * FissionBuffer's output: it writes the part over the buffer instead of adding it. */
bool ir_fission_accumulate_overwrites(const ir_graph *g, const ir_node *n);
/* True for a FissionAccumulate with `fused` 1 whose part is output 0 of a Gemm without C, a
 * MatMul, a ConvGradWeight, a ReduceSum or a GatherGrad, and no graph output: on a device the
 * producer adds into the buffer in its epilogue (beta = 1; beta = 0 where it overwrites), so the
 * accumulate runs no kernel of its own (ops-fission.c). The fission sets `fused` only where the
 * accumulate is the part's one reader. O(1). */
bool ir_fission_accumulate_fused(const ir_graph *g, const ir_node *n);
/* The fused accumulates that an order carries out as ir_fission_accumulate_fused says a device
 * does: for each such FissionAccumulate A(b, p[, first]), its producer P writes the part p
 * straight into A's buffer (adding to it, BLAS beta = 1; overwriting it, beta = 0, where A
 * overwrites), so p has no buffer of its own and A runs no kernel. That holds when
 *  - A takes over b (root[A's output] == root[b]), a produced device buffer; p owns its buffer
 *    (root[p] == p), A is p's only reader, and P reads nothing in b's buffer;
 *  - in the order (order and pos given: the steps and node -> step): P runs after b's producer
 *    and after A's ordering input (the part's first slice), and no node between P and A reads
 *    b's buffer. The materialized graph runs a fission's parts so; a part computed from
 *    generators alone that the order runs before its first slice keeps a buffer of its own, in
 *    every part alike (rw_fission_materialize keeps each part's order).
 * Each such part gets root[p] = root[b] (root holds ir_graph_buffer_roots on entry), and into (may
 * be NULL; n_values entries) A's node index for it, -1 for every other value. With order NULL the
 * order conditions are taken as met (the schedulers' view, sfg_roots). The executor, the
 * simulator (sched_memory_compute) and `emit --torch` call it with the order they run, so they
 * agree on every byte. O(nodes + values + the steps between each P and its A); false when out of
 * memory (root and into are then as ir_graph_buffer_roots left them, into all -1). */
bool ir_graph_fused_parts(const ir_graph *g, const int *order, const int *pos, int *root,
                          int *into);

/* Runs the op's shape inference / counts for one node (dispatching on n->op). */
ir_status ir_node_infer(ir_graph *g, ir_node *n, ir_diag *d);
double ir_node_flops(const ir_graph *g, const ir_node *n);
/* The node's dimension links (0 when its op has none); out has IR_MAX_DIMLINKS entries. */
int ir_node_dims(const ir_graph *g, const ir_node *n, ir_dimlink *out);
/* Bytes of scratch the node needs while it runs: the op's workspace callback, plus, for a node
 * ir_node_run widens, a float32 copy of each 16-bit float input and output (each part starts
 * 64-byte aligned). The simulator and the executor both count exactly this. */
size_t ir_node_workspace(const ir_graph *g, const ir_node *n);
/* The widening part of ir_node_workspace: 0 when the node's op has IR_OPF_FLOAT16 or the node has
 * no float16/bfloat16 input or output. */
size_t ir_node_widen_bytes(const ir_graph *g, const ir_node *n);
/* Runs k->node's CPU kernel; every caller (executor, constant folding, profiler) goes through it.
 * k->workspace holds ir_node_workspace bytes. A node whose op lacks IR_OPF_FLOAT16 and that has
 * float16/bfloat16 inputs or outputs runs its kernel's float32 form: those inputs are widened
 * into the workspace's tail, the kernel writes float32 there, and each 16-bit output is rounded
 * once on the store, as onnxruntime's CPU kernels compute 16-bit floats. Integer and float32
 * tensors (indices, shapes, scales) are passed as they are. */
ir_status ir_node_run(const ir_kernel_ctx *k);
/* Bytes the node moves (the op's bytes callback, else inputs + outputs + workspace). */
double ir_node_bytes(const ir_graph *g, const ir_node *n);

/* ---------------------------------------------------------------- ONNX import / export */

typedef struct ir_import_opts {
    /* --shape NAME=D0,D1,...: either a graph input name or a symbolic dim name (then one
     * value). n_shapes entries. */
    int n_shapes;
    const char *const *shape_names;
    const ir_shape *shape_values;
    /* --data NAME[,NAME]: data inputs; when 0, the first graph input. */
    int n_data;
    const char *const *data_names;
    /* --frozen REGEX (POSIX extended), parameters matching it are not trainable. May be NULL. */
    const char *frozen_regex;
    /* Allow unsupported ops whose output shapes are declared (inspect, schedule). */
    bool allow_opaque;
    /* Skip constant folding (tests). */
    bool no_fold;
    /* --fuse-decomposed: LayerNorm and exact GELU that the exporter wrote as elementary ops
     * become LayerNormalization and Gelu nodes, and Dropouts that draw nothing are bypassed
     * (ir_fuse_decomposed), as the module computes them. */
    bool fuse_decomposed;
    /* Graph inputs given with their values at import: each becomes a constant (not a graph
     * input), so that shape inference can read it (Reshape's shape, Slice's starts, Resize's
     * scales fed as inputs, as ONNX's node tests do). Dtype and shape must match the file's. */
    int n_consts;
    const char *const *const_names;
    const ir_dtype *const_dtypes;
    const ir_shape *const_shapes;
    ir_blob *const *const_blobs;
    /* Shapes of the values given for graph inputs at run time (`run -i FILE.npy`): each binds
     * the symbolic and unknown dimensions of its input to the file's sizes, so a model exported
     * with a dynamic batch runs without --shape. input_shape_names[i] names the input, or is NULL
     * for the next data input in graph input order (a positional -i); input_shape_labels[i] (the
     * file) names it in messages. IR_ERR_SHAPE naming both sides when a symbolic dimension gets
     * two sizes, when --shape disagrees with a file, or when a file's rank is not its input's.
     * A name that is not a graph input is left to the caller. */
    int n_input_shapes;
    const char *const *input_shape_names;
    const ir_shape *input_shape_values;
    const char *const *input_shape_labels;
} ir_import_opts;

/* The metadata_props key whose value lists the trainable parameters, one name per line: the
 * module's parameters with requires_grad, as magpie's PyTorch export helper writes them. */
#define IR_ONNX_TRAINABLE_KEY "magpie.trainable_parameters"

/* Reads an ONNX model: parses, resolves symbolic dims, sorts, checks op support (listing every
 * unsupported op type at once), classifies data/params, infers shapes and folds constants.
 * On failure returns NULL with a one-line message in d naming the file, node and cause, and
 * *st (if non-NULL) set to the status. */
ir_graph *ir_onnx_load(const char *path, const ir_import_opts *opts, ir_status *st, ir_diag *d);
ir_graph *ir_onnx_load_buffer(const void *buf, size_t len, const char *name,
                              const ir_import_opts *opts, ir_status *st, ir_diag *d);
/* Writes g as an ONNX model (opset g->opset, magpie-domain ops in domain "magpie") atomically
 * (temporary file + rename): on failure no file is left at path. */
ir_status ir_onnx_save(const ir_graph *g, const char *path, ir_diag *d);
/* How ir_onnx_save_with stores the weights. */
typedef struct ir_onnx_save_opts {
    /* Initializers of 1 KiB or more go to PATH.data (ONNX external data) instead of the model
     * file. Export also does this on its own when the model file would pass max_file_bytes. */
    bool external_data;
    /* 0: protobuf's 2 GB limit (what ir_onnx_save uses). Never raised above it. */
    size_t max_file_bytes;
} ir_onnx_save_opts;
/* ir_onnx_save with options. Neither file is left behind on failure; a model that is still over
 * the limit without its large initializers is refused (IR_ERR_UNSUPPORTED). */
ir_status ir_onnx_save_with(const ir_graph *g, const char *path, const ir_onnx_save_opts *o,
                            ir_diag *d);

/* Constant folding (called by the importer): evaluates every node whose inputs are all
 * constants that are not trainable parameters, and removes nodes whose results are unused. */
ir_status ir_fold_constants(ir_graph *g, ir_diag *d);
/* Folds node idx like ir_fold_constants would, except that its inputs may also be trainable
 * parameters with data (an inference graph's weights, which a rewrite re-lays out: PET's
 * pre-processing, paper §6.3), and that it leaves graph outputs, in-place and host-output ops
 * computed. *folded says whether it did; the node stays, detached, until ir_graph_prune. */
ir_status ir_fold_weights_node(ir_graph *g, int idx, bool *folded, ir_diag *d);
/* Would ir_fold_weights_node fold node idx (its kernel aside)? */
bool ir_can_fold_weights_node(const ir_graph *g, int idx);
/* Removes nodes none of whose outputs reach a graph output, and unused constants. */
void ir_graph_prune(ir_graph *g);
/* Fuses the LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add over the last
 * axis) and exact GELU (Div by sqrt(2) or Mul by its inverse, Erf, Add 1, Mul, Mul 0.5) that
 * exporters below opsets 17 and 20 decompose into one LayerNormalization or Gelu node each, where
 * the pattern computes exactly that function and nothing else reads its intermediates, and
 * bypasses Dropouts that draw nothing (ratio 0 or not training; mask unread), as PyTorch computes
 * them (ir-fuse.c). counts (may be NULL) gets what was done. The graph keeps its opset: a fused
 * inference graph written back is magpie's, not valid standard ONNX below opset 17
 * (LayerNormalization) or 20 (Gelu). */
typedef struct ir_fuse_counts {
    int layernorm, gelu, dropout;
} ir_fuse_counts;
ir_status ir_fuse_decomposed(ir_graph *g, ir_fuse_counts *counts, ir_diag *d);

/* ---------------------------------------------------------------- float64 reference */

/* A new graph equal to g except that it computes in float64 (ir-promote.c): every float value
 * (float32, float16, bfloat16) becomes float64, graph inputs, constants (data converted),
 * intermediates and outputs, and so do the attributes that make an op produce a float dtype
 * (Cast's to, LayerNormalization's stash_type, FissionBuffer's dtype, Constant's and
 * ConstantOfShape's value). Integers and bools stay. Node ids, names and order are g's, so values
 * and nodes correspond one to one by index. Shape inference is re-run: a node whose output would
 * stay narrower than float64 is IR_ERR_UNSUPPORTED naming it. Data bound to the inputs at run
 * time must then be float64. NULL on failure with *st (may be NULL) and d set, like
 * ir_onnx_load. */
ir_graph *ir_graph_to_f64(const ir_graph *g, ir_status *st, ir_diag *d);

/* ---------------------------------------------------------------- training graphs */

typedef enum ir_loss_kind {
    IR_LOSS_SUM = 0, /* sum of every element of the first output */
    IR_LOSS_MSE,     /* mean squared error against a target (mean over all elements) */
    IR_LOSS_CE,      /* softmax cross-entropy, classes on the last axis, mean over positions */
} ir_loss_kind;

typedef enum ir_optimizer_kind {
    IR_OPTIM_NONE = 0,
    IR_OPTIM_SGD,
    IR_OPTIM_MOMENTUM, /* momentum 0.9, dampening 0 */
    IR_OPTIM_ADAM,     /* betas (0.9, 0.999), eps 1e-8, step 1 */
} ir_optimizer_kind;

typedef struct ir_train_opts {
    ir_loss_kind loss;
    /* MSE: the graph input holding the target; NULL or absent adds an input "target" shaped
     * like the first output. CE adds an int64 input "labels" (first output's shape without its
     * last axis). */
    const char *target;
    ir_optimizer_kind optimizer;
    double lr; /* 0 means the default, 0.01 */
} ir_train_opts;

/* Builds the training graph of fwd (which is not modified): the forward in fwd's order, the
 * loss, the backward in reverse forward order (PyTorch autograd's), then the optimizer
 * updates, so g->nodes is the eager order of DESIGN.md. Gradients flow to the IR_VF_PARAM
 * values. Outputs: "loss" (float scalar), then per parameter "<name>.grad" without an
 * optimizer, or "<name>.new" and its state ("<name>.momentum_buffer.new", "<name>.exp_avg.new",
 * "<name>.exp_avg_sq.new") with one. IR_ERR_UNSUPPORTED naming the node for an op without a
 * gradient on the path to a parameter. NULL on failure with *st (may be NULL) and d set. */
ir_graph *ir_build_training(const ir_graph *fwd, const ir_train_opts *o, ir_status *st, ir_diag *d);
/* Does g have ir_build_training's outputs ("loss", then "<param>.grad" or "<param>.new"), also
 * after an ONNX round trip? Its parameters are then what a training step updates. */
bool ir_graph_is_training(const ir_graph *g);

/* What the memory of a training graph (from ir_build_training) is made of, in bytes. Nodes up to
 * the one producing the loss (output 0) are the forward; IR_OPF_INPLACE nodes are updates. */
typedef struct ir_train_summary {
    int n_params;
    size_t param_bytes;      /* trainable parameters (IR_VF_PARAM) */
    size_t grad_bytes;       /* their final gradients, one per parameter */
    size_t state_bytes;      /* optimizer state tensors */
    size_t activation_bytes; /* values the forward and the loss compute (views own none) */
    size_t backward_bytes;   /* other values the backward computes (gradients of activations;
                              * views own none) */
    int n_forward_nodes, n_backward_nodes, n_update_nodes;
} ir_train_summary;
void ir_train_summarize(const ir_graph *tg, ir_train_summary *s);

/* ---------------------------------------------------------------- .npy I/O */

/* Reads a NumPy .npy file (version 1-3, little-endian, C order, dtypes above). *blob receives
 * the data; on error a message naming the file and the cause. */
ir_status ir_npy_read(const char *path, ir_dtype *dtype, ir_shape *shape, ir_blob **blob,
                      ir_diag *d);
/* Writes atomically (temporary file + rename). */
ir_status ir_npy_write(const char *path, ir_dtype dtype, const ir_shape *shape, const void *data,
                       ir_diag *d);

/* ---------------------------------------------------------------- misc */

/* Deterministic 64-bit hash (for seeded weights, fingerprints). */
uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed);
/* Structural fingerprint of g (ir-hash.c), Weisfeiler-Lehman style over both directions of
 * the edges: op kinds, attribute values, output dtypes and shapes, residents by name, dtype and
 * shape, and who produces and reads what; free of node names, node ids and node order. 0 only
 * when out of memory (or by a 2^-64 chance). */
uint64_t ir_graph_hash(const ir_graph *g);

/* Per-node hashes of a graph, by stable node id, for incremental fingerprints (ir-hash.c). */
typedef struct ir_hash_memo {
    uint64_t *x, *z; /* cap + 1 entries; both 0 for ids not in the graph */
    uint32_t cap;    /* every node id of the graph is below it */
    uint64_t sum;    /* the sum of z over the nodes */
} ir_hash_memo;
/* ir_graph_hash(g), keeping the per-node hashes in *m (malloc'd; ir_hash_memo_free it). 0 and
 * *m empty when out of memory. */
uint64_t ir_graph_hash_memo(const ir_graph *g, ir_hash_memo *m);
/* ir_graph_hash(g) from the memo pm of a graph pg that g was made from by a rewrite, with the
 * per-node hashes of g into *out. touched[0..n_touched) must hold the id of every node that the
 * rewrite added, removed, rewired or changed in any way (op, attributes, output shapes or flags):
 * the ids sched_incremental takes. Nodes new to g are found by their ids even when not listed.
 * Recomputes only what the rewrite can have changed (see ir-hash.c); the result equals the full
 * hash whenever the contract on touched holds. pg may be NULL when no touched node had inputs in
 * pg that it no longer reads. 0 and *out empty when out of memory. */
uint64_t ir_graph_hash_update(const ir_graph *g, const ir_graph *pg, const ir_hash_memo *pm,
                              const uint32_t *touched, int n_touched, ir_hash_memo *out);
void ir_hash_memo_free(ir_hash_memo *m); /* NULL-safe, idempotent */
/* Seconds on the monotonic clock, for durations and deadlines. */
double ir_now_seconds(void);
/* qsort's comparator for doubles, ascending (medians of timings). */
int ir_cmp_double(const void *a, const void *b);

static inline uint64_t ir_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

#ifdef __cplusplus
}
#endif
#endif
