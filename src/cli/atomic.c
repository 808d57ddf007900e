#include "atomic.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int atomic_tmp(const char *dir, char *path, size_t size, vijp_error *err)
{
    if ((size_t)snprintf(path, size, "%s/" ATOMIC_TMP_PREFIX "XXXXXX", dir) >= size)
        return vijp_fail(err, VIJP_EINVAL, "path too long: %s", dir);
    int fd = mkstemp(path);
    if (fd < 0) return vijp_fail(err, VIJP_EINVAL, "cannot create a file in %s: %s", dir, strerror(errno));
    mode_t mask = umask(0); /* mkstemp makes 0600; report files are ordinary files */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    return 0;
}

int atomic_commit(const char *tmp, const char *dir, const char *name, int ok, vijp_error *err)
{
    char final[4096];
    if (!ok) {
        unlink(tmp);
        return vijp_fail(err, VIJP_EINVAL, "writing %s/%s failed", dir, name);
    }
    snprintf(final, sizeof final, "%s/%s", dir, name);
    if (rename(tmp, final)) {
        int e = errno;
        unlink(tmp);
        return vijp_fail(err, VIJP_EINVAL, "cannot rename to %s: %s", final, strerror(e));
    }
    return 0;
}

int atomic_stage(const char *dir, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                 char *tmp, size_t size, vijp_error *err)
{
    int rc = atomic_tmp(dir, tmp, size, err);
    if (rc) return rc;
    FILE *f = fopen(tmp, "w");
    int ok = f && fill(f, ctx) == 0;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f)) ok = 0;
    if (ok) return 0;
    unlink(tmp);
    return vijp_fail(err, VIJP_EINVAL, "writing %s/%s failed", dir, name);
}

int atomic_write(const char *dir, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                 vijp_error *err)
{
    char tmp[4096];
    int rc = atomic_stage(dir, name, fill, ctx, tmp, sizeof tmp, err);
    return rc ? rc : atomic_commit(tmp, dir, name, 1, err);
}

int atomic_prepare_dir(const char *dir, vijp_error *err)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path - 64 || !*dir)
        return vijp_fail(err, VIJP_EINVAL, "bad output folder '%s'", dir);
    for (char *p = path + 1;; p++) { /* mkdir -p */
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0777) && errno != EEXIST)
            return vijp_fail(err, VIJP_EINVAL, "cannot create output folder %s: %s", path, strerror(errno));
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return vijp_fail(err, VIJP_EINVAL, "output %s is not a folder", dir);
    char tmp[4096];
    int rc = atomic_tmp(dir, tmp, sizeof tmp, err);
    if (rc) return rc;
    unlink(tmp);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, ATOMIC_TMP_PREFIX, strlen(ATOMIC_TMP_PREFIX))) {
            snprintf(tmp, sizeof tmp, "%s/%s", dir, e->d_name);
            unlink(tmp);
        }
    if (d) closedir(d);
    return 0;
}
