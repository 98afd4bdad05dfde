/* force_fission.c - a test-only way to put a fission of one kind into a training plan, which a
 * search on a small model may never choose (its weights outweigh what a part saves). It builds
 * the training graph of MODEL with --shape batch=B, --loss mse and --optimizer sgd (or none: the
 * gradients are the outputs), picks a
 * fission along the batch (the component of the data input's dimension BATCH_DIM) of the kind
 * named, schedules the one-copy graph in its eager order, materializes it and writes
 * OUT_DIR/optimized.onnx as optimize would; stdout gets the predicted peak of the plan as written
 * ("peak_bytes N") and what the plan holds ("strided_views K", "fission_slices K").
 *
 *     force_fission MODEL.onnx OUT_DIR B BATCH_DIM strided|bn [sgd|none]
 *
 * B binds the symbolic dimension "batch" (0: the model's shapes are static).
 * strided: the largest F-Tree candidate along the batch whose border has strided values (the
 * batch as the inner factor of a merged dim), else the first single node that reads one; exit 2
 * when there is none. bn: the model's training-mode batch norms in two phases (rw_bn_two_phase),
 * the whole training graph split along the batch, cut into phases (rw_fission_phases). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir.h"
#include "rules.h"
#include "schedule.h"

static int fail(const char *what, const ir_diag *d) {
    fprintf(stderr, "force_fission: %s: %s\n", what, d ? d->msg : "");
    return 2;
}

static int count_named(const ir_graph *g, const char *s) {
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += strstr(g->nodes[i].name, s) != NULL;
    return c;
}

static int strided_views(const ir_graph *one) {
    return count_named(one, ".fisexpose") + count_named(one, ".fismerged");
}

/* f applied in 2 parts when it gives strided views, else NULL. */
static ir_graph *try_fission(const ir_graph *g, rw_fission f, ir_diag *d) {
    f.parts = 2;
    ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, d);
    if (one && strided_views(one) == 0) {
        ir_graph_free(one);
        one = NULL;
    }
    return one;
}

static ir_graph *pick_strided(const ir_graph *g, const rw_dgraph *dg, int comp,
                              const sched_memory *m, ir_diag *d) {
    rw_ftree *t = rw_ftree_build(g, m, 4);
    ir_graph *one = NULL;
    rw_fission seed = {0};
    bool have_seed = false;
    for (int k = 0; t && k < t->n; k++) /* the tree lists larger S first within a component */
        if (t->nodes[k].comp == comp) {
            if (!have_seed) seed = t->nodes[k].f, have_seed = true;
            if ((one = try_fission(g, t->nodes[k].f, d))) break;
        }
    rw_ftree_free(t);
    for (int i = 0; i < g->n_nodes && !one && have_seed; i++) {
        const ir_node *n = &g->nodes[i];
        bool strided_in = false;
        for (int k = 0; k < n->n_in && !strided_in; k++) {
            int v = n->in[k], dim = rw_dgraph_value_dim_in(dg, v, comp);
            strided_in = dim >= 0 && rw_dgraph_value_comp(dg, v, dim) != comp;
        }
        if (!strided_in || n->op == IR_OP_Reshape) continue;
        uint32_t id = n->id;
        rw_fission f = seed;
        f.ids = &id;
        f.n_ids = 1;
        f.parts = 2;
        if (rw_fission_check(g, dg, &f, d) == IR_OK) one = try_fission(g, f, d);
    }
    if (!one) ir_diag_set(d, IR_ERR_INVALID, "no fission along the batch with a strided border");
    return one;
}

/* Every node with a vertex in comp, as one fission cut into phases, applied in 2 parts. */
static ir_graph *whole_in_phases(const ir_graph *g, const rw_dgraph *dg, int comp, ir_diag *d) {
    uint32_t *ids = malloc(sizeof(uint32_t) * ((size_t)g->n_nodes + 1));
    rw_fission f = {.ids = ids, .parts = 2, .seed_dim = -1};
    for (int i = 0; ids && i < g->n_nodes; i++) { /* node ids grow in node order here */
        const ir_node *n = &g->nodes[i];
        bool in = rw_dgraph_reduce_in(dg, i, comp) > 0;
        for (int k = 0; k < n->n_out; k++) {
            int dim = n->out[k] >= 0 ? rw_dgraph_value_dim_in(dg, n->out[k], comp) : -1;
            in = in || dim >= 0;
            if (f.seed_dim < 0 && dim >= 0 && rw_dgraph_value_comp(dg, n->out[k], dim) == comp)
                f.seed_id = n->id, f.seed_out = k, f.seed_dim = dim;
        }
        if (in) ids[f.n_ids++] = n->id;
    }
    rw_fission *ph = NULL;
    int n_ph = ids ? rw_fission_phases(g, dg, &f, &ph, d) : -1;
    ir_graph *one = n_ph > 0 ? rw_fission_apply(g, ph, n_ph, NULL, NULL, d) : NULL;
    if (one) fprintf(stderr, "force_fission: %d phases\n", n_ph);
    if (ph) free(ph[0].ids);
    free(ph);
    free(ids);
    return one;
}

