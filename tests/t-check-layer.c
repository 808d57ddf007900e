/* vijp check-layer: the library's layer checks run on a
 * user's type through the command, each check in its own process.
 *
 *  - every built-in type passes (the types listed by a fresh `vijp certify
 *    --help`, so a type added later without a line here fails this test);
 *  - the shipped templates: scaledtanh (double, MPFR, enclosure) passes
 *    every check, gated (double only) passes those that need no MPFR
 *    operators, the others skipped with a reason;
 *  - the deliberately broken plugins of examples/broken-layers/ each fail
 *    the check that their header names, the crash as a signal and the hang
 *    as a timeout, while the other checks still report; a PReLU whose ∇θ
 *    drops terms fails vjp-param-vs-differences with no MPFR twin and with
 *    a twin that shares the bug, and the same PReLU unbroken passes;
 *  - --params checks at the parameters given (a wrong length is exit 2), and
 *    the default parameters are not exact by accident;
 *  - at high precision (mpfr:700, 1100, 2000, 4032: bounds of 2^-P, far
 *    below double's range) every built-in type still passes, its bounds
 *    printed at their true size; the twin-sharing PReLU still fails there;
 *    past the sizes MPFR formats allow, a check says why it is skipped, and
 *    past mpfr:65536 the format is refused (exit 2);
 *  - bad usage is exit 2.
 * The plugins are built by `make check` into $(BUILD)/plugins/, beside
 * VIJP_BIN. */
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include "vijp/check_layer.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "--plugin DIR/plugins/FILE.so" beside VIJP_BIN. */
static const char *plugin(const char *file)
{
    static char buf[2100];
    char so[2048];
    test_plugin_path(file, so, sizeof so);
    snprintf(buf, sizeof buf, "--plugin '%s'", so);
    return buf;
}

/* Run check-layer with --json; the object, which the caller releases. */
static json_t *run_json(const char *args, int want_rc)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "check-layer %s --json", args);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == want_rc, "vijp %s: exit %d, want %d\n%s%s", cmd, r.rc, want_rc, r.out, r.err);
    json_error_t jerr;
    json_t *o = json_loads(r.out, 0, &jerr);
    ck_assert_msg(o != NULL, "vijp %s: not JSON (%s):\n%s", cmd, jerr.text, r.out);
    run_free(&r);
    return o;
}

static json_t *check_of(json_t *o, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(o, "checks"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    ck_abort_msg("no check %s in the report", name);
    return NULL;
}

static const char *status_of(json_t *o, const char *name)
{
    return json_string_value(json_object_get(check_of(o, name), "status"));
}

/* One item of every built-in type, at a width its shape rules accept. */
static const struct {
    const char *spec;
    size_t width;
} builtins[] = {
    {"dense:6", 6},       {"leaky:0.3", 8}, {"relu", 8},      {"tanh", 8},          {"sigmoid", 8},
    {"softplus", 8},      {"silu", 8},      {"gelu", 8},      {"mish", 8},          {"layernorm", 8},
    {"softmax", 8}, {"additive", 8}, {"affine", 8}, {"inv1x1:2", 8}, {"conv2d:1x3x4", 16},
    {"avgpool:2", 8}, {"squeeze:1x4", 8}, {"linear:6x4", 12}, {"attention:4x2", 12}, {"residual", 6}, {"elu", 8},
    {"selu", 8}, {"hardtanh", 8}, {"relu6", 8}, {"hardswish", 8}, {"softsign", 8}, {"prelu:2", 8}, {"identity", 8},
    {"dropout:0.5", 8}, {"flatten", 8}, {"transpose:2x4", 8}, {"batchnorm:2:affine", 8}, {"actnorm:4", 8},
    {"groupnorm:2x4:affine", 8}, {"logsoftmax:4", 8}, {"conv1d:2x4:out=3:reflect", 8}, {"avgpool2d:1x2x4s1", 16},
    {"maxpool1d:2x3s1", 12}, {"maxpool2d:1x2x4", 16},
};

/* Built-in layers whose descriptor the registry does not list, reached
 * through another type's arguments (gelu's, softplus's parse). */
static const struct {
    const char *spec;
    size_t width;
} variants[] = {{"gelu:tanh", 8}, {"softplus:1/20", 8}};

static void passes_every_check(const char *spec, size_t width)
{
    char args[256];
    snprintf(args, sizeof args, "%s --width %zu --seed %llu", spec, width, (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_OK);
    ck_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "passed");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "failed")), 0);
    /* every built-in type has MPFR operators: the oracle and the strong
     * differences run */
    ck_assert_str_eq(status_of(o, "format-vs-mpfr"), "passed");
    ck_assert_str_eq(status_of(o, "jvp-vs-differences"), "passed");
    ck_assert(!json_is_true(json_object_get(check_of(o, "jvp-vs-differences"), "weaker")));
    /* the parameter gradient against differences: wherever there is one */
    const char *want = json_integer_value(json_object_get(o, "params")) > 0 ? "passed" : "skipped";
    ck_assert_str_eq(status_of(o, "vjp-param-vs-differences"), want);
    ck_assert(!json_is_true(json_object_get(check_of(o, "vjp-param-vs-differences"), "weaker")));
    json_decref(o);
}

