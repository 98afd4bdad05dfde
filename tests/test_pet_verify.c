/* test_pet_verify.c - PET's box propagation (rules/pet/pet-box.c) and randomized box tests
 * (rules/pet/pet-verify.c, rules/pet/pet-cpu.c), on the paper's examples and on planted mutants.
 *
 *  - Boxes: the 3x3 zero-padded conv of figure 4 has exactly its 9 boxes; concat, split, slice
 *    (both step signs), transpose, pad, reshape (merge and split), strided convs and matmul move
 *    splitting points as worked out by hand in each test.
 *  - Figure 1: two images concatenated along the width (by reshape/transpose as in figure 5, and
 *    by concat/split with two outputs): exactly the boundary columns' cells fail; overwriting them
 *    with the original program's values makes the mutant equal to the original everywhere, in Z_p
 *    on fresh random inputs and in float with the executor.
 *  - Figure 3: a dilated conv computed as a regular conv on the input rearranged by phase: with
 *    the phases in the batch it is equivalent; with the phases laid out along height and width
 *    it differs exactly on the rows and columns at the phase seams.
 *  - Planted mutants, for each of the 8 boundary boxes of a 3x3 conv and several seeds: a term
 *    added on that box alone gets exactly that cell failed (its neighbours, 1 wide, are not
 *    tested outside themselves); a flipped kernel fails every cell and is rejected.
 *  - Counting, options and errors: box-tests = positions x t, the (n/p)^t bound, 1 and 2
 *    threads and whole-tensor evaluation agree, mismatched programs are refused. */
#include "test-check.h"

#include "pet-build.h"

#include "pet.h"
#include "rt.h"

/* ---------------------------------------------------------------- building programs */

static int64_t PADS1[4] = {1, 1, 1, 1}, PADS2[4] = {2, 2, 2, 2}, DIL2[2] = {2, 2};

static pet_splits *boxes(const ir_graph *g, pet_prog **pp) {
    pet_splits *s;
    ir_diag d = {{0}};
    if (pet_prog_compile(g, pp, &d) != IR_OK) fail_msg("compile: %s", d.msg);
    if (pet_prog_boxes(*pp, &s, &d) != IR_OK) fail_msg("boxes: %s", d.msg);
    return s;
}

/* The points of dim `dim` of IR value v equal want[0..n). */
static void expect_points(const pet_prog *p, const pet_splits *s, int v, int dim, int n,
                          const int64_t *want) {
    const pet_splits *sv = &s[pet_prog_value_of(p, v)];
    char got[256] = "", *q = got;
    for (int i = 0; i < sv->n[dim] && q < got + 200; i++)
        q += sprintf(q, "%lld ", (long long)sv->at[dim][i]);
    if (sv->n[dim] != n) fail_msg("dim %d: points {%s}, expected %d of them", dim, got, n);
    for (int i = 0; i < n; i++)
        if (sv->at[dim][i] != want[i]) fail_msg("dim %d: points {%s}, differ at %d", dim, got, i);
}
#define EXPECT_POINTS(p, s, v, dim, ...)                                                           \
    expect_points(p, s, v, dim, sizeof((int64_t[]){__VA_ARGS__}) / 8, (int64_t[]){__VA_ARGS__})
#define EXPECT_NO_POINTS(p, s, v, dim) expect_points(p, s, v, dim, 0, NULL)

static void free_boxes(pet_prog *p, pet_splits *s) {
    pet_splits_free(s, p->n_values);
    pet_prog_free(p);
}

/* ---------------------------------------------------------------- box propagation */

/* Figure 4: a 3x3 zero-padded conv has 9 boxes: corners 1x1, edges, and the interior. */
static void test_boxes_figure4(void **state) {
    (void)state;
    const int64_t H = 7, W = 9;
    ir_graph *g = ir_graph_new();
    int x = pb_input(g, "x", TU_SHAPE(1, 3, H, W)), w = pb_input(g, "w", TU_SHAPE(4, 3, 3, 3));
    int y = pb_conv(g, x, w, PADS1, NULL);
    pb_output(g, y, "y");
    pet_prog *p;
    pet_splits *s = boxes(g, &p);
    const pet_splits *sy = &s[pet_prog_value_of(p, y)];
    assert_int_equal(pet_splits_nboxes(sy), 9);
    EXPECT_NO_POINTS(p, s, y, 0);
    EXPECT_NO_POINTS(p, s, y, 1);
    EXPECT_POINTS(p, s, y, 2, 1, H - 1);
    EXPECT_POINTS(p, s, y, 3, 1, W - 1);
    const int64_t hl[3] = {0, 1, H - 1}, hh[3] = {1, H - 1, H}, wl[3] = {0, 1, W - 1},
                  wh[3] = {1, W - 1, W};
    for (int i = 0; i < 9; i++) {
        pet_box b;
        pet_splits_box(sy, i, &b);
        assert_int_equal(b.rank, 4);
        assert_true(b.lo[0] == 0 && b.hi[0] == 1 && b.lo[1] == 0 && b.hi[1] == 4);
        assert_true(b.lo[2] == hl[i / 3] && b.hi[2] == hh[i / 3]);
        assert_true(b.lo[3] == wl[i % 3] && b.hi[3] == wh[i % 3]);
        int64_t c[4] = {0, 3, b.hi[2] - 1, b.lo[3]};
        assert_int_equal(pet_splits_box_of(sy, c), i);
    }
    /* the inputs are one box each */
    assert_int_equal(pet_splits_nboxes(&s[pet_prog_value_of(p, x)]), 1);
    free_boxes(p, s);
    ir_graph_free(g);
}

