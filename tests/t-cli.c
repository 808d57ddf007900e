/* The vijp command, run as a user would: exit status, stdout and stderr.
 * The command's path comes from VIJP_BIN (set by `make check`). */
#include "fixtures/clirun.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------- version and help */

START_TEST(test_version)
{
    run_result r = run_vijp("--version");
    ck_assert_msg(r.rc == CLI_OK, "vijp --version exited %d: %s", r.rc, r.err);
    ck_assert_msg(!strncmp(r.out, "vijp ", 5), "vijp --version printed '%s'", r.out);
    /* The command and this test binary are built from the same tree. */
    ck_assert_msg(strstr(r.out, VIJP_VERSION) != NULL, "version '%s' lacks %s", r.out, VIJP_VERSION);
    run_free(&r);
}
END_TEST

START_TEST(test_help)
{
    static const char *args[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        run_result r = run_vijp(args[i]);
        ck_assert_msg(r.rc == CLI_OK, "vijp %s exited %d", args[i], r.rc);
        ck_assert_msg(strstr(r.out, "usage: vijp") && strstr(r.out, "grad"), "vijp %s printed '%s'", args[i], r.out);
        ck_assert_msg(r.err[0] == 0, "vijp %s wrote to stderr: %s", args[i], r.err);
        run_free(&r);
    }
    static const char *gargs[] = {"grad --help", "grad -h"};
    for (size_t i = 0; i < sizeof gargs / sizeof *gargs; i++) {
        run_result r = run_vijp(gargs[i]);
        ck_assert_msg(r.rc == CLI_OK, "vijp %s exited %d", gargs[i], r.rc);
        ck_assert_msg(strstr(r.out, "usage: vijp grad"), "vijp %s printed '%s'", gargs[i], r.out);
        /* Every option the tests below use is documented. */
        static const char *opts[] = {"--net", "--depth", "--width", "--batch", "--engine",
                                     "--format", "--init", "--loss", "--seed", "--json"};
        for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
            ck_assert_msg(strstr(r.out, opts[k]), "vijp grad --help does not mention %s", opts[k]);
        /* and every layer type's spec syntax, from the registry */
        size_t nt;
        const vijp_layer_type *const *all = vijp_layer_types(&nt);
        for (size_t k = 0; k < nt; k++)
            ck_assert_msg(strstr(r.out, all[k]->syntax), "vijp grad --help does not list '%s'", all[k]->name);
        run_free(&r);
    }
    /* Each command's help names an option once where it explains it (a line
     * "  --NAME"): certify's once explained --formats twice. */
    static const char *const commands[] = {"grad", "drift", "report", "regress", "certify", "memory", "check-layer", "eval"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "%s --help", commands[i]);
        run_result h = run_vijp(cmd);
        ck_assert_msg(h.rc == CLI_OK, "vijp %s exited %d", cmd, h.rc);
        for (const char *line = h.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            if (strncmp(line, "  --", 4)) continue;
            size_t len = strcspn(line + 2, " =\n") + 2; /* "  --NAME" */
            for (const char *later = strchr(line, '\n'); later; later = strchr(later + 1, '\n'))
                ck_assert_msg(strncmp(later + 1, line, len) || strchr(" =\n", later[1 + len]) == NULL,
                              "vijp %s explains %.*s twice", cmd, (int)(len - 2), line + 2);
        }
        run_free(&h);
    }
    /* No command at all: the usage goes to stderr, as an error. */
    run_result r = run_vijp("");
    ck_assert_int_eq(r.rc, CLI_USAGE);
    ck_assert_msg(r.out[0] == 0 && strstr(r.err, "usage: vijp"), "bare vijp: out '%s', err '%s'", r.out, r.err);
    run_free(&r);
}
END_TEST

/* vijp certify --help lists every registered layer type's syntax (from the
 * registry, as grad's does), under a heading for one layer: certify takes a
 * single layer, not a network cycled to a depth. */
START_TEST(test_certify_help)
{
    run_result r = run_vijp("certify --help");
    ck_assert_msg(r.rc == CLI_OK && r.err[0] == 0, "vijp certify --help exited %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "usage: vijp certify --layer SPEC"), "vijp certify --help printed '%s'", r.out);
    const char *list = strstr(r.out, "\nSPEC (one layer");
    ck_assert_msg(list != NULL, "vijp certify --help has no layer list: '%s'", r.out);
    ck_assert_msg(!strstr(r.out, "cycled to the depth"), "vijp certify --help describes a network, not one layer");
    size_t nt;
    const vijp_layer_type *const *all = vijp_layer_types(&nt);
    for (size_t k = 0; k < nt; k++)
        ck_assert_msg(strstr(list, all[k]->syntax), "vijp certify --help does not list '%s'", all[k]->name);
    run_free(&r);
}
END_TEST

/* vijp drift --help says what the command does: the default net under
 * --net (it was printed under --weights), and the largest mpfr:P that the
 * command accepts with the default --ref-prec-max (it said 2048, where
 * mpfr:4032 runs); --format, grad's option, is refused with a pointer to
 * --formats rather than taken as its abbreviation. */
START_TEST(test_drift_help)
{
    run_result r = run_vijp("drift --help");
    ck_assert_msg(r.rc == CLI_OK && r.err[0] == 0, "vijp drift --help exited %d: %s", r.rc, r.err);
    const char *net = strstr(r.out, "\n  --net SPEC"), *input = strstr(r.out, "\n  --input"),
               *def = strstr(r.out, "(default dense:32,leaky:0.5)");
    ck_assert_msg(net && input && def && net < def && def < input, "the default net is not under --net:\n%.600s",
                  net ? net : r.out);
    /* the limit: the number before " by default" after "mpfr:P up to" */
    const char *up = strstr(r.out, "mpfr:P up to"), *by = up ? strstr(up, " by default") : NULL;
    ck_assert_msg(by != NULL, "vijp drift --help gives no mpfr:P limit:\n%.300s", up ? up : r.out);
    const char *num = by;
    while (num > up && num[-1] >= '0' && num[-1] <= '9') num--;
    long limit = strtol(num, NULL, 10);
    ck_assert_msg(limit > 0, "no number before ' by default': %.80s", up);
    run_free(&r);
    char dir[512], cmd[1024];
    make_temp_dir(dir, sizeof dir, "drift-help");
    snprintf(cmd, sizeof cmd, "drift --formats mpfr:%ld --depth 1 --seeds 1 --no-plots -q --out '%s/a'", limit, dir);
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "the help's limit mpfr:%ld is refused: %s", limit, r.err);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "drift --formats mpfr:%ld --depth 1 --seeds 1 --no-plots -q --out '%s/b'", limit + 1, dir);
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE, "mpfr:%ld, past the help's limit, exited %d", limit + 1, r.rc);
    run_free(&r);
    static const char *const bad[] = {"drift --format double", "drift --format=double", "report --format double"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(cmd, sizeof cmd, "%s --depth 1 --seeds 1 --no-plots --out '%s/c'", bad[k], dir);
        r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, "--formats"), "vijp %s: exit %d, stdout '%s', stderr '%s'",
                      bad[k], r.rc, r.out, r.err);
        run_free(&r);
    }
    snprintf(cmd, sizeof cmd, "%s/c", dir);
    ck_assert_msg(access(cmd, F_OK) != 0, "a refused --format wrote %s", cmd);
    remove_tree(dir);
}
END_TEST

