/* ops-fission.c - the magpie-domain ops that carry out a fission (MAGIS 4.2): a sub-graph S split
 * along one dimension into `parts` equal parts run one after another (rules.h, rw_fission_*).
 *
 *  - FissionBuffer() -> buf: zeros of attributes `shape` and `dtype` (an ir_dtype); the full-size
 *    result an output of S is assembled in. Runs once per group. With `fill` = 0 (default 1) the
 *    buffer is a FissionAccumulate chain's, whose part 0 writes it whole before anything reads
 *    it: a device allocates it without a fill, so it costs no bytes and no kernel
 *    (prof_roofline_seconds); the kernel here zeroes it all the same, so that running a one-copy
 *    graph alone never reads uninitialized memory.
 *  - FissionSlice(x, buf...) -> part: part `index` of `parts` equal parts of x along `axis`. The
 *    inputs after x are ordering-only (ir_input_order_only): they make every buffer of the group
 *    exist before its first part starts, and the kernel never reads them.
 *  - FissionAssemble(buf, part[, after]) -> buf': part written into slot `index` of buf along
 *    `axis`.
 *  - FissionAccumulate(buf, part[, after]) -> buf': buf + part (an output of S summed over the
 *    split reduce axis, e.g. a weight gradient over the batch); part 0 (`index` 0) of a chain
 *    whose buffer is unfilled writes buf' = part without reading buf, as a framework's gradient
 *    accumulation does with the first micro-batch's gradient: two times the part's bytes, not
 *    three (ir_fission_accumulate_overwrites).
 *    The optional third input is ordering-only: the group's first slice, so that no part writes
 *    a buffer before the group starts (a part computed from generators alone could).
 *    With `fused` 1, set by the fission where the part is the output 0 of a Gemm (without C),
 *    MatMul, ConvGradWeight, ReduceSum or GatherGrad that nothing else reads, the accumulation
 *    is that kernel's epilogue on a device: cuBLAS's and cuDNN's beta = 1 (GEMMs, the
 *    convolution's backward filter, cudnnReduceTensor) adds the product into C = the buffer as
 *    it writes it, beta = 0 overwrites it (part 0 into an unfilled buffer); an embedding's
 *    scatter-add adds its rows into the buffer (index_add_) instead of a zeroed one. So a fused
 *    accumulate costs no launch and no kernel of its own: one read of the buffer, or nothing
 *    where it overwrites (ir_fission_accumulate_fused, prof_roofline_seconds). The executor does
 *    the same (ir_graph_fused_parts): the producer's kernel adds into the buffer as it stores
 *    (ir_kernel_ctx.accumulate), the part gets no buffer of its own, and the accumulate's
 *    kernel finds its part already in the buffer and does nothing; the memory model counts
 *    those bytes, none for the part. Where an order does not allow it (the producer runs
 *    before the buffer holds the previous parts), the part keeps its buffer and the accumulate
 *    adds it, in the executor and the memory model alike.
 *
 * Assemble and Accumulate are IR_OPF_INPLACE: their output takes over the buffer (ir.h), so the
 * n parts of a materialized fission fill one allocation. Their kernels also work when the output
 * is a separate buffer (constant folding, profiling), by copying the rest of the buffer over.
 * None of them has dimension links (.dims NULL): no fission is ever applied across them.
 * Their byte counts are what the kernels touch on the device: a slice reads and writes one part,
 * an assemble reads a part and writes its slot, not the whole buffer. */
#include "ir-impl.h"

#include <stdlib.h>

bool ir_input_order_only(const ir_node *n, int i) {
    if (n->op == IR_OP_FissionSlice) return i >= 1;
    return (n->op == IR_OP_FissionAssemble || n->op == IR_OP_FissionAccumulate) && i >= 2;
}

/* ---------------------------------------------------------------- shared checks */

/* parts >= 1 and 0 <= index < parts, from the node's attributes. */
static ir_status part_attrs(const ir_node *n, int64_t *parts, int64_t *index, ir_diag *d) {
    *parts = ir_attr_int(n, "parts", 0);
    *index = ir_attr_int(n, "index", -1);
    if (*parts < 1)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute parts is %lld, expected >= 1",
                            (long long)*parts);
    if (*index < 0 || *index >= *parts)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute index is %lld, expected 0..%lld",
                            (long long)*index, (long long)(*parts - 1));
    return IR_OK;
}

