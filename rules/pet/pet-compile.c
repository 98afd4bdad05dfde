/* pet-compile.c - compiles a multilinear ir_graph into a pet_prog (pet.h): values (variables,
 * literals, computed) and steps, each one of the few primitive Z_p kernels every back-end
 * implements (pet-kernels.c on the CPU).
 *
 * Each op becomes one or a few steps: layout ops (Transpose, Slice, Concat, Split, Pad, Expand,
 * Tile) become region copies with an index map; Reshape, Flatten, Squeeze and Unsqueeze a
 * reshape; Neg, Gemm's alpha and the means' divisors a scale by a residue (dyadic literals map
 * exactly, divisors by their inverses); Sum a chain of additions. Affine parts are dropped and
 * counted (pet.h "Affine parts"). Geometry is re-derived from the attributes with the formulas of
 * ir/ops-conv.c and ir/ops-pool.c and checked against the shapes ir inferred, so a disagreement
 * is caught here (IR_ERR_INTERNAL) instead of producing wrong residues.
 *
 * Invariants: steps are in topological order; every computed value is written by the steps of
 * exactly one IR node (several steps only for Concat, Pad, and temporaries of Sum, Gemm and the
 * means); Identity aliases its input's value instead of copying it. */
#include "pet-impl.h"

#include "ir-einsum.h"
#include "ir-geom.h" /* one definition of conv, pool and slice geometry */

#include <stdio.h>

/* ---------------------------------------------------------------- arena and growth */

typedef struct arena_chunk {
    struct arena_chunk *next;
    _Alignas(16) unsigned char data[];
} arena_chunk;

void *pet_arena_alloc(pet_prog *p, size_t bytes) {
    arena_chunk *c = calloc(1, sizeof *c + (bytes ? bytes : 1));
    if (!c) return NULL;
    c->next = p->arena_;
    p->arena_ = c;
    return c->data;
}

void pet_prog_free(pet_prog *p) {
    if (!p) return;
    for (arena_chunk *c = p->arena_, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    free(p->values);
    free(p->steps);
    free(p);
}

/* What one compilation carries. */
typedef struct cc {
    const ir_graph *g;
    pet_prog *p;
    int cap_values, cap_steps;
    ir_diag *d;
} cc;

static ir_status nomem(cc *c) {
    return ir_diag_set(c->d, IR_ERR_NOMEM, "PET: out of memory compiling a program");
}

/* A new value; its id, or -1 when out of memory. */
static int new_value(cc *c, pet_value_kind k, const ir_shape *s, const char *name, int irv) {
    pet_prog *p = c->p;
    if (p->n_values == c->cap_values) {
        int cap = c->cap_values ? 2 * c->cap_values : 32;
        pet_value *nv = realloc(p->values, sizeof *nv * (size_t)cap);
        if (!nv) return -1;
        p->values = nv;
        c->cap_values = cap;
    }
    size_t len = strlen(name) + 1;
    char *nm = pet_arena_alloc(p, len);
    if (!nm) return -1;
    memcpy(nm, name, len);
    pet_value *v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    v->kind = k;
    v->shape = *s;
    v->numel = ir_shape_numel(s);
    v->name = nm;
    v->ir_value = irv;
    return p->n_values++;
}

static pet_step *add_step(cc *c, pet_step_kind k, int node, int in0, int in1, int out) {
    pet_prog *p = c->p;
    if (p->n_steps == c->cap_steps) {
        int cap = c->cap_steps ? 2 * c->cap_steps : 32;
        pet_step *ns = realloc(p->steps, sizeof *ns * (size_t)cap);
        if (!ns) return NULL;
        p->steps = ns;
        c->cap_steps = cap;
    }
    pet_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->kind = k;
    s->node = node;
    s->in[0] = in0;
    s->in[1] = in1;
    s->out = out;
    return s;
}

/* ---------------------------------------------------------------- values */

static bool is_weight(const ir_value *v) {
    return (v->flags & (IR_VF_INITIALIZER | IR_VF_PARAM)) != 0;
}

/* The program value of data input i of node n (created on first use for residents). */
static ir_status data_in(cc *c, const ir_node *n, int i, int *id) {
    const ir_graph *g = c->g;
    *id = -1;
    const ir_value *v = ir_node_in(g, n, i);
    if (!v) return ir_node_fail(c->d, IR_ERR_INVALID, n, "input %d is missing", i);
    int vi = n->in[i];
    if (c->p->ir_map[vi] >= 0) {
        *id = c->p->ir_map[vi];
        return IR_OK;
    }
    if (!ir_dtype_is_float(v->dtype))
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "input %d ('%s') is %s; PET programs compute on float data only", i,
                            v->name, ir_dtype_name(v->dtype));
    if (v->producer >= 0)
        return ir_node_fail(c->d, IR_ERR_INTERNAL, n, "input '%s' is used before it is computed",
                            v->name);
    bool var = (v->flags & IR_VF_INPUT) || !v->blob || is_weight(v);
    int id2 = new_value(c, var ? PET_V_VAR : PET_V_LITERAL, &v->shape, v->name, vi);
    if (id2 < 0) return nomem(c);
    pet_value *pv = &c->p->values[id2];
    if (var) {
        pv->key = pet_var_key(v->name);
        pv->degree = 1;
    } else {
        pv->lit = pet_arena_alloc(c->p, sizeof(uint32_t) * (size_t)(pv->numel ? pv->numel : 1));
        if (!pv->lit) return nomem(c);
        const void *data = ir_value_data(v);
        for (int64_t e = 0; e < pv->numel; e++) {
            double x = ir_load_f64(data, v->dtype, e);
            if (!pet_from_double(x, &pv->lit[e]))
                return ir_node_fail(c->d, IR_ERR_INVALID, n,
                                    "constant '%s' holds %g at element %lld, which has no residue",
                                    v->name, x, (long long)e);
        }
    }
    c->p->ir_map[vi] = id2;
    *id = id2;
    return IR_OK;
}

/* A computed value for output i of n, with the shape ir inferred. */
static ir_status out_value(cc *c, const ir_node *n, int i, int degree, int *id) {
    *id = -1;
    const ir_value *v = ir_node_out(c->g, n, i);
    if (!v) return ir_node_fail(c->d, IR_ERR_INVALID, n, "output %d is missing", i);
    if (!ir_dtype_is_float(v->dtype))
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "output %d is %s, not float data", i,
                            ir_dtype_name(v->dtype));
    int id2 = new_value(c, PET_V_COMPUTED, &v->shape, v->name, n->out[i]);
    if (id2 < 0) return nomem(c);
    c->p->values[id2].degree = degree;
    c->p->ir_map[n->out[i]] = id2;
    *id = id2;
    return IR_OK;
}

