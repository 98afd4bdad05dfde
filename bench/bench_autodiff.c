/* bench_autodiff.c - how long ir_build_training takes on BERT-base (12 encoder layers,
 * tests/fixtures/structure/bert_base_encoder.onnx): the goal is well under a second for the
 * forward + sum loss + backward, and with an Adam step. Import time is reported separately;
 * each build is repeated and the best and median times are printed.
 *
 * usage: bench_autodiff [MODEL.onnx] [--reps N] [--json]
 * (the model defaults to $MAGPIE_SOURCE_DIR or . + tests/fixtures/structure/bert_base_encoder.onnx)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir.h"

typedef struct result {
    const char *what;
    int nodes, outputs;
    double best, median;
} result;

static int bench(const ir_graph *g, const ir_train_opts *o, int reps, result *r) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        ir_diag d = {{0}};
        ir_status st;
        double t0 = ir_now_seconds();
        ir_graph *tg = ir_build_training(g, o, &st, &d);
        t[i] = ir_now_seconds() - t0;
        if (!tg) {
            fprintf(stderr, "bench_autodiff: %s\n", d.msg);
            free(t);
            return 1;
        }
        r->nodes = tg->n_nodes;
        r->outputs = tg->n_outputs;
        ir_graph_free(tg);
    }
    qsort(t, (size_t)reps, sizeof *t, ir_cmp_double);
    r->best = t[0];
    r->median = t[reps / 2];
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL;
    int reps = 5;
    bool json = false;
    char buf[4096];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else
            model = argv[i];
    }
    if (reps < 1) reps = 1;
    if (!model) {
        const char *root = getenv("MAGPIE_SOURCE_DIR");
        snprintf(buf, sizeof buf, "%s/tests/fixtures/structure/bert_base_encoder.onnx",
                 root ? root : ".");
        model = buf;
    }
    ir_import_opts io = {0};
    ir_diag d = {{0}};
    ir_status st;
    double t0 = ir_now_seconds();
    ir_graph *g = ir_onnx_load(model, &io, &st, &d);
    double t_import = ir_now_seconds() - t0;
    if (!g) {
        fprintf(stderr, "bench_autodiff: %s\n", d.msg);
        return 1;
    }
    result r[2] = {{.what = "sum loss, no optimizer"}, {.what = "sum loss, adam"}};
    ir_train_opts o[2] = {{.loss = IR_LOSS_SUM}, {.loss = IR_LOSS_SUM, .optimizer = IR_OPTIM_ADAM}};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) rc = bench(g, &o[k], reps, &r[k]);
    if (!rc) {
        if (json) {
            printf("{\"model\": \"%s\", \"forward_nodes\": %d, \"import_s\": %.4f", model,
                   g->n_nodes, t_import);
            for (int k = 0; k < 2; k++)
                printf(", \"%s\": {\"nodes\": %d, \"outputs\": %d, \"best_s\": %.4f, "
                       "\"median_s\": %.4f}",
                       k ? "adam" : "plain", r[k].nodes, r[k].outputs, r[k].best, r[k].median);
            printf("}\n");
        } else {
            printf("%s: %d forward nodes, imported in %.3f s\n", model, g->n_nodes, t_import);
            for (int k = 0; k < 2; k++)
                printf("  %-24s %5d nodes %4d outputs  build best %.4f s, median %.4f s (%d "
                       "reps)\n",
                       r[k].what, r[k].nodes, r[k].outputs, r[k].best, r[k].median, reps);
        }
    }
    ir_graph_free(g);
    return rc;
}
