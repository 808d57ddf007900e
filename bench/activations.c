/* make bench (activations part): nested forward AD against composite autograd
 * and recomputation (include/vijp/composite.h), for each smooth activation,
 * on 2^20 units in double, best of 5:
 *  - values kept per unit between the passes (composite: counted on its tape);
 *  - time of forward + backward, as ratios to nested forward AD, measured in
 *    this run;
 *  - worst f′ error over 20001 points in [−40, 40] against the MPFR oracle at
 *    128 bits, in ulps of |f′(x)|, leaving out 0.05 around the certified
 *    zeros of f′ (SiLU, GELU, Mish), where any evaluation's error relative to
 *    |f′| is unbounded; and how many points give NaN or Inf
 *    (vijp_composite_accuracy).  Freed memory is kept in the heap (mallopt), so that the
 *    composite tape's allocations do not fault pages in every repetition.
 * The paper (arXiv 2209.10778) reports up to 1.97x less memory than the
 * composite baseline and 20% less time than recomputation at equal memory. */
#include "bench.h"
#include "vijp/composite.h"
#include "vijp/vijp.h"
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define UNITS (1u << 20)
#define REPS 5

static double time_composite(const char *name, size_t n, const double *x, const double *gy, double *y, double *gx, size_t *kept)
{
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        vijp_tape t;
        double t0 = bench_now();
        if (vijp_composite_forward(name, x, n, y, &t)) return NAN;
        vijp_composite_backward(&t, gy, gx);
        best = fmin(best, bench_now() - t0);
        *kept = t.count;
        vijp_tape_clear(&t);
    }
    return best;
}

/* nested: the forward keeps f′; the backward multiplies.  recompute: the
 * forward keeps x; the backward evaluates f′ again. */
static double time_dual(const vijp_layer_type *T, size_t n, const double *x, const double *gy, double *y, double *gx, double *keep,
                        int recompute)
{
    double best = INFINITY, d;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (size_t i = 0; i < n; i++) {
            T->dual_eval(NULL, NULL, x[i], &y[i], &d);
            keep[i] = recompute ? x[i] : d;
        }
        for (size_t i = 0; i < n; i++) {
            double f = 0;
            if (recompute) T->dual_eval(NULL, NULL, keep[i], &f, &d);
            else d = keep[i];
            gx[i] = gy[i] * d;
        }
        best = fmin(best, bench_now() - t0);
    }
    return best;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 0, "Usage: bench-activations [--smoke]\n  nested forward AD against composite autograd and recomputation, per smooth activation (make bench; takes no arguments).\n");
    static const char *const names[] = {"sigmoid", "softplus", "tanh", "silu", "gelu", "mish"};
    size_t units = smoke ? 4096 : UNITS, samples = smoke ? 201 : 20001;
    mallopt(M_MMAP_THRESHOLD, 1 << 30), mallopt(M_TRIM_THRESHOLD, 1 << 30);
    double *x = malloc(units * sizeof *x), *gy = malloc(units * sizeof *gy), *y = malloc(units * sizeof *y),
           *gx = malloc(units * sizeof *gx), *keep = malloc(units * sizeof *keep);
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    for (size_t i = 0; i < units; i++) x[i] = 3 * vijp_rng_normal(&rng), gy[i] = vijp_rng_normal(&rng);
    printf("activations: %zu units, double, forward + backward, best of %d\n", units, REPS);
    printf("%-9s %-36s %21s %23s %26s\n", "", "", "values kept per unit", "time / nested", "worst f' err (ulps of |f'|)");
    printf("%-9s %-36s %9s %6s %5s %8s %8s %6s %11s %11s\n", "", "composite formula", "composite", "nested", "recomp",
           "composite", "recompute", "nested", "nested", "composite");
    for (size_t a = 0; a < sizeof names / sizeof *names; a++) {
        const vijp_layer_type *T = vijp_layer_type_find(names[a]);
        size_t kept = 0;
        double tc = time_composite(names[a], units, x, gy, y, gx, &kept);
        double tn = time_dual(T, units, x, gy, y, gx, keep, 0), tr = time_dual(T, units, x, gy, y, gx, keep, 1);
        vijp_accuracy acc;
        vijp_error err;
        if (vijp_composite_accuracy(names[a], -40, 40, samples, 0.05, &acc, &err)) {
            fprintf(stderr, "bench-activations: %s\n", err.msg);
            return 1;
        }
        double wd = acc.nested_ulps, wc = acc.composite_ulps;
        char comp[48];
        snprintf(comp, sizeof comp, acc.composite_nonfinite ? "%.3g (%zu NaN)" : "%.3g", wc, acc.composite_nonfinite);
        printf("%-9s %-36s %9zu %6d %6d %8.2f %9.2f %6.2f %11.3g %11s\n", names[a], vijp_composite_formula(names[a]), kept,
               1, 1, tc / tn, tr / tn, 1.0, wd, comp);
    }
    printf("nested keeps f' (1 value per unit), recomputation keeps x (1) and evaluates f' again going back\n");
    free(x), free(gy), free(y), free(gx), free(keep);
    return 0;
}
