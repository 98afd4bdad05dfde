/* rules-impl.h - private declarations shared by the files of rules/ (DESIGN.md: one public
 * header per module, private ones in <module>-impl.h).
 *
 *  - graph helpers (rules-util.c): node lookup by stable id, reader lists, attribute edits,
 *    constants, and the sort-and-validate step every rewrite ends with;
 *  - the dimension graph's representation (rules-dgraph.c builds it, rules-fission*.c read its
 *    per-node links directly).
 *
 * Nothing here is part of the module's contract: callers outside rules/ use rules.h. */
#ifndef MAGPIE_RULES_IMPL_H
#define MAGPIE_RULES_IMPL_H

#include "rules.h"

/* ---------------------------------------------------------------- graph helpers */

/* Index of the node with stable id `id`, or -1 (a linear scan: for one-off lookups). */
int rw_find_node(const ir_graph *g, uint32_t id);

/* A dense map from stable id to node index: map[id] for id < g->next_node_id, -1 where no node
 * has that id. malloc'd (free it); NULL when out of memory. O(nodes + next_node_id). */
int *rw_id_index(const ir_graph *g);
/* qsort comparator of uint32_t. */
int rw_cmp_u32(const void *a, const void *b);

/* The readers of every value, CSR: the nodes reading value v are node[off[v] .. off[v+1]), in
 * node order, each node once per value even when it reads v at several inputs. */
typedef struct rw_users {
    int *off; /* n_values + 1 */
    int *node;
} rw_users;
ir_status rw_users_build(const ir_graph *g, rw_users *u, ir_diag *d);
void rw_users_free(rw_users *u); /* NULL-safe, idempotent */

/* Sets the int attribute `name` (a static string or one in g's arena) of node n to v, adding
 * it when absent. The node's attribute array is re-allocated in g's arena when it grows; the
 * tensor blobs of its attributes keep their single reference. false when out of memory. */
bool rw_set_attr_int(ir_graph *g, ir_node *n, const char *name, int64_t v);
/* Removes the attribute `name` from n when present (its tensor blob, if any, is released). */
void rw_drop_attr(ir_node *n, const char *name);

/* Adds a 1-D int64 constant of n entries named `name` (copied); its value id, -1 when out of
 * memory. */
int rw_add_const_i64(ir_graph *g, const char *name, int n, const int64_t *vals);
/* Adds a constant value named `name` (copied) holding blob b, which it takes over (released on
 * failure; b NULL fails); its value id, -1 when out of memory. */
int rw_add_const_blob(ir_graph *g, const char *name, ir_dtype t, const ir_shape *s, ir_blob *b);

/* The end of every rewrite: re-sorts g topologically (stable), re-infers every node in debug
 * builds (MAGPIE_DEBUG) and fails if any output changed, then validates. */
ir_status rw_finish_graph(ir_graph *g, ir_diag *d);

/* Removes the nodes with dead_node[i] != 0 and the values with dead_value[v] != 0 (their blobs
 * released), compacting value ids; node ids never change. Nobody left may read a dead value,
 * and every value that had a producer must keep one (asserted): a rewrite re-produces what is
 * still needed before it commits. */
ir_status rw_remove(ir_graph *g, const unsigned char *dead_node, const unsigned char *dead_value,
                    ir_diag *d);

/* ---------------------------------------------------------------- dimension graph */

/* Vertices: value v's dimension d is vertex voff[v] + d; node i's reduce axis r (1-based) is
 * vertex roff[i] + r - 1 (reduce vertices come after every value vertex). comp[x] is the
 * component of vertex x. The links of node i are links[loff[i] .. loff[i+1]), as ir_node_dims
 * gave them, minus those naming an omitted input or output. */
struct rw_dgraph {
    int n_values, n_nodes, n_vertices;
    int *voff;           /* n_values + 1 */
    int *roff;           /* n_nodes + 1 */
    int *comp;           /* n_vertices */
    unsigned char *rsum; /* per reduce vertex (x - roff[0]): every link into it is a sum */
    int n_comps;
    int64_t *comp_len; /* n_comps; 0 when the lengths of its value dims differ */
    int *loff;         /* n_nodes + 1 */
    ir_dimlink *links;
};

/* ---------------------------------------------------------------- fission */

/* The attribute names of a fission group's tags (rules.h, rw_fission_apply). */
#define RW_FISSION_GROUP_ATTR "magpie_fission_group"
#define RW_FISSION_PARTS_ATTR "magpie_fission_parts"

/* What rw_fission_check established about f on g, for rw_fission_apply to build on. */
typedef struct rw_fission_info {
    int comp;            /* D: the component the seed names */
    int64_t len;         /* its length */
    int n_s;             /* |S| */
    int *s;              /* node indices of S, ascending (so in topological order) */
    unsigned char *in_s; /* per node index: 1 for nodes of S */
} rw_fission_info;

/* rw_fission_check, keeping what it found in *fi (free it with rw_fission_info_free, also after
 * a failure). */
ir_status rw_fission_analyze(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f,
                             rw_fission_info *fi, ir_diag *d);
void rw_fission_info_free(rw_fission_info *fi); /* NULL-safe, idempotent */
/* True for the ops a fission adds (FissionBuffer, FissionSlice, FissionAssemble,
 * FissionAccumulate): they never belong to another fission's S. */
bool rw_is_fission_op(ir_op_kind op);

/* ---------------------------------------------------------------- substitution rules */

/* rw_apply for kind RW_SUBST (rules-subst.c): same contract as rw_apply. */
ir_graph *rw_subst_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                         ir_status *st, ir_diag *d);
/* fold-weights (rules-fold.c): its candidates into out[0..max), and its rw_subst_apply. */
int rw_fold_candidates(const ir_graph *g, rw_rewrite *out, int max);
ir_graph *rw_fold_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                        ir_status *st, ir_diag *d);

#endif
