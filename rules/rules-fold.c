/* rules-fold.c - the substitution fold-weights (rules.h, RW_SUBST_FOLD_WEIGHTS): an op whose
 * inputs are all weights with data (an inference graph's initializers) computed once, its
 * readers reading the result as a constant. PyTorch exports keep such ops: nn.MultiheadAttention
 * slices its packed in-projection weight and transposes each slice on every run, which magpie's
 * executor, like any, then does as copies; PET's pre-processing (paper §6.3) is this rewrite on
 * the ops its mutants add. Bit-identical: the kernel that would run is run once, here.
 * Training graphs (ir_graph_is_training) have no candidates: their parameters are what a
 * training step updates, so a result computed from today's values would be stale after the
 * first step. */
#include "rules-impl.h"

#include <string.h>

int rw_fold_candidates(const ir_graph *g, rw_rewrite *out, int max) {
    int cnt = 0;
    if (ir_graph_is_training(g)) return 0;
    for (int i = 0; i < g->n_nodes && cnt < max; i++)
        if (g->nodes[i].op != IR_OP_Constant && ir_can_fold_weights_node(g, i))
            out[cnt++] = (rw_rewrite){
                .kind = RW_SUBST, .node_id = g->nodes[i].id, .value = RW_SUBST_FOLD_WEIGHTS};
    return cnt;
}

ir_graph *rw_fold_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                        ir_status *st, ir_diag *d) {
    ir_status s = IR_OK;
    int nt = 0, i = rw_find_node(g, r->node_id);
    ir_graph *g2 = NULL;
    uint32_t ids[RW_MAX_TOUCHED];
    bool folded = false;
    if (i < 0 || !ir_can_fold_weights_node(g, i) || ir_graph_is_training(g)) {
        s = ir_diag_set(d, IR_ERR_INVALID, "fold-weights: node id %u %s", r->node_id,
                        i < 0                     ? "is not in the graph"
                        : ir_graph_is_training(g) ? "is in a training graph (its weights change)"
                                                  : "does not read weights only");
        goto out;
    }
    /* touched: the folded node (gone) and its readers (reading a constant now) */
    ids[nt++] = r->node_id;
    const ir_node *n = &g->nodes[i];
    for (int j = i + 1; j < g->n_nodes; j++) {
        const ir_node *x = &g->nodes[j];
        bool reads = false;
        for (int k = 0; k < x->n_in && !reads; k++)
            for (int o = 0; o < n->n_out; o++) reads |= x->in[k] >= 0 && x->in[k] == n->out[o];
        if (!reads) continue;
        if (nt == RW_MAX_TOUCHED) {
            s = ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "fold-weights: over %d readers",
                             RW_MAX_TOUCHED - 1);
            goto out;
        }
        ids[nt++] = x->id;
    }
    if (!(g2 = ir_graph_clone(g))) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory copying the graph");
        goto out;
    }
    if ((s = ir_fold_weights_node(g2, i, &folded, d)) == IR_OK && !folded)
        s = ir_node_fail(d, IR_ERR_INVALID, n, "fold-weights: its kernel cannot run here");
    if (s != IR_OK) goto out;
    ir_graph_prune(g2);
    s = rw_finish_graph(g2, d);
out:
    if (s != IR_OK) {
        ir_graph_free(g2);
        g2 = NULL;
        nt = 0;
    } else if (touched) {
        memcpy(touched, ids, sizeof(uint32_t) * (size_t)nt);
    }
    if (n_touched) *n_touched = nt;
    if (st) *st = s;
    return g2;
}
