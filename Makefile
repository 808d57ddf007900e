# vijp — build, test, report, benchmark, install.
#   make             libvijp.a, libvijp.so, the vijp command and its man page (build/)
#   make check       Check test suites (check_vijp, check_cuda), then check-install (SANITIZE=1: the suite under
#                    ASan + UBSan; check-install is skipped, see below)
#   make check-install  install into a temporary prefix and build a program against it
#                    with pkg-config, shared and static
#   make check-mpi   a small study under mpirun at P = 1, 2, 4 against one process, killed
#                    and resumed (run by make check in a build with MPI: make MPI=1/0 chooses)
#   make check-long  the certification suite on 10^5 adversarial matrices (with MPI: also
#                    spread over the cores by mpirun, same verdict counts); the
#                    allocation-failure walk over every allocation (tests/t-faults.c)
#   make report      the main job on its embedded default (reports/latest/)
#   make regress     a small drift study against reports/baselines/ci-small
#   make bench       engine, drift, certification, memory and activation benchmarks (ratios measured in one run)
#   make install     PREFIX=/usr/local (default), DESTDIR honoured: bin/vijp, lib/libvijp.{a,so},
#                    include/vijp/*.h, lib/pkgconfig/vijp.pc, share/man/man1/vijp.1
#   make uninstall   remove what install installed (same PREFIX/DESTDIR)
#   make clean       remove build/, build-san/, build-fuzz/, build-generic/ and build-fuzz-generic/
#   make GENERIC=1   the same targets with the reference kernels only (no SIMD, no SLEEF), in build-generic/
# Sanitized objects go to build-san/ so the two builds never mix.
# CFLAGS (default -O2 -g), CPPFLAGS, LDFLAGS and LDLIBS are the user's: the
# flags the build needs are in VIJP_* variables used alongside them, so
# `make CFLAGS=-fPIC` or `make CFLAGS="-O0 -g"` keep them.

CC      ?= cc
PKGS    := mpfr lapacke openblas jansson fftw3
CHECKPK := check
ifneq ($(GENERIC),1)
PKGS    += sleef # SIMD kernels' vector exp, log1p, tanh, erfc (src/kernels/simd/activations.h)
endif

# GENERIC=1: the reference kernels only (src/kernels/ref), no SIMD file
# compiled, no SLEEF; objects in build-generic/ so the two builds never mix.
ifeq ($(GENERIC),1)
BUILD   ?= build-generic
endif
ifeq ($(SANITIZE),1)
BUILD   := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# vijp_mat_init_unset's buffers start as NaN: a read before the write would
# otherwise see whatever the heap held, often zeros, and pass unnoticed.
VIJP_POISON := -DVIJP_POISON_UNSET
else
BUILD   ?= build
SANFLAGS :=
endif

CFLAGS  ?= -O2 -g
VIJP_CPPFLAGS := -Iinclude -Isrc -I. -D_GNU_SOURCE $(VIJP_POISON) $(shell pkg-config --cflags $(PKGS))
VIJP_CFLAGS   := -pthread -std=c11 -Wall -Wextra -Wshadow -Werror=unused-result
# -ffp-contract=off: no silent FMA, so double code and the binary32 emulation
# perform exactly the operations written (DESIGN §3).  It comes after the
# user's CFLAGS so that nothing there turns contraction back on.
VIJP_FPFLAGS  := -ffp-contract=off $(SANFLAGS)
# MPFI has no pkg-config file; GMP's is written out with it (as in vijp.pc).
MPFI_CFLAGS   ?=
MPFI_LIBS     ?= -lmpfi -lgmp
# FLINT (exact rank, src/certify/exact.c) has none either.
FLINT_LIBS    ?= -lflint
VIJP_CPPFLAGS += $(MPFI_CFLAGS)
VIJP_LDFLAGS  := -pthread $(SANFLAGS)
VIJP_LIBS     := $(shell pkg-config --libs $(PKGS)) $(FLINT_LIBS) $(MPFI_LIBS) -lm -ldl -pthread
# MPFR and GMP are linked into the programs (vijp, the tests, the benchmarks)
# from their static archives where the system has them (Debian's libmpfr-dev
# and libgmp-dev do), whole, so that every MPFR and GMP symbol a plugin or a
# shared dependency (FLINT, MPFI) reaches is the program's own copy.  Why: a
# shared libmpfr reaches its thread-local state (the exponent range every
# emulated operation reads and sets) through __tls_get_addr, 7% of the
# default study; linked into the program it is a fixed offset, and the study
# runs 15-25% faster.  libvijp.so and libvijp.a keep linking MPFR as a shared
# library.  MP_STATIC= (empty) links the shared ones.
MPFR_A := $(wildcard $(shell $(CC) -print-file-name=libmpfr.a))
GMP_A  := $(wildcard $(shell $(CC) -print-file-name=libgmp.a))
MP_WHOLE := -Wl,--whole-archive $(MPFR_A) $(GMP_A) -Wl,--no-whole-archive
MP_STATIC ?= $(if $(and $(MPFR_A),$(GMP_A)),$(MP_WHOLE))
# -MMD -MP: each object's header dependencies, in a .d file next to it.
COMPILE = $(CC) $(VIJP_CPPFLAGS) $(CPPFLAGS) $(VIJP_CFLAGS) $(CFLAGS) $(VIJP_FPFLAGS) $(VIJP_ISAFLAGS) $(VIJP_VISFLAGS) -MMD -MP
LINK    = $(CC) $(VIJP_CFLAGS) $(CFLAGS) $(VIJP_FPFLAGS) $(VIJP_LDFLAGS) $(LDFLAGS)

