# Makefile — builds build/libcnnc.a, the command build/cnnc and the tests.
#   make train   installs missing Debian packages (as root), builds, trains the seed's job
#   make test    installs missing packages, builds, runs every test
# Packages are installed by tools/deps.sh; this file only builds and runs.

CC       ?= cc
CFLAGS   ?= -O3 -g
WARN     := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
PKGS     := zlib cairo jansson
CPPFLAGS += -Iinclude -Isrc -D_GNU_SOURCE
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LDLIBS   := $(PKG_LIBS) -lpthread -lm
TEST_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

BUILD    := build
LIB_SRC  := $(wildcard src/*.c)
CLI_SRC  := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

FUZZ_TARGETS := idx safetensors
FUZZ_BIN := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
FUZZ_SECONDS ?= 60

TRAIN_ARGS ?=
BENCH_THREADS ?= $(shell nproc)
BENCH_EPOCHS ?= 1
BENCH_ROUNDS ?= 3

.PHONY: all deps deps-test deps-bench train test test-sanitize fuzz deps-fuzz check bench bench-run bench-gemm clean
all: $(BUILD)/libcnnc.a $(BUILD)/cnnc

$(BUILD)/%.o: %.c include/cnnc.h $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(KERNEL_FLAGS) $(CPPFLAGS) $(PKG_CFLAGS) -c $< -o $@

# The GEMM kernels are compiled once per instruction set; gemm.c picks one at run time. They
# are vectorised by hand with vector types, so the loop vectoriser is kept out of their way;
# their vector-typed helpers are all static, so the psABI note about 64-byte vectors is moot.
# (KERNEL_FLAGS, not CFLAGS, so that `make CFLAGS=...` keeps them.)
# clang (the fuzzing build) spells "no loop vectoriser" differently.
NO_LOOP_VECTORIZE := $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),-fno-vectorize,-fno-tree-loop-vectorize)
KERNEL_FLAGS :=
$(BUILD)/src/gemm_generic.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -Wno-psabi
$(BUILD)/src/gemm_avx2.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -Wno-psabi -mavx2 -mfma -ffp-contract=fast
$(BUILD)/src/gemm_avx512.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -mavx512f -mavx512vl -mfma -mprefer-vector-width=512 -ffp-contract=fast
# The branch-free 2x2 pooling loop is written to be vectorised.
$(BUILD)/src/maxpool2d.o: KERNEL_FLAGS := -O3
$(BUILD)/src/gemm_generic.o $(BUILD)/src/gemm_avx2.o $(BUILD)/src/gemm_avx512.o: src/gemm_kernels.inc

$(BUILD)/libcnnc.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/cnnc: $(CLI_OBJ) $(BUILD)/libcnnc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) $(PKG_CFLAGS) -Itests -o $@ $< $(BUILD)/libcnnc.a $(TEST_LIBS) $(LDLIBS)

deps:
	@tools/deps.sh train

deps-test:
	@tools/deps.sh test

deps-bench:
	@tools/deps.sh bench

# Re-enter make after installing so that pkg-config sees the new packages.
train: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/cnnc train $(TRAIN_ARGS)

test: deps-test
	@$(MAKE) --no-print-directory check

bench: deps-bench
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/bench
	@bench/run.sh $(BUILD) $(BENCH_THREADS) $(BENCH_EPOCHS) $(BENCH_ROUNDS)

# cnnc's GEMM against OpenBLAS on the model's shapes (needs libopenblas-dev).
bench-gemm: deps-bench
	@$(MAKE) --no-print-directory $(BUILD)/gemm_compare
	$(BUILD)/gemm_compare

$(BUILD)/gemm_compare: bench/gemm_compare.c $(BUILD)/libcnnc.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(BUILD)/libcnnc.a $(shell pkg-config --cflags --libs openblas 2>/dev/null) $(LDLIBS)

$(BUILD)/bench: bench/bench.c $(BUILD)/libcnnc.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(BUILD)/libcnnc.a $(LDLIBS)

# The fuzz targets without libFuzzer: replay their committed corpora in `make test`.
$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_input.h $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -Itests/fuzz -o $@ $< tests/fuzz/replay.c $(BUILD)/libcnnc.a $(LDLIBS)

check: all $(TEST_BIN) $(FUZZ_BIN)
	@tests/run.sh $(BUILD)

# Each fuzz target for FUZZ_SECONDS seconds with libFuzzer (clang); fails on any finding.
fuzz: deps-fuzz
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

deps-fuzz:
	@tools/deps.sh fuzz

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded tests under
# ThreadSanitizer (build-asan/, build-tsan/).
test-sanitize: deps-test
	@tests/sanitize/run.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
