/* The activations after the catalogue's first six, with their PyTorch
 * definitions: elu[:ALPHA], selu, gelu:tanh, softplus[:BETA[/THRESHOLD]],
 * hardtanh[:LO/HI], relu6, hardswish, softsign.
 *
 * f and f′ of the double layers (their forward and Jacobian) and of their
 * MPFR twins (oracles/activations_elu.c, piecewise_act.c) against a third
 * evaluation here: torch's formulas as written (α(e^x − 1),
 * 0.5x(1 + tanh(k(x + c·x³))), log1p(e^{βx})/β, x·relu6(x + 3)/6,
 * x/(1 + |x|), their
 * derivatives by hand as torch's backward takes them at the kinks)
 * at 4096 bits, enough that even 1 + tanh(v) at x = −30 (1 − 10^-857) keeps
 * 370 digits.  Points: 0, the kinks and thresholds and their neighbours,
 * the far tails where e^x and σ underflow.  Bounds: each layer file's
 * derivation (the contract's ulps for elu, selu, softplus; gelu:tanh's
 * per-point (8 + 8|v|σ(−v))u on f and the term bound on f′, which grows
 * in the left tail), 1.01 for the reference's own rounding; below 2^-1022
 * the double result is subnormal and must be within 2^-1022 absolute.
 * Beside them: softplus past its threshold returns x itself, the jump at
 * the threshold, the f′ enclosures across the kinks, print and parse
 * agreeing, the hidden variants' descriptors passing registration's
 * checks, and bad arguments refused (exit 2, a message). */
#include "fixtures/layerfix.h"
#include "fixtures/clirun.h"
#include "oracles/oracles.h"
#include "vijp/interval.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define TORCH_REF_PREC 4096
#define SELU_ALPHA_TEXT "1.6732632423543772848170429916717" /* torch: aten/src/ATen/native/Activation.cpp */
#define SELU_SCALE_TEXT "1.0507009873554804934193349852946"

enum kind { ELU, SELU, GELU_TANH, SOFTPLUS, HARDTANH, HARDSWISH, SOFTSIGN };
static const struct {
    const char *spec;
    enum kind kind;
    double alpha_or_beta, threshold; /* elu's α; softplus's β and threshold (inf: none) */
} specs[] = {
    {"elu", ELU, 1, 0},           {"elu:0.5", ELU, 0.5, 0},          {"elu:3", ELU, 3, 0},
    {"selu", SELU, 0, 0},         {"gelu:tanh", GELU_TANH, 0, 0},    {"softplus:1/20", SOFTPLUS, 1, 20},
    {"softplus:2", SOFTPLUS, 2, INFINITY}, {"softplus:0.5/3", SOFTPLUS, 0.5, 3}, {"softplus:10/-2", SOFTPLUS, 10, -2},
    {"hardtanh", HARDTANH, -1, 1}, {"hardtanh:-2/0.5", HARDTANH, -2, 0.5}, {"relu6", HARDTANH, 0, 6},
    {"hardswish", HARDSWISH, 0, 0}, {"softsign", SOFTSIGN, 0, 0},
};
#define NSPECS (sizeof specs / sizeof *specs)

