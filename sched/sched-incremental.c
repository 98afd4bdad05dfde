/* sched-incremental.c - incremental rescheduling (MAGIS 6.1, Algorithm 2): after a rewrite,
 * re-schedule only a window of the old order around the touched nodes and keep the rest.
 *
 *  1. The old order is mapped to stable node ids (ir_node.id), and ids to node indices of g_new.
 *  2. I_S = old positions of the touched nodes still in g_old (a touched node that exists only in
 *     g_new contributes the old positions of its neighbours in g_new).
 *  3. GetRescheduleInterval. The printed ExtendBound loop cannot run (ñ starts at 0, so
 *     "nw(v) < ñ" is false at once); its intent, per the text, is a boundary with a small nw
 *     within a bounded distance. Rule implemented: walk each boundary outward one position at a
 *     time, at most INC_EXTEND_MAX (20) positions; stop at the first node with nw < INC_NW_STOP
 *     (4); if none qualifies, stop at the position with the smallest nw seen (the nearest one on
 *     ties). nw is that of g_old.
 *  4. Window = old positions [beg, end]. Prefix = old_order[:beg] and suffix = old_order[end+1:],
 *     both mapped to g_new and filtered to the nodes still present. The window grows until the
 *     merge is topological: a prefix node with a predecessor outside the prefix or later in it, a
 *     window node with a predecessor in the suffix, or a suffix node with a predecessor later in
 *     the suffix (dependencies the rewrite created) pulls the boundary over it. A window covering
 *     all of old_order is a full reschedule (sched_order_memory of g_new).
 *  5. S_new = the nodes of g_new in neither prefix nor suffix (nodes the rewrite added are in
 *     it). S_new is cut into parts at nodes with nw <= 1 computed on the sub-graph S_new induces:
 *     part(v) = the number of such cut nodes among v and its ancestors in S_new. Every edge goes
 *     from a part to the same or a later one, so parts run one after another.
 *  6. The merged order prefix + parts + suffix is built with each part in node-index order (which
 *     is topological), then each part, a contiguous window of it, is re-ordered by
 *     sdp_order_part, exactly as sched_order_memory orders a part, the window's memory context
 *     (values live across it, the residents) coming from the merged order (sdp_prob_build):
 *     exactly up to exact_max_nodes nodes, otherwise a beam over contracted chains followed by
 *     exact windows around the part's peak step. A window keeps its order unless the search
 *     lowers its peak. The only difference is the default beam width, INC_BEAM_DEFAULT: the
 *     parts here are a few dozen nodes.
 *  7. Peak repair (beyond Algorithm 2): when the merged order peaks outside the window, the old
 *     order there was never ordered for that peak (sched_order_memory leaves stretches below the
 *     peak it reached as they are), so exact windows of single nodes around the new peak step
 *     are re-ordered while that lowers it (sdp_refine). Without this, a rewrite that lowers the
 *     old peak often leaves a second, equal peak elsewhere that only a full reschedule would fix.
 * The result is checked with sched_order_valid (a failure falls back to a full reschedule; debug
 * builds assert, since the window rules make it impossible). */
#include "sched-impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define INC_EXTEND_MAX 20
#define INC_NW_STOP 4
#define INC_BEAM_DEFAULT 128 /* beam_width's default here (sched_order_memory's: 1024) */

#define GROUP_PREFIX 0
#define GROUP_SUFFIX INT_MAX
#define GROUP_WINDOW (-1)

/* Scratch sized once per call (DESIGN.md: no malloc in inner loops). */
typedef struct inc {
    const ir_graph *g_old, *g;
    const int *old_order;
    sdp_ctx co, cn;             /* adjacency and memory facts of g_old and g_new */
    int *old_of_id, *new_of_id; /* id -> node index, -1 when absent */
    uint32_t n_ids;
    int *old_pos;  /* g_old node -> position in old_order */
    int *group;    /* g node -> GROUP_PREFIX, 1 + part, GROUP_SUFFIX, or GROUP_WINDOW */
    int *sub;      /* S_new in ascending node index (topological: g->nodes is) */
    int *loc;      /* g node -> index in sub, -1 outside */
    sdp_orderer w; /* w.ord: the merged order of g_new, and the parts' searches */
    sched_dp_stats stats;
    int *bound, *cursor; /* where each part starts in ord; a counting sort's cursors */
    int *stamp, *stack;  /* searches on g_old */
    uint64_t *anc, *des; /* bitsets over sub */
} inc;

static void inc_free(inc *c) {
    sdp_orderer_free(&c->w);
    sdp_ctx_free(&c->co);
    sdp_ctx_free(&c->cn);
    free(c->old_of_id);
    free(c->new_of_id);
    free(c->old_pos);
    free(c->group);
    free(c->sub);
    free(c->loc);
    free(c->bound);
    free(c->cursor);
    free(c->stamp);
    free(c->stack);
    free(c->anc);
    free(c->des);
}

