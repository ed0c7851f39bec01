# Makefile — builds build/libcnnc.a, the command build/cnnc and the tests.
#   make train   installs missing Debian packages (as root), builds, trains the seed's job
#   make test    installs missing packages, builds, runs every test
#   make test-hosts   one training across network namespaces as hosts (root; tests/hosts_mpi.sh)
#   make test-arm64   an arm64 cross build in build-arm64/, tested under qemu-user (tests/arm64.sh)
#   make test-portable   a clang build without MPI, tested with the portable kernels (CNNC_ISA=generic)
#   make install PREFIX=/usr/local [DESTDIR=]   installs command, libraries, header, pkg-config
#                file and man page; make uninstall removes exactly those files
# Packages are installed by tools/deps.sh; this file only builds and runs.

CC       ?= cc
CFLAGS   ?= -O3 -g
WARN     := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
PKGS     := zlib cairo cairo-ft freetype2 jansson libjpeg
CPPFLAGS += -Iinclude -Isrc -D_GNU_SOURCE
# Every object is position-independent, so that one set serves the static and the shared
# library. Training speed is unchanged with these flags (docs/speed.md). Symbols are hidden
# unless the public header marks them CN_API, so the shared library exports exactly cnnc.h.
PIC_FLAGS := -fPIC -fno-semantic-interposition -fvisibility=hidden
# Floating-point contraction is off everywhere but in the kernels that ask for fused
# multiply-adds, so that the portable code computes the same bits with gcc and clang on every
# processor (clang would otherwise fuse within expressions where the target has FMA).
FP_FLAGS := -ffp-contract=off
PKG_CONFIG ?= pkg-config
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
LDLIBS   := $(PKG_LIBS) -lpthread -lm
TEST_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
# Open MPI (Debian's libopenmpi-dev) when pkg-config finds it, for the cnnc command only: the
# library never calls MPI. `make MPI=0` builds a cnnc without it (one process only).
MPI      ?= $(shell $(PKG_CONFIG) --exists ompi-c 2>/dev/null && echo 1 || echo 0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DCNNC_MPI $(patsubst -I%,-isystem %,$(shell $(PKG_CONFIG) --cflags ompi-c))
MPI_LIBS   := $(shell $(PKG_CONFIG) --libs ompi-c)
endif

# The kernels of the target's processor family: src/kernels/x86 on x86-64, src/kernels/arm on
# arm64, and on any other processor the portable kernels alone (src/kernels/portable holds what
# stands in for x86's bf16 kernels there). The target is the compiler's, so a cross compiler
# (CC=aarch64-linux-gnu-gcc) builds for its own.
TARGET_CPU := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
ifeq ($(TARGET_CPU),x86_64)
ARCH_DIRS := src/kernels/x86
else ifeq ($(TARGET_CPU),aarch64)
ARCH_DIRS := src/kernels/arm src/kernels/portable
else
ARCH_DIRS := src/kernels/portable
endif

BUILD    ?= build
LIB_SRC  := $(wildcard src/*.c src/*/*.c $(ARCH_DIRS:%=%/*.c))
CLI_SRC  := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

VERSION  := $(shell sed -n 's/^\#define CN_VERSION "\(.*\)"$$/\1/p' include/cnnc.h)
SHLIB    := libcnnc.so.$(VERSION)
SONAME   := libcnnc.so.$(firstword $(subst ., ,$(VERSION)))
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR   ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALLED := $(BINDIR)/cnnc $(LIBDIR)/libcnnc.a $(LIBDIR)/$(SHLIB) $(LIBDIR)/$(SONAME) \
             $(LIBDIR)/libcnnc.so $(INCLUDEDIR)/cnnc.h $(PKGCONFIGDIR)/cnnc.pc \
             $(MANDIR)/man1/cnnc.1

FUZZ_TARGETS := idx safetensors image cli model_file cifar10 folder
FUZZ_BIN := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
FUZZ_SECONDS ?= 60
SOAK_MODELS ?= 2000
SOAK_SEED ?= 1

TRAIN_ARGS ?=
# The recipe of `make train-best` (docs/training.md says how it was chosen); TRAIN_ARGS add to it.
TRAIN_BEST_RECIPE := --model models/fashion_mnist_best.model --num-epochs 16 --num-cores 2 \
                     --batch-size 64 --learning-rate 0.05 --momentum 0.9 --lr-schedule cosine \
                     --warmup-epochs 1 --label-smoothing 0.1 --augment hflip --val-samples 5000
# ... and its precision: bf16 where this CPU runs it (the recipe was chosen in bf16), else fp32,
# said aloud; a --precision in TRAIN_ARGS comes later and counts.
TRAIN_BEST_PRECISION = p=bf16; if $(BUILD)/cnnc info --threads 1 | grep -q '^BF16: *none'; then \
                       p=fp32; echo "$@: this CPU lacks AVX512_BF16: the recipe runs in fp32"; fi
BENCH_THREADS ?= $(shell nproc)
BENCH_EPOCHS ?= 1
BENCH_ROUNDS ?= 3
BENCH_PRECISION ?= fp32
# bench-train-best's rounds of cnnc then PyTorch (a round of the whole recipe: half an hour)
TRAIN_BEST_ROUNDS ?= 1

.PHONY: all deps deps-test deps-bench deps-fuzz train train-best test test-sanitize fuzz soak check bench bench-run \
        test-hosts test-arm64 test-portable bench-gemm bench-conv bench-mpi bench-train-best clean install uninstall
all: $(BUILD)/libcnnc.a $(BUILD)/cnnc

$(BUILD)/%.o: %.c include/cnnc.h $(wildcard src/*.h src/*/*.h) $(wildcard cli/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(PIC_FLAGS) $(FP_FLAGS) $(KERNEL_FLAGS) $(CPPFLAGS) $(PKG_CFLAGS) -c $< -o $@

# The GEMM kernels are compiled once per instruction set; gemm.c picks one at run time. They
# are vectorised by hand with vector types, so the loop vectoriser is kept out of their way;
# their vector-typed helpers are all static, so the psABI note about 64-byte vectors is moot.
# (KERNEL_FLAGS, not CFLAGS, so that `make CFLAGS=...` keeps them.)
# clang (the fuzzing build) spells "no loop vectoriser" differently.
NO_LOOP_VECTORIZE := $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),-fno-vectorize,-fno-tree-loop-vectorize)
KERNEL_FLAGS :=
KERNEL_OBJ := $(BUILD)/src/kernels/gemm_generic.o $(BUILD)/src/kernels/x86/gemm_avx2.o \
              $(BUILD)/src/kernels/x86/gemm_avx512.o $(BUILD)/src/kernels/arm/gemm_neon.o
$(BUILD)/src/kernels/gemm_generic.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -Wno-psabi
$(BUILD)/src/kernels/x86/gemm_avx2.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -Wno-psabi -mavx2 -mfma -ffp-contract=fast
$(BUILD)/src/kernels/x86/gemm_avx512.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -mavx512f -mavx512vl -mfma -mprefer-vector-width=512 -ffp-contract=fast
$(BUILD)/src/kernels/x86/gemm_bf16.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -mavx512f -mavx512vl -mavx512bw -mavx512bf16
$(BUILD)/src/kernels/x86/gemm_amx.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -mavx512f -mavx512vl -mavx512bw -mamx-tile -mamx-bf16
$(BUILD)/src/kernels/arm/gemm_neon.o: KERNEL_FLAGS := -O3 $(NO_LOOP_VECTORIZE) -ffp-contract=fast
$(KERNEL_OBJ): src/kernels/gemm_kernels.inc src/kernels/winograd_kernels.inc \
              src/kernels/batchnorm_kernels.inc

$(BUILD)/libcnnc.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/$(SHLIB): $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(BUILD)/cnnc: $(CLI_OBJ) $(BUILD)/libcnnc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS)

