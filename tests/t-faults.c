/* Fault injection: the allocation-failure walk (as SQLite tests it).
 *
 * The memory policy (vijp/error.h) makes running out of memory fatal with a
 * message, through one allocator that GMP, MPFR, MPFI and jansson share.
 * VIJP_FAIL_ALLOC=N makes the N-th of those allocations fail as the system
 * would refuse it.  Walked over N for small grad, certify and drift runs,
 * every run must either end with "out of memory while …" and exit 1, or,
 * past the run's last allocation, succeed with exactly the output of an
 * undisturbed run; a report folder must hold the old study or the new one.
 * `make check` samples N (the first allocations, then evenly spaced);
 * `make check-long` (VIJP_TEST_SCALE > 1) walks every N: grad's ~7·10^3,
 * certify's ~4·10^4 (tanh: the MPFI search of f′ and the format tables)
 * and drift's ~1.2·10^3 (one dense layer: the study, its MPFR reference and
 * the report writer; a tanh net would add the activation tables' 10^5). */
#include "fixtures/clirun.h"
#include <gmp.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The number of allocations an undisturbed run makes, and its output. */
static unsigned long long allocations_of(const char *args, char **out)
{
    setenv("VIJP_ALLOC_STATS", "1", 1);
    unsetenv("VIJP_FAIL_ALLOC");
    run_result r = run_vijp(args);
    unsetenv("VIJP_ALLOC_STATS");
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %s", args, r.rc, r.err);
    const char *p = strstr(r.err, "vijp: ");
    unsigned long long n = 0;
    ck_assert_msg(p && sscanf(p, "vijp: %llu allocations", &n) == 1, "no allocation count in: %s", r.err);
    *out = strdup(r.out);
    run_free(&r);
    return n;
}

/* The points of the walk: every N when exhaustive, else the first 8 and
 * `samples` more spread evenly up to the total, and one past it. */
static size_t walk_points(unsigned long long total, long samples, int every, unsigned long long *pts, size_t cap)
{
    size_t k = 0;
    if (every) {
        for (unsigned long long n = 1; n <= total + 1 && k < cap; n++) pts[k++] = n;
        return k;
    }
    for (unsigned long long n = 1; n <= 8 && n <= total; n++) pts[k++] = n;
    for (long i = 1; i <= samples && k + 1 < cap; i++) pts[k++] = 8 + (total - 8) * (unsigned long long)i / (unsigned long long)samples;
    pts[k++] = total + 1;
    return k;
}

/* One run with the N-th allocation refused: a clean failure, or (past the
 * last allocation) the undisturbed output. */
static void check_point(const char *args, unsigned long long n, unsigned long long total, const char *clean_out,
                        const char *command)
{
    char v[32];
    snprintf(v, sizeof v, "%llu", n);
    setenv("VIJP_FAIL_ALLOC", v, 1);
    run_result r = run_vijp(args);
    unsetenv("VIJP_FAIL_ALLOC");
    char want[96];
    snprintf(want, sizeof want, "vijp: out of memory while running vijp %s (allocating ", command);
    if (n > total) {
        ck_assert_msg(r.rc == CLI_OK && !strcmp(r.out, clean_out), "allocation %llu of %llu: exit %d, output changed", n,
                      total, r.rc);
    } else {
        /* Threads (drift's workers) may reorder allocations, so the N-th is
         * not always the same one, but some allocation N is always refused. */
        ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, want), "allocation %llu of %llu: exit %d, stderr: %s", n, total,
                      r.rc, r.err);
    }
    run_free(&r);
}

static void walk(const char *command, const char *args, long samples, long stride_long)
{
    char *clean;
    unsigned long long total = allocations_of(args, &clean);
    ck_assert_msg(total > 50, "%s makes only %llu allocations: is the allocator in use?", command, total);
    int exhaustive = test_iters(1) > 1;
    size_t cap = exhaustive && !stride_long ? total + 2 : (size_t)samples + 16;
    unsigned long long *pts = malloc(cap * sizeof *pts);
    size_t n_pts;
    if (exhaustive && stride_long) { /* check-long, a run too long to walk whole: a dense, even sample */
        n_pts = 0;
        for (unsigned long long n = 1; n <= total && n_pts + 1 < cap; n += (unsigned long long)stride_long) pts[n_pts++] = n;
        pts[n_pts++] = total + 1;
    } else {
        n_pts = walk_points(total, samples, exhaustive, pts, cap);
    }
    for (size_t i = 0; i < n_pts; i++) check_point(args, pts[i], total, clean, command);
    free(pts);
    free(clean);
}

