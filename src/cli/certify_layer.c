/* vijp certify's layer at points (certify_cli.h): the one-layer net set
 * up from --layer, --params and --input, its samples certified (shared out
 * under mpirun), and the reports, table or JSON, that the other parts of
 * the command (certify.c's --jacobian, certify_net.c) print too. */
#include "cli.h"
#include "certify_cli.h"
#include "mpi/mpi.h"
#include "study/certify_job.h"
#include "study/progress.h"
#include "study/stats.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vijp_verdict overall_verdict(const certify_results *r, size_t *certified)
{
    size_t not_sub = 0;
    *certified = 0;
    for (size_t k = 0; k < r->n; k++) {
        *certified += r->c[k].verdict == VIJP_CERTIFIED_SUBMERSIVE;
        not_sub += r->c[k].verdict == VIJP_NOT_SUBMERSIVE;
    }
    return *certified == r->n ? VIJP_CERTIFIED_SUBMERSIVE : not_sub ? VIJP_NOT_SUBMERSIVE : VIJP_INCONCLUSIVE;
}

static const char *overall(const certify_results *r, size_t *certified)
{
    return vijp_verdict_name(overall_verdict(r, certified));
}

static json_t *activation_json(const vijp_activation_report *a)
{
    json_t *bad = json_array(), *fm = json_array();
    for (size_t i = 0; i < a->n_bad; i++) json_array_append_new(bad, json_pack("[o, o]", certify_json_num(a->bad[i].lo), certify_json_num(a->bad[i].hi)));
    for (size_t k = 0; k < a->n_fmt; k++)
        json_array_append_new(fm, json_pack("{s:s, s:o, s:o}", "format", a->fmt[k].format, "underflow_at",
                                            certify_json_num(a->fmt[k].underflow_at), "negligible_at", certify_json_num(a->fmt[k].negligible_at)));
    return json_pack("{s:f, s:f, s:b, s:b, s:I, s:o, s:o}", "range", a->R, "tol", a->tol, "complete", a->complete,
                     "submersive_everywhere", a->complete && a->n_bad == 0, "boxes", (json_int_t)a->boxes,
                     "derivative_may_vanish", bad, "formats", fm);
}

/* o: the keys that say what was certified; the verdict's are added. */
void certify_add_verdicts(json_t *o, const certify_results *r, const vijp_activation_report *act)
{
    size_t certified;
    const char *verdict = overall(r, &certified);
    double smin = INFINITY, lo_s = INFINITY, smax = 0, cond = 0;
    int all = 1;
    size_t rank = SIZE_MAX, cok = 0, num_cok = 0;
    int cok_proven = 1; /* the largest cokernel_dim is proven when every point's is */
    const char *method = r->c[0].method;
    json_t *points = json_array();
    for (size_t k = 0; k < r->n; k++) {
        const vijp_certificate *c = &r->c[k];
        smin = fmin(smin, c->num.sigma_min), smax = fmax(smax, c->num.sigma_max), cond = fmax(cond, c->num.condition);
        all &= c->verdict == VIJP_CERTIFIED_SUBMERSIVE && !isnan(c->s);
        if (all) lo_s = fmin(lo_s, c->s);
        if (c->num.rank < rank) rank = c->num.rank;
        if (c->cokernel_dim > cok) cok = c->cokernel_dim;
        if (c->num.cokernel_dim > num_cok) num_cok = c->num.cokernel_dim;
        cok_proven &= c->cokernel_proven;
        if (strcmp(method, c->method)) method = "mixed";
        json_array_append_new(
            points, json_pack("{s:I, s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:I, s:o, s:I, s:b, s:I, s:b, s:o, s:s}", "sample",
                              (json_int_t)k + 1, "verdict", vijp_verdict_name(c->verdict), "method", c->method,
                              "sigma_min_lower_bound", certify_json_num(c->verdict == VIJP_CERTIFIED_SUBMERSIVE ? c->s : NAN),
                              "prec", (json_int_t)c->prec, "sigma_min", certify_json_num(c->num.sigma_min), "sigma_max",
                              certify_json_num(c->num.sigma_max), "condition", certify_json_num(c->num.condition), "rank",
                              (json_int_t)c->num.rank, "rank_tol", certify_json_num(c->num.rank_tol), "cokernel_dim",
                              (json_int_t)c->cokernel_dim, "cokernel_proven", c->cokernel_proven,
                              "numerical_cokernel_dim", (json_int_t)c->num.cokernel_dim,
                              "numerically_degenerate", c->num.rank < c->num.m, "enclosure_radius",
                              certify_json_num(c->enclosure_radius), "reason", c->reason));
    }
    json_object_update_new(o, json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:I, s:I, s:b, s:I, s:s, s:o}", "verdict", verdict,
                                    "samples_certified", (json_int_t)certified, "sigma_min_lower_bound",
                                    certify_json_num(all ? lo_s : NAN), "sigma_min", certify_json_num(smin), "sigma_max", certify_json_num(smax), "condition",
                                    certify_json_num(cond), "rank", (json_int_t)rank, "cokernel_dim", (json_int_t)cok, "cokernel_proven",
                                    cok_proven, "numerical_cokernel_dim", (json_int_t)num_cok, "method", method, "points",
                                    points));
    if (act) json_object_set_new(o, "activation", activation_json(act));
}

