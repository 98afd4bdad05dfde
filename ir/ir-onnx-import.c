/* ir-onnx-import.c - ONNX ModelProto -> ir_graph.
 *
 * The steps run in a fixed order, each relying on the previous ones: opset check;
 * initializers; graph inputs (shapes resolved with --shape); nodes (outputs first, so inputs
 * may refer to nodes later in the file); the unsupported-op report (every op type at once);
 * graph outputs; a stable topological sort; data/parameter classification; then shape
 * inference and constant folding node by node (Reshape's inference needs the folded data of
 * the shape sub-graph before it); pruning; validation.
 *
 * Invariants: every message is prefixed with the file name once, at the end; on any failure
 * the caller gets NULL and nothing leaks (the graph owns all it allocated, the protobuf
 * message is freed in one call). */
#include "ir-expand-attn.h"
#include "ir-fold.h"
#include "ir-onnx-functions.h"
#include "ir-onnx.h"

#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- name -> value id */

/* Open addressing over the graph's value names (arena strings, so the map never copies). */
typedef struct name_map {
    const char **keys;
    int *vals;
    size_t cap, count;
} name_map;

static void map_free(name_map *m) {
    free(m->keys);
    free(m->vals);
}

static size_t map_slot(const name_map *m, const char *key) {
    size_t mask = m->cap - 1, i = (size_t)ir_hash_bytes(key, strlen(key), 0) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
    return i;
}

