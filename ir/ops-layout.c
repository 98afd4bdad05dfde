/* ops-layout.c - data movement: Transpose, Concat, Split, Slice, Expand, Tile and Pad.
 *
 * Every op here moves elements without looking at them, so the kernels work on element sizes
 * 1/2/4/8 and support every dtype. Transpose, Slice, Expand, Tile and Pad's interior are one
 * strided copy (view_copy): an output view whose every dim has an input stride (negative for
 * reversed slices, 0 for broadcast and tiling) and an output stride. The view is simplified
 * (size-1 dims dropped, mergeable neighbours merged) and then copied either as rows (memcpy
 * when the innermost run is contiguous on both sides) or, for transposes, in square tiles so
 * that reads and writes both stay in cache. Concat and Split copy whole contiguous chunks.
 *
 * Shape-like inputs (Split's split, Slice's starts/ends/axes/steps, Expand's shape, Tile's
 * repeats, Pad's pads) must be constants at inference; kernels re-read them from their input
 * tensors, or derive them from the output shapes inference computed. */
#include "ir-autodiff.h"
#include "ir-impl.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- strided copy */

/* Tile views each dim as (repeat, dim), so a view may have twice the tensor rank. */
#define VIEW_MAX_RANK (2 * IR_MAX_RANK)
#define TILE 16 /* transpose tile edge: 16 lines of each side stay in L1 even at 2^k strides */

typedef struct view {
    int rank;
    int64_t dims[VIEW_MAX_RANK];
    int64_t is[VIEW_MAX_RANK]; /* input stride in elements: may be 0 or negative */
    int64_t os[VIEW_MAX_RANK]; /* output stride in elements */
} view;

/* A view over a row-major output of shape s (output strides set, input strides left 0). */
static view view_of(const ir_shape *s) {
    view v = {.rank = s->rank};
    ir_shape_strides(s, v.os);
    for (int i = 0; i < s->rank; i++) v.dims[i] = s->dims[i];
    return v;
}

/* Drops size-1 dims and merges neighbours that step through both buffers as one dim. Returns
 * false when the view has no elements. */
static bool view_simplify(view *v) {
    int r = 0;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] == 0) return false;
        if (v->dims[i] == 1) continue;
        if (r > 0 && v->is[r - 1] == v->is[i] * v->dims[i] &&
            v->os[r - 1] == v->os[i] * v->dims[i]) {
            v->dims[r - 1] *= v->dims[i];
            v->is[r - 1] = v->is[i];
            v->os[r - 1] = v->os[i];
            continue;
        }
        v->dims[r] = v->dims[i], v->is[r] = v->is[i], v->os[r] = v->os[i];
        r++;
    }
    v->rank = r;
    return true;
}

/* Offsets of the idx-th combination of the dims in [0, n) other than skip (the last varies
 * fastest). */
static void view_offsets(const view *v, int n, int skip, int64_t idx, int64_t *io, int64_t *oo) {
    int64_t a = 0, b = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (i == skip) continue;
        int64_t c = idx % v->dims[i];
        idx /= v->dims[i];
        a += c * v->is[i];
        b += c * v->os[i];
    }
    *io = a;
    *oo = b;
}

/* Element copies with a constant size so that the compiler turns each into one move (and
 * type punning stays defined). */
#define STRIDED_LOOP(ES)                                                                           \
    for (int64_t j = 0; j < n; j++) memcpy(d + j * os * (ES), s + j * is * (ES), (ES))

static void copy_run(char *d, const char *s, size_t es, int64_t n, int64_t is, int64_t os) {
    if (is == 1 && os == 1) {
        memcpy(d, s, (size_t)n * es);
        return;
    }
    if (is == 0 && os == 1) { /* a broadcast row */
        ir_fill_elems(d, n, s, es);
        return;
    }
    switch (es) {
    case 1: STRIDED_LOOP(1); break;
    case 2: STRIDED_LOOP(2); break;
    case 4: STRIDED_LOOP(4); break;
    case 8: STRIDED_LOOP(8); break;
    default: STRIDED_LOOP(es); break;
    }
}

