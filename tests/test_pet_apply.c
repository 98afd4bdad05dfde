/* test_pet_apply.c - pet_apply (rules/pet/pet-apply.c) on a real model: ResNet (the bundled
 * resnet_small fixture) split into its multilinear sub-programs (pet_split_graph). Candidates are
 * built by hand for one sub-program:
 *  - the sub-program itself, re-extracted (the trivial replacement);
 *  - a partially equivalent mutant: one 3x3 conv (stride 1, pads 1) computed without padding and
 *    zero-padded after, wrong on its whole border (bias included), corrected by pet_correct.
 * Applying either gives a graph that validates, is topological, runs to PyTorch's output and
 * passes against the original graph's float64 run (test-check.h; the uncorrected mutant fails), and
 * passes `magpie verify` after an ONNX round trip; the new nodes have fresh ids, touched lists the
 * removed ids then the added ones, every other node keeps its id, and the original graph is left
 * unchanged. Applying to a graph where a node of the sub-program is missing (the candidate already
 * applied) is IR_ERR_INVALID. */
#include "test-check.h"

#include "pet-opt.h"
#include "pet-post.h"
#include "rt.h"
#include "rules.h"

static const char *const MODEL = "tests/fixtures/numeric/resnet_small/model.onnx";
static const char *const INPUT = "tests/fixtures/numeric/resnet_small/input_0.npy";

static ir_graph *load(void) {
    char path[1024];
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *g = ir_onnx_load(tu_src_path(MODEL, path, sizeof path), NULL, &st, &d);
    if (!g) fail_msg("load: %s", d.msg);
    return g;
}

/* The model's output on the fixture's input. */
static ir_tensor run(const ir_graph *g) {
    char path[1024];
    ir_dtype t;
    ir_shape s;
    ir_blob *b;
    ir_diag d = {{0}};
    if (ir_npy_read(tu_src_path(INPUT, path, sizeof path), &t, &s, &b, &d) != IR_OK)
        fail_msg("npy: %s", d.msg);
    rt_binding bind = {.value = g->inputs[0], .dtype = t, .shape = s, .data = ir_blob_data(b)};
    rt_result r;
    rt_options o = {.seed = 1};
    if (rt_run(g, &bind, 1, &o, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
    ir_blob_unref(b);
    ir_tensor out = r.outputs[0];
    r.outputs[0].data = NULL; /* kept by the caller */
    rt_result_free(&r);
    return out;
}

/* The largest sub-program of split holding a Conv with a 3x3 kernel, stride 1, pads 1 and a
 * bias (ResNet's residual block: that conv, the strided 1x1 downsample conv and the Add); the
 * conv's position in the sub-program's node list in *ci. */
static int pick_subprog(const ir_graph *g, const pet_split *sp, int *ci) {
    int best = -1;
    for (int i = 0; i < sp->n; i++)
        for (int k = 0; k < sp->progs[i].n_nodes; k++) {
            const ir_node *n = &g->nodes[sp->progs[i].nodes[k]];
            const int64_t *p, *s;
            if (n->op != IR_OP_Conv || ir_attr_ints(n, "pads", &p) != 4) continue;
            int ns = ir_attr_ints(n, "strides", &s);
            if (p[0] != 1 || p[1] != 1 || p[2] != 1 || p[3] != 1 ||
                (ns == 2 && (s[0] != 1 || s[1] != 1)))
                continue;
            if (g->values[n->in[1]].shape.dims[2] != 3 || n->n_in < 3) continue;
            if (best < 0 || sp->progs[i].n_nodes > sp->progs[best].n_nodes) {
                best = i;
                *ci = k;
            }
        }
    if (best < 0) fail_msg("no 3x3 stride-1 conv with a bias in any sub-program");
    return best;
}

/* prog with its conv number ci computed without padding, then zero-padded by 1. */
static ir_graph *valid_pad_mutant(const ir_graph *prog, int ci) {
    ir_graph *m = ir_graph_clone(prog);
    int found = ci; /* pet_subprog_extract copies the nodes in the sub-program's order */
    ir_node *n = &m->nodes[found];
    assert_int_equal(n->op, IR_OP_Conv);
    ir_attr *pads = (ir_attr *)ir_attr_find(n, "pads");
    pads->ints = ir_graph_alloc(m, sizeof(int64_t) * 4); /* zeroed: pads 0 */
    int y = n->out[0];
    char nm[256];
    snprintf(nm, sizeof nm, "%s.valid", m->values[y].name);
    int v = ir_graph_add_value(m, nm, IR_F32, NULL);
    n = &m->nodes[found];
    n->out[0] = v;
    m->values[v].producer = found;
    ir_diag d = {{0}};
    assert_int_equal(ir_node_infer(m, n, &d), IR_OK);
    int64_t pv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    ir_shape ps = TU_SHAPE(8);
    int pc = ir_graph_add_value(m, "mutant.pads", IR_I64, &ps);
    m->values[pc].blob = ir_blob_new(sizeof pv);
    memcpy(ir_blob_data(m->values[pc].blob), pv, sizeof pv);
    m->values[pc].flags = IR_VF_CONST;
    int pn = ir_graph_add_node(m, IR_OP_Pad, "mutant.pad", 2, (int[]){v, pc}, 1, &y, 0, NULL);
    assert_int_equal(ir_node_infer(m, &m->nodes[pn], &d), IR_OK);
    assert_int_equal(ir_graph_toposort(m, &d), IR_OK);
    return m;
}

static bool has_id(const ir_graph *g, uint32_t id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].id == id) return true;
    return false;
}

