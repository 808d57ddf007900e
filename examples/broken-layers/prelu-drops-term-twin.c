/* Broken on purpose, twice alike: prelu-drops-term.c's parameter gradient
 * (the first sample's terms only), and an MPFR twin written from the same
 * derivation with the same slip.  vjp-param-vs-mpfr compares the two and
 * passes: a twin that shares a bug cannot see it.  Caught by check-layer's
 * `vijp-param-vs-differences`, which differences the MPFR forward in a and
 * reads neither gradient operator. */
#define PRELU_MPFR
#include "prelu.h"

static void vjp_param_first_sample(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X,
                                   size_t B, const double *G, double *Gt)
{
    (void)cx, (void)th, (void)B;
    Gt[0] = 0;
    for (size_t i = 0; i < L->in; i++) /* L->in * B meant */
        if (X[i] <= 0) Gt[0] += G[i] * X[i];
}

static void mp_vjp_param_first_sample(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *G, mpfr_t *Gt,
                                      const vijp_format *f)
{
    (void)th, (void)B;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    vo_set_si(Gt[0], 0, f);
    for (size_t i = 0; i < L->in; i++) /* the same slip */
        if (mpfr_sgn(X[i]) <= 0) vo_mul(p, G[i], X[i], f), vo_add(Gt[0], Gt[0], p, f);
    mpfr_clear(p);
}

static vijp_ops_d ops;
static vijp_ops_mp ops_mp;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = prelu_ops, ops.vjp_param = vjp_param_first_sample;
    ops_mp = prelu_ops_mp, ops_mp.vjp_param = mp_vjp_param_first_sample;
    type = prelu_type("prelu_drops_term_twin", &ops, &ops_mp);
    return vijp_layer_register(&type, err);
}
