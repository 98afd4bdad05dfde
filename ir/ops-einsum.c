/* ops-einsum.c - Einsum (opset 12): any equation numpy's einsum takes, with explicit ("->") or
 * implicit output, "..." broadcasting, sums over indices that leave the output, transposes and
 * diagonals (an index named twice by one operand). What PyTorch exports for torch.einsum:
 * batched matmuls ("bhqd,bhkd->bhqk", "bij,bjk->bik"), transposes, reductions, outer products.
 *
 * The index map is ir-einsum.h's (one parse for the kernel, the gradient, the dims and PET).
 * The kernel walks the output in parallel; for each output element it visits the summed indices
 * with an odometer whose innermost index is a plain strided loop, reading each operand through
 * per-label strides (a diagonal sums the strides of its dims, a broadcast dim has stride 0) and
 * accumulating in double (int64 for integers). float32, float64, int32, int64.
 *
 * Einsum is multilinear. The gradient of operand i is an Einsum of dY and the other operands
 * onto i's indices (the equation permuted); indices only operand i has (summed away in the
 * forward) are restored by Expand, broadcast dims are summed back by ir_grad_accumulate. A
 * diagonal operand (an index it names twice) gets the gradient of its diagonal, broadcast along
 * the repeated dimensions and multiplied by a constant 0/1 mask of the diagonal. */
#include "ir-autodiff.h"
#include "ir-einsum.h"
#include "ir-impl.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- parsing */

