/* Opening a report folder (atomic.h): where it really is, its lock, and what
 * killed runs left beside it. */
#include "atomic_tree.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* o->target := DIR with every symbolic link resolved, so that the folder has
 * one lock whatever path names it, and the exchange swaps the folder itself
 * (not a link to it).  A missing DIR's parent is created. */
static int resolve(report_out *o, const char *dir, vijp_error *err)
{
    char path[PATH_MAX], real[PATH_MAX];
    size_t n = strlen(dir);
    if (!n || n >= sizeof path) return vijp_fail(err, VIJP_EINVAL, "bad output folder '%s'", dir);
    memcpy(path, dir, n + 1);
    while (n > 1 && path[n - 1] == '/') path[--n] = 0;
    struct stat st;
    if (realpath(path, real)) {
        if (stat(real, &st) || !S_ISDIR(st.st_mode)) return vijp_fail(err, VIJP_EINVAL, "output %s is not a folder", dir);
        if (!strcmp(real, "/")) return vijp_fail(err, VIJP_EINVAL, "cannot replace / with a report");
        snprintf(o->target, sizeof o->target, "%s", real);
    } else if (errno == ENOENT) {
        if (!lstat(path, &st)) return vijp_fail(err, VIJP_EINVAL, "output %s is a broken symbolic link", dir);
        char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            return vijp_fail(err, VIJP_EINVAL, "cannot create output folder %s: name a folder, not . or ..", dir);
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
        if (report_mkdir_p(parent) || !realpath(parent, real))
            return vijp_fail(err, VIJP_EINVAL, "cannot create output folder %s: %s", dir, strerror(errno));
        if ((size_t)snprintf(o->target, sizeof o->target, "%s/%s", strcmp(real, "/") ? real : "", name) >=
            sizeof o->target)
            return vijp_fail(err, VIJP_EINVAL, "output folder %s: path too long", dir);
    } else {
        return vijp_fail(err, VIJP_EINVAL, "cannot use output folder %s: %s", dir, strerror(errno));
    }
    o->name = strrchr(o->target, '/') + 1;
    if (strlen(o->name) + sizeof "." STAGING_SUFFIX "4294967295" > NAME_MAX + 1) /* room for the staging folder's name */
        return vijp_fail(err, VIJP_EINVAL, "output folder name too long: %s", o->name);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", o->name - 1 == o->target ? 1 : (int)(o->name - 1 - o->target), o->target);
    o->parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o->parent_fd < 0) return vijp_fail(err, VIJP_EINVAL, "cannot open %s: %s", parent, strerror(errno));
    return 0;
}

/* The line of the lock file that names its holder, for a second run's
 * message (report_out_holder): whole, where it was cut at 120 characters. */
static char *holder_line;

const char *report_out_holder(void) { return holder_line; }

/* "pid N: COMMAND", its control characters as \xHH so that it stays one
 * line (an argument may hold a newline). */
static char *holder_text(const char *command)
{
    const char *c = command ? command : "vijp";
    char *t = vijp_alloc(4 * strlen(c) + 32), *p = t;
    p += sprintf(p, "pid %ld: ", (long)getpid());
    for (; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) p += sprintf(p, "\\x%02x", (unsigned char)*c);
        else *p++ = *c;
    *p = 0;
    return t;
}

/* The first line of the lock file fd (up to 1 MiB: a command line), or
 * NULL when it is empty. */
static char *read_holder(int fd)
{
    size_t cap = 256, n = 0;
    char *b = vijp_alloc(cap);
    for (ssize_t k; n < (1u << 20) && !memchr(b, '\n', n); n += (size_t)k) {
        if (n + 1 >= cap) b = vijp_realloc(b, cap *= 2);
        k = pread(fd, b + n, cap - 1 - n, (off_t)n);
        if (k <= 0) break;
    }
    b[n] = 0;
    b[strcspn(b, "\n")] = 0;
    if (*b) return b;
    vijp_free(b);
    return NULL;
}

/* flock on PARENT/.NAME.vijp-lock.  The file is removed by each holder as
 * it finishes (while it still holds it); a run that opened the file before
 * that and locks it afterwards holds a file nobody else sees, so it checks
 * that the file it locked is the one at the path, and tries again if not. */
static int lock(report_out *o, const char *command, vijp_error *err)
{
    snprintf(o->lock, sizeof o->lock, "%.*s/.%s" LOCK_SUFFIX, (int)(o->name - 1 - o->target), o->target, o->name);
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(o->lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) return vijp_fail(err, VIJP_EINVAL, "cannot create the lock file %s: %s", o->lock, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int e = errno;
            if (e == EWOULDBLOCK) vijp_free(holder_line), holder_line = read_holder(fd);
            close(fd);
            if (e != EWOULDBLOCK) return vijp_fail(err, VIJP_EIO, "cannot lock %s: %s", o->lock, strerror(e));
            return vijp_fail(err, VIJP_EINVAL, "another run is writing %s%s; wait for it to finish or choose another --out",
                             o->shown, holder_line ? "" : " (holder unknown)");
        }
        struct stat a, b;
        if (!fstat(fd, &a) && !stat(o->lock, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            o->lock_fd = fd;
            /* Who holds it, for the message of a second run. */
            char *who = holder_text(command);
            if (ftruncate(fd, 0) || dprintf(fd, "%s\n", who) < 0)
                fprintf(stderr, "vijp: warning: cannot write %s: %s\n", o->lock, strerror(errno));
            vijp_free(who);
            return 0;
        }
        close(fd);
    }
    return vijp_fail(err, VIJP_EIO, "cannot lock %s: it keeps being replaced", o->lock);
}