/* A temporary of shape s for node n (Sum's partial sums, Gemm before its alpha). */
static ir_status temp_value(cc *c, const ir_node *n, const ir_shape *s, int degree, int *id) {
    *id = -1;
    char nm[160];
    snprintf(nm, sizeof nm, "%.120s.tmp%d", n->name, c->p->n_values);
    int id2 = new_value(c, PET_V_COMPUTED, s, nm, -1);
    if (id2 < 0) return nomem(c);
    c->p->values[id2].degree = degree;
    *id = id2;
    return IR_OK;
}

static int deg(const cc *c, int v) {
    return c->p->values[v].degree;
}
static const ir_shape *shape_of(const cc *c, int v) {
    return &c->p->values[v].shape;
}

/* ---------------------------------------------------------------- parameters */

/* Constant integer input i of n into out (at most max): *cnt = count, -2 when absent. */
static ir_status in_ints(cc *c, const ir_node *n, int i, int64_t *out, int max, int *cnt) {
    *cnt = -2;
    if (i >= n->n_in || n->in[i] < 0) return IR_OK;
    const ir_value *v = &c->g->values[n->in[i]];
    if (!v->blob || ir_dtype_is_float(v->dtype))
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "input %d ('%s') must be a constant integer tensor", i, v->name);
    int64_t k = ir_shape_numel(&v->shape);
    if (k > max)
        return ir_node_fail(c->d, IR_ERR_INVALID, n, "input %d ('%s') has %lld values", i, v->name,
                            (long long)k);
    for (int64_t e = 0; e < k; e++) out[e] = ir_load_i64(ir_value_data(v), v->dtype, e);
    *cnt = (int)k;
    return IR_OK;
}

static bool norm_axis(int64_t a, int rank, int *out) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return false;
    *out = (int)a;
    return true;
}

static ir_status bad_axis(cc *c, const ir_node *n, int64_t a, int rank) {
    return ir_node_fail(c->d, IR_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                        (long long)a, rank);
}

static ir_status geometry_mismatch(cc *c, const ir_node *n) {
    return ir_node_fail(c->d, IR_ERR_INTERNAL, n,
                        "PET's geometry disagrees with the inferred output shape");
}

/* A copy step covering the whole of output `out` reading `in` identically (dims the same). */
static pet_step *copy_step(cc *c, int node, int in, int out) {
    pet_step *s = add_step(c, PET_COPY, node, in, -1, out);
    if (!s) return NULL;
    const ir_shape *os = shape_of(c, out);
    for (int i = 0; i < os->rank; i++) {
        s->u.copy.ext[i] = os->dims[i];
        s->u.copy.src_dim[i] = i;
        s->u.copy.src_step[i] = 1;
    }
    return s;
}

/* ---------------------------------------------------------------- convolutions and pools */

/* Conv / ConvTranspose geometry: ir_conv_parse's (ir/ops-conv.c), so the field kernels and the
 * float ones agree on windows and pads by construction. */
static ir_status conv_geom(cc *c, const ir_node *n, bool tr, pet_conv *cg) {
    const ir_value *y = ir_node_out(c->g, n, 0);
    ir_conv_geom g;
    ir_status st = ir_conv_parse(c->g, n, tr, &g, c->d);
    if (st != IR_OK) return st;
    memset(cg, 0, sizeof *cg);
    cg->S = g.S;
    cg->N = g.N;
    cg->C = g.C;
    cg->M = g.M;
    cg->group = g.group;
    for (int i = 0; i < 3; i++) {
        cg->in[i] = g.in[i];
        cg->out[i] = g.out[i];
        cg->k[i] = g.k[i];
        cg->s[i] = g.s[i];
        cg->d[i] = g.d[i];
        cg->pb[i] = g.pb[i];
        cg->pe[i] = g.pe[i];
    }
    if (y->shape.rank != g.S + 2 || y->shape.dims[0] != cg->N || y->shape.dims[1] != cg->M)
        return geometry_mismatch(c, n);
    for (int i = 0; i < g.S; i++)
        if (y->shape.dims[2 + i] != g.out[3 - g.S + i]) return geometry_mismatch(c, n);
    return IR_OK;
}

static ir_status c_conv(cc *c, int ni, const ir_node *n, bool tr) {
    int x, w, y;
    ir_status st;
    pet_conv cg;
    if ((st = data_in(c, n, 0, &x)) || (st = data_in(c, n, 1, &w)) ||
        (st = conv_geom(c, n, tr, &cg)) || (st = out_value(c, n, 0, deg(c, x) + deg(c, w), &y)))
        return st;
    if (ir_node_in(c->g, n, 2)) c->p->affine_dropped++; /* the bias */
    pet_step *s = add_step(c, tr ? PET_CONVT : PET_CONV, ni, x, w, y);
    if (!s) return nomem(c);
    s->u.conv = cg;
    return IR_OK;
}

/* AveragePool geometry: ir_pool_parse's (ir/ops-pool.c), as the float kernel has it. */
static ir_status pool_geom(cc *c, const ir_node *n, pet_conv *pg) {
    const ir_value *x = ir_node_in(c->g, n, 0), *y = ir_node_out(c->g, n, 0);
    int r = x->shape.rank;
    memset(pg, 0, sizeof *pg);
    if (r < 3 || r > 5 || y->shape.rank != r)
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "pooling of rank %d", r);
    ir_pool_geom g;
    ir_status st = ir_pool_parse(n, &x->shape, &g, c->d);
    if (st != IR_OK) return st;
    pg->S = g.S;
    pg->N = x->shape.dims[0];
    pg->C = pg->M = pg->group = x->shape.dims[1];
    pg->count_pad = ir_attr_int(n, "count_include_pad", 0) != 0;
    for (int i = 0; i < 3; i++) {
        if (g.d[i] != 1 || g.pb[i] < 0 || g.pe[i] < 0)
            return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                                "AveragePool window (kernel %lld, stride %lld, dilation %lld)",
                                (long long)g.k[i], (long long)g.s[i], (long long)g.d[i]);
        pg->in[i] = g.in[i];
        pg->out[i] = g.out[i];
        pg->k[i] = g.k[i];
        pg->s[i] = g.s[i];
        pg->d[i] = 1;
        pg->pb[i] = g.pb[i];
        pg->pe[i] = g.pe[i];
    }
    for (int i = 0; i < g.S; i++)
        if (y->shape.dims[2 + i] != g.out[3 - g.S + i]) return geometry_mismatch(c, n);
    /* 1/q for every divisor q a window can have */
    int64_t kmax = pg->k[0] * pg->k[1] * pg->k[2];
    uint32_t *inv = pet_arena_alloc(c->p, sizeof(uint32_t) * (size_t)(kmax + 1));
    if (!inv) return nomem(c);
    for (int64_t q = 1; q <= kmax; q++) inv[q] = pet_inv((uint32_t)q);
    pg->inv = inv;
    return IR_OK;
}