static int map_get(const name_map *m, const char *key) {
    if (!m->cap) return -1;
    size_t i = map_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Inserts key (which must be absent). False on out of memory. */
static bool map_put(name_map *m, const char *key, int val) {
    if (2 * (m->count + 1) > m->cap) {
        name_map n = {0};
        n.cap = m->cap ? 2 * m->cap : 256;
        n.keys = calloc(n.cap, sizeof *n.keys);
        n.vals = calloc(n.cap, sizeof *n.vals);
        if (!n.keys || !n.vals) {
            map_free(&n);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = map_slot(&n, m->keys[i]);
                n.keys[j] = m->keys[i];
                n.vals[j] = m->vals[i];
            }
        n.count = m->count;
        map_free(m);
        *m = n;
    }
    size_t i = map_slot(m, key);
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return true;
}

/* ---------------------------------------------------------------- importer state */

typedef struct importer {
    const char *file;
    const ir_import_opts *opts;
    Onnx__GraphProto *gp;
    const Onnx__ModelProto *mp;
    ir_graph *g;
    ir_diag *d;
    name_map values;     /* value name -> id */
    name_map infos;      /* value_info / graph output name -> index (+1 for outputs: see below) */
    bool *folded_init;   /* per initializer (= value id): exported by magpie as a folded constant */
    unsigned char *skip; /* per node: 1 unsupported, 2 unsupported and cannot be opaque */
    int *hint_of;        /* per graph input (gp->input): its opts->input_shape_* entry, or -1 */
    /* symbolic dimensions bound by those shapes (bind_file_dims), each with where it came from */
    struct {
        const char *param, *input, *label;
        int64_t size;
    } syms[64];
    int n_syms;
} importer;

static const char *nz(const char *s) {
    return s ? s : "";
}

static bool is_default_domain(const char *dom) {
    return !dom || !*dom || strcmp(dom, "ai.onnx") == 0;
}

static ir_status nomem(importer *im) {
    return ir_diag_set(im->d, IR_ERR_NOMEM, "out of memory");
}

/* Opset of a domain as the file declares it (1 when it declares none). */
static int64_t domain_opset(const importer *im, const char *dom) {
    for (size_t i = 0; i < im->mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = im->mp->opset_import[i];
        bool match =
            is_default_domain(dom) ? is_default_domain(o->domain) : strcmp(nz(o->domain), dom) == 0;
        if (match) return o->has_version ? o->version : 1;
    }
    return 1;
}

static ir_status check_opset(importer *im) {
    const Onnx__OperatorSetIdProto *def = NULL;
    for (size_t i = 0; i < im->mp->n_opset_import; i++)
        if (is_default_domain(im->mp->opset_import[i]->domain)) def = im->mp->opset_import[i];
    if (!def || !def->has_version)
        return ir_diag_set(im->d, IR_ERR_INVALID,
                           "the model imports no opset of the default ONNX domain (ai.onnx)");
    if (def->version < IR_ONNX_OPSET_MIN || def->version > IR_ONNX_OPSET_MAX)
        return ir_diag_set(im->d, IR_ERR_UNSUPPORTED,
                           "opset %lld of domain ai.onnx is not supported (magpie reads opsets "
                           "%d to %d)",
                           (long long)def->version, IR_ONNX_OPSET_MIN, IR_ONNX_OPSET_MAX);
    im->g->opset = def->version;
    return IR_OK;
}

/* ---------------------------------------------------------------- shapes from TypeProtos */

/* Index of the --shape entry named name, or -1. */
static int shape_entry(const importer *im, const char *name) {
    for (int i = 0; i < im->opts->n_shapes; i++)
        if (im->opts->shape_names[i] && strcmp(im->opts->shape_names[i], name) == 0) return i;
    return -1;
}

/* The size a file given for an input (opts->input_shape_*) bound symbolic dimension param to, or
 * -1. */
static int64_t sym_size(const importer *im, const char *param) {
    for (int i = 0; i < im->n_syms; i++)
        if (strcmp(im->syms[i].param, param) == 0) return im->syms[i].size;
    return -1;
}

/* Reads a value's tensor type. For a graph input (is_input), --shape may give the whole shape
 * or its symbolic dims, a file given for it (hint, or NULL) binds them, and failures are
 * explained; otherwise (value_info of an opaque node's output) a failure returns IR_ERR_INVALID
 * without a message and the caller explains. */
static ir_status read_type(importer *im, const char *vname, const Onnx__TypeProto *tp,
                           bool is_input, const ir_shape *hint, ir_dtype *dt, ir_shape *s) {
    ir_diag *d = is_input ? im->d : NULL;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "input '%s' is not a tensor (sequence, map, optional and sparse "
                           "inputs are not supported)",
                           vname);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int et = tt->has_elem_type ? tt->elem_type : 0;
    *dt = ir_dtype_from_onnx(et);
    if (*dt == IR_DTYPE_NONE)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "input '%s' has unsupported dtype %s (%d)%s",
                           vname, ir_onnx_dtype_name(et), et, ir_onnx_dtype_scope_note(et));
    const Onnx__TensorShapeProto *sp = tt->shape;
    int whole = is_input ? shape_entry(im, vname) : -1;
    if (whole >= 0) {
        const ir_shape *given = &im->opts->shape_values[whole];
        if (sp && sp->n_dim != (size_t)given->rank)
            return ir_diag_set(d, IR_ERR_INVALID,
                               "--shape %s gives %d dimensions; input '%s' has rank %zu", vname,
                               given->rank, vname, sp->n_dim);
        *s = *given;
        char what[300];
        snprintf(what, sizeof what, "input '%s'", vname);
        return ir_onnx_check_dims(s->rank, s->dims, *dt, what, d);
    }
    if (!sp)
        return ir_diag_set(d, IR_ERR_INVALID,
                           "input '%s' has no shape: give it with --shape %s=D0,D1,...", vname,
                           vname);
    if (sp->n_dim > IR_MAX_RANK)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "input '%s' has rank %zu; at most %d is supported", vname, sp->n_dim,
                           IR_MAX_RANK);
    s->rank = (int)sp->n_dim;
    for (int i = 0; i < s->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[i];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            s->dims[i] = dim->dim_value;
            continue;
        }
        const char *param = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                ? nz(dim->dim_param)
                                : "";
        int e = *param ? shape_entry(im, param) : -1;
        int64_t bound = *param ? sym_size(im, param) : -1;
        if (e < 0 && bound >= 0) {
            s->dims[i] = bound;
            continue;
        }
        if (e < 0 && !*param && hint && hint->rank == s->rank) {
            s->dims[i] = hint->dims[i];
            continue;
        }
        if (e < 0) {
            if (*param)
                return ir_diag_set(d, IR_ERR_INVALID,
                                   "input '%s' has symbolic dimension '%s': give it with --shape "
                                   "%s=N or --shape %s=D0,D1,...",
                                   vname, param, param, vname);
            return ir_diag_set(d, IR_ERR_INVALID,
                               "input '%s' has unknown dimension %d: give it with --shape "
                               "%s=D0,D1,...",
                               vname, i, vname);
        }
        if (im->opts->shape_values[e].rank != 1)
            return ir_diag_set(d, IR_ERR_INVALID,
                               "--shape %s: '%s' is a symbolic dimension of input '%s' and takes "
                               "one value",
                               param, param, vname);
        s->dims[i] = im->opts->shape_values[e].dims[0];
    }
    char what[300];
    snprintf(what, sizeof what, "input '%s'", vname);
    return ir_onnx_check_dims(s->rank, s->dims, *dt, what, d);
}

/* ---------------------------------------------------------------- initializers and inputs */

static ir_status add_initializers(importer *im) {
    if (!(im->folded_init = calloc(im->gp->n_initializer + 1, sizeof(bool)))) return nomem(im);
    for (size_t i = 0; i < im->gp->n_initializer; i++) {
        const Onnx__TensorProto *t = im->gp->initializer[i];
        const char *name = nz(t->name);
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", name);
        if (!*name) return ir_diag_set(im->d, IR_ERR_INVALID, "initializer %zu has no name", i);
        if (map_get(&im->values, name) >= 0)
            return ir_diag_set(im->d, IR_ERR_INVALID, "initializer '%s' appears twice", name);
        ir_dtype dt;
        ir_shape s;
        ir_blob *b;
        ir_status st = ir_onnx_tensor_is_external(t)
                           ? ir_onnx_external_decode(t, im->file, what, &dt, &s, &b, im->d)
                           : ir_onnx_tensor_decode(t, what, &dt, &s, &b, im->d);
        if (st != IR_OK) return st;
        int v = ir_graph_add_value(im->g, name, dt, &s);
        if (v < 0) {
            ir_blob_unref(b);
            return nomem(im);
        }
        im->g->values[v].blob = b;
        im->g->values[v].flags |= IR_VF_CONST | IR_VF_INITIALIZER;
        /* initializers are the first values, so value id v is initializer i */
        im->folded_init[v] = t->doc_string && strcmp(t->doc_string, IR_ONNX_FOLDED_DOC) == 0;
        if (!map_put(&im->values, im->g->values[v].name, v)) return nomem(im);
    }
    return IR_OK;
}

