/* ir-expand-misc.c - RMSNormalization (opset 23), CenterCropPad (18) and AffineGrid (20)
 * expanded at import into ops of the table. ONNX defines each with a function body that depends
 * on the node (its axes, its shapes: context-dependent for the first two, an If on the rank for
 * AffineGrid); with every shape known at import the bodies are written here with static shapes,
 * from the spec and onnx 1.22's reference (onnx/reference/ops/op_*.py).
 *  - RMSNormalization: Y = X / sqrt(mean(X^2 over axes axis..r-1) + epsilon) * scale, computed
 *    in float32 for float16 and bfloat16 inputs (stash_type 1, the default), in X's own type
 *    otherwise (ONNX's body would also narrow a float64 input to float32: magpie keeps it).
 *  - CenterCropPad: along each axis given (all by default), a dimension longer than the target
 *    is cropped around its centre (the extra odd element comes off the end), a shorter one is
 *    padded with zeros likewise; the target shape must be a constant.
 *  - AffineGrid: the grid of normalized coordinates (x, y[, z], 1) over size's spatial dims
 *    (linspace -1..1 over the corners with align_corners, over the pixel centres without), times
 *    theta transposed: [N, H, W, 2] or [N, D, H, W, 3]; size must be a constant.
 *  - Bernoulli (15, 22): ONNX's body is context-dependent (the draw's dtype is the input's):
 *    output = Cast<dtype>(RandomUniformLike<low 0, high 1, seed>(input) < input), dtype being
 *    the attribute or the input's. The body onnx 1.22 writes compares with Greater, which would
 *    give 1 with probability 1 - p; the spec's text and its reference (np.random.binomial(1, p))
 *    give 1 with probability p, and so does this expansion. The draw is the expanded node's
 *    (ops-random.c: seeded by its name, "<node>/RandomUniformLike_0", or by the seed
 *    attribute). */
#include "ir-expand-build.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- RMSNormalization */

ir_status ir_expand_rms_norm(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "X and scale are required");
    const ir_value x = g->values[n->in[0]];
    if (!ir_dtype_is_float(x.dtype))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X must be float, not %s", ir_dtype_name(x.dtype));
    const int r = x.shape.rank;
    int64_t axis = ir_attr_int(n, "axis", -1);
    if (axis < -r || axis >= r || r == 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld for rank %d", (long long)axis, r);
    if (axis < 0) axis += r;
    const int64_t stash = ir_attr_int(n, "stash_type", 1);
    if (stash != 1)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "stash_type %lld (only 1, float32, is read)",
                            (long long)stash);
    const bool narrow = x.dtype == IR_F16 || x.dtype == IR_BF16;
    const ir_dtype ct = narrow ? IR_F32 : x.dtype;
    int xf = xb_cast(&b, n->in[0], ct);
    int64_t axes[IR_MAX_RANK];
    for (int i = 0; i < r - axis; i++) axes[i] = axis + i;
    int ms = xb_reduce(&b, IR_OP_ReduceMean, xb_op2(&b, IR_OP_Mul, xf, xf), (int)(r - axis), axes,
                       true, -1);
    int eps = xb_scalar(&b, ct, ir_attr_float(n, "epsilon", 1e-5f));
    int inv = xb_op1(&b, IR_OP_Reciprocal, xb_op1(&b, IR_OP_Sqrt, xb_op2(&b, IR_OP_Add, ms, eps)));
    int y = xb_cast(&b, xb_op2(&b, IR_OP_Mul, xf, inv), x.dtype);
    xb_op(&b, IR_OP_Mul, 2, (int[]){y, n->in[1]}, n->out[0], 0, NULL);
    return b.st;
}

/* ---------------------------------------------------------------- CenterCropPad */

ir_status ir_expand_center_crop_pad(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "input_data and shape are required");
    const ir_value x = g->values[n->in[0]];
    const int r = x.shape.rank;
    int64_t target[IR_MAX_RANK];
    int cnt;
    ir_status st = ir_const_ints(g, n, 1, target, IR_MAX_RANK, &cnt, d);
    if (st) return st;
    int64_t axes[IR_MAX_RANK];
    const int64_t *av;
    int na = ir_attr_ints(n, "axes", &av);
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    } else {
        if (na > r) return ir_node_fail(d, IR_ERR_INVALID, n, "%d axes for rank %d", na, r);
        for (int i = 0; i < na; i++) {
            axes[i] = av[i] < 0 ? av[i] + r : av[i];
            if (axes[i] < 0 || axes[i] >= r)
                return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld for rank %d", (long long)av[i],
                                    r);
        }
    }
    if (cnt != na)
        return ir_node_fail(d, IR_ERR_INVALID, n, "shape has %d values for %d axes", cnt, na);
    int64_t pads[2 * IR_MAX_RANK] = {0};
    bool any_pad = false;
    int y = n->in[0];
    for (int i = 0; i < na; i++) {
        const int64_t a = axes[i], dim = x.shape.dims[a], s = target[i];
        if (s < 0) return ir_node_fail(d, IR_ERR_INVALID, n, "target length %lld", (long long)s);
        if (s < dim) {
            const int64_t lo = (dim - s) / 2;
            y = xb_slice(&b, y, a, lo, lo + s);
        } else if (s > dim) {
            pads[a] = (s - dim) / 2;
            pads[r + a] = s - dim - pads[a];
            any_pad = true;
        }
    }
    if (any_pad) {
        int zero = xb_scalar(&b, x.dtype, 0.0);
        y = xb_op(&b, IR_OP_Pad, 3, (int[]){y, xb_ints(&b, 2 * r, pads), zero}, -1, 0, NULL);
    }
    xb_identity(&b, y, n->out[0]);
    return b.st;
}

