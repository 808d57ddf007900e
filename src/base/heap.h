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

#endif
