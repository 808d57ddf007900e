/* A drift study's sizing (src/drift/peak.c, cli/drift.c): the peak memory
 * `vijp drift --estimate-memory` predicts against the peak RSS the same
 * study reaches when it runs (getrusage's ru_maxrss of the child), and a
 * study past the limit refused before it starts. */
#include "fixtures/clirun.h"
#include "vijp/memory.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The estimate in bytes and the curves at once it was made for (NULL: not
 * wanted), from --estimate-memory's line. */
static double estimate_at_once(const char *study, int *at_once)
{
    char args[1024];
    snprintf(args, sizeof args, "drift %s --seeds 1 --no-plots -q --out /nonexistent/never --estimate-memory", study);
    run_result r = run_vijp(args);
    const char *p = strstr(r.out, " bytes of resident set), ");
    const char *open = p ? p : r.out;
    while (open > r.out && open[-1] != '(') open--;
    ck_assert_msg(r.rc == CLI_OK && p && open > r.out, "exit %d: %s%s", r.rc, r.out, r.err);
    double b = strtod(open, NULL);
    if (at_once) *at_once = atoi(p + strlen(" bytes of resident set), "));
    run_free(&r);
    return b;
}

static double estimate(const char *study) { return estimate_at_once(study, NULL); }

/* The study's peak RSS in bytes: run in a child of its own, whose
 * RUSAGE_CHILDREN then holds the vijp process's ru_maxrss alone (KiB). */
static double measured(const char *study, const char *dir)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char args[1024];
        snprintf(args, sizeof args, "drift %s --seeds 1 --no-plots -q --out '%s/r'", study, dir);
        run_result r = run_vijp(args);
        struct rusage ru;
        long kb = r.rc == CLI_OK && !getrusage(RUSAGE_CHILDREN, &ru) ? ru.ru_maxrss : -1;
        if (write(fd[1], &kb, sizeof kb) != (ssize_t)sizeof kb) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    long kb = -1;
    ck_assert_int_eq(read(fd[0], &kb, sizeof kb), (ssize_t)sizeof kb);
    close(fd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(kb > 0, "the study failed: %s", study);
    return 1024.0 * (double)kb;
}

/* Within 20% either way: the sizing counts every block a curve allocates
 * (peak.c) but not the allocator's fragmentation nor the report's own
 * tables exactly, a few MB here (docs/memory.md has the measured table). */
static void check_study(const char *study)
{
    char dir[512];
    make_temp_dir(dir, sizeof dir, "mem");
    double want = estimate(study), got = measured(study, dir);
    ck_assert_msg(got >= 0.8 * want && got <= 1.2 * want, "%s: predicted %.1f MB, measured %.1f MB (%+.0f%%)", study,
                  want / 1e6, got / 1e6, 100 * (want / got - 1));
    remove_tree(dir);
}

/* Three small studies (0.5, 0.8 and 0.7 s CPU), one curve and two at once;
 * the longer runs (VIJP_TEST_SCALE > 1, make check-long) add two more nets. */
/* The sizing's bytes a value (vijp_resident_value_bytes) are what a
 * matrix of the format holds: a double where vijp_mat_init sets d (double
 * and the emulated formats), an mpfr_t and its limbs where it sets m. */
START_TEST(value_bytes_follow_the_holding)
{
    static const char *const fmts[] = {"double", "binary32", "bfloat16+binary32", "mxfp8+binary32", "e4m3",
                                       "bfloat16:sr+binary32", "mpfr:64", "mpfr:128", "mpfr:300"};
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) {
        vijp_format f;
        ck_assert(!vijp_format_parse(fmts[i], &f, NULL));
        vijp_mat a;
        vijp_mat_init(&a, 2, 1, &f);
        size_t held = a.d ? sizeof(double) : sizeof(mpfr_t) + mpfr_custom_get_size((mpfr_prec_t)f.prec);
        ck_assert_msg(vijp_resident_value_bytes(&f) == held, "%s: sized at %zu bytes a value, held in %zu", fmts[i],
                      vijp_resident_value_bytes(&f), held);
        vijp_mat_clear(&a);
    }
}
END_TEST

