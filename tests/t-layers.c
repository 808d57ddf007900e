/* The layer battery (issue 2): every layer type, in double and in MPFR at 256
 * bits, against the 1024-bit MPFR oracle, central finite differences and
 * algebraic identities.
 *
 * Error bounds used below (u = unit roundoff of the format under test):
 *  - a dot product of length n: |fl(xᵀy) − xᵀy| <= γ_n |x|ᵀ|y|, γ_n = nu/(1−nu)
 *    (Higham, ASNA 2nd ed., eq. 3.5);  we write (n + 6)u·1.01 to cover the
 *    elementwise derivatives as well: tanh' has relative error <= 6u in double
 *    (see src/layers/tanh.c) and 2u in MPFR (sech, then a square);
 *  - glibc's tanh and atanh are within 2 ulp (<= 4u) on x86_64 (glibc manual,
 *    "Errors in Math Functions"); MPFR's are correctly rounded (<= u);
 *  - solves: LU with partial pivoting is backward stable with |ΔA| <= γ_3n
 *    |L||U| and growth factor <= 2^(n−1) (Higham Thm 9.4, §9.4); Householder QR
 *    with ‖ΔA‖_F <= 16mn·u‖A‖_F (Higham Thm 19.4, constant taken as 16);
 *    hence C_solve = 3n·2^(n−1) + 16mn + m + 6 bounds the relative backward
 *    error of a vijp followed by a vjp, and κ(J)·C_solve·u the forward error;
 *  - what each layer adds to these is its own contract, read here through
 *    its type (vijp_layer_bounds in include/vijp/layer.h, derived in each
 *    src/layers/<name>.c): `ulps`, the relative error of the terms an entry
 *    is formed from (f and f′ of activations; 6 by default), the inverse's
 *    error model, the bias (bias_index), an entrywise majorant of |J| where
 *    J's entries cancel (jacobian_majorant) and the parameter gradient's
 *    bound (vjp_param_bound).  No test here looks at a layer's name.
 */
#include "layerfix.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *spec;
    size_t width;
} cases[] = {
    {"dense:6", 6},   /* square: LU */
    {"dense:4", 7},   /* wide: QR of Wᵀ */
    {"dense:9", 5},   /* tall: fragment in null(Wᵀ) */
    {"leaky:0.3", 6}, {"relu", 8}, {"tanh", 6}, {"sigmoid", 6}, {"softplus", 6},
    {"silu", 6}, {"gelu", 6}, {"mish", 6}, {"layernorm", 6}, {"softmax", 6},
    {"conv1d:2x3", 8}, /* zero padding: dense LU */
    {"conv1d:2x3:circular", 8}, /* per-frequency solves */
    {"conv1d:2x3s2", 8},        /* strided: wide, the dense layer's QR solve */
    {"conv2d:1x3x4", 16},       /* 4 x 4 grid, zero padding: dense LU */
    {"conv2d:1x3x4:circular", 16}, /* 2-D DFT, one solve per frequency pair */
    {"conv2d:1x3x4s2:circular", 16}, /* strided 4 x 4 -> 2 x 2: wide */
    {"conv2d:3x3x4:circular", 48}, /* 3 channels on a 4 x 4 grid: FFTW's 2-D half spectrum, 3 x 3 solves */
    {"conv1d:65x3:circular", 260}, /* 65 channels: the per-frequency solve goes to LAPACK's zgesv */
    {"avgpool:2", 8},           /* wide, structured vijp */
    {"squeeze:1x4", 8},         /* a permutation with a 3-cycle (2x2 on 8 is an involution) */
    {"inv1x1:2", 8},            /* LU form: triangular substitutions */
};
#define NCASES (sizeof cases / sizeof *cases)
static const char *const formats[] = {"double", "mpfr:256"};
#define NB 3 /* batch of the fixtures */

static void setup(layerfix *t, int i)
{
    layerfix_init(t, cases[i / 2].spec, cases[i / 2].width, formats[i % 2], NB, test_seed() + (uint64_t)i);
}

/* The relative error of the terms an entry is formed from, in units of u
 * (the "6" of the header comment). */
static double term_ulps(const vijp_layer *L) { return L->type->bounds.ulps > 0 ? L->type->bounds.ulps : 6; }

/* The entrywise majorant M >= |J| that the bounds scale with, at sample b
 * of the reference, as doubles (m × n): |J|, or the layer's own majorant
 * where J's entries are differences that can cancel. */
static double *abs_jacobian(layerfix *t, size_t b)
{
    size_t m = t->L->out, n = t->L->in;
    double *a = jacobian_at(t->L, &t->thR, &t->XR, b);
    for (size_t i = 0; i < m * n; i++) a[i] = fabs(a[i]);
    if (t->L->type->jacobian_majorant) {
        double *x = malloc(n * sizeof *x), *th = malloc((t->thR.rows + 1) * sizeof *th);
        for (size_t i = 0; i < n; i++) x[i] = vijp_mat_get_d(&t->XR, i + b * n);
        for (size_t i = 0; i < t->thR.rows; i++) th[i] = vijp_mat_get_d(&t->thR, i);
        t->L->type->jacobian_majorant(t->L, th, x, a);
        free(x), free(th);
    }
    return a;
}

/* |b| added to output i, through the layer's bias_index. */
static double bias_at(layerfix *t, size_t i)
{
    const vijp_layer *L = t->L;
    if (!t->thR.rows || !L->type->bias_index) return 0;
    size_t k = L->type->bias_index(L, i % L->out);
    return k == SIZE_MAX ? 0 : absval(&t->thR, k);
}

