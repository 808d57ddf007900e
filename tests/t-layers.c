/* The layer battery on every built-in layer type, in double and
 * in MPFR at 256 bits: the checks themselves live in the library
 * (include/vijp/check_layer.h, src/check_layer*.c), written against the
 * public layer interface and each type's own error-bound contract, so that
 * `vijp check-layer` runs exactly these on a plugin's type.  Their bounds are
 * derived there (Higham eq. 3.5 for dot products, Thm 9.4 and 19.4 for the
 * solves, the contract's ulps and inverse model); this file says which
 * layers they run on and what a built-in type may skip.  No test here looks
 * at a layer's name.  Beside the battery: bad inputs, binary16 underflow and
 * the initialisers. */
#include "fixtures/layerfix.h"
#include "vijp/check_layer.h"
#include "vijp/interval.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *spec;
    size_t width;
} cases[] = {
    {"dense:6", 6},   /* square: LU */
    {"dense:4", 7},   /* wide: QR of Wᵀ */
    {"dense:9", 5},   /* tall: fragment in null(Wᵀ) */
    {"leaky:0.3", 6}, {"relu", 8}, {"tanh", 6}, {"sigmoid", 6}, {"softplus", 6},
    {"silu", 6}, {"gelu", 6}, {"mish", 6}, {"layernorm", 6}, {"softmax", 6},
    {"elu:0.5", 6},          /* the PyTorch activations: selu, relu6, gelu:tanh, softplus:B/T in t-check-layer.c */
    {"hardtanh:-0.5/1", 8}, {"hardswish", 8}, /* flat units: fragments */
    {"prelu:2", 8},         /* a slope per channel: parameters */
    {"conv1d:2x3", 8}, /* zero padding: dense LU */
    {"conv1d:2x3:circular", 8}, /* per-frequency solves */
    {"conv1d:2x3s2", 8},        /* strided: wide, the dense layer's QR solve */
    {"conv2d:1x3x4", 16},       /* 4 x 4 grid, zero padding: dense LU */
    {"conv2d:1x3x4:circular", 16}, /* 2-D DFT, one solve per frequency pair */
    {"conv2d:1x3x4s2:circular", 16}, /* strided 4 x 4 -> 2 x 2: wide */
    {"conv2d:3x3x4:circular", 48}, /* 3 channels on a 4 x 4 grid: FFTW's 2-D half spectrum, 3 x 3 solves */
    {"conv1d:65x3:circular", 260}, /* 65 channels: the per-frequency solve goes to LAPACK's zgesv */
    {"conv1d:2x4:out=3", 8},    /* even kernel, more outputs (15) than inputs: the dense fragment on J */
    {"conv1d:2x3:out=1:reflect", 8}, /* fewer outputs: wide, minimum-norm QR */
    {"conv2d:2x2x3s2:out=3:pad=0", 24}, /* valid, even kernel, strided 3 x 4 -> 1 x 2: wide */
    {"avgpool2d:1x2x4", 16},    /* 2 x 2 windows apart: structured vijp */
    {"avgpool2d:1x3x4s1", 16},  /* overlapping windows: full row rank, dense minimum-norm solve */
    {"maxpool1d:2x3s1", 12},    /* overlapping windows: equal rows, Helmert fragments */
    {"maxpool2d:1x2x4", 16},    /* windows apart: orthonormal rows */
    {"avgpool:2", 8},           /* wide, structured vijp */
    {"squeeze:1x4", 8},         /* a permutation with a 3-cycle (2x2 on 8 is an involution) */
    {"inv1x1:2", 8},            /* LU form: triangular substitutions */
    {"linear:6x4", 12},         /* 3 tokens, tall W: fragment in I_3 ⊗ null(Wᵀ) */
    {"linear:4x4", 8},          /* square: the dense LU over 2 tokens, and the inverse */
    {"attention:4x2:causal", 12}, /* 3 tokens, 2 heads: the dense-Jacobian LU (t-check-layer.c: not causal) */
    {"residual:dense:8+tanh+dense:4", 4},          /* I + J_f: LU of J formed from jvps; fixed-point inverse */
    {"residual:dense:6+tanh:skip=dense:6", 4},     /* tall projection: a fragment in J's cokernel */
    {"residual:dense:3+softplus:skip=dense:3", 5}, /* wide projection: least squares */
    {"additive:dense:8+tanh+dense:2;tanh", 4},        /* F widens inside (2 -> 8 -> 2), G another chain */
    {"affine:exp+dense:6+tanh+dense:2;dense:2", 4},   /* S and T different chains, S widening inside */
    {"identity", 5}, {"dropout:0.1", 6}, {"flatten", 4},
    /* the new types, one case per shared set of operators (identity and
     * flatten share dropout's, actnorm batchnorm's, groupnorm layernorm's
     * runs; t-check-layer.c runs each type once through the command) */
    {"dropout:0.1", 6},
    {"transpose:2x3", 12},      /* two runs, each a 2 x 3 matrix: a permutation with 3-cycles */
    {"layernorm:3:eps=0.01:affine", 6}, /* two runs, ε > 0: fragment 1 per run, cokernel D⁻¹·span{1} */
    {"batchnorm:2:eps=0.1:affine", 6}, /* eval mode: the running statistics' gradients too */
    {"logsoftmax:3", 6},        /* cokernel span{softmax} per run */
};
#define NCASES (sizeof cases / sizeof *cases)
static const char *const formats[] = {"double", "mpfr:256"};
#define NB 3 /* points per check */

