/* ops-pool.c - MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (1 to 3 spatial dims).
 *
 * Windows follow ONNX (and PyTorch): output = floor or ceil((in + pads - dilated kernel) / stride)
 * + 1, and with ceil_mode a last window that would start inside the end padding is dropped.
 * AveragePool with count_include_pad divides by the window clipped to the padded input (not to
 * the ceil_mode overhang), otherwise by the number of real elements. Geometry is padded to 3
 * spatial dims (leading dims of size 1) so one loop nest serves 1-, 2- and 3-D; planes (n, c)
 * run in parallel. Kernels run float32 and float64 (one template, ops-pool-kern.h), MaxPool also
 * int8 and uint8; its Indices are row-major or, with storage_order=1, column-major per plane. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <math.h>
#include <string.h>

static ir_status check_input(const ir_graph *g, const ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    char buf[96];
    if (x->shape.rank < 3 || x->shape.rank > 5)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "X has shape %s; expected rank 3 to 5 (N,C,spatial)",
                            ir_shape_str(&x->shape, buf, sizeof buf));
    bool int8 = n->op == IR_OP_MaxPool && (x->dtype == IR_U8 || x->dtype == IR_I8);
    if (!ir_dtype_is_float(x->dtype) && !int8)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has dtype %s; expected a float type%s",
                            ir_dtype_name(x->dtype),
                            n->op == IR_OP_MaxPool ? " (or int8, uint8)" : "");
    return IR_OK;
}

ir_status ir_pool_parse(const ir_node *n, const ir_shape *xs, ir_pool_geom *pg, ir_diag *d) {
    ir_status st;
    int S = xs->rank - 2;
    int64_t ks[3], str[3], dl[3], pads[6];
    const int64_t *kv;
    if (ir_attr_ints(n, "kernel_shape", &kv) < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute kernel_shape is required");
    if ((st = ir_attr_ints_n(n, "kernel_shape", S, 1, ks, d)) ||
        (st = ir_attr_ints_n(n, "strides", S, 1, str, d)) ||
        (st = ir_attr_ints_n(n, "dilations", S, 1, dl, d)) ||
        (st = ir_attr_ints_n(n, "pads", 2 * S, 0, pads, d)))
        return st;
    bool ceil_mode = ir_attr_int(n, "ceil_mode", 0) != 0;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same_up = !strcmp(ap, "SAME_UPPER"), same_lo = !strcmp(ap, "SAME_LOWER");
    bool valid = !strcmp(ap, "VALID");
    if (!same_up && !same_lo && !valid && strcmp(ap, "NOTSET"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "auto_pad '%s' is not a valid value", ap);
    memset(pg, 0, sizeof *pg);
    pg->S = S;
    pg->NC = xs->dims[0] * xs->dims[1];
    for (int i = 0; i < 3; i++) pg->in[i] = pg->out[i] = pg->k[i] = pg->s[i] = pg->d[i] = 1;
    for (int i = 0; i < S; i++) {
        int j = 3 - S + i;
        int64_t in = xs->dims[2 + i], pb = pads[i], pe = pads[S + i], out;
        if (ks[i] < 1 || str[i] < 1 || dl[i] < 1 || pb < 0 || pe < 0)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "spatial dim %d: kernel %lld, stride %lld, dilation %lld must be "
                                "positive and pads non-negative",
                                i, (long long)ks[i], (long long)str[i], (long long)dl[i]);
        int64_t dk = (ks[i] - 1) * dl[i] + 1;
        if (same_up || same_lo) {
            out = (in + str[i] - 1) / str[i];
            int64_t tot = (out - 1) * str[i] + dk - in;
            if (tot < 0) tot = 0;
            pb = same_up ? tot / 2 : tot - tot / 2;
            pe = tot - pb;
        } else {
            if (valid) pb = pe = 0;
            int64_t span = in + pb + pe - dk;
            if (span < 0)
                return ir_node_fail(
                    d, IR_ERR_SHAPE, n,
                    "spatial dim %d: input %lld with pads %lld+%lld is smaller than "
                    "the window %lld",
                    i, (long long)in, (long long)pb, (long long)pe, (long long)dk);
            out = (ceil_mode ? (span + str[i] - 1) / str[i] : span / str[i]) + 1;
            /* the last window must start inside the input or the begin padding */
            if (ceil_mode && (out - 1) * str[i] >= in + pb) out--;
        }
        pg->in[j] = in;
        pg->out[j] = out;
        pg->k[j] = ks[i];
        pg->s[j] = str[i];
        pg->d[j] = dl[i];
        pg->pb[j] = pb;
        pg->pe[j] = pe;
    }
    return IR_OK;
}

