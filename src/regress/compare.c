/* vijp regress: what differs in a curve, which way, and whether it fails.
 *
 * Bit-reproducible formats (the MPFR emulations and mpfr:P) are compared
 * exactly: each metric that differs anywhere is a finding, whose direction is
 * that of its worst value over the layers (the largest error or byte count,
 * the fewest rebuilt layers): worse if it grew, better if it shrank, changed
 * if it stayed while other layers moved.  One layer's value says little, since
 * a changed rounding moves single layers' errors both ways (the old output
 * called one ulp more on every vijp "changed" at the first layer that moved,
 * an improvement there).  Such a curve is worse or better only when all its
 * findings agree, changed otherwise.
 *
 * double goes through BLAS/LAPACK, whose results depend on the machine, so a
 * double curve is judged over its seeds with tolerances, both ways, and is
 * worse when any finding is.
 *
 * What fails: worse and changed; better with --strict, where the curve is
 * compared exactly.  Even so a pure change of rounding comes out better on
 * many curves (one ulp more on every vijp: 16 of the 48 changed curves of
 * `make regress`'s study), which is why that target runs with --strict.  A
 * curve judged with tolerances (double, FORMAT@SET, or any under
 * --tolerant) that comes out better has met another BLAS build, or was
 * asked to be judged loosely: reported, never failed, so that a baseline
 * holds on the machines it is checked on. */
#include "regress.h"
#include "base/xnum_json.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int higher_is_better(const char *metric) { return !strcmp(metric, "rebuilt") || !strcmp(metric, "safe_depth"); }

/* A measurement (regress_value): at any exponent, or as a double where
 * the tolerant comparison averages logarithms of double results. */
static double num(json_t *x, int higher) { return vijp_xnum_double(regress_value(x, higher)); }
static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }
/* c / b as a double (a factor: ±Inf or NaN where it has none). */
static double factor_of(vijp_xnum c, vijp_xnum b) { return vijp_xnum_double(vijp_xnum_div(c, b)); }
/* sign · a > sign · b, sign ±1, on non-NaN values */
static int beyond(double sign, vijp_xnum a, vijp_xnum b) { return sign > 0 ? vijp_xnum_cmp(a, b) > 0 : vijp_xnum_cmp(a, b) < 0; }

static int fails_as(const char *direction, const regress_opts *o, int exact)
{
    return !strcmp(direction, "worse") || !strcmp(direction, "changed") ||
           (o->strict && exact && !strcmp(direction, "better"));
}

/* A finding: seed -1 for one over the curve's seeds, layer 0 for none. */
static void add(regress_curve *u, const regress_opts *o, const char *metric, long layer, json_int_t seed, vijp_xnum b,
                vijp_xnum c, const char *direction, const char *why)
{
    json_t *f = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:b, s:b, s:s}", "curve",
                          u->name, "config", u->config, "spec", u->spec, "init", u->init, "format", u->format, "engine",
                          u->engine, "seed", seed >= 0 ? json_integer(seed) : json_null(), "seeds",
                          seed >= 0 ? json_pack("[I]", seed) : json_deep_copy(u->seeds), "metric", metric, "layer",
                          layer ? json_integer(layer) : json_null(), "baseline", vijp_xnum_to_json(b), "current",
                          vijp_xnum_to_json(c), "factor", jnum(factor_of(c, b)), "direction", direction, "exact", u->exact, "fails", fails_as(direction, o, u->exact), "why", why);
    json_array_append_new(u->findings, f);
}

/* Two values as text, with as many digits as it takes to tell them apart. */
static void pair_text(vijp_xnum b, vijp_xnum c, char *bb, char *cb, size_t size)
{
    for (int p = 4; p <= 17; p++) {
        char fmt[16];
        snprintf(fmt, sizeof fmt, "%%.%dg", p);
        if (vijp_xnum_isfinite(b)) vijp_xnum_snprintf(bb, size, fmt, b);
        else snprintf(bb, size, "non-finite");
        if (vijp_xnum_isfinite(c)) vijp_xnum_snprintf(cb, size, fmt, c);
        else snprintf(cb, size, "non-finite");
        if (vijp_xnum_cmp(b, c) == 0 || strcmp(bb, cb)) return;
    }
}

/* current/baseline, with the digits it takes not to read as 1. */
static void factor_text(double f, char *buf, size_t size)
{
    if (!isfinite(f)) {
        snprintf(buf, size, "×%s", isnan(f) ? "?" : "inf");
        return;
    }
    for (int p = 3; p <= 17; p++) {
        snprintf(buf, size, "×%.*g", p, f);
        if (f == 1 || strcmp(buf, "×1")) return;
    }
}

