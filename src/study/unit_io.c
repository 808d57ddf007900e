/* A study's unit as text and back (unit_io.h). */
#include "unit_io.h"
#include "vijp/vijp.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Every field of a curve and of an engine's run is written below; a field
 * added to either struct must be added here too, or a resumed report would
 * silently lack it.  These sums of the fields' sizes break the build when
 * the structs grow (on LP64, where no padding sits between these fields). */
#if defined(__LP64__)
_Static_assert(sizeof(vijp_drift_curve) == 2 * sizeof(size_t) + 4 * sizeof(void *) + 2 * sizeof(double) +
                   3 * sizeof(vijp_xnum) + 2 * sizeof(long) + sizeof(((vijp_drift_curve *)0)->cond_method),
               "vijp_drift_curve changed: serialise the new field in src/study/unit_io.c");
_Static_assert(sizeof(vijp_drift_run_result) ==
                   sizeof(double) /* engine, padded */ + sizeof(vijp_metric) + 5 * sizeof(void *) + sizeof(size_t) + 2 * 256,
               "vijp_drift_run_result changed: serialise the new field in src/study/unit_io.c");
#endif

#define UNIT_MAGIC "vijp-unit 1"

uint64_t unit_hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- writing ---- */

static void put_doubles(FILE *f, const char *key, const double *v, size_t n)
{
    fputs(key, f);
    for (size_t i = 0; i < n; i++) fprintf(f, " %a", v[i]);
    fputc('\n', f);
}

/* " M" (hex, exact) where x is a double, " M*2^E" past its range: the
 * files of earlier versions, all doubles, read the same. */
static void put_xnum(FILE *f, vijp_xnum x)
{
    fprintf(f, " %a", x.m);
    if (x.e) fprintf(f, "*2^%ld", x.e);
}

static void put_xnums(FILE *f, const char *key, const vijp_xnum *v, size_t n)
{
    fputs(key, f);
    for (size_t i = 0; i < n; i++) put_xnum(f, v[i]);
    fputc('\n', f);
}

static void put_metrics(FILE *f, const char *key, const vijp_metric *m, size_t n)
{
    fputs(key, f);
    for (size_t i = 0; i < n; i++) put_xnum(f, m[i].rel), put_xnum(f, m[i].ulps), put_xnum(f, m[i].angle_deg);
    fputc('\n', f);
}

/* A message as its length and its bytes: any byte survives. */
static void put_text(FILE *f, const char *key, const char *s)
{
    fprintf(f, "%s %zu:", key, strlen(s));
    fputs(s, f);
    fputc('\n', f);
}

char *unit_encode(uint64_t study_hash, size_t j, const vijp_drift_curve *c, size_t *size)
{
    char *body = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&body, &n);
    if (!f) vijp_out_of_memory(0);
    size_t D = c->depth;
    fprintf(f, UNIT_MAGIC "\nstudy %016" PRIx64 "\nunit %zu\ndepth %zu\nruns %zu\n", study_hash, j, D, c->n_runs);
    fputs("u", f), put_xnum(f, c->u);
    fprintf(f, "\nref %ld %ld", c->ref_prec_start, c->ref_prec);
    put_xnum(f, c->ref_agreement), put_xnum(f, c->ref_target);
    fprintf(f, "\nrates %a %a\n", c->lyap_rate, c->predicted_rate);
    put_doubles(f, "kappa", c->kappa, D);
    put_doubles(f, "lyap_cum", c->lyap_cum, D);
    put_xnums(f, "predicted", c->predicted, D);
    put_text(f, "cond", c->cond_method);
    for (size_t r = 0; r < c->n_runs; r++) {
        const vijp_drift_run_result *run = &c->runs[r];
        fprintf(f, "run %s %zu\n", vijp_engine_name(run->engine), run->rebuilt);
        put_metrics(f, "x", &run->x, 1);
        put_metrics(f, "g", run->g, D);
        put_metrics(f, "theta", run->theta, D);
        if (run->bound) put_xnums(f, "bound", run->bound, D);
        else fputs("bound -\n", f);
        fputs("stored", f);
        for (size_t i = 0; i < D; i++) fprintf(f, " %zu", run->stored_by_depth[i]);
        fputc('\n', f);
        if (run->reconstruction) put_xnums(f, "reconstruction", run->reconstruction, D);
        else fputs("reconstruction -\n", f);
        put_text(f, "failure", run->failure);
        put_text(f, "nonfinite", run->nonfinite);
    }
    if (fflush(f)) vijp_out_of_memory(0);
    fprintf(f, "end %016" PRIx64 "\n", unit_hash(UNIT_HASH_START, body, n));
    if (fclose(f)) vijp_out_of_memory(0);
    *size = n;
    return body;
}

/* ---- reading ---- */

typedef struct {
    const char *start, *p, *end;
    char *why;
    size_t why_size;
    int bad;
} cursor;

