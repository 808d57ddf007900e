#ifndef VIJP_CLI_H
#define VIJP_CLI_H

#include <stdio.h>
#include "vijp/error.h"
#include "vijp/net.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

int cli_grad(int argc, char **argv);
int cli_drift(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_regress(int argc, char **argv);
int cli_certify(int argc, char **argv);
int cli_memory(int argc, char **argv);
int cli_check_layer(int argc, char **argv);
int cli_eval(int argc, char **argv);

/* Shared by the subcommands (common.c). */

/* "COMMAND: message" (command like "vijp grad") on stderr; EXIT_USAGE. */
int cli_usage_error(const char *command, const vijp_error *err);

/* The stream every command prints its results on: stdout, until
 * cli_out_isolate.  Help texts go there too. */
FILE *cli_out(void);
/* Once plugins are to be loaded: the results stream becomes a copy of the
 * original standard output, and descriptor 1, with the C library's stdout
 * that a plugin's printf shares, is pointed at stderr, so that nothing a
 * plugin prints (while loading, in its operators, in a child process) can
 * get into vijp's results: --json stays valid JSON.  0, or -1 with errno. */
int cli_out_isolate(void);

/* The command's results are on the results stream: a write that failed
 * there (a full disk, a closed pipe, EIO at the close) is a failed run, not a
 * success with a lost answer.  Closes the stream and checks it, saying on
 * stderr what failed: 0, or -1 (the same answer on every later call, which
 * closes nothing).  Nothing may be written to it after that.  main.c calls
 * it at the end; a command calls it before it publishes something that a
 * failure must not leave behind (drift's report folder), so that nothing
 * can fail after. */
int cli_finish_stdout(void);

/* fprintf(stderr, ...) for a message that quotes what the user typed (a
 * spec, an argument): control characters but the newline written as \xHH,
 * as vijp_fail does in the messages of the library. */
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse an unsigned integer option in [lo, hi]; prints an error and returns -1 if bad. */
int cli_parse_size(const char *opt, const char *s, unsigned long long lo, unsigned long long hi,
                   unsigned long long *out);

/* mkdir -p dir, and check it is a folder this process can write to: 0, or
 * VIJP_EIO with the path and the reason (for --save; report folders have
 * their own staging, atomic.h). */
int cli_prepare_dir(const char *dir, vijp_error *err);
/* The same checks, creating nothing: dir is a folder this process can write
 * into, or its nearest existing parent is one (cli_prepare_dir would make
 * it).  Checked with the inputs, so that a refused or failed run leaves no
 * empty --save folder; the folder is made when the files are written. */
int cli_check_dir(const char *dir, vijp_error *err);

/* One array of a --save set: DIR/name, [cols, rows] (a row per sample) or
 * 1-D (one_d). */
typedef struct {
    const char *name;
    const vijp_mat *m; /* NULL for cli_save_check, which reads the names alone */
    int one_d;
} cli_save_item;
/* With the inputs: cli_check_dir, and no name of the set is a folder in
 * dir (its file could not replace it).  VIJP_E* and the message, or 0. */
int cli_save_check(const char *dir, const cli_save_item *items, size_t n, vijp_error *err);
/* The set written all or none (save.c): on a failure nothing of it is in
 * dir and dir's earlier files are as they were. */
int cli_save_set(const char *dir, const cli_save_item *items, size_t n, vijp_error *err);

/* Whether a run needing about `need` bytes fits what this process can still
 * get (vijp_memory_available); if not, says "vijp CMD: needs about X GiB;
 * Y GiB available (which bound)" on stderr. */
int cli_memory_fits(const char *command, double need);
/* What this process can still get, capped at cap bytes (0: no cap);
 * why (size bytes) names the bound that holds: vijp_memory_available's,
 * or cap_name where the cap is lower. */
double cli_memory_limit(double cap, const char *cap_name, char *why, size_t size);
/* cli_memory_fits against avail bytes, whose bound is why. */
int cli_memory_fits_in(const char *command, double need, double avail, const char *why);
/* A positive number of bytes, optionally with K, M or G (powers of 1024),
 * into *out; -1 with "COMMAND: OPTION wants ..." on stderr otherwise. */
int cli_parse_bytes(const char *command, const char *option, const char *s, size_t *out);
/* 1.5 GiB, 300 MiB, 12 KiB: two or three significant digits. */
void cli_human_bytes(double b, char *buf, size_t size);
/* This process's resident set now (VmRSS), in bytes; 0 where unknown. */
double cli_resident_bytes(void);

/* --plugin FILE: load it (plugins.c).  It is first loaded in a child
 * process, so that a plugin that crashes while loading (a truncated file, a
 * fault in a constructor or in vijp_plugin_init) is reported as that
 * plugin's failure; then here, its output sent to stderr.  0, or the exit
 * status, having said why on stderr. */
int cli_plugin_load(const char *path);
/* The --plugin files loaded, in order (the first 64), kept so that a
 * command can print or record a command line that reruns it: the paths, or
 * as arguments " --plugin A --plugin B" ("" without any). */
size_t cli_plugin_paths(const char *const **paths);
const char *cli_plugin_args(void);

/* Before anything else (blas_room.c): under an address-space limit too
 * small for OpenBLAS's work buffers, run vijp again with one OpenBLAS
 * thread, or refuse a command that computes (exit 2, said on stderr).
 * -1 to go on, or the exit status. */
int cli_blas_room(int argc, char **argv);

/* --net SPEC, parsed once into *tmpl (vijp_net_template: a JSON net's file
 * read once) at *depth and width (0: the spec's).  A JSON net's depth is
 * its number of layers (with depth_given, the option depth_opt, "--depth"
 * or "--depth-max", must already say so) and
 * its "loss" field becomes *loss unless loss_given (then they must agree);
 * *depth becomes the net's.  Prints nothing; VIJP_E* with the message in
 * err (a usage error), *tmpl then freed. */
int cli_net_parse(const char *depth_opt, const char *spec, size_t *depth, int depth_given, int *loss, int loss_given,
                  size_t width, vijp_net *tmpl, vijp_error *err);
/* --weights FILE: read against the parsed net, so that a bad file is bad
 * input before anything runs. */
int cli_check_weights(const vijp_net *tmpl, const char *weights, vijp_error *err);
/* --input X.npy: its rows are the batch (with batch_given, --batch must
 * agree), its columns the width (checked when width is not 0). */
int cli_input_batch(const char *path, size_t width, size_t *batch, int batch_given, vijp_error *err);
/* Another array of samples (grad's --target): shape [rows, cols], every
 * entry a number; messages start "OPT PATH".  --input's entries are checked
 * the same way. */
int cli_check_rows(const char *opt, const char *path, size_t cols, size_t rows, vijp_error *err);

/* The heading of the layer list in the help of the commands that take a network. */
#define CLI_SPEC_ITEMS "SPEC items (comma-separated, cycled to the depth)"
/* "heading:" (CLI_SPEC_ITEMS if NULL), then every registered layer type's
 * syntax, one per line, from the registry (help texts). */
void cli_print_layer_syntax(FILE *out, const char *heading);

#endif
