/* pet-post.c - PET's post-optimizations of a replacement (§6.3: layout fusion, inverse
 * elimination, pre-processing) and the lowering of PetPatch through which a replacement is
 * verified (pet-post.h has the contract).
 *
 * Every rewrite here bypasses or merges a value with one reader that is not a graph output,
 * rewiring only toward values computed earlier, so the node order stays topological; removed
 * nodes are left unread and pruned (ir_graph_prune) after each sweep. */
#include "pet-post.h"

#include "pet-correct-impl.h"

#include <stdio.h>

/* ---------------------------------------------------------------- graph helpers */

static bool reshape_like(ir_op_kind op) {
    return op == IR_OP_Reshape || op == IR_OP_Flatten || op == IR_OP_Squeeze ||
           op == IR_OP_Unsqueeze;
}
static bool layout_op(ir_op_kind op) {
    return reshape_like(op) || op == IR_OP_Transpose;
}

static int readers(const ir_graph *g, int v) {
    int cnt = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) cnt += g->nodes[i].in[k] == v;
    return cnt;
}

/* v feeds exactly one node and nothing outside: it may be bypassed or merged away. */
static bool private_value(const ir_graph *g, int v) {
    return !(g->values[v].flags & IR_VF_OUTPUT) && readers(g, v) == 1;
}

static void rewire(ir_graph *g, int from, int to) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == from) g->nodes[i].in[k] = to;
}

static int perm_of(const ir_graph *g, const ir_node *n, int64_t *perm) {
    int r = g->values[n->in[0]].shape.rank;
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    if (np >= 0 && np != r) return -1;
    for (int i = 0; i < r; i++) perm[i] = np < 0 ? r - 1 - i : p[i];
    return r;
}

