/* test_optimize_cli.c - `magpie optimize` and `magpie verify` as scripts see them: on inference
 * fixtures and a training fixture the search under --lat-limit 1.10 writes optimized.onnx,
 * schedule.json and report.json, never reports a peak above the baseline, `verify` finds the
 * plan equivalent to the original, and `magpie run` of the plan measures exactly the reported
 * peak; an impossible --mem-limit exits 3 with the plan still written; one thread with a state
 * budget is deterministic (the best state's fingerprint included); bad limits are usage errors
 * that write nothing; verify of two different models exits 3. On cnn_bn_train's training graph:
 * each of --rules fission, remat and swap alone applies its rewrite (report.json says so) and
 * the plan passes `verify` and measures the reported peak under `run`; report.json's fields are
 * present and agree with each other and with schedule.json; memory.svg holds both timelines;
 * --max-frontier bounds the frontier; the progress goes to stderr as plain lines when stderr is
 * not a terminal, and --quiet silences it. --pet (on a model of parallel convolutions written by
 * the test): the plan verifies and report.json describes the PET table and the candidates
 * applied; --rules pet applies the mutants alone; one thread is deterministic and a checkpointed
 * half search resumed to K equals one run to K; --pet with --train is a usage error; --refine
 * finds a plan within the limit never slower than its first search's, deterministically. The binary
 * (MAGPIE_BIN, set by ctest) runs through popen. */
#include "test-util.h"

#include "pet-build.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIX "tests/fixtures/numeric/"

/* optimize, verify and run one fixture; extra: "" or "--train". */
/* Runs `magpie verify ORIGINAL.onnx [extra] PLAN` (it must match), then `magpie run PLAN` on the
 * fixture's input: its measured peak must be the `best` bytes optimize reported. */
static void expect_plan_checks(tu_proc *p, const char *what, const char *fixture, const char *extra,
                               const char *plan, const char *run_dir, double best) {
    char args[1024];
    snprintf(args, sizeof args, "verify " FIX "%s/model.onnx %s %s --json", fixture, extra, plan);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: verify exit %d: %s %s", what, p->rc, p->out, p->err);
    assert_non_null(strstr(p->out, "\"match\":true"));
    snprintf(args, sizeof args, "run %s -i " FIX "%s/input_0.npy -o %s --json", plan, fixture,
             run_dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: run exit %d: %s", what, p->rc, p->err);
    double measured = tu_json_num(p->out, "peak_bytes");
    if (measured != best)
        fail_msg("%s: run measures %.0f, optimize reported %.0f", what, measured, best);
}

static void check_fixture(const char *name, const char *extra) {
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
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
        if (!tu_exists(path)) fail_msg("%s: %s missing", name, path);
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

    char plan[128], run[128];
    snprintf(plan, sizeof plan, "%s/plan/optimized.onnx", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    expect_plan_checks(p, name, name, extra, plan, run, best);
    tu_remove_dir(dir);
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
    tu_make_dir(dir, sizeof dir, "opt");
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
    assert_true(tu_exists(path));
    snprintf(path, sizeof path, "%s/report.json", dir);
    assert_true(tu_exists(path));
    tu_remove_dir(dir);
    free(p);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s missing", path);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    assert_true(n > 0);
    return buf;
}

static void test_deterministic_one_thread(void **state) {
    (void)state;
    char fp[2][32];
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
        tu_make_dir(dir, sizeof dir, "opt");
        snprintf(args, sizeof args,
                 "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --threads 1 "
                 "--seed 1 --max-states 30 --time 60 -o %s --json --quiet",
                 dir);
        tu_magpie(p, args);
        if (p->rc != 0) fail_msg("run %d: exit %d: %s", k, p->rc, p->err);
        assert_non_null(strstr(p->out, "\"stop_reason\":\"states-full\""));
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            v[k][i] = tu_json_num(p->out, keys[i]);
        tu_json_str(p->out, "best_fingerprint", fp[k], sizeof fp[k]);
        tu_remove_dir(dir);
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (v[0][i] != v[1][i]) fail_msg("%s: %.17g then %.17g", keys[i], v[0][i], v[1][i]);
    assert_string_equal(fp[0], fp[1]);
    assert_int_equal(strlen(fp[0]), 16);
    free(p);
}

/* --refine (xs_search_refined) on cnn_bn_train's training graph, one thread, 400 states: the
 * first search is plain Algorithm 3 with a quarter of them (XS_REFINE_FIRST_SHARE: the same as a
 * run with 100), the three
 * latency-bounded rounds run because it met the limit, the plan is within the limit and never
 * slower than that first search's, it verifies and measures its peak, and two runs agree. */
static void test_refine(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], fp[2][32];
    double lat[2];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --mem-limit 0.8 --threads 1 "
             "--seed 1 --max-states 100 --time 60 -o %s/plain --json --quiet",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("plain: exit %d: %s", p->rc, p->err);
    double plain_lat = tu_json_num(p->out, "best_latency_seconds");
    assert_null(strstr(p->out, "\"refine\""));
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 "optimize " FIX "cnn_bn_train/model.onnx --train --mem-limit 0.8 --refine "
                 "--threads 1 --seed 1 --max-states 400 --time 60 -o %s/refined%d --json --quiet",
                 dir, k);
        tu_magpie(p, args);
        if (p->rc != 0) fail_msg("refined: exit %d: %s", p->rc, p->err);
        assert_non_null(strstr(p->out, "\"met\":true"));
        char *ref = strstr(p->out, "\"refine\":{");
        assert_non_null(ref);
        assert_int_equal(tu_json_num(ref, "rounds"), 3);
        lat[k] = tu_json_num(p->out, "best_latency_seconds");
        assert_true(lat[k] <= plain_lat);
        tu_json_str(p->out, "best_fingerprint", fp[k], sizeof fp[k]);
    }
    assert_true(lat[0] == lat[1]);
    assert_string_equal(fp[0], fp[1]);
    char plan[128], run[128];
    snprintf(plan, sizeof plan, "%s/refined1/optimized.onnx", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    expect_plan_checks(p, "refine", "cnn_bn_train", "--train", plan, run,
                       tu_json_num(p->out, "best_peak_bytes"));
    tu_remove_dir(dir);
    free(p);
}

