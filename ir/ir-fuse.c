/* ir-fuse.c - LayerNorm and GELU that an exporter decomposed, fused back into the one op each
 * that the module computes (ir_fuse_decomposed, ir.h; import option fuse_decomposed).
 *
 * PyTorch's exporter below opset 17 (LayerNormalization) and 20 (Gelu) writes nn.LayerNorm as
 *   m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(d ^ 2, [-1]); y = d / Sqrt(v + eps) * g + b
 * and the exact GELU as
 *   y = x * (Erf(x / sqrt(2)) + 1) * 0.5
 * Differentiating those keeps their intermediates for the backward (d, the normalized rows, the
 * Erf and its sum: activations each), where PyTorch's fused kernels keep their input and two
 * statistics per row: magpie's eager figure of such a file is then not what PyTorch sees for
 * the module. The fused node computes the same function: LayerNormalization(x, g, b) with
 * axis -1 and the file's epsilon (its float32 constant, which the attribute holds exactly), and
 * Gelu(x) with approximate none. A pattern fuses only when it is exactly that: the constants
 * are constants (not trainable parameters) with those values (sqrt(2) and 1/sqrt(2) to float32
 * rounding), both reductions are over the last axis alone with kept dims, scale and bias are
 * vectors of the last dim's size, the output has x's shape, and no intermediate is read outside
 * the pattern or is a graph output. The pattern's last node becomes the fused op in its place
 * (so the eager order keeps it where the decomposition ended) and ir_graph_prune drops the
 * rest. In the same spirit a Dropout that draws nothing (PyTorch's training export of
 * Dropout(p=0) writes ratio 0, training mode on) is bypassed: PyTorch's dropout returns its
 * input there, where magpie's Dropout copies it, and the backward would keep both. */
#include "ir-impl.h"

#include <math.h>
#include <stdlib.h>

/* The node producing value v when it is of kind op and v has one reader, else NULL. */
static const ir_node *single_use_producer(const ir_graph *g, const int *uses, int v,
                                          ir_op_kind op) {
    if (v < 0 || uses[v] != 1) return NULL;
    int p = g->values[v].producer;
    if (p < 0 || g->nodes[p].op != op || g->nodes[p].n_out < 1 || g->nodes[p].out[0] != v)
        return NULL;
    return &g->nodes[p];
}

/* A one-element float constant that is not a trainable parameter: its value. */
static bool scalar_const(const ir_graph *g, int v, double *out) {
    if (v < 0) return false;
    const ir_value *c = &g->values[v];
    if (!c->blob || (c->flags & IR_VF_PARAM) || !ir_dtype_is_float(c->dtype) ||
        ir_shape_numel(&c->shape) != 1)
        return false;
    *out = ir_load_f64(ir_value_data(c), c->dtype, 0);
    return true;
}

static bool is_const(const ir_graph *g, int v, double want, double tol) {
    double c;
    return scalar_const(g, v, &c) && fabs(c - want) <= tol;
}

/* A ReduceMean over the last axis of its rank-r input alone, keeping dims. */
static bool mean_over_last(const ir_graph *g, const ir_node *n) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (!x || x->shape.rank < 1 || ir_attr_int(n, "keepdims", 1) != 1) return false;
    const int r = x->shape.rank;
    int64_t axis;
    if (n->n_in >= 2 && n->in[1] >= 0) { /* opset 18: axes as an input */
        const ir_value *a = &g->values[n->in[1]];
        if (!a->blob || a->dtype != IR_I64 || ir_shape_numel(&a->shape) != 1) return false;
        axis = ((const int64_t *)ir_value_data(a))[0];
    } else {
        const int64_t *ax;
        if (ir_attr_ints(n, "axes", &ax) != 1) return false;
        axis = ax[0];
    }
    return axis == -1 || axis == r - 1;
}

/* v is a vector of x's last dim's size and dtype (LayerNormalization's scale or bias). */
static bool row_vector(const ir_graph *g, int v, const ir_value *x) {
    if (v < 0) return false;
    const ir_value *s = &g->values[v];
    return s->dtype == x->dtype && s->shape.rank == 1 &&
           s->shape.dims[0] == x->shape.dims[x->shape.rank - 1];
}

