/* cmd-schedule.c - `magpie schedule`: orders a model, or with --train its training graph
 * (cli_load_graph), eagerly or by the memory-minimizing DP, and simulates the order under a cost
 * model (default analytic:rtx3090; measured devices profile the graph first): peak device bytes,
 * latency, host bytes of swaps and the memory hot-spots, with the eager order beside it, a
 * sparkline per order and optionally an SVG of both. When the graph holds swap ops (Store/Load),
 * the chosen order gets sched_place_swaps before it is simulated.
 *
 * Everything that can fail (import, scheduling, simulation, the SVG) happens before anything is
 * printed, so a failure leaves stdout empty. */
#include "cli.h"
#include "prof.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_DEVICE "analytic:rtx3090"
#define TEXT_HOTSPOTS 10

typedef struct hotspot {
    int value;
    size_t bytes;
} hotspot;

typedef struct sched_report {
    const char *path, *order_name;
    char device[64];
    int *order;
    bool swaps_placed; /* sched_place_swaps re-placed the chosen order's Store/Load ops */
    sched_dp_stats dp;
    sched_sim sim, eager;
    sched_memory mem; /* of the chosen order: peak step, residents, hot-spots */
    hotspot *hot;     /* largest first */
    int n_hot;
} sched_report;

static int cmp_hotspot(const void *a, const void *b) {
    const hotspot *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->value - y->value;
}

static ir_status compute(const ir_graph *g, prof_model *m, bool memory, sched_report *r,
                         ir_diag *d) {
    ir_status st;
    r->order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    if (!r->order) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    if (memory) {
        if ((st = sched_order_memory(g, NULL, r->order, &r->dp, d)) != IR_OK) return st;
    } else {
        for (int i = 0; i < g->n_nodes; i++) r->order[i] = i;
    }
    for (int i = 0; i < g->n_nodes && !r->swaps_placed; i++)
        r->swaps_placed = g->nodes[i].op == IR_OP_Store || g->nodes[i].op == IR_OP_Load;
    if (r->swaps_placed && (st = sched_place_swaps(g, r->order, m, r->order, d)) != IR_OK)
        return st;
    if ((st = sched_simulate(g, r->order, m, &r->sim, d)) != IR_OK) return st;
    if ((st = sched_simulate(g, NULL, m, &r->eager, d)) != IR_OK) return st;
    if ((st = sched_memory_compute(g, r->order, &r->mem, d)) != IR_OK) return st;
    r->hot = malloc(sizeof(hotspot) * (size_t)(r->mem.n_hotspots + 1));
    if (!r->hot) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r->mem.n_hotspots; i++) {
        int v = r->mem.hotspots[i];
        r->hot[r->n_hot++] = (hotspot){v, ir_value_bytes(&g->values[v])};
    }
    qsort(r->hot, (size_t)r->n_hot, sizeof *r->hot, cmp_hotspot);
    return IR_OK;
}

static void print_json(const ir_graph *g, const sched_report *r, const char *plot) {
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_obj_begin(&j);
    cli_json_kv_str(&j, "model", g->name && *g->name ? g->name : r->path);
    cli_json_kv_str(&j, "file", r->path);
    cli_json_kv_str(&j, "order", r->order_name);
    cli_json_kv_str(&j, "device", r->device);
    cli_json_kv_bool(&j, "swaps_placed", r->swaps_placed);
    cli_json_kv_int(&j, "steps", g->n_nodes);
    cli_json_kv_uint(&j, "peak_bytes", r->sim.peak_device_bytes);
    cli_json_kv_int(&j, "peak_step", r->mem.peak_step);
    cli_json_kv_uint(&j, "resident_bytes", r->mem.resident_bytes);
    cli_json_kv_num(&j, "latency_seconds", r->sim.latency_s);
    cli_json_kv_uint(&j, "peak_host_bytes", r->sim.peak_host_bytes);
    cli_json_kv_uint(&j, "eager_peak_bytes", r->eager.peak_device_bytes);
    cli_json_kv_num(&j, "eager_latency_seconds", r->eager.latency_s);
    cli_json_kv_uint(&j, "eager_peak_host_bytes", r->eager.peak_host_bytes);
    if (strcmp(r->order_name, "memory") == 0) {
        cli_json_key(&j, "dp");
        cli_json_obj_begin(&j);
        cli_json_kv_int(&j, "parts", r->dp.parts);
        cli_json_kv_int(&j, "exact_parts", r->dp.exact_parts);
        cli_json_kv_int(&j, "beam_parts", r->dp.beam_parts);
        cli_json_kv_int(&j, "states", r->dp.states);
        cli_json_kv_num(&j, "seconds", r->dp.seconds);
        cli_json_obj_end(&j);
    }
    cli_json_key(&j, "hotspots");
    cli_json_arr_begin(&j);
    for (int i = 0; i < r->n_hot; i++) {
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "name", g->values[r->hot[i].value].name);
        cli_json_kv_uint(&j, "bytes", r->hot[i].bytes);
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "order_nodes");
    cli_json_arr_begin(&j);
    for (int s = 0; s < g->n_nodes; s++) cli_json_str(&j, g->nodes[r->order[s]].name);
    cli_json_arr_end(&j);
    /* the memory model's figure per step of the chosen order (what the peak is the maximum of)
     * and the part of it that is the step's node's own workspace */
    cli_json_key(&j, "step_bytes");
    cli_json_arr_begin(&j);
    for (int s = 0; s < g->n_nodes; s++) cli_json_uint(&j, r->mem.step_bytes[s]);
    cli_json_arr_end(&j);
    cli_json_key(&j, "step_workspace_bytes");
    cli_json_arr_begin(&j);
    for (int s = 0; s < g->n_nodes; s++)
        cli_json_uint(&j, ir_node_workspace(g, &g->nodes[r->order[s]]));
    cli_json_arr_end(&j);
    if (plot) {
        cli_json_kv_str(&j, "plot", plot);
    }
    cli_json_obj_end(&j);
    cli_json_finish(&j);
}

