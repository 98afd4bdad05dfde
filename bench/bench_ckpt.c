/* bench_ckpt.c - the cost of a checkpoint's fingerprint set (the budget: checkpointing
 * under 2% of a search holding >= 10^6 fingerprints; report size and write time per million).
 *
 * Writes and reads back a checkpoint holding N random 64-bit fingerprints, two ways side by
 * side in one run: the FPST codec (radix sort, gaps, Rice code: ckpt_put_fpset) and the plain
 * array (8 bytes each, what a naive dump stores). Each way runs --reps times; the median is
 * printed. Write = encode + zstd + write + fsync + rename + directory fsync (ckpt_writer_commit);
 * read = open (read, checksums, zstd) + decode. The decoded set is checked against the input.
 *
 * --search: a whole search checkpoint instead, as `magpie optimize --checkpoint` writes it
 * (ckpt_put_args, ckpt_put_profile, ckpt_put_snapshot): N fingerprints, a frontier of K states
 * (--frontier, default 100000) plus K/2 ancestors with random rewrites and evaluations, 16
 * workers, 300 profile entries. Write = encode all sections + commit (zstd, write, fsync, rename,
 * directory fsync); read = open + ckpt_get_snapshot (which runs xs_snapshot_check).
 *
 * usage: bench_ckpt [--n N] [--reps R] [--dir DIR] [--level L] [--search [--frontier K]]
 *   (DIR: where the checkpoint goes, default /tmp; fsync cost depends on its file system) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt-search.h"
#include "bench-median.h"

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

    double c0 = cpu(), t0 = ir_now_seconds();
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
    double t1 = ir_now_seconds();
    if (ckpt_writer_section_buf(w, CKPT_TAG_FPSET, &b, &d) != IR_OK) die("section", &d);
    if (ckpt_writer_commit(w, path, &d) != IR_OK) die("commit", &d);
    double t2 = ir_now_seconds(), c2 = cpu();
    ckpt_writer_free(w);
    res.write_cpu_s = c2 - c0;
    res.encode_s = t1 - t0;
    res.write_s = t2 - t0;
    struct stat sb;
    if (stat(path, &sb) == 0) res.file_bytes = (size_t)sb.st_size;

    double t3 = ir_now_seconds();
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
    double t4 = ir_now_seconds();
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

/* ---------------------------------------------------------------- --search */

/* A search snapshot shaped like a long run's: n_fps fingerprints, a frontier of k states and k/2
 * interior ancestors (parents a few hundred states back), rewrites over a graph of a few
 * thousand nodes. */
static xs_snapshot search_snapshot(size_t n_fps, uint32_t k, uint64_t seed) {
    xs_snapshot s = {0};
    uint32_t n = k + k / 2 + 1;
    s.n_states = n;
    s.states = calloc(n, sizeof *s.states);
    s.frontier = calloc(k ? k : 1, sizeof *s.frontier);
    s.fps = malloc((n_fps ? n_fps : 1) * sizeof *s.fps);
    s.n_workers = 16;
    s.worker_seq = calloc(16, sizeof *s.worker_seq);
    s.worker_rng = calloc(16, sizeof *s.worker_rng);
    if (!s.states || !s.frontier || !s.fps || !s.worker_seq || !s.worker_rng) {
        fprintf(stderr, "bench_ckpt: out of memory\n");
        exit(1);
    }
    s.start_nodes = 3000;
    s.eager_peak = s.start_peak = (uint64_t)6 << 30;
    s.eager_lat = s.start_lat = 0.35;
    s.states[0] = (xs_snap_state){
        .parent = -1, .peak = s.start_peak, .lat = s.start_lat, .fp = splitmix(&seed)};
    for (uint32_t i = 1; i < n; i++) {
        uint64_t r = splitmix(&seed);
        uint32_t back = 1 + (uint32_t)(r % 300);
        int kind = (int)((r >> 16) % RW_KIND_COUNT);
        s.states[i] = (xs_snap_state){.parent = (int32_t)(i > back ? i - back : 0),
                                      .rw = {.kind = kind,
                                             .node_id = (uint32_t)((r >> 24) % 3000),
                                             .value = kind == RW_SUBST
                                                          ? (int)((r >> 40) % RW_SUBST_RULE_COUNT)
                                                          : (int)((r >> 40) % 3),
                                             .user_id = (uint32_t)((r >> 44) % 3000)},
                                      .peak = s.start_peak - (r >> 34),
                                      .lat = s.start_lat * (1.0 + (double)(r >> 54) / 4096.0),
                                      .fp = splitmix(&seed)};
    }
    s.n_frontier = k;
    for (uint32_t i = 0; i < k; i++)
        s.frontier[i] = (xs_snap_item){.state = (int32_t)(n - k + i),
                                       .seq = 10 * (uint64_t)i + 3,
                                       .worker = (int32_t)(i % 16),
                                       .unfinished = i < 16};
    s.best = (int32_t)(n - 1);
    s.n_fps = n_fps;
    for (size_t i = 0; i < n_fps; i++) s.fps[i] = splitmix(&seed);
    for (int i = 0; i < 16; i++) {
        s.worker_seq[i] = 10 * (uint64_t)k + (uint64_t)i;
        s.worker_rng[i] = splitmix(&seed);
    }
    s.counters.expanded = n_fps / 4;
    s.counters.generated = n_fps * 3;
    s.counters.pushed = n_fps;
    s.elapsed_s = 3600;
    return s;
}