/* The `axis` attribute normalized against the rank of v (named what in messages). */
static ir_status split_axis(const ir_node *n, const ir_value *v, const char *what, int *axis,
                            ir_diag *d) {
    int64_t a = ir_attr_int(n, "axis", 0);
    if (v->shape.rank < 1 || !ir_norm_axis(a, v->shape.rank, axis))
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for %s of rank %d",
                            (long long)a, what, v->shape.rank);
    return IR_OK;
}

static ir_status need_dtype(const ir_node *n, const ir_value *v, const char *what, ir_diag *d) {
    if (ir_dtype_size(v->dtype) > 0) return IR_OK;
    return ir_node_fail(d, IR_ERR_SHAPE, n, "%s '%s' has no dtype", what, v->name);
}

/* A shape as [outer, len, inner] around axis. */
static void around_axis(const ir_shape *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    int64_t o = 1, i = 1;
    for (int k = 0; k < axis; k++) o *= s->dims[k];
    for (int k = axis + 1; k < s->rank; k++) i *= s->dims[k];
    *outer = o;
    *len = s->dims[axis];
    *inner = i;
}

static double part_bytes(const ir_graph *g, const ir_node *n, int input) {
    const ir_value *v = ir_node_in(g, n, input);
    return v ? (double)ir_value_bytes(v) : 0.0;
}

/* ---------------------------------------------------------------- FissionBuffer */

static ir_status buffer_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const int64_t *dims = NULL;
    int r = ir_attr_ints(n, "shape", &dims);
    int64_t t = ir_attr_int(n, "dtype", -1);
    if (r < 0 || r > IR_MAX_RANK)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute shape is %s (rank at most %d)",
                            r < 0 ? "missing" : "too long", IR_MAX_RANK);
    if (t < 0 || t >= IR_DTYPE_COUNT)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute dtype is %lld, not an ir_dtype",
                            (long long)t);
    ir_status st = ir_check_sizes(n, "shape", dims, r, d);
    if (st != IR_OK) return st;
    ir_shape s = ir_shape_make(r, dims);
    ir_set_out(g, n, 0, (ir_dtype)t, &s);
    return IR_OK;
}

static ir_status buffer_kernel(const ir_kernel_ctx *k) {
    ir_tensor *o = &k->out[0];
    size_t bytes = (size_t)ir_tensor_numel(o) * ir_dtype_size(o->dtype);
    if (bytes) memset(o->data, 0, bytes);
    return IR_OK;
}

bool ir_fission_buffer_unfilled(const ir_node *n) {
    return n->op == IR_OP_FissionBuffer && ir_attr_int(n, "fill", 1) == 0;
}

/* What a device writes: the whole buffer when it is zero-filled, nothing otherwise. */
static double buffer_bytes(const ir_graph *g, const ir_node *n) {
    const ir_value *o = ir_node_out(g, n, 0);
    return o && !ir_fission_buffer_unfilled(n) ? (double)ir_value_bytes(o) : 0.0;
}

/* ---------------------------------------------------------------- FissionSlice */

static ir_status slice_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t parts = 1, index = 0;
    int axis = 0;
    ir_status st = need_dtype(n, x, "input", d);
    if (st == IR_OK) st = part_attrs(n, &parts, &index, d);
    if (st == IR_OK) st = split_axis(n, x, "input", &axis, d);
    if (st != IR_OK) return st;
    if (x->shape.dims[axis] % parts != 0) {
        char s1[128];
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "input '%s' %s: dim %d (%lld) is not divisible into %lld parts",
                            x->name, ir_shape_str(&x->shape, s1, sizeof s1), axis,
                            (long long)x->shape.dims[axis], (long long)parts);
    }
    ir_shape s = x->shape;
    s.dims[axis] /= parts;
    ir_set_out(g, n, 0, x->dtype, &s);
    return IR_OK;
}

static ir_status slice_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    ir_tensor *o = &k->out[0];
    int axis = 0;
    ir_norm_axis(ir_attr_int(k->node, "axis", 0), x->shape.rank, &axis); /* inference checked */
    int64_t index = ir_attr_int(k->node, "index", 0), outer, len, inner;
    around_axis(&x->shape, axis, &outer, &len, &inner);
    int64_t plen = o->shape.dims[axis];
    size_t es = ir_dtype_size(x->dtype), row = (size_t)(plen * inner) * es;
    const char *src = (const char *)x->data + (size_t)(index * plen * inner) * es;
    char *dst = o->data;
    if (!row) return IR_OK;
    /* Rows are disjoint in both buffers. */
    IR_PARALLEL_FOR(outer > 1 && outer * plen * inner > IR_PAR_MIN)
    for (int64_t r = 0; r < outer; r++)
        memcpy(dst + (size_t)r * row, src + (size_t)(r * len * inner) * es, row);
    return IR_OK;
}