START_TEST(every_builtin_type_passes) { passes_every_check(builtins[_i].spec, builtins[_i].width); }
END_TEST

START_TEST(every_variant_passes) { passes_every_check(variants[_i].spec, variants[_i].width); }
END_TEST

/* High precision through the command: every built-in type passes at
 * mpfr:P, its bounds at their true size (u = 2^-P, far below double's
 * 2^-1074 from P ≈ 1100, where they once underflowed to 0 and every
 * comparison failed), the JSON's doubles null where they cannot hold them.
 * The library's battery runs the types at these precisions in make check
 * (t-layers.c); here make check runs tanh at mpfr:4032 (about 0.2 s), and
 * VIJP_TEST_SCALE > 1 (make check-long) every type at all four. */
static const long hiprec[] = {700, 1100, 2000, 4032};
#define NHIPREC (sizeof hiprec / sizeof *hiprec)
#define NBUILTINS (sizeof builtins / sizeof *builtins)
static size_t hiprec_case[NBUILTINS * NHIPREC][2]; /* (builtin, precision) */
static size_t n_hiprec_cases;

static void hiprec_cases(void)
{
    int full = test_iters(1) > 1;
    n_hiprec_cases = 0;
    for (size_t p = 0; p < NHIPREC; p++)
        for (size_t k = 0; k < NBUILTINS; k++)
            if (full || (hiprec[p] == 4032 && !strcmp(builtins[k].spec, "tanh")))
                hiprec_case[n_hiprec_cases][0] = k, hiprec_case[n_hiprec_cases++][1] = p;
}

/* A worst element's number as text (error_text, bound_text, ratio_text). */
static const char *text_of(json_t *worst, const char *key)
{
    const char *t = json_string_value(json_object_get(worst, key));
    ck_assert_msg(t != NULL, "the worst element has no %s", key);
    return t;
}

/* The decimal exponent of a number as the report prints it ("1.2e-400"). */
static long decimal_exponent(const char *text)
{
    const char *e = strchr(text, 'e');
    return e ? strtol(e + 1, NULL, 10) : 0;
}

