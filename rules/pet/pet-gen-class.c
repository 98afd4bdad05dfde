/* pet-gen-class.c - what a mutant is, after the fact: its class label (the rules in pet-gen.h,
 * read off the mutant's nodes, never from how it was generated), its name-free structural hash,
 * and its cost under a cost model.
 *
 * Labelling traces where each dim of a value comes from ("provenance"): walking forward
 * through data-movement nodes (Reshape, Transpose, Flatten, Squeeze, Unsqueeze, Concat, Split,
 * Slice, Pad), every dim of a value holds elements of a set of dims of one source value (a
 * program input, a constant, or the output of any other node). A Concat joins the dims along
 * which its operands are parts (a split on the batch then a concat on the width puts the batch
 * into the width) and may join several sources. */
#include "pet-gen-impl.h"

#include <math.h>

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

const char *pet_mutant_class_name(int c) {
    static const char *const names[PET_MC_COUNT] = {"batch-to-width",
                                                    "batch-to-height",
                                                    "dilated-to-regular",
                                                    "merged-parallel",
                                                    "matmul-transpose",
                                                    "layout",
                                                    "other"};
    return c >= 0 && c < PET_MC_COUNT ? names[c] : "?";
}

/* ---------------------------------------------------------------- hashing */

static bool is_variable(const ir_value *v) {
    return (v->flags & (IR_VF_INPUT | IR_VF_PARAM | IR_VF_INITIALIZER)) || !v->blob;
}

static uint64_t hash_shape(uint64_t h, const ir_shape *s) {
    h = mixh(h, (uint64_t)s->rank);
    for (int i = 0; i < s->rank; i++) h = mixh(h, (uint64_t)s->dims[i]);
    return h;
}

/* An attribute by name and value; summed over a node's attributes, so their order is free. */
static uint64_t hash_attr(const ir_attr *a) {
    uint64_t h = ir_hash_bytes(a->name, strlen(a->name), (uint64_t)a->type + 0x77);
    switch (a->type) {
    case IR_ATTR_INT: return mixh(h, (uint64_t)a->i);
    case IR_ATTR_FLOAT: {
        uint32_t b;
        memcpy(&b, &a->f, sizeof b);
        return mixh(h, b);
    }
    case IR_ATTR_STRING: return a->s ? ir_hash_bytes(a->s, strlen(a->s), h) : h;
    case IR_ATTR_INTS: return a->n ? ir_hash_bytes(a->ints, sizeof(int64_t) * (size_t)a->n, h) : h;
    case IR_ATTR_FLOATS:
        return a->n ? ir_hash_bytes(a->floats, sizeof(float) * (size_t)a->n, h) : h;
    case IR_ATTR_STRINGS:
        for (int i = 0; i < a->n; i++) h = ir_hash_bytes(a->strings[i], strlen(a->strings[i]), h);
        return h;
    case IR_ATTR_TENSOR:
        h = hash_shape(mixh(h, (uint64_t)a->t_dtype), &a->t_shape);
        return a->t_blob ? ir_hash_bytes(ir_blob_data(a->t_blob), ir_blob_bytes(a->t_blob), h) : h;
    }
    return h;
}

/* A Conv's attributes, defaults filled in, so that spelled-out defaults hash as absent ones. */
static uint64_t hash_conv_attrs(const ir_graph *g, const ir_node *n) {
    const ir_value *x = ir_node_in(g, n, 0);
    int S = x ? x->shape.rank - 2 : 0;
    uint64_t h = mixh(0xc0, (uint64_t)ir_attr_int(n, "group", 1));
    static const char *const names[3] = {"strides", "dilations", "pads"};
    for (int a = 0; a < 3; a++) {
        const int64_t *p;
        int k = ir_attr_ints(n, names[a], &p), want = a == 2 ? 2 * S : S;
        for (int i = 0; i < want; i++) h = mixh(h, (uint64_t)(k == want ? p[i] : a == 2 ? 0 : 1));
    }
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    return ir_hash_bytes(ap, strlen(ap), h);
}

