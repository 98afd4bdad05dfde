/* pet-region.c - the original program rebuilt on a region of one of its values (PET paper §5.2
 * step 3: "a correction kernel performs the original program's ops, on the failed boxes only"):
 * walking from the value back to the program's inputs, each op says which region of each input
 * the region of its output reads, and is emitted again on those regions; the inputs are cut
 * with Slice. This file holds the machinery (names, emission, memo, slices) and the data
 * movement and element-wise ops; pet-region-compute.c the ops that compute (conv, matmul,
 * reductions).
 *
 * Invariants: pc_region's result has exactly the region's shape (checked, IR_ERR_INTERNAL
 * otherwise); a region is only ever read inside the value it names; an op whose input region
 * is not a box under its index map (a Reshape that mixes rows) is refused, never approximated. */
#include "pet-correct-impl.h"

#include <stdio.h>

/* ---------------------------------------------------------------- boxes */

void pc_box_full(const ir_shape *s, pet_box *b) {
    memset(b, 0, sizeof *b);
    b->rank = s->rank;
    for (int i = 0; i < s->rank; i++) b->hi[i] = s->dims[i];
}

bool pc_box_is_full(const pet_box *b, const ir_shape *s) {
    for (int i = 0; i < s->rank; i++)
        if (b->lo[i] != 0 || b->hi[i] != s->dims[i]) return false;
    return true;
}

ir_shape pc_box_shape(const pet_box *b) {
    ir_shape s = {.rank = b->rank};
    for (int i = 0; i < b->rank; i++) s.dims[i] = b->hi[i] - b->lo[i];
    return s;
}

static bool box_eq(const pet_box *a, const pet_box *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i]) return false;
    return true;
}

void pc_bcast_box(const ir_shape *is, const ir_shape *os, const pet_box *R, pet_box *B) {
    int off = os->rank - is->rank;
    memset(B, 0, sizeof *B);
    B->rank = is->rank;
    for (int i = 0; i < is->rank; i++) {
        bool bcast = is->dims[i] == 1 && os->dims[off + i] != 1;
        B->lo[i] = bcast ? 0 : R->lo[off + i];
        B->hi[i] = bcast ? 1 : R->hi[off + i];
    }
}

/* ---------------------------------------------------------------- emission */

/* buf (room for 300 bytes) made unique among h's values by a "#k" suffix, copied into h. */
static const char *unique_name(pc_ctx *c, char *buf) {
    size_t len = strlen(buf);
    for (int k = 1; ir_graph_find_value(c->h, buf) >= 0; k++)
        snprintf(buf + len, 300 - len, "#%d", k);
    return ir_graph_strdup(c->h, buf);
}

const char *pc_name(pc_ctx *c, const char *base) {
    char buf[300];
    snprintf(buf, 256, "pet.c%d.%.200s", c->corr, base);
    return unique_name(c, buf);
}

static ir_status nomem(pc_ctx *c) {
    return ir_diag_set(c->d, IR_ERR_NOMEM, "PET: out of memory building a correction");
}