START_TEST(grad_walk)
{
    walk("grad", "grad --net dense:8,tanh --depth 3 --format mpfr:64 --engine all", 40, 0);
}
END_TEST

START_TEST(certify_walk)
{
    /* tanh: the MPFI search of f′ for zeros and the per-format tables, ~4·10^4 allocations */
    walk("certify", "certify --layer tanh --width 4 --samples 2", 30, 0);
}
END_TEST

static char *read_file(const char *dir, const char *name)
{
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(n > 0 && (size_t)n < sizeof path, "%s/%s: path too long", dir, name);
    return slurp_path(path);
}

/* A drift run whose allocations fail leaves its earlier report as it was
 * (or, past the last allocation, the new one): compared file by file. */
START_TEST(drift_walk_keeps_the_report)
{
    char dir[512];
    make_temp_dir(dir, sizeof dir, "faults");
    static const char *const files[] = {"drift.json", "drift.csv", "curves.csv", "summary.csv", "memory.csv", "report.md"};
    enum { NF = sizeof files / sizeof *files };
    char old_args[1024], args[1024];
    /* The old study (seed 2) and the new one (seed 1) differ in every file. */
    snprintf(old_args, sizeof old_args,
             "drift --net dense:2 --depth 1 --formats binary32 --seeds 2 --no-plots --jobs 1 -q --out '%s/r'", dir);
    snprintf(args, sizeof args,
             "drift --net dense:2 --depth 1 --formats binary32 --seeds 1 --no-plots --jobs 1 -q --out '%s/r'", dir);
    char out[1024], *new_files[NF], *old_files[NF];
    snprintf(out, sizeof out, "%s/r", dir);
    run_result r = run_vijp(args);
    ck_assert_int_eq(r.rc, CLI_OK);
    run_free(&r);
    for (int k = 0; k < NF; k++) new_files[k] = read_file(out, files[k]);
    r = run_vijp(old_args);
    ck_assert_int_eq(r.rc, CLI_OK);
    run_free(&r);
    for (int k = 0; k < NF; k++) old_files[k] = read_file(out, files[k]);
    ck_assert_str_ne(old_files[0], new_files[0]);

    char *clean;
    unsigned long long total = allocations_of(args, &clean);
    free(clean);
    /* Sampled evenly, and every one of the last TAIL: the publication step
     * (the exchange, the old generation's removal, the lock's release)
     * makes the run's last dozen allocations (13 today). */
    enum { TAIL = 16 };
    int exhaustive = test_iters(1) > 1;
    long samples = exhaustive ? (long)total : 16;
    unsigned long long pts[TAIL + 64];
    size_t n_pts = 0;
    if (!exhaustive)
        for (long i = 0; i <= samples && 1 + (total - 1) * (unsigned long long)i / (unsigned long long)samples < total - TAIL; i++)
            pts[n_pts++] = 1 + (total - 1) * (unsigned long long)i / (unsigned long long)samples;
    for (unsigned long long n = exhaustive ? 1 : total - TAIL; n <= total + 1; n++)
        if (exhaustive || n_pts < sizeof pts / sizeof *pts) pts[n_pts++] = n;
    size_t published_after = 0;
    for (size_t i = 0; i < (exhaustive ? total + 1 : n_pts); i++) {
        unsigned long long n = exhaustive ? i + 1 : pts[i];
        r = run_vijp(old_args); /* the folder holds the old study before each point */
        ck_assert_int_eq(r.rc, CLI_OK);
        run_free(&r);
        char v[32];
        snprintf(v, sizeof v, "%llu", n);
        setenv("VIJP_FAIL_ALLOC", v, 1);
        r = run_vijp(args);
        unsetenv("VIJP_FAIL_ALLOC");
        int failed = r.rc == CLI_FAILED && strstr(r.err, "out of memory while running vijp drift");
        /* Out of memory once the new report is in place: the run did its
         * work, exit 0, and says so. */
        int late = r.rc == CLI_OK && strstr(r.err, "out of memory while running vijp drift") &&
                   strstr(r.err, "the new report is complete in");
        ck_assert_msg(failed || late || (n > total && r.rc == CLI_OK), "allocation %llu of %llu: exit %d: %s", n, total,
                      r.rc, r.err);
        published_after += late;
        run_free(&r);
        int is_old = 1, is_new = 1;
        for (int k = 0; k < NF; k++) {
            char *got = read_file(out, files[k]);
            is_old &= got && !strcmp(got, old_files[k]);
            is_new &= got && !strcmp(got, new_files[k]);
            free(got);
        }
        /* Exit 1 leaves the old study whole; exit 0 the new one. */
        ck_assert_msg(failed ? is_old : is_new, "allocation %llu of %llu: exit %s, but the report folder holds %s", n,
                      total, failed ? "1" : "0", is_old ? "the old study" : is_new ? "the new study" : "neither study whole");
    }
    ck_assert_msg(published_after > 0, "no allocation in the last %d failed after publishing: is the tail walked?", TAIL);
    for (int k = 0; k < NF; k++) free(old_files[k]), free(new_files[k]);
    remove_tree(dir);
}
END_TEST

