/* Running the vijp command from the tests (see clirun.h). */
#include "clirun.h"
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *slurp_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        ck_assert_msg(k >= 0, "reading a temp file failed");
        if (k == 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    return buf;
}

int make_temp(char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/vijp-cli-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp(%s) failed", path);
    return fd;
}

void make_temp_dir(char *dir, size_t size, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, size, "%s/vijp-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp(%s) failed", dir);
}

void remove_tree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

run_result run_vijp(const char *args) { return run_bin(getenv("VIJP_BIN"), args); }

run_result run_bin(const char *bin, const char *args) { return run_bin_to(bin, args, NULL); }

run_result run_bin_to(const char *bin, const char *args, const char *stdout_path)
{
    ck_assert_msg(bin && *bin, "no command to run for 'vijp %s': VIJP_BIN (or VIJP_PERTURBED_BIN) is unset; "
                               "run the suite through `make check`", args);
    char out_path[512], err_path[512];
    int fo = make_temp(out_path, sizeof out_path), fe = make_temp(err_path, sizeof err_path);
    size_t len = strlen(bin) + strlen(args) + 2 * sizeof out_path + (stdout_path ? strlen(stdout_path) : 0) + 64;
    char *cmd = malloc(len);
    ck_assert_ptr_nonnull(cmd);
    snprintf(cmd, len, "'%s' %s </dev/null >'%s' 2>'%s'", bin, args, stdout_path ? stdout_path : out_path, err_path);
    fflush(NULL);
    int st = system(cmd);
    free(cmd);
    run_result r;
    ck_assert_msg(st != -1, "system() failed for: vijp %s", args);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r.out = slurp_fd(fo);
    r.err = slurp_fd(fe);
    close(fo);
    close(fe);
    unlink(out_path);
    unlink(err_path);
    /* The shell reports "not found"/"cannot execute" as 127/126. */
    ck_assert_msg(r.rc != 127 && r.rc != 126, "could not run '%s' (%d): %s", bin, r.rc, r.err);
    return r;
}

run_result run_vijp_tty(const char *args)
{
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through `make check`");
    char out_path[512];
    int fo = make_temp(out_path, sizeof out_path), master, slave;
    ck_assert_msg(openpty(&master, &slave, NULL, NULL, NULL) == 0, "openpty failed: %s", strerror(errno));
    size_t len = strlen(bin) + strlen(args) + sizeof out_path + 64;
    char *cmd = malloc(len);
    ck_assert_ptr_nonnull(cmd);
    snprintf(cmd, len, "exec '%s' %s </dev/null >'%s'", bin, args, out_path);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork failed");
    if (pid == 0) {
        dup2(slave, STDERR_FILENO);
        close(master), close(slave);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    close(slave);
    /* Read until the terminal hangs up (EIO once the last writer is gone). */
    size_t cap = 4096, n = 0;
    char *err = malloc(cap);
    ck_assert_ptr_nonnull(err);
    for (;;) {
        if (n + 1 == cap) {
            err = realloc(err, cap *= 2);
            ck_assert_ptr_nonnull(err);
        }
        ssize_t k = read(master, err + n, cap - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    err[n] = 0;
    close(master);
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    run_result r = {.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0), .err = err};
    r.out = slurp_fd(fo);
    close(fo);
    unlink(out_path);
    return r;
}

void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

