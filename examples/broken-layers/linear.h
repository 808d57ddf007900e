/* The layer the broken plugins break: y = Wx + b, W square (n × n), θ = W
 * column-major then b, in double only.  Every operator here is right; each
 * plugin in this folder swaps one for a wrong one and says which check of
 * `vijp check-layer` must catch it (tests/t-check-layer.c makes sure it
 * does).  correct.c registers it unchanged, and passes.
 *
 *   J = W: jvp W u, vjp Wᵀ g, vijp solves Wᵀ g_y = g_x, inverse solves
 *   W x = y − b (Gaussian elimination with partial pivoting, backward stable:
 *   Higham Thm 9.4), Jacobian W exactly (jacobian_exact).
 *   W = I + 0.3·N(0,1)/√n: well conditioned, so a relative error of 2^-30 in
 *   any result stands far above the bounds (κ·C_solve·u ~ 1e-12 at n = 8).
 *
 * Header-only: each plugin includes it once and builds its type with
 * linear_type(name, &ops, declarations). */
#include <vijp/plugin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int linear_parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "this layer takes no argument, got '%s'", arg);
    if (!in || in > 512) return vijp_fail(err, VIJP_EDIM, "this layer keeps its width, which must be in [1, 512]");
    L->in = L->out = in;
    return 0;
}

static size_t linear_param_count(const vijp_layer *L) { return L->in * L->in + L->in; }

static int linear_init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    (void)in;
    size_t n = L->in;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) th[i + j * n] = (i == j) + 0.3 * vijp_rng_normal(rng) / sqrt((double)n);
    for (size_t i = 0; i < n; i++) th[n * n + i] = 0.1 * vijp_rng_normal(rng);
    return 0;
}

/* y_b = A v_b (trans 0) or Aᵀ v_b (trans 1) for each of B columns. */
static void linear_apply(size_t n, const double *A, int trans, const double *V, size_t B, double *Y)
{
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < n; j++) s += (trans ? A[j + i * n] : A[i + j * n]) * V[j + b * n];
            Y[i + b * n] = s;
        }
}

/* Solve A x = r (trans 0) or Aᵀ x = r (trans 1) in place, for B columns;
 * VIJP_ESINGULAR when a pivot is exactly 0. */
static int linear_solve(size_t n, const double *A, int trans, double *R, size_t B, vijp_error *err)
{
    double *M = vijp_alloc_array(n * n, sizeof *M);
    size_t *p = vijp_alloc_array(n, sizeof *p);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) M[i + j * n] = trans ? A[j + i * n] : A[i + j * n];
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) { /* LU with partial pivoting, M = P·L·U */
        size_t q = k;
        for (size_t i = k + 1; i < n; i++)
            if (fabs(M[i + k * n]) > fabs(M[q + k * n])) q = i;
        p[k] = q;
        for (size_t j = 0; j < n; j++) {
            double t = M[k + j * n];
            M[k + j * n] = M[q + j * n], M[q + j * n] = t;
        }
        if (M[k + k * n] == 0) {
            rc = vijp_fail(err, VIJP_ESINGULAR, "singular matrix: pivot %zu is 0", k);
            break;
        }
        for (size_t i = k + 1; i < n; i++) {
            M[i + k * n] /= M[k + k * n];
            for (size_t j = k + 1; j < n; j++) M[i + j * n] -= M[i + k * n] * M[k + j * n];
        }
    }
    for (size_t b = 0; b < B && !rc; b++) {
        double *x = R + b * n;
        for (size_t k = 0; k < n; k++) {
            double t = x[k];
            x[k] = x[p[k]], x[p[k]] = t;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++) x[i] -= M[i + j * n] * x[j];
        for (size_t i = n; i-- > 0;) {
            for (size_t j = i + 1; j < n; j++) x[i] -= M[i + j * n] * x[j];
            x[i] /= M[i + i * n];
        }
    }
    free(M), free(p);
    return rc;
}

static void linear_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                           double *Y)
{
    (void)cx;
    size_t n = L->in;
    linear_apply(n, th, 0, X, B, Y);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++) Y[i + b * n] += th[n * n + i];
}

static void linear_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)cx, (void)X;
    linear_apply(L->in, th, 0, U, B, V);
}

static void linear_vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *G, double *Gx)
{
    (void)cx, (void)X;
    linear_apply(L->in, th, 1, G, B, Gx);
}

/* ∂ℓ/∂W_ij = Σ_b G_ib X_jb, ∂ℓ/∂b_i = Σ_b G_ib. */
static void linear_vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                             const double *G, double *Gt)
{
    (void)cx, (void)th;
    size_t n = L->in;
    memset(Gt, 0, (n * n + n) * sizeof *Gt);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < n; j++) Gt[i + j * n] += G[i + b * n] * X[j + b * n];
            Gt[n * n + i] += G[i + b * n];
        }
}

static int linear_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)X, (void)frag;
    memcpy(Gy, Gx, L->in * B * sizeof *Gy);
    return linear_solve(L->in, th, 1, Gy, B, err);
}

static void linear_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    memcpy(J, th, L->in * L->in * sizeof *J);
}

static int linear_inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                          double *X, vijp_error *err)
{
    (void)cx;
    size_t n = L->in;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++) X[i + b * n] = Y[i + b * n] - th[n * n + i];
    return linear_solve(n, th, 0, X, B, err);
}

/* ---- the contract (vijp/layer.h) ---- */

static size_t linear_bias_index(const vijp_layer *L, size_t i) { return L->in * L->in + i; }

/* Sums of B products from zero: within γ_(B+1) Σ_b |G_ib||X_jb| (Higham eq. 3.5). */
static void linear_vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                                   double u, double *bound)
{
    (void)th;
    size_t n = L->in;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < B; b++) {
            for (size_t j = 0; j < n; j++) bound[i + j * n] += (double)(B + 1) * u * aG[i + b * n] * aX[j + b * n];
            bound[n * n + i] += (double)(B + 1) * u * aG[i + b * n];
        }
}

static const vijp_ops_d linear_ops = {
    .forward = linear_forward, .jvp = linear_jvp, .vjp = linear_vjp, .vjp_param = linear_vjp_param,
    .vijp = linear_vijp, .jacobian = linear_jacobian, .inverse = linear_inverse,
};

static unsigned linear_declare_nothing(const vijp_layer *L) { (void)L; return 0; }

/* The type, with the given name, operators and declarations. */
static vijp_layer_type linear_type(const char *name, const vijp_ops_d *ops, unsigned (*declare)(const vijp_layer *))
{
    vijp_layer_type T = {
        .name = name, .syntax = "a square linear layer y = Wx + b (broken on purpose; keeps its width) [plugin]",
        .parse = linear_parse, .param_count = linear_param_count, .init = linear_init,
        .declare = declare ? declare : linear_declare_nothing, .residual = VIJP_RESIDUAL_NONE, .d = ops,
        .jacobian_exact = 1, .bounds = {.inverse = VIJP_INVBOUND_LINEAR}, .bias_index = linear_bias_index,
        .vjp_param_bound = linear_vjp_param_bound,
    };
    return T;
}
