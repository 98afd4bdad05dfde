/* pet-gen-impl.h - private declarations shared by PET's splitting and mutation generator
 * (pet-split.c, pet-gen.c, pet-gen-ops.c, pet-gen-class.c, pet-gen-opt.c). The contract is
 * pet-gen.h; nothing here is.
 *
 * The enumeration state of Algorithm 1 is a stack of generator ops (gen_op) over tensors
 * (gen_tensor): the program's inputs first, then each op's outputs, contiguous. Pushing an op
 * appends its outputs; popping removes them, so a state is a prefix and backtracking costs
 * nothing. Tensors and ops carry canonical hashes (name-free, order-free for the set of ops) so
 * that states and ops can be compared without materializing graphs.
 *
 * Files: pet-gen-setup.c (what is learnt from the program), pet-gen-layout.c (layout
 * candidates), pet-gen-ops.c (shapes, hashes), pet-gen-mat.c (states as graphs), pet-gen.c (the
 * search), pet-gen-opt.c (rounds, subsets, top-K), pet-gen-class.c (labels, hash, cost). */
#ifndef MAGPIE_PET_GEN_IMPL_H
#define MAGPIE_PET_GEN_IMPL_H

#include "pet-gen.h"

#include <stdlib.h>
#include <string.h>

#define GEN_MAX_IN 32   /* program inputs (and outputs) the generator takes */
#define GEN_MAX_DEPTH 6 /* ops per enumeration */
#define GEN_MAX_OUTS 4  /* outputs of one op (Split) */
#define GEN_MAX_T (GEN_MAX_IN + GEN_MAX_DEPTH * GEN_MAX_OUTS)
#define GEN_MAX_CAT 4  /* Concat operands */
#define GEN_MAX_BIAS 4 /* biases a weight carries (merged weights concatenate theirs) */
#define GEN_MAX_RANK 6 /* tensors the generator builds stay at most this rank */
#define GEN_MAX_FACTORS 8
#define GEN_MAX_LENS 24
#define GEN_MAX_CONV_ATTRS 24
#define GEN_MAX_GEMM_ATTRS 8
#define GEN_MAX_PADS 16

enum gen_kind {
    GK_CONV,
    GK_GEMM,
    GK_MATMUL,
    GK_ADD,
    GK_MUL,
    GK_CONCAT,
    GK_SPLIT,
    GK_PAD,
    GK_SLICE,
    GK_LAYOUT,
    GK_COUNT
};

/* A layout op: the input's elements, in row-major order, split into atoms (the input shape
 * refined: each input dim is a product of consecutive atoms), permuted, and read row-major as
 * the output shape (each output dim a product of consecutive permuted atoms). Materialized as
 * Reshape(atoms) -> Transpose(perm) -> Reshape(out), each step left out when it changes
 * nothing. Canonical form (gen_layout_canon): no atom of length 1, no two atoms adjacent in
 * both the input and the permutation. */
typedef struct gen_layout {
    int n_atoms;
    int64_t atom[IR_MAX_RANK];
    int8_t perm[IR_MAX_RANK]; /* output position i holds atom perm[i] */
    ir_shape out;
} gen_layout;

/* All int64_t, so that memcmp and hashing see no padding bytes. */
typedef struct gen_conv_attr {
    int64_t S; /* spatial dims */
    int64_t strides[3], dil[3], pads[6], group;
} gen_conv_attr;

typedef struct gen_gemm_attr { /* no padding bytes either */
    float alpha, beta;
    int32_t ta, tb;
} gen_gemm_attr;

typedef struct gen_op {
    uint8_t kind; /* gen_kind */
    uint8_t n_in, n_out;
    int8_t in[GEN_MAX_CAT]; /* operand tensors */
    int8_t out0;            /* first output tensor */
    int8_t n_bias;          /* GK_CONV/GK_GEMM: the biases it adds (program input indices) */
    int8_t bias[GEN_MAX_BIAS];
    int attr;                      /* GK_CONV/GK_GEMM: attribute index; GK_CONCAT/SPLIT/SLICE:
                                    * the axis */
    int64_t sizes[GEN_MAX_OUTS];   /* GK_SPLIT: part lengths; GK_SLICE: start, end */
    int64_t pads[2 * IR_MAX_RANK]; /* GK_PAD: begins then ends */
    gen_layout lay;                /* GK_LAYOUT */
    uint64_t h;                    /* canonical hash */
} gen_op;

typedef struct gen_tensor {
    ir_shape shape;
    ir_dtype dtype;
    int8_t op;        /* producing op, -1 for a program input */
    int8_t input;     /* program input index, -1 for op outputs */
    int8_t oidx;      /* output index of its op */
    uint8_t weight;   /* computed from weights and literals only (pre-computable) */
    uint8_t layout;   /* produced by a layout op */
    int8_t bias_axis; /* the axis of its bias companion (output channels), -1 when none */
    int8_t n_bias;
    int8_t bias[GEN_MAX_BIAS]; /* companion biases, program input indices, in axis order */
    int uses;                  /* readers in the current state (biases: convs adding it) */
    uint64_t h;
    uint8_t deg[GEN_MAX_IN]; /* degree in each program input */
    uint8_t tdeg;            /* total degree */
} gen_tensor;

/* A set of 64-bit keys (open addressing; 0 is stored out of line). */
typedef struct gen_set {
    uint64_t *keys;
    size_t cap, n;
    bool has_zero;
} gen_set;
/* Inserts k; true when it was new. false also when out of memory (*oom set). */
bool gen_set_add(gen_set *s, uint64_t k, bool *oom);
bool gen_set_has(const gen_set *s, uint64_t k);
void gen_set_clear(gen_set *s); /* keeps the capacity */
void gen_set_free(gen_set *s);

