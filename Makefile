# The two commands (README): `make train` and `make test`. Each installs what
# is missing (tools/setup-deps), configures and builds first: `make train`
# only what training runs, `make test` everything.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
ARGS       ?=

.PHONY: all deps test-deps configure build build-train test train bench asan tsan build-cuda-torch format format-check tidy clean

all: build

deps:
	@tools/setup-deps

test-deps:
	@tools/setup-deps --test
	@tools/setup-test-python >/dev/null
	@tools/setup-test-python --torch >/dev/null

configure: deps
	@cmake -S . -B $(BUILD) $(WERROR_ARG) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# What `pronghorn train` runs: the one binary. The built-in envs are linked
# into it, and the actors are the same binary (forked from its zygote, else
# /proc/self/exe); the test binaries, test plugins and the example plugin
# (envs/examples/corridor.c) are left to `make test`. The compiler's output
# goes to a log shown only when the build fails (progress and directory lines
# left out).
TRAIN_TARGETS = pronghorn
TRAIN_LOG     = $(BUILD)/make-train.log
build-train: configure
	@echo "make train: building $(TRAIN_TARGETS) in $(BUILD)/ (minutes the first time; log: $(TRAIN_LOG))"
	@cmake --build $(BUILD) -j $(JOBS) --target $(TRAIN_TARGETS) >$(TRAIN_LOG) 2>&1 || { \
	  grep -vE '^\[ *[0-9]+%\] |make\[[0-9]+\]: (Entering|Leaving) directory' $(TRAIN_LOG) >&2; \
	  echo "make train: the build failed; the whole log is $(TRAIN_LOG)" >&2; exit 1; }

# Developers and CI build with warnings as errors; `make train` leaves the
# build's setting as it is (off in a fresh build).
test: WERROR_ARG = -DPRONGHORN_WERROR=ON
test: test-deps build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Trains CartPole with the default config until it is solved (mean return of
# the last 100 episodes ≥ 475) and says how long that took. ARGS go to
# `pronghorn train`, e.g. a second job beside the first on free ports:
#   make train ARGS='--set server.address=127.0.0.1:0 --set server.metrics_port=0'
train: build-train
	@$(BUILD)/tools/pronghorn train -c configs/cartpole.toml $(ARGS)

# Throughput figures for BENCHMARKS.md, each against a baseline in the same run.
bench: build
	@$(BUILD)/tools/pronghorn bench env --env cartpole --num-envs 4096 --threads 1
	@$(BUILD)/tools/pronghorn bench env --env cartpole --num-envs 4096 --threads 2
	@$(BUILD)/tools/pronghorn bench env --env pong --num-envs 256
	@$(BUILD)/tools/pronghorn bench env --env pendulum --num-envs 4096
	@tools/bench-pufferlib-cartpole $(BUILD)
	@$(BUILD)/tools/pronghorn bench kernels
	@$(BUILD)/tools/pronghorn bench ring

# Sanitizer builds live in their own folders and run the whole suite. ASan
# leaves SIGSEGV and friends to the kernel: tests of crashing actors and
# plugins expect a process killed by the signal, not ASan's report and exit 1.
asan:
	@ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0 \
	  $(MAKE) --no-print-directory test BUILD=build-asan \
	  CMAKE_ARGS="-DPRONGHORN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug"

# ThreadSanitizer runs the tests of the code without LibTorch (the ring, the
# slab, envs, config): an uninstrumented LibTorch crashes under TSan at start.
TSAN_TESTS = buffer_test envs_test core_test
tsan: deps
	@cmake -S . -B build-tsan -DPRONGHORN_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	@for t in $(TSAN_TESTS); do \
	  echo "== $$t (ThreadSanitizer)"; \
	  TSAN_OPTIONS=halt_on_error=1 build-tsan/*/$$t --gtest_brief=1 || exit 1; \
	done

# The project against a CUDA LibTorch (PyTorch's wheel, pinned in the script,
# in a venv outside the repository), in build-torch/, and the tests that need
# no GPU. Not part of `make test`: the wheel and its CUDA libraries take
# 4.6 GB. ARGS go to the script, e.g. ARGS="--targets 'pronghorn kernels_test'".
build-cuda-torch: deps
	@BUILD=build-torch JOBS=$(JOBS) CMAKE_ARGS="$(CMAKE_ARGS)" tools/build-with-pytorch $(ARGS)

# Every C, C++ and CUDA source in .clang-format's style; CI fails on a diff.
FORMATTED = git ls-files '*.h' '*.c' '*.cpp' '*.cu'
format: deps
	@$(FORMATTED) | xargs clang-format -i
format-check: deps
	@$(FORMATTED) | xargs clang-format --dry-run -Werror

# clang-tidy (.clang-tidy) over our own .cpp files; any finding fails. It
# needs the generated protobuf headers, so the proto targets are built first.
tidy: configure
	@cmake --build $(BUILD) -j $(JOBS) --target pronghorn_proto pronghorn_rpc >/dev/null
	@tools/tidy $(BUILD) $(JOBS)

clean:
	rm -rf build build-asan build-tsan build-torch