START_TEST(every_builtin_type_passes_at_high_precision)
{
    const char *spec = builtins[hiprec_case[_i][0]].spec;
    long P = hiprec[hiprec_case[_i][1]];
    char args[256];
    snprintf(args, sizeof args, "%s --width %zu --seed %llu --format mpfr:%ld", spec, builtins[hiprec_case[_i][0]].width,
             (unsigned long long)test_seed(), P);
    json_t *o = run_json(args, CLI_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "failed")), 0);
    /* nothing skipped that runs at double: the oracle and both differences */
    ck_assert_str_eq(status_of(o, "format-vs-mpfr"), "passed");
    ck_assert_str_eq(status_of(o, "jvp-vs-differences"), "passed");
    const char *want = json_integer_value(json_object_get(o, "params")) > 0 ? "passed" : "skipped";
    ck_assert_str_eq(status_of(o, "vjp-param-vs-differences"), want);
    /* each bound at the scale of u = 2^-P (10^-0.301P), neither 0 where
     * the element has an error nor loosened to double's; every error
     * within it */
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(o, "checks"), i, c) {
        json_t *w = json_object_get(c, "worst");
        if (!json_is_object(w) || !strcmp(json_string_value(json_object_get(c, "name")), "declarations")) continue;
        const char *et = text_of(w, "error_text"), *bt = text_of(w, "bound_text"), *rt = text_of(w, "ratio_text");
        ck_assert_msg(strtod(rt, NULL) <= 1, "%s mpfr:%ld %s: ratio %s", spec, P,
                      json_string_value(json_object_get(c, "name")), rt);
        if (strcmp(et, "0")) ck_assert_msg(strcmp(bt, "0"), "%s mpfr:%ld: an error %s against a bound 0", spec, P, et);
        if (!strcmp(bt, "0")) continue;
        long d = decimal_exponent(bt), want_d = (long)(-0.30103 * (double)P);
        ck_assert_msg(d > want_d - 40 && d < want_d + 40, "%s mpfr:%ld %s: bound %s, not near 1e%ld", spec, P,
                      json_string_value(json_object_get(c, "name")), bt, want_d);
        /* the double beside the text: null where it cannot hold it */
        if (P >= 1100) ck_assert(json_is_null(json_object_get(w, "bound")));
    }
    json_decref(o);
}
END_TEST

/* The twin-sharing PReLU at high precision: vjp-param-vs-mpfr still
 * passes (the twin agrees) and the MPFR differences still fail the
 * gradient, far off (a dropped term of order 1 against a bound of order
 * 2^-1100); the same PReLU unbroken passes.  The table prints the numbers
 * at their size. */
START_TEST(broken_prelu_fails_at_high_precision)
{
    char args[4400];
    snprintf(args, sizeof args, "prelu_drops_term_twin %s --seed %llu --format mpfr:1100 --check vjp-param-vs-mpfr,"
             "vjp-param-vs-differences", plugin("prelu-drops-term-twin"), (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_FAILED);
    json_t *c = check_of(o, "vjp-param-vs-differences");
    ck_assert_str_eq(json_string_value(json_object_get(c, "status")), "failed");
    json_t *w = json_object_get(c, "worst");
    const char *rt = text_of(w, "ratio_text"), *bt = text_of(w, "bound_text");
    ck_assert_msg(decimal_exponent(rt) > 300, "ratio %s: not far off", rt); /* beyond double's range, and said so */
    ck_assert_msg(decimal_exponent(bt) < -300, "bound %s", bt);
    ck_assert_str_eq(status_of(o, "vjp-param-vs-mpfr"), "passed");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "failed")), 1);
    json_decref(o);
    snprintf(args, sizeof args, "correct_prelu %s --seed %llu --format mpfr:1100 --check vjp-param-vs-differences",
             plugin("correct-prelu"), (unsigned long long)test_seed());
    o = run_json(args, CLI_OK);
    ck_assert_str_eq(status_of(o, "vjp-param-vs-differences"), "passed");
    json_decref(o);
    /* the table: "error 1.2e-333 <= bound 3.4e-332", never 0 or 4.94e-324 */
    run_result r = run_vijp("check-layer tanh --format mpfr:1100 --check format-vs-mpfr");
    ck_assert_int_eq(r.rc, CLI_OK);
    const char *line = strstr(r.out, "\nformat-vs-mpfr ");
    ck_assert_msg(line && strstr(line, "e-33") && !strstr(line, "bound 0") && !strstr(line, "e-324"), "%s", r.out);
    run_free(&r);
}
END_TEST

/* Past what MPFR formats hold (VIJP_PREC_MAX bits): differences need
 * about 1.5·P bits, the reference P + 64, so past mpfr:43435 and
 * mpfr:65472 those checks are skipped, each saying why, never failed;
 * mpfr:65537 is refused. */