int pc_ints(pc_ctx *c, int n, const int64_t *vals) {
    ir_shape s = {.rank = 1, .dims = {n}};
    const char *nm = pc_name(c, "ints");
    int v = nm ? ir_graph_add_value(c->h, nm, IR_I64, &s) : -1;
    ir_blob *b = v >= 0 ? ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    if (!b) return -1;
    if (n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    c->h->values[v].blob = b;
    c->h->values[v].flags = IR_VF_CONST;
    return v;
}

int pc_emit(pc_ctx *c, ir_op_kind op, const char *hint, int n_in, const int *in, int n_out,
            int *out, int n_attrs, const ir_attr *attrs, ir_status *st) {
    const char *nn = pc_name(c, hint);
    char vn[300];
    *st = IR_OK;
    for (int k = 0; k < n_out && nn; k++) {
        snprintf(vn, 256, "%.240s.%d", nn, k);
        const char *v = unique_name(c, vn);
        out[k] = v ? ir_graph_add_value(c->h, v, IR_F32, NULL) : -1;
        if (out[k] < 0) nn = NULL;
    }
    int ni = nn ? ir_graph_add_node(c->h, op, nn, n_in, in, n_out, out, n_attrs, attrs) : -1;
    if (ni < 0) {
        *st = nomem(c);
        return -1;
    }
    ir_diag d2 = {{0}};
    ir_status rc = ir_node_infer(c->h, &c->h->nodes[ni], &d2);
    if (rc != IR_OK) {
        *st = ir_diag_set(c->d, rc == IR_ERR_NOMEM ? rc : IR_ERR_INTERNAL, "PET correction: %s",
                          d2.msg);
        return -1;
    }
    return ni;
}

/* A deep copy of attribute a into h's arena; false when out of memory. */
static bool copy_attr(ir_graph *h, const ir_attr *a, ir_attr *o) {
    *o = *a;
    o->name = ir_graph_strdup(h, a->name);
    if (a->s && !(o->s = ir_graph_strdup(h, a->s))) return false;
    if (a->ints) {
        o->ints = ir_graph_alloc(h, sizeof(int64_t) * (size_t)(a->n ? a->n : 1));
        if (!o->ints) return false;
        if (a->n) memcpy(o->ints, a->ints, sizeof(int64_t) * (size_t)a->n);
    }
    if (a->floats) {
        o->floats = ir_graph_alloc(h, sizeof(float) * (size_t)(a->n ? a->n : 1));
        if (!o->floats) return false;
        if (a->n) memcpy(o->floats, a->floats, sizeof(float) * (size_t)a->n);
    }
    if (a->strings) {
        o->strings = ir_graph_alloc(h, sizeof(char *) * (size_t)(a->n ? a->n : 1));
        if (!o->strings) return false;
        for (int k = 0; k < a->n; k++)
            if (!(o->strings[k] = ir_graph_strdup(h, a->strings[k]))) return false;
    }
    return o->name != NULL;
}

ir_attr *pc_copy_attrs(ir_graph *dst, const ir_node *n) {
    ir_attr *a = ir_graph_alloc(dst, sizeof(ir_attr) * (size_t)(n->n_attrs + 1));
    for (int k = 0; a && k < n->n_attrs; k++)
        if (!copy_attr(dst, &n->attrs[k], &a[k])) return NULL;
    return a;
}

int pc_emit_like(pc_ctx *c, const ir_node *n, int n_in, const int *in, int n_out, int *out,
                 const char *const *skip, int n_extra, const ir_attr *extra, ir_status *st) {
    ir_attr *attrs = ir_graph_alloc(c->h, sizeof(ir_attr) * (size_t)(n->n_attrs + n_extra + 1));
    int na = 0;
    if (!attrs) {
        *st = nomem(c);
        return -1;
    }
    for (int a = 0; a < n->n_attrs; a++) {
        bool skipped = false;
        for (int k = 0; skip && skip[k] && !skipped; k++)
            skipped = strcmp(skip[k], n->attrs[a].name) == 0;
        if (skipped) continue;
        if (!copy_attr(c->h, &n->attrs[a], &attrs[na++])) {
            *st = nomem(c);
            return -1;
        }
    }
    for (int a = 0; a < n_extra; a++)
        if (!copy_attr(c->h, &extra[a], &attrs[na++])) {
            *st = nomem(c);
            return -1;
        }
    return pc_emit(c, n->op, n->name, n_in, in, n_out, out, na, attrs, st);
}

/* ---------------------------------------------------------------- inputs and parameters */

ir_status pc_input(pc_ctx *c, int pv, int *res) {
    if (c->vmap[pv] >= 0) {
        *res = c->vmap[pv];
        return IR_OK;
    }
    const ir_value *sv = &c->prog->values[pv];
    int hv = ir_graph_find_value(c->h, sv->name);
    if (hv >= 0) {
        const ir_value *x = &c->h->values[hv];
        /* the mutant reads the same variable: share it; a computed value of that name would
         * make names ambiguous for the verifier and for pet_apply */
        if (x->producer >= 0 || x->dtype != sv->dtype || !ir_shape_eq(&x->shape, &sv->shape))
            return ir_diag_set(c->d, IR_ERR_INVALID,
                               "PET correction: the mutant's value '%s' is not the program's "
                               "input of that name",
                               sv->name);
    } else {
        hv = ir_graph_add_value(c->h, sv->name, sv->dtype, &sv->shape);
        if (hv < 0) return nomem(c);
        ir_value *x = &c->h->values[hv];
        x->flags = sv->flags & ~(unsigned)(IR_VF_INPUT | IR_VF_OUTPUT);
        if (sv->flags & IR_VF_INPUT) {
            ir_graph_add_input(c->h, hv);
        } else {
            x->blob = ir_blob_ref(sv->blob);
        }
    }
    c->vmap[pv] = hv;
    *res = hv;
    return IR_OK;
}

ir_status pc_param(pc_ctx *c, const ir_node *n, int k, int *res) {
    *res = -1;
    if (k >= n->n_in || n->in[k] < 0) return IR_OK;
    const ir_value *v = &c->prog->values[n->in[k]];
    if (v->producer >= 0)
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "correction: parameter input %d ('%s') is computed", k, v->name);
    return pc_input(c, n->in[k], res);
}

