/* Exact rank of a double matrix by integer arithmetic (FLINT); internal. */
#ifndef VIJP_CERTIFY_EXACT_H
#define VIJP_CERTIFY_EXACT_H

#include <stddef.h>

/* 1 and *cokernel_dim = m − rank(M), proven (certify_exact.c), for the
 * m × n column-major double matrix M; 0 when the bounds did not meet. */
int vijp_exact_cokernel(const double *M, size_t m, size_t n, size_t *cokernel_dim);

#endif