/* A strided conv: in 8, k 3, s 2, pad 1 -> out 4; only output 0 reads the padding. A dilated
 * one (d 2, pad 2): outputs 0 and 1 read padding with their first tap, 6 and 7 with their last:
 * boxes [0, 2), [2, 6), [6, 8). */
static void test_boxes_strided_dilated(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = pb_input(g, "x", TU_SHAPE(1, 2, 8, 8)), w = pb_input(g, "w", TU_SHAPE(2, 2, 3, 3));
    int64_t s2[2] = {2, 2};
    int ys = pb_op(g, IR_OP_Conv, 2, (int[]){x, w}, 2,
                   (ir_attr[]){tu_attr_ints("pads", 4, PADS1), tu_attr_ints("strides", 2, s2)});
    int yd = pb_conv(g, x, w, PADS2, DIL2);
    pb_output(g, ys, "ys");
    pb_output(g, yd, "yd");
    pet_prog *p;
    pet_splits *s = boxes(g, &p);
    EXPECT_POINTS(p, s, ys, 2, 1);
    EXPECT_POINTS(p, s, ys, 3, 1);
    EXPECT_POINTS(p, s, yd, 2, 2, 6);
    EXPECT_POINTS(p, s, yd, 3, 2, 6);
    free_boxes(p, s);
    ir_graph_free(g);
}

/* Concat puts points at the part boundaries, and a conv over them spreads each into the outputs
 * whose window straddles it; split, slice, transpose and pad move points as their index maps. */
static void test_boxes_layout(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int a = pb_input(g, "a", TU_SHAPE(1, 2, 4, 2)), b = pb_input(g, "b", TU_SHAPE(1, 2, 4, 3)),
        c = pb_input(g, "c", TU_SHAPE(1, 2, 4, 3)), w = pb_input(g, "w", TU_SHAPE(2, 2, 3, 3));
    int cat = pb_op(g, IR_OP_Concat, 3, (int[]){a, b, c}, 1, (ir_attr[]){tu_attr_int("axis", 3)});
    int y = pb_conv(g, cat, w, PADS1, NULL); /* width 8, parts at 2 and 5 */
    int sp = pb_ints(g, 2, (int64_t[]){4, 4});
    int parts[2];
    tu_add_node(g, IR_OP_Split, "split", 2, (int[]){cat, sp}, 2, parts, 1,
                (ir_attr[]){tu_attr_int("axis", 3)});
    int st = pb_ints(g, 1, (int64_t[]){1}), en = pb_ints(g, 1, (int64_t[]){8}),
        ax = pb_ints(g, 1, (int64_t[]){3}), stp = pb_ints(g, 1, (int64_t[]){2});
    int sl = pb_op(g, IR_OP_Slice, 5, (int[]){cat, st, en, ax, stp}, 0, NULL); /* 1,3,5,7 */
    int st2 = pb_ints(g, 1, (int64_t[]){7}), en2 = pb_ints(g, 1, (int64_t[]){INT64_MIN}),
        stp2 = pb_ints(g, 1, (int64_t[]){-2});
    int sl2 = pb_op(g, IR_OP_Slice, 5, (int[]){cat, st2, en2, ax, stp2}, 0, NULL); /* 7,5,3,1 */
    int tr = TRANSPOSE(g, cat, 0, 3, 1, 2);
    int pads = pb_ints(g, 8, (int64_t[]){0, 0, 1, 2, 0, 0, 0, 1});
    int pd = pb_op(g, IR_OP_Pad, 2, (int[]){cat, pads}, 0, NULL); /* H 4 -> 5, W 8 -> 11 */
    pb_output(g, y, "y");
    pb_output(g, parts[0], "p0");
    pb_output(g, parts[1], "p1");
    pb_output(g, sl, "sl");
    pb_output(g, sl2, "sl2");
    pb_output(g, tr, "tr");
    pb_output(g, pd, "pd");
    pet_prog *p;
    pet_splits *s = boxes(g, &p);
    EXPECT_POINTS(p, s, cat, 3, 2, 5);
    EXPECT_NO_POINTS(p, s, cat, 2);
    /* conv: input points 0, 2, 5, 8 cross taps at o = B+1-t for t = 0..2 */
    EXPECT_POINTS(p, s, y, 3, 1, 2, 3, 4, 5, 6, 7);
    EXPECT_POINTS(p, s, y, 2, 1, 3);
    EXPECT_POINTS(p, s, parts[0], 3, 2);
    EXPECT_POINTS(p, s, parts[1], 3, 1);
    EXPECT_POINTS(p, s, sl, 3, 1, 2);  /* indices 1 | 3 | 5,7 */
    EXPECT_POINTS(p, s, sl2, 3, 2, 3); /* indices 7,5 | 3 | 1 */
    EXPECT_POINTS(p, s, tr, 1, 2, 5);
    EXPECT_NO_POINTS(p, s, tr, 3);
    EXPECT_POINTS(p, s, pd, 2, 1);
    EXPECT_POINTS(p, s, pd, 3, 2, 4, 7, 10);
    free_boxes(p, s);
    ir_graph_free(g);
}

