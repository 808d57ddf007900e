/* Runs every Check suite; exits non-zero if any test failed. */
#include "fixtures/testutil.h"
#include "vijp/error.h"
#include <stdlib.h>

int main(void)
{
    vijp_memory_policy_install();
    SRunner *sr = srunner_create(suite_format());
    srunner_add_suite(sr, suite_layers());
    srunner_add_suite(sr, suite_activations());
    srunner_add_suite(sr, suite_coupling());
    srunner_add_suite(sr, suite_engines());
    srunner_add_suite(sr, suite_grad());
    srunner_add_suite(sr, suite_cli());
    srunner_add_suite(sr, suite_drift());
    srunner_add_suite(sr, suite_report());
    srunner_add_suite(sr, suite_certify());
    srunner_add_suite(sr, suite_certify_layer());
    srunner_add_suite(sr, suite_certify_act());
    srunner_add_suite(sr, suite_registry());
    srunner_add_suite(sr, suite_plugin_load());
    srunner_add_suite(sr, suite_check_layer());
    srunner_add_suite(sr, suite_faults());
    srunner_add_suite(sr, suite_eval());
    srunner_add_suite(sr, suite_atomic());
    srunner_add_suite(sr, suite_progress());
    srunner_add_suite(sr, suite_regress());
    srunner_add_suite(sr, suite_arrays());
    srunner_add_suite(sr, suite_netjson());
    srunner_add_suite(sr, suite_mixed());
    srunner_add_suite(sr, suite_resume());
    srunner_add_suite(sr, suite_kernels());
    srunner_add_suite(sr, suite_dot());
    srunner_add_suite(sr, suite_emu());
    srunner_add_suite(sr, suite_emu_act());
    srunner_add_suite(sr, suite_emu_dense());
    srunner_add_suite(sr, suite_prerender());
    srunner_add_suite(sr, suite_compare_fast());
    srunner_add_suite(sr, suite_b32set());
    srunner_add_suite(sr, suite_mixedset());
    srunner_add_suite(sr, suite_lu());
    srunner_add_suite(sr, suite_gemm());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
