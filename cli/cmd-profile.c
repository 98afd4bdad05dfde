/* cmd-profile.c - `magpie profile`: fills the profile database with the cost of every distinct op
 * signature of a model on a device, and lists the costliest nodes with their share of the
 * eager-order total, a per-op-type summary, and how many signatures were measured and how many
 * the database already held.
 *
 * The database is saved (prof_close) before anything is printed; problems with it are warnings
 * on stderr, never a failure. A failure leaves stdout empty. */
#include "cli.h"
#include "prof.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_DEVICE "analytic:rtx3090"
#define DEFAULT_TOP 20

typedef struct node_cost {
    int node;
    double seconds;
} node_cost;

typedef struct op_cost {
    const char *op;
    int count;
    double seconds;
} op_cost;

typedef struct profile_report {
    char device[64];
    char detail[320];
    char db[4096]; /* empty: no database */
    bool measured;
    prof_stats stats;
    int signatures; /* distinct */
    double total;
    node_cost *nodes; /* largest first */
    op_cost *ops;     /* largest first */
    int n_ops;
} profile_report;

static int cmp_node_cost(const void *a, const void *b) {
    const node_cost *x = a, *y = b;
    if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
    return x->node - y->node;
}

static int cmp_op_cost(const void *a, const void *b) {
    const op_cost *x = a, *y = b;
    if (x->seconds != y->seconds) return x->seconds < y->seconds ? 1 : -1;
    return strcmp(x->op, y->op);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *op_label(const ir_node *n) {
    return n->op_type && *n->op_type ? n->op_type : ir_op_name(n->op);
}

/* Costs in the eager order, sorted, summed per op type; distinct signatures counted. */
static ir_status collect(const ir_graph *g, prof_model *m, profile_report *r, ir_diag *d) {
    size_t nn = (size_t)g->n_nodes + 1;
    int *order = sched_eager_order(g);
    uint64_t *sigs = malloc(sizeof *sigs * nn);
    int *root = malloc(sizeof *root * ((size_t)g->n_values + 1));
    r->nodes = malloc(sizeof *r->nodes * nn);
    r->ops = calloc(nn, sizeof *r->ops);
    if (!order || !sigs || !root || !r->nodes || !r->ops) {
        free(order);
        free(sigs);
        free(root);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    ir_graph_buffer_roots(g, root); /* a view costs nothing (sched_node_seconds) */
    for (int s = 0; s < g->n_nodes; s++) {
        const ir_node *n = &g->nodes[order[s]];
        double t = sched_node_seconds(m, g, root, n);
        r->nodes[s] = (node_cost){order[s], t};
        r->total += t;
        sigs[s] = prof_signature(g, n);
        const char *op = op_label(n);
        int k = 0;
        while (k < r->n_ops && strcmp(r->ops[k].op, op) != 0) k++;
        if (k == r->n_ops) r->ops[r->n_ops++].op = op;
        r->ops[k].count++;
        r->ops[k].seconds += t;
    }
    qsort(sigs, (size_t)g->n_nodes, sizeof *sigs, cmp_u64);
    for (int i = 0; i < g->n_nodes; i++) r->signatures += i == 0 || sigs[i] != sigs[i - 1];
    qsort(r->nodes, (size_t)g->n_nodes, sizeof *r->nodes, cmp_node_cost);
    qsort(r->ops, (size_t)r->n_ops, sizeof *r->ops, cmp_op_cost);
    free(order);
    free(sigs);
    free(root);
    return IR_OK;
}

/* "[1,3,64,64],[8,3,7,7] -> [1,8,32,32]" (omitted optional inputs are skipped). */
static void shapes_str(const ir_graph *g, const ir_node *n, char *buf, size_t cap) {
    size_t len = 0;
    char sh[160];
    buf[0] = 0;
    for (int side = 0; side < 2; side++) {
        int cnt = side ? n->n_out : n->n_in;
        bool first = true;
        if (side && len < cap) len += (size_t)snprintf(buf + len, cap - len, " -> ");
        for (int i = 0; i < cnt && len < cap; i++) {
            const ir_value *v = side ? ir_node_out(g, n, i) : ir_node_in(g, n, i);
            if (!v) continue;
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", first ? "" : ",",
                                    ir_shape_str(&v->shape, sh, sizeof sh));
            first = false;
        }
    }
}

static double share(double t, double total) {
    return total > 0 ? t / total : 0;
}

static void print_json(const ir_graph *g, const char *path, const profile_report *r, int top) {
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_obj_begin(&j);
    cli_json_kv_str(&j, "model", g->name && *g->name ? g->name : path);
    cli_json_kv_str(&j, "file", path);
    cli_json_kv_str(&j, "device", r->device);
    cli_json_kv_str(&j, "device_detail", r->detail);
    cli_json_kv_bool(&j, "measured", r->measured);
    cli_json_kv_str(&j, "database", r->db[0] ? r->db : NULL);
    cli_json_kv_int(&j, "nodes", g->n_nodes);
    cli_json_kv_int(&j, "signatures", r->signatures);
    cli_json_kv_int(&j, "signatures_measured", r->stats.measured);
    cli_json_kv_int(&j, "signatures_reused", r->stats.reused);
    cli_json_kv_int(&j, "signatures_failed", r->stats.failed);
    cli_json_kv_bool(&j, "calibrated", r->stats.calibrated);
    cli_json_kv_num(&j, "total_seconds", r->total);
    cli_json_key(&j, "top");
    cli_json_arr_begin(&j);
    for (int i = 0; i < top; i++) {
        const ir_node *n = &g->nodes[r->nodes[i].node];
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "node", n->name);
        cli_json_kv_str(&j, "op", op_label(n));
        cli_json_key(&j, "inputs");
        cli_json_arr_begin(&j);
        for (int k = 0; k < n->n_in; k++) {
            const ir_value *v = ir_node_in(g, n, k);
            if (v) cli_json_tensor(&j, v->name, v->dtype, &v->shape);
        }
        cli_json_arr_end(&j);
        cli_json_key(&j, "outputs");
        cli_json_arr_begin(&j);
        for (int k = 0; k < n->n_out; k++) {
            const ir_value *v = ir_node_out(g, n, k);
            if (v) cli_json_tensor(&j, v->name, v->dtype, &v->shape);
        }
        cli_json_arr_end(&j);
        cli_json_kv_num(&j, "seconds", r->nodes[i].seconds);
        cli_json_kv_num(&j, "share", share(r->nodes[i].seconds, r->total));
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "by_op");
    cli_json_arr_begin(&j);
    for (int i = 0; i < r->n_ops; i++) {
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "op", r->ops[i].op);
        cli_json_kv_int(&j, "count", r->ops[i].count);
        cli_json_kv_num(&j, "seconds", r->ops[i].seconds);
        cli_json_kv_num(&j, "share", share(r->ops[i].seconds, r->total));
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_obj_end(&j);
    cli_json_finish(&j);
}

