/* The additive coupling block (RevNet), F = G = dense:H + tanh, against the
 * 1024-bit oracle and through its own identities, with componentwise error
 * bounds derived here; and the reconstruction of a depth-64 RevNet stack.
 *
 * Notation: x = (x1, x2), z_F = W_F x2 + b_F, F = tanh(z_F), y1 = x1 + F,
 * z_G = W_G y1 + b_G, G = tanh(z_G), y2 = x2 + G; f′_F = sech²(z_F), same for
 * G.  Facts used (u: unit roundoff of the format under test):
 *  - a dot product of length k plus a bias: γ_(k+1)(|W||x| + |b|), γ_k = 1.01ku
 *    (Higham eq. 3.5);
 *  - tanh within 2 ulps (4u) and f′ within 6u (src/kernels/ref/dual.c); in MPFR
 *    both are correctly rounded, so the same constants bound them;
 *  - |tanh′| <= 1 and |tanh″| <= 4/(3√3) < 0.77: a perturbation δz of z
 *    moves tanh by <= δz and f′ by <= 0.77δz;
 *  - every bound is first order; a factor 1.1 covers the second-order terms.
 * Values that only scale a bound are computed in double from the reference. */
#include "fixtures/layerfix.h"
#include "vijp/catalogue.h"
#include "vijp/flow.h"
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H 4
#define N (2 * H)
#define NB 3
#define TANH2 0.77 /* > max |tanh″| */

static const char *const formats[] = {"double", "mpfr:256"};

/* One sample's exact-ish values and the forward error bounds. */
typedef struct {
    double W[2][H * H], b[2][H];               /* F, G: column-major W */
    double x1[H], x2[H], F[H], y1[H], G[H], y2[H];
    double fF[H], fG[H];                       /* f′ at z_F, z_G */
    double dzF[H], dzG[H];                     /* bounds on the computed z's errors */
    double ey1[H], ey2[H];                     /* bounds on the computed y's errors */
} block;

static double gam(int k, double u) { return 1.01 * k * u; }

/* |W||v| (tr 0) or |W|ᵀ|v| (tr 1); mul: W v with signs. */
static void absmul(const double *W, const double *v, double *r, int tr)
{
    for (size_t i = 0; i < H; i++) {
        r[i] = 0;
        for (size_t j = 0; j < H; j++) r[i] += fabs(tr ? W[j + i * H] : W[i + j * H]) * fabs(v[j]);
    }
}

static void mul(const double *W, const double *v, double *r, int tr)
{
    for (size_t i = 0; i < H; i++) {
        r[i] = 0;
        for (size_t j = 0; j < H; j++) r[i] += (tr ? W[j + i * H] : W[i + j * H]) * v[j];
    }
}

static void block_eval(block *k, const double *theta, const double *x, double u)
{
    for (int s = 0; s < 2; s++) {
        memcpy(k->W[s], theta + s * (H * H + H), H * H * sizeof(double));
        memcpy(k->b[s], theta + s * (H * H + H) + H * H, H * sizeof(double));
    }
    memcpy(k->x1, x, H * sizeof(double)), memcpy(k->x2, x + H, H * sizeof(double));
    double z[H], ax[H], ab[H];
    mul(k->W[0], k->x2, z, 0);
    absmul(k->W[0], k->x2, ax, 0);
    for (size_t i = 0; i < H; i++) {
        z[i] += k->b[0][i];
        k->F[i] = tanh(z[i]), k->fF[i] = 1 - k->F[i] * k->F[i];
        k->dzF[i] = gam(H + 1, u) * (ax[i] + fabs(k->b[0][i]));
        k->y1[i] = k->x1[i] + k->F[i];
        k->ey1[i] = k->dzF[i] + 4 * u * fabs(k->F[i]) + u * fabs(k->y1[i]);
    }
    mul(k->W[1], k->y1, z, 0);
    absmul(k->W[1], k->y1, ax, 0);
    absmul(k->W[1], k->ey1, ab, 0);
    for (size_t i = 0; i < H; i++) {
        z[i] += k->b[1][i];
        k->G[i] = tanh(z[i]), k->fG[i] = 1 - k->G[i] * k->G[i];
        k->dzG[i] = ab[i] + gam(H + 1, u) * (ax[i] + fabs(k->b[1][i]));
        k->y2[i] = k->x2[i] + k->G[i];
        k->ey2[i] = k->dzG[i] + 4 * u * fabs(k->G[i]) + u * fabs(k->y2[i]);
    }
}

/* Error bound of the computed J_C(ẑ)ᵀ g (C = F or G: W_Cᵀ(f′_C ⊙ g)) given a
 * bound eg on g's own error. */
static void vjp_err(const block *k, int s, const double *g, const double *eg, double u, double *e)
{
    const double *f = s ? k->fG : k->fF, *dz = s ? k->dzG : k->dzF;
    double t[H], a[H];
    for (size_t i = 0; i < H; i++)
        t[i] = TANH2 * dz[i] * fabs(g[i]) + f[i] * eg[i] + 7 * u * f[i] * fabs(g[i]);
    absmul(k->W[s], t, e, 1);
    for (size_t i = 0; i < H; i++) t[i] = f[i] * fabs(g[i]);
    absmul(k->W[s], t, a, 1);
    for (size_t i = 0; i < H; i++) e[i] += gam(H, u) * a[i];
}

/* Error bound of the computed J_C(ẑ) v: f′_C ⊙ (W_C v). */
static void jvp_err(const block *k, int s, const double *v, const double *ev, double u, double *e)
{
    const double *f = s ? k->fG : k->fF, *dz = s ? k->dzG : k->dzF;
    double wv[H], w_ev[H], w_v[H];
    mul(k->W[s], v, wv, 0);
    absmul(k->W[s], v, w_v, 0);
    absmul(k->W[s], ev, w_ev, 0);
    for (size_t i = 0; i < H; i++)
        e[i] = TANH2 * dz[i] * fabs(wv[i]) + f[i] * (w_ev[i] + gam(H, u) * w_v[i]) + 7 * u * f[i] * fabs(wv[i]);
}

