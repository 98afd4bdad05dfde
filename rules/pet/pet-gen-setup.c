/* pet-gen-setup.c - what PET's mutation generator learns from the program before it searches
 * (pet-gen.h): its inputs (weights, literals, biases and the weight each bias belongs to), its
 * outputs and their degrees in every input, and the finite attribute sets of the operator set O
 * (conv and gemm attributes, pads, factors, lengths, the Concat width), then the initial state.
 * Everything here runs once per enumeration; the search (pet-gen.c) only reads it. */
#include "pet-gen-impl.h"

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* ---------------------------------------------------------------- attribute sets */

static void add_factor(gen_ctx *c, int64_t f) {
    if (f <= 1) return;
    for (int i = 0; i < c->n_f; i++)
        if (c->f[i] == f) return;
    if (c->n_f < GEN_MAX_FACTORS) c->f[c->n_f++] = f;
}

static void add_len(gen_ctx *c, int64_t l) {
    if (l <= 1) return;
    for (int i = 0; i < c->n_len; i++)
        if (c->len[i] == l) return;
    if (c->n_len < GEN_MAX_LENS) c->len[c->n_len++] = l;
}

static void add_conv(gen_ctx *c, const gen_conv_attr *a) {
    for (int i = 0; i < c->n_conv; i++)
        if (!memcmp(&c->conv[i], a, sizeof *a)) return;
    if (c->n_conv < GEN_MAX_CONV_ATTRS) c->conv[c->n_conv++] = *a;
}

static void add_pad(gen_ctx *c, int rank, const int64_t *pads, bool for_weight) {
    bool any = false;
    for (int i = 0; i < 2 * rank; i++) {
        if (pads[i] < 0) return;
        any = any || pads[i] > 0;
    }
    if (!any) return;
    for (int i = 0; i < c->n_pads; i++)
        if (c->pad_rank[i] == rank && c->pad_weight[i] == for_weight &&
            !memcmp(c->pads[i], pads, sizeof(int64_t) * 2 * (size_t)rank))
            return;
    if (c->n_pads >= GEN_MAX_PADS) return;
    c->pad_rank[c->n_pads] = rank;
    c->pad_weight[c->n_pads] = for_weight;
    memcpy(c->pads[c->n_pads], pads, sizeof(int64_t) * 2 * (size_t)rank);
    c->n_pads++;
}

/* Reads ints attribute `name` of n into out (n_exp values), def when absent. */
static bool attr_ints(const ir_node *n, const char *name, int n_exp, int64_t def, int64_t *out) {
    const int64_t *p;
    int k = ir_attr_ints(n, name, &p);
    if (k < 0) {
        for (int i = 0; i < n_exp; i++) out[i] = def;
        return true;
    }
    if (k != n_exp) return false;
    memcpy(out, p, sizeof(int64_t) * (size_t)k);
    return true;
}

