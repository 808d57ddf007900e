# The library (libvijp.a, libvijp.so), the vijp command, its man page, the
# command with a perturbed vijp for the regression tests, and the test
# plugins.

# The library's modules, each a folder of src/ (src/README.md: what each owns).
LIB_MODULES := base format kernels layer layers net grad memory compare certify check_layer drift engines array_io emu \
               ddot
LIB_SRC := $(wildcard $(LIB_MODULES:%=src/%/*.c)) $(wildcard oracles/*.c)
# The kernel table (src/kernels/kernels.h): ref always; the SIMD sets unless
# GENERIC=1, each directory compiled for its instruction set (VIJP_ISAFLAGS,
# per object) and chosen at run time by CPU feature detection.  The
# double-double products' SIMD sets (src/ddot/simd.h) likewise.
LIB_SRC += $(wildcard src/kernels/ref/*.c)
ifneq ($(GENERIC),1)
LIB_SRC += $(wildcard src/kernels/avx2/*.c src/kernels/avx512/*.c src/ddot/avx2/*.c src/ddot/avx512/*.c \
           src/emu/avx2/*.c src/emu/avx512/*.c src/compare/avx2/*.c src/compare/avx512/*.c)
endif
# The command's modules: the study scheduler, the report folder and its
# writers, the regression comparison, the command line itself.
# MPI (src/mpi/mpi.h): MPI=1 builds src/mpi/mpi.c with mpicc's flags, MPI=0
# its serial stand-in src/mpi/serial.c; by default MPI=1 where mpicc is
# found (mk/configure.sh).  Switching rebuilds the command ($(BUILD)/mpi-config).
CLI_MODULES := study report regress cli
CLI_SRC := $(wildcard $(CLI_MODULES:%=src/%/*.c)) \
           $(filter-out src/mpi/$(if $(filter 1,$(MPI)),serial,mpi).c,$(wildcard src/mpi/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The shared library's objects: position-independent, in their own tree.
PIC_OBJ := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
# The library exports what include/vijp/ declares with VIJP_API and nothing
# else (include/vijp/api.h; make check compares nm -D with the headers).
# Hidden symbols still link statically: the command, the tests and the
# benchmarks reach internal functions through libvijp.a.
LIB_VISFLAGS := -fvisibility=hidden
$(LIB_OBJ) $(PIC_OBJ) $(BUILD)/perturbed/layer.o: VIJP_VISFLAGS := $(LIB_VISFLAGS)

# The version is the library's (include/vijp/vijp.h, read by
# mk/configure.sh); the soname changes with the ABI, by hand.
SOVERSION    := 1
SONAME       := libvijp.so.$(SOVERSION)
SHLIB        := libvijp.so.$(VIJP_VERSION)

all: $(BUILD)/libvijp.a $(BUILD)/vijp $(BUILD)/libvijp.so $(BUILD)/vijp.1

# Per-directory instruction sets of the kernel sets (every object tree).
AVX2_FLAGS   := -mavx2 -mfma
AVX512_FLAGS := -mavx512f -mavx512dq -mavx2 -mfma
$(BUILD)/src/kernels/avx2/%.o $(BUILD)/pic/src/kernels/avx2/%.o build-fuzz/src/kernels/avx2/%.o: VIJP_ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/kernels/avx512/%.o $(BUILD)/pic/src/kernels/avx512/%.o build-fuzz/src/kernels/avx512/%.o: VIJP_ISAFLAGS := $(AVX512_FLAGS)
$(BUILD)/src/ddot/avx2/%.o $(BUILD)/pic/src/ddot/avx2/%.o build-fuzz/src/ddot/avx2/%.o: VIJP_ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/ddot/avx512/%.o $(BUILD)/pic/src/ddot/avx512/%.o build-fuzz/src/ddot/avx512/%.o: VIJP_ISAFLAGS := $(AVX512_FLAGS)
$(BUILD)/src/emu/avx2/%.o $(BUILD)/pic/src/emu/avx2/%.o build-fuzz/src/emu/avx2/%.o: VIJP_ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/emu/avx512/%.o $(BUILD)/pic/src/emu/avx512/%.o build-fuzz/src/emu/avx512/%.o: VIJP_ISAFLAGS := $(AVX512_FLAGS)
$(BUILD)/src/compare/avx2/%.o $(BUILD)/pic/src/compare/avx2/%.o build-fuzz/src/compare/avx2/%.o: VIJP_ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/compare/avx512/%.o $(BUILD)/pic/src/compare/avx512/%.o build-fuzz/src/compare/avx512/%.o: VIJP_ISAFLAGS := $(AVX512_FLAGS)

# Every object depends on the flags it is compiled with (their global
# values, taken as the files are read: target-specific ones are inherited by
# prerequisites, so $(COMPILE) would depend on which object asked first),
# so that a change of flags, the user's or these files', rebuilds it.
COMPILE_FLAGS := $(CC) $(VIJP_CPPFLAGS) $(CPPFLAGS) $(VIJP_CFLAGS) $(CFLAGS) $(VIJP_FPFLAGS) \
                 $(AVX2_FLAGS) / $(AVX512_FLAGS) / $(LIB_VISFLAGS)
$(BUILD)/compile-flags: FORCE
	$(call write_if_changed,$(COMPILE_FLAGS))

$(BUILD)/%.o: %.c $(BUILD)/%.d $(BUILD)/compile-flags
	@mkdir -p $(dir $@)
	$(COMPILE) -c $< -o $@

$(BUILD)/pic/%.o: %.c $(BUILD)/pic/%.d $(BUILD)/compile-flags
	@mkdir -p $(dir $@)
	$(COMPILE) -fPIC -c $< -o $@

# The commit that reports name (build/commit.h), and the MPI choice the
# command was linked with: rewritten only when they change.
$(BUILD)/commit.h: FORCE
	$(call write_if_changed,#define VIJP_GIT_COMMIT "$(shell git describe --always --dirty 2>/dev/null || echo unknown)")
$(BUILD)/mpi-config: FORCE
	$(call write_if_changed,MPI=$(MPI) $(MPI_LIBS))
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

# The libvijp.a that make install puts in LIBDIR: the same objects linked
# into one (ld -r), their hidden symbols made local, so that a program
# linked with it statically sees only the API's names (in the build's
# libvijp.a, engine_loss, cond_solve and some ninety more are global, and a
# user's function of the same name clashed with them).
$(BUILD)/libvijp-public.a: $(LIB_OBJ)
	rm -f $@ $(BUILD)/libvijp-public.o
	$(LD) -r -o $(BUILD)/libvijp-public.o $^
	objcopy --localize-hidden $(BUILD)/libvijp-public.o
	ar rcs $@ $(BUILD)/libvijp-public.o && rm -f $(BUILD)/libvijp-public.o

# libvijp.so.VERSION with soname libvijp.so.$(SOVERSION), linked with its dependencies
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

# Layer plugins for the tests, built as a user builds one (-shared -fPIC,
# against include/ only, not linked with libvijp: the vijp command that loads
# them provides its symbols): the two templates and the deliberately broken
# layers of examples/broken-layers/, which `vijp check-layer` must catch.
# Never instrumented (no SANFLAGS): a plugin is its user's code, and under
# UBSan the segfault plugin's null store would end in a report and exit 1
# rather than the SIGSEGV that check-layer must name.
# tests/plugins/: plugins that misbehave while loading, or print (the
# loader's tests, t-plugin-load.c).
PLUGIN_SRC := examples/layer-template/scaledtanh.c examples/layer-template/gated.c $(wildcard examples/broken-layers/*.c) \
              $(wildcard tests/plugins/*.c)
PLUGINS    := $(patsubst %.c,$(BUILD)/plugins/%.so,$(notdir $(PLUGIN_SRC)))
PLUGIN_CC   = $(CC) $(VIJP_CPPFLAGS) $(CPPFLAGS) $(VIJP_CFLAGS) $(CFLAGS) -ffp-contract=off -fPIC -shared
$(BUILD)/plugins/%.so: examples/layer-template/%.c $(wildcard include/vijp/*.h)
	@mkdir -p $(dir $@)
	$(PLUGIN_CC) -o $@ $<
$(BUILD)/plugins/%.so: examples/broken-layers/%.c $(wildcard examples/broken-layers/*.h) $(wildcard include/vijp/*.h)
	@mkdir -p $(dir $@)
	$(PLUGIN_CC) -o $@ $<
$(BUILD)/plugins/%.so: tests/plugins/%.c $(wildcard examples/broken-layers/*.h) $(wildcard include/vijp/*.h)
	@mkdir -p $(dir $@)
	$(PLUGIN_CC) -Iexamples/broken-layers -o $@ $<
plugins: $(PLUGINS)

# vijp-perturbed: the same command with one ulp added to every vijp output,
# which the regression tests must see flagged by vijp regress.
$(BUILD)/perturbed/layer.o: src/layer/layer.c $(BUILD)/perturbed/layer.d $(BUILD)/compile-flags
	@mkdir -p $(dir $@)
	$(COMPILE) -DVIJP_PERTURB_VIJP -c $< -o $@
$(BUILD)/vijp-perturbed: $(CLI_OBJ) $(filter-out $(BUILD)/src/layer/layer.o,$(LIB_OBJ)) $(BUILD)/perturbed/layer.o
	$(LINK) -rdynamic -o $@ $^ $(MP_STATIC) $(LDLIBS) $(VIJP_LIBS) $(MPI_LIBS)
