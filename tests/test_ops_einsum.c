/* test_ops_einsum.c - Einsum, PRelu and Mean against loops written from the ONNX definitions in
 * double (float32 runs within 1e-5 of them, float64 runs within 1e-12), their gradients by finite
 * differences (test-gradcheck.h), Einsum's refusals, the expansion of Attention 23 at import (its
 * training graph's gradients against finite differences of the float64 forward), and GridSample's
 * gradients, of the input and of the grid, in every mode and padding and in a spatial transformer
 * whose grid is computed (its forward is judged by the conformance suite). */
#include "test-gradcheck.h"

#include "ir-einsum.h"
#include "ir-impl.h"

#define F64 IR_F64
#define TOL 1e-6

static gc_in P(ir_shape s) {
    return (gc_in){.kind = GC_PARAM, .dtype = F64, .shape = s};
}

/* Runs Einsum(eq) on float64 inputs as float32 and as float64 and compares both with ref. */
static void check_einsum(const char *eq, int n, const ir_shape *s, const double *const *x,
                         ir_shape want, const double *ref) {
    for (int pass = 0; pass < 2; pass++) {
        ir_dtype t = pass ? IR_F64 : IR_F32;
        tu_in in[IR_EINSUM_MAX_OPS];
        void *buf[IR_EINSUM_MAX_OPS];
        for (int k = 0; k < n; k++) {
            int64_t m = ir_shape_numel(&s[k]);
            buf[k] = calloc((size_t)(m ? m : 1), ir_dtype_size(t));
            for (int64_t i = 0; i < m; i++) ir_store_f64(buf[k], t, i, x[k][i]);
            in[k] = tu_data_in(t, s[k], buf[k]);
        }
        ir_attr a = tu_attr_str("equation", eq);
        ir_tensor out[1];
        ir_diag d = {{0}};
        if (tu_run_op(IR_OP_Einsum, n, in, 1, 1, &a, out, &d) != IR_OK)
            fail_msg("%s: %s", eq, d.msg);
        tu_expect_shape(&out[0], want);
        double num = 0, den = 0;
        for (int64_t i = 0; i < ir_shape_numel(&want); i++) {
            double e = ir_load_f64(out[0].data, t, i) - ref[i];
            num += e * e;
            den += ref[i] * ref[i];
        }
        double err = sqrt(num) / fmax(sqrt(den), 1e-300);
        if (!(err <= (pass ? 1e-12 : 1e-5)))
            fail_msg("%s (%s): error %.3g", eq, ir_dtype_name(t), err);
        tu_free_outputs(1, out);
        for (int k = 0; k < n; k++) free(buf[k]);
    }
}

static double *rnd(int64_t n, uint64_t seed) {
    double *p = malloc(sizeof(double) * (size_t)(n ? n : 1));
    gc_fill(p, IR_F64, n, seed, -1, 1);
    return p;
}

