/* rules-fission-apply.c - the one-copy graph of a set of fissions (rules.h, rw_fission_apply;
 * MAGIS 4.2 and the F-Tree's "keep one of the n isomorphic parts", 4.3).
 *
 * For one fission (S, D, n) with group number k, on a clone of the graph:
 *  - a FissionBuffer per output of S (a value of S read outside S, or a graph output), holding
 *    its full shape;
 *  - a FissionSlice per input of S with a D-dimension, reads by several nodes of S sharing it;
 *    where D is only the inner factor K of the input's dim (a strided split: B of [S*B, E]), the
 *    slice reads an untagged view of the input as [len / K, K] (an ordering input of every
 *    slice too) and cuts K's axis, and a tagged view gives S the part in its own shape; an output
 *    of that kind is assembled likewise, into a buffer of the exposed shape, and an untagged view
 *    of the whole takes the output's place;
 *    its ordering-only inputs are every buffer of the group and every produced value S reads
 *    from outside: so in any order, everything a part needs from outside exists before the
 *    group's first node, which is where rw_fission_materialize puts the other n-1 parts;
 *  - the nodes of S keep their ids and their value ids; their D-dimensions are divided by n:
 *    shape-carrying inputs and attributes (Reshape's and Expand's shape, Resize's sizes, the
 *    `shape` attribute of magpie's backward ops) are re-written to the divided shape, every node
 *    is re-inferred in topological order, and every output must come out as its old shape with
 *    the D-dimension divided (else the sub-graph is refused: something in it depends on the
 *    whole length);
 *  - a FissionAssemble (an output with a D-dimension) or FissionAccumulate (an output summed
 *    over D as a reduce axis; `fused` 1 where no node of S reads the part, ops-fission.c) per
 *    output, writing the part into its buffer in place; the
 *    assembled value takes the output's name (graph outputs keep their names) and replaces it
 *    for every reader outside S; the part keeps the value id, renamed "<name>.part<id>".
 * Slices, nodes of S and assembles carry the group tags (magpie_fission_group = k,
 * magpie_fission_parts = n). Several fissions are applied one after another, the D-graph rebuilt
 * and the fission re-checked on the graph the previous ones left.
 *
 * Cost: per fission O(|V| + |E|) for the D-graph, the check, the reader lists and the sort; the
 * work on S is O(|S| + its edges). */
#include "rules-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The touched ids of a whole call. */
typedef struct touch_list {
    uint32_t *ids; /* caller's array or NULL */
    int n;
} touch_list;

static ir_status touch(touch_list *t, uint32_t id, ir_diag *d) {
    if (t->n >= RW_MAX_FISSION_TOUCHED)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "fission: touches over %d nodes",
                           RW_MAX_FISSION_TOUCHED);
    if (t->ids) t->ids[t->n] = id;
    t->n++;
    return IR_OK;
}

/* One output of S and how it is put together. */
typedef struct fis_out {
    int value;     /* the value of S */
    int dim;       /* its D-dimension, or -1: summed (FissionAccumulate) */
    int64_t inner; /* D is the inner factor of dim, of this length (a strided part), or 0 */
    int buffer;    /* the FissionBuffer's value (the exposed shape where inner) */
} fis_out;

/* Working state of one fission. */
typedef struct fis_work {
    ir_graph *g;
    const rw_fission *f;
    int group, parts;
    rw_dgraph *dg;
    rw_fission_info fi;
    rw_users users;
    int n_values0;    /* values before the edit: the per-value arrays cover these */
    int *vdim;        /* per value of S: its D-dimension, -1 when none */
    ir_shape *shape0; /* per value: its shape before the edit */
    int *remap;       /* per value: the slice S reads instead, or -1 */
    int *exposed;     /* per value: its view exposing D's inner factor (a strided input), or -1 */
    fis_out *outs;
    int n_outs;
    int *ordering; /* ordering-only inputs of every slice: buffers, then produced inputs */
    int n_ordering;
    int *slice_in; /* scratch: one slice's inputs */
    /* S's node indices by ascending stable id: the order its border is enumerated in, so the
     * fission nodes' ids and the slices' ordering inputs do not depend on where a rewrite's
     * re-sort left S's nodes in the array (the explorer carries a rewrite of G_b over to G_e
     * with the parent's fission nodes; rules-fission-direct.c) */
    int *by_id;
    int first_slice; /* the value of the group's first slice, -1 before it */
    touch_list *touched;
} fis_work;

