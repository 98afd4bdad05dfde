/* test_f64_ops.c - the float64 kernels (ir-float-tmpl.h and the ops that were generic already),
 * op by op:
 *  - twins: every op that takes a float, run on the same values once in float32 and once in
 *    float64; the float64 run must succeed, give float64 outputs and agree with float32 to
 *    float32 accuracy (relative error <= 2e-6, judged in double; integer outputs exactly). The
 *    cases cover the ops the fixture graphs do not run (test_f64_fixtures lists those), every
 *    path of the templated kernels (Conv's im2col, pointwise and depthwise paths, ConvTranspose,
 *    the pools, Resize nearest and linear, the reductions' fast and generic paths) and their
 *    backward ops;
 *  - precision: for MatMul, Conv, Softmax, LayerNormalization, BatchNormalization, ReduceSum,
 *    AveragePool, Resize and ConvGradWeight, the float64 result against a reference computed
 *    here in double, within 1e-12 relative: float32 (relative precision 6e-8) could not get
 *    there, so the kernel really computes in double. The inputs are chosen so that float32
 *    would fail by far (values like 1 + 1e-9 k that float32 cannot even represent);
 *  - float16 inputs still answer IR_ERR_UNSUPPORTED naming the dtypes, and so does a mix. */
#include "test-util.h"

#include "ir-impl.h"

#define MAX_IN 6
#define TWIN_TOL 2e-6

/* An input of a case: a float tensor filled with seeded values in [lo, hi) (lo == hi: [-1, 1)),
 * or integer data (ints, of dtype I64 unless it says I32). */
typedef struct case_in {
    ir_shape shape;
    bool constant;
    const int64_t *ints; /* integer input when set */
    bool is_bool;        /* bool input from ints */
    double lo, hi;
    bool absent; /* an omitted optional input */
} case_in;

typedef struct op_case {
    const char *what;
    ir_op_kind op;
    int n_in, n_out, n_attrs;
    case_in in[MAX_IN];
    ir_attr attrs[6];
} op_case;

static double value_at(const case_in *c, int i, int64_t k) {
    double lo = c->lo, hi = c->hi;
    if (lo == hi) lo = -1, hi = 1;
    double u = (double)(ir_mix64((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL + (uint64_t)k) >> 11) /
               (double)(1ULL << 53);
    return (double)(float)(lo + (hi - lo) * u); /* a float32 value: both twins see it exactly */
}

/* Builds the inputs of case c in float dtype t; buffers are malloc'd into bufs. */
static void make_inputs(const op_case *c, ir_dtype t, tu_in *in, void **bufs) {
    for (int i = 0; i < c->n_in; i++) {
        const case_in *ci = &c->in[i];
        bufs[i] = NULL;
        if (ci->absent) {
            in[i] = (tu_in){0};
            continue;
        }
        int64_t n = ir_shape_numel(&ci->shape);
        if (ci->ints) {
            ir_dtype it = ci->is_bool ? IR_BOOL : IR_I64;
            bufs[i] = calloc(1, (size_t)n * 8 + 8);
            for (int64_t k = 0; k < n; k++) ir_store_i64(bufs[i], it, k, ci->ints[k]);
            in[i] =
                (tu_in){.dtype = it, .shape = ci->shape, .data = bufs[i], .constant = ci->constant};
            continue;
        }
        bufs[i] = calloc(1, (size_t)n * ir_dtype_size(t) + 8);
        for (int64_t k = 0; k < n; k++) ir_store_f64(bufs[i], t, k, value_at(ci, i, k));
        in[i] = (tu_in){.dtype = t, .shape = ci->shape, .data = bufs[i], .constant = ci->constant};
    }
}

static void run_twin(const op_case *c) {
    tu_in in32[MAX_IN], in64[MAX_IN];
    void *b32[MAX_IN], *b64[MAX_IN];
    ir_tensor o32[4] = {{0}}, o64[4] = {{0}};
    ir_diag d = {{0}};
    make_inputs(c, IR_F32, in32, b32);
    make_inputs(c, IR_F64, in64, b64);
    if (tu_run_op(c->op, c->n_in, in32, c->n_out, c->n_attrs, c->attrs, o32, &d) != IR_OK)
        fail_msg("%s float32: %s", c->what, d.msg);
    if (tu_run_op(c->op, c->n_in, in64, c->n_out, c->n_attrs, c->attrs, o64, &d) != IR_OK)
        fail_msg("%s float64: %s", c->what, d.msg);
    for (int k = 0; k < c->n_out; k++) {
        const ir_tensor *a = &o32[k], *b = &o64[k];
        int64_t n = ir_shape_numel(&a->shape);
        if (!ir_shape_eq(&a->shape, &b->shape)) fail_msg("%s: output %d shapes differ", c->what, k);
        if (!ir_dtype_is_float(a->dtype)) {
            if (b->dtype != a->dtype) fail_msg("%s: output %d dtype differs", c->what, k);
            for (int64_t i = 0; i < n; i++)
                if (ir_load_i64(a->data, a->dtype, i) != ir_load_i64(b->data, b->dtype, i))
                    fail_msg("%s: output %d element %lld differs", c->what, k, (long long)i);
            continue;
        }
        if (b->dtype != IR_F64)
            fail_msg("%s: output %d is %s, not float64", c->what, k, ir_dtype_name(b->dtype));
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = ir_load_f64(a->data, a->dtype, i), y = ((const double *)b->data)[i];
            if (isinf(y) && x == y) continue; /* -inf of an empty max window */
            num += (x - y) * (x - y);
            den += y * y;
        }
        double rel = sqrt(num) / fmax(sqrt(den), 1e-30);
        if (!(rel <= TWIN_TOL) && !(num == 0))
            fail_msg("%s: output %d float32 vs float64 relative error %.3g > %g", c->what, k, rel,
                     TWIN_TOL);
    }
    tu_free_outputs(c->n_out, o32);
    tu_free_outputs(c->n_out, o64);
    for (int i = 0; i < c->n_in; i++) {
        free(b32[i]);
        free(b64[i]);
    }
}

