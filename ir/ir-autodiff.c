/* ir-autodiff.c - the builder context of ir-autodiff.h: emitting backward ops, constants,
 * gradient accumulation and unbroadcasting. ir-train.c drives it (ir_build_training).
 *
 * Invariants: value ids of the forward graph are the same in the training graph (it starts as
 * a clone), so `grad` and `needs` are indexed by forward value id (n_fwd entries); values added
 * later never need a gradient. After the first failure (ad->st != IR_OK) every helper is a
 * no-op returning -1, and the first message is kept. */
#include "ir-train.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- state */

ir_status ir_ad_init(ir_ad *ad, ir_graph *g) {
    memset(ad, 0, sizeof *ad);
    ad->g = g;
    ad->n_fwd = g->n_values;
    ad->grad = malloc(sizeof(int) * ((size_t)ad->n_fwd + 1));
    ad->needs = calloc((size_t)ad->n_fwd + 1, 1);
    ad->const_cap = 256;
    ad->const_tab = malloc(sizeof(int) * (size_t)ad->const_cap);
    if (!ad->grad || !ad->needs || !ad->const_tab) return IR_ERR_NOMEM;
    for (int v = 0; v < ad->n_fwd; v++) ad->grad[v] = -1;
    for (int i = 0; i < ad->const_cap; i++) ad->const_tab[i] = -1;
    return IR_OK;
}

void ir_ad_free(ir_ad *ad) {
    free(ad->grad);
    free(ad->needs);
    free(ad->const_tab);
    free(ad->gout);
    memset(ad, 0, sizeof *ad);
}

static bool failed(const ir_grad_ctx *c) {
    return c->ad->st != IR_OK;
}

static int nomem(ir_grad_ctx *c) {
    ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
    return -1;
}

/* ---------------------------------------------------------------- errors */

ir_status ir_grad_fail(ir_grad_ctx *c, ir_status st, const char *fmt, ...) {
    ir_ad *ad = c->ad;
    if (ad->st != IR_OK) return ad->st;
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ad->st = c->node ? ir_node_fail(&ad->d, st, c->node, "gradient: %s", why)
                     : ir_diag_set(&ad->d, st, "gradient: %s", why);
    return ad->st;
}

ir_status ir_grad_status(const ir_grad_ctx *c) {
    return c->ad->st;
}

/* A failure inside a helper whose message is already in d (shape inference): keep it. */
static int fail_with(ir_grad_ctx *c, ir_status st, const ir_diag *d) {
    if (c->ad->st == IR_OK) {
        c->ad->st = st;
        c->ad->d = *d;
    }
    return -1;
}

/* ---------------------------------------------------------------- queries */

bool ir_grad_needs(const ir_grad_ctx *c, int i) {
    if (i < 0 || i >= c->n_in) return false;
    int v = c->in[i];
    return v >= 0 && v < c->ad->n_fwd && c->ad->needs[v];
}

ir_shape ir_grad_shape(const ir_grad_ctx *c, int v) {
    return c->g->values[v].shape;
}

ir_dtype ir_grad_dtype(const ir_grad_ctx *c, int v) {
    return c->g->values[v].dtype;
}

int ir_grad_gout(ir_grad_ctx *c, int i) {
    if (failed(c)) return -1;
    if (i < 0 || i >= c->n_out) {
        ir_grad_fail(c, IR_ERR_INTERNAL, "output %d does not exist", i);
        return -1;
    }
    if (i < c->ad->n_gout && c->ad->gout[i] >= 0) return c->ad->gout[i];
    int v = c->out[i];
    ir_shape s = ir_grad_shape(c, v);
    int z = ir_grad_zeros(c, ir_grad_dtype(c, v), &s);
    if (i < c->ad->n_gout) c->ad->gout[i] = z;
    return z;
}

int ir_grad_fwd_output(ir_grad_ctx *c, int i) {
    if (failed(c)) return -1;
    if (i < c->n_out && c->out[i] >= 0) return c->out[i];
    ir_graph *g = c->g;
    ir_node *n = &g->nodes[c->node_index];
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || i >= def->max_out) {
        ir_grad_fail(c, IR_ERR_INTERNAL, "the op has no output %d", i);
        return -1;
    }
    int cnt = i + 1 > n->n_out ? i + 1 : n->n_out;
    int *outs = ir_graph_alloc(g, sizeof(int) * (size_t)cnt);
    if (!outs) return nomem(c);
    for (int k = 0; k < cnt; k++) outs[k] = k < n->n_out ? n->out[k] : -1;
    for (int k = 0; k < cnt; k++) {
        if (outs[k] >= 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%s/saved%d", n->name, k);
        outs[k] = ir_graph_add_value(g, name, IR_F32, NULL);
        if (outs[k] < 0) return nomem(c);
        n = &g->nodes[c->node_index];
        g->values[outs[k]].producer = c->node_index;
    }
    n->out = outs;
    n->n_out = cnt;
    ir_status st = ir_node_infer(g, n, &c->ad->d);
    if (st != IR_OK) return fail_with(c, st, &c->ad->d);
    /* the builder's view of the node follows */
    c->ad->node_copy = *n;
    c->out = n->out;
    c->n_out = n->n_out;
    return outs[i];
}