/* What a built-in type may skip, from its own descriptor: a fragment check
 * without a cokernel, a parameter-gradient check without parameters, an
 * inverse check when it declares no inverse, a declarations check when it
 * declares nothing; for the coupling layers, which state less, the
 * parameter gradient against MPFR without a vjp_param_bound and the inverse
 * without an inverse model.  Nothing else: every built-in type has MPFR
 * operators. */
static int may_skip(const char *check, const vijp_layer *L)
{
    unsigned d = L->type->declare(L);
    if (!strcmp(check, "fragment-vs-cokernel")) return 1;
    if (!strcmp(check, "vjp-param-vs-mpfr") && !L->type->vjp_param_bound) return 1; /* additive, affine */
    if (!strcmp(check, "vjp-param-vs-mpfr") || !strcmp(check, "vjp-param-vs-differences"))
        return L->type->param_count(L) == 0;
    if (!strcmp(check, "inverse-round-trip"))
        return !(d & VIJP_DECL_INVERTIBLE) || L->type->bounds.inverse == VIJP_INVBOUND_NONE; /* affine: no model */
    if (!strcmp(check, "declarations")) return d == 0;
    if (!strcmp(check, "jacobian-box")) return !vijp_jacobian_box_of(L->type) && !vijp_jacobian_lipschitz_of(L->type);
    return 0;
}

/* The decimal exponent of a number as a result prints it ("1.2e-400"). */
static long decimal_exponent(const char *text)
{
    const char *e = strchr(text, 'e');
    return e ? strtol(e + 1, NULL, 10) : 0;
}

/* At mpfr:P past 1000 bits a bound is 2^-P times sizes of order 1: it
 * must read so (10^-0.301P, give or take 40 decades for the sizes), not 0
 * against an error, nor a double's. */
static void assert_bound_at_scale(const char *spec, const char *format, const vijp_check_result *r)
{
    long P = strncmp(format, "mpfr:", 5) ? 0 : strtol(format + 5, NULL, 10);
    if (P < 1000 || !r->worst_what[0] || isnan(r->ratio) || !strcmp(r->name, "declarations")) return;
    if (strcmp(r->error_text, "0"))
        ck_assert_msg(strcmp(r->bound_text, "0"), "%s %s %s: error %s against a bound 0", spec, format, r->name,
                      r->error_text);
    if (!strcmp(r->bound_text, "0")) return;
    long d = decimal_exponent(r->bound_text), want = (long)(-0.30103 * (double)P);
    ck_assert_msg(d > want - 40 && d < want + 40, "%s %s %s: bound %s, not near 1e%ld", spec, format, r->name,
                  r->bound_text, want);
}

/* Every check on spec at width in format, at seed. */
static void battery_on(const char *spec, size_t width, const char *format, uint64_t seed, int double_only)
{
    vijp_check_opts o = {.width = width, .seed = seed, .format = format, .batch = NB, .double_only = double_only};
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, spec, o.width, NULL));
    for (size_t k = 0; k < vijp_check_count(); k++) {
        vijp_check_result r;
        vijp_error err = {0};
        const char *name = vijp_check_name(k);
        ck_assert_msg(!vijp_check_layer_run(k, spec, &o, &r, &err), "%s: %s", spec, err.msg);
        ck_assert_msg(r.status != VIJP_CHECK_FAILED, "%s %s, check %s: %s (worst %s[%zu,%zu] at %g of its bound: %s; "
                      "seed %llu)", spec, o.format, name, r.detail, r.worst_what, r.worst_row, r.worst_col,
                      r.ratio, r.bound_source, (unsigned long long)r.seed);
        if (double_only) {
            /* without MPFR operators: the oracle is skipped and the
             * differences are the weaker, estimated kind */
            if (!strcmp(name, "format-vs-mpfr") || !strcmp(name, "vjp-param-vs-mpfr"))
                ck_assert_msg(r.status == VIJP_CHECK_SKIPPED, "%s: %s ran without MPFR operators", spec, name);
            if (!strcmp(name, "jvp-vs-differences")) ck_assert(r.weaker && r.status == VIJP_CHECK_PASSED);
            if (!strcmp(name, "vjp-param-vs-differences") && L.type->param_count(&L))
                ck_assert_msg(r.weaker && r.status == VIJP_CHECK_PASSED, "%s: %s", spec, r.detail);
            continue;
        }
        ck_assert_msg(r.status != VIJP_CHECK_SKIPPED || may_skip(name, &L), "%s %s: check %s skipped: %s",
                      spec, o.format, name, r.detail);
        ck_assert(!r.weaker);
        assert_bound_at_scale(spec, format, &r);
    }
    vijp_layer_clear(&L);
}

