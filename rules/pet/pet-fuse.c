/* pet-fuse.c - a correction computed by the mutant's own conv (PET paper §5.3, figure 6): Conv-1
 * of the mutant and its correction Conv-2 share the weight W1, so one Conv-1-2 runs on the
 * concatenation of both data inputs and its output is split into what each produced. This
 * saves the correction's kernel launch, which is what makes small corrections affordable.
 *
 * Two layouts, whichever fits more of a conv's corrections (the batch when tied):
 *  - batch: the correction's input has the mutant input's spatial windows (extent, first pad,
 *    output count: a correction of whole images): concatenated along dim 0, split along dim 0;
 *  - a spatial dim j: the two inputs agree on the batch and on every other spatial dim's
 *    windows. Along j the correction's own pads become explicit zeros (a Pad), preceded by
 *    enough zeros that the mutant's outputs read the zeros they read before and that the
 *    correction's first window starts on a stride; the fused conv keeps the mutant's pads. Its
 *    output along j is the mutant's outputs, a few outputs straddling the seam (dropped), the
 *    correction's outputs, and so on for every correction fused into the same conv.
 * Weights, bias, group, strides and dilations must be the same values (the same IR values of
 * the replacement, and equal attributes): then every output of the fused conv is one of the two
 * convs' outputs, exactly. The verifier checks the result anyway (pet-correct.c). */
#include "pet-correct-impl.h"

#include <stdio.h>

#define FUSE_MAX 64 /* corrections fused into one conv */

static ir_status nomem(pc_ctx *c) {
    return ir_diag_set(c->d, IR_ERR_NOMEM, "PET: out of memory fusing a correction");
}

/* Whether correction conv q can run inside mutant conv m along axis ax (0: batch, 2 + j:
 * spatial j), given both geometries. */
static bool eligible(const ir_graph *h, const ir_node *m, const pc_geom *gm, const ir_node *q,
                     const pc_geom *gq, int ax) {
    const ir_shape *tm = &h->values[m->in[0]].shape, *tq = &h->values[q->in[0]].shape;
    if (ax != 0 && tm->dims[0] != tq->dims[0]) return false;
    for (int i = 0; i < gm->S; i++) {
        if (2 + i == ax) continue;
        /* the same windows: same extent, same first pad, as many outputs (the end pads may
         * differ where the last window ends before the padding: it reads none of it) */
        if (gm->in[i] != gq->in[i] || gm->pb[i] != gq->pb[i] || gm->out[i] != gq->out[i])
            return false;
    }
    return true;
}

/* Whether q reads m's weight and bias with m's group, strides and dilations. */
static bool same_op(const ir_node *m, const pc_geom *gm, const ir_node *q, const pc_geom *gq) {
    int bm = m->n_in > 2 ? m->in[2] : -1, bq = q->n_in > 2 ? q->in[2] : -1;
    if (m->in[1] != q->in[1] || bm != bq || gm->S != gq->S) return false;
    if (ir_attr_int(m, "group", 1) != ir_attr_int(q, "group", 1)) return false;
    for (int i = 0; i < gm->S; i++)
        if (gm->s[i] != gq->s[i] || gm->d[i] != gq->d[i] || gm->k[i] != gq->k[i]) return false;
    return true;
}

/* A fresh value of h named after base. */
static int fresh(pc_ctx *c, const char *base) {
    const char *nm = pc_name(c, base);
    return nm ? ir_graph_add_value(c->h, nm, IR_F32, NULL) : -1;
}