/* Bounds on the parameter gradient in the format, from the layer's own
 * vjp_param_bound on the reference's |X| and |G|. */
static void param_bound(layerfix *t, double e, double *bp)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in, P = t->thR.rows;
    ck_assert_msg(L->type->vjp_param_bound != NULL, "%s has parameters but no vjp_param_bound", L->type->name);
    double *aX = malloc(n * NB * sizeof *aX), *aG = malloc(m * NB * sizeof *aG), *th = malloc(P * sizeof *th);
    for (size_t i = 0; i < n * NB; i++) aX[i] = absval(&t->XR, i);
    for (size_t i = 0; i < m * NB; i++) aG[i] = absval(&t->GR, i);
    for (size_t i = 0; i < P; i++) th[i] = vijp_mat_get_d(&t->thR, i);
    L->type->vjp_param_bound(L, th, aX, aG, NB, e, bp);
    free(aX), free(aG), free(th);
}

/* κ(J) over nonzero singular values, the largest over the batch. */
static double kappa(layerfix *t)
{
    double k = 1;
    for (size_t b = 0; b < t->B; b++) k = fmax(k, kappa_at(t->L, &t->thR, &t->XR, b));
    return k;
}

/* ⟨G, J U⟩ = ⟨G J, U⟩ with jvp and vjp in the format under test. */
START_TEST(adjoint)
{
    layerfix t;
    setup(&t, _i);
    size_t m = t.L->out, n = t.L->in;
    vijp_mat V, W;
    vijp_mat_init(&V, m, NB, &t.F), vijp_mat_init(&W, n, NB, &t.F);
    ck_assert(!vijp_layer_jvp(t.L, &t.thF, &t.XF, &t.UF, &V, NULL));
    ck_assert(!vijp_layer_vjp(t.L, &t.thF, &t.XF, &t.GF, &W, NULL));
    mpfr_t lhs, rhs, p, q;
    mpfr_inits2(4 * REF_PREC, lhs, rhs, p, q, (mpfr_ptr)0);
    mpfr_set_zero(lhs, 1), mpfr_set_zero(rhs, 1);
    double bound = 0; /* 2 γ_(n+6) Σ |G|ᵀ|J||U| */
    for (size_t b = 0; b < NB; b++) {
        double *A = abs_jacobian(&t, b);
        for (size_t i = 0; i < m; i++) {
            mat_entry(p, &V, i + b * m), mat_entry(q, &t.GF, i + b * m);
            mpfr_fma(lhs, p, q, lhs, MPFR_RNDN); /* exact at 4096 bits for these few terms */
            for (size_t k = 0; k < n; k++) bound += absval(&t.GF, i + b * m) * A[i + k * m] * absval(&t.UF, k + b * n);
        }
        for (size_t k = 0; k < n; k++) {
            mat_entry(p, &W, k + b * n), mat_entry(q, &t.UF, k + b * n);
            mpfr_fma(rhs, p, q, rhs, MPFR_RNDN);
        }
        free(A);
    }
    bound *= 2 * 1.01 * (double)(m > n ? m : n) * t.u + 2 * 1.01 * term_ulps(t.L) * t.u;
    mpfr_sub(lhs, lhs, rhs, MPFR_RNDN);
    double d = fabs(mpfr_get_d(lhs, MPFR_RNDN));
    ck_assert_msg(d <= bound, "%s %s: |<G,JU> - <GJ,U>| = %g > bound %g (seed %llu)", cases[_i / 2].spec,
                  formats[_i % 2], d, bound, (unsigned long long)test_seed());
    mpfr_clears(lhs, rhs, p, q, (mpfr_ptr)0);
    vijp_mat_clear(&V), vijp_mat_clear(&W);
    layerfix_clear(&t);
}
END_TEST

/* Column norms ‖a_:,b‖ as doubles. */
static double col_norm(const vijp_mat *a, size_t b)
{
    double s = 0;
    for (size_t i = 0; i < a->rows; i++) s += absval(a, i + b * a->rows) * absval(a, i + b * a->rows);
    return sqrt(s);
}

/* jvp against central differences of the oracle forward at 2048 bits with
 * h = 2^-300: truncation h²/6·|f'''||u|³ ~ 2^-600 and rounding 2^-2048/h are
 * far below the jvp's own bound (n+6)u|J||U|. */
