/* test_pet_find.c - PET's candidates of a whole model (rules/pet/pet-find.c, pet-opt.h
 * pet_find_candidates) and their application (pet_apply), on a hand-built graph where a known
 * mutant class applies: blocks of two parallel 3x3 convolutions reading one activation (an
 * Inception-style branch pair), which PET merges into one convolution on concatenated weights
 * (merged-parallel). Checked:
 *  - the table is not empty, holds a merged-parallel candidate, every candidate is predicted
 *    faster than its sub-program by the minimum gain, in the documented order, and its
 *    replacement verifies equivalent to the sub-program it replaces (pet_verify through
 *    pet_verify_replacement, which lowers corrections);
 *  - the table is the same with 1 and 2 threads (candidates, replacements by structural hash,
 *    counters);
 *  - the best candidate applied with pet_apply gives a valid graph that executes to the
 *    original's outputs, and applying it again to that graph (its sub-program is gone) is
 *    refused with IR_ERR_INVALID, as the search relies on. */
#include "test-check.h"

#include "pet-build.h"

#include "pet-opt.h"
#include "pet-post.h"
#include "rt.h"
#include "rules.h"

#define C 8
#define HW 16

/* pb_parallel_blocks on C channels of HW x HW, validated. */
static ir_graph *parallel_blocks(int blocks) {
    ir_graph *g = pb_parallel_blocks(blocks, C, HW);
    ir_diag d = {{0}};
    if (ir_graph_validate(g, &d) != IR_OK) fail_msg("graph: %s", d.msg);
    return g;
}

/* The search's defaults (xs_pet_options) on the analytic model. */
static pet_find_opts find_opts(prof_model *m, int threads) {
    pet_find_opts o = {0};
    o.gen.depth = 3;
    o.gen.rounds = 1;
    o.gen.top_k = 32;
    o.gen.max_states = 1 << 18;
    o.gen.max_subsets = 16;
    o.gen.cost = m;
    o.verify.seed = 1;
    o.threads = threads;
    return o;
}

static pet_table *find(const ir_graph *g, prof_model *m, int threads) {
    pet_find_opts o = find_opts(m, threads);
    pet_table *t = NULL;
    ir_diag d = {{0}};
    if (pet_find_candidates(g, &o, &t, &d) != IR_OK) fail_msg("pet_find_candidates: %s", d.msg);
    assert_non_null(t);
    return t;
}

static void test_table_verified(void **state) {
    prof_model *m = *state;
    ir_graph *g = parallel_blocks(2);
    pet_table *t = find(g, m, 1);
    assert_int_equal(t->split->n, 2);
    assert_int_equal(t->subprogs, 2);
    assert_true(t->n > 0);
    assert_int_equal(t->kept, t->n);
    assert_true(t->mutants >= t->n);
    assert_true(t->verified + t->rejected >= t->n);
    assert_true(t->box_tests > 0);
    bool merged = false;
    for (int k = 0; k < t->n; k++) {
        const pet_candidate *c = &t->c[k];
        merged = merged || c->cls == PET_MC_MERGED_PARALLEL;
        /* the documented order: by sub-program, then by predicted gain, largest first */
        if (k > 0) {
            const pet_candidate *p = &t->c[k - 1];
            assert_true(p->subprog <= c->subprog);
            if (p->subprog == c->subprog)
                assert_true(p->orig_cost / p->cost >= c->orig_cost / c->cost);
        }
        assert_true(c->cost > 0 && c->cost < c->orig_cost * (1 - 0.02));
        assert_true(c->n_boxes >= 1);
        assert_true(c->false_accept_bound > 0 && c->false_accept_bound < 1e-9);
        assert_non_null(c->replacement);
        /* the replacement (mutant, corrections, post-optimizations) against the sub-program */
        ir_status st;
        ir_diag d = {{0}};
        ir_graph *prog = pet_subprog_extract(g, &t->split->progs[c->subprog], &st, &d);
        if (!prog) fail_msg("extract: %s", d.msg);
        pet_options vo = {.seed = 7, .threads = 1};
        pet_result r;
        if (pet_verify_replacement(prog, c->replacement, &vo, &r, &d) != IR_OK)
            fail_msg("candidate %d: %s", k, d.msg);
        if (!r.equivalent)
            fail_msg("candidate %d (%s) is not equivalent", k, pet_mutant_class_name(c->cls));
        pet_result_free(&r);
        ir_graph_free(prog);
    }
    assert_true(merged);
    pet_table_free(t);
    ir_graph_free(g);
}

