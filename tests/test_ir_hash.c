/* test_ir_hash.c - the structural fingerprint (ir/ir-hash.c): free of node names, ids and order;
 * it tells apart a value rematerialized for one user from the same value rematerialized for
 * another; and the incremental update equals the full hash after every rewrite of seeded random
 * sequences of remat, swap, their inverses and substitutions on training graphs, with the
 * touched ids rw_apply reports. */
#include "test-util.h"

#include "ir-autodiff.h"
#include "rules.h"
#include "schedule.h"

#define MAX_CAND 4096

/* x -> Relu a read by Neg b, Exp c and Sigmoid e, with a rematerialized (a2) for e, or for c:
 * the two graphs are not isomorphic (b and c share a producer in one only), though their nodes'
 * forward hashes are the same multiset. */
static ir_graph *twin_graph(bool remat_for_c) {
    ir_graph *g = ir_graph_new();
    ir_shape s = tu_shape(1, 8);
    int x = ir_graph_add_value(g, "x", IR_F32, &s);
    ir_graph_add_input(g, x);
    int a, a2, b, c, e;
    tu_add_node1(g, IR_OP_Relu, "a", 1, &x, 0, NULL, &a);
    tu_add_node1(g, IR_OP_Relu, "a2", 1, &x, 0, NULL, &a2);
    tu_add_node1(g, IR_OP_Neg, "b", 1, &a, 0, NULL, &b);
    tu_add_node1(g, IR_OP_Exp, "c", 1, remat_for_c ? &a2 : &a, 0, NULL, &c);
    tu_add_node1(g, IR_OP_Sigmoid, "e", 1, remat_for_c ? &a : &a2, 0, NULL, &e);
    ir_graph_add_output(g, b);
    ir_graph_add_output(g, c);
    ir_graph_add_output(g, e);
    return g;
}

static void test_twins_differ(void **state) {
    (void)state;
    ir_graph *g1 = twin_graph(false), *g2 = twin_graph(true);
    assert_true(ir_graph_hash(g1) != ir_graph_hash(g2));
    ir_graph_free(g1);
    ir_graph_free(g2);
}

/* Node order and names do not matter: the same graph built with its two independent branches in
 * the other order, under other names, hashes alike. */
static void test_order_and_names_free(void **state) {
    (void)state;
    ir_graph *g[2];
    for (int k = 0; k < 2; k++) {
        g[k] = ir_graph_new();
        ir_shape s = tu_shape(1, 8);
        int x = ir_graph_add_value(g[k], "x", IR_F32, &s);
        ir_graph_add_input(g[k], x);
        int p, q;
        if (k == 0) {
            tu_add_node1(g[k], IR_OP_Relu, "p", 1, &x, 0, NULL, &p);
            tu_add_node1(g[k], IR_OP_Exp, "q", 1, &x, 0, NULL, &q);
        } else {
            tu_add_node1(g[k], IR_OP_Exp, "other_q", 1, &x, 0, NULL, &q);
            tu_add_node1(g[k], IR_OP_Relu, "other_p", 1, &x, 0, NULL, &p);
        }
        int in[2] = {p, q};
        int r;
        tu_add_node1(g[k], IR_OP_Add, k ? "sum2" : "sum", 2, in, 0, NULL, &r);
        ir_graph_add_output(g[k], r);
    }
    assert_true(ir_graph_hash(g[0]) == ir_graph_hash(g[1]));
    ir_graph_free(g[0]);
    ir_graph_free(g[1]);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Seeded random rewrite sequences: after each, the incremental hash from the parent's memo equals
 * the full hash, and the memo equals the one the full computation keeps. */
static void check_sequences(const char *model, int steps, int seeds) {
    ir_graph *g0 = tu_load_training(model, NULL);
    rw_rewrite *cand = malloc(sizeof(rw_rewrite) * MAX_CAND);
    assert_non_null(cand);
    int updates = 0;
    for (int seed = 1; seed <= seeds; seed++) {
        uint64_t rng = (uint64_t)seed * 1000003u;
        ir_graph *g = ir_graph_clone(g0);
        ir_hash_memo m;
        uint64_t h = ir_graph_hash_memo(g, &m);
        assert_true(h == ir_graph_hash(g));
        for (int step = 0; step < steps; step++) {
            ir_diag d = {{0}};
            sched_memory mem = {0};
            int *order = sched_eager_order(g);
            assert_non_null(order);
            assert_int_equal(sched_memory_compute(g, order, &mem, &d), IR_OK);
            int n = rw_candidates(g, &mem, true, cand, MAX_CAND);
            n += rw_subst_candidates(g, cand + n, MAX_CAND - n);
            sched_memory_free(&mem);
            free(order);
            if (n == 0) fail_msg("%s: no candidates at step %d", model, step);
            uint32_t touched[RW_MAX_TOUCHED];
            int nt = 0;
            ir_status st;
            ir_graph *g2 = NULL;
            /* candidates that do not apply here (rw_apply refuses them): pick another */
            for (int tries = 0; !g2 && tries < 50; tries++)
                g2 = rw_apply(g, &cand[rng_next(&rng) % (uint64_t)n], touched, &nt, &st, &d);
            if (!g2) fail_msg("%s: no candidate of %d applies: %s", model, n, d.msg);
            ir_hash_memo m2, full;
            uint64_t hu = ir_graph_hash_update(g2, g, &m, touched, nt, &m2);
            uint64_t hf = ir_graph_hash_memo(g2, &full);
            if (hu != hf)
                fail_msg("%s seed %d step %d: incremental hash differs", model, seed, step);
            assert_int_equal(m2.cap, full.cap);
            assert_true(m2.sum == full.sum);
            assert_memory_equal(m2.x, full.x, sizeof(uint64_t) * m2.cap);
            assert_memory_equal(m2.z, full.z, sizeof(uint64_t) * m2.cap);
            ir_hash_memo_free(&full);
            ir_hash_memo_free(&m);
            m = m2;
            ir_graph_free(g);
            g = g2;
            updates++;
        }
        ir_hash_memo_free(&m);
        ir_graph_free(g);
    }
    assert_true(updates >= seeds * steps / 2); /* the property was exercised */
    free(cand);
    ir_graph_free(g0);
}

static void test_incremental_mlp(void **state) {
    (void)state;
    check_sequences("mlp_dropout_train", 12, 4);
}

static void test_incremental_gpt(void **state) {
    (void)state;
    check_sequences("gpt_small_train", 10, 3);
}

static void test_incremental_transformer(void **state) {
    (void)state;
    check_sequences("transformer_encoder_train", 8, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twins_differ),
        cmocka_unit_test(test_order_and_names_free),
        cmocka_unit_test(test_incremental_mlp),
        cmocka_unit_test(test_incremental_gpt),
        cmocka_unit_test(test_incremental_transformer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
