/* sched-window.c - what the memory-minimizing scheduler knows about a graph (sdp_ctx), and the
 * window problems it solves: a block [lo, hi) of an order, re-ordered while the rest stays, with
 * the memory rules of sched_memory_compute restated over the block (sched-impl.h). Any order of a
 * window's nodes that respects the edges among them keeps the whole order valid, because the
 * window's outside predecessors all come before lo and its outside successors after hi.
 *
 * Also the units a window is searched over: single nodes (exact) or contracted chains. */
#include "ir-impl.h"
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- the context */

/* c->floor (sched-impl.h): each fission group's replay peak, in node index order, at the group's
 * nodes that read nothing the group produces. Left NULL without groups. */
static ir_status group_floors(sdp_ctx *c, const int *root, ir_diag *d) {
    const ir_graph *g = c->g;
    sfg_groups f;
    ir_status st = IR_OK;
    int *ident = malloc(sizeof(int) * ((size_t)c->n + 1));
    if (!ident) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the fission groups");
    for (int i = 0; i < c->n; i++) ident[i] = i;
    if ((st = sfg_find(&f, g, ident, root, d)) != IR_OK || f.n == 0) goto out;
    if (!(c->floor = calloc((size_t)c->n + 1, sizeof(size_t)))) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the fission groups");
        goto out;
    }
    for (int k = 0; k < f.n; k++) {
        size_t replay = sfg_replay(&f, g, root, k, NULL, NULL);
        for (int j = f.off[k]; j < f.off[k + 1]; j++) {
            int x = f.node[j];
            bool source = true;
            for (int q = c->in_off[x]; q < c->in_off[x + 1] && source; q++)
                source = f.of[g->values[c->in[q]].producer] != k;
            if (source) c->floor[x] = replay;
        }
    }
out:
    sfg_free(&f);
    free(ident);
    return st;
}

/* Turns per-row counts (cnt[i] for row i) into CSR offsets; cnt is left as the write cursors. */
static int *csr_offsets(int rows, int *cnt) {
    int *off = malloc(sizeof(int) * (size_t)(rows + 1));
    if (!off) return NULL;
    off[0] = 0;
    for (int i = 0; i < rows; i++) {
        off[i + 1] = off[i] + cnt[i];
        cnt[i] = off[i];
    }
    return off;
}

