/* sched-dp.c - the search over sets of scheduled units (Serenity, Ahn et al., MLSys 2020): a
 * state is a downset S of the window's DAG, its live bytes are a function of S alone, and the
 * least peak of any order of S is min over the units u that can come last of
 * max(peak(S - u), step(S - u, u)). The search runs level by level (level k = sets of k units):
 *  - children of every state of level k are deduplicated by set (Zobrist hash of the units,
 *    then a bitset compare), keeping the least (peak, live) one: the memo of the DP;
 *  - children whose peak exceeds tau are dropped (pruning against the best known order, or a
 *    soft budget);
 *  - a level with more than `width` states keeps the best ones by (peak, live): with a large
 *    width this never triggers and the result is exact, with a small one it is a beam.
 * Only two levels of bitsets live at a time; each kept state leaves a (parent, unit) record so
 * the order can be rebuilt, and the records are bounded by max_records: the bounds on memory are
 * fixed before the first level, whatever the graph. The tables start at SDP_FIRST_WIDTH states
 * and double, up to those bounds, only when a level needs more (most windows never do, and
 * clearing tables sized for 2^18 states cost more than their search): every decision uses the
 * final bounds, so the result is the same as with tables allocated at full size. No allocation
 * happens per state. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

#define SDP_LEVEL_BYTES (64l << 20)
#define SDP_FIRST_WIDTH (1 << 12) /* states per level the tables hold at first */
#define SDP_FIRST_RECORDS (1l << 16)

typedef struct cand {
    uint64_t h;
    size_t pk, lv; /* peak and live bytes, base excluded */
    int par, unit;
    int slot; /* its hash-table slot */
} cand;

typedef struct level {
    uint64_t *bits, *rdy; /* n * words each: scheduled units, ready units */
    size_t *pk, *lv;
    uint64_t *h;
    int *rec;
    int n, cap; /* states held, states allocated */
} level;

typedef struct search {
    const sdp_prob *p;
    const sdp_units *u;
    int words, width, cand_max, tmask; /* the final bounds: width, cand_max, max_rec */
    int cand_cap;                      /* candidates allocated (<= cand_max) */
    level lv[2];
    cand *c;
    int n_cand;
    int *table;  /* tmask + 1 slots, at least twice cand_cap */
    uint64_t *z; /* per unit: Zobrist key */
    int *r_par, *r_unit;
    long n_rec, max_rec, rec_cap;
    bool overflow;
} search;

static inline bool bit(const uint64_t *b, int i) {
    return (b[i >> 6] >> (i & 63)) & 1;
}

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->pk != y->pk) return x->pk < y->pk ? -1 : 1;
    if (x->lv != y->lv) return x->lv < y->lv ? -1 : 1;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    /* (parent, unit) names one candidate: a total order, so selecting and then sorting the kept
     * ones gives what sorting them all would */
    if (x->par != y->par) return x->par < y->par ? -1 : 1;
    return (x->unit > y->unit) - (x->unit < y->unit);
}

/* Moves the k smallest of c[0..n) to c[0..k), in no particular order (quickselect). */
static void cand_select(cand *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pv = c[lo + (hi - lo) / 2], t;
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_cmp(&c[i], &pv) < 0) i++;
            while (cand_cmp(&c[j], &pv) > 0) j--;
            if (i <= j) t = c[i], c[i++] = c[j], c[j--] = t;
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* Do (parent pa + unit ua) and (parent pb + unit ub) of the current level hold the same set? */
static bool same_set(const search *s, const level *cur, int pa, int ua, int pb, int ub) {
    const uint64_t *a = cur->bits + (size_t)pa * (size_t)s->words;
    const uint64_t *b = cur->bits + (size_t)pb * (size_t)s->words;
    for (int w = 0; w < s->words; w++) {
        uint64_t x = a[w], y = b[w];
        if ((ua >> 6) == w) x |= 1ull << (ua & 63);
        if ((ub >> 6) == w) y |= 1ull << (ub & 63);
        if (x != y) return false;
    }
    return true;
}

static void table_insert(search *s, int i) {
    int k = (int)(s->c[i].h & (uint64_t)s->tmask);
    while (s->table[k] >= 0) k = (k + 1) & s->tmask;
    s->table[k] = i;
    s->c[i].slot = k;
}

