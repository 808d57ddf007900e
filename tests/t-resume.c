/* --resume (src/report/resume.h): a study killed midway continues from the
 * curves it finished, and its report is byte for byte the report of an
 * uninterrupted run; a changed study refuses to resume; damaged units are
 * recomputed; without --resume kept units are discarded.  And the unit text
 * itself (src/study/unit_io.h) round-trips every double bit for bit. */
#include "fixtures/clirun.h"
#include "study/unit_io.h"
#include "vijp/array_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2 nets × 4 formats × 2 seeds = 16 units of a few milliseconds each, with
 * every kind of field a unit holds: an emulated format, double, mpfr:P;
 * Moonwalk (its bound), reversible (its reconstruction) and checkpoint. */
#define STUDY "--net dense:6,tanh --net dense:6,leaky:0.5 --depth 10 --formats binary32,double,mpfr:64,bfloat16 " \
              "--seeds 1,2 --engines moonwalk,reversible,checkpoint --jobs 2"
#define UNITS 16

typedef struct {
    char base[256], out[300], ref[300], units[300];
} place;

static void place_make(place *p)
{
    make_temp_dir(p->base, sizeof p->base, "resume");
    snprintf(p->out, sizeof p->out, "%s/out", p->base);
    snprintf(p->ref, sizeof p->ref, "%s/ref", p->base);
    snprintf(p->units, sizeof p->units, "%s/.out.vijp-units", p->base);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* vijp drift STUDY EXTRA --out OUT, with env ("NAME=VALUE" or "") set. */
static run_result drift(const place *p, const char *env, const char *extra)
{
    char args[2048];
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through `make check`");
    snprintf(args, sizeof args, "%s '%s' drift " STUDY " %s --out '%s'", env, bin, extra, p->out);
    return run_bin("/usr/bin/env", args);
}

static int same_tree(const char *a, const char *b)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null 2>&1", a, b);
    return system(cmd) == 0;
}

static size_t count_units(const place *p)
{
    size_t n = 0;
    char path[400];
    for (size_t j = 0; j < UNITS; j++) {
        snprintf(path, sizeof path, "%s/unit-%zu", p->units, j);
        n += exists(path);
    }
    return n;
}

/* The reference report (uninterrupted, moved to REF), then a run killed
 * after `after` units: nothing at OUT, the units beside it. */
static void reference_then_killed(const place *p, int after)
{
    run_result r = drift(p, "", "");
    ck_assert_msg(r.rc == CLI_OK, "uninterrupted run: exit %d: %s", r.rc, r.err);
    ck_assert_msg(!exists(p->units), "a finished run left its units at %s", p->units);
    ck_assert(rename(p->out, p->ref) == 0);
    run_free(&r);
    char env[64];
    snprintf(env, sizeof env, "VIJP_KILL_AFTER_UNITS=%d", after);
    r = drift(p, env, "");
    ck_assert_msg(r.rc == 128 + 9, "VIJP_KILL_AFTER_UNITS=%d: exit %d, not killed: %s", after, r.rc, r.err);
    ck_assert_msg(!exists(p->out), "a killed run left a report folder");
    /* One unit per worker may have finished after the N-th, before the kill. */
    size_t kept = count_units(p);
    ck_assert_msg(kept >= (size_t)after && kept <= (size_t)after + 1, "%zu units kept, %d expected", kept, after);
    run_free(&r);
}

START_TEST(killed_study_resumes_byte_identical)
{
    place p;
    place_make(&p);
    reference_then_killed(&p, 5);
    size_t kept = count_units(&p);
    run_result r = drift(&p, "", "--resume");
    char note[128];
    snprintf(note, sizeof note, "resuming: %zu of %d curves kept", kept, UNITS);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.err, note), "resume: exit %d: %s", r.rc, r.err);
    ck_assert_msg(same_tree(p.out, p.ref), "the resumed report differs from the uninterrupted one");
    ck_assert_msg(!exists(p.units), "the units outlived the report");
    run_free(&r);
    /* Killed again in the resumed run: a second resume still gives the same report. */
    remove_tree(p.out);
    r = drift(&p, "VIJP_KILL_AFTER_UNITS=3", "");
    ck_assert_int_eq(r.rc, 128 + 9);
    run_free(&r);
    r = drift(&p, "VIJP_KILL_AFTER_UNITS=4", "--resume");
    ck_assert_int_eq(r.rc, 128 + 9);
    ck_assert_msg(count_units(&p) >= 7, "the second run did not add to the first one's units");
    run_free(&r);
    r = drift(&p, "", "--resume");
    ck_assert_msg(r.rc == CLI_OK && same_tree(p.out, p.ref), "twice resumed: exit %d: %s", r.rc, r.err);
    run_free(&r);
    remove_tree(p.base);
}
END_TEST