/* ---------------------------------------------------------------- AffineGrid */

/* Coordinate i of n along one axis, normalized to [-1, 1]. */
static double grid_coord(int64_t i, int64_t n, bool align) {
    if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

ir_status ir_expand_affine_grid(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "theta and size are required");
    const ir_value th = g->values[n->in[0]];
    int64_t size[5];
    int cnt;
    ir_status st = ir_const_ints(g, n, 1, size, 5, &cnt, d);
    if (st) return st;
    if (cnt != 4 && cnt != 5)
        return ir_node_fail(d, IR_ERR_INVALID, n, "size has %d values (expected 4 or 5)", cnt);
    const int nd = cnt - 2; /* spatial dims */
    const int64_t N = size[0];
    char s1[128];
    if (!ir_dtype_is_float(th.dtype) || th.shape.rank != 3 || th.shape.dims[0] != N ||
        th.shape.dims[1] != nd || th.shape.dims[2] != nd + 1)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "theta is %s %s; expected float [%lld, %d, %d]",
                            ir_dtype_name(th.dtype), ir_shape_str(&th.shape, s1, sizeof s1),
                            (long long)N, nd, nd + 1);
    int64_t points = 1;
    for (int k = 0; k < nd; k++) {
        if (size[2 + k] <= 0 || size[2 + k] > (1 << 24))
            return ir_node_fail(d, IR_ERR_INVALID, n, "size[%d] is %lld", 2 + k,
                                (long long)size[2 + k]);
        points *= size[2 + k];
    }
    if (points > (1 << 26))
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "a grid of %lld points", (long long)points);
    const bool align = ir_attr_int(n, "align_corners", 0) != 0;
    double *base = malloc(sizeof(double) * (size_t)(points * (nd + 1)));
    if (!base) return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory");
    /* row p = (x, y[, z], 1) of spatial index p (row-major over D, H, W) */
    for (int64_t p = 0; p < points; p++) {
        int64_t rem = p;
        double c[3];
        for (int k = nd - 1; k >= 0; k--) {
            const int64_t len = size[2 + k];
            c[nd - 1 - k] = grid_coord(rem % len, len, align); /* x is the last spatial dim */
            rem /= len;
        }
        for (int k = 0; k < nd; k++) base[p * (nd + 1) + k] = c[k];
        base[p * (nd + 1) + nd] = 1.0;
    }
    const ir_shape bs = {.rank = 2, .dims = {points, nd + 1}};
    int grid = xb_const(&b, th.dtype, &bs, base);
    free(base);
    int tt = xb_transpose(&b, n->in[0], 3, (int64_t[]){0, 2, 1}, -1); /* [N, nd+1, nd] */
    int prod = xb_op2(&b, IR_OP_MatMul, grid, tt);                    /* [N, points, nd] */
    int64_t od[5] = {N};
    for (int k = 0; k < nd; k++) od[1 + k] = size[2 + k];
    od[1 + nd] = nd;
    xb_reshape(&b, prod, nd + 2, od, n->out[0]);
    return b.st;
}

/* ---------------------------------------------------------------- Bernoulli */

ir_status ir_expand_bernoulli(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    if (n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "input and output are required");
    const ir_dtype t = g->values[n->in[0]].dtype;
    if (!ir_dtype_is_float(t))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "input must be float, not %s", ir_dtype_name(t));
    int64_t to = ir_attr_int(n, "dtype", ir_dtype_to_onnx(t));
    if (ir_dtype_from_onnx((int)to) == IR_DTYPE_NONE)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "dtype %lld is not supported", (long long)to);
    ir_attr a[4] = {{.name = "dtype", .type = IR_ATTR_INT, .i = ir_dtype_to_onnx(t)},
                    {.name = "low", .type = IR_ATTR_FLOAT, .f = 0},
                    {.name = "high", .type = IR_ATTR_FLOAT, .f = 1}};
    int na = 3;
    const ir_attr *seed = ir_attr_find(n, "seed");
    if (seed) a[na++] = (ir_attr){.name = "seed", .type = IR_ATTR_FLOAT, .f = seed->f};
    int u = xb_op(&b, IR_OP_RandomUniformLike, 1, &n->in[0], -1, na, a);
    int lt = xb_op2(&b, IR_OP_Less, u, n->in[0]);
    xb_op_int(&b, IR_OP_Cast, 1, &lt, n->out[0], "to", to);
    return b.st;
}
