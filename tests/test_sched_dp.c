/* test_sched_dp.c - the memory-minimizing scheduler (sched_order_memory, sched_narrow_waist):
 *  - on 200 random DAGs of 3-14 nodes (Relu, Sum, Concat, 1-D Conv with im2col workspace, on
 *    tensors of random sizes, some intermediate values graph outputs) the exact DP reaches the
 *    least peak over all topological orders, found here by plain enumeration;
 *  - returned orders are topological permutations whose sched_memory_compute peak is the peak
 *    the search reports;
 *  - never worse than the eager order on every fixture model (numeric and structure-only);
 *  - nw values of a hand-built graph equal hand-computed ones;
 *  - on a graph with parallel branches the memory order lowers the peak by at least 5%, and the
 *    executor measures, to the byte, the peak the scheduler promised;
 *  - `magpie run --order memory` reports that same peak. */
#include "test-util.h"

#include "rt.h"
#include "schedule.h"

#include <dirent.h>
#include <unistd.h>

/* ---------------------------------------------------------------- random DAGs */

typedef struct rng {
    uint64_t s;
} rng;
static uint64_t rnext(rng *r) {
    return ir_mix64(r->s += 0x9e3779b97f4a7c15ull);
}
static int rbelow(rng *r, int n) {
    return (int)(rnext(r) % (uint64_t)n);
}

static int add_node(ir_graph *g, ir_op_kind op, int n_in, const int *in, int n_attrs,
                    const ir_attr *attrs) {
    char nm[32];
    snprintf(nm, sizeof nm, "v%d", g->n_values);
    int out = ir_graph_add_value(g, nm, IR_F32, NULL);
    int ni = ir_graph_add_node(g, op, NULL, n_in, in, 1, &out, n_attrs, attrs);
    ir_diag d = {{0}};
    if (ir_node_infer(g, &g->nodes[ni], &d) != IR_OK) fail_msg("infer: %s", d.msg);
    return out;
}

static int add_input(ir_graph *g, const char *name, ir_shape s) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    return v;
}

/* A random DAG of n nodes on [1, C, L] tensors: node i reads up to 3 earlier nodes (the graph
 * input when none); one input gives Relu or a 1-D Conv (kernel 1, or 3 with im2col workspace,
 * random output channels), several give Sum when their shapes agree, else Concat on channels.
 * Sinks and a few others are graph outputs. */
static ir_graph *random_dag(uint64_t seed, int n) {
    rng r = {seed};
    ir_graph *g = ir_graph_new();
    int64_t L = 2 + rbelow(&r, 30);
    int x = add_input(g, "x", TU_SHAPE(1, 1 + rbelow(&r, 3), L));
    g->values[x].flags |= IR_VF_DATA;
    int out[16];
    bool read[16] = {false};
    static int64_t k1[1] = {1}, k3[1] = {3}, p0[2] = {0, 0}, p1[2] = {1, 1};
    for (int i = 0; i < n; i++) {
        int in[3], ni = 0;
        for (int j = i - 1; j >= 0 && ni < 3; j--)
            if (rbelow(&r, 100) < 30) in[ni++] = out[j], read[j] = true;
        if (ni == 0) in[ni++] = x;
        if (ni == 1) {
            if (rbelow(&r, 100) < 40) {
                out[i] = add_node(g, IR_OP_Relu, 1, in, 0, NULL);
            } else {
                bool three = rbelow(&r, 2);
                int64_t C = g->values[in[0]].shape.dims[1], M = 1 + rbelow(&r, 6);
                char wn[16];
                snprintf(wn, sizeof wn, "w%d", i);
                int w = add_input(g, wn, TU_SHAPE(M, C, three ? 3 : 1));
                g->values[w].flags |= IR_VF_PARAM;
                ir_attr a[2] = {tu_attr_ints("kernel_shape", 1, three ? k3 : k1),
                                tu_attr_ints("pads", 2, three ? p1 : p0)};
                int cin[2] = {in[0], w};
                out[i] = add_node(g, IR_OP_Conv, 2, cin, 2, a);
            }
        } else {
            bool same = true;
            for (int k = 1; k < ni; k++)
                same = same && ir_shape_eq(&g->values[in[k]].shape, &g->values[in[0]].shape);
            ir_attr ax = tu_attr_int("axis", 1);
            out[i] = same && rbelow(&r, 2) ? add_node(g, IR_OP_Sum, ni, in, 0, NULL)
                                           : add_node(g, IR_OP_Concat, ni, in, 1, &ax);
        }
    }
    for (int i = 0; i < n; i++)
        if (!read[i] || rbelow(&r, 100) < 10) ir_graph_add_output(g, out[i]);
    return g;
}

