/* test_pet_kernels.c - PET's Z_p arithmetic (rules/pet/pet-field.c) and the finite-field kernels of
 * every op a PET program may hold (rules/pet/pet-compile.c, rules/pet/pet-kernels.c, evaluated by
 * rules/pet/pet-cpu.c).
 *
 * Each op runs on small random integers (or multiples of the divisors, for the means) through
 * ir's float kernel, whose result is then exact, and through PET in Z_p on the same integers: the
 * residues must equal the float results mapped into the field, at every element, in the three
 * evaluation modes (whole-tensor, element by element, and lazy at a random subset of positions).
 * The float kernels are an independent implementation (BLAS, im2col, strided views), so this is
 * a reference check of the Z_p kernels, of the compiler's geometry, and of the lazy planner's
 * demand propagation. Affine parts (bias, Gemm's C, a pad constant) are checked to be dropped:
 * the residues equal the float result without them. */
#include "test-util.h"

#include "pet.h"
#include "rt.h"

/* ---------------------------------------------------------------- the field */

static uint32_t ref_mod(__int128 x) {
    __int128 r = x % (__int128)PET_P;
    if (r < 0) r += PET_P;
    return (uint32_t)r;
}

static void test_field_arith(void **state) {
    (void)state;
    uint64_t s = 1;
    for (int i = 0; i < 200000; i++) {
        s = ir_mix64(s + (uint64_t)i);
        uint32_t a = (uint32_t)(s % PET_P), b = (uint32_t)((s >> 31) % PET_P);
        if (i < 8) a = i < 4 ? PET_P - 1 - (uint32_t)i : (uint32_t)i - 4; /* the edges */
        assert_int_equal(pet_add(a, b), ref_mod((__int128)a + b));
        assert_int_equal(pet_sub(a, b), ref_mod((__int128)a - b));
        assert_int_equal(pet_mul(a, b), ref_mod((__int128)a * b));
        assert_int_equal(pet_fold(s), ref_mod((__int128)s));
        assert_int_equal(pet_neg(a), ref_mod(-(__int128)a));
        if (a) assert_int_equal(pet_mul(a, pet_inv(a)), 1);
    }
    assert_int_equal(pet_fold(UINT64_MAX), ref_mod((__int128)UINT64_MAX));
    assert_int_equal(pet_from_int(-5), PET_P - 5);
    assert_int_equal(pet_from_int(INT64_MIN), ref_mod((__int128)INT64_MIN));
    assert_int_equal(pet_to_signed(PET_P - 5), -5);
    assert_int_equal(pet_to_signed(7), 7);
}

/* Doubles map as the dyadic rationals they are: a ring homomorphism on exact products. */
static void test_field_doubles(void **state) {
    (void)state;
    uint32_t h, two, x, y, xy, nan;
    assert_true(pet_from_double(0.5, &h));
    assert_true(pet_from_double(2.0, &two));
    assert_int_equal(pet_mul(h, two), 1);
    assert_true(pet_from_double(-3.0, &x));
    assert_int_equal(x, PET_P - 3);
    const double pairs[][2] = {{0.375, -12.5}, {1.0 / 1024, 3e6}, {-0.0078125, -0.25}, {7, 9}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        assert_true(pet_from_double(pairs[i][0], &x));
        assert_true(pet_from_double(pairs[i][1], &y));
        assert_true(pet_from_double(pairs[i][0] * pairs[i][1], &xy));
        assert_int_equal(pet_mul(x, y), xy);
        assert_true(pet_from_double(pairs[i][0] + pairs[i][1], &xy));
        assert_int_equal(pet_add(x, y), xy);
    }
    assert_false(pet_from_double(NAN, &nan));
    assert_false(pet_from_double(INFINITY, &nan));
}

