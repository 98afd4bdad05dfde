/* test_grad_compute.c - gradients of the compute ops (tag adk): the builders of grad-conv.c,
 * grad-pool.c, grad-norm.c, grad-reduce.c and the backward ops of ops-grad-*.c.
 *
 * Builders: a one-node forward graph whose differentiable inputs are parameters. The builder is
 * driven the way ir_build_training drives it, seeded with dL/dY = w (random), so it computes the
 * gradient of L = sum(w * f(x)), and every element is compared with central finite differences of
 * L from runs of the forward graph. Reductions and CumSum run float64 (eps 1e-6, rel 1e-6); the
 * other cases run in float32 with eps 1e-2 (1e-3 for max-pooling, whose inputs are spread so that
 * no perturbation changes an argmax) and rel tolerance 1e-3 on inputs in [-1, 1) (observed errors
 * stay below 3e-4; the relative error's denominator is at least 1, since BN's dX under a sum loss
 * vanishes), and then again in float64 with eps 1e-6 and tolerance 1e-6 (check_case). Some cases go
 * through ir_build_training itself (sum loss, w = 1). Backward kernels: each backward op against a
 * naive reference, on the cases finite differences cannot probe (ties, zeros, windows in the
 * padding); the linear ones (AveragePoolGrad, ResizeGrad) against the forward kernel's adjoint,
 * built column by column. */
#include "test-util.h"

#include "ir-train.h"
#include "rt.h"

/* ---------------------------------------------------------------- test data */

/* Buffers of one test, freed by pool_free (cmocka teardown). */
static void *pool[128];
static int n_pool;

static void *pool_alloc(size_t bytes) {
    assert_true(n_pool < 128);
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    return pool[n_pool++] = p;
}

static int pool_free(void **st) {
    for (int i = 0; i < n_pool; i++) free(pool[i]);
    n_pool = 0;
    return 0;
}

static double urand(uint64_t seed, int64_t i) { /* [-1, 1) */
    return (double)(ir_mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i) >> 11) /
               (double)(1ULL << 53) * 2.0 -
           1.0;
}

static void *rnd(ir_dtype t, ir_shape s, uint64_t seed) {
    int64_t n = ir_shape_numel(&s);
    void *p = pool_alloc((size_t)n * ir_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ir_store_f64(p, t, i, urand(seed, i));
    return p;
}

/* Distinct values k * step in a seeded order: no perturbation below step/2 changes an argmax. */
static float *spread(ir_shape s, uint64_t seed, float step) {
    int64_t n = ir_shape_numel(&s);
    float *p = pool_alloc(sizeof(float) * (size_t)n);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(ir_mix64(seed + (uint64_t)i) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)(perm[i] - n / 2) * step;
    free(perm);
    return p;
}

/* ---------------------------------------------------------------- finite-difference harness */

typedef struct gin {
    ir_dtype t;
    ir_shape s;
    const void *data; /* NULL: an omitted optional input */
    bool constant;    /* a graph constant (axes, scales, running statistics) */
    bool diff;        /* a parameter: differentiated and perturbed */
} gin;

static gin P(ir_dtype t, ir_shape s, const void *p) {
    return (gin){.t = t, .s = s, .data = p, .diff = true};
}
static gin K(ir_dtype t, ir_shape s, const void *p) {
    return (gin){.t = t, .s = s, .data = p, .constant = true};
}
static gin KI(int n, const int64_t *v) {
    return K(IR_I64, ir_shape_make(1, (int64_t[]){n}), v);
}
static const gin ABSENT = {.data = NULL};

typedef struct gcase {
    ir_op_kind op;
    int n_in;
    gin in[6];
    int n_out; /* forward outputs created; the first is f(x) */
    int n_attrs;
    ir_attr attrs[10];
    int64_t opset; /* 0: 17 */
    double eps, tol;
    bool train; /* through ir_build_training with a sum loss (w = 1) */
} gcase;

static ir_graph *fwd_graph(const gcase *k) {
    ir_graph *g = ir_graph_new();
    int ins[8], outs[4];
    g->opset = k->opset ? k->opset : 17;
    for (int i = 0; i < k->n_in; i++) {
        const gin *in = &k->in[i];
        char nm[16];
        ins[i] = -1;
        if (!in->data) continue;
        snprintf(nm, sizeof nm, "in%d", i);
        ins[i] = ir_graph_add_value(g, nm, in->t, &in->s);
        if (in->constant) {
            size_t bytes = (size_t)ir_shape_numel(&in->s) * ir_dtype_size(in->t);
            ir_blob *b = ir_blob_new(bytes);
            memcpy(ir_blob_data(b), in->data, bytes);
            g->values[ins[i]].blob = b;
            g->values[ins[i]].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
        } else {
            ir_graph_add_input(g, ins[i]);
            g->values[ins[i]].flags |= in->diff ? IR_VF_PARAM : IR_VF_DATA;
        }
    }
    for (int i = 0; i < k->n_out; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", i);
        outs[i] = ir_graph_add_value(g, nm, IR_F32, NULL);
    }
    ir_graph_add_node(g, k->op, "fwd", k->n_in, ins, k->n_out, outs, k->n_attrs, k->attrs);
    ir_diag d = {{0}};
    ir_status st = ir_node_infer(g, &g->nodes[0], &d);
    if (st != IR_OK) fail_msg("forward inference: %s", d.msg);
    ir_graph_add_output(g, outs[0]);
    return g;
}

/* Bindings of every non-constant input "in<i>" of g, with the test's (perturbed) data. */
static int bind(const ir_graph *g, const gcase *k, void *const *data, rt_binding *b) {
    int nb = 0;
    for (int i = 0; i < k->n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        int v = ir_graph_find_value(g, nm);
        if (!k->in[i].data || k->in[i].constant || v < 0) continue;
        b[nb++] =
            (rt_binding){.value = v, .dtype = k->in[i].t, .shape = k->in[i].s, .data = data[i]};
    }
    return nb;
}

static rt_result run(const ir_graph *g, const gcase *k, void *const *data) {
    rt_binding b[8];
    rt_result r;
    ir_diag d = {{0}};
    ir_status st = rt_run(g, b, bind(g, k, data, b), NULL, &r, &d);
    if (st != IR_OK) fail_msg("run: %s", d.msg);
    return r;
}

static double loss(const ir_graph *fwd, const gcase *k, void *const *data, const double *w) {
    rt_result r = run(fwd, k, data);
    double L = 0;
    for (int64_t j = 0; j < ir_tensor_numel(&r.outputs[0]); j++)
        L += w[j] * ir_load_f64(r.outputs[0].data, r.outputs[0].dtype, j);
    rt_result_free(&r);
    return L;
}

/* The builder of the forward node, driven as ir_build_training's reverse sweep drives it, with
 * dL/dY = w; outputs: the gradients of the parameters in input order (out_of[i] = the output
 * index of input i's gradient, -1 when none was emitted, i.e. zero). */
static ir_graph *builder_graph(const ir_graph *fwd, const double *w, int *out_of) {
    ir_graph *g = ir_graph_clone(fwd);
    const int y = g->outputs[0];
    const ir_dtype t = g->values[y].dtype;
    const ir_shape ys = g->values[y].shape;
    ir_blob *wb = ir_blob_new((size_t)ir_shape_numel(&ys) * ir_dtype_size(t));
    for (int64_t j = 0; j < ir_shape_numel(&ys); j++) ir_store_f64(ir_blob_data(wb), t, j, w[j]);
    int wv = ir_graph_add_value(g, "seed", t, &ys);
    g->values[wv].blob = wb;
    g->values[wv].flags |= IR_VF_CONST;

    ir_ad ad;
    assert_int_equal(ir_ad_init(&ad, g), IR_OK);
    ir_node *n = &g->nodes[0];
    bool any = false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && (g->values[n->in[i]].flags & IR_VF_PARAM)) {
            ad.needs[n->in[i]] = 1;
            any = true;
        }
    for (int j = 0; j < n->n_out && any; j++)
        if (ir_dtype_is_float(g->values[n->out[j]].dtype)) ad.needs[n->out[j]] = 1;
    ad.grad[y] = wv;
    ad.gout = malloc(sizeof(int) * (size_t)n->n_out);
    ad.n_gout = ad.cap_gout = n->n_out;
    for (int j = 0; j < n->n_out; j++) ad.gout[j] = ad.grad[n->out[j]];
    ad.node_copy = *n;
    ir_grad_ctx c = {.g = g,
                     .node = &ad.node_copy,
                     .node_index = 0,
                     .n_in = n->n_in,
                     .n_out = n->n_out,
                     .in = n->in,
                     .out = n->out,
                     .gout = ad.gout,
                     .ad = &ad};
    ir_status st = ir_op_get(n->op)->grad(&c);
    if (st != IR_OK) fail_msg("builder: %s", ad.d.msg);
    g->values[y].flags &= ~(unsigned)IR_VF_OUTPUT;
    g->n_outputs = 0;
    n = &g->nodes[0];
    for (int i = 0; i < n->n_in; i++) {
        int gv = n->in[i] >= 0 && ad.needs[n->in[i]] ? ad.grad[n->in[i]] : -1;
        out_of[i] = gv >= 0 ? g->n_outputs : -1;
        if (gv >= 0) ir_graph_add_output(g, gv);
    }
    ir_ad_free(&ad);
    ir_graph_prune(g);
    ir_diag d = {{0}};
    if ((st = ir_graph_validate(g, &d)) != IR_OK) fail_msg("validate: %s", d.msg);
    return g;
}

