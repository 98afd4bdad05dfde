/* pet-region-compute.c - the ops that compute, rebuilt on a region of their output (the
 * correction kernels of PET §5.2 step 3; pet-region.c has the machinery and the data movement):
 *  - Conv: the receptive field of the region, clipped to the input, and a conv on that slice
 *    with the pads the clipped border needs (so taps outside the input still read zeros, and
 *    only those); the output channels' groups (a region inside one group becomes a plain conv
 *    on that group's channels; one spanning groups is widened to whole groups and cut after);
 *  - AveragePool: the same geometry (ceil_mode 0): the divisor of every window is unchanged;
 *  - GlobalAveragePool, ReduceSum, ReduceMean: the reduced dims whole, the others the region's;
 *  - MatMul: the region's rows of A and columns of B, all of K (batch dims broadcast);
 *  - Gemm: the same through transA/transB, C broadcast to the region;
 *  - Einsum: each operand's dims that name an output index take the region's range of it, the
 *    summed ones stay whole (a broadcast size-1 dim too); the same equation on those slices.
 * Every geometry is re-derived from the attributes with the formulas of ir/ops-conv.c and
 * ir/ops-pool.c and checked against the shapes ir inferred: a mismatch is refused, never
 * guessed. */
#include "pet-correct-impl.h"

#include "ir-einsum.h"

static ir_status unsupported(pc_ctx *c, const ir_node *n, const char *why) {
    return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "correction: %s", why);
}

/* Reads the geometry of a Conv or AveragePool (pet-correct-impl.h), with the formulas of
 * ir/ops-conv.c and ir/ops-pool.c. */
ir_status pc_window_geom(const ir_graph *p, const ir_node *n, bool pool, pc_geom *g, ir_diag *d) {
    const ir_shape *xs = &p->values[n->in[0]].shape, *ys = &p->values[n->out[0]].shape;
    int S = xs->rank - 2;
    if (S < 1 || S > 3 || ys->rank != xs->rank)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "correction: rank %d", xs->rank);
    g->S = S;
    const int64_t *st, *dl, *pads, *ks = NULL;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl),
        npd = ir_attr_ints(n, "pads", &pads);
    if (pool && (ir_attr_ints(n, "kernel_shape", &ks) != S || ir_attr_int(n, "ceil_mode", 0)))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "correction: pooling with ceil_mode or without kernel_shape");
    if ((nst >= 0 && nst != S) || (ndl >= 0 && ndl != S) || (npd >= 0 && npd != 2 * S))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "correction: attribute lengths");
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool up = !strcmp(ap, "SAME_UPPER"), lo = !strcmp(ap, "SAME_LOWER"),
         valid = !strcmp(ap, "VALID");
    if (!up && !lo && !valid && strcmp(ap, "NOTSET") != 0)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "correction: auto_pad '%s'", ap);
    const ir_shape *ws = pool ? NULL : &p->values[n->in[1]].shape;
    for (int i = 0; i < S; i++) {
        g->in[i] = xs->dims[2 + i];
        g->k[i] = pool ? ks[i] : ws->dims[2 + i];
        g->s[i] = nst >= 0 ? st[i] : 1;
        g->d[i] = ndl >= 0 ? dl[i] : 1;
        g->pb[i] = npd >= 0 ? pads[i] : 0;
        g->pe[i] = npd >= 0 ? pads[S + i] : 0;
        if (g->s[i] < 1 || g->d[i] < 1 || g->k[i] < 1 || (pool && g->d[i] != 1))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                "correction: strides, dilations or kernel of dim %d", i);
        int64_t dk = (g->k[i] - 1) * g->d[i] + 1;
        if (valid) {
            g->pb[i] = g->pe[i] = 0;
        } else if (up || lo) {
            int64_t out = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t tot = (out - 1) * g->s[i] + dk - g->in[i];
            if (tot < 0) tot = 0;
            g->pb[i] = up ? tot / 2 : tot - tot / 2;
            g->pe[i] = tot - g->pb[i];
        }
        g->out[i] = (g->in[i] + g->pb[i] + g->pe[i] - dk) / g->s[i] + 1;
        if (g->out[i] != ys->dims[2 + i])
            return ir_node_fail(d, IR_ERR_INTERNAL, n,
                                "correction: spatial dim %d has %lld outputs, ir inferred %lld", i,
                                (long long)g->out[i], (long long)ys->dims[2 + i]);
    }
    return IR_OK;
}

