/* emit-torch.c - the driver of `magpie emit --torch` (emit-torch.h): binds values to Python
 * variables, frees each tensor at its last use, and assembles the module.
 *
 * Lifetimes follow DESIGN.md's memory accounting: residents (parameters, graph inputs, constants)
 * stay bound for the whole step; every produced value is deleted right after the node that reads
 * it last (or right after its producer when nothing reads it and it is no graph output), so that
 * PyTorch's allocator frees it where magpie's schedule does. Order-only inputs (FissionSlice's
 * buffers) count as reads, as they keep the buffer live in magpie's accounting too. The output of
 * an in-place op (optimizer updates, fission assembles, PET patches) is the same tensor object as
 * its input k, so the buffer lives on under the new name. Constants that an in-place op writes are
 * copied fresh for each step (_fresh) so the module's own value never changes. */
#include "emit-torch.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* emit-torch-prelude.c, generated from emit_torch_prelude.py at build time. */
extern const char et_prelude_src[];

enum et_kind { ET_PRODUCED = 0, ET_PARAM, ET_INPUT, ET_CONST };

#define ET_MAX_SECTIONS 64

struct et_ctx {
    const ir_graph *g;
    ir_diag *d;
    FILE *body, *pro, *cst; /* open_memstream streams: statements, bindings, constants */
    char *body_buf, *pro_buf, *cst_buf;
    size_t body_len, pro_len, cst_len;
    int *last_use;         /* per value: index of the last node reading it, -1 */
    unsigned char *kind;   /* per value: enum et_kind */
    unsigned char *bound;  /* per value: resident already bound in the prologue */
    unsigned char *target; /* per value: written in place by some node */
    /* per value: the fused FissionAccumulate whose buffer its producer writes it into in the
     * plan's order (ir_graph_fused_parts), or -1; into_done: the producer's statement did */
    int *into;
    unsigned char *into_done;
    char **strs; /* strings handed out by et_ints etc., freed at the end */
    int n_strs, cap_strs;
    const char *sections[ET_MAX_SECTIONS];
    int n_sections;
};

const ir_graph *et_graph(const et_ctx *e) {
    return e->g;
}

static const char *keep_str(et_ctx *e, char *s) {
    if (!s) return "None";
    if (e->n_strs == e->cap_strs) {
        int cap = e->cap_strs ? 2 * e->cap_strs : 256;
        char **p = realloc(e->strs, (size_t)cap * sizeof *p);
        if (!p) {
            free(s);
            return "None";
        }
        e->strs = p;
        e->cap_strs = cap;
    }
    e->strs[e->n_strs++] = s;
    return s;
}

