/* A report folder replaced all or nothing (src/report/atomic.h), as a user's
 * runs of `vijp drift --out DIR` see it: a kill after any step of the commit
 * sequence leaves the whole old report or the whole new one; a full disk, a
 * lock held by another run and SIGTERM/SIGINT leave the old one; files vijp
 * did not write survive.  Case "owners": what a run replaces keeps its owner,
 * group and mode, and a folder holding a mount point or the working
 * directory is refused (the parts that need root skip without it).  Each
 * test works in a private folder B: the report is B/p/out, so B/p shows
 * everything a run leaves beside it. */
#include "fixtures/clirun.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* Tiny studies (milliseconds each, so the kill walk runs the commit
 * sequence dozens of times): OLD with plots, NEW without, different seeds,
 * so that the two generations differ in both files and contents. */
#define OLD "--net dense:4,tanh --depth 3 --formats binary32 --seeds 1"
#define NEW "--net dense:4,tanh --depth 3 --formats binary32 --seeds 2 --no-plots"

typedef struct {
    char base[256], parent[300], out[320];
} place;

static void place_make(place *p)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(p->base, sizeof p->base, "%s/vijp-atomic-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(p->base) != NULL, "mkdtemp failed");
    snprintf(p->parent, sizeof p->parent, "%s/p", p->base);
    snprintf(p->out, sizeof p->out, "%s/out", p->parent);
    ck_assert(mkdir(p->parent, 0777) == 0);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

static void place_remove(place *p) { sh("rm -rf '%s'", p->base); }

/* How spawn_in runs vijp, beyond spawn_drift: --out (NULL: B/p/out), the
 * working directory (NULL: the test's) and the user (0: the test's). */
typedef struct {
    const char *out, *cwd;
    uid_t uid;
} as_user;

/* vijp drift STUDY --out OUT in a child: env ("NAME=VALUE …" or NULL) added
 * to its environment, a file-size limit of fsize bytes (0: none), stderr
 * into B/stderr.  Returns the child's PID. */
static pid_t spawn_in(const place *p, const char *study, const char *env, long fsize, const as_user *how)
{
    char errpath[400], args[768], *argv[40];
    snprintf(errpath, sizeof errpath, "%s/stderr", p->base);
    snprintf(args, sizeof args, "drift %s -q --out %s", study, how && how->out ? how->out : p->out);
    int n = 0;
    argv[n++] = "vijp";
    for (char *t = strtok(args, " "); t && n < 38; t = strtok(NULL, " ")) argv[n++] = t;
    argv[n] = NULL;
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through `make check`");
    unlink(errpath); /* not the previous run's: a test may be polling it */
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR), e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(null, 0), dup2(null, 1), dup2(e, 2);
        char *vars = env ? strdup(env) : NULL;
        for (char *t = vars ? strtok(vars, " ") : NULL; t; t = strtok(NULL, " ")) putenv(t);
        struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
        if (fsize) setrlimit(RLIMIT_FSIZE, &rl);
        if (how && how->uid && (setgroups(0, NULL) || setgid(how->uid) || setuid(how->uid))) _exit(126);
        if (how && how->cwd && chdir(how->cwd)) _exit(126);
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

static pid_t spawn_drift(const place *p, const char *study, const char *env, long fsize)
{
    return spawn_in(p, study, env, fsize, NULL);
}

/* Exit status, 128 + N for a run that died of signal N (as a shell shows it). */
static int finish(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0) ck_assert(errno == EINTR);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int drift_rc(const place *p, const char *study, const char *env) { return finish(spawn_drift(p, study, env, 0)); }

static char *stderr_of(const place *p)
{
    char path[400];
    snprintf(path, sizeof path, "%s/stderr", p->base);
    char *s = slurp_path(path);
    ck_assert_ptr_nonnull(s);
    return s;
}

typedef struct {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (b->n + n + 1 > b->cap) b->s = vijp_realloc(b->s, b->cap = 2 * (b->n + n + 1));
    memcpy(b->s + b->n, data, n);
    b->n += n;
    b->s[b->n] = 0;
}

/* Every entry under dir, sorted: kind, relative name, and a file's bytes or
 * a link's target. */
static void snap_into(buf *b, const char *dir, const char *rel)
{
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    ck_assert_msg(n >= 0, "cannot read %s", dir);
    for (int k = 0; k < n; k++) {
        const char *name = list[k]->d_name;
        char path[1024], sub[512], head[700];
        struct stat st;
        if (strcmp(name, ".") && strcmp(name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, name);
            snprintf(sub, sizeof sub, "%s%s", rel, name);
            ck_assert(lstat(path, &st) == 0);
            if (S_ISDIR(st.st_mode)) {
                put(b, head, (size_t)snprintf(head, sizeof head, "dir %s\n", sub));
                strcat(sub, "/");
                snap_into(b, path, sub);
            } else if (S_ISLNK(st.st_mode)) {
                char to[512];
                ssize_t m = readlink(path, to, sizeof to - 1);
                to[m > 0 ? m : 0] = 0;
                put(b, head, (size_t)snprintf(head, sizeof head, "link %s -> %s\n", sub, to));
            } else {
                char *s = slurp_path(path);
                ck_assert_ptr_nonnull(s);
                put(b, head, (size_t)snprintf(head, sizeof head, "file %s %lld\n", sub, (long long)st.st_size));
                for (off_t i = 0; i < st.st_size; i++) /* a NUL byte as "\\0", so the snapshot is one C string */
                    put(b, s[i] == 0 ? "\\0" : s[i] == '\\' ? "\\\\" : s + i, s[i] == 0 || s[i] == '\\' ? 2 : 1);
                free(s);
            }
        }
        free(list[k]);
    }
    free(list);
}

/* The whole report folder as one string; NULL if it does not exist. */
static char *snapshot(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st)) return NULL;
    buf b = {vijp_strdup(""), 0, 1};
    snap_into(&b, dir, "");
    return b.s;
}

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* What a run left beside the report (B/p except out): " name name … ",
 * "" when nothing.  The finished curves a run keeps for --resume
 * (.out.vijp-units, src/report/resume.h) are not counted: a failed or
 * interrupted run leaves them by design (tests/t-resume.c); a completed one
 * removes them (checked in the kill walk). */
