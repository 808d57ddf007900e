/* The avx2 set of the emulated dense products: src/emu/simd.h at VW = 4,
 * compiled with AVX2 + FMA (mk/lib.mk). */
#define VW 4
#include "emu/simd.h"

const vijp_emu_lanes vijp_emu_lanes_avx2 = {"avx2", simd_fused_f, simd_split_f, simd_split_d, simd_axpy_d, simd_axpy_many_d};