/* ------------------------------------------------------------------ vijp grad */

static double get_real(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(v && json_is_number(v), "key '%s' missing or not a number", key);
    return json_number_value(v);
}

/* Checks one result object of `vijp grad --json`; errors must be below tol. */
static void check_result(json_t *o, const char *engine, const char *format, long depth, long width, double tol)
{
    ck_assert_msg(json_is_object(o), "result is not a JSON object");
    static const char *keys[] = {"engine", "format", "depth", "stored_bytes", "input_grad_rel_err",
                                 "param_grad_rel_err_max", "rel_err_per_layer"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        ck_assert_msg(json_object_get(o, keys[i]), "key '%s' missing", keys[i]);
    ck_assert_str_eq(json_string_value(json_object_get(o, "engine")), engine);
    ck_assert_str_eq(json_string_value(json_object_get(o, "format")), format);
    json_t *d = json_object_get(o, "depth");
    ck_assert_msg(json_is_integer(d) && json_integer_value(d) == depth, "depth is not %ld", depth);
    json_t *w = json_object_get(o, "width");
    ck_assert_msg(json_is_integer(w) && json_integer_value(w) == width, "width is not %ld", width);
    json_t *sb = json_object_get(o, "stored_bytes");
    /* Every engine keeps something on dense + leaky but reversible, which inverts both. */
    ck_assert_msg(json_is_integer(sb) && (json_integer_value(sb) > 0) == !!strcmp(engine, "reversible"),
                  "%s: stored_bytes %lld", engine, (long long)json_integer_value(sb));
    double ex = get_real(o, "input_grad_rel_err"), eth = get_real(o, "param_grad_rel_err_max");
    ck_assert_msg(ex >= 0 && ex < tol, "%s/%s: input_grad_rel_err %g not in [0, %g)", engine, format, ex, tol);
    ck_assert_msg(eth >= 0 && eth < tol, "%s/%s: param_grad_rel_err_max %g not in [0, %g)", engine, format, eth, tol);
    json_t *per = json_object_get(o, "rel_err_per_layer");
    ck_assert_msg(json_is_array(per) && (long)json_array_size(per) == depth,
                  "rel_err_per_layer is not an array of %ld", depth);
    for (size_t i = 0; i < json_array_size(per); i++) {
        json_t *v = json_array_get(per, i);
        ck_assert_msg(json_is_number(v), "rel_err_per_layer[%zu] is not a number", i);
        double e = json_number_value(v);
        ck_assert_msg(e >= 0 && e < tol, "%s/%s: rel_err_per_layer[%zu] = %g not in [0, %g)", engine, format, i, e,
                      tol);
    }
}

/* Error bounds for the 4-layer nets below (dense:8 orthogonal, then leaky 0.5):
 * a first-order worst case is about D·(2n)·u·κ^D with D = 4, n = 8 and
 * κ <= 2 per dense+leaky pair (orthogonal weights: κ = 1; leaky 0.5: κ = 2),
 * i.e. 4·16·16·u ≈ 1024·u.  double (u = 2^-53): 1.1e-13, so 1e-12; binary32
 * (u = 2^-24): 6.1e-5, so 1e-4.  Observed errors are ~2u; a wrong gradient
 * (a sign or a layer lost) gives errors of order 1. */
#define TOL_DOUBLE 1e-12
#define TOL_BINARY32 1e-4

START_TEST(test_grad_json)
{
    run_result r = run_vijp("grad --json --depth 4 --net dense:8,leaky:0.5");
    ck_assert_msg(r.rc == CLI_OK, "exited %d: %s", r.rc, r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    ck_assert_msg(o != NULL, "stdout is not JSON (line %d: %s):\n%s", je.line, je.text, r.out);
    /* Defaults (vijp grad --help): engine moonwalk, format double; the width
     * comes from dense:8. */
    check_result(o, "moonwalk", "double", 4, 8, TOL_DOUBLE);
    json_decref(o);
    run_free(&r);
}
END_TEST

START_TEST(test_grad_json_all_engines)
{
    run_result r = run_vijp("grad --json --depth 4 --net dense:8,leaky:0.5 --engine all --format binary32 "
                            "--batch 2 --seed 9223372036854775807");
    ck_assert_msg(r.rc == CLI_OK, "exited %d: %s", r.rc, r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    ck_assert_msg(o != NULL, "stdout is not JSON (line %d: %s):\n%s", je.line, je.text, r.out);
    json_t *runs = json_object_get(o, "runs");
    ck_assert_msg(json_is_array(runs) && json_array_size(runs) == 5, "'runs' is not an array of the 5 engines");
    static const char *engines[] = {"backprop", "moonwalk", "pure-forward", "reversible", "checkpoint"};
    for (size_t k = 0; k < 5; k++) {
        json_t *run = json_array_get(runs, k);
        check_result(run, engines[k], "binary32", 4, 8, TOL_BINARY32);
        ck_assert_int_eq(json_integer_value(json_object_get(run, "batch")), 2);
        /* INT64_MAX is the largest seed a JSON integer (jansson's json_int_t) holds. */
        ck_assert_msg(json_integer_value(json_object_get(run, "seed")) == INT64_MAX, "seed not echoed");
    }
    json_decref(o);
    run_free(&r);
}
END_TEST

/* A double gradient does not depend on the machine's core count: OpenBLAS
 * on two threads blocks its products otherwise than on one, and this run's
 * errors then differed in their last digits (every engine but backprop);
 * the command runs OpenBLAS on one thread whatever OPENBLAS_NUM_THREADS
 * says, so the two outputs are the same bytes. */
START_TEST(test_grad_independent_of_blas_threads)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) { /* OpenBLAS caps its threads at the CPUs: nothing to tell apart */
        fprintf(stderr, "test_grad_independent_of_blas_threads: SKIPPED on one CPU\n");
        return;
    }
    const char *args = "grad --json --depth 4 --batch 16 --net dense:128,tanh --engine all --format double";
    const char *had = getenv("OPENBLAS_NUM_THREADS");
    char *saved = had ? strdup(had) : NULL;
    run_result r[2];
    for (int k = 0; k < 2; k++) {
        setenv("OPENBLAS_NUM_THREADS", k ? "2" : "1", 1);
        r[k] = run_vijp(args);
    }
    /* restored before any assertion: under CK_FORK=no the next test shares this process */
    if (saved) setenv("OPENBLAS_NUM_THREADS", saved, 1);
    else unsetenv("OPENBLAS_NUM_THREADS");
    free(saved);
    for (int k = 0; k < 2; k++) ck_assert_msg(r[k].rc == CLI_OK, "exited %d: %s", r[k].rc, r[k].err);
    size_t at = 0; /* the first byte that differs, and the line it is on */
    while (r[0].out[at] && r[0].out[at] == r[1].out[at]) at++;
    size_t line = at;
    while (line && r[0].out[line - 1] != '\n') line--;
    ck_assert_msg(!r[0].out[at] && !r[1].out[at], "one BLAS thread: %.120s\ntwo: %.120s", r[0].out + line,
                  r[1].out + line);
    run_free(&r[0]), run_free(&r[1]);
}
END_TEST

START_TEST(test_grad_table)
{
    /* Without --json: a human-readable table on stdout, nothing on stderr. */
    run_result r = run_vijp("grad --depth 4 --net dense:8,leaky:0.5 --engine backprop,moonwalk");
    ck_assert_msg(r.rc == CLI_OK, "exited %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "backprop") && strstr(r.out, "moonwalk"), "table lacks the engines:\n%s", r.out);
    ck_assert_msg(r.err[0] == 0, "stderr not empty: %s", r.err);
    run_free(&r);
}
END_TEST

/* Bad input: exit status 2 ("bad usage or input"), a message on stderr and
 * nothing at all on stdout (so a caller parsing stdout never sees half a result). */
START_TEST(test_bad_input)
{
    static const struct {
        const char *args, *why;
    } bad[] = {
        {"grad --json --net conv:3", "unknown layer"},
        {"grad --json --format float8", "unknown format"},
        {"grad --json --format mpfr:1", "precision below VIJP_PREC_MIN = 2"},
        {"grad --json --format mpfr:70000", "precision above VIJP_PREC_MAX = 65536"},
        {"grad --json --format mpfr:", "precision missing"},
        {"grad --json --net dense:8,leaky:0", "leaky slope 0 (that is relu)"},
        {"grad --json --net dense:8,leaky:-1", "negative leaky slope"},
        {"grad --json --net dense:8x4 --width 6", "dense:8x4 takes 4 inputs, not 6"},
        {"grad --json --net dense:8x4", "dense:8x4 cycled: its output 8 feeds its input 4"},
        {"grad --json --net relu", "elementwise first layer without --width"},
        {"grad --json --net dense:0", "empty dense layer"},
        {"grad --json --net dense:8,", "empty layer in the spec"},
        {"grad --json --depth 0", "depth 0"},
        {"grad --json --depth -3", "negative depth"},
        {"grad --json --batch 0", "batch 0"},
        {"grad --json --engine foo", "unknown engine"},
        {"grad --json --engine moonwalk,foo", "unknown engine in a list"},
        {"grad --json --init scaled:0", "gain must be > 0"},
        {"grad --json --loss cubic", "unknown loss"},
        {"grad --json --seed -1", "negative seed"},
        {"grad --json --seed 1x", "seed with trailing text"},
        {"grad --json --seed 18446744073709551616", "seed above UINT64_MAX"},
        {"grad --json --width 6x", "width with trailing text"},
        {"grad --json --bogus", "unknown option"},
        {"grad --json --depth", "option without its argument"},
        {"grad --json stray", "stray argument"},
        {"frobnicate", "unknown subcommand"},
        {"grad --json --engine checkpoint --segment 0", "empty checkpoint segment"},
        {"certify --samples 3", "certify without --layer"},
        {"certify --layer leaky:0.1 --samples 0", "zero samples"},
        {"certify --layer leaky:0.1 --samples 1000000000", "absurd sample count"},
        {"certify --layer dense:0", "zero-size layer"},
        {"certify --layer dense:8x0", "zero-input layer"},
        {"certify --layer dense:8,relu", "two layers"},
        {"certify --layer conv:3", "unknown layer"},
        {"certify --layer tanh --scale -1", "negative scale"},
        {"certify --layer tanh --scale nan", "NaN scale"},
        {"certify --layer tanh --range 0", "empty range"},
        {"certify --layer tanh --prec-max 10", "precision cap below double's 106-bit retry"},
        {"certify --layer tanh --width 0", "zero width"},
        {"certify --layer tanh stray", "stray argument"},
        {"memory --net dense:8 --depth-max 4", "memory without --budget"},
        {"memory --net dense:8 --depth-max 4 --budget 0", "zero budget"},
        {"memory --net dense:8 --depth-max 4 --budget 12X", "bad budget suffix"},
        {"memory --net dense:8 --depth-max 0 --budget 1K", "depth 0"},
        {"memory --net dense:8 --depth-max 4 --budget 1K --engines warp", "unknown engine"},
        {"memory --net dense:8 --depth-max 4 --budget 1K --engines moonwalk,moonwalk", "engine twice"},
        {"memory --net dense:8 --depth-max 4 --budget 1K --format float8", "unknown format"},
        {"memory --net dense:0 --depth-max 4 --budget 1K", "empty layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        run_result r = run_vijp(bad[i].args);
        ck_assert_msg(r.rc == CLI_USAGE, "vijp %s (%s): exit %d, want %d; stderr: %s", bad[i].args, bad[i].why, r.rc,
                      CLI_USAGE, r.err);
        ck_assert_msg(r.out[0] == 0, "vijp %s (%s): stdout not empty: '%s'", bad[i].args, bad[i].why, r.out);
        ck_assert_msg(strlen(r.err) > 5, "vijp %s (%s): no message on stderr", bad[i].args, bad[i].why);
        run_free(&r);
    }
    /* a format by another library's name: the user is told vijp's */
    static const struct {
        const char *args, *says;
    } named[] = {
        {"grad --json --format fp32", "did you mean binary32?"},
        {"drift --formats bf16,fp64 --out /nonexistent/never", "unknown format 'bf16': did you mean bfloat16?"},
        {"memory --net dense:8 --depth-max 4 --budget 1K --format half", "did you mean binary16?"},
        /* an empty item, or the same item twice, in a list (an unset
         * variable, a pasted line): refused, not skipped or run twice */
        {"drift --net dense:8 --formats double,,binary32 --out /nonexistent/never", "an empty item in the list of formats"},
        {"drift --net dense:8 --seeds 1, --out /nonexistent/never", "an empty item in the list of seeds"},
        {"drift --net dense:8 --init ,gaussian --out /nonexistent/never", "an empty item in the list of initialisations"},
        {"drift --net dense:8 --init gaussian,gaussian --out /nonexistent/never", "initialisation 'gaussian' given twice"},
        {"drift --net dense:8 --net dense:8 --out /nonexistent/never", "network 'dense:8' given twice"},
        {"drift --net dense:8 --formats double --tol double=0.1,double=0.2 --out /nonexistent/never",
         "tolerance for double given twice"},
        {"check-layer tanh --width 4 --check ,", "--check ',' has an empty item"},
        {"check-layer tanh --width 4 --check adjoint,,declarations", "has an empty item"},
        /* a limit that is not "positive" is said as it is */
        {"grad --json --init scaled:1e308", "0 < G <= 1e300"},
        {"certify --layer tanh --scale 1e308", "--scale wants a number in (0, 1e300)"},
        {"certify --layer tanh --width 2 --input /nonexistent/x.npy --samples 3", "--input gives the points"},
        /* a misspelt layer: the nearest name, and a list that ends whole
         * (it once filled the message and stopped mid-word) */
        {"grad --json --net dense:8,tahn", "unknown layer 'tahn'; did you mean tanh?"},
        {"grad --json --net dense:8,zzzzzz", "more: vijp grad --help)"},
    };
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
        run_result r = run_vijp(named[i].args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, named[i].says), "vijp %s: exit %d, want %d and '%s': %s",
                      named[i].args, r.rc, CLI_USAGE, named[i].says, r.err);
        run_free(&r);
    }
}
END_TEST

/* A layer argument out of range is refused when the spec is parsed, with a
 * message naming the item (and, past --depth, that the depth leaves it
 * unused), before anything runs.  leaky:1e300 ran and printed nan. */
START_TEST(test_layer_args_named)
{
    static const struct {
        const char *args, *item, *more;
    } cases[] = {
        {"grad --net dense:16,leaky:1e300 --depth 2", "'leaky:1e300'", "2^12"},
        {"grad --net dense:16,tanh,leaky:1e300 --depth 2", "'leaky:1e300'", "which depth 2 leaves unused"},
        {"grad --net dense:16,tanh,bogus --depth 2", "'bogus'", "which depth 2 leaves unused"},
        {"grad --net dense:16,tanh,relu,bogus --depth 2", "spec item 4 ('bogus'", "depth 2 leaves items 3 to 4 unused"},
        {"grad --net dense:16,squeeze:4294967296x4294967296 --depth 2", "'squeeze:4294967296x4294967296'", "16777216"},
        {"grad --net dense:16,avgpool:-2 --depth 2", "'avgpool:-2'", "window"},
        {"drift --net dense:16,leaky:1e300 --depth 2 --out /nonexistent/never", "'leaky:1e300'", "2^12"},
        {"memory --net dense:16,leaky:1e300 --depth-max 2 --budget 1K", "'leaky:1e300'", "2^12"},
        {"certify --layer leaky:1e300", "leaky", "2^12"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run_vijp(cases[i].args);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0], "vijp %s: exit %d, stdout '%s'", cases[i].args, r.rc, r.out);
        ck_assert_msg(strstr(r.err, cases[i].item) && strstr(r.err, cases[i].more), "vijp %s: the message should name %s "
                      "and say '%s': %s", cases[i].args, cases[i].item, cases[i].more, r.err);
        run_free(&r);
    }
}
END_TEST