/* Reshape: merging (2, 5) -> 10 splits at the row start 5 (size-1 dims are skipped); splitting
 * 10 -> (2, 5) maps that point to the outer point 1. A point s = (i0, k0) of a linear index split
 * into (outer, inner) with k0 > 0 gives the outer points i0 and i0 + 1 and the inner point k0. A
 * merged dim whose outer part has points gets a point at every row start anyway. MatMul keeps its
 * row and column points, not the summed dim's. */
static void test_boxes_reshape_matmul(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = pb_input(g, "x", TU_SHAPE(2, 1, 5)), e = pb_input(g, "e", TU_SHAPE(3, 5)),
        f = pb_input(g, "f", TU_SHAPE(3, 4)), k = pb_input(g, "k", TU_SHAPE(2, 4)),
        b = pb_input(g, "b", TU_SHAPE(4, 6)), b2 = pb_input(g, "b2", TU_SHAPE(4, 6)),
        a8 = pb_input(g, "a8", TU_SHAPE(3, 8));
    int m = RESHAPE(g, x, 10);
    int xe = RESHAPE(g, m, 2, 5);
    int pads = pb_ints(g, 2, (int64_t[]){1, 0});
    int mp = pb_op(g, IR_OP_Pad, 2, (int[]){m, pads}, 0, NULL); /* 11 long */
    int e15 = RESHAPE(g, e, 15);
    int cat = pb_op(g, IR_OP_Concat, 2, (int[]){mp, e15}, 1, (ir_attr[]){tu_attr_int("axis", 0)});
    int sq = RESHAPE(g, cat, 2, 13);
    int fa = pb_op(g, IR_OP_Concat, 2, (int[]){f, k}, 1, (ir_attr[]){tu_attr_int("axis", 0)});
    int fl = RESHAPE(g, fa, 20);
    int mm = pb_op(g, IR_OP_MatMul, 2, (int[]){fa, b}, 0, NULL);
    int bt = pb_op(g, IR_OP_Concat, 2, (int[]){b, b2}, 1, (ir_attr[]){tu_attr_int("axis", 0)});
    int mk = pb_op(g, IR_OP_MatMul, 2, (int[]){a8, bt}, 0, NULL);
    pb_output(g, xe, "xe");
    pb_output(g, sq, "sq");
    pb_output(g, fl, "fl");
    pb_output(g, mm, "mm");
    pb_output(g, mk, "mk");
    pet_prog *p;
    pet_splits *s = boxes(g, &p);
    EXPECT_POINTS(p, s, m, 0, 5);
    EXPECT_POINTS(p, s, xe, 0, 1);
    EXPECT_NO_POINTS(p, s, xe, 1);
    EXPECT_POINTS(p, s, mp, 0, 1, 6);
    EXPECT_POINTS(p, s, e15, 0, 5, 10);
    EXPECT_POINTS(p, s, cat, 0, 1, 6, 11, 16, 21);
    /* 1 = (0, 1), 6 = (0, 6), 11 = (0, 11), 16 = (1, 3), 21 = (1, 8) */
    EXPECT_POINTS(p, s, sq, 0, 1);
    EXPECT_POINTS(p, s, sq, 1, 1, 3, 6, 8, 11);
    EXPECT_POINTS(p, s, fa, 0, 3);
    EXPECT_POINTS(p, s, fl, 0, 4, 8, 12, 16);
    EXPECT_POINTS(p, s, mm, 0, 3);
    EXPECT_NO_POINTS(p, s, mm, 1);
    EXPECT_POINTS(p, s, bt, 0, 4);
    EXPECT_NO_POINTS(p, s, mk, 0);
    EXPECT_NO_POINTS(p, s, mk, 1);
    free_boxes(p, s);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- verification helpers */

static void verify(const ir_graph *o, const ir_graph *m, const pet_options *opt, pet_result *r) {
    ir_diag d = {{0}};
    if (pet_verify(o, m, opt, r, &d) != IR_OK) fail_msg("verify: %s", d.msg);
}

/* Whether coords c lie in a failed region of rep. */
static bool in_failed(const pet_output_report *rep, const int64_t *c) {
    for (int64_t i = 0; i < rep->n_failed; i++) {
        bool in = true;
        for (int j = 0; j < rep->failed[i].box.rank && in; j++)
            in = c[j] >= rep->failed[i].box.lo[j] && c[j] < rep->failed[i].box.hi[j];
        if (in) return true;
    }
    return false;
}

/* The correction (§5.2 step 3, as the original program on the failed regions): in Z_p, on fresh
 * random inputs (seed), every output of the corrected mutant equals the original's, and every
 * failed region did differ somewhere before. */
static void check_correction_zp(const ir_graph *o, const ir_graph *m, const pet_result *r,
                                uint64_t seed) {
    pet_prog *po, *pm;
    ir_diag d = {{0}};
    assert_int_equal(pet_prog_compile(o, &po, &d), IR_OK);
    assert_int_equal(pet_prog_compile(m, &pm, &d), IR_OK);
    for (int k = 0; k < r->n_outputs; k++) {
        const pet_output_report *rep = &r->outputs[k];
        int km = -1;
        for (int j = 0; j < m->n_outputs; j++)
            if (!strcmp(m->values[m->outputs[j]].name, rep->name)) km = j;
        assert_true(km >= 0);
        int64_t n = ir_shape_numel(&rep->shape), c[IR_MAX_RANK];
        pet_probe *pr_o = malloc(sizeof *pr_o * (size_t)n),
                  *pr_m = malloc(sizeof *pr_m * (size_t)n);
        uint32_t *vo = malloc(sizeof *vo * (size_t)n), *vm = malloc(sizeof *vm * (size_t)n);
        for (int64_t e = 0; e < n; e++) {
            pr_o[e] = (pet_probe){.output = k, .index = e};
            pr_m[e] = (pet_probe){.output = km, .index = e};
        }
        assert_int_equal(pet_cpu_eval(po, n, pr_o, PET_EVAL_DENSE, NULL, seed, 0, vo, NULL, &d),
                         IR_OK);
        assert_int_equal(pet_cpu_eval(pm, n, pr_m, PET_EVAL_DENSE, NULL, seed, 0, vm, NULL, &d),
                         IR_OK);
        bool *differed = calloc((size_t)rep->n_failed + 1, sizeof *differed);
        for (int64_t e = 0; e < n; e++) {
            int64_t rem = e;
            for (int i = rep->shape.rank - 1; i >= 0; i--) {
                c[i] = rem % rep->shape.dims[i];
                rem /= rep->shape.dims[i];
            }
            for (int64_t i = 0; i < rep->n_failed; i++) {
                bool in = true;
                for (int j = 0; j < rep->shape.rank && in; j++)
                    in = c[j] >= rep->failed[i].box.lo[j] && c[j] < rep->failed[i].box.hi[j];
                if (in && vo[e] != vm[e]) differed[i] = true;
            }
            if (in_failed(rep, c)) vm[e] = vo[e]; /* the correction */
            if (vm[e] != vo[e])
                fail_msg("'%s': element %lld differs after correction", rep->name, (long long)e);
        }
        for (int64_t i = 0; i < rep->n_failed; i++)
            if (!differed[i])
                fail_msg("'%s': failed region %lld never differed", rep->name, (long long)i);
        free(differed);
        free(pr_o);
        free(pr_m);
        free(vo);
        free(vm);
    }
    pet_prog_free(po);
    pet_prog_free(pm);
}

/* The same in float with the executor: before correction the mutant matches the original
 * outside the failed regions only; after it, everywhere (judged against the original's float64
 * run, test-check.h). */
static void check_correction_float(const ir_graph *o, const ir_graph *m, const pet_result *r) {
    rt_binding b[8];
    float *data[8];
    assert_true(o->n_inputs <= 8);
    for (int i = 0; i < o->n_inputs; i++) {
        const ir_value *v = &o->values[o->inputs[i]];
        int64_t n = ir_shape_numel(&v->shape);
        data[i] = malloc(sizeof(float) * (size_t)n);
        tu_fill(data[i], n, 100 + (uint64_t)i);
        b[i] = (rt_binding){
            .value = o->inputs[i], .dtype = IR_F32, .shape = v->shape, .data = data[i]};
    }
    rt_binding bm[8];
    for (int i = 0; i < o->n_inputs; i++) {
        bm[i] = b[i];
        bm[i].value = ir_graph_find_value(m, o->values[o->inputs[i]].name);
        assert_true(bm[i].value >= 0);
    }
    tu_ref ref;
    rt_result rm;
    rt_options opt = {.seed = 1};
    ir_diag d = {{0}};
    tu_ref_run(o, b, o->n_inputs, &opt, &ref, "original");
    const rt_result *ro = &ref.r32;
    if (rt_run(m, bm, o->n_inputs, &opt, &rm, &d) != IR_OK) fail_msg("run mutant: %s", d.msg);
    for (int k = 0; k < r->n_outputs; k++) {
        const pet_output_report *rep = &r->outputs[k];
        int km = -1;
        for (int j = 0; j < m->n_outputs; j++)
            if (!strcmp(m->values[m->outputs[j]].name, rep->name)) km = j;
        float *yo = ro->outputs[k].data, *ym = rm.outputs[km].data;
        int64_t n = ir_shape_numel(&rep->shape), c[IR_MAX_RANK];
        double in_err = 0, out_err = 0;
        for (int64_t e = 0; e < n; e++) {
            int64_t rem = e;
            for (int i = rep->shape.rank - 1; i >= 0; i--) {
                c[i] = rem % rep->shape.dims[i];
                rem /= rep->shape.dims[i];
            }
            double err = fabs((double)ym[e] - (double)yo[e]);
            if (in_failed(rep, c)) {
                in_err = fmax(in_err, err);
                ym[e] = yo[e]; /* the correction */
            } else {
                out_err = fmax(out_err, err);
            }
        }
        if (rep->n_failed) assert_true(in_err > 1e-3);
        assert_true(out_err < 1e-4);
    }
    tu_expect_close(&ref, m, &rm, "corrected");
    tu_ref_free(&ref);
    rt_result_free(&rm);
    for (int i = 0; i < o->n_inputs; i++) free(data[i]);
}

/* ---------------------------------------------------------------- figure 1 */

static void test_figure1(void **state) {
    (void)state;
    const int64_t dims[][4] = {{3, 4, 6, 5}, {2, 3, 5, 7}};
    for (int di = 0; di < 2; di++) {
        const int64_t C = dims[di][0], M = dims[di][1], H = dims[di][2], W = dims[di][3];
        ir_graph *o, *m;
        pb_figure1(C, M, H, W, &o, &m);
        pet_result r;
        pet_options opt = {.seed = 1 + (uint64_t)di, .threads = 2};
        verify(o, m, &opt, &r);
        assert_int_equal(r.n_outputs, 1);
        const pet_output_report *rep = &r.outputs[0];
        assert_int_equal(rep->orig_boxes, 9);
        assert_int_equal(rep->mutant_boxes, 18); /* the batch split in two */
        assert_int_equal(rep->cells, 18);
        /* exactly image 0's last column and image 1's first column, in each of the 3 row boxes */
        assert_int_equal(rep->n_failed, 6);
        for (int64_t i = 0; i < rep->n_failed; i++) {
            const pet_box *b = &rep->failed[i].box;
            int64_t n = b->lo[0];
            assert_true(b->hi[0] == n + 1);
            assert_true(b->lo[1] == 0 && b->hi[1] == M);
            if (n == 0)
                assert_true(b->lo[3] == W - 1 && b->hi[3] == W);
            else
                assert_true(n == 1 && b->lo[3] == 0 && b->hi[3] == 1);
        }
        assert_int_equal(rep->failed_elems, 2 * M * H);
        assert_int_equal(rep->failed_mutant_boxes, 6);
        assert_false(r.equivalent);
        assert_false(r.rejected);
        check_correction_zp(o, m, &r, 777 + (uint64_t)di);
        check_correction_float(o, m, &r);
        pet_result_free(&r);
        ir_graph_free(o);
        ir_graph_free(m);
    }
}

/* The same with two separate images and two outputs: concat along the width, one conv, split. */
static void test_figure1_concat(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 5, W = 6;
    ir_graph *o = ir_graph_new(), *m = ir_graph_new();
    int x1 = pb_input(o, "x1", TU_SHAPE(1, C, H, W)), x2 = pb_input(o, "x2", TU_SHAPE(1, C, H, W)),
        w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv(o, x1, w, PADS1, NULL), "y1");
    pb_output(o, pb_conv(o, x2, w, PADS1, NULL), "y2");
    x1 = pb_input(m, "x1", TU_SHAPE(1, C, H, W));
    x2 = pb_input(m, "x2", TU_SHAPE(1, C, H, W));
    w = pb_input(m, "w", TU_SHAPE(M, C, 3, 3));
    int cat = pb_op(m, IR_OP_Concat, 2, (int[]){x1, x2}, 1, (ir_attr[]){tu_attr_int("axis", 3)});
    int y = pb_conv(m, cat, w, PADS1, NULL);
    int sp = pb_ints(m, 2, (int64_t[]){W, W}), parts[2];
    tu_add_node(m, IR_OP_Split, "split", 2, (int[]){y, sp}, 2, parts, 1,
                (ir_attr[]){tu_attr_int("axis", 3)});
    pb_output(m, parts[1], "y2"); /* outputs matched by name, not by position */
    pb_output(m, parts[0], "y1");
    pet_result r;
    pet_options opt = {.seed = 5, .tests = 3, .threads = 1};
    verify(o, m, &opt, &r);
    assert_int_equal(r.n_outputs, 2);
    assert_int_equal(r.n_vars, 3);
    assert_int_equal(r.degree, 2);
    assert_true(r.false_accept_bound == pow(3.0 / PET_P, 3));
    for (int k = 0; k < 2; k++) {
        const pet_output_report *rep = &r.outputs[k];
        assert_string_equal(rep->name, k ? "y2" : "y1");
        assert_int_equal(rep->n_failed, 3);
        for (int64_t i = 0; i < 3; i++) {
            const pet_box *b = &rep->failed[i].box;
            assert_true(k == 0 ? (b->lo[3] == W - 1 && b->hi[3] == W)
                               : (b->lo[3] == 0 && b->hi[3] == 1));
            assert_int_equal(b->lo[2], i == 0 ? 0 : i == 1 ? 1 : H - 1);
        }
    }
    check_correction_zp(o, m, &r, 31);
    check_correction_float(o, m, &r);
    pet_result_free(&r);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* ---------------------------------------------------------------- figure 3 */

static void test_figure3(void **state) {
    (void)state;
    const int64_t C = 2, M = 3, H = 8, W = 6;
    ir_graph *o = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(1, C, H, W)), w = pb_input(o, "w", TU_SHAPE(M, C, 3, 3));
    pb_output(o, pb_conv(o, x, w, PADS2, DIL2), "y");
    ir_graph *mb = pb_figure3_mutant(C, M, H, W, true), *mp = pb_figure3_mutant(C, M, H, W, false);
    pet_result r;
    pet_options opt = {.seed = 9};
    verify(o, mb, &opt, &r);
    assert_true(r.equivalent);
    assert_int_equal(r.outputs[0].n_failed, 0);
    pet_result_free(&r);

    verify(o, mp, &opt, &r);
    const pet_output_report *rep = &r.outputs[0];
    assert_false(r.equivalent);
    assert_false(r.rejected);
    /* exactly the rows 1 and H-2 and the columns 1 and W-2 (derived in figure3_mutant's
     * comment: the seam rows h = 2(H/2 - 1) + 0 and h = 2*0 + 1) */
    int64_t c[4] = {0, 0, 0, 0};
    for (c[1] = 0; c[1] < M; c[1]++)
        for (c[2] = 0; c[2] < H; c[2]++)
            for (c[3] = 0; c[3] < W; c[3]++) {
                bool seam = c[2] == 1 || c[2] == H - 2 || c[3] == 1 || c[3] == W - 2;
                if (in_failed(rep, c) != seam)
                    fail_msg("(%lld, %lld, %lld): failed %d, seam %d", (long long)c[1],
                             (long long)c[2], (long long)c[3], in_failed(rep, c), seam);
            }
    assert_int_equal(rep->failed_elems, M * (2 * W + 2 * H - 4));
    check_correction_zp(o, mp, &r, 4242);
    check_correction_float(o, mp, &r);
    pet_result_free(&r);
    ir_graph_free(o);
    ir_graph_free(mb);
    ir_graph_free(mp);
}

