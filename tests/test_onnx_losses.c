/* test_onnx_losses.c - models that end in PyTorch's own loss (tests/fixtures/losses/, exported by
 * torch 1.13 at opset 17 with gen_losses.py): nn.CrossEntropyLoss and nn.NLLLoss become ONNX's
 * SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, which the importer expands
 * (ir/ir-expand-loss.c). For each model (mean with ignored labels; a weighted mean over
 * [N, C, H, W] with ignore_index 1; reduction "none" with weights):
 *  - the forward run matches PyTorch's outputs, and magpie's float32 run its float64 one;
 *  - the training graph (--train's default loss, the sum of the scalar loss: the loss itself)
 *    differentiates through the expansion: every parameter's gradient matches PyTorch's, and the
 *    float32 run the float64 one (test-check.h);
 *  - the batch stays splittable: no node breaks it, the labels are sliced with the data, and the
 *    forward (up to the loss's partial sum and the labels' count) and the backward, each split
 *    into 2 and 4 parts along the batch (ce_mlp at batch 64: its batch is dynamic), compute what
 *    the unsplit graph computes, judged against its float64 run;
 *  - the CLI: `inspect --train --fission` finds no node that breaks the batch, and the plan of
 *    `optimize --train --lat-limit 1.10` passes `verify`. */
#include "test-fission.h"
#include "test-util.h"

#include "rt.h"
#include "rules.h"
#include "schedule.h"

#include <stdio.h>
#include <stdlib.h>

/* PyTorch's values are float32: they agree with magpie's float64 run to float32 rounding. */
#define TORCH_TOL 2e-5

typedef struct fixture {
    const char *name;
    const char *params[4]; /* the parameters PyTorch has gradients for */
} fixture;

static const fixture fixtures[] = {
    {"ce_mlp", {"net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"}},
    {"nll_seg", {"conv.weight", "conv.bias"}},
    {"ce_sum_none", {"fc.weight", "fc.bias"}},
};

static ir_blob *read_npy(const char *fx, const char *file, ir_dtype *t, ir_shape *s) {
    char rel[512], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/losses/%s/%s", fx, file);
    ir_diag d = {{0}};
    ir_blob *b = NULL;
    if (ir_npy_read(tu_src_path(rel, path, sizeof path), t, s, &b, &d) != IR_OK)
        fail_msg("%s: %s", rel, d.msg);
    return b;
}

static ir_graph *load(const fixture *fx, const ir_import_opts *io) {
    char rel[512], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/losses/%s/model.onnx", fx->name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), io, &st, &d);
    if (!g) fail_msg("%s: import: %s", fx->name, d.msg);
    return g;
}

/* The relative L2 error of float64 a against float32 reference b. */
static double rel_err(const double *a, const float *b, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += (a[i] - b[i]) * (a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(e) / fmax(sqrt(r), 1e-30);
}

/* Output named name of ref's float64 run against the fixture's file. */
static void expect_torch(const fixture *fx, const ir_graph *g, const tu_ref *ref, const char *name,
                         const char *file) {
    int k = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->values[g->outputs[i]].name, name)) k = i;
    if (k < 0) fail_msg("%s: no output '%s'", fx->name, name);
    ir_dtype t;
    ir_shape s;
    ir_blob *b = read_npy(fx->name, file, &t, &s);
    const ir_tensor *o = &ref->r64.outputs[k];
    assert_int_equal(t, IR_F32);
    assert_int_equal(ir_shape_numel(&s), ir_shape_numel(&o->shape));
    double e = rel_err(o->data, ir_blob_data(b), ir_shape_numel(&s));
    print_message("  %-12s %-22s error against PyTorch %.2g\n", fx->name, name, e);
    if (!(e <= TORCH_TOL)) fail_msg("%s: '%s' differs from PyTorch's by %.3g", fx->name, name, e);
    ir_blob_unref(b);
}

static void bind_inputs(const fixture *fx, const ir_graph *g, rt_binding *in, ir_blob **blobs) {
    const char *names[2] = {"x", "labels"}, *files[2] = {"input_0.npy", "input_1.npy"};
    for (int i = 0; i < 2; i++) {
        ir_dtype t;
        ir_shape s;
        blobs[i] = read_npy(fx->name, files[i], &t, &s);
        int v = ir_graph_find_value(g, names[i]);
        assert_true(v >= 0);
        in[i] = (rt_binding){.value = v, .dtype = t, .shape = s, .data = ir_blob_data(blobs[i])};
    }
}

