/* A layer plugin with weights: the gated unit y = x ⊙ σ(Wx + b), W n × n.
 * It gives the double operators only (no MPFR twin), so it runs in double
 * (vijp grad --format double); MPFR formats, drift and report refuse it with
 * a message.  Parameters: W column-major, then b.
 *
 *   z = Wx + b,  J = diag(σ(z)) + diag(x ⊙ σ′(z))·W,  σ′ = σ(1 − σ).
 *   jvp  v = σ(z) ⊙ u + x ⊙ σ′(z) ⊙ (W u)
 *   vjp  g_x = σ(z) ⊙ g + Wᵀ (x ⊙ σ′(z) ⊙ g)
 *   ∂/∂W: c xᵀ, ∂/∂b: c, with c = g ⊙ x ⊙ σ′(z), summed over the batch
 *   vijp g_y Jᵀ-solve: Jᵀ g_y = g_x by LU (LAPACK dgesv); J is square and
 *        submersive exactly where it is nonsingular, which depends on W and x.
 *
 * Build: make (against the installed headers; see vijp/plugin.h). */
#include <vijp/plugin.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "gated takes no argument, got 'gated:%s'", arg);
    if (!in || in > 4096) return vijp_fail(err, VIJP_EDIM, "gated keeps its width, which must be in [1, 4096] (got %zu)", in);
    L->in = L->out = in;
    return 0;
}

static size_t param_count(const vijp_layer *L) { return L->in * L->in + L->in; }

/* W ~ N(0, gain²/n), b = 0, for every initialiser. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    size_t n = L->in;
    double g = in.kind == VIJP_INIT_SCALED ? in.gain : 1.0;
    for (size_t k = 0; k < n * n; k++) th[k] = g * vijp_rng_normal(rng) / sqrt((double)n);
    memset(th + n * n, 0, n * sizeof *th);
    return 0;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

/* s = σ(z), ds = σ′(z) for one sample x. */
static void gates(const vijp_layer *L, const double *th, const double *x, double *s, double *ds)
{
    size_t n = L->in;
    for (size_t i = 0; i < n; i++) {
        double z = th[n * n + i];
        for (size_t j = 0; j < n; j++) z += th[i + j * n] * x[j];
        s[i] = 1 / (1 + exp(-z)), ds[i] = s[i] * (1 - s[i]);
    }
}

/* vijp_alloc never returns NULL: out of memory ends the run with a message
 * (the memory policy in vijp/error.h), so a layer needs no failure path. */
#define SCRATCH(n) double *s = vijp_alloc_array(2 * (n), sizeof *s), *ds = s + (n)

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    size_t n = L->in;
    SCRATCH(n);
    for (size_t b = 0; b < B; b++) {
        gates(L, th, X + b * n, s, ds);
        for (size_t i = 0; i < n; i++) Y[b * n + i] = X[b * n + i] * s[i];
    }
    free(s);
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)cx;
    size_t n = L->in;
    SCRATCH(n);
    for (size_t b = 0; b < B; b++) {
        gates(L, th, X + b * n, s, ds);
        for (size_t i = 0; i < n; i++) {
            double wu = 0;
            for (size_t j = 0; j < n; j++) wu += th[i + j * n] * U[b * n + j];
            V[b * n + i] = s[i] * U[b * n + i] + X[b * n + i] * ds[i] * wu;
        }
    }
    free(s);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *G, double *Gx)
{
    (void)cx;
    size_t n = L->in;
    SCRATCH(n);
    for (size_t b = 0; b < B; b++) {
        gates(L, th, X + b * n, s, ds);
        for (size_t j = 0; j < n; j++) {
            double t = s[j] * G[b * n + j];
            for (size_t i = 0; i < n; i++) t += th[i + j * n] * X[b * n + i] * ds[i] * G[b * n + i];
            Gx[b * n + j] = t;
        }
    }
    free(s);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *G, double *Gt)
{
    (void)cx;
    size_t n = L->in;
    SCRATCH(n);
    memset(Gt, 0, (n * n + n) * sizeof *Gt);
    for (size_t b = 0; b < B; b++) {
        gates(L, th, X + b * n, s, ds);
        for (size_t i = 0; i < n; i++) {
            double c = G[b * n + i] * X[b * n + i] * ds[i];
            for (size_t j = 0; j < n; j++) Gt[i + j * n] += c * X[b * n + j];
            Gt[n * n + i] += c;
        }
    }
    free(s);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    size_t n = L->in;
    SCRATCH(n);
    gates(L, th, x, s, ds);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) J[i + j * n] = (i == j ? s[i] : 0) + x[i] * ds[i] * th[i + j * n];
    free(s);
}

/* g_y with g_y J = g_x, i.e. Jᵀ g_y = g_x, per sample. */
static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    size_t n = L->in;
    double *J = vijp_alloc_array(n * n, sizeof *J), *JT = vijp_alloc_array(n * n, sizeof *JT);
    lapack_int *piv = vijp_alloc_array(n, sizeof *piv);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        jacobian(L, cx, th, X + b * n, J);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) JT[j + i * n] = J[i + j * n];
        memcpy(Gy + b * n, Gx + b * n, n * sizeof *Gy);
        if (LAPACKE_dgesv(LAPACK_COL_MAJOR, (lapack_int)n, 1, JT, (lapack_int)n, piv, Gy + b * n, (lapack_int)n))
            rc = vijp_fail(err, VIJP_ESINGULAR, "gated vijp: J is singular at sample %zu", b);
    }
    free(J), free(JT), free(piv);
    return rc;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp, .jacobian = jacobian,
};

static const vijp_layer_type gated = {
    .name = "gated", .syntax = "gated (x * sigmoid(Wx + b), W square; keeps its width; double only) [plugin]",
    .parse = parse, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d,
};

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err) { return vijp_layer_register(&gated, err); }
