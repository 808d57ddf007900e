/* Nested forward AD against its alternatives (DESIGN §6), for the
 * smooth activations:
 *  - composite autograd: the activation's textbook formula differentiated op
 *    by op, as a framework without a fused kernel does; each op keeps the
 *    tensors its own backward reads (a tensor kept by several ops once);
 *  - nested forward AD: the forward pass evaluates f on dual numbers and keeps
 *    only f′, one value per unit (src/kernels/dual.h);
 *  - recomputation: keep x, one value per unit, and evaluate f′ again in the
 *    backward pass.
 * The composite tape below is real code, so what it keeps is counted, not
 * declared, and bench-activations times all three. */
#ifndef VIJP_COMPOSITE_H
#define VIJP_COMPOSITE_H

#include "vijp/api.h"
#include <stddef.h>
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VIJP_TAPE_MAX 4

typedef struct {
    size_t n;                      /* units */
    size_t count;                  /* tensors kept between the passes */
    double *kept[VIJP_TAPE_MAX];   /* each n values */
    const char *what[VIJP_TAPE_MAX];
    int kind;
} vijp_tape;

/* Whether name ("sigmoid", "softplus", "tanh", "silu", "gelu", "mish") has a
 * composite formula here. */
VIJP_API int vijp_composite_known(const char *name);
/* The formula as a composite autograd sees it, e.g. "x * sigmoid(x)". */
VIJP_API const char *vijp_composite_formula(const char *name);
/* y = f(x) op by op, keeping the tape; 0 or VIJP_EINVAL / VIJP_ENOMEM. */
VIJP_API VIJP_MUST_CHECK int vijp_composite_forward(const char *name, const double *x, size_t n, double *y, vijp_tape *tape);
/* gx = gy ⊙ f′(x) from the tape alone, op by op in reverse. */
VIJP_API void vijp_composite_backward(const vijp_tape *tape, const double *gy, double *gx);
VIJP_API void vijp_tape_clear(vijp_tape *tape);

/* Accuracy of f′ from nested forward AD (the layer's dual_eval) and from the
 * composite tape, against the MPFR oracle at 128 bits, over `points` equally
 * spaced x in [lo, hi]: the worst error in ulps of |f′(x)|.  Left out: points
 * where |f′| < 2^-1000 (subnormal range) and points within `window` of a
 * place where f′ may vanish (vijp_activation_analyze over [lo, hi]), where
 * any evaluation's error relative to |f′| is unbounded. */
typedef struct {
    double nested_ulps, composite_ulps;
    size_t composite_nonfinite; /* NaN or Inf from the composite formula */
    size_t used;                /* points compared */
} vijp_accuracy;
VIJP_API VIJP_MUST_CHECK int vijp_composite_accuracy(const char *name, double lo, double hi, size_t points, double window, vijp_accuracy *out,
                            vijp_error *err);

#ifdef __cplusplus
}
#endif

#endif
