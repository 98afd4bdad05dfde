/* pet-box.c - box propagation (PET §5.2 step 1): splitting points per dimension of every value of
 * a compiled program, from its inputs' points and the step that writes it.
 *
 * A box is a region where every element has the same summation structure and every index map
 * from the element to the input elements it reads is affine in the element's position (Theorem 1
 * needs both). Variables and literals are one box. Per step:
 *  - element-wise and scale: the points of each input dim aligned with the output dim (a
 *    broadcast dim has none);
 *  - copies (transpose, slice, concat, split, pad, expand, tile): the region's bounds, and each
 *    input point mapped through the index map (where the input index crosses it); a tile also
 *    splits at every repeat, where the index wraps;
 *  - reshape: dims grouped by equal products; within a group the dims are merged into one linear
 *    index (merging an outer dim of size a with an inner one of size b > 1 splits at every row
 *    start i*b, since j -> (j / b, j % b) is affine only within a row) and split into the output
 *    dims (a point s of the linear index at (i0, k0) splits the outer dim at i0 and, when k0 > 0,
 *    at i0 + 1 and the inner dim at k0);
 *  - products and convolutions: batch/row/column dims keep their input's points; summed dims add
 *    none (every output sums all of them alike); output channels split at group boundaries (the
 *    input channels an output reads jump there); a spatial dim splits wherever a tap's input
 *    position crosses an input point or the input's bounds 0 and in (the zero padding): output o
 *    with o*s - pb + t*d >= B first at o = ceil((B + pb - t*d) / s). A 3x3 conv with pads 1
 *    thus has points {1, in-1} per spatial dim: the 9 boxes of the paper's figure 4. A strided
 *    transposed convolution splits at every position (which taps hit depends on o mod s);
 *  - average pooling also at the clip of the padded window (in + pe), where its divisor changes;
 *  - reductions: the kept dims' points; prefix sums: every position along the axis (each sums a
 *    different range).
 * Points are collected unsorted and sorted/deduplicated when a value is first read or at the end;
 * a value's writers all come before its readers (steps are topological). */
#include "pet-impl.h"

typedef struct bx {
    const pet_prog *p;
    pet_splits *sp;
    int (*cap)[IR_MAX_RANK];
    bool *dirty;
    bool oom;
} bx;

