/* ir-train.c - ir_build_training: forward + loss + backward + optimizer updates, in the eager
 * order of DESIGN.md (forward in graph order, backward in reverse forward order as PyTorch's
 * autograd runs it, then the updates in parameter order).
 *
 * The loss's own backward is emitted directly (it seeds the gradient of the first output):
 * sum: ones; mse: 2/N * (y - t), reusing the forward difference; ce: SoftmaxCrossEntropyGrad
 * from the saved log-probabilities. The means of mse and ce are sums over the batch divided by
 * the batch's count (for ce, of the labels that are not ignored), so that a fission along the
 * batch splits the loss and its backward: each part's partial sum is accumulated, and the seed's
 * scale is a shared scalar. Optimizer state tensors are zero-filled constants
 * ("<param>.momentum_buffer", ".exp_avg", ".exp_avg_sq") updated in place (IR_OPF_INPLACE). */
#include "ir-train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value name not yet in g: base, or base_1, base_2, ... */
static const char *unique_name(ir_graph *g, const char *base) {
    char buf[528]; /* room for a 500-byte base and "_<int>" */
    snprintf(buf, sizeof buf, "%.500s", base);
    for (int k = 1; ir_graph_find_value(g, buf) >= 0; k++)
        snprintf(buf, sizeof buf, "%.500s_%d", base, k);
    return ir_graph_strdup(g, buf);
}

static void set_name(ir_graph *g, int v, const char *name) {
    const char *s = unique_name(g, name);
    if (s) g->values[v].name = s;
}

/* ---------------------------------------------------------------- losses */

/* A graph input for the loss (target or labels): an existing graph input of that name (a float
 * one the importer took for a weight becomes data), or a new one. */
static int loss_input(ir_grad_ctx *c, const char *name, ir_dtype t, const ir_shape *s) {
    ir_graph *g = c->g;
    int v = ir_graph_find_value(g, name);
    char s1[128], s2[128];
    if (v >= 0) {
        ir_value *val = &g->values[v];
        if (!(val->flags & IR_VF_INPUT) || val->dtype != t || !ir_shape_eq(&val->shape, s)) {
            ir_grad_fail(c, IR_ERR_SHAPE, "'%s' must be a graph input of %s %s, it is %s %s", name,
                         ir_dtype_name(t), ir_shape_str(s, s1, sizeof s1),
                         ir_dtype_name(val->dtype), ir_shape_str(&val->shape, s2, sizeof s2));
            return -1;
        }
        val->flags = (val->flags & ~(unsigned)IR_VF_PARAM) | IR_VF_DATA;
        bool read = false; /* by the model: then it is no input of the loss alone */
        for (int i = 0; i < g->n_nodes && !read; i++)
            for (int k = 0; k < g->nodes[i].n_in; k++) read |= g->nodes[i].in[k] == v;
        if (!read) val->flags |= IR_VF_LOSS;
        if (v < c->ad->n_fwd) c->ad->needs[v] = 0;
        return v;
    }
    v = ir_graph_add_value(g, name, t, s);
    if (v < 0) {
        ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
        return -1;
    }
    ir_graph_add_input(g, v);
    g->values[v].flags |= IR_VF_DATA | IR_VF_LOSS;
    return v;
}

