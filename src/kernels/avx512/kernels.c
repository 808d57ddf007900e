/* The avx512 kernel set: the width-generic SIMD sources (src/kernels/simd/)
 * at VW = 8 doubles, compiled with this directory's target flags (Makefile). */
#define VW 8
#include "../kernels.h"
#include "../simd/elementwise.h"
#include "../simd/activations.h"
#include "../simd/drift.h"

const vijp_kernels vijp_kernels_avx512 = {
    .name = "avx512", VIJP_KERNEL_EXACT_ENTRIES(d), VIJP_KERNEL_EXACT_ENTRIES(f), SIMD_ACT_ENTRIES, .drift_d = drift_d,
};
