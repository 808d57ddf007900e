/* Initialisers shared by layer types. */
#ifndef VIJP_LAYERS_INIT_H
#define VIJP_LAYERS_INIT_H

#include "vijp/rng.h"
#include "vijp/error.h"
#include <math.h>
#include <stddef.h>

/* W (m × n, column-major) with orthonormal columns (m >= n) or rows, from
 * seeded Gaussian draws by modified Gram–Schmidt twice: the same bits on
 * every machine (src/layers/dense.c).  0 or VIJP_EINVAL. */
VIJP_MUST_CHECK int vijp_orthogonal_init(size_t m, size_t n, vijp_rng *rng, double *W);

/* n draws U(−1/√fan_in, 1/√fan_in): PyTorch's default for weights and biases. */
static inline void vijp_kaiming_uniform(size_t n, size_t fan_in, vijp_rng *rng, double *w)
{
    double bound = 1 / sqrt((double)fan_in);
    for (size_t i = 0; i < n; i++) w[i] = bound * (2 * vijp_rng_uniform(rng) - 1);
}

#endif
