/* test_ops_norm_reduce.c - BatchNormalization (inference, training in the opset-15 and opset-9
 * forms), LayerNormalization, InstanceNormalization, Softmax/LogSoftmax, the Reduce* family,
 * ArgMax, CumSum and Resize against naive references computed here, plus error paths. */
#include "test-util.h"

#include "ir-impl.h"

static void test_op_table(void **st) {
    const ir_op_def *defs[] = {&ir_opdef_BatchNormalization,
                               &ir_opdef_LayerNormalization,
                               &ir_opdef_InstanceNormalization,
                               &ir_opdef_Softmax,
                               &ir_opdef_LogSoftmax,
                               &ir_opdef_ReduceMean,
                               &ir_opdef_ReduceSum,
                               &ir_opdef_ReduceMax,
                               &ir_opdef_ReduceMin,
                               &ir_opdef_ReduceProd,
                               &ir_opdef_ReduceL2,
                               &ir_opdef_ArgMax,
                               &ir_opdef_CumSum,
                               &ir_opdef_Resize};
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        ir_op_kind k = ir_op_find("", defs[i]->name);
        assert_int_not_equal(k, IR_OP_OPAQUE);
        assert_ptr_equal(ir_op_get(k), defs[i]);
    }
}

static tu_in f32_in(ir_shape s, const float *p, bool constant) {
    return (tu_in){.dtype = IR_F32, .shape = s, .data = p, .constant = constant};
}

/* ---------------------------------------------------------------- BatchNormalization */

enum { BN_N = 3, BN_C = 4, BN_HW = 10 };

static void bn_params(float *scale, float *bias, float *mean, float *var) {
    tu_fill(scale, BN_C, 51);
    tu_fill(bias, BN_C, 52);
    tu_fill(mean, BN_C, 53);
    tu_fill(var, BN_C, 54);
    for (int c = 0; c < BN_C; c++) var[c] = var[c] + 1.5f; /* positive */
}

static void test_bn_inference(void **st) {
    /* sc has a spare element for the wrong-length case below */
    float x[BN_N * BN_C * BN_HW], sc[BN_C + 1] = {0}, b[BN_C], m[BN_C], v[BN_C],
                                            ref[BN_N * BN_C * BN_HW];
    tu_fill(x, BN_N * BN_C * BN_HW, 50);
    bn_params(sc, b, m, v);
    const float eps = 1e-3f;
    for (int n = 0; n < BN_N; n++)
        for (int c = 0; c < BN_C; c++)
            for (int i = 0; i < BN_HW; i++) {
                int at = (n * BN_C + c) * BN_HW + i;
                ref[at] = (float)((x[at] - m[c]) / sqrt(v[c] + (double)eps) * sc[c] + b[c]);
            }
    tu_in in[5] = {f32_in(TU_SHAPE(BN_N, BN_C, 2, 5), x, false), f32_in(TU_SHAPE(BN_C), sc, true),
                   f32_in(TU_SHAPE(BN_C), b, true), f32_in(TU_SHAPE(BN_C), m, true),
                   f32_in(TU_SHAPE(BN_C), v, true)};
    ir_attr at[1] = {tu_attr_float("epsilon", eps)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_BatchNormalization, 5, in, 1, 1, at, out, &d), IR_OK);
    assert_true(tu_rel_err_f32(out[0].data, ref, BN_N * BN_C * BN_HW) < 1e-6);
    tu_free_outputs(1, out);
    /* scale of the wrong length */
    in[1].shape = TU_SHAPE(BN_C + 1);
    assert_int_equal(tu_run_op(IR_OP_BatchNormalization, 5, in, 1, 1, at, out, &d), IR_ERR_SHAPE);
}

/* Training: batch statistics with the biased variance; running stats updated per the ONNX spec
 * (input * momentum + batch * (1 - momentum), batch variance biased). */