static int letter_id(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* One term of the equation: its letters (ids) in order, and where "..." sits (-1: none). */
typedef struct es_term {
    int n;
    int8_t id[IR_MAX_RANK + 1];
    int ell_at;
} es_term;

static bool es_term_parse(const char *p, const char *end, es_term *t) {
    t->n = 0;
    t->ell_at = -1;
    while (p < end) {
        if (*p == '.') {
            if (end - p < 3 || p[1] != '.' || p[2] != '.' || t->ell_at >= 0) return false;
            t->ell_at = t->n;
            p += 3;
            continue;
        }
        int id = letter_id(*p++);
        if (id < 0 || t->n > IR_MAX_RANK) return false;
        t->id[t->n++] = (int8_t)id;
    }
    return true;
}

ir_status ir_einsum_parse(const char *eq, int n, const ir_shape *const *s, const ir_node *node,
                          ir_einsum *e, ir_diag *d) {
    memset(e, 0, sizeof *e);
    char buf[512];
    size_t len = 0;
    for (const char *p = eq; *p; p++) {
        if (*p == ' ') continue;
        if (len + 1 >= sizeof buf)
            return ir_node_fail(d, IR_ERR_INVALID, node, "equation is too long");
        buf[len++] = *p;
    }
    buf[len] = 0;
    if (n < 1 || n > IR_EINSUM_MAX_OPS)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, node, "%d operands (1 to %d are supported)", n,
                            IR_EINSUM_MAX_OPS);
    const char *arrow = strstr(buf, "->"), *lhs_end = arrow ? arrow : buf + len;
    es_term terms[IR_EINSUM_MAX_OPS], rhs;
    int nt = 0, max_ell = 0;
    for (const char *p = buf;;) {
        const char *c = memchr(p, ',', (size_t)(lhs_end - p));
        const char *te = c ? c : lhs_end;
        if (nt >= n)
            return ir_node_fail(d, IR_ERR_INVALID, node,
                                "equation '%s' names more operands than the %d inputs", eq, n);
        if (!es_term_parse(p, te, &terms[nt]))
            return ir_node_fail(d, IR_ERR_INVALID, node, "equation '%s': bad term %d", eq, nt);
        int r = s[nt]->rank, ell = r - terms[nt].n;
        if (ell < 0 || (ell > 0 && terms[nt].ell_at < 0))
            return ir_node_fail(d, IR_ERR_INVALID, node,
                                "equation '%s': term %d has %d indices for an operand of rank %d",
                                eq, nt, terms[nt].n, r);
        if (ell > max_ell) max_ell = ell;
        nt++;
        if (!c) break;
        p = c + 1;
    }
    if (nt != n)
        return ir_node_fail(d, IR_ERR_INVALID, node, "equation '%s' has %d terms for %d inputs", eq,
                            nt, n);
    if (arrow && !es_term_parse(arrow + 2, buf + len, &rhs))
        return ir_node_fail(d, IR_ERR_INVALID, node, "equation '%s': bad output term", eq);
    /* labels: letters in order of first appearance, then the ellipsis dims */
    int lid[52], count[52];
    for (int i = 0; i < 52; i++) lid[i] = -1, count[i] = 0;
    int nl = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < terms[k].n; j++) {
            int id = terms[k].id[j];
            count[id]++;
            if (lid[id] < 0) {
                lid[id] = nl;
                e->letter[nl++] = id < 26 ? (char)('a' + id) : (char)('A' + id - 26);
            }
        }
    const int ell_base = nl;
    nl += max_ell;
    if (nl > IR_EINSUM_MAX_LABELS)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, node, "equation '%s' has too many indices", eq);
    e->n_ops = n;
    e->n_labels = nl;
    for (int l = 0; l < nl; l++) e->size[l] = 1;
    for (int k = 0; k < n; k++) {
        const es_term *t = &terms[k];
        int r = s[k]->rank, ell = r - t->n, dim = 0;
        e->rank[k] = r;
        for (int j = 0; j <= t->n; j++) {
            if (j == t->ell_at)
                for (int q = 0; q < ell; q++)
                    e->label[k][dim++] = (int8_t)(ell_base + max_ell - ell + q);
            if (j < t->n) e->label[k][dim++] = (int8_t)lid[t->id[j]];
        }
        for (int i = 0; i < r; i++) {
            int l = e->label[k][i];
            int64_t sz = s[k]->dims[i];
            for (int i2 = 0; i2 < i; i2++)
                if (e->label[k][i2] == l) e->repeated[l] = true;
            if (sz == 1) continue;
            if (e->size[l] != 1 && e->size[l] != sz)
                return ir_node_fail(d, IR_ERR_SHAPE, node,
                                    "equation '%s': index %d of operand %d has size %lld, "
                                    "another has %lld",
                                    eq, i, k, (long long)sz, (long long)e->size[l]);
            e->size[l] = sz;
        }
    }
    /* the output */
    if (arrow) {
        for (int j = 0; j <= rhs.n; j++) {
            if (j == rhs.ell_at)
                for (int q = 0; q < max_ell; q++) e->out[e->n_out++] = (int8_t)(ell_base + q);
            if (j == rhs.n) break;
            int l = lid[rhs.id[j]];
            if (l < 0)
                return ir_node_fail(d, IR_ERR_INVALID, node,
                                    "equation '%s': output index '%c' is in no input", eq,
                                    rhs.id[j] < 26 ? 'a' + rhs.id[j] : 'A' + rhs.id[j] - 26);
            if (e->in_out[l])
                return ir_node_fail(d, IR_ERR_INVALID, node,
                                    "equation '%s': output index '%c' appears twice", eq,
                                    e->letter[l]);
            if (e->n_out >= IR_MAX_RANK)
                return ir_node_fail(d, IR_ERR_UNSUPPORTED, node, "output rank above %d",
                                    IR_MAX_RANK);
            e->in_out[l] = true;
            e->out[e->n_out++] = (int8_t)l;
        }
    } else {
        for (int q = 0; q < max_ell; q++) e->out[e->n_out++] = (int8_t)(ell_base + q);
        for (int c = 0; c < 128; c++) { /* ASCII order: upper case before lower case */
            int id = letter_id((char)c);
            if (id < 0 || count[id] != 1) continue;
            if (e->n_out >= IR_MAX_RANK)
                return ir_node_fail(d, IR_ERR_UNSUPPORTED, node, "output rank above %d",
                                    IR_MAX_RANK);
            e->out[e->n_out++] = (int8_t)lid[id];
        }
    }
    for (int j = 0; j < e->n_out; j++) e->in_out[e->out[j]] = true;
    return IR_OK;
}

