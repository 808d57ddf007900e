/* One layer check in a child process: a plugin that crashes or hangs fails
 * its check instead of taking the report down (vijp/check_layer.h). */
#include "vijp/check_layer.h"
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the child sends back: the run's code, its error and the result. */
typedef struct {
    int rc;
    vijp_error err;
    vijp_check_result r;
} message;

const char *vijp_check_signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"},
        {SIGALRM, "SIGALRM"}, {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].sig == sig) return names[i].name;
    return "a signal";
}

static void child(int fd, size_t k, const char *spec, const vijp_check_opts *o, unsigned timeout)
{
    /* A crash ends the child by its signal, which the parent names: undo
     * any handler the program installed (sanitizers report and exit). */
    int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    alarm(timeout);
    message msg;
    memset(&msg, 0, sizeof msg);
    msg.rc = vijp_check_layer_run(k, spec, o, &msg.r, &msg.err);
    alarm(0);
    const char *p = (const char *)&msg;
    for (size_t left = sizeof msg; left;) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        p += w, left -= (size_t)w;
    }
    /* _exit: no atexit handlers or stdio flushes of the parent's copies */
    _exit(0);
}

int vijp_check_layer_isolated(size_t k, const char *spec, const vijp_check_opts *o, vijp_check_result *r, vijp_error *err)
{
    static const vijp_check_opts defaults; /* NULL: every field's default (check_layer.h) */
    if (!o) o = &defaults;
    unsigned timeout = o->timeout_s ? o->timeout_s : 60;
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", vijp_check_name(k) ? vijp_check_name(k) : "?");
    r->seed = o->seed;
    r->error = r->bound = r->ratio = NAN;
    int fds[2];
    if (pipe(fds)) return vijp_fail(err, VIJP_EIO, "check %s: pipe: %s", r->name, strerror(errno));
    fflush(NULL); /* nothing buffered is written twice */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return vijp_fail(err, VIJP_EIO, "check %s: fork: %s", r->name, strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], k, spec, o, timeout);
    }
    close(fds[1]);
    message msg;
    size_t got = 0;
    int killed = 0;
    while (got < sizeof msg) {
        /* The child's alarm stops a hung check; should the layer have
         * blocked it, the child is killed 10 s later. */
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int ready = poll(&pfd, 1, (int)(timeout + 10) * 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            kill(pid, SIGKILL), killed = 1;
            break;
        }
        ssize_t n = read(fds[0], (char *)&msg + got, sizeof msg - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return vijp_fail(err, VIJP_EIO, "check %s: waitpid: %s", r->name, strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (got == sizeof msg && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (msg.rc && err) *err = msg.err;
        double seconds = r->seconds; /* wall time seen here: the fork and the check */
        *r = msg.r;
        r->seconds = seconds;
        return msg.rc;
    }
    r->status = VIJP_CHECK_FAILED;
    if (killed || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)) {
        r->signal = WTERMSIG(status);
        snprintf(r->detail, sizeof r->detail, "timed out: still running after %u s (stopped by %s)", timeout,
                 vijp_check_signal_name(r->signal));
    } else if (WIFSIGNALED(status)) {
        r->signal = WTERMSIG(status);
        snprintf(r->detail, sizeof r->detail, "crashed: killed by %s (%s)", vijp_check_signal_name(r->signal), strsignal(r->signal));
    } else {
        snprintf(r->detail, sizeof r->detail, "the check's process ended with status %d without a result",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return 0;
}
