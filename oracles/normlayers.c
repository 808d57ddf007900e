/* Oracles of layernorm with arguments, layernorm[:N][:eps=E][:affine]
 * (src/layers/layernorm_runs.c, which derives the formulas), each operation
 * rounded in the format: per run of N units, sums in index order,
 *   ŷ = (x − μ)/s, s = √(σ² + ε), y = w ⊙ ŷ + b,
 *   J = D·J0, J0 = (C − ŷŷᵀ/N)/s (entry by entry from its definition),
 *   cokernel D⁻¹·span{1} (ε > 0) or D⁻¹·span{1, ŷ} (ε = 0), Gram–Schmidt,
 *   vijp g_y = (I − QQᵀ)·D⁻¹·J0⁺g_x + Qc. */
#include "norm.h"
#include "vijp/arith.h"
#include <stdlib.h>

#define A_(L) ((const vo_layernorm_args *)(L)->state)

static size_t per_run(const vijp_layer *L) { return A_(L)->eps > 0 ? 1 : 2; }

/* θ's weights: one per unit of a run (layernorm), one per channel (groupnorm). */
static size_t n_weights(const vijp_layer *L) { return A_(L)->channels ? A_(L)->channels : A_(L)->run; }

/* Unit i of run r (runs counted over the batch) is scaled by weight q. */
static size_t weight_at(const vijp_layer *L, size_t r, size_t i)
{
    size_t unit = (r * A_(L)->run + i) % L->in; /* within its sample */
    return A_(L)->channels ? unit / (L->in / A_(L)->channels) : i;
}

/* The weight of unit i of run r in the format (1 without affine). */
static void weight_of(const vijp_layer *L, mpfr_t *th, size_t r, size_t i, mpfr_t w, const vijp_format *f)
{
    if (A_(L)->affine) vo_set(w, th[weight_at(L, r, i)], f);
    else vo_set_si(w, 1, f);
}

/* ŷ of one run into yh (N values) and s; s = 0 (and ŷ = 0) for a constant run at ε = 0. */
static void run_normalize(const vijp_layer *L, mpfr_t *x, mpfr_t *yh, mpfr_t s, const vijp_format *f)
{
    size_t N = A_(L)->run;
    mpfr_t mu, nn, e;
    mpfr_inits2(f->prec, mu, nn, e, (mpfr_ptr)0);
    vo_set_si(nn, (long)N, f), vo_set_d(e, A_(L)->eps, f);
    mpfr_set_zero(mu, 1);
    for (size_t i = 0; i < N; i++) vo_add(mu, mu, x[i], f);
    vo_div(mu, mu, nn, f);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < N; i++) vo_sub(yh[i], x[i], mu, f), vo_fma(s, yh[i], yh[i], s, f);
    vo_div(s, s, nn, f), vo_add(s, s, e, f), vo_sqrt(s, s, f);
    for (size_t i = 0; i < N; i++)
        if (mpfr_zero_p(s)) mpfr_set_zero(yh[i], 1);
        else vo_div(yh[i], yh[i], s, f);
    mpfr_clears(mu, nn, e, (mpfr_ptr)0);
}

void vo_lnr_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    size_t N = A_(L)->run;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_normalize(L, X + r * N, Y + r * N, s, f);
        if (A_(L)->affine)
            for (size_t i = 0; i < N; i++) {
                size_t q = weight_at(L, r, i);
                vo_fma(Y[r * N + i], th[q], Y[r * N + i], th[n_weights(L) + q], f);
            }
    }
    mpfr_clear(s);
}

/* v = (u − mean(u) − ŷ·mean(ŷ ⊙ u))/s: J0·u. */
static void j0_apply(size_t N, mpfr_t *yh, mpfr_t s, mpfr_t *u, mpfr_t *v, const vijp_format *f)
{
    mpfr_t m1, my, nn, t;
    mpfr_inits2(f->prec, m1, my, nn, t, (mpfr_ptr)0);
    vo_set_si(nn, (long)N, f);
    mpfr_set_zero(m1, 1), mpfr_set_zero(my, 1);
    for (size_t i = 0; i < N; i++) vo_add(m1, m1, u[i], f), vo_fma(my, yh[i], u[i], my, f);
    vo_div(m1, m1, nn, f), vo_div(my, my, nn, f);
    for (size_t i = 0; i < N; i++) {
        vo_sub(t, u[i], m1, f), vo_mul(v[i], yh[i], my, f), vo_sub(v[i], t, v[i], f);
        if (mpfr_zero_p(s)) mpfr_set_zero(v[i], 1);
        else vo_div(v[i], v[i], s, f);
    }
    mpfr_clears(m1, my, nn, t, (mpfr_ptr)0);
}

