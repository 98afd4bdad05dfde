/* test_onnx_io.c - ONNX import, constant folding, pruning and export.
 *
 * Models are built in memory with the protobuf-c API (a small builder below), packed, and fed
 * to ir_onnx_load_buffer / ir_onnx_load. The fixture test imports every committed model and is
 * the coverage check of the op table: it fails, never skips, when fixtures are missing. */
#include "test-util.h"

#include <dirent.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "rt.h"

/* ---------------------------------------------------------------- model builder */

#define MB_MAX 64
enum { F32 = 1, I64 = 7 };

typedef struct mb {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto os[2], *osp[2];
    Onnx__NodeProto nodes[MB_MAX], *nodep[MB_MAX];
    Onnx__TensorProto inits[MB_MAX], *initp[MB_MAX];
    Onnx__ValueInfoProto vis[3][MB_MAX], *visp[3][MB_MAX]; /* inputs, outputs, value_info */
    Onnx__TypeProto tp[3 * MB_MAX];
    Onnx__TypeProto__Tensor tt[3 * MB_MAX];
    Onnx__TensorShapeProto sp[3 * MB_MAX];
    Onnx__TensorShapeProto__Dimension dims[3 * MB_MAX][IR_MAX_RANK], *dimp[3 * MB_MAX][IR_MAX_RANK];
    int n_types;
    Onnx__AttributeProto attrs[MB_MAX], *attrp[MB_MAX];
    int n_attrs;
    int64_t i64[MB_MAX][16];
    char *io[MB_MAX][2][32];            /* node input and output names (copied lists) */
    int64_t idims[MB_MAX][IR_MAX_RANK]; /* initializer dims */
} mb;

static mb *mb_new(int64_t opset) {
    mb *b = calloc(1, sizeof *b);
    b->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    b->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    b->g.name = "test";
    b->os[0] = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    b->os[0].domain = "";
    b->os[0].has_version = 1;
    b->os[0].version = opset;
    b->osp[0] = &b->os[0];
    b->m.opset_import = b->osp;
    b->m.n_opset_import = 1;
    b->g.node = b->nodep;
    b->g.initializer = b->initp;
    b->g.input = b->visp[0];
    b->g.output = b->visp[1];
    b->g.value_info = b->visp[2];
    return b;
}

/* A value_info in list k (0 inputs, 1 outputs, 2 value_info). rank -1: no shape. A dim < 0
 * is symbolic, named params[i] (or unknown when params is NULL). */
static void mb_vi(mb *b, int k, const char *name, int elem, int rank, const int64_t *dims,
                  const char *const *params) {
    size_t *n = k == 0 ? &b->g.n_input : k == 1 ? &b->g.n_output : &b->g.n_value_info;
    Onnx__ValueInfoProto *vi = &b->vis[k][*n];
    int t = b->n_types++;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->tp[t] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    b->tt[t] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    b->tp[t].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->tp[t].tensor_type = &b->tt[t];
    b->tt[t].has_elem_type = 1;
    b->tt[t].elem_type = elem;
    if (rank >= 0) {
        b->sp[t] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *dm = &b->dims[t][i];
            *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            if (dims[i] >= 0) {
                dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                dm->dim_value = dims[i];
            } else if (params && params[i]) {
                dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                dm->dim_param = (char *)params[i];
            }
            b->dimp[t][i] = dm;
        }
        b->sp[t].n_dim = (size_t)rank;
        b->sp[t].dim = b->dimp[t];
        b->tt[t].shape = &b->sp[t];
    }
    vi->name = (char *)name;
    vi->type = &b->tp[t];
    b->visp[k][(*n)++] = vi;
}

#define DIMS(...)                                                                                  \
    (sizeof((int64_t[]){__VA_ARGS__}) / 8), (const int64_t[]) {                                    \
        __VA_ARGS__                                                                                \
    }
static void mb_input(mb *b, const char *name, int rank, const int64_t *dims) {
    mb_vi(b, 0, name, F32, rank, dims, NULL);
}
static void mb_output(mb *b, const char *name) {
    mb_vi(b, 1, name, F32, -1, NULL, NULL);
}

static Onnx__TensorProto *mb_init(mb *b, const char *name, int type, int rank, const int64_t *dims,
                                  const void *raw, size_t bytes) {
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = (size_t)rank;
    if (rank) memcpy(b->idims[b->g.n_initializer], dims, sizeof(int64_t) * (size_t)rank);
    t->dims = b->idims[b->g.n_initializer];
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)raw;
    t->raw_data.len = bytes;
    b->initp[b->g.n_initializer++] = t;
    return t;
}

