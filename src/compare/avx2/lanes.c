/* The comparisons' avx2 lanes: compare/lanes_simd.h at VW = 4, compiled
 * with AVX2 and FMA (mk/lib.mk). */
#define VW 4
#include "compare/lanes_simd.h"

const cmp_lanes_set vijp_cmp_lanes_avx2 = {"avx2", VW, lanes_run, lanes_exps};
