/* Runs the CUDA suite (t-cuda.c, t-cuda-dense.c): its own program, the only
 * test program linked with cuBLAS, cuSOLVER and the CUDA runtime, which map
 * ~0.8 GB of address space at start-up; in check_vijp that would leave
 * t-faults' size_under_ulimit unable to fork under its ulimit -v 1000000.
 * Exits non-zero if any test failed. */
#include "fixtures/testutil.h"
#include "fixtures/cudafix.h"
#include "vijp/error.h"
#include <stdlib.h>

int main(void)
{
    vijp_memory_policy_install();
    SRunner *sr = srunner_create(suite_cuda());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
