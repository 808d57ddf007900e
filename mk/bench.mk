# The benchmarks: bench/NAME.c is build/bench-NAME, linked with libvijp.a.
# Each prints ratios measured in the same run (against a reference kernel,
# LAPACK alone, the machine's bandwidth); make check runs each with --help
# and bad arguments (scripts/check-bench-args.sh).

BENCH_OBJ := $(patsubst bench/%.c,$(BUILD)/bench/%.o,$(wildcard bench/*.c))
# The GPU benchmark is part of make bench only in a CUDA build (it prints
# SKIPPED and exits 0 where the build has CUDA but the machine no GPU).
BENCH_GPU := $(if $(VIJP_CUDA),$(BUILD)/bench-gpu)
BENCH_PROGS := $(addprefix $(BUILD)/bench-,engines drift cond certify memory activations conv kernels mpi reference emu-dense narrow \
                models orthogonal ddref drift-width fork compare) \
               $(BENCH_GPU)

$(BUILD)/bench-%: $(BUILD)/bench/%.o $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS)
# The MPI scaling benchmark reads and writes curves as the command does.
$(BUILD)/bench-mpi: $(BUILD)/bench/mpi.o $(BUILD)/src/study/unit_io.o $(BUILD)/libvijp.a
	$(LINK) -o $@ $^ $(LDLIBS) $(VIJP_LIBS)
# The GPU benchmark links the CUDA kernels' archive, then the library (the
# kernels call vijp_fail and the allocator), then CUDA.
$(BUILD)/bench-gpu: $(CUDA_LIB)
$(BUILD)/bench-gpu: VIJP_LIBS := $(CUDA_LIB) $(BUILD)/libvijp.a $(VIJP_LIBS) $(CUDA_LIBS)
# bench-reference compares the reference's dot products with Arb's arb_dot
# when arb.h is installed (Debian libflint-arb-dev), and leaves it out otherwise.
ifneq ($(wildcard /usr/include/arb.h),)
$(BUILD)/bench/reference.o: VIJP_CPPFLAGS += -DVIJP_HAVE_ARB
$(BUILD)/bench-reference: VIJP_LIBS += -lflint-arb
endif

bench: $(BENCH_PROGS) $(BUILD)/vijp
	./$(BUILD)/bench-engines
	./$(BUILD)/bench-conv
	./$(BUILD)/bench-drift
	./$(BUILD)/bench-cond
	./$(BUILD)/bench-orthogonal
	./$(BUILD)/bench-certify
	./$(BUILD)/bench-memory
	./$(BUILD)/bench-activations
	./$(BUILD)/bench-kernels
	./$(BUILD)/bench-mpi $(BUILD)/vijp
	./$(BUILD)/bench-reference $(BUILD)/vijp
	./$(BUILD)/bench-ddref
	./$(BUILD)/bench-compare
	$(if $(BENCH_GPU),./$(BENCH_GPU))
	PYTHON_TORCH=$(or $(PYTHON_TORCH),python3) ./$(BUILD)/bench-emu-dense
	./$(BUILD)/bench-narrow
	./$(BUILD)/bench-models $(BUILD)/vijp
	./$(BUILD)/bench-drift-width $(BUILD)/vijp
	./$(BUILD)/bench-fork
# Kept: as prerequisites of a pattern rule only, make would delete them as
# intermediates after every link and compile them again on the next make.
.SECONDARY: $(BENCH_OBJ)
