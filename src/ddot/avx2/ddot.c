/* The avx2 set of the double-double products: src/ddot/simd.h at VW = 4,
 * compiled with AVX2 + FMA (mk/lib.mk). */
#define VW 4
#include "ddot/simd.h"

const vijp_dd_kernels vijp_dd_avx2 = {"avx2", simd_row, simd_gemv, simd_td_row, simd_td_gemv,
                                     simd_qd_row, simd_qd_gemv, simd_d5_row, simd_d5_gemv};