static void copy_rows(char *dst, const char *src, size_t es, const view *v) {
    int last = v->rank - 1;
    int64_t n = v->dims[last], rows = 1;
    for (int i = 0; i < last; i++) rows *= v->dims[i];
    IR_PARALLEL_FOR(rows * n >= IR_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t io, oo;
        view_offsets(v, last, -1, r, &io, &oo);
        copy_run(dst + oo * (int64_t)es, src + io * (int64_t)es, es, n, v->is[last], v->os[last]);
    }
}

/* Tiles the plane of dims p (contiguous in the input) and last (contiguous in the output). */
#define TILE_LOOP(ES)                                                                              \
    for (int64_t a = a0; a < a1; a++)                                                              \
        for (int64_t b = b0; b < b1; b++)                                                          \
    memcpy(d + (a * osp + b * osq) * (ES), s + (a * isp + b * isq) * (ES), (ES))

static void copy_tiled(char *dst, const char *src, size_t es, const view *v, int p) {
    int last = v->rank - 1;
    int64_t np = v->dims[p], nq = v->dims[last], tp = (np + TILE - 1) / TILE,
            tq = (nq + TILE - 1) / TILE, outer = 1;
    int64_t isp = v->is[p], isq = v->is[last], osp = v->os[p], osq = v->os[last];
    for (int i = 0; i < last; i++)
        if (i != p) outer *= v->dims[i];
    int64_t units = outer * tp * tq;
    IR_PARALLEL_FOR(outer * np * nq >= IR_PAR_MIN)
    for (int64_t u = 0; u < units; u++) {
        int64_t io, oo, bq = u % tq, bp = (u / tq) % tp;
        view_offsets(v, last, p, u / (tq * tp), &io, &oo);
        int64_t a0 = bp * TILE, a1 = a0 + TILE < np ? a0 + TILE : np;
        int64_t b0 = bq * TILE, b1 = b0 + TILE < nq ? b0 + TILE : nq;
        char *d = dst + oo * (int64_t)es;
        const char *s = src + io * (int64_t)es;
        switch (es) {
        case 1: TILE_LOOP(1); break;
        case 2: TILE_LOOP(2); break;
        case 4: TILE_LOOP(4); break;
        case 8: TILE_LOOP(8); break;
        default: TILE_LOOP(es); break;
        }
    }
}

/* Copies the view from src to dst (both pointing at the view's first element). */
static void view_copy(void *dst, const void *src, size_t es, view v) {
    if (!view_simplify(&v)) return;
    if (v.rank == 0) {
        memcpy(dst, src, es);
        return;
    }
    int last = v.rank - 1, p = -1;
    /* A transposed plane (contiguous input dim p, output contiguous innermost) is worth tiling
     * when both sides are long enough for strided rows to thrash the cache. */
    if (v.is[last] != 1 && v.os[last] == 1 && v.dims[last] >= 8)
        for (int i = 0; i < last; i++)
            if (v.is[i] == 1 && v.dims[i] >= 8) p = i;
    if (p >= 0)
        copy_tiled(dst, src, es, &v, p);
    else
        copy_rows(dst, src, es, &v);
}

/* ---------------------------------------------------------------- Transpose */

static ir_status transpose_perm(const ir_node *n, int rank, int *perm, ir_diag *d) {
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    if (np < 0) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return IR_OK;
    }
    if (np != rank)
        return ir_node_fail(d, IR_ERR_INVALID, n, "perm has %d entries for rank %d", np, rank);
    bool seen[IR_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        if (p[i] < 0 || p[i] >= rank || seen[p[i]])
            return ir_node_fail(d, IR_ERR_INVALID, n, "perm is not a permutation of 0..%d",
                                rank - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return IR_OK;
}

static ir_status transpose_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int perm[IR_MAX_RANK];
    ir_status st = transpose_perm(n, x->shape.rank, perm, d);
    if (st != IR_OK) return st;
    ir_shape out = {.rank = x->shape.rank};
    for (int i = 0; i < out.rank; i++) out.dims[i] = x->shape.dims[perm[i]];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static ir_status transpose_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    int perm[IR_MAX_RANK];
    ir_status st = transpose_perm(k->node, x->shape.rank, perm, k->diag);
    if (st != IR_OK) return st;
    int64_t xs[IR_MAX_RANK];
    ir_shape_strides(&x->shape, xs);
    view v = view_of(&k->out[0].shape);
    for (int i = 0; i < v.rank; i++) v.is[i] = xs[perm[i]];
    view_copy(k->out[0].data, x->data, ir_dtype_size(x->dtype), v);
    return IR_OK;
}

