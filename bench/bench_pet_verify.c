/* bench_pet_verify.c - throughput of PET's CPU verifier (issue 7: box-tests per second on 2
 * threads), on ResNet- and CSRNet-sized convolution mutants, side by side in one run:
 *  - fig1: the paper's figure 1 at ResNet's 56x56 stage: a 3x3 conv (64 -> 64 channels, pads 1)
 *    over a batch of 2, against the mutant that lays the two images side by side (reshape,
 *    transpose, reshape, conv, and back): 18 cells, 6 failing;
 *  - fig3: a dilated 3x3 conv (dilation 2, pads 2, 64 -> 64 channels, 56x56), against the regular
 *    conv on the input rearranged phase-major (figure 3): the re-merged phases cut every row and
 *    column into its own box, 3136 cells, the seams failing.
 * Each case runs with t = 4 on 1 and 2 threads, evaluated lazily (the default: only what the
 * tested positions need) and whole-tensor (pet_options.dense, the paper's evaluation); --reps
 * runs each (median printed). box-tests/s = box-tests / wall time of pet_verify (compilation,
 * box propagation, evaluation and comparison).
 *
 * usage: bench_pet_verify [--reps R] [--tests T] [--quick] [--only fig1|fig3] [--lazy-only]
 *   (--quick: 16 channels, 28x28; --only and --lazy-only select rows, for profiling) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pet-corpus.h"
#include "pet.h"

static void die(const char *what, const ir_diag *d) {
    fprintf(stderr, "bench_pet_verify: %s: %s\n", what, d->msg);
    exit(1);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reps = 3, tests = 4;
    bool quick = false, lazy_only = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tests") && i + 1 < argc)
            tests = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--lazy-only"))
            lazy_only = true;
        else {
            fprintf(stderr, "usage: bench_pet_verify [--reps R] [--tests T] [--quick] [--only "
                            "fig1|fig3] [--lazy-only]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    const int64_t C = quick ? 16 : 64, HW = quick ? 28 : 56;
    printf("PET verifier, %lld channels, %lldx%lld, t = %d, median of %d\n", (long long)C,
           (long long)HW, (long long)HW, tests, reps);
    printf("%-5s %-6s %7s %6s %7s %8s %9s %10s %11s %12s\n", "case", "eval", "threads", "cells",
           "failed", "probes", "box-tests", "seconds", "eval s", "box-tests/s");
    for (int c = 0; c < 2; c++) {
        if (only && strcmp(only, c == 0 ? "fig1" : "fig3")) continue;
        ir_graph *o, *m;
        (c == 0 ? pc_figure1 : pc_figure3)(C, HW, HW, &o, &m);
        for (int dense = 0; dense < (lazy_only ? 1 : 2); dense++)
            for (int th = 1; th <= 2; th++) {
                double sec[64], ev[64];
                pet_result r = {0};
                for (int k = 0; k < reps && k < 64; k++) {
                    pet_result_free(&r);
                    pet_options opt = {.tests = tests,
                                       .seed = 1 + (uint64_t)k,
                                       .threads = th,
                                       .dense = dense != 0};
                    ir_diag d = {{0}};
                    if (pet_verify(o, m, &opt, &r, &d) != IR_OK) die("verify", &d);
                    sec[k] = r.seconds;
                    ev[k] = r.eval_seconds;
                }
                int n = reps < 64 ? reps : 64;
                qsort(sec, (size_t)n, sizeof *sec, cmp_dbl);
                qsort(ev, (size_t)n, sizeof *ev, cmp_dbl);
                double s = sec[n / 2], e = ev[n / 2];
                printf("%-5s %-6s %7d %6lld %7lld %8lld %9lld %10.4f %11.4f %12.0f\n",
                       c == 0 ? "fig1" : "fig3", dense ? "whole" : "lazy", th,
                       (long long)r.outputs[0].cells, (long long)r.outputs[0].n_failed,
                       (long long)r.probes, (long long)r.box_tests, s, e, (double)r.box_tests / s);
                fflush(stdout);
                pet_result_free(&r);
            }
        ir_graph_free(o);
        ir_graph_free(m);
    }
    return 0;
}
