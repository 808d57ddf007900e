/* File-tree operations of the report writer (see atomic_tree.h). */
#include "atomic_tree.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dots(const char *n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void name_list_add(name_list *l, const char *name)
{
    l->v = vijp_realloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n++] = vijp_strdup(name);
    l->sorted = 0;
}

int name_list_has(name_list *l, const char *name)
{
    if (!l->n) return 0;
    if (!l->sorted) qsort(l->v, l->n, sizeof *l->v, cmp_name), l->sorted = 1;
    return bsearch(&name, l->v, l->n, sizeof *l->v, cmp_name) != NULL;
}

void name_list_free(name_list *l)
{
    for (size_t k = 0; k < l->n; k++) vijp_free(l->v[k]);
    vijp_free(l->v);
    *l = (name_list){0};
}

void manifest_read(int dirfd, name_list *out)
{
    *out = (name_list){0};
    int fd = openat(dirfd, MANIFEST_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    size_t n = 0, cap = (size_t)st.st_size;
    char *buf = vijp_alloc(cap + 1);
    for (ssize_t k; n < cap && (k = read(fd, buf + n, cap - n)) > 0;) n += (size_t)k;
    close(fd);
    buf[n] = 0;
    /* Comment lines start with '#'; a name is never a path. */
    for (char *line = buf, *end; *line; line = end + !!*end) {
        end = line + strcspn(line, "\n");
        char c = *end;
        *end = 0;
        if (*line && *line != '#' && !strchr(line, '/') && !dots(line)) name_list_add(out, line);
        *end = c;
    }
    vijp_free(buf);
}

int tree_remove(int dirfd, const char *name)
{
    if (!unlinkat(dirfd, name, 0) || errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return -1; /* Linux: EISDIR for a folder */
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    /* getdents64 rather than readdir, which allocates.  Entries removed
     * while reading are not a problem: each one left is returned once. */
    char buf[2048] __attribute__((aligned(8)));
    for (ssize_t n; (n = getdents64(fd, buf, sizeof buf)) > 0;)
        for (ssize_t off = 0; off < n;) {
            struct dirent64 *e = (struct dirent64 *)(buf + off);
            off += e->d_reclen;
            if (!dots(e->d_name)) tree_remove(fd, e->d_name);
        }
    close(fd);
    return unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* A copy of a regular file, for when the file system refuses a hard link
 * (fs.protected_hardlinks for a file we do not own, too many links): same
 * bytes, mode and times, flushed to disk before the exchange. */
static int copy_file(int from, int to, const char *name, const struct stat *st)
{
    int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = -1;
    int out = in < 0 ? -1 : openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out >= 0) {
        char buf[1 << 16];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0)
            for (ssize_t done = 0, w; done < n; done += w)
                if ((w = write(out, buf + done, (size_t)(n - done))) < 0) {
                    n = -1;
                    goto done;
                }
    done:;
        const struct timespec times[2] = {st->st_atim, st->st_mtim};
        rc = n == 0 && !fchmod(out, st->st_mode & 07777) && !futimens(out, times) && !fsync(out) ? 0 : -1;
    }
    int e = errno;
    if (out >= 0 && close(out)) rc = -1, e = errno;
    if (in >= 0) close(in);
    errno = e;
    return rc;
}

static int carry_one(int from, int to, const char *name, const struct stat *st, const char *shown, tree_step step,
                     vijp_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", shown, name);
    if (S_ISREG(st->st_mode)) {
        if (linkat(from, name, to, name, 0) && copy_file(from, to, name, st))
            return vijp_fail(err, VIJP_EIO, "cannot carry %s over into the new report: %s", path, strerror(errno));
    } else if (S_ISLNK(st->st_mode)) {
        char dest[PATH_MAX];
        ssize_t n = readlinkat(from, name, dest, sizeof dest - 1);
        if (n >= 0) dest[n] = 0;
        if (n < 0 || symlinkat(dest, to, name))
            return vijp_fail(err, VIJP_EIO, "cannot carry the link %s over into the new report: %s", path, strerror(errno));
    } else if (S_ISDIR(st->st_mode)) {
        /* Writable while it is filled; its own mode once full. */
        if (mkdirat(to, name, 0700))
            return vijp_fail(err, VIJP_EIO, "cannot carry the folder %s over into the new report: %s", path, strerror(errno));
        int f = openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int t = openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = f < 0 || t < 0 ? vijp_fail(err, VIJP_EIO, "cannot open the folder %s: %s", path, strerror(errno))
                                : tree_carry(f, t, NULL, NULL, 0, path, step, err);
        if (!rc && (fchmod(t, st->st_mode & 07777) || fsync(t)))
            rc = vijp_fail(err, VIJP_EIO, "cannot carry the folder %s over into the new report: %s", path, strerror(errno));
        if (f >= 0) close(f);
        if (t >= 0) close(t);
        if (rc) return rc;
    } else {
        return vijp_fail(err, VIJP_EIO, "cannot carry %s over into the new report: a FIFO, socket or device; move it "
                         "out of the report folder", path);
    }
    return step() ? vijp_fail(err, VIJP_EIO, "interrupted") : 0;
}

int tree_carry(int from, int to, name_list *vijps, name_list *ours, int legacy, const char *shown, tree_step step,
               vijp_error *err)
{
    int fd = dup(from);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        return vijp_fail(err, VIJP_EIO, "cannot read the folder %s: %s", shown, strerror(errno));
    }
    rewinddir(d); /* dup shares the position: start from the top */
    int rc = 0;
    for (struct dirent *e; !rc && (errno = 0, e = readdir(d));) {
        const char *name = e->d_name;
        struct stat st;
        if (dots(name)) continue;
        if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW)) {
            if (errno == ENOENT) continue; /* removed meanwhile */
            rc = vijp_fail(err, VIJP_EIO, "cannot read %s/%s: %s", shown, name, strerror(errno));
            break;
        }
        if (vijps && (!strcmp(name, MANIFEST_NAME) || (S_ISREG(st.st_mode) && name_list_has(vijps, name)))) continue;
        if (ours && name_list_has(ours, name)) {
            if (legacy && !S_ISDIR(st.st_mode)) continue;
            rc = vijp_fail(err, VIJP_EINVAL,
                           "%s/%s is not a file of an earlier vijp report (it is not listed in %s/%s), and the new "
                           "report has a file of that name: move it away or choose another --out",
                           shown, name, shown, MANIFEST_NAME);
            break;
        }
        rc = carry_one(from, to, name, &st, shown, step, err);
    }
    if (!rc && errno) rc = vijp_fail(err, VIJP_EIO, "cannot read the folder %s: %s", shown, strerror(errno));
    closedir(d);
    return rc;
}

