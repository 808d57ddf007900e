/* Loading --plugin files: a plugin that crashes while it is loaded (a
 * truncated file, a fault in a constructor or in vijp_plugin_init) is
 * reported as that plugin's failure, exit 2, and a plugin that prints on
 * standard output (tests/plugins/chatty.c: while loading and in its
 * operators) never gets a byte into vijp's results: --json stays JSON. */
#include "fixtures/clirun.h"
#include <elf.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every command that takes --plugin, on a plugin that crashes: exit 2 (not
 * death by the plugin's signal), the plugin and the signal named, nothing
 * on stdout. */
START_TEST(crash_while_loading_is_the_plugins_failure)
{
    static const struct {
        const char *plugin, *said;
    } cases[] = {{"init-crash", "init-crash: about to fault"}, {"ctor-crash", NULL}};
    static const char *const commands[] = {"grad --net dense:4", "check-layer tanh", "certify --layer tanh --samples 1",
                                           "eval tanh --width 2"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char so[4200], want[4400], args[8800];
        test_plugin_path(cases[c].plugin, so, sizeof so);
        snprintf(want, sizeof want, "vijp: plugin '%s' crashed while loading (killed by SIGSEGV", so);
        for (size_t k = 0; k < sizeof commands / sizeof *commands; k++) {
            snprintf(args, sizeof args, "%s --plugin '%s'", commands[k], so);
            run_result r = run_vijp(args);
            ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, want) && strstr(r.err, "not used"),
                          "vijp %s: exit %d, stderr '%.400s'", args, r.rc, r.err);
            if (cases[c].said) ck_assert_msg(strstr(r.err, cases[c].said), "its last words are lost: %s", r.err);
            ck_assert_msg(!r.out[0], "vijp %s wrote on stdout: %.400s", args, r.out);
            run_free(&r);
        }
    }
}
END_TEST

/* The end of the part of an ELF shared object that is mapped: the last
 * byte of its loadable segments. */
static size_t loaded_extent(const char *image, size_t size)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    ck_assert(size > sizeof *eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64);
    size_t end = 0;
    for (size_t k = 0; k < eh->e_phnum; k++) {
        Elf64_Phdr ph;
        ck_assert(eh->e_phoff + (k + 1) * sizeof ph <= size);
        memcpy(&ph, image + eh->e_phoff + k * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > end) end = ph.p_offset + ph.p_filesz;
    }
    ck_assert(end > 0 && end <= size);
    return end;
}

/* A plugin file cut short (a copy interrupted, a full disk): cut inside
 * what dlopen maps, exit 2 naming the file (such a cut made vijp die of
 * SIGBUS); cut only in what is never mapped (debugging sections), it
 * still works. */
START_TEST(truncated_plugin_is_refused)
{
    char so[4200], dir[256], cut[512], args[1024], named[600];
    test_plugin_path("scaledtanh", so, sizeof so);
    FILE *f = fopen(so, "rb");
    ck_assert_msg(f, "%s: run make plugins", so);
    ck_assert(!fseek(f, 0, SEEK_END));
    long size = ftell(f);
    rewind(f);
    char *whole = malloc((size_t)size);
    ck_assert(whole && fread(whole, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    size_t mapped = loaded_extent(whole, (size_t)size);
    make_temp_dir(dir, sizeof dir, "plugin-cut");
    snprintf(cut, sizeof cut, "%s/cut.so", dir);
    snprintf(named, sizeof named, "plugin '%s'", cut);
    static const double fractions[] = {0.05, 0.3, 0.6, 0.9};
    for (size_t k = 0; k <= sizeof fractions / sizeof *fractions; k++) {
        int inside = k < sizeof fractions / sizeof *fractions;
        size_t len = inside ? (size_t)((double)mapped * fractions[k]) : mapped + ((size_t)size - mapped) / 2;
        FILE *g = fopen(cut, "wb");
        ck_assert(g && fwrite(whole, 1, len, g) == len);
        ck_assert(!fclose(g));
        snprintf(args, sizeof args, "grad --net dense:4,scaledtanh --depth 2 --plugin '%s'", cut);
        run_result r = run_vijp(args);
        if (inside)
            ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, named), "cut at %zu of %zu mapped bytes: exit %d, stderr '%s'",
                          len, mapped, r.rc, r.err);
        else
            ck_assert_msg(r.rc == CLI_OK, "cut after the mapped part: exit %d, stderr '%s'", r.rc, r.err);
        run_free(&r);
    }
    free(whole);
    remove_tree(dir);
}
END_TEST

/* What the chatty plugin prints goes to stderr: vijp's stdout is exactly
 * its results, which parse as JSON. */
