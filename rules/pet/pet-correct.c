/* pet-correct.c - pet_correct (pet-opt.h): a mutant with a correction for every cell the
 * verifier failed (PET paper §5.2 step 3, §5.3).
 *
 * The replacement starts as a copy of the mutant. Per output, the failed cells are merged where
 * two of them make one box (adjacent, alike in every other dim: one correction instead of two,
 * computing exactly the same elements), and for each box the original program is rebuilt on it
 * (pet-region.c) and written over the mutant's output with PetPatch; the boxes are disjoint
 * (cells of one grid), so the order of the patches does not matter. The mutant's output value is
 * renamed and the last patch takes the output's name. Corrections that share a conv's weight
 * with the mutant are then fused into it (pet-fuse.c), the program is sorted, pruned and
 * post-optimized (pet-post.c), and, in debug builds, verified against prog: it must be
 * equivalent on every cell. */
#include "pet-opt.h"

#include "pet-correct-impl.h"
#include "pet-post.h"

#include <stdio.h>

/* ---------------------------------------------------------------- merging cells */

typedef struct keyed_box {
    int dim; /* the dim being merged along: compared last */
    pet_box b;
} keyed_box;

static int cmp_keyed(const void *pa, const void *pb) {
    const keyed_box *a = pa, *b = pb;
    int d = a->dim;
    for (int i = 0; i < a->b.rank; i++) {
        if (i == d) continue;
        if (a->b.lo[i] != b->b.lo[i]) return a->b.lo[i] < b->b.lo[i] ? -1 : 1;
        if (a->b.hi[i] != b->b.hi[i]) return a->b.hi[i] < b->b.hi[i] ? -1 : 1;
    }
    return a->b.lo[d] < b->b.lo[d] ? -1 : a->b.lo[d] > b->b.lo[d];
}

/* Merges boxes that touch along one dim and agree on every other, until none do; returns the
 * new count. The union is unchanged: a merged box holds exactly its two parts. */
static int64_t merge_boxes(keyed_box *k, int64_t n) {
    int rank = n ? k[0].b.rank : 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int d = 0; d < rank; d++) {
            for (int64_t i = 0; i < n; i++) k[i].dim = d;
            qsort(k, (size_t)n, sizeof *k, cmp_keyed);
            int64_t m = 0;
            for (int64_t i = 0; i < n; i++) {
                if (m > 0) {
                    keyed_box *p = &k[m - 1];
                    bool alike = p->b.hi[d] == k[i].b.lo[d];
                    for (int j = 0; j < rank && alike; j++)
                        alike =
                            j == d || (p->b.lo[j] == k[i].b.lo[j] && p->b.hi[j] == k[i].b.hi[j]);
                    if (alike) {
                        p->b.hi[d] = k[i].b.hi[d];
                        changed = true;
                        continue;
                    }
                }
                k[m++] = k[i];
            }
            n = m;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- one output */

static int find_output(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->values[g->outputs[i]].name, name) == 0) return i;
    return -1;
}

/* Corrects output `name` of the replacement on boxes b[0..n): cur is the mutant's value. */
static ir_status correct_output(pc_ctx *c, int po, int hk, const keyed_box *b, int64_t n,
                                int *corr) {
    ir_graph *h = c->h;
    int cur = h->outputs[hk];
    const char *name = c->prog->values[po].name;
    ir_value *cv = &h->values[cur];
    if (cv->producer < 0)
        return ir_diag_set(c->d, IR_ERR_UNSUPPORTED,
                           "PET correction: the mutant's output '%s' is one of its inputs", name);
    for (int i = 0; i < h->n_outputs; i++)
        if (i != hk && h->outputs[i] == cur)
            return ir_diag_set(c->d, IR_ERR_UNSUPPORTED,
                               "PET correction: the mutant writes '%s' and another output with "
                               "one value",
                               name);
    char nm[300];
    snprintf(nm, 256, "%.200s.mutant", name);
    c->corr = *corr;
    const char *mn = pc_name(c, nm);
    if (!mn) return ir_diag_set(c->d, IR_ERR_NOMEM, "PET: out of memory");
    h->values[cur].name = mn;
    h->values[cur].flags &= ~(unsigned)IR_VF_OUTPUT;
    ir_status st = IR_OK;
    for (int64_t j = 0; j < n; j++) {
        int patch, next;
        c->corr = (*corr)++;
        if ((st = pc_region(c, po, &b[j].b, &patch)) != IR_OK) return st;
        int64_t *starts = ir_graph_alloc(h, sizeof(int64_t) * (size_t)(b[j].b.rank + 1));
        if (!starts) return ir_diag_set(c->d, IR_ERR_NOMEM, "PET: out of memory");
        memcpy(starts, b[j].b.lo, sizeof(int64_t) * (size_t)b[j].b.rank);
        ir_attr at = {.name = "starts", .type = IR_ATTR_INTS, .n = b[j].b.rank, .ints = starts};
        snprintf(nm, 256, "%.200s.patch", name);
        if (pc_emit(c, IR_OP_PetPatch, nm, 2, (int[]){cur, patch}, 1, &next, 1, &at, &st) < 0)
            return st;
        cur = next;
    }
    /* the last patch writes the output: its name, and the mutant's value loses it */
    h->values[cur].name = ir_graph_strdup(h, name);
    h->values[cur].flags |= IR_VF_OUTPUT;
    h->outputs[hk] = cur;
    return IR_OK;
}