/* Runs that cannot fit are refused before anything is allocated, with the
 * estimate and what is available (exit 2), and write nothing. */
START_TEST(size_before_run)
{
    /* 7 TiB of parameters: beyond any machine's MemAvailable. */
    run_result r = run_vijp("grad --net dense:100000 --depth 4");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "vijp grad: needs about ") && strstr(r.err, " available ("),
                  "exit %d: %s", r.rc, r.err);
    run_free(&r);
    char dir[512], args[1024];
    make_temp_dir(dir, sizeof dir, "size");
    snprintf(args, sizeof args, "drift --net dense:20000 --depth 64 --out '%s/r'", dir);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "vijp drift: needs about "), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "%s/r", dir);
    struct stat st;
    ck_assert_msg(stat(args, &st) != 0, "a refused study created its folder");
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Reproducers of a hang under an address-space limit (ulimit -v): the
 * estimate refuses them.  Not under AddressSanitizer, which reserves
 * terabytes of shadow address space and cannot run under such a limit. */
START_TEST(size_under_ulimit)
{
#if defined(__SANITIZE_ADDRESS__)
    fputs("# size_under_ulimit: skipped under AddressSanitizer (it cannot run with ulimit -v)\n", stderr);
#else
    struct rlimit rl = {4000000ull * 1024, 4000000ull * 1024}; /* ulimit -v 4000000, as the reproducer ran it */
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);  /* this test's own process: Check forks one per test */
    run_result r = run_vijp("grad --net layernorm --width 16777216 --depth 2");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "needs about") && strstr(r.err, "ulimit -v"), "exit %d: %s", r.rc,
                  r.err);
    run_free(&r);
    rl.rlim_cur = rl.rlim_max = 1000000ull * 1024;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
    r = run_vijp("certify --layer dense:4096 --width 4096 --samples 1");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "vijp certify: needs about"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
#endif
}
END_TEST

/* Every command returns under a small address-space limit, with a message
 * where it cannot run: OpenBLAS retries a failed mmap of its work buffer
 * forever (src/cli/blas_room.c), which hung even --version at exit.  At
 * 100 and 200 MB (less than one buffer and its slack once vijp is loaded)
 * what computes is refused with exit 2 and what does not runs; at 300 MB
 * vijp runs itself with one OpenBLAS thread and computes.  timeout(1)
 * turns a hang into exit 124.  Not under AddressSanitizer (above). */