/* Number of topological orders (DP over subsets), saturated at cap. */
static long count_orders(const ir_graph *g, long cap) {
    int n = g->n_nodes;
    uint32_t pred[16] = {0};
    for (int x = 0; x < n; x++)
        for (int i = 0; i < g->nodes[x].n_in; i++) {
            int p = g->values[g->nodes[x].in[i]].producer;
            if (p >= 0) pred[x] |= 1u << p;
        }
    long *ways = calloc((size_t)1 << n, sizeof(long));
    ways[0] = 1;
    for (uint32_t s = 0; s < (1u << n); s++) {
        if (!ways[s]) continue;
        for (int x = 0; x < n; x++)
            if (!(s >> x & 1) && (pred[x] & ~s) == 0) {
                long w = ways[s | 1u << x] + ways[s];
                ways[s | 1u << x] = w > cap ? cap : w;
            }
    }
    long c = ways[(1u << n) - 1];
    free(ways);
    return c;
}

/* Plain enumeration of every topological order with the memory rules of DESIGN.md, written
 * independently of sched/: outputs and workspace allocated, peak sampled, inputs at their last
 * use freed; graph inputs and outputs stay. */
typedef struct brute {
    const ir_graph *g;
    int n;
    size_t resident, best;
    int rem[64];   /* per value: unscheduled readers (distinct nodes) */
    int npred[16]; /* per node: unscheduled producer nodes (with multiplicity) */
    bool done[16];
    int order[16], best_order[16];
} brute;

static bool reads(const ir_node *nd, int v, int upto) {
    for (int i = 0; i < upto; i++)
        if (nd->in[i] == v) return true;
    return false;
}

static void enumerate(brute *b, int depth, size_t live, size_t peak) {
    const ir_graph *g = b->g;
    if (depth == b->n) {
        if (peak < b->best) {
            b->best = peak;
            memcpy(b->best_order, b->order, sizeof b->order);
        }
        return;
    }
    for (int x = 0; x < b->n; x++) {
        if (b->done[x] || b->npred[x]) continue;
        const ir_node *nd = &g->nodes[x];
        size_t out = 0, keep = 0;
        for (int i = 0; i < nd->n_out; i++) {
            const ir_value *v = &g->values[nd->out[i]];
            out += ir_value_bytes(v);
            if (b->rem[nd->out[i]] > 0 || (v->flags & IR_VF_OUTPUT)) keep += ir_value_bytes(v);
        }
        size_t step = b->resident + live + out + ir_node_workspace(g, nd);
        size_t nlive = live + keep;
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i];
            if (g->values[v].producer < 0 || reads(nd, v, i)) continue;
            if (--b->rem[v] == 0 && !(g->values[v].flags & IR_VF_OUTPUT))
                nlive -= ir_value_bytes(&g->values[v]);
        }
        b->done[x] = true;
        for (int y = 0; y < b->n; y++)
            for (int i = 0; i < g->nodes[y].n_in; i++)
                if (g->values[g->nodes[y].in[i]].producer == x) b->npred[y]--;
        b->order[depth] = x;
        enumerate(b, depth + 1, nlive, step > peak ? step : peak);
        for (int y = 0; y < b->n; y++)
            for (int i = 0; i < g->nodes[y].n_in; i++)
                if (g->values[g->nodes[y].in[i]].producer == x) b->npred[y]++;
        b->done[x] = false;
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i];
            if (g->values[v].producer >= 0 && !reads(nd, v, i)) b->rem[v]++;
        }
    }
}