/* Precision limits in the user's terms, refused before anything runs
 * (mpfr:40000 once failed with "precision 80000 out of range", the
 * doubled reference's; --ref-prec-max 5 ran and left an empty folder). */
START_TEST(test_precision_limits)
{
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"grad --format mpfr:40000", "mpfr:32768"},
        {"memory --net dense:4 --depth-max 2 --budget 1K --format mpfr:70000", "65536"},
        {"drift --ref-prec-max 5 --out /nonexistent/never", "--ref-prec-max 128"},
        {"drift --formats double,mpfr:5000 --out /nonexistent/never", "mpfr:4032"},
        {"drift --formats double --ref-prec 5000 --out /nonexistent/never", "--ref-prec 4096"},
        {"report --ref-prec-max 200 --out /nonexistent/never", "--ref-prec-max 212"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run_vijp(cases[i].args);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, cases[i].says), "vijp %s: exit %d, want %d "
                      "and a message with '%s': %s", cases[i].args, r.rc, CLI_USAGE, cases[i].says, r.err);
        run_free(&r);
    }
    /* the largest format grad names is accepted */
    run_result r = run_vijp("grad --format mpfr:32768 --net dense:2 --depth 1 --json");
    ck_assert_msg(r.rc == CLI_OK, "mpfr:32768: exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* A result that is NaN or infinite although every input is finite is a
 * failed computation: exit 1, a message saying what and where, and nothing
 * on stdout, instead of "nan"/"inf" printed as numbers with exit 0. */
START_TEST(test_nonfinite_results)
{
    static const struct {
        const char *args, *says, *where;
    } cases[] = {
        /* 4096^32: ∇θ overflows double in Moonwalk's rebuilt cotangents */
        {"grad --net dense:16,leaky:4096 --depth 64", "infinite", "range of double"},
        {"grad --net dense:16,leaky:4096 --depth 64 --json", "infinite", "range of double"},
        /* weights of 1e200: the forward pass overflows.  The loss is NaN
         * where dgemm adds +Inf and -Inf products (OpenBLAS's Haswell and
         * Zen kernels) and +Inf with its SkylakeX kernel (seen on an
         * AVX-512 Zen 4): either is the message's "loss is". */
        {"grad --net dense:16,leaky:0.5 --depth 4 --init scaled:1e200 --engine all", "the loss is ", "range of double"},
        /* binary32's range (3.4e38) is exceeded at the first layer */
        {"drift --net dense:16,leaky:0.5 --depth 4 --init scaled:1e30 --formats double,binary32 --seeds 1 --no-plots "
         "-q --out", "binary32, seed 1: backprop", "range of binary32"},
        /* memory: relu fragments and sign bits counted from NaN mean nothing */
        {"memory --net dense:16,leaky:4096 --depth-max 64 --budget 1M", "infinite", "range of double"},
        /* affine:exp's scale exp(S) overflows at |S| > 709 */
        {"certify --layer affine:exp+dense:4 --width 8 --scale 1000 --samples 2", "sample ", "infinite in double"},
    };
    char dir[512], args[1024];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vijp-cli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert(mkdtemp(dir) != NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int out = !strcmp(cases[i].args + strlen(cases[i].args) - 5, "--out"); /* drift: a report folder */
        snprintf(args, sizeof args, "%s%s%s%s", cases[i].args, out ? " '" : "", out ? dir : "", out ? "/r'" : "");
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_FAILED && !r.out[0], "vijp %s: exit %d (want %d), stdout '%s'", cases[i].args, r.rc,
                      CLI_FAILED, r.out);
        ck_assert_msg(strstr(r.err, cases[i].says) && strstr(r.err, cases[i].where), "vijp %s: the message should say "
                      "'%s' and '%s': %s", cases[i].args, cases[i].says, cases[i].where, r.err);
        run_free(&r);
    }
    /* In a drift study, rebuilt cotangents that overflow the format are the
     * drift being measured (Moonwalk divides by 0.01 per leaky layer: past
     * bfloat16's 3.4e38 near layer 50): exit 0, said in words, and the
     * statistics without a value are '-', not nan. */
    snprintf(args, sizeof args, "drift --net dense:16,leaky:0.01 --depth 64 --formats bfloat16,double --seeds 1 "
             "--no-plots --out '%s/m'", dir);
    run_result d = run_vijp(args);
    ck_assert_msg(d.rc == CLI_OK && strstr(d.out, "c1 bfloat16 seed 1, moonwalk: g_") &&
                      strstr(d.out, "left the range of bfloat16") && !strstr(d.out, "nan") && !strstr(d.out, " inf "),
                  "drift with an overflowing Moonwalk: exit %d\n%s%s", d.rc, d.out, d.err);
    run_free(&d);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    ck_assert(system(args) == 0);
    /* certify's tables print no NaN or ∞ as a number: no proven bound is '-',
     * an f′ that never underflows is 'never' (leaky: f′ ∈ {α, 1}) */
    run_result r = run_vijp("certify --layer relu --width 4 --samples 2");
    ck_assert_msg(r.rc == CLI_FAILED && !strstr(r.out, "nan") && strstr(r.out, "structure                     -"),
                  "%s", r.out);
    run_free(&r);
    r = run_vijp("certify --layer leaky:0.5 --width 4 --samples 1");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "binary16           never                       never") &&
                      !strstr(r.out, "inf"), "%s", r.out);
    run_free(&r);
}
END_TEST