/* Every check on case _i / 2 in format _i % 2, seed test_seed() + _i.
 * The wide cases (the 260-input conv1d: its LAPACK solve path) run in
 * double only in make check; at mpfr:256 and with the MPFR operators set
 * aside they exercise no code the narrower cases do not (the MPFR twin and
 * the double differences at width 260), at eight times a narrow case's
 * cost, so make check-long (VIJP_TEST_SCALE > 1) runs them. */
static void run_battery(int i, int double_only)
{
    if (cases[i / 2].width > 64 && (double_only || i % 2) && test_iters(1) == 1) {
        printf("# layers: %s %s: run by make check-long\n", cases[i / 2].spec,
               double_only ? "without MPFR operators" : formats[i % 2]);
        return;
    }
    battery_on(cases[i / 2].spec, cases[i / 2].width, double_only ? "double" : formats[i % 2], test_seed() + (uint64_t)i,
               double_only);
}

START_TEST(battery) { run_battery(_i, 0); }
END_TEST

/* High precision: the battery at mpfr:700, 1100, 2000 and 4032, where u =
 * 2^-P lies below double's range from P ≈ 1100 (its bounds once underflowed
 * to 0 there and every comparison failed; at mpfr:700 the differences' own
 * truncation, 2^-600, failed them).  make check: every case of at most 16
 * inputs and the coupling layers at mpfr:1100, and tanh at all four (about
 * 1.2 s); VIJP_TEST_SCALE > 1 (make check-long): every case at all four
 * (about 2 minutes), but for the 260-input conv1d only at mpfr:700 (its
 * MPFR Jacobians take 20 s there, 30 s at 1100, minutes past). */
static const long hiprec[] = {700, 1100, 2000, 4032};
#define NHIPREC (sizeof hiprec / sizeof *hiprec)
static const struct {
    const char *spec;
    size_t width;
} coupling[] = {{"additive", 4}, {"affine", 4}}; /* width 4: 2 × 2 residual functions, cheap differences in θ */
#define NALL (NCASES + sizeof coupling / sizeof *coupling)
static size_t hiprec_case[NALL * NHIPREC][2]; /* (case, precision): coupling[] after cases[] */
static size_t n_hiprec;

static void hiprec_cases(void)
{
    int full = test_iters(1) > 1;
    n_hiprec = 0;
    for (size_t p = 0; p < NHIPREC; p++)
        for (size_t k = 0; k < NALL; k++) {
            const char *spec = k < NCASES ? cases[k].spec : coupling[k - NCASES].spec;
            size_t width = k < NCASES ? cases[k].width : coupling[k - NCASES].width;
            if ((full && (width <= 48 || hiprec[p] == 700)) || (hiprec[p] == 1100 && width <= 16) || !strcmp(spec, "tanh"))
                hiprec_case[n_hiprec][0] = k, hiprec_case[n_hiprec++][1] = p;
        }
}

START_TEST(battery_high_precision)
{
    size_t k = hiprec_case[_i][0];
    char format[32];
    snprintf(format, sizeof format, "mpfr:%ld", hiprec[hiprec_case[_i][1]]);
    battery_on(k < NCASES ? cases[k].spec : coupling[k - NCASES].spec,
               k < NCASES ? cases[k].width : coupling[k - NCASES].width, format, test_seed() + (uint64_t)_i, 0);
}
END_TEST

/* The same checks with the MPFR operators set aside, as for a plugin that
 * has none: Richardson differences in double must pass the built-ins too
 * (their estimate holds no false alarm on layers known to be right). */
START_TEST(battery_double_only) { run_battery(2 * _i, 1); }
END_TEST

/* A broken operator fails its check: the vijp scaled by 1 + 2^-30 (a
 * layer whose vjp is exact) must fail the round trip, which a silent pass
 * here would hide.  The layer is a plain struct copy of dense with its
 * double vijp wrapped. */
static const vijp_ops_d *dense_ops;
static int scaled_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    int rc = dense_ops->vijp(L, cx, th, X, B, Gx, frag, Gy, err);
    for (size_t i = 0; i < L->out * B; i++) Gy[i] *= 1 + 0x1p-30;
    return rc;
}

START_TEST(battery_sees_a_broken_vijp)
{
    static vijp_layer_type T;
    static vijp_ops_d ops;
    if (!vijp_layer_type_find("dense_scaled_vijp")) {
        T = *vijp_layer_type_find("dense"), dense_ops = T.d, ops = *T.d, ops.vijp = scaled_vijp;
        T.d = &ops, T.mp = T.emu = NULL, T.name = "dense_scaled_vijp", T.print = NULL;
        vijp_error err = {0};
        ck_assert_msg(!vijp_layer_register(&T, &err), "%s", err.msg);
    }
    vijp_check_opts o = {.width = 6, .seed = test_seed()};
    vijp_check_result r;
    ck_assert(!vijp_check_layer_run((size_t)vijp_check_find("vijp-round-trip"), "dense_scaled_vijp:6", &o, &r, NULL));
    ck_assert_msg(r.status == VIJP_CHECK_FAILED && r.ratio > 1, "%s", r.detail);
    ck_assert(!vijp_check_layer_run((size_t)vijp_check_find("adjoint"), "dense_scaled_vijp:6", &o, &r, NULL));
    ck_assert_msg(r.status == VIJP_CHECK_PASSED, "%s", r.detail);
}
END_TEST

