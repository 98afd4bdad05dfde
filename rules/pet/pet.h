/* pet.h - PET's verifier (PET paper §5): prime-field kernels, box propagation, and the randomized
 * box tests that find where a mutant of a multilinear tensor program (MLTP) equals the original.
 *
 * A program is an ir_graph whose nodes are all multilinear (or linear data movement): Conv,
 * ConvTranspose, MatMul, Gemm, Add, Sub, Mul, Sum, Neg, Identity, AveragePool,
 * GlobalAveragePool, ReduceSum, ReduceMean, CumSum, Transpose, Reshape, Flatten, Squeeze,
 * Unsqueeze, Concat, Split, Slice, Pad (constant mode), Expand, Tile. Its variables are its
 * graph inputs and its float initializers (IR_VF_INITIALIZER or IR_VF_PARAM), matched between
 * original and mutant by name; other float constants are literals (their exact value in Z_p);
 * integer constants are only op parameters (shapes, axes, pads). Original and mutant have the
 * same outputs (names and shapes); the mutant reads no variable the original lacks.
 *
 * Affine parts. Theorems 1 and 2 are about multilinear programs, so the affine parts are split
 * off before verification: a Conv/ConvTranspose bias (input 2), Gemm's C (input 2), and a Pad
 * constant value are evaluated as absent / zero, i.e. the verifier checks each program's
 * multilinear part (the program with every bias and pad constant set to 0). That part is what a
 * mutant rewrites; the affine remainder of a program (bias added to an output channel, constant
 * in a padded border) is not tested here: it is the caller's contract that both programs add the
 * same biases at the same outputs (PET moves them into the surrounding program, §6.1). Each
 * dropped term is counted in pet_prog.affine_dropped and pet_result.affine_dropped.
 *
 * Verification (pet_verify), the paper's three steps minus the corrections:
 *  1. box propagation: every value of both programs gets splitting points per dimension, from
 *     its inputs' points and the op (pet-box.c); the boxes of a value are the cells of the grid
 *     they cut. Within one box every element has the same summation structure with index maps
 *     affine in the position (Theorem 1's premise), which is why, for example, a reshape that
 *     merges dims (a, b > 1) splits at every row start i*b: the map j -> (j / b, j % b) is only
 *     affine within a row;
 *  2. for every pair of overlapping boxes of original and mutant, i.e. every cell of the grid cut
 *     by both programs' points, the two outputs are compared at the cell's first corner v0 and at
 *     v0 + e_j for every dim j where the cell is at least 2 wide (Theorem 1), for t random input
 *     sets over Z_p, p = 2^31 - 1 (Theorem 2). One comparison of one (cell, position, input set)
 *     is a box-test. A cell fails when any of its box-tests differs.
 *  A non-equivalent cell passes all t tests with probability at most (D/p)^t, D the total degree
 *  of the difference polynomial, which is at most max(n, degree): n the number of variables (the
 *  paper's bound (n/p)^t, valid while no variable is read twice along a product), degree the
 *  total-degree bound computed per value (pet_value.degree). Literals and divisors map into Z_p
 *  exactly (dyadic rationals, inverses), so the programs' identities over the rationals hold in
 *  Z_p; the converse misses only a difference whose coefficients all vanish mod p.
 *
 * Evaluation. Every input set is shared by all cells, and each program is evaluated once per
 * input set with its intermediate values cached: the CPU back-end first propagates the tested
 * positions backward through the program (which elements of each value they need), then computes
 * only those elements, each once. A value needed mostly (a matmul row needs all of B) is computed
 * whole with the dense kernels (im2col + a Z_p GEMM for convolutions), so evaluating lazily costs
 * little more than the paper's whole-tensor evaluation at worst, and for the usual mutant (a few
 * hundred positions of a conv output) about 100 times less (bench/bench_pet_verify.c).
 * pet_options.dense forces whole-tensor evaluation (to compare, and for back-ends that prefer it).
 *
 * Random inputs are counter-based, so any back-end reproduces them: element i of the variable
 * with key K (pet_var_key of its name) in input set s under seed S is
 *     pet_fold(ir_mix64(h + (i + 1) * 0x9e3779b97f4a7c15)),  h = pet_rand_stream(S, s, K),
 * i.e. SplitMix64 at position i of the stream h, reduced mod p.
 *
 * Threads: pet_verify is re-entrant; the CPU back-end runs (program, input set) jobs on its own
 * pthreads. Back-ends (pet_backend) are interchangeable: gpu/gpu-pet.cu provides a CUDA one
 * (pet_cuda_backend), checked against the CPU's by bench/pet_gpu_check.c. */