static void check_bn_training(bool opset9_form) {
    enum { NX = BN_N * BN_C * BN_HW };
    float x[NX], sc[BN_C], b[BN_C], m[BN_C], v[BN_C], ref[NX];
    float rm[BN_C], rv[BN_C], bm[BN_C], bv[BN_C];
    tu_fill(x, NX, 60);
    for (int i = 0; i < NX; i++) x[i] = x[i] * 2 + (float)(i % 3);
    bn_params(sc, b, m, v);
    const float eps = 1e-5f, mom = 0.8f;
    for (int c = 0; c < BN_C; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_HW; i++) s += x[(n * BN_C + c) * BN_HW + i];
        double mean = s / (BN_N * BN_HW);
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_HW; i++) {
                double dlt = x[(n * BN_C + c) * BN_HW + i] - mean;
                q += dlt * dlt;
            }
        double var = q / (BN_N * BN_HW);
        for (int n = 0; n < BN_N; n++)
            for (int i = 0; i < BN_HW; i++) {
                int at = (n * BN_C + c) * BN_HW + i;
                ref[at] = (float)((x[at] - mean) / sqrt(var + eps) * sc[c] + b[c]);
            }
        rm[c] = (float)(m[c] * mom + mean * (1 - mom));
        rv[c] = (float)(v[c] * mom + var * (1 - mom));
        bm[c] = (float)mean;
        bv[c] = (float)var;
    }
    tu_in in[5] = {f32_in(TU_SHAPE(BN_N, BN_C, BN_HW), x, false), f32_in(TU_SHAPE(BN_C), sc, true),
                   f32_in(TU_SHAPE(BN_C), b, true), f32_in(TU_SHAPE(BN_C), m, true),
                   f32_in(TU_SHAPE(BN_C), v, true)};
    ir_attr at[3] = {tu_attr_float("epsilon", eps), tu_attr_float("momentum", mom),
                     tu_attr_int("training_mode", 1)};
    int n_out = opset9_form ? 5 : 3;
    ir_tensor out[5];
    ir_diag d = {{0}};
    assert_int_equal(
        tu_run_op(IR_OP_BatchNormalization, 5, in, n_out, opset9_form ? 2 : 3, at, out, &d), IR_OK);
    assert_true(tu_rel_err_f32(out[0].data, ref, NX) < 1e-5);
    assert_true(ir_shape_eq(&out[1].shape, &(ir_shape){1, {BN_C}}));
    assert_true(tu_rel_err_f32(out[1].data, rm, BN_C) < 1e-5);
    assert_true(tu_rel_err_f32(out[2].data, rv, BN_C) < 1e-5);
    if (opset9_form) {
        assert_true(tu_rel_err_f32(out[3].data, bm, BN_C) < 1e-5);
        assert_true(tu_rel_err_f32(out[4].data, bv, BN_C) < 1e-5);
    }
    tu_free_outputs(n_out, out);
}

static void test_bn_training(void **st) {
    check_bn_training(false);
    check_bn_training(true);
    /* training_mode=0 with running-stat outputs is invalid */
    float f[BN_N * BN_C * BN_HW] = {0}, one[BN_C] = {1, 1, 1, 1};
    tu_in in[5] = {f32_in(TU_SHAPE(BN_N, BN_C, BN_HW), f, false), f32_in(TU_SHAPE(BN_C), one, true),
                   f32_in(TU_SHAPE(BN_C), one, true), f32_in(TU_SHAPE(BN_C), one, true),
                   f32_in(TU_SHAPE(BN_C), one, true)};
    ir_attr at[1] = {tu_attr_int("training_mode", 0)};
    ir_tensor out[3];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_BatchNormalization, 5, in, 3, 1, at, out, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- LayerNorm, InstanceNorm */

static void run_layernorm(int64_t axis, bool with_bias) {
    enum { A = 2, B = 3, C = 8, NX = A * B * C };
    float x[NX], ref[NX], mean[A * B], inv[A * B];
    tu_fill(x, NX, 70);
    int ax = (int)(axis < 0 ? axis + 3 : axis);
    int64_t inner = ax == 1 ? B * C : C, rows = NX / inner;
    float sc[B * C], bi[B * C];
    tu_fill(sc, inner, 71);
    tu_fill(bi, inner, 72);
    const float eps = 1e-5f;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0, q = 0;
        for (int64_t i = 0; i < inner; i++) s += x[r * inner + i];
        double m = s / (double)inner;
        for (int64_t i = 0; i < inner; i++) q += (x[r * inner + i] - m) * (x[r * inner + i] - m);
        double iv = 1 / sqrt(q / (double)inner + eps);
        for (int64_t i = 0; i < inner; i++)
            ref[r * inner + i] =
                (float)((x[r * inner + i] - m) * iv * sc[i] + (with_bias ? bi[i] : 0));
        mean[r] = (float)m;
        inv[r] = (float)iv;
    }
    ir_shape ss = ax == 1 ? TU_SHAPE(B, C) : TU_SHAPE(C);
    tu_in in[3] = {f32_in(TU_SHAPE(A, B, C), x, false), f32_in(ss, sc, true),
                   f32_in(ss, with_bias ? bi : NULL, true)};
    ir_attr at[2] = {tu_attr_int("axis", axis), tu_attr_float("epsilon", eps)};
    ir_tensor out[3];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_LayerNormalization, 3, in, 3, 2, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(tu_rel_err_f32(out[0].data, ref, NX) < 1e-5);
    ir_shape ms = ax == 1 ? TU_SHAPE(A, 1, 1) : TU_SHAPE(A, B, 1);
    assert_true(ir_shape_eq(&out[1].shape, &ms));
    assert_true(tu_rel_err_f32(out[1].data, mean, rows) < 1e-5);
    assert_true(tu_rel_err_f32(out[2].data, inv, rows) < 1e-5);
    tu_free_outputs(3, out);
}

