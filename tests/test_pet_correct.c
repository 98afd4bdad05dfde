/* test_pet_correct.c - PET's corrections (rules/pet/pet-correct.c, pet-region*.c, pet-fuse.c,
 * pet-post.c): for a mutant with failed cells, pet_correct builds the original program on each
 * failed box and patches it over the mutant's output. Every corrected replacement is checked two
 * ways: the verifier finds it equivalent to the original on every cell (through the PetPatch
 * lowering), and on random inputs its float32 run passes against the original's float64 run
 * (test-check.h), where the uncorrected mutant did not.
 *  - Figure 1 (two images as one twice as wide, by reshape/transpose and by concat/split): the
 *    boundary cells merge into one column per image, each fused into the mutant's conv.
 *  - Figure 3 (a dilated conv as a regular one on the phase-major input): the seams corrected,
 *    nothing fused (the correction's conv is dilated, the mutant's is not).
 *  - Figure 6: exactly one correction, fused (n_fused 1, one conv left).
 *  - A strided conv (fusion along the width with stride alignment), grouped convs (a region
 *    inside one group: a plain conv on its channels; one across groups: widened and cut), a
 *    batched matmul with a broadcast operand, a Gemm with its bias.
 *  - A Reshape whose region is no box: IR_ERR_UNSUPPORTED naming the node.
 *  - An equivalent mutant comes back without patches; inverse layout pairs are eliminated. */
#include "test-check.h"

#include "pet-build.h"

#include "pet-opt.h"
#include "pet-post.h"
#include "rt.h"

/* ---------------------------------------------------------------- building programs */

static int64_t PADS1[4] = {1, 1, 1, 1}, PADS2[4] = {2, 2, 2, 2}, DIL2[2] = {2, 2}, STR2[2] = {2, 2},
               PADS0[4] = {0, 0, 0, 0};

static int slice(ir_graph *g, int x, int n, const int64_t *st, const int64_t *en,
                 const int64_t *ax) {
    int in[4] = {x, pb_ints(g, n, st), pb_ints(g, n, en), pb_ints(g, n, ax)};
    return pb_op(g, IR_OP_Slice, 4, in, 0, NULL);
}

static int pad(ir_graph *g, int x, int n, const int64_t *pads) {
    return pb_op(g, IR_OP_Pad, 2, (int[]){x, pb_ints(g, n, pads)}, 0, NULL);
}

static int concat(ir_graph *g, int n, const int *in, int axis) {
    return pb_op(g, IR_OP_Concat, n, in, 1, (ir_attr[]){tu_attr_int("axis", axis)});
}

static void split2(ir_graph *g, int x, int axis, int64_t a, int64_t b, int *parts) {
    int sp = PB_INTS(g, a, b);
    char nm[32];
    snprintf(nm, sizeof nm, "split_%d", g->n_nodes);
    tu_add_node(g, IR_OP_Split, nm, 2, (int[]){x, sp}, 2, parts, 1,
                (ir_attr[]){tu_attr_int("axis", axis)});
}

/* ---------------------------------------------------------------- checks */

static void verify(const ir_graph *o, const ir_graph *m, pet_result *r) {
    ir_diag d = {{0}};
    pet_options opt = {.seed = 11, .threads = 2};
    if (pet_verify(o, m, &opt, r, &d) != IR_OK) fail_msg("verify: %s", d.msg);
}

/* Whether m's outputs pass against o's float64 run (test-check.h), on random inputs bound by
 * name; must_pass fails the test, naming the output, when one does not. */
