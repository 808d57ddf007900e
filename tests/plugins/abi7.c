/* A plugin built for plugin ABI 7, before vijp_format grew (t-plugin-load.c):
 * vijp 8 must load it, run it in double, and never hand its MPFR operators a
 * vijp_format, whose size the plugin's code was compiled with.  Its MPFR
 * operators would betray a call: they write NaN.
 * The type: y = 3x elementwise. */
#include <vijp/arith.h>
#include <vijp/plugin.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg || !in) return vijp_fail(err, VIJP_EINVAL, "abiseven takes no argument and needs --width");
    L->in = L->out = in;
    return 0;
}

static size_t param_count(const vijp_layer *L) { (void)L; return 0; }
static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = 3 * X[i];
}

static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                  double *V)
{
    (void)cx, (void)th, (void)X;
    for (size_t i = 0; i < L->in * B; i++) V[i] = 3 * U[i];
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)X, (void)frag, (void)err;
    for (size_t i = 0; i < L->in * B; i++) Gy[i] = Gx[i] / 3;
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = 3;
}

/* Never called by vijp 8: NaN everywhere if it is. */
static void mp_nan(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th, (void)X, (void)f;
    for (size_t i = 0; i < L->out * B; i++) mpfr_set_nan(Y[i]);
}
static void mp_nan2(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)U;
    mp_nan(L, th, X, B, V, f);
}
static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)Gx, (void)frag;
    mp_nan(L, th, X, B, Gy, f);
    return 0;
}
static void mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x, (void)f;
    for (size_t i = 0; i < L->in * L->in; i++) mpfr_set_nan(J[i]);
}

static const vijp_ops_d ops_d = {.forward = forward, .jvp = apply, .vjp = apply, .vijp = vijp, .jacobian = jacobian};
static const vijp_ops_mp ops_mp = {.forward = mp_nan, .jvp = mp_nan2, .vjp = mp_nan2, .vijp = mp_vijp,
                                   .jacobian = mp_jacobian};

static const vijp_layer_type abiseven = {
    .name = "abiseven", .syntax = "abiseven (3x, built for plugin ABI 7) [test plugin]",
    .parse = parse, .param_count = param_count, .declare = declare, .residual = VIJP_RESIDUAL_NONE,
    .d = &ops_d, .mp = &ops_mp,
};

int vijp_plugin_abi(void) { return 7; }
int vijp_plugin_init(vijp_error *err) { return vijp_layer_register(&abiseven, err); }
