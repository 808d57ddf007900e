# vijp — build, test, report, benchmark.
#   make             libvijp.a and the vijp command (build/)
#   make check       Check test suite          (SANITIZE=1: under ASan + UBSan)
#   make report      the main job on its embedded default
#   make bench       engine benchmark (ratios measured in one run)
# Sanitized objects go to build-san/ so the two builds never mix.

CC      ?= cc
PKGS    := mpfr lapacke openblas jansson
CHECKPK := check

ifeq ($(SANITIZE),1)
BUILD   := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD   := build
SANFLAGS :=
endif

# -ffp-contract=off: no silent FMA, so double code and the binary32 emulation
# perform exactly the operations written (DESIGN §3).
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -ffp-contract=off -Iinclude \
           $(shell pkg-config --cflags $(PKGS)) $(SANFLAGS)
LDLIBS  := $(shell pkg-config --libs $(PKGS)) -lgmp -lm
LDFLAGS += $(SANFLAGS)

LIB_SRC := $(wildcard src/*.c src/layers/*.c src/engines/*.c) $(wildcard oracles/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/t-*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/check_main.o $(BUILD)/tests/testutil.o $(BUILD)/tests/layerfix.o

.PHONY: all check report bench clean
all: $(BUILD)/libvijp.a $(BUILD)/vijp

$(BUILD)/%.o: %.c $(wildcard include/vijp/*.h oracles/*.h src/engines/*.h src/cli/*.h tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libvijp.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/vijp: $(CLI_OBJ) $(BUILD)/libvijp.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/check_vijp: $(TEST_OBJ) $(BUILD)/libvijp.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs $(CHECKPK))

# VIJP_BIN lets the CLI tests find the command.  Sanitized runs do not fork,
# so LeakSanitizer sees the whole suite in one process.
ifeq ($(SANITIZE),1)
CHECK_ENV := CK_FORK=no
endif
check: $(BUILD)/check_vijp $(BUILD)/vijp
	$(CHECK_ENV) VIJP_BIN=$(abspath $(BUILD)/vijp) ./$(BUILD)/check_vijp

report: $(BUILD)/vijp
	./scripts/report.sh $(BUILD)/vijp

$(BUILD)/bench-engines: $(BUILD)/tests/bench-engines.o $(BUILD)/libvijp.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: $(BUILD)/bench-engines
	./$(BUILD)/bench-engines

clean:
	rm -rf build build-san
