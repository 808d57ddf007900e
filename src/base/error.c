/* Error messages and the one allocator of the memory policy (vijp/error.h). */
#include "vijp/error.h"
#include <gmp.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* src with its control characters written as \xHH: a message quotes what
 * the user gave (a spec, a file name, a format), and an escape sequence or a
 * carriage return in it would act on the terminal that shows the message
 * instead of being seen.  Messages are one line; bytes from 0x80 (UTF-8)
 * stay. */
static void escape_controls(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    for (; *src && n + 1 < size; src++) {
        unsigned char c = (unsigned char)*src;
        if (c >= 0x20 && c != 0x7f) dst[n++] = (char)c;
        else if (n + 5 < size) n += (size_t)snprintf(dst + n, size - n, "\\x%02x", c);
        else break;
    }
    dst[n] = 0;
}

int vijp_fail(vijp_error *err, int code, const char *fmt, ...)
{
    if (err) {
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        escape_controls(err->msg, sizeof err->msg, raw);
        err->code = code;
    }
    return code;
}

/* Process-wide by nature, like GMP's own memory functions: set once by the
 * program before its work starts, read when memory runs out. */
static const char *oom_context;
static void (*oom_cleanup)(void);
/* The allocation-failure hook: 0 off, else the ordinal of the allocation to
 * refuse.  Counted atomically: OpenBLAS or a test may allocate from threads. */
static atomic_ullong fail_at, allocations;

void vijp_memory_context(const char *what) { oom_context = what; }
void vijp_memory_on_fatal(void (*cleanup)(void)) { oom_cleanup = cleanup; }

void vijp_out_of_memory(size_t bytes)
{
    /* No stdio: it may allocate, and this may be the allocation it made. */
    char msg[256];
    const char *unit = "bytes";
    double size = (double)bytes;
    if (size >= 1024.0 * 1024 * 1024) size /= 1024.0 * 1024 * 1024, unit = "GiB";
    else if (size >= 1024.0 * 1024) size /= 1024.0 * 1024, unit = "MiB";
    else if (size >= 1024.0) size /= 1024.0, unit = "KiB";
    int n = snprintf(msg, sizeof msg, "vijp: out of memory while %s (allocating %.4g %s)\n",
                     oom_context ? oom_context : "running", size, unit);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w; /* nothing more can be done if stderr is gone */
    }
    if (oom_cleanup) oom_cleanup();
    _exit(1); /* not exit(): atexit handlers and stdio flushes may allocate */
}

/* Allocations are counted only while a test hook asks (VIJP_FAIL_ALLOC or
 * VIJP_ALLOC_STATS at install): one counter that every thread's every
 * allocation increments bounces between the cores, and was 6.8% of the
 * default report's CPU on two of them (gmp_alloc's own time, perf) while
 * MPFR's temporaries came and went.  Written at install only. */
static atomic_int counting;

static int refuse_this_one(void)
{
    if (!atomic_load_explicit(&counting, memory_order_relaxed)) return 0;
    unsigned long long n = atomic_fetch_add(&allocations, 1) + 1;
    return n == atomic_load_explicit(&fail_at, memory_order_relaxed);
}

/* Blocks of at least this many bytes start on a 2 MiB boundary and are
 * advised to the kernel as transparent-huge-page memory.  They are the ones
 * glibc maps on their own (32 MiB: the largest mmap threshold, which the
 * vijp command sets, vijp/memory.h) and unmaps when they are freed, so a
 * wide study's matrices (an MPFR parameter block of width 2048 is 200 MB)
 * are mapped afresh for every layer, and faulting them in 4 KiB at a time
 * was a fifth of the run's CPU time (dense:2048,gelu depth 16 batch 16, two
 * formats, one job: 147 s user + 43 s system without, 100 + 12 with; the
 * user time falls too, with the TLB misses).  Smaller blocks come from the
 * heap and are reused without faults; advising them as well saved another
 * 7% there but made the heap's small allocations fault in whole huge pages
 * (at width 1024, a 701 MB peak became 800). */
