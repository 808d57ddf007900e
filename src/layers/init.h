/* Initialisers shared by layer types. */
#ifndef VIJP_LAYERS_INIT_H
#define VIJP_LAYERS_INIT_H

#include "vijp/rng.h"
#include "vijp/error.h"
#include <math.h>
#include <stddef.h>

/* W (m × n, column-major) with orthonormal columns (m >= n) or rows,
 * Haar-distributed, from seeded Gaussian draws: the same bits on every
 * machine, BLAS and thread count (src/layers/orthogonal.c).  Up to
 * VIJP_ORTHO_MGS_MAX_WIDTH on the longer side by modified Gram–Schmidt
 * twice (the bits vijp has always drawn), wider by Stewart's Householder
 * product, blocked.  0 or VIJP_EINVAL. */
#define VIJP_ORTHO_MGS_MAX_WIDTH 512
VIJP_MUST_CHECK int vijp_orthogonal_init(size_t m, size_t n, vijp_rng *rng, int threads, double *W);
/* Each algorithm at any size (the tests and bench-orthogonal): portable 1
 * keeps to the portable loops where the CPU has AVX2, which give the same
 * bits; the Householder product's updates run over ranges of columns on up
 * to threads threads (0 or 1: the caller's alone), again the same bits.
 * 0, or (MGS, probability zero) VIJP_EINVAL with W unwritten. */
VIJP_MUST_CHECK int vijp_orthogonal_mgs2(size_t m, size_t n, vijp_rng *rng, int portable, double *W);
VIJP_MUST_CHECK int vijp_orthogonal_householder(size_t m, size_t n, vijp_rng *rng, int portable, int threads,
                                                double *W);

/* n draws U(−1/√fan_in, 1/√fan_in): PyTorch's default for weights and biases. */
static inline void vijp_kaiming_uniform(size_t n, size_t fan_in, vijp_rng *rng, double *w)
{
    double bound = 1 / sqrt((double)fan_in);
    for (size_t i = 0; i < n; i++) w[i] = bound * (2 * vijp_rng_uniform(rng) - 1);
}

#endif