static void add(bx *b, int v, int dim, int64_t x) {
    pet_splits *s = &b->sp[v];
    if (x <= 0 || x >= s->dims[dim]) return;
    if (s->n[dim] == b->cap[v][dim]) {
        int cap = b->cap[v][dim] ? 2 * b->cap[v][dim] : 8;
        int64_t *na = realloc(s->at[dim], sizeof(int64_t) * (size_t)cap);
        if (!na) {
            b->oom = true;
            return;
        }
        s->at[dim] = na;
        b->cap[v][dim] = cap;
    }
    s->at[dim][s->n[dim]++] = x;
    b->dirty[v] = true;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void finalize(bx *b, int v) {
    if (!b->dirty[v]) return;
    pet_splits *s = &b->sp[v];
    for (int d = 0; d < s->rank; d++) {
        if (s->n[d] < 2) continue;
        qsort(s->at[d], (size_t)s->n[d], sizeof(int64_t), cmp64);
        int k = 1;
        for (int i = 1; i < s->n[d]; i++)
            if (s->at[d][i] != s->at[d][k - 1]) s->at[d][k++] = s->at[d][i];
        s->n[d] = k;
    }
    b->dirty[v] = false;
}

/* The final points of dim `dim` of value v. */
static int pts(bx *b, int v, int dim, const int64_t **at) {
    finalize(b, v);
    *at = b->sp[v].at[dim];
    return b->sp[v].n[dim];
}

static void copy_dim(bx *b, int from, int fdim, int to, int tdim) {
    const int64_t *at;
    int n = pts(b, from, fdim, &at);
    for (int i = 0; i < n; i++) add(b, to, tdim, at[i]);
}

/* floor(a / s) for s > 0 and any a. */
static int64_t floor_div(int64_t a, int64_t s) {
    return a >= 0 ? a / s : -((-a + s - 1) / s);
}

/* Spatial dim rule of convolutions and pools: output o of dim odim (size out) reads input
 * position o*s - pb + t*d for taps t in [0, ntaps); it splits where that crosses one of the
 * boundaries: 0, `in`, the extra one (when > 0) and the input's points along idim. */
static void tap_rule(bx *b, int x, int idim, int y, int odim, int64_t in, int64_t extra, int64_t s,
                     int64_t d, int64_t pb, int64_t ntaps) {
    const int64_t *at;
    int n = pts(b, x, idim, &at);
    for (int i = -3; i < n; i++) {
        int64_t B = i == -3 ? 0 : i == -2 ? in : i == -1 ? extra : at[i];
        if (i == -1 && extra <= 0) continue;
        for (int64_t t = 0; t < ntaps; t++) add(b, y, odim, floor_div(B + pb - t * d + s - 1, s));
    }
}

static void rule_copy(bx *b, const pet_step *st) {
    const pet_copy *cp = &st->u.copy;
    int x = st->in[0], y = st->out;
    for (int i = 0; i < b->sp[y].rank; i++) {
        int64_t o0 = cp->ostart[i], ext = cp->ext[i];
        add(b, y, i, o0);
        add(b, y, i, o0 + ext);
        int sd = cp->src_dim[i];
        if (sd < 0 || cp->src_step[i] == 0 || ext == 0) continue;
        const int64_t *at;
        int n = pts(b, x, sd, &at);
        int64_t a = cp->src_start[i], t = cp->src_step[i], m = cp->src_mod[i];
        if (m > 0) { /* Tile: every repeat starts a box, and the points repeat */
            for (int64_t k = 0; k * m < ext; k++) {
                add(b, y, i, o0 + k * m);
                for (int j = 0; j < n; j++) add(b, y, i, o0 + k * m + at[j]);
            }
            continue;
        }
        for (int j = 0; j < n; j++) {
            /* the first c at which the input index a + c*t is on the other side of point at[j] */
            int64_t c = t > 0 ? floor_div(at[j] - a + t - 1, t) : floor_div(a - at[j], -t) + 1;
            if (c > 0 && c < ext) add(b, y, i, o0 + c);
        }
    }
}

/* A merged or split group of a reshape. pts_in: the linear index's points (size n). */
typedef struct ivec {
    int64_t *a;
    int n, cap;
    bool oom;
} ivec;

static void ipush(ivec *v, int64_t x) {
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 16;
        int64_t *na = realloc(v->a, sizeof(int64_t) * (size_t)cap);
        if (!na) {
            v->oom = true;
            return;
        }
        v->a = na;
        v->cap = cap;
    }
    v->a[v->n++] = x;
}

static void iuniq(ivec *v) {
    if (v->n < 2) return;
    qsort(v->a, (size_t)v->n, sizeof(int64_t), cmp64);
    int k = 1;
    for (int i = 1; i < v->n; i++)
        if (v->a[i] != v->a[k - 1]) v->a[k++] = v->a[i];
    v->n = k;
}

static void reshape_group(bx *b, int x, const int *gi, int ni, int y, const int *go, int no) {
    const ir_shape *is = &b->p->values[x].shape, *os = &b->p->values[y].shape;
    if (ni == 1 && no == 1) {
        copy_dim(b, x, gi[0], y, go[0]);
        return;
    }
    ivec cur = {0}, nx = {0};
    const int64_t *at;
    int n = pts(b, x, gi[ni - 1], &at);
    for (int i = 0; i < n; i++) ipush(&cur, at[i]);
    int64_t len = is->dims[gi[ni - 1]];
    for (int k = ni - 2; k >= 0; k--) { /* merge: every row start is a point */
        int64_t a = is->dims[gi[k]];
        nx.n = 0;
        for (int64_t r = 0; r < a; r++) {
            if (r > 0) ipush(&nx, r * len);
            for (int i = 0; i < cur.n; i++) ipush(&nx, r * len + cur.a[i]);
        }
        ivec t = cur;
        cur = nx;
        nx = t;
        len *= a;
    }
    for (int k = 0; k < no - 1; k++) { /* split off the outer dim go[k] */
        int64_t q = os->dims[go[k]], rest = len / q;
        nx.n = 0;
        for (int i = 0; i < cur.n; i++) {
            int64_t i0 = cur.a[i] / rest, k0 = cur.a[i] % rest;
            add(b, y, go[k], i0);
            if (k0) {
                add(b, y, go[k], i0 + 1);
                ipush(&nx, k0);
            }
        }
        iuniq(&nx);
        ivec t = cur;
        cur = nx;
        nx = t;
        len = rest;
    }
    for (int i = 0; i < cur.n; i++) add(b, y, go[no - 1], cur.a[i]);
    if (cur.oom || nx.oom) b->oom = true;
    free(cur.a);
    free(nx.a);
}

