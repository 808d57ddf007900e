/* The error bound of the double-double products (ddot.h) and its proof:
 * vijp_dd_bound, and vijp_dd_finish, every kernel set's last step.  Apart
 * from ddot.c so that the SIMD sets, which ddot.c lists, call down to it. */
#include "ddot/ddot.h"
#include "ddot/eft.h"
#include <math.h>

/* ---- The bound ----
 *
 * Notation: u = 2^-53, η = 2^-1074 (the least subnormal), γ_k = ku/(1 − ku),
 * terms t_j = a_j·x_j (j = 1..n), and, with a bias c, one more term c with
 * no low part, which the loop holds in p from the start: N = n + [c].
 * fl(z) is z rounded to nearest; for an addition fl(a + b) = (a + b)(1 + δ),
 * |δ| <= u, even under gradual underflow (a sum in the subnormal range is
 * exact).  No overflow is assumed; its absence is checked (below).
 *
 * 1. TwoProd.  h = fl(a·x) and r̃ = fl(a·x − h) (one fma).  When ulp(a)·ulp(x)
 *    >= η, a·x − h is a multiple of ulp(a)·ulp(x) (so is h, or h = a·x) no
 *    larger than ulp(h)/2, so representable: r̃ = a·x − h exactly.
 *    Otherwise e_a + e_x < −970 and |a·x − h| <= 2^(e_a + e_x − 52) <
 *    2^-1022 lies in the subnormal range: r̃ errs by at most η/2.  Either
 *    way t = a·x = h + r̃ + ε, |ε| <= η/2, |r̃| <= u|t| + η/2, and
 *    |t| <= (|h| + η/2)/(1 − u).
 * 2. The high parts.  p_j = fl(p_{j−1} + h_j), q_j its exact error (TwoSum),
 *    so p_n + Σq_j = c + Σh_j.  |q_j| <= u|p_j| and |p_j| <= (1 + u)^(j−1)·
 *    (|c| + Σ_{i<=j}|h_i|), hence Σ|q_j| <= (N − 1)u(1 + u)^(N−1)·H <=
 *    γ_{N−1}·H, H = |c| + Σ|h_j| (recursive summation of N terms).
 * 3. The low parts.  σ = Σr̃_j + Σq_j (+ Σ a_j·xl_j with x in double-double)
 *    is summed into s by roundings along each term's path: fl(q + r), then
 *    fl(s + ·) at its step and one (two with xl: the fma) at every later
 *    step.  A term through k roundings is off by at most γ_k of itself
 *    (Higham, Accuracy and Stability, Lemma 3.1), so |s − σ| <= γ_k·Σ|terms|
 *    with k the longest path: N for doubles (the first step's fl(0 + ·) is
 *    exact), 2N − 1 with xl.  Each fma may also lose η/2 to underflow (its
 *    a·xl + s need not be representable), at most Nη in all once carried
 *    through the later roundings.
 * 4. Doubles.  The exact value is c + Σt_j = p + σ + Σε_j.  With T = |c| +
 *    Σ|t_j| and H <= (1 + u)T + Nη/2: Σ|q| + Σ|r̃| <= γ_{N−1}H + uT + Nη/2
 *    <= γ_N·T + Nη (since (N − 1)u(1 + u)/(1 − (N − 1)u) + u <= γ_N), so
 *        |p + s − (c + Σt_j)| <= Nη/2 + γ_N(γ_N·T + Nη) <= γ_N²·T + Nη.
 *    This is Ogita, Rump and Oishi's Theorem 5.3 before their final rounding
 *    res = fl(p + s); (hi, lo) = TwoSum(p, s) keeps p + s exactly, and hi is
 *    their res: |hi − exact| <= u|exact| + γ_N²·T (+ the η terms).
 * 5. Double-double x, |xl_j| <= u|xh_j| (checked), T over the xh parts, so
 *    Σ|a_j·xl_j| <= u·T: |s − σ| <= γ_{2N}(γ_N·T + Nη + u·T) + Nη, and
 *        |p + s − exact| <= γ_{2N}·γ_{N+1}·T + 3Nη      (γ_N + u <= γ_{N+1}).
 * 6. Computable.  T is not known; absum = fl-sum of |c|, |h_1|, ..., |h_n|
 *    is (N − 1 additions of non-negative terms: H <= (1 + γ_{N−1})·absum),
 *    and T <= (H + Nη/2)/(1 − u) (1).  With N <= 2^25 (N·u <= 2^-28):
 *        γ_N²·(1 + γ_{N−1})/(1 − u)          <= N²·u²·(1 + 2^-24),
 *        γ_{2N}·γ_{N+1}·(1 + γ_{N−1})/(1 − u) <= 2N(N + 1)·u²·(1 + 2^-24)
 *    (γ_k <= ku(1 + 2ku) for ku <= 1/2), and the η terms stay below
 *    (4N + 2)η.  So the error is at most C·absum + (4N + 2)η with C =
 *    K·u²(1 + 2^-24), K = N² or 2N(N + 1).
 * 7. Evaluating it rigorously in round to nearest.  K·u² is exact (K < 2^53,
 *    a power of two), Ĉ = fl(K·u²·(1 + 2^-20)) >= K·u²(1 + 2^-20)(1 − u) >=
 *    C.  With k = (4N + 4)η (exact: a multiple of η below 2^-1000),
 *        B = fl(fl(fl(Ĉ·absum) + k)·(1 + 2^-51)),
 *    each product rounded down by at most u relative plus η/2, the sum by u
 *    relative: B >= (Ĉ·absum + k)(1 − u)³(1 + 4u) − 2η >= Ĉ·absum +
 *    (4N + 2)η, since (1 − u)³(1 + 4u) > 1.
 * 8. Overflow and NaN.  Every intermediate feeds p or s by additions only,
 *    so an Inf or NaN anywhere (an overflowing product or TwoSum, an Inf or
 *    NaN input) leaves p or s non-finite, and hi = fl(p + s) non-finite: a
 *    finite (hi, lo) with a finite absum had no overflow.  The bound is then
 *    +inf, as is a non-finite B.
 * 9. Triple-double (td_row).  The low parts are summed into s by TwoSum,
 *    exactly: s + Σe = Σ of the level-2 terms, whose errors e (and, with xl,
 *    a·xl's TwoProd low part r2) t sums with roundings; the value is
 *    p + s + t, kept exactly by the final TwoSums.
 *    Doubles: level 2 is q_j, r_j (M = 2N terms, Σ <= γ_N·T + Nη as in 4),
 *    so Σ|e| <= γ_{2N}(γ_N·T + Nη) (the lemma of 2 over M terms); t adds
 *    fl(e1 + e2) once per step, paths of at most N + 1 roundings:
 *        |p + s + t − exact| <= γ_{N+1}·γ_{2N}·γ_N·T + Nη.
 *    Double-double x: level 2 adds h2_j = fl(a_j·xl_j) (Σ|h2| <= (1 + u)u·T
 *    + Nη/2, so Σ level 2 <= γ_{N+1}·T + 3Nη/2 with γ_N + u + u² <= γ_{N+1}),
 *    M = 3N; t adds fl(fl(e1 + e2) + fl(e3 + r2)), paths <= N + 2, Σ|r2| <=
 *    u²·T + Nη/2, and γ_{3N}γ_{N+1} + u² <= γ_{3N}γ_{N+2}:
 *        |p + s + t − exact| <= γ_{N+2}²·γ_{3N}·T + 3Nη.
 *    As in 6–7 with N <= 2^16 (K < 2^53, N·u <= 2^-35): K = (N + 1)·2N·N or
 *    (N + 2)²·3N, C = K·u³(1 + 2^-20), the same evaluation.
 * 10. Triple-double x (qd_row), |x1_j| <= u|x0_j|, |x2_j| <= u|x1_j|
 *    (checked), T = |c| + Σ|a_j·x0_j|.  Every product is split by TwoProd
 *    (1: a·x_k = h_k + r_k + ε_k, |ε_k| <= η/2); |a·x1| <= uT_j and |a·x2|
 *    <= u²T_j per term, so Σ|h1| <= (1 + u)uT + Nη/2, Σ|r1| <= u²T + Nη/2,
 *    Σ|h2| <= (1 + u)u²T + Nη/2, Σ|r2| <= u³T + Nη/2.  The cascade of
 *    Ogita, Rump and Oishi's DotK (SIAM J. Sci. Comput. 26(6), 2005,
 *    Algorithms 4.8 and 5.10, K = 4) in one pass: level 1 sums c and the
 *    h0 by TwoSum into p; each further level sums by TwoSum the errors of
 *    the level above with the parts of that size, its own errors going one
 *    level down; the last, w, is rounded.  A level summing M terms of total
 *    B by TwoSum (from 0, so its first step is exact) leaves errors of total
 *    at most γ_M·B (2: |e_k| <= u|s_k|, |s_k| <= (1 + u)^(k−1)·B).
 *      level 2 (s): q, r0, h1; M = 3n, total B2 <= γ_(N−1)(1 + u)T + uT +
 *        (1 + u)uT + 2Nη <= γ_(N+1)·T + 2Nη;
 *      level 3 (t): s's errors, r1, h2; M = 5n, total B3 <= γ_3N·B2 + 3u²T
 *        + Nη <= γ_3N·γ_(N+2)·T + 2Nη  (γ_3N(γ_(N+2) − γ_(N+1)) >= 3u²);
 *      level 4 (w): t's errors, r2; total B4 <= γ_5N·B3 + u³T + Nη/2 <=
 *        γ_5N·γ_3N·γ_(N+3)·T + Nη  (γ_5Nγ_3N(γ_(N+3) − γ_(N+2)) >= u³,
 *        γ_5N·2N <= 1/2), summed by w = w + (((f0 + f1) + (f2 + f3)) +
 *        (f4 + r2)): three roundings in the step, one per later step (the
 *        first w = 0 + · exact), paths of at most N + 2 roundings.
 *    Levels 1–3 are exact, so p + s + t + w − exact = (w − Σ level 4) −
 *    Σε, and
 *        |p + s + t + w − exact| <= γ_(N+3)²·γ_5N·γ_3N·T + 2Nη.
 *    Computable as in 6–7 with N <= 2^16 (5N·u <= 2^-34, so the γ factors
 *    and (1 + γ_(N−1))/(1 − u) exceed K·u⁴ by less than 2^-30 of it): K =
 *    15N²(N + 3)², C = K·u⁴(1 + 2^-20), the same evaluation, except that K
 *    may exceed 2^53: fl((N + 3)²·15·N²) is rounded at most twice, u
 *    relative each, which the factor 1 + 2^-20 covers with room (Ĉ >=
 *    K(1 − u)³u⁴(1 + 2^-20) >= K·u⁴(1 + 2^-21); u⁴ = 2^-212 is normal).
 * 11. Four-part x, five levels (d5_row), a-posteriori.  Per term the four
 *    products a·x_k = h_k + r_k + ε_k (1, |ε_k| <= η/2; nothing is assumed
 *    of the parts' sizes).  Every item goes to one level: c and h0 to p;
 *    q, r0, h1 to s; s's errors, r1, h2 to t; t's errors, r2, h3 to v,
 *    each by TwoSum, which keeps accumulator + error = accumulator + item
 *    exactly; v's seven errors g and r3 (the level-4 items, 8n of them) are
 *    summed into w with roundings.  So p + s + t + v + Σ level 4 = c +
 *    Σ_j Σ_k (h_k + r_k) exactly, and
 *        exact − (p + s + t + v + w) = (Σ level 4 − w) + Σε.
 *    w adds each term's items by the tree ((g0 + g1) + (g2 + g3)) + ((g4 +
 *    g5) + (g6 + r3)), three roundings, then w = w + z, one rounding per
 *    later term (the first, 0 + z, exact): paths of at most n + 2
 *    roundings, so |w − Σ level 4| <= γ_(n+2)·S, S = Σ|level-4 items|
 *    (Lemma 3.1 as in 3).  A is the same tree over the absolute values:
 *    A >= (1 − γ_(n+2))·S.  Hence
 *        |p + s + t + v + w − exact| <= γ_(n+2)/(1 − γ_(n+2))·A + 2nη.
 *    With n <= 2^20, k = n + 2 and ku <= 2^-32, γ_k/(1 − γ_k) = ku/(1 −
 *    2ku) <= ku(1 + 2^-30), and K·u is exact: evaluated as in 7 with K = k,
 *    ulevel = u and absum = A (Ĉ >= ku(1 + 2^-21); (4N + 2)η covers 2nη).
 *    Overflow as in 8: every item reaches p, s, t, v or w by additions, so
 *    an Inf or NaN leaves one of them, and a part of y, non-finite; a NaN
 *    A makes the bound +inf.  No a-priori factor enters: the bound is the
 *    last level's actual size, about (√n·u)^4 of the sum's on random data
 *    (the levels' partial sums are random walks), where the a-priori
 *    DotK-style bound would be near (5n·u)^4. */

