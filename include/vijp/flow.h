/* Log-determinants of the invertible layers normalizing flows use. */
#ifndef VIJP_FLOW_H
#define VIJP_FLOW_H

#include "vijp/api.h"
#include "vijp/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* log |det J| of an inv1x1 layer with parameters A: (positions) · Σ log_s,
 * C additions (src/layers/inv1x1.c). */
VIJP_API double vijp_inv1x1_logdet(const vijp_layer *L, const double *A);

#ifdef __cplusplus
}
#endif

#endif
