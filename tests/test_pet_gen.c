/* test_pet_gen.c - PET's program splitting (rules/pet/pet-split.c) and mutation generator
 * (rules/pet/pet-gen*.c).
 *
 *  - Splitting, on real models (resnet_small, inception_small, fcn_small, a transformer encoder,
 *    and the full-size Inception v3): sub-programs are disjoint, hold only multilinear ops, read
 *    exactly the values their inputs list and export exactly those their outputs list, are
 *    convex (checked by an independent search), and extract to valid programs; Inception's
 *    parallel branch heads are grouped into one sub-program; a gating block (x * sigmoid(..x))
 *    and dependent convs are never merged into one non-convex program.
 *  - Generation finds, by enumeration, the paper's mutants, each confirmed by the verifier
 *    (pet_verify) rather than by its shape alone: figure 1 (two images side by side along the
 *    width: only the seam columns differ), figure 3 (a dilated conv as a regular conv on the
 *    phases moved into the batch: equivalent), two parallel convs with biases and two parallel
 *    matmuls merged into one op (equivalent), and A.B as (B^T.A^T)^T (equivalent); each gets
 *    its class label.
 *  - Every emitted mutant has the original's inputs and outputs (names, dtypes, shapes), reads
 *    every input, validates, differs from the original, and no two share a hash.
 *  - Pruning: a 2-op program to depth 4 finishes in seconds with its counters reported; the
 *    labels and the hash follow their rules on hand-built graphs; rounds, subsets, top-K and the
 *    judge callback. */
#include "test-util.h"

#include "pet-build.h"

#include "pet-gen.h"
#include "pet.h"

/* ---------------------------------------------------------------- building programs */

static int input(ir_graph *g, const char *name, ir_shape s, bool weight) {
    int v = ir_graph_add_value(g, name, IR_F32, &s);
    ir_graph_add_input(g, v);
    if (weight) g->values[v].flags |= IR_VF_PARAM;
    return v;
}

static int conv(ir_graph *g, int x, int w, int b, int64_t pad, int64_t dil) {
    int64_t pads[4] = {pad, pad, pad, pad}, d[2] = {dil, dil};
    ir_attr at[2] = {tu_attr_ints("pads", 4, pads), tu_attr_ints("dilations", 2, d)};
    return pb_op(g, IR_OP_Conv, b >= 0 ? 3 : 2, (int[]){x, w, b}, 2, at);
}

static ir_graph *load_fixture(const char *rel, const char *batch_dim) {
    char p[1024];
    ir_diag d = {{0}};
    ir_status st;
    const char *names[1] = {batch_dim};
    ir_shape vals[1] = {TU_SHAPE(2)};
    ir_import_opts io = {0};
    if (batch_dim) {
        io.n_shapes = 1;
        io.shape_names = names;
        io.shape_values = vals;
    }
    ir_graph *g = ir_onnx_load(tu_src_path(rel, p, sizeof p), &io, &st, &d);
    if (!g) fail_msg("load %s: %s", rel, d.msg);
    return g;
}

/* Every mutant to depth (a budget no test program reaches: the enumeration is complete). */
static pet_mutant_list generate(const ir_graph *g, int depth) {
    pet_gen_opts o = {.depth = depth, .max_states = (int64_t)1 << 24};
    pet_mutant_list l = {0};
    ir_diag d = {{0}};
    if (pet_gen_mutants(g, &o, &l, &d) != IR_OK) fail_msg("generate: %s", d.msg);
    return l;
}

static int count_class(const pet_mutant_list *l, int cls) {
    int n = 0;
    for (int i = 0; i < l->n; i++) n += l->items[i].cls == cls;
    return n;
}

/* g without its affine parts: every Conv/Gemm bias input cut, and what only fed them removed.
 * The verifier checks multilinear parts (pet.h); a mutant's bias may be a Concat of the
 * original biases, which pet_verify would otherwise read as data. */
static ir_graph *multilinear_part(const ir_graph *g) {
    ir_graph *h = ir_graph_clone(g);
    for (int i = 0; i < h->n_nodes; i++)
        if ((h->nodes[i].op == IR_OP_Conv || h->nodes[i].op == IR_OP_Gemm) && h->nodes[i].n_in > 2)
            h->nodes[i].n_in = 2;
    ir_graph_prune(h);
    return h;
}

static pet_result verify(const ir_graph *orig, const ir_graph *m) {
    pet_options o = {.tests = 2, .seed = 7, .threads = 1};
    pet_result r;
    ir_diag d = {{0}};
    ir_graph *a = multilinear_part(orig), *b = multilinear_part(m);
    if (pet_verify(a, b, &o, &r, &d) != IR_OK) fail_msg("verify: %s", d.msg);
    ir_graph_free(a);
    ir_graph_free(b);
    return r;
}

