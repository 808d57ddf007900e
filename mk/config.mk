# Configuration: which build folder, the flags every object is compiled
# with, and the results of mk/configure.sh, run once per build folder into
# $(BUILD)/config.mk and again only when its inputs change.
#
# CFLAGS (default -O2 -g), CPPFLAGS, LDFLAGS and LDLIBS are the user's: the
# flags the build needs are in VIJP_* variables used alongside them, so
# `make CFLAGS=-fPIC` or `make CFLAGS="-O0 -g"` keep them.

CC      ?= cc
PKGS    := mpfr lapacke openblas jansson fftw3
CHECKPK := check
ifneq ($(GENERIC),1)
PKGS    += sleef # SIMD kernels' vector exp, log1p, tanh, erfc (src/kernels/simd/activations.h)
endif
MPICC   ?= mpicc
FUZZ_CC ?= clang

# GENERIC=1: the reference kernels only (src/kernels/ref), no SIMD file
# compiled, no SLEEF; objects in build-generic/ so the two builds never mix.
# Sanitized objects go to build-san/ for the same reason.
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

# ---- detected once: $(BUILD)/config.mk ----
# Its inputs, taken before it is read (it sets MPI): a change to any of them
# makes the configuration stale, and make remakes it and starts again.
# MPI and NVCC are also set by what it detects, so the user's values are
# kept apart for configure.sh.
MPI_INPUT  := $(MPI)
NVCC_INPUT := $(NVCC)
CONFIG_INPUTS := CC=$(CC) PKGS=$(PKGS) CHECKPK=$(CHECKPK) MPI=$(MPI) MPICC=$(MPICC) NVCC=$(NVCC) \
                 FUZZ_CC=$(FUZZ_CC) PKG_CONFIG_PATH=$(PKG_CONFIG_PATH)
CONFIG := $(BUILD)/config.mk
# `make clean` alone needs no configuration.
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out clean,$(MAKECMDGOALS)),)
VIJP_NO_CONFIG := 1
endif
endif
ifneq ($(VIJP_NO_CONFIG),1)
-include $(CONFIG)
ifneq ($(CONFIG_KEY),$(CONFIG_INPUTS))
$(CONFIG): FORCE
endif
endif
$(CONFIG): mk/configure.sh mk/config.mk include/vijp/vijp.h
	@mkdir -p $(dir $@)
	@echo "configure: $(BUILD)/config.mk ($(CONFIG_INPUTS))"
	@CC='$(CC)' PKGS='$(PKGS)' CHECKPK='$(CHECKPK)' MPI='$(MPI_INPUT)' MPICC='$(MPICC)' NVCC='$(NVCC_INPUT)' \
	  FUZZ_CC='$(FUZZ_CC)' CONFIG_KEY='$(CONFIG_INPUTS)' sh mk/configure.sh > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }

# ---- flags ----
CFLAGS  ?= -O2 -g
VIJP_CPPFLAGS := -Iinclude -Isrc -I. -D_GNU_SOURCE $(VIJP_POISON) $(PKG_CFLAGS)
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
VIJP_LIBS     := $(PKG_LIBS) $(FLINT_LIBS) $(MPFI_LIBS) -lm -ldl -pthread
# MPFR and GMP are linked into the programs (vijp, the tests, the benchmarks)
# from their static archives where the system has them (Debian's libmpfr-dev
# and libgmp-dev do), whole, so that every MPFR and GMP symbol a plugin or a
# shared dependency (FLINT, MPFI) reaches is the program's own copy.  Why: a
# shared libmpfr reaches its thread-local state (the exponent range every
# emulated operation reads and sets) through __tls_get_addr, 7% of the
# default study; linked into the program it is a fixed offset, and the study
# runs 15-25% faster.  libvijp.so and libvijp.a keep linking MPFR as a shared
# library.  MP_STATIC= (empty) links the shared ones.
MP_WHOLE := -Wl,--whole-archive $(MPFR_A) $(GMP_A) -Wl,--no-whole-archive
MP_STATIC ?= $(if $(and $(MPFR_A),$(GMP_A)),$(MP_WHOLE))
ifeq ($(GENERIC),1)
VIJP_CPPFLAGS += -DVIJP_GENERIC
endif
# -MMD -MP: each object's header dependencies, in a .d file next to it.
COMPILE = $(CC) $(VIJP_CPPFLAGS) $(CPPFLAGS) $(VIJP_CFLAGS) $(CFLAGS) $(VIJP_FPFLAGS) $(VIJP_ISAFLAGS) $(VIJP_VISFLAGS) -MMD -MP
LINK    = $(CC) $(VIJP_CFLAGS) $(CFLAGS) $(VIJP_FPFLAGS) $(VIJP_LDFLAGS) $(LDFLAGS)

# A file whose contents a rule computes, rewritten only when they change, so
# that what depends on it is rebuilt only then: $(call write_if_changed,TEXT)
# as the recipe of a target that depends on FORCE.
define write_if_changed
@mkdir -p $(dir $@)
@printf '%s\n' '$(1)' > $@.tmp
@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
endef
