/* pet-gen-opt.c - PET's sub-program optimization loop (§6.2, Algorithm 2 lines 7-26): rounds of
 * mutation, operator subsets of at most d ops for larger programs, and the top-K candidates by
 * cost (pet-gen.h, pet_gen_optimize).
 *
 * Ops are counted as the generator counts them: a chain of Reshape/Transpose nodes (each link
 * read once) is one layout op (§4.2), so a mutant made of a layout op, a conv and a layout op
 * has 3 ops whatever its node count. Each round mutates every program kept from the round
 * before (round 1: the original). A program of at most d ops is mutated whole; a larger one
 * through connected, convex sets of at most d ops that hold a compute op (Conv, MatMul, Gemm):
 * the set is extracted as a program (gen_extract), mutated, and each mutant spliced back in its
 * place, so every candidate is a mutant of the whole program with its inputs and outputs.
 * Candidates are deduplicated by pet_gen_graph_hash across all rounds; the round keeps its
 * top_k cheapest, and so does the result over all rounds. Sets are taken from the program's
 * first 64 ops. */
#include "pet-gen-impl.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

/* ---------------------------------------------------------------- top-K lists */

/* Inserts m into l (ascending cost, at most k); a candidate that does not make it is freed.
 * false when out of memory. */
static bool topk_insert(pet_mutant_list *l, int k, pet_mutant m) {
    if (l->n == k && m.cost >= l->items[l->n - 1].cost) {
        ir_graph_free(m.graph);
        return true;
    }
    if (l->n == k) {
        ir_graph_free(l->items[--l->n].graph);
    } else if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 8;
        pet_mutant *p = realloc(l->items, sizeof *p * (size_t)nc);
        if (!p) {
            ir_graph_free(m.graph);
            return false;
        }
        l->items = p;
        l->cap = nc;
    }
    int i = l->n;
    while (i > 0 && l->items[i - 1].cost > m.cost) {
        l->items[i] = l->items[i - 1];
        i--;
    }
    l->items[i] = m;
    l->n++;
    return true;
}

/* ---------------------------------------------------------------- subsets */

typedef struct subsets {
    uint64_t *masks;
    int n, cap;
} subsets;

static bool subsets_push(subsets *s, uint64_t m) {
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 64;
        uint64_t *p = realloc(s->masks, sizeof *p * (size_t)nc);
        if (!p) return false;
        s->masks = p;
        s->cap = nc;
    }
    s->masks[s->n++] = m;
    return true;
}

static int popcount64(uint64_t x) {
    return __builtin_popcountll(x);
}

static int cmp_subset(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    int px = popcount64(x), py = popcount64(y);
    if (px != py) return py - px; /* larger first */
    return x < y ? -1 : x > y;
}

static bool is_layout_node(ir_op_kind op) {
    return op == IR_OP_Reshape || op == IR_OP_Transpose || op == IR_OP_Flatten ||
           op == IR_OP_Squeeze || op == IR_OP_Unsqueeze;
}

/* The ops of g as the generator counts them (§4.2: a reshape/transpose chain is one op): unit[i]
 * of node i, chains of layout nodes whose links have a single reader joined; units numbered by
 * first node. Returns the count. */
static int op_units(const ir_graph *g, int *unit) {
    for (int i = 0; i < g->n_nodes; i++) {
        unit[i] = i;
        const ir_node *n = &g->nodes[i];
        if (!is_layout_node(n->op) || n->in[0] < 0) continue;
        int v = n->in[0], p = g->values[v].producer;
        if (p < 0 || !is_layout_node(g->nodes[p].op) || (g->values[v].flags & IR_VF_OUTPUT))
            continue;
        int readers = 0;
        for (int j = 0; j < g->n_nodes; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++) readers += g->nodes[j].in[k] == v;
        if (readers == 1) unit[i] = unit[p]; /* p comes first: its unit is final */
    }
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) unit[i] = unit[i] == i ? n++ : unit[unit[i]];
    return n;
}

/* Connected convex sets of at most d ops (units) of g's first 64 units that hold a compute op,
 * as unit masks into out: largest first, or, when there are more than max, max of them taking
 * each size in turn. false when out of memory. */