/* ir_build_training with a sum loss; out_of[i] = the output index of "in<i>.grad". */
static ir_graph *training_graph(const ir_graph *fwd, const gcase *k, int *out_of) {
    ir_train_opts o = {.loss = IR_LOSS_SUM};
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_build_training(fwd, &o, &st, &d);
    if (!g) fail_msg("ir_build_training: %s", d.msg);
    for (int i = 0; i < k->n_in; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "in%d.grad", i);
        out_of[i] = -1;
        for (int j = 0; j < g->n_outputs; j++)
            if (!strcmp(g->values[g->outputs[j]].name, nm)) out_of[i] = j;
        if (k->in[i].diff) assert_true(out_of[i] >= 0);
    }
    return g;
}

static void check_case_as_given(const gcase *k) {
    ir_graph *fwd = fwd_graph(k);
    const ir_value *yv = &fwd->values[fwd->outputs[0]];
    const int64_t ny = ir_shape_numel(&yv->shape);
    double *w = pool_alloc(sizeof(double) * (size_t)ny);
    for (int64_t j = 0; j < ny; j++) w[j] = k->train ? 1.0 : urand(777, j);
    void *data[8] = {0};
    for (int i = 0; i < k->n_in; i++) {
        if (!k->in[i].data) continue;
        size_t bytes = (size_t)ir_shape_numel(&k->in[i].s) * ir_dtype_size(k->in[i].t);
        data[i] = pool_alloc(bytes);
        memcpy(data[i], k->in[i].data, bytes);
    }
    int out_of[8];
    ir_graph *gg = k->train ? training_graph(fwd, k, out_of) : builder_graph(fwd, w, out_of);
    rt_result r = run(gg, k, data);
    for (int i = 0; i < k->n_in; i++) {
        if (!k->in[i].diff) continue;
        const ir_dtype t = k->in[i].t;
        const int64_t n = ir_shape_numel(&k->in[i].s);
        const ir_tensor *gt = out_of[i] >= 0 ? &r.outputs[out_of[i]] : NULL;
        if (gt) assert_true(ir_shape_eq(&gt->shape, &k->in[i].s) && gt->dtype == t);
        double num2 = 0, err2 = 0, worst = 0, worst_num = 0;
        int64_t at = 0;
        for (int64_t e = 0; e < n; e++) {
            double x0 = ir_load_f64(data[i], t, e);
            ir_store_f64(data[i], t, e, x0 + k->eps);
            double xp = ir_load_f64(data[i], t, e), lp = loss(fwd, k, data, w);
            ir_store_f64(data[i], t, e, x0 - k->eps);
            double xm = ir_load_f64(data[i], t, e), lm = loss(fwd, k, data, w);
            ir_store_f64(data[i], t, e, x0);
            double num = (lp - lm) / (xp - xm), an = gt ? ir_load_f64(gt->data, t, e) : 0;
            num2 += num * num;
            err2 += (an - num) * (an - num);
            if (fabs(an - num) > worst) {
                worst = fabs(an - num);
                worst_num = num;
                at = e;
            }
        }
        /* relative, but absolute below 1: see the file comment */
        double rel = sqrt(err2) / fmax(sqrt(num2), 1.0);
        if (rel > k->tol)
            fail_msg("%s: gradient of input %d: rel err %.3g > %.3g (worst at %lld: %.6g vs %.6g)",
                     ir_op_name(k->op), i, rel, k->tol, (long long)at,
                     gt ? ir_load_f64(gt->data, t, at) : 0.0, worst_num);
    }
    rt_result_free(&r);
    ir_graph_free(gg);
    ir_graph_free(fwd);
}

/* Checks case k as given and, when it has float32 inputs, again with every float32 input turned
 * float64 and float64's finite differences (eps 1e-6, tolerance 1e-6): the float64 kernels of
 * the forward ops and of their backward ops (ir-float-tmpl.h) agree with central differences far
 * beyond what float32 allows. */
static void check_case(const gcase *k) {
    check_case_as_given(k);
    gcase k64 = *k;
    bool any = false;
    for (int i = 0; i < k->n_in; i++) {
        const gin *in = &k->in[i];
        if (!in->data || in->t != IR_F32) continue;
        int64_t n = ir_shape_numel(&in->s);
        double *d = pool_alloc(sizeof(double) * (size_t)n);
        for (int64_t e = 0; e < n; e++) d[e] = ((const float *)in->data)[e];
        k64.in[i].t = IR_F64;
        k64.in[i].data = d;
        any = true;
    }
    if (!any) return;
    k64.eps = 1e-6;
    k64.tol = 1e-6;
    check_case_as_given(&k64);
}

#define F32 IR_F32
#define F64 IR_F64
#define S TU_SHAPE
#define INTS(name, ...)                                                                            \
    tu_attr_ints(name, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})
#define FD32 .eps = 1e-2, .tol = 1e-3
#define FD64 .eps = 1e-6, .tol = 1e-6

/* ---------------------------------------------------------------- Conv, ConvTranspose */

static void test_fd_conv2d(void **st) {
    /* strides, dilations, asymmetric pads, groups and bias; rows the floor division drops */
    gcase k = {.op = IR_OP_Conv,
               .n_in = 3,
               .in = {P(F32, S(2, 4, 7, 6), rnd(F32, S(2, 4, 7, 6), 1)),
                      P(F32, S(6, 2, 3, 2), rnd(F32, S(6, 2, 3, 2), 2)),
                      P(F32, S(6), rnd(F32, S(6), 3))},
               .n_out = 1,
               .n_attrs = 4,
               .attrs = {INTS("strides", 2, 1), INTS("pads", 1, 0, 0, 1), INTS("dilations", 1, 2),
                         tu_attr_int("group", 2)},
               FD32};
    check_case(&k);
}

static void test_fd_conv_1d_3d_depthwise(void **st) {
    gcase k1 = {.op = IR_OP_Conv,
                .n_in = 2,
                .in = {P(F32, S(2, 3, 9), rnd(F32, S(2, 3, 9), 4)),
                       P(F32, S(2, 3, 3), rnd(F32, S(2, 3, 3), 5))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("strides", 3), tu_attr_str("auto_pad", "SAME_UPPER")},
                FD32};
    check_case(&k1);
    gcase k3 = {.op = IR_OP_Conv,
                .n_in = 3,
                .in = {P(F32, S(1, 2, 4, 3, 4), rnd(F32, S(1, 2, 4, 3, 4), 6)),
                       P(F32, S(3, 2, 2, 2, 3), rnd(F32, S(3, 2, 2, 2, 3), 7)),
                       P(F32, S(3), rnd(F32, S(3), 8))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("strides", 2, 1, 1), INTS("pads", 1, 0, 1, 0, 1, 0)},
                FD32};
    check_case(&k3);
    /* depthwise with channel multiplier 2, and a pointwise conv */
    gcase kd = {.op = IR_OP_Conv,
                .n_in = 2,
                .in = {P(F32, S(2, 3, 5, 5), rnd(F32, S(2, 3, 5, 5), 9)),
                       P(F32, S(6, 1, 3, 3), rnd(F32, S(6, 1, 3, 3), 10))},
                .n_out = 1,
                .n_attrs = 3,
                .attrs = {INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1), tu_attr_int("group", 3)},
                FD32};
    check_case(&kd);
    gcase kp = {.op = IR_OP_Conv,
                .n_in = 2,
                .in = {P(F32, S(2, 4, 3, 3), rnd(F32, S(2, 4, 3, 3), 11)),
                       P(F32, S(5, 4, 1, 1), rnd(F32, S(5, 4, 1, 1), 12))},
                .n_out = 1,
                FD32};
    check_case(&kp);
}

static void test_fd_conv_transpose(void **st) {
    gcase k = {.op = IR_OP_ConvTranspose,
               .n_in = 3,
               .in = {P(F32, S(2, 4, 3, 4), rnd(F32, S(2, 4, 3, 4), 13)),
                      P(F32, S(4, 3, 3, 2), rnd(F32, S(4, 3, 3, 2), 14)),
                      P(F32, S(6), rnd(F32, S(6), 15))},
               .n_out = 1,
               .n_attrs = 4,
               .attrs = {INTS("strides", 2, 3), INTS("pads", 1, 0, 0, 1),
                         INTS("output_padding", 1, 2), tu_attr_int("group", 2)},
               FD32};
    check_case(&k);
    gcase k1 = {.op = IR_OP_ConvTranspose,
                .n_in = 2,
                .in = {P(F32, S(1, 2, 5), rnd(F32, S(1, 2, 5), 16)),
                       P(F32, S(2, 3, 3), rnd(F32, S(2, 3, 3), 17))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("dilations", 2), INTS("pads", 2, 1)},
                FD32};
    check_case(&k1);
}

