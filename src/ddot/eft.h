/* The error-free transformations and one output's Dot2 loop, shared by the
 * portable set (ddot.c, where fma() is libm's) and the SIMD files' scalar
 * tails (simd.h, compiled with FMA), so that every set does, per output,
 * the same IEEE operations in the same order.  -ffp-contract=off (the
 * build's flags) keeps every a·b + c below unfused: TwoSum and the low-part
 * sums are exact only as written. */
#ifndef VIJP_DDOT_EFT_H
#define VIJP_DDOT_EFT_H

#include "ddot/ddot.h"
#include <math.h>
#include <stddef.h>

/* Knuth's TwoSum: x + e = a + b exactly, x = fl(a + b), for any finite a, b
 * whose sum does not overflow (exact also under gradual underflow). */
static inline void dd_two_sum(double a, double b, double *x, double *e)
{
    double s = a + b, z = s - a;
    *e = (a - (s - z)) + (b - z);
    *x = s;
}

/* One output: Σ_j a[j·inca]·(xh[j·incx] (+ xl[j·incx])) (+ *c), Dot2's loop
 * (ddot.h).  Per term: h = fl(a·x), r = fma(a, x, −h) (TwoProd: h + r = a·x
 * exactly unless ulp(a)·ulp(x) < η, bound.c 1); (p, q) = TwoSum(p, h);
 * s = fl(s + fl(q + r)); with x in double-double, s = fma(a, xl, s); and
 * absum = fl(absum + |h|) for the bound.  Returns 1 where the bound is +inf. */
static inline size_t dd_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                            const double *c, double *hi, double *lo, double *bound)
{
    double p = c ? *c : 0, s = 0, absum = c ? fabs(*c) : 0;
    for (size_t j = 0; j < n; j++) {
        double aj = a[j * inca], xj = xh[j * incx], h = aj * xj, r = fma(aj, xj, -h), q;
        dd_two_sum(p, h, &p, &q);
        s = s + (q + r);
        if (xl) s = fma(aj, xl[j * incx], s);
        absum = absum + fabs(h);
    }
    return vijp_dd_finish(p, s, absum, n + (c != NULL), xl != NULL, hi, lo, bound);
}

/* One output in triple-double (bound.c, 9): Dot2's high parts into p as
 * above; the low parts r and q (and, with x in double-double, the high part
 * h2 of a·xl) summed into s by TwoSum, whose errors e (and a·xl's low part
 * r2) go to t.  The value is p + s + t. */
static inline size_t td_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                            const double *c, double *hi, double *mid, double *lo, double *bound)
{
    double p = c ? *c : 0, s = 0, t = 0, absum = c ? fabs(*c) : 0;
    for (size_t j = 0; j < n; j++) {
        double aj = a[j * inca], xj = xh[j * incx], h = aj * xj, r = fma(aj, xj, -h), q, e1, e2;
        dd_two_sum(p, h, &p, &q);
        dd_two_sum(s, q, &s, &e1);
        dd_two_sum(s, r, &s, &e2);
        if (xl) {
            double x2 = xl[j * incx], h2 = aj * x2, r2 = fma(aj, x2, -h2), e3;
            dd_two_sum(s, h2, &s, &e3);
            t = t + ((e1 + e2) + (e3 + r2));
        } else
            t = t + (e1 + e2);
        absum = absum + fabs(h);
    }
    return vijp_td_finish(p, s, t, absum, n + (c != NULL), xl != NULL, hi, mid, lo, bound);
}

/* The levels qd_row and d5_row share, for one term: h0 into p by TwoSum;
 * its error q, r0 and h1 into s; those errors e, r1 and h2 into t; t's
 * errors out in f, in this order (each SIMD set repeats it, simd.h). */
