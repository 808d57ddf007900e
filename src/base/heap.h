/* Handing the heap's free pages back to the kernel, for the phases of a
 * run that free far more than the next allocates (drift/drift.c between a
 * curve's reference and its engines; memory/memory.c's public
 * vijp_memory_return_freed after a study's curves).  Internal to src/. */
#ifndef VIJP_BASE_HEAP_H
#define VIJP_BASE_HEAP_H

#include <stddef.h>

/* Every arena's whole free pages back to the kernel (glibc's malloc_trim),
 * not only a heap's top.  Nothing where the C library is not glibc, or
 * where a sanitizer's allocator stands in for glibc's (its arenas are not
 * set up: malloc_trim on a thread faults there). */
void vijp_heap_return_freed(void);

/* Large blocks mapped on their own and up to VIJP_HEAP_TRIM_BYTES of free
 * heap kept mapped, for the next block of the same size (glibc's
 * mallopt; elsewhere nothing): vijp_memory_keep_freed (vijp/memory.h). */
void vijp_heap_keep_freed(void);
#define VIJP_HEAP_TRIM_BYTES (1 << 30)

/* [p, p + n)'s whole pages faulted in writable by one call
 * (MADV_POPULATE_WRITE, Linux 5.14) rather than a fault a page as they
 * are first written: for a block the caller is about to write whole (a
 * packed matrix's).  The same pages resident, so the same peak; on a
 * virtual machine a fault traps to the hypervisor, about 5 µs each on
 * this project's, where the first touch of the drift reference's packed
 * blocks was a sixth of a curve.  Blocks below VIJP_HEAP_POPULATE_BYTES,
 * which mostly reuse the heap's resident pages, and kernels without it:
 * nothing. */
void vijp_heap_populate(void *p, size_t n);
#define VIJP_HEAP_POPULATE_BYTES ((size_t)256 << 10)

/* Blocks from this size on are mapped on their own and go back to the
 * kernel when freed, smaller ones come from the heap: the threshold
 * vijp_memory_keep_freed sets (glibc's largest on 64-bit, HEAP_MAX_SIZE
 * / 2), which the drift study's sizing and returns count with. */
#define VIJP_HEAP_MMAP_BYTES (32 << 20)

#endif
