/* bench_fused_accumulate.c - the executor's time on a small fission plan with its weight-gradient
 * accumulates fused (the producer adds its part into the buffer, ir_graph_fused_parts) and
 * unfused (`fused` 0 on every FissionAccumulate: the part in a buffer of its own, then an Add,
 * as the executor ran every accumulate before), side by side in one process.
 *
 * The plan: a linear layer's weight gradient, dW = x^T dy (x [B, K], dy [B, N]), split along the
 * batch into n parts by the fission builder
 * (rw_fission_apply, rw_fission_materialize), as a search would apply it. Each round runs three
 * rows, in alternating order (unfused, fused, control; then control, fused, unfused): the control
 * is the unfused plan again, so its ratio to the unfused row is what the machine's noise gives.
 * The figures are medians over the rounds of the executor's own measure (rt_result.cpu_seconds,
 * the calling thread's CPU time: with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 the latency on an
 * otherwise idle core) and of its wall time; the peaks are the executor's, next to
 * sched_memory_compute's for the same plan and order.
 *
 * usage: bench_fused_accumulate [B K N parts rounds]   (defaults 2048 512 512 8 41) */
#include "rt.h"
#include "bench-median.h"
#include "rules.h"
#include "schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *what, const ir_diag *d) {
    fprintf(stderr, "bench_fused_accumulate: %s: %s\n", what, d->msg);
    return 1;
}

static int add_input(ir_graph *g, const char *name, int64_t d0, int64_t d1, unsigned flags) {
    ir_shape s = ir_shape_make(2, (int64_t[]){d0, d1});
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    g->values[v].flags |= flags;
    return v;
}

static int add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                    int n_attrs, const ir_attr *attrs, ir_diag *d) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s.out", name);
    int v = ir_graph_add_value(g, ir_graph_strdup(g, nm), IR_F32, NULL);
    int i = ir_graph_add_node(g, op, name, n_in, in, 1, &v, n_attrs, attrs);
    return ir_node_infer(g, &g->nodes[i], d) == IR_OK ? v : -1;
}

/* Sets `fused` on every FissionAccumulate of g. */
static void set_fused(ir_graph *g, int fused) {
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_FissionAccumulate) continue;
        for (int a = 0; a < n->n_attrs; a++)
            if (!strcmp(n->attrs[a].name, "fused")) n->attrs[a].i = fused;
    }
}