typedef struct {
    layerfix t;
    block k[NB];
    double th[2 * (H * H + H)];
} cfix;

static void cfix_init(cfix *c, int i)
{
    layerfix_init(&c->t, "additive", N, formats[i % 2], NB, test_seed() + 17 * (uint64_t)i);
    ck_assert_uint_eq(c->t.thR.rows, 2 * (H * H + H));
    for (size_t j = 0; j < c->t.thR.rows; j++) c->th[j] = vijp_mat_get_d(&c->t.thR, j);
    for (size_t b = 0; b < NB; b++) {
        double x[N];
        for (size_t j = 0; j < N; j++) x[j] = vijp_mat_get_d(&c->t.XR, j + b * N);
        block_eval(&c->k[b], c->th, x, c->t.u);
    }
}

static double *col(const vijp_mat *a, size_t b, double *v)
{
    for (size_t j = 0; j < a->rows; j++) v[j] = vijp_mat_get_d(a, j + b * a->rows);
    return v;
}

static void check(const char *what, int i, const vijp_mat *got, const vijp_mat *want, double *bound)
{
    for (size_t j = 0; j < vijp_mat_len(got); j++) bound[j] *= 1.1;
    double r = ratio_to_bound(got, want, bound);
    ck_assert_msg(r <= 1, "coupling block, %s: %s at %g of its bound (seed %llu)", formats[i % 2], what, r,
                  (unsigned long long)test_seed());
}

/* ⟨G, J U⟩ = ⟨G J, U⟩ with jvp and vjp in the format: the difference of the
 * two inner products, formed exactly (4096 bits), is at most
 * Σ |G|·e_jvp + Σ e_vjp·|U|, the bounds of the operator checks (already
 * scaled by 1.1 there). */
static void check_adjoint(const char *what, int i, layerfix *t, const vijp_mat *V, const vijp_mat *W, const double *ev,
                          const double *ew)
{
    mpfr_t a, b, p, q;
    mpfr_inits2(4096, a, b, p, q, (mpfr_ptr)0);
    mpfr_set_zero(a, 1), mpfr_set_zero(b, 1);
    double bound = 0;
    for (size_t k = 0; k < vijp_mat_len(V); k++) {
        mat_entry(p, V, k), mat_entry(q, &t->GF, k), mpfr_fma(a, p, q, a, MPFR_RNDN);
        mat_entry(p, W, k), mat_entry(q, &t->UF, k), mpfr_fma(b, p, q, b, MPFR_RNDN);
        bound += absval(&t->GF, k) * ev[k] + ew[k] * absval(&t->UF, k);
    }
    mpfr_sub(a, a, b, MPFR_RNDN);
    double d = fabs(mpfr_get_d(a, MPFR_RNDU));
    ck_assert_msg(d <= bound, "coupling block, %s: %s adjoint identity off by %g > %g", formats[i % 2], what, d, bound);
    mpfr_clears(a, b, p, q, (mpfr_ptr)0);
}

