/* test_optimize_cli.c - `magpie optimize` and `magpie verify` as scripts see them: on inference
 * fixtures and a training fixture the search under --lat-limit 1.10 writes optimized.onnx,
 * schedule.json and report.json, never reports a peak above the baseline, `verify` finds the
 * plan equivalent to the original, and `magpie run` of the plan measures exactly the reported
 * peak; an impossible --mem-limit exits 3 with the plan still written; one thread with a state
 * budget is deterministic; bad limits are usage errors that write nothing; verify of two
 * different models exits 3. The binary (MAGPIE_BIN, set by ctest) runs through popen. */
#include "test-util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void make_dir(char *dir, size_t n) {
    snprintf(dir, n, "/tmp/magpie-opt-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

#define FIX "tests/fixtures/numeric/"

/* optimize, verify and run one fixture; extra: "" or "--train". */
static void check_fixture(const char *name, const char *extra) {
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    make_dir(dir, sizeof dir);
    snprintf(args, sizeof args,
             "optimize " FIX "%s/model.onnx %s --lat-limit 1.10 --time 2 --threads 2 -o %s/plan "
             "--json --quiet",
             name, extra, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: optimize exit %d: %s", name, p->rc, p->err);
    assert_true(p->out[0] == '{');
    double base = tu_json_num(p->out, "baseline_peak_bytes");
    double best = tu_json_num(p->out, "best_peak_bytes");
    double lat0 = tu_json_num(p->out, "baseline_latency_seconds");
    double lat = tu_json_num(p->out, "best_latency_seconds");
    assert_true(best > 0 && best <= base);
    assert_true(lat <= 1.10 * lat0 * (1 + 1e-12));
    assert_true(tu_json_num(p->out, "states_explored") >= 1);
    assert_non_null(strstr(p->out, "\"met\":true"));
    static const char *const files[] = {"optimized.onnx", "schedule.json", "report.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/plan/%s", dir, files[i]);
        if (!exists(path)) fail_msg("%s: %s missing", name, path);
    }
    /* report.json holds the object --json printed */
    snprintf(path, sizeof path, "%s/plan/report.json", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *rep = calloc(1, 1 << 16);
    size_t n = fread(rep, 1, (1 << 16) - 1, f);
    fclose(f);
    assert_true(n > 0);
    assert_true(tu_json_num(rep, "best_peak_bytes") == best);
    free(rep);

    snprintf(args, sizeof args, "verify " FIX "%s/model.onnx %s %s/plan/optimized.onnx --json",
             name, extra, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: verify exit %d: %s %s", name, p->rc, p->out, p->err);
    assert_non_null(strstr(p->out, "\"match\":true"));

    snprintf(args, sizeof args,
             "run %s/plan/optimized.onnx -i " FIX "%s/input_0.npy -o %s/run --json", dir, name,
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: run exit %d: %s", name, p->rc, p->err);
    double measured = tu_json_num(p->out, "peak_bytes");
    if (measured != best)
        fail_msg("%s: run measures %.0f, optimize reported %.0f", name, measured, best);
    remove_dir(dir);
    free(p);
}

static void test_resnet_small(void **state) {
    (void)state;
    check_fixture("resnet_small", "");
}

static void test_unet_transpose(void **state) {
    (void)state;
    check_fixture("unet_transpose", "");
}

static void test_cnn_bn_train(void **state) {
    (void)state;
    check_fixture("cnn_bn_train", "--train");
}

static void test_impossible_limit_exits_3(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[512], path[256];
    make_dir(dir, sizeof dir);
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --mem-limit 1KiB --time 2 "
             "--max-states 200 --threads 2 -o %s --json --quiet",
             dir);
    tu_magpie(p, args);
    if (p->rc != 3) fail_msg("exit %d, expected 3: %s", p->rc, p->err);
    assert_non_null(strstr(p->out, "\"met\":false"));
    assert_non_null(strstr(p->err, "warning"));
    /* the search still improves the peak */
    assert_true(tu_json_num(p->out, "best_peak_bytes") <
                tu_json_num(p->out, "baseline_peak_bytes"));
    snprintf(path, sizeof path, "%s/optimized.onnx", dir);
    assert_true(exists(path));
    snprintf(path, sizeof path, "%s/report.json", dir);
    assert_true(exists(path));
    remove_dir(dir);
    free(p);
}

static void test_deterministic_one_thread(void **state) {
    (void)state;
    static const char *const keys[] = {"best_peak_bytes",
                                       "best_latency_seconds",
                                       "states_explored",
                                       "states_expanded",
                                       "states_duplicate",
                                       "remat",
                                       "deremat",
                                       "swap",
                                       "deswap"};
    double v[2][sizeof keys / sizeof keys[0]];
    tu_proc *p = malloc(sizeof *p);
    for (int k = 0; k < 2; k++) {
        char dir[64], args[512];
        make_dir(dir, sizeof dir);
        snprintf(args, sizeof args,
                 "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --threads 1 "
                 "--seed 1 --max-states 30 --time 60 -o %s --json --quiet",
                 dir);
        tu_magpie(p, args);
        if (p->rc != 0) fail_msg("run %d: exit %d: %s", k, p->rc, p->err);
        assert_non_null(strstr(p->out, "\"stop_reason\":\"states-full\""));
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            v[k][i] = tu_json_num(p->out, keys[i]);
        remove_dir(dir);
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (v[0][i] != v[1][i]) fail_msg("%s: %.17g then %.17g", keys[i], v[0][i], v[1][i]);
    free(p);
}

static void test_bad_limits_exit_2(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",                                /* neither limit */
        "--mem-limit 0.5 --lat-limit 1.1", /* both */
        "--mem-limit abc",
        "--mem-limit 0",
        "--mem-limit -1",
        "--mem-limit 12ms",
        "--lat-limit 512MiB",
        "--lat-limit 1.5h",
        "--mem-limit inf",
        "--mem-limit 1e999",
        "--mem-limit 0.5 --rules remat,fission",
        "--mem-limit 0.5 --threads 0",
        "--mem-limit 0.5 --time 1MiB",
        "--mem-limit 0.5 --max-states 0",
        "--mem-limit 0.5 --delta 0.5",
    };
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[512], path[256];
    make_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "optimize " FIX "resnet_small/model.onnx %s -o %s/out", bad[i],
                 dir);
        tu_magpie(p, args);
        if (p->rc != 2) fail_msg("'%s': exit %d, expected 2", bad[i], p->rc);
        assert_string_equal(p->out, "");
        assert_non_null(strstr(p->err, "magpie:"));
        snprintf(path, sizeof path, "%s/out", dir);
        if (exists(path)) fail_msg("'%s' left %s", bad[i], path);
    }
    remove_dir(dir);
    free(p);
}

static void test_verify_mismatch_exits_3(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    tu_magpie(p, "verify " FIX "resnet_small/model.onnx " FIX "densenet_small/model.onnx --json");
    assert_int_equal(p->rc, 3);
    assert_non_null(strstr(p->out, "\"match\":false"));
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet_small),
        cmocka_unit_test(test_unet_transpose),
        cmocka_unit_test(test_cnn_bn_train),
        cmocka_unit_test(test_impossible_limit_exits_3),
        cmocka_unit_test(test_deterministic_one_thread),
        cmocka_unit_test(test_bad_limits_exit_2),
        cmocka_unit_test(test_verify_mismatch_exits_3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