static ir_status inc_init(inc *c, const sched_dp_options *o, ir_diag *d) {
    const ir_graph *g = c->g, *go = c->g_old;
    ir_status st;
    if ((st = sdp_ctx_init(&c->co, go, d)) != IR_OK || (st = sdp_ctx_init(&c->cn, g, d)) != IR_OK)
        return st;
    uint32_t ids = 0;
    for (int k = 0; k < go->n_nodes; k++)
        if (go->nodes[k].id + 1 > ids) ids = go->nodes[k].id + 1;
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].id + 1 > ids) ids = g->nodes[k].id + 1;
    c->n_ids = ids;
    size_t nn = (size_t)g->n_nodes + 1, no = (size_t)go->n_nodes + 1;
    c->old_of_id = malloc(sizeof(int) * ((size_t)ids + 1));
    c->new_of_id = malloc(sizeof(int) * ((size_t)ids + 1));
    c->old_pos = malloc(sizeof(int) * no);
    c->group = malloc(sizeof(int) * nn);
    c->sub = malloc(sizeof(int) * nn);
    c->loc = malloc(sizeof(int) * nn);
    c->bound = malloc(sizeof(int) * (nn + 2));
    c->cursor = malloc(sizeof(int) * (nn + 2));
    c->stamp = calloc(no, sizeof(int));
    c->stack = malloc(sizeof(int) * no);
    if (!c->old_of_id || !c->new_of_id || !c->old_pos || !c->group || !c->sub || !c->loc ||
        !c->bound || !c->cursor || !c->stamp || !c->stack)
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for incremental scheduling");
    for (uint32_t i = 0; i <= ids; i++) c->old_of_id[i] = c->new_of_id[i] = -1;
    for (int k = 0; k < go->n_nodes; k++) c->old_of_id[go->nodes[k].id] = k;
    for (int k = 0; k < g->n_nodes; k++) c->new_of_id[g->nodes[k].id] = k;
    for (int s = 0; s < go->n_nodes; s++) c->old_pos[c->old_order[s]] = s;
    return sdp_orderer_init(&c->w, &c->cn, o, INC_BEAM_DEFAULT, &c->stats, d);
}

/* nw(v) = |V| - |anc(v)| - |des(v)| - 1 of one node of g_old, by two searches; stamp[] holds the
 * last search that reached each node, so nothing needs clearing between calls. ExtendBound needs
 * nw at a few dozen positions only, which is cheaper than every node's. */
static int node_nw(inc *c, int v, int *epoch) {
    const sdp_ctx *a = &c->co;
    int count = 0;
    for (int dir = 0; dir < 2; dir++) {
        const int *off = dir ? a->su_off : a->pr_off, *to = dir ? a->su : a->pr;
        int e = ++*epoch, sp = 0;
        c->stack[sp++] = v;
        while (sp) {
            int u = c->stack[--sp];
            for (int j = off[u]; j < off[u + 1]; j++) {
                int w = to[j];
                if (c->stamp[w] == e) continue;
                c->stamp[w] = e;
                count++;
                c->stack[sp++] = w;
            }
        }
    }
    return a->n - count - 1;
}

/* ExtendBound (see the file comment): the boundary reached from old position i. */
static int extend_bound(inc *c, int i, int dir, int *epoch) {
    int n = c->g_old->n_nodes, best = i, best_nw = INT_MAX;
    for (int l = 1; l <= INC_EXTEND_MAX; l++) {
        int j = i + dir * l;
        if (j < 0 || j >= n) return j < 0 ? 0 : n - 1; /* the order's end is a perfect bound */
        int w = node_nw(c, c->old_order[j], epoch);
        if (w < INC_NW_STOP) return j;
        if (w < best_nw) {
            best_nw = w;
            best = j;
        }
    }
    return best;
}

/* The g_new index of the node at old position s, -1 when the rewrite removed it. */
static int new_at(const inc *c, int s) {
    return c->new_of_id[c->g_old->nodes[c->old_order[s]].id];
}

static int old_pos_of_new(const inc *c, int k) {
    return c->old_pos[c->old_of_id[c->g->nodes[k].id]];
}

/* Assigns prefix / window / suffix groups for [beg, end] and widens the window where the merge
 * would not be topological (see the file comment). Returns true when nothing had to change. */