int ir_grad_in_ints(ir_grad_ctx *c, int i, int64_t *out, int max) {
    if (failed(c)) return -1;
    int cnt;
    ir_diag d = {{0}};
    ir_status st = ir_const_ints(c->g, c->node, i, out, max, &cnt, &d);
    if (st != IR_OK) return fail_with(c, st, &d);
    return cnt;
}

bool ir_grad_in_scalar(ir_grad_ctx *c, int i, double *out) {
    if (failed(c)) return false;
    ir_diag d = {{0}};
    if (ir_const_scalar(c->g, c->node, i, out, &d)) return true;
    fail_with(c, IR_ERR_UNSUPPORTED, &d);
    return false;
}

/* ---------------------------------------------------------------- emitting */

ir_status ir_grad_emit(ir_grad_ctx *c, ir_op_kind op, int n_in, const int *in, int n_out, int *out,
                       int n_attrs, const ir_attr *attrs) {
    ir_ad *ad = c->ad;
    ir_graph *g = c->g;
    for (int i = 0; i < n_out; i++) out[i] = -1;
    if (ad->st != IR_OK) return ad->st;
    const char *base = c->node ? c->node->name : "train";
    char name[512];
    for (int i = 0; i < n_out; i++) {
        snprintf(name, sizeof name, "%s/grad%d", base, ad->n_names++);
        out[i] = ir_graph_add_value(g, name, IR_F32, NULL);
        if (out[i] < 0) return nomem(c);
    }
    snprintf(name, sizeof name, "%s/grad/%s%d", base, ir_op_name(op), ad->n_names++);
    int idx = ir_graph_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    if (idx < 0) return nomem(c);
    ir_status st = ir_node_infer(g, &g->nodes[idx], &ad->d);
    if (st != IR_OK) {
        ad->st = st;
        for (int i = 0; i < n_out; i++) out[i] = -1;
    }
    return st;
}

int ir_grad_op(ir_grad_ctx *c, ir_op_kind op, int n_in, const int *in, int n_attrs,
               const ir_attr *attrs) {
    int out;
    ir_grad_emit(c, op, n_in, in, 1, &out, n_attrs, attrs);
    return out;
}

int ir_grad_op1(ir_grad_ctx *c, ir_op_kind op, int a) {
    return ir_grad_op(c, op, 1, &a, 0, NULL);
}

int ir_grad_op2(ir_grad_ctx *c, ir_op_kind op, int a, int b) {
    return ir_grad_op(c, op, 2, (int[]){a, b}, 0, NULL);
}

ir_attr ir_grad_attr_int(const char *name, int64_t v) {
    return (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v};
}

ir_attr ir_grad_attr_float(const char *name, float v) {
    return (ir_attr){.name = name, .type = IR_ATTR_FLOAT, .f = v};
}

ir_attr ir_grad_attr_str(ir_grad_ctx *c, const char *name, const char *s) {
    const char *copy = ir_graph_strdup(c->g, s);
    if (!copy) nomem(c);
    return (ir_attr){.name = name, .type = IR_ATTR_STRING, .s = copy ? copy : ""};
}

ir_attr ir_grad_attr_ints(ir_grad_ctx *c, const char *name, int n, const int64_t *v) {
    int64_t *copy = ir_graph_alloc(c->g, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!copy) nomem(c);
    if (copy && n) memcpy(copy, v, sizeof(int64_t) * (size_t)n);
    return (ir_attr){.name = name, .type = IR_ATTR_INTS, .n = copy ? n : 0, .ints = copy};
}

ir_attr ir_grad_attr_floats(ir_grad_ctx *c, const char *name, int n, const float *v) {
    float *copy = ir_graph_alloc(c->g, sizeof(float) * (size_t)(n ? n : 1));
    if (!copy) nomem(c);
    if (copy && n) memcpy(copy, v, sizeof(float) * (size_t)n);
    return (ir_attr){.name = name, .type = IR_ATTR_FLOATS, .n = copy ? n : 0, .floats = copy};
}

/* ---------------------------------------------------------------- constants */

