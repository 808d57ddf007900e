/* make bench (drift width part): how a wide drift study's cost grows with
 * the width.  `vijp drift --net dense:W,gelu --depth 16 --batch 16
 * --formats bfloat16+binary32,binary32 --seeds 1 --jobs 1` (every engine
 * against backprop and the MPFR reference) at W = 256, 512, 1024, each as
 * a child: its CPU seconds (wait4's user + system, steadier than the wall
 * clock on a shared machine) and peak resident memory (ru_maxrss) beside
 * what --estimate-memory predicts, then the exponents k of time ∝ W^k and
 * memory ∝ W^k (least squares over the widths, and per doubling), and the
 * estimate at 4096, the width the study is meant to reach (8 GB, 10
 * minutes).  Then one curve on two cores: `vijp drift --net dense:512,gelu
 * --depth 16 --batch 16 --formats bfloat16+binary32 --seeds 1` with --jobs
 * 1 and --jobs 2 (its spare job inside the curve: docs/scale-out.md), wall
 * seconds and their ratio, measured in this run (wall time: the point is
 * the second core; on a loaded machine it may have none to give).  About
 * five minutes on the 2-core development machine. */
#include "bench.h"
#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N_WIDTHS = 3 };
static const int widths[N_WIDTHS] = {256, 512, 1024};

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
    return (run_cost){cpu, (double)ru.ru_maxrss / 1024, bench_now() - t0};
}

/* --estimate-memory's bytes at width w, in MB. */
static double estimate_mb(char *vijp, int w, const char *out)
{
    char net[32], text[1024];
    snprintf(net, sizeof net, "dense:%d,gelu", w);
    char *argv[] = {vijp, "drift", "--net", net, "--depth", "16", "--batch", "16", "--formats",
                    "bfloat16+binary32,binary32", "--seeds", "1", "--jobs", "1", "--no-plots", "-q", "--out",
                    (char *)out, "--estimate-memory", NULL};
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

int main(int argc, char **argv)
{
    bench_args(argc, argv, 1,
               "Usage: bench-drift-width [VIJP]\n  a depth-16 dense:W,gelu drift study (2 formats, every engine, 1 job) "
               "at W = 256, 512, 1024: CPU time, peak memory and its estimate, growth exponents, the estimate at "
               "4096; then one dense:512 curve with --jobs 1 and 2 (wall time, ratio); VIJP is the command (default "
               "build/vijp).\n");
    char *vijp = argc > 1 ? argv[1] : "build/vijp";
    char out[64], rm[128];
    snprintf(out, sizeof out, "/tmp/vijp-bench-width-%d", (int)getpid());
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    double w[N_WIDTHS], cpu[N_WIDTHS], mb[N_WIDTHS];
    printf("drift width sweep: dense:W,gelu, depth 16, batch 16, bfloat16+binary32 and binary32, every engine, 1 job\n");
    printf("%6s %10s %12s %14s\n", "W", "CPU s", "peak MB", "estimate MB");
    for (int i = 0; i < N_WIDTHS; i++) {
        char net[32];
        snprintf(net, sizeof net, "dense:%d,gelu", widths[i]);
        char *study[] = {vijp, "drift", "--net", net, "--depth", "16", "--batch", "16", "--formats",
                         "bfloat16+binary32,binary32", "--seeds", "1", "--jobs", "1", "--no-plots", "-q", "--out", out,
                         NULL};
        double est = estimate_mb(vijp, widths[i], out);
        run_cost c = run(study, NULL, 0);
        if (system(rm)) return 1;
        w[i] = widths[i], cpu[i] = c.cpu_s, mb[i] = c.peak_mb;
        printf("%6d %10.1f %12.0f %14.0f\n", widths[i], c.cpu_s, c.peak_mb, est);
    }
    printf("exponents (least squares over the widths): time W^%.2f, peak memory W^%.2f\n", exponent(w, cpu, N_WIDTHS),
           exponent(w, mb, N_WIDTHS));
    for (int i = 1; i < N_WIDTHS; i++)
        printf("  %d -> %d: time x%.2f (W^%.2f), memory x%.2f (W^%.2f)\n", widths[i - 1], widths[i], cpu[i] / cpu[i - 1],
               log2(cpu[i] / cpu[i - 1]), mb[i] / mb[i - 1], log2(mb[i] / mb[i - 1]));
    double t4096 = cpu[N_WIDTHS - 1] * pow(4096.0 / widths[N_WIDTHS - 1], exponent(w + 1, cpu + 1, N_WIDTHS - 1));
    printf("at 4096: estimate %.0f MB (target 8000), time about %.0f s extrapolated from the last two widths (target 600)\n",
           estimate_mb(vijp, 4096, out), t4096);
    /* one curve, --jobs 1 against --jobs 2 */
    double wall[2], cpu2[2];
    for (int j = 0; j < 2; j++) {
        char *one[] = {vijp, "drift", "--net", "dense:512,gelu", "--depth", "16", "--batch", "16", "--formats",
                       "bfloat16+binary32", "--seeds", "1", "--jobs", j ? "2" : "1", "--no-plots", "-q", "--out", out,
                       NULL};
        run_cost c = run(one, NULL, 0);
        if (system(rm)) return 1;
        wall[j] = c.wall_s, cpu2[j] = c.cpu_s;
    }
    printf("one curve (dense:512,gelu, bfloat16+binary32): --jobs 1 %.1f s wall (%.1f s CPU), --jobs 2 %.1f s wall "
           "(%.1f s CPU): x%.2f\n", wall[0], cpu2[0], wall[1], cpu2[1], wall[0] / wall[1]);
    return 0;
}
