/* Rigorous enclosures of f′ over an interval, with MPFI (outward rounding):
 * the derivative sets that vijp certify needs for elementwise layers. */
#include "oracles.h"
#include "vijp/error.h"
#include "vijp/catalogue.h"
#include <stdlib.h>
#include <string.h>

/* A piecewise-constant derivative: lo_val for x < 0 (and at 0, where the
 * operators take the left branch), hi_val for x > 0; both over an interval
 * that meets both sides. */
static void piecewise(mpfi_ptr d, mpfi_srcptr x, double left, double right)
{
    int has_left = mpfr_sgn(&x->left) <= 0, has_right = mpfr_sgn(&x->right) > 0;
    if (has_left && has_right) mpfi_interv_d(d, left < right ? left : right, left < right ? right : left);
    else mpfi_set_d(d, has_right ? right : left);
}

void vo_leaky_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)th;
    piecewise(d, x, vijp_leaky_slope(L), 1.0);
}

void vo_relu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    piecewise(d, x, 0.0, 1.0);
}

/* tanh′ = sech²: MPFI's sech encloses sech over the interval, squaring keeps it. */
void vo_tanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfi_sech(d, x);
    mpfi_sqr(d, d);
}

/* σ over an interval: 1/(1 + exp(−x)), each step monotone; never contains 0
 * (unlike (1 + tanh(x/2))/2, which cancels for very negative x). */
static void sigma_enclose(mpfi_ptr s, mpfi_srcptr x)
{
    mpfi_neg(s, x);
    mpfi_exp(s, s);
    mpfi_add_ui(s, s, 1);
    mpfi_ui_div(s, 1, s);
}

/* σ′ = sech²(x/2)/4. */
void vo_sigmoid_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfi_div_2ui(d, x, 1);
    mpfi_sech(d, d);
    mpfi_sqr(d, d);
    mpfi_div_2ui(d, d, 2);
}

void vo_softplus_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    sigma_enclose(d, x);
}

/* SiLU′ = σ(x)·(1 + x·σ(−x)): the factor σ(x) > 0 is kept apart, so the sign
 * comes from the second factor alone, without e^x on both sides of a sum. */
void vo_silu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfi_t s, c;
    mpfi_init2(s, mpfi_get_prec(d)), mpfi_init2(c, mpfi_get_prec(d));
    sigma_enclose(s, x);
    mpfi_neg(c, x);
    sigma_enclose(c, c);
    mpfi_mul(c, c, x);
    mpfi_add_ui(c, c, 1);
    mpfi_mul(d, s, c);
    mpfi_clear(s), mpfi_clear(c);
}

/* φ(x) = exp(−x²/2)/√(2π). */
static void normal_pdf_enclose(mpfi_ptr p, mpfi_srcptr x)
{
    mpfi_t c;
    mpfi_init2(c, mpfi_get_prec(p));
    mpfi_sqr(p, x);
    mpfi_div_2ui(p, p, 1);
    mpfi_neg(p, p);
    mpfi_exp(p, p);
    mpfi_const_pi(c);
    mpfi_mul_ui(c, c, 2);
    mpfi_sqrt(c, c);
    mpfi_div(p, p, c);
    mpfi_clear(c);
}

/* GELU′ = Φ(x) + xφ(x).  Φ = erfc(−x/√2)/2 with erfc decreasing: the
 * endpoints by MPFR's erfc rounded down and up.  For x <= −2 the sum is
 * written φ(x)·(x + M(t)), t = −x, with Gordon's bounds on the Mills ratio
 * t/(t² + 1) < M(t) = (1 − Φ(t))/φ(t) < 1/t (t > 0): otherwise Φ and xφ,
 * both ~e^{−x²/2}, would be enclosed separately and their sum would contain 0
 * on every box far out. */
void vo_gelu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfr_prec_t p = mpfi_get_prec(d);
    mpfi_t a, b;
    mpfi_init2(a, p), mpfi_init2(b, p);
    if (mpfr_cmp_si(&x->right, -2) <= 0) {
        mpfi_neg(a, x);             /* t */
        mpfi_sqr(b, a);
        mpfi_add_ui(b, b, 1);
        mpfi_div(b, a, b);          /* t/(t²+1), an enclosure of the lower bound */
        mpfi_ui_div(a, 1, a);       /* 1/t */
        mpfr_t lo, hi;
        mpfr_inits2(p, lo, hi, (mpfr_ptr)0);
        mpfr_set(lo, &b->left, MPFR_RNDD), mpfr_set(hi, &a->right, MPFR_RNDU);
        mpfi_interv_fr(a, lo, hi);  /* M ∈ [lo, hi] */
        mpfr_clears(lo, hi, (mpfr_ptr)0);
        mpfi_add(a, a, x);
        normal_pdf_enclose(b, x);
        mpfi_mul(d, a, b);
    } else {
        mpfi_set_ui(a, 2), mpfi_sqrt(a, a); /* t = −x/√2 */
        mpfi_div(a, x, a), mpfi_neg(a, a);
        mpfr_t lo, hi;
        mpfr_inits2(p, lo, hi, (mpfr_ptr)0);
        mpfr_erfc(lo, &a->right, MPFR_RNDD), mpfr_erfc(hi, &a->left, MPFR_RNDU);
        mpfi_interv_fr(a, lo, hi);
        mpfr_clears(lo, hi, (mpfr_ptr)0);
        mpfi_div_2ui(a, a, 1);      /* Φ(x) */
        normal_pdf_enclose(b, x);
        mpfi_mul(b, b, x);
        mpfi_add(d, a, b);
    }
    mpfi_clear(a), mpfi_clear(b);
}

