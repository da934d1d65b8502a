# The newcomer's commands. `make demo` and `make test` install what is missing from Debian's
# packages, configure, build and run; nothing else needs setting up.

BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
DEMO_DIR   ?= $(BUILD_DIR)/demo-checkpoints
PLUGIN_DEMO_DIR ?= $(BUILD_DIR)/demo-plugin
DEMO_STEPS      ?= 1000
DEMO_SAVE_EVERY ?= 100
DEMO_KILL_STEP  ?= 600
DEMO_REMOTE_STEPS ?= 500

DEBIAN_PACKAGES := cmake clang-14 g++ make pkg-config libtorch-dev libtbb-dev libspdlog-dev catch2 \
                   libgloo-dev libdeflate-dev zlib1g-dev libzstd-dev libcli11-dev nlohmann-json3-dev \
                   libcurl4-openssl-dev libssl-dev libisal-dev libpugixml-dev iproute2 ninja-build mold
# The sanitizers' runtimes (below), installed by their builds only: `make demo` needs none.
SANITIZER_PACKAGES := libclang-rt-14-dev
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps deps-sanitizers configure build demo-build s3-server test check test-plain test-interop \
        build-libtorch test-libtorch reference-root-cuda build-cuda test-cuda reference-roots \
        build-asan test-asan build-tsan test-tsan demo bench install clean

all: build

# Installs what is missing of PACKAGES (Debian's names).
PACKAGES = $(DEBIAN_PACKAGES)
deps:
	@missing=$$(for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

deps-sanitizers:
	$(MAKE) deps PACKAGES="$(DEBIAN_PACKAGES) $(SANITIZER_PACKAGES)"

# RelWithDebInfo with line tables only (-g1): backtraces and debuggers still name files and lines;
# full debug information (-g) made every libtorch-heavy file a third slower to compile.
RELWITHDEBINFO_FLAGS ?= -O2 -g1 -DNDEBUG
# Ninja for a new build directory (one configured before keeps its generator); the CMake build
# compiles in unity batches and links with mold (docs/design.md, "Building").
GENERATOR = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)
# The compiler of every build `make` configures here: Debian 12's Clang 14. Its precompiled headers
# keep the libtorch headers' template instantiations (-fpch-instantiate-templates, which CMake
# passes), so it builds the tree in about half the time GCC 12 takes, which redoes them in every
# translation unit (docs/design.md, "Building"). dcpp builds with GCC too (COMPILER=g++, in a
# build directory of its own: CMake starts a directory afresh when its compiler changes), and
# the package test builds a user's program with the system's c++, GCC 12 on Debian 12, against
# what this compiler built.
COMPILER ?= clang++-14
configure: deps
	cmake -S . -B $(BUILD_DIR) $(call GENERATOR,$(BUILD_DIR)) -DCMAKE_CXX_COMPILER=$(COMPILER) \
	  -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(RELWITHDEBINFO_FLAGS)" \
	  $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# `make test` is what CI runs (.ci/run): the whole suite on the plain build, the interop tests
# against real PyTorch 2.6 and the newest Debian PyTorch, the whole suite again built on the newest
# Debian libtorch, then the sanitizer stages below on their CI selections. Each stage's wall time
# prints as it ends, and a table of them at the end (tests/stages/run_stages.sh). The reference
# roots are made in the background while the plain tree builds: their downloads overlap the
# compiles (their unpacking and byte-compiling compete with them for the cores;
# docs/reliability.md, "Cost in CI").
TEST_STAGES := deps s3-server reference-roots\& reference-root-cuda\& build test-plain test-interop \
               build-libtorch test-libtorch test-cuda build-asan test-asan build-tsan test-tsan
test:
	STAGE_LOG_DIR=$(BUILD_DIR)/stages tests/stages/run_stages.sh $(TEST_STAGES)

# The developer's loop: rebuild what changed and run one room's tests, by their ctest label
# (`make check ROOM=checkpoint`; labels: docs/design.md, "Building"). Without ROOM, every test
# but the interop ones.
# A configured build directory is not configured again (Ninja re-runs CMake when a CMakeLists.txt
# changed).
ROOM ?=
check: s3-server
	@[ -f $(BUILD_DIR)/CMakeCache.txt ] || $(MAKE) configure
	cmake --build $(BUILD_DIR) -j$(JOBS)
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) $(if $(ROOM),-L '^$(ROOM)$$',-LE interop)

# The S3 server the storage tests run against: s3rver from npm, pinned by tests/s3/package-lock.json,
# with node and npm from Debian's packages when missing (tests/storage/s3_test_server.h).
s3-server:
	tests/s3/install_s3_server.sh $(BUILD_DIR)/s3-server