static ir_status c_avgpool(cc *c, int ni, const ir_node *n) {
    int x, y;
    ir_status st;
    pet_conv pg;
    if ((st = data_in(c, n, 0, &x)) || (st = pool_geom(c, n, &pg)) ||
        (st = out_value(c, n, 0, deg(c, x), &y)))
        return st;
    pet_step *s = add_step(c, PET_AVGPOOL, ni, x, -1, y);
    if (!s) return nomem(c);
    s->u.conv = pg;
    return IR_OK;
}

/* ---------------------------------------------------------------- products */

static ir_status c_matmul(cc *c, int ni, const ir_node *n) {
    int a, b, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &a)) || (st = data_in(c, n, 1, &b))) return st;
    const ir_shape *as = shape_of(c, a), *bs = shape_of(c, b);
    pet_matmul mm;
    memset(&mm, 0, sizeof mm);
    bool av = as->rank == 1, bv = bs->rank == 1;
    int ra = av ? 2 : as->rank, rb = bv ? 2 : bs->rank;
    if (as->rank < 1 || bs->rank < 1) return geometry_mismatch(c, n);
    mm.a_mdim = av ? -1 : as->rank - 2;
    mm.a_kdim = av ? 0 : as->rank - 1;
    mm.b_kdim = bv ? 0 : bs->rank - 2;
    mm.b_ndim = bv ? -1 : bs->rank - 1;
    mm.M = av ? 1 : as->dims[as->rank - 2];
    mm.K = as->dims[mm.a_kdim];
    mm.N = bv ? 1 : bs->dims[bs->rank - 1];
    mm.nb = (ra > rb ? ra : rb) - 2;
    if (mm.nb > PET_MAX_BATCH || bs->dims[mm.b_kdim] != mm.K) return geometry_mismatch(c, n);
    for (int i = 0; i < mm.nb; i++) {
        int ai = i - (mm.nb - (ra - 2)), bi = i - (mm.nb - (rb - 2));
        int64_t ad = ai >= 0 ? as->dims[ai] : 1, bd = bi >= 0 ? bs->dims[bi] : 1;
        mm.batch[i] = ad > bd ? ad : bd;
        mm.a_bdim[i] = ai >= 0 && ad > 1 ? ai : -1;
        mm.b_bdim[i] = bi >= 0 && bd > 1 ? bi : -1;
    }
    mm.o_mdim = av ? -1 : mm.nb;
    mm.o_ndim = bv ? -1 : mm.nb + (av ? 0 : 1);
    if ((st = out_value(c, n, 0, deg(c, a) + deg(c, b), &y))) return st;
    const ir_shape *ys = shape_of(c, y);
    int64_t numel = mm.M * mm.N;
    for (int i = 0; i < mm.nb; i++) numel *= mm.batch[i];
    if (ys->rank != mm.nb + !av + !bv || ir_shape_numel(ys) != numel)
        return geometry_mismatch(c, n);
    pet_step *s = add_step(c, PET_MATMUL, ni, a, b, y);
    if (!s) return nomem(c);
    s->u.mm = mm;
    return IR_OK;
}

static ir_status c_gemm(cc *c, int ni, const ir_node *n) {
    int a, b, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &a)) || (st = data_in(c, n, 1, &b))) return st;
    const ir_shape *as = shape_of(c, a), *bs = shape_of(c, b);
    if (as->rank != 2 || bs->rank != 2) return geometry_mismatch(c, n);
    bool ta = ir_attr_int(n, "transA", 0) != 0, tb = ir_attr_int(n, "transB", 0) != 0;
    pet_matmul mm;
    memset(&mm, 0, sizeof mm);
    mm.a_mdim = ta ? 1 : 0;
    mm.a_kdim = ta ? 0 : 1;
    mm.b_kdim = tb ? 1 : 0;
    mm.b_ndim = tb ? 0 : 1;
    mm.M = as->dims[mm.a_mdim];
    mm.K = as->dims[mm.a_kdim];
    mm.N = bs->dims[mm.b_ndim];
    mm.o_mdim = 0;
    mm.o_ndim = 1;
    if (bs->dims[mm.b_kdim] != mm.K) return geometry_mismatch(c, n);
    double beta = ir_attr_float(n, "beta", 1.0f);
    if (ir_node_in(c->g, n, 2) && beta != 0) c->p->affine_dropped++; /* beta * C */
    uint32_t alpha;
    if (!pet_from_double(ir_attr_float(n, "alpha", 1.0f), &alpha))
        return ir_node_fail(c->d, IR_ERR_INVALID, n, "alpha has no residue");
    int dg = deg(c, a) + deg(c, b), prod;
    if ((st = out_value(c, n, 0, dg, &y))) return st;
    if (shape_of(c, y)->rank != 2 || shape_of(c, y)->dims[0] != mm.M ||
        shape_of(c, y)->dims[1] != mm.N)
        return geometry_mismatch(c, n);
    prod = y;
    if (alpha != 1 && (st = temp_value(c, n, shape_of(c, y), dg, &prod))) return st;
    pet_step *s = add_step(c, PET_MATMUL, ni, a, b, prod);
    if (!s) return nomem(c);
    s->u.mm = mm;
    if (alpha != 1) {
        if (!(s = add_step(c, PET_SCALE, ni, prod, -1, y))) return nomem(c);
        s->u.scale = alpha;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- element-wise */

/* Aligns input shape is against output shape os (numpy broadcasting) into dim[]. */
static void align(const ir_shape *is, const ir_shape *os, int *dim) {
    for (int i = 0; i < os->rank; i++) {
        int j = i - (os->rank - is->rank);
        dim[i] = j >= 0 && is->dims[j] > 1 ? j : -1;
    }
}

static pet_step *binary_step(cc *c, int ni, int op, int a, int b, int y) {
    pet_step *s = add_step(c, PET_BINARY, ni, a, b, y);
    if (!s) return NULL;
    s->u.bin.op = op;
    align(shape_of(c, a), shape_of(c, y), s->u.bin.a_dim);
    align(shape_of(c, b), shape_of(c, y), s->u.bin.b_dim);
    return s;
}

static ir_status c_binary(cc *c, int ni, const ir_node *n, int op) {
    int a, b, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &a)) || (st = data_in(c, n, 1, &b))) return st;
    int dg =
        op == PET_OP_MUL ? deg(c, a) + deg(c, b) : (deg(c, a) > deg(c, b) ? deg(c, a) : deg(c, b));
    if ((st = out_value(c, n, 0, dg, &y))) return st;
    return binary_step(c, ni, op, a, b, y) ? IR_OK : nomem(c);
}