/* Emits the loss of y and the seed of y's gradient; returns the loss value. */
static int build_loss(ir_grad_ctx *c, const ir_train_opts *o, int y) {
    ir_dtype t = ir_grad_dtype(c, y);
    ir_shape ys = ir_grad_shape(c, y);
    int loss = -1, seed = -1;
    ir_attr flat = ir_grad_attr_int("keepdims", 0);
    switch (o->loss) {
    case IR_LOSS_SUM: {
        loss = ir_grad_op(c, IR_OP_ReduceSum, 1, &y, 1, &flat);
        int one = ir_grad_scalar(c, t, 1.0);
        seed = ir_grad_op2(c, IR_OP_Expand, one, ir_grad_const_i64(c, ys.rank, ys.dims));
        break;
    }
    case IR_LOSS_MSE: {
        int tgt = loss_input(c, o->target && *o->target ? o->target : "target", t, &ys);
        int diff = ir_grad_op2(c, IR_OP_Sub, y, tgt);
        int sq = ir_grad_op2(c, IR_OP_Mul, diff, diff);
        int64_t n = ir_shape_numel(&ys);
        /* the mean as a sum, then 1/N: a fission sums the parts' partial sums (a sum over the
         * batch is a reduce axis it can split, a mean is not) and the scale sees the total */
        int total = ir_grad_op(c, IR_OP_ReduceSum, 1, &sq, 1, &flat);
        loss = ir_grad_scale(c, total, 1.0 / (double)(n ? n : 1));
        seed = ir_grad_scale(c, diff, 2.0 / (double)(n ? n : 1));
        break;
    }
    case IR_LOSS_CE: {
        if (ys.rank < 1) {
            ir_grad_fail(c, IR_ERR_SHAPE, "cross-entropy needs an output of rank >= 1");
            return -1;
        }
        ir_shape ls = ys;
        ls.rank--;
        int labels = loss_input(c, "labels", IR_I64, &ls), out[2];
        /* PyTorch's mean over the labels that count (not ignore_index), as a sum and a count:
         * both are sums over the batch, which a fission splits (its parts' partial sums are
         * accumulated), where a mean is not. The count comes from the labels alone, so it is
         * computed once, before any part, and the seed's scale 1/count is shared by them. */
        ir_attr sum = ir_grad_attr_str(c, "reduction", "sum");
        int ignored = ir_grad_op2(c, IR_OP_Equal, labels, ir_grad_scalar(c, IR_I64, -100.0));
        int counted = ir_grad_op1(c, IR_OP_Not, ignored);
        ir_attr to = ir_grad_attr_int("to", ir_dtype_to_onnx(t));
        counted = ir_grad_op(c, IR_OP_Cast, 1, &counted, 1, &to);
        int count = ir_grad_op(c, IR_OP_ReduceSum, 1, &counted, 1, &flat);
        ir_grad_emit(c, IR_OP_SoftmaxCrossEntropy, 2, (int[]){y, labels}, 2, out, 1, &sum);
        loss = ir_grad_op2(c, IR_OP_Div, out[0], count);
        int scale = ir_grad_op2(c, IR_OP_Div, ir_grad_scalar(c, t, 1.0), count);
        seed = ir_grad_op(c, IR_OP_SoftmaxCrossEntropyGrad, 3, (int[]){scale, out[1], labels}, 1,
                          &sum);
        break;
    }
    default: ir_grad_fail(c, IR_ERR_INVALID, "unknown loss kind %d", (int)o->loss); return -1;
    }
    if (loss >= 0) set_name(c->g, loss, "loss");
    if (seed >= 0) c->ad->grad[y] = seed;
    return ir_grad_status(c) == IR_OK ? loss : -1;
}

/* ---------------------------------------------------------------- the reverse sweep */

static void mark_needs(ir_ad *ad, int n_fwd_nodes) {
    const ir_graph *g = ad->g;
    for (int v = 0; v < ad->n_fwd; v++)
        ad->needs[v] = (g->values[v].flags & IR_VF_PARAM) && ir_dtype_is_float(g->values[v].dtype);
    for (int i = 0; i < n_fwd_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_in && !any; k++) any = n->in[k] >= 0 && ad->needs[n->in[k]];
        for (int k = 0; any && k < n->n_out; k++)
            if (n->out[k] >= 0 && ir_dtype_is_float(g->values[n->out[k]].dtype))
                ad->needs[n->out[k]] = 1;
    }
}

