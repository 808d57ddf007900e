/* fast.c's double path (entry_double: an entry of x, a double or a packed
 * level of at most 106 bits, against a packed reference of at most 192
 * bits, in double arithmetic) over VW entries at a time.  Internal to
 * compare/.
 *
 * Each lane does entry_double's steps and tests (fast.c gives the
 * argument), on an entry of its own: the same exact parts of x and y, the
 * same TwoSums for d = x − y and the same bound ed on d's error, the same
 * terms for Σd², Σy² and Σyd (two_prod with FMA where the set has it: the
 * same exact product), the same ulps test against the running largest.  A
 * lane whose entry fails a test adds nothing (its terms are masked to
 * zero) and hands the entry back to fast.c, which takes it one at a time
 * as before.  The lanes' sums are VW running pairs per sum, folded by
 * fast.c into its totals (E_of counts the folds).  The sets differ only in
 * VW and the instructions (avx2/, avx512/: 4 and 8); the metrics are the
 * exact evaluation's either way, since every sum carries its bound. */
#ifndef VIJP_COMPARE_LANES_H
#define VIJP_COMPARE_LANES_H

#include "format/packed.h"
#include <stddef.h>
#include <stdint.h>

/* The widest set's lanes (the output arrays' length). */
enum { CMP_LANES_MAX = 8 };

/* One chunk's inputs: x (xd doubles, or px packed of at most 106 bits and
 * at most two limbs) against pk (at most three limbs), at the chunk's
 * scales 2^-Kd (δ) and 2^-Ky (y); the ulp exponent of entry i is e = ey −
 * ulp_shift, raised to e_floor where it is lower; want_yy, want_yd: which
 * of Σy² and Σyd to form; ulps_max: the running largest ulps count, which
 * a lane's entry must not be able to raise. */
typedef struct {
    const double *xd;
    const vijp_packed *px, *pk;
    long Kd, Ky, ulp_shift, e_floor;
    int want_yy, want_yd;
    double ulps_max;
} cmp_lanes_job;

/* The lanes' running pairs (h, l) for Σd², Σy², Σyd (the first VW of each
 * used), and plain double sums of |y·d|'s leading parts and of the bounds
 * err_dd and err_yd (entry_double's); taken: the entries done. */
typedef struct {
    double dd_h[CMP_LANES_MAX], dd_l[CMP_LANES_MAX], yy_h[CMP_LANES_MAX], yy_l[CMP_LANES_MAX];
    double yd_h[CMP_LANES_MAX], yd_l[CMP_LANES_MAX];
    double abs_yd, err_dd, err_yd;
    size_t taken;
} cmp_lanes_sums;

/* Entries [i0, i1) of job (i1 − i0 at most 65536) added to *out (zero
 * at first, then what earlier calls left: the pairs run on); the offsets
 * from i0 of the entries not taken go to rest, in order, and their count
 * is returned. */
typedef size_t (*cmp_lanes_fn)(const cmp_lanes_job *job, size_t i0, size_t i1, cmp_lanes_sums *out, uint16_t *rest);

/* The largest exponent (MPFR's) among entries [i0, i1) of xd (doubles) or
 * p (packed), LONG_MIN for zeros and the packed NaN and Inf, into *hi;
 * the smallest of the others into *lo (LONG_MAX if none): fast.c's scan
 * of a chunk for its scales. */
typedef void (*cmp_lanes_exps_fn)(const double *xd, const vijp_packed *p, size_t i0, size_t i1, long *hi, long *lo);

typedef struct {
    const char *name;
    int vw;
    cmp_lanes_fn run;
    cmp_lanes_exps_fn exps;
} cmp_lanes_set;

/* The sets: 1 avx2, 2 avx512; NULL where the CPU or the build lacks them,
 * and for 0 (the kernel table's ref: fast.c takes every entry one at a
 * time).  The active one follows the kernel table's choice (kernels.h:
 * VIJP_KERNELS), as the double-double products do: NULL under ref. */
enum { CMP_LANES_SETS = 3 };
const cmp_lanes_set *vijp_cmp_lanes_set(int i);
const cmp_lanes_set *vijp_cmp_lanes_active(void);

#endif