ir_status sdp_ctx_init(sdp_ctx *c, const ir_graph *g, ir_diag *d) {
    memset(c, 0, sizeof *c);
    int n = g->n_nodes, nv = g->n_values;
    c->g = g;
    c->n = n;
    c->nv = nv;
    size_t sn = (size_t)n + 1, sv = (size_t)nv + 1;
    int *cnt = calloc(sv > sn ? sv : sn, sizeof(int)), *stamp = malloc(sizeof(int) * (sv + 2 * sn));
    c->vbytes = calloc(sv, sizeof(size_t));
    c->is_out = calloc(sv, 1);
    c->ws = calloc(sn, sizeof(size_t));
    c->vmap = malloc(sizeof(int) * sv);
    c->in_off = calloc(sn, sizeof(int));
    c->out_off = calloc(sn, sizeof(int));
    uint8_t *read = calloc(sv, 1);
    int *woff = NULL, *war = NULL, *root = malloc(sizeof(int) * sv);
    ir_status st = IR_OK;
    if (!cnt || !stamp || !c->vbytes || !c->is_out || !c->ws || !c->vmap || !c->in_off ||
        !c->out_off || !read || !root)
        goto out_nomem;
    for (int v = 0; v < nv; v++) c->vmap[v] = -1;
    for (size_t i = 0; i < sv + 2 * sn; i++) stamp[i] = -1;
    sfg_roots(g, root);

    /* Per node: the distinct produced values it reads, with the roots of the in-place chains they
     * belong to (whose buffers they read), and the values it writes. */
    size_t n_in = 0, n_out = 0;
    for (int x = 0; x < n; x++) {
        const ir_node *nd = &g->nodes[x];
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i];
            if (v < 0 || v >= nv) continue;
            read[v] = 1;
            if (g->values[v].producer >= 0 && stamp[v] != x) stamp[v] = x, n_in++;
            int r = root[v];
            if (g->values[r].producer >= 0 && stamp[r] != x) stamp[r] = x, n_in++;
        }
        for (int i = 0; i < nd->n_out; i++)
            if (nd->out[i] >= 0 && nd->out[i] < nv) n_out++;
    }
    c->in = malloc(sizeof(int) * (n_in + 1));
    c->out = malloc(sizeof(int) * (n_out + 1));
    if (!c->in || !c->out) goto out_nomem;
    for (size_t i = 0; i < sv; i++) stamp[i] = -1;
    n_in = n_out = 0;
    for (int x = 0; x < n; x++) {
        const ir_node *nd = &g->nodes[x];
        c->in_off[x] = (int)n_in;
        c->out_off[x] = (int)n_out;
        for (int i = 0; i < nd->n_in; i++) {
            if (nd->in[i] < 0 || nd->in[i] >= nv) continue;
            /* the value, then its chain's root (a producer of the root precedes the value's) */
            for (int w = 0, v = nd->in[i]; w < 2; w++, v = root[nd->in[i]]) {
                if (g->values[v].producer < 0 || stamp[v] == x) continue;
                int p = g->values[v].producer;
                if (p >= x) {
                    st = ir_node_fail(d, IR_ERR_INVALID, nd,
                                      "reads '%s' produced by a later node: the graph's node "
                                      "order is not topological",
                                      g->values[v].name);
                    goto out;
                }
                stamp[v] = x;
                c->in[n_in++] = v;
            }
        }
        for (int i = 0; i < nd->n_out; i++)
            if (nd->out[i] >= 0 && nd->out[i] < nv) c->out[n_out++] = nd->out[i];
        c->ws[x] = ir_node_workspace(g, nd);
    }
    c->in_off[n] = (int)n_in;
    c->out_off[n] = (int)n_out;

    for (int v = 0; v < nv; v++) c->is_out[v] = (g->values[v].flags & IR_VF_OUTPUT) != 0;
    for (int v = 0; v < nv; v++) /* a produced chain holding a graph output keeps its buffer */
        if (c->is_out[v] && g->values[root[v]].producer >= 0) c->is_out[root[v]] = 1;
    for (int v = 0; v < nv; v++) {
        const ir_value *val = &g->values[v];
        if (val->producer >= 0) {
            c->vbytes[v] = sfg_value_bytes(g, root, v);
        } else if ((val->flags & IR_VF_INPUT) || (val->blob && (read[v] || c->is_out[v]))) {
            c->resident += ir_value_bytes(val); /* sched_memory_compute's residents */
        }
    }

    /* Readers of each value (transpose of in). */
    memset(cnt, 0, sizeof(int) * sv);
    for (size_t k = 0; k < n_in; k++) cnt[c->in[k]]++;
    if (!(c->rd_off = csr_offsets(nv, cnt))) goto out_nomem;
    c->rd = malloc(sizeof(int) * (n_in + 1));
    if (!c->rd) goto out_nomem;
    for (int x = 0; x < n; x++)
        for (int k = c->in_off[x]; k < c->in_off[x + 1]; k++) c->rd[cnt[c->in[k]]++] = x;

    /* Distinct producer nodes of each node's inputs (with its write-after-read predecessors), and
     * its distinct reader nodes (the successors). */
    if (!sdp_war_preds(g, &woff, &war)) goto out_nomem;
    size_t n_pr = 0;
    memset(cnt, 0, sizeof(int) * sn);
    for (size_t i = 0; i < sn; i++) stamp[i] = -1;
    for (int x = 0; x < n; x++) {
        for (int k = c->in_off[x]; k < c->in_off[x + 1]; k++) {
            int p = g->values[c->in[k]].producer;
            if (stamp[p] != x) stamp[p] = x, n_pr++, cnt[x]++;
        }
        for (int k = woff[x]; k < woff[x + 1]; k++) {
            int p = war[k];
            if (p > x) {
                st = ir_node_fail(d, IR_ERR_INVALID, &g->nodes[x],
                                  "overwrites a value in place before node %d reads it: the "
                                  "graph's node order is not a valid order",
                                  p);
                goto out;
            }
            if (stamp[p] != x) stamp[p] = x, n_pr++, cnt[x]++;
        }
    }
    if (!(c->pr_off = csr_offsets(n, cnt))) goto out_nomem;
    c->pr = malloc(sizeof(int) * (n_pr + 1));
    c->su = malloc(sizeof(int) * (n_pr + 1));
    if (!c->pr || !c->su) goto out_nomem;
    for (size_t i = 0; i < sn; i++) stamp[i] = -1;
    int *scnt = stamp + sn; /* successor counts */
    memset(scnt, 0, sizeof(int) * sn);
    for (int x = 0; x < n; x++) {
        for (int k = c->in_off[x]; k < c->in_off[x + 1]; k++) {
            int p = g->values[c->in[k]].producer;
            if (stamp[p] != x) stamp[p] = x, c->pr[cnt[x]++] = p, scnt[p]++;
        }
        for (int k = woff[x]; k < woff[x + 1]; k++) {
            int p = war[k];
            if (stamp[p] != x) stamp[p] = x, c->pr[cnt[x]++] = p, scnt[p]++;
        }
    }
    if (!(c->su_off = csr_offsets(n, scnt))) goto out_nomem;
    for (int x = 0; x < n; x++)
        for (int k = c->pr_off[x]; k < c->pr_off[x + 1]; k++) c->su[scnt[c->pr[k]]++] = x;
    st = group_floors(c, root, d);
    goto out;
