/* bench_randwire.c - the memory-minimizing order on RandWire networks (randwire.h) against the
 * orders of HMCOS's evaluation: for each configuration (1 cell x 32 nodes, 3 cells x 32 nodes,
 * 1 cell x 64 nodes) and seeds 1..N, the peak memory of
 *   - eager: the node index order (the order the cells were built in),
 *   - rpo: HMCOS's reverse post-order baseline (rw_reverse_post_order),
 *   - magpie: sched_order_memory with default options,
 * with magpie's reduction against rpo, its wall time and the maximum resident set size of the
 * process that ran it (each case runs in a fresh child process, getrusage). Peaks are
 * sched_memory_compute's; "act." columns leave out the weights (graph inputs flagged as
 * parameters), which are the same in every order and which HMCOS does not count.
 *
 * usage: bench_randwire [--seeds N] [--config 1x32|3x32|1x64] [--dense] [--save DIR]
 *                       [--budget SECONDS] [--exact N] [--beam W] [--states N]
 * --save also writes DIR/randwire_<config>_s<seed>.onnx; the last four set sched_dp_options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "randwire.h"
#include "schedule.h"

typedef struct row {
    int nodes;
    size_t params, eager, rpo, magpie;
    double seconds;
    long maxrss_kib;
    int parts, exact_parts, beam_parts;
    long states;
    int ok;
} row;

static size_t peak_of(const ir_graph *g, const int *order) {
    sched_memory m;
    ir_diag d = {{0}};
    if (sched_memory_compute(g, order, &m, &d) != IR_OK) return 0;
    size_t p = m.peak_bytes;
    sched_memory_free(&m);
    return p;
}

static sched_dp_options dp_opts; /* --budget, --exact, --beam, --states */

static void run_case(const rw_config *c, const char *save, const char *tag, row *r) {
    ir_diag d = {{0}};
    memset(r, 0, sizeof *r);
    ir_graph *g = rw_build(c, &d);
    if (!g) {
        fprintf(stderr, "bench_randwire: %s\n", d.msg);
        return;
    }
    if (save) {
        char path[1024];
        snprintf(path, sizeof path, "%s/randwire_%s_s%llu.onnx", save, tag,
                 (unsigned long long)c->seed);
        if (ir_onnx_save(g, path, &d) != IR_OK) fprintf(stderr, "bench_randwire: %s\n", d.msg);
    }
    int *rpo = rw_reverse_post_order(g), *mo = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    sched_dp_stats st;
    if (rpo && mo && sched_order_memory(g, &dp_opts, mo, &st, &d) == IR_OK) {
        r->nodes = g->n_nodes;
        r->params = rw_param_bytes(g);
        r->eager = peak_of(g, NULL);
        r->rpo = peak_of(g, rpo);
        r->magpie = peak_of(g, mo);
        r->seconds = st.seconds;
        r->parts = st.parts;
        r->exact_parts = st.exact_parts;
        r->beam_parts = st.beam_parts;
        r->states = st.states;
        r->ok = sched_order_valid(g, rpo, g->n_nodes) && sched_order_valid(g, mo, g->n_nodes);
    } else {
        fprintf(stderr, "bench_randwire: %s\n", d.msg);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->maxrss_kib = ru.ru_maxrss;
    free(rpo);
    free(mo);
    ir_graph_free(g);
}

/* Runs one case in a child process so that its max RSS is its own. */
static int run_isolated(const rw_config *c, const char *save, const char *tag, row *r) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        row cr;
        run_case(c, save, tag, &cr);
        ssize_t w = write(fd[1], &cr, sizeof cr);
        _exit(w == (ssize_t)sizeof cr ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], r, sizeof *r);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return got == (ssize_t)sizeof *r && r->ok ? 0 : -1;
}

static double pct(size_t a, size_t b) {
    return b ? 100.0 * ((double)a - (double)b) / (double)b : 0;
}
static double mib(size_t b) {
    return (double)b / (1024.0 * 1024.0);
}

int main(int argc, char **argv) {
    int seeds = 10;
    const char *only = NULL, *save = NULL;
    bool dense = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
            dp_opts.time_budget_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--exact") && i + 1 < argc)
            dp_opts.exact_max_nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--beam") && i + 1 < argc)
            dp_opts.beam_width = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--states") && i + 1 < argc)
            dp_opts.max_states = atol(argv[++i]);
        else if (!strcmp(argv[i], "--save") && i + 1 < argc)
            save = argv[++i];
        else if (!strcmp(argv[i], "--dense"))
            dense = true;
        else {
            fprintf(stderr,
                    "usage: bench_randwire [--seeds N] [--config 1x32|3x32|1x64] [--budget S] "
                    "[--exact N] [--beam W] [--states N] [--dense] [--save DIR]\n");
            return 2;
        }
    }
    static const struct {
        const char *tag;
        int stages, nodes;
    } cfgs[] = {{"1x32", 1, 32}, {"3x32", 3, 32}, {"1x64", 1, 64}};
    int failures = 0;
    printf("| config | seed | nodes | eager MiB | rpo MiB | magpie MiB | vs rpo | act. vs rpo | "
           "time s | max RSS MiB | parts exact/beam | states |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n");
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        if (only && strcmp(only, cfgs[ci].tag)) continue;
        double sum = 0, sum_act = 0, worst = -1e9, best = 1e9, tmax = 0, tsum = 0;
        long rss = 0;
        int n_ok = 0;
        for (int s = 1; s <= seeds; s++) {
            rw_config c = rw_default(cfgs[ci].stages, cfgs[ci].nodes, (uint64_t)s);
            c.dense = dense;
            row r;
            if (run_isolated(&c, save, cfgs[ci].tag, &r) != 0) {
                printf("| %s | %d | failed |\n", cfgs[ci].tag, s);
                failures++;
                continue;
            }
            double red = pct(r.magpie, r.rpo), act = pct(r.magpie - r.params, r.rpo - r.params);
            printf(
                "| %s | %d | %d | %.2f | %.2f | %.2f | %+.1f%% | %+.1f%% | %.2f | %.0f | %d/%d | "
                "%ld |\n",
                cfgs[ci].tag, s, r.nodes, mib(r.eager), mib(r.rpo), mib(r.magpie), red, act,
                r.seconds, (double)r.maxrss_kib / 1024.0, r.exact_parts, r.beam_parts, r.states);
            fflush(stdout);
            sum += red;
            sum_act += act;
            if (act > worst) worst = act;
            if (act < best) best = act;
            if (r.seconds > tmax) tmax = r.seconds;
            tsum += r.seconds;
            if (r.maxrss_kib > rss) rss = r.maxrss_kib;
            n_ok++;
        }
        if (n_ok)
            fprintf(stderr,
                    "%s: mean vs rpo %+.1f%% (activations %+.1f%%, best %+.1f%%, worst %+.1f%%), "
                    "time mean %.2f s max %.2f s, max RSS %.0f MiB\n",
                    cfgs[ci].tag, sum / n_ok, sum_act / n_ok, best, worst, tsum / n_ok, tmax,
                    (double)rss / 1024.0);
    }
    return failures ? 1 : 0;
}