static void test_train_conv(void **st) {
    gcase k = {.op = IR_OP_Conv,
               .n_in = 3,
               .in = {P(F32, S(2, 3, 5, 5), rnd(F32, S(2, 3, 5, 5), 18)),
                      P(F32, S(4, 3, 3, 3), rnd(F32, S(4, 3, 3, 3), 19)),
                      P(F32, S(4), rnd(F32, S(4), 20))},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {INTS("pads", 1, 1, 1, 1)},
               .train = true,
               FD32};
    check_case(&k);
}

/* ---------------------------------------------------------------- pooling, Resize */

static void test_fd_maxpool(void **st) {
    gcase k = {.op = IR_OP_MaxPool,
               .n_in = 1,
               .in = {P(F32, S(2, 2, 7, 6), spread(S(2, 2, 7, 6), 21, 0.01f))},
               .n_out = 1,
               .n_attrs = 5,
               .attrs = {INTS("kernel_shape", 3, 2), INTS("strides", 2, 2),
                         INTS("pads", 1, 0, 1, 1), INTS("dilations", 1, 2),
                         tu_attr_int("ceil_mode", 1)},
               .eps = 1e-3,
               .tol = 1e-3};
    check_case(&k);
    gcase k1 = {.op = IR_OP_MaxPool, /* with the Indices output, through ir_build_training */
                .n_in = 1,
                .in = {P(F32, S(1, 3, 8), spread(S(1, 3, 8), 22, 0.01f))},
                .n_out = 2,
                .n_attrs = 2,
                .attrs = {INTS("kernel_shape", 3), INTS("strides", 2)},
                .train = true,
                .eps = 1e-3,
                .tol = 1e-3};
    check_case(&k1);
    gcase kg = {.op = IR_OP_GlobalMaxPool,
                .n_in = 1,
                .in = {P(F32, S(2, 3, 4, 3), spread(S(2, 3, 4, 3), 23, 0.01f))},
                .n_out = 1,
                .eps = 1e-3,
                .tol = 1e-3};
    check_case(&kg);
}

static void test_fd_avgpool(void **st) {
    for (int cip = 0; cip < 2; cip++) {
        gcase k = {.op = IR_OP_AveragePool,
                   .n_in = 1,
                   .in = {P(F32, S(2, 2, 7, 6), rnd(F32, S(2, 2, 7, 6), 24))},
                   .n_out = 1,
                   .n_attrs = 5,
                   .attrs = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2),
                             INTS("pads", 1, 1, 1, 0), tu_attr_int("ceil_mode", 1),
                             tu_attr_int("count_include_pad", cip)},
                   FD32};
        check_case(&k);
    }
    gcase k3 = {.op = IR_OP_AveragePool,
                .n_in = 1,
                .in = {P(F32, S(1, 2, 3, 4, 4), rnd(F32, S(1, 2, 3, 4, 4), 25))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("kernel_shape", 2, 2, 3), tu_attr_str("auto_pad", "SAME_UPPER")},
                FD32};
    check_case(&k3);
    gcase kg = {.op = IR_OP_GlobalAveragePool,
                .n_in = 1,
                .in = {P(F32, S(2, 3, 4, 5), rnd(F32, S(2, 3, 4, 5), 26))},
                .n_out = 1,
                FD32};
    check_case(&kg);
}

static void test_fd_resize(void **st) {
    static const float up[4] = {1, 1, 2, 1.5f}, down[3] = {1, 1, 0.6f};
    static const int64_t sizes[4] = {2, 2, 3, 7};
    /* linear, half_pixel, scales */
    gcase k = {.op = IR_OP_Resize,
               .n_in = 3,
               .in = {P(F32, S(2, 2, 3, 4), rnd(F32, S(2, 2, 3, 4), 27)), ABSENT, K(F32, S(4), up)},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {tu_attr_str("mode", "linear")},
               FD32};
    check_case(&k);
    /* linear, align_corners, sizes (downsampling one dim, upsampling the other) */
    gcase ks = {
        .op = IR_OP_Resize,
        .n_in = 4,
        .in = {P(F32, S(2, 2, 5, 4), rnd(F32, S(2, 2, 5, 4), 28)), ABSENT, ABSENT, KI(4, sizes)},
        .n_out = 1,
        .n_attrs = 2,
        .attrs = {tu_attr_str("mode", "linear"),
                  tu_attr_str("coordinate_transformation_mode", "align_corners")},
        FD32};
    check_case(&ks);
    /* nearest, asymmetric, floor, downsampling: some inputs get no gradient */
    gcase kn = {.op = IR_OP_Resize,
                .n_in = 3,
                .in = {P(F32, S(1, 2, 10), rnd(F32, S(1, 2, 10), 29)), ABSENT, K(F32, S(3), down)},
                .n_out = 1,
                .n_attrs = 3,
                .attrs = {tu_attr_str("mode", "nearest"),
                          tu_attr_str("coordinate_transformation_mode", "asymmetric"),
                          tu_attr_str("nearest_mode", "floor")},
                FD32};
    check_case(&kn);
    /* tf_crop_and_resize: a box that reaches outside the input (those outputs are the
     * extrapolation value, with no gradient), linear and nearest, and opset 18's axes */
    static const float roi[8] = {0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f},
                       roi_ax[4] = {0.3f, 1.2f, -0.1f, 0.8f};
    static const int64_t crop[4] = {2, 2, 4, 5}, crop_ax[2] = {3, 4};
    static const char *const modes[] = {"linear", "nearest"};
    for (int m = 0; m < 2; m++) {
        gcase kc = {.op = IR_OP_Resize,
                    .n_in = 4,
                    .in = {P(F32, S(2, 2, 5, 4), rnd(F32, S(2, 2, 5, 4), 30)), K(F32, S(8), roi),
                           ABSENT, KI(4, crop)},
                    .n_out = 1,
                    .n_attrs = 3,
                    .attrs = {tu_attr_str("mode", modes[m]),
                              tu_attr_str("coordinate_transformation_mode", "tf_crop_and_resize"),
                              tu_attr_float("extrapolation_value", 2.5f)},
                    FD32};
        check_case(&kc);
        static int64_t axes[2] = {3, 2};
        gcase ka = {.op = IR_OP_Resize,
                    .n_in = 4,
                    .in = {P(F32, S(1, 2, 5, 4), rnd(F32, S(1, 2, 5, 4), 31)), K(F32, S(4), roi_ax),
                           ABSENT, KI(2, crop_ax)},
                    .n_out = 1,
                    .n_attrs = 3,
                    .attrs = {tu_attr_str("mode", modes[m]),
                              tu_attr_str("coordinate_transformation_mode", "tf_crop_and_resize"),
                              tu_attr_ints("axes", 2, axes)},
                    FD32};
        check_case(&ka);
    }
}

/* ---------------------------------------------------------------- normalizations, softmax */

static void test_fd_batchnorm(void **st) {
    float *var = rnd(F32, S(3), 33);
    for (int c = 0; c < 3; c++) var[c] += 1.5f;
    for (int train = 0; train < 2; train++) {
        gcase k = {.op = IR_OP_BatchNormalization,
                   .n_in = 5,
                   .in = {P(F32, S(4, 3, 2, 3), rnd(F32, S(4, 3, 2, 3), 30)),
                          P(F32, S(3), rnd(F32, S(3), 31)), P(F32, S(3), rnd(F32, S(3), 32)),
                          K(F32, S(3), rnd(F32, S(3), 34)), K(F32, S(3), var)},
                   .n_out = train ? 3 : 1,
                   .n_attrs = 2,
                   .attrs = {tu_attr_int("training_mode", train), tu_attr_float("epsilon", 1e-3f)},
                   .train = train,
                   FD32};
        check_case(&k);
    }
    /* training through the builder with a random seed (w = 1 makes dX vanish by construction) */
    gcase k = {.op = IR_OP_BatchNormalization,
               .n_in = 5,
               .in = {P(F32, S(3, 2, 5), rnd(F32, S(3, 2, 5), 35)),
                      P(F32, S(2), rnd(F32, S(2), 36)), P(F32, S(2), rnd(F32, S(2), 37)),
                      K(F32, S(2), rnd(F32, S(2), 38)), K(F32, S(2), var)},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {tu_attr_int("training_mode", 1)},
               FD32};
    check_case(&k);
}

