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
 *  - smooth activations: "ulps" below replaces the 6 above.  It bounds the
 *    relative error of f and f′ at the battery's points (|x| <= 4, 0.5 away
 *    from a zero x0 of f′, see layerfix.c) from the bounds stated in each
 *    src/layers/<name>.c, (K1|term1| + K2|term2|)/|f′(x)|: max over those
 *    points (mpmath, step 5e-4) 48.0 for GELU (at x = 4; f itself 47),
 *    56.2 for SiLU (x = −1.78), 80.8 for Mish (x = −1.69); sigmoid 12 (f′),
 *    softplus 7;
 *  - inverses of elementwise layers: |x̂ − x| <= u(inv_a|x| + inv_c +
 *    inv_b|y|/f′): the inverse's own error plus the forward's relative error
 *    inv_b·u amplified by 1/f′ (tanh: glibc atanh/tanh within 2 ulps;
 *    sigmoid: 3u|x| + 2.8u and 7u; softplus: 2u|x| + 4u and 5u, from the
 *    comments in src/layers/).
 */
#include "layerfix.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *spec;
    size_t width;
    double ulps;                /* the "6" of the header comment */
    double inv_a, inv_c, inv_b; /* elementwise inverse bound */
} cases[] = {
    {"dense:6", 6, 6, 0, 0, 0},   /* square: LU */
    {"dense:4", 7, 6, 0, 0, 0},   /* wide: QR of Wᵀ */
    {"dense:9", 5, 6, 0, 0, 0},   /* tall: fragment in null(Wᵀ) */
    {"leaky:0.3", 6, 6, 4, 0, 4}, {"relu", 8, 6, 0, 0, 0}, {"tanh", 6, 6, 4, 0, 4},
    {"sigmoid", 6, 12, 4, 3, 8}, {"softplus", 6, 8, 3, 5, 6},
    {"silu", 6, 57, 0, 0, 0}, {"gelu", 6, 48, 0, 0, 0}, {"mish", 6, 81, 0, 0, 0},
    {"layernorm", 6, 6, 0, 0, 0}, {"softmax", 6, 6, 0, 0, 0},
    {"conv1d:2x3", 8, 6, 0, 0, 0}, /* zero padding: dense LU */
    {"conv1d:2x3:circular", 8, 6, 0, 0, 0}, /* per-frequency solves */
    {"conv1d:2x3s2", 8, 6, 0, 0, 0},        /* strided: wide, the dense layer's QR solve */
    {"conv2d:1x3x4", 16, 6, 0, 0, 0},       /* 4 x 4 grid, zero padding: dense LU */
    {"conv2d:1x3x4:circular", 16, 6, 0, 0, 0}, /* 2-D DFT, one solve per frequency pair */
    {"conv2d:1x3x4s2:circular", 16, 6, 0, 0, 0}, /* strided 4 x 4 -> 2 x 2: wide */
    {"avgpool:2", 8, 6, 0, 0, 0},           /* wide, structured vijp */
    {"squeeze:1x4", 8, 6, 0, 0, 0},         /* a permutation with a 3-cycle (2x2 on 8 is an involution) */
    {"inv1x1:2", 8, 6, 0, 0, 0},            /* LU form: triangular substitutions */
};
#define NCASES (sizeof cases / sizeof *cases)
static const char *const formats[] = {"double", "mpfr:256"};
#define NB 3 /* batch of the fixtures */

static void setup(layerfix *t, int i)
{
    layerfix_init(t, cases[i / 2].spec, cases[i / 2].width, formats[i % 2], NB, test_seed() + (uint64_t)i);
}

/* The entrywise majorant M >= |J| that the bounds scale with, at sample b
 * of the reference, as doubles (m × n): the sum of the absolute values of
 * the terms each entry is computed from.  For dense and elementwise layers
 * that is |J|; LayerNorm's J_ij = (δ_ij − 1/n − ŷ_iŷ_j/n)/σ gives
 * M_ij = (δ_ij + 1/n + |ŷ_iŷ_j|/n)/σ, softmax's J = diag(y) − yyᵀ gives
 * M = diag(y) + yyᵀ; their entries can cancel to ~0 while the rounding
 * errors of the terms do not. */