/* At high precision the bounds stand at the scale of u = 2^-P, far below
 * double's range: tanh's MPFR jvp scaled by 1 + 2^-(P − 20) fails
 * jvp-vs-differences (2^20 u against (n + K)u), by 1 + 2^-(P + 8) it
 * passes (u/256, within the rounding the bound allows).  Once every bound
 * here underflowed to 0 and both failed (and at mpfr:700 the differences'
 * own truncation, 2^-600, failed them).  mpfr:1100 and 4032; with
 * VIJP_TEST_SCALE > 1 also 700 and 2000. */
static const vijp_ops_mp *tanh_mp;
static long jvp_off_bits; /* the jvp is scaled by 1 + 2^-jvp_off_bits */
static void jvp_off(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    tanh_mp->jvp(L, th, X, B, U, V, f);
    mpfr_t d;
    mpfr_init2(d, (mpfr_prec_t)f->prec);
    for (size_t i = 0; i < L->out * B; i++) mpfr_mul_2si(d, V[i], -jvp_off_bits, MPFR_RNDN), mpfr_add(V[i], V[i], d, MPFR_RNDN);
    mpfr_clear(d);
}

START_TEST(battery_sees_a_slightly_wrong_jvp_at_high_precision)
{
    static vijp_layer_type T;
    static vijp_ops_mp mp;
    if (!vijp_layer_type_find("tanh_jvp_off")) {
        T = *vijp_layer_type_find("tanh"), tanh_mp = T.mp, mp = *T.mp, mp.jvp = jvp_off;
        T.mp = &mp, T.name = "tanh_jvp_off", T.print = NULL;
        vijp_error err = {0};
        ck_assert_msg(!vijp_layer_register(&T, &err), "%s", err.msg);
    }
    static const long precs[] = {1100, 4032, 700, 2000};
    size_t np = test_iters(1) > 1 ? 4 : 2;
    for (size_t k = 0; k < np; k++)
        for (int off = 0; off < 2; off++) {
            long P = precs[k];
            char fmt[32];
            snprintf(fmt, sizeof fmt, "mpfr:%ld", P);
            vijp_check_opts o = {.width = 6, .seed = test_seed(), .format = fmt};
            vijp_check_result r;
            vijp_error err = {0};
            jvp_off_bits = off ? P - 20 : P + 8;
            ck_assert_msg(!vijp_check_layer_run((size_t)vijp_check_find("jvp-vs-differences"), "tanh_jvp_off", &o, &r, &err),
                          "%s", err.msg);
            if (off)
                ck_assert_msg(r.status == VIJP_CHECK_FAILED && strtod(r.ratio_text, NULL) > 1000, "%s, 2^-%ld: %s (ratio %s)",
                              fmt, jvp_off_bits, vijp_check_status_name(r.status), r.ratio_text);
            else
                ck_assert_msg(r.status == VIJP_CHECK_PASSED, "%s, 2^-%ld: %s", fmt, jvp_off_bits, r.detail);
        }
}
END_TEST

static vijp_mat theta_of(const vijp_net *net, const vijp_format *f)
{
    vijp_mat th;
    vijp_mat_init(&th, net->layers[0].type->param_count(&net->layers[0]), 1, f);
    if (th.rows) vijp_mat_set_d(&th, net->theta[0]);
    return th;
}

