/* test_prof_snapshot.c - cost-model snapshots (prof.h, "snapshots"): an analytic model's figures
 * installed by apply (every node of a real model costed by exactly the snapshot's roofline, the
 * target's name kept); a measured "cpu" model profiled, snapshotted, carried through a checkpoint
 * section (ckpt_put_profile / ckpt_get_profile) and applied to a fresh model, which then costs
 * every node bit for bit as the first, measures and calibrates nothing afterwards (signatures it
 * lacks fall back to the snapshot's roofline, as they did in the first) and saves nothing to its
 * database; a snapshot of another machine (its detail wins, with a warning); and a snapshot of
 * another device string refused, the model left as it was. */
#include "test-util.h"

#include "ckpt-search.h"
#include "prof-impl.h"
#include "prof.h"

#include <sys/stat.h>

/* ---------------------------------------------------------------- helpers */

static prof_model *open_ok(const char *device, const prof_options *o) {
    ir_diag d = {{0}};
    ir_status st = IR_ERR_INTERNAL;
    prof_model *m = prof_open(device, o, &st, &d);
    if (!m) fail_msg("prof_open(%s): %s", device, d.msg);
    return m;
}

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= IR_VF_INPUT;
    return v;
}

/* x -> Conv(w) -> Relu -> Add(y, y) -> MatMul(m): a few distinct signatures, small enough to time
 * in milliseconds. */
static ir_graph *small_graph(int64_t c, int64_t hw) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, c, hw, hw));
    int w = add_input(g, "w", TU_SHAPE(c, c, 3, 3));
    int m = add_input(g, "m", TU_SHAPE(hw, hw));
    static int64_t pads[4] = {1, 1, 1, 1}; /* attributes are copied shallowly: must outlive g */
    ir_attr a[1] = {tu_attr_ints("pads", 4, pads)};
    int y, r, s, o;
    tu_add_node1(g, IR_OP_Conv, "conv", 2, (int[]){x, w}, 1, a, &y);
    tu_add_node1(g, IR_OP_Relu, "relu", 1, (int[]){y}, 0, NULL, &r);
    tu_add_node1(g, IR_OP_Add, "add", 2, (int[]){r, r}, 0, NULL, &s);
    tu_add_node1(g, IR_OP_MatMul, "mm", 2, (int[]){s, m}, 0, NULL, &o);
    ir_graph_add_output(g, o);
    return g;
}

static ir_graph *load_fixture(const char *rel) {
    char path[1200];
    tu_src_path(rel, path, sizeof path);
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts io = {0};
    ir_graph *g = ir_onnx_load(path, &io, &st, &d);
    if (!g) fail_msg("import %s: %s", path, d.msg);
    return g;
}

/* Bit-for-bit equality of two models' costs of every node of g and of a few transfers. */
static void expect_same_costs(prof_model *a, prof_model *b, const ir_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        double x = prof_node_seconds(a, g, &g->nodes[i]), y = prof_node_seconds(b, g, &g->nodes[i]);
        if (memcmp(&x, &y, sizeof x) != 0)
            fail_msg("node %d (%s): %.17g s against %.17g s", i, g->nodes[i].name, x, y);
    }
    for (size_t bytes = 1; bytes < ((size_t)1 << 34); bytes *= 97) {
        double x = prof_transfer_seconds(a, bytes), y = prof_transfer_seconds(b, bytes);
        assert_memory_equal(&x, &y, sizeof x);
    }
}

typedef struct warnings {
    int n;
    char last[1024];
} warnings;

static void collect_warning(void *ctx, const char *msg) {
    warnings *w = ctx;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
}

/* The snapshot through a PROF section of a real container and back. */
static prof_snapshot through_checkpoint(const prof_snapshot *s) {
    ckpt_meta meta = {.model_path = "m.onnx"};
    ir_status st;
    ir_diag d = {{0}};
    ckpt_writer *w = ckpt_writer_init(&meta, &st, &d);
    assert_non_null(w);
    assert_int_equal(ckpt_put_profile(w, s, &d), IR_OK);
    uint8_t *buf;
    size_t n;
    assert_int_equal(ckpt_writer_encode(w, &buf, &n, &d), IR_OK);
    ckpt_reader *r = ckpt_open_mem(buf, n, "m.mpck", &st, &d);
    assert_non_null(r);
    prof_snapshot got;
    if (ckpt_get_profile(r, &got, &d) != IR_OK) fail_msg("get: %s", d.msg);
    ckpt_close(r);
    free(buf);
    ckpt_writer_free(w);
    return got;
}

/* ---------------------------------------------------------------- analytic models */