/* Reads one part and writes it; the buffers it is ordered after are never touched. */
static double slice_bytes(const ir_graph *g, const ir_node *n) {
    const ir_value *o = ir_node_out(g, n, 0);
    return o ? 2.0 * (double)ir_value_bytes(o) : 0.0;
}

/* ---------------------------------------------------------------- FissionAssemble */

static ir_status assemble_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *b = ir_node_in(g, n, 0), *p = ir_node_in(g, n, 1);
    int64_t parts = 1, index = 0;
    int axis = 0;
    ir_status st = need_dtype(n, b, "buffer", d);
    if (st == IR_OK) st = need_dtype(n, p, "part", d);
    if (st == IR_OK) st = part_attrs(n, &parts, &index, d);
    if (st == IR_OK) st = split_axis(n, b, "the buffer", &axis, d);
    if (st != IR_OK) return st;
    ir_shape want = b->shape;
    bool ok = b->shape.dims[axis] % parts == 0;
    want.dims[axis] = b->shape.dims[axis] / parts;
    if (!ok || b->dtype != p->dtype || !ir_shape_eq(&want, &p->shape)) {
        char s1[128], s2[128];
        if (!ok)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "buffer '%s' %s: dim %d (%lld) is not divisible into %lld parts",
                                b->name, ir_shape_str(&b->shape, s1, sizeof s1), axis,
                                (long long)b->shape.dims[axis], (long long)parts);
        return ir_node_fail(d, IR_ERR_SHAPE, n, "part '%s' is %s %s, expected %s %s", p->name,
                            ir_dtype_name(p->dtype), ir_shape_str(&p->shape, s1, sizeof s1),
                            ir_dtype_name(b->dtype), ir_shape_str(&want, s2, sizeof s2));
    }
    ir_set_out(g, n, 0, b->dtype, &b->shape);
    return IR_OK;
}

static ir_status assemble_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *b = &k->in[0], *p = &k->in[1];
    ir_tensor *o = &k->out[0];
    int axis = 0;
    ir_norm_axis(ir_attr_int(k->node, "axis", 0), b->shape.rank, &axis);
    int64_t index = ir_attr_int(k->node, "index", 0), outer, len, inner;
    around_axis(&b->shape, axis, &outer, &len, &inner);
    int64_t plen = p->shape.dims[axis];
    size_t es = ir_dtype_size(b->dtype), row = (size_t)(plen * inner) * es;
    /* Not in place (folding, profiling): the other slots come from the buffer. */
    if (o->data != b->data && outer * len * inner > 0)
        memcpy(o->data, b->data, (size_t)(outer * len * inner) * es);
    char *dst = (char *)o->data + (size_t)(index * plen * inner) * es;
    const char *src = p->data;
    if (!row) return IR_OK;
    IR_PARALLEL_FOR(outer > 1 && outer * plen * inner > IR_PAR_MIN)
    for (int64_t r = 0; r < outer; r++)
        memcpy(dst + (size_t)(r * len * inner) * es, src + (size_t)r * row, row);
    return IR_OK;
}

/* Reads the part and writes its slot; the rest of the buffer stays where it is. */
static double assemble_bytes(const ir_graph *g, const ir_node *n) {
    return 2.0 * part_bytes(g, n, 1);
}

/* ---------------------------------------------------------------- FissionAccumulate */

static ir_status accumulate_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *b = ir_node_in(g, n, 0), *p = ir_node_in(g, n, 1);
    int64_t parts = 1, index = 0;
    ir_status st = part_attrs(n, &parts, &index, d);
    if (st != IR_OK) return st;
    if (!ir_dtype_is_float(b->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "buffer '%s' is %s; only floats are summed",
                            b->name, ir_dtype_name(b->dtype));
    if (b->dtype != p->dtype || !ir_shape_eq(&b->shape, &p->shape)) {
        char s1[128], s2[128];
        return ir_node_fail(d, IR_ERR_SHAPE, n, "part '%s' is %s %s, expected %s %s", p->name,
                            ir_dtype_name(p->dtype), ir_shape_str(&p->shape, s1, sizeof s1),
                            ir_dtype_name(b->dtype), ir_shape_str(&b->shape, s2, sizeof s2));
    }
    ir_set_out(g, n, 0, b->dtype, &b->shape);
    return IR_OK;
}