void print_json(json_t *o)
{
    json_dumpf(o, cli_out(), JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', cli_out());
    json_decref(o);
}

/* A line per certificate (and its reason), then a blank line. */
void certify_print_rows(const certify_results *r)
{
    FILE *out = cli_out();
    fprintf(out, "%6s  %-21s %-19s %11s %11s %11s %11s %9s %9s\n", "sample", "verdict", "method", "s (proven)", "σ_min",
           "σ_max", "κ", "rank", "cokernel");
    for (size_t k = 0; k < r->n; k++) {
        const vijp_certificate *c = &r->c[k];
        char rk[32], ck[32];
        snprintf(rk, sizeof rk, "%zu/%zu", c->num.rank, c->num.m);
        snprintf(ck, sizeof ck, "%zu%s", c->cokernel_dim, c->cokernel_dim ? (c->cokernel_proven ? " proven" : " numer.") : "");
        char sb[16] = "-"; /* no proven bound (not certified, or analytic without one): not a number */
        if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && isfinite(c->s)) snprintf(sb, sizeof sb, "%.4g", c->s);
        fprintf(out, "%6zu  %-21s %-19s %11s %11.4g %11.4g %11.4g %9s %9s\n", k + 1, vijp_verdict_name(c->verdict),
               c->method, sb, c->num.sigma_min, c->num.sigma_max, c->num.condition, rk, ck);
        if (c->reason[0]) fprintf(out, "        %s\n", c->reason);
        if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && c->num.rank < c->num.m)
            fprintf(out, "        numerically degenerate in double: LAPACK's rank is %zu < %zu at tolerance %.3g\n",
                   c->num.rank, c->num.m, c->num.rank_tol);
    }
    fputc('\n', out);
}

static void print_table(const char *spec, const vijp_layer *L, uint64_t seed, const char *params, const char *points,
                        const certify_results *r, const vijp_activation_report *act, int verbose)
{
    size_t certified;
    const char *verdict = overall(r, &certified);
    fprintf(cli_out(), "layer %s (%zu → %zu), %zu samples, seed %llu, %s, points %s\n\n", spec, L->in, L->out, r->n,
            (unsigned long long)seed, params, points);
    if (verbose || r->n <= 20) certify_print_rows(r);
    double *smin = vijp_alloc_array(r->n, sizeof *smin), *s = vijp_alloc_array(r->n, sizeof *s);
    for (size_t k = 0; smin && s && k < r->n; k++) {
        smin[k] = r->c[k].num.sigma_min;
        s[k] = r->c[k].verdict == VIJP_CERTIFIED_SUBMERSIVE ? r->c[k].s : NAN;
    }
    spread a = spread_of(smin, r->n), b = spread_of(s, r->n);
    fprintf(cli_out(), "verdict: %s — %zu of %zu samples certified submersive\n", verdict, certified, r->n);
    fprintf(cli_out(), "σ_min (LAPACK): min %.4g, median %.4g, max %.4g\n", a.min, a.median, a.max);
    if (!isnan(b.median)) fprintf(cli_out(), "proven s:       min %.4g, median %.4g, max %.4g\n", b.min, b.median, b.max);
    free(smin), free(s);
    if (!act) return;
    fprintf(cli_out(), "\nf′ over [−%g, %g] (interval bisection, %zu boxes%s): ", act->R, act->R, act->boxes,
           act->complete ? "" : ", budget exhausted");
    if (act->complete && !act->n_bad) fprintf(cli_out(), "submersive everywhere on [−%g, %g]\n", act->R, act->R);
    else {
        fprintf(cli_out(), "f′ may vanish on\n");
        for (size_t i = 0; i < act->n_bad; i++) fprintf(cli_out(), "  [%.17g, %.17g]\n", act->bad[i].lo, act->bad[i].hi);
    }
    int w = 17; /* the longest default name, bfloat16+binary32; longer ones given with --formats widen it */
    for (size_t k = 0; k < act->n_fmt; k++)
        if ((int)strlen(act->fmt[k].format) > w) w = (int)strlen(act->fmt[k].format);
    fprintf(cli_out(), "%-*s  %-26s  %s\n", w, "format", "computed f′ = 0 from |x| ≈", "f′ < u·max f′ from |x| ≈");
    for (size_t k = 0; k < act->n_fmt; k++) { /* ∞: f′ never reaches 0 (or negligible) in the format */
        char u[32] = "never", g[32] = "never";
        if (isfinite(act->fmt[k].underflow_at)) snprintf(u, sizeof u, "%.6g", act->fmt[k].underflow_at);
        if (isfinite(act->fmt[k].negligible_at)) snprintf(g, sizeof g, "%.6g", act->fmt[k].negligible_at);
        fprintf(cli_out(), "%-*s  %-26s  %s\n", w, act->fmt[k].format, u, g);
    }
    fprintf(cli_out(), "(where f′ is 0 or negligible the layer is numerically non-submersive even if analytically submersive)\n");
}