static void test_layernorm(void **st) {
    run_layernorm(-1, true);
    run_layernorm(1, false);
    float x[24] = {0}, sc[5] = {0};
    tu_in in[2] = {f32_in(TU_SHAPE(2, 3, 4), x, false), f32_in(TU_SHAPE(5), sc, true)};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_LayerNormalization, 2, in, 1, 0, NULL, out, &d), IR_ERR_SHAPE);
    ir_attr bad = tu_attr_int("axis", 3);
    in[1].shape = TU_SHAPE(4);
    assert_int_equal(tu_run_op(IR_OP_LayerNormalization, 2, in, 1, 1, &bad, out, &d),
                     IR_ERR_INVALID);
}

static void test_instancenorm(void **st) {
    enum { N = 2, C = 3, S = 12 };
    float x[N * C * S], sc[C], b[C], ref[N * C * S];
    tu_fill(x, N * C * S, 80);
    tu_fill(sc, C, 81);
    tu_fill(b, C, 82);
    for (int p = 0; p < N * C; p++) {
        double s = 0, q = 0;
        for (int i = 0; i < S; i++) s += x[p * S + i];
        double m = s / S;
        for (int i = 0; i < S; i++) q += (x[p * S + i] - m) * (x[p * S + i] - m);
        for (int i = 0; i < S; i++)
            ref[p * S + i] =
                (float)((x[p * S + i] - m) / sqrt(q / S + 1e-5) * sc[p % C] + b[p % C]);
    }
    tu_in in[3] = {f32_in(TU_SHAPE(N, C, 3, 4), x, false), f32_in(TU_SHAPE(C), sc, true),
                   f32_in(TU_SHAPE(C), b, true)};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_InstanceNormalization, 3, in, 1, 0, NULL, out, &d), IR_OK);
    assert_true(tu_rel_err_f32(out[0].data, ref, N * C * S) < 1e-5);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- Softmax */

static void run_softmax(bool log_sm, int64_t axis) {
    enum { A = 3, B = 5, C = 7, NX = A * B * C };
    float x[NX], ref[NX];
    tu_fill(x, NX, 90);
    for (int i = 0; i < NX; i++) x[i] *= 20; /* large logits: stability matters */
    int ax = (int)(axis < 0 ? axis + 3 : axis);
    int64_t dims[3] = {A, B, C}, len = dims[ax], inner = 1;
    for (int i = ax + 1; i < 3; i++) inner *= dims[i];
    int64_t outer = NX / (len * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double mx = -INFINITY, s = 0;
            for (int64_t i = 0; i < len; i++) mx = fmax(mx, x[base + i * inner]);
            for (int64_t i = 0; i < len; i++) s += exp(x[base + i * inner] - mx);
            for (int64_t i = 0; i < len; i++) {
                double v = x[base + i * inner] - mx;
                ref[base + i * inner] = (float)(log_sm ? v - log(s) : exp(v) / s);
            }
        }
    tu_in in[1] = {f32_in(TU_SHAPE(A, B, C), x, false)};
    ir_attr at[1] = {tu_attr_int("axis", axis)};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(log_sm ? IR_OP_LogSoftmax : IR_OP_Softmax, 1, in, 1, 1, at, out, &d),
                     IR_OK);
    double err = tu_rel_err_f32(out[0].data, ref, NX);
    if (err > 1e-6) fprintf(stderr, "softmax rel err %g\n", err);
    assert_true(err < 1e-6);
    tu_free_outputs(1, out);
}

static void test_softmax(void **st) {
    for (int log_sm = 0; log_sm < 2; log_sm++) {
        run_softmax(log_sm, -1);
        run_softmax(log_sm, 1);
        run_softmax(log_sm, 0);
    }
    float x[6] = {0};
    tu_in in[1] = {f32_in(TU_SHAPE(2, 3), x, false)};
    ir_attr at[1] = {tu_attr_int("axis", 2)};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_Softmax, 1, in, 1, 1, at, out, &d), IR_ERR_INVALID);
}

/* ---------------------------------------------------------------- reductions */

enum { RA = 3, RB = 4, RC = 5, RN = RA * RB * RC };

/* Reference: reduces x[RA,RB,RC] over mask (float64), op 0 sum 1 mean 2 max 3 min 4 prod 5 l2. */
static void red_ref(const float *x, const bool *mask, int op, double *y) {
    int64_t od[3] = {mask[0] ? 1 : RA, mask[1] ? 1 : RB, mask[2] ? 1 : RC};
    int64_t no = od[0] * od[1] * od[2], cnt = RN / no;
    for (int64_t o = 0; o < no; o++)
        y[o] = op == 4 ? 1 : op == 2 ? -INFINITY : op == 3 ? INFINITY : 0;
    for (int a = 0; a < RA; a++)
        for (int b = 0; b < RB; b++)
            for (int c = 0; c < RC; c++) {
                double v = x[(a * RB + b) * RC + c];
                int64_t o =
                    ((mask[0] ? 0 : a) * od[1] + (mask[1] ? 0 : b)) * od[2] + (mask[2] ? 0 : c);
                switch (op) {
                case 0:
                case 1: y[o] += v; break;
                case 2: y[o] = fmax(y[o], v); break;
                case 3: y[o] = fmin(y[o], v); break;
                case 4: y[o] *= v; break;
                case 5: y[o] += v * v; break;
                }
            }
    for (int64_t o = 0; o < no; o++) {
        if (op == 1) y[o] /= (double)cnt;
        if (op == 5) y[o] = sqrt(y[o]);
    }
}