/* The first Conv (or MatMul) node of g, -1 when none. */
static int find_op(const ir_graph *g, ir_op_kind k) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == k) return i;
    return -1;
}

/* ---------------------------------------------------------------- invariants of mutants */

/* Every mutant: the original's inputs and outputs (names, dtypes, shapes, in order), every
 * input read, valid, its hash its own and unique, never the original's. */
static void check_mutants(const ir_graph *orig, const pet_mutant_list *l) {
    uint64_t oh = pet_gen_graph_hash(orig);
    for (int i = 0; i < l->n; i++) {
        const ir_graph *m = l->items[i].graph;
        ir_diag d = {{0}};
        if (ir_graph_validate(m, &d) != IR_OK) fail_msg("mutant %d invalid: %s", i, d.msg);
        assert_int_equal(m->n_inputs, orig->n_inputs);
        assert_int_equal(m->n_outputs, orig->n_outputs);
        for (int k = 0; k < orig->n_inputs; k++) {
            const ir_value *a = &orig->values[orig->inputs[k]], *b = &m->values[m->inputs[k]];
            assert_string_equal(a->name, b->name);
            assert_int_equal(a->dtype, b->dtype);
            assert_true(ir_shape_eq(&a->shape, &b->shape));
            bool read = false;
            for (int n = 0; n < m->n_nodes && !read; n++)
                for (int q = 0; q < m->nodes[n].n_in; q++)
                    read = read || m->nodes[n].in[q] == m->inputs[k];
            if (!read) fail_msg("mutant %d does not read input %s", i, a->name);
        }
        for (int k = 0; k < orig->n_outputs; k++) {
            const ir_value *a = &orig->values[orig->outputs[k]], *b = &m->values[m->outputs[k]];
            assert_string_equal(a->name, b->name);
            assert_int_equal(a->dtype, b->dtype);
            assert_true(ir_shape_eq(&a->shape, &b->shape));
        }
        assert_true(l->items[i].hash == pet_gen_graph_hash(m));
        assert_true(l->items[i].hash != oh);
        for (int j = 0; j < i; j++)
            if (l->items[j].hash == l->items[i].hash)
                fail_msg("mutants %d and %d share a hash", j, i);
        assert_true(l->items[i].cls >= 0 && l->items[i].cls < PET_MC_COUNT);
        assert_int_equal(l->items[i].cls, pet_mutant_classify(orig, m));
    }
}

/* ---------------------------------------------------------------- splitting */

/* Whether some path leaves sp through a node outside it and comes back into it. */
static bool path_leaves_and_returns(const ir_graph *g, const pet_subprog *sp) {
    unsigned char *in = calloc((size_t)g->n_nodes, 1), *seen = calloc((size_t)g->n_nodes, 1);
    for (int i = 0; i < sp->n_nodes; i++) in[sp->nodes[i]] = 1;
    bool back = false;
    /* g->nodes is topological: one forward sweep marks everything reachable from a member
     * through a non-member */
    for (int i = 0; i < g->n_nodes && !back; i++) {
        const ir_node *n = &g->nodes[i];
        bool from_out = false; /* reads something reached after leaving sp */
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || g->values[v].producer < 0) continue;
            int p = g->values[v].producer;
            if (seen[p] || (in[p] && !in[i])) from_out = true;
        }
        if (in[i] && from_out) {
            /* a member reads a value reached via a non-member */
            for (int k = 0; k < n->n_in; k++) {
                int v = n->in[k];
                if (v >= 0 && g->values[v].producer >= 0 && seen[g->values[v].producer])
                    back = true;
            }
        }
        if (!in[i] && from_out) seen[i] = 1;
    }
    free(in);
    free(seen);
    return back;
}

static bool member(const pet_subprog *sp, int node) {
    for (int i = 0; i < sp->n_nodes; i++)
        if (sp->nodes[i] == node) return true;
    return false;
}