/* f and f′ at x by torch's formulas, at TORCH_REF_PREC. */
static void reference(size_t s, double x, mpfr_t f, mpfr_t d)
{
    mpfr_t a, t, u, k;
    mpfr_inits2(TORCH_REF_PREC, a, t, u, k, (mpfr_ptr)0);
    mpfr_set_d(u, x, MPFR_RNDN), mpfr_set_zero(k, 1);
    switch (specs[s].kind) {
    case ELU:
    case SELU:
        if (specs[s].kind == ELU) mpfr_set_d(a, specs[s].alpha_or_beta, MPFR_RNDN), mpfr_set_ui(k, 1, MPFR_RNDN);
        else mpfr_set_str(a, SELU_ALPHA_TEXT, 10, MPFR_RNDN), mpfr_set_str(k, SELU_SCALE_TEXT, 10, MPFR_RNDN);
        if (x > 0) mpfr_mul(f, k, u, MPFR_RNDN), mpfr_set(d, k, MPFR_RNDN);
        else {
            mpfr_exp(t, u, MPFR_RNDN), mpfr_mul(d, t, a, MPFR_RNDN), mpfr_mul(d, d, k, MPFR_RNDN);
            mpfr_sub_ui(t, t, 1, MPFR_RNDN), mpfr_mul(f, t, a, MPFR_RNDN), mpfr_mul(f, f, k, MPFR_RNDN);
        }
        break;
    case GELU_TANH: /* 0.5x(1 + tanh(w)), w = k(x + c·x³); f′ = 0.5(1 + tanh w) + 0.5x·sech²(w)·k(1 + 3c·x²) */
        mpfr_const_pi(k, MPFR_RNDN), mpfr_ui_div(k, 2, k, MPFR_RNDN), mpfr_sqrt(k, k, MPFR_RNDN);
        mpfr_set_d(a, 0.044715, MPFR_RNDN); /* torch's kKappa, the double */
        mpfr_pow_ui(t, u, 3, MPFR_RNDN), mpfr_mul(t, t, a, MPFR_RNDN), mpfr_add(t, t, u, MPFR_RNDN);
        mpfr_mul(t, t, k, MPFR_RNDN), mpfr_tanh(t, t, MPFR_RNDN);         /* tanh w */
        mpfr_add_ui(f, t, 1, MPFR_RNDN), mpfr_mul(f, f, u, MPFR_RNDN), mpfr_div_2ui(f, f, 1, MPFR_RNDN);
        mpfr_sqr(d, t, MPFR_RNDN), mpfr_ui_sub(d, 1, d, MPFR_RNDN);      /* sech² w */
        mpfr_sqr(t, u, MPFR_RNDN), mpfr_mul(t, t, a, MPFR_RNDN), mpfr_mul_ui(t, t, 3, MPFR_RNDN);
        mpfr_add_ui(t, t, 1, MPFR_RNDN), mpfr_mul(t, t, k, MPFR_RNDN), mpfr_mul(d, d, t, MPFR_RNDN);
        mpfr_mul(d, d, u, MPFR_RNDN);
        mpfr_div(t, f, u, MPFR_RNDN); /* 0.5(1 + tanh w), from f (x != 0 here) */
        if (x == 0) mpfr_set_d(t, 0.5, MPFR_RNDN);
        mpfr_div_2ui(d, d, 1, MPFR_RNDN), mpfr_add(d, d, t, MPFR_RNDN);
        break;
    case HARDTANH: /* torch: min(max(x, lo), hi); backward passes the gradient where lo < x < hi */
        mpfr_set_d(f, x <= specs[s].alpha_or_beta ? specs[s].alpha_or_beta : x >= specs[s].threshold ? specs[s].threshold : x,
                   MPFR_RNDN);
        mpfr_set_ui(d, x > specs[s].alpha_or_beta && x < specs[s].threshold, MPFR_RNDN);
        break;
    case SOFTSIGN: /* torch: x/(1 + |x|); backward grad/(1 + |x|)^2 */
        mpfr_abs(t, u, MPFR_RNDN), mpfr_add_ui(t, t, 1, MPFR_RNDN), mpfr_div(f, u, t, MPFR_RNDN);
        mpfr_sqr(t, t, MPFR_RNDN), mpfr_ui_div(d, 1, t, MPFR_RNDN);
        break;
    case HARDSWISH: /* torch: x·min(max(x + 3, 0), 6)/6; backward 0 (x < −3), x/3 + 1/2 (x <= 3), 1 */
        mpfr_add_ui(t, u, 3, MPFR_RNDN), mpfr_max(t, t, k, MPFR_RNDN); /* k is 0 here */
        if (mpfr_cmp_ui(t, 6) > 0) mpfr_set_ui(t, 6, MPFR_RNDN);
        mpfr_mul(f, u, t, MPFR_RNDN), mpfr_div_ui(f, f, 6, MPFR_RNDN);
        if (x < -3) mpfr_set_ui(d, 0, MPFR_RNDN);
        else if (x <= 3) mpfr_div_ui(d, u, 3, MPFR_RNDN), mpfr_add_d(d, d, 0.5, MPFR_RNDN);
        else mpfr_set_ui(d, 1, MPFR_RNDN);
        break;
    case SOFTPLUS: /* torch: (x*beta) > threshold ? x : log1p(exp(x*beta))/beta, the test in double; for
                    * βx > 0 as x + log1p(exp(−βx))/β, the same number without MPFR's overflow at x = 1e300 */
        if (specs[s].alpha_or_beta * x > specs[s].threshold) mpfr_set(f, u, MPFR_RNDN), mpfr_set_ui(d, 1, MPFR_RNDN);
        else {
            mpfr_set_d(a, specs[s].alpha_or_beta, MPFR_RNDN), mpfr_mul(t, u, a, MPFR_RNDN);
            if (x > 0) mpfr_neg(t, t, MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN), mpfr_log1p(f, t, MPFR_RNDN), mpfr_div(f, f, a, MPFR_RNDN); /* t = e^{−|βx|} */
            if (x > 0) mpfr_add(f, f, u, MPFR_RNDN);
            mpfr_add_ui(d, t, 1, MPFR_RNDN);
            if (x > 0) mpfr_ui_div(d, 1, d, MPFR_RNDN);
            else mpfr_div(d, t, d, MPFR_RNDN);
        }
        break;
    }
    mpfr_clears(a, t, u, k, (mpfr_ptr)0);
}