static void work_free(fis_work *w) {
    rw_dgraph_free(w->dg);
    rw_fission_info_free(&w->fi);
    rw_users_free(&w->users);
    free(w->vdim);
    free(w->shape0);
    free(w->remap);
    free(w->exposed);
    free(w->outs);
    free(w->ordering);
    free(w->slice_in);
    free(w->by_id);
}

static ir_status nomem(ir_diag *d) {
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory applying a fission");
}

static bool tag(fis_work *w, ir_node *n) {
    return rw_set_attr_int(w->g, n, RW_FISSION_GROUP_ATTR, w->group) &&
           rw_set_attr_int(w->g, n, RW_FISSION_PARTS_ATTR, w->parts);
}

/* Adds node op with one fresh output (dtype t, shape s, named name) and infers it; the output's
 * value id goes to *out. */
static ir_status add_node(fis_work *w, ir_op_kind op, const char *node_name, const char *val_name,
                          ir_dtype t, const ir_shape *s, int n_in, const int *in, int n_attrs,
                          const ir_attr *attrs, bool tagged, int *out, ir_diag *d) {
    ir_graph *g = w->g;
    int v = ir_graph_add_value(g, val_name, t, s);
    if (v < 0) return nomem(d);
    int ni = ir_graph_add_node(g, op, node_name, n_in, in, 1, &v, n_attrs, attrs);
    if (ni < 0) return nomem(d);
    if (tagged && !tag(w, &g->nodes[ni])) return nomem(d);
    ir_status st = touch(w->touched, g->nodes[ni].id, d);
    if (st == IR_OK) st = ir_node_infer(g, &g->nodes[ni], d);
    if (st == IR_OK && !ir_shape_eq(&g->values[v].shape, s))
        st = ir_node_fail(d, IR_ERR_INTERNAL, &g->nodes[ni], "fission: unexpected output shape");
    *out = v;
    return st;
}

/* The length of D's inner factor in value v's D-dimension when D is that factor only (a strided
 * split: B in [S*B, E]; rw_fission_check made sure it is known and n divides it), else 0. */
static int64_t strided(const fis_work *w, int v) {
    int dim = rw_dgraph_value_dim_in(w->dg, v, w->fi.comp);
    if (dim < 0 || rw_dgraph_value_comp(w->dg, v, dim) == w->fi.comp) return 0;
    return rw_dgraph_value_inner_len(w->dg, v, dim);
}

/* s with its dim `dim` viewed as [len / k, k]: D's inner factor k a dim of its own, whose n
 * blocks are the strided parts. */
static ir_shape exposed_shape(const ir_shape *s, int dim, int64_t k) {
    ir_shape e = {.rank = s->rank + 1};
    IR_ASSERT(s->rank < IR_MAX_RANK && k > 0 && s->dims[dim] % k == 0);
    for (int i = 0; i < dim; i++) e.dims[i] = s->dims[i];
    e.dims[dim] = s->dims[dim] / k;
    e.dims[dim + 1] = k;
    for (int i = dim + 1; i < s->rank; i++) e.dims[i + 1] = s->dims[i];
    return e;
}

/* A Reshape of x to s (a view: no bytes, no copy), tagged or not; its output to *out. */
static ir_status add_view(fis_work *w, int x, const ir_shape *s, const char *what, bool tagged,
                          int *out, ir_diag *d) {
    ir_graph *g = w->g;
    char nn[512], vn[512];
    uint32_t id = g->next_node_id;
    snprintf(nn, sizeof nn, "%.400s.fis%s%u", g->values[x].name, what, id);
    snprintf(vn, sizeof vn, "%.400s.%s%u", g->values[x].name, what, id);
    int c = rw_add_const_i64(g, nn, s->rank, s->dims);
    if (c < 0) return nomem(d);
    int in[2] = {x, c};
    return add_node(w, IR_OP_Reshape, nn, vn, g->values[x].dtype, s, 2, in, 0, NULL, tagged, out,
                    d);
}

