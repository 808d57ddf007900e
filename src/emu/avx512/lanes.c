/* The avx512 set of the emulated dense products: src/emu/simd.h at VW = 8,
 * compiled with AVX-512F + DQ (mk/lib.mk). */
#define VW 8
#include "emu/simd.h"

const vijp_emu_lanes vijp_emu_lanes_avx512 = {"avx512", simd_fused_f, simd_split_f, simd_split_d, simd_axpy_d, simd_axpy_many_d};
