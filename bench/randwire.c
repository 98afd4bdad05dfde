/* randwire.c - RandWire networks as magpie graphs and HMCOS's reverse post-order (randwire.h).
 * Everything is deterministic in the config: the same seed gives the same graph on every
 * machine (integer-only random draws from splitmix64). */
#include "randwire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rw_config rw_default(int stages, int nodes, uint64_t seed) {
    return (rw_config){.stages = stages,
                       .nodes = nodes,
                       .k = 4,
                       .p = 0.75,
                       .seed = seed,
                       .channels = 78,
                       .size = 56,
                       .dense = false,
                       .batchnorm = false};
}

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
    return ir_mix64(r->s += 0x9e3779b97f4a7c15ull);
}
static double rng_unit(rng *r) {
    return (double)(rng_next(r) >> 11) / (double)(1ull << 53);
}
static int rng_below(rng *r, int n) {
    return (int)(rng_next(r) % (uint64_t)n);
}

/* The Watts-Strogatz adjacency (n x n, symmetric, diagonal set) of HMCOS's gen_random_graph. */
static void ws_graph(int n, int k, double p, uint64_t seed, unsigned char *adj, int *free_list) {
    rng r = {seed};
    memset(adj, 0, (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) {
        adj[i * n + i] = 1;
        for (int j = i - k / 2; j <= i + k / 2; j++) {
            int rj = ((j % n) + n) % n;
            if (rj != i) adj[i * n + rj] = adj[rj * n + i] = 1;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k / 2; j++) {
            int cur = (i + j + 1) % n;
            if (rng_unit(&r) >= p) continue;
            int nf = 0;
            for (int x = 0; x < n; x++)
                if (!adj[i * n + x]) free_list[nf++] = x;
            if (nf == 0) continue;
            int to = free_list[rng_below(&r, nf)];
            adj[i * n + cur] = adj[cur * n + i] = 0;
            adj[i * n + to] = adj[to * n + i] = 1;
        }
}

typedef struct builder {
    ir_graph *g;
    ir_diag *d;
    bool failed;
} builder;

static int weight(builder *b, const char *name, int rank, const int64_t *dims) {
    ir_shape s = ir_shape_make(rank, dims);
    int v = ir_graph_add_value(b->g, name, IR_F32, &s);
    if (v < 0) {
        b->failed = true;
        return -1;
    }
    ir_graph_add_input(b->g, v);
    b->g->values[v].flags |= IR_VF_PARAM;
    return v;
}

/* Adds a one-output node and infers its shape; returns the output value. */
static int node(builder *b, ir_op_kind op, const char *name, int n_in, const int *in, int n_attrs,
                const ir_attr *attrs) {
    if (b->failed) return -1;
    int out = ir_graph_add_value(b->g, name, IR_F32, NULL);
    int ni = out < 0 ? -1 : ir_graph_add_node(b->g, op, name, n_in, in, 1, &out, n_attrs, attrs);
    if (ni < 0) {
        b->failed = true;
        ir_diag_set(b->d, IR_ERR_NOMEM, "randwire: out of memory adding '%s'", name);
        return -1;
    }
    if (ir_node_infer(b->g, &b->g->nodes[ni], b->d) != IR_OK) {
        b->failed = true;
        return -1;
    }
    return out;
}

static int64_t *ints(builder *b, int64_t v0, int64_t v1, int64_t v2, int64_t v3) {
    int64_t *p = ir_graph_alloc(b->g, sizeof(int64_t) * 4);
    if (!p) {
        b->failed = true;
        return NULL;
    }
    p[0] = v0, p[1] = v1, p[2] = v2, p[3] = v3;
    return p;
}

/* A k x k convolution of x (cin channels) into cout channels. */
static int conv(builder *b, const char *name, int x, int64_t cin, int64_t cout, int k, int stride,
                int group) {
    char wn[128];
    snprintf(wn, sizeof wn, "%s.weight", name);
    int64_t wd[4] = {cout, cin / group, k, k};
    int w = weight(b, wn, 4, wd);
    if (w < 0) return -1;
    int64_t pad = k / 2;
    ir_attr a[4] = {
        {.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = ints(b, k, k, 0, 0)},
        {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = ints(b, stride, stride, 0, 0)},
        {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = ints(b, pad, pad, pad, pad)},
        {.name = "group", .type = IR_ATTR_INT, .i = group},
    };
    int in[2] = {x, w};
    return node(b, IR_OP_Conv, name, 2, in, 4, a);
}

/* One DAG node: [Sum] -> Relu -> conv -> [BatchNorm]; returns its output value. */
static int rw_op(builder *b, const rw_config *c, const char *pre, int n_in, const int *in,
                 int64_t cin, int64_t cout, int stride) {
    char nm[128];
    int x = in[0];
    if (n_in > 1) {
        snprintf(nm, sizeof nm, "%s.sum", pre);
        x = node(b, IR_OP_Sum, nm, n_in, in, 0, NULL);
    }
    snprintf(nm, sizeof nm, "%s.relu", pre);
    x = node(b, IR_OP_Relu, nm, 1, &x, 0, NULL);
    if (c->dense) {
        snprintf(nm, sizeof nm, "%s.conv", pre);
        x = conv(b, nm, x, cin, cout, 3, stride, 1);
    } else {
        snprintf(nm, sizeof nm, "%s.dwconv", pre);
        x = conv(b, nm, x, cin, cin, 3, stride, (int)cin);
        snprintf(nm, sizeof nm, "%s.pwconv", pre);
        x = conv(b, nm, x, cin, cout, 1, 1, 1);
    }
    if (c->batchnorm && !b->failed) {
        static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
        int bn[5] = {x};
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof nm, "%s.bn.%s", pre, suffix[i]);
            bn[i + 1] = weight(b, nm, 1, &cout);
        }
        snprintf(nm, sizeof nm, "%s.bn", pre);
        x = node(b, IR_OP_BatchNormalization, nm, 5, bn, 0, NULL);
    }
    return x;
}

