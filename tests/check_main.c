/* Runs every Check suite; exits non-zero if any test failed.
 *
 * The suites run in VIJP_TEST_JOBS worker processes at once (default: the
 * machine's cores; 1 is one worker), each taking the next suite from a
 * shared queue, heaviest first (so that the last to finish is a light one),
 * and running it in a process of its own (no suite sees another's
 * registered types or environment); a suite's output is held in a file and
 * printed whole when the suite ends.  With CK_RUN_SUITE, CK_RUN_CASE or a
 * Check log file set, everything runs in this one process, as Check alone
 * does. */
#include "fixtures/testutil.h"
#include "vijp/error.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Heaviest first: seconds each took in the plain build, largest first. */
static Suite *(*const suites[])(void) = {
    suite_kernels, suite_cli,      suite_regress,     suite_report,   suite_gemm,         suite_atomic,
    suite_layers,  suite_activations, suite_resume,   suite_emu_act,  suite_arrays,       suite_faults,
    suite_check_layer, suite_emu,  suite_certify,     suite_netjson,  suite_lu,           suite_b32set,
    suite_emu_dense, suite_engines, suite_mixedset,   suite_drift,    suite_prerender,    suite_dot,
    suite_registry, suite_plugin_load, suite_compare_fast, suite_eval, suite_coupling,    suite_grad,
    suite_certify_act, suite_format, suite_certify_layer, suite_certify_box, suite_mixed, suite_progress,
    suite_fp8, suite_fp8_cli, suite_xnum, suite_ddot, suite_cond, suite_mx, suite_mx_cli, suite_attention,
    suite_residual, suite_act_args, suite_normlayers, suite_conv, suite_tc, suite_ftz, suite_sr,
    suite_certify_reach, suite_orthogonal, suite_drift_memory, suite_scaled, suite_certify_affine, suite_emu_lanes,
    suite_ddref, suite_narrow, suite_emu_fp8, suite_fork, suite_mat_held, suite_packed,
};
enum { N_SUITES = sizeof suites / sizeof *suites };

