/* The choice of the comparisons' lanes set (compare/lanes.h). */
#include "compare/lanes.h"
#include "kernels/kernels.h"
#include <pthread.h>

#ifndef VIJP_GENERIC
extern const cmp_lanes_set vijp_cmp_lanes_avx2, vijp_cmp_lanes_avx512;
#endif

static const cmp_lanes_set *sets[CMP_LANES_SETS], *active;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The sets the kernel table found on this CPU (set 0, the table's ref,
 * is none: fast.c's entries one at a time); the active one follows the
 * table's choice, as src/ddot's does. */
static void choose(void)
{
#ifndef VIJP_GENERIC
    if (vijp_kernels_set(1, NULL)) sets[1] = &vijp_cmp_lanes_avx2;
    if (vijp_kernels_set(2, NULL)) sets[2] = &vijp_cmp_lanes_avx512;
#endif
    int have[3] = {1, sets[1] != NULL, sets[2] != NULL};
    active = sets[vijp_kernels_follow(have)];
}

const cmp_lanes_set *vijp_cmp_lanes_set(int i)
{
    pthread_once(&once, choose);
    return i >= 0 && i < CMP_LANES_SETS ? sets[i] : NULL;
}

const cmp_lanes_set *vijp_cmp_lanes_active(void)
{
    pthread_once(&once, choose);
    return active;
}