static bool find_subsets(const ir_graph *g, const int *unit, int n_units,
                         const unsigned char *weight, int d, int max, subsets *out) {
    int n = n_units < 64 ? n_units : 64;
    uint64_t adj[64] = {0}, reach[64] = {0}, compute = 0, pre = ~0ULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *a = &g->nodes[i];
        int ua = unit[i];
        if (ua >= n) continue;
        ir_op_kind op = a->op;
        if (op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_MatMul || op == IR_OP_Gemm)
            compute |= 1ULL << ua;
        bool all_w = true;
        for (int k = 0; k < a->n_out; k++) all_w = all_w && (a->out[k] < 0 || weight[a->out[k]]);
        if (!all_w) pre &= ~(1ULL << ua);
        for (int j = 0; j < g->n_nodes; j++) {
            int ub = unit[j];
            if (ub == ua || ub >= n) continue;
            const ir_node *b = &g->nodes[j];
            for (int p = 0; p < a->n_out; p++)
                for (int q = 0; q < b->n_in; q++)
                    if (a->out[p] >= 0 && a->out[p] == b->in[q]) {
                        adj[ua] |= 1ULL << ub, adj[ub] |= 1ULL << ua;
                        if (ub > ua) reach[ua] |= 1ULL << ub;
                    }
            for (int p = 0; p < a->n_in; p++) /* a common activation */
                for (int q = 0; q < b->n_in; q++)
                    if (a->in[p] >= 0 && a->in[p] == b->in[q] && !weight[a->in[p]] &&
                        ir_dtype_is_float(g->values[a->in[p]].dtype))
                        adj[ua] |= 1ULL << ub, adj[ub] |= 1ULL << ua;
        }
    }
    /* units are numbered in a topological order: close the edges into reachability */
    for (int u = n - 1; u >= 0; u--)
        for (int v = u + 1; v < n; v++)
            if (reach[u] >> v & 1) reach[u] |= reach[v];
    gen_set seen = {0};
    subsets frontier = {0}, next = {0};
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = subsets_push(&frontier, 1ULL << i);
    for (int size = 1; size <= d && ok && frontier.n; size++) {
        next.n = 0;
        for (int s = 0; s < frontier.n && ok; s++) {
            uint64_t m = frontier.masks[s];
            /* convex: no node outside both reached from m and reaching m */
            uint64_t from = 0;
            for (int i = 0; i < n; i++)
                if (m >> i & 1) from |= reach[i];
            bool convex = true;
            for (int u = 0; u < n && convex; u++)
                if (!(m >> u & 1) && (from >> u & 1) && (reach[u] & m)) convex = false;
            if (convex && (m & compute) && (m & ~pre)) ok = subsets_push(out, m);
            if (size == d) continue;
            uint64_t nb = 0;
            for (int i = 0; i < n; i++)
                if (m >> i & 1) nb |= adj[i];
            nb &= ~m;
            for (int j = 0; j < n && ok; j++) {
                if (!(nb >> j & 1)) continue;
                bool oom = false;
                if (gen_set_add(&seen, m | (1ULL << j), &oom))
                    ok = subsets_push(&next, m | (1ULL << j));
                else if (oom)
                    ok = false;
            }
        }
        subsets t = frontier;
        frontier = next;
        next = t;
    }
    free(frontier.masks);
    free(next.masks);
    gen_set_free(&seen);
    if (!ok) return false;
    qsort(out->masks, (size_t)out->n, sizeof(uint64_t), cmp_subset);
    if (out->n <= max) return true;
    /* keep max of them, taking the sizes in turn (largest first), so that single ops are
     * mutated alone as well as merged with their neighbours */
    uint64_t *kept = malloc(sizeof(uint64_t) * (size_t)max);
    if (!kept) return false;
    int nk = 0, start[65] = {0};
    for (int i = 0, sz = -1; i < out->n; i++) /* start of each size's run */
        if (popcount64(out->masks[i]) != sz) sz = popcount64(out->masks[i]), start[sz] = i + 1;
    int next_of[65];
    for (int z = 0; z <= 64; z++) next_of[z] = start[z] ? start[z] - 1 : -1;
    while (nk < max) {
        bool any = false;
        for (int z = 64; z >= 1 && nk < max; z--) {
            int i = next_of[z];
            if (i < 0 || i >= out->n || popcount64(out->masks[i]) != z) continue;
            kept[nk++] = out->masks[i];
            next_of[z] = i + 1;
            any = true;
        }
        if (!any) break;
    }
    memcpy(out->masks, kept, sizeof(uint64_t) * (size_t)nk);
    out->n = nk;
    free(kept);
    return true;
}

