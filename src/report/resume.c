/* --resume's units folder (resume.h). */
#include "resume.h"
#include "atomic_tree.h"
#include "study/unit_io.h"
#include "vijp/vijp.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <gmp.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VIJP_GIT_COMMIT
#define VIJP_GIT_COMMIT "unknown"
#endif

#define STUDY_FILE "study"

/* The whole of file name under dirfd (NUL-terminated; *size its length
 * without the NUL), or NULL with errno. */
static char *slurp_at(int dirfd, const char *name, size_t *size)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = vijp_alloc(cap);
    for (ssize_t got;; n += (size_t)got) {
        if (n + 1 == cap) buf = vijp_realloc(buf, cap *= 2);
        got = read(fd, buf + n, cap - 1 - n);
        if (got == 0) break;
        if (got < 0) {
            int e = errno;
            close(fd), free(buf);
            errno = e;
            return NULL;
        }
    }
    close(fd);
    buf[n] = 0;
    *size = n;
    return buf;
}

/* "key: contents HASH" of a file the study reads. */
static int file_line(FILE *f, const char *key, const char *path, vijp_error *err)
{
    size_t n;
    unsigned char *data;
    /* As the study itself reads it (a symbolic link followed, a device refused). */
    int rc = vijp_input_read(path, &data, &n, err);
    if (rc) return rc;
    fprintf(f, "%s: %s, contents %016" PRIx64 "\n", key, path, unit_hash(UNIT_HASH_START, data, n));
    vijp_free(data);
    return 0;
}

/* "key: net contents HASH" of a JSON net as the run parsed it (the bytes
 * read once: s->nets), so that a resumed run whose net file changed since,
 * or whose parameter files did, is refused: every layer as a spec and its
 * widths, and every parameter the file gives, bit for bit. */
static void net_line(FILE *f, const char *key, const char *path, const vijp_net *net)
{
    uint64_t h = unit_hash(UNIT_HASH_START, &net->loss, sizeof net->loss);
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        char spec[256];
        vijp_layer_spec(L, spec, sizeof spec);
        h = unit_hash(h, spec, strlen(spec) + 1);
        h = unit_hash(h, &L->in, sizeof L->in), h = unit_hash(h, &L->out, sizeof L->out);
        if (net->given && net->given[i] && net->theta[i])
            h = unit_hash(h, net->theta[i], L->type->param_count(L) * sizeof *net->theta[i]);
    }
    fprintf(f, "%s: %s, net contents %016" PRIx64 "\n", key, path, h);
}

int study_description(const study *s, char **out, vijp_error *err)
{
    size_t size;
    char *text = NULL;
    FILE *f = open_memstream(&text, &size);
    if (!f) vijp_out_of_memory(0);
    int rc = 0;
    fprintf(f, "vijp: %s (commit %s), MPFR %s, GMP %s\n", VIJP_VERSION, VIJP_GIT_COMMIT, mpfr_get_version(), gmp_version);
    for (size_t c = 0; c < s->n_configs && !rc; c++) {
        char key[32];
        snprintf(key, sizeof key, "config %zu", c + 1);
        fprintf(f, "%s: %s, %s\n", key, s->configs[c].spec, s->configs[c].init_name);
        if (vijp_net_spec_is_json(s->configs[c].spec)) net_line(f, key, s->configs[c].spec, &s->nets[s->configs[c].net]);
    }
    fputs("formats:", f);
    for (size_t k = 0; k < s->n_formats; k++) { /* a tolerance past double's range: "%a*2^E" (a double reads as before) */
        fprintf(f, " %s (tolerance %a", s->formats[k].name, s->tol[k].m);
        fprintf(f, s->tol[k].e ? "*2^%ld)" : ")", s->tol[k].e);
    }
    fputs("\nseeds:", f);
    for (size_t k = 0; k < s->n_seeds; k++) fprintf(f, " %" PRIu64, s->seeds[k]);
    fputs("\nengines: backprop", f);
    for (size_t k = 0; k < s->n_engines; k++) fprintf(f, " %s", vijp_engine_name(s->engines[k]));
    fprintf(f, "\ndepth: %zu\nwidth: %zu\nbatch: %zu\nloss: %s\n", s->depth, s->width, s->batch,
            s->loss == VIJP_LOSS_SQUARE ? "square" : "linear");
    fprintf(f, "reference precision: from %ld, at most %ld\ncheckpoint segment: %zu\n", s->ref_prec_start,
            s->ref_prec_max, s->opts.checkpoint_segment);
    for (size_t k = 0; k < s->n_plugins && !rc; k++) rc = file_line(f, "plugin", s->plugins[k], err);
    if (!rc && s->input) rc = file_line(f, "input", s->input, err);
    if (!rc && s->weights) rc = file_line(f, "weights", s->weights, err);
    if (fclose(f)) vijp_out_of_memory(0);
    if (rc) free(text), text = NULL;
    *out = text;
    return rc;
}