ir_status pc_const_ints(pc_ctx *c, const ir_node *n, int i, int64_t *out, int max, int *cnt) {
    *cnt = -2;
    if (i >= n->n_in || n->in[i] < 0) return IR_OK;
    const ir_value *v = &c->prog->values[n->in[i]];
    int64_t k = ir_shape_numel(&v->shape);
    if (!v->blob || ir_dtype_is_float(v->dtype) || k > max)
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "correction: input %d ('%s') is not a small integer constant", i,
                            v->name);
    for (int64_t e = 0; e < k; e++) out[e] = ir_load_i64(ir_value_data(v), v->dtype, e);
    *cnt = (int)k;
    return IR_OK;
}

ir_status pc_note_conv(pc_ctx *c, int ni) {
    if (c->n_convs == c->cap_convs) {
        int cap = c->cap_convs ? 2 * c->cap_convs : 16;
        int *nc = realloc(c->convs, sizeof(int) * (size_t)cap);
        if (!nc) return nomem(c);
        c->convs = nc;
        c->cap_convs = cap;
    }
    c->convs[c->n_convs++] = ni;
    return IR_OK;
}

ir_status pc_slice(pc_ctx *c, int x, const pet_box *B, int *res) {
    const ir_shape *xs = &c->h->values[x].shape;
    if (pc_box_is_full(B, xs)) {
        *res = x;
        return IR_OK;
    }
    int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK];
    int n = 0;
    for (int i = 0; i < xs->rank; i++)
        if (B->lo[i] != 0 || B->hi[i] != xs->dims[i]) {
            st[n] = B->lo[i];
            en[n] = B->hi[i];
            ax[n++] = i;
        }
    int in[4] = {x, pc_ints(c, n, st), pc_ints(c, n, en), pc_ints(c, n, ax)};
    if (in[1] < 0 || in[2] < 0 || in[3] < 0) return nomem(c);
    ir_status rc;
    char hint[256];
    snprintf(hint, sizeof hint, "%.200s.slice", c->h->values[x].name);
    return pc_emit(c, IR_OP_Slice, hint, 4, in, 1, res, 0, NULL, &rc) < 0 ? rc : IR_OK;
}

/* ---------------------------------------------------------------- data movement */

static ir_status unsupported(pc_ctx *c, const ir_node *n, const char *why) {
    return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "correction: %s", why);
}

/* Element-wise ops with numpy broadcasting: each input on the box it broadcasts to R. */
static ir_status r_elementwise(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *os = &c->prog->values[n->out[0]].shape;
    int *in = malloc(sizeof(int) * (size_t)(n->n_in ? n->n_in : 1));
    if (!in) return nomem(c);
    ir_status st = IR_OK;
    for (int i = 0; i < n->n_in && st == IR_OK; i++) {
        pet_box B;
        pc_bcast_box(&c->prog->values[n->in[i]].shape, os, R, &B);
        st = pc_region(c, n->in[i], &B, &in[i]);
    }
    if (st == IR_OK) pc_emit_like(c, n, n->n_in, in, 1, res, NULL, 0, NULL, &st);
    free(in);
    return st;
}

