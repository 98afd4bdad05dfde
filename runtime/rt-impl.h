/* rt-impl.h - private declarations of runtime/: the counting allocator that every byte the
 * executor hands to a kernel comes from. Not part of the public API.
 *
 * The allocator counts live bytes exactly as requested (never rounded to the 64-byte alignment
 * it actually uses), so that its peak equals sched/'s analytic peak to the byte. Bytes that live
 * outside it (constants read straight from their blobs) are added with rt_alloc_external. */
#ifndef MAGPIE_RT_IMPL_H
#define MAGPIE_RT_IMPL_H

#include "rt.h"

typedef struct rt_alloc {
    size_t live;   /* bytes requested and not yet freed, plus external bytes */
    size_t peak;   /* maximum of live since init */
    size_t n_live; /* buffers handed out and not yet freed (leak check) */
    bool poison;   /* fill buffers with 0xFF (NaN for floats) before freeing them */
} rt_alloc;

void rt_alloc_init(rt_alloc *a, bool poison);
/* A 64-byte aligned buffer of at least `bytes` bytes (non-NULL even for 0 bytes, so kernels may
 * take its address); NULL on out of memory. Counts exactly `bytes`. */
void *rt_alloc_get(rt_alloc *a, size_t bytes);
/* Frees a buffer from rt_alloc_get (NULL-safe). */
void rt_alloc_put(rt_alloc *a, void *p);
/* Counts bytes that live outside the allocator (constants in their blobs) for the whole run. */
void rt_alloc_external(rt_alloc *a, size_t bytes);

#endif