/* The stated bound on |f̂ − f| and |f̂′ − f′| in units of u at x (the
 * layer files' derivations; gelu:tanh's from its terms). */
static void bounds_at(size_t s, const vijp_layer *L, double x, double *bf, double *bd)
{
    if (specs[s].kind != GELU_TANH) {
        *bf = *bd = L->type->bounds.ulps;
        return;
    }
    double k2 = 2 * sqrt(2 / M_PI), v = k2 * (x + 0.044715 * x * x * x), vp = k2 * (1 + 3 * 0.044715 * x * x);
    double sg = v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)), sm = 1 - sg; /* σ(v), σ(−v): double is enough */
    if (v > 0) sm = exp(-v) / (1 + exp(-v));
    double t1 = sg, t2 = fabs(x * sg * sm * vp), d = fabs(t1 + x * sg * sm * vp), kf = 8 + 8 * fabs(v) * sm;
    *bf = kf;
    *bd = d > 0 ? (kf * t1 + (23 + 8 * fabs(v)) * t2) / d : INFINITY;
}

static const double points[] = {0, 0x1p-1074, -0x1p-1074, 1e-300, -1e-300, 1e-8, -1e-8, 0.5, -0.5, 1, -1, 2, -2,
                                2.5, 3, 5.99, 6, 6.01, -3, 4, -4, -10, -20, -30, 19.999999999, 20, 20.000000001,
                                30, -700, -745.5, -800, 700, 1e6, -1e6, 1e300, -1e300, -1.5, -1.4999999999, -2.99,
                                -3.01, 2.99, 3.01, 0.49, 0.51, -1.99, -2.01};
#define NPOINTS (sizeof points / sizeof *points)

/* got against want within bound·u relative (1.01 for want's own rounding),
 * or 2^-1022 absolute where want is below the normal range. */
static void expect_close(const char *spec, const char *what, double x, double got, mpfr_t want, double bound, double u)
{
    double w = mpfr_get_d(want, MPFR_RNDN), tiny = ldexp(1, -1022);
    mpfr_t e;
    mpfr_init2(e, TORCH_REF_PREC);
    mpfr_sub_d(e, want, got, MPFR_RNDN);
    double err = fabs(mpfr_get_d(e, MPFR_RNDU));
    mpfr_clear(e);
    if (fabs(w) < tiny && u >= 0x1p-53) ck_assert_msg(err <= tiny, "%s %s(%.17g) = %a, torch's formula %a (0 or below the normal range: want it within 2^-1022)",
                                                     spec, what, x, got, w);
    else ck_assert_msg(err <= 1.01 * bound * u * fabs(w), "%s %s(%.17g) = %.17g, torch's formula %.17g: error %g, bound %g",
                       spec, what, x, got, w, err, 1.01 * bound * u * fabs(w));
}

/* f(x) and f′(x) through the layer's own operators at one unit: the double
 * ones (forward, jacobian) and the MPFR twin's at TWIN_PREC bits. */