/* The checks every split must pass (see the file comment). */
static void check_split(const ir_graph *g, const pet_split *s) {
    int *owner = malloc(sizeof(int) * (size_t)g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) owner[i] = -1;
    int covered = 0;
    for (int p = 0; p < s->n; p++) {
        const pet_subprog *sp = &s->progs[p];
        assert_true(sp->n_nodes > 0);
        for (int i = 0; i < sp->n_nodes; i++) {
            int n = sp->nodes[i];
            if (i) assert_true(n > sp->nodes[i - 1]);
            if (owner[n] >= 0) fail_msg("node %d in sub-programs %d and %d", n, owner[n], p);
            owner[n] = p;
            assert_true(pet_node_is_multilinear(g, &g->nodes[n]));
            assert_int_equal(sp->node_ids[i], g->nodes[n].id);
            covered++;
        }
        /* inputs: exactly the float values members read and do not produce */
        int want_in = 0;
        for (int i = 0; i < g->n_values; i++) {
            const ir_value *v = &g->values[i];
            bool read = false;
            for (int q = 0; q < sp->n_nodes && !read; q++) {
                const ir_node *nd = &g->nodes[sp->nodes[q]];
                for (int k = 0; k < nd->n_in; k++) read = read || nd->in[k] == i;
            }
            bool inside = v->producer >= 0 && member(sp, v->producer);
            if (!read || inside || !ir_dtype_is_float(v->dtype)) continue;
            want_in++;
            int j = 0;
            while (j < sp->n_inputs && sp->inputs[j] != i) j++;
            if (j == sp->n_inputs) fail_msg("sub-program %d lacks input %s", p, v->name);
            switch (sp->input_kind[j]) {
            case PET_IN_WEIGHT: assert_true((v->flags & IR_VF_PARAM) && !v->blob); break;
            case PET_IN_INITIALIZER:
            case PET_IN_LITERAL: assert_non_null(v->blob); break;
            default: assert_true(v->producer >= 0 || !(v->flags & IR_VF_PARAM)); break;
            }
        }
        assert_int_equal(sp->n_inputs, want_in);
        /* outputs: exactly the produced values read outside or graph outputs */
        int want_out = 0;
        for (int q = 0; q < sp->n_nodes; q++) {
            const ir_node *nd = &g->nodes[sp->nodes[q]];
            for (int k = 0; k < nd->n_out; k++) {
                int v = nd->out[k];
                bool out = v >= 0 && (g->values[v].flags & IR_VF_OUTPUT);
                for (int j = 0; j < g->n_nodes && v >= 0 && !out; j++)
                    for (int r = 0; r < g->nodes[j].n_in && !member(sp, j); r++)
                        out = out || g->nodes[j].in[r] == v;
                if (!out) continue;
                bool listed = false;
                for (int j = 0; j < sp->n_outputs; j++) listed = listed || sp->outputs[j] == v;
                if (!listed) fail_msg("sub-program %d lacks output %s", p, g->values[v].name);
                want_out++;
            }
        }
        assert_int_equal(sp->n_outputs, want_out);
        if (path_leaves_and_returns(g, sp)) fail_msg("sub-program %d is not convex", p);
        /* extraction */
        ir_diag d = {{0}};
        ir_status st;
        ir_graph *h = pet_subprog_extract(g, sp, &st, &d);
        if (!h) fail_msg("extract %d: %s", p, d.msg);
        assert_int_equal(ir_graph_validate(h, &d), IR_OK);
        assert_int_equal(h->n_nodes, sp->n_nodes);
        assert_int_equal(h->n_outputs, sp->n_outputs);
        int lits = 0;
        for (int j = 0; j < sp->n_inputs; j++) lits += sp->input_kind[j] == PET_IN_LITERAL;
        assert_int_equal(h->n_inputs + lits, sp->n_inputs);
        for (int j = 0; j < sp->n_outputs; j++)
            assert_string_equal(h->values[h->outputs[j]].name, g->values[sp->outputs[j]].name);
        ir_graph_free(h);
    }
    /* every multilinear node is in one (the sets are maximal up to convexity) */
    for (int i = 0; i < g->n_nodes; i++)
        if (pet_node_is_multilinear(g, &g->nodes[i]) && owner[i] < 0)
            fail_msg("multilinear node %s in no sub-program", g->nodes[i].name);
    assert_int_equal(covered, s->n_multilinear_nodes);
    assert_int_equal(s->n_cut_nodes, g->n_nodes - covered);
    free(owner);
}

static pet_split *split(const ir_graph *g) {
    pet_split *s;
    ir_diag d = {{0}};
    if (pet_split_graph(g, NULL, &s, &d) != IR_OK) fail_msg("split: %s", d.msg);
    check_split(g, s);
    return s;
}