/* Mish′ = tanh(sp) + x·σ(x)·sech²(sp), sp = log1p(eˣ).  For x <= −2 it is
 * written σ(x)·(T + x·sech²(sp)) with T = tanh(sp)/σ(x) ∈ [0, 1/σ(−x)]
 * (tanh(sp) <= sp <= eˣ = σ(x)/σ(−x)), for the same reason as GELU′. */
void vo_mish_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfr_prec_t p = mpfi_get_prec(d);
    mpfi_t sp, se, s, t;
    mpfi_init2(sp, p), mpfi_init2(se, p), mpfi_init2(s, p), mpfi_init2(t, p);
    mpfi_exp(sp, x), mpfi_log1p(sp, sp);
    mpfi_sech(se, sp), mpfi_sqr(se, se);
    sigma_enclose(s, x);
    if (mpfr_cmp_si(&x->right, -2) <= 0) {
        mpfi_neg(t, x), sigma_enclose(t, t), mpfi_ui_div(t, 1, t);
        mpfr_t hi;
        mpfr_init2(hi, p);
        mpfr_set(hi, &t->right, MPFR_RNDU);
        mpfi_interv_d(t, 0, 0), mpfi_put_fr(t, hi); /* [0, 1/σ(−x)] */
        mpfr_clear(hi);
        mpfi_mul(se, se, x);
        mpfi_add(t, t, se);
        mpfi_mul(d, s, t);
    } else {
        mpfi_tanh(t, sp);
        mpfi_mul(s, s, x);
        mpfi_mul(s, s, se);
        mpfi_add(d, t, s);
    }
    mpfi_clear(sp), mpfi_clear(se), mpfi_clear(s), mpfi_clear(t);
}

/* ---- Jacobian enclosures of LayerNorm and softmax (one sample) ---- */

/* mid: the double nearest the interval's centre; rad: its distance to either
 * end, rounded up. */
void vo_interval_mid_rad(mpfi_srcptr v, double *mid, double *rad)
{
    mpfr_t t;
    mpfr_init2(t, mpfi_get_prec(v));
    mpfi_mid(t, v);
    double c = mpfr_get_d(t, MPFR_RNDN), r;
    mpfr_sub_d(t, &v->right, c, MPFR_RNDU);
    r = mpfr_get_d(t, MPFR_RNDU);
    mpfr_d_sub(t, c, &v->left, MPFR_RNDU);
    if (mpfr_get_d(t, MPFR_RNDU) > r) r = mpfr_get_d(t, MPFR_RNDU);
    *mid = c, *rad = r > 0 ? r : 0;
    mpfr_clear(t);
}

/* J_ij = (δ_ij − (1 + ŷ_i ŷ_j)/n)/σ with μ, σ and ŷ enclosed from the exact
 * input: every quantity an interval, every operation outward rounded. */
int vo_layernorm_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)th;
    size_t n = L->in;
    mpfi_t mu, s, t, *yh = vijp_alloc_array(n, sizeof *yh);
    mpfi_init2(mu, 128), mpfi_init2(s, 128), mpfi_init2(t, 128);
    for (size_t i = 0; i < n; i++) mpfi_init2(yh[i], 128);
    mpfi_set_ui(mu, 0);
    for (size_t i = 0; i < n; i++) mpfi_add_d(mu, mu, x[i]);
    mpfi_div_ui(mu, mu, (unsigned long)n);
    mpfi_set_ui(s, 0);
    for (size_t i = 0; i < n; i++) mpfi_d_sub(yh[i], x[i], mu), mpfi_sqr(t, yh[i]), mpfi_add(s, s, t);
    mpfi_div_ui(s, s, (unsigned long)n), mpfi_sqrt(s, s); /* σ */
    int rc = mpfi_has_zero(s) ? VIJP_ESINGULAR : 0;     /* a constant sample: outside the domain */
    for (size_t i = 0; !rc && i < n; i++) mpfi_div(yh[i], yh[i], s);
    for (size_t j = 0; !rc && j < n; j++)
        for (size_t i = 0; i < n; i++) {
            mpfi_mul(t, yh[i], yh[j]), mpfi_add_ui(t, t, 1), mpfi_div_ui(t, t, (unsigned long)n);
            mpfi_ui_sub(t, i == j, t), mpfi_div(t, t, s);
            vo_interval_mid_rad(t, &mid[i + j * n], &rad[i + j * n]);
        }
    for (size_t i = 0; i < n; i++) mpfi_clear(yh[i]);
    mpfi_clear(mu), mpfi_clear(s), mpfi_clear(t);
    free(yh);
    return rc;
}