/* tree_retire in one folder (hfd) against its counterpart in the target
 * (tfd, -1 if none); vijps: the manifest (top level only). */
static int retire_dir(int hfd, int tfd, name_list *vijps, tree_step step)
{
    int fd = dup(hfd), kept = 0;
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        return 1;
    }
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        struct stat hs, ts;
        if (dots(name) || (vijps && !strcmp(name, MANIFEST_NAME)) || fstatat(hfd, name, &hs, AT_SYMLINK_NOFOLLOW))
            continue;
        int in_target = tfd >= 0 && !fstatat(tfd, name, &ts, AT_SYMLINK_NOFOLLOW);
        int gone;
        if ((vijps && S_ISREG(hs.st_mode) && name_list_has(vijps, name)) ||
            (vijps && (!strcmp(name, INCOMPLETE_NAME) || !strncmp(name, SCRATCH_PREFIX, strlen(SCRATCH_PREFIX)))))
            gone = !unlinkat(hfd, name, 0);
        else if (in_target && S_ISDIR(hs.st_mode) && S_ISDIR(ts.st_mode)) {
            int h = openat(hfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int t = openat(tfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            gone = h >= 0 && t >= 0 && !retire_dir(h, t, NULL, step) && !unlinkat(hfd, name, AT_REMOVEDIR);
            if (h >= 0) close(h);
            if (t >= 0) close(t);
        } else if (in_target && !S_ISDIR(hs.st_mode)) /* carried over: the target holds the same file */
            gone = !unlinkat(hfd, name, 0);
        else /* not carried (it came after the carry): it moves into the target */
            gone = !in_target && tfd >= 0 && !renameat2(hfd, name, tfd, name, RENAME_NOREPLACE);
        if (gone) step();
        kept |= !gone;
    }
    closedir(d);
    return kept;
}

int tree_retire(int parent_fd, const char *name, int target_fd, tree_step step)
{
    int hfd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (hfd < 0) return errno != ENOENT;
    name_list vijps;
    manifest_read(hfd, &vijps);
    int kept = retire_dir(hfd, target_fd, &vijps, step);
    name_list_free(&vijps);
    if (!kept && !unlinkat(hfd, MANIFEST_NAME, 0)) step();
    close(hfd);
    if (kept || unlinkat(parent_fd, name, AT_REMOVEDIR)) return 1;
    step();
    return 0;
}

int report_mkdir_p(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0777) && errno != EEXIST) return -1; /* path stays cut at the component that failed */
        *p = c;
        if (!c) return 0;
    }
}
