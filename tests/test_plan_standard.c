/* test_plan_standard.c - an inference plan with PET patches is written in the default ONNX domain
 * only (cli/export-standard.c, issue #19), so that other runtimes load it:
 *  - a model holding two PetPatch nodes (a PET plan, as PET's corrector writes them: a mutant's
 *    output with a box rewritten, then another), optimized with `magpie optimize`: every node of
 *    optimized.onnx, read raw (ir_onnx_load, not the CLI's loader), is in the default domain and
 *    the file imports no other opset; each patch became a Pad and a Where;
 *  - magpie reads the file back with its in-place patches (`magpie inspect`: two PetPatch, no
 *    Where), and the plan computes what the model computes (`magpie verify`, float64-referenced);
 *  - a plan with host copies (Store/Load, under --rules swap) is not lowered: its file keeps the
 *    magpie domain, which `magpie export --standard` lowers on request. */
#include "test-util.h"

#include "pet-build.h"

#include <sys/stat.h>
#include <unistd.h>

/* x [1,4,8,8] -> Conv 3x3 -> y; two patches (computed from slices of x) into y's boxes, then
 * Relu: the shape of a corrected PET mutant. Weights are initializers. */
static ir_graph *patched_model(void) {
    static const int64_t pads1[4] = {1, 1, 1, 1};
    ir_graph *g = ir_graph_new();
    g->opset = 13;
    int x = pb_input(g, "x", TU_SHAPE(1, 4, 8, 8));
    g->values[x].flags |= IR_VF_DATA;
    int w = pb_weight(g, "conv.weight", TU_SHAPE(4, 4, 3, 3), 7);
    int y = pb_conv(g, x, w, pads1, NULL);
    int s1 = pb_op(g, IR_OP_Slice, 4,
                   (int[]){x, PB_INTS(g, 0, 0), PB_INTS(g, 2, 3), PB_INTS(g, 2, 3)}, 0, NULL);
    int p1 = pb_op(g, IR_OP_Sigmoid, 1, &s1, 0, NULL); /* [1,4,2,3] */
    int64_t st1[4] = {0, 0, 3, 2}, st2[4] = {0, 1, 0, 0};
    int z =
        pb_op(g, IR_OP_PetPatch, 2, (int[]){y, p1}, 1, (ir_attr[]){tu_attr_ints("starts", 4, st1)});
    int s2 = pb_op(g, IR_OP_Slice, 4,
                   (int[]){x, PB_INTS(g, 0, 0), PB_INTS(g, 2, 1), PB_INTS(g, 1, 2)}, 0, NULL);
    int p2 = pb_op(g, IR_OP_Tanh, 1, &s2, 0, NULL); /* [1,2,1,8] */
    int z2 =
        pb_op(g, IR_OP_PetPatch, 2, (int[]){z, p2}, 1, (ir_attr[]){tu_attr_ints("starts", 4, st2)});
    pb_output(g, pb_op(g, IR_OP_Relu, 1, &z2, 0, NULL), "out");
    return g;
}

/* Nodes of path outside the default domain, read raw; *n_op counts op k. */
static int magpie_nodes(const char *path, ir_op_kind k, int *n_op) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(path, NULL, &st, &d);
    if (!g) fail_msg("load %s: %s", path, d.msg);
    int n = 0;
    *n_op = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        n += g->nodes[i].domain && g->nodes[i].domain[0] != 0;
        *n_op += g->nodes[i].op == k;
    }
    ir_graph_free(g);
    return n;
}

/* Whether the file at path names the domain "magpie": an opset_import entry (OperatorSetIdProto
 * field 1, tag 0x0a) or a node's domain (NodeProto field 7, tag 0x3a), each the 6-byte string.
 * (Value names may start with "magpie_std_": those are longer strings.) */
static bool file_mentions_magpie(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t i = 0; i + 8 <= n; i++)
        if ((buf[i] == 0x0a || buf[i] == 0x3a) && buf[i + 1] == 6 &&
            memcmp(buf + i + 2, "magpie", 6) == 0)
            return true;
    return false;
}

static void test_pet_plan_standard(void **state) {
    (void)state;
    char dir[64], model[128], plan[160], args[1024];
    tu_make_dir(dir, sizeof dir, "plan-std");
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    ir_diag d = {{0}};
    ir_graph *g = patched_model();
    assert_int_equal(ir_onnx_save(g, model, &d), IR_OK);
    ir_graph_free(g);
    int n;
    assert_int_equal(magpie_nodes(model, IR_OP_PetPatch, &n), 2); /* the model: magpie's */
    assert_int_equal(n, 2);

    tu_proc p;
    snprintf(args, sizeof args,
             "optimize %s --mem-limit 1.0 --max-states 50 --threads 1 --quiet -o %s/plan", model,
             dir);
    tu_magpie(&p, args);
    if (p.rc != 0) fail_msg("optimize: rc %d: %s", p.rc, p.err);
    snprintf(plan, sizeof plan, "%s/plan/optimized.onnx", dir);
    int wheres;
    assert_int_equal(magpie_nodes(plan, IR_OP_Where, &wheres), 0);
    assert_int_equal(wheres, 2);
    assert_int_equal(magpie_nodes(plan, IR_OP_Pad, &n), 0);
    assert_int_equal(n, 2);
    assert_false(file_mentions_magpie(plan));

    /* read back by magpie: the in-place patches again */
    snprintf(args, sizeof args, "inspect %s --json", plan);
    tu_magpie(&p, args);
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "\"PetPatch\":2"));
    assert_null(strstr(p.out, "\"Where\":"));
    assert_null(strstr(p.out, "\"Pad\":"));
    snprintf(args, sizeof args, "verify %s %s --seed 3", model, plan);
    tu_magpie(&p, args);
    if (p.rc != 0) fail_msg("verify: rc %d: %s %s", p.rc, p.out, p.err);
    tu_remove_dir(dir);
}

static void test_swap_plan_keeps_magpie_domain(void **state) {
    (void)state;
    char dir[64], plan[160], args[1024];
    tu_make_dir(dir, sizeof dir, "plan-std");
    tu_proc p;
    snprintf(args, sizeof args,
             "optimize tests/fixtures/numeric/vit_small/model.onnx --rules swap --mem-limit 0.7 "
             "--max-states 200 --threads 1 --quiet -o %s/plan",
             dir);
    tu_magpie(&p, args);
    if (p.rc != 0 && p.rc != 3) fail_msg("optimize: rc %d: %s", p.rc, p.err);
    snprintf(plan, sizeof plan, "%s/plan/optimized.onnx", dir);
    int stores;
    int magpie = magpie_nodes(plan, IR_OP_Store, &stores);
    if (stores == 0) { /* the search found no swap to make here: nothing to check */
        tu_remove_dir(dir);
        skip();
    }
    assert_true(magpie >= 2 * stores);
    tu_remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pet_plan_standard),
        cmocka_unit_test(test_swap_plan_keeps_magpie_domain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