static bool float_passes(const ir_graph *o, const ir_graph *m, uint64_t seed, bool must_pass) {
    rt_binding bo[16], bm[16];
    float *data[16];
    assert_true(o->n_inputs <= 16);
    int nm = 0;
    for (int i = 0; i < o->n_inputs; i++) {
        const ir_value *v = &o->values[o->inputs[i]];
        int64_t n = ir_shape_numel(&v->shape);
        data[i] = malloc(sizeof(float) * (size_t)n);
        tu_fill(data[i], n, seed + 100 * (uint64_t)i);
        bo[i] = (rt_binding){
            .value = o->inputs[i], .dtype = IR_F32, .shape = v->shape, .data = data[i]};
        int mv = ir_graph_find_value(m, v->name);
        if (mv >= 0 && (m->values[mv].flags & IR_VF_INPUT)) {
            bm[nm] = bo[i];
            bm[nm++].value = mv;
        }
    }
    assert_int_equal(nm, m->n_inputs); /* the replacement reads no input the original lacks */
    tu_ref ro;
    rt_result rm;
    rt_options opt = {.seed = 1, .fill_missing_data = true};
    ir_diag d = {{0}};
    tu_ref_run(o, bo, o->n_inputs, &opt, &ro, "original");
    if (rt_run(m, bm, nm, &opt, &rm, &d) != IR_OK) fail_msg("run replacement: %s", d.msg);
    static rt_out_check res[TU_MAX_CHECK];
    bool ok = must_pass ? tu_expect_close(&ro, m, &rm, "replacement") <= 1
                        : tu_check(&ro, m, &rm, NULL, res, NULL);
    tu_ref_free(&ro);
    rt_result_free(&rm);
    for (int i = 0; i < o->n_inputs; i++) free(data[i]);
    return ok;
}

/* Verifies m against o (not equivalent, not rejected), corrects it, and checks the replacement:
 * equivalent on every cell by the verifier, equal in float, patches <= failed cells. Returns the
 * replacement (the caller frees it) and its n_fused. */
static ir_graph *corrected(const ir_graph *o, const ir_graph *m, int *n_fused, int64_t *n_failed) {
    pet_result r;
    verify(o, m, &r);
    assert_false(r.equivalent);
    assert_false(r.rejected);
    int64_t failed = 0;
    for (int i = 0; i < r.n_outputs; i++) failed += r.outputs[i].n_failed;
    assert_false(float_passes(o, m, 5, false)); /* the mutant alone is wrong */
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *rep = pet_correct(o, m, &r, n_fused, &st, &d);
    if (!rep) fail_msg("pet_correct: %s: %s", ir_status_to_string(st), d.msg);
    assert_int_equal(st, IR_OK);
    assert_int_equal(ir_graph_validate(rep, &d), IR_OK);
    int patches = pb_count_op(rep, IR_OP_PetPatch);
    assert_true(patches >= 1 && patches <= failed);
    pet_result_free(&r);

    pet_result rr;
    pet_options opt = {.seed = 97, .threads = 2};
    if (pet_verify_replacement(o, rep, &opt, &rr, &d) != IR_OK) fail_msg("verify: %s", d.msg);
    for (int i = 0; i < rr.n_outputs; i++)
        if (rr.outputs[i].n_failed)
            fail_msg("output '%s': %lld cells still differ", rr.outputs[i].name,
                     (long long)rr.outputs[i].n_failed);
    assert_true(rr.equivalent);
    pet_result_free(&rr);
    for (uint64_t seed = 1; seed <= 2; seed++) float_passes(o, rep, seed, true);
    if (n_failed) *n_failed = failed;
    return rep;
}

/* ---------------------------------------------------------------- figure 1 */