/* ---------------------------------------------------------------- planted mutants */

static ir_graph *planted_original(int64_t C, int64_t H, int64_t W) {
    ir_graph *o = ir_graph_new();
    int x = pb_input(o, "x", TU_SHAPE(1, C, H, W)), w = pb_input(o, "w", TU_SHAPE(C, C, 3, 3));
    pb_output(o, pb_conv(o, x, w, PADS1, NULL), "y");
    return o;
}

/* pb_conv(x, w) + the slice of x on box [h0, h1) x [w0, w1), zero elsewhere. */
static ir_graph *planted_one_box(int64_t C, int64_t H, int64_t W, int64_t h0, int64_t h1,
                                 int64_t w0, int64_t w1) {
    ir_graph *m = ir_graph_new();
    int x = pb_input(m, "x", TU_SHAPE(1, C, H, W)), w = pb_input(m, "w", TU_SHAPE(C, C, 3, 3));
    int y = pb_conv(m, x, w, PADS1, NULL);
    int st = pb_ints(m, 2, (int64_t[]){h0, w0}), en = pb_ints(m, 2, (int64_t[]){h1, w1}),
        ax = pb_ints(m, 2, (int64_t[]){2, 3});
    int sl = pb_op(m, IR_OP_Slice, 4, (int[]){x, st, en, ax}, 0, NULL);
    int pads = pb_ints(m, 8, (int64_t[]){0, 0, h0, w0, 0, 0, H - h1, W - w1});
    int pd = pb_op(m, IR_OP_Pad, 2, (int[]){sl, pads}, 0, NULL);
    pb_output(m, pb_op(m, IR_OP_Add, 2, (int[]){y, pd}, 0, NULL), "y");
    return m;
}