/* Size a certification first.  Per point: the parameters (P), the
 * Jacobian's enclosure (midpoint, radius), LAPACK's copy, U, Vᵀ and the Gram
 * matrix JJᵀ in double, and JJᵀ again in MPFR at 256 bits for the first step
 * of the proof's climb (higher steps are not counted). */
int certify_fits(double m, double n, double P)
{
    vijp_format p256;
    vijp_error e;
    double per = vijp_format_mpfr(&p256, 256, &e) ? 64 : (double)vijp_resident_value_bytes(&p256);
    return cli_memory_fits("certify", 8 * (P + 3 * m * n + 2 * m * m + n * n) + m * m * per);
}

/* --input's points and --params' θ into the built one-layer net; the number
 * of samples becomes the number of points. */
static int read_user_point(const certify_args *a, vijp_net *net, vijp_array *xin, size_t *samples, vijp_error *err)
{
    const vijp_layer *L = &net->layers[0];
    size_t P = L->type->param_count(L);
    vijp_array th = {0};
    char got[128];
    if (a->input && !vijp_npy_read_rows(a->input, L->in, 0, xin, err)) {
        if (xin->shape[0] > 100000)
            vijp_fail(err, VIJP_EDIM, "--input %s: %zu points, more than the 100000 certify takes", a->input, xin->shape[0]);
        else *samples = xin->shape[0], err->code = 0;
    }
    if (!err->code && a->params && !vijp_npy_read(a->params, &th, err)) {
        vijp_array_shape_str(th.ndim, th.shape, got, sizeof got);
        if (th.ndim != 1 || th.len != P)
            vijp_fail(err, VIJP_EDIM, "--params %s: shape %s, want (%zu,) (θ in %s's order)", a->params, got, P, L->type->name);
        else {
            if (P) memcpy(net->theta[0], th.data, P * sizeof *th.data);
            if (!net->given) net->given = vijp_alloc_array(1, 1);
            net->given[0] = 1; /* vijp_net_init leaves it */
        }
    }
    vijp_array_clear(&th);
    return err->code;
}

/* The layer of --layer, sized before it is built, its parameters drawn or
 * given, and the user's points: -1 to go on (net and xin then hold them),
 * or the exit status with nothing held. */
