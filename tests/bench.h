/* Shared by the benchmark programs (make bench). */
#ifndef VIJP_BENCH_H
#define VIJP_BENCH_H

#include <time.h>

/* Monotonic wall-clock seconds. */
static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
