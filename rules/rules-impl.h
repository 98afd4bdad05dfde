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

/* The end of every rewrite: re-sorts g topologically (stable), re-infers every node in debug
 * builds (MAGPIE_DEBUG) and fails if any output changed, then validates. */
ir_status rw_finish_graph(ir_graph *g, ir_diag *d);

/* Removes the nodes with dead_node[i] != 0 and the values with dead_value[v] != 0 (their blobs
 * released), compacting value ids; node ids never change. Nobody left may read a dead value,
 * and every value that had a producer must keep one (asserted): a rewrite re-produces what is
 * still needed before it commits. */
ir_status rw_remove(ir_graph *g, const unsigned char *dead_node, const unsigned char *dead_value,
                    ir_diag *d);

/* Marks in dead_value the constant inputs of removed node n that no surviving node reads
 * (read[v] != 0): a constant no graph input or output names goes with its last reader. */
void rw_mark_unread_constants(const ir_graph *g, const ir_node *n, const unsigned char *read,
                              unsigned char *dead_value);

/* ---------------------------------------------------------------- dimension graph */

/* Vertices: value v's dimension d is vertex voff[v] + RW_DG_SLOTS * d, its inner factor the
 * next one; node i's reduce axis r (1-based) is vertex roff[i] + RW_DG_SLOTS * (r - 1), its
 * inner factor the next one (reduce vertices come after every value vertex). comp[x] is the
 * component of vertex x, -1 for an inner vertex that stands for nothing. The links of node i are
 * links[loff[i] .. loff[i+1]), as ir_node_dims gave them, minus those naming an omitted input or
 * output. */
#define RW_DG_SLOTS 2 /* vertices per dim and per reduce axis: the dim, its inner factor */

struct rw_dgraph {
    int n_values, n_nodes, n_vertices;
    int *voff;           /* n_values + 1 */
    int *roff;           /* n_nodes + 1 */
    int *comp;           /* n_vertices */
    unsigned char *rsum; /* per reduce vertex (x - roff[0]): every link into it is a sum */
    int n_comps;
    int64_t *comp_len; /* n_comps; 0 when the lengths of its value dims differ */
    /* per value dim (vertex / RW_DG_SLOTS, value vertices only): the length of its inner
     * factor where a reshape names one (B of S*B), carried along links between dims of one
     * length; 0 when none, -1 when two reshapes disagree */
    int64_t *inner_len;
    int *loff; /* n_nodes + 1 */
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
    unsigned char *in_s; /* per node index: 1 for nodes of S, its replicas included */
    /* per node index: 1 for S's replicas, which rw_fission_analyze adds to the S it is given
     * (rules-fission.c): layout copies of residents that only S reads, recomputed by each part */
    unsigned char *replica;
} rw_fission_info;

/* rw_fission_check, keeping what it found in *fi (free it with rw_fission_info_free, also after
 * a failure). */
ir_status rw_fission_analyze(const ir_graph *g, const rw_dgraph *dg, const rw_fission *f,
                             rw_fission_info *fi, ir_diag *d);
void rw_fission_info_free(rw_fission_info *fi); /* NULL-safe, idempotent */
/* True for the ops a fission adds (FissionBuffer, FissionSlice, FissionAssemble,
 * FissionAccumulate): they never belong to another fission's S. */
bool rw_is_fission_op(ir_op_kind op);
/* True for a training-mode BatchNormalization (training_mode set, or the opset-9 form with its
 * statistics outputs) and a training-mode BatchNormGrad (rules-bn.c): the batch statistics they
 * compute are a reduction over every axis of X but the channels, which the dimension graph
 * therefore leaves unlinked. */
bool rw_bn_batch_stats(const ir_node *n);

/* ---------------------------------------------------------------- substitution edits
 * (rules-subst-edit.c) Shared by the substitution rules: predicates on what a matcher looks
 * at, and the edit of a cloned graph (rw_subst_apply clones, builds the readers, calls a rule's
 * apply, then rw_edit_commit). */

bool rw_is_const(const ir_graph *g, int v); /* a constant with data */
bool rw_is_output(const ir_graph *g, int v);
int rw_n_readers(const rw_users *u, int v);
/* v is read by node i alone and is not a graph output: removing i's reading leaves v dead. */
bool rw_only_reader(const ir_graph *g, const rw_users *u, int v, int i);
/* Nodes carrying magpie's own tags (a fission group's "magpie_fission_*") belong to another
 * rewrite's structure: substitutions leave them alone. */
