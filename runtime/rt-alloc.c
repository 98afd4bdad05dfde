/* rt-alloc.c - the counting allocator (rt-impl.h): malloc-backed, 64-byte aligned, exact byte
 * counts and a running peak.
 *
 * Each buffer carries a 64-byte header holding its requested size, so rt_alloc_put needs only
 * the pointer and can neither under- nor over-count. Freed memory goes back to malloc; in
 * poison mode it is first overwritten with 0xFF bytes (a NaN in every float format, -1 in every
 * integer one) so that a kernel reading a buffer after its last use computes garbage instead of
 * silently plausible numbers. Debug builds (MAGPIE_DEBUG) poison by default (rt-exec.c). */
#include "rt-impl.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RT_ALIGN 64

typedef struct rt_buf_header {
    size_t bytes;
    unsigned char pad[RT_ALIGN - sizeof(size_t)];
} rt_buf_header;

/* glibc serves large blocks with mmap and returns them to the kernel on free, so every step
 * of a run would page-fault its outputs in afresh (a tenth of a transformer's run time). Keeping
 * freed blocks in the heap lets the next step reuse them; the byte counts are unaffected. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void rt_alloc_init(rt_alloc *a, bool poison) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, keep_freed_memory);
    memset(a, 0, sizeof *a);
    a->poison = poison;
}

static void count(rt_alloc *a, size_t bytes) {
    a->live += bytes;
    if (a->live > a->peak) a->peak = a->live;
}

void *rt_alloc_get(rt_alloc *a, size_t bytes) {
    size_t padded = (bytes + RT_ALIGN - 1) & ~(size_t)(RT_ALIGN - 1);
    if (padded < bytes || padded > SIZE_MAX - RT_ALIGN) return NULL;
    rt_buf_header *h = aligned_alloc(RT_ALIGN, sizeof(rt_buf_header) + padded);
    if (!h) return NULL;
    h->bytes = bytes;
    count(a, bytes);
    a->n_live++;
    return h + 1;
}

void rt_alloc_put(rt_alloc *a, void *p) {
    if (!p) return;
    rt_buf_header *h = (rt_buf_header *)p - 1;
    IR_ASSERT(a->live >= h->bytes && a->n_live > 0);
    a->live -= h->bytes;
    a->n_live--;
    if (a->poison) memset(p, 0xFF, h->bytes);
    free(h);
}

void rt_alloc_external(rt_alloc *a, size_t bytes) {
    count(a, bytes);
}
