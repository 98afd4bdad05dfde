/* ir-hash.c - ir_graph_hash: a structural fingerprint of a graph in the spirit of the
 * Weisfeiler-Lehman test (MAGIS Algorithm 3, GraphHash), free of node names, node ids and node
 * order: two graphs that differ only in those hash alike.
 *
 * A forward pass (g->nodes is topological) gives every node x = hash(op, attributes' values,
 * output dtypes and shapes, and per input the producer's x with the output index, or for a
 * resident its name, dtype and shape). Then every node gets z = hash(x, the sum over every
 * (user, input position, output index) of hash(x_user, position, output index)), so a node also
 * knows who reads it: a rematerialized copy has its original's x, and without z recomputing a
 * value for user B or for user C would give two graphs with the same multiset of forward
 * hashes. The result hashes the sum of every z with the graph outputs' producers' x.
 *
 * Incremental form (ir_graph_hash_update): x depends on a node and its ancestors only, z on the
 * node, its x and its users' x. After a rewrite that touched some nodes (added, removed,
 * rewired, changed), x changes only downstream of them, and z only there and one edge above
 * (a producer whose users changed), so the update recomputes those and reuses the parent's
 * per-node hashes for everything else; the sum of z is adjusted by differences. The costly
 * part of a node's hash (attributes, shapes, constant tensors) is paid for recomputed nodes
 * only; the rest is a pass over ids and edges. */
#include "ir.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix2(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

static uint64_t hash_str(const char *s, uint64_t seed) {
    return s ? ir_hash_bytes(s, strlen(s), seed) : mix2(seed, 0x5bd1e995ULL);
}

static uint64_t hash_shape(const ir_shape *s, uint64_t h) {
    h = mix2(h, (uint64_t)s->rank);
    for (int i = 0; i < s->rank; i++) h = mix2(h, (uint64_t)s->dims[i]);
    return h;
}

static uint64_t hash_attr(const ir_attr *a, uint64_t h) {
    h = hash_str(a->name, mix2(h, (uint64_t)a->type));
    switch (a->type) {
    case IR_ATTR_INT: return mix2(h, (uint64_t)a->i);
    case IR_ATTR_FLOAT: {
        uint32_t b;
        memcpy(&b, &a->f, sizeof b);
        return mix2(h, b);
    }
    case IR_ATTR_STRING: return hash_str(a->s, h);
    case IR_ATTR_INTS:
        return a->n > 0 ? ir_hash_bytes(a->ints, sizeof(int64_t) * (size_t)a->n, h) : h;
    case IR_ATTR_FLOATS:
        return a->n > 0 ? ir_hash_bytes(a->floats, sizeof(float) * (size_t)a->n, h) : h;
    case IR_ATTR_STRINGS:
        for (int i = 0; i < a->n; i++) h = hash_str(a->strings[i], h);
        return h;
    case IR_ATTR_TENSOR:
        h = hash_shape(&a->t_shape, mix2(h, (uint64_t)a->t_dtype));
        if (a->t_blob) h = ir_hash_bytes(ir_blob_data(a->t_blob), ir_blob_bytes(a->t_blob), h);
        return h;
    }
    return h;
}

/* The output index of value vi among producer p's outputs. */
static int out_index(const ir_node *p, int vi) {
    int oi = 0;
    while (oi < p->n_out && p->out[oi] != vi) oi++;
    return oi;
}