static ir_status r_transpose(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *is = &c->prog->values[n->in[0]].shape;
    int r = is->rank;
    int64_t perm[IR_MAX_RANK];
    const int64_t *pv;
    int np = ir_attr_ints(n, "perm", &pv);
    if (np >= 0 && np != r) return unsupported(c, n, "perm does not match the rank");
    pet_box B = {.rank = r};
    for (int i = 0; i < r; i++) {
        perm[i] = np < 0 ? r - 1 - i : pv[i];
        B.lo[perm[i]] = R->lo[i];
        B.hi[perm[i]] = R->hi[i];
    }
    int x;
    ir_status st = pc_region(c, n->in[0], &B, &x);
    if (st != IR_OK) return st;
    ir_attr a = {.name = "perm", .type = IR_ATTR_INTS, .n = r, .ints = perm};
    static const char *const skip[] = {"perm", NULL};
    return pc_emit_like(c, n, 1, &x, 1, res, skip, 1, &a, &st) < 0 ? st : IR_OK;
}

/* The box of shape is holding the elements that box R of shape os holds (same elements in
 * row-major order, a reshape), when they form one; false otherwise. Dims are grouped where the
 * prefix products of both shapes meet (size-1 dims aside); a group whose region is whole or of
 * one dim on each side maps directly, any other is enumerated and accepted when its bounding
 * box holds no more elements than the region. */
static bool reshape_box(const ir_shape *is, const ir_shape *os, const pet_box *R, pet_box *B) {
    int ia[IR_MAX_RANK], oa[IR_MAX_RANK], ni = 0, no = 0;
    memset(B, 0, sizeof *B);
    B->rank = is->rank;
    for (int i = 0; i < is->rank; i++) {
        B->hi[i] = 1;
        if (is->dims[i] > 1) ia[ni++] = i;
    }
    for (int j = 0; j < os->rank; j++)
        if (os->dims[j] > 1) oa[no++] = j;
    int i = 0, j = 0;
    while (i < ni && j < no) {
        int i0 = i, j0 = j;
        int64_t pi = is->dims[ia[i]], pj = os->dims[oa[j]];
        while (pi != pj) {
            if (pi < pj) {
                if (++i >= ni) return false;
                pi *= is->dims[ia[i]];
            } else {
                if (++j >= no) return false;
                pj *= os->dims[oa[j]];
            }
        }
        bool full = true;
        int64_t count = 1;
        for (int q = j0; q <= j; q++) {
            full = full && R->lo[oa[q]] == 0 && R->hi[oa[q]] == os->dims[oa[q]];
            count *= R->hi[oa[q]] - R->lo[oa[q]];
        }
        if (full || (i == i0 && j == j0)) {
            for (int p = i0; p <= i; p++) {
                B->lo[ia[p]] = full ? 0 : R->lo[oa[j0]];
                B->hi[ia[p]] = full ? is->dims[ia[p]] : R->hi[oa[j0]];
            }
        } else {
            if (count > (1 << 22)) return false;
            int64_t mn[IR_MAX_RANK], mx[IR_MAX_RANK], c[IR_MAX_RANK];
            for (int p = i0; p <= i; p++) mn[p] = INT64_MAX, mx[p] = -1;
            for (int q = j0; q <= j; q++) c[q] = R->lo[oa[q]];
            for (int64_t e = 0; e < count; e++) {
                int64_t lin = 0;
                for (int q = j0; q <= j; q++) lin = lin * os->dims[oa[q]] + c[q];
                for (int p = i; p >= i0; p--) {
                    int64_t x = lin % is->dims[ia[p]];
                    lin /= is->dims[ia[p]];
                    if (x < mn[p]) mn[p] = x;
                    if (x > mx[p]) mx[p] = x;
                }
                for (int q = j; q >= j0; q--) { /* the next coords of the region, row-major */
                    if (++c[q] < R->hi[oa[q]]) break;
                    c[q] = R->lo[oa[q]];
                }
            }
            int64_t bb = 1;
            for (int p = i0; p <= i; p++) {
                B->lo[ia[p]] = mn[p];
                B->hi[ia[p]] = mx[p] + 1;
                bb *= mx[p] + 1 - mn[p];
            }
            if (bb != count) return false; /* the region's elements are not a box here */
        }
        i++;
        j++;
    }
    return true;
}