START_TEST(every_command_returns_under_ulimit)
{
#if defined(__SANITIZE_ADDRESS__)
    fputs("# every_command_returns_under_ulimit: skipped under AddressSanitizer (it cannot run with ulimit -v)\n", stderr);
#else
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through make check");
    static const struct {
        const char *args;
        int computes;
    } cmds[] = {
        {"--version", 0},
        {"--help", 0},
        {"grad --help", 0},
        {"regress /nonexistent/a.json /nonexistent/b.json", 0},
        {"grad --net dense:8,tanh --depth 2", 1},
        {"drift --net dense:8,tanh --depth 2 --formats double --seeds 1 --no-plots -q --out /nonexistent/d", 1},
        {"certify --layer tanh --width 4 --samples 2", 1},
        {"memory --net dense:8 --depth-max 4 --budget 100000", 1},
        {"check-layer tanh --width 4", 1},
    };
    static const long limits[] = {100000, 200000, 300000};
    for (size_t l = 0; l < sizeof limits / sizeof *limits; l++)
        for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
            if (limits[l] == 300000 && strncmp(cmds[c].args, "grad --net", 10) && strcmp(cmds[c].args, "--version"))
                continue; /* where it runs: one computing command is enough */
            char args[1200];
            snprintf(args, sizeof args, "-c \"ulimit -v %ld; exec timeout 60 '%s' %s\"", limits[l], bin, cmds[c].args);
            run_result r = run_bin("/bin/sh", args);
            int want = limits[l] == 300000 ? CLI_OK
                     : cmds[c].computes ? CLI_USAGE
                     : strncmp(cmds[c].args, "regress", 7) ? CLI_OK : CLI_USAGE; /* regress: its missing files */
            ck_assert_msg(r.rc == want, "ulimit -v %ld; vijp %s: exit %d, want %d (124: it hung)\n%s", limits[l],
                          cmds[c].args, r.rc, want, r.err);
            if (limits[l] < 300000 && cmds[c].computes)
                ck_assert_msg(strstr(r.err, "OpenBLAS") && strstr(r.err, "ulimit -v") && !r.out[0],
                              "ulimit -v %ld; vijp %s: stdout '%s', stderr '%s'", limits[l], cmds[c].args, r.out, r.err);
            run_free(&r);
        }
#endif
}
END_TEST

/* vijp_memory_keep_freed (the vijp command's heap policy): a 4 MB block,
 * the size of a reference level's matrices, comes from the heap rather than
 * from a mapping of its own, which the kernel would fault in afresh for
 * every curve.  glibc only; ASan's allocator does not take the policy. */
START_TEST(keep_freed_serves_from_the_heap)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
    vijp_memory_keep_freed();
    struct mallinfo2 before = mallinfo2();
    char *p = malloc((size_t)4 << 20);
    ck_assert(p);
    p[0] = 1;
    struct mallinfo2 after = mallinfo2();
    ck_assert_msg(after.hblkhd == before.hblkhd, "a 4 MB block was mapped on its own (%zu, then %zu bytes mapped)",
                  before.hblkhd, after.hblkhd);
    free(p);
#endif
}
END_TEST

/* The pages resident in this process, from /proc/self/statm (its second
 * field); -1 where it cannot be read. */
static long resident_pages(void)
{
    long size, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident;
}

/* A thread's 24 MB in blocks of 256 KB, from its own arena, touched, freed,
 * then handed back: the pages resident before and after the hand-back. */
typedef struct {
    long before, after;
} top_pages;

static void *free_a_threads_top(void *arg)
{
    top_pages *t = arg;
    enum { BLOCKS = 96, BLOCK = 256 << 10 };
    char *p[BLOCKS];
    for (int k = 0; k < BLOCKS; k++) {
        p[k] = malloc(BLOCK);
        if (p[k]) memset(p[k], 1, BLOCK);
    }
    for (int k = BLOCKS; k-- > 0;) free(p[k]);
    t->before = resident_pages();
    vijp_memory_return_freed();
    t->after = resident_pages();
    return NULL;
}

/* vijp_memory_return_freed called on a thread hands back the free top of
 * that thread's own arena, which glibc's malloc_trim leaves and the trim
 * threshold vijp_memory_keep_freed sets keeps: a drift study's curves run
 * on such threads.  Half the 24 MB freed is the bar: the arena's top pad
 * and whatever else the process holds meanwhile are far below 12 MB. */
