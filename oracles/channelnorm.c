/* Oracles of actnorm and batchnorm in eval mode (src/layers/channelnorm.c),
 * each operation rounded in the format.  Both are y = k_c·x + h_c on the
 * units of channel c:
 *   actnorm    k = s_c, h = b_c;
 *   batchnorm  k = w_c/√(rv_c + ε) (w = 1 without affine), h = b_c − rm_c·k.
 * J = diag(k): the jvp and vjp multiply by k, the vijp divides by it, the
 * inverse takes (y − h)/k. */
#include "norm.h"
#include "vijp/arith.h"

#define A_(L) ((const vo_channel_args *)(L)->state)

/* k and h of channel c, in the format. */
static void scale_shift(const vijp_layer *L, mpfr_t *th, size_t c, mpfr_t k, mpfr_t h, const vijp_format *f)
{
    size_t C = A_(L)->channels;
    if (!A_(L)->batchnorm) {
        vo_set(k, th[c], f), vo_set(h, th[C + c], f);
        return;
    }
    size_t at = A_(L)->affine ? 2 * C : 0; /* running_mean, running_var after weight and bias */
    mpfr_t t;
    mpfr_init2(t, f->prec);
    vo_set_d(t, A_(L)->eps, f), vo_add(t, th[at + C + c], t, f), vo_sqrt(t, t, f);
    if (A_(L)->affine) vo_div(k, th[c], t, f);
    else vo_set_si(k, 1, f), vo_div(k, k, t, f);
    vo_mul(t, th[at + c], k, f);
    if (A_(L)->affine) vo_sub(h, th[C + c], t, f);
    else vo_neg(h, t, f);
    mpfr_clear(t);
}

/* What each operator does to unit i of channel c: 0 y = kx + h, 1 v = ku, 2 g = u/k, 3 x = (y − h)/k. */
static int per_unit(const vijp_layer *L, mpfr_t *th, mpfr_t *in, size_t B, mpfr_t *out, int op, const vijp_format *f)
{
    size_t C = A_(L)->channels, S = L->in / C;
    mpfr_t k, h;
    mpfr_inits2(f->prec, k, h, (mpfr_ptr)0);
    int rc = 0;
    for (size_t c = 0; c < C && !rc; c++) {
        scale_shift(L, th, c, k, h, f);
        if (op >= 2 && mpfr_zero_p(k)) rc = VIJP_ESINGULAR;
        for (size_t b = 0; b < B && !rc; b++)
            for (size_t p = 0; p < S; p++) {
                size_t i = b * L->in + c * S + p;
                if (op == 0) vo_fma(out[i], k, in[i], h, f);
                else if (op == 1) vo_mul(out[i], k, in[i], f);
                else if (op == 2) vo_div(out[i], in[i], k, f);
                else vo_sub(out[i], in[i], h, f), vo_div(out[i], out[i], k, f);
            }
    }
    mpfr_clears(k, h, (mpfr_ptr)0);
    return rc;
}

void vo_chan_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    per_unit(L, th, X, B, Y, 0, f);
}

void vo_chan_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    per_unit(L, th, U, B, V, 1, f);
}

int vo_chan_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                 const vijp_format *f)
{
    (void)X, (void)frag;
    return per_unit(L, th, Gx, B, Gy, 2, f);
}

int vo_chan_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    return per_unit(L, th, Y, B, X, 3, f);
}

void vo_chan_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)x;
    size_t n = L->in, C = A_(L)->channels, S = n / C;
    mpfr_t k, h;
    mpfr_inits2(f->prec, k, h, (mpfr_ptr)0);
    for (size_t i = 0; i < n * n; i++) mpfr_set_zero(J[i], 1);
    for (size_t c = 0; c < C; c++) {
        scale_shift(L, th, c, k, h, f);
        for (size_t p = 0; p < S; p++) vo_set(J[(c * S + p) * (n + 1)], k, f);
    }
    mpfr_clears(k, h, (mpfr_ptr)0);
}