#define S(...) TU_SHAPE(__VA_ARGS__)
#define IN(...)                                                                                    \
    { .shape = S(__VA_ARGS__) }
#define POS(...)                                                                                   \
    { .shape = S(__VA_ARGS__), .lo = 0.5, .hi = 2 }
#define CONST(...)                                                                                 \
    { .shape = S(__VA_ARGS__), .constant = true }
#define INTS(n, p)                                                                                 \
    { .shape = {.rank = 1, .dims = {n}}, .ints = (p), .constant = true }
#define NONE                                                                                       \
    { .absent = true }
#define AI(n, v) tu_attr_int(n, v)
#define AF(n, v) tu_attr_float(n, v)
#define AS(n, v) tu_attr_str(n, v)
#define AIS(n, cnt, p) tu_attr_ints(n, cnt, p)

static int64_t k3[] = {3, 3}, k2[] = {2, 2}, k1[] = {1, 1}, s2[] = {2, 2}, p1[] = {1, 1, 1, 1};
static int64_t k333[] = {3, 3, 3}, p0_3[] = {0, 0, 0, 0, 0, 0}, kk1[] = {3}, pp1[] = {1, 1};
static int64_t ax1[] = {1}, ax_last[] = {-1}, ax02[] = {0, 2};
static int64_t shape_pool[] = {2, 3, 5, 5}, sh45[] = {4, 5}, sh24[] = {2, 4}, st12[] = {1, 2};
static int64_t sh2345[] = {2, 3, 4, 5};
static int64_t idx3[] = {2, 0, 1}, gidx[] = {0, 2, 1, 1, 0, 2}, labels[] = {1, 0, 3};
static int64_t mask6[] = {1, 0, 1, 1, 0, 1}, sc_ints[] = {0}, sizes4[] = {2, 3, 9, 7},
               sizes_down[] = {2, 3, 9, 2}, sh2346[] = {2, 3, 4, 6};
static int64_t nd_idx[] = {0, 1, 1, 0}, two[] = {2}, one[] = {1};
static int64_t pad_grad[] = {0, 2, 5, 1, 3, 2}; /* [2, 4, 5] padded to [3, 9, 12] */