/* Index of the import-time value given for graph input name, or -1. */
static int const_entry(const importer *im, const char *name) {
    for (int i = 0; i < im->opts->n_consts; i++)
        if (im->opts->const_names[i] && strcmp(im->opts->const_names[i], name) == 0) return i;
    return -1;
}

static ir_status add_inputs(importer *im) {
    for (size_t i = 0; i < im->gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = im->gp->input[i];
        const char *name = nz(vi->name);
        if (!*name) return ir_diag_set(im->d, IR_ERR_INVALID, "graph input %zu has no name", i);
        int prev = map_get(&im->values, name);
        if (prev >= 0) {
            /* Before IR version 4, initializers were listed among the inputs too. */
            if (im->g->values[prev].flags & IR_VF_INITIALIZER) continue;
            return ir_diag_set(im->d, IR_ERR_INVALID, "graph input '%s' appears twice", name);
        }
        ir_dtype dt;
        ir_shape s = {0};
        int h = im->hint_of ? im->hint_of[i] : -1;
        ir_status st = read_type(im, name, vi->type, true,
                                 h >= 0 ? &im->opts->input_shape_values[h] : NULL, &dt, &s);
        if (st != IR_OK) return st;
        int v = ir_graph_add_value(im->g, name, dt, &s);
        if (v < 0 || !map_put(&im->values, im->g->values[v].name, v)) return nomem(im);
        int c = const_entry(im, name);
        if (c < 0) {
            ir_graph_add_input(im->g, v);
            continue;
        }
        const ir_import_opts *o = im->opts;
        char s1[128], s2[128];
        if (o->const_dtypes[c] != dt || !ir_shape_eq(&o->const_shapes[c], &s))
            return ir_diag_set(im->d, IR_ERR_SHAPE, "input '%s' is %s %s; its value is %s %s", name,
                               ir_dtype_name(dt), ir_shape_str(&s, s1, sizeof s1),
                               ir_dtype_name(o->const_dtypes[c]),
                               ir_shape_str(&o->const_shapes[c], s2, sizeof s2));
        im->g->values[v].blob = ir_blob_ref(o->const_blobs[c]);
        im->g->values[v].flags |= IR_VF_CONST;
    }
    return IR_OK;
}

/* True when graph input i (gp->input) is an initializer listed among the inputs (before IR
 * version 4) or given its value at import: not an input a run binds. */
static bool input_is_resident(const importer *im, size_t i) {
    const char *name = nz(im->gp->input[i]->name);
    int v = map_get(&im->values, name);
    return (v >= 0 && (im->g->values[v].flags & IR_VF_INITIALIZER)) || const_entry(im, name) >= 0;
}

/* Is graph input `name`, the k-th run-time input, a data input (classify's rule)? */
static bool is_data_input(const importer *im, const char *name, int k) {
    const ir_import_opts *o = im->opts;
    if (o->n_data == 0) return k == 0;
    for (int i = 0; i < o->n_data; i++)
        if (o->data_names[i] && strcmp(o->data_names[i], name) == 0) return true;
    return false;
}

/* Matches the shapes given for inputs (opts->input_shape_*: named, or positional for the data
 * inputs in graph input order) to graph inputs, and binds the symbolic dimensions of each to
 * its file's sizes, checking them against each other and against --shape. read_type then reads
 * the bound sizes. */