/* One metric compared exactly: b and c are per-layer arrays, or scalars. */
static void exact_metric(regress_curve *u, const regress_opts *o, const char *metric, json_t *b, json_t *c)
{
    int higher = higher_is_better(metric), per_layer = json_is_array(b) || json_is_array(c);
    size_t nb = per_layer ? json_array_size(b) : 1, nc = per_layer ? json_array_size(c) : 1, n = nb > nc ? nb : nc;
    size_t first = n, ib = n, ic = n; /* the first layer that moved; where each file's worst value is */
    double sign = higher ? -1 : 1;
    vijp_xnum wb = vijp_xnum_of(0), wc = wb;
    for (size_t i = 0; i < n; i++) {
        json_t *xb = per_layer ? json_array_get(b, i) : b, *xc = per_layer ? json_array_get(c, i) : c;
        if ((!xb || json_is_null(xb)) && (!xc || json_is_null(xc)))
            continue; /* non-finite in both, or theta of a layer without parameters */
        vijp_xnum vb = regress_value(xb, higher), vc = regress_value(xc, higher);
        if (vijp_xnum_cmp(vb, vc) && first == n) first = i;
        if (ib == n || beyond(sign, vb, wb)) ib = i, wb = vb;
        if (ic == n || beyond(sign, vc, wc)) ic = i, wc = vc;
    }
    if (first == n) return;
    const char *direction = beyond(sign, wc, wb) ? "worse" : beyond(sign, wb, wc) ? "better" : "changed";
    /* the layer of the new worst value (worse), of the old one (better), or the first that moved */
    size_t at = direction[0] == 'w' ? ic : direction[0] == 'b' ? ib : first;
    vijp_xnum vb = regress_value(per_layer ? json_array_get(b, at) : b, higher),
              vc = regress_value(per_layer ? json_array_get(c, at) : c, higher);
    char why[256], tb[32], tc[32];
    pair_text(wb, wc, tb, tc, sizeof tb);
    if (!per_layer)
        snprintf(why, sizeof why, "bit-reproducible format, compared exactly: %s", direction[0] == 'w' ? "got worse" : "improved");
    else if (direction[0] == 'c')
        snprintf(why, sizeof why, "bit-reproducible format, compared exactly: the worst value over the layers (%s at layer "
                 "%zu) is the same, other layers moved", tb, ib + 1);
    else
        snprintf(why, sizeof why, "bit-reproducible format, compared exactly: worst over the layers %s at layer %zu → %s at "
                 "layer %zu", tb, ib + 1, tc, ic + 1);
    add(u, o, metric, per_layer ? (long)at + 1 : 0, u->seed, vb, vc, direction, why);
}

static void exact_curve(regress_curve *u, const regress_opts *o)
{
    json_t *br = regress_engine_run(regress_seed_entry(u->bc, u->seed), u->engine),
           *cr = regress_engine_run(regress_seed_entry(u->cc, u->seed), u->engine);
    static const char *const parts[] = {"g", "theta", "x"}, *const ms[] = {"rel", "ulps", "angle_deg"};
    for (int p = 0; p < 3; p++)
        for (int m = 0; m < 3; m++) {
            char metric[32];
            snprintf(metric, sizeof metric, "%s.%s", parts[p], ms[m]);
            exact_metric(u, o, metric, json_object_get(json_object_get(br, parts[p]), ms[m]),
                         json_object_get(json_object_get(cr, parts[p]), ms[m]));
        }
    exact_metric(u, o, "rebuilt", json_object_get(br, "rebuilt"), json_object_get(cr, "rebuilt"));
    exact_metric(u, o, "stored_bytes", json_object_get(br, "stored_bytes"), json_object_get(cr, "stored_bytes"));
}