/* pb_conv(x, w flipped in both spatial dims): differs everywhere. */
static ir_graph *planted_everywhere(int64_t C, int64_t H, int64_t W) {
    ir_graph *m = ir_graph_new();
    int x = pb_input(m, "x", TU_SHAPE(1, C, H, W)), w = pb_input(m, "w", TU_SHAPE(C, C, 3, 3));
    int st = pb_ints(m, 2, (int64_t[]){2, 2}),
        en = pb_ints(m, 2, (int64_t[]){INT64_MIN, INT64_MIN}),
        ax = pb_ints(m, 2, (int64_t[]){2, 3}), sp = pb_ints(m, 2, (int64_t[]){-1, -1});
    int wf = pb_op(m, IR_OP_Slice, 5, (int[]){w, st, en, ax, sp}, 0, NULL);
    pb_output(m, pb_conv(m, x, wf, PADS1, NULL), "y");
    return m;
}

static void test_planted(void **state) {
    (void)state;
    const int64_t C = 4, H = 6, W = 7;
    const int64_t lo[3] = {0, 1, -1}, hi[3] = {1, -1, 0}; /* -1: from the end */
    ir_graph *o = planted_original(C, H, W);
    int trial = 0;
    for (int bh = 0; bh < 3; bh++)
        for (int bw = 0; bw < 3; bw++) {
            if (bh == 1 && bw == 1) continue; /* the 8 boundary boxes */
            int64_t h0 = lo[bh] < 0 ? H + lo[bh] : lo[bh], h1 = hi[bh] <= 0 ? H + hi[bh] : hi[bh];
            int64_t w0 = lo[bw] < 0 ? W + lo[bw] : lo[bw], w1 = hi[bw] <= 0 ? W + hi[bw] : hi[bw];
            ir_graph *m1 = planted_one_box(C, H, W, h0, h1, w0, w1),
                     *me = planted_everywhere(C, H, W);
            for (uint64_t seed = 1; seed <= 3; seed++, trial++) {
                pet_result r;
                pet_options opt = {.seed = seed * 1000 + (uint64_t)trial,
                                   .threads = 1 + (int)(seed % 2)};
                verify(o, m1, &opt, &r);
                const pet_output_report *rep = &r.outputs[0];
                assert_int_equal(rep->cells, 9);
                if (rep->n_failed != 1)
                    fail_msg("box (%d, %d), seed %d: %lld cells failed", bh, bw, (int)seed,
                             (long long)rep->n_failed);
                const pet_box *b = &rep->failed[0].box;
                assert_true(b->lo[2] == h0 && b->hi[2] == h1 && b->lo[3] == w0 && b->hi[3] == w1);
                assert_true(b->lo[1] == 0 && b->hi[1] == C);
                assert_int_equal(rep->failed[0].orig_box, bh * 3 + bw);
                assert_int_equal(rep->failed[0].mutant_box, bh * 3 + bw);
                assert_false(r.rejected);
                pet_result_free(&r);

                verify(o, me, &opt, &r);
                assert_int_equal(r.outputs[0].n_failed, r.outputs[0].cells);
                assert_int_equal(r.outputs[0].cells, 9);
                assert_true(r.rejected);
                pet_result_free(&r);
            }
            ir_graph_free(m1);
            ir_graph_free(me);
        }
    ir_graph_free(o);
}

