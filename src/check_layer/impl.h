/* What the layer checks share (vijp/check_layer.h is the public side): the
 * fixture, the contract's bounds read through the layer's type, and the
 * comparison that records a check's worst element. */
#ifndef VIJP_CHECK_LAYER_IMPL_H
#define VIJP_CHECK_LAYER_IMPL_H

#include "vijp/check_layer.h"
#include "vijp/net.h"

/* One layer, its parameters and points in the format under test F and in a
 * reference R holding the same (F-rounded) values: MPFR at
 * check_ref_prec(P) bits when the type's MPFR operators are used, else F
 * itself (double), so that every check reads R the same way. */
#define CHECK_REF_PREC 1024

/* High precision.  check-layer takes mpfr:P up to VIJP_PREC_MAX (65536).
 * Its bounds are u = 2^-P times sizes of order 1, which double cannot hold
 * past P ≈ 1000 (they underflowed to 0, and errors to 0 or 2^-1074), so the
 * checks hold every bound in units of 2^ex (check_fix.ex): ex = 0 up to
 * CHECK_UNIT_PREC bits, where nothing changes, and ex = CHECK_UNIT_PREC − P
 * above, where u reads 2^-CHECK_UNIT_PREC.  A contract's bound taken at that
 * u and scaled back is its bound at 2^-P where it is linear in u, and above
 * it where it has higher terms (γ_n = nu/(1 − nu), u² terms: b(u)/u grows
 * with u).  Errors are measured in MPFR and kept as check_num (mantissa and
 * binary exponent), so that neither side underflows; the report prints
 * them as decimals at any size (vijp_check_result's *_text).
 *
 * The reference: 1024 bits up to mpfr:512, P + 512 above (its own error
 * 2^-512 of the bound), at most VIJP_PREC_MAX: where that leaves it fewer
 * than CHECK_REF_MARGIN bits above P, the comparisons with it are skipped,
 * saying so.  Differences step at h = 2^-hexp, hexp = max(300, P/2 + 128),
 * in W = max(2048, hexp + P + 256) bits (truncation h² and rounding 2^-W/h
 * both 2^-256 below u); past VIJP_PREC_MAX bits they are skipped likewise. */
#define CHECK_UNIT_PREC 512
#define CHECK_REF_MARGIN 64
long check_ref_prec(long P);
long check_diff_hexp(long P); /* hexp above */
long check_diff_prec(long P); /* W above */
long check_diff_limit(void);  /* the largest P whose differences fit in VIJP_PREC_MAX bits */
long check_ref_limit(void);   /* the largest P with CHECK_REF_MARGIN bits of reference above it */

/* A nonnegative number m·2^e, that no bound or error underflows in. */
typedef struct {
    double m;
    long e;
} check_num;
/* |x| rounded up (as a double where it is one: exactly as before at
 * ordinary precisions). */
check_num check_num_mpfr(mpfr_srcptr x);
/* "%.3g" of a at any size (printf's own where it is a double). */
void check_num_text(char *buf, size_t size, check_num a);

typedef struct {
    vijp_net net;
    const vijp_layer *L;
    vijp_format F, R;
    int have_ref;        /* R is the MPFR oracle */
    size_t B;
    uint64_t seed;
    vijp_mat thF, thR;   /* parameters */
    vijp_mat XF, XR;     /* points (n × B) */
    vijp_mat UF, UR;     /* tangents (n × B) */
    vijp_mat GF, GR;     /* output cotangents (m × B) */
    long ex;             /* bounds are held in units of 2^ex (0 up to CHECK_UNIT_PREC bits, above) */
    double u;            /* unit roundoff of F, 2^-P, in those units */
} check_fix;

typedef void (*check_fn)(check_fix *t, vijp_check_result *r);

/* The checks (check_layer_ops.c, _vijp.c, _oracle.c, _decl.c). */
void check_adjoint(check_fix *t, vijp_check_result *r);
void check_jvp_differences(check_fix *t, vijp_check_result *r);
void check_jacobian_columns(check_fix *t, vijp_check_result *r);
void check_vijp_round_trip(check_fix *t, vijp_check_result *r);
void check_fragment_cokernel(check_fix *t, vijp_check_result *r);
void check_format_vs_mpfr(check_fix *t, vijp_check_result *r);
void check_vjp_param_vs_mpfr(check_fix *t, vijp_check_result *r);
void check_vjp_param_differences(check_fix *t, vijp_check_result *r); /* param.c */
void check_inverse_round_trip(check_fix *t, vijp_check_result *r);
void check_overwrites(check_fix *t, vijp_check_result *r); /* check_layer_overwrite.c */
void check_declarations(check_fix *t, vijp_check_result *r);
void check_certification(check_fix *t, vijp_check_result *r);
void check_jacobian_box(check_fix *t, vijp_check_result *r); /* jacobian_box.c */

