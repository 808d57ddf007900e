/* The native route for the mixed FP8, MX and tensor-scaled formats
 * (src/format/emulable.h), against the MPFR route it replaces: each layer
 * operator through vijp_layer_* (the emulation, then the storage rounding)
 * equals the type's MPFR operator called directly and stored as
 * src/layer/layer.c stores it (vijp_mat_store or vijp_mat_store_as with
 * the gradient role), bit for bit, along a net's forward pass and its
 * backward pass (vjp, vjp_param, fragment, vijp).  No tolerance: the
 * claim is equality, by the theorem src/emu/emu.h cites (binary32
 * accumulation of exact products).  Which formats take which route is
 * checked too.  The results compared here are rounded to FP8 or MX, which
 * hides most last-bit errors of a sum: the arithmetic itself is checked
 * before any storage rounding by t-emu-dense and t-emu-act, which run
 * e4m3+binary32 and mxfp8+binary32 against the oracles; this file checks
 * the route's plumbing (operators, stores and their roles, fragments). */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "vijp/mat.h"
#include "vijp/net.h"
#include "layer/route.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const NATIVE[] = {"e4m3+binary32",      "e5m2+binary32",  "e4m3:sat+binary32", "mxfp8+binary32",
                                     "mxfp8e5m2+binary32", "mxfp6+binary32", "mxfp4:ceil+binary32", "nvfp4+binary32",
                                     "fp8+binary32"};
#define N_NATIVE (sizeof NATIVE / sizeof *NATIVE)

START_TEST(fp8_formats_take_their_route)
{
    static const char *const mpfr_route[] = {"e4m3", "e5m2", "e4m3:sat", "e4m3+tc:h100", "e4m3:ftz+binary32",
                                             "e4m3:sr+binary32"};
    for (size_t k = 0; k < N_NATIVE + sizeof mpfr_route / sizeof *mpfr_route; k++) {
        const char *name = k < N_NATIVE ? NATIVE[k] : mpfr_route[k - N_NATIVE];
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(name, &f, NULL), 0);
        vijp_route_kind want = k < N_NATIVE ? VIJP_ROUTE_EMULATED : VIJP_ROUTE_MPFR;
        ck_assert_msg(vijp_route_of(&f).kind == want, "%s: route %d, want %d", name, (int)vijp_route_of(&f).kind,
                      (int)want);
    }
}
END_TEST

