/* pet-verify.c - PET §5.2 step 2: randomized tests of every pair of overlapping boxes of an
 * original program and its mutant, over Z_p (pet.h "Verification").
 *
 * The boxes of an output in the two programs are both grids (products of intervals), so the
 * overlapping pairs are exactly the cells of the grid cut by the union of both programs' points:
 * each cell lies in one box of each program, and no pair without overlap is ever visited.
 *
 * Positions (Theorem 1): the cell's first corner v0, and v0 + e_j for every dim j where the cell
 * is at least 2 wide. Where it is 1 wide, v0 + e_j lies outside the cell, in a neighbouring box
 * where the programs may legitimately differ (testing it could fail a good cell); and no test is
 * needed in that direction, since every position of the cell is v0 + sum_j k_j e_j with k_j = 0
 * for such a j: the theorem's induction along e_j has no step to take.
 *
 * All cells share one set of t random input sets (§5.2 "caching"), and the back-end evaluates
 * each program once per input set for all positions at once; comparing the residues is then one
 * box-test per (cell, position, input set). */
#include "pet-impl.h"

#include <math.h>
#include <time.h>

void pet_result_free(pet_result *r) {
    if (!r) return;
    for (int k = 0; k < r->n_outputs && r->outputs; k++) {
        free((char *)r->outputs[k].name);
        free(r->outputs[k].failed);
    }
    free(r->outputs);
    memset(r, 0, sizeof *r);
}

/* The grid cut by the points of both a and b (same rank and dims). */
static bool union_splits(const pet_splits *a, const pet_splits *b, pet_splits *u) {
    memset(u, 0, sizeof *u);
    u->rank = a->rank;
    for (int i = 0; i < a->rank; i++) {
        u->dims[i] = a->dims[i];
        u->at[i] = malloc(sizeof(int64_t) * (size_t)(a->n[i] + b->n[i] + 1));
        if (!u->at[i]) return false;
        int x = 0, y = 0, n = 0;
        while (x < a->n[i] || y < b->n[i]) {
            int64_t v;
            if (y >= b->n[i] || (x < a->n[i] && a->at[i][x] < b->at[i][y]))
                v = a->at[i][x++];
            else if (x >= a->n[i] || b->at[i][y] < a->at[i][x])
                v = b->at[i][y++];
            else
                v = a->at[i][x++], y++;
            u->at[i][n++] = v;
        }
        u->n[i] = n;
    }
    return true;
}

static void splits_clear(pet_splits *s) {
    for (int i = 0; i < IR_MAX_RANK; i++) free(s->at[i]);
    memset(s, 0, sizeof *s);
}

/* One cell of one output and where its positions are in the probe list. */
typedef struct cell {
    int output;
    int npos;
    int64_t id;    /* its number in the output's refined grid */
    int64_t probe; /* index of its first position */
} cell;

/* A growable array of T (for probes and cells). */
#define GROW(arr, n, cap, fail)                                                                    \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            int64_t nc_ = (cap) ? 2 * (cap) : 256;                                                 \
            void *na_ = realloc((arr), sizeof *(arr) * (size_t)nc_);                               \
            if (!na_) goto fail;                                                                   \
            (arr) = na_;                                                                           \
            (cap) = nc_;                                                                           \
        }                                                                                          \
    } while (0)