/* Whether some grouped sub-program has at least n convs reading one value. */
static bool has_grouped_convs(const ir_graph *g, const pet_split *s, int n) {
    for (int p = 0; p < s->n; p++) {
        const pet_subprog *sp = &s->progs[p];
        if (sp->n_parts < 2) continue;
        for (int a = 0; a < sp->n_nodes; a++) {
            const ir_node *na = &g->nodes[sp->nodes[a]];
            if (na->op != IR_OP_Conv) continue;
            int same = 0;
            for (int b = 0; b < sp->n_nodes; b++) {
                const ir_node *nb = &g->nodes[sp->nodes[b]];
                same += nb->op == IR_OP_Conv && nb->in[0] == na->in[0];
            }
            if (same >= n) return true;
        }
    }
    return false;
}

static void test_split_fixtures(void **state) {
    (void)state;
    static const char *const models[] = {"resnet_small", "inception_small", "fcn_small",
                                         "r3d_small", "transformer_encoder"};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", models[m]);
        ir_graph *g = load_fixture(rel, m == 4 ? "batch" : NULL);
        pet_split *s = split(g);
        assert_true(s->n > 0);
        if (!strcmp(models[m], "inception_small")) {
            assert_true(s->n_grouped > 0);
            /* a block's 1x1 branch heads and the pooling branch read the block input */
            assert_true(has_grouped_convs(g, s, 3));
        }
        if (!strcmp(models[m], "resnet_small")) {
            /* the down-sampling block: conv2 + the 1x1 shortcut conv + the residual Add */
            bool found = false;
            for (int p = 0; p < s->n; p++)
                found = found || (s->progs[p].n_nodes == 3 && s->progs[p].n_compute == 2);
            assert_true(found);
        }
        pet_split_free(s);
        ir_graph_free(g);
    }
    /* the full-size Inception v3 (weights as graph inputs): parallel branches grouped */
    ir_graph *g = load_fixture("tests/fixtures/structure/inception_v3.onnx", NULL);
    pet_split *s = split(g);
    assert_true(has_grouped_convs(g, s, 3));
    for (int p = 0; p < s->n; p++)
        for (int j = 0; j < s->progs[p].n_inputs; j++)
            if (s->progs[p].input_kind[j] == PET_IN_WEIGHT) goto weights_ok;
    fail_msg("no weight inputs in inception_v3's sub-programs");
weights_ok:
    pet_split_free(s);
    ir_graph_free(g);
}

/* x -> conv -> y; y * sigmoid(GAP(y)) (a gating): conv and GAP are multilinear and so is the
 * Mul, but conv -> Mul would be a non-convex set (the path through the sigmoid). conv1 -> relu
 * -> conv2 with equal shapes: same signature, but dependent, so never grouped. Two convs on one
 * input: grouped. */
static void test_split_convex_and_groups(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(1, 4, 6, 6), false),
        w = input(g, "w", TU_SHAPE(4, 4, 3, 3), true);
    int y = conv(g, x, w, -1, 1, 1);
    int m = pb_op(g, IR_OP_GlobalAveragePool, 1, &y, 0, NULL);
    int sg = pb_op(g, IR_OP_Sigmoid, 1, &m, 0, NULL);
    int gated = pb_op(g, IR_OP_Mul, 2, (int[]){y, sg}, 0, NULL);
    int w2 = input(g, "w2", TU_SHAPE(4, 4, 3, 3), true);
    int r = pb_op(g, IR_OP_Relu, 1, &gated, 0, NULL);
    int c1 = conv(g, r, w2, -1, 1, 1);
    int r1 = pb_op(g, IR_OP_Relu, 1, &c1, 0, NULL);
    int c2 = conv(g, r1, w2, -1, 1, 1);
    int r2 = pb_op(g, IR_OP_Relu, 1, &c2, 0, NULL);
    int wa = input(g, "wa", TU_SHAPE(3, 4, 1, 1), true),
        wb = input(g, "wb", TU_SHAPE(5, 4, 1, 1), true);
    int pa = conv(g, r2, wa, -1, 0, 1), pb = conv(g, r2, wb, -1, 0, 1);
    pb_output(g, pb_op(g, IR_OP_Relu, 1, &pa, 0, NULL), "oa");
    pb_output(g, pb_op(g, IR_OP_Relu, 1, &pb, 0, NULL), "ob");
    pet_split *s = split(g);
    int conv_node = g->values[y].producer, mul_node = g->values[gated].producer;
    int c1n = g->values[c1].producer, c2n = g->values[c2].producer;
    int pan = g->values[pa].producer, pbn = g->values[pb].producer;
    int grouped = 0;
    for (int p = 0; p < s->n; p++) {
        const pet_subprog *sp = &s->progs[p];
        assert_false(member(sp, conv_node) && member(sp, mul_node));
        assert_false(member(sp, c1n) && member(sp, c2n));
        if (member(sp, pan)) {
            assert_true(member(sp, pbn));
            assert_int_equal(sp->n_parts, 2);
            assert_int_equal(sp->n_outputs, 2);
            grouped++;
        }
    }
    assert_int_equal(grouped, 1);
    pet_split_free(s);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- the paper's mutants */