/* J = diag(y) − yyᵀ, y_i = exp(x_i − max x)/Σ, enclosed. */
int vo_softmax_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)th;
    size_t n = L->in;
    double mx = x[0];
    for (size_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    mpfi_t s, t, *y = vijp_alloc_array(n, sizeof *y);
    mpfi_init2(s, 128), mpfi_init2(t, 128);
    mpfi_set_ui(s, 0);
    for (size_t i = 0; i < n; i++) {
        mpfi_init2(y[i], 128);
        mpfi_set_d(y[i], x[i]), mpfi_sub_d(y[i], y[i], mx), mpfi_exp(y[i], y[i]);
        mpfi_add(s, s, y[i]);
    }
    for (size_t i = 0; i < n; i++) mpfi_div(y[i], y[i], s);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            mpfi_mul(t, y[i], y[j]), mpfi_neg(t, t);
            if (i == j) mpfi_add(t, t, y[i]);
            vo_interval_mid_rad(t, &mid[i + j * n], &rad[i + j * n]);
        }
    for (size_t i = 0; i < n; i++) mpfi_clear(y[i]);
    mpfi_clear(s), mpfi_clear(t);
    free(y);
    return 0;
}

/* avgpool:P: J = (1/P)·[one row of P ones per output], the same at every x;
 * 1/P is enclosed (exact when P is a power of two: then rad = 0). */
int vo_avgpool_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)th, (void)x;
    size_t P = vijp_avgpool_window(L), m = L->out, n = L->in;
    mpfi_t w;
    mpfi_init2(w, 128);
    mpfi_set_ui(w, 1), mpfi_div_ui(w, w, (unsigned long)P);
    double wm, wr;
    vo_interval_mid_rad(w, &wm, &wr);
    memset(mid, 0, m * n * sizeof *mid), memset(rad, 0, m * n * sizeof *rad);
    for (size_t j = 0; j < m; j++)
        for (size_t k = 0; k < P; k++) mid[j + (j * P + k) * m] = wm, rad[j + (j * P + k) * m] = wr;
    mpfi_clear(w);
    return 0;
}

/* inv1x1:C: J = W ⊗ I over the positions, W = P·L·(U + diag(exp(log_s)))
 * (src/layers/inv1x1.c), the same at every x: W enclosed from the exact
 * parameters, every product and sum (and exp) outward rounded. */
int vo_inv1x1_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)x;
    size_t C = vijp_inv1x1_channels(L), n = L->in / C, N = L->in;
    mpfi_t s, l, u;
    mpfi_init2(s, 128), mpfi_init2(l, 128), mpfi_init2(u, 128);
    memset(mid, 0, N * N * sizeof *mid), memset(rad, 0, N * N * sizeof *rad);
    int rc = 0;
    for (size_t j = 0; j < C && !rc; j++)
        for (size_t i = 0; i < C && !rc; i++) {
            mpfi_set_ui(s, 0); /* (L U′)_ij = Σ_k L_ik U′_kj, k <= min(i, j) */
            for (size_t k = 0; k <= (i < j ? i : j); k++) {
                if (k == i) mpfi_set_ui(l, 1);
                else mpfi_set_d(l, th[i + k * C]);
                if (k == j) mpfi_set_d(u, th[j + j * C]), mpfi_exp(u, u);
                else mpfi_set_d(u, th[k + j * C]);
                mpfi_mul(l, l, u), mpfi_add(s, s, l);
            }
            if (mpfi_nan_p(s) || mpfi_inf_p(s)) rc = VIJP_EDOMAIN;
            double wm, wr;
            vo_interval_mid_rad(s, &wm, &wr);
            size_t row = C - 1 - i; /* P reverses the rows */
            for (size_t p = 0; p < n; p++) mid[(row * n + p) + (j * n + p) * N] = wm, rad[(row * n + p) + (j * n + p) * N] = wr;
        }
    mpfi_clear(s), mpfi_clear(l), mpfi_clear(u);
    return rc;
}
