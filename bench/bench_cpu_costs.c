/* bench_cpu_costs.c - how well the `cpu` cost model predicts the executor: for each model, the
 * predicted end-to-end latency (the sum of prof_node_seconds over the eager order, after
 * prof_profile_graph) against the executor's measured wall_seconds for the whole graph (rt_run,
 * median of several runs after a warm-up), side by side in one process.
 *
 * Each round profiles afresh (an in-memory database unless --profile-db is given) and then
 * measures, so that a load change on a shared machine hits both; the medians over rounds are
 * reported with their ratio. The goal (DESIGN.md, decision 7) is |predicted/measured - 1| <=
 * 25%, as the median over the numeric fixtures.
 *
 * Usage: bench_cpu_costs [--rounds R] [--runs N] [--profile-db FILE] [MODEL.onnx[@NAME=D,...]]...
 * Without models: the numeric fixtures resnet_small, transformer_encoder and unet_transpose, and
 * the full-size structure models resnet50, bert_base_encoder and unet (weights from the seed).
 * Paths are relative to $MAGPIE_SOURCE_DIR (default: the current directory). Thread counts
 * follow OMP_NUM_THREADS, as in the executor. Build Release: debug builds poison freed
 * buffers in rt_run, which the per-node timings do not include. */
#include "prof.h"
#include "rt.h"
#include "schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spec {
    const char *path;
    const char *shape; /* NAME=D0,D1,... or NULL */
    const char *group; /* "fixture" or "structure" */
} spec;

static const spec defaults[] = {
    {"tests/fixtures/numeric/resnet_small/model.onnx", NULL, "fixture"},
    {"tests/fixtures/numeric/transformer_encoder/model.onnx", "batch=2", "fixture"},
    {"tests/fixtures/numeric/unet_transpose/model.onnx", NULL, "fixture"},
    {"tests/fixtures/structure/resnet50.onnx", NULL, "structure"},
    {"tests/fixtures/structure/bert_base_encoder.onnx", NULL, "structure"},
    {"tests/fixtures/structure/unet.onnx", NULL, "structure"},
};
#define N_DEFAULTS ((int)(sizeof defaults / sizeof defaults[0]))
#define MAX_ROUNDS 32
#define MAX_RUNS 101

/* Parses "NAME=D0,D1,..." into name and shape (name points into buf). */
static bool parse_shape(const char *arg, char *buf, size_t n, ir_shape *s) {
    snprintf(buf, n, "%s", arg);
    char *eq = strrchr(buf, '=');
    if (!eq || eq == buf) return false;
    *eq = 0;
    s->rank = 0;
    for (char *p = eq + 1; *p && s->rank < IR_MAX_RANK;) {
        char *end;
        s->dims[s->rank++] = strtoll(p, &end, 10);
        if (end == p) return false;
        p = *end == ',' ? end + 1 : end;
    }
    return true;
}

typedef struct result {
    double predicted, measured;
    int nodes, signatures;
} result;

