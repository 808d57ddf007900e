#include "vijp/memory.h"
#include "grad/problem.h"
#include "profile.h"
#include "engines/stored.h"
#include "base/fork.h"
#include "base/heap.h"
#include "vijp/error.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* The setup of a profile: orthogonal parameters from seed, square loss. */
static vijp_grad_setup profile_setup(const vijp_net *tmpl, size_t batch, uint64_t seed, const vijp_format *f)
{
    return (vijp_grad_setup){.net = tmpl, .depth = tmpl->depth, .width = tmpl->width, .batch = batch, .seed = seed,
                             .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE, .fmt = *f};
}

int vijp_memory_profile_draw(const vijp_net *tmpl, size_t batch, uint64_t seed, vijp_net *net, vijp_error *err)
{
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_grad_setup s = profile_setup(tmpl, batch, seed, &fd);
    return vijp_problem_draw(&s, net, err);
}

/* Engine e's stored bytes against depth on the problem p of net (only
 * read: the engines take their inputs as const). */
static int profile_on(const vijp_net *net, const vijp_problem *p, vijp_engine_kind e, const vijp_engine_opts *o,
                      size_t *bytes, vijp_error *err)
{
    size_t depth = net->depth;
    if (e == VIJP_ENGINE_PURE_FORWARD) /* its counts without its O(n³) tangents (engines/stored.h) */
        return vijp_engine_pure_forward_stored(net, p->theta, &p->X, bytes, err);
    vijp_grads g = {0};
    int rc = vijp_engine_run_opts(e, net, p->theta, &p->X, &p->T, o, &g, err);
    /* Some residuals depend on the values (a relu fragment holds the
     * inactive units): counted from NaN or ∞ they mean nothing. */
    if ((!rc || rc == VIJP_ESINGULAR) && vijp_grads_check_finite(&g, err)) rc = VIJP_ERANGE;
    /* A vijp that lost rank ends the sweep, after the ledger was replayed;
     * h_0 alone makes every depth's count positive, so a profile still
     * zero was not filled. */
    if (rc == VIJP_ESINGULAR)
        rc = g.stored_by_depth && g.stored_by_depth[depth - 1] ? 0
             : vijp_fail(err, VIJP_ESINGULAR, "%s: failed before its stored bytes were counted", vijp_engine_name(e));
    if (!rc) memcpy(bytes, g.stored_by_depth, depth * sizeof *bytes);
    vijp_grads_clear(&g);
    return rc;
}

/* The engines' runs, a range of them a thread. */
typedef struct {
    const vijp_net *net;
    const vijp_problem *p;
    const vijp_engine_kind *e;
    const vijp_engine_opts *o;
    size_t *const *bytes;
    int *rc;
    vijp_error *err;
} engines_job;

static void engines_part(void *ctx, size_t part, size_t begin, size_t end)
{
    const engines_job *J = ctx;
    (void)part;
    for (size_t k = begin; k < end; k++) J->rc[k] = profile_on(J->net, J->p, J->e[k], J->o, J->bytes[k], &J->err[k]);
}

int vijp_memory_profile_engines(const vijp_net *drawn, size_t batch, uint64_t seed, const vijp_format *f,
                                const vijp_engine_kind *e, size_t n, const vijp_engine_opts *o, int threads,
                                size_t *const *bytes, vijp_error *err)
{
    vijp_grad_setup s = profile_setup(drawn, batch, seed, f);
    vijp_net net = *drawn; /* a view, only read */
    net.loss = s.loss;
    vijp_problem p;
    int rc = vijp_problem_setup_drawn(&s, &net, &p, err);
    if (rc) return rc;
    int *rcs = vijp_alloc_array(n ? n : 1, sizeof *rcs);
    vijp_error *errs = vijp_alloc_array(n ? n : 1, sizeof *errs);
    engines_job job = {&net, &p, e, o, bytes, rcs, errs};
    /* each engine's ledger is its own, whichever thread runs it: the bytes do not depend on threads */
    double work = (double)n * (double)net.depth * (double)net.width * (double)net.width * (double)batch;
    vijp_fork(threads, n, work, engines_part, &job);
    size_t first = n; /* the failure of the engine first in vijp_engine_kind's order */
    for (size_t k = 0; k < n; k++)
        if (rcs[k] && (first == n || e[k] < e[first])) first = k;
    if (first < n) {
        rc = rcs[first];
        if (err) *err = errs[first];
    }
    free(rcs), free(errs);
    vijp_problem_clear(&p, &net);
    return rc;
}

int vijp_memory_profile_drawn(const vijp_net *drawn, size_t batch, uint64_t seed, const vijp_format *f,
                              vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes, vijp_error *err)
{
    return vijp_memory_profile_engines(drawn, batch, seed, f, &e, 1, o, 1, &bytes, err);
}