/* Sum of k inputs: a chain of k-1 additions through temporaries. */
static ir_status c_sum(cc *c, int ni, const ir_node *n) {
    int acc, x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &acc))) return st;
    int dg = deg(c, acc);
    for (int i = 1; i < n->n_in; i++) {
        if ((st = data_in(c, n, i, &x))) return st;
        if (deg(c, x) > dg) dg = deg(c, x);
    }
    if ((st = out_value(c, n, 0, dg, &y))) return st;
    if (n->n_in == 1) return add_step(c, PET_RESHAPE, ni, acc, -1, y) ? IR_OK : nomem(c);
    for (int i = 1; i < n->n_in; i++) {
        int next = y;
        if ((st = data_in(c, n, i, &x))) return st;
        if (i + 1 < n->n_in) {
            ir_shape bs;
            if (!ir_shape_broadcast(shape_of(c, acc), shape_of(c, x), &bs))
                return geometry_mismatch(c, n);
            if ((st = temp_value(c, n, &bs, dg, &next))) return st;
        }
        if (!binary_step(c, ni, PET_OP_ADD, acc, x, next)) return nomem(c);
        acc = next;
    }
    return IR_OK;
}

static ir_status scale_node(cc *c, int ni, const ir_node *n, uint32_t k) {
    int x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = out_value(c, n, 0, deg(c, x), &y))) return st;
    pet_step *s = add_step(c, PET_SCALE, ni, x, -1, y);
    if (!s) return nomem(c);
    s->u.scale = k;
    return IR_OK;
}

/* ---------------------------------------------------------------- layout */

static ir_status c_reshape(cc *c, int ni, const ir_node *n) {
    int x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = out_value(c, n, 0, deg(c, x), &y))) return st;
    if (c->p->values[x].numel != c->p->values[y].numel) return geometry_mismatch(c, n);
    return add_step(c, PET_RESHAPE, ni, x, -1, y) ? IR_OK : nomem(c);
}

static ir_status c_transpose(cc *c, int ni, const ir_node *n) {
    int x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = out_value(c, n, 0, deg(c, x), &y))) return st;
    int r = shape_of(c, x)->rank;
    const int64_t *pv;
    int np = ir_attr_ints(n, "perm", &pv);
    if (np >= 0 && np != r) return geometry_mismatch(c, n);
    pet_step *s = copy_step(c, ni, x, y);
    if (!s) return nomem(c);
    for (int i = 0; i < r; i++) {
        int pi = np < 0 ? r - 1 - i : (int)pv[i];
        if (pi < 0 || pi >= r || shape_of(c, x)->dims[pi] != shape_of(c, y)->dims[i])
            return geometry_mismatch(c, n);
        s->u.copy.src_dim[i] = pi;
    }
    return IR_OK;
}

static ir_status c_concat(cc *c, int ni, const ir_node *n) {
    int x, y, axis, dg = 0;
    ir_status st;
    for (int i = 0; i < n->n_in; i++) {
        if ((st = data_in(c, n, i, &x))) return st;
        if (deg(c, x) > dg) dg = deg(c, x);
    }
    if ((st = out_value(c, n, 0, dg, &y))) return st;
    int r = shape_of(c, y)->rank;
    int64_t a = ir_attr_int(n, "axis", 0), off = 0;
    if (!norm_axis(a, r, &axis)) return bad_axis(c, n, a, r);
    for (int i = 0; i < n->n_in; i++) {
        if ((st = data_in(c, n, i, &x))) return st;
        pet_step *s = add_step(c, PET_COPY, ni, x, -1, y);
        if (!s) return nomem(c);
        for (int k = 0; k < r; k++) {
            s->u.copy.ext[k] = shape_of(c, x)->dims[k];
            s->u.copy.src_dim[k] = k;
            s->u.copy.src_step[k] = 1;
        }
        s->u.copy.ostart[axis] = off;
        off += shape_of(c, x)->dims[axis];
    }
    return off == shape_of(c, y)->dims[axis] ? IR_OK : geometry_mismatch(c, n);
}

static ir_status c_split(cc *c, int ni, const ir_node *n) {
    int x, y, axis;
    ir_status st;
    if ((st = data_in(c, n, 0, &x))) return st;
    int r = shape_of(c, x)->rank;
    int64_t a = ir_attr_int(n, "axis", 0), off = 0;
    if (!norm_axis(a, r, &axis)) return bad_axis(c, n, a, r);
    for (int i = 0; i < n->n_out; i++) {
        if (!ir_node_out(c->g, n, i)) continue;
        if ((st = out_value(c, n, i, deg(c, x), &y))) return st;
        pet_step *s = copy_step(c, ni, x, y);
        if (!s) return nomem(c);
        s->u.copy.src_start[axis] = off;
        off += shape_of(c, y)->dims[axis];
    }
    return off <= shape_of(c, x)->dims[axis] ? IR_OK : geometry_mismatch(c, n);
}

/* Slice's first index and step per dim, as the float kernel resolves them (ir_slice_resolve). */
static ir_status c_slice(cc *c, int ni, const ir_node *n) {
    int x, y;
    ir_status st;
    int64_t v[4][IR_MAX_RANK], first[IR_MAX_RANK], step[IR_MAX_RANK];
    int cnt[4];
    if ((st = data_in(c, n, 0, &x))) return st;
    for (int i = 0; i < 4; i++)
        if ((st = in_ints(c, n, i + 1, v[i], IR_MAX_RANK, &cnt[i]))) return st;
    if ((st = out_value(c, n, 0, deg(c, x), &y))) return st;
    const ir_shape *is = shape_of(c, x), *os = shape_of(c, y);
    ir_shape rs;
    if (cnt[0] < 0) return geometry_mismatch(c, n);
    if ((st = ir_slice_resolve(n, is, v[0], cnt[0], v[1], cnt[1], v[2], cnt[2], v[3], cnt[3], first,
                               step, &rs, c->d)))
        return st;
    if (!ir_shape_eq(&rs, os)) return geometry_mismatch(c, n);
    pet_step *s = copy_step(c, ni, x, y);
    if (!s) return nomem(c);
    for (int ax = 0; ax < is->rank; ax++) {
        s->u.copy.src_start[ax] = first[ax];
        s->u.copy.src_step[ax] = step[ax];
    }
    return IR_OK;
}

