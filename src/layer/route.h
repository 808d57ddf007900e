/* How a layer operator runs for a format, resolved once per call where the
 * format is known (vijp_layer_* in layer.c, an engine run) and passed down:
 * the kernel context every double and binary32 operator takes as its second
 * argument (vijp_kctx, opaque in vijp/layer.h, defined here for the built-in
 * types, which read their kernels from it). */
#ifndef VIJP_LAYER_ROUTE_H
#define VIJP_LAYER_ROUTE_H

#include "vijp/layer.h"
#include "kernels/kernels.h"

struct vijp_kctx {
    const vijp_kernels *k; /* the format's kernel set (FORMAT@SET), else the default table */
    int storage;           /* on the binary32 route, a mixed format's storage (VIJP_KSTORE_*); else 0 */
};

/* The context of data in format f: the kernels of its @SET, or the table
 * selected once for the process (vijp_kernels_active); none (k NULL) for a
 * format whose operators are MPFR's. */
vijp_kctx vijp_kctx_of(const vijp_format *f);

/* Nonzero when values of format f may take the native binary32 route
 * (binary32@SET, and bfloat16+binary32@SET, binary16+binary32@SET with
 * *storage their VIJP_KSTORE_*; 0 for binary32). */
int vijp_route_float(const vijp_format *f, int *storage);

#endif