START_TEST(changed_study_refuses)
{
    place p;
    place_make(&p);
    reference_then_killed(&p, 4);
    /* Another seed list: exit 2, naming the line that differs, and the kept units untouched. */
    char args[2048];
    snprintf(args, sizeof args, "drift --net dense:6,tanh --net dense:6,leaky:0.5 --depth 10 --formats "
             "binary32,double,mpfr:64,bfloat16 --seeds 1,3 --engines moonwalk,reversible,checkpoint --out '%s' --resume",
             p.out);
    size_t kept = count_units(&p);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "of another study") && strstr(r.err, "'seeds: 1 2' there, 'seeds: 1 3' here"),
                  "exit %d: %s", r.rc, r.err);
    ck_assert_msg(!exists(p.out) && count_units(&p) == kept, "a refused resume changed something");
    run_free(&r);
    /* A changed tolerance changes the report: refused too. */
    r = drift(&p, "", "--resume --tol binary32=1e-3");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "formats:"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    /* Without --resume the other study runs, discarding these units (said on stderr). */
    *strstr(args, " --resume") = 0;
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.err, "removed") && strstr(r.err, ".out.vijp-units") && !exists(p.units),
                  "exit %d: %s", r.rc, r.err);
    run_free(&r);
    remove_tree(p.base);
}
END_TEST

/* A JSON net is part of what a resumed run must match, as the run parsed
 * it: its layers and the parameters its files give.  Changing one value of
 * a weight file the net names (the JSON text unchanged) refuses --resume;
 * the unchanged net resumes. */
static void write_weights(const char *dir, double w00)
{
    double w[36], b[6];
    for (int i = 0; i < 36; i++) w[i] = i % 7 == 0 ? 1.0 : 0.01 * (i % 5);
    for (int i = 0; i < 6; i++) b[i] = 0.1 * i;
    w[0] = w00;
    char path[400];
    size_t ws[2] = {6, 6}, bs[1] = {6};
    vijp_error err = {0};
    snprintf(path, sizeof path, "%s/w.npy", dir);
    ck_assert_msg(!vijp_npy_write(path, 2, ws, w, &err), "%s", err.msg);
    snprintf(path, sizeof path, "%s/b.npy", dir);
    ck_assert_msg(!vijp_npy_write(path, 1, bs, b, &err), "%s", err.msg);
}

/* A study (drift's arguments but --out) killed after one unit, then
 * resumed, twice: after change(p) --resume exits 2 naming the line `names`;
 * unchanged, it resumes. */
static void change_refuses_resume(const place *p, const char *drift_args, void (*change)(const place *p), const char *names)
{
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through `make check`");
    char args[2400];
    for (int round = 0; round < 2; round++) {
        snprintf(args, sizeof args, "VIJP_KILL_AFTER_UNITS=1 '%s' drift %s --out '%s'", bin, drift_args, p->out);
        run_result r = run_bin("/usr/bin/env", args);
        ck_assert_msg(r.rc == 128 + 9, "not killed: exit %d: %s", r.rc, r.err);
        run_free(&r);
        if (!round) change(p);
        snprintf(args, sizeof args, "'%s' drift %s --out '%s' --resume", bin, drift_args, p->out);
        r = run_bin("/usr/bin/env", args);
        if (!round)
            ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "of another study") && strstr(r.err, names),
                          "changed %s: exit %d: %s", names, r.rc, r.err);
        else
            ck_assert_msg(r.rc == CLI_OK, "unchanged: exit %d: %s", r.rc, r.err);
        run_free(&r);
    }
}