/* Bad input: a clear error code and message, never a crash or a division by zero. */
START_TEST(bad_inputs)
{
    const char *fmt = formats[_i];
    vijp_format F;
    ck_assert(!vijp_format_parse(fmt, &F, NULL));
    vijp_error err = {0};
    vijp_net net;
    ck_assert_int_eq(vijp_net_build(&net, "leaky:0", 1, 4, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "relu"), "leaky:0 should point to relu: %s", err.msg);
    ck_assert_int_eq(vijp_net_build(&net, "conv:3", 1, 4, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4x3", 1, 5, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "relu", 1, 0, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_net_build(&net, "dense:0", 1, 0, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_build(&net, "dense:4,,relu", 2, 0, &err), VIJP_EINVAL);
    /* items past the depth are parsed too (this once ran, exit 0) */
    ck_assert_int_eq(vijp_net_build(&net, "dense:16,tanh,bogus", 2, 16, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "bogus") && strstr(err.msg, "which depth 2 leaves unused"), "%s", err.msg);
    ck_assert_int_eq(vijp_net_build(&net, "dense:16,tanh,conv1d:3x3", 1, 16, &err), VIJP_EDIM);
    ck_assert(!vijp_net_build(&net, "dense:16,tanh,leaky:0.5", 2, 16, &err));
    vijp_net_free(&net);
    /* the catalogue's shape rules: a message and an error code, never a net */
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"conv1d:2x0", 8, VIJP_EINVAL},         /* no kernel */
        {"conv1d:3x3", 8, VIJP_EDIM},           /* 8 is not 3 channels */
        {"conv1d:2x3s0", 8, VIJP_EINVAL},       /* no stride */
        {"conv1d:2x3:mirror", 8, VIJP_EINVAL},  /* unknown padding */
        {"conv1d:2x9:pad=2", 8, VIJP_EDIM},     /* kernel longer than the channel padded by 2 */
        {"conv2d:2x5x4:pad=0", 32, VIJP_EDIM},  /* kernel larger than the 4 x 4 grid */
        {"conv2d:2x3", 32, VIJP_EINVAL},        /* rows missing */
        {"avgpool:3", 8, VIJP_EDIM},            /* window does not divide */
        {"avgpool:1", 8, VIJP_EINVAL},          /* no pooling */
        {"squeeze:2x3", 8, VIJP_EDIM},          /* 8 is not a multiple of 6 */
        {"additive", 7, VIJP_EDIM},             /* odd width */
        {"additive:dense:3+avgpool:3", 6, VIJP_EDIM}, /* a residual function must map h back to h */
        {"additive:additive", 8, VIJP_EINVAL},  /* no nesting */
        {"affine:foo", 8, VIJP_EINVAL},         /* unknown layer in the residual function */
        {"layernorm", 1, VIJP_EDIM},            /* nothing to normalize */
        {"inv1x1:1", 8, VIJP_EINVAL},           /* one channel */
        {"linear:4x5", 12, VIJP_EDIM},          /* 12 is not a multiple of IN = 5 */
        {"linear:4", 12, VIJP_EINVAL},          /* IN missing */
        {"linear:4x0", 12, VIJP_EINVAL},
        {"attention:4x3", 12, VIJP_EINVAL},     /* D not divisible by H */
        {"attention:4x2", 10, VIJP_EDIM},       /* 10 is not a multiple of D = 4 */
        {"attention:4x2:caus", 12, VIJP_EINVAL}, /* unknown modifier */
        {"attention:4", 12, VIJP_EINVAL},       /* H missing */
        {"gelu:2", 8, VIJP_EINVAL},             /* takes no argument */
        /* strict arguments: each of these ran (or crashed) before */
        {"leaky:1e300", 8, VIJP_EINVAL},        /* α·x overflows: ran, printed nan, exit 0 */
        {"leaky:1e-5", 8, VIJP_EINVAL},         /* 1/α overflows binary16; α rounds to a subnormal */
        {"leaky:4096.5", 8, VIJP_EINVAL},       /* just past 2^12 */
        {"leaky:inf", 8, VIJP_EINVAL},
        {"leaky:nan", 8, VIJP_EINVAL},
        {"squeeze:4294967296x4294967296", 16, VIJP_EINVAL}, /* c·f wrapped to 0: SIGFPE */
        {"conv2d:4294967296x3x4294967296", 16, VIJP_EINVAL}, /* c·rows wrapped to 0: SIGFPE */
        {"avgpool:-2", 8, VIJP_EINVAL},         /* strtoul: 2^64 − 2 */
        {"inv1x1:-4", 8, VIJP_EINVAL},
        {"conv1d:2x3s-1", 8, VIJP_EINVAL},
        {"conv1d: 2x3", 8, VIJP_EINVAL},        /* sscanf skipped the blank */
        {"squeeze:+2x2", 8, VIJP_EINVAL},
        {"conv1d:2x3x", 8, VIJP_EINVAL},        /* trailing junk */
        {"conv2d:2x3x0", 8, VIJP_EINVAL},       /* no rows */
        {"dense:16777217", 8, VIJP_EINVAL},     /* wider than VIJP_WIDTH_MAX */
        {"dense:4x99999999999999999999", 8, VIJP_EINVAL}, /* strtoull saturated */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memset(&err, 0, sizeof err);
        int rc = vijp_net_build(&net, bad[k].spec, 1, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].rc && err.msg[0], "'%s' at width %zu: code %d (want %d), message '%s'", bad[k].spec,
                      bad[k].width, rc, bad[k].rc, err.msg);
    }

    /* the slope range's ends are accepted (leaky_relu.c derives them) */
    ck_assert(!vijp_net_build(&net, "leaky:0.000244140625,leaky:4096", 2, 8, &err));
    vijp_net_free(&net);

    /* singular square dense: a zero row in W makes Wᵀ gy = gx unsolvable */
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 4, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 7, NULL));
    for (size_t k = 0; k < 4; k++) net.theta[0][2 + 4 * k] = 0;
    vijp_mat th = theta_of(&net, &F), X, G, Y, Xs;
    vijp_mat_init(&X, 4, 2, &F), vijp_mat_init(&G, 4, 2, &F), vijp_mat_init(&Y, 4, 2, &F), vijp_mat_init(&Xs, 3, 2, &F);
    for (size_t i = 0; i < 8; i++) vijp_mat_set_entry_d(&G, i, 1.0 + (double)i);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], &th, &X, &G, NULL, &Y, &err), VIJP_ESINGULAR);
    ck_assert_int_eq(vijp_layer_inverse(&net.layers[0], &th, &G, &Y, &err), VIJP_ESINGULAR);
    /* mismatched dimensions */
    ck_assert_int_eq(vijp_layer_forward(&net.layers[0], &th, &Xs, &Y, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_layer_vjp(&net.layers[0], &th, &X, &G, &Xs, &err), VIJP_EDIM);
    vijp_mat_clear(&th);
    vijp_net_free(&net);

    /* rank-deficient tall dense: the cokernel exceeds the m − n stored numbers */
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 2, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 7, NULL));
    for (size_t i = 0; i < 4; i++) net.theta[0][i + 4] = 0; /* zero column: R[1,1] = 0 exactly */
    th = theta_of(&net, &F);
    vijp_mat Xt, Gt, c;
    vijp_mat_clear(&Y);
    vijp_mat_init(&Xt, 2, 1, &F), vijp_mat_init(&Gt, 2, 1, &F), vijp_mat_init(&Y, 4, 1, &F), vijp_mat_init(&c, 2, 1, &F);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], &th, &Xt, &Gt, &c, &Y, &err), VIJP_ESINGULAR);
    ck_assert_int_eq(vijp_layer_inverse(&net.layers[0], &th, &Y, &Xt, &err), VIJP_EUNSUPPORTED);
    vijp_mat_clear(&th), vijp_mat_clear(&Xt), vijp_mat_clear(&Gt), vijp_mat_clear(&c), vijp_mat_clear(&Y);
    vijp_mat_init(&Y, 4, 2, &F);
    vijp_net_free(&net);

    /* tanh far out: f'(x) underflows to 0 (sech²(800) < 2^-2000), the vijp must refuse */
    ck_assert(!vijp_net_build(&net, "tanh", 1, 4, &err));
    vijp_mat_set_entry_d(&X, 5, 800.0);
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err) == VIJP_ESINGULAR ||
                         !strcmp(fmt, "mpfr:256") /* unbounded exponent: sech²(800) ≈ 2^-2306 is representable */,
                     1);
    vijp_net_free(&net);

    /* NaN and Inf in the inputs of an engine */
    ck_assert(!vijp_net_build(&net, "dense:4,leaky:0.5", 2, 4, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 7, NULL));
    vijp_mat thn[2];
    ck_assert(!vijp_net_params(&net, &F, thn, NULL));
    vijp_grads out;
    vijp_mat_set_entry_d(&X, 3, NAN);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, thn, &X, &G, &out, &err), VIJP_EDOMAIN);
    ck_assert_msg(strstr(err.msg, "NaN"), "%s", err.msg);
    vijp_mat_set_entry_d(&X, 3, 0), vijp_mat_set_entry_d(&G, 1, INFINITY);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, thn, &X, &G, &out, &err), VIJP_EDOMAIN);
    vijp_net_params_clear(&net, thn);
    net.theta[0][0] = NAN;
    ck_assert_int_eq(vijp_net_params(&net, &F, thn, &err), VIJP_EDOMAIN);
    vijp_net_free(&net);
    vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y), vijp_mat_clear(&Xs);

    /* unknown format names and precisions out of range */
    ck_assert_int_eq(vijp_format_parse("float8", &F, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_parse("mpfr:1", &F, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_parse("mpfr:1000000", &F, &err), VIJP_EINVAL);
}
END_TEST

/* In binary16 tanh' underflows much earlier: sech²(12) ≈ 1.5e-10 < 2^-25, the
 * half-way point below binary16's smallest subnormal 2^-24. */
START_TEST(tanh_underflow_binary16)
{
    vijp_format F;
    ck_assert(!vijp_format_parse("binary16", &F, NULL));
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "tanh", 1, 2, NULL));
    vijp_mat X, G, Y;
    vijp_mat_init(&X, 2, 1, &F), vijp_mat_init(&G, 2, 1, &F), vijp_mat_init(&Y, 2, 1, &F);
    vijp_mat_set_entry_d(&X, 0, 0.5), vijp_mat_set_entry_d(&X, 1, 12.0), vijp_mat_set_entry_d(&G, 1, 1.0);
    vijp_error err = {0};
    ck_assert_int_eq(vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err), VIJP_ESINGULAR);
    vijp_mat_set_entry_d(&X, 1, 3.0); /* sech²(3) ≈ 9.9e-3: fine */
    ck_assert(!vijp_layer_vijp(&net.layers[0], NULL, &X, &G, NULL, &Y, &err));
    vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y);
    vijp_net_free(&net);
}
END_TEST

