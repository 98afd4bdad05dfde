/* test_ops_float16.c - float16 and bfloat16 through the ops whose kernels have float32 and float64
 * forms only: softmax, normalizations, convolutions, pools, GEMM, reductions, Resize, backward ops
 * and the other float ops. ir_node_run widens their 16-bit inputs to float32 in the workspace and
 * rounds each float output once on the store (ir-widen.c).
 *
 * Each family is one small graph, built in each 16-bit dtype and judged by rt-check.h's criterion
 * against the float64 run of the same graph on the same inputs (the 16-bit values, widened
 * exactly). The 16-bit run is its own "original" here, so k = 0 and only rtol counts: two units
 * in the last place of the 16-bit type (2^-10 for float16, 2^-7 for bfloat16), as a float32
 * computation rounded once to 16 bits is within one. Every graph also checks that the executed
 * peak equals sched_memory_compute's, which counts the widening copies as workspace, and that
 * shape inference gave the 16-bit dtype to every float output. */
#include "test-check.h"

#include "ir-impl.h"
#include "schedule.h"

#include <math.h>

#define MAX_BIND 16

typedef struct fx {
    ir_graph *g;
    ir_dtype t;
    rt_binding bind[MAX_BIND];
    void *data[MAX_BIND];
    int n_bind;
    uint64_t seed;
    int stash[4]; /* float outputs that keep float32 by definition (LayerNorm's statistics) */
    int n_stash;
} fx;

static void fx_init(fx *f, ir_dtype t, int64_t opset) {
    memset(f, 0, sizeof *f);
    f->g = ir_graph_new();
    f->g->opset = opset;
    f->t = t;
    f->seed = 12345;
}

static void fx_free(fx *f) {
    for (int i = 0; i < f->n_bind; i++) free(f->data[i]);
    ir_graph_free(f->g);
}

/* A graph input of dtype dt (the fixture's 16-bit type unless given) with values uniform in
 * [lo, hi], stored in dt and bound; the first one is the data input. */
static int fx_input_t(fx *f, const char *name, ir_dtype dt, ir_shape s, double lo, double hi) {
    assert_true(f->n_bind < MAX_BIND);
    int v = ir_graph_add_value(f->g, name, dt, &s);
    ir_graph_add_input(f->g, v);
    if (f->n_bind == 0) f->g->values[v].flags |= IR_VF_DATA;
    int64_t n = ir_shape_numel(&s);
    void *p = malloc((size_t)n * ir_dtype_size(dt) + 1);
    for (int64_t i = 0; i < n; i++) {
        f->seed = f->seed * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(f->seed >> 11) / 9007199254740992.0;
        ir_store_f64(p, dt, i, lo + (hi - lo) * u);
    }
    f->data[f->n_bind] = p;
    f->bind[f->n_bind++] = (rt_binding){.value = v, .dtype = dt, .shape = s, .data = p};
    return v;
}

static int fx_input(fx *f, const char *name, ir_shape s) {
    return fx_input_t(f, name, f->t, s, -1, 1);
}

/* A constant of n values of dtype dt (an integer or float32 tensor: axes, scales). */
static int fx_const(fx *f, const char *name, ir_dtype dt, ir_shape s, const double *vals) {
    int v = ir_graph_add_value(f->g, name, dt, &s);
    int64_t n = ir_shape_numel(&s);
    ir_blob *b = ir_blob_new((size_t)n * ir_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) ir_store_f64(ir_blob_data(b), dt, i, vals[i]);
    f->g->values[v].blob = b;
    f->g->values[v].flags |= IR_VF_CONST;
    return v;
}

/* Adds node op; its outputs become graph outputs. Returns output 0's value id. */
static int fx_node(fx *f, ir_op_kind op, const char *name, int n_in, const int *in, int n_out,
                   int n_attrs, const ir_attr *attrs, int *outs) {
    int o[8];
    tu_add_node(f->g, op, name, n_in, in, n_out, o, n_attrs, attrs);
    for (int i = 0; i < n_out; i++) {
        ir_graph_add_output(f->g, o[i]);
        if (outs) outs[i] = o[i];
    }
    return o[0];
}