int main(int argc, char **argv) {
    bool sgd = argc == 6 || (argc == 7 && !strcmp(argv[6], "sgd"));
    bool bn = argc >= 6 && !strcmp(argv[5], "bn");
    if ((argc != 6 && argc != 7) || (strcmp(argv[5], "strided") != 0 && !bn) ||
        (argc == 7 && !sgd && strcmp(argv[6], "none") != 0)) {
        fprintf(stderr,
                "usage: force_fission MODEL.onnx OUT_DIR B BATCH_DIM strided|bn [sgd|none]\n");
        return 2;
    }
    ir_diag d = {{0}};
    ir_status st;
    const char *names[1] = {"batch"};
    ir_shape b = {.rank = 1, .dims = {atoll(argv[3])}};
    ir_import_opts io = {.n_shapes = b.dims[0] > 0, .shape_names = names, .shape_values = &b};
    ir_graph *fwd = ir_onnx_load(argv[1], &io, &st, &d);
    if (!fwd) return fail(argv[1], &d);
    if (bn) {
        int n_bn;
        ir_graph *two = rw_bn_two_phase(fwd, &n_bn, &d);
        if (!two || n_bn == 0) return fail("batch norm in two phases", two ? NULL : &d);
        ir_graph_free(fwd);
        fwd = two;
    }
    ir_train_opts to = {
        .loss = IR_LOSS_MSE, .optimizer = sgd ? IR_OPTIM_SGD : IR_OPTIM_NONE, .lr = 0.01};
    ir_graph *tg = ir_build_training(fwd, &to, &st, &d);
    if (!tg) return fail("training graph", &d);
    rw_dgraph *dg = rw_dgraph_build(tg);
    int comp = dg ? rw_dgraph_value_comp(dg, tg->inputs[0], atoi(argv[4])) : -1;
    sched_memory m = {0};
    if (comp < 0 || sched_memory_compute(tg, NULL, &m, &d) != IR_OK) return fail("memory", &d);
    ir_graph *one = bn ? whole_in_phases(tg, dg, comp, &d) : pick_strided(tg, dg, comp, &m, &d);
    if (!one) return fail(argv[5], &d);
    int *order = sched_eager_order(one), *mo = NULL;
    ir_graph *mat = order ? rw_fission_materialize(one, order, &mo, &d) : NULL;
    if (!mat) return fail("materialize", &d);
    mkdir(argv[2], 0777);
    char path[4096];
    snprintf(path, sizeof path, "%s/optimized.onnx", argv[2]);
    if (ir_onnx_save(mat, path, &d) != IR_OK) return fail(path, &d);
    /* the predicted peak of the plan as written, read back as optimize reads it */
    ir_graph *plan = ir_onnx_load(path, NULL, &st, &d);
    sched_memory pm = {0};
    if (!plan || sched_memory_compute(plan, NULL, &pm, &d) != IR_OK) return fail(path, &d);
    int slices = 0;
    for (int i = 0; i < plan->n_nodes; i++) slices += plan->nodes[i].op == IR_OP_FissionSlice;
    int bns = 0;
    for (int i = 0; i < plan->n_nodes; i++) bns += plan->nodes[i].op == IR_OP_BatchNormalization;
    printf("peak_bytes %zu\nstrided_views %d\nfission_slices %d\nbatch_norms %d\nnodes %d\n",
           pm.peak_bytes, strided_views(plan), slices, bns, plan->n_nodes);
    sched_memory_free(&pm);
    sched_memory_free(&m);
    ir_graph_free(plan);
    ir_graph_free(mat);
    ir_graph_free(one);
    rw_dgraph_free(dg);
    ir_graph_free(tg);
    ir_graph_free(fwd);
    free(order);
    free(mo);
    return 0;
}