static char *beside(const place *p)
{
    buf b = {vijp_strdup(""), 0, 1};
    DIR *d = opendir(p->parent);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "out") &&
            strcmp(e->d_name, ".out.vijp-units")) {
            put(&b, " ", 1);
            put(&b, e->d_name, strlen(e->d_name));
        }
    closedir(d);
    if (b.n) put(&b, " ", 1);
    return b.s;
}

static int has_word(const char *list, const char *word)
{
    char w[300];
    snprintf(w, sizeof w, " %s ", word);
    return strstr(list, w) != NULL;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert(fclose(f) == 0);
}

/* An earlier report (study) and files of the user's beside its own: a
 * note, a PNG named like a plot of config 3, a folder, a link. */
static char *report_with_user_files(const place *p, const char *study)
{
    ck_assert_int_eq(drift_rc(p, study, NULL), CLI_OK);
    write_file(p->out, "notes.txt", "my notes\n");
    write_file(p->out, "error-c3.png", "not a plot of vijp's\n");
    char mine[400];
    snprintf(mine, sizeof mine, "%s/mine", p->out);
    ck_assert(mkdir(mine, 0755) == 0);
    write_file(mine, "data.txt", "1 2 3\n");
    snprintf(mine, sizeof mine, "%s/link", p->out);
    ck_assert(symlink("notes.txt", mine) == 0);
    return snapshot(p->out);
}

/* The same over OLD, with plots. */
static char *old_report_with_user_files(const place *p) { return report_with_user_files(p, OLD); }

/* ---------------------------------------------------------------- kill walk */

/* The report folder := the copy of the old report kept in pristine. */
static void put_back(const place *p, const char *pristine)
{
    sh("rm -rf '%s' && cp -a '%s' '%s'", p->out, pristine, p->out);
}

/* Kill the run with VIJP_KILL_AT_STEP=N for N = 1, 2, … until a run
 * completes, each over the old report.  After each kill the folder holds the
 * whole old report or the whole new one, and the next run clears what the
 * killed one left beside it (the lock file aside, which a run reuses and
 * removes as it ends).  env: more of the runs' environment.  *missing counts
 * kills that left no folder at all (allowed only with the fallback, env
 * given): then the next run must put the old report back.  Returns the
 * number of steps of the commit sequence. */
static int kill_walk(const place *p, const char *env, int *saw_old, int *saw_new, int *missing)
{
    char pristine[400], hook[128], *left_before = vijp_strdup("");
    snprintf(pristine, sizeof pristine, "%s/pristine", p->base);
    char *old = snapshot(p->out);
    sh("cp -a '%s' '%s'", p->out, pristine);
    /* The new report, written without interruption; then the old one again. */
    ck_assert_int_eq(drift_rc(p, NEW, env), CLI_OK);
    char *new = snapshot(p->out);
    put_back(p, pristine);
    ck_assert_msg(!same(old, new), "the old and new reports should differ");
    int n;
    for (n = 1; n < 500; n++) {
        snprintf(hook, sizeof hook, "VIJP_KILL_AT_STEP=%d %s", n, env ? env : "");
        int rc = drift_rc(p, NEW, hook);
        char *now = snapshot(p->out), *left = beside(p);
        for (char *t = strtok(left_before, " "); t; t = strtok(NULL, " "))
            ck_assert_msg(!has_word(left, t) || strstr(t, ".vijp-lock"),
                          "step %d: %s, left by the previous killed run, is still there", n, t);
        free(left_before), left_before = left;
        if (rc == CLI_OK) {
            ck_assert_msg(same(now, new), "the completed run did not write the new report");
            ck_assert_msg(!*left, "the completed run left%s beside the report", left);
            char units[400];
            snprintf(units, sizeof units, "%s/.out.vijp-units", p->parent);
            ck_assert_msg(access(units, F_OK) != 0, "the completed run left its units at %s", units);
            free(now);
            break;
        }
        ck_assert_msg(rc == 128 + SIGKILL, "VIJP_KILL_AT_STEP=%d: exit %d, not killed", n, rc);
        if (same(now, old)) ++*saw_old;
        else if (same(now, new)) ++*saw_new, put_back(p, pristine);
        else {
            ck_assert_msg(env && !now, "killed after step %d: the folder holds neither the whole old report nor the "
                          "whole new one%s", n, now ? "" : " (it is missing)");
            ++*missing;
            /* The next run puts the old report back before anything else:
             * killed at its first step, it leaves the old report. */
            snprintf(hook, sizeof hook, "VIJP_KILL_AT_STEP=1 %s", env);
            ck_assert_int_eq(drift_rc(p, NEW, hook), 128 + SIGKILL);
            char *back = snapshot(p->out), *err = stderr_of(p);
            ck_assert_msg(same(back, old) && strstr(err, "put back"), "the old report was not put back: %s", err);
            free(back), free(err);
        }
        free(now);
    }
    free(old), free(new), free(left_before);
    return n;
}