static ir_status c_pad(cc *c, int ni, const ir_node *n) {
    int x, y, nraw, naxes;
    ir_status st;
    int64_t raw[2 * IR_MAX_RANK], axes[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
    if ((st = data_in(c, n, 0, &x))) return st;
    if (strcmp(ir_attr_str(n, "mode", "constant"), "constant") != 0)
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "Pad mode '%s' (only constant)",
                            ir_attr_str(n, "mode", "constant"));
    if ((st = in_ints(c, n, 1, raw, 2 * IR_MAX_RANK, &nraw)) ||
        (st = in_ints(c, n, 3, axes, IR_MAX_RANK, &naxes)))
        return st;
    if (nraw == -2) {
        const int64_t *pv;
        nraw = ir_attr_ints(n, "pads", &pv);
        if (nraw < 0 || nraw > 2 * IR_MAX_RANK) return geometry_mismatch(c, n);
        memcpy(raw, pv, sizeof(int64_t) * (size_t)nraw);
    }
    /* the constant: an affine part unless it is a literal zero (or absent) */
    const ir_value *cv = ir_node_in(c->g, n, 2);
    bool zero = true;
    if (cv) {
        zero = cv->blob && !(cv->flags & IR_VF_INPUT) && !is_weight(cv) &&
               ir_load_f64(ir_value_data(cv), cv->dtype, 0) == 0;
    } else if (n->n_in <= 1) {
        zero = ir_attr_float(n, "value", 0.0f) == 0;
    }
    if (!zero) c->p->affine_dropped++;
    if ((st = out_value(c, n, 0, deg(c, x), &y))) return st;
    const ir_shape *is = shape_of(c, x), *os = shape_of(c, y);
    int r = is->rank, na = naxes == -2 ? r : naxes;
    if (nraw != 2 * na) return geometry_mismatch(c, n);
    for (int i = 0; i < r; i++) pb[i] = pe[i] = 0;
    for (int i = 0; i < na; i++) {
        int ax;
        int64_t a = naxes == -2 ? i : axes[i];
        if (!norm_axis(a, r, &ax)) return bad_axis(c, n, a, r);
        pb[ax] = raw[i];
        pe[ax] = raw[na + i];
    }
    if (!add_step(c, PET_ZERO, ni, -1, -1, y)) return nomem(c);
    pet_step *s = add_step(c, PET_COPY, ni, x, -1, y);
    if (!s) return nomem(c);
    for (int i = 0; i < r; i++) {
        if (is->dims[i] + pb[i] + pe[i] != os->dims[i]) return geometry_mismatch(c, n);
        int64_t lo = pb[i] > 0 ? pb[i] : 0, hi = is->dims[i] + pb[i];
        if (hi > os->dims[i]) hi = os->dims[i];
        if (hi < lo) hi = lo;
        s->u.copy.ext[i] = hi - lo;
        s->u.copy.ostart[i] = lo;
        s->u.copy.src_dim[i] = i;
        s->u.copy.src_start[i] = lo - pb[i];
        s->u.copy.src_step[i] = 1;
    }
    return IR_OK;
}

static ir_status c_expand_tile(cc *c, int ni, const ir_node *n, bool tile) {
    int x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = out_value(c, n, 0, deg(c, x), &y))) return st;
    const ir_shape *is = shape_of(c, x), *os = shape_of(c, y);
    if (is->rank > os->rank || (tile && is->rank != os->rank)) return geometry_mismatch(c, n);
    pet_step *s = add_step(c, PET_COPY, ni, x, -1, y);
    if (!s) return nomem(c);
    for (int i = 0; i < os->rank; i++) {
        int j = i - (os->rank - is->rank);
        s->u.copy.ext[i] = os->dims[i];
        s->u.copy.src_dim[i] = j;
        if (j < 0) continue;
        int64_t id = is->dims[j], od = os->dims[i];
        if (tile) {
            if (id == 0 || od % id) return geometry_mismatch(c, n);
            s->u.copy.src_step[i] = 1;
            s->u.copy.src_mod[i] = od > id ? id : 0;
        } else {
            if (id != od && id != 1) return geometry_mismatch(c, n);
            s->u.copy.src_step[i] = id == od ? 1 : 0; /* a size-1 dim broadcast */
        }
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- reductions */

/* REDUCE of x over mask into a value of shape ys; then, for a mean, a scale by 1/count. */
static ir_status reduce_steps(cc *c, int ni, const ir_node *n, int x, int y, const bool *mask,
                              bool keep, bool mean) {
    const ir_shape *is = shape_of(c, x);
    pet_reduce rd;
    memset(&rd, 0, sizeof rd);
    rd.rank = is->rank;
    int64_t count = 1;
    for (int i = 0, k = 0; i < is->rank; i++) {
        rd.reduced[i] = mask[i];
        if (mask[i]) {
            count *= is->dims[i];
            rd.out_dim[i] = -1;
            k += keep;
        } else {
            rd.out_dim[i] = k++;
        }
    }
    ir_status st;
    int sum = y;
    if (mean && (st = temp_value(c, n, shape_of(c, y), deg(c, x), &sum))) return st;
    pet_step *s = add_step(c, PET_REDUCE, ni, x, -1, sum);
    if (!s) return nomem(c);
    s->u.red = rd;
    if (mean) {
        if (count <= 0 || count >= (int64_t)PET_P)
            return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "a mean over %lld elements",
                                (long long)count);
        if (!(s = add_step(c, PET_SCALE, ni, sum, -1, y))) return nomem(c);
        s->u.scale = pet_inv((uint32_t)count);
    }
    return IR_OK;
}