/* A node; inputs and outputs are NULL-terminated lists. */
#define L(...) ((const char *[]){__VA_ARGS__, NULL})
static Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char **in,
                                const char **out) {
    Onnx__NodeProto *n = &b->nodes[b->g.n_node];
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op;
    n->name = (char *)name;
    char **io_in = b->io[b->g.n_node][0], **io_out = b->io[b->g.n_node][1];
    for (; in[n->n_input]; n->n_input++) io_in[n->n_input] = (char *)in[n->n_input];
    for (; out[n->n_output]; n->n_output++) io_out[n->n_output] = (char *)out[n->n_output];
    n->input = io_in;
    n->output = io_out;
    b->nodep[b->g.n_node++] = n;
    return n;
}

static void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
    Onnx__AttributeProto *a = &b->attrs[b->n_attrs];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    memcpy(b->i64[b->n_attrs], v, sizeof(int64_t) * (size_t)cnt);
    a->n_ints = (size_t)cnt;
    a->ints = b->i64[b->n_attrs];
    if (!n->attribute) n->attribute = &b->attrp[b->n_attrs];
    b->attrp[b->n_attrs++] = a;
    n->n_attribute++; /* attributes of one node must be added consecutively */
}

static void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    mb_attr_ints(b, n, name, 1, &v);
    b->attrs[b->n_attrs - 1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    b->attrs[b->n_attrs - 1].has_i = 1;
    b->attrs[b->n_attrs - 1].i = v;
    b->attrs[b->n_attrs - 1].n_ints = 0;
}

static void *mb_pack(mb *b, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&b->m);
    void *buf = malloc(*len + 1);
    onnx__model_proto__pack(&b->m, buf);
    free(b);
    return buf;
}

static ir_graph *load_mb(mb *b, const ir_import_opts *o, ir_status *st, ir_diag *d) {
    size_t len;
    void *buf = mb_pack(b, &len);
    ir_graph *g = ir_onnx_load_buffer(buf, len, "t.onnx", o, st, d);
    free(buf);
    return g;
}

static int count_op(const ir_graph *g, ir_op_kind op) {
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += g->nodes[i].op == op;
    return c;
}

static const ir_value *val(const ir_graph *g, const char *name) {
    int v = ir_graph_find_value(g, name);
    assert_true(v >= 0);
    return &g->values[v];
}

static bool shape_is(const ir_value *v, ir_shape s) {
    return ir_shape_eq(&v->shape, &s);
}

static bool starts_with(const char *s, const char *p) {
    return strncmp(s, p, strlen(p)) == 0;
}

/* ---------------------------------------------------------------- models */

static float conv_w[4 * 3 * 3 * 3], conv_b[4];