/* The counter-based generator: reproducible, in range, roughly uniform, independent streams. */
static void test_field_random(void **state) {
    (void)state;
    uint64_t sa = pet_rand_stream(7, 0, pet_var_key("x")),
             sb = pet_rand_stream(7, 1, pet_var_key("x"));
    uint64_t sc = pet_rand_stream(7, 0, pet_var_key("w")),
             sd = pet_rand_stream(8, 0, pet_var_key("x"));
    assert_true(sa != sb && sa != sc && sa != sd);
    double mean = 0;
    int same = 0, n = 100000;
    for (int i = 0; i < n; i++) {
        uint32_t v = pet_rand_at(sa, (uint64_t)i);
        assert_true(v < PET_P);
        assert_int_equal(v, pet_rand_at(sa, (uint64_t)i));
        same += v == pet_rand_at(sb, (uint64_t)i);
        mean += (double)v / n;
    }
    assert_int_equal(same, 0);
    assert_true(fabs(mean / PET_P - 0.5) < 0.01);
}

/* ---------------------------------------------------------------- op cases */

static int input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

static int ints_const(ir_graph *g, const char *name, int n, const int64_t *vals) {
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    int v = ir_graph_add_value(g, name, IR_I64, &s);
    ir_blob *b = ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST;
    return v;
}

/* A float constant; weight=true makes it an initializer (a PET variable), else a literal. */
static int float_const(ir_graph *g, const char *name, ir_shape s, const float *data, bool weight) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_blob *b = ir_blob_new(sizeof(float) * (size_t)ir_shape_numel(&s));
    memcpy(ir_blob_data(b), data, sizeof(float) * (size_t)ir_shape_numel(&s));
    g->values[v].blob = b;
    g->values[v].flags |= IR_VF_CONST | (weight ? IR_VF_INITIALIZER : 0);
    return v;
}

static int op(ir_graph *g, ir_op_kind k, const char *name, int n_in, const int *in, int n_attrs,
              const ir_attr *attrs) {
    int out;
    tu_add_node1(g, k, name, n_in, in, n_attrs, attrs, &out);
    return out;
}

/* Graph inputs filled with integers in [-range, range] times mult. */
typedef struct inputs {
    int n;
    float *data[8];
    rt_binding b[8];
} inputs;

static void fill_inputs(const ir_graph *g, int64_t range, int64_t mult, uint64_t seed, inputs *in) {
    in->n = g->n_inputs;
    assert_true(in->n <= 8);
    for (int i = 0; i < in->n; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        int64_t n = ir_shape_numel(&v->shape);
        in->data[i] = malloc(sizeof(float) * (size_t)(n ? n : 1));
        for (int64_t e = 0; e < n; e++) {
            uint64_t h = ir_mix64(seed * 1000003u + (uint64_t)i * 7919u + (uint64_t)e);
            in->data[i][e] = (float)(((int64_t)(h % (uint64_t)(2 * range + 1)) - range) * mult);
        }
        in->b[i] = (rt_binding){
            .value = g->inputs[i], .dtype = IR_F32, .shape = v->shape, .data = in->data[i]};
    }
}

static void free_inputs(inputs *in) {
    for (int i = 0; i < in->n; i++) free(in->data[i]);
}

static void run_float(const ir_graph *g, const inputs *in, rt_result *r) {
    rt_options o = {.seed = 3};
    ir_diag d = {{0}};
    if (rt_run(g, in->b, in->n, &o, r, &d) != IR_OK) fail_msg("float run: %s", d.msg);
}

/* Residues of every variable of p: graph inputs from in, initializers from their blobs. */
static uint32_t **var_residues(const pet_prog *p, const ir_graph *g, const inputs *in) {
    uint32_t **vars = calloc((size_t)p->n_vars + 1, sizeof *vars);
    for (int i = 0; i < p->n_vars; i++) {
        const pet_value *pv = &p->values[p->vars[i]];
        const float *src = NULL;
        for (int j = 0; j < in->n; j++)
            if (strcmp(g->values[g->inputs[j]].name, pv->name) == 0) src = in->data[j];
        if (!src) src = ir_blob_data(g->values[pv->ir_value].blob);
        vars[i] = malloc(sizeof(uint32_t) * (size_t)(pv->numel + 1));
        for (int64_t e = 0; e < pv->numel; e++) assert_true(pet_from_double(src[e], &vars[i][e]));
    }
    return vars;
}