static ir_status c_reduce(cc *c, int ni, const ir_node *n, bool mean) {
    int x, y, na;
    ir_status st;
    int64_t axes[2 * IR_MAX_RANK];
    if ((st = data_in(c, n, 0, &x))) return st;
    if ((st = in_ints(c, n, 1, axes, 2 * IR_MAX_RANK, &na))) return st;
    if (na == -2) {
        const int64_t *av;
        na = ir_attr_ints(n, "axes", &av);
        if (na > 2 * IR_MAX_RANK) return geometry_mismatch(c, n);
        for (int i = 0; i < na; i++) axes[i] = av[i];
    }
    if ((st = out_value(c, n, 0, deg(c, x), &y))) return st;
    int r = shape_of(c, x)->rank;
    bool noop = na <= 0 && ir_attr_int(n, "noop_with_empty_axes", 0) != 0;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0, mask[IR_MAX_RANK];
    if (noop) return add_step(c, PET_RESHAPE, ni, x, -1, y) ? IR_OK : nomem(c);
    for (int i = 0; i < r; i++) mask[i] = na <= 0;
    for (int i = 0; i < na; i++) {
        int ax;
        if (!norm_axis(axes[i], r, &ax)) return bad_axis(c, n, axes[i], r);
        mask[ax] = true;
    }
    return reduce_steps(c, ni, n, x, y, mask, keep, mean);
}

static ir_status c_global_avg(cc *c, int ni, const ir_node *n) {
    int x, y;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = out_value(c, n, 0, deg(c, x), &y))) return st;
    bool mask[IR_MAX_RANK];
    for (int i = 0; i < shape_of(c, x)->rank; i++) mask[i] = i >= 2;
    return reduce_steps(c, ni, n, x, y, mask, true, true);
}

/* ---------------------------------------------------------------- Einsum */

/* Einsum (ir-einsum.h) of one or two operands with no index named twice by one operand and no
 * summed index broadcast: the forms PyTorch exports. Indices one operand alone sums are reduced
 * first (PET_REDUCE); two operands are then copied into [batch, M..., K...] and
 * [batch, K..., N...] order, reshaped to one M, K and N each, multiplied (PET_MATMUL, batch dims
 * broadcast) and the [batch, M, N] product copied into the output's order. */
bool pet_einsum_ok(const ir_graph *g, const ir_node *n) {
    ir_einsum e;
    if (n->n_in < 1 || n->n_in > 2 || ir_einsum_of(g, n, &e, NULL) != IR_OK) return false;
    int nb = 0;
    for (int l = 0; l < e.n_labels; l++) {
        if (e.repeated[l]) return false;
        bool in[2] = {false, false};
        for (int k = 0; k < e.n_ops; k++)
            for (int i = 0; i < e.rank[k]; i++) in[k] |= e.label[k][i] == l;
        if (in[0] && in[1] && e.in_out[l]) {
            nb++;
            continue;
        }
        for (int k = 0; k < e.n_ops; k++) /* M, N, K and reduced indices are not broadcast */
            for (int i = 0; i < e.rank[k]; i++)
                if (e.label[k][i] == l && ir_node_in(g, n, k)->shape.dims[i] != e.size[l])
                    return false;
    }
    return nb <= PET_MAX_BATCH;
}

/* Sums the dims of x (labels lab[0..*nl)) whose label has sum[label] set; the kept labels stay in
 * order in lab. *res: x itself when none is summed. */
static ir_status es_reduce(cc *c, int ni, const ir_node *n, int x, int8_t *lab, int *nl,
                           const bool *sum, int *res) {
    const ir_shape *xs = shape_of(c, x);
    pet_reduce red = {.rank = xs->rank};
    ir_shape ks = {0};
    int kept = 0;
    bool any = false;
    for (int i = 0; i < xs->rank; i++) {
        red.reduced[i] = sum[lab[i]];
        red.out_dim[i] = red.reduced[i] ? -1 : kept;
        any |= red.reduced[i];
        if (!red.reduced[i]) {
            ks.dims[ks.rank++] = xs->dims[i];
            lab[kept++] = lab[i];
        }
    }
    *res = x;
    if (!any) return IR_OK;
    *nl = kept;
    ir_status st = temp_value(c, n, &ks, deg(c, x), res);
    if (st) return st;
    pet_step *s = add_step(c, PET_REDUCE, ni, x, -1, *res);
    if (!s) return nomem(c);
    s->u.red = red;
    return IR_OK;
}

/* x (labels lab[0..nl)) with its dims in the order of want[0..nw) (the same labels), into value
 * out (or a temporary when out < 0); *res is x when the order is already want's and out < 0. */
static ir_status es_permute(cc *c, int ni, const ir_node *n, int x, const int8_t *lab, int nl,
                            const int8_t *want, int nw, int out, int *res) {
    const ir_shape *xs = shape_of(c, x);
    int src[IR_MAX_RANK];
    bool same = nl == nw;
    ir_shape ws = {.rank = nw};
    for (int i = 0; i < nw; i++) {
        src[i] = -1;
        for (int j = 0; j < nl; j++)
            if (lab[j] == want[i]) src[i] = j;
        if (src[i] < 0) return geometry_mismatch(c, n);
        ws.dims[i] = xs->dims[src[i]];
        same &= src[i] == i;
    }
    ir_status st;
    if (out < 0) {
        if (same) {
            *res = x;
            return IR_OK;
        }
        if ((st = temp_value(c, n, &ws, deg(c, x), &out))) return st;
    }
    *res = out;
    if (c->p->values[out].numel != ir_shape_numel(&ws)) return geometry_mismatch(c, n);
    if (same) return add_step(c, PET_RESHAPE, ni, x, -1, out) ? IR_OK : nomem(c);
    pet_step *s = add_step(c, PET_COPY, ni, x, -1, out);
    if (!s) return nomem(c);
    for (int i = 0; i < nw; i++) {
        s->u.copy.ext[i] = ws.dims[i];
        s->u.copy.src_dim[i] = src[i];
        s->u.copy.src_step[i] = 1;
    }
    return IR_OK;
}

static ir_status es_reshape(cc *c, int ni, const ir_node *n, int x, const ir_shape *s, int *res) {
    ir_status st = temp_value(c, n, s, deg(c, x), res);
    if (st) return st;
    return add_step(c, PET_RESHAPE, ni, x, -1, *res) ? IR_OK : nomem(c);
}

