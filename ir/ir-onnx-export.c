/* ir-onnx-export.c - ir_graph -> ONNX ModelProto, written atomically.
 *
 * The protobuf message is built in a scratch arena that points into the graph (names,
 * attribute arrays, constant blobs) rather than copying them, packed once, then the arena is
 * dropped. Every constant a node reads (or a graph output) becomes an initializer, so folded
 * constants survive the round trip; value_info carries every intermediate shape, so an opaque
 * node keeps its declared output shapes. The file appears at `path` only complete: it is
 * written to PATH.tmp.<pid>, fsync'ed and renamed (ir_write_atomic). With external data
 * (asked for, or needed to stay under protobuf's 2 GB limit) the large initializers go to
 * PATH.data first (ir-onnx-external.c), and it is removed again if the model cannot be
 * written. */
#include "ir-onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Allocates n zeroed T's from the scratch arena; jumps to out_nomem on failure. */
#define NEW_N(T, n)                                                                                \
    ({                                                                                             \
        T *p_ = ir_arena_alloc(a, sizeof(T) * ((size_t)(n) ? (size_t)(n) : 1));                    \
        if (!p_) goto out_nomem;                                                                   \
        p_;                                                                                        \
    })

static Onnx__ValueInfoProto *value_info(ir_arena *a, const ir_value *v) {
    Onnx__ValueInfoProto *vi = ir_arena_alloc(a, sizeof *vi);
    Onnx__TypeProto *tp = ir_arena_alloc(a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ir_arena_alloc(a, sizeof *tt);
    Onnx__TensorShapeProto *sp = ir_arena_alloc(a, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims =
        ir_arena_alloc(a, sizeof(*dims) * (size_t)(v->shape.rank + 1));
    if (!vi || !tp || !tt || !sp || !dims) return NULL;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < v->shape.rank; i++) {
        Onnx__TensorShapeProto__Dimension *dm = ir_arena_alloc(a, sizeof *dm);
        if (!dm) return NULL;
        *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dm->dim_value = v->shape.dims[i];
        dims[i] = dm;
    }
    sp->n_dim = (size_t)v->shape.rank;
    sp->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = ir_dtype_to_onnx(v->dtype);
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)v->name;
    vi->type = tp;
    return vi;
}

static Onnx__AttributeProto *attribute(ir_arena *a, const ir_attr *at) {
    Onnx__AttributeProto *p = ir_arena_alloc(a, sizeof *p);
    if (!p) return NULL;
    *p = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    p->name = (char *)at->name;
    p->has_type = 1;
    switch (at->type) {
    case IR_ATTR_INT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        p->has_i = 1;
        p->i = at->i;
        break;
    case IR_ATTR_FLOAT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        p->has_f = 1;
        p->f = at->f;
        break;
    case IR_ATTR_STRING:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        p->has_s = 1;
        p->s.data = (uint8_t *)(at->s ? at->s : "");
        p->s.len = strlen((const char *)p->s.data);
        break;
    case IR_ATTR_INTS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        p->n_ints = (size_t)at->n;
        p->ints = at->ints;
        break;
    case IR_ATTR_FLOATS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        p->n_floats = (size_t)at->n;
        p->floats = at->floats;
        break;
    case IR_ATTR_STRINGS:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        p->n_strings = (size_t)at->n;
        p->strings = ir_arena_alloc(a, sizeof(ProtobufCBinaryData) * (size_t)(at->n + 1));
        if (!p->strings) return NULL;
        for (int k = 0; k < at->n; k++) {
            p->strings[k].data = (uint8_t *)(at->strings[k] ? at->strings[k] : "");
            p->strings[k].len = strlen((const char *)p->strings[k].data);
        }
        break;
    case IR_ATTR_TENSOR:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        p->t = ir_arena_alloc(a, sizeof *p->t);
        if (!p->t) return NULL;
        *p->t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
        if (!ir_onnx_tensor_encode(p->t, a, "", at->t_dtype, &at->t_shape, at->t_blob)) return NULL;
        break;
    }
    return p;
}

/* Moves every initializer of at least IR_ONNX_EXTERNAL_MIN_BYTES to the data file named
 * `location`: raw_data is cleared and external_data (location, offset, length) set; *p lists
 * what the data file must hold. False on out of memory. */
