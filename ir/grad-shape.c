/* grad-shape.c - gradient builders of the shape, layout and index ops (ir-autodiff.h):
 * re-describing ops (Reshape, Flatten, Squeeze, Unsqueeze) reshape the gradient back; Expand
 * and Tile sum it over the repeated positions; Transpose applies the inverse permutation;
 * Concat and Split, Slice and Pad are each other's gradients; Gather and GatherElements
 * scatter-add into zeros (GatherGrad, GatherElementsGrad in ops-train.c), as PyTorch's
 * embedding/index_select backward does; Trilu masks the gradient the same way.
 *
 * Shape-like inputs (shapes, axes, starts, pads, repeats) must be constants, which the
 * importer's folding guarantees for the fixtures; otherwise the builder reports it. */
#include "ir-autodiff.h"
#include "ir-impl.h"

static ir_status reshape_back(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape s = ir_grad_shape(c, c->in[0]);
    return ir_grad_accumulate(c, 0, ir_grad_reshape(c, ir_grad_gout(c, 0), &s));
}

IR_GRAD_VIA(Reshape, reshape_back)
IR_GRAD_VIA(Flatten, reshape_back)
IR_GRAD_VIA(Squeeze, reshape_back)
IR_GRAD_VIA(Unsqueeze, reshape_back)

ir_status ir_grad_Expand(ir_grad_ctx *c) {
    return ir_grad_accumulate(c, 0, ir_grad_gout(c, 0)); /* accumulate sums the broadcast */
}

/* Output dim i is repeats[i] copies of input dim i, copy-major: viewed as [r0, d0, r1, d1, ...]
 * (dims with one repeat keep one axis), the gradient is a sum over the r axes. */
ir_status ir_grad_Tile(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int64_t rep[IR_MAX_RANK], view[IR_MAX_RANK], axes[IR_MAX_RANK];
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    int nr = ir_grad_in_ints(c, 1, rep, IR_MAX_RANK), nv = 0, na = 0;
    if (nr != xs.rank)
        return ir_grad_status(c) != IR_OK
                   ? ir_grad_status(c)
                   : ir_grad_fail(c, IR_ERR_INVALID, "repeats has %d values", nr);
    for (int i = 0; i < xs.rank; i++) {
        if (rep[i] != 1) {
            if (nv == IR_MAX_RANK) goto too_deep;
            axes[na++] = nv;
            view[nv++] = rep[i];
        }
        if (nv == IR_MAX_RANK) goto too_deep;
        view[nv++] = xs.dims[i];
    }
    ir_shape vs = ir_shape_make(nv, view);
    int g = ir_grad_reshape(c, ir_grad_gout(c, 0), &vs);
    if (na) g = ir_grad_reduce_sum(c, g, na, axes, false);
    return ir_grad_accumulate(c, 0, g);
too_deep:
    return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "tiling %d dims needs a view of rank above %d",
                        xs.rank, IR_MAX_RANK);
}

ir_status ir_grad_Transpose(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int r = ir_grad_shape(c, c->in[0]).rank;
    int64_t perm[IR_MAX_RANK], inv[IR_MAX_RANK];
    const int64_t *p;
    int np = ir_attr_ints(c->node, "perm", &p);
    for (int i = 0; i < r; i++) perm[i] = np == r ? p[i] : r - 1 - i;
    for (int i = 0; i < r; i++) inv[perm[i]] = i;
    return ir_grad_accumulate(c, 0, ir_grad_transpose(c, ir_grad_gout(c, 0), r, inv));
}

/* Slice of x along one axis, [start, start+len). */
static int slice_axis(ir_grad_ctx *c, int x, int axis, int64_t start, int64_t len) {
    int s = ir_grad_const_i64(c, 1, &start), e = ir_grad_const_i64(c, 1, (int64_t[]){start + len});
    int a = ir_grad_const_i64(c, 1, (int64_t[]){axis});
    return ir_grad_op(c, IR_OP_Slice, 4, (int[]){x, s, e, a}, 0, NULL);
}

ir_status ir_grad_Concat(ir_grad_ctx *c) {
    int r = ir_grad_shape(c, c->out[0]).rank, axis;
    if (!ir_norm_axis(ir_attr_int(c->node, "axis", 0), r, &axis))
        return ir_grad_fail(c, IR_ERR_INVALID, "bad axis");
    int dy = ir_grad_gout(c, 0);
    int64_t off = 0;
    for (int i = 0; i < c->n_in; i++) {
        int64_t len = ir_grad_shape(c, c->in[i]).dims[axis];
        if (ir_grad_needs(c, i)) ir_grad_accumulate(c, i, slice_axis(c, dy, axis, off, len));
        off += len;
    }
    return ir_grad_status(c);
}