/* Cases are listed positionally, their attributes last: most have none. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static void test_twins(void **state) {
    (void)state;
    const op_case cases[] = {
        /* Conv: im2col, pointwise (gemm direct), depthwise, grouped, 1-D and 3-D */
        {"Conv im2col",
         IR_OP_Conv,
         3,
         1,
         3,
         {IN(2, 3, 6, 6), IN(4, 3, 3, 3), IN(4)},
         {AIS("kernel_shape", 2, k3), AIS("pads", 4, p1), AIS("strides", 2, s2)}},
        {"Conv pointwise",
         IR_OP_Conv,
         2,
         1,
         1,
         {IN(2, 3, 5, 5), IN(4, 3, 1, 1)},
         {AIS("kernel_shape", 2, k1)}},
        {"Conv depthwise",
         IR_OP_Conv,
         3,
         1,
         3,
         {IN(2, 3, 9, 9), IN(6, 1, 3, 3), IN(6)},
         {AIS("kernel_shape", 2, k3), AIS("pads", 4, p1), AI("group", 3)}},
        {"Conv grouped",
         IR_OP_Conv,
         2,
         1,
         2,
         {IN(1, 4, 5, 5), IN(4, 2, 3, 3)},
         {AIS("kernel_shape", 2, k3), AI("group", 2)}},
        {"Conv 1-D",
         IR_OP_Conv,
         2,
         1,
         2,
         {IN(2, 3, 7), IN(4, 3, 3)},
         {AIS("kernel_shape", 1, kk1), AIS("pads", 2, pp1)}},
        {"Conv 3-D",
         IR_OP_Conv,
         2,
         1,
         2,
         {IN(1, 2, 4, 5, 5), IN(3, 2, 3, 3, 3)},
         {AIS("kernel_shape", 3, k333), AIS("pads", 6, p0_3)}},
        {"ConvTranspose",
         IR_OP_ConvTranspose,
         3,
         1,
         2,
         {IN(2, 4, 4, 4), IN(4, 3, 3, 3), IN(3)},
         {AIS("kernel_shape", 2, k3), AIS("strides", 2, s2)}},
        {"ConvGradWeight im2col",
         IR_OP_ConvGradWeight,
         2,
         1,
         2,
         {IN(2, 3, 6, 6), IN(2, 4, 6, 6)},
         {AIS("kernel_shape", 2, k3), AIS("pads", 4, p1)}},
        {"ConvGradWeight pointwise",
         IR_OP_ConvGradWeight,
         2,
         1,
         1,
         {IN(2, 3, 5, 5), IN(2, 4, 5, 5)},
         {AIS("kernel_shape", 2, k1)}},
        {"ConvGradWeight depthwise",
         IR_OP_ConvGradWeight,
         2,
         1,
         3,
         {IN(2, 3, 6, 6), IN(2, 3, 6, 6)},
         {AIS("kernel_shape", 2, k3), AIS("pads", 4, p1), AI("group", 3)}},
        /* pools and their gradients */
        {"MaxPool",
         IR_OP_MaxPool,
         1,
         1,
         3,
         {IN(2, 3, 6, 6)},
         {AIS("kernel_shape", 2, k3), AIS("strides", 2, s2), AIS("pads", 4, p1)}},
        {"MaxPool indices",
         IR_OP_MaxPool,
         1,
         2,
         2,
         {IN(2, 3, 6, 6)},
         {AIS("kernel_shape", 2, k2), AIS("strides", 2, s2)}},
        {"AveragePool",
         IR_OP_AveragePool,
         1,
         1,
         4,
         {IN(2, 3, 6, 6)},
         {AIS("kernel_shape", 2, k3), AIS("strides", 2, s2), AIS("pads", 4, p1),
          AI("count_include_pad", 1)}},
        {"GlobalAveragePool", IR_OP_GlobalAveragePool, 1, 1, 0, {IN(2, 3, 4, 5)}},
        {"GlobalMaxPool", IR_OP_GlobalMaxPool, 1, 1, 0, {IN(2, 3, 4, 5)}},
        {"MaxPoolGrad",
         IR_OP_MaxPoolGrad,
         2,
         1,
         2,
         {IN(2, 3, 3, 3), IN(2, 3, 6, 6)},
         {AIS("kernel_shape", 2, k2), AIS("strides", 2, s2)}},
        {"AveragePoolGrad",
         IR_OP_AveragePoolGrad,
         1,
         1,
         4,
         {IN(2, 3, 3, 3)},
         {AIS("kernel_shape", 2, k3), AIS("strides", 2, s2), AIS("pads", 4, p1),
          AIS("shape", 4, shape_pool)}},
        /* normalizations, softmaxes and their gradients */
        {"BatchNormalization",
         IR_OP_BatchNormalization,
         5,
         1,
         0,
         {IN(2, 3, 4, 4), IN(3), IN(3), IN(3), POS(3)}},
        {"BatchNormalization training",
         IR_OP_BatchNormalization,
         5,
         3,
         1,
         {IN(4, 3, 4, 4), IN(3), IN(3), IN(3), POS(3)},
         {AI("training_mode", 1)}},
        /* stash_type double: Mean and InvStdDev in float64 for both twins */
        {"LayerNormalization",
         IR_OP_LayerNormalization,
         3,
         3,
         2,
         {IN(3, 4, 8), IN(8), IN(8)},
         {AI("axis", -1), AI("stash_type", 11)}},
        {"LayerNormalization axis 1",
         IR_OP_LayerNormalization,
         2,
         1,
         1,
         {IN(3, 4, 8), IN(4, 8)},
         {AI("axis", 1)}},
        {"InstanceNormalization",
         IR_OP_InstanceNormalization,
         3,
         1,
         0,
         {IN(2, 3, 5, 5), IN(3), IN(3)}},
        {"Softmax", IR_OP_Softmax, 1, 1, 1, {IN(3, 4, 9)}, {AI("axis", -1)}},
        {"Softmax strided", IR_OP_Softmax, 1, 1, 1, {IN(3, 4, 9)}, {AI("axis", 1)}},
        {"LogSoftmax", IR_OP_LogSoftmax, 1, 1, 1, {IN(3, 4, 9)}, {AI("axis", -1)}},
        {"BatchNormGrad training",
         IR_OP_BatchNormGrad,
         3,
         3,
         1,
         {IN(4, 3, 4, 4), IN(4, 3, 4, 4), IN(3)},
         {AI("training_mode", 1)}},
        {"BatchNormGrad inference",
         IR_OP_BatchNormGrad,
         5,
         3,
         1,
         {IN(4, 3, 4, 4), IN(4, 3, 4, 4), IN(3), IN(3), POS(3)},
         {AI("training_mode", 0)}},
        {"InstanceNormGrad",
         IR_OP_InstanceNormGrad,
         3,
         3,
         0,
         {IN(2, 3, 5, 5), IN(2, 3, 5, 5), IN(3)}},
        {"LayerNormGrad",
         IR_OP_LayerNormGrad,
         5,
         3,
         1,
         {IN(3, 4, 8), IN(3, 4, 8), IN(8), IN(3, 4, 1), POS(3, 4, 1)},
         {AI("axis", -1)}},
        {"SoftmaxGrad", IR_OP_SoftmaxGrad, 2, 1, 1, {IN(3, 4, 9), POS(3, 4, 9)}, {AI("axis", -1)}},
        {"LogSoftmaxGrad",
         IR_OP_LogSoftmaxGrad,
         2,
         1,
         1,
         {IN(3, 4, 9), IN(3, 4, 9)},
         {AI("axis", 1)}},
        /* Resize and its gradient */
        {"Resize nearest",
         IR_OP_Resize,
         4,
         1,
         1,
         {IN(2, 3, 4, 5), NONE, NONE, INTS(4, sizes4)},
         {AS("mode", "nearest")}},
        {"Resize linear",
         IR_OP_Resize,
         4,
         1,
         2,
         {IN(2, 3, 4, 5), NONE, NONE, INTS(4, sizes4)},
         {AS("mode", "linear"), AS("coordinate_transformation_mode", "half_pixel")}},
        {"ResizeGrad linear",
         IR_OP_ResizeGrad,
         4,
         1,
         3,
         {IN(2, 3, 9, 7), NONE, NONE, INTS(4, sizes4)},
         {AS("mode", "linear"), AS("coordinate_transformation_mode", "align_corners"),
          AIS("shape", 4, sh2345)}},
        {"Resize cubic",
         IR_OP_Resize,
         4,
         1,
         3,
         {IN(2, 3, 4, 5), NONE, NONE, INTS(4, sizes4)},
         {AS("mode", "cubic"), AF("cubic_coeff_a", -0.5f), AI("exclude_outside", 1)}},
        {"Resize cubic antialias",
         IR_OP_Resize,
         4,
         1,
         2,
         {IN(2, 3, 4, 6), NONE, NONE, INTS(4, sizes_down)},
         {AS("mode", "cubic"), AI("antialias", 1)}},
        {"Resize linear antialias",
         IR_OP_Resize,
         4,
         1,
         2,
         {IN(2, 3, 4, 6), NONE, NONE, INTS(4, sizes_down)},
         {AS("mode", "linear"), AI("antialias", 1)}},
        {"ResizeGrad cubic antialias",
         IR_OP_ResizeGrad,
         4,
         1,
         3,
         {IN(2, 3, 9, 2), NONE, NONE, INTS(4, sizes_down)},
         {AS("mode", "cubic"), AI("antialias", 1), AIS("shape", 4, sh2346)}},
        /* the grid gradient of GridSample and the gradient of Pad in its reading modes */
        {"GridSampleGridGrad linear",
         IR_OP_GridSampleGridGrad,
         3,
         1,
         2,
         {IN(2, 3, 3, 4), IN(2, 3, 4, 5), {.shape = S(2, 3, 4, 2), .lo = -1.2, .hi = 1.2}},
         {AS("mode", "linear"), AS("padding_mode", "reflection")}},
        {"GridSampleGridGrad cubic",
         IR_OP_GridSampleGridGrad,
         3,
         1,
         3,
         {IN(1, 2, 3, 2), IN(1, 2, 5, 4), {.shape = S(1, 3, 2, 2), .lo = -1.2, .hi = 1.2}},
         {AS("mode", "cubic"), AS("padding_mode", "border"), AI("align_corners", 1)}},
        {"GridSampleGridGrad volumetric",
         IR_OP_GridSampleGridGrad,
         3,
         1,
         1,
         {IN(1, 2, 2, 3, 2), IN(1, 2, 3, 4, 5), {.shape = S(1, 2, 3, 2, 3), .lo = -1.1, .hi = 1.1}},
         {AS("mode", "linear")}},
        {"PadGrad reflect",
         IR_OP_PadGrad,
         1,
         1,
         2,
         {IN(3, 9, 12)},
         {AS("mode", "reflect"), AIS("pads", 6, pad_grad)}},
        {"PadGrad wrap",
         IR_OP_PadGrad,
         1,
         1,
         2,
         {IN(3, 9, 12)},
         {AS("mode", "wrap"), AIS("pads", 6, pad_grad)}},
        /* reductions: fast path (contiguous axes), generic path (scattered axes), gradients */
        {"ReduceSum", IR_OP_ReduceSum, 2, 1, 0, {IN(3, 4, 5), INTS(1, ax1)}},
        {"ReduceMean last", IR_OP_ReduceMean, 1, 1, 1, {IN(3, 4, 5)}, {AIS("axes", 1, ax_last)}},
        {"ReduceMax", IR_OP_ReduceMax, 1, 1, 1, {IN(3, 4, 5)}, {AIS("axes", 1, ax1)}},
        {"ReduceMin scattered", IR_OP_ReduceMin, 1, 1, 1, {IN(3, 4, 5)}, {AIS("axes", 2, ax02)}},
        {"ReduceProd", IR_OP_ReduceProd, 1, 1, 1, {POS(3, 4, 5)}, {AIS("axes", 1, ax_last)}},
        {"ReduceL2 scattered", IR_OP_ReduceL2, 1, 1, 1, {IN(3, 4, 5)}, {AIS("axes", 2, ax02)}},
        {"ArgMax", IR_OP_ArgMax, 1, 1, 1, {IN(3, 4, 5)}, {AI("axis", 1)}},
        {"CumSum", IR_OP_CumSum, 2, 1, 1, {IN(3, 4, 5), INTS(1, ax1)}, {AI("reverse", 1)}},
        {"ReduceGrad max",
         IR_OP_ReduceGrad,
         3,
         1,
         2,
         {IN(3, 1, 5), IN(3, 4, 5), IN(3, 1, 5)},
         {AS("mode", "max"), AIS("axes", 1, ax1)}},
        /* GEMMs */
        {"MatMul batched", IR_OP_MatMul, 2, 1, 0, {IN(2, 3, 4, 5), IN(2, 3, 5, 6)}},
        {"Gemm",
         IR_OP_Gemm,
         3,
         1,
         4,
         {IN(5, 4), IN(6, 5), IN(6)},
         {AI("transA", 1), AI("transB", 1), AF("alpha", 0.5f), AF("beta", 2.0f)}},
        /* element-wise, with broadcasting */
        {"Add", IR_OP_Add, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"Sub", IR_OP_Sub, 2, 1, 0, {IN(3, 4), IN(3, 1)}},
        {"Mul", IR_OP_Mul, 2, 1, 0, {IN(3, 4), IN(3, 4)}},
        {"Div", IR_OP_Div, 2, 1, 0, {IN(3, 4), POS(4)}},
        {"Pow", IR_OP_Pow, 2, 1, 0, {POS(3, 4), IN(3, 4)}},
        {"Mod fmod", IR_OP_Mod, 2, 1, 1, {IN(3, 4), POS(4)}, {AI("fmod", 1)}},
        {"Min", IR_OP_Min, 3, 1, 0, {IN(3, 4), IN(4), IN(3, 1)}},
        {"Max", IR_OP_Max, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"Sum", IR_OP_Sum, 3, 1, 0, {IN(3, 4), IN(4), IN(3, 4)}},
        {"Equal", IR_OP_Equal, 2, 1, 0, {IN(3, 4), IN(3, 4)}},
        {"Less", IR_OP_Less, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"LessOrEqual", IR_OP_LessOrEqual, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"Greater", IR_OP_Greater, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"GreaterOrEqual", IR_OP_GreaterOrEqual, 2, 1, 0, {IN(3, 4), IN(4)}},
        {"Where",
         IR_OP_Where,
         3,
         1,
         0,
         {{.shape = {.rank = 1, .dims = {6}}, .ints = mask6, .is_bool = true}, IN(2, 6), IN(6)}},
        {"Relu", IR_OP_Relu, 1, 1, 0, {IN(3, 4)}},
        {"LeakyRelu", IR_OP_LeakyRelu, 1, 1, 1, {IN(3, 4)}, {AF("alpha", 0.1f)}},
        {"Sigmoid", IR_OP_Sigmoid, 1, 1, 0, {IN(3, 4)}},
        {"HardSigmoid", IR_OP_HardSigmoid, 1, 1, 0, {IN(3, 4)}},
        {"HardSwish", IR_OP_HardSwish, 1, 1, 0, {IN(3, 4)}},
        {"Tanh", IR_OP_Tanh, 1, 1, 0, {IN(3, 4)}},
        {"Erf", IR_OP_Erf, 1, 1, 0, {IN(3, 4)}},
        {"Exp", IR_OP_Exp, 1, 1, 0, {IN(3, 4)}},
        {"Log", IR_OP_Log, 1, 1, 0, {POS(3, 4)}},
        {"Sqrt", IR_OP_Sqrt, 1, 1, 0, {POS(3, 4)}},
        {"Neg", IR_OP_Neg, 1, 1, 0, {IN(3, 4)}},
        {"Abs", IR_OP_Abs, 1, 1, 0, {IN(3, 4)}},
        {"Reciprocal", IR_OP_Reciprocal, 1, 1, 0, {POS(3, 4)}},
        {"Floor", IR_OP_Floor, 1, 1, 0, {{.shape = S(3, 4), .lo = -3, .hi = 3}}},
        {"Ceil", IR_OP_Ceil, 1, 1, 0, {{.shape = S(3, 4), .lo = -3, .hi = 3}}},
        {"Sign", IR_OP_Sign, 1, 1, 0, {IN(3, 4)}},
        {"Clip", IR_OP_Clip, 3, 1, 0, {IN(3, 4), CONST(), CONST()}},
        {"Softplus", IR_OP_Softplus, 1, 1, 0, {IN(3, 4)}},
        {"Elu", IR_OP_Elu, 1, 1, 1, {IN(3, 4)}, {AF("alpha", 0.7f)}},
        {"Identity", IR_OP_Identity, 1, 1, 0, {IN(3, 4)}},
        {"Shape", IR_OP_Shape, 1, 1, 0, {IN(3, 4)}},
        {"Size", IR_OP_Size, 1, 1, 0, {IN(3, 4)}},
        {"Dropout inference", IR_OP_Dropout, 1, 1, 0, {IN(3, 4)}},
        /* the same seed draws the same mask in both dtypes */
        {"Dropout training",
         IR_OP_Dropout,
         3,
         2,
         0,
         {IN(8, 16),
          {.shape = {0}, .constant = true, .lo = 0.3, .hi = 0.31},
          {.shape = {0}, .ints = one, .is_bool = true, .constant = true}}},
        {"UnaryGrad", IR_OP_UnaryGrad, 2, 1, 1, {IN(3, 4), IN(3, 4)}, {AS("op", "Tanh")}},
        {"DropoutGrad",
         IR_OP_DropoutGrad,
         2,
         1,
         1,
         {IN(6), {.shape = {.rank = 1, .dims = {6}}, .ints = mask6, .is_bool = true}},
         {AF("scale", 2.0f)}},
        /* data movement and indexing */
        {"Transpose", IR_OP_Transpose, 1, 1, 0, {IN(2, 3, 4)}},
        {"Concat", IR_OP_Concat, 2, 1, 1, {IN(2, 3), IN(2, 4)}, {AI("axis", 1)}},
        {"Split", IR_OP_Split, 1, 2, 1, {IN(4, 3)}, {AI("axis", 0)}},
        {"Slice", IR_OP_Slice, 3, 1, 0, {IN(4, 5), INTS(1, sc_ints), INTS(1, two)}},
        {"Expand", IR_OP_Expand, 2, 1, 0, {IN(3, 1), INTS(1, two /* [2] broadcasts to [3,2] */)}},
        {"Tile", IR_OP_Tile, 2, 1, 0, {IN(3), INTS(1, two)}},
        {"Pad",
         IR_OP_Pad,
         2,
         1,
         0,
         {IN(3, 4), {.shape = {.rank = 1, .dims = {4}}, .ints = p1, .constant = true}}},
        {"Gather", IR_OP_Gather, 2, 1, 1, {IN(4, 5), INTS(3, idx3)}, {AI("axis", 1)}},
        {"GatherElements",
         IR_OP_GatherElements,
         2,
         1,
         1,
         {IN(2, 3), {.shape = S(2, 3), .ints = gidx, .constant = true}},
         {AI("axis", 1)}},
        {"ScatterND",
         IR_OP_ScatterND,
         3,
         1,
         0,
         {IN(3, 4), {.shape = S(2, 2), .ints = nd_idx, .constant = true}, IN(2)}},
        {"Trilu", IR_OP_Trilu, 1, 1, 0, {IN(4, 5)}},
        {"GatherGrad",
         IR_OP_GatherGrad,
         2,
         1,
         2,
         {IN(4, 3), INTS(3, idx3)},
         {AI("axis", 1), AIS("shape", 2, sh45)}},
        {"GatherElementsGrad",
         IR_OP_GatherElementsGrad,
         2,
         1,
         2,
         {IN(2, 3), {.shape = S(2, 3), .ints = gidx, .constant = true}},
         {AI("axis", 1), AIS("shape", 2, sh24)}},
        {"Reshape", IR_OP_Reshape, 2, 1, 0, {IN(3, 4), INTS(1, (int64_t[]){12})}},
        {"Flatten", IR_OP_Flatten, 1, 1, 0, {IN(3, 4, 2)}},
        {"Squeeze", IR_OP_Squeeze, 2, 1, 0, {IN(3, 1, 4), INTS(1, ax1)}},
        {"Unsqueeze", IR_OP_Unsqueeze, 2, 1, 0, {IN(3, 4), INTS(1, ax1)}},
        {"Range",
         IR_OP_Range,
         3,
         1,
         0,
         {CONST(), {.shape = {0}, .constant = true, .lo = 3, .hi = 5}, CONST()}},
        {"CastLike", IR_OP_CastLike, 2, 1, 0, {IN(3, 4), IN(1)}},
        /* training ops */
        {"SoftmaxCrossEntropy",
         IR_OP_SoftmaxCrossEntropy,
         2,
         2,
         0,
         {IN(3, 5), {.shape = {.rank = 1, .dims = {3}}, .ints = labels}}},
        {"SGDUpdate", IR_OP_SGDUpdate, 2, 1, 1, {IN(3, 4), IN(3, 4)}, {AF("lr", 0.1f)}},
        {"MomentumUpdate",
         IR_OP_MomentumUpdate,
         3,
         2,
         1,
         {IN(3, 4), IN(3, 4), IN(3, 4)},
         {AF("lr", 0.1f)}},
        {"AdamUpdate",
         IR_OP_AdamUpdate,
         4,
         3,
         1,
         {IN(3, 4), IN(3, 4), POS(3, 4), IN(3, 4)}, /* param, m, v >= 0, grad */
         {AF("lr", 0.1f)}},
        /* magpie-domain data ops */
        {"Store", IR_OP_Store, 1, 1, 0, {IN(3, 4)}},
        {"Load", IR_OP_Load, 1, 1, 0, {IN(3, 4)}},
        {"PetPatch", IR_OP_PetPatch, 2, 1, 1, {IN(4, 5), IN(2, 3)}, {AIS("starts", 2, st12)}},
        {"FissionSlice",
         IR_OP_FissionSlice,
         1,
         1,
         3,
         {IN(4, 6)},
         {AI("axis", 1), AI("parts", 2), AI("index", 1)}},
        {"FissionAccumulate",
         IR_OP_FissionAccumulate,
         2,
         1,
         2,
         {IN(4, 6), IN(4, 6)},
         {AI("parts", 2), AI("index", 1)}},
        {"FissionAssemble",
         IR_OP_FissionAssemble,
         2,
         1,
         3,
         {IN(4, 6), IN(4, 3)},
         {AI("axis", 1), AI("parts", 2), AI("index", 1)}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_twin(&cases[i]);
}

