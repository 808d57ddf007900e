/* A plugin built for plugin ABI 6, whose vijp_interval_ops held
 * deriv_enclose alone (t-plugin-load.c): vijp 7 must still load it and read
 * nothing past that member.  Its table is followed in memory by non-NULL
 * junk where ABI 7's jacobian_box and jacobian_lipschitz would be, so a
 * vijp that read them would find them set (and crash calling them).
 * The type: y = x³ + x elementwise, f′ = 3x² + 1 >= 1, so every box is
 * certified with σ_min >= 1. */
#include <vijp/interval.h>
#include <vijp/plugin.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg || !in) return vijp_fail(err, VIJP_EINVAL, "abisix takes no argument and needs --width");
    L->in = L->out = in;
    return 0;
}

static size_t param_count(const vijp_layer *L) { (void)L; return 0; }
static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = X[i] * X[i] * X[i] + X[i];
}

static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                  double *V)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) V[i] = (3 * X[i] * X[i] + 1) * U[i];
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)frag, (void)err;
    for (size_t i = 0; i < L->in * B; i++) Gy[i] = Gx[i] / (3 * X[i] * X[i] + 1);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = 3 * x[i] * x[i] + 1;
}

/* f′ = 3x² + 1 over the interval, outward rounded. */
static void deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfi_sqr(d, x), mpfi_mul_ui(d, d, 3), mpfi_add_ui(d, d, 1);
}

/* ABI 6's table, and what happens to follow it in memory. */
static const struct {
    vijp_deriv_enclose_fn deriv_enclose;
    const void *junk[2];
} abi6_ops = {deriv_enclose, {(const void *)&abi6_ops, (const void *)&abi6_ops}};

static const vijp_ops_d ops_d = {.forward = forward, .jvp = apply, .vjp = apply, .vijp = vijp, .jacobian = jacobian};

static const vijp_layer_type abisix = {
    .name = "abisix", .syntax = "abisix (x³ + x, built for plugin ABI 6) [test plugin]",
    .parse = parse, .param_count = param_count, .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d,
    .interval = (const vijp_interval_ops *)(const void *)&abi6_ops,
};

int vijp_plugin_abi(void) { return 6; }
int vijp_plugin_init(vijp_error *err) { return vijp_layer_register(&abisix, err); }