static ir_status r_reshape(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *is = &c->prog->values[n->in[0]].shape, *os = &c->prog->values[n->out[0]].shape;
    pet_box B;
    if (ir_shape_numel(is) != ir_shape_numel(os) || !reshape_box(is, os, R, &B))
        return unsupported(c, n, "the region is no box of the reshape's input");
    int x;
    ir_status st = pc_region(c, n->in[0], &B, &x);
    if (st != IR_OK) return st;
    ir_shape rs = pc_box_shape(R);
    int in[2] = {x, pc_ints(c, rs.rank, rs.dims)};
    if (in[1] < 0) return nomem(c);
    return pc_emit(c, IR_OP_Reshape, n->name, 2, in, 1, res, 0, NULL, &st) < 0 ? st : IR_OK;
}

static ir_status r_concat(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    int r = R->rank, axis;
    int64_t a = ir_attr_int(n, "axis", 0);
    if (a < 0) a += r;
    if (a < 0 || a >= r) return unsupported(c, n, "axis out of range");
    axis = (int)a;
    int *pieces = malloc(sizeof(int) * (size_t)(n->n_in ? n->n_in : 1)), np = 0;
    if (!pieces) return nomem(c);
    ir_status st = IR_OK;
    int64_t off = 0;
    for (int i = 0; i < n->n_in && st == IR_OK; i++) {
        int64_t len = c->prog->values[n->in[i]].shape.dims[axis];
        int64_t s = R->lo[axis] > off ? R->lo[axis] : off;
        int64_t e = R->hi[axis] < off + len ? R->hi[axis] : off + len;
        if (s < e) {
            pet_box B = *R;
            B.lo[axis] = s - off;
            B.hi[axis] = e - off;
            st = pc_region(c, n->in[i], &B, &pieces[np++]);
        }
        off += len;
    }
    if (st == IR_OK) {
        if (np == 1) {
            *res = pieces[0];
        } else {
            ir_attr at = {.name = "axis", .type = IR_ATTR_INT, .i = axis};
            static const char *const skip[] = {"axis", NULL};
            pc_emit_like(c, n, np, pieces, 1, res, skip, 1, &at, &st);
        }
    }
    free(pieces);
    return st;
}

/* Output k of a Split is its input shifted along the axis: no op. */
static ir_status r_split(pc_ctx *c, const ir_node *n, int k, const pet_box *R, int *res) {
    int r = R->rank;
    int64_t a = ir_attr_int(n, "axis", 0), off = 0;
    if (a < 0) a += r;
    if (a < 0 || a >= r) return unsupported(c, n, "axis out of range");
    for (int i = 0; i < k; i++) {
        if (n->out[i] < 0) return unsupported(c, n, "an omitted output before the one read");
        off += c->prog->values[n->out[i]].shape.dims[a];
    }
    pet_box B = *R;
    B.lo[a] += off;
    B.hi[a] += off;
    return pc_region(c, n->in[0], &B, res);
}

/* Slice: the first index and step per dim (ir/ops-layout.c's slice_params), the input range the
 * region's indices read, and a strided Slice of that range where a step is not 1. */
