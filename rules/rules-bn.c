/* rules-bn.c - training-mode batch norm in two phases (rules.h, rw_bn_two_phase and
 * rw_fission_phases).
 *
 * A training-mode BatchNormalization normalizes with statistics over the batch, so the
 * dimension graph gives its batch no link and a batch fission stops there. Written as standard
 * ops, the statistics are sums over the batch (ReduceSum, a sum reduce axis: each part computes
 * its partial sums, FissionAccumulate adds them up), and everything else is per element (split)
 * or per channel (shared):
 *
 *     s1 = ReduceSum(X, axes = all but 1, keepdims)     mean = s1 / cnt
 *     d = X - mean    s2 = ReduceSum(d * d)              var = s2 / cnt
 *     Y = d * (scale / sqrt(var + eps)) + bias
 *     running_mean' = running_mean * momentum + mean * (1 - momentum), likewise running_var
 *
 * The variance is the centered second sum, as the fused kernel computes it (two passes), not
 * E[x^2] - mean^2, whose cancellation in float32 would put the plan's error above the original's
 * against the float64 reference wherever |mean| is large against the deviation; it costs one
 * more phase. The backward comes from autodiff of these ops: its batch reductions (sum(dy),
 * sum(dy * xhat) in another form) are ReduceSums over the batch too.
 *
 * rw_fission_phases then cuts a fission S along the batch into phases: a node's phase is the
 * largest number of such sums on a path from S's inputs to it (a partial node of S whose result
 * S reads ends a phase), each phase's connected pieces a fission of its own; per-channel nodes
 * between them (mean, var, the scale) run once, outside every group, on the accumulated sums.
 * So every part's partial sums exist before any part normalizes, and the model computes what it
 * computed. */
#include "rules-impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ops-norm.c's rule (ir_bn_training, private to ir/) for the forward: training_mode, or for the
 * opset-9 form without it, more than one output; the backward's builder always sets
 * training_mode (ops-grad-norm.c). */
bool rw_bn_batch_stats(const ir_node *n) {
    if (n->op == IR_OP_BatchNormGrad) return ir_attr_int(n, "training_mode", 0) != 0;
    if (n->op != IR_OP_BatchNormalization) return false;
    int64_t tm = ir_attr_int(n, "training_mode", -1);
    if (tm >= 0) return tm != 0;
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) return true;
    return false;
}

/* Working state of one decomposition. */
typedef struct bn_work {
    ir_graph *g;
    const char *base; /* the BN node's name, for the new nodes' names */
    int k;            /* a counter for names */
} bn_work;

static ir_status nomem(ir_diag *d) {
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory writing a batch norm in two phases");
}

/* Adds op over in[0..n) with one fresh output (or the existing value out_v >= 0), infers it;
 * returns the output's value id, -1 on failure with d set. */
static int add(bn_work *w, ir_op_kind op, int n_in, const int *in, int n_attrs, const ir_attr *a,
               int out_v, ir_diag *d) {
    ir_graph *g = w->g;
    char name[512];
    snprintf(name, sizeof name, "%.400s.bn2p%d", w->base, w->k++);
    int v = out_v >= 0 ? out_v : ir_graph_add_value(g, name, IR_DTYPE_NONE, NULL);
    if (v < 0) return nomem(d), -1;
    int ni = ir_graph_add_node(g, op, name, n_in, in, 1, &v, n_attrs, a);
    if (ni < 0) return nomem(d), -1;
    if (ir_node_infer(g, &g->nodes[ni], d) != IR_OK) return -1;
    return v;
}

/* A scalar constant of dtype t holding x. */
static int scalar(bn_work *w, ir_dtype t, double x, ir_diag *d) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.bn2p%d", w->base, w->k++);
    ir_blob *b = ir_blob_new(t == IR_F64 ? sizeof(double) : sizeof(float));
    if (!b) return nomem(d), -1;
    if (t == IR_F64) {
        memcpy(ir_blob_data(b), &x, sizeof x);
    } else {
        float f = (float)x;
        memcpy(ir_blob_data(b), &f, sizeof f);
    }
    ir_shape s = {0};
    int v = rw_add_const_blob(w->g, name, t, &s, b);
    if (v < 0) nomem(d);
    return v;
}

