/* Residual blocks (src/layers/residual.c): the spec's errors and printing,
 * the fixed-point inverse against the MPFR oracle's at 256 bits within the
 * contract's model, its refusal where Lip(f) >= 1 (a bijection it cannot
 * invert, never a wrong x), the reversible engine's reconstruction, and
 * blocks in JSON nets: nesting (residual in residual, residual in a
 * coupling block's F), sub-layer params in PyTorch's layout, and malformed
 * files refused naming the field's path.  The operators themselves run the
 * whole battery in t-layers.c and t-check-layer.c, the engines in
 * t-engines.c. */
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include "vijp/catalogue.h"
#include "vijp/vijp.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4
#define NB 3

START_TEST(spec_errors)
{
    static const struct {
        const char *spec;
        size_t width;
        int code;
        const char *says;
    } bad[] = {
        {"residual:dense:6+tanh", 4, VIJP_EDIM, "the identity skip gives 4"}, /* f changes the width, no P */
        {"residual:dense:6:skip=dense:5", 4, VIJP_EDIM, "their widths must agree"},
        {"residual:dense:4++tanh", 4, VIJP_EINVAL, "empty layer"},
        {"residual:tanh+", 4, VIJP_EINVAL, "empty layer"},
        {"residual:tanh:skip=", 4, VIJP_EINVAL, "empty layer in the skip path"},
        {"residual:additive", 4, VIJP_EINVAL, "nest blocks in a JSON net"},
        {"residual:residual", 4, VIJP_EINVAL, "nest blocks in a JSON net"},
        {"residual:foo", 4, VIJP_EINVAL, "unknown layer 'foo'"},
        {"residual:dense:0", 4, VIJP_EINVAL, "f, layer 0"},
        {"residual:tanh:skip=dense:4x3", 4, VIJP_EDIM, "expects 3 inputs"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        int rc = vijp_layer_parse(&L, bad[k].spec, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].code && strstr(err.msg, bad[k].says), "%s: code %d, '%s'", bad[k].spec, rc, err.msg);
        ck_assert_ptr_null(L.type);
    }
}
END_TEST

/* print() gives a spec that parses to the same block (same print, widths, θ size). */
START_TEST(print_round_trip)
{
    static const char *const specs[] = {"residual", "residual:dense:8+tanh+dense:4",
                                        "residual:dense:3+leaky:0.25+dense:6:skip=dense:6+tanh",
                                        "residual:layernorm+dense:2:skip=dense:2"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        vijp_layer a, b;
        char pa[256], pb[256];
        ck_assert(!vijp_layer_parse(&a, specs[k], N, NULL));
        vijp_layer_spec(&a, pa, sizeof pa);
        ck_assert_msg(!vijp_layer_parse(&b, pa, N, NULL), "%s printed as %s", specs[k], pa);
        vijp_layer_spec(&b, pb, sizeof pb);
        ck_assert_str_eq(pa, pb);
        ck_assert(a.in == b.in && a.out == b.out && a.type->param_count(&a) == b.type->param_count(&b));
        vijp_layer_clear(&a), vijp_layer_clear(&b);
    }
}
END_TEST

/* residual:dense:4+tanh with W = s·Q (Q orthogonal: ‖W‖₂ = s) and b from the
 * init, at width N; theta (N² + N doubles) filled. */
static void scaled_block(vijp_net *net, double s, uint64_t seed)
{
    ck_assert(!vijp_net_build(net, "residual:dense:4+tanh", 1, N, NULL));
    ck_assert(!vijp_net_init(net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, seed, NULL));
    for (size_t i = 0; i < N * N; i++) net->theta[0][i] *= s;
}

static void seeded_at(vijp_mat *X, const vijp_format *F, uint64_t seed, double sd)
{
    vijp_rng r;
    vijp_rng_seed(&r, seed);
    double v[N * NB];
    for (size_t i = 0; i < N * NB; i++) v[i] = sd * vijp_rng_normal(&r);
    vijp_mat_init(X, N, NB, F), vijp_mat_set_d(X, v);
}