out_nomem:
    st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory indexing a graph of %d nodes", n);
out:
    free(cnt);
    free(stamp);
    free(read);
    free(woff);
    free(war);
    free(root);
    if (st != IR_OK) sdp_ctx_free(c);
    return st;
}

void sdp_ctx_free(sdp_ctx *c) {
    if (!c) return;
    free(c->vbytes);
    free(c->is_out);
    free(c->ws);
    free(c->in_off);
    free(c->in);
    free(c->out_off);
    free(c->out);
    free(c->rd_off);
    free(c->rd);
    free(c->pr_off);
    free(c->pr);
    free(c->su_off);
    free(c->su);
    free(c->vmap);
    free(c->floor);
    memset(c, 0, sizeof *c);
}

static int last_reader(const sdp_ctx *c, const int *pos, int v) {
    int l = -1;
    for (int k = c->rd_off[v]; k < c->rd_off[v + 1]; k++)
        if (pos[c->rd[k]] > l) l = pos[c->rd[k]];
    return l;
}

void sdp_positions(const sdp_ctx *c, const int *order, int *pos, int *lastpos) {
    for (int s = 0; s < c->n; s++) pos[order[s]] = s;
    for (int v = 0; v < c->nv; v++) lastpos[v] = last_reader(c, pos, v);
}

void sdp_positions_update(const sdp_ctx *c, const int *order, int lo, int hi, int *pos,
                          int *lastpos) {
    for (int s = lo; s < hi; s++) pos[order[s]] = s;
    for (int s = lo; s < hi; s++) {
        int x = order[s];
        for (int k = c->in_off[x]; k < c->in_off[x + 1]; k++)
            lastpos[c->in[k]] = last_reader(c, pos, c->in[k]);
    }
}

/* ---------------------------------------------------------------- windows */

