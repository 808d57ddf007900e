/* File-tree operations of the report writer (see atomic_tree.h). */
#include "atomic_tree.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

int tree_mount_point(int dirfd, const char *name, const struct stat *st, dev_t dev)
{
    if (st->st_dev != dev) return 1;
    struct statx sx;
    return !statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) &&
           (sx.stx_attributes_mask & sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A folder being emptied (a staging folder, an old generation, and their
 * subfolders) made writable and searchable by its owner, where it was not:
 * its entries could not be removed otherwise (not as its owner: as root the
 * mode does not matter).  It goes, or stays only as what could not be
 * moved, so its mode is not kept.  fstat and fchmod only (on_fatal). */
static void owner_may_empty(int fd)
{
    struct stat st;
    if (!fstat(fd, &st) && (st.st_mode & S_IRWXU) != S_IRWXU) (void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
}

int tree_remove(int dirfd, const char *name)
{
    if (!unlinkat(dirfd, name, 0) || errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return -1; /* Linux: EISDIR for a folder */
    struct stat up, st;
    if (fstat(dirfd, &up) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) || tree_mount_point(dirfd, name, &st, up.st_dev))
        return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    owner_may_empty(fd);
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

/* ---- owners ---- */

/* Whether this process has capability cap (CAP_CHOWN, CAP_FOWNER) in its
 * effective set (root, where capget is not there). */
static int has_cap(int cap)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &h, d)) return geteuid() == 0;
    return (int)((d[cap / 32].effective >> (cap % 32)) & 1);
}

static int in_group(gid_t gid)
{
    if (gid == getegid()) return 1;
    int n = getgroups(0, NULL), found = 0;
    if (n <= 0) return 0;
    gid_t *g = vijp_alloc_array((size_t)n, sizeof *g);
    n = getgroups(n, g);
    for (int k = 0; k < n && !found; k++) found = g[k] == gid;
    vijp_free(g);
    return found;
}

/* Whether this run can give an entry it creates in a copy of folder in the
 * owner and group of st: as root (CAP_CHOWN) always; otherwise only its own
 * user, and a group it is in or that the entry inherits (a set-group-ID
 * folder gives its group to what is created in it). */
static int can_give(const struct stat *st, const struct stat *in)
{
    if (has_cap(CAP_CHOWN)) return 1;
    return st->st_uid == geteuid() &&
           (in_group(st->st_gid) || ((in->st_mode & S_ISGID) && in->st_gid == st->st_gid));
}

/* Whether the kernel refuses this run a hard link to the file name under
 * dirfd (st), so that tree_carry copies it: fs.protected_hardlinks (on
 * unless /proc says 0) lets only its owner, CAP_FOWNER, or a user who may
 * read and write it (a file that is neither set-user-ID nor set-group-ID
 * executable) link to it. */
static int link_refused(int dirfd, const char *name, const struct stat *st)
{
    if (st->st_uid == geteuid() || has_cap(CAP_FOWNER)) return 0;
    int special = (st->st_mode & S_ISUID) || (st->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP);
    if (!special && !faccessat(dirfd, name, R_OK | W_OK, AT_EACCESS)) return 0;
    char c = '1';
    int fd = open("/proc/sys/fs/protected_hardlinks", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && read(fd, &c, 1) != 1) c = '1';
    if (fd >= 0) close(fd);
    return c != '0';
}

int tree_give(int fd, int dirfd, const char *name, const struct stat *old, mode_t extra)
{
    struct stat now;
    int link = fd < 0;
    mode_t mode = (old->st_mode & 07777) | extra;
#define NOW() (link ? fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) : fstat(fd, &now))
    if (NOW()) return -1;
    /* The owner first: changing it may clear the set-ID bits, which the
     * mode then sets again. */
    if ((now.st_uid != old->st_uid || now.st_gid != old->st_gid) &&
        (link ? fchownat(dirfd, name, old->st_uid, old->st_gid, AT_SYMLINK_NOFOLLOW) : fchown(fd, old->st_uid, old->st_gid)))
        return -1;
    if (!link && (NOW() || ((now.st_mode & 07777) != mode && fchmod(fd, mode)))) return -1;
    /* Read back: an unprivileged fchmod drops the set-group-ID bit of a
     * group the run is not in, without an error. */
    if (NOW()) return -1;
#undef NOW
    if (now.st_uid != old->st_uid || now.st_gid != old->st_gid || (!link && (now.st_mode & 07777) != mode)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* "cannot keep the owner (uid U, group G) and mode M of PATH in the new
 * report: why". */
static int give_failed(vijp_error *err, const char *path, const struct stat *old)
{
    return vijp_fail(err, VIJP_EIO, "cannot keep the owner (uid %u, group %u) and mode %04o of %s in the new report: %s",
                     (unsigned)old->st_uid, (unsigned)old->st_gid, (unsigned)(old->st_mode & 07777), path, strerror(errno));
}

/* ---- the check before the computation ---- */

int tree_check(int fd, const struct stat *st, const struct stat *in, name_list *vijps, const char *shown, vijp_error *err)
{
    if (!can_give(st, in)) {
        if (st->st_uid != geteuid() && S_ISREG(st->st_mode))
            return vijp_fail(err, VIJP_EINVAL, "%s belongs to uid %u: this run (uid %u) may not hard-link it "
                             "(fs.protected_hardlinks), and a copy could not keep its owner; run vijp as its owner or as "
                             "root, or move it out", shown, (unsigned)st->st_uid, (unsigned)geteuid());
        if (st->st_uid != geteuid())
            return vijp_fail(err, VIJP_EINVAL, "%s belongs to uid %u, which this run (uid %u) cannot give its copy in the "
                             "new report; run vijp as its owner or as root, or move it out", shown, (unsigned)st->st_uid,
                             (unsigned)geteuid());
        return vijp_fail(err, VIJP_EINVAL, "%s has group %u, which this run (uid %u) is not in and cannot give its copy in "
                         "the new report; run vijp as its owner in that group or as root, or move it out", shown,
                         (unsigned)st->st_gid, (unsigned)geteuid());
    }
    if (!S_ISDIR(st->st_mode)) return 0;
    int dfd = dup(fd);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0) close(dfd);
        return vijp_fail(err, VIJP_EINVAL, "cannot read %s, which the new report must carry over: %s", shown, strerror(errno));
    }
    rewinddir(d);
    int rc = 0;
    for (struct dirent *e; !rc && (errno = 0, e = readdir(d));) {
        const char *name = e->d_name;
        char path[PATH_MAX];
        struct stat est;
        if (dots(name) || fstatat(fd, name, &est, AT_SYMLINK_NOFOLLOW)) continue;
        snprintf(path, sizeof path, "%s/%s", shown, name);
        if (tree_mount_point(fd, name, &est, st->st_dev)) {
            rc = vijp_fail(err, VIJP_EINVAL, "%s is a mount point: a report replaces its folder and cannot carry a "
                           "mounted file system over; unmount it or choose another --out", path);
            break;
        }
        if (vijps && (!strcmp(name, MANIFEST_NAME) || (S_ISREG(est.st_mode) && name_list_has(vijps, name)))) continue;
        if (S_ISDIR(est.st_mode)) {
            int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? vijp_fail(err, VIJP_EINVAL, "cannot read %s, which the new report must carry over: %s", path,
                                     strerror(errno))
                         : tree_check(sub, &est, st, NULL, path, err);
            if (sub >= 0) close(sub);
        } else if (S_ISLNK(est.st_mode) || (S_ISREG(est.st_mode) && link_refused(fd, name, &est))) {
            rc = tree_check(-1, &est, st, NULL, path, err);
        } else if (!S_ISREG(est.st_mode)) {
            rc = vijp_fail(err, VIJP_EINVAL, "%s is a FIFO, socket or device, which a report cannot carry over: move it "
                           "out of the report folder", path);
        }
    }
    if (!rc && errno) rc = vijp_fail(err, VIJP_EINVAL, "cannot read %s: %s", shown, strerror(errno));
    closedir(d);
    return rc;
}