static void run_reduce(int op, int n_axes, const int64_t *axes, bool keep, bool axes_as_input) {
    static const ir_op_kind kinds[6] = {IR_OP_ReduceSum, IR_OP_ReduceMean, IR_OP_ReduceMax,
                                        IR_OP_ReduceMin, IR_OP_ReduceProd, IR_OP_ReduceL2};
    float x[RN];
    double ref[RN];
    float reff[RN];
    tu_fill(x, RN, 100 + (uint64_t)op);
    if (op == 4)
        for (int i = 0; i < RN; i++) x[i] = 0.8f + 0.4f * (x[i] + 1) / 2; /* keep products sane */
    bool mask[3] = {n_axes == 0, n_axes == 0, n_axes == 0};
    for (int i = 0; i < n_axes; i++) mask[axes[i] < 0 ? axes[i] + 3 : axes[i]] = true;
    red_ref(x, mask, op, ref);
    ir_shape expect = {0};
    int64_t dims[3] = {RA, RB, RC};
    for (int i = 0; i < 3; i++)
        if (!mask[i] || keep) expect.dims[expect.rank++] = mask[i] ? 1 : dims[i];
    int64_t ny = ir_shape_numel(&expect);
    for (int64_t i = 0; i < ny; i++) reff[i] = (float)ref[i];
    int64_t ax[3];
    if (n_axes) memcpy(ax, axes, sizeof(int64_t) * (size_t)n_axes);
    ir_attr at[2] = {tu_attr_int("keepdims", keep), tu_attr_ints("axes", n_axes, ax)};
    tu_in in[2] = {f32_in(TU_SHAPE(RA, RB, RC), x, false), {IR_I64, TU_SHAPE(n_axes), ax, true}};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(kinds[op], axes_as_input ? 2 : 1, in, 1,
                            axes_as_input || n_axes == 0 ? 1 : 2, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &expect));
    double err = tu_rel_err_f32(out[0].data, reff, ny);
    if (err > 1e-6) fprintf(stderr, "reduce op %d rel err %g\n", op, err);
    assert_true(err < 1e-6);
    tu_free_outputs(1, out);
}

static void test_reduce_float(void **st) {
    int64_t last[1] = {-1}, mid[1] = {1}, first[1] = {0}, outer2[2] = {0, 2}, inner2[2] = {-2, 2};
    for (int op = 0; op < 6; op++) {
        run_reduce(op, 1, last, true, op == 0);
        run_reduce(op, 1, mid, false, op == 0);
        run_reduce(op, 1, first, true, false);
        run_reduce(op, 2, outer2, false, false); /* scattered axes: generic path */
        run_reduce(op, 2, inner2, true, op == 0);
        run_reduce(op, 0, NULL, false, false); /* all axes */
    }
}