test-plain: build s3-server
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE interop

# Reference roots (tests/reference/reference_root.sh): Debian roots with real PyTorch, made once
# with debootstrap from Debian's packages and cached in ~/.cache/dcpp/reference-roots (override
# with DCPP_REFERENCE_ROOTS). trixie has PyTorch 2.6; sid the newest Debian PyTorch and libtorch.
REFERENCE_ROOT := tests/reference/reference_root.sh
reference-roots:
	$(REFERENCE_ROOT) ensure trixie python
	$(REFERENCE_ROOT) ensure sid build

# dcpp against real PyTorch, both directions (tests/interop/, docs/interop.md).
test-interop: build reference-roots
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -L interop

# The whole tree built and tested on another libtorch, inside its reference root:
# VERSION=2.14 (sid, the default: the newest Debian libtorch) or VERSION=2.6 (trixie), given on the
# command line (an environment's VERSION is not taken).
VERSION := 2.14
LIBTORCH_SUITE_2.14 := sid
LIBTORCH_SUITE_2.6  := trixie
LIBTORCH_SUITE = $(or $(LIBTORCH_SUITE_$(VERSION)),$(error VERSION must be 2.6 or 2.14))
LIBTORCH_BUILD_DIR := $(BUILD_DIR)-libtorch-$(VERSION)
# With that root's Clang (and its libstdc++, the newest Debian GCC's), at -O1 without debug
# information, and without the benchmarks (the plain stage builds them): this stage proves the
# build and the suite on that libtorch. Clang's precompiled headers keep the libtorch headers'
# template instantiations, so it compiles the tree in half GCC's time (docs/reliability.md,
# "Cost in CI"); -O2 or -O3 and -g would be a good part of it. Without the tests that need the S3
# server (the storage tests, the CLI's s3:// test): it runs on node, which the reference root lacks;
# the plain stage runs them, and this one builds the driver. The plain stage also compiles each
# public header alone (DCPP_CHECK_HEADERS), three minutes of CPU this stage need not repeat.
LIBTORCH_CMAKE_ARGS ?= -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                       -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DDCPP_BUILD_BENCHMARKS=OFF \
                       -DDCPP_BUILD_S3_TESTS=OFF -DDCPP_CHECK_HEADERS=OFF -DDCPP_TEST_TIMEOUT_SCALE=2
build-libtorch:
	$(REFERENCE_ROOT) ensure $(LIBTORCH_SUITE) build
	$(REFERENCE_ROOT) run $(LIBTORCH_SUITE) -- bash -c 'set -e; \
	  cmake -S . -B $(LIBTORCH_BUILD_DIR) $(call GENERATOR,$(LIBTORCH_BUILD_DIR)) \
	    $(LIBTORCH_CMAKE_ARGS) $(CMAKE_ARGS); \
	  cmake --build $(LIBTORCH_BUILD_DIR) -j$(JOBS)'

test-libtorch: build-libtorch
	$(REFERENCE_ROOT) run $(LIBTORCH_SUITE) -- bash -c \
	  'cd $(LIBTORCH_BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE interop'

# The whole tree built against Debian's CUDA libtorch (2.6, CUDA 12.4) and NCCL, with dcpp's CUDA
# and NCCL code compiled in, and its suite run there: in the trixie-cuda reference root
# (reference_root.sh, docs/gpu.md). No GPU is needed: the tests that need one say so and skip
# (ctest counts them as skipped), everything else runs. As the libtorch stage: -O1, without the
# benchmarks, the S3 tests and the lone-header checks; but with GCC (below).
CUDA_BUILD_DIR := $(BUILD_DIR)-cuda
reference-root-cuda:
	$(REFERENCE_ROOT) ensure trixie-cuda build
# With GCC: libtorch's CMake package enables CMake's CUDA language, which tries nvcc with a Clang
# C++ compiler as nvcc's host compiler, and nvcc 12.4 can use no Clang of trixie's (19 is too new;
# 17's build fails on glibc 2.41's cospi and sinpi). With GCC as the C++ compiler, nvcc keeps its
# own (Debian's toolkit runs GCC 13). dcpp compiles no CUDA source of its own.
CUDA_CMAKE_ARGS ?= $(LIBTORCH_CMAKE_ARGS) -DCMAKE_CXX_COMPILER=g++
build-cuda:
	$(REFERENCE_ROOT) ensure trixie-cuda build
	$(REFERENCE_ROOT) run trixie-cuda -- bash -c 'set -e; \
	  cmake -S . -B $(CUDA_BUILD_DIR) $(call GENERATOR,$(CUDA_BUILD_DIR)) \
	    $(CUDA_CMAKE_ARGS) $(CMAKE_ARGS); \
	  cmake --build $(CUDA_BUILD_DIR) -j$(JOBS)'