/* x of node i: its own content and its inputs' producers' x (x_of: by node index). */
static uint64_t node_x(const ir_graph *g, int i, const uint64_t *x_of) {
    const ir_node *nd = &g->nodes[i];
    uint64_t h = mix2(0x243f6a8885a308d3ULL, (uint64_t)nd->op);
    if (nd->op == IR_OP_OPAQUE) h = hash_str(nd->op_type, hash_str(nd->domain, h));
    h = mix2(h, (uint64_t)nd->n_attrs);
    for (int k = 0; k < nd->n_attrs; k++)
        h = mix2(h, hash_attr(&nd->attrs[k], 0x13198a2e03707344ULL));
    h = mix2(h, (uint64_t)nd->n_out);
    for (int k = 0; k < nd->n_out; k++) {
        const ir_value *v = &g->values[nd->out[k]];
        h = hash_shape(&v->shape, mix2(h, (uint64_t)v->dtype));
        h = mix2(h, (v->flags & IR_VF_OUTPUT) ? 1 : 0);
    }
    h = mix2(h, (uint64_t)nd->n_in);
    for (int k = 0; k < nd->n_in; k++) {
        int vi = nd->in[k];
        if (vi < 0) {
            h = mix2(h, 0xa4093822299f31d0ULL);
            continue;
        }
        const ir_value *v = &g->values[vi];
        if (v->producer >= 0)
            h = mix2(mix2(h, x_of[v->producer]), (uint64_t)out_index(&g->nodes[v->producer], vi));
        else
            h = hash_str(v->name, hash_shape(&v->shape, mix2(h, (uint64_t)v->dtype)));
    }
    return h;
}

/* What user node u contributes, through its input k, to its producer's z. */
static uint64_t user_term(const ir_graph *g, const ir_node *u, int k, uint64_t x_u) {
    int vi = u->in[k];
    return mix2(mix2(x_u, (uint64_t)k), (uint64_t)out_index(&g->nodes[g->values[vi].producer], vi));
}

/* The graph's hash from the sum of z and the outputs' producers' x (x_of: by node index). */
static uint64_t finish(const ir_graph *g, uint64_t sum, const uint64_t *x_of) {
    uint64_t h = mix2(0x082efa98ec4e6c89ULL, sum);
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        h = mix2(h, v->producer >= 0 ? x_of[v->producer] : hash_str(v->name, 7));
    }
    return h;
}

static uint32_t id_cap(const ir_graph *g) {
    uint32_t cap = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id + 1 > cap) cap = g->nodes[i].id + 1;
    return cap;
}

void ir_hash_memo_free(ir_hash_memo *m) {
    if (!m) return;
    free(m->x);
    free(m->z);
    memset(m, 0, sizeof *m);
}

/* The full computation; with m, the per-node hashes are kept by id. */
static uint64_t hash_full(const ir_graph *g, ir_hash_memo *m) {
    int n = g->n_nodes;
    uint64_t *x = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    uint64_t *acc = calloc((size_t)n + 1, sizeof(uint64_t));
    uint32_t cap = m ? id_cap(g) : 0;
    if (m) {
        memset(m, 0, sizeof *m);
        m->x = calloc((size_t)cap + 1, sizeof(uint64_t));
        m->z = calloc((size_t)cap + 1, sizeof(uint64_t));
        m->cap = cap;
    }
    if (!x || !acc || (m && (!m->x || !m->z))) {
        free(x);
        free(acc);
        ir_hash_memo_free(m);
        return 0;
    }
    for (int i = 0; i < n; i++) x[i] = node_x(g, i, x);
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int vi = nd->in[k];
            if (vi >= 0 && g->values[vi].producer >= 0)
                acc[g->values[vi].producer] += user_term(g, nd, k, x[i]);
        }
    }
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t z = mix2(x[i], acc[i]);
        sum += z;
        if (m) {
            m->x[g->nodes[i].id] = x[i];
            m->z[g->nodes[i].id] = z;
        }
    }
    if (m) m->sum = sum;
    uint64_t h = finish(g, sum, x);
    free(x);
    free(acc);
    return h;
}

uint64_t ir_graph_hash(const ir_graph *g) {
    return hash_full(g, NULL);
}

uint64_t ir_graph_hash_memo(const ir_graph *g, ir_hash_memo *m) {
    return hash_full(g, m);
}

