#!/bin/bash
# The GPU checks of issues 39 and 59 (docs/gpu.md, "On a machine with a GPU"), in one command on a
# machine with an NVIDIA GPU, PyTorch's wheel (its libtorch is what dcpp builds against:
# torch.utils.cmake_prefix_path), a C++ compiler, CMake and ninja, and no package registry:
#
#   bench/gpu/run_on_device.sh [OUT]          (OUT default: gpu-results)
#
# dcpp's other build dependencies come from the bundle that bench/gpu/make_bundle.sh made on a
# Debian 12 machine (DCPP_GPU_BUNDLE, default bench/gpu/bundle; it travels as a carried path), where
# the system lacks them. Stages, each timed, each writing its log under OUT:
#   preflight  bench/gpu/preflight.sh: the system, torch, nccl.h, what is missing (preflight.txt);
#   configure  Release (-O2), the bundle's prefix before torch's on CMAKE_PREFIX_PATH, its pkg-config, no
#              examples, tools, S3 tests or lone-header checks (configure.log);
#   build      dcpp_cuda_tests and cuda_staging_bench only, -j$(nproc), ninja going on past a
#              failed target so that the other one is still built (build.log);
#   tests      dcpp_cuda_tests, compact reporter (cuda_tests.txt);
#   bench      cuda_staging_bench (cuda_staging_bench.txt).
# A failed stage prints its name and the last lines of its log; the stages after it run where they
# do not need it (the benchmark runs when a test fails, and when the tests' build failed). The
# tests and the benchmark run with TMPDIR and their checkpoints in a scratch directory of their
# own, removed after each (the benchmark also removes each checkpoint after its measurement). They
# share a deadline (DCPP_GPU_DEADLINE_S seconds from the start, default 570: the device's 10-minute
# limit for one command) so that the summary (summary.txt, also printed) is always written.
# At most 6 files land in OUT (the device run brings back 8). Exit status: 0 when every stage
# passed, 1 otherwise.
#
# Environment: PYTHON (python3), DCPP_GPU_BUILD_DIR (build-gpu), DCPP_GPU_BUNDLE,
# DCPP_GPU_SCRATCH (BUILD_DIR/scratch), DCPP_GPU_JOBS (nproc), DCPP_GPU_CMAKE_ARGS (more -D...
# for the configure step, words without spaces), DCPP_GPU_BENCH_ARGS (more arguments to
# cuda_staging_bench), DCPP_GPU_DEADLINE_S, CXX (the compiler CMake picks otherwise).
set -euo pipefail

start=$SECONDS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=${1:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{preflight.txt,configure.log,build.log,cuda_tests.txt,cuda_staging_bench.txt,summary.txt}
build=${DCPP_GPU_BUILD_DIR:-build-gpu}
bundle=${DCPP_GPU_BUNDLE:-$here/bundle}
scratch=${DCPP_GPU_SCRATCH:-$build/scratch}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
python=${PYTHON:-python3}
jobs=${DCPP_GPU_JOBS:-$(nproc)}
deadline=$((start + ${DCPP_GPU_DEADLINE_S:-570}))
triplet=x86_64-linux-gnu
read -r -a bench_args <<<"${DCPP_GPU_BENCH_ARGS:-}"
read -r -a extra_cmake_args <<<"${DCPP_GPU_CMAKE_ARGS:-}"

summary=()
failed=0
stage_start=0
begin() {  # NAME
  stage_start=$SECONDS
  printf '\n==== %s (at %d s)\n' "$1" $((SECONDS - start))
}
# Records a stage's end: NAME STATUS [LOG]; a status other than ok prints the log's last lines.
finish() {
  local name=$1 status=$2 log=${3:-} took=$((SECONDS - stage_start))
  summary+=("$(printf '%-10s %-28s %4d s' "$name" "$status" "$took")")
  printf '==== %s: %s in %d s\n' "$name" "$status" "$took"
  if [[ $status != ok* && $status != skipped* ]]; then
    failed=1
    if [[ -n $log && -f $log ]]; then
      echo "---- last lines of $log (stage $name):"
      tail -n 40 "$log"
      echo "---- end of $log (stage $name: $status)"
    fi
  fi
}
remaining() { echo $((deadline - SECONDS)); }
clean_scratch() { rm -rf "$scratch"; }
trap clean_scratch EXIT

# 1. Preflight.
begin preflight
bench/gpu/preflight.sh "$bundle" >"$out/preflight.txt" 2>&1 || true
cat "$out/preflight.txt"
missing=$(sed -n 's/^preflight: missing: //p' "$out/preflight.txt")
torch_gloo=$(sed -n 's/^preflight: torch gloo headers: //p' "$out/preflight.txt")
finish preflight "ok${missing:+ (missing: $missing)}"

# 2. Configure.
begin configure
configured=0
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>>"$out/configure.log" || true)
# Release at -O2, not CMake's -O3: minutes of the device's 10 go to compiling, and the copies the
# benchmark times are memcpy and the driver's either way.
cmake_args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
  -DDCPP_BUILD_TESTS=ON
  -DDCPP_BUILD_BENCHMARKS=ON -DDCPP_BUILD_EXAMPLES=OFF -DDCPP_BUILD_TOOLS=OFF
  -DDCPP_BUILD_S3_TESTS=OFF -DDCPP_CHECK_HEADERS=OFF)
