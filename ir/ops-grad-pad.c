/* ops-grad-pad.c - PadGrad, the gradient of Pad in reflect, edge and wrap modes.
 *
 * PadGrad(dY) -> dX, attributes mode (reflect, edge or wrap) and pads (begins then ends, one per
 * dim, none negative). Each output element of Pad reads one input element (ir_pad_source, the
 * forward's own map), so dX[i] is the sum of dY over every position that read i. The map is a
 * product of per-dim maps, so the positions that read i are the product of per-dim preimages:
 * the kernel lists them per dim (in the workspace, one CSR table per dim) and computes each row
 * of dX (the last dim) from the dY rows its outer indices' preimages name, scattering each dY
 * row along the last dim's map. Rows are independent: no two threads write one element, and the
 * sums run in a fixed order. Any float dtype, accumulated in the output's dtype (an element sums
 * a few values: one per dim and reflection). Constant mode needs no kernel: its gradient is the
 * interior of dY (grad-shape.c). */
#include "ir-autodiff.h"
#include "ir-impl.h"

typedef struct pg_geom {
    int r;
    enum ir_pad_mode mode;
    int64_t pb[IR_MAX_RANK], x[IR_MAX_RANK], y[IR_MAX_RANK];
} pg_geom;

static ir_status pg_parse(const ir_node *n, const ir_shape *ys, pg_geom *pg, ir_diag *d) {
    const char *m = ir_attr_str(n, "mode", NULL);
    int mi = ir_pad_mode_of(m);
    if (!m || mi < 0 || mi == IR_PAD_CONSTANT)
        return ir_node_fail(d, IR_ERR_INVALID, n, "mode '%s': reflect, edge or wrap",
                            m ? m : "(none)");
    pg->mode = (enum ir_pad_mode)mi;
    const int64_t *pads;
    pg->r = ys->rank;
    if (ir_attr_ints(n, "pads", &pads) != 2 * pg->r)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute pads needs %d values", 2 * pg->r);
    for (int i = 0; i < pg->r; i++) {
        pg->pb[i] = pads[i];
        pg->y[i] = ys->dims[i];
        pg->x[i] = ys->dims[i] - pads[i] - pads[pg->r + i];
        if (pads[i] < 0 || pads[pg->r + i] < 0 || pg->x[i] < 0 || (pg->x[i] == 0 && pg->y[i] > 0))
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "pads %lld and %lld of axis %d of length %lld: none negative, "
                                "and an input left",
                                (long long)pads[i], (long long)pads[pg->r + i], i,
                                (long long)pg->y[i]);
    }
    return IR_OK;
}

static ir_status pg_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *dy = ir_node_in(g, n, 0);
    if (!ir_dtype_is_float(dy->dtype))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dY is %s: a float type",
                            ir_dtype_name(dy->dtype));
    pg_geom pg;
    ir_status st = pg_parse(n, &dy->shape, &pg, d);
    if (st) return st;
    ir_shape xs = ir_shape_make(pg.r, pg.x);
    ir_set_out(g, n, 0, dy->dtype, &xs);
    return IR_OK;
}

/* Per dim: src[j] (Y's index j reads X's src[j]), then the CSR of its inverse, off[X + 1] and
 * the list pre[Y] of the j reading each i in increasing order. */
static size_t pg_table_elems(const pg_geom *pg) {
    size_t e = 0;
    for (int i = 0; i < pg->r; i++) e += (size_t)(2 * pg->y[i] + pg->x[i] + 1);
    return e;
}

static size_t pg_workspace(const ir_graph *g, const ir_node *n) {
    pg_geom pg;
    if (pg_parse(n, &ir_node_in(g, n, 0)->shape, &pg, NULL)) return 0;
    return pg_table_elems(&pg) * sizeof(int64_t);
}

#define PG_LD(t, p, i) ((t) == IR_F32 || (t) == IR_F64 ? IR_LD_F(t, p, i) : ir_load_f64(p, t, i))
#define PG_ST(t, p, i, v)                                                                          \
    do {                                                                                           \
        if ((t) == IR_F32 || (t) == IR_F64)                                                        \
            IR_ST_F(t, p, i, v);                                                                   \
        else                                                                                       \
            ir_store_f64(p, t, i, v);                                                              \
    } while (0)