/* Dims (ir.h, ir_dimlink): output dim i is input dim perm[i]. */
static int transpose_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    int perm[IR_MAX_RANK], r = ir_node_in(g, n, 0)->shape.rank;
    if (transpose_perm(n, r, perm, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < r; i++) ir_dims_keep(&o, 0, perm[i], 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Transpose, 1, 1, 1, 1, .flags = IR_OPF_VIEW | IR_OPF_FLOAT16, .infer = transpose_infer,
          .kernel = transpose_kernel, .grad = ir_grad_Transpose, .dims = transpose_dims);

/* ---------------------------------------------------------------- Concat, Split */

/* Splits a tensor into [outer, dims[axis] * inner] and returns outer and inner. */
static void outer_inner(const ir_shape *s, int axis, int64_t *outer, int64_t *inner) {
    int64_t o = 1, in = 1;
    for (int i = 0; i < axis; i++) o *= s->dims[i];
    for (int i = axis + 1; i < s->rank; i++) in *= s->dims[i];
    *outer = o;
    *inner = in;
}

/* Moves between a whole tensor and its parts along axis: row o of the whole (everything
 * before axis is the row index) is the concatenation of row o of every part. Concat and Split
 * are this one loop in the two directions. */
static void move_parts(const ir_tensor *whole, const ir_tensor *parts, int np, int axis,
                       bool split) {
    int64_t outer, inner;
    outer_inner(&whole->shape, axis, &outer, &inner);
    size_t es = ir_dtype_size(whole->dtype), row = (size_t)(whole->shape.dims[axis] * inner) * es;
    IR_PARALLEL_FOR((int64_t)row * outer >= 4 * IR_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        char *w = (char *)whole->data + (size_t)o * row;
        for (int i = 0; i < np; i++) {
            size_t c = (size_t)(parts[i].shape.dims[axis] * inner) * es;
            char *p = (char *)parts[i].data + (size_t)o * c;
            if (c) memcpy(split ? p : w, split ? w : p, c);
            w += c;
        }
    }
}

static ir_status concat_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x0 = ir_node_in(g, n, 0);
    int r = x0->shape.rank, axis;
    if (!ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis) || r == 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 0), r);
    ir_shape out = x0->shape;
    out.dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *x = ir_node_in(g, n, i);
        char a[160], b[160];
        if (!x) return ir_node_fail(d, IR_ERR_INVALID, n, "input %d is missing", i);
        if (x->dtype != x0->dtype)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d is %s, input 0 is %s", i,
                                ir_dtype_name(x->dtype), ir_dtype_name(x0->dtype));
        bool ok = x->shape.rank == r;
        for (int j = 0; ok && j < r; j++) ok = j == axis || x->shape.dims[j] == out.dims[j];
        if (!ok)
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "input %d of shape %s does not fit input 0 of shape %s on axis %d",
                                i, ir_shape_str(&x->shape, a, sizeof a),
                                ir_shape_str(&x0->shape, b, sizeof b), axis);
        out.dims[axis] += x->shape.dims[axis];
    }
    ir_set_out(g, n, 0, x0->dtype, &out);
    return IR_OK;
}

static ir_status parts_kernel(const ir_kernel_ctx *k, bool split) {
    const ir_tensor *whole = split ? &k->in[0] : &k->out[0];
    int axis;
    if (!ir_norm_axis(ir_attr_int(k->node, "axis", 0), whole->shape.rank, &axis))
        return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "axis is out of range");
    move_parts(whole, split ? k->out : k->in, split ? k->n_out : k->n_in, axis, split);
    return IR_OK;
}

static ir_status concat_kernel(const ir_kernel_ctx *k) {
    return parts_kernel(k, false);
}
static ir_status split_kernel(const ir_kernel_ctx *k) {
    return parts_kernel(k, true);
}

/* Dims of Concat and Split: every dim but the axis links between the whole and every part; along
 * the axis the parts are different ranges of the whole. */