static void test_analytic_round_trip_and_figures(void **state) {
    (void)state;
    ir_graph *g = load_fixture("tests/fixtures/numeric/resnet_small/model.onnx");
    prof_model *a = open_ok("analytic:a100", NULL), *b = open_ok("analytic:a100", NULL);
    ir_diag d = {{0}};
    prof_snapshot s;
    assert_int_equal(prof_snapshot_take(a, &s, &d), IR_OK);
    assert_string_equal(s.device, "analytic:a100");
    assert_string_equal(s.detail, prof_device_detail(a));
    assert_false(s.measured);
    assert_int_equal(s.n_entries, 0);
    assert_null(s.entries);
    assert_null(s.fallback.name);
    assert_true(s.fallback.mm_f32_flops == prof_target_find("a100")->mm_f32_flops);
    assert_int_equal(prof_snapshot_apply(b, &s, &d), IR_OK);
    expect_same_costs(a, b, g);
    assert_string_equal(prof_fallback_target(b)->name, "a100"); /* name and description kept */

    /* apply installs the snapshot's figures, not the target's: every node is costed by the
     * roofline of exactly those figures */
    prof_target t = s.fallback;
    t.mem_bw *= 0.5;
    t.mm_f32_flops *= 0.25;
    t.launch_s = 7e-6;
    t.host_link_bw = 3e9;
    s.fallback = t;
    prof_model *c = open_ok("analytic:a100", NULL);
    assert_int_equal(prof_snapshot_apply(c, &s, &d), IR_OK);
    int differ = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        double want = prof_roofline_seconds(&t, g, n), got = prof_node_seconds(c, g, n);
        assert_memory_equal(&want, &got, sizeof want);
        differ += got != prof_node_seconds(a, g, n);
    }
    assert_true(differ == g->n_nodes); /* launch_s moved every node's cost */
    double tr = prof_transfer_seconds(c, 1 << 20), want_tr = prof_roofline_transfer(&t, 1 << 20);
    assert_memory_equal(&tr, &want_tr, sizeof tr);
    assert_string_equal(prof_fallback_target(c)->name, "a100");
    assert_int_equal(prof_profile_graph(c, g, &d), IR_OK);
    assert_memory_equal(&tr, &(double){prof_transfer_seconds(c, 1 << 20)}, sizeof tr);

    prof_snapshot_free(&s);
    prof_close(a);
    prof_close(b);
    prof_close(c);
    ir_graph_free(g);
}