static void seeded(vijp_mat *X, const vijp_format *F, uint64_t seed) { seeded_at(X, F, seed, 2); }

/* f(x) = tanh(Wx + b), ‖W‖₂ = 1/2: Lip(f) <= 1/2, so ‖J⁻¹‖₂ <= 2 everywhere.
 * The double inverse x̂ of y stops at a step within 64u(‖y‖∞ + ‖x̂‖∞), and
 * r = x̂ + f(x̂) − y is bounded (2-norms, first order) by
 *   √n·u‖x̂‖∞ (the last subtraction) + ½·√n·64u(‖y‖∞ + ‖x̂‖∞) (f moved by
 *   the step) + γ_(n+1)‖|W||x̂| + |b|‖ + 4u‖f‖ (f's rounding: the dot product,
 *   tanh′ <= 1, tanh within 2 ulps),
 * so x̂ is within 2‖r‖ of y's exact preimage, which the MPFR oracle's
 * inverse at 256 bits gives to 2^-240 (the same bound at u = 2^-256).  The
 * oracle's own round trip at 256 bits: within 2‖r‖ at u = 2^-256 plus its
 * forward's rounding pulled back, 1e-70 with room. */
START_TEST(inverse_vs_oracle)
{
    vijp_net net;
    scaled_block(&net, 0.5, 11);
    vijp_format D, M;
    ck_assert(!vijp_format_parse("double", &D, NULL) && !vijp_format_parse("mpfr:256", &M, NULL));
    vijp_mat thD, thM, X, Y, Xh, YM, XM, XR, YR, X2;
    vijp_mat_init(&thD, N * N + N, 1, &D), vijp_mat_set_d(&thD, net.theta[0]);
    vijp_mat_init(&thM, N * N + N, 1, &M), vijp_mat_convert(&thM, &thD);
    seeded(&X, &D, 12);
    vijp_mat_init(&Y, N, NB, &D), vijp_mat_init(&Xh, N, NB, &D);
    vijp_mat_init(&YM, N, NB, &M), vijp_mat_init(&XM, N, NB, &M);
    vijp_error err = {0};
    ck_assert(!vijp_layer_forward(&net.layers[0], &thD, &X, &Y, &err));
    ck_assert_msg(!vijp_layer_inverse(&net.layers[0], &thD, &Y, &Xh, &err), "%s", err.msg);
    vijp_mat_convert(&YM, &Y);
    ck_assert_msg(!vijp_layer_inverse(&net.layers[0], &thM, &YM, &XM, &err), "%s", err.msg);
    const double u = ldexp(1, -53), *th = net.theta[0];
    for (size_t b = 0; b < NB; b++) {
        double xm = 0, ym = 0, d2 = 0, f2 = 0;
        for (size_t i = 0; i < N; i++) {
            double xi = vijp_mat_get_d(&Xh, i + b * N), yi = vijp_mat_get_d(&Y, i + b * N), s = fabs(th[N * N + i]);
            xm = fmax(xm, fabs(xi)), ym = fmax(ym, fabs(yi)), f2 += (yi - xi) * (yi - xi);
            for (size_t j = 0; j < N; j++) s += fabs(th[i + j * N]) * fabs(vijp_mat_get_d(&Xh, j + b * N));
            d2 += s * s;
        }
        double r = sqrt((double)N) * u * xm + 0.5 * sqrt((double)N) * 64 * u * (ym + xm) + 1.01 * (N + 1) * u * sqrt(d2) +
                   4 * u * sqrt(f2);
        for (size_t i = 0; i < N; i++) {
            double e = fabs(vijp_mat_get_d(&Xh, i + b * N) - vijp_mat_get_d(&XM, i + b * N));
            ck_assert_msg(e <= 2 * 1.1 * r, "x̂[%zu,%zu] off the oracle's by %g > %g", i, b, e, 2.2 * r);
        }
    }
    /* the oracle's own round trip at 256 bits */
    vijp_mat_init(&XR, N, NB, &M), vijp_mat_init(&YR, N, NB, &M), vijp_mat_init(&X2, N, NB, &M);
    vijp_mat_convert(&XR, &X);
    ck_assert(!vijp_layer_forward(&net.layers[0], &thM, &XR, &YR, &err));
    ck_assert(!vijp_layer_inverse(&net.layers[0], &thM, &YR, &X2, &err));
    ck_assert(vijp_xnum_double(vijp_rel_err(&X2, &XR)) <= 1e-70);
    vijp_mat *all[] = {&thD, &thM, &X, &Y, &Xh, &YM, &XM, &XR, &YR, &X2};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) vijp_mat_clear(all[k]);
    vijp_net_free(&net);
}
END_TEST

