#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>

long test_iters(long base)
{
    const char *s = getenv("VIJP_TEST_SCALE");
    double k = s ? atof(s) : 1.0;
    long n = (long)(base * (k > 0 ? k : 1.0));
    return n > 0 ? n : 1;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v = s ? strtol(s, &end, 10) : dflt;
    return s && (end == s || *end) ? dflt : v;
}

void test_shard(long *rank, long *size)
{
    const char *s = getenv("VIJP_TEST_SHARD");
    long i = 0, p = 1;
    if (s && sscanf(s, "%ld/%ld", &i, &p) == 2) {
    } else if (getenv("OMPI_COMM_WORLD_SIZE")) {
        i = env_long("OMPI_COMM_WORLD_RANK", 0), p = env_long("OMPI_COMM_WORLD_SIZE", 1);
    } else if (getenv("PMI_SIZE")) {
        i = env_long("PMI_RANK", 0), p = env_long("PMI_SIZE", 1);
    }
    if (p < 1 || i < 0 || i >= p) {
        fprintf(stderr, "test shard %ld/%ld is not I/P with 0 <= I < P\n", i, p);
        abort(); /* a misconfigured run, not a test result */
    }
    *rank = i, *size = p;
}

int test_mine(long cs)
{
    long i, p;
    test_shard(&i, &p);
    return cs % p == i;
}

long test_mine_count(long n)
{
    long i, p;
    test_shard(&i, &p);
    return n > i ? (n - i + p - 1) / p : 0;
}

void test_case_rng(vijp_rng *r, uint64_t stream, long cs)
{
    vijp_rng_seed(r, stream + 0x9e3779b97f4a7c15ull * (uint64_t)(cs + 1));
}

uint64_t test_seed(void)
{
    const char *s = getenv("VIJP_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : 20261202u;
}