# The library's modules, each a folder of src/ (src/README.md: what each owns).
LIB_MODULES := base format kernels layer layers net grad memory compare certify check_layer drift engines array_io
LIB_SRC := $(wildcard $(LIB_MODULES:%=src/%/*.c)) $(wildcard oracles/*.c)
# The narrow formats' native operators (src/emu/, bit for bit the oracles').
LIB_SRC += $(wildcard src/emu/*.c)
# The kernel table (src/kernels/kernels.h): ref always; the SIMD sets unless
# GENERIC=1, each directory compiled for its instruction set (VIJP_ISAFLAGS,
# per object) and chosen at run time by CPU feature detection.
LIB_SRC += $(wildcard src/kernels/ref/*.c)
ifeq ($(GENERIC),1)
VIJP_CPPFLAGS += -DVIJP_GENERIC
else
LIB_SRC += $(wildcard src/kernels/avx2/*.c src/kernels/avx512/*.c)
endif
# The command's modules: the study scheduler, the report folder and its
# writers, the regression comparison, the command line itself.
CLI_MODULES := study report regress cli
# MPI (src/mpi/mpi.h): MPI=1 builds src/mpi/mpi.c with mpicc's
# flags, MPI=0 its serial stand-in src/mpi/serial.c; by default MPI=1
# where mpicc is found.  Switching rebuilds the command ($(BUILD)/mpi-config).
MPICC   ?= mpicc
MPI     ?= $(if $(shell command -v $(MPICC) 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null || pkg-config --cflags ompi-c mpich 2>/dev/null)
MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null || pkg-config --libs ompi-c mpich 2>/dev/null)
CLI_SRC := $(wildcard $(CLI_MODULES:%=src/%/*.c)) $(filter-out src/mpi/serial.c,$(wildcard src/mpi/*.c))
else
MPI_LIBS   :=
CLI_SRC := $(wildcard $(CLI_MODULES:%=src/%/*.c)) $(filter-out src/mpi/mpi.c,$(wildcard src/mpi/*.c))
endif
TEST_SRC := $(wildcard tests/t-*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/check_main.o $(BUILD)/tests/testutil.o $(BUILD)/tests/layerfix.o $(BUILD)/tests/f32fix.o $(BUILD)/tests/clirun.o $(BUILD)/tests/certfix.o $(BUILD)/tests/actterms.o \
            $(BUILD)/examples/layer-template/scaledtanh.o \
            $(BUILD)/src/study/progress.o $(BUILD)/src/study/unit_io.o $(BUILD)/src/report/prerender.o # the shipped plugin (t-registry.c), the command's progress meter (t-progress.c), unit text (t-resume.c) and prerendered files (t-prerender.c), tested in-process
# The shared library's objects: position-independent, in their own tree.
PIC_OBJ := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
# The library exports what include/vijp/ declares with VIJP_API and nothing
# else (include/vijp/api.h; make check compares nm -D with the headers).
# Hidden symbols still link statically: the command, the tests and the
# benchmarks reach internal functions through libvijp.a.
$(LIB_OBJ) $(PIC_OBJ) $(BUILD)/perturbed/layer.o: VIJP_VISFLAGS := -fvisibility=hidden
BENCH_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/bench-*.c))

# The version is the library's (include/vijp/vijp.h); the soname changes with
# the ABI, by hand.
VIJP_VERSION := $(shell sed -n '/define VIJP_VERSION/s/[^"]*"\([^"]*\)".*/\1/p' include/vijp/vijp.h)
SOVERSION    := 0
SONAME       := libvijp.so.$(SOVERSION)
SHLIB        := libvijp.so.$(VIJP_VERSION)

.PHONY: all check check-install check-long report regress baseline bench clean install uninstall plugins
all: $(BUILD)/libvijp.a $(BUILD)/vijp $(BUILD)/libvijp.so $(BUILD)/vijp.1

# CUDA kernels (src/kernels/cuda/, API in cuda.h): compiled by nvcc when it is
# found (PATH, else /usr/local/cuda/bin) into $(BUILD)/libvijp-cuda.a, which
# the programs that use them link with cuBLAS, cuSOLVER and the CUDA runtime:
# check_vijp and bench-gpu.  Not libvijp nor the vijp command: loading
# cuBLAS and cuSOLVER maps ~0.8 GB (libcublasLt alone is 540 MB), which no
# run that does not use the GPU should pay (t-faults' size_under_ulimit runs
# vijp under ulimit -v 1000000: it could not even start).  Plugging the
# kernels into the library should load them on demand (dlopen).
# CUDA=0 or GENERIC=1 build without them; so does SANITIZE=1: the CUDA runtime
# under ASan needs ASAN_OPTIONS=protect_shadow_gap=0 on a GPU and its driver
# allocations show up in LeakSanitizer, so the sanitized build tests the host
# side only (t-cuda's host_* tests run there).  Without CUDA the archive holds
# src/kernels/cuda/none.c, which answers "built without CUDA".
# NVCC_ARCH: SASS for sm_90 (H100/H200) and PTX for compute_80, which the
# driver compiles for any other GPU of compute capability >= 8.0.
NVCC      ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
NVCCFLAGS ?= -O2
VIJP_CUDA := $(if $(filter 0,$(CUDA))$(filter 1,$(GENERIC) $(SANITIZE)),,$(if $(NVCC),1))
ifeq ($(VIJP_CUDA),1)
CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
CUDA_LIBS   := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcusolver -lcublas -lcudart -lstdc++
# --fmad=false: no contraction, as -ffp-contract=off for the C code.
NVCC_COMPILE = $(NVCC) -std=c++17 --fmad=false $(NVCC_ARCH) -Xcompiler -fPIC,-Wall,-Wextra -Iinclude -Isrc $(NVCCFLAGS) -MMD -MP
CUDA_OBJ    := $(patsubst %.cu,$(BUILD)/%.o,$(wildcard src/kernels/cuda/*.cu))
else
CUDA_LIBS   :=
CUDA_OBJ    := $(BUILD)/src/kernels/cuda/none.o
# a libvijp-cuda.so left by an earlier CUDA build in this tree would be loaded
$(shell rm -f $(BUILD)/libvijp-cuda.so)
endif
CUDA_LIB  := $(BUILD)/libvijp-cuda.a
# libvijp-cuda.so: the same kernels as the CUDA kernel set of the table
# (src/kernels/cuda/kernel_set.c), which libvijp loads with dlopen when a
# @cuda format or VIJP_KERNELS=cuda asks for it (src/kernels/kernels.c), so
# that only those runs map cuBLAS.  It exports vijp_cuda_kernel_set alone.
ifeq ($(VIJP_CUDA),1)
CUDA_SO   := $(BUILD)/libvijp-cuda.so
CUDA_SET_OBJ := $(BUILD)/pic/src/kernels/cuda/kernel_set.o
all: $(CUDA_SO)
$(CUDA_SO): $(CUDA_OBJ) $(CUDA_SET_OBJ) src/kernels/cuda/libvijp-cuda.map
	$(LINK) -shared -Wl,--no-undefined -Wl,--version-script=src/kernels/cuda/libvijp-cuda.map -o $@ \
	  $(CUDA_OBJ) $(CUDA_SET_OBJ) $(CUDA_LIBS) -pthread
endif
# The GPU benchmark is part of make bench only in a CUDA build (it prints
# SKIPPED and exits 0 where the build has CUDA but the machine no GPU).
BENCH_GPU := $(if $(VIJP_CUDA),$(BUILD)/bench-gpu)
# Every benchmark program; make check runs each with --help and bad arguments.
BENCH_PROGS := $(addprefix $(BUILD)/bench-,engines drift certify memory activations conv kernels mpi reference emu-dense) \
               $(BENCH_GPU)
all: $(CUDA_LIB)
$(CUDA_LIB): $(CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^
# libvijp-cuda-mock.so: kernel_set.c over a host stand-in for the CUDA API
# (tests/cuda-mock.c), built in every configuration, so that make check runs
# the cuda kernel set's wrappers without a GPU (VIJP_CUDA_LIBRARY, below).
CUDA_MOCK := $(BUILD)/libvijp-cuda-mock.so
CUDA_MOCK_OBJ := $(BUILD)/pic/src/kernels/cuda/kernel_set.o $(BUILD)/pic/tests/cuda-mock.o
$(CUDA_MOCK): $(CUDA_MOCK_OBJ) src/kernels/cuda/libvijp-cuda.map
	$(LINK) -shared -Wl,--no-undefined -Wl,--version-script=src/kernels/cuda/libvijp-cuda.map -o $@ \
	  $(CUDA_MOCK_OBJ) $(VIJP_LIBS)
# Its users: the CUDA suite's own test program (tests/check_cuda.c says why
# not check_vijp) and the GPU benchmark, each linked with the archive, then
# libvijp.a (the kernels call vijp_fail and the allocator), then CUDA.
CUDA_TEST_OBJ := $(filter $(BUILD)/tests/t-cuda%,$(TEST_OBJ))
TEST_OBJ  := $(filter-out $(CUDA_TEST_OBJ),$(TEST_OBJ))
$(BUILD)/check_cuda: $(BUILD)/tests/check_cuda.o $(CUDA_TEST_OBJ) $(BUILD)/tests/testutil.o $(CUDA_LIB) $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(LDLIBS) $(VIJP_LIBS) $(CUDA_LIBS) $(shell pkg-config --libs $(CHECKPK))
$(BUILD)/bench-gpu: $(CUDA_LIB)
$(BUILD)/bench-gpu: VIJP_LIBS := $(CUDA_LIB) $(BUILD)/libvijp.a $(VIJP_LIBS) $(CUDA_LIBS)
# The configuration, rewritten only when it changes: the objects of the
# current one depend on it, so switching CUDA on or off rebuilds them, the
# archive (its members differ) and its users.
CUDA_CFG := CUDA=$(VIJP_CUDA) $(NVCC) $(NVCC_ARCH) $(NVCCFLAGS)
$(shell mkdir -p $(BUILD) && echo '$(CUDA_CFG)' | cmp -s - $(BUILD)/cuda.cfg || echo '$(CUDA_CFG)' > $(BUILD)/cuda.cfg)
$(CUDA_OBJ): $(BUILD)/cuda.cfg
CUDA_DEPS := $(patsubst %.o,%.d,$(CUDA_OBJ) $(CUDA_TEST_OBJ) $(BUILD)/tests/check_cuda.o $(CUDA_SET_OBJ) $(CUDA_MOCK_OBJ))
$(CUDA_DEPS):
-include $(CUDA_DEPS)
$(BUILD)/src/kernels/cuda/%.o: src/kernels/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC_COMPILE) -c $< -o $@

$(BUILD)/%.o: %.c $(BUILD)/%.d
	@mkdir -p $(dir $@)
	$(COMPILE) -c $< -o $@

# Per-directory instruction sets of the kernel sets (every object tree).
AVX2_FLAGS   := -mavx2 -mfma
AVX512_FLAGS := -mavx512f -mavx512dq -mavx2 -mfma
$(BUILD)/src/kernels/avx2/%.o $(BUILD)/pic/src/kernels/avx2/%.o build-fuzz/src/kernels/avx2/%.o: VIJP_ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/kernels/avx512/%.o $(BUILD)/pic/src/kernels/avx512/%.o build-fuzz/src/kernels/avx512/%.o: VIJP_ISAFLAGS := $(AVX512_FLAGS)

$(BUILD)/pic/%.o: %.c $(BUILD)/pic/%.d
	@mkdir -p $(dir $@)
	$(COMPILE) -fPIC -c $< -o $@

# An object whose .d is missing (first build, or an object from before .d
# files) is rebuilt; the .d files themselves are made only by the compiler.
DEPS := $(patsubst %.o,%.d,$(LIB_OBJ) $(CLI_OBJ) $(TEST_OBJ) $(PIC_OBJ) $(BENCH_OBJ) $(BUILD)/perturbed/layer.o)
$(DEPS):
include $(wildcard $(DEPS))

# The commit that reports name: refreshed in build/commit.h only when it changes.
GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(shell mkdir -p $(BUILD) && echo '#define VIJP_GIT_COMMIT "$(GIT_COMMIT)"' | cmp -s - $(BUILD)/commit.h || \
        echo '#define VIJP_GIT_COMMIT "$(GIT_COMMIT)"' > $(BUILD)/commit.h)
$(shell mkdir -p $(BUILD) && echo 'MPI=$(MPI) $(MPI_LIBS)' | cmp -s - $(BUILD)/mpi-config || echo 'MPI=$(MPI) $(MPI_LIBS)' > $(BUILD)/mpi-config)
$(BUILD)/src/mpi/mpi.o: VIJP_CPPFLAGS += $(MPI_CFLAGS)
$(BUILD)/src/report/write_json.o: VIJP_CPPFLAGS += -include $(BUILD)/commit.h
$(BUILD)/src/report/write_json.o: $(BUILD)/commit.h
# --resume's study parameters name the build too (src/report/resume.c).
$(BUILD)/src/report/resume.o: VIJP_CPPFLAGS += -include $(BUILD)/commit.h
$(BUILD)/src/report/resume.o: $(BUILD)/commit.h

# docs/drift.schema.json compiled into the command as a C string literal:
# src/report/drift_schema.c interprets the very document the project publishes.
$(BUILD)/drift_schema.inc: docs/drift.schema.json
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@.tmp && mv $@.tmp $@
$(BUILD)/src/report/drift_schema.o: VIJP_CPPFLAGS += -I$(BUILD)
$(BUILD)/src/report/drift_schema.o: $(BUILD)/drift_schema.inc

$(BUILD)/libvijp.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# libvijp.so.VERSION with soname libvijp.so.0, linked with its dependencies
# (no undefined symbols left), and the two links a build and a link step use.
$(BUILD)/$(SHLIB): $(PIC_OBJ)
	$(LINK) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined -o $@ $^ $(LDLIBS) $(VIJP_LIBS)
$(BUILD)/libvijp.so: $(BUILD)/$(SHLIB)
	ln -sf $(SHLIB) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# The command exports the whole library (--whole-archive, -rdynamic): layer
# plugins resolve their vijp symbols against it (see include/vijp/plugin.h).
$(BUILD)/vijp: $(CLI_OBJ) $(BUILD)/libvijp.a $(BUILD)/mpi-config
	$(LINK) -rdynamic -o $@ $(CLI_OBJ) -Wl,--whole-archive $(BUILD)/libvijp.a -Wl,--no-whole-archive $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS) $(MPI_LIBS)

# The man page, from the command's own --help texts.
$(BUILD)/vijp.1: $(BUILD)/vijp scripts/gen-man.sh
	scripts/gen-man.sh $(BUILD)/vijp > $@.tmp && mv $@.tmp $@

$(BUILD)/check_vijp: $(TEST_OBJ) $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS) $(shell pkg-config --libs $(CHECKPK))

# Layer plugins for the tests, built as a user builds one (-shared -fPIC,
# against include/ only, not linked with libvijp: the vijp command that loads
# them provides its symbols): the two templates and the deliberately broken
# layers of examples/broken-layers/, which `vijp check-layer` must catch.
# Never instrumented (no SANFLAGS): a plugin is its user's code, and under
# UBSan the segfault plugin's null store would end in a report and exit 1
# rather than the SIGSEGV that check-layer must name.
PLUGIN_SRC := examples/layer-template/scaledtanh.c examples/layer-template/gated.c $(wildcard examples/broken-layers/*.c)
PLUGINS    := $(patsubst %.c,$(BUILD)/plugins/%.so,$(notdir $(PLUGIN_SRC)))
PLUGIN_CC   = $(CC) $(VIJP_CPPFLAGS) $(CPPFLAGS) $(VIJP_CFLAGS) $(CFLAGS) -ffp-contract=off -fPIC -shared
$(BUILD)/plugins/%.so: examples/layer-template/%.c $(wildcard include/vijp/*.h)
	@mkdir -p $(dir $@)
	$(PLUGIN_CC) -o $@ $<
$(BUILD)/plugins/%.so: examples/broken-layers/%.c examples/broken-layers/linear.h $(wildcard include/vijp/*.h)
	@mkdir -p $(dir $@)
	$(PLUGIN_CC) -o $@ $<
plugins: $(PLUGINS)

# vijp-perturbed: the same command with one ulp added to every vijp output,
# which the regression tests must see flagged by vijp regress.
$(BUILD)/perturbed/layer.o: src/layer/layer.c $(BUILD)/perturbed/layer.d
	@mkdir -p $(dir $@)
	$(COMPILE) -DVIJP_PERTURB_VIJP -c $< -o $@
$(BUILD)/vijp-perturbed: $(CLI_OBJ) $(filter-out $(BUILD)/src/layer/layer.o,$(LIB_OBJ)) $(BUILD)/perturbed/layer.o
	$(LINK) -rdynamic -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS) $(MPI_LIBS)

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
CHECK_INSTALL_DEPS := all
CHECK_INSTALL = +@MAKE="$(MAKE)" VIJP_VERSION="$(VIJP_VERSION)" BUILD="$(BUILD)" scripts/check-install.sh
check-install: all
	$(CHECK_INSTALL)
endif

# VIJP_BIN lets the CLI tests find the command (and the test plugins, in
# $(BUILD)/plugins beside it).  Sanitized runs do not fork,
# so LeakSanitizer sees the whole suite in one process.
ifeq ($(SANITIZE),1)
CHECK_ENV := CK_FORK=no
endif
check: $(BUILD)/check_vijp $(BUILD)/check_cuda $(CUDA_SO) $(CUDA_MOCK) $(BUILD)/vijp $(BUILD)/vijp-perturbed $(PLUGINS) $(CHECK_INSTALL_DEPS) \
       $(BENCH_PROGS)
	$(CHECK_ENV) VIJP_BIN=$(abspath $(BUILD)/vijp) VIJP_PERTURBED_BIN=$(abspath $(BUILD)/vijp-perturbed) \
	  ./$(BUILD)/check_vijp
	$(CHECK_ENV) VIJP_BIN=$(abspath $(BUILD)/vijp) ./$(BUILD)/check_cuda
	@echo "check: the cuda kernel set's wrappers over the host mock (tests/cuda-mock.c)"
	for s in kernels b32set mixedset; do $(CHECK_ENV) CK_RUN_SUITE=$$s VIJP_BIN=$(abspath $(BUILD)/vijp) \
	  VIJP_CUDA_LIBRARY=$(abspath $(CUDA_MOCK)) ./$(BUILD)/check_vijp || exit 1; done
	$(CHECK_ENV) CK_RUN_CASE=set VIJP_BIN=$(abspath $(BUILD)/vijp) VIJP_CUDA_LIBRARY=$(abspath $(CUDA_MOCK)) \
	  ./$(BUILD)/check_cuda
	$(CHECK_INSTALL)
	VIJP_BIN=$(abspath $(BUILD)/vijp) $(or $(PYTHON_TORCH),python3) scripts/check-torch-roundtrip.py
	VIJP_BIN=$(abspath $(BUILD)/vijp) $(or $(PYTHON_TORCH),python3) scripts/check-torch-bf16.py
	$(FUZZ_REPLAY)
	$(CHECK_MPI)
	scripts/check-bench-args.sh $(BENCH_PROGS)
	scripts/check-modules.py $(BUILD)
	scripts/check-exports.py $(BUILD)/libvijp.so
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

# Every benchmark program: tests/bench-NAME.c against the library.
$(BUILD)/bench-%: $(BUILD)/tests/bench-%.o $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS)
# The MPI scaling benchmark reads and writes curves as the command does.
$(BUILD)/bench-mpi: $(BUILD)/tests/bench-mpi.o $(BUILD)/src/study/unit_io.o $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(LDLIBS) $(VIJP_LIBS)

bench: $(BENCH_PROGS) $(BUILD)/vijp
	./$(BUILD)/bench-engines
	./$(BUILD)/bench-conv
	./$(BUILD)/bench-drift
	./$(BUILD)/bench-certify
	./$(BUILD)/bench-memory
	./$(BUILD)/bench-activations
	./$(BUILD)/bench-kernels
	./$(BUILD)/bench-mpi $(BUILD)/vijp
	./$(BUILD)/bench-reference $(BUILD)/vijp
	$(if $(BENCH_GPU),./$(BENCH_GPU))
	./$(BUILD)/bench-emu-dense

# bench-reference compares the reference's dot products with Arb's arb_dot
# when arb.h is installed (Debian libflint-arb-dev), and leaves it out otherwise.
ifneq ($(wildcard /usr/include/arb.h),)
$(BUILD)/tests/bench-reference.o: VIJP_CPPFLAGS += -DVIJP_HAVE_ARB
$(BUILD)/bench-reference: VIJP_LIBS += -lflint-arb
endif

# The certification suite at 100× its adversarial cases (10^5 matrices).
# With MPI, the 10^5 matrices run once alone and once over the machine's
# cores under mpirun, and the ranks' summed verdicts must equal one process's.
check-long: $(BUILD)/check_vijp $(BUILD)/vijp
ifeq ($(MPI),1)
	scripts/check-certify-shards.sh ./$(BUILD)/check_vijp 100 $(shell nproc)
else
	CK_RUN_SUITE=certify VIJP_TEST_SCALE=100 ./$(BUILD)/check_vijp
endif
	VIJP_BIN=$(abspath $(BUILD)/vijp) CK_RUN_SUITE=faults VIJP_TEST_SCALE=2 ./$(BUILD)/check_vijp

# Fuzzing with clang's libFuzzer, under ASan + UBSan, in build-fuzz/ (its
# own objects, compiled by clang).  Harnesses: tests/fuzz/NAME.c, corpora:
# tests/fuzz/corpus/NAME/ (committed, minimised).
#   make fuzz                       build every harness
#   make fuzz-replay                run each once over its corpus (make check
#                                   does, when clang is installed)
#   make fuzz-run FUZZ=NAME FUZZ_SECONDS=600   fuzz one, growing its corpus
#                                   in build-fuzz/corpus/NAME (merge back by hand:
#                                   build-fuzz/fuzz-NAME -merge=1 tests/fuzz/corpus/NAME build-fuzz/corpus/NAME)
FUZZ_CC      ?= clang
# GENERIC=1's harnesses apart too: its objects are compiled without the SIMD sets.
FUZZ_BUILD   := $(if $(filter 1,$(GENERIC)),build-fuzz-generic,build-fuzz)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz-%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_SECONDS ?= 600
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) 2>/dev/null)
ifneq ($(HAVE_FUZZ_CC),)
FUZZ_REPLAY = +@$(MAKE) --no-print-directory fuzz-replay
else
FUZZ_REPLAY = @echo "fuzz-replay: SKIPPED ($(FUZZ_CC) not found; scripts/install-deps.sh installs it)"
endif
.PHONY: fuzz fuzz-replay fuzz-run
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(VIJP_CPPFLAGS) -std=c11 -pthread -ffp-contract=off $(VIJP_ISAFLAGS) -MMD -MP $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/fuzz-%: tests/fuzz/%.c $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(VIJP_CPPFLAGS) -std=c11 -pthread -ffp-contract=off $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(VIJP_LIBS)
-include $(FUZZ_LIB_OBJ:.o=.d)
# The drift.json harness reads what vijp regress reads: the command's validator too.
$(FUZZ_BUILD)/src/report/drift_schema.o: $(BUILD)/drift_schema.inc
$(FUZZ_BUILD)/src/report/drift_schema.o: VIJP_CPPFLAGS += -I$(BUILD)
$(FUZZ_BUILD)/fuzz-driftjson: tests/fuzz/driftjson.c $(FUZZ_LIB_OBJ) $(FUZZ_BUILD)/src/report/drift_schema.o
	$(FUZZ_CC) $(VIJP_CPPFLAGS) -std=c11 -pthread -ffp-contract=off $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(FUZZ_BUILD)/src/report/drift_schema.o $(VIJP_LIBS)
# Kept: as prerequisites of a pattern rule only, make would delete them as
# intermediates after every link and rebuild them all on the next change.
.SECONDARY: $(FUZZ_LIB_OBJ)
fuzz: $(FUZZ_BINS)
fuzz-replay: $(FUZZ_BINS)
	@for n in $(FUZZ_NAMES); do \
	  echo "fuzz-replay: $$n over tests/fuzz/corpus/$$n"; \
	  ASAN_OPTIONS=detect_leaks=1 $(FUZZ_BUILD)/fuzz-$$n -runs=0 tests/fuzz/corpus/$$n 2>$(FUZZ_BUILD)/replay-$$n.log || \
	    { tail -40 $(FUZZ_BUILD)/replay-$$n.log; exit 1; }; \
	done
fuzz-run: $(FUZZ_BUILD)/fuzz-$(FUZZ)
	@mkdir -p $(FUZZ_BUILD)/corpus/$(FUZZ)
	$(FUZZ_BUILD)/fuzz-$(FUZZ) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=2048 \
	  $(FUZZ_BUILD)/corpus/$(FUZZ) tests/fuzz/corpus/$(FUZZ)

# Installation: PREFIX (default /usr/local) and DESTDIR (staging root).
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
MANDIR      ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL     ?= install
HEADERS     := $(wildcard include/vijp/*.h)

# vijp.pc from vijp.pc.in: the directories of this install and the version.
$(BUILD)/vijp.pc: vijp.pc.in include/vijp/vijp.h FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	     -e 's|@VERSION@|$(VIJP_VERSION)|g' -e 's|@PKGS_PRIVATE@|$(filter-out mpfr,$(PKGS))|g' \
	     -e 's|@MPFI_CFLAGS@|$(MPFI_CFLAGS)|g' -e 's|@MPFI_LIBS@|$(FLINT_LIBS) $(MPFI_LIBS)|g' $< > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
FORCE:

install: all $(BUILD)/vijp.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/vijp \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 755 $(BUILD)/vijp $(DESTDIR)$(BINDIR)/vijp
	$(INSTALL) -m 644 $(BUILD)/libvijp.a $(DESTDIR)$(LIBDIR)/libvijp.a
	$(INSTALL) -m 755 $(BUILD)/$(SHLIB) $(DESTDIR)$(LIBDIR)/$(SHLIB)
	ln -sf $(SHLIB) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libvijp.so
	$(if $(CUDA_SO),$(INSTALL) -m 755 $(CUDA_SO) $(DESTDIR)$(LIBDIR)/libvijp-cuda.so)
	$(INSTALL) -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/vijp/
	$(INSTALL) -m 644 $(BUILD)/vijp.pc $(DESTDIR)$(PKGCONFIGDIR)/vijp.pc
	$(INSTALL) -m 644 $(BUILD)/vijp.1 $(DESTDIR)$(MANDIR)/man1/vijp.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vijp $(DESTDIR)$(LIBDIR)/libvijp.a $(DESTDIR)$(LIBDIR)/$(SHLIB) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libvijp.so $(DESTDIR)$(LIBDIR)/libvijp-cuda.so \
	  $(DESTDIR)$(PKGCONFIGDIR)/vijp.pc $(DESTDIR)$(MANDIR)/man1/vijp.1 \
	  $(addprefix $(DESTDIR)$(INCLUDEDIR)/vijp/,$(notdir $(HEADERS)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/vijp 2>/dev/null

clean:
	rm -rf build build-san build-fuzz build-generic build-fuzz-generic