static void print_text(const ir_graph *g, const char *path, const profile_report *r, int top) {
    char a[32];
    printf("model       %s (%s)\n", g->name && *g->name ? g->name : path, path);
    printf("device      %s (%s)\n", r->device, r->detail);
    printf("database    %s\n", r->db[0]      ? r->db
                               : r->measured ? "none (in memory only)"
                                             : "not used");
    if (r->measured)
        printf("signatures  %d distinct: %d measured, %d reused from the database%s\n",
               r->signatures, r->stats.measured, r->stats.reused,
               r->stats.failed ? " (some could not be timed: analytic estimate)" : "");
    else
        printf("signatures  %d distinct (roofline estimates, nothing measured)\n", r->signatures);
    if (r->stats.failed) printf("untimed     %d signatures\n", r->stats.failed);
    printf("total       %s over %d nodes (eager order)\n", cli_fmt_seconds(r->total, a, sizeof a),
           g->n_nodes);
    if (top > 0) {
        printf("costliest nodes:\n  %10s %6s  %-20s %-32s %s\n", "time", "share", "op", "node",
               "shapes");
        for (int i = 0; i < top; i++) {
            const ir_node *n = &g->nodes[r->nodes[i].node];
            char sh[512];
            shapes_str(g, n, sh, sizeof sh);
            printf("  %10s %5.1f%%  %-20s %-32s %s\n",
                   cli_fmt_seconds(r->nodes[i].seconds, a, sizeof a),
                   100 * share(r->nodes[i].seconds, r->total), op_label(n), n->name, sh);
        }
    }
    printf("by op:\n");
    for (int i = 0; i < r->n_ops; i++)
        printf("  %-20s %5d  %10s %5.1f%%\n", r->ops[i].op, r->ops[i].count,
               cli_fmt_seconds(r->ops[i].seconds, a, sizeof a),
               100 * share(r->ops[i].seconds, r->total));
}

int cli_cmd_profile(const cli_cmd *cmd, const cli_opts *o) {
    (void)cmd;
    const char *path = o->pos[0];
    profile_report r;
    memset(&r, 0, sizeof r);
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    int code;
    prof_model *m = NULL;
    ir_graph *g = cli_load_graph(path, o, true, &code); /* the training graph with --train */
    if (!g) return code;
    prof_options po = {.db_path = o->profile_db};
    m = prof_open(o->device ? o->device : DEFAULT_DEVICE, &po, &st, &d);
    if (!m) {
        code = cli_fail_ir(st, &d, NULL);
        goto out;
    }
    if (prof_is_measured(m))
        fprintf(stderr, "magpie: profiling %d nodes of %s on %s\n", g->n_nodes, path,
                prof_device(m));
    if ((st = prof_profile_graph(m, g, &d)) != IR_OK || (st = collect(g, m, &r, &d)) != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    snprintf(r.device, sizeof r.device, "%s", prof_device(m));
    snprintf(r.detail, sizeof r.detail, "%s", prof_device_detail(m));
    snprintf(r.db, sizeof r.db, "%s", prof_db_path(m) ? prof_db_path(m) : "");
    r.measured = prof_is_measured(m);
    prof_get_stats(m, &r.stats);
    prof_close(m); /* saves the new measurements before anything is printed */
    m = NULL;
    int top = o->top < 0 ? DEFAULT_TOP : o->top;
    if (top == 0 || top > g->n_nodes) top = g->n_nodes;
    if (o->json)
        print_json(g, path, &r, top);
    else
        print_text(g, path, &r, top);
    code = CLI_EXIT_OK;
out:
    prof_close(m);
    free(r.nodes);
    free(r.ops);
    ir_graph_free(g);
    return code;
}
