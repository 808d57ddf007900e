/* Double-double dot products of doubles with a rigorous error bound: the
 * building block of a fast validated reference (accept a result when its
 * bound meets the target, else fall back to MPFR).
 *
 * The algorithm is Ogita, Rump and Oishi's Dot2 ("Accurate sum and dot
 * product", SIAM J. Sci. Comput. 26(6), 2005, Algorithm 5.3): each product
 * split exactly by TwoProd (h = fl(a·x), r = fma(a, x, −h)), the high parts
 * summed by TwoSum into p with their errors q, and s = fl(s + fl(q + r))
 * collecting every low part; the result is the pair (hi, lo) = TwoSum(p, s),
 * whose unrounded value hi + lo = p + s.  With an initial term c (a bias) the
 * loop starts at p = c, which is a product c·1 with no low part.
 *
 * Error (derived in bound.c above vijp_dd_bound; docs/internals.md, "Double-
 * double dot products"), u = 2^-53, η = 2^-1074, γ_k = ku/(1 − ku), N the
 * number of terms (n, plus one with c), T = |c| + Σ|a_j·x_j| (over xh_j):
 *   doubles:        |hi + lo − (c + Σ a_j x_j)| <= γ_N²·T + Nη,
 *   double-double x (|xl_j| <= u|xh_j|, checked):
 *                   |hi + lo − (c + Σ a_j (xh_j + xl_j))| <= γ_2N·γ_(N+1)·T + 3Nη,
 * and hi alone is Dot2's res: |hi − exact| <= u|exact| + γ_N²·T + Nη, so
 * within |lo| more than hi + lo.  Relative to the result that is about
 * N²u²·cond: about 2^-90 at N = 256 and condition 1.
 *
 * Each result comes with `bound`, an upper bound on |hi + lo − exact| that
 * is itself rigorous: computed in round-to-nearest from Σ|h_j| (accumulated
 * in the same loop) with the γ factors and the roundings of the bound's own
 * evaluation inflated (vijp_dd_bound).  bound is +inf, never NaN, where no
 * bound holds: a result that is not finite (overflow, an Inf or NaN input),
 * an x that is not a normalised double-double, more than 2^25 terms.  A
 * caller validates with `bound <= target` and falls back otherwise.
 *
 * Every kernel set computes each output with the same IEEE operations in the
 * same order (one lane per output row), so the sets agree bit for bit: ref
 * (portable C, fma() from libm) always, avx2 and avx512 (src/ddot/simd.h)
 * unless GENERIC=1, chosen with the kernel table's set (vijp_kernels_active:
 * VIJP_KERNELS=ref forces the portable loops). */
#ifndef VIJP_DDOT_DDOT_H
#define VIJP_DDOT_DDOT_H

#include <stddef.h>

/* A double-double: the unevaluated sum hi + lo, |lo| <= ulp(hi)/2. */
typedef struct {
    double hi, lo;
} vijp_dd;

/* Above this many terms the bound is +inf (its constants need N <= 2^25). */
#define VIJP_DD_MAX_TERMS ((size_t)1 << 25)

/* Σ_{j<n} x[j·incx]·y[j·incy] of doubles; *bound as above. */
vijp_dd vijp_dd_dot(size_t n, const double *x, size_t incx, const double *y, size_t incy, double *bound);

/* Σ_{j<n} a[j·inca]·(xh[j·incx] + xl[j·incx]): x in double-double, as the
 * layers after the first hold their activations. */
vijp_dd vijp_dd_dot_ddx(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                        double *bound);

/* y = A·x + c: A m × n column-major (vijp_mat's layout, leading dimension
 * lda), x n doubles (xl NULL) or double-doubles (xh + xl), c m doubles or
 * NULL; y = yh + yl and each output's bound.  Returns how many outputs have
 * bound = +inf. */
size_t vijp_dd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                    const double *c, double *yh, double *yl, double *bound);

/* C = A·B + c·1ᵀ: A m × k, B k × n (Bh + Bl, Bl NULL for doubles, leading
 * dimension ldb), c m doubles or NULL (a bias on every column), Ch, Cl and
 * bound m × n with leading dimension ldc.  Returns how many outputs have
 * bound = +inf. */
