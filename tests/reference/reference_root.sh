#!/bin/bash
# Reference roots: Debian root file systems with a real PyTorch (and, where asked, a libtorch to
# build dcpp against), made by debootstrap from Debian's packages only and cached outside the build
# tree. Interop tests run Python's torch.distributed.checkpoint in them; `make test-libtorch`
# builds and tests dcpp in them.
#
#   reference_root.sh ensure SUITE [python|build]   make the root if missing (idempotent, locked);
#                                                   "build" adds libtorch-dev and dcpp's build deps
#                                                   (trixie-cuda: "build" only, no Python)
#   reference_root.sh path SUITE                    print where the root lives
#   reference_root.sh mirror                        print the Debian archive the roots come from
#   reference_root.sh run SUITE [-n RANKS] -- CMD   run CMD inside; with -n, RANKS copies with
#                                                   RANK, WORLD_SIZE, LOCAL_RANK and DCPP_REF_INIT
#                                                   (a FileStore URL for init_process_group) set
#
# SUITE: trixie (PyTorch 2.6), sid (the newest Debian PyTorch, 2.14 when this was written) or
# trixie-cuda: trixie with its contrib and non-free sections, for building dcpp against Debian's CUDA
# libtorch 2.6 (libtorch-cuda-dev, CUDA 12.4's nvcc and headers, NCCL 2.22) with its CUDA and NCCL
# code compiled in (docs/gpu.md). No GPU or driver is needed to build or to run the suite there.
# Two stand-ins, made in that root only, replace cuDNN, which Debian ships as an installer package
# (nvidia-cudnn) whose script downloads it from NVIDIA: nothing may be downloaded but Debian's
# packages. An empty package of that name (dpkg-deb) satisfies the dependency, and a libcudnn.so.9
# built from the cudnn* symbols libtorch_cuda.so references, each returning an error status, lets
# it link and load; dcpp never calls cuDNN, and without a GPU nothing reaches it.
# Roots live in $DCPP_REFERENCE_ROOTS (default ~/.cache/dcpp/reference-roots)/SUITE. A root is
# complete when its stamp file names the profile; an interrupted build is started again.
# `run` sees the caller's working directory and /tmp at the same paths as outside (bind mounts in
# a private mount namespace), so paths pass through unchanged and parallel runs do not collide.
# Needs root (debootstrap, chroot, mount); run by a user with sudo, it runs itself through sudo.
set -euo pipefail

roots=${DCPP_REFERENCE_ROOTS:-$HOME/.cache/dcpp/reference-roots}
# debootstrap, chroot and mount need root: a user with sudo gets it here (the cache stays theirs).
if ((EUID != 0)); then
  exec sudo DCPP_REFERENCE_ROOTS="$roots" "$0" "$@"
fi
python_packages="python3-torch python3-numpy"
build_packages="cmake g++ make pkg-config libtorch-dev libtbb-dev libspdlog-dev catch2 libgloo-dev \
libdeflate-dev zlib1g-dev libzstd-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev libisal-dev \
libpugixml-dev iproute2 ninja-build mold clang"

die() { echo "reference_root.sh: $*" >&2; exit 2; }

