/* Shared helpers of the Check suites. */
#ifndef VIJP_TESTUTIL_H
#define VIJP_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include "vijp/vijp.h"

Suite *suite_format(void);
Suite *suite_layers(void);
Suite *suite_engines(void);
Suite *suite_cli(void);
Suite *suite_drift(void);
Suite *suite_report(void);
Suite *suite_certify(void);
Suite *suite_certify_layer(void);
Suite *suite_certify_act(void);
Suite *suite_activations(void);
Suite *suite_coupling(void);
Suite *suite_registry(void);
Suite *suite_faults(void);
Suite *suite_eval(void);
Suite *suite_atomic(void);
Suite *suite_progress(void);
Suite *suite_regress(void);
Suite *suite_check_layer(void);
Suite *suite_arrays(void);
Suite *suite_netjson(void);

/* Iteration count scaled by VIJP_TEST_SCALE (default 1), as FLINT does. */
long test_iters(long base);
/* Seed for a test: VIJP_TEST_SEED or a fixed default; failures print it. */
uint64_t test_seed(void);

#endif
