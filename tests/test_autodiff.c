/* test_autodiff.c - the training-graph builder (ir_build_training) and the gradient builders of
 * the element-wise, shape, layout, index and GEMM ops: central finite differences in float64
 * on one-op graphs (test-gradcheck.h), the losses and optimizer steps against hand
 * computation, tied weights, frozen parameters, the eager order and the error messages. */
#include "test-gradcheck.h"

#include "schedule.h"

#define F64 IR_F64
#define TOL 1e-6 /* float64 central differences with eps 1e-6 */

static gc_in P(ir_shape s) {
    return (gc_in){.kind = GC_PARAM, .dtype = F64, .shape = s};
}
static gc_in PPOS(ir_shape s) { /* positive values: Log, Sqrt, Pow bases, divisors */
    return (gc_in){.kind = GC_PARAM, .dtype = F64, .shape = s, .lo = 0.5, .hi = 1.5};
}
static gc_in CI64(int n, const int64_t *v) {
    return (gc_in){.kind = GC_CONST, .dtype = IR_I64, .shape = TU_SHAPE(n), .data = v};
}
static gc_in CF64(ir_shape s, const double *v) {
    return (gc_in){.kind = GC_CONST, .dtype = F64, .shape = s, .data = v};
}
static const gc_in NONE = {.kind = GC_CONST};

static ir_graph *train(const ir_graph *g, const ir_train_opts *o);
static const ir_tensor *out_named(const ir_graph *g, const rt_result *r, const char *name);
static void run_graph(const ir_graph *g, const rt_binding *b, int nb, rt_result *r);

/* ---------------------------------------------------------------- binary ops */

static void test_binary(void **state) {
    gc_in bc[2] = {P(TU_SHAPE(2, 3)), P(TU_SHAPE(3))};        /* row broadcast */
    gc_in bc2[2] = {P(TU_SHAPE(2, 1, 3)), P(TU_SHAPE(4, 1))}; /* both sides broadcast */
    gc_in div[2] = {P(TU_SHAPE(2, 1, 3)), PPOS(TU_SHAPE(4, 1))};
    static const ir_op_kind ops[] = {IR_OP_Add, IR_OP_Sub, IR_OP_Mul};
    for (int i = 0; i < 3; i++) {
        gc_check(ops[i], 2, bc, 1, 0, NULL, TOL);
        gc_check(ops[i], 2, bc2, 1, 0, NULL, TOL);
    }
    gc_check(IR_OP_Div, 2, div, 1, 0, NULL, TOL);
    gc_in sum3[3] = {P(TU_SHAPE(2, 3)), P(TU_SHAPE(1, 3)), P(TU_SHAPE(2, 1))};
    gc_check(IR_OP_Sum, 3, sum3, 1, 0, NULL, TOL);
    gc_check(IR_OP_Max, 3, sum3, 1, 0, NULL, TOL);
    gc_check(IR_OP_Min, 2, bc, 1, 0, NULL, TOL);
    double three = 3.0; /* fmod(x, 3) with x in [-1, 1) is x: the gradient passes through */
    gc_in mod[2] = {P(TU_SHAPE(2, 3)), CF64(TU_SCALAR_SHAPE, &three)};
    ir_attr fmod = tu_attr_int("fmod", 1);
    gc_check(IR_OP_Mod, 2, mod, 1, 1, &fmod, TOL);
    /* one value read twice (x * x) gets both contributions */
    gc_in same = P(TU_SHAPE(5));
    int ids[1];
    void *owned[1];
    ir_graph *g = gc_graph(IR_OP_Identity, 1, &same, 1, 0, NULL, ids, owned);
    int y;
    gc_node(g, IR_OP_Mul, "square", 2, (int[]){ids[0], ids[0]}, 1, &y, 0, NULL);
    g->values[g->outputs[0]].flags &= ~(unsigned)IR_VF_OUTPUT;
    g->outputs[0] = y;
    g->values[y].flags |= IR_VF_OUTPUT;
    ir_graph *tg = train(g, NULL);
    rt_result r = {0};
    run_graph(tg, NULL, 0, &r);
    const double *x = ir_blob_data(g->values[ids[0]].blob),
                 *gx = out_named(tg, &r, "p0.grad")->data;
    for (int i = 0; i < 5; i++) assert_true(fabs(gx[i] - 2 * x[i]) < 1e-12);
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(g);
    free(owned[0]);
}

static void test_pow(void **state) {
    double two = 2.0, half = 0.5, three = 3.0;
    gc_in sq[2] = {P(TU_SHAPE(2, 3)), CF64(TU_SCALAR_SHAPE, &two)};
    gc_in rt[2] = {PPOS(TU_SHAPE(2, 3)), CF64(TU_SCALAR_SHAPE, &half)};
    gc_in cube[2] = {P(TU_SHAPE(4)), CF64(TU_SHAPE(1), &three)};
    gc_in both[2] = {PPOS(TU_SHAPE(2, 3)), P(TU_SHAPE(3))};
    gc_check(IR_OP_Pow, 2, sq, 1, 0, NULL, TOL);
    gc_check(IR_OP_Pow, 2, rt, 1, 0, NULL, TOL);
    gc_check(IR_OP_Pow, 2, cube, 1, 0, NULL, TOL);
    gc_check(IR_OP_Pow, 2, both, 1, 0, NULL, TOL);
}

