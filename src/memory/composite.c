/* A minimal composite autograd for the activation formulas (see
 * include/vijp/composite.h).  Primitive ops and what each keeps for its
 * backward, as a typical framework's derivative rules do:
 *   exp → its output;  1/a → its output;  erf → its input;
 *   tanh, sigmoid → their output;  softplus → its input;  a·b → both operands;
 *   a + c, c·a (constants) → nothing. */
#include "vijp/composite.h"
#include "vijp/error.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K_SIGMOID, K_SOFTPLUS, K_TANH, K_SILU, K_GELU, K_MISH };

static const struct {
    const char *name, *formula;
} formulas[] = {
    [K_SIGMOID] = {"sigmoid", "1 / (1 + exp(-x))"},
    [K_SOFTPLUS] = {"softplus", "log1p(exp(x))"},
    [K_TANH] = {"tanh", "tanh(x)"},
    [K_SILU] = {"silu", "x * sigmoid(x)"},
    [K_GELU] = {"gelu", "x * (0.5 * (1 + erf(x / sqrt(2))))"},
    [K_MISH] = {"mish", "x * tanh(softplus(x))"},
};
#define NFORM (sizeof formulas / sizeof *formulas)

static int find(const char *name)
{
    for (size_t i = 0; i < NFORM; i++)
        if (!strcmp(name, formulas[i].name)) return (int)i;
    return -1;
}

int vijp_composite_known(const char *name) { return find(name) >= 0; }
const char *vijp_composite_formula(const char *name) { return find(name) >= 0 ? formulas[find(name)].formula : NULL; }

void vijp_tape_clear(vijp_tape *t)
{
    for (size_t i = 0; i < t->count; i++) free(t->kept[i]);
    memset(t, 0, sizeof *t);
}

/* Keep a copy of v (n values) under a name; the tape owns it. */
static double *keep(vijp_tape *t, const char *what, const double *v)
{
    double *c = vijp_alloc_array(t->n, sizeof *c);
    memcpy(c, v, t->n * sizeof *c);
    t->what[t->count] = what;
    return t->kept[t->count++] = c;
}

static double sig(double a) { return a >= 0 ? 1 / (1 + exp(-a)) : exp(a) / (1 + exp(a)); }
static double splus(double a) { return a > 0 ? a + log1p(exp(-a)) : log1p(exp(a)); }

int vijp_composite_forward(const char *name, const double *x, size_t n, double *y, vijp_tape *t)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->kind = find(name);
    if (t->kind < 0) return VIJP_EINVAL;
    double *a = vijp_alloc(n * sizeof *a + 1), *b = vijp_alloc(n * sizeof *b + 1);
    switch (t->kind) {
    case K_SIGMOID: /* e = exp(−x) keeps e; s = 1/(1 + e) keeps s */
        for (size_t i = 0; i < n; i++) a[i] = exp(-x[i]), y[i] = 1 / (1 + a[i]);
        keep(t, "exp(-x)", a), keep(t, "1/(1+e)", y);
        break;
    case K_SOFTPLUS: /* e = exp(x) keeps e; log1p(e) keeps its input e: the same tensor */
        for (size_t i = 0; i < n; i++) a[i] = exp(x[i]), y[i] = log1p(a[i]);
        keep(t, "exp(x)", a);
        break;
    case K_TANH:
        for (size_t i = 0; i < n; i++) y[i] = tanh(x[i]);
        keep(t, "tanh(x)", y);
        break;
    case K_SILU: /* s = sigmoid(x) keeps s; x·s keeps x and s */
        for (size_t i = 0; i < n; i++) a[i] = sig(x[i]), y[i] = x[i] * a[i];
        keep(t, "x", x), keep(t, "sigmoid(x)", a);
        break;
    case K_GELU: /* t = x/√2; e = erf(t) keeps t; a = 0.5(1 + e); x·a keeps x and a */
        for (size_t i = 0; i < n; i++) b[i] = x[i] * M_SQRT1_2, a[i] = 0.5 * (1 + erf(b[i])), y[i] = x[i] * a[i];
        keep(t, "x/sqrt(2)", b), keep(t, "x", x), keep(t, "0.5(1+erf)", a);
        break;
    case K_MISH: /* softplus keeps x; tanh keeps its output; x·th keeps x and th */
        for (size_t i = 0; i < n; i++) a[i] = tanh(splus(x[i])), y[i] = x[i] * a[i];
        keep(t, "x", x), keep(t, "tanh(softplus(x))", a);
        break;
    }
    free(a), free(b);
    return 0;
}

