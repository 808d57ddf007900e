/* Oracles of the piecewise activations hardtanh (relu6) and hardswish, each
 * operation correctly rounded in the format (arith.h), independent of
 * src/layers/: f and f′ by cases, the fragment the output cotangent on the
 * units where f′ is 0, packed sample after sample.  In the narrow formats
 * these are the layers' operators (no native emulation).  Then their f′
 * enclosures (MPFI) for vijp certify. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"

typedef void (*piece_fn)(const vijp_layer *L, mpfr_t r, mpfr_t x, const vijp_format *fm);
/* Whether f′ is 0 at x (a flat unit, in the fragment), decided by
 * comparisons at x's own precision, which fragment_count (no format) and
 * the others (x in their format) share. */
typedef int (*flat_fn)(const vijp_layer *L, mpfr_t x);

/* hardtanh: lo and hi rounded to the format; f′ = 1 strictly inside, as torch's backward. */
static void hardtanh_value(const vijp_layer *L, mpfr_t r, mpfr_t x, const vijp_format *fm)
{
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    mpfr_t lo, hi;
    mpfr_inits2(fm->prec, lo, hi, (mpfr_ptr)0);
    vo_set_d(lo, a.lo, fm), vo_set_d(hi, a.hi, fm);
    vo_set(r, mpfr_lessequal_p(x, lo) ? lo : mpfr_greaterequal_p(x, hi) ? hi : x, fm);
    mpfr_clears(lo, hi, (mpfr_ptr)0);
}

static void hardtanh_slope(const vijp_layer *L, mpfr_t r, mpfr_t x, const vijp_format *fm)
{
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    mpfr_t lo, hi;
    mpfr_inits2(fm->prec, lo, hi, (mpfr_ptr)0);
    vo_set_d(lo, a.lo, fm), vo_set_d(hi, a.hi, fm);
    vo_set_si(r, mpfr_greater_p(x, lo) && mpfr_less_p(x, hi), fm);
    mpfr_clears(lo, hi, (mpfr_ptr)0);
}

static int hardtanh_flat(const vijp_layer *L, mpfr_t x)
{
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    mpfr_t lo, hi;
    mpfr_inits2(mpfr_get_prec(x), lo, hi, (mpfr_ptr)0);
    mpfr_set_d(lo, a.lo, MPFR_RNDN), mpfr_set_d(hi, a.hi, MPFR_RNDN);
    int flat = !(mpfr_greater_p(x, lo) && mpfr_less_p(x, hi));
    mpfr_clears(lo, hi, (mpfr_ptr)0);
    return flat;
}

/* hardswish: 0 (x <= −3), x(x + 3)/6, x (x >= 3); f′ 0 (x < −3), (2x + 3)/6 (to 3), 1. */
static void hardswish_value(const vijp_layer *L, mpfr_t r, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    if (mpfr_cmp_si(x, -3) <= 0) vo_set_si(r, 0, fm);
    else if (mpfr_cmp_si(x, 3) >= 0) vo_set(r, x, fm);
    else {
        mpfr_t t, c;
        mpfr_inits2(fm->prec, t, c, (mpfr_ptr)0);
        vo_set_si(c, 3, fm), vo_add(t, x, c, fm), vo_mul(t, x, t, fm);
        vo_set_si(c, 6, fm), vo_div(r, t, c, fm);
        mpfr_clears(t, c, (mpfr_ptr)0);
    }
}

static void hardswish_slope(const vijp_layer *L, mpfr_t r, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    if (mpfr_cmp_si(x, -3) < 0) vo_set_si(r, 0, fm);
    else if (mpfr_cmp_si(x, 3) > 0) vo_set_si(r, 1, fm);
    else {
        mpfr_t t, c;
        mpfr_inits2(fm->prec, t, c, (mpfr_ptr)0);
        vo_add(t, x, x, fm), vo_set_si(c, 3, fm), vo_add(t, t, c, fm);
        vo_set_si(c, 6, fm), vo_div(r, t, c, fm);
        mpfr_clears(t, c, (mpfr_ptr)0);
    }
}

/* x < −3, or x = −1.5 exactly: 2x + 3 is 0 only there, in every format
 * (2x exact, a sum rounds to 0 only when it is 0). */
static int hardswish_flat(const vijp_layer *L, mpfr_t x)
{
    (void)L;
    return mpfr_cmp_si(x, -3) < 0 || mpfr_cmp_d(x, -1.5) == 0;
}

/* ---- the operators, generic over the pieces ---- */

static void pw_forward(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *fm, piece_fn value)
{
    for (size_t i = 0; i < L->in * B; i++) value(L, Y[i], X[i], fm);
}

static void pw_jvp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *fm, piece_fn slope)
{
    mpfr_t d;
    mpfr_init2(d, fm->prec);
    for (size_t i = 0; i < L->in * B; i++) slope(L, d, X[i], fm), vo_mul(V[i], U[i], d, fm);
    mpfr_clear(d);
}

static size_t pw_count(const vijp_layer *L, mpfr_t *X, size_t B, flat_fn flat)
{
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++) k += flat(L, X[i]) != 0;
    return k;
}

static void pw_fragment(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *fm,
                        flat_fn flat)
{
    for (size_t i = 0, k = 0; i < L->in * B; i++)
        if (flat(L, X[i])) vo_set(frag[k++], Gy[i], fm);
}

