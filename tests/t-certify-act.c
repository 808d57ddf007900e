/* The activation analysis (vijp_activation_analyze, src/certify/act.c): f′
 * searched for zeros by interval bisection, where each format underflows,
 * and every registered activation analysed. */
#include "fixtures/certfix.h"
#include "vijp/interval.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- 9. activation analysis -------------------------------------------- */

/* Over R = 1000 (tol 1e-9): leaky and tanh have f′ > 0 everywhere (no bad
 * span); relu's f′ is 0 on x <= 0, one merged span covering [−1000, 0].
 *
 * tanh in double computes f′ = 4e/(1+e)², e = exp(−2|x|).
 *  negligible: f′ < u·max f′.  max is at the scan's smallest |x| = 2^-8,
 *  f′ = 1 − O(2^-16); for x ~ 19, (1+e)² = 1 + O(1e-16), so the threshold
 *  is 4e^{−2x} = 2^-53 to a few u: x = (ln 4 + 53 ln 2)/2 = 19.0616;
 *  within 1% (and the bisection refines to far below that).
 *  underflow: 4e/(1+e)² is 0 exactly when e is (4e is an exact scaling,
 *  (1+e)² = 1).  glibc's exp returns 0 for arguments below ln 2^-1075 (its
 *  underflow cutoff: below half the smallest subnormal) and, being within 1
 *  ulp, a nonzero value for true results >= 2^-1074; with −2x exact the
 *  threshold is in [1074 ln 2 / 2, 1075 ln 2 / 2] = [372.2200, 372.5666],
 *  and the bisection refines it to far below 1e-9. */
START_TEST(activation_analysis)
{
    vijp_error err;
    const char *specs[] = {"leaky:0.1", "relu", "tanh"};
    for (int k = 0; k < 3; k++) {
        vijp_layer L;
        vijp_activation_report a;
        ck_assert(!vijp_layer_parse(&L, specs[k], 4, &err));
        ck_assert_msg(!vijp_activation_analyze(&L, NULL, 1000, 1e-9, &a, &err), "%s: %s", specs[k], err.msg);
        ck_assert(a.complete);
        if (k == 1) {
            ck_assert_uint_eq(a.n_bad, 1);
            ck_assert_msg(a.bad[0].lo <= -1000 && a.bad[0].hi >= 0 && a.bad[0].hi <= 1e-9, "[%g, %g]", a.bad[0].lo,
                          a.bad[0].hi);
        } else {
            ck_assert_msg(a.n_bad == 0, "%s: %zu bad spans", specs[k], a.n_bad);
        }
        ck_assert_str_eq(a.fmt[0].format, "double");
        if (k == 2) {
            double neg = (log(4.0) + 53 * log(2.0)) / 2;
            ck_assert_msg(fabs(a.fmt[0].negligible_at / neg - 1) < 0.01 && fabs(a.fmt[0].negligible_at / 19.06 - 1) < 0.01,
                          "negligible at %.17g", a.fmt[0].negligible_at);
            ck_assert_msg(a.fmt[0].underflow_at >= 1074 * log(2.0) / 2 && a.fmt[0].underflow_at <= 1075 * log(2.0) / 2 + 1e-9,
                          "underflow at %.17g", a.fmt[0].underflow_at);
            for (int f = 1; f < VIJP_ACT_FORMATS; f++) /* narrower formats give out sooner */
                ck_assert_msg(a.fmt[f].underflow_at < a.fmt[0].underflow_at &&
                                  a.fmt[f].negligible_at < a.fmt[0].negligible_at,
                              "%s: underflow %g negligible %g", a.fmt[f].format, a.fmt[f].underflow_at,
                              a.fmt[f].negligible_at);
        } else {
            /* piecewise constant f′ never underflows or becomes negligible */
            for (int f = 0; f < VIJP_ACT_FORMATS; f++)
                ck_assert(isinf(a.fmt[f].underflow_at) && isinf(a.fmt[f].negligible_at));
        }
        vijp_activation_report_clear(&a);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* Every registered type: elementwise layers (no parameters, a diagonal
 * Jacobian) must provide deriv_enclose, so no future activation can skip the
 * analysis; and each type with deriv_enclose completes it over R = 1000. */
START_TEST(activation_registry)
{
    size_t nt;
    const vijp_layer_type *const *all = vijp_layer_types(&nt);
    static const char *const args[] = {NULL, "0.5", "4", "4x4", "2x1", "2", "2x2", "1x1x2", "1x2x2"};
    for (size_t i = 0; i < nt; i++) {
        vijp_layer L;
        int parsed = 0;
        for (size_t a = 0; a < sizeof args / sizeof *args && !parsed; a++) {
            char item[64];
            snprintf(item, sizeof item, "%s%s%s", all[i]->name, args[a] ? ":" : "", args[a] ? args[a] : "");
            parsed = !vijp_layer_parse(&L, item, 8, NULL);
        }
        ck_assert_msg(parsed, "%s: none of the sample arguments parses; extend this test", all[i]->name);
        if (all[i]->param_count(&L) == 0 && L.in == L.out) { /* elementwise iff its Jacobian is diagonal */
            double x[64], J[64 * 64];
            for (size_t k = 0; k < L.in; k++) x[k] = 0.3 + 0.1 * (double)k;
            vijp_format fd;
            vijp_format_fixed(&fd, VIJP_DOUBLE);
            vijp_mat xm = {.rows = L.in, .cols = 1, .fmt = &fd, .d = x}, Jm = {.rows = L.in, .cols = L.in, .fmt = &fd, .d = J};
            ck_assert(L.in <= 64 && !vijp_layer_jacobian(&L, NULL, &xm, &Jm, NULL));
            int diagonal = 1;
            for (size_t r = 0; r < L.in; r++)
                for (size_t c = 0; c < L.in; c++) diagonal &= r == c || J[r + c * L.in] == 0;
            if (diagonal)
                ck_assert_msg(vijp_deriv_enclose_of(all[i]) != NULL, "%s is elementwise but has no deriv_enclose", all[i]->name);
        }
        if (vijp_deriv_enclose_of(all[i])) {
            /* a type with parameters (a plugin's, registered by another
             * suite of this process) at its own initial ones */
            size_t P = all[i]->param_count(&L);
            double th[64] = {0};
            ck_assert(P <= 64);
            if (P && all[i]->init) {
                vijp_rng rng;
                vijp_rng_seed(&rng, 1);
                ck_assert(!all[i]->init(&L, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, &rng, th));
            }
            vijp_activation_report a;
            vijp_error err;
            ck_assert_msg(!vijp_activation_analyze(&L, P ? th : NULL, 1000, 1e-9, &a, &err), "%s: %s", all[i]->name, err.msg);
            ck_assert_msg(a.complete, "%s: bisection incomplete", all[i]->name);
            vijp_activation_report_clear(&a);
        }
        vijp_layer_clear(&L);
    }
}
END_TEST

Suite *suite_certify_act(void)
{
    Suite *s = suite_create("certify-act");
    TCase *tc = tcase_create("certify-act");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, activation_analysis);
    tcase_add_test(tc, activation_registry);
    suite_add_tcase(s, tc);
    return s;
}