/* ---------------------------------------------------------------- the corrector */

/* The outputs of h in prog's order (all present: pet_verify matched them by name). */
static void order_outputs(const ir_graph *prog, ir_graph *h) {
    int *o = malloc(sizeof(int) * (size_t)(h->n_outputs + 1));
    if (!o) return; /* any order is correct; this one is only tidier */
    for (int i = 0; i < prog->n_outputs && i < h->n_outputs; i++) {
        int k = find_output(h, prog->values[prog->outputs[i]].name);
        if (k < 0) goto out;
        o[i] = h->outputs[k];
    }
    if (prog->n_outputs == h->n_outputs) memcpy(h->outputs, o, sizeof(int) * (size_t)h->n_outputs);
out:
    free(o);
}

#ifdef MAGPIE_DEBUG
/* Debug builds: the replacement must be equivalent to prog on every cell. */
static ir_status self_check(const ir_graph *prog, const ir_graph *h, ir_diag *d) {
    pet_result r;
    pet_options o = {.seed = 0x636f7272656374ULL, .tests = 2, .threads = 1};
    ir_status st = pet_verify_replacement(prog, h, &o, &r, d);
    if (st != IR_OK) return st;
    for (int i = 0; i < r.n_outputs && st == IR_OK; i++)
        if (r.outputs[i].n_failed)
            st = ir_diag_set(d, IR_ERR_INTERNAL,
                             "PET correction: the corrected mutant still differs from the "
                             "program on %lld cells of '%s'",
                             (long long)r.outputs[i].n_failed, r.outputs[i].name);
    pet_result_free(&r);
    return st;
}
#endif

ir_graph *pet_correct(const ir_graph *prog, const ir_graph *mutant, const pet_result *r,
                      int *n_fused, ir_status *st, ir_diag *d) {
    pc_ctx c = {.prog = prog, .d = d};
    ir_status rc = IR_OK;
    keyed_box *boxes = NULL;
    int fused = 0, corr = 0;
    if (n_fused) *n_fused = 0;
    if (r->n_outputs != prog->n_outputs) {
        rc = ir_diag_set(d, IR_ERR_INVALID,
                         "PET correction: a result of %d outputs for a program of %d", r->n_outputs,
                         prog->n_outputs);
        goto fail;
    }
    c.h = ir_graph_clone(mutant);
    c.vmap = malloc(sizeof(int) * (size_t)(prog->n_values + 1));
    if (!c.h || !c.vmap) goto nomem;
    c.n_mutant = c.h->n_nodes;
    for (int v = 0; v < prog->n_values; v++) c.vmap[v] = -1;
    for (int i = 0; i < r->n_outputs; i++) {
        const pet_output_report *rep = &r->outputs[i];
        int pk = find_output(prog, rep->name), hk = find_output(c.h, rep->name);
        if (pk < 0 || hk < 0) {
            rc = ir_diag_set(d, IR_ERR_INVALID, "PET correction: output '%s' is not in %s",
                             rep->name, pk < 0 ? "the program" : "the mutant");
            goto fail;
        }
        if (rep->n_failed == 0) continue;
        keyed_box *nb = realloc(boxes, sizeof *nb * (size_t)rep->n_failed);
        if (!nb) goto nomem;
        boxes = nb;
        for (int64_t j = 0; j < rep->n_failed; j++) boxes[j].b = rep->failed[j].box;
        int64_t n = merge_boxes(boxes, rep->n_failed);
        if ((rc = correct_output(&c, prog->outputs[pk], hk, boxes, n, &corr)) != IR_OK) goto fail;
    }
    if ((rc = pc_fuse(&c, &fused)) != IR_OK || (rc = ir_graph_toposort(c.h, d)) != IR_OK) goto fail;
    ir_graph_prune(c.h);
    order_outputs(prog, c.h);
    if ((rc = pet_post_optimize(c.h, NULL, d)) != IR_OK ||
        (rc = ir_graph_validate(c.h, d)) != IR_OK)
        goto fail;
#ifdef MAGPIE_DEBUG
    if ((rc = self_check(prog, c.h, d)) != IR_OK) goto fail;
#endif
    free(boxes);
    free(c.vmap);
    free(c.memo);
    free(c.convs);
    if (n_fused) *n_fused = fused;
    if (st) *st = IR_OK;
    return c.h;
nomem:
    rc = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory correcting a mutant");
fail:
    free(boxes);
    free(c.vmap);
    free(c.memo);
    free(c.convs);
    ir_graph_free(c.h);
    if (st) *st = rc;
    return NULL;
}
