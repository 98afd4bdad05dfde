/* bench_pet_gen.c - PET's mutation generator on real models: every sub-program of the split
 * (pet_split_graph) that holds a Conv, MatMul or Gemm is extracted and run through
 * pet_gen_optimize (depth 4, d = 4 ops per subset, top-K 8), once with r = 1 round and once with
 * r = 4, reporting mutants per second and the time per sub-program (mean, median, max), with
 * the enumeration counters. Costs: the analytic rtx3090 model.
 *
 *   bench_pet_gen [--model PATH]... [--rounds R[,R...]] [--max-subprogs N] [--depth D]
 *                 [--max-states N] [--verbose]
 *
 * Default models: tests/fixtures/structure/resnet50.onnx and inception_v3.onnx (full size,
 * batch 1, weights as graph inputs), from the source tree (MAGPIE_SOURCE_DIR or the current
 * directory). --max-subprogs N takes the first N sub-programs with compute of each model. */
#include "pet-gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t max_states; /* --max-states, 0: the default */
static bool verbose;

static int run_model(const char *path, int rounds, int depth, int max_sp, prof_model *cost) {
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(path, NULL, &st, &d);
    if (!g) {
        fprintf(stderr, "bench_pet_gen: %s\n", d.msg);
        return 1;
    }
    pet_split *s;
    if (pet_split_graph(g, NULL, &s, &d) != IR_OK) {
        fprintf(stderr, "bench_pet_gen: %s\n", d.msg);
        ir_graph_free(g);
        return 1;
    }
    double *times = malloc(sizeof(double) * (size_t)(s->n + 1));
    int n = 0, truncated = 0, largest = 0;
    long long mutants = 0, states = 0, enums = 0, candidates = 0, kept = 0;
    double total = 0;
    for (int p = 0; p < s->n && (max_sp <= 0 || n < max_sp); p++) {
        const pet_subprog *sp = &s->progs[p];
        if (!sp->n_compute) continue;
        ir_graph *prog = pet_subprog_extract(g, sp, &st, &d);
        if (!prog) {
            fprintf(stderr, "bench_pet_gen: sub-program %d: %s\n", p, d.msg);
            continue;
        }
        pet_gen_opts o = {.depth = depth,
                          .rounds = rounds,
                          .subset_ops = 4,
                          .max_states = max_states,
                          .cost = cost};
        pet_mutant_list l = {0};
        double t0 = ir_now_seconds();
        st = pet_gen_optimize(prog, &o, &l, &d);
        double dt = ir_now_seconds() - t0;
        if (st != IR_OK) {
            fprintf(stderr, "bench_pet_gen: sub-program %d: %s\n", p, d.msg);
        } else {
            times[n++] = dt;
            total += dt;
            mutants += l.stats.mutants;
            states += l.stats.states;
            enums += l.stats.enumerations;
            candidates += l.stats.candidates;
            kept += l.n;
            truncated += l.stats.truncated;
            if (sp->n_nodes > largest) largest = sp->n_nodes;
            if (verbose)
                printf("  sub-program %d: %d nodes, %d outputs: %.3f s, %lld enumerations, %lld "
                       "states, %lld mutants%s\n",
                       p, sp->n_nodes, sp->n_outputs, dt, (long long)l.stats.enumerations,
                       (long long)l.stats.states, (long long)l.stats.mutants,
                       l.stats.truncated ? " (truncated)" : "");
            fflush(stdout);
        }
        pet_mutant_list_free(&l);
        ir_graph_free(prog);
    }
    qsort(times, (size_t)n, sizeof(double), ir_cmp_double);
    const char *base = strrchr(path, '/');
    printf("%-18s r=%d depth=%d: %d sub-programs (of %d; largest %d nodes), %.2f s: %.3f s mean, "
           "%.3f s median, %.3f s max per sub-program; %lld mutants (%.0f/s), %lld enumerations, "
           "%lld states (%.0f/s), %lld ops tried; %lld kept; %d truncated\n",
           base ? base + 1 : path, rounds, depth, n, s->n, largest, total, n ? total / n : 0.0,
           n ? times[n / 2] : 0.0, n ? times[n - 1] : 0.0, mutants,
           total > 0 ? (double)mutants / total : 0.0, enums, states,
           total > 0 ? (double)states / total : 0.0, candidates, kept, truncated);
    fflush(stdout);
    free(times);
    pet_split_free(s);
    ir_graph_free(g);
    return 0;
}

int main(int argc, char **argv) {
    const char *models[16];
    int n_models = 0, rounds[8] = {1, 4}, n_rounds = 2, max_sp = 0, depth = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc && n_models < 16) {
            models[n_models++] = argv[++i];
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            n_rounds = 0;
            for (char *t = strtok(argv[++i], ","); t && n_rounds < 8; t = strtok(NULL, ","))
                rounds[n_rounds++] = atoi(t);
        } else if (!strcmp(argv[i], "--max-subprogs") && i + 1 < argc) {
            max_sp = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--depth") && i + 1 < argc) {
            depth = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max-states") && i + 1 < argc) {
            max_states = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--verbose")) {
            verbose = true;
        } else {
            fprintf(stderr,
                    "usage: %s [--model PATH]... [--rounds R[,R...]] [--max-subprogs N] "
                    "[--depth D] [--max-states N] [--verbose]\n",
                    argv[0]);
            return 2;
        }
    }
    static char paths[2][1024];
    if (!n_models) {
        const char *root = getenv("MAGPIE_SOURCE_DIR");
        snprintf(paths[0], sizeof paths[0], "%s/tests/fixtures/structure/resnet50.onnx",
                 root ? root : ".");
        snprintf(paths[1], sizeof paths[1], "%s/tests/fixtures/structure/inception_v3.onnx",
                 root ? root : ".");
        models[0] = paths[0];
        models[1] = paths[1];
        n_models = 2;
    }
    ir_status st;
    ir_diag d = {{0}};
    prof_model *cost = prof_open("analytic:rtx3090", NULL, &st, &d);
    if (!cost) {
        fprintf(stderr, "bench_pet_gen: %s\n", d.msg);
        return 1;
    }
    int rc = 0;
    for (int r = 0; r < n_rounds; r++)
        for (int m = 0; m < n_models; m++)
            rc |= run_model(models[m], rounds[r], depth, max_sp, cost);
    prof_close(cost);
    return rc;
}