static void test_reduce_int_and_noop(void **st) {
    int64_t x[6] = {5, -3, 7, 2, 1 << 30, 9}, axes[1] = {1};
    tu_in in[2] = {{IR_I64, TU_SHAPE(2, 3), x, false}, {IR_I64, TU_SHAPE(1), axes, true}};
    ir_attr keep0 = tu_attr_int("keepdims", 0);
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_ReduceSum, 2, in, 1, 1, &keep0, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    int64_t esum[2] = {9, 2 + (1 << 30) + 9};
    assert_memory_equal(out[0].data, esum, sizeof esum);
    tu_free_outputs(1, out);
    ir_attr at[2] = {tu_attr_int("keepdims", 0), tu_attr_ints("axes", 1, axes)};
    assert_int_equal(tu_run_op(IR_OP_ReduceMax, 1, in, 1, 2, at, out, &d), IR_OK);
    int64_t emax[2] = {7, 1 << 30};
    assert_memory_equal(out[0].data, emax, sizeof emax);
    tu_free_outputs(1, out);
    assert_int_equal(tu_run_op(IR_OP_ReduceProd, 1, in, 1, 2, at, out, &d), IR_OK);
    int64_t eprod[2] = {-105, (int64_t)2 * (1 << 30) * 9};
    assert_memory_equal(out[0].data, eprod, sizeof eprod);
    tu_free_outputs(1, out);
    /* int32 ReduceMin over everything */
    int32_t xi[4] = {4, -8, 3, 0};
    tu_in in32[1] = {{IR_I32, TU_SHAPE(4), xi, false}};
    assert_int_equal(tu_run_op(IR_OP_ReduceMin, 1, in32, 1, 1, &keep0, out, &d), IR_OK);
    assert_int_equal(out[0].shape.rank, 0);
    assert_int_equal(((int32_t *)out[0].data)[0], -8);
    tu_free_outputs(1, out);
    /* float64 ReduceMean */
    double xd[6] = {1, 2, 3, 4, 5, 6.5};
    tu_in ind[1] = {{IR_F64, TU_SHAPE(2, 3), xd, false}};
    assert_int_equal(tu_run_op(IR_OP_ReduceMean, 1, ind, 1, 2, at, out, &d), IR_OK);
    assert_true(fabs(((double *)out[0].data)[1] - 15.5 / 3) < 1e-12);
    tu_free_outputs(1, out);
    /* ReduceSum with empty axes and noop_with_empty_axes: identity */
    int64_t none[1];
    tu_in ine[2] = {in[0], {IR_I64, TU_SHAPE(0), none, true}};
    ir_attr noop = tu_attr_int("noop_with_empty_axes", 1);
    assert_int_equal(tu_run_op(IR_OP_ReduceSum, 2, ine, 1, 1, &noop, out, &d), IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &in[0].shape));
    assert_memory_equal(out[0].data, x, sizeof x);
    tu_free_outputs(1, out);
    /* errors: axis out of range, repeated axis, non-constant axes */
    int64_t bad[2] = {2, 0};
    ir_attr ab = tu_attr_ints("axes", 1, bad);
    assert_int_equal(tu_run_op(IR_OP_ReduceMean, 1, in, 1, 1, &ab, out, &d), IR_ERR_INVALID);
    int64_t rep[2] = {1, -1};
    ir_attr ar = tu_attr_ints("axes", 2, rep);
    assert_int_equal(tu_run_op(IR_OP_ReduceMax, 1, in, 1, 1, &ar, out, &d), IR_ERR_INVALID);
    in[1].constant = false;
    assert_int_equal(tu_run_op(IR_OP_ReduceSum, 2, in, 1, 0, NULL, out, &d), IR_ERR_UNSUPPORTED);
}

/* ---------------------------------------------------------------- ArgMax, CumSum */

static void test_argmax(void **st) {
    float x[2 * 3 * 4] = {1, 5, 2, 5, 0, 0, 0, 0, 3, 9, 9, 1, /* */
                          7, 7, 1, 2, 8, 1, 3, 4, 2, 2, 2, 8};
    tu_in in[1] = {f32_in(TU_SHAPE(2, 3, 4), x, false)};
    ir_attr at[3] = {tu_attr_int("axis", -1), tu_attr_int("keepdims", 0),
                     tu_attr_int("select_last_index", 0)};
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_ArgMax, 1, in, 1, 3, at, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){2, {2, 3}}));
    int64_t e_first[6] = {1, 0, 1, 0, 0, 3};
    assert_memory_equal(out[0].data, e_first, sizeof e_first);
    tu_free_outputs(1, out);
    at[2] = tu_attr_int("select_last_index", 1);
    assert_int_equal(tu_run_op(IR_OP_ArgMax, 1, in, 1, 3, at, out, &d), IR_OK);
    int64_t e_last[6] = {3, 3, 2, 1, 0, 3};
    assert_memory_equal(out[0].data, e_last, sizeof e_last);
    tu_free_outputs(1, out);
    /* ArgMin: the first minimum, then the last */
    assert_int_equal(tu_run_op(IR_OP_ArgMin, 1, in, 1, 3, at, out, &d), IR_OK);
    int64_t m_last[6] = {0, 3, 3, 2, 1, 2};
    assert_memory_equal(out[0].data, m_last, sizeof m_last);
    tu_free_outputs(1, out);
    at[2] = tu_attr_int("select_last_index", 0);
    assert_int_equal(tu_run_op(IR_OP_ArgMin, 1, in, 1, 3, at, out, &d), IR_OK);
    int64_t m_first[6] = {0, 0, 3, 2, 1, 0};
    assert_memory_equal(out[0].data, m_first, sizeof m_first);
    tu_free_outputs(1, out);
    at[2] = tu_attr_int("select_last_index", 1);
    /* axis 1, keepdims: [2,1,4] */
    at[0] = tu_attr_int("axis", 1);
    at[1] = tu_attr_int("keepdims", 1);
    at[2] = tu_attr_int("select_last_index", 0);
    assert_int_equal(tu_run_op(IR_OP_ArgMax, 1, in, 1, 3, at, out, &d), IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){3, {2, 1, 4}}));
    int64_t e_ax1[8] = {2, 2, 2, 0, 1, 0, 1, 2};
    assert_memory_equal(out[0].data, e_ax1, sizeof e_ax1);
    tu_free_outputs(1, out);
    at[0] = tu_attr_int("axis", 3);
    assert_int_equal(tu_run_op(IR_OP_ArgMax, 1, in, 1, 1, at, out, &d), IR_ERR_INVALID);
}