/* Each operator in the format against the 1024-bit oracle on the same inputs. */
START_TEST(operators_vs_oracle)
{
    cfix c;
    cfix_init(&c, _i);
    layerfix *t = &c.t;
    const vijp_layer *L = t->L;
    double u = t->u, bound[N * NB], pb[2 * (H * H + H)];
    vijp_mat AF, AR;
    /* forward */
    vijp_mat_init(&AF, N, NB, &t->F), vijp_mat_init(&AR, N, NB, &t->R);
    ck_assert(!vijp_layer_forward(L, &t->thF, &t->XF, &AF, NULL) && !vijp_layer_forward(L, &t->thR, &t->XR, &AR, NULL));
    for (size_t b = 0; b < NB; b++)
        for (size_t j = 0; j < H; j++) bound[j + b * N] = c.k[b].ey1[j], bound[H + j + b * N] = c.k[b].ey2[j];
    check("forward", _i, &AF, &AR, bound);
    /* jvp: v1 = u1 + J_F u2, v2 = u2 + J_G v1 */
    ck_assert(!vijp_layer_jvp(L, &t->thF, &t->XF, &t->UF, &AF, NULL) && !vijp_layer_jvp(L, &t->thR, &t->XR, &t->UR, &AR, NULL));
    for (size_t b = 0; b < NB; b++) {
        double U[N], V[N], zero[H] = {0}, e1[H], e2[H];
        col(&t->UR, b, U), col(&AR, b, V);
        jvp_err(&c.k[b], 0, U + H, zero, u, e1);
        for (size_t j = 0; j < H; j++) e1[j] += u * fabs(V[j]);
        jvp_err(&c.k[b], 1, V, e1, u, e2);
        for (size_t j = 0; j < H; j++) bound[j + b * N] = e1[j], bound[H + j + b * N] = e2[j] + u * fabs(V[H + j]);
    }
    check("jvp", _i, &AF, &AR, bound);
    double ev[N * NB];
    memcpy(ev, bound, sizeof ev);
    vijp_mat JU;
    vijp_mat_init(&JU, N, NB, &t->F), vijp_mat_copy(&JU, &AF);
    /* vjp: ḡ1 = g1 + J_Gᵀ g2, g_x2 = g2 + J_Fᵀ ḡ1 */
    ck_assert(!vijp_layer_vjp(L, &t->thF, &t->XF, &t->GF, &AF, NULL) && !vijp_layer_vjp(L, &t->thR, &t->XR, &t->GR, &AR, NULL));
    for (size_t b = 0; b < NB; b++) {
        double G[N], W[N], zero[H] = {0}, e1[H], e2[H];
        col(&t->GR, b, G), col(&AR, b, W);
        vjp_err(&c.k[b], 1, G + H, zero, u, e1);
        for (size_t j = 0; j < H; j++) e1[j] += u * fabs(W[j]);
        vjp_err(&c.k[b], 0, W, e1, u, e2);
        for (size_t j = 0; j < H; j++) bound[j + b * N] = e1[j], bound[H + j + b * N] = e2[j] + u * fabs(W[H + j]);
    }
    check("vjp", _i, &AF, &AR, bound);
    check_adjoint("additive", _i, t, &JU, &AF, ev, bound);
    vijp_mat_clear(&JU);
    /* vjp_param: θ_F from the dense input x2 (exact) and cotangent s_F = f′_F ⊙ ḡ1;
     * θ_G from ŷ1 (error ey1) and s_G = f′_G ⊙ g2; batch sums add γ_NB */
    vijp_mat PF, PR;
    vijp_mat_init(&PF, L->type->param_count(L), 1, &t->F), vijp_mat_init(&PR, L->type->param_count(L), 1, &t->R);
    ck_assert(!vijp_layer_vjp_param(L, &t->thF, &t->XF, &t->GF, &PF, NULL) &&
              !vijp_layer_vjp_param(L, &t->thR, &t->XR, &t->GR, &PR, NULL));
    memset(pb, 0, sizeof pb);
    for (size_t b = 0; b < NB; b++) {
        const block *k = &c.k[b];
        double G[N], W[N], zero[H] = {0}, egb[H], gb[H], sF[H], esF[H], sG[H], esG[H];
        col(&t->GR, b, G), col(&AR, b, W); /* AR still holds the oracle vjp: W[0..H) = ḡ1 */
        vjp_err(k, 1, G + H, zero, u, egb);
        for (size_t j = 0; j < H; j++) {
            gb[j] = W[j], egb[j] += u * fabs(gb[j]);
            sF[j] = k->fF[j] * gb[j], esF[j] = TANH2 * k->dzF[j] * fabs(gb[j]) + k->fF[j] * egb[j] + 7 * u * fabs(sF[j]);
            sG[j] = k->fG[j] * G[H + j], esG[j] = TANH2 * k->dzG[j] * fabs(G[H + j]) + 7 * u * fabs(sG[j]);
        }
        size_t PG = H * H + H;
        for (size_t r = 0; r < H; r++) {
            for (size_t j = 0; j < H; j++) {
                pb[r + j * H] += esF[r] * fabs(k->x2[j]) + gam(NB, u) * fabs(sF[r] * k->x2[j]);
                pb[PG + r + j * H] += esG[r] * fabs(k->y1[j]) + fabs(sG[r]) * k->ey1[j] + gam(NB, u) * fabs(sG[r] * k->y1[j]);
            }
            pb[H * H + r] += esF[r] + gam(NB, u) * fabs(sF[r]);
            pb[PG + H * H + r] += esG[r] + gam(NB, u) * fabs(sG[r]);
        }
    }
    check("vjp_param", _i, &PF, &PR, pb);
    /* vijp: g_y2 = g_x2 − J_Fᵀ g_x1, g_y1 = g_x1 − J_Gᵀ g_y2 (on the same inputs) */
    ck_assert(!vijp_layer_vijp(L, &t->thF, &t->XF, &t->GF, NULL, &AF, NULL) &&
              !vijp_layer_vijp(L, &t->thR, &t->XR, &t->GR, NULL, &AR, NULL));
    for (size_t b = 0; b < NB; b++) {
        double G[N], Y[N], zero[H] = {0}, e1[H], e2[H];
        col(&t->GR, b, G), col(&AR, b, Y);
        vjp_err(&c.k[b], 0, G, zero, u, e2);
        for (size_t j = 0; j < H; j++) e2[j] += u * fabs(Y[H + j]);
        vjp_err(&c.k[b], 1, Y + H, e2, u, e1);
        for (size_t j = 0; j < H; j++) bound[j + b * N] = e1[j] + u * fabs(Y[j]), bound[H + j + b * N] = e2[j];
    }
    check("vijp", _i, &AF, &AR, bound);
    vijp_mat_clear(&AF), vijp_mat_clear(&AR), vijp_mat_clear(&PF), vijp_mat_clear(&PR);
    layerfix_clear(t);
}
END_TEST

/* The identities, in the format, against bounds that use the computed values:
 *  vjp(vijp(g)) = g: vijp forms c = J_Gᵀ g_y2 and g_y1 = g_x1 − c; vjp forms the
 *    same c from the same g_y2 (bit for bit) and ḡ1 = g_y1 + c, so
 *    |ḡ1 − g_x1| <= u(|g_y1| + |ḡ1|); then J_Fᵀ ḡ1 differs from J_Fᵀ g_x1 by
 *    |J_F|ᵀ|ḡ1 − g_x1| plus both evaluations' rounding 2γ_(H+7)|J_F|ᵀ|g_x1|;
 *  inverse(forward(x)) = x: the inverse recomputes G(y1) from the same y1
 *    (bit for bit), so |x2' − x2| <= u(|y2| + |x2'|); F(x2') differs from
 *    F(x2) by <= |W_F||x2' − x2| (tanh′ <= 1) plus both evaluations'
 *    rounding, 2(γ_(H+1)(|W_F||x2| + |b_F|) + 4u|F|). */