/* Applies candidate k of t to g and checks everything the header promises. */
static ir_graph *apply_checked(const ir_graph *g, const pet_table *t, int k) {
    const pet_subprog *sp = &t->split->progs[t->c[k].subprog];
    uint64_t hash = ir_graph_hash(g);
    int n_nodes = g->n_nodes, n_values = g->n_values;
    uint32_t *touched = malloc(sizeof(uint32_t) * RW_MAX_FISSION_TOUCHED);
    int nt = -1;
    ir_status st;
    ir_diag d = {{0}};
    ir_graph *h = pet_apply(g, t, k, touched, &nt, &st, &d);
    if (!h) fail_msg("pet_apply: %s", d.msg);
    assert_int_equal(st, IR_OK);
    /* g unchanged */
    assert_true(ir_graph_hash(g) == hash);
    assert_int_equal(g->n_nodes, n_nodes);
    assert_int_equal(g->n_values, n_values);
    assert_int_equal(ir_graph_validate(h, &d), IR_OK);
    /* touched: the removed ids, then fresh ones for every node of h that g lacks */
    const ir_graph *r = t->c[k].replacement;
    int added = nt - sp->n_nodes;
    assert_true(added >= r->n_nodes);
    for (int i = 0; i < sp->n_nodes; i++) {
        assert_true(touched[i] == sp->node_ids[i]);
        assert_false(has_id(h, touched[i]));
    }
    for (int i = sp->n_nodes; i < nt; i++) {
        assert_true(touched[i] >= g->next_node_id);
        assert_true(has_id(h, touched[i]));
        for (int j = sp->n_nodes; j < i; j++) assert_true(touched[j] != touched[i]);
    }
    assert_int_equal(h->n_nodes, g->n_nodes - sp->n_nodes + added);
    assert_true(h->next_node_id >= g->next_node_id + (uint32_t)added);
    for (int i = 0; i < h->n_nodes; i++) { /* every other node kept its id and name */
        const ir_node *n = &h->nodes[i];
        if (n->id >= g->next_node_id) {
            assert_non_null(strstr(n->name, ".pet"));
            continue;
        }
        bool found = false;
        for (int j = 0; j < g->n_nodes && !found; j++)
            found = g->nodes[j].id == n->id && !strcmp(g->nodes[j].name, n->name);
        assert_true(found);
    }
    /* value names stay unique */
    for (int a = 0; a < h->n_values; a++)
        for (int b = a + 1; b < h->n_values; b++)
            if (!strcmp(h->values[a].name, h->values[b].name))
                fail_msg("two values named '%s'", h->values[a].name);
    free(touched);
    return h;
}

/* h's run on the fixture's input judged against g's float64 run (test-check.h): whether every
 * output passes; must_pass fails the test, naming the output, when one does not. */
static bool judged(const ir_graph *g, const ir_graph *h, bool must_pass) {
    char path[1024];
    ir_dtype t;
    ir_shape s;
    ir_blob *b;
    ir_diag d = {{0}};
    if (ir_npy_read(tu_src_path(INPUT, path, sizeof path), &t, &s, &b, &d) != IR_OK)
        fail_msg("npy: %s", d.msg);
    rt_binding bg = {.value = g->inputs[0], .dtype = t, .shape = s, .data = ir_blob_data(b)};
    rt_binding bh = bg;
    bh.value = h->inputs[0];
    rt_options o = {.seed = 1};
    tu_ref ref;
    tu_ref_run(g, &bg, 1, &o, &ref, "original");
    rt_result r;
    if (rt_run(h, &bh, 1, &o, &r, &d) != IR_OK) fail_msg("run: %s", d.msg);
    static rt_out_check res[TU_MAX_CHECK];
    bool ok = must_pass ? tu_expect_close(&ref, h, &r, "applied") <= 1
                        : tu_check(&ref, h, &r, NULL, res, NULL);
    rt_result_free(&r);
    tu_ref_free(&ref);
    ir_blob_unref(b);
    return ok;
}