START_TEST(precision_limits)
{
    json_t *o = run_json("dense:2 --width 2 --format mpfr:43436 --check jvp-vs-differences,vjp-param-vs-differences,"
                         "format-vs-mpfr",
                         CLI_OK);
    static const char *const diff[] = {"jvp-vs-differences", "vjp-param-vs-differences"};
    for (size_t k = 0; k < 2; k++) {
        json_t *c = check_of(o, diff[k]);
        const char *why = json_string_value(json_object_get(c, "detail"));
        ck_assert_msg(!strcmp(status_of(o, diff[k]), "skipped") && strstr(why, "65536") && strstr(why, "mpfr:43435"),
                      "%s: %s", diff[k], why);
    }
    ck_assert_str_eq(status_of(o, "format-vs-mpfr"), "passed");
    json_decref(o);
    o = run_json("dense:2 --width 2 --format mpfr:65500 --check format-vs-mpfr,vjp-param-vs-mpfr,adjoint", CLI_OK);
    static const char *const ref[] = {"format-vs-mpfr", "vjp-param-vs-mpfr"};
    for (size_t k = 0; k < 2; k++) {
        const char *why = json_string_value(json_object_get(check_of(o, ref[k]), "detail"));
        ck_assert_msg(!strcmp(status_of(o, ref[k]), "skipped") && strstr(why, "mpfr:65472"), "%s: %s", ref[k], why);
    }
    ck_assert_str_eq(status_of(o, "adjoint"), "passed");
    json_decref(o);
    run_result r = run_vijp("check-layer tanh --format mpfr:65537");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "65536") && !r.out[0], "exit %d: %s", r.rc, r.err);
    run_free(&r);
    r = run_vijp("check-layer --help");
    ck_assert_msg(strstr(r.out, "mpfr:65536") && strstr(r.out, "mpfr:43435"), "--help states no precision limit");
    run_free(&r);
}
END_TEST

/* The list above covers every built-in type: a fresh process's registry
 * (the layer list in certify's help) names no type it lacks. */
START_TEST(builtin_list_is_complete)
{
    run_result r = run_vijp("certify --help");
    ck_assert_int_eq(r.rc, CLI_OK);
    const char *p = strstr(r.out, "SPEC (one layer");
    ck_assert_ptr_nonnull(p);
    size_t types = 0;
    for (p = strchr(p, '\n'); p && p[1] == ' ' && p[2] == ' ' && p[3] != '('; p = strchr(p + 1, '\n')) {
        char name[64];
        ck_assert(sscanf(p + 3, "%63[a-z0-9_]", name) == 1);
        int found = 0;
        for (size_t k = 0; k < sizeof builtins / sizeof *builtins; k++)
            found |= !strncmp(builtins[k].spec, name, strlen(name)) &&
                     (builtins[k].spec[strlen(name)] == 0 || builtins[k].spec[strlen(name)] == ':');
        ck_assert_msg(found, "built-in type %s is not in this test's list", name);
        types++;
    }
    ck_assert_uint_eq(types, sizeof builtins / sizeof *builtins);
    run_free(&r);
}
END_TEST

START_TEST(scaledtanh_template_passes)
{
    char args[4400];
    snprintf(args, sizeof args, "scaledtanh %s --seed %llu", plugin("scaledtanh"), (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_OK);
    static const char *const ran[] = {"adjoint",        "jvp-vs-differences", "jacobian-vs-jvp",          "vijp-round-trip",
                                      "format-vs-mpfr", "vjp-param-vs-mpfr",  "vjp-param-vs-differences", "certification"};
    for (size_t k = 0; k < sizeof ran / sizeof *ran; k++) ck_assert_str_eq(status_of(o, ran[k]), "passed");
    json_decref(o);
}
END_TEST

/* gated has no MPFR operators: what needs them is skipped, saying why; the
 * differences are the weaker kind and say so. */
START_TEST(gated_template_passes_without_mpfr)
{
    char args[4400];
    snprintf(args, sizeof args, "gated %s --seed %llu", plugin("gated"), (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_OK);
    static const char *const ran[] = {"adjoint", "jvp-vs-differences", "jacobian-vs-jvp", "vijp-round-trip",
                                      "vjp-param-vs-differences"};
    for (size_t k = 0; k < sizeof ran / sizeof *ran; k++) ck_assert_str_eq(status_of(o, ran[k]), "passed");
    ck_assert(json_is_true(json_object_get(check_of(o, "jvp-vs-differences"), "weaker")));
    ck_assert(json_is_true(json_object_get(check_of(o, "vjp-param-vs-differences"), "weaker")));
    static const char *const skipped[] = {"format-vs-mpfr", "vjp-param-vs-mpfr", "certification"};
    for (size_t k = 0; k < sizeof skipped / sizeof *skipped; k++) {
        json_t *c = check_of(o, skipped[k]);
        const char *why = json_string_value(json_object_get(c, "detail"));
        ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "status")), "skipped") && strstr(why, "MPFR"),
                      "gated, %s: %s", skipped[k], why);
    }
    json_decref(o);
    /* an MPFR format is refused up front */
    snprintf(args, sizeof args, "check-layer gated %s --format mpfr:256", plugin("gated"));
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "MPFR"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* Each broken plugin fails the check its header names; the rest of the
 * report is still there.  correct.so, the same layer unbroken, passes. */