/* One rule family alone on cnn_bn_train's training graph: its rewrite is applied (key, a
 * counter of report.json's "rules"), and the plan is equivalent and measures the reported peak.
 * Fission gets a looser latency limit: on a graph this small its slices and assembles cost ~10%
 * in kernel launches. */
static void check_family(const char *family, const char *key, const char *lat_limit) {
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit %s --rules %s "
             "--threads 1 --seed 1 --max-states 60 --time 60 -o %s --json --quiet",
             lat_limit, family, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("%s: optimize exit %d: %s", family, p->rc, p->err);
    char *rules = strstr(p->out, "\"rules\":{");
    assert_non_null(rules);
    if (tu_json_num(rules, key) < 1) fail_msg("%s: no %s applied: %s", family, key, p->out);
    double best = tu_json_num(p->out, "best_peak_bytes");
    assert_true(best < tu_json_num(p->out, "baseline_peak_bytes"));
    char want[64];
    snprintf(want, sizeof want, "\"rule_families\":[\"%s\"]", family);
    assert_non_null(strstr(p->out, want));
    if (!strcmp(family, "fission")) {
        assert_true(tu_json_num(p->out, "fission_nodes") > 0);
        assert_non_null(strstr(p->out, "\"fissions\":[{"));
        assert_true(tu_json_num(p->out, "parts") >= 2);
    }
    if (!strcmp(family, "swap")) assert_true(tu_json_num(p->out, "store_nodes") > 0);

    char plan[128], run[128];
    snprintf(plan, sizeof plan, "%s/optimized.onnx", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    expect_plan_checks(p, family, "cnn_bn_train", "--train", plan, run, best);
    tu_remove_dir(dir);
    free(p);
}

static void test_fission_alone(void **state) {
    (void)state;
    check_family("fission", "ft-enable", "1.5");
}

static void test_remat_alone(void **state) {
    (void)state;
    check_family("remat", "remat", "1.10");
}

static void test_swap_alone(void **state) {
    (void)state;
    check_family("swap", "swap", "1.10");
}

/* report.json: the fields the issue names, consistent with each other, with --json's object
 * and with schedule.json; memory.svg with both series; --max-frontier respected. */
static void test_report_schedule_plot(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --threads 2 "
             "--max-states 200 --max-frontier 5 --time 60 -o %s --json --quiet",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize exit %d: %s", p->rc, p->err);
    snprintf(path, sizeof path, "%s/report.json", dir);
    char *rep = read_file(path);
    /* --json printed the same object */
    assert_true(strncmp(rep, p->out, strlen(p->out)) == 0);
    static const char *const keys[] = {"baseline_peak_bytes",
                                       "baseline_latency_seconds",
                                       "best_peak_bytes",
                                       "best_latency_seconds",
                                       "states_explored",
                                       "states_per_second",
                                       "states_expanded",
                                       "peak_ratio",
                                       "latency_ratio",
                                       "nodes",
                                       "threads"};
    double v[sizeof keys / sizeof keys[0]];
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        v[i] = tu_json_num(rep, keys[i]);
        if (!(v[i] > 0)) fail_msg("%s = %g", keys[i], v[i]);
    }
    assert_true(fabs(v[7] - v[2] / v[0]) <= 1e-9 * v[7]);
    assert_true(fabs(v[8] - v[3] / v[1]) <= 1e-9 * v[8]);
    assert_true(v[4] >= v[6]); /* explored (generated + start) >= expanded */
    assert_int_equal((int)v[10], 2);
    /* states per second over the search's wall time */
    char *wall = strstr(rep, "\"wall_seconds\":{");
    assert_non_null(wall);
    double search_s = tu_json_num(wall, "search");
    assert_true(fabs(v[5] - v[4] / search_s) <= 1e-6 * v[5]);
    /* the workers' phases: each present, none negative, together at most 2 threads' time */
    char *ph = strstr(rep, "\"phase_seconds\":{");
    assert_non_null(ph);
    static const char *const phases[] = {"rewrite",  "hash",       "schedule",
                                         "simulate", "candidates", "replay"};
    double sum = 0;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        double t = tu_json_num(ph, phases[i]);
        assert_true(t >= 0);
        sum += t;
    }
    assert_true(tu_json_num(ph, "schedule") > 0);
    assert_true(sum <= 2 * search_s + 0.05);
    /* the rules applied: one counter per rewrite kind, subst rules by name */
    char *rules = strstr(rep, "\"rules\":{");
    assert_non_null(rules);
    static const char *const kinds[] = {"remat",     "deremat", "swap",       "deswap",   "subst",
                                        "ft-enable", "ft-lift", "ft-disable", "ft-mutate"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        assert_true(tu_json_num(rules, kinds[i]) >= 0);
    assert_non_null(strstr(rep, "\"subst_rules\":{"));
    assert_non_null(
        strstr(rep, "\"rule_families\":[\"fission\",\"remat\",\"swap\",\"reorder\",\"subst\"]"));
    /* the frontier bound */
    char *fr = strstr(rep, "\"frontier\":{");
    assert_non_null(fr);
    assert_true(tu_json_num(fr, "max") == 5);
    assert_true(tu_json_num(fr, "peak") <= 5 + 2); /* per worker ceil(5/2) plus a new best each */
    assert_true(tu_json_num(fr, "evicted") + tu_json_num(fr, "dropped") > 0);
    free(rep);

    /* schedule.json: one step per node of the plan, the reported peak, steps numbered */
    snprintf(path, sizeof path, "%s/schedule.json", dir);
    char *sch = read_file(path);
    assert_true(tu_json_num(sch, "version") == 1);
    assert_true(tu_json_num(sch, "peak_bytes") == v[2]);
    int steps = 0;
    size_t max_dev = 0;
    for (char *q = sch; (q = strstr(q, "{\"step\":")); q++) {
        assert_int_equal((int)strtol(q + 8, NULL, 10), steps);
        size_t dev = (size_t)tu_json_num(q, "device_bytes");
        if (dev > max_dev) max_dev = dev;
        steps++;
    }
    assert_int_equal(steps, (int)v[9]);
    assert_true((double)max_dev <= v[2]);
    free(sch);

    /* memory.svg: an SVG with the plan and the eager order */
    snprintf(path, sizeof path, "%s/memory.svg", dir);
    char *svg = read_file(path);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
    assert_non_null(strstr(svg, "optimized plan (peak"));
    assert_non_null(strstr(svg, "eager order (peak"));
    assert_non_null(strstr(svg, "stroke-dasharray=\"6,3\" d=\"M"));
    free(svg);
    tu_remove_dir(dir);
    free(p);
}