/* V = w ⊙ J0 U. */
void vo_lnr_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    size_t N = A_(L)->run;
    mpfr_t *yh = vo_vec_new(N, f), s, w;
    mpfr_inits2(f->prec, s, w, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_normalize(L, X + r * N, yh, s, f);
        j0_apply(N, yh, s, U + r * N, V + r * N, f);
        for (size_t i = 0; i < N; i++) weight_of(L, th, r, i, w, f), vo_mul(V[r * N + i], w, V[r * N + i], f);
    }
    mpfr_clears(s, w, (mpfr_ptr)0);
    vo_vec_free(yh, N);
}

/* Gx = J0 (w ⊙ Gy). */
void vo_lnr_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    size_t N = A_(L)->run;
    mpfr_t *yh = vo_vec_new(N, f), *h = vo_vec_new(N, f), s, w;
    mpfr_inits2(f->prec, s, w, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_normalize(L, X + r * N, yh, s, f);
        for (size_t i = 0; i < N; i++) weight_of(L, th, r, i, w, f), vo_mul(h[i], w, Gy[r * N + i], f);
        j0_apply(N, yh, s, h, Gx + r * N, f);
    }
    mpfr_clears(s, w, (mpfr_ptr)0);
    vo_vec_free(yh, N), vo_vec_free(h, N);
}

void vo_lnr_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f)
{
    (void)th;
    size_t N = A_(L)->run;
    mpfr_t *yh = vo_vec_new(N, f), s;
    mpfr_init2(s, f->prec);
    size_t W = n_weights(L);
    for (size_t k = 0; k < 2 * W; k++) mpfr_set_zero(Gt[k], 1);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_normalize(L, X + r * N, yh, s, f);
        for (size_t i = 0; i < N; i++)
            vo_fma(Gt[weight_at(L, r, i)], Gy[r * N + i], yh[i], Gt[weight_at(L, r, i)], f),
                vo_add(Gt[W + weight_at(L, r, i)], Gt[W + weight_at(L, r, i)], Gy[r * N + i], f);
    }
    mpfr_clear(s);
    vo_vec_free(yh, N);
}

size_t vo_lnr_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th, (void)X;
    return per_run(L) * (L->in * B / A_(L)->run);
}

/* Q (N × k) of one run: Gram–Schmidt on 1/w, then on ŷ/w (ε = 0).  Nonzero: a zero weight or a zero vector. */
static int run_basis(const vijp_layer *L, mpfr_t *th, size_t r, mpfr_t *yh, mpfr_t *Q, const vijp_format *f)
{
    size_t N = A_(L)->run, k = per_run(L);
    mpfr_t w, t, nrm;
    mpfr_inits2(f->prec, w, t, nrm, (mpfr_ptr)0);
    int rc = 0;
    for (size_t j = 0; j < k && !rc; j++) {
        for (size_t i = 0; i < N && !rc; i++) {
            weight_of(L, th, r, i, w, f);
            if (mpfr_zero_p(w)) rc = VIJP_ESINGULAR;
            else if (j == 0) vo_set_si(Q[i], 1, f), vo_div(Q[i], Q[i], w, f);
            else vo_div(Q[N + i], yh[i], w, f);
        }
        if (rc) break;
        if (j == 1) { /* remove the q1 component */
            mpfr_set_zero(t, 1);
            for (size_t i = 0; i < N; i++) vo_fma(t, Q[i], Q[N + i], t, f);
            for (size_t i = 0; i < N; i++) vo_mul(w, t, Q[i], f), vo_sub(Q[N + i], Q[N + i], w, f);
        }
        mpfr_set_zero(nrm, 1);
        for (size_t i = 0; i < N; i++) vo_fma(nrm, Q[j * N + i], Q[j * N + i], nrm, f);
        vo_sqrt(nrm, nrm, f);
        if (mpfr_zero_p(nrm)) rc = VIJP_ESINGULAR;
        for (size_t i = 0; i < N && !rc; i++) vo_div(Q[j * N + i], Q[j * N + i], nrm, f);
    }
    mpfr_clears(w, t, nrm, (mpfr_ptr)0);
    return rc;
}

