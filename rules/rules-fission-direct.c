/* rules-fission-direct.c - a rewrite of G_b applied to its one-copy graph G_e directly
 * (rules.h, rw_apply_one_copy), so that a child of a state with fissions enabled costs what its
 * rewrite touches instead of a re-application of every fission to the child's G_b.
 *
 * Why the two agree. rw_fission_apply(G_b) keeps every node of G_b with its id; it tags the
 * nodes of each S (its convex closure, as the explorer hands it over) and divides their
 * D-dimensions, and adds fission nodes (ids from the fission base up) around each S: slices of
 * its inputs, buffers and assembles of its outputs, whose readers outside S read the assembled
 * value. A rewrite r (remat, swap, their inverses, a substitution) of G_b edits the nodes it
 * touches, all of them old nodes of one region or all outside every region, and adds nodes whose
 * ids follow G_b's. Applied to G_e with G_b's next id, it edits the same nodes and adds the same
 * ones with the same ids, and:
 *  - outside every region, r's new nodes join no closure (a path from S through one of them
 *    back to S would have run through the nodes it copied or rewired, which are outside), the
 *    regions keep their S, borders and D-graph components (a remat or swap copies or moves
 *    values that keep their dimensions; the explorer offers no substitution next to a region),
 *    so the fissions' nodes are those of the parent;
 *  - inside region k, the new nodes are copies of S's nodes (the same tags and, being copies of
 *    the divided nodes, the divided shapes and shape attributes that split_nodes would give
 *    them) or a Store and a Load of a divided value (tagged here), each reading a value S
 *    produces and read by S: they join S's closure, add no border value, and every slice,
 *    buffer and assemble stays as it was.
 * Where these conditions cannot be seen to hold, the call refuses (IR_ERR_INVALID) and the
 * caller re-applies the fissions: r touches old nodes on both sides of a border or of two
 * regions, a new node of an inside rewrite reads nothing S produces (a remat of a node that
 * reads only slices: re-applied, its copy would lie outside S and get a slice of its own), or r
 * acts otherwise on G_e than on G_b (another touched set: a fission node among the readers it
 * would rewire, a reader whose ancestry differs through a group's ordering inputs). The
 * explorer's debug builds compare the result with the fissions re-applied.
 *
 * Cost: rw_apply on G_e (a clone, the edit, a stable sort) and an id map. */
#include "rules-impl.h"

#include <stdlib.h>
#include <string.h>

static bool direct_kind(int kind) {
    return kind == RW_REMAT || kind == RW_REMAT_CHAIN || kind == RW_DEREMAT || kind == RW_SWAP ||
           kind == RW_DESWAP || kind == RW_SUBST;
}

/* The fission group of node n of G_e, -1 when it is in none. */
static int64_t group_of(const ir_node *n) {
    return ir_attr_int(n, RW_FISSION_GROUP_ATTR, -1);
}

/* Sorted copies of a[0..na) and b[0..nb) are equal. */
static bool same_ids(const uint32_t *a, int na, const uint32_t *b, int nb) {
    if (na != nb) return false;
    uint32_t x[RW_MAX_TOUCHED], y[RW_MAX_TOUCHED];
    memcpy(x, a, sizeof *x * (size_t)na);
    memcpy(y, b, sizeof *y * (size_t)nb);
    qsort(x, (size_t)na, sizeof *x, rw_cmp_u32);
    qsort(y, (size_t)nb, sizeof *y, rw_cmp_u32);
    return memcmp(x, y, sizeof *x * (size_t)na) == 0;
}

/* The group (>= 0) that every old node of touched[0..nt) (ids below first_new) belongs to in
 * ge, -1 when none belongs to one, -2 when they differ or one is not in ge. */
static int64_t touched_group(const ir_graph *ge, const int *map, uint32_t first_new,
                             const uint32_t *touched, int nt) {
    int64_t k = -3;
    for (int i = 0; i < nt; i++) {
        uint32_t id = touched[i];
        if (id >= first_new) continue;
        int j = map[id];
        if (j < 0) return -2;
        int64_t gk = group_of(&ge->nodes[j]);
        if (k != -3 && gk != k) return -2;
        k = gk;
    }
    return k == -3 ? -1 : k;
}

/* A new node of h that copies a resident whole into region k (an Identity or a Cast of a graph
 * input or a constant that no slice stands for, whose readers are all old nodes of S: a remat of
 * the GPT's tied head, a weight's copy that the region reads). Re-applied, such a copy lies
 * outside S's closure (nothing of S leads to it) but is one of S's replicas (add_replicas): a
 * layout op of residents without a D-dimension (an Identity or a Cast links every dimension of
 * its output to its input's, and the input, read whole, has none in the fission's component),
 * read in S only. So it is in the group, with the tags it copied from its original. */
static bool replica_copy(const ir_graph *h, int i, uint32_t first_new, int64_t k) {
    const ir_node *n = &h->nodes[i];
    if ((n->op != IR_OP_Identity && n->op != IR_OP_Cast) || n->n_in != 1 || n->n_out != 1 ||
        n->in[0] < 0 || n->out[0] < 0 || group_of(n) != k)
        return false;
    const ir_value *x = &h->values[n->in[0]], *y = &h->values[n->out[0]];
    if (x->producer >= 0 || (y->flags & IR_VF_OUTPUT) || !ir_shape_eq(&x->shape, &y->shape))
        return false;
    int readers = 0;
    for (int j = 0; j < h->n_nodes; j++) {
        const ir_node *r = &h->nodes[j];
        for (int q = 0; q < r->n_in; q++) {
            if (r->in[q] != n->out[0]) continue;
            if (r->id >= first_new || rw_is_fission_op(r->op) || group_of(r) != k) return false;
            readers++;
        }
    }
    return readers > 0;
}