bool rw_tagged(const ir_node *n);
/* The producer of v when it is an untagged node of op `op` with output 0 = v, else -1. */
int rw_producer_of(const ir_graph *g, int v, ir_op_kind op);

#define RW_EDIT_MAX_DEAD 64

/* The stable ids a rewrite touched, each once; overflow is set past RW_MAX_TOUCHED (the rewrite
 * is then refused). rw_apply's schedule rules and the substitution edits share it. */
typedef struct rw_touch_set {
    uint32_t ids[RW_MAX_TOUCHED];
    int n;
    bool overflow;
} rw_touch_set;

void rw_touch(rw_touch_set *t, uint32_t id);

typedef struct rw_edit {
    ir_graph *g;
    rw_users
        u; /* readers in the clone before any edit; node indices stay valid until rw_edit_commit */
    uint32_t dead[RW_EDIT_MAX_DEAD];
    int n_dead;
    int dead_val; /* a value removed although its producer stays (layout-elim's rename), or -1 */
    rw_touch_set touched;
    ir_diag *d;
} rw_edit;

/* Conv's geometry with defaults filled in; false for attributes magpie does not know. */
typedef struct rw_conv_geo {
    int S;
    int64_t strides[3], dil[3], pads[6], group;
    const char *auto_pad;
} rw_conv_geo;

bool rw_conv_geometry(const ir_graph *g, const ir_node *n, rw_conv_geo *c);

/* Touches stable id `id` (rw_touch on e->touched). */
void rw_edit_touch(rw_edit *e, uint32_t id);
/* Marks node i for removal at commit (and touches it). */
void rw_edit_kill(rw_edit *e, int i);
/* IR_ERR_NOMEM with "substitution: out of memory <what>". */
ir_status rw_edit_nomem(rw_edit *e, const char *what);
/* A new value (a new constant taking over blob b, released on failure) named after base;
 * -1 when out of memory. */
int rw_edit_value(ir_graph *g, const char *base, const char *suffix, ir_dtype t, const ir_shape *s);
int rw_edit_const(ir_graph *g, const char *base, const char *suffix, ir_dtype t, const ir_shape *s,
                  ir_blob *b);
/* Adds a node named after base, infers it and touches it. Outputs that existed before keep
 * their dtype and shape or the rewrite fails as a bug (IR_ERR_INTERNAL): that is the check that
 * the new nodes compute the tensors the old ones did. */
ir_status rw_edit_node(rw_edit *e, ir_op_kind op, const char *base, const char *suffix, int n_in,
                       const int *in, int n_out, const int *out, int n_attrs, const ir_attr *attrs);
/* Split(y) along axis into outs (sizes sz[i]), as the graph's opset spells it. */
ir_status rw_edit_split(rw_edit *e, const char *base, int y, int axis, int n, const int64_t *sz,
                        const int *outs);
/* Readers (pre-edit) of `from` except the dead read `to` instead, each touched. */
void rw_edit_rewire(rw_edit *e, int from, int to);
/* Removes the dead nodes, their remaining outputs, dead_val, and the constants only dead nodes
 * read; compacts value ids (node ids never change). */
ir_status rw_edit_commit(rw_edit *e);

/* ---------------------------------------------------------------- substitution rules */

/* rw_apply for kind RW_SUBST (rules-subst.c): same contract as rw_apply. */
ir_graph *rw_subst_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                         ir_status *st, ir_diag *d);
/* fold-weights (rules-fold.c): its candidates into out[0..max), and its rw_subst_apply. */
int rw_fold_candidates(const ir_graph *g, rw_rewrite *out, int max);
ir_graph *rw_fold_apply(const ir_graph *g, const rw_rewrite *r, uint32_t *touched, int *n_touched,
                        ir_status *st, ir_diag *d);
/* conv-before-pool (rules-pool.c): its candidates, and its apply on an edit in progress. */
int rw_pool_candidates(const ir_graph *g, const rw_users *u, rw_rewrite *out, int max);
ir_status rw_pool_apply(rw_edit *e, const rw_rewrite *r);

#endif
