/* Writing a report generation and publishing it in one step (the scheme is
 * in atomic.h); signals and test hooks.  Opening, locking and clearing a
 * folder: atomic_open.c; the file-tree operations: atomic_tree.c. */
#include "atomic_tree.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- signals, the out-of-memory cleanup, test hooks ----
 *
 * A signal handler may run on any thread (worker threads, OpenBLAS's) while
 * the main thread is writing into the staging folder, so it does not remove
 * anything that is being written.  Before a generation is begun (phase NONE:
 * the computation) there is nothing to remove: the handler unlinks the lock
 * file (unlink is async-signal-safe; we hold the lock, so the file is ours)
 * and dies of the signal at once.  While a generation is staged or published
 * it only sets `interrupted`; the writer checks it after every step
 * (atomic_step), removes the staging folder itself and dies of the signal
 * (report_out_reraise); once the exchange is done the run finishes removing
 * the old generation first.  A second signal while the first is being
 * handled ends the run at once (what it leaves is cleared by the next run).
 * A signal that lands between the handler's test of phase and the main
 * thread's mkdir of the staging folder leaves that folder, empty: the next
 * run removes it, as after a kill -9. */
enum { PHASE_NONE, PHASE_STAGING, PHASE_PUBLISHED };
static volatile sig_atomic_t phase, interrupted, lock_held;
static int armed_parent_fd = -1;
static char armed_staging[NAME_MAX + 1], armed_lock[PATH_MAX];
/* Test hooks (environment, read by atomic_arm): VIJP_KILL_AT_STEP=N raises
 * SIGKILL right after the N-th step of the commit sequence (the kill walk of
 * tests/t-atomic.c); VIJP_PAUSE_AT_STEP=N says so on stderr after the N-th
 * step and waits (up to a minute) for a signal; VIJP_NO_RENAME_EXCHANGE=1
 * takes the fallback for file systems without RENAME_EXCHANGE. */
static unsigned long steps, kill_at, pause_at;
static int no_exchange;
/* Said on stderr when a signal ends the computation (report_out_signal_note). */
static const char *volatile signal_note;

void report_out_signal_note(const char *text) { signal_note = text; }

static void die_of(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns (or at once outside one) */
}

static void on_signal(int sig)
{
    int e = errno;
    if (phase != PHASE_NONE && !interrupted) interrupted = sig;
    else {
        const char *note = signal_note;
        if (note && phase == PHASE_NONE) {
            ssize_t w = write(STDERR_FILENO, note, strlen(note)); /* strlen and write are async-signal-safe */
            (void)w;
        }
        if (lock_held) unlink(armed_lock);
        die_of(sig);
    }
    errno = e;
}

/* Once the new report is published: what running out of memory says
 * (written before, since saying it must not allocate). */
static char published_note[2 * PATH_MAX + 200];

/* Runs from vijp_out_of_memory, on the thread that ran out: no allocation
 * (tree_remove uses system calls and the stack only).  Out of memory in the
 * main thread, the only one that writes the staging folder, is the case that
 * matters.  Once the new report is published the run has done its work: its
 * exit status stays 0 (exit 1 promises the old report), and the old
 * generation's folder is left for the next run to clear. */
static void on_fatal(void)
{
    if (phase == PHASE_STAGING) tree_remove(armed_parent_fd, armed_staging);
    if (lock_held) unlink(armed_lock);
    if (*published_note) {
        ssize_t w = write(STDERR_FILENO, published_note, strlen(published_note));
        (void)w;
        _exit(0);
    }
}

static unsigned long env_count(const char *name)
{
    const char *s = getenv(name);
    char *end;
    unsigned long v = s && *s ? strtoul(s, &end, 10) : 0;
    return s && *s && !*end ? v : 0;
}

void atomic_arm(report_out *o)
{
    published_note[0] = 0;
    armed_parent_fd = o->parent_fd;
    snprintf(armed_lock, sizeof armed_lock, "%s", o->lock);
    lock_held = 1;
    steps = 0, kill_at = env_count("VIJP_KILL_AT_STEP"), pause_at = env_count("VIJP_PAUSE_AT_STEP");
    no_exchange = env_count("VIJP_NO_RENAME_EXCHANGE") != 0;
    /* Past a file-size limit (ulimit -f) a write then fails with EFBIG and
     * is reported naming the file, instead of SIGXFSZ killing the run. */
    struct sigaction xfsz;
    if (!sigaction(SIGXFSZ, NULL, &xfsz) && xfsz.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++) {
        struct sigaction sa = {0}, old;
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART; /* writes and waitpid carry on; the flag is checked after each step */
        sigemptyset(&sa.sa_mask);
        /* A signal ignored by whoever started us (a background job) stays ignored. */
        if (!sigaction(sigs[k], NULL, &old) && old.sa_handler != SIG_IGN) sigaction(sigs[k], &sa, NULL);
    }
    vijp_memory_on_fatal(on_fatal);
}

void atomic_disarm(void)
{
    lock_held = 0;
    published_note[0] = 0;
    vijp_memory_on_fatal(NULL);
}

void report_out_reraise(void)
{
    if (interrupted) die_of(interrupted);
}

int atomic_step(void)
{
    if (phase == PHASE_NONE) return 0; /* clearing a killed run's leftovers: not counted */
    steps++;
    if (kill_at && steps == kill_at) raise(SIGKILL);
    if (pause_at && steps == pause_at) {
        static const char msg[] = "vijp: test hook VIJP_PAUSE_AT_STEP: paused\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        for (int k = 0; k < 6000 && !interrupted; k++) nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return phase == PHASE_STAGING && interrupted ? -1 : 0;
}

/* ---- a generation ---- */

static int interrupted_fail(vijp_error *err) { return vijp_fail(err, VIJP_EIO, "interrupted by signal %d", (int)interrupted); }

static const char *staging_name(const report_out *o) { return strrchr(o->staging, '/') + 1; }

int report_out_begin(report_out *o, vijp_error *err)
{
    char name[NAME_MAX + 1];
    if ((size_t)snprintf(name, sizeof name, ".%s" STAGING_SUFFIX "%ld", o->name, (long)getpid()) >= sizeof name ||
        (size_t)snprintf(o->staging, sizeof o->staging, "%.*s/%s", (int)(o->name - 1 - o->target), o->target, name) >=
            sizeof o->staging)
        return vijp_fail(err, VIJP_EIO, "%s: name too long for its staging folder", o->shown);
    snprintf(armed_staging, sizeof armed_staging, "%s", name);
    phase = PHASE_STAGING; /* before the folder exists: signals from now on are handled by the writer */
    if (mkdirat(o->parent_fd, name, 0777)) {
        int e = errno;
        phase = PHASE_NONE;
        return vijp_fail(err, VIJP_EIO, "cannot create %s: %s", o->staging, strerror(e));
    }
    if (atomic_step()) return interrupted_fail(err);
    o->stage_fd = openat(o->parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = o->stage_fd < 0 ? -1 : openat(o->stage_fd, INCOMPLETE_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return vijp_fail(err, VIJP_EIO, "cannot write in %s: %s", o->staging, strerror(errno));
    close(fd);
    return atomic_step() ? interrupted_fail(err) : 0;
}

/* name in the staging folder := what fill writes; durable (fsync) when sync. */
static int write_file(report_out *o, const char *name, int (*fill)(FILE *, const void *), const void *ctx, int sync,
                      vijp_error *err)
{
    int fd = openat(o->stage_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return vijp_fail(err, VIJP_EIO, "cannot write %s/%s: %s", o->shown, name, strerror(e));
    }
    errno = 0;
    int ok = fill(f, ctx) == 0 && fflush(f) == 0 && !ferror(f), e = errno;
    if (ok && sync) {
        ok = atomic_step() == 0 && fsync(fileno(f)) == 0, e = errno;
        ok = ok && atomic_step() == 0;
    }
    if (fclose(f) && ok) ok = 0, e = errno;
    if (interrupted && phase == PHASE_STAGING) return interrupted_fail(err);
    if (!ok) return vijp_fail(err, VIJP_EIO, "cannot write %s/%s: %s", o->shown, name, strerror(e ? e : EIO));
    return 0;
}

int report_out_write(report_out *o, const char *name, int (*fill)(FILE *, const void *), const void *ctx,
                     vijp_error *err)
{
    int rc = write_file(o, name, fill, ctx, 1, err);
    if (!rc) name_list_add(&o->written, name);
    return rc;
}

void report_out_path(const report_out *o, const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", o->staging, name);
}

int report_out_add(report_out *o, const char *name, vijp_error *err)
{
    int fd = openat(o->stage_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return vijp_fail(err, VIJP_EIO, "cannot write %s/%s: %s", o->shown, name, strerror(e));
    }
    close(fd);
    name_list_add(&o->written, name);
    return atomic_step() ? interrupted_fail(err) : 0;
}

int report_out_scratch(report_out *o, const char *name, int (*fill)(FILE *, const void *), const void *ctx,
                       char *path, size_t size, vijp_error *err)
{
    char scratch[NAME_MAX + 1];
    snprintf(scratch, sizeof scratch, SCRATCH_PREFIX "%s", name);
    report_out_path(o, scratch, path, size);
    return write_file(o, scratch, fill, ctx, 0, err);
}

static int fill_manifest(FILE *out, const void *ctx)
{
    const name_list *l = ctx;
    fputs("# vijp report manifest: the files vijp wrote in this folder, one a line.  A later run\n"
          "# replaces or removes these; every other file here is yours and is kept.\n", out);
    for (size_t k = 0; k < l->n; k++) fprintf(out, "%s\n", l->v[k]);
    return ferror(out);
}

/* A folder from before manifests that holds a vijp report: its report files
 * may be replaced (its other files are carried over like any user's). */
static int legacy_report(int dirfd)
{
    char head[256] = "";
    int fd = openat(dirfd, "drift.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    head[n > 0 ? n : 0] = 0;
    return strstr(head, "\"schema\": \"vijp-drift/") != NULL;
}

/* The old generation's files that vijp did not write, into the new one,
 * and the old folder's owner and group to the new (its mode comes last:
 * give_mode).  *st: the old folder's. */
static int carry_over(report_out *o, int tfd, struct stat *st_out, vijp_error *err)
{
    struct stat st, up;
    if (fstat(tfd, &st) || fstat(o->parent_fd, &up))
        return vijp_fail(err, VIJP_EIO, "cannot read the folder %s: %s", o->shown, strerror(errno));
    if (tree_mount_point(o->parent_fd, o->name, &st, up.st_dev)) /* mounted since report_out_open */
        return vijp_fail(err, VIJP_EINVAL, "%s is a mount point, which a report cannot replace: choose a folder inside "
                         "it as --out", o->shown);
    /* The folder keeps its owner, group and mode: the owner at once (what
     * is carried may inherit its group), the mode once it is full and its
     * marker is gone (a read-only mode would keep the run from removing
     * the marker). */
    *st_out = st;
    if (tree_give(o->stage_fd, -1, NULL, &st, S_IRWXU))
        return vijp_fail(err, VIJP_EIO, "cannot give the new %s the owner (uid %u, group %u) of the old: %s", o->shown,
                         (unsigned)st.st_uid, (unsigned)st.st_gid, strerror(errno));
    name_list old;
    manifest_read(tfd, &old);
    int legacy = faccessat(tfd, MANIFEST_NAME, F_OK, AT_SYMLINK_NOFOLLOW) && legacy_report(tfd);
    int rc = tree_carry(tfd, o->stage_fd, &old, &o->written, legacy, o->shown, atomic_step, err);
    name_list_free(&old);
    return rc;
}

static int give_mode(report_out *o, const struct stat *st, vijp_error *err)
{
    if (!tree_give(o->stage_fd, -1, NULL, st, 0)) return 0;
    return vijp_fail(err, VIJP_EIO, "cannot give the new %s the owner (uid %u, group %u) and mode %04o of the old: %s",
                     o->shown, (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777), strerror(errno));
}

/* Make the staging folder DIR, in one step where the file system can:
 * RENAME_EXCHANGE swaps the two names atomically, and the old generation is
 * then at the staging name.  *old receives the old generation's name ("" if
 * there was none). */
static int publish(report_out *o, int had_target, char *old, size_t size, vijp_error *err)
{
    const char *stage = staging_name(o);
    *old = 0;
    if (had_target && !no_exchange) {
        if (!renameat2(o->parent_fd, stage, o->parent_fd, o->name, RENAME_EXCHANGE))
            return snprintf(old, size, "%s", stage), 0;
        if (errno == ENOENT) had_target = 0; /* DIR went away meanwhile: a plain rename makes it */
        else if (errno != EINVAL && errno != ENOSYS)
            return vijp_fail(err, VIJP_EIO, "cannot replace %s: %s", o->shown, strerror(errno));
    }
    if (had_target) {
        /* Fallback for a file system without RENAME_EXCHANGE: DIR moves
         * aside, then the new generation takes its name.  Between the two
         * renames DIR does not exist: a kill there leaves the old report
         * whole at PARENT/.NAME.vijp-old-PID, which the next run renames back
         * to DIR before anything else (atomic_open.c). */
        snprintf(old, size, ".%s" OLD_SUFFIX "%ld", o->name, (long)getpid());
        if (renameat(o->parent_fd, o->name, o->parent_fd, old))
            return vijp_fail(err, VIJP_EIO, "cannot move %s aside: %s", o->shown, strerror(errno));
        atomic_step(); /* no stopping here: DIR must exist again first */
    }
    int rc = renameat2(o->parent_fd, stage, o->parent_fd, o->name, RENAME_NOREPLACE);
    if (rc && (errno == EINVAL || errno == ENOSYS)) rc = renameat(o->parent_fd, stage, o->parent_fd, o->name);
    if (rc) {
        int e = errno;
        if (*old) renameat(o->parent_fd, old, o->parent_fd, o->name);
        return vijp_fail(err, VIJP_EIO, "cannot create %s: %s", o->shown, strerror(e));
    }
    return 0;
}

int report_out_commit(report_out *o, vijp_error *err)
{
    int rc = write_file(o, MANIFEST_NAME, fill_manifest, &o->written, 1, err);
    int tfd = rc ? -1 : openat(o->parent_fd, o->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (!rc && tfd < 0 && errno != ENOENT)
        rc = vijp_fail(err, VIJP_EIO, "%s: %s", o->shown, errno == ENOTDIR ? "not a folder" : strerror(errno));
    struct stat old_st;
    if (!rc && tfd >= 0) rc = carry_over(o, tfd, &old_st, err);
    int had_target = tfd >= 0;
    if (tfd >= 0) close(tfd);
    if (!rc && unlinkat(o->stage_fd, INCOMPLETE_NAME, 0))
        rc = vijp_fail(err, VIJP_EIO, "cannot write in %s: %s", o->staging, strerror(errno));
    if (!rc && had_target) rc = give_mode(o, &old_st, err);
    if (!rc && atomic_step()) rc = interrupted_fail(err);
    if (!rc && fsync(o->stage_fd)) rc = vijp_fail(err, VIJP_EIO, "cannot flush %s: %s", o->staging, strerror(errno));
    if (!rc && atomic_step()) rc = interrupted_fail(err);
    char old[NAME_MAX + 1];
    if (!rc) rc = publish(o, had_target, old, sizeof old, err);
    if (rc) return report_out_abort(o), rc;
    phase = PHASE_PUBLISHED; /* from here on DIR is the new report: no turning back */
    if (*old)
        snprintf(published_note, sizeof published_note,
                 "vijp: the new report is complete in %s (exit status 0); its previous generation is left at "
                 "%.*s/%s for the next run to remove\n", o->shown, (int)(o->name - 1 - o->target), o->target, old);
    else snprintf(published_note, sizeof published_note, "vijp: the new report is complete in %s (exit status 0)\n", o->shown);
    atomic_step();
    close(o->stage_fd), o->stage_fd = -1;
    if (fsync(o->parent_fd) == 0) atomic_step();
    else fprintf(stderr, "vijp: warning: cannot flush the folder holding %s: %s\n", o->shown, strerror(errno));
    if (*old) {
        int nfd = openat(o->parent_fd, o->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tree_retire(o->parent_fd, old, nfd, atomic_step))
            fprintf(stderr, "vijp: warning: kept the old report's folder %.*s/%s: it holds what could not be "
                    "moved into %s\n", (int)(o->name - 1 - o->target), o->target, old, o->shown);
        if (nfd >= 0) close(nfd);
        if (fsync(o->parent_fd) == 0) atomic_step();
    }
    phase = PHASE_NONE;
    name_list_free(&o->written);
    return 0;
}

void report_out_abort(report_out *o)
{
    if (o->stage_fd >= 0) close(o->stage_fd), o->stage_fd = -1;
    if (phase == PHASE_STAGING) tree_remove(o->parent_fd, staging_name(o));
    phase = PHASE_NONE;
    name_list_free(&o->written);
}