# The Debian archive this machine's apt uses: the first "deb" source, in /etc/apt/sources.list.d/
# (*.sources, deb822) or /etc/apt/sources.list and sources.list.d/*.list (one line each), that
# serves one of Debian's own suites (a codename or stable/testing/unstable, not -security,
# -updates or -backports: those are other archives or suites of the same one). The roots come from
# there and nowhere else; DCPP_DEBIAN_MIRROR overrides it.
debian_suites="buster bullseye bookworm trixie forky duke sid oldstable stable testing unstable"
is_debian_suite() {  # SUITE
  local s
  for s in $debian_suites; do [[ $1 == "$s" ]] && return 0; done
  return 1
}
debian_mirror() {
  if [[ -n ${DCPP_DEBIAN_MIRROR:-} ]]; then
    echo "$DCPP_DEBIAN_MIRROR"
    return
  fi
  local apt_dir=${DCPP_APT_DIR:-/etc/apt} file line key value types uris suites suite uri
  local stanza_end=$'\n'
  for file in "$apt_dir"/sources.list.d/*.sources; do
    [[ -f $file ]] || continue
    types="" uris="" suites=""
    # Stanzas are separated by blank lines; a blank line is appended so the last one ends too.
    while IFS= read -r line || [[ -n $line ]]; do
      [[ $line =~ ^[[:space:]]*# ]] && continue  # a comment line does not end a stanza
      line=${line%%#*}
      if [[ -z ${line//[[:space:]]/} ]]; then
        if [[ " $types " == *" deb "* ]]; then
          for suite in $suites; do
            if is_debian_suite "$suite"; then
              for uri in $uris; do echo "${uri%/}"; return; done
            fi
          done
        fi
        types="" uris="" suites=""
        continue
      fi
      [[ $line == *:* ]] || continue
      key=${line%%:*} value=${line#*:}
      case ${key,,} in
        types) types=$value;;
        uris) uris=$value;;
        suites) suites=$value;;
      esac
    done < <(cat "$file"; printf '%s' "$stanza_end")
  done
  for file in "$apt_dir"/sources.list "$apt_dir"/sources.list.d/*.list; do
    [[ -f $file ]] || continue
    while read -r types rest; do
      [[ $types == deb ]] || continue
      rest=${rest#\[*\] }  # options: [arch=amd64 signed-by=...]
      read -r uri suite _ <<<"$rest"
      if is_debian_suite "$suite"; then echo "${uri%/}"; return; fi
    done < <(sed 's/#.*//' "$file")
  done
  die "found no Debian archive in $apt_dir/sources.list or $apt_dir/sources.list.d/ (a \"deb\" \
source of one of: $debian_suites); the reference roots come from this machine's own Debian mirror:
add it to apt's sources, or name it with DCPP_DEBIAN_MIRROR=http://.../debian"
}

check_suite() {
  case $1 in trixie|sid|trixie-cuda) ;; *) die "unknown suite '$1' (trixie, sid or trixie-cuda)";; esac
}

debian_suite() {  # SUITE: the Debian suite a root is made from
  echo "${1%-cuda}"
}

# Debian's CUDA libtorch and its build needs, in place of the CPU ones they conflict with
# (libtorch-dev, libgloo-dev). nvidia-cuda-toolkit brings the nvcc that libtorch's CMake
# configuration requires (dcpp is built there with GCC, not Clang: the Makefile's
# CUDA_CMAKE_ARGS).
cuda_packages() {
  local packages=" $build_packages "
  packages=${packages/ libtorch-dev / libtorch-cuda-dev }
  packages=${packages/ libgloo-dev / libgloo-cuda-dev }
  packages=${packages/ clang / }
  echo "$packages nvidia-cuda-toolkit libnccl-dev"
}

suite_packages() {  # SUITE PROFILE
  if [[ $1 == trixie-cuda ]]; then
    [[ $2 == build ]] || die "the trixie-cuda root has the build profile only"
    cuda_packages
    return
  fi
  local packages=$python_packages
  # The newest PyTorch's optional formats: zstd-compressed items and safetensors.
  [[ $1 == sid ]] && packages+=" python3-zstandard python3-safetensors"
  [[ $2 == build ]] && packages+=" $build_packages"
  echo "$packages"
}

