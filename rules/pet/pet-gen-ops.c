/* pet-gen-ops.c - the operator set O of PET's mutation generator (pet-gen.h): output shapes and
 * canonical hashes of ops. Conv and MatMul go through the op table's inference (ir_node_infer
 * on a scratch graph, so the generator and the executor agree on what is valid); the
 * data-movement ops compute their shapes directly, and every materialized mutant is re-inferred
 * node by node (pet-gen-mat.c; debug builds assert the shapes agree). */
#include "pet-gen-impl.h"

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* ---------------------------------------------------------------- shapes */

/* Runs the op table's inference for a Conv or MatMul on the scratch graph. */
static bool infer_scratch(gen_ctx *c, const gen_op *op, ir_shape *out) {
    ir_graph *g = c->scratch;
    for (int i = 0; i < op->n_in; i++) {
        const gen_tensor *t = &c->t[op->in[i]];
        g->values[i].shape = t->shape;
        g->values[i].dtype = t->dtype;
    }
    int ins[2] = {0, 1}, outs[1] = {4};
    ir_node n = {.name = "pet.gen", .op_type = "", .domain = ""};
    ir_attr at[4];
    n.in = ins;
    n.out = outs;
    n.n_in = 2;
    n.n_out = 1;
    if (op->kind == GK_CONV) {
        const gen_conv_attr *a = &c->conv[op->attr];
        n.op = IR_OP_Conv;
        at[0] = (ir_attr){
            .name = "strides", .type = IR_ATTR_INTS, .n = (int)a->S, .ints = (int64_t *)a->strides};
        at[1] = (ir_attr){
            .name = "dilations", .type = IR_ATTR_INTS, .n = (int)a->S, .ints = (int64_t *)a->dil};
        at[2] = (ir_attr){
            .name = "pads", .type = IR_ATTR_INTS, .n = (int)(2 * a->S), .ints = (int64_t *)a->pads};
        at[3] = (ir_attr){.name = "group", .type = IR_ATTR_INT, .i = a->group};
        n.attrs = at;
        n.n_attrs = 4;
    } else {
        n.op = IR_OP_MatMul;
    }
    if (ir_node_infer(g, &n, NULL) != IR_OK) return false;
    *out = g->values[4].shape;
    return true;
}

bool gen_op_shapes(gen_ctx *c, const gen_op *op, ir_shape *out) {
    const gen_tensor *a = &c->t[op->in[0]], *b = op->n_in > 1 ? &c->t[op->in[1]] : NULL;
    switch (op->kind) {
    case GK_CONV: {
        const gen_conv_attr *at = &c->conv[op->attr];
        int r = a->shape.rank;
        if (b->shape.rank != r || r != at->S + 2 ||
            b->shape.dims[1] * at->group != a->shape.dims[1] || b->shape.dims[0] % at->group)
            return false;
        return infer_scratch(c, op, out);
    }
    case GK_MATMUL:
        if (a->shape.rank < 2 || b->shape.rank < 2 ||
            a->shape.dims[a->shape.rank - 1] != b->shape.dims[b->shape.rank - 2])
            return false;
        return infer_scratch(c, op, out);
    case GK_GEMM: {
        const gen_gemm_attr *at = &c->gemm[op->attr];
        if (a->shape.rank != 2 || b->shape.rank != 2) return false;
        int64_t M = a->shape.dims[at->ta ? 1 : 0], K = a->shape.dims[at->ta ? 0 : 1];
        int64_t Kb = b->shape.dims[at->tb ? 1 : 0], N = b->shape.dims[at->tb ? 0 : 1];
        if (K != Kb) return false;
        out[0] = ir_shape_make(2, (int64_t[]){M, N});
        return true;
    }
    case GK_ADD:
    case GK_MUL: return a->dtype == b->dtype && ir_shape_broadcast(&a->shape, &b->shape, out);
    case GK_CONCAT: {
        int ax = op->attr;
        ir_shape s = a->shape;
        for (int i = 1; i < op->n_in; i++) {
            const gen_tensor *t = &c->t[op->in[i]];
            if (t->shape.rank != s.rank || t->dtype != a->dtype) return false;
            for (int k = 0; k < s.rank; k++)
                if (k != ax && t->shape.dims[k] != s.dims[k]) return false;
            s.dims[ax] += t->shape.dims[ax];
        }
        out[0] = s;
        return true;
    }
    case GK_SPLIT: {
        int64_t sum = 0;
        for (int i = 0; i < op->n_out; i++) {
            if (op->sizes[i] < 1) return false;
            sum += op->sizes[i];
            out[i] = a->shape;
            out[i].dims[op->attr] = op->sizes[i];
        }
        return sum == a->shape.dims[op->attr];
    }
    case GK_PAD: {
        int r = a->shape.rank;
        out[0] = a->shape;
        for (int k = 0; k < r; k++) out[0].dims[k] += op->pads[k] + op->pads[r + k];
        return true;
    }
    case GK_SLICE:
        out[0] = a->shape;
        out[0].dims[op->attr] = op->sizes[1] - op->sizes[0];
        return out[0].dims[op->attr] >= 1;
    case GK_LAYOUT: out[0] = op->lay.out; return true;
    }
    return false;
}

uint64_t gen_op_hash(const gen_ctx *c, const gen_op *op) {
    uint64_t h = mixh(0x9e77, op->kind);
    switch (op->kind) {
    case GK_CONV: h = ir_hash_bytes(&c->conv[op->attr], sizeof(gen_conv_attr), h); break;
    case GK_GEMM: h = ir_hash_bytes(&c->gemm[op->attr], sizeof(gen_gemm_attr), h); break;
    case GK_CONCAT: h = mixh(h, (uint64_t)op->attr); break;
    case GK_SPLIT:
    case GK_SLICE:
        h = mixh(h, (uint64_t)op->attr);
        for (int i = 0; i < (op->kind == GK_SPLIT ? op->n_out : 2); i++)
            h = mixh(h, (uint64_t)op->sizes[i]);
        break;
    case GK_PAD:
        for (int i = 0; i < 2 * c->t[op->in[0]].shape.rank; i++) h = mixh(h, (uint64_t)op->pads[i]);
        break;
    case GK_LAYOUT: h = mixh(h, gen_layout_hash(&op->lay)); break;
    default: break;
    }
    if (op->kind == GK_ADD || op->kind == GK_MUL) { /* commutative: operands in hash order */
        uint64_t x = c->t[op->in[0]].h, y = c->t[op->in[1]].h;
        h = mixh(mixh(h, x < y ? x : y), x < y ? y : x);
    } else {
        for (int i = 0; i < op->n_in; i++) h = mixh(h, c->t[op->in[i]].h);
    }
    for (int i = 0; i < op->n_bias; i++) h = mixh(h, 0xb1a5 + (uint64_t)op->bias[i]);
    return h;
}