/* ---------------------------------------------------------------- splicing */

/* P with the nodes marked inside replaced by mutant m of the program they form (m's inputs are
 * named as values of P, its outputs as the values of P the subset produces for the rest). New
 * values and nodes are named "pet.s<serial>.*". NULL when out of memory. */
static ir_graph *splice(const ir_graph *P, const unsigned char *inside, const ir_graph *m,
                        int serial) {
    ir_graph *g = ir_graph_new();
    int *pmap = malloc(sizeof(int) * ((size_t)P->n_values + 1));
    int *mmap = malloc(sizeof(int) * ((size_t)m->n_values + 1));
    char nm[160];
    if (!g || !pmap || !mmap) goto fail;
    g->name = ir_graph_strdup(g, P->name);
    g->source = ir_graph_strdup(g, P->source);
    g->opset = P->opset;
    for (int v = 0; v < P->n_values; v++) {
        const ir_value *sv = &P->values[v];
        pmap[v] = -1;
        if (sv->producer >= 0 && inside[sv->producer]) {
            /* kept only when the mutant produces it (an output of the subset) */
            bool out = false;
            for (int o = 0; o < m->n_outputs && !out; o++)
                out = !strcmp(m->values[m->outputs[o]].name, sv->name);
            if (!out) continue;
        }
        int nv = ir_graph_add_value(g, sv->name, sv->dtype, &sv->shape);
        if (nv < 0) goto fail;
        pmap[v] = nv;
        g->values[nv].flags = sv->flags & ~(IR_VF_INPUT | IR_VF_OUTPUT);
        g->values[nv].blob = ir_blob_ref(sv->blob);
    }
    for (int i = 0; i < P->n_inputs; i++) ir_graph_add_input(g, pmap[P->inputs[i]]);
    int ins[64], outs[64];
    for (int i = 0; i < P->n_nodes; i++) {
        if (inside[i]) continue;
        const ir_node *n = &P->nodes[i];
        if (n->n_in > 64 || n->n_out > 64) goto fail;
        for (int k = 0; k < n->n_in; k++) ins[k] = n->in[k] < 0 ? -1 : pmap[n->in[k]];
        for (int k = 0; k < n->n_out; k++) outs[k] = n->out[k] < 0 ? -1 : pmap[n->out[k]];
        if (gen_copy_node(g, n, n->name, ins, outs) < 0) goto fail;
    }
    for (int v = 0; v < m->n_values; v++) {
        const ir_value *mv = &m->values[v];
        mmap[v] = -1;
        bool named = (mv->flags & IR_VF_INPUT) || (mv->flags & IR_VF_OUTPUT) ||
                     (mv->producer < 0 && ir_dtype_is_float(mv->dtype));
        if (named) { /* an input, a float constant or an output: P's value of that name */
            int pv = ir_graph_find_value(P, mv->name);
            if (pv < 0 || pmap[pv] < 0) goto fail;
            mmap[v] = pmap[pv];
            continue;
        }
        snprintf(nm, sizeof nm, "pet.s%d.v%d", serial, v);
        int nv = ir_graph_add_value(g, nm, mv->dtype, &mv->shape);
        if (nv < 0) goto fail;
        mmap[v] = nv;
        g->values[nv].flags = mv->flags & ~(IR_VF_INPUT | IR_VF_OUTPUT);
        g->values[nv].blob = ir_blob_ref(mv->blob);
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const ir_node *n = &m->nodes[i];
        if (n->n_in > 64 || n->n_out > 64) goto fail;
        for (int k = 0; k < n->n_in; k++) ins[k] = n->in[k] < 0 ? -1 : mmap[n->in[k]];
        for (int k = 0; k < n->n_out; k++) outs[k] = n->out[k] < 0 ? -1 : mmap[n->out[k]];
        snprintf(nm, sizeof nm, "pet.s%d.n%d", serial, i);
        if (gen_copy_node(g, n, nm, ins, outs) < 0) goto fail;
    }
    for (int i = 0; i < P->n_outputs; i++) ir_graph_add_output(g, pmap[P->outputs[i]]);
    if (ir_graph_toposort(g, NULL) != IR_OK) goto fail;
#ifdef MAGPIE_DEBUG
    IR_ASSERT(ir_graph_validate(g, NULL) == IR_OK);
#endif
    free(pmap);
    free(mmap);
    return g;
fail:
    free(pmap);
    free(mmap);
    ir_graph_free(g);
    return NULL;
}