ir_status sdp_prob_build(sdp_ctx *c, const int *order, const int *pos, const int *lastpos, int lo,
                         int hi, sdp_prob *p, ir_diag *d) {
    memset(p, 0, sizeof *p);
    int m = hi - lo;
    size_t e_in = 0, e_out = 0, e_pr = 0, e_su = 0;
    for (int s = lo; s < hi; s++) {
        int x = order[s];
        e_in += (size_t)(c->in_off[x + 1] - c->in_off[x]);
        e_out += (size_t)(c->out_off[x + 1] - c->out_off[x]);
        e_pr += (size_t)(c->pr_off[x + 1] - c->pr_off[x]);
        e_su += (size_t)(c->su_off[x + 1] - c->su_off[x]);
    }
    size_t nvmax = e_in + 1, sm = (size_t)m + 1;
    ir_arena *a = ir_arena_new();
    p->arena = a;
    if (!a) goto out_nomem;
#define ALLOC(ptr, count) (ptr = ir_arena_alloc(a, sizeof(*(ptr)) * (count)))
    if (!ALLOC(p->node, sm) || !ALLOC(p->add, sm) || !ALLOC(p->keep, sm) || !ALLOC(p->fo, sm + 1) ||
        !ALLOC(p->fr, e_in + 1) || !ALLOC(p->vb, nvmax) || !ALLOC(p->co, nvmax + 1) ||
        !ALLOC(p->cn, e_in + 1) || !ALLOC(p->po, sm + 1) || !ALLOC(p->pr, e_pr + 1) ||
        !ALLOC(p->so, sm + 1) || !ALLOC(p->su, e_su + 1) || !ALLOC(p->scratch, nvmax) ||
        !ALLOC(p->gval, nvmax))
        goto out_nomem;
#undef ALLOC
    p->m = m;
    p->base = c->resident;
    /* Values produced before the window and still needed after it are live throughout. */
    for (int v = 0; v < c->nv; v++) {
        int pd = c->g->values[v].producer;
        if (pd >= 0 && pos[pd] < lo && (c->is_out[v] || lastpos[v] >= hi)) p->base += c->vbytes[v];
    }
    /* Freeable values: read in the window, last read there, and not a graph output. */
    int nv = 0, nf = 0, npr = 0, nsu = 0;
    for (int i = 0; i < m; i++) {
        int x = order[lo + i];
        p->node[i] = x;
        p->fo[i] = nf;
        for (int k = c->in_off[x]; k < c->in_off[x + 1]; k++) {
            int v = c->in[k];
            if (c->is_out[v] || lastpos[v] >= hi) continue;
            if (c->vmap[v] < 0) {
                c->vmap[v] = nv;
                p->gval[nv] = v;
                p->vb[nv] = c->vbytes[v];
                if (pos[c->g->values[v].producer] < lo) p->init += c->vbytes[v];
                nv++;
            }
            p->fr[nf++] = c->vmap[v];
        }
        p->add[i] = c->ws[x];
        for (int k = c->out_off[x]; k < c->out_off[x + 1]; k++) {
            int v = c->out[k];
            p->add[i] += c->vbytes[v];
            if (c->is_out[v] || lastpos[v] >= 0) p->keep[i] += c->vbytes[v];
        }
        if (c->floor && c->floor[x] > p->add[i]) p->add[i] = c->floor[x];
        p->po[i] = npr;
        for (int k = c->pr_off[x]; k < c->pr_off[x + 1]; k++)
            if (pos[c->pr[k]] >= lo) p->pr[npr++] = pos[c->pr[k]] - lo;
        p->so[i] = nsu;
        for (int k = c->su_off[x]; k < c->su_off[x + 1]; k++)
            if (pos[c->su[k]] < hi) p->su[nsu++] = pos[c->su[k]] - lo;
    }
    p->fo[m] = nf;
    p->po[m] = npr;
    p->so[m] = nsu;
    p->nv = nv;
    /* Readers of each freeable value inside the window (an entering value may also have been
     * read before lo). */
    int nc = 0;
    for (int j = 0; j < nv; j++) {
        int v = p->gval[j];
        p->co[j] = nc;
        for (int k = c->rd_off[v]; k < c->rd_off[v + 1]; k++)
            if (pos[c->rd[k]] >= lo) p->cn[nc++] = pos[c->rd[k]] - lo;
        c->vmap[v] = -1;
    }
    p->co[nv] = nc;
    return IR_OK;
out_nomem:
    for (int i = 0; i < p->nv; i++) c->vmap[p->gval[i]] = -1;
    sdp_prob_free(p);
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory building a window of %d nodes", m);
}

void sdp_prob_free(sdp_prob *p) {
    if (!p) return;
    ir_arena_free(p->arena);
    memset(p, 0, sizeof *p);
}

size_t sdp_prob_eval(const sdp_prob *p, const int *lorder, size_t *steps, int *at) {
    int *rem = p->scratch;
    for (int j = 0; j < p->nv; j++) rem[j] = p->co[j + 1] - p->co[j];
    size_t live = p->init, peak = 0;
    if (at) *at = -1;
    for (int s = 0; s < p->m; s++) {
        int x = lorder[s];
        if (steps) steps[s] = p->base + live + p->add[x];
        if (live + p->add[x] > peak || (s == 0 && at)) {
            peak = live + p->add[x];
            if (at) *at = s;
        }
        live += p->keep[x];
        for (int k = p->fo[x]; k < p->fo[x + 1]; k++)
            if (--rem[p->fr[k]] == 0) live -= p->vb[p->fr[k]];
    }
    return p->base + peak;
}

