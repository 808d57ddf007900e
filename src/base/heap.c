/* The heap's free pages handed back (heap.h). */
#include "heap.h"
#include <stdlib.h> /* first: it defines __GLIBC__ where the C library is glibc */
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VIJP_HEAP_IS_GLIBC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VIJP_HEAP_IS_GLIBC 0
#endif
#endif
#ifndef VIJP_HEAP_IS_GLIBC
#define VIJP_HEAP_IS_GLIBC 1
#endif

#if defined(__GLIBC__) && VIJP_HEAP_IS_GLIBC
/* Whether vijp_heap_keep_freed raised glibc's trim threshold: the
 * process's allocator setting, as process-wide as mallopt's own. */
static _Atomic int keeps_freed;
#endif

void vijp_heap_keep_freed(void)
{
#if defined(__GLIBC__) && VIJP_HEAP_IS_GLIBC
    /* Setting both also stops glibc's own threshold from creeping up only
     * after the first frees, as it does by default. */
    (void)mallopt(M_MMAP_THRESHOLD, VIJP_HEAP_MMAP_BYTES);
    (void)mallopt(M_TRIM_THRESHOLD, VIJP_HEAP_TRIM_BYTES);
    keeps_freed = 1;
#endif
}

/* malloc_trim hands back the free pages inside every arena and the free
 * top of the main heap, but not the free top of a thread's own arena:
 * glibc shrinks that only when a free there of 64 KB or more (its
 * FASTBIN_CONSOLIDATION_THRESHOLD, malloc.c) finds the top above the trim
 * threshold, which vijp_heap_keep_freed holds at 1 GB.  So the threshold
 * is lowered for one such free in the calling thread's arena, then set
 * back.  Another thread freeing meanwhile trims its own top too: pages
 * handed back early, the same bits. */
#if defined(__GLIBC__) && VIJP_HEAP_IS_GLIBC
static void return_own_top(void)
{
    if (!keeps_freed) return; /* glibc's default threshold trims tops as it frees */
    void *p = malloc(128 << 10);
    if (!p) return;
    (void)mallopt(M_TRIM_THRESHOLD, 0);
    free(p);
    (void)mallopt(M_TRIM_THRESHOLD, VIJP_HEAP_TRIM_BYTES);
}
#endif

void vijp_heap_return_freed(void)
{
#if defined(__GLIBC__) && VIJP_HEAP_IS_GLIBC
    (void)malloc_trim(0);
    return_own_top();
#endif
}

void vijp_heap_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    if (n < VIJP_HEAP_POPULATE_BYTES) return;
    static _Atomic long page; /* sysconf's answer, the same for every thread */
    if (!page) page = sysconf(_SC_PAGESIZE);
    uintptr_t mask = (uintptr_t)(page > 0 ? page : 4096) - 1;
    uintptr_t start = ((uintptr_t)p + mask) & ~mask, end = ((uintptr_t)p + n) & ~mask;
    if (end > start) (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE); /* EINVAL: an older kernel */
#else
    (void)p, (void)n;
#endif
}