/* key of this engine's run in every compared seed, in both files. */
static void gather(const regress_curve *u, const char *key, double *b, double *c)
{
    int higher = higher_is_better(key);
    for (size_t k = 0; k < json_array_size(u->seeds); k++) {
        json_int_t s = regress_int(json_array_get(u->seeds, k));
        b[k] = num(json_object_get(regress_engine_run(regress_seed_entry(u->bc, s), u->engine), key), higher);
        c[k] = num(json_object_get(regress_engine_run(regress_seed_entry(u->cc, s), u->engine), key), higher);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* double: one seed's worst error is one draw of the rounding noise (another
 * BLAS kernel, or a last-bit change in the weights, moves it by up to ~2×),
 * so a curve is judged over its seeds: the geometric mean of the worst errors
 * may grow by at most factor, the median safe depth may drop by at most drop,
 * and no seed may fail its vijp earlier than before; the same the other way
 * round is better.  Errors are compared from NOISE_ULPS unit roundoffs up: a
 * worst error of a few u is a handful of roundings, and OpenBLAS's Prescott
 * kernel instead of Haswell doubles backprop's 4u worst error on the CI study
 * (measured).  And up to 1 only: a worst error past 100% has no digit left,
 * and its size is the noise of a blow-up (the same kernels halve the CI
 * study's 1e9 Moonwalk errors on dense:16,leaky:0.1, gaussian: measured);
 * a blow-up from below 1 shows as at most ×2 of one seed here, and in the
 * safe depth and the rebuilt layers.  Formats whose floor is near 1
 * already (FP8: 16u is 1 or 2, under --tolerant) keep a range of 16× above
 * it. */
#define NOISE_ULPS 16
#define NO_DIGIT_LEFT 1.0

/* log of a worst error within [floor_u, max(NO_DIGIT_LEFT, 16·floor_u)] */
static double log_clamped(double e, double floor_u)
{
    return log(fmin(fmax(e, floor_u), fmax(NO_DIGIT_LEFT, 16 * floor_u)));
}

static void tolerant_curve(regress_curve *u, const regress_opts *o)
{
    size_t n = json_array_size(u->seeds);
    double *b = vijp_alloc_array(n, sizeof *b), *c = vijp_alloc_array(n, sizeof *c);
    double floor_u = NOISE_ULPS * num(json_object_get(u->bc, "unit_roundoff"), 0), lb = 0, lc = 0;
    char why[256], seeds[128];
    regress_seed_list(u->seeds, "seed", seeds, sizeof seeds);
    gather(u, "err_max", b, c);
    for (size_t k = 0; k < n; k++) lb += log_clamped(b[k], floor_u), lc += log_clamped(c[k], floor_u);
    double gb = exp(lb / (double)n), gc = exp(lc / (double)n);
    if (gc > o->factor * gb || gb > o->factor * gc) {
        snprintf(why, sizeof why, "worst error, geometric mean over %s (from %d u up to 1 or %d u): allowed ×%g "
                 "either way", seeds, NOISE_ULPS, 16 * NOISE_ULPS, o->factor);
        add(u, o, "err_max", 0, -1, vijp_xnum_of(gb), vijp_xnum_of(gc), gc > gb ? "worse" : "better", why);
    }
    gather(u, "safe_depth", b, c);
    double mb = median(b, n), mc = median(c, n);
    if (mc < floor((1 - o->drop) * mb) || mb < floor((1 - o->drop) * mc)) {
        snprintf(why, sizeof why, "median safe depth over %s: allowed %.0f%% less either way", seeds, 100 * o->drop);
        add(u, o, "safe_depth", 0, -1, vijp_xnum_of(mb), vijp_xnum_of(mc), mc < mb ? "worse" : "better", why);
    }
    gather(u, "rebuilt", b, c);
    for (size_t k = 0; k < n; k++)
        if (b[k] != c[k])
            add(u, o, "rebuilt", 0, regress_int(json_array_get(u->seeds, k)), vijp_xnum_of(b[k]), vijp_xnum_of(c[k]),
                c[k] < b[k] ? "worse" : "better", c[k] < b[k] ? "the vijp now fails earlier" : "the vijp now fails later");
    free(b), free(c);
}

void regress_compare(regress_result *r, const regress_opts *o)
{
    for (size_t i = 0; i < r->n; i++) {
        regress_curve *u = &r->v[i];
        u->findings = json_array();
        if (u->skipped) continue;
        if (u->exact) exact_curve(u, o);
        else tolerant_curve(u, o);
        int worse = 0, changed = 0, better = 0;
        size_t k;
        json_t *f;
        json_array_foreach(u->findings, k, f) {
            const char *d = json_string_value(json_object_get(f, "direction"));
            worse |= d[0] == 'w', changed |= d[0] == 'c', better |= d[0] == 'b';
            u->fails |= json_is_true(json_object_get(f, "fails"));
        }
        /* Compared exactly, a curve is worse or better only when all its
         * metrics agree; both ways, or a worst value that stayed, is a change
         * without a direction.  With tolerances, any worse finding decides. */
        if (u->exact) u->status = worse + changed + better == 0 ? "unchanged" : changed || (worse && better) ? "changed"
                                                                              : worse ? "worse" : "better";
        else u->status = worse ? "worse" : better ? "better" : "unchanged";
        r->worse += u->status[0] == 'w', r->changed += u->status[0] == 'c', r->better += u->status[0] == 'b';
        r->unchanged += u->status[0] == 'u';
        r->failing += u->fails;
    }
}

/* How bad a finding is: its factor, turned round where higher is better. */
static double badness(json_t *f)
{
    int higher = higher_is_better(json_string_value(json_object_get(f, "metric")));
    vijp_xnum b = regress_value(json_object_get(f, "baseline"), higher), c = regress_value(json_object_get(f, "current"), higher);
    double x = higher ? factor_of(b, c) : factor_of(c, b);
    return isnan(x) ? INFINITY : x;
}

static void finding_text(json_t *f, int with_direction, char *buf, size_t size)
{
    const char *metric = json_string_value(json_object_get(f, "metric"));
    int higher = higher_is_better(metric);
    vijp_xnum b = regress_value(json_object_get(f, "baseline"), higher), c = regress_value(json_object_get(f, "current"), higher);
    char tb[32], tc[32], tf[32], where[64] = "";
    pair_text(b, c, tb, tc, sizeof tb);
    factor_text(factor_of(c, b), tf, sizeof tf);
    json_t *layer = json_object_get(f, "layer"), *seed = json_object_get(f, "seed");
    if (json_is_integer(layer)) snprintf(where, sizeof where, " at layer %lld", (long long)json_integer_value(layer));
    else if (!json_is_true(json_object_get(f, "exact")) && json_is_integer(seed))
        snprintf(where, sizeof where, " (seed %lld)", (long long)json_integer_value(seed));
    snprintf(buf, size, "%s%s: %s → %s (%s)%s%s", metric, where, tb, tc, tf, with_direction ? ", " : "",
             with_direction ? json_string_value(json_object_get(f, "direction")) : "");
}

void regress_describe_finding(json_t *f, char *buf, size_t size) { finding_text(f, 1, buf, size); }

void regress_describe(const regress_curve *c, char *buf, size_t size)
{
    /* The headline: the worst finding of a worse or changed curve, the
     * largest gain of a better one, else the first. */
    size_t k, head = 0, n = json_array_size(c->findings), at, shown = 0;
    char want = c->status[0] == 'b' ? 'b' : 'w';
    json_t *f, *h;
    json_array_foreach(c->findings, k, f) {
        const char *d = json_string_value(json_object_get(f, "direction"));
        h = json_array_get(c->findings, head);
        if (d[0] != want) continue;
        if (json_string_value(json_object_get(h, "direction"))[0] != want || (want == 'w' && badness(f) > badness(h)) ||
            (want == 'b' && badness(f) < badness(h)))
            head = k;
    }
    h = json_array_get(c->findings, head);
    finding_text(h, strcmp(json_string_value(json_object_get(h, "direction")), c->status), buf, size);
    at = strlen(buf);
    json_array_foreach(c->findings, k, f) {
        if (k == head || at >= size) continue;
        if (shown == 3) {
            snprintf(buf + at, size - at, " and %zu more", n - 1 - shown);
            break;
        }
        char tf[32];
        const char *d = json_string_value(json_object_get(f, "direction"));
        int higher = higher_is_better(json_string_value(json_object_get(f, "metric")));
        vijp_xnum b = regress_value(json_object_get(f, "baseline"), higher),
                  cv = regress_value(json_object_get(f, "current"), higher);
        factor_text(factor_of(cv, b), tf, sizeof tf);
        at += (size_t)snprintf(buf + at, size - at, "%s%s %s%s%s", shown ? ", " : "; also ",
                               json_string_value(json_object_get(f, "metric")), tf, strcmp(d, c->status) ? " " : "",
                               strcmp(d, c->status) ? d : "");
        shown++;
    }
}

void regress_summary(const regress_result *r, char *buf, size_t size)
{
    snprintf(buf, size, "%zu curve%s worse, %zu better, %zu changed, %zu unchanged; compared %zu of %zu curves: %zu regression%s",
             r->worse, r->worse == 1 ? "" : "s", r->better, r->changed, r->unchanged, r->compared, r->n, r->failing,
             r->failing == 1 ? "" : "s");
}