static ir_status pg_kernel(const ir_kernel_ctx *k) {
    pg_geom pg;
    ir_status st = pg_parse(k->node, &k->in[0].shape, &pg, k->diag);
    if (st) return st;
    const ir_dtype t = k->in[0].dtype;
    const void *dY = k->in[0].data;
    void *dX = k->out[0].data;
    const int r = pg.r;
    if (r == 0) {
        PG_ST(t, dX, 0, PG_LD(t, dY, 0));
        return IR_OK;
    }
    if (ir_shape_numel(&k->out[0].shape) == 0) return IR_OK;
    if (k->workspace_bytes < pg_table_elems(&pg) * sizeof(int64_t))
        return ir_node_fail(k->diag, IR_ERR_INTERNAL, k->node, "workspace too small");
    int64_t *src[IR_MAX_RANK], *off[IR_MAX_RANK], *pre[IR_MAX_RANK], *w = k->workspace;
    for (int d = 0; d < r; d++) {
        src[d] = w;
        off[d] = w + pg.y[d];
        pre[d] = off[d] + pg.x[d] + 1;
        w = pre[d] + pg.y[d];
        for (int64_t i = 0; i <= pg.x[d]; i++) off[d][i] = 0;
        for (int64_t j = 0; j < pg.y[d]; j++) {
            src[d][j] = ir_pad_source(j, pg.pb[d], pg.x[d], pg.mode);
            off[d][src[d][j] + 1]++;
        }
        for (int64_t i = 0; i < pg.x[d]; i++) off[d][i + 1] += off[d][i];
        /* off[i] serves as i's cursor, so that afterwards off[i] holds the start of i + 1 */
        for (int64_t j = 0; j < pg.y[d]; j++) pre[d][off[d][src[d][j]]++] = j;
        for (int64_t i = pg.x[d]; i > 0; i--) off[d][i] = off[d][i - 1];
        off[d][0] = 0;
    }
    int64_t ystr[IR_MAX_RANK];
    ir_shape_strides(&k->in[0].shape, ystr);
    const int last = r - 1;
    const int64_t xl = pg.x[last], yl = pg.y[last], *srcl = src[last];
    int64_t rows = 1;
    for (int d = 0; d < last; d++) rows *= pg.x[d];
    IR_PARALLEL_FOR(rows * yl >= IR_PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t idx[IR_MAX_RANK], cur[IR_MAX_RANK], rem = row;
        for (int d = last - 1; d >= 0; d--) {
            idx[d] = rem % pg.x[d];
            rem /= pg.x[d];
            cur[d] = off[d][idx[d]];
        }
        const int64_t xo = row * xl;
        for (int64_t i = 0; i < xl; i++) PG_ST(t, dX, xo + i, 0.0);
        for (;;) { /* every combination of the outer dims' preimages: one dY row each */
            int64_t yo = 0;
            for (int d = 0; d < last; d++) yo += pre[d][cur[d]] * ystr[d];
            for (int64_t j = 0; j < yl; j++)
                PG_ST(t, dX, xo + srcl[j], PG_LD(t, dX, xo + srcl[j]) + PG_LD(t, dY, yo + j));
            int d = last - 1;
            for (; d >= 0; d--) {
                if (++cur[d] < off[d][idx[d] + 1]) break;
                cur[d] = off[d][idx[d]];
            }
            if (d < 0) break;
        }
    }
    return IR_OK;
}

/* An add per element of dY. */
static double pg_flops(const ir_graph *g, const ir_node *n) {
    return (double)ir_shape_numel(&ir_node_in(g, n, 0)->shape);
}

/* The dims padded by nothing link, as Pad's. */
static int pg_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    pg_geom pg;
    if (pg_parse(n, &ir_node_in(g, n, 0)->shape, &pg, NULL)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < pg.r; i++)
        if (pg.x[i] == pg.y[i]) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_MAGPIE_OP_DEF(PadGrad, 1, 1, 1, 1, .infer = pg_infer, .flops = pg_flops,
                 .workspace = pg_workspace, .kernel = pg_kernel, .dims = pg_dims);
