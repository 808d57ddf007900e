/* A test plugin for certification over a box (tests/t-certify-box.c): the
 * complex square z ↦ a·z² on each pair of units, z = x_{2k} + i·x_{2k+1},
 * a = 3/4 fixed, width n even:
 *
 *   y_{2k} = a(x_{2k}² − x_{2k+1}²),  y_{2k+1} = 2a·x_{2k}·x_{2k+1}.
 *
 * Its Jacobian is block diagonal, each block 2a·[[x, −y], [y, x]] (x, y the
 * pair), a scaled rotation whose two singular values are both 2|a|·|z_k|:
 *   σ_min(J) = 2|a|·min_k |z_k|,
 * so J is singular exactly where some z_k = 0, and over a box the least
 * σ_min is 2|a| times the least distance from the origin of a pair's
 * rectangle.  J(x) − J(w) is the same shape with z_k − w_k, so
 *   ‖J(x) − J(w)‖₂ = 2|a|·max_k |z_k − w_k| <= 2|a|·‖x − w‖₂:
 * the Lipschitz constant 2|a| = 3/2, attained.
 *
 * Four types, the same maths:
 *   csquare       interval Jacobian over a box (jacobian_box);
 *   csquarelip    a Lipschitz constant of J only (jacobian_lipschitz);
 *   csquarebad    a deliberately wrong interval Jacobian: J at the box's
 *                 centre only, too small for any box of positive width;
 *   csquarelipbad a deliberately wrong Lipschitz constant, 2|a|/8. */
#include <vijp/arith.h>
#include <vijp/interval.h>
#include <vijp/plugin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define A 0.75 /* exactly representable: 2a = 1.5 */

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "csquare takes no argument, got '%s'", arg);
    if (!in || in % 2) return vijp_fail(err, VIJP_EDIM, "csquare needs an even width (give --width), got %zu", in);
    L->in = L->out = in;
    return 0;
}

static size_t param_count(const vijp_layer *L) { (void)L; return 0; }
static unsigned declare(const vijp_layer *L) { (void)L; return 0; } /* singular where a pair is 0: not structural */

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i += 2) {
        double x = X[i], y = X[i + 1];
        Y[i] = A * (x * x - y * y), Y[i + 1] = 2 * A * x * y;
    }
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                double *V)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i += 2) {
        double x = X[i], y = X[i + 1];
        V[i] = 2 * A * (x * U[i] - y * U[i + 1]), V[i + 1] = 2 * A * (y * U[i] + x * U[i + 1]);
    }
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *G,
                double *Gx)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i += 2) {
        double x = X[i], y = X[i + 1];
        Gx[i] = 2 * A * (G[i] * x + G[i + 1] * y), Gx[i + 1] = 2 * A * (G[i + 1] * x - G[i] * y);
    }
}

/* g = Gx·J⁻¹ per block: J_k⁻¹ = [[x, y], [−y, x]]/(2a|z|²). */
static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)frag;
    for (size_t i = 0; i < L->in * B; i += 2) {
        double x = X[i], y = X[i + 1], d = 2 * A * (x * x + y * y);
        if (d == 0) return vijp_fail(err, VIJP_ESINGULAR, "csquare vijp: the pair at unit %zu is 0", i % L->in);
        Gy[i] = (Gx[i] * x - Gx[i + 1] * y) / d, Gy[i + 1] = (Gx[i] * y + Gx[i + 1] * x) / d;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    size_t n = L->in;
    memset(J, 0, n * n * sizeof *J);
    for (size_t k = 0; k < n; k += 2) {
        J[k + k * n] = J[(k + 1) + (k + 1) * n] = 2 * A * x[k];
        J[k + (k + 1) * n] = -2 * A * x[k + 1], J[(k + 1) + k * n] = 2 * A * x[k + 1];
    }
}

/* ---- MPFR operators: every operation rounded in the format f ---- */

static void mp_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    mpfr_t a, s, t;
    mpfr_inits2(f->prec, a, s, t, (mpfr_ptr)0);
    vo_set_d(a, A, f);
    for (size_t i = 0; i < L->in * B; i += 2) {
        vo_mul(s, X[i], X[i], f), vo_mul(t, X[i + 1], X[i + 1], f), vo_sub(s, s, t, f), vo_mul(s, a, s, f);
        vo_mul(t, X[i], X[i + 1], f), vo_add(t, t, t, f), vo_mul(Y[i + 1], a, t, f);
        vo_set(Y[i], s, f);
    }
    mpfr_clears(a, s, t, (mpfr_ptr)0);
}

/* V = J·U (transpose 0) or Uᵀ·J (transpose 1) per block, 2a = 1.5 exact. */
static void mp_apply(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, int transpose, const vijp_format *f)
{
    mpfr_t a2, p, q;
    mpfr_inits2(f->prec, a2, p, q, (mpfr_ptr)0);
    vo_set_d(a2, 2 * A, f);
    for (size_t i = 0; i < L->in * B; i += 2) {
        mpfr_ptr x = X[i], y = X[i + 1];
        if (!transpose) { /* (x u0 − y u1, y u0 + x u1) */
            vo_mul(p, x, U[i], f), vo_mul(q, y, U[i + 1], f), vo_sub(p, p, q, f);
            vo_mul(q, y, U[i], f), vo_mul(V[i + 1], x, U[i + 1], f), vo_add(q, q, V[i + 1], f);
        } else { /* (g0 x + g1 y, g1 x − g0 y) */
            vo_mul(p, U[i], x, f), vo_mul(q, U[i + 1], y, f), vo_add(p, p, q, f);
            vo_mul(q, U[i + 1], x, f), vo_mul(V[i + 1], U[i], y, f), vo_sub(q, q, V[i + 1], f);
        }
        vo_mul(V[i], a2, p, f), vo_mul(V[i + 1], a2, q, f);
    }
    mpfr_clears(a2, p, q, (mpfr_ptr)0);
}