/* ------------------------------------------------------------------------- precision */

/* Max |a - ref| / max |ref| over n doubles. */
static double max_rel(const double *a, const double *ref, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - ref[i]));
        s = fmax(s, fabs(ref[i]));
    }
    return e / fmax(s, 1e-300);
}

/* Values float32 cannot hold: 1 + 1e-9 * (k mod 97) - 0.5 * (k mod 3 == 0). */
static void fine_fill(double *x, int64_t n, int salt) {
    for (int64_t k = 0; k < n; k++)
        x[k] = 1.0 + 1e-9 * (double)((k * 31 + salt) % 97) - 0.5 * (double)((k + salt) % 3 == 0);
}

/* Runs op on float64 inputs and checks output 0 against ref within 1e-12 relative; also checks
 * that the same inputs rounded to float32 and run in float32 miss ref by far more, so the check
 * could tell float32 arithmetic from float64. */
static void expect_precise(const char *what, ir_op_kind op, int n_in, const tu_in *in, int n_out,
                           int n_attrs, const ir_attr *attrs, const double *ref, int64_t n) {
    ir_tensor out[4] = {{0}};
    ir_diag d = {{0}};
    if (tu_run_op(op, n_in, in, n_out, n_attrs, attrs, out, &d) != IR_OK)
        fail_msg("%s: %s", what, d.msg);
    assert_int_equal(out[0].dtype, IR_F64);
    assert_int_equal(ir_shape_numel(&out[0].shape), n);
    double e64 = max_rel(out[0].data, ref, n);
    tu_free_outputs(n_out, out);
    tu_in in32[MAX_IN];
    void *bufs[MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        in32[i] = in[i];
        if (in[i].data && in[i].dtype == IR_F64) {
            int64_t m = ir_shape_numel(&in[i].shape);
            float *f = malloc((size_t)m * sizeof(float) + 4);
            for (int64_t k = 0; k < m; k++) f[k] = (float)((const double *)in[i].data)[k];
            bufs[i] = f;
            in32[i].dtype = IR_F32;
            in32[i].data = f;
        }
    }
    if (tu_run_op(op, n_in, in32, n_out, n_attrs, attrs, out, &d) != IR_OK)
        fail_msg("%s float32: %s", what, d.msg);
    double *o32 = malloc((size_t)n * sizeof(double));
    for (int64_t k = 0; k < n; k++) o32[k] = ir_load_f64(out[0].data, out[0].dtype, k);
    double e32 = max_rel(o32, ref, n);
    free(o32);
    tu_free_outputs(n_out, out);
    for (int i = 0; i < n_in; i++) free(bufs[i]);
    printf("  %-28s float64 %.2e   float32 %.2e\n", what, e64, e32);
    if (!(e64 <= 1e-12)) fail_msg("%s: float64 relative error %.3g > 1e-12", what, e64);
    if (!(e32 > 1e-10))
        fail_msg("%s: float32 gets within %.3g: the case proves nothing", what, e32);
}

