/* inspect-fission.c - `magpie inspect --fission`: why a model (or its training graph) gets the
 * fissions it gets. Three things a user needs to find the node that stopped a fission:
 *  - the dimension graph's components (rules.h, MAGIS 4.1): each one's length, the ops it
 *    reaches (nodes with an output dimension or a reduce axis in it) and the graph inputs whose
 *    dimensions it contains (the inputs a fission along it slices);
 *  - the F-Tree's candidates (MAGIS Algorithm 1 on the eager order's hot-spots) with heat and
 *    score, the figures the search starts from;
 *  - for the batch and every listed component, the first node that a fission along it as a whole
 *    refuses, with the fission checker's own reason (rw_fission_break_at). The batch is the
 *    dimension of the first data input whose component holds no parameter's dimension, one that
 *    no node breaks before one that some node does, then the one reaching the most ops, then
 *    the one with fewer breaks, then the first (dimension 0 when every one holds a
 *    parameter's): dimension 0 in a batch-first layout, 1 in a sequence-first one ([S, B, E],
 *    where the sequence reaches as many ops but every attention breaks it), whatever the graph
 *    names its dimensions.
 * Everything is computed before anything is printed, so a failure leaves stdout empty. */
#include "cli.h"
#include "rules.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

/* Text lists at most this many components and candidates; --json lists them all. */
#define TEXT_MAX_COMPONENTS 12
#define TEXT_MAX_CANDIDATES 16
#define TEXT_MAX_INPUTS 4
#define TEXT_MAX_BREAKS 4

typedef struct fis_input {
    int value, dim;
} fis_input;

typedef struct fis_break {
    int node;        /* node index, -1 for none */
    const char *why; /* points into msg: the reason without the "node 'N' (OP): " prefix */
    char msg[1024];
} fis_break;

typedef struct fis_comp {
    int id;
    int64_t length;
    int ops;
    int n_inputs;
    fis_input *inputs; /* into fis_report.inputs */
    int candidates;    /* F-Tree nodes on it */
    int largest;       /* the largest S among them (nodes), 0 without */
    fis_break first;
    int n_breaks; /* every node that breaks it */
} fis_comp;

typedef struct fis_report {
    rw_dgraph *dg;
    rw_ftree *tree;
    int n_comps; /* listed: those reaching at least one op, by ops descending */
    fis_comp *comps;
    fis_input *inputs;
    int batch_input; /* value id of the first data input, -1 without one */
    int batch_dim;   /* its dimension taken for the batch */
    int batch;       /* index in comps of that dimension's component, -1 when not listed */
    fis_break batch_breaks[TEXT_MAX_BREAKS];
    int n_batch_breaks; /* listed (at most TEXT_MAX_BREAKS) */
} fis_report;

static void report_free(fis_report *r) {
    rw_dgraph_free(r->dg);
    rw_ftree_free(r->tree);
    free(r->comps);
    free(r->inputs);
}