START_TEST(jvp_finite_differences)
{
    layerfix t;
    setup(&t, _i);
    size_t m = t.L->out, n = t.L->in;
    vijp_format H;
    ck_assert(!vijp_format_mpfr(&H, 2048, NULL));
    vijp_mat th, Xp, Xm, Yp, Ym, V;
    vijp_mat_init(&th, t.thR.rows, 1, &H), vijp_mat_convert(&th, &t.thR);
    vijp_mat_init(&Xp, n, NB, &H), vijp_mat_init(&Xm, n, NB, &H);
    vijp_mat_init(&Yp, m, NB, &H), vijp_mat_init(&Ym, m, NB, &H);
    for (size_t i = 0; i < n * NB; i++) {
        mpfr_mul_2si(Xp.m[i], t.UR.m[i], -300, MPFR_RNDN);
        mpfr_sub(Xm.m[i], t.XR.m[i], Xp.m[i], MPFR_RNDN);
        mpfr_add(Xp.m[i], t.XR.m[i], Xp.m[i], MPFR_RNDN);
    }
    ck_assert(!vijp_layer_forward(t.L, &th, &Xp, &Yp, NULL));
    ck_assert(!vijp_layer_forward(t.L, &th, &Xm, &Ym, NULL));
    for (size_t i = 0; i < m * NB; i++) {
        mpfr_sub(Yp.m[i], Yp.m[i], Ym.m[i], MPFR_RNDN);
        mpfr_mul_2si(Yp.m[i], Yp.m[i], 299, MPFR_RNDN);
    }
    vijp_mat_init(&V, m, NB, &t.F);
    ck_assert(!vijp_layer_jvp(t.L, &t.thF, &t.XF, &t.UF, &V, NULL));
    double *bound = calloc(m * NB, sizeof *bound);
    for (size_t b = 0; b < NB; b++) {
        double *A = abs_jacobian(&t, b);
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < n; k++)
                bound[i + b * m] += 1.01 * (n + term_ulps(t.L)) * t.u * A[i + k * m] * absval(&t.UF, k + b * n);
        free(A);
    }
    double r = ratio_to_bound(&V, &Yp, bound);
    ck_assert_msg(r <= 1, "%s %s: jvp vs finite differences at %g of the bound", cases[_i / 2].spec, formats[_i % 2], r);
    free(bound);
    vijp_mat *all[] = {&th, &Xp, &Xm, &Yp, &Ym, &V};
    for (size_t i = 0; i < 6; i++) vijp_mat_clear(all[i]);
    layerfix_clear(&t);
}
END_TEST

/* The dense Jacobian's columns equal jvp(e_j): both multiply by exact 0s and
 * 1s, so the bound (n+6)u|J_ij| is generous (equality is expected). */
START_TEST(jacobian_columns)
{
    layerfix t;
    setup(&t, _i);
    size_t m = t.L->out, n = t.L->in;
    vijp_mat x, J, E, V, Xr;
    vijp_mat_init(&x, n, 1, &t.F), vijp_mat_init(&J, m, n, &t.F);
    vijp_mat_init(&E, n, n, &t.F), vijp_mat_init(&V, m, n, &t.F), vijp_mat_init(&Xr, n, n, &t.F);
    vijp_mat_copy_range(&x, 0, &t.XF, 0, n);
    for (size_t j = 0; j < n; j++) vijp_mat_set_entry_d(&E, j + j * n, 1), vijp_mat_copy_range(&Xr, j * n, &x, 0, n);
    ck_assert(!vijp_layer_jacobian(t.L, &t.thF, &x, &J, NULL));
    ck_assert(!vijp_layer_jvp(t.L, &t.thF, &Xr, &E, &V, NULL));
    double *A = abs_jacobian(&t, 0), *bound = malloc(m * n * sizeof *bound);
    for (size_t i = 0; i < m * n; i++) bound[i] = 1.01 * (n + term_ulps(t.L)) * t.u * A[i];
    ck_assert_msg(ratio_to_bound(&J, &V, bound) <= 1, "%s %s: Jacobian differs from jvp columns", cases[_i / 2].spec, formats[_i % 2]);
    free(A), free(bound);
    vijp_mat *all[] = {&x, &J, &E, &V, &Xr};
    for (size_t i = 0; i < 5; i++) vijp_mat_clear(all[i]);
    layerfix_clear(&t);
}
END_TEST

/* r → g = vjp(r), c = fragment(r), y = vijp(g, c):
 *   vjp(y) = g    within C_solve·u·‖J‖_F‖y‖ (backward stability: residual bound);
 *   y = r         within 2κ(J)·C_solve·u·‖r‖ (forward error). */
START_TEST(vijp_identities)
{
    layerfix t;
    setup(&t, _i);
    size_t m = t.L->out, n = t.L->in, k = vijp_layer_fragment_count(t.L, &t.thF, &t.XF);
    vijp_mat g, c, y, g2;
    vijp_mat_init(&g, n, NB, &t.F), vijp_mat_init(&c, k, 1, &t.F), vijp_mat_init(&y, m, NB, &t.F), vijp_mat_init(&g2, n, NB, &t.F);
    vijp_error err = {0};
    ck_assert(!vijp_layer_vjp(t.L, &t.thF, &t.XF, &t.GF, &g, NULL));
    ck_assert(!vijp_layer_fragment(t.L, &t.thF, &t.XF, &t.GF, &c, NULL));
    ck_assert_msg(!vijp_layer_vijp(t.L, &t.thF, &t.XF, &g, &c, &y, &err), "%s", err.msg);
    ck_assert(!vijp_layer_vjp(t.L, &t.thF, &t.XF, &y, &g2, NULL));
    double kap = kappa(&t), C = c_solve(m, n);
    double *b1 = malloc(n * NB * sizeof *b1), *b2 = malloc(m * NB * sizeof *b2);
    for (size_t b = 0; b < NB; b++) {
        double *A = abs_jacobian(&t, b), fro = 0;
        for (size_t i = 0; i < m * n; i++) fro += A[i] * A[i];
        for (size_t i = 0; i < n; i++) b1[i + b * n] = 1.01 * C * t.u * sqrt(fro) * col_norm(&y, b);
        for (size_t i = 0; i < m; i++) b2[i + b * m] = 2.02 * kap * C * t.u * col_norm(&t.GF, b);
        free(A);
    }
    double r1 = ratio_to_bound(&g2, &g, b1), r2 = ratio_to_bound(&y, &t.GF, b2);
    ck_assert_msg(r1 <= 1, "%s %s: vjp(vijp(g)) - g at %g of its bound", cases[_i / 2].spec, formats[_i % 2], r1);
    ck_assert_msg(r2 <= 1, "%s %s: vijp(vjp(g)) + fragment - g at %g of its bound (kappa %g)", cases[_i / 2].spec, formats[_i % 2], r2, kap);
    free(b1), free(b2);
    vijp_mat_clear(&g), vijp_mat_clear(&c), vijp_mat_clear(&y), vijp_mat_clear(&g2);
    layerfix_clear(&t);
}
END_TEST