# The stand-in for Debian's nvidia-cudnn (an installer whose script downloads cuDNN from NVIDIA,
# which must not run): an empty package of the same name and version, with its Provides, installed
# and held before apt resolves libtorch-cuda's dependencies.
install_cudnn_package_stand_in() {  # ROOT
  local root=$1 dir
  dir=$(mktemp -d "$root/tmp/nvidia-cudnn.XXXXXX")
  mkdir -p "$dir/pkg/DEBIAN"
  cat >"$dir/pkg/DEBIAN/control" <<'CONTROL'
Package: nvidia-cudnn
Version: 9.0.0.312~cuda12
Architecture: amd64
Provides: libcudnn-dev, libcudnn.so, libcudnn.so.9
Maintainer: dcpp <dcpp@localhost>
Description: dcpp's stand-in for cuDNN's installer (reference roots only)
 Empty; tests/reference/cudnn_stand_in.sh builds the libcudnn.so.9 libtorch links against.
CONTROL
  chroot "$root" dpkg-deb --build --root-owner-group "${dir#"$root"}/pkg" \
    "${dir#"$root"}/nvidia-cudnn.deb" >/dev/null
  chroot "$root" dpkg -i "${dir#"$root"}/nvidia-cudnn.deb" >/dev/null
  chroot "$root" apt-mark hold nvidia-cudnn >/dev/null
  rm -rf "$dir"
}

# apt inside the root. sid's Release file can be past its Valid-Until on a frozen mirror.
root_apt() {  # ROOT ARGS...
  local root=$1; shift
  chroot "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -qq "$@"
}

# Debian's Python packages byte-compile every module they install (py3compile in their postinst):
# minutes of CPU for torch, sympy and numpy, most of it for modules no test imports, while the
# plain tree compiles beside it. In a root, py3compile does nothing: Python compiles what it
# imports, once, and keeps it (ensure's import check below does it for what the interop scripts
# import; PYTHONDONTWRITEBYTECODE, set on some machines, is unset in the root).
skip_byte_compiling() {  # ROOT
  local root=$1
  chroot "$root" dpkg-divert --quiet --local --rename --divert /usr/bin/py3compile.distrib \
    --add /usr/bin/py3compile
  ln -sf /bin/true "$root/usr/bin/py3compile"
}

# A root is a cache, made again when in doubt (its marker is written last): dpkg inside it unpacks
# without an fsync per file (force-unsafe-io), and leaves out documentation, manual pages and
# translations. Written before debootstrap, so that its second stage, which runs dpkg in the root,
# unpacks that way too.
fast_unpacking() {  # ROOT
  mkdir -p "$1/etc/dpkg/dpkg.cfg.d"
  cat >"$1/etc/dpkg/dpkg.cfg.d/dcpp-reference-root" <<'CFG'
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
CFG
}

ensure() {  # SUITE PROFILE
  local suite=$1 profile=${2:-python} root="$roots/$1"
  [[ $profile == python || $profile == build ]] || die "unknown profile '$profile' (python or build)"
  mkdir -p "$roots"
  exec 9>"$roots/$suite.lock"
  flock 9
  # The marker holds the package list it was made with: a root made before a package joined the
  # list gets it installed now.
  local packages
  packages=$(suite_packages "$suite" "$profile")
  if [[ -f $root/.dcpp-ready-$profile && $(cat "$root/.dcpp-ready-$profile") == "$packages" ]]; then
    echo "$root"
    return
  fi
  if [[ ! -f $root/.dcpp-bootstrapped ]]; then
    # `make test` makes two roots side by side: one of them installs debootstrap, the other
    # waits for it (two apt-get at once fail on apt's lock).
    (
      flock 9
      command -v debootstrap >/dev/null || {
        apt-get update -qq &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
      }
    ) 9>"${TMPDIR:-/tmp}/dcpp-reference-roots-apt.lock"
    local mirror
    mirror=$(debian_mirror)
    echo "reference_root.sh: debootstrap $suite into $root from $mirror (once; cached)" >&2
    rm -rf "$root"
    fast_unpacking "$root"
    local components=main
    [[ $suite == *-cuda ]] && components=main,contrib,non-free
    debootstrap --variant=minbase --components="$components" "$(debian_suite "$suite")" "$root" \
      "$mirror" >"$roots/$suite.log" 2>&1 ||
      die "debootstrap $suite failed; see $roots/$suite.log"
    skip_byte_compiling "$root"
    touch "$root/.dcpp-bootstrapped"
  fi
  echo "reference_root.sh: installing the $profile packages into $root" >&2
  [[ $suite == *-cuda ]] && install_cudnn_package_stand_in "$root"
  # The downloaded packages are dropped once installed (2.7 GB of them in the trixie-cuda root).
  { root_apt "$root" update && root_apt "$root" install -y $packages && root_apt "$root" clean; } \
    >>"$roots/$suite.log" 2>&1 || die "apt-get in $root failed; see $roots/$suite.log"
  if [[ $suite == *-cuda ]]; then
    chroot "$root" bash -s <"$(dirname "$0")/cudnn_stand_in.sh" >>"$roots/$suite.log" 2>&1 ||
      die "building the stand-in libcudnn.so.9 in $root failed; see $roots/$suite.log"
  else
    chroot "$root" env -u PYTHONDONTWRITEBYTECODE python3 -c \
      'import torch.distributed.checkpoint, torch.distributed.tensor, torch.distributed.device_mesh' ||
      die "$root has no working torch.distributed.checkpoint"
  fi
  echo "$packages" >"$root/.dcpp-ready-$profile"
  if [[ $profile == build && $suite != *-cuda ]]; then
    suite_packages "$suite" python >"$root/.dcpp-ready-python"
  fi
  echo "$root"
}