static const struct {
    const char *file, *type, *check, *says;
} broken[] = {
    {"transposed-vjp", "transposed_vjp", "adjoint", NULL},
    {"wrong-sign", "wrong_sign", "jvp-vs-differences", NULL},
    {"scaled-vijp", "scaled_vijp", "vijp-round-trip", NULL},
    {"inexact-inverse", "inexact_inverse", "inverse-round-trip", NULL},
    {"false-submersive", "false_submersive", "declarations", "declares itself submersive"},
    {"accumulating-grad", "accumulating_grad", "overwrites-outputs", "vjp_param's output entry"},
    {"prelu-drops-term", "prelu_drops_term", "vjp-param-vs-differences", NULL},
    {"segfault", "segfault", "adjoint", "SIGSEGV"},
};

START_TEST(broken_plugin_fails_its_check)
{
    char args[4400];
    snprintf(args, sizeof args, "%s %s --seed %llu", broken[_i].type, plugin(broken[_i].file),
             (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_FAILED);
    json_t *c = check_of(o, broken[_i].check);
    const char *detail = json_string_value(json_object_get(c, "detail"));
    ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "status")), "failed"), "%s: %s %s: %s", broken[_i].file,
                  broken[_i].check, json_string_value(json_object_get(c, "status")), detail);
    if (broken[_i].says) ck_assert_msg(strstr(detail, broken[_i].says), "%s: '%s' lacks '%s'", broken[_i].file, detail,
                                       broken[_i].says);
    json_t *worst = json_object_get(c, "worst");
    if (!broken[_i].says) /* a numbers check: it names the element, its error and the bound it broke */
        ck_assert(json_is_object(worst) && json_real_value(json_object_get(worst, "error")) >
                                               json_real_value(json_object_get(worst, "bound")));
    ck_assert_int_eq(json_integer_value(json_object_get(c, "seed")), (json_int_t)test_seed());
    /* the report went on: the checks that need no MPFR operators and do not
     * touch the defect pass (at least the Jacobian, which is exact here) */
    ck_assert_uint_ge(json_integer_value(json_object_get(o, "passed")), 1);
    ck_assert_str_eq(status_of(o, "format-vs-mpfr"), "skipped");
    json_decref(o);
}
END_TEST

START_TEST(correct_linear_passes)
{
    char args[4400];
    snprintf(args, sizeof args, "correct_linear %s --seed %llu", plugin("correct"), (unsigned long long)test_seed());
    json_t *o = run_json(args, CLI_OK);
    static const char *const ran[] = {"adjoint", "jvp-vs-differences", "jacobian-vs-jvp", "vijp-round-trip",
                                      "inverse-round-trip", "certification", "vjp-param-vs-differences"};
    for (size_t k = 0; k < sizeof ran / sizeof *ran; k++) ck_assert_str_eq(status_of(o, ran[k]), "passed");
    json_decref(o);
}
END_TEST

/* A PReLU whose ∂ℓ/∂a drops every sample's terms but the first's: with no
 * MPFR twin (the double differences, weaker) and with a twin that shares
 * the bug (vjp-param-vs-mpfr passes: the twin agrees; the MPFR
 * differences do not), vjp-param-vs-differences fails, naming the
 * gradient's error far above its bound, and it alone fails.  Unbroken, the
 * same PReLU passes it with its twin. */