/* ".NAME" + suffix + a PID. */
static int leftover(const char *entry, const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return entry[0] == '.' && !strncmp(entry + 1, name, n) && !strncmp(entry + 1 + n, suffix, k) && entry[1 + n + k] &&
           strspn(entry + 1 + n + k, "0123456789") == strlen(entry + 1 + n + k);
}

/* We hold the lock, so whatever a run left beside DIR is stale: its run was
 * killed.  A fallback publish cut between its two renames (atomic.c) left no
 * DIR and the old report at .NAME.vijp-old-PID: it is renamed back first.
 * Then a staging folder that was never completed is removed whole (it holds
 * the new files and links to the old folder's); a completed staging folder
 * or an old generation is retired against DIR (atomic_tree.h), which removes
 * only what vijp wrote or what DIR holds too. */
static void clear_leftovers(report_out *o)
{
    int fd = dup(o->parent_fd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    struct stat st;
    for (int pass = 0; pass < 2; pass++) {
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d));) {
            const char *n = e->d_name;
            int old = leftover(n, o->name, OLD_SUFFIX), stage = leftover(n, o->name, STAGING_SUFFIX);
            if (pass == 0) {
                if (old && fstatat(o->parent_fd, o->name, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT &&
                    !renameat2(o->parent_fd, n, o->parent_fd, o->name, RENAME_NOREPLACE))
                    fprintf(stderr, "vijp: put back the report %s, which a run killed while replacing it had moved to %s\n",
                            o->shown, n);
                continue;
            }
            if (!old && !stage) continue;
            int h = openat(o->parent_fd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int incomplete = h >= 0 && !faccessat(h, INCOMPLETE_NAME, F_OK, AT_SYMLINK_NOFOLLOW);
            if (h >= 0) close(h);
            int t = openat(o->parent_fd, o->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (incomplete ? tree_remove(o->parent_fd, n) != 0 : tree_retire(o->parent_fd, n, t, atomic_step) != 0)
                fprintf(stderr, "vijp: warning: could not clear %s, left beside %s by a killed run\n", n, o->shown);
            if (t >= 0) close(t);
        }
    }
    closedir(d);
}

/* Whether the folder t (its fstat) is the working directory or holds it:
 * the working directory's chain of (st_dev, st_ino) up to /, through "..",
 * which also crosses mounts and needs no permission to read (O_PATH). */
static int holds_cwd(const struct stat *t)
{
    int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (int depth = 0; fd >= 0 && depth < PATH_MAX; depth++) {
        struct stat st, up;
        if (fstat(fd, &st)) break;
        if (st.st_dev == t->st_dev && st.st_ino == t->st_ino) {
            close(fd);
            return 1;
        }
        int p = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(fd);
        fd = p;
        if (fd >= 0 && (fstat(fd, &up) || (up.st_dev == st.st_dev && up.st_ino == st.st_ino))) break; /* / */
    }
    if (fd >= 0) close(fd);
    return 0;
}

/* What the run will replace, checked before the computation so that a long
 * study is not wasted (VIJP_EINVAL, naming the path; atomic.h says why):
 * DIR must not hold the working directory, nor be or hold a mount point,
 * and this run must be able to recreate DIR and what is carried over with
 * their owners (tree_check). */
static int check_target(report_out *o, vijp_error *err)
{
    int fd = openat(o->parent_fd, o->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0; /* a new folder */
        return vijp_fail(err, VIJP_EINVAL, "cannot read the output folder %s: %s", o->shown, strerror(errno));
    }
    struct stat st, up;
    int rc = 0;
    if (fstat(fd, &st) || fstat(o->parent_fd, &up))
        rc = vijp_fail(err, VIJP_EINVAL, "cannot read the output folder %s: %s", o->shown, strerror(errno));
    else if (holds_cwd(&st))
        rc = vijp_fail(err, VIJP_EINVAL, "--out %s%s%s holds the current working directory, which replacing it would "
                       "leave deleted; run vijp from outside it, or choose another --out", o->shown,
                       strcmp(o->shown, o->target) ? ", " : "", strcmp(o->shown, o->target) ? o->target : "");
    else if (tree_mount_point(o->parent_fd, o->name, &st, up.st_dev))
        rc = vijp_fail(err, VIJP_EINVAL, "%s is a mount point, which a report cannot replace: choose a folder inside it "
                       "as --out", o->shown);
    else {
        name_list vijps;
        manifest_read(fd, &vijps);
        rc = tree_check(fd, &st, &up, &vijps, o->shown, err);
        name_list_free(&vijps);
    }
    close(fd);
    return rc;
}

int report_out_open(report_out *o, const char *dir, const char *command, vijp_error *err)
{
    *o = (report_out){.shown = dir, .parent_fd = -1, .stage_fd = -1, .lock_fd = -1};
    int rc = resolve(o, dir, err);
    if (!rc) rc = lock(o, command, err);
    if (rc) {
        report_out_close(o);
        return rc;
    }
    atomic_arm(o);
    clear_leftovers(o); /* first: it may put DIR back */
    if ((rc = check_target(o, err))) report_out_close(o);
    return rc;
}

void report_out_close(report_out *o)
{
    if (o->lock_fd >= 0) {
        atomic_disarm();
        unlink(o->lock); /* while we hold it: see lock() */
        close(o->lock_fd);
        o->lock_fd = -1;
    }
    if (o->parent_fd >= 0) close(o->parent_fd), o->parent_fd = -1;
}
