/* pet-gen.c - PET's mutation generator, Algorithm 1 (§4.1): the depth-first enumeration of
 * programs over the operator set O (pet-gen-ops.c, pet-gen-layout.c) with the pruning rules of
 * pet-gen.h, by iterative deepening, and the emission of the complete states as mutants.
 *
 * The enumeration state lives in gen_ctx as stacks (tensors, ops) that grow by one op and
 * shrink back on return, so exploring a state allocates nothing; the only allocations are the
 * hash sets (amortized), the per-shape layout lists (once per shape) and each emitted mutant's
 * graph. Checks run cheapest first: the dangling count (before an op is even built, for whole
 * families of candidates), the canonical order, inverse pairs, degree, repeat, shape, size. */
#include "pet-gen-impl.h"

#include <math.h>
#include <time.h>

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* ---------------------------------------------------------------- sets and lists */

static bool set_grow(gen_set *s) {
    size_t nc = s->cap ? 2 * s->cap : 1024;
    uint64_t *k = calloc(nc, sizeof *k);
    if (!k) return false;
    for (size_t i = 0; i < s->cap; i++) {
        uint64_t x = s->keys[i];
        if (!x) continue;
        size_t j = (size_t)ir_mix64(x) & (nc - 1);
        while (k[j]) j = (j + 1) & (nc - 1);
        k[j] = x;
    }
    free(s->keys);
    s->keys = k;
    s->cap = nc;
    return true;
}

bool gen_set_has(const gen_set *s, uint64_t k) {
    if (!k) return s->has_zero;
    if (!s->cap) return false;
    for (size_t j = (size_t)ir_mix64(k) & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
        if (s->keys[j] == k) return true;
        if (!s->keys[j]) return false;
    }
}

bool gen_set_add(gen_set *s, uint64_t k, bool *oom) {
    if (!k) {
        bool fresh = !s->has_zero;
        s->has_zero = true;
        return fresh;
    }
    if (2 * (s->n + 1) > s->cap && !set_grow(s)) {
        if (oom) *oom = true;
        return false;
    }
    size_t j = (size_t)ir_mix64(k) & (s->cap - 1);
    for (; s->keys[j]; j = (j + 1) & (s->cap - 1))
        if (s->keys[j] == k) return false;
    s->keys[j] = k;
    s->n++;
    return true;
}

void gen_set_clear(gen_set *s) {
    if (s->cap) memset(s->keys, 0, sizeof *s->keys * s->cap);
    s->n = 0;
    s->has_zero = false;
}

void gen_set_free(gen_set *s) {
    free(s->keys);
    memset(s, 0, sizeof *s);
}

bool gen_list_push(pet_mutant_list *l, const pet_mutant *m) {
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 16;
        pet_mutant *p = realloc(l->items, sizeof *p * (size_t)nc);
        if (!p) {
            ir_graph_free(m->graph);
            return false;
        }
        l->items = p;
        l->cap = nc;
    }
    l->items[l->n++] = *m;
    return true;
}

