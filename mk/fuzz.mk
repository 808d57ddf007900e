# Fuzzing with clang's libFuzzer, under ASan + UBSan, in build-fuzz/ (its
# own objects, compiled by clang).  Harnesses: tests/fuzz/NAME.c, corpora:
# tests/fuzz/corpus/NAME/ (committed, minimised).
#   make fuzz                       build every harness
#   make fuzz-replay                run each once over its corpus (make check
#                                   does, when clang is installed)
#   make fuzz-run FUZZ=NAME FUZZ_SECONDS=600   fuzz one, growing its corpus
#                                   in build-fuzz/corpus/NAME (merge back by hand:
#                                   build-fuzz/fuzz-NAME -merge=1 tests/fuzz/corpus/NAME build-fuzz/corpus/NAME)
# GENERIC=1's harnesses apart too: its objects are compiled without the SIMD sets.
FUZZ_BUILD   := $(if $(filter 1,$(GENERIC)),build-fuzz-generic,build-fuzz)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz-%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_SECONDS ?= 600
# HAVE_FUZZ_CC: mk/configure.sh found $(FUZZ_CC) (clang by default, mk/config.mk).
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