bool pc_window(const pc_geom *g, int i, int64_t o0, int64_t o1, int64_t *lo, int64_t *hi,
               int64_t *pb, int64_t *pe) {
    int64_t a = o0 * g->s[i] - g->pb[i],
            b = (o1 - 1) * g->s[i] - g->pb[i] + (g->k[i] - 1) * g->d[i] + 1;
    *lo = a < 0 ? 0 : a;
    *hi = b > g->in[i] ? g->in[i] : b;
    *pb = *lo - a;
    *pe = b - *hi;
    return *hi > *lo;
}

static const char *const conv_skip[] = {"pads", "auto_pad", "group", NULL};

static ir_status r_conv(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_graph *p = c->prog;
    pc_geom g;
    ir_status st = pc_window_geom(c->prog, n, false, &g, c->d);
    if (st != IR_OK) return st;
    const ir_shape *xs = &p->values[n->in[0]].shape, *ws = &p->values[n->in[1]].shape;
    int64_t G = ir_attr_int(n, "group", 1), C = xs->dims[1], M = ws->dims[0];
    if (G < 1 || C % G || M % G) return unsupported(c, n, "group");
    int64_t Mg = M / G, Cg = C / G, m0 = R->lo[1], m1 = R->hi[1];
    int64_t ga = m0 / Mg, gb = (m1 - 1) / Mg;
    /* a region inside one group is a plain conv on its channels; across groups, whole groups */
    int64_t me0 = ga == gb ? m0 : ga * Mg, me1 = ga == gb ? m1 : (gb + 1) * Mg;
    int64_t ng = ga == gb ? 1 : gb - ga + 1;
    pet_box bx = {.rank = xs->rank}, bw, bb = {.rank = 1, .lo = {me0}, .hi = {me1}};
    pc_box_full(ws, &bw);
    bw.lo[0] = me0;
    bw.hi[0] = me1;
    bx.lo[0] = R->lo[0];
    bx.hi[0] = R->hi[0];
    bx.lo[1] = G == 1 ? 0 : ga * Cg;
    bx.hi[1] = G == 1 ? C : (gb + 1) * Cg;
    int64_t pads[6];
    for (int i = 0; i < g.S; i++)
        if (!pc_window(&g, i, R->lo[2 + i], R->hi[2 + i], &bx.lo[2 + i], &bx.hi[2 + i], &pads[i],
                       &pads[g.S + i]))
            return unsupported(c, n, "the region reads only padding");
    int in[3] = {-1, -1, -1}, n_in = 2;
    if ((st = pc_region(c, n->in[0], &bx, &in[0])) != IR_OK ||
        (st = pc_region(c, n->in[1], &bw, &in[1])) != IR_OK)
        return st;
    if (n->n_in > 2 && n->in[2] >= 0) {
        if ((st = pc_region(c, n->in[2], &bb, &in[2])) != IR_OK) return st;
        n_in = 3;
    }
    ir_attr extra[2] = {{.name = "pads", .type = IR_ATTR_INTS, .n = 2 * g.S, .ints = pads},
                        {.name = "group", .type = IR_ATTR_INT, .i = ng}};
    int y, ni = pc_emit_like(c, n, n_in, in, 1, &y, conv_skip, 2, extra, &st);
    if (ni < 0 || (st = pc_note_conv(c, ni)) != IR_OK) return st;
    if (me0 == m0 && me1 == m1) {
        *res = y;
        return IR_OK;
    }
    pet_box cut;
    pc_box_full(&c->h->values[y].shape, &cut);
    cut.lo[1] = m0 - me0;
    cut.hi[1] = m1 - me0;
    return pc_slice(c, y, &cut, res);
}

