/* test_resume_cli.c - `magpie optimize --checkpoint` and `magpie resume` as scripts and batch
 * schedulers see them, on cnn_bn_train's training graph (a few hundred states a second in a
 * Debug build):
 *  - determinism: one thread, seed 7, K states in one run, against K/2 states with a checkpoint
 *    and a resume to K: the same optimized.onnx, byte for byte, and the same figures;
 *  - SIGUSR1 replaces the checkpoint while the search goes on;
 *  - SIGTERM and SIGINT: exit 4 within 10 s, a plan and a checkpoint that resume continues;
 *  - bad checkpoints (truncated, a bit flipped, wrong magic, wrong version with a valid header
 *    checksum, other options, another model): exit 2 naming the cause, the file untouched,
 *    nothing written;
 *  - MAGPIE_CKPT_FAIL_BEFORE_RENAME=1: the previous checkpoint intact, exit 2, and the next
 *    run removes the stale temporary file;
 *  - a model that moved: refused at its recorded path, accepted with --model;
 *  - usage errors of the new options.
 * The binary (MAGPIE_BIN, set by ctest) runs through popen, or fork/exec when it must be
 * signalled. */
#include "test-util.h"

#include <dirent.h>
#include <sys/stat.h>

#include "ckpt.h"

#define MODEL "tests/fixtures/numeric/cnn_bn_train/model.onnx"
#define SEARCH "--train --lat-limit 1.10 --seed 7 --time 60"

/* Names in dir that start with prefix. */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void expect_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_all(a, &na), *y = tu_read_all(b, &nb);
    if (!x || !y) fail_msg("cannot read %s or %s", a, b);
    if (na != nb || memcmp(x, y, na) != 0)
        fail_msg("%s (%zu bytes) differs from %s (%zu)", a, na, b, nb);
    free(x);
    free(y);
}

/* A resume that must succeed: exit 0 or 3 (the limit may not be met) and resumes == 1. */
static void expect_resumed(const tu_proc *p, const char *what) {
    if (p->rc != 0 && p->rc != 3) fail_msg("%s: exit %d: %s", what, p->rc, p->err);
    assert_true(p->out[0] == '{');
    if (tu_json_num(p->out, "resumes") != 1) fail_msg("%s: %s", what, p->out);
}

/* ---------------------------------------------------------------- determinism */

static void test_resume_is_deterministic(void **state) {
    (void)state;
    enum { K = 400 };
    /* Not states_explored nor states_duplicate: the state whose expansion the budget cut
     * short is expanded again on resume, and the children it had emitted count again (as
     * duplicates now). */
    static const char *const keys[] = {"best_peak_bytes",
                                       "best_latency_seconds",
                                       "search_best_peak_bytes",
                                       "search_best_latency_seconds",
                                       "states_expanded",
                                       "nodes",
                                       "peak_ratio",
                                       "latency_ratio"};
    enum { NK = sizeof keys / sizeof keys[0] };
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[2][256], fp[2][32];
    double v[2][NK];
    tu_make_dir(dir, sizeof dir, "resume");
    /* one run to K */
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --threads 1 --max-states %d -o %s/one --json --quiet",
             K, dir);
    tu_magpie(p, args);
    if (p->rc != 0 && p->rc != 3) fail_msg("one run: exit %d: %s", p->rc, p->err);
    assert_non_null(strstr(p->out, "\"stop_reason\":\"states-full\""));
    assert_true(tu_json_num(p->out, "resumes") == 0);
    assert_non_null(strstr(p->out, "\"checkpoint\":null"));
    for (int i = 0; i < NK; i++) v[0][i] = tu_json_num(p->out, keys[i]);
    tu_json_str(p->out, "best_fingerprint", fp[0], sizeof fp[0]);
    /* K/2 with a checkpoint, then resume to K */
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --threads 1 --max-states %d --checkpoint %s/c -o "
             "%s/half --json --quiet",
             K / 2, dir, dir);
    tu_magpie(p, args);
    if (p->rc != 0 && p->rc != 3) fail_msg("half run: exit %d: %s", p->rc, p->err);
    assert_non_null(strstr(p->out, "\"stop_reason\":\"states-full\""));
    char *ck = strstr(p->out, "\"checkpoint\":{");
    assert_non_null(ck);
    assert_true(tu_json_num(ck, "written") >= 2); /* the first one and the final one */
    assert_true(tu_json_num(ck, "failed") == 0);
    snprintf(path[0], sizeof path[0], "%s/c", dir);
    struct stat sb;
    assert_int_equal(stat(path[0], &sb), 0);
    assert_true(tu_json_num(ck, "last_bytes") == (double)sb.st_size);
    snprintf(args, sizeof args, "resume %s/c --max-states %d -o %s/resumed --json --quiet", dir, K,
             dir);
    tu_magpie(p, args);
    expect_resumed(p, "resume");
    assert_non_null(strstr(p->out, "\"stop_reason\":\"states-full\""));
    for (int i = 0; i < NK; i++) v[1][i] = tu_json_num(p->out, keys[i]);
    tu_json_str(p->out, "best_fingerprint", fp[1], sizeof fp[1]);
    for (int i = 0; i < NK; i++)
        if (v[0][i] != v[1][i])
            fail_msg("%s: one run %.17g, resumed %.17g", keys[i], v[0][i], v[1][i]);
    assert_string_equal(fp[0], fp[1]);
    snprintf(path[0], sizeof path[0], "%s/one/optimized.onnx", dir);
    snprintf(path[1], sizeof path[1], "%s/resumed/optimized.onnx", dir);
    expect_same_file(path[0], path[1]);
    snprintf(path[0], sizeof path[0], "%s/one/schedule.json", dir);
    snprintf(path[1], sizeof path[1], "%s/resumed/schedule.json", dir);
    expect_same_file(path[0], path[1]);
    tu_remove_dir(dir);
    free(p);
}

