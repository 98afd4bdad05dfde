/* rules-ftree-dom.c - the graph analysis behind MAGIS Algorithm 1 on one D-graph component's
 * sub-graph G': its dominator tree T, heat (eq. 3) and score (eq. 4 with n = 2) of every node,
 * and the selection of dominators by normalized-score interval (lines 7-11).
 *
 * Invariants: G' comes as ascending node indices of g (a topological order); local index i
 * names nodes[i] and -1 the virtual root; every array lives in one work area sized for the
 * whole graph when it is made, so analyzing a component allocates nothing. Everything is
 * linear in G' up to a sort of its boundary edges and a log factor for ancestor queries, so the
 * F-Tree of a large training graph (thousands of nodes, hundreds of components) builds in
 * milliseconds. */
#include "rules-ftree-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- dominators */

void rw_ft_idom(int n, const int *pred_off, const int *pred, int *idom) {
    for (int v = 0; v < n; v++) {
        /* idom(v) = the nearest common dominator of v's predecessors; -1 (the virtual root)
         * numbers below every vertex, and every idom is below its vertex, so walking the
         * larger finger up meets at the common dominator (CHK's intersect, with topological
         * indices in place of post-order numbers). */
        int a = -2; /* no predecessor seen yet */
        for (int k = pred_off[v]; k < pred_off[v + 1]; k++) {
            int b = pred[k];
            IR_ASSERT(b >= 0 && b < v);
            if (a == -2) {
                a = b;
                continue;
            }
            while (a != b) {
                while (a > b) a = idom[a];
                while (b > a) b = idom[b];
            }
        }
        idom[v] = a == -2 ? -1 : a;
    }
}

/* ---------------------------------------------------------------- work area */

typedef struct ft_pair {
    int x;   /* a value produced outside G' */
    int key; /* preorder number of u */
    int u;   /* the dominator-tree parent of a node of G' that reads x */
} ft_pair;

struct rw_ft_work {
    int cap_n, cap_e, cap_v, log;
    int *loc;                     /* [n_nodes] local index, -1 outside the current G' */
    int *pred_off, *pred;         /* [cap_n + 1], [cap_e] */
    int *idom, *pre, *size, *ord; /* [cap_n]; ord[pre] = local index */
    int *child_off, *child, *stk; /* [cap_n + 2], [cap_n], [cap_n] */
    int *up;                      /* [log * cap_n] 2^j-th ancestors, -1 past the root */
    double *heat, *score, *inb, *acc;
    ft_pair *pairs; /* [cap_e] */
    int *vstamp;    /* [cap_v] */
    int stamp;
    int *lev, *mark; /* [cap_n] */
};

void rw_ft_work_free(rw_ft_work *w) {
    if (!w) return;
    free(w->loc);
    free(w->pred_off);
    free(w->pred);
    free(w->idom);
    free(w->pre);
    free(w->size);
    free(w->ord);
    free(w->child_off);
    free(w->child);
    free(w->stk);
    free(w->up);
    free(w->heat);
    free(w->score);
    free(w->inb);
    free(w->acc);
    free(w->pairs);
    free(w->vstamp);
    free(w->lev);
    free(w->mark);
    free(w);
}

