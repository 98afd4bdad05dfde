/* pet-gen-layout.c - the layout ops of PET's mutation generator (pet-gen.h): the candidates of
 * a shape (swaps, rotations, merges, splits, factor moves, space-to-batch and back), their
 * canonical form, and a cache per shape. A layout op is a Reshape, Transpose, Reshape chain
 * counted as one op (§4.2); gen_layout (pet-gen-impl.h) describes it as atoms and a
 * permutation. Candidates depend on the shape and the program's factors only, so each shape's
 * list is built once per enumeration. */
#include "pet-gen-impl.h"

static uint64_t mixh(uint64_t h, uint64_t v) {
    return ir_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* ---------------------------------------------------------------- layouts */

bool gen_layout_canon(gen_layout *l, const ir_shape *in) {
    /* drop atoms of length 1 */
    int map[IR_MAX_RANK], n = 0;
    for (int a = 0; a < l->n_atoms; a++) {
        map[a] = l->atom[a] == 1 ? -1 : n;
        if (l->atom[a] != 1) l->atom[n++] = l->atom[a];
    }
    int q = 0;
    for (int p = 0; p < l->n_atoms; p++)
        if (map[l->perm[p]] >= 0) l->perm[q++] = (int8_t)map[l->perm[p]];
    l->n_atoms = n;
    /* merge atoms adjacent in the input that stay adjacent, in order, in the output */
    for (bool again = true; again;) {
        again = false;
        for (int p = 0; p + 1 < l->n_atoms; p++) {
            int a = l->perm[p];
            if (l->perm[p + 1] != a + 1) continue;
            l->atom[a] *= l->atom[a + 1];
            for (int k = a + 1; k + 1 < l->n_atoms; k++) l->atom[k] = l->atom[k + 1];
            for (int k = p + 1; k + 1 < l->n_atoms; k++) l->perm[k] = l->perm[k + 1];
            l->n_atoms--;
            for (int k = 0; k < l->n_atoms; k++)
                if (l->perm[k] > a) l->perm[k]--;
            again = true;
            break;
        }
    }
    bool ident = true;
    for (int p = 0; p < l->n_atoms; p++) ident = ident && l->perm[p] == p;
    return !(ident && ir_shape_eq(&l->out, in));
}

/* Builds a layout from per-output-dim atom lists: out_atoms[k][0..out_n[k]) are indices into
 * atom[] (the input refined). */
static bool lay_build(gen_layout *l, int n_atoms, const int64_t *atom, int rank_out,
                      const int *out_n, int out_atoms[][IR_MAX_RANK]) {
    if (n_atoms > IR_MAX_RANK || rank_out > GEN_MAX_RANK || rank_out < 1) return false;
    memset(l, 0, sizeof *l);
    l->n_atoms = n_atoms;
    memcpy(l->atom, atom, sizeof(int64_t) * (size_t)n_atoms);
    int p = 0;
    l->out.rank = rank_out;
    for (int k = 0; k < rank_out; k++) {
        int64_t d = 1;
        for (int j = 0; j < out_n[k]; j++) {
            l->perm[p++] = (int8_t)out_atoms[k][j];
            d *= atom[out_atoms[k][j]];
        }
        l->out.dims[k] = d;
    }
    return p == n_atoms;
}

uint64_t gen_layout_hash(const gen_layout *l) {
    uint64_t h = mixh(0x1a7, (uint64_t)l->n_atoms);
    for (int a = 0; a < l->n_atoms; a++)
        h = mixh(mixh(h, (uint64_t)l->atom[a]), (uint64_t)l->perm[a]);
    h = mixh(h, (uint64_t)l->out.rank);
    for (int k = 0; k < l->out.rank; k++) h = mixh(h, (uint64_t)l->out.dims[k]);
    return h;
}

typedef struct lay_acc {
    gen_layout items[256];
    uint64_t keys[256];
    int n;
} lay_acc;

static void lay_add(lay_acc *acc, gen_layout *l, const ir_shape *in) {
    if (!gen_layout_canon(l, in) || acc->n >= 256) return;
    uint64_t k = gen_layout_hash(l);
    for (int i = 0; i < acc->n; i++)
        if (acc->keys[i] == k) return;
    acc->keys[acc->n] = k;
    acc->items[acc->n++] = *l;
}

/* Every layout candidate of shape s into acc (pet-gen.h lists them). */
static void lay_enumerate(const gen_ctx *c, const ir_shape *s, lay_acc *acc) {
    int r = s->rank;
    int64_t atom[IR_MAX_RANK];
    int out_n[IR_MAX_RANK], out_atoms[IR_MAX_RANK][IR_MAX_RANK];
    gen_layout l;
    if (r < 1 || r > GEN_MAX_RANK) return;
    /* transposes: swaps and rotations */
    for (int i = 0; i < r; i++)
        for (int j = i + 1; j < r; j++) {
            for (int k = 0; k < r; k++) atom[k] = s->dims[k], out_n[k] = 1, out_atoms[k][0] = k;
            out_atoms[i][0] = j;
            out_atoms[j][0] = i;
            if (lay_build(&l, r, atom, r, out_n, out_atoms)) lay_add(acc, &l, s);
        }
    for (int dir = 0; dir < 2 && r >= 3; dir++) {
        for (int k = 0; k < r; k++) {
            atom[k] = s->dims[k];
            out_n[k] = 1;
            out_atoms[k][0] = dir ? (k + r - 1) % r : (k + 1) % r;
        }
        if (lay_build(&l, r, atom, r, out_n, out_atoms)) lay_add(acc, &l, s);
    }
    /* merges of adjacent dims */
    for (int i = 0; i + 1 < r; i++) {
        int ro = 0;
        for (int k = 0; k < r; k++) {
            atom[k] = s->dims[k];
            if (k == i + 1) {
                out_atoms[ro - 1][out_n[ro - 1]++] = k;
                continue;
            }
            out_n[ro] = 1;
            out_atoms[ro++][0] = k;
        }
        if (lay_build(&l, r, atom, ro, out_n, out_atoms)) lay_add(acc, &l, s);
    }
    /* splits of a dim by a factor */
    for (int i = 0; i < r && r + 1 <= IR_MAX_RANK; i++)
        for (int fi = 0; fi < c->n_f; fi++) {
            int64_t f = c->f[fi];
            if (s->dims[i] % f || f >= s->dims[i]) continue;
            int na = 0;
            for (int k = 0; k < r; k++) {
                if (k == i) {
                    atom[na] = f;
                    out_n[na] = 1, out_atoms[na][0] = na;
                    na++;
                    atom[na] = s->dims[k] / f;
                } else {
                    atom[na] = s->dims[k];
                }
                out_n[na] = 1, out_atoms[na][0] = na;
                na++;
            }
            if (lay_build(&l, na, atom, na, out_n, out_atoms)) lay_add(acc, &l, s);
        }
    /* moves of the outer f-part of dim i to the outer part of dim j */
    for (int i = 0; i < r && r + 1 <= IR_MAX_RANK; i++)
        for (int fi = -1; fi < c->n_f; fi++) {
            int64_t f = fi < 0 ? s->dims[i] : c->f[fi];
            if (f <= 1 || s->dims[i] % f || (fi >= 0 && f == s->dims[i])) continue;
            for (int j = 0; j < r; j++) {
                if (j == i) continue;
                /* atoms: dims in order, dim i as (f, d_i / f) */
                int na = 0, idx[IR_MAX_RANK], fa = -1;
                for (int k = 0; k < r; k++) {
                    if (k == i) {
                        fa = na;
                        atom[na++] = f;
                    }
                    idx[k] = na;
                    atom[na++] = k == i ? s->dims[k] / f : s->dims[k];
                }
                for (int k = 0; k < r; k++) {
                    out_n[k] = 0;
                    if (k == j) out_atoms[k][out_n[k]++] = fa;
                    out_atoms[k][out_n[k]++] = idx[k];
                }
                if (lay_build(&l, na, atom, r, out_n, out_atoms)) lay_add(acc, &l, s);
            }
        }
    /* space-to-batch and batch-to-space by f over every dim after the first two */
    for (int fi = 0; fi < c->n_f && r >= 3; fi++) {
        int64_t f = c->f[fi];
        int S = r - 2;
        if (2 + 2 * S <= IR_MAX_RANK) {
            bool ok = true;
            for (int k = 2; k < r; k++) ok = ok && s->dims[k] % f == 0 && s->dims[k] > f;
            if (ok) {
                int na = 0, fidx[IR_MAX_RANK], didx[IR_MAX_RANK];
                for (int k = 0; k < r; k++) {
                    didx[k] = na;
                    atom[na++] = k < 2 ? s->dims[k] : s->dims[k] / f;
                    if (k >= 2) fidx[k] = na, atom[na++] = f;
                }
                out_n[0] = 0;
                for (int k = 2; k < r; k++) out_atoms[0][out_n[0]++] = fidx[k];
                out_atoms[0][out_n[0]++] = didx[0];
                for (int k = 1; k < r; k++) out_n[k] = 1, out_atoms[k][0] = didx[k];
                if (lay_build(&l, na, atom, r, out_n, out_atoms)) lay_add(acc, &l, s);
            }
        }
        int64_t fs = 1;
        for (int k = 0; k < S; k++) fs *= f;
        if (S + r <= IR_MAX_RANK && s->dims[0] % fs == 0 && s->dims[0] >= fs) {
            int na = 0, fidx[IR_MAX_RANK];
            for (int k = 2; k < r; k++) fidx[k] = na, atom[na++] = f;
            int n0 = na;
            atom[na++] = s->dims[0] / fs;
            out_n[0] = 1, out_atoms[0][0] = n0;
            for (int k = 1; k < r; k++) {
                out_n[k] = 1;
                out_atoms[k][0] = na;
                atom[na++] = s->dims[k];
                if (k >= 2) out_atoms[k][out_n[k]++] = fidx[k];
            }
            if (lay_build(&l, na, atom, r, out_n, out_atoms)) lay_add(acc, &l, s);
        }
    }
}

static uint64_t shape_key(const ir_shape *s) {
    uint64_t h = mixh(0x5a9e, (uint64_t)s->rank);
    for (int k = 0; k < s->rank; k++) h = mixh(h, (uint64_t)s->dims[k]);
    return h;
}

const gen_lay_list *gen_layouts(gen_ctx *c, const ir_shape *s) {
    uint64_t key = shape_key(s);
    for (int i = 0; i < c->n_lay_cache; i++)
        if (c->lay_cache[i].key == key) return &c->lay_cache[i];
    if (c->n_lay_cache == c->cap_lay_cache) {
        int nc = c->cap_lay_cache ? 2 * c->cap_lay_cache : 16;
        gen_lay_list *p = realloc(c->lay_cache, sizeof *p * (size_t)nc);
        if (!p) return NULL;
        c->lay_cache = p;
        c->cap_lay_cache = nc;
    }
    lay_acc *acc = malloc(sizeof *acc);
    if (!acc) return NULL;
    acc->n = 0;
    lay_enumerate(c, s, acc);
    gen_lay_list *e = &c->lay_cache[c->n_lay_cache];
    e->key = key;
    e->n = acc->n;
    e->items = malloc(sizeof(gen_layout) * (size_t)(acc->n ? acc->n : 1));
    if (!e->items) {
        free(acc);
        return NULL;
    }
    memcpy(e->items, acc->items, sizeof(gen_layout) * (size_t)acc->n);
    free(acc);
    c->n_lay_cache++;
    return e;
}