static double *abs_jacobian(layerfix *t, size_t b)
{
    size_t m = t->L->out, n = t->L->in;
    double *a = jacobian_at(t->L, &t->thR, &t->XR, b);
    for (size_t i = 0; i < m * n; i++) a[i] = fabs(a[i]);
    const char *name = t->L->type->name;
    if (!strcmp(name, "layernorm") || !strcmp(name, "softmax")) {
        double x[n], y[n], mu = 0, s2 = 0, z = 0;
        for (size_t i = 0; i < n; i++) x[i] = absval(&t->XR, i + b * n) * (mpfr_sgn(t->XR.m[i + b * n]) < 0 ? -1 : 1);
        if (!strcmp(name, "layernorm")) {
            for (size_t i = 0; i < n; i++) mu += x[i] / (double)n;
            for (size_t i = 0; i < n; i++) s2 += (x[i] - mu) * (x[i] - mu) / (double)n;
            for (size_t i = 0; i < n; i++) y[i] = (x[i] - mu) / sqrt(s2);
            for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < n; i++) a[i + j * n] = ((i == j) + (1 + fabs(y[i] * y[j])) / (double)n) / sqrt(s2);
        } else {
            double mx = x[0];
            for (size_t i = 1; i < n; i++) mx = fmax(mx, x[i]);
            for (size_t i = 0; i < n; i++) z += exp(x[i] - mx);
            for (size_t i = 0; i < n; i++) y[i] = exp(x[i] - mx) / z;
            for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < n; i++) a[i + j * n] = (i == j ? y[i] : 0) + y[i] * y[j];
        }
        for (size_t i = 0; i < m * n; i++) a[i] *= 1.01; /* computed in double: 1% covers its rounding */
    }
    return a;
}

/* |b| added to output i (dense: b_i; conv1d: its channel's b). */
static int is_conv(const vijp_layer *L) { return !strcmp(L->type->name, "conv1d") || !strcmp(L->type->name, "conv2d"); }
static double bias_at(layerfix *t, size_t i)
{
    const vijp_layer *L = t->L;
    if (!t->thR.rows || !strcmp(L->type->name, "inv1x1")) return 0; /* inv1x1 has no bias */
    if (is_conv(L)) {
        size_t C = L->iarg[0], T = (L->iarg[3] ? L->iarg[1] : 1) * L->iarg[1];
        return absval(&t->thR, C * C * T + (i % L->out) / (L->out / C));
    }
    return absval(&t->thR, L->out * L->in + i);
}

/* Bounds on the parameter gradient in the format: every entry is a sum over
 * the batch (and, for conv1d, over positions) of products G·X or of G alone:
 * γ_(terms+1) Σ |G||X|.  dense: dW_ij = Σ_b G_ib X_jb, db_i = Σ_b G_ib;
 * conv1d: dW[o,c,k] = Σ_b Σ_p G[o,p] X[c, p+k−h], db[o] = Σ_b Σ_p G[o,p]. */