size_t vijp_dd_gemm(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *Bh, const double *Bl,
                    size_t ldb, const double *c, double *Ch, double *Cl, double *bound, size_t ldc);

/* ---- triple-double ----
 * The same products with the low parts themselves summed by TwoSum and
 * their errors collected in a third double (bound.c, 9): y = hi + mid + lo,
 *   doubles:          |y − exact| <= γ_(N+1)·γ_2N·γ_N·T + Nη,
 *   double-double x:  |y − exact| <= γ_(N+2)²·γ_3N·T + 3Nη,
 * about 2N³u³·T: 2^-134·T at N = 256, so a result stays validated to
 * 2^-53 up to a condition T/|exact| near 1e24.  About twice Dot2's work.
 * bound as above (+inf also for N > VIJP_TD_MAX_TERMS). */
typedef struct {
    double hi, mid, lo;
} vijp_td;

#define VIJP_TD_MAX_TERMS ((size_t)1 << 16)

vijp_td vijp_td_dot(size_t n, const double *x, size_t incx, const double *y, size_t incy, double *bound);
vijp_td vijp_td_dot_ddx(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                        double *bound);
size_t vijp_td_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                    const double *c, double *yh, double *ym, double *yl, double *bound);

/* ---- triple-double x, four levels ----
 * x_j = xh_j + xm_j + xl_j, a triple-double (|xm| <= u|xh|, |xl| <= u|xm|,
 * checked), as a reference level of up to 159 bits holds its activations.
 * Each term's three products are split by TwoProd; the high parts go to p,
 * and every level's TwoSum errors, with the products' parts of that size,
 * to the next level: s (by TwoSum), t (by TwoSum), w (rounded sums), the
 * K = 4 cascade of Ogita, Rump and Oishi's DotK run in one pass (bound.c,
 * 10).  y = y[0] + y[1] + y[2] + y[3] = p + s + t + w exactly (y[0] =
 * fl(p + fl(s + fl(t + w))) carries the leading bits), and
 *   |y − exact| <= γ_(N+3)²·γ_5N·γ_3N·T + 2Nη,
 * about 15N⁴u⁴·T: 2^-176·T at N = 257, 2^-168·T at N = 1025, where a
 * 128-bit rounding has 2^-128 of the result to spare: Ziv's test fails
 * about once in 2^39/cond outputs (cond = T/|exact|).  69 operations a
 * term against Dot2's 12: 4.5 times its time (bench-ddref).  bound as
 * above (+inf also for N > VIJP_QD_MAX_TERMS). */
#define VIJP_QD_MAX_TERMS ((size_t)1 << 16)

/* Σ_{j<n} a[j·inca]·(x[0][j·incx] + x[1][j·incx] + x[2][j·incx]) into y. */
void vijp_qd_dot(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx, double y[4],
                 double *bound);
/* y = A·x + c (as vijp_dd_gemv): y[k] the k-th parts of the m outputs. */
size_t vijp_qd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                    double *const y[4], double *bound);

/* ---- four-part x, five levels, an a-posteriori bound ----
 * x_j = x[0]_j + x[1]_j + x[2]_j + x[3]_j, four doubles of any sizes (a
 * p-bit number of up to 212 bits is four, each the remainder rounded to
 * nearest: the reference level at 212 bits holds its activations so).
 * Each term's four products split by TwoProd, the cascade of qd_row one
 * level deeper: h0 into p; q, r0, h1 into s; those errors, r1, h2 into t;
 * those, r2, h3 into v, every one by TwoSum; v's errors and r3 summed
 * into w with roundings, and beside them their absolute values into A.
 * Levels p to v are exact, so the only error is w's rounding and the
 * products' underflow (bound.c, 11):
 *   |y − exact| <= γ_(n+2)/(1 − γ_(n+2))·A + 2nη,
 * an a-posteriori bound from the last level's own size, which needs no
 * relation between the parts; about 2^-230 of Σ|terms| on random sums of
 * 256 terms (t-ddot), where rounding at 212 bits needs 2^-212.  y[0] =
 * fl(p + fl(s + fl(t + fl(v + w)))) carries the leading bits and y = y[0] +
 * ... + y[4] exactly.  About twice qd_row's work a term.  bound as above
 * (+inf also for n > VIJP_D5_MAX_TERMS). */