static void change_one_weight(const place *p) { write_weights(p->base, 1.0 + 0x1p-40); } /* one bit far down */

START_TEST(changed_net_parameters_refuse)
{
    place p;
    place_make(&p);
    char net[400], args[800];
    snprintf(net, sizeof net, "%s/net.json", p.base);
    FILE *f = fopen(net, "w");
    ck_assert(f);
    fputs("{\"schema\": \"vijp-net/1\", \"width\": 6, \"layers\": [{\"type\": \"dense\", \"args\": \"6\", \"params\": "
          "{\"weight\": \"w.npy\", \"bias\": \"b.npy\"}}, {\"type\": \"tanh\"}, {\"type\": \"dense\", \"args\": \"6\"}]}\n", f);
    ck_assert(!fclose(f));
    write_weights(p.base, 1.0);
    snprintf(args, sizeof args, "--net '%s' --formats double,binary32 --seeds 1,2 --jobs 1 --no-plots", net);
    change_refuses_resume(&p, args, change_one_weight, "config 1");
    remove_tree(p.base);
}
END_TEST

/* The plugins a study loaded are part of what --resume must match: the
 * same plugin file with one more byte (still loadable, another build) is
 * refused, naming it; the same file resumes. */
static void append_to_plugin(const place *p)
{
    char so[400];
    snprintf(so, sizeof so, "%s/p.so", p->base);
    FILE *f = fopen(so, "ab");
    ck_assert(f && fputc(0, f) == 0 && !fclose(f));
}

START_TEST(changed_plugin_refuses)
{
    place p;
    place_make(&p);
    char cmd[1200], args[800];
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through `make check`");
    snprintf(cmd, sizeof cmd, "cp \"$(dirname '%s')/plugins/scaledtanh.so\" '%s/p.so'", bin, p.base);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(args, sizeof args, "--plugin '%s/p.so' --net dense:4,scaledtanh --depth 4 --formats double,binary32 "
             "--seeds 1,2 --jobs 1 --no-plots", p.base);
    change_refuses_resume(&p, args, append_to_plugin, "plugin");
    remove_tree(p.base);
}
END_TEST

/* A unit damaged on disk (a flipped digit, a truncation, another unit's
 * text under its name) is said on stderr and computed again. */
START_TEST(damaged_units_recomputed)
{
    place p;
    place_make(&p);
    reference_then_killed(&p, 4);
    size_t e[4], n = 0; /* the first four units kept (which ones depends on the threads) */
    char cmd[1200], path[400];
    for (size_t j = 0; j < UNITS && n < 4; j++) {
        snprintf(path, sizeof path, "%s/unit-%zu", p.units, j);
        if (exists(path)) e[n++] = j;
    }
    ck_assert(n == 4);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && sed -i '6s/0x1/0x3/' unit-%zu && head -c 200 unit-%zu > t && mv t unit-%zu && cp unit-%zu unit-%zu",
             p.units, e[0], e[1], e[1], e[3], e[2]);
    ck_assert(system(cmd) == 0);
    run_result r = drift(&p, "", "--resume");
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    char m[3][64];
    snprintf(m[0], sizeof m[0], "unit-%zu: checksum mismatch", e[0]);
    snprintf(m[1], sizeof m[1], "unit-%zu: truncated", e[1]);
    snprintf(m[2], sizeof m[2], "unit-%zu: holds another unit", e[2]);
    ck_assert_msg(strstr(r.err, m[0]) && strstr(r.err, m[1]) && strstr(r.err, m[2]), "messages: %s", r.err);
    ck_assert_msg(same_tree(p.out, p.ref), "the report with recomputed units differs");
    run_free(&r);
    remove_tree(p.base);
}
END_TEST

/* ---- the unit text, in-process ---- */

static uint64_t bits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* A curve holding the doubles a text format could lose: the smallest
 * subnormal, the largest double, −0, ±∞, 1/3 (every mantissa bit set in its
 * expansion), NaN; errors past double's range both ways (an mpfr:P error near
 * 2^-P, ulps of a total loss near 2^P); and messages with a newline and a
 * colon. */