static int cmp_comp(const void *a, const void *b) {
    const fis_comp *x = a, *y = b;
    if (x->ops != y->ops) return x->ops < y->ops ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The graph inputs a fission could slice: residents that are inputs, parameters or data. */
static bool is_split_input(const ir_value *v) {
    return v->producer < 0 && (v->flags & (IR_VF_INPUT | IR_VF_PARAM | IR_VF_DATA));
}

/* A parameter's dimension is in c: c is no batch (no parameter has one). */
static bool holds_param(const ir_graph *g, const fis_comp *c) {
    for (int i = 0; i < c->n_inputs; i++)
        if (g->values[c->inputs[i].value].flags & IR_VF_PARAM) return true;
    return false;
}

/* The break of comp at index >= from; false when out of memory. */
static bool find_break(const ir_graph *g, const rw_dgraph *dg, int comp, int from, fis_break *b) {
    ir_diag d = {{0}};
    b->node = rw_fission_break_at(g, dg, comp, from, &d);
    if (b->node == -2) return false;
    b->msg[0] = '\0';
    b->why = b->msg;
    if (b->node < 0) return true;
    const ir_node *n = &g->nodes[b->node];
    memcpy(b->msg, d.msg, sizeof b->msg);
    char prefix[600];
    int len = snprintf(prefix, sizeof prefix, "node '%s' (%s): ", n->name, n->op_type);
    if (len > 0 && (size_t)len < sizeof prefix && strncmp(b->msg, prefix, (size_t)len) == 0)
        b->why = b->msg + len;
    return true;
}

/* Counts comp's breaks, keeping the first (and, for the batch, up to TEXT_MAX_BREAKS). */
static bool comp_breaks(const ir_graph *g, const rw_dgraph *dg, fis_comp *c, fis_break *keep,
                        int *n_keep) {
    fis_break b;
    c->first.node = -1;
    c->first.why = c->first.msg;
    c->first.msg[0] = '\0';
    for (int from = 0;; from = b.node + 1) {
        if (!find_break(g, dg, c->id, from, &b)) return false;
        if (b.node < 0) return true;
        if (c->n_breaks++ == 0) {
            c->first = b;
            c->first.why = c->first.msg + (b.why - b.msg);
        }
        if (keep && *n_keep < TEXT_MAX_BREAKS) {
            keep[*n_keep] = b;
            keep[*n_keep].why = keep[*n_keep].msg + (b.why - b.msg);
            (*n_keep)++;
        }
    }
}

static ir_status build_report(const ir_graph *g, const sched_memory *m, fis_report *r, ir_diag *d) {
    memset(r, 0, sizeof *r);
    r->batch_input = -1;
    r->batch = -1;
    r->dg = rw_dgraph_build(g);
    r->tree = r->dg ? rw_ftree_build(g, m, 0) : NULL;
    int nc = r->dg ? rw_dgraph_n_components(r->dg) : 0, n_in = 0;
    int *ops = calloc((size_t)nc + 1, sizeof *ops), *stamp = malloc(((size_t)nc + 1) * sizeof(int));
    int *slot = malloc(((size_t)nc + 1) * sizeof(int));
    for (int v = 0; v < g->n_values; v++)
        if (is_split_input(&g->values[v])) n_in += g->values[v].shape.rank;
    r->inputs = malloc(((size_t)n_in + 1) * sizeof *r->inputs);
    r->comps = calloc((size_t)nc + 1, sizeof *r->comps);
    ir_status st = IR_OK;
    if (!r->dg || !r->tree || !ops || !stamp || !slot || !r->inputs || !r->comps) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory analyzing the dimension graph");
        goto out;
    }
    for (int c = 0; c < nc; c++) stamp[c] = -1;
    for (int i = 0; i < g->n_nodes; i++) { /* each node once per component it reaches */
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++)
            for (int dim = 0; n->out[k] >= 0 && dim < g->values[n->out[k]].shape.rank; dim++) {
                int c = rw_dgraph_value_comp(r->dg, n->out[k], dim);
                int ci = rw_dgraph_value_inner_comp(r->dg, n->out[k], dim);
                if (c >= 0 && stamp[c] != i) stamp[c] = i, ops[c]++;
                if (ci >= 0 && stamp[ci] != i) stamp[ci] = i, ops[ci]++;
            }
        for (int ax = 1;; ax++) {
            int c = rw_dgraph_reduce_comp(r->dg, i, ax),
                ci = rw_dgraph_reduce_inner_comp(r->dg, i, ax);
            if (c < 0) break;
            if (stamp[c] != i) stamp[c] = i, ops[c]++;
            if (ci >= 0 && stamp[ci] != i) stamp[ci] = i, ops[ci]++;
        }
    }
    for (int c = 0; c < nc; c++) {
        slot[c] = -1;
        if (ops[c] == 0) continue;
        fis_comp *x = &r->comps[r->n_comps++];
        x->id = c;
        x->length = rw_dgraph_comp_length(r->dg, c);
        x->ops = ops[c];
    }
    qsort(r->comps, (size_t)r->n_comps, sizeof *r->comps, cmp_comp);
    for (int j = 0; j < r->n_comps; j++) slot[r->comps[j].id] = j;
    /* inputs, grouped by component in listing order: count, offsets, fill */
    for (int v = 0; v < g->n_values; v++)
        for (int dim = 0; is_split_input(&g->values[v]) && dim < g->values[v].shape.rank; dim++) {
            int c = rw_dgraph_value_comp(r->dg, v, dim);
            if (c >= 0 && slot[c] >= 0) r->comps[slot[c]].n_inputs++;
        }
    int off = 0;
    for (int j = 0; j < r->n_comps; j++) {
        r->comps[j].inputs = r->inputs + off;
        off += r->comps[j].n_inputs;
        r->comps[j].n_inputs = 0;
    }
    for (int v = 0; v < g->n_values; v++)
        for (int dim = 0; is_split_input(&g->values[v]) && dim < g->values[v].shape.rank; dim++) {
            int c = rw_dgraph_value_comp(r->dg, v, dim);
            if (c < 0 || slot[c] < 0) continue;
            fis_comp *x = &r->comps[slot[c]];
            x->inputs[x->n_inputs++] = (fis_input){.value = v, .dim = dim};
        }
    for (int t = 0; t < r->tree->n; t++) {
        const rw_ftree_node *fn = &r->tree->nodes[t];
        int j = fn->comp >= 0 && fn->comp < nc ? slot[fn->comp] : -1;
        if (j < 0) continue;
        r->comps[j].candidates++;
        if (fn->f.n_ids > r->comps[j].largest) r->comps[j].largest = fn->f.n_ids;
    }
    for (int i = 0; i < g->n_inputs && r->batch_input < 0; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if ((v->flags & IR_VF_DATA) && v->shape.rank > 0) r->batch_input = g->inputs[i];
    }
    for (int j = 0; j < r->n_comps; j++) {
        if (!comp_breaks(g, r->dg, &r->comps[j], NULL, NULL)) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory analyzing the dimension graph");
            goto out;
        }
    }
    if (r->batch_input >= 0) {
        const ir_value *in = &g->values[r->batch_input];
        for (int dim = 0; dim < in->shape.rank; dim++) {
            int c = rw_dgraph_value_comp(r->dg, r->batch_input, dim), j = c >= 0 ? slot[c] : -1;
            if (j < 0 || holds_param(g, &r->comps[j])) continue;
            const fis_comp *x = &r->comps[j], *b = r->batch >= 0 ? &r->comps[r->batch] : NULL;
            bool whole = x->n_breaks == 0, b_whole = b && b->n_breaks == 0;
            if (!b || (whole && !b_whole) ||
                (whole == b_whole &&
                 (x->ops > b->ops || (x->ops == b->ops && x->n_breaks < b->n_breaks)))) {
                r->batch = j;
                r->batch_dim = dim;
            }
        }
    }
    if (r->batch < 0 && r->batch_input >= 0) { /* no other candidate: dimension 0 */
        int c = rw_dgraph_value_comp(r->dg, r->batch_input, 0);
        r->batch = c >= 0 ? slot[c] : -1;
    }
    if (r->batch >= 0) { /* again, keeping the batch's first breaks */
        r->comps[r->batch].n_breaks = 0;
        if (!comp_breaks(g, r->dg, &r->comps[r->batch], r->batch_breaks, &r->n_batch_breaks)) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory analyzing the dimension graph");
            goto out;
        }
    }
