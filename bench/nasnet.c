/* nasnet.c - random NASNet-like graphs and three local rewrites around memory hot-spots, for the
 * incremental-scheduling bench (nasnet.h describes both). Every node is shape-inferred as it is
 * added, and every rewrite works on a clone: the input graph is never modified. */
#include "nasnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* Attribute arrays must outlive the graph: they are static here. */
static int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0}, s1[2] = {1, 1},
               s2[2] = {2, 2}, s4[2] = {4, 4};

typedef struct nb {
    ir_graph *g;
    nas_rng *r;
    int names;
    bool failed;
} nb;

static int value(nb *b, const char *prefix, ir_dtype t, const ir_shape *s) {
    char nm[48];
    snprintf(nm, sizeof nm, "%s_%d", prefix, b->names++);
    int v = ir_graph_add_value(b->g, nm, t, s);
    if (v < 0) b->failed = true;
    return v;
}

/* Adds a one-output node and infers it; returns its output value (or -1 after a failure). */
static int node(nb *b, ir_op_kind op, int n_in, const int *in, int n_attrs, const ir_attr *attrs) {
    if (b->failed) return -1;
    int out = value(b, ir_op_name(op), IR_F32, NULL);
    if (out < 0) return -1;
    int k = ir_graph_add_node(b->g, op, NULL, n_in, in, 1, &out, n_attrs, attrs);
    ir_diag d = {{0}};
    if (k < 0 || ir_node_infer(b->g, &b->g->nodes[k], &d) != IR_OK) {
        fprintf(stderr, "nasnet: %s\n", d.msg);
        b->failed = true;
        return -1;
    }
    return out;
}

static int weight(nb *b, int64_t cout, int64_t cin, int64_t k) {
    ir_shape s = ir_shape_make(4, (int64_t[]){cout, cin, k, k});
    int v = value(b, "w", IR_F32, &s);
    if (v < 0) return -1;
    ir_graph_add_input(b->g, v);
    b->g->values[v].flags |= IR_VF_PARAM;
    return v;
}

static const ir_shape *shape_of(nb *b, int v) {
    return &b->g->values[v].shape;
}

/* Conv (k x k, stride, same padding) + Relu to cout channels. */
static int conv_relu(nb *b, int x, int64_t cout, int k, int stride) {
    if (b->failed) return -1;
    int w = weight(b, cout, shape_of(b, x)->dims[1], k);
    /* kernel_shape is optional: W gives it. */
    ir_attr at[2] = {
        {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = k == 3 ? p1 : p0},
        {.name = "strides",
         .type = IR_ATTR_INTS,
         .n = 2,
         .ints = stride == 4   ? s4
                 : stride == 2 ? s2
                               : s1},
    };
    int c = node(b, IR_OP_Conv, 2, (int[]){x, w}, 2, at);
    return node(b, IR_OP_Relu, 1, &c, 0, NULL);
}

static int pool(nb *b, ir_op_kind op, int x) {
    ir_attr at[3] = {
        {.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = k3},
        {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = p1},
        {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = s1},
    };
    return node(b, op, 1, &x, 3, at);
}

/* One of the four block ops on x. */
static int block_op(nb *b, int x) {
    switch (nas_below(b->r, 4)) {
    case 0: return conv_relu(b, x, shape_of(b, x)->dims[1], 3, 1);
    case 1: return pool(b, IR_OP_AveragePool, x);
    case 2: return pool(b, IR_OP_MaxPool, x);
    default: return x; /* identity: a skip, no node */
    }
}

/* A cell on (h_prev, h_cur) with c channels; returns its output. */
static int cell(nb *b, int h_prev, int h_cur, int64_t c, bool reduce) {
    int64_t target = shape_of(b, h_cur)->dims[2] / (reduce ? 2 : 1);
    int sp = (int)(shape_of(b, h_prev)->dims[2] / target), sc = reduce ? 2 : 1;
    int st[7] = {conv_relu(b, h_prev, c, 1, sp), conv_relu(b, h_cur, c, 1, sc)};
    bool used[7] = {false};
    int n = 2;
    for (int i = 0; i < 5 && !b->failed; i++) {
        int a = nas_below(b->r, n), e = nas_below(b->r, n);
        int oa = block_op(b, st[a]), oe = block_op(b, st[e]);
        used[a] = used[e] = true;
        st[n++] = node(b, IR_OP_Add, 2, (int[]){oa, oe}, 0, NULL);
    }
    int parts[5], np = 0;
    for (int i = 2; i < n; i++)
        if (!used[i]) parts[np++] = st[i];
    if (np == 1) return parts[0];
    ir_attr axis = {.name = "axis", .type = IR_ATTR_INT, .i = 1};
    return node(b, IR_OP_Concat, np, parts, 1, &axis);
}