uint64_t ir_graph_hash_update(const ir_graph *g, const ir_graph *pg, const ir_hash_memo *pm,
                              const uint32_t *touched, int n_touched, ir_hash_memo *out) {
    int n = g->n_nodes;
    uint32_t cap = id_cap(g);
    memset(out, 0, sizeof *out);
    out->x = malloc(sizeof(uint64_t) * ((size_t)cap + 1));
    out->z = malloc(sizeof(uint64_t) * ((size_t)cap + 1));
    out->cap = cap;
    uint64_t *x = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    /* per node index: 1 = touched or new, 2 = x changed, 4 = z to recompute */
    unsigned char *f = calloc((size_t)n + 1, 1);
    int *index = malloc(sizeof(int) * ((size_t)cap + 1)); /* id -> node index in g, or -1 */
    uint64_t *acc = NULL;
    if (!out->x || !out->z || !x || !f || !index) goto nomem;
    for (uint32_t id = 0; id < cap; id++) index[id] = -1;
    for (int i = 0; i < n; i++) index[g->nodes[i].id] = i;
    uint64_t sum = pm->sum;
    for (int t = 0; t < n_touched; t++) {
        uint32_t id = touched[t];
        if (id < cap && index[id] >= 0) f[index[id]] |= 5;
    }
    /* x: forward, recomputed for touched or new nodes and below any changed x */
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        bool known = nd->id < pm->cap && (pm->x[nd->id] || pm->z[nd->id]);
        bool need = (f[i] & 1) || !known;
        for (int k = 0; !need && k < nd->n_in; k++) {
            int vi = nd->in[k];
            need = vi >= 0 && g->values[vi].producer >= 0 && (f[g->values[vi].producer] & 2);
        }
        if (!need) {
            x[i] = pm->x[nd->id];
            continue;
        }
        x[i] = node_x(g, i, x);
        f[i] |= 4;
        if (!known || x[i] != pm->x[nd->id]) f[i] |= 2;
    }
    /* z: where x changed or the node was touched, and at the producers of those (their users'
     * x or the users themselves changed); also at the touched nodes' producers in pg, whose
     * users may have moved away */
    for (int i = 0; i < n; i++) {
        if (!(f[i] & 3)) continue;
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int vi = nd->in[k];
            if (vi >= 0 && g->values[vi].producer >= 0) f[g->values[vi].producer] |= 4;
        }
    }
    if (pg && pg->n_nodes > 0) {
        uint32_t pcap = id_cap(pg);
        int *pindex = malloc(sizeof(int) * ((size_t)pcap + 1));
        if (!pindex) goto nomem;
        for (uint32_t id = 0; id < pcap; id++) pindex[id] = -1;
        for (int j = 0; j < pg->n_nodes; j++) pindex[pg->nodes[j].id] = j;
        for (int t = 0; t < n_touched; t++) {
            if (touched[t] >= pcap || pindex[touched[t]] < 0) continue;
            const ir_node *pn = &pg->nodes[pindex[touched[t]]];
            for (int k = 0; k < pn->n_in; k++) {
                int vi = pn->in[k];
                if (vi < 0 || pg->values[vi].producer < 0) continue;
                uint32_t pid = pg->nodes[pg->values[vi].producer].id;
                if (pid < cap && index[pid] >= 0) f[index[pid]] |= 4;
            }
        }
        free(pindex);
    }
    /* the parent's nodes that are gone leave the sum */
    for (uint32_t id = 0; id < pm->cap; id++)
        if ((pm->x[id] || pm->z[id]) && (id >= cap || index[id] < 0)) sum -= pm->z[id];
    if (!(acc = calloc((size_t)n + 1, sizeof(uint64_t)))) goto nomem;
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int vi = nd->in[k];
            if (vi < 0) continue;
            int p = g->values[vi].producer;
            if (p >= 0 && (f[p] & 4)) acc[p] += user_term(g, nd, k, x[i]);
        }
    }
    memset(out->x, 0, sizeof(uint64_t) * ((size_t)cap + 1));
    memset(out->z, 0, sizeof(uint64_t) * ((size_t)cap + 1));
    for (int i = 0; i < n; i++) {
        uint32_t id = g->nodes[i].id;
        bool known = id < pm->cap && (pm->x[id] || pm->z[id]);
        uint64_t z = known ? pm->z[id] : 0;
        if (f[i] & 4) {
            uint64_t nz = mix2(x[i], acc[i]);
            sum += nz - z;
            z = nz;
        }
        out->x[id] = x[i];
        out->z[id] = z;
    }
    out->sum = sum;
    uint64_t h = finish(g, sum, x);
    free(x);
    free(f);
    free(index);
    free(acc);
    return h;
nomem:
    free(x);
    free(f);
    free(index);
    free(acc);
    ir_hash_memo_free(out);
    return 0;
}