rw_ft_work *rw_ft_work_new(const ir_graph *g) {
    rw_ft_work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    int n = g->n_nodes, e = 0;
    for (int i = 0; i < n; i++) e += g->nodes[i].n_in;
    w->cap_n = n;
    w->cap_e = e;
    w->cap_v = g->n_values;
    w->log = 1;
    while ((1 << w->log) <= n) w->log++; /* covers any depth up to n */
    size_t sn = (size_t)n + 2, se = (size_t)e + 1;
    w->loc = malloc(sn * sizeof(int));
    w->pred_off = malloc(sn * sizeof(int));
    w->pred = malloc(se * sizeof(int));
    w->idom = malloc(sn * sizeof(int));
    w->pre = malloc(sn * sizeof(int));
    w->size = malloc(sn * sizeof(int));
    w->ord = malloc(sn * sizeof(int));
    w->child_off = malloc(sn * sizeof(int));
    w->child = malloc(sn * sizeof(int));
    w->stk = malloc(sn * sizeof(int));
    w->up = malloc((size_t)w->log * sn * sizeof(int));
    w->heat = malloc(sn * sizeof(double));
    w->score = malloc(sn * sizeof(double));
    w->inb = malloc(sn * sizeof(double));
    w->acc = malloc(sn * sizeof(double));
    w->pairs = malloc(se * sizeof(ft_pair));
    w->vstamp = calloc((size_t)g->n_values + 1, sizeof(int));
    w->lev = malloc(sn * sizeof(int));
    w->mark = malloc(sn * sizeof(int));
    if (!w->loc || !w->pred_off || !w->pred || !w->idom || !w->pre || !w->size || !w->ord ||
        !w->child_off || !w->child || !w->stk || !w->up || !w->heat || !w->score || !w->inb ||
        !w->acc || !w->pairs || !w->vstamp || !w->lev || !w->mark) {
        rw_ft_work_free(w);
        return NULL;
    }
    for (int i = 0; i < n; i++) w->loc[i] = -1;
    return w;
}

/* ---------------------------------------------------------------- tree queries */

/* a is an ancestor of b or b itself (a = -1: the virtual root, everyone's ancestor). */
static inline bool is_anc(const rw_ft_work *w, int a, int b) {
    return a < 0 || (w->pre[a] <= w->pre[b] && w->pre[b] < w->pre[a] + w->size[a]);
}

/* Lowest common ancestor by binary lifting; -1 when it is the virtual root. */
static int lca(const rw_ft_work *w, int n, int a, int b) {
    if (is_anc(w, a, b)) return a;
    if (is_anc(w, b, a)) return b;
    for (int j = w->log - 1; j >= 0; j--) {
        int u = w->up[(size_t)j * (size_t)n + (size_t)a];
        if (u >= 0 && !is_anc(w, u, b)) a = u;
    }
    return w->idom[a];
}