START_TEST(kill_walk_leaves_old_or_new)
{
    place p;
    place_make(&p);
    free(old_report_with_user_files(&p));
    int saw_old = 0, saw_new = 0, missing = 0;
    int steps = kill_walk(&p, NULL, &saw_old, &saw_new, &missing);
    /* Hand count of this study's commit sequence: staging folder and its
     * marker, 6 files and the manifest written and flushed, 4 entries
     * carried, marker removed, folder flushed, exchange, parent flushed,
     * old generation removed, parent flushed: some 40 steps. */
    ck_assert_msg(steps > 30 && saw_old > 10 && saw_new > 5, "%d steps: %d kills left the old report, %d the new",
                  steps, saw_old, saw_new);
    place_remove(&p);
}
END_TEST

/* Without RENAME_EXCHANGE (forced by a test hook) the walk finds the window
 * the fallback leaves, which proves the walk can see one: DIR missing after
 * some kill; the next run puts the old report back. */
START_TEST(kill_walk_fallback_window)
{
    place p;
    place_make(&p);
    free(old_report_with_user_files(&p));
    int saw_old = 0, saw_new = 0, missing = 0;
    kill_walk(&p, "VIJP_NO_RENAME_EXCHANGE=1", &saw_old, &saw_new, &missing);
    ck_assert_msg(missing == 1 && saw_old > 10 && saw_new > 5, "fallback walk: %d missing, %d old, %d new", missing,
                  saw_old, saw_new);
    place_remove(&p);
}
END_TEST

/* ---------------------------------------------------------------- failures */

/* A file-size limit makes the first report file's write fail (EFBIG, as a
 * full disk would fail it): exit 1 naming the file and the reason, the old
 * report bit for bit, nothing left beside it. */
START_TEST(full_disk_keeps_old_report)
{
    place p;
    place_make(&p);
    char *old = old_report_with_user_files(&p);
    /* drift.csv of NEW is about 1.5 KB; the lock file's line is under 1 KB. */
    int rc = finish(spawn_drift(&p, NEW, NULL, 1024));
    char *err = stderr_of(&p), *now = snapshot(p.out), *left = beside(&p);
    ck_assert_msg(rc == CLI_FAILED, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "/out/drift.csv") && strstr(err, strerror(EFBIG)), "message: %s", err);
    ck_assert_msg(same(now, old), "the old report changed");
    ck_assert_msg(!*left, "left beside the report: %s", left);
    free(err), free(now), free(left), free(old);
    place_remove(&p);
}
END_TEST

/* Files vijp did not write survive a run, unchanged: a PNG named like a plot
 * (error-c3.png, which the old clean-up deleted), notes, a folder, a link; in
 * a folder with a manifest and in one without.  A new report file whose name
 * is taken by a file of the user's is refused, and nothing changes; in a
 * report from before manifests, vijp's files are replaced. */
