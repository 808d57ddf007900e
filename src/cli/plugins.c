/* --plugin FILE (cli.h): a plugin is loaded first in a child process, as
 * check-layer runs every operator check, so that one that crashes while
 * loading is reported as that plugin's failure rather than killing vijp;
 * then in this process, with its output kept off the results stream. */
#include "cli.h"
#include "vijp/plugin.h"
#include "vijp/check_layer.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a plugin may take to load (its constructors and vijp_plugin_init). */
enum { LOAD_SECONDS = 60 };

static const char *plugin_paths[64];
static size_t n_plugin_paths;

/* What the child wrote on stderr before it died: its last 1 KiB, read to
 * the end so that a chatty child never blocks on a full pipe. */
static void read_last_words(int fd, char *buf, size_t size)
{
    size_t used = 0;
    char chunk[4096];
    ssize_t got;
    while ((got = read(fd, chunk, sizeof chunk)) != 0) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (ssize_t i = 0; i < got; i++) {
            if (used + 1 >= size) memmove(buf, buf + size / 2, used - size / 2), used -= size / 2;
            buf[used++] = chunk[i];
        }
    }
    while (used && (buf[used - 1] == '\n' || buf[used - 1] == ' ')) used--;
    buf[used] = 0;
}

/* The trial load: in a child whose stdout goes nowhere and whose stderr is
 * kept for the message.  0 when the child lived (a load that failed
 * cleanly fails again here, with its reason), else the exit status, said. */
static int probe(const char *path)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC)) return 0; /* no probe: the load below is only unguarded */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]), close(pipefd[1]);
        return 0;
    }
    if (pid == 0) {
        /* A crash ends the child by its signal, which the parent names:
         * undo any handler installed (sanitizers report and exit); a load
         * that hangs is stopped the same way. */
        int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
        alarm(LOAD_SECONDS);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        vijp_error err = {0};
        _exit(vijp_plugin_load(path, &err) ? EXIT_USAGE : EXIT_OK);
    }
    close(pipefd[1]);
    char words[1024];
    read_last_words(pipefd[0], words, sizeof words);
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 0;
    if (!WIFSIGNALED(status)) return 0;
    int sig = WTERMSIG(status);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) { /* the user stopped vijp, not the plugin */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    if (sig == SIGALRM) cli_say("vijp: plugin '%s' still loading after %d s: not used\n", path, LOAD_SECONDS);
    else cli_say("vijp: plugin '%s' crashed while loading (killed by %s, %s): not used%s%s\n", path,
                 vijp_check_signal_name(sig), strsignal(sig), *words ? "; it said: " : "", words);
    return EXIT_USAGE;
}

int cli_plugin_load(const char *path)
{
    int rc = probe(path);
    if (rc) return rc;
    if (cli_out_isolate()) {
        fprintf(stderr, "vijp: cannot keep standard output apart from plugins: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    vijp_error err = {0};
    if (vijp_plugin_load(path, &err)) {
        fprintf(stderr, "vijp: %s\n", err.msg);
        return EXIT_USAGE;
    }
    if (n_plugin_paths < sizeof plugin_paths / sizeof *plugin_paths) plugin_paths[n_plugin_paths++] = path;
    return 0;
}

const char *cli_plugin_args(void)
{
    static char args[4096];
    size_t used = 0;
    args[0] = 0;
    for (size_t k = 0; k < n_plugin_paths && used < sizeof args; k++)
        used += (size_t)snprintf(args + used, sizeof args - used, " --plugin %s", plugin_paths[k]);
    return args;
}

size_t cli_plugin_paths(const char *const **paths)
{
    *paths = plugin_paths;
    return n_plugin_paths;
}