static void test_fd_layernorm(void **st) {
    gcase k = {.op = IR_OP_LayerNormalization,
               .n_in = 3,
               .in = {P(F32, S(3, 4, 5), rnd(F32, S(3, 4, 5), 40)),
                      P(F32, S(5), rnd(F32, S(5), 41)), P(F32, S(5), rnd(F32, S(5), 42))},
               .n_out = 1,
               FD32};
    check_case(&k);
    /* axis 1: the normalized shape is [4, 5]; no bias */
    gcase k2 = {.op = IR_OP_LayerNormalization,
                .n_in = 2,
                .in = {P(F32, S(3, 4, 5), rnd(F32, S(3, 4, 5), 43)),
                       P(F32, S(4, 5), rnd(F32, S(4, 5), 44))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {tu_attr_int("axis", 1), tu_attr_float("epsilon", 1e-3f)},
                FD32};
    check_case(&k2);
    /* the forward already has its Mean/InvStdDev outputs; via ir_build_training */
    gcase k3 = {.op = IR_OP_LayerNormalization,
                .n_in = 3,
                .in = {P(F32, S(2, 6), rnd(F32, S(2, 6), 45)), P(F32, S(6), rnd(F32, S(6), 46)),
                       P(F32, S(6), rnd(F32, S(6), 47))},
                .n_out = 3,
                .train = true,
                FD32};
    check_case(&k3);
}

static void test_fd_instancenorm(void **st) {
    gcase k = {.op = IR_OP_InstanceNormalization,
               .n_in = 3,
               .in = {P(F32, S(2, 3, 3, 4), rnd(F32, S(2, 3, 3, 4), 50)),
                      P(F32, S(3), rnd(F32, S(3), 51)), P(F32, S(3), rnd(F32, S(3), 52))},
               .n_out = 1,
               FD32};
    check_case(&k);
}

/* GroupNormalization at opset 21 (scale and bias per channel) and 18 (per group). */
static void test_fd_groupnorm(void **st) {
    gcase k = {.op = IR_OP_GroupNormalization,
               .n_in = 3,
               .in = {P(F32, S(2, 6, 3, 2), rnd(F32, S(2, 6, 3, 2), 60)),
                      P(F32, S(6), rnd(F32, S(6), 61)), P(F32, S(6), rnd(F32, S(6), 62))},
               .n_out = 1,
               .n_attrs = 2,
               .attrs = {tu_attr_int("num_groups", 3), tu_attr_float("epsilon", 1e-3f)},
               .opset = 21,
               FD32};
    check_case(&k);
    gcase k18 = {.op = IR_OP_GroupNormalization,
                 .n_in = 3,
                 .in = {P(F32, S(2, 6, 4), rnd(F32, S(2, 6, 4), 63)),
                        P(F32, S(2), rnd(F32, S(2), 64)), P(F32, S(2), rnd(F32, S(2), 65))},
                 .n_out = 1,
                 .n_attrs = 1,
                 .attrs = {tu_attr_int("num_groups", 2)},
                 .opset = 18,
                 .train = true,
                 FD32};
    check_case(&k18);
}

/* DepthToSpace (DCR) and SpaceToDepth: each one's gradient is the other. */
static void test_fd_space(void **st) {
    gcase k = {.op = IR_OP_DepthToSpace,
               .n_in = 1,
               .in = {P(F32, S(2, 8, 2, 3), rnd(F32, S(2, 8, 2, 3), 70))},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {tu_attr_int("blocksize", 2)},
               .opset = 13,
               FD32};
    check_case(&k);
    gcase k2 = {.op = IR_OP_SpaceToDepth,
                .n_in = 1,
                .in = {P(F32, S(1, 3, 4, 6), rnd(F32, S(1, 3, 4, 6), 71))},
                .n_out = 1,
                .n_attrs = 1,
                .attrs = {tu_attr_int("blocksize", 2)},
                .opset = 13,
                .train = true,
                FD32};
    check_case(&k2);
}

static void test_fd_softmax(void **st) {
    gcase k = {.op = IR_OP_Softmax,
               .n_in = 1,
               .in = {P(F32, S(2, 5, 3), rnd(F32, S(2, 5, 3), 53))},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {tu_attr_int("axis", 1)},
               FD32};
    check_case(&k);
    gcase kl = {.op = IR_OP_LogSoftmax,
                .n_in = 1,
                .in = {P(F32, S(3, 6), rnd(F32, S(3, 6), 54))},
                .n_out = 1,
                FD32};
    check_case(&kl);
    /* opset 11: the input is coerced to 2-D at axis 1 */
    gcase ko = {.op = IR_OP_LogSoftmax,
                .n_in = 1,
                .in = {P(F32, S(2, 3, 4), rnd(F32, S(2, 3, 4), 55))},
                .n_out = 1,
                .opset = 11,
                FD32};
    check_case(&ko);
    gcase ks = {.op = IR_OP_Softmax,
                .n_in = 1,
                .in = {P(F32, S(2, 3, 4), rnd(F32, S(2, 3, 4), 56))},
                .n_out = 1,
                .opset = 11,
                FD32};
    check_case(&ks);
}

/* ---------------------------------------------------------------- reductions, CumSum */

static void test_fd_reduce_sum_mean(void **st) {
    static const int64_t ax[2] = {0, 2};
    gcase k = {.op = IR_OP_ReduceSum,
               .n_in = 2,
               .in = {P(F64, S(2, 3, 4), rnd(F64, S(2, 3, 4), 60)), KI(2, ax)},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {tu_attr_int("keepdims", 0)},
               FD64};
    check_case(&k);
    gcase km = {.op = IR_OP_ReduceMean,
                .n_in = 1,
                .in = {P(F64, S(2, 3, 4), rnd(F64, S(2, 3, 4), 61))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("axes", -1), tu_attr_int("keepdims", 0)},
                FD64};
    check_case(&km);
    gcase ka = {.op = IR_OP_ReduceMean, /* every axis, via ir_build_training */
                .n_in = 1,
                .in = {P(F64, S(3, 4), rnd(F64, S(3, 4), 62))},
                .n_out = 1,
                .train = true,
                FD64};
    check_case(&ka);
}

static void test_fd_reduce_max_min_l2_prod(void **st) {
    gcase k = {.op = IR_OP_ReduceMax,
               .n_in = 1,
               .in = {P(F64, S(2, 3, 4), rnd(F64, S(2, 3, 4), 63))},
               .n_out = 1,
               .n_attrs = 1,
               .attrs = {INTS("axes", 1)},
               FD64};
    check_case(&k);
    gcase kn = {.op = IR_OP_ReduceMin,
                .n_in = 1,
                .in = {P(F64, S(2, 3, 4), rnd(F64, S(2, 3, 4), 64))},
                .n_out = 1,
                .n_attrs = 2,
                .attrs = {INTS("axes", 0, 2), tu_attr_int("keepdims", 0)},
                FD64};
    check_case(&kn);
    gcase kl = {.op = IR_OP_ReduceL2,
                .n_in = 1,
                .in = {P(F64, S(3, 4), rnd(F64, S(3, 4), 65))},
                .n_out = 1,
                .n_attrs = 1,
                .attrs = {tu_attr_int("keepdims", 0)},
                FD64};
    check_case(&kl);
    double *x = rnd(F64, S(3, 4), 66);
    x[1] = 0;         /* one zero in row 0 */
    x[8] = x[10] = 0; /* two in row 2 */
    gcase kp = {.op = IR_OP_ReduceProd,
                .n_in = 1,
                .in = {P(F64, S(3, 4), x)},
                .n_out = 1,
                .n_attrs = 1,
                .attrs = {INTS("axes", 1)},
                FD64};
    check_case(&kp);
    gcase ki = {.op = IR_OP_ReduceMax, /* noop_with_empty_axes: the identity */
                .n_in = 1,
                .in = {P(F64, S(2, 3), rnd(F64, S(2, 3), 67))},
                .n_out = 1,
                .n_attrs = 1,
                .attrs = {tu_attr_int("noop_with_empty_axes", 1)},
                FD64};
    check_case(&ki);
}

static void test_fd_cumsum(void **st) {
    static const int64_t axis[1] = {1};
    for (int e = 0; e < 2; e++)
        for (int r = 0; r < 2; r++) {
            gcase k = {.op = IR_OP_CumSum,
                       .n_in = 2,
                       .in = {P(F64, S(2, 5, 3), rnd(F64, S(2, 5, 3), 70)),
                              K(IR_I64, TU_SCALAR_SHAPE, axis)},
                       .n_out = 1,
                       .n_attrs = 2,
                       .attrs = {tu_attr_int("exclusive", e), tu_attr_int("reverse", r)},
                       FD64};
            check_case(&k);
        }
}

/* ---------------------------------------------------------------- builder failures */

/* The builder of k's forward node fails with `want`. */
static void expect_builder_fails(const gcase *k, ir_status want) {
    ir_graph *fwd = fwd_graph(k);
    ir_train_opts o = {.loss = IR_LOSS_SUM};
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_build_training(fwd, &o, &st, &d);
    assert_null(g);
    assert_int_equal(st, want);
    assert_non_null(strstr(d.msg, "gradient"));
    ir_graph_free(fwd);
}

static void test_builder_failures(void **st) {
    /* output_padding 1 with stride 1 (allowed by dilation 2): the adjoint conv misses a row */
    gcase k = {.op = IR_OP_ConvTranspose,
               .n_in = 2,
               .in = {P(F32, S(1, 2, 4), rnd(F32, S(1, 2, 4), 80)),
                      P(F32, S(2, 2, 2), rnd(F32, S(2, 2, 2), 81))},
               .n_out = 1,
               .n_attrs = 2,
               .attrs = {INTS("dilations", 2), INTS("output_padding", 1)}};
    expect_builder_fails(&k, IR_ERR_UNSUPPORTED);
    /* inference-mode BatchNormalization with a trainable running mean */
    gcase kb = {.op = IR_OP_BatchNormalization,
                .n_in = 5,
                .in = {P(F32, S(2, 2, 3), rnd(F32, S(2, 2, 3), 82)),
                       K(F32, S(2), rnd(F32, S(2), 83)), K(F32, S(2), rnd(F32, S(2), 84)),
                       P(F32, S(2), rnd(F32, S(2), 85)), K(F32, S(2), rnd(F32, S(2), 86))},
                .n_out = 1};
    for (int c = 0; c < 2; c++) ((float *)kb.in[4].data)[c] += 2;
    expect_builder_fails(&kb, IR_ERR_UNSUPPORTED);
}

/* ---------------------------------------------------------------- backward kernels */

static void expect_close(const float *a, const float *ref, int64_t n, double tol) {
    double e = tu_rel_err_f32(a, ref, n);
    if (e > tol) fail_msg("rel err %.3g > %.3g (a[0]=%g ref[0]=%g)", e, tol, a[0], ref[0]);
}

static tu_in f32(ir_shape s, const float *p) {
    return tu_data_in(IR_F32, s, p);
}

/* dW[m, c, kh, kw] = sum dY[n, m, oh, ow] * X[n, g*Cg + c, oh*s - p + kh*d, ...] */
static void naive_gw2d(const float *x, const float *dy, float *dw, const int64_t *xd,
                       const int64_t *dyd, int64_t G, const int64_t *k, const int64_t *s,
                       const int64_t *p, const int64_t *dl) {
    const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], M = dyd[1], OH = dyd[2], OW = dyd[3];
    const int64_t Cg = C / G, Mg = M / G;
    for (int64_t m = 0; m < M; m++)
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < k[0]; kh++)
                for (int64_t kw = 0; kw < k[1]; kw++) {
                    double acc = 0;
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t ih = oh * s[0] - p[0] + kh * dl[0];
                                int64_t iw = ow * s[1] - p[1] + kw * dl[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += (double)dy[((n * M + m) * OH + oh) * OW + ow] *
                                       x[((n * C + m / Mg * Cg + c) * H + ih) * W + iw];
                            }
                    dw[((m * Cg + c) * k[0] + kh) * k[1] + kw] = (float)acc;
                }
}