static int cmp_pair(const void *pa, const void *pb) {
    const ft_pair *a = pa, *b = pb;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

/* Children lists, preorder numbers (children in ascending local index), subtree sizes and the
 * ancestor table of the dominator tree in w->idom. */
static void build_tree(rw_ft_work *w, int n) {
    int *off = w->child_off; /* slot 0: the root's children; slot p + 1: p's */
    memset(off, 0, ((size_t)n + 2) * sizeof(int));
    for (int v = 0; v < n; v++) off[w->idom[v] + 2]++;
    for (int p = 0; p <= n; p++) off[p + 1] += off[p];
    for (int v = 0; v < n; v++) w->child[off[w->idom[v] + 1]++] = v; /* ascending v */
    /* each slot's start moved to its end: the root's children are child[0 .. off[0]), node
     * p's are child[off[p] .. off[p + 1]) */
    for (int v = n - 1; v >= 0; v--) w->size[v] = 1;
    for (int v = n - 1; v >= 0; v--)
        if (w->idom[v] >= 0) w->size[w->idom[v]] += w->size[v];
    int sp = 0, next = 0;
    for (int k = off[0] - 1; k >= 0; k--) w->stk[sp++] = w->child[k];
    while (sp) {
        int v = w->stk[--sp];
        w->ord[next] = v;
        w->pre[v] = next++;
        for (int k = off[v + 1] - 1; k >= off[v]; k--) w->stk[sp++] = w->child[k];
    }
    IR_ASSERT(next == n);
    for (int v = 0; v < n; v++) w->up[v] = w->idom[v];
    for (int j = 1; j < w->log; j++) {
        const int *prev = w->up + (size_t)(j - 1) * (size_t)n;
        int *cur = w->up + (size_t)j * (size_t)n;
        for (int v = 0; v < n; v++) cur[v] = prev[v] < 0 ? -1 : prev[prev[v]];
    }
}

/* ---------------------------------------------------------------- heat and score */

void rw_ft_analyze(rw_ft_work *w, const ir_graph *g, const int *nodes, int n, const double *hot,
                   const double *vbytes, const unsigned char *gen, int anchor, rw_ft_comp *c) {
    IR_ASSERT(n >= 0 && n <= w->cap_n && g->n_nodes == w->cap_n && g->n_values <= w->cap_v);
    for (int i = 0; i < n; i++) {
        IR_ASSERT(i == 0 || nodes[i] > nodes[i - 1]);
        w->loc[nodes[i]] = i;
    }
    /* G''s edges: every input produced by a node of G' */
    int e = 0;
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[nodes[i]];
        w->pred_off[i] = e;
        for (int k = 0; k < nd->n_in; k++) {
            int x = nd->in[k];
            int p = x >= 0 ? g->values[x].producer : -1;
            if (p >= 0 && w->loc[p] >= 0) w->pred[e++] = w->loc[p];
        }
    }
    w->pred_off[n] = e;
    if (gen) { /* generators hang below the anchor, else below the one real source */
        int src = -1, n_src = 0;
        for (int i = 0; i < n; i++) {
            if (gen[nodes[i]] || w->pred_off[i] != w->pred_off[i + 1]) continue;
            n_src++;
            src = i;
        }
        if (anchor >= 0 && w->loc[anchor] >= 0) {
            src = w->loc[anchor];
            n_src = 1;
        }
        if (n_src == 1) {
            /* rebuild the CSR with one more edge per generator after src (a generator has at
             * least one input that is not an edge of G', so the edge array has room) */
            int extra = 0;
            for (int i = src + 1; i < n; i++)
                extra += gen[nodes[i]] && w->pred_off[i] == w->pred_off[i + 1];
            if (extra && e + extra <= w->cap_e) {
                for (int i = n - 1, to = e + extra; i >= 0; i--) {
                    bool add = i > src && gen[nodes[i]] && w->pred_off[i] == w->pred_off[i + 1];
                    int from_end = w->pred_off[i + 1], from_start = w->pred_off[i];
                    int len = from_end - from_start;
                    to -= len + add;
                    memmove(w->pred + to, w->pred + from_start, sizeof(int) * (size_t)len);
                    if (add) w->pred[to + len] = src;
                    w->pred_off[i + 1] = to + len + add;
                }
                w->pred_off[0] = 0;
                e += extra;
                w->pred_off[n] = e;
            }
        }
    }
    rw_ft_idom(n, w->pred_off, w->pred, w->idom);
    build_tree(w, n);

    /* eq. 3: a hot-spot counts at its producer and at every dominator of it in G' */
    for (int v = 0; v < n; v++) w->heat[v] = hot[nodes[v]];
    for (int v = n - 1; v >= 0; v--)
        if (w->idom[v] >= 0) w->heat[w->idom[v]] += w->heat[v];

    /* The inputs of S(v) = des(v) \ {v}. A value produced by p in G' and read by u in S(v) has
     * p in S(v) unless p = v (v strictly dominates u, and u's predecessor p, so v dominates p),
     * so G''s own values count only at their producer, once, when some strict descendant reads
     * them. A value x from outside G' counts at every v that strictly dominates one of its
     * readers: the union of the root paths of the readers' parents u_1..u_k. In preorder, +w at
     * each u_i and -w at lca(u_i, u_i+1) make every subtree sum w on that union and 0 off it. */
    if (++w->stamp == 0) { /* wrapped: old stamps could collide */
        memset(w->vstamp, 0, (size_t)w->cap_v * sizeof(int));
        w->stamp = 1;
    }
    int np = 0;
    for (int u = 0; u < n; u++) w->acc[u] = 0;
    for (int u = 0; u < n; u++) {
        const ir_node *nd = &g->nodes[nodes[u]];
        for (int k = 0; k < nd->n_in; k++) {
            int x = nd->in[k];
            if (x < 0) continue;
            int p = g->values[x].producer;
            int lp = p >= 0 ? w->loc[p] : -1;
            if (lp >= 0) {
                if (lp != u && w->vstamp[x] != w->stamp && is_anc(w, lp, u)) {
                    w->vstamp[x] = w->stamp;
                    w->acc[lp] += vbytes[x];
                }
            } else if (w->idom[u] >= 0) {
                w->pairs[np++] = (ft_pair){.x = x, .key = w->pre[w->idom[u]], .u = w->idom[u]};
            }
        }
    }
    for (int u = 0; u < n; u++) w->inb[u] = w->acc[u]; /* own outputs, not summed upwards */
    for (int u = 0; u < n; u++) w->acc[u] = 0;
    qsort(w->pairs, (size_t)np, sizeof *w->pairs, cmp_pair);
    for (int a = 0; a < np;) {
        int b = a;
        const double wx = vbytes[w->pairs[a].x];
        int last = -1;
        for (; b < np && w->pairs[b].x == w->pairs[a].x; b++) {
            int u = w->pairs[b].u;
            if (u == last) continue;
            w->acc[u] += wx;
            if (last >= 0) {
                int l = lca(w, n, last, u);
                if (l >= 0) w->acc[l] -= wx;
            }
            last = u;
        }
        a = b;
    }
    for (int v = n - 1; v >= 0; v--)
        if (w->idom[v] >= 0) w->acc[w->idom[v]] += w->acc[v];
    for (int v = 0; v < n; v++) {
        w->inb[v] += w->acc[v];
        /* eq. 4 with n = 2: half the hot-spots go, the inputs stay while each part runs */
        w->score[v] = 0.5 * w->heat[v] - w->inb[v];
    }
    for (int i = 0; i < n; i++) w->loc[nodes[i]] = -1;

    *c = (rw_ft_comp){.n = n,
                      .node = nodes,
                      .idom = w->idom,
                      .pre = w->pre,
                      .size = w->size,
                      .heat = w->heat,
                      .score = w->score,
                      .in_bytes = w->inb};
}