static bool settle_window(inc *c, int *beg, int *end) {
    const sdp_ctx *a = &c->cn;
    int n_old = c->g_old->n_nodes, nb = *beg, ne = *end;
    for (int k = 0; k < c->g->n_nodes; k++) c->group[k] = GROUP_WINDOW;
    for (int s = 0; s < n_old; s++) {
        int k = new_at(c, s);
        if (k >= 0 && (s < *beg || s > *end)) c->group[k] = s < *beg ? GROUP_PREFIX : GROUP_SUFFIX;
    }
    for (int k = 0; k < c->g->n_nodes; k++) {
        int gk = c->group[k];
        if (gk == GROUP_WINDOW) {
            for (int j = a->pr_off[k]; j < a->pr_off[k + 1]; j++)
                if (c->group[a->pr[j]] == GROUP_SUFFIX && old_pos_of_new(c, a->pr[j]) > ne)
                    ne = old_pos_of_new(c, a->pr[j]);
            continue;
        }
        int pk = old_pos_of_new(c, k);
        for (int j = a->pr_off[k]; j < a->pr_off[k + 1]; j++) {
            int p = a->pr[j], gp = c->group[p];
            int pp = gp == GROUP_WINDOW ? -1 : old_pos_of_new(c, p);
            if (gk == GROUP_PREFIX && (gp != GROUP_PREFIX || pp > pk)) {
                if (pk < nb) nb = pk; /* k must now run after p: re-schedule it */
            } else if (gk == GROUP_SUFFIX && gp == GROUP_SUFFIX && pp > pk) {
                if (pp > ne) ne = pp;
            }
        }
    }
    bool same = nb == *beg && ne == *end;
    *beg = nb;
    *end = ne;
    return same;
}

/* nw on the sub-graph induced by sub[0..m) (ascending node indices, hence topological), then the
 * part of each node: the number of nw <= 1 nodes among itself and its ancestors in sub. Parts go
 * into group[] as 1 + part; returns the number of parts. */
static int partition(inc *c, int m) {
    const sdp_ctx *a = &c->cn;
    size_t wpr = ((size_t)m + 63) / 64;
    /* Ancestors in index order (topological), descendants in reverse. */
    for (int dir = 0; dir < 2; dir++) {
        uint64_t *rel = dir ? c->des : c->anc;
        const int *off = dir ? a->su_off : a->pr_off, *to = dir ? a->su : a->pr;
        memset(rel, 0, sizeof(uint64_t) * wpr * (size_t)m);
        for (int t = 0; t < m; t++) {
            int i = dir ? m - 1 - t : t, k = c->sub[i];
            uint64_t *ri = rel + wpr * (size_t)i;
            for (int j = off[k]; j < off[k + 1]; j++) {
                int q = c->loc[to[j]];
                if (q < 0) continue;
                const uint64_t *rq = rel + wpr * (size_t)q;
                for (size_t w = 0; w < wpr; w++) ri[w] |= rq[w];
                ri[q / 64] |= 1ULL << (q % 64);
            }
        }
    }
    int *cut = c->cursor; /* free until the merge */
    for (int i = 0; i < m; i++) {
        int rel = 0;
        for (size_t w = 0; w < wpr; w++)
            rel += sdp_popcount64(c->anc[wpr * (size_t)i + w]) +
                   sdp_popcount64(c->des[wpr * (size_t)i + w]);
        cut[i] = m - rel - 1 <= 1;
    }
    int parts = 0;
    for (int i = 0; i < m; i++) {
        int rank = cut[i];
        const uint64_t *ai = c->anc + wpr * (size_t)i;
        for (int q = 0; q < i; q++)
            if (cut[q] && (ai[q / 64] >> (q % 64) & 1)) rank++;
        c->group[c->sub[i]] = 1 + rank;
        if (rank + 1 > parts) parts = rank + 1;
    }
    return parts;
}

/* I_S: old positions of touched nodes, or of the old neighbours of touched nodes that only g_new
 * has. Returns false when nothing maps to the old order. */
static bool touched_range(const inc *c, const uint32_t *touched, int n_touched, int *lo, int *hi) {
    int mn = INT_MAX, mx = -1;
    for (int t = 0; t < n_touched; t++) {
        uint32_t id = touched[t];
        if (id >= c->n_ids) continue;
        int ko = c->old_of_id[id], kn = c->new_of_id[id];
        if (ko >= 0) {
            int s = c->old_pos[ko];
            mn = s < mn ? s : mn;
            mx = s > mx ? s : mx;
            continue;
        }
        if (kn < 0) continue;
        for (int dir = 0; dir < 2; dir++) {
            const int *off = dir ? c->cn.su_off : c->cn.pr_off, *to = dir ? c->cn.su : c->cn.pr;
            for (int j = off[kn]; j < off[kn + 1]; j++) {
                int o = c->old_of_id[c->g->nodes[to[j]].id];
                if (o < 0) continue;
                int s = c->old_pos[o];
                mn = s < mn ? s : mn;
                mx = s > mx ? s : mx;
            }
        }
    }
    *lo = mn;
    *hi = mx;
    return mx >= 0;
}