/* Output k of g in Z_p against want (floats) at every element in the three modes. */
static void check_zp_output(const ir_graph *g, const inputs *in, int k, const float *want,
                            const char *what) {
    pet_prog *p;
    ir_diag d = {{0}};
    if (pet_prog_compile(g, &p, &d) != IR_OK) fail_msg("%s: compile: %s", what, d.msg);
    uint32_t **vars = var_residues(p, g, in);
    int64_t n = p->values[p->outputs[k]].numel, m = 0;
    pet_probe *pr = malloc(sizeof *pr * (size_t)(n + 1));
    uint32_t *vals = malloc(sizeof *vals * (size_t)(n + 1)),
             *exp = malloc(sizeof *exp * (size_t)(n + 1));
    for (int64_t e = 0; e < n; e++) assert_true(pet_from_double(want[e], &exp[e]));
    const pet_eval_mode modes[3] = {PET_EVAL_DENSE, PET_EVAL_SPARSE, PET_EVAL_AUTO};
    for (int mi = 0; mi < 3; mi++) {
        m = 0;
        for (int64_t e = 0; e < n; e++) /* AUTO: a sparse subset, so that evaluation is lazy */
            if (mi < 2 || ir_mix64((uint64_t)e * 31 + 5) % 7 == 0 || n < 4)
                pr[m++] = (pet_probe){.output = k, .index = e};
        if (pet_cpu_eval(p, m, pr, modes[mi], (const uint32_t *const *)vars, 0, 0, vals, NULL,
                         &d) != IR_OK)
            fail_msg("%s: eval: %s", what, d.msg);
        for (int64_t i = 0; i < m; i++)
            if (vals[i] != exp[pr[i].index])
                fail_msg("%s (mode %d): element %lld is %lld, expected %lld (%g)", what, mi,
                         (long long)pr[i].index, (long long)pet_to_signed(vals[i]),
                         (long long)pet_to_signed(exp[pr[i].index]), (double)want[pr[i].index]);
    }
    for (int i = 0; i < p->n_vars; i++) free(vars[i]);
    free(vars);
    free(pr);
    free(vals);
    free(exp);
    pet_prog_free(p);
}

/* Runs g on integers in both arithmetics and compares every output; frees g. */
static void check_graph(ir_graph *g, int64_t range, int64_t mult, const char *what) {
    inputs in;
    rt_result r;
    fill_inputs(g, range, mult, 42, &in);
    run_float(g, &in, &r);
    for (int k = 0; k < r.n_outputs; k++) check_zp_output(g, &in, k, r.outputs[k].data, what);
    rt_result_free(&r);
    free_inputs(&in);
    ir_graph_free(g);
}

static int64_t I64(int64_t v) {
    return v;
}

/* ---------------------------------------------------------------- convolutions */

static void conv_case(ir_shape xs, ir_shape ws, int n_attrs, const ir_attr *attrs,
                      const char *what) {
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", xs), w = input(g, "w", ws);
    ir_graph_add_output(g, op(g, IR_OP_Conv, what, 2, (int[]){x, w}, n_attrs, attrs));
    check_graph(g, 3, 1, what);
}

static void test_conv(void **state) {
    (void)state;
    int64_t p1[] = {1, 1, 1, 1}, pa[] = {0, 2, 1, 0}, s2[] = {2, 2}, d2[] = {2, 3}, s21[] = {2, 1};
    conv_case(TU_SHAPE(2, 3, 7, 6), TU_SHAPE(4, 3, 3, 3), 1,
              (ir_attr[]){tu_attr_ints("pads", 4, p1)}, "conv3x3_pad1");
    conv_case(TU_SHAPE(1, 4, 9, 8), TU_SHAPE(6, 2, 3, 2), 4,
              (ir_attr[]){tu_attr_ints("pads", 4, pa), tu_attr_ints("strides", 2, s21),
                          tu_attr_ints("dilations", 2, d2), tu_attr_int("group", 2)},
              "conv_grouped_strided_dilated");
    conv_case(TU_SHAPE(1, 4, 8, 8), TU_SHAPE(4, 1, 3, 3), 3,
              (ir_attr[]){tu_attr_ints("pads", 4, p1), tu_attr_ints("strides", 2, s2),
                          tu_attr_int("group", 4)},
              "conv_depthwise_s2");
    conv_case(TU_SHAPE(1, 2, 7, 5), TU_SHAPE(3, 2, 2, 3), 2,
              (ir_attr[]){tu_attr_str("auto_pad", "SAME_UPPER"), tu_attr_ints("strides", 2, s2)},
              "conv_same_upper");
    conv_case(TU_SHAPE(2, 3, 11), TU_SHAPE(2, 3, 4), 1,
              (ir_attr[]){tu_attr_ints("pads", 2, (int64_t[]){2, 1})}, "conv1d");
    conv_case(TU_SHAPE(1, 2, 4, 5, 3), TU_SHAPE(2, 2, 2, 3, 2), 1,
              (ir_attr[]){tu_attr_ints("pads", 6, (int64_t[]){1, 0, 1, 0, 1, 1})}, "conv3d");
}