static tu_in f64_in(ir_shape s, const double *p) {
    return tu_data_in(IR_F64, s, p);
}

static void test_precise_matmul(void **state) {
    (void)state;
    enum { M = 4, K = 50, N = 3 };
    double a[M * K], b[K * N], ref[M * N];
    fine_fill(a, M * K, 1);
    fine_fill(b, K * N, 2);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long double s = 0;
            for (int p = 0; p < K; p++) s += (long double)a[i * K + p] * b[p * N + j];
            ref[i * N + j] = (double)s;
        }
    tu_in in[2] = {f64_in(S(M, K), a), f64_in(S(K, N), b)};
    expect_precise("MatMul", IR_OP_MatMul, 2, in, 1, 0, NULL, ref, M * N);
    ir_attr ga[1] = {AI("transB", 0)};
    expect_precise("Gemm", IR_OP_Gemm, 2, in, 1, 1, ga, ref, M * N);
}

/* Conv 1x2x6x6 with a 3x3 kernel, pads 1, stride 1 (im2col + dgemm), against direct sums. */
static void test_precise_conv(void **state) {
    (void)state;
    enum { C = 2, H = 6, M = 3, KH = 3 };
    double x[C * H * H], w[M * C * KH * KH], ref[M * H * H];
    fine_fill(x, C * H * H, 3);
    fine_fill(w, M * C * KH * KH, 4);
    for (int m = 0; m < M; m++)
        for (int oh = 0; oh < H; oh++)
            for (int ow = 0; ow < H; ow++) {
                long double s = 0;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < KH; i++)
                        for (int j = 0; j < KH; j++) {
                            int ih = oh + i - 1, iw = ow + j - 1;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                            s += (long double)x[(c * H + ih) * H + iw] *
                                 w[((m * C + c) * KH + i) * KH + j];
                        }
                ref[(m * H + oh) * H + ow] = (double)s;
            }
    tu_in in[2] = {f64_in(S(1, C, H, H), x), f64_in(S(M, C, KH, KH), w)};
    ir_attr at[2] = {AIS("kernel_shape", 2, k3), AIS("pads", 4, p1)};
    expect_precise("Conv", IR_OP_Conv, 2, in, 1, 2, at, ref, M * H * H);

    /* its weight gradient: dW[m,c,i,j] = sum_o dY[m,o] * x[c, o + (i,j) - 1] */
    double dy[M * H * H], dw[M * C * KH * KH];
    fine_fill(dy, M * H * H, 5);
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < KH; i++)
                for (int j = 0; j < KH; j++) {
                    long double s = 0;
                    for (int oh = 0; oh < H; oh++)
                        for (int ow = 0; ow < H; ow++) {
                            int ih = oh + i - 1, iw = ow + j - 1;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                            s += (long double)dy[(m * H + oh) * H + ow] * x[(c * H + ih) * H + iw];
                        }
                    dw[((m * C + c) * KH + i) * KH + j] = (double)s;
                }
    tu_in gin[2] = {f64_in(S(1, C, H, H), x), f64_in(S(1, M, H, H), dy)};
    expect_precise("ConvGradWeight", IR_OP_ConvGradWeight, 2, gin, 1, 2, at, dw, M * C * KH * KH);
}