/* Figure 1: a conv on a batch of 2; the mutant that puts the two images side by side along the
 * width ([1, C, H, 2W]) differs only in the cells at the seam. */
static void test_gen_figure1(void **state) {
    (void)state;
    const int64_t C = 4, H = 6, W = 6;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(2, C, H, W), false),
        w = input(g, "w", TU_SHAPE(C, C, 3, 3), true);
    pb_output(g, conv(g, x, w, -1, 1, 1), "y");
    pet_mutant_list l = generate(g, 3);
    check_mutants(g, &l);
    assert_true(count_class(&l, PET_MC_BATCH_TO_WIDTH) > 0);
    assert_true(count_class(&l, PET_MC_BATCH_TO_HEIGHT) > 0);
    int found = 0;
    ir_shape wide = TU_SHAPE(1, C, H, 2 * W);
    for (int i = 0; i < l.n; i++) {
        const ir_graph *m = l.items[i].graph;
        int cn = find_op(m, IR_OP_Conv);
        if (l.items[i].cls != PET_MC_BATCH_TO_WIDTH || cn < 0 ||
            !ir_shape_eq(&m->values[m->nodes[cn].in[0]].shape, &wide))
            continue;
        pet_result r = verify(g, m);
        assert_false(r.rejected);
        const pet_output_report *o = &r.outputs[0];
        /* the seam: image 0's last column and image 1's first; nothing else */
        bool seam = o->n_failed > 0;
        for (int64_t k = 0; k < o->n_failed && seam; k++) {
            const pet_box *b = &o->failed[k].box;
            seam = (b->lo[0] == 0 && b->hi[3] == W && b->lo[3] == W - 1) ||
                   (b->lo[0] == 1 && b->lo[3] == 0 && b->hi[3] == 1);
        }
        if (seam) found++;
        pet_result_free(&r);
    }
    assert_true(found >= 1);
    pet_mutant_list_free(&l);
    ir_graph_free(g);
}

/* Figure 3: a 3x3 conv with dilation 2 is a regular conv on the input with its 2x2 phases moved
 * into the batch, and back: equivalent everywhere. */
static void test_gen_figure3(void **state) {
    (void)state;
    const int64_t C = 3, H = 8, W = 8;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(1, C, H, W), false),
        w = input(g, "w", TU_SHAPE(C, C, 3, 3), true);
    pb_output(g, conv(g, x, w, -1, 2, 2), "y");
    pet_mutant_list l = generate(g, 3);
    check_mutants(g, &l);
    assert_true(count_class(&l, PET_MC_DILATED_TO_REGULAR) > 0);
    int equivalent = 0;
    ir_shape phases = TU_SHAPE(4, C, H / 2, W / 2);
    for (int i = 0; i < l.n; i++) {
        const ir_graph *m = l.items[i].graph;
        int cn = find_op(m, IR_OP_Conv);
        if (l.items[i].cls != PET_MC_DILATED_TO_REGULAR ||
            !ir_shape_eq(&m->values[m->nodes[cn].in[0]].shape, &phases))
            continue;
        const int64_t *dil;
        int nd = ir_attr_ints(&m->nodes[cn], "dilations", &dil);
        for (int k = 0; k < nd; k++) assert_int_equal(dil[k], 1);
        pet_result r = verify(g, m);
        equivalent += r.equivalent;
        pet_result_free(&r);
    }
    assert_true(equivalent >= 1);
    pet_mutant_list_free(&l);
    ir_graph_free(g);
}

/* Two 1x1 convs with biases on one input, and two matmuls on one input: one op on the
 * concatenated weights (and biases), its output split; the verifier finds it equivalent. */
