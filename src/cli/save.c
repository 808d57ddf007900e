/* --save DIR of grad and eval: a set of .npy files, written all or none.
 * Each array is first written under a hidden name beside its own
 * (DIR/.NAME.vijp-save-PID, itself atomically by vijp_npy_write); only
 * when every one is written are they renamed to their names.  A failed
 * write (a full disk, a file-size limit) removes the hidden files and
 * leaves DIR's earlier files as they were.  The renames themselves fail
 * only where a NAME is a folder, which cli_save_check refuses before the
 * run computes anything. */
#include "cli.h"
#include "vijp/array_io.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int path_of(char *path, size_t size, const char *dir, const char *prefix, const char *name, const char *suffix,
                   vijp_error *err)
{
    if ((size_t)snprintf(path, size, "%s/%s%s%s", dir, prefix, name, suffix) < size) return 0;
    return vijp_fail(err, VIJP_EINVAL, "--save: path too long: %s/%s", dir, name);
}

int cli_save_check(const char *dir, const cli_save_item *items, size_t n, vijp_error *err)
{
    char path[4096];
    struct stat st;
    int rc = cli_check_dir(dir, err);
    for (size_t k = 0; !rc && k < n; k++) {
        if ((rc = path_of(path, sizeof path, dir, "", items[k].name, "", err))) break;
        if (!lstat(path, &st) && S_ISDIR(st.st_mode))
            rc = vijp_fail(err, VIJP_EINVAL, "--save: %s is a folder, which the file %s cannot replace", path,
                           items[k].name);
    }
    return rc;
}

/* The array as [cols, rows] (a column per sample: C order, a row each), or
 * 1-D, into path. */
static int write_one(const char *path, const cli_save_item *it, vijp_error *err)
{
    const vijp_mat *a = it->m;
    size_t n = vijp_mat_len(a), shape[2] = {a->cols, a->rows};
    if (it->one_d) shape[0] = n;
    double *d = vijp_alloc_array(n ? n : 1, sizeof *d);
    for (size_t k = 0; k < n; k++) d[k] = vijp_mat_get_d(a, k);
    int rc = vijp_npy_write(path, it->one_d ? 1 : 2, shape, d, err);
    free(d);
    return rc;
}

int cli_save_set(const char *dir, const cli_save_item *items, size_t n, vijp_error *err)
{
    /* Past a file-size limit (ulimit -f) a write fails with EFBIG, named,
     * and the set is removed, instead of SIGXFSZ killing the run half way. */
    struct sigaction xfsz;
    if (!sigaction(SIGXFSZ, NULL, &xfsz) && xfsz.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
    char suffix[48], tmp[4096], path[4096];
    snprintf(suffix, sizeof suffix, ".vijp-save-%ld", (long)getpid());
    int rc = cli_prepare_dir(dir, err); /* made now, by a run that has its results */
    for (size_t k = 0; !rc && k < n; k++)
        if (!(rc = path_of(tmp, sizeof tmp, dir, ".", items[k].name, suffix, err)) && (rc = write_one(tmp, &items[k], err))) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg); /* it names the hidden file: name the user's */
            vijp_fail(err, rc, "%s/%s not written, nor the rest of the set (%s)", dir, items[k].name, why);
        }
    for (size_t k = 0; k < n; k++) {
        if (path_of(tmp, sizeof tmp, dir, ".", items[k].name, suffix, NULL)) continue;
        if (!rc && !path_of(path, sizeof path, dir, "", items[k].name, "", err) && rename(tmp, path))
            rc = vijp_fail(err, VIJP_EIO, "cannot write %s: %s", path, strerror(errno));
        if (rc) unlink(tmp); /* this one, and those after a failure: none is left hidden */
    }
    return rc;
}