ir_graph *nas_build(nas_rng *r, int target_nodes, int channels, int hw) {
    nb b = {.g = ir_graph_new(), .r = r};
    if (!b.g) return NULL;
    b.g->opset = 17;
    b.g->name = "nasnet";
    ir_shape xs = ir_shape_make(4, (int64_t[]){1, channels, hw, hw});
    int x = value(&b, "x", IR_F32, &xs);
    if (x < 0) goto fail;
    ir_graph_add_input(b.g, x);
    b.g->values[x].flags |= IR_VF_DATA;
    int h = conv_relu(&b, x, channels, 3, 1);
    int h_prev = h, h_cur = h, reductions = 0;
    int64_t c = channels;
    for (int i = 1; b.g->n_nodes < target_nodes && !b.failed; i++) {
        bool reduce = i % 4 == 0 && reductions < 3 && shape_of(&b, h_cur)->dims[2] >= 4;
        if (reduce) {
            c *= 2;
            reductions++;
        }
        int out = cell(&b, h_prev, h_cur, c, reduce);
        h_prev = h_cur;
        h_cur = out;
    }
    int y = node(&b, IR_OP_GlobalAveragePool, 1, &h_cur, 0, NULL);
    if (b.failed) goto fail;
    ir_graph_add_output(b.g, y);
    return b.g;
fail:
    ir_graph_free(b.g);
    return NULL;
}

/* ---------------------------------------------------------------- rewrites */

const char *nas_rewrite_name(nas_rewrite_kind k) {
    static const char *const names[NAS_KINDS] = {"remat", "swap", "split"};
    return k >= 0 && k < NAS_KINDS ? names[k] : "?";
}

typedef struct rw {
    nb b;
    const int *pos; /* node -> step of the order */
    uint32_t *touched;
    int n_touched, max_touched;
} rw;

static void touch(rw *w, uint32_t id) {
    if (w->n_touched < w->max_touched) w->touched[w->n_touched++] = id;
}

/* The node reading v last in the order (-1 when none); *n_users counts its distinct readers. */
static int last_user(const ir_graph *g, const int *pos, int v, int *n_users) {
    int best = -1;
    *n_users = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const ir_node *nd = &g->nodes[k];
        bool reads = false;
        for (int i = 0; i < nd->n_in; i++) reads |= nd->in[i] == v;
        if (!reads) continue;
        ++*n_users;
        if (best < 0 || pos[k] > pos[best]) best = k;
    }
    return best;
}

static void rewire(ir_node *u, int from, int to) {
    for (int i = 0; i < u->n_in; i++)
        if (u->in[i] == from) u->in[i] = to;
}

static bool remat(rw *w, int v) {
    ir_graph *g = w->b.g;
    int p = g->values[v].producer, n_users;
    int u = last_user(g, w->pos, v, &n_users);
    if (p < 0 || n_users < 2 || g->nodes[p].n_out != 1) return false;
    ir_node P = g->nodes[p]; /* a copy: adding a node may move g->nodes */
    int nv = node(&w->b, P.op, P.n_in, P.in, P.n_attrs, P.attrs);
    if (nv < 0) return false;
    rewire(&g->nodes[u], v, nv);
    touch(w, g->nodes[g->values[nv].producer].id);
    touch(w, g->nodes[u].id);
    return true;
}

static bool swap(rw *w, int v) {
    ir_graph *g = w->b.g;
    int n_users;
    int u = last_user(g, w->pos, v, &n_users);
    if (u < 0 || (g->values[v].flags & IR_VF_OUTPUT)) return false;
    int h = node(&w->b, IR_OP_Store, 1, &v, 0, NULL);
    int l = node(&w->b, IR_OP_Load, 1, &h, 0, NULL);
    if (l < 0) return false;
    rewire(&g->nodes[u], v, l);
    touch(w, g->nodes[g->values[h].producer].id);
    touch(w, g->nodes[g->values[l].producer].id);
    touch(w, g->nodes[u].id);
    return true;
}

static int const_i64(rw *w, int64_t x) {
    ir_shape s = ir_shape_make(1, (int64_t[]){1});
    int v = value(&w->b, "c", IR_I64, &s);
    if (v < 0) return -1;
    ir_value *val = &w->b.g->values[v];
    val->blob = ir_blob_new(sizeof(int64_t));
    if (!val->blob) {
        w->b.failed = true;
        return -1;
    }
    memcpy(ir_blob_data(val->blob), &x, sizeof x);
    val->flags |= IR_VF_CONST;
    return v;
}

/* Slice [lo, hi) of x along axis. */
static int slice(rw *w, int x, int64_t lo, int64_t hi, int64_t axis) {
    int in[4] = {x, const_i64(w, lo), const_i64(w, hi), const_i64(w, axis)};
    return node(&w->b, IR_OP_Slice, 4, in, 0, NULL);
}