/* Without a terminal the progress is plain lines on stderr (at least the final one), nothing on
 * stdout but the JSON; --quiet prints nothing. */
static void test_progress_lines(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --threads 1 "
             "--max-states 30 --time 60 -o %s --json",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize exit %d: %s", p->rc, p->err);
    assert_true(p->out[0] == '{');
    assert_null(strchr(p->err, '\r'));
    int lines = 0;
    unsigned long long last_states = 0;
    for (char *line = p->err; *line;) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = 0;
        double secs, rate, peak, lat;
        unsigned long long states, frontier;
        if (sscanf(line,
                   "magpie: optimize %lfs %llu states (%lf/s) frontier %llu best peak %lfx "
                   "latency %lfx",
                   &secs, &states, &rate, &frontier, &peak, &lat) != 6)
            fail_msg("progress line '%s'", line);
        assert_true(secs >= 0 && states >= 1 && peak > 0 && peak <= 1.0 && lat > 0);
        last_states = states;
        lines++;
        line = end + 1;
    }
    assert_true(lines >= 1);
    /* the final line carries the whole search */
    if (last_states != (unsigned long long)tu_json_num(p->out, "states_explored"))
        fail_msg("last progress line: %llu states, report: %s", last_states, p->out);

    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --threads 1 "
             "--max-states 30 --time 60 -o %s --json --quiet",
             dir);
    tu_magpie(p, args);
    assert_int_equal(p->rc, 0);
    assert_string_equal(p->err, "");
    tu_remove_dir(dir);
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
        "--mem-limit 0.5 --rules remat,bogus",
        "--mem-limit 0.5 --rules remat,",
        "--mem-limit 0.5 --max-frontier 0",
        "--mem-limit 0.5 --max-frontier 12x",
        "--mem-limit 0.5 --threads 0",
        "--mem-limit 0.5 --time 1MiB",
        "--mem-limit 0.5 --max-states 0",
        "--mem-limit 0.5 --delta 0.5",
        "--lat-limit 1.1 --refine",
        "--mem-limit 0.5 --refine --checkpoint /tmp/magpie-refine-never.ckpt",
    };
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[512], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "optimize " FIX "resnet_small/model.onnx %s -o %s/out", bad[i],
                 dir);
        tu_magpie(p, args);
        if (p->rc != 2) fail_msg("'%s': exit %d, expected 2", bad[i], p->rc);
        assert_string_equal(p->out, "");
        assert_non_null(strstr(p->err, "magpie:"));
        snprintf(path, sizeof path, "%s/out", dir);
        if (tu_exists(path)) fail_msg("'%s' left %s", bad[i], path);
    }
    tu_remove_dir(dir);
    free(p);
}