uint64_t pet_gen_graph_hash(const ir_graph *g) {
    uint64_t *x = malloc(sizeof(uint64_t) * ((size_t)g->n_nodes + 1));
    if (!x) return 0;
    uint64_t sum = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        uint64_t h = mixh(0x9e75, (uint64_t)n->op);
        if (n->op == IR_OP_Conv) {
            h = mixh(h, hash_conv_attrs(g, n));
        } else {
            uint64_t as = 0;
            for (int a = 0; a < n->n_attrs; a++) as += hash_attr(&n->attrs[a]);
            h = mixh(h, as);
        }
        for (int k = 0; k < n->n_out; k++) {
            const ir_value *v = ir_node_out(g, n, k);
            h = v ? hash_shape(mixh(h, (uint64_t)v->dtype), &v->shape) : mixh(h, 0xdead);
        }
        for (int k = 0; k < n->n_in; k++) {
            int vi = n->in[k];
            if (vi < 0) {
                h = mixh(h, 0xab5e);
                continue;
            }
            const ir_value *v = &g->values[vi];
            if (v->producer >= 0) {
                const ir_node *p = &g->nodes[v->producer];
                int oi = 0;
                while (oi < p->n_out && p->out[oi] != vi) oi++;
                h = mixh(mixh(h, x[v->producer]), (uint64_t)oi);
            } else if (is_variable(v)) {
                h = ir_hash_bytes(v->name, strlen(v->name), hash_shape(mixh(h, 1), &v->shape));
            } else {
                h = hash_shape(mixh(mixh(h, 2), (uint64_t)v->dtype), &v->shape);
                h = ir_hash_bytes(ir_blob_data(v->blob), ir_blob_bytes(v->blob), h);
            }
        }
        x[i] = h;
        sum += mixh(h, 0x5u);
    }
    uint64_t h = mixh(0x0e7, sum);
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        if (v->producer >= 0) {
            const ir_node *p = &g->nodes[v->producer];
            int oi = 0;
            while (oi < p->n_out && p->out[oi] != g->outputs[i]) oi++;
            h = mixh(mixh(h, x[v->producer]), (uint64_t)oi);
        } else {
            h = ir_hash_bytes(v->name, strlen(v->name), h);
        }
    }
    free(x);
    return h;
}

/* ---------------------------------------------------------------- cost */

double pet_gen_cost(prof_model *m, const ir_graph *g) {
    unsigned char *w = gen_weight_values(g);
    double s = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool pre = w != NULL;
        for (int k = 0; k < n->n_out && pre; k++) pre = n->out[k] < 0 || w[n->out[k]];
        if (!pre) s += prof_node_seconds(m, g, n);
    }
    free(w);
    return s;
}

/* ---------------------------------------------------------------- provenance */

typedef struct prov {
    int src;                    /* the source value, -1 when several */
    int nsrc;                   /* distinct sources (a concat of several) */
    uint16_t mask[IR_MAX_RANK]; /* per dim: the source dims whose elements it holds */
    uint16_t part;              /* source dims along which it is only a part (split, slice) */
} prov;

static void prov_self(prov *p, int v, int rank) {
    memset(p, 0, sizeof *p);
    p->src = v;
    p->nsrc = 1;
    for (int d = 0; d < rank; d++) p->mask[d] = (uint16_t)(1u << d);
}

/* A reshape: dims grouped where the running products of both shapes meet; every output dim of
 * a group holds every input dim of the group (size-1 dims hold nothing). */
static void prov_reshape(const prov *in, const ir_shape *si, const ir_shape *so, prov *out) {
    *out = *in;
    memset(out->mask, 0, sizeof out->mask);
    int i = 0, o = 0;
    while (i < si->rank || o < so->rank) {
        while (i < si->rank && si->dims[i] == 1) i++;
        while (o < so->rank && so->dims[o] == 1) o++;
        if (i >= si->rank || o >= so->rank) break;
        int i0 = i, o0 = o;
        int64_t pi = si->dims[i++], po = so->dims[o++];
        while (pi != po) {
            if (pi < po && i < si->rank)
                pi *= si->dims[i++];
            else if (o < so->rank)
                po *= so->dims[o++];
            else
                break;
        }
        uint16_t m = 0;
        for (int k = i0; k < i; k++) m |= in->mask[k];
        for (int k = o0; k < o; k++)
            if (so->dims[k] > 1) out->mask[k] = m;
    }
}