/* fl(fl(fl(Ĉ·absum) + (4N + 4)η)·(1 + 2^-51)), Ĉ = fl(K·ulevel·(1 + 2^-20))
 * (7); +inf where it is not finite. */
static double evaluate(double K, double ulevel, double absum, double N)
{
    double C = K * ulevel * (1 + 0x1p-20), k = (4 * N + 4) * 0x1p-1074;
    double B = (C * absum + k) * (1 + 0x1p-51);
    return isfinite(B) ? B : INFINITY; /* a NaN absum too */
}

double vijp_dd_bound(double absum, size_t nterms, int dd_input)
{
    if (nterms > VIJP_DD_MAX_TERMS) return INFINITY;
    double N = (double)nterms, K = dd_input ? 2 * N * (N + 1) : N * N; /* exact: N <= 2^25 */
    return evaluate(K, 0x1p-106, absum, N);
}

double vijp_td_bound(double absum, size_t nterms, int dd_input)
{
    if (nterms > VIJP_TD_MAX_TERMS) return INFINITY;
    double N = (double)nterms, K = dd_input ? (N + 2) * (N + 2) * 3 * N : (N + 1) * 2 * N * N; /* exact: N <= 2^16 */
    return evaluate(K, 0x1p-159, absum, N);
}

double vijp_qd_bound(double absum, size_t nterms)
{
    if (nterms > VIJP_QD_MAX_TERMS) return INFINITY;
    double N = (double)nterms, K = (N + 3) * (N + 3) * 15 * N * N; /* rounded at most twice: 10 */
    return evaluate(K, 0x1p-212, absum, N);
}