static ir_status pool_parse(const ir_graph *g, const ir_node *n, ir_pool_geom *pg, ir_diag *d) {
    ir_status st = check_input(g, n, d);
    return st ? st : ir_pool_parse(n, &ir_node_in(g, n, 0)->shape, pg, d);
}

static void pool_out_shape(const ir_graph *g, const ir_node *n, const ir_pool_geom *pg,
                           ir_shape *s) {
    const ir_value *x = ir_node_in(g, n, 0);
    *s = x->shape;
    for (int i = 0; i < pg->S; i++) s->dims[2 + i] = pg->out[3 - pg->S + i];
}

static ir_status maxpool_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_pool_geom pg;
    ir_status st = pool_parse(g, n, &pg, d);
    if (st) return st;
    ir_shape s;
    pool_out_shape(g, n, &pg, &s);
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &s);
    if (ir_node_out(g, n, 1)) ir_set_out(g, n, 1, IR_I64, &s);
    return IR_OK;
}

static ir_status avgpool_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_pool_geom pg;
    ir_status st = pool_parse(g, n, &pg, d);
    if (st) return st;
    ir_shape s;
    pool_out_shape(g, n, &pg, &s);
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &s);
    return IR_OK;
}

static double pool_flops(const ir_graph *g, const ir_node *n) {
    ir_pool_geom pg;
    if (pool_parse(g, n, &pg, NULL)) return 0;
    return (double)pg.NC * (double)ir_prod3(pg.out) * (double)ir_prod3(pg.k);
}

#define IR_TMPL "ops-pool-kern.h"
#include "ir-float-tmpl.h"

static ir_status pool_run(const ir_kernel_ctx *k, bool is_max) {
    ir_dtype t;
    ir_status st = ir_kernel_float(k, &t);
    if (st) return st;
    return t == IR_F64 ? pool_run_f64(k, is_max) : pool_run_f32(k, is_max);
}

/* MaxPool of int8 and uint8 (opset 12): the float kernel's windows and tie rule
 * (ir_pool_argmax: the first strictly greater value in row-major order), compared as integers. A
 * window with no taps (all padding) gives the type's minimum, as the float kernels' -inf. */
#define DEF_MAXPOOL_INT(sfx, T, LOWEST)                                                            \
    static void maxpool_##sfx(const ir_pool_geom *pg, const T *x, T *y, int64_t *idx) {            \
        const int64_t IS = ir_prod3(pg->in), OS = ir_prod3(pg->out);                               \
        IR_PARALLEL_FOR(pg->NC *OS *ir_prod3(pg->k) >= IR_PAR_MIN)                                 \
        for (int64_t p = 0; p < pg->NC; p++) {                                                     \
            const T *xp = x + p * IS;                                                              \
            int64_t st[3], kl[3], kh[3];                                                           \
            for (int64_t o = 0; o < OS; o++) {                                                     \
                ir_pool_window_dim(pg, 0, o / (pg->out[1] * pg->out[2]), st, kl, kh);              \
                ir_pool_window_dim(pg, 1, o / pg->out[2] % pg->out[1], st, kl, kh);                \
                ir_pool_window_dim(pg, 2, o % pg->out[2], st, kl, kh);                             \
                int64_t bi = ir_pool_argmax_##sfx(pg, xp, st, kl, kh);                             \
                y[p * OS + o] = bi >= 0 ? xp[bi] : (LOWEST);                                       \
                if (idx) idx[p * OS + o] = p * IS + bi;                                            \
            }                                                                                      \
        }                                                                                          \
    }
DEF_MAXPOOL_INT(u8, uint8_t, 0)
DEF_MAXPOOL_INT(i8, int8_t, INT8_MIN)
#undef DEF_MAXPOOL_INT

/* Indices in column-major order within each plane (storage_order=1, as onnx's reference: the
 * first spatial dim varies fastest; the plane offset stays n * C + c planes). */