/* A fresh int64 constant of g; -1 when out of memory. */
static int add_ints(ir_graph *g, const char *base, int n, const int64_t *vals) {
    char nm[256];
    snprintf(nm, sizeof nm, "%.200s.post%d", base, g->n_values);
    ir_shape s = {.rank = 1, .dims = {n}};
    int v = ir_graph_add_value(g, nm, IR_I64, &s);
    ir_blob *b = v >= 0 ? ir_blob_new(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    if (!b) return -1;
    if (n) memcpy(ir_blob_data(b), vals, sizeof(int64_t) * (size_t)n);
    g->values[v].blob = b;
    g->values[v].flags = IR_VF_CONST;
    return v;
}

/* Node i becomes op on inputs in[0..n_in) with attrs (in g's arena or static). */
static bool retarget(ir_graph *g, int i, ir_op_kind op, int n_in, const int *in, int n_attrs,
                     ir_attr *attrs) {
    int *ni = ir_graph_alloc(g, sizeof(int) * (size_t)n_in);
    if (!ni) return false;
    memcpy(ni, in, sizeof(int) * (size_t)n_in);
    ir_node *n = &g->nodes[i];
    n->op = op;
    n->op_type = ir_op_name(op);
    n->domain = "";
    n->in = ni;
    n->n_in = n_in;
    n->attrs = attrs;
    n->n_attrs = n_attrs;
    return true;
}

/* Node i becomes Reshape(x) to its own output's shape. */
static bool to_reshape(ir_graph *g, int i, int x) {
    const ir_shape *os = &g->values[g->nodes[i].out[0]].shape;
    int in[2] = {x, add_ints(g, g->nodes[i].name, os->rank, os->dims)};
    return in[1] >= 0 && retarget(g, i, IR_OP_Reshape, 2, in, 0, NULL);
}

static ir_status nomem(ir_diag *d) {
    return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory post-optimizing a replacement");
}

/* ---------------------------------------------------------------- layout fusion */

/* A Transpose that keeps the order of every dim longer than 1 moves only size-1 dims: it is a
 * Reshape, which can then fuse with its Reshape neighbours. */
static bool transpose_is_reshape(const ir_graph *g, const ir_node *n) {
    int64_t perm[IR_MAX_RANK], last = -1;
    int r = perm_of(g, n, perm);
    const ir_shape *is = &g->values[n->in[0]].shape;
    for (int i = 0; i < r; i++) {
        if (is->dims[perm[i]] == 1) continue;
        if (perm[i] < last) return false;
        last = perm[i];
    }
    return r >= 0;
}

/* One sweep; *changed when something was rewritten. */
static ir_status fuse_layout(ir_graph *g, pet_post_stats *s, bool *changed, ir_diag *d) {
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_Transpose && transpose_is_reshape(g, n)) {
            if (!to_reshape(g, i, n->in[0])) return nomem(d);
            *changed = true;
            n = &g->nodes[i];
        }
        if (!layout_op(n->op)) continue;
        int x = n->in[0], pi = g->values[x].producer;
        if (pi < 0 || !layout_op(g->nodes[pi].op) || !private_value(g, x)) continue;
        const ir_node *p = &g->nodes[pi];
        if (reshape_like(n->op) && reshape_like(p->op)) {
            if (!to_reshape(g, i, p->in[0])) return nomem(d);
        } else if (n->op == IR_OP_Transpose && p->op == IR_OP_Transpose) {
            int64_t p1[IR_MAX_RANK], p2[IR_MAX_RANK];
            int r = perm_of(g, p, p1);
            if (r < 0 || perm_of(g, n, p2) != r) continue;
            ir_attr *a = ir_graph_alloc(g, sizeof *a);
            int64_t *c = ir_graph_alloc(g, sizeof(int64_t) * (size_t)(r ? r : 1));
            if (!a || !c) return nomem(d);
            for (int k = 0; k < r; k++) c[k] = p1[p2[k]]; /* y[k] = x[p2[k]] = a[p1[p2[k]]] */
            *a = (ir_attr){.name = "perm", .type = IR_ATTR_INTS, .n = r, .ints = c};
            int in = p->in[0];
            if (!retarget(g, i, IR_OP_Transpose, 1, &in, 1, a)) return nomem(d);
        } else {
            continue;
        }
        s->layout_fused++;
        *changed = true;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- inverse elimination */

static bool is_identity_op(const ir_graph *g, const ir_node *n) {
    if (n->op == IR_OP_Identity) return true;
    if (!layout_op(n->op)) return false;
    const ir_value *x = &g->values[n->in[0]], *y = &g->values[n->out[0]];
    if (!ir_shape_eq(&x->shape, &y->shape)) return false;
    if (reshape_like(n->op)) return true;
    int64_t perm[IR_MAX_RANK];
    int r = perm_of(g, n, perm);
    for (int i = 0; i < r; i++)
        if (perm[i] != i && x->shape.dims[i] != 1) return false;
    return r >= 0;
}

/* Whether the layout chain nodes chain[0..n) (from the one reading a to the one writing b)
 * maps a to itself, by the randomized test against the identity. */
static bool chain_is_identity(const ir_graph *g, const int *chain, int n, int a, int b) {
    ir_graph *p1 = ir_graph_new(), *p2 = ir_graph_new();
    bool ok = false;
    ir_diag d = {{0}};
    int *map = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    if (!p1 || !p2 || !map) goto out;
    for (int v = 0; v < g->n_values; v++) map[v] = -1;
    const ir_value *av = &g->values[a];
    map[a] = ir_graph_add_value(p1, av->name, av->dtype, &av->shape);
    int a2 = ir_graph_add_value(p2, av->name, av->dtype, &av->shape);
    if (map[a] < 0 || a2 < 0) goto out;
    ir_graph_add_input(p1, map[a]);
    ir_graph_add_input(p2, a2);
    for (int q = 0; q < n; q++) {
        const ir_node *nd = &g->nodes[chain[q]];
        int in[8], out = -1;
        if (nd->n_in > 8 || nd->n_out != 1) goto out;
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->in[k];
            if (v >= 0 && map[v] < 0) { /* a parameter: an integer constant */
                const ir_value *sv = &g->values[v];
                if (!sv->blob || ir_dtype_is_float(sv->dtype)) goto out;
                if ((map[v] = ir_graph_add_value(p1, sv->name, sv->dtype, &sv->shape)) < 0)
                    goto out;
                p1->values[map[v]].blob = ir_blob_ref(sv->blob);
                p1->values[map[v]].flags = IR_VF_CONST;
            }
            in[k] = v < 0 ? -1 : map[v];
        }
        const ir_value *ov = &g->values[nd->out[0]];
        if ((out = map[nd->out[0]] = ir_graph_add_value(p1, ov->name, ov->dtype, &ov->shape)) < 0)
            goto out;
        ir_attr *at = pc_copy_attrs(p1, nd);
        if (!at ||
            ir_graph_add_node(p1, nd->op, nd->name, nd->n_in, in, 1, &out, nd->n_attrs, at) < 0)
            goto out;
    }
    ir_graph_add_output(p1, map[b]);
    int y = ir_graph_add_value(p2, g->values[b].name, av->dtype, &av->shape);
    if (y < 0 || ir_graph_add_node(p2, IR_OP_Identity, "identity", 1, &a2, 1, &y, 0, NULL) < 0)
        goto out;
    ir_graph_add_output(p2, y);
    pet_result r;
    pet_options o = {.seed = 0x7065742d706f7374ULL, .tests = 2, .threads = 1};
    if (pet_verify(p1, p2, &o, &r, &d) == IR_OK) {
        ok = r.equivalent;
        pet_result_free(&r);
    }
out:
    free(map);
    ir_graph_free(p1);
    ir_graph_free(p2);
    return ok;
}