static void test_where(void **state) {
    static const bool cond[6] = {1, 0, 0, 1, 1, 0};
    gc_in in[3] = {{.kind = GC_CONST, .dtype = IR_BOOL, .shape = TU_SHAPE(2, 3), .data = cond},
                   P(TU_SHAPE(2, 3)),
                   P(TU_SHAPE(3))};
    gc_check(IR_OP_Where, 3, in, 1, 0, NULL, TOL);
}

/* ---------------------------------------------------------------- unary ops */

static void test_unary(void **state) {
    static const ir_op_kind any[] = {
        IR_OP_Relu,     IR_OP_Sigmoid,   IR_OP_Tanh,        IR_OP_Erf,  IR_OP_Exp,
        IR_OP_Neg,      IR_OP_Abs,       IR_OP_Softplus,    IR_OP_Elu,  IR_OP_LeakyRelu,
        IR_OP_Identity, IR_OP_HardSwish, IR_OP_HardSigmoid, IR_OP_Gelu, IR_OP_Sin,
        IR_OP_Cos,      IR_OP_Softsign,  IR_OP_Selu,        IR_OP_Celu, IR_OP_Mish};
    gc_in x = P(TU_SHAPE(3, 4));
    x.lo = -4, x.hi = 4; /* HardSwish/HardSigmoid: every branch */
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        gc_check(any[i], 1, &x, 1, 0, NULL, TOL);
    static const ir_op_kind pos[] = {IR_OP_Log, IR_OP_Sqrt, IR_OP_Reciprocal};
    gc_in xp = PPOS(TU_SHAPE(3, 4));
    for (size_t i = 0; i < 3; i++) gc_check(pos[i], 1, &xp, 1, 0, NULL, TOL);
    ir_attr alpha = tu_attr_float("alpha", 0.3f);
    gc_check(IR_OP_LeakyRelu, 1, &x, 1, 1, &alpha, TOL);
    gc_check(IR_OP_Elu, 1, &x, 1, 1, &alpha, TOL);
    ir_attr hs[2] = {tu_attr_float("alpha", 0.25f), tu_attr_float("beta", 0.4f)};
    gc_check(IR_OP_HardSigmoid, 1, &x, 1, 2, hs, TOL);
    ir_attr gelu_tanh = tu_attr_str("approximate", "tanh");
    gc_check(IR_OP_Gelu, 1, &x, 1, 1, &gelu_tanh, TOL);
    /* zero gradient almost everywhere: nothing flows, the parameter's gradient is zero */
    gc_check(IR_OP_Floor, 1, &x, 1, 0, NULL, TOL);
    double lo = -0.5, hi = 2.0;
    gc_in clip[3] = {x, CF64(TU_SCALAR_SHAPE, &lo), CF64(TU_SCALAR_SHAPE, &hi)};
    gc_check(IR_OP_Clip, 3, clip, 1, 0, NULL, TOL);
    gc_in clip_hi[3] = {x, NONE, CF64(TU_SCALAR_SHAPE, &hi)};
    gc_check(IR_OP_Clip, 3, clip_hi, 1, 0, NULL, TOL);
}

/* ReduceL1, ReduceSumSquare, ReduceLogSum (positive inputs) and ReduceLogSumExp, over one axis
 * (kept and dropped) and over all. */
static void test_reduce_more(void **state) {
    static const ir_op_kind ops[] = {IR_OP_ReduceL1, IR_OP_ReduceSumSquare, IR_OP_ReduceLogSum,
                                     IR_OP_ReduceLogSumExp};
    int64_t ax1[] = {1};
    ir_attr keep0[2] = {tu_attr_ints("axes", 1, ax1), tu_attr_int("keepdims", 0)};
    gc_in xp = PPOS(TU_SHAPE(2, 3, 4));
    for (size_t i = 0; i < 4; i++) {
        gc_check(ops[i], 1, &xp, 1, 2, keep0, TOL);
        gc_check(ops[i], 1, &xp, 1, 1, keep0, TOL);
        gc_check(ops[i], 1, &xp, 1, 0, NULL, TOL);
    }
}

static void test_dropout_cast(void **state) {
    double ratio = 0.4;
    static const bool on = true;
    gc_in dr[3] = {P(TU_SHAPE(4, 5)),
                   CF64(TU_SCALAR_SHAPE, &ratio),
                   {.kind = GC_CONST, .dtype = IR_BOOL, .shape = TU_SCALAR_SHAPE, .data = &on}};
    /* the mask depends on (seed, node name) only: the same in every run, so differences work */
    gc_check(IR_OP_Dropout, 3, dr, 1, 0, NULL, TOL);
    gc_check(IR_OP_Dropout, 3, dr, 2, 0, NULL, TOL); /* the mask requested by the file */
    double zero = 0;
    gc_in dr0[3] = {dr[0], CF64(TU_SCALAR_SHAPE, &zero), dr[2]};
    gc_check(IR_OP_Dropout, 3, dr0, 1, 0, NULL, TOL);
    /* float32 -> float64: the gradient is cast back to float32 (float32 differences, eps 1e-3) */
    gc_in x32 = {.kind = GC_PARAM, .dtype = IR_F32, .shape = TU_SHAPE(3, 4)};
    ir_attr to64 = tu_attr_int("to", 11);
    gc_check(IR_OP_Cast, 1, &x32, 1, 1, &to64, 1e-3);
}