static void test_cumsum(void **st) {
    enum { A = 2, B = 3, C = 4, NX = A * B * C };
    float x[NX], ref[NX];
    tu_fill(x, NX, 110);
    int64_t axis = -2;
    for (int excl = 0; excl < 2; excl++)
        for (int rev = 0; rev < 2; rev++) {
            for (int a = 0; a < A; a++)
                for (int c = 0; c < C; c++)
                    for (int b = 0; b < B; b++) {
                        double s = 0;
                        for (int j = 0; j < B; j++) {
                            bool take = rev ? (excl ? j > b : j >= b) : (excl ? j < b : j <= b);
                            if (take) s += x[(a * B + j) * C + c];
                        }
                        ref[(a * B + b) * C + c] = (float)s;
                    }
            tu_in in[2] = {f32_in(TU_SHAPE(A, B, C), x, false),
                           {IR_I64, TU_SCALAR_SHAPE, &axis, true}};
            ir_attr at[2] = {tu_attr_int("exclusive", excl), tu_attr_int("reverse", rev)};
            ir_tensor out[1];
            ir_diag d;
            assert_int_equal(tu_run_op(IR_OP_CumSum, 2, in, 1, 2, at, out, &d), IR_OK);
            assert_true(tu_rel_err_f32(out[0].data, ref, NX) < 1e-6);
            tu_free_outputs(1, out);
        }
    int64_t xi[5] = {1, 2, 3, 4, 5}, e[5] = {15, 14, 12, 9, 5};
    int32_t ax0 = 0;
    tu_in in[2] = {{IR_I64, TU_SHAPE(5), xi, false}, {IR_I32, TU_SHAPE(1), &ax0, false}};
    ir_attr rev = tu_attr_int("reverse", 1);
    ir_tensor out[1];
    ir_diag d;
    assert_int_equal(tu_run_op(IR_OP_CumSum, 2, in, 1, 1, &rev, out, &d), IR_OK);
    assert_memory_equal(out[0].data, e, sizeof e);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- Resize */

/* Independent bilinear reference on the last two dims of [N,C,H,W] (PyTorch's formulation:
 * source coordinate clamped at 0, neighbour clamped at the last row/column). */
static float bilinear_ref(const float *plane, int64_t H, int64_t W, int64_t oy, int64_t ox,
                          double sy, double sx, bool align, int64_t OH, int64_t OW) {
    double fy =
        align ? (OH > 1 ? oy * (double)(H - 1) / (double)(OH - 1) : 0) : (oy + 0.5) / sy - 0.5;
    double fx =
        align ? (OW > 1 ? ox * (double)(W - 1) / (double)(OW - 1) : 0) : (ox + 0.5) / sx - 0.5;
    fy = fmin(fmax(fy, 0), (double)(H - 1));
    fx = fmin(fmax(fx, 0), (double)(W - 1));
    int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    int64_t y1 = y0 + 1 < H ? y0 + 1 : H - 1, x1 = x0 + 1 < W ? x0 + 1 : W - 1;
    double ly = fy - (double)y0, lx = fx - (double)x0;
    return (float)((1 - ly) * ((1 - lx) * plane[y0 * W + x0] + lx * plane[y0 * W + x1]) +
                   ly * ((1 - lx) * plane[y1 * W + x0] + lx * plane[y1 * W + x1]));
}

static void test_resize_nearest(void **st) {
    enum { N = 1, C = 2, H = 3, W = 4 };
    float x[N * C * H * W], sc[4] = {1, 1, 2, 2}, ref[N * C * 2 * H * 2 * W];
    tu_fill(x, N * C * H * W, 120);
    for (int p = 0; p < N * C; p++)
        for (int oy = 0; oy < 2 * H; oy++)
            for (int ox = 0; ox < 2 * W; ox++)
                ref[(p * 2 * H + oy) * 2 * W + ox] = x[(p * H + oy / 2) * W + ox / 2];
    tu_in in[3] = {f32_in(TU_SHAPE(N, C, H, W), x, false), f32_in(TU_SHAPE(0), NULL, true),
                   f32_in(TU_SHAPE(4), sc, true)};
    ir_attr at[3] = {tu_attr_str("mode", "nearest"),
                     tu_attr_str("coordinate_transformation_mode", "asymmetric"),
                     tu_attr_str("nearest_mode", "floor")};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_Resize, 3, in, 1, 3, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){4, {N, C, 2 * H, 2 * W}}));
    assert_memory_equal(out[0].data, ref, sizeof ref);
    tu_free_outputs(1, out);
    /* downscale by sizes with half_pixel + round_prefer_ceil: 1-D check on [8] -> [3] */
    float x1[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t sz[1] = {3};
    tu_in in1[4] = {f32_in(TU_SHAPE(8), x1, false),
                    f32_in(TU_SHAPE(0), NULL, true),
                    f32_in(TU_SHAPE(0), NULL, true),
                    {IR_I64, TU_SHAPE(1), sz, true}};
    ir_attr at1[2] = {tu_attr_str("mode", "nearest"),
                      tu_attr_str("nearest_mode", "round_prefer_ceil")};
    assert_int_equal(tu_run_op(IR_OP_Resize, 4, in1, 1, 2, at1, out, &d), IR_OK);
    /* scale 3/8: x = (o + 0.5) * 8/3 - 0.5 = 0.833, 3.5, 6.167 -> 1, 4 (tie up), 6 */
    float e1[3] = {1, 4, 6};
    assert_memory_equal(out[0].data, e1, sizeof e1);
    tu_free_outputs(1, out);
    at1[1] = tu_attr_str("nearest_mode", "round_prefer_floor");
    assert_int_equal(tu_run_op(IR_OP_Resize, 4, in1, 1, 2, at1, out, &d), IR_OK);
    float e2[3] = {1, 3, 6};
    assert_memory_equal(out[0].data, e2, sizeof e2);
    tu_free_outputs(1, out);
}

