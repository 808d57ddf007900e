/* Double operators shared by the smooth activations (see activation.h). */
#include "activation.h"
#include <string.h>

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

void vijp_act_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y)
{
    double d;
    for (size_t i = 0; i < L->in * B; i++) L->type->dual_eval(L, th, X[i], &Y[i], &d);
}

void vijp_act_apply(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U,
                    double *V)
{
    double f, d;
    for (size_t i = 0; i < L->in * B; i++) L->type->dual_eval(L, th, X[i], &f, &d), V[i] = U[i] * d;
}

int vijp_act_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                  const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    double f, d;
    for (size_t i = 0; i < L->in * B; i++) {
        L->type->dual_eval(L, th, X[i], &f, &d);
        if (d == 0 || !isfinite(d))
            return vijp_fail(err, VIJP_ESINGULAR,
                             "%s vijp: f'(x) = %g at unit %zu (x = %g): the layer is numerically "
                             "non-submersive there", L->type->name, d, i % L->in, X[i]);
        Gy[i] = Gx[i] / d;
    }
    return 0;
}

void vijp_act_jacobian(const vijp_layer *L, const double *th, const double *x, double *J)
{
    double f;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) L->type->dual_eval(L, th, x[i], &f, &J[i + i * L->in]);
}