static void test_figure1(void **state) {
    (void)state;
    ir_graph *o, *m;
    pb_figure1(3, 4, 6, 5, &o, &m);
    int fused;
    int64_t failed;
    ir_graph *rep = corrected(o, m, &fused, &failed);
    assert_int_equal(failed, 6); /* image 0's last column, image 1's first, in 3 row boxes */
    /* merged into one column per image, both computed by the mutant's conv */
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 2);
    assert_int_equal(fused, 2);
    assert_int_equal(pb_count_op(rep, IR_OP_Conv), 1);
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* Two images, two outputs: concat along the width, one conv, split. */
static void test_figure1_concat(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 5, W = 6;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x1 = pb_input(o, "x1", TU_SHAPE(1, C, H, W)), x2 = pb_input(o, "x2", TU_SHAPE(1, C, H, W)),
        w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3)), b = pb_input(o, "b", TU_SHAPE(M));
    pb_output(o, pb_conv_full(o, x1, w, b, PADS1, NULL, NULL, 1), "y1");
    pb_output(o, pb_conv_full(o, x2, w, b, PADS1, NULL, NULL, 1), "y2");
    x1 = pb_input(m, "x1", TU_SHAPE(1, C, H, W));
    x2 = pb_input(m, "x2", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    b = pb_input(m, "b", TU_SHAPE(M));
    int y = pb_conv_full(m, concat(m, 2, (int[]){x1, x2}, 3), w, b, PADS1, NULL, NULL, 1), parts[2];
    split2(m, y, 3, W, W, parts);
    pb_output(m, parts[1], "y2"); /* matched by name, not position */
    pb_output(m, parts[0], "y1");
    int fused;
    ir_graph *rep = corrected(o, m, &fused, NULL);
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 2);
    assert_int_equal(fused, 2);
    assert_int_equal(pb_count_op(rep, IR_OP_Conv), 1);
    /* outputs in the original's order */
    assert_string_equal(rep->values[rep->outputs[0]].name, "y1");
    assert_string_equal(rep->values[rep->outputs[1]].name, "y2");
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- figure 6 */

/* A 3x2 kernel padded only on the right: concatenating two images along the width breaks only
 * image 1's last column (it reads image 2's first instead of the pad). One correction, which
 * shares W with the mutant's conv: fused (figure 6, Conv-1-2), one conv in all. */
static void test_figure6(void **state) {
    (void)state;
    const int64_t C = 3, M = 4, H = 5, W = 7;
    int64_t pads[4] = {1, 0, 1, 1};
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x1 = pb_input(o, "x1", TU_SHAPE(1, C, H, W)), x2 = pb_input(o, "x2", TU_SHAPE(1, C, H, W)),
        w = pb_input(o, "w", TU_SHAPE(M, C, 3, 2));
    pb_output(o, pb_conv(o, x1, w, pads, NULL), "y1");
    pb_output(o, pb_conv(o, x2, w, pads, NULL), "y2");
    x1 = pb_input(m, "x1", TU_SHAPE(1, C, H, W));
    x2 = pb_input(m, "x2", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 2));
    int y = pb_conv(m, concat(m, 2, (int[]){x1, x2}, 3), w, pads, NULL), parts[2];
    split2(m, y, 3, W, W, parts);
    pb_output(m, parts[0], "y1");
    pb_output(m, parts[1], "y2");
    pet_result r;
    verify(o, m, &r);
    assert_int_equal(r.outputs[1].n_failed, 0);
    assert_int_equal(r.outputs[0].n_failed, 3); /* column W-1 in the 3 row boxes */
    pet_result_free(&r);
    int fused;
    ir_graph *rep = corrected(o, m, &fused, NULL);
    assert_int_equal(fused, 1);
    assert_int_equal(pb_count_op(rep, IR_OP_Conv), 1);
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 1);
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- figure 3 */

/* A dilated conv computed as a regular conv on the phase-major input: each phase's rows after
 * the other's, so the regular conv reads across the seams where the dilated one reads padding. */
static void test_figure3(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 8, W = 6;
    ir_graph *o = ir_graph_new(), *m = pb_figure3_mutant(C, M, H, W, false);
    int x = pb_input(o, "x", TU_SHAPE(1, C, H, W)), w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv(o, x, w, PADS2, DIL2), "y");
    int fused;
    ir_graph *rep = corrected(o, m, &fused, NULL);
    assert_int_equal(fused, 0); /* the corrections' convs are dilated, the mutant's is not */
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- strided and grouped */

/* Stride 2 over two images concatenated along the width: image 2's first output reads image
 * 1's last column. Fused along the width, where the correction must start on a stride. */