static bool same_shape(const ir_shape *a, const ir_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* Of a binary node's inputs, the producer of the one made by op and read once (*other: the
 * other input); NULL when neither is. */
static const ir_node *either_input(const ir_graph *g, const int *uses, const ir_node *n,
                                   ir_op_kind op, int *other) {
    if (n->n_in != 2) return NULL;
    for (int k = 0; k < 2; k++) {
        const ir_node *p = single_use_producer(g, uses, n->in[k], op);
        if (p) {
            *other = n->in[1 - k];
            return p;
        }
    }
    return NULL;
}

/* The Add `add` ends a decomposed LayerNorm: its x, scale, bias and epsilon. */
static bool match_layernorm(const ir_graph *g, const int *uses, const ir_node *add, int *x,
                            int *scale, int *bias, double *eps) {
    int other;
    const ir_node *mul = either_input(g, uses, add, IR_OP_Mul, bias);
    if (!mul) return false;
    const ir_node *div = either_input(g, uses, mul, IR_OP_Div, scale);
    if (!div || div->n_in != 2) return false;
    const ir_node *sqrt = single_use_producer(g, uses, div->in[1], IR_OP_Sqrt);
    const int dv = div->in[0];
    if (!sqrt || dv < 0 || uses[dv] != 2) return false; /* d: read by Pow and Div */
    const int sp = g->values[dv].producer;
    if (sp < 0) return false;
    const ir_node *sub = &g->nodes[sp];
    if (sub->op != IR_OP_Sub || sub->n_in != 2 || sub->out[0] != dv) return false;
    const ir_node *mean = single_use_producer(g, uses, sub->in[1], IR_OP_ReduceMean);
    if (!mean || mean->in[0] != sub->in[0] || !mean_over_last(g, mean)) return false;
    const ir_node *plus = single_use_producer(g, uses, sqrt->in[0], IR_OP_Add);
    if (!plus) return false;
    const ir_node *var = either_input(g, uses, plus, IR_OP_ReduceMean, &other);
    if (!var || !scalar_const(g, other, eps) || !mean_over_last(g, var)) return false;
    const ir_node *pow = single_use_producer(g, uses, var->in[0], IR_OP_Pow);
    if (!pow || pow->n_in != 2 || pow->in[0] != dv || !is_const(g, pow->in[1], 2.0, 0))
        return false;
    *x = sub->in[0];
    const ir_value *xv = &g->values[*x];
    return ir_dtype_is_float(xv->dtype) && row_vector(g, *scale, xv) && row_vector(g, *bias, xv) &&
           same_shape(&xv->shape, &ir_node_out(g, add, 0)->shape);
}

/* The Mul `last` ends a decomposed exact GELU: its x. */
static bool match_gelu(const ir_graph *g, const int *uses, const ir_node *last, int *x) {
    int half, one, xs;
    const double ulp = 2.4e-7; /* float32 rounding of sqrt(2) and its inverse, with margin */
    const ir_node *prod = either_input(g, uses, last, IR_OP_Mul, &half);
    if (!prod || !is_const(g, half, 0.5, 0)) return false;
    const ir_node *sum = either_input(g, uses, prod, IR_OP_Add, &xs);
    if (!sum) return false;
    const ir_node *erf = either_input(g, uses, sum, IR_OP_Erf, &one);
    if (!erf || !is_const(g, one, 1.0, 0)) return false;
    const int a = erf->in[0];
    const ir_node *scale = single_use_producer(g, uses, a, IR_OP_Div);
    bool ok =
        scale && scale->n_in == 2 && scale->in[0] == xs && is_const(g, scale->in[1], M_SQRT2, ulp);
    if (!ok) {
        scale = single_use_producer(g, uses, a, IR_OP_Mul);
        int c = -1;
        if (scale && scale->n_in == 2)
            c = scale->in[0] == xs ? scale->in[1] : scale->in[1] == xs ? scale->in[0] : -1;
        ok = c >= 0 && is_const(g, c, M_SQRT1_2, ulp);
    }
    if (!ok || xs < 0) return false;
    *x = xs;
    const ir_value *xv = &g->values[xs];
    return ir_dtype_is_float(xv->dtype) && same_shape(&xv->shape, &ir_node_out(g, last, 0)->shape);
}