#define TWIN_PREC 200
static void layer_at(const vijp_layer *L, double x, double *f, double *d, mpfr_t tf, mpfr_t td)
{
    vijp_format fd, twin;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    ck_assert(!vijp_format_mpfr(&twin, TWIN_PREC, NULL));
    vijp_mat xm = {.rows = 1, .cols = 1, .fmt = &fd, .d = &x}, fm = {.rows = 1, .cols = 1, .fmt = &fd, .d = f},
             dm = {.rows = 1, .cols = 1, .fmt = &fd, .d = d};
    ck_assert(!vijp_layer_forward(L, NULL, &xm, &fm, NULL) && !vijp_layer_jacobian(L, NULL, &xm, &dm, NULL));
    mpfr_t *X = vo_vec_new(1, &twin);
    mpfr_set_d(X[0], x, MPFR_RNDN);
    L->type->mp->forward(L, NULL, X, 1, (mpfr_t *)tf, &twin);
    L->type->mp->jacobian(L, NULL, X, (mpfr_t *)td, &twin);
    vo_vec_free(X, 1);
}

START_TEST(values_vs_torch_formulas)
{
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_parse(&L, specs[_i].spec, 1, &err), "%s: %s", specs[_i].spec, err.msg);
    mpfr_t f, d, tf, td;
    mpfr_inits2(TORCH_REF_PREC, f, d, (mpfr_ptr)0);
    mpfr_inits2(TWIN_PREC, tf, td, (mpfr_ptr)0);
    for (size_t p = 0; p < NPOINTS; p++) {
        double x = points[p], fx, dfx, bf, bd;
        if (specs[_i].kind == GELU_TANH && fabs(x) > 30) continue; /* beyond 4096 bits' reach in the tanh form */
        reference(_i, x, f, d);
        bounds_at(_i, &L, x, &bf, &bd);
        layer_at(&L, x, &fx, &dfx, tf, td);
        expect_close(specs[_i].spec, "f", x, fx, f, bf, 0x1p-53);
        if (isfinite(bd)) expect_close(specs[_i].spec, "f'", x, dfx, d, bd, 0x1p-53);
        /* the twin, the same bounds at u = 2^-TWIN_PREC; SELU's twin takes torch's constants as doubles
         * (as torch float64 does), the reference as written: two roundings to double, 2·2^-53 relative */
        double consts = specs[_i].kind == SELU ? 2 * 0x1p-53 : 0, ut = ldexp(1, -TWIN_PREC);
        mpfr_sub(tf, tf, f, MPFR_RNDN), mpfr_sub(td, td, d, MPFR_RNDN);
        if (!mpfr_zero_p(f)) {
            mpfr_div(tf, tf, f, MPFR_RNDN);
            ck_assert_msg(fabs(mpfr_get_d(tf, MPFR_RNDN)) <= 1.01 * bf * ut + consts,
                          "%s twin f(%.17g): relative error %g over %g·u", specs[_i].spec, x, mpfr_get_d(tf, MPFR_RNDN), bf);
        } else ck_assert_msg(mpfr_zero_p(tf), "%s twin f(%.17g) is not 0", specs[_i].spec, x);
        if (!mpfr_zero_p(d) && isfinite(bd)) {
            mpfr_div(td, td, d, MPFR_RNDN);
            ck_assert_msg(fabs(mpfr_get_d(td, MPFR_RNDN)) <= 1.01 * bd * ut + consts,
                          "%s twin f'(%.17g): relative error %g over %g·u", specs[_i].spec, x, mpfr_get_d(td, MPFR_RNDN), bd);
        } else if (mpfr_zero_p(d)) ck_assert_msg(mpfr_zero_p(td), "%s twin f'(%.17g) is not 0", specs[_i].spec, x);
    }
    mpfr_clears(f, d, tf, td, (mpfr_ptr)0);
    vijp_layer_clear(&L);
}
END_TEST

/* The flat units are the fragment, where torch's backward gives 0: relu6 at
 * 0 and 6 themselves (it passes the gradient strictly inside), hardswish
 * below −3 and at −1.5 (f′ = 0 there) but not at −3 (torch: −3/3 + 1/2);
 * the vijp puts the fragment back on them and divides by f′ elsewhere. */