static ir_status gen_setup_attrs(gen_ctx *c) {
    const ir_graph *g = c->prog;
    int n_convs = 0, n_mm = 0, cat = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        n_convs += n->op == IR_OP_Conv;
        n_mm += n->op == IR_OP_Conv || n->op == IR_OP_MatMul || n->op == IR_OP_Gemm;
        if (n->op == IR_OP_Concat && n->n_in > cat) cat = n->n_in;
    }
    int64_t kshape[GEN_MAX_IN][3];
    int n_k = 0, k_rank = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_Conv) {
            const ir_value *x = ir_node_in(g, n, 0), *w = ir_node_in(g, n, 1);
            int S = x->shape.rank - 2;
            gen_conv_attr a = {.S = S, .group = ir_attr_int(n, "group", 1)};
            if (S < 1 || S > 3 || strcmp(ir_attr_str(n, "auto_pad", "NOTSET"), "NOTSET") ||
                !attr_ints(n, "strides", S, 1, a.strides) ||
                !attr_ints(n, "dilations", S, 1, a.dil) || !attr_ints(n, "pads", 2 * S, 0, a.pads))
                continue;
            add_conv(c, &a);
            for (int m = 2; m <= n_convs && m <= GEN_MAX_CAT; m++) {
                gen_conv_attr b = a;
                b.group = a.group * m;
                add_conv(c, &b);
            }
            /* the regular variant: stride 1, dilation 1, pads scaled down by the dilation */
            gen_conv_attr r = a;
            for (int s = 0; s < S; s++) {
                add_factor(c, a.strides[s]);
                add_factor(c, a.dil[s]);
                r.strides[s] = r.dil[s] = 1;
                if (a.dil[s] > 1 && a.pads[s] % a.dil[s] == 0 && a.pads[S + s] % a.dil[s] == 0) {
                    r.pads[s] = a.pads[s] / a.dil[s];
                    r.pads[S + s] = a.pads[S + s] / a.dil[s];
                }
            }
            add_factor(c, a.group);
            add_conv(c, &r);
            /* the conv's padding as a Pad of its input (N and C unpadded) */
            int64_t p[2 * IR_MAX_RANK] = {0};
            for (int s = 0; s < S; s++) p[2 + s] = a.pads[s], p[S + 2 + 2 + s] = a.pads[S + s];
            add_pad(c, S + 2, p, false);
            if (n_k < GEN_MAX_IN) {
                k_rank = S + 2;
                for (int s = 0; s < 3; s++) kshape[n_k][s] = s < S ? w->shape.dims[2 + s] : 1;
                n_k++;
            }
        } else if (n->op == IR_OP_Gemm && c->n_gemm < GEN_MAX_GEMM_ATTRS) {
            gen_gemm_attr a = {.alpha = ir_attr_float(n, "alpha", 1.0f),
                               .beta = ir_attr_float(n, "beta", 1.0f),
                               .ta = (int)ir_attr_int(n, "transA", 0),
                               .tb = (int)ir_attr_int(n, "transB", 0)};
            bool dup = false;
            for (int k = 0; k < c->n_gemm; k++) dup = dup || !memcmp(&c->gemm[k], &a, sizeof a);
            if (!dup) c->gemm[c->n_gemm++] = a;
        } else if (n->op == IR_OP_Pad) {
            const ir_value *x = ir_node_in(g, n, 0), *pv = ir_node_in(g, n, 1);
            int r = x->shape.rank;
            int64_t p[2 * IR_MAX_RANK];
            if (pv && pv->blob && ir_shape_numel(&pv->shape) == 2 * r && n->n_in <= 3) {
                for (int k = 0; k < 2 * r; k++) p[k] = ir_load_i64(ir_value_data(pv), pv->dtype, k);
                add_pad(c, r, p, false);
            }
        }
    }
    /* a kernel padded (centred) to another kernel's size: merging a 1x1 with a 3x3 */
    for (int a = 0; a < n_k; a++)
        for (int b = 0; b < n_k; b++) {
            int S = k_rank - 2;
            int64_t p[2 * IR_MAX_RANK] = {0};
            bool ok = true, any = false;
            for (int s = 0; s < S; s++) {
                int64_t dlt = kshape[b][s] - kshape[a][s];
                ok = ok && dlt >= 0 && dlt % 2 == 0;
                any = any || dlt > 0;
                p[2 + s] = p[k_rank + 2 + s] = dlt / 2;
            }
            if (ok && any) add_pad(c, k_rank, p, true);
        }
    /* factors and lengths from the program's inputs and outputs */
    for (int i = 0; i < c->n_in; i++) {
        const ir_value *v = &g->values[c->in_val[i]];
        for (int r = 0; r < v->shape.rank; r++) add_len(c, v->shape.dims[r]);
        if (!c->in_weight[i] && v->shape.rank >= 3) add_factor(c, v->shape.dims[0]);
    }
    for (int o = 0; o < c->n_out; o++) {
        const ir_value *v = &g->values[c->out_val[o]];
        for (int r = 0; r < v->shape.rank; r++) add_len(c, v->shape.dims[r]);
        if (v->shape.rank >= 3) add_factor(c, v->shape.dims[0]);
    }
    /* as many operands as there are parallel ops to merge, outputs to produce, or operands in
     * an original Concat */
    c->cat_max = n_mm > c->n_out ? n_mm : c->n_out;
    if (cat > c->cat_max) c->cat_max = cat;
    if (c->cat_max < 2) c->cat_max = 2;
    if (c->cat_max > GEN_MAX_CAT) c->cat_max = GEN_MAX_CAT;
    c->maxdec = c->cat_max - 1; /* a Concat of cat_max; every other op reads at most 2 */
    return IR_OK;
}

/* ---------------------------------------------------------------- setup */