static size_t brute_force(const ir_graph *g, int *best_order) {
    brute b = {.g = g, .n = g->n_nodes, .best = SIZE_MAX};
    assert_true(g->n_values <= 64 && g->n_nodes <= 16);
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if (val->producer < 0 && (val->flags & IR_VF_INPUT)) b.resident += ir_value_bytes(val);
    }
    for (int x = 0; x < b.n; x++) {
        const ir_node *nd = &g->nodes[x];
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i];
            if (g->values[v].producer < 0) continue;
            b.npred[x]++;
            if (!reads(nd, v, i)) b.rem[v]++;
        }
    }
    enumerate(&b, 0, 0, b.resident);
    memcpy(best_order, b.best_order, sizeof(int) * (size_t)b.n);
    return b.best;
}

/* Runs sched_order_memory and checks what every result must satisfy: a topological permutation,
 * the reported peak equal to sched_memory_compute's, and no worse than eager. */
static size_t schedule_checked(const ir_graph *g, const sched_dp_options *o, int *order,
                               sched_dp_stats *st) {
    ir_diag d = {{0}};
    ir_status s = sched_order_memory(g, o, order, st, &d);
    if (s != IR_OK) fail_msg("%s: sched_order_memory: %s", g->source ? g->source : "", d.msg);
    assert_true(sched_order_valid(g, order, g->n_nodes));
    size_t p = tu_peak(g, order);
    assert_int_equal(p, st->peak_bytes);
    assert_true(p <= tu_peak(g, NULL));
    return p;
}

static void test_exact_matches_enumeration(void **state) {
    (void)state;
    int tested = 0, improved = 0;
    /* A budget no machine load can exhaust: the result must not depend on timing. */
    sched_dp_options o = {.exact_max_nodes = 16, .time_budget_s = 600};
    for (uint64_t seed = 1; tested < 200; seed++) {
        int n = 3 + (int)(seed % 12);
        ir_graph *g = random_dag(seed, n);
        if (count_orders(g, 100001) > 100000) { /* keep the enumeration short */
            ir_graph_free(g);
            continue;
        }
        int best[16], order[16];
        size_t want = brute_force(g, best);
        assert_int_equal(tu_peak(g, best), want); /* the enumeration agrees with sched/ */
        sched_dp_stats st;
        size_t got = schedule_checked(g, &o, order, &st);
        assert_int_equal(st.beam_parts, 0); /* every part solved exactly */
        if (got != want)
            fail_msg("seed %llu (%d nodes): DP peak %zu, enumeration %zu", (unsigned long long)seed,
                     n, got, want);
        improved += want < tu_peak(g, NULL);
        tested++;
        ir_graph_free(g);
    }
    print_message("200 random DAGs: the memory order beats eager on %d\n", improved);
    assert_true(improved > 20); /* the test is not vacuous */
}

static ir_graph *branches(void);

/* Starved searches (a memo of a few dozen states, a beam of one or two, every part treated as
 * large) overflow, bisect their soft budget and refine windows: the results stay valid, their
 * reported peak stays true, and they are never worse than eager. */
static void test_bounded_search(void **state) {
    (void)state;
    static const sched_dp_options starved[3] = {
        {.exact_max_nodes = 16, .max_states = 40},
        {.exact_max_nodes = 2, .beam_width = 1},
        {.exact_max_nodes = 3, .beam_width = 2, .max_states = 30},
    };
    for (uint64_t seed = 1000; seed < 1060; seed++) {
        ir_graph *g = random_dag(seed, 8 + (int)(seed % 7));
        int order[16];
        sched_dp_stats st;
        for (int k = 0; k < 3; k++) schedule_checked(g, &starved[k], order, &st);
        ir_graph_free(g);
    }
    ir_graph *g = branches();
    int order[64];
    sched_dp_stats st;
    for (int k = 0; k < 3; k++) schedule_checked(g, &starved[k], order, &st);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- narrow waist */

static void test_narrow_waist_hand(void **state) {
    (void)state;
    /*  x -> a -> b -> d -> e -> g        nw: a 1 (f), b 2 (c, f), c 2 (b, f), d 1 (f),
     *         \-> c -/          /            e 1 (f), f 5 (a..e), g 0
     *  x -> f -----------------/  */
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 4));
    int a = add_node(g, IR_OP_Relu, 1, &x, 0, NULL);
    int b = add_node(g, IR_OP_Relu, 1, &a, 0, NULL);
    int c = add_node(g, IR_OP_Relu, 1, &a, 0, NULL);
    int bc[2] = {b, c};
    int dd = add_node(g, IR_OP_Add, 2, bc, 0, NULL);
    int e = add_node(g, IR_OP_Relu, 1, &dd, 0, NULL);
    int f = add_node(g, IR_OP_Relu, 1, &x, 0, NULL);
    int ef[2] = {e, f};
    int out = add_node(g, IR_OP_Add, 2, ef, 0, NULL);
    ir_graph_add_output(g, out);
    int nw[7], want[7] = {1, 2, 2, 1, 1, 5, 0};
    ir_diag d = {{0}};
    assert_int_equal(sched_narrow_waist(g, nw, &d), IR_OK);
    for (int i = 0; i < 7; i++) assert_int_equal(nw[i], want[i]);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- fixtures */