enum { HUGE_BLOCK = 32 << 20, HUGE_PAGE = 2 << 20 };

/* Advise the whole huge pages inside [p, p + n); where the kernel has no
 * transparent huge pages (or refuses), the block is an ordinary one. */
static void advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1),
              end = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

/* Every block starts on a 64-byte line: an AVX-512 vector, and what the
 * avx512 gemm's streaming stores need (a dense layer's 512 KB dW written
 * without reading it first: backprop on dense:256 from 0.71 to 0.90 of
 * dgemm's rate).  The price is an explicit memset where calloc would have
 * had fresh zero pages from the kernel. */
static void *allocate(size_t n, int zeroed)
{
    size_t lines = n ? (n + 63) / 64 : 1;
    if (lines > SIZE_MAX / 64) vijp_out_of_memory(n);
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer is given the size asked for: a block rounded up to
     * its last line would hide an overflow of up to 63 bytes from it (a
     * loop that runs one double too far).  The start stays on a line. */
    size_t bytes = n ? n : 1;
#else
    size_t bytes = lines * 64;
#endif
    int huge = bytes >= HUGE_BLOCK;
    /* posix_memalign: C11's aligned_alloc wants a size that is a multiple
     * of the alignment (AddressSanitizer holds callers to it), and rounding
     * a huge block up to 2 MiB let glibc place blocks differently: at width
     * 1024 the study's peak rose from 701 to 750 MB. */
    void *p = NULL;
    if (!refuse_this_one() && posix_memalign(&p, huge ? HUGE_PAGE : 64, bytes)) p = NULL;
    if (!p) vijp_out_of_memory(n);
    if (huge) advise_huge(p, bytes);
    if (zeroed) memset(p, 0, bytes);
#ifdef VIJP_POISON_UNSET
    /* all ones: a NaN as a double and as a float, so a read before the write shows */
    if (!zeroed) memset(p, 0xff, n);
#endif
    return p;
}

void *vijp_alloc(size_t n) { return allocate(n, 1); }
void *vijp_alloc_unset(size_t n) { return allocate(n, 0); }

void *vijp_alloc_array(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) vijp_out_of_memory(SIZE_MAX);
    return vijp_alloc(count * size);
}

void *vijp_realloc(void *p, size_t n)
{
    void *q = refuse_this_one() ? NULL : realloc(p, n ? n : 1);
    if (!q) vijp_out_of_memory(n);
    return q;
}

char *vijp_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(vijp_alloc(n), s, n);
}

void vijp_free(void *p) { free(p); }

/* GMP's allocation functions (same contract: never NULL). */
static void *gmp_alloc(size_t n)
{
    void *p = refuse_this_one() ? NULL : malloc(n ? n : 1);
    if (!p) vijp_out_of_memory(n);
    return p;
}
static void *gmp_realloc(void *p, size_t old, size_t n)
{
    (void)old;
    return vijp_realloc(p, n);
}
static void gmp_free(void *p, size_t n)
{
    (void)n;
    free(p);
}

/* jansson's (it would report NULL as a failed call; the policy is one). */
static void *json_alloc(size_t n) { return gmp_alloc(n); }

unsigned long long vijp_memory_allocations(void) { return atomic_load(&allocations); }

void vijp_memory_policy_install(void)
{
    mp_set_memory_functions(gmp_alloc, gmp_realloc, gmp_free);
    json_set_alloc_funcs(json_alloc, free);
    const char *s = getenv("VIJP_FAIL_ALLOC");
    char *end;
    unsigned long long at = s && *s ? strtoull(s, &end, 10) : 0;
    atomic_store(&allocations, 0);
    atomic_store(&fail_at, s && *s && !*end ? at : 0);
    /* set at all, as the vijp command reads VIJP_ALLOC_STATS to print the count */
    atomic_store(&counting, (s && *s) || getenv("VIJP_ALLOC_STATS") != NULL);
}
