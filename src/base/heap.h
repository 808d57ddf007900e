/* Handing the heap's free pages back to the kernel, for the phases of a
 * run that free far more than the next allocates (drift/drift.c between a
 * curve's reference and its engines; memory/memory.c's public
 * vijp_memory_return_freed after a study's curves).  Internal to src/. */
#ifndef VIJP_BASE_HEAP_H
#define VIJP_BASE_HEAP_H

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

/* Blocks from this size on are mapped on their own and go back to the
 * kernel when freed, smaller ones come from the heap: the threshold
 * vijp_memory_keep_freed sets (glibc's largest on 64-bit, HEAP_MAX_SIZE
 * / 2), which the drift study's sizing and returns count with. */
#define VIJP_HEAP_MMAP_BYTES (32 << 20)

#endif