/* ---------------------------------------------------------------- shape and layout ops */

static void test_shape_ops(void **state) {
    static const int64_t shp[] = {3, -1}, ax1[] = {1}, ax0[] = {0}, rep[] = {2, 1, 3};
    gc_in rs[2] = {P(TU_SHAPE(2, 3, 2)), CI64(2, shp)};
    gc_check(IR_OP_Reshape, 2, rs, 1, 0, NULL, TOL);
    gc_check(IR_OP_Flatten, 1, rs, 1, 0, NULL, TOL);
    gc_in sq[2] = {P(TU_SHAPE(2, 1, 3)), CI64(1, ax1)};
    gc_check(IR_OP_Squeeze, 2, sq, 1, 0, NULL, TOL);
    gc_in us[2] = {P(TU_SHAPE(2, 3)), CI64(1, ax0)};
    gc_check(IR_OP_Unsqueeze, 2, us, 1, 0, NULL, TOL);
    static const int64_t ex[] = {2, 4, 3};
    gc_in e[2] = {P(TU_SHAPE(4, 1)), CI64(3, ex)};
    gc_check(IR_OP_Expand, 2, e, 1, 0, NULL, TOL);
    gc_in t[2] = {P(TU_SHAPE(2, 2, 3)), CI64(3, rep)};
    gc_check(IR_OP_Tile, 2, t, 1, 0, NULL, TOL);
    int64_t perm[] = {2, 0, 1};
    ir_attr pa = tu_attr_ints("perm", 3, perm);
    gc_in tr = P(TU_SHAPE(2, 3, 4));
    gc_check(IR_OP_Transpose, 1, &tr, 1, 1, &pa, TOL);
    gc_check(IR_OP_Transpose, 1, &tr, 1, 0, NULL, TOL); /* default: reversed */
}

static void test_layout_ops(void **state) {
    ir_attr ax1 = tu_attr_int("axis", 1), axm1 = tu_attr_int("axis", -1);
    gc_in cat[3] = {P(TU_SHAPE(2, 1, 3)), P(TU_SHAPE(2, 4, 3)), P(TU_SHAPE(2, 2, 3))};
    gc_check(IR_OP_Concat, 3, cat, 1, 1, &ax1, TOL);
    static const int64_t parts[] = {1, 3, 2};
    gc_in sp[2] = {P(TU_SHAPE(2, 6)), CI64(3, parts)};
    gc_check(IR_OP_Split, 2, sp, 3, 1, &axm1, TOL);
    gc_in sp_eq[1] = {P(TU_SHAPE(4, 3))};
    ir_attr ax0 = tu_attr_int("axis", 0);
    gc_check(IR_OP_Split, 1, sp_eq, 2, 1, &ax0, TOL);
    static const int64_t st[] = {1, -3}, en[] = {100, -1}, axes[] = {0, 2};
    gc_in sl[4] = {P(TU_SHAPE(3, 2, 5)), CI64(2, st), CI64(2, en), CI64(2, axes)};
    gc_check(IR_OP_Slice, 4, sl, 1, 0, NULL, TOL);
    /* strided, as Swin's patch merging x[:, 0::2, 1::2] and a step past the end */
    static const int64_t st2[] = {0, 1, 1}, en2[] = {100, 100, 5}, ax2[] = {1, 2, 0},
                         sp2[] = {2, 2, 3};
    gc_in sl2[5] = {P(TU_SHAPE(5, 4, 5)), CI64(3, st2), CI64(3, en2), CI64(3, ax2), CI64(3, sp2)};
    gc_check(IR_OP_Slice, 5, sl2, 1, 0, NULL, TOL);
    static const int64_t pads[] = {1, 0, 2, 0, -1, 1}; /* a crop too */
    gc_in pd[2] = {P(TU_SHAPE(2, 3, 4)), CI64(6, pads)};
    gc_check(IR_OP_Pad, 2, pd, 1, 0, NULL, TOL);
    /* reflect, edge and wrap (PadGrad): pads as wide as the input and wider (reflect bounces
     * more than once, wrap repeats), a size-1 dim, one-sided pads, and opset 18's axes */
    static const char *const modes[] = {"reflect", "edge", "wrap", "constant"};
    static const int64_t wide[] = {2, 0, 1, 1, 3, 7}, one[] = {0, 3, 2, 1, 0, 0},
                         ax_pads[] = {1, 4, 2, 3}, ax[] = {-1, 0};
    for (int m = 0; m < 4; m++) {
        ir_attr mode = tu_attr_str("mode", modes[m]);
        gc_in w3[2] = {P(TU_SHAPE(3, 2, 4)), CI64(6, wide)};
        gc_check(IR_OP_Pad, 2, w3, 1, 1, &mode, TOL);
        gc_in o3[2] = {P(TU_SHAPE(2, 1, 5)), CI64(6, one)};
        gc_check(IR_OP_Pad, 2, o3, 1, 1, &mode, TOL);
        gc_in a4[4] = {P(TU_SHAPE(3, 2, 2, 5)), CI64(4, ax_pads), NONE, CI64(2, ax)};
        gc_check(IR_OP_Pad, 4, a4, 1, 1, &mode, TOL);
        static const int64_t p1[] = {3, 5};
        gc_in v1[2] = {P(TU_SHAPE(4)), CI64(2, p1)};
        gc_check(IR_OP_Pad, 2, v1, 1, 1, &mode, TOL);
    }
}

