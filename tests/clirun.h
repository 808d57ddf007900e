/* Running the vijp command as a user would, from the Check suites: exit
 * status, stdout and stderr.  The command's path comes from VIJP_BIN (and the
 * regression-test build from VIJP_PERTURBED_BIN), both set by `make check`. */
#ifndef VIJP_CLIRUN_H
#define VIJP_CLIRUN_H

#include "testutil.h"

/* Exit codes documented in `vijp --help` / `vijp grad --help`. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

typedef struct {
    int rc;     /* exit status; 128 + signal if killed */
    char *out;  /* whole stdout */
    char *err;  /* whole stderr */
} run_result;

/* Run "$VIJP_BIN args" (run_bin: "bin args") with stdout and stderr captured
 * in two temp files, stdin from /dev/null.  args is shell text written by the
 * tests only. */
run_result run_vijp(const char *args);
run_result run_bin(const char *bin, const char *args);
/* The same with stdout sent to stdout_path (e.g. /dev/full) instead; out is
 * then what the temp file received: nothing. */
run_result run_bin_to(const char *bin, const char *args, const char *stdout_path);
/* The same with stderr on a pseudo-terminal (as on a user's screen) and
 * stdout in a temp file: err is what the terminal received (its line
 * discipline turns "\n" into "\r\n"). */
run_result run_vijp_tty(const char *args);
void run_free(run_result *r);
/* Whole contents of an open file / a fresh temp file (path receives its name). */
char *slurp_fd(int fd);
int make_temp(char *path, size_t size);
/* A fresh folder $TMPDIR/vijp-TAG-XXXXXX (TMPDIR unset: /tmp) into dir, and
 * its removal with everything in it; both fail the test on error. */
void make_temp_dir(char *dir, size_t size, const char *tag);
void remove_tree(const char *dir);

#endif