static int parts_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    bool split = n->op == IR_OP_Split;
    int r = (split ? ir_node_in(g, n, 0) : ir_node_out(g, n, 0))->shape.rank, axis;
    if (!ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis)) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int p = 0; p < (split ? n->n_out : n->n_in); p++)
        for (int i = 0; i < r; i++)
            if (i != axis) ir_dims_keep(&o, split ? 0 : p, i, split ? p : 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Concat, 1, 1 << 20, 1, 1, .flags = IR_OPF_FLOAT16, .infer = concat_infer,
          .kernel = concat_kernel, .grad = ir_grad_Concat, .dims = parts_dims);

static ir_status split_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int r = x->shape.rank, axis, no = n->n_out, cnt;
    if (!ir_norm_axis(ir_attr_int(n, "axis", 0), r, &axis) || r == 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                            (long long)ir_attr_int(n, "axis", 0), r);
    int64_t *sp = malloc(sizeof(int64_t) * (size_t)no);
    if (!sp) return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory");
    ir_status st = ir_const_ints(g, n, 1, sp, no, &cnt, d);
    if (st != IR_OK) goto out;
    const int64_t *attr;
    int na = ir_attr_ints(n, "split", &attr); /* before opset 13 */
    if (cnt == -2 && na >= 0) {
        cnt = na;
        if (na <= no) memcpy(sp, attr, sizeof(int64_t) * (size_t)na);
    }
    int64_t dim = x->shape.dims[axis];
    if (cnt == -2) {
        /* Equal parts; opset 18's num_outputs lets the last one be smaller. */
        bool uneven = ir_attr_find(n, "num_outputs") != NULL;
        int64_t each = uneven ? (dim + no - 1) / no : dim / no;
        if (!uneven && dim % no) {
            st = ir_node_fail(d, IR_ERR_SHAPE, n, "axis %d of size %lld does not split into %d",
                              axis, (long long)dim, no);
            goto out;
        }
        for (int i = 0; i < no; i++) {
            int64_t left = dim - each * i;
            sp[i] = left < 0 ? 0 : left < each ? left : each;
        }
        cnt = no;
    }
    if (cnt != no) {
        st = ir_node_fail(d, IR_ERR_INVALID, n, "split has %d sizes for %d outputs", cnt, no);
        goto out;
    }
    int64_t sum = 0;
    for (int i = 0; i < no; i++) {
        if (sp[i] < 0) {
            st = ir_node_fail(d, IR_ERR_INVALID, n, "split[%d] = %lld is negative", i,
                              (long long)sp[i]);
            goto out;
        }
        sum += sp[i];
    }
    if (sum != dim) {
        st = ir_node_fail(d, IR_ERR_SHAPE, n, "split sizes sum to %lld, axis %d has %lld",
                          (long long)sum, axis, (long long)dim);
        goto out;
    }
    for (int i = 0; i < no; i++) {
        ir_shape s = x->shape;
        s.dims[axis] = sp[i];
        ir_set_out(g, n, i, x->dtype, &s);
    }
out:
    free(sp);
    return st;
}

IR_OP_DEF(Split, 1, 2, 1, 1 << 20, .flags = IR_OPF_FLOAT16, .infer = split_infer,
          .kernel = split_kernel, .grad = ir_grad_Split, .dims = parts_dims);

/* ---------------------------------------------------------------- Slice */

/* ir-impl.h */
ir_status ir_slice_resolve(const ir_node *n, const ir_shape *in, const int64_t *starts, int ns,
                           const int64_t *ends, int ne, const int64_t *axes, int na,
                           const int64_t *steps, int nt, int64_t *first, int64_t *step,
                           ir_shape *out, ir_diag *d) {
    if (ns != ne || (na != -2 && na != ns) || (nt != -2 && nt != ns))
        return ir_node_fail(d, IR_ERR_INVALID, n,
                            "starts, ends, axes and steps have different lengths");
    *out = *in;
    bool seen[IR_MAX_RANK] = {false};
    for (int i = 0; i < in->rank; i++) first[i] = 0, step[i] = 1;
    for (int i = 0; i < ns; i++) {
        int ax;
        int64_t a = na == -2 ? i : axes[i];
        if (!ir_norm_axis(a, in->rank, &ax) || in->rank == 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                                (long long)a, in->rank);
        if (seen[ax]) return ir_node_fail(d, IR_ERR_INVALID, n, "axis %d is repeated", ax);
        seen[ax] = true;
        int64_t dim = in->dims[ax], s = starts[i], e = ends[i], t = nt == -2 ? 1 : steps[i];
        if (t == 0) return ir_node_fail(d, IR_ERR_INVALID, n, "step %d is 0", i);
        /* INT64_MIN/MAX-like ends are legal: the shifts cannot overflow since dim >= 0 */
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        if (t > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        }
        int64_t len = t > 0 ? (e - s + t - 1) / t : (s - e + (-t) - 1) / (-t);
        out->dims[ax] = len > 0 ? len : 0;
        first[ax] = out->dims[ax] ? s : 0;
        step[ax] = t;
    }
    return IR_OK;
}