static inline void levels3(double *p, double *s, double *t, double h0, double r0, double h1, double r1, double h2,
                           double f[5])
{
    double q, e0, e1, e2;
    dd_two_sum(*p, h0, p, &q);
    dd_two_sum(*s, q, s, &e0);
    dd_two_sum(*s, r0, s, &e1);
    dd_two_sum(*s, h1, s, &e2);
    dd_two_sum(*t, e0, t, &f[0]);
    dd_two_sum(*t, e1, t, &f[1]);
    dd_two_sum(*t, e2, t, &f[2]);
    dd_two_sum(*t, r1, t, &f[3]);
    dd_two_sum(*t, h2, t, &f[4]);
}

/* One output with x in triple-double (bound.c, 10): per term the three
 * products a·x_k = h_k + r_k (TwoProd); h0 into p by TwoSum; its error q,
 * r0 and h1 into s by TwoSum; those errors e, r1 and h2 into t by TwoSum;
 * those errors f and r2 into w, rounded.  The value is p + s + t + w. */
static inline size_t qd_row(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx,
                            const double *c, double y[4], double *bound)
{
    double p = c ? *c : 0, s = 0, t = 0, w = 0, absum = c ? fabs(*c) : 0;
    for (size_t j = 0; j < n; j++) {
        double aj = a[j * inca], x0 = x[0][j * incx], x1 = x[1][j * incx], x2 = x[2][j * incx];
        double h0 = aj * x0, r0 = fma(aj, x0, -h0), h1 = aj * x1, r1 = fma(aj, x1, -h1), h2 = aj * x2,
               r2 = fma(aj, x2, -h2), f[5];
        levels3(&p, &s, &t, h0, r0, h1, r1, h2, f);
        w = w + (((f[0] + f[1]) + (f[2] + f[3])) + (f[4] + r2));
        absum = absum + fabs(h0);
    }
    return vijp_qd_finish(p, s, t, w, absum, n + (c != NULL), y, bound);
}

/* One output with x in four parts, five levels (bound.c, 11): the four
 * products a·x_k = h_k + r_k (TwoProd); h0 into p; q, r0, h1 into s; e,
 * r1, h2 into t; f, r2, h3 into v, each by TwoSum; v's errors g and r3
 * into w by a tree of roundings and A = the same tree over their absolute
 * values.  The value is p + s + t + v + w. */
static inline size_t d5_row(size_t n, const double *a, size_t inca, const double *const x[4], size_t incx,
                            const double *c, double y[5], double *bound)
{
    double p = c ? *c : 0, s = 0, t = 0, v = 0, w = 0, A = 0;
    for (size_t j = 0; j < n; j++) {
        double aj = a[j * inca], x0 = x[0][j * incx], x1 = x[1][j * incx], x2 = x[2][j * incx], x3 = x[3][j * incx];
        double h0 = aj * x0, r0 = fma(aj, x0, -h0), h1 = aj * x1, r1 = fma(aj, x1, -h1), h2 = aj * x2,
               r2 = fma(aj, x2, -h2), h3 = aj * x3, r3 = fma(aj, x3, -h3), f[5], g0, g1, g2, g3, g4, g5, g6;
        levels3(&p, &s, &t, h0, r0, h1, r1, h2, f);
        dd_two_sum(v, f[0], &v, &g0);
        dd_two_sum(v, f[1], &v, &g1);
        dd_two_sum(v, f[2], &v, &g2);
        dd_two_sum(v, f[3], &v, &g3);
        dd_two_sum(v, f[4], &v, &g4);
        dd_two_sum(v, r2, &v, &g5);
        dd_two_sum(v, h3, &v, &g6);
        w = w + (((g0 + g1) + (g2 + g3)) + ((g4 + g5) + (g6 + r3)));
        A = A + (((fabs(g0) + fabs(g1)) + (fabs(g2) + fabs(g3))) + ((fabs(g4) + fabs(g5)) + (fabs(g6) + fabs(r3))));
    }
    return vijp_d5_finish(p, s, t, v, w, A, n, n + (c != NULL), y, bound);
}

#endif
