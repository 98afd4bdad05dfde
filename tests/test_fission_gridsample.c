/* test_fission_gridsample.c - fissions through GridSample's and Pad's gradients (GridSampleGrad,
 * GridSampleGridGrad, PadGrad), each materialized and executed in parts against the float64 run
 * of the unsplit training graph (test-check.h), the executed peak equal to the simulated one:
 *  - a hand-built X -> Pad(reflect) -> GridSample(X', grid), X and the grid both trained, split
 *    along the channels (GridSampleGridGrad sums over them: a partial node whose parts add up)
 *    and along the output rows (GridSampleGrad sums dY over the output points: partial too);
 *  - the training graph of stn_pad_train (a spatial transformer whose grids a Linear and a Conv
 *    compute, with reflect and replicate padding), the whole graph split along the batch. */
#include "test-fission.h"

#include "rt.h"
#include "rules.h"
#include "schedule.h"

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* S = every node with a vertex in comp (an output dim or a reduce axis), seeded at the first
 * output dim in comp; checked, applied in `parts` parts and run against ref. Returns |S|. */
static int split_along(const ir_graph *g, const rw_dgraph *dg, int comp, int parts,
                       const tu_ref *ref, const rt_options *ro, const char *what,
                       const ir_op_kind *must, int n_must) {
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes);
    rw_fission f = {.ids = ids, .seed_dim = -1, .parts = parts};
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool in = rw_dgraph_reduce_in(dg, i, comp) > 0;
        for (int k = 0; k < nd->n_out && !in; k++) {
            int dim = nd->out[k] >= 0 ? rw_dgraph_value_dim_in(dg, nd->out[k], comp) : -1;
            in = dim >= 0;
            if (in && f.seed_dim < 0) {
                f.seed_id = nd->id;
                f.seed_out = k;
                f.seed_dim = dim;
            }
        }
        if (in) ids[f.n_ids++] = nd->id;
    }
    qsort(ids, (size_t)f.n_ids, sizeof *ids, cmp_u32);
    for (int m = 0; m < n_must; m++) {
        bool found = false;
        for (int i = 0; i < g->n_nodes && !found; i++)
            if (g->nodes[i].op == must[m])
                for (int j = 0; j < f.n_ids && !found; j++) found = ids[j] == g->nodes[i].id;
        if (!found) fail_msg("%s: S lacks a %s", what, ir_op_name(must[m]));
    }
    ir_diag d = {{0}};
    if (rw_fission_check(g, dg, &f, &d) != IR_OK) fail_msg("%s: check: %s", what, d.msg);
    tu_fission_plan p = tu_fission_plan_make(g, &f, 1, what);
    double worst = tu_fission_plan_check(&p, NULL, 0, ref, ro, what);
    print_message("  %-40s |S| %3d, %3d -> %4d nodes, worst error/bound %.2g\n", what, f.n_ids,
                  g->n_nodes, p.mat->n_nodes, worst);
    tu_fission_plan_free(&p);
    int n = f.n_ids;
    free(ids);
    return n;
}

static int param(ir_graph *g, const char *name, ir_shape s, uint64_t seed, double lo, double hi) {
    int64_t n = ir_shape_numel(&s);
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * (double)(ir_mix64(seed * 977 + (uint64_t)i) >> 11) /
                                (double)(1ULL << 53));
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    g->values[v].blob = ir_blob_new(sizeof(float) * (size_t)n);
    memcpy(ir_blob_data(g->values[v].blob), p, sizeof(float) * (size_t)n);
    g->values[v].flags |= IR_VF_CONST | IR_VF_PARAM | IR_VF_INITIALIZER;
    free(p);
    return v;
}