/* Inside group k: every node of h with an id in [first_new, new_next) reads a value produced by
 * a node of S (an old node of group k that is no fission op) or by a new node that does, and
 * carries group k's tags (a Store or a Load gets them here). Nodes are visited in h's order,
 * which is topological. */
static ir_status join_group(ir_graph *h, uint32_t first_new, uint32_t new_next, uint32_t base,
                            int64_t k, int64_t parts, ir_diag *d) {
    unsigned char *joined = calloc((size_t)h->n_nodes + 1, 1);
    if (!joined) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    ir_status st = IR_OK;
    for (int i = 0; i < h->n_nodes && st == IR_OK; i++) {
        ir_node *n = &h->nodes[i];
        if (n->id < first_new || n->id >= new_next) continue;
        bool reads_s = false;
        for (int x = 0; x < n->n_in && !reads_s; x++) {
            int p = n->in[x] >= 0 ? h->values[n->in[x]].producer : -1;
            if (p < 0) continue;
            const ir_node *q = &h->nodes[p];
            reads_s = joined[p] || (q->id < base && q->id < first_new && !rw_is_fission_op(q->op) &&
                                    group_of(q) == k);
        }
        int64_t gk = group_of(n);
        /* split_nodes gives such a node a shape constant of its own, named after it: the copy
         * of one would read its original's, the same values under another name (another
         * fingerprint) */
        bool shape_input = n->op == IR_OP_Reshape || n->op == IR_OP_Expand ||
                           n->op == IR_OP_Resize || n->op == IR_OP_ResizeGrad;
        /* not joined: a new node that reads only it would lie outside S on re-application */
        if (!reads_s && replica_copy(h, i, first_new, k)) continue;
        if (!reads_s || shape_input || (gk != -1 && gk != k)) {
            st = ir_node_fail(d, IR_ERR_INVALID, n, "rewrite: a new node outside fission %lld",
                              (long long)k);
            break;
        }
        if (gk == -1 && (!rw_set_attr_int(h, n, RW_FISSION_GROUP_ATTR, k) ||
                         !rw_set_attr_int(h, n, RW_FISSION_PARTS_ATTR, parts)))
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        joined[i] = 1;
    }
    free(joined);
    return st;
}

ir_graph *rw_apply_one_copy(const ir_graph *ge, uint32_t first_new, uint32_t new_next,
                            uint32_t base, const rw_rewrite *r, const uint32_t *touched_b, int nt_b,
                            uint32_t *touched, int *n_touched, ir_status *st, ir_diag *d) {
    *n_touched = 0;
    *st = IR_ERR_INVALID;
    if (!direct_kind(r->kind) || new_next > base || first_new > new_next)
        return (void)ir_diag_set(d, IR_ERR_INVALID, "rewrite: not applicable to the one copy"),
               NULL;
    int *map = rw_id_index(ge);
    if (!map) {
        *st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int64_t k = touched_group(ge, map, first_new, touched_b, nt_b), parts = 0;
    if (k >= 0) {
        /* a substitution never acts inside a region (rw_tagged) */
        for (int i = 0; i < nt_b && !parts; i++)
            if (touched_b[i] < first_new)
                parts = ir_attr_int(&ge->nodes[map[touched_b[i]]], RW_FISSION_PARTS_ATTR, 0);
    }
    free(map);
    if (k == -2 || (k >= 0 && (r->kind == RW_SUBST || parts < 2))) {
        ir_diag_set(d, IR_ERR_INVALID, "rewrite: touches both sides of a fission's border");
        return NULL;
    }
    /* a shallow copy of the struct, which rw_apply only reads (it clones it), with G_b's next
     * id: the new nodes get the ids they have in the rewritten G_b */
    ir_graph at = *ge;
    at.next_node_id = first_new;
    ir_graph *h = rw_apply(&at, r, touched, n_touched, st, d);
    if (!h) return NULL;
    if (h->next_node_id != new_next || !same_ids(touched, *n_touched, touched_b, nt_b)) {
        *st = ir_diag_set(d, IR_ERR_INVALID, "rewrite: acts otherwise on the one copy");
        goto fail;
    }
    if (k >= 0 && (*st = join_group(h, first_new, new_next, base, k, parts, d)) != IR_OK) goto fail;
    for (int i = 0; i < h->n_nodes && k < 0; i++)
        if (h->nodes[i].id >= first_new && h->nodes[i].id < new_next &&
            group_of(&h->nodes[i]) != -1) {
            /* a copy of a tagged node outside every region: a fission node's copy */
            *st = ir_node_fail(d, IR_ERR_INVALID, &h->nodes[i], "rewrite: copies a fission node");
            goto fail;
        }
    h->next_node_id = ge->next_node_id;
    *st = IR_OK;
    return h;
fail:
    ir_graph_free(h);
    *n_touched = 0;
    return NULL;
}
