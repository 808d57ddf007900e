/* Helpers every subcommand uses (declared in cli.h): option parsing and the
 * layer syntax of the help texts.  Kept apart from main.c, which dispatches to
 * the subcommands, so calls run one way: main.c → subcommands → common.c. */
#include "cli.h"
#include "report/atomic.h"
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "vijp/array_io.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

void cli_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    char *text = vijp_alloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    /* What the user typed, quoted back: its control characters as \xHH
     * (as vijp_fail writes them), so that they are seen, not obeyed. */
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if ((*c < 0x20 && *c != '\n') || *c == 0x7f) fprintf(stderr, "\\x%02x", *c);
        else fputc(*c, stderr);
    vijp_free(text);
}

int cli_parse_size(const char *opt, const char *s, unsigned long long lo, unsigned long long hi,
                   unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno || v < lo || v > hi) {
        cli_say("vijp: %s wants an integer in [%llu, %llu], got '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

void cli_print_layer_syntax(FILE *out, const char *heading)
{
    size_t n;
    const vijp_layer_type *const *all = vijp_layer_types(&n);
    fprintf(out, "\n%s:\n", heading ? heading : CLI_SPEC_ITEMS);
    for (size_t i = 0; i < n; i++) fprintf(out, "  %s\n", all[i]->syntax);
    fputs("  (more with --plugin FILE.so, repeatable: layer types defined outside vijp)\n", out);
}

/* 1.5 GiB, 300 MiB, 12 KiB: two or three significant digits. */
void cli_human_bytes(double b, char *buf, size_t size)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && u < 6) b /= 1024, u++;
    snprintf(buf, size, "%.3g %s", b, units[u]);
}

double cli_resident_bytes(void)
{
    FILE *in = fopen("/proc/self/status", "r");
    double kb = 0;
    char line[256];
    while (in && fgets(line, sizeof line, in))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtod(line + 6, NULL);
    if (in) fclose(in);
    return 1024 * kb;
}

int cli_parse_bytes(const char *command, const char *option, const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'K') shift = 10, end++;
    else if (*end == 'M') shift = 20, end++;
    else if (*end == 'G') shift = 30, end++;
    if (s[0] < '0' || s[0] > '9' || *end || errno || v == 0 || v > (~0ull >> 1) >> shift) {
        cli_say("%s: %s wants a positive number of bytes (K, M, G allowed), got '%s'\n", command, option, s);
        return -1;
    }
    *out = (size_t)(v << shift);
    return 0;
}

double cli_memory_limit(double cap, const char *cap_name, char *why, size_t size)
{
    double avail = vijp_memory_available(why, size);
    if (cap > 0 && cap < avail) avail = cap, snprintf(why, size, "%s", cap_name);
    return avail;
}

int cli_memory_fits_in(const char *command, double need, double avail, const char *why)
{
    if (need <= avail) return 1;
    char a[32], b[32];
    cli_human_bytes(need, a, sizeof a), cli_human_bytes(avail, b, sizeof b);
    fprintf(stderr, "vijp %s: needs about %s; %s available (%s)\n", command, a, b, why);
    return 0;
}

int cli_memory_fits(const char *command, double need)
{
    char why[64];
    double avail = cli_memory_limit(0, NULL, why, sizeof why);
    return cli_memory_fits_in(command, need, avail, why);
}

/* The results stream (cli.h): NULL while it is stdout itself. */
static FILE *results;

FILE *cli_out(void) { return results ? results : stdout; }

int cli_out_isolate(void)
{
    if (results) return 0;
    fflush(stdout);
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return errno == EBADF ? 0 : -1; /* no stdout: nothing a plugin could spoil */
    FILE *f = fdopen(fd, "w");
    if (!f) return close(fd), -1;
    /* Descriptor 1, and with it the C library's stdout that plugins share,
     * now writes to stderr (or nowhere, without one). */
    int sink = fcntl(STDERR_FILENO, F_GETFD) >= 0 ? STDERR_FILENO : open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (sink < 0 || dup2(sink, STDOUT_FILENO) < 0) {
        if (sink > STDERR_FILENO) close(sink);
        fclose(f);
        return -1;
    }
    if (sink > STDERR_FILENO) close(sink);
    results = f;
    return 0;
}

/* stdio reports a failed write only at the flush, and some file systems
 * report a failed write-back only at the close: the results stream is closed
 * here and checked (the GNU close_stdout convention), once. */
int cli_finish_stdout(void)
{
    static int done, failed;
    if (done) return failed;
    done = 1;
    if (results) fflush(stdout); /* what plugins printed, on stderr: not vijp's results */
    FILE *out = cli_out();
    int earlier = ferror(out);
    errno = 0;
    if (fclose(out) == 0 && !earlier) return 0;
    /* A reader that stopped reading (vijp grad --help | head) is not news:
     * the status says it (1), the terminal is spared a line about it.  Any
     * other failure (a full disk) is said. */
    if (errno != EPIPE)
        fprintf(stderr, "vijp: writing the results to standard output failed: %s\n", errno ? strerror(errno) : "write error");
    return failed = -1;
}

int cli_usage_error(const char *command, const vijp_error *err)
{
    fprintf(stderr, "%s: %s\n", command, err->msg);
    return EXIT_USAGE;
}