static int run_search(size_t n, uint32_t k, int reps, const char *path, int level) {
    const char *args[] = {"model.onnx", "--train", "--limit",      "0.5",
                          "--time",     "8h",      "--checkpoint", "run.mpck"};
    prof_snapshot prof = {.measured = true, .step_s = 2e-7, .n_entries = 300};
    snprintf(prof.device, sizeof prof.device, "cuda");
    snprintf(prof.detail, sizeof prof.detail, "cuda: NVIDIA H200, sm_90");
    prof.fallback = *prof_target_find("h200");
    prof.fallback.name = prof.fallback.description = NULL;
    prof.entries = calloc(prof.n_entries, sizeof *prof.entries);
    for (size_t i = 0; i < prof.n_entries; i++)
        prof.entries[i] = (prof_snapshot_entry){(i + 1) << 50, 1e-5 * (double)(i + 1), 5};
    xs_snapshot s = search_snapshot(n, k, 7);
    ckpt_meta m = {
        .model_path = "model.onnx", .model_hash = 1, .options_hash = 2, .zstd_level = level};
    double *w = malloc(sizeof(double) * (size_t)reps), *wc = malloc(sizeof(double) * (size_t)reps),
           *rd = malloc(sizeof(double) * (size_t)reps);
    size_t file_bytes = 0;
    ir_diag d = {{0}};
    ir_status st;
    for (int rep = 0; rep < reps; rep++) {
        double c0 = cpu(), t0 = ir_now_seconds();
        ckpt_writer *wr = ckpt_writer_init(&m, &st, &d);
        if (!wr) die("init", &d);
        if (ckpt_put_args(wr, 8, args, &d) != IR_OK || ckpt_put_profile(wr, &prof, &d) != IR_OK ||
            ckpt_put_snapshot(wr, &s, &d) != IR_OK)
            die("encode", &d);
        if (ckpt_writer_commit(wr, path, &d) != IR_OK) die("commit", &d);
        w[rep] = ir_now_seconds() - t0;
        wc[rep] = cpu() - c0;
        ckpt_writer_free(wr);
        struct stat sb;
        if (stat(path, &sb) == 0) file_bytes = (size_t)sb.st_size;

        double t3 = ir_now_seconds();
        ckpt_reader *r = ckpt_open(path, &st, &d);
        if (!r) die("open", &d);
        xs_snapshot got;
        if (ckpt_get_snapshot(r, &got, &d) != IR_OK) die("decode", &d);
        rd[rep] = ir_now_seconds() - t3;
        if (got.n_fps != s.n_fps || got.n_states != s.n_states || got.n_frontier != k) {
            fprintf(stderr, "bench_ckpt: decoded snapshot differs from the input\n");
            exit(1);
        }
        xs_snapshot_free(&got);
        ckpt_close(r);
    }
    double mil = (double)n / 1e6;
    printf("search checkpoint: %zu fingerprints, %u states (%u in the frontier), 16 workers, "
           "zstd level %d, median of %d, in %s\n",
           n, s.n_states, k, level ? level : CKPT_ZSTD_LEVEL_DEFAULT, reps, path);
    printf("%12s %9s %11s %11s %15s %10s\n", "file bytes", "bytes/fp", "MB per M fp", "write ms/M",
           "write cpu ms/M", "read ms/M");
    printf("%12zu %9.3f %11.2f %11.1f %15.1f %10.1f\n", file_bytes, (double)file_bytes / (double)n,
           (double)file_bytes / 1e6 / mil, 1e3 * median(w, reps) / mil,
           1e3 * median(wc, reps) / mil, 1e3 * median(rd, reps) / mil);
    unlink(path);
    free(w);
    free(wc);
    free(rd);
    xs_snapshot_free(&s);
    prof_snapshot_free(&prof);
    return 0;
}

int main(int argc, char **argv) {
    size_t n = 1000000;
    int reps = 5, level = 0;
    const char *dir = "/tmp";
    bool search = false;
    uint32_t frontier = 100000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--level") && i + 1 < argc)
            level = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--search"))
            search = true;
        else if (!strcmp(argv[i], "--frontier") && i + 1 < argc)
            frontier = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_ckpt [--n N] [--reps R] [--dir DIR] [--level L] "
                            "[--search [--frontier K]]\n");
            return 2;
        }
    }
    if (n == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_ckpt: --n must be > 0 and --reps 1..100\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_ckpt.%ld.mpck", dir, (long)getpid());
    if (search) return run_search(n, frontier, reps, path, level);
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
