/* The avx2 kernel set: the width-generic SIMD sources (src/kernels/simd/)
 * at VW = 4 doubles, compiled with this directory's target flags (Makefile). */
#define VW 4
#include "kernels/kernels.h"
#include "kernels/simd/elementwise.h"
#include "kernels/simd/activations.h"
#include "kernels/simd/drift.h"

const vijp_kernels vijp_kernels_avx2 = {
    .name = "avx2", VIJP_KERNEL_EXACT_ENTRIES(d), VIJP_KERNEL_EXACT_ENTRIES(f), SIMD_ACT_ENTRIES, .drift_d = drift_d,
};