static int fx_node1(fx *f, ir_op_kind op, const char *name, int n_in, const int *in, int n_attrs,
                    const ir_attr *attrs) {
    return fx_node(f, op, name, n_in, in, 1, n_attrs, attrs, NULL);
}

/* Runs the graph in its 16-bit dtype and in float64 and judges every output within ulps units
 * in the last place of the 16-bit type. */
static void fx_judge_rtol(fx *f, const char *what, double ulps) {
    const ir_graph *g = f->g;
    char tag[128];
    snprintf(tag, sizeof tag, "%s %s", what, ir_dtype_name(f->t));
    size_t widened = 0;
    for (int i = 0; i < g->n_nodes; i++) widened += ir_node_widen_bytes(g, &g->nodes[i]);
    if (!widened) fail_msg("%s: no node is widened: the test runs the 16-bit kernels", tag);
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        bool stash = false;
        for (int k = 0; k < f->n_stash; k++) stash = stash || f->stash[k] == g->outputs[i];
        if (ir_dtype_is_float(v->dtype) && v->dtype != (stash ? IR_F32 : f->t))
            fail_msg("%s: output '%s' is %s", tag, v->name, ir_dtype_name(v->dtype));
    }
    tu_ref ref;
    rt_options o = {.seed = 3, .poison_freed = true};
    tu_ref_run(g, f->bind, f->n_bind, &o, &ref, tag);

    int *order = malloc(sizeof(int) * (size_t)g->n_nodes + 1);
    for (int i = 0; i < g->n_nodes; i++) order[i] = i;
    size_t peak = tu_peak(g, order);
    free(order);
    if (ref.r32.peak_bytes != peak)
        fail_msg("%s: executed peak %zu bytes, simulated %zu", tag, ref.r32.peak_bytes, peak);

    double u = f->t == IR_F16 ? ldexp(1, -11) : ldexp(1, -8);
    rt_check_opts co = {.rtol = ulps * u, .k = 0};
    static rt_out_check res[TU_MAX_CHECK];
    double worst;
    bool ok = tu_check(&ref, NULL, &ref.r32, &co, res, &worst);
    if (!ok) {
        for (int i = 0; i < ref.r32.n_outputs; i++)
            if (!res[i].pass)
                fail_msg("%s: output '%s': error %.3g > bound %.3g (|ref| %.3g)%s%s", tag,
                         tu_output_name(g, i), res[i].err_opt, res[i].bound, res[i].ref_norm,
                         res[i].why ? ": " : "", res[i].why ? res[i].why : "");
    }
    /* Not a vacuous pass: the error is that of 16-bit rounding, not zero. */
    double err = 0;
    for (int i = 0; i < ref.r32.n_outputs; i++)
        if (!res[i].exact) err += res[i].err_opt;
    assert_true(err > 0);
    tu_ref_free(&ref);
}

static void fx_judge(fx *f, const char *what) {
    fx_judge_rtol(f, what, 2);
}

static const ir_dtype types16[] = {IR_F16, IR_BF16};
#define FOR_TYPES for (size_t ti_ = 0; ti_ < 2; ti_++)
#define T16 types16[ti_]

static void test_softmax(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(3, 17));
        ir_attr a1 = tu_attr_int("axis", -1), a0 = tu_attr_int("axis", 0);
        fx_node1(&f, IR_OP_Softmax, "softmax", 1, &x, 1, &a1);
        fx_node1(&f, IR_OP_LogSoftmax, "logsoftmax", 1, &x, 1, &a0);
        fx_judge(&f, "softmax");
        fx_free(&f);
    }
}