/* Softmax and LayerNormalization over rows whose values differ by 1e-9-ish steps. */
static void test_precise_softmax_layernorm(void **state) {
    (void)state;
    enum { R = 3, L = 40 };
    double x[R * L], sm[R * L], ln[R * L], sc[L], b[L];
    fine_fill(x, R * L, 6);
    for (int i = 0; i < R * L; i++) x[i] = 1e3 * (x[i] - 1); /* steps of 1e-6 around 0, -500 */
    fine_fill(sc, L, 7);
    fine_fill(b, L, 8);
    for (int r = 0; r < R; r++) {
        const double *xr = x + r * L;
        double mx = -INFINITY, z = 0, s = 0, q = 0;
        for (int i = 0; i < L; i++) mx = fmax(mx, xr[i]);
        for (int i = 0; i < L; i++) z += exp(xr[i] - mx);
        for (int i = 0; i < L; i++) sm[r * L + i] = exp(xr[i] - mx) / z;
        for (int i = 0; i < L; i++) s += xr[i];
        double m = s / L;
        for (int i = 0; i < L; i++) q += (xr[i] - m) * (xr[i] - m);
        double inv = 1 / sqrt(q / L + (double)1e-5f);
        for (int i = 0; i < L; i++) ln[r * L + i] = (xr[i] - m) * inv * sc[i] + b[i];
    }
    tu_in in[3] = {f64_in(S(R, L), x), f64_in(S(L), sc), f64_in(S(L), b)};
    ir_attr ax = AI("axis", -1);
    expect_precise("Softmax", IR_OP_Softmax, 1, in, 1, 1, &ax, sm, R * L);
    expect_precise("LayerNormalization", IR_OP_LayerNormalization, 3, in, 1, 1, &ax, ln, R * L);
}

