/* test_optimize_plan_figures.c - the search's figures of its best state are the written plan's:
 * `magpie optimize` reports the peak and latency the search computed for its best state
 * (report.json `search_best_peak_bytes`, `search_best_latency_seconds`, on the one-copy graph of
 * a plan with a fission) and those of optimized.onnx read back in file order (`best_*`), and
 * `magpie schedule PLAN --order eager` reads the plan back once more (`eager_*`, the file's order,
 * swaps as written). All three must agree: the search prunes and chooses on its own figure, so a
 * state whose figure is not its plan's is judged wrongly.
 *
 * The case: an nn.TransformerEncoder training graph (transformer_encoder_op17 bound to batch 64,
 * mse, SGD) under --lat-limit 2 with fission, swap and reorder, one thread, seed 1, 150 states.
 * Its best state has a 2-part batch fission and swaps of attention tensors that their late
 * readers read through views (a transposed operand of a Softmax output): a swap left the original
 * views in the graph with no reader, which the search costed (a Transpose no MatMul reads is a
 * copy again, and a fissioned Reshape holds a shape constant of its own) and the written plan did
 * not have (the importer drops nodes nobody reads): 2.5 % of the latency and 16 bytes apart. */
#include "test-util.h"

#include <math.h>

static void expect_same(const char *what, double search, double plan) {
    /* the same sums over the same steps: equal up to rounding at most */
    if (!(fabs(search - plan) <= 1e-9 * fabs(plan)))
        fail_msg("%s: the search says %.17g, the written plan %.17g", what, search, plan);
}

static void test_search_figures_are_the_plan_s(void **state) {
    (void)state;
    tu_proc *p = malloc(sizeof *p);
    char dir[64], args[1024], path[128];
    tu_make_dir(dir, sizeof dir, "planfig");
    snprintf(args, sizeof args,
             "optimize tests/fixtures/numeric/transformer_encoder_op17/model.onnx --shape batch=64 "
             "--train --loss mse --optimizer sgd --lat-limit 2 --rules fission,swap,reorder "
             "--device analytic:rtx3090 --threads 1 --seed 1 --max-states 150 --time 60 -o %s/plan "
             "--json --quiet",
             dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("optimize exit %d: %s", p->rc, p->err);
    snprintf(path, sizeof path, "%s/plan/report.json", dir);
    char *rep = tu_read_all(path, NULL);
    assert_non_null(rep);
    /* the case this test is about: a fission, and swaps */
    char *fis = strstr(rep, "\"fissions\":[{");
    if (!fis) fail_msg("no fission in the best state: %s", rep);
    assert_true(tu_json_num(fis, "parts") >= 2);
    assert_true(tu_json_num(rep, "store_nodes") > 0);

    double s_peak = tu_json_num(rep, "search_best_peak_bytes");
    double s_lat = tu_json_num(rep, "search_best_latency_seconds");
    expect_same("report.json peak", s_peak, tu_json_num(rep, "best_peak_bytes"));
    expect_same("report.json latency", s_lat, tu_json_num(rep, "best_latency_seconds"));

    snprintf(args, sizeof args, "schedule %s/plan/optimized.onnx --order eager --json", dir);
    tu_magpie(p, args);
    if (p->rc != 0) fail_msg("schedule exit %d: %s", p->rc, p->err);
    expect_same("schedule peak", s_peak, tu_json_num(p->out, "eager_peak_bytes"));
    expect_same("schedule latency", s_lat, tu_json_num(p->out, "eager_latency_seconds"));
    free(rep);
    tu_remove_dir(dir);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_figures_are_the_plan_s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
