/* The slip both prelu-drops-term plugins make, in one place: the
 * parameter gradient ∂ℓ/∂a = Σ_b Σ_i G_ib·min(x_ib, 0) with the terms of
 * every sample but the first dropped (its loop runs over the n units of
 * one sample where n·B terms were meant), so it is right for a batch of
 * one and wrong for any other.  With PRELU_MPFR defined first, the MPFR
 * twin makes the same slip.  The includer names its type
 * (PRELU_DROPS_TERM_NAME); this file registers it. */
#include "prelu.h"

static void vjp_param_first_sample(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X,
                                   size_t B, const double *G, double *Gt)
{
    (void)cx, (void)th, (void)B;
    Gt[0] = 0;
    for (size_t i = 0; i < L->in; i++) /* L->in * B meant */
        if (X[i] <= 0) Gt[0] += G[i] * X[i];
}

static vijp_ops_d ops;
static vijp_layer_type type;

#ifdef PRELU_MPFR
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

static vijp_ops_mp ops_mp;
#endif

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = prelu_ops, ops.vjp_param = vjp_param_first_sample;
#ifdef PRELU_MPFR
    ops_mp = prelu_ops_mp, ops_mp.vjp_param = mp_vjp_param_first_sample;
    type = prelu_type(PRELU_DROPS_TERM_NAME, &ops, &ops_mp);
#else
    type = prelu_type(PRELU_DROPS_TERM_NAME, &ops, NULL);
#endif
    return vijp_layer_register(&type, err);
}
