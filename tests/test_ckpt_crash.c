/* test_ckpt_crash.c - crash safety of checkpoints (issue #6): 20 times, a search on
 * cnn_bn_train's training graph checkpointing every 50 ms on two threads is killed with SIGKILL
 * at a random moment (a seeded generator: the same moments on every run, each printed); the
 * checkpoint on disk must load, and a resume with a budget of about one more second must
 * complete (exit 0, or 3 when the limit is not met) with resumes == 1 in its report, leaving
 * no temporary file of the killed writer behind. Labelled "slow" (tests/CMakeLists.txt): about
 * 40 s in a Debug build. */
#include "test-util.h"

#include <dirent.h>

#define MODEL "tests/fixtures/numeric/cnn_bn_train/model.onnx"
#define ROUNDS 20

/* xorshift64*: the moments of the kills, reproducible from the seed. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double next_uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dULL) >> 11) / (double)(1ULL << 53);
}

/* Names in dir that start with prefix. */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void test_sigkill_then_resume(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], ck[128], prefix[32];
    snprintf(dir, sizeof dir, "/tmp/magpie-crash-XXXXXX");
    assert_non_null(mkdtemp(dir));
    int stale_seen = 0;
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(ck, sizeof ck, "%s/c%d", dir, i);
        snprintf(prefix, sizeof prefix, "c%d.tmp.", i);
        snprintf(args, sizeof args,
                 "optimize " MODEL " --train --lat-limit 1.10 --time 60s --checkpoint %s "
                 "--checkpoint-every 0.05s --threads 2 -o %s/plan%d --quiet",
                 ck, dir, i);
        double t0 = ir_now_seconds();
        pid_t pid = tu_magpie_spawn(args, NULL, NULL);
        if (!tu_wait_file(ck, 30)) {
            kill(pid, SIGKILL);
            tu_wait_pid(pid, 10);
            fail_msg("round %d: no checkpoint after 30 s", i);
        }
        double wait = 0.05 + 0.95 * next_uniform();
        tu_sleep(wait);
        assert_int_equal(kill(pid, SIGKILL), 0);
        /* reaped: a zombie would still count as a live writer for the stale-file cleanup */
        assert_int_equal(tu_wait_pid(pid, 10), -1);
        double elapsed = ir_now_seconds() - t0;
        stale_seen += count_prefixed(dir, prefix);
        print_message("round %2d: SIGKILL %.3f s after the first checkpoint (%.3f s after the "
                      "start)%s\n",
                      i, wait, elapsed, count_prefixed(dir, prefix) ? ", temporary file left" : "");
        /* --time counts the whole search: what ran before the kill plus about a second */
        snprintf(args, sizeof args, "resume %s --time %.3fs -o %s/resumed%d --json --quiet", ck,
                 elapsed + 1.0, dir, i);
        tu_magpie(p, args);
        if (p->rc != 0 && p->rc != 3) fail_msg("round %d: resume exit %d: %s", i, p->rc, p->err);
        if (tu_json_num(p->out, "resumes") != 1) fail_msg("round %d: %s", i, p->out);
        if (count_prefixed(dir, prefix) != 0) fail_msg("round %d: a temporary file is left", i);
    }
    print_message("%d of %d kills left a temporary file, every one removed by the resume\n",
                  stale_seen, ROUNDS);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_then_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