static void indices_col_major(const ir_pool_geom *pg, int64_t *idx, int64_t n) {
    const int64_t IS = ir_prod3(pg->in), *in = pg->in;
    for (int64_t i = 0; i < n; i++) {
        int64_t plane = idx[i] / IS, off = idx[i] % IS;
        int64_t i2 = off % in[2], i1 = off / in[2] % in[1], i0 = off / (in[1] * in[2]);
        /* the geometry pads to 3 dims with leading 1s: their index 0 adds nothing */
        idx[i] = plane * IS + i0 + i1 * in[0] + i2 * in[0] * in[1];
    }
}

static ir_status maxpool_kernel(const ir_kernel_ctx *k) {
    ir_pool_geom pg;
    ir_status st = pool_parse(k->graph, k->node, &pg, k->diag);
    if (st) return st;
    int64_t *idx = k->n_out > 1 ? k->out[1].data : NULL;
    ir_dtype t = k->in[0].dtype;
    if (t == IR_U8)
        maxpool_u8(&pg, k->in[0].data, k->out[0].data, idx);
    else if (t == IR_I8)
        maxpool_i8(&pg, k->in[0].data, k->out[0].data, idx);
    else if ((st = pool_run(k, true)))
        return st;
    if (idx && ir_attr_int(k->node, "storage_order", 0) != 0 && pg.S > 1)
        indices_col_major(&pg, idx, pg.NC * ir_prod3(pg.out));
    return IR_OK;
}
static ir_status avgpool_kernel(const ir_kernel_ctx *k) {
    return pool_run(k, false);
}

/* ---------------------------------------------------------------- global pools */

static ir_status global_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_status st = check_input(g, n, d);
    if (st) return st;
    ir_shape s = ir_node_in(g, n, 0)->shape;
    for (int i = 2; i < s.rank; i++) s.dims[i] = 1;
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &s);
    return IR_OK;
}

static double global_flops(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

static ir_status global_run(const ir_kernel_ctx *k, bool is_max) {
    ir_dtype t;
    ir_status st = ir_kernel_float(k, &t);
    if (st) return st;
    return t == IR_F64 ? global_run_f64(k, is_max) : global_run_f32(k, is_max);
}

static ir_status gavg_kernel(const ir_kernel_ctx *k) {
    return global_run(k, false);
}
static ir_status gmax_kernel(const ir_kernel_ctx *k) {
    return global_run(k, true);
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink): planes (n, c) are pooled independently, so N and C link; a spatial dim
 * links only for a window of 1 (kernel 1, stride 1, no pads), others read a halo. MaxPool's
 * Indices are flat offsets into the whole X (p * IS + ...): a part would number its own
 * elements, so a MaxPool with Indices gets no links at all. */
static int pool_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_pool_geom pg;
    if (ir_node_out(g, n, 1) || pool_parse(g, n, &pg, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, 0, 0, 0);
    ir_dims_keep(&o, 0, 1, 0, 1);
    for (int i = 0; i < pg.S; i++) {
        int j = 3 - pg.S + i;
        if (pg.k[j] == 1 && pg.s[j] == 1 && pg.pb[j] == 0 && pg.pe[j] == 0 && pg.in[j] == pg.out[j])
            ir_dims_keep(&o, 0, 2 + i, 0, 2 + i);
    }
    return ir_dims_end(&o);
}

/* N and C link; each spatial dim is a reduce axis, a mean or a max (not a sum). */
static int global_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    if (x->shape.rank < 3) return 0;
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_keep(&o, 0, 0, 0, 0);
    ir_dims_keep(&o, 0, 1, 0, 1);
    for (int i = 2; i < x->shape.rank; i++) ir_dims_reduce(&o, 0, i, i - 1, false);
    return ir_dims_end(&o);
}

IR_OP_DEF(MaxPool, 1, 1, 1, 2, .infer = maxpool_infer, .flops = pool_flops,
          .kernel = maxpool_kernel, .grad = ir_grad_MaxPool, .dims = pool_dims);

IR_OP_DEF(AveragePool, 1, 1, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = avgpool_infer,
          .flops = pool_flops, .kernel = avgpool_kernel, .grad = ir_grad_AveragePool,
          .dims = pool_dims);

IR_OP_DEF(GlobalAveragePool, 1, 1, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = global_infer,
          .flops = global_flops, .kernel = gavg_kernel, .grad = ir_grad_GlobalAveragePool,
          .dims = global_dims);

IR_OP_DEF(GlobalMaxPool, 1, 1, 1, 1, .infer = global_infer, .flops = global_flops,
          .kernel = gmax_kernel, .grad = ir_grad_GlobalMaxPool, .dims = global_dims);
