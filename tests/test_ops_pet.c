/* test_ops_pet.c - PetPatch (ir/ops-pet.c), the op that writes a PET correction over a box of a
 * mutant's output: results against hand-computed ones, in place and not, for float32 and int64;
 * shape-inference errors name the node; bytes count the patch, not the tensor; dims link only
 * the dims the patch covers whole; in place over a produced value (no allocation in the
 * executor); and a graph of it survives ONNX export and import (domain magpie) and runs the
 * same, through the API and through `magpie run`. */
#include "test-util.h"

#include "rt.h"

/* ---------------------------------------------------------------- the kernel */

static void test_patch_values(void **state) {
    (void)state;
    float o[24], p[6];
    for (int i = 0; i < 24; i++) o[i] = (float)i; /* [2, 3, 4] */
    for (int i = 0; i < 6; i++) p[i] = 100.0f + (float)i;
    int64_t starts[3] = {1, 1, 1};
    ir_attr a = tu_attr_ints("starts", 3, starts);
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(2, 3, 4), o),
                   tu_data_in(IR_F32, TU_SHAPE(1, 2, 3), p)};
    ir_tensor out[1];
    ir_diag d = {{0}};
    assert_int_equal(tu_run_op(IR_OP_PetPatch, 2, in, 1, 1, &a, out, &d), IR_OK);
    tu_expect_shape(&out[0], TU_SHAPE(2, 3, 4));
    float want[24];
    memcpy(want, o, sizeof want);
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 3; k++) want[12 + (1 + j) * 4 + 1 + k] = p[j * 3 + k];
    assert_memory_equal(out[0].data, want, sizeof want);
    tu_free_outputs(1, out);

    /* int64, a whole row at the start, rank 1 */
    int64_t oi[5] = {1, 2, 3, 4, 5}, pi[2] = {-7, -8}, s0[1] = {3};
    ir_attr a1 = tu_attr_ints("starts", 1, s0);
    tu_in in1[2] = {tu_data_in(IR_I64, TU_SHAPE(5), oi), tu_data_in(IR_I64, TU_SHAPE(2), pi)};
    assert_int_equal(tu_run_op(IR_OP_PetPatch, 2, in1, 1, 1, &a1, out, &d), IR_OK);
    assert_int_equal(out[0].dtype, IR_I64);
    const int64_t wi[5] = {1, 2, 3, -7, -8};
    assert_memory_equal(out[0].data, wi, sizeof wi);
    tu_free_outputs(1, out);
}

/* Out of the box, too long, wrong dtype or rank, starts of the wrong length: errors naming the
 * node and the value. */
static void test_patch_errors(void **state) {
    (void)state;
    float o[12] = {0}, p[4] = {0};
    ir_diag d = {{0}};
    int64_t s_out[2] = {2, 0}, s_ok[2] = {0, 1}, s_neg[2] = {-1, 0};
    tu_in in[2] = {tu_data_in(IR_F32, TU_SHAPE(3, 4), o), tu_data_in(IR_F32, TU_SHAPE(2, 2), p)};
    ir_attr a = tu_attr_ints("starts", 2, s_out);
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, in, 1, 1, &a, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "test_node"));
    assert_non_null(strstr(d.msg, "does not fit"));
    a = tu_attr_ints("starts", 2, s_neg);
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, in, 1, 1, &a, &d), IR_ERR_SHAPE);
    a = tu_attr_ints("starts", 1, s_ok);
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, in, 1, 1, &a, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "starts"));
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, in, 1, 0, NULL, &d), IR_ERR_INVALID);
    a = tu_attr_ints("starts", 2, s_ok);
    int64_t pi[4] = {0};
    tu_in bad_t[2] = {in[0], tu_data_in(IR_I64, TU_SHAPE(2, 2), pi)};
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, bad_t, 1, 1, &a, &d), IR_ERR_SHAPE);
    assert_non_null(strstr(d.msg, "in1"));
    tu_in bad_r[2] = {in[0], tu_data_in(IR_F32, TU_SHAPE(4), p)};
    assert_int_equal(tu_run_err(IR_OP_PetPatch, 2, bad_r, 1, 1, &a, &d), IR_ERR_SHAPE);
    ir_tensor out[1] = {{0}};
    assert_int_equal(tu_run_op(IR_OP_PetPatch, 2, in, 1, 1, &a, out, &d), IR_OK);
    tu_free_outputs(1, out);
}

/* ---------------------------------------------------------------- a graph of it */

/* x [2, 3, 8] -> y = Neg(x); p = Neg(slice) -> PetPatch(y, p) at (0, 1, 2): in place over y. */
static ir_graph *patch_graph(int *y_out, int *z_out, int *node) {
    ir_graph *g = ir_graph_new();
    g->opset = 17;
    ir_shape xs = TU_SHAPE(2, 3, 8), ps = TU_SHAPE(2, 2, 4);
    int x = ir_graph_add_value(g, "x", IR_F32, &xs), q = ir_graph_add_value(g, "q", IR_F32, &ps);
    ir_graph_add_input(g, x);
    ir_graph_add_input(g, q);
    g->values[x].flags |= IR_VF_DATA;
    g->values[q].flags |= IR_VF_DATA;
    int y, p, z;
    tu_add_node1(g, IR_OP_Neg, "neg", 1, &x, 0, NULL, &y);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, &q, 0, NULL, &p);
    int64_t starts[3] = {0, 1, 2};
    ir_attr a = tu_attr_ints("starts", 3, starts);
    a.ints = ir_graph_alloc(g, sizeof starts);
    memcpy(a.ints, starts, sizeof starts);
    *node = tu_add_node1(g, IR_OP_PetPatch, "patch", 2, (int[]){y, p}, 1, &a, &z);
    g->values[z].name = "z";
    ir_graph_add_output(g, z);
    *y_out = y;
    *z_out = z;
    return g;
}