# Only dist_mpi.c sees MPI's header; it is rebuilt when the MPI setting changes.
$(BUILD)/cli/dist_mpi.o: CPPFLAGS += $(MPI_CFLAGS)
$(BUILD)/cli/dist_mpi.o: $(BUILD)/mpi-setting-$(MPI)
$(BUILD)/mpi-setting-$(MPI):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/mpi-setting-* && touch $@

# The examples see the public header only, as a program using an installed cnnc would.
$(BUILD)/examples/%: examples/%.c include/cnnc.h $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -Iinclude -o $@ $< $(BUILD)/libcnnc.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/test_world.h $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) $(PKG_CFLAGS) -Itests -o $@ $< $(TEST_OBJ) $(BUILD)/libcnnc.a $(TEST_LIBS) $(LDLIBS)

# Test builds only: safetensors.c with its stall hook (-DCNNC_TEST_HOOKS), which the shipped
# library and command never carry; a cnnc with it for the command-line checks, and the
# safetensors test linked against it.
HOOKS_OBJ := $(BUILD)/tests/hooks/safetensors.o
$(HOOKS_OBJ): src/files/safetensors.c include/cnnc.h
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(PIC_FLAGS) -DCNNC_TEST_HOOKS $(CPPFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(BUILD)/tests/cnnc-test-hooks: $(HOOKS_OBJ) $(CLI_OBJ) $(BUILD)/libcnnc.a
	$(CC) $(CFLAGS) -o $@ $(HOOKS_OBJ) $(CLI_OBJ) $(BUILD)/libcnnc.a $(LDLIBS) $(MPI_LIBS)
$(BUILD)/tests/test_safetensors: TEST_OBJ := $(HOOKS_OBJ)
$(BUILD)/tests/test_safetensors: $(HOOKS_OBJ)

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

train-best: deps
	@$(MAKE) --no-print-directory all
	@$(TRAIN_BEST_PRECISION); set -x; $(BUILD)/cnnc train $(TRAIN_BEST_RECIPE) --precision $$p $(TRAIN_ARGS)

test: deps-test
	@$(MAKE) --no-print-directory check

# One mpirun across 4 network namespaces acting as hosts (root; skipped where it cannot run).
test-hosts: deps-test
	@$(MAKE) --no-print-directory all
	@sh tests/hosts_mpi.sh $(BUILD)

# The cross build for arm64 (Debian's cross compiler and arm64 libraries), and its tests under
# qemu-user. Its objects live in build-arm64/, apart from the native ones. Its Open MPI is
# Debian's arm64 one unpacked in build-arm64/openmpi (tools/arm64_openmpi.sh), which
# x86-64's mpirun starts under the emulator.
ARM64_MPI  = build-arm64/openmpi/root/usr/lib/aarch64-linux-gnu
ARM64_MAKE = $(MAKE) --no-print-directory BUILD=build-arm64 CC=aarch64-linux-gnu-gcc \
             PKG_CONFIG=aarch64-linux-gnu-pkg-config MPI=1 \
             MPI_CFLAGS="-DCNNC_MPI -isystem $(ARM64_MPI)/openmpi/include" \
             MPI_LIBS="-L$(ARM64_MPI)/openmpi/lib -Wl,-rpath-link,$(ARM64_MPI) -lmpi"
test-arm64:
	@tools/deps.sh arm64
	@sh tools/arm64_openmpi.sh build-arm64/openmpi
	@$(ARM64_MAKE) all $(TEST_SRC:tests/%.c=build-arm64/tests/%)
	@sh tests/arm64.sh build-arm64

# The build furthest from the default, through the whole suite: clang instead of gcc, no MPI,
# and the portable kernels for everything (CNNC_ISA=generic; the kernel tests still run once
# per instruction set). Its objects live in build-portable/.
test-portable: deps-test
	@tools/deps.sh fuzz
	@CNNC_ISA=generic $(MAKE) --no-print-directory BUILD=build-portable CC=clang MPI=0 check

bench: deps-bench
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/bench
	@bench/run.sh $(BUILD) $(BENCH_THREADS) $(BENCH_EPOCHS) $(BENCH_ROUNDS) $(BENCH_PRECISION)

# cnnc's GEMM against OpenBLAS on the model's shapes (needs libopenblas-dev).
bench-gemm: deps-bench
	@$(MAKE) --no-print-directory $(BUILD)/gemm_compare
	$(BUILD)/gemm_compare

$(BUILD)/gemm_compare: bench/gemm_compare.c $(BUILD)/libcnnc.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(BUILD)/libcnnc.a $(shell pkg-config --cflags --libs openblas 2>/dev/null) $(LDLIBS)

# The convolution kernels alone on the seed's conv2 and a small CIFAR-10 network's layers.
bench-conv: $(BUILD)/conv_bench
	$(BUILD)/conv_bench --bf16

$(BUILD)/conv_bench: bench/conv_bench.c $(BUILD)/libcnnc.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(BUILD)/libcnnc.a $(LDLIBS)

# Training as 1 and 2 MPI processes beside the threaded single process, and one step's exchange
# alone (needs Open MPI; a few short runs).
bench-train-best: deps-bench
	@$(MAKE) --no-print-directory all
	@$(TRAIN_BEST_PRECISION); BENCH_ROUNDS=$(TRAIN_BEST_ROUNDS) bench/train_best.sh $(BUILD) \
	  $(TRAIN_BEST_RECIPE) --precision $$p $(TRAIN_ARGS)

bench-mpi: deps-bench
	@$(MAKE) --no-print-directory all $(BUILD)/mpi_exchange
	@bench/mpi_scaling.sh $(BUILD)

$(BUILD)/mpi_exchange: bench/mpi_exchange.c $(BUILD)/mpi-setting-$(MPI)
	$(CC) $(WARN) $(CFLAGS) $(MPI_CFLAGS) -o $@ $< $(MPI_LIBS)

$(BUILD)/bench: bench/bench.c $(BUILD)/libcnnc.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $< $(BUILD)/libcnnc.a $(LDLIBS)

# The fuzz targets without libFuzzer: replay their committed corpora in `make test`.
# The command-line target links the command's objects but its main().
FUZZ_CLI_OBJ := $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ))
$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_input.h $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -Itests/fuzz -o $@ $< tests/fuzz/replay.c $(BUILD)/libcnnc.a $(LDLIBS)
$(BUILD)/fuzz/replay_cli: tests/fuzz/fuzz_cli.c tests/fuzz/replay.c tests/fuzz/fuzz_input.h $(FUZZ_CLI_OBJ) $(BUILD)/libcnnc.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -Icli -Itests/fuzz -o $@ $< tests/fuzz/replay.c $(FUZZ_CLI_OBJ) $(BUILD)/libcnnc.a $(LDLIBS) $(MPI_LIBS)