#define CHAIN_MAX 8

static ir_status remove_inverses(ir_graph *g, pet_post_stats *s, bool *changed, ir_diag *d) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int b = n->out[0], a = -1, len = 0;
        if (is_identity_op(g, n)) {
            a = n->in[0];
            len = 1;
        } else if (layout_op(n->op) && ir_dtype_is_float(g->values[b].dtype)) {
            /* the longest chain of private layout values ending at b that comes back to b's
             * shape, tested from the longest down */
            int chain[CHAIN_MAX], n_chain = 0, x = n->in[0];
            chain[n_chain++] = i;
            while (n_chain < CHAIN_MAX && g->values[x].producer >= 0 &&
                   layout_op(g->nodes[g->values[x].producer].op) && private_value(g, x)) {
                chain[n_chain++] = g->values[x].producer;
                x = g->nodes[g->values[x].producer].in[0];
            }
            for (int k = n_chain; k >= 2 && a < 0; k--) {
                int start = g->nodes[chain[k - 1]].in[0], rev[CHAIN_MAX];
                if (!ir_shape_eq(&g->values[start].shape, &g->values[b].shape)) continue;
                for (int q = 0; q < k; q++) rev[q] = chain[k - 1 - q];
                if (chain_is_identity(g, rev, k, start, b)) a = start, len = k;
            }
        }
        if (a < 0) continue;
        if (!(g->values[b].flags & IR_VF_OUTPUT)) {
            rewire(g, b, a);
        } else if (len > 1 || n->op != IR_OP_Identity) {
            if (!retarget(g, i, IR_OP_Identity, 1, &a, 0, NULL)) return nomem(d);
        } else {
            continue; /* an Identity writing a graph output: nothing to gain */
        }
        s->inverses_removed++;
        *changed = true;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- the pass */

ir_status pet_post_optimize(ir_graph *g, pet_post_stats *s, ir_diag *d) {
    pet_post_stats dummy;
    if (!s) s = &dummy;
    memset(s, 0, sizeof *s);
    ir_status st = IR_OK;
    for (int round = 0; round < 16 && st == IR_OK; round++) {
        bool changed = false;
        st = fuse_layout(g, s, &changed, d);
        ir_graph_prune(g);
        if (st == IR_OK) st = remove_inverses(g, s, &changed, d);
        ir_graph_prune(g);
        if (!changed) break;
    }
    if (st != IR_OK) return st;
    int before = g->n_nodes;
    if ((st = ir_fold_constants(g, d)) != IR_OK) return st;
    s->folded = before - g->n_nodes;
    return IR_OK;
}