ir_status ir_einsum_of(const ir_graph *g, const ir_node *n, ir_einsum *e, ir_diag *d) {
    const ir_attr *a = ir_attr_find(n, "equation");
    if (!a || a->type != IR_ATTR_STRING)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute equation is required");
    const ir_shape *s[IR_EINSUM_MAX_OPS];
    if (n->n_in > IR_EINSUM_MAX_OPS)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "%d operands (1 to %d are supported)",
                            n->n_in, IR_EINSUM_MAX_OPS);
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        if (!v) return ir_node_fail(d, IR_ERR_INVALID, n, "input %d is missing", i);
        s[i] = &v->shape;
    }
    return ir_einsum_parse(a->s, n->n_in, s, n, e, d);
}

void ir_einsum_strides(const ir_einsum *e, int k, const ir_shape *sh, int64_t *st) {
    int64_t es[IR_MAX_RANK];
    ir_shape_strides(sh, es);
    for (int l = 0; l < e->n_labels; l++) st[l] = 0;
    for (int i = 0; i < sh->rank; i++)
        if (sh->dims[i] != 1) st[e->label[k][i]] += es[i];
}

/* ---------------------------------------------------------------- shapes and counts */

static ir_status einsum_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    ir_einsum e;
    ir_status st = ir_einsum_of(g, n, &e, d);
    if (st) return st;
    ir_dtype t = ir_node_in(g, n, 0)->dtype;
    if (!ir_dtype_is_float(t) && t != IR_I32 && t != IR_I64)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                            "dtype %s (floats, int32 and int64 are supported)", ir_dtype_name(t));
    for (int i = 1; i < n->n_in; i++)
        if (ir_node_in(g, n, i)->dtype != t)
            return ir_node_fail(d, IR_ERR_SHAPE, n, "input %d is %s but input 0 is %s", i,
                                ir_dtype_name(ir_node_in(g, n, i)->dtype), ir_dtype_name(t));
    ir_shape out = {.rank = e.n_out};
    for (int j = 0; j < e.n_out; j++) out.dims[j] = e.size[e.out[j]];
    ir_set_out(g, n, 0, t, &out);
    return IR_OK;
}

/* Every index combination once: n_ops - 1 multiplications and one addition. */
static double einsum_flops(const ir_graph *g, const ir_node *n) {
    ir_einsum e;
    if (ir_einsum_of(g, n, &e, NULL)) return 0;
    double all = 1;
    for (int l = 0; l < e.n_labels; l++) all *= (double)e.size[l];
    return all * e.n_ops;
}

/* ---------------------------------------------------------------- the kernel */

/* What one kernel run shares across output elements: the summed labels (the innermost last) and
 * each operand's strides along the output's and the summed labels. */
typedef struct es_plan {
    int n_ops, n_out, n_sum;
    int64_t out_size[IR_MAX_RANK], sum_size[IR_EINSUM_MAX_LABELS];
    int64_t out_st[IR_EINSUM_MAX_OPS][IR_MAX_RANK];
    int64_t sum_st[IR_EINSUM_MAX_OPS][IR_EINSUM_MAX_LABELS];
    int64_t n_inner; /* the summed index combinations, 0 when some summed label is empty */
} es_plan;

static void es_plan_make(const ir_einsum *e, const ir_tensor *in, es_plan *p) {
    memset(p, 0, sizeof *p);
    p->n_ops = e->n_ops;
    p->n_out = e->n_out;
    int64_t st[IR_EINSUM_MAX_OPS][IR_EINSUM_MAX_LABELS];
    for (int k = 0; k < e->n_ops; k++) ir_einsum_strides(e, k, &in[k].shape, st[k]);
    for (int j = 0; j < e->n_out; j++) {
        p->out_size[j] = e->size[e->out[j]];
        for (int k = 0; k < e->n_ops; k++) p->out_st[k][j] = st[k][e->out[j]];
    }
    p->n_inner = 1;
    for (int l = 0; l < e->n_labels; l++) {
        if (e->in_out[l]) continue;
        p->sum_size[p->n_sum] = e->size[l];
        for (int k = 0; k < e->n_ops; k++) p->sum_st[k][p->n_sum] = st[k][l];
        p->n_inner *= e->size[l];
        p->n_sum++;
    }
}