static void test_kernel_conv_grad_weight(void **st) {
    const int64_t xd[4] = {2, 4, 7, 6}, dyd[4] = {2, 6, 3, 5}, k[2] = {3, 2}, s[2] = {2, 1},
                  p[2] = {1, 0}, dl[2] = {1, 2};
    float *x = rnd(F32, S(2, 4, 7, 6), 90), *dy = rnd(F32, S(2, 6, 3, 5), 91);
    float ref[6 * 2 * 3 * 2];
    naive_gw2d(x, dy, ref, xd, dyd, 2, k, s, p, dl);
    ir_attr a[5] = {INTS("kernel_shape", 3, 2), INTS("strides", 2, 1), INTS("pads", 1, 0, 0, 1),
                    INTS("dilations", 1, 2), tu_attr_int("group", 2)};
    tu_in in[2] = {f32(S(2, 4, 7, 6), x), f32(S(2, 6, 3, 5), dy)};
    ir_tensor out;
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_ConvGradWeight, 2, in, 1, 5, a, &out, &d), IR_OK);
    tu_expect_shape(&out, S(6, 2, 3, 2));
    expect_close(out.data, ref, 72, 1e-5);
    tu_free_outputs(1, &out);
    /* pointwise: X is read in place, no workspace */
    const int64_t xd1[4] = {2, 3, 4, 5}, dyd1[4] = {2, 4, 4, 5}, one[2] = {1, 1}, zero[2] = {0, 0};
    float *x1 = rnd(F32, S(2, 3, 4, 5), 92), *dy1 = rnd(F32, S(2, 4, 4, 5), 93), ref1[12];
    naive_gw2d(x1, dy1, ref1, xd1, dyd1, 1, one, one, zero, one);
    ir_attr a1 = INTS("kernel_shape", 1, 1);
    tu_in in1[2] = {f32(S(2, 3, 4, 5), x1), f32(S(2, 4, 4, 5), dy1)};
    assert_int_equal(tu_run_op(IR_OP_ConvGradWeight, 2, in1, 1, 1, &a1, &out, &d), IR_OK);
    expect_close(out.data, ref1, 12, 1e-5);
    tu_free_outputs(1, &out);
    /* depthwise (one input channel per group, multiplier 2): the direct path */
    const int64_t xd2[4] = {2, 3, 9, 8}, dyd2[4] = {2, 6, 4, 4}, k2[2] = {3, 3}, s2[2] = {2, 2},
                  p2[2] = {1, 0}, d2[2] = {2, 1};
    float *x2 = rnd(F32, S(2, 3, 9, 8), 87), *dy2 = rnd(F32, S(2, 6, 4, 4), 88), ref2[54];
    naive_gw2d(x2, dy2, ref2, xd2, dyd2, 3, k2, s2, p2, d2);
    ir_attr a2[5] = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), INTS("pads", 1, 0, 1, 1),
                     INTS("dilations", 2, 1), tu_attr_int("group", 3)};
    tu_in in2[2] = {f32(S(2, 3, 9, 8), x2), f32(S(2, 6, 4, 4), dy2)};
    assert_int_equal(tu_run_op(IR_OP_ConvGradWeight, 2, in2, 1, 5, a2, &out, &d), IR_OK);
    tu_expect_shape(&out, S(6, 1, 3, 3));
    expect_close(out.data, ref2, 54, 1e-5);
    tu_free_outputs(1, &out);
    /* an im2col tiled by output rows (ir_conv_tile_rows: 38 rows in tiles of 10, 10, 10, 8),
     * the first and last tiles padded */
    const int64_t xd3[4] = {2, 16, 38, 36}, dyd3[4] = {2, 8, 38, 36}, k3[2] = {3, 3},
                  p3[2] = {1, 1};
    float *x3 = rnd(F32, S(2, 16, 38, 36), 85), *dy3 = rnd(F32, S(2, 8, 38, 36), 86);
    float *ref3 = malloc(8 * 16 * 9 * sizeof(float));
    naive_gw2d(x3, dy3, ref3, xd3, dyd3, 1, k3, one, p3, one);
    ir_attr a3[2] = {INTS("kernel_shape", 3, 3), INTS("pads", 1, 1, 1, 1)};
    tu_in in3[2] = {f32(S(2, 16, 38, 36), x3), f32(S(2, 8, 38, 36), dy3)};
    assert_int_equal(tu_run_op(IR_OP_ConvGradWeight, 2, in3, 1, 2, a3, &out, &d), IR_OK);
    expect_close(out.data, ref3, 8 * 16 * 9, 1e-5);
    tu_free_outputs(1, &out);
    free(ref3);
    /* a dY of the wrong spatial size is rejected */
    tu_in bad[2] = {f32(S(2, 3, 4, 5), x1), f32(S(2, 4, 4, 4), dy1)};
    assert_int_equal(tu_run_err(IR_OP_ConvGradWeight, 2, bad, 1, 1, &a1, &d), IR_ERR_SHAPE);
}