START_TEST(fragments_on_flat_units)
{
    static const struct {
        const char *spec;
        double x[6];
        size_t flat[6], n_flat;
    } cases[] = {{"relu6", {-1, 0, 3, 6, 7, 5.5}, {0, 1, 3, 4}, 4}, {"hardswish", {-4, -3, -1.5, 0, 3, 2}, {0, 2}, 2}};
    for (size_t c = 0; c < 2; c++) {
        vijp_layer L;
        ck_assert(!vijp_layer_parse(&L, cases[c].spec, 6, NULL));
        vijp_format fd;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        double X[6], G[6] = {1, 2, 3, 4, 5, 6}, frag[6], back[6], J[36];
        memcpy(X, cases[c].x, sizeof X);
        vijp_mat Xm = {.rows = 6, .cols = 1, .fmt = &fd, .d = X}, Gm = {.rows = 6, .cols = 1, .fmt = &fd, .d = G},
                 Bm = {.rows = 6, .cols = 1, .fmt = &fd, .d = back}, Jm = {.rows = 6, .cols = 6, .fmt = &fd, .d = J};
        ck_assert_uint_eq(vijp_layer_fragment_count(&L, NULL, &Xm), cases[c].n_flat);
        vijp_mat Fm = {.rows = cases[c].n_flat, .cols = 1, .fmt = &fd, .d = frag};
        ck_assert(!vijp_layer_fragment(&L, NULL, &Xm, &Gm, &Fm, NULL) && !vijp_layer_jacobian(&L, NULL, &Xm, &Jm, NULL));
        for (size_t k = 0; k < cases[c].n_flat; k++) {
            ck_assert_msg(frag[k] == G[cases[c].flat[k]], "%s fragment %zu: %g", cases[c].spec, k, frag[k]);
            ck_assert(J[cases[c].flat[k] * 7] == 0);
        }
        /* Gx = G·J on the others; vijp(Gx, fragment) gives G back (exact for relu6's 0/1 slopes; hardswish's
         * divides by what the vjp multiplied by: 2u relative) */
        double Gx[6];
        for (size_t i = 0; i < 6; i++) Gx[i] = G[i] * J[i * 7];
        vijp_mat GXm = {.rows = 6, .cols = 1, .fmt = &fd, .d = Gx};
        ck_assert(!vijp_layer_vijp(&L, NULL, &Xm, &GXm, &Fm, &Bm, NULL));
        for (size_t i = 0; i < 6; i++)
            ck_assert_msg(fabs(back[i] - G[i]) <= 2 * 0x1p-53 * G[i], "%s vijp unit %zu: %.17g, want %g", cases[c].spec, i,
                          back[i], G[i]);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* torch's softplus(x, 1, 20): x itself (every bit) once x·β > 20, and f′ = 1;
 * at 20 itself still log1p(e^20), which lies above the value just past it
 * by log1p(e^-20) ≈ 2.06e-9: f falls at the threshold (why the layer is no
 * bijection and has no inverse).  Through the layer's double forward, its
 * MPFR twin at 53 bits, and the jvp (f′). */
START_TEST(softplus_threshold_returns_x)
{
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "softplus:1/20", 5, NULL));
    double X[5] = {nextafter(20, 30), 21, 1e10, 1e300, 20}, Y[5], U[5] = {1, 1, 1, 1, 1}, V[5];
    vijp_format fd, f53;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    ck_assert(!vijp_format_mpfr(&f53, 53, NULL));
    vijp_mat Xm = {.rows = 5, .cols = 1, .fmt = &fd, .d = X}, Ym = {.rows = 5, .cols = 1, .fmt = &fd, .d = Y},
             Um = {.rows = 5, .cols = 1, .fmt = &fd, .d = U}, Vm = {.rows = 5, .cols = 1, .fmt = &fd, .d = V};
    ck_assert(!vijp_layer_forward(&L, NULL, &Xm, &Ym, NULL));
    ck_assert(!vijp_layer_jvp(&L, NULL, &Xm, &Um, &Vm, NULL));
    mpfr_t *Xp = vo_vec_new(5, &f53), *Yp = vo_vec_new(5, &f53);
    for (int i = 0; i < 5; i++) mpfr_set_d(Xp[i], X[i], MPFR_RNDN);
    vo_softplus_beta_forward(&L, NULL, Xp, 1, Yp, &f53);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(Y[i] == X[i] && V[i] == 1, "softplus:1/20 at %.17g: f %.17g, f' %.17g", X[i], Y[i], V[i]);
        ck_assert_msg(mpfr_get_d(Yp[i], MPFR_RNDN) == X[i], "twin at %.17g: %.17g", X[i], mpfr_get_d(Yp[i], MPFR_RNDN));
    }
    /* at 20: log1p(e^20) = 20 + log1p(e^-20) in double, within 7u of it (softplus_beta.c) */
    double jump = log1p(exp(-20.0));
    ck_assert_msg(Y[4] > Y[0], "f does not fall at the threshold: f(20) = %.17g, f(next) = %.17g", Y[4], Y[0]);
    ck_assert_msg(fabs(Y[4] - (20 + jump)) <= 7 * 0x1p-53 * Y[4], "f(20) = %.17g, want 20 + %.17g", Y[4], jump);
    ck_assert_msg(V[4] < 1 && fabs(V[4] - 1 / (1 + exp(-20.0))) <= 8 * 0x1p-53, "f'(20) = %.17g", V[4]);
    vo_vec_free(Xp, 5), vo_vec_free(Yp, 5);
    vijp_layer_clear(&L);
}
END_TEST