static ir_status r_slice(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *is = &c->prog->values[n->in[0]].shape;
    int64_t v[4][IR_MAX_RANK], first[IR_MAX_RANK], step[IR_MAX_RANK];
    int cnt[4];
    ir_status st = IR_OK;
    if (n->n_in == 1) { /* before opset 10: attributes */
        static const char *const names[3] = {"starts", "ends", "axes"};
        for (int i = 0; i < 3; i++) {
            const int64_t *p;
            cnt[i] = ir_attr_ints(n, names[i], &p);
            if (cnt[i] > IR_MAX_RANK) return unsupported(c, n, "too many slice axes");
            if (cnt[i] < 0) cnt[i] = -2;
            for (int k = 0; k < cnt[i]; k++) v[i][k] = p[k];
        }
        cnt[3] = -2;
    } else {
        for (int i = 0; i < 4 && st == IR_OK; i++)
            st = pc_const_ints(c, n, i + 1, v[i], IR_MAX_RANK, &cnt[i]);
        if (st != IR_OK) return st;
    }
    int ns = cnt[0];
    if (ns < 0 || cnt[1] != ns || (cnt[2] != -2 && cnt[2] != ns) || (cnt[3] != -2 && cnt[3] != ns))
        return unsupported(c, n, "inconsistent slice parameters");
    for (int i = 0; i < is->rank; i++) first[i] = 0, step[i] = 1;
    for (int i = 0; i < ns; i++) {
        int64_t ax = cnt[2] == -2 ? i : v[2][i];
        if (ax < 0) ax += is->rank;
        if (ax < 0 || ax >= is->rank) return unsupported(c, n, "slice axis out of range");
        int64_t dim = is->dims[ax], b = v[0][i], t = cnt[3] == -2 ? 1 : v[3][i];
        if (t == 0) return unsupported(c, n, "slice step 0");
        if (b < 0) b += dim;
        b = t > 0 ? (b < 0 ? 0 : b > dim ? dim : b) : (b < 0 ? 0 : b > dim - 1 ? dim - 1 : b);
        first[ax] = b;
        step[ax] = t;
    }
    pet_box B = {.rank = is->rank};
    bool strided = false;
    for (int i = 0; i < is->rank; i++) {
        int64_t a = first[i] + R->lo[i] * step[i], z = first[i] + (R->hi[i] - 1) * step[i];
        B.lo[i] = step[i] > 0 ? a : z;
        B.hi[i] = (step[i] > 0 ? z : a) + 1;
        strided = strided || step[i] != 1;
    }
    int x;
    if ((st = pc_region(c, n->in[0], &B, &x)) != IR_OK || !strided) {
        *res = x;
        return st;
    }
    /* the region's range, read with the steps: forward from 0, or backward from the end */
    int64_t s2[IR_MAX_RANK], e2[IR_MAX_RANK], a2[IR_MAX_RANK], t2[IR_MAX_RANK];
    int m = 0;
    for (int i = 0; i < is->rank; i++) {
        if (step[i] == 1) continue;
        s2[m] = step[i] > 0 ? 0 : -1;
        e2[m] = step[i] > 0 ? INT64_MAX : INT64_MIN;
        a2[m] = i;
        t2[m++] = step[i];
    }
    int in[5] = {x, pc_ints(c, m, s2), pc_ints(c, m, e2), pc_ints(c, m, a2), pc_ints(c, m, t2)};
    for (int i = 1; i < 5; i++)
        if (in[i] < 0) return nomem(c);
    return pc_emit(c, IR_OP_Slice, n->name, 5, in, 1, res, 0, NULL, &st) < 0 ? st : IR_OK;
}

/* Pad (constant mode): the input range the region covers, and the pads its border needs. A
 * region entirely in the padding is refused (it would need a constant, no op of the program). */
static ir_status r_pad(pc_ctx *c, const ir_node *n, const pet_box *R, int *res) {
    const ir_shape *is = &c->prog->values[n->in[0]].shape;
    int r = is->rank, nraw, naxes;
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK] = {0};
    if (strcmp(ir_attr_str(n, "mode", "constant"), "constant") != 0)
        return unsupported(c, n, "a Pad mode other than constant");
    ir_status st = pc_const_ints(c, n, 1, raw, 2 * IR_MAX_RANK, &nraw);
    if (st == IR_OK) st = pc_const_ints(c, n, 3, axes, IR_MAX_RANK, &naxes);
    if (st != IR_OK) return st;
    if (nraw == -2) {
        const int64_t *p;
        nraw = ir_attr_ints(n, "pads", &p);
        if (nraw < 0 || nraw > 2 * IR_MAX_RANK) return unsupported(c, n, "pads missing");
        memcpy(raw, p, sizeof(int64_t) * (size_t)nraw);
    }
    int na = naxes == -2 ? r : naxes;
    if (nraw != 2 * na) return unsupported(c, n, "pads do not match the axes");
    for (int i = 0; i < na; i++) {
        int64_t ax = naxes == -2 ? i : axes[i];
        if (ax < 0) ax += r;
        if (ax < 0 || ax >= r) return unsupported(c, n, "pad axis out of range");
        pb[ax] = raw[i]; /* the end pads follow from the output's extent */
    }
    pet_box B = {.rank = r};
    int64_t np[2 * IR_MAX_RANK];
    bool any = false;
    for (int i = 0; i < r; i++) {
        int64_t lo = R->lo[i] - pb[i], hi = R->hi[i] - pb[i];
        B.lo[i] = lo < 0 ? 0 : lo;
        B.hi[i] = hi > is->dims[i] ? is->dims[i] : hi;
        if (B.hi[i] <= B.lo[i]) return unsupported(c, n, "the region lies in the padding");
        np[i] = B.lo[i] - lo;
        np[r + i] = hi - B.hi[i];
        any = any || np[i] || np[r + i];
    }
    int x;
    if ((st = pc_region(c, n->in[0], &B, &x)) != IR_OK || !any) {
        *res = x;
        return st;
    }
    int in[3] = {x, pc_ints(c, 2 * r, np), -1}, n_in = 2;
    if (in[1] < 0) return nomem(c);
    if (n->n_in > 2 && n->in[2] >= 0) {
        if ((st = pc_input(c, n->in[2], &in[2])) != IR_OK) return st;
        n_in = 3;
    } else if (n->n_in <= 1 && ir_attr_float(n, "value", 0.0f) != 0.0f) {
        return unsupported(c, n, "a pad value given as an attribute (before opset 11)");
    }
    static const char *const skip[] = {"pads", "value", NULL};
    return pc_emit_like(c, n, n_in, in, 1, res, skip, 0, NULL, &st) < 0 ? st : IR_OK;
}

