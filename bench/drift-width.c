/* make bench (drift width part): how a wide drift study's cost grows with
 * the width.  `vijp drift --net dense:W,gelu --depth 16 --batch 16
 * --formats bfloat16+binary32,binary32 --seeds 1 --jobs 1` (the default
 * engines: Moonwalk against backprop and the validated reference; not
 * --engines all, whose pure-forward engine carries W tangents through every
 * layer and sample, O(W³) each: about 18 TFLOP a format at 4096, far past the
 * 10 minutes; one curve at a time, its
 * spare core inside the curve) at W = 512, 1024, 2048, 4096, each as a
 * child: wall seconds, CPU seconds (wait4's user + system) and peak
 * resident memory (ru_maxrss) beside what --estimate-memory predicts, then
 * the exponents k of time ∝ W^k and memory ∝ W^k (least squares over the
 * widths, and per doubling).  Then width 4096 against its targets (8 GB, 10
 * minutes) as the command is written, on the whole machine: its defaults
 * (a job a core, the memory available, the plots) run both curves at once
 * on the two cores here (the sweep's rows leave the plots out).  A width whose estimate is past the memory available is
 * skipped and said so.  Then one curve on two cores: `vijp drift --net
 * dense:512,gelu --depth 16 --batch 16 --formats bfloat16+binary32 --seeds
 * 1` with --jobs 1 and --jobs 2 (docs/scale-out.md), wall seconds and
 * their ratio, measured in this run (wall time: the point is the second
 * core; on a loaded machine it may have none to give).  About 20 minutes
 * on the 2-core development machine, most of it at 4096; a second argument
 * stops the sweep at a narrower width. */
#include "bench.h"
#include <errno.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N_WIDTHS = 4 };
static const int sweep_widths[N_WIDTHS] = {512, 1024, 2048, 4096};

typedef struct {
    double cpu_s, peak_mb, wall_s;
} run_cost;

/* Run argv; stdout into buf (size bytes, NUL-terminated) when buf is not
 * NULL, else to /dev/null; exit 1 if it fails. */
static run_cost run(char *const argv[], char *buf, size_t size)
{
    int fd[2];
    if (pipe(fd)) exit(1);
    fflush(stdout); /* else the child would print what is buffered again */
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0) exit(1);
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], 1) < 0 || !freopen("/dev/null", "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t used = 0;
    char sink[4096];
    for (ssize_t n; (n = read(fd[0], buf ? buf + used : sink, buf ? size - 1 - used : sizeof sink)) > 0;)
        if (buf) used += (size_t)n;
    close(fd[0]);
    if (buf) buf[used] = 0;
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench-drift-width: %s %s ... failed (status %d)\n", argv[0], argv[1], status);
        exit(1);
    }
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
                 1e-6 * (double)ru.ru_stime.tv_usec;
    /* ru_maxrss counts KiB; the figures here are MB of 10^6 bytes, as the estimate's */
    return (run_cost){cpu, (double)ru.ru_maxrss * 1024 / 1e6, bench_now() - t0};
}

/* --estimate-memory's bytes at width w, in MB: with --jobs 1, or on the
 * machine's defaults (one_job 0: a job a core). */
static double estimate_mb(char *vijp, int w, int one_job, const char *out)
{
    char net[32], text[1024];
    snprintf(net, sizeof net, "dense:%d,gelu", w);
    char *argv[] = {vijp, "drift", "--net", net, "--depth", "16", "--batch", "16", "--formats",
                    "bfloat16+binary32,binary32", "--seeds", "1", "--no-plots", "-q", "--out", (char *)out,
                    "--estimate-memory", one_job ? "--jobs" : NULL, "1", NULL};
    run(argv, text, sizeof text);
    const char *p = strstr(text, " bytes of resident set)");
    while (p && p > text && p[-1] != '(') p--;
    return p ? strtod(p, NULL) / 1e6 : NAN;
}