double vijp_d5_bound(double A, size_t n, size_t nterms)
{
    if (n > VIJP_D5_MAX_TERMS) return INFINITY;
    return evaluate((double)n + 2, 0x1p-53, A, (double)nterms); /* 11 */
}

size_t vijp_dd_finish(double p, double s, double absum, size_t nterms, int dd_input, double *hi, double *lo,
                      double *bound)
{
    dd_two_sum(p, s, hi, lo);
    double B = vijp_dd_bound(absum, nterms, dd_input);
    if (!isfinite(*hi) || !isfinite(*lo)) B = INFINITY;
    *bound = B;
    return B == INFINITY;
}

size_t vijp_td_finish(double p, double s, double t, double absum, size_t nterms, int dd_input, double *hi,
                      double *mid, double *lo, double *bound)
{
    double a, b, c;
    dd_two_sum(s, t, &a, &b); /* p + s + t = p + a + b = hi + c + b = hi + mid + lo */
    dd_two_sum(p, a, hi, &c);
    dd_two_sum(c, b, mid, lo);
    double B = vijp_td_bound(absum, nterms, dd_input);
    if (!isfinite(*hi) || !isfinite(*mid) || !isfinite(*lo)) B = INFINITY;
    *bound = B;
    return B == INFINITY;
}

