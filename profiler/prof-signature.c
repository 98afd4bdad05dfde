/* prof-signature.c - the database key of a node: everything that decides how long its kernel
 * runs, and nothing that does not.
 *
 * In: the op's domain and name (strings, not the enum, so that adding an op to ir-ops.def does
 * not invalidate stored timings), every attribute (name, type, value; combined independently of
 * their order in the file), each input's position, dtype and shape, the values of small integer
 * constant inputs (they are attributes in input form since opset 13: Reshape's shape, Slice's
 * starts, ReduceSum's axes), and each output's dtype and shape.
 * Out: names of nodes and values, weight values, and whether a float input is a constant or
 * computed, so that the repeated blocks of a network share one measurement.
 * PROF_SIG_VERSION is mixed in first; bump it when the recipe changes, so stale entries are
 * simply never found again. */
#include "prof-impl.h"

#include <string.h>

#define PROF_SIG_VERSION 1u
#define SMALL_CONST_MAX 64 /* integer constants up to this many elements are hashed by value */

typedef struct hasher {
    uint64_t h;
} hasher;

static void put(hasher *s, const void *p, size_t n) {
    s->h = ir_hash_bytes(p, n, s->h);
}
static void put_u64(hasher *s, uint64_t v) {
    s->h = ir_mix64(s->h ^ ir_mix64(v + 0x9e3779b97f4a7c15ULL));
}
/* Strings carry their length so that ("ab","c") and ("a","bc") differ. */
static void put_str(hasher *s, const char *str) {
    size_t n = str ? strlen(str) : 0;
    put_u64(s, n);
    if (n) put(s, str, n);
}
static void put_shape(hasher *s, ir_dtype t, const ir_shape *sh) {
    put_u64(s, (uint64_t)(int64_t)t);
    put_u64(s, (uint64_t)sh->rank);
    if (sh->rank > 0) put(s, sh->dims, sizeof(int64_t) * (size_t)sh->rank);
}

static uint64_t attr_hash(const ir_attr *a) {
    hasher s = {0x617474720000ULL}; /* "attr" */
    put_str(&s, a->name);
    put_u64(&s, (uint64_t)a->type);
    switch (a->type) {
    case IR_ATTR_INT: put_u64(&s, (uint64_t)a->i); break;
    case IR_ATTR_FLOAT: put(&s, &a->f, sizeof a->f); break;
    case IR_ATTR_STRING: put_str(&s, a->s); break;
    case IR_ATTR_INTS:
        put_u64(&s, (uint64_t)a->n);
        if (a->n > 0) put(&s, a->ints, sizeof(int64_t) * (size_t)a->n);
        break;
    case IR_ATTR_FLOATS:
        put_u64(&s, (uint64_t)a->n);
        if (a->n > 0) put(&s, a->floats, sizeof(float) * (size_t)a->n);
        break;
    case IR_ATTR_STRINGS:
        put_u64(&s, (uint64_t)a->n);
        for (int i = 0; i < a->n; i++) put_str(&s, a->strings[i]);
        break;
    case IR_ATTR_TENSOR:
        put_shape(&s, a->t_dtype, &a->t_shape);
        if (a->t_blob) put(&s, ir_blob_data(a->t_blob), ir_blob_bytes(a->t_blob));
        break;
    }
    return s.h;
}

uint64_t prof_signature(const ir_graph *g, const ir_node *n) {
    hasher s = {0x7369676e00000000ULL ^ PROF_SIG_VERSION}; /* "sign" */
    const ir_op_def *def = ir_op_get(n->op);
    put_str(&s, def ? def->domain : n->domain);
    put_str(&s, def ? def->name : n->op_type);
    /* Attributes commute: a sum of well-mixed per-attribute hashes. */
    uint64_t attrs = 0;
    for (int i = 0; i < n->n_attrs; i++) attrs += ir_mix64(attr_hash(&n->attrs[i]));
    put_u64(&s, attrs);
    put_u64(&s, (uint64_t)n->n_in);
    for (int i = 0; i < n->n_in; i++) {
        const ir_value *v = ir_node_in(g, n, i);
        if (!v) {
            put_u64(&s, 0xab5e47ULL); /* an omitted optional input */
            continue;
        }
        put_shape(&s, v->dtype, &v->shape);
        int64_t numel = ir_shape_numel(&v->shape);
        if (v->blob && !ir_dtype_is_float(v->dtype) && numel <= SMALL_CONST_MAX &&
            ir_blob_bytes(v->blob) >= ir_value_bytes(v))
            put(&s, ir_blob_data(v->blob), ir_value_bytes(v));
    }
    put_u64(&s, (uint64_t)n->n_out);
    for (int i = 0; i < n->n_out; i++) {
        const ir_value *v = ir_node_out(g, n, i);
        if (v)
            put_shape(&s, v->dtype, &v->shape);
        else
            put_u64(&s, 0xab5e47ULL);
    }
    return s.h;
}

uint64_t prof_signature_tag(const char *tag) {
    hasher s = {0x63616c6962000000ULL ^ PROF_SIG_VERSION}; /* "calib" */
    put_str(&s, tag);
    return s.h;
}
