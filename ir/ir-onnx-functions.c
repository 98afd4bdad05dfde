/* ir-onnx-functions.c - ONNX functions expanded at import: model-local ones (ModelProto.functions)
 * and the standard ops that ONNX defines by a function body and magpie has no op for
 * (ir-onnx-stdfn.h: MeanVarianceNormalization, HannWindow, Shrink...).
 *
 * Before the importer reads the main graph, every node whose (domain, op_type, overload) names a
 * function of the model is replaced by the function's body, and so is every default-domain node
 * of an op that magpie has neither an op nor an expansion of its own for (ir-expand-attn.h) and
 * that ONNX gives a body at the model's opset; recursively (a body may call other functions; a
 * cycle or more than FN_MAX_DEPTH nested calls is refused). A standard body that needs an op
 * magpie lacks is refused in one line naming that op.
 * Per call:
 *  - the function's formal inputs and outputs become the call's actual names (an omitted
 *    optional input stays omitted: "");
 *  - every other value of the body gets a name unique to the call, "<function>.<k>/<name>" with
 *    k counting the calls, and each body node is named "<call node>/<body node or index>";
 *  - an attribute with ref_attr_name takes the call's attribute of that name (renamed to the body
 *    attribute's own name), else the function's default (FunctionProto.attribute_proto, IR 9;
 *    for a standard op, the schema's default, which the generator stores there), else it is
 *    left out, as ONNX specifies.
 * The expanded nodes live in an arena (they point into the unpacked message for everything they
 * do not change); ir_onnx_functions_restore puts the graph's own node array back before the
 * message is freed. Bodies with sub-graph attributes (If, Loop, Scan) are refused: renaming inside
 * sub-graphs is not done. The body is read at the model's opsets. */
#include "ir-onnx-functions.h"
#include "ir-expand-attn.h"
#include "ir-onnx-stdfn.h"

#include <stdio.h>
#include <stdlib.h>

#define FN_MAX_DEPTH 32

typedef struct fn_ctx {
    const Onnx__ModelProto *mp;
    int64_t opset;           /* the model's default-domain opset */
    ir_onnx_fn_expansion *x; /* holds the standard bodies unpacked */
    ir_arena *arena;
    ir_diag *d;
    Onnx__NodeProto **out; /* the expanded node list */
    size_t n_out, cap_out;
    int64_t calls;
    const Onnx__FunctionProto *stack[FN_MAX_DEPTH];
    int depth;
} fn_ctx;

static const char *nz(const char *s) {
    return s ? s : "";
}

static bool same_domain(const char *a, const char *b) {
    a = nz(a);
    b = nz(b);
    if (!strcmp(a, "ai.onnx")) a = "";
    if (!strcmp(b, "ai.onnx")) b = "";
    return strcmp(a, b) == 0;
}

/* The model-local function a node calls, or NULL. */
static const Onnx__FunctionProto *find_local(const Onnx__ModelProto *mp,
                                             const Onnx__NodeProto *np) {
    for (size_t i = 0; i < mp->n_functions; i++) {
        const Onnx__FunctionProto *f = mp->functions[i];
        if (!strcmp(nz(f->name), nz(np->op_type)) && same_domain(f->domain, np->domain) &&
            !strcmp(nz(f->overload), nz(np->overload)))
            return f;
    }
    return NULL;
}

/* Does magpie read this node as it is: an op of the table, or one it expands itself? */
static bool magpie_reads(const Onnx__NodeProto *np) {
    const char *dom = same_domain(np->domain, "") ? "" : nz(np->domain);
    return ir_op_find(dom, nz(np->op_type)) != IR_OP_OPAQUE ||
           ir_expandable_op(dom, nz(np->op_type));
}

/* Index of the standard body a node calls at the model's opset, or -1. */
static int find_std(int64_t opset, const Onnx__NodeProto *np) {
    if (!same_domain(np->domain, "") || *nz(np->overload) || magpie_reads(np)) return -1;
    return ir_onnx_std_fn_find(nz(np->op_type), opset);
}

static ir_status nomem(fn_ctx *c);

/* The function a node calls (model-local first, then standard), or NULL; *st is set on failure. */
static const Onnx__FunctionProto *find_function(fn_ctx *c, const Onnx__NodeProto *np,
                                                ir_status *st) {
    *st = IR_OK;
    const Onnx__FunctionProto *f = find_local(c->mp, np);
    if (f) return f;
    int k = find_std(c->opset, np);
    if (k < 0) return NULL;
    ir_onnx_fn_expansion *x = c->x;
    if (!x->std_bodies &&
        !(x->std_bodies = calloc((size_t)ir_onnx_std_fn_count(), sizeof *x->std_bodies))) {
        *st = nomem(c);
        return NULL;
    }
    x->n_std = (size_t)ir_onnx_std_fn_count();
    if (!x->std_bodies[k] && !(x->std_bodies[k] = ir_onnx_std_fn_unpack(k))) *st = nomem(c);
    return x->std_bodies[k];
}