static ir_status slice_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t v[4][IR_MAX_RANK], first[IR_MAX_RANK], step[IR_MAX_RANK];
    int cnt[4];
    for (int i = 0; i < 4; i++) {
        ir_status st = ir_const_ints(g, n, i + 1, v[i], IR_MAX_RANK, &cnt[i], d);
        if (st != IR_OK) return st;
    }
    ir_shape out;
    ir_status st = ir_slice_resolve(n, &x->shape, v[0], cnt[0], v[1], cnt[1], v[2], cnt[2], v[3],
                                    cnt[3], first, step, &out, d);
    if (st == IR_OK) ir_set_out(g, n, 0, x->dtype, &out);
    return st;
}

static ir_status slice_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0];
    int64_t v[4][IR_MAX_RANK], first[IR_MAX_RANK], step[IR_MAX_RANK], xs[IR_MAX_RANK];
    int cnt[4];
    for (int i = 0; i < 4; i++)
        if ((cnt[i] = ir_tensor_ints(k, i + 1, v[i], IR_MAX_RANK)) == -1)
            return ir_node_fail(k->diag, IR_ERR_INVALID, k->node, "input %d is too long", i + 1);
    ir_shape out;
    ir_status st = ir_slice_resolve(k->node, &x->shape, v[0], cnt[0], v[1], cnt[1], v[2], cnt[2],
                                    v[3], cnt[3], first, step, &out, k->diag);
    if (st != IR_OK) return st;
    ir_shape_strides(&x->shape, xs);
    view vw = view_of(&k->out[0].shape);
    int64_t base = 0;
    for (int i = 0; i < vw.rank; i++) {
        vw.is[i] = xs[i] * step[i];
        base += first[i] * xs[i];
    }
    size_t es = ir_dtype_size(x->dtype);
    view_copy(k->out[0].data, (const char *)x->data + base * (int64_t)es, es, vw);
    return IR_OK;
}

/* Dims: a dim links when the slice leaves it whole (start 0, step 1, every index): the others
 * pick, shift or reverse indices. */
static int slice_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t v[4][IR_MAX_RANK], first[IR_MAX_RANK], step[IR_MAX_RANK];
    int cnt[4];
    ir_shape out;
    for (int i = 0; i < 4; i++)
        if (ir_const_ints(g, n, i + 1, v[i], IR_MAX_RANK, &cnt[i], NULL) != IR_OK) return 0;
    if (ir_slice_resolve(n, &x->shape, v[0], cnt[0], v[1], cnt[1], v[2], cnt[2], v[3], cnt[3],
                         first, step, &out, NULL) != IR_OK)
        return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++)
        if (first[i] == 0 && step[i] == 1 && out.dims[i] == x->shape.dims[i])
            ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Slice, 3, 5, 1, 1, .flags = IR_OPF_FLOAT16, .infer = slice_infer, .kernel = slice_kernel,
          .grad = ir_grad_Slice, .dims = slice_dims);

/* ---------------------------------------------------------------- Expand, Tile */

static ir_status expand_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t sh[IR_MAX_RANK];
    int cnt;
    ir_status st = ir_const_ints(g, n, 1, sh, IR_MAX_RANK, &cnt, d);
    if (st == IR_OK) st = ir_check_sizes(n, "shape", sh, cnt, d);
    if (st != IR_OK) return st;
    ir_shape want = ir_shape_make(cnt, sh), out;
    char a[160], b[160];
    if (!ir_shape_broadcast(&x->shape, &want, &out))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "cannot expand %s to %s",
                            ir_shape_str(&x->shape, a, sizeof a), ir_shape_str(&want, b, sizeof b));
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