/* Finds the inputs and outputs of S and classifies them. */
static ir_status collect(fis_work *w, ir_diag *d) {
    ir_graph *g = w->g;
    const rw_fission_info *fi = &w->fi;
    int nv = g->n_values;
    unsigned char *seen = calloc((size_t)nv + 1, 1);
    w->vdim = malloc(sizeof(int) * (size_t)nv);
    w->shape0 = malloc(sizeof(ir_shape) * (size_t)nv);
    w->remap = malloc(sizeof(int) * (size_t)nv);
    w->exposed = malloc(sizeof(int) * (size_t)nv);
    w->outs = malloc(sizeof(fis_out) * ((size_t)nv + 1));
    /* buffers, produced inputs, then the views of strided inputs (make_slices) */
    w->ordering = malloc(sizeof(int) * (2 * (size_t)nv + 1));
    if (!seen || !w->vdim || !w->shape0 || !w->remap || !w->exposed || !w->outs || !w->ordering) {
        free(seen);
        return nomem(d);
    }
    for (int v = 0; v < nv; v++) {
        w->vdim[v] = -1;
        w->remap[v] = -1;
        w->exposed[v] = -1;
        w->shape0[v] = g->values[v].shape;
    }
    for (int j = 0; j < fi->n_s; j++) {
        const ir_node *n = &g->nodes[w->by_id[j]];
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            w->vdim[v] = rw_dgraph_value_dim_in(w->dg, v, fi->comp);
            bool outside = (g->values[v].flags & IR_VF_OUTPUT) != 0;
            for (int u = w->users.off[v]; u < w->users.off[v + 1] && !outside; u++)
                outside = !fi->in_s[w->users.node[u]];
            if (!outside) continue;
            /* the check let through split nodes (every output has a D-dim) and partial nodes
             * (no output has one, one summed reduce axis) only */
            IR_ASSERT(w->vdim[v] >= 0 || rw_dgraph_reduce_in(w->dg, w->by_id[j], fi->comp) > 0);
            w->outs[w->n_outs++] =
                (fis_out){.value = v, .dim = w->vdim[v], .inner = strided(w, v), .buffer = -1};
        }
    }
    /* Produced values read from outside S go after the buffers in the ordering inputs; their
     * slots are filled once the buffers exist (make_buffers). */
    int n_prod = 0;
    for (int j = 0; j < fi->n_s; j++) {
        const ir_node *n = &g->nodes[w->by_id[j]];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], p = v >= 0 ? g->values[v].producer : -1;
            if (v < 0 || (p >= 0 && fi->in_s[p]) || seen[v]) continue;
            seen[v] = 1;
            if (p >= 0) w->ordering[w->n_outs + n_prod++] = v;
        }
    }
    w->n_ordering = w->n_outs + n_prod;
    free(seen);
    /* one scratch array for every slice's inputs: the sliced value, then the ordering ones
     * (make_slices adds at most one view per input of S to them) */
    w->slice_in = malloc(sizeof(int) * (2 * (size_t)nv + 1));
    if (!w->slice_in) return nomem(d);
    if (w->n_outs == 0)
        return ir_node_fail(d, IR_ERR_INVALID, &g->nodes[fi->s[fi->n_s - 1]],
                            "fission: nothing outside S reads what S computes");
    return IR_OK;
}