static ir_status bind_file_dims(importer *im) {
    const ir_import_opts *o = im->opts;
    if (o->n_input_shapes <= 0) return IR_OK;
    if (!(im->hint_of = malloc(sizeof(int) * (im->gp->n_input + 1)))) return nomem(im);
    int k = 0, next_pos = 0; /* run-time inputs seen; next positional entry */
    for (size_t i = 0; i < im->gp->n_input; i++) {
        im->hint_of[i] = -1;
        if (input_is_resident(im, i)) continue;
        const char *name = nz(im->gp->input[i]->name);
        for (int e = 0; e < o->n_input_shapes && im->hint_of[i] < 0; e++)
            if (o->input_shape_names[e] && strcmp(o->input_shape_names[e], name) == 0)
                im->hint_of[i] = e;
        if (im->hint_of[i] < 0 && is_data_input(im, name, k)) {
            while (next_pos < o->n_input_shapes && o->input_shape_names[next_pos]) next_pos++;
            if (next_pos < o->n_input_shapes) im->hint_of[i] = next_pos++;
        }
        k++;
    }
    char s1[128], s2[128];
    for (size_t i = 0; i < im->gp->n_input; i++) {
        int h = im->hint_of[i];
        const Onnx__TypeProto *tp = im->gp->input[i]->type;
        if (h < 0 || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
            !tp->tensor_type)
            continue;
        const char *name = nz(im->gp->input[i]->name), *file = nz(o->input_shape_labels[h]);
        const ir_shape *fs = &o->input_shape_values[h];
        int whole = shape_entry(im, name);
        if (whole >= 0 && !ir_shape_eq(&o->shape_values[whole], fs))
            return ir_diag_set(im->d, IR_ERR_SHAPE,
                               "--shape %s=%s disagrees with %s, which holds %s", name,
                               ir_shape_str(&o->shape_values[whole], s1, sizeof s1), file,
                               ir_shape_str(fs, s2, sizeof s2));
        const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
        if (!sp || whole >= 0) continue;
        if (sp->n_dim != (size_t)fs->rank)
            return ir_diag_set(im->d, IR_ERR_SHAPE,
                               "%s holds %s, of rank %d; input '%s' has rank %zu", file,
                               ir_shape_str(fs, s1, sizeof s1), fs->rank, name, sp->n_dim);
        for (int j = 0; j < fs->rank; j++) {
            const Onnx__TensorShapeProto__Dimension *dim = sp->dim[j];
            if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
                !*nz(dim->dim_param))
                continue;
            const char *param = dim->dim_param;
            int64_t size = fs->dims[j];
            int e = shape_entry(im, param);
            if (e >= 0 && o->shape_values[e].rank == 1 && o->shape_values[e].dims[0] != size)
                return ir_diag_set(im->d, IR_ERR_SHAPE,
                                   "--shape %s=%lld disagrees with %s: dimension %d of input '%s' "
                                   "('%s') is %lld there",
                                   param, (long long)o->shape_values[e].dims[0], file, j, name,
                                   param, (long long)size);
            if (e >= 0) continue;
            int s = 0;
            while (s < im->n_syms && strcmp(im->syms[s].param, param) != 0) s++;
            if (s < im->n_syms && im->syms[s].size != size)
                return ir_diag_set(im->d, IR_ERR_SHAPE,
                                   "symbolic dimension '%s' is %lld in input '%s' (%s) but %lld in "
                                   "input '%s' (%s)",
                                   param, (long long)im->syms[s].size, im->syms[s].input,
                                   im->syms[s].label, (long long)size, name, file);
            if (s == im->n_syms && s < (int)(sizeof im->syms / sizeof im->syms[0])) {
                im->syms[s].param = param;
                im->syms[s].input = name;
                im->syms[s].label = file;
                im->syms[s].size = size;
                im->n_syms++;
            }
        }
    }
    return IR_OK;
}

/* Every --shape must name a graph input or a symbolic dimension of one: checked before the
 * inputs are read, so that a misspelt name is reported as such rather than as the dimension
 * it failed to give. */
