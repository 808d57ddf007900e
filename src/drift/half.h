/* The validation's upper reference level's dense parameter gradient from
 * its g and h rounded to half its precision, summed in double-double with
 * an a-priori bound instead of rounded once (half.c).  Internal to drift/:
 * memo.c's form_half. */
#ifndef VIJP_DRIFT_HALF_H
#define VIJP_DRIFT_HALF_H

#include "vijp/layer.h"
#include "vijp/mat.h"
#include "format/packed.h"

/* ∇θ of the dense layer L at batch B >= 2 from gp (m × B) and hp (n × B),
 * MPFR-held at p <= 106 bits (g and h already rounded there), into *out:
 * a new matrix packed at held's precision (an mpfr:Q, Q <= 256), W
 * column-major then b, each entry S = Σ_b gp(i, b)·hp(k, b) (hp = 1 for
 * ∂b) summed by Dot2 (ddot.h's vijp_dd_gemm, gp split into its two
 * doubles as 2B terms) and the double-double result rounded to nearest at
 * Q.  Each entry is within drift_half_kappa(p, B, Q)·2^-p·T of the exact
 * Σ_b g·h of the unrounded g and h, T = Σ_b |g|·|h|.  On threads threads
 * (base/fork.h), the same bits on any count and kernel set.  1 when done;
 * 0, out untouched, where the bound would not hold so: another layer or
 * shape, a value whose two doubles do not hold it exactly or leave
 * [2^-450, 2^450] (no product or sum can then underflow or overflow), a
 * held precision past 256 bits. */
int drift_half_param_dd(const vijp_layer *L, const vijp_mat *hp, const vijp_mat *gp, const vijp_format *held,
                        int threads, vijp_mat *out);

/* The constant k of that bound, k·2^-p·T: 4 for rounding g and h to p
 * bits, Dot2's γ_4B·γ_(2B+1) of the kernel's terms twice over, 2^(1−Q)
 * for the rounding at Q; each with room for the others' second-order
 * terms (half.c derives it). */
double drift_half_kappa(long p, size_t B, long Q);

/* Value idx of pk := hi + lo (a double-double, both finite, |lo| <=
 * ulp(hi)/2 or lo = 0) rounded to nearest, ties to even, at pk's
 * precision (<= 256 bits), as mpfr_add_d would round it; an exact zero
 * is +0.  The tests' view of the rounding drift_half_param_dd writes
 * with. */
void drift_half_put_dd(vijp_packed *pk, size_t idx, double hi, double lo);

#endif
