/* bench_ckpt.c - the cost of a checkpoint's fingerprint set (the budget: checkpointing
 * under 2% of a search holding >= 10^6 fingerprints; report size and write time per million).
 *
 * Writes and reads back a checkpoint holding N random 64-bit fingerprints, two ways side by
 * side in one run: the FPST codec (radix sort, gaps, Rice code: ckpt_put_fpset) and the plain
 * array (8 bytes each, what a naive dump stores). Each way runs --reps times; the median is
 * printed. Write = encode + zstd + write + fsync + rename + directory fsync (ckpt_writer_commit);
 * read = open (read, checksums, zstd) + decode. The decoded set is checked against the input.
 *
 * usage: bench_ckpt [--n N] [--reps R] [--dir DIR] [--level L]
 *   (DIR: where the checkpoint goes, default /tmp; fsync cost depends on its file system) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* CPU time of this process: on a loaded machine, what the work costs without the waiting */
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what, const ir_diag *d) {
    fprintf(stderr, "bench_ckpt: %s: %s\n", what, d->msg);
    exit(1);
}

typedef struct result {
    double write_s, encode_s, read_s, write_cpu_s;
    size_t section_bytes, file_bytes;
} result;

/* One write + read of the set `src` (n); codec: 1 = ckpt_put_fpset, 0 = plain u64 array. */
static result run_once(const uint64_t *src, uint64_t *work, size_t n, int codec, const char *path,
                       int level) {
    result res = {0};
    ir_diag d;
    ir_status st;
    ckpt_meta m = {
        .model_path = "bench.onnx", .model_hash = 1, .options_hash = 2, .zstd_level = level};
    memcpy(work, src, n * sizeof *work); /* the explorer's copy of its set (xp_fpset_copy) */

    double c0 = cpu(), t0 = now();
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    if (!w) die("init", &d);
    ckpt_buf b = {0};
    if (codec) {
        ckpt_put_fpset(&b, work, n);
    } else {
        ckpt_put_varint(&b, n);
        for (size_t i = 0; i < n; i++) ckpt_put_u64(&b, work[i]);
    }
    res.section_bytes = b.len;
    double t1 = now();
    if (ckpt_writer_section_buf(w, CKPT_TAG_FPSET, &b, &d) != IR_OK) die("section", &d);
    if (ckpt_writer_commit(w, path, &d) != IR_OK) die("commit", &d);
    double t2 = now(), c2 = cpu();
    ckpt_writer_free(w);
    res.write_cpu_s = c2 - c0;
    res.encode_s = t1 - t0;
    res.write_s = t2 - t0;
    struct stat sb;
    if (stat(path, &sb) == 0) res.file_bytes = (size_t)sb.st_size;

    double t3 = now();
    ckpt_reader *r = ckpt_open(path, &st, &d);
    if (!r) die("open", &d);
    const uint8_t *p;
    size_t len;
    if (!ckpt_section(r, CKPT_TAG_FPSET, &p, &len)) {
        fprintf(stderr, "bench_ckpt: section missing\n");
        exit(1);
    }
    ckpt_cur c = ckpt_cur_make(p, len);
    uint64_t *got = NULL, cnt = 0;
    size_t got_n = 0;
    bool ok;
    if (codec) {
        ok = ckpt_get_fpset(&c, &got, &got_n);
    } else {
        ok = ckpt_get_varint(&c, &cnt) && cnt == n;
        got = malloc(n * sizeof *got);
        for (size_t i = 0; ok && i < n; i++) ok = ckpt_get_u64(&c, &got[i]);
        got_n = n;
    }
    double t4 = now();
    res.read_s = t4 - t3;
    /* work holds what was encoded (sorted in place by the codec), so compare with it */
    if (!ok || !ckpt_cur_done(&c) || got_n != n || memcmp(got, work, n * sizeof *got) != 0) {
        fprintf(stderr, "bench_ckpt: decoded set differs from the input\n");
        exit(1);
    }
    free(got);
    ckpt_close(r);
    return res;
}

int main(int argc, char **argv) {
    size_t n = 1000000;
    int reps = 5, level = 0;
    const char *dir = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--level") && i + 1 < argc)
            level = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ckpt [--n N] [--reps R] [--dir DIR] [--level L]\n");
            return 2;
        }
    }
    if (n == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_ckpt: --n must be > 0 and --reps 1..100\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_ckpt.%ld.mpck", dir, (long)getpid());
    uint64_t *src = malloc(n * sizeof *src), *work = malloc(n * sizeof *work);
    if (!src || !work) return 1;
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) src[i] = splitmix(&s);

    double mil = (double)n / 1e6;
    printf("checkpoint of %zu random 64-bit fingerprints (%zu raw bytes), zstd level %d, median of "
           "%d, in %s\n",
           n, n * 8, level ? level : CKPT_ZSTD_LEVEL_DEFAULT, reps, dir);
    printf("%-18s %11s %9s %12s %11s %15s %10s\n", "encoding", "file bytes", "bytes/fp",
           "encode ms/M", "write ms/M", "write cpu ms/M", "read ms/M");
    double *w = malloc(sizeof(double) * (size_t)reps), *e = malloc(sizeof(double) * (size_t)reps),
           *r = malloc(sizeof(double) * (size_t)reps), *wc = malloc(sizeof(double) * (size_t)reps);
    for (int codec = 1; codec >= 0; codec--) {
        result last = {0};
        for (int k = 0; k < reps; k++) {
            last = run_once(src, work, n, codec, path, level);
            w[k] = last.write_s;
            e[k] = last.encode_s;
            r[k] = last.read_s;
            wc[k] = last.write_cpu_s;
        }
        printf("%-18s %11zu %9.3f %12.1f %11.1f %15.1f %10.1f\n",
               codec ? "sorted gaps, Rice" : "plain u64 array", last.file_bytes,
               (double)last.file_bytes / (double)n, 1e3 * median(e, reps) / mil,
               1e3 * median(w, reps) / mil, 1e3 * median(wc, reps) / mil,
               1e3 * median(r, reps) / mil);
    }
    unlink(path);
    free(w);
    free(e);
    free(r);
    free(wc);
    free(src);
    free(work);
    return 0;
}