static ir_status expand_kernel(const ir_kernel_ctx *k) {
    view v = view_of(&k->out[0].shape);
    ir_broadcast_strides(&k->in[0].shape, &k->out[0].shape, v.is);
    view_copy(k->out[0].data, k->in[0].data, ir_dtype_size(k->in[0].dtype), v);
    return IR_OK;
}

/* Dims of Expand and Tile: the dims that keep their size (not broadcast, repeated once) link;
 * Expand aligns X to the right, as broadcasting does. */
static int expand_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_dims_out o = ir_dims_begin(l);
    ir_dims_broadcast(g, n, 0, 0, &o);
    return ir_dims_end(&o);
}

IR_OP_DEF(Expand, 2, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = expand_infer,
          .kernel = expand_kernel, .grad = ir_grad_Expand, .dims = expand_dims);

static ir_status tile_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t rep[IR_MAX_RANK];
    int cnt;
    ir_status st = ir_const_ints(g, n, 1, rep, IR_MAX_RANK, &cnt, d);
    if (st != IR_OK) return st;
    if (cnt != x->shape.rank)
        return ir_node_fail(d, IR_ERR_INVALID, n, "%d repeats for rank %d", cnt, x->shape.rank);
    if ((st = ir_check_sizes(n, "repeats", rep, cnt, d)) != IR_OK) return st;
    ir_shape out = x->shape;
    for (int i = 0; i < cnt; i++) out.dims[i] *= rep[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

/* Output dim i is viewed as (repeat, input dim): the repeat has input stride 0. */
static ir_status tile_kernel(const ir_kernel_ctx *k) {
    const ir_shape *xs = &k->in[0].shape, *ys = &k->out[0].shape;
    if (ir_shape_numel(ys) == 0) return IR_OK;
    int64_t is[IR_MAX_RANK], os[IR_MAX_RANK];
    ir_shape_strides(xs, is);
    ir_shape_strides(ys, os);
    view v = {.rank = 2 * xs->rank};
    for (int i = 0; i < xs->rank; i++) {
        v.dims[2 * i] = ys->dims[i] / xs->dims[i];
        v.is[2 * i] = 0;
        v.os[2 * i] = xs->dims[i] * os[i];
        v.dims[2 * i + 1] = xs->dims[i];
        v.is[2 * i + 1] = is[i];
        v.os[2 * i + 1] = os[i];
    }
    view_copy(k->out[0].data, k->in[0].data, ir_dtype_size(k->in[0].dtype), v);
    return IR_OK;
}

static int tile_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_shape *xs = &ir_node_in(g, n, 0)->shape, *ys = &ir_node_out(g, n, 0)->shape;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < xs->rank && xs->rank == ys->rank; i++)
        if (xs->dims[i] > 0 && xs->dims[i] == ys->dims[i]) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Tile, 2, 2, 1, 1, .flags = IR_OPF_FLOAT16, .infer = tile_infer, .kernel = tile_kernel,
          .grad = ir_grad_Tile, .dims = tile_dims);

/* ---------------------------------------------------------------- Pad */

int ir_pad_mode_of(const char *m) {
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    if (!m) return IR_PAD_CONSTANT;
    for (int i = 0; i < 4; i++)
        if (strcmp(m, names[i]) == 0) return i;
    return -1;
}

/* Pads before (pb) and after (pe) each dim from the raw pads (2 * naxes values, all begins
 * then all ends), the optional axes (opset 18) and the mode. */