/* The fragment is the cotangent's coordinates in the cokernel basis:
 * fragment(r)_b = Q(x_b)ᵀ r_b, within C_solve·u·‖r_b‖ (both apply the same
 * Householder reflectors, once formed and once implicitly). */
START_TEST(fragment_is_cokernel_coordinates)
{
    layerfix t;
    setup(&t, _i);
    size_t m = t.L->out, n = t.L->in, k = vijp_layer_fragment_count(t.L, &t.thF, &t.XF);
    vijp_mat c, x, Q, r, cb;
    vijp_mat_init(&c, k, 1, &t.F);
    ck_assert(!vijp_layer_fragment(t.L, &t.thF, &t.XF, &t.GF, &c, NULL));
    vijp_mat_init(&x, n, 1, &t.F), vijp_mat_init(&r, m, 1, &t.F);
    for (size_t b = 0, off = 0; b < NB; b++) {
        vijp_mat_copy_range(&x, 0, &t.XF, b * n, n);
        vijp_mat_copy_range(&r, 0, &t.GF, b * m, m);
        size_t kb = vijp_layer_fragment_count(t.L, &t.thF, &x);
        vijp_mat_init(&Q, m, kb, &t.F), vijp_mat_init(&cb, kb, 1, &t.F);
        ck_assert(!vijp_layer_cokernel(t.L, &t.thF, &x, &Q, NULL));
        vijp_mat_tdot(&cb, &Q, &r);
        for (size_t j = 0; j < kb; j++) {
            double d = absdiff(&cb, j, &c, off + j);
            ck_assert_msg(d <= 1.01 * c_solve(m, n) * t.u * col_norm(&r, 0), "%s %s: fragment %zu differs from Q^T g by %g",
                          cases[_i / 2].spec, formats[_i % 2], j, d);
        }
        off += kb;
        vijp_mat_clear(&Q), vijp_mat_clear(&cb);
    }
    vijp_mat_clear(&c), vijp_mat_clear(&x), vijp_mat_clear(&r);
    layerfix_clear(&t);
}
END_TEST

/* Each operator in the format under test against the 1024-bit oracle on the
 * same inputs, entrywise within the bounds of the header comment. */