out:
    free(ops);
    free(stamp);
    free(slot);
    return st;
}

/* ---------------------------------------------------------------- JSON */

static void json_break(cli_json *j, const ir_graph *g, const fis_break *b) {
    if (b->node < 0) {
        cli_json_null(j);
        return;
    }
    const ir_node *n = &g->nodes[b->node];
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "node", n->name);
    cli_json_kv_str(j, "op", n->op_type);
    cli_json_kv_str(j, "reason", b->why);
    cli_json_obj_end(j);
}

static void print_json(const ir_graph *g, const char *path, const fis_report *r) {
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_obj_begin(&j);
    cli_json_kv_str(&j, "model", g->name && *g->name ? g->name : path);
    cli_json_kv_str(&j, "file", path);
    cli_json_kv_int(&j, "nodes", g->n_nodes);
    cli_json_kv_int(&j, "dimension_components", rw_dgraph_n_components(r->dg));
    cli_json_key(&j, "components");
    cli_json_arr_begin(&j);
    for (int k = 0; k < r->n_comps; k++) {
        const fis_comp *c = &r->comps[k];
        cli_json_obj_begin(&j);
        cli_json_kv_int(&j, "id", c->id);
        cli_json_kv_int(&j, "length", c->length);
        cli_json_kv_int(&j, "ops", c->ops);
        cli_json_key(&j, "inputs");
        cli_json_arr_begin(&j);
        for (int i = 0; i < c->n_inputs; i++) {
            cli_json_obj_begin(&j);
            cli_json_kv_str(&j, "name", g->values[c->inputs[i].value].name);
            cli_json_kv_int(&j, "dim", c->inputs[i].dim);
            cli_json_obj_end(&j);
        }
        cli_json_arr_end(&j);
        cli_json_kv_int(&j, "candidates", c->candidates);
        cli_json_kv_int(&j, "breaks", c->n_breaks);
        cli_json_key(&j, "first_break");
        json_break(&j, g, &c->first);
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "ftree");
    cli_json_arr_begin(&j);
    for (int t = 0; t < r->tree->n; t++) {
        const rw_ftree_node *fn = &r->tree->nodes[t];
        int seed = -1;
        for (int i = 0; i < g->n_nodes && seed < 0; i++)
            if (g->nodes[i].id == fn->f.seed_id) seed = i;
        cli_json_obj_begin(&j);
        cli_json_kv_int(&j, "index", t);
        cli_json_kv_int(&j, "parent", fn->parent);
        cli_json_kv_int(&j, "component", fn->comp);
        cli_json_kv_int(&j, "dimension_length", fn->dim_len);
        cli_json_kv_int(&j, "nodes", fn->f.n_ids);
        cli_json_kv_num(&j, "heat", fn->heat);
        cli_json_kv_num(&j, "score", fn->score);
        cli_json_kv_str(&j, "seed", seed >= 0 ? g->nodes[seed].name : NULL);
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_key(&j, "batch");
    if (r->batch_input < 0) {
        cli_json_null(&j);
    } else {
        const fis_comp *c = r->batch >= 0 ? &r->comps[r->batch] : NULL;
        cli_json_obj_begin(&j);
        cli_json_kv_str(&j, "input", g->values[r->batch_input].name);
        cli_json_kv_int(&j, "dim", r->batch_dim);
        cli_json_kv_int(&j, "component", rw_dgraph_value_comp(r->dg, r->batch_input, r->batch_dim));
        cli_json_kv_int(&j, "length", g->values[r->batch_input].shape.dims[r->batch_dim]);
        cli_json_kv_int(&j, "ops", c ? c->ops : 0);
        cli_json_kv_int(&j, "candidates", c ? c->candidates : 0);
        cli_json_kv_int(&j, "largest_candidate_nodes", c ? c->largest : 0);
        cli_json_kv_int(&j, "breaks", c ? c->n_breaks : 0);
        cli_json_key(&j, "first_break");
        fis_break none = {.node = -1};
        json_break(&j, g, c ? &c->first : &none);
        cli_json_obj_end(&j);
    }
    cli_json_obj_end(&j);
    cli_json_finish(&j);
}

/* ---------------------------------------------------------------- text */

static void print_inputs(const ir_graph *g, const fis_comp *c) {
    for (int i = 0; i < c->n_inputs && i < TEXT_MAX_INPUTS; i++)
        printf("%s%s[%d]", i ? ", " : "", g->values[c->inputs[i].value].name, c->inputs[i].dim);
    if (c->n_inputs > TEXT_MAX_INPUTS) printf(" and %d more", c->n_inputs - TEXT_MAX_INPUTS);
    if (!c->n_inputs) printf("-");
}

/* cli_fmt_bytes with a sign (a score is negative when S reads more than it would save). */
static const char *fmt_signed_bytes(double v, char *buf, size_t n) {
    IR_ASSERT(n > 1);
    buf[0] = '-';
    cli_fmt_bytes((uint64_t)(v < 0 ? -v : v), buf + (v < 0), n - 1);
    return buf;
}

static int cmp_score_desc(const void *a, const void *b, const rw_ftree *t) {
    double x = t->nodes[*(const int *)a].score, y = t->nodes[*(const int *)b].score;
    if (x != y) return x < y ? 1 : -1;
    return *(const int *)a - *(const int *)b;
}

/* The text lists the best-scored candidates; insertion sort on indices (a tree has at most a
 * few hundred nodes, and qsort has no context argument). */
static void sort_by_score(const rw_ftree *t, int *idx) {
    for (int i = 0; i < t->n; i++) idx[i] = i;
    for (int i = 1; i < t->n; i++)
        for (int k = i; k > 0 && cmp_score_desc(&idx[k - 1], &idx[k], t) > 0; k--) {
            int s = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = s;
        }
}

static void print_break_line(const ir_graph *g, const char *lead, const fis_break *b) {
    const ir_node *n = &g->nodes[b->node];
    printf("%snode '%s' (%s): %s\n", lead, n->name, n->op_type, b->why);
}

static void print_text(const ir_graph *g, const char *path, const fis_report *r, const int *idx) {
    printf("model        %s (%s)\n", g->name && *g->name ? g->name : path, path);
    printf("dimensions   %d components, %d reach an op\n", rw_dgraph_n_components(r->dg),
           r->n_comps);
    printf("  %-6s %8s %6s %5s %6s  %s\n", "comp", "length", "ops", "cand", "breaks",
           "graph inputs split");
    for (int k = 0; k < r->n_comps && k < TEXT_MAX_COMPONENTS; k++) {
        const fis_comp *c = &r->comps[k];
        printf("  %-6d %8lld %6d %5d %6d  ", c->id, (long long)c->length, c->ops, c->candidates,
               c->n_breaks);
        print_inputs(g, c);
        printf("%s\n", k == r->batch ? "  (batch)" : "");
    }
    if (r->n_comps > TEXT_MAX_COMPONENTS)
        printf("  ... %d more (--json lists them all)\n", r->n_comps - TEXT_MAX_COMPONENTS);
    printf("F-Tree       %d candidates\n", r->tree->n);
    if (r->tree->n)
        printf("  %-5s %6s %6s %6s %6s %12s %12s  %s\n", "node", "parent", "comp", "length",
               "nodes", "heat", "score", "seed");
    for (int k = 0; k < r->tree->n && k < TEXT_MAX_CANDIDATES; k++) {
        const rw_ftree_node *fn = &r->tree->nodes[idx[k]];
        char h[32], s[32];
        const char *seed = "?";
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].id == fn->f.seed_id) seed = g->nodes[i].name;
        printf("  %-5d %6d %6d %6lld %6d %12s %12s  %s\n", idx[k], fn->parent, fn->comp,
               (long long)fn->dim_len, fn->f.n_ids, fmt_signed_bytes(fn->heat, h, sizeof h),
               fmt_signed_bytes(fn->score, s, sizeof s), seed);
    }
    if (r->tree->n > TEXT_MAX_CANDIDATES)
        printf("  ... %d more, by score (--json lists them all)\n",
               r->tree->n - TEXT_MAX_CANDIDATES);
    if (r->batch_input < 0) {
        printf("batch        no data input with a dimension\n");
        return;
    }
    const ir_value *in = &g->values[r->batch_input];
    const fis_comp *c = r->batch >= 0 ? &r->comps[r->batch] : NULL;
    printf("batch        %s[%d] (length %lld): component %d, %d ops, %d F-Tree candidates",
           in->name, r->batch_dim, (long long)in->shape.dims[r->batch_dim],
           rw_dgraph_value_comp(r->dg, r->batch_input, r->batch_dim), c ? c->ops : 0,
           c ? c->candidates : 0);
    if (c && c->largest) printf(" (the largest: %d nodes)", c->largest);
    printf("\n");
    if (!c || c->n_breaks == 0) {
        printf("  no node breaks it\n");
        return;
    }
    print_break_line(g, "  first break: ", &r->batch_breaks[0]);
    for (int k = 1; k < r->n_batch_breaks; k++)
        print_break_line(g, "  then:        ", &r->batch_breaks[k]);
    if (c->n_breaks > r->n_batch_breaks)
        printf("  ... %d more nodes break it\n", c->n_breaks - r->n_batch_breaks);
}

int cli_inspect_fission(const char *path, const ir_graph *g, const sched_memory *m, bool json) {
    fis_report r;
    ir_diag d = {{0}};
    int *idx = NULL, code = CLI_EXIT_OK;
    ir_status st = build_report(g, m, &r, &d);
    if (st == IR_OK && !(idx = malloc(((size_t)r.tree->n + 1) * sizeof *idx)))
        st = ir_diag_set(&d, IR_ERR_NOMEM, "out of memory");
    if (st != IR_OK) {
        code = cli_fail_ir(st, &d, path);
        goto out;
    }
    sort_by_score(r.tree, idx);
    if (json)
        print_json(g, path, &r);
    else
        print_text(g, path, &r, idx);
out:
    free(idx);
    report_free(&r);
    return code;
}