void vo_lnr_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *f)
{
    size_t N = A_(L)->run, k = per_run(L);
    mpfr_t *yh = vo_vec_new(N, f), *Q = vo_vec_new(2 * N, f), s;
    mpfr_init2(s, f->prec);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_normalize(L, X + r * N, yh, s, f);
        int bad = run_basis(L, th, r, yh, Q, f);
        for (size_t j = 0; j < k; j++) {
            mpfr_set_zero(frag[r * k + j], 1);
            for (size_t i = 0; i < N && !bad; i++) vo_fma(frag[r * k + j], Q[j * N + i], Gy[r * N + i], frag[r * k + j], f);
            if (bad) mpfr_set_nan(frag[r * k + j]);
        }
    }
    mpfr_clear(s);
    vo_vec_free(yh, N), vo_vec_free(Q, 2 * N);
}

/* z = J0⁺g: s·(Cg − ŷ·mean(ŷ ⊙ g)) at ε = 0 (the projection off span{1, ŷ}, ‖ŷ‖² = N);
 * s·(Cg + ŷ·(ŷᵀCg)·s²/(Nε)) at ε > 0 (Sherman–Morrison on 1^⊥). */
static void j0_pinv(const vijp_layer *L, mpfr_t *yh, mpfr_t s, mpfr_t *g, mpfr_t *z, const vijp_format *f)
{
    size_t N = A_(L)->run;
    mpfr_t m1, t, nn, e;
    mpfr_inits2(f->prec, m1, t, nn, e, (mpfr_ptr)0);
    vo_set_si(nn, (long)N, f);
    mpfr_set_zero(m1, 1);
    for (size_t i = 0; i < N; i++) vo_add(m1, m1, g[i], f);
    vo_div(m1, m1, nn, f);
    mpfr_set_zero(t, 1);
    for (size_t i = 0; i < N; i++) vo_sub(z[i], g[i], m1, f), vo_fma(t, yh[i], z[i], t, f);
    if (A_(L)->eps > 0) { /* t·s²/(Nε) */
        vo_set_d(e, A_(L)->eps, f), vo_mul(e, e, nn, f);
        vo_mul(t, t, s, f), vo_mul(t, t, s, f), vo_div(t, t, e, f);
        for (size_t i = 0; i < N; i++) vo_fma(z[i], yh[i], t, z[i], f), vo_mul(z[i], z[i], s, f);
    } else { /* −mean(ŷ ⊙ g): ŷᵀCg = ŷᵀg in exact arithmetic */
        vo_div(t, t, nn, f), vo_neg(t, t, f);
        for (size_t i = 0; i < N; i++) vo_fma(z[i], yh[i], t, z[i], f), vo_mul(z[i], z[i], s, f);
    }
    mpfr_clears(m1, t, nn, e, (mpfr_ptr)0);
}

int vo_lnr_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                const vijp_format *f)
{
    size_t N = A_(L)->run, k = per_run(L);
    mpfr_t *yh = vo_vec_new(N, f), *Q = vo_vec_new(2 * N, f), s, w, d;
    mpfr_inits2(f->prec, s, w, d, (mpfr_ptr)0);
    int rc = 0;
    for (size_t r = 0; r < L->in * B / N && !rc; r++) {
        mpfr_t *z = Gy + r * N;
        run_normalize(L, X + r * N, yh, s, f);
        if (mpfr_zero_p(s) || run_basis(L, th, r, yh, Q, f)) {
            rc = VIJP_ESINGULAR;
            break;
        }
        j0_pinv(L, yh, s, Gx + r * N, z, f);
        for (size_t i = 0; i < N; i++) weight_of(L, th, r, i, w, f), vo_div(z[i], z[i], w, f);
        for (size_t j = 0; j < k; j++) { /* z += Q(c − Qᵀz) */
            mpfr_set_zero(d, 1);
            for (size_t i = 0; i < N; i++) vo_fma(d, Q[j * N + i], z[i], d, f);
            vo_sub(d, frag[r * k + j], d, f);
            for (size_t i = 0; i < N; i++) vo_fma(z[i], Q[j * N + i], d, z[i], f);
        }
    }
    mpfr_clears(s, w, d, (mpfr_ptr)0);
    vo_vec_free(yh, N), vo_vec_free(Q, 2 * N);
    return rc;
}