/* Provenance of every value of g (forward over the nodes). malloc'd; NULL when out of memory. */
static prov *prov_all(const ir_graph *g) {
    prov *p = malloc(sizeof(prov) * ((size_t)g->n_values + 1));
    if (!p) return NULL;
    for (int v = 0; v < g->n_values; v++) prov_self(&p[v], v, g->values[v].shape.rank);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->n_in < 1 || n->in[0] < 0) continue;
        const prov *a = &p[n->in[0]];
        const ir_shape *si = &g->values[n->in[0]].shape;
        switch (n->op) {
        case IR_OP_Transpose: {
            const int64_t *perm;
            int k = ir_attr_ints(n, "perm", &perm);
            prov *o = &p[n->out[0]];
            *o = *a;
            for (int d = 0; d < si->rank; d++)
                o->mask[d] = a->mask[k == si->rank ? perm[d] : si->rank - 1 - d];
            break;
        }
        case IR_OP_Reshape:
        case IR_OP_Flatten:
        case IR_OP_Squeeze:
        case IR_OP_Unsqueeze:
            prov_reshape(a, si, &g->values[n->out[0]].shape, &p[n->out[0]]);
            break;
        case IR_OP_Pad: p[n->out[0]] = *a; break;
        case IR_OP_Split:
        case IR_OP_Slice: {
            int r = si->rank, ax = 0;
            if (n->op == IR_OP_Split) {
                ax = (int)ir_attr_int(n, "axis", 0);
            } else {
                const ir_value *axv = ir_node_in(g, n, 3);
                ax = axv && axv->blob && ir_shape_numel(&axv->shape) == 1
                         ? (int)ir_load_i64(ir_value_data(axv), axv->dtype, 0)
                         : -1;
            }
            if (ax < 0) ax += r;
            for (int k = 0; k < n->n_out; k++) {
                if (n->out[k] < 0) continue;
                prov *o = &p[n->out[k]];
                *o = *a;
                if (ax >= 0 && ax < r) o->part |= a->mask[ax];
            }
            break;
        }
        case IR_OP_Concat: {
            int r = si->rank, ax = (int)ir_attr_int(n, "axis", 0);
            if (ax < 0) ax += r;
            prov *o = &p[n->out[0]];
            prov acc = *a;
            uint16_t parts = a->part;
            int srcs[64], ns = 0;
            for (int k = 0; k < n->n_in && k < 64; k++) {
                const prov *b = &p[n->in[k]];
                bool seen = false;
                for (int q = 0; q < ns; q++) seen = seen || srcs[q] == b->src;
                if (!seen) srcs[ns++] = b->src;
                for (int d = 0; d < r; d++) acc.mask[d] |= b->mask[d];
                parts |= b->part;
                if (b->nsrc > 1) ns += b->nsrc - 1;
            }
            acc.nsrc = ns;
            acc.src = ns == 1 ? a->src : -1;
            if (ax >= 0 && ax < r) acc.mask[ax] |= parts;
            acc.part = parts;
            *o = acc;
            break;
        }
        default: break; /* a computed value is its own source */
        }
    }
    return p;
}

/* ---------------------------------------------------------------- classes */

static bool is_compute(ir_op_kind op) {
    return op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_MatMul || op == IR_OP_Gemm;
}

static bool is_movement(ir_op_kind op) {
    return op == IR_OP_Reshape || op == IR_OP_Transpose || op == IR_OP_Concat ||
           op == IR_OP_Split || op == IR_OP_Slice || op == IR_OP_Pad || op == IR_OP_Flatten ||
           op == IR_OP_Squeeze || op == IR_OP_Unsqueeze;
}

static bool all_dilations_one(const ir_node *n) {
    const int64_t *d;
    int k = ir_attr_ints(n, "dilations", &d);
    for (int i = 0; i < k; i++)
        if (d[i] != 1) return false;
    return true;
}

/* Whether the original has a dilated conv with a weight named as the resident wv of m. */
static bool orig_dilated_weight(const ir_graph *orig, const char *wname) {
    for (int i = 0; i < orig->n_nodes; i++) {
        const ir_node *n = &orig->nodes[i];
        if (n->op != IR_OP_Conv || all_dilations_one(n)) continue;
        const ir_value *w = ir_node_in(orig, n, 1);
        if (w && !strcmp(w->name, wname)) return true;
    }
    return false;
}