static ir_status backward_node(ir_grad_ctx *c, int k) {
    ir_ad *ad = c->ad;
    ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    bool any_grad = false, any_need = false;
    for (int j = 0; j < n->n_out; j++) any_grad |= n->out[j] >= 0 && ad->grad[n->out[j]] >= 0;
    for (int i = 0; i < n->n_in; i++) any_need |= n->in[i] >= 0 && ad->needs[n->in[i]];
    if (!any_grad || !any_need) return IR_OK;
    if (n->n_out > ad->cap_gout) {
        int *p = realloc(ad->gout, sizeof(int) * (size_t)n->n_out);
        if (!p) return ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
        ad->gout = p;
        ad->cap_gout = n->n_out;
    }
    ad->n_gout = n->n_out;
    for (int j = 0; j < n->n_out; j++) ad->gout[j] = n->out[j] >= 0 ? ad->grad[n->out[j]] : -1;
    ad->node_copy = *n;
    c->node = &ad->node_copy;
    c->node_index = k;
    c->n_in = n->n_in;
    c->n_out = n->n_out;
    c->in = n->in;
    c->out = n->out;
    c->gout = ad->gout;
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !def->grad)
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED,
                            "%s is not differentiable in magpie, and it lies between the loss "
                            "and a parameter",
                            n->op_type && *n->op_type ? n->op_type : ir_op_name(n->op));
    ir_status st = def->grad(c);
    if (st != IR_OK && ad->st == IR_OK) ir_grad_fail(c, st, "the gradient builder failed");
    return ad->st;
}

/* ---------------------------------------------------------------- parameters and updates */

/* A zero-filled state tensor shaped like value p, named "<p>.<what>". Every state tensor
 * shares one zero blob as large as the largest (blobs are read-only, and the executor gives an
 * in-place update a writable copy), so an Adam graph of BERT-base does not zero 680 MB. */
static int zero_state(ir_grad_ctx *c, int p, const char *what, ir_blob *zeros) {
    ir_graph *g = c->g;
    char name[512];
    snprintf(name, sizeof name, "%s.%s", g->values[p].name, what);
    ir_shape s = ir_grad_shape(c, p);
    int v = ir_graph_add_value(g, unique_name(g, name), ir_grad_dtype(c, p), &s);
    if (v < 0) {
        ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
        return -1;
    }
    g->values[v].blob = ir_blob_ref(zeros);
    g->values[v].flags |= IR_VF_CONST;
    return v;
}

static void output_named(ir_grad_ctx *c, int v, const char *base, const char *suffix) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    set_name(c->g, v, name);
    ir_graph_add_output(c->g, v);
}

/* The final gradient of parameter p as a value that can become an output of its own: zeros
 * when no gradient reached it, an Identity when the value is not computed (a constant) or is
 * already an output (one gradient shared by two parameters). */
static int param_grad(ir_grad_ctx *c, int p) {
    int gv = c->ad->grad[p];
    ir_shape s = ir_grad_shape(c, p);
    if (gv < 0) return ir_grad_zeros(c, ir_grad_dtype(c, p), &s);
    bool copy = c->g->values[gv].producer < 0;
    for (int i = 0; i < c->g->n_outputs && !copy; i++) copy = c->g->outputs[i] == gv;
    return copy ? ir_grad_op1(c, IR_OP_Identity, gv) : gv;
}