static void test_index_ops(void **state) {
    static const int64_t idx[] = {2, 0, 2, 1}, idx2[2][2] = {{1, 0}, {-1, 1}};
    gc_in g0[2] = {P(TU_SHAPE(3, 4)),
                   {.kind = GC_CONST, .dtype = IR_I64, .shape = TU_SHAPE(2, 2), .data = idx}};
    gc_check(IR_OP_Gather, 2, g0, 1, 0, NULL, TOL); /* repeated indices accumulate */
    ir_attr ax1 = tu_attr_int("axis", 1);
    gc_in g1[2] = {P(TU_SHAPE(2, 3, 2)),
                   {.kind = GC_CONST, .dtype = IR_I64, .shape = TU_SHAPE(2), .data = idx}};
    gc_check(IR_OP_Gather, 2, g1, 1, 1, &ax1, TOL);
    static const int64_t one = 1;
    gc_in gs[2] = {P(TU_SHAPE(2, 3, 2)),
                   {.kind = GC_CONST, .dtype = IR_I64, .shape = TU_SCALAR_SHAPE, .data = &one}};
    gc_check(IR_OP_Gather, 2, gs, 1, 1, &ax1, TOL); /* scalar index: x[:, 1] */
    static const int64_t k2[] = {2};
    gc_in tk[2] = {P(TU_SHAPE(3, 5)), CI64(1, k2)};
    gc_check(IR_OP_TopK, 2, tk, 2, 0, NULL, TOL); /* Values and Indices, along the last axis */
    ir_attr tk_attrs[2] = {tu_attr_int("axis", 0), tu_attr_int("largest", 0)};
    gc_check(IR_OP_TopK, 2, tk, 1, 2, tk_attrs, TOL); /* the smallest, along axis 0 */
    gc_in ge[2] = {P(TU_SHAPE(3, 2)),
                   {.kind = GC_CONST, .dtype = IR_I64, .shape = TU_SHAPE(2, 2), .data = idx2}};
    gc_check(IR_OP_GatherElements, 2, ge, 1, 0, NULL, TOL);
    static const int64_t k = 1;
    gc_in tl[2] = {P(TU_SHAPE(2, 3, 3)), CI64(1, &k)};
    ir_attr lower = tu_attr_int("upper", 0);
    gc_check(IR_OP_Trilu, 2, tl, 1, 1, &lower, TOL);
    gc_check(IR_OP_Trilu, 1, tl, 1, 0, NULL, TOL);
}

/* ---------------------------------------------------------------- GEMM family */

static void test_matmul(void **state) {
    gc_in mm[][2] = {
        {P(TU_SHAPE(3, 4)), P(TU_SHAPE(4, 5))},
        {P(TU_SHAPE(2, 3, 4)), P(TU_SHAPE(4, 5))},       /* Linear on a sequence */
        {P(TU_SHAPE(2, 1, 3, 4)), P(TU_SHAPE(3, 4, 2))}, /* broadcast batch */
        {P(TU_SHAPE(4)), P(TU_SHAPE(2, 4, 3))},          /* 1-D left */
        {P(TU_SHAPE(2, 3, 4)), P(TU_SHAPE(4))},          /* 1-D right */
        {P(TU_SHAPE(4)), P(TU_SHAPE(4))},                /* dot */
    };
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
        gc_check(IR_OP_MatMul, 2, mm[i], 1, 0, NULL, TOL);
}

static void test_gemm(void **state) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ir_attr at[4] = {tu_attr_int("transA", ta), tu_attr_int("transB", tb),
                             tu_attr_float("alpha", 0.75f), tu_attr_float("beta", 1.5f)};
            gc_in in[3] = {P(ta ? TU_SHAPE(4, 3) : TU_SHAPE(3, 4)),
                           P(tb ? TU_SHAPE(5, 4) : TU_SHAPE(4, 5)), P(TU_SHAPE(5))};
            gc_check(IR_OP_Gemm, 3, in, 1, 4, at, TOL);
            in[2] = P(TU_SHAPE(3, 1));
            gc_check(IR_OP_Gemm, 3, in, 1, 2, at, TOL);
            gc_check(IR_OP_Gemm, 2, in, 1, 4, at, TOL); /* no C */
        }
}

/* ---------------------------------------------------------------- whole graphs */