static ir_status accumulate_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *b = &k->in[0], *p = &k->in[1];
    ir_tensor *o = &k->out[0];
    int64_t n = ir_tensor_numel(b);
    /* fused (ir_graph_fused_parts): the producer wrote the part into the buffer itself */
    if (p->data == o->data && o->data == b->data) return IR_OK;
    if (ir_fission_accumulate_overwrites(k->graph, k->node)) { /* the first part: buf' = part */
        size_t bytes = (size_t)n * ir_dtype_size(b->dtype);
        if (bytes && o->data != p->data) memmove(o->data, p->data, bytes);
        return IR_OK;
    }
    /* Element i is read from both inputs before it is written: correct aliased or not. */
    if (b->dtype == IR_F32) {
        const float *x = b->data, *y = p->data;
        float *z = o->data;
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
    } else if (b->dtype == IR_F64) {
        const double *x = b->data, *y = p->data;
        double *z = o->data;
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
    } else { /* 16-bit floats: summed in float32, rounded once */
        IR_PARALLEL_FOR(n > IR_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            ir_store_f64(
                o->data, b->dtype, i,
                (float)(ir_load_f64(b->data, b->dtype, i) + ir_load_f64(p->data, b->dtype, i)));
    }
    return IR_OK;
}

bool ir_fission_accumulate_overwrites(const ir_graph *g, const ir_node *n) {
    if (!g || n->op != IR_OP_FissionAccumulate || n->n_in < 1 || n->in[0] < 0 ||
        ir_attr_int(n, "index", -1) != 0)
        return false;
    int p = g->values[n->in[0]].producer;
    return p >= 0 && ir_fission_buffer_unfilled(&g->nodes[p]);
}

/* The producers whose device kernels take an accumulator: C = beta * C + result. */
static bool accumulates_in_epilogue(const ir_node *p) {
    switch (p->op) {
    case IR_OP_Gemm: return p->n_in < 3 || p->in[2] < 0; /* C would be the buffer */
    case IR_OP_MatMul:
    case IR_OP_ConvGradWeight:
    case IR_OP_ReduceSum:
    case IR_OP_GatherGrad: return true; /* a scatter-add: index_add_ into the buffer */
    default: return false;
    }
}

bool ir_fission_accumulate_fused(const ir_graph *g, const ir_node *n) {
    if (!g || n->op != IR_OP_FissionAccumulate || n->n_in < 2 || n->in[1] < 0 ||
        ir_attr_int(n, "fused", 0) != 1)
        return false;
    int v = n->in[1], p = g->values[v].producer;
    if (p < 0 || (g->values[v].flags & IR_VF_OUTPUT)) return false;
    const ir_node *pn = &g->nodes[p];
    return pn->n_out >= 1 && pn->out[0] == v && accumulates_in_epilogue(pn);
}

/* The producer of value v, or -1. */
static int producer_of(const ir_graph *g, int v) {
    return v >= 0 && v < g->n_values ? g->values[v].producer : -1;
}

/* One fused accumulate that may write its part into its buffer: the accumulate, the part's
 * producer, the buffer's root, and whether a read of the buffer between the two rules it out. */
typedef struct fused_cand {
    int acc, prod, root;
    bool bad;
} fused_cand;

/* Marks the candidates of an order that a node between the producer and the accumulate reads
 * the buffer for (not only orders itself after it): it would see the part added too early. One
 * pass over the order's inputs; only reads of the candidates' buffers compare windows. */
static void mark_reads_between(const ir_graph *g, const int *order, const int *pos, const int *root,
                               const uint8_t *in_cand, fused_cand *c, int nc) {
    for (int s = 0; s < g->n_nodes; s++) {
        const ir_node *x = &g->nodes[order[s]];
        for (int i = 0; i < x->n_in; i++) {
            int v = x->in[i];
            if (v < 0 || !in_cand[root[v]] || ir_input_order_only(x, i)) continue;
            for (int j = 0; j < nc; j++)
                if (c[j].root == root[v] && c[j].acc != order[s] && pos[c[j].prod] < s &&
                    s < pos[c[j].acc])
                    c[j].bad = true;
        }
    }
}

