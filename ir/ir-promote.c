/* ir-promote.c - ir_graph_to_f64: a copy of a graph that computes in float64, the reference that
 * `magpie verify` judges float32 results against (issue 18).
 *
 * Every float value (float32, float16, bfloat16) becomes float64: graph inputs, constants (their
 * data converted), intermediates and outputs. Attributes that make an op produce a float dtype
 * follow: Cast's `to`, LayerNormalization's `stash_type`, FissionBuffer's `dtype`, the value of
 * Constant and ConstantOfShape (value_float and value_floats become a float64 tensor `value`).
 * Integers and bools stay. Shape inference is then re-run over every node in order, and a node
 * that would still produce a float value other than float64 is an error naming it, so an op whose
 * dtype rule this file does not know cannot slip through as a silent float32 island. */
#include "ir-impl.h"

#include <stdlib.h>

static bool needs_promotion(ir_dtype t) {
    return ir_dtype_is_float(t) && t != IR_F64;
}

/* A float64 blob holding the n elements of src (dtype t). NULL on out of memory. */
static ir_blob *blob_to_f64(const void *src, ir_dtype t, int64_t n) {
    ir_blob *b = ir_blob_new((size_t)n * sizeof(double));
    if (!b) return NULL;
    double *dst = ir_blob_data(b);
    for (int64_t i = 0; i < n; i++) dst[i] = ir_load_f64(src, t, i);
    return b;
}

/* Appends an attribute to node n (its array lives in g's arena). */
static bool add_attr(ir_graph *g, ir_node *n, const ir_attr *a) {
    ir_attr *attrs = ir_graph_alloc(g, sizeof(ir_attr) * (size_t)(n->n_attrs + 1));
    if (!attrs) return false;
    if (n->n_attrs) memcpy(attrs, n->attrs, sizeof(ir_attr) * (size_t)n->n_attrs);
    attrs[n->n_attrs] = *a;
    n->attrs = attrs;
    n->n_attrs++;
    return true;
}

/* A tensor attribute `name` of float64 data converted from n elements of src (dtype t). */
static bool set_tensor_attr(ir_attr *a, const char *name, const void *src, ir_dtype t,
                            const ir_shape *s) {
    ir_blob *b = blob_to_f64(src, t, ir_shape_numel(s));
    if (!b) return false;
    ir_blob_unref(a->t_blob);
    *a = (ir_attr){
        .name = name, .type = IR_ATTR_TENSOR, .t_dtype = IR_F64, .t_shape = *s, .t_blob = b};
    return true;
}

/* An ONNX dtype attribute (Cast's to, stash_type) naming a float type is made DOUBLE. */
static void promote_onnx_dtype_attr(ir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++) {
        ir_attr *a = &n->attrs[i];
        if (strcmp(a->name, name) != 0 || a->type != IR_ATTR_INT) continue;
        if (needs_promotion(ir_dtype_from_onnx((int)a->i))) a->i = ir_dtype_to_onnx(IR_F64);
    }
}