/* The bias is an affine part: the residues are the float result minus the bias. */
static void test_conv_bias_dropped(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int64_t p1[] = {1, 1, 1, 1};
    int x = input(g, "x", TU_SHAPE(1, 2, 5, 5)), w = input(g, "w", TU_SHAPE(3, 2, 3, 3)),
        b = input(g, "b", TU_SHAPE(3));
    int y = op(g, IR_OP_Conv, "conv_bias", 3, (int[]){x, w, b}, 1,
               (ir_attr[]){tu_attr_ints("pads", 4, p1)});
    ir_graph_add_output(g, y);
    inputs in;
    rt_result r;
    fill_inputs(g, 3, 1, 9, &in);
    run_float(g, &in, &r);
    float *want = r.outputs[0].data;
    for (int64_t e = 0; e < 75; e++) want[e] -= in.data[2][e / 25];
    check_zp_output(g, &in, 0, want, "conv_bias");
    pet_prog *p;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(g, &p, &d), IR_OK);
    assert_int_equal(p->affine_dropped, 1);
    assert_int_equal(p->degree, 2);
    pet_prog_free(p);
    rt_result_free(&r);
    free_inputs(&in);
    ir_graph_free(g);
}

static void test_conv_transpose(void **state) {
    (void)state;
    const struct {
        ir_shape xs, ws;
        int64_t s[2], pads[4], opad[2], group;
    } cases[] = {
        {TU_SHAPE(1, 4, 3, 4), TU_SHAPE(4, 1, 3, 3), {2, 2}, {1, 1, 1, 1}, {1, 0}, 2},
        {TU_SHAPE(2, 2, 4, 3), TU_SHAPE(2, 3, 2, 3), {1, 1}, {0, 1, 1, 0}, {0, 0}, 1},
        {TU_SHAPE(1, 3, 3, 3), TU_SHAPE(3, 2, 3, 2), {3, 2}, {0, 0, 0, 0}, {2, 1}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_graph *g = ir_graph_new();
        int x = input(g, "x", cases[i].xs), w = input(g, "w", cases[i].ws);
        int64_t s[2], pads[4], opad[2];
        memcpy(s, cases[i].s, sizeof s);
        memcpy(pads, cases[i].pads, sizeof pads);
        memcpy(opad, cases[i].opad, sizeof opad);
        ir_attr at[] = {tu_attr_ints("strides", 2, s), tu_attr_ints("pads", 4, pads),
                        tu_attr_ints("output_padding", 2, opad),
                        tu_attr_int("group", cases[i].group)};
        ir_graph_add_output(g, op(g, IR_OP_ConvTranspose, "convT", 2, (int[]){x, w}, 4, at));
        check_graph(g, 3, 1, "conv_transpose");
    }
}

static void test_avgpool(void **state) {
    (void)state;
    int64_t k3[] = {3, 3}, p1[] = {1, 1, 1, 1}, s2[] = {2, 2}, k2[] = {2, 2}, pa[] = {0, 1, 1, 0};
    for (int cp = 0; cp < 2; cp++)
        for (int ceil = 0; ceil < 2; ceil++) {
            ir_graph *g = ir_graph_new();
            int x = input(g, "x", TU_SHAPE(2, 3, 7, 6));
            ir_attr at[] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("pads", 4, p1),
                            tu_attr_ints("strides", 2, s2), tu_attr_int("count_include_pad", cp),
                            tu_attr_int("ceil_mode", ceil)};
            ir_graph_add_output(g, op(g, IR_OP_AveragePool, "avg3", 1, &x, 5, at));
            check_graph(g, 3, 36, "avgpool3x3");
        }
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(1, 2, 5, 5));
    ir_attr at[] = {tu_attr_ints("kernel_shape", 2, k2), tu_attr_ints("pads", 4, pa)};
    ir_graph_add_output(g, op(g, IR_OP_AveragePool, "avg2", 1, &x, 2, at));
    check_graph(g, 3, 12, "avgpool2x2");
    g = ir_graph_new();
    x = input(g, "x", TU_SHAPE(2, 3, 4, 5));
    ir_graph_add_output(g, op(g, IR_OP_GlobalAveragePool, "gap", 1, &x, 0, NULL));
    check_graph(g, 4, 20, "global_avgpool");
}