/* ---------------------------------------------------------------- counting and options */

/* 9 cells of [1, M, H, W]: positions v0 plus one per dim at least 2 wide: corners 1 + 1 (M),
 * edges 1 + 2, the interior 1 + 3; box-tests = positions * t. Threads, evaluation modes and the
 * bound. */
static void test_counts_and_modes(void **state) {
    (void)state;
    const int64_t C = 4, H = 6, W = 6;
    ir_graph *o = planted_original(C, H, W), *m = planted_one_box(C, H, W, 0, 1, 1, W - 1);
    pet_result r1, r2, rd;
    pet_options opt = {.seed = 77, .tests = 5, .threads = 1};
    verify(o, m, &opt, &r1);
    assert_int_equal(r1.probes, 4 * 2 + 4 * 3 + 4);
    assert_int_equal(r1.box_tests, r1.probes * 5);
    assert_int_equal(r1.tests, 5);
    assert_int_equal(r1.n_vars, 2);
    assert_int_equal(r1.degree, 2);
    assert_true(r1.false_accept_bound == pow(2.0 / PET_P, 5));
    assert_int_equal(r1.affine_dropped, 0);
    opt.threads = 2;
    verify(o, m, &opt, &r2);
    opt.dense = true;
    verify(o, m, &opt, &rd);
    const pet_result *rs[3] = {&r1, &r2, &rd};
    for (int i = 1; i < 3; i++) {
        assert_int_equal(rs[i]->box_tests, r1.box_tests);
        assert_int_equal(rs[i]->outputs[0].n_failed, r1.outputs[0].n_failed);
        for (int64_t k = 0; k < r1.outputs[0].n_failed; k++)
            assert_memory_equal(&rs[i]->outputs[0].failed[k], &r1.outputs[0].failed[k],
                                sizeof(pet_region));
    }
    /* lazily, both programs touch a small part of their values; whole, all of them t times */
    assert_true(r1.evaluated == r2.evaluated);
    assert_true(r1.evaluated * 4 < rd.evaluated);
    pet_result_free(&r1);
    pet_result_free(&r2);
    pet_result_free(&rd);
    ir_graph_free(o);
    ir_graph_free(m);
}