/* y = x + tanh(3x) (W = 3I, b = 0) is a bijection, but Lip(f) = 3: at
 * points near 0 (|x| ~ 0.1, where f′ ~ 3, not out in tanh's flat tails,
 * where the iteration contracts and finds the one preimage) its steps
 * grow, and the inverse refuses in double and in MPFR; so does the
 * reversible engine, with the inverse's message.  W = −1.5I (y = x −
 * tanh(1.5x), not even monotone) likewise. */
START_TEST(lipschitz_above_one_is_refused)
{
    static const double scale[] = {3, -1.5};
    for (size_t k = 0; k < 2; k++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, "residual:dense:4+tanh", 1, N, NULL));
        memset(net.theta[0], 0, (N * N + N) * sizeof(double));
        for (size_t i = 0; i < N; i++) net.theta[0][i + i * N] = scale[k];
        static const char *const fmts[] = {"double", "mpfr:128"};
        for (size_t f = 0; f < 2; f++) {
            vijp_format F;
            ck_assert(!vijp_format_parse(fmts[f], &F, NULL));
            vijp_mat th, X, Y, Xh;
            vijp_mat_init(&th, N * N + N, 1, &F), vijp_mat_set_d(&th, net.theta[0]);
            seeded_at(&X, &F, 13, 0.1);
            vijp_mat_init(&Y, N, NB, &F), vijp_mat_init(&Xh, N, NB, &F);
            vijp_error err = {0};
            ck_assert(!vijp_layer_forward(&net.layers[0], &th, &X, &Y, &err));
            int rc = vijp_layer_inverse(&net.layers[0], &th, &Y, &Xh, &err);
            ck_assert_msg(rc == VIJP_ESINGULAR, "W = %gI in %s: inverse answered %d", scale[k], fmts[f], rc);
            if (f == 0) ck_assert_msg(strstr(err.msg, "Lip(f) >= 1"), "%s", err.msg);
            vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y), vijp_mat_clear(&Xh);
        }
        vijp_net_free(&net);
    }
    char args[200];
    snprintf(args, sizeof args, "grad --net residual:dense:4+tanh --width 4 --depth 1 --init scaled:3 --engine reversible");
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc != CLI_OK && strstr(r.err, "Lip(f) >= 1"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* The reversible engine's reconstruction (vijp_reversible_reconstruction)
 * through a depth-3 stack of the Lip <= 1/2 blocks: in double each rebuilt
 * input is within the inverse_vs_oracle bound of its layer plus 2× the error
 * of the output it starts from (‖J⁻¹‖ <= 2), relative to sizes of order
 * ‖x‖ (~3): 2²·4·2.2·(√n·70 + n + 6)u·(‖y‖ + ‖x‖)/‖x‖ < 4e-12; at 256
 * bits the same chain is below 1e-65. */
START_TEST(reconstruction_vs_oracle)
{
    static const char *const fmts[] = {"double", "mpfr:256"};
    static const double within[] = {4e-12, 1e-65};
    for (size_t f = 0; f < 2; f++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, "residual:dense:4+tanh", 3, N, NULL));
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 14, NULL));
        for (size_t l = 0; l < 3; l++)
            for (size_t i = 0; i < N * N; i++) net.theta[l][i] *= 0.5;
        vijp_format F;
        ck_assert(!vijp_format_parse(fmts[f], &F, NULL));
        vijp_mat th[3], X;
        ck_assert(!vijp_net_params(&net, &F, th, NULL));
        seeded(&X, &F, 15);
        vijp_xnum rec[3];
        vijp_error err = {0};
        ck_assert_msg(!vijp_reversible_reconstruction(&net, th, &X, rec, &err), "%s", err.msg);
        for (size_t l = 0; l < 3; l++)
            ck_assert_msg(vijp_xnum_double(rec[l]) <= within[f], "%s layer %zu: %g", fmts[f], l, vijp_xnum_double(rec[l]));
        ck_assert(vijp_xnum_double(rec[0]) > 0 || f == 1); /* measured, not skipped: the inverse ran */
        vijp_net_params_clear(&net, th);
        vijp_mat_clear(&X);
        vijp_net_free(&net);
    }
}
END_TEST