START_TEST(identities)
{
    cfix c;
    cfix_init(&c, _i);
    layerfix *t = &c.t;
    const vijp_layer *L = t->L;
    double u = t->u, bound[N * NB];
    vijp_mat y, g2, Y, X2;
    vijp_mat_init(&y, N, NB, &t->F), vijp_mat_init(&g2, N, NB, &t->F);
    ck_assert(!vijp_layer_vijp(L, &t->thF, &t->XF, &t->GF, NULL, &y, NULL));
    ck_assert(!vijp_layer_vjp(L, &t->thF, &t->XF, &y, &g2, NULL));
    for (size_t b = 0; b < NB; b++) {
        const block *k = &c.k[b];
        double G[N], Yv[N], G2[N], e1[H], t1[H], a[H], r[H];
        col(&t->GF, b, G), col(&y, b, Yv), col(&g2, b, G2);
        for (size_t j = 0; j < H; j++) e1[j] = u * (fabs(Yv[j]) + fabs(G2[j]));
        for (size_t j = 0; j < H; j++) t1[j] = k->fF[j] * e1[j];
        absmul(k->W[0], t1, a, 1); /* |J_F|ᵀ|ḡ1 − g_x1| */
        for (size_t j = 0; j < H; j++) t1[j] = k->fF[j] * fabs(G[j]);
        absmul(k->W[0], t1, r, 1); /* |J_F|ᵀ|g_x1| */
        for (size_t j = 0; j < H; j++)
            bound[j + b * N] = e1[j],
                 bound[H + j + b * N] = a[j] + 2 * gam(H + 7, u) * r[j] + u * (fabs(Yv[H + j]) + fabs(G2[H + j]));
    }
    check("vjp(vijp(g)) - g", _i, &g2, &t->GF, bound);

    vijp_mat_init(&Y, N, NB, &t->F), vijp_mat_init(&X2, N, NB, &t->F);
    ck_assert(!vijp_layer_forward(L, &t->thF, &t->XF, &Y, NULL));
    ck_assert(!vijp_layer_inverse(L, &t->thF, &Y, &X2, NULL));
    for (size_t b = 0; b < NB; b++) {
        const block *k = &c.k[b];
        double e2[H], a[H], ax[H];
        for (size_t j = 0; j < H; j++) e2[j] = u * (fabs(k->y2[j]) + fabs(k->x2[j]));
        absmul(k->W[0], e2, a, 0);
        absmul(k->W[0], k->x2, ax, 0);
        for (size_t j = 0; j < H; j++)
            bound[H + j + b * N] = e2[j],
                 bound[j + b * N] = a[j] + 2 * (gam(H + 1, u) * (ax[j] + fabs(k->b[0][j])) + 4 * u * fabs(k->F[j])) +
                                    u * (fabs(k->y1[j]) + fabs(k->x1[j]));
    }
    check("inverse(forward(x)) - x", _i, &X2, &t->XF, bound);
    vijp_mat_clear(&y), vijp_mat_clear(&g2), vijp_mat_clear(&Y), vijp_mat_clear(&X2);
    layerfix_clear(t);
}
END_TEST

/* A depth-64 RevNet stack (additive blocks, width 8, Gaussian weights) in
 * double: the reversible engine rebuilds every block's input from h_64 down.
 * With ε_k the error of the rebuilt h_k (ε_64 = 0), inverting block k at
 * ĥ_k = h_k + ε_k gives, componentwise (the forward's own roundings are
 * those of inverse(forward(x)) above, each evaluation of F or G now at a
 * different point):
 *   e_x2 = |ε_2| + |W_G||ε_1| + 2(γ_(H+1)(|W_G||y1| + |b_G|) + 4u|G|) + u(|y2| + |x2|),
 *   e_x1 = |ε_1| + |W_F| e_x2 + 2(γ_(H+1)(|W_F||x2| + |b_F|) + 4u|F|) + u(|y1| + |x1|),
 * and the diagnostic's ‖h_k − ĥ_k‖/‖h_k‖ must stay below 1.1‖e‖/‖h_k‖. */
START_TEST(revnet_reconstruction_depth_64)
{
    enum { D = 64 };
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "additive", D, N, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, test_seed(), NULL));
    vijp_mat th[D], X;
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    double x[N * NB], t[N * NB];
    vijp_net_sample(&net, NB, test_seed() + 1, x, t);
    vijp_mat_init(&X, N, NB, &F), vijp_mat_set_d(&X, x);
    vijp_xnum reconx[D];
    double recon[D];
    vijp_error err = {0};
    ck_assert_msg(!vijp_reversible_reconstruction(&net, th, &X, reconx, &err), "%s", err.msg);
    for (size_t i = 0; i < D; i++) recon[i] = vijp_xnum_double(reconx[i]); /* double and binary32 errors: doubles */
    /* the forward activations, every block's values and bounds */
    double (*h)[N * NB] = malloc((D + 1) * sizeof *h), u = ldexp(1, -53);
    block *k = malloc((size_t)D * NB * sizeof *k);
    memcpy(h[0], x, sizeof x);
    for (size_t l = 0; l < D; l++) {
        vijp_mat A, Bm;
        vijp_mat_init(&A, N, NB, &F), vijp_mat_init(&Bm, N, NB, &F), vijp_mat_set_d(&A, h[l]);
        ck_assert(!vijp_layer_forward(&net.layers[l], &th[l], &A, &Bm, NULL));
        memcpy(h[l + 1], Bm.d, sizeof h[l + 1]);
        for (size_t b = 0; b < NB; b++) block_eval(&k[l * NB + b], net.theta[l], h[l] + b * N, u);
        vijp_mat_clear(&A), vijp_mat_clear(&Bm);
    }
    double eps[N * NB] = {0}, worst = 0, last = 0;
    for (size_t l = D; l-- > 0;) {
        double e[N * NB], ne = 0, nh = 0;
        for (size_t b = 0; b < NB; b++) {
            const block *kb = &k[l * NB + b];
            double *ep = eps + b * N, *eo = e + b * N, a[H], c[H];
            absmul(kb->W[1], ep, a, 0);
            absmul(kb->W[1], kb->y1, c, 0);
            for (size_t j = 0; j < H; j++)
                eo[H + j] = fabs(ep[H + j]) + a[j] + 2 * (gam(H + 1, u) * (c[j] + fabs(kb->b[1][j])) + 4 * u * fabs(kb->G[j])) +
                            u * (fabs(kb->y2[j]) + fabs(kb->x2[j]));
            absmul(kb->W[0], eo + H, a, 0);
            absmul(kb->W[0], kb->x2, c, 0);
            for (size_t j = 0; j < H; j++)
                eo[j] = fabs(ep[j]) + a[j] + 2 * (gam(H + 1, u) * (c[j] + fabs(kb->b[0][j])) + 4 * u * fabs(kb->F[j])) +
                        u * (fabs(kb->y1[j]) + fabs(kb->x1[j]));
        }
        for (size_t j = 0; j < N * NB; j++) ne += e[j] * e[j], nh += h[l][j] * h[l][j], eps[j] = e[j];
        double bound = 1.1 * sqrt(ne / nh);
        ck_assert_msg(recon[l] <= bound, "RevNet depth %d: h_%zu rebuilt with error %g > bound %g", D, l, recon[l], bound);
        worst = fmax(worst, recon[l] / bound), last = recon[l];
    }
    printf("# RevNet width %d depth %d, double: h_0 rebuilt with relative error %.3g; worst %.2f of the bound\n", N, D,
           last, worst);
    free(h), free(k);
    vijp_net_params_clear(&net, th);
    vijp_mat_clear(&X);
    vijp_net_free(&net);
}
END_TEST