/* vijp certify: verdicts and exit codes on the known cases, JSON keys. */
START_TEST(test_certify)
{
    static const struct {
        const char *args, *verdict;
        int rc;
        long cokernel;
    } cases[] = {
        {"certify --json --layer leaky:0.1 --samples 4", "certified-submersive", CLI_OK, 0},
        {"certify --json --layer relu --width 8 --samples 4", "not-submersive", CLI_FAILED, -1},
        {"certify --json --layer dense:12x8 --samples 2", "not-submersive", CLI_FAILED, 4},
        {"certify --json --layer dense:8x12 --samples 3", "certified-submersive", CLI_OK, 0},
        {"certify --json --layer dense:8 --init orthogonal --samples 2", "certified-submersive", CLI_OK, 0},
        {"certify --json --layer tanh --width 8 --scale 30 --samples 2", "certified-submersive", CLI_OK, 0},
    };
    static const char *const keys[] = {"verdict", "sigma_min_lower_bound", "sigma_min", "sigma_max", "condition",
                                       "rank", "cokernel_dim", "method", "samples_certified", "points"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run_vijp(cases[i].args);
        ck_assert_msg(r.rc == cases[i].rc, "vijp %s: exit %d, want %d: %s", cases[i].args, r.rc, cases[i].rc, r.err);
        json_t *j = json_loads(r.out, 0, NULL);
        ck_assert_msg(j != NULL, "vijp %s: not JSON", cases[i].args);
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            ck_assert_msg(json_object_get(j, keys[k]) != NULL, "vijp %s: no key %s", cases[i].args, keys[k]);
        ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), cases[i].verdict);
        if (cases[i].cokernel >= 0)
            ck_assert_int_eq(json_integer_value(json_object_get(j, "cokernel_dim")), cases[i].cokernel);
        if (cases[i].rc == CLI_OK) /* every sample certified: a positive proven bound */
            ck_assert(json_number_value(json_object_get(j, "sigma_min_lower_bound")) > 0);
        json_decref(j);
        run_free(&r);
    }
    /* Orthogonal square dense: σ = 1 exactly in exact arithmetic; the proof
     * tries s = 0.99σ first, so the bound is at least 0.98. */
    run_result r = run_vijp("certify --json --layer dense:8 --init orthogonal --samples 2");
    json_t *j = json_loads(r.out, 0, NULL);
    ck_assert(json_number_value(json_object_get(j, "sigma_min_lower_bound")) >= 0.98);
    ck_assert(json_number_value(json_object_get(j, "sigma_min_lower_bound")) <= 1);
    json_decref(j);
    run_free(&r);
    /* The table: tanh far out is analytically submersive, numerically degenerate in double. */
    r = run_vijp("certify --layer tanh --width 8 --scale 30 --samples 2");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "numerically degenerate in double") &&
                      strstr(r.out, "submersive everywhere on [−1000, 1000]"), "%s", r.out);
    run_free(&r);
    r = run_vijp("certify --help");
    ck_assert(r.rc == CLI_OK && strstr(r.out, "Exit status") && strstr(r.out, "3 the layer's"));
    run_free(&r);
}
END_TEST