/* ---- JSON nets ---- */

static char dir[512];

static const char *at(const char *name)
{
    static char buf[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int parse(vijp_net *net, const char *layers, vijp_error *err)
{
    char text[4096];
    snprintf(text, sizeof text, "{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": [%s]}", layers);
    return vijp_net_parse_json(net, text, strlen(text), "net.json", dir, err);
}

#define DENSE(a) "{\"type\": \"dense\", \"args\": \"" a "\"}"
#define TANH "{\"type\": \"tanh\"}"

/* A JSON block is the spec's block (same print), its sub-layers' torch
 * {weight, bias} land at their place in θ (W column-major, then b), and
 * nested blocks compose: the outer block's forward equals x + d2(z + t(d1 z)),
 * z = d1' ... evaluated layer by layer with the same operations, bit for bit. */
START_TEST(json_blocks)
{
    make_temp_dir(dir, sizeof dir, "residual");
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!parse(&net, "{\"type\": \"residual\", \"layers\": [" DENSE("8") "," TANH "," DENSE("6") "], \"skip\": ["
                               DENSE("6") "]}", &err), "%s", err.msg);
    char p[256];
    vijp_layer_spec(&net.layers[0], p, sizeof p);
    ck_assert_str_eq(p, "residual:dense:8x4+tanh+dense:6x8:skip=dense:6x4");
    ck_assert_uint_eq(net.layers[0].out, 6);
    vijp_net_free(&net);

    /* PyTorch's layout: skip's nn.Linear(4, 2) weight [2, 4] row-major */
    double w[8], bias[2], d[2] = {2, 4};
    for (int i = 0; i < 8; i++) w[i] = i + 1;
    bias[0] = -1, bias[1] = -2;
    size_t ws[2] = {2, 4}, bs = 2;
    ck_assert(!vijp_npy_write(at("w.npy"), 2, ws, w, NULL) && !vijp_npy_write(at("b.npy"), 1, &bs, bias, NULL));
    size_t ts = 10;
    double t[10] = {0};
    for (int i = 0; i < 10; i++) t[i] = 0.1 * i;
    ck_assert(!vijp_npy_write(at("t.npy"), 1, &ts, t, NULL));
    ck_assert_msg(!parse(&net, "{\"type\": \"residual\", \"layers\": [{\"type\": \"dense\", \"args\": \"2\", \"params\": "
                               "{\"theta\": \"t.npy\"}}], \"skip\": [{\"type\": \"dense\", \"args\": \"2\", \"params\": "
                               "{\"weight\": \"w.npy\", \"bias\": \"b.npy\"}}]}", &err), "%s", err.msg);
    ck_assert(net.given[0]);
    const double *th = net.theta[0];
    for (int i = 0; i < 10; i++) ck_assert(th[i] == t[i]);                       /* f's θ as given */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) ck_assert(th[10 + i + 2 * j] == w[4 * i + j]); /* W[i, j], column-major */
    ck_assert(th[18] == bias[0] && th[19] == bias[1]);
    (void)d;
    vijp_net_free(&net);

    /* residual inside residual, residual inside additive's F (and G) */
    const char *inner = "{\"type\": \"residual\", \"layers\": [" DENSE("4") "," TANH "]}";
    char layers[2048];
    snprintf(layers, sizeof layers,
             "{\"type\": \"residual\", \"layers\": [" DENSE("4") ", %s, " DENSE("4") "]},"
             "{\"type\": \"additive\", \"F\": [{\"type\": \"residual\", \"layers\": [" DENSE("2") "," TANH "]}],"
             " \"G\": [{\"type\": \"residual\", \"layers\": [" DENSE("2") "," TANH "]}]}", inner);
    ck_assert_msg(!parse(&net, layers, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 16, NULL));
    const vijp_layer *outer = &net.layers[0];
    ck_assert_uint_eq(vijp_residual_count(outer, 0), 3);
    ck_assert_str_eq(vijp_residual_sub(outer, 0, 1)->type->name, "residual");
    ck_assert_str_eq(vijp_coupling_sub(&net.layers[1], 0, 0)->type->name, "residual");
    vijp_format D;
    ck_assert(!vijp_format_parse("double", &D, NULL));
    vijp_mat th2[2], X, Y, H1, H2, H3;
    ck_assert(!vijp_net_params(&net, &D, th2, NULL));
    seeded(&X, &D, 17);
    vijp_mat_init(&Y, N, NB, &D), vijp_mat_init(&H1, N, NB, &D), vijp_mat_init(&H2, N, NB, &D), vijp_mat_init(&H3, N, NB, &D);
    ck_assert(!vijp_layer_forward(outer, &th2[0], &X, &Y, NULL));
    /* by hand: H1 = d1(x), H2 = inner(H1), H3 = d2(H2), y = x + H3 */
    size_t off = 0;
    const vijp_layer *s[3];
    vijp_mat ts3[3];
    for (size_t k = 0; k < 3; k++) {
        s[k] = vijp_residual_sub(outer, 0, k);
        size_t P = s[k]->type->param_count(s[k]);
        vijp_mat_init(&ts3[k], P, 1, &D), vijp_mat_set_d(&ts3[k], net.theta[0] + off);
        off += P;
    }
    ck_assert(!vijp_layer_forward(s[0], &ts3[0], &X, &H1, NULL));
    ck_assert(!vijp_layer_forward(s[1], &ts3[1], &H1, &H2, NULL));
    ck_assert(!vijp_layer_forward(s[2], &ts3[2], &H2, &H3, NULL));
    for (size_t i = 0; i < N * NB; i++)
        ck_assert(vijp_mat_get_d(&Y, i) == vijp_mat_get_d(&X, i) + vijp_mat_get_d(&H3, i));
    for (size_t k = 0; k < 3; k++) vijp_mat_clear(&ts3[k]);
    vijp_net_params_clear(&net, th2);
    vijp_mat_clear(&X), vijp_mat_clear(&Y), vijp_mat_clear(&H1), vijp_mat_clear(&H2), vijp_mat_clear(&H3);
    vijp_net_free(&net);
    remove_tree(dir);
}
END_TEST