# ctest shows a skipped test's output nowhere: the CUDA tests' own summary says why they skipped.
test-cuda: build-cuda
	$(REFERENCE_ROOT) run trixie-cuda -- bash -c \
	  'cd $(CUDA_BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE interop && \
	   tests/dcpp_cuda_tests --reporter compact | grep -m1 -E "skipped:|^Passed|^test cases"'

# The sanitizer stages, each in a build directory of its own at -O1 with line tables only (what
# their reports need; the test programs at -O0); docs/reliability.md, "Sanitizers". AddressSanitizer +
# UndefinedBehaviorSanitizer run everything that parses bytes or owns threads or processes: the
# state dict, codec and checkpoint tests, the fuzz targets' replays, async, the multi-rank
# collectives, the plugin, the faults, read-once loads and the storage drivers (S3 included).
# ThreadSanitizer runs the tests with threads of dcpp's own (async, plugin, read-once loads, the S3
# driver) and the multi-rank collectives (distributed). SANITIZER_SCOPE=all runs every test
# under ASan + UBSan (but ASAN_EXCLUDE) and adds resharding and the parallel layouts under TSan;
# it adds 11 minutes of tests on 2 cores and the builds of every other target, so not in CI.
SANITIZER_SCOPE ?= ci
ASAN_DIR ?= $(BUILD_DIR)-asan
TSAN_DIR ?= $(BUILD_DIR)-tsan
# Built with Clang 14 too (COMPILER, above; SANITIZER_CXX for another), whose runtimes
# libclang-rt-14-dev has.
SANITIZER_CXX ?= $(COMPILER)
SANITIZER_CMAKE_ARGS := -DCMAKE_CXX_COMPILER=$(SANITIZER_CXX) \
                        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
                        -DDCPP_BUILD_BENCHMARKS=OFF \
                        -DDCPP_S3_SERVER_DIR=$(abspath $(BUILD_DIR))/s3-server $(CMAKE_ARGS)
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:strict_string_checks=1 \
                 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
                 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/sanitizers/tsan.supp"
FUZZ_REPLAYS := pickle_reader_fuzzer_replay zip_blob_reader_fuzzer_replay metadata_fuzzer_replay \
                item_fuzzer_replay safetensors_fuzzer_replay
# Never under ASan: the package test (it only builds a user project) and the test that bounds the
# CLI's peak memory (ASan's quarantine holds freed memory back, 256 MiB by default).
ASAN_EXCLUDE := ^package\.|^tools:conversion_memory_test$$
# Read-once loads: a rank's reader threads fill the copies it sends (reshard/read_once_test.cpp).
READ_ONCE_TEST := ^reshard:read_once_test$$
# The S3 driver: parts uploaded and ranges read on threads of its own, a pool of connections.
S3_DRIVER_TESTS := ^storage:(s3_driver_test|conformance_test)$$
ifeq ($(SANITIZER_SCOPE),all)
  ASAN_TARGETS := all
  ASAN_TESTS   := .
  TSAN_TARGETS := dcpp_async_tests dcpp_plugin_tests dcpp_distributed_tests dcpp_reshard_tests \
                  dcpp_parallel_tests dcpp_storage_tests
  TSAN_TESTS   := ^(async|plugin|distributed|reshard|parallel|storage):
else
  ASAN_TARGETS := dcpp_state_dict_tests dcpp_checkpoint_tests dcpp_async_tests \
                  dcpp_distributed_tests dcpp_plugin_tests dcpp_faults_tests $(FUZZ_REPLAYS) \
                  dcpp_reshard_tests dcpp_storage_tests
  ASAN_TESTS   := ^(state_dict|checkpoint|async|distributed|plugin|faults|storage):|^fuzz\.|$(READ_ONCE_TEST)
  TSAN_TARGETS := dcpp_async_tests dcpp_plugin_tests dcpp_distributed_tests dcpp_reshard_tests \
                  dcpp_storage_tests
  TSAN_TESTS   := ^(async|plugin|distributed):|$(READ_ONCE_TEST)|$(S3_DRIVER_TESTS)
  # Not in CI's sanitizer stages: the restart matrix (20 restarts against a failing store, its
  # time mostly its stalls' deadlines); its threads and ranks are those of the restart, lease and
  # node-local tests, which run there.
  ASAN_EXCLUDE := $(ASAN_EXCLUDE)|^plugin:restart_matrix_test$$
  TSAN_EXCLUDE := ^plugin:restart_matrix_test$$
