/* Double operators shared by the smooth activations (see activation.h).
 * The catalogue's six go through the kernel table's f-and-f′ kernels
 * (src/kernels/kernels.h): the layers' own dual evaluation (ref) unless
 * VIJP_KERNELS names a SIMD set, whose kernels keep the same stated bounds;
 * any other activation (a plugin's) through its dual_eval, unit by unit. */
#include "activation.h"
#include "scratch.h"
#include "layer/route.h"
#include <string.h>

extern const vijp_layer_type vijp_layer_sigmoid, vijp_layer_softplus, vijp_layer_tanh, vijp_layer_silu,
    vijp_layer_gelu, vijp_layer_mish;

int vijp_act_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg && *arg)
        return vijp_fail(err, VIJP_EINVAL, "%s takes no argument, got '%s:%s'", L->type->name, L->type->name, arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "%s keeps its input width, which is unknown here: give --width",
                         L->type->name);
    L->in = L->out = in_width;
    return 0;
}

size_t vijp_act_no_params(const vijp_layer *L) { (void)L; return 0; }

/* f and f′ of n units: the table's kernel for a catalogue activation (the
 * VIJP_KACT_* order), the type's dual_eval otherwise. */
static int kact_of(const vijp_layer *L)
{
    static const vijp_layer_type *const kact[VIJP_KACT_COUNT] = {
        &vijp_layer_sigmoid, &vijp_layer_softplus, &vijp_layer_tanh, &vijp_layer_silu, &vijp_layer_gelu, &vijp_layer_mish};
    for (int a = 0; a < VIJP_KACT_COUNT; a++)
        if (L->type == kact[a]) return a;
    return -1;
}

static void eval_all(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t n,
                     double *f, double *df)
{
    int a = kact_of(L);
    if (a >= 0) cx->k->act_d[a](n, X, f, df);
    else
        for (size_t i = 0; i < n; i++) L->type->dual_eval(L, th, X[i], &f[i], &df[i]);
}

void vijp_act_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    size_t n = L->in * B;
    double *d = vijp_scratch(n);
    eval_all(L, cx, th, X, n, Y, d);
    free(d);
}

void vijp_act_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *U, double *V)
{
    size_t n = L->in * B;
    double *f = vijp_scratch(2 * n), *d = f + n;
    eval_all(L, cx, th, X, n, f, d);
    for (size_t i = 0; i < n; i++) V[i] = U[i] * d[i];
    free(f);
}

int vijp_act_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                  const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    size_t n = L->in * B;
    double *f = vijp_scratch(2 * n), *d = f + n;
    eval_all(L, cx, th, X, n, f, d);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (d[i] == 0 || !isfinite(d[i]))
            rc = vijp_fail(err, VIJP_ESINGULAR,
                           "%s vijp: f'(x) = %g at unit %zu (x = %g): the layer is numerically "
                           "non-submersive there", L->type->name, d[i], i % L->in, X[i]);
        else Gy[i] = Gx[i] / d[i];
    }
    free(f);
    return rc;
}

void vijp_act_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    double f;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) L->type->dual_eval(L, th, x[i], &f, &J[i + i * L->in]);
}

/* ---- binary32@SET (vijp_ops_f): the catalogue's six only, through the
 * set's act_f kernels (f and f′ evaluated in double, each rounded once to
 * binary32: within the kernel's bound, kernels.h), then one binary32
 * multiplication (jvp, vjp) or division (vijp) per unit, as the emulation
 * does after its own f′. */

static float *eval_all_f(const vijp_layer *L, const vijp_kctx *cx, const float *X, size_t n)
{
    float *f = vijp_alloc_unset(2 * (n ? n : 1) * sizeof *f);
    int a = kact_of(L);
    if (a >= 0) cx->k->act_f[a](n, X, f, f + n);
    else /* not one of the six (vijp_act_ops_f attached elsewhere): its dual_eval, rounded once */
        for (size_t i = 0; i < n; i++) {
            double fd, dd;
            L->type->dual_eval(L, NULL, (double)X[i], &fd, &dd);
            f[i] = (float)fd, f[n + i] = (float)dd;
        }
    return f;
}

static void act_forward_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B, float *Y)
{
    (void)th;
    size_t n = L->in * B;
    float *f = eval_all_f(L, cx, X, n);
    memcpy(Y, f, n * sizeof *Y);
    free(f);
}

static void act_apply_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                        const float *U, float *V)
{
    (void)th;
    size_t n = L->in * B;
    float *f = eval_all_f(L, cx, X, n), *d = f + n;
    for (size_t i = 0; i < n; i++) V[i] = U[i] * d[i];
    free(f);
}

static int act_vijp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                      const float *Gx, const float *frag, float *Gy, vijp_error *err)
{
    (void)th, (void)frag;
    size_t n = L->in * B;
    float *f = eval_all_f(L, cx, X, n), *d = f + n;
    int rc = 0, tanh = kact_of(L) == VIJP_KACT_TANH;
    for (size_t i = 0; i < n && !rc; i++) {
        if (d[i] == 0 || (!tanh && !isfinite(d[i]))) /* as the emulation and the oracles: tanh refuses only 0 */
            rc = vijp_fail(err, VIJP_ESINGULAR, "%s vijp: f'(x) = %g at unit %zu (x = %g) in binary32: the layer is "
                           "numerically non-submersive there", L->type->name, (double)d[i], i % L->in, (double)X[i]);
        else Gy[i] = Gx[i] / d[i];
    }
    free(f);
    return rc;
}

const vijp_ops_f vijp_act_ops_f = {.forward = act_forward_f, .jvp = act_apply_f, .vjp = act_apply_f,
                                   .vijp = act_vijp_f};