static ir_status c_einsum(cc *c, int ni, const ir_node *n) {
    ir_einsum e;
    ir_status st;
    if (!pet_einsum_ok(c->g, n))
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "PET verifies Einsum of one or two operands without diagonals");
    if ((st = ir_einsum_of(c->g, n, &e, c->d))) return st;
    int x[2] = {-1, -1}, lab_n[2] = {0, 0}, y; /* x[1] unused with one operand */
    int8_t lab[2][IR_MAX_RANK];
    bool in[2][IR_EINSUM_MAX_LABELS] = {{false}}, sum[2][IR_EINSUM_MAX_LABELS] = {{false}};
    for (int k = 0; k < e.n_ops; k++) {
        if ((st = data_in(c, n, k, &x[k]))) return st;
        lab_n[k] = e.rank[k];
        for (int i = 0; i < e.rank[k]; i++) in[k][lab[k][i] = e.label[k][i]] = true;
    }
    for (int l = 0; l < e.n_labels; l++)
        for (int k = 0; k < e.n_ops; k++)
            sum[k][l] = in[k][l] && !e.in_out[l] && !(e.n_ops == 2 && in[1 - k][l]);
    int dg = deg(c, x[0]) + (e.n_ops == 2 ? deg(c, x[1]) : 0);
    if ((st = out_value(c, n, 0, dg, &y))) return st;
    for (int k = 0; k < e.n_ops; k++)
        if ((st = es_reduce(c, ni, n, x[k], lab[k], &lab_n[k], sum[k], &x[k]))) return st;
    if (e.n_ops == 1) {
        int r;
        return es_permute(c, ni, n, x[0], lab[0], lab_n[0], e.out, e.n_out, y, &r);
    }
    int8_t bl[IR_MAX_RANK], ml[IR_MAX_RANK], kl[IR_MAX_RANK], nl[IR_MAX_RANK];
    int nb = 0, nm = 0, nk = 0, nn = 0;
    int64_t M = 1, N = 1, K = 1;
    for (int l = 0; l < e.n_labels; l++) {
        if (in[0][l] && in[1][l] && e.in_out[l]) bl[nb++] = (int8_t)l;
        if (in[0][l] && in[1][l] && !e.in_out[l]) kl[nk++] = (int8_t)l, K *= e.size[l];
    }
    for (int i = 0; i < lab_n[0]; i++)
        if (!in[1][lab[0][i]]) ml[nm++] = lab[0][i], M *= e.size[lab[0][i]];
    for (int i = 0; i < lab_n[1]; i++)
        if (!in[0][lab[1][i]]) nl[nn++] = lab[1][i], N *= e.size[lab[1][i]];
    int8_t wa[IR_MAX_RANK], wb[IR_MAX_RANK], wr[IR_MAX_RANK];
    memcpy(wa, bl, (size_t)nb);
    memcpy(wa + nb, ml, (size_t)nm);
    memcpy(wa + nb + nm, kl, (size_t)nk);
    memcpy(wb, bl, (size_t)nb);
    memcpy(wb + nb, kl, (size_t)nk);
    memcpy(wb + nb + nk, nl, (size_t)nn);
    int a2, b2, a3, b3, prod;
    if ((st = es_permute(c, ni, n, x[0], lab[0], lab_n[0], wa, nb + nm + nk, -1, &a2)) ||
        (st = es_permute(c, ni, n, x[1], lab[1], lab_n[1], wb, nb + nk + nn, -1, &b2)))
        return st;
    pet_matmul mm;
    memset(&mm, 0, sizeof mm);
    ir_shape as = {.rank = nb + 2}, bs = {.rank = nb + 2}, ps = {.rank = nb + 2};
    for (int i = 0; i < nb; i++) {
        as.dims[i] = shape_of(c, a2)->dims[i];
        bs.dims[i] = shape_of(c, b2)->dims[i];
        ps.dims[i] = mm.batch[i] = e.size[bl[i]];
        mm.a_bdim[i] = as.dims[i] > 1 ? i : -1;
        mm.b_bdim[i] = bs.dims[i] > 1 ? i : -1;
    }
    as.dims[nb] = M, as.dims[nb + 1] = K;
    bs.dims[nb] = K, bs.dims[nb + 1] = N;
    ps.dims[nb] = M, ps.dims[nb + 1] = N;
    mm.nb = nb;
    mm.M = M, mm.N = N, mm.K = K;
    mm.a_mdim = mm.b_kdim = mm.o_mdim = nb;
    mm.a_kdim = mm.b_ndim = mm.o_ndim = nb + 1;
    if ((st = es_reshape(c, ni, n, a2, &as, &a3)) || (st = es_reshape(c, ni, n, b2, &bs, &b3)) ||
        (st = temp_value(c, n, &ps, dg, &prod)))
        return st;
    pet_step *s = add_step(c, PET_MATMUL, ni, a3, b3, prod);
    if (!s) return nomem(c);
    s->u.mm = mm;
    /* [batch, M, N] as [batch, M..., N...], then into the output's order */
    ir_shape rs = {.rank = nb + nm + nn};
    for (int i = 0; i < nb; i++) rs.dims[i] = ps.dims[i], wr[i] = bl[i];
    for (int i = 0; i < nm; i++) rs.dims[nb + i] = e.size[ml[i]], wr[nb + i] = ml[i];
    for (int i = 0; i < nn; i++) rs.dims[nb + nm + i] = e.size[nl[i]], wr[nb + nm + i] = nl[i];
    int r3, r;
    if ((st = es_reshape(c, ni, n, prod, &rs, &r3))) return st;
    return es_permute(c, ni, n, r3, wr, rs.rank, e.out, e.n_out, y, &r);
}

static ir_status c_cumsum(cc *c, int ni, const ir_node *n) {
    int x, y, cnt, axis;
    int64_t a;
    ir_status st;
    if ((st = data_in(c, n, 0, &x)) || (st = in_ints(c, n, 1, &a, 1, &cnt))) return st;
    if (cnt != 1) return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n, "axis must be one constant");
    if (!norm_axis(a, shape_of(c, x)->rank, &axis)) return bad_axis(c, n, a, shape_of(c, x)->rank);
    if ((st = out_value(c, n, 0, deg(c, x), &y))) return st;
    pet_step *s = add_step(c, PET_CUMSUM, ni, x, -1, y);
    if (!s) return nomem(c);
    s->u.cum.axis = axis;
    s->u.cum.exclusive = ir_attr_int(n, "exclusive", 0) != 0;
    s->u.cum.reverse = ir_attr_int(n, "reverse", 0) != 0;
    return IR_OK;
}

/* ---------------------------------------------------------------- driver */