static void test_forward_and_gradients(void **state) {
    (void)state;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        const fixture *fx = &fixtures[f];
        const char *shape_names[1] = {"batch"};
        const ir_shape batch8 = {.rank = 1, .dims = {8}};
        ir_import_opts io = {0};
        if (!strcmp(fx->name, "ce_mlp"))
            io = (ir_import_opts){
                .n_shapes = 1, .shape_names = shape_names, .shape_values = &batch8};
        ir_graph *g = load(fx, &io);
        for (int i = 0; i < g->n_nodes; i++) /* expanded: no loss op is left */
            assert_null(strstr(g->nodes[i].op_type ? g->nodes[i].op_type : "", "Loss"));
        rt_binding in[2];
        ir_blob *blobs[2];
        bind_inputs(fx, g, in, blobs);
        rt_options o = {.seed = 1};
        tu_ref ref;
        tu_ref_run(g, in, 2, &o, &ref, fx->name);
        tu_expect_close(&ref, NULL, &ref.r32, fx->name);
        expect_torch(fx, g, &ref, "loss", "output_0.npy");
        expect_torch(fx, g, &ref, "aux", "output_1.npy");
        tu_ref_free(&ref);

        ir_diag d = {{0}};
        ir_status st;
        ir_train_opts to = {.loss = IR_LOSS_SUM};
        ir_graph *tg = ir_build_training(g, &to, &st, &d);
        if (!tg) fail_msg("%s: training graph: %s", fx->name, d.msg);
        for (int i = 0; i < 2; i++) ir_blob_unref(blobs[i]);
        bind_inputs(fx, tg, in, blobs);
        tu_ref_run(tg, in, 2, &o, &ref, fx->name);
        tu_expect_close(&ref, NULL, &ref.r32, fx->name);
        for (int p = 0; p < 4 && fx->params[p]; p++) {
            char out[256], file[256];
            snprintf(out, sizeof out, "%s.grad", fx->params[p]);
            snprintf(file, sizeof file, "%s.grad.npy", fx->params[p]);
            expect_torch(fx, tg, &ref, out, file);
        }
        tu_ref_free(&ref);
        ir_graph_free(tg);
        for (int i = 0; i < 2; i++) ir_blob_unref(blobs[i]);
        ir_graph_free(g);
    }
}

/* The nodes of [lo, hi) that read a value with a dimension in comp, as a fission of S along it
 * (seeded at the first such output). */
static rw_fission region(const ir_graph *g, const rw_dgraph *dg, int comp, int lo, int hi,
                         uint32_t *ids) {
    rw_fission f = {.ids = ids, .seed_out = -1};
    for (int i = lo; i < hi; i++) {
        const ir_node *n = &g->nodes[i];
        bool reads = false;
        for (int k = 0; k < n->n_in && !reads; k++)
            for (int dm = 0; n->in[k] >= 0 && dm < g->values[n->in[k]].shape.rank && !reads; dm++)
                reads = rw_dgraph_value_comp(dg, n->in[k], dm) == comp;
        if (!reads) continue;
        ids[f.n_ids++] = n->id;
        for (int k = 0; k < n->n_out && f.seed_out < 0; k++)
            for (int dm = 0; n->out[k] >= 0 && dm < g->values[n->out[k]].shape.rank; dm++)
                if (rw_dgraph_value_comp(dg, n->out[k], dm) == comp) {
                    f.seed_id = n->id;
                    f.seed_out = k;
                    f.seed_dim = dm;
                    break;
                }
    }
    /* ids ascending, as rw_fission requires */
    for (int a = 1; a < f.n_ids; a++)
        for (int b = a; b > 0 && ids[b - 1] > ids[b]; b--) {
            uint32_t t = ids[b];
            ids[b] = ids[b - 1];
            ids[b - 1] = t;
        }
    return f;
}

static int64_t labels64[64];