static bool externalize(ir_arena *a, Onnx__GraphProto *gp, const char *location,
                        ir_onnx_external_plan *p) {
    p->n = 0;
    p->data = ir_arena_alloc(a, sizeof(void *) * (gp->n_initializer + 1));
    p->lengths = ir_arena_alloc(a, sizeof(size_t) * (gp->n_initializer + 1));
    p->offsets = ir_arena_alloc(a, sizeof(int64_t) * (gp->n_initializer + 1));
    if (!p->data || !p->lengths || !p->offsets) return false;
    int64_t at = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *t = gp->initializer[i];
        if (!t->has_raw_data || t->raw_data.len < IR_ONNX_EXTERNAL_MIN_BYTES) continue;
        at = (at + IR_ONNX_EXTERNAL_ALIGN - 1) / IR_ONNX_EXTERNAL_ALIGN * IR_ONNX_EXTERNAL_ALIGN;
        Onnx__StringStringEntryProto **kv = ir_arena_alloc(a, sizeof(*kv) * 3);
        char *num = ir_arena_alloc(a, 48);
        if (!kv || !num) return false;
        snprintf(num, 48, "%lld", (long long)at);
        snprintf(num + 24, 24, "%zu", t->raw_data.len);
        const char *keys[3] = {"location", "offset", "length"};
        char *vals[3] = {(char *)location, num, num + 24};
        for (int k = 0; k < 3; k++) {
            if (!(kv[k] = ir_arena_alloc(a, sizeof **kv))) return false;
            *kv[k] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
            kv[k]->key = (char *)keys[k];
            kv[k]->value = vals[k];
        }
        p->data[p->n] = t->raw_data.data;
        p->lengths[p->n] = t->raw_data.len;
        p->offsets[p->n++] = at;
        at += (int64_t)t->raw_data.len;
        t->external_data = kv;
        t->n_external_data = 3;
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        t->has_raw_data = 0;
        t->raw_data.len = 0;
        t->raw_data.data = NULL;
    }
    return true;
}

ir_status ir_onnx_save(const ir_graph *g, const char *path, ir_diag *d) {
    return ir_onnx_save_with(g, path, NULL, d);
}