/* ---------------------------------------------------------------- selection */

int rw_ft_select(rw_ft_work *w, const rw_ft_comp *c, int L, int *out) {
    int n = c->n;
    IR_ASSERT(L >= 1 && n <= w->cap_n);
    double smax = 0;
    for (int v = 0; v < n; v++) smax = c->score[v] > smax ? c->score[v] : smax;
    if (!(smax > 0)) return 0; /* line 8 */
    for (int v = 0; v < n; v++) {
        /* interval l covers [l/L, (l+1)/L); level L holds the maximum itself */
        double r = c->score[v] > 0 ? floor((double)L * c->score[v] / smax) : 0;
        w->lev[v] = r >= L ? L : (int)r;
    }
    int k = 0;
    for (int l = 1; l <= L; l++) {
        /* mark[v]: some strict descendant of v is at level l (children follow parents) */
        for (int v = 0; v < n; v++) w->mark[v] = 0;
        for (int v = n - 1; v >= 0; v--) {
            int p = c->idom[v];
            if (p >= 0 && (w->mark[v] || w->lev[v] == l)) w->mark[p] = 1;
        }
        for (int v = 0; v < n; v++)
            if (w->lev[v] == l && !w->mark[v]) out[k++] = v;
    }
    return k;
}

int rw_ft_strict_subtree(const rw_ft_comp *c, int v, int *out) {
    int k = 0;
    /* descendants have larger local indices (idom precedes in topological order) */
    for (int u = v + 1; u < c->n; u++)
        if (c->pre[v] < c->pre[u] && c->pre[u] < c->pre[v] + c->size[v]) out[k++] = c->node[u];
    return k;
}