ir_status ir_grad_Split(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int r = ir_grad_shape(c, c->in[0]).rank, axis;
    if (!ir_norm_axis(ir_attr_int(c->node, "axis", 0), r, &axis))
        return ir_grad_fail(c, IR_ERR_INVALID, "bad axis");
    int parts[64];
    if (c->n_out > 64) return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "more than 64 outputs");
    for (int j = 0; j < c->n_out; j++) parts[j] = ir_grad_gout(c, j);
    ir_attr a = ir_grad_attr_int("axis", axis);
    return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_Concat, c->n_out, parts, 1, &a));
}

/* Pads x by pb/pe per dim (negative: crops), as Slice then Pad so both signs work. */
static int pad_back(ir_grad_ctx *c, int x, int r, const int64_t *pb, const int64_t *pe) {
    ir_shape s = ir_grad_shape(c, x);
    int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
    int ns = 0;
    bool pad = false;
    for (int i = 0; i < r; i++) {
        int64_t b = pb[i] < 0 ? -pb[i] : 0, e = pe[i] < 0 ? -pe[i] : 0;
        if (b || e) {
            st[ns] = b;
            en[ns] = s.dims[i] - e;
            ax[ns++] = i;
        }
        pads[i] = pb[i] > 0 ? pb[i] : 0;
        pads[r + i] = pe[i] > 0 ? pe[i] : 0;
        pad |= pads[i] || pads[r + i];
    }
    if (ns) {
        int in[4] = {x, ir_grad_const_i64(c, ns, st), ir_grad_const_i64(c, ns, en),
                     ir_grad_const_i64(c, ns, ax)};
        x = ir_grad_op(c, IR_OP_Slice, 4, in, 0, NULL);
    }
    if (pad) x = ir_grad_op2(c, IR_OP_Pad, x, ir_grad_const_i64(c, 2 * r, pads));
    return x;
}

/* Spreads g along axis a with stride k: element j moves to j*k, zeros between (length L*k).
 * [.., L, ..] -> Reshape [.., L, 1, ..] -> Pad the new axis to k -> Reshape [.., L*k, ..]. */
static int spread(ir_grad_ctx *c, int g, int a, int64_t k) {
    ir_shape s = ir_grad_shape(c, g), u = s;
    if (s.rank + 1 > IR_MAX_RANK) {
        ir_grad_fail(c, IR_ERR_UNSUPPORTED, "strided slice of rank %d", s.rank);
        return -1;
    }
    for (int i = s.rank; i > a + 1; i--) u.dims[i] = u.dims[i - 1];
    u.dims[a + 1] = 1;
    u.rank++;
    int64_t pads[2 * IR_MAX_RANK] = {0};
    pads[u.rank + a + 1] = k - 1;
    g = ir_grad_op2(c, IR_OP_Pad, ir_grad_reshape(c, g, &u),
                    ir_grad_const_i64(c, 2 * u.rank, pads));
    s.dims[a] *= k;
    return ir_grad_reshape(c, g, &s);
}

/* The gradient of a slice is dY put back at the sliced positions, zeros elsewhere: spread by
 * the step along strided axes, then padded (or cropped, past the end) to the input. */
ir_status ir_grad_Slice(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]), ys = ir_grad_shape(c, c->out[0]);
    int r = xs.rank;
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    int64_t pb[IR_MAX_RANK] = {0}, pe[IR_MAX_RANK] = {0};
    int ns = ir_grad_in_ints(c, 1, starts, IR_MAX_RANK);
    int ne = ir_grad_in_ints(c, 2, ends, IR_MAX_RANK);
    int na = c->n_in > 3 ? ir_grad_in_ints(c, 3, axes, IR_MAX_RANK) : -2;
    int nt = c->n_in > 4 ? ir_grad_in_ints(c, 4, steps, IR_MAX_RANK) : -2;
    if (ir_grad_status(c) != IR_OK) return ir_grad_status(c);
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED,
                            "starts/ends/axes/steps must be constant "
                            "inputs of equal length");
    int g = ir_grad_gout(c, 0);
    for (int j = 0; j < ns; j++) {
        int a;
        if (!ir_norm_axis(na >= 0 ? axes[j] : j, r, &a))
            return ir_grad_fail(c, IR_ERR_INVALID, "bad axis");
        int64_t k = nt >= 0 ? steps[j] : 1;
        if (k < 1)
            return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "slices with step %lld", (long long)k);
        int64_t dim = xs.dims[a], s = starts[j], e = ends[j];
        s = s < 0 ? s + dim : s;
        e = e < 0 ? e + dim : e;
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < s ? s : e > dim ? dim : e;
        int64_t len = (e - s + k - 1) / k;
        if (len != ys.dims[a])
            return ir_grad_fail(c, IR_ERR_INTERNAL, "slice of axis %d has %lld, not %lld", a,
                                (long long)len, (long long)ys.dims[a]);
        if (k > 1 && len > 0) g = spread(c, g, a, k);
        pb[a] = s;
        pe[a] = dim - s - (k > 1 && len > 0 ? len * k : len);
    }
    return ir_grad_accumulate(c, 0, pad_back(c, g, r, pb, pe));
}

