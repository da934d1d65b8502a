#!/bin/bash
# A rehearsal of the dependency bundle (bench/gpu/make_bundle.sh) on a machine that has none of
# dcpp's dependencies: a fresh Debian 12 root made with debootstrap from this machine's own Debian
# mirror, holding build-essential, cmake, ninja-build, pkg-config and libtorch-dev (1.13, CPU) and
# nothing else, with the checkout bind-mounted at its own path. There, with the bundle as the only
# source of spdlog, fmt, TBB, Catch2, CLI11, nlohmann-json, libdeflate, zstd, curl, OpenSSL,
# pugixml, ISA-L and Gloo's headers:
#   1. preflight.sh without the bundle, to show what the root lacks, then with it;
#   2. configure as run_on_device.sh does (the bundle's prefix, its pkg-config,
#      CMAKE_LIBRARY_ARCHITECTURE, Gloo's headers with -isystem since Debian's libtorch has none);
#      CMake then finds every dependency it names; the cache says where each came from;
#   3. build what dcpp_cuda_tests and cuda_staging_bench need on a CPU libtorch: every dcpp library
#      (dcpp::dcpp: the S3 room's curl, OpenSSL, pugixml, ISA-L included), Catch2's test main,
#      CLI11's benchmark helpers, as dcpp_state_dict_tests and async_bench;
#   4. run them with LD_LIBRARY_PATH on the bundle, after ldd shows where every library came from.
#
#   bench/gpu/rehearse_bundle.sh [BUNDLE_DIR]     (default: bench/gpu/bundle)
#
# Needs root (debootstrap, chroot, mount). The root is made once and kept in
# DCPP_GPU_REHEARSAL_DIR (default ~/.cache/dcpp/gpu-bundle-rehearsal); the build directory is
# build-bundle-rehearsal in the checkout (git-ignored). DCPP_GPU_REHEARSAL_JOBS: -j (default 2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checkout=$(cd "$here/../.." && pwd)
bundle=$(cd "${1:-$here/bundle}" && pwd)
dir=${DCPP_GPU_REHEARSAL_DIR:-$HOME/.cache/dcpp/gpu-bundle-rehearsal}
root=$dir/root
jobs=${DCPP_GPU_REHEARSAL_JOBS:-2}
packages="build-essential cmake ninja-build pkg-config libtorch-dev"
die() { echo "rehearse_bundle.sh: $*" >&2; exit 1; }
((EUID == 0)) || die "needs root (debootstrap, chroot, mount)"
[[ $bundle == "$checkout"/* ]] || die "the bundle must be inside the checkout (it is bind-mounted)"

# The root, made once: minbase bookworm, dpkg unpacking without documentation, then the packages.
if [[ ! -f $root/.dcpp-rehearsal-ready || $(cat "$root/.dcpp-rehearsal-ready") != "$packages" ]]; then
  mirror=$("$checkout/tests/reference/reference_root.sh" mirror)
  if [[ ! -f $root/.dcpp-bootstrapped ]]; then
    rm -rf "$root"
    mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
    printf '%s\n' force-unsafe-io 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' \
      'path-exclude=/usr/share/locale/*' >"$root/etc/dpkg/dpkg.cfg.d/dcpp-rehearsal"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
      die "debootstrap failed; see $dir/debootstrap.log"
    touch "$root/.dcpp-bootstrapped"
  fi
  # shellcheck disable=SC2086
  chroot "$root" env DEBIAN_FRONTEND=noninteractive bash -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages && apt-get clean" \
    >"$dir/install.log" 2>&1 || die "apt-get in the root failed; see $dir/install.log"
  echo "$packages" >"$root/.dcpp-rehearsal-ready"
fi

# The steps, inside the root (a private mount namespace: the checkout and /tmp at their paths).
steps=$(cat <<'STEPS'
set -euo pipefail
cd "$CHECKOUT"
bundle=$BUNDLE build=build-bundle-rehearsal lib=$BUNDLE/usr/lib/x86_64-linux-gnu
echo "==== the root: $(. /etc/os-release && echo "$PRETTY_NAME"), $(c++ --version | head -1), $(cmake --version | head -1)"
echo "==== installed packages of dcpp's dependencies (none expected but zlib1g-dev, which libtorch-dev pulls in):"
{ dpkg-query -W -f='${Package} ${Status}\n' libspdlog-dev libfmt-dev libtbb-dev catch2 libcli11-dev \
  nlohmann-json3-dev libdeflate-dev zlib1g-dev libzstd-dev libcurl4-openssl-dev libssl-dev \
  libpugixml-dev libisal-dev libgloo-dev 2>/dev/null || true; } | grep 'install ok installed' || echo "(none)"
echo "==== preflight without the bundle"
bench/gpu/preflight.sh /nonexistent | sed -n '/dcpp.s build dependencies/,$p'
echo "==== preflight with the bundle"
bench/gpu/preflight.sh "$bundle" | sed -n '/dcpp.s build dependencies/,$p'
echo "==== configure"
# A fresh configure (the cache dropped); objects of an earlier rehearsal are reused where unchanged.
rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DDCPP_BUILD_EXAMPLES=OFF -DDCPP_BUILD_TOOLS=OFF -DDCPP_BUILD_S3_TESTS=OFF -DDCPP_CHECK_HEADERS=OFF \
  -DCMAKE_PREFIX_PATH="$bundle/usr" -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu \
  -DPKG_CONFIG_EXECUTABLE="$bundle/usr/bin/pkg-config" -DCMAKE_CXX_FLAGS="-isystem $bundle/gloo/include" \
  >"$build/rehearsal-configure.log" 2>&1 || { tail -40 "$build/rehearsal-configure.log"; exit 1; }
grep -E '^-- (dcpp|Found)' "$build/rehearsal-configure.log"
echo "==== where CMake found each dependency (CMakeCache.txt)"
grep -E '^(spdlog|fmt|TBB|Catch2|CLI11|nlohmann_json|pugixml)_DIR|^(CURL_LIBRARY_RELEASE|OPENSSL_CRYPTO_LIBRARY|ZLIB_LIBRARY_RELEASE|pkgcfg_lib_[A-Z_]+_[a-z]+):' "$build/CMakeCache.txt"
echo "==== build dcpp_state_dict_tests and async_bench (every dcpp library, Catch2, CLI11)"
time cmake --build "$build" --target dcpp_state_dict_tests async_bench -j"$JOBS" >"$build/rehearsal-build.log" 2>&1 ||
  { tail -60 "$build/rehearsal-build.log"; exit 1; }
export LD_LIBRARY_PATH=$lib
echo "==== ldd: the libraries dcpp's libraries and test program load, from the bundle"
resolved=$(ldd "$build"/*/libdcpp_*.so* "$build/tests/dcpp_state_dict_tests" | awk '/=>/ {print $1, $3}' | sort -u)
grep -F " $lib/" <<<"$resolved" | awk '{print "  " $1}' | paste -sd' ' | fold -s -w 100
echo "  (and $(grep -vcF -e " $lib/" -e " $PWD/$build/" <<<"$resolved") from the root: libtorch's own dependencies and glibc's)"
if ldd "$build"/*/libdcpp_*.so* "$build/tests/dcpp_state_dict_tests" "$build/bench/async_bench" | grep 'not found'; then
  echo "a library is not found"; exit 1
fi
echo "==== run dcpp_state_dict_tests"
(cd "$build/tests" && ./dcpp_state_dict_tests --reporter compact | tail -3)
echo "==== run async_bench (short: 64 MiB states)"
scratch=$(mktemp -d /tmp/dcpp-rehearsal.XXXXXX)
TMPDIR=$scratch timeout 300 "$build/bench/async_bench" --gib 0.0625 --tensors 4 --repeat 1 --steps 3 \
  --rss-gib 0.0625 --saves 2 --dir "$scratch/bench"
rm -rf "$scratch"
STEPS
)
# shellcheck disable=SC2016  # expanded by the inner bash
unshare --mount --propagation private -- bash -c '
  set -e; root=$1 checkout=$2
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  for d in /tmp "$checkout"; do mkdir -p "$root$d" && mount --bind "$d" "$root$d"; done
  exec chroot "$root" env CHECKOUT="$checkout" BUNDLE="$3" JOBS="$4" bash -c "$5"
' _ "$root" "$checkout" "$bundle" "$jobs" "$steps"