/* "-12.3%" change of x against the reference. */
static const char *change(double x, double ref, char *buf, size_t n) {
    if (ref > 0)
        snprintf(buf, n, "%+.1f%%", 100.0 * (x - ref) / ref);
    else
        snprintf(buf, n, "n/a");
    return buf;
}

static void print_text(const ir_graph *g, const sched_report *r, const char *plot) {
    char a[32], b[32], c[32];
    printf("model        %s (%s)\n", g->name && *g->name ? g->name : r->path, r->path);
    printf("device       %s\n", r->device);
    printf("order        %s", r->order_name);
    if (strcmp(r->order_name, "memory") == 0)
        printf(" (%d parts: %d exact, %d beam; %ld states, %s)", r->dp.parts, r->dp.exact_parts,
               r->dp.beam_parts, r->dp.states, cli_fmt_seconds(r->dp.seconds, a, sizeof a));
    if (r->swaps_placed) printf(", swaps placed");
    printf("\n");
    printf(
        "peak         %s at step %d of %d (eager %s, %s)\n",
        cli_fmt_bytes(r->sim.peak_device_bytes, a, sizeof a), r->mem.peak_step, g->n_nodes,
        cli_fmt_bytes(r->eager.peak_device_bytes, b, sizeof b),
        change((double)r->sim.peak_device_bytes, (double)r->eager.peak_device_bytes, c, sizeof c));
    printf("latency      %s (eager %s, %s)\n", cli_fmt_seconds(r->sim.latency_s, a, sizeof a),
           cli_fmt_seconds(r->eager.latency_s, b, sizeof b),
           change(r->sim.latency_s, r->eager.latency_s, c, sizeof c));
    printf("host peak    %s (eager %s)\n", cli_fmt_bytes(r->sim.peak_host_bytes, a, sizeof a),
           cli_fmt_bytes(r->eager.peak_host_bytes, b, sizeof b));
    printf("resident     %s\n", cli_fmt_bytes(r->mem.resident_bytes, a, sizeof a));
    if (g->n_nodes > 0) {
        printf("memory       ");
        cli_sparkline(stdout, r->sim.device_bytes, g->n_nodes, 60);
        printf("  %s order\n             ", r->order_name);
        cli_sparkline(stdout, r->eager.device_bytes, g->n_nodes, 60);
        printf("  eager order\n");
    }
    if (plot) printf("plot         %s\n", plot);
    int top = r->n_hot < TEXT_HOTSPOTS ? r->n_hot : TEXT_HOTSPOTS;
    printf("hot-spots at the peak (%d of %d, largest first):\n", top, r->n_hot);
    for (int i = 0; i < top; i++) {
        const ir_value *v = &g->values[r->hot[i].value];
        printf("  %-32s %10s%s\n", v->name, cli_fmt_bytes(r->hot[i].bytes, a, sizeof a),
               v->producer < 0 ? "  (resident)" : "");
    }
}

static ir_status write_plot(const ir_graph *g, const sched_report *r, const char *path,
                            ir_diag *d) {
    char title[512], label[64];
    const char *base = strrchr(r->path, '/');
    snprintf(title, sizeof title, "%s: %s order on %s", base ? base + 1 : r->path, r->order_name,
             r->device);
    snprintf(label, sizeof label, "%s order", r->order_name);
    bool two = strcmp(r->order_name, "eager") != 0;
    cli_mem_plot p = {.title = title,
                      .step_bytes = r->sim.device_bytes,
                      .n_steps = g->n_nodes,
                      .resident_bytes = r->mem.resident_bytes,
                      .peak_step = r->mem.peak_step,
                      .ref_bytes = two ? r->eager.device_bytes : NULL,
                      .label = two ? label : NULL,
                      .ref_label = two ? "eager order" : NULL};
    return cli_plot_svg(path, &p, d);
}

int cli_cmd_schedule(const cli_cmd *cmd, const cli_opts *o) {
    (void)cmd;
    const char *path = o->pos[0];
    sched_report r = {.path = path, .order_name = o->order ? o->order : "memory"};
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    int code;
    prof_model *m = NULL;
    bool memory = strcmp(r.order_name, "memory") == 0; /* the parser accepts eager|memory */
    ir_graph *g = cli_load_graph(path, o, true, &code);
    if (!g) return code;
    prof_options po = {.db_path = o->profile_db};
    m = prof_open(o->device ? o->device : DEFAULT_DEVICE, &po, &st, &d);
    if (!m) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    snprintf(r.device, sizeof r.device, "%s", prof_device(m));
    if (prof_is_measured(m))
        fprintf(stderr, "magpie: profiling %d nodes of %s on %s\n", g->n_nodes, path,
                prof_device(m));
    if ((st = prof_profile_graph(m, g, &d)) != IR_OK || (st = compute(g, m, memory, &r, &d))) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    prof_close(m); /* saves new measurements before anything is printed */
    m = NULL;
    if (o->plot && (st = write_plot(g, &r, o->plot, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, o->plot);
        goto out;
    }
    if (o->json)
        print_json(g, &r, o->plot);
    else
        print_text(g, &r, o->plot);
    code = CLI_EXIT_OK;
out:
    prof_close(m);
    free(r.order);
    free(r.hot);
    sched_sim_free(&r.sim);
    sched_sim_free(&r.eager);
    sched_memory_free(&r.mem);
    ir_graph_free(g);
    return code;
}