static int run_here(void)
{
    SRunner *sr = srunner_create(suites[0]());
    for (size_t k = 1; k < N_SUITES; k++) srunner_add_suite(sr, suites[k]());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* What a worker tells the parent: suite k started (run < 0) or ended, its
 * output in the file at path.  Smaller than PIPE_BUF: written whole. */
typedef struct {
    int worker, suite, run, failed;
    char path[96];
} note;

static void tell(int fd, const note *n)
{
    if (write(fd, n, sizeof *n) != (ssize_t)sizeof *n) _exit(3);
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of this process and of the processes it has waited for (the
 * tests Check forks, the commands they run): what a suite costs CI, which
 * wall time on a loaded machine does not show. */
static double cpu_seconds(void)
{
    double total = 0;
    int who[2] = {RUSAGE_SELF, RUSAGE_CHILDREN};
    for (int i = 0; i < 2; i++) {
        struct rusage u;
        if (getrusage(who[i], &u)) continue;
        total += (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
                 1e-6 * (double)u.ru_stime.tv_usec;
    }
    return total;
}

/* One suite in a process of its own, its stdout and stderr in the file fd:
 * the suites share no state (the layer registry, the environment), whatever
 * worker runs them in whatever order.  exit(), not _exit(): under
 * CK_FORK=no LeakSanitizer checks the process at its exit.  Its counts come
 * back through the pipe; a process that ends otherwise than with status 0
 * (a crash, LeakSanitizer's report) is one failure more, said in its file. */
static void run_suite(int k, int fd, int *run, int *failed)
{
    int counts[2] = {0, 0}, pipefd[2];
    *run = 0, *failed = 1;
    if (pipe(pipefd)) return;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        dup2(fd, STDOUT_FILENO), dup2(fd, STDERR_FILENO), close(fd);
        double start = seconds_now();
        SRunner *sr = srunner_create(suites[k]());
        srunner_run_all(sr, CK_NORMAL);
        counts[0] = srunner_ntests_run(sr), counts[1] = srunner_ntests_failed(sr);
        srunner_free(sr);
        printf("check_vijp: the suite took %.1f s, %.1f s of CPU\n", seconds_now() - start, cpu_seconds());
        fflush(stdout), fflush(stderr);
        if (write(pipefd[1], counts, sizeof counts) != (ssize_t)sizeof counts) _exit(3);
        exit(0);
    }
    close(pipefd[1]);
    int got = pid > 0 && read(pipefd[0], counts, sizeof counts) == (ssize_t)sizeof counts, status = 0;
    close(pipefd[0]);
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    *run = counts[0], *failed = counts[1];
    if (pid > 0 && got && WIFEXITED(status) && !WEXITSTATUS(status)) return;
    (*failed)++;
    dprintf(fd, "check_vijp: the suite's process ended with status %#x%s\n", status,
            got ? " after its tests" : " before its tests finished");
}

/* A worker: suites from the queue, each in a process of its own with its
 * output in a file, until the queue is empty. */
static void worker(int self, int queue, int notes)
{
    const char *tmp = getenv("TMPDIR");
    int k;
    while (read(queue, &k, sizeof k) == (ssize_t)sizeof k) {
        note n = {.worker = self, .suite = k, .run = -1};
        snprintf(n.path, sizeof n.path, "%s/vijp-suite-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        int fd = mkstemp(n.path);
        if (fd < 0) _exit(3);
        tell(notes, &n);
        run_suite(k, fd, &n.run, &n.failed);
        close(fd);
        tell(notes, &n);
    }
    exit(0);
}

static void show(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, got, stdout);
    fclose(f);
    fflush(stdout);
    unlink(path);
}

static int run_in_workers(long jobs)
{
    int queue[2], notes[2];
    if (pipe(queue) || pipe(notes)) return perror("check_vijp: pipe"), EXIT_FAILURE;
    for (int k = 0; k < N_SUITES; k++)
        if (write(queue[1], &k, sizeof k) != (ssize_t)sizeof k) return perror("check_vijp: queue"), EXIT_FAILURE;
    close(queue[1]);
    fflush(stdout), fflush(stderr);
    pid_t pids[64];
    char current[64][96] = {{0}}; /* each worker's suite in progress: its output so far */
    for (long w = 0; w < jobs; w++) {
        if ((pids[w] = fork()) < 0) return perror("check_vijp: fork"), EXIT_FAILURE;
        if (!pids[w]) close(notes[0]), worker((int)w, queue[0], notes[1]);
    }
    close(queue[0]), close(notes[1]);
    int run = 0, failed = 0, done = 0;
    note n;
    while (read(notes[0], &n, sizeof n) == (ssize_t)sizeof n) {
        if (n.worker < 0 || n.worker >= jobs) continue;
        if (n.run < 0) {
            snprintf(current[n.worker], sizeof current[n.worker], "%s", n.path);
            continue;
        }
        current[n.worker][0] = 0;
        show(n.path), run += n.run, failed += n.failed, done++;
    }
    int died = 0;
    for (long w = 0; w < jobs; w++) {
        int status;
        while (waitpid(pids[w], &status, 0) < 0 && errno == EINTR) {}
        if (WIFEXITED(status) && !WEXITSTATUS(status)) continue;
        died++;
        if (current[w][0]) printf("check_vijp: a worker process died during a suite (status %#x); its output:\n", status);
        if (current[w][0]) show(current[w]);
    }
    if (done < N_SUITES || died)
        printf("check_vijp: %d of %d suites finished; %d worker process%s died\n", done,
               N_SUITES, died, died == 1 ? "" : "es");
    printf("check_vijp: %d suites in %ld worker%s: %d checks, %d failed\n", N_SUITES, jobs, jobs == 1 ? "" : "s", run,
           failed);
    return failed || died || done < N_SUITES ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(void)
{
    vijp_memory_policy_install();
    const char *j = getenv("VIJP_TEST_JOBS");
    long jobs = j && *j ? strtol(j, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs > 64) jobs = 64;
    if (jobs < 1) jobs = 1;
    if (getenv("CK_RUN_SUITE") || getenv("CK_RUN_CASE") || getenv("CK_XML_LOG_FILE_NAME") ||
        getenv("CK_LOG_FILE_NAME") || getenv("CK_TAP_LOG_FILE_NAME") || getenv("CK_SUBUNIT_LOG_FILE_NAME"))
        return run_here();
    return run_in_workers(jobs);
}