void vijp_composite_backward(const vijp_tape *t, const double *gy, double *gx)
{
    double *const *k = t->kept;
    const double two_over_sqrt_pi = 1.12837916709551257390;
    for (size_t i = 0; i < t->n; i++) {
        double g = gy[i];
        switch (t->kind) {
        case K_SIGMOID: { /* ∂(1/d) = −s²; ∂(1 + e) = 1; ∂exp(−x) = −e */
            double s = k[1][i], gd = -g * s * s;
            gx[i] = -gd * k[0][i];
            break;
        }
        case K_SOFTPLUS: { /* ∂log1p(e) = 1/(1 + e); ∂exp = e */
            double e = k[0][i];
            gx[i] = g / (1 + e) * e;
            break;
        }
        case K_TANH: gx[i] = g * (1 - k[0][i] * k[0][i]); break;
        case K_SILU: { /* x·s: g·s to x, g·x to s; sigmoid: s(1 − s) */
            double x = k[0][i], s = k[1][i];
            gx[i] = g * s + g * x * s * (1 - s);
            break;
        }
        case K_GELU: { /* x·a: g·a to x, g·x to a; a = 0.5(1 + erf(t)): 0.5·2/√π·e^{−t²}; t = x/√2 */
            double tt = k[0][i], x = k[1][i], a = k[2][i];
            double ga = g * x, gt = ga * 0.5 * two_over_sqrt_pi * exp(-tt * tt);
            gx[i] = g * a + gt * M_SQRT1_2;
            break;
        }
        case K_MISH: { /* x·th: g·th to x, g·x to th; tanh: 1 − th²; softplus(x): sigmoid(x) */
            double x = k[0][i], th = k[1][i], gth = g * x * (1 - th * th);
            gx[i] = g * th + gth * sig(x);
            break;
        }
        }
    }
}

int vijp_composite_accuracy(const char *name, double lo, double hi, size_t points, double window, vijp_accuracy *out,
                            vijp_error *err)
{
    memset(out, 0, sizeof *out);
    const vijp_layer_type *T = vijp_layer_type_find(name);
    if (!T || !T->dual_eval || find(name) < 0 || points < 2 || !(lo < hi))
        return vijp_fail(err, VIJP_EINVAL, "no nested/composite pair for '%s' (or an empty grid)", name);
    vijp_layer L = {.type = T, .in = 1, .out = 1};
    vijp_activation_report act;
    int rc = vijp_activation_analyze(&L, NULL, fmax(fabs(lo), fabs(hi)), 1e-9, &act, err);
    if (rc) return rc;
    double *x = vijp_alloc_array(points, sizeof *x), *y = vijp_alloc_array(points, sizeof *y), *gx = vijp_alloc_array(points, sizeof *gx),
           *one = vijp_alloc_array(points, sizeof *one);
    vijp_tape tape;
    for (size_t i = 0; i < points; i++) x[i] = lo + (hi - lo) * (double)i / (double)(points - 1), one[i] = 1;
    vijp_format R;
    if ((rc = vijp_composite_forward(name, x, points, y, &tape))) vijp_fail(err, rc, "composite %s failed", name);
    else if (!(rc = vijp_format_mpfr(&R, 128, err))) {
        vijp_composite_backward(&tape, one, gx);
        vijp_tape_clear(&tape);
        mpfr_t xm, f, d;
        mpfr_inits2(128, xm, f, d, (mpfr_ptr)0);
        for (size_t i = 0; i < points; i++) {
            int near_zero = 0;
            for (size_t b = 0; b < act.n_bad; b++) near_zero |= x[i] >= act.bad[b].lo - window && x[i] <= act.bad[b].hi + window;
            mpfr_set_d(xm, x[i], MPFR_RNDN);
            vo_activation_pair(name, f, d, xm, &R);
            double truth = mpfr_get_d(d, MPFR_RNDN), fx, df;
            if (near_zero || !(fabs(truth) >= 0x1p-1000)) continue;
            double ulp = ldexp(1, ilogb(truth) - 52);
            T->dual_eval(NULL, NULL, x[i], &fx, &df); /* built-in activations: no parameters */
            out->used++;
            out->nested_ulps = fmax(out->nested_ulps, fabs(df - truth) / ulp);
            if (!isfinite(gx[i])) out->composite_nonfinite++;
            else out->composite_ulps = fmax(out->composite_ulps, fabs(gx[i] - truth) / ulp);
        }
        mpfr_clears(xm, f, d, (mpfr_ptr)0);
    }
    vijp_activation_report_clear(&act);
    free(x), free(y), free(gx), free(one);
    return rc;
}
