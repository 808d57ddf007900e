/* Initialisers shared by layer types. */
#ifndef VIJP_LAYERS_INIT_H
#define VIJP_LAYERS_INIT_H

#include "vijp/rng.h"
#include <stddef.h>

/* W (m × n, column-major) with orthonormal columns (m >= n) or rows, from
 * seeded Gaussian draws by modified Gram–Schmidt twice: the same bits on
 * every machine (src/layers/dense.c).  0 or VIJP_ENOMEM / VIJP_EINVAL. */
int vijp_orthogonal_init(size_t m, size_t n, vijp_rng *rng, double *W);

#endif