ir_graph *rw_build(const rw_config *c, ir_diag *d) {
    int n = c->nodes;
    if (c->stages < 1 || n < 2 || c->k < 2 || c->k % 2 || c->k >= n || c->channels < 1 ||
        c->size >> c->stages < 1 || c->p < 0 || c->p > 1) {
        ir_diag_set(d, IR_ERR_INVALID,
                    "randwire: bad config (stages %d, nodes %d, k %d, p %g, channels %d, size %d)",
                    c->stages, n, c->k, c->p, c->channels, c->size);
        return NULL;
    }
    builder b = {.g = ir_graph_new(), .d = d};
    unsigned char *adj = malloc((size_t)n * (size_t)n);
    int *scratch = malloc(sizeof(int) * (size_t)n * 4);
    if (!b.g || !adj || !scratch) {
        ir_diag_set(d, IR_ERR_NOMEM, "randwire: out of memory");
        b.failed = true;
        goto out;
    }
    int *free_list = scratch, *out = scratch + n, *preds = scratch + 2 * n,
        *sinks = scratch + 3 * n;
    b.g->name = ir_graph_strdup(b.g, "randwire");
    b.g->opset = 13;
    int64_t in_dims[4] = {1, c->channels, c->size, c->size};
    ir_shape is = ir_shape_make(4, in_dims);
    int x = ir_graph_add_value(b.g, "input", IR_F32, &is);
    ir_graph_add_input(b.g, x);
    b.g->values[x].flags |= IR_VF_DATA;
    int64_t cin = c->channels;
    for (int s = 0; s < c->stages && !b.failed; s++) {
        int64_t f = (int64_t)c->channels << s;
        /* Cells of networks with different cell counts differ too. */
        ws_graph(n, c->k, c->p, ir_mix64(c->seed) ^ ((uint64_t)c->stages << 16) ^ (uint64_t)s, adj,
                 free_list);
        int n_sinks = 0;
        for (int i = 0; i < n && !b.failed; i++) {
            int np = 0;
            bool sink = true;
            for (int j = 0; j < n; j++) {
                if (j == i || !adj[i * n + j]) continue;
                if (j < i) preds[np++] = out[j];
                if (j > i) sink = false;
            }
            char pre[64];
            snprintf(pre, sizeof pre, "c%d.n%d", s, i);
            out[i] =
                np ? rw_op(&b, c, pre, np, preds, f, f, 1) : rw_op(&b, c, pre, 1, &x, cin, f, 2);
            if (sink) sinks[n_sinks++] = out[i];
        }
        char nm[64];
        snprintf(nm, sizeof nm, "c%d.out", s);
        x = n_sinks > 1 ? node(&b, IR_OP_Sum, nm, n_sinks, sinks, 0, NULL) : sinks[0];
        cin = f;
    }
    if (!b.failed) ir_graph_add_output(b.g, x);
out:
    free(adj);
    free(scratch);
    if (b.failed) {
        ir_graph_free(b.g);
        return NULL;
    }
    return b.g;
}

ir_status rw_save_onnx(const rw_config *c, const char *path, ir_diag *d) {
    ir_graph *g = rw_build(c, d);
    if (!g) return IR_ERR_INVALID;
    ir_status st = ir_onnx_save(g, path, d);
    ir_graph_free(g);
    return st;
}

int *rw_reverse_post_order(const ir_graph *g) {
    int n = g->n_nodes;
    size_t sn = (size_t)n + 1;
    int *order = malloc(sizeof(int) * sn);
    unsigned char *done = calloc(sn, 1);
    /* Each node is pushed at most once per reader edge plus once expanded, and the roots. */
    size_t cap = sn + (size_t)g->n_outputs;
    for (int i = 0; i < n; i++) cap += (size_t)g->nodes[i].n_in + 1;
    int *stack = malloc(sizeof(int) * cap); /* entries: node * 2 + expanded */
    if (!order || !done || !stack) {
        free(order);
        order = NULL;
        goto out;
    }
    int k = 0;
    /* Roots: output producers in output order (pushed in reverse: the first is popped first),
     * then every node, so that nodes reaching no output come last, in index order. */
    for (int pass = 0; pass < 2; pass++) {
        int nroots = pass == 0 ? g->n_outputs : n;
        for (int r = 0; r < nroots; r++) {
            int root = pass == 0 ? g->values[g->outputs[r]].producer : r;
            if (root < 0 || done[root]) continue;
            size_t sp = 0;
            stack[sp++] = root * 2;
            while (sp) {
                int e = stack[--sp], v = e / 2;
                if (done[v]) continue;
                if (e & 1) {
                    done[v] = 1;
                    order[k++] = v;
                    continue;
                }
                stack[sp++] = v * 2 + 1;
                const ir_node *nd = &g->nodes[v];
                for (int i = nd->n_in - 1; i >= 0; i--) {
                    int in = nd->in[i];
                    int p = in >= 0 ? g->values[in].producer : -1;
                    bool first = p >= 0 && !done[p]; /* distinct producers: first occurrence */
                    for (int j = 0; j < i && first; j++)
                        first = nd->in[j] < 0 || g->values[nd->in[j]].producer != p;
                    if (first) stack[sp++] = p * 2;
                }
            }
        }
    }
out:
    free(done);
    free(stack);
    return order;
}

size_t rw_param_bytes(const ir_graph *g) {
    size_t b = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (v->flags & IR_VF_PARAM) b += ir_value_bytes(v);
    }
    return b;
}