static ir_status check_shape_opts(importer *im) {
    for (int e = 0; e < im->opts->n_shapes; e++) {
        const char *name = nz(im->opts->shape_names[e]);
        bool found = false;
        for (size_t i = 0; i < im->gp->n_input && !found; i++) {
            const Onnx__ValueInfoProto *vi = im->gp->input[i];
            int v = map_get(&im->values, nz(vi->name));
            if (v >= 0 && (im->g->values[v].flags & IR_VF_INITIALIZER)) continue;
            found = strcmp(nz(vi->name), name) == 0;
            const Onnx__TypeProto *tp = vi->type;
            if (found || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
                !tp->tensor_type || !tp->tensor_type->shape)
                continue;
            const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
            for (size_t k = 0; k < sp->n_dim && !found; k++)
                found = sp->dim[k]->value_case ==
                            ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                        strcmp(nz(sp->dim[k]->dim_param), name) == 0;
        }
        if (!found)
            return ir_diag_set(im->d, IR_ERR_INVALID,
                               "--shape %s names neither a graph input nor a symbolic dimension "
                               "of one",
                               name);
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- nodes */

/* Converts one attribute into *a (arrays in the graph's arena). GRAPH attributes set
 * *subgraph and are dropped. A TENSOR attribute's blob reference is the caller's. */
static ir_status convert_attr(importer *im, const char *node, const char *op,
                              const Onnx__AttributeProto *ap, ir_attr *a, bool *keep,
                              bool *subgraph) {
    ir_graph *g = im->g;
    const char *aname = nz(ap->name);
    *keep = false;
    if (!*aname)
        return ir_diag_set(im->d, IR_ERR_INVALID, "node '%s' (%s): an attribute has no name", node,
                           op);
    int type = ap->has_type ? (int)ap->type : 0;
    if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) {
        /* Files from before IR version 2 leave the type out: take it from the field set. */
        type = ap->has_f       ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT
               : ap->has_i     ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT
               : ap->has_s     ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING
               : ap->t         ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR
               : ap->g         ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH
               : ap->n_ints    ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
               : ap->n_floats  ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS
               : ap->n_strings ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS
                               : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    }
    memset(a, 0, sizeof *a);
    if (!(a->name = ir_graph_strdup(g, aname))) return nomem(im);
    size_t n = 0;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->type = IR_ATTR_FLOAT;
        a->f = ap->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->type = IR_ATTR_INT;
        a->i = ap->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        a->type = IR_ATTR_STRING;
        char *s = ir_graph_alloc(g, ap->s.len + 1);
        if (!s) return nomem(im);
        if (ap->s.len) memcpy(s, ap->s.data, ap->s.len);
        a->s = s;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = IR_ATTR_INTS;
        n = ap->n_ints;
        if (n > INT_MAX / 8) goto too_many;
        if (!(a->ints = ir_graph_alloc(g, sizeof(int64_t) * (n ? n : 1)))) return nomem(im);
        if (n) memcpy(a->ints, ap->ints, sizeof(int64_t) * n);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = IR_ATTR_FLOATS;
        n = ap->n_floats;
        if (n > INT_MAX / 8) goto too_many;
        if (!(a->floats = ir_graph_alloc(g, sizeof(float) * (n ? n : 1)))) return nomem(im);
        if (n) memcpy(a->floats, ap->floats, sizeof(float) * n);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = IR_ATTR_STRINGS;
        n = ap->n_strings;
        if (n > INT_MAX / 8) goto too_many;
        if (!(a->strings = ir_graph_alloc(g, sizeof(char *) * (n ? n : 1)))) return nomem(im);
        for (size_t k = 0; k < n; k++) {
            char *s = ir_graph_alloc(g, ap->strings[k].len + 1);
            if (!s) return nomem(im);
            if (ap->strings[k].len) memcpy(s, ap->strings[k].data, ap->strings[k].len);
            a->strings[k] = s;
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t)
            return ir_diag_set(im->d, IR_ERR_INVALID,
                               "node '%s' (%s): tensor attribute '%s' has no tensor", node, op,
                               aname);
        char what[600];
        snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", node, op, aname);
        a->type = IR_ATTR_TENSOR;
        ir_status st =
            ir_onnx_tensor_is_external(ap->t)
                ? ir_onnx_external_decode(ap->t, im->file, what, &a->t_dtype, &a->t_shape,
                                          &a->t_blob, im->d)
                : ir_onnx_tensor_decode(ap->t, what, &a->t_dtype, &a->t_shape, &a->t_blob, im->d);
        if (st != IR_OK) return st;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: *subgraph = true; return IR_OK;
    default:
        return ir_diag_set(im->d, IR_ERR_UNSUPPORTED,
                           "node '%s' (%s): attribute '%s' has a type (%d) that is not supported",
                           node, op, aname, type);
    }
    a->n = (int)n;
    *keep = true;
    return IR_OK;
too_many:
    return ir_diag_set(im->d, IR_ERR_INVALID, "node '%s' (%s): attribute '%s' has %zu values", node,
                       op, aname, n);
}

/* Adds node i with its outputs and attributes; inputs are resolved later (resolve_inputs),
 * since they may name outputs of nodes further down the file. */