/* The slope of log y against log x over n points (least squares). */
static double exponent(const double *x, const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double a = log(x[i]), b = log(y[i]);
        sx += a, sy += b, sxx += a * a, sxy += a * b;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

/* MemAvailable from /proc/meminfo, in MB (10^6 bytes, as every figure
 * here); INFINITY when unknown. */
static double available_mb(void)
{
    FILE *in = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = INFINITY;
    while (in && fgets(line, sizeof line, in))
        if (!strncmp(line, "MemAvailable:", 13)) kb = strtod(line + 13, NULL);
    if (in) fclose(in);
    return kb * 1024 / 1e6;
}

int main(int argc, char **argv)
{
    const char *usage =
        "Usage: bench-drift-width [--smoke] [VIJP [MAXWIDTH]]\n  a depth-16 dense:W,gelu drift study (2 formats, Moonwalk and backprop, "
        "1 job) at W = 512, 1024, 2048, 4096 (up to MAXWIDTH, default 4096): wall and CPU time, peak memory and its "
        "estimate, growth exponents; 4096 as written (a job a core) against its targets; then one dense:512 "
        "curve with --jobs 1 and 2 (wall time, ratio); VIJP is the command (default build/vijp).\n";
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 2, usage);
    char *vijp = argc > 1 ? argv[1] : "build/vijp";
    long maxw = 4096;
    if (argc > 2) { /* a whole number: atoi read "1024x" as 1024 and "x" as 0 */
        char *end;
        errno = 0;
        maxw = strtol(argv[2], &end, 10);
        if (errno || end == argv[2] || *end) maxw = -1;
    }
    /* under --smoke: the sweep at 32 and 64, the one-curve pair at 32 */
    static const int smoke_widths[] = {32, 64};
    const int *widths = smoke ? smoke_widths : sweep_widths, n_widths = smoke ? 2 : N_WIDTHS;
    const char *one_net = smoke ? "dense:32,gelu" : "dense:512,gelu";
    if (maxw < widths[1]) {
        fprintf(stderr, "bench-drift-width: MAXWIDTH '%s' must be a whole number, at least %d (two widths)\n%s",
                argv[2], widths[1], usage);
        return 2;
    }
    char out[64], rm[128];
    snprintf(out, sizeof out, "/tmp/vijp-bench-width-%d", (int)getpid());
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    double w[N_WIDTHS], cpu[N_WIDTHS], wall[N_WIDTHS], mb[N_WIDTHS]; /* N_WIDTHS >= n_widths */
    int n = 0;
    printf("drift width sweep: dense:W,gelu, depth 16, batch 16, bfloat16+binary32 and binary32, Moonwalk and backprop, 1 job\n");
    printf("%6s %10s %10s %12s %14s %8s\n", "W", "wall s", "CPU s", "peak MB", "estimate MB", "est/peak");
    for (int i = 0; i < n_widths && widths[i] <= maxw; i++) {
        char net[32];
        snprintf(net, sizeof net, "dense:%d,gelu", widths[i]);
        char *study[] = {vijp, "drift", "--net", net, "--depth", "16", "--batch", "16", "--formats",
                         "bfloat16+binary32,binary32", "--seeds", "1", "--jobs", "1", "--no-plots", "-q", "--out", out,
                         NULL};
        double e = estimate_mb(vijp, widths[i], 1, out), avail = available_mb();
        if (e > avail) {
            printf("%6d skipped: estimated %.0f MB, %.0f MB available\n", widths[i], e, avail);
            break;
        }
        run_cost c = run(study, NULL, 0);
        if (system(rm)) return 1;
        w[n] = widths[i], cpu[n] = c.cpu_s, wall[n] = c.wall_s, mb[n] = c.peak_mb;
        printf("%6d %10.1f %10.1f %12.0f %14.0f %8.2f\n", widths[i], c.wall_s, c.cpu_s, c.peak_mb, e, e / c.peak_mb);
        fflush(stdout);
        n++;
    }
    if (n < 2) return 1;
    printf("exponents (least squares over the widths): wall W^%.2f, CPU W^%.2f, peak memory W^%.2f\n",
           exponent(w, wall, n), exponent(w, cpu, n), exponent(w, mb, n));
    for (int i = 1; i < n; i++)
        printf("  %.0f -> %.0f: wall x%.2f (W^%.2f), memory x%.2f (W^%.2f)\n", w[i - 1], w[i], wall[i] / wall[i - 1],
               log2(wall[i] / wall[i - 1]), mb[i] / mb[i - 1], log2(mb[i] / mb[i - 1]));
    if (w[n - 1] == 4096) {
        /* The targets are for the machine and the command as written:
         * its defaults, a job a core (both curves at once on two cores,
         * where they fit) and the memory available. */
        char *target[] = {vijp, "drift", "--net", "dense:4096,gelu", "--depth", "16", "--batch", "16", "--formats",
                          "bfloat16+binary32,binary32", "--seeds", "1", "-q", "--out", out, NULL};
        double e = estimate_mb(vijp, 4096, 0, out);
        run_cost c = run(target, NULL, 0);
        if (system(rm)) return 1;
        printf("at 4096 as written (a job a core): %.0f s wall (target 600: %s), %.0f s CPU, peak %.0f MB "
               "(target 8000: %s; estimate %.0f MB)\n", c.wall_s, c.wall_s <= 600 ? "met" : "NOT met", c.cpu_s,
               c.peak_mb, c.peak_mb <= 8000 ? "met" : "NOT met", e);
    } else
        printf("at 4096: estimate %.0f MB (target 8000), about %.0f s wall extrapolated from the last two widths "
               "(target 600)\n", estimate_mb(vijp, 4096, 0, out),
               wall[n - 1] * pow(4096.0 / w[n - 1], exponent(w + n - 2, wall + n - 2, 2)));
    /* one curve, --jobs 1 against --jobs 2 */
    double wall2[2], cpu2[2];
    for (int j = 0; j < 2; j++) {
        char *one[] = {vijp, "drift", "--net", (char *)one_net, "--depth", "16", "--batch", "16", "--formats",
                       "bfloat16+binary32", "--seeds", "1", "--jobs", j ? "2" : "1", "--no-plots", "-q", "--out", out,
                       NULL};
        run_cost c = run(one, NULL, 0);
        if (system(rm)) return 1;
        wall2[j] = c.wall_s, cpu2[j] = c.cpu_s;
    }
    printf("one curve (%s, bfloat16+binary32): --jobs 1 %.1f s wall (%.1f s CPU), --jobs 2 %.1f s wall "
           "(%.1f s CPU): x%.2f\n", one_net, wall2[0], cpu2[0], wall2[1], cpu2[1], wall2[0] / wall2[1]);
    return 0;
}