static void test_strided(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 6, W = 8;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x1 = pb_input(o, "x1", TU_SHAPE(1, C, H, W)), x2 = pb_input(o, "x2", TU_SHAPE(1, C, H, W)),
        w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv_full(o, x1, w, -1, PADS1, NULL, STR2, 1), "y1");
    pb_output(o, pb_conv_full(o, x2, w, -1, PADS1, NULL, STR2, 1), "y2");
    x1 = pb_input(m, "x1", TU_SHAPE(1, C, H, W));
    x2 = pb_input(m, "x2", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    int y = pb_conv_full(m, concat(m, 2, (int[]){x1, x2}, 3), w, -1, PADS1, NULL, STR2, 1),
        parts[2];
    split2(m, y, 3, W / 2, W / 2, parts);
    pb_output(m, parts[0], "y1");
    pb_output(m, parts[1], "y2");
    int fused;
    ir_graph *rep = corrected(o, m, &fused, NULL);
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 1); /* y2's first column only */
    assert_int_equal(fused, 1);
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* A grouped conv (2 groups of 2 channels) and a mutant wrong on the border of some output
 * channels: [c0, c1) inside one group (a plain conv on that group's input channels, with a
 * slice of W) or across both (widened to whole groups, cut after). */
static void grouped_case(int64_t c0, int64_t c1) {
    const int64_t C = 4, M = 4, H = 5, W = 6;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(1, C, H, W)), w = pb_input(o, "w", TU_SHAPE(M, C / 2, 3, 3)),
        b = pb_input(o, "b", TU_SHAPE(M));
    pb_output(o, pb_conv_full(o, x, w, b, PADS1, NULL, NULL, 2), "y");
    x = pb_input(m, "x", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C / 2, 3, 3));
    b = pb_input(m, "b", TU_SHAPE(M));
    /* right: the original conv; wrong: without pads, zero-padded after (border differs) */
    int right = pb_conv_full(m, x, w, b, PADS1, NULL, NULL, 2);
    int wrong = pb_conv_full(m, x, w, b, PADS0, NULL, NULL, 2);
    wrong = pad(m, wrong, 8, (int64_t[]){0, 0, 1, 1, 0, 0, 1, 1});
    int parts[3], np = 0;
    if (c0 > 0) parts[np++] = slice(m, right, 1, (int64_t[]){0}, (int64_t[]){c0}, (int64_t[]){1});
    parts[np++] = slice(m, wrong, 1, (int64_t[]){c0}, (int64_t[]){c1}, (int64_t[]){1});
    if (c1 < M) parts[np++] = slice(m, right, 1, (int64_t[]){c1}, (int64_t[]){M}, (int64_t[]){1});
    pb_output(m, concat(m, np, parts, 1), "y");
    ir_graph *rep = corrected(o, m, NULL, NULL);
    /* every correction conv reads channels of its groups only */
    for (int i = 0; i < rep->n_nodes; i++) {
        const ir_node *n = &rep->nodes[i];
        if (n->op != IR_OP_Conv || strncmp(n->name, "pet.", 4) != 0) continue;
        int64_t g = ir_attr_int(n, "group", 1), cin = rep->values[n->in[0]].shape.dims[1];
        if (c1 - c0 <= 2 && c0 / 2 == (c1 - 1) / 2) {
            assert_int_equal(g, 1);
            assert_int_equal(cin, 2);
        } else {
            assert_int_equal(g, 2);
            assert_int_equal(cin, 4);
        }
    }
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

static void test_grouped(void **state) {
    (void)state;
    grouped_case(2, 4); /* group 1 only */
    grouped_case(1, 3); /* across both groups */
}

/* ---------------------------------------------------------------- matmul and gemm */

/* Y = A [2, M, K] x B [K, N] (B broadcast over the batch). The mutant zeroes B's last column:
 * the correction is A (all rows of both batches) times that column. */