static void run_bilinear(const char *ctm, bool by_sizes, int64_t OH, int64_t OW, float sy,
                         float sx) {
    enum { N = 2, C = 3, H = 4, W = 5 };
    float x[N * C * H * W];
    tu_fill(x, N * C * H * W, 130);
    bool align = !strcmp(ctm, "align_corners");
    int64_t ny = N * C * OH * OW;
    float *ref = malloc(sizeof(float) * (size_t)ny);
    double ry = by_sizes ? (double)OH / H : sy, rx = by_sizes ? (double)OW / W : sx;
    for (int p = 0; p < N * C; p++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                ref[(p * OH + oy) * OW + ox] =
                    bilinear_ref(x + p * H * W, H, W, oy, ox, ry, rx, align, OH, OW);
    float sc[4] = {1, 1, sy, sx};
    int64_t sz[4] = {N, C, OH, OW};
    tu_in in[4] = {f32_in(TU_SHAPE(N, C, H, W), x, false),
                   f32_in(TU_SHAPE(0), NULL, true),
                   f32_in(TU_SHAPE(4), by_sizes ? NULL : sc, true),
                   {IR_I64, TU_SHAPE(4), by_sizes ? sz : NULL, true}};
    ir_attr at[2] = {tu_attr_str("mode", "linear"),
                     tu_attr_str("coordinate_transformation_mode", ctm)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_Resize, 4, in, 1, 2, at, out, &d);
    if (s) fprintf(stderr, "%s\n", d.msg);
    assert_int_equal(s, IR_OK);
    assert_true(ir_shape_eq(&out[0].shape, &(ir_shape){4, {N, C, OH, OW}}));
    double err = tu_rel_err_f32(out[0].data, ref, ny);
    if (err > 1e-6) fprintf(stderr, "bilinear %s rel err %g\n", ctm, err);
    assert_true(err < 1e-6);
    tu_free_outputs(1, out);
    free(ref);
}

static void test_resize_linear(void **st) {
    run_bilinear("half_pixel", false, 8, 10, 2, 2);
    run_bilinear("pytorch_half_pixel", false, 8, 10, 2, 2);
    run_bilinear("half_pixel", true, 7, 3, 0, 0);
    run_bilinear("half_pixel", false, 6, 7, 1.5f, 1.5f);
    run_bilinear("align_corners", true, 9, 11, 0, 0);
}

/* Cubic (with cubic_coeff_a and exclude_outside) and antialias: Resize is linear in X, and
 * ResizeGrad must be its transpose, so <R x, y> = <x, R^T y>, in float64 to 1e-12. The values
 * themselves are judged against ONNX's reference by the conformance suite (13 cubic and
 * antialias node tests). One 1-D case is checked here by hand: with cubic_coeff_a = -0.5, a
 * linear ramp upsampled by cubic is, away from the edges, the ramp (Keys' kernel reproduces
 * linear functions at a = -0.5 only). */
static void resize_adjoint_case(const char *mode, int antialias, int exclude, const int64_t *osz) {
    enum { N = 1, C = 2, H = 5, W = 7 };
    double x[N * C * H * W], y[N * C * 12 * 12];
    int64_t ny = N * C * osz[2] * osz[3];
    for (int i = 0; i < N * C * H * W; i++) x[i] = sin(0.7 * i + 0.3);
    for (int64_t i = 0; i < ny; i++) y[i] = cos(0.45 * (double)i);
    int64_t xs[4] = {N, C, H, W};
    tu_in in[4] = {tu_data_in(IR_F64, TU_SHAPE(N, C, H, W), x),
                   {IR_F32, TU_SHAPE(0), NULL, true},
                   {IR_F32, TU_SHAPE(0), NULL, true},
                   {IR_I64, TU_SHAPE(4), osz, true}};
    ir_attr at[4] = {tu_attr_str("mode", mode), tu_attr_int("antialias", antialias),
                     tu_attr_int("exclude_outside", exclude), tu_attr_ints("shape", 4, xs)};
    ir_tensor rx[1], rty[1];
    ir_diag d = {{0}};
    ir_status s = tu_run_op(IR_OP_Resize, 4, in, 1, 3, at, rx, &d);
    if (s) fail_msg("%s: %s", mode, d.msg);
    tu_in gin[4] = {tu_data_in(IR_F64, TU_SHAPE(N, C, osz[2], osz[3]), y), in[1], in[2], in[3]};
    s = tu_run_op(IR_OP_ResizeGrad, 4, gin, 1, 4, at, rty, &d);
    if (s) fail_msg("%s grad: %s", mode, d.msg);
    double lhs = 0, rhs = 0, scale = 0;
    for (int64_t i = 0; i < ny; i++) lhs += ((double *)rx[0].data)[i] * y[i];
    for (int i = 0; i < N * C * H * W; i++) {
        rhs += x[i] * ((double *)rty[0].data)[i];
        scale += fabs(x[i] * ((double *)rty[0].data)[i]);
    }
    if (!(fabs(lhs - rhs) <= 1e-12 * scale))
        fail_msg("%s antialias=%d: <Rx,y> %.17g, <x,R^T y> %.17g", mode, antialias, lhs, rhs);
    tu_free_outputs(1, rx);
    tu_free_outputs(1, rty);
}

static void test_resize_cubic_antialias(void **st) {
    const int64_t up[4] = {1, 2, 11, 12}, down[4] = {1, 2, 2, 3}, mixed[4] = {1, 2, 12, 3};
    resize_adjoint_case("cubic", 0, 0, up);
    resize_adjoint_case("cubic", 0, 1, down);
    resize_adjoint_case("cubic", 1, 0, down);
    resize_adjoint_case("cubic", 1, 1, mixed);
    resize_adjoint_case("linear", 1, 0, down);
    resize_adjoint_case("linear", 1, 0, mixed);
    /* 1-D: a ramp upsampled by cubic, half_pixel, scale 2 */
    double ramp[8], s2[1] = {2};
    for (int i = 0; i < 8; i++) ramp[i] = 3 + 0.5 * i;
    tu_in in[3] = {tu_data_in(IR_F64, TU_SHAPE(8), ramp),
                   {IR_F32, TU_SHAPE(0), NULL, true},
                   {IR_F64, TU_SHAPE(1), s2, true}};
    ir_attr cubic[2] = {tu_attr_str("mode", "cubic"), tu_attr_float("cubic_coeff_a", -0.5f)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_Resize, 3, in, 1, 2, cubic, out, &d), IR_OK);
    const double *o = out[0].data;
    for (int xo = 4; xo < 12; xo++) { /* source (xo + 0.5) / 2 - 0.5 in [1.75, 5.25] */
        double xsrc = (xo + 0.5) / 2 - 0.5, want = 3 + 0.5 * xsrc;
        if (fabs(o[xo] - want) > 1e-12) fail_msg("ramp[%d] %.17g, want %.17g", xo, o[xo], want);
    }
    tu_free_outputs(1, out);
}