/* Node i becomes op with inputs in (n_in) and attributes at (n_at), shapes inferred again. */
static ir_status become(ir_graph *g, int i, ir_op_kind op, const char *op_type, const int *in,
                        int n_in, const ir_attr *at, int n_at, ir_diag *d) {
    int *nin = ir_graph_alloc(g, sizeof(int) * (size_t)n_in);
    ir_attr *nat = n_at ? ir_graph_alloc(g, sizeof(ir_attr) * (size_t)n_at) : NULL;
    if (!nin || (n_at && !nat)) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    memcpy(nin, in, sizeof(int) * (size_t)n_in);
    if (n_at) memcpy(nat, at, sizeof(ir_attr) * (size_t)n_at);
    ir_node *n = &g->nodes[i];
    n->op = op;
    n->op_type = op_type;
    n->domain = "";
    n->in = nin;
    n->n_in = n_in;
    n->attrs = nat;
    n->n_attrs = n_at;
    n->n_out = 1;
    return ir_node_infer(g, n, d);
}

static void count_uses(const ir_graph *g, int *uses) {
    memset(uses, 0, sizeof(int) * ((size_t)g->n_values + 1));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) uses[g->nodes[i].in[k]]++;
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]] += 2; /* never single-use */
}

/* Dropouts that draw nothing (ratio 0, or not in training mode: ir_node_draws_random), whose
 * mask nothing reads and whose output is no graph output, are bypassed: their readers read the
 * input, as PyTorch's dropout returns its input itself there (a copy would be one more
 * activation kept). Returns the count. */
static int bypass_identity_dropouts(ir_graph *g, const int *uses) {
    int n_bypassed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_Dropout || ir_node_draws_random(g, n) || n->n_out < 1 || n->out[0] < 0 ||
            n->in[0] < 0)
            continue;
        const int y = n->out[0], x = n->in[0];
        if (n->n_out > 1 && n->out[1] >= 0 && uses[n->out[1]]) continue;
        bool out_of_graph = false;
        for (int k = 0; k < g->n_outputs; k++) out_of_graph |= g->outputs[k] == y;
        if (out_of_graph) continue;
        for (int j = i + 1; j < g->n_nodes; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == y) g->nodes[j].in[k] = x;
        n_bypassed++;
    }
    return n_bypassed;
}

ir_status ir_fuse_decomposed(ir_graph *g, ir_fuse_counts *counts, ir_diag *d) {
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    count_uses(g, uses);
    const int nd = bypass_identity_dropouts(g, uses);
    if (nd) count_uses(g, uses);
    int nl = 0, ng = 0;
    ir_status st = IR_OK;
    for (int i = 0; i < g->n_nodes && st == IR_OK; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->n_out != 1 || n->out[0] < 0) continue;
        int x, scale, bias;
        double eps;
        if (n->op == IR_OP_Add && match_layernorm(g, uses, n, &x, &scale, &bias, &eps)) {
            const ir_attr at[2] = {{.name = "axis", .type = IR_ATTR_INT, .i = -1},
                                   {.name = "epsilon", .type = IR_ATTR_FLOAT, .f = (float)eps}};
            const int in[3] = {x, scale, bias};
            st = become(g, i, IR_OP_LayerNormalization, "LayerNormalization", in, 3, at, 2, d);
            nl++;
        } else if (n->op == IR_OP_Mul && match_gelu(g, uses, n, &x)) {
            st = become(g, i, IR_OP_Gelu, "Gelu", &x, 1, NULL, 0, d);
            ng++;
        }
    }
    free(uses);
    if (st != IR_OK) return st;
    if (nl + ng + nd) ir_graph_prune(g);
    if (counts) *counts = (ir_fuse_counts){.layernorm = nl, .gelu = ng, .dropout = nd};
    return IR_OK;
}
