# CUDA kernels (src/kernels/cuda/, API in cuda.h): compiled by nvcc when it is
# found (PATH, else /usr/local/cuda/bin; mk/configure.sh) into
# $(BUILD)/libvijp-cuda.a, which the programs that use them link with cuBLAS,
# cuSOLVER and the CUDA runtime: check_cuda and bench-gpu.  Not libvijp nor
# the vijp command: loading cuBLAS and cuSOLVER maps ~0.8 GB (libcublasLt
# alone is 540 MB), which no run that does not use the GPU should pay
# (t-faults' size_under_ulimit runs vijp under ulimit -v 1000000: it could
# not even start).  The command loads them on demand (dlopen of
# libvijp-cuda.so, below).
# CUDA=0 or GENERIC=1 build without them; so does SANITIZE=1: the CUDA runtime
# under ASan needs ASAN_OPTIONS=protect_shadow_gap=0 on a GPU and its driver
# allocations show up in LeakSanitizer, so the sanitized build tests the host
# side only (t-cuda's host_* tests run there).  Without CUDA the archive holds
# src/kernels/cuda/none.c, which answers "built without CUDA".
# NVCC_ARCH: SASS for sm_90 (H100/H200) and PTX for compute_80, which the
# driver compiles for any other GPU of compute capability >= 8.0.
NVCC      := $(NVCC_FOUND)
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
NVCCFLAGS ?= -O2
VIJP_CUDA := $(if $(filter 0,$(CUDA))$(filter 1,$(GENERIC) $(SANITIZE)),,$(if $(NVCC),1))
ifeq ($(VIJP_CUDA),1)
CUDA_HOME   ?= $(CUDA_HOME_FOUND)
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
CUDA_LIBS   := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcusolver -lcublas -lcudart -lstdc++
# --fmad=false: no contraction, as -ffp-contract=off for the C code.
NVCC_COMPILE = $(NVCC) -std=c++17 --fmad=false $(NVCC_ARCH) -Xcompiler -fPIC,-Wall,-Wextra -Iinclude -Isrc $(NVCCFLAGS) -MMD -MP
CUDA_OBJ    := $(patsubst %.cu,$(BUILD)/%.o,$(wildcard src/kernels/cuda/*.cu))
else
CUDA_LIBS   :=
CUDA_OBJ    := $(BUILD)/src/kernels/cuda/none.o
# A libvijp-cuda.so left by an earlier CUDA build in this tree would be
# loaded: the build without CUDA removes it.
.PHONY: remove-stale-cuda-so
all: remove-stale-cuda-so
remove-stale-cuda-so:
	@rm -f $(BUILD)/libvijp-cuda.so
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
all: $(CUDA_LIB)
$(CUDA_LIB): $(CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^
# libvijp-cuda-mock.so: kernel_set.c over a host stand-in for the CUDA API
# (tests/fixtures/cuda-mock.c), built in every configuration, so that make
# check runs the cuda kernel set's wrappers without a GPU (VIJP_CUDA_LIBRARY,
# mk/check.mk).
CUDA_MOCK := $(BUILD)/libvijp-cuda-mock.so
CUDA_MOCK_OBJ := $(BUILD)/pic/src/kernels/cuda/kernel_set.o $(BUILD)/pic/tests/fixtures/cuda-mock.o
$(CUDA_MOCK): $(CUDA_MOCK_OBJ) src/kernels/cuda/libvijp-cuda.map
	$(LINK) -shared -Wl,--no-undefined -Wl,--version-script=src/kernels/cuda/libvijp-cuda.map -o $@ \
	  $(CUDA_MOCK_OBJ) $(VIJP_LIBS)
# The configuration, rewritten only when it changes: the objects of the
# current one depend on it, so switching CUDA on or off rebuilds them, the
# archive (its members differ) and its users.
$(BUILD)/cuda.cfg: FORCE
	$(call write_if_changed,CUDA=$(VIJP_CUDA) $(NVCC) $(NVCC_ARCH) $(NVCCFLAGS))
$(CUDA_OBJ): $(BUILD)/cuda.cfg
$(BUILD)/src/kernels/cuda/%.o: src/kernels/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC_COMPILE) -c $< -o $@
# scripts/tc-gemm.cu: cuBLAS GEMMs (cuBLASLt for e4m3) that
# scripts/gpu-check.sh compares with the tensor-core models (STORE+tc:ARCH);
# built on demand only, by that script.
ifeq ($(VIJP_CUDA),1)
$(BUILD)/tc-gemm: scripts/tc-gemm.cu $(BUILD)/cuda.cfg
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 $(NVCC_ARCH) $(NVCCFLAGS) -o $@ $< -L$(CUDA_LIBDIR) -Xlinker -rpath,$(CUDA_LIBDIR) -lcublasLt -lcublas
endif