static void param_bound(layerfix *t, double e, double *bp)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in;
    if (is_conv(L)) {
        /* iarg: channels, kernel, 2·stride + circular, grid rows (0 in 1-D) */
        size_t C = L->iarg[0], K = L->iarg[1], KH = L->iarg[3] ? K : 1, T = KH * K, np = n / C, no = m / C;
        size_t S = L->iarg[2] >> 1, R = L->iarg[3] ? L->iarg[3] : 1, Q = np / R, oq = L->iarg[3] ? Q / S : no;
        size_t terms = NB * no + 1;
        for (size_t o = 0; o < C; o++)
            for (size_t b = 0; b < NB; b++)
                for (size_t p = 0; p < no; p++) {
                    double g = absval(&t->GR, b * m + o * no + p);
                    bp[C * C * T + o] += terms * e * g;
                    for (size_t c = 0; c < C; c++)
                        for (size_t k = 0; k < T; k++) {
                            long r = L->iarg[3] ? (long)(S * (p / oq) + k / K) - (long)(KH / 2) : 0;
                            long q = (long)(S * (p % oq) + k % K) - (long)(K / 2);
                            if (L->iarg[2] & 1) r = (r + (long)R) % (long)R, q = (q + (long)Q) % (long)Q;
                            if (r >= 0 && r < (long)R && q >= 0 && q < (long)Q)
                                bp[(o * C + c) * T + k] += terms * e * g * absval(&t->XR, b * n + c * np + (size_t)(r * (long)Q + q));
                        }
                }
        return;
    }
    if (!strcmp(L->type->name, "inv1x1")) {
        /* dM = Pᵀ dW, dW_ij = Σ_(b,p) g_i x_j within γ_(T)Σ|g||x| (T = NB·positions + 1);
         * then dL = dM U′ᵀ, dU′ = Lᵀ dM (C-term products of a perturbed dM:
         * |E||U′|ᵀ + γ_(C+1)|dM||U′|ᵀ), and the diagonal times exp(log_s) (2u). */
        size_t C = L->iarg[0], np = n / C, T = NB * np + 1;
        double *E = calloc(C * C, sizeof *E), *M = calloc(C * C, sizeof *M), *A = calloc(C * C, sizeof *A);
        for (size_t k = 0; k < C * C; k++) A[k] = vijp_mat_get_d(&t->thR, k);
        for (size_t j = 0; j < C; j++)
            for (size_t i = 0; i < C; i++)
                for (size_t b = 0; b < NB; b++)
                    for (size_t p = 0; p < np; p++) {
                        double g = absval(&t->GR, b * n + (C - 1 - i) * np + p), x = absval(&t->XR, b * n + j * np + p);
                        E[i + j * C] += T * e * g * x, M[i + j * C] += g * x;
                    }
        for (size_t j = 0; j < C; j++)
            for (size_t i = 0; i < C; i++) {
                double s = 0;
                if (i > j)
                    for (size_t k = j; k < C; k++) {
                        double uv = fabs(k == j ? exp(A[j + j * C]) : A[j + k * C]);
                        s += (E[i + k * C] + (C + 1) * e * M[i + k * C]) * uv;
                    }
                else
                    for (size_t k = i; k < C; k++) {
                        double lv = k == i ? 1 : fabs(A[k + i * C]);
                        s += lv * (E[k + j * C] + (C + 1) * e * M[k + j * C]);
                    }
                bp[i + j * C] = i == j ? exp(A[i + i * C]) * (s + 2 * e * s) + 2 * e * exp(A[i + i * C]) * s : s;
            }
        free(E), free(M), free(A);
        return;
    }
    for (size_t i = 0; i < m; i++) /* dW_ij = Σ_b G_ib X_jb, db_i = Σ_b G_ib: γ_(NB+1) Σ |G||X| */
        for (size_t b = 0; b < NB; b++) {
            for (size_t j = 0; j < n; j++) bp[i + j * m] += (NB + 1) * e * absval(&t->GR, i + b * m) * absval(&t->XR, j + b * n);
            bp[m * n + i] += (NB + 1) * e * absval(&t->GR, i + b * m);
        }
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
    bound *= 2 * 1.01 * (double)(m > n ? m : n) * t.u + 2 * 1.01 * cases[_i / 2].ulps * t.u;
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
    vijp_format_mpfr(&H, 2048, NULL);
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
                bound[i + b * m] += 1.01 * (n + cases[_i / 2].ulps) * t.u * A[i + k * m] * absval(&t.UF, k + b * n);
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
    for (size_t i = 0; i < m * n; i++) bound[i] = 1.01 * (n + cases[_i / 2].ulps) * t.u * A[i];
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

    double kap = kappa(&t), C = c_solve(m, n), e = 1.01 * t.u, K = cases[_i / 2].ulps;
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

/* inverse(forward(x)) = x where an inverse exists.  Elementwise: the forward
 * rounding |δy| <= 4u|y| is amplified by 1/f', the inverse adds 4u|x|;
 * square dense: ‖x̂ − x‖ <= ‖W⁻¹‖·(n+2)u‖|W||x| + 2|b|‖ + κ·C_solve·u‖x‖. */