static void test_gridsample_channels_and_rows(void **state) {
    (void)state;
    static const char *const modes[] = {"linear", "cubic"};
    for (int m = 0; m < 2; m++) {
        ir_graph *fwd = ir_graph_new();
        int x = param(fwd, "x", TU_SHAPE(2, 4, 5, 6), 1, -1, 1);
        int grid = param(fwd, "grid", TU_SHAPE(2, 6, 4, 2), 2, -1.3, 1.3);
        int64_t pads[] = {0, 0, 1, 2, 0, 0, 2, 1};
        ir_shape ps = TU_SHAPE(8);
        int pv = ir_graph_add_value(fwd, "pads", IR_I64, &ps);
        fwd->values[pv].blob = ir_blob_new(sizeof pads);
        memcpy(ir_blob_data(fwd->values[pv].blob), pads, sizeof pads);
        fwd->values[pv].flags |= IR_VF_CONST;
        int xp, y, y2;
        ir_attr refl = tu_attr_str("mode", "reflect");
        tu_add_node1(fwd, IR_OP_Pad, "pad", 2, (int[]){x, pv}, 1, &refl, &xp);
        ir_attr a[2] = {tu_attr_str("mode", modes[m]), tu_attr_str("padding_mode", "reflection")};
        tu_add_node1(fwd, IR_OP_GridSample, "sample", 2, (int[]){xp, grid}, 2, a, &y);
        tu_add_node1(fwd, IR_OP_Mul, "square", 2, (int[]){y, y}, 0, NULL, &y2);
        ir_graph_add_output(fwd, y2);
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *g = ir_build_training(fwd, NULL, &st, &d);
        if (!g) fail_msg("training graph: %s", d.msg);
        rt_options ro = {.seed = 4, .poison_freed = true};
        tu_ref ref;
        tu_ref_run(g, NULL, 0, &ro, &ref, "gridsample");
        rw_dgraph *dg = rw_dgraph_build(g);
        int gx = ir_graph_find_value(g, "x"), gg = ir_graph_find_value(g, "grid");
        int chan = rw_dgraph_value_comp(dg, gx, 1), rows = rw_dgraph_value_comp(dg, gg, 1);
        assert_true(chan >= 0 && rows >= 0 && chan != rows);
        const ir_op_kind c_ops[] = {IR_OP_PadGrad, IR_OP_GridSampleGrad, IR_OP_GridSampleGridGrad};
        char what[96];
        for (int parts = 2; parts <= 4; parts *= 2) {
            snprintf(what, sizeof what, "%s: channels, %d parts", modes[m], parts);
            split_along(g, dg, chan, parts, &ref, &ro, what, c_ops, 3);
        }
        const ir_op_kind r_ops[] = {IR_OP_GridSampleGrad, IR_OP_GridSampleGridGrad};
        snprintf(what, sizeof what, "%s: output rows, 2 parts", modes[m]);
        split_along(g, dg, rows, 2, &ref, &ro, what, r_ops, 2);
        snprintf(what, sizeof what, "%s: output rows, 3 parts", modes[m]);
        split_along(g, dg, rows, 3, &ref, &ro, what, r_ops, 2);
        rw_dgraph_free(dg);
        tu_ref_free(&ref);
        ir_graph_free(g);
        ir_graph_free(fwd);
    }
}

static void test_stn_batch(void **state) {
    (void)state;
    char path[1024];
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(
        tu_src_path("tests/fixtures/numeric/stn_pad_train/model.onnx", path, sizeof path), NULL,
        &st, &d);
    if (!fwd) fail_msg("import: %s", d.msg);
    ir_graph *g = ir_build_training(fwd, NULL, &st, &d);
    if (!g) fail_msg("training graph: %s", d.msg);
    rt_options ro = {.seed = 4, .fill_missing_data = true, .poison_freed = true};
    tu_ref ref;
    tu_ref_run(g, NULL, 0, &ro, &ref, "stn_pad_train");
    rw_dgraph *dg = rw_dgraph_build(g);
    int batch = rw_dgraph_value_comp(dg, g->inputs[0], 0);
    assert_true(batch >= 0);
    assert_int_equal(rw_fission_break_at(g, dg, batch, 0, &d), -1);
    const ir_op_kind ops[] = {IR_OP_PadGrad, IR_OP_GridSampleGrad, IR_OP_GridSampleGridGrad};
    split_along(g, dg, batch, 2, &ref, &ro, "stn_pad_train: batch, 2 parts", ops, 3);
    rw_dgraph_free(dg);
    tu_ref_free(&ref);
    ir_graph_free(g);
    ir_graph_free(fwd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gridsample_channels_and_rows),
        cmocka_unit_test(test_stn_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