static void test_gen_merged_parallel(void **state) {
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        ir_graph *g = ir_graph_new();
        if (kind == 0) {
            int x = input(g, "x", TU_SHAPE(1, 4, 5, 5), false);
            int w1 = input(g, "w1", TU_SHAPE(6, 4, 1, 1), true),
                b1 = input(g, "b1", TU_SHAPE(6), true);
            int w2 = input(g, "w2", TU_SHAPE(5, 4, 1, 1), true),
                b2 = input(g, "b2", TU_SHAPE(5), true);
            pb_output(g, conv(g, x, w1, b1, 0, 1), "y1");
            pb_output(g, conv(g, x, w2, b2, 0, 1), "y2");
        } else {
            int a = input(g, "a", TU_SHAPE(2, 8, 16), false);
            int b1 = input(g, "b1", TU_SHAPE(16, 12), true),
                b2 = input(g, "b2", TU_SHAPE(16, 10), true);
            pb_output(g, pb_op(g, IR_OP_MatMul, 2, (int[]){a, b1}, 0, NULL), "y1");
            pb_output(g, pb_op(g, IR_OP_MatMul, 2, (int[]){a, b2}, 0, NULL), "y2");
        }
        pet_mutant_list l = generate(g, 3);
        check_mutants(g, &l);
        assert_true(count_class(&l, PET_MC_MERGED_PARALLEL) > 0);
        ir_op_kind k = kind == 0 ? IR_OP_Conv : IR_OP_MatMul;
        int equivalent = 0;
        for (int i = 0; i < l.n; i++) {
            const ir_graph *m = l.items[i].graph;
            if (l.items[i].cls != PET_MC_MERGED_PARALLEL) continue;
            assert_int_equal(pb_count_op(m, k), 1);
            pet_result r = verify(g, m);
            if (r.equivalent) {
                equivalent++;
                /* the biases went with their weights: the Conv adds the concat of both, in
                 * the order of the weights' concat */
                if (kind == 0) {
                    const ir_node *cn = &m->nodes[find_op(m, IR_OP_Conv)];
                    assert_int_equal(cn->n_in, 3);
                    const ir_value *wv = &m->values[cn->in[1]], *bv = &m->values[cn->in[2]];
                    assert_int_equal(bv->shape.dims[0], 11);
                    const ir_node *wc = &m->nodes[wv->producer], *bc = &m->nodes[bv->producer];
                    assert_int_equal(wc->op, IR_OP_Concat);
                    assert_int_equal(bc->op, IR_OP_Concat);
                    for (int q = 0; q < 2; q++)
                        assert_int_equal(m->values[wc->in[q]].name[1],
                                         m->values[bc->in[q]].name[1]);
                }
            }
            pet_result_free(&r);
        }
        assert_true(equivalent >= 1);
        pet_mutant_list_free(&l);
        ir_graph_free(g);
    }
}

