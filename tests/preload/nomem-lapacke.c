/* A preload library (LD_PRELOAD) that refuses every malloc made from
 * liblapacke (LAPACKE's work arrays) and serves every other, so that a test
 * sees what a command does when LAPACKE itself runs out of memory: before,
 * LAPACKE printed its own message on stdout.  vijp's allocation-failure hook
 * (VIJP_FAIL_ALLOC) cannot reach those: they are not vijp_alloc's.  Built
 * uninstrumented (mk/check.mk): AddressSanitizer's allocator cannot be
 * preloaded over, and the test skips under it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

void *__libc_malloc(size_t n);

void *malloc(size_t n)
{
    static __thread int inside; /* dladdr's own allocations, if any, are served */
    Dl_info where;
    void *caller = __builtin_return_address(0);
    if (!inside) {
        inside = 1;
        int lapacke = dladdr(caller, &where) && where.dli_fname && strstr(where.dli_fname, "liblapacke");
        inside = 0;
        if (lapacke) return NULL;
    }
    return __libc_malloc(n);
}
