/* Oracles of LayerNorm (no affine, no ε) and softmax, per sample (column),
 * each operation rounded in the format; contracts and formulas as in
 * src/layers/layernorm.c and softmax.c, written again in MPFR: sums in index
 * order, the Jacobian entry by entry from its definition. */
#include "oracles.h"
#include "vijp/arith.h"

/* ---- LayerNorm: ŷ = (x − μ)/σ, J = (I − 11ᵀ/n − ŷŷᵀ/n)/σ ---- */

/* ŷ of one sample into yh (n values), σ into sigma (0 for a constant sample). */
static void ln_normalize(mpfr_t *x, size_t n, mpfr_t *yh, mpfr_t sigma, const vijp_format *f)
{
    mpfr_t mu, t, nn;
    mpfr_inits2(f->prec, mu, t, nn, (mpfr_ptr)0);
    vo_set_si(nn, (long)n, f);
    mpfr_set_zero(mu, 1);
    for (size_t i = 0; i < n; i++) vo_add(mu, mu, x[i], f);
    vo_div(mu, mu, nn, f);
    mpfr_set_zero(t, 1);
    for (size_t i = 0; i < n; i++) vo_sub(yh[i], x[i], mu, f), vo_fma(t, yh[i], yh[i], t, f);
    vo_div(t, t, nn, f), vo_sqrt(sigma, t, f);
    for (size_t i = 0; i < n; i++)
        if (mpfr_zero_p(sigma)) mpfr_set_zero(yh[i], 1);
        else vo_div(yh[i], yh[i], sigma, f);
    mpfr_clears(mu, t, nn, (mpfr_ptr)0);
}

void vo_layernorm_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t b = 0; b < B; b++) ln_normalize(X + b * L->in, L->in, Y + b * L->in, s, f);
    mpfr_clear(s);
}

/* v = u − mean(u) − ŷ·mean(ŷ⊙u) (the projection off span{1, ŷ}). */
static void ln_project(mpfr_t *yh, size_t n, mpfr_t *u, mpfr_t *v, const vijp_format *f)
{
    mpfr_t m1, my, nn, t;
    mpfr_inits2(f->prec, m1, my, nn, t, (mpfr_ptr)0);
    vo_set_si(nn, (long)n, f);
    mpfr_set_zero(m1, 1), mpfr_set_zero(my, 1);
    for (size_t i = 0; i < n; i++) vo_add(m1, m1, u[i], f), vo_fma(my, yh[i], u[i], my, f);
    vo_div(m1, m1, nn, f), vo_div(my, my, nn, f);
    for (size_t i = 0; i < n; i++) vo_sub(t, u[i], m1, f), vo_mul(v[i], yh[i], my, f), vo_sub(v[i], t, v[i], f);
    mpfr_clears(m1, my, nn, t, (mpfr_ptr)0);
}

/* V = P U / σ per sample (J is symmetric: also the vjp). */
void vo_layernorm_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *yh = vo_vec_new(n, f), s;
    mpfr_init2(s, f->prec);
    for (size_t b = 0; b < B; b++) {
        ln_normalize(X + b * n, n, yh, s, f);
        ln_project(yh, n, U + b * n, V + b * n, f);
        for (size_t i = 0; i < n; i++)
            if (mpfr_zero_p(s)) mpfr_set_zero(V[b * n + i], 1);
            else vo_div(V[b * n + i], V[b * n + i], s, f);
    }
    mpfr_clear(s);
    vo_vec_free(yh, n);
}

size_t vo_layernorm_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)L, (void)th, (void)X;
    return 2 * B;
}