START_TEST(estimate_meets_peak_rss)
{
#if defined(__SANITIZE_ADDRESS__)
    /* its shadow memory and redzones are not the study's: the estimate alone */
    fputs("# estimate_meets_peak_rss: the RSS comparison skipped under AddressSanitizer\n", stderr);
    ck_assert(estimate("--net dense:96,tanh --depth 32 --batch 1 --formats binary32 --jobs 1") > 1e6);
    return;
#endif
    check_study("--net dense:96,tanh --depth 32 --batch 1 --formats binary32 --jobs 1");
    check_study("--net dense:96,leaky:0.5 --depth 32 --batch 1 --formats bfloat16+binary32,binary32 --jobs 2");
    /* double: its upper level held at 170 bits; 64 dense layers of 128 */
    check_study("--net dense:128,leaky:0.5 --depth 128 --batch 1 --formats double --jobs 1");
    if (test_iters(1) > 1) {
        check_study("--net dense:128,gelu --depth 64 --batch 1 --formats binary32 --jobs 1");
        check_study("--net dense:128,relu,dense:128,layernorm --depth 32 --batch 1 --formats binary32 --jobs 1");
    }
}
END_TEST

/* Two curves at once count the two largest curves' peaks, not the
 * largest twice: double and binary32 at once come out the binary32
 * curve's peak below two double curves at once (two initialisations of
 * the same net), where the old count made them equal.  The process's own
 * part cancels: E(d, d) − E(d, b) = E(d) − E(b), up to that part's
 * difference between the four processes (their resident sets when they
 * size the study: well under 1 MB apart, measured), so a quarter of
 * E(d) − E(b) (13.4 MB here) separates the two counts with room. */
START_TEST(estimate_sums_the_largest_curves)
{
    const char *net = "--net dense:192,tanh --depth 64 --batch 4";
    char a[256];
    snprintf(a, sizeof a, "%s --formats double --jobs 1", net);
    double d = estimate(a);
    snprintf(a, sizeof a, "%s --formats binary32 --jobs 1", net);
    double b = estimate(a);
    snprintf(a, sizeof a, "%s --formats double,binary32 --jobs 2", net);
    double db = estimate(a);
    snprintf(a, sizeof a, "%s --formats double --init orthogonal,gaussian --jobs 2", net);
    double dd = estimate(a);
    ck_assert_msg(d - b > 5e6, "double %.1f MB, binary32 %.1f MB: too close to tell", d / 1e6, b / 1e6);
    ck_assert_msg(fabs((dd - db) - (d - b)) < (d - b) / 4,
                  "two double curves %.1f MB, double and binary32 %.1f MB: %.1f MB apart, want %.1f", dd / 1e6,
                  db / 1e6, (dd - db) / 1e6, (d - b) / 1e6);
}
END_TEST

/* A refused study left no folder at dir/name. */
static void no_folder(const char *dir, const char *name)
{
    char out[600];
    struct stat st;
    snprintf(out, sizeof out, "%s/%s", dir, name);
    ck_assert_msg(stat(out, &st) != 0, "a refused study created its folder %s", out);
}

/* --max-memory between what one curve and two at once need: the study
 * plans one at a time (its two jobs inside the curve), runs, and writes
 * the numbers it writes without the limit; below one curve it is refused
 * before its folder exists, naming the limit. */