/* x[1,3,8,8] -> Conv(w, b, pads 1) -> Relu -> y */
static mb *conv_relu_model(void) {
    mb *b = mb_new(17);
    tu_fill(conv_w, 108, 1);
    tu_fill(conv_b, 4, 2);
    mb_input(b, "x", DIMS(1, 3, 8, 8));
    mb_init(b, "w", F32, DIMS(4, 3, 3, 3), conv_w, sizeof conv_w);
    mb_init(b, "b", F32, DIMS(4), conv_b, sizeof conv_b);
    Onnx__NodeProto *c = mb_node(b, "Conv", "conv1", L("x", "w", "b"), L("c"));
    mb_attr_ints(b, c, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_attr_ints(b, c, "kernel_shape", 2, (int64_t[]){3, 3});
    mb_node(b, "Relu", "relu1", L("c"), L("y"));
    mb_output(b, "y");
    return b;
}

static void test_conv_relu(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts o = {.frozen_regex = "^b$"};
    ir_graph *g = load_mb(conv_relu_model(), &o, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[0].op, IR_OP_Conv);
    assert_int_equal(g->nodes[1].op, IR_OP_Relu);
    assert_int_equal(g->opset, 17);
    assert_string_equal(g->source, "t.onnx");
    assert_string_equal(g->name, "test");
    const ir_value *y = val(g, "y");
    assert_true(shape_is(y, TU_SHAPE(1, 4, 8, 8)));
    assert_int_equal(y->dtype, IR_F32);
    assert_true(y->flags & IR_VF_OUTPUT);
    const ir_value *w = val(g, "w");
    assert_int_equal(w->flags & (IR_VF_CONST | IR_VF_INITIALIZER | IR_VF_PARAM),
                     IR_VF_CONST | IR_VF_INITIALIZER | IR_VF_PARAM);
    assert_memory_equal(ir_value_data(w), conv_w, sizeof conv_w);
    assert_false(val(g, "b")->flags & IR_VF_PARAM); /* frozen */
    assert_true(val(g, "x")->flags & IR_VF_DATA);
    assert_false(val(g, "x")->flags & IR_VF_PARAM);
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    ir_graph_free(g);
}

/* The shape sub-graph PyTorch exports for x.view(x.size(0), -1). */
static const int64_t idx0 = 0, axes0[1] = {0}, minus1[1] = {-1};
static mb *shape_model(void) {
    mb *b = mb_new(13);
    mb_input(b, "x", DIMS(2, 3, 4));
    mb_init(b, "idx", I64, 0, NULL, &idx0, 8);
    mb_init(b, "axes", I64, DIMS(1), axes0, 8);
    mb_init(b, "m1", I64, DIMS(1), minus1, 8);
    mb_init(b, "unused", I64, DIMS(1), minus1, 8);
    mb_node(b, "Shape", "shape", L("x"), L("s"));
    Onnx__NodeProto *ga = mb_node(b, "Gather", "gather", L("s", "idx"), L("s0"));
    mb_attr_int(b, ga, "axis", 0);
    mb_node(b, "Unsqueeze", "unsq", L("s0", "axes"), L("u"));
    Onnx__NodeProto *cc = mb_node(b, "Concat", "concat", L("u", "m1"), L("shp"));
    mb_attr_int(b, cc, "axis", 0);
    mb_node(b, "Reshape", "reshape", L("x", "shp"), L("y"));
    mb_output(b, "y");
    return b;
}

static void test_shape_subgraph_folds(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = load_mb(shape_model(), NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->n_nodes, 1);
    const ir_node *n = &g->nodes[0];
    assert_int_equal(n->op, IR_OP_Reshape);
    const ir_value *shp = ir_node_in(g, n, 1);
    assert_true(shp->flags & IR_VF_CONST);
    assert_false(shp->flags & (IR_VF_PARAM | IR_VF_INITIALIZER));
    assert_int_equal(shp->dtype, IR_I64);
    assert_true(shape_is(shp, TU_SHAPE(2)));
    const int64_t *sd = ir_value_data(shp);
    assert_int_equal(sd[0], 2);
    assert_int_equal(sd[1], -1);
    assert_true(shape_is(val(g, "y"), TU_SHAPE(2, 12)));
    /* x, the folded shape and y: every unused constant and intermediate is gone */
    assert_int_equal(g->n_values, 3);
    assert_int_equal(ir_graph_find_value(g, "unused"), -1);
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    ir_graph_free(g);
}

/* x + float(a + b) with integer initializers a, b: no inference depends on the folding. */
static const int64_t two[1] = {2}, three[1] = {3};
static mb *int_const_model(void) {
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(1));
    mb_init(b, "a", I64, DIMS(1), two, 8);
    mb_init(b, "b", I64, DIMS(1), three, 8);
    mb_node(b, "Add", "sum", L("a", "b"), L("s"));
    Onnx__NodeProto *c = mb_node(b, "Cast", "cast", L("s"), L("sf"));
    mb_attr_int(b, c, "to", F32);
    mb_node(b, "Add", "add", L("x", "sf"), L("y"));
    mb_output(b, "y");
    return b;
}

static void test_fold_constants_api(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts o = {.no_fold = true};
    ir_graph *g = load_mb(int_const_model(), &o, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->n_nodes, 3);
    assert_int_equal(ir_fold_constants(g, &d), IR_OK);
    assert_int_equal(g->n_nodes, 1);
    assert_string_equal(g->nodes[0].name, "add");
    const ir_value *sf = val(g, "sf");
    assert_int_equal(sf->flags & (IR_VF_CONST | IR_VF_INITIALIZER | IR_VF_PARAM), IR_VF_CONST);
    assert_true(((const float *)ir_value_data(sf))[0] == 5.0f);
    assert_int_equal(ir_graph_find_value(g, "a"), -1); /* unused constants are pruned */
    assert_int_equal(g->n_values, 3);
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    ir_graph_free(g);
}