/* Keeps the best `keep` candidates (sorted by key) and re-hashes them. */
static void cand_cut(search *s, int keep) {
    for (int i = 0; i < s->n_cand; i++) s->table[s->c[i].slot] = -1;
    if (s->n_cand > keep) {
        cand_select(s->c, s->n_cand, keep);
        s->n_cand = keep;
        s->overflow = true;
    }
    qsort(s->c, (size_t)s->n_cand, sizeof(cand), cand_cmp);
    for (int i = 0; i < s->n_cand; i++) table_insert(s, i);
}

/* Doubles the candidate array (at most to cand_max) and re-hashes it into a table twice as
 * large. Lookups find a set's one entry wherever it sits, so nothing else changes. */
static bool cand_grow(search *s) {
    int cap = s->cand_cap > s->cand_max / 2 ? s->cand_max : 2 * s->cand_cap, tsize = s->tmask + 1;
    while (tsize < 2 * cap) tsize <<= 1;
    cand *c = realloc(s->c, sizeof(cand) * (size_t)cap);
    if (!c) return false;
    s->c = c;
    s->cand_cap = cap;
    if (tsize > s->tmask + 1) {
        int *t = realloc(s->table, sizeof(int) * (size_t)tsize);
        if (!t) return false;
        s->table = t;
        s->tmask = tsize - 1;
    }
    for (int i = 0; i < s->tmask + 1; i++) s->table[i] = -1;
    for (int i = 0; i < s->n_cand; i++) table_insert(s, i);
    return true;
}

/* Offers child (parent par + unit) of the current level to the next one; false when out of
 * memory. */
static bool offer(search *s, const level *cur, int par, int unit, size_t pk, size_t lv) {
    uint64_t h = cur->h[par] ^ s->z[unit];
    int k = (int)(h & (uint64_t)s->tmask);
    for (; s->table[k] >= 0; k = (k + 1) & s->tmask) {
        cand *o = &s->c[s->table[k]];
        if (o->h != h || !same_set(s, cur, o->par, o->unit, par, unit)) continue;
        if (pk < o->pk) o->pk = pk, o->lv = lv, o->par = par, o->unit = unit;
        return true;
    }
    if (s->n_cand == s->cand_cap) {
        if (s->cand_cap < s->cand_max) {
            if (!cand_grow(s)) return false;
        } else {
            cand_cut(s, s->width);
        }
        return offer(s, cur, par, unit, pk, lv); /* the slots moved */
    }
    cand *c = &s->c[s->n_cand];
    *c = (cand){.h = h, .pk = pk, .lv = lv, .par = par, .unit = unit, .slot = k};
    s->table[k] = s->n_cand++;
    return true;
}

/* Peak and live bytes after running unit t from state i of cur. */
static void apply(const search *s, const level *cur, int i, int t, size_t *pk, size_t *lv) {
    const sdp_prob *p = s->p;
    const sdp_units *u = s->u;
    const uint64_t *S = cur->bits + (size_t)i * (size_t)s->words;
    size_t peak = cur->pk[i], live = cur->lv[i];
    for (int k = u->qo[t]; k < u->qo[t + 1]; k++) {
        int x = u->q[k];
        if (live + p->add[x] > peak) peak = live + p->add[x];
        live += p->keep[x];
        for (int f = u->fo[x]; f < u->fo[x + 1]; f++) {
            int j = u->fr[f];
            bool done = true;
            for (int r = u->co[j]; r < u->co[j + 1] && done; r++)
                done = u->cu[r] == t || bit(S, u->cu[r]);
            if (done) live -= p->vb[j];
        }
    }
    *pk = peak;
    *lv = live;
}

/* Builds the next level from the kept candidates. */
static void materialize(search *s, const level *cur, level *nx) {
    int W = s->words;
    const sdp_units *u = s->u;
    for (int i = 0; i < s->n_cand; i++) {
        const cand *c = &s->c[i];
        uint64_t *b = nx->bits + (size_t)i * (size_t)W, *r = nx->rdy + (size_t)i * (size_t)W;
        memcpy(b, cur->bits + (size_t)c->par * (size_t)W, sizeof(uint64_t) * (size_t)W);
        memcpy(r, cur->rdy + (size_t)c->par * (size_t)W, sizeof(uint64_t) * (size_t)W);
        b[c->unit >> 6] |= 1ull << (c->unit & 63);
        r[c->unit >> 6] &= ~(1ull << (c->unit & 63));
        for (int k = u->so[c->unit]; k < u->so[c->unit + 1]; k++) {
            int w = u->su[k];
            bool ready = true;
            for (int q = u->po[w]; q < u->po[w + 1] && ready; q++) ready = bit(b, u->pr[q]);
            if (ready) r[w >> 6] |= 1ull << (w & 63);
        }
        nx->pk[i] = c->pk;
        nx->lv[i] = c->lv;
        nx->h[i] = c->h;
        s->r_par[s->n_rec] = cur->rec[c->par];
        s->r_unit[s->n_rec] = c->unit;
        nx->rec[i] = (int)s->n_rec++;
    }
    nx->n = s->n_cand;
}