static ir_status add_node(importer *im, size_t i) {
    const Onnx__NodeProto *np = im->gp->node[i];
    ir_graph *g = im->g;
    const char *op_type = nz(np->op_type), *dom = nz(np->domain);
    if (is_default_domain(dom)) dom = "";
    char gen[32];
    snprintf(gen, sizeof gen, "node_%zu", i);
    const char *label = np->name && *np->name ? np->name : gen;
    if (!*op_type) return ir_diag_set(im->d, IR_ERR_INVALID, "node '%s' has no op_type", label);
    if (np->n_input > (1u << 20) || np->n_output > (1u << 20) || np->n_attribute > (1u << 20))
        return ir_diag_set(im->d, IR_ERR_INVALID,
                           "node '%s' (%s) has too many inputs, outputs "
                           "or attributes",
                           label, op_type);

    ir_op_kind op = ir_op_find(dom, op_type);
    int n_out = (int)np->n_output;
    while (n_out > 0 && !*nz(np->output[n_out - 1])) n_out--; /* omitted optional outputs */
    int n_in = (int)np->n_input;
    while (n_in > 0 && !*nz(np->input[n_in - 1])) n_in--;
    int *outs = malloc(sizeof(int) * (size_t)(n_out + 1));
    int *ins = malloc(sizeof(int) * (size_t)(n_in + 1));
    ir_attr *attrs = calloc(np->n_attribute + 1, sizeof(ir_attr));
    int n_attrs = 0;
    bool subgraph = false;
    ir_status st = IR_OK;
    if (!outs || !ins || !attrs) {
        st = nomem(im);
        goto out;
    }
    for (int k = 0; k < n_in; k++) ins[k] = -1;
    for (int k = 0; k < n_out; k++) {
        const char *oname = nz(np->output[k]);
        outs[k] = -1;
        if (!*oname) continue;
        int prev = map_get(&im->values, oname);
        if (prev >= 0) {
            int p = g->values[prev].producer;
            if (p == g->n_nodes)
                st = ir_diag_set(im->d, IR_ERR_INVALID, "node '%s' (%s) writes output '%s' twice",
                                 label, op_type, oname);
            else if (p >= 0)
                st = ir_diag_set(im->d, IR_ERR_INVALID,
                                 "value '%s' is produced twice: by node '%s' and by node '%s'",
                                 oname, g->nodes[p].name, label);
            else
                st = ir_diag_set(im->d, IR_ERR_INVALID,
                                 "node '%s' (%s): output '%s' is already a graph input or "
                                 "initializer",
                                 label, op_type, oname);
            goto out;
        }
        if ((outs[k] = ir_graph_add_value(g, oname, IR_DTYPE_NONE, NULL)) < 0 ||
            !map_put(&im->values, g->values[outs[k]].name, outs[k])) {
            st = nomem(im);
            goto out;
        }
        /* the index this node will get: names the first producer of a duplicate */
        g->values[outs[k]].producer = g->n_nodes;
    }
    for (size_t k = 0; k < np->n_attribute; k++) {
        bool keep;
        st = convert_attr(im, label, op_type, np->attribute[k], &attrs[n_attrs], &keep, &subgraph);
        if (st != IR_OK) goto out;
        if (keep) n_attrs++;
    }
    int idx = ir_graph_add_node(g, subgraph ? IR_OP_OPAQUE : op, label, n_in, ins, n_out, outs,
                                n_attrs, attrs);
    if (idx < 0) {
        st = nomem(im);
        goto out;
    }
    ir_node *n = &g->nodes[idx];
    if (!(n->op_type = ir_graph_strdup(g, op_type)) || !(n->domain = ir_graph_strdup(g, dom))) {
        st = nomem(im);
        goto out;
    }
    if (subgraph)
        im->skip[idx] = 2; /* its sub-graph may read outer values: never kept as opaque */
    else if (op == IR_OP_OPAQUE && !ir_expandable_op(dom, op_type))
        im->skip[idx] = 1; /* (an expandable op is expanded when inference reaches it) */
out:
    /* ir_graph_add_node took its own references to tensor attributes */
    for (int k = 0; k < n_attrs; k++) ir_blob_unref(attrs[k].t_blob);
    if (st != IR_OK && attrs && n_attrs < (int)np->n_attribute)
        ir_blob_unref(attrs[n_attrs].t_blob);
    free(outs);
    free(ins);
    free(attrs);
    return st;
}

static ir_status resolve_inputs(importer *im, size_t i) {
    const Onnx__NodeProto *np = im->gp->node[i];
    ir_node *n = &im->g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
        const char *iname = nz(np->input[k]);
        if (!*iname) continue; /* an omitted optional input */
        int v = map_get(&im->values, iname);
        if (v < 0)
            return ir_node_fail(im->d, IR_ERR_INVALID, n,
                                "input '%s' is neither a graph input, an initializer nor a node "
                                "output",
                                iname);
        n->in[k] = v;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- unsupported ops */

/* Declared type of value `name` in value_info or the graph outputs, or NULL. */
static const Onnx__TypeProto *declared_type(importer *im, const char *name) {
    int k = map_get(&im->infos, name);
    if (k < 0) return NULL;
    return k < (int)im->gp->n_value_info ? im->gp->value_info[k]->type
                                         : im->gp->output[k - (int)im->gp->n_value_info]->type;
}

static ir_status build_info_map(importer *im) {
    for (size_t k = 0; k < im->gp->n_value_info + im->gp->n_output; k++) {
        const Onnx__ValueInfoProto *vi = k < im->gp->n_value_info
                                             ? im->gp->value_info[k]
                                             : im->gp->output[k - im->gp->n_value_info];
        if (!vi->name || map_get(&im->infos, vi->name) >= 0) continue;
        if (!map_put(&im->infos, vi->name, (int)k)) return nomem(im);
    }
    return IR_OK;
}

/* Gives an unsupported node's outputs their declared types; false when one is not declared
 * (or not resolvable), so the node cannot be kept as opaque. */
static bool declare_opaque_outputs(importer *im, ir_node *n) {
    for (int k = 0; k < n->n_out; k++) {
        ir_value *v = ir_node_out(im->g, n, k);
        if (!v) continue;
        const Onnx__TypeProto *tp = declared_type(im, v->name);
        ir_dtype dt;
        ir_shape s = {0};
        if (!tp || read_type(im, v->name, tp, false, NULL, &dt, &s) != IR_OK) return false;
        v->dtype = dt;
        v->shape = s;
    }
    return true;
}

/* Lists every unsupported op type at once (one example node each); with allow_opaque, nodes
 * whose output shapes are declared are kept as IR_OP_OPAQUE and not listed. */
static ir_status check_support(importer *im) {
    ir_graph *g = im->g;
    ir_status st = build_info_map(im);
    if (st != IR_OK) return st;
    char *msg = im->d ? im->d->msg : NULL;
    size_t cap = im->d ? sizeof im->d->msg : 0, off = 0;
    int listed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (!im->skip[i]) continue;
        if (im->skip[i] == 1 && im->opts->allow_opaque && declare_opaque_outputs(im, n)) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = im->skip[j] == 3 && strcmp(g->nodes[j].op_type, n->op_type) == 0 &&
                   strcmp(g->nodes[j].domain, n->domain) == 0;
        im->skip[i] = 3; /* listed (or a duplicate of a listed type) */
        if (seen) continue;
        if (msg && off < cap)
            off += (size_t)snprintf(msg + off, cap - off, "%s%s%s%s (node '%s', opset %lld)",
                                    listed ? ", " : "unsupported ops: ", n->domain,
                                    *n->domain ? ":" : "", n->op_type, n->name,
                                    (long long)domain_opset(im, n->domain));
        listed++;
    }
    if (!listed) return IR_OK;
    if (msg && off < cap && im->opts->allow_opaque)
        snprintf(msg + off, cap - off,
                 " (kept as opaque only when value_info declares every output's shape)");
    return IR_ERR_UNSUPPORTED;
}