static void test_norms(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(2, 4, 3, 3));
        int sc = fx_input_t(&f, "scale", T16, TU_SHAPE(4), 0.5, 1.5);
        int b = fx_input(&f, "bias", TU_SHAPE(4));
        int mean = fx_input(&f, "mean", TU_SHAPE(4));
        int var = fx_input_t(&f, "var", T16, TU_SHAPE(4), 0.5, 1.5);
        int bn[5] = {x, sc, b, mean, var};
        fx_node1(&f, IR_OP_BatchNormalization, "bn", 5, bn, 0, NULL);
        int in[3] = {x, sc, b};
        fx_node1(&f, IR_OP_InstanceNormalization, "in", 3, in, 0, NULL);
        ir_attr ng = tu_attr_int("num_groups", 2);
        fx_node1(&f, IR_OP_GroupNormalization, "gn", 3, in, 1, &ng);
        int lsc = fx_input_t(&f, "ln_scale", T16, TU_SHAPE(3, 3), 0.5, 1.5);
        int lb = fx_input(&f, "ln_bias", TU_SHAPE(3, 3));
        int ln[3] = {x, lsc, lb};
        ir_attr ax = tu_attr_int("axis", 2);
        int outs[3];
        fx_node(&f, IR_OP_LayerNormalization, "ln", 3, ln, 3, 1, &ax, outs);
        /* the saved statistics keep the stash type, float32 */
        f.stash[f.n_stash++] = outs[1];
        f.stash[f.n_stash++] = outs[2];
        fx_judge(&f, "norms");
        fx_free(&f);
    }
}

static void test_conv(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(1, 4, 5, 5));
        int w = fx_input(&f, "w", TU_SHAPE(6, 4, 3, 3));
        int b = fx_input(&f, "b", TU_SHAPE(6));
        int64_t pads[4] = {1, 1, 1, 1}, k3[2] = {3, 3}, s2[2] = {2, 2}, k2[2] = {2, 2};
        ir_attr ca[2] = {tu_attr_ints("pads", 4, pads), tu_attr_ints("kernel_shape", 2, k3)};
        int conv[3] = {x, w, b};
        fx_node1(&f, IR_OP_Conv, "conv", 3, conv, 2, ca);
        int wt = fx_input(&f, "wt", TU_SHAPE(4, 3, 2, 2));
        ir_attr ta[2] = {tu_attr_ints("strides", 2, s2), tu_attr_ints("kernel_shape", 2, k2)};
        int convt[2] = {x, wt};
        fx_node1(&f, IR_OP_ConvTranspose, "convt", 2, convt, 2, ta);
        fx_judge(&f, "conv");
        fx_free(&f);
    }
}

static void test_pool(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(1, 3, 6, 6));
        int64_t k2[2] = {2, 2}, k3[2] = {3, 3}, pads[4] = {1, 1, 1, 1};
        ir_attr ma[2] = {tu_attr_ints("kernel_shape", 2, k2), tu_attr_ints("strides", 2, k2)};
        fx_node(&f, IR_OP_MaxPool, "maxpool", 1, &x, 2, 2, ma, NULL);
        ir_attr aa[2] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("pads", 4, pads)};
        fx_node1(&f, IR_OP_AveragePool, "avgpool", 1, &x, 2, aa);
        fx_node1(&f, IR_OP_GlobalAveragePool, "gap", 1, &x, 0, NULL);
        fx_node1(&f, IR_OP_GlobalMaxPool, "gmp", 1, &x, 0, NULL);
        fx_judge(&f, "pool");
        fx_free(&f);
    }
}