/* Is f one of the standard bodies? */
static bool is_std(const fn_ctx *c, const Onnx__FunctionProto *f) {
    for (size_t k = 0; k < c->x->n_std; k++)
        if (c->x->std_bodies[k] == f) return true;
    return false;
}

static ir_status nomem(fn_ctx *c) {
    return ir_diag_set(c->d, IR_ERR_NOMEM, "out of memory expanding ONNX functions");
}

static bool push(fn_ctx *c, Onnx__NodeProto *np) {
    if (c->n_out == c->cap_out) {
        size_t cap = c->cap_out ? 2 * c->cap_out : 64;
        Onnx__NodeProto **a = ir_arena_alloc(c->arena, cap * sizeof *a);
        if (!a) return false;
        if (c->n_out) memcpy(a, c->out, c->n_out * sizeof *a);
        c->out = a;
        c->cap_out = cap;
    }
    c->out[c->n_out++] = np;
    return true;
}

/* One call's renaming: formal -> actual for the interface, a fresh name for the rest. */
typedef struct fn_scope {
    const Onnx__FunctionProto *f;
    const Onnx__NodeProto *call;
    const char *prefix; /* "<function>.<k>/" */
} fn_scope;

static char *rename_value(fn_ctx *c, const fn_scope *s, const char *name) {
    if (!*name) return (char *)""; /* omitted optional */
    for (size_t i = 0; i < s->f->n_input; i++)
        if (!strcmp(s->f->input[i], name))
            return (char *)(i < s->call->n_input ? nz(s->call->input[i]) : "");
    for (size_t i = 0; i < s->f->n_output; i++)
        if (!strcmp(s->f->output[i], name))
            return (char *)(i < s->call->n_output ? nz(s->call->output[i]) : "");
    size_t n = strlen(s->prefix) + strlen(name) + 1;
    char *r = ir_arena_alloc(c->arena, n);
    if (r) snprintf(r, n, "%s%s", s->prefix, name);
    return r;
}

static const Onnx__AttributeProto *find_attr(Onnx__AttributeProto **a, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(nz(a[i]->name), name)) return a[i];
    return NULL;
}

static ir_status expand_nodes(fn_ctx *c, Onnx__NodeProto **nodes, size_t n);

/* Copies body node bn of call s with its names and attributes resolved, then expands it if it
 * calls a function itself. */
static ir_status instantiate(fn_ctx *c, const fn_scope *s, const Onnx__NodeProto *bn, size_t idx,
                             const char *caller_label) {
    Onnx__NodeProto *np = ir_arena_alloc(c->arena, sizeof *np);
    if (!np) return nomem(c);
    *np = *bn; /* shares the body's op_type, domain, overload, doc_string */
    char idxs[32];
    snprintf(idxs, sizeof idxs, "%zu", idx);
    const char *bname = bn->name && *bn->name ? bn->name : idxs;
    size_t ln = strlen(caller_label) + strlen(bname) + 2;
    if (!(np->name = ir_arena_alloc(c->arena, ln))) return nomem(c);
    snprintf(np->name, ln, "%s/%s", caller_label, bname);
    np->input = ir_arena_alloc(c->arena, (bn->n_input + 1) * sizeof(char *));
    np->output = ir_arena_alloc(c->arena, (bn->n_output + 1) * sizeof(char *));
    np->attribute = ir_arena_alloc(c->arena, (bn->n_attribute + 1) * sizeof(void *));
    if (!np->input || !np->output || !np->attribute) return nomem(c);
    for (size_t k = 0; k < bn->n_input; k++)
        if (!(np->input[k] = rename_value(c, s, nz(bn->input[k])))) return nomem(c);
    for (size_t k = 0; k < bn->n_output; k++)
        if (!(np->output[k] = rename_value(c, s, nz(bn->output[k])))) return nomem(c);
    if (is_std(c, s->f) && !magpie_reads(bn) && find_std(c->opset, bn) < 0)
        return ir_diag_set(c->d, IR_ERR_UNSUPPORTED,
                           "node '%s' (%s): its ONNX function body needs %s, which magpie does not "
                           "have",
                           nz(s->call->name), nz(s->f->name), nz(bn->op_type));
    np->n_attribute = 0;
    for (size_t k = 0; k < bn->n_attribute; k++) {
        Onnx__AttributeProto *a = bn->attribute[k];
        if (a->n_graphs > 0 || a->g)
            return ir_diag_set(c->d, IR_ERR_UNSUPPORTED,
                               "function '%s': node '%s' (%s) has a sub-graph attribute "
                               "(sub-graphs in function bodies are not supported)",
                               nz(s->f->name), np->name, nz(bn->op_type));
        const char *ref = nz(a->ref_attr_name);
        if (!*ref) {
            np->attribute[np->n_attribute++] = a;
            continue;
        }
        const Onnx__AttributeProto *v = find_attr(s->call->attribute, s->call->n_attribute, ref);
        if (!v) v = find_attr(s->f->attribute_proto, s->f->n_attribute_proto, ref);
        if (!v) continue; /* no value and no default: the attribute is absent */
        Onnx__AttributeProto *cp = ir_arena_alloc(c->arena, sizeof *cp);
        if (!cp) return nomem(c);
        *cp = *v;
        cp->name = a->name;
        cp->ref_attr_name = NULL;
        np->attribute[np->n_attribute++] = cp;
    }
    return expand_nodes(c, &np, 1);
}