bool ir_graph_fused_parts(const ir_graph *g, const int *order, const int *pos, int *root,
                          int *into) {
    int nv = g->n_values, n_acc = 0;
    if (into)
        for (int v = 0; v < nv; v++) into[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) /* the common case, none: nothing allocated */
        n_acc += g->nodes[i].op == IR_OP_FissionAccumulate && ir_attr_int(&g->nodes[i], "fused", 0);
    if (!n_acc) return true;
    /* per value: its readers (saturating at 2), then whether it is a candidate's buffer */
    uint8_t *reads = calloc(2 * ((size_t)nv + 1), 1), *in_cand = reads ? reads + nv + 1 : NULL;
    fused_cand *c = malloc(sizeof *c * (size_t)n_acc);
    if (!reads || !c) {
        free(reads);
        free(c);
        return false;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v >= 0 && v < nv && reads[v] < 2) reads[v]++;
        }
    int nc = 0;
    for (int a = 0; a < g->n_nodes; a++) {
        const ir_node *acc = &g->nodes[a];
        if (!ir_fission_accumulate_fused(g, acc) || acc->n_out < 1) continue;
        int b = acc->in[0], p = acc->in[1], o = acc->out[0], pp = producer_of(g, p);
        if (b < 0 || o < 0 || pp < 0) continue;
        int r = root[b];
        if (producer_of(g, r) < 0 || ir_value_on_host(g, r) || root[o] != r || root[p] != p ||
            reads[p] != 1)
            continue;
        const ir_node *pn = &g->nodes[pp];
        bool ok = true;
        for (int k = 0; k < pn->n_in && ok; k++) ok = pn->in[k] < 0 || root[pn->in[k]] != r;
        if (ok && order && pos) {
            int pb = producer_of(g, b), first = acc->n_in > 2 ? producer_of(g, acc->in[2]) : -1;
            ok = pb >= 0 && pos[pp] > pos[pb] && (first < 0 || pos[pp] > pos[first]) &&
                 pos[pp] < pos[a];
        }
        if (!ok) continue;
        c[nc++] = (fused_cand){.acc = a, .prod = pp, .root = r};
        in_cand[r] = 1;
    }
    if (order && pos && nc) mark_reads_between(g, order, pos, root, in_cand, c, nc);
    for (int j = 0; j < nc; j++) {
        if (c[j].bad) continue;
        int p = g->nodes[c[j].acc].in[1];
        root[p] = c[j].root;
        if (into) into[p] = c[j].acc;
    }
    free(reads);
    free(c);
    return true;
}

static double accumulate_flops(const ir_graph *g, const ir_node *n) {
    return ir_fission_accumulate_overwrites(g, n) || ir_fission_accumulate_fused(g, n)
               ? 0.0
               : (double)ir_shape_numel(&ir_node_in(g, n, 1)->shape);
}

/* Reads the buffer and the part, writes the buffer: three times the part (the ordering-only
 * third input is never read); part 0 into an unfilled buffer reads only the part. Fused into
 * the producer, it reads the buffer once, or nothing where it overwrites it. */
static double accumulate_bytes(const ir_graph *g, const ir_node *n) {
    bool over = ir_fission_accumulate_overwrites(g, n);
    if (ir_fission_accumulate_fused(g, n)) return over ? 0.0 : part_bytes(g, n, 1);
    return (over ? 2.0 : 3.0) * part_bytes(g, n, 1);
}

/* ---------------------------------------------------------------- the op table entries */

IR_MAGPIE_OP_DEF(FissionBuffer, 0, 0, 1, 1, .flags = IR_OPF_FLOAT16, .infer = buffer_infer,
                 .kernel = buffer_kernel, .bytes = buffer_bytes);
IR_MAGPIE_OP_DEF(FissionSlice, 1, 1 << 20, 1, 1, .flags = IR_OPF_FLOAT16, .infer = slice_infer,
                 .kernel = slice_kernel, .bytes = slice_bytes);
IR_MAGPIE_OP_DEF(FissionAssemble, 2, 3, 1, 1, .flags = IR_OPF_INPLACE | IR_OPF_FLOAT16,
                 .infer = assemble_infer, .kernel = assemble_kernel, .bytes = assemble_bytes);
IR_MAGPIE_OP_DEF(FissionAccumulate, 2, 3, 1, 1, .flags = IR_OPF_INPLACE | IR_OPF_FLOAT16,
                 .infer = accumulate_infer, .flops = accumulate_flops, .kernel = accumulate_kernel,
                 .bytes = accumulate_bytes);
