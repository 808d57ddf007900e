/* A layer plugin: y = tanh(a·x) elementwise, with one learned scale a
 * (θ = [a]).  It gives everything a type can: double operators with f and f′
 * in one evaluation (dual_eval, at θ), MPFR operators written with
 * vijp/arith.h (so drift, report and every emulated format run it), and an
 * MPFI enclosure of f′ at θ for vijp certify.
 *
 *   J = diag(a·sech²(a·x)): submersive wherever a ≠ 0 and a·x does not
 *   push sech² below the format's range (vijp certify finds where).
 *   ∂y/∂a = x·sech²(a·x).
 *
 * Error bound (double), u = 2^-53, z = fl(a·x) within u|z| of a·x: t =
 * tanh(z) within 2 ulps of tanh at the rounded product (glibc); sech²(z) as
 * 4e/(1 + e)² with e = exp(−2|z|) (exp within 1 ulp, 2|z| exact, then three
 * correctly rounded operations: within 5u), not as (1 − t)(1 + t), which
 * cancels (relative error 2u/(1 − |t|), about 400u at |z| = 3) and is exactly
 * 0 past |z| ≈ 19.06, where t rounds to 1.  Rounding z moves sech² by the
 * relative 2|tanh z||z|u <= 2|z|u, so f′ = a·sech²(z) is within (2|z| + 6)u:
 * 16u for |a·x| <= 5, the contract's `ulps` below (vijp check-layer's
 * Gaussian points, a = 1 at initialisation, which check-layer moves by a
 * relative 1/16 at most).
 *
 * Build: make (against the installed headers; see vijp/plugin.h). */
#include <vijp/arith.h>
#include <vijp/interval.h>
#include <vijp/plugin.h>
#include <math.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "scaledtanh takes no argument, got 'scaledtanh:%s'", arg);
    if (!in) return vijp_fail(err, VIJP_EDIM, "scaledtanh keeps its input width, which is unknown here: give --width");
    L->in = L->out = in;
    return 0;
}

static size_t param_count(const vijp_layer *L) { (void)L; return 1; }

/* a = 1 for every initialiser: tanh's own gain (the scale is learned). */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    (void)L, (void)rng;
    th[0] = in.kind == VIJP_INIT_SCALED ? in.gain : 1.0;
    return 0;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; } /* submersive iff a ≠ 0: not structural */

/* sech²(z) = 4e/(1 + e)², e = exp(−2|z|): no cancellation (see above). */
static double sech2(double z)
{
    double e = exp(-2 * fabs(z)), d = 1 + e;
    return 4 * e / (d * d);
}

static void dual_eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L;
    double z = th[0] * x;
    *f = tanh(z), *df = th[0] * sech2(z);
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    double d;
    for (size_t i = 0; i < L->in * B; i++) dual_eval(L, th, X[i], &Y[i], &d);
}

static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                  const double *U, double *V)
{
    (void)cx;
    double f, d;
    for (size_t i = 0; i < L->in * B; i++) dual_eval(L, th, X[i], &f, &d), V[i] = U[i] * d;
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *G, double *Gt)
{
    (void)cx;
    Gt[0] = 0;
    for (size_t i = 0; i < L->in * B; i++) Gt[0] += G[i] * X[i] * sech2(th[0] * X[i]);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)frag;
    double f, d;
    for (size_t i = 0; i < L->in * B; i++) {
        dual_eval(L, th, X[i], &f, &d);
        if (d == 0 || !isfinite(d))
            return vijp_fail(err, VIJP_ESINGULAR, "scaledtanh vijp: f'(x) = %g at unit %zu (x = %g, a = %g)", d,
                             i % L->in, X[i], th[0]);
        Gy[i] = Gx[i] / d;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    double f;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) dual_eval(L, th, x[i], &f, &J[i + i * L->in]);
}

/* ---- MPFR operators: every operation rounded in the format f ---- */

/* d = a·sech²(a·x) and, when t is given, t = tanh(a·x). */
static void deriv_mp(mpfr_t d, mpfr_t t, mpfr_t a, mpfr_t x, const vijp_format *f)
{
    mpfr_t ax;
    mpfr_init2(ax, f->prec);
    vo_mul(ax, a, x, f);
    if (t) vo_tanh(t, ax, f);
    vo_sech(d, ax, f);
    vo_mul(d, d, d, f);
    vo_mul(d, a, d, f);
    mpfr_clear(ax);
}

