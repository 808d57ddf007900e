/* The heap's free pages handed back (heap.h). */
#include "heap.h"
#include <stdlib.h> /* first: it defines __GLIBC__ where the C library is glibc */
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

void vijp_heap_return_freed(void)
{
#if defined(__GLIBC__) && VIJP_HEAP_IS_GLIBC
    (void)malloc_trim(0);
#endif
}
