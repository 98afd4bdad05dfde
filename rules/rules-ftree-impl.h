/* rules-ftree-impl.h - private interface of the F-Tree (rules-ftree*.c), declared apart so the
 * unit tests reach the pieces of MAGIS Algorithm 1 that do not need the dimension graph: the
 * dominator tree of a DAG, heat and score (eq. 3, 4) on one component's sub-graph G', and the
 * selection of dominators by score interval (lines 7-11).
 *
 * Invariants: G' is given as node indices of g in ascending order, which is a topological order
 * (ir.h keeps g->nodes topological); its edges are all edges of g between its nodes; a virtual
 * root precedes every source of G'. Local index i names nodes[i]; -1 names the virtual root. */
#ifndef MAGPIE_RULES_FTREE_IMPL_H
#define MAGPIE_RULES_FTREE_IMPL_H

#include "rules.h"

/* Immediate dominators of a DAG whose vertices 0..n-1 are in topological order (every edge
 * goes from a lower to a higher index), with a virtual root before the vertices without
 * predecessors. Predecessors of v: pred[pred_off[v] .. pred_off[v+1]) (duplicates allowed).
 * idom[v] receives v's immediate dominator, -1 for the virtual root. Cooper, Harvey, Kennedy,
 * "A Simple, Fast Dominance Algorithm": on a DAG visited in topological order one pass is
 * exact, since every predecessor's idom is final when v is reached. */
void rw_ft_idom(int n, const int *pred_off, const int *pred, int *idom);

/* Scratch of the per-component analysis, sized once for a graph so that Algorithm 1 allocates
 * nothing per component. */
typedef struct rw_ft_work rw_ft_work;
rw_ft_work *rw_ft_work_new(const ir_graph *g); /* NULL when out of memory */
void rw_ft_work_free(rw_ft_work *w);           /* NULL-safe */

/* The analysis of one G' (arrays of n entries by local index; they live in the work area and
 * stay valid until its next rw_ft_analyze). */
typedef struct rw_ft_comp {
    int n;
    const int *node;     /* node index in g */
    const int *idom;     /* immediate dominator in G' (local), -1 = the virtual root */
    const int *pre;      /* preorder number in the dominator tree (the root is not numbered) */
    const int *size;     /* nodes in v's dominator subtree, v included */
    const double *heat;  /* eq. 3: hot-spot bytes produced by the nodes v dominates, v included */
    const double *score; /* eq. 4, n = 2: heat / 2 - in_bytes */
    const double *in_bytes; /* bytes read by S = des(v) \ {v} and produced outside S */
} rw_ft_comp;

/* Analyzes G' = nodes[0..n) (ascending node indices of g, n <= g->n_nodes). hot[i] (per node
 * index of g) is the hot-spot bytes node i produces; vbytes[v] (per value) is the bytes value v
 * holds while a part runs (ir_value_bytes for residents, sched_value_device_bytes otherwise).
 * gen (per node index of g; may be NULL) flags the generators of G' (nodes reading nothing that
 * carries the component's dimension): each generator after the anchor (a node index of g, used
 * when it is in G'; -1 for none) or, without one, after G''s only other source gets it as its
 * predecessor (rules-ftree.c says why). Fills c. */
void rw_ft_analyze(rw_ft_work *w, const ir_graph *g, const int *nodes, int n, const double *hot,
                   const double *vbytes, const unsigned char *gen, int anchor, rw_ft_comp *c);

/* Algorithm 1 lines 7-11 on c with L levels: with S_max the largest score (nothing when it is
 * <= 0), node v is at level l = floor(L * score / S_max) (1..L; level L holds exactly the
 * maximum, below 1/L is level 0 and never selected), and v is selected when no strict
 * dominator-tree descendant of v is at v's level. Writes the selected local indices into out
 * (room for c->n), by level ascending then local index; returns their count. */
int rw_ft_select(rw_ft_work *w, const rw_ft_comp *c, int L, int *out);

/* S = T.des(v) \ {v}: the node indices of g that v strictly dominates in G', ascending, into
 * out (room for c->n); returns their count. */
int rw_ft_strict_subtree(const rw_ft_comp *c, int v, int *out);

#endif