static bool splittable(const ir_graph *g, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->op != IR_OP_Relu && n->op != IR_OP_Add && n->op != IR_OP_Conv) return false;
    const ir_value *o = ir_node_out(g, n, 0);
    if (o->shape.rank != 4 || o->shape.dims[1] % 2) return false;
    if (n->op == IR_OP_Add) /* both halves slice the inputs: no broadcasting */
        return ir_shape_eq(&ir_node_in(g, n, 0)->shape, &o->shape) &&
               ir_shape_eq(&ir_node_in(g, n, 1)->shape, &o->shape);
    return n->op != IR_OP_Conv || n->n_in == 2;
}

/* Splits node k along channels: Relu and Add slice their inputs, Conv slices its weight; node k
 * becomes the Concat of the two halves (a new node: new id) and keeps its output value, so its
 * readers are not rewired. */
static bool split(rw *w, int k) {
    ir_graph *g = w->b.g;
    ir_node X = g->nodes[k];
    int64_t c = ir_node_out(g, &X, 0)->shape.dims[1], h = c / 2;
    int halves[2];
    for (int i = 0; i < 2; i++) {
        int64_t lo = i * h, hi = lo + h;
        if (X.op == IR_OP_Conv) {
            int wi = slice(w, X.in[1], lo, hi, 0);
            halves[i] = node(&w->b, IR_OP_Conv, 2, (int[]){X.in[0], wi}, X.n_attrs, X.attrs);
        } else if (X.op == IR_OP_Relu) {
            int xi = slice(w, X.in[0], lo, hi, 1);
            halves[i] = node(&w->b, IR_OP_Relu, 1, &xi, 0, NULL);
        } else {
            int a = slice(w, X.in[0], lo, hi, 1), b = slice(w, X.in[1], lo, hi, 1);
            halves[i] = node(&w->b, IR_OP_Add, 2, (int[]){a, b}, 0, NULL);
        }
    }
    if (w->b.failed) return false;
    int *in = ir_graph_alloc(g, sizeof(int) * 2);
    ir_attr *axis = ir_graph_alloc(g, sizeof(ir_attr));
    if (!in || !axis) return false;
    in[0] = halves[0];
    in[1] = halves[1];
    *axis = (ir_attr){.name = "axis", .type = IR_ATTR_INT, .i = 1};
    touch(w, X.id); /* removed */
    ir_node *n = &g->nodes[k];
    n->op = IR_OP_Concat;
    n->op_type = "Concat";
    n->domain = "";
    n->id = g->next_node_id++;
    n->n_in = 2;
    n->in = in;
    n->n_attrs = 1;
    n->attrs = axis;
    touch(w, n->id);
    /* every node added after the clone is new */
    return true;
}

ir_graph *nas_rewrite(const ir_graph *g0, const int *order, nas_rewrite_kind kind, nas_rng *r,
                      uint32_t *touched, int *n_touched, int max_touched) {
    sched_memory m;
    ir_diag d = {{0}};
    *n_touched = 0;
    if (sched_memory_compute(g0, order, &m, &d) != IR_OK) return NULL;
    int *pos = malloc(sizeof(int) * (size_t)(g0->n_nodes + 1));
    int *cand = malloc(sizeof(int) * (size_t)(m.n_hotspots + 1));
    ir_graph *g = NULL;
    if (!pos || !cand) goto fail;
    for (int s = 0; s < g0->n_nodes; s++) pos[order[s]] = s;
    int nc = 0;
    for (int i = 0; i < m.n_hotspots; i++) {
        int v = m.hotspots[i];
        if (g0->values[v].producer >= 0 && !ir_value_on_host(g0, v)) cand[nc++] = v;
    }
    /* Random order of the candidates; the first where the rewrite applies wins. */
    for (int i = nc - 1; i > 0; i--) {
        int j = nas_below(r, i + 1), t = cand[i];
        cand[i] = cand[j];
        cand[j] = t;
    }
    for (int i = 0; i < nc; i++) {
        g = ir_graph_clone(g0);
        if (!g) goto fail;
        rw w = {.b = {.g = g, .r = r, .names = g0->n_values},
                .pos = pos,
                .touched = touched,
                .max_touched = max_touched};
        int first_new = g->n_nodes, v = cand[i];
        bool ok = false;
        if (kind == NAS_REMAT) {
            ok = remat(&w, v);
        } else if (kind == NAS_SWAP) {
            ok = swap(&w, v);
        } else {
            int k = g->values[v].producer;
            if (!splittable(g, k)) {
                int nu;
                k = last_user(g, pos, v, &nu);
                if (k >= 0 && !splittable(g, k)) k = -1;
            }
            ok = k >= 0 && split(&w, k);
        }
        if (ok && kind == NAS_SPLIT)
            for (int k = first_new; k < g->n_nodes; k++) touch(&w, g->nodes[k].id);
        if (ok && !w.b.failed && ir_graph_toposort(g, &d) == IR_OK) {
            *n_touched = w.n_touched;
            free(pos);
            free(cand);
            sched_memory_free(&m);
            return g;
        }
        ir_graph_free(g);
        g = NULL;
    }
fail:
    free(pos);
    free(cand);
    sched_memory_free(&m);
    return NULL;
}