static void test_einsum_forward(void **state) {
    (void)state;
    { /* attention scores: bhqd,bhkd->bhqk */
        enum { B = 2, H = 3, Q = 4, K = 6, D = 5 };
        double *a = rnd(B * H * Q * D, 1), *b = rnd(B * H * K * D, 2), ref[B * H * Q * K];
        for (int i = 0; i < B * H; i++)
            for (int q = 0; q < Q; q++)
                for (int k = 0; k < K; k++) {
                    double s = 0;
                    for (int d = 0; d < D; d++)
                        s += a[(i * Q + q) * D + d] * b[(i * K + k) * D + d];
                    ref[(i * Q + q) * K + k] = s;
                }
        ir_shape s[2] = {TU_SHAPE(B, H, Q, D), TU_SHAPE(B, H, K, D)};
        check_einsum("bhqd,bhkd->bhqk", 2, s, (const double *[]){a, b}, TU_SHAPE(B, H, Q, K), ref);
        free(a);
        free(b);
    }
    { /* implicit output: ij,jk (-> ik); transpose and row sums */
        double *a = rnd(12, 3), *b = rnd(20, 4), ref[15], rt[12], rs[3];
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++) s += a[i * 4 + j] * b[j * 5 + k];
                ref[i * 5 + k] = s;
            }
        for (int i = 0; i < 3; i++) {
            rs[i] = 0;
            for (int j = 0; j < 4; j++) rt[j * 3 + i] = a[i * 4 + j], rs[i] += a[i * 4 + j];
        }
        ir_shape s[2] = {TU_SHAPE(3, 4), TU_SHAPE(4, 5)};
        check_einsum("ij,jk", 2, s, (const double *[]){a, b}, TU_SHAPE(3, 5), ref);
        check_einsum("ij -> ji", 1, s, (const double *[]){a}, TU_SHAPE(4, 3), rt);
        check_einsum("ij->i", 1, s, (const double *[]){a}, TU_SHAPE(3), rs);
        double all = rs[0] + rs[1] + rs[2];
        check_einsum("ij->", 1, s, (const double *[]){a}, TU_SCALAR_SHAPE, &all);
        free(a);
        free(b);
    }
    { /* a batch of diagonals: ...ii->...i */
        double *a = rnd(2 * 3 * 3, 5), ref[6];
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++) ref[b * 3 + i] = a[b * 9 + i * 3 + i];
        ir_shape s[1] = {TU_SHAPE(2, 3, 3)};
        check_einsum("...ii->...i", 1, s, (const double *[]){a}, TU_SHAPE(2, 3), ref);
        free(a);
    }
    { /* broadcast batch dims: ...ij,...jk->...ik of [2,1,3,4] and [5,4,2] -> [2,5,3,2] */
        double *a = rnd(2 * 3 * 4, 6), *b = rnd(5 * 4 * 2, 7), ref[2 * 5 * 3 * 2];
        for (int p = 0; p < 2; p++)
            for (int q = 0; q < 5; q++)
                for (int i = 0; i < 3; i++)
                    for (int k = 0; k < 2; k++) {
                        double s = 0;
                        for (int j = 0; j < 4; j++)
                            s += a[(p * 3 + i) * 4 + j] * b[(q * 4 + j) * 2 + k];
                        ref[((p * 5 + q) * 3 + i) * 2 + k] = s;
                    }
        ir_shape s[2] = {TU_SHAPE(2, 1, 3, 4), TU_SHAPE(5, 4, 2)};
        check_einsum("...ij,...jk->...ik", 2, s, (const double *[]){a, b}, TU_SHAPE(2, 5, 3, 2),
                     ref);
        free(a);
        free(b);
    }
    { /* three operands: abc,cd,de->abe */
        double *a = rnd(2 * 3 * 4, 8), *b = rnd(4 * 5, 9), *c = rnd(5 * 2, 10), ref[2 * 3 * 2];
        for (int ab = 0; ab < 6; ab++)
            for (int e = 0; e < 2; e++) {
                double s = 0;
                for (int cc = 0; cc < 4; cc++)
                    for (int dd = 0; dd < 5; dd++)
                        s += a[ab * 4 + cc] * b[cc * 5 + dd] * c[dd * 2 + e];
                ref[ab * 2 + e] = s;
            }
        ir_shape s[3] = {TU_SHAPE(2, 3, 4), TU_SHAPE(4, 5), TU_SHAPE(5, 2)};
        check_einsum("abc,cd,de->abe", 3, s, (const double *[]){a, b, c}, TU_SHAPE(2, 3, 2), ref);
        free(a);
        free(b);
        free(c);
    }
}