/* Each parameter's gradient, term by term over the channel's units:
 *   actnorm    ∂/∂s = Σ g·x, ∂/∂b = Σ g;
 *   batchnorm  ∂/∂w = Σ g·(x − rm)/sd, ∂/∂b = Σ g, ∂/∂rm = −Σ g·k,
 *              ∂/∂rv = −Σ g·(x − rm)·w/(2 sd³), sd = √(rv + ε) (w = 1 without affine). */
void vo_chan_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f)
{
    size_t C = A_(L)->channels, S = L->in / C, P = (A_(L)->batchnorm ? (A_(L)->affine ? 4 : 2) : 2) * C;
    size_t at = A_(L)->batchnorm && A_(L)->affine ? 2 * C : 0;
    mpfr_t k, h, sd, t, d;
    mpfr_inits2(f->prec, k, h, sd, t, d, (mpfr_ptr)0);
    for (size_t q = 0; q < P; q++) mpfr_set_zero(Gt[q], 1);
    for (size_t c = 0; c < C; c++) {
        scale_shift(L, th, c, k, h, f);
        if (A_(L)->batchnorm) vo_set_d(sd, A_(L)->eps, f), vo_add(sd, th[at + C + c], sd, f), vo_sqrt(sd, sd, f);
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < S; p++) {
                size_t i = b * L->in + c * S + p;
                if (!A_(L)->batchnorm) {
                    vo_fma(Gt[c], Gy[i], X[i], Gt[c], f), vo_add(Gt[C + c], Gt[C + c], Gy[i], f);
                    continue;
                }
                vo_sub(d, X[i], th[at + c], f); /* x − rm */
                if (A_(L)->affine) {
                    vo_div(t, d, sd, f), vo_fma(Gt[c], Gy[i], t, Gt[c], f);
                    vo_add(Gt[C + c], Gt[C + c], Gy[i], f);
                }
                vo_mul(t, Gy[i], k, f), vo_sub(Gt[at + c], Gt[at + c], t, f);
                /* g·(x − rm)·w/(2 sd³) = g·k·(x − rm)/(2 sd²) */
                vo_mul(t, Gy[i], k, f), vo_mul(t, t, d, f), vo_div(t, t, sd, f), vo_div(t, t, sd, f);
                mpfr_div_2ui(t, t, 1, MPFR_RNDN), vo_sub(Gt[at + C + c], Gt[at + C + c], t, f);
            }
    }
    mpfr_clears(k, h, sd, t, d, (mpfr_ptr)0);
}

/* J = diag(k) enclosed at 128 bits from θ exactly (MPFI); J does not depend on x. */
int vo_chan_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)x;
    size_t n = L->in, C = A_(L)->channels, S = n / C, at = A_(L)->batchnorm && A_(L)->affine ? 2 * C : 0;
    for (size_t i = 0; i < n * n; i++) mid[i] = rad[i] = 0;
    mpfi_t k;
    mpfi_init2(k, 128);
    int rc = 0;
    for (size_t c = 0; c < C && !rc; c++) {
        if (A_(L)->batchnorm) {
            mpfi_set_d(k, th[at + C + c]), mpfi_add_d(k, k, A_(L)->eps), mpfi_sqrt(k, k);
            if (mpfi_has_zero(k) || mpfi_nan_p(k)) rc = VIJP_EDOMAIN; /* rv + ε <= 0: no layer */
            else mpfi_d_div(k, A_(L)->affine ? th[c] : 1.0, k);
        } else {
            mpfi_set_d(k, th[c]);
        }
        for (size_t p = 0; p < S && !rc; p++) vo_interval_mid_rad(k, &mid[(c * S + p) * (n + 1)], &rad[(c * S + p) * (n + 1)]);
    }
    mpfi_clear(k);
    return rc;
}
