/* A rigorous upper bound on σ_max of a non-negative matrix (radius.c;
 * internal): what the radius test pays for an enclosure's width. */
#ifndef VIJP_CERTIFY_RADIUS_H
#define VIJP_CERTIFY_RADIUS_H

#include <stddef.h>

/* An upper bound, rounded up, on ‖R‖₂ = σ_max(R) for the m × n column-major
 * R with entries >= 0 (finite), never above ‖R‖_F. */
double vijp_radius_norm2_up(const double *R, size_t m, size_t n);

#endif