/* Constant mode: the gradient is the interior of dY (a crop, or a zero pad where the forward
 * cropped). Reflect, edge and wrap: PadGrad adds each position of dY back to the input element it
 * was read from (ops-grad-pad.c). Pads (input 1, or the attribute before opset 11) and axes
 * (input 3, opset 18) must be constants. */
ir_status ir_grad_Pad(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    if (ir_grad_needs(c, 2))
        return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "a padding value that needs a gradient");
    const char *mode = ir_attr_str(c->node, "mode", "constant");
    int mi = ir_pad_mode_of(mode);
    if (mi < 0) return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "mode '%s'", mode);
    int r = ir_grad_shape(c, c->in[0]).rank;
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
    int nraw = c->n_in > 1 && c->in[1] >= 0 ? ir_grad_in_ints(c, 1, raw, 2 * IR_MAX_RANK) : -2;
    int na = c->n_in > 3 && c->in[3] >= 0 ? ir_grad_in_ints(c, 3, axes, IR_MAX_RANK) : -2;
    if (nraw == -2) {
        const int64_t *p;
        nraw = ir_attr_ints(c->node, "pads", &p);
        if (nraw == 2 * r) memcpy(raw, p, sizeof(int64_t) * (size_t)nraw);
    }
    if (ir_grad_status(c) != IR_OK) return ir_grad_status(c);
    if (na == -2)
        for (na = 0; na < r; na++) axes[na] = na;
    if (na < 0 || nraw != 2 * na)
        return ir_grad_fail(c, IR_ERR_INVALID, "pads has %d values for %d axes", nraw, na);
    for (int i = 0; i < r; i++) pb[i] = pe[i] = 0;
    for (int i = 0; i < na; i++) {
        int ax;
        if (!ir_norm_axis(axes[i], r, &ax))
            return ir_grad_fail(c, IR_ERR_INVALID, "axis %lld", (long long)axes[i]);
        pb[ax] = raw[i];
        pe[ax] = raw[na + i];
    }
    int dy = ir_grad_gout(c, 0);
    if (mi != IR_PAD_CONSTANT) {
        int64_t pads[2 * IR_MAX_RANK];
        for (int i = 0; i < r; i++) {
            pads[i] = pb[i];
            pads[r + i] = pe[i];
        }
        ir_attr at[2] = {ir_grad_attr_str(c, "mode", mode),
                         ir_grad_attr_ints(c, "pads", 2 * r, pads)};
        return ir_grad_accumulate(c, 0, ir_grad_op(c, IR_OP_PadGrad, 1, &dy, 2, at));
    }
    for (int i = 0; i < r; i++) { /* undo: crop what was added, re-add what was cropped */
        pb[i] = -pb[i];
        pe[i] = -pe[i];
    }
    return ir_grad_accumulate(c, 0, pad_back(c, dy, r, pb, pe));
}

/* ---------------------------------------------------------------- index ops */

static ir_status gather_back(ir_grad_ctx *c, ir_op_kind op) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    ir_shape xs = ir_grad_shape(c, c->in[0]);
    ir_attr at[2] = {ir_grad_attr_int("axis", ir_attr_int(c->node, "axis", 0)),
                     ir_grad_attr_ints(c, "shape", xs.rank, xs.dims)};
    int dy = ir_grad_gout(c, 0);
    return ir_grad_accumulate(c, 0, ir_grad_op(c, op, 2, (int[]){dy, c->in[1]}, 2, at));
}

ir_status ir_grad_Gather(ir_grad_ctx *c) {
    return gather_back(c, IR_OP_GatherGrad);
}

ir_status ir_grad_GatherElements(ir_grad_ctx *c) {
    return gather_back(c, IR_OP_GatherElementsGrad);
}

ir_status ir_grad_Trilu(ir_grad_ctx *c) {
    if (!ir_grad_needs(c, 0)) return IR_OK;
    int in[2] = {ir_grad_gout(c, 0), c->n_in > 1 ? c->in[1] : -1};
    int g = ir_grad_op(c, IR_OP_Trilu, in[1] >= 0 ? 2 : 1, in, c->node->n_attrs, c->node->attrs);
    return ir_grad_accumulate(c, 0, g);
}