/* Whether p swaps its source's last two dims (rank r >= 2, the source of rank r too). */
static bool swaps_last_two(const ir_graph *m, const prov *p, int r) {
    if (r < 2 || p->src < 0 || m->values[p->src].shape.rank != r) return false;
    return (p->mask[r - 1] & (1u << (r - 2))) && (p->mask[r - 2] & (1u << (r - 1)));
}

int pet_mutant_classify(const ir_graph *orig, const ir_graph *m) {
    prov *p = prov_all(m);
    if (!p) return PET_MC_OTHER;
    int cls = PET_MC_COUNT;
    /* 1. dilated-to-regular */
    for (int i = 0; i < m->n_nodes && cls == PET_MC_COUNT; i++) {
        const ir_node *n = &m->nodes[i];
        if (n->op != IR_OP_Conv || !all_dilations_one(n)) continue;
        const prov *w = &p[n->in[1]], *x = &p[n->in[0]];
        /* on the input rearranged: its batch holds elements of spatial dims (the phases) */
        if (w->src >= 0 && m->values[w->src].producer < 0 &&
            orig_dilated_weight(orig, m->values[w->src].name) && x->src >= 0 && (x->mask[0] & ~3u))
            cls = PET_MC_DILATED_TO_REGULAR;
    }
    /* 2. batch-to-width / -height */
    for (int i = 0; i < m->n_nodes && cls == PET_MC_COUNT; i++) {
        const ir_node *n = &m->nodes[i];
        if (n->op != IR_OP_Conv) continue;
        const prov *x = &p[n->in[0]];
        int r = m->values[n->in[0]].shape.rank;
        if (x->src < 0 || m->values[x->src].producer >= 0) continue;
        const ir_shape *ss = &m->values[x->src].shape;
        if (ss->rank < 3 || ss->dims[0] < 2) continue;
        if (x->mask[r - 1] & 1u)
            cls = PET_MC_BATCH_TO_WIDTH;
        else if (r >= 4 && (x->mask[r - 2] & 1u))
            cls = PET_MC_BATCH_TO_HEIGHT;
    }
    /* 3. merged-parallel */
    if (cls == PET_MC_COUNT) {
        int co = 0, cm = 0;
        bool merged = false;
        for (int i = 0; i < orig->n_nodes; i++) co += is_compute(orig->nodes[i].op);
        for (int i = 0; i < m->n_nodes; i++) {
            const ir_node *n = &m->nodes[i];
            if (!is_compute(n->op)) continue;
            cm++;
            for (int k = 0; k < 2 && k < n->n_in; k++) merged = merged || p[n->in[k]].nsrc >= 2;
        }
        if (cm < co && merged) cls = PET_MC_MERGED_PARALLEL;
    }
    /* 4. matmul-transpose */
    for (int i = 0; i < m->n_nodes && cls == PET_MC_COUNT; i++) {
        const ir_node *n = &m->nodes[i];
        if (n->op != IR_OP_MatMul && n->op != IR_OP_Gemm) continue;
        for (int k = 0; k < 2; k++) {
            const ir_value *v = &m->values[n->in[k]];
            if (v->producer >= 0 && swaps_last_two(m, &p[n->in[k]], v->shape.rank))
                cls = PET_MC_MATMUL_TRANSPOSE;
        }
        for (int j = 0; j < m->n_nodes; j++) { /* the product read through a transpose */
            const ir_node *u = &m->nodes[j];
            if (u->op == IR_OP_Transpose && u->in[0] == n->out[0] &&
                swaps_last_two(m, &p[u->out[0]], m->values[u->out[0]].shape.rank))
                cls = PET_MC_MATMUL_TRANSPOSE;
        }
    }
    /* 5. layout, 6. other */
    for (int i = 0; i < m->n_nodes && cls == PET_MC_COUNT; i++)
        if (is_movement(m->nodes[i].op)) cls = PET_MC_LAYOUT;
    free(p);
    return cls == PET_MC_COUNT ? PET_MC_OTHER : cls;
}