/* `vijp ARGS` (grad --engine all --json) must give every engine's ∇x and
 * ∇θ within bound of the reference; the reversible engine keeps nothing
 * where every block inverts (invertible_all). */
static void all_engines_within(const char *args, double bound, int invertible_all)
{
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je), *run;
    ck_assert_msg(o != NULL, "%s", je.text);
    size_t i, engines = 0;
    json_array_foreach(json_object_get(o, "runs"), i, run) {
        const char *e = json_string_value(json_object_get(run, "engine"));
        double gx = json_real_value(json_object_get(run, "input_grad_rel_err"));
        double gt = json_real_value(json_object_get(run, "param_grad_rel_err_max"));
        ck_assert_msg(gx <= bound && gt <= bound, "%s: %g, %g", e, gx, gt);
        if (invertible_all && !strcmp(e, "reversible"))
            ck_assert_int_eq(json_integer_value(json_object_get(run, "stored_bytes")), 0);
        engines++;
    }
    ck_assert_uint_eq(engines, 5);
    json_decref(o);
    run_free(&r);
}

/* Nested blocks through every engine against the MPFR reference (vijp grad
 * --engine all, at 256 bits, reference at 512): residual in residual (f =
 * W₂(z + tanh(W₃z)), z = W₁x, ‖W‖ = 1/2 by scaled:0.5, so Lip(f) <= 3/4
 * and the reversible engine rebuilds by fixed-point iteration), a
 * residual block as an additive block's F and G, and an additive block
 * whose F and G differ, F widening inside (2 -> 6 -> 2).  As in t-engines.c's
 * agree_at_256_bits: every engine is exact to 2^-256 times the conditioning
 * of this depth-2 net (far below 1e10), so 60 digits is a bound with margin. */