static const char *fmt_str(et_ctx *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt_str(et_ctx *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return keep_str(e, s);
}

/* A Python string literal of s (value names may hold any character). */
static const char *py_str(et_ctx *e, const char *s) {
    size_t n = strlen(s);
    char *o = malloc(4 * n + 3), *p = o;
    if (!o) return "''";
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20 || *c == 0x7f) {
            p += sprintf(p, "\\x%02x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = 0;
    return keep_str(e, o);
}

const char *et_ints(et_ctx *e, const int64_t *v, int n, bool list) {
    size_t cap = 24 * (size_t)n + 8;
    char *s = malloc(cap), *p = s;
    if (!s) return list ? "[]" : "()";
    *p++ = list ? '[' : '(';
    for (int i = 0; i < n; i++) p += sprintf(p, "%s%" PRId64, i ? ", " : "", v[i]);
    if (!list && n == 1) *p++ = ',';
    *p++ = list ? ']' : ')';
    *p = 0;
    return keep_str(e, s);
}

const char *et_shape(et_ctx *e, const ir_shape *s) {
    return et_ints(e, s->dims, s->rank, false);
}

const char *et_dtype(ir_dtype t) {
    switch (t) {
    case IR_F32: return "torch.float32";
    case IR_F16: return "torch.float16";
    case IR_BF16: return "torch.bfloat16";
    case IR_F64: return "torch.float64";
    case IR_I64: return "torch.int64";
    case IR_I32: return "torch.int32";
    case IR_I8: return "torch.int8";
    case IR_U8: return "torch.uint8";
    case IR_I16: return "torch.int16";
    case IR_U16: return "torch.uint16";
    case IR_U32: return "torch.uint32";
    case IR_U64: return "torch.uint64";
    case IR_BOOL: return "torch.bool";
    default: return "None";
    }
}

const char *et_run_dtype(et_ctx *e, ir_dtype t) {
    if (!ir_dtype_is_float(t)) return et_dtype(t);
    return fmt_str(e, "_fd(%s, fdt)", et_dtype(t));
}

const char *et_float(et_ctx *e, double v) {
    if (isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
    if (isnan(v)) return "float('nan')";
    return fmt_str(e, "%.17g", v);
}

bool et_axis(int64_t a, int r, int *out) {
    if (a < -r || a >= r) return false;
    *out = (int)(a < 0 ? a + r : a);
    return true;
}

int et_const_ints(const et_ctx *e, const ir_node *n, int i, int64_t *out, int cap) {
    const ir_value *v = ir_node_in(e->g, n, i);
    if (!v || !v->blob || (v->dtype != IR_I64 && v->dtype != IR_I32)) return -1;
    int64_t cnt = ir_shape_numel(&v->shape);
    if (cnt > cap) return -1;
    for (int64_t j = 0; j < cnt; j++) out[j] = ir_load_i64(ir_value_data(v), v->dtype, j);
    return (int)cnt;
}

int et_const_floats(const et_ctx *e, const ir_node *n, int i, double *out, int cap) {
    const ir_value *v = ir_node_in(e->g, n, i);
    if (!v || !v->blob || !ir_dtype_is_float(v->dtype)) return -1;
    int64_t cnt = ir_shape_numel(&v->shape);
    if (cnt > cap) return -1;
    for (int64_t j = 0; j < cnt; j++) out[j] = ir_load_f64(ir_value_data(v), v->dtype, j);
    return (int)cnt;
}

void et_line(et_ctx *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("    ", e->body);
    vfprintf(e->body, fmt, ap);
    fputc('\n', e->body);
    va_end(ap);
}

void et_use(et_ctx *e, const char *name) {
    for (int i = 0; i < e->n_sections; i++)
        if (strcmp(e->sections[i], name) == 0) return;
    if (e->n_sections < ET_MAX_SECTIONS) e->sections[e->n_sections++] = name;
}

ir_status et_refuse(et_ctx *e, const ir_node *n, const char *why, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, why);
    vsnprintf(buf, sizeof buf, why, ap);
    va_end(ap);
    return ir_node_fail(e->d, IR_ERR_UNSUPPORTED, n, "op %s%s%s has no PyTorch form in emit: %s",
                        n->domain && *n->domain ? n->domain : "",
                        n->domain && *n->domain ? "." : "",
                        n->op_type ? n->op_type : ir_op_name(n->op), buf);
}

/* Writes constant v's registration: its bytes in hex, or _Z for all zeros. */
static void emit_const_data(et_ctx *e, int v) {
    const ir_value *val = &e->g->values[v];
    const unsigned char *p = ir_value_data(val);
    size_t bytes = ir_value_bytes(val);
    bool zero = true;
    for (size_t i = 0; i < bytes && zero; i++) zero = p[i] == 0;
    if (zero) {
        fprintf(e->cst, "_Z(%s, %s, %s)\n", py_str(e, val->name), et_dtype(val->dtype),
                et_shape(e, &val->shape));
        return;
    }
    fprintf(e->cst, "_K(%s, %s, %s, \"", py_str(e, val->name), et_dtype(val->dtype),
            et_shape(e, &val->shape));
    for (size_t i = 0; i < bytes; i++) fprintf(e->cst, "%02x", p[i]);
    fputs("\")\n", e->cst);
}

static const char *var_name(et_ctx *e, int v) {
    return fmt_str(e, "v%d", v);
}

/* Binds resident v (a parameter, graph input or constant) in the prologue, once. */
static void bind_resident(et_ctx *e, int v) {
    const ir_value *val = &e->g->values[v];
    if (e->kind[v] != ET_PRODUCED && !e->bound[v]) {
        e->bound[v] = 1;
        const char *nm = py_str(e, val->name);
        if (e->kind[v] == ET_PARAM)
            fprintf(e->pro, "    v%d = P[%s]\n", v, nm);
        else if (e->kind[v] == ET_INPUT)
            fprintf(e->pro, "    v%d = I[%s]\n", v, nm);
        else {
            emit_const_data(e, v);
            fprintf(e->pro, "    v%d = %s(%s, dev, P, fdt)\n", v,
                    e->target[v] ? "_fresh" : "_const", nm);
        }
    }
}

const char *et_in(et_ctx *e, const ir_node *n, int i) {
    if (i >= n->n_in || n->in[i] < 0) return "None";
    bind_resident(e, n->in[i]);
    return var_name(e, n->in[i]);
}

bool et_in_list(et_ctx *e, const ir_node *n, bool lead, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n->n_in && len < cap - 64; i++)
        len +=
            (size_t)snprintf(buf + len, cap - len, "%s%s", i || lead ? ", " : "", et_in(e, n, i));
    return len < cap - 64;
}

const char *et_out(et_ctx *e, const ir_node *n, int i) {
    if (i >= n->n_out || n->out[i] < 0) return "_";
    return var_name(e, n->out[i]);
}

int et_fused_into(const et_ctx *e, const ir_node *n) {
    if (n->n_out < 1 || n->out[0] < 0) return -1;
    return e->into[n->out[0]];
}

void et_fused_done(et_ctx *e, const ir_node *n) {
    e->into_done[n->out[0]] = 1;
}

bool et_fused_written(const et_ctx *e, int v) {
    return v >= 0 && e->into_done[v];
}

bool et_out_used(const et_ctx *e, const ir_node *n, int i) {
    if (i >= n->n_out || n->out[i] < 0) return false;
    int v = n->out[i];
    return e->last_use[v] >= 0 || (e->g->values[v].flags & IR_VF_OUTPUT);
}

static et_op_fn lookup(ir_op_kind k) {
    et_op_fn f = et_op_lookup(k);
    if (!f) f = et_nn_lookup(k);
    if (!f) f = et_train_lookup(k);
    if (!f) f = et_grid_lookup(k);
    if (!f) f = et_more_lookup(k);
    return f;
}

/* The parameters of a training plan: the residents X whose "X.grad" is an output, and the
 * tensors an optimizer update writes as its parameter (input 0); its other written inputs are
 * optimizer state (zeros in the plan, or the caller's tensors: BUFFERS). */
static bool is_trained(const ir_graph *g, int v) {
    const char *name = g->values[v].name;
    size_t len = strlen(name);
    for (int i = 0; i < g->n_outputs; i++) {
        const char *o = g->values[g->outputs[i]].name;
        if (strlen(o) == len + 5 && strncmp(o, name, len) == 0 && strcmp(o + len, ".grad") == 0)
            return true;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool update =
            n->op == IR_OP_SGDUpdate || n->op == IR_OP_MomentumUpdate || n->op == IR_OP_AdamUpdate;
        if (update && n->n_in > 0 && n->in[0] == v) return true;
    }
    return false;
}

static ir_status classify(et_ctx *e) {
    const ir_graph *g = e->g;
    size_t nv = (size_t)g->n_values;
    e->last_use = malloc(nv * sizeof *e->last_use);
    e->kind = calloc(nv, 1);
    e->bound = calloc(nv, 1);
    e->target = calloc(nv, 1);
    e->into = malloc((nv + 1) * sizeof *e->into);
    e->into_done = calloc(nv + 1, 1);
    int *root = malloc((nv + 1) * sizeof *root),
        *order = malloc(((size_t)g->n_nodes + 1) * sizeof *order);
    if (!e->last_use || !e->kind || !e->bound || !e->target || !e->into || !e->into_done || !root ||
        !order) {
        free(root);
        free(order);
        return ir_diag_set(e->d, IR_ERR_NOMEM, "out of memory");
    }
    /* the plan's nodes are in its order: the steps are the node indices */
    for (int i = 0; i < g->n_nodes; i++) order[i] = i;
    ir_graph_buffer_roots(g, root);
    bool ok = ir_graph_fused_parts(g, order, order, root, e->into);
    free(root);
    free(order);
    if (!ok) return ir_diag_set(e->d, IR_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        e->last_use[v] = -1;
        if (val->producer >= 0) continue;
        if (val->blob)
            e->kind[v] = is_trained(g, v) ? ET_PARAM : ET_CONST;
        else
            e->kind[v] = ET_INPUT;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const ir_op_def *def = ir_op_get(n->op);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) e->last_use[n->in[k]] = i;
        if (def && (def->flags & IR_OPF_INPLACE))
            for (int k = 0; k < n->n_out && k < n->n_in; k++)
                if (n->in[k] >= 0) e->target[n->in[k]] = 1;
    }
    return IR_OK;
}

