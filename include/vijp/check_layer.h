/* The layer battery as a library: every check a layer type must pass,
 * written against the public layer interface (vijp/layer.h) and the type's
 * own error-bound contract (vijp_layer_bounds, bias_index, jacobian_majorant,
 * vjp_param_bound), so that a type defined in a plugin is checked exactly as
 * the built-in ones are (`vijp check-layer SPEC --plugin FILE.so`;
 * tests/t-layers.c runs the same checks on every built-in type).
 *
 * A check runs on one fixture: the layer built from a spec at a width, its
 * parameters (the type's init from the seed, each then moved by a seeded
 * relative 2^-5 to 2^-4, zeros kept, so that none is a power of two by
 * accident; or the caller's),
 * and B points X, tangents U and
 * cotangents G drawn from seed + 1 (|x| >= 1e-3, so kinks are not crossed;
 * |x| <= 4 and 0.5 away from the zeros of f′ the contract lists), held in the
 * format under test and, when the type has MPFR operators, in a 1024-bit
 * reference with the same values.  Each check returns a structured result:
 * passed, failed or skipped (with the reason), the worst element it saw, its
 * error and the bound it was held to (and where that bound comes from), and
 * the seed that reruns it.
 *
 * Bounds (u: the unit roundoff of the format under test): the dot-product
 * bound γ_n of Higham (ASNA 2nd ed.) eq. 3.5 plus the contract's `ulps` for
 * every operator; backward-stable solves (LU, Higham Thm 9.4; Householder QR,
 * Thm 19.4) for the vijp; the contract's inverse model for the inverse.  Each
 * check's comment derives its own. */
#ifndef VIJP_CHECK_LAYER_H
#define VIJP_CHECK_LAYER_H

#include "vijp/api.h"
#include <stddef.h>
#include <stdint.h>
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { VIJP_CHECK_PASSED, VIJP_CHECK_FAILED, VIJP_CHECK_SKIPPED } vijp_check_status;

VIJP_API const char *vijp_check_status_name(vijp_check_status s); /* "passed", "FAILED", "skipped" */

typedef struct {
    char name[32];           /* the check: "adjoint", "jvp-vs-differences", ... */
    vijp_check_status status;
    char method[160];        /* how it was checked (e.g. which finite differences) */
    int weaker;              /* checked against an estimate rather than a bound (say so) */
    char detail[320];        /* failed: what went wrong; skipped: why; passed: a summary */
    /* The worst element over every comparison the check made (ratio =
     * error / bound, the largest; NaN fields when it compared no numbers). */
    char worst_what[48];     /* the quantity ("vjp", "inverse(forward(x))", "σ_min") */
    size_t worst_row, worst_col; /* its entry: row, and column (the sample) */
    /* As doubles; past double's range (mpfr:P formats beyond P ≈ 1000,
     * whose errors and bounds are 2^-P) these read 0, a subnormal or inf,
     * and only the _text fields hold the number. */
    double error, bound, ratio;
    /* The same three in decimal, "%.3g" at any size ("1.2e-400"); empty
     * when it compared no numbers. */
    char error_text[24], bound_text[24], ratio_text[24];
    char bound_source[200];  /* where the bound it was held to comes from */
    uint64_t seed;           /* `--seed` that reruns it */
    int signal;              /* isolated runs: the signal that ended the check (0: none) */
    double seconds;          /* wall time of the check */
} vijp_check_result;

typedef struct {
    size_t width;       /* input width for the spec (0: the spec's own, e.g. dense:MxN) */
    uint64_t seed;      /* parameters from seed, points from seed + 1 */
    const char *format; /* format under test: "double" (NULL) or "mpfr:P" */
    size_t batch;       /* points (0: 3) */
    int double_only;    /* ignore the type's MPFR operators, as if it had none */
    unsigned timeout_s; /* isolated runs: the longest one check may take (0: 60 s) */
    const double *params; /* θ in the type's order (n_params values), used as given;
                           * NULL: the type's init from seed, each value moved by a seeded
                           * relative amount (vijp_check_layer_run refuses a wrong count) */
    size_t n_params;
} vijp_check_opts;

/* The checks, in the order they run: names and one line on what each checks. */
VIJP_API size_t vijp_check_count(void);
VIJP_API const char *vijp_check_name(size_t k);
VIJP_API const char *vijp_check_summary(size_t k);
/* The index of a check by name, or -1. */
VIJP_API int vijp_check_find(const char *name);

/* Run check k on the layer `spec` (one item, any registered type) in this
 * process; o NULL: every option's default (a zeroed vijp_check_opts).  Returns 0 with r filled (passed, failed or skipped), or a VIJP_E*
 * code with err filled when the fixture cannot be built (bad spec or width,
 * an MPFR format for a type without MPFR operators). */
VIJP_API VIJP_MUST_CHECK int vijp_check_layer_run(size_t k, const char *spec, const vijp_check_opts *o, vijp_check_result *r,
                                         vijp_error *err);

/* The same in a child process (fork), so that a layer that crashes or hangs
 * cannot take the caller down: the result comes back through a pipe; a check
 * killed by a signal fails with the signal's name in r->detail and r->signal
 * set; one that runs past o->timeout_s is stopped (alarm) and fails. */
VIJP_API VIJP_MUST_CHECK int vijp_check_layer_isolated(size_t k, const char *spec, const vijp_check_opts *o, vijp_check_result *r,
                                              vijp_error *err);
/* "SIGSEGV" for SIGSEGV, and so on for the signals a check may die of. */
VIJP_API const char *vijp_check_signal_name(int sig);

#ifdef __cplusplus
}
#endif

#endif