/* x[4,3] (data) -> Gemm(W1[5,3], b1, transB) -> Relu -> Gemm(W2[2,5], b2, transB) -> y[4,2] */
typedef struct mlp {
    ir_graph *g;
    int x, w1, b1, w2, b2;
} mlp;

static double xv[12], w1v[15], b1v[5], w2v[10], b2v[2];

static mlp make_mlp(ir_dtype t) {
    mlp m = {.g = ir_graph_new()};
    gc_fill(xv, F64, 12, 1, -1, 1);
    gc_fill(w1v, F64, 15, 2, -1, 1);
    gc_fill(b1v, F64, 5, 3, -1, 1);
    gc_fill(w2v, F64, 10, 4, -1, 1);
    gc_fill(b2v, F64, 2, 5, -1, 1);
    ir_graph *g = m.g;
    ir_shape xs = TU_SHAPE(4, 3);
    m.x = ir_graph_add_value(g, "x", t, &xs);
    ir_graph_add_input(g, m.x);
    g->values[m.x].flags |= IR_VF_DATA;
    unsigned pf = IR_VF_PARAM | IR_VF_INITIALIZER;
    m.w1 = gc_const(g, "W1", t, TU_SHAPE(5, 3), w1v, pf);
    m.b1 = gc_const(g, "b1", t, TU_SHAPE(5), b1v, pf);
    m.w2 = gc_const(g, "W2", t, TU_SHAPE(2, 5), w2v, pf);
    m.b2 = gc_const(g, "b2", t, TU_SHAPE(2), b2v, pf);
    ir_attr tb = tu_attr_int("transB", 1);
    int h, a, y;
    gc_node(g, IR_OP_Gemm, "fc1", 3, (int[]){m.x, m.w1, m.b1}, 1, &h, 1, &tb);
    gc_node(g, IR_OP_Relu, "relu", 1, &h, 1, &a, 0, NULL);
    gc_node(g, IR_OP_Gemm, "fc2", 3, (int[]){a, m.w2, m.b2}, 1, &y, 1, &tb);
    ir_graph_add_output(g, y);
    return m;
}

static ir_graph *train(const ir_graph *g, const ir_train_opts *o) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(g, o, &st, &d);
    if (!tg) fail_msg("ir_build_training: %s", d.msg);
    return tg;
}

static const ir_tensor *out_named(const ir_graph *g, const rt_result *r, const char *name) {
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->values[g->outputs[i]].name, name) == 0) return &r->outputs[i];
    fail_msg("no output named %s", name);
    return NULL;
}

static void run_graph(const ir_graph *g, const rt_binding *b, int nb, rt_result *r) {
    ir_diag d = {{0}};
    rt_options o = {.seed = 3, .poison_freed = true};
    if (rt_run(g, b, nb, &o, r, &d) != IR_OK) fail_msg("rt_run: %s", d.msg);
    /* the executor's measured peak is the simulator's, byte for byte (optimizer updates too) */
    sched_memory m;
    if (sched_memory_compute(g, NULL, &m, &d) != IR_OK) fail_msg("sched: %s", d.msg);
    assert_int_equal(r->peak_bytes, m.peak_bytes);
    for (int s = 0; s < m.n_steps; s++) assert_int_equal(r->step_bytes[s], m.step_bytes[s]);
    sched_memory_free(&m);
}

/* The forward output y of the MLP for its x, in float64. */
static void mlp_forward(const mlp *m, double *y) {
    rt_result r = {0};
    rt_binding b = {.value = m->x, .dtype = F64, .shape = TU_SHAPE(4, 3), .data = xv};
    run_graph(m->g, &b, 1, &r);
    memcpy(y, r.outputs[0].data, 8 * sizeof(double));
    rt_result_free(&r);
}

static void assert_close(const double *a, const double *b, int n, double tol, const char *what) {
    for (int i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > tol * fmax(1, fabs(b[i])))
            fail_msg("%s[%d]: %.17g, expected %.17g", what, i, a[i], b[i]);
}

/* mse and ce: the loss and the gradient reaching b2 (= dL/dy summed over rows) against a hand
 * computation from the forward output. */