/* ---- affine coupling (Glow/RealNVP), S = T = dense:H + tanh ----
 * Forward, componentwise: z_S = W_S x1 + b_S within γ_(H+1)(|W_S||x1| + |b_S|),
 * a = tanh(z_S) within that plus 4u|a|; the scale s = σ(a + 2) (|σ′| <= 1/4,
 * f within 7u: src/kernels/ref/dual.c) within e_a/4 + u|a + 2|/4 + 7u·s, or
 * s = exp(a) within s·e_a + 2u·s; t = tanh(z_T) within its γ term + 4u|t|;
 * y2 = fl(fl(x2·s) + t) within |x2|e_s + u|x2·s| + e_t + u|y2|; y1 = x1 exactly.
 * Identities (the same computations repeat bit for bit):
 *  vjp(vijp(g)): g_y2 = fl(g_x2/s), then fl(g_y2·s): within 2u|g_x2|; c(g_y2)
 *    is formed by the same code in both, so g_x1 comes back within
 *    u(|g_y1| + |g_x1'|);
 *  inverse(forward(x)): y1 = x1 gives the same s and t bits, and
 *    x2' = fl(fl(y2 − t)/s) is within 3u|x2| + u|y2|/s. */
static void affine_forward_bound(const vijp_layer *L, const double *th, const double *x, double u, double *e)
{
    double xs[H], ts[H], a[H], t[H], ax[H];
    const double *WS = th, *bS = th + H * H, *WT = th + H * H + H, *bT = th + 2 * H * H + H;
    mul(WS, x, a, 0), absmul(WS, x, ax, 0);
    for (size_t i = 0; i < H; i++) xs[i] = gam(H + 1, u) * (ax[i] + fabs(bS[i])), a[i] = tanh(a[i] + bS[i]);
    mul(WT, x, t, 0), absmul(WT, x, ax, 0);
    for (size_t i = 0; i < H; i++) ts[i] = gam(H + 1, u) * (ax[i] + fabs(bT[i])), t[i] = tanh(t[i] + bT[i]);
    for (size_t i = 0; i < H; i++) {
        double ea = xs[i] + 4 * u * fabs(a[i]), s, es;
        if (vijp_affine_exp_scale(L)) s = exp(a[i]), es = s * ea + 2 * u * s;
        else s = 1 / (1 + exp(-(a[i] + 2))), es = 0.25 * (ea + u * fabs(a[i] + 2)) + 7 * u * s;
        double x2 = x[H + i], y2 = x2 * s + t[i];
        e[i] = 0;
        e[H + i] = fabs(x2) * es + u * fabs(x2 * s) + ts[i] + 4 * u * fabs(t[i]) + u * fabs(y2);
    }
}

START_TEST(affine_coupling)
{
    static const char *const specs[] = {"affine", "affine:exp"};
    const char *spec = specs[_i / 2];
    layerfix t;
    layerfix_init(&t, spec, N, formats[_i % 2], NB, test_seed() + 5 * (uint64_t)_i);
    const vijp_layer *L = t.L;
    double u = t.u, bound[N * NB], th[2 * (H * H + H)];
    ck_assert_uint_eq(t.thR.rows, 2 * (H * H + H));
    for (size_t j = 0; j < t.thR.rows; j++) th[j] = vijp_mat_get_d(&t.thR, j);
    vijp_mat A, R, g2, Y, X2;
    vijp_mat_init(&A, N, NB, &t.F), vijp_mat_init(&R, N, NB, &t.R);
    /* forward against the oracle */
    ck_assert(!vijp_layer_forward(L, &t.thF, &t.XF, &A, NULL) && !vijp_layer_forward(L, &t.thR, &t.XR, &R, NULL));
    for (size_t b = 0; b < NB; b++) {
        double x[N];
        affine_forward_bound(L, th, col(&t.XR, b, x), u, bound + b * N);
    }
    check(spec, _i, &A, &R, bound);
    /* vjp(vijp(g)) = g */
    vijp_mat_init(&g2, N, NB, &t.F);
    ck_assert(!vijp_layer_vijp(L, &t.thF, &t.XF, &t.GF, NULL, &A, NULL));
    ck_assert(!vijp_layer_vjp(L, &t.thF, &t.XF, &A, &g2, NULL));
    for (size_t b = 0; b < NB; b++) {
        double G[N], Yv[N], G2[N];
        col(&t.GF, b, G), col(&A, b, Yv), col(&g2, b, G2);
        for (size_t j = 0; j < H; j++)
            bound[j + b * N] = u * (fabs(Yv[j]) + fabs(G2[j])), bound[H + j + b * N] = 2 * u * fabs(G[H + j]);
    }
    check("affine vjp(vijp(g)) - g", _i, &g2, &t.GF, bound);
    /* inverse(forward(x)) = x */
    vijp_mat_init(&Y, N, NB, &t.F), vijp_mat_init(&X2, N, NB, &t.F);
    ck_assert(!vijp_layer_forward(L, &t.thF, &t.XF, &Y, NULL));
    ck_assert(!vijp_layer_inverse(L, &t.thF, &Y, &X2, NULL));
    for (size_t b = 0; b < NB; b++) {
        double x[N], y[N], e[N];
        col(&t.XR, b, x), col(&Y, b, y);
        affine_forward_bound(L, th, x, 0, e); /* u = 0: just to get s below */
        for (size_t j = 0; j < H; j++) {
            double a = th[H * H + j], z = 0;
            for (size_t k = 0; k < H; k++) z += th[j + k * H] * x[k];
            a = tanh(z + a);
            double s = vijp_affine_exp_scale(L) ? exp(a) : 1 / (1 + exp(-(a + 2)));
            bound[j + b * N] = 0, bound[H + j + b * N] = 3 * u * fabs(x[H + j]) + u * fabs(y[H + j]) / s;
        }
    }
    check("affine inverse(forward(x)) - x", _i, &X2, &t.XF, bound);
    vijp_mat_clear(&A), vijp_mat_clear(&R), vijp_mat_clear(&g2), vijp_mat_clear(&Y), vijp_mat_clear(&X2);
    layerfix_clear(&t);
}
END_TEST

