/* Work arrays inside layer operators, whose contracts (void forward, jvp,
 * vjp) leave no way to report failure: running out of memory for a few
 * activations of one layer is fatal, as it is in the oracles. */
#ifndef VIJP_LAYERS_SCRATCH_H
#define VIJP_LAYERS_SCRATCH_H

#include <stdlib.h>
#include "vijp/error.h"

static inline double *vijp_scratch(size_t n)
{
    double *w = vijp_alloc(n * sizeof *w + 1); /* + 1: n may be 0 */
    if (!w) abort();
    return w;
}

#endif