static void test_losses(void **state) {
    mlp m = make_mlp(F64);
    double y[8], t[8], db2[2] = {0, 0}, loss = 0;
    mlp_forward(&m, y);
    gc_fill(t, F64, 8, 77, -1, 1);
    for (int i = 0; i < 8; i++) {
        loss += (y[i] - t[i]) * (y[i] - t[i]) / 8;
        db2[i % 2] += 2 * (y[i] - t[i]) / 8;
    }
    ir_train_opts o = {.loss = IR_LOSS_MSE};
    ir_graph *tg = train(m.g, &o);
    int tv = ir_graph_find_value(tg, "target");
    assert_true(tv >= 0 && (tg->values[tv].flags & IR_VF_INPUT));
    rt_binding b[2] = {
        {.value = ir_graph_find_value(tg, "x"), .dtype = F64, .shape = TU_SHAPE(4, 3), .data = xv},
        {.value = tv, .dtype = F64, .shape = TU_SHAPE(4, 2), .data = t}};
    rt_result r = {0};
    run_graph(tg, b, 2, &r);
    assert_close(out_named(tg, &r, "loss")->data, &loss, 1, 1e-12, "mse loss");
    assert_close(out_named(tg, &r, "b2.grad")->data, db2, 2, 1e-12, "mse db2");
    rt_result_free(&r);
    ir_graph_free(tg);

    int64_t labels[4] = {1, 0, 0, 1};
    loss = 0;
    db2[0] = db2[1] = 0;
    for (int i = 0; i < 4; i++) {
        double mx = fmax(y[2 * i], y[2 * i + 1]);
        double z = exp(y[2 * i] - mx) + exp(y[2 * i + 1] - mx);
        loss += (mx + log(z) - y[2 * i + labels[i]]) / 4;
        for (int c = 0; c < 2; c++) db2[c] += (exp(y[2 * i + c] - mx) / z - (c == labels[i])) / 4;
    }
    o.loss = IR_LOSS_CE;
    tg = train(m.g, &o);
    int lv = ir_graph_find_value(tg, "labels");
    assert_true(lv >= 0 && tg->values[lv].dtype == IR_I64);
    b[1] = (rt_binding){.value = lv, .dtype = IR_I64, .shape = TU_SHAPE(4), .data = labels};
    run_graph(tg, b, 2, &r);
    assert_close(out_named(tg, &r, "loss")->data, &loss, 1, 1e-12, "ce loss");
    assert_close(out_named(tg, &r, "b2.grad")->data, db2, 2, 1e-12, "ce db2");
    assert_int_equal(ir_shape_numel(&out_named(tg, &r, "loss")->shape), 1);
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(m.g);
}

/* One SGD, momentum and Adam step from the gradients of the plain training graph, by hand. */
static void test_optimizers(void **state) {
    mlp m = make_mlp(F64);
    ir_graph *tg = train(m.g, NULL);
    rt_binding b = {
        .value = ir_graph_find_value(tg, "x"), .dtype = F64, .shape = TU_SHAPE(4, 3), .data = xv};
    rt_result r = {0};
    run_graph(tg, &b, 1, &r);
    double g1[15];
    memcpy(g1, out_named(tg, &r, "W1.grad")->data, sizeof g1);
    rt_result_free(&r);
    ir_graph_free(tg);
    const float lr = 0.05f;
    static const ir_optimizer_kind kinds[] = {IR_OPTIM_SGD, IR_OPTIM_MOMENTUM, IR_OPTIM_ADAM};
    for (int k = 0; k < 3; k++) {
        ir_train_opts o = {.optimizer = kinds[k], .lr = lr};
        tg = train(m.g, &o);
        b.value = ir_graph_find_value(tg, "x");
        run_graph(tg, &b, 1, &r);
        double want[15], m1[15], v1[15];
        /* step 1 by hand, with the float32 attribute values the update op stores */
        double l = (double)lr, b1 = (double)0.9f, b2 = (double)0.999f, eps = (double)1e-8f;
        for (int i = 0; i < 15; i++) {
            double g = g1[i];
            m1[i] = (1 - b1) * g;
            v1[i] = (1 - b2) * g * g;
            want[i] = kinds[k] == IR_OPTIM_ADAM
                          ? w1v[i] - l / (1 - b1) * m1[i] / (sqrt(v1[i]) / sqrt(1 - b2) + eps)
                          : w1v[i] - l * g; /* momentum's first buffer is the gradient */
        }
        assert_close(out_named(tg, &r, "W1.new")->data, want, 15, 1e-6, "W1.new");
        /* in place (IR_OPF_INPLACE): no update step allocates, the gradient it read is freed */
        for (int s = 1; s < tg->n_nodes; s++) {
            const ir_op_def *def = ir_op_get(tg->nodes[s].op);
            if (def->flags & IR_OPF_INPLACE) assert_true(r.step_bytes[s] <= r.step_bytes[s - 1]);
        }
        /* and the forward graph's weights (shared blobs) are not written */
        assert_memory_equal(ir_blob_data(m.g->values[m.w1].blob), w1v, sizeof w1v);
        if (kinds[k] == IR_OPTIM_MOMENTUM)
            assert_close(out_named(tg, &r, "W1.momentum_buffer.new")->data, g1, 15, 1e-12,
                         "momentum buffer");
        if (kinds[k] == IR_OPTIM_ADAM) {
            assert_close(out_named(tg, &r, "W1.exp_avg.new")->data, m1, 15, 1e-12, "exp_avg");
            assert_close(out_named(tg, &r, "W1.exp_avg_sq.new")->data, v1, 15, 1e-12, "exp_avg_sq");
        }
        rt_result_free(&r);
        ir_graph_free(tg);
    }
    ir_graph_free(m.g);
}