/* Constants are deduplicated through an open-addressing table of value ids keyed by a hash of
 * dtype, shape and bytes, so a graph of thousands of Reshapes holds one copy of each shape. */
static uint64_t const_hash(ir_dtype t, const ir_shape *s, const void *data, size_t bytes) {
    uint64_t h = ir_hash_bytes(s->dims, sizeof(int64_t) * (size_t)s->rank, (uint64_t)t + 1);
    return ir_hash_bytes(data, bytes, h ^ (uint64_t)s->rank);
}

static bool const_same(const ir_value *v, ir_dtype t, const ir_shape *s, const void *data,
                       size_t bytes) {
    return v->dtype == t && ir_shape_eq(&v->shape, s) && v->blob &&
           (bytes == 0 || memcmp(ir_blob_data(v->blob), data, bytes) == 0);
}

static bool const_grow(ir_ad *ad) {
    int cap = ad->const_cap * 2;
    int *tab = malloc(sizeof(int) * (size_t)cap);
    if (!tab) return false;
    for (int i = 0; i < cap; i++) tab[i] = -1;
    for (int i = 0; i < ad->const_cap; i++) {
        int v = ad->const_tab[i];
        if (v < 0) continue;
        const ir_value *val = &ad->g->values[v];
        uint64_t h =
            const_hash(val->dtype, &val->shape, ir_blob_data(val->blob), ir_value_bytes(val));
        size_t j = (size_t)h & (size_t)(cap - 1);
        while (tab[j] >= 0) j = (j + 1) & (size_t)(cap - 1);
        tab[j] = v;
    }
    free(ad->const_tab);
    ad->const_tab = tab;
    ad->const_cap = cap;
    return true;
}

int ir_grad_const(ir_grad_ctx *c, ir_dtype t, const ir_shape *s, const void *data) {
    ir_ad *ad = c->ad;
    if (failed(c)) return -1;
    size_t bytes = (size_t)ir_shape_numel(s) * ir_dtype_size(t);
    if (2 * (ad->n_consts + 1) > ad->const_cap && !const_grow(ad)) return nomem(c);
    uint64_t h = const_hash(t, s, data, bytes);
    size_t mask = (size_t)ad->const_cap - 1, j = (size_t)h & mask;
    for (; ad->const_tab[j] >= 0; j = (j + 1) & mask)
        if (const_same(&c->g->values[ad->const_tab[j]], t, s, data, bytes)) return ad->const_tab[j];
    char name[64];
    snprintf(name, sizeof name, "grad_const%d", ad->n_consts);
    ir_blob *b = ir_blob_new(bytes ? bytes : 1);
    int v = b ? ir_graph_add_value(c->g, name, t, s) : -1;
    if (v < 0) {
        ir_blob_unref(b);
        return nomem(c);
    }
    if (bytes) memcpy(ir_blob_data(b), data, bytes);
    c->g->values[v].blob = b;
    c->g->values[v].flags |= IR_VF_CONST;
    ad->const_tab[j] = v;
    ad->n_consts++;
    return v;
}

int ir_grad_scalar(ir_grad_ctx *c, ir_dtype t, double v) {
    uint64_t buf = 0;
    ir_store_f64(&buf, t, 0, v);
    ir_shape s = {0};
    return ir_grad_const(c, t, &s, &buf);
}

int ir_grad_const_i64(ir_grad_ctx *c, int n, const int64_t *v) {
    ir_shape s = ir_shape_make(1, (int64_t[]){n});
    return ir_grad_const(c, IR_I64, &s, v);
}

/* ---------------------------------------------------------------- compositions */

int ir_grad_reshape(ir_grad_ctx *c, int v, const ir_shape *to) {
    if (failed(c)) return -1;
    ir_shape cur = ir_grad_shape(c, v);
    if (ir_shape_eq(&cur, to)) return v;
    int shp = ir_grad_const_i64(c, to->rank, to->dims);
    return ir_grad_op2(c, IR_OP_Reshape, v, shp);
}

int ir_grad_transpose(ir_grad_ctx *c, int v, int n, const int64_t *perm) {
    bool ident = true;
    for (int i = 0; i < n; i++) ident = ident && perm[i] == i;
    if (failed(c) || ident) return failed(c) ? -1 : v;
    /* v = Transpose(x) and perm undoes it: x itself, as a transposed view would be. A copy
     * would be a second tensor of x's size (a layer's weight, for MatMul(x, Transpose(W))'s
     * input gradient) made in the backward, or, in a fission region that shares it among
     * its parts, made before the first part and held through all of them. */
    int p = c->g->values[v].producer;
    if (p >= 0 && c->g->nodes[p].op == IR_OP_Transpose && c->g->nodes[p].in[0] >= 0) {
        int x = c->g->nodes[p].in[0];
        const int64_t *q;
        int nq = ir_attr_ints(&c->g->nodes[p], "perm", &q);
        bool undoes = nq == n && c->g->values[x].shape.rank == n;
        /* output axis i of Transpose(v, perm) is v's axis perm[i], which is x's q[perm[i]] */
        for (int i = 0; i < n && undoes; i++) undoes = q[perm[i]] == i;
        if (undoes) return x;
    }
    ir_attr a = ir_grad_attr_ints(c, "perm", n, perm);
    return ir_grad_op(c, IR_OP_Transpose, 1, &v, 1, &a);
}

