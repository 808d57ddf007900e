/* File-tree operations of the report writer (atomic.h), and what its parts
 * share.  Internal to src/report/atomic*.c. */
#ifndef VIJP_CLI_ATOMIC_TREE_H
#define VIJP_CLI_ATOMIC_TREE_H

#include "atomic.h"
#include <sys/stat.h>

/* In each generation: the files vijp wrote there, one name a line. */
#define MANIFEST_NAME ".vijp-manifest"
/* In a staging folder until the moment before the exchange: a staging folder
 * that still holds it was never published and is removed whole. */
#define INCOMPLETE_NAME ".vijp-incomplete"
/* Scratch files in a staging folder (gnuplot's input), removed before the
 * exchange. */
#define SCRATCH_PREFIX ".vijp-scratch-"
/* Beside DIR: ".NAME" + these. */
#define STAGING_SUFFIX ".vijp-staging-"
#define OLD_SUFFIX ".vijp-old-"
#define LOCK_SUFFIX ".vijp-lock"

void name_list_add(name_list *l, const char *name);
int name_list_has(name_list *l, const char *name);
void name_list_free(name_list *l);
/* The manifest in folder dirfd (an empty list when there is none). */
void manifest_read(int dirfd, name_list *out);

/* Remove name under dirfd, a folder with everything in it, never following
 * a symbolic link nor entering a mount point (which stays, and so does the
 * folder above it).  System calls and the stack only (no allocation, no
 * stdio), so that the out-of-memory cleanup may call it.  0: gone. */
int tree_remove(int dirfd, const char *name);

/* Called after every step of a tree operation (a file carried, an entry
 * removed): atomic.c's atomic_step, which runs its test hooks and answers
 * -1 when a signal asks the run to stop.  Passed down, so that the tree
 * operations call nothing of the generation above them. */
typedef int (*tree_step)(void);

/* Whether name under dirfd (st: its lstat) is a mount point: on another file
 * system than its folder (dev: the folder's st_dev), or the root of a mount
 * of the same one (a bind mount: statx's STATX_ATTR_MOUNT_ROOT, Linux 5.8).
 * System calls only (tree_remove calls it). */
int tree_mount_point(int dirfd, const char *name, const struct stat *st, dev_t dev);

/* The old generation's tree (folder fd, st its fstat, in a folder whose
 * fstat is in; shown names it), checked before the computation, so that a
 * long study is not wasted on a folder that cannot be carried over: refused
 * (VIJP_EINVAL, naming the entry) a mount point, a FIFO, socket or device, a
 * folder that cannot be read, and a folder, link or file that would be
 * recreated (a file when fs.protected_hardlinks refuses this run a link to
 * it) with an owner or group this run cannot give it (tree_carry keeps
 * them).  vijps: the manifest, whose files are not carried (top level only;
 * NULL below). */
VIJP_MUST_CHECK int tree_check(int fd, const struct stat *st, const struct stat *in, name_list *vijps, const char *shown,
                               vijp_error *err);

/* The new copy (folder or file fd, or the link name under dirfd when fd < 0)
 * := owner and group of old, and its permission bits (a folder's ORed with
 * extra, so that it can be filled first); read back after.  0, or -1 with
 * errno (EPERM where it did not take). */
int tree_give(int fd, int dirfd, const char *name, const struct stat *old, mode_t extra);

/* Give the new generation (folder to) what the old one (folder from) holds
 * that vijp did not write: regular files as hard links (copies where the
 * file system refuses a link), symbolic links recreated, folders recreated
 * with their contents carried the same way; every folder, link and copy
 * recreated keeps the owner, group and mode of the old one (tree_give), and
 * a mount point met on the way is refused (VIJP_EINVAL), as the check
 * before the computation refuses it.  Not carried: the old manifest
 * and the regular files it lists (vijps), and names the new generation
 * writes itself (ours); such a name in the old folder is replaced when it is
 * vijp's (listed, or legacy: a report from before manifests) and refused
 * otherwise, so that nothing of the user's is overwritten.  shown names
 * from for messages. */
VIJP_MUST_CHECK int tree_carry(int from, int to, name_list *vijps, name_list *ours, int legacy, const char *shown,
                               tree_step step, vijp_error *err);

/* Remove the folder `name` under parent_fd that holds an old generation (or
 * a finished staging folder a killed run left): the files its manifest lists,
 * and every entry the target folder (target_fd, -1 if none) holds too,
 * carried over before the exchange.  An entry the target lacks (created in
 * the old folder after the carry) is moved into the target instead, so that
 * nothing the user wrote is lost.  A mount point is never entered nor
 * removed.  The manifest goes last, so a retirement cut short can be
 * resumed.  0: the folder is gone; 1: something had to stay. */
int tree_retire(int parent_fd, const char *name, int target_fd, tree_step step);

/* One step of a generation's commit sequence is done (a file written, a
 * flush, a link, a rename, an unlink): runs the test hooks of atomic.c
 * (VIJP_KILL_AT_STEP, VIJP_PAUSE_AT_STEP), and returns -1 when a signal asks
 * the run to stop before the new generation is published. */
int atomic_step(void);

/* atomic_open.c hands the folder it locked to atomic.c: installs the signal
 * handlers and the out-of-memory cleanup, and reads the test hooks. */
void atomic_arm(report_out *o);
void atomic_disarm(void);

#endif