START_TEST(format_vs_oracle)
{
    layerfix t;
    setup(&t, _i);
    const vijp_layer *L = t.L;
    size_t m = L->out, n = L->in, P = t.thF.rows, k = vijp_layer_fragment_count(L, &t.thF, &t.XF);
    const char *what = cases[_i / 2].spec, *fmt = formats[_i % 2];
    vijp_mat YF, YR, VF, VR, WF, WR, PF, PR, cF, cR, gR, zF, zR;
    vijp_mat_init(&YF, m, NB, &t.F), vijp_mat_init(&YR, m, NB, &t.R);
    vijp_mat_init(&VF, m, NB, &t.F), vijp_mat_init(&VR, m, NB, &t.R);
    vijp_mat_init(&WF, n, NB, &t.F), vijp_mat_init(&WR, n, NB, &t.R);
    vijp_mat_init(&PF, P, 1, &t.F), vijp_mat_init(&PR, P, 1, &t.R);
    vijp_mat_init(&cF, k, 1, &t.F), vijp_mat_init(&cR, k, 1, &t.R);
    vijp_mat_init(&gR, n, NB, &t.R), vijp_mat_init(&zF, m, NB, &t.F), vijp_mat_init(&zR, m, NB, &t.R);
    ck_assert(!vijp_layer_forward(L, &t.thF, &t.XF, &YF, NULL) && !vijp_layer_forward(L, &t.thR, &t.XR, &YR, NULL));
    ck_assert(!vijp_layer_jvp(L, &t.thF, &t.XF, &t.UF, &VF, NULL) && !vijp_layer_jvp(L, &t.thR, &t.XR, &t.UR, &VR, NULL));
    ck_assert(!vijp_layer_vjp(L, &t.thF, &t.XF, &t.GF, &WF, NULL) && !vijp_layer_vjp(L, &t.thR, &t.XR, &t.GR, &WR, NULL));
    ck_assert(!vijp_layer_vjp_param(L, &t.thF, &t.XF, &t.GF, &PF, NULL) && !vijp_layer_vjp_param(L, &t.thR, &t.XR, &t.GR, &PR, NULL));
    ck_assert(!vijp_layer_fragment(L, &t.thF, &t.XF, &t.GF, &cF, NULL) && !vijp_layer_fragment(L, &t.thR, &t.XR, &t.GR, &cR, NULL));
    /* the vijp on identical inputs: g = vjp(G) and c from the format under test */
    vijp_mat_convert(&gR, &WF);
    vijp_mat cF2;
    vijp_mat_init(&cF2, k, 1, &t.R), vijp_mat_convert(&cF2, &cF);
    ck_assert(!vijp_layer_vijp(L, &t.thF, &t.XF, &WF, &cF, &zF, NULL) && !vijp_layer_vijp(L, &t.thR, &t.XR, &gR, &cF2, &zR, NULL));

    double kap = kappa(&t), C = c_solve(m, n), e = 1.01 * t.u, K = term_ulps(L);
    double *by = calloc(m * NB, sizeof(double)), *bv = calloc(m * NB, sizeof(double)), *bw = calloc(n * NB, sizeof(double));
    double *bp = calloc(P + 1, sizeof(double)), *bz = calloc(m * NB, sizeof(double)), *bc = calloc(k + 1, sizeof(double));
    for (size_t b = 0; b < NB; b++) {
        double *A = abs_jacobian(&t, b);
        for (size_t i = 0; i < m; i++) {
            double s = absval(&YR, i + b * m) + bias_at(&t, i);
            for (size_t j = 0; j < n; j++) {
                s += A[i + j * m] * absval(&t.XR, j + b * n);
                bv[i + b * m] += (n + K) * e * A[i + j * m] * absval(&t.UR, j + b * n);
                bw[j + b * n] += (m + K) * e * A[i + j * m] * absval(&t.GR, i + b * m);
            }
            by[i + b * m] = (n + K) * e * s;                   /* |W||x| + |b| + |y| */
            bz[i + b * m] = 2 * kap * C * e * col_norm(&zR, b); /* vijp forward error */
        }
        free(A);
    }
    for (size_t i = 0; i < k; i++) bc[i] = kap * C * e * vijp_norm(&t.GR); /* null-space basis moves by κ·backward error */
    if (P) param_bound(&t, e, bp);
    struct { const char *op; vijp_mat *a, *r; double *bound; } cmp[] = {
        {"forward", &YF, &YR, by}, {"jvp", &VF, &VR, bv}, {"vjp", &WF, &WR, bw},
        {"vjp_param", &PF, &PR, bp}, {"fragment", &cF, &cR, bc}, {"vijp", &zF, &zR, bz},
    };
    for (size_t i = 0; i < sizeof cmp / sizeof *cmp; i++) {
        double r = ratio_to_bound(cmp[i].a, cmp[i].r, cmp[i].bound);
        ck_assert_msg(r <= 1, "%s %s: %s differs from the oracle at %g of its bound", what, fmt, cmp[i].op, r);
    }
    free(by), free(bv), free(bw), free(bp), free(bz), free(bc);
    vijp_mat *all[] = {&YF, &YR, &VF, &VR, &WF, &WR, &PF, &PR, &cF, &cR, &gR, &zF, &zR, &cF2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vijp_mat_clear(all[i]);
    layerfix_clear(&t);
}
END_TEST

/* inverse(forward(x)) = x where the layer's contract gives an inverse, by
 * its error model (vijp_layer_bounds.inverse):
 *   linear (y = Wx + b, W square): ‖x̂ − x‖ <= ‖W⁻¹‖·(n+2)u‖|W||x| + 2|b|‖ + κ·C_solve·u‖x‖;
 *   elementwise: |x̂ − x| <= u(inv_a|x| + inv_c + inv_b|y|/f′), the inverse's
 *   own error plus the forward's relative error amplified by 1/f′;
 *   exact (a permutation): equality.
 * Where it gives none, or the layer is not square, the inverse must refuse
 * (VIJP_EUNSUPPORTED); a layer that declares itself invertible must give one. */
START_TEST(inverse_round_trip)
{
    layerfix t;
    setup(&t, _i);
    const vijp_layer *L = t.L;
    const vijp_layer_bounds *bd = &L->type->bounds;
    size_t m = L->out, n = L->in;
    if (L->type->declare(L) & VIJP_DECL_INVERTIBLE)
        ck_assert_msg(bd->inverse != VIJP_INVBOUND_NONE,
                      "%s declares itself invertible but its contract gives no inverse bound", cases[_i / 2].spec);
    vijp_mat Y, X2;
    vijp_mat_init(&Y, m, NB, &t.F), vijp_mat_init(&X2, n, NB, &t.F);
    ck_assert(!vijp_layer_forward(L, &t.thF, &t.XF, &Y, NULL));
    vijp_error err = {0};
    int rc = vijp_layer_inverse(L, &t.thF, &Y, &X2, &err);
    if (bd->inverse == VIJP_INVBOUND_NONE || m != n) {
        ck_assert_msg(rc == VIJP_EUNSUPPORTED, "%s %s: an inverse (rc %d) where the contract gives none or the "
                      "layer is not square", cases[_i / 2].spec, formats[_i % 2], rc);
    } else {
        ck_assert_msg(!rc, "%s", err.msg);
        double kap = kappa(&t), C = c_solve(m, n), e = 1.01 * t.u, *bound = calloc(n * NB, sizeof *bound);
        for (size_t b = 0; b < NB; b++) {
            double *A = abs_jacobian(&t, b), nx = col_norm(&t.XF, b), s2 = 0, fro = 0;
            for (size_t i = 0; bd->inverse == VIJP_INVBOUND_LINEAR && i < m; i++) {
                double s = 2 * bias_at(&t, i);
                for (size_t j = 0; j < n; j++) s += A[i + j * m] * absval(&t.XF, j + b * n);
                s2 += s * s;
            }
            for (size_t i = 0; i < m * n; i++) fro += A[i] * A[i];
            for (size_t i = 0; i < n; i++) {
                if (bd->inverse == VIJP_INVBOUND_LINEAR) {
                    /* ‖W⁻¹‖ = κ/σmax and σmax >= ‖W‖_F/√n */
                    double winv = kap * sqrt((double)n) / sqrt(fro);
                    bound[i + b * n] = winv * (n + 2) * e * sqrt(s2) + kap * C * e * nx;
                } else if (bd->inverse == VIJP_INVBOUND_EXACT) {
                    bound[i + b * n] = 0;
                } else {
                    double y = absval(&Y, i + b * n), d = A[i + i * n];
                    bound[i + b * n] = e * (bd->inv_a * absval(&t.XF, i + b * n) + bd->inv_c + bd->inv_b * y / d);
                }
            }
            free(A);
        }
        double r = ratio_to_bound(&X2, &t.XF, bound);
        ck_assert_msg(r <= 1, "%s %s: inverse(forward(x)) - x at %g of its bound", cases[_i / 2].spec, formats[_i % 2], r);
        free(bound);
    }
    vijp_mat_clear(&Y), vijp_mat_clear(&X2);
    layerfix_clear(&t);
}
END_TEST

static vijp_mat theta_of(const vijp_net *net, const vijp_format *f)
{
    vijp_mat th;
    vijp_mat_init(&th, net->layers[0].type->param_count(&net->layers[0]), 1, f);
    if (th.rows) vijp_mat_set_d(&th, net->theta[0]);
    return th;
}

/* Bad input: a clear error code and message, never a crash or a division by zero. */
START_TEST(bad_inputs)
{
    const char *fmt = formats[_i];
    vijp_format F;
    ck_assert(!vijp_format_parse(fmt, &F, NULL));
    vijp_error err = {0};
    vijp_net net;
    ck_assert_int_eq(vijp_net_build(&net, "leaky:0", 1, 4, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "relu"), "leaky:0 should point to relu: %s", err.msg);
    ck_assert_int_eq(vijp_net_build(&net, "conv:3", 1, 4, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4x3", 1, 5, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "relu", 1, 0, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "dense:0", 1, 0, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4,,relu", 2, 0, &err), VIJP_EINVAL);
    /* items past the depth are parsed too (issue 15: this ran, exit 0) */
    ck_assert_int_eq(vijp_net_build(&net, "dense:16,tanh,bogus", 2, 16, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "bogus") && strstr(err.msg, "which depth 2 leaves unused"), "%s", err.msg);
    ck_assert_int_eq(vijp_net_build(&net, "dense:16,tanh,conv1d:3x3", 1, 16, &err), VIJP_EDIM);
    ck_assert(!vijp_net_build(&net, "dense:16,tanh,leaky:0.5", 2, 16, &err));
    vijp_net_free(&net);
    /* the catalogue's shape rules: a message and an error code, never a net */
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"conv1d:2x4", 8, VIJP_EINVAL},         /* even kernel */
        {"conv1d:3x3", 8, VIJP_EDIM},           /* 8 is not 3 channels */
        {"conv1d:2x3s3", 8, VIJP_EDIM},         /* stride does not divide 4 positions */
        {"conv1d:2x3:mirror", 8, VIJP_EINVAL},  /* unknown padding */
        {"conv1d:2x9", 8, VIJP_EDIM},           /* kernel longer than the channel */
        {"conv2d:2x5x4", 32, VIJP_EDIM},        /* kernel larger than the 4 x 4 grid */
        {"conv2d:2x3", 32, VIJP_EINVAL},        /* rows missing */
        {"avgpool:3", 8, VIJP_EDIM},            /* window does not divide */
        {"avgpool:1", 8, VIJP_EINVAL},          /* no pooling */
        {"squeeze:2x3", 8, VIJP_EDIM},          /* 8 is not a multiple of 6 */
        {"additive", 7, VIJP_EDIM},             /* odd width */
        {"additive:dense:3+avgpool:3", 6, VIJP_EDIM}, /* a residual layer must keep the half width */
        {"additive:additive", 8, VIJP_EINVAL},  /* no nesting */
        {"affine:foo", 8, VIJP_EINVAL},         /* unknown layer in the residual function */
        {"layernorm", 1, VIJP_EDIM},            /* nothing to normalize */
        {"inv1x1:1", 8, VIJP_EINVAL},           /* one channel */
        {"gelu:2", 8, VIJP_EINVAL},             /* takes no argument */
        /* issue 15, strict arguments: each of these ran (or crashed) before */
        {"leaky:1e300", 8, VIJP_EINVAL},        /* α·x overflows: ran, printed nan, exit 0 */
        {"leaky:1e-5", 8, VIJP_EINVAL},         /* 1/α overflows binary16; α rounds to a subnormal */
        {"leaky:4096.5", 8, VIJP_EINVAL},       /* just past 2^12 */
        {"leaky:inf", 8, VIJP_EINVAL},
        {"leaky:nan", 8, VIJP_EINVAL},
        {"squeeze:4294967296x4294967296", 16, VIJP_EINVAL}, /* c·f wrapped to 0: SIGFPE */
        {"conv2d:4294967296x3x4294967296", 16, VIJP_EINVAL}, /* c·rows wrapped to 0: SIGFPE */
        {"avgpool:-2", 8, VIJP_EINVAL},         /* strtoul: 2^64 − 2 */
        {"inv1x1:-4", 8, VIJP_EINVAL},
        {"conv1d:2x3s-1", 8, VIJP_EINVAL},
        {"conv1d: 2x3", 8, VIJP_EINVAL},        /* sscanf skipped the blank */
        {"squeeze:+2x2", 8, VIJP_EINVAL},
        {"conv1d:2x3x", 8, VIJP_EINVAL},        /* trailing junk */
        {"conv2d:2x3x0", 8, VIJP_EINVAL},       /* no rows */
        {"dense:16777217", 8, VIJP_EINVAL},     /* wider than VIJP_WIDTH_MAX */
        {"dense:4x99999999999999999999", 8, VIJP_EINVAL}, /* strtoull saturated */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memset(&err, 0, sizeof err);
        int rc = vijp_net_build(&net, bad[k].spec, 1, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].rc && err.msg[0], "'%s' at width %zu: code %d (want %d), message '%s'", bad[k].spec,
                      bad[k].width, rc, bad[k].rc, err.msg);
    }

    /* the slope range's ends are accepted (leaky_relu.c derives them) */
    ck_assert(!vijp_net_build(&net, "leaky:0.000244140625,leaky:4096", 2, 8, &err));
    vijp_net_free(&net);

    /* singular square dense: a zero row in W makes Wᵀ gy = gx unsolvable */
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 4, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, 7, NULL));
    for (size_t k = 0; k < 4; k++) net.theta[0][2 + 4 * k] = 0;
    vijp_mat th = theta_of(&net, &F), X, G, Y, Xs;
    vijp_mat_init(&X, 4, 2, &F), vijp_mat_init(&G, 4, 2, &F), vijp_mat_init(&Y, 4, 2, &F), vijp_mat_init(&Xs, 3, 2, &F);
    for (size_t i = 0; i < 8; i++) vijp_mat_set_entry_d(&G, i, 1.0 + (double)i);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], &th, &X, &G, NULL, &Y, &err), VIJP_ESINGULAR);
    ck_assert_int_eq(vijp_layer_inverse(&net.layers[0], &th, &G, &Y, &err), VIJP_ESINGULAR);
    /* mismatched dimensions */
    ck_assert_int_eq(vijp_layer_forward(&net.layers[0], &th, &Xs, &Y, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_layer_vjp(&net.layers[0], &th, &X, &G, &Xs, &err), VIJP_EDIM);
    vijp_mat_clear(&th);
    vijp_net_free(&net);

    /* rank-deficient tall dense: the cokernel exceeds the m − n stored numbers */
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 2, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, 7, NULL));
    for (size_t i = 0; i < 4; i++) net.theta[0][i + 4] = 0; /* zero column: R[1,1] = 0 exactly */
    th = theta_of(&net, &F);
    vijp_mat Xt, Gt, c;
    vijp_mat_clear(&Y);
    vijp_mat_init(&Xt, 2, 1, &F), vijp_mat_init(&Gt, 2, 1, &F), vijp_mat_init(&Y, 4, 1, &F), vijp_mat_init(&c, 2, 1, &F);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], &th, &Xt, &Gt, &c, &Y, &err), VIJP_ESINGULAR);
    ck_assert_int_eq(vijp_layer_inverse(&net.layers[0], &th, &Y, &Xt, &err), VIJP_EUNSUPPORTED);
    vijp_mat_clear(&th), vijp_mat_clear(&Xt), vijp_mat_clear(&Gt), vijp_mat_clear(&c), vijp_mat_clear(&Y);
    vijp_mat_init(&Y, 4, 2, &F);
    vijp_net_free(&net);

    /* tanh far out: f'(x) underflows to 0 (sech²(800) < 2^-2000), the vijp must refuse */
    ck_assert(!vijp_net_build(&net, "tanh", 1, 4, &err));
    vijp_mat_set_entry_d(&X, 5, 800.0);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err) == VIJP_ESINGULAR ||
                         !strcmp(fmt, "mpfr:256") /* unbounded exponent: sech²(800) ≈ 2^-2306 is representable */,
                     1);
    vijp_net_free(&net);

    /* NaN and Inf in the inputs of an engine */
    ck_assert(!vijp_net_build(&net, "dense:4,leaky:0.5", 2, 4, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, 7, NULL));
    vijp_mat thn[2];
    ck_assert(!vijp_net_params(&net, &F, thn, NULL));
    vijp_grads out;
    vijp_mat_set_entry_d(&X, 3, NAN);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, thn, &X, &G, &out, &err), VIJP_EDOMAIN);
    ck_assert_msg(strstr(err.msg, "NaN"), "%s", err.msg);
    vijp_mat_set_entry_d(&X, 3, 0), vijp_mat_set_entry_d(&G, 1, INFINITY);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, thn, &X, &G, &out, &err), VIJP_EDOMAIN);
    vijp_net_params_clear(&net, thn);
    net.theta[0][0] = NAN;
    ck_assert_int_eq(vijp_net_params(&net, &F, thn, &err), VIJP_EDOMAIN);
    vijp_net_free(&net);
    vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y), vijp_mat_clear(&Xs);

    /* unknown format names and precisions out of range */
    ck_assert_int_eq(vijp_format_parse("float8", &F, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_parse("mpfr:1", &F, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_parse("mpfr:1000000", &F, &err), VIJP_EINVAL);
}
END_TEST

/* In binary16 tanh' underflows much earlier: sech²(12) ≈ 1.5e-10 < 2^-25, the
 * half-way point below binary16's smallest subnormal 2^-24. */
START_TEST(tanh_underflow_binary16)
{
    vijp_format F;
    ck_assert(!vijp_format_parse("binary16", &F, NULL));
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "tanh", 1, 2, NULL));
    vijp_mat X, G, Y;
    vijp_mat_init(&X, 2, 1, &F), vijp_mat_init(&G, 2, 1, &F), vijp_mat_init(&Y, 2, 1, &F);
    vijp_mat_set_entry_d(&X, 0, 0.5), vijp_mat_set_entry_d(&X, 1, 12.0), vijp_mat_set_entry_d(&G, 1, 1.0);
    vijp_error err = {0};
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err), VIJP_ESINGULAR);
    vijp_mat_set_entry_d(&X, 1, 3.0); /* sech²(3) ≈ 9.9e-3: fine */
    ck_assert(!vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err));
    vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y);
    vijp_net_free(&net);
}
END_TEST