static void test_batch_fission(void **state) {
    (void)state;
    const fixture *fx = &fixtures[0];
    const char *shape_names[1] = {"batch"};
    const ir_shape batch = {.rank = 1, .dims = {64}};
    ir_import_opts io = {.n_shapes = 1, .shape_names = shape_names, .shape_values = &batch};
    ir_graph *fwd = load(fx, &io);
    ir_diag d = {{0}};
    ir_status st;
    ir_train_opts to = {.loss = IR_LOSS_SUM};
    ir_graph *g = ir_build_training(fwd, &to, &st, &d);
    if (!g) fail_msg("training graph: %s", d.msg);
    ir_graph_free(fwd);
    rw_dgraph *dg = rw_dgraph_build(g);
    const int x = ir_graph_find_value(g, "x"), lab = ir_graph_find_value(g, "labels");
    const int comp = rw_dgraph_value_comp(dg, x, 0);
    assert_true(comp >= 0);
    assert_int_equal(rw_dgraph_value_comp(dg, lab, 0), comp);
    int brk = rw_fission_break_at(g, dg, comp, 0, &d);
    if (brk != -1) fail_msg("the batch is broken at '%s': %s", g->nodes[brk].name, d.msg);

    /* the forward up to the loss (whose mean divides two sums over the batch), then the
     * backward: the seed's Expand of a scalar, which no part can start from, lies between */
    const int loss_node = g->values[g->outputs[0]].producer;
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)g->n_nodes * 2);
    rw_fission f[2] = {region(g, dg, comp, 0, loss_node, ids),
                       region(g, dg, comp, loss_node + 1, g->n_nodes, ids + g->n_nodes)};
    for (int i = 0; i < 64; i++) labels64[i] = i % 7 == 3 ? -100 : (i * 3) % 5;
    rt_binding in[1] = {
        {.value = lab, .dtype = IR_I64, .shape = g->values[lab].shape, .data = labels64}};
    const rt_options ro = {.seed = 3, .fill_missing_data = true};
    tu_ref ref;
    tu_ref_run(g, in, 1, &ro, &ref, "ce_mlp at batch 64");
    for (int parts = 2; parts <= 4; parts *= 2) {
        char what[128];
        snprintf(what, sizeof what, "ce_mlp, forward and backward in %d parts", parts);
        for (int k = 0; k < 2; k++) {
            f[k].parts = parts;
            if (rw_fission_check(g, dg, &f[k], &d) != IR_OK)
                fail_msg("%s: region %d (%d nodes) refused: %s", what, k, f[k].n_ids, d.msg);
        }
        tu_fission_plan p = tu_fission_plan_make(g, f, 2, what);
        const int lab2 = ir_graph_find_value(p.mat, "labels");
        rt_binding in2[1] = {
            {.value = lab2, .dtype = IR_I64, .shape = p.mat->values[lab2].shape, .data = labels64}};
        double worst = tu_fission_plan_check(&p, in2, 1, &ref, &ro, what);
        print_message("  %s: S %d + %d nodes, %d -> %d nodes, worst error/bound %.2g\n", what,
                      f[0].n_ids, f[1].n_ids, g->n_nodes, p.mat->n_nodes, worst);
        tu_fission_plan_free(&p);
    }
    tu_ref_free(&ref);
    free(ids);
    rw_dgraph_free(dg);
    ir_graph_free(g);
}

static void test_cli(void **state) {
    (void)state;
    char dir[256], args[1024];
    tu_make_dir(dir, sizeof dir, "losses");
    tu_proc p;
    const char *m = "tests/fixtures/losses/ce_mlp/model.onnx --train --shape batch=64";
    snprintf(args, sizeof args, "inspect %s --fission", m);
    tu_magpie(&p, args);
    if (p.rc != 0 || !strstr(p.out, "no node breaks it"))
        fail_msg("inspect --fission: rc %d\n%s%s", p.rc, p.out, p.err);
    snprintf(args, sizeof args, "optimize %s --lat-limit 1.10 --time 2 -o %s/plan --quiet", m, dir);
    tu_magpie(&p, args);
    if (p.rc != 0) fail_msg("optimize: rc %d\n%s%s", p.rc, p.out, p.err);
    snprintf(args, sizeof args, "verify %s %s/plan/optimized.onnx", m, dir);
    tu_magpie(&p, args);
    if (p.rc != 0 || !strstr(p.out, "match")) fail_msg("verify: rc %d\n%s%s", p.rc, p.out, p.err);
    tu_remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_and_gradients),
        cmocka_unit_test(test_batch_fission),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