static void test_verify_mismatch_exits_3(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    tu_magpie(p, "verify " FIX "resnet_small/model.onnx " FIX "densenet_small/model.onnx --json");
    assert_int_equal(p->rc, 3);
    assert_non_null(strstr(p->out, "\"match\":false"));
    assert_non_null(strstr(p->out, "\"agrees\":false"));
    /* --rtol and --k reach the criterion: the two models' outputs are as large as their
     * difference, so a tolerance of 100 times the norm lets them agree; zero, negative or
     * non-numeric values are usage errors */
    tu_magpie(p, "verify " FIX "resnet_small/model.onnx " FIX
                 "densenet_small/model.onnx --rtol 100 --k 0 --json");
    assert_int_equal(p->rc, 0);
    assert_non_null(strstr(p->out, "\"agrees\":true"));
    assert_non_null(strstr(p->out, "\"rtol\":100"));
    assert_non_null(strstr(p->out, "\"k\":0"));
    const char *bad[] = {"--rtol 0", "--rtol -1", "--rtol x", "--k -1", "--k inf"};
    for (int i = 0; i < 5; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "verify " FIX "resnet_small/model.onnx " FIX "resnet_small/model.onnx %s", bad[i]);
        tu_magpie(p, args);
        assert_int_equal(p->rc, 2);
        assert_non_null(strstr(p->err, bad[i][2] == 'r' ? "--rtol" : "--k"));
    }
    free(p);
}