endif

build-asan: deps-sanitizers
	cmake -S . -B $(ASAN_DIR) $(call GENERATOR,$(ASAN_DIR)) $(SANITIZER_CMAKE_ARGS) \
	  -DDCPP_SANITIZE=address,undefined
	cmake --build $(ASAN_DIR) -j$(JOBS) --target $(ASAN_TARGETS)

test-asan: build-asan s3-server
	cd $(ASAN_DIR) && $(SANITIZER_ENV) ctest --output-on-failure -j$(JOBS) -R '$(ASAN_TESTS)' \
	  -E '$(ASAN_EXCLUDE)'

build-tsan: deps-sanitizers
	cmake -S . -B $(TSAN_DIR) $(call GENERATOR,$(TSAN_DIR)) $(SANITIZER_CMAKE_ARGS) \
	  -DDCPP_SANITIZE=thread
	cmake --build $(TSAN_DIR) -j$(JOBS) --target $(TSAN_TARGETS)

test-tsan: build-tsan s3-server
	cd $(TSAN_DIR) && $(SANITIZER_ENV) ctest --output-on-failure -j$(JOBS) -R '$(TSAN_TESTS)' \
	  $(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')

# What the demo runs, and nothing else: the tests, benchmarks and other examples build with
# `make build` (or `make test`).
DEMO_TARGETS := quickstart demo_char_lm memory_tier_resume dcpp_cli dcpp_launch
demo-build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS) --target $(DEMO_TARGETS)

demo: demo-build s3-server
	rm -rf $(DEMO_DIR)
	$(BUILD_DIR)/examples/quickstart train $(DEMO_DIR)
	$(BUILD_DIR)/examples/quickstart resume $(DEMO_DIR)
	$(BUILD_DIR)/tools/dcpp inspect $(DEMO_DIR)/step-3
	@# The training-loop plugin (examples/demo_char_lm.cpp, docs/plugin.md): a character-level model
	@# of the GPL on 2 FSDP ranks with async checkpoints, SIGKILLed mid-save, resumed on 3 DDP ranks.
	rm -rf $(PLUGIN_DEMO_DIR) && mkdir -p $(PLUGIN_DEMO_DIR)
	@echo "== FSDP on 2 ranks, async checkpoint every $(DEMO_SAVE_EVERY) steps, killed mid-save at step $(DEMO_KILL_STEP)"
	-$(BUILD_DIR)/tools/dcpp-launch -n 2 -- $(BUILD_DIR)/examples/demo_char_lm train \
	  $(PLUGIN_DEMO_DIR)/checkpoints $(DEMO_STEPS) $(DEMO_SAVE_EVERY) $(DEMO_KILL_STEP)
	@echo "== on disk after the kill:"; ls $(PLUGIN_DEMO_DIR)/checkpoints
	@echo "== resumed on 3 ranks, data parallel"
	$(BUILD_DIR)/tools/dcpp-launch -n 3 -- $(BUILD_DIR)/examples/demo_char_lm resume \
	  $(PLUGIN_DEMO_DIR)/checkpoints $(DEMO_STEPS)
	@# The memory tier (docs/plugin.md): every step kept in shared memory; rank 1 SIGKILLed in the
	@# middle of step 7, the job started again resumes from step 6 out of memory.
	@echo "== memory tier: every step to memory, every 4th to disk; rank 1 killed mid-step 7"
	-$(BUILD_DIR)/tools/dcpp-launch -n 2 -- $(BUILD_DIR)/examples/memory_tier_resume \
	  $(PLUGIN_DEMO_DIR)/memory 10 6 1
	@echo "== started again: resumed from memory"
	$(BUILD_DIR)/tools/dcpp-launch -n 2 -- $(BUILD_DIR)/examples/memory_tier_resume \
	  $(PLUGIN_DEMO_DIR)/memory 10
	@# The remote tier (docs/storage.md): checkpoints drain to a local S3 server; the local ones are
	@# lost and the job resumes from the remote.
	examples/demo_remote_tier.sh $(BUILD_DIR) $(PLUGIN_DEMO_DIR)/remote $(DEMO_REMOTE_STEPS) \
	  $(DEMO_SAVE_EVERY)

bench: build
	$(BUILD_DIR)/bench/save_load_bench

install: build
	cmake --install $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(BUILD_DIR)-libtorch-*