/* <dY, Conv(X, V)> == <ConvGradWeight(X, dY), V>: a size where im2col and its loops go parallel. */
static void test_kernel_conv_grad_weight_large(void **st) {
    float *x = rnd(F32, S(2, 16, 34, 34), 94), *v = rnd(F32, S(32, 16, 3, 3), 95);
    float *dy = rnd(F32, S(2, 32, 17, 17), 96);
    ir_attr a[3] = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1)};
    ir_diag d = {{0}};
    ir_tensor y, dw;
    tu_in cin[2] = {f32(S(2, 16, 34, 34), x), f32(S(32, 16, 3, 3), v)};
    assert_int_equal(tu_run_op(IR_OP_Conv, 2, cin, 1, 3, a, &y, &d), IR_OK);
    tu_in gin_[2] = {f32(S(2, 16, 34, 34), x), f32(S(2, 32, 17, 17), dy)};
    assert_int_equal(tu_run_op(IR_OP_ConvGradWeight, 2, gin_, 1, 3, a, &dw, &d), IR_OK);
    double lhs = 0, rhs = 0, mag = 0;
    for (int64_t i = 0; i < ir_tensor_numel(&y); i++) {
        lhs += (double)dy[i] * ((float *)y.data)[i];
        mag += fabs((double)dy[i] * ((float *)y.data)[i]);
    }
    for (int64_t i = 0; i < ir_tensor_numel(&dw); i++) rhs += (double)((float *)dw.data)[i] * v[i];
    assert_true(fabs(lhs - rhs) <= 1e-5 * mag);
    tu_free_outputs(1, &y);
    tu_free_outputs(1, &dw);
}

static void test_kernel_maxpool_grad_ties(void **st) {
    /* a constant plane: every window's first tap wins, overlapping windows accumulate */
    float x[16], dy[9], ref[16] = {0};
    for (int i = 0; i < 16; i++) x[i] = 1.0f;
    tu_fill(dy, 9, 97);
    for (int oh = 0; oh < 3; oh++)
        for (int ow = 0; ow < 3; ow++) ref[oh * 4 + ow] += dy[oh * 3 + ow];
    ir_attr a = INTS("kernel_shape", 2, 2);
    tu_in in[2] = {f32(S(1, 1, 3, 3), dy), f32(S(1, 1, 4, 4), x)};
    ir_tensor out;
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_MaxPoolGrad, 2, in, 1, 1, &a, &out, &d), IR_OK);
    tu_expect_shape(&out, S(1, 1, 4, 4));
    expect_close(out.data, ref, 16, 0);
    tu_free_outputs(1, &out);
    /* 1-D, pads 2+1, kernel 2: windows start at -2..4; the first lies wholly in the padding and
     * gets no gradient, the last holds one real element */
    float x1[5] = {3, -1, 7, 2, 7}, dy1[7] = {10, 20, 30, 40, 50, 60, 70};
    float ref1[5] = {20 + 30, 0, 40 + 50, 0, 60 + 70};
    ir_attr a1[2] = {INTS("kernel_shape", 2), INTS("pads", 2, 1)};
    tu_in in1[2] = {f32(S(1, 1, 7), dy1), f32(S(1, 1, 5), x1)};
    assert_int_equal(tu_run_op(IR_OP_MaxPoolGrad, 2, in1, 1, 2, a1, &out, &d), IR_OK);
    expect_close(out.data, ref1, 5, 0);
    tu_free_outputs(1, &out);
}

/* ref[i] = <op(e_i), dy>: the adjoint of a linear op, column by column, from its forward kernel
 * (inputs 1.. of `in` are the op's other, fixed inputs). */
static void adjoint_ref(ir_op_kind op, int n_in, tu_in *in, int n_attrs, const ir_attr *attrs,
                        const float *dy, float *ref) {
    const int64_t n = ir_shape_numel(&in[0].shape);
    float *e = calloc((size_t)n, sizeof(float));
    in[0].data = e;
    for (int64_t i = 0; i < n; i++) {
        ir_tensor y;
        ir_diag d = {{0}};
        e[i] = 1;
        assert_int_equal(tu_run_op(op, n_in, in, 1, n_attrs, attrs, &y, &d), IR_OK);
        double acc = 0;
        for (int64_t j = 0; j < ir_tensor_numel(&y); j++)
            acc += (double)((float *)y.data)[j] * dy[j];
        ref[i] = (float)acc;
        e[i] = 0;
        tu_free_outputs(1, &y);
    }
    free(e);
}

static void test_kernel_avgpool_grad(void **st) {
    for (int cip = 0; cip < 2; cip++) {
        ir_attr a[6] = {INTS("kernel_shape", 3, 2),
                        INTS("strides", 2, 2),
                        INTS("pads", 1, 0, 1, 1),
                        tu_attr_int("ceil_mode", 1),
                        tu_attr_int("count_include_pad", cip),
                        INTS("shape", 2, 2, 6, 5)};
        tu_in fin[1] = {f32(S(2, 2, 6, 5), NULL)};
        ir_tensor out;
        ir_diag d = {{0}};
        /* the pooled shape, from the forward */
        float *x0 = rnd(F32, S(2, 2, 6, 5), 98);
        fin[0].data = x0;
        assert_int_equal(tu_run_op(IR_OP_AveragePool, 1, fin, 1, 5, a, &out, &d), IR_OK);
        ir_shape ys = out.shape;
        tu_free_outputs(1, &out);
        float *dy = rnd(F32, ys, 99), ref[120];
        adjoint_ref(IR_OP_AveragePool, 1, fin, 5, a, dy, ref);
        tu_in in[1] = {f32(ys, dy)};
        assert_int_equal(tu_run_op(IR_OP_AveragePoolGrad, 1, in, 1, 6, a, &out, &d), IR_OK);
        tu_expect_shape(&out, S(2, 2, 6, 5));
        expect_close(out.data, ref, 120, 1e-6);
        tu_free_outputs(1, &out);
    }
}

static void test_kernel_resize_grad(void **st) {
    static const float sc_up[4] = {1, 1, 1.7f, 2.5f}, sc_dn[4] = {1, 1, 0.5f, 0.75f};
    static const int64_t sz[4] = {1, 2, 5, 3};
    struct {
        const char *mode, *ctm, *nm;
        const float *scales;
        const int64_t *sizes;
    } cases[] = {
        {"nearest", "half_pixel", "round_prefer_ceil", sc_up, NULL},
        {"nearest", "tf_half_pixel_for_nn", "round_prefer_floor", sc_dn, NULL},
        {"linear", "pytorch_half_pixel", "round_prefer_floor", NULL, sz},
        {"linear", "align_corners", "round_prefer_floor", sc_up, NULL},
        {"linear", "asymmetric", "round_prefer_floor", sc_dn, NULL},
        {"linear", "half_pixel", "round_prefer_floor", sc_dn, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_attr a[4] = {tu_attr_str("mode", cases[c].mode),
                        tu_attr_str("coordinate_transformation_mode", cases[c].ctm),
                        tu_attr_str("nearest_mode", cases[c].nm), INTS("shape", 1, 2, 4, 4)};
        tu_in in[4] = {f32(S(1, 2, 4, 4), rnd(F32, S(1, 2, 4, 4), 100)),
                       {.data = NULL},
                       {.data = NULL},
                       {.data = NULL}};
        if (cases[c].scales)
            in[2] =
                (tu_in){.dtype = IR_F32, .shape = S(4), .data = cases[c].scales, .constant = true};
        else
            in[3] = tu_ints_in(4, cases[c].sizes);
        ir_tensor out;
        ir_diag d = {{0}};
        assert_int_equal(tu_run_op(IR_OP_Resize, 4, in, 1, 3, a, &out, &d), IR_OK);
        ir_shape ys = out.shape;
        tu_free_outputs(1, &out);
        float *dy = rnd(F32, ys, 101), ref[32];
        adjoint_ref(IR_OP_Resize, 4, in, 3, a, dy, ref);
        in[0] = f32(ys, dy);
        assert_int_equal(tu_run_op(IR_OP_ResizeGrad, 4, in, 1, 4, a, &out, &d), IR_OK);
        tu_expect_shape(&out, S(1, 2, 4, 4));
        expect_close(out.data, ref, 32, 1e-6);
        tu_free_outputs(1, &out);
    }
    /* <dY, Resize(X)> == <ResizeGrad(dY), X> at a size whose batch/channel blocks run parallel */
    static const float sc2[4] = {1, 1, 2, 2};
    ir_attr a[2] = {tu_attr_str("mode", "linear"), INTS("shape", 2, 8, 32, 32)};
    float *x = rnd(F32, S(2, 8, 32, 32), 102), *dy = rnd(F32, S(2, 8, 64, 64), 103);
    tu_in in[3] = {f32(S(2, 8, 32, 32), x),
                   {.data = NULL},
                   {.dtype = IR_F32, .shape = S(4), .data = sc2, .constant = true}};
    ir_tensor y, dx;
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Resize, 3, in, 1, 1, a, &y, &d), IR_OK);
    in[0] = f32(S(2, 8, 64, 64), dy);
    assert_int_equal(tu_run_op(IR_OP_ResizeGrad, 3, in, 1, 2, a, &dx, &d), IR_OK);
    double lhs = 0, rhs = 0, mag = 0;
    for (int64_t i = 0; i < ir_tensor_numel(&y); i++) {
        lhs += (double)dy[i] * ((float *)y.data)[i];
        mag += fabs((double)dy[i] * ((float *)y.data)[i]);
    }
    for (int64_t i = 0; i < ir_tensor_numel(&dx); i++) rhs += (double)((float *)dx.data)[i] * x[i];
    assert_true(fabs(lhs - rhs) <= 1e-5 * mag);
    tu_free_outputs(1, &y);
    tu_free_outputs(1, &dx);
}