/* The f′ enclosures (certify) hold the derivative on both sides of a kink or
 * threshold, and around gelu:tanh's zero of f′ (at interior points: a double
 * f′ at an end may round past the enclosure's exact end). */
static void enclosure(const char *spec, double lo, double hi, const double *inside, size_t n_inside, double outside)
{
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, spec, 1, NULL));
    mpfi_t x, d;
    mpfi_init2(x, 128), mpfi_init2(d, 128);
    mpfi_interv_d(x, lo, hi);
    vijp_deriv_enclose_of(L.type)(&L, NULL, d, x);
    for (size_t i = 0; i < n_inside; i++)
        ck_assert_msg(mpfi_is_inside_d(inside[i], d) > 0, "%s over [%g, %g]: f' enclosure misses %.17g", spec, lo, hi, inside[i]);
    if (!isnan(outside)) ck_assert_msg(!(mpfi_is_inside_d(outside, d) > 0), "%s over [%g, %g] holds %g", spec, lo, hi, outside);
    mpfi_clear(x), mpfi_clear(d);
    vijp_layer_clear(&L);
}

START_TEST(enclosures_across_kinks)
{
    double elu_kink[] = {0.5 * exp(-0.05), 0.5, 1}, elu_left[] = {0.5 * exp(-0.75)};
    enclosure("elu:0.5", -0.1, 0.1, elu_kink, 3, 2);
    enclosure("elu:0.5", -1, -0.5, elu_left, 1, 1);
    double selu_kink[] = {1.0507009873554805 * 1.6732632423543772, 1.0507009873554805};
    enclosure("selu", -1e-9, 1e-9, selu_kink, 2, NAN);
    double sp_thr[] = {1 / (1 + exp(-1.95)), 1 / (1 + exp(-2.0)), 1}, sp_below[] = {1 / (1 + exp(-1.5))};
    enclosure("softplus:1/2", 1.9, 2.1, sp_thr, 3, NAN);
    enclosure("softplus:1/2", 1, 1.9, sp_below, 1, 1);
    double zero[] = {0};
    enclosure("gelu:tanh", -0.8, -0.7, zero, 1, NAN);
    vijp_layer G;
    ck_assert(!vijp_layer_parse(&G, "gelu:tanh", 1, NULL));
    double f, d1;
    G.type->dual_eval(&G, NULL, 1.5, &f, &d1);
    enclosure("gelu:tanh", 1, 2, &d1, 1, 0);
    vijp_layer_clear(&G);
    double ht_kink[] = {0, 1}, ht_in[] = {1}, hs_all[] = {0, -0.5, 0.5, 1.5, 1}, hs_mid[] = {-0.5, 0, 0.5};
    enclosure("hardtanh", 0.9, 1.1, ht_kink, 2, NAN);
    enclosure("relu6", 1, 5, ht_in, 1, 0);
    enclosure("hardswish", -4, 4, hs_all, 5, 2);
    enclosure("hardswish", -3, 0, hs_mid, 3, 1);
}
END_TEST

/* print gives back a spec that parses to the same layer (type and print),
 * and the descriptors that the registry does not list (reached through
 * gelu's and softplus's parse) pass the checks registration makes. */
