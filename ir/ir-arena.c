/* ir-arena.c - bump allocation for everything that lives exactly as long as one graph, so a
 * graph (or a candidate graph of the search) is freed in one call. */
#include "ir-impl.h"

#include <stdlib.h>

#define ARENA_CHUNK (64 * 1024)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct ir_arena {
    arena_chunk *head;
};

ir_arena *ir_arena_new(void) { return calloc(1, sizeof(ir_arena)); }

void ir_arena_free(ir_arena *a) {
    if (!a) return;
    for (arena_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
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