static ir_status pad_params(const ir_node *n, const ir_shape *in, const int64_t *raw, int nraw,
                            const int64_t *axes, int naxes, int64_t *pb, int64_t *pe,
                            enum ir_pad_mode *mode, ir_diag *d) {
    const char *m = ir_attr_str(n, "mode", "constant");
    int mi = ir_pad_mode_of(m);
    if (mi < 0) return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "mode '%s' is not supported", m);
    *mode = (enum ir_pad_mode)mi;
    int r = in->rank, na = naxes == -2 ? r : naxes;
    if (nraw != 2 * na) return ir_node_fail(d, IR_ERR_INVALID, n, "%d pads for %d axes", nraw, na);
    for (int i = 0; i < r; i++) pb[i] = pe[i] = 0;
    bool seen[IR_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int ax;
        int64_t a = naxes == -2 ? i : axes[i];
        if (!ir_norm_axis(a, r, &ax) || r == 0 || seen[ax])
            return ir_node_fail(d, IR_ERR_INVALID, n, "axis %lld is out of range or repeated",
                                (long long)a);
        seen[ax] = true;
        pb[ax] = raw[i];
        pe[ax] = raw[na + i];
        if (in->dims[ax] + pb[ax] + pe[ax] < 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "pads remove more than axis %d has", ax);
        if (*mode != IR_PAD_CONSTANT && (pb[ax] < 0 || pe[ax] < 0))
            return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                "negative pads are only supported in constant mode");
        if (*mode != IR_PAD_CONSTANT && in->dims[ax] == 0 && pb[ax] + pe[ax] > 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "cannot %s-pad the empty axis %d", m, ax);
    }
    return IR_OK;
}

/* Pads from input 1 (opset 11+) or the `pads` attribute (before). */
static ir_status pad_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
    int nraw, naxes;
    enum ir_pad_mode mode;
    ir_status st = ir_const_ints(g, n, 1, raw, 2 * IR_MAX_RANK, &nraw, d);
    if (st == IR_OK) st = ir_const_ints(g, n, 3, axes, IR_MAX_RANK, &naxes, d);
    if (st != IR_OK) return st;
    if (nraw == -2) {
        const int64_t *p;
        nraw = ir_attr_ints(n, "pads", &p);
        if (nraw < 0 || nraw > 2 * IR_MAX_RANK)
            return ir_node_fail(d, IR_ERR_INVALID, n, "pads are missing or too many");
        memcpy(raw, p, sizeof(int64_t) * (size_t)nraw);
    }
    const ir_value *cv = ir_node_in(g, n, 2);
    if (cv && (cv->dtype != x->dtype || ir_shape_numel(&cv->shape) != 1))
        return ir_node_fail(d, IR_ERR_SHAPE, n, "constant_value must be one %s",
                            ir_dtype_name(x->dtype));
    st = pad_params(n, &x->shape, raw, nraw, axes, naxes, pb, pe, &mode, d);
    if (st != IR_OK) return st;
    ir_shape out = x->shape;
    for (int i = 0; i < out.rank; i++) out.dims[i] += pb[i] + pe[i];
    ir_set_out(g, n, 0, x->dtype, &out);
    return IR_OK;
}

int64_t ir_pad_source(int64_t o, int64_t pb, int64_t len, enum ir_pad_mode mode) {
    int64_t i = o - pb;
    if (mode == IR_PAD_WRAP) { /* the input repeated periodically, as numpy's wrap */
        i %= len;
        return i < 0 ? i + len : i;
    }
    if (mode == IR_PAD_EDGE || len == 1) return i < 0 ? 0 : i >= len ? len - 1 : i;
    int64_t period = 2 * (len - 1); /* reflect without repeating the edge, as numpy */
    i %= period;
    if (i < 0) i += period;
    return i < len ? i : period - i;
}

/* The interior (the input, cropped by negative pads) is copied first. Then, for each dim d
 * from the innermost out, every border slab (dims before d inside the interior, dim d in the
 * border, dims after d complete) is one contiguous block of os[d] elements: filled with the
 * constant, or copied from the block of the source index, which is already complete. So every
 * output element is written once, in large runs. */