static void test_matmul(void **state) {
    (void)state;
    const int64_t M = 5, K = 6, N = 4;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int a = pb_input(o, "a", TU_SHAPE(2, M, K)), b = pb_input(o, "b", TU_SHAPE(K, N));
    pb_output(o, pb_op(o, IR_OP_MatMul, 2, (int[]){a, b}, 0, NULL), "y");
    a = pb_input(m, "a", TU_SHAPE(2, M, K));
    b = pb_input(m, "b", TU_SHAPE(K, N));
    int bz = pad(m, slice(m, b, 1, (int64_t[]){0}, (int64_t[]){N - 1}, (int64_t[]){1}), 4,
                 (int64_t[]){0, 0, 0, 1});
    pb_output(m, pb_op(m, IR_OP_MatMul, 2, (int[]){a, bz}, 0, NULL), "y");
    ir_graph *rep = corrected(o, m, NULL, NULL);
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 1);
    assert_int_equal(pb_count_op(rep, IR_OP_MatMul), 2);
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* Y = Gemm(A [M, K], B [N, K], C [N], transB): the mutant drops B's last row, so its last column
 * is the bias alone; the correction computes that column with its bias. */
static void test_gemm(void **state) {
    (void)state;
    const int64_t M = 3, K = 5, N = 4;
    ir_attr tb = tu_attr_int("transB", 1);
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int a = pb_input(o, "a", TU_SHAPE(M, K)), b = pb_input(o, "b", TU_SHAPE(N, K)),
        c = pb_input(o, "c", TU_SHAPE(N));
    pb_output(o, pb_op(o, IR_OP_Gemm, 3, (int[]){a, b, c}, 1, &tb), "y");
    a = pb_input(m, "a", TU_SHAPE(M, K));
    b = pb_input(m, "b", TU_SHAPE(N, K));
    c = pb_input(m, "c", TU_SHAPE(N));
    int bz = pad(m, slice(m, b, 1, (int64_t[]){0}, (int64_t[]){N - 1}, (int64_t[]){0}), 4,
                 (int64_t[]){0, 0, 1, 0});
    pb_output(m, pb_op(m, IR_OP_Gemm, 3, (int[]){a, bz, c}, 1, &tb), "y");
    ir_graph *rep = corrected(o, m, NULL, NULL);
    assert_int_equal(pb_count_op(rep, IR_OP_Gemm), 2);
    ir_graph_free(rep);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- refused, equivalent */

/* y = Reshape(x [10], [2, 5]). The mutant doubles column 0: the failed cell (both rows, column
 * 0) holds x[0] and x[5], no box of x: the correction is refused, naming the reshape. */
static void test_unsupported_reshape(void **state) {
    (void)state;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(10));
    pb_output(o, RESHAPE(o, x, 2, 5), "y");
    x = pb_input(m, "x", TU_SHAPE(10));
    int t = RESHAPE(m, x, 2, 5);
    int col = slice(m, t, 1, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){1});
    int add = pad(m, col, 4, (int64_t[]){0, 0, 0, 4});
    pb_output(m, pb_op(m, IR_OP_Add, 2, (int[]){t, add}, 0, NULL), "y");
    pet_result r;
    verify(o, m, &r);
    assert_int_equal(r.outputs[0].n_failed, 1);
    const pet_box *bx = &r.outputs[0].failed[0].box;
    assert_true(bx->lo[0] == 0 && bx->hi[0] == 2 && bx->lo[1] == 0 && bx->hi[1] == 1);
    ir_status st = IR_OK;
    ir_diag d = {{0}};
    int fused = -1;
    assert_null(pet_correct(o, m, &r, &fused, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_int_equal(fused, 0);
    assert_non_null(strstr(d.msg, "Reshape_"));
    assert_non_null(strstr(d.msg, "no box"));
    pet_result_free(&r);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* An equivalent mutant with a transpose and its inverse and a reshape and its inverse around
 * the conv: no patch, and the post-optimizations remove all four layout ops. */
static void test_equivalent_post(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 4, W = 5;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(1, C, H, W)), w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv(o, x, w, PADS1, NULL), "y");
    x = pb_input(m, "x", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    int t = TRANSPOSE(m, x, 0, 1, 3, 2);
    t = TRANSPOSE(m, t, 0, 1, 3, 2);
    t = RESHAPE(m, t, C, H * W);
    t = RESHAPE(m, t, 1, C, H, W);
    pb_output(m, pb_conv(m, t, w, PADS1, NULL), "y");
    pet_result r;
    verify(o, m, &r);
    assert_true(r.equivalent);
    ir_status st;
    ir_diag d = {{0}};
    int fused = -1;
    ir_graph *rep = pet_correct(o, m, &r, &fused, &st, &d);
    if (!rep) fail_msg("pet_correct: %s", d.msg);
    assert_int_equal(fused, 0);
    assert_int_equal(pb_count_op(rep, IR_OP_PetPatch), 0);
    assert_int_equal(pb_count_op(rep, IR_OP_Transpose) + pb_count_op(rep, IR_OP_Reshape), 0);
    assert_int_equal(rep->n_nodes, 1);
    float_passes(o, rep, 3, true);
    pet_result_free(&r);
    ir_graph_free(rep);

    /* the pass alone: stats say what it did */
    ir_graph *c = ir_graph_clone(m);
    pet_post_stats s;
    assert_int_equal(pet_post_optimize(c, &s, &d), IR_OK);
    assert_int_equal(s.layout_fused, 2);
    assert_int_equal(s.inverses_removed, 2);
    assert_int_equal(c->n_nodes, 1);
    ir_graph_free(c);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- every region rule */

/* m = o with output k replaced by y + Pad(Slice(y, B)): y doubled on box B only. */
static ir_graph *plant(const ir_graph *o, int k, const pet_box *B) {
    ir_graph *m = ir_graph_clone(o);
    int y = m->outputs[k];
    const char *name = m->values[y].name;
    const ir_shape ys = m->values[y].shape;
    int r = ys.rank;
    m->values[y].name = "planted.y";
    m->values[y].flags &= ~(unsigned)IR_VF_OUTPUT;
    int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        st[i] = B->lo[i];
        en[i] = B->hi[i];
        ax[i] = i;
        pads[i] = B->lo[i];
        pads[r + i] = ys.dims[i] - B->hi[i];
    }
    int t = pad(m, slice(m, y, r, st, en, ax), 2 * r, pads);
    int sum = pb_op(m, IR_OP_Add, 2, (int[]){y, t}, 0, NULL);
    m->values[sum].name = name;
    m->values[sum].flags |= IR_VF_OUTPUT;
    m->outputs[k] = sum;
    return m;
}

/* For each output of o: a mutant wrong on its first element, on its last, and on a slab in the
 * middle of its first two dims, each corrected (the original rebuilt on those regions through
 * every op of o). */
static void plant_all(const ir_graph *o) {
    for (int k = 0; k < o->n_outputs; k++) {
        const ir_shape *s = &o->values[o->outputs[k]].shape;
        for (int which = 0; which < 3; which++) {
            pet_box B = {.rank = s->rank};
            for (int i = 0; i < s->rank; i++) {
                int64_t n = s->dims[i];
                B.lo[i] = which == 0 ? 0 : which == 1 ? n - 1 : (i < 2 ? n / 2 : 0);
                B.hi[i] = which == 0 ? 1 : which == 1 ? n : (i < 2 ? n / 2 + 1 : n);
            }
            ir_graph *m = plant(o, k, &B);
            ir_graph *rep = corrected(o, m, NULL, NULL);
            ir_graph_free(rep);
            ir_graph_free(m);
        }
    }
}

/* Transpose, a strided Slice, Pad, Conv with a bias, a broadcast Mul, Concat, Split, a reversed
 * Slice, ReduceSum and a merging Reshape. */
static void test_regions_layout(void **state) {
    (void)state;
    ir_graph *o = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(2, 4, 6, 8)), w = pb_input(o, "w", TU_SHAPE(4, 4, 3, 3)),
        b = pb_input(o, "b", TU_SHAPE(4)), z = pb_input(o, "z", TU_SHAPE(1, 4, 1, 1));
    int t = TRANSPOSE(o, x, 0, 1, 3, 2); /* [2, 4, 8, 6] */
    int s2 = pb_op(o, IR_OP_Slice, 5,
                   (int[]){t, PB_INTS(o, 1), PB_INTS(o, 8), PB_INTS(o, 2), PB_INTS(o, 2)}, 0,
                   NULL);                                   /* rows 1,3,5,7 */
    t = pad(o, s2, 8, (int64_t[]){0, 0, 1, 0, 0, 0, 0, 1}); /* [2, 4, 5, 7] */
    int c = pb_conv_full(o, t, w, b, PADS1, NULL, NULL, 1);
    int mz = pb_op(o, IR_OP_Mul, 2, (int[]){c, z}, 0, NULL);
    int cat = concat(o, 2, (int[]){mz, c}, 1); /* [2, 8, 5, 7] */
    int parts[2];
    split2(o, cat, 1, 3, 5, parts);
    int rev = pb_op(
        o, IR_OP_Slice, 5,
        (int[]){parts[0], PB_INTS(o, -1), PB_INTS(o, INT64_MIN), PB_INTS(o, 3), PB_INTS(o, -1)}, 0,
        NULL);
    pb_output(o, rev, "y1");
    pb_output(o, pb_op(o, IR_OP_ReduceSum, 2, (int[]){parts[1], PB_INTS(o, 3)}, 0, NULL), "y2");
    pb_output(o, RESHAPE(o, parts[1], 2, 5, 35), "y3");
    plant_all(o);
    ir_graph_free(o);
}