static void expect_equal(const vijp_mat *got, const vijp_mat *want, const char *fmt, size_t layer, const char *op)
{
    for (size_t i = 0; i < vijp_mat_len(want); i++) {
        double a = vijp_mat_get_d(got, i), b = vijp_mat_get_d(want, i); /* exact: values of the format */
        int ok = (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
        ck_assert_msg(ok, "%s, layer %zu, %s, entry %zu: native route %a, MPFR route %a", fmt, layer, op, i, a, b);
    }
}

/* The MPFR route's operands: a's values in an MPFR twin (exact), kept in
 * the k-th of the caller's slots (freed by twins_clear). */
static mpfr_t *twin(vijp_mat *slots, int k, const vijp_mat *a)
{
    vijp_mat_init_mp(&slots[k], a, 1);
    return slots[k].m;
}

static void twins_clear(vijp_mat *slots, int n)
{
    for (int k = 0; k < n; k++) vijp_mat_clear(&slots[k]);
}

/* One format along the net: forward through every layer, then back. */
static void along_net(const char *fmt)
{
    enum { WIDTH = 40, B = 3 }; /* 40: an MX column is a block of 32 and one of 8 */
    vijp_format f;
    vijp_net net;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_format_parse(fmt, &f, NULL), 0);
    ck_assert_msg(!vijp_net_build(&net, "dense:40,tanh,dense:24,leaky:0.5,dense:40,gelu", 1, WIDTH, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 7, &err));
    vijp_mat *th = calloc(net.depth, sizeof *th), *X = calloc(net.depth + 1, sizeof *X);
    ck_assert(!vijp_net_params(&net, &f, th, &err));
    double *d = calloc(WIDTH * B, sizeof *d);
    vijp_rng r;
    test_case_rng(&r, 0x66703865, 0);
    for (size_t i = 0; i < WIDTH * B; i++) d[i] = 2 * vijp_rng_normal(&r);
    vijp_mat_init(&X[0], WIDTH, B, &f), vijp_mat_set_d(&X[0], d);
    for (size_t l = 0; l < net.depth; l++) {
        const vijp_layer *L = &net.layers[l];
        vijp_mat ref;
        vijp_mat_init(&X[l + 1], L->out, B, &f), test_mat_init_mp(&ref, L->out, B, &f);
        ck_assert_msg(!vijp_layer_forward(L, &th[l], &X[l], &X[l + 1], &err), "%s", err.msg);
        vijp_mat tw[4];
        L->type->mp->forward(L, twin(tw, 0, &th[l]), twin(tw, 1, &X[l]), B, ref.m, &f), vijp_mat_store(&ref);
        twins_clear(tw, 2);
        expect_equal(&X[l + 1], &ref, fmt, l, "forward");
        vijp_mat_clear(&ref);
    }
    vijp_mat G;
    size_t top = net.layers[net.depth - 1].out;
    vijp_mat_init(&G, top, B, &f);
    for (size_t i = 0; i < top * B; i++) d[i] = vijp_rng_normal(&r);
    vijp_mat_set_d_as(&G, d, VIJP_STORE_GRADIENT);
    for (size_t l = net.depth; l-- > 0;) {
        const vijp_layer *L = &net.layers[l];
        vijp_mat Gx, ref, Gy, Gyref;
        vijp_mat_init(&Gx, L->in, B, &f), test_mat_init_mp(&ref, L->in, B, &f);
        ck_assert_msg(!vijp_layer_vjp(L, &th[l], &X[l], &G, &Gx, &err), "%s", err.msg);
        vijp_mat tw[4];
        mpfr_t *tth = twin(tw, 0, &th[l]), *tx = twin(tw, 1, &X[l]), *tg = twin(tw, 2, &G);
        L->type->mp->vjp(L, tth, tx, B, tg, ref.m, &f), vijp_mat_store_as(&ref, VIJP_STORE_GRADIENT);
        expect_equal(&Gx, &ref, fmt, l, "vjp");
        if (th[l].rows) {
            vijp_mat Gt, Gtref;
            vijp_mat_init(&Gt, th[l].rows, 1, &f), test_mat_init_mp(&Gtref, th[l].rows, 1, &f);
            ck_assert_msg(!vijp_layer_vjp_param(L, &th[l], &X[l], &G, &Gt, &err), "%s", err.msg);
            L->type->mp->vjp_param(L, tth, tx, B, tg, Gtref.m, &f), vijp_mat_store_as(&Gtref, VIJP_STORE_GRADIENT);
            expect_equal(&Gt, &Gtref, fmt, l, "vjp_param");
            vijp_mat_clear(&Gt), vijp_mat_clear(&Gtref);
        }
        /* The inversion: the fragment of G, then G rebuilt from Gx (and it). */
        size_t k = vijp_layer_fragment_count(L, &th[l], &X[l]);
        vijp_mat frag, fragref;
        vijp_mat_init(&frag, k, 1, &f), test_mat_init_mp(&fragref, k, 1, &f);
        if (k) {
            ck_assert_msg(!vijp_layer_fragment(L, &th[l], &X[l], &G, &frag, &err), "%s", err.msg);
            L->type->mp->fragment(L, tth, tx, B, tg, fragref.m, &f), vijp_mat_store_as(&fragref, VIJP_STORE_GRADIENT);
            expect_equal(&frag, &fragref, fmt, l, "fragment");
        }
        vijp_mat_init(&Gy, L->out, B, &f), test_mat_init_mp(&Gyref, L->out, B, &f);
        int rc = vijp_layer_vijp(L, &th[l], &X[l], &Gx, k ? &frag : NULL, &Gy, &err);
        vijp_mat_clear(&tw[2]); /* G's twin: slot 2 takes Gx's */
        mpfr_t *tgx = twin(tw, 2, &Gx), *tfr = k ? twin(tw, 3, &frag) : NULL;
        int rcref = L->type->mp->vijp(L, tth, tx, B, tgx, tfr, Gyref.m, &f);
        twins_clear(tw, 3);
        if (k) twins_clear(tw + 3, 1);
        ck_assert_msg((rc != 0) == (rcref != 0), "%s, layer %zu: vijp returns %d, the MPFR route %d", fmt, l, rc, rcref);
        if (!rc) vijp_mat_store_as(&Gyref, VIJP_STORE_GRADIENT), expect_equal(&Gy, &Gyref, fmt, l, "vijp");
        vijp_mat_clear(&frag), vijp_mat_clear(&fragref), vijp_mat_clear(&Gy), vijp_mat_clear(&Gyref), vijp_mat_clear(&ref);
        vijp_mat_clear(&G);
        G = Gx;
    }
    vijp_mat_clear(&G);
    for (size_t l = 0; l <= net.depth; l++) vijp_mat_clear(&X[l]);
    vijp_net_params_clear(&net, th);
    free(th), free(X), free(d);
    vijp_net_free(&net);
}

START_TEST(layers_match_mpfr_route)
{
    for (size_t k = 0; k < N_NATIVE; k++) along_net(NATIVE[k]);
}
END_TEST

Suite *suite_emu_fp8(void)
{
    Suite *s = suite_create("emu_fp8");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fp8_formats_take_their_route);
    tcase_add_test(tc, layers_match_mpfr_route);
    suite_add_tcase(s, tc);
    return s;
}