static ir_status pad_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *x = &k->in[0], *y = &k->out[0];
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
    int64_t xs[IR_MAX_RANK], lo[IR_MAX_RANK], hi[IR_MAX_RANK];
    enum ir_pad_mode mode;
    int nraw = ir_tensor_ints(k, 1, raw, 2 * IR_MAX_RANK),
        naxes = ir_tensor_ints(k, 3, axes, IR_MAX_RANK);
    if (nraw == -2) {
        const int64_t *p;
        nraw = ir_attr_ints(k->node, "pads", &p);
        if (nraw > 0 && nraw <= 2 * IR_MAX_RANK) memcpy(raw, p, sizeof(int64_t) * (size_t)nraw);
    }
    ir_status st = pad_params(k->node, &x->shape, raw, nraw, axes, naxes, pb, pe, &mode, k->diag);
    if (st != IR_OK) return st;
    size_t es = ir_dtype_size(x->dtype);
    unsigned char cval[8] = {0};
    if (k->n_in > 2 && k->in[2].data) {
        memcpy(cval, k->in[2].data, es);
    } else if (k->n_in <= 1) { /* before opset 11: a float attribute */
        ir_store_f64(cval, x->dtype, 0, ir_attr_float(k->node, "value", 0.0f));
    }
    int r = y->shape.rank;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return IR_OK;
    }
    ir_shape_strides(&x->shape, xs);
    view v = view_of(&y->shape);
    int64_t src = 0, dst = 0;
    for (int i = 0; i < r; i++) {
        lo[i] = pb[i] > 0 ? pb[i] : 0;
        hi[i] = x->shape.dims[i] + pb[i];
        hi[i] = hi[i] < y->shape.dims[i] ? hi[i] : y->shape.dims[i];
        if (hi[i] < lo[i]) hi[i] = lo[i];
        v.dims[i] = hi[i] - lo[i];
        v.is[i] = xs[i];
        src += (lo[i] - pb[i]) * xs[i];
        dst += lo[i] * v.os[i];
    }
    char *out = y->data;
    view_copy(out + dst * (int64_t)es, (const char *)x->data + src * (int64_t)es, es, v);
    for (int dd = r - 1; dd >= 0; dd--) {
        int64_t outer = 1, border = y->shape.dims[dd] - (hi[dd] - lo[dd]);
        for (int i = 0; i < dd; i++) outer *= hi[i] - lo[i];
        if (!outer || !border) continue;
        size_t block = (size_t)v.os[dd] * es;
        IR_PARALLEL_FOR(outer * border * v.os[dd] >= IR_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            int64_t base = 0, rem = o;
            for (int i = dd - 1; i >= 0; i--) {
                int64_t ext = hi[i] - lo[i];
                base += (lo[i] + rem % ext) * v.os[i];
                rem /= ext;
            }
            char *row = out + base * (int64_t)es;
            for (int64_t j = 0; j < y->shape.dims[dd]; j++) {
                if (j == lo[dd]) j = hi[dd];
                if (j >= y->shape.dims[dd]) break;
                char *blk = row + (size_t)j * block;
                if (mode == IR_PAD_CONSTANT)
                    ir_fill_elems(blk, v.os[dd], cval, es);
                else
                    memcpy(
                        blk,
                        row + (size_t)(ir_pad_source(j, pb[dd], x->shape.dims[dd], mode) + pb[dd]) *
                                  block,
                        block);
            }
        }
    }
    return IR_OK;
}

/* Dims: the dims padded by nothing on either side link (any mode reads them in place). */
static int pad_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *x = ir_node_in(g, n, 0);
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
    int nraw, naxes;
    enum ir_pad_mode mode;
    if (ir_const_ints(g, n, 1, raw, 2 * IR_MAX_RANK, &nraw, NULL) != IR_OK ||
        ir_const_ints(g, n, 3, axes, IR_MAX_RANK, &naxes, NULL) != IR_OK)
        return 0;
    if (nraw == -2) {
        const int64_t *p;
        nraw = ir_attr_ints(n, "pads", &p);
        if (nraw < 0 || nraw > 2 * IR_MAX_RANK) return 0;
        memcpy(raw, p, sizeof(int64_t) * (size_t)nraw);
    }
    if (pad_params(n, &x->shape, raw, nraw, axes, naxes, pb, pe, &mode, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    for (int i = 0; i < x->shape.rank; i++)
        if (pb[i] == 0 && pe[i] == 0) ir_dims_keep(&o, 0, i, 0, i);
    return ir_dims_end(&o);
}

IR_OP_DEF(Pad, 1, 4, 1, 1, .flags = IR_OPF_FLOAT16, .infer = pad_infer, .kernel = pad_kernel,
          .grad = ir_grad_Pad, .dims = pad_dims);