/* BatchNormGrad (training and inference) and InstanceNormGrad against double formulas. */
static void naive_norm_grad(const float *x, const float *dy, const float *sc, const float *rm,
                            const float *rv, double eps, int64_t N, int64_t C, int64_t IS,
                            bool per_plane, bool train, float *dx, float *dsc, float *db) {
    for (int64_t c = 0; c < C; c++) {
        dsc[c] = db[c] = 0;
        for (int64_t g = 0; g < (per_plane ? N : 1); g++) {
            int64_t n0 = per_plane ? g : 0, n1 = per_plane ? g + 1 : N;
            double cnt = (double)((n1 - n0) * IS), m = 0, v = 0, sdy = 0, sdyx = 0;
            for (int64_t n = n0; n < n1; n++)
                for (int64_t i = 0; i < IS; i++) m += x[(n * C + c) * IS + i];
            m /= cnt;
            for (int64_t n = n0; n < n1; n++)
                for (int64_t i = 0; i < IS; i++) v += pow(x[(n * C + c) * IS + i] - m, 2);
            v /= cnt;
            if (!train) {
                m = rm[c];
                v = rv[c];
            }
            double inv = 1 / sqrt(v + eps);
            for (int64_t n = n0; n < n1; n++)
                for (int64_t i = 0; i < IS; i++) {
                    int64_t at = (n * C + c) * IS + i;
                    sdy += dy[at];
                    sdyx += dy[at] * (x[at] - m) * inv;
                }
            for (int64_t n = n0; n < n1; n++)
                for (int64_t i = 0; i < IS; i++) {
                    int64_t at = (n * C + c) * IS + i;
                    double xh = (x[at] - m) * inv;
                    dx[at] = (float)(train ? sc[c] * inv * (dy[at] - sdy / cnt - xh * sdyx / cnt)
                                           : sc[c] * inv * dy[at]);
                }
            dsc[c] += (float)sdyx;
            db[c] += (float)sdy;
        }
    }
}

static void test_kernel_norm_grads(void **st) {
    enum { N = 3, C = 4, IS = 6, NX = N * C * IS };
    float *x = rnd(F32, S(N, C, 2, 3), 110), *dy = rnd(F32, S(N, C, 2, 3), 111);
    float *sc = rnd(F32, S(C), 112), *rm = rnd(F32, S(C), 113), *rv = rnd(F32, S(C), 114);
    for (int c = 0; c < C; c++) rv[c] += 1.5f;
    float rdx[NX], rds[C], rdb[C];
    ir_diag d = {{0}};
    for (int mode = 0; mode < 3; mode++) { /* BN training, BN inference, IN */
        bool train = mode != 1, inst = mode == 2;
        naive_norm_grad(x, dy, sc, rm, rv, 1e-3, N, C, IS, inst, train, rdx, rds, rdb);
        ir_attr a[2] = {tu_attr_float("epsilon", 1e-3f), tu_attr_int("training_mode", train)};
        tu_in in[5] = {f32(S(N, C, 2, 3), dy), f32(S(N, C, 2, 3), x), f32(S(C), sc), f32(S(C), rm),
                       f32(S(C), rv)};
        ir_tensor out[3];
        ir_op_kind op = inst ? IR_OP_InstanceNormGrad : IR_OP_BatchNormGrad;
        assert_int_equal(tu_run_op(op,
                                   inst    ? 3
                                   : train ? 3
                                           : 5,
                                   in, 3, inst ? 1 : 2, a, out, &d),
                         IR_OK);
        tu_expect_shape(&out[1], S(C));
        expect_close(out[0].data, rdx, NX, 1e-5);
        expect_close(out[1].data, rds, C, 1e-5);
        expect_close(out[2].data, rdb, C, 1e-5);
        tu_free_outputs(3, out);
    }
    ir_attr a0 = tu_attr_int("training_mode", 0);
    tu_in in3[3] = {f32(S(N, C, 2, 3), dy), f32(S(N, C, 2, 3), x), f32(S(C), sc)};
    assert_int_equal(tu_run_err(IR_OP_BatchNormGrad, 3, in3, 3, 1, &a0, &d), IR_ERR_INVALID);
}

static void test_kernel_layernorm_grad(void **st) {
    enum { R = 6, L = 10 };
    float *x = rnd(F32, S(2, 3, L), 120), *dy = rnd(F32, S(2, 3, L), 121);
    float *sc = rnd(F32, S(L), 122), *b = rnd(F32, S(L), 123);
    float rdx[R * L], rds[L] = {0}, rdb[L] = {0};
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0, sg = 0, sgx = 0;
        for (int i = 0; i < L; i++) m += x[r * L + i] / (double)L;
        for (int i = 0; i < L; i++) v += pow(x[r * L + i] - m, 2) / L;
        double inv = 1 / sqrt(v + 1e-5);
        for (int i = 0; i < L; i++) {
            double xh = (x[r * L + i] - m) * inv, g = dy[r * L + i] * sc[i];
            sg += g;
            sgx += g * xh;
            rds[i] += (float)(dy[r * L + i] * xh);
            rdb[i] += dy[r * L + i];
        }
        for (int i = 0; i < L; i++) {
            double xh = (x[r * L + i] - m) * inv;
            rdx[r * L + i] = (float)(inv * (dy[r * L + i] * sc[i] - sg / L - xh * sgx / L));
        }
    }
    ir_tensor fo[3], out[3];
    ir_diag d = {{0}};
    tu_in fin[3] = {f32(S(2, 3, L), x), f32(S(L), sc), f32(S(L), b)};
    assert_int_equal(tu_run_op(IR_OP_LayerNormalization, 3, fin, 3, 0, NULL, fo, &d), IR_OK);
    tu_in in[5] = {f32(S(2, 3, L), dy), f32(S(2, 3, L), x), f32(S(L), sc),
                   f32(fo[1].shape, fo[1].data), f32(fo[2].shape, fo[2].data)};
    assert_int_equal(tu_run_op(IR_OP_LayerNormGrad, 5, in, 3, 0, NULL, out, &d), IR_OK);
    tu_expect_shape(&out[1], S(L));
    expect_close(out[0].data, rdx, R * L, 1e-5);
    expect_close(out[1].data, rds, L, 1e-5);
    expect_close(out[2].data, rdb, L, 1e-5);
    tu_free_outputs(3, out);
    tu_free_outputs(3, fo);
}

/* LayerNormGrad's dScale/dBias run in column blocks, parallel at this size. */
static void test_kernel_layernorm_grad_large(void **st) {
    enum { R = 64, L = 1000 };
    float *x = rnd(F32, S(R, L), 124), *dy = rnd(F32, S(R, L), 125), *sc = rnd(F32, S(L), 126);
    float *mean = pool_alloc(sizeof(float) * R), *inv = pool_alloc(sizeof(float) * R);
    for (int r = 0; r < R; r++) {
        mean[r] = 0.01f * (float)r;
        inv[r] = 1.0f + 0.02f * (float)r;
    }
    float *rds = pool_alloc(sizeof(float) * L), *rdb = pool_alloc(sizeof(float) * L);
    for (int i = 0; i < L; i++) {
        double s = 0, t = 0;
        for (int r = 0; r < R; r++) {
            s += dy[r * L + i] * ((x[r * L + i] - (double)mean[r]) * inv[r]);
            t += dy[r * L + i];
        }
        rds[i] = (float)s;
        rdb[i] = (float)t;
    }
    tu_in in[5] = {f32(S(R, L), dy), f32(S(R, L), x), f32(S(L), sc), f32(S(R, 1), mean),
                   f32(S(R, 1), inv)};
    ir_tensor out[3];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_LayerNormGrad, 5, in, 3, 0, NULL, out, &d), IR_OK);
    expect_close(out[1].data, rds, L, 1e-5);
    expect_close(out[2].data, rdb, L, 1e-5);
    tu_free_outputs(3, out);
}