static const struct {
    const char *file, *type;
    int twin, verdict;
} prelus[] = {
    {"prelu-drops-term", "prelu_drops_term", 0, CLI_FAILED},
    {"prelu-drops-term-twin", "prelu_drops_term_twin", 1, CLI_FAILED},
    {"correct-prelu", "correct_prelu", 1, CLI_OK},
};

START_TEST(prelu_parameter_gradient)
{
    char args[4400];
    snprintf(args, sizeof args, "%s %s --seed %llu", prelus[_i].type, plugin(prelus[_i].file),
             (unsigned long long)test_seed());
    json_t *o = run_json(args, prelus[_i].verdict);
    json_t *c = check_of(o, "vjp-param-vs-differences");
    const char *want = prelus[_i].verdict == CLI_OK ? "passed" : "failed";
    ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "status")), want), "%s: %s", prelus[_i].file,
                  json_string_value(json_object_get(c, "detail")));
    ck_assert(json_is_true(json_object_get(c, "weaker")) == !prelus[_i].twin);
    json_t *worst = json_object_get(c, "worst");
    double ratio = json_real_value(json_object_get(worst, "ratio"));
    /* a dropped term of a gradient of order 1 against a bound of order
     * 1e-13: far off, not at the margin */
    if (prelus[_i].verdict == CLI_FAILED) ck_assert_msg(ratio > 1e6, "%s: ratio %g", prelus[_i].file, ratio);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "failed")), prelus[_i].verdict == CLI_FAILED);
    ck_assert_str_eq(status_of(o, "vjp-param-vs-mpfr"), prelus[_i].twin ? "passed" : "skipped");
    ck_assert_str_eq(status_of(o, "format-vs-mpfr"), prelus[_i].twin ? "passed" : "skipped");
    json_decref(o);
}
END_TEST

/* θ into path as a .npy of the given shape. */
static void write_params(const char *path, size_t ndim, const size_t *shape, const double *th)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_write(path, ndim, shape, th, &err), "%s", err.msg);
}

static double worst_error(json_t *o, const char *check)
{
    return json_real_value(json_object_get(json_object_get(check_of(o, check), "worst"), "error"));
}

/* --params: the checks run at the θ given.  At a = 1, PReLU is the identity
 * in every format (x·1 and g/1 are exact), so the MPFR comparison sees no
 * error at all; at the default, 0.25 (PyTorch's, a power of two) moved by a
 * seeded relative amount, a·x rounds and it sees some: the default θ is not
 * exact by accident.  A wrong length, a 2-D array or a missing file is bad
 * input (exit 2), naming the file. */
START_TEST(params_file)
{
    char dir[4096], args[16384], one_npy[4200], bad[3][4200];
    make_temp_dir(dir, sizeof dir, "check-layer-params");
    const char *prelu = plugin("correct-prelu");
    double one = 1, two[2] = {0.5, 0.5};
    size_t s1[1] = {1}, s2[1] = {2}, s11[2] = {1, 1};
    snprintf(one_npy, sizeof one_npy, "%s/one.npy", dir), write_params(one_npy, 1, s1, &one);
    snprintf(bad[0], sizeof bad[0], "%s/two.npy", dir), write_params(bad[0], 1, s2, two);
    snprintf(bad[1], sizeof bad[1], "%s/square.npy", dir), write_params(bad[1], 2, s11, &one);
    snprintf(bad[2], sizeof bad[2], "%s/missing.npy", dir);
    snprintf(args, sizeof args, "correct_prelu %s --params %s --check format-vs-mpfr,vjp-param-vs-differences", prelu,
             one_npy);
    json_t *o = run_json(args, CLI_OK);
    ck_assert_str_eq(json_string_value(json_object_get(o, "params_file")), one_npy);
    ck_assert_str_eq(status_of(o, "vjp-param-vs-differences"), "passed");
    ck_assert_msg(worst_error(o, "format-vs-mpfr") == 0, "a = 1: error %g", worst_error(o, "format-vs-mpfr"));
    json_decref(o);
    snprintf(args, sizeof args, "correct_prelu %s --check format-vs-mpfr", prelu);
    o = run_json(args, CLI_OK);
    ck_assert(json_is_null(json_object_get(o, "params_file")));
    ck_assert_msg(worst_error(o, "format-vs-mpfr") > 0, "the default a is exact");
    json_decref(o);
    for (size_t k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "check-layer correct_prelu %s --params %s", prelu, bad[k]);
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k]) && !r.out[0], "%s: exit %d, err '%s'", bad[k], r.rc,
                      r.err);
        run_free(&r);
    }
    remove_tree(dir);
}
END_TEST