/* jvp and vjp of the affine block in the format against the oracle, with
 * the chain bounds above (jvp_err, vjp_err for S and T in place of F and G)
 * and the scale's: s within e_s (above); s′ = σ(z)σ(−z) within 12u·s′ plus
 * |σ″|·e_z, |σ″| < 0.1 (exp: s′ = s).  Products add 2u, sums u. */
START_TEST(affine_jvp_vjp_vs_oracle)
{
    static const char *const specs[] = {"affine", "affine:exp"};
    layerfix t;
    layerfix_init(&t, specs[_i / 2], N, formats[_i % 2], NB, test_seed() + 7 * (uint64_t)_i);
    const vijp_layer *L = t.L;
    double u = t.u, th[2 * (H * H + H)], bv[N * NB], bw[N * NB];
    for (size_t j = 0; j < t.thR.rows; j++) th[j] = vijp_mat_get_d(&t.thR, j);
    vijp_mat VF, VR, WF, WR;
    vijp_mat_init(&VF, N, NB, &t.F), vijp_mat_init(&VR, N, NB, &t.R), vijp_mat_init(&WF, N, NB, &t.F), vijp_mat_init(&WR, N, NB, &t.R);
    ck_assert(!vijp_layer_jvp(L, &t.thF, &t.XF, &t.UF, &VF, NULL) && !vijp_layer_jvp(L, &t.thR, &t.XR, &t.UR, &VR, NULL));
    ck_assert(!vijp_layer_vjp(L, &t.thF, &t.XF, &t.GF, &WF, NULL) && !vijp_layer_vjp(L, &t.thR, &t.XR, &t.GR, &WR, NULL));
    for (size_t b = 0; b < NB; b++) {
        double x[N], U[N], G[N], zero[H] = {0};
        col(&t.XR, b, x), col(&t.UR, b, U), col(&t.GR, b, G);
        /* the chains S (slot 0) and T (slot 1), both from x1 */
        block k;
        double ax[H];
        for (int c = 0; c < 2; c++) {
            memcpy(k.W[c], th + c * (H * H + H), H * H * sizeof(double));
            memcpy(k.b[c], th + c * (H * H + H) + H * H, H * sizeof(double));
            double z[H];
            mul(k.W[c], x, z, 0), absmul(k.W[c], x, ax, 0);
            for (size_t i = 0; i < H; i++) {
                double a = tanh(z[i] + k.b[c][i]);
                (c ? k.fG : k.fF)[i] = 1 - a * a;
                (c ? k.dzG : k.dzF)[i] = gam(H + 1, u) * (ax[i] + fabs(k.b[c][i]));
                if (!c) k.F[i] = a;
            }
        }
        double s[H], es[H], ds[H], eds[H];
        for (size_t i = 0; i < H; i++) {
            double ea = k.dzF[i] + 4 * u * fabs(k.F[i]);
            if (vijp_affine_exp_scale(L)) s[i] = ds[i] = exp(k.F[i]), es[i] = eds[i] = s[i] * ea + 2 * u * s[i];
            else {
                double z = k.F[i] + 2, ez = ea + u * fabs(z);
                s[i] = 1 / (1 + exp(-z)), ds[i] = s[i] * (1 - s[i]);
                es[i] = 0.25 * ez + 7 * u * s[i], eds[i] = 12 * u * ds[i] + 0.1 * ez;
            }
        }
        /* jvp */
        double JSu[H], JTu[H], eS[H], eT[H];
        jvp_err(&k, 0, U, zero, u, eS), jvp_err(&k, 1, U, zero, u, eT);
        mul(k.W[0], U, JSu, 0), mul(k.W[1], U, JTu, 0);
        for (size_t i = 0; i < H; i++) {
            JSu[i] *= k.fF[i], JTu[i] *= k.fG[i];
            double x2 = x[H + i], t2 = x2 * ds[i] * JSu[i], v2 = U[H + i] * s[i] + t2 + JTu[i];
            double e2 = fabs(x2) * (eds[i] * fabs(JSu[i]) + ds[i] * eS[i]) + 2 * u * fabs(t2);
            bv[i + b * N] = 0;
            bv[H + i + b * N] = fabs(U[H + i]) * es[i] + u * fabs(U[H + i] * s[i]) + e2 + eT[i] +
                                u * (fabs(U[H + i] * s[i] + t2) + fabs(v2));
        }
        /* vjp */
        double w[H], ew[H], c1[H], c2[H], e1[H], e3[H];
        for (size_t i = 0; i < H; i++) {
            double x2 = x[H + i];
            w[i] = G[H + i] * x2 * ds[i];
            ew[i] = fabs(G[H + i] * x2) * eds[i] + 2 * u * fabs(w[i]);
        }
        vjp_err(&k, 0, w, ew, u, e1), vjp_err(&k, 1, G + H, zero, u, e3);
        for (size_t i = 0; i < H; i++) c1[i] = k.fF[i] * w[i], c2[i] = k.fG[i] * G[H + i];
        double a1[H], a2[H];
        mul(k.W[0], c1, a1, 1), mul(k.W[1], c2, a2, 1);
        for (size_t i = 0; i < H; i++) {
            double c = a1[i] + a2[i];
            bw[i + b * N] = e1[i] + e3[i] + u * fabs(c) + u * fabs(G[i] + c);
            bw[H + i + b * N] = fabs(G[H + i]) * es[i] + u * fabs(G[H + i] * s[i]);
        }
    }
    check("affine jvp", _i, &VF, &VR, bv);
    check("affine vjp", _i, &WF, &WR, bw);
    check_adjoint("affine", _i, &t, &VF, &WF, bv, bw);
    /* vjp_param: θ_S from x1 (exact) and the dense cotangent f′_S ⊙ w,
     * w = g_y2 ⊙ x2 ⊙ s′; θ_T from x1 and f′_T ⊙ g_y2: each entry a batch sum
     * of such a cotangent (times x1 for W), within its propagated error plus
     * γ_(NB+1) of the sum of magnitudes. */
    size_t P = t.thR.rows, PS = P / 2;
    double *bp = calloc(P, sizeof *bp);
    vijp_mat PF, PR;
    vijp_mat_init(&PF, P, 1, &t.F), vijp_mat_init(&PR, P, 1, &t.R);
    ck_assert(!vijp_layer_vjp_param(L, &t.thF, &t.XF, &t.GF, &PF, NULL) &&
              !vijp_layer_vjp_param(L, &t.thR, &t.XR, &t.GR, &PR, NULL));
    for (size_t b = 0; b < NB; b++) {
        double x[N], G[N], ax[H];
        col(&t.XR, b, x), col(&t.GR, b, G);
        double zS[H], zT[H], fS[H], fT[H], dzS[H], dzT[H];
        mul(th, x, zS, 0), mul(th + PS, x, zT, 0);
        absmul(th, x, ax, 0);
        for (size_t i = 0; i < H; i++) dzS[i] = gam(H + 1, u) * (ax[i] + fabs(th[H * H + i]));
        absmul(th + PS, x, ax, 0);
        for (size_t i = 0; i < H; i++) {
            dzT[i] = gam(H + 1, u) * (ax[i] + fabs(th[PS + H * H + i]));
            double a = tanh(zS[i] + th[H * H + i]), c = tanh(zT[i] + th[PS + H * H + i]);
            fS[i] = 1 - a * a, fT[i] = 1 - c * c;
            double ea = dzS[i] + 4 * u * fabs(a), sc, ds, eds;
            if (vijp_affine_exp_scale(L)) sc = ds = exp(a), eds = sc * ea + 2 * u * sc;
            else {
                double z = a + 2, ez = ea + u * fabs(z);
                sc = 1 / (1 + exp(-z)), ds = sc * (1 - sc), eds = 12 * u * ds + 0.1 * ez;
            }
            double w = G[H + i] * x[H + i] * ds, ew = fabs(G[H + i] * x[H + i]) * eds + 2 * u * fabs(w);
            double tS = fS[i] * w, etS = TANH2 * dzS[i] * fabs(w) + fS[i] * ew + 7 * u * fabs(tS);
            double tT = fT[i] * G[H + i], etT = TANH2 * dzT[i] * fabs(G[H + i]) + 7 * u * fabs(tT);
            for (size_t j = 0; j < H; j++) {
                bp[i + j * H] += etS * fabs(x[j]) + gam(NB + 1, u) * fabs(tS * x[j]);
                bp[PS + i + j * H] += etT * fabs(x[j]) + gam(NB + 1, u) * fabs(tT * x[j]);
            }
            bp[H * H + i] += etS + gam(NB + 1, u) * fabs(tS);
            bp[PS + H * H + i] += etT + gam(NB + 1, u) * fabs(tT);
        }
    }
    check("affine vjp_param", _i, &PF, &PR, bp);
    free(bp);
    vijp_mat_clear(&PF), vijp_mat_clear(&PR);
    vijp_mat_clear(&VF), vijp_mat_clear(&VR), vijp_mat_clear(&WF), vijp_mat_clear(&WR);
    layerfix_clear(&t);
}
END_TEST

