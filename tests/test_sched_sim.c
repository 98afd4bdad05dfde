/* test_sched_sim.c - the simulator (sched-sim.c) and swap placement (sched-swap.c) on hand-built
 * graphs under the analytic rtx3090 model: a pure chain takes the sum of its costs; a Load still
 * in flight delays its user; the device peak and bytes per step are sched_memory_compute's; Store
 * outputs count as host bytes only; the executor measures the same device and host peaks; placed
 * swaps are never slower than naive ones and keep the device peak accounting; a Store and a Load
 * overlap on the two copy streams. */
#include "test-util.h"

#include "prof.h"
#include "rt.h"
#include "schedule.h"

#define MIB ((size_t)1 << 20)

static prof_model *cost;

static int setup(void **state) {
    (void)state;
    cost = tu_analytic_cost();
    return cost ? 0 : -1;
}

static int teardown(void **state) {
    prof_close(cost);
    return 0;
}

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= IR_VF_DATA;
    return v;
}

/* Adds a one-output node and infers it; returns the node index, *out its output. */
static int add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                    int *out) {
    return tu_add_node1(g, op, name, n_in, in, 0, NULL, out);
}

/* 1 MiB activations: x[1,64,64,64] -> a = Relu(x) -> h = Store(a); b = Relu(x); c = Relu(b);
 * l = Load(h); y = Add(l, c). Node indices 0..5 in that order. */
static ir_graph *swap_graph(void) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 64, 64, 64));
    int a, h, b, c, l, y;
    add_node(g, IR_OP_Relu, "a", 1, &x, &a);
    add_node(g, IR_OP_Store, "store", 1, &a, &h);
    add_node(g, IR_OP_Relu, "b", 1, &x, &b);
    add_node(g, IR_OP_Relu, "c", 1, &b, &c);
    add_node(g, IR_OP_Load, "load", 1, &h, &l);
    add_node(g, IR_OP_Add, "y", 2, (int[]){l, c}, &y);
    ir_graph_add_output(g, y);
    return g;
}

static void simulate(const ir_graph *g, const int *order, sched_sim *s) {
    ir_diag d = {{0}};
    if (sched_simulate(g, order, cost, s, &d) != IR_OK) fail_msg("simulate: %s", d.msg);
}

static void test_chain_latency_is_sum(void **state) {
    ir_graph *g = ir_graph_new();
    int v = add_input(g, "x", TU_SHAPE(1, 32, 32, 32));
    double sum = 0;
    for (int i = 0; i < 6; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "r%d", i);
        int k = add_node(g, i % 2 ? IR_OP_Relu : IR_OP_Sigmoid, nm, 1, &v, &v);
        sum += prof_node_seconds(cost, g, &g->nodes[k]);
    }
    ir_graph_add_output(g, v);
    sched_sim s;
    simulate(g, NULL, &s);
    assert_true(sum > 0);
    assert_true(fabs(s.latency_s - sum) <= 1e-12 * sum);
    for (int i = 1; i < 6; i++) assert_true(s.start_s[i] == s.end_s[i - 1]);
    assert_int_equal(s.peak_host_bytes, 0);
    sched_sim_free(&s);
    sched_sim_free(&s); /* idempotent */
    ir_graph_free(g);
}

static void test_load_in_flight_delays_user(void **state) {
    ir_graph *g = swap_graph();
    sched_sim s;
    simulate(g, NULL, &s);
    double xfer = prof_transfer_seconds(cost, MIB);
    double compute = 0;
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].op != IR_OP_Store && g->nodes[k].op != IR_OP_Load)
            compute += prof_node_seconds(cost, g, &g->nodes[k]);
    /* The Store starts when its input is ready, on the copy stream, overlapping b and c. */
    assert_true(s.start_s[1] == s.end_s[0]);
    assert_true(fabs(s.end_s[1] - s.start_s[1] - xfer) < 1e-12);
    assert_true(s.start_s[2] == s.end_s[0]);
    /* The Load is issued after c and transfers 1 MiB at 25 GB/s; y waits for it. */
    assert_true(s.start_s[4] >= s.end_s[3]);
    assert_true(s.start_s[4] >= s.end_s[1]);
    assert_true(s.start_s[5] == s.end_s[4]);
    assert_true(s.end_s[4] > s.end_s[3]);
    assert_true(s.latency_s > compute);
    assert_true(s.latency_s == s.end_s[5]);
    sched_sim_free(&s);
    ir_graph_free(g);
}

