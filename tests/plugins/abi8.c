/* A plugin built for plugin ABI 8, before vijp_layer_type grew emu_native
 * at its end (t-plugin-load.c): its descriptor ended before that member, so
 * vijp 9 must register a copy of it and never read the bytes past its end.
 * Built against today's header, it fills them with a pointer no table
 * lies at: vijp 9 reading them would crash.  It keeps its MPFR operators
 * (emu as well: only ABI 6 and 7 lose them) and runs in binary32 through them.
 * The type: y = 3x elementwise. */
#include <vijp/arith.h>
#include <vijp/plugin.h>
#include <stdint.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in, vijp_error *err)
{
    if (arg || !in) return vijp_fail(err, VIJP_EINVAL, "abieight takes no argument and needs --width");
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

/* In format f: 3 is exact, so each product is one rounding (vo_mul). */
static void times(mpfr_t *X, size_t n, mpfr_t *Y, const vijp_format *f, int divide)
{
    mpfr_t three;
    mpfr_init2(three, 8);
    mpfr_set_ui(three, 3, MPFR_RNDN);
    for (size_t i = 0; i < n; i++) (divide ? vo_div : vo_mul)(Y[i], X[i], three, f);
    mpfr_clear(three);
}
static void mp_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    times(X, L->in * B, Y, f, 0);
}
static void mp_apply(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th, (void)X;
    times(U, L->in * B, V, f, 0);
}
static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)th, (void)X, (void)frag;
    times(Gx, L->in * B, Gy, f, 1);
    return 0;
}
static void mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    for (size_t i = 0; i < L->in * L->in; i++) vo_set_d(J[i], i % (L->in + 1) ? 0 : 3, f);
}

static const vijp_ops_d ops_d = {.forward = forward, .jvp = apply, .vjp = apply, .vijp = vijp, .jacobian = jacobian};
static const vijp_ops_mp ops_mp = {.forward = mp_forward, .jvp = mp_apply, .vjp = mp_apply, .vijp = mp_vijp,
                                   .jacobian = mp_jacobian};

static const vijp_layer_type abieight = {
    .name = "abieight", .syntax = "abieight (3x, built for plugin ABI 8) [test plugin]",
    .parse = parse, .param_count = param_count, .declare = declare, .residual = VIJP_RESIDUAL_NONE,
    .d = &ops_d, .mp = &ops_mp, .emu = &ops_mp,
    .emu_native = (const struct vijp_emu_native *)(uintptr_t)16, /* past an ABI 8 descriptor: never read */
};

int vijp_plugin_abi(void) { return 8; }
int vijp_plugin_init(vijp_error *err) { return vijp_layer_register(&abieight, err); }