static ir_status add_updates(ir_grad_ctx *c, const ir_train_opts *o, const int *params, int np) {
    ir_graph *g = c->g;
    double lr = o->lr > 0 ? o->lr : 0.01;
    ir_attr a_lr = ir_grad_attr_float("lr", (float)lr);
    size_t most = 0;
    for (int i = 0; i < np; i++) {
        size_t b = ir_value_bytes(&g->values[params[i]]);
        most = b > most ? b : most;
    }
    ir_blob *zeros = o->optimizer > IR_OPTIM_SGD ? ir_blob_new(most ? most : 1) : NULL;
    if (o->optimizer > IR_OPTIM_SGD && !zeros)
        return ir_grad_fail(c, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < np && ir_grad_status(c) == IR_OK; i++) {
        int p = params[i], gp = param_grad(c, p), out[3];
        const char *pname = ir_graph_strdup(g, g->values[p].name);
        switch (o->optimizer) {
        case IR_OPTIM_NONE: output_named(c, gp, pname, ".grad"); break;
        case IR_OPTIM_SGD:
            ir_grad_emit(c, IR_OP_SGDUpdate, 2, (int[]){p, gp}, 1, out, 1, &a_lr);
            if (out[0] >= 0) output_named(c, out[0], pname, ".new");
            break;
        case IR_OPTIM_MOMENTUM: {
            ir_attr at[2] = {a_lr, ir_grad_attr_float("momentum", 0.9f)};
            int buf = zero_state(c, p, "momentum_buffer", zeros);
            ir_grad_emit(c, IR_OP_MomentumUpdate, 3, (int[]){p, buf, gp}, 2, out, 2, at);
            if (out[0] < 0) break;
            output_named(c, out[0], pname, ".new");
            output_named(c, out[1], pname, ".momentum_buffer.new");
            break;
        }
        case IR_OPTIM_ADAM: {
            ir_attr at[5] = {a_lr, ir_grad_attr_float("beta1", 0.9f),
                             ir_grad_attr_float("beta2", 0.999f),
                             ir_grad_attr_float("epsilon", 1e-8f), ir_grad_attr_int("step", 1)};
            int m = zero_state(c, p, "exp_avg", zeros), v = zero_state(c, p, "exp_avg_sq", zeros);
            ir_grad_emit(c, IR_OP_AdamUpdate, 4, (int[]){p, m, v, gp}, 3, out, 5, at);
            if (out[0] < 0) break;
            output_named(c, out[0], pname, ".new");
            output_named(c, out[1], pname, ".exp_avg.new");
            output_named(c, out[2], pname, ".exp_avg_sq.new");
            break;
        }
        default: ir_grad_fail(c, IR_ERR_INVALID, "unknown optimizer %d", (int)o->optimizer);
        }
    }
    ir_blob_unref(zeros);
    return ir_grad_status(c);
}

/* Parameters in value order (the initializer order of the file, torch's parameters() order)
 * that some forward node reads. */
static int list_params(const ir_graph *g, int n_fwd_nodes, const ir_ad *ad, int *params) {
    unsigned char *read = calloc((size_t)g->n_values + 1, 1);
    int np = 0;
    if (!read) return -1;
    for (int i = 0; i < n_fwd_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) read[g->nodes[i].in[k]] = 1;
    for (int v = 0; v < ad->n_fwd; v++)
        if ((g->values[v].flags & IR_VF_PARAM) && ad->needs[v] && read[v]) params[np++] = v;
    free(read);
    return np;
}

/* ---------------------------------------------------------------- entry point */

ir_graph *ir_build_training(const ir_graph *fwd, const ir_train_opts *o, ir_status *stp,
                            ir_diag *d) {
    static const ir_train_opts defaults = {0};
    ir_ad ad;
    ir_status st = IR_OK;
    int *params = NULL;
    ir_graph *g = NULL;
    if (!o) o = &defaults;
    memset(&ad, 0, sizeof ad);
    if (fwd->n_outputs < 1 || !ir_dtype_is_float(fwd->values[fwd->outputs[0]].dtype)) {
        st = ir_diag_set(d, IR_ERR_INVALID, "training needs a floating-point first output");
        goto out;
    }
    g = ir_graph_clone(fwd);
    if (!g || ir_ad_init(&ad, g) != IR_OK) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory building the training graph");
        goto out;
    }
    int n_fwd_nodes = g->n_nodes, y = g->outputs[0];
    ir_grad_ctx c = {.g = g, .ad = &ad};
    mark_needs(&ad, n_fwd_nodes);
    for (int i = 0; i < g->n_outputs; i++)
        g->values[g->outputs[i]].flags &= ~(unsigned)IR_VF_OUTPUT;
    g->n_outputs = 0;

    int loss = build_loss(&c, o, y);
    for (int k = n_fwd_nodes - 1; k >= 0 && ad.st == IR_OK; k--) backward_node(&c, k);
    c.node = NULL;
    params = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    int np = params && ad.st == IR_OK ? list_params(g, n_fwd_nodes, &ad, params) : -1;
    if (ad.st == IR_OK && np < 0) ir_grad_fail(&c, IR_ERR_NOMEM, "out of memory");
    if (ad.st == IR_OK) ir_graph_add_output(g, loss);
    if (ad.st == IR_OK) add_updates(&c, o, params, np);
    st = ad.st;
    if (st != IR_OK) {
        if (d) *d = ad.d;
        ir_diag_prefix(d, g->source && *g->source ? g->source : "training graph");
        goto out;
    }
    ir_graph_prune(g);
    st = ir_graph_validate(g, d);
