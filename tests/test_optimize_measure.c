/* test_optimize_measure.c - `magpie optimize --measure` (cli/optimize-measure.c) as scripts see
 * it, with the cpu cost model on small graphs (a profile database of the test's own):
 *  - --pet alone: report.json has the predicted and measured latencies of the baseline and the
 *    plan written, with the rounds; the plan written never measured slower than the original,
 *    and when it fell back, the plan is the original graph with no rewrite;
 *  - a plan slower by construction: under --rules remat --mem-limit, the one way within the limit
 *    recomputes the graph's costliest convolution, so the plan runs about 1.4x the original; it
 *    is measured slower, the original order is written instead (report.json and stderr say why)
 *    and the memory limit, no longer met, makes it exit 3;
 *  - --lat-limit that no plan meets when measured: exit 3, the search's best written, the reason
 *    in report.json;
 *  - --measure 0, and an analytic device: nothing is measured and report.json says the figures
 *    are predictions;
 *  - --measure out of range is a usage error. */
#include "test-util.h"

#include "pet-build.h"

#include <sys/stat.h>
#include <unistd.h>

#define FIX "tests/fixtures/numeric/"

/* The object under key in json (fails when missing). */
static const char *obj(const char *json, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":{", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("no object '%s' in %s", key, json);
    return p + strlen(pat) - 1;
}

/* Numbers in the array under key (the first such key in json), up to cap. */
static int array_len(const char *json, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":[", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("no array '%s' in %s", key, json);
    p += strlen(pat);
    int n = 0;
    while (*p && *p != ']') {
        char *end;
        double v = strtod(p, &end);
        if (end == p) fail_msg("bad array '%s' in %s", key, json);
        assert_true(v > 0);
        n++;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* x -> a = Conv3x3(x) 16->16 -> Conv1x1 16->128 -> Relu -> Conv1x1 128->16 -> Add(a, .): a lives
 * across the wide middle, so within 0.96 of the peak (--rules remat) a must be recomputed before
 * the Add, which repeats the graph's costliest op (some 40% of its time). */
static void write_remat_model(const char *path) {
    ir_graph *g = ir_graph_new();
    g->opset = 13;
    g->name = ir_graph_strdup(g, "remat_costly");
    int x = pb_input(g, "x", TU_SHAPE(1, 16, 32, 32));
    g->values[x].flags |= IR_VF_DATA;
    static const int64_t p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0};
    int wa = pb_weight(g, "wa", TU_SHAPE(16, 16, 3, 3), 1);
    int w1 = pb_weight(g, "w1", TU_SHAPE(128, 16, 1, 1), 2);
    int w2 = pb_weight(g, "w2", TU_SHAPE(16, 128, 1, 1), 3);
    int a = pb_conv(g, x, wa, p1, NULL);
    int m1 = pb_conv(g, a, w1, p0, NULL);
    int m2 = pb_op(g, IR_OP_Relu, 1, &m1, 0, NULL);
    int m3 = pb_conv(g, m2, w2, p0, NULL);
    int y = pb_op(g, IR_OP_Add, 2, (int[]){a, m3}, 0, NULL);
    pb_output(g, y, "y");
    ir_diag d = {{0}};
    if (ir_onnx_save(g, path, &d) != IR_OK) fail_msg("save %s: %s", path, d.msg);
    ir_graph_free(g);
}

static void test_pet_report(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024];
    tu_make_dir(dir, sizeof dir, "measure");
    snprintf(args, sizeof args,
             "optimize " FIX "resnet_small/model.onnx --pet --device cpu --profile-db %s/db "
             "--time 1 --measure 2 --measure-time 1 --threads 1 -o %s/plan --json --quiet",
             dir, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize exit %d: %s", p->rc, p->err);
    const char *pred = obj(p->out, "predicted_latency_seconds");
    assert_true(tu_json_num(pred, "baseline") == tu_json_num(p->out, "baseline_latency_seconds"));
    assert_true(tu_json_num(pred, "best") == tu_json_num(p->out, "best_latency_seconds"));
    const char *meas = obj(p->out, "measured_latency_seconds");
    assert_true(tu_json_num(meas, "baseline") > 0);
    assert_true(tu_json_num(meas, "best") > 0);
    const char *mz = obj(p->out, "measurement");
    assert_non_null(strstr(mz, "\"measured\":true"));
    int rounds = (int)tu_json_num(mz, "rounds");
    assert_true(rounds >= 1);
    assert_int_equal(array_len(meas, "baseline_rounds"), rounds);
    assert_int_equal(array_len(meas, "best_rounds"), rounds);
    /* never a plan measured slower than the original */
    assert_true(tu_json_num(meas, "ratio") <= 1.0);
    if (strstr(mz, "\"fell_back_to_original\":true")) {
        assert_non_null(strstr(p->err, "original order"));
        const char *rules = obj(p->out, "rules");
        assert_int_equal(tu_json_num(rules, "subst"), 0);
        assert_int_equal(tu_json_num(rules, "pet"), 0);
    } else {
        assert_true(tu_json_num(mz, "written") >= 0);
    }
    tu_remove_dir(dir);
    free(p);
}

static void test_slower_plan_falls_back(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], model[128], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "measure");
    snprintf(model, sizeof model, "%s/remat.onnx", dir);
    write_remat_model(model);
    snprintf(args, sizeof args,
             "optimize %s --rules remat --mem-limit 0.96 --device cpu --profile-db %s/db "
             "--time 1 --measure 3 --measure-time 1 --threads 1 -o %s/plan --json --quiet",
             model, dir, dir);
    tu_magpie(p, args);
    if (p->rc != 3) fail_msg("exit %d, expected 3: %s %s", p->rc, p->out, p->err);
    const char *mz = obj(p->out, "measurement");
    assert_non_null(strstr(mz, "\"fell_back_to_original\":true"));
    assert_non_null(strstr(mz, "\"written\":null"));
    assert_non_null(strstr(mz, "original order"));
    assert_non_null(strstr(p->err, "original order"));
    /* the search's plan recomputes: it was within the limit and measured slower */
    assert_true(tu_json_num(mz, "rewrites") >= 1);
    assert_non_null(strstr(mz, "\"within_memory_limit\":true"));
    assert_true(tu_json_num(mz, "measured_ratio") > 1.0);
    /* the plan written is the original: no rewrite, the baseline's peak, the limit not met */
    assert_int_equal(tu_json_num(obj(p->out, "rules"), "remat"), 0);
    assert_true(tu_json_num(p->out, "best_peak_bytes") ==
                tu_json_num(p->out, "baseline_peak_bytes"));
    assert_non_null(strstr(p->out, "\"met\":false"));
    assert_true(tu_json_num(obj(p->out, "measured_latency_seconds"), "ratio") == 1.0);
    snprintf(path, sizeof path, "%s/plan/optimized.onnx", dir);
    assert_true(tu_exists(path));
    tu_remove_dir(dir);
    free(p);
}