START_TEST(json_nested_engines)
{
    make_temp_dir(dir, sizeof dir, "residual");
    FILE *f = fopen(at("nest.json"), "w");
    ck_assert(f != NULL);
    fputs("{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": ["
          "{\"type\": \"additive\", \"F\": [" DENSE("6") "," TANH "," DENSE("2") "], \"G\": [" TANH "]},"
          "{\"type\": \"additive\", \"F\": [{\"type\": \"residual\", \"layers\": [" DENSE("4") "," TANH "," DENSE("2") "]}],"
          " \"G\": [{\"type\": \"residual\", \"layers\": [" DENSE("4") "," TANH "," DENSE("2") "]}]},"
          "{\"type\": \"residual\", \"layers\": [" DENSE("4") ", {\"type\": \"residual\", \"layers\": [" DENSE("4") ","
          TANH "]}, " DENSE("4") "]}]}", f);
    ck_assert_int_eq(fclose(f), 0);
    char args[800];
    snprintf(args, sizeof args, "grad --net '%s' --engine all --init scaled:0.5 --batch 2 --format mpfr:256 --json",
             at("nest.json"));
    all_engines_within(args, 1e-60, 1);
    remove_tree(dir);
}
END_TEST

/* ResNet's downsampling block: f = conv 3 × 3 stride 2 widening 2 -> 4
 * channels, BatchNorm, ReLU, conv 3 × 3; P = conv 1 × 1 stride 2 widening
 * 2 -> 4, BatchNorm.  P alone loses rank at every weight (4 rows on 2
 * inputs per position): declared never submersive, its own vijp refuses,
 * and the block (J = J_f + J_P, 16 × 32, full row rank at PyTorch's
 * initialisation) goes through every engine as the nets above do (bound as
 * there: 2^-200 times a depth-1 conditioning far below 1e5). */
START_TEST(downsampling_skip)
{
    vijp_layer P;
    vijp_error err = {0};
    ck_assert(!vijp_layer_parse(&P, "conv2d:2x1x4s2:out=4:pad=0", 32, &err));
    ck_assert(P.type->declare(&P) & VIJP_DECL_NEVER_SUBMERSIVE);
    vijp_format D;
    vijp_format_fixed(&D, VIJP_DOUBLE);
    vijp_mat th, X, Gx, Gy;
    vijp_mat_init(&th, P.type->param_count(&P), 1, &D), vijp_mat_init(&X, 32, 1, &D), vijp_mat_init(&Gx, 32, 1, &D);
    vijp_mat_init(&Gy, 16, 1, &D);
    for (size_t i = 0; i < th.rows; i++) vijp_mat_set_entry_d(&th, i, 0.25 + 0.125 * (double)i);
    for (size_t i = 0; i < 32; i++) vijp_mat_set_entry_d(&X, i, 1), vijp_mat_set_entry_d(&Gx, i, 1);
    ck_assert_int_eq(vijp_layer_vijp(&P, &th, &X, &Gx, NULL, &Gy, &err), VIJP_ESINGULAR);
    ck_assert_msg(strstr(err.msg, "loses rank whatever the weights"), "%s", err.msg);
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Gx), vijp_mat_clear(&Gy);
    vijp_layer_clear(&P);
    all_engines_within("grad --net 'residual:conv2d:2x3x4s2:out=4+batchnorm:4:affine+relu+conv2d:4x3x2"
                       ":skip=conv2d:2x1x4s2:out=4:pad=0+batchnorm:4:affine' --width 32 --depth 1 --engine all "
                       "--init kaiming-uniform --format mpfr:200 --json", 1e-55, 0);
}
END_TEST

