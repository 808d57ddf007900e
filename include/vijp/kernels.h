/* The kernel sets behind the double operators (src/kernels/kernels.h): a
 * program may check the VIJP_KERNELS choice up front. */
#ifndef VIJP_KERNELS_H
#define VIJP_KERNELS_H

#include "vijp/api.h"
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Select the kernel set now (once per process): VIJP_KERNELS=ref|avx2|
 * avx512|cuda forces one, unset or "auto" takes the best the CPU runs.
 * VIJP_EINVAL, with the reason, when the forced set is unknown or not
 * available here.  Without this call the first kernel use selects, and a
 * bad VIJP_KERNELS then ends the process (message, exit 1): there is no
 * silent fallback. */
VIJP_API VIJP_MUST_CHECK int vijp_kernels_init(vijp_error *err);
/* "ref", "avx2", "avx512" or "cuda": the set in use; NULL after a failed
 * selection. */
VIJP_API const char *vijp_kernels_name(void);

#ifdef __cplusplus
}
#endif

#endif
