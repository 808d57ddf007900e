/* The second layer the broken plugins break: PReLU with one learned slope,
 * y = x for x > 0 and a·x otherwise (θ = [a], PyTorch's nn.PReLU with
 * num_parameters = 1), with double operators and, for the plugins that
 * define PRELU_MPFR before including this, MPFR operators written with
 * vijp/arith.h.  Every operator here is right; correct-prelu.c registers
 * them unchanged, and passes; the prelu-drops-term plugins swap the
 * parameter gradient for a wrong one.
 *
 *   J = diag(d), d_i = 1 for x_i > 0, a otherwise: jvp d ⊙ u, vjp d ⊙ g,
 *   vijp g_x / d (singular where a = 0 and some x_i <= 0);
 *   ∂y_i/∂a = min(x_i, 0), so ∂ℓ/∂a = Σ_b Σ_i G_ib·min(x_ib, 0).
 *   a = 0.25 at initialisation (PyTorch's default): a power of two, at which
 *   a·x is exact; `vijp check-layer` moves it by a seeded relative amount.
 *
 * Header-only: each plugin includes it once and builds its type with
 * prelu_type(name, &ops, mp_ops or NULL). */
#include <vijp/plugin.h>
#ifdef PRELU_MPFR
#include <vijp/arith.h>
#endif
#include <math.h>
#include <string.h>

static int prelu_parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "this layer takes no argument, got '%s'", arg);
    if (!in) return vijp_fail(err, VIJP_EDIM, "this layer keeps its width, which is unknown here: give --width");
    L->in = L->out = in;
    return 0;
}

static size_t prelu_param_count(const vijp_layer *L) { (void)L; return 1; }

static int prelu_init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    (void)L, (void)in, (void)rng;
    th[0] = 0.25;
    return 0;
}

static unsigned prelu_declare(const vijp_layer *L) { (void)L; return 0; } /* submersive iff a ≠ 0: not structural */

static void prelu_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                          double *Y)
{
    (void)cx;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = X[i] > 0 ? X[i] : th[0] * X[i];
}

/* jvp and vjp alike: J is diagonal. */
static void prelu_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                        const double *U, double *V)
{
    (void)cx;
    for (size_t i = 0; i < L->in * B; i++) V[i] = X[i] > 0 ? U[i] : th[0] * U[i];
}

/* ∂ℓ/∂a = Σ_b Σ_i G_ib·min(x_ib, 0), over every unit of every sample. */
static void prelu_vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                            const double *G, double *Gt)
{
    (void)cx, (void)th;
    Gt[0] = 0;
    for (size_t i = 0; i < L->in * B; i++)
        if (X[i] <= 0) Gt[0] += G[i] * X[i];
}

static int prelu_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)frag;
    for (size_t i = 0; i < L->in * B; i++) {
        if (X[i] <= 0 && th[0] == 0) return vijp_fail(err, VIJP_ESINGULAR, "PReLU vijp: the slope is 0 at unit %zu", i);
        Gy[i] = X[i] > 0 ? Gx[i] : Gx[i] / th[0];
    }
    return 0;
}

static void prelu_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = x[i] > 0 ? 1 : th[0];
}

static const vijp_ops_d prelu_ops = {
    .forward = prelu_forward, .jvp = prelu_apply, .vjp = prelu_apply, .vjp_param = prelu_vjp_param,
    .vijp = prelu_vijp, .jacobian = prelu_jacobian,
};

#ifdef PRELU_MPFR
/* ---- MPFR operators: every operation rounded in the format f ---- */

static void prelu_mp_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(X[i]) > 0) vo_set(Y[i], X[i], f);
        else vo_mul(Y[i], th[0], X[i], f);
    }
}

static void prelu_mp_apply(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                           const vijp_format *f)
{
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(X[i]) > 0) vo_set(V[i], U[i], f);
        else vo_mul(V[i], th[0], U[i], f);
    }
}

static void prelu_mp_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *G, mpfr_t *Gt,
                               const vijp_format *f)
{
    (void)th;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    vo_set_si(Gt[0], 0, f);
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) <= 0) vo_mul(p, G[i], X[i], f), vo_add(Gt[0], Gt[0], p, f);
    mpfr_clear(p);
}

static int prelu_mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                         const vijp_format *f)
{
    (void)frag;
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(X[i]) > 0) vo_set(Gy[i], Gx[i], f);
        else if (mpfr_zero_p(th[0])) return VIJP_ESINGULAR;
        else vo_div(Gy[i], Gx[i], th[0], f);
    }
    return 0;
}

static void prelu_mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    for (size_t k = 0; k < L->in * L->in; k++) vo_set_si(J[k], 0, f);
    for (size_t i = 0; i < L->in; i++) {
        if (mpfr_sgn(x[i]) > 0) vo_set_si(J[i + i * L->in], 1, f);
        else vo_set(J[i + i * L->in], th[0], f);
    }
}

static const vijp_ops_mp prelu_ops_mp = {
    .forward = prelu_mp_forward, .jvp = prelu_mp_apply, .vjp = prelu_mp_apply, .vjp_param = prelu_mp_vjp_param,
    .vijp = prelu_mp_vijp, .jacobian = prelu_mp_jacobian,
};
#endif

/* ---- the contract (vijp/layer.h) ---- */

/* ∂ℓ/∂a sums up to N = n·B products G_i·x_i (one rounding each) from zero:
 * within γ_N Σ|G_i||x_i| over the x_i <= 0 (Higham eq. 3.5), which the sum
 * over every unit bounds (the signs of x are not given here). */
static void prelu_vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                                  double u, double *bound)
{
    (void)th;
    size_t N = L->in * B;
    double s = 0;
    for (size_t i = 0; i < N; i++) s += aG[i] * aX[i];
    bound[0] += (double)N * u * s;
}

/* The type, with the given name and operators.  f = x or a·x is one
 * rounding and f′ = 1 or a exact: ulps 1. */
static vijp_layer_type prelu_type(const char *name, const vijp_ops_d *ops, const vijp_ops_mp *mp)
{
    vijp_layer_type T = {
        .name = name, .syntax = "PReLU, one learned slope a (broken on purpose or not; keeps its width) [plugin]",
        .parse = prelu_parse, .param_count = prelu_param_count, .init = prelu_init, .declare = prelu_declare,
        /* its parameter gradient needs x, so Moonwalk keeps the input */
        .residual = VIJP_RESIDUAL_INPUT, .d = ops, .mp = mp, .bounds = {.ulps = 1},
        .vjp_param_bound = prelu_vjp_param_bound,
    };
    return T;
}
