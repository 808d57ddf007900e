/* SIMD drift partials (kernels.h: vijp_kdrift and its bound, which holds
 * for any summation order: here VW lane sums of about n/VW terms each, then
 * the lanes in order).  ulp_f(r) from r's exponent field: E − prec with E =
 * field − 1022 for a normal r; subnormal or zero r (field 0) fall below the
 * floor emin − 1 of every format vijp has (all have emin − 1 >= −1074 >
 * −1022 − prec), so the floor applies there, as in ref.  |d|·2^−e is one
 * exact power-of-two scaling where 2^−e is a double in every lane, else two
 * (2^−e alone may exceed the double range: r below about 2^-970 in double).
 * The four sums take their products fused (FMA): one rounding per term
 * where the bound allows two, and four fewer instructions per vector, which
 * this compute-bound loop needs; with the one scaling, AVX2 at 8M units goes
 * from 62-77 % (fused sums alone) to 77-84 % of copy bandwidth, and 2^14
 * units in cache from 12-18 to 22-24 GB/s (63-68 % and 13-15 GB/s before
 * either; same-run A/B over three alternating runs). */
#include "vec.h"


static void drift_d(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out)
{
    vd aa = {0}, rr = {0}, dd = {0}, dr = {0}, mu = {0};
    vm nan = {0};
    for (size_t i = 0; i < n; i += VW) {
        vd av, rv;
        if (i + VW <= n) {
            av = load_d(a + i), rv = load_d(ref + i);
        } else { /* the tail, padded with zeros: d = 0 adds nothing */
            double ab[VW] = {0}, rb[VW] = {0};
            memcpy(ab, a + i, (n - i) * sizeof *a), memcpy(rb, ref + i, (n - i) * sizeof *ref);
            av = load_d(ab), rv = load_d(rb);
        }
        vd d = av - rv;
        aa = vfma(av, av, aa), rr = vfma(rv, rv, rr), dd = vfma(d, d, dd), dr = vfma(d, rv, dr);
        vm field = (vm)(((vu)rv >> 52) & 0x7ff), e = field - 1022 - prec, lo = (vm){0} + (emin - 1);
        e = (vm)sel_d(e < lo, (vd)lo, (vd)e);
        vd u;
        vm ne = -e;
        if (!movemask_d(ne > 1023)) /* 2^−e a normal double in every lane (−e >= −1022: e = E − prec <= 1022) */
            u = abs_d(d) * (vd)((ne + 1023) << 52);
        else {
            vm e1 = ne >> 1, e2 = ne - e1;
            u = (abs_d(d) * (vd)((e1 + 1023) << 52)) * (vd)((e2 + 1023) << 52);
        }
        nan |= u != u;
        mu = sel_d(u > mu, u, mu);
    }
    vijp_kdrift p = {0, 0, 0, 0, 0};
    for (int j = 0; j < VW; j++) {
        p.aa += aa[j], p.rr += rr[j], p.dd += dd[j], p.dr += dr[j];
        p.max_ulps = mu[j] > p.max_ulps ? mu[j] : p.max_ulps;
        if (nan[j]) p.max_ulps = __builtin_nan("");
    }
    *out = p;
}