/* BatchNormalization in training mode: batch statistics of values 1 + 1e-9 k. */
static void test_precise_batchnorm(void **state) {
    (void)state;
    enum { N = 4, C = 2, P = 9 };
    double x[N * C * P], sc[C] = {1.5, -0.25}, b[C] = {0.125, 2}, mean[C] = {0, 0}, var[C] = {1, 1},
                         ref[N * C * P];
    fine_fill(x, N * C * P, 9);
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < N; n++)
            for (int p = 0; p < P; p++) s += x[(n * C + c) * P + p];
        double m = s / (N * P);
        for (int n = 0; n < N; n++)
            for (int p = 0; p < P; p++) q += pow(x[(n * C + c) * P + p] - m, 2);
        double inv = 1 / sqrt(q / (N * P) + (double)1e-5f);
        for (int n = 0; n < N; n++)
            for (int p = 0; p < P; p++)
                ref[(n * C + c) * P + p] = (x[(n * C + c) * P + p] - m) * inv * sc[c] + b[c];
    }
    tu_in in[5] = {f64_in(S(N, C, 3, 3), x), f64_in(S(C), sc), f64_in(S(C), b), f64_in(S(C), mean),
                   f64_in(S(C), var)};
    ir_attr tm = AI("training_mode", 1);
    expect_precise("BatchNormalization", IR_OP_BatchNormalization, 5, in, 1, 1, &tm, ref,
                   N * C * P);
}