static void test_matmul(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int a = fx_input(&f, "a", TU_SHAPE(2, 5, 8));
        int b = fx_input(&f, "b", TU_SHAPE(8, 6));
        int mm[2] = {a, b};
        fx_node1(&f, IR_OP_MatMul, "matmul", 2, mm, 0, NULL);
        int a2 = fx_input(&f, "a2", TU_SHAPE(5, 8));
        int b2 = fx_input(&f, "b2", TU_SHAPE(6, 8));
        int c2 = fx_input(&f, "c2", TU_SHAPE(6));
        ir_attr ga[2] = {tu_attr_int("transB", 1), tu_attr_float("alpha", 0.5f)};
        int gm[3] = {a2, b2, c2};
        fx_node1(&f, IR_OP_Gemm, "gemm", 3, gm, 2, ga);
        fx_judge(&f, "matmul");
        fx_free(&f);
    }
}

static void test_reduce(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(3, 4, 5));
        const double ax1[] = {1}, ax02[] = {0, 2};
        int a1 = fx_const(&f, "axes1", IR_I64, TU_SHAPE(1), ax1);
        int a02 = fx_const(&f, "axes02", IR_I64, TU_SHAPE(2), ax02);
        int r1[2] = {x, a1}, r02[2] = {x, a02};
        ir_attr am = tu_attr_int("axis", 2);
        fx_node1(&f, IR_OP_ArgMax, "argmax", 1, &x, 1, &am);
        fx_node1(&f, IR_OP_ReduceSum, "sum", 2, r1, 0, NULL);
        fx_node1(&f, IR_OP_ReduceMean, "mean", 2, r02, 0, NULL);
        fx_node1(&f, IR_OP_ReduceMax, "max", 2, r1, 0, NULL);
        fx_node1(&f, IR_OP_ReduceL2, "l2", 2, r02, 0, NULL);
        fx_node1(&f, IR_OP_ReduceLogSumExp, "lse", 2, r1, 0, NULL);
        fx_node1(&f, IR_OP_ReduceSumSquare, "sumsq", 2, r02, 0, NULL);
        fx_node1(&f, IR_OP_ReduceMin, "min", 2, r02, 0, NULL);
        fx_node1(&f, IR_OP_ReduceProd, "prod", 2, r1, 0, NULL);
        fx_node1(&f, IR_OP_ReduceL1, "l1", 2, r1, 0, NULL);
        int pos = fx_input_t(&f, "pos", T16, TU_SHAPE(3, 4, 5), 0.1, 2);
        int rp[2] = {pos, a02};
        fx_node1(&f, IR_OP_ReduceLogSum, "logsum", 2, rp, 0, NULL);
        fx_node1(&f, IR_OP_ArgMin, "argmin", 1, &x, 1, &am);
        int cs[2] = {x, a1};
        fx_node1(&f, IR_OP_CumSum, "cumsum", 2, cs, 0, NULL);
        fx_judge(&f, "reduce");
        fx_free(&f);
    }
}

static void test_resize(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(1, 2, 4, 4));
        const double sc[] = {1, 1, 2, 1.5};
        int scales = fx_const(&f, "scales", IR_F32, TU_SHAPE(4), sc);
        int rl[3] = {x, -1, scales};
        ir_attr lin = tu_attr_str("mode", "linear");
        fx_node1(&f, IR_OP_Resize, "linear", 3, rl, 1, &lin);
        ir_attr cub[2] = {tu_attr_str("mode", "cubic"), tu_attr_int("antialias", 1)};
        const double dn[] = {1, 1, 0.5, 0.75};
        int down = fx_const(&f, "down", IR_F32, TU_SHAPE(4), dn);
        int rc[3] = {x, -1, down};
        fx_node1(&f, IR_OP_Resize, "cubic_aa", 3, rc, 2, cub);
        fx_judge(&f, "resize");
        fx_free(&f);
    }
}