/* ---------------------------------------------------------------- products */

static void mm_case(ir_shape as, ir_shape bs, const char *what) {
    ir_graph *g = ir_graph_new();
    int a = input(g, "a", as), b = input(g, "b", bs);
    ir_graph_add_output(g, op(g, IR_OP_MatMul, what, 2, (int[]){a, b}, 0, NULL));
    check_graph(g, 4, 1, what);
}

static void test_matmul(void **state) {
    (void)state;
    mm_case(TU_SHAPE(5, 7), TU_SHAPE(7, 3), "mm2d");
    mm_case(TU_SHAPE(2, 3, 4, 5), TU_SHAPE(5, 6), "mm_batched_rhs2d");
    mm_case(TU_SHAPE(2, 1, 3, 4), TU_SHAPE(1, 5, 4, 2), "mm_broadcast");
    mm_case(TU_SHAPE(3, 4, 6), TU_SHAPE(3, 6, 2), "mm_bmm");
    mm_case(TU_SHAPE(4), TU_SHAPE(4, 3), "mm_vec_mat");
    mm_case(TU_SHAPE(2, 3, 4), TU_SHAPE(4), "mm_mat_vec");
    mm_case(TU_SHAPE(6), TU_SHAPE(6), "mm_dot");
    mm_case(TU_SHAPE(3, 600), TU_SHAPE(600, 530), "mm_long_k"); /* GEMM blocks and folding */
}

/* Einsum compiled into copies, reductions, reshapes and one PET_MATMUL (pet-compile.c). */
static void einsum_case(const char *eq, int n, ir_shape as, ir_shape bs) {
    ir_graph *g = ir_graph_new();
    int in[2] = {input(g, "a", as), n > 1 ? input(g, "b", bs) : -1};
    ir_attr at = tu_attr_str("equation", eq);
    ir_graph_add_output(g, op(g, IR_OP_Einsum, eq, n, in, 1, &at));
    assert_true(pet_einsum_ok(g, &g->nodes[g->n_nodes - 1]));
    check_graph(g, 4, 1, eq);
}

static void test_einsum(void **state) {
    (void)state;
    einsum_case("bhqd,bhkd->bhqk", 2, TU_SHAPE(2, 3, 4, 5), TU_SHAPE(2, 3, 6, 5));
    einsum_case("bij,bjk->bik", 2, TU_SHAPE(3, 4, 6), TU_SHAPE(3, 6, 2));
    einsum_case("ij,jk", 2, TU_SHAPE(5, 7), TU_SHAPE(7, 3));
    einsum_case("abc,cd->dba", 2, TU_SHAPE(2, 3, 4), TU_SHAPE(4, 5)); /* two M dims, permuted */
    einsum_case("ij,kl->ljki", 2, TU_SHAPE(2, 3), TU_SHAPE(4, 2));    /* an outer product */
    einsum_case("ijk,jl->l", 2, TU_SHAPE(2, 3, 4), TU_SHAPE(3, 5));   /* i, k summed in A alone */
    einsum_case("...ij,...jk->...ik", 2, TU_SHAPE(2, 1, 3, 4), TU_SHAPE(5, 4, 2)); /* broadcast */
    einsum_case("ij->ji", 1, TU_SHAPE(3, 5), TU_SHAPE(1));
    einsum_case("ijk->ki", 1, TU_SHAPE(3, 4, 5), TU_SHAPE(1));
    einsum_case("ij->", 1, TU_SHAPE(3, 5), TU_SHAPE(1));
    /* a diagonal and three operands are not compiled: PET's splitting cuts them */
    ir_graph *g = ir_graph_new();
    int a = input(g, "a", TU_SHAPE(3, 3));
    ir_attr at = tu_attr_str("equation", "ii->i");
    ir_graph_add_output(g, op(g, IR_OP_Einsum, "diag", 1, &a, 1, &at));
    assert_false(pet_einsum_ok(g, &g->nodes[0]));
    pet_prog *p;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(g, &p, &d), IR_ERR_UNSUPPORTED);
    ir_graph_free(g);
}