static int const_i64(bn_work *w, int n, const int64_t *vals, ir_diag *d) {
    char name[512];
    snprintf(name, sizeof name, "%.400s.bn2p%d", w->base, w->k++);
    int v = rw_add_const_i64(w->g, name, n, vals);
    if (v < 0) nomem(d);
    return v;
}

/* Node i (a training-mode BatchNormalization) as standard ops; the node itself becomes the last
 * Add (Y keeps its value id), the running statistics get nodes of their own. */
static ir_status decompose(ir_graph *g, int i, ir_diag *d) {
    ir_node n0 = g->nodes[i]; /* a copy: adding nodes moves the array */
    const ir_value *xv = &g->values[n0.in[0]];
    int rank = xv->shape.rank;
    ir_dtype t = xv->dtype;
    if (rank < 2 || (t != IR_F32 && t != IR_F64))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, &n0,
                            "batch norm in two phases: X must be float32 or float64 of rank >= 2");
    for (int k = 3; k < n0.n_out; k++) {
        int v = n0.out[k];
        bool used = v >= 0 && (g->values[v].flags & IR_VF_OUTPUT);
        for (int j = 0; j < g->n_nodes && v >= 0 && !used; j++)
            for (int q = 0; q < g->nodes[j].n_in; q++) used = used || g->nodes[j].in[q] == v;
        if (used)
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, &n0,
                                "batch norm in two phases: its saved statistics (output %d) are "
                                "read",
                                k);
    }
    bn_work w = {.g = g, .base = n0.name};
    int64_t C = xv->shape.dims[1], cnt = C ? ir_shape_numel(&xv->shape) / C : 0;
    int64_t axes[IR_MAX_RANK], chan[IR_MAX_RANK], na = 0, flat[1] = {C};
    for (int a = 0; a < rank; a++) {
        if (a != 1) axes[na++] = a;
        chan[a] = a == 1 ? C : 1;
    }
    double eps = ir_attr_float(&n0, "epsilon", 1e-5f), mom = ir_attr_float(&n0, "momentum", 0.9f);
    ir_attr keep = {.name = "keepdims", .type = IR_ATTR_INT, .i = 1};
    int x = n0.in[0], c_axes = const_i64(&w, (int)na, axes, d),
        c_chan = const_i64(&w, rank, chan, d), c_flat = const_i64(&w, 1, flat, d),
        inv_cnt = scalar(&w, t, cnt ? 1.0 / (double)cnt : 0, d), c_eps = scalar(&w, t, eps, d);
    if (c_axes < 0 || c_chan < 0 || c_flat < 0 || inv_cnt < 0 || c_eps < 0) return IR_ERR_NOMEM;
    int s1, mean, dx, d2, s2, var, ve, sd, sc, bi, a, yd;
    if ((s1 = add(&w, IR_OP_ReduceSum, 2, (int[]){x, c_axes}, 1, &keep, -1, d)) < 0 ||
        (mean = add(&w, IR_OP_Mul, 2, (int[]){s1, inv_cnt}, 0, NULL, -1, d)) < 0 ||
        (dx = add(&w, IR_OP_Sub, 2, (int[]){x, mean}, 0, NULL, -1, d)) < 0 ||
        (d2 = add(&w, IR_OP_Mul, 2, (int[]){dx, dx}, 0, NULL, -1, d)) < 0 ||
        (s2 = add(&w, IR_OP_ReduceSum, 2, (int[]){d2, c_axes}, 1, &keep, -1, d)) < 0 ||
        (var = add(&w, IR_OP_Mul, 2, (int[]){s2, inv_cnt}, 0, NULL, -1, d)) < 0 ||
        (ve = add(&w, IR_OP_Add, 2, (int[]){var, c_eps}, 0, NULL, -1, d)) < 0 ||
        (sd = add(&w, IR_OP_Sqrt, 1, &ve, 0, NULL, -1, d)) < 0 ||
        (sc = add(&w, IR_OP_Reshape, 2, (int[]){n0.in[1], c_chan}, 0, NULL, -1, d)) < 0 ||
        (bi = add(&w, IR_OP_Reshape, 2, (int[]){n0.in[2], c_chan}, 0, NULL, -1, d)) < 0 ||
        (a = add(&w, IR_OP_Div, 2, (int[]){sc, sd}, 0, NULL, -1, d)) < 0 ||
        (yd = add(&w, IR_OP_Mul, 2, (int[]){dx, a}, 0, NULL, -1, d)) < 0)
        return IR_ERR_INVALID;
    /* the running statistics, where they are written */
    int stat[2] = {mean, var};
    for (int k = 1; k < 3 && k < n0.n_out; k++) {
        int out = n0.out[k];
        if (out < 0) continue;
        int c_mom = scalar(&w, t, mom, d), c_rest = scalar(&w, t, 1 - mom, d), sf, old, ns;
        if (c_mom < 0 || c_rest < 0 ||
            (sf = add(&w, IR_OP_Reshape, 2, (int[]){stat[k - 1], c_flat}, 0, NULL, -1, d)) < 0 ||
            (old = add(&w, IR_OP_Mul, 2, (int[]){n0.in[2 + k], c_mom}, 0, NULL, -1, d)) < 0 ||
            (ns = add(&w, IR_OP_Mul, 2, (int[]){sf, c_rest}, 0, NULL, -1, d)) < 0 ||
            add(&w, IR_OP_Add, 2, (int[]){old, ns}, 0, NULL, out, d) < 0)
            return IR_ERR_INVALID;
    }
    /* the BN node itself becomes Y = yd + bias */
    ir_node *n = &g->nodes[i];
    int *in = ir_graph_alloc(g, 2 * sizeof(int));
    if (!in) return nomem(d);
    in[0] = yd;
    in[1] = bi;
    const ir_op_def *def = ir_op_get(IR_OP_Add);
    n->op = IR_OP_Add;
    n->op_type = def->name;
    n->domain = def->domain;
    n->in = in;
    n->n_in = 2;
    n->n_out = 1;
    n->n_attrs = 0;
    return ir_node_infer(g, n, d);
}