static ir_status make_buffers(fis_work *w, ir_diag *d) {
    ir_graph *g = w->g;
    for (int j = 0; j < w->n_outs; j++) {
        int v = w->outs[j].value;
        char nn[512], vn[512];
        uint32_t id = g->next_node_id;
        snprintf(nn, sizeof nn, "%.400s.fisbuf%u", g->values[v].name, id);
        snprintf(vn, sizeof vn, "%.400s.buf%u", g->values[v].name, id);
        ir_shape s = w->shape0[v];
        if (w->outs[j].inner > 0) s = exposed_shape(&s, w->outs[j].dim, w->outs[j].inner);
        int64_t *dims = ir_graph_alloc(g, sizeof(int64_t) * (size_t)(s.rank ? s.rank : 1));
        if (!dims) return nomem(d);
        memcpy(dims, s.dims, sizeof(int64_t) * (size_t)s.rank);
        /* an accumulated output's part 0 writes its buffer whole (ops-fission.c): no fill */
        ir_attr a[3] = {{.name = "shape", .type = IR_ATTR_INTS, .n = s.rank, .ints = dims},
                        {.name = "dtype", .type = IR_ATTR_INT, .i = g->values[v].dtype},
                        {.name = "fill", .type = IR_ATTR_INT, .i = 0}};
        ir_status st = add_node(w, IR_OP_FissionBuffer, nn, vn, g->values[v].dtype, &s, 0, NULL,
                                w->outs[j].dim >= 0 ? 2 : 3, a, false, &w->outs[j].buffer, d);
        if (st != IR_OK) return st;
        w->ordering[j] = w->outs[j].buffer;
    }
    return IR_OK;
}

/* A FissionSlice of input x (D-dimension dim) for S, part parts-1 (the one the graph keeps). A
 * strided input is sliced through its view exposing D's inner factor (make_slices made it), on
 * the factor's axis, and the part viewed back to x's shape with the dim divided. */
static ir_status make_slice(fis_work *w, int x, int dim, ir_diag *d) {
    ir_graph *g = w->g;
    int src = w->exposed[x] >= 0 ? w->exposed[x] : x, axis = w->exposed[x] >= 0 ? dim + 1 : dim;
    int *in = w->slice_in, n_in = 0;
    in[n_in++] = src;
    for (int j = 0; j < w->n_ordering; j++)
        if (w->ordering[j] != x && w->ordering[j] != src) in[n_in++] = w->ordering[j];
    char nn[512], vn[512];
    uint32_t id = g->next_node_id;
    snprintf(nn, sizeof nn, "%.400s.fisslice%u", g->values[x].name, id);
    snprintf(vn, sizeof vn, "%.400s.slice%u", g->values[x].name, id);
    ir_shape s = g->values[src].shape;
    s.dims[axis] /= w->parts;
    ir_attr a[3] = {{.name = "axis", .type = IR_ATTR_INT, .i = axis},
                    {.name = "parts", .type = IR_ATTR_INT, .i = w->parts},
                    {.name = "index", .type = IR_ATTR_INT, .i = w->parts - 1}};
    int part;
    ir_status st = add_node(w, IR_OP_FissionSlice, nn, vn, g->values[x].dtype, &s, n_in, in, 3, a,
                            true, &part, d);
    if (st == IR_OK && w->first_slice < 0) w->first_slice = part;
    if (st == IR_OK && src != x) {
        ir_shape back = g->values[x].shape;
        back.dims[dim] /= w->parts;
        st = add_view(w, part, &back, "strided", true, &part, d);
    }
    w->remap[x] = part;
    return st;
}