/* ---------------------------------------------------------------- the rounds */

typedef struct opt_ctx {
    const ir_graph *orig;
    pet_gen_opts o;
    prof_model *cost;
    gen_set seen;
    pet_mutant_list *result; /* top-K over all rounds */
    pet_mutant_list next;    /* top-K of the current round */
    int splices;
    ir_diag *d;
} opt_ctx;

/* pet_gen_opts.interrupt read non-zero: the rounds and subsets left are skipped. */
static bool interrupted(const pet_gen_opts *o) {
    return o->interrupt && *o->interrupt;
}

/* Takes over g (a mutant of the whole program): deduplicates, costs, labels, keeps. */
static ir_status offer(opt_ctx *x, ir_graph *g, int round) {
    bool oom = false;
    uint64_t h = pet_gen_graph_hash(g);
    if (!gen_set_add(&x->seen, h, &oom)) {
        ir_graph_free(g);
        if (oom) return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory");
        x->result->stats.duplicates++;
        return IR_OK;
    }
    int *unit = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int n_ops = unit ? op_units(g, unit) : g->n_nodes;
    free(unit);
    double cost = pet_gen_cost(x->cost, g);
    if (x->o.judge) cost = x->o.judge(x->o.judge_ctx, x->orig, g, cost);
    if (!(cost < INFINITY)) { /* dropped (NaN too) */
        ir_graph_free(g);
        x->result->stats.rejected++;
        return IR_OK;
    }
    pet_mutant m = {.graph = g,
                    .hash = h,
                    .cls = pet_mutant_classify(x->orig, g),
                    .cost = cost,
                    .n_ops = n_ops,
                    .round = round};
    ir_graph *copy = ir_graph_clone(g);
    if (!copy) {
        ir_graph_free(g);
        return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory");
    }
    pet_mutant mc = m;
    mc.graph = copy;
    if (!topk_insert(&x->next, x->o.top_k, m) || !topk_insert(x->result, x->o.top_k, mc))
        return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory");
    return IR_OK;
}

static void add_stats(pet_gen_stats *a, const pet_gen_stats *b) {
    a->states += b->states;
    a->candidates += b->candidates;
    a->pruned_visited += b->pruned_visited;
    a->pruned_repeat += b->pruned_repeat;
    a->pruned_inverse += b->pruned_inverse;
    a->pruned_shape += b->pruned_shape;
    a->pruned_size += b->pruned_size;
    a->pruned_degree += b->pruned_degree;
    a->pruned_dangling += b->pruned_dangling;
    a->pruned_order += b->pruned_order;
    a->complete += b->complete;
    a->mutants += b->mutants;
    a->duplicates += b->duplicates;
    a->enumerations += b->enumerations;
    a->truncated = a->truncated || b->truncated;
}