/* vijp memory against hand counts: dense:8,leaky:0.5 in double, batch 1.
 * Backprop keeps h_0 … h_{d−1}: 64 bytes each, so 64·d.  Moonwalk keeps h_0
 * (64) and one sign bit per unit of each leaky layer among the first d
 * (8 units: 1 byte): 64 + ⌊d/2⌋.  Pure forward keeps h_0 only (no
 * fragments in a submersive stack): 64.  Reversible inverts square dense and
 * leaky layers: 0.  Budget 300: backprop fits 4 layers (256 <= 300 < 320),
 * the others all 8. */
START_TEST(test_memory)
{
    run_result r = run_vijp("memory --json --net dense:8,leaky:0.5 --depth-max 8 --budget 300 "
                            "--engines backprop,moonwalk,pure-forward,reversible");
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    json_t *j = json_loads(r.out, 0, NULL), *e;
    ck_assert(j != NULL);
    size_t k;
    json_array_foreach(json_object_get(j, "engines"), k, e) {
        const char *name = json_string_value(json_object_get(e, "engine"));
        json_t *b = json_object_get(e, "stored_bytes");
        ck_assert_uint_eq(json_array_size(b), 8);
        for (size_t d = 1; d <= 8; d++) {
            json_int_t want = !strcmp(name, "backprop")     ? 64 * (json_int_t)d
                              : !strcmp(name, "moonwalk")   ? 64 + (json_int_t)d / 2
                              : !strcmp(name, "reversible") ? 0 /* both layer types are inverted */
                                                            : 64;
            ck_assert_msg(json_integer_value(json_array_get(b, d - 1)) == want, "%s at depth %zu: %lld, want %lld", name,
                          d, (long long)json_integer_value(json_array_get(b, d - 1)), (long long)want);
        }
        ck_assert_int_eq(json_integer_value(json_object_get(e, "deepest")), !strcmp(name, "backprop") ? 4 : 8);
    }
    ck_assert_uint_eq(k, 4);
    json_decref(j);
    run_free(&r);
    r = run_vijp("memory --net dense:8,leaky:0.5 --depth-max 8 --budget 300 --engines backprop,moonwalk");
    ck_assert(r.rc == CLI_OK && strstr(r.out, "deepest network within 300 bytes") && strstr(r.out, "2.0× backprop's"));
    run_free(&r);
}
END_TEST