/* Appends nodes to the output, each call of a model-local function replaced by its body. */
static ir_status expand_nodes(fn_ctx *c, Onnx__NodeProto **nodes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto *np = nodes[i];
        ir_status fst;
        const Onnx__FunctionProto *f = find_function(c, np, &fst);
        if (fst != IR_OK) return fst;
        if (!f) {
            if (!push(c, np)) return nomem(c);
            continue;
        }
        char gen[32];
        snprintf(gen, sizeof gen, "node_%zu", i);
        const char *label = np->name && *np->name ? np->name : gen;
        for (int k = 0; k < c->depth; k++)
            if (c->stack[k] == f)
                return ir_diag_set(c->d, IR_ERR_INVALID,
                                   "function '%s' calls itself (through node '%s')", nz(f->name),
                                   label);
        if (c->depth == FN_MAX_DEPTH)
            return ir_diag_set(c->d, IR_ERR_UNSUPPORTED,
                               "node '%s': more than %d nested function calls", label,
                               FN_MAX_DEPTH);
        if (np->n_input > f->n_input || np->n_output > f->n_output)
            return ir_diag_set(c->d, IR_ERR_INVALID,
                               "node '%s' calls function '%s' with %zu inputs and %zu outputs; "
                               "it has %zu and %zu",
                               label, nz(f->name), np->n_input, np->n_output, f->n_input,
                               f->n_output);
        char pre[256];
        snprintf(pre, sizeof pre, "%s.%lld/", nz(f->name), (long long)c->calls++);
        fn_scope s = {.f = f, .call = np, .prefix = ir_arena_strdup(c->arena, pre)};
        char *lab = ir_arena_strdup(c->arena, label);
        if (!s.prefix || !lab) return nomem(c);
        c->stack[c->depth++] = f;
        for (size_t b = 0; b < f->n_node; b++) {
            ir_status st = instantiate(c, &s, f->node[b], b, lab);
            if (st != IR_OK) return st;
        }
        c->depth--;
    }
    return IR_OK;
}

static void free_std(ir_onnx_fn_expansion *x) {
    for (size_t k = 0; k < x->n_std; k++)
        if (x->std_bodies[k]) onnx__function_proto__free_unpacked(x->std_bodies[k], NULL);
    free(x->std_bodies);
    x->std_bodies = NULL;
    x->n_std = 0;
}

static int64_t default_opset(const Onnx__ModelProto *mp) {
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (same_domain(mp->opset_import[i]->domain, ""))
            return mp->opset_import[i]->has_version ? mp->opset_import[i]->version : 1;
    return 1;
}

ir_status ir_onnx_functions_expand(Onnx__ModelProto *mp, ir_onnx_fn_expansion *x, ir_diag *d) {
    memset(x, 0, sizeof *x);
    if (!mp->graph) return IR_OK;
    const int64_t opset = default_opset(mp);
    bool any = false;
    for (size_t i = 0; i < mp->graph->n_node && !any; i++)
        any = find_local(mp, mp->graph->node[i]) || find_std(opset, mp->graph->node[i]) >= 0;
    if (!any) return IR_OK;
    fn_ctx c = {.mp = mp, .opset = opset, .x = x, .d = d};
    if (!(c.arena = ir_arena_new())) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    ir_status st = expand_nodes(&c, mp->graph->node, mp->graph->n_node);
    if (st != IR_OK) {
        ir_arena_free(c.arena);
        free_std(x);
        return st;
    }
    x->arena = c.arena;
    x->graph_nodes = mp->graph->node;
    x->n_graph_nodes = mp->graph->n_node;
    x->active = true;
    mp->graph->node = c.out;
    mp->graph->n_node = c.n_out;
    return IR_OK;
}

void ir_onnx_functions_restore(Onnx__ModelProto *mp, ir_onnx_fn_expansion *x) {
    if (!x->active) return;
    mp->graph->node = x->graph_nodes;
    mp->graph->n_node = x->n_graph_nodes;
    ir_arena_free(x->arena);
    free_std(x);
    memset(x, 0, sizeof *x);
}