static ir_status make_slices(fis_work *w, ir_diag *d) {
    ir_graph *g = w->g;
    const rw_fission_info *fi = &w->fi;
    /* first the views that expose the inner factor of strided inputs: untagged, they are ordering
     * inputs of every slice, so they exist before the group's first step (as the other parts,
     * cloned there, read them too) */
    for (int j = 0; j < fi->n_s; j++) {
        for (int k = 0; k < g->nodes[w->by_id[j]].n_in; k++) {
            int x = g->nodes[w->by_id[j]].in[k], p = x >= 0 ? g->values[x].producer : -1;
            if (x < 0 || x >= w->n_values0 || (p >= 0 && fi->in_s[p]) || w->exposed[x] >= 0)
                continue;
            int64_t inner = strided(w, x);
            if (inner <= 0) continue;
            ir_shape e = exposed_shape(&g->values[x].shape,
                                       rw_dgraph_value_dim_in(w->dg, x, fi->comp), inner);
            ir_status st = add_view(w, x, &e, "expose", false, &w->exposed[x], d);
            if (st != IR_OK) return st;
            w->ordering[w->n_ordering++] = w->exposed[x];
        }
    }
    for (int j = 0; j < fi->n_s; j++) {
        /* index, not pointer: make_slice adds nodes */
        for (int k = 0; k < g->nodes[w->by_id[j]].n_in; k++) {
            int x = g->nodes[w->by_id[j]].in[k], p = x >= 0 ? g->values[x].producer : -1;
            if (x < 0 || x >= w->n_values0 || (p >= 0 && fi->in_s[p]) || w->remap[x] >= 0) continue;
            int dim = rw_dgraph_value_dim_in(w->dg, x, fi->comp);
            if (dim < 0) continue; /* shared whole */
            ir_status st = make_slice(w, x, dim, d);
            if (st != IR_OK) return st;
        }
    }
    for (int j = 0; j < fi->n_s; j++) {
        ir_node *n = &g->nodes[fi->s[j]];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && n->in[k] < w->n_values0 && w->remap[n->in[k]] >= 0)
                n->in[k] = w->remap[n->in[k]];
    }
    return IR_OK;
}

/* Input k of node ni (a shape-like constant) replaced by a new constant holding s. */
static ir_status set_shape_input(fis_work *w, int ni, int k, const ir_shape *s, ir_diag *d) {
    ir_graph *g = w->g;
    char name[512];
    snprintf(name, sizeof name, "%.400s.fisshape%d", g->nodes[ni].name, k);
    int c = rw_add_const_i64(g, name, s->rank, s->dims);
    if (c < 0) return nomem(d);
    g->nodes[ni].in[k] = c;
    return IR_OK;
}

/* Re-writes what carries a shape in node ni, so it yields want (its output 0 once split). */
static ir_status patch_shapes(fis_work *w, int ni, const ir_shape *want, ir_diag *d) {
    ir_graph *g = w->g;
    ir_node *n = &g->nodes[ni];
    switch (n->op) {
    case IR_OP_Reshape:
    case IR_OP_Expand: return set_shape_input(w, ni, 1, want, d);
    case IR_OP_Resize:
        if (n->n_in > 3 && n->in[3] >= 0) return set_shape_input(w, ni, 3, want, d);
        return IR_OK;
    case IR_OP_ResizeGrad:
        /* sizes is the forward's output shape, that of dY (already split) */
        if (n->n_in > 3 && n->in[3] >= 0) {
            ir_shape dy = g->values[n->in[0]].shape;
            ir_status st = set_shape_input(w, ni, 3, &dy, d);
            if (st != IR_OK) return st;
        }
        break;
    default: break;
    }
    /* magpie's backward ops that carry their output's shape as an attribute */
    n = &g->nodes[ni];
    if (strcmp(n->domain, "magpie") != 0) return IR_OK;
    for (int a = 0; a < n->n_attrs; a++) {
        ir_attr *at = &n->attrs[a];
        if (at->type != IR_ATTR_INTS || strcmp(at->name, "shape") != 0) continue;
        int64_t *dims = ir_graph_alloc(g, sizeof(int64_t) * (size_t)(want->rank ? want->rank : 1));
        if (!dims) return nomem(d);
        memcpy(dims, want->dims, sizeof(int64_t) * (size_t)want->rank);
        at->ints = dims; /* a new array: attribute arrays may be shared between nodes */
        at->n = want->rank;
    }
    return IR_OK;
}

