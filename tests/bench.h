/* Shared by the benchmark programs (make bench). */
#ifndef VIJP_BENCH_H
#define VIJP_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A benchmark whose library call fails measures nothing: stop, saying where. */
#define BENCH_MUST(call)                                                                    \
    do {                                                                                    \
        if (call) {                                                                         \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);             \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* CPU seconds of clock (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID):
 * on a shared machine wall time swings with the load, CPU time much less. */
static inline double bench_cpu(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Monotonic wall-clock seconds. */
static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