static void test_memory_accounting(void **state) {
    ir_graph *g = swap_graph();
    sched_sim s;
    sched_memory m;
    ir_diag d = {{0}};
    simulate(g, NULL, &s);
    assert_int_equal(sched_memory_compute(g, NULL, &m, &d), IR_OK);
    assert_int_equal(s.peak_device_bytes, m.peak_bytes);
    for (int i = 0; i < g->n_nodes; i++) assert_int_equal(s.device_bytes[i], m.step_bytes[i]);
    /* Device: x resident; a freed after its Store; the Store output is not device memory. */
    const size_t expect_dev[6] = {2 * MIB, 2 * MIB, 2 * MIB, 3 * MIB, 3 * MIB, 4 * MIB};
    const size_t expect_host[6] = {0, MIB, MIB, MIB, MIB, 0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(s.device_bytes[i], expect_dev[i]);
        assert_int_equal(s.host_bytes[i], expect_host[i]);
    }
    assert_int_equal(s.peak_device_bytes, 4 * MIB);
    assert_int_equal(s.peak_host_bytes, MIB);
    /* The host value is no device hot-spot. */
    for (int i = 0; i < m.n_hotspots; i++) assert_false(ir_value_on_host(g, m.hotspots[i]));
    sched_memory_free(&m);
    sched_sim_free(&s);
    ir_graph_free(g);
}

static void test_executor_matches(void **state) {
    ir_graph *g = swap_graph();
    int orders[2][6] = {{0, 1, 2, 3, 4, 5}, {2, 0, 3, 1, 4, 5}};
    for (int o = 0; o < 2; o++) {
        sched_sim s;
        simulate(g, orders[o], &s);
        rt_options ro = {.order = orders[o], .n_order = 6, .seed = 3, .fill_missing_data = true};
        rt_result r;
        ir_diag d = {{0}};
        if (rt_run(g, NULL, 0, &ro, &r, &d) != IR_OK) fail_msg("rt_run: %s", d.msg);
        assert_int_equal(r.peak_bytes, s.peak_device_bytes);
        assert_int_equal(r.peak_host_bytes, s.peak_host_bytes);
        for (int i = 0; i < 6; i++) assert_int_equal(r.step_bytes[i], s.device_bytes[i]);
        /* y = relu(x) + relu(relu(x)) = 2 relu(x): the swap round trip kept the data. */
        assert_int_equal(r.n_outputs, 1);
        rt_result_free(&r);
        sched_sim_free(&s);
    }
    ir_graph_free(g);
}

/* a = Relu(x) (4 MiB) is swapped across a chain of n_mid Relu ops on a 1 MiB tensor and read
 * again at the end: y = Add(Load(Store(a)), chain). Returns the graph; *store, *load get the
 * swap nodes' indices and *user the Add's. */
static ir_graph *swap_chain(int n_mid, int *store, int *load, int *user) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 256, 64, 64));
    int a, h, l, y, c;
    add_node(g, IR_OP_Relu, "a", 1, &x, &a);
    int sk = add_node(g, IR_OP_Store, "store", 1, &a, &h);
    add_node(g, IR_OP_ReduceMean, "pool", 1, &a, &c); /* all axes, keepdims: [1,1,1,1] */
    for (int i = 0; i < n_mid; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "m%d", i);
        add_node(g, IR_OP_Sigmoid, nm, 1, &c, &c);
    }
    int lk = add_node(g, IR_OP_Load, "load", 1, &h, &l);
    int uk = add_node(g, IR_OP_Add, "y", 2, (int[]){l, c}, &y);
    ir_graph_add_output(g, y);
    *store = sk;
    *load = lk;
    *user = uk;
    return g;
}