prefix_path=$torch_prefix
# The tests' and the benchmark's library path: the bundle's libraries first (curl's own dependencies
# are found no other way), then the caller's; CMake and the compiler keep the caller's alone.
run_library_path=${LD_LIBRARY_PATH:-}
if [[ -d $bundle/usr ]]; then
  bundle=$(cd "$bundle" && pwd)
  # The bundle before torch's prefix, which may be a directory of every package (Debian's
  # /usr/lib/x86_64-linux-gnu/cmake) where a system has some of them too: what the bundle holds is
  # taken from it, the rest (Torch, Caffe2) from torch's. Its libraries and CMake packages are
  # under lib/x86_64-linux-gnu, which CMake searches only where CMAKE_LIBRARY_ARCHITECTURE says so
  # (Debian's and Ubuntu's compilers do; others do not).
  prefix_path="$bundle/usr;$torch_prefix"
  cmake_args+=("-DCMAKE_LIBRARY_ARCHITECTURE=$triplet" "-DPKG_CONFIG_EXECUTABLE=$bundle/usr/bin/pkg-config")
  run_library_path="$bundle/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Gloo's headers (c10d's ProcessGroupGloo.hpp includes them) from the bundle only where torch's
  # headers have none.
  if [[ $torch_gloo != yes && -d $bundle/gloo/include ]]; then
    cmake_args+=(-DCMAKE_CXX_FLAGS="-isystem $bundle/gloo/include")
  fi
fi
cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix_path" "${extra_cmake_args[@]}")
if [[ -z $torch_prefix ]]; then
  echo "no torch in $python: nothing to configure against" >>"$out/configure.log"
  finish configure "FAILED (no torch)" "$out/configure.log"
else
  echo "cmake ${cmake_args[*]}" >>"$out/configure.log"
  if cmake "${cmake_args[@]}" >>"$out/configure.log" 2>&1; then
    configured=1
    finish configure ok
  else
    finish configure FAILED "$out/configure.log"
  fi
  grep -E '^-- dcpp:|dcpp: NCCL|^CMake (Warning|Error)' "$out/configure.log" || true
  # The NCCL probe's own output, where it failed: the compiler's or linker's message.
  if grep -q 'NCCL groups compiled in: OFF' "$out/configure.log"; then
    for log in "$build/CMakeFiles/CMakeConfigureLog.yaml" "$build/CMakeFiles/CMakeError.log"; do
      [[ -f $log ]] || continue
      {
        echo "---- the NCCL probe in $log:"
        grep -A 60 -E 'DCPP_LIBTORCH_(NCCL_HEADERS_COMPILE|HAS_NCCL)' "$log" | tail -n 150 || true
      } >>"$out/configure.log"
    done
  fi
fi