int ir_grad_reduce_sum(ir_grad_ctx *c, int v, int n_axes, const int64_t *axes, bool keepdims) {
    if (failed(c)) return -1;
    ir_attr a = ir_grad_attr_int("keepdims", keepdims ? 1 : 0);
    if (n_axes == 0) return ir_grad_op(c, IR_OP_ReduceSum, 1, &v, 1, &a); /* every axis */
    int ax = ir_grad_const_i64(c, n_axes, axes);
    return ir_grad_op(c, IR_OP_ReduceSum, 2, (int[]){v, ax}, 1, &a);
}

int ir_grad_unbroadcast(ir_grad_ctx *c, int v, const ir_shape *to) {
    if (failed(c)) return -1;
    ir_shape s = ir_grad_shape(c, v);
    if (ir_shape_eq(&s, to)) return v;
    int lead = s.rank - to->rank, n = 0;
    int64_t axes[IR_MAX_RANK];
    if (lead < 0) {
        ir_grad_fail(c, IR_ERR_INTERNAL, "gradient of rank %d for a value of rank %d", s.rank,
                     to->rank);
        return -1;
    }
    for (int i = 0; i < s.rank; i++) {
        int k = i - lead;
        if (s.dims[i] == 1) continue; /* nothing to sum: the final Reshape fixes the rank */
        if (k < 0 || to->dims[k] == 1)
            axes[n++] = i;
        else if (to->dims[k] != s.dims[i]) {
            char s1[128], s2[128];
            ir_grad_fail(c, IR_ERR_INTERNAL, "gradient %s does not broadcast to %s",
                         ir_shape_str(&s, s1, sizeof s1), ir_shape_str(to, s2, sizeof s2));
            return -1;
        }
    }
    if (n > 0) v = ir_grad_reduce_sum(c, v, n, axes, true);
    return ir_grad_reshape(c, v, to); /* drops the leading ones */
}

int ir_grad_zeros(ir_grad_ctx *c, ir_dtype t, const ir_shape *s) {
    int z = ir_grad_scalar(c, t, 0.0);
    int shp = ir_grad_const_i64(c, s->rank, s->dims);
    return ir_grad_op2(c, IR_OP_Expand, z, shp);
}

int ir_grad_scale(ir_grad_ctx *c, int v, double k) {
    if (failed(c) || k == 1.0) return failed(c) ? -1 : v;
    return ir_grad_op2(c, IR_OP_Mul, v, ir_grad_scalar(c, ir_grad_dtype(c, v), k));
}

/* ---------------------------------------------------------------- accumulation */

/* Adds grad into ad->grad[v] (value v of the forward graph). */
ir_status ir_ad_add_grad(ir_grad_ctx *c, int v, int grad) {
    ir_ad *ad = c->ad;
    if (ad->st != IR_OK) return ad->st;
    if (grad < 0) return ir_grad_fail(c, IR_ERR_INTERNAL, "no gradient value");
    if (v < 0 || v >= ad->n_fwd || !ad->needs[v]) return IR_OK;
    ir_shape to = ir_grad_shape(c, v);
    if (ir_grad_dtype(c, grad) != ir_grad_dtype(c, v))
        return ir_grad_fail(c, IR_ERR_INTERNAL, "gradient of '%s' is %s, the value is %s",
                            c->g->values[v].name, ir_dtype_name(ir_grad_dtype(c, grad)),
                            ir_dtype_name(ir_grad_dtype(c, v)));
    grad = ir_grad_unbroadcast(c, grad, &to);
    if (grad < 0) return ad->st;
    ad->grad[v] = ad->grad[v] < 0 ? grad : ir_grad_op2(c, IR_OP_Add, ad->grad[v], grad);
    return ad->st;
}

ir_status ir_grad_accumulate(ir_grad_ctx *c, int i, int grad) {
    if (failed(c)) return c->ad->st;
    if (!ir_grad_needs(c, i)) return IR_OK;
    return ir_ad_add_grad(c, c->in[i], grad);
}
