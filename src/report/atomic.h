/* A report folder (vijp drift/report --out DIR) replaced all or nothing.
 *
 * A run writes its whole report into a staging folder beside DIR
 * (PARENT/.NAME.vijp-staging-PID), flushes every file and the folder to
 * disk, carries over what the old DIR holds that vijp did not write (hard
 * links, see atomic_tree.h), and only then swaps the two folders in one
 * step: renameat2(RENAME_EXCHANGE), a plain rename when DIR does not exist
 * yet.  The old generation, now at the staging name, is then removed: the
 * files its manifest (.vijp-manifest) lists, and the links to what was
 * carried over.  A kill at any instant therefore leaves DIR holding either
 * the whole old report or the whole new one; what it leaves beside DIR is
 * cleared by the next run.
 *
 * Replaced, not written in place (a choice: writing into the existing folder
 * would give up the all-or-nothing swap): DIR and every folder carried over
 * are new folders, with new inode numbers, so each new folder is given the
 * owner, group and mode of the old one (fchown, then fchmod, read back:
 * atomic_tree.h's tree_give), as are recreated links and the copies of
 * files the file system refuses to link; where this run cannot (not root,
 * and not the owner in that group), the run fails rather than hand a user's
 * folder to whoever ran vijp.  The files carried over are hard links, the
 * same inodes, owners and modes; the report's own files belong to whoever
 * ran it.
 *
 * report_out_open refuses (VIJP_EINVAL: exit 2, before the computation,
 * nothing written; atomic_open.c's check_target, atomic_tree.h's
 * tree_check) a DIR that
 *   - is or holds the working directory (--out ., .., ../DIR from inside):
 *     the swap would leave the process, and the shell that started it, in
 *     the old folder, deleted (the (st_dev, st_ino) chain from "." up to /);
 *     another process's working directory inside DIR is not seen, and ends
 *     in the deleted folder too;
 *   - is or holds a mount point (an st_dev other than its folder's, or
 *     statx's STATX_ATTR_MOUNT_ROOT for a bind mount of the same file
 *     system, Linux 5.8 on): a mount point cannot be renamed (DIR itself),
 *     and one inside DIR would be carried over as copies of its files, which
 *     the removal of the old generation then deletes from the mount;
 *   - holds what cannot be carried over with its owner (above), a FIFO, a
 *     socket or a device, or a folder this run cannot read.
 * A mount made inside DIR during the computation is refused when the new
 * generation is published (VIJP_EINVAL from report_out_commit: DIR is kept,
 * the run fails), and the removal of a generation never enters nor removes a
 * mount point.
 *
 * One run at a time per folder: the run holds flock(LOCK_EX) on
 * PARENT/.NAME.vijp-lock (beside DIR, since DIR itself is swapped) from
 * report_out_open to report_out_close; the file holds the holder's PID and
 * command, for the message a second run prints.
 *
 * SIGINT, SIGTERM and SIGHUP remove the staging folder and end the run by the
 * same signal (a shell shows 130, 143, 129); running out of memory removes it
 * too (vijp_memory_on_fatal). */
#ifndef VIJP_CLI_ATOMIC_H
#define VIJP_CLI_ATOMIC_H

#include <limits.h>
#include <stdio.h>
#include "vijp/error.h"

/* A set of file names (the manifest of a generation). */
typedef struct {
    char **v;
    size_t n;
    int sorted;
} name_list;

typedef struct report_out_s {
    const char *shown;      /* DIR as the user wrote it: messages */
    char target[PATH_MAX];  /* DIR resolved: absolute, no symbolic link */
    const char *name;       /* its last component (inside target) */
    char staging[PATH_MAX]; /* the folder the new generation is written in */
    char lock[PATH_MAX];
    int parent_fd, stage_fd, lock_fd;
    name_list written; /* the new generation's files, for its manifest */
} report_out;

/* Before the computation: resolve DIR (mkdir -p its parent), take the lock,
 * clear what killed runs left beside DIR, and check what the run will
 * replace (above).  Fails (VIJP_EINVAL or VIJP_EIO, a message naming the
 * path) when DIR cannot be a report folder, is refused, or another run holds
 * it; nothing is left behind then.  command: what the lock file says holds
 * it. */
VIJP_MUST_CHECK int report_out_open(report_out *o, const char *dir, const char *command, vijp_error *err);
/* After report_out_open refused a folder that another run holds: that
 * run's "pid N: COMMAND" from the lock file, whole (the message in err has
 * room for a short one only); NULL if none was read.  Valid until the next
 * report_out_open. */
const char *report_out_holder(void);
/* Start the new generation: an empty staging folder. */
VIJP_MUST_CHECK int report_out_begin(report_out *o, vijp_error *err);
/* One file of the report: what fill writes (fill returns 0 on success),
 * flushed to disk. */
VIJP_MUST_CHECK int report_out_write(report_out *o, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                     vijp_error *err);
/* Where a file written by another program (gnuplot) goes; report_out_add
 * then flushes it to disk and lists it, once it is complete. */
void report_out_path(const report_out *o, const char *name, char *path, size_t size);
VIJP_MUST_CHECK int report_out_add(report_out *o, const char *name, vijp_error *err);
/* A scratch file for another program to read (path receives it): in the
 * staging folder, never part of the report; remove it with unlink. */
VIJP_MUST_CHECK int report_out_scratch(report_out *o, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                       char *path, size_t size, vijp_error *err);
/* Publish the new generation (see above) and remove the old one.  On
 * failure DIR is as it was and the staging folder is gone. */
VIJP_MUST_CHECK int report_out_commit(report_out *o, vijp_error *err);
/* Drop the new generation (after a failure): DIR stays as it was. */
void report_out_abort(report_out *o);
/* Release the lock (and remove its file). */
void report_out_close(report_out *o);
/* A text that the signal handler writes to stderr when a signal ends the
 * run during the computation (before report_out_begin): what was being
 * computed (mpi_study.c: which rank had which curve, since mpirun ends every
 * rank by a signal when one dies).  It must stay valid until replaced; NULL:
 * none. */
void report_out_signal_note(const char *text);
/* When a signal stopped the run: die of it now (after abort and close), so
 * that the parent sees the run was interrupted. */
void report_out_reraise(void);

/* mkdir -p path (modified while it runs): 0, or -1 with errno and path cut
 * at the component that could not be made. */
int report_mkdir_p(char *path);

#endif