/* Backward ops as the training builder emits them. */
static void test_grad_ops(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int y = fx_input_t(&f, "y", T16, TU_SHAPE(3, 7), 0.01, 0.3);
        int dy = fx_input(&f, "dy", TU_SHAPE(3, 7));
        int sm[2] = {dy, y};
        ir_attr ax = tu_attr_int("axis", -1);
        fx_node1(&f, IR_OP_SoftmaxGrad, "softmax_grad", 2, sm, 1, &ax);
        int x = fx_input(&f, "x", TU_SHAPE(2, 3, 5, 5));
        int dyc = fx_input(&f, "dy_conv", TU_SHAPE(2, 4, 5, 5));
        int64_t k3[2] = {3, 3}, pads[4] = {1, 1, 1, 1};
        ir_attr ga[2] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("pads", 4, pads)};
        int gw[2] = {x, dyc};
        fx_node1(&f, IR_OP_ConvGradWeight, "conv_grad_weight", 2, gw, 2, ga);
        int dyb = fx_input(&f, "dy_bn", TU_SHAPE(2, 3, 5, 5));
        int sc = fx_input_t(&f, "scale", T16, TU_SHAPE(3), 0.5, 1.5);
        int bg[3] = {dyb, x, sc};
        ir_attr tm = tu_attr_int("training_mode", 1);
        fx_node(&f, IR_OP_BatchNormGrad, "bn_grad", 3, bg, 3, 1, &tm, NULL);
        int64_t k2[2] = {2, 2};
        ir_attr pa[2] = {tu_attr_ints("kernel_shape", 2, k2), tu_attr_ints("strides", 2, k2)};
        int pool_x = fx_input(&f, "pool_x", TU_SHAPE(1, 2, 4, 4));
        int pool_dy = fx_input(&f, "pool_dy", TU_SHAPE(1, 2, 2, 2));
        int mp[2] = {pool_dy, pool_x};
        fx_node1(&f, IR_OP_MaxPoolGrad, "maxpool_grad", 2, mp, 2, pa);
        fx_judge(&f, "grad ops");
        fx_free(&f);
    }
}

/* The rest of the float ops with float32/float64 kernels. */
static void test_other_ops(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int a = fx_input(&f, "a", TU_SHAPE(4, 5));
        int b = fx_input(&f, "b", TU_SHAPE(5, 3));
        ir_attr eq = tu_attr_str("equation", "ij,jk->ik");
        int es[2] = {a, b};
        fx_node1(&f, IR_OP_Einsum, "einsum", 2, es, 1, &eq);
        int slope = fx_input(&f, "slope", TU_SHAPE(5));
        int pr[2] = {a, slope};
        fx_node1(&f, IR_OP_PRelu, "prelu", 2, pr, 0, NULL);
        int a2 = fx_input(&f, "a2", TU_SHAPE(4, 5));
        int mn[2] = {a, a2};
        fx_node1(&f, IR_OP_Mean, "mean", 2, mn, 0, NULL);
        const double kv[] = {3};
        int k = fx_const(&f, "k", IR_I64, TU_SHAPE(1), kv);
        int tk[2] = {a, k};
        fx_node(&f, IR_OP_TopK, "topk", 2, tk, 2, 0, NULL, NULL);
        int gx = fx_input(&f, "gx", TU_SHAPE(1, 2, 4, 4));
        int grid = fx_input(&f, "grid", TU_SHAPE(1, 3, 3, 2));
        int gs[2] = {gx, grid};
        fx_node1(&f, IR_OP_GridSample, "gridsample", 2, gs, 0, NULL);
        /* training-mode Dropout draws the same mask in float32 and float64 */
        const double ratio[] = {0.25}, on[] = {1};
        int rt = fx_const(&f, "ratio", T16, TU_SHAPE(1), ratio);
        int tm = fx_const(&f, "training", IR_BOOL, TU_SHAPE(1), on);
        int dr[3] = {a2, rt, tm};
        fx_node(&f, IR_OP_Dropout, "dropout", 3, dr, 2, 0, NULL, NULL);
        fx_judge(&f, "other ops");
        fx_free(&f);
    }
}

/* --train on a 16-bit model: the training graph computes its loss, gradients and updates in the
 * model's dtype, each node through the same widening, judged against the float64 training graph.
 * The backward chains many 16-bit roundings, so the bound is 16 units in the last place. */