static void test_gemm(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ir_graph *g = ir_graph_new();
            int a = input(g, "a", ta ? TU_SHAPE(4, 3) : TU_SHAPE(3, 4)),
                b = input(g, "b", tb ? TU_SHAPE(5, 4) : TU_SHAPE(4, 5));
            ir_attr at[] = {tu_attr_int("transA", ta), tu_attr_int("transB", tb),
                            tu_attr_float("alpha", ta ? 0.5f : 2.0f)};
            ir_graph_add_output(g, op(g, IR_OP_Gemm, "gemm", 2, (int[]){a, b}, 3, at));
            check_graph(g, 4, 2, "gemm");
        }
    /* C is an affine part: dropped */
    ir_graph *g = ir_graph_new();
    int a = input(g, "a", TU_SHAPE(3, 4)), b = input(g, "b", TU_SHAPE(4, 5)),
        c = input(g, "c", TU_SHAPE(5));
    ir_graph_add_output(g, op(g, IR_OP_Gemm, "gemm_c", 3, (int[]){a, b, c}, 0, NULL));
    inputs in;
    rt_result r;
    fill_inputs(g, 3, 1, 5, &in);
    run_float(g, &in, &r);
    float *want = r.outputs[0].data;
    for (int64_t e = 0; e < 15; e++) want[e] -= in.data[2][e % 5];
    check_zp_output(g, &in, 0, want, "gemm_c");
    rt_result_free(&r);
    free_inputs(&in);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- element-wise */

static void test_elementwise(void **state) {
    (void)state;
    const ir_op_kind ops[] = {IR_OP_Add, IR_OP_Sub, IR_OP_Mul};
    for (int i = 0; i < 3; i++) {
        ir_graph *g = ir_graph_new();
        int a = input(g, "a", TU_SHAPE(2, 3, 1, 5)), b = input(g, "b", TU_SHAPE(4, 1));
        ir_graph_add_output(g, op(g, ops[i], "bin", 2, (int[]){a, b}, 0, NULL));
        check_graph(g, 5, 1, ir_op_name(ops[i]));
    }
    ir_graph *g = ir_graph_new();
    int a = input(g, "a", TU_SHAPE(3, 4)), b = input(g, "b", TU_SHAPE(4)),
        c = input(g, "c", TU_SHAPE(3, 1));
    int s = op(g, IR_OP_Sum, "sum3", 3, (int[]){a, b, c}, 0, NULL);
    int n = op(g, IR_OP_Neg, "neg", 1, &s, 0, NULL);
    int id = op(g, IR_OP_Identity, "id", 1, &n, 0, NULL);
    ir_graph_add_output(g, id);
    ir_graph_add_output(g, s);
    check_graph(g, 5, 1, "sum_neg_identity");
    /* a float literal (not a weight) keeps its exact value: 0.5 */
    g = ir_graph_new();
    a = input(g, "a", TU_SHAPE(2, 3));
    float half[3] = {0.5f, -0.25f, 3.0f};
    int h = float_const(g, "half", TU_SHAPE(3), half, false);
    ir_graph_add_output(g, op(g, IR_OP_Mul, "mul_lit", 2, (int[]){a, h}, 0, NULL));
    check_graph(g, 5, 1, "mul_literal");
}