/* Loads a fixture, binding a symbolic batch dimension to 1 when the model has one. */
static ir_graph *load(const char *rel) {
    char path[1024];
    static const char *const names[1] = {"batch"};
    ir_shape one = TU_SHAPE(1);
    ir_import_opts io = {.allow_opaque = true};
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = ir_onnx_load(tu_src_path(rel, path, sizeof path), &io, &st, &d);
    if (!g && strstr(d.msg, "symbolic dimension 'batch'")) {
        io.n_shapes = 1;
        io.shape_names = names;
        io.shape_values = &one;
        g = ir_onnx_load(path, &io, &st, &d);
    }
    if (!g) print_message("%s: not loaded (%s): skipped\n", rel, d.msg);
    return g;
}

/* Schedules a fixture; returns the reduction of the peak against eager in percent, or -1 when
 * the model could not be loaded. */
static double reduction(const char *rel, double budget) {
    ir_graph *g = load(rel);
    if (!g) return -1;
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    sched_dp_options o = {.time_budget_s = budget};
    sched_dp_stats st;
    size_t eager = tu_peak(g, NULL), p = schedule_checked(g, &o, order, &st);
    double red = 100.0 * (double)(eager - p) / (double)eager;
    print_message("%-48s %5d nodes %3d parts: eager %9zu -> %9zu bytes (-%.1f%%) %.2f s\n", rel,
                  g->n_nodes, st.parts, eager, p, red, st.seconds);
    free(order);
    ir_graph_free(g);
    return red;
}

static void for_each_fixture(const char *dir_rel, bool numeric, double budget) {
    char path[1024];
    DIR *dir = opendir(tu_src_path(dir_rel, path, sizeof path));
    assert_non_null(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        char rel[1024];
        if (e->d_name[0] == '.') continue;
        size_t l = strlen(e->d_name);
        if (numeric)
            snprintf(rel, sizeof rel, "%s/%s/model.onnx", dir_rel, e->d_name);
        else if (l > 5 && !strcmp(e->d_name + l - 5, ".onnx"))
            snprintf(rel, sizeof rel, "%s/%s", dir_rel, e->d_name);
        else
            continue;
        n += reduction(rel, budget) >= 0;
    }
    closedir(dir);
    assert_true(n > 0);
}

static void test_fixtures_numeric(void **state) {
    (void)state;
    for_each_fixture("tests/fixtures/numeric", true, 0.3);
}

static void test_fixtures_structure(void **state) {
    (void)state;
    for_each_fixture("tests/fixtures/structure", false, 0.3);
}

/* Eight branches x -> Conv 1x1 (4x channels) -> Relu -> Conv 1x1 (back) -> Relu, summed, laid
 * out breadth first (layer by layer, as some exporters do): 34 nodes, more than one exact part,
 * so the contracted search and the refinement run. Depth first holds one wide tensor at a time. */