/* ---------------------------------------------------------------- signals */

/* Starts a long search with a checkpoint and waits until its first checkpoint exists. */
static pid_t start_long(const char *dir, const char *extra, const char *out, const char *err) {
    char args[1024], ck[128];
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --max-states 100000000 --checkpoint %s/c -o %s/plan "
             "--json --quiet %s",
             dir, dir, extra);
    snprintf(ck, sizeof ck, "%s/c", dir);
    pid_t pid = tu_magpie_spawn(args, out, err);
    if (!tu_wait_file(ck, 30)) {
        kill(pid, SIGKILL);
        tu_wait_pid(pid, 10);
        fail_msg("no checkpoint after 30 s: %s", args);
    }
    return pid;
}

static void test_sigusr1_checkpoints_and_goes_on(void **state) {
    (void)state;
    char dir[64], ck[128], out[128], err[128];
    tu_make_dir(dir, sizeof dir, "resume");
    snprintf(ck, sizeof ck, "%s/c", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    pid_t pid = start_long(dir, "--threads 1 --checkpoint-every 3600s", out, err);
    struct stat a, b;
    assert_int_equal(stat(ck, &a), 0);
    /* nothing periodic for an hour: only the signal can replace it (rename: a new inode) */
    tu_sleep(0.3);
    assert_int_equal(stat(ck, &b), 0);
    assert_true(a.st_ino == b.st_ino);
    assert_int_equal(kill(pid, SIGUSR1), 0);
    double end = ir_now_seconds() + 10;
    while (stat(ck, &b) == 0 && b.st_ino == a.st_ino && ir_now_seconds() < end) tu_sleep(0.01);
    if (b.st_ino == a.st_ino) fail_msg("no new checkpoint within 10 s of SIGUSR1");
    /* the search goes on */
    tu_sleep(0.3);
    assert_int_equal(tu_wait_pid(pid, 0), -2);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int rc = tu_wait_pid(pid, 10);
    char *o = tu_read_all(out, NULL), *e = tu_read_all(err, NULL);
    if (rc != 4) fail_msg("exit %d: %s", rc, e);
    char *c = strstr(o, "\"checkpoint\":{");
    assert_non_null(c);
    /* the first, SIGUSR1's and the final one */
    if (tu_json_num(c, "written") < 3) fail_msg("%s", c);
    free(o);
    free(e);
    tu_remove_dir(dir);
}

/* SIGTERM or SIGINT: exit 4 within 10 s with the plan written and a checkpoint that resume
 * continues, never ending worse than the interrupted run's best. */
static void check_stop_signal(int sig) {
    tu_proc *p = malloc(sizeof *p);
    char dir[64], ck[128], out[128], err[128], args[1024], path[160];
    tu_make_dir(dir, sizeof dir, "resume");
    snprintf(ck, sizeof ck, "%s/c", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    pid_t pid = start_long(dir, "--threads 2", out, err);
    tu_sleep(0.3);
    double t0 = ir_now_seconds();
    assert_int_equal(kill(pid, sig), 0);
    int rc = tu_wait_pid(pid, 10);
    double dt = ir_now_seconds() - t0;
    if (rc == -2) {
        kill(pid, SIGKILL);
        tu_wait_pid(pid, 10);
    }
    char *o = tu_read_all(out, NULL), *e = tu_read_all(err, NULL);
    print_message("signal %d: exit %d after %.3f s\n", sig, rc, dt);
    if (rc != 4) fail_msg("signal %d: exit %d after %.3f s: %s", sig, rc, dt, e);
    assert_true(dt < 10);
    assert_non_null(strstr(o, "\"interrupted\":true"));
    assert_non_null(strstr(e, "magpie resume"));
    snprintf(path, sizeof path, "%s/plan/optimized.onnx", dir);
    assert_true(tu_exists(path));
    double states = tu_json_num(o, "states_explored");
    double peak = tu_json_num(o, "search_best_peak_bytes");
    bool met = strstr(o, "\"met\":true") != NULL;
    /* resume for 50 more distinct states */
    snprintf(args, sizeof args, "resume %s --max-states %.0f -o %s/resumed --json --quiet", ck,
             states + 50, dir);
    tu_magpie(p, args);
    expect_resumed(p, "resume");
    assert_true(tu_json_num(p->out, "states_explored") >= states);
    if (met) {
        assert_non_null(strstr(p->out, "\"met\":true"));
        assert_true(tu_json_num(p->out, "search_best_peak_bytes") <= peak);
    }
    free(o);
    free(e);
    tu_remove_dir(dir);
    free(p);
}

static void test_sigterm_exits_4(void **state) {
    (void)state;
    check_stop_signal(SIGTERM);
}

static void test_sigint_exits_4(void **state) {
    (void)state;
    check_stop_signal(SIGINT);
}

/* ---------------------------------------------------------------- bad checkpoints */

/* resume of the bytes (n of them) written to dir/bad must exit 2, name the cause (want), leave
 * the file as it was and write nothing. extra: more resume options. */
static void expect_refused(tu_proc *p, const char *dir, const char *what, const void *bytes,
                           size_t n, const char *extra, const char *want) {
    char bad[128], args[512], out[128];
    snprintf(bad, sizeof bad, "%s/bad", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    write_all(bad, bytes, n);
    snprintf(args, sizeof args, "resume %s %s -o %s --json", bad, extra, out);
    tu_magpie(p, args);
    print_message("%s: exit %d: %s", what, p->rc, p->err);
    if (p->rc != 2) fail_msg("%s: exit %d, expected 2: %s", what, p->rc, p->err);
    assert_string_equal(p->out, "");
    if (!strstr(p->err, want)) fail_msg("%s: '%s' not in: %s", what, want, p->err);
    assert_true(strncmp(p->err, "magpie: ", 8) == 0);
    assert_non_null(strchr(p->err, '\n'));
    assert_true(*(strchr(p->err, '\n') + 1) == 0); /* one line */
    size_t m;
    char *now = tu_read_all(bad, &m);
    assert_non_null(now);
    if (m != n || memcmp(now, bytes, n) != 0) fail_msg("%s: the file was modified", what);
    free(now);
    if (tu_exists(out)) fail_msg("%s: %s was written", what, out);
    assert_int_equal(count_prefixed(dir, "bad.tmp."), 0);
}

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The checkpoint at path with its header's options hash changed (every checksum valid). */
static uint8_t *other_options(const char *path, size_t *n) {
    ir_diag d = {{0}};
    ir_status st;
    ckpt_reader *r = ckpt_open(path, &st, &d);
    if (!r) fail_msg("%s", d.msg);
    const ckpt_info *h = ckpt_header(r);
    ckpt_meta m = {.model_path = h->model_path,
                   .model_hash = h->model_hash,
                   .options_hash = h->options_hash ^ 1};
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    assert_non_null(w);
    for (uint32_t i = 0; i < h->n_sections; i++) {
        uint32_t tag;
        const uint8_t *p;
        size_t len;
        ckpt_section_at(r, i, &tag, &p, &len);
        assert_int_equal(ckpt_writer_section(w, tag, p, len, &d), IR_OK);
    }
    uint8_t *out;
    assert_int_equal(ckpt_writer_encode(w, &out, n, &d), IR_OK);
    ckpt_writer_free(w);
    ckpt_close(r);
    return out;
}

static void test_bad_checkpoints_refused(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], good[128], model[128];
    tu_make_dir(dir, sizeof dir, "resume");
    snprintf(good, sizeof good, "%s/good", dir);
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --threads 1 --max-states 50 --checkpoint %s -o "
             "%s/plan --quiet",
             good, dir);
    tu_magpie(p, args);
    if (p->rc != 0 && p->rc != 3) fail_msg("optimize: exit %d: %s", p->rc, p->err);
    size_t n;
    uint8_t *b = (uint8_t *)tu_read_all(good, &n);
    assert_non_null(b);
    assert_true(n > 100);
    assert_memory_equal(b, "MAGPIECK", 8);
    uint8_t *x = malloc(n);
    size_t L = (size_t)get_le(b + 24, 2);

    expect_refused(p, dir, "truncated", b, n / 2, "", "truncated");
    memcpy(x, b, n);
    x[n - n / 3] ^= 0x10; /* a bit of the body */
    expect_refused(p, dir, "bit flipped", x, n, "", "checksum");
    memcpy(x, b, n);
    x[0] = 'X';
    expect_refused(p, dir, "magic", x, n, "", "magic");
    /* version 2 with a header checksum that matches, so the version check is what refuses */
    memcpy(x, b, n);
    put_le(x + 8, 2, 4);
    put_le(x + 58 + L, ckpt_xxh64(x, 58 + L, 0), 8);
    expect_refused(p, dir, "version", x, n, "", "version");
    /* other search options (the container valid) */
    size_t m;
    uint8_t *o = other_options(good, &m);
    expect_refused(p, dir, "options", o, m, "", "options");
    free(o);
    /* another model: a file with other bytes */
    snprintf(model, sizeof model, "%s/other.onnx", dir);
    size_t mn;
    char src[512];
    char *mb = tu_read_all(
        tu_src_path("tests/fixtures/numeric/resnet_small_train/model.onnx", src, sizeof src), &mn);
    assert_non_null(mb);
    write_all(model, mb, mn);
    free(mb);
    snprintf(args, sizeof args, "--model %s", model);
    expect_refused(p, dir, "model", b, n, args, model);
    assert_non_null(strstr(p->err, MODEL)); /* both named */
    assert_non_null(strstr(p->err, "different model"));
    /* not a checkpoint at all, and no file */
    expect_refused(p, dir, "empty", "", 0, "", "truncated");
    snprintf(args, sizeof args, "resume %s/none -o %s/out", dir, dir);
    tu_magpie(p, args);
    assert_int_equal(p->rc, 2);
    assert_non_null(strstr(p->err, "cannot open"));
    free(x);
    free(b);
    tu_remove_dir(dir);
    free(p);
}

/* ---------------------------------------------------------------- a failure before rename */

static void test_failure_before_rename(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], ck[128], plan[128];
    tu_make_dir(dir, sizeof dir, "resume");
    snprintf(ck, sizeof ck, "%s/c", dir);
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --threads 1 --max-states 50 --checkpoint %s -o "
             "%s/p1 --quiet",
             ck, dir);
    tu_magpie(p, args);
    if (p->rc != 0 && p->rc != 3) fail_msg("optimize: exit %d: %s", p->rc, p->err);
    size_t n0;
    char *before = tu_read_all(ck, &n0);
    assert_non_null(before);
    assert_int_equal(count_prefixed(dir, "c.tmp."), 0);
    /* every commit fails after its temporary file is written: the first periodic one is a
     * warning, the final one fails the command, and nothing else is written */
    setenv("MAGPIE_CKPT_FAIL_BEFORE_RENAME", "1", 1);
    snprintf(plan, sizeof plan, "%s/p2", dir);
    snprintf(args, sizeof args,
             "optimize " MODEL " " SEARCH " --threads 1 --max-states 80 --checkpoint %s -o %s "
             "--quiet",
             ck, plan);
    tu_magpie(p, args);
    unsetenv("MAGPIE_CKPT_FAIL_BEFORE_RENAME");
    print_message("with the failure injected: exit %d: %s", p->rc, p->err);
    if (p->rc != 2) fail_msg("exit %d, expected 2: %s", p->rc, p->err);
    assert_non_null(strstr(p->err, "magpie: warning: cannot write checkpoint"));
    assert_non_null(strstr(p->err, "cannot write the final checkpoint"));
    assert_non_null(strstr(p->err, "failure injected"));
    assert_false(tu_exists(plan));
    size_t n1;
    char *after = tu_read_all(ck, &n1);
    assert_non_null(after);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    assert_int_equal(count_prefixed(dir, "c.tmp."), 1); /* as a crash would leave it */
    /* the intact checkpoint resumes, and the run removes the stale file */
    snprintf(args, sizeof args, "resume %s --max-states 80 -o %s/p3 --json --quiet", ck, dir);
    tu_magpie(p, args);
    expect_resumed(p, "resume");
    assert_int_equal(count_prefixed(dir, "c.tmp."), 0);
    free(before);
    free(after);
    tu_remove_dir(dir);
    free(p);
}