static void test_place_swaps(void **state) {
    int sk, lk, uk;
    ir_graph *g = swap_chain(40, &sk, &lk, &uk);
    int n = g->n_nodes;
    /* Naive: both swap ops adjacent to the user. */
    int *naive = malloc(sizeof(int) * (size_t)n), *placed = malloc(sizeof(int) * (size_t)n);
    int w = 0;
    for (int k = 0; k < n; k++)
        if (k != sk && k != lk && k != uk) naive[w++] = k;
    naive[w++] = sk;
    naive[w++] = lk;
    naive[w++] = uk;
    ir_diag d = {{0}};
    assert_int_equal(sched_place_swaps(g, naive, cost, placed, &d), IR_OK);
    assert_true(sched_order_valid(g, placed, n));
    int ps = -1, pl = -1;
    for (int s = 0; s < n; s++) {
        if (placed[s] == sk) ps = s;
        if (placed[s] == lk) pl = s;
    }
    assert_int_equal(ps, 1); /* right after its producer */
    /* The Load moved before the user by enough compute to cover 4 MiB at 25 GB/s. */
    double xfer = prof_transfer_seconds(cost, 4 * MIB), covered = 0;
    assert_true(pl < n - 2);
    for (int s = pl + 1; s < n - 1; s++)
        covered += prof_node_seconds(cost, g, &g->nodes[placed[s]]);
    assert_true(covered >= xfer);
    covered -= prof_node_seconds(cost, g, &g->nodes[placed[pl + 1]]);
    assert_true(covered < xfer); /* and no earlier than that */

    sched_sim sn, sp;
    simulate(g, naive, &sn);
    simulate(g, placed, &sp);
    assert_true(sp.latency_s <= sn.latency_s);
    assert_true(sp.latency_s < sn.latency_s - xfer); /* both transfers are hidden */
    sched_memory m;
    assert_int_equal(sched_memory_compute(g, placed, &m, &d), IR_OK);
    assert_int_equal(sp.peak_device_bytes, m.peak_bytes);
    sched_memory_free(&m);

    /* In place (aliasing) gives the same result; placing twice is stable. */
    int *again = malloc(sizeof(int) * (size_t)n);
    memcpy(again, placed, sizeof(int) * (size_t)n);
    assert_int_equal(sched_place_swaps(g, again, cost, again, &d), IR_OK);
    assert_memory_equal(again, placed, sizeof(int) * (size_t)n);
    /* An invalid order is refused with a message. */
    int tmp = again[0];
    again[0] = again[n - 1];
    again[n - 1] = tmp;
    assert_int_equal(sched_place_swaps(g, again, cost, again, &d), IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "topological"));
    free(again);
    sched_sim_free(&sn);
    sched_sim_free(&sp);
    free(naive);
    free(placed);
    ir_graph_free(g);
}

/* Two Loads whose users run back to back share the copy stream: placed each on its own, the
 * second would wait for the first and stall its user. x[1,64,128,128] (4 MiB): a = Relu(x),
 * b = Neg(x), both stored; a pooled chain of n_mid tiny Sigmoids; then y1 = Add(Load(a), c),
 * y = Add(Load(b), y1). Placed, every transfer hides behind compute: the simulated latency is
 * the compute ops' costs summed. */
static void test_place_swaps_share_stream(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 64, 128, 128));
    int a, b, ha, hb, c, la, lb, y1, y;
    add_node(g, IR_OP_Relu, "a", 1, &x, &a);
    add_node(g, IR_OP_Neg, "b", 1, &x, &b);
    add_node(g, IR_OP_Store, "store_a", 1, &a, &ha);
    add_node(g, IR_OP_Store, "store_b", 1, &b, &hb);
    add_node(g, IR_OP_ReduceMean, "pool", 1, &x, &c);
    for (int i = 0; i < 300; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "m%d", i);
        add_node(g, IR_OP_Sigmoid, nm, 1, &c, &c);
    }
    add_node(g, IR_OP_Load, "load_a", 1, &ha, &la);
    add_node(g, IR_OP_Load, "load_b", 1, &hb, &lb);
    add_node(g, IR_OP_Add, "y1", 2, (int[]){la, c}, &y1);
    add_node(g, IR_OP_Add, "y", 2, (int[]){lb, y1}, &y);
    ir_graph_add_output(g, y);
    int n = g->n_nodes, *placed = malloc(sizeof(int) * (size_t)n);
    int *order = sched_eager_order(g);
    ir_diag d = {{0}};
    assert_int_equal(sched_place_swaps(g, order, cost, placed, &d), IR_OK);
    assert_true(sched_order_valid(g, placed, n));
    double compute = 0;
    for (int i = 0; i < n; i++)
        if (g->nodes[i].op != IR_OP_Store && g->nodes[i].op != IR_OP_Load)
            compute += prof_node_seconds(cost, g, &g->nodes[i]);
    sched_sim sn, sp;
    simulate(g, order, &sn);
    simulate(g, placed, &sp);
    assert_true(sn.latency_s > compute + prof_transfer_seconds(cost, 4 * MIB)); /* eager stalls */
    if (!(fabs(sp.latency_s - compute) <= 1e-9 * compute))
        fail_msg("placed: latency %.9g s, the compute alone %.9g s", sp.latency_s, compute);
    sched_sim_free(&sn);
    sched_sim_free(&sp);
    free(order);
    free(placed);
    ir_graph_free(g);
}