/* A.B = (B^T.A^T)^T: found at depth 4 as transposes around a MatMul of swapped operands. */
static void test_gen_matmul_transpose(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int a = input(g, "a", TU_SHAPE(8, 16), false), b = input(g, "b", TU_SHAPE(16, 12), true);
    pb_output(g, pb_op(g, IR_OP_MatMul, 2, (int[]){a, b}, 0, NULL), "y");
    pet_mutant_list l = generate(g, 4);
    check_mutants(g, &l);
    assert_true(count_class(&l, PET_MC_MATMUL_TRANSPOSE) > 0);
    assert_true(count_class(&l, PET_MC_LAYOUT) > 0);
    int found = 0;
    for (int i = 0; i < l.n; i++) {
        const ir_graph *m = l.items[i].graph;
        int mm = find_op(m, IR_OP_MatMul);
        if (l.items[i].cls != PET_MC_MATMUL_TRANSPOSE || pb_count_op(m, IR_OP_Transpose) != 3)
            continue;
        /* the product reads B^T [12, 16] on the left */
        if (m->values[m->nodes[mm].in[0]].shape.dims[0] != 12) continue;
        pet_result r = verify(g, m);
        found += r.equivalent;
        pet_result_free(&r);
    }
    assert_true(found >= 1);
    pet_mutant_list_free(&l);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- pruning */

/* A 2-op program (conv then a residual add) to depth 4: seconds, with the counters reported;
 * each rule fires; no two mutants alike. */
static void test_gen_pruning(void **state) {
    (void)state;
    ir_graph *g = ir_graph_new();
    int x = input(g, "x", TU_SHAPE(2, 4, 6, 6), false),
        w = input(g, "w", TU_SHAPE(4, 4, 3, 3), true);
    int y = conv(g, x, w, -1, 1, 1);
    pb_output(g, pb_op(g, IR_OP_Add, 2, (int[]){y, x}, 0, NULL), "z");
    double t0 = ir_now_seconds();
    pet_mutant_list l = generate(g, 4);
    double dt = ir_now_seconds() - t0;
    const pet_gen_stats *s = &l.stats;
    print_message("depth 4: %.2f s, %lld states, %lld ops tried, pruned: %lld order, %lld visited, "
                  "%lld repeat, %lld inverse, %lld shape, %lld size, %lld degree, %lld dangling; "
                  "%lld complete, %lld mutants, %lld duplicates\n",
                  dt, (long long)s->states, (long long)s->candidates, (long long)s->pruned_order,
                  (long long)s->pruned_visited, (long long)s->pruned_repeat,
                  (long long)s->pruned_inverse, (long long)s->pruned_shape,
                  (long long)s->pruned_size, (long long)s->pruned_degree,
                  (long long)s->pruned_dangling, (long long)s->complete, (long long)s->mutants,
                  (long long)s->duplicates);
    /* about 1 s in a Debug build; the bound leaves room for sanitizers and a loaded machine */
    assert_true(dt < 30.0);
    assert_false(s->truncated);
    assert_true(s->states > 0 && s->pruned_order > 0 && s->pruned_repeat > 0 &&
                s->pruned_inverse > 0 && s->pruned_shape > 0 && s->pruned_degree > 0 &&
                s->pruned_dangling > 0);
    assert_int_equal(s->mutants, l.n);
    assert_true(l.n > 0);
    check_mutants(g, &l);
    /* a smaller depth finds a subset of them, in fewer states */
    pet_mutant_list l3 = generate(g, 3);
    assert_true(l3.n < l.n && l3.stats.states < s->states);
    for (int i = 0; i < l3.n; i++) {
        bool in4 = false;
        for (int j = 0; j < l.n && !in4; j++) in4 = l.items[j].hash == l3.items[i].hash;
        assert_true(in4);
    }
    /* the caps stop it */
    pet_gen_opts o = {.depth = 4, .max_states = 100};
    pet_mutant_list lc = {0};
    ir_diag d = {{0}};
    assert_int_equal(pet_gen_mutants(g, &o, &lc, &d), IR_OK);
    assert_true(lc.stats.truncated && lc.stats.states <= 101);
    pet_mutant_list_free(&lc);
    pet_mutant_list_free(&l3);
    pet_mutant_list_free(&l);
    ir_graph_free(g);
}

/* ---------------------------------------------------------------- labels and hash */

/* Hand-built mutants get the labels of the rules in pet-gen.h. */
static void test_classify(void **state) {
    (void)state;
    /* batch-to-height: [2,C,H,W] -> [1,C,2H,W] by reshape/transpose, conv, and back */
    ir_graph *o = ir_graph_new();
    int x = input(o, "x", TU_SHAPE(2, 3, 4, 4), false),
        w = input(o, "w", TU_SHAPE(3, 3, 3, 3), true);
    pb_output(o, conv(o, x, w, -1, 1, 1), "y");
    ir_graph *m = ir_graph_new();
    x = input(m, "x", TU_SHAPE(2, 3, 4, 4), false), w = input(m, "w", TU_SHAPE(3, 3, 3, 3), true);
    int t = pb_transpose(m, x, 4, (int64_t[]){1, 0, 2, 3});
    t = pb_reshape(m, t, 4, (int64_t[]){1, 3, 8, 4});
    t = conv(m, t, w, -1, 1, 1);
    t = pb_reshape(m, t, 4, (int64_t[]){3, 2, 4, 4});
    pb_output(m, pb_transpose(m, t, 4, (int64_t[]){1, 0, 2, 3}), "y");
    assert_int_equal(pet_mutant_classify(o, m), PET_MC_BATCH_TO_HEIGHT);
    /* the same data layout with the conv on the original input is only "layout" */
    ir_graph *m2 = ir_graph_new();
    x = input(m2, "x", TU_SHAPE(2, 3, 4, 4), false), w = input(m2, "w", TU_SHAPE(3, 3, 3, 3), true);
    t = conv(m2, x, w, -1, 1, 1);
    pb_output(m2,
              pb_transpose(m2, pb_transpose(m2, t, 4, (int64_t[]){0, 1, 3, 2}), 4,
                           (int64_t[]){0, 1, 3, 2}),
              "y");
    assert_int_equal(pet_mutant_classify(o, m2), PET_MC_LAYOUT);
    ir_graph_free(m2);
    /* a conv by itself, changed in its pads only: other */
    m2 = ir_graph_new();
    x = input(m2, "x", TU_SHAPE(2, 3, 4, 4), false), w = input(m2, "w", TU_SHAPE(3, 3, 3, 3), true);
    pb_output(m2, conv(m2, x, w, -1, 0, 1), "y");
    assert_int_equal(pet_mutant_classify(o, m2), PET_MC_OTHER);
    assert_true(pet_gen_graph_hash(o) != pet_gen_graph_hash(m2));
    ir_graph_free(m2);
    /* spelled-out default strides (and no dilations) hash like the original; renaming the node
     * changes nothing; another pad does */
    m2 = ir_graph_new();
    x = input(m2, "x", TU_SHAPE(2, 3, 4, 4), false), w = input(m2, "w", TU_SHAPE(3, 3, 3, 3), true);
    int64_t pads[4] = {1, 1, 1, 1}, s1[2] = {1, 1};
    pb_output(m2,
              pb_op(m2, IR_OP_Conv, 2, (int[]){x, w}, 2,
                    (ir_attr[]){tu_attr_ints("strides", 2, s1), tu_attr_ints("pads", 4, pads)}),
              "y");
    assert_true(pet_gen_graph_hash(o) == pet_gen_graph_hash(m2));
    m2->nodes[0].name = "renamed";
    assert_true(pet_gen_graph_hash(o) == pet_gen_graph_hash(m2));
    m2->nodes[0].attrs[1].ints[3] = 0;
    assert_true(pet_gen_graph_hash(o) != pet_gen_graph_hash(m2));
    ir_graph_free(m2);
    ir_graph_free(m);
    ir_graph_free(o);
    for (int c = 0; c < PET_MC_COUNT; c++) assert_string_not_equal(pet_mutant_class_name(c), "?");
    assert_string_equal(pet_mutant_class_name(PET_MC_COUNT), "?");
}

/* ---------------------------------------------------------------- rounds, subsets, top-K */

static int judged;
static double judge_drop_all(void *ctx, const ir_graph *orig, const ir_graph *cand, double cost) {
    (void)ctx, (void)orig, (void)cand, (void)cost;
    judged++;
    return INFINITY;
}

/* A grouped sub-program of Inception (more than d ops): mutated through subsets, spliced back:
 * every result is a mutant of the whole program; at most K, cheapest first; the judge sees
 * every candidate and can drop them all. */
static void test_gen_optimize(void **state) {
    (void)state;
    ir_graph *g = load_fixture("tests/fixtures/numeric/inception_small/model.onnx", NULL);
    pet_split *s = split(g);
    const pet_subprog *big = NULL;
    for (int p = 0; p < s->n && !big; p++)
        if (s->progs[p].n_nodes > 4 && s->progs[p].n_parts > 1) big = &s->progs[p];
    assert_non_null(big);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *prog = pet_subprog_extract(g, big, &st, &d);
    assert_non_null(prog);
    prof_model *cost = tu_analytic_cost();
    pet_gen_opts o = {.depth = 3, .rounds = 2, .top_k = 5, .max_subsets = 3, .cost = cost};
    pet_mutant_list l = {0};
    assert_int_equal(pet_gen_optimize(prog, &o, &l, &d), IR_OK);
    print_message("optimize: %d kept of %lld mutants, %lld enumerations, %.2f s, original %.3g s, "
                  "best %.3g s (%s)\n",
                  l.n, (long long)l.stats.mutants, (long long)l.stats.enumerations, l.stats.seconds,
                  l.orig_cost, l.n ? l.items[0].cost : 0.0,
                  l.n ? pet_mutant_class_name(l.items[0].cls) : "-");
    assert_true(l.n > 0 && l.n <= 5);
    assert_true(l.stats.enumerations > 1);
    assert_true(l.orig_cost > 0 && fabs(l.orig_cost - pet_gen_cost(cost, prog)) < 1e-15);
    check_mutants(prog, &l);
    for (int i = 0; i < l.n; i++) {
        assert_true(l.items[i].round >= 1 && l.items[i].round <= 2);
        assert_true(fabs(l.items[i].cost - pet_gen_cost(cost, l.items[i].graph)) < 1e-15);
        if (i) assert_true(l.items[i - 1].cost <= l.items[i].cost);
    }
    pet_mutant_list_free(&l);
    o.rounds = 1;
    o.judge = judge_drop_all;
    judged = 0;
    assert_int_equal(pet_gen_optimize(prog, &o, &l, &d), IR_OK);
    assert_int_equal(l.n, 0);
    assert_true(judged > 0 && l.stats.rejected == judged);
    pet_mutant_list_free(&l);
    prof_close(cost);
    ir_graph_free(prog);
    pet_split_free(s);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_fixtures),      cmocka_unit_test(test_split_convex_and_groups),
        cmocka_unit_test(test_gen_figure1),         cmocka_unit_test(test_gen_figure3),
        cmocka_unit_test(test_gen_merged_parallel), cmocka_unit_test(test_gen_matmul_transpose),
        cmocka_unit_test(test_gen_pruning),         cmocka_unit_test(test_classify),
        cmocka_unit_test(test_gen_optimize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
