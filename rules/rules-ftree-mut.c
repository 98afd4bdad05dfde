/* rules-ftree-mut.c - the F-Tree mutation rules of MAGIS 5.1 (enable, lift, disable, mutate) on
 * a fission configuration (one n per tree node, 1 = disabled), and the enabled fissions a
 * configuration stands for.
 *
 * Invariant kept by every rule: the enabled nodes have pairwise disjoint S. So no enabled node
 * has an enabled ancestor or descendant (a parent's S contains its children's), and nodes of
 * different components (separate roots whose S may still overlap) are never enabled over the
 * same graph nodes. Why magpie does not nest fissions, as the paper's enabling of the parent of
 * an enabled node would: rw_fission_apply takes disjoint S and tags every node with one
 * (group, parts) pair; a split inside a split would need a one-copy graph of a one-copy graph and
 * an accounting of parts within parts. The same graphs are still reached: lift moves a split up
 * to the parent, and mutate raises its n. */
#include "rules.h"

#include <string.h>

/* Enable is offered at this many part counts: the least divisors >= 2 of dim_len (2, 4 and 8 for
 * a batch of 8), each a rewrite of its own (rw_rewrite.value = n). MAGIS enables at the least and
 * raises n by mutate, one divisor per expansion. On a training graph whose smaller F-Tree nodes
 * pay only at 4 parts that path is cut off: the GPT decoder of the corpus (ce or sum, --lat-limit
 * 1.10) enables its whole graph at n = 2 (0.629 of the eager peak at 1.039 of the latency), whose
 * 4 parts cost 1.114; the next node (798 of its 1,141 nodes) gives 0.699 at 2 parts, 0.517 at 4
 * (1.076). The best-first order takes the whole graph's 2 parts, its swaps lower the key below
 * 0.699 at once, and relaxed acceptance prunes the 798-node split at 2 parts before it is ever
 * expanded: 0.437 after 1,000 to 31,000 states. Offered at 4 parts from the start, it is a child
 * of the root, the best one, and the search goes on from there: 0.350 in 1,000 states. */
#define RW_FT_ENABLE_COUNTS 3

static int64_t least_divisor(int64_t len) {
    for (int64_t d = 2; d <= len; d++)
        if (len % d == 0) return d;
    return 0;
}

/* The next n above cur that divides len (MAGIS figure 7(d): 2, 3, 4, 6, 12 for 12); 0 if none. */
static int64_t next_divisor(int64_t len, int64_t cur) {
    for (int64_t d = cur + 1; d <= len; d++)
        if (len % d == 0) return d;
    return 0;
}

static bool overlap(const rw_fission *a, const rw_fission *b) {
    if (!a->n_ids || !b->n_ids || a->ids[a->n_ids - 1] < b->ids[0] ||
        b->ids[b->n_ids - 1] < a->ids[0])
        return false;
    int i = 0, j = 0;
    while (i < a->n_ids && j < b->n_ids) {
        if (a->ids[i] == b->ids[j]) return true;
        if (a->ids[i] < b->ids[j])
            i++;
        else
            j++;
    }
    return false;
}

/* Node i may become enabled when its S meets no enabled node's but skip's (the node a lift
 * disables; -1 for none). This covers "no enabled ancestor or descendant": S is never empty, so
 * tree relatives always overlap. */
static bool free_to_enable(const rw_ftree *t, const int *config, int i, int skip) {
    for (int j = 0; j < t->n; j++)
        if (j != i && j != skip && config[j] > 1 && overlap(&t->nodes[i].f, &t->nodes[j].f))
            return false;
    return true;
}

static bool has_enabled_descendant(const rw_ftree *t, const int *config, int i) {
    for (int j = 0; j < t->n; j++) {
        if (j == i || config[j] <= 1) continue;
        for (int a = t->nodes[j].parent; a >= 0; a = t->nodes[a].parent)
            if (a == i) return true;
    }
    return false;
}