/* The library refuses a θ of the wrong length, and runs at one of the right
 * length as given. */
START_TEST(params_in_the_library)
{
    const double th[3] = {0.5, -0.25, 0.125};
    vijp_check_opts o = {.width = 1, .seed = test_seed(), .params = th, .n_params = 3};
    vijp_check_result r;
    vijp_error err = {0};
    size_t k = (size_t)vijp_check_find("vjp-param-vs-differences");
    ck_assert_int_eq(vijp_check_layer_run(k, "dense:2", &o, &r, &err), VIJP_EDIM); /* dense:2 at width 1: 2 + 2 */
    ck_assert_msg(strstr(err.msg, "3 parameter values"), "%s", err.msg);
    o.n_params = 2, o.width = 1;
    ck_assert(!vijp_check_layer_run(k, "dense:1", &o, &r, &err));
    ck_assert_msg(r.status == VIJP_CHECK_PASSED, "%s", r.detail);
    /* no options: every field's default (it dereferenced NULL) */
    ck_assert_msg(!vijp_check_layer_run(k, "dense:3", NULL, &r, &err), "%s", err.msg);
    ck_assert_msg(r.status == VIJP_CHECK_PASSED && r.seed == 0, "%s", r.detail);
}
END_TEST

/* The table: one line per check; the crash names its signal and the command
 * that reruns it. */
START_TEST(table_names_the_crash)
{
    char args[4400];
    snprintf(args, sizeof args, "check-layer segfault %s", plugin("segfault"));
    run_result r = run_vijp(args);
    ck_assert_int_eq(r.rc, CLI_FAILED);
    const char *line = strstr(r.out, "\nadjoint ");
    ck_assert_msg(line && strstr(line, "FAILED") && strstr(line, "SIGSEGV") < strchr(line + 1, '\n'), "%s", r.out);
    ck_assert_msg(strstr(r.out, "rerun: vijp check-layer segfault --plugin") && strstr(r.out, "--check adjoint"), "%s",
                  r.out);
    for (size_t k = 0; k < vijp_check_count(); k++) {
        char head[64];
        snprintf(head, sizeof head, "\n%s ", vijp_check_name(k));
        ck_assert_msg(strstr(r.out, head), "no line for %s:\n%s", vijp_check_name(k), r.out);
    }
    run_free(&r);
}
END_TEST

/* A check that never returns is stopped after --timeout and fails. */
START_TEST(hung_check_times_out)
{
    char args[4400];
    snprintf(args, sizeof args, "hang %s --timeout 1 --check inverse-round-trip,adjoint", plugin("hang"));
    json_t *o = run_json(args, CLI_FAILED);
    json_t *c = check_of(o, "inverse-round-trip");
    ck_assert_str_eq(json_string_value(json_object_get(c, "status")), "failed");
    ck_assert_msg(strstr(json_string_value(json_object_get(c, "detail")), "timed out"), "%s",
                  json_string_value(json_object_get(c, "detail")));
    ck_assert_str_eq(json_string_value(json_object_get(c, "signal")), "SIGALRM");
    ck_assert_str_eq(status_of(o, "adjoint"), "passed");
    ck_assert_uint_eq(json_array_size(json_object_get(o, "checks")), 2); /* --check ran those two only */
    json_decref(o);
}
END_TEST