/* A wide dense layer (m < n) is submersive iff W has rank m.  A W of zeros
 * has rank 0, yet LAPACK's least-squares driver (xGELS) answers it with a
 * zero solution and INFO = 0, where it reports a zero on R's diagonal of
 * any other rank-deficient W; a zero row is rank m − 1 by a zero R[i,i].
 * Both must be refused in every format's route: the double and binary32
 * LAPACK routes, the emulated solves, MPFR's. */
static const char *const wide_formats[] = {"double", "binary32", "binary32@ref", "bfloat16+binary32", "mpfr:128"};

START_TEST(wide_dense_of_rank_below_m)
{
    const char *fmt = wide_formats[_i];
    vijp_format F;
    ck_assert(!vijp_format_parse(fmt, &F, NULL));
    vijp_net net;
    vijp_error err = {0};
    ck_assert(!vijp_net_build(&net, "dense:4", 1, 8, &err)); /* W is 4 × 8 */
    vijp_mat X, G, Y;
    vijp_mat_init(&X, 8, 2, &F), vijp_mat_init(&G, 8, 2, &F), vijp_mat_init(&Y, 4, 2, &F);
    for (size_t i = 0; i < 16; i++) vijp_mat_set_entry_d(&G, i, 1.0 + (double)i);
    for (int zero_row = 0; zero_row < 2; zero_row++) {
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 7, NULL));
        for (size_t k = 0; k < 8; k++) /* column-major 4 × 8: row 1 of W, or all of it */
            for (size_t i = 0; i < 4; i++)
                if (!zero_row || i == 1) net.theta[0][i + 4 * k] = 0;
        vijp_mat th = theta_of(&net, &F);
        memset(&err, 0, sizeof err);
        int rc = vijp_layer_vijp(&net.layers[0], &th, &X, &G, NULL, &Y, &err);
        ck_assert_msg(rc == VIJP_ESINGULAR, "%s, %s: code %d, message '%s'", fmt,
                      zero_row ? "a zero row" : "W = 0", rc, err.msg);
        vijp_mat_clear(&th);
    }
    vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y);
    vijp_net_free(&net);
}
END_TEST