START_TEST(inverse_round_trip)
{
    layerfix t;
    setup(&t, _i);
    const vijp_layer *L = t.L;
    size_t m = L->out, n = L->in;
    if (m != n) { layerfix_clear(&t); return; } /* wide/tall dense: no inverse (checked in bad_inputs) */
    int elementwise = L->type->param_count(L) == 0;
    vijp_mat Y, X2;
    vijp_mat_init(&Y, m, NB, &t.F), vijp_mat_init(&X2, n, NB, &t.F);
    ck_assert(!vijp_layer_forward(L, &t.thF, &t.XF, &Y, NULL));
    vijp_error err = {0};
    int rc = vijp_layer_inverse(L, &t.thF, &Y, &X2, &err);
    if (elementwise && !(L->type->declare(L) & VIJP_DECL_INVERTIBLE)) {
        ck_assert_int_eq(rc, VIJP_EUNSUPPORTED); /* ReLU, SiLU, GELU, Mish are not injective */
    } else {
        ck_assert_msg(!rc, "%s", err.msg);
        double kap = kappa(&t), C = c_solve(m, n), e = 1.01 * t.u, *bound = calloc(n * NB, sizeof *bound);
        int dense = L->type->param_count(L) > 0; /* linear (dense, conv1d) */
        for (size_t b = 0; b < NB; b++) {
            double *A = abs_jacobian(&t, b), nx = col_norm(&t.XF, b), s2 = 0, fro = 0;
            for (size_t i = 0; dense && i < m; i++) {
                double s = 2 * bias_at(&t, i);
                for (size_t j = 0; j < n; j++) s += A[i + j * m] * absval(&t.XF, j + b * n);
                s2 += s * s;
            }
            for (size_t i = 0; i < m * n; i++) fro += A[i] * A[i];
            for (size_t i = 0; i < n; i++) {
                if (dense) {
                    /* ‖W⁻¹‖ = κ/σmax and σmax >= ‖W‖_F/√n */
                    double winv = kap * sqrt((double)n) / sqrt(fro);
                    bound[i + b * n] = winv * (n + 2) * e * sqrt(s2) + kap * C * e * nx;
                } else {
                    double y = absval(&Y, i + b * n), d = A[i + i * n];
                    if (!strcmp(L->type->name, "squeeze")) { /* a permutation: exact both ways */
                        bound[i + b * n] = 0;
                        continue;
                    }
                    bound[i + b * n] = e * (cases[_i / 2].inv_a * absval(&t.XF, i + b * n) + cases[_i / 2].inv_c +
                                            cases[_i / 2].inv_b * y / d);
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
    vijp_format_parse(fmt, &F, NULL);
    vijp_error err = {0};
    vijp_net net;
    ck_assert_int_eq(vijp_net_build(&net, "leaky:0", 1, 4, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "relu"), "leaky:0 should point to relu: %s", err.msg);
    ck_assert_int_eq(vijp_net_build(&net, "conv:3", 1, 4, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4x3", 1, 5, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "relu", 1, 0, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "dense:0", 1, 0, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4,,relu", 2, 0, &err), VIJP_EINVAL);
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
        {"additive:dense:3+conv1d:1x3", 6, VIJP_EDIM}, /* no integer-argument layers inside */
        {"additive:additive", 8, VIJP_EINVAL},  /* no nesting */
        {"affine:foo", 8, VIJP_EINVAL},         /* unknown layer in the residual function */
        {"layernorm", 1, VIJP_EDIM},            /* nothing to normalize */
        {"inv1x1:1", 8, VIJP_EINVAL},           /* one channel */
        {"gelu:2", 8, VIJP_EINVAL},             /* takes no argument */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memset(&err, 0, sizeof err);
        int rc = vijp_net_build(&net, bad[k].spec, 1, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].rc && err.msg[0], "'%s' at width %zu: code %d (want %d), message '%s'", bad[k].spec,
                      bad[k].width, rc, bad[k].rc, err.msg);
    }

    /* singular square dense: a zero row in W makes Wᵀ gy = gx unsolvable */
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 4, &err));
    vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, 7, NULL);
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
    vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, 7, NULL);
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
    vijp_net_init(&net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, 7, NULL);
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
    vijp_format_parse("binary16", &F, NULL);
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