/* ---------------------------------------------------------------- layout */

static void test_layout(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(2, 3, 4, 5));
    int64_t perm[] = {2, 0, 3, 1};
    ir_graph_add_output(
        g, op(g, IR_OP_Transpose, "tr", 1, &x, 1, (ir_attr[]){tu_attr_ints("perm", 4, perm)}));
    int sh = ints_const(g, "shape", 3, (int64_t[]){6, -1, 2});
    int rs = op(g, IR_OP_Reshape, "rs", 2, (int[]){x, sh}, 0, NULL);
    ir_graph_add_output(g, rs);
    ir_graph_add_output(g,
                        op(g, IR_OP_Flatten, "fl", 1, &x, 1, (ir_attr[]){tu_attr_int("axis", 2)}));
    int ax = ints_const(g, "ax", 2, (int64_t[]){0, 3});
    int us = op(g, IR_OP_Unsqueeze, "us", 2, (int[]){rs, ax}, 0, NULL);
    int ax2 = ints_const(g, "ax2", 1, (int64_t[]){3});
    ir_graph_add_output(g, op(g, IR_OP_Squeeze, "sq", 2, (int[]){us, ax2}, 0, NULL));
    check_graph(g, 9, 1, "transpose_reshape");

    g = ir_graph_new();
    int a = input(g, "a", TU_SHAPE(2, 3, 4)), b = input(g, "b", TU_SHAPE(2, 1, 4)),
        c = input(g, "c", TU_SHAPE(2, 2, 4));
    int cat =
        op(g, IR_OP_Concat, "cat", 3, (int[]){a, b, c}, 1, (ir_attr[]){tu_attr_int("axis", 1)});
    ir_graph_add_output(g, cat);
    int sp = ints_const(g, "split", 3, (int64_t[]){1, 4, 1});
    int outs[3];
    tu_add_node(g, IR_OP_Split, "split", 2, (int[]){cat, sp}, 3, outs, 1,
                (ir_attr[]){tu_attr_int("axis", 1)});
    for (int i = 0; i < 3; i++) ir_graph_add_output(g, outs[i]);
    check_graph(g, 9, 1, "concat_split");

    g = ir_graph_new();
    x = input(g, "x", TU_SHAPE(4, 7, 6));
    int st = ints_const(g, "starts", 3, (int64_t[]){-1, 1, 0}),
        en = ints_const(g, "ends", 3, (int64_t[]){I64(INT64_MIN), 7, 5}),
        axs = ints_const(g, "axes", 3, (int64_t[]){0, 1, 2}),
        sps = ints_const(g, "steps", 3, (int64_t[]){-2, 3, 2});
    ir_graph_add_output(g, op(g, IR_OP_Slice, "slice", 5, (int[]){x, st, en, axs, sps}, 0, NULL));
    int pads = ints_const(g, "pads", 6, (int64_t[]){1, -2, 0, 0, 1, 2});
    ir_graph_add_output(g, op(g, IR_OP_Pad, "pad", 2, (int[]){x, pads}, 0, NULL));
    check_graph(g, 9, 1, "slice_pad");

    g = ir_graph_new();
    x = input(g, "x", TU_SHAPE(3, 1, 2));
    int es = ints_const(g, "eshape", 4, (int64_t[]){2, 3, 4, 2});
    ir_graph_add_output(g, op(g, IR_OP_Expand, "expand", 2, (int[]){x, es}, 0, NULL));
    int rep = ints_const(g, "reps", 3, (int64_t[]){2, 3, 2});
    ir_graph_add_output(g, op(g, IR_OP_Tile, "tile", 2, (int[]){x, rep}, 0, NULL));
    check_graph(g, 9, 1, "expand_tile");
}

