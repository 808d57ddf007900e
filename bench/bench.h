/* Shared by the benchmark programs (make bench). */
#ifndef VIJP_BENCH_H
#define VIJP_BENCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The benchmarks' command lines.  -h/--help prints usage (stdout, exit 0);
 * anything a benchmark does not take is an error (usage on stderr, exit 2):
 * atoi("--help") once ran bench-engines "best of 0" and printed PASS for
 * times it never measured.  usage is the whole text, ending in a newline. */
static inline void bench_args(int argc, char **argv, int max_args, const char *usage)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        exit(0);
    }
    for (int i = 1; i < argc; i++)
        if (i > max_args || argv[i][0] == '-' || !argv[i][0]) {
            fprintf(stderr, "%s: unexpected argument '%s'\n%s", argv[0], argv[i], usage);
            exit(2);
        }
}

/* --smoke, given first: the benchmark runs at small sizes (the smallest
 * where it takes a size), through every path it measures, in seconds (make check runs each so:
 * scripts/check-bench-smoke.sh), so that one that crashes or fails is
 * caught there, not by whoever next runs make bench.  The flag is taken
 * out of argv (the rest is parsed as without it) and a line says that
 * nothing the run prints is a measurement. */
static inline int bench_smoke(int *argc, char **argv)
{
    if (*argc < 2 || strcmp(argv[1], "--smoke")) return 0;
    memmove(argv + 1, argv + 2, (size_t)(*argc - 1) * sizeof *argv); /* argv[2 .. argc], its NULL included */
    (*argc)--;
    printf("%s --smoke: small sizes, every path taken; no figure or verdict below is a measurement\n", argv[0]);
    fflush(stdout);
    return 1;
}

/* bench_args, then argv[1] as a count in [lo, hi] (fallback without it). */
static inline long bench_count(int argc, char **argv, long fallback, long lo, long hi, const char *usage)
{
    bench_args(argc, argv, 1, usage);
    if (argc < 2) return fallback;
    char *end;
    errno = 0;
    long v = strtol(argv[1], &end, 10);
    if (errno || end == argv[1] || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: '%s' is not a whole number from %ld to %ld\n%s", argv[0], argv[1], lo, hi, usage);
        exit(2);
    }
    return v;
}

#endif