/* A parameter read twice gets the sum of both gradients (one output), as tied embeddings. */
static void test_tied_weights(void **state) {
    ir_graph *g = ir_graph_new();
    double wv[12], xv2[6];
    gc_fill(wv, F64, 12, 8, -1, 1);
    gc_fill(xv2, F64, 6, 9, -1, 1);
    int w = gc_const(g, "W", F64, TU_SHAPE(3, 4), wv, IR_VF_PARAM | IR_VF_INITIALIZER);
    int x = gc_const(g, "X", F64, TU_SHAPE(2, 3), xv2, 0);
    static const int64_t idx[2] = {2, 0};
    int ix = gc_const(g, "idx", IR_I64, TU_SHAPE(2), idx, 0);
    int h, e, y;
    gc_node(g, IR_OP_MatMul, "mm", 2, (int[]){x, w}, 1, &h, 0, NULL);   /* [2,4] */
    gc_node(g, IR_OP_Gather, "emb", 2, (int[]){w, ix}, 1, &e, 0, NULL); /* [2,4] */
    gc_node(g, IR_OP_Mul, "mul", 2, (int[]){h, e}, 1, &y, 0, NULL);
    ir_graph_add_output(g, y);
    ir_graph *tg = train(g, NULL);
    assert_int_equal(tg->n_outputs, 2); /* loss, W.grad */
    rt_result r = {0};
    run_graph(tg, NULL, 0, &r);
    const double *gw = out_named(tg, &r, "W.grad")->data;
    /* by hand: y = (X W) * W[idx]; dW = X^T E + scatter(idx, X W) */
    double want[12] = {0}, hv[8], ev[8];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            hv[i * 4 + j] = 0;
            for (int k = 0; k < 3; k++) hv[i * 4 + j] += xv2[i * 3 + k] * wv[k * 4 + j];
            ev[i * 4 + j] = wv[idx[i] * 4 + j];
        }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            for (int k = 0; k < 3; k++) want[k * 4 + j] += xv2[i * 3 + k] * ev[i * 4 + j];
            want[idx[i] * 4 + j] += hv[i * 4 + j];
        }
    assert_close(gw, want, 12, 1e-12, "tied W.grad");
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(g);
}

/* MatMul(X, Transpose(W)), the Linear layer as timm and torchvision's ViT export it: the input's
 * gradient reads W itself (a transposed view of the forward's W^T), so the backward makes no
 * weight-sized copy; both gradients by hand (sum loss: dH = 1). */
static void test_matmul_transposed_weight(void **state) {
    ir_graph *g = ir_graph_new();
    double wv[20], xv[24];
    gc_fill(wv, F64, 20, 3, -1, 1);
    gc_fill(xv, F64, 24, 4, -1, 1);
    int w = gc_const(g, "W", F64, TU_SHAPE(5, 4), wv, IR_VF_PARAM | IR_VF_INITIALIZER);
    int x = gc_const(g, "X", F64, TU_SHAPE(2, 3, 4), xv, IR_VF_PARAM | IR_VF_INITIALIZER);
    int64_t perm[2] = {1, 0};
    ir_attr at = {.name = "perm", .type = IR_ATTR_INTS, .n = 2, .ints = perm};
    int wt, h;
    gc_node(g, IR_OP_Transpose, "wt", 1, &w, 1, &wt, 1, &at);          /* [4,5] */
    gc_node(g, IR_OP_MatMul, "mm", 2, (int[]){x, wt}, 1, &h, 0, NULL); /* [2,3,5] */
    ir_graph_add_output(g, h);
    ir_graph *tg = train(g, NULL);
    int wt_t = -1, readers = 0;
    for (int i = 0; i < tg->n_nodes; i++)
        if (!strcmp(tg->nodes[i].name, "wt")) wt_t = tg->nodes[i].out[0];
    assert_true(wt_t >= 0);
    for (int i = 0; i < tg->n_nodes; i++)
        for (int k = 0; k < tg->nodes[i].n_in; k++) readers += tg->nodes[i].in[k] == wt_t;
    assert_int_equal(readers, 1); /* the forward MatMul alone */
    rt_result r = {0};
    run_graph(tg, NULL, 0, &r);
    double want_x[24], want_w[20] = {0};
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 4; k++) {
            want_x[i * 4 + k] = 0;
            for (int n = 0; n < 5; n++) want_x[i * 4 + k] += wv[n * 4 + k];
            for (int n = 0; n < 5; n++) want_w[n * 4 + k] += xv[i * 4 + k];
        }
    assert_close(out_named(tg, &r, "X.grad")->data, want_x, 24, 1e-12, "X.grad");
    assert_close(out_named(tg, &r, "W.grad")->data, want_w, 20, 1e-12, "W.grad");
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(g);
}

/* Frozen parameters (no IR_VF_PARAM, as --frozen leaves them) get no gradient output, and
 * nothing is computed for them: the first layer's weight gradient Gemm disappears. */