/* ---------------------------------------------------------------- the walk */

static ir_status r_node(pc_ctx *c, const ir_node *n, int k, const pet_box *R, int *res) {
    switch (n->op) {
    case IR_OP_Identity: return pc_region(c, n->in[0], R, res);
    case IR_OP_Add:
    case IR_OP_Sub:
    case IR_OP_Mul:
    case IR_OP_Sum:
    case IR_OP_Neg: return r_elementwise(c, n, R, res);
    case IR_OP_Transpose: return r_transpose(c, n, R, res);
    case IR_OP_Reshape:
    case IR_OP_Flatten:
    case IR_OP_Squeeze:
    case IR_OP_Unsqueeze: return r_reshape(c, n, R, res);
    case IR_OP_Concat: return r_concat(c, n, R, res);
    case IR_OP_Split: return r_split(c, n, k, R, res);
    case IR_OP_Slice: return r_slice(c, n, R, res);
    case IR_OP_Pad: return r_pad(c, n, R, res);
    default: return pc_region_compute(c, n, R, res);
    }
}

ir_status pc_region(pc_ctx *c, int v, const pet_box *R, int *res) {
    const ir_value *pv = &c->prog->values[v];
    IR_ASSERT(R->rank == pv->shape.rank);
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo[i].v == v && box_eq(&c->memo[i].box, R)) {
            *res = c->memo[i].res;
            return IR_OK;
        }
    ir_status st;
    int x = -1;
    if (pv->producer < 0) {
        if ((st = pc_input(c, v, &x)) == IR_OK) st = pc_slice(c, x, R, &x);
    } else {
        const ir_node *n = &c->prog->nodes[pv->producer];
        int k = 0;
        while (k < n->n_out && n->out[k] != v) k++;
        st = r_node(c, n, k, R, &x);
        if (st == IR_OK) {
            ir_shape want = pc_box_shape(R);
            if (!ir_shape_eq(&c->h->values[x].shape, &want)) {
                char s1[128], s2[128];
                return ir_node_fail(c->d, IR_ERR_INTERNAL, n,
                                    "correction of '%s' has shape %s, expected %s", pv->name,
                                    ir_shape_str(&c->h->values[x].shape, s1, sizeof s1),
                                    ir_shape_str(&want, s2, sizeof s2));
            }
        }
    }
    if (st != IR_OK) return st;
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? 2 * c->cap_memo : 32;
        pc_memo *nm = realloc(c->memo, sizeof *nm * (size_t)cap);
        if (!nm) return nomem(c);
        c->memo = nm;
        c->cap_memo = cap;
    }
    c->memo[c->n_memo++] = (pc_memo){.v = v, .box = *R, .res = x};
    *res = x;
    return IR_OK;
}
