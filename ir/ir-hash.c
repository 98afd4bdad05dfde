/* ir-hash.c - ir_graph_hash: a structural fingerprint of a graph in the spirit of the
 * Weisfeiler-Lehman test (MAGIS Algorithm 3, GraphHash), free of node names, node ids and node
 * order: two graphs that differ only in those hash alike.
 *
 * A forward pass (g->nodes is topological) gives every node x = hash(op, attributes' values,
 * output dtypes and shapes, and per input the producer's x with the output index, or for a
 * resident its name, dtype and shape). A backward pass then gives y = hash(x, the sum over
 * every (user, input position) of hash(y_user, position, output index)), so a node also knows
 * who reads it: without it, rematerializing a value for user B or for user C would give two
 * graphs with the same multiset of forward hashes. The result hashes the sum of every y with
 * the graph outputs' producers. */
#include "ir.h"

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

uint64_t ir_graph_hash(const ir_graph *g) {
    int n = g->n_nodes;
    uint64_t *x = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    uint64_t *acc = calloc((size_t)n + 1, sizeof(uint64_t));
    if (!x || !acc) {
        free(x);
        free(acc);
        return 0;
    }
    for (int i = 0; i < n; i++) {
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
            if (v->producer >= 0) {
                const ir_node *p = &g->nodes[v->producer];
                int oi = 0;
                while (oi < p->n_out && p->out[oi] != vi) oi++;
                h = mix2(mix2(h, x[v->producer]), (uint64_t)oi);
            } else {
                h = hash_str(v->name, hash_shape(&v->shape, mix2(h, (uint64_t)v->dtype)));
            }
        }
        x[i] = h;
    }
    uint64_t sum = 0;
    for (int i = n - 1; i >= 0; i--) {
        const ir_node *nd = &g->nodes[i];
        uint64_t y = mix2(x[i], acc[i]);
        sum += y;
        for (int k = 0; k < nd->n_in; k++) {
            int vi = nd->in[k];
            if (vi < 0 || g->values[vi].producer < 0) continue;
            const ir_node *p = &g->nodes[g->values[vi].producer];
            int oi = 0;
            while (oi < p->n_out && p->out[oi] != vi) oi++;
            acc[g->values[vi].producer] += mix2(mix2(y, (uint64_t)k), (uint64_t)oi);
        }
    }
    uint64_t h = mix2(0x082efa98ec4e6c89ULL, sum);
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        h = mix2(h, v->producer >= 0 ? x[v->producer] : hash_str(v->name, 7));
    }
    free(x);
    free(acc);
    return h;
}