#ifndef MAGPIE_PET_H
#define MAGPIE_PET_H

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- the field Z_p */

#define PET_P 2147483647u /* 2^31 - 1, a Mersenne prime: 2^31 = 1 (mod p) */

/* Residues are uint32_t in [0, p). */
static inline uint32_t pet_add(uint32_t a, uint32_t b) {
    uint32_t s = a + b; /* < 2^32 - 2: no wrap */
    return s >= PET_P ? s - PET_P : s;
}
static inline uint32_t pet_sub(uint32_t a, uint32_t b) {
    return a >= b ? a - b : a + PET_P - b;
}
/* One folding step: x mod p congruent, x < 2^64 -> result < 2^33 + 2^31. */
static inline uint64_t pet_fold1(uint64_t x) {
    return (x & PET_P) + (x >> 31);
}
/* x mod p for any x < 2^64. */
static inline uint32_t pet_fold(uint64_t x) {
    x = pet_fold1(pet_fold1(x)); /* < 2^31 + 5 */
    return (uint32_t)(x >= PET_P ? x - PET_P : x);
}
static inline uint32_t pet_mul(uint32_t a, uint32_t b) {
    return pet_fold((uint64_t)a * b);
}
static inline uint32_t pet_neg(uint32_t a) {
    return a ? PET_P - a : 0;
}
/* a^e, and the inverse of a != 0 (Fermat: a^(p-2)). */
uint32_t pet_pow(uint32_t a, uint64_t e);
uint32_t pet_inv(uint32_t a);
/* The residue of an integer (negative ones too). */
uint32_t pet_from_int(int64_t v);
/* The residue closest to zero as a signed integer: r - p when r > p/2. */
int64_t pet_to_signed(uint32_t r);
/* The exact image of a finite double: every finite double is m * 2^e with m an integer, and 2 is
 * invertible mod p, so x maps to m * 2^e mod p (2^-1 = 2^30). This is the ring homomorphism from
 * dyadic rationals to Z_p, so float literals (0.5, Gemm's alpha) keep their algebra. false for
 * NaN and infinities. */
bool pet_from_double(double x, uint32_t *r);

/* ---------------------------------------------------------------- random inputs */

/* The key of a variable: a hash of its name, so original and mutant draw the same values. */
uint64_t pet_var_key(const char *name);
/* The stream of (seed, input set, key); element i is pet_rand_at(stream, i). */
static inline uint64_t pet_rand_stream(uint64_t seed, uint32_t set, uint64_t key) {
    return ir_mix64(ir_mix64(ir_mix64(seed ^ 0x5045545f7665726bULL) + key) +
                    (uint64_t)(set + 1) * 0xd1b54a32d192ed03ULL);
}
static inline uint32_t pet_rand_at(uint64_t stream, uint64_t i) {
    return pet_fold(ir_mix64(stream + (i + 1) * 0x9e3779b97f4a7c15ULL));
}

/* ---------------------------------------------------------------- compiled programs */

/* A program compiled for Z_p evaluation: values and a list of steps, each a primitive kernel that
 * every back-end implements. Several steps may write one value (Concat writes one region per
 * input; Pad zero-fills, then copies its interior); they run in order. Every index below is an
 * element index (row-major), every dim index one of the value's own dims. */

typedef enum pet_value_kind {
    PET_V_VAR,      /* a variable: random input, drawn by key */
    PET_V_LITERAL,  /* a float constant that is not a weight: lit holds its residues */
    PET_V_COMPUTED, /* written by steps */
} pet_value_kind;

typedef struct pet_value {
    pet_value_kind kind;
    ir_shape shape;
    int64_t numel;
    const char *name; /* the IR value's name, or a generated one for temporaries */
    int ir_value;     /* the IR value id, -1 for temporaries */
    uint64_t key;     /* PET_V_VAR: pet_var_key(name) */
    uint32_t *lit;    /* PET_V_LITERAL: numel residues */
    int degree;       /* bound on its total degree as a polynomial in the variables */
} pet_value;