/* Rewrites the attributes of n that make it produce float32 (or another narrow float). */
static ir_status promote_attrs(ir_graph *g, ir_node *n, ir_diag *d) {
    switch (n->op) {
    case IR_OP_Cast: promote_onnx_dtype_attr(n, "to"); break;
    case IR_OP_LayerNormalization:
        if (ir_attr_find(n, "stash_type")) {
            promote_onnx_dtype_attr(n, "stash_type");
        } else {
            ir_attr a = {.name = "stash_type", .type = IR_ATTR_INT, .i = ir_dtype_to_onnx(IR_F64)};
            if (!add_attr(g, n, &a)) goto nomem;
        }
        break;
    case IR_OP_FissionBuffer:
        for (int i = 0; i < n->n_attrs; i++) {
            ir_attr *a = &n->attrs[i];
            if (strcmp(a->name, "dtype") == 0 && a->type == IR_ATTR_INT && a->i >= 0 &&
                a->i < IR_DTYPE_COUNT && needs_promotion((ir_dtype)a->i))
                a->i = IR_F64;
        }
        break;
    case IR_OP_Constant:
        for (int i = 0; i < n->n_attrs; i++) {
            ir_attr *a = &n->attrs[i];
            bool ok = true;
            if (strcmp(a->name, "value") == 0 && a->type == IR_ATTR_TENSOR &&
                needs_promotion(a->t_dtype) && a->t_blob) {
                ir_shape s = a->t_shape;
                ok = set_tensor_attr(a, "value", ir_blob_data(a->t_blob), a->t_dtype, &s);
            } else if (strcmp(a->name, "value_float") == 0 && a->type == IR_ATTR_FLOAT) {
                float f = a->f;
                ok = set_tensor_attr(a, "value", &f, IR_F32, &(ir_shape){0});
            } else if (strcmp(a->name, "value_floats") == 0 && a->type == IR_ATTR_FLOATS) {
                ir_shape s = {.rank = 1, .dims = {a->n}};
                ok = set_tensor_attr(a, "value", a->floats, IR_F32, &s);
            }
            if (!ok) goto nomem;
        }
        break;
    case IR_OP_ConstantOfShape: {
        ir_attr *a = NULL;
        for (int i = 0; i < n->n_attrs; i++)
            if (strcmp(n->attrs[i].name, "value") == 0) a = &n->attrs[i];
        if (!a) { /* the default fill is float32 zero */
            ir_attr z = {.name = "value"};
            static const float zero = 0.0f;
            if (!set_tensor_attr(&z, "value", &zero, IR_F32, &(ir_shape){.rank = 1, .dims = {1}}))
                goto nomem;
            if (!add_attr(g, n, &z)) {
                ir_blob_unref(z.t_blob);
                goto nomem;
            }
        } else if (a->type == IR_ATTR_TENSOR && needs_promotion(a->t_dtype) && a->t_blob) {
            ir_shape s = a->t_shape;
            if (!set_tensor_attr(a, "value", ir_blob_data(a->t_blob), a->t_dtype, &s)) goto nomem;
        }
        break;
    }
    default: break;
    }
    return IR_OK;
nomem:
    return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory promoting to float64");
}

/* Re-runs shape inference of every node in order and checks that no float output is left
 * narrower than float64 and that every output keeps its shape in src (a float Range whose length
 * depends on float32 rounding would not). Opaque nodes keep the (promoted) dtypes the file
 * declared. */
static ir_status reinfer(ir_graph *g, const ir_graph *src, ir_diag *d) {
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_OPAQUE) continue;
        ir_status st = ir_node_infer(g, n, d);
        if (st != IR_OK) return st;
        for (int k = 0; k < n->n_out; k++) {
            const ir_value *v = ir_node_out(g, n, k);
            if (v && needs_promotion(v->dtype))
                return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                    "output '%s' stays %s when its inputs are float64", v->name,
                                    ir_dtype_name(v->dtype));
            if (v && !ir_shape_eq(&v->shape, &src->values[n->out[k]].shape)) {
                char s1[96], s2[96];
                return ir_node_fail(d, IR_ERR_UNSUPPORTED, n,
                                    "output '%s' would be %s in float64, not %s", v->name,
                                    ir_shape_str(&v->shape, s1, sizeof s1),
                                    ir_shape_str(&src->values[n->out[k]].shape, s2, sizeof s2));
            }
        }
    }
    return IR_OK;
}

static ir_status promote(ir_graph *g, const ir_graph *src, ir_diag *d) {
    for (int i = 0; i < g->n_values; i++) {
        ir_value *v = &g->values[i];
        if (!needs_promotion(v->dtype)) continue;
        if (v->blob) {
            ir_blob *b = blob_to_f64(ir_blob_data(v->blob), v->dtype, ir_shape_numel(&v->shape));
            if (!b) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory converting '%s'", v->name);
            ir_blob_unref(v->blob);
            v->blob = b;
        }
        v->dtype = IR_F64;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ir_status st = promote_attrs(g, &g->nodes[i], d);
        if (st != IR_OK) return st;
    }
    return reinfer(g, src, d);
}

ir_graph *ir_graph_to_f64(const ir_graph *src, ir_status *st, ir_diag *d) {
    ir_graph *g = ir_graph_clone(src);
    ir_status s =
        g ? promote(g, src, d) : ir_diag_set(d, IR_ERR_NOMEM, "out of memory copying the graph");
    if (s != IR_OK) {
        if (src->source && src->source[0]) ir_diag_prefix(d, src->source);
        ir_graph_free(g);
        g = NULL;
    }
    if (st) *st = s;
    return g;
}