/* Control characters in what the user typed (an escape sequence, a carriage
 * return, a bell) are quoted back as \xHH, never sent raw to the terminal
 * that shows the message: a spec, in the library's messages (vijp_fail) and
 * the command's own (cli_say). */
START_TEST(test_control_chars_escaped)
{
    static const struct {
        const char *args, *shown;
    } cases[] = {
        {"grad --net \"$(printf 'dense:8,ta\\033[31mnh')\"", "'ta\\x1b[31mnh'"},
        {"drift --net \"$(printf 'dense:8,ta\\rnh')\" --out /nonexistent/x", "'ta\\x0dnh'"},
        {"grad --net \"$(printf 'dense:8,leaky:0.\\0335')\"", "'leaky:0.\\x1b5'"},
        {"certify --layer \"$(printf 'tanh,\\007x')\"", "'tanh,\\x07x'"},
        {"check-layer \"$(printf 'ta\\033nh')\"", "ta\\x1bnh"},
        {"grad --net dense:8,tanh \"$(printf 'x\\033]0;title\\007')\"", "'x\\x1b]0;title\\x07'"},
        {"\"$(printf 'gr\\033ad')\"", "'gr\\x1bad'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run_vijp(cases[i].args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, cases[i].shown), "vijp %s: exit %d, want 2 and %s in: %s",
                      cases[i].args, r.rc, cases[i].shown, r.err);
        for (const char *c = r.err; *c; c++)
            ck_assert_msg((unsigned char)*c >= 0x20 || *c == '\n', "vijp %s: control character 0x%02x in: %s",
                          cases[i].args, (unsigned char)*c, r.err);
        run_free(&r);
    }
}
END_TEST

/* Results that cannot be written are a failure: with stdout on /dev/full
 * (every write fails with ENOSPC, which stdio reports only when it flushes)
 * each command exits 1 with a message naming the failure, instead of
 * exiting 0 having printed nothing (grad once did). */