typedef enum pet_step_kind {
    PET_ZERO,    /* out = 0 */
    PET_COPY,    /* a region of out = a strided, possibly wrapped view of in[0] (pet_copy) */
    PET_RESHAPE, /* out[e] = in[0][e]: same elements, another shape */
    PET_BINARY,  /* out = in[0] op in[1] with broadcasting (pet_binary) */
    PET_SCALE,   /* out = in[0] * c */
    PET_MATMUL,  /* batched, broadcast matrix product (pet_matmul) */
    PET_CONV,    /* convolution without bias, zero padding (pet_conv) */
    PET_CONVT,   /* transposed convolution without bias (pet_conv) */
    PET_AVGPOOL, /* average pooling, dilation 1 (pet_conv: M = C, group = C) */
    PET_REDUCE,  /* sum over some dims (pet_reduce) */
    PET_CUMSUM,  /* prefix sums along one dim (pet_cumsum) */
    PET_STEP_KINDS
} pet_step_kind;

enum pet_binop { PET_OP_ADD, PET_OP_SUB, PET_OP_MUL };

/* Output element at coords c (inside the region ostart <= c < ostart + ext) reads the input
 * element whose index along input dim src_dim[i] is (src_start[i] + (c[i] - ostart[i]) *
 * src_step[i]) mod src_mod[i] (no mod when src_mod[i] == 0); input dims no output dim names
 * have size 1. src_dim[i] == -1: output dim i reads no input dim (Expand's new leading dims). */
typedef struct pet_copy {
    int64_t ext[IR_MAX_RANK], ostart[IR_MAX_RANK];
    int src_dim[IR_MAX_RANK];
    int64_t src_start[IR_MAX_RANK], src_step[IR_MAX_RANK], src_mod[IR_MAX_RANK];
} pet_copy;

/* a_dim[i] / b_dim[i]: the dim of in[0] / in[1] aligned with output dim i (numpy broadcasting),
 * -1 where the input has no such dim or has size 1 there (broadcast). */
typedef struct pet_binary {
    int op; /* enum pet_binop */
    int a_dim[IR_MAX_RANK], b_dim[IR_MAX_RANK];
} pet_binary;

#define PET_MAX_BATCH (IR_MAX_RANK - 2)

/* out[b..., m, n] = sum_k A[b..., m, k] * B[b..., k, n] with the output contiguous in the
 * canonical shape (batch..., M, N); the output value may lack the M or N dim (vector operands),
 * which does not change its layout. A dims: a_bdim[i] for batch dim i (-1: broadcast), a_mdim
 * (-1: A is a vector), a_kdim; B likewise. Gemm is the batch-free case with transposed dims. */
typedef struct pet_matmul {
    int nb;
    int64_t batch[PET_MAX_BATCH];
    int64_t M, N, K;
    int a_bdim[PET_MAX_BATCH], b_bdim[PET_MAX_BATCH];
    int a_mdim, a_kdim, b_kdim, b_ndim;
    int o_mdim, o_ndim; /* output value dims of M and N, -1 when absent */
} pet_matmul;

/* Convolution geometry, spatial dims right-aligned in 3 (leading ones of size 1), as ir's.
 * PET_CONV: X [N, C, in...], W [M, C/group, k...], out [N, M, out...];
 *   out[n, m, o] = sum_{c, t} X[n, g*C/group + c, o*s - pb + t*d] * W[m, c, t], g = m/(M/group),
 *   taps outside [0, in) read 0.
 * PET_CONVT: X [N, C, in...], W [C, M/group, k...]; out[n, m, o] = sum over c in m's group and
 *   taps t with o + pb - t*d = i*s, 0 <= i < in, of X[n, c, i] * W[c, m % (M/group), t].
 * PET_AVGPOOL: X [N, C, in...] (M = C, group = C, d = 1): the window sum times the inverse of the
 *   divisor: the window clipped to [-pb, in + pe) with count_pad, else its taps inside [0, in);
 *   inv[q] holds 1/q mod p for q <= prod(k). */
typedef struct pet_conv {
    int S;
    int64_t N, C, M, group;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    bool count_pad;
    const uint32_t *inv;
} pet_conv;

/* in[0] has rank `rank`; reduced[i] says whether dim i is summed; out_dim[i] is the output
 * value dim of a kept dim i (-1 for reduced ones, and kept dims of size 1 may also be -1). */
typedef struct pet_reduce {
    int rank;
    bool reduced[IR_MAX_RANK];
    int out_dim[IR_MAX_RANK];
} pet_reduce;

/* Along `axis`: out[j] = sum of in[i] for i <= j (i < j when exclusive; i >= j / i > j when
 * reverse). */
typedef struct pet_cumsum {
    int axis;
    bool exclusive, reverse;
} pet_cumsum;