/* ---------------------------------------------------------------- lowering PetPatch */

/* Adds node op(in) -> one fresh output named after base; its value id, or -1. */
static int lower_node(ir_graph *g, ir_op_kind op, const char *base, int n_in, const int *in) {
    char nm[256];
    snprintf(nm, sizeof nm, "%.200s.lower%d", base, g->n_values);
    int v = ir_graph_add_value(g, nm, IR_F32, NULL);
    if (v < 0 || ir_graph_add_node(g, op, nm, n_in, in, 1, &v, 0, NULL) < 0) return -1;
    return ir_node_infer(g, &g->nodes[g->n_nodes - 1], NULL) == IR_OK ? v : -1;
}

ir_graph *pet_patch_lower(const ir_graph *src, ir_status *st, ir_diag *d) {
    ir_graph *g = ir_graph_clone(src);
    ir_status rc = IR_ERR_NOMEM;
    if (!g) goto fail;
    for (int i = 0, n0 = g->n_nodes; i < n0; i++) {
        ir_op_kind op = g->nodes[i].op;
        if ((op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_Gemm) &&
            g->nodes[i].n_in > 2)
            g->nodes[i].n_in = 2; /* the bias: dropped by the verifier anyway (pet.h) */
        if (op != IR_OP_PetPatch) continue;
        int o = g->nodes[i].in[0], p = g->nodes[i].in[1];
        const char *base = g->values[g->nodes[i].out[0]].name;
        const ir_shape os = g->values[o].shape, ps = g->values[p].shape;
        const int64_t *starts;
        int r = ir_attr_ints(&g->nodes[i], "starts", &starts);
        if (r != os.rank) {
            rc = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[i], "starts has %d values", r);
            goto fail;
        }
        int64_t st0[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
        for (int k = 0; k < r; k++) {
            st0[k] = starts[k];
            en[k] = starts[k] + ps.dims[k];
            ax[k] = k;
            pads[k] = starts[k];
            pads[r + k] = os.dims[k] - en[k];
        }
        int sl_in[4] = {o, add_ints(g, base, r, st0), add_ints(g, base, r, en),
                        add_ints(g, base, r, ax)};
        int pc = add_ints(g, base, 2 * r, pads);
        if (sl_in[1] < 0 || sl_in[2] < 0 || sl_in[3] < 0 || pc < 0) goto fail;
        int sl = lower_node(g, IR_OP_Slice, base, 4, sl_in);
        int pd1 = sl < 0 ? -1 : lower_node(g, IR_OP_Pad, base, 2, (int[]){sl, pc});
        int sub = pd1 < 0 ? -1 : lower_node(g, IR_OP_Sub, base, 2, (int[]){o, pd1});
        int pd2 = sub < 0 ? -1 : lower_node(g, IR_OP_Pad, base, 2, (int[]){p, pc});
        if (pd2 < 0 || !retarget(g, i, IR_OP_Add, 2, (int[]){sub, pd2}, 0, NULL)) goto fail;
    }
    if ((rc = ir_graph_toposort(g, d)) != IR_OK) goto fail;
    if (st) *st = IR_OK;
    return g;
fail:
    if (rc == IR_ERR_NOMEM) ir_diag_set(d, rc, "PET: out of memory lowering PetPatch");
    if (st) *st = rc;
    ir_graph_free(g);
    return NULL;
}

ir_status pet_verify_replacement(const ir_graph *prog, const ir_graph *repl, const pet_options *o,
                                 pet_result *r, ir_diag *d) {
    ir_status st;
    memset(r, 0, sizeof *r);
    ir_graph *lw = pet_patch_lower(repl, &st, d);
    if (!lw) return st;
    st = pet_verify(prog, lw, o, r, d);
    ir_graph_free(lw);
    return st;
}