int main(int argc, char **argv) {
    int64_t B = argc > 1 ? atoll(argv[1]) : 2048, K = argc > 2 ? atoll(argv[2]) : 512,
            N = argc > 3 ? atoll(argv[3]) : 512;
    int parts = argc > 4 ? atoi(argv[4]) : 8, rounds = argc > 5 ? atoi(argv[5]) : 41;
    if (B < 1 || K < 1 || N < 1 || parts < 2 || B % parts || rounds < 1) {
        fprintf(stderr, "usage: bench_fused_accumulate [B K N parts rounds]\n");
        return 2;
    }
    ir_diag d = {{0}};
    ir_graph *g = ir_graph_new();
    int x = add_input(g, "x", B, K, IR_VF_DATA), dy = add_input(g, "dy", B, N, 0);
    static int64_t perm[] = {1, 0};
    ir_attr ta = {.name = "perm", .type = IR_ATTR_INTS, .n = 2, .ints = perm};
    int t = add_node(g, IR_OP_Transpose, "t", 1, &x, 1, &ta, &d);
    int dw = t >= 0 ? add_node(g, IR_OP_MatMul, "dW", 2, (int[]){t, dy}, 0, NULL, &d) : -1;
    if (dw < 0) return die("building the graph", &d);
    ir_graph_add_output(g, dw);
    uint32_t ids[] = {g->nodes[0].id, g->nodes[1].id};
    rw_fission f = {.ids = ids, .n_ids = 2, .seed_id = ids[1], .seed_dim = -1, .parts = parts};
    rw_dgraph *dg = rw_dgraph_build(g);
    if (!dg || rw_fission_check(g, dg, &f, &d) != IR_OK) return die("fission check", &d);
    ir_graph *one = rw_fission_apply(g, &f, 1, NULL, NULL, &d);
    if (!one) return die("fission", &d);
    int *order = sched_eager_order(one), *morder = NULL;
    ir_graph *plan = order ? rw_fission_materialize(one, order, &morder, &d) : NULL;
    if (!plan) return die("materialize", &d);
    int n_acc = 0;
    for (int i = 0; i < plan->n_nodes; i++)
        n_acc += plan->nodes[i].op == IR_OP_FissionAccumulate &&
                 ir_fission_accumulate_fused(plan, &plan->nodes[i]);

    float *xd = malloc(sizeof(float) * (size_t)(B * K)),
          *dyd = malloc(sizeof(float) * (size_t)(B * N));
    if (!xd || !dyd) return 1;
    for (int64_t i = 0; i < B * K; i++) xd[i] = (float)((i * 7919 % 2001) - 1000) / 1000.0f;
    for (int64_t i = 0; i < B * N; i++) dyd[i] = (float)((i * 104729 % 1999) - 999) / 1000.0f;
    rt_binding bind[] = {{.value = ir_graph_find_value(plan, "x"),
                          .dtype = IR_F32,
                          .shape = plan->values[ir_graph_find_value(plan, "x")].shape,
                          .data = xd},
                         {.value = ir_graph_find_value(plan, "dy"),
                          .dtype = IR_F32,
                          .shape = plan->values[ir_graph_find_value(plan, "dy")].shape,
                          .data = dyd}};
    rt_options o = {.order = morder, .n_order = plan->n_nodes};

    enum { UNFUSED, FUSED, CONTROL, ROWS };
    static const char *const name[ROWS] = {"unfused (Add of a part buffer)",
                                           "fused (producer adds into the buffer)",
                                           "control (unfused again)"};
    double *cpu[ROWS], *wall[ROWS];
    size_t peak[ROWS] = {0}, sim[ROWS] = {0};
    for (int r = 0; r < ROWS; r++) {
        cpu[r] = malloc(sizeof(double) * (size_t)rounds);
        wall[r] = malloc(sizeof(double) * (size_t)rounds);
        if (!cpu[r] || !wall[r]) return 1;
    }
    for (int warm = 0; warm < 2; warm++)
        for (int r = 0; r < ROWS; r++) { /* warm-up: pages and BLAS buffers in, sim peaks */
            set_fused(plan, r == FUSED);
            rt_result res;
            if (rt_run(plan, bind, 2, &o, &res, &d) != IR_OK) return die("run", &d);
            peak[r] = res.peak_bytes;
            rt_result_free(&res);
            sched_memory m;
            if (sched_memory_compute(plan, morder, &m, &d) != IR_OK) return die("memory", &d);
            sim[r] = m.peak_bytes;
            sched_memory_free(&m);
        }
    for (int k = 0; k < rounds; k++)
        for (int j = 0; j < ROWS; j++) {
            int r = k % 2 ? ROWS - 1 - j : j;
            set_fused(plan, r == FUSED);
            rt_result res;
            if (rt_run(plan, bind, 2, &o, &res, &d) != IR_OK) return die("run", &d);
            cpu[r][k] = res.cpu_seconds;
            wall[r][k] = res.wall_seconds;
            rt_result_free(&res);
        }
    double mc[ROWS], mw[ROWS];
    for (int r = 0; r < ROWS; r++) {
        mc[r] = median(cpu[r], rounds);
        mw[r] = median(wall[r], rounds);
    }
    printf("plan: dW = x^T dy over the batch, x [%lld, %lld], dy [%lld, %lld], "
           "%d parts: %d nodes, %d fused accumulates; %d rounds, kernel threads %d\n",
           (long long)B, (long long)K, (long long)B, (long long)N, parts, plan->n_nodes, n_acc,
           rounds, rt_kernel_threads());
    printf("| row | cpu median ms | ratio | wall median ms | ratio | executed peak | simulated |\n"
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int r = 0; r < ROWS; r++)
        printf("| %s | %.3f | %.3f | %.3f | %.3f | %zu | %zu |\n", name[r], 1e3 * mc[r],
               mc[r] / mc[UNFUSED], 1e3 * mw[r], mw[r] / mw[UNFUSED], peak[r], sim[r]);
    for (int r = 0; r < ROWS; r++)
        if (peak[r] != sim[r]) {
            fprintf(stderr, "bench_fused_accumulate: %s: executed peak %zu, simulated %zu\n",
                    name[r], peak[r], sim[r]);
            return 1;
        }
    return 0;
}