static void test_lat_limit_unmet(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "measure");
    snprintf(args, sizeof args,
             "optimize " FIX "mlp/model.onnx --lat-limit 0.01 --device cpu --profile-db %s/db "
             "--time 1 --measure-time 0.5 --threads 1 -o %s/plan --json --quiet",
             dir, dir);
    tu_magpie(p, args);
    if (p->rc != 3) fail_msg("exit %d, expected 3: %s", p->rc, p->err);
    const char *mz = obj(p->out, "measurement");
    assert_non_null(strstr(mz, "\"written\":0"));
    assert_non_null(strstr(mz, "no plan measured met the latency limit 0.01"));
    assert_non_null(strstr(p->out, "\"met\":false"));
    assert_non_null(strstr(p->err, "latency limit 0.01 not met"));
    snprintf(path, sizeof path, "%s/plan/optimized.onnx", dir);
    assert_true(tu_exists(path));
    tu_remove_dir(dir);
    free(p);
}

static void test_not_measured(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024];
    tu_make_dir(dir, sizeof dir, "measure");
    static const char *const how[] = {"--device cpu --measure 0", "--device analytic:a100"};
    static const char *const note[] = {"--measure 0", "analytic device"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "optimize " FIX "mlp/model.onnx --pet %s --profile-db %s/db --time 0.5 "
                 "--threads 1 -o %s/plan%d --json --quiet",
                 how[k], dir, dir, k);
        tu_magpie(p, args);
        if (p->rc != 0) fail_msg("%s: exit %d: %s", how[k], p->rc, p->err);
        assert_non_null(strstr(p->out, "\"measured_latency_seconds\":null"));
        const char *mz = obj(p->out, "measurement");
        assert_non_null(strstr(mz, "\"measured\":false"));
        assert_non_null(strstr(mz, note[k]));
        assert_non_null(strstr(mz, "predictions"));
    }
    snprintf(args, sizeof args, "optimize " FIX "mlp/model.onnx --pet --measure 17 -o %s/bad", dir);
    tu_magpie(p, args);
    assert_int_equal(p->rc, 2);
    assert_non_null(strstr(p->err, "--measure '17'"));
    tu_remove_dir(dir);
    free(p);
}

int main(void) {
    /* one kernel thread, as a benchmark runs: two OpenMP threads on a busy two-core machine wait
     * for each other at every barrier, and the timings say more about the neighbours */
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pet_report),
        cmocka_unit_test(test_slower_plan_falls_back),
        cmocka_unit_test(test_lat_limit_unmet),
        cmocka_unit_test(test_not_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