static void test_kernel_softmax_grads(void **st) {
    enum { O = 2, LEN = 5, IN = 3, NX = O * LEN * IN };
    float *x = rnd(F32, S(O, LEN, IN), 130), *dy = rnd(F32, S(O, LEN, IN), 131);
    float y[NX], ly[NX], rs[NX], rl[NX];
    for (int o = 0; o < O; o++)
        for (int i = 0; i < IN; i++) {
            double mx = -INFINITY, z = 0, sdy = 0, sdyy = 0;
            for (int l = 0; l < LEN; l++) mx = fmax(mx, x[(o * LEN + l) * IN + i]);
            for (int l = 0; l < LEN; l++) z += exp(x[(o * LEN + l) * IN + i] - mx);
            for (int l = 0; l < LEN; l++) {
                int at = (o * LEN + l) * IN + i;
                y[at] = (float)(exp(x[at] - mx) / z);
                ly[at] = (float)(x[at] - mx - log(z));
                sdy += dy[at];
                sdyy += dy[at] * (double)y[at];
            }
            for (int l = 0; l < LEN; l++) {
                int at = (o * LEN + l) * IN + i;
                rs[at] = (float)(y[at] * (dy[at] - sdyy));
                rl[at] = (float)(dy[at] - exp((double)ly[at]) * sdy);
            }
        }
    ir_attr a = tu_attr_int("axis", 1);
    ir_tensor out;
    ir_diag d = {{0}};
    tu_in in[2] = {f32(S(O, LEN, IN), dy), f32(S(O, LEN, IN), y)};
    assert_int_equal(tu_run_op(IR_OP_SoftmaxGrad, 2, in, 1, 1, &a, &out, &d), IR_OK);
    expect_close(out.data, rs, NX, 1e-5);
    tu_free_outputs(1, &out);
    in[1] = f32(S(O, LEN, IN), ly);
    assert_int_equal(tu_run_op(IR_OP_LogSoftmaxGrad, 2, in, 1, 1, &a, &out, &d), IR_OK);
    expect_close(out.data, rl, NX, 1e-5);
    tu_free_outputs(1, &out);
}

static void test_kernel_reduce_grad(void **st) {
    ir_diag d = {{0}};
    ir_tensor out;
    /* max: ties share the gradient; min over scattered axes 0 and 2, output without kept dims */
    float xm[8] = {1, 3, 3, 2, 5, 5, 5, 5}, ym[2] = {3, 5}, gm[2] = {6, 8};
    float rm[8] = {0, 3, 3, 0, 2, 2, 2, 2};
    ir_attr am[2] = {tu_attr_str("mode", "max"), INTS("axes", 1)};
    tu_in in[3] = {f32(S(2, 1), gm), f32(S(2, 4), xm), f32(S(2, 1), ym)};
    assert_int_equal(tu_run_op(IR_OP_ReduceGrad, 3, in, 1, 2, am, &out, &d), IR_OK);
    tu_expect_shape(&out, S(2, 4));
    expect_close(out.data, rm, 8, 0);
    tu_free_outputs(1, &out);
    float xn[12] = {4, 1, 2, 2, 3, 0, 9, 1, 2, 2, 7, 0}, yn[3], gn[3] = {1, 2, 3}, rn[12] = {0};
    /* X [2,3,2], reduce axes 0 and 2: groups j = {x[0,j,*], x[1,j,*]} */
    for (int j = 0; j < 3; j++) {
        float mn = INFINITY;
        int cnt = 0;
        for (int a0 = 0; a0 < 2; a0++)
            for (int a2 = 0; a2 < 2; a2++) mn = fminf(mn, xn[(a0 * 3 + j) * 2 + a2]);
        for (int a0 = 0; a0 < 2; a0++)
            for (int a2 = 0; a2 < 2; a2++) cnt += xn[(a0 * 3 + j) * 2 + a2] == mn;
        for (int a0 = 0; a0 < 2; a0++)
            for (int a2 = 0; a2 < 2; a2++)
                if (xn[(a0 * 3 + j) * 2 + a2] == mn) rn[(a0 * 3 + j) * 2 + a2] = gn[j] / cnt;
        yn[j] = mn;
    }
    ir_attr an[2] = {tu_attr_str("mode", "min"), INTS("axes", 0, -1)};
    tu_in inn[3] = {f32(S(3), gn), f32(S(2, 3, 2), xn), f32(S(3), yn)};
    assert_int_equal(tu_run_op(IR_OP_ReduceGrad, 3, inn, 1, 2, an, &out, &d), IR_OK);
    expect_close(out.data, rn, 12, 0);
    tu_free_outputs(1, &out);
    /* prod with no, one and two zeros per row; l2 of a zero row (float64) */
    double xp[12] = {1, 2, 3, 4, 2, 0, 3, 4, 0, 5, 0, 2}, yp[3] = {24, 0, 0}, gp[3] = {1, 2, 3};
    double rp[12] = {24, 12, 8, 6, 0, 48, 0, 0, 0, 0, 0, 0};
    ir_attr ap[2] = {tu_attr_str("mode", "prod"), INTS("axes", 1)};
    tu_in inp[3] = {tu_data_in(IR_F64, S(3), gp), tu_data_in(IR_F64, S(3, 4), xp),
                    tu_data_in(IR_F64, S(3), yp)};
    assert_int_equal(tu_run_op(IR_OP_ReduceGrad, 3, inp, 1, 2, ap, &out, &d), IR_OK);
    assert_int_equal(out.dtype, IR_F64);
    for (int i = 0; i < 12; i++) assert_true(((double *)out.data)[i] == rp[i]);
    tu_free_outputs(1, &out);
    double xl[4] = {3, 4, 0, 0}, yl[2] = {5, 0}, gl[2] = {10, 7}, rl[4] = {6, 8, 0, 0};
    ir_attr al[2] = {tu_attr_str("mode", "l2"), INTS("axes", 1)};
    tu_in inl[3] = {tu_data_in(IR_F64, S(2), gl), tu_data_in(IR_F64, S(2, 2), xl),
                    tu_data_in(IR_F64, S(2), yl)};
    assert_int_equal(tu_run_op(IR_OP_ReduceGrad, 3, inl, 1, 2, al, &out, &d), IR_OK);
    for (int i = 0; i < 4; i++) assert_true(fabs(((double *)out.data)[i] - rl[i]) < 1e-12);
    tu_free_outputs(1, &out);
    /* errors: a dY of the wrong size, an unknown mode */
    tu_in bad[3] = {f32(S(3), gm), f32(S(2, 4), xm), f32(S(2, 1), ym)};
    assert_int_equal(tu_run_err(IR_OP_ReduceGrad, 3, bad, 1, 2, am, &d), IR_ERR_SHAPE);
    ir_attr amode[2] = {tu_attr_str("mode", "mean"), INTS("axes", 1)};
    assert_int_equal(tu_run_err(IR_OP_ReduceGrad, 3, in, 1, 2, amode, &d), IR_ERR_INVALID);
}

static void test_op_table(void **st) {
    static const char *const names[] = {
        "ConvGradWeight", "MaxPoolGrad",   "AveragePoolGrad",  "ReduceGrad",  "ResizeGrad",
        "BatchNormGrad",  "LayerNormGrad", "InstanceNormGrad", "SoftmaxGrad", "LogSoftmaxGrad"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ir_op_kind k = ir_op_find("magpie", names[i]);
        assert_int_not_equal(k, IR_OP_OPAQUE);
        assert_int_equal(ir_op_find("", names[i]), IR_OP_OPAQUE);
        const ir_op_def *def = ir_op_get(k);
        assert_non_null(def->infer);
        assert_non_null(def->kernel);
        assert_non_null(def->flops);
    }
    static const ir_op_kind fwd[] = {IR_OP_Conv,
                                     IR_OP_ConvTranspose,
                                     IR_OP_MaxPool,
                                     IR_OP_AveragePool,
                                     IR_OP_GlobalAveragePool,
                                     IR_OP_GlobalMaxPool,
                                     IR_OP_Resize,
                                     IR_OP_BatchNormalization,
                                     IR_OP_LayerNormalization,
                                     IR_OP_InstanceNormalization,
                                     IR_OP_Softmax,
                                     IR_OP_LogSoftmax,
                                     IR_OP_ReduceMean,
                                     IR_OP_ReduceSum,
                                     IR_OP_ReduceMax,
                                     IR_OP_ReduceMin,
                                     IR_OP_ReduceProd,
                                     IR_OP_ReduceL2,
                                     IR_OP_CumSum};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        assert_non_null(ir_op_get(fwd[i])->grad);
}

#define T(f) cmocka_unit_test_teardown(f, pool_free)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_op_table),
        T(test_fd_conv2d),
        T(test_fd_conv_1d_3d_depthwise),
        T(test_fd_conv_transpose),
        T(test_train_conv),
        T(test_fd_maxpool),
        T(test_fd_avgpool),
        T(test_fd_resize),
        T(test_fd_batchnorm),
        T(test_fd_layernorm),
        T(test_fd_instancenorm),
        T(test_fd_groupnorm),
        T(test_fd_space),
        T(test_fd_softmax),
        T(test_fd_reduce_sum_mean),
        T(test_fd_reduce_max_min_l2_prod),
        T(test_fd_cumsum),
        T(test_builder_failures),
        T(test_kernel_conv_grad_weight),
        T(test_kernel_conv_grad_weight_large),
        T(test_kernel_maxpool_grad_ties),
        T(test_kernel_avgpool_grad),
        T(test_kernel_resize_grad),
        T(test_kernel_norm_grads),
        T(test_kernel_layernorm_grad),
        T(test_kernel_layernorm_grad_large),
        T(test_kernel_softmax_grads),
        T(test_kernel_reduce_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