/* The nodes of S, tagged and re-inferred with their D-dimensions divided. */
static ir_status split_nodes(fis_work *w, ir_diag *d) {
    ir_graph *g = w->g;
    const rw_fission_info *fi = &w->fi;
    for (int j = 0; j < fi->n_s; j++) {
        int ni = fi->s[j];
        if (!tag(w, &g->nodes[ni])) return nomem(d);
        ir_status st = touch(w->touched, g->nodes[ni].id, d);
        if (st != IR_OK) return st;
        const ir_node *n = &g->nodes[ni];
        int v0 = n->n_out > 0 ? n->out[0] : -1;
        ir_shape want;
        if (v0 >= 0 && w->vdim[v0] >= 0) { /* a split node: its shape carriers follow */
            want = w->shape0[v0];
            want.dims[w->vdim[v0]] /= w->parts;
            if ((st = patch_shapes(w, ni, &want, d)) != IR_OK) return st;
        }
        if ((st = ir_node_infer(g, &g->nodes[ni], d)) != IR_OK) {
            ir_diag_prefix(d, "fission: cannot split S");
            return st;
        }
        n = &g->nodes[ni];
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            want = w->shape0[v];
            if (w->vdim[v] >= 0) want.dims[w->vdim[v]] /= w->parts;
            if (!ir_shape_eq(&want, &g->values[v].shape)) {
                char s1[128], s2[128];
                return ir_node_fail(d, IR_ERR_INVALID, n,
                                    "fission: cannot split S: output '%s' comes out %s, not %s",
                                    g->values[v].name,
                                    ir_shape_str(&g->values[v].shape, s1, sizeof s1),
                                    ir_shape_str(&want, s2, sizeof s2));
            }
        }
    }
    return IR_OK;
}

/* Assembles (or accumulates) each output into its buffer and hands the result to the readers
 * outside S and to the graph outputs, under the output's name. */
static ir_status assemble(fis_work *w, ir_diag *d) {
    ir_graph *g = w->g;
    const rw_fission_info *fi = &w->fi;
    for (int j = 0; j < w->n_outs; j++) {
        fis_out o = w->outs[j];
        uint32_t id = g->next_node_id;
        char nn[512], part[512];
        const char *name = g->values[o.value].name;
        snprintf(nn, sizeof nn, "%.400s.fisasm%u", name, id);
        snprintf(part, sizeof part, "%.400s.part%u", name, id);
        ir_attr a[3] = {
            {.name = "parts", .type = IR_ATTR_INT, .i = w->parts},
            {.name = "index", .type = IR_ATTR_INT, .i = w->parts - 1},
            {.name = "axis", .type = IR_ATTR_INT, .i = o.inner > 0 ? o.dim + 1 : o.dim}};
        /* the first slice is an ordering-only input: a part computed from generators alone (a
         * bias gradient of the seed) could otherwise write its buffer before the group's first
         * slice, where the materialized graph runs the other parts (schedule.h) */
        IR_ASSERT(w->first_slice >= 0); /* rw_fission_check: S slices something */
        int in[3] = {o.buffer, o.value, w->first_slice}, whole;
        ir_shape s = w->shape0[o.value];
        ir_status st = IR_OK;
        if (o.inner > 0) { /* a strided part: assembled on the exposed inner factor's axis */
            ir_shape pe = exposed_shape(&g->values[o.value].shape, o.dim, o.inner / w->parts);
            s = exposed_shape(&s, o.dim, o.inner);
            st = add_view(w, o.value, &pe, "strided", true, &in[1], d);
            snprintf(part, sizeof part, "%.400s.exposed%u", name, id);
        }
        /* a summed part that only the accumulate will read (its readers outside S read the
         * whole from here on) is added in its producer's epilogue where the producer can
         * (ir_fission_accumulate_fused checks which) */
        if (o.dim < 0) a[2] = (ir_attr){.name = "fused", .type = IR_ATTR_INT, .i = 1};
        for (int u = w->users.off[o.value]; o.dim < 0 && u < w->users.off[o.value + 1]; u++)
            if (fi->in_s[w->users.node[u]]) a[2].i = 0;
        if (st == IR_OK)
            st = add_node(w, o.dim >= 0 ? IR_OP_FissionAssemble : IR_OP_FissionAccumulate, nn,
                          o.inner > 0 ? part : name, g->values[o.value].dtype, &s, 3, in,
                          o.dim >= 0 || a[2].i ? 3 : 2, a, true, &whole, d);
        if (st == IR_OK && o.inner > 0) { /* the whole, viewed back under the output's name */
            st = add_view(w, whole, &w->shape0[o.value], "merged", false, &whole, d);
            if (st == IR_OK) g->values[whole].name = ir_graph_strdup(g, name);
            if (st == IR_OK && !g->values[whole].name) st = nomem(d);
        }
        if (st != IR_OK) return st;
        snprintf(part, sizeof part, "%.400s.part%u", name, id);
        g->values[o.value].name = ir_graph_strdup(g, part);
        if (!g->values[o.value].name) return nomem(d);
        for (int u = w->users.off[o.value]; u < w->users.off[o.value + 1]; u++) {
            ir_node *r = &g->nodes[w->users.node[u]];
            if (fi->in_s[w->users.node[u]]) continue;
            for (int k = 0; k < r->n_in; k++)
                if (r->in[k] == o.value) r->in[k] = whole;
        }
        if (g->values[o.value].flags & IR_VF_OUTPUT) {
            for (int k = 0; k < g->n_outputs; k++)
                if (g->outputs[k] == o.value) g->outputs[k] = whole;
            g->values[o.value].flags &= ~(unsigned)IR_VF_OUTPUT;
            g->values[whole].flags |= IR_VF_OUTPUT;
        }
    }
    return IR_OK;
}