static int fail(cursor *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cursor *k, const char *fmt, ...)
{
    if (!k->bad) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(k->why, k->why_size, fmt, ap);
        va_end(ap);
        size_t line = 1;
        for (const char *q = k->start; q < k->p && q < k->end; q++) line += *q == '\n';
        if (k->p > k->start && n >= 0 && (size_t)n < k->why_size) snprintf(k->why + n, k->why_size - (size_t)n, " (line %zu)", line);
    }
    k->bad = 1;
    return -1;
}

/* The line must start with key and a space (or end there). */
static int key(cursor *k, const char *name)
{
    size_t n = strlen(name);
    if (k->bad) return -1;
    if ((size_t)(k->end - k->p) <= n || memcmp(k->p, name, n) || (k->p[n] != ' ' && k->p[n] != '\n'))
        return fail(k, "'%s' expected", name);
    k->p += n;
    return 0;
}

static void eol(cursor *k)
{
    if (k->bad) return;
    if (k->p >= k->end || *k->p != '\n') fail(k, "unexpected text at the end of a line");
    else k->p++;
}

/* One number after a space, not past the end of the line. */
static const char *field(cursor *k)
{
    if (k->bad) return NULL;
    if (k->p >= k->end || *k->p != ' ') return fail(k, "a number is missing"), NULL;
    return ++k->p;
}

static double get_double(cursor *k)
{
    const char *q = field(k);
    if (!q) return NAN;
    char *e;
    errno = 0;
    double v = strtod(q, &e);
    if (e == q || e > k->end || (*e != ' ' && *e != '\n')) return fail(k, "a malformed number"), NAN;
    k->p = e;
    return v;
}

/* put_xnum's " M" or " M*2^E". */
static vijp_xnum get_xnum(cursor *k)
{
    const char *q = field(k);
    if (!q) return vijp_xnum_of(NAN);
    char *e;
    errno = 0;
    double m = strtod(q, &e);
    long ex = 0;
    if (e != q && e + 3 < k->end && !memcmp(e, "*2^", 3)) {
        char *f;
        ex = strtol(e + 3, &f, 10);
        if (f == e + 3 || errno || ex == 0) return fail(k, "a malformed exponent"), vijp_xnum_of(NAN);
        e = f;
    }
    if (e == q || e > k->end || (*e != ' ' && *e != '\n')) return fail(k, "a malformed number"), vijp_xnum_of(NAN);
    k->p = e;
    return vijp_xnum_2exp(m, ex);
}

static unsigned long long get_uint(cursor *k)
{
    const char *q = field(k);
    if (!q) return 0;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(q, &e, 10);
    if (e == q || *q == '-' || errno || e > k->end || (*e != ' ' && *e != '\n')) return fail(k, "a malformed integer"), 0;
    k->p = e;
    return v;
}

static long get_long(cursor *k)
{
    const char *q = field(k);
    if (!q) return 0;
    char *e;
    errno = 0;
    long v = strtol(q, &e, 10);
    if (e == q || errno || e > k->end || (*e != ' ' && *e != '\n')) return fail(k, "a malformed integer"), 0;
    k->p = e;
    return v;
}

static void get_doubles(cursor *k, const char *name, double *v, size_t n)
{
    key(k, name);
    for (size_t i = 0; i < n; i++) v[i] = get_double(k);
    eol(k);
}

static void get_xnums(cursor *k, const char *name, vijp_xnum *v, size_t n)
{
    key(k, name);
    for (size_t i = 0; i < n; i++) v[i] = get_xnum(k);
    eol(k);
}

static void get_metrics(cursor *k, const char *name, vijp_metric *m, size_t n)
{
    key(k, name);
    for (size_t i = 0; i < n; i++) m[i].rel = get_xnum(k), m[i].ulps = get_xnum(k), m[i].angle_deg = get_xnum(k);
    eol(k);
}

