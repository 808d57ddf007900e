/* The avx512 set of the double-double products: src/ddot/simd.h at VW = 8,
 * compiled with AVX-512F (mk/lib.mk). */
#define VW 8
#include "ddot/simd.h"

const vijp_dd_kernels vijp_dd_avx512 = {"avx512", simd_row, simd_gemv, simd_td_row, simd_td_gemv,
                                     simd_qd_row, simd_qd_gemv, simd_d5_row, simd_d5_gemv};
