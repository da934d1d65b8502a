#!/bin/bash
# What the GPU device run will build with, printed before anything is built (docs/gpu.md, "On a
# machine with a GPU"): the system, the compilers and build tools, Python's torch (version, CUDA,
# CXX11 ABI, CMake prefix, include directories), the GPU, where nccl.h, the CUDA toolkit's headers
# and Gloo's headers are, and which of dcpp's build dependencies are missing, found neither on the
# system nor in the carried bundle (bench/gpu/make_bundle.sh).
#
#   bench/gpu/preflight.sh [BUNDLE_DIR]     (default: bench/gpu/bundle beside this script)
#
# Environment: PYTHON (default python3), the interpreter whose torch the build uses.
# Contract: it only reads and reports. A missing tool, module or header is a line that says so
# (MISSING), never a failure: it exits 0 whatever it finds. Its last lines are a summary that
# run_on_device.sh reads: "preflight: missing: NAME..." (empty when nothing is) and
# "preflight: torch gloo headers: yes|no".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle=${1:-$here/bundle}
python=${PYTHON:-python3}
triplet=x86_64-linux-gnu
missing=()

section() { printf '\n== %s\n' "$*"; }
# Runs a command for its output, or says why there is none; never fails.
show() {  # LABEL CMD...
  local label=$1 output
  shift
  if output=$(timeout 60 "$@" 2>&1); then
    printf '%-22s %s\n' "$label:" "$(head -n 3 <<<"$output" | paste -sd'|' | sed 's/|/ | /g')"
  else
    printf '%-22s %s\n' "$label:" "MISSING or failed ($*: $(head -n 1 <<<"$output"))"
  fi
}
# The first file named NAME (a path under DIR, globs allowed) in DIRS; prints it, or nothing.
first_file() {  # NAME DIR...
  local name=$1 dir match
  shift
  for dir in "$@"; do
    [[ -n $dir && -d $dir ]] || continue
    for match in "$dir"/$name; do
      [[ -e $match ]] && { echo "$match"; return 0; }
    done
  done
  return 0
}

section "system"
if [[ -r /etc/os-release ]]; then
  grep -E '^(PRETTY_NAME|ID|VERSION_ID|ID_LIKE)=' /etc/os-release || true
else
  echo "no /etc/os-release"
fi
show "kernel" uname -srm
show "glibc" getconf GNU_LIBC_VERSION
show "cores" nproc
show "memory" sh -c "free -g | sed -n 2p"
show "disk here" sh -c "df -h . | tail -1"
show "user" id -un

section "compilers and build tools"
show "c++" sh -c 'command -v c++ && c++ --version | head -1'
show "g++" sh -c 'command -v g++ && g++ --version | head -1'
show "clang++" sh -c 'command -v clang++ && clang++ --version | head -1'
show "CXX (environment)" printenv CXX
show "nvcc" sh -c 'command -v nvcc && nvcc --version | tail -2'
show "cmake" sh -c 'command -v cmake && cmake --version | head -1'
show "ninja" sh -c 'command -v ninja && ninja --version'
show "pkg-config" sh -c 'command -v pkg-config && pkg-config --version'
show "linker" sh -c 'ld --version | head -1; command -v mold ld.lld 2>/dev/null || true'