/* Whether r applies to config; if so, the node it enables (or changes) and its new n go to
 * *node, *n (the node a lift disables is r->node_id). */
static bool rule_applies(const rw_ftree *t, const int *config, const rw_rewrite *r, int *node,
                         int64_t *n) {
    if (r->node_id >= (uint32_t)t->n) return false;
    int i = (int)r->node_id;
    const rw_ftree_node *f = &t->nodes[i];
    switch (r->kind) {
    case RW_FT_ENABLE:
        /* a disabled node disjoint from every enabled node (so without enabled ancestors or
         * descendants). MAGIS enables leaves only and lifts from there, so that splits start
         * small; but a leaf of a training graph's F-Tree may split a sub-graph whose parts
         * cost more than they save (its assembled outputs outweigh its halved interior), and
         * then relaxed acceptance prunes the leaf and with it every lift towards the split that
         * pays. The tree has tens of nodes, so magpie offers every free node and lets the
         * best-first order try the small ones too. r->value: n (a divisor of dim_len), or 0 for
         * the least divisor (a checkpoint of an older search). */
        if (config[i] != 1 || r->value < 0 || !free_to_enable(t, config, i, -1)) return false;
        *node = i;
        *n = r->value > 0 ? r->value : least_divisor(f->dim_len);
        return *n > 1 && f->dim_len % *n == 0 && *n <= INT32_MAX;
    case RW_FT_LIFT: {
        int p = f->parent;
        if (config[i] <= 1 || p < 0 || config[p] != 1 || !free_to_enable(t, config, p, i))
            return false;
        int64_t plen = t->nodes[p].dim_len;
        *node = p;
        *n = plen % config[i] == 0 ? config[i] : least_divisor(plen);
        return *n > 0;
    }
    case RW_FT_DISABLE:
        if (config[i] <= 1 || has_enabled_descendant(t, config, i)) return false;
        *node = i;
        *n = 1;
        return true;
    case RW_FT_MUTATE:
        if (config[i] <= 1) return false;
        *node = i;
        *n = next_divisor(f->dim_len, config[i]);
        return *n > 0 && *n <= INT32_MAX;
    default: return false;
    }
}

int rw_ftree_mutations(const rw_ftree *t, const int *config, rw_rewrite *out, int max) {
    static const int kinds[] = {RW_FT_ENABLE, RW_FT_LIFT, RW_FT_DISABLE, RW_FT_MUTATE};
    int k = 0;
    if (!t) return 0;
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++)
        for (int i = 0; i < t->n && k < max; i++) {
            rw_rewrite r = {.kind = kinds[q], .node_id = (uint32_t)i};
            int node;
            int64_t n;
            if (!rule_applies(t, config, &r, &node, &n)) continue;
            if (kinds[q] != RW_FT_ENABLE) {
                out[k++] = r;
                continue;
            }
            for (int e = 0; e < RW_FT_ENABLE_COUNTS && n > 0 && k < max; e++) {
                r.value = (int)n;
                out[k++] = r;
                n = next_divisor(t->nodes[i].dim_len, n);
            }
        }
    return k;
}

bool rw_ftree_mutate(const rw_ftree *t, const int *config, const rw_rewrite *r, int *new_config) {
    int node;
    int64_t n;
    if (!t || !rule_applies(t, config, r, &node, &n)) return false;
    if (new_config != config) memcpy(new_config, config, (size_t)t->n * sizeof *config);
    if (r->kind == RW_FT_LIFT) new_config[r->node_id] = 1;
    new_config[node] = (int)n;
    return true;
}

int rw_ftree_enabled(const rw_ftree *t, const int *config, rw_fission *out) {
    int k = 0;
    for (int i = 0; t && i < t->n; i++) {
        IR_ASSERT(config[i] >= 1);
        if (config[i] == 1) continue;
        out[k] = t->nodes[i].f;
        out[k++].parts = config[i];
    }
    return k;
}
