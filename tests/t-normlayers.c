/* The normalisation and shape types (src/layers/reshape.c): their argument
 * checking, their specs printed back, and their values against computations
 * made here by other means (a transpose worked by hand, the algebraic
 * identity transpose:BxA ∘ transpose:AxB = identity).  The layer battery on
 * each of them runs in t-layers.c and t-check-layer.c with every other
 * built-in type. */
#include "fixtures/clirun.h"
#include "fixtures/testutil.h"
#include "vijp/layer.h"
#include "vijp/net.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Bad arguments: a code and a message, never an instance. */
START_TEST(bad_arguments_refused)
{
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"identity:2", 8, VIJP_EINVAL},     /* takes no argument */
        {"flatten:1", 8, VIJP_EINVAL},      /* takes no argument */
        {"dropout", 8, VIJP_EINVAL},        /* the probability is required */
        {"dropout:", 8, VIJP_EINVAL},
        {"dropout:1.5", 8, VIJP_EINVAL},    /* not a probability */
        {"dropout:-0.1", 8, VIJP_EINVAL},
        {"dropout:nan", 8, VIJP_EINVAL},
        {"dropout:0.1x", 8, VIJP_EINVAL},   /* trailing junk */
        {"transpose", 8, VIJP_EINVAL},      /* shape required */
        {"transpose:2", 8, VIJP_EINVAL},
        {"transpose:2x", 8, VIJP_EINVAL},
        {"transpose:0x4", 8, VIJP_EINVAL},
        {"transpose:2x-4", 8, VIJP_EINVAL},
        {"transpose:+2x4", 8, VIJP_EINVAL},
        {"transpose:2x3", 8, VIJP_EDIM},    /* 8 is not a multiple of 6 */
        {"transpose:1x4", 8, VIJP_EINVAL},  /* the identity: a permutation type must not be diagonal */
        {"transpose:4x1", 8, VIJP_EINVAL},
        {"transpose:4294967296x4294967296", 8, VIJP_EINVAL}, /* past VIJP_WIDTH_MAX: a·b would wrap */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        int rc = vijp_layer_parse(&L, bad[k].spec, bad[k].width, &err);
        ck_assert_msg(rc == bad[k].rc && err.msg[0], "'%s' at width %zu: code %d (want %d), message '%s'", bad[k].spec,
                      bad[k].width, rc, bad[k].rc, err.msg);
        ck_assert_ptr_null(L.type);
    }
    /* through the command: exit 2, the item named, nothing on stdout */
    run_result r = run_vijp("grad --net dense:8,dropout:2 --depth 2");
    ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, "dropout:2"), "exit %d, err '%s'", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* Every item prints back as a spec that parses to the same instance. */
START_TEST(specs_print_back)
{
    static const struct {
        const char *item, *printed;
        size_t width;
    } items[] = {
        {"identity", "identity", 5},         {"flatten", "flatten", 5},
        {"dropout:0.1", "dropout:0.1", 5},   {"dropout:0", "dropout:0", 5},
        {"dropout:1", "dropout:1", 5},       {"dropout:1e-7", "dropout:1e-07", 5},
        {"transpose:2x3", "transpose:2x3", 12}, {"transpose:4x2", "transpose:4x2", 8},
    };
    for (size_t k = 0; k < sizeof items / sizeof *items; k++) {
        vijp_layer L, R;
        char s1[64], s2[64];
        ck_assert(!vijp_layer_parse(&L, items[k].item, items[k].width, NULL));
        vijp_layer_spec(&L, s1, sizeof s1);
        ck_assert_str_eq(s1, items[k].printed);
        ck_assert(!vijp_layer_parse(&R, s1, items[k].width, NULL));
        vijp_layer_spec(&R, s2, sizeof s2);
        ck_assert_str_eq(s1, s2);
        ck_assert(L.in == items[k].width && L.out == items[k].width && R.in == L.in);
        vijp_layer_clear(&L), vijp_layer_clear(&R);
    }
}
END_TEST

/* forward of `spec` on one sample x (n units, double) into y. */
static void forward_one(const char *spec, size_t n, const double *x, double *y)
{
    vijp_layer L;
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    ck_assert(!vijp_layer_parse(&L, spec, n, NULL));
    vijp_mat X = {.rows = n, .cols = 1, .fmt = &F, .d = (double *)x}, Y = {.rows = n, .cols = 1, .fmt = &F, .d = y};
    ck_assert(!vijp_layer_forward(&L, NULL, &X, &Y, NULL));
    vijp_layer_clear(&L);
}

/* transpose:2x3 on two runs of six, worked by hand: [[0 1 2] [3 4 5]]ᵀ =
 * [[0 3] [1 4] [2 5]]; and transpose:3x2 undoes it, on any width. */
START_TEST(transpose_values)
{
    double x[12], y[12], z[12];
    for (size_t i = 0; i < 12; i++) x[i] = (double)i;
    forward_one("transpose:2x3", 12, x, y);
    static const double want[12] = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
    for (size_t i = 0; i < 12; i++) ck_assert_msg(y[i] == want[i], "y[%zu] = %g, want %g", i, y[i], want[i]);
    forward_one("transpose:3x2", 12, y, z);
    for (size_t i = 0; i < 12; i++) ck_assert(z[i] == x[i]);
    /* the identity types leave a row as it is, bit for bit */
    static const char *const same[] = {"identity", "flatten", "dropout:0.5"};
    for (size_t k = 0; k < sizeof same / sizeof *same; k++) {
        x[3] = -0.0, x[5] = 0x1p-1074;
        forward_one(same[k], 12, x, y);
        ck_assert_msg(!memcmp(x, y, sizeof x), "%s changed its input", same[k]);
    }
}
END_TEST

Suite *suite_normlayers(void)
{
    Suite *s = suite_create("normlayers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bad_arguments_refused);
    tcase_add_test(tc, specs_print_back);
    tcase_add_test(tc, transpose_values);
    suite_add_tcase(s, tc);
    return s;
}