START_TEST(print_parses_back)
{
    static const char *const items[][2] = {
        {"elu", "elu"}, {"elu:1", "elu"}, {"elu:0.1", "elu:0.1"}, {"elu:2.5e-3", "elu:0.0025"}, {"elu:4096", "elu:4096"},
        {"selu", "selu"}, {"gelu", "gelu"}, {"gelu:tanh", "gelu:tanh"}, {"softplus", "softplus"},
        {"softplus:1", "softplus"}, {"softplus:1/20", "softplus:1/20"}, {"softplus:2", "softplus:2"},
        {"softplus:0.1/1e30", "softplus:0.1/1e30"}, {"softplus:3/-2.5", "softplus:3/-2.5"},
        {"hardtanh", "hardtanh"}, {"hardtanh:-1/1", "hardtanh"}, {"hardtanh:-2/0.5", "hardtanh:-2/0.5"},
        {"hardtanh:1e-20/1e20", "hardtanh:1e-20/1e20"}, {"relu6", "relu6"}, {"hardswish", "hardswish"}, {"softsign", "softsign"},
        {"prelu", "prelu"}, {"prelu:1", "prelu"}, {"prelu:2", "prelu:2"},
    };
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        vijp_layer L, M;
        vijp_error err = {0};
        char buf[64], again[64];
        ck_assert_msg(!vijp_layer_parse(&L, items[i][0], 4, &err), "%s: %s", items[i][0], err.msg);
        vijp_layer_spec(&L, buf, sizeof buf);
        ck_assert_msg(!strcmp(buf, items[i][1]), "%s prints as %s, want %s", items[i][0], buf, items[i][1]);
        ck_assert_msg(!vijp_layer_parse(&M, buf, 4, &err), "%s: %s", buf, err.msg);
        vijp_layer_spec(&M, again, sizeof again);
        ck_assert_msg(M.type == L.type && !strcmp(buf, again), "%s: %s then %s", items[i][0], buf, again);
        ck_assert_msg(!vijp_layer_type_check(L.type, &err), "%s: %s", L.type->name, err.msg);
        vijp_layer copy;
        vijp_layer_copy(&copy, &L);
        vijp_layer_spec(&copy, again, sizeof again);
        ck_assert_str_eq(again, buf);
        vijp_layer_clear(&copy), vijp_layer_clear(&M), vijp_layer_clear(&L);
    }
}
END_TEST

/* Bad arguments: refused with a message that says what is wanted; through
 * the command, exit status 2 and nothing on stdout. */