int cli_prepare_dir(const char *dir, vijp_error *err)
{
    char path[4096];
    if (!*dir || (size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return vijp_fail(err, VIJP_EINVAL, "bad folder name '%s'", dir);
    if (report_mkdir_p(path)) return vijp_fail(err, VIJP_EIO, "cannot create folder %s: %s", path, strerror(errno));
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return vijp_fail(err, VIJP_EIO, "%s is not a folder", dir);
    if (access(dir, W_OK | X_OK)) return vijp_fail(err, VIJP_EIO, "cannot write into %s: %s", dir, strerror(errno));
    return 0;
}

int cli_check_dir(const char *dir, vijp_error *err)
{
    char path[4096];
    if (!*dir || (size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return vijp_fail(err, VIJP_EINVAL, "bad folder name '%s'", dir);
    /* Up to the nearest part that exists: the folder itself, to write into,
     * or the one its missing parts would be made in. */
    for (;;) {
        struct stat st;
        if (!stat(path, &st)) {
            if (!S_ISDIR(st.st_mode)) return vijp_fail(err, VIJP_EIO, "%s is not a folder", path);
            if (access(path, W_OK | X_OK))
                return vijp_fail(err, VIJP_EIO, "cannot %s %s: %s", strcmp(path, dir) ? "create a folder in" : "write into",
                                 path, strerror(errno));
            return 0;
        }
        if (errno != ENOENT) return vijp_fail(err, VIJP_EIO, "cannot create folder %s: %s", dir, strerror(errno));
        if (!lstat(path, &st)) /* a link to nothing: mkdir would fail on it, after the run */
            return vijp_fail(err, VIJP_EIO, "%s is a link to a missing file or folder", path);
        char *slash = strrchr(path, '/');
        while (slash && slash > path && slash[1] == 0) *slash = 0, slash = strrchr(path, '/'); /* "a/b/" is "a/b" */
        if (!slash) snprintf(path, sizeof path, ".");
        else if (slash == path) path[1] = 0; /* "/a": in "/" */
        else *slash = 0;
    }
}

int cli_net_parse(const char *depth_opt, const char *spec, size_t *depth, int depth_given, int *loss, int loss_given,
                  size_t width, vijp_net *tmpl, vijp_error *err)
{
    int json = vijp_net_spec_is_json(spec);
    int rc = vijp_net_template(tmpl, spec, json ? 0 : *depth, width, err);
    if (rc || !json) return rc;
    if (depth_given && *depth != tmpl->depth)
        rc = vijp_fail(err, VIJP_EINVAL, "%s %zu, but %s has %zu layer%s (a JSON net's depth is its number of layers)",
                       depth_opt, *depth, spec, tmpl->depth, tmpl->depth == 1 ? "" : "s");
    else if (tmpl->loss_given && loss_given && *loss != (int)tmpl->loss)
        rc = vijp_fail(err, VIJP_EINVAL, "--loss disagrees with the \"loss\" of %s", spec);
    else {
        *depth = tmpl->depth;
        if (tmpl->loss_given) *loss = (int)tmpl->loss;
    }
    if (rc) vijp_net_free(tmpl);
    return rc;
}

/* The first entry of an array of samples (a row each) that is not a
 * number, named by its row and column in the file, as numpy indexes it (the
 * engines hold the samples as columns, and said "row 2, column 0" for the
 * file's row 0, column 2). */
static int rows_finite(const char *opt, const char *path, const vijp_array *a, vijp_error *err)
{
    size_t cols = a->shape[1] ? a->shape[1] : 1;
    for (size_t i = 0; i < a->len; i++)
        if (!isfinite(a->data[i]))
            return vijp_fail(err, VIJP_EDOMAIN, "%s %s: row %zu, column %zu is %s (every input must be a number)", opt,
                             path, i / cols, i % cols, isnan(a->data[i]) ? "NaN" : "infinite");
    return 0;
}

int cli_input_batch(const char *path, size_t width, size_t *batch, int batch_given, vijp_error *err)
{
    vijp_array a;
    int rc = vijp_npy_read_rows(path, width, 0, &a, err);
    if (rc) {
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err ? err->msg : "");
        return vijp_fail(err, rc, "--input %s", inner);
    }
    if (a.shape[0] > 1000000)
        rc = vijp_fail(err, VIJP_EDIM, "--input %s: %zu rows, more than the 1000000 samples a batch may have", path, a.shape[0]);
    else if (batch_given && *batch != a.shape[0])
        rc = vijp_fail(err, VIJP_EINVAL, "--batch %zu, but --input %s has %zu rows (one per sample)", *batch, path, a.shape[0]);
    else if (!(rc = rows_finite("--input", path, &a, err))) *batch = a.shape[0];
    vijp_array_clear(&a);
    return rc;
}

int cli_check_rows(const char *opt, const char *path, size_t cols, size_t rows, vijp_error *err)
{
    vijp_array a;
    int rc = vijp_npy_read_rows(path, cols, rows, &a, err);
    if (rc) {
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err->msg);
        return vijp_fail(err, rc, "%s %s", opt, inner);
    }
    rc = rows_finite(opt, path, &a, err);
    vijp_array_clear(&a);
    return rc;
}

int cli_check_weights(const vijp_net *tmpl, const char *weights, vijp_error *err)
{
    /* two sources for one layer's parameters: which one wins is no answer */
    for (size_t i = 0; tmpl->given && i < tmpl->depth; i++)
        if (tmpl->given[i])
            return vijp_fail(err, VIJP_EINVAL, "--weights %s, but the network's file gives layer %zu's parameters "
                             "itself: give them in one place", weights, i);
    vijp_net net;
    vijp_net_copy(&net, tmpl);
    int rc = vijp_net_load_weights(&net, weights, err);
    vijp_net_free(&net);
    return rc;
}