run() {  # SUITE [-n RANKS] -- CMD...
  local suite=$1 ranks=1 root="$roots/$1"; shift
  [[ -f $root/.dcpp-ready-python || -f $root/.dcpp-ready-build ]] ||
    die "no $suite root at $root: run '$0 ensure $suite' first"
  if [[ ${1:-} == -n ]]; then ranks=$2; shift 2; fi
  [[ ${1:-} == -- ]] && shift
  (($# > 0)) || die "run: no command"
  local init="file:///tmp/dcpp-ref-store-$$-$RANDOM"
  unshare --mount --propagation private -- bash -c '
    set -e; root=$1 cwd=$2 ranks=$3 init=$4; shift 4
    # The root a mount point of its own, so that `unshare --mount` works inside it too.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm"
    # Pseudo-terminals (dcpp-launch gives each rank'"'"'s stdout one), from a devpts of its own.
    mkdir -p "$root/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" &&
      touch "$root/dev/ptmx" && mount --bind "$root/dev/pts/ptmx" "$root/dev/ptmx" || true
    for d in /tmp "$cwd"; do mkdir -p "$root$d" && mount --bind "$d" "$root$d"; done
    exec chroot "$root" env -u PYTHONDONTWRITEBYTECODE PYTHONWARNINGS=ignore USE_LIBUV=0 bash -c "
      cd \"\$0\"; ranks=\$1 init=\$2; shift 2
      if ((ranks == 1)); then exec \"\$@\"; fi
      rm -f \"\${init#file://}\"; pids=()
      for ((r = 0; r < ranks; r++)); do
        RANK=\$r WORLD_SIZE=\$ranks LOCAL_RANK=\$r DCPP_REF_INIT=\$init \"\$@\" & pids+=(\$!)
      done
      rc=0; for p in \"\${pids[@]}\"; do wait \$p || rc=1; done; exit \$rc" "$cwd" "$ranks" "$init" "$@"
  ' _ "$root" "$PWD" "$ranks" "$init" "$@"
}

[[ ${1:-} == mirror ]] && { debian_mirror; exit; }
(($# >= 2)) || die "usage: $0 ensure|path|run SUITE ... (or: $0 mirror)"
command=$1 suite=$2; shift 2
check_suite "$suite"
case $command in
  ensure) ensure "$suite" "${1:-python}";;
  path) echo "$roots/$suite";;
  run) run "$suite" "$@";;
  *) die "unknown command '$command' (ensure, path or run)";;
esac