/* A Store and a Load in flight at once run on the two copy streams, one per direction of the
 * host link, and overlap: x[1,64,128,128] (4 MiB); a = Relu(x), b = Neg(x); Store(b); a chain of
 * Sigmoids on a pooled x; then Store(a) and Load(Store(b)) issued back to back, both after the
 * chain's last op; y = Add(Add(Load(Store(a)), Load(Store(b))), c). Two Stores, or two Loads,
 * still run one after another. */
static void test_store_and_load_overlap(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 64, 128, 128));
    int a, b, ha, hb, c, la, lb, s1, y;
    add_node(g, IR_OP_Relu, "a", 1, &x, &a);
    add_node(g, IR_OP_Neg, "b", 1, &x, &b);
    int store_b = add_node(g, IR_OP_Store, "store_b", 1, &b, &hb);
    add_node(g, IR_OP_ReduceMean, "pool", 1, &x, &c);
    for (int i = 0; i < 300; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "m%d", i);
        add_node(g, IR_OP_Sigmoid, nm, 1, &c, &c);
    }
    int store_a = add_node(g, IR_OP_Store, "store_a", 1, &a, &ha);
    int load_b = add_node(g, IR_OP_Load, "load_b", 1, &hb, &lb);
    int load_a = add_node(g, IR_OP_Load, "load_a", 1, &ha, &la);
    add_node(g, IR_OP_Add, "s1", 2, (int[]){la, lb}, &s1);
    add_node(g, IR_OP_Add, "y", 2, (int[]){s1, c}, &y);
    ir_graph_add_output(g, y);
    sched_sim s;
    simulate(g, NULL, &s); /* the eager order is the insertion order here */
    double xfer = prof_transfer_seconds(cost, 4 * MIB);
    assert_true(s.end_s[store_b] <= s.start_s[store_a]);  /* the chain hides Store(b) */
    assert_true(s.start_s[load_b] == s.start_s[store_a]); /* both directions at once */
    assert_true(fabs(s.end_s[load_b] - s.start_s[load_b] - xfer) < 1e-12);
    assert_true(fabs(s.end_s[store_a] - s.start_s[store_a] - xfer) < 1e-12);
    assert_true(s.start_s[load_a] == s.end_s[store_a]); /* waits for its Store, and */
    assert_true(s.start_s[load_a] >= s.end_s[load_b]);  /* for the Load before it */
    sched_sim_free(&s);
    ir_graph_free(g);
}

static void test_invalid_order(void **state) {
    ir_graph *g = swap_graph();
    int bad[6] = {1, 0, 2, 3, 4, 5};
    sched_sim s;
    ir_diag d = {{0}};
    assert_int_equal(sched_simulate(g, bad, cost, &s, &d), IR_ERR_INVALID);
    assert_null(s.start_s);
    sched_sim_free(NULL);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_latency_is_sum),
        cmocka_unit_test(test_load_in_flight_delays_user),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_executor_matches),
        cmocka_unit_test(test_place_swaps),
        cmocka_unit_test(test_place_swaps_share_stream),
        cmocka_unit_test(test_store_and_load_overlap),
        cmocka_unit_test(test_invalid_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