void gen_opts_defaults(pet_gen_opts *o) {
    if (o->depth <= 0) o->depth = 4;
    if (o->depth > GEN_MAX_DEPTH) o->depth = GEN_MAX_DEPTH;
    if (o->rounds <= 0) o->rounds = 4;
    if (o->top_k <= 0) o->top_k = 8;
    if (o->subset_ops <= 0) o->subset_ops = 4;
    if (o->max_size_factor <= 0) o->max_size_factor = 4;
    if (o->max_states <= 0) o->max_states = (int64_t)1 << 18;
    if (o->max_mutants <= 0) o->max_mutants = 1 << 16;
    if (o->max_subsets <= 0) o->max_subsets = 16;
}

static int input_index(const gen_ctx *c, int v) {
    for (int i = 0; i < c->n_in; i++)
        if (c->in_val[i] == v) return i;
    return -1;
}

/* Degrees of every value of the program in each input (pet-gen.h "degree"). */
static ir_status setup_degrees(gen_ctx *c) {
    const ir_graph *g = c->prog;
    uint8_t(*deg)[GEN_MAX_IN] = calloc((size_t)g->n_values + 1, sizeof *deg);
    uint8_t *tdeg = calloc((size_t)g->n_values + 1, 1);
    if (!deg || !tdeg) {
        free(deg);
        free(tdeg);
        return IR_ERR_NOMEM;
    }
    for (int i = 0; i < c->n_in; i++) deg[c->in_val[i]][i] = tdeg[c->in_val[i]] = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        uint8_t d[GEN_MAX_IN] = {0};
        int td = 0;
        bool product = n->op == IR_OP_Conv || n->op == IR_OP_ConvTranspose ||
                       n->op == IR_OP_MatMul || n->op == IR_OP_Gemm || n->op == IR_OP_Mul;
        bool all = product || n->op == IR_OP_Add || n->op == IR_OP_Sub || n->op == IR_OP_Sum ||
                   n->op == IR_OP_Concat;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || !ir_dtype_is_float(g->values[v].dtype)) continue;
            if (!all && k > 0) break; /* data input only (Pad's constant value is affine) */
            td = product && k == 1 ? td + tdeg[v] : (tdeg[v] > td ? tdeg[v] : td);
            for (int j = 0; j < c->n_in; j++) {
                int x = deg[v][j];
                if (product && k == 1)
                    x += d[j];
                else if (d[j] > x)
                    x = d[j];
                d[j] = (uint8_t)(x > 255 ? 255 : x);
            }
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0) {
                memcpy(deg[n->out[k]], d, sizeof d);
                tdeg[n->out[k]] = (uint8_t)(td > 255 ? 255 : td);
            }
    }
    for (int o = 0; o < c->n_out; o++) {
        memcpy(c->out_deg[o], deg[c->out_val[o]], GEN_MAX_IN);
        if (tdeg[c->out_val[o]] > c->max_tdeg) c->max_tdeg = tdeg[c->out_val[o]];
        for (int j = 0; j < c->n_in; j++)
            if (c->out_deg[o][j] > c->max_deg[j]) c->max_deg[j] = c->out_deg[o][j];
    }
    free(deg);
    free(tdeg);
    return IR_OK;
}