/* Einsum "bij,bjk->bik" (attention-like batched product) against MatMul: equivalent; against a
 * MatMul whose B lost its last column: only that column of y fails, and the correction (the
 * Einsum recomputed on it, pet-region-compute.c) makes the mutant equal the original. */
static ir_graph *einsum_graph(bool matmul, bool cut) {
    ir_graph *g = ir_graph_new();
    int a = pb_input(g, "a", TU_SHAPE(2, 4, 5)), b = pb_input(g, "b", TU_SHAPE(2, 5, 6));
    if (cut) {
        int st = pb_ints(g, 1, (int64_t[]){0}), en = pb_ints(g, 1, (int64_t[]){5}),
            ax = pb_ints(g, 1, (int64_t[]){2});
        int sl = pb_op(g, IR_OP_Slice, 4, (int[]){b, st, en, ax}, 0, NULL);
        int pads = pb_ints(g, 6, (int64_t[]){0, 0, 0, 0, 0, 1});
        b = pb_op(g, IR_OP_Pad, 2, (int[]){sl, pads}, 0, NULL);
    }
    ir_attr eq = {.name = "equation", .type = IR_ATTR_STRING, .s = "bij,bjk->bik"};
    int y = matmul ? pb_op(g, IR_OP_MatMul, 2, (int[]){a, b}, 0, NULL)
                   : pb_op(g, IR_OP_Einsum, 2, (int[]){a, b}, 1, &eq);
    pb_output(g, y, "y");
    return g;
}