/* The fixture (check_layer_fixture.c). */
VIJP_MUST_CHECK int check_fix_init(check_fix *t, const char *spec, const vijp_check_opts *o, vijp_error *err);
void check_fix_clear(check_fix *t);

/* The contract, read through the type (check_layer_fixture.c). */
double check_term_ulps(const vijp_layer *L);   /* bounds.ulps, 6 by default */
/* M >= |J| at sample b of the reference (m × n doubles, the caller frees):
 * |J|, or the type's jacobian_majorant where J's entries cancel; NULL with
 * err filled when the Jacobian operator fails. */
double *check_abs_jacobian(check_fix *t, size_t b, vijp_error *err);
double check_bias_at(check_fix *t, size_t i);  /* |b| added to output i (bias_index) */
/* κ(J) = σ_max / σ_min over J's nonzero singular values, the largest over the
 * batch (LAPACK on the reference Jacobian); NaN when J cannot be formed. */
double check_kappa(check_fix *t);
/* Relative backward-error constant of a vijp followed by a vjp: the
 * layer's own (bounds.solve_ulps) where it states one, otherwise
 * C_solve = 3n·2^(n−1) + 16mn + m + 6 (LU with partial pivoting: |ΔA| <=
 * γ_3n |L||U| with growth <= 2^(n−1), Higham Thm 9.4 and §9.4; Householder
 * QR: ‖ΔA‖_F <= 16mn·u‖A‖_F, Thm 19.4; m + 6 for applying it). */
double check_c_solve(const vijp_layer *L);
/* Where check_c_solve's constant comes from, for a check's source line. */
const char *check_c_solve_source(const vijp_layer *L);

/* Central differences in double at h_k = 2^(−2−k), k < CHECK_LEVELS, and
 * one Richardson step over them: d and rho hold level k's len differences
 * and their rounding bounds at k·len; D gets the extrapolated values, est
 * their estimated errors (ops.c derives it). */
#define CHECK_LEVELS 16
void check_richardson(const double *d, const double *rho, size_t len, double *D, double *est);

/* Numbers of a matrix as doubles (check_layer_fixture.c). */
double check_absval(const vijp_mat *a, size_t i);
check_num check_absdiff(const vijp_mat *a, size_t i, const vijp_mat *b, size_t j); /* exact difference, rounded up */
double check_col_norm(const vijp_mat *a, size_t col);
void check_entry(mpfr_t r, const vijp_mat *a, size_t i); /* r := a[i], exact when r is wide enough */

/* Compare a with b entrywise against bound, in units of 2^ex (bound[i] = 0
 * demands equality): records the worst ratio |a_i − b_i| / bound_i in r
 * (and its entry) and fails r when it exceeds 1.  `what` names the
 * quantity. */
void check_compare(vijp_check_result *r, const char *what, const vijp_mat *a, const vijp_mat *b, const double *bound,
                   long ex);
/* Record one compared number (error against bound) at (row, col). */
void check_record(vijp_check_result *r, const char *what, size_t row, size_t col, check_num error, check_num bound);
/* The worst element's numbers as they stand in r (doubles and text). */
void check_set_worst(vijp_check_result *r, check_num error, check_num bound, check_num ratio);

/* Outcomes in words (printf-style detail). */
void check_fail(vijp_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_skip(vijp_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_note(vijp_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_method(vijp_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_source(vijp_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An operator refused: fail naming it and its message. */
void check_refused(vijp_check_result *r, const char *op, int rc, const vijp_error *err);

/* In a check with a vijp_error err and a label out: an operator's code rc,
 * nonzero, fails the check naming op and its message. */
#define FAIL_IF(rc, op)                                                                                                  \
    do {                                                                                                                 \
        int rc_ = (rc);                                                                                                  \
        if (rc_) {                                                                                                       \
            check_refused(r, op, rc_, &err);                                                                             \
            goto out;                                                                                                    \
        }                                                                                                                \
    } while (0)

#endif
