/* The comparisons' avx512 lanes: compare/lanes_simd.h at VW = 8, compiled
 * with AVX-512F (mk/lib.mk). */
#define VW 8
#include "compare/lanes_simd.h"

const cmp_lanes_set vijp_cmp_lanes_avx512 = {"avx512", VW, lanes_run, lanes_exps};