out:
    free(params);
    ir_ad_free(&ad);
    if (st != IR_OK) {
        ir_graph_free(g);
        g = NULL;
    }
    if (stp) *stp = st;
    return g;
}

/* ---------------------------------------------------------------- summary */

void ir_train_summarize(const ir_graph *tg, ir_train_summary *s) {
    memset(s, 0, sizeof *s);
    int loss_node = tg->n_outputs > 0 ? tg->values[tg->outputs[0]].producer : -1;
    unsigned char *grad = calloc((size_t)tg->n_values + 1, 1);
    if (!grad) return;
    /* final gradients: "<param>.grad" outputs, or the gradient input of each update */
    for (int i = 1; i < tg->n_outputs; i++) {
        const char *nm = tg->values[tg->outputs[i]].name;
        size_t l = strlen(nm);
        if (l > 5 && strcmp(nm + l - 5, ".grad") == 0) grad[tg->outputs[i]] = 1;
    }
    for (int i = 0; i < tg->n_nodes; i++) {
        const ir_node *n = &tg->nodes[i];
        const ir_op_def *def = ir_op_get(n->op);
        if (!def || !(def->flags & IR_OPF_INPLACE)) continue;
        s->n_update_nodes++;
        grad[n->in[n->n_in - 1]] = 1;
        for (int k = 1; k < n->n_in - 1; k++)
            s->state_bytes += ir_value_bytes(&tg->values[n->in[k]]);
    }
    /* a view owns no bytes (ir_value_view_of): activations and backward temporaries count
     * buffers (without memory for the roots, every value counts) */
    int *root = malloc(sizeof(int) * ((size_t)tg->n_values + 1));
    if (root) ir_graph_buffer_roots(tg, root);
    for (int v = 0; v < tg->n_values; v++) {
        const ir_value *val = &tg->values[v];
        size_t b = ir_value_bytes(val);
        const ir_op_def *pd = val->producer >= 0 ? ir_op_get(tg->nodes[val->producer].op) : NULL;
        bool view = root && pd && (pd->flags & IR_OPF_VIEW) && root[v] != v;
        if (val->flags & IR_VF_PARAM) {
            s->n_params++;
            s->param_bytes += b;
        }
        int p = val->producer;
        if (p < 0) continue;
        const ir_op_def *def = ir_op_get(tg->nodes[p].op);
        if (grad[v])
            s->grad_bytes += b;
        else if (view)
            continue;
        else if (p <= loss_node)
            s->activation_bytes += b;
        else if (!def || !(def->flags & IR_OPF_INPLACE))
            s->backward_bytes += b;
    }
    free(root);
    s->n_forward_nodes = loss_node + 1;
    s->n_backward_nodes = tg->n_nodes - s->n_forward_nodes - s->n_update_nodes;
    free(grad);
}

bool ir_graph_is_training(const ir_graph *g) {
    if (g->n_outputs < 2 || strcmp(g->values[g->outputs[0]].name, "loss") != 0) return false;
    const char *n = g->values[g->outputs[1]].name;
    size_t len = strlen(n);
    return (len > 5 && strcmp(n + len - 5, ".grad") == 0) ||
           (len > 4 && strcmp(n + len - 4, ".new") == 0);
}