/* Orthogonal initialisation (QR of a Gaussian matrix): WᵀW = I (tall/square)
 * or WWᵀ = I (wide) within the Householder QR bound 16mn·u plus n·u for the
 * product; scaled:G multiplies by G; Gaussian has variance 1/n (checked loosely
 * by its Frobenius norm², a χ² with mn degrees of freedom: 6 σ of slack). */
START_TEST(initialisers)
{
    const size_t shapes[][2] = {{6, 6}, {4, 9}, {9, 4}};
    for (size_t s = 0; s < 3; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], r = m < n ? m : n;
        char spec[32];
        snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
        vijp_net net;
        ck_assert(!vijp_net_build(&net, spec, 1, 0, NULL));
        for (int g = 1; g <= 2; g++) {
            vijp_init in = {.kind = g == 1 ? VIJP_INIT_ORTHOGONAL : VIJP_INIT_SCALED, .gain = g == 1 ? 1.0 : 3.0};
            ck_assert(!vijp_net_init(&net, in, 11, NULL));
            const double *W = net.theta[0];
            for (size_t a = 0; a < r; a++)
                for (size_t b = 0; b < r; b++) {
                    double dot = 0; /* columns (m >= n) or rows (m < n) a and b */
                    for (size_t k = 0; k < (m >= n ? m : n); k++)
                        dot += m >= n ? W[k + a * m] * W[k + b * m] : W[a + k * m] * W[b + k * m];
                    double want = a == b ? in.gain * in.gain : 0;
                    ck_assert_msg(fabs(dot - want) <= in.gain * in.gain * (16.0 * m * n + m + n) * 0x1p-53,
                                  "%s %s: <w_%zu, w_%zu> = %g", spec, g == 1 ? "orthogonal" : "scaled:3", a, b, dot);
                }
        }
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 11, NULL));
        double fro = 0;
        for (size_t k = 0; k < m * n; k++) fro += net.theta[0][k] * net.theta[0][k];
        /* E‖W‖² = m, sd = m·sqrt(2/(mn)) */
        ck_assert_msg(fabs(fro - m) <= 6 * m * sqrt(2.0 / (m * n)), "%s gaussian: ‖W‖² = %g, expected %zu", spec, fro, m);
        /* kaiming-uniform (PyTorch's nn.Linear): W and b in [−a, a], a = 1/√n;
         * E w² = a²/3, Var w² = 4a⁴/45, so Σ w² over the mn + m entries is
         * (mn + m)a²/3 within 6 sd = 6·sqrt(4(mn + m)/45)·a². */
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_KAIMING_UNIFORM, .gain = 1}, 11, NULL));
        double a = 1 / sqrt((double)n), sq = 0, N = (double)(m * n + m);
        for (size_t k = 0; k < m * n + m; k++) {
            ck_assert_msg(fabs(net.theta[0][k]) <= a, "%s kaiming-uniform: entry %zu = %g outside ±%g", spec, k, net.theta[0][k], a);
            sq += net.theta[0][k] * net.theta[0][k];
        }
        ck_assert_msg(fabs(sq - N * a * a / 3) <= 6 * sqrt(4 * N / 45) * a * a, "%s kaiming-uniform: Σw² = %g, expected %g", spec,
                      sq, N * a * a / 3);
        vijp_net_free(&net);
    }
}
END_TEST