static void test_einsum_errors(void **state) {
    (void)state;
    float x[12] = {0};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(3, 4), x), tu_data_in(IR_F32, TU_SHAPE(3, 4), x)};
    static const char *const bad[] = {"ij,jk->ik", "ijk->i", "ij->k", "ij->ii", "i1->i", "ij"};
    const int nops[] = {2, 1, 1, 1, 1, 2};
    for (int i = 0; i < 6; i++) {
        ir_attr a = tu_attr_str("equation", bad[i]);
        ir_tensor out[1] = {{0}};
        ir_diag d = {{0}};
        ir_status st = tu_run_op(IR_OP_Einsum, nops[i], in, 1, 1, &a, out, &d);
        if (st == IR_OK) fail_msg("equation '%s' was accepted", bad[i]);
        assert_non_null(strstr(d.msg, "Einsum"));
    }
}

static void test_einsum_grad(void **state) {
    (void)state;
    struct {
        const char *eq;
        int n;
        ir_shape s[3];
    } cases[] = {
        {"bij,bjk->bik", 2, {TU_SHAPE(2, 3, 4), TU_SHAPE(2, 4, 5)}},
        {"bhqd,bhkd->bhqk", 2, {TU_SHAPE(1, 2, 3, 4), TU_SHAPE(1, 2, 5, 4)}},
        {"ij->ji", 1, {TU_SHAPE(3, 4)}},
        {"ij->i", 1, {TU_SHAPE(3, 4)}},
        {"ij,ij", 2, {TU_SHAPE(3, 4), TU_SHAPE(3, 4)}},
        {"ij,jk->i", 2, {TU_SHAPE(3, 4), TU_SHAPE(4, 5)}},
        {"...ij,...jk->...ik", 2, {TU_SHAPE(2, 1, 3, 4), TU_SHAPE(5, 4, 2)}},
        {"abc,cd,de->abe", 3, {TU_SHAPE(2, 3, 4), TU_SHAPE(4, 5), TU_SHAPE(5, 2)}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gc_in in[3];
        for (int k = 0; k < cases[c].n; k++) in[k] = P(cases[c].s[k]);
        ir_attr a = tu_attr_str("equation", cases[c].eq);
        gc_check(IR_OP_Einsum, cases[c].n, in, 1, 1, &a, TOL);
    }
    /* diagonals: of a constant operand, and of parameters (the gradient of the diagonal,
     * broadcast along the repeated dimensions and masked to the diagonal) */
    gc_in diag_const[2] = {{.kind = GC_CONST,
                            .dtype = F64,
                            .shape = TU_SHAPE(3, 3),
                            .data = (double[9]){1, 2, 3, 4, 5, 6, 7, 8, 9}},
                           P(TU_SHAPE(3, 4))};
    ir_attr a = tu_attr_str("equation", "ii,ij->j");
    gc_check(IR_OP_Einsum, 2, diag_const, 1, 1, &a, TOL);
    struct {
        const char *eq;
        int n;
        ir_shape s[2];
    } diag[] = {
        {"ii,ij->j", 2, {TU_SHAPE(3, 3), TU_SHAPE(3, 4)}},
        {"ii->i", 1, {TU_SHAPE(4, 4)}},
        {"ii->", 1, {TU_SHAPE(4, 4)}},
        {"bii->bi", 1, {TU_SHAPE(2, 3, 3)}},
        {"iji->j", 1, {TU_SHAPE(3, 2, 3)}},
        {"iij,jk->ik", 2, {TU_SHAPE(3, 3, 2), TU_SHAPE(2, 4)}},
        {"...ii->...i", 1, {TU_SHAPE(2, 3, 3)}},
    };
    for (size_t c = 0; c < sizeof diag / sizeof diag[0]; c++) {
        gc_in in[2];
        for (int k = 0; k < diag[c].n; k++) in[k] = P(diag[c].s[k]);
        ir_attr ad = tu_attr_str("equation", diag[c].eq);
        gc_check(IR_OP_Einsum, diag[c].n, in, 1, 1, &ad, TOL);
    }
}

static void test_prelu(void **state) {
    (void)state;
    /* forward: per-channel slope [3,1,1] on [2,3,2,2], float32 and int64 */
    float x[24], s[3] = {0.1f, -2.0f, 0.5f}, ref[24];
    int64_t xi[24], si[3] = {2, -3, 0};
    for (int i = 0; i < 24; i++) {
        x[i] = (float)(i % 7) - 3.0f;
        xi[i] = i % 7 - 3;
        int c = i / 4 % 3;
        ref[i] = x[i] < 0 ? s[c] * x[i] : x[i];
    }
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 2, 2), x),
                   tu_data_in(IR_F32, TU_SHAPE(3, 1, 1), s)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    if (tu_run_op(IR_OP_PRelu, 2, in, 1, 0, NULL, out, &d) != IR_OK) fail_msg("%s", d.msg);
    for (int i = 0; i < 24; i++) assert_true(((float *)out[0].data)[i] == ref[i]);
    tu_free_outputs(1, out);
    tu_in ii[2] = {tu_data_in(IR_I64, TU_SHAPE(2, 3, 2, 2), xi),
                   tu_data_in(IR_I64, TU_SHAPE(3, 1, 1), si)};
    if (tu_run_op(IR_OP_PRelu, 2, ii, 1, 0, NULL, out, &d) != IR_OK) fail_msg("%s", d.msg);
    for (int i = 0; i < 24; i++) {
        int64_t v = xi[i] < 0 ? si[i / 4 % 3] * xi[i] : xi[i];
        assert_int_equal(((int64_t *)out[0].data)[i], v);
    }
    tu_free_outputs(1, out);
    /* a slope that does not broadcast to X one way */
    tu_in badin[2] = {tu_data_in(IR_F32, TU_SHAPE(3, 1, 1), s),
                      tu_data_in(IR_F32, TU_SHAPE(2, 3, 2, 2), x)};
    assert_int_equal(tu_run_op(IR_OP_PRelu, 2, badin, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    /* gradients of X and of a broadcast slope */
    gc_in g1[2] = {P(TU_SHAPE(2, 3, 4)), P(TU_SHAPE(3, 1))};
    gc_check(IR_OP_PRelu, 2, g1, 1, 0, NULL, TOL);
    gc_in g2[2] = {P(TU_SHAPE(2, 5)), P(TU_SCALAR_SHAPE)};
    gc_check(IR_OP_PRelu, 2, g2, 1, 0, NULL, TOL);
}

static void test_mean(void **state) {
    (void)state;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c[2] = {-1, 1}, ref[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) ref[i * 3 + j] = (a[i * 3 + j] + b[j] + c[i]) / 3.0;
    tu_in in[3] = {tu_data_in(IR_F64, TU_SHAPE(2, 3), a), tu_data_in(IR_F64, TU_SHAPE(3), b),
                   tu_data_in(IR_F64, TU_SHAPE(2, 1), c)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    if (tu_run_op(IR_OP_Mean, 3, in, 1, 0, NULL, out, &d) != IR_OK) fail_msg("%s", d.msg);
    tu_expect_shape(&out[0], TU_SHAPE(2, 3));
    for (int i = 0; i < 6; i++) assert_true(fabs(((double *)out[0].data)[i] - ref[i]) < 1e-14);
    tu_free_outputs(1, out);
    gc_in g[3] = {P(TU_SHAPE(2, 3)), P(TU_SHAPE(3)), P(TU_SHAPE(2, 1))};
    gc_check(IR_OP_Mean, 3, g, 1, 0, NULL, TOL);
    gc_check(IR_OP_Mean, 1, g, 1, 0, NULL, TOL);
}

/* Attention-23 (causal, 4-D, from the node test) expands into differentiable ops: the float64
 * training graph's gradient of K matches central differences of the float64 forward. */
static void test_attention_grad(void **state) {
    (void)state;
    char path[1024];
    ir_diag d = {{0}};
    ir_status st;
    const char *dir = "tests/conformance/node/test_attention_4d_gqa_causal";
    char rel[256];
    snprintf(rel, sizeof rel, "%s/model.onnx", dir);
    ir_graph *f32 = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
    if (!f32) fail_msg("%s", d.msg);
    for (int i = 0; i < f32->n_nodes; i++) assert_int_not_equal(f32->nodes[i].op, IR_OP_OPAQUE);
    ir_graph *g = ir_graph_to_f64(f32, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    ir_graph *tg = ir_build_training(g, NULL, &st, &d);
    if (!tg) fail_msg("training graph: %s", d.msg);
    /* the inputs (Q, K, V) from the fixture, as float64 */
    rt_binding b[3], bt[3];
    double *data[3];
    for (int i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "%s/input_%d.npy", dir, i);
        ir_dtype t;
        ir_shape s;
        ir_blob *bl;
        if (ir_npy_read(tu_src_path(rel, path, sizeof path), &t, &s, &bl, &d))
            fail_msg("%s", d.msg);
        int64_t n = ir_shape_numel(&s);
        data[i] = malloc(sizeof(double) * (size_t)n);
        for (int64_t j = 0; j < n; j++) data[i][j] = ir_load_f64(ir_blob_data(bl), t, j);
        ir_blob_unref(bl);
        b[i] = (rt_binding){.value = g->inputs[i], .dtype = IR_F64, .shape = s, .data = data[i]};
        bt[i] = b[i];
        bt[i].value = ir_graph_find_value(tg, g->values[g->inputs[i]].name);
        assert_true(bt[i].value >= 0);
    }
    rt_result r = {0};
    rt_options o = {.seed = 1};
    if (rt_run(tg, bt, 3, &o, &r, &d)) fail_msg("training run: %s", d.msg);
    int k = 0;
    while (k < tg->n_outputs && strcmp(tg->values[tg->outputs[k]].name, "K.grad") != 0) k++;
    if (k == tg->n_outputs) fail_msg("no K.grad among the training graph's outputs");
    const double *gk = r.outputs[k].data;
    const int64_t nk = ir_shape_numel(&b[1].shape);
    double num = 0, den = 0, *pert = malloc(sizeof(double) * (size_t)nk);
    for (int64_t j = 0; j < nk; j += 7) {
        double l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            memcpy(pert, data[1], sizeof(double) * (size_t)nk);
            pert[j] += sgn ? -1e-6 : 1e-6;
            rt_binding pb[3] = {b[0], b[1], b[2]};
            pb[1].data = pert;
            rt_result fr = {0};
            if (rt_run(g, pb, 3, &o, &fr, &d)) fail_msg("forward: %s", d.msg);
            l[sgn] = 0;
            for (int64_t e = 0; e < ir_shape_numel(&fr.outputs[0].shape); e++)
                l[sgn] += ((const double *)fr.outputs[0].data)[e];
            rt_result_free(&fr);
        }
        double fd = (l[0] - l[1]) / 2e-6;
        num += (gk[j] - fd) * (gk[j] - fd);
        den += fd * fd;
    }
    double err = sqrt(num) / fmax(sqrt(den), 1e-12);
    if (!(err < 1e-6)) fail_msg("K.grad: relative error %.3g", err);
    free(pert);
    for (int i = 0; i < 3; i++) free(data[i]);
    rt_result_free(&r);
    ir_graph_free(tg);
    ir_graph_free(g);
    ir_graph_free(f32);
}

static void test_gridsample_grad(void **state) {
    (void)state;
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    double grid2[2 * 3 * 2 * 2], grid3[1 * 2 * 2 * 1 * 3];
    gc_fill(grid2, F64, 24, 77, -1.3, 1.3);
    gc_fill(grid3, F64, 12, 78, -1.1, 1.1);
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            for (int ac = 0; ac < 2; ac++) {
                ir_attr a[3] = {tu_attr_str("mode", modes[m]), tu_attr_str("padding_mode", pads[p]),
                                tu_attr_int("align_corners", ac)};
                gc_in in[2] = {
                    P(TU_SHAPE(2, 2, 4, 5)),
                    {.kind = GC_CONST, .dtype = F64, .shape = TU_SHAPE(2, 3, 2, 2), .data = grid2}};
                gc_check(IR_OP_GridSample, 2, in, 1, 3, a, TOL);
                /* the grid's gradient too (zero for nearest), the points inside, around the
                 * border and folded more than once by reflection */
                static const double span[] = {0.9, 1.4, 2.7};
                for (int sp = 0; sp < 3; sp++) {
                    gc_in both[2] = {P(TU_SHAPE(2, 3, 4, 5)), P(TU_SHAPE(2, 3, 2, 2))};
                    both[1].lo = -span[sp];
                    both[1].hi = span[sp];
                    gc_check(IR_OP_GridSample, 2, both, 1, 3, a, TOL);
                    gc_in grid_only[2] = {
                        {.kind = GC_CONST, .dtype = F64, .shape = TU_SHAPE(1, 2, 3, 3)},
                        P(TU_SHAPE(1, 4, 1, 2))};
                    double xv[18];
                    gc_fill(xv, F64, 18, 79 + (uint64_t)sp, -1, 1);
                    grid_only[0].data = xv;
                    grid_only[1].lo = -span[sp];
                    grid_only[1].hi = span[sp];
                    gc_check(IR_OP_GridSample, 2, grid_only, 1, 3, a, TOL);
                    if (m == 2) continue; /* volumetric: nearest and linear */
                    gc_in vol[2] = {P(TU_SHAPE(1, 2, 3, 4, 2)), P(TU_SHAPE(1, 2, 2, 1, 3))};
                    vol[1].lo = -span[sp];
                    vol[1].hi = span[sp];
                    gc_check(IR_OP_GridSample, 2, vol, 1, 3, a, TOL);
                }
                if (m == 2) continue;
                gc_in v[2] = {P(TU_SHAPE(1, 2, 3, 4, 2)),
                              {.kind = GC_CONST,
                               .dtype = F64,
                               .shape = TU_SHAPE(1, 2, 2, 1, 3),
                               .data = grid3}};
                gc_check(IR_OP_GridSample, 2, v, 1, 3, a, TOL);
            }
}

/* A spatial transformer: the grid is computed from the input (a Linear of its pooled features,
 * added to a fixed base grid), so its gradient flows back into the Linear's weight. The training
 * graph's gradients of every parameter against finite differences. */
static void test_gridsample_stn(void **state) {
    (void)state;
    enum { N = 2, C = 3, H = 4, W = 5, HO = 3, WO = 4 };
    ir_graph *g = ir_graph_new();
    double xw[N * C * H * W], fc[C * HO * WO * 2], base[HO * WO * 2];
    gc_fill(xw, F64, N * C * H * W, 11, -1, 1);
    gc_fill(fc, F64, C * HO * WO * 2, 12, -0.3, 0.3);
    for (int i = 0; i < HO; i++)
        for (int j = 0; j < WO; j++) {
            base[(i * WO + j) * 2] = -1.1 + 2.2 * j / (WO - 1);
            base[(i * WO + j) * 2 + 1] = -0.9 + 1.8 * i / (HO - 1);
        }
    int x = gc_const(g, "x", F64, TU_SHAPE(N, C, H, W), xw, IR_VF_PARAM | IR_VF_INITIALIZER);
    int w = gc_const(g, "fc", F64, TU_SHAPE(C, HO * WO * 2), fc, IR_VF_PARAM | IR_VF_INITIALIZER);
    int bg = gc_const(g, "base", F64, TU_SHAPE(1, HO, WO, 2), base, 0);
    int64_t gshape[] = {N, HO, WO, 2};
    int gs = gc_const(g, "gshape", IR_I64, TU_SHAPE(4), gshape, 0);
    int pooled, flat, off, off4, grid, y;
    gc_node(g, IR_OP_GlobalAveragePool, "pool", 1, &x, 1, &pooled, 0, NULL);
    int64_t fshape[] = {N, C};
    int fs = gc_const(g, "fshape", IR_I64, TU_SHAPE(2), fshape, 0);
    gc_node(g, IR_OP_Reshape, "flat", 2, (int[]){pooled, fs}, 1, &flat, 0, NULL);
    gc_node(g, IR_OP_MatMul, "loc", 2, (int[]){flat, w}, 1, &off, 0, NULL);
    gc_node(g, IR_OP_Reshape, "off4", 2, (int[]){off, gs}, 1, &off4, 0, NULL);
    gc_node(g, IR_OP_Add, "grid", 2, (int[]){off4, bg}, 1, &grid, 0, NULL);
    ir_attr a[2] = {tu_attr_str("mode", "bilinear"), tu_attr_str("padding_mode", "reflection")};
    gc_node(g, IR_OP_GridSample, "sample", 2, (int[]){x, grid}, 1, &y, 2, a);
    double rw[N * C * HO * WO];
    gc_fill(rw, F64, N * C * HO * WO, 13, -1, 1);
    int r = gc_const(g, "R", F64, TU_SHAPE(N, C, HO, WO), rw, 0), wy;
    gc_node(g, IR_OP_Mul, "weigh", 2, (int[]){y, r}, 1, &wy, 0, NULL);
    ir_graph_add_output(g, wy);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *tg = ir_build_training(g, NULL, &st, &d);
    if (!tg) fail_msg("ir_build_training: %s", d.msg);
    bool grid_grad = false;
    for (int i = 0; i < tg->n_nodes; i++) grid_grad |= tg->nodes[i].op == IR_OP_GridSampleGridGrad;
    assert_true(grid_grad);
    rt_result res = {0};
    rt_options o = {.seed = 5, .poison_freed = true};
    if (rt_run(tg, NULL, 0, &o, &res, &d) != IR_OK) fail_msg("training run: %s", d.msg);
    static const char *const names[] = {"x", "fc"};
    const int vals[] = {x, w};
    for (int p = 0; p < 2; p++) {
        char want[32];
        snprintf(want, sizeof want, "%s.grad", names[p]);
        int k = 0;
        while (k < tg->n_outputs && strcmp(tg->values[tg->outputs[k]].name, want) != 0) k++;
        assert_true(k < tg->n_outputs);
        const ir_value *pv = &g->values[vals[p]];
        int64_t n = ir_shape_numel(&pv->shape);
        double *pert = malloc(sizeof(double) * (size_t)n), num = 0, den = 0;
        for (int64_t j = 0; j < n; j += 3) {
            double l[2];
            for (int sg = 0; sg < 2; sg++) {
                memcpy(pert, ir_blob_data(pv->blob), sizeof(double) * (size_t)n);
                pert[j] += sg ? -1e-6 : 1e-6;
                rt_binding b[1],
                    e = {.value = vals[p], .dtype = F64, .shape = pv->shape, .data = pert};
                l[sg] = gc_loss(g, b, 0, &e);
            }
            double fd = (l[0] - l[1]) / 2e-6, an = ((const double *)res.outputs[k].data)[j];
            num += (an - fd) * (an - fd);
            den += fd * fd;
        }
        free(pert);
        double err = sqrt(num) / fmax(sqrt(den), 1e-12);
        if (!(err < TOL)) fail_msg("%s: relative error %.3g", want, err);
    }
    rt_result_free(&res);
    ir_graph_free(tg);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_forward),
        cmocka_unit_test(test_einsum_errors),
        cmocka_unit_test(test_einsum_grad),
        cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_mean),
        cmocka_unit_test(test_attention_grad),
        cmocka_unit_test(test_gridsample_grad),
        cmocka_unit_test(test_gridsample_stn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
