/* bench-median.h - the median of a sample, for the benchmarks' side-by-side figures (timings
 * on a noisy machine are medians of alternating rounds). Sorts v in place. */
#ifndef MAGPIE_BENCH_MEDIAN_H
#define MAGPIE_BENCH_MEDIAN_H

#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