void pet_mutant_list_free(pet_mutant_list *l) {
    if (!l) return;
    for (int i = 0; i < l->n; i++) ir_graph_free(l->items[i].graph);
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* ---------------------------------------------------------------- emission */

static void fail_oom(gen_ctx *c) {
    if (c->err == IR_OK)
        c->err = ir_diag_set(c->diag, IR_ERR_NOMEM, "out of memory generating mutants");
    c->stop = true;
}

static void emit(gen_ctx *c, const int *assign) {
    uint64_t key = c->prog_h;
    for (int o = 0; o < c->n_out; o++) key = mixh(key, c->t[assign[o]].h);
    bool oom = false;
    if (!gen_set_add(&c->emitted_keys, key, &oom)) {
        if (oom) return fail_oom(c);
        c->st->duplicates++;
        return;
    }
    ir_graph *m = gen_materialize(c, assign);
    if (!m) return fail_oom(c);
    uint64_t h = pet_gen_graph_hash(m);
    if (h == c->orig_hash || !gen_set_add(&c->emitted, h, &oom)) {
        ir_graph_free(m);
        if (oom) return fail_oom(c);
        c->st->duplicates++;
        return;
    }
    pet_mutant mu = {.graph = m,
                     .hash = h,
                     .cls = pet_mutant_classify(c->prog, m),
                     .cost = c->o.cost ? pet_gen_cost(c->o.cost, m) : 0,
                     .n_ops = c->n_ops,
                     .round = 1};
    if (!gen_list_push(c->out, &mu)) return fail_oom(c);
    c->st->mutants++;
    if (c->st->mutants >= c->o.max_mutants) c->stop = c->st->truncated = true;
}

/* Assigns the dangling tensors dl[0..k) to the outputs (dtype, shape and degree must match),
 * every bijection, emitting each. */
static void assign_outputs(gen_ctx *c, const int *dl, int o, int *assign, unsigned used) {
    if (c->stop) return;
    if (o == c->n_out) {
        emit(c, assign);
        return;
    }
    const ir_value *ov = &c->prog->values[c->out_val[o]];
    for (int i = 0; i < c->n_out; i++) {
        if (used & (1u << i)) continue;
        const gen_tensor *t = &c->t[dl[i]];
        if (t->dtype != ov->dtype || !ir_shape_eq(&t->shape, &ov->shape)) continue;
        /* degrees are bounds over the whole tensor (a split part inherits its whole's): the
         * output must involve every input the original's does, within max_deg (try_push) */
        bool covers = true;
        for (int j = 0; j < c->n_in && covers; j++) covers = !c->out_deg[o][j] || t->deg[j];
        if (!covers) continue;
        assign[o] = dl[i];
        assign_outputs(c, dl, o + 1, assign, used | (1u << i));
    }
}

static void check_complete(gen_ctx *c) {
    int dl[GEN_MAX_IN], k = 0;
    for (int i = 0; i < c->n_t; i++) {
        if (c->t[i].uses > 0) continue;
        if (c->t[i].op < 0 || k == c->n_out) return; /* an unused input, or too many */
        dl[k++] = i;
    }
    if (k != c->n_out) return;
    c->st->complete++;
    int assign[GEN_MAX_IN];
    assign_outputs(c, dl, 0, assign, 0);
}

/* ---------------------------------------------------------------- the search */

static void dfs(gen_ctx *c);

/* The companion bias of output i of op (pet-gen.h "Biases"). */
static void out_companion(const gen_ctx *c, const gen_op *op, gen_tensor *t) {
    t->bias_axis = -1;
    t->n_bias = 0;
    const gen_tensor *a = &c->t[op->in[0]];
    if (a->bias_axis < 0) return;
    switch (op->kind) {
    case GK_CONCAT: {
        bool same_axis = op->attr == a->bias_axis, ok = true;
        int n = 0;
        for (int i = 0; i < op->n_in && ok; i++) {
            const gen_tensor *x = &c->t[op->in[i]];
            ok = x->bias_axis == a->bias_axis;
            if (!ok) break;
            if (same_axis) {
                ok = n + x->n_bias <= GEN_MAX_BIAS;
                for (int j = 0; j < x->n_bias && ok; j++) t->bias[n++] = x->bias[j];
            } else {
                ok = x->n_bias == a->n_bias && !memcmp(x->bias, a->bias, (size_t)a->n_bias);
            }
        }
        if (!ok) return;
        if (!same_axis) {
            n = a->n_bias;
            memcpy(t->bias, a->bias, (size_t)n);
        }
        t->n_bias = (int8_t)n;
        t->bias_axis = a->bias_axis;
        return;
    }
    case GK_PAD: {
        int r = a->shape.rank;
        if (op->pads[a->bias_axis] || op->pads[r + a->bias_axis]) return;
        break;
    }
    case GK_SPLIT:
    case GK_SLICE:
        if (op->attr == a->bias_axis) return;
        break;
    default: return;
    }
    t->bias_axis = a->bias_axis;
    t->n_bias = a->n_bias;
    memcpy(t->bias, a->bias, (size_t)a->n_bias);
}

/* The biases a conv/gemm on weight tensor w adds (w's companion when its axis is the op's
 * output-channel axis of the weight). */
static void op_biases(const gen_ctx *c, gen_op *op) {
    op->n_bias = 0;
    if (op->kind != GK_CONV && op->kind != GK_GEMM) return;
    const gen_tensor *w = &c->t[op->in[1]];
    int axis = op->kind == GK_CONV ? 0 : c->gemm[op->attr].tb ? 0 : 1;
    if (w->bias_axis != axis || w->n_bias == 0) return;
    int64_t len = 0;
    for (int i = 0; i < w->n_bias; i++) len += c->t[w->bias[i]].shape.dims[0];
    if (len != w->shape.dims[axis]) return;
    op->n_bias = w->n_bias;
    memcpy(op->bias, w->bias, (size_t)w->n_bias);
}

static bool is_inverse(const gen_ctx *c, const gen_op *op) {
    const gen_tensor *a = &c->t[op->in[0]];
    if (op->kind == GK_LAYOUT) return a->layout;
    if (op->kind == GK_SPLIT && a->op >= 0) { /* a split of a concat into its operands */
        const gen_op *p = &c->ops[a->op];
        if (p->kind != GK_CONCAT || p->attr != op->attr || p->n_in != op->n_out) return false;
        for (int i = 0; i < p->n_in; i++)
            if (c->t[p->in[i]].shape.dims[op->attr] != op->sizes[i]) return false;
        return true;
    }
    if (op->kind == GK_CONCAT && a->op >= 0) { /* the parts of one split, in order */
        const gen_op *p = &c->ops[a->op];
        if (p->kind != GK_SPLIT || p->attr != op->attr || p->n_out != op->n_in) return false;
        for (int i = 0; i < op->n_in; i++)
            if (op->in[i] != p->out0 + i) return false;
        return true;
    }
    return false;
}

static void try_push(gen_ctx *c, gen_op *op) {
    if (c->stop) return;
    pet_gen_stats *st = c->st;
    st->candidates++;
    op_biases(c, op);
    /* dangling tensors: an op reduces their count by at most maxdec; biases are used by the
     * convs of their weights, and some op must be left for them */
    int cons = 0, bcons = 0;
    for (int i = 0; i < op->n_in; i++) cons += c->t[op->in[i]].uses == 0;
    for (int i = 0; i < op->n_bias; i++) bcons += c->t[op->bias[i]].uses == 0;
    int d2 = c->dangling - cons + op->n_out, rem = c->o.depth - c->n_ops - 1;
    if (d2 - c->n_out > rem * c->maxdec ||
        (rem == 0 && (d2 != c->n_out || bcons != c->unused_bias))) {
        st->pruned_dangling++;
        return;
    }
    /* one order per set of ops: an op that does not read the previous op's outputs comes
     * after it only in hash order (the hash-least topological order always qualifies) */
    op->h = gen_op_hash(c, op);
    if (c->n_ops > 0) {
        const gen_op *prev = &c->ops[c->n_ops - 1];
        bool reads = false;
        for (int i = 0; i < op->n_in; i++)
            reads = reads || (op->in[i] >= prev->out0 && op->in[i] < prev->out0 + prev->n_out);
        if (!reads && op->h < prev->h) {
            st->pruned_order++;
            return;
        }
    }
    if (is_inverse(c, op)) {
        st->pruned_inverse++;
        return;
    }
    /* degrees */
    uint8_t deg[GEN_MAX_IN];
    bool product =
        op->kind == GK_CONV || op->kind == GK_GEMM || op->kind == GK_MATMUL || op->kind == GK_MUL;
    bool maxed = op->kind == GK_ADD || op->kind == GK_CONCAT;
    for (int j = 0; j < c->n_in; j++) {
        int x = c->t[op->in[0]].deg[j];
        if (product)
            x += c->t[op->in[1]].deg[j];
        else if (maxed)
            for (int i = 1; i < op->n_in; i++)
                if (c->t[op->in[i]].deg[j] > x) x = c->t[op->in[i]].deg[j];
        for (int i = 0; i < op->n_bias; i++)
            if (c->t[op->bias[i]].deg[j] > x) x = c->t[op->bias[i]].deg[j];
        if (x > c->max_deg[j]) {
            st->pruned_degree++;
            return;
        }
        deg[j] = (uint8_t)x;
    }
    int td = c->t[op->in[0]].tdeg;
    if (product)
        td += c->t[op->in[1]].tdeg;
    else if (maxed)
        for (int i = 1; i < op->n_in; i++)
            if (c->t[op->in[i]].tdeg > td) td = c->t[op->in[i]].tdeg;
    if (op->n_bias && td < 1) td = 1; /* a bias is a term of degree 1 */
    if (td > c->max_tdeg) {
        st->pruned_degree++;
        return;
    }
    for (int k = 0; k < c->n_ops; k++)
        if (c->ops[k].h == op->h) {
            st->pruned_repeat++;
            return;
        }
    ir_shape shp[GEN_MAX_OUTS];
    if (!gen_op_shapes(c, op, shp)) {
        st->pruned_shape++;
        return;
    }
    for (int i = 0; i < op->n_out; i++)
        if (shp[i].rank > GEN_MAX_RANK || ir_shape_numel(&shp[i]) > c->max_elems) {
            st->pruned_size++;
            return;
        }
    /* push */
    bool weight = true;
    for (int i = 0; i < op->n_in; i++) weight = weight && c->t[op->in[i]].weight;
    op->out0 = (int8_t)c->n_t;
    for (int i = 0; i < op->n_out; i++) {
        gen_tensor *t = &c->t[c->n_t + i];
        t->shape = shp[i];
        t->dtype = c->t[op->in[0]].dtype;
        t->op = (int8_t)c->n_ops;
        t->input = -1;
        t->oidx = (int8_t)i;
        t->weight = weight;
        t->layout = op->kind == GK_LAYOUT;
        t->uses = 0;
        t->h = mixh(op->h, (uint64_t)i);
        memcpy(t->deg, deg, sizeof deg);
        t->tdeg = (uint8_t)td;
        out_companion(c, op, t);
    }
    for (int i = 0; i < op->n_in; i++) c->t[op->in[i]].uses++;
    for (int i = 0; i < op->n_bias; i++) c->t[op->bias[i]].uses++;
    int old_d = c->dangling, old_b = c->unused_bias;
    uint64_t old_h = c->prog_h;
    c->n_t += op->n_out;
    c->ops[c->n_ops++] = *op;
    c->dangling = d2;
    c->unused_bias -= bcons;
    c->prog_h += mixh(op->h, 0x0b5);
    dfs(c);
    c->prog_h = old_h;
    c->dangling = old_d;
    c->unused_bias = old_b;
    c->n_ops--;
    c->n_t -= op->n_out;
    for (int i = 0; i < op->n_in; i++) c->t[op->in[i]].uses--;
    for (int i = 0; i < op->n_bias; i++) c->t[op->bias[i]].uses--;
}

/* Concat operands: subsets in index order, every one fitting the first on all dims but axis. */
static void expand_concat(gen_ctx *c, const int *pool, int np, int from, gen_op *op, int axis) {
    if (op->n_in >= 2) {
        op->n_out = 1;
        op->attr = axis;
        gen_op cp = *op;
        try_push(c, &cp);
    }
    if (op->n_in == c->cat_max) return;
    const gen_tensor *a = &c->t[op->in[0]];
    for (int q = from; q < np && !c->stop; q++) {
        const gen_tensor *x = &c->t[pool[q]];
        if (x->shape.rank != a->shape.rank || x->dtype != a->dtype) continue;
        bool fit = true;
        for (int k = 0; k < a->shape.rank && fit; k++)
            fit = k == axis || x->shape.dims[k] == a->shape.dims[k];
        if (!fit) continue;
        op->in[op->n_in++] = (int8_t)pool[q];
        expand_concat(c, pool, np, q + 1, op, axis);
        op->n_in--;
    }
}

/* Whether an op consuming `cons` waiting tensors and producing n_out can still lead to a
 * complete program (the dangling rule, checked exactly again in try_push). */
static bool room(const gen_ctx *c, int cons, int n_out) {
    int d2 = c->dangling - cons + n_out, rem = c->o.depth - c->n_ops - 1;
    return !(d2 - c->n_out > rem * c->maxdec || (rem == 0 && d2 != c->n_out));
}

static void op_init(gen_op *op, int kind, int n_in, int n_out, int a, int b) {
    op->kind = (uint8_t)kind;
    op->n_in = (uint8_t)n_in;
    op->n_out = (uint8_t)n_out;
    op->in[0] = (int8_t)a;
    op->in[1] = (int8_t)b;
    op->n_bias = 0;
    op->attr = 0;
}

static void expand_unary(gen_ctx *c, int a) {
    const gen_tensor *t = &c->t[a];
    int r = t->shape.rank, cons = t->uses == 0;
    pet_gen_stats *st = c->st;
    gen_op op;
    bool one = room(c, cons, 1);
    /* layouts */
    if (t->layout) {
        st->pruned_inverse++;
    } else {
        const gen_lay_list *ll = gen_layouts(c, &t->shape);
        if (!ll) return fail_oom(c);
        int n = ll->n;
        const gen_layout *items = ll->items; /* stays put when the cache grows */
        if (!one) st->candidates += n, st->pruned_dangling += n;
        for (int i = 0; i < n && one && !c->stop; i++) {
            op_init(&op, GK_LAYOUT, 1, 1, a, -1);
            op.lay = items[i];
            try_push(c, &op);
        }
    }
    /* pads */
    for (int p = 0; p < c->n_pads && !c->stop; p++) {
        if (c->pad_rank[p] != r || c->pad_weight[p] != t->weight) continue;
        if (!one) {
            st->candidates++, st->pruned_dangling++;
            continue;
        }
        op_init(&op, GK_PAD, 1, 1, a, -1);
        memcpy(op.pads, c->pads[p], sizeof(int64_t) * 2 * (size_t)r);
        try_push(c, &op);
    }
    bool two = room(c, cons, 2);
    for (int ax = 0; ax < r && !c->stop; ax++) {
        int64_t L = t->shape.dims[ax];
        if (L < 2) continue;
        /* slices (the first or last s) and splits into (s, L - s) */
        for (int li = 0; li < c->n_len && !c->stop; li++) {
            int64_t s = c->len[li];
            if (s >= L) continue;
            for (int side = 0; side < 2; side++) {
                if (!one) {
                    st->candidates++, st->pruned_dangling++;
                    continue;
                }
                op_init(&op, GK_SLICE, 1, 1, a, -1);
                op.attr = ax;
                op.sizes[0] = side ? L - s : 0;
                op.sizes[1] = side ? L : s;
                try_push(c, &op);
            }
            if (!two) {
                st->candidates++, st->pruned_dangling++;
                continue;
            }
            op_init(&op, GK_SPLIT, 1, 2, a, -1);
            op.attr = ax;
            op.sizes[0] = s;
            op.sizes[1] = L - s;
            try_push(c, &op);
        }
        /* f equal parts */
        for (int fi = 0; fi < c->n_f && !c->stop; fi++) {
            int64_t f = c->f[fi];
            bool dup = false; /* two parts: already a (s, L - s) split when L/2 is a length */
            for (int li = 0; li < c->n_len && f == 2; li++) dup = dup || c->len[li] * 2 == L;
            if (f > GEN_MAX_OUTS || L % f || dup) continue;
            if (!room(c, cons, (int)f)) {
                st->candidates++, st->pruned_dangling++;
                continue;
            }
            op_init(&op, GK_SPLIT, 1, (int)f, a, -1);
            op.attr = ax;
            for (int k = 0; k < f; k++) op.sizes[k] = L / f;
            try_push(c, &op);
        }
        /* the original outputs' lengths along ax */
        if (c->n_out >= 3 && c->n_out <= GEN_MAX_OUTS && room(c, cons, c->n_out)) {
            int64_t sum = 0;
            for (int o = 0; o < c->n_out && sum >= 0; o++) {
                const ir_value *ov = &c->prog->values[c->out_val[o]];
                if (ov->shape.rank != r) {
                    sum = -1;
                    break;
                }
                op.sizes[o] = ov->shape.dims[ax];
                sum += op.sizes[o];
            }
            if (sum == L) {
                op_init(&op, GK_SPLIT, 1, c->n_out, a, -1);
                op.attr = ax;
                try_push(c, &op);
            }
        }
    }
}

static void expand(gen_ctx *c) {
    int pool[GEN_MAX_T], np = 0;
    for (int i = 0; i < c->n_t; i++)
        if (c->t[i].op >= 0 || !c->in_bias[c->t[i].input]) pool[np++] = i;
    for (int q = 0; q < np && !c->stop; q++) expand_unary(c, pool[q]);
    gen_op op;
    pet_gen_stats *st = c->st;
    for (int qa = 0; qa < np && !c->stop; qa++) {
        int a = pool[qa];
        for (int qb = 0; qb < np && !c->stop; qb++) {
            int b = pool[qb];
            if (a == b) continue;
            int cons = (c->t[a].uses == 0) + (c->t[b].uses == 0);
            bool conv = !c->t[a].weight && c->t[b].weight;
            int n = (a < b ? 2 : 0) + 1 + (conv ? c->n_conv : 0) + c->n_gemm;
            if (!room(c, cons, 1)) {
                st->candidates += n, st->pruned_dangling += n;
                continue;
            }
            if (a < b) {
                op_init(&op, GK_ADD, 2, 1, a, b);
                try_push(c, &op);
                op_init(&op, GK_MUL, 2, 1, a, b);
                try_push(c, &op);
            }
            op_init(&op, GK_MATMUL, 2, 1, a, b);
            try_push(c, &op);
            for (int k = 0; k < c->n_conv && conv && !c->stop; k++) {
                op_init(&op, GK_CONV, 2, 1, a, b);
                op.attr = k;
                try_push(c, &op);
            }
            for (int k = 0; k < c->n_gemm && !c->stop; k++) {
                op_init(&op, GK_GEMM, 2, 1, a, b);
                op.attr = k;
                try_push(c, &op);
            }
        }
    }
    for (int qa = 0; qa < np && !c->stop; qa++) {
        int r = c->t[pool[qa]].shape.rank;
        for (int ax = 0; ax < r && !c->stop; ax++) {
            op_init(&op, GK_CONCAT, 1, 1, pool[qa], -1);
            expand_concat(c, pool, np, qa + 1, &op, ax);
        }
    }
}

static void dfs(gen_ctx *c) {
    if (c->stop) return;
    if (c->n_ops > 0) {
        bool oom = false;
        if (!gen_set_add(&c->visited, c->prog_h, &oom)) {
            if (oom) return fail_oom(c);
            c->st->pruned_visited++;
            return;
        }
        /* shallower complete states were emitted by the earlier iterations */
        if (c->n_ops == c->o.depth && c->dangling == c->n_out && !c->unused_bias) check_complete(c);
    }
    if (c->n_ops == c->o.depth || c->stop) return;
    if (++c->st->states > c->o.max_states ||
        ((c->st->states & 4095) == 0 && c->o.interrupt && *c->o.interrupt)) {
        c->stop = c->st->truncated = true;
        return;
    }
    expand(c);
}

/* Runs Algorithm 1 on prog, appending to out and adding to out->stats. */
ir_status gen_enumerate(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                        ir_diag *d) {
    double t0 = ir_now_seconds();
    gen_ctx *c = malloc(sizeof *c);
    if (!c) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    pet_gen_stats *st = &out->stats;
    ir_status rc = gen_init(c, prog, o, d);
    if (rc == IR_OK) {
        c->out = out;
        c->st = st;
        st->enumerations++;
        /* iterative deepening: every mutant of depth d is found before any of depth d + 1,
         * so a budget (max_states) cuts the deepest level only; the shallower iterations
         * cost little, their dangling bound being tighter */
        int full = c->o.depth;
        for (int dl = 1; dl <= full && !c->stop; dl++) {
            c->o.depth = dl;
            gen_set_clear(&c->visited);
            dfs(c);
        }
        rc = c->err;
    }
    gen_fini(c);
    free(c);
    st->seconds += ir_now_seconds() - t0;
    return rc;
}

ir_status pet_gen_mutants(const ir_graph *prog, const pet_gen_opts *o, pet_mutant_list *out,
                          ir_diag *d) {
    ir_status rc = gen_enumerate(prog, o, out, d);
    if (rc == IR_OK && o && o->cost) out->orig_cost = pet_gen_cost(o->cost, prog);
    return rc;
}
