/* Oracles of logsoftmax[:N] (src/layers/logsoftmax.c, which derives the
 * formulas), each operation rounded in the format, per run of N units:
 *   y = x − max − log Σ exp(x − max),  p = exp(x − max)/Σ,
 *   J = I − 1pᵀ (entry by entry), cokernel span{p}, q = p/‖p‖,
 *   vijp g_y = g_x + p·(c − qᵀg_x)/‖p‖. */
#include "norm.h"
#include "vijp/arith.h"
#include <stdlib.h>

#define RUN(L) (((const vo_logsoftmax_args *)(L)->state)->run)

/* p of one run into p, max x into mx, log Σ exp(x − max) into ls. */
static void run_softmax3(mpfr_t *x, size_t N, mpfr_t *p, mpfr_t mx, mpfr_t ls, const vijp_format *f)
{
    mpfr_t s;
    mpfr_init2(s, f->prec);
    vo_set(mx, x[0], f);
    for (size_t i = 1; i < N; i++)
        if (mpfr_cmp(x[i], mx) > 0) vo_set(mx, x[i], f);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < N; i++) vo_sub(p[i], x[i], mx, f), vo_exp(p[i], p[i], f), vo_add(s, s, p[i], f);
    for (size_t i = 0; i < N; i++) vo_div(p[i], p[i], s, f);
    vo_log(ls, s, f);
    mpfr_clear(s);
}

/* p alone; scratch takes log Σ, which these callers do not need. */
static void run_softmax(mpfr_t *x, size_t N, mpfr_t *p, mpfr_t scratch, const vijp_format *f)
{
    mpfr_t mx;
    mpfr_init2(mx, f->prec);
    run_softmax3(x, N, p, mx, scratch, f);
    mpfr_clear(mx);
}

void vo_logsoftmax_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    size_t N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), mx, ls;
    mpfr_inits2(f->prec, mx, ls, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) { /* y = (x − max) − log Σ exp(x − max) */
        mpfr_t *x = X + r * N;
        run_softmax3(x, N, p, mx, ls, f);
        for (size_t i = 0; i < N; i++) vo_sub(Y[r * N + i], x[i], mx, f), vo_sub(Y[r * N + i], Y[r * N + i], ls, f);
    }
    mpfr_clears(mx, ls, (mpfr_ptr)0);
    vo_vec_free(p, N);
}

/* op 0: v = u − 1·(pᵀu) (jvp); op 1: g = u − p·(1ᵀu) (vjp). */
static void apply(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, int vjp, const vijp_format *f)
{
    size_t N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), lse, d, t;
    mpfr_inits2(f->prec, lse, d, t, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_softmax(X + r * N, N, p, lse, f);
        mpfr_set_zero(d, 1);
        for (size_t i = 0; i < N; i++)
            if (vjp) vo_add(d, d, U[r * N + i], f);
            else vo_fma(d, p[i], U[r * N + i], d, f);
        for (size_t i = 0; i < N; i++)
            if (vjp) vo_mul(t, p[i], d, f), vo_sub(V[r * N + i], U[r * N + i], t, f);
            else vo_sub(V[r * N + i], U[r * N + i], d, f);
    }
    mpfr_clears(lse, d, t, (mpfr_ptr)0);
    vo_vec_free(p, N);
}

void vo_logsoftmax_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    apply(L, X, B, U, V, 0, f);
}

void vo_logsoftmax_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th;
    apply(L, X, B, Gy, Gx, 1, f);
}

size_t vo_logsoftmax_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th, (void)X;
    return L->in * B / RUN(L);
}

/* ‖p‖ of the run whose p is given. */
static void norm2(mpfr_t *p, size_t N, mpfr_t out, const vijp_format *f)
{
    mpfr_set_zero(out, 1);
    for (size_t i = 0; i < N; i++) vo_fma(out, p[i], p[i], out, f);
    vo_sqrt(out, out, f);
}

/* c = pᵀg/‖p‖ per run. */
void vo_logsoftmax_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                            const vijp_format *f)
{
    (void)th;
    size_t N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), lse, nrm;
    mpfr_inits2(f->prec, lse, nrm, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_softmax(X + r * N, N, p, lse, f);
        norm2(p, N, nrm, f);
        mpfr_set_zero(frag[r], 1);
        for (size_t i = 0; i < N; i++) vo_fma(frag[r], p[i], Gy[r * N + i], frag[r], f);
        vo_div(frag[r], frag[r], nrm, f);
    }
    mpfr_clears(lse, nrm, (mpfr_ptr)0);
    vo_vec_free(p, N);
}