/* Layout candidates of one shape (cached per shape). */
typedef struct gen_lay_list {
    uint64_t key;
    int n;
    gen_layout *items;
} gen_lay_list;

typedef struct gen_ctx {
    const ir_graph *prog;
    pet_gen_opts o;
    /* the program */
    int n_in;
    int in_val[GEN_MAX_IN]; /* value ids in prog */
    uint8_t in_weight[GEN_MAX_IN], in_bias[GEN_MAX_IN], in_literal[GEN_MAX_IN];
    int8_t in_bias_of[GEN_MAX_IN];   /* a weight's bias input, -1 */
    int8_t in_bias_axis[GEN_MAX_IN]; /* the weight's output-channel axis */
    int n_out;
    int out_val[GEN_MAX_IN];
    uint8_t out_deg[GEN_MAX_IN][GEN_MAX_IN];
    uint8_t max_deg[GEN_MAX_IN];
    uint8_t max_tdeg; /* the outputs' largest total degree */
    int64_t max_elems;
    int n_f;
    int64_t f[GEN_MAX_FACTORS];
    int n_len;
    int64_t len[GEN_MAX_LENS];
    int n_conv;
    gen_conv_attr conv[GEN_MAX_CONV_ATTRS];
    int n_gemm;
    gen_gemm_attr gemm[GEN_MAX_GEMM_ATTRS];
    int n_pads;
    int pad_rank[GEN_MAX_PADS];
    uint8_t pad_weight[GEN_MAX_PADS]; /* a kernel padding: applies to weights only */
    int64_t pads[GEN_MAX_PADS][2 * IR_MAX_RANK];
    int cat_max;
    int maxdec;
    uint64_t orig_hash;
    /* the state */
    gen_tensor t[GEN_MAX_T];
    int n_t;
    gen_op ops[GEN_MAX_DEPTH];
    int n_ops;
    int dangling;    /* tensors waiting for a reader: unused inputs and unread op outputs,
                      * biases aside */
    int unused_bias; /* bias inputs no conv/gemm adds yet */
    uint64_t prog_h;
    /* bookkeeping */
    gen_set visited, emitted_keys, emitted;
    gen_lay_list *lay_cache;
    int n_lay_cache, cap_lay_cache;
    ir_graph *scratch; /* shape inference of single ops */
    int serial;
    pet_mutant_list *out;
    pet_gen_stats *st;
    ir_status err; /* a failure that stops the enumeration (out of memory) */
    ir_diag *diag;
    bool stop;
} gen_ctx;

/* ---------------------------------------------------------------- pet-gen-setup.c */

/* Fills the defaults of o (pet-gen.h). */
void gen_opts_defaults(pet_gen_opts *o);
/* Sets c up for prog: inputs, outputs, degrees, attribute sets, the initial state. Messages
 * into d. gen_fini releases it (also after a failure). */
ir_status gen_init(gen_ctx *c, const ir_graph *prog, const pet_gen_opts *o, ir_diag *d);
void gen_fini(gen_ctx *c);

/* ---------------------------------------------------------------- pet-gen-layout.c */

/* The layout candidates of shape s (cached); NULL when out of memory. */
const gen_lay_list *gen_layouts(gen_ctx *c, const ir_shape *s);
/* Canonical form of l for input shape in; false when it is the identity (nothing moves and
 * the shape stays). */
bool gen_layout_canon(gen_layout *l, const ir_shape *in);
uint64_t gen_layout_hash(const gen_layout *l);

/* ---------------------------------------------------------------- pet-gen-ops.c */

/* Output shapes of op (its operands are c->t[op->in[i]]) into out[]; false when invalid. */
bool gen_op_shapes(gen_ctx *c, const gen_op *op, ir_shape *out);
/* The canonical hash of op (kind, attributes, operand hashes, biases). */
uint64_t gen_op_hash(const gen_ctx *c, const gen_op *op);

/* ---------------------------------------------------------------- pet-gen-mat.c */

/* Builds the state's program as a standalone graph whose graph outputs are the tensors
 * assign[0..n_out) (the original's output names). NULL when out of memory. */
ir_graph *gen_materialize(gen_ctx *c, const int *assign);

/* ---------------------------------------------------------------- pet-split.c */

/* The standalone program of nodes[0..n) (ascending indices) of g: shared by
 * pet_subprog_extract and the subsets of pet_gen_optimize. Inputs are the float values the
 * nodes read and do not produce, in first-use order; weight[v] (may be NULL) != 0 marks values
 * of g that become IR_VF_PARAM inputs besides g's own parameters and initializers; outputs are
 * the values read by other nodes of g or graph outputs. */
ir_graph *gen_extract(const ir_graph *g, const int *nodes, int n, const unsigned char *weight,
                      ir_status *st, ir_diag *d);
/* Copies node n of src into dst with inputs in[] and outputs out[] (value ids of dst) and its
 * attributes deep-copied into dst's arena. Index of the new node, -1 when out of memory. */
int gen_copy_node(ir_graph *dst, const ir_node *n, const char *name, const int *in, const int *out);
/* Per value of g: 1 when it is a weight (a parameter or initializer, a float literal, or
 * computed only from those). malloc'd; NULL when out of memory. */
unsigned char *gen_weight_values(const ir_graph *g);

/* ---------------------------------------------------------------- pet-gen.c */

/* Runs Algorithm 1 on prog (pet_gen_mutants without the original's cost), appending to out and
 * adding to out->stats. */
ir_status gen_enumerate(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                        ir_diag *d);
/* Appends m (taking over its graph) to l; false when out of memory (the graph is freed). */
bool gen_list_push(pet_mutant_list *l, const pet_mutant *m);

#endif