/* ---------------------------------------------------------------- a model that moved */

static void test_model_moved(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], m1[128], m2[128], ck[128], src[512];
    tu_make_dir(dir, sizeof dir, "resume");
    snprintf(m1, sizeof m1, "%s/m1.onnx", dir);
    snprintf(m2, sizeof m2, "%s/moved.onnx", dir);
    snprintf(ck, sizeof ck, "%s/c", dir);
    size_t n;
    char *b = tu_read_all(tu_src_path(MODEL, src, sizeof src), &n);
    assert_non_null(b);
    write_all(m1, b, n);
    free(b);
    snprintf(args, sizeof args,
             "optimize %s " SEARCH " --threads 1 --max-states 50 --checkpoint %s -o %s/p1 --quiet",
             m1, ck, dir);
    tu_magpie(p, args);
    if (p->rc != 0 && p->rc != 3) fail_msg("optimize: exit %d: %s", p->rc, p->err);
    assert_int_equal(rename(m1, m2), 0);
    size_t n0;
    char *before = tu_read_all(ck, &n0);
    snprintf(args, sizeof args, "resume %s -o %s/p2 --json", ck, dir);
    tu_magpie(p, args);
    if (p->rc != 2) fail_msg("exit %d, expected 2: %s", p->rc, p->err);
    assert_non_null(strstr(p->err, m1));
    assert_non_null(strstr(p->err, "--model"));
    size_t n1;
    char *after = tu_read_all(ck, &n1);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    snprintf(args, sizeof args, "resume %s --model %s --max-states 80 -o %s/p2 --json --quiet", ck,
             m2, dir);
    tu_magpie(p, args);
    expect_resumed(p, "resume --model");
    char mp[128];
    assert_string_equal(tu_json_str(p->out, "model", mp, sizeof mp), m2);
    /* its checkpoints record where the model is now */
    ir_diag d = {{0}};
    ckpt_reader *r = ckpt_open(ck, NULL, &d);
    if (!r) fail_msg("%s", d.msg);
    assert_string_equal(ckpt_header(r)->model_path, m2);
    ckpt_close(r);
    free(before);
    free(after);
    tu_remove_dir(dir);
    free(p);
}