ir_status ir_onnx_save_with(const ir_graph *g, const char *path, const ir_onnx_save_opts *o,
                            ir_diag *d) {
    ir_status st = IR_OK;
    ir_arena *a = ir_arena_new();
    unsigned char *buf = NULL, *used = calloc((size_t)g->n_values + 1, 1);
    char data_path[4096] = "";
    size_t limit = o && o->max_file_bytes && o->max_file_bytes < IR_ONNX_PROTOBUF_LIMIT
                       ? o->max_file_bytes
                       : IR_ONNX_PROTOBUF_LIMIT;
    if (!a || !used) goto out_nomem;

    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.producer_name = "magpie";
    m.graph = &gp;
    gp.name = (char *)(g->name && *g->name ? g->name : "magpie");

    /* opset imports: the default domain, then every other domain a node uses (magpie's own
     * ops and kept opaque ones), at version 1 since the graph does not record theirs */
    m.opset_import = NEW_N(Onnx__OperatorSetIdProto *, g->n_nodes + 1);
    Onnx__OperatorSetIdProto *os = NEW_N(Onnx__OperatorSetIdProto, 1);
    *os = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    os->domain = "";
    os->has_version = 1;
    os->version = g->opset > 0 ? g->opset : 17;
    m.opset_import[m.n_opset_import++] = os;
    for (int i = 0; i < g->n_nodes; i++) {
        const char *dom = g->nodes[i].domain;
        if (!dom || !*dom) continue;
        bool seen = false;
        for (size_t k = 1; k < m.n_opset_import && !seen; k++)
            seen = strcmp(m.opset_import[k]->domain, dom) == 0;
        if (seen) continue;
        os = NEW_N(Onnx__OperatorSetIdProto, 1);
        *os = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
        os->domain = (char *)dom;
        os->has_version = 1;
        os->version = 1;
        m.opset_import[m.n_opset_import++] = os;
    }

    gp.input = NEW_N(Onnx__ValueInfoProto *, g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++)
        if (!(gp.input[gp.n_input++] = value_info(a, &g->values[g->inputs[i]]))) goto out_nomem;
    gp.output = NEW_N(Onnx__ValueInfoProto *, g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) {
        used[g->outputs[i]] = 1;
        if (!(gp.output[gp.n_output++] = value_info(a, &g->values[g->outputs[i]]))) goto out_nomem;
    }

    gp.node = NEW_N(Onnx__NodeProto *, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        Onnx__NodeProto *np = NEW_N(Onnx__NodeProto, 1);
        *np = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
        np->name = (char *)n->name;
        np->op_type = (char *)n->op_type;
        np->domain = n->domain && *n->domain ? (char *)n->domain : NULL;
        np->input = NEW_N(char *, n->n_in);
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            np->input[np->n_input++] = v >= 0 ? (char *)g->values[v].name : "";
            if (v >= 0) used[v] = 1;
        }
        np->output = NEW_N(char *, n->n_out);
        for (int k = 0; k < n->n_out; k++)
            np->output[np->n_output++] = n->out[k] >= 0 ? (char *)g->values[n->out[k]].name : "";
        np->attribute = NEW_N(Onnx__AttributeProto *, n->n_attrs);
        for (int k = 0; k < n->n_attrs; k++)
            if (!(np->attribute[np->n_attribute++] = attribute(a, &n->attrs[k]))) goto out_nomem;
        gp.node[gp.n_node++] = np;
    }

    gp.initializer = NEW_N(Onnx__TensorProto *, g->n_values);
    gp.value_info = NEW_N(Onnx__ValueInfoProto *, g->n_values);
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if ((val->flags & IR_VF_CONST) && used[v]) {
            if (!val->blob) {
                st = ir_diag_set(d, IR_ERR_INTERNAL, "%s: constant '%s' has no data", path,
                                 val->name);
                goto out;
            }
            Onnx__TensorProto *t = NEW_N(Onnx__TensorProto, 1);
            *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
            if (!ir_onnx_tensor_encode(t, a, val->name, val->dtype, &val->shape, val->blob)) {
                st = ir_diag_set(d, IR_ERR_INTERNAL, "%s: constant '%s' has too little data", path,
                                 val->name);
                goto out;
            }
            if (!(val->flags & IR_VF_INITIALIZER)) t->doc_string = IR_ONNX_FOLDED_DOC;
            gp.initializer[gp.n_initializer++] = t;
        }
        if (val->producer >= 0 && !(val->flags & IR_VF_OUTPUT))
            if (!(gp.value_info[gp.n_value_info++] = value_info(a, val))) goto out_nomem;
    }

    size_t len = onnx__model_proto__get_packed_size(&m);
    ir_onnx_external_plan plan = {0};
    if ((o && o->external_data) || len > limit) {
        char name[4096];
        ir_onnx_external_name(path, name, sizeof name);
        const char *loc = ir_arena_strdup(a, name);
        if (!loc || !externalize(a, &gp, loc, &plan)) goto out_nomem;
        len = onnx__model_proto__get_packed_size(&m);
        if (len > limit) {
            st = ir_diag_set(d, IR_ERR_UNSUPPORTED,
                             "%s: the model is %zu bytes even with its weights in external data, "
                             "over the %zu-byte limit of a protobuf file",
                             path, len, limit);
            goto out;
        }
        if (plan.n > 0) {
            const char *slash = strrchr(path, '/');
            size_t dir = slash ? (size_t)(slash - path + 1) : 0, nl = strlen(name);
            if (dir + nl >= sizeof data_path) {
                st = ir_diag_set(d, IR_ERR_IO, "%s: path too long", path);
                goto out;
            }
            memcpy(data_path, path, dir);
            memcpy(data_path + dir, name, nl + 1);
            if ((st = ir_onnx_external_write(data_path, &plan, d)) != IR_OK) {
                data_path[0] = 0; /* nothing of it was left */
                goto out;
            }
        }
    }
    if (!(buf = malloc(len ? len : 1))) goto out_nomem;
    if (onnx__model_proto__pack(&m, buf) != len) {
        st = ir_diag_set(d, IR_ERR_INTERNAL, "%s: protobuf packing wrote an unexpected size", path);
        goto out;
    }
    st = ir_write_atomic(path, buf, len, d);
    goto out;

out_nomem:
    st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory building the ONNX model", path);
out:
    if (st != IR_OK && data_path[0]) unlink(data_path); /* no data file without its model */
    free(buf);
    free(used);
    ir_arena_free(a);
    return st;
}