START_TEST(max_memory_runs_fewer_curves_at_once)
{
    static const char study[] = "--net dense:96,leaky:0.5 --depth 32 --batch 1 --formats bfloat16+binary32,binary32 "
                                "--jobs 2";
    char args[2048], limited[1024], dir[512];
    int k2, k1;
    double two = estimate_at_once(study, &k2);
    ck_assert_int_eq(k2, 2);
    snprintf(limited, sizeof limited, "%s --max-memory %.0fK", study, (two - 1e6) / 1024);
    double one = estimate_at_once(limited, &k1);
    ck_assert_msg(k1 == 1 && one < two - 1e6, "one at a time: %d curves, %.0f bytes (two: %.0f)", k1, one, two);
    make_temp_dir(dir, sizeof dir, "maxmem");
    snprintf(args, sizeof args, "drift %s --seeds 1 --no-plots -q --out '%s/free'", study, dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    snprintf(args, sizeof args, "drift %s --seeds 1 --no-plots -q --out '%s/limited'", limited, dir);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    for (int f = 0; f < 2; f++) {
        const char *name = f ? "curves.csv" : "drift.csv";
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/free/%s", dir, name), snprintf(b, sizeof b, "%s/limited/%s", dir, name);
        char *x = slurp_path(a), *y = slurp_path(b);
        ck_assert_msg(x && y && !strcmp(x, y), "%s differs with one curve at a time", name);
        free(x), free(y);
    }
    snprintf(args, sizeof args, "drift %s --seeds 1 --no-plots -q --max-memory %.0fK --out '%s/none'", study,
             (one - 4e6) / 1024, dir);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "vijp drift: needs about ") && strstr(r.err, "(--max-memory)"),
                  "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "drift %s --seeds 1 --estimate-memory --max-memory %.0fK", study, (one - 4e6) / 1024);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "1 curve at once on 2 jobs; more than the ") &&
                  strstr(r.out, "available (--max-memory): it would be refused"), "exit %d: %s", r.rc, r.out);
    run_free(&r);
    no_folder(dir, "none");
    static const char *const bad[] = {"0", "12Q", "-5G", "G", "99999999999G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) { /* refused as it is parsed */
        snprintf(args, sizeof args, "drift %s --seeds 1 --max-memory '%s' --out '%s/bad'", study, bad[i], dir);
        r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "--max-memory wants a positive number of bytes"),
                      "--max-memory %s: exit %d: %s", bad[i], r.rc, r.err);
        run_free(&r);
    }
    no_folder(dir, "bad");
    remove_tree(dir);
}
END_TEST

/* A study whose estimate is past the address-space limit is refused with
 * exit 2, the estimate and the limit, before its folder exists. */
START_TEST(refused_past_the_limit)
{
#if defined(__SANITIZE_ADDRESS__)
    fputs("# refused_past_the_limit: skipped under AddressSanitizer (it cannot run with ulimit -v)\n", stderr);
    return;
#endif
    char dir[512], args[1024];
    make_temp_dir(dir, sizeof dir, "memlimit");
    /* about 5.8 GiB predicted for one curve at a time (--estimate-memory),
     * 2 GB of address space: not even one fits */
    snprintf(args, sizeof args, "-c 'ulimit -v 2000000; exec \"$VIJP_BIN\" drift --net dense:4096,gelu --depth 16 "
             "--batch 16 --formats bfloat16+binary32,binary32 --seeds 1 --no-plots -q --out \"%s/r\"'", dir);
    run_result r = run_bin("sh", args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "vijp drift: needs about ") &&
                  strstr(r.err, "the address-space limit (ulimit -v)"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    no_folder(dir, "r");
    remove_tree(dir);
}
END_TEST

Suite *suite_drift_memory(void)
{
    Suite *s = suite_create("drift_memory");
    TCase *tc = tcase_create("sizing");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, value_bytes_follow_the_holding);
    tcase_add_test(tc, estimate_meets_peak_rss);
    tcase_add_test(tc, estimate_sums_the_largest_curves);
    tcase_add_test(tc, refused_past_the_limit);
    tcase_add_test(tc, max_memory_runs_fewer_curves_at_once);
    suite_add_tcase(s, tc);
    return s;
}