# 3. Build the two targets.
begin build
tests_bin=$build/tests/dcpp_cuda_tests
bench_bin=$build/bench/cuda_staging_bench
if ((configured)); then
  rm -f "$tests_bin" "$bench_bin"
  cmake --build "$build" --target dcpp_cuda_tests cuda_staging_bench -j"$jobs" -- -k 0 \
    >"$out/build.log" 2>&1 || true
  built=()
  [[ -x $tests_bin ]] && built+=(dcpp_cuda_tests)
  [[ -x $bench_bin ]] && built+=(cuda_staging_bench)
  if ((${#built[@]} == 2)); then
    finish build ok
  else
    finish build "FAILED (built: ${built[*]:-none})" "$out/build.log"
  fi
else
  finish build "skipped (not configured)"
fi

# 4. The CUDA tests. TMPDIR is a scratch directory, removed after.
begin tests
if [[ -x $tests_bin ]]; then
  limit=$(($(remaining) - 150))  # leaves the benchmark two and a half minutes
  ((limit > 300)) && limit=300
  if ((limit < 30)); then
    finish tests "skipped (no time left)"
  else
    mkdir -p "$scratch/tmp"
    rc=0
    (cd "$build/tests" && TMPDIR=$scratch/tmp LD_LIBRARY_PATH=$run_library_path \
      timeout --kill-after=10 "$limit" ./dcpp_cuda_tests --reporter compact --durations yes) \
      >"$out/cuda_tests.txt" 2>&1 || rc=$?
    clean_scratch
    tail -n 5 "$out/cuda_tests.txt"
    case $rc in
      0) finish tests ok;;
      4) finish tests "skipped (no CUDA device)" "$out/cuda_tests.txt";;
      124 | 137) finish tests "TIMED OUT after ${limit} s" "$out/cuda_tests.txt";;
      *) finish tests "FAILED (exit $rc)" "$out/cuda_tests.txt";;
    esac
  fi
else
  finish tests "skipped (not built)"
fi

# 5. The benchmark; its checkpoints in the scratch directory, removed after.
begin bench
if [[ -x $bench_bin ]]; then
  limit=$(($(remaining) - 10))
  if ((limit < 30)); then
    finish bench "skipped (no time left)"
  else
    mkdir -p "$scratch/tmp"
    rc=0
    TMPDIR=$scratch/tmp LD_LIBRARY_PATH=$run_library_path \
      timeout --kill-after=10 "$limit" "$bench_bin" --dir "$scratch/bench" \
      "${bench_args[@]}" >"$out/cuda_staging_bench.txt" 2>&1 || rc=$?
    clean_scratch
    cat "$out/cuda_staging_bench.txt"
    case $rc in
      0) finish bench ok;;
      77) finish bench "skipped (no CUDA device)";;
      124 | 137) finish bench "TIMED OUT after ${limit} s" "$out/cuda_staging_bench.txt";;
      *) finish bench "FAILED (exit $rc)" "$out/cuda_staging_bench.txt";;
    esac
  fi
else
  finish bench "skipped (not built)"
fi

# Summary.
{
  echo "==== summary ($((SECONDS - start)) s in all)"
  printf '%s\n' "${summary[@]}"
  grep -E '^(torch_version|torch_cuda|device|nvidia-smi):' "$out/preflight.txt" || true
  if [[ -f $out/configure.log ]]; then
    grep -E '^-- dcpp: (libtorch|CUDA)|dcpp: NCCL groups are not' "$out/configure.log" || true
  fi
  if [[ -f $out/cuda_tests.txt ]]; then
    grep -E '^(All tests passed|Passed|test cases:|Failed)' "$out/cuda_tests.txt" | tail -n 2 || true
  fi
  if [[ -f $out/cuda_staging_bench.txt ]]; then
    echo "benchmark: $(grep -c . "$out/cuda_staging_bench.txt" || true) lines in cuda_staging_bench.txt"
  fi
  if ((failed)); then echo "result: SOME STAGES FAILED"; else echo "result: all stages passed"; fi
} | tee "$out/summary.txt"
exit "$failed"