/* Folding stops at parameters, at random ops and at outputs over 64 MiB. */
static void test_fold_limits(void **state) {
    static const int64_t big[1] = {(64 << 20) / 4 + 1}, small[1] = {3};
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(1));
    mb_init(b, "big", I64, DIMS(1), big, 8);
    mb_init(b, "small", I64, DIMS(1), small, 8);
    mb_init(b, "w", F32, DIMS(4), conv_b, sizeof conv_b);
    mb_node(b, "ConstantOfShape", "cbig", L("big"), L("zbig"));
    mb_node(b, "ConstantOfShape", "csmall", L("small"), L("zsmall"));
    mb_node(b, "Neg", "negw", L("w"), L("nw"));
    mb_node(b, "Add", "add1", L("x", "zbig"), L("y1"));
    mb_node(b, "Add", "add2", L("x", "zsmall"), L("y2"));
    mb_node(b, "Add", "add3", L("x", "nw"), L("y3"));
    mb_output(b, "y1");
    mb_output(b, "y2");
    mb_output(b, "y3");
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = load_mb(b, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(count_op(g, IR_OP_ConstantOfShape), 1); /* the big one stays */
    assert_int_equal(count_op(g, IR_OP_Neg), 1);             /* w is a parameter */
    assert_int_equal(count_op(g, IR_OP_Add), 3);
    assert_true(val(g, "zsmall")->flags & IR_VF_CONST);
    assert_false(val(g, "zbig")->flags & IR_VF_CONST);
    assert_true(shape_is(val(g, "y1"), TU_SHAPE(16777217)));
    ir_graph_free(g);
}

static void test_out_of_order_is_sorted(void **state) {
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(2, 2));
    mb_node(b, "Relu", "second", L("t"), L("y"));
    mb_node(b, "Neg", "first", L("x"), L("t"));
    mb_output(b, "y");
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = load_mb(b, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->n_nodes, 2);
    assert_string_equal(g->nodes[0].name, "first");
    assert_string_equal(g->nodes[1].name, "second");
    assert_int_equal(ir_graph_validate(g, &d), IR_OK);
    ir_graph_free(g);
}

static void test_cycle(void **state) {
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(2));
    mb_node(b, "Add", "a", L("x", "t2"), L("t1"));
    mb_node(b, "Neg", "b", L("t1"), L("t2"));
    mb_output(b, "t1");
    ir_diag d = {{0}};
    ir_status st;
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_true(starts_with(d.msg, "t.onnx: node '"));
    assert_non_null(strstr(d.msg, "cycle"));
}

static void test_unsupported_list(void **state) {
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(2));
    mb_node(b, "FooOp", "f1", L("x"), L("a"));
    mb_node(b, "Relu", "r", L("a"), L("b2"));
    mb_node(b, "BarOp", "b1", L("b2"), L("c"));
    mb_node(b, "FooOp", "f2", L("c"), L("y"));
    mb_output(b, "y");
    ir_diag d = {{0}};
    ir_status st;
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_string_equal(d.msg, "t.onnx: unsupported ops: FooOp (node 'f1', opset 17), "
                               "BarOp (node 'b1', opset 17)");
}

static mb *opaque_model(bool declare) {
    mb *b = mb_new(17);
    mb_input(b, "x", DIMS(2, 3));
    mb_node(b, "FooOp", "f1", L("x"), L("a"));
    mb_node(b, "Relu", "r", L("a"), L("y"));
    mb_output(b, "y");
    if (declare) mb_vi(b, 2, "a", F32, DIMS(3, 5), NULL);
    return b;
}