/* ---- carrying over ---- */

/* A copy of a regular file, for when the file system refuses a hard link
 * (fs.protected_hardlinks for a file we do not own, too many links): same
 * bytes, owner, group, mode and times, flushed to disk before the
 * exchange. */
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
        rc = n == 0 && !tree_give(out, -1, NULL, st, 0) && !futimens(out, times) && !fsync(out) ? 0 : -1;
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
            return errno == EPERM ? give_failed(err, path, st)
                                  : vijp_fail(err, VIJP_EIO, "cannot carry %s over into the new report: %s", path, strerror(errno));
    } else if (S_ISLNK(st->st_mode)) {
        char dest[PATH_MAX];
        ssize_t n = readlinkat(from, name, dest, sizeof dest - 1);
        if (n >= 0) dest[n] = 0;
        if (n < 0 || symlinkat(dest, to, name))
            return vijp_fail(err, VIJP_EIO, "cannot carry the link %s over into the new report: %s", path, strerror(errno));
        if (tree_give(-1, to, name, st, 0)) return give_failed(err, path, st);
    } else if (S_ISDIR(st->st_mode)) {
        /* Its owner and group at once (what is created in it may inherit
         * the group), writable by its owner while it is filled, its own
         * mode once full. */
        if (mkdirat(to, name, 0700))
            return vijp_fail(err, VIJP_EIO, "cannot carry the folder %s over into the new report: %s", path, strerror(errno));
        int f = openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int t = openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = f < 0 || t < 0 ? vijp_fail(err, VIJP_EIO, "cannot open the folder %s: %s", path, strerror(errno))
                 : tree_give(t, -1, NULL, st, S_IRWXU) ? give_failed(err, path, st)
                                                       : tree_carry(f, t, NULL, NULL, 0, path, step, err);
        if (!rc && tree_give(t, -1, NULL, st, 0)) rc = give_failed(err, path, st);
        if (!rc && fsync(t))
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
    struct stat up;
    int rc = fstat(from, &up) ? vijp_fail(err, VIJP_EIO, "cannot read the folder %s: %s", shown, strerror(errno)) : 0;
    for (struct dirent *e; !rc && (errno = 0, e = readdir(d));) {
        const char *name = e->d_name;
        struct stat st;
        if (dots(name)) continue;
        if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW)) {
            if (errno == ENOENT) continue; /* removed meanwhile */
            rc = vijp_fail(err, VIJP_EIO, "cannot read %s/%s: %s", shown, name, strerror(errno));
            break;
        }
        /* Mounted since the check of report_out_open: its files would be
         * copied, and the old generation's removal would empty it. */
        if (tree_mount_point(from, name, &st, up.st_dev)) {
            rc = vijp_fail(err, VIJP_EINVAL, "%s/%s is a mount point: a report replaces its folder and cannot carry a "
                           "mounted file system over; unmount it or choose another --out", shown, name);
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
    owner_may_empty(hfd);
    struct stat up;
    if (fstat(hfd, &up)) up.st_dev = (dev_t)-1; /* every entry then counts as a mount point: nothing is removed */
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        struct stat hs, ts;
        if (dots(name) || (vijps && !strcmp(name, MANIFEST_NAME)) || fstatat(hfd, name, &hs, AT_SYMLINK_NOFOLLOW))
            continue;
        if (tree_mount_point(hfd, name, &hs, up.st_dev)) { /* never entered, never removed */
            kept = 1;
            continue;
        }
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