/* J_ij = w_i(δ_ij − 1/N − ŷ_iŷ_j/N)/s inside a run, 0 across runs. */
void vo_lnr_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    size_t n = L->in, N = A_(L)->run;
    mpfr_t *yh = vo_vec_new(N, f), s, t, nn, w;
    mpfr_inits2(f->prec, s, t, nn, w, (mpfr_ptr)0);
    vo_set_si(nn, (long)N, f);
    for (size_t i = 0; i < n * n; i++) mpfr_set_zero(J[i], 1);
    for (size_t r = 0; r < n / N; r++) {
        run_normalize(L, x + r * N, yh, s, f);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                mpfr_t *e = &J[(r * N + i) + (r * N + j) * n];
                if (mpfr_zero_p(s)) continue;
                vo_set_si(t, 1, f), vo_fma(t, yh[i], yh[j], t, f), vo_div(t, t, nn, f);
                vo_set_si(*e, i == j, f), vo_sub(*e, *e, t, f), vo_div(*e, *e, s, f);
                weight_of(L, th, r, i, w, f), vo_mul(*e, w, *e, f);
            }
    }
    mpfr_clears(s, t, nn, w, (mpfr_ptr)0);
    vo_vec_free(yh, N);
}

int vo_lnr_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    size_t n = L->in, N = A_(L)->run, k = per_run(L), K = k * (n / N);
    mpfr_t *yh = vo_vec_new(N, f), *q = vo_vec_new(2 * N, f), s;
    mpfr_init2(s, f->prec);
    int rc = 0;
    for (size_t i = 0; i < n * K; i++) mpfr_set_zero(Q[i], 1);
    for (size_t r = 0; r < n / N && !rc; r++) {
        run_normalize(L, x + r * N, yh, s, f);
        rc = run_basis(L, th, r, yh, q, f);
        for (size_t j = 0; j < k && !rc; j++)
            for (size_t i = 0; i < N; i++) vo_set(Q[(r * N + i) + (r * k + j) * n], q[j * N + i], f);
    }
    mpfr_clear(s);
    vo_vec_free(yh, N), vo_vec_free(q, 2 * N);
    return rc;
}

/* J enclosed at a double point: every step an MPFI operation at 128 bits,
 * from x and θ exactly. */
int vo_lnr_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    size_t n = L->in, N = A_(L)->run;
    mpfi_t mu, s, t, *yh = vijp_alloc_array(N, sizeof *yh);
    mpfi_init2(mu, 128), mpfi_init2(s, 128), mpfi_init2(t, 128);
    for (size_t i = 0; i < N; i++) mpfi_init2(yh[i], 128);
    for (size_t i = 0; i < n * n; i++) mid[i] = rad[i] = 0;
    int rc = 0;
    for (size_t r = 0; r < n / N && !rc; r++) {
        const double *xr = x + r * N;
        mpfi_set_ui(mu, 0);
        for (size_t i = 0; i < N; i++) mpfi_add_d(mu, mu, xr[i]);
        mpfi_div_ui(mu, mu, (unsigned long)N);
        mpfi_set_ui(s, 0);
        for (size_t i = 0; i < N; i++) mpfi_d_sub(yh[i], xr[i], mu), mpfi_sqr(t, yh[i]), mpfi_add(s, s, t);
        mpfi_div_ui(s, s, (unsigned long)N), mpfi_add_d(s, s, A_(L)->eps), mpfi_sqrt(s, s);
        if (mpfi_has_zero(s)) rc = VIJP_ESINGULAR; /* a constant run at ε = 0: outside the domain */
        for (size_t i = 0; !rc && i < N; i++) mpfi_div(yh[i], yh[i], s);
        for (size_t j = 0; !rc && j < N; j++)
            for (size_t i = 0; i < N; i++) {
                mpfi_mul(t, yh[i], yh[j]), mpfi_add_ui(t, t, 1), mpfi_div_ui(t, t, (unsigned long)N);
                mpfi_ui_sub(t, i == j, t), mpfi_div(t, t, s);
                if (A_(L)->affine) mpfi_mul_d(t, t, th[weight_at(L, r, i)]);
                size_t at = (r * N + i) + (r * N + j) * n;
                vo_interval_mid_rad(t, &mid[at], &rad[at]);
            }
    }
    for (size_t i = 0; i < N; i++) mpfi_clear(yh[i]);
    mpfi_clear(mu), mpfi_clear(s), mpfi_clear(t);
    free(yh);
    return rc;
}