START_TEST(bad_usage)
{
    static const char *const bad[] = {
        "check-layer",                          /* no SPEC */
        "check-layer tanh relu",                /* two */
        "check-layer dense:4,tanh",             /* a net, not a layer */
        "check-layer nosuchlayer",              /* unknown type */
        "check-layer tanh --check nosuchcheck", /* unknown check */
        "check-layer tanh --format binary32",   /* the bounds assume no underflow */
        "check-layer tanh --format float8",     /* no such format */
        "check-layer tanh --points 0",
        "check-layer tanh --timeout 0",
        "check-layer tanh --bogus",
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        run_result r = run_vijp(bad[k]);
        ck_assert_msg(r.rc == CLI_USAGE && r.err[0] && !r.out[0], "vijp %s: exit %d, out '%s', err '%s'", bad[k], r.rc,
                      r.out, r.err);
        run_free(&r);
    }
    run_result r = run_vijp("check-layer --help");
    ck_assert_int_eq(r.rc, CLI_OK);
    for (size_t k = 0; k < vijp_check_count(); k++)
        ck_assert_msg(strstr(r.out, vijp_check_name(k)), "--help does not document %s", vijp_check_name(k));
    run_free(&r);
}
END_TEST

/* The operators for certification over a box (tests/plugins/csquare.c):
 * a correct interval Jacobian and a correct (attained) Lipschitz constant
 * pass jacobian-box; an enclosure of J at the box's centre only, and a
 * Lipschitz constant an eighth of the true one, fail it and nothing else. */
START_TEST(jacobian_box_operators)
{
    static const struct {
        const char *type, *status;
    } cases[] = {{"csquare", "passed"}, {"csquarelip", "passed"}, {"csquarebad", "failed"}, {"csquarelipbad", "failed"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char args[4400];
        int failing = !strcmp(cases[k].status, "failed");
        snprintf(args, sizeof args, "%s %s --width 4 --seed %llu", cases[k].type, plugin("csquare"),
                 (unsigned long long)test_seed());
        json_t *o = run_json(args, failing ? CLI_FAILED : CLI_OK);
        json_t *c = check_of(o, "jacobian-box");
        ck_assert_msg(!strcmp(status_of(o, "jacobian-box"), cases[k].status), "%s: jacobian-box %s: %s", cases[k].type,
                      status_of(o, "jacobian-box"), json_string_value(json_object_get(c, "detail")));
        size_t i;
        json_t *other;
        json_array_foreach(json_object_get(o, "checks"), i, other)
            ck_assert_msg(c == other || strcmp(json_string_value(json_object_get(other, "status")), "failed"),
                          "%s: %s failed", cases[k].type, json_string_value(json_object_get(other, "name")));
        json_decref(o);
    }
}
END_TEST

Suite *suite_check_layer(void)
{
    Suite *s = suite_create("checklayer");
    TCase *tc = tcase_create("checklayer");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_builtin_type_passes, 0, (int)(sizeof builtins / sizeof *builtins));
    tcase_add_loop_test(tc, every_variant_passes, 0, (int)(sizeof variants / sizeof *variants));
    tcase_add_test(tc, builtin_list_is_complete);
    hiprec_cases();
    tcase_add_loop_test(tc, every_builtin_type_passes_at_high_precision, 0, (int)n_hiprec_cases);
    tcase_add_test(tc, broken_prelu_fails_at_high_precision);
    tcase_add_test(tc, precision_limits);
    tcase_add_test(tc, scaledtanh_template_passes);
    tcase_add_test(tc, gated_template_passes_without_mpfr);
    tcase_add_loop_test(tc, broken_plugin_fails_its_check, 0, (int)(sizeof broken / sizeof *broken));
    tcase_add_test(tc, correct_linear_passes);
    tcase_add_test(tc, jacobian_box_operators);
    tcase_add_loop_test(tc, prelu_parameter_gradient, 0, (int)(sizeof prelus / sizeof *prelus));
    tcase_add_test(tc, params_file);
    tcase_add_test(tc, params_in_the_library);
    tcase_add_test(tc, table_names_the_crash);
    tcase_add_test(tc, hung_check_times_out);
    tcase_add_test(tc, bad_usage);
    suite_add_tcase(s, tc);
    return s;
}