static void mp_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    mpfr_t ax;
    mpfr_init2(ax, f->prec);
    for (size_t i = 0; i < L->in * B; i++) vo_mul(ax, th[0], X[i], f), vo_tanh(Y[i], ax, f);
    mpfr_clear(ax);
}

static void mp_apply(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    mpfr_t d;
    mpfr_init2(d, f->prec);
    for (size_t i = 0; i < L->in * B; i++) deriv_mp(d, NULL, th[0], X[i], f), vo_mul(V[i], U[i], d, f);
    mpfr_clear(d);
}

static void mp_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *G, mpfr_t *Gt,
                         const vijp_format *f)
{
    mpfr_t s, p; /* ∂y/∂a = x·sech²(a·x) */
    mpfr_inits2(f->prec, s, p, (mpfr_ptr)0);
    vo_set_si(Gt[0], 0, f);
    for (size_t i = 0; i < L->in * B; i++) {
        vo_mul(s, th[0], X[i], f), vo_sech(s, s, f), vo_mul(s, s, s, f);
        vo_mul(p, G[i], X[i], f), vo_mul(p, p, s, f), vo_add(Gt[0], Gt[0], p, f);
    }
    mpfr_clears(s, p, (mpfr_ptr)0);
}

static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)frag;
    mpfr_t d;
    mpfr_init2(d, f->prec);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        deriv_mp(d, NULL, th[0], X[i], f);
        if (mpfr_zero_p(d)) rc = VIJP_ESINGULAR;
        else vo_div(Gy[i], Gx[i], d, f);
    }
    mpfr_clear(d);
    return rc;
}

static void mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    for (size_t k = 0; k < L->in * L->in; k++) vo_set_si(J[k], 0, f);
    for (size_t i = 0; i < L->in; i++) deriv_mp(J[i + i * L->in], NULL, th[0], x[i], f);
}

/* f′ = a·sech²(a·x) over an interval x, rigorously (a is a double, exact). */
static void deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L;
    mpfi_mul_d(d, x, th[0]);
    mpfi_sech(d, d);
    mpfi_sqr(d, d);
    mpfi_mul_d(d, d, th[0]);
}

/* ---- the error-bound contract (vijp/layer.h; vijp check-layer holds the
 * operators to it) ---- */

/* ∂ℓ/∂a = Σ_i G_i·X_i·sech²(a·X_i): N = n·B products of three factors
 * (sech² within (2|z| + 5)u <= 15u for |a·x| <= 5, above; two roundings in
 * the product) summed from zero, so within γ_N + 17u of Σ|G_i||X_i|sech²(a·X_i)
 * (Higham eq. 3.5).  sech² is even: |X| suffices. */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *absX, const double *absG, size_t B,
                            double u, double *bound)
{
    size_t N = L->in * B;
    double s = 0;
    for (size_t i = 0; i < N; i++) s += absG[i] * absX[i] * sech2(th[0] * absX[i]);
    bound[0] += ((double)N + 17) * u * s;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = apply, .vjp = apply, .vjp_param = vjp_param, .vijp = vijp, .jacobian = jacobian,
};

static const vijp_ops_mp ops_mp = {
    .forward = mp_forward, .jvp = mp_apply, .vjp = mp_apply, .vjp_param = mp_vjp_param, .vijp = mp_vijp,
    .jacobian = mp_jacobian,
};

static const vijp_layer_type scaledtanh = {
    .name = "scaledtanh", .syntax = "scaledtanh (tanh(a*x), one learned scale a; keeps its width) [plugin]",
    .parse = parse, .param_count = param_count, .init = init, .declare = declare,
    /* its parameter gradient needs x, so Moonwalk keeps the input (not f′ alone) */
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .interval = &(const vijp_interval_ops){.deriv_enclose = deriv_enclose}, .dual_eval = dual_eval,
    /* f′ within 16u at |a·x| <= 5 (above); no bias; the parameter gradient's bound */
    .bounds = {.ulps = 16}, .vjp_param_bound = vjp_param_bound,
};

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err) { return vijp_layer_register(&scaledtanh, err); }
