/* SIMD drift partials (kernels.h: vijp_kdrift and its bound, which holds
 * for any summation order: here 2·VW lane sums of about n/(2·VW) terms
 * each, then the lanes in order).  ulp_f(r) from r's exponent field: E − prec with E =
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
 * either; same-run A/B over three alternating runs).  Two vectors per
 * iteration, each with its own accumulators: the four FMA chains and the
 * maximum no longer wait on one another's latency.  On Zen 4, alternating
 * binaries, 2^14 units: AVX-512 19.5-24.9 -> 23.5-32.5 GB/s, AVX2
 * 19.5-25.4 -> 19.6-30.1; 8M units: 65-104 % -> 97-124 % of the copy. */
#include "vec.h"


/* One vector of the partials: the sums' four FMAs and the ulp maximum;
 * bias = 1022 + prec, lo = emin − 1 in every lane. */
static inline void drift_step(vd av, vd rv, vm bias, vm lo, vd acc[4], vd *mu, vm *nan)
{
    vd d = av - rv;
    acc[0] = vfma(av, av, acc[0]), acc[1] = vfma(rv, rv, acc[1]), acc[2] = vfma(d, d, acc[2]),
    acc[3] = vfma(d, rv, acc[3]);
    vm field = (vm)(((vu)rv >> 52) & 0x7ff), e = field - bias;
    e = (vm)sel_d(e < lo, (vd)lo, (vd)e);
    vd u;
    vm ne = -e;
    if (!movemask_d(ne > 1023)) /* 2^−e a normal double in every lane (−e >= −1022: e = E − prec <= 1022) */
        u = abs_d(d) * (vd)((ne + 1023) << 52);
    else {
        vm e1 = ne >> 1, e2 = ne - e1;
        u = (abs_d(d) * (vd)((e1 + 1023) << 52)) * (vd)((e2 + 1023) << 52);
    }
    *nan |= u != u;
    *mu = sel_d(u > *mu, u, *mu);
}

static void drift_d(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out)
{
    vd acc[2][4] = {{{0}}}, mu[2] = {{0}};
    vm nan[2] = {{0}}, bias = (vm){0} + (1022 + prec), lo = (vm){0} + (emin - 1);
    size_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        drift_step(load_d(a + i), load_d(ref + i), bias, lo, acc[0], &mu[0], &nan[0]);
        drift_step(load_d(a + i + VW), load_d(ref + i + VW), bias, lo, acc[1], &mu[1], &nan[1]);
    }
    for (; i < n; i += VW) {
        double ab[VW] = {0}, rb[VW] = {0};
        size_t k = n - i < VW ? n - i : VW;
        memcpy(ab, a + i, k * sizeof *a), memcpy(rb, ref + i, k * sizeof *ref);
        drift_step(load_d(ab), load_d(rb), bias, lo, acc[0], &mu[0], &nan[0]);
    }
    vijp_kdrift p = {0, 0, 0, 0, 0};
    for (int j = 0; j < VW; j++) {
        p.aa += acc[0][0][j] + acc[1][0][j], p.rr += acc[0][1][j] + acc[1][1][j];
        p.dd += acc[0][2][j] + acc[1][2][j], p.dr += acc[0][3][j] + acc[1][3][j];
        for (int h = 0; h < 2; h++) {
            p.max_ulps = mu[h][j] > p.max_ulps ? mu[h][j] : p.max_ulps;
            if (nan[h][j]) p.max_ulps = __builtin_nan("");
        }
    }
    *out = p;
}
