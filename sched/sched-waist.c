/* sched-waist.c - narrow-waist values (MAGIS section 6.1): nw(v) = |V| - |anc(v)| - |des(v)| - 1,
 * the number of nodes unrelated to v. A node with nw = 0 is comparable with every other node, so
 * every order runs all of anc(v), then v, then all of des(v): the scheduling problem splits there
 * into independent parts (sched-order-memory.c).
 *
 * Ancestor and descendant counts come from bitsets, a column block of at most SDP_NW_BLOCK nodes
 * at a time, so memory stays O(n * block / 8) whatever n is and time is O(n * edges / 64). Node
 * indices are a topological order (ir.h), so the ancestors of v all have smaller indices: block
 * [c0, c1) only touches rows >= c0 for ancestors and rows < c1 for descendants. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

#define SDP_NW_BLOCK 1024

/* Adds to cnt[v] the number of v's relatives (ancestors when up, else descendants) inside the
 * column block [c0, c0 + 64 * words). rows holds n * words scratch words. */
static void count_block(const sdp_ctx *c, bool up, int c0, int words, uint64_t *rows, int *cnt) {
    int n = c->n, c1 = c0 + 64 * words < n ? c0 + 64 * words : n;
    const int *off = up ? c->pr_off : c->su_off, *adj = up ? c->pr : c->su;
    memset(rows, 0, sizeof(uint64_t) * (size_t)n * (size_t)words);
    int first = up ? c0 : c1 - 1, last = up ? n : -1, step = up ? 1 : -1;
    for (int v = first; v != last; v += step) {
        uint64_t *row = rows + (size_t)v * (size_t)words;
        for (int k = off[v]; k < off[v + 1]; k++) {
            int p = adj[k];
            const uint64_t *pr = rows + (size_t)p * (size_t)words;
            for (int w = 0; w < words; w++) row[w] |= pr[w];
            if (p >= c0 && p < c1) row[(p - c0) >> 6] |= 1ull << ((p - c0) & 63);
        }
        int k = 0;
        for (int w = 0; w < words; w++) k += sdp_popcount64(row[w]);
        cnt[v] += k;
    }
}

ir_status sdp_narrow_waist(const sdp_ctx *c, int *nw, ir_diag *d) {
    int n = c->n;
    if (n == 0) return IR_OK;
    int words = ((n < SDP_NW_BLOCK ? n : SDP_NW_BLOCK) + 63) / 64;
    uint64_t *rows = malloc(sizeof(uint64_t) * (size_t)n * (size_t)words);
    int *anc = calloc((size_t)n, sizeof(int)), *des = calloc((size_t)n, sizeof(int));
    ir_status st = IR_OK;
    if (!rows || !anc || !des) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory counting ancestors of %d nodes", n);
        goto out;
    }
    for (int c0 = 0; c0 < n; c0 += 64 * words) {
        count_block(c, true, c0, words, rows, anc);
        count_block(c, false, c0, words, rows, des);
    }
    for (int v = 0; v < n; v++) nw[v] = n - anc[v] - des[v] - 1;
out:
    free(rows);
    free(anc);
    free(des);
    return st;
}

ir_status sched_narrow_waist(const ir_graph *g, int *nw, ir_diag *d) {
    sdp_ctx c;
    ir_status st = sdp_ctx_init(&c, g, d);
    if (st == IR_OK) st = sdp_narrow_waist(&c, nw, d);
    sdp_ctx_free(&c);
    return st;
}

int sdp_partition(const int *nw, int n, int *start) {
    /* The nw = 0 nodes are totally ordered and each is comparable with every node, so the nodes
     * between two of them in index order are exactly des(first) and anc(second): a part. */
    int k = 0;
    start[0] = 0;
    for (int v = 0; v < n; v++)
        if (nw[v] == 0 || v == n - 1) start[++k] = v + 1;
    return k;
}
