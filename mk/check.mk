# The test programs and everything make check runs; make report, regress
# and baseline.

# check_vijp: every suite of tests/t-*.c (tests/check_main.c registers them),
# with the fixtures of tests/fixtures/, the shipped plugin (t-registry.c)
# and the command's progress meter (t-progress.c), unit text (t-resume.c)
# and prerendered files (t-prerender.c), tested in-process.
TEST_SRC := $(wildcard tests/t-*.c)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/check_main.o \
            $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/fixtures/cuda-mock.c,$(wildcard tests/fixtures/*.c))) \
            $(BUILD)/examples/layer-template/scaledtanh.o \
            $(BUILD)/src/study/progress.o $(BUILD)/src/study/unit_io.o $(BUILD)/src/study/draws.o $(BUILD)/src/report/prerender.o
# The CUDA suite's own test program (tests/check_cuda.c says why not
# check_vijp), linked with the CUDA kernels' archive, then libvijp.a (the
# kernels call vijp_fail and the allocator), then CUDA.
CUDA_TEST_OBJ := $(filter $(BUILD)/tests/t-cuda%,$(TEST_OBJ))
TEST_OBJ  := $(filter-out $(CUDA_TEST_OBJ),$(TEST_OBJ))
$(BUILD)/check_vijp: $(TEST_OBJ) $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS) $(CHECK_LIBS)
$(BUILD)/check_cuda: $(BUILD)/tests/check_cuda.o $(CUDA_TEST_OBJ) $(BUILD)/tests/fixtures/testutil.o $(CUDA_LIB) $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(LDLIBS) $(VIJP_LIBS) $(CUDA_LIBS) $(CHECK_LIBS)
CUDA_DEPS := $(patsubst %.o,%.d,$(CUDA_OBJ) $(CUDA_TEST_OBJ) $(BUILD)/tests/check_cuda.o $(CUDA_SET_OBJ) $(CUDA_MOCK_OBJ))
$(CUDA_DEPS):
-include $(CUDA_DEPS)

# A preload library that refuses every malloc LAPACKE makes
# (tests/preload/nomem-lapacke.c), for the test of what a command shows when
# LAPACKE runs out of memory (t-arrays.c).  Uninstrumented, like the plugins:
# AddressSanitizer's allocator cannot be preloaded over (that test skips).
NOMEM_LAPACKE := $(BUILD)/tests/nomem-lapacke.so
$(NOMEM_LAPACKE): tests/preload/nomem-lapacke.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wall -Wextra -fPIC -shared -o $@ $< -ldl

# check-install: `make install` into a fresh temporary prefix, then a program
# written there is built with nothing but `pkg-config --cflags --libs vijp`,
# against libvijp.so and statically, and run (scripts/check-install.sh).
# Under SANITIZE=1 it is skipped: the sanitized libraries cannot be linked into
# an uninstrumented program, and the plain `make check` (which CI runs too)
# tests the installation of the libraries that are actually installed.
ifeq ($(SANITIZE),1)
CHECK_INSTALL_DEPS :=
CHECK_INSTALL = @echo "check-install: SKIPPED under SANITIZE=1 (run the plain make check to test make install)"
check-install:
	$(CHECK_INSTALL)
else
CHECK_INSTALL_DEPS := all $(BUILD)/libvijp-public.a
CHECK_INSTALL = +@MAKE="$(MAKE)" VIJP_VERSION="$(VIJP_VERSION)" BUILD="$(BUILD)" scripts/check-install.sh
check-install: all $(BUILD)/libvijp-public.a
	$(CHECK_INSTALL)
endif

# VIJP_BIN lets the CLI tests find the command (and the test plugins, in
# $(BUILD)/plugins beside it).  Sanitized runs do not fork,
# so LeakSanitizer sees the whole suite in one process.
ifeq ($(SANITIZE),1)
CHECK_ENV := CK_FORK=no
endif

# The benchmarks run in both builds: their argument handling
# (scripts/check-bench-args.sh: --help, refusals) and every path they
# measure at small sizes (scripts/check-bench-smoke.sh), so that
# AddressSanitizer and UndefinedBehaviorSanitizer see their code too (a
# benchmark's buffer overflow was once found only by a size change).  In
# the plain build only: the torch parity scripts that compare numbers
# alone (the sanitizers change no number; the commands they run are the
# sanitized suites' too).  check-torch-roundtrip, which reads users'
# models, runs in both.
TORCH_NUMBERS := bf16 ftz act stack attention
# fuzz-replay and check-configure run the same programs on the same inputs
# whatever SANITIZE says (build-fuzz is its own sanitized build; the
# configuration step is make's own), so only the plain make check runs them.
ifeq ($(SANITIZE),1)
CHECK_FUZZ_REPLAY = @echo "fuzz-replay: SKIPPED under SANITIZE=1 (the same run as the plain make check's)"
CHECK_CONFIGURE = @echo "check-configure: SKIPPED under SANITIZE=1 (the same run as the plain make check's)"
else
CHECK_FUZZ_REPLAY = $(FUZZ_REPLAY)
CHECK_CONFIGURE = MAKE="$(MAKE)" scripts/check-configure.sh
endif
ifeq ($(SANITIZE),1)
# bench-mpi runs the sanitized vijp under mpirun, whose start-up leaks in
# Open MPI's own plug-ins (the reason check-mpi skips here): LeakSanitizer
# is off for that one program and the ranks it starts; AddressSanitizer
# and UBSan stay on.
CHECK_BENCH_SMOKE = scripts/check-bench-smoke.sh $(BUILD)/vijp $(filter-out $(BUILD)/bench-mpi,$(BENCH_PROGS)) && \
	ASAN_OPTIONS=detect_leaks=0 scripts/check-bench-smoke.sh $(BUILD)/vijp $(BUILD)/bench-mpi
CHECK_TORCH_NUMBERS = @echo "check-torch ($(TORCH_NUMBERS)): SKIPPED under SANITIZE=1 (numbers only: the plain make check runs them)"
CHECK_TORCH_RUN := skipped
else
CHECK_BENCH_SMOKE = scripts/check-bench-smoke.sh $(BUILD)/vijp $(BENCH_PROGS)
CHECK_TORCH_RUN := $(TORCH_NUMBERS)
endif
# Everything check runs, built first: `make -j2 check-build` builds it on
# both cores (CI does), then `make check` only runs.
CHECK_BUILD := $(BUILD)/check_vijp $(BUILD)/check_cuda $(CUDA_SO) $(CUDA_MOCK) $(BUILD)/vijp $(BUILD)/vijp-perturbed \
               $(PLUGINS) $(CHECK_INSTALL_DEPS) $(BUILD)/libvijp.so $(BENCH_PROGS) $(NOMEM_LAPACKE)
check-build: $(CHECK_BUILD) $(if $(HAVE_FUZZ_CC),$(FUZZ_BINS))
.PHONY: check-build
# `make check` runs its steps CHECK_JOBS at a time (default: the machine's
# cores), each step's output shown whole when it ends (-Otarget): the steps
# after the suites are one process each (a script, a python, one suite: CPU
# time = wall time), so run one after another they left a core idle for two
# to three minutes of CI.  The suites go first, then the longest steps (make
# starts them in this order).  The steps that run make in $(BUILD)
# themselves (make install, fuzz-replay's sub-make, gpu-check's build) go
# one after another: two makes in one build folder would race on its FORCE'd
# files (compile-flags, commit.h).  make check CHECK_JOBS=1 runs all in turn.
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
CHECK_STEPS := check-run-suites check-run-install check-run-fuzz check-run-gpu check-run-mpi check-run-modules \
               check-run-mock check-run-cuda check-run-roundtrip $(addprefix check-run-torch-,$(CHECK_TORCH_RUN)) \
               check-run-bench check-run-exports check-run-configure
.PHONY: check-steps $(CHECK_STEPS)
check: $(CHECK_BUILD)
	+@$(MAKE) --no-print-directory -j$(CHECK_JOBS) -Otarget check-steps
check-steps: $(CHECK_STEPS)
check-run-suites:
	$(CHECK_ENV) VIJP_BIN=$(abspath $(BUILD)/vijp) VIJP_PERTURBED_BIN=$(abspath $(BUILD)/vijp-perturbed) \
	  ./$(BUILD)/check_vijp
check-run-cuda:
	$(CHECK_ENV) VIJP_BIN=$(abspath $(BUILD)/vijp) ./$(BUILD)/check_cuda
check-run-mock:
	@echo "check: the cuda kernel set's wrappers over the host mock (tests/fixtures/cuda-mock.c)"
	for s in kernels b32set mixedset; do $(CHECK_ENV) CK_RUN_SUITE=$$s VIJP_BIN=$(abspath $(BUILD)/vijp) \
	  VIJP_CUDA_LIBRARY=$(abspath $(CUDA_MOCK)) ./$(BUILD)/check_vijp || exit 1; done
	$(CHECK_ENV) CK_RUN_CASE=set VIJP_BIN=$(abspath $(BUILD)/vijp) VIJP_CUDA_LIBRARY=$(abspath $(CUDA_MOCK)) \
	  ./$(BUILD)/check_cuda
check-run-install:
	$(CHECK_INSTALL)
check-run-roundtrip:
	VIJP_BIN=$(abspath $(BUILD)/vijp) $(or $(PYTHON_TORCH),python3) scripts/check-torch-roundtrip.py
$(addprefix check-run-torch-,$(TORCH_NUMBERS)): check-run-torch-%:
	VIJP_BIN=$(abspath $(BUILD)/vijp) $(or $(PYTHON_TORCH),python3) scripts/check-torch-$*.py
check-run-torch-skipped:
	$(CHECK_TORCH_NUMBERS)
check-run-fuzz: | check-run-install
	$(CHECK_FUZZ_REPLAY)
check-run-mpi:
	$(CHECK_MPI)
check-run-bench:
	scripts/check-bench-args.sh $(BENCH_PROGS)
	$(CHECK_BENCH_SMOKE)
check-run-modules:
	scripts/check-modules.py $(BUILD)
check-run-exports:
	scripts/check-exports.py $(BUILD)/libvijp.so
check-run-configure:
	$(CHECK_CONFIGURE)
check-run-gpu: | check-run-fuzz
	$(CHECK_GPU_CHECK)

# scripts/gpu-check.sh and gpu-bundle.sh on their no-GPU paths (exit 77, bad
# bundles, a failing step): in the CUDA build in build/, which they use.
ifeq ($(VIJP_CUDA)$(BUILD),1build)
CHECK_GPU_CHECK = scripts/check-gpu-check.sh
else
CHECK_GPU_CHECK = @echo "check-gpu-check: SKIPPED (not the CUDA build in build/)"
endif

# A study under mpirun at P = 1, 2, 4 against one process, killed and
# resumed (scripts/check-mpi.sh), and the certification suite's matrices
# spread over 2 and 4 ranks with one process's verdict counts
# (scripts/check-certify-shards.sh), in a build with MPI; not under
# SANITIZE=1 (Open MPI's start-up is not leak-clean).  `make check-mpi` runs
# them alone.
ifeq ($(MPI)$(SANITIZE),1)
CHECK_MPI = scripts/check-mpi.sh $(BUILD)/vijp && scripts/check-certify-shards.sh $(BUILD)/check_vijp 1 2 4
else
CHECK_MPI = @echo "check-mpi: SKIPPED ($(if $(filter 1,$(SANITIZE)),under SANITIZE=1,built without MPI: install libopenmpi-dev openmpi-bin, or make MPI=1))"
endif
.PHONY: check-mpi
check-mpi: $(BUILD)/vijp $(BUILD)/check_vijp
	$(CHECK_MPI)

# A python3 that imports torch, for the PyTorch round trip (evaluated only by
# make check: importing torch takes seconds); none: the script says SKIPPED.
PYTHON_TORCH = $(shell for p in python3 /usr/bin/python3; do $$p -c 'import torch' >/dev/null 2>&1 && { echo $$p; break; }; done)

report: $(BUILD)/vijp
	./$(BUILD)/vijp report

# The CI regression check: a small study against its committed baseline,
# with --strict: any change in a bit-reproducible format fails, even one that
# looks better (one ulp more on every vijp makes a third of this study's
# changed curves "better"), so the baseline always holds today's numbers.
# The JUnit report for a CI server goes to $(BUILD)/regress-junit.xml.
# `make baseline` rewrites the baseline (commit it with a note saying why).
REGRESS_STUDY := --net dense:16,leaky:0.5 --net dense:16,leaky:0.1 --init orthogonal,gaussian --depth 32 \
                 --formats bfloat16,bfloat16+binary32,binary32,double,mpfr:113 --seeds 1,2,3,4 --no-plots -q
regress: $(BUILD)/vijp
	./$(BUILD)/vijp drift $(REGRESS_STUDY) --out $(BUILD)/regress
	./$(BUILD)/vijp regress --strict --junit $(BUILD)/regress-junit.xml reports/baselines/ci-small/drift.json \
	  $(BUILD)/regress/drift.json
baseline: $(BUILD)/vijp
	./$(BUILD)/vijp drift $(REGRESS_STUDY) --out reports/baselines/ci-small
	cd reports/baselines/ci-small && rm -f drift.csv curves.csv memory.csv .vijp-manifest


# The certification suite at 100× its adversarial cases (10^5 matrices).
# With MPI, the 10^5 matrices run once alone and once over the machine's
# cores under mpirun, and the ranks' summed verdicts must equal one process's.
# Then the fault walk, and the layer battery (in the library and through
# check-layer, with the plugins) on every type at mpfr:700, 1100, 2000, 4032;
# the bf16 stacks against torch at depth 64 (scripts/check-torch-stack.py).
check-long: $(BUILD)/check_vijp $(BUILD)/vijp $(PLUGINS)
ifeq ($(MPI),1)
	scripts/check-certify-shards.sh ./$(BUILD)/check_vijp 100 $(shell nproc)
else
	CK_RUN_SUITE=certify VIJP_TEST_SCALE=100 ./$(BUILD)/check_vijp
endif
	VIJP_BIN=$(abspath $(BUILD)/vijp) CK_RUN_SUITE=faults VIJP_TEST_SCALE=2 ./$(BUILD)/check_vijp
	CK_RUN_SUITE=layers VIJP_TEST_SCALE=2 ./$(BUILD)/check_vijp
	VIJP_BIN=$(abspath $(BUILD)/vijp) CK_RUN_SUITE=checklayer VIJP_TEST_SCALE=2 ./$(BUILD)/check_vijp
	VIJP_BIN=$(abspath $(BUILD)/vijp) VIJP_TEST_SCALE=2 $(or $(PYTHON_TORCH),python3) scripts/check-torch-stack.py