/* AveragePool (stride 2, counting the padding), ReduceMean without keepdims, MatMul, a variadic
 * Sum with broadcasting, Neg, GlobalAveragePool. */
static void test_regions_compute(void **state) {
    (void)state;
    ir_graph *o = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(2, 3, 8, 8)), w = pb_input(o, "w", TU_SHAPE(4, 5)),
        v = pb_input(o, "v", TU_SHAPE(5)), u = pb_input(o, "u", TU_SHAPE(3, 1));
    int64_t k3[2] = {3, 3};
    ir_attr ap[4] = {tu_attr_ints("kernel_shape", 2, k3), tu_attr_ints("strides", 2, STR2),
                     tu_attr_ints("pads", 4, PADS1), tu_attr_int("count_include_pad", 1)};
    int p = pb_op(o, IR_OP_AveragePool, 1, &x, 4, ap); /* [2, 3, 4, 4] */
    ir_attr kd = tu_attr_int("keepdims", 0);
    int rm = pb_op(o, IR_OP_ReduceMean, 2, (int[]){p, PB_INTS(o, 2)}, 1, &kd); /* [2, 3, 4] */
    int mm = pb_op(o, IR_OP_MatMul, 2, (int[]){rm, w}, 0, NULL);               /* [2, 3, 5] */
    int sm = pb_op(o, IR_OP_Sum, 3, (int[]){mm, v, u}, 0, NULL);
    pb_output(o, pb_op(o, IR_OP_Neg, 1, &sm, 0, NULL), "y1");
    pb_output(o, pb_op(o, IR_OP_GlobalAveragePool, 1, &p, 0, NULL), "y2");
    plant_all(o);
    ir_graph_free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figure1),
        cmocka_unit_test(test_figure1_concat),
        cmocka_unit_test(test_figure6),
        cmocka_unit_test(test_figure3),
        cmocka_unit_test(test_strided),
        cmocka_unit_test(test_grouped),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_unsupported_reshape),
        cmocka_unit_test(test_equivalent_post),
        cmocka_unit_test(test_regions_layout),
        cmocka_unit_test(test_regions_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