#define VIJP_D5_MAX_TERMS ((size_t)1 << 20)

/* y = A·x + c, y[k] the k-th parts of the m outputs (as vijp_qd_gemv). */
size_t vijp_d5_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                    double *const y[5], double *bound);

/* ---- the kernel sets, for the tests and the benchmark ---- */

/* One set: a strided row (one output) and y = A·x + c for rows [0, m), as
 * vijp_dd_gemv but trusting x to be normalised (the callers above check). */
typedef struct {
    const char *name;
    size_t (*row)(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                  const double *c, double *hi, double *lo, double *bound);
    size_t (*gemv)(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                   const double *c, double *yh, double *yl, double *bound);
    /* the same in triple-double */
    size_t (*td_row)(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                     const double *c, double *hi, double *mid, double *lo, double *bound);
    size_t (*td_gemv)(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                      const double *c, double *yh, double *ym, double *yl, double *bound);
    /* the same with x in triple-double, four levels */
    size_t (*qd_row)(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx, const double *c,
                     double y[4], double *bound);
    size_t (*qd_gemv)(size_t m, size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                      double *const y[4], double *bound);
    /* the same with x in four parts, five levels */
    size_t (*d5_row)(size_t n, const double *a, size_t inca, const double *const x[4], size_t incx, const double *c,
                     double y[5], double *bound);
    size_t (*d5_gemv)(size_t m, size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                      double *const y[5], double *bound);
} vijp_dd_kernels;

/* Set i: 0 ref, 1 avx2, 2 avx512; NULL where this build or CPU lacks it. */
#define VIJP_DD_SET_COUNT 3
const vijp_dd_kernels *vijp_dd_set(int i);
/* The set the functions above run on. */
const vijp_dd_kernels *vijp_dd_active(void);

/* vijp_dd_gemv and vijp_dd_gemm on the set k. */
size_t vijp_dd_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda, const double *xh,
                       const double *xl, const double *c, double *yh, double *yl, double *bound);
size_t vijp_dd_gemm_in(const vijp_dd_kernels *k, size_t m, size_t n, size_t kk, const double *A, size_t lda,
                       const double *Bh, const double *Bl, size_t ldb, const double *c, double *Ch, double *Cl,
                       double *bound, size_t ldc);

size_t vijp_td_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda, const double *xh,
                       const double *xl, const double *c, double *yh, double *ym, double *yl, double *bound);

size_t vijp_qd_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda,
                       const double *const x[3], const double *c, double *const y[4], double *bound);
size_t vijp_d5_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda,
                       const double *const x[4], const double *c, double *const y[5], double *bound);

/* The rigorous bound of an output from Σ|h_j| (absum, accumulated in round
 * to nearest), the number of terms and whether x was double-double; +inf
 * where none holds.  Used by every set's finish. */
double vijp_dd_bound(double absum, size_t nterms, int dd_input);

/* Every set's last step for one output: (hi, lo) = TwoSum(p, s), the bound;
 * returns 1 where the bound is +inf. */
size_t vijp_dd_finish(double p, double s, double absum, size_t nterms, int dd_input, double *hi, double *lo,
                      double *bound);
/* The same for triple-double: (hi, mid, lo) = p + s + t exactly. */
double vijp_td_bound(double absum, size_t nterms, int dd_input);
size_t vijp_td_finish(double p, double s, double t, double absum, size_t nterms, int dd_input, double *hi,
                      double *mid, double *lo, double *bound);
/* The same for four levels: y[0..3] = p + s + t + w exactly. */
double vijp_qd_bound(double absum, size_t nterms);
size_t vijp_qd_finish(double p, double s, double t, double w, double absum, size_t nterms, double y[4],
                      double *bound);
/* Five levels: y[0..4] = p + s + t + v + w exactly; A the last level's
 * absolute sum, n the terms (products) and nterms n + [c]. */
double vijp_d5_bound(double A, size_t n, size_t nterms);
size_t vijp_d5_finish(double p, double s, double t, double v, double w, double A, size_t n, size_t nterms,
                      double y[5], double *bound);

#endif
