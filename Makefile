# vijp — build, test, report, benchmark, install.
#   make             libvijp.a, libvijp.so, the vijp command and its man page (build/)
#   make check       Check test suites (check_vijp, check_cuda), then check-install (SANITIZE=1: the suite under
#                    ASan + UBSan; check-install is skipped, see mk/check.mk)
#   make check-build  build everything make check runs (make -j2 check-build: on both cores, as CI
#                    does before make check; add SANITIZE=1 for the sanitized tree)
#   make check-install  install into a temporary prefix and build a program against it
#                    with pkg-config, shared and static
#   make check-mpi   a small study under mpirun at P = 1, 2, 4 against one process, killed
#                    and resumed (run by make check in a build with MPI: make MPI=1/0 chooses)
#   make check-long  the certification suite on 10^5 adversarial matrices (with MPI: also
#                    spread over the cores by mpirun, same verdict counts); the
#                    allocation-failure walk over every allocation (tests/t-faults.c); the
#                    layer battery and check-layer on every type at mpfr:700 … 4032
#   make report      the main job on its embedded default (reports/latest/)
#   make regress     a small drift study against reports/baselines/ci-small
#   make bench       engine, drift, certification, memory and activation benchmarks (ratios measured in one run)
#   make install     PREFIX=/usr/local (default), DESTDIR honoured: bin/vijp, lib/libvijp.{a,so},
#                    include/vijp/*.h, lib/pkgconfig/vijp.pc, share/man/man1/vijp.1
#   make uninstall   remove what install installed (same PREFIX/DESTDIR)
#   make clean       remove build/, build-san/, build-fuzz/, build-generic/ and build-fuzz-generic/
#   make GENERIC=1   the same targets with the reference kernels only (no SIMD, no SLEEF), in build-generic/
#   make fuzz, fuzz-replay, fuzz-run   the libFuzzer harnesses (mk/fuzz.mk)
#
# The rules are in mk/, one file a concern, read in this order (a file may
# use what an earlier one defines):
#   mk/config.mk   the build folder, the flags, and what mk/configure.sh
#                  detects once into $(BUILD)/config.mk
#   mk/lib.mk      the library, the command, its man page, the test plugins
#   mk/cuda.mk     the CUDA kernels and their mock
#   mk/bench.mk    the benchmark programs (bench/)
#   mk/fuzz.mk     the libFuzzer harnesses (tests/fuzz/)
#   mk/check.mk    the test programs, make check and its parts, report, regress
#   mk/install.mk  install, uninstall, vijp.pc
# Nothing runs while the files are read: every probe is in mk/configure.sh,
# and every generated file is made by a rule.

.PHONY: all check check-install check-long report regress baseline bench clean install uninstall plugins FORCE
all:
FORCE:

include mk/config.mk
include mk/lib.mk
include mk/cuda.mk
include mk/bench.mk
include mk/fuzz.mk
include mk/check.mk
include mk/install.mk

# An object whose .d is missing (first build, or an object from before .d
# files) is rebuilt; the .d files themselves are made only by the compiler.
DEPS := $(patsubst %.o,%.d,$(LIB_OBJ) $(CLI_OBJ) $(TEST_OBJ) $(PIC_OBJ) $(BENCH_OBJ) $(BUILD)/perturbed/layer.o)
$(DEPS):
include $(wildcard $(DEPS))

clean:
	rm -rf build build-san build-fuzz build-generic build-fuzz-generic