static int pw_vijp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *fm, piece_fn slope, flat_fn flat)
{
    mpfr_t d;
    mpfr_init2(d, fm->prec);
    for (size_t i = 0, k = 0; i < L->in * B; i++) {
        if (flat(L, X[i])) vo_set(Gy[i], frag[k++], fm);
        else slope(L, d, X[i], fm), vo_div(Gy[i], Gx[i], d, fm);
    }
    mpfr_clear(d);
    return 0;
}

static void pw_jacobian(const vijp_layer *L, mpfr_t *x, mpfr_t *J, const vijp_format *fm, piece_fn slope)
{
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i == j) slope(L, J[i + j * L->in], x[i], fm);
            else mpfr_set_zero(J[i + j * L->in], 1);
}

static int pw_cokernel(const vijp_layer *L, mpfr_t *x, mpfr_t *Q, flat_fn flat)
{
    size_t k = pw_count(L, x, 1, flat);
    for (size_t i = 0; i < L->in * k; i++) mpfr_set_zero(Q[i], 1);
    for (size_t i = 0, j = 0; i < L->in; i++)
        if (flat(L, x[i])) mpfr_set_ui(Q[i + L->in * j++], 1, MPFR_RNDN);
    return 0;
}

#define VO_PIECEWISE_DEFINE(name)                                                                             \
    void vo_##name##_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y,                \
                             const vijp_format *f)                                                            \
    {                                                                                                         \
        (void)th;                                                                                             \
        pw_forward(L, X, B, Y, f, name##_value);                                                             \
    }                                                                                                         \
    void vo_##name##_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,         \
                         const vijp_format *f)                                                                \
    {                                                                                                         \
        (void)th;                                                                                             \
        pw_jvp(L, X, B, U, V, f, name##_slope);                                                              \
    }                                                                                                         \
    size_t vo_##name##_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)                  \
    {                                                                                                         \
        (void)th;                                                                                             \
        return pw_count(L, X, B, name##_flat);                                                                    \
    }                                                                                                         \
    void vo_##name##_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, \
                              const vijp_format *f)                                                           \
    {                                                                                                         \
        (void)th;                                                                                             \
        pw_fragment(L, X, B, Gy, frag, f, name##_flat);                                                      \
    }                                                                                                         \
    int vo_##name##_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,     \
                         mpfr_t *Gy, const vijp_format *f)                                                    \
    {                                                                                                         \
        (void)th;                                                                                             \
        return pw_vijp(L, X, B, Gx, frag, Gy, f, name##_slope, name##_flat);                                              \
    }                                                                                                         \
    void vo_##name##_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)   \
    {                                                                                                         \
        (void)th;                                                                                             \
        pw_jacobian(L, x, J, f, name##_slope);                                                               \
    }                                                                                                         \
    int vo_##name##_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)    \
    {                                                                                                         \
        (void)th, (void)f;                                                                                    \
        return pw_cokernel(L, x, Q, name##_flat);                                                            \
    }

VO_PIECEWISE_DEFINE(hardtanh)
VO_PIECEWISE_DEFINE(hardswish)

/* ---- f′ enclosures ---- */

/* 1 over an interval strictly inside (lo, hi), 0 over one that meets no
 * point of it, [0, 1] otherwise. */
void vo_hardtanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    int inside = mpfr_cmp_d(&x->left, a.lo) > 0 && mpfr_cmp_d(&x->right, a.hi) < 0;
    int outside = mpfr_cmp_d(&x->right, a.lo) <= 0 || mpfr_cmp_d(&x->left, a.hi) >= 0;
    if (inside) mpfi_set_ui(d, 1);
    else if (outside) mpfi_set_ui(d, 0);
    else mpfi_interv_ui(d, 0, 1);
}

/* The hull of the pieces the interval meets: 0 on (−∞, −3), (2x + 3)/6 on
 * [−3, 3] (increasing: its ends), 1 on (3, ∞). */
void vo_hardswish_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfr_prec_t p = mpfi_get_prec(d);
    int left = mpfr_cmp_si(&x->left, -3) < 0, right = mpfr_cmp_si(&x->right, 3) > 0;
    int middle = mpfr_cmp_si(&x->right, -3) >= 0 && mpfr_cmp_si(&x->left, 3) <= 0;
    mpfi_t m, piece;
    mpfi_init2(m, p), mpfi_init2(piece, p);
    int have = 0;
    if (middle) {
        mpfr_t lo, hi;
        mpfr_inits2(p, lo, hi, (mpfr_ptr)0);
        mpfr_set(lo, &x->left, MPFR_RNDD);
        if (mpfr_cmp_si(lo, -3) < 0) mpfr_set_si(lo, -3, MPFR_RNDD);
        mpfr_set(hi, &x->right, MPFR_RNDU);
        if (mpfr_cmp_si(hi, 3) > 0) mpfr_set_si(hi, 3, MPFR_RNDU);
        mpfi_interv_fr(m, lo, hi);
        mpfi_mul_ui(m, m, 2), mpfi_add_ui(m, m, 3), mpfi_div_ui(m, m, 6);
        mpfr_clears(lo, hi, (mpfr_ptr)0);
        have = 1;
    }
    if (left) {
        mpfi_set_ui(piece, 0);
        if (have) mpfi_union(m, m, piece);
        else mpfi_set(m, piece), have = 1;
    }
    if (right) {
        mpfi_set_ui(piece, 1);
        if (have) mpfi_union(m, m, piece);
        else mpfi_set(m, piece), have = 1;
    }
    mpfi_set(d, m);
    mpfi_clear(m), mpfi_clear(piece);
}