/* An optional array: "name -" or D numbers (allocated). */
static vijp_xnum *get_optional(cursor *k, const char *name, size_t n)
{
    if (key(k, name)) return NULL;
    if ((size_t)(k->end - k->p) >= 3 && !memcmp(k->p, " -\n", 3)) {
        k->p += 3;
        return NULL;
    }
    vijp_xnum *v = vijp_alloc_array(n, sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = get_xnum(k);
    eol(k);
    return v;
}

static void get_text(cursor *k, const char *name, char *out, size_t size)
{
    if (key(k, name) || !field(k)) return;
    char *e;
    errno = 0;
    unsigned long long n = strtoull(k->p, &e, 10);
    if (e == k->p || *k->p == '-' || errno || e >= k->end || *e != ':' || n >= size || (size_t)(k->end - e - 1) < n + 1 ||
        e[1 + n] != '\n') {
        fail(k, "a malformed message");
        return;
    }
    memcpy(out, e + 1, n);
    out[n] = 0;
    k->p = e + n + 2;
}

int unit_decode(const study *s, uint64_t study_hash, size_t j, const char *text, size_t size, vijp_drift_curve *c,
                char *why, size_t why_size)
{
    memset(c, 0, sizeof *c);
    cursor k = {text, text, text + size, why, why_size, 0};
    /* The checksum line closes the text: "end HHHHHHHHHHHHHHHH\n". */
    const size_t tail = sizeof "end 0123456789abcdef\n" - 1;
    char sum[17];
    if (size < tail || memcmp(text + size - tail, "end ", 4) || text[size - 1] != '\n')
        return fail(&k, "truncated (no checksum line at its end)");
    snprintf(sum, sizeof sum, "%016" PRIx64, unit_hash(UNIT_HASH_START, text, size - tail));
    if (memcmp(text + size - tail + 4, sum, 16)) return fail(&k, "checksum mismatch: the file is damaged");
    k.end = text + size - tail;
    if (key(&k, UNIT_MAGIC)) return fail(&k, "not a vijp unit file");
    eol(&k);
    key(&k, "study");
    snprintf(sum, sizeof sum, "%016" PRIx64, study_hash);
    if (!k.bad && ((size_t)(k.end - k.p) < 18 || k.p[0] != ' ' || memcmp(k.p + 1, sum, 16)))
        return fail(&k, "of another study (its parameter hash is not %s)", sum);
    k.p += 17;
    eol(&k);
    key(&k, "unit");
    if (get_uint(&k) != j && !k.bad) return fail(&k, "holds another unit than its name says");
    eol(&k);
    key(&k, "depth");
    size_t D = get_uint(&k);
    eol(&k);
    key(&k, "runs");
    size_t R = get_uint(&k);
    eol(&k);
    if (k.bad) return -1;
    if (D != s->depth || R != 1 + s->n_engines) return fail(&k, "depth %zu and %zu runs, not %zu and %zu", D, R, s->depth, 1 + s->n_engines);
    c->depth = D, c->n_runs = R;
    c->runs = vijp_alloc_array(R, sizeof *c->runs);
    c->kappa = vijp_alloc_array(D, sizeof *c->kappa);
    c->lyap_cum = vijp_alloc_array(D, sizeof *c->lyap_cum);
    c->predicted = vijp_alloc_array(D, sizeof *c->predicted);
    key(&k, "u"), c->u = get_xnum(&k), eol(&k);
    key(&k, "ref"), c->ref_prec_start = get_long(&k), c->ref_prec = get_long(&k);
    c->ref_agreement = get_xnum(&k), c->ref_target = get_xnum(&k), eol(&k);
    key(&k, "rates"), c->lyap_rate = get_double(&k), c->predicted_rate = get_double(&k), eol(&k);
    get_doubles(&k, "kappa", c->kappa, D);
    get_doubles(&k, "lyap_cum", c->lyap_cum, D);
    get_xnums(&k, "predicted", c->predicted, D);
    /* units written before the conditioning could be estimated computed it exactly */
    if (!k.bad && (size_t)(k.end - k.p) > 5 && !memcmp(k.p, "cond ", 5)) get_text(&k, "cond", c->cond_method, sizeof c->cond_method);
    else snprintf(c->cond_method, sizeof c->cond_method, "exact");
    for (size_t r = 0; r < R && !k.bad; r++) {
        vijp_drift_run_result *run = &c->runs[r];
        vijp_engine_kind want = r ? s->engines[r - 1] : VIJP_ENGINE_BACKPROP;
        const char *name = vijp_engine_name(want);
        key(&k, "run");
        size_t n = strlen(name);
        if (!k.bad && ((size_t)(k.end - k.p) < n + 2 || k.p[0] != ' ' || memcmp(k.p + 1, name, n) || k.p[1 + n] != ' '))
            fail(&k, "run %zu is not %s's", r, name);
        if (!k.bad) k.p += 1 + n;
        run->engine = want;
        run->rebuilt = get_uint(&k);
        eol(&k);
        run->g = vijp_alloc_array(D, sizeof *run->g);
        run->theta = vijp_alloc_array(D, sizeof *run->theta);
        run->stored_by_depth = vijp_alloc_array(D, sizeof *run->stored_by_depth);
        get_metrics(&k, "x", &run->x, 1);
        get_metrics(&k, "g", run->g, D);
        get_metrics(&k, "theta", run->theta, D);
        run->bound = get_optional(&k, "bound", D);
        key(&k, "stored");
        for (size_t i = 0; i < D; i++) run->stored_by_depth[i] = get_uint(&k);
        eol(&k);
        run->reconstruction = get_optional(&k, "reconstruction", D);
        get_text(&k, "failure", run->failure, sizeof run->failure);
        get_text(&k, "nonfinite", run->nonfinite, sizeof run->nonfinite);
        if (!k.bad && run->rebuilt > D) fail(&k, "%zu layers rebuilt of %zu", run->rebuilt, D);
    }
    if (!k.bad && k.p != k.end) fail(&k, "unexpected text before the checksum");
    if (k.bad) {
        vijp_drift_curve_clear(c);
        return -1;
    }
    return 0;
}