size_t vijp_qd_finish(double p, double s, double t, double w, double absum, size_t nterms, double y[4],
                      double *bound)
{
    double a, b, c, d, e, f;
    dd_two_sum(t, w, &a, &b); /* p + s + t + w = p + s + a + b */
    dd_two_sum(s, a, &c, &d); /*   = p + c + d + b */
    dd_two_sum(p, c, &y[0], &e); /* = y0 + e + d + b */
    dd_two_sum(e, d, &y[1], &f); /* = y0 + y1 + f + b */
    dd_two_sum(f, b, &y[2], &y[3]);
    double B = vijp_qd_bound(absum, nterms);
    for (int k = 0; k < 4; k++)
        if (!isfinite(y[k])) B = INFINITY;
    *bound = B;
    return B == INFINITY;
}

size_t vijp_d5_finish(double p, double s, double t, double v, double w, double A, size_t n, size_t nterms,
                      double y[5], double *bound)
{
    double a1, a2, a3;
    dd_two_sum(v, w, &a1, &y[4]);  /* p + s + t + v + w = p + s + t + a1 + y4 */
    dd_two_sum(t, a1, &a2, &y[3]); /*   = p + s + a2 + y3 + y4 */
    dd_two_sum(s, a2, &a3, &y[2]); /*   = p + a3 + y2 + y3 + y4 */
    dd_two_sum(p, a3, &y[0], &y[1]);
    double B = vijp_d5_bound(A, n, nterms);
    for (int k = 0; k < 5; k++)
        if (!isfinite(y[k])) B = INFINITY;
    *bound = B;
    return B == INFINITY;
}