int certify_setup_layer(const certify_args *a, vijp_net *net, vijp_array *xin, size_t *samples, vijp_error *err)
{
    /* Dense layers know their input width from the spec, a JSON net (one
     * layer, with or without parameters) from its file; others default to 16. */
    size_t w0 = a->width ? a->width : strncmp(a->spec, "dense", 5) && !vijp_net_spec_is_json(a->spec) ? 16 : 0;
    if (vijp_net_shape(net, a->spec, 1, w0, err)) return cli_usage_error("vijp certify", err);
    const vijp_layer *L = &net->layers[0];
    double m = (double)L->out, n = (double)L->in, P = (double)L->type->param_count(L);
    vijp_net_free(net);
    if (!certify_fits(m, n, P)) return EXIT_USAGE;
    if (vijp_net_build(net, a->spec, 1, w0, err)) return cli_usage_error("vijp certify", err);
    if (vijp_net_init(net, a->init, a->seed, err) || ((a->input || a->params) && read_user_point(a, net, xin, samples, err))) {
        vijp_array_clear(xin);
        vijp_net_free(net);
        return cli_usage_error("vijp certify", err);
    }
    return -1;
}

/* Where --layer's θ and points came from, as the command line says. */
void certify_layer_sources(const certify_args *a, const vijp_net *net, certify_sources *src)
{
    src->label = a->spec;
    if (a->params) snprintf(src->params, sizeof src->params, "parameters from %s", a->params);
    else if (net->given && net->given[0]) snprintf(src->params, sizeof src->params, "parameters from %s", a->spec);
    else snprintf(src->params, sizeof src->params, "%s parameters", a->init_name);
    src->params_json = a->params ? a->params : net->given && net->given[0] ? a->spec : a->init_name;
    if (a->input) snprintf(src->points, sizeof src->points, "from %s", a->input);
    else snprintf(src->points, sizeof src->points, "%g·N(0,1)", a->scale);
}

int certify_samples(const mpi_world *w, const certify_args *a, const certify_sources *src, vijp_net *net,
                    const vijp_array *xin, size_t samples, json_t *collect, vijp_verdict *verdict)
{
    const vijp_layer *L = &net->layers[0];
    vijp_error err = {0};
    certify_results r = {vijp_alloc_array(samples, sizeof *r.c), 0};
    double *x = vijp_alloc_array(L->in, sizeof *x);
    progress meter;
    progress_start(&meter, !w->rank && progress_wanted_here(0, a->quiet) ? stderr : NULL, samples, "samples", NULL);
    certify_job job = {.net = net, .init = a->init, .seed = a->seed, .co = &a->co, .input = xin->data, .scale = a->scale,
                       .x = x, .samples = samples, .meter = &meter};
    certify_seed_points(&job.rng, a->seed);
    int rc = mpi_certify_run(w, &job, r.c, &r.n, &err);
    progress_end(&meter);
    vijp_activation_report act;
    int have_act = 0;
    if (!w->rank && !rc && vijp_deriv_enclose_of(L->type)) {
        double tol = a->range * 1e-12 > 1e-9 ? a->range * 1e-12 : 1e-9;
        have_act = !(rc = a->n_fmts ? vijp_activation_analyze_in(L, net->theta[0], a->range, tol, a->fmts, a->n_fmts, &act, &err)
                                    : vijp_activation_analyze(L, net->theta[0], a->range, tol, &act, &err));
    }
    if (!w->rank && !rc && a->json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:s?}", "layer", src->label, "in", (json_int_t)L->in,
                              "out", (json_int_t)L->out, "samples", (json_int_t)r.n, "seed", (json_int_t)a->seed,
                              "parameters", src->params_json, "input", a->input);
        certify_add_verdicts(o, &r, have_act ? &act : NULL);
        if (collect) json_array_append_new(collect, o);
        else print_json(o);
    } else if (!w->rank && !rc) {
        print_table(src->label, L, a->seed, src->params, src->points, &r, have_act ? &act : NULL, a->verbose);
    }
    size_t certified = 0;
    if (!w->rank && !rc) {
        vijp_verdict v = overall_verdict(&r, &certified);
        if (verdict) *verdict = v;
    }
    for (size_t k = 0; k < r.n; k++) vijp_certificate_clear(&r.c[k]);
    free(r.c), free(x);
    if (have_act) vijp_activation_report_clear(&act);
    if (w->rank) return EXIT_OK; /* the other ranks' part is done: rank 0 prints */
    if (rc) {
        fprintf(stderr, "vijp certify: %s\n", err.msg);
        return rc == VIJP_EDECLARATION ? 3 : rc == VIJP_EINVAL || rc == VIJP_EDIM || rc == VIJP_EDOMAIN ? EXIT_USAGE : EXIT_FAILED;
    }
    return certified == samples ? EXIT_OK : EXIT_FAILED;
}