/* One output element o: the sum over the summed labels of the product of the operands. */
#define ES_ELEM(sfx, T, ACC)                                                                       \
    static ACC es_elem_##sfx(const es_plan *p, const T *const *x, int64_t o) {                     \
        int64_t off[IR_EINSUM_MAX_OPS] = {0};                                                      \
        for (int j = p->n_out - 1; j >= 0; j--) {                                                  \
            int64_t i = o % p->out_size[j];                                                        \
            o /= p->out_size[j];                                                                   \
            for (int k = 0; k < p->n_ops; k++) off[k] += i * p->out_st[k][j];                      \
        }                                                                                          \
        if (p->n_inner == 0) return 0;                                                             \
        if (p->n_sum == 0) {                                                                       \
            ACC v = 1;                                                                             \
            for (int k = 0; k < p->n_ops; k++) v *= (ACC)x[k][off[k]];                             \
            return v;                                                                              \
        }                                                                                          \
        const int q = p->n_sum - 1;                                                                \
        const int64_t inner = p->sum_size[q], outer = p->n_inner / inner;                          \
        int64_t idx[IR_EINSUM_MAX_LABELS] = {0};                                                   \
        ACC acc = 0;                                                                               \
        for (int64_t r = 0; r < outer; r++) {                                                      \
            if (p->n_ops == 2) {                                                                   \
                const T *a = x[0] + off[0], *b = x[1] + off[1];                                    \
                const int64_t sa = p->sum_st[0][q], sb = p->sum_st[1][q];                          \
                for (int64_t i = 0; i < inner; i++) acc += (ACC)a[i * sa] * (ACC)b[i * sb];        \
            } else {                                                                               \
                for (int64_t i = 0; i < inner; i++) {                                              \
                    ACC v = 1;                                                                     \
                    for (int k = 0; k < p->n_ops; k++)                                             \
                        v *= (ACC)x[k][off[k] + i * p->sum_st[k][q]];                              \
                    acc += v;                                                                      \
                }                                                                                  \
            }                                                                                      \
            for (int dd = q - 1; dd >= 0; dd--) { /* odometer over the outer summed labels */      \
                for (int k = 0; k < p->n_ops; k++) off[k] += p->sum_st[k][dd];                     \
                if (++idx[dd] < p->sum_size[dd]) break;                                            \
                for (int k = 0; k < p->n_ops; k++) off[k] -= p->sum_st[k][dd] * p->sum_size[dd];   \
                idx[dd] = 0;                                                                       \
            }                                                                                      \
        }                                                                                          \
        return acc;                                                                                \
    }
ES_ELEM(f32, float, double)
ES_ELEM(f64, double, double)
ES_ELEM(i32, int32_t, int64_t)
ES_ELEM(i64, int64_t, int64_t)

#define ES_RUN(sfx, T)                                                                             \
    do {                                                                                           \
        const T *x[IR_EINSUM_MAX_OPS];                                                             \
        for (int k = 0; k < p.n_ops; k++) x[k] = k_->in[k].data;                                   \
        T *y = k_->out[0].data;                                                                    \
        IR_PARALLEL_FOR(ny *(p.n_inner + 1) >= IR_PAR_MIN)                                         \
        for (int64_t o = 0; o < ny; o++) y[o] = (T)es_elem_##sfx(&p, x, o);                        \
    } while (0)