static bool is_view_op(ir_op_kind k) {
    return k == IR_OP_Reshape || k == IR_OP_Flatten || k == IR_OP_Squeeze || k == IR_OP_Unsqueeze;
}

/* An in-place op's input k must own its buffer: a view of a tensor that others still read, or a
 * graph output, gets its own copy first (the plan's ir_value_inplace_of makes output k an
 * ordinary allocation in the second case too). */
static void own_inplace_inputs(et_ctx *e, const ir_node *n) {
    const ir_op_def *def = ir_op_get(n->op);
    if (!def || !(def->flags & IR_OPF_INPLACE)) return;
    for (int k = 0; k < n->n_out && k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || e->kind[v] != ET_PRODUCED) continue;
        const ir_value *val = &e->g->values[v];
        bool view = is_view_op(e->g->nodes[val->producer].op);
        if (view || (val->flags & IR_VF_OUTPUT))
            et_line(e, "v%d = v%d.clone()  # in-place target that %s", v, v,
                    view ? "is a view" : "is also a graph output");
    }
}

/* `del` of every value whose life ends at node i. */
static void emit_frees(et_ctx *e, int i) {
    const ir_graph *g = e->g;
    const ir_node *n = &g->nodes[i];
    char line[1024];
    size_t len = 0;
    for (int pass = 0; pass < 2; pass++) {
        int cnt = pass == 0 ? n->n_in : n->n_out;
        for (int k = 0; k < cnt; k++) {
            int v = pass == 0 ? n->in[k] : n->out[k];
            if (v < 0 || e->kind[v] != ET_PRODUCED || (g->values[v].flags & IR_VF_OUTPUT)) continue;
            if (pass == 0 ? e->last_use[v] != i : e->last_use[v] >= 0) continue;
            bool dup = false; /* the same value twice among the inputs */
            for (int j = 0; j < k && pass == 0; j++) dup |= n->in[j] == v;
            if (dup) continue;
            if (len > 900) {
                et_line(e, "del %s", line);
                len = 0;
            }
            len += (size_t)snprintf(line + len, sizeof line - len, "%sv%d", len ? ", " : "", v);
        }
    }
    if (len) et_line(e, "del %s", line);
}