static ir_status r_avgpool(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    pc_geom g;
    ir_status st = pc_window_geom(c->prog, n, true, &g, c->d);
    if (st != IR_OK) return st;
    pet_box bx = *R;
    int64_t pads[6];
    for (int i = 0; i < g.S; i++)
        if (!pc_window(&g, i, R->lo[2 + i], R->hi[2 + i], &bx.lo[2 + i], &bx.hi[2 + i], &pads[i],
                       &pads[g.S + i]))
            return unsupported(c, n, "the region reads only padding");
    int x;
    if ((st = pc_region(c, n->in[0], &bx, &x)) != IR_OK) return st;
    static const char *const skip[] = {"pads", "auto_pad", NULL};
    ir_attr extra = {.name = "pads", .type = IR_ATTR_INTS, .n = 2 * g.S, .ints = pads};
    return pc_emit_like(c, n, 1, &x, 1, res, skip, 1, &extra, &st) < 0 ? st : IR_OK;
}

/* Reductions: reduced dims whole, kept dims from the region (keepdims or not). */
static ir_status r_reduce(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *xs = &c->prog->values[n->in[0]].shape;
    int r = xs->rank, cnt;
    bool mask[IR_MAX_RANK] = {false};
    int64_t axes[IR_MAX_RANK];
    bool keep = true;
    ir_status st = IR_OK;
    if (n->op == IR_OP_GlobalAveragePool) {
        for (int i = 2; i < r; i++) mask[i] = true;
    } else {
        keep = ir_attr_int(n, "keepdims", 1) != 0;
        if ((st = pc_const_ints(c, n, 1, axes, IR_MAX_RANK, &cnt)) != IR_OK) return st;
        if (cnt == -2) {
            const int64_t *a;
            cnt = ir_attr_ints(n, "axes", &a);
            if (cnt > IR_MAX_RANK) return unsupported(c, n, "too many axes");
            for (int i = 0; i < cnt; i++) axes[i] = a[i];
        }
        if (cnt <= 0 && ir_attr_int(n, "noop_with_empty_axes", 0))
            return pc_region(c, n->in[0], R, res);
        for (int i = 0; i < r; i++) mask[i] = cnt <= 0;
        for (int i = 0; i < cnt; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
            if (a < 0 || a >= r) return unsupported(c, n, "axis out of range");
            mask[a] = true;
        }
    }
    pet_box bx;
    pc_box_full(xs, &bx);
    for (int i = 0, j = 0; i < r; i++) {
        if (mask[i]) {
            j += keep;
            continue;
        }
        bx.lo[i] = R->lo[j];
        bx.hi[i] = R->hi[j];
        j++;
    }
    int in[2] = {-1, -1}, n_in = n->n_in > 1 ? 2 : 1;
    if ((st = pc_region(c, n->in[0], &bx, &in[0])) != IR_OK) return st;
    if (n_in == 2 && (st = pc_param(c, n, 1, &in[1])) != IR_OK) return st;
    return pc_emit_like(c, n, n_in, in, 1, res, NULL, 0, NULL, &st) < 0 ? st : IR_OK;
}

/* The batch dims of an operand of shape s (its first nb dims) on the region's batch dims (the
 * last of R's first onb dims, right-aligned), [0, 1) where it broadcasts. */
static void batch_box(const ir_shape *s, int nb, const ir_shape *os, int onb, const pet_box *R,
                      pet_box *B) {
    for (int i = 0; i < nb; i++) {
        int j = onb - nb + i;
        bool bc = s->dims[i] == 1 && os->dims[j] != 1;
        B->lo[i] = bc ? 0 : R->lo[j];
        B->hi[i] = bc ? 1 : R->hi[j];
    }
}