static ir_status einsum_kernel(const ir_kernel_ctx *k_) {
    ir_einsum e;
    const ir_shape *s[IR_EINSUM_MAX_OPS];
    const ir_attr *a = ir_attr_find(k_->node, "equation");
    if (!a || a->type != IR_ATTR_STRING || k_->n_in > IR_EINSUM_MAX_OPS)
        return ir_node_fail(k_->diag, IR_ERR_INVALID, k_->node, "attribute equation is required");
    for (int i = 0; i < k_->n_in; i++) s[i] = &k_->in[i].shape;
    ir_status st = ir_einsum_parse(a->s, k_->n_in, s, k_->node, &e, k_->diag);
    if (st) return st;
    es_plan p;
    es_plan_make(&e, k_->in, &p);
    const int64_t ny = ir_tensor_numel(&k_->out[0]);
    switch (k_->out[0].dtype) {
    case IR_F32: ES_RUN(f32, float); break;
    case IR_F64: ES_RUN(f64, double); break;
    case IR_I32: ES_RUN(i32, int32_t); break;
    default: ES_RUN(i64, int64_t); break;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- dims */

/* Dims (ir.h, ir_dimlink): an output index links from every operand dim that names it (not a
 * broadcast size-1 dim); a summed index is a reduce axis, a sum, of every operand dim naming it.
 * An index some operand names twice (a diagonal) gets no links: its parts are not blocks. */
static int einsum_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    ir_einsum e;
    if (ir_einsum_of(g, n, &e, NULL) != IR_OK) return 0;
    ir_dims_out o = ir_dims_begin(l);
    int axis = 0;
    for (int lb = 0; lb < e.n_labels; lb++) {
        if (e.repeated[lb]) continue;
        int pos = -1;
        for (int j = 0; j < e.n_out; j++)
            if (e.out[j] == lb) pos = j;
        if (pos < 0) axis++;
        for (int k = 0; k < e.n_ops; k++) {
            const ir_shape *sh = &ir_node_in(g, n, k)->shape;
            for (int i = 0; i < sh->rank; i++) {
                if (e.label[k][i] != lb || sh->dims[i] != e.size[lb]) continue;
                if (pos >= 0)
                    ir_dims_keep(&o, k, i, 0, pos);
                else
                    ir_dims_reduce(&o, k, i, axis, true);
            }
        }
    }
    return ir_dims_end(&o);
}

/* ---------------------------------------------------------------- gradient */

/* A letter for every label: its own, or for an ellipsis dim one the equation does not use. */
static void es_letters(const ir_einsum *e, char *L) {
    bool used[52] = {false};
    for (int l = 0; l < e->n_labels; l++)
        if (e->letter[l]) used[letter_id(e->letter[l])] = true;
    int next = 0;
    for (int l = 0; l < e->n_labels; l++) {
        if (e->letter[l]) {
            L[l] = e->letter[l];
            continue;
        }
        while (used[next]) next++;
        used[next] = true;
        L[l] = next < 26 ? (char)('a' + next) : (char)('A' + next - 26);
    }
}

/* Operand i's diagonal mask: 1 where every index it names twice or more has equal coordinates
 * in all of its dimensions, else 0. A diagonal operand's gradient is the gradient of its
 * diagonal, broadcast along the repeated dimensions and multiplied by this mask. */
static int diagonal_mask(ir_grad_ctx *c, const ir_einsum *e, int i, const ir_shape *full) {
    ir_dtype t = c->g->values[c->in[i]].dtype;
    int64_t n = ir_shape_numel(full);
    void *m = calloc((size_t)(n ? n : 1), ir_dtype_size(t));
    if (!m) return ir_grad_fail(c, IR_ERR_NOMEM, "out of memory for a diagonal mask"), -1;
    int r = full->rank;
    for (int64_t at = 0; at < n; at++) {
        int64_t idx[IR_MAX_RANK], rest = at, coord[IR_EINSUM_MAX_LABELS];
        for (int d = r - 1; d >= 0; d--) idx[d] = rest % full->dims[d], rest /= full->dims[d];
        bool on = true;
        for (int d = 0; d < r && on; d++) {
            int lb = e->label[i][d];
            bool seen = false;
            for (int d2 = 0; d2 < d && !seen; d2++) seen = e->label[i][d2] == lb;
            if (seen)
                on = coord[lb] == idx[d];
            else
                coord[lb] = idx[d];
        }
        if (on) ir_store_f64(m, t, at, 1.0);
    }
    int v = ir_grad_const(c, t, full, m);
    free(m);
    return v;
}

static ir_status einsum_grad(ir_grad_ctx *c) {
    ir_einsum e;
    if (ir_einsum_of(c->g, c->node, &e, NULL) != IR_OK)
        return ir_grad_fail(c, IR_ERR_INTERNAL, "the equation does not parse");
    if (e.n_labels > 52) return ir_grad_fail(c, IR_ERR_UNSUPPORTED, "more than 52 indices");
    char L[IR_EINSUM_MAX_LABELS];
    es_letters(&e, L);
    int dy = ir_grad_gout(c, 0);
    for (int i = 0; i < e.n_ops; i++) {
        if (!ir_grad_needs(c, i)) continue;
        bool present[IR_MAX_RANK], first[IR_MAX_RANK], diagonal = false;
        for (int d = 0; d < e.rank[i]; d++) {
            int lb = e.label[i][d];
            first[d] = true;
            for (int d2 = 0; d2 < d; d2++) first[d] &= e.label[i][d2] != lb;
            diagonal |= !first[d];
            bool elsewhere = e.in_out[lb];
            for (int k = 0; k < e.n_ops && !elsewhere; k++)
                if (k != i)
                    for (int d2 = 0; d2 < e.rank[k]; d2++) elsewhere |= e.label[k][d2] == lb;
            present[d] = elsewhere;
        }
        /* "<out>,<others>-><operand i's indices that are not its own alone>" */
        char eq[8 * (IR_MAX_RANK + 2) + 8];
        int q = 0, ins[IR_EINSUM_MAX_OPS], n_ins = 0;
        for (int j = 0; j < e.n_out; j++) eq[q++] = L[e.out[j]];
        ins[n_ins++] = dy;
        for (int k = 0; k < e.n_ops; k++) {
            if (k == i) continue;
            eq[q++] = ',';
            for (int d2 = 0; d2 < e.rank[k]; d2++) eq[q++] = L[e.label[k][d2]];
            ins[n_ins++] = c->in[k];
        }
        eq[q++] = '-';
        eq[q++] = '>';
        int n_kept = 0; /* a diagonal's index once, at its first dimension */
        for (int d = 0; d < e.rank[i]; d++)
            if (present[d] && first[d]) eq[q++] = L[e.label[i][d]], n_kept++;
        eq[q] = 0;
        ir_attr at = ir_grad_attr_str(c, "equation", eq);
        int gi = ir_grad_op(c, IR_OP_Einsum, n_ins, ins, 1, &at);
        if (n_kept < e.rank[i]) { /* the indices operand i alone had: expanded back */
            ir_shape ones = {.rank = e.rank[i]}, full = {.rank = e.rank[i]};
            for (int d = 0; d < e.rank[i]; d++) {
                full.dims[d] = e.size[e.label[i][d]];
                ones.dims[d] = present[d] && first[d] ? full.dims[d] : 1;
            }
            gi = ir_grad_reshape(c, gi, &ones);
            gi = ir_grad_op2(c, IR_OP_Expand, gi, ir_grad_const_i64(c, full.rank, full.dims));
            if (diagonal) gi = ir_grad_op2(c, IR_OP_Mul, gi, diagonal_mask(c, &e, i, &full));
        }
        ir_grad_accumulate(c, i, gi);
    }
    return ir_grad_status(c);
}

IR_OP_DEF(Einsum, 1, IR_EINSUM_MAX_OPS, 1, 1, .flags = IR_OPF_MULTILINEAR, .infer = einsum_infer,
          .flops = einsum_flops, .kernel = einsum_kernel, .grad = einsum_grad, .dims = einsum_dims);