/* c = (Σg, Σŷg)/√n per sample. */
void vo_layernorm_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                           const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *yh = vo_vec_new(n, f), s, rn;
    mpfr_inits2(f->prec, s, rn, (mpfr_ptr)0);
    vo_set_si(rn, (long)n, f), vo_sqrt(rn, rn, f);
    for (size_t b = 0; b < B; b++) {
        ln_normalize(X + b * n, n, yh, s, f);
        mpfr_set_zero(frag[2 * b], 1), mpfr_set_zero(frag[2 * b + 1], 1);
        for (size_t i = 0; i < n; i++)
            vo_add(frag[2 * b], frag[2 * b], Gy[b * n + i], f), vo_fma(frag[2 * b + 1], yh[i], Gy[b * n + i], frag[2 * b + 1], f);
        vo_div(frag[2 * b], frag[2 * b], rn, f), vo_div(frag[2 * b + 1], frag[2 * b + 1], rn, f);
    }
    mpfr_clears(s, rn, (mpfr_ptr)0);
    vo_vec_free(yh, n);
}

/* g_y = σ·P g_x + (c₁ + c₂ŷ)/√n. */
int vo_layernorm_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *yh = vo_vec_new(n, f), s, rn, t;
    mpfr_inits2(f->prec, s, rn, t, (mpfr_ptr)0);
    vo_set_si(rn, (long)n, f), vo_sqrt(rn, rn, f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        ln_normalize(X + b * n, n, yh, s, f);
        if (mpfr_zero_p(s)) {
            rc = VIJP_ESINGULAR;
            break;
        }
        ln_project(yh, n, Gx + b * n, Gy + b * n, f);
        for (size_t i = 0; i < n; i++) {
            vo_mul(Gy[b * n + i], Gy[b * n + i], s, f);
            vo_fma(t, frag[2 * b + 1], yh[i], frag[2 * b], f), vo_div(t, t, rn, f);
            vo_add(Gy[b * n + i], Gy[b * n + i], t, f);
        }
    }
    mpfr_clears(s, rn, t, (mpfr_ptr)0);
    vo_vec_free(yh, n);
    return rc;
}

/* J_ij = (δ_ij − 1/n − ŷ_iŷ_j/n)/σ, entry by entry. */
void vo_layernorm_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *yh = vo_vec_new(n, f), s, t, nn;
    mpfr_inits2(f->prec, s, t, nn, (mpfr_ptr)0);
    vo_set_si(nn, (long)n, f);
    ln_normalize(x, n, yh, s, f);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            mpfr_t *e = &J[i + j * n];
            if (mpfr_zero_p(s)) {
                mpfr_set_zero(*e, 1);
                continue;
            }
            vo_set_si(t, 1, f), vo_fma(t, yh[i], yh[j], t, f), vo_div(t, t, nn, f); /* (1 + ŷ_iŷ_j)/n */
            vo_set_si(*e, i == j, f), vo_sub(*e, *e, t, f), vo_div(*e, *e, s, f);
        }
    mpfr_clears(s, t, nn, (mpfr_ptr)0);
    vo_vec_free(yh, n);
}

int vo_layernorm_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *yh = vo_vec_new(n, f), s, rn;
    mpfr_inits2(f->prec, s, rn, (mpfr_ptr)0);
    ln_normalize(x, n, yh, s, f);
    vo_set_si(rn, (long)n, f), vo_sqrt(rn, rn, f);
    for (size_t i = 0; i < n; i++) vo_set_si(Q[i], 1, f), vo_div(Q[i], Q[i], rn, f), vo_div(Q[i + n], yh[i], rn, f);
    mpfr_clears(s, rn, (mpfr_ptr)0);
    vo_vec_free(yh, n);
    return 0;
}

/* ---- softmax: y = exp(x − max)/Σ, J = diag(y) − yyᵀ ---- */

static void sm_eval(mpfr_t *x, size_t n, mpfr_t *y, const vijp_format *f)
{
    mpfr_t mx, s;
    mpfr_inits2(f->prec, mx, s, (mpfr_ptr)0);
    vo_set(mx, x[0], f);
    for (size_t i = 1; i < n; i++)
        if (mpfr_cmp(x[i], mx) > 0) vo_set(mx, x[i], f);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < n; i++) vo_sub(y[i], x[i], mx, f), vo_exp(y[i], y[i], f), vo_add(s, s, y[i], f);
    for (size_t i = 0; i < n; i++) vo_div(y[i], y[i], s, f);
    mpfr_clears(mx, s, (mpfr_ptr)0);
}