/* name := text[0..n), whole or not at all: a temporary file flushed to disk,
 * renamed, and the folder flushed. */
static int write_atomically(int dirfd, const char *name, const char *text, size_t n)
{
    char tmp[NAME_MAX + 1];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0) {
            int e = errno;
            close(fd), unlinkat(dirfd, tmp, 0);
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    int rc = fsync(fd), e = errno;
    if (close(fd) && !rc) rc = -1, e = errno;
    if (!rc && renameat(dirfd, tmp, dirfd, name)) rc = -1, e = errno;
    if (!rc && fsync(dirfd)) rc = -1, e = errno;
    if (rc) unlinkat(dirfd, tmp, 0), errno = e;
    return rc;
}

/* The first line where the two descriptions differ, as "X there, Y here". */
static void first_difference(const char *there, const char *here, char *buf, size_t size)
{
    size_t lines = 0;
    const char *a = there, *b = here;
    while (*a || *b) {
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        if (na != nb || memcmp(a, b, na)) {
            if (!lines++)
                snprintf(buf, size, "'%.*s' there, '%.*s' here", (int)(na > 300 ? 300 : na), a, (int)(nb > 300 ? 300 : nb), b);
        }
        a += na + (a[na] != 0), b += nb + (b[nb] != 0);
    }
    if (lines > 1) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, " (and %zu more line%s)", lines - 1, lines > 2 ? "s" : "");
    }
}

static void unit_name(char *buf, size_t size, size_t j) { snprintf(buf, size, "unit-%zu", j); }

/* The kept units that decode, into s; the others removed (said on stderr,
 * -q or not: a warning). */
static size_t load_units(unit_store *u, study *s, size_t total)
{
    size_t kept = 0;
    for (size_t j = 0; j < total; j++) {
        char name[64], why[200];
        unit_name(name, sizeof name, j);
        unlinkat(u->dir_fd, strcat(strcpy(why, name), ".tmp"), 0); /* a write a kill cut short */
        size_t n;
        char *text = slurp_at(u->dir_fd, name, &n);
        if (!text) continue;
        vijp_drift_curve c;
        if (unit_decode(s, u->hash, j, text, n, &c, why, sizeof why) == 0) {
            s->curves[j] = c;
            s->done[j] = 1, kept++;
        } else {
            fprintf(stderr, "vijp: warning: %s/%s: %s; computing that curve again\n", u->shown, name, why);
            unlinkat(u->dir_fd, name, 0);
        }
        free(text);
    }
    return kept;
}