/* Mutates P (whole or by subsets), offering every mutant of the whole program. */
static ir_status mutate(opt_ctx *x, const ir_graph *P, int round) {
    ir_status rc = IR_OK;
    size_t nn = (size_t)P->n_nodes + 1;
    unsigned char *w = gen_weight_values(P), *inside = calloc(nn, 1);
    int *unit = malloc(sizeof(int) * nn), *nodes = malloc(sizeof(int) * nn);
    subsets ss = {0};
    if (!w || !inside || !unit || !nodes) {
        rc = ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    int n_units = op_units(P, unit);
    bool whole = n_units <= x->o.subset_ops;
    if (!whole && !find_subsets(P, unit, n_units, w, x->o.subset_ops, x->o.max_subsets, &ss)) {
        rc = ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int s = 0; s < (whole ? 1 : ss.n) && rc == IR_OK && !interrupted(&x->o); s++) {
        ir_graph *mini = NULL;
        if (!whole) {
            int n = 0;
            for (int i = 0; i < P->n_nodes; i++) {
                inside[i] = unit[i] < 64 && (ss.masks[s] >> unit[i] & 1);
                if (inside[i]) nodes[n++] = i;
            }
            ir_diag dd;
            mini = gen_extract(P, nodes, n, w, &rc, &dd);
            if (!mini) {
                if (rc == IR_ERR_NOMEM) break;
                rc = IR_OK; /* a subset that cannot stand alone: skip it */
                continue;
            }
        }
        pet_mutant_list ml = {0};
        ir_diag dd;
        pet_gen_opts eo = x->o;
        eo.cost = NULL; /* offer() costs the whole program */
        ir_status er = gen_enumerate(whole ? P : mini, &eo, &ml, &dd);
        add_stats(&x->result->stats, &ml.stats);
        if (er == IR_ERR_NOMEM) rc = ir_diag_set(x->d, er, "%s", dd.msg);
        for (int i = 0; i < ml.n && rc == IR_OK; i++) {
            ir_graph *g = ml.items[i].graph;
            ml.items[i].graph = NULL;
            if (!whole) {
                ir_graph *sp = splice(P, inside, g, x->splices++);
                ir_graph_free(g);
                if (!sp) {
                    rc = ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory splicing a mutant");
                    break;
                }
                g = sp;
            }
            rc = offer(x, g, round);
        }
        pet_mutant_list_free(&ml);
        ir_graph_free(mini);
    }
out:
    free(ss.masks);
    free(w);
    free(inside);
    free(unit);
    free(nodes);
    return rc;
}

ir_status pet_gen_optimize(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                           ir_diag *d) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    opt_ctx x = {.orig = prog, .result = out, .d = d};
    if (o) x.o = *o;
    if (x.o.rounds <= 0) x.o.rounds = 4;
    if (x.o.top_k <= 0) x.o.top_k = 8;
    if (x.o.subset_ops <= 0) x.o.subset_ops = 4;
    if (x.o.max_subsets <= 0) x.o.max_subsets = 16;
    prof_model *own = NULL;
    x.cost = x.o.cost;
    if (!x.cost) {
        ir_status st;
        x.cost = own = prof_open("analytic:rtx3090", NULL, &st, d);
        if (!own) return st;
    }
    ir_status rc = IR_OK;
    bool oom = false;
    gen_set_add(&x.seen, pet_gen_graph_hash(prog), &oom);
    out->orig_cost = pet_gen_cost(x.cost, prog);
    pet_mutant_list frontier = {0};
    ir_graph *first = ir_graph_clone(prog);
    if (oom || !first) {
        ir_graph_free(first);
        rc = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto done;
    }
    pet_mutant seed = {.graph = first, .cost = out->orig_cost};
    if (!gen_list_push(&frontier, &seed)) {
        rc = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int r = 1; r <= x.o.rounds && rc == IR_OK && frontier.n && !interrupted(&x.o); r++) {
        for (int i = 0; i < frontier.n && rc == IR_OK && !interrupted(&x.o); i++)
            rc = mutate(&x, frontier.items[i].graph, r);
        pet_mutant_list_free(&frontier);
        frontier = x.next; /* this round's top-K are the next round's programs */
        memset(&x.next, 0, sizeof x.next);
    }
done:
    pet_mutant_list_free(&frontier);
    pet_mutant_list_free(&x.next);
    gen_set_free(&x.seen);
    prof_close(own);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->stats.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}