# SOAK_MODELS random models from SOAK_SEED against PyTorch (test_model_random on a fixture
# drawn for the purpose, tests/soak.sh), once per instruction set; not part of `make test`.
soak: deps-test
	@$(MAKE) --no-print-directory all $(BUILD)/tests/test_model_random
	@tests/soak.sh $(BUILD) $(SOAK_MODELS) $(SOAK_SEED)

# Each fuzz target for FUZZ_SECONDS seconds with libFuzzer (clang); fails on any finding.
fuzz: deps-fuzz
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

deps-fuzz:
	@tools/deps.sh fuzz

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded tests under
# ThreadSanitizer (build-asan/, build-tsan/).
test-sanitize: deps-test
	@tests/sanitize/run.sh

check: all $(TEST_BIN) $(EXAMPLE_BIN) $(BUILD)/$(SHLIB) $(FUZZ_BIN) $(BUILD)/tests/cnnc-test-hooks
	@tests/run.sh $(BUILD)

# The run-time linker's cache learns about a new library in a standard folder from ldconfig.
LDCONFIG = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; \
	then case "$(LIBDIR)" in /usr/lib|/usr/local/lib) ldconfig ;; esac; fi

install: all $(BUILD)/$(SHLIB)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/cnnc $(DESTDIR)$(BINDIR)/cnnc
	install -m 644 $(BUILD)/libcnnc.a $(DESTDIR)$(LIBDIR)/libcnnc.a
	install -m 755 $(BUILD)/$(SHLIB) $(DESTDIR)$(LIBDIR)/$(SHLIB)
	ln -sf $(SHLIB) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcnnc.so
	install -m 644 include/cnnc.h $(DESTDIR)$(INCLUDEDIR)/cnnc.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' tools/cnnc.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/cnnc.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/cnnc.pc
	install -m 644 man/cnnc.1 $(DESTDIR)$(MANDIR)/man1/cnnc.1
	@$(LDCONFIG)

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@$(LDCONFIG)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-arm64 build-portable