typedef struct pet_step {
    pet_step_kind kind;
    int in[2]; /* value ids, -1 when unused */
    int out;
    int node; /* index of the IR node it implements (messages) */
    union {
        pet_copy copy;
        pet_binary bin;
        uint32_t scale; /* PET_SCALE's c */
        pet_matmul mm;
        pet_conv conv;
        pet_reduce red;
        pet_cumsum cum;
    } u;
} pet_step;

typedef struct pet_prog {
    int n_values;
    pet_value *values;
    int n_steps;
    pet_step *steps;
    int n_outputs;
    int *outputs; /* value ids, in the graph's output order */
    int n_vars;
    int *vars;          /* value ids of the variables, in IR value order */
    int affine_dropped; /* biases, Gemm C inputs and non-zero pad constants left out */
    int degree;         /* the largest degree of an output */
    int n_ir_values;
    int *ir_map;  /* the value id of each IR value of the source graph, -1 where none */
    void *arena_; /* private */
} pet_prog;

/* Compiles g. IR_ERR_UNSUPPORTED naming the node for an op that is not multilinear, a non-float
 * value used as data, a Pad mode other than constant; IR_ERR_INVALID for a NaN or infinite
 * literal. Nodes no output depends on are skipped. *out is NULL on failure. */
ir_status pet_prog_compile(const ir_graph *g, pet_prog **out, ir_diag *d);
/* Whether pet_prog_compile takes Einsum node n: one or two operands, no index named twice by one
 * operand (a diagonal), no summed index broadcast (the forms PyTorch exports). */
bool pet_einsum_ok(const ir_graph *g, const ir_node *n);
void pet_prog_free(pet_prog *p); /* NULL-safe */
/* The value id of IR value v (-1 when the program has none); the index in p->vars of the
 * variable `name` (-1 when none). */
int pet_prog_value_of(const pet_prog *p, int ir_value);
int pet_prog_find_var(const pet_prog *p, const char *name);

/* ---------------------------------------------------------------- boxes */

/* A box: lo <= coords < hi in each of rank dims. */
typedef struct pet_box {
    int rank;
    int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK];
} pet_box;

/* The splitting points of one value: at[d][0..n[d]) sorted, unique, each in (0, dims[d]). The
 * boxes are the cells of the grid they cut, numbered row-major (the last dim fastest). */
typedef struct pet_splits {
    int rank;
    int64_t dims[IR_MAX_RANK];
    int n[IR_MAX_RANK];
    int64_t *at[IR_MAX_RANK];
} pet_splits;

/* Box propagation (§5.2 step 1) through p: (*out)[v] for every value v of p (variables and
 * literals have no points). IR_ERR_NOMEM only. */
ir_status pet_prog_boxes(const pet_prog *p, pet_splits **out, ir_diag *d);
void pet_splits_free(pet_splits *s, int n); /* NULL-safe; frees the array too */
int64_t pet_splits_nboxes(const pet_splits *s);
/* Box number i (row-major) of s. */
void pet_splits_box(const pet_splits *s, int64_t i, pet_box *b);
/* The number of the box of s that holds coords c. */
int64_t pet_splits_box_of(const pet_splits *s, const int64_t *c);

/* ---------------------------------------------------------------- back-ends */

/* One position of one output. */
typedef struct pet_probe {
    int output;    /* index into prog->outputs */
    int64_t index; /* element index in that output */
} pet_probe;

/* One program to evaluate at probes, for input sets 0 .. n_sets-1. */
typedef struct pet_eval_req {
    const pet_prog *prog;
    int64_t n_probes;
    const pet_probe *probes;
    uint32_t *vals; /* out: vals[s * n_probes + i], the residue at probes[i] in set s */
} pet_eval_req;

typedef enum pet_eval_mode {
    PET_EVAL_AUTO,   /* only what the probes need; a value needed mostly is computed whole */
    PET_EVAL_DENSE,  /* every element of every value, with the whole-tensor kernels */
    PET_EVAL_SPARSE, /* only what the probes need, element by element (tests) */
} pet_eval_mode;

/* A verification back-end: evaluates compiled programs over Z_p with the random inputs this
 * header defines (any back-end gives the same residues). */