static ir_status r_matmul(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_graph *p = c->prog;
    const ir_shape *as = &p->values[n->in[0]].shape, *bs = &p->values[n->in[1]].shape,
                   *os = &p->values[n->out[0]].shape;
    int ra = as->rank, rb = bs->rank;
    if (ra < 1 || rb < 1) return unsupported(c, n, "scalar operands");
    int onb = os->rank - (ra > 1) - (rb > 1); /* the output's batch dims */
    pet_box ba, bb;
    pc_box_full(as, &ba);
    pc_box_full(bs, &bb);
    if (ra > 1) {
        batch_box(as, ra - 2, os, onb, R, &ba);
        ba.lo[ra - 2] = R->lo[onb];
        ba.hi[ra - 2] = R->hi[onb];
    }
    if (rb > 1) {
        batch_box(bs, rb - 2, os, onb, R, &bb);
        bb.lo[rb - 1] = R->lo[os->rank - 1];
        bb.hi[rb - 1] = R->hi[os->rank - 1];
    }
    int in[2];
    ir_status st;
    if ((st = pc_region(c, n->in[0], &ba, &in[0])) != IR_OK ||
        (st = pc_region(c, n->in[1], &bb, &in[1])) != IR_OK)
        return st;
    return pc_emit_like(c, n, 2, in, 1, res, NULL, 0, NULL, &st) < 0 ? st : IR_OK;
}

static ir_status r_gemm(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_graph *p = c->prog;
    const ir_shape *as = &p->values[n->in[0]].shape, *bs = &p->values[n->in[1]].shape,
                   *os = &p->values[n->out[0]].shape;
    if (as->rank != 2 || bs->rank != 2 || os->rank != 2) return unsupported(c, n, "rank");
    bool ta = ir_attr_int(n, "transA", 0) != 0, tb = ir_attr_int(n, "transB", 0) != 0;
    pet_box ba, bb;
    pc_box_full(as, &ba);
    pc_box_full(bs, &bb);
    ba.lo[ta] = R->lo[0];
    ba.hi[ta] = R->hi[0];
    bb.lo[!tb] = R->lo[1];
    bb.hi[!tb] = R->hi[1];
    int in[3] = {-1, -1, -1}, n_in = 2;
    ir_status st;
    if ((st = pc_region(c, n->in[0], &ba, &in[0])) != IR_OK ||
        (st = pc_region(c, n->in[1], &bb, &in[1])) != IR_OK)
        return st;
    if (n->n_in > 2 && n->in[2] >= 0) {
        pet_box bc;
        pc_bcast_box(&p->values[n->in[2]].shape, os, R, &bc);
        if ((st = pc_region(c, n->in[2], &bc, &in[2])) != IR_OK) return st;
        n_in = 3;
    }
    return pc_emit_like(c, n, n_in, in, 1, res, NULL, 0, NULL, &st) < 0 ? st : IR_OK;
}

static ir_status r_einsum(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_graph *p = c->prog;
    ir_einsum e;
    if (ir_einsum_of(p, n, &e, NULL) != IR_OK || n->n_in > 2)
        return unsupported(c, n, "an Einsum PET does not compile");
    int in[2];
    for (int k = 0; k < e.n_ops; k++) {
        const ir_shape *s = &p->values[n->in[k]].shape;
        pet_box b;
        pc_box_full(s, &b);
        for (int i = 0; i < s->rank; i++)
            for (int j = 0; j < e.n_out; j++)
                if (e.out[j] == e.label[k][i] && s->dims[i] == e.size[e.label[k][i]]) {
                    b.lo[i] = R->lo[j];
                    b.hi[i] = R->hi[j];
                }
        ir_status st = pc_region(c, n->in[k], &b, &in[k]);
        if (st != IR_OK) return st;
    }
    ir_status st;
    return pc_emit_like(c, n, e.n_ops, in, 1, res, NULL, 0, NULL, &st) < 0 ? st : IR_OK;
}

ir_status pc_region_compute(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    switch (n->op) {
    case IR_OP_Conv: return r_conv(c, n, R, res);
    case IR_OP_AveragePool: return r_avgpool(c, n, R, res);
    case IR_OP_GlobalAveragePool:
    case IR_OP_ReduceSum:
    case IR_OP_ReduceMean: return r_reduce(c, n, R, res);
    case IR_OP_MatMul: return r_matmul(c, n, R, res);
    case IR_OP_Gemm: return r_gemm(c, n, R, res);
    case IR_OP_Einsum: return r_einsum(c, n, R, res);
    default: return unsupported(c, n, "no region rule for this op");
    }
}