static ir_graph *branches(void) {
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", TU_SHAPE(1, 8, 64));
    g->values[x].flags |= IR_VF_DATA;
    int r = add_node(g, IR_OP_Relu, 1, &x, 0, NULL), cur[8];
    static int64_t k1[1] = {1};
    for (int layer = 0; layer < 4; layer++)
        for (int b = 0; b < 8; b++) {
            int in = layer == 0 ? r : cur[b];
            if (layer % 2 == 1) {
                cur[b] = add_node(g, IR_OP_Relu, 1, &in, 0, NULL);
                continue;
            }
            char wn[16];
            snprintf(wn, sizeof wn, "w%d_%d", layer, b);
            int w = add_input(g, wn, layer == 0 ? TU_SHAPE(32, 8, 1) : TU_SHAPE(8, 32, 1));
            g->values[w].flags |= IR_VF_PARAM;
            ir_attr a = tu_attr_ints("kernel_shape", 1, k1);
            int cin[2] = {in, w};
            cur[b] = add_node(g, IR_OP_Conv, 2, cin, 1, &a);
        }
    ir_graph_add_output(g, add_node(g, IR_OP_Sum, 8, cur, 0, NULL));
    return g;
}

static void test_parallel_branches(void **state) {
    (void)state;
    ir_graph *g = branches();
    int order[64];
    sched_dp_stats st;
    /* A budget no machine load can exhaust: the result must not depend on timing. */
    sched_dp_options o = {.time_budget_s = 600};
    size_t eager = tu_peak(g, NULL), p = schedule_checked(g, &o, order, &st);
    print_message("branches: eager %zu -> %zu bytes (-%.1f%%), %d parts (%d exact, %d other)\n",
                  eager, p, 100.0 * (double)(eager - p) / (double)eager, st.parts, st.exact_parts,
                  st.beam_parts);
    assert_true(st.beam_parts > 0);
    assert_true(p * 100 <= eager * 95);
    /* The executor measures what the scheduler promised. */
    rt_options ro = {.order = order, .n_order = g->n_nodes, .fill_missing_data = true};
    rt_result r;
    ir_diag d = {{0}};
    if (rt_run(g, NULL, 0, &ro, &r, &d) != IR_OK) fail_msg("rt_run: %s", d.msg);
    assert_int_equal(r.peak_bytes, p);
    rt_result_free(&r);
    ir_graph_free(g);
}

/* Runs `magpie run --json` on a numeric fixture (its directory) in one order; returns the
 * peak_bytes it reports. */
static size_t cli_peak(const char *fixture_dir, const char *order, const char *outdir) {
    const char *bin = getenv("MAGPIE_BIN");
    char dir[1024], cmd[4096], buf[1 << 14];
    tu_src_path(fixture_dir, dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' run --order %s --json -o '%s' -i '%s/input_0.npy' '%s/model.onnx' 2>&1",
             bin ? bin : "build/magpie", order, outdir, dir, dir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    if (pclose(f) != 0) fail_msg("%s: %s", cmd, buf);
    const char *k = strstr(buf, "\"peak_bytes\":");
    if (!k) fail_msg("no peak_bytes in: %s", buf);
    return (size_t)strtoull(k + strlen("\"peak_bytes\":"), NULL, 10);
}

static void test_cli_run_order_memory(void **state) {
    (void)state;
    const char *fixture = "tests/fixtures/numeric/gpt_small";
    ir_graph *g = load("tests/fixtures/numeric/gpt_small/model.onnx");
    if (!g) skip();
    int *order = malloc(sizeof(int) * (size_t)g->n_nodes);
    sched_dp_stats st;
    size_t want = schedule_checked(g, NULL, order, &st), eager = tu_peak(g, NULL);
    char dir[] = "/tmp/magpie-test-dp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(cli_peak(fixture, "memory", dir), want);
    assert_int_equal(cli_peak(fixture, "eager", dir), eager);
    assert_true(want < eager); /* the two runs did differ */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(order);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrow_waist_hand),
        cmocka_unit_test(test_exact_matches_enumeration),
        cmocka_unit_test(test_bounded_search),
        cmocka_unit_test(test_parallel_branches),
        cmocka_unit_test(test_cli_run_order_memory),
        cmocka_unit_test(test_fixtures_numeric),
        cmocka_unit_test(test_fixtures_structure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
