/* Whole-file reads and atomic writes (file.h). */
#include "file.h"
#include "vijp/array_io.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int aio_bad(vijp_error *err, const char *name, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vijp_fail(err, VIJP_EINVAL, "%s: %s", name, what);
}

void vijp_array_shape_str(size_t ndim, const size_t *shape, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (size_t k = 0; k < ndim && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%zu", k ? ", " : "", shape[k]);
    if (used < size) snprintf(buf + used, size - used, "%s)", ndim == 1 ? "," : "");
}

/* What a file that vijp does not read is, for the message. */
static const char *not_a_file(mode_t m)
{
    return S_ISDIR(m) ? "is a folder, not a file" : S_ISCHR(m) ? "is a character device, not a file"
         : S_ISBLK(m) ? "is a block device, not a file" : S_ISFIFO(m) ? "is a pipe, not a file (vijp reads an input more "
         "than once: write it to a file)" : S_ISSOCK(m) ? "is a socket, not a file" : "is not a regular file";
}

/* Regular files only: a device reads without end (/dev/zero) or blocks (a
 * terminal), and a pipe gives its bytes once, to the first of the several
 * reads of an input (its check, then its use), the next one then waiting
 * forever for a writer.  The kind is checked before the file is opened
 * (opening some devices acts on them), and again on what was opened (the
 * name may have changed in between). */
int vijp_input_read(const char *path, unsigned char **buf, size_t *len, vijp_error *err)
{
    *buf = NULL, *len = 0;
    struct stat st;
    if (stat(path, &st)) return vijp_fail(err, VIJP_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return vijp_fail(err, VIJP_EINVAL, "%s: %s", path, not_a_file(st.st_mode));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* not blocking on a FIFO put there meanwhile */
    if (fd < 0) return vijp_fail(err, VIJP_EIO, "%s: cannot open: %s", path, strerror(errno));
    int e = fstat(fd, &st) ? errno : 0;
    if (e || !S_ISREG(st.st_mode)) {
        close(fd);
        return e ? vijp_fail(err, VIJP_EIO, "%s: cannot read: %s", path, strerror(e))
                 : vijp_fail(err, VIJP_EINVAL, "%s: %s", path, not_a_file(st.st_mode));
    }
    /* The size is a hint (a file may change; /proc's say 0): read to EOF.
     * Room for one byte more than the size, so the read that finds EOF does
     * not first double the buffer, and one for the NUL. */
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 2 : 4096, n = 0;
    unsigned char *b = vijp_alloc(cap);
    for (;;) {
        if (n + 1 >= cap) b = vijp_realloc(b, cap *= 2);
        ssize_t k = read(fd, b + n, cap - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            e = errno;
            close(fd), vijp_free(b);
            return vijp_fail(err, VIJP_EIO, "%s: cannot read: %s", path, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    close(fd);
    b[n] = 0;
    *buf = b, *len = n;
    return 0;
}

void aio_put(aio_out *o, const void *p, size_t n)
{
    const char *c = p;
    while (!o->err && n) {
        ssize_t k = write(o->fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) o->err = errno;
        else if (k == 0) o->err = EIO;
        else c += k, n -= (size_t)k;
    }
}

/* Write a temporary file in path's own folder (rename is atomic only within
 * one file system), flush it to disk, rename it over path, then flush the
 * folder so the rename itself survives a crash.  The temporaries share the
 * report writer's prefix (src/report/atomic.h), whose folder preparation
 * removes the ones a killed run left. */
int aio_write_atomic(const char *path, void (*emit)(aio_out *o, const void *ctx), const void *ctx, vijp_error *err)
{
    char dir[4096], tmp[4200];
    const char *slash = strrchr(path, '/');
    if (!*path || strlen(path) >= sizeof dir) return vijp_fail(err, VIJP_EINVAL, "bad output file name '%s'", path);
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (slash && !slash[1]) return vijp_fail(err, VIJP_EINVAL, "bad output file name '%s' (a folder)", path);
    snprintf(tmp, sizeof tmp, "%s/.vijp-tmp-XXXXXX", dir);
    int fd = mkstemp(tmp);
    if (fd < 0) return vijp_fail(err, VIJP_EIO, "cannot write %s: %s", path, strerror(errno));
    mode_t mask = umask(0); /* mkstemp makes 0600; these are ordinary files */
    umask(mask);
    aio_out o = {fd, 0};
    if (fchmod(fd, 0666 & ~mask)) o.err = errno;
    emit(&o, ctx);
    if (!o.err && fsync(fd)) o.err = errno;
    if (close(fd) && !o.err) o.err = errno;
    if (!o.err && rename(tmp, path)) o.err = errno;
    if (o.err) {
        unlink(tmp);
        return vijp_fail(err, VIJP_EIO, "writing %s: %s", path, strerror(o.err));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* best effort: some file systems refuse to fsync a folder */
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}