START_TEST(user_files_survive)
{
    place p;
    place_make(&p);
    char *old = old_report_with_user_files(&p);
    ck_assert_int_eq(drift_rc(&p, NEW, NULL), CLI_OK);
    char *now = snapshot(p.out);
    static const char *const kept[] = {"file error-c3.png 21\nnot a plot of vijp's\n", "file notes.txt 9\nmy notes\n",
                                       "dir mine\nfile mine/data.txt 6\n1 2 3\n", "link link -> notes.txt\n"};
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        ck_assert_msg(strstr(old, kept[k]) && strstr(now, kept[k]), "lost or changed: %s", kept[k]);
    ck_assert_msg(!strstr(now, "error-c1.png"), "the old report's plot survived (listed in its manifest)");
    free(old), free(now);

    /* A folder of the user's (no manifest): everything is carried over. */
    sh("rm -rf '%s'/* '%s'/.vijp-manifest", p.out, p.out);
    write_file(p.out, "error-c3.png", "mine\n");
    write_file(p.out, "notes.txt", "mine too\n");
    ck_assert_int_eq(drift_rc(&p, NEW, NULL), CLI_OK);
    now = snapshot(p.out);
    ck_assert(strstr(now, "file error-c3.png 5\nmine\n") && strstr(now, "file notes.txt 9\nmine too\n") &&
              strstr(now, "file drift.csv"));
    free(now);

    /* error-c1.png of the user's where the new report (with plots) writes one. */
    write_file(p.out, "error-c1.png", "mine\n");
    old = snapshot(p.out);
    int rc = drift_rc(&p, OLD, NULL);
    char *err = stderr_of(&p), *left = beside(&p);
    now = snapshot(p.out);
    ck_assert_msg(rc == CLI_FAILED && strstr(err, "error-c1.png is not a file of an earlier vijp report"), "exit %d: %s",
                  rc, err);
    ck_assert_msg(same(now, old) && !*left, "a refused run changed the folder or left '%s'", left);
    free(old), free(now), free(err), free(left);

    /* A report from before manifests (a vijp-drift/ drift.json, no
     * manifest): its report files are replaced, the rest kept. */
    sh("rm -rf '%s' && mkdir '%s'", p.out, p.out);
    ck_assert_int_eq(drift_rc(&p, OLD, NULL), CLI_OK);
    sh("rm '%s/.vijp-manifest'", p.out);
    write_file(p.out, "notes.txt", "my notes\n");
    old = snapshot(p.out);
    ck_assert_int_eq(drift_rc(&p, NEW, NULL), CLI_OK);
    now = snapshot(p.out);
    ck_assert_msg(!same(old, now) && strstr(now, "file notes.txt 9\nmy notes\n") && strstr(now, "file error-c1.png") &&
                  strstr(now, "file .vijp-manifest"), "a report from before manifests was not replaced as it should");
    free(old), free(now);
    place_remove(&p);
}
END_TEST

/* A second run on a locked folder refuses at once (exit 2), naming the
 * holder the lock file names, and leaves the holder's lock file alone. */
START_TEST(second_run_refused)
{
    place p;
    place_make(&p);
    char *old = old_report_with_user_files(&p), lock[400];
    snprintf(lock, sizeof lock, "%s/.out.vijp-lock", p.parent);
    int fd = open(lock, O_RDWR | O_CREAT, 0666);
    ck_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    ck_assert(dprintf(fd, "pid 4242: vijp drift --the-holder\n") > 0);
    int rc = drift_rc(&p, NEW, NULL);
    char *err = stderr_of(&p), *now = snapshot(p.out);
    ck_assert_msg(rc == CLI_USAGE && strstr(err, "another run is writing") && strstr(err, "pid 4242: vijp drift --the-holder"),
                  "exit %d: %s", rc, err);
    ck_assert_msg(same(now, old) && access(lock, F_OK) == 0, "the refused run changed the folder or the lock");
    free(err), free(now);
    close(fd); /* released: the next run goes ahead and removes the lock file as it ends */
    ck_assert_int_eq(drift_rc(&p, NEW, NULL), CLI_OK);
    char *left = beside(&p);
    ck_assert_msg(!*left, "left beside the report: %s", left);
    free(left), free(old);
    place_remove(&p);
}
END_TEST

/* A second run names the first run's whole command, as the first one wrote
 * it into the lock file: a real run, paused while it holds the folder, with
 * a command of 280-odd characters (the lock file kept 120 of them). */