int unit_store_open(unit_store *u, const report_out *o, study *s, int resume, int notes, size_t *kept, vijp_error *err)
{
    const char *hook = getenv("VIJP_KILL_AFTER_UNITS");
    *u = (unit_store){.parent_fd = o->parent_fd, .dir_fd = -1, .kill_after = hook ? strtoul(hook, NULL, 10) : 0};
    *kept = 0;
    snprintf(u->name, sizeof u->name, ".%s" UNITS_SUFFIX, o->name);
    snprintf(u->shown, sizeof u->shown, "%.*s/%s", (int)(o->name - 1 - o->target), o->target, u->name);
    size_t total = s->n_configs * s->n_formats * s->n_seeds;
    if (!s->curves) s->curves = vijp_alloc_array(total, sizeof *s->curves);
    if (!s->done) s->done = vijp_alloc_array(total, sizeof *s->done);
    char *desc;
    int rc = study_description(s, &desc, err);
    if (rc) return rc;
    u->hash = unit_hash(UNIT_HASH_START, desc, strlen(desc));
    u->dir_fd = openat(u->parent_fd, u->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    size_t n;
    char *there = u->dir_fd >= 0 ? slurp_at(u->dir_fd, STUDY_FILE, &n) : NULL;
    if (resume && there && strcmp(there, desc)) {
        char diff[800];
        first_difference(there, desc, diff, sizeof diff);
        rc = vijp_fail(err, VIJP_EINVAL, "--resume: the finished curves kept in %s are of another study: %s; run without "
                       "--resume to start over", u->shown, diff);
    } else if (resume && there) {
        *kept = load_units(u, s, total);
        if (notes) fprintf(stderr, "vijp: resuming: %zu of %zu curves kept in %s\n", *kept, total, u->shown);
    } else {
        if (u->dir_fd >= 0) { /* an earlier run's, not resumed (or one killed before it wrote its study) */
            close(u->dir_fd), u->dir_fd = -1;
            if (tree_remove(u->parent_fd, u->name))
                rc = vijp_fail(err, VIJP_EIO, "cannot remove %s: %s", u->shown, strerror(errno));
            else if (notes && there)
                fprintf(stderr, "vijp: removed %s, the finished curves of an interrupted run (--resume continues one)\n",
                        u->shown);
        } else if (resume && notes)
            fprintf(stderr, "vijp: nothing to resume (no %s): running the whole study\n", u->shown);
        if (!rc && mkdirat(u->parent_fd, u->name, 0777) && errno != EEXIST)
            rc = vijp_fail(err, VIJP_EIO, "cannot create %s: %s", u->shown, strerror(errno));
        if (!rc) u->dir_fd = openat(u->parent_fd, u->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (!rc && (u->dir_fd < 0 || write_atomically(u->dir_fd, STUDY_FILE, desc, strlen(desc)) || fsync(u->parent_fd)))
            rc = vijp_fail(err, VIJP_EIO, "cannot write %s/" STUDY_FILE ": %s", u->shown, strerror(errno));
    }
    free(there), free(desc);
    if (rc) unit_store_close(u);
    return rc;
}

void unit_store_save(unit_store *u, size_t j, const vijp_drift_curve *c)
{
    size_t n;
    char name[64], *text = unit_encode(u->hash, j, c, &n);
    unit_name(name, sizeof name, j);
    if (write_atomically(u->dir_fd, name, text, n) && !__atomic_exchange_n(&u->warned, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "vijp: warning: cannot keep finished curves in %s for --resume (%s); the run goes on\n", u->shown,
                strerror(errno));
    free(text);
    /* Test hook: VIJP_KILL_AFTER_UNITS=N raises SIGKILL once N units are
     * kept (tests/t-resume.c, scripts/check-mpi.sh kill a study midway). */
    if (u->kill_after && __atomic_add_fetch(&u->saved, 1, __ATOMIC_RELAXED) == u->kill_after) raise(SIGKILL);
}

void unit_store_finish(unit_store *u)
{
    if (u->dir_fd >= 0) close(u->dir_fd), u->dir_fd = -1;
    if (tree_remove(u->parent_fd, u->name) == 0) fsync(u->parent_fd);
    else fprintf(stderr, "vijp: warning: cannot remove %s: %s\n", u->shown, strerror(errno));
}

void unit_store_close(unit_store *u)
{
    if (u->dir_fd >= 0) close(u->dir_fd), u->dir_fd = -1;
}