static void test_training(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(4, 6));
        int w = fx_input(&f, "w", TU_SHAPE(6, 5)), b = fx_input(&f, "b", TU_SHAPE(5));
        int sc = fx_input_t(&f, "ln.scale", T16, TU_SHAPE(5), 0.5, 1.5);
        int lb = fx_input(&f, "ln.bias", TU_SHAPE(5));
        int w2 = fx_input(&f, "w2", TU_SHAPE(5, 3));
        for (int v = 1; v < f.n_bind; v++) f.g->values[f.bind[v].value].flags |= IR_VF_PARAM;
        int h, h2, h3, h4, h5, y;
        int mm[2] = {x, w};
        tu_add_node1(f.g, IR_OP_MatMul, "mm", 2, mm, 0, NULL, &h);
        int ad[2] = {h, b};
        tu_add_node1(f.g, IR_OP_Add, "add", 2, ad, 0, NULL, &h2);
        int ln[3] = {h2, sc, lb};
        ir_attr stash = tu_attr_int("stash_type", 16); /* statistics in bfloat16 */
        tu_add_node1(f.g, IR_OP_LayerNormalization, "ln", 3, ln, 1, &stash, &h3);
        tu_add_node1(f.g, IR_OP_Relu, "relu", 1, &h3, 0, NULL, &h4);
        int mm2[2] = {h4, w2};
        tu_add_node1(f.g, IR_OP_MatMul, "mm2", 2, mm2, 0, NULL, &h5);
        tu_add_node1(f.g, IR_OP_LogSoftmax, "logsoftmax", 1, &h5, 0, NULL, &y);
        ir_graph_add_output(f.g, y);
        ir_train_opts to = {.optimizer = IR_OPTIM_NONE}; /* the gradients themselves */
        ir_status st;
        ir_diag d = {{0}};
        ir_graph *tg = ir_build_training(f.g, &to, &st, &d);
        if (!tg) fail_msg("training graph: %s", d.msg);
        ir_graph_free(f.g);
        f.g = tg;
        assert_true(f.g->n_outputs == 1 + 5);
        fx_judge_rtol(&f, "training", 16);
        fx_free(&f);
    }
}

/* A small CNN trained with cross-entropy and momentum: the backward ops of Conv, BatchNorm,
 * MaxPool, Resize, AveragePool and Gemm, SoftmaxCrossEntropy and MomentumUpdate in 16 bits. */