START_TEST(json_errors)
{
    make_temp_dir(dir, sizeof dir, "residual");
    double t[4] = {1, 2, 3, 4};
    size_t ts = 4;
    ck_assert(!vijp_npy_write(at("t4.npy"), 1, &ts, t, NULL));
    static const struct {
        const char *layers, *says;
    } bad[] = {
        {"{\"type\": \"residual\"}", "layers[0].layers: missing"},
        {"{\"type\": \"residual\", \"layers\": []}", "layers[0].layers: 0 layers"},
        {"{\"type\": \"residual\", \"layers\": [" TANH "], \"skipp\": []}", "layers[0]: unknown field 'skipp'"},
        {"{\"type\": \"residual\", \"layers\": [" TANH ", {\"type\": \"dense\"}]}", "layers[0].layers[1]: dense needs"},
        {"{\"type\": \"residual\", \"layers\": [" TANH ", {\"args\": \"2\"}]}", "layers[0].layers[1].type: missing"},
        {"{\"type\": \"residual\", \"layers\": [" DENSE("6") "]}", "layers[0]: residual: f maps 4 -> 6"},
        {"{\"type\": \"residual\", \"layers\": [" TANH ", {\"type\": \"residual\", \"layers\": [{\"type\": \"dense\", "
         "\"args\": \"3\", \"params\": {\"theta\": \"t4.npy\"}}]}]}", "layers[0].layers[1].layers[0].params.theta"},
        {"{\"type\": \"residual\", \"layers\": [" DENSE("4") ", {\"type\": \"dense\", \"args\": \"4\", \"params\": "
         "{\"theta\": \"t4.npy\"}}]}", "layers[0].layers[1].params.theta"},
        {"{\"type\": \"additive\", \"F\": [" DENSE("2") "]}", "layers[0].G: missing"},
        {"{\"type\": \"additive\", \"F\": [" DENSE("2") "], \"G\": [" DENSE("3") "]}", "must map the half width 2 back"},
        {"{\"type\": \"additive\", \"F\": [" DENSE("3") "], \"G\": [" DENSE("3") "]}", "must map the half width 2 back"},
        {"{\"type\": \"affine\", \"F\": [" TANH "], \"G\": [" TANH "]}", "layers[0]: unknown field 'F'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_net net;
        vijp_error err = {0};
        int rc = parse(&net, bad[k].layers, &err);
        ck_assert_msg(rc && strstr(err.msg, bad[k].says), "case %zu: code %d, '%s' (want '%s')", k, rc, err.msg,
                      bad[k].says);
    }
    remove_tree(dir);
}
END_TEST

Suite *suite_residual(void)
{
    Suite *s = suite_create("residual");
    TCase *tc = tcase_create("residual");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, spec_errors);
    tcase_add_test(tc, print_round_trip);
    tcase_add_test(tc, inverse_vs_oracle);
    tcase_add_test(tc, lipschitz_above_one_is_refused);
    tcase_add_test(tc, reconstruction_vs_oracle);
    tcase_add_test(tc, json_blocks);
    tcase_add_test(tc, json_nested_engines);
    tcase_add_test(tc, downsampling_skip);
    tcase_add_test(tc, json_errors);
    suite_add_tcase(s, tc);
    return s;
}
