/* Work arrays inside layer operators (void forward, jvp, vjp): through the
 * one allocator, so out of memory ends the run with a message (the policy
 * in vijp/error.h). */
#ifndef VIJP_LAYERS_SCRATCH_H
#define VIJP_LAYERS_SCRATCH_H

#include <stdlib.h>
#include "vijp/error.h"

static inline double *vijp_scratch(size_t n)
{
    return vijp_alloc_array(n, sizeof(double)); /* n may be 0 */
}

#endif