static void expect_patched(const float *x, const float *q, const float *z) {
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 3; c++)
            for (int w = 0; w < 8; w++) {
                float want = -x[(i * 3 + c) * 8 + w];
                if (c >= 1 && w >= 2 && w < 6) {
                    float v = q[(i * 2 + c - 1) * 4 + w - 2];
                    want = v > 0 ? v : 0;
                }
                assert_true(z[(i * 3 + c) * 8 + w] == want);
            }
}

static void test_patch_graph(void **state) {
    (void)state;
    int y, z, ni;
    ir_graph *g = patch_graph(&y, &z, &ni);
    const ir_node *n = &g->nodes[ni];
    /* the patch read and its box written; in place over y */
    assert_true(ir_node_bytes(g, n) == 2.0 * 2 * 2 * 4 * 4);
    assert_true(ir_node_flops(g, n) == 0);
    assert_int_equal(ir_value_inplace_of(g, z), y);
    assert_true(ir_op_get(IR_OP_PetPatch)->flags & IR_OPF_INPLACE);
    assert_int_equal(ir_op_find("magpie", "PetPatch"), IR_OP_PetPatch);
    assert_int_equal(ir_op_find("", "PetPatch"), IR_OP_OPAQUE);
    /* dims: only dim 0 (the patch covers it whole) links, from both inputs */
    ir_dimlink l[IR_MAX_DIMLINKS];
    int cnt = ir_node_dims(g, n, l);
    assert_int_equal(cnt, 2);
    for (int i = 0; i < cnt; i++) {
        assert_int_equal(l[i].in_dim, 0);
        assert_int_equal(l[i].out_dim, 0);
        assert_int_equal(l[i].in, i);
    }

    float x[48], q[16];
    tu_fill(x, 48, 3);
    tu_fill(q, 16, 4);
    rt_binding b[2] = {
        {.value = g->inputs[0], .dtype = IR_F32, .shape = TU_SHAPE(2, 3, 8), .data = x},
        {.value = g->inputs[1], .dtype = IR_F32, .shape = TU_SHAPE(2, 2, 4), .data = q}};
    rt_result r;
    rt_options o = {.seed = 1};
    ir_diag d = {{0}};
    if (rt_run(g, b, 2, &o, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
    expect_patched(x, q, r.outputs[0].data);
    /* in place: at the patch's step nothing new is allocated (y's buffer becomes z) */
    assert_true(r.step_bytes[2] <= r.step_bytes[1]);
    size_t peak = r.peak_bytes;
    rt_result_free(&r);

    /* exported as domain magpie, imported back: the same op, attribute and results */
    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie-ops-pet-%d.onnx", (int)getpid());
    if (ir_onnx_save(g, path, &d) != IR_OK) fail_msg("save: %s", d.msg);
    ir_status st;
    ir_graph *h = ir_onnx_load(path, NULL, &st, &d);
    if (!h) fail_msg("load: %s", d.msg);
    int found = -1;
    for (int i = 0; i < h->n_nodes; i++)
        if (h->nodes[i].op == IR_OP_PetPatch) found = i;
    assert_true(found >= 0);
    assert_string_equal(h->nodes[found].domain, "magpie");
    const int64_t *sv;
    assert_int_equal(ir_attr_ints(&h->nodes[found], "starts", &sv), 3);
    assert_true(sv[0] == 0 && sv[1] == 1 && sv[2] == 2);
    b[0].value = ir_graph_find_value(h, "x");
    b[1].value = ir_graph_find_value(h, "q");
    if (rt_run(h, b, 2, &o, &r, &d) != IR_OK) fail_msg("run imported: %s", d.msg);
    expect_patched(x, q, r.outputs[0].data);
    assert_int_equal(r.peak_bytes, peak);
    rt_result_free(&r);
    ir_graph_free(h);

    /* the command line runs it too (x from a file, q a weight drawn from the seed) */
    char xpath[64], args[256];
    snprintf(xpath, sizeof xpath, "/tmp/magpie-ops-pet-%d.npy", (int)getpid());
    ir_shape xs = TU_SHAPE(2, 3, 8);
    assert_int_equal(ir_npy_write(xpath, IR_F32, &xs, x, &d), IR_OK);
    tu_proc p;
    /* outputs go to a scratch folder: run writes one .npy per graph output (default: .) */
    char odir[64], zpath[96];
    snprintf(odir, sizeof odir, "/tmp/magpie-ops-pet-%d.out", (int)getpid());
    snprintf(zpath, sizeof zpath, "%s/z.npy", odir);
    snprintf(args, sizeof args, "run %s -i %s --seed 3 -o %s --json", path, xpath, odir);
    tu_magpie(&p, args);
    unlink(path);
    unlink(xpath);
    unlink(zpath);
    rmdir(odir);
    if (p.rc != 0) fail_msg("magpie run: rc %d: %s", p.rc, p.err);
    assert_true(tu_json_num(p.out, "peak_bytes") == (double)peak);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patch_values),
        cmocka_unit_test(test_patch_errors),
        cmocka_unit_test(test_patch_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
