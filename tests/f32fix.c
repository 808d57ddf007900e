/* Helpers of the FORMAT@SET suites (f32fix.h). */
#include "f32fix.h"
#include <math.h>
#include <string.h>

void f32_fill(vijp_mat *a, size_t rows, size_t cols, const vijp_format *F, vijp_rng *rng, int special)
{
    double tiny = ldexp(1.0, (int)F->store_emin - 1), huge = ldexp(0.75, (int)F->store_emax);
    const double sp[] = {0.0, -0.0, tiny, -huge, INFINITY, -INFINITY, 3 * tiny};
    vijp_mat_init(a, rows, cols, F);
    for (size_t i = 0; i < rows * cols; i++)
        vijp_mat_set_entry_d(a, i, special && i < sizeof sp / sizeof *sp ? sp[i] : vijp_rng_normal(rng));
    vijp_mat_store(a);
}

void f32_same_in(vijp_mat *b, const vijp_mat *a, const vijp_format *F)
{
    vijp_mat_init(b, a->rows, a->cols, F);
    for (size_t i = 0; i < vijp_mat_len(a); i++) mpfr_set(b->m[i], a->m[i], MPFR_RNDN);
}

void f32_assert_same_bits(const vijp_mat *a, const vijp_mat *b, const char *what)
{
    ck_assert_uint_eq(vijp_mat_len(a), vijp_mat_len(b));
    for (size_t i = 0; i < vijp_mat_len(a); i++) {
        int same = mpfr_nan_p(a->m[i]) ? mpfr_nan_p(b->m[i])
                                        : mpfr_equal_p(a->m[i], b->m[i]) && mpfr_signbit(a->m[i]) == mpfr_signbit(b->m[i]);
        ck_assert_msg(same, "%s[%zu]: %a against %a", what, i, vijp_mat_get_d(a, i), vijp_mat_get_d(b, i));
    }
}

float *f32_floats_of(const vijp_mat *a)
{
    float *p = vijp_alloc_array(vijp_mat_len(a) + 1, sizeof *p);
    for (size_t i = 0; i < vijp_mat_len(a); i++) p[i] = mpfr_get_flt(a->m[i], MPFR_RNDN);
    return p;
}

void f32_exact_layers_match(const vijp_format *E, const vijp_format *S, vijp_rng *rng)
{
    static const char *const specs[] = {"leaky:0.3", "relu", "leaky:3"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        vijp_layer L;
        vijp_error err = {0};
        size_t n = 37, B = 3;
        ck_assert(!vijp_layer_parse(&L, specs[k], n, &err));
        vijp_mat X, U, G, Xs, Us, Gs, a, b, fa = {0}, fb = {0};
        f32_fill(&X, n, B, E, rng, 1), f32_fill(&U, n, B, E, rng, 0), f32_fill(&G, n, B, E, rng, 0);
        f32_same_in(&Xs, &X, S), f32_same_in(&Us, &U, S), f32_same_in(&Gs, &G, S);
        vijp_mat_init(&a, n, B, E), vijp_mat_init(&b, n, B, S);
        ck_assert(!vijp_layer_forward(&L, NULL, &X, &a, &err) && !vijp_layer_forward(&L, NULL, &Xs, &b, &err));
        f32_assert_same_bits(&a, &b, "forward");
        ck_assert(!vijp_layer_jvp(&L, NULL, &X, &U, &a, &err) && !vijp_layer_jvp(&L, NULL, &Xs, &Us, &b, &err));
        f32_assert_same_bits(&a, &b, "jvp");
        ck_assert(!vijp_layer_vjp(&L, NULL, &X, &G, &a, &err) && !vijp_layer_vjp(&L, NULL, &Xs, &Gs, &b, &err));
        f32_assert_same_bits(&a, &b, "vjp");
        size_t c = vijp_layer_fragment_count(&L, NULL, &X);
        ck_assert_uint_eq(c, vijp_layer_fragment_count(&L, NULL, &Xs));
        vijp_mat_init(&fa, c, 1, E), vijp_mat_init(&fb, c, 1, S);
        ck_assert(!vijp_layer_fragment(&L, NULL, &X, &G, &fa, &err) && !vijp_layer_fragment(&L, NULL, &Xs, &Gs, &fb, &err));
        f32_assert_same_bits(&fa, &fb, "fragment");
        ck_assert(!vijp_layer_vijp(&L, NULL, &X, &U, &fa, &a, &err) && !vijp_layer_vijp(&L, NULL, &Xs, &Us, &fb, &b, &err));
        f32_assert_same_bits(&a, &b, "vijp");
        vijp_mat_clear(&X), vijp_mat_clear(&U), vijp_mat_clear(&G), vijp_mat_clear(&Xs), vijp_mat_clear(&Us);
        vijp_mat_clear(&Gs), vijp_mat_clear(&a), vijp_mat_clear(&b), vijp_mat_clear(&fa), vijp_mat_clear(&fb);
        vijp_layer_clear(&L);
    }
}