/* ---------------------------------------------------------------- outputs, classification */

static ir_status add_outputs(importer *im) {
    for (size_t i = 0; i < im->gp->n_output; i++) {
        const char *name = nz(im->gp->output[i]->name);
        int v = map_get(&im->values, name);
        if (v < 0)
            return ir_diag_set(im->d, IR_ERR_INVALID,
                               "graph output '%s' is neither produced by a node nor a graph "
                               "input or initializer",
                               name);
        ir_graph_add_output(im->g, v);
    }
    return IR_OK;
}

/* The model's list of trainable parameters (IR_ONNX_TRAINABLE_KEY), or NULL without one. */
static const char *trainable_list(const importer *im) {
    for (size_t i = 0; im->mp && i < im->mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = im->mp->metadata_props[i];
        if (e && e->key && e->value && strcmp(e->key, IR_ONNX_TRAINABLE_KEY) == 0) return e->value;
    }
    return NULL;
}

/* Is name one of the lines of list? */
static bool listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, "\n");
        if (len == n && strncmp(p, name, n) == 0) return true;
        p += len;
        if (*p) p++;
    }
    return false;
}

/* DESIGN.md "Data inputs vs. parameters": the model's list of trainable parameters when it has
 * one (names it lists that the graph lacks are parameters the forward never reads, which the
 * exporter dropped); otherwise every other float initializer or graph input. --frozen and the
 * batch-norm running statistics are excluded either way. */
static ir_status classify(importer *im) {
    ir_graph *g = im->g;
    const ir_import_opts *o = im->opts;
    for (int i = 0; i < o->n_data; i++) {
        int v = o->data_names[i] ? map_get(&im->values, o->data_names[i]) : -1;
        if (v < 0 || !(g->values[v].flags & IR_VF_INPUT))
            return ir_diag_set(im->d, IR_ERR_INVALID, "--data %s is not a graph input",
                               nz(o->data_names[i]));
        g->values[v].flags |= IR_VF_DATA;
    }
    if (o->n_data == 0 && g->n_inputs > 0) g->values[g->inputs[0]].flags |= IR_VF_DATA;

    regex_t re;
    bool have_re = o->frozen_regex != NULL;
    if (have_re) {
        int rc = regcomp(&re, o->frozen_regex, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[200];
            regerror(rc, &re, why, sizeof why);
            return ir_diag_set(im->d, IR_ERR_INVALID, "--frozen '%s': %s", o->frozen_regex, why);
        }
    }
    const char *list = trainable_list(im);
    g->params_listed = list != NULL;
    for (int v = 0; v < g->n_values; v++) {
        ir_value *val = &g->values[v];
        bool candidate = (val->flags & IR_VF_INITIALIZER) ||
                         ((val->flags & IR_VF_INPUT) && !(val->flags & IR_VF_DATA));
        if (!candidate || !ir_dtype_is_float(val->dtype)) continue;
        if (list && !listed(list, val->name)) continue;
        if (have_re && regexec(&re, val->name, 0, NULL, 0) == 0) continue;
        /* constants magpie folded and exported are not trainable on re-import either */
        if ((val->flags & IR_VF_INITIALIZER) && im->folded_init[v]) continue;
        val->flags |= IR_VF_PARAM;
    }
    if (have_re) regfree(&re);
    /* batch-norm running statistics are updated, not trained */
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_BatchNormalization) continue;
        for (int k = 3; k <= 4; k++)
            if (k < n->n_in && n->in[k] >= 0) g->values[n->in[k]].flags &= ~(unsigned)IR_VF_PARAM;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- inference and folding */

static ir_status infer_and_fold(importer *im) {
    ir_graph *g = im->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == IR_OP_OPAQUE &&
            ir_expandable_op(g->nodes[i].domain, g->nodes[i].op_type)) {
            ir_status xs = ir_expand_node(g, i, im->d); /* node i is then its first op */
            if (xs != IR_OK) return xs;
        }
        if (g->nodes[i].op == IR_OP_OPAQUE) continue; /* shapes were declared */
        ir_status st = ir_node_infer(g, &g->nodes[i], im->d);
        if (st != IR_OK) return st;
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            const ir_value *v = ir_node_out(g, &g->nodes[i], k);
            if (v && v->dtype == IR_DTYPE_NONE)
                return ir_node_fail(im->d, IR_ERR_INTERNAL, &g->nodes[i],
                                    "shape inference left output '%s' without a dtype", v->name);
        }
        if (im->opts->no_fold) continue;
        bool folded;
        if ((st = ir_fold_node(g, i, &folded, im->d)) != IR_OK) return st;
    }
    if (!im->opts->no_fold) ir_graph_prune(g);
    return IR_OK;
}