static void test_training_cnn(void **state) {
    (void)state;
    FOR_TYPES {
        fx f;
        fx_init(&f, T16, 21);
        int x = fx_input(&f, "x", TU_SHAPE(2, 3, 8, 8));
        int w = fx_input(&f, "w", TU_SHAPE(4, 3, 3, 3)), b = fx_input(&f, "b", TU_SHAPE(4));
        int sc = fx_input_t(&f, "bn.scale", T16, TU_SHAPE(4), 0.5, 1.5);
        int bb = fx_input(&f, "bn.bias", TU_SHAPE(4));
        int w2 = fx_input(&f, "w2", TU_SHAPE(5, 4)), b2 = fx_input(&f, "b2", TU_SHAPE(5));
        for (int v = 1; v < f.n_bind; v++) f.g->values[f.bind[v].value].flags |= IR_VF_PARAM;
        int mean = fx_input(&f, "bn.running_mean", TU_SHAPE(4));
        int var = fx_input_t(&f, "bn.running_var", T16, TU_SHAPE(4), 0.5, 1.5);
        int64_t pads[4] = {1, 1, 1, 1}, k3[2] = {3, 3}, k2[2] = {2, 2};
        ir_attr ca[2] = {tu_attr_ints("pads", 4, pads), tu_attr_ints("kernel_shape", 2, k3)};
        ir_attr pa[2] = {tu_attr_ints("kernel_shape", 2, k2), tu_attr_ints("strides", 2, k2)};
        int h1, h2, h3, h4, h5, h6, h7, h8, y;
        int cv[3] = {x, w, b};
        tu_add_node1(f.g, IR_OP_Conv, "conv", 3, cv, 2, ca, &h1);
        int bn[5] = {h1, sc, bb, mean, var};
        tu_add_node1(f.g, IR_OP_BatchNormalization, "bn", 5, bn, 0, NULL, &h2);
        tu_add_node1(f.g, IR_OP_Relu, "relu", 1, &h2, 0, NULL, &h3);
        tu_add_node1(f.g, IR_OP_MaxPool, "maxpool", 1, &h3, 2, pa, &h4);
        const double up[] = {1, 1, 2, 2};
        int scales = fx_const(&f, "scales", IR_F32, TU_SHAPE(4), up);
        int rs[3] = {h4, -1, scales};
        ir_attr lin = tu_attr_str("mode", "linear");
        tu_add_node1(f.g, IR_OP_Resize, "resize", 3, rs, 1, &lin, &h5);
        tu_add_node1(f.g, IR_OP_AveragePool, "avgpool", 1, &h5, 2, pa, &h6);
        tu_add_node1(f.g, IR_OP_GlobalAveragePool, "gap", 1, &h6, 0, NULL, &h7);
        tu_add_node1(f.g, IR_OP_Flatten, "flatten", 1, &h7, 0, NULL, &h8);
        int gm[3] = {h8, w2, b2};
        ir_attr tb = tu_attr_int("transB", 1);
        tu_add_node1(f.g, IR_OP_Gemm, "fc", 3, gm, 1, &tb, &y);
        ir_graph_add_output(f.g, y);
        ir_train_opts to = {.loss = IR_LOSS_CE, .optimizer = IR_OPTIM_MOMENTUM, .lr = 0.5};
        ir_status st;
        ir_diag d = {{0}};
        ir_graph *tg = ir_build_training(f.g, &to, &st, &d);
        if (!tg) fail_msg("training graph: %s", d.msg);
        ir_graph_free(f.g);
        f.g = tg;
        int labels = ir_graph_find_value(f.g, "labels");
        assert_true(labels >= 0 && f.n_bind < MAX_BIND);
        static const int64_t lab[2] = {1, 4};
        f.bind[f.n_bind++] = (rt_binding){
            .value = labels, .dtype = IR_I64, .shape = f.g->values[labels].shape, .data = lab};
        f.data[f.n_bind - 1] = NULL;
        fx_judge_rtol(&f, "cnn training", 16);
        fx_free(&f);
    }
}

/* ir_node_workspace counts the widening copies (what the simulator and the executor allocate). */
static void test_workspace_counts_widening(void **state) {
    (void)state;
    fx f;
    fx_init(&f, IR_F16, 21);
    int x = fx_input(&f, "x", TU_SHAPE(3, 17));
    ir_attr a1 = tu_attr_int("axis", -1);
    int y = fx_node1(&f, IR_OP_Softmax, "softmax", 1, &x, 1, &a1);
    assert_int_equal(f.g->values[y].dtype, IR_F16);
    const ir_node *n = &f.g->nodes[0];
    /* x and y widened to float32, each 64-byte aligned: 2 * 256 bytes */
    assert_int_equal(ir_node_widen_bytes(f.g, n), 2 * 256);
    assert_int_equal(ir_node_workspace(f.g, n), 2 * 256);
    /* an element-wise op reads 16-bit floats itself: nothing to widen */
    int r = fx_node1(&f, IR_OP_Relu, "relu", 1, &y, 0, NULL);
    assert_int_equal(f.g->values[r].dtype, IR_F16);
    assert_int_equal(ir_node_widen_bytes(f.g, &f.g->nodes[1]), 0);
    fx_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workspace_counts_widening),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_grad_ops),
        cmocka_unit_test(test_other_ops),
        cmocka_unit_test(test_training),
        cmocka_unit_test(test_training_cnn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