ir_status gen_init(gen_ctx *c, const ir_graph *prog, const pet_gen_opts *o, ir_diag *d) {
    memset(c, 0, sizeof *c);
    c->prog = prog;
    if (o) c->o = *o;
    gen_opts_defaults(&c->o);
    c->diag = d;
    const ir_graph *g = prog;
    /* inputs: graph inputs, then float constants by first reader */
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (!ir_dtype_is_float(g->values[v].dtype)) continue;
        if (c->n_in == GEN_MAX_IN) goto too_many;
        c->in_val[c->n_in++] = v;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0 || g->values[v].producer >= 0 || !ir_dtype_is_float(g->values[v].dtype) ||
                input_index(c, v) >= 0)
                continue;
            if (c->n_in == GEN_MAX_IN) goto too_many;
            c->in_val[c->n_in++] = v;
        }
    for (int i = 0; i < c->n_in; i++) {
        const ir_value *v = &g->values[c->in_val[i]];
        if (v->shape.rank > GEN_MAX_RANK)
            return ir_diag_set(d, IR_ERR_UNSUPPORTED, "input '%s' has rank %d (at most %d)",
                               v->name, v->shape.rank, GEN_MAX_RANK);
        bool konst = (v->flags & IR_VF_CONST) && v->blob;
        c->in_weight[i] = (v->flags & (IR_VF_PARAM | IR_VF_INITIALIZER)) || konst;
        c->in_literal[i] = konst && !(v->flags & (IR_VF_PARAM | IR_VF_INITIALIZER));
        c->in_bias_of[i] = -1;
        /* a bias: every reader reads it as a Conv/ConvTranspose bias or a Gemm's C */
        int readers = 0, as_bias = 0;
        for (int n = 0; n < g->n_nodes; n++)
            for (int k = 0; k < g->nodes[n].n_in; k++) {
                if (g->nodes[n].in[k] != c->in_val[i]) continue;
                readers++;
                ir_op_kind op = g->nodes[n].op;
                as_bias +=
                    k == 2 && (op == IR_OP_Conv || op == IR_OP_ConvTranspose || op == IR_OP_Gemm);
            }
        c->in_bias[i] = readers > 0 && readers == as_bias;
    }
    for (int n = 0; n < g->n_nodes; n++) { /* weights carry their bias */
        const ir_node *nd = &g->nodes[n];
        if ((nd->op != IR_OP_Conv && nd->op != IR_OP_Gemm) || nd->n_in < 3 || nd->in[2] < 0)
            continue;
        int w = input_index(c, nd->in[1]), b = input_index(c, nd->in[2]);
        if (w < 0 || b < 0 || !c->in_bias[b] || c->in_bias_of[w] >= 0) continue;
        c->in_bias_of[w] = (int8_t)b;
        c->in_bias_axis[w] = (int8_t)(nd->op == IR_OP_Conv           ? 0
                                      : ir_attr_int(nd, "transB", 0) ? 0
                                                                     : 1);
    }
    if (g->n_outputs > GEN_MAX_IN) goto too_many;
    int64_t biggest = 1;
    for (int v = 0; v < g->n_values; v++) {
        int64_t n = ir_shape_numel(&g->values[v].shape);
        if (n > biggest) biggest = n;
    }
    c->max_elems = (int64_t)((double)biggest * c->o.max_size_factor);
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (!ir_dtype_is_float(g->values[v].dtype))
            return ir_diag_set(d, IR_ERR_UNSUPPORTED, "output '%s' is not a float tensor",
                               g->values[v].name);
        c->out_val[c->n_out++] = v;
    }
    ir_status st = setup_degrees(c);
    if (st == IR_OK) st = gen_setup_attrs(c);
    if (st != IR_OK) return ir_diag_set(d, st, "out of memory setting up the generator");
    c->scratch = ir_graph_new();
    if (!c->scratch) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 8; i++)
        if (ir_graph_add_value(c->scratch, "s", IR_F32, NULL) < 0)
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    c->orig_hash = pet_gen_graph_hash(prog);
    /* the initial state: the inputs */
    for (int i = 0; i < c->n_in; i++) {
        gen_tensor *t = &c->t[i];
        const ir_value *v = &g->values[c->in_val[i]];
        t->shape = v->shape;
        t->dtype = v->dtype;
        t->op = -1;
        t->input = (int8_t)i;
        t->weight = c->in_weight[i];
        t->bias_axis = -1;
        if (c->in_bias_of[i] >= 0) {
            t->n_bias = 1;
            t->bias[0] = c->in_bias_of[i];
            t->bias_axis = c->in_bias_axis[i];
        }
        t->h = mixh(0x1197, (uint64_t)i);
        t->deg[i] = t->tdeg = 1;
    }
    c->n_t = c->n_in;
    for (int i = 0; i < c->n_in; i++) {
        if (c->in_bias[i])
            c->unused_bias++;
        else
            c->dangling++;
    }
    return IR_OK;
too_many:
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "more than %d inputs or outputs", GEN_MAX_IN);
}

void gen_fini(gen_ctx *c) {
    gen_set_free(&c->visited);
    gen_set_free(&c->emitted_keys);
    gen_set_free(&c->emitted);
    for (int i = 0; i < c->n_lay_cache; i++) free(c->lay_cache[i].items);
    free(c->lay_cache);
    ir_graph_free(c->scratch);
}