/* The oracle's jvp at 256 bits against central differences of its forward
 * at 2048 bits (h = 2^-300): each of the ~100 operations errs by 2^-256
 * relative with conditions below 1e3, so 2^-230·(1 + |v|) bounds the
 * difference, and a wrong derivative formula misses it by ~2^200. */
START_TEST(affine_oracle_derivative)
{
    static const char *const specs[] = {"affine", "affine:exp+dense:4+tanh", "additive", "additive:conv1d:1x3+tanh"};
    layerfix t;
    layerfix_init(&t, specs[_i], N, "mpfr:256", NB, test_seed() + 99 + (uint64_t)_i);
    vijp_format Hf;
    ck_assert(!vijp_format_mpfr(&Hf, 2048, NULL));
    vijp_mat th, Xp, Xm, Yp, Ym, V;
    vijp_mat_init(&th, t.thR.rows, 1, &Hf), vijp_mat_convert(&th, &t.thR);
    vijp_mat_init(&Xp, N, NB, &Hf), vijp_mat_init(&Xm, N, NB, &Hf), vijp_mat_init(&Yp, N, NB, &Hf), vijp_mat_init(&Ym, N, NB, &Hf);
    for (size_t i = 0; i < N * NB; i++) {
        mpfr_mul_2si(Xp.m[i], t.UR.m[i], -300, MPFR_RNDN);
        mpfr_sub(Xm.m[i], t.XR.m[i], Xp.m[i], MPFR_RNDN);
        mpfr_add(Xp.m[i], t.XR.m[i], Xp.m[i], MPFR_RNDN);
    }
    ck_assert(!vijp_layer_forward(t.L, &th, &Xp, &Yp, NULL) && !vijp_layer_forward(t.L, &th, &Xm, &Ym, NULL));
    vijp_mat_init(&V, N, NB, &t.F);
    ck_assert(!vijp_layer_jvp(t.L, &t.thF, &t.XF, &t.UF, &V, NULL));
    double bound[N * NB];
    for (size_t i = 0; i < N * NB; i++) {
        mpfr_sub(Yp.m[i], Yp.m[i], Ym.m[i], MPFR_RNDN);
        mpfr_mul_2si(Yp.m[i], Yp.m[i], 299, MPFR_RNDN);
        bound[i] = ldexp(1, -230) * (1 + absval(&V, i));
    }
    double r = ratio_to_bound(&V, &Yp, bound);
    ck_assert_msg(r <= 1, "%s: the oracle's jvp differs from finite differences at %g of the bound", specs[_i], r);
    vijp_mat *all[] = {&th, &Xp, &Xm, &Yp, &Ym, &V};
    for (size_t i = 0; i < 6; i++) vijp_mat_clear(all[i]);
    layerfix_clear(&t);
}
END_TEST

