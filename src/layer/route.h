/* How a layer operator runs for a format: its route, chosen once per call
 * by vijp_route_of where the operator is dispatched (vijp_layer_* in
 * layer.c), and the kernel context every double and binary32 operator
 * takes as its second argument (vijp_kctx, opaque in vijp/layer.h, defined
 * here for the built-in types, which read their kernels from it). */
#ifndef VIJP_LAYER_ROUTE_H
#define VIJP_LAYER_ROUTE_H

#include "vijp/layer.h"
#include "kernels/kernels.h"

struct vijp_kctx {
    const vijp_kernels *k; /* the format's kernel set (FORMAT@SET), else the default table */
    int storage;           /* on the binary32 route, a mixed format's storage (VIJP_KSTORE_*); else 0 */
};

/* The four ways an operator can run, chosen for a format by vijp_route_of
 * and nowhere else: */
typedef enum {
    VIJP_ROUTE_DOUBLE,   /* double: the type's vijp_ops_d, with cx */
    VIJP_ROUTE_FLOAT,    /* binary32@SET, bfloat16+binary32@SET, binary16+binary32@SET: the
                          * type's vijp_ops_f on floats, with cx; where it has none, or
                          * returns VIJP_EUNSUPPORTED, the emulation as on EMULATED */
    VIJP_ROUTE_EMULATED, /* the narrow emulated formats (vijp_emu_applies): the type's emu
                          * operators, else (NULL, or VIJP_EUNSUPPORTED) its mp ones */
    VIJP_ROUTE_MPFR      /* mpfr:P and the exact-dots reference: the type's mp operators */
} vijp_route_kind;

typedef struct {
    vijp_route_kind kind;
    vijp_kctx cx; /* DOUBLE and FLOAT only (k NULL elsewhere) */
} vijp_route;

vijp_route vijp_route_of(const vijp_format *f);
/* Its context alone (k NULL where the route is neither DOUBLE nor FLOAT). */
vijp_kctx vijp_kctx_of(const vijp_format *f);

/* The MPFR-array operators data of format f runs on: emu where the route
 * emulates and the type has it, else mp (NULL when the type has neither). */
const vijp_ops_mp *vijp_route_mp_ops(const vijp_layer_type *T, const vijp_route *r);

/* An elementwise activation's f and f′ at once (the engines' forward pass
 * keeps f′, engines/backprop.c): Y = f(X), D = f′(X), bit for bit
 * vijp_layer_forward's Y and vijp_layer_jvp's V with every tangent 1, the
 * work they share done once.  Where the type offers it (emu_native.h's
 * mp_forward_deriv) on the MPFR route, X, Y and D MPFR-held at X's
 * precision; else VIJP_EUNSUPPORTED, nothing written or reported, and the
 * caller makes the two calls. */
VIJP_MUST_CHECK int vijp_layer_forward_deriv(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                                             vijp_mat *Y, vijp_mat *D, vijp_error *err);

#endif