/* Makes room for cap states in l (its contents are not kept). */
static bool level_reserve(level *l, int cap, int words) {
    if (cap <= l->cap) return true;
#define REALLOC(ptr, count)                                                                        \
    do {                                                                                           \
        void *q = realloc(ptr, sizeof(*(ptr)) * (count));                                          \
        if (!q) return false;                                                                      \
        ptr = q;                                                                                   \
    } while (0)
    size_t sc = (size_t)cap, sw = sc * (size_t)words;
    REALLOC(l->bits, sw);
    REALLOC(l->rdy, sw);
    REALLOC(l->pk, sc);
    REALLOC(l->lv, sc);
    REALLOC(l->h, sc);
    REALLOC(l->rec, sc);
#undef REALLOC
    l->cap = cap;
    return true;
}

/* Room for the next level's n_cand states and their records: capacities double, within the
 * final bounds (which the level and record logic already respects). */
static bool reserve_next(search *s, level *nx) {
    int cap = nx->cap > 0 ? nx->cap : 1;
    while (cap < s->n_cand) cap = cap > s->width / 2 ? s->width : 2 * cap;
    if (!level_reserve(nx, cap, s->words)) return false;
    long need = s->n_rec + s->n_cand, rc = s->rec_cap;
    if (need <= rc) return true;
    while (rc < need) rc = rc > s->max_rec / 2 ? s->max_rec : 2 * rc;
    int *a = realloc(s->r_par, sizeof(int) * (size_t)rc);
    if (a) s->r_par = a;
    int *b = a ? realloc(s->r_unit, sizeof(int) * (size_t)rc) : NULL;
    if (b) s->r_unit = b, s->rec_cap = rc;
    return a && b;
}

static void level_free(level *l) {
    free(l->bits);
    free(l->rdy);
    free(l->pk);
    free(l->lv);
    free(l->h);
    free(l->rec);
}