/* Fuses the n corrections q[] into mutant conv mi along axis ax. */
static ir_status fuse_into(pc_ctx *c, int mi, const pc_geom *gm, const int *q, const pc_geom *gq,
                           int n, int ax) {
    ir_graph *h = c->h;
    ir_status st = IR_OK;
    int segs[FUSE_MAX + 1], outs[2 * FUSE_MAX + 2], no = 0;
    int64_t sizes[2 * FUSE_MAX + 2];
    const ir_node *m = &h->nodes[mi];
    segs[0] = m->in[0];
    outs[no] = m->out[0];
    sizes[no++] = h->values[m->out[0]].shape.dims[ax];
    if (ax == 0) {
        for (int i = 0; i < n; i++) {
            const ir_node *qn = &h->nodes[q[i]];
            segs[1 + i] = qn->in[0];
            outs[no] = qn->out[0];
            sizes[no++] = h->values[qn->out[0]].shape.dims[0];
        }
    } else {
        int j = ax - 2;
        int64_t s = gm->s[j], dk = (gm->k[j] - 1) * gm->d[j] + 1, pb = gm->pb[j];
        int64_t len = gm->in[j], done = gm->out[j];
        /* the mutant's last windows read up to len + zmin: zeros, as its end padding gave */
        int64_t zmin = (done - 1) * s - pb + dk - len;
        if (zmin < 0) zmin = 0;
        for (int i = 0; i < n; i++) {
            const ir_node *qn = &h->nodes[q[i]];
            int64_t u0 = (len + zmin + pb + s - 1) / s, z = u0 * s - pb - len;
            int64_t r = h->values[qn->in[0]].shape.rank, pads[2 * IR_MAX_RANK] = {0};
            pads[ax] = gq[i].pb[j] + z;
            pads[r + ax] = gq[i].pe[j];
            segs[1 + i] = qn->in[0];
            if (pads[ax] || pads[r + ax]) {
                int in[2] = {qn->in[0], pc_ints(c, (int)(2 * r), pads)};
                if (in[1] < 0) return nomem(c);
                if (pc_emit(c, IR_OP_Pad, "fuse.pad", 2, in, 1, &segs[1 + i], 0, NULL, &st) < 0)
                    return st;
            }
            if (u0 > done) {
                if ((outs[no] = fresh(c, "fuse.seam")) < 0) return nomem(c);
                sizes[no++] = u0 - done;
            }
            outs[no] = h->nodes[q[i]].out[0]; /* not qn: emitting may move h->nodes */
            sizes[no++] = gq[i].out[j];
            len += z + gq[i].pb[j] + gq[i].in[j] + gq[i].pe[j];
            done = u0 + gq[i].out[j];
            zmin = 0; /* a correction's own windows end where its segment ends */
        }
        int64_t total = (len + pb + gm->pe[j] - dk) / s + 1;
        if (total > done) {
            if ((outs[no] = fresh(c, "fuse.tail")) < 0) return nomem(c);
            sizes[no++] = total - done;
        }
    }
    /* Concat -> the mutant's conv -> Split into its old output and the corrections' outputs */
    ir_attr axis = {.name = "axis", .type = IR_ATTR_INT, .i = ax};
    int cat, fout = fresh(c, "fuse.out");
    if (fout < 0) return nomem(c);
    if (pc_emit(c, IR_OP_Concat, "fuse.cat", n + 1, segs, 1, &cat, 1, &axis, &st) < 0) return st;
    ir_node *mn = &h->nodes[mi];
    mn->in[0] = cat;
    mn->out[0] = fout;
    h->values[fout].producer = mi;
    ir_diag d2 = {{0}};
    if ((st = ir_node_infer(h, mn, &d2)) != IR_OK)
        return ir_diag_set(c->d, IR_ERR_INTERNAL, "PET fusion: %s", d2.msg);
    for (int i = 0; i < n; i++) { /* detached: the final prune removes the correction's conv */
        int dead = fresh(c, "fuse.dead");
        if (dead < 0) return nomem(c);
        h->nodes[q[i]].out[0] = dead;
        h->values[dead].producer = q[i];
        h->values[dead].shape = h->values[h->nodes[q[i]].in[0]].shape;
    }
    int in[2] = {fout, pc_ints(c, no, sizes)};
    if (in[1] < 0) return nomem(c);
    int si = ir_graph_add_node(h, IR_OP_Split, pc_name(c, "fuse.split"), 2, in, no, outs, 1, &axis);
    if (si < 0) return nomem(c);
    if ((st = ir_node_infer(h, &h->nodes[si], &d2)) != IR_OK)
        return ir_diag_set(c->d, IR_ERR_INTERNAL, "PET fusion: %s", d2.msg);
    return IR_OK;
}

ir_status pc_fuse(pc_ctx *c, int *n_fused) {
    ir_graph *h = c->h;
    if (c->n_convs == 0) return IR_OK;
    pc_geom *gq = malloc(sizeof *gq * (size_t)c->n_convs);
    unsigned char *used = calloc((size_t)c->n_convs, 1);
    ir_status st = IR_OK;
    if (!gq || !used) {
        st = nomem(c);
        goto out;
    }
    for (int i = 0; i < c->n_convs && st == IR_OK; i++)
        st = pc_window_geom(h, &h->nodes[c->convs[i]], false, &gq[i], c->d);
    for (int mi = 0; mi < c->n_mutant && st == IR_OK; mi++) {
        const ir_node *m = &h->nodes[mi];
        pc_geom gm;
        if (m->op != IR_OP_Conv || pc_window_geom(h, m, false, &gm, NULL) != IR_OK) continue;
        int best_ax = -1, best = 0;
        for (int ax = 0; ax < 2 + gm.S; ax = ax ? ax + 1 : 2) {
            int cnt = 0;
            for (int i = 0; i < c->n_convs; i++) {
                const ir_node *q = &h->nodes[c->convs[i]];
                cnt += !used[i] && same_op(m, &gm, q, &gq[i]) && eligible(h, m, &gm, q, &gq[i], ax);
            }
            if (cnt > best) best = cnt, best_ax = ax;
        }
        if (best == 0) continue;
        int q[FUSE_MAX], n = 0;
        pc_geom g[FUSE_MAX];
        for (int i = 0; i < c->n_convs && n < FUSE_MAX; i++) {
            const ir_node *qn = &h->nodes[c->convs[i]];
            if (used[i] || !same_op(m, &gm, qn, &gq[i]) ||
                !eligible(h, m, &gm, qn, &gq[i], best_ax))
                continue;
            used[i] = 1;
            g[n] = gq[i];
            q[n++] = c->convs[i];
        }
        st = fuse_into(c, mi, &gm, q, g, n, best_ax);
        if (st == IR_OK) *n_fused += n;
    }
out:
    free(gq);
    free(used);
    return st;
}