START_TEST(test_stdout_full)
{
    ck_assert_msg(access("/dev/full", W_OK) == 0, "/dev/full is missing: this test needs Linux's always-full device");
    static const char *const cmds[] = {
        "grad --net dense:8,tanh --depth 3",
        "grad --net dense:8,tanh --depth 3 --json",
        "certify --layer tanh --width 4 --samples 2",
        "memory --net dense:8,leaky:0.5 --depth-max 4 --budget 1K",
        "--version",
        "grad --help",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        run_result r = run_bin_to(getenv("VIJP_BIN"), cmds[i], "/dev/full");
        ck_assert_msg(r.rc == CLI_FAILED, "vijp %s >/dev/full: exit %d, want %d; stderr: %s", cmds[i], r.rc, CLI_FAILED,
                      r.err);
        ck_assert_msg(strstr(r.err, "standard output") && strstr(r.err, "No space left on device"),
                      "vijp %s >/dev/full: the message does not say what failed: '%s'", cmds[i], r.err);
        run_free(&r);
    }
}
END_TEST

/* stdout a pipe whose reader has gone (vijp grad --help | head): exit 1,
 * and no line on stderr about the broken pipe (the user stopped reading). */
START_TEST(test_stdout_reader_gone)
{
    int out[2], err[2];
    ck_assert(!pipe(out) && !pipe(err));
    close(out[0]); /* the reader is gone before anything is written */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(out[1], 1), dup2(err[1], 2);
        close(err[0]);
        execl(getenv("VIJP_BIN"), "vijp", "drift", "--help", (char *)NULL);
        _exit(127);
    }
    close(out[1]), close(err[1]);
    char said[512] = {0};
    ssize_t got = read(err[0], said, sizeof said - 1);
    close(err[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == CLI_FAILED, "status %d", st);
    ck_assert_msg(got <= 0, "stderr: '%s'", said);
}
END_TEST

/* The progress meter (src/study/progress.c, unit-tested in t-progress.c) shows
 * on a terminal as units (grad: their layers) finish, never on stdout, and not at all with -q or
 * when stderr is not a terminal, which is how every other test here runs
 * (their stderr is a file: checked empty on success below). */
/* A line of the meter with none done (first: its bar's end and count) and
 * an estimate of the time left: redrawn within the first unit. */
static int redrawn_within(const char *err, const char *first)
{
    for (const char *at = err; (at = strstr(at, first)) != NULL; at++) {
        const char *end = strchr(at, '\r'), *about = strstr(at, " elapsed, about ");
        if (about && (!end || about < end)) return 1;
    }
    return 0;
}

START_TEST(test_progress_meter)
{
    static const struct {
        const char *args, *unit;
    } cmds[] = {
        {"grad --net dense:8,tanh --depth 3 --engine backprop,moonwalk", "3/3 runs"}, /* and the reference */
        {"certify --layer tanh --width 4 --samples 3", "3/3 samples"},
    };
    unsetenv("CI"); /* CI keeps the meter off even on a terminal */
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        run_result r = run_vijp_tty(cmds[i].args);
        ck_assert_msg(r.rc == CLI_OK || r.rc == CLI_FAILED, "vijp %s on a terminal: exit %d", cmds[i].args, r.rc);
        ck_assert_msg(strstr(r.err, cmds[i].unit) && strstr(r.err, "elapsed") && strstr(r.err, "\r"),
                      "vijp %s: no meter on the terminal: '%s'", cmds[i].args, r.err);
        ck_assert_msg(!strstr(r.out, "elapsed"), "vijp %s: the meter went to stdout", cmds[i].args);
        run_free(&r);
        char quiet[256];
        snprintf(quiet, sizeof quiet, "%s -q", cmds[i].args);
        r = run_vijp_tty(quiet);
        ck_assert_msg(!r.err[0], "vijp %s: a meter despite -q: '%s'", quiet, r.err);
        run_free(&r);
        r = run_vijp(cmds[i].args); /* stderr a file */
        ck_assert_msg(!r.err[0], "vijp %s: a meter without a terminal: '%s'", cmds[i].args, r.err);
        run_free(&r);
    }
    /* grad's meter moves within a run, with its layers: a first run of about
     * a second here (pure forward carries a tangent per input, 32 inputs, 825
     * layer steps) is redrawn before it ends, with no run done and an
     * estimate of the time left from its steps so far. */
    const char *long_run = "grad --net dense:64,tanh --depth 24 --batch 32 --engine pure-forward --format binary32";
    run_result lr = run_vijp_tty(long_run);
    ck_assert_msg(lr.rc == CLI_OK, "vijp %s on a terminal: exit %d: %s", long_run, lr.rc, lr.err);
    ck_assert_msg(redrawn_within(lr.err, "] 0/2 runs, "), "vijp %s: the meter did not move within the first run: '%s'",
                  long_run, lr.err);
    run_free(&lr);
    char dir[512], args[1024];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vijp-cli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert(mkdtemp(dir) != NULL);
    static const char *const drift_opts[] = {"", " -q", " --no-progress"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "drift --net dense:8,leaky:0.5 --depth 4 --formats double --seeds 1,2 --no-plots "
                 "--out '%s/d'%s", dir, drift_opts[k]);
        run_result r = run_vijp_tty(args);
        ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %s", args, r.rc, r.err);
        ck_assert_msg(k ? !r.err[0] : strstr(r.err, "2/2 curves") != NULL, "vijp %s: stderr '%s'", args, r.err);
        run_free(&r);
        r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_OK && !r.err[0], "vijp %s without a terminal: stderr '%s'", args, r.err);
        run_free(&r);
    }
    /* drift's meter moves within a curve too (vijp_drift_setup.on_progress):
     * one curve of about a second here is redrawn before it ends, with no
     * curve done and an estimate of the time left */
    snprintf(args, sizeof args, "drift --net dense:256,gelu --depth 16 --batch 16 --formats binary32 --seeds 1 "
             "--jobs 1 --no-plots --out '%s/w'", dir);
    lr = run_vijp_tty(args);
    ck_assert_msg(lr.rc == CLI_OK, "vijp %s on a terminal: exit %d: %s", args, lr.rc, lr.err);
    ck_assert_msg(redrawn_within(lr.err, "] 0/1 curves, "), "vijp %s: the meter did not move within the curve: '%s'",
                  args, lr.err);
    run_free(&lr);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    ck_assert(system(args) == 0);
}
END_TEST