/* Orthogonal initialisation (QR of a Gaussian matrix): WᵀW = I (tall/square)
 * or WWᵀ = I (wide) within the Householder QR bound 16mn·u plus n·u for the
 * product; scaled:G multiplies by G; Gaussian has variance 1/n (checked loosely
 * by its Frobenius norm², a χ² with mn degrees of freedom: 6 σ of slack). */
START_TEST(initialisers)
{
    const size_t shapes[][2] = {{6, 6}, {4, 9}, {9, 4}};
    for (size_t s = 0; s < 3; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], r = m < n ? m : n;
        char spec[32];
        snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
        vijp_net net;
        ck_assert(!vijp_net_build(&net, spec, 1, 0, NULL));
        for (int g = 1; g <= 2; g++) {
            vijp_init in = {g == 1 ? VIJP_INIT_ORTHOGONAL : VIJP_INIT_SCALED, g == 1 ? 1.0 : 3.0};
            ck_assert(!vijp_net_init(&net, in, 11, NULL));
            const double *W = net.theta[0];
            for (size_t a = 0; a < r; a++)
                for (size_t b = 0; b < r; b++) {
                    double dot = 0; /* columns (m >= n) or rows (m < n) a and b */
                    for (size_t k = 0; k < (m >= n ? m : n); k++)
                        dot += m >= n ? W[k + a * m] * W[k + b * m] : W[a + k * m] * W[b + k * m];
                    double want = a == b ? in.gain * in.gain : 0;
                    ck_assert_msg(fabs(dot - want) <= in.gain * in.gain * (16.0 * m * n + m + n) * 0x1p-53,
                                  "%s %s: <w_%zu, w_%zu> = %g", spec, g == 1 ? "orthogonal" : "scaled:3", a, b, dot);
                }
        }
        ck_assert(!vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, 11, NULL));
        double fro = 0;
        for (size_t k = 0; k < m * n; k++) fro += net.theta[0][k] * net.theta[0][k];
        /* E‖W‖² = m, sd = m·sqrt(2/(mn)) */
        ck_assert_msg(fabs(fro - m) <= 6 * m * sqrt(2.0 / (m * n)), "%s gaussian: ‖W‖² = %g, expected %zu", spec, fro, m);
        /* kaiming-uniform (PyTorch's nn.Linear): W and b in [−a, a], a = 1/√n;
         * E w² = a²/3, Var w² = 4a⁴/45, so Σ w² over the mn + m entries is
         * (mn + m)a²/3 within 6 sd = 6·sqrt(4(mn + m)/45)·a². */
        ck_assert(!vijp_net_init(&net, (vijp_init){VIJP_INIT_KAIMING_UNIFORM, 1}, 11, NULL));
        double a = 1 / sqrt((double)n), sq = 0, N = (double)(m * n + m);
        for (size_t k = 0; k < m * n + m; k++) {
            ck_assert_msg(fabs(net.theta[0][k]) <= a, "%s kaiming-uniform: entry %zu = %g outside ±%g", spec, k, net.theta[0][k], a);
            sq += net.theta[0][k] * net.theta[0][k];
        }
        ck_assert_msg(fabs(sq - N * a * a / 3) <= 6 * sqrt(4 * N / 45) * a * a, "%s kaiming-uniform: Σw² = %g, expected %g", spec,
                      sq, N * a * a / 3);
        vijp_net_free(&net);
    }
}
END_TEST

Suite *suite_layers(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("battery");
    tcase_set_timeout(tc, 120);
    int n = (int)(2 * NCASES);
    tcase_add_loop_test(tc, adjoint, 0, n);
    tcase_add_loop_test(tc, jvp_finite_differences, 0, n);
    tcase_add_loop_test(tc, jacobian_columns, 0, n);
    tcase_add_loop_test(tc, vijp_identities, 0, n);
    tcase_add_loop_test(tc, fragment_is_cokernel_coordinates, 0, n);
    tcase_add_loop_test(tc, format_vs_oracle, 0, n);
    tcase_add_loop_test(tc, inverse_round_trip, 0, n);
    tcase_add_loop_test(tc, bad_inputs, 0, 2);
    tcase_add_test(tc, tanh_underflow_binary16);
    tcase_add_test(tc, initialisers);
    suite_add_tcase(s, tc);
    return s;
}
