/* ir-arena.c - bump allocation for everything that lives exactly as long as one graph, so a
 * graph (or a candidate graph of the search) is freed in one call.
 *
 * Sharing (ir_arena_share): a clone points at its source's strings and attribute arrays instead
 * of copying them, so it holds a reference to every arena those bytes live in. An arena has two
 * parts:
 *  - the shared part (ir_arena_alloc, ir_arena_strdup): append-only, never written again once
 *    allocated, alive while its owner or any arena that shares it holds a reference;
 *  - the private part (ir_arena_alloc_private): the owner's mutable per-node arrays (a clone's
 *    copies of its source's in/out and attribute arrays), freed with the owner (ir_arena_free),
 *    so an arena that others share keeps only what was added to its graph alive.
 * An arena's dependencies are flat (the source's, plus the source itself when anything was
 * allocated in it), so a graph d rewrites deep holds at most d + 1 references and never a chain.
 * Reference counts are atomic: graphs of several threads share their ancestors' strings. */
#include "ir-impl.h"

#include <stdatomic.h>
#include <stdlib.h>

#define ARENA_CHUNK (64 * 1024)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct ir_arena {
    arena_chunk *head; /* the shared part */
    arena_chunk *priv; /* the private part: one block per call */
    atomic_int refs;   /* the owner's, plus one per arena that depends on this one */
    ir_arena **deps;   /* arenas the shared data of this one's graph points into */
    int n_deps;
};

ir_arena *ir_arena_new(void) {
    ir_arena *a = calloc(1, sizeof(ir_arena));
    if (a) atomic_init(&a->refs, 1);
    return a;
}

static void free_chunks(arena_chunk *c) {
    for (arena_chunk *n; c; c = n) {
        n = c->next;
        free(c);
    }
}

static void arena_unref(ir_arena *a) {
    /* acq_rel: every read of the shared bytes through another reference happens-before the
     * free that follows the last decrement */
    if (!a || atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1) return;
    free_chunks(a->head);
    for (int i = 0; i < a->n_deps; i++) arena_unref(a->deps[i]);
    free(a->deps);
    free(a);
}

void ir_arena_free(ir_arena *a) {
    if (!a) return;
    free_chunks(a->priv); /* only the owner ever reads the private part */
    a->priv = NULL;
    arena_unref(a);
}

bool ir_arena_share(ir_arena *dst, ir_arena *src) {
    int n = src->n_deps + (src->head ? 1 : 0);
    if (n == 0) return true;
    ir_arena **d = realloc(dst->deps, sizeof *d * (size_t)(dst->n_deps + n));
    if (!d) return false;
    dst->deps = d;
    for (int i = 0; i < src->n_deps; i++) d[dst->n_deps++] = src->deps[i];
    if (src->head) d[dst->n_deps++] = src;
    /* relaxed: the caller holds src, which holds each of its deps */
    for (int i = dst->n_deps - n; i < dst->n_deps; i++)
        atomic_fetch_add_explicit(&d[i]->refs, 1, memory_order_relaxed);
    return true;
}

void *ir_arena_alloc_private(ir_arena *a, size_t bytes) {
    arena_chunk *c = malloc(sizeof *c + (bytes ? bytes : 1));
    if (!c) return NULL;
    c->used = c->cap = bytes;
    c->next = a->priv;
    a->priv = c;
    return c->data;
}

void *ir_arena_alloc(ir_arena *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    arena_chunk *c = a->head;
    if (!c || c->cap - c->used < bytes) {
        /* Large requests get a chunk of their own, placed behind the current one so the
         * remainder of the current chunk stays usable. */
        size_t cap = bytes > ARENA_CHUNK / 4 ? bytes : ARENA_CHUNK;
        arena_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->used = 0;
        n->cap = cap;
        if (c && cap == bytes) {
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    memset(p, 0, bytes);
    return p;
}

char *ir_arena_strdup(ir_arena *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = ir_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}