START_TEST(second_run_names_whole_command)
{
    place p;
    place_make(&p);
    static const char study[] = "--net dense:4,tanh,dense:4,leaky:0.5,dense:4,tanh --net dense:4,leaky:0.5,dense:4,tanh,dense:4 "
                                "--net dense:4,tanh,dense:4,tanh,dense:4,tanh --net dense:4,sigmoid,dense:4,tanh,dense:4 "
                                "--depth 3 --formats binary32 --seeds 1 --no-plots";
    pid_t pid = spawn_drift(&p, study, "VIJP_PAUSE_AT_STEP=3", 0);
    char path[400], *err = NULL;
    snprintf(path, sizeof path, "%s/stderr", p.base);
    for (int t = 0; t < 6000; t++) { /* up to a minute (sanitizers) */
        free(err), err = slurp_path(path);
        if (err && strstr(err, "paused")) break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_msg(err && strstr(err, "paused"), "the first run did not pause: %s", err ? err : "");
    free(err);
    char want[1200];
    snprintf(want, sizeof want, "the run writing it: pid %ld: vijp drift %s -q --out %s\n", (long)pid, study, p.out);
    ck_assert(strlen(want) > 256); /* past what a vijp_error message holds */
    int rc = drift_rc(&p, NEW, NULL);
    err = stderr_of(&p);
    ck_assert_msg(rc == CLI_USAGE && strstr(err, "another run is writing") && strstr(err, want), "exit %d: %s\nwant: %s", rc,
                  err, want);
    free(err);
    ck_assert(kill(pid, SIGTERM) == 0);
    ck_assert_int_eq(finish(pid), 128 + SIGTERM);
    place_remove(&p);
}
END_TEST

/* SIGTERM or SIGINT while the new generation is being staged (held there by
 * VIJP_PAUSE_AT_STEP, after its staging folder exists): the run dies of the
 * signal (143, 130), the staging folder is gone and the old report is as it
 * was.  The same during the computation, where there is nothing staged. */
START_TEST(signals_remove_staging)
{
    place p;
    place_make(&p);
    char *old = old_report_with_user_files(&p);
    static const int sigs[] = {SIGTERM, SIGINT};
    for (int k = 0; k < 2; k++) {
        pid_t pid = spawn_drift(&p, NEW, "VIJP_PAUSE_AT_STEP=6", 0);
        char *err = NULL;
        for (int t = 0; t < 6000; t++) { /* up to a minute (sanitizers) */
            char path[400];
            snprintf(path, sizeof path, "%s/stderr", p.base);
            free(err), err = slurp_path(path);
            if (!err) err = vijp_strdup("");
            if (strstr(err, "paused")) break;
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
        char *left = beside(&p);
        ck_assert_msg(strstr(err, "paused") && strstr(left, ".out.vijp-staging-"), "not paused in staging: %s / %s", err,
                      left);
        ck_assert(kill(pid, sigs[k]) == 0);
        int rc = finish(pid);
        free(left), left = beside(&p);
        char *now = snapshot(p.out);
        ck_assert_msg(rc == 128 + sigs[k], "signal %d: exit %d", sigs[k], rc);
        ck_assert_msg(same(now, old) && !*left, "signal %d: old report changed or '%s' left", sigs[k], left);
        free(err), free(left), free(now);
    }
    /* During the computation (a larger study, interrupted after 50 ms). */
    pid_t pid = spawn_drift(&p, "--net dense:32,tanh --depth 64 --formats binary32,double --seeds 1,2,3", NULL, 0);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    ck_assert(kill(pid, SIGINT) == 0);
    int rc = finish(pid);
    char *now = snapshot(p.out), *left = beside(&p);
    ck_assert_msg(rc == 128 + SIGINT && same(now, old) && !*left, "SIGINT while computing: exit %d, left '%s'", rc, left);
    free(now), free(left), free(old);
    place_remove(&p);
}
END_TEST

/* ------------------------------------------------- owners, mounts, the cwd */

/* A user and group the machine need not know (the tests run as root). */
#define OTHER 12345
/* An old report without plots (gnuplot is most of a tiny run's time), other
 * than NEW. */
#define PLAIN "--net dense:4,tanh --depth 3 --formats binary32 --seeds 3 --no-plots"

static struct stat stat_of(const char *path)
{
    struct stat st;
    ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return st;
}

/* DIR/rel ("": DIR) has owner uid, group gid and mode (permission bits). */
static void ck_owner(const place *p, const char *rel, uid_t uid, gid_t gid, mode_t mode)
{
    char path[700];
    snprintf(path, sizeof path, "%s%s%s", p->out, *rel ? "/" : "", rel);
    struct stat st = stat_of(path);
    ck_assert_msg(st.st_uid == uid && st.st_gid == gid && (st.st_mode & 07777) == mode,
                  "%s: owner %u, group %u, mode %04o; was %u, %u, %04o before the run", path, (unsigned)st.st_uid,
                  (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777), (unsigned)uid, (unsigned)gid, (unsigned)mode);
}

/* What user uid (group uid, no other) reads of path; NULL if it cannot. */
static char *read_as(uid_t uid, const char *path)
{
    int pfd[2];
    ck_assert(pipe(pfd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        if (setgroups(0, NULL) || setgid(uid) || setuid(uid)) _exit(2);
        int fd = open(path, O_RDONLY);
        if (fd < 0) _exit(1);
        char b[4096];
        ssize_t n;
        while ((n = read(fd, b, sizeof b)) > 0)
            if (write(pfd[1], b, (size_t)n) != n) _exit(2);
        _exit(n < 0);
    }
    close(pfd[1]);
    char *s = slurp_fd(pfd[0]);
    close(pfd[0]);
    if (finish(pid)) free(s), s = NULL;
    return s;
}

/* Run as root, the report folder and every folder carried over keep their
 * owner, group and mode (a 0700 folder of another user's stays readable by
 * that user, and the setgid bit stays); a run as that user, which cannot
 * give a new folder to a group it is not in, refuses before computing
 * (exit 2, naming the folder) and changes nothing; once everything is the
 * user's, the user's own run keeps it all too. */
START_TEST(owner_mode_kept)
{
    if (geteuid() != 0) {
        fputs("# owner_mode_kept: skipped: not root (it gives folders to another user)\n", stderr);
        return;
    }
    place p;
    place_make(&p);
    sh("chmod 0755 '%s'", p.base); /* the other user reaches B/p/out */
    free(report_with_user_files(&p, PLAIN));
    char priv[400], deeper[500], path[600];
    snprintf(priv, sizeof priv, "%s/private", p.out);
    snprintf(deeper, sizeof deeper, "%s/deeper", priv);
    ck_assert(mkdir(priv, 0700) == 0 && mkdir(deeper, 0700) == 0);
    write_file(priv, "secret.txt", "only mine\n");
    write_file(deeper, "more.txt", "mine too\n");
    sh("chown -R %d:%d '%s' && chmod 0600 '%s/secret.txt' && chown %d:%d '%s' && chmod 02750 '%s' && "
       "chown %d:%d '%s' && chmod 0750 '%s'",
       OTHER, OTHER, priv, priv, OTHER, OTHER + 1, deeper, deeper, OTHER, OTHER, p.out, p.out);
    char *old = snapshot(p.out);
    ck_assert_int_eq(drift_rc(&p, NEW, NULL), CLI_OK);
    ck_owner(&p, "", OTHER, OTHER, 0750);
    ck_owner(&p, "private", OTHER, OTHER, 0700);
    ck_owner(&p, "private/secret.txt", OTHER, OTHER, 0600);
    ck_owner(&p, "private/deeper", OTHER, OTHER + 1, 02750);
    ck_owner(&p, "mine", 0, 0, 0755);
    char *now = snapshot(p.out);
    static const char *const kept[] = {"file private/secret.txt 10\nonly mine\n", "file private/deeper/more.txt 9\nmine too\n",
                                       "file notes.txt 9\nmy notes\n"};
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        ck_assert_msg(strstr(old, kept[k]) && strstr(now, kept[k]), "lost or changed: %s", kept[k]);
    snprintf(path, sizeof path, "%s/secret.txt", priv);
    char *s = read_as(OTHER, path);
    ck_assert_msg(s && !strcmp(s, "only mine\n"), "after the run, uid %d cannot read its own %s", OTHER, path);
    free(s);
    snprintf(path, sizeof path, "%s/more.txt", deeper);
    s = read_as(OTHER, path);
    ck_assert_msg(s && !strcmp(s, "mine too\n"), "after the run, uid %d cannot read its own %s", OTHER, path);
    free(s), free(old), free(now);

    /* The user's run: private/deeper's group is not one of its groups. */
    sh("chown -R %d:%d '%s' && chown %d:%d '%s' && chmod 02750 '%s' && chown %d:%d '%s'", OTHER, OTHER, p.out, OTHER,
       OTHER + 1, deeper, deeper, OTHER, OTHER, p.parent);
    old = snapshot(p.out);
    as_user user = {.uid = OTHER};
    int rc = finish(spawn_in(&p, NEW, NULL, 0, &user));
    char *err = stderr_of(&p), *left = beside(&p);
    now = snapshot(p.out);
    ck_assert_msg(rc == CLI_USAGE && strstr(err, "/out/private/deeper") && strstr(err, "owner"), "exit %d: %s", rc, err);
    ck_assert_msg(same(now, old) && !*left, "a refused run changed the folder or left '%s'", left);
    ck_owner(&p, "private/deeper", OTHER, OTHER + 1, 02750);
    free(err), free(left), free(now);
    sh("chgrp %d '%s' && chmod 02750 '%s'", OTHER, deeper, deeper);
    rc = finish(spawn_in(&p, NEW, NULL, 0, &user));
    err = stderr_of(&p);
    ck_assert_msg(rc == CLI_OK, "exit %d: %s", rc, err);
    ck_owner(&p, "", OTHER, OTHER, 0750);
    ck_owner(&p, "private", OTHER, OTHER, 0700);
    ck_owner(&p, "private/deeper", OTHER, OTHER, 02750);
    now = snapshot(p.out);
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        ck_assert_msg(strstr(now, kept[k]), "lost or changed: %s", kept[k]);
    free(err), free(now), free(old);
    place_remove(&p);
}
END_TEST

/* The user's own report folder at mode 0555, or a 0555 folder of the
 * user's inside it holding a file: the user's run (not root: the mode
 * binds it) publishes the new report with the modes kept, the file kept,
 * exit 0, and leaves nothing beside the folder.  The run once gave the
 * staging folder its final mode before removing its marker in it (exit 1,
 * the staging folder left, mode 0555, for every later run to warn about),
 * and could not empty the old generation's 0555 subfolder (exit 0, the old
 * generation left beside). */
START_TEST(read_only_folders_kept)
{
    if (geteuid() != 0) {
        fputs("# read_only_folders_kept: skipped: not root (it runs vijp as another user)\n", stderr);
        return;
    }
    for (int top = 1; top >= 0; top--) {
        place p;
        place_make(&p);
        sh("chmod 0755 '%s'", p.base); /* the other user reaches B/p/out */
        ck_assert_int_eq(drift_rc(&p, PLAIN, NULL), CLI_OK);
        char sub[400];
        snprintf(sub, sizeof sub, "%s/sub", p.out);
        ck_assert(mkdir(sub, 0700) == 0);
        write_file(sub, "kept.txt", "read only\n");
        sh("chown -R %d:%d '%s' && chmod 0555 '%s'", OTHER, OTHER, p.parent, top ? p.out : sub);
        as_user user = {.uid = OTHER};
        int rc = finish(spawn_in(&p, NEW, NULL, 0, &user));
        char *err = stderr_of(&p), *left = beside(&p), *now = snapshot(p.out);
        ck_assert_msg(rc == CLI_OK && !*left, "%s 0555: exit %d, left beside '%s': %s", top ? "the folder" : "a subfolder",
                      rc, left, err);
        ck_assert_msg(strstr(now, "file sub/kept.txt 10\nread only\n"), "sub/kept.txt lost: %s", now);
        ck_owner(&p, "", OTHER, OTHER, top ? 0555 : 0755);
        ck_owner(&p, "sub", OTHER, OTHER, top ? 0700 : 0555);
        free(err), free(left), free(now);
        sh("chmod -R u+w '%s'", p.out);
        place_remove(&p);
    }
}
END_TEST

/* Whether this test may mount: root, in a mount namespace of its own where
 * the kernel allows one (Check runs each test in a child of its own, so
 * what it mounts goes with it even when it fails half way; a run that does
 * not fork, or a process with threads, mounts where it is, and
 * unmount_all, the test case's teardown, undoes what a failed test left).
 * Says why it skips when not. */
static int may_mount(const char *test)
{
    if (geteuid() != 0) {
        fprintf(stderr, "# %s: skipped: not root (it mounts file systems)\n", test);
        return 0;
    }
    if (!unshare(CLONE_NEWNS)) mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    return 1;
}

static void unmount_at(const char *path)
{
    ck_assert_msg(umount2(path, MNT_DETACH) == 0, "umount %s: %s", path, strerror(errno));
}

/* Every mount under a folder of these tests (.../vijp-atomic-XXXXXX/...),
 * the latest first: /proc/self/mountinfo's fifth field, in mount order. */
static void unmount_all(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return;
    char line[4096], *points[64];
    int n = 0;
    while (n < 64 && fgets(line, sizeof line, f)) {
        char *field = line;
        for (int k = 0; k < 4 && field; k++) field = strchr(field, ' '), field = field ? field + 1 : NULL;
        if (!field) continue;
        field[strcspn(field, " ")] = 0;
        if (strstr(field, "/vijp-atomic-")) points[n++] = strdup(field);
    }
    fclose(f);
    while (n > 0) umount2(points[--n], MNT_DETACH), free(points[n]);
}

static int mount_tmpfs(const char *test, const char *path)
{
    if (!mount("vijp-test", path, "tmpfs", 0, "size=1m")) return 1;
    fprintf(stderr, "# %s: skipped: mount -t tmpfs %s refused: %s\n", test, path, strerror(errno));
    return 0;
}

/* A run refused (exit 2) with a message holding want, the folder and its
 * surroundings as they were. */
static void ck_refused(const place *p, const char *args_note, const char *want)
{
    char *old = snapshot(p->out);
    int rc = drift_rc(p, NEW, NULL);
    char *err = stderr_of(p), *now = snapshot(p->out), *left = beside(p);
    ck_assert_msg(rc == CLI_USAGE && strstr(err, want), "%s: exit %d: %s\nwant: %s", args_note, rc, err, want);
    ck_assert_msg(same(now, old) && !*left, "%s: the refused run changed the folder or left '%s'", args_note, left);
    free(old), free(now), free(err), free(left);
}

/* A file system mounted inside the report folder (a tmpfs in a subfolder, a
 * bind mount of a folder and of a file of the same file system, whose st_dev
 * is the folder's own) or on the folder itself: refused before computing
 * (exit 2, naming it), nothing changes, the mount and its files stay.  A
 * mount that appears after that check is refused when the report is
 * published (exit 1, the old report kept). */
START_TEST(mount_inside_refused)
{
    if (!may_mount("mount_inside_refused")) return;
    place p;
    place_make(&p);
    free(report_with_user_files(&p, PLAIN));
    char mnt[400], other[400], bound[400], want[600];
    snprintf(mnt, sizeof mnt, "%s/mine/mnt", p.out);
    ck_assert(mkdir(mnt, 0755) == 0);
    if (!mount_tmpfs("mount_inside_refused", mnt)) {
        place_remove(&p);
        return;
    }
    write_file(mnt, "x.txt", "on the mount\n");
    snprintf(want, sizeof want, "%s is a mount point", mnt);
    ck_refused(&p, "tmpfs in mine/", want);
    ck_assert_msg(stat_of(mnt).st_dev != stat_of(p.out).st_dev, "the tmpfs is no longer mounted at %s", mnt);
    unmount_at(mnt);

    snprintf(other, sizeof other, "%s/elsewhere", p.base);
    ck_assert(mkdir(other, 0755) == 0);
    write_file(other, "y.txt", "bound\n");
    snprintf(bound, sizeof bound, "%s/bound", p.out);
    ck_assert(mkdir(bound, 0755) == 0);
    ck_assert(mount(other, bound, NULL, MS_BIND, NULL) == 0);
    ck_assert(stat_of(bound).st_dev == stat_of(p.out).st_dev);
    snprintf(want, sizeof want, "%s is a mount point", bound);
    ck_refused(&p, "a bind mount of a folder", want);
    unmount_at(bound);

    snprintf(bound, sizeof bound, "%s/notes.txt", p.out);
    snprintf(other, sizeof other, "%s/elsewhere/y.txt", p.base);
    ck_assert(mount(other, bound, NULL, MS_BIND, NULL) == 0);
    snprintf(want, sizeof want, "%s is a mount point", bound);
    ck_refused(&p, "a bind mount of a file", want);
    unmount_at(bound);

    /* The folder itself. */
    ck_assert(mount("vijp-test", p.out, "tmpfs", 0, "size=1m") == 0);
    write_file(p.out, "z.txt", "the mount's own\n");
    snprintf(want, sizeof want, "%s is a mount point", p.out);
    ck_refused(&p, "--out on a mount point", want);
    unmount_at(p.out);

    /* During the run: a gnuplot that waits (the new report is being
     * staged, long after the check of report_out_open) while the test
     * mounts, then runs the real one. */
    char bin[400], gp[500], env[4200];
    const char *path = getenv("PATH");
    snprintf(bin, sizeof bin, "%s/bin", p.base);
    snprintf(gp, sizeof gp, "%s/gnuplot", bin);
    ck_assert(mkdir(bin, 0755) == 0 && path && strlen(path) < 4000);
    FILE *f = fopen(gp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\n: > '%s/started'\nn=0\n"
               "while [ ! -e '%s/go' ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n + 1)); done\n"
               "PATH='%s'; export PATH; exec gnuplot \"$@\"\n", bin, bin, path);
    ck_assert(fclose(f) == 0 && chmod(gp, 0755) == 0);
    snprintf(env, sizeof env, "PATH=%s:%s", bin, path);
    pid_t pid = spawn_drift(&p, OLD, env, 0);
    snprintf(gp, sizeof gp, "%s/started", bin);
    for (int t = 0; t < 6000 && access(gp, F_OK); t++) nanosleep(&(struct timespec){0, 10000000}, NULL);
    ck_assert_msg(!access(gp, F_OK), "the run did not start gnuplot");
    snprintf(mnt, sizeof mnt, "%s/late", p.out);
    ck_assert(mkdir(mnt, 0755) == 0 && mount("vijp-test", mnt, "tmpfs", 0, "size=1m") == 0);
    write_file(mnt, "x.txt", "on the mount\n");
    char *old = snapshot(p.out);
    write_file(bin, "go", "");
    int rc = finish(pid);
    char *err = stderr_of(&p), *now = snapshot(p.out), *left = beside(&p);
    snprintf(want, sizeof want, "%s is a mount point", mnt);
    ck_assert_msg(rc == CLI_FAILED && strstr(err, want), "a mount made during the run: exit %d: %s", rc, err);
    ck_assert_msg(same(now, old) && !*left, "the failed run changed the folder or left '%s'", left);
    ck_assert(stat_of(mnt).st_dev != stat_of(p.out).st_dev);
    unmount_at(mnt);
    free(err), free(now), free(left), free(old);
    place_remove(&p);
}
END_TEST

/* --out . (or .., or any folder holding the working directory): refused
 * before computing (exit 2), the folder the same one (same inode) with the
 * same contents, so the shell is not left in a deleted folder.  From DIR's
 * parent, a relative --out is fine. */
START_TEST(cwd_inside_refused)
{
    place p;
    place_make(&p);
    char *old = report_with_user_files(&p, PLAIN), sub[400];
    snprintf(sub, sizeof sub, "%s/mine", p.out);
    ino_t ino = stat_of(p.out).st_ino;
    const struct {
        const char *cwd, *out;
    } runs[] = {{p.out, "."}, {p.out, "../out"}, {sub, ".."}, {sub, p.out}};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        as_user how = {.out = runs[k].out, .cwd = runs[k].cwd};
        int rc = finish(spawn_in(&p, NEW, NULL, 0, &how));
        char *err = stderr_of(&p), *now = snapshot(p.out), *left = beside(&p);
        ck_assert_msg(rc == CLI_USAGE && strstr(err, "holds the current working directory"), "--out %s in %s: exit %d: %s",
                      runs[k].out, runs[k].cwd, rc, err);
        ck_assert_msg(same(now, old) && !*left && stat_of(p.out).st_ino == ino,
                      "--out %s in %s: the folder was replaced, or '%s' left beside it", runs[k].out, runs[k].cwd, left);
        free(err), free(now), free(left);
    }
    as_user from_parent = {.out = "out", .cwd = p.parent};
    ck_assert_int_eq(finish(spawn_in(&p, NEW, NULL, 0, &from_parent)), CLI_OK);
    char *now = snapshot(p.out);
    ck_assert(!same(now, old) && strstr(now, "file notes.txt 9\nmy notes\n"));
    free(now), free(old);
    place_remove(&p);
}
END_TEST

Suite *suite_atomic(void)
{
    Suite *s = suite_create("atomic");
    TCase *tc = tcase_create("atomic");
    tcase_set_timeout(tc, 300); /* ~100 tiny runs; sanitizer builds are slower */
    tcase_add_test(tc, kill_walk_leaves_old_or_new);
    tcase_add_test(tc, kill_walk_fallback_window);
    tcase_add_test(tc, full_disk_keeps_old_report);
    tcase_add_test(tc, user_files_survive);
    tcase_add_test(tc, second_run_refused);
    tcase_add_test(tc, second_run_names_whole_command);
    tcase_add_test(tc, signals_remove_staging);
    suite_add_tcase(s, tc);
    /* What a run may replace: owners, mounts, the working directory. */
    tc = tcase_create("owners");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, unmount_all);
    tcase_add_test(tc, owner_mode_kept);
    tcase_add_test(tc, read_only_folders_kept);
    tcase_add_test(tc, mount_inside_refused);
    tcase_add_test(tc, cwd_inside_refused);
    suite_add_tcase(s, tc);
    return s;
}
