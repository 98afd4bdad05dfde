/* pet-impl.h - private declarations shared by the pet-*.c files of rules/: the compiled program's
 * arena, index helpers, demand bitmaps and the CPU kernels' entry points (pet-kernels.c) that the
 * CPU back-end (pet-cpu.c) drives. Nothing here is part of the module's contract (pet.h is). */
#ifndef MAGPIE_PET_IMPL_H
#define MAGPIE_PET_IMPL_H

#include "pet.h"

#include <stdlib.h>
#include <string.h>

/* Zeroed memory that lives as long as p (pet-compile.c); NULL when out of memory. */
void *pet_arena_alloc(pet_prog *p, size_t bytes);

/* Row-major strides of s in elements. */
static inline void pet_strides(const ir_shape *s, int64_t *st) {
    int64_t m = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = m;
        m *= s->dims[i];
    }
}
/* Coords of element e of shape s. */
static inline void pet_unflatten(int64_t e, const ir_shape *s, int64_t *c) {
    for (int i = s->rank - 1; i >= 0; i--) {
        int64_t dd = s->dims[i];
        c[i] = dd > 1 ? e % dd : 0;
        e = dd > 1 ? e / dd : e;
    }
}

/* ---------------------------------------------------------------- demand bitmaps */

static inline size_t pet_bm_words(int64_t n) {
    return (size_t)((n + 63) / 64);
}
static inline void pet_bm_set(uint64_t *bm, int64_t i) {
    bm[i >> 6] |= 1ULL << (i & 63);
}
static inline bool pet_bm_get(const uint64_t *bm, int64_t i) {
    return (bm[i >> 6] >> (i & 63)) & 1;
}
static inline void pet_bm_fill(uint64_t *bm, int64_t n) {
    size_t w = pet_bm_words(n);
    if (!w) return;
    memset(bm, 0xff, w * sizeof *bm);
    if (n & 63) bm[w - 1] = (1ULL << (n & 63)) - 1;
}
static inline int64_t pet_bm_count(const uint64_t *bm, int64_t n) {
    int64_t c = 0;
    for (size_t i = 0, w = pet_bm_words(n); i < w; i++) c += __builtin_popcountll(bm[i]);
    return c;
}

/* ---------------------------------------------------------------- CPU kernels (pet-kernels.c) */

/* buf[v] is value v's residues (numel entries); the kernels read inputs and write step->out. */

/* Whether the step writes output element c (COPY writes a region; every other kind all). */
bool pet_k_covers(const pet_prog *p, const pet_step *s, const int64_t *c);
/* Whether an output element reads many input elements (convolutions, products, reductions):
 * when most of such an output is needed, its inputs are marked whole instead of per element. */
bool pet_k_heavy(pet_step_kind k);
/* Marks in dem[] the input elements that output element c (covered by s) reads. */
void pet_k_mark(const pet_prog *p, const pet_step *s, const int64_t *c, uint64_t *const *dem);
/* Output element c (covered by s), from the inputs. */
uint32_t pet_k_elem(const pet_prog *p, const pet_step *s, uint32_t *const *buf, const int64_t *c);
/* Every element the step writes, with the whole-tensor kernels. IR_ERR_NOMEM only (workspace). */
ir_status pet_k_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf, ir_diag *d);

#endif