int vo_logsoftmax_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                       const vijp_format *f)
{
    (void)th;
    size_t N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), lse, nrm, t;
    mpfr_inits2(f->prec, lse, nrm, t, (mpfr_ptr)0);
    for (size_t r = 0; r < L->in * B / N; r++) {
        run_softmax(X + r * N, N, p, lse, f);
        norm2(p, N, nrm, f);
        mpfr_set_zero(t, 1); /* t = (c − pᵀg_x/‖p‖)/‖p‖ */
        for (size_t i = 0; i < N; i++) vo_fma(t, p[i], Gx[r * N + i], t, f);
        vo_div(t, t, nrm, f), vo_sub(t, frag[r], t, f), vo_div(t, t, nrm, f);
        for (size_t i = 0; i < N; i++) vo_fma(Gy[r * N + i], p[i], t, Gx[r * N + i], f);
    }
    mpfr_clears(lse, nrm, t, (mpfr_ptr)0);
    vo_vec_free(p, N);
    return 0;
}

/* J_ij = δ_ij − p_j inside a run, 0 across runs. */
void vo_logsoftmax_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    size_t n = L->in, N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), lse;
    mpfr_init2(lse, f->prec);
    for (size_t i = 0; i < n * n; i++) mpfr_set_zero(J[i], 1);
    for (size_t r = 0; r < n / N; r++) {
        run_softmax(x + r * N, N, p, lse, f);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                mpfr_t *e = &J[(r * N + i) + (r * N + j) * n];
                vo_set_si(*e, i == j, f), vo_sub(*e, *e, p[j], f);
            }
    }
    mpfr_clear(lse);
    vo_vec_free(p, N);
}

int vo_logsoftmax_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)th;
    size_t n = L->in, N = RUN(L);
    mpfr_t *p = vo_vec_new(N, f), lse, nrm;
    mpfr_inits2(f->prec, lse, nrm, (mpfr_ptr)0);
    for (size_t i = 0; i < n * (n / N); i++) mpfr_set_zero(Q[i], 1);
    for (size_t r = 0; r < n / N; r++) {
        run_softmax(x + r * N, N, p, lse, f);
        norm2(p, N, nrm, f);
        for (size_t i = 0; i < N; i++) vo_div(Q[(r * N + i) + r * n], p[i], nrm, f);
    }
    mpfr_clears(lse, nrm, (mpfr_ptr)0);
    vo_vec_free(p, N);
    return 0;
}

/* J = I − 1pᵀ per run enclosed at 128 bits (MPFI) from x exactly. */
int vo_logsoftmax_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)th;
    size_t n = L->in, N = RUN(L);
    mpfi_t s, t, *p = vijp_alloc_array(N, sizeof *p);
    mpfi_init2(s, 128), mpfi_init2(t, 128);
    for (size_t i = 0; i < N; i++) mpfi_init2(p[i], 128);
    for (size_t i = 0; i < n * n; i++) mid[i] = rad[i] = 0;
    for (size_t r = 0; r < n / N; r++) {
        const double *xr = x + r * N;
        double mx = xr[0];
        for (size_t i = 1; i < N; i++) mx = xr[i] > mx ? xr[i] : mx;
        mpfi_set_ui(s, 0);
        for (size_t i = 0; i < N; i++) mpfi_set_d(p[i], xr[i]), mpfi_sub_d(p[i], p[i], mx), mpfi_exp(p[i], p[i]), mpfi_add(s, s, p[i]);
        for (size_t i = 0; i < N; i++) mpfi_div(p[i], p[i], s);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                mpfi_ui_sub(t, i == j, p[j]);
                size_t at = (r * N + i) + (r * N + j) * n;
                vo_interval_mid_rad(t, &mid[at], &rad[at]);
            }
    }
    for (size_t i = 0; i < N; i++) mpfi_clear(p[i]);
    mpfi_clear(s), mpfi_clear(t);
    free(p);
    return 0;
}
