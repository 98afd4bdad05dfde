/* force_plan.c - a test-only way to put one rewrite family into a plan: `magpie optimize --rules`
 * only restricts the search, which may find no fission on a small model. This builds a model's
 * training graph (--loss sum, no optimizer), applies one rewrite of the family named (fission:
 * the F-Tree's first node that applies, split into the least divisor >= 2 of its dimension;
 * remat, swap: the first candidate of that kind at the eager order's hot-spots), schedules it
 * from the eager order (new nodes right before their readers) and writes the materialized plan
 * as OUT_DIR/optimized.onnx, as optimize would, with the predicted peak of the plan's file order
 * on stdout ("peak_bytes N").
 *
 *     force_plan MODEL.onnx OUT_DIR fission|remat|swap [--inference]
 *
 * --inference applies the rewrite to the model itself (no training graph). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir.h"
#include "rules.h"
#include "schedule.h"

static int fail(const char *what, const ir_diag *d) {
    fprintf(stderr, "force_plan: %s: %s\n", what, d ? d->msg : "");
    return 2;
}

static ir_graph *apply_fission(const ir_graph *tg, const sched_memory *m, int **order, ir_diag *d) {
    rw_ftree *t = rw_ftree_build(tg, m, 4);
    ir_graph *one = NULL;
    for (int i = 0; t && i < t->n && !one; i++) {
        rw_fission f = t->nodes[i].f;
        int64_t len = t->nodes[i].dim_len, p = 2;
        while (p < len && len % p) p++;
        f.parts = (int)p;
        if (!(one = rw_fission_apply(tg, &f, 1, NULL, NULL, d))) continue;
        int *no = malloc(sizeof(int) * (size_t)one->n_nodes);
        if (!no || sched_insert_new(tg, *order, one, no, d) != IR_OK) {
            free(no);
            ir_graph_free(one);
            one = NULL;
            continue;
        }
        free(*order);
        *order = no;
    }
    rw_ftree_free(t);
    return one;
}

static ir_graph *apply_first(const ir_graph *tg, const sched_memory *m, int kind, int **order,
                             ir_diag *d) {
    enum { MAX = 1 << 16 };
    rw_rewrite *c = malloc(sizeof *c * MAX);
    int n = c ? rw_candidates(tg, m, false, c, MAX) : 0;
    ir_graph *g = NULL;
    for (int i = 0; i < n && !g; i++) {
        if (c[i].kind != kind) continue;
        ir_status st;
        if (!(g = rw_apply(tg, &c[i], NULL, NULL, &st, d))) continue;
        int *no = malloc(sizeof(int) * (size_t)g->n_nodes);
        if (!no || sched_insert_new(tg, *order, g, no, d) != IR_OK) {
            free(no);
            ir_graph_free(g);
            g = NULL;
            continue;
        }
        free(*order);
        *order = no;
    }
    free(c);
    return g;
}

int main(int argc, char **argv) {
    bool inference = argc == 5 && !strcmp(argv[4], "--inference");
    if (argc != 4 && !inference) {
        fprintf(stderr, "usage: force_plan MODEL.onnx OUT_DIR fission|remat|swap [--inference]\n");
        return 2;
    }
    const char *fam = argv[3];
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts io = {0};
    ir_graph *fwd = ir_onnx_load(argv[1], &io, &st, &d);
    if (!fwd) return fail(argv[1], &d);
    ir_train_opts to = {.loss = IR_LOSS_SUM};
    ir_graph *tg = inference ? ir_graph_clone(fwd) : ir_build_training(fwd, &to, &st, &d);
    if (!tg) return fail("training graph", &d);
    int *order = sched_eager_order(tg);
    sched_memory m = {0};
    if (!order || sched_memory_compute(tg, order, &m, &d) != IR_OK) return fail("memory", &d);
    ir_graph *one = !strcmp(fam, "fission") ? apply_fission(tg, &m, &order, &d)
                    : !strcmp(fam, "remat") ? apply_first(tg, &m, RW_REMAT, &order, &d)
                    : !strcmp(fam, "swap")  ? apply_first(tg, &m, RW_SWAP, &order, &d)
                                            : NULL;
    if (!one) return fail(fam, &d);
    int *mo = NULL;
    ir_graph *mat = rw_fission_materialize(one, order, &mo, &d);
    if (!mat) return fail("materialize", &d);
    mkdir(argv[2], 0777);
    char path[4096];
    snprintf(path, sizeof path, "%s/optimized.onnx", argv[2]);
    if (ir_onnx_save(mat, path, &d) != IR_OK) return fail(path, &d);
    /* the predicted peak of the plan as written, read back as optimize reads it */
    ir_graph *plan = ir_onnx_load(path, &io, &st, &d);
    sched_memory pm = {0};
    if (!plan || sched_memory_compute(plan, NULL, &pm, &d) != IR_OK) return fail(path, &d);
    printf("peak_bytes %zu\nnodes %d\n", pm.peak_bytes, plan->n_nodes);
    sched_memory_free(&pm);
    sched_memory_free(&m);
    ir_graph_free(plan);
    ir_graph_free(mat);
    ir_graph_free(one);
    ir_graph_free(tg);
    ir_graph_free(fwd);
    free(order);
    free(mo);
    return 0;
}