static void test_apply_resnet(void **state) {
    (void)state;
    ir_graph *g = load();
    pet_split *split;
    ir_diag d = {{0}};
    ir_status st;
    assert_int_equal(pet_split_graph(g, NULL, &split, &d), IR_OK);
    int ci, si = pick_subprog(g, split, &ci);
    const pet_subprog *sp = &split->progs[si];
    assert_int_equal(sp->n_nodes, 3); /* conv, downsample conv, Add */
    ir_graph *prog = pet_subprog_extract(g, sp, &st, &d);
    if (!prog) fail_msg("extract: %s", d.msg);

    /* candidate 0: the sub-program itself; candidate 1: the corrected mutant */
    ir_graph *m = valid_pad_mutant(prog, ci);
    pet_result r;
    pet_options o = {.seed = 3, .threads = 2};
    if (pet_verify(prog, m, &o, &r, &d) != IR_OK) fail_msg("verify: %s", d.msg);
    assert_false(r.equivalent);
    assert_false(r.rejected);
    int fused;
    ir_graph *rep = pet_correct(prog, m, &r, &fused, &st, &d);
    if (!rep) fail_msg("correct: %s", d.msg);
    pet_result_free(&r);
    assert_true(pet_verify_replacement(prog, rep, &o, &r, &d) == IR_OK && r.equivalent);
    pet_result_free(&r);

    pet_table t = {.split = split, .n = 3};
    pet_candidate c[3] = {{.subprog = si, .replacement = ir_graph_clone(prog)},
                          {.subprog = si, .replacement = rep, .n_fused = fused},
                          {.subprog = si, .replacement = m}};
    t.c = c;
    ir_graph *h0 = apply_checked(g, &t, 0), *h1 = apply_checked(g, &t, 1);
    /* the mutant without its corrections changes the model's output: the check can tell */
    {
        ir_graph *h2 = apply_checked(g, &t, 2);
        assert_false(judged(g, h2, false));
        ir_graph_free(h2);
    }
    assert_true(ir_graph_hash(h0) == ir_graph_hash(g)); /* the same structure again */
    int patches = 0;
    for (int i = 0; i < h1->n_nodes; i++) patches += h1->nodes[i].op == IR_OP_PetPatch;
    assert_true(patches >= 1);
    judged(g, h0, true);
    judged(g, h1, true);
    /* and PyTorch's output */
    {
        char path[1024];
        ir_dtype dt;
        ir_shape s;
        ir_blob *b;
        assert_int_equal(ir_npy_read(tu_src_path("tests/fixtures/numeric/resnet_small/output_0.npy",
                                                 path, sizeof path),
                                     &dt, &s, &b, &d),
                         IR_OK);
        ir_tensor y = run(h1);
        assert_true(tu_rel_err_f32(y.data, ir_blob_data(b), ir_shape_numel(&s)) < 1e-4);
        free(y.data);
        ir_blob_unref(b);
    }
    /* exported and checked by `magpie verify` against the model */
    char out[64], args[1400], src[1024];
    snprintf(out, sizeof out, "/tmp/magpie-pet-apply-%d.onnx", (int)getpid());
    assert_int_equal(ir_onnx_save(h1, out, &d), IR_OK);
    snprintf(args, sizeof args, "verify %s %s -i %s --json", tu_src_path(MODEL, src, sizeof src),
             out, INPUT);
    tu_proc p;
    tu_magpie(&p, args);
    unlink(out);
    if (p.rc != 0) fail_msg("magpie verify: rc %d: %s %s", p.rc, p.out, p.err);

    /* the sub-program's nodes are gone from h1: applying again is refused */
    ir_graph *none = pet_apply(h1, &t, 1, NULL, NULL, &st, &d);
    assert_null(none);
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "not in the graph"));

    ir_graph_free(h0);
    ir_graph_free(h1);
    ir_graph_free(c[0].replacement);
    ir_graph_free(rep);
    ir_graph_free(m);
    ir_graph_free(prog);
    pet_split_free(split);
    ir_graph_free(g);
}

/* A replacement whose output name the sub-program does not produce, or whose input has another
 * shape, is refused (IR_ERR_INVALID), g untouched. */
static void test_apply_mismatch(void **state) {
    (void)state;
    ir_graph *g = load();
    pet_split *split;
    ir_diag d = {{0}};
    ir_status st;
    assert_int_equal(pet_split_graph(g, NULL, &split, &d), IR_OK);
    int ci, si = pick_subprog(g, split, &ci);
    ir_graph *prog = pet_subprog_extract(g, &split->progs[si], &st, &d);
    ir_graph *bad = ir_graph_clone(prog);
    bad->values[bad->outputs[0]].name = "no.such.value";
    pet_candidate c = {.subprog = si, .replacement = bad};
    pet_table t = {.split = split, .n = 1, .c = &c};
    assert_null(pet_apply(g, &t, 0, NULL, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "no.such.value"));
    ir_graph_free(bad);
    bad = ir_graph_clone(prog);
    bad->values[bad->inputs[0]].shape.dims[0] += 1;
    c.replacement = bad;
    assert_null(pet_apply(g, &t, 0, NULL, NULL, &st, &d));
    assert_int_equal(st, IR_ERR_INVALID);
    ir_graph_free(bad);
    ir_graph_free(prog);
    pet_split_free(split);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_resnet),
        cmocka_unit_test(test_apply_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