/* ---------------------------------------------------------------- entry points */

static ir_status import_model(importer *im) {
    ir_status st;
    const Onnx__ModelProto *mp = im->mp;
    if (!mp->graph)
        return ir_diag_set(im->d, IR_ERR_INVALID,
                           "the protobuf message has no graph (not an ONNX model?)");
    if (!mp->has_ir_version)
        return ir_diag_set(im->d, IR_ERR_INVALID,
                           "the protobuf message has no ir_version (not an ONNX model?)");
    im->gp = mp->graph;
    if ((st = check_opset(im)) != IR_OK) return st;
    ir_graph *g = im->g;
    if (!(g->name = ir_graph_strdup(g, nz(im->gp->name)))) return nomem(im);
    if ((st = add_initializers(im)) != IR_OK) return st;
    if ((st = check_shape_opts(im)) != IR_OK) return st;
    if ((st = bind_file_dims(im)) != IR_OK) return st;
    if ((st = add_inputs(im)) != IR_OK) return st;
    if (!(im->skip = calloc(im->gp->n_node + 1, 1))) return nomem(im);
    for (size_t i = 0; i < im->gp->n_node; i++)
        if ((st = add_node(im, i)) != IR_OK) return st;
    for (size_t i = 0; i < im->gp->n_node; i++)
        if ((st = resolve_inputs(im, i)) != IR_OK) return st;
    if ((st = check_support(im)) != IR_OK) return st;
    if ((st = add_outputs(im)) != IR_OK) return st;
    if ((st = ir_graph_toposort(g, im->d)) != IR_OK) return st;
    if ((st = classify(im)) != IR_OK) return st;
    if ((st = infer_and_fold(im)) != IR_OK) return st;
    if (im->opts->fuse_decomposed && (st = ir_fuse_decomposed(g, NULL, im->d)) != IR_OK)
        return st;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].dtype == IR_DTYPE_NONE)
            return ir_diag_set(im->d, IR_ERR_INTERNAL, "value '%s' has no dtype after import",
                               g->values[v].name);
    return ir_graph_validate(g, im->d);
}

ir_graph *ir_onnx_load_buffer(const void *buf, size_t len, const char *name,
                              const ir_import_opts *opts, ir_status *st_out, ir_diag *d) {
    static const ir_import_opts defaults = {0};
    importer im = {.file = name ? name : "<buffer>", .opts = opts ? opts : &defaults, .d = d};
    Onnx__ModelProto *mp = NULL;
    ir_onnx_fn_expansion fx = {0};
    ir_status st = IR_OK;
    if (d) d->msg[0] = 0;
    if (len == 0) {
        st = ir_diag_set(d, IR_ERR_PARSE, "empty file (not an ONNX model)");
        goto out;
    }
    mp = onnx__model_proto__unpack(NULL, len, buf);
    if (!mp) {
        st = ir_diag_set(d, IR_ERR_PARSE, "not an ONNX model (protobuf parse failed)");
        goto out;
    }
    if ((st = ir_onnx_functions_expand(mp, &fx, d)) != IR_OK) goto out;
    im.mp = mp;
    if (!(im.g = ir_graph_new())) {
        st = nomem(&im);
        goto out;
    }
    if (!(im.g->source = ir_graph_strdup(im.g, im.file))) {
        st = nomem(&im);
        goto out;
    }
    st = import_model(&im);
out:
    if (mp) {
        ir_onnx_functions_restore(mp, &fx);
        onnx__model_proto__free_unpacked(mp, NULL);
    }
    map_free(&im.values);
    map_free(&im.infos);
    free(im.folded_init);
    free(im.skip);
    free(im.hint_of);
    if (st != IR_OK) {
        ir_diag_prefix(d, im.file);
        ir_graph_free(im.g);
        im.g = NULL;
    }
    if (st_out) *st_out = st;
    return im.g;
}

ir_graph *ir_onnx_load(const char *path, const ir_import_opts *opts, ir_status *st_out,
                       ir_diag *d) {
    ir_status st = IR_OK;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    ir_graph *g = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    struct stat sb;
    /* +1 lets fread see the end of a regular file without growing the buffer */
    cap = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? (size_t)sb.st_size + 1 : 1 << 16;
    for (;;) {
        if (len == cap || !buf) {
            size_t nc = buf ? 2 * cap : cap;
            unsigned char *nb = realloc(buf, nc);
            if (!nb) {
                st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory reading the file", path);
                goto out;
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto out;
    }
    g = ir_onnx_load_buffer(buf, len, path, opts, &st, d);
out:
    if (f) fclose(f);
    free(buf);
    if (st_out) *st_out = st;
    return g;
}