void vo_softmax_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    for (size_t b = 0; b < B; b++) sm_eval(X + b * L->in, L->in, Y + b * L->in, f);
}

/* V = y ⊙ (U − ⟨y, U⟩). */
void vo_softmax_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *y = vo_vec_new(n, f), d, t;
    mpfr_inits2(f->prec, d, t, (mpfr_ptr)0);
    for (size_t b = 0; b < B; b++) {
        sm_eval(X + b * n, n, y, f);
        mpfr_set_zero(d, 1);
        for (size_t i = 0; i < n; i++) vo_fma(d, y[i], U[b * n + i], d, f);
        for (size_t i = 0; i < n; i++) vo_sub(t, U[b * n + i], d, f), vo_mul(V[b * n + i], y[i], t, f);
    }
    mpfr_clears(d, t, (mpfr_ptr)0);
    vo_vec_free(y, n);
}

size_t vo_softmax_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)L, (void)th, (void)X;
    return B;
}

void vo_softmax_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                         const vijp_format *f)
{
    (void)th, (void)X;
    size_t n = L->in;
    mpfr_t rn;
    mpfr_init2(rn, f->prec);
    vo_set_si(rn, (long)n, f), vo_sqrt(rn, rn, f);
    for (size_t b = 0; b < B; b++) {
        mpfr_set_zero(frag[b], 1);
        for (size_t i = 0; i < n; i++) vo_add(frag[b], frag[b], Gy[b * n + i], f);
        vo_div(frag[b], frag[b], rn, f);
    }
    mpfr_clear(rn);
}

/* g_y = g_x/y + t, t = (c√n − Σ g_x/y)/n. */
int vo_softmax_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                    const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *y = vo_vec_new(n, f), s, t, nn;
    mpfr_inits2(f->prec, s, t, nn, (mpfr_ptr)0);
    vo_set_si(nn, (long)n, f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        sm_eval(X + b * n, n, y, f);
        mpfr_set_zero(s, 1);
        for (size_t i = 0; i < n && !rc; i++) {
            if (mpfr_zero_p(y[i])) rc = VIJP_ESINGULAR; /* y_k underflowed: a larger cokernel */
            else vo_div(Gy[b * n + i], Gx[b * n + i], y[i], f), vo_add(s, s, Gy[b * n + i], f);
        }
        if (rc) break;
        vo_sqrt(t, nn, f), vo_mul(t, frag[b], t, f), vo_sub(t, t, s, f), vo_div(t, t, nn, f);
        for (size_t i = 0; i < n; i++) vo_add(Gy[b * n + i], Gy[b * n + i], t, f);
    }
    mpfr_clears(s, t, nn, (mpfr_ptr)0);
    vo_vec_free(y, n);
    return rc;
}

void vo_softmax_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    size_t n = L->in;
    mpfr_t *y = vo_vec_new(n, f), t;
    mpfr_init2(t, f->prec);
    sm_eval(x, n, y, f);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            vo_mul(t, y[i], y[j], f);
            if (i == j) vo_sub(J[i + j * n], y[i], t, f);
            else vo_neg(J[i + j * n], t, f);
        }
    mpfr_clear(t);
    vo_vec_free(y, n);
}

int vo_softmax_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)th, (void)x;
    mpfr_t rn;
    mpfr_init2(rn, f->prec);
    vo_set_si(rn, (long)L->in, f), vo_sqrt(rn, rn, f);
    for (size_t i = 0; i < L->in; i++) vo_set_si(Q[i], 1, f), vo_div(Q[i], Q[i], rn, f);
    mpfr_clear(rn);
    return 0;
}