static void test_resize_errors(void **st) {
    float x[16] = {0}, sc[4] = {1, 1, 2, 2};
    tu_in in[3] = {f32_in(TU_SHAPE(1, 1, 4, 4), x, false), f32_in(TU_SHAPE(0), NULL, true),
                   f32_in(TU_SHAPE(4), sc, true)};
    ir_attr lanczos = tu_attr_str("mode", "lanczos");
    ir_diag d = {{0}};
    assert_int_equal(tu_run_err(IR_OP_Resize, 3, in, 1, 1, &lanczos, &d), IR_ERR_UNSUPPORTED);
    /* tf_crop_and_resize needs its roi, and runs nearest and linear only */
    ir_attr crop[2] = {tu_attr_str("coordinate_transformation_mode", "tf_crop_and_resize"),
                       tu_attr_str("mode", "cubic")};
    assert_int_equal(tu_run_err(IR_OP_Resize, 3, in, 1, 1, crop, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "roi"));
    assert_int_equal(tu_run_err(IR_OP_Resize, 3, in, 1, 2, crop, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "cubic"));
    in[2].shape = TU_SHAPE(3);
    assert_int_equal(tu_run_err(IR_OP_Resize, 3, in, 1, 0, NULL, &d), IR_ERR_SHAPE);
    in[2].shape = TU_SHAPE(4);
    in[2].constant = false;
    assert_int_equal(tu_run_err(IR_OP_Resize, 3, in, 1, 0, NULL, &d), IR_ERR_UNSUPPORTED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_bn_inference),
        cmocka_unit_test(test_bn_training),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_instancenorm),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_reduce_float),
        cmocka_unit_test(test_reduce_int_and_noop),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_resize_nearest),
        cmocka_unit_test(test_resize_linear),
        cmocka_unit_test(test_resize_cubic_antialias),
        cmocka_unit_test(test_resize_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