/* inv1x1's log-determinant (C additions) against LAPACK's LU of its dense
 * Jacobian: log|det J| = Σ log|U_ii|.  dgetrf's backward error γ_(3n)|L||U|
 * (Higham Thm 9.3) moves each log|U_ii| by at most κ(J)·γ_(3n)·(n growth),
 * below 1e-11 here where κ(J) < 1e3 (checked). */
START_TEST(inv1x1_logdet)
{
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "inv1x1:4", 1, 12, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, test_seed(), NULL));
    const vijp_layer *L = &net.layers[0];
    double x[12] = {0}, J[144], smax, smin;
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat th = {.rows = 16, .cols = 1, .fmt = &fd, .d = net.theta[0]}, xm = {.rows = 12, .cols = 1, .fmt = &fd, .d = x},
             Jm = {.rows = 12, .cols = 12, .fmt = &fd, .d = J};
    ck_assert(!vijp_layer_jacobian(L, &th, &xm, &Jm, NULL));
    sv_range(J, 12, 12, &smax, &smin);
    ck_assert_msg(smax / smin < 1e3, "kappa %g", smax / smin);
    lapack_int piv[12];
    ck_assert(!LAPACKE_dgetrf(LAPACK_COL_MAJOR, 12, 12, J, 12, piv));
    double ld = 0;
    for (int i = 0; i < 12; i++) ld += log(fabs(J[i + i * 12]));
    double mine = vijp_inv1x1_logdet(L, net.theta[0]);
    ck_assert_msg(fabs(mine - ld) <= 1e-11, "logdet %.17g, LU %.17g", mine, ld);
    vijp_net_free(&net);
}
END_TEST

/* The dense Jacobian's columns are the jvp of the unit vectors, bit for bit
 * (the operator is built that way; this checks its layout), in double and
 * at 256 bits, for every coupling block and sub-network kind. */
START_TEST(jacobian_columns)
{
    static const char *const specs[] = {"additive", "affine", "affine:exp+dense:4+leaky:0.5",
                                        "additive:conv1d:1x3:circular+tanh"};
    layerfix t;
    layerfix_init(&t, specs[_i / 2], N, formats[_i % 2], 1, test_seed() + 3 * (uint64_t)_i);
    vijp_mat J, E, Xr, V;
    vijp_mat_init(&J, N, N, &t.F), vijp_mat_init(&E, N, N, &t.F), vijp_mat_init(&Xr, N, N, &t.F), vijp_mat_init(&V, N, N, &t.F);
    for (size_t j = 0; j < N; j++) vijp_mat_set_entry_d(&E, j + j * N, 1), vijp_mat_copy_range(&Xr, j * N, &t.XF, 0, N);
    ck_assert(!vijp_layer_jacobian(t.L, &t.thF, &t.XF, &J, NULL));
    ck_assert(!vijp_layer_jvp(t.L, &t.thF, &Xr, &E, &V, NULL));
    double zero[N * N] = {0};
    ck_assert_msg(ratio_to_bound(&J, &V, zero) == 0, "%s %s: Jacobian differs from the jvp columns", specs[_i / 2], formats[_i % 2]);
    vijp_mat_clear(&J), vijp_mat_clear(&E), vijp_mat_clear(&Xr), vijp_mat_clear(&V);
    layerfix_clear(&t);
}
END_TEST

Suite *suite_coupling(void)
{
    Suite *s = suite_create("coupling");
    TCase *tc = tcase_create("additive");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, operators_vs_oracle, 0, 6);
    tcase_add_loop_test(tc, identities, 0, 6);
    tcase_add_test(tc, revnet_reconstruction_depth_64);
    tcase_add_loop_test(tc, affine_coupling, 0, 4);
    tcase_add_loop_test(tc, affine_oracle_derivative, 0, 4);
    tcase_add_loop_test(tc, affine_jvp_vjp_vs_oracle, 0, 4);
    tcase_add_test(tc, inv1x1_logdet);
    tcase_add_loop_test(tc, jacobian_columns, 0, 8);
    suite_add_tcase(s, tc);
    return s;
}