static void test_threads_same_table(void **state) {
    prof_model *m = *state;
    ir_graph *g = parallel_blocks(3);
    pet_table *a = find(g, m, 1), *b = find(g, m, 2);
    assert_true(a->n > 0);
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->subprogs, b->subprogs);
    assert_int_equal(a->mutants, b->mutants);
    assert_int_equal(a->verified, b->verified);
    assert_int_equal(a->rejected, b->rejected);
    assert_int_equal(a->uncorrectable, b->uncorrectable);
    assert_int_equal(a->box_tests, b->box_tests);
    for (int k = 0; k < a->n; k++) {
        const pet_candidate *x = &a->c[k], *y = &b->c[k];
        assert_int_equal(x->subprog, y->subprog);
        assert_int_equal(x->cls, y->cls);
        assert_true(x->hash == y->hash);
        assert_int_equal(x->n_boxes, y->n_boxes);
        assert_int_equal(x->n_failed, y->n_failed);
        assert_int_equal(x->n_fused, y->n_fused);
        assert_true(x->cost == y->cost && x->orig_cost == y->orig_cost);
        assert_true(pet_gen_graph_hash(x->replacement) == pet_gen_graph_hash(y->replacement));
    }
    pet_table_free(a);
    pet_table_free(b);
    ir_graph_free(g);
}

static void run(const ir_graph *g, rt_result *r) {
    rt_options o = {.seed = 3, .fill_missing_data = true};
    ir_diag d = {{0}};
    if (rt_run(g, NULL, 0, &o, r, &d) != IR_OK) fail_msg("run: %s", d.msg);
}

static bool has_id(const ir_graph *g, uint32_t id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id == id) return true;
    return false;
}

static void test_apply_executes(void **state) {
    prof_model *m = *state;
    ir_graph *g = parallel_blocks(2);
    pet_table *t = find(g, m, 2);
    assert_true(t->n > 0);
    int best = 0;
    for (int k = 1; k < t->n; k++)
        if (t->c[k].orig_cost / t->c[k].cost > t->c[best].orig_cost / t->c[best].cost) best = k;
    uint32_t *touched = malloc(sizeof(uint32_t) * RW_MAX_FISSION_TOUCHED);
    int nt = 0;
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *h = pet_apply(g, t, best, touched, &nt, &st, &d);
    if (!h) fail_msg("pet_apply: %s", d.msg);
    if (ir_graph_validate(h, &d) != IR_OK) fail_msg("applied graph: %s", d.msg);
    const pet_subprog *sp = &t->split->progs[t->c[best].subprog];
    assert_true(nt > sp->n_nodes);
    for (int j = 0; j < sp->n_nodes; j++) assert_false(has_id(h, sp->node_ids[j]));
    assert_int_equal(h->n_outputs, g->n_outputs);
    tu_ref r0;
    rt_result r1;
    tu_ref_run(g, NULL, 0, &(rt_options){.seed = 3, .fill_missing_data = true}, &r0, "original");
    run(h, &r1);
    assert_int_equal(r0.r32.n_outputs, r1.n_outputs);
    tu_expect_close(&r0, h, &r1, "applied");
    tu_ref_free(&r0);
    rt_result_free(&r1);
    /* its sub-program is gone: the candidate no longer applies */
    ir_graph *again = pet_apply(h, t, best, touched, &nt, &st, &d);
    assert_null(again);
    assert_int_equal(st, IR_ERR_INVALID);
    ir_graph_free(h);
    free(touched);
    pet_table_free(t);
    ir_graph_free(g);
}

static int setup(void **state) {
    *state = tu_analytic_cost();
    return *state ? 0 : -1;
}

static int teardown(void **state) {
    prof_close(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_verified),
        cmocka_unit_test(test_threads_same_table),
        cmocka_unit_test(test_apply_executes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