START_TEST(bad_arguments_refused)
{
    static const char *const bad[][2] = {
        {"elu:0", "alpha"},      {"elu:-1", "alpha"},     {"elu:1e9", "alpha"},     {"elu:abc", "elu:ALPHA"},
        {"elu:", "elu:ALPHA"},   {"elu:nan", "elu:ALPHA"}, {"elu:inf", "elu:ALPHA"}, {"elu: 1", "elu:ALPHA"},
        {"elu:1/2", "elu:ALPHA"}, {"selu:1", "no argument"}, {"gelu:erf", "tanh"},     {"gelu:tanh:1", "tanh"},
        {"softplus:0", "beta"},  {"softplus:-1", "beta"}, {"softplus:1e5", "beta"}, {"softplus:1/", "THRESHOLD"},
        {"softplus:/20", "THRESHOLD"}, {"softplus:1/x", "THRESHOLD"}, {"softplus:1/20/3", "THRESHOLD"},
        {"softplus:1/inf", "THRESHOLD"}, {"softplus:1x", "THRESHOLD"}, {"hardtanh:1/1", "LO < HI"},
        {"hardtanh:2/1", "LO < HI"}, {"hardtanh:1", "LO/HI"}, {"hardtanh:a/b", "LO/HI"}, {"hardtanh:-1/", "LO/HI"},
        {"hardtanh:-1/1/2", "LO/HI"}, {"relu6:1", "no argument"}, {"hardswish:2", "no argument"}, {"softsign:1", "no argument"},
        {"prelu:0", "prelu:C"}, {"prelu:x", "prelu:C"}, {"prelu:-1", "prelu:C"}, {"prelu:2x", "prelu:C"},
        {"prelu:", "prelu:C"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_layer L;
        vijp_error err = {0};
        ck_assert_msg(vijp_layer_parse(&L, bad[i][0], 4, &err) == VIJP_EINVAL, "%s was accepted", bad[i][0]);
        ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: message '%s' does not say '%s'", bad[i][0], err.msg, bad[i][1]);
    }
    vijp_layer P;
    vijp_error perr = {0};
    ck_assert(vijp_layer_parse(&P, "prelu:3", 8, &perr) == VIJP_EDIM && strstr(perr.msg, "multiple of 3"));
    static const char *const cli[] = {"check-layer prelu:3 --width 8", "check-layer elu:0", "check-layer softplus:1/20/3", "grad --net gelu:erf --width 4"};
    for (size_t i = 0; i < sizeof cli / sizeof *cli; i++) {
        run_result r = run_vijp(cli[i]);
        ck_assert_msg(r.rc == CLI_USAGE && r.out[0] == 0 && r.err[0], "vijp %s: exit %d, out '%s', err '%s'", cli[i], r.rc,
                      r.out, r.err);
        run_free(&r);
    }
}
END_TEST

/* PReLU's θ = weight[C] over a channel-major row (channel c: units
 * [c·S, (c+1)·S)), torch's init 0.25; y = a_c·x below 0 (one rounding),
 * ∇θ_c = Σ x·g over the channel's inactive units (a few exact products
 * here: a sum of products of small dyadic numbers, exact in double), the
 * inverse refusing a non-positive slope, the vijp a zero one. */
START_TEST(prelu_channels_and_gradient)
{
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "prelu:2", 6, NULL));
    ck_assert_uint_eq(L.type->param_count(&L), 2);
    double th[2] = {0, 0};
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    ck_assert(!L.type->init(&L, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, &rng, th));
    ck_assert(th[0] == 0.25 && th[1] == 0.25);
    th[0] = 0.3, th[1] = -0.7;
    double X[12] = {1, -2, -0.5, 3, -1.5, -4, /* sample 2 */ -1, 2, 0, -3, 0.25, -0.75}, Y[12], G[12], Gt[2], Xi[12];
    for (int i = 0; i < 12; i++) G[i] = 0.5 * (i + 1);
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat Tm = {.rows = 2, .cols = 1, .fmt = &fd, .d = th}, Xm = {.rows = 6, .cols = 2, .fmt = &fd, .d = X},
             Ym = {.rows = 6, .cols = 2, .fmt = &fd, .d = Y}, Gm = {.rows = 6, .cols = 2, .fmt = &fd, .d = G},
             GTm = {.rows = 2, .cols = 1, .fmt = &fd, .d = Gt}, XIm = {.rows = 6, .cols = 2, .fmt = &fd, .d = Xi};
    ck_assert(!vijp_layer_forward(&L, &Tm, &Xm, &Ym, NULL) && !vijp_layer_vjp_param(&L, &Tm, &Xm, &Gm, &GTm, NULL));
    double want_gt[2] = {0, 0};
    for (int i = 0; i < 12; i++) {
        double a = th[(i % 6) / 3];
        ck_assert_msg(Y[i] == (X[i] > 0 ? X[i] : a * X[i]), "unit %d: %g", i, Y[i]);
        if (!(X[i] > 0)) want_gt[(i % 6) / 3] += X[i] * G[i];
    }
    ck_assert_msg(Gt[0] == want_gt[0] && Gt[1] == want_gt[1], "grad theta %g %g, want %g %g", Gt[0], Gt[1], want_gt[0],
                  want_gt[1]);
    vijp_error err = {0};
    ck_assert(vijp_layer_inverse(&L, &Tm, &Ym, &XIm, &err) == VIJP_ESINGULAR && strstr(err.msg, "not positive"));
    th[1] = 0;
    vijp_mat Fm = {.rows = 0, .cols = 1, .fmt = &fd, .d = NULL};
    ck_assert(vijp_layer_vijp(&L, &Tm, &Xm, &Gm, &Fm, &Ym, &err) == VIJP_ESINGULAR && strstr(err.msg, "slope 0"));
    vijp_layer_clear(&L);
}
END_TEST

Suite *suite_act_args(void)
{
    Suite *s = suite_create("act_args");
    TCase *tc = tcase_create("act_args");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, values_vs_torch_formulas, 0, NSPECS);
    tcase_add_test(tc, softplus_threshold_returns_x);
    tcase_add_test(tc, fragments_on_flat_units);
    tcase_add_test(tc, prelu_channels_and_gradient);
    tcase_add_test(tc, enclosures_across_kinks);
    tcase_add_test(tc, print_parses_back);
    tcase_add_test(tc, bad_arguments_refused);
    suite_add_tcase(s, tc);
    return s;
}
