/* ops-space.c - DepthToSpace and SpaceToDepth (opset 13): blocks of b x b spatial positions moved
 * to or from the channels of a [N, C, H, W] tensor.
 *
 * DepthToSpace, output [N, C / b^2, H b, W b]:
 *  - mode DCR (the default): y[n, c, h b + i, w b + j] = x[n, (i b + j) C' + c, h, w];
 *  - mode CRD: y[n, c, h b + i, w b + j] = x[n, c b^2 + i b + j, h, w];
 * SpaceToDepth, output [N, C b^2, H / b, W / b]: DCR's inverse,
 *  y[n, (i b + j) C + c, h, w] = x[n, c, h b + i, w b + j].
 * The kernels move elements of any dtype (by size); rows of (n, output channel, output row) run
 * in parallel. Gradients: DCR's DepthToSpace and SpaceToDepth are each other's inverse, so each
 * one's gradient is the other applied to dY; CRD has no inverse op and is refused. */
#include "ir-autodiff.h"
#include "ir-impl.h"

typedef struct sp_geom {
    int64_t N, C, H, W, b; /* of the input */
    bool crd, d2s;
} sp_geom;

static ir_status sp_parse(const ir_graph *g, const ir_node *n, sp_geom *sg, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    char s1[96];
    if (x->shape.rank != 4)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s; expected [N, C, H, W]",
                            ir_shape_str(&x->shape, s1, sizeof s1));
    if (ir_dtype_size(x->dtype) == 0)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %s", ir_dtype_name(x->dtype));
    sg->d2s = n->op == IR_OP_DepthToSpace;
    const char *mode = ir_attr_str(n, "mode", "DCR");
    if (sg->d2s && strcmp(mode, "DCR") && strcmp(mode, "CRD"))
        return ir_node_fail(d, IR_ERR_INVALID, n, "mode '%s' is neither DCR nor CRD", mode);
    sg->crd = sg->d2s && !strcmp(mode, "CRD");
    const ir_attr *ba = ir_attr_find(n, "blocksize");
    if (!ba || ba->type != IR_ATTR_INT || ba->i < 1)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute blocksize (>= 1) is required");
    sg->b = ba->i;
    sg->N = x->shape.dims[0];
    sg->C = x->shape.dims[1];
    sg->H = x->shape.dims[2];
    sg->W = x->shape.dims[3];
    const int64_t bb = sg->b * sg->b;
    if (sg->d2s ? sg->C % bb != 0 : sg->H % sg->b != 0 || sg->W % sg->b != 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X has shape %s, not divisible by blocksize %lld",
                            ir_shape_str(&x->shape, s1, sizeof s1), (long long)sg->b);
    return IR_OK;
}

static ir_status sp_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    sp_geom sg = {0}; /* set by sp_parse; zeroed for gcc -O3, which cannot see that */
    ir_status st = sp_parse(g, n, &sg, d);
    if (st) return st;
    const int64_t b = sg.b;
    ir_shape out = {4,
                    {sg.N, sg.d2s ? sg.C / (b * b) : sg.C * b * b, sg.d2s ? sg.H * b : sg.H / b,
                     sg.d2s ? sg.W * b : sg.W / b}};
    ir_set_out(g, n, 0, ir_node_in(g, n, 0)->dtype, &out);
    return IR_OK;
}

static inline void copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

static ir_status sp_kernel(const ir_kernel_ctx *k) {
    sp_geom sg = {0}; /* set by sp_parse; zeroed for gcc -O3, which cannot see that */
    ir_status st = sp_parse(k->graph, k->node, &sg, k->diag);
    if (st) return st;
    const size_t es = ir_dtype_size(k->in[0].dtype);
    const char *x = k->in[0].data;
    char *y = k->out[0].data;
    const int64_t b = sg.b;
    /* the spatial side: (Hs, Ws) the large plane, Cs its channels; the depth side has Cs b^2 */
    const int64_t Cs = sg.d2s ? sg.C / (b * b) : sg.C, Hs = sg.d2s ? sg.H * b : sg.H,
                  Ws = sg.d2s ? sg.W * b : sg.W, Hd = Hs / b, Wd = Ws / b;
    const int64_t rows = sg.N * Cs * Hs;
    IR_PARALLEL_FOR(rows * Ws >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t hs = r % Hs, c = (r / Hs) % Cs, n = r / (Hs * Cs);
        const int64_t h = hs / b, i = hs % b;
        for (int64_t ws = 0; ws < Ws; ws++) {
            const int64_t w = ws / b, j = ws % b;
            const int64_t cd = sg.crd ? c * b * b + i * b + j : (i * b + j) * Cs + c;
            const int64_t spatial = ((n * Cs + c) * Hs + hs) * Ws + ws;
            const int64_t depth = ((n * Cs * b * b + cd) * Hd + h) * Wd + w;
            if (sg.d2s)
                copy_elem(y + (size_t)spatial * es, x + (size_t)depth * es, es);
            else
                copy_elem(y + (size_t)depth * es, x + (size_t)spatial * es, es);
        }
    }
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): samples move independently, so N links; channels and rows mix. */
static int sp_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    if (ir_node_in(g, n, 0)->shape.rank == 4) ir_dims_keep(&o, 0, 0, 0, 0);
    return ir_dims_end(&o);
}

/* The inverse permutation applied to dY: SpaceToDepth for DepthToSpace (DCR) and back. */
static ir_status sp_grad(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    bool d2s = c->node->op == IR_OP_DepthToSpace;
    if (d2s && !strcmp(ir_attr_str(c->node, "mode", "DCR"), "CRD"))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "DepthToSpace with mode CRD");
    ir_attr a = ir_grad_attr_int("blocksize", ir_attr_int(c->node, "blocksize", 1));
    int dy = ir_grad_gout(c, 0);
    int dx = ir_grad_op(c, d2s ? IR_OP_SpaceToDepth : IR_OP_DepthToSpace, 1, (int[]){dy}, 1, &a);
    return ir_grad_accumulate(c, 0, dx);
}
IR_GRAD_VIA(DepthToSpace, sp_grad)
IR_GRAD_VIA(SpaceToDepth, sp_grad)

IR_OP_DEF(DepthToSpace, 1, 1, 1, 1, .flags = IR_OPF_FLOAT16, .infer = sp_infer, .kernel = sp_kernel,
          .grad = ir_grad_DepthToSpace, .dims = sp_dims);
IR_OP_DEF(SpaceToDepth, 1, 1, 1, 1, .flags = IR_OPF_FLOAT16, .infer = sp_infer, .kernel = sp_kernel,
          .grad = ir_grad_SpaceToDepth, .dims = sp_dims);