START_TEST(unit_text_round_trips)
{
    static study s; /* the fields unit_decode checks: depth, engines */
    memset(&s, 0, sizeof s);
    s.depth = 3, s.n_engines = 1, s.engines[0] = VIJP_ENGINE_REVERSIBLE;
    const double odd[] = {0x1p-1074, 0x1.fffffffffffffp+1023, -0.0, INFINITY, -INFINITY, 1.0 / 3, NAN, 0.1, 1e-300};
    const vijp_xnum wide[] = {{0x1.5555555555555p-1, -3000}, {0.5, 40000}, {-0.75, -1100}};
    size_t n_odd = sizeof odd / sizeof *odd, n_x = n_odd + sizeof wide / sizeof *wide, t = 0, tx = 0;
#define NEXT() odd[t++ % n_odd]
#define NEXTX() (tx % n_x < n_odd ? vijp_xnum_of(odd[tx++ % n_x]) : wide[tx++ % n_x - n_odd])
    vijp_drift_curve c = {.depth = 3, .n_runs = 2};
    c.runs = calloc(2, sizeof *c.runs);
    c.kappa = calloc(3, sizeof(double)), c.lyap_cum = calloc(3, sizeof(double)), c.predicted = calloc(3, sizeof(vijp_xnum));
    c.u = vijp_xnum_2exp(1, -4000), c.ref_prec_start = 256, c.ref_prec = 512, c.ref_agreement = NEXTX(), c.ref_target = NEXTX();
    c.lyap_rate = NEXT(), c.predicted_rate = NEXT();
    for (size_t i = 0; i < 3; i++) c.kappa[i] = NEXT(), c.lyap_cum[i] = NEXT(), c.predicted[i] = NEXTX();
    for (size_t r = 0; r < 2; r++) {
        vijp_drift_run_result *run = &c.runs[r];
        run->engine = r ? VIJP_ENGINE_REVERSIBLE : VIJP_ENGINE_BACKPROP;
        run->rebuilt = 2 + r;
        run->x = (vijp_metric){NEXTX(), NEXTX(), NEXTX()};
        run->g = calloc(3, sizeof *run->g), run->theta = calloc(3, sizeof *run->theta);
        run->stored_by_depth = calloc(3, sizeof(size_t));
        if (r) run->reconstruction = calloc(3, sizeof(vijp_xnum));
        else run->bound = calloc(3, sizeof(vijp_xnum));
        for (size_t i = 0; i < 3; i++) {
            run->g[i] = (vijp_metric){NEXTX(), NEXTX(), NEXTX()};
            run->theta[i] = (vijp_metric){NEXTX(), NEXTX(), NEXTX()};
            run->stored_by_depth[i] = (size_t)-1 - i;
            (r ? run->reconstruction : run->bound)[i] = NEXTX();
        }
        snprintf(run->failure, sizeof run->failure, "%s", r ? "layer 2: singular\nsecond line: x" : "");
        snprintf(run->nonfinite, sizeof run->nonfinite, "%s", r ? "" : "g_1[0] = inf:");
    }
    size_t n;
    char *text = unit_encode(0x0123456789abcdefull, 7, &c, &n), why[200];
    vijp_drift_curve d;
    ck_assert_msg(unit_decode(&s, 0x0123456789abcdefull, 7, text, n, &d, why, sizeof why) == 0, "decode: %s", why);
    /* Every double compared as bits (NaN compared as NaN: its payload is not kept by %a). */
#define SAME(a, b) ck_assert_msg(isnan(a) ? isnan(b) : bits(a) == bits(b), "%s: %a became %a", #a, a, b)
    /* and an error's exponent with it */
#define SAMEX(a, b) SAME((a).m, (b).m), ck_assert_msg((a).e == (b).e, "%s: exponent %ld became %ld", #a, (a).e, (b).e)
    SAMEX(c.u, d.u), SAMEX(c.ref_agreement, d.ref_agreement), SAMEX(c.ref_target, d.ref_target);
    SAME(c.lyap_rate, d.lyap_rate), SAME(c.predicted_rate, d.predicted_rate);
    ck_assert(d.ref_prec_start == 256 && d.ref_prec == 512 && d.depth == 3 && d.n_runs == 2);
    for (size_t i = 0; i < 3; i++) SAME(c.kappa[i], d.kappa[i]), SAME(c.lyap_cum[i], d.lyap_cum[i]), SAMEX(c.predicted[i], d.predicted[i]);
    for (size_t r = 0; r < 2; r++) {
        const vijp_drift_run_result *a = &c.runs[r], *b = &d.runs[r];
        ck_assert(a->engine == b->engine && a->rebuilt == b->rebuilt);
        ck_assert_str_eq(a->failure, b->failure);
        ck_assert_str_eq(a->nonfinite, b->nonfinite);
        SAMEX(a->x.rel, b->x.rel), SAMEX(a->x.ulps, b->x.ulps), SAMEX(a->x.angle_deg, b->x.angle_deg);
        ck_assert(!a->bound == !b->bound && !a->reconstruction == !b->reconstruction);
        for (size_t i = 0; i < 3; i++) {
            SAMEX(a->g[i].rel, b->g[i].rel), SAMEX(a->g[i].ulps, b->g[i].ulps), SAMEX(a->g[i].angle_deg, b->g[i].angle_deg);
            SAMEX(a->theta[i].rel, b->theta[i].rel), SAMEX(a->theta[i].angle_deg, b->theta[i].angle_deg);
            ck_assert(a->stored_by_depth[i] == b->stored_by_depth[i]);
            if (a->bound) SAMEX(a->bound[i], b->bound[i]);
            if (a->reconstruction) SAMEX(a->reconstruction[i], b->reconstruction[i]);
        }
    }
    vijp_drift_curve_clear(&d);
    /* Refused: another study's hash, another index, one flipped byte anywhere, any truncation. */
    ck_assert(unit_decode(&s, 0x0123456789abcdeeull, 7, text, n, &d, why, sizeof why) == -1 && strstr(why, "another study"));
    ck_assert(unit_decode(&s, 0x0123456789abcdefull, 8, text, n, &d, why, sizeof why) == -1 && strstr(why, "another unit"));
    for (size_t i = 0; i < n; i++) {
        text[i] ^= 0x04;
        ck_assert_msg(unit_decode(&s, 0x0123456789abcdefull, 7, text, n, &d, why, sizeof why) == -1, "flipped byte %zu accepted", i);
        text[i] ^= 0x04;
        ck_assert_msg(unit_decode(&s, 0x0123456789abcdefull, 7, text, i, &d, why, sizeof why) == -1, "cut at %zu accepted", i);
    }
    /* Malformed text under a valid checksum (a unit written by hand, or by
     * a broken writer): each byte deleted in turn, the checksum line redone.
     * The parser must refuse it or read it, never read past it (run under
     * ASan by make check SANITIZE=1).  Deleting a separator (a space or a
     * newline: between a key and its value, two numbers, two lines, or
     * inside a message, whose length then disagrees) must be refused;
     * deleting a digit may leave another valid number. */
    const size_t tail = sizeof "end 0123456789abcdef\n" - 1;
    char *cut = malloc(n + 1);
    for (size_t i = 0; i + tail < n; i++) {
        memcpy(cut, text, i), memcpy(cut + i, text + i + 1, n - tail - i - 1);
        size_t m = n - tail - 1;
        m += (size_t)sprintf(cut + m, "end %016llx\n", (unsigned long long)unit_hash(UNIT_HASH_START, cut, m));
        int ok = unit_decode(&s, 0x0123456789abcdefull, 7, cut, m, &d, why, sizeof why) == 0;
        if (ok) vijp_drift_curve_clear(&d);
        ck_assert_msg(!ok || (text[i] != ' ' && text[i] != '\n'), "deleting the separator at byte %zu was not noticed", i);
    }
    free(cut);
    free(text);
    vijp_drift_curve_clear(&c);
}
END_TEST

Suite *suite_resume(void)
{
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("resume");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, unit_text_round_trips);
    tcase_add_test(tc, killed_study_resumes_byte_identical);
    tcase_add_test(tc, changed_study_refuses);
    tcase_add_test(tc, changed_net_parameters_refuse);
    tcase_add_test(tc, changed_plugin_refuses);
    tcase_add_test(tc, damaged_units_recomputed);
    suite_add_tcase(s, tc);
    return s;
}
