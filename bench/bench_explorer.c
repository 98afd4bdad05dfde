/* bench_explorer.c - states per second of the memory optimizer's search (xs_search) with 1 and
 * with 2 threads, side by side in one run, on a training fixture (default cnn_bn_train) under the
 * analytic rtx3090 model, --lat-limit 1.10, every rule family, seed 1. Each run stops at the
 * same number of distinct states (the fingerprint budget, --states), so the two thread counts do
 * about the same work; states/s = states explored (every child evaluated, duplicates included,
 * plus the start) / the search's wall time. The runs alternate
 * (1, 2, 1, 2, ...) and the medians of --reps runs are compared; the goal is a 2-thread
 * ratio of at least 1.7. A control runs two independent 1-thread searches at once (two
 * pthreads): their summed rate is what two cores give right now, so on a shared machine the
 * 2-thread search's efficiency is its rate over that sum. Also prints the 1-thread run's time per
 * phase (where the search spends its time: the share of hashing decides whether incremental
 * hashing pays).
 *
 * With --scaling LIST (e.g. 1,2,4,8,16) it instead measures how the search scales on a machine
 * with that many cores: for each thread count in LIST, alternating, --reps runs of the same
 * budget; it prints the median states/s and the speedup over the first count.
 *
 * usage: bench_explorer [--model NAME] [--states K] [--reps N] [--max-frontier N]
 *                       [--scaling LIST] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explorer.h"
#include "prof.h"

static void die(const char *what, const ir_diag *d) {
    fprintf(stderr, "bench_explorer: %s: %s\n", what, d->msg);
    exit(1);
}

typedef struct job {
    const ir_graph *g;
    xs_options o;
    double rate;
    ir_status st;
    ir_diag d;
} job;

static double run_search(const ir_graph *g, const xs_options *o, ir_status *st, ir_diag *d,
                         xs_result *keep) {
    xs_result res;
    if ((*st = xs_search(g, o, &res, d)) != IR_OK) return 0;
    double rate = (double)(res.stats.total.generated + 1) / res.search_seconds;
    if (keep)
        *keep = res;
    else
        xs_result_free(&res);
    return rate;
}

/* --scaling: the median states/s of each thread count in list, runs alternating. */
static int scaling(const ir_graph *g, const char *model, const xs_options *base, const char *list,
                   int reps) {
    int threads[16], n = 0;
    for (const char *p = list; *p && n < 16;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > 1024) return 2;
        threads[n++] = (int)t;
        p = *end == ',' ? end + 1 : end;
    }
    if (n == 0) return 2;
    double rate[16][99];
    uint64_t explored[16] = {0};
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < n; k++) {
            xs_options o = *base;
            o.threads = threads[k];
            xs_result res;
            ir_status st;
            ir_diag d = {{0}};
            rate[k][r] = run_search(g, &o, &st, &d, &res);
            if (st != IR_OK) die("search", &d);
            explored[k] = res.stats.total.generated + 1;
            fprintf(stderr, "  rep %d, %2d thread(s): %llu states in %.2f s\n", r, threads[k],
                    (unsigned long long)explored[k], res.search_seconds);
            xs_result_free(&res);
        }
    }
    printf("model %s (%d nodes), %zu distinct states per run, median of %d\n", model, g->n_nodes,
           base->max_states, reps);
    printf("threads  states/s  speedup  efficiency\n");
    double first = 0;
    for (int k = 0; k < n; k++) {
        qsort(rate[k], (size_t)reps, sizeof(double), ir_cmp_double);
        double med = rate[k][reps / 2];
        if (k == 0) first = med;
        double sp = med / first;
        printf("%7d  %8.1f  %7.2f  %10.2f\n", threads[k], med, sp, sp * threads[0] / threads[k]);
    }
    return 0;
}