typedef struct pet_backend {
    const char *name; /* "cpu", "cuda" */
    /* Whether it can run here; when not, one line of why into why. */
    bool (*available)(char *why, size_t n);
    /* Opens a context with up to `threads` CPU threads (0: the CPUs of the affinity mask). */
    ir_status (*open)(void **ctx, int threads, ir_diag *d);
    void (*close)(void *ctx); /* NULL-safe */
    /* Fills reqs[i].vals for every request. *evaluated (may be NULL) receives the number of
     * value elements computed, summed over requests and sets. IR_ERR_NOMEM, or
     * IR_ERR_UNSUPPORTED for a step the back-end lacks. */
    ir_status (*eval)(void *ctx, pet_eval_req *reqs, int n_reqs, uint64_t seed, int n_sets,
                      pet_eval_mode mode, int64_t *evaluated, ir_diag *d);
} pet_backend;

/* The multithreaded CPU back-end (pet-cpu.c). */
const pet_backend *pet_cpu_backend(void);
/* The CUDA back-end (gpu/gpu-pet.cu), or NULL when magpie was built without CUDA. Defined by
 * gpu/gpu-registry.c, which executables link through magpie_gpu (as prof_cuda_backend). */
const pet_backend *pet_cuda_backend(void);

/* One evaluation on the calling thread: the residues of p's outputs at probes for input set
 * `set`, into vals[0 .. n_probes). vars: NULL for the random inputs, else per variable (in
 * p->vars order) its numel residues. For tests and for back-ends that check themselves. */
ir_status pet_cpu_eval(const pet_prog *p, int64_t n_probes, const pet_probe *probes,
                       pet_eval_mode mode, const uint32_t *const *vars, uint64_t seed, int set,
                       uint32_t *vals, int64_t *evaluated, ir_diag *d);

/* ---------------------------------------------------------------- verification */

#define PET_DEFAULT_TESTS 4
#define PET_DEFAULT_MAX_CELLS (1 << 22)

typedef struct pet_options {
    int tests;         /* t, random input sets; 0: PET_DEFAULT_TESTS */
    uint64_t seed;     /* of the random inputs */
    int threads;       /* back-end threads; 0: the CPUs of the affinity mask */
    bool dense;        /* whole-tensor evaluation (PET_EVAL_DENSE) instead of PET_EVAL_AUTO */
    int64_t max_cells; /* refuse (IR_ERR_UNSUPPORTED) more cells per output; 0: default */
    const pet_backend *backend; /* NULL: pet_cpu_backend() */
    void *backend_ctx;          /* an opened context of backend, or NULL to open one per call */
} pet_options;

/* A cell (the overlap of a box of the original and one of the mutant) that failed. */
typedef struct pet_region {
    pet_box box;
    int64_t orig_box, mutant_box; /* box numbers in the two programs' pet_splits */
} pet_region;

typedef struct pet_output_report {
    const char *name; /* the output's name (owned by the result) */
    ir_shape shape;
    int64_t orig_boxes, mutant_boxes;
    int64_t cells;    /* overlapping pairs of boxes tested */
    int64_t n_failed; /* cells that failed: the regions needing correction */
    pet_region *failed;
    int64_t failed_mutant_boxes; /* distinct mutant boxes holding a failed cell */
    int64_t failed_elems;        /* elements in failed cells */
} pet_output_report;

typedef struct pet_result {
    int n_outputs;
    pet_output_report *outputs; /* in the original's output order */
    int tests;                  /* t */
    int64_t probes;             /* positions per program per input set */
    int64_t box_tests;          /* comparisons of one (cell, position, input set) */
    int n_vars;                 /* n: variables of the original */
    int degree;                 /* largest output degree of either program */
    /* (max(n, degree) / p)^t: the chance that a cell that is not equivalent passes. */
    double false_accept_bound;
    int affine_dropped;  /* of both programs */
    bool equivalent;     /* no cell failed */
    bool rejected;       /* every cell of every output failed: nothing to keep */
    int64_t evaluated;   /* value elements computed, both programs, all sets */
    double seconds;      /* wall time of pet_verify */
    double eval_seconds; /* of which the back-end's evaluation */
} pet_result;

/* Verifies mutant against orig (§5.2 steps 1 and 2). IR_ERR_INVALID when outputs or variables
 * do not match (names, shapes); the compile errors above; IR_ERR_UNSUPPORTED past max_cells.
 * On failure *r is zeroed. */
ir_status pet_verify(const ir_graph *orig, const ir_graph *mutant, const pet_options *o,
                     pet_result *r, ir_diag *d);
void pet_result_free(pet_result *r); /* NULL-safe, idempotent */

#ifdef __cplusplus
}
#endif
#endif