static void test_einsum_verify(void **state) {
    (void)state;
    ir_graph *o = einsum_graph(false, false), *m = einsum_graph(true, false),
             *mc = einsum_graph(true, true);
    pet_result r;
    pet_options opt = {.seed = 9, .threads = 1};
    verify(o, m, &opt, &r);
    assert_true(r.equivalent);
    pet_result_free(&r);
    verify(o, mc, &opt, &r);
    assert_false(r.equivalent);
    const pet_output_report *rep = &r.outputs[0];
    assert_true(rep->n_failed > 0);
    for (int64_t i = 0; i < rep->n_failed; i++) {
        const pet_box *bx = &rep->failed[i].box;
        assert_true(bx->lo[2] == 5 && bx->hi[2] == 6);
    }
    assert_int_equal(rep->failed_elems, 2 * 4);
    check_correction_zp(o, mc, &r, 31);
    check_correction_float(o, mc, &r);
    pet_result_free(&r);
    ir_graph_free(o);
    ir_graph_free(m);
    ir_graph_free(mc);
}

static void test_errors(void **state) {
    (void)state;
    ir_graph *o = planted_original(2, 5, 5);
    pet_result r;
    ir_diag d = {{0}};
    /* an output of another name */
    ir_graph *m = ir_graph_new();
    int x = pb_input(m, "x", TU_SHAPE(1, 2, 5, 5)), w = pb_input(m, "w", TU_SHAPE(2, 2, 3, 3));
    pb_output(m, pb_conv(m, x, w, PADS1, NULL), "z");
    assert_int_equal(pet_verify(o, m, NULL, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'y'"));
    assert_int_equal(r.n_outputs, 0);
    ir_graph_free(m);
    /* a variable the original lacks */
    m = ir_graph_new();
    x = pb_input(m, "x", TU_SHAPE(1, 2, 5, 5));
    w = pb_input(m, "w", TU_SHAPE(2, 2, 3, 3));
    int extra = pb_input(m, "extra", TU_SHAPE(1, 2, 5, 5));
    pb_output(m, pb_op(m, IR_OP_Add, 2, (int[]){pb_conv(m, x, w, PADS1, NULL), extra}, 0, NULL),
              "y");
    assert_int_equal(pet_verify(o, m, NULL, &r, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'extra'"));
    ir_graph_free(m);
    /* a non-multilinear mutant */
    m = ir_graph_new();
    x = pb_input(m, "x", TU_SHAPE(1, 2, 5, 5));
    w = pb_input(m, "w", TU_SHAPE(2, 2, 3, 3));
    pb_output(m, pb_op(m, IR_OP_Relu, 1, (int[]){pb_conv(m, x, w, PADS1, NULL)}, 0, NULL), "y");
    assert_int_equal(pet_verify(o, m, NULL, &r, &d), IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "mutant"));
    ir_graph_free(m);
    /* the cell limit */
    pet_options opt = {.max_cells = 4};
    assert_int_equal(pet_verify(o, o, &opt, &r, &d), IR_ERR_UNSUPPORTED);
    ir_graph_free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boxes_figure4),    cmocka_unit_test(test_boxes_strided_dilated),
        cmocka_unit_test(test_boxes_layout),     cmocka_unit_test(test_boxes_reshape_matmul),
        cmocka_unit_test(test_figure1),          cmocka_unit_test(test_figure1_concat),
        cmocka_unit_test(test_figure3),          cmocka_unit_test(test_planted),
        cmocka_unit_test(test_counts_and_modes), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_einsum_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
