#!/bin/bash
# The GPU checks of issue 39 (docs/gpu.md), in one run on a machine with an NVIDIA GPU and PyTorch's
# wheel installed (its libtorch is what dcpp builds against there: torch.utils.cmake_prefix_path),
# besides dcpp's build dependencies (the Debian packages `make deps` names). Builds the CUDA tests
# and the GPU benchmark only, runs them, and writes their output to OUT (default ./gpu-results):
#
#   bench/gpu/run_on_device.sh [OUT]
#
# Prepared and built on the CPU machine first (`make build-cuda` builds the same targets against
# Debian's CUDA libtorch), so that the device's short time goes to running, not to fixing.
set -euo pipefail
out=${1:-gpu-results}
build=${DCPP_GPU_BUILD_DIR:-build-gpu}
mkdir -p "$out"
prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$out/device.txt"
cmake -S . -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DDCPP_BUILD_S3_TESTS=OFF -DDCPP_CHECK_HEADERS=OFF -DDCPP_BUILD_EXAMPLES=OFF \
  2>&1 | tee "$out/configure.log" | grep 'dcpp:'
cmake --build "$build" --target dcpp_cuda_tests cuda_staging_bench -j"$(nproc)" >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
rc=0
"$build/tests/dcpp_cuda_tests" --reporter compact 2>&1 | tee "$out/cuda_tests.txt" || rc=1
"$build/bench/cuda_staging_bench" 2>&1 | tee "$out/cuda_staging_bench.txt" || rc=1
exit $rc