/* ReduceSum of 20000 values around 1 (the fast path), AveragePool, Resize linear. */
static void test_precise_reduce_pool_resize(void **state) {
    (void)state;
    enum { R = 20000 };
    double *x = malloc(R * sizeof(double)), ref = 0;
    fine_fill(x, R, 10);
    for (int i = 0; i < R; i++) x[i] = x[i] + 1e-4 * (i % 7); /* sums float32 would round */
    long double s = 0;
    for (int i = 0; i < R; i++) s += x[i];
    ref = (double)s;
    tu_in in = f64_in(S(2, R / 2), x);
    ir_attr noax = AI("keepdims", 0);
    expect_precise("ReduceSum", IR_OP_ReduceSum, 1, &in, 1, 1, &noax, &ref, 1);

    enum { H = 5 };
    double p[H * H], avg[4];
    fine_fill(p, H * H, 11);
    for (int oh = 0; oh < 2; oh++)
        for (int ow = 0; ow < 2; ow++) {
            double t = 0;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) t += p[(oh * 2 + i) * H + ow * 2 + j];
            avg[oh * 2 + ow] = t / 9;
        }
    tu_in pin = f64_in(S(1, 1, H, H), p);
    ir_attr pa[2] = {AIS("kernel_shape", 2, k3), AIS("strides", 2, s2)};
    expect_precise("AveragePool", IR_OP_AveragePool, 1, &pin, 1, 2, pa, avg, 4);

    /* 1x1x1x3 to 1x1x1x7, align_corners: source coordinate xo * 2 / 6 = xo / 3, weights 1/3 and
     * 2/3 that float32 cannot hold */
    double r3[3] = {1 + 3e-9, 2 - 7e-9, -1 + 5e-9}, rref[7];
    for (int xo = 0; xo < 7; xo++) {
        double xs = xo / 3.0;
        int a = (int)floor(xs), bb = a + 1 < 3 ? a + 1 : 2;
        double w = xs - a;
        rref[xo] = r3[a] * (1 - w) + r3[bb] * w;
    }
    int64_t sz[4] = {1, 1, 1, 7};
    tu_in rin[4] = {f64_in(S(1, 1, 1, 3), r3), {0}, {0}, tu_ints_in(4, sz)};
    ir_attr ra[2] = {AS("mode", "linear"), AS("coordinate_transformation_mode", "align_corners")};
    expect_precise("Resize linear", IR_OP_Resize, 4, rin, 1, 2, ra, rref, 7);
    free(x);
}

/* A mix of float dtypes is refused (float16 alone runs widened to float32: test_ops_float16). */
static void test_refusals(void **state) {
    (void)state;
    uint16_t h[18] = {0};
    float w[12] = {0};
    double x[18] = {0};
    ir_diag d = {{0}};
    tu_in in[2] = {tu_data_in(IR_F16, S(1, 2, 3, 3), h), tu_data_in(IR_F64, S(1, 2, 1, 1), x)};
    ir_attr ks = AIS("kernel_shape", 2, k1);
    assert_int_not_equal(tu_run_err(IR_OP_Conv, 2, in, 1, 1, &ks, &d), IR_OK);
    assert_non_null(strstr(d.msg, "float64"));
    tu_in mix[3] = {tu_data_in(IR_F64, S(3, 6), x), tu_data_in(IR_F32, S(6), w),
                    tu_data_in(IR_F32, S(6), w)};
    ir_attr ax = AI("axis", -1);
    ir_status st = tu_run_err(IR_OP_LayerNormalization, 3, mix, 1, 1, &ax, &d);
    assert_true(st != IR_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twins),
        cmocka_unit_test(test_precise_matmul),
        cmocka_unit_test(test_precise_conv),
        cmocka_unit_test(test_precise_softmax_layernorm),
        cmocka_unit_test(test_precise_batchnorm),
        cmocka_unit_test(test_precise_reduce_pool_resize),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