/* ---------------------------------------------------------------- units */

ir_status sdp_units_build(const sdp_prob *p, bool contract, sdp_units *u, ir_diag *d) {
    memset(u, 0, sizeof *u);
    int m = p->m;
    size_t sm = (size_t)m + 1;
    ir_arena *a = ir_arena_new();
    u->arena = a;
    int *next = NULL, *stamp = NULL;
    if (!a) goto out_nomem;
#define ALLOC(ptr, count) (ptr = ir_arena_alloc(a, sizeof(*(ptr)) * (count)))
    if (!ALLOC(u->qo, sm + 1) || !ALLOC(u->q, sm) || !ALLOC(u->uof, sm) || !ALLOC(u->po, sm + 1) ||
        !ALLOC(u->pr, (size_t)p->po[m] + 1) || !ALLOC(u->so, sm + 1) ||
        !ALLOC(u->su, (size_t)p->so[m] + 1) || !ALLOC(u->fo, sm + 1) ||
        !ALLOC(u->fr, (size_t)p->fo[m] + 1) || !ALLOC(u->co, (size_t)p->nv + 2) ||
        !ALLOC(u->cu, (size_t)p->co[p->nv] + 1) || !ALLOC(next, sm) || !ALLOC(stamp, sm + 1))
        goto out_nomem;
#undef ALLOC
    /* x -> w is a link when x's only successor is w and w's only predecessor is x. */
    for (int x = 0; x < m; x++) next[x] = -1, stamp[x] = 0;
    if (contract)
        for (int x = 0; x < m; x++)
            if (p->so[x + 1] - p->so[x] == 1) {
                int w = p->su[p->so[x]];
                if (p->po[w + 1] - p->po[w] == 1) next[x] = w, stamp[w] = 1; /* w is no head */
            }
    int nu = 0, nq = 0;
    for (int h = 0; h < m; h++) {
        if (stamp[h]) continue;
        u->qo[nu] = nq;
        for (int x = h; x >= 0; x = next[x]) u->q[nq++] = x, u->uof[x] = nu;
        nu++;
    }
    u->qo[nu] = nq;
    u->nu = nu;
    for (int k = 0; k <= m; k++) stamp[k] = -1;
    /* A unit's predecessors are its head's, its successors its tail's (links are exclusive). */
    int npr = 0, nsu = 0;
    for (int t = 0; t < nu; t++) {
        int h = u->q[u->qo[t]], tl = u->q[u->qo[t + 1] - 1];
        u->po[t] = npr;
        for (int k = p->po[h]; k < p->po[h + 1]; k++) u->pr[npr++] = u->uof[p->pr[k]];
        u->so[t] = nsu;
        for (int k = p->so[tl]; k < p->so[tl + 1]; k++) u->su[nsu++] = u->uof[p->su[k]];
    }
    u->po[nu] = npr;
    u->so[nu] = nsu;
    /* Reader units of each value, and at which node of a unit a value can be freed: its last
     * reader in that unit. */
    int nc = 0;
    for (int j = 0; j < p->nv; j++) {
        u->co[j] = nc;
        for (int k = p->co[j]; k < p->co[j + 1]; k++) {
            int t = u->uof[p->cn[k]];
            bool dup = false;
            for (int i = u->co[j]; i < nc && !dup; i++) dup = u->cu[i] == t;
            if (!dup) u->cu[nc++] = t;
        }
    }
    u->co[p->nv] = nc;
    int nf = 0;
    for (int x = 0; x < m; x++) {
        u->fo[x] = nf;
        for (int k = p->fo[x]; k < p->fo[x + 1]; k++) {
            int j = p->fr[k];
            bool later = false; /* a later node of x's unit also reads j */
            for (int y = next[x]; y >= 0 && !later; y = next[y])
                for (int i = p->fo[y]; i < p->fo[y + 1] && !later; i++) later = p->fr[i] == j;
            if (!later) u->fr[nf++] = j;
        }
    }
    u->fo[m] = nf;
    return IR_OK;
out_nomem:
    sdp_units_free(u);
    return ir_diag_set(d, IR_ERR_NOMEM, "out of memory contracting a window of %d nodes", m);
}

void sdp_units_free(sdp_units *u) {
    if (!u) return;
    ir_arena_free(u->arena);
    memset(u, 0, sizeof *u);
}