static void rule_reshape(bx *b, const pet_step *st) {
    int x = st->in[0], y = st->out;
    const ir_shape *is = &b->p->values[x].shape, *os = &b->p->values[y].shape;
    if (b->p->values[y].numel == 0) return;
    int ii[IR_MAX_RANK], oi[IR_MAX_RANK], ni = 0, no = 0;
    for (int i = 0; i < is->rank; i++)
        if (is->dims[i] > 1) ii[ni++] = i;
    for (int i = 0; i < os->rank; i++)
        if (os->dims[i] > 1) oi[no++] = i;
    int i = 0, j = 0;
    while (i < ni && j < no) { /* groups of dims with equal products */
        int i0 = i, j0 = j;
        int64_t pi = is->dims[ii[i++]], po = os->dims[oi[j++]];
        while (pi != po) {
            if (pi < po && i < ni)
                pi *= is->dims[ii[i++]];
            else if (po < pi && j < no)
                po *= os->dims[oi[j++]];
            else
                return; /* not a reshape of equal element counts: compile prevents it */
        }
        reshape_group(b, x, ii + i0, i - i0, y, oi + j0, j - j0);
    }
}

static void rule_conv(bx *b, const pet_step *st) {
    const pet_conv *cg = &st->u.conv;
    int x = st->in[0], w = st->in[1], y = st->out;
    copy_dim(b, x, 0, y, 0);
    int64_t Mg = cg->M / cg->group;
    for (int64_t g = 1; g < cg->group; g++) add(b, y, 1, g * Mg);
    if (st->kind == PET_AVGPOOL) {
        copy_dim(b, x, 1, y, 1);
    } else if (st->kind == PET_CONV) {
        copy_dim(b, w, 0, y, 1);
    } else { /* ConvTranspose: W is [C, M/group, k...]; its dim 1 repeats in every group */
        const int64_t *at;
        int n = pts(b, w, 1, &at);
        for (int64_t g = 0; g < cg->group; g++)
            for (int i = 0; i < n; i++) add(b, y, 1, g * Mg + at[i]);
    }
    for (int i = 0; i < cg->S; i++) {
        int j = 3 - cg->S + i;
        if (st->kind == PET_CONVT) {
            if (cg->s[j] > 1) {
                for (int64_t o = 1; o < cg->out[j]; o++) add(b, y, 2 + i, o);
                continue;
            }
            /* output o receives input o + pb - t*d: it crosses B at o = B - pb + t*d */
            const int64_t *at;
            int n = pts(b, x, 2 + i, &at);
            for (int q = -2; q < n; q++) {
                int64_t B = q == -2 ? 0 : q == -1 ? cg->in[j] : at[q];
                for (int64_t t = 0; t < cg->k[j]; t++)
                    add(b, y, 2 + i, B - cg->pb[j] + t * cg->d[j]);
            }
        } else if (st->kind == PET_AVGPOOL) {
            /* tap k stands for the window's end, clipped at in + pe (the divisor's clip) */
            tap_rule(b, x, 2 + i, y, 2 + i, cg->in[j], cg->in[j] + cg->pe[j], cg->s[j], 1,
                     cg->pb[j], cg->k[j] + 1);
        } else {
            tap_rule(b, x, 2 + i, y, 2 + i, cg->in[j], 0, cg->s[j], cg->d[j], cg->pb[j], cg->k[j]);
        }
    }
}