static int bench_one(const spec *sp, int rounds, int runs, const char *db, result *res) {
    const char *root = getenv("MAGPIE_SOURCE_DIR");
    char path[4096], name[256];
    snprintf(path, sizeof path, "%s%s%s", sp->path[0] == '/' ? "" : (root ? root : "."),
             sp->path[0] == '/' ? "" : "/", sp->path);
    ir_import_opts imp = {0};
    const char *names[1];
    ir_shape shapes[1];
    if (sp->shape) {
        if (!parse_shape(sp->shape, name, sizeof name, &shapes[0])) {
            fprintf(stderr, "bench_cpu_costs: bad shape '%s'\n", sp->shape);
            return 2;
        }
        names[0] = name;
        imp.n_shapes = 1;
        imp.shape_names = names;
        imp.shape_values = shapes;
    }
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(path, &imp, &st, &d);
    if (!g) {
        fprintf(stderr, "bench_cpu_costs: %s\n", d.msg);
        return 2;
    }
    double pred[MAX_ROUNDS], meas[MAX_ROUNDS], wall[MAX_RUNS];
    int code = 0;
    for (int r = 0; r < rounds; r++) {
        prof_options po = {.db_path = db, .no_db = db == NULL};
        prof_model *m = prof_open("cpu", &po, &st, &d);
        if (!m || prof_profile_graph(m, g, &d) != IR_OK) {
            fprintf(stderr, "bench_cpu_costs: %s\n", d.msg);
            prof_close(m);
            code = 1;
            goto out;
        }
        pred[r] = 0;
        /* views run no kernel in rt_run, and cost nothing here either (sched_node_seconds) */
        int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
        if (root) ir_graph_buffer_roots(g, root);
        for (int i = 0; i < g->n_nodes; i++)
            pred[r] += sched_node_seconds(m, g, root, &g->nodes[i]);
        free(root);
        prof_stats ps;
        prof_get_stats(m, &ps);
        res->signatures = ps.measured + ps.reused + ps.failed;
        prof_close(m);
        rt_options o = {.fill_missing_data = true};
        for (int k = -1; k < runs; k++) { /* one warm-up run */
            rt_result rr;
            if (rt_run(g, NULL, 0, &o, &rr, &d) != IR_OK) {
                fprintf(stderr, "bench_cpu_costs: %s\n", d.msg);
                code = 1;
                goto out;
            }
            if (k >= 0) wall[k] = rr.wall_seconds;
            rt_result_free(&rr);
        }
        meas[r] = prof_median(wall, runs);
    }
    res->predicted = prof_median(pred, rounds);
    res->measured = prof_median(meas, rounds);
    res->nodes = g->n_nodes;
out:
    ir_graph_free(g);
    return code;
}

int main(int argc, char **argv) {
    int rounds = 3, runs = 5;
    const char *db = NULL;
    spec user[64];
    int n_user = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--profile-db") == 0 && i + 1 < argc) {
            db = argv[++i];
        } else if (argv[i][0] == '-' || n_user == 64) {
            fprintf(stderr, "usage: bench_cpu_costs [--rounds R] [--runs N] [--profile-db FILE] "
                            "[MODEL.onnx[@NAME=D0,D1,...]]...\n");
            return 2;
        } else {
            char *at = strchr(argv[i], '@');
            if (at) *at = 0;
            user[n_user++] = (spec){argv[i], at ? at + 1 : NULL, "user"};
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench_cpu_costs: --rounds must be 1..%d and --runs 1..%d\n", MAX_ROUNDS,
                MAX_RUNS);
        return 2;
    }
    const spec *specs = n_user ? user : defaults;
    int n = n_user ? n_user : N_DEFAULTS;
    printf("%-58s %6s %6s %13s %13s %8s\n", "model", "nodes", "sigs", "predicted ms", "measured ms",
           "error");
    double err_fix[N_DEFAULTS], err_str[N_DEFAULTS], err_user[64];
    int n_fix = 0, n_str = 0, n_usr = 0;
    for (int i = 0; i < n; i++) {
        result r = {0};
        int code = bench_one(&specs[i], rounds, runs, db, &r);
        if (code) return code;
        double err = r.predicted / r.measured - 1;
        printf("%-58s %6d %6d %13.3f %13.3f %+7.1f%%\n", specs[i].path, r.nodes, r.signatures,
               1e3 * r.predicted, 1e3 * r.measured, 100 * err);
        fflush(stdout);
        if (strcmp(specs[i].group, "fixture") == 0)
            err_fix[n_fix++] = fabs(err);
        else if (strcmp(specs[i].group, "structure") == 0)
            err_str[n_str++] = fabs(err);
        else
            err_user[n_usr++] = fabs(err);
    }
    if (n_fix)
        printf("median |error|, numeric fixtures:  %.1f%%\n", 100 * prof_median(err_fix, n_fix));
    if (n_str)
        printf("median |error|, structure models:  %.1f%%\n", 100 * prof_median(err_str, n_str));
    if (n_usr)
        printf("median |error|:                    %.1f%%\n", 100 * prof_median(err_user, n_usr));
    return 0;
}
