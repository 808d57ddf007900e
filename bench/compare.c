/* make bench (the comparisons): what vijp_compare costs an entry on the
 * drift study's two hot cases, measured in this run on one thread: the
 * fast path through the active lanes set (compare/lanes.h), the same one
 * entry at a time (target: the lanes at least twice as fast), and its exact
 * evaluation (MPFR at 2p + 80 bits, which the fast path is certified
 * against, src/compare/fast.h):
 *   an engine's double gradient against the reference held packed at the
 *   comparison precision (170 bits for double), relative errors near 2^-45;
 *   the validation: the 106-bit level, packed, against the 212-bit level
 *   held at 170 bits, relative differences near 2^-100.
 * N entries (default 2^20), ns an entry, best of three, with the angle
 * (the drift study's case); the metrics of the lanes, one at a time and
 * the exact evaluation must agree bit for bit, or the benchmark fails. */
#include "vijp/vijp.h"
#include "vijp/metrics.h"
#include "compare/cache.h"
#include "compare/fast.h"
#include "compare/lanes.h"
#include "bench.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double thread_cpu(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

static const char usage[] = "Usage: bench-compare [--smoke] [N]\n"
                            "  vijp_compare's ns an entry (double against a packed 170-bit reference, and\n"
                            "  a 106-bit level against a 212-bit one held at 170), in lanes and one at a\n"
                            "  time, beside the exact evaluation on N/64 of the entries; N from 4096 to\n"
                            "  2^26 (default 2^20)\n";

/* The two cases' matrices: A (double, or mpfr:106 packed) and R (mpfr:212
 * packed and held at q), the reference values normal draws spread over
 * 2^±20 with all 212 bits used; A as make_case's comment below says. */
static void make_case(int level, size_t n, vijp_mat *A, vijp_mat *R, const vijp_format *f, vijp_format *flo,
                      vijp_format *fhi, vijp_format *fq)
{
    BENCH_MUST(vijp_format_mpfr(flo, 106, NULL) || vijp_format_mpfr(fhi, 212, NULL) ||
               vijp_format_mpfr(fq, vijp_compare_prec(f), NULL));
    vijp_rng g;
    vijp_rng_seed(&g, 11);
    vijp_mat_init(A, n, 1, level ? flo : f), vijp_mat_init(R, n, 1, fhi);
    mpfr_t y, t;
    mpfr_init2(y, 212), mpfr_init2(t, 53);
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(y, vijp_rng_normal(&g), MPFR_RNDN);
        for (int k = 1; k < 4; k++) { /* every bit of the 212 used */
            mpfr_set_d(t, vijp_rng_uniform(&g), MPFR_RNDN);
            mpfr_mul_2si(t, t, mpfr_get_exp(y) - 53 * k, MPFR_RNDN);
            mpfr_add(y, y, t, MPFR_RNDN);
        }
        mpfr_mul_2si(y, y, (long)(vijp_rng_u64(&g) % 41) - 20, MPFR_RNDN);
        mpfr_set(R->m[i], y, MPFR_RNDN);
        /* the level: y rounded to 106 bits (what the validation sees, 2^-107
         * of y); the engine: y·(1 + 2^-45·N(0, 1)) rounded to a double */
        if (level) mpfr_set(A->m[i], y, MPFR_RNDN);
        else {
            mpfr_mul_d(y, y, 1 + ldexp(vijp_rng_normal(&g), -45), MPFR_RNDN);
            A->d[i] = mpfr_get_d(y, MPFR_RNDN);
        }
    }
    mpfr_clears(y, t, (mpfr_ptr)0);
    if (level) vijp_mat_pack(A);
    vijp_mat_pack(R), vijp_mat_pack_rounded(R, fq);
}

static int same(vijp_xnum a, vijp_xnum b) { return a.e == b.e && (a.m == b.m || (a.m != a.m && b.m != b.m)); }

/* Thread CPU seconds of the best of three fast comparisons through lanes
 * set (compare/lanes.h; 0: one entry at a time), its counts into *counts. */
static double time_fast(int set, const vijp_mat *A, const vijp_mat *R, const vijp_format *f, vijp_metric *m,
                        vijp_compare_counts *counts)
{
    double best = 1e300;
    for (int r = 0; r < 3; r++) {
        double t0 = thread_cpu();
        int ok = vijp_compare_fast_lanes(set, A, R, f, m, 1, counts);
        double dt = thread_cpu() - t0;
        BENCH_MUST(!ok);
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    size_t n = (size_t)bench_count(argc, argv, smoke ? 4096 : 1 << 20, 4096, 1L << 26, usage);
    vijp_format f;
    BENCH_MUST(vijp_format_parse("double", &f, NULL));
    f.threads = 1;
    const cmp_lanes_set *lanes = vijp_cmp_lanes_active();
    int set = 0;
    for (int k = 1; k < CMP_LANES_SETS; k++)
        if (lanes && vijp_cmp_lanes_set(k) == lanes) set = k;
    printf("vijp_compare per entry, %zu entries, one thread, best of 3 (thread CPU); lanes: %s\n", n,
           lanes ? lanes->name : "none (VIJP_KERNELS=ref, or no SIMD set)");
    static const char *names[] = {"double against the reference at 170 bits", "106-bit level against 212 at 170"};
    int bad = 0;
    for (int level = 0; level < 2; level++) {
        vijp_format flo, fhi, fq;
        vijp_mat A, R;
        make_case(level, n, &A, &R, &f, &flo, &fhi, &fq);
        vijp_metric m, m1, me;
        vijp_compare_counts counts, counts1;
        double t_lanes = time_fast(set, &A, &R, &f, &m, &counts), t_one = time_fast(0, &A, &R, &f, &m1, &counts1);
        /* the exact evaluation on the first n/64 entries (its cost is linear) */
        vijp_mat As = A, Rs = R;
        size_t ns = n / 64;
        As.rows = Rs.rows = ns;
        double best_exact = 1e300;
        for (int r = 0; r < 3; r++) {
            double t0 = thread_cpu();
            vijp_compare_exact(&As, &Rs, &f, &me, 1);
            double dt = thread_cpu() - t0;
            if (dt < best_exact) best_exact = dt;
        }
        vijp_metric ms;
        BENCH_MUST(!vijp_compare_fast_lanes(set, &As, &Rs, &f, &ms, 1, NULL));
        int agree = same(ms.rel, me.rel) && same(ms.ulps, me.ulps) && same(ms.angle_deg, me.angle_deg) &&
                    same(m.rel, m1.rel) && same(m.ulps, m1.ulps) && same(m.angle_deg, m1.angle_deg);
        bad |= !agree;
        double ns_lanes = 1e9 * t_lanes / (double)n, ns_one = 1e9 * t_one / (double)n,
               ns_exact = 1e9 * best_exact / (double)ns;
        printf("  %s: %.1f%% of the entries in doubles\n", names[level], 100.0 * (double)counts.doubles / (double)n);
        printf("    lanes %6.2f ns an entry, one at a time %6.2f ns: %4.1f x", ns_lanes, ns_one, ns_one / ns_lanes);
        if (lanes) printf(" (target >= 2: %s)", ns_one >= 2 * ns_lanes ? "met" : "NOT met");
        printf("; exact evaluation %6.1f ns: %5.1f x; metrics %s\n", ns_exact, ns_exact / ns_lanes,
               agree ? "the same bits" : "DIFFER");
        vijp_mat_clear(&A), vijp_mat_clear(&R);
    }
    return bad;
}