/* ---------------------------------------------------------------- --pet (PET in the search) */

/* blocks of two parallel 3x3 convolutions reading one activation, weights as initializers:
 * PET merges each pair into one convolution on concatenated weights (merged-parallel), which
 * the search pre-computes. Written to path as ONNX. */
static void write_pet_model(const char *path, int blocks) {
    ir_graph *g = pb_parallel_blocks(blocks, 8, 16);
    g->name = ir_graph_strdup(g, "pet_blocks");
    ir_diag d = {{0}};
    if (ir_onnx_save(g, path, &d) != IR_OK) fail_msg("save %s: %s", path, d.msg);
    ir_graph_free(g);
}

/* `magpie verify MODEL PLAN` must match. */
static void expect_verified(tu_proc *p, const char *model, const char *plan) {
    char args[512];
    snprintf(args, sizeof args, "verify %s %s --json", model, plan);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("verify exit %d: %s %s", p->rc, p->out, p->err);
    assert_non_null(strstr(p->out, "\"match\":true"));
}

/* --pet alone: no limit, pet and subst; the plan verifies; report.json has the pet object with
 * its counters. --pet --rules pet: the mutants alone are applied (merged-parallel), the plan is
 * faster and verifies. */
static void test_pet_plan(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], model[128], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(model, sizeof model, "%s/blocks.onnx", dir);
    write_pet_model(model, 3);
    snprintf(args, sizeof args,
             "optimize %s --pet --device analytic:rtx3090 --time 3s -o %s/plan --json --quiet",
             model, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize --pet exit %d: %s", p->rc, p->err);
    assert_non_null(strstr(p->out, "\"given\":\"none\""));
    assert_non_null(strstr(p->out, "\"rule_families\":[\"subst\",\"pet\"]"));
    assert_true(tu_json_num(p->out, "best_latency_seconds") <=
                tu_json_num(p->out, "baseline_latency_seconds"));
    snprintf(path, sizeof path, "%s/plan/report.json", dir);
    char *rep = read_file(path);
    const char *pet = strstr(rep, "\"pet\":{");
    if (!pet) fail_msg("no pet object in report.json: %s", rep);
    assert_int_equal(tu_json_num(pet, "subprograms"), 3);
    assert_true(tu_json_num(pet, "candidates") >= 3);
    assert_true(tu_json_num(pet, "mutants") >= tu_json_num(pet, "candidates"));
    assert_true(tu_json_num(pet, "box_tests") > 0);
    assert_non_null(strstr(pet, "\"applied\":["));
    free(rep);
    snprintf(path, sizeof path, "%s/plan/optimized.onnx", dir);
    expect_verified(p, model, path);

    snprintf(args, sizeof args,
             "optimize %s --pet --rules pet --device analytic:rtx3090 --threads 1 --seed 1 "
             "--time 60 -o %s/alone --json --quiet",
             model, dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize --pet --rules pet exit %d: %s", p->rc, p->err);
    const char *rules = strstr(p->out, "\"rules\":{");
    assert_non_null(rules);
    assert_int_equal(tu_json_num(rules, "pet"), 3); /* one candidate per block */
    assert_int_equal(tu_json_num(rules, "subst"), 0);
    assert_non_null(strstr(p->out, "\"class\":\"merged-parallel\""));
    assert_non_null(strstr(p->out, "\"subprogram\":\"conv0a\""));
    assert_true(tu_json_num(p->out, "predicted_gain") > 1.0);
    assert_true(tu_json_num(p->out, "best_latency_seconds") <
                tu_json_num(p->out, "baseline_latency_seconds"));
    snprintf(path, sizeof path, "%s/alone/optimized.onnx", dir);
    expect_verified(p, model, path);
    tu_remove_dir(dir);
    free(p);
}

/* One thread, seed 1: two runs to K states give the same plan; K/2 with a checkpoint resumed to
 * K gives the same plan as one run to K (the PET table is rebuilt from the model on resume, so
 * the checkpointed RW_PET rewrites name the same candidates). */
static void test_pet_deterministic_resume(void **state) {
    (void)state;
    enum { K = 12 };
    static const char *const keys[] = {"best_peak_bytes", "best_latency_seconds", "candidates"};
    tu_proc *p = malloc(sizeof *p);
    char dir[64], model[128], args[1024], fp[3][32], pa[256], pb[256];
    double v[3][3], pets[3];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(model, sizeof model, "%s/blocks.onnx", dir);
    write_pet_model(model, 4);
    const char *common = "--pet --rules pet --device analytic:rtx3090 --threads 1 --seed 1 "
                         "--time 60 --json --quiet";
    for (int run = 0; run < 3; run++) {
        if (run < 2)
            snprintf(args, sizeof args, "optimize %s %s --max-states %d -o %s/run%d", model, common,
                     K, dir, run);
        else
            snprintf(args, sizeof args,
                     "optimize %s %s --max-states %d --checkpoint %s/ck -o %s/half", model, common,
                     K / 2, dir, dir);
        tu_magpie(p, args);
        if (p->rc != 0) fail_msg("run %d: exit %d: %s", run, p->rc, p->err);
        if (run == 2) { /* resume the half search to K */
            snprintf(args, sizeof args, "resume %s/ck --max-states %d -o %s/run2 --json --quiet",
                     dir, K, dir);
            tu_magpie(p, args);
            if (p->rc != 0) fail_msg("resume: exit %d: %s", p->rc, p->err);
            assert_int_equal(tu_json_num(p->out, "resumes"), 1);
        }
        for (int k = 0; k < 3; k++) v[run][k] = tu_json_num(p->out, keys[k]);
        pets[run] = tu_json_num(strstr(p->out, "\"rules\":{"), "pet");
        tu_json_str(p->out, "best_fingerprint", fp[run], sizeof fp[run]);
    }
    assert_true(pets[0] >= 1);
    for (int run = 1; run < 3; run++) {
        for (int k = 0; k < 3; k++)
            if (v[run][k] != v[0][k])
                fail_msg("run %d: %s %.17g, first run %.17g", run, keys[k], v[run][k], v[0][k]);
        assert_true(pets[run] == pets[0]);
        assert_string_equal(fp[run], fp[0]);
        snprintf(pa, sizeof pa, "cmp -s %s/run0/optimized.onnx %s/run%d/optimized.onnx", dir, dir,
                 run);
        if (system(pa) != 0) fail_msg("run %d: optimized.onnx differs", run);
    }
    snprintf(pb, sizeof pb, "%s/run2/optimized.onnx", dir);
    expect_verified(p, model, pb);
    tu_remove_dir(dir);
    free(p);
}

/* --pet is an inference-graph feature: with --train it is a usage error that writes nothing. */
static void test_pet_train_refused(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[512], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --pet --time 1 -o %s/plan --json",
             dir);
    tu_magpie(p, args);
    assert_int_equal(p->rc, 2);
    assert_non_null(strstr(p->err, "--train"));
    assert_int_equal(p->out[0], 0);
    snprintf(path, sizeof path, "%s/plan", dir);
    assert_false(tu_exists(path));
    tu_remove_dir(dir);
    free(p);
}

