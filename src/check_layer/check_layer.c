/* The layer checks: their registry and one run in this process
 * (vijp/check_layer.h); the result helpers every check uses are result.c. */
#include "impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name, *summary;
    check_fn run;
} checks[] = {
    {"adjoint", "<G, jvp(U)> = <vjp(G), U>: jvp and vjp are transposes", check_adjoint},
    {"jvp-vs-differences", "jvp against central finite differences of forward", check_jvp_differences},
    {"jacobian-vs-jvp", "the dense Jacobian's columns against jvp(e_j)", check_jacobian_columns},
    {"vijp-round-trip", "vjp(vijp(g)) = g, and vijp(vjp(r)) + fragment = r", check_vijp_round_trip},
    {"fragment-vs-cokernel", "the fragment is Q^T r in the cokernel basis Q", check_fragment_cokernel},
    {"format-vs-mpfr", "forward, jvp, vjp, fragment, vijp against the type's MPFR operators at 1024 bits (P + 512 past mpfr:512)",
     check_format_vs_mpfr},
    {"vjp-param-vs-mpfr", "the parameter gradient against the MPFR operator, within vjp_param_bound", check_vjp_param_vs_mpfr},
    {"vjp-param-vs-differences", "the parameter gradient against central differences of forward in θ",
     check_vjp_param_differences},
    {"overwrites-outputs", "every operator overwrites its whole output: the same bits into a zeroed and a NaN-filled buffer", check_overwrites},
    {"inverse-round-trip", "inverse(forward(x)) = x within the contract's inverse model", check_inverse_round_trip},
    {"declarations", "submersive / never submersive / invertible against J's singular values", check_declarations},
    {"certification", "vijp_certify_layer at the points (DESIGN §4), declarations included", check_certification},
    {"jacobian-box", "the interval Jacobian over a box holds the MPFR Jacobian at sampled points of it; the Lipschitz "
     "constant of J holds at sampled pairs", check_jacobian_box},
};
#define NCHECKS (sizeof checks / sizeof *checks)

size_t vijp_check_count(void) { return NCHECKS; }
const char *vijp_check_name(size_t k) { return k < NCHECKS ? checks[k].name : NULL; }
const char *vijp_check_summary(size_t k) { return k < NCHECKS ? checks[k].summary : NULL; }

int vijp_check_find(const char *name)
{
    for (size_t k = 0; k < NCHECKS; k++)
        if (!strcmp(name, checks[k].name)) return (int)k;
    return -1;
}

const char *vijp_check_status_name(vijp_check_status s)
{
    return s == VIJP_CHECK_PASSED ? "passed" : s == VIJP_CHECK_FAILED ? "FAILED" : "skipped";
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int vijp_check_layer_run(size_t k, const char *spec, const vijp_check_opts *o, vijp_check_result *r, vijp_error *err)
{
    static const vijp_check_opts defaults; /* NULL: every field's default (check_layer.h) */
    if (!o) o = &defaults;
    memset(r, 0, sizeof *r);
    if (k >= NCHECKS) return vijp_fail(err, VIJP_EINVAL, "no check %zu (there are %zu)", k, NCHECKS);
    snprintf(r->name, sizeof r->name, "%s", checks[k].name);
    r->error = r->bound = r->ratio = NAN;
    r->seed = o->seed;
    r->status = VIJP_CHECK_PASSED;
    double t0 = now();
    check_fix t;
    int rc = check_fix_init(&t, spec, o, err);
    if (rc) return rc;
    checks[k].run(&t, r);
    check_fix_clear(&t);
    /* The worst element decides a check that compared numbers. */
    if (r->ratio > 1 && r->status != VIJP_CHECK_FAILED)
        check_fail(r, "%s[%zu,%zu] is off by %s: %s times its bound %s", r->worst_what, r->worst_row, r->worst_col,
                   r->error_text, r->ratio_text, r->bound_text);
    else if (!isnan(r->ratio) && !r->detail[0])
        check_note(r, "worst %s[%zu,%zu] at %s of its bound", r->worst_what, r->worst_row, r->worst_col, r->ratio_text);
    r->seconds = now() - t0;
    return 0;
}