ir_status sdp_search(const sdp_prob *p, const sdp_units *u, const sdp_search_opts *o, int *lorder,
                     sdp_search_result *r, ir_diag *d) {
    memset(r, 0, sizeof *r);
    int nu = u->nu;
    if (nu == 0) {
        r->found = p->base <= o->tau;
        r->peak = p->base;
        return IR_OK;
    }
    search s = {.p = p, .u = u, .words = (nu + 63) / 64};
    /* Level and record sizes: a level never needs more states than max_records spread over the
     * remaining levels, and the candidate table holds a few levels' worth before it is cut. */
    long max_rec = o->max_records > nu + 1 ? o->max_records : nu + 1;
    s.width = o->width > 0 ? o->width : 1;
    if ((long)s.width > max_rec - nu + 1) s.width = (int)(max_rec - nu + 1);
    if (nu < 30 && s.width > 1 << nu) s.width = 1 << nu; /* no level holds more sets */
    /* Two levels of bitsets and keys stay within SDP_LEVEL_BYTES whatever the window. */
    long per_state = 16l * s.words + 40;
    if ((long)s.width > SDP_LEVEL_BYTES / per_state) s.width = (int)(SDP_LEVEL_BYTES / per_state);
    if (o->even && s.width > max_rec / nu) s.width = (int)(max_rec / nu > 0 ? max_rec / nu : 1);
    if (max_rec > (long)s.width * nu + 1) max_rec = (long)s.width * nu + 1; /* all it can use */
    s.cand_max = s.width < (1 << 20) ? 4 * s.width : s.width + (1 << 22);
    if (s.cand_max < 64) s.cand_max = 64;
    s.max_rec = max_rec;
    /* What is allocated at first; reserve_next and cand_grow widen it when a level overflows. */
    int first = s.width < SDP_FIRST_WIDTH ? s.width : SDP_FIRST_WIDTH;
    s.cand_cap = first < (1 << 20) ? 4 * first : s.cand_max;
    if (s.cand_cap < 64) s.cand_cap = 64;
    if (s.cand_cap > s.cand_max) s.cand_cap = s.cand_max;
    int tsize = 1;
    while (tsize < 2 * s.cand_cap) tsize <<= 1;
    s.tmask = tsize - 1;
    s.rec_cap = max_rec < SDP_FIRST_RECORDS ? max_rec : SDP_FIRST_RECORDS;
    ir_status st = IR_OK;
    bool ok = level_reserve(&s.lv[0], first, s.words) && level_reserve(&s.lv[1], first, s.words);
    s.c = malloc(sizeof(cand) * (size_t)s.cand_cap);
    s.table = malloc(sizeof(int) * (size_t)tsize);
    s.z = malloc(sizeof(uint64_t) * (size_t)nu);
    s.r_par = malloc(sizeof(int) * (size_t)s.rec_cap);
    s.r_unit = malloc(sizeof(int) * (size_t)s.rec_cap);
    if (!ok || !s.c || !s.table || !s.z || !s.r_par || !s.r_unit) goto out_nomem;
    for (int i = 0; i < tsize; i++) s.table[i] = -1;
    for (int t = 0; t < nu; t++) s.z[t] = ir_mix64(0x9e3779b97f4a7c15ull * (uint64_t)(t + 1));

    /* Level 0: the empty set. */
    level *cur = &s.lv[0], *nx = &s.lv[1];
    memset(cur->bits, 0, sizeof(uint64_t) * (size_t)s.words);
    memset(cur->rdy, 0, sizeof(uint64_t) * (size_t)s.words);
    for (int t = 0; t < nu; t++)
        if (u->po[t] == u->po[t + 1]) cur->rdy[t >> 6] |= 1ull << (t & 63);
    cur->pk[0] = 0;
    cur->lv[0] = p->init;
    cur->h[0] = 0;
    cur->rec[0] = -1;
    cur->n = 1;
    size_t tau = o->tau >= p->base ? o->tau - p->base : 0;
    if (o->tau < p->base) goto out; /* nothing fits */
    for (int lvl = 0; lvl < nu; lvl++) {
        if (ir_now_seconds() > o->deadline) {
            r->timeout = true;
            goto out;
        }
        s.n_cand = 0;
        for (int i = 0; i < cur->n; i++) {
            const uint64_t *rd = cur->rdy + (size_t)i * (size_t)s.words;
            for (int w = 0; w < s.words; w++)
                for (uint64_t m = rd[w]; m; m &= m - 1) {
                    int t = (w << 6) + __builtin_ctzll(m);
                    size_t pk, lv;
                    apply(&s, cur, i, t, &pk, &lv);
                    if (pk <= tau && !offer(&s, cur, i, t, pk, lv)) goto out_nomem;
                }
            r->states++;
            if ((r->states & 0xffff) == 0 && ir_now_seconds() > o->deadline) {
                r->timeout = true;
                goto out;
            }
        }
        if (s.n_cand == 0) goto out; /* everything exceeded tau */
        /* Keep what fits the level and leaves a record for each remaining level. */
        long room = s.max_rec - s.n_rec - (nu - lvl - 1);
        int keep = s.width < room ? s.width : (int)room;
        if (s.n_cand > keep) cand_cut(&s, keep);
        for (int i = 0; i < s.n_cand; i++) s.table[s.c[i].slot] = -1;
        if (!reserve_next(&s, nx)) goto out_nomem;
        materialize(&s, cur, nx);
        level *t = cur;
        cur = nx;
        nx = t;
    }
    /* One set remains: all units. Rebuild its order from the records. */
    r->found = true;
    r->peak = p->base + cur->pk[0];
    int k = p->m;
    for (int rec = cur->rec[0]; rec >= 0; rec = s.r_par[rec]) {
        int t = s.r_unit[rec];
        int len = u->qo[t + 1] - u->qo[t];
        k -= len;
        memcpy(lorder + k, u->q + u->qo[t], sizeof(int) * (size_t)len);
    }
    IR_ASSERT(k == 0);
    goto out;
out_nomem:
    st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for a search of %d units", nu);
out:
    r->overflow = s.overflow;
    level_free(&s.lv[0]);
    level_free(&s.lv[1]);
    free(s.c);
    free(s.table);
    free(s.z);
    free(s.r_par);
    free(s.r_unit);
    return st;
}