/* The circular convolution's FFT vijp (conv_circular.c), which factors each
 * frequency's C × C system once and solves the whole batch with it, on
 * channel counts where partial pivoting swaps rows after its first step.
 * Normwise backward error (Rigal–Gaches) of z = vijp(g) as a solution of
 * Jᵀ z = g, with the residual formed by the layer's own vjp:
 *   η = ‖vjp(z) − g‖ / (‖J‖_F ‖z‖ + ‖g‖) ≤ (2·5·log₂P + 3C·2^(C−1) + CK + 1)·u:
 * the forward and inverse FFTs (Higham, ASNA §24.1: about 5 log₂P u each),
 * LU with partial pivoting and its worst-case growth 2^(C−1) (Thm 9.4:
 * γ_3C ρ), and the vjp's own dot products of C·K terms (eq. 3.5), ‖J‖_2 ≤
 * ‖J‖_F.  A solve that eliminates with the wrong multipliers has η of order
 * 1.  And the batch changes nothing: each sample's vijp equals that sample's
 * alone, bit for bit. */
START_TEST(circular_vijp_backward_error)
{
    static const struct {
        const char *spec;
        size_t width, C, K, P;
    } c[] = {{"conv1d:8x3:circular", 64, 8, 3, 8}, {"conv2d:6x3x4:circular", 96, 6, 9, 16}};
    const size_t B = 3;
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_net net;
    ck_assert(!vijp_net_build(&net, c[_i].spec, 1, c[_i].width, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, test_seed(), NULL));
    vijp_mat th = theta_of(&net, &F), X, G, Z, R, z1, g1;
    size_t n = c[_i].width;
    vijp_mat_init(&X, n, B, &F), vijp_mat_init(&G, n, B, &F), vijp_mat_init(&Z, n, B, &F), vijp_mat_init(&R, n, B, &F);
    vijp_mat_init(&z1, n, 1, &F), vijp_mat_init(&g1, n, 1, &F);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 1);
    for (size_t i = 0; i < n * B; i++) X.d[i] = vijp_rng_normal(&rng), G.d[i] = vijp_rng_normal(&rng);
    vijp_error err = {0};
    const vijp_layer *L = &net.layers[0];
    ck_assert_msg(!vijp_layer_vijp(L, &th, &X, &G, NULL, &Z, &err), "%s", err.msg);
    ck_assert(!vijp_layer_vjp(L, &th, &X, &Z, &R, NULL));
    double J2 = 0, r2 = 0, z2 = 0, g2 = 0;
    for (size_t k = 0; k < c[_i].C * c[_i].C * c[_i].K; k++) J2 += (double)c[_i].P * th.d[k] * th.d[k]; /* each weight P times in J */
    for (size_t i = 0; i < n * B; i++) r2 += (R.d[i] - G.d[i]) * (R.d[i] - G.d[i]), z2 += Z.d[i] * Z.d[i], g2 += G.d[i] * G.d[i];
    double C = (double)c[_i].C, eta = sqrt(r2) / (sqrt(J2) * sqrt(z2) + sqrt(g2));
    double bound = (10 * log2((double)c[_i].P) + 3 * C * pow(2, C - 1) + C * (double)c[_i].K + 1) * 0x1p-53;
    ck_assert_msg(eta <= bound, "%s: backward error %g > %g", c[_i].spec, eta, bound);
    for (size_t b = 0; b < B; b++) {
        vijp_mat xb = X;
        xb.cols = 1, xb.d = X.d + b * n;
        vijp_mat_copy_range(&g1, 0, &G, b * n, n);
        ck_assert(!vijp_layer_vijp(L, &th, &xb, &g1, NULL, &z1, NULL));
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(z1.d[i] == Z.d[b * n + i], "%s: sample %zu alone differs at %zu", c[_i].spec, b, i);
    }
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Z), vijp_mat_clear(&R);
    vijp_mat_clear(&z1), vijp_mat_clear(&g1);
    vijp_net_free(&net);
}
END_TEST

Suite *suite_layers(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("battery");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, battery, 0, (int)(2 * NCASES));
    tcase_add_loop_test(tc, battery_double_only, 0, (int)NCASES);
    hiprec_cases();
    tcase_add_loop_test(tc, battery_high_precision, 0, (int)n_hiprec);
    tcase_add_test(tc, battery_sees_a_broken_vijp);
    tcase_add_test(tc, battery_sees_a_slightly_wrong_jvp_at_high_precision);
    tcase_add_loop_test(tc, bad_inputs, 0, 2);
    tcase_add_test(tc, tanh_underflow_binary16);
    tcase_add_loop_test(tc, wide_dense_of_rank_below_m, 0, (int)(sizeof wide_formats / sizeof *wide_formats));
    tcase_add_test(tc, initialisers);
    tcase_add_loop_test(tc, circular_vijp_backward_error, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
