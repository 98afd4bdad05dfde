/* bench_node_costs.c - each node's cost as the `cpu` cost model has it (prof_node_seconds after
 * prof_profile_graph, from the given profile database) against its time inside the executor's
 * runs of the whole graph (rt_options.node_seconds: median over the runs), and the totals. With
 * two models (an original and its plan) the runs alternate between them and the two ratios
 * (plan over original: predicted from the model, measured in the runs) are printed: what the
 * PET benchmark compares, node by node.
 *
 * Usage: bench_node_costs [--runs N] [--top K] [--profile-db FILE] MODEL.onnx [PLAN.onnx]
 * Without --profile-db an in-memory database is profiled afresh. Thread counts follow
 * OMP_NUM_THREADS (one thread: thread CPU time, as the cost model and `magpie run`). */
#include "prof.h"
#include "rt.h"
#include "schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 1001

typedef struct model {
    ir_graph *g;
    int *root;
    double *pred;    /* per node */
    double *samples; /* runs x n_nodes */
    double *inrun;   /* per node: the median */
    double pred_total, inrun_total, run_total;
    double *totals; /* per run: rt_result.cpu_seconds (wall with several threads) */
} model;

static void die(const char *what, const ir_diag *d) {
    fprintf(stderr, "bench_node_costs: %s: %s\n", what, d->msg);
    exit(1);
}

static void load(model *m, const char *path, prof_model *pm, int runs) {
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts imp = {0};
    memset(m, 0, sizeof *m);
    if (!(m->g = ir_onnx_load(path, &imp, &st, &d))) die(path, &d);
    if (prof_profile_graph(pm, m->g, &d) != IR_OK) die(path, &d);
    size_t nn = (size_t)m->g->n_nodes + 1;
    m->root = malloc(sizeof(int) * ((size_t)m->g->n_values + 1));
    m->pred = malloc(sizeof(double) * nn);
    m->inrun = malloc(sizeof(double) * nn);
    m->samples = malloc(sizeof(double) * nn * (size_t)runs);
    m->totals = malloc(sizeof(double) * (size_t)runs);
    if (!m->root || !m->pred || !m->inrun || !m->samples || !m->totals) {
        fprintf(stderr, "bench_node_costs: out of memory\n");
        exit(1);
    }
    ir_graph_buffer_roots(m->g, m->root);
    for (int i = 0; i < m->g->n_nodes; i++) {
        m->pred[i] = sched_node_seconds(pm, m->g, m->root, &m->g->nodes[i]);
        m->pred_total += m->pred[i];
    }
}

static void run(model *m, int r, bool timed) {
    ir_diag d = {{0}};
    int n = m->g->n_nodes;
    double *ns = timed ? &m->samples[(size_t)r * (size_t)n] : m->inrun;
    rt_options o = {.fill_missing_data = true, .node_seconds = ns};
    rt_result res;
    if (rt_run(m->g, NULL, 0, &o, &res, &d) != IR_OK) die("run", &d);
    if (timed) m->totals[r] = rt_kernel_threads() == 1 ? res.cpu_seconds : res.wall_seconds;
    rt_result_free(&res);
}

static void summarize(model *m, int runs) {
    int n = m->g->n_nodes;
    double *col = malloc(sizeof(double) * (size_t)runs);
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < runs; r++) col[r] = m->samples[(size_t)r * (size_t)n + (size_t)i];
        m->inrun[i] = prof_median(col, runs);
        m->inrun_total += m->inrun[i];
    }
    free(col);
    m->run_total = prof_median(m->totals, runs);
}

static int cmp_gap(const void *a, const void *b, void *ctx) {
    const model *m = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    double gx = m->inrun[x] - m->pred[x], gy = m->inrun[y] - m->pred[y];
    return gx < gy ? 1 : gx > gy ? -1 : x - y;
}

static void print_nodes(const char *path, model *m, int top) {
    int n = m->g->n_nodes, *idx = malloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_gap, m);
    printf("%s: %d nodes; the %d whose in-run time most exceeds the model's\n", path, n, top);
    printf("  %-48s %-14s %10s %10s %7s\n", "node", "op", "model us", "in-run us", "ratio");
    for (int k = 0; k < top && k < n; k++) {
        const ir_node *nd = &m->g->nodes[idx[k]];
        printf("  %-48.48s %-14.14s %10.2f %10.2f %7.2f\n", nd->name, ir_op_name(nd->op),
               1e6 * m->pred[idx[k]], 1e6 * m->inrun[idx[k]],
               m->pred[idx[k]] > 0 ? m->inrun[idx[k]] / m->pred[idx[k]] : 0);
    }
    printf("  total: model %.3f ms, in-run nodes %.3f ms, runs %.3f ms\n", 1e3 * m->pred_total,
           1e3 * m->inrun_total, 1e3 * m->run_total);
    free(idx);
}

int main(int argc, char **argv) {
    int runs = 31, top = 15;
    const char *db = NULL, *paths[2];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--top") == 0 && i + 1 < argc)
            top = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profile-db") == 0 && i + 1 < argc)
            db = argv[++i];
        else if (argv[i][0] != '-' && n_paths < 2)
            paths[n_paths++] = argv[i];
        else
            n_paths = -100;
    }
    if (n_paths < 1 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr,
                "usage: bench_node_costs [--runs N (1..%d)] [--top K] [--profile-db FILE] "
                "MODEL.onnx [PLAN.onnx]\n",
                MAX_RUNS);
        return 2;
    }
    ir_diag d = {{0}};
    ir_status st;
    prof_options po = {.db_path = db, .no_db = db == NULL};
    prof_model *pm = prof_open("cpu", &po, &st, &d);
    if (!pm) die("cpu cost model", &d);
    model m[2];
    for (int k = 0; k < n_paths; k++) load(&m[k], paths[k], pm, runs);
    for (int k = 0; k < n_paths; k++) run(&m[k], 0, false); /* warm-up */
    for (int r = 0; r < runs; r++)
        for (int j = 0; j < n_paths; j++) run(&m[(r + j) % n_paths], r, true);
    for (int k = 0; k < n_paths; k++) {
        summarize(&m[k], runs);
        print_nodes(paths[k], &m[k], top);
    }
    if (n_paths == 2)
        printf("plan / original: model %.3f, in-run nodes %.3f, runs %.3f\n",
               m[1].pred_total / m[0].pred_total, m[1].inrun_total / m[0].inrun_total,
               m[1].run_total / m[0].run_total);
    prof_close(pm);
    return 0;
}