int vijp_memory_profile(const vijp_net *tmpl, size_t batch, uint64_t seed, const vijp_format *f, vijp_engine_kind e,
                        const vijp_engine_opts *o, size_t *bytes, vijp_error *err)
{
    vijp_net net;
    int rc = vijp_memory_profile_draw(tmpl, batch, seed, &net, err);
    if (rc) return rc;
    rc = vijp_memory_profile_drawn(&net, batch, seed, f, e, o, bytes, err);
    vijp_net_free(&net);
    return rc;
}

size_t vijp_memory_deepest(const size_t *bytes, size_t depth, size_t budget)
{
    size_t d = 0;
    for (size_t i = 0; i < depth; i++) /* bytes grow with depth for every engine here, but do not assume it */
        if (bytes[i] <= budget) d = i + 1;
        else break;
    return d;
}

size_t vijp_resident_value_bytes(const vijp_format *f)
{
    if (vijp_format_values_double(f)) return sizeof(double); /* double and the emulated formats (vijp/mat.h) */
    /* a matrix's values are one block: the mpfr_t structs, then their
     * significands (format/mat.c), no size limb, no malloc header each */
    return sizeof(__mpfr_struct) + mpfr_custom_get_size((mpfr_prec_t)f->prec);
}

int vijp_run_bytes_estimate(const vijp_net *net, size_t batch, const vijp_format *f, long ref_prec, double *bytes,
                            vijp_error *err)
{
    vijp_format ref;
    int rc = vijp_format_mpfr(&ref, ref_prec, err);
    if (rc) return rc;
    size_t depth = net->depth;
    /* Values, as doubles so that absurd shapes do not wrap: activations
     * h_0..h_D and the gradients g_i (batch each), parameters θ and ∇θ. */
    double acts = (double)net->width, params = 0;
    for (size_t i = 0; i < depth; i++) {
        acts += (double)net->layers[i].out;
        params += (double)net->layers[i].type->param_count(&net->layers[i]);
    }
    double values = 2 * acts * (double)batch + 2 * params;
    /* The run's values in f, the reference's in ref, and the problem's
     * double master copies (inputs, loss data, parameters). */
    *bytes = values * (double)(vijp_resident_value_bytes(f) + vijp_resident_value_bytes(&ref)) +
             8.0 * (params + 2 * acts / (double)(depth + 1) * (double)batch);
    return 0;
}

/* "Key:   N kB" from /proc/meminfo or /proc/self/status, in bytes; -1 if absent. */
static double proc_kb(const char *file, const char *key)
{
    FILE *in = fopen(file, "r");
    if (!in) return -1;
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, in))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = 1024.0 * strtod(line + n + 1, NULL);
            break;
        }
    fclose(in);
    return v;
}

/* A number from a one-line cgroup file; -1 if absent or "max". */
static double cgroup_value(const char *file)
{
    FILE *in = fopen(file, "r");
    if (!in) return -1;
    char line[64] = "";
    double v = -1;
    if (fgets(line, sizeof line, in) && strncmp(line, "max", 3)) v = strtod(line, NULL);
    fclose(in);
    return v;
}

/* A limit's bytes left: rlim_cur less what /proc/self/status says is in
 * use under it (key); INFINITY when the limit is not set. */
static double limit_left(int resource, const char *key)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) || rl.rlim_cur == RLIM_INFINITY) return INFINITY;
    double used = proc_kb("/proc/self/status", key);
    return (double)rl.rlim_cur - (used > 0 ? used : 0);
}

double vijp_address_space_left(void) { return fmin(limit_left(RLIMIT_AS, "VmSize"), limit_left(RLIMIT_DATA, "VmData")); }

double vijp_memory_available(char *what, size_t what_size)
{
    double best = INFINITY;
    const char *why = "unknown";
    double avail = proc_kb("/proc/meminfo", "MemAvailable");
    if (avail >= 0 && avail < best) best = avail, why = "MemAvailable";
    double max = cgroup_value("/sys/fs/cgroup/memory.max"), cur = cgroup_value("/sys/fs/cgroup/memory.current");
    if (max >= 0 && cur >= 0 && max - cur < best) best = fmax(0, max - cur), why = "the cgroup's memory.max";
    double left = limit_left(RLIMIT_AS, "VmSize");
    if (left < best) best = fmax(0, left), why = "the address-space limit (ulimit -v)";
    if (what) snprintf(what, what_size, "%s", why);
    return best;
}

void vijp_memory_keep_freed(void) { vijp_heap_keep_freed(); }

void vijp_memory_return_freed(void) { vijp_heap_return_freed(); }