/* The prelude's section `name` (from its "#@ name" line to the next one). */
static void write_section(FILE *f, const char *name) {
    const char *p = et_prelude_src;
    size_t nl = strlen(name);
    while ((p = strstr(p, "#@ ")) != NULL) {
        const char *nm = p + 3, *eol = strchr(nm, '\n');
        if (!eol) return;
        if ((size_t)(eol - nm) == nl && strncmp(nm, name, nl) == 0) {
            const char *end = strstr(eol + 1, "\n#@ ");
            size_t len = end ? (size_t)(end - eol) : strlen(eol + 1) + 1;
            fprintf(f, "\n\n# ---- %s\n", name);
            fwrite(eol + 1, 1, len - 1, f);
            fputc('\n', f);
            return;
        }
        p = eol;
    }
}

static void write_names(et_ctx *e, FILE *f, const char *what, enum et_kind kind) {
    fprintf(f, "%s = [", what);
    int cnt = 0;
    for (int v = 0; v < e->g->n_values; v++) {
        if (e->kind[v] != kind || e->g->values[v].producer >= 0) continue;
        if (kind == ET_CONST && !e->bound[v]) continue;
        fprintf(f, "%s\n    %s", cnt++ ? "," : "", py_str(e, e->g->values[v].name));
    }
    fprintf(f, "%s]\n", cnt ? "\n" : "");
}

