#include "testutil.h"
#include <stdlib.h>

long test_iters(long base)
{
    const char *s = getenv("VIJP_TEST_SCALE");
    double k = s ? atof(s) : 1.0;
    long n = (long)(base * (k > 0 ? k : 1.0));
    return n > 0 ? n : 1;
}

uint64_t test_seed(void)
{
    const char *s = getenv("VIJP_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : 20261202u;
}