static void *job_main(void *arg) {
    job *j = arg;
    j->rate = run_search(j->g, &j->o, &j->st, &j->d, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    const char *model = "cnn_bn_train";
    size_t states = 3000, max_frontier = 100000;
    int reps = 3;
    const char *scale = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--states") && i + 1 < argc)
            states = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-frontier") && i + 1 < argc)
            max_frontier = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--scaling") && i + 1 < argc)
            scale = argv[++i];
        else {
            fprintf(stderr, "usage: bench_explorer [--model NAME] [--states K] [--reps N] "
                            "[--max-frontier N] [--scaling LIST]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 99 || states < 2) return 2;
    char path[512];
    snprintf(path, sizeof path, "tests/fixtures/numeric/%s/model.onnx", model);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *fwd = ir_onnx_load(path, NULL, &st, &d);
    if (!fwd) die(path, &d);
    ir_graph *g = ir_build_training(fwd, &(ir_train_opts){0}, &st, &d);
    ir_graph_free(fwd);
    if (!g) die("training graph", &d);
    if (ir_fold_constants(g, &d) != IR_OK) die("fold", &d);
    prof_options po = {.no_db = true};
    prof_model *cost = prof_open("analytic:rtx3090", &po, &st, &d);
    if (!cost || prof_profile_graph(cost, g, &d) != IR_OK) die("cost model", &d);
    sched_sim eager = {0};
    if (sched_simulate(g, NULL, cost, &eager, &d) != IR_OK) die("simulate", &d);

    if (scale) {
        xs_options o = {.mode = XS_MODE_LAT,
                        .limit = 1.10 * eager.latency_s,
                        .rules = XS_RULE_ALL,
                        .seed = 1,
                        .max_states = states,
                        .max_frontier = max_frontier,
                        .cost = cost};
        int rc = scaling(g, model, &o, scale, reps);
        sched_sim_free(&eager);
        prof_close(cost);
        ir_graph_free(g);
        return rc;
    }
    double rate[3][99];
    double phase[XS_PHASE_COUNT] = {0};
    uint64_t explored[2] = {0, 0};
    for (int r = 0; r < reps; r++) {
        for (int t = 0; t < 2; t++) {
            xs_options o = {.mode = XS_MODE_LAT,
                            .limit = 1.10 * eager.latency_s,
                            .rules = XS_RULE_ALL,
                            .threads = t + 1,
                            .seed = 1,
                            .max_states = states,
                            .max_frontier = max_frontier,
                            .cost = cost};
            xs_result res;
            rate[t][r] = run_search(g, &o, &st, &d, &res);
            if (st != IR_OK) die("search", &d);
            explored[t] = res.stats.total.generated + 1;
            if (t == 0 && r == 0) memcpy(phase, res.phase_seconds, sizeof phase);
            fprintf(stderr, "  rep %d, %d thread(s): %llu states in %.2f s, best peak %.3fx\n", r,
                    t + 1, (unsigned long long)explored[t], res.search_seconds,
                    (double)res.best_peak_bytes / (double)eager.peak_device_bytes);
            xs_result_free(&res);
        }
        /* the control: two 1-thread searches at once */
        job jobs[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            jobs[k] = (job){.g = g,
                            .o = {.mode = XS_MODE_LAT,
                                  .limit = 1.10 * eager.latency_s,
                                  .rules = XS_RULE_ALL,
                                  .threads = 1,
                                  .seed = 1,
                                  .max_states = states,
                                  .max_frontier = max_frontier,
                                  .cost = cost}};
            if (pthread_create(&th[k], NULL, job_main, &jobs[k]) != 0) return 1;
        }
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        for (int k = 0; k < 2; k++)
            if (jobs[k].st != IR_OK) die("control search", &jobs[k].d);
        rate[2][r] = jobs[0].rate + jobs[1].rate;
        fprintf(stderr, "  rep %d, two 1-thread searches at once: %.1f + %.1f states/s\n", r,
                jobs[0].rate, jobs[1].rate);
    }
    double med[3];
    for (int t = 0; t < 3; t++) {
        qsort(rate[t], (size_t)reps, sizeof(double), ir_cmp_double);
        med[t] = rate[t][reps / 2];
    }
    printf("model %s (%d nodes), %zu distinct states per run (%llu and %llu explored), median "
           "of %d\n",
           model, g->n_nodes, states, (unsigned long long)explored[0],
           (unsigned long long)explored[1], reps);
    printf("1 thread:  %8.1f states/s\n", med[0]);
    printf("2 threads: %8.1f states/s\n", med[1]);
    printf("ratio 2/1: %.2f\n", med[1] / med[0]);
    printf("control, two 1-thread searches at once: %.1f states/s in all (%.2f of 1 thread)\n",
           med[2], med[2] / med[0]);
    printf("2 threads over the control: %.2f\n", med[1] / med[2]);
    double total = 0;
    for (int k = 0; k < XS_PHASE_COUNT; k++) total += phase[k];
    printf("1-thread time by phase:");
    for (int k = 0; k < XS_PHASE_COUNT; k++)
        printf(" %s %.1f%%", xs_phase_name(k), total > 0 ? 100.0 * phase[k] / total : 0.0);
    printf("\n");
    sched_sim_free(&eager);
    prof_close(cost);
    ir_graph_free(g);
    return 0;
}