/* ---------------------------------------------------------------- usage */

static void test_usage_errors(void **state) {
    (void)state;
    static const char *const bad[] = {
        "optimize " MODEL " --train --lat-limit 1.1 --checkpoint-every 10s",
        "optimize " MODEL " --train --lat-limit 1.1 --checkpoint DIR/c --checkpoint-every 0",
        "optimize " MODEL " --train --lat-limit 1.1 --checkpoint DIR/c --checkpoint-every 1MiB",
        "optimize " MODEL " --train --lat-limit 1.1 --checkpoint DIR/c --checkpoint-every x",
        "optimize " MODEL " --train --lat-limit 1.1 --checkpoint DIR/none/c",
        "optimize " MODEL " --train --lat-limit 1.1 --model " MODEL,
        "resume DIR/c --mem-limit 0.5",
        "resume DIR/c --train",
        "resume",
        "resume DIR/c DIR/c",
    };
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024];
    tu_make_dir(dir, sizeof dir, "resume");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* DIR stands for the temporary directory */
        char *o = args;
        for (const char *s = bad[i]; *s;) {
            if (!strncmp(s, "DIR", 3)) {
                o += sprintf(o, "%s", dir);
                s += 3;
            } else {
                *o++ = *s++;
            }
        }
        sprintf(o, " -o %s/out", dir);
        tu_magpie(p, args);
        if (p->rc != 2) fail_msg("'%s': exit %d, expected 2: %s", args, p->rc, p->err);
        assert_string_equal(p->out, "");
        if (count_prefixed(dir, "") != 2) /* . and .. */
            fail_msg("'%s' wrote into %s", args, dir);
    }
    tu_magpie(p, "resume --help");
    assert_int_equal(p->rc, 0);
    assert_non_null(strstr(p->out, "--checkpoint-every"));
    assert_non_null(strstr(p->out, "--model"));
    assert_null(strstr(p->out, "--mem-limit"));
    tu_remove_dir(dir);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_deterministic),
        cmocka_unit_test(test_sigusr1_checkpoints_and_goes_on),
        cmocka_unit_test(test_sigterm_exits_4),
        cmocka_unit_test(test_sigint_exits_4),
        cmocka_unit_test(test_bad_checkpoints_refused),
        cmocka_unit_test(test_failure_before_rename),
        cmocka_unit_test(test_model_moved),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