static void mp_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    mp_apply(L, X, B, U, V, 0, f);
}

static void mp_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *G, mpfr_t *Gx, const vijp_format *f)
{
    (void)th;
    mp_apply(L, X, B, G, Gx, 1, f);
}

static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)th, (void)frag;
    mpfr_t d, p, q;
    mpfr_inits2(f->prec, d, p, q, (mpfr_ptr)0);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i += 2) {
        mpfr_ptr x = X[i], y = X[i + 1];
        vo_mul(d, x, x, f), vo_mul(p, y, y, f), vo_add(d, d, p, f), vo_set_d(p, 2 * A, f), vo_mul(d, d, p, f);
        if (mpfr_zero_p(d)) {
            rc = VIJP_ESINGULAR;
            break;
        }
        vo_mul(p, Gx[i], x, f), vo_mul(q, Gx[i + 1], y, f), vo_sub(p, p, q, f);
        vo_mul(q, Gx[i], y, f), vo_mul(Gy[i + 1], Gx[i + 1], x, f), vo_add(q, q, Gy[i + 1], f);
        vo_div(Gy[i], p, d, f), vo_div(Gy[i + 1], q, d, f);
    }
    mpfr_clears(d, p, q, (mpfr_ptr)0);
    return rc;
}

static void mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t a2;
    mpfr_init2(a2, f->prec);
    vo_set_d(a2, 2 * A, f);
    for (size_t k = 0; k < n * n; k++) vo_set_si(J[k], 0, f);
    for (size_t k = 0; k < n; k += 2) {
        vo_mul(J[k + k * n], a2, x[k], f), vo_set(J[(k + 1) + (k + 1) * n], J[k + k * n], f);
        vo_mul(J[(k + 1) + k * n], a2, x[k + 1], f), vo_neg(J[k + (k + 1) * n], J[(k + 1) + k * n], f);
    }
    mpfr_clear(a2);
}

/* ---- certification over a box ---- */

/* J over the box x, entry by entry: 2a·[x_2k], ±2a·[x_2k+1], outward rounded. */
static int jacobian_box(const vijp_layer *L, const double *th, const mpfi_t *x, mpfi_t *J)
{
    (void)th;
    size_t n = L->in;
    for (size_t k = 0; k < n * n; k++) mpfi_set_ui(J[k], 0);
    for (size_t k = 0; k < n; k += 2) {
        mpfi_mul_d(J[k + k * n], x[k], 2 * A), mpfi_set(J[(k + 1) + (k + 1) * n], J[k + k * n]);
        mpfi_mul_d(J[(k + 1) + k * n], x[k + 1], 2 * A), mpfi_neg(J[k + (k + 1) * n], J[(k + 1) + k * n]);
    }
    return 0;
}

/* Deliberately wrong: J at the box's centre only, as if the box were a point. */
static int jacobian_box_bad(const vijp_layer *L, const double *th, const mpfi_t *x, mpfi_t *J)
{
    size_t n = L->in;
    mpfi_t *c = malloc(n * sizeof *c);
    mpfr_t m;
    mpfr_init2(m, 128);
    for (size_t k = 0; k < n; k++) mpfi_init2(c[k], 128), mpfi_mid(m, x[k]), mpfi_set_fr(c[k], m);
    int rc = jacobian_box(L, th, (const mpfi_t *)c, J);
    for (size_t k = 0; k < n; k++) mpfi_clear(c[k]);
    mpfr_clear(m);
    free(c);
    return rc;
}

/* 2|a|, derived above; the same on every box. */
static int lipschitz(const vijp_layer *L, const double *th, const double *lo, const double *hi, double *LJ)
{
    (void)L, (void)th, (void)lo, (void)hi;
    *LJ = 2 * fabs(A);
    return 0;
}

/* Deliberately wrong: an eighth of the true constant. */
static int lipschitz_bad(const vijp_layer *L, const double *th, const double *lo, const double *hi, double *LJ)
{
    (void)L, (void)th, (void)lo, (void)hi;
    *LJ = 2 * fabs(A) / 8;
    return 0;
}

static const vijp_ops_d ops_d = {.forward = forward, .jvp = jvp, .vjp = vjp, .vijp = vijp, .jacobian = jacobian};
static const vijp_ops_mp ops_mp = {
    .forward = mp_forward, .jvp = mp_jvp, .vjp = mp_vjp, .vijp = mp_vijp, .jacobian = mp_jacobian,
};

#define CSQUARE(NAME, OPS)                                                                                              \
    {                                                                                                                   \
        .name = NAME, .syntax = NAME " (a·z² on each pair of units, a = 3/4; even width) [test plugin]",             \
        .parse = parse, .param_count = param_count, .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, \
        .mp = &ops_mp, .interval = OPS,                                                                                 \
    }

static const vijp_layer_type types[] = {
    CSQUARE("csquare", &(const vijp_interval_ops){.jacobian_box = jacobian_box}),
    CSQUARE("csquarelip", &(const vijp_interval_ops){.jacobian_lipschitz = lipschitz}),
    CSQUARE("csquarebad", &(const vijp_interval_ops){.jacobian_box = jacobian_box_bad}),
    CSQUARE("csquarelipbad", &(const vijp_interval_ops){.jacobian_lipschitz = lipschitz_bad}),
};

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }

int vijp_plugin_init(vijp_error *err)
{
    int rc = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types && !rc; t++) rc = vijp_layer_register(&types[t], err);
    return rc;
}