ir_status pet_verify(const ir_graph *orig, const ir_graph *mutant, const pet_options *o,
                     pet_result *r, ir_diag *d) {
    double t0 = ir_now_seconds();
    memset(r, 0, sizeof *r);
    pet_options opt = o ? *o : (pet_options){0};
    if (opt.tests <= 0) opt.tests = PET_DEFAULT_TESTS;
    if (opt.max_cells <= 0) opt.max_cells = PET_DEFAULT_MAX_CELLS;
    const pet_backend *be = opt.backend ? opt.backend : pet_cpu_backend();
    pet_prog *po = NULL, *pm = NULL;
    pet_splits *so = NULL, *sm = NULL, *grid = NULL;
    pet_probe *pr_o = NULL, *pr_m = NULL;
    cell *cells = NULL;
    uint32_t *vo = NULL, *vm = NULL;
    int *mout = NULL;
    void *ctx = opt.backend_ctx;
    bool own_ctx = false;
    int64_t n_probes = 0, cap_probes = 0, n_cells = 0, cap_cells = 0;
    ir_status st;

    if ((st = pet_prog_compile(orig, &po, d)) != IR_OK) {
        ir_diag_prefix(d, "original");
        goto out;
    }
    if ((st = pet_prog_compile(mutant, &pm, d)) != IR_OK) {
        ir_diag_prefix(d, "mutant");
        goto out;
    }
    /* outputs and variables must match by name and shape */
    if (po->n_outputs != pm->n_outputs) {
        st = ir_diag_set(d, IR_ERR_INVALID, "PET: the original has %d outputs, the mutant %d",
                         po->n_outputs, pm->n_outputs);
        goto out;
    }
    mout = calloc((size_t)po->n_outputs + 1, sizeof *mout);
    if (!mout) goto oom;
    for (int k = 0; k < po->n_outputs; k++) {
        const char *name = orig->values[orig->outputs[k]].name;
        mout[k] = -1;
        for (int j = 0; j < mutant->n_outputs; j++)
            if (strcmp(mutant->values[mutant->outputs[j]].name, name) == 0) mout[k] = j;
        if (mout[k] < 0 || !ir_shape_eq(&po->values[po->outputs[k]].shape,
                                        &pm->values[pm->outputs[mout[k]]].shape)) {
            st = ir_diag_set(d, IR_ERR_INVALID,
                             "PET: output '%s' of the original has no output of that name and "
                             "shape in the mutant",
                             name);
            goto out;
        }
    }
    for (int i = 0; i < pm->n_vars; i++) {
        const pet_value *mv = &pm->values[pm->vars[i]];
        int k = pet_prog_find_var(po, mv->name);
        if (k < 0 || !ir_shape_eq(&po->values[po->vars[k]].shape, &mv->shape)) {
            st = ir_diag_set(d, IR_ERR_INVALID,
                             "PET: the mutant reads variable '%s', which the original %s", mv->name,
                             k < 0 ? "does not have" : "has with another shape");
            goto out;
        }
    }
    if ((st = pet_prog_boxes(po, &so, d)) != IR_OK || (st = pet_prog_boxes(pm, &sm, d)) != IR_OK)
        goto out;

    /* cells and their positions */
    r->n_outputs = po->n_outputs;
    r->outputs = calloc((size_t)po->n_outputs + 1, sizeof *r->outputs);
    grid = calloc((size_t)po->n_outputs + 1, sizeof *grid);
    if (!r->outputs || !grid) goto oom;
    for (int k = 0; k < po->n_outputs; k++) {
        const pet_splits *a = &so[po->outputs[k]], *b = &sm[pm->outputs[mout[k]]];
        pet_output_report *rep = &r->outputs[k];
        const char *name = orig->values[orig->outputs[k]].name;
        rep->name = strdup(name);
        if (!rep->name || !union_splits(a, b, &grid[k])) goto oom;
        rep->shape = po->values[po->outputs[k]].shape;
        rep->orig_boxes = pet_splits_nboxes(a);
        rep->mutant_boxes = pet_splits_nboxes(b);
        rep->cells = pet_splits_nboxes(&grid[k]);
        if (rep->cells > opt.max_cells) {
            st = ir_diag_set(d, IR_ERR_UNSUPPORTED,
                             "PET: output '%s' has %lld cells to test, above the limit %lld", name,
                             (long long)rep->cells, (long long)opt.max_cells);
            goto out;
        }
        int64_t ost[IR_MAX_RANK];
        pet_strides(&rep->shape, ost);
        for (int64_t ci = 0; ci < rep->cells; ci++) {
            pet_box bx;
            pet_splits_box(&grid[k], ci, &bx);
            GROW(cells, n_cells, cap_cells, oom);
            cell *c = &cells[n_cells++];
            c->output = k;
            c->id = ci;
            c->probe = n_probes;
            c->npos = 0;
            int64_t e0 = 0;
            for (int i = 0; i < bx.rank; i++) e0 += bx.lo[i] * ost[i];
            for (int j = -1; j < bx.rank; j++) {
                if (j >= 0 && bx.hi[j] - bx.lo[j] < 2) continue; /* see the file's comment */
                GROW(pr_o, n_probes, cap_probes, oom);
                pr_o[n_probes].output = k;
                pr_o[n_probes].index = e0 + (j >= 0 ? ost[j] : 0);
                n_probes++;
                c->npos++;
            }
        }
    }
    pr_m = malloc(sizeof *pr_m * (size_t)(n_probes + 1));
    vo = malloc(sizeof *vo * (size_t)(n_probes * opt.tests + 1));
    vm = malloc(sizeof *vm * (size_t)(n_probes * opt.tests + 1));
    if (!pr_m || !vo || !vm) goto oom;
    for (int64_t i = 0; i < n_probes; i++) {
        pr_m[i].output = mout[pr_o[i].output];
        pr_m[i].index = pr_o[i].index;
    }

    /* evaluation: both programs, every input set */
    if (!ctx) {
        char why[256] = "";
        if (be->available && !be->available(why, sizeof why)) {
            st = ir_diag_set(d, IR_ERR_UNSUPPORTED, "PET: back-end %s unavailable: %s", be->name,
                             why);
            goto out;
        }
        if ((st = be->open(&ctx, opt.threads, d)) != IR_OK) goto out;
        own_ctx = true;
    }
    pet_eval_req reqs[2] = {{.prog = po, .n_probes = n_probes, .probes = pr_o, .vals = vo},
                            {.prog = pm, .n_probes = n_probes, .probes = pr_m, .vals = vm}};
    double te = ir_now_seconds();
    st = be->eval(ctx, reqs, 2, opt.seed, opt.tests, opt.dense ? PET_EVAL_DENSE : PET_EVAL_AUTO,
                  &r->evaluated, d);
    r->eval_seconds = ir_now_seconds() - te;
    if (st != IR_OK) goto out;

    /* comparison: one box-test per (cell, position, input set) */
    int64_t total_cells = 0, total_failed = 0;
    for (int64_t ci = 0; ci < n_cells; ci++) {
        const cell *c = &cells[ci];
        bool failed = false;
        for (int s = 0; s < opt.tests; s++)
            for (int q = 0; q < c->npos; q++) {
                int64_t at = (int64_t)s * n_probes + c->probe + q;
                failed = failed || vo[at] != vm[at];
            }
        r->box_tests += (int64_t)c->npos * opt.tests;
        total_cells++;
        if (!failed) continue;
        total_failed++;
        pet_output_report *rep = &r->outputs[c->output];
        int64_t cap = rep->n_failed; /* grows by doubling at powers of two */
        if ((cap & (cap - 1)) == 0) {
            pet_region *nf = realloc(rep->failed, sizeof *nf * (size_t)(cap ? 2 * cap : 1));
            if (!nf) goto oom;
            rep->failed = nf;
        }
        pet_region *rg = &rep->failed[rep->n_failed++];
        pet_splits_box(&grid[c->output], c->id, &rg->box);
        rg->orig_box = pet_splits_box_of(&so[po->outputs[c->output]], rg->box.lo);
        rg->mutant_box = pet_splits_box_of(&sm[pm->outputs[mout[c->output]]], rg->box.lo);
        int64_t vol = 1;
        for (int i = 0; i < rg->box.rank; i++) vol *= rg->box.hi[i] - rg->box.lo[i];
        rep->failed_elems += vol;
    }
    for (int k = 0; k < r->n_outputs; k++) { /* distinct mutant boxes (failed cells in id order) */
        pet_output_report *rep = &r->outputs[k];
        for (int64_t i = 0; i < rep->n_failed; i++) {
            bool seen = false;
            for (int64_t j = 0; j < i && !seen; j++)
                seen = rep->failed[j].mutant_box == rep->failed[i].mutant_box;
            rep->failed_mutant_boxes += !seen;
        }
    }
    r->tests = opt.tests;
    r->probes = n_probes;
    r->n_vars = po->n_vars;
    r->degree = po->degree > pm->degree ? po->degree : pm->degree;
    int dd = r->n_vars > r->degree ? r->n_vars : r->degree;
    r->false_accept_bound = pow((double)dd / (double)PET_P, opt.tests);
    r->affine_dropped = po->affine_dropped + pm->affine_dropped;
    r->equivalent = total_failed == 0;
    r->rejected = total_cells > 0 && total_failed == total_cells;
    st = IR_OK;
    goto out;
oom:
    st = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory verifying a mutant");
out:
    if (own_ctx) be->close(ctx);
    for (int k = 0; grid && k < po->n_outputs; k++) splits_clear(&grid[k]);
    free(grid);
    if (so) pet_splits_free(so, po->n_values);
    if (sm) pet_splits_free(sm, pm->n_values);
    pet_prog_free(po);
    pet_prog_free(pm);
    free(pr_o);
    free(pr_m);
    free(cells);
    free(vo);
    free(vm);
    free(mout);
    if (st != IR_OK) {
        pet_result_free(r);
    } else {
        r->seconds = ir_now_seconds() - t0;
    }
    return st;
}