ir_graph *rw_bn_two_phase(const ir_graph *g0, int *n_done, ir_diag *d) {
    *n_done = 0;
    ir_graph *g = ir_graph_clone(g0);
    if (!g) return nomem(d), NULL;
    int n0 = g->n_nodes;
    ir_status st = IR_OK;
    for (int i = 0; i < n0 && st == IR_OK; i++)
        if (g->nodes[i].op == IR_OP_BatchNormalization && rw_bn_batch_stats(&g->nodes[i])) {
            st = decompose(g, i, d);
            ++*n_done;
        }
    if (st == IR_OK) st = rw_finish_graph(g, d);
    if (st != IR_OK) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* ---------------------------------------------------------------- phases */

int rw_fission_phases(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f, rw_fission **out,
                      ir_diag *d) {
    *out = NULL;
    int comp = -1, nn = g->n_nodes, n_out = -1;
    int *map = rw_id_index(g), *lvl = malloc(sizeof(int) * ((size_t)nn + 1)),
        *parent = malloc(sizeof(int) * ((size_t)nn + 1));
    unsigned char *in_s = calloc((size_t)nn + 1, 1), *partial = calloc((size_t)nn + 1, 1);
    uint32_t *ids = malloc(sizeof(uint32_t) * ((size_t)f->n_ids + 1));
    rw_fission *fs = malloc(sizeof(rw_fission) * ((size_t)f->n_ids + 1));
    if (!map || !lvl || !parent || !in_s || !partial || !ids || !fs) {
        nomem(d);
        goto out;
    }
    for (int j = 0; j < f->n_ids; j++) {
        int i = f->ids[j] < g->next_node_id ? map[f->ids[j]] : -1;
        if (i < 0) {
            ir_diag_set(d, IR_ERR_INVALID, "fission phases: no node with id %u", f->ids[j]);
            goto out;
        }
        in_s[i] = 1;
    }
    {
        int si = f->seed_id < g->next_node_id ? map[f->seed_id] : -1;
        if (si >= 0 && f->seed_dim >= 0 && f->seed_out < g->nodes[si].n_out)
            comp = rw_dgraph_value_comp(dg, g->nodes[si].out[f->seed_out], f->seed_dim);
        else if (si >= 0 && f->seed_dim < 0)
            comp = rw_dgraph_reduce_comp(dg, si, -f->seed_dim);
        if (comp < 0) {
            ir_diag_set(d, IR_ERR_INVALID, "fission phases: the seed names no dimension");
            goto out;
        }
    }
    /* partial nodes: in S, no output with a dimension in D */
    for (int i = 0; i < nn; i++) {
        const ir_node *n = &g->nodes[i];
        bool with = false;
        for (int k = 0; k < n->n_out && !with; k++)
            with = n->out[k] >= 0 && rw_dgraph_value_dim_in(dg, n->out[k], comp) >= 0;
        partial[i] = in_s[i] && !with;
    }
    /* a node's phase: the most partial results of S on a path to it that S reads again */
    for (int i = 0; i < nn; i++) {
        const ir_node *n = &g->nodes[i];
        lvl[i] = 0;
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p >= 0 && lvl[p] + partial[p] > lvl[i]) lvl[i] = lvl[p] + partial[p];
        }
    }
    /* the pieces: S's nodes joined along edges within one phase (union-find) */
    for (int i = 0; i < nn; i++) parent[i] = i;
    for (int i = 0; i < nn; i++) {
        if (!in_s[i]) continue;
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
            if (p < 0 || !in_s[p] || lvl[p] != lvl[i]) continue;
            int a = i, b = p;
            while (parent[a] != a) a = parent[a] = parent[parent[a]];
            while (parent[b] != b) b = parent[b] = parent[parent[b]];
            if (a != b) parent[a > b ? a : b] = a < b ? a : b;
        }
    }
    /* one fission per piece, in node order of their roots (a piece's root is its first node) */
    n_out = 0;
    int used = 0;
    for (int r = 0; r < nn; r++) {
        if (!in_s[r] || parent[r] != r) continue;
        fs[n_out] = *f;
        fs[n_out].ids = ids + used;
        fs[n_out].n_ids = 0;
        for (int i = r; i < nn; i++) {
            if (!in_s[i]) continue;
            int a = i;
            while (parent[a] != a) a = parent[a];
            if (a == r) ids[used + fs[n_out].n_ids++] = g->nodes[i].id;
        }
        qsort(ids + used, (size_t)fs[n_out].n_ids, sizeof *ids, rw_cmp_u32);
        /* each piece names D by a node of its own: the phases before it, once applied, divide
         * their values' dims, so a seed there would name another component */
        fs[n_out].seed_dim = INT32_MIN;
        for (int j = 0; j < fs[n_out].n_ids && fs[n_out].seed_dim == INT32_MIN; j++) {
            int i = map[ids[used + j]];
            const ir_node *n = &g->nodes[i];
            for (int k = 0; k < n->n_out && fs[n_out].seed_dim == INT32_MIN; k++)
                for (int dim = 0; dim < IR_MAX_RANK && fs[n_out].seed_dim == INT32_MIN; dim++)
                    if (rw_dgraph_value_comp(dg, n->out[k], dim) == comp)
                        fs[n_out].seed_id = n->id, fs[n_out].seed_out = k, fs[n_out].seed_dim = dim;
            int r = rw_dgraph_reduce_in(dg, i, comp);
            if (fs[n_out].seed_dim == INT32_MIN && r > 0)
                fs[n_out].seed_id = n->id, fs[n_out].seed_out = 0, fs[n_out].seed_dim = -r;
        }
        if (fs[n_out].seed_dim == INT32_MIN) {
            ir_diag_set(d, IR_ERR_INVALID,
                        "fission phases: a piece of %d nodes has no dimension of D of its own",
                        fs[n_out].n_ids);
            n_out = -1;
            goto out;
        }
        used += fs[n_out].n_ids;
        n_out++;
    }
    if (n_out == 0) goto out;
    *out = fs;
    fs = NULL;
    ids = NULL; /* owned by the caller through (*out)[0].ids */
out:
    free(map);
    free(lvl);
    free(parent);
    free(in_s);
    free(partial);
    free(ids);
    free(fs);
    return n_out;
}