static void rule_step(bx *b, const pet_step *st) {
    int x = st->in[0], y = st->out, r = b->sp[y].rank;
    switch (st->kind) {
    case PET_ZERO: break;
    case PET_COPY: rule_copy(b, st); break;
    case PET_RESHAPE: rule_reshape(b, st); break;
    case PET_SCALE:
        for (int i = 0; i < r; i++) copy_dim(b, x, i, y, i);
        break;
    case PET_BINARY:
        for (int i = 0; i < r; i++) {
            if (st->u.bin.a_dim[i] >= 0) copy_dim(b, x, st->u.bin.a_dim[i], y, i);
            if (st->u.bin.b_dim[i] >= 0) copy_dim(b, st->in[1], st->u.bin.b_dim[i], y, i);
        }
        break;
    case PET_MATMUL: {
        const pet_matmul *mm = &st->u.mm;
        for (int i = 0; i < mm->nb; i++) {
            if (mm->a_bdim[i] >= 0) copy_dim(b, x, mm->a_bdim[i], y, i);
            if (mm->b_bdim[i] >= 0) copy_dim(b, st->in[1], mm->b_bdim[i], y, i);
        }
        if (mm->a_mdim >= 0) copy_dim(b, x, mm->a_mdim, y, mm->o_mdim);
        if (mm->b_ndim >= 0) copy_dim(b, st->in[1], mm->b_ndim, y, mm->o_ndim);
        break;
    }
    case PET_CONV:
    case PET_CONVT:
    case PET_AVGPOOL: rule_conv(b, st); break;
    case PET_REDUCE:
        for (int i = 0; i < st->u.red.rank; i++)
            if (!st->u.red.reduced[i] && st->u.red.out_dim[i] >= 0)
                copy_dim(b, x, i, y, st->u.red.out_dim[i]);
        break;
    case PET_CUMSUM:
        for (int i = 0; i < r; i++) {
            if (i != st->u.cum.axis) {
                copy_dim(b, x, i, y, i);
                continue;
            }
            for (int64_t o = 1; o < b->sp[y].dims[i]; o++) add(b, y, i, o);
        }
        break;
    default: IR_ASSERT(!"unknown step kind");
    }
}

ir_status pet_prog_boxes(const pet_prog *p, pet_splits **out, ir_diag *d) {
    *out = NULL;
    bx b = {.p = p};
    b.sp = calloc((size_t)p->n_values + 1, sizeof *b.sp);
    b.cap = calloc((size_t)p->n_values + 1, sizeof *b.cap);
    b.dirty = calloc((size_t)p->n_values + 1, sizeof *b.dirty);
    if (!b.sp || !b.cap || !b.dirty) goto oom;
    for (int v = 0; v < p->n_values; v++) {
        b.sp[v].rank = p->values[v].shape.rank;
        for (int i = 0; i < b.sp[v].rank; i++) b.sp[v].dims[i] = p->values[v].shape.dims[i];
    }
    for (int si = 0; si < p->n_steps && !b.oom; si++) rule_step(&b, &p->steps[si]);
    if (b.oom) goto oom;
    for (int v = 0; v < p->n_values; v++) finalize(&b, v);
    free(b.cap);
    free(b.dirty);
    *out = b.sp;
    return IR_OK;
oom:
    pet_splits_free(b.sp, b.sp ? p->n_values : 0);
    free(b.cap);
    free(b.dirty);
    return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory propagating boxes");
}

void pet_splits_free(pet_splits *s, int n) {
    if (!s) return;
    for (int v = 0; v < n; v++)
        for (int i = 0; i < IR_MAX_RANK; i++) free(s[v].at[i]);
    free(s);
}

int64_t pet_splits_nboxes(const pet_splits *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i] ? s->n[i] + 1 : 0;
    return n;
}

void pet_splits_box(const pet_splits *s, int64_t idx, pet_box *b) {
    memset(b, 0, sizeof *b); /* dims past the rank too: boxes compare by their bytes */
    b->rank = s->rank;
    for (int i = s->rank - 1; i >= 0; i--) {
        int64_t k = idx % (s->n[i] + 1);
        idx /= s->n[i] + 1;
        b->lo[i] = k == 0 ? 0 : s->at[i][k - 1];
        b->hi[i] = k == s->n[i] ? s->dims[i] : s->at[i][k];
    }
}

int64_t pet_splits_box_of(const pet_splits *s, const int64_t *c) {
    int64_t idx = 0;
    for (int i = 0; i < s->rank; i++) {
        int lo = 0, hi = s->n[i]; /* the number of points <= c[i] */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (s->at[i][mid] <= c[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        idx = idx * (s->n[i] + 1) + lo;
    }
    return idx;
}