/* Builds the merged order and orders the parts; false when the merge is not topological. */
static ir_status merge_and_order(inc *c, int beg, int end, bool *valid, ir_diag *d) {
    const ir_graph *g = c->g;
    int n = g->n_nodes, n_old = c->g_old->n_nodes, m = 0;
    for (int k = 0; k < n; k++) {
        c->loc[k] = -1;
        if (c->group[k] == GROUP_WINDOW) {
            c->loc[k] = m;
            c->sub[m++] = k;
        }
    }
    size_t words = ((size_t)m + 63) / 64 * (size_t)(m ? m : 1);
    c->anc = malloc(sizeof(uint64_t) * words);
    c->des = malloc(sizeof(uint64_t) * words);
    if (!c->anc || !c->des)
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for a window of %d nodes", m);
    int parts = m ? partition(c, m) : 0;
    /* prefix, then the parts (each in index order: a stable counting sort of sub), then suffix */
    int w = 0;
    for (int s = 0; s < beg; s++) {
        int k = new_at(c, s);
        if (k >= 0) c->w.ord[w++] = k;
    }
    int *b = c->bound; /* part p occupies ord[b[p], b[p + 1]) */
    memset(b, 0, sizeof(int) * (size_t)(parts + 2));
    for (int i = 0; i < m; i++) b[c->group[c->sub[i]] + 1]++;
    b[0] = w;
    for (int p = 1; p <= parts + 1; p++) b[p] += b[p - 1];
    for (int p = 0; p <= parts; p++) c->cursor[p] = b[p];
    for (int i = 0; i < m; i++) c->w.ord[c->cursor[c->group[c->sub[i]]]++] = c->sub[i];
    w += m;
    for (int s = end + 1; s < n_old; s++) {
        int k = new_at(c, s);
        if (k >= 0) c->w.ord[w++] = k;
    }
    *valid = w == n && sched_order_valid(g, c->w.ord, n);
    if (!*valid) return IR_OK;
    sdp_positions(&c->cn, c->w.ord, c->w.pos, c->w.lastpos);
    for (int p = 1; p <= parts; p++) {
        if (b[p + 1] - b[p] < 2) continue;
        size_t peak;
        bool exact;
        ir_status st = sdp_order_part(&c->w, b[p], b[p + 1], &peak, &exact, d);
        if (st != IR_OK) return st;
    }
    /* Peak repair: when the merged order now peaks outside the window, that stretch of the old
     * order was never ordered for this peak (sched_order_memory leaves parts below the peak it
     * reached as they are), so refine around it as sched_order_memory would. */
    size_t peak;
    int q;
    ir_status st = sdp_window_peak(&c->w, 0, n, &peak, &q, d);
    if (st == IR_OK && (q < b[1] || q >= b[parts + 1])) st = sdp_refine(&c->w, 0, n, 0, &peak, d);
    if (st != IR_OK) return st;
    *valid = sched_order_valid(g, c->w.ord, n);
    return IR_OK;
}

ir_status sched_incremental(const ir_graph *g_old, const int *old_order, const ir_graph *g_new,
                            const uint32_t *touched, int n_touched, const sched_dp_options *o,
                            int *new_order, ir_diag *d) {
    if (!sched_order_valid(g_old, old_order, g_old->n_nodes))
        return ir_diag_set(d, IR_ERR_INVALID,
                           "the old order is not a topological permutation of the old graph's %d "
                           "nodes",
                           g_old->n_nodes);
    inc c = {.g_old = g_old, .g = g_new, .old_order = old_order};
    int n_old = g_old->n_nodes, lo, hi, epoch = 0;
    bool valid = false;
    ir_status st = inc_init(&c, o, d);
    if (st != IR_OK) goto out;
    if (n_old == 0 || !touched_range(&c, touched, n_touched, &lo, &hi)) goto full;
    int beg = extend_bound(&c, lo, -1, &epoch), end = extend_bound(&c, hi, 1, &epoch);
    while (!settle_window(&c, &beg, &end)) {
    }
    if (beg <= 0 && end >= n_old - 1) goto full;
    if ((st = merge_and_order(&c, beg, end, &valid, d)) != IR_OK) goto out;
    if (valid) {
        memcpy(new_order, c.w.ord, sizeof(int) * (size_t)g_new->n_nodes);
        goto out;
    }
#ifdef MAGPIE_DEBUG
    IR_ASSERT(!"the incremental merge is not a topological order");
#endif
full:
    st = sched_order_memory(g_new, o, new_order, NULL, d);
out:
    inc_free(&c);
    return st;
}