static void test_opaque(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    ir_import_opts o = {.allow_opaque = true};
    ir_graph *g = load_mb(opaque_model(true), &o, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[0].op, IR_OP_OPAQUE);
    assert_string_equal(g->nodes[0].op_type, "FooOp");
    assert_true(shape_is(val(g, "y"), TU_SHAPE(3, 5)));
    /* export keeps the opaque node and its declared shape */
    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie_test_opaque_%d.onnx", (int)getpid());
    assert_int_equal(ir_onnx_save(g, path, &d), IR_OK);
    ir_graph *g2 = ir_onnx_load(path, &o, &st, &d);
    if (!g2) fail_msg("%s", d.msg);
    assert_int_equal(g2->nodes[0].op, IR_OP_OPAQUE);
    assert_true(shape_is(val(g2, "a"), TU_SHAPE(3, 5)));
    unlink(path);
    ir_graph_free(g2);
    ir_graph_free(g);

    /* undeclared: still unsupported */
    assert_null(load_mb(opaque_model(false), &o, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_true(starts_with(d.msg, "t.onnx: unsupported ops: FooOp (node 'f1', opset 17)"));
    /* declared but not allowed */
    assert_null(load_mb(opaque_model(true), NULL, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
}

static mb *symbolic_model(void) {
    mb *b = mb_new(17);
    mb_vi(b, 0, "x", F32, DIMS(-1, 3), (const char *[]){"batch", NULL});
    mb_node(b, "Relu", "r", L("x"), L("y"));
    mb_output(b, "y");
    return b;
}

static void test_symbolic_dims(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    assert_null(load_mb(symbolic_model(), NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_string_equal(d.msg, "t.onnx: input 'x' has symbolic dimension 'batch': give it with "
                               "--shape batch=N or --shape x=D0,D1,...");

    const char *names[1] = {"batch"};
    ir_shape vals[1] = {TU_SHAPE(5)};
    ir_import_opts o = {.n_shapes = 1, .shape_names = names, .shape_values = vals};
    ir_graph *g = load_mb(symbolic_model(), &o, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_true(shape_is(val(g, "y"), TU_SHAPE(5, 3)));
    ir_graph_free(g);

    names[0] = "x";
    vals[0] = TU_SHAPE(7, 3);
    g = load_mb(symbolic_model(), &o, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_true(shape_is(val(g, "y"), TU_SHAPE(7, 3)));
    ir_graph_free(g);

    vals[0] = TU_SHAPE(7, 3, 1); /* rank mismatch */
    assert_null(load_mb(symbolic_model(), &o, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_true(starts_with(d.msg, "t.onnx: --shape x"));

    names[0] = "nothing";
    vals[0] = TU_SHAPE(5);
    assert_null(load_mb(symbolic_model(), &o, &st, &d));
    assert_non_null(strstr(d.msg, "nothing"));
}

static void test_bad_options(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    const char *data[1] = {"nope"};
    ir_import_opts o = {.n_data = 1, .data_names = data};
    assert_null(load_mb(conv_relu_model(), &o, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_true(starts_with(d.msg, "t.onnx: --data nope"));
    ir_import_opts o2 = {.frozen_regex = "(["};
    assert_null(load_mb(conv_relu_model(), &o2, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_true(starts_with(d.msg, "t.onnx: --frozen"));
}

static void test_invalid_models(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    /* opset out of range */
    mb *b = conv_relu_model();
    b->os[0].version = 12;
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "opset 12"));
    /* initializer data shorter than its dims */
    b = conv_relu_model();
    b->inits[1].raw_data.len = 8;
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_true(starts_with(d.msg, "t.onnx: initializer 'b'"));
    /* unsupported dtype */
    b = conv_relu_model();
    b->inits[1].data_type = 14; /* complex64 */
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "'b'"));
    /* a node input that nothing provides */
    b = conv_relu_model();
    b->nodes[1].input[0] = "ghost";
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "relu1"));
    assert_non_null(strstr(d.msg, "ghost"));
    /* the same name produced twice */
    b = conv_relu_model();
    b->nodes[1].output[0] = "c";
    assert_null(load_mb(b, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'c'"));
    /* typed int64_data fields decode like raw_data */
    b = shape_model();
    b->inits[2].has_raw_data = 0;
    b->inits[2].n_int64_data = 1;
    b->inits[2].int64_data = (int64_t *)minus1;
    ir_graph *g = load_mb(b, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_true(shape_is(val(g, "y"), TU_SHAPE(2, 12)));
    ir_graph_free(g);
}

static const char *write_tmp(const char *tag, const void *buf, size_t len, char *path, size_t n) {
    snprintf(path, n, "/tmp/magpie_test_%s_%d.onnx", tag, (int)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    return path;
}

/* Loads bytes through a file; expects NULL, status want and a message starting with the path. */
static void expect_bad(const char *tag, const void *buf, size_t len, ir_status want) {
    char path[128];
    ir_diag d = {{0}};
    ir_status st = IR_OK;
    write_tmp(tag, buf, len, path, sizeof path);
    ir_graph *g = ir_onnx_load(path, NULL, &st, &d);
    unlink(path);
    if (g) fail_msg("%s: loaded", tag);
    if (st != want)
        fail_msg("%s: status %s, want %s (%s)", tag, ir_status_to_string(st),
                 ir_status_to_string(want), d.msg);
    char prefix[140];
    snprintf(prefix, sizeof prefix, "%s: ", path);
    if (!starts_with(d.msg, prefix)) fail_msg("%s: message '%s'", tag, d.msg);
}

static void test_bad_bytes(void **state) {
    expect_bad("empty", "", 0, IR_ERR_PARSE);
    size_t len;
    unsigned char *buf = mb_pack(conv_relu_model(), &len);
    expect_bad("truncated", buf, len / 2, IR_ERR_PARSE);
    free(buf);
    unsigned char rnd[512];
    for (size_t i = 0; i < sizeof rnd; i++) rnd[i] = (unsigned char)(ir_mix64(i + 7) >> 7);
    expect_bad("random", rnd, sizeof rnd, IR_ERR_PARSE);
    /* a TensorProto decodes as a ModelProto without a graph */
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.n_dims = 1;
    t.dims = (int64_t[]){4};
    t.has_raw_data = 1;
    t.raw_data.data = (uint8_t *)conv_b;
    t.raw_data.len = sizeof conv_b;
    unsigned char tb[256];
    size_t tl = onnx__tensor_proto__pack(&t, tb);
    expect_bad("tensorproto", tb, tl, IR_ERR_INVALID);

    ir_diag d = {{0}};
    ir_status st;
    assert_null(ir_onnx_load("/nonexistent/dir/m.onnx", NULL, &st, &d));
    assert_int_equal(st, IR_ERR_IO);
    assert_true(starts_with(d.msg, "/nonexistent/dir/m.onnx: "));
}

/* Runs g on a deterministic input; returns the outputs (caller frees with rt_result_free). */
static void run_graph(const ir_graph *g, rt_result *r) {
    ir_diag d = {{0}};
    rt_options o = {.seed = 3, .fill_missing_data = true};
    memset(r, 0, sizeof *r);
    if (rt_run(g, NULL, 0, &o, r, &d) != IR_OK) fail_msg("%s", d.msg);
}

static void round_trip(mb *b) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = load_mb(b, NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    char path[64];
    snprintf(path, sizeof path, "/tmp/magpie_test_rt_%d.onnx", (int)getpid());
    assert_int_equal(ir_onnx_save(g, path, &d), IR_OK);
    char tmp[96];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1); /* no temporary left */
    ir_graph *g2 = ir_onnx_load(path, NULL, &st, &d);
    unlink(path);
    if (!g2) fail_msg("%s", d.msg);
    assert_int_equal(g2->n_nodes, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_equal(g2->nodes[i].op, g->nodes[i].op);
        assert_string_equal(g2->nodes[i].name, g->nodes[i].name);
        assert_int_equal(g2->nodes[i].n_attrs, g->nodes[i].n_attrs);
    }
    assert_int_equal(g2->n_values, g->n_values);
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *a = &g->values[v], *c = val(g2, a->name);
        assert_int_equal(a->dtype, c->dtype);
        assert_true(ir_shape_eq(&a->shape, &c->shape));
        assert_int_equal(a->flags & (IR_VF_PARAM | IR_VF_CONST | IR_VF_INPUT | IR_VF_OUTPUT),
                         c->flags & (IR_VF_PARAM | IR_VF_CONST | IR_VF_INPUT | IR_VF_OUTPUT));
        if (a->blob) assert_memory_equal(ir_value_data(a), ir_value_data(c), ir_value_bytes(a));
    }
    rt_result r1, r2;
    run_graph(g, &r1);
    run_graph(g2, &r2);
    assert_int_equal(r1.n_outputs, r2.n_outputs);
    for (int i = 0; i < r1.n_outputs; i++) {
        size_t bytes =
            (size_t)ir_shape_numel(&r1.outputs[i].shape) * ir_dtype_size(r1.outputs[i].dtype);
        assert_memory_equal(r1.outputs[i].data, r2.outputs[i].data, bytes);
    }
    rt_result_free(&r1);
    rt_result_free(&r2);
    ir_graph_free(g2);
    ir_graph_free(g);
}

static void test_export_round_trip(void **state) {
    round_trip(conv_relu_model());
    round_trip(shape_model());
    round_trip(int_const_model());
}

static void test_save_fails_cleanly(void **state) {
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *g = load_mb(conv_relu_model(), NULL, &st, &d);
    if (!g) fail_msg("%s", d.msg);
    assert_int_equal(ir_onnx_save(g, "/nonexistent/dir/out.onnx", &d), IR_ERR_IO);
    assert_true(starts_with(d.msg, "/nonexistent/dir/out.onnx: "));
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- fixtures */

/* Numeric fixtures may have symbolic dims (dynamic batch): their input_K.npy give the shapes
 * of the K-th graph input (non-initializer), named from the model itself. Returns the count. */
static int fixture_shapes(const char *model, const char *dir, const char **names, ir_shape *shapes,
                          char **owned) {
    FILE *f = fopen(model, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, got, buf);
    free(buf);
    int n = 0;
    for (size_t i = 0; m && m->graph && i < m->graph->n_input && n < 8; i++) {
        const char *in = m->graph->input[i]->name;
        bool is_init = false;
        for (size_t k = 0; k < m->graph->n_initializer; k++)
            is_init |= strcmp(m->graph->initializer[k]->name, in) == 0;
        if (is_init) continue;
        char npy[2200];
        snprintf(npy, sizeof npy, "%s/input_%d.npy", dir, n);
        ir_dtype dt;
        ir_blob *blob = NULL;
        if (ir_npy_read(npy, &dt, &shapes[n], &blob, NULL) != IR_OK) break;
        ir_blob_unref(blob);
        names[n] = owned[n] = strdup(in);
        n++;
    }
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return n;
}

/* Imports every .onnx file of dir (or every DIR/<sub>/model.onnx when nested); returns the
 * count, adding failures to *failed and printing each. */
static int import_dir(const char *rel, bool nested, int *failed) {
    char dir[1024];
    tu_src_path(rel, dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("fixture directory %s is missing", dir);
    struct dirent *e;
    int count = 0;
    while ((e = readdir(dp))) {
        char path[2048], sub[2048];
        if (e->d_name[0] == '.') continue;
        if (nested) {
            snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
            if (access(path, F_OK) != 0) continue;
        } else {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 5, ".onnx") != 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        }
        ir_diag d = {{0}};
        ir_status st;
        ir_import_opts o = {.allow_opaque = false};
        const char *names[8];
        ir_shape shapes[8];
        char *owned[8] = {0};
        if (nested) {
            snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
            o.n_shapes = fixture_shapes(path, sub, names, shapes, owned);
            o.shape_names = names;
            o.shape_values = shapes;
        }
        ir_graph *g = ir_onnx_load(path, &o, &st, &d);
        for (int k = 0; k < 8; k++) free(owned[k]);
        count++;
        if (!g) {
            fprintf(stderr, "FAILED: %s (%s)\n", d.msg, ir_status_to_string(st));
            (*failed)++;
            continue;
        }
        /* batch-norm running statistics are never trainable parameters */
        for (int v = 0; v < g->n_values; v++) {
            const char *nm = g->values[v].name;
            size_t l = strlen(nm);
            bool stat = (l >= 12 && strcmp(nm + l - 12, "running_mean") == 0) ||
                        (l >= 11 && strcmp(nm + l - 11, "running_var") == 0);
            if (stat && (g->values[v].flags & IR_VF_PARAM)) {
                fprintf(stderr, "FAILED: %s: '%s' is classified as a parameter\n", path, nm);
                (*failed)++;
                break;
            }
        }
        fprintf(stderr, "ok: %s: %d nodes\n", path, g->n_nodes);
        ir_graph_free(g);
    }
    closedir(dp);
    return count;
}

static void test_fixtures_import(void **state) {
    int failed = 0;
    int n = import_dir("tests/fixtures/numeric", true, &failed);
    n += import_dir("tests/fixtures/structure", false, &failed);
    assert_true(n > 0);
    if (failed) fail_msg("%d of %d fixture models failed to import (listed above)", failed, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_relu),
        cmocka_unit_test(test_shape_subgraph_folds),
        cmocka_unit_test(test_fold_constants_api),
        cmocka_unit_test(test_fold_limits),
        cmocka_unit_test(test_out_of_order_is_sorted),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_unsupported_list),
        cmocka_unit_test(test_opaque),
        cmocka_unit_test(test_symbolic_dims),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_invalid_models),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_export_round_trip),
        cmocka_unit_test(test_save_fails_cleanly),
        cmocka_unit_test(test_fixtures_import),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