START_TEST(return_freed_hands_back_a_threads_top)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
    vijp_memory_keep_freed();
    top_pages t = {-1, -1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, free_a_threads_top, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    long page = sysconf(_SC_PAGESIZE);
    ck_assert(t.before > 0 && t.after > 0);
    ck_assert_msg((double)(t.before - t.after) * (double)page >= 12e6,
                  "resident %.1f MB before the hand-back, %.1f MB after", (double)t.before * (double)page / 1e6,
                  (double)t.after * (double)page / 1e6);
#endif
}
END_TEST

/* vijp_mat_init_unset: the shape and format of vijp_mat_init; MPFR values
 * zero as there; in a checking build (make SANITIZE=1 defines
 * VIJP_POISON_UNSET) every double NaN, so that an engine or layer that reads
 * such a buffer before writing it turns its results NaN and fails its tests
 * (t-engines does, with dense's vjp_param accumulating into its output). */
START_TEST(unset_matrix_shape_and_poison)
{
    vijp_format d, m;
    vijp_format_fixed(&d, VIJP_DOUBLE);
    ck_assert(!vijp_format_parse("mpfr:80", &m, NULL));
    vijp_mat a, b;
    vijp_mat_init_unset(&a, 3, 5, &d), vijp_mat_init_unset(&b, 4, 2, &m);
    ck_assert(a.rows == 3 && a.cols == 5 && a.fmt == &d && a.d && !a.m);
    ck_assert(b.rows == 4 && b.cols == 2 && b.fmt == &m && b.m && !b.d);
    for (size_t i = 0; i < 8; i++) ck_assert(mpfr_zero_p(b.m[i]));
#ifdef VIJP_POISON_UNSET
    for (size_t i = 0; i < 15; i++) ck_assert_msg(isnan(a.d[i]), "entry %zu is %g, not the poison", i, a.d[i]);
#endif
    for (size_t i = 0; i < 15; i++) a.d[i] = (double)i; /* writable */
    vijp_mat_clear(&a), vijp_mat_clear(&b);
}
END_TEST

/* The allocations are counted only where a test hook asks for it at
 * install (VIJP_ALLOC_STATS, VIJP_FAIL_ALLOC): one by one then, vijp's and
 * GMP's alike; not at all otherwise. */
START_TEST(allocations_counted_when_asked)
{
    unsetenv("VIJP_ALLOC_STATS"), unsetenv("VIJP_FAIL_ALLOC");
    vijp_memory_policy_install();
    free(vijp_alloc(16)), free(vijp_alloc(32));
    ck_assert_uint_eq(vijp_memory_allocations(), 0);
    setenv("VIJP_ALLOC_STATS", "1", 1);
    vijp_memory_policy_install();
    unsetenv("VIJP_ALLOC_STATS");
    free(vijp_alloc(16));
    mpz_t z;
    mpz_init_set_ui(z, 1), mpz_mul_2exp(z, z, 4000); /* GMP's own: one allocation or two */
    unsigned long long n = vijp_memory_allocations();
    mpz_clear(z);
    ck_assert_msg(n >= 2 && n <= 3, "%llu allocations counted", n);
    vijp_memory_policy_install(); /* back to not counting */
    ck_assert_uint_eq(vijp_memory_allocations(), 0);
}
END_TEST

Suite *suite_faults(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("allocation");
    tcase_add_test(tc, grad_walk);
    tcase_add_test(tc, certify_walk);
    tcase_add_test(tc, drift_walk_keeps_the_report);
    /* tens of runs of milliseconds; in check-long ~4·10^4 (certify's walk: ~20 minutes) */
    tcase_set_timeout(tc, test_iters(1) > 1 ? 7200.0 : 120.0);
    suite_add_tcase(s, tc);
    TCase *size = tcase_create("size");
    tcase_add_test(size, size_before_run);
    tcase_add_test(size, size_under_ulimit);
    tcase_add_test(size, every_command_returns_under_ulimit);
    tcase_add_test(size, keep_freed_serves_from_the_heap);
    tcase_add_test(size, return_freed_hands_back_a_threads_top);
    tcase_add_test(size, unset_matrix_shape_and_poison);
    tcase_add_test(size, allocations_counted_when_asked);
    tcase_set_timeout(size, 60);
    suite_add_tcase(s, size);
    return s;
}