static int cmp_node_id(const void *a, const void *b, void *arg) {
    const ir_graph *g = arg;
    uint32_t x = g->nodes[*(const int *)a].id, y = g->nodes[*(const int *)b].id;
    return (x > y) - (x < y);
}

/* Node indices idx[0..n) by ascending stable id. */
static void sort_by_id(const ir_graph *g, int *idx, int n) {
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_node_id, (void *)g);
}

static ir_status apply_one(ir_graph *g, const rw_fission *f, int group, touch_list *t, ir_diag *d) {
    fis_work w = {
        .g = g, .f = f, .group = group, .parts = f->parts, .touched = t, .first_slice = -1};
    ir_status st;
    if (f->parts < 2) {
        st = ir_diag_set(d, IR_ERR_INVALID, "fission %d: %d parts (at least 2 when applied)", group,
                         f->parts);
        goto out;
    }
    w.dg = rw_dgraph_build(g);
    if (!w.dg) {
        st = nomem(d);
        goto out;
    }
    if ((st = rw_fission_analyze(g, w.dg, f, &w.fi, d)) != IR_OK) goto out;
    if (!(w.by_id = malloc(sizeof(int) * ((size_t)w.fi.n_s + 1)))) {
        st = nomem(d);
        goto out;
    }
    memcpy(w.by_id, w.fi.s, sizeof(int) * (size_t)w.fi.n_s);
    sort_by_id(g, w.by_id, w.fi.n_s);
    if ((st = rw_users_build(g, &w.users, d)) != IR_OK) goto out;
    w.n_values0 = g->n_values;
    if ((st = collect(&w, d)) != IR_OK) goto out;
    if ((st = make_buffers(&w, d)) != IR_OK) goto out;
    if ((st = make_slices(&w, d)) != IR_OK) goto out;
    if ((st = split_nodes(&w, d)) != IR_OK) goto out;
    if ((st = assemble(&w, d)) != IR_OK) goto out;
    st = ir_graph_toposort(g, d);
out:
    work_free(&w);
    return st;
}

ir_graph *rw_fission_apply(const ir_graph *g, const rw_fission *fs, int n, uint32_t *touched,
                           int *n_touched, ir_diag *d) {
    if (n_touched) *n_touched = 0;
    touch_list t = {.ids = touched, .n = 0};
    ir_graph *h = ir_graph_clone(g);
    if (!h) {
        nomem(d);
        return NULL;
    }
    ir_status st = IR_OK;
    for (int k = 0; k < n && st == IR_OK; k++) st = apply_one(h, &fs[k], k, &t, d);
    if (st == IR_OK) st = rw_finish_graph(h, d);
    if (st != IR_OK) {
        ir_graph_free(h);
        return NULL;
    }
    if (n_touched) *n_touched = t.n;
    return h;
}