START_TEST(plugin_output_stays_off_stdout)
{
    char so[4200], args[8800];
    test_plugin_path("chatty", so, sizeof so);
    static const char *const commands[] = {
        "check-layer chatty_linear --width 4 --json",
        "memory --net chatty_linear --width 4 --depth-max 3 --budget 1M --engines backprop,moonwalk --json",
        "certify --layer chatty_linear --width 3 --samples 1 --json",
    };
    for (size_t k = 0; k < sizeof commands / sizeof *commands; k++) {
        snprintf(args, sizeof args, "%s --plugin '%s'", commands[k], so);
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d, stderr '%.400s'", args, r.rc, r.err);
        ck_assert_msg(!strstr(r.out, "says hello"), "vijp %s: the plugin's output is on stdout: %.400s", args, r.out);
        ck_assert_msg(strstr(r.err, "chatty plugin says hello"), "vijp %s: the plugin's output is lost: %.400s", args, r.err);
        json_error_t je;
        json_t *o = json_loads(r.out, 0, &je);
        ck_assert_msg(o, "vijp %s: stdout is not JSON (%s): %.400s", args, je.text, r.out);
        json_decref(o);
        run_free(&r);
    }
    /* and without --json, the plain table is all there is */
    snprintf(args, sizeof args, "check-layer chatty_linear --width 4 --plugin '%s'", so);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && !strstr(r.out, "says hello") && strstr(r.out, "passed"), "exit %d: %.400s", r.rc, r.out);
    run_free(&r);
}
END_TEST

/* A plugin built for plugin ABI 6 (tests/plugins/abi6.c), whose
 * vijp_interval_ops ended at deriv_enclose and is followed in memory by
 * non-NULL junk: it loads, its f′ enclosure certifies a box (f′ = 3x² + 1
 * >= 1, equal to 1 at x = 0: s in (0, 1]), and nothing reads the junk as
 * ABI 7's interval Jacobian or Lipschitz constant (registration would
 * refuse the latter without MPFR operators; check-layer's jacobian-box
 * would call them). */
START_TEST(abi6_plugin_still_loads)
{
    char so[4200], args[8800];
    test_plugin_path("abi6", so, sizeof so);
    snprintf(args, sizeof args, "certify --layer abisix --width 3 --box -1,1 --json --plugin '%s'", so);
    run_result r = run_vijp(args);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    ck_assert_msg(r.rc == CLI_OK && o, "vijp %s: exit %d: %.400s%.400s", args, r.rc, r.out, r.err);
    double s = json_number_value(json_object_get(o, "sigma_min_lower_bound"));
    ck_assert_msg(!strcmp(json_string_value(json_object_get(o, "method")), "interval-bisection") && s > 0 && s <= 1,
                  "%s, s = %g", json_string_value(json_object_get(o, "method")), s);
    json_decref(o), run_free(&r);
    snprintf(args, sizeof args, "check-layer abisix --width 3 --check jacobian-box --plugin '%s'", so);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "jacobian-box") && strstr(r.out, "skipped"), "exit %d: %.400s%.400s",
                  r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

/* A plugin built for plugin ABI 7 (tests/plugins/abi7.c), before
 * vijp_format grew: it loads and runs in double (memory's engines), and
 * an MPFR format refuses it with a message instead of
 * handing its operators (which would write NaN) a vijp_format of the new
 * size. */
START_TEST(abi7_plugin_runs_in_double_only)
{
    char so[4200], args[8800];
    test_plugin_path("abi7", so, sizeof so);
    snprintf(args, sizeof args, "memory --net abiseven --width 4 --depth-max 3 --budget 1M --engines backprop,moonwalk "
             "--plugin '%s'", so);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %.400s%.400s", args, r.rc, r.out, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "grad --net abiseven --width 4 --depth 2 --format binary32 --plugin '%s'", so);
    r = run_vijp(args);
    ck_assert_msg(r.rc != CLI_OK && strstr(r.err, "abiseven layer has no MPFR operators"), "vijp %s: exit %d: %.400s",
                  args, r.rc, r.err);
    run_free(&r);
}
END_TEST

/* A plugin built for plugin ABI 8 (tests/plugins/abi8.c), before
 * vijp_layer_type grew emu_native at its end: it registers as a copy of its
 * shorter descriptor (the plugin fills the member's bytes with a pointer to
 * nothing, which a read would follow and crash on) and keeps its MPFR
 * operators: it runs in binary32, its values held as doubles and expanded
 * into MPFR for them. */
START_TEST(abi8_plugin_keeps_its_mpfr_operators)
{
    char so[4200], args[8800];
    test_plugin_path("abi8", so, sizeof so);
    snprintf(args, sizeof args, "grad --net abieight --width 4 --depth 2 --format binary32 --plugin '%s'", so);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %.400s%.400s", args, r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

Suite *suite_plugin_load(void)
{
    Suite *s = suite_create("plugin_load");
    TCase *tc = tcase_create("plugin_load");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, crash_while_loading_is_the_plugins_failure);
    tcase_add_test(tc, truncated_plugin_is_refused);
    tcase_add_test(tc, plugin_output_stays_off_stdout);
    tcase_add_test(tc, abi6_plugin_still_loads);
    tcase_add_test(tc, abi7_plugin_runs_in_double_only);
    tcase_add_test(tc, abi8_plugin_keeps_its_mpfr_operators);
    suite_add_tcase(s, tc);
    return s;
}