/* A model exported with a dynamic batch (transformer_encoder's 'batch'): --shape batch=4 binds
 * it once, for the search and for the plan written after it, which has the bound shapes; the
 * plan reads back, its report is written, and verify with the same --shape finds it equal. */
static void test_symbolic_shape(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(args, sizeof args,
             "optimize " FIX "transformer_encoder/model.onnx --shape batch=4 --train --loss mse "
             "--lat-limit 1.10 --max-states 200 --threads 1 -o %s/plan --json --quiet",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize exit %d: %s", p->rc, p->err);
    assert_string_equal(p->err, "");
    double best = tu_json_num(p->out, "best_peak_bytes");
    assert_true(best > 0 && best <= tu_json_num(p->out, "baseline_peak_bytes"));
    static const char *const files[] = {"optimized.onnx", "schedule.json", "report.json",
                                        "memory.svg"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/plan/%s", dir, files[i]);
        if (!tu_exists(path)) fail_msg("%s missing", path);
    }
    snprintf(args, sizeof args, "inspect %s/plan/optimized.onnx --json", dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("inspect of the plan: exit %d: %s", p->rc, p->err);
    assert_non_null(strstr(p->out, "{\"name\":\"src\",\"dtype\":\"float32\",\"shape\":[4,16,32]}"));
    snprintf(args, sizeof args,
             "verify " FIX "transformer_encoder/model.onnx %s/plan/optimized.onnx --shape batch=4 "
             "--train --loss mse --json",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("verify exit %d: %s %s", p->rc, p->out, p->err);
    assert_non_null(strstr(p->out, "\"match\":true"));
    tu_remove_dir(dir);
    free(p);
}

/* An output directory that cannot be made (under a regular file, which even root cannot
 * create) is refused before the search: exit 2 at once, one line naming it, no progress line
 * (the search never started), nothing written; a model that fails to load leaves no directory
 * it would have made. */
static void test_unwritable_out_dir(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[256];
    tu_make_dir(dir, sizeof dir, "opt");
    snprintf(path, sizeof path, "%s/file", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a directory\n", f);
    fclose(f);
    snprintf(args, sizeof args,
             "optimize " FIX "cnn_bn_train/model.onnx --train --lat-limit 1.10 --time 60 "
             "--threads 1 -o %s/file/plan --json",
             dir);
    double t0 = ir_now_seconds();
    tu_magpie(p, args);
    double t = ir_now_seconds() - t0;
    if (p->rc != 2) fail_msg("exit %d, expected 2: %s", p->rc, p->err);
    assert_string_equal(p->out, "");
    assert_non_null(strstr(p->err, "file/plan"));
    assert_null(strstr(p->err, "states")); /* no progress line: no search */
    assert_int_equal(strchr(p->err, '\n') - p->err + 1, (long)strlen(p->err)); /* one line */
    assert_true(t < 30); /* not the 60 s budget */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));

    snprintf(args, sizeof args, "optimize %s/missing.onnx --lat-limit 1.10 -o %s/new/plan", dir,
             dir);
    tu_magpie(p, args);
    assert_int_equal(p->rc, 2);
    snprintf(path, sizeof path, "%s/new", dir);
    if (tu_exists(path)) fail_msg("a failed load left %s", path);
    tu_remove_dir(dir);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet_small),
        cmocka_unit_test(test_unet_transpose),
        cmocka_unit_test(test_cnn_bn_train),
        cmocka_unit_test(test_impossible_limit_exits_3),
        cmocka_unit_test(test_deterministic_one_thread),
        cmocka_unit_test(test_refine),
        cmocka_unit_test(test_fission_alone),
        cmocka_unit_test(test_remat_alone),
        cmocka_unit_test(test_swap_alone),
        cmocka_unit_test(test_report_schedule_plot),
        cmocka_unit_test(test_progress_lines),
        cmocka_unit_test(test_bad_limits_exit_2),
        cmocka_unit_test(test_verify_mismatch_exits_3),
        cmocka_unit_test(test_pet_plan),
        cmocka_unit_test(test_pet_deterministic_resume),
        cmocka_unit_test(test_pet_train_refused),
        cmocka_unit_test(test_symbolic_shape),
        cmocka_unit_test(test_unwritable_out_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
