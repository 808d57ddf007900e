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
Suite *suite_mixed(void);
Suite *suite_resume(void);
Suite *suite_kernels(void);
Suite *suite_dot(void);
Suite *suite_emu(void);
Suite *suite_emu_act(void);
Suite *suite_emu_dense(void);
Suite *suite_prerender(void);
Suite *suite_compare_fast(void);
Suite *suite_b32set(void);
Suite *suite_mixedset(void);
Suite *suite_lu(void);
Suite *suite_gemm(void);

/* Iteration count scaled by VIJP_TEST_SCALE (default 1), as FLINT does. */
long test_iters(long base);
/* Seed for a test: VIJP_TEST_SEED or a fixed default; failures print it. */
uint64_t test_seed(void);
/* Spreading a test's numbered cases over processes (make check-long under
 * mpirun: scripts/check-long-mpi.sh).  The shard is this process's rank and
 * the number of processes, from mpirun's environment (Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE, MPICH's PMI_RANK/PMI_SIZE) or VIJP_TEST_SHARD=I/P;
 * one process alone is shard 0 of 1.  Case cs is this process's when
 * cs mod P = I.  A sharded test draws each case from its own generator
 * (test_case_rng), so which process runs a case does not change the case. */
void test_shard(long *rank, long *size);
int test_mine(long cs);
long test_mine_count(long n); /* how many of cases 0..n-1 are this process's */
void test_case_rng(vijp_rng *r, uint64_t stream, long cs);

#endif