static void test_device_mismatch_refused(void **state) {
    (void)state;
    ir_graph *g = small_graph(4, 8);
    prof_model *a = open_ok("analytic:a100", NULL), *b = open_ok("analytic:rtx3090", NULL);
    prof_model *ref = open_ok("analytic:rtx3090", NULL);
    ir_diag d = {{0}};
    prof_snapshot s;
    assert_int_equal(prof_snapshot_take(a, &s, &d), IR_OK);
    assert_int_equal(prof_snapshot_apply(b, &s, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'analytic:a100'"));
    assert_non_null(strstr(d.msg, "'analytic:rtx3090'"));
    expect_same_costs(b, ref, g); /* b is left as it was */
    prof_snapshot_free(&s);

    /* a cpu snapshot on an analytic model, and an analytic one on a cpu model */
    prof_options o = {.no_db = true, .runs = 1, .warmup = 1};
    prof_model *cpu = open_ok("cpu", &o);
    assert_int_equal(prof_snapshot_take(cpu, &s, &d), IR_OK);
    assert_true(s.measured);
    assert_int_equal(prof_snapshot_apply(b, &s, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'cpu'"));
    prof_snapshot_free(&s);
    assert_int_equal(prof_snapshot_take(b, &s, &d), IR_OK);
    assert_int_equal(prof_snapshot_apply(cpu, &s, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'analytic:rtx3090'"));
    /* the same device string but a snapshot that claims entries for an analytic model */
    prof_snapshot_entry e = {1, 1e-3, 1};
    s.entries = &e;
    s.n_entries = 1;
    assert_int_equal(prof_snapshot_apply(ref, &s, &d), IR_ERR_INVALID);
    s.entries = NULL;
    s.n_entries = 0;
    prof_snapshot_free(&s);
    prof_close(cpu);
    prof_close(a);
    prof_close(b);
    prof_close(ref);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- measured models */

static void test_cpu_snapshot_applied_bit_identical(void **state) {
    (void)state;
    ir_graph *g = small_graph(8, 16);
    ir_graph *g2 = small_graph(8, 24); /* signatures neither model measured */
    ir_diag d = {{0}};
    prof_options o = {.no_db = true, .runs = 1, .warmup = 1};
    prof_model *a = open_ok("cpu", &o);
    if (prof_profile_graph(a, g, &d) != IR_OK) fail_msg("profile: %s", d.msg);
    prof_stats sa;
    prof_get_stats(a, &sa);
    assert_int_equal(sa.measured, 4);

    prof_snapshot s0;
    assert_int_equal(prof_snapshot_take(a, &s0, &d), IR_OK);
    assert_true(s0.measured);
    assert_string_equal(s0.device, "cpu");
    assert_string_equal(s0.detail, prof_device_detail(a));
    assert_int_equal(s0.n_entries, (size_t)sa.db_entries); /* the ops and the calibrations */
    assert_true(s0.n_entries >= 4 + 5); /* 3 calibration ops, step overhead, transfer */
    for (size_t i = 1; i < s0.n_entries; i++)
        assert_true(s0.entries[i - 1].sig < s0.entries[i].sig);
    prof_snapshot s = through_checkpoint(&s0);

    /* a fresh model, given the snapshot instead of profiling */
    warnings w = {0};
    char dir[] = "/tmp/magpie-profsnap-XXXXXX", db[256];
    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof db, "%s/profile.db", dir);
    prof_options ob = {
        .db_path = db, .runs = 1, .warmup = 1, .warn = collect_warning, .warn_ctx = &w};
    prof_model *b = open_ok("cpu", &ob);
    if (prof_snapshot_apply(b, &s, &d) != IR_OK) fail_msg("apply: %s", d.msg);
    assert_int_equal(w.n, 0); /* the same machine: no warning */
    expect_same_costs(a, b, g);
    expect_same_costs(a, b, g2); /* unmeasured signatures: the same calibrated roofline */
    const prof_target *fa = prof_fallback_target(a), *fb = prof_fallback_target(b);
    assert_memory_equal(&fa->mm_f32_flops, &fb->mm_f32_flops, 7 * sizeof(double));
    prof_stats sb;
    prof_get_stats(b, &sb);
    assert_int_equal(sb.db_entries, sa.db_entries);
    assert_int_equal(sb.calibrated, sa.calibrated);

    /* profiling afterwards measures nothing, not even signatures the snapshot lacks */
    assert_int_equal(prof_profile_graph(b, g, &d), IR_OK);
    assert_int_equal(prof_profile_graph(b, g2, &d), IR_OK);
    prof_get_stats(b, &sb);
    assert_int_equal(sb.measured, 0);
    assert_int_equal(sb.db_entries, sa.db_entries);
    expect_same_costs(a, b, g);
    expect_same_costs(a, b, g2);
    /* the snapshot's entries are not this run's measurements: nothing is saved */
    prof_close(b);
    struct stat st;
    assert_int_not_equal(stat(db, &st), 0);
    rmdir(dir);

    /* a snapshot from another machine: its detail and costs win, with a warning */
    snprintf(s.detail, sizeof s.detail, "cpu: some other processor, 64 threads");
    prof_options oc = {.no_db = true, .runs = 1, .warn = collect_warning, .warn_ctx = &w};
    prof_model *c = open_ok("cpu", &oc);
    assert_int_equal(prof_snapshot_apply(c, &s, &d), IR_OK);
    assert_int_equal(w.n, 1);
    assert_non_null(strstr(w.last, "some other processor"));
    assert_string_equal(prof_device_detail(c), s.detail);
    expect_same_costs(a, c, g);
    expect_same_costs(a, c, g2);
    prof_get_stats(c, &sb);
    assert_int_equal(sb.db_entries, sa.db_entries);
    /* and its own snapshot is the same as the one applied */
    prof_snapshot s2;
    assert_int_equal(prof_snapshot_take(c, &s2, &d), IR_OK);
    assert_string_equal(s2.detail, s.detail);
    assert_int_equal(s2.n_entries, s.n_entries);
    for (size_t i = 0; i < s.n_entries; i++) {
        assert_true(s2.entries[i].sig == s.entries[i].sig);
        assert_memory_equal(&s2.entries[i].seconds, &s.entries[i].seconds, sizeof(double));
        assert_int_equal(s2.entries[i].runs, s.entries[i].runs);
    }
    assert_memory_equal(&s2.step_s, &s.step_s, sizeof s.step_s);
    prof_snapshot_free(&s2);
    prof_close(c);

    prof_snapshot_free(&s);
    prof_snapshot_free(&s0);
    prof_close(a);
    ir_graph_free(g);
    ir_graph_free(g2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_analytic_round_trip_and_figures),
        cmocka_unit_test(test_device_mismatch_refused),
        cmocka_unit_test(test_cpu_snapshot_applied_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