static void test_frozen(void **state) {
    mlp m = make_mlp(F64);
    ir_graph *full = train(m.g, NULL);
    m.g->values[m.w1].flags &= ~(unsigned)IR_VF_PARAM;
    m.g->values[m.b1].flags &= ~(unsigned)IR_VF_PARAM;
    ir_graph *part = train(m.g, NULL);
    assert_int_equal(full->n_outputs, 5);
    assert_int_equal(part->n_outputs, 3);
    assert_true(ir_graph_find_value(part, "W1.grad") < 0);
    assert_true(part->n_nodes < full->n_nodes);
    rt_binding b = {.value = m.x, .dtype = F64, .shape = TU_SHAPE(4, 3), .data = xv};
    rt_result r1 = {0}, r2 = {0};
    b.value = ir_graph_find_value(full, "x");
    run_graph(full, &b, 1, &r1);
    b.value = ir_graph_find_value(part, "x");
    run_graph(part, &b, 1, &r2);
    assert_close(out_named(part, &r2, "W2.grad")->data, out_named(full, &r1, "W2.grad")->data, 10,
                 0, "W2.grad");
    rt_result_free(&r1);
    rt_result_free(&r2);
    ir_graph_free(full);
    ir_graph_free(part);
    /* nothing trainable: the graph is the forward and the loss */
    m.g->values[m.w2].flags &= ~(unsigned)IR_VF_PARAM;
    m.g->values[m.b2].flags &= ~(unsigned)IR_VF_PARAM;
    ir_graph *none = train(m.g, NULL);
    assert_int_equal(none->n_outputs, 1);
    assert_int_equal(none->n_nodes, 4);
    ir_graph_free(none);
    ir_graph_free(m.g);
}

/* g->nodes is the eager order: the forward as it was, the loss, then backward nodes whose
 * forward node indices never increase, then the updates. */
static void test_eager_order(void **state) {
    mlp m = make_mlp(IR_F32);
    ir_train_opts o = {.optimizer = IR_OPTIM_ADAM};
    ir_graph *tg = train(m.g, &o);
    static const char *const fwd[] = {"fc1", "relu", "fc2"};
    for (int i = 0; i < 3; i++) assert_string_equal(tg->nodes[i].name, fwd[i]);
    assert_int_equal(tg->nodes[3].op, IR_OP_ReduceSum); /* the loss */
    int last = 3, updates = 0;
    for (int i = 4; i < tg->n_nodes; i++) {
        const ir_node *n = &tg->nodes[i];
        if (n->op == IR_OP_AdamUpdate) {
            updates++;
            continue;
        }
        assert_int_equal(updates, 0); /* every update after every backward node */
        int k = 3;
        for (int f = 0; f < 3; f++)
            if (strncmp(n->name, fwd[f], strlen(fwd[f])) == 0 && n->name[strlen(fwd[f])] == '/')
                k = f;
        assert_true(k <= last);
        last = k;
    }
    assert_int_equal(updates, 4);
    ir_graph_free(tg);
    ir_graph_free(m.g);
}

static void test_errors(void **state) {
    /* a divisor of Mod that needs a gradient: the message names the node and the cause */
    ir_graph *g = ir_graph_new();
    double a[3] = {1, 2, 3}, bb[3] = {2, 2, 2};
    int x = gc_const(g, "a", F64, TU_SHAPE(3), a, 0);
    int p = gc_const(g, "b", F64, TU_SHAPE(3), bb, IR_VF_PARAM | IR_VF_INITIALIZER);
    int y;
    ir_attr fm = tu_attr_int("fmod", 1);
    gc_node(g, IR_OP_Mod, "the_mod", 2, (int[]){x, p}, 1, &y, 1, &fm);
    ir_graph_add_output(g, y);
    ir_diag d = {{0}};
    ir_status st;
    assert_null(ir_build_training(g, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "the_mod"));
    assert_non_null(strstr(d.msg, "divisor"));
    ir_graph_free(g);
    /* an integer first output cannot be trained */
    g = ir_graph_new();
    int64_t iv[2] = {1, 2};
    int c = gc_const(g, "c", IR_I64, TU_SHAPE(2), iv, 0);
    gc_node(g, IR_OP_Identity, "id", 1, &c, 1, &y, 0, NULL);
    ir_graph_add_output(g, y);
    assert_null(ir_build_training(g, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    ir_graph_free(g);
    /* --target naming a value of the wrong shape */
    mlp m = make_mlp(F64);
    ir_train_opts o = {.loss = IR_LOSS_MSE, .target = "W1"};
    assert_null(ir_build_training(m.g, &o, &st, &d));
    assert_non_null(strstr(d.msg, "W1"));
    ir_graph_free(m.g);
}

/* Integer values never get gradients: index computations stay forward-only. */
static void test_integer_paths(void **state) {
    static const int64_t idx[3] = {0, 2, 1};
    gc_in in[2] = {P(TU_SHAPE(3, 2)),
                   {.kind = GC_DATA, .dtype = IR_I64, .shape = TU_SHAPE(3), .data = idx}};
    gc_check(IR_OP_Gather, 2, in, 1, 0, NULL, TOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_reduce_more),
        cmocka_unit_test(test_dropout_cast),
        cmocka_unit_test(test_shape_ops),
        cmocka_unit_test(test_layout_ops),
        cmocka_unit_test(test_index_ops),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_losses),
        cmocka_unit_test(test_optimizers),
        cmocka_unit_test(test_tied_weights),
        cmocka_unit_test(test_matmul_transposed_weight),
        cmocka_unit_test(test_frozen),
        cmocka_unit_test(test_eager_order),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_integer_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