static ir_status c_node(cc *c, int ni) {
    const ir_node *n = &c->g->nodes[ni];
    switch (n->op) {
    case IR_OP_Conv: return c_conv(c, ni, n, false);
    case IR_OP_ConvTranspose: return c_conv(c, ni, n, true);
    case IR_OP_AveragePool: return c_avgpool(c, ni, n);
    case IR_OP_GlobalAveragePool: return c_global_avg(c, ni, n);
    case IR_OP_MatMul: return c_matmul(c, ni, n);
    case IR_OP_Gemm: return c_gemm(c, ni, n);
    case IR_OP_Add: return c_binary(c, ni, n, PET_OP_ADD);
    case IR_OP_Sub: return c_binary(c, ni, n, PET_OP_SUB);
    case IR_OP_Mul: return c_binary(c, ni, n, PET_OP_MUL);
    case IR_OP_Sum: return c_sum(c, ni, n);
    case IR_OP_Neg: return scale_node(c, ni, n, PET_P - 1);
    case IR_OP_Identity: {
        int x;
        ir_status st = data_in(c, n, 0, &x);
        if (st) return st;
        c->p->ir_map[n->out[0]] = x; /* an alias: no step */
        return IR_OK;
    }
    case IR_OP_Reshape:
    case IR_OP_Flatten:
    case IR_OP_Squeeze:
    case IR_OP_Unsqueeze: return c_reshape(c, ni, n);
    case IR_OP_Transpose: return c_transpose(c, ni, n);
    case IR_OP_Concat: return c_concat(c, ni, n);
    case IR_OP_Split: return c_split(c, ni, n);
    case IR_OP_Slice: return c_slice(c, ni, n);
    case IR_OP_Pad: return c_pad(c, ni, n);
    case IR_OP_Expand: return c_expand_tile(c, ni, n, false);
    case IR_OP_Tile: return c_expand_tile(c, ni, n, true);
    case IR_OP_ReduceSum: return c_reduce(c, ni, n, false);
    case IR_OP_ReduceMean: return c_reduce(c, ni, n, true);
    case IR_OP_CumSum: return c_cumsum(c, ni, n);
    case IR_OP_Einsum: return c_einsum(c, ni, n);
    default:
        return ir_node_fail(c->d, IR_ERR_UNSUPPORTED, n,
                            "%s is not a multilinear op PET can verify", n->op_type);
    }
}

ir_status pet_prog_compile(const ir_graph *g, pet_prog **out, ir_diag *d) {
    *out = NULL;
    pet_prog *p = calloc(1, sizeof *p);
    cc c = {.g = g, .p = p, .d = d};
    bool *need_v = calloc((size_t)g->n_values + 1, sizeof *need_v);
    ir_status st = IR_OK;
    if (!p || !need_v) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory compiling a program");
        goto out;
    }
    p->n_ir_values = g->n_values;
    p->ir_map = pet_arena_alloc(p, sizeof(int) * (size_t)(g->n_values + 1));
    p->outputs = pet_arena_alloc(p, sizeof(int) * (size_t)(g->n_outputs + 1));
    if (!p->ir_map || !p->outputs) {
        st = nomem(&c);
        goto out;
    }
    for (int v = 0; v < g->n_values; v++) p->ir_map[v] = -1;
    /* the nodes some output depends on, from the last backwards (g->nodes is topological) */
    for (int i = 0; i < g->n_outputs; i++) need_v[g->outputs[i]] = true;
    for (int ni = g->n_nodes - 1; ni >= 0; ni--) {
        const ir_node *n = &g->nodes[ni];
        bool need = false;
        for (int k = 0; k < n->n_out; k++) need = need || (n->out[k] >= 0 && need_v[n->out[k]]);
        if (!need) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) need_v[n->in[k]] = true;
    }
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const ir_node *n = &g->nodes[ni];
        bool need = false;
        for (int k = 0; k < n->n_out; k++) need = need || (n->out[k] >= 0 && need_v[n->out[k]]);
        if (need && (st = c_node(&c, ni)) != IR_OK) goto out;
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i], pv = p->ir_map[v];
        if (pv < 0) { /* an output that is itself a graph input or a constant */
            const ir_value *iv = &g->values[v];
            if (!ir_dtype_is_float(iv->dtype) || iv->producer >= 0) {
                st = ir_diag_set(d, IR_ERR_UNSUPPORTED, "PET: output '%s' is not float data",
                                 iv->name);
                goto out;
            }
            bool var = (iv->flags & IR_VF_INPUT) || !iv->blob || is_weight(iv);
            pv = new_value(&c, var ? PET_V_VAR : PET_V_LITERAL, &iv->shape, iv->name, v);
            if (pv < 0) {
                st = nomem(&c);
                goto out;
            }
            p->values[pv].key = pet_var_key(iv->name);
            p->values[pv].degree = var ? 1 : 0;
            if (!var) {
                int64_t ne = p->values[pv].numel;
                uint32_t *lit = pet_arena_alloc(p, sizeof(uint32_t) * (size_t)(ne ? ne : 1));
                if (!lit) {
                    st = nomem(&c);
                    goto out;
                }
                for (int64_t e = 0; e < ne; e++)
                    if (!pet_from_double(ir_load_f64(ir_value_data(iv), iv->dtype, e), &lit[e])) {
                        st = ir_diag_set(d, IR_ERR_INVALID,
                                         "PET: constant output '%s' has no "
                                         "residue",
                                         iv->name);
                        goto out;
                    }
                p->values[pv].lit = lit;
            }
            p->ir_map[v] = pv;
        }
        p->outputs[p->n_outputs++] = pv;
        if (p->values[pv].degree > p->degree) p->degree = p->values[pv].degree;
    }
    int n_vars = 0;
    for (int v = 0; v < p->n_values; v++) n_vars += p->values[v].kind == PET_V_VAR;
    p->vars = pet_arena_alloc(p, sizeof(int) * (size_t)(n_vars + 1));
    if (!p->vars) {
        st = nomem(&c);
        goto out;
    }
    /* variables in IR value order, which both programs of a pair share by name */
    for (int v = 0; v < g->n_values; v++) {
        int pv = p->ir_map[v];
        if (pv >= 0 && p->values[pv].kind == PET_V_VAR && p->values[pv].ir_value == v)
            p->vars[p->n_vars++] = pv;
    }
out:
    free(need_v);
    if (st != IR_OK) {
        pet_prog_free(p);
        return st;
    }
    *out = p;
    return IR_OK;
}

int pet_prog_value_of(const pet_prog *p, int ir_value) {
    return ir_value >= 0 && ir_value < p->n_ir_values ? p->ir_map[ir_value] : -1;
}

int pet_prog_find_var(const pet_prog *p, const char *name) {
    for (int i = 0; i < p->n_vars; i++)
        if (strcmp(p->values[p->vars[i]].name, name) == 0) return i;
    return -1;
}