static void write_module(et_ctx *e, FILE *f) {
    const ir_graph *g = e->g;
    fprintf(f,
            "\"\"\"A training (or inference) step emitted by `magpie emit --torch` from %s.\n\n"
            "step(params, inputs) runs magpie's plan, node by node in the schedule's order,\n"
            "with PyTorch ops: params maps parameter names (PARAMS; optionally BUFFERS) to\n"
            "tensors, inputs maps graph input names (INPUTS) to tensors; the result maps\n"
            "each graph output's name (OUTPUTS) to its tensor. params_from_module(m) binds\n"
            "a torch.nn.Module's parameters and buffers by name. Runs on any device.\n\"\"\"\n",
            g->source ? g->source : "a plan");
    write_section(f, "core");
    fputc('\n', f);
    write_names(e, f, "PARAMS", ET_PARAM);
    write_names(e, f, "BUFFERS", ET_CONST);
    fprintf(f, "INPUTS = [");
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (v->blob) continue;
        fprintf(f, "\n    (%s, %s, %s),", py_str(e, v->name), et_dtype(v->dtype),
                et_shape(e, &v->shape));
    }
    fprintf(f, "\n]\nOUTPUTS = [");
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, "%s%s", i ? ", " : "", py_str(e, g->values[g->outputs[i]].name));
    fprintf(f, "]\n\n");
    fwrite(e->cst_buf, 1, e->cst_len, f);
    for (int i = 0; i < e->n_sections; i++) write_section(f, e->sections[i]);
    fprintf(f, "\n\ndef _step(P, I):\n    dev, fdt = _where(P, I)\n");
    fwrite(e->pro_buf, 1, e->pro_len, f);
    fwrite(e->body_buf, 1, e->body_len, f);
    fprintf(f, "    return {");
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, "%s\n        %s: v%d", i ? "," : "", py_str(e, g->values[g->outputs[i]].name),
                g->outputs[i]);
    fprintf(f, "\n    }\n");
}

static void ctx_free(et_ctx *e) {
    if (e->body) fclose(e->body);
    if (e->pro) fclose(e->pro);
    if (e->cst) fclose(e->cst);
    free(e->body_buf);
    free(e->pro_buf);
    free(e->cst_buf);
    free(e->last_use);
    free(e->kind);
    free(e->bound);
    free(e->target);
    free(e->into);
    free(e->into_done);
    for (int i = 0; i < e->n_strs; i++) free(e->strs[i]);
    free(e->strs);
}

ir_status et_emit_module(const ir_graph *g, FILE *f, ir_diag *d) {
    et_ctx e = {.g = g, .d = d};
    ir_status st = IR_OK;
    e.body = open_memstream(&e.body_buf, &e.body_len);
    e.pro = open_memstream(&e.pro_buf, &e.pro_len);
    e.cst = open_memstream(&e.cst_buf, &e.cst_len);
    if (!e.body || !e.pro || !e.cst) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = classify(&e)) != IR_OK) goto out;
    /* Refuse before emitting anything: every op of the plan must have a family function. */
    for (int i = 0; i < g->n_nodes; i++)
        if (!lookup(g->nodes[i].op)) {
            st = et_refuse(&e, &g->nodes[i], "no emitter for this op");
            goto out;
        }
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        own_inplace_inputs(&e, n);
        if ((st = lookup(n->op)(&e, n)) != IR_OK) goto out;
        emit_frees(&e, i);
    }
    /* outputs no node produces: constants the importer folded (a sum loss's bias gradient) */
    for (int i = 0; i < g->n_outputs; i++) bind_resident(&e, g->outputs[i]);
    fflush(e.body);
    fflush(e.pro);
    fflush(e.cst);
    write_module(&e, f);
    if (ferror(f)) st = ir_diag_set(d, IR_ERR_IO, "write failed");
out:
    ctx_free(&e);
    return st;
}