/* A Pad constant is an affine part: the border reads 0 in Z_p. */
static void test_pad_constant_dropped(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(2, 3));
    float two = 2.0f;
    int pads = ints_const(g, "pads", 4, (int64_t[]){1, 0, 0, 2});
    int cv = float_const(g, "cv", TU_SCALAR_SHAPE, &two, false);
    ir_graph_add_output(g, op(g, IR_OP_Pad, "padc", 3, (int[]){x, pads, cv}, 0, NULL));
    inputs in;
    rt_result r;
    fill_inputs(g, 5, 1, 2, &in);
    run_float(g, &in, &r);
    float *want = r.outputs[0].data; /* shape 3 x 5 */
    int borders = 0;
    for (int64_t e = 0; e < 15; e++)
        if (e / 5 == 0 || e % 5 >= 3) {
            assert_true(want[e] == 2.0f);
            want[e] = 0;
            borders++;
        }
    assert_int_equal(borders, 9);
    check_zp_output(g, &in, 0, want, "pad_constant");
    pet_prog *p;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(g, &p, &d), IR_OK);
    assert_int_equal(p->affine_dropped, 1);
    pet_prog_free(p);
    rt_result_free(&r);
    free_inputs(&in);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- reductions */

static void test_reductions(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(3, 4, 5));
    int ax = ints_const(g, "axes", 2, (int64_t[]){0, -1});
    ir_graph_add_output(g, op(g, IR_OP_ReduceSum, "rsum", 2, (int[]){x, ax}, 1,
                              (ir_attr[]){tu_attr_int("keepdims", 0)}));
    ir_graph_add_output(g, op(g, IR_OP_ReduceMean, "rmean", 2, (int[]){x, ax}, 0, NULL));
    check_graph(g, 5, 15, "reduce");
    for (int ex = 0; ex < 2; ex++)
        for (int rev = 0; rev < 2; rev++) {
            g = ir_graph_new();
            x = input(g, "x", TU_SHAPE(3, 6, 2));
            int axis = ints_const(g, "axis", 1, (int64_t[]){1});
            ir_attr at[] = {tu_attr_int("exclusive", ex), tu_attr_int("reverse", rev)};
            ir_graph_add_output(g, op(g, IR_OP_CumSum, "cumsum", 2, (int[]){x, axis}, 2, at));
            check_graph(g, 5, 1, "cumsum");
        }
}

/* ---------------------------------------------------------------- programs */

/* A chain: conv -> transpose -> matmul with a weight initializer, so that laziness crosses ops
 * (the matmul needs whole rows of the conv output) and weights are variables. */
static void test_chain(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int64_t p1[] = {1, 1, 1, 1}, perm[] = {0, 2, 3, 1};
    int x = input(g, "x", TU_SHAPE(1, 3, 6, 6)), w = input(g, "w", TU_SHAPE(4, 3, 3, 3));
    float wm[4 * 5];
    for (int i = 0; i < 20; i++) wm[i] = (float)((i * 7) % 5 - 2);
    int m = float_const(g, "m", TU_SHAPE(4, 5), wm, true);
    int y = op(g, IR_OP_Conv, "c", 2, (int[]){x, w}, 1, (ir_attr[]){tu_attr_ints("pads", 4, p1)});
    int t = op(g, IR_OP_Transpose, "t", 1, &y, 1, (ir_attr[]){tu_attr_ints("perm", 4, perm)});
    ir_graph_add_output(g, op(g, IR_OP_MatMul, "mm", 2, (int[]){t, m}, 0, NULL));
    pet_prog *p;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(g, &p, &d), IR_OK);
    assert_int_equal(p->n_vars, 3); /* x, w and the initializer m */
    assert_int_equal(p->degree, 3);
    pet_prog_free(p);
    check_graph(g, 3, 1, "chain");
}

static void test_unsupported(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(2, 3));
    int y = op(g, IR_OP_Relu, "the_relu", 1, &x, 0, NULL);
    ir_graph_add_output(g, op(g, IR_OP_Neg, "neg", 1, &y, 0, NULL));
    pet_prog *p;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(g, &p, &d), IR_ERR_UNSUPPORTED);
    assert_null(p);
    assert_non_null(strstr(d.msg, "the_relu"));
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field_arith),
        cmocka_unit_test(test_einsum),
        cmocka_unit_test(test_field_doubles),
        cmocka_unit_test(test_field_random),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_bias_dropped),
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_avgpool),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_pad_constant_dropped),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