section "python and torch"
show "python" sh -c "command -v $python && $python --version"
torch_info=$(timeout 120 "$python" - <<'PYTHON' 2>&1 || true
import os, sys
try:
    import torch
except Exception as e:
    print("torch: MISSING (%s)" % e)
    sys.exit(0)
import torch.utils
print("torch_version:", torch.__version__)
print("torch_cuda:", torch.version.cuda)
print("torch_cxx11_abi:", torch._C._GLIBCXX_USE_CXX11_ABI)
print("torch_cmake_prefix_path:", torch.utils.cmake_prefix_path)
print("torch_dir:", os.path.dirname(torch.__file__))
try:
    from torch.utils.cpp_extension import include_paths, CUDA_HOME
    print("torch_include_paths:", " ".join(include_paths()))
    print("cuda_home:", CUDA_HOME)
except Exception as e:
    print("torch_include_paths: (cpp_extension failed: %s)" % e)
try:
    print("cuda_available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
    if torch.cuda.is_available():
        print("device:", torch.cuda.get_device_name(0), "capability:", torch.cuda.get_device_capability(0))
    print("nccl_available:", torch.distributed.is_nccl_available(), "nccl_version:",
          torch.cuda.nccl.version() if torch.cuda.is_available() else "?")
    print("gloo_available:", torch.distributed.is_gloo_available())
except Exception as e:
    print("cuda query failed:", e)
PYTHON
)
echo "$torch_info"
value() { sed -n "s/^$1: //p" <<<"$torch_info" | head -1; }
torch_dir=$(value torch_dir)
read -r -a torch_includes <<<"$(value torch_include_paths)"
[[ -n $torch_dir && ${#torch_includes[@]} -eq 0 ]] && torch_includes=("$torch_dir/include")
site_packages=${torch_dir%/torch}
cuda_home=$(value cuda_home)
[[ -z $torch_dir ]] && missing+=("torch")

section "GPU"
show "nvidia-smi" nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

section "headers for CUDA, NCCL and Gloo"
nvcc_include=
if command -v nvcc >/dev/null; then nvcc_include=$(dirname "$(dirname "$(command -v nvcc)")")/include; fi
cuda_dirs=("${torch_includes[@]}" "${cuda_home:+$cuda_home/include}" "$nvcc_include"
  /usr/local/cuda/include "$site_packages"/nvidia/cu1*/include "$site_packages"/nvidia/cuda_runtime/include
  /usr/include)
nccl_dirs=("${torch_includes[@]}" "$site_packages/nvidia/nccl/include" "$site_packages"/nvidia/cu1*/include
  /usr/local/cuda/include /usr/include)
cuda_header=$(first_file cuda_runtime_api.h "${cuda_dirs[@]}")
nccl_header=$(first_file nccl.h "${nccl_dirs[@]}")
gloo_header=$(first_file gloo/algorithm.h "${torch_includes[@]}")
nccl_library=$(first_file 'libnccl.so*' "$site_packages/nvidia/nccl/lib" "$torch_dir/lib" \
  /usr/local/cuda/lib64 /usr/lib/$triplet /usr/lib64)
pg_nccl=$(first_file torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp "${torch_includes[@]}")
printf '%-22s %s\n' "cuda_runtime_api.h:" "${cuda_header:-MISSING (searched: ${cuda_dirs[*]})}"
printf '%-22s %s\n' "nccl.h:" "${nccl_header:-MISSING (searched: ${nccl_dirs[*]})}"
if [[ -n $nccl_header ]]; then grep -m3 -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$nccl_header" || true; fi
printf '%-22s %s\n' "libnccl:" "${nccl_library:-MISSING}"
printf '%-22s %s\n' "ProcessGroupNCCL.hpp:" "${pg_nccl:-MISSING (not among the torch headers)}"
if [[ -n $gloo_header ]]; then
  printf '%-22s %s\n' "gloo/algorithm.h:" "$gloo_header (torch's)"
elif [[ -e $bundle/gloo/include/gloo/algorithm.h ]]; then
  printf '%-22s %s\n' "gloo/algorithm.h:" "not in torch's headers; the bundle's (Debian 12's Gloo) will be used"
else
  printf '%-22s %s\n' "gloo/algorithm.h:" "MISSING (neither torch's headers nor the bundle have it)"
  missing+=("gloo-headers")
fi

section "dcpp's build dependencies (the bundle at $bundle, else the system)"
if [[ -r $bundle/MANIFEST ]]; then
  sed -n '1,4p' "$bundle/MANIFEST"
else
  echo "no bundle at $bundle (bench/gpu/make_bundle.sh makes it)"
fi
# Where each is looked for, one directory a line: the bundle's prefix (which the run puts first
# on CMAKE_PREFIX_PATH), then the system's usual places.
places() {  # system|bundle include|lib|cmake
  case $1:$2 in
    system:include) printf '%s\n' /usr/include /usr/local/include "/usr/include/$triplet";;
    system:lib) printf '%s\n' "/usr/lib/$triplet" /usr/lib64 /usr/lib /usr/local/lib "/lib/$triplet";;
    system:cmake) printf '%s\n' "/usr/lib/$triplet/cmake" /usr/lib64/cmake /usr/lib/cmake /usr/share/cmake \
      /usr/local/lib/cmake /usr/local/share/cmake;;
    bundle:include) printf '%s\n' "$bundle/usr/include";;
    bundle:lib) printf '%s\n' "$bundle/usr/lib/$triplet" "$bundle/usr/lib";;
    bundle:cmake) printf '%s\n' "$bundle/usr/lib/$triplet/cmake" "$bundle/usr/lib/cmake" "$bundle/usr/share/cmake";;
  esac
}
# A dependency is there when its header is, and its library or package file (L:name, C:dir/file).
dependency() {  # NAME HEADER [L:LIBRARY-GLOB | C:CMAKE-GLOB]
  local name=$1 header=$2 other=${3:-} where h o dirs
  for where in bundle system; do
    mapfile -t dirs < <(places "$where" include)
    h=$(first_file "$header" "${dirs[@]}")
    [[ -n $h ]] || continue
    o=$h
    case $other in
      L:*) mapfile -t dirs < <(places "$where" lib);;
      C:*) mapfile -t dirs < <(places "$where" cmake);;
    esac
    [[ -n $other ]] && o=$(first_file "${other#?:}" "${dirs[@]}")
    [[ -n $o ]] || continue
    printf '%-15s %-7s %s\n' "$name" "$where" "$o"
    return 0
  done
  printf '%-15s %s\n' "$name" "MISSING (${header}${other:+ and ${other#?:}})"
  missing+=("$name")
}
dependency spdlog spdlog/spdlog.h 'C:spdlog/spdlogConfig.cmake'
dependency fmt fmt/core.h 'C:fmt/fmt-config.cmake'
dependency TBB oneapi/tbb.h 'C:TBB/TBBConfig.cmake'
dependency Catch2 'catch2/catch*.hpp' 'C:Catch2/Catch2Config.cmake'
dependency CLI11 CLI/CLI.hpp
dependency nlohmann-json nlohmann/json.hpp
dependency libdeflate libdeflate.h 'L:libdeflate.so'
dependency zlib zlib.h 'L:libz.so'
dependency zstd zstd.h 'L:libzstd.so'
dependency libcurl curl/curl.h 'L:libcurl.so'
dependency OpenSSL openssl/md5.h 'L:libcrypto.so'
dependency pugixml pugixml.hpp 'C:pugixml/pugixml-config.cmake'
dependency ISA-L isa-l.h 'L:libisal.so'
if [[ -x $bundle/usr/bin/pkg-config ]]; then
  printf '%-15s %-7s %s\n' pkg-config bundle "$bundle/usr/bin/pkg-config"
elif command -v pkg-config >/dev/null; then
  printf '%-15s %-7s %s\n' pkg-config system "$(command -v pkg-config)"
else
  printf '%-15s %s\n' pkg-config MISSING
  missing+=(pkg-config)
fi
if [[ -r $bundle/MANIFEST ]]; then
  need=$(sed -n 's/.*GLIBC_\([0-9.]*\),.*/\1/p' "$bundle/MANIFEST")
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
  if [[ -n $need && -n $have && $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    echo "WARNING: the bundle's libraries need glibc $need; this system has $have"
    missing+=("glibc>=$need")
  fi
fi

section "summary"
echo "preflight: missing: ${missing[*]}"
echo "preflight: torch gloo headers: $([[ -n $gloo_header ]] && echo yes || echo no)"
echo "preflight: nccl.h: ${nccl_header:-MISSING}"
exit 0