/* The documentation's examples ("    $ build/vijp ..." and the output shown,
 * in README.md, CONTRIBUTING.md and the guides in docs/) still say what the
 * command prints: scripts/check-readme.sh runs each one (with VIJP_BIN, and the
 * test plugins and vijp-perturbed beside it) and compares shapes line for line.
 * The repository root is the directory above VIJP_BIN's (build/ or
 * build-san/). */
START_TEST(test_readme_examples)
{
    const char *bin = getenv("VIJP_BIN");
    char root[4096], script[4200];
    ck_assert_msg(bin && strlen(bin) < sizeof root, "VIJP_BIN unset or too long");
    strcpy(root, bin);
    for (int up = 0; up < 2; up++) { /* dirname, twice */
        char *slash = strrchr(root, '/');
        ck_assert_msg(slash != NULL, "VIJP_BIN '%s' is not a path like ROOT/build/vijp", bin);
        *slash = 0;
    }
    snprintf(script, sizeof script, "%s/scripts/check-readme.sh", root[0] ? root : "");
    ck_assert_msg(access(script, X_OK) == 0, "%s is missing or not executable", script);
    run_result r = run_bin(script, "");
    ck_assert_msg(r.rc == 0, "scripts/check-readme.sh exited %d:\n%s%s", r.rc, r.out, r.err);
    int n = 0, files = 0;
    const char *all = strstr(r.out, "check-readme: all ");
    ck_assert_msg(all && sscanf(all, "check-readme: all %d examples match in %d files", &n, &files) == 2 &&
                      n >= 2 && files >= 2,
                  "scripts/check-readme.sh checked too few examples or files: %s", r.out);
    run_free(&r);
}
END_TEST

/* The folders vijp drift and vijp report write by default, named by their
 * --help, are ignored by git in the source tree (VIJP_BIN's ROOT/build/vijp):
 * a study run there must not show up as files to commit.  Skipped outside
 * a git checkout (a release tarball). */
START_TEST(test_default_outputs_ignored)
{
    const char *bin = getenv("VIJP_BIN");
    char root[1024], cmd[1400];
    ck_assert_msg(bin && strlen(bin) < sizeof root, "VIJP_BIN unset or too long");
    strcpy(root, bin);
    for (int up = 0; up < 2; up++) { /* dirname, twice */
        char *slash = strrchr(root, '/');
        ck_assert_msg(slash != NULL, "VIJP_BIN '%s' is not a path like ROOT/build/vijp", bin);
        *slash = 0;
    }
    snprintf(cmd, sizeof cmd, "-c \"command -v git && git -C '%s' rev-parse --is-inside-work-tree\"", root[0] ? root : "/");
    run_result r = run_bin("/bin/sh", cmd);
    int checkout = r.rc == 0;
    run_free(&r);
    if (!checkout) {
        fprintf(stderr, "test_default_outputs_ignored: %s is not a git checkout (or git is missing), skipped\n", root);
        return;
    }
    static const struct {
        const char *help, *before, *after;
    } where[] = {
        {"drift --help", "report folder (default ", ")"},
        {"report --help", "Writes ", ","},
    };
    for (size_t k = 0; k < sizeof where / sizeof *where; k++) {
        r = run_vijp(where[k].help);
        const char *p = strstr(r.out, where[k].before);
        ck_assert_msg(r.rc == CLI_OK && p, "vijp %s names no default folder", where[k].help);
        p += strlen(where[k].before);
        size_t n = strcspn(p, where[k].after);
        ck_assert_msg(n > 0 && n < 200 && !strncmp(p, "reports/", 8), "vijp %s: default folder '%.*s'", where[k].help,
                      (int)(n < 200 ? n : 200), p);
        /* the folder, and the curves a killed run keeps beside it for --resume (PARENT/.NAME.vijp-units) */
        const char *name = p + n;
        while (name > p && name[-1] != '/') name--;
        for (int kept = 0; kept < 2; kept++) {
            if (kept)
                snprintf(cmd, sizeof cmd, "-C '%s' check-ignore -q '%.*s.%.*s.vijp-units/1.unit'", root, (int)(name - p), p,
                         (int)(p + n - name), name);
            else
                snprintf(cmd, sizeof cmd, "-C '%s' check-ignore -q '%.*s/drift.json'", root, (int)n, p);
            run_result g = run_bin("git", cmd);
            ck_assert_msg(g.rc == 0, "git %s: exit %d: not ignored (%s vijp %s's default folder): add it to .gitignore %s",
                          cmd, g.rc, kept ? "the curves kept beside" : "a file in", where[k].help, g.err);
            run_free(&g);
        }
        run_free(&r);
    }
}
END_TEST

/* Without VIJP_BIN there is no command to run: the suite fails rather than
 * passing without testing anything. */
START_TEST(test_no_vijp_bin)
{
    ck_abort_msg("VIJP_BIN is unset: run the suite through `make check` (or set VIJP_BIN to the vijp command)");
}
END_TEST

Suite *suite_cli(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60); /* each run takes milliseconds; room for sanitizer builds */
    const char *bin = getenv("VIJP_BIN");
    if (!bin || !*bin) {
        tcase_add_test(tc, test_no_vijp_bin);
    } else {
        tcase_add_test(tc, test_version);
        tcase_add_test(tc, test_help);
        tcase_add_test(tc, test_certify_help);
        tcase_add_test(tc, test_drift_help);
        tcase_add_test(tc, test_grad_json);
        tcase_add_test(tc, test_grad_json_all_engines);
        tcase_add_test(tc, test_grad_table);
        tcase_add_test(tc, test_grad_independent_of_blas_threads);
        tcase_add_test(tc, test_bad_input);
        tcase_add_test(tc, test_layer_args_named);
        tcase_add_test(tc, test_precision_limits);
        tcase_add_test(tc, test_nonfinite_results);
        tcase_add_test(tc, test_certify);
        tcase_add_test(tc, test_memory);
        tcase_add_test(tc, test_stdout_full);
    tcase_add_test(tc, test_stdout_reader_gone);
        tcase_add_test(tc, test_control_chars_escaped);
        tcase_add_test(tc, test_progress_meter);
        tcase_add_test(tc, test_readme_examples);
        tcase_add_test(tc, test_default_outputs_ignored);
    }
    suite_add_tcase(s, tc);
    return s;
}
