#!/bin/bash
# The dependency bundle of the GPU device run (docs/gpu.md, "On a machine with a GPU"): dcpp's C++
# build dependencies as Debian 12 (bookworm) ships them, unpacked into one relocatable prefix that
# travels with the working tree to a machine that has a compiler, CMake, ninja and PyTorch's wheel
# but none of them, and no package registry.
#
#   bench/gpu/make_bundle.sh [OUT_DIR]        (default: bench/gpu/bundle, git-ignored)
#
# Run on a Debian 12 amd64 machine whose apt knows bookworm's packages; needs apt-get, dpkg-deb and
# readelf (binutils), no root (apt-get download writes into a directory of ours; `apt-get update`
# runs only when a package is unknown, and only as root). Writes OUT_DIR afresh (built beside it,
# then moved into place):
#
#   OUT_DIR/usr/...           the prefix: give OUT_DIR/usr to CMake as CMAKE_PREFIX_PATH, with
#                             CMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu where the machine's
#                             compiler is not Debian's or Ubuntu's (the libraries and CMake
#                             packages are under usr/lib/x86_64-linux-gnu); put
#                             OUT_DIR/usr/lib/x86_64-linux-gnu on LD_LIBRARY_PATH to run what
#                             links them (libcurl's own dependencies are found only that way);
#   OUT_DIR/usr/bin/pkg-config  Debian's pkgconf, runnable from anywhere (PKG_CONFIG_EXECUTABLE);
#   OUT_DIR/gloo/include      Debian's Gloo headers, kept off the prefix: for a libtorch whose
#                             headers lack gloo/ (c10d's ProcessGroupGloo.hpp includes it), added
#                             with -isystem by run_on_device.sh only then;
#   OUT_DIR/MANIFEST          the packages and versions, the size, the newest glibc and libstdc++
#                             symbol versions the libraries need.
#
# What is in it: the -dev packages of spdlog (and fmt), TBB, Catch2, CLI11, nlohmann-json,
# libdeflate, zlib, zstd, libcurl (OpenSSL flavour), OpenSSL, pugixml and ISA-L, and pkgconf, with
# every library they depend on, recursively (Debian's Depends), but what every glibc system has:
# libc6, libstdc++6, libgcc-s1 (and gcc-12-base, libcrypt1, libc6-dev, which come with them). The
# S3 driver's dependencies (curl, OpenSSL, pugixml, ISA-L) are in it: dcpp's storage room names
# them unconditionally, so no dcpp library links without them. Two packages are left out that
# nothing links: libsasl2-modules-db and libdb5.3 (SASL's plugin database, opened by plugins only).
# zlib1g is kept (120 KB): zlib1g-dev's libz.so points at it.
# Fix-ups: documentation, manual pages, translations and static libraries that no CMake package
# names are dropped; libraries under lib/ move to usr/lib/; absolute symbolic links become
# relative; the multiarch headers (usr/include/x86_64-linux-gnu: curl's, OpenSSL's configuration)
# are linked into usr/include, where any compiler looks once the prefix is given; pkg-config files
# say their prefix relative to themselves (${pcfiledir}). CMake's own package files are
# relocatable as Debian ships them (they compute their prefix from their own place).
# The script checks its result and fails if a symbolic link dangles or points outside, if a
# library needs one that is neither in the bundle nor glibc's or GCC's, or if a package file still
# names /usr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/bundle}
triplet=x86_64-linux-gnu
die() { echo "make_bundle.sh: $*" >&2; exit 1; }

# The -dev packages dcpp's CMake configuration finds (CMakeLists.txt, core/, storage/, bench/,
# tests/), and pkgconf for FindPkgConfig. libgloo-dev is taken apart below (its headers only).
dev_packages="libspdlog-dev libfmt-dev libtbb-dev catch2 libcli11-dev nlohmann-json3-dev libdeflate-dev
zlib1g-dev libzstd-dev libcurl4-openssl-dev libssl-dev libpugixml-dev libisal-dev pkgconf-bin"
# What the closure does not follow: present on every glibc system, or (the last two) never linked.
skip_packages=" libc6 libc6-dev libgcc-s1 libstdc++6 gcc-12-base libcrypt1 libsasl2-modules-db libdb5.3 "
# Sonames a library may need that the bundle need not hold: glibc's and GCC's runtime.
base_sonames=" ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 \
libresolv.so.2 libutil.so.1 libanl.so.1 libstdc++.so.6 libgcc_s.so.1 "

for tool in apt-get apt-cache dpkg-deb readelf; do
  command -v "$tool" >/dev/null || die "needs $tool (Debian's apt, dpkg and binutils)"
done
[[ $(dpkg --print-architecture) == amd64 ]] || die "run on an amd64 Debian 12 machine: the device is x86-64"
# shellcheck disable=SC1091
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ $codename == bookworm ]] ||
  die "this machine is '$codename', not Debian 12 (bookworm): the bundle is bookworm's packages"

# Debian's Depends of PACKAGES..., recursively, first alternative of each, less skip_packages.
closure() {
  local -A seen=()
  local queue=("$@") package dependency
  while ((${#queue[@]})); do
    package=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${seen[$package]:-} || $skip_packages == *" $package "* ]] && continue
    seen[$package]=1
    # "|Depends: a" then "Depends: b" for "a | b": only the first is followed; virtual <names> not.
    while read -r dependency; do
      queue+=("$dependency")
    done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "$package" |
      awk '/^ *(\|)?(Pre)?Depends:/ { if (!alt) print $2; alt = ($1 ~ /^\|/) }' | grep -v '^<' || true)
  done
  printf '%s\n' "${!seen[@]}" | sort
}

# shellcheck disable=SC2086
if ! apt-cache show $dev_packages libgloo-dev >/dev/null 2>&1; then
  ((EUID == 0)) || die "apt does not know all of: $dev_packages libgloo-dev; run apt-get update as root"
  apt-get update -qq
fi
# shellcheck disable=SC2086
mapfile -t packages < <(closure $dev_packages)

work=$(mktemp -d "${TMPDIR:-/tmp}/dcpp-gpu-bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/gloo-deb"
# apt-get download as root warns that its _apt user cannot write into our private directory, and
# downloads as root instead: that warning is dropped.
download() {  # DIR PACKAGE...
  local dir=$1
  shift
  if ! (cd "$dir" && apt-get download -qq "$@" 2>&1 | { grep -v 'unsandboxed as root' || true; } >&2) ||
    (($(find "$dir" -name '*.deb' | wc -l) != $#)); then
    die "apt-get download of $* failed"
  fi
}
download "$work/debs" "${packages[@]}"
download "$work/gloo-deb" libgloo-dev

prefix=$work/bundle
mkdir -p "$prefix"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
dpkg-deb -x "$work"/gloo-deb/*.deb "$work/gloo-pkg"
mkdir -p "$prefix/gloo/include"
cp -a "$work/gloo-pkg/usr/include/gloo" "$prefix/gloo/include/"

# Libraries that Debian 12 still installs under /lib (not merged into /usr there) join usr/lib.
if [[ -d $prefix/lib ]]; then
  cp -a "$prefix/lib/." "$prefix/usr/lib/"
  rm -rf "${prefix:?}/lib"
fi
rm -rf "${prefix:?}/etc" "$prefix/usr/share/doc" "$prefix/usr/share/man" "$prefix/usr/share/info" \
  "$prefix/usr/share/locale" "$prefix/usr/share/lintian" "$prefix/usr/share/aclocal" \
  "$prefix/usr/share/bug"
find "$prefix/usr/bin" -mindepth 1 ! -name pkgconf -exec rm -rf {} +
# Static libraries only where a CMake package names them (its import check fails without them).
referenced=$(grep -rhoE '_IMPORT_PREFIX\}/[^"]*\.a' "$prefix/usr/lib" "$prefix/usr/share" | sed 's|.*}/||' || true)
while IFS= read -r archive; do
  relative=${archive#"$prefix/usr/"}
  grep -qxF "$relative" <<<"$referenced" || rm -f "$archive"
done < <(find "$prefix/usr" -name '*.a')

# Absolute symbolic links (zlib1g-dev's libz.so -> /lib/...) made relative, into the prefix.
while IFS= read -r link; do
  target=$(readlink "$link")
  target=${target#/}
  target=${target/#lib\//usr/lib/}
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$prefix/$target")" "$link"
done < <(find "$prefix" -type l -lname '/*')

# Multiarch headers, where a compiler that is not Debian's (or has no such directory) finds them.
if [[ -d $prefix/usr/include/$triplet ]]; then
  while IFS= read -r header; do
    relative=${header#"$prefix/usr/include/$triplet/"}
    [[ -e $prefix/usr/include/$relative ]] && continue
    mkdir -p "$(dirname "$prefix/usr/include/$relative")"
    ln -s "$(realpath -m --relative-to="$(dirname "$prefix/usr/include/$relative")" "$header")" \
      "$prefix/usr/include/$relative"
  done < <(find "$prefix/usr/include/$triplet" -type f)
fi

# pkg-config files: /usr made relative to the file (${pcfiledir}), and zstd's libdir, which says
# lib/ where the library is in lib/x86_64-linux-gnu/.
for pc in "$prefix"/usr/lib/"$triplet"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc \
  "$prefix"/usr/lib/pkgconfig/*.pc; do
  [[ -f $pc ]] || continue
  up=$(realpath -m --relative-to="$(dirname "$pc")" "$prefix/usr")
  sed -i -E -e "s#^([A-Za-z_][A-Za-z0-9_.]*)=/usr(/|\$)#\1=\${dcpp_bundle_usr}\2#" \
    -e "s#^(libdir=\\$\\{(exec_)?prefix\\}/lib)\$#\1/$triplet#" "$pc"
  sed -i "1i dcpp_bundle_usr=\${pcfiledir}/$up" "$pc"
done
[[ -d $prefix/usr/lib/$triplet/pkgconfig ]] || die "no pkg-config files: did dpkg-deb -x unpack?"

# pkg-config that runs from the bundle: Debian's pkgconf with its libpkgconf beside it.
cat >"$prefix/usr/bin/pkg-config" <<'WRAPPER'
#!/bin/sh
# Debian 12's pkgconf, run from the bundle (bench/gpu/make_bundle.sh) with its library beside it.
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/../lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  exec "$here/pkgconf" "$@"
WRAPPER
chmod +x "$prefix/usr/bin/pkg-config"

# Checks.
problems=()
while IFS= read -r link; do problems+=("dangling link: ${link#"$prefix/"}"); done \
  < <(find "$prefix" -xtype l)
while IFS= read -r link; do problems+=("absolute link: ${link#"$prefix/"}"); done \
  < <(find "$prefix" -type l -lname '/*')
libdir=$prefix/usr/lib/$triplet
declare -A have=()
for file in "$libdir"/*.so* "$prefix"/usr/lib/*.so*; do
  [[ -e $file ]] && have[$(basename "$file")]=1
done
glibc_max=0 glibcxx_max=0
while IFS= read -r elf; do
  readelf -h "$elf" >/dev/null 2>&1 || continue
  while IFS= read -r needed; do
    [[ -n ${have[$needed]:-} || $base_sonames == *" $needed "* ]] ||
      problems+=("${elf#"$prefix/"} needs $needed, which is neither in the bundle nor glibc's or GCC's")
  done < <(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  while IFS= read -r version; do
    case $version in
      GLIBC_*) [[ $(printf '%s\n%s\n' "$glibc_max" "${version#GLIBC_}" | sort -V | tail -1) == "$glibc_max" ]] ||
        glibc_max=${version#GLIBC_};;
      GLIBCXX_*) [[ $(printf '%s\n%s\n' "$glibcxx_max" "${version#GLIBCXX_}" | sort -V | tail -1) == "$glibcxx_max" ]] ||
        glibcxx_max=${version#GLIBCXX_};;
    esac
  done < <(readelf -V "$elf" | grep -oE 'Name: GLIBC(XX)?_[0-9.]+' | sed 's/Name: //' | sort -u)
done < <(find "$prefix/usr/lib" "$prefix/usr/bin" -type f \( -name '*.so*' -o -name pkgconf \))
while IFS= read -r file; do
  problems+=("still names /usr: ${file#"$prefix/"}")
done < <(grep -lE '^[^#]*[=" ]/usr/(lib|include)' "$libdir"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc || true)
if ((${#problems[@]})); then
  printf 'make_bundle.sh: %s\n' "${problems[@]}" >&2
  die "${#problems[@]} problems; the bundle is not written"
fi

size=$(du -sb "$prefix" | cut -f1)
{
  echo "dcpp GPU dependency bundle, made $(date -u +%Y-%m-%dT%H:%MZ) by bench/gpu/make_bundle.sh"
  echo "from: Debian 12 (bookworm) packages, $(dpkg --print-architecture)"
  echo "size: $size bytes"
  echo "newest symbol versions needed: GLIBC_$glibc_max, GLIBCXX_$glibcxx_max"
  echo "packages:"
  for deb in "$work"/debs/*.deb "$work"/gloo-deb/*.deb; do
    dpkg-deb -f "$deb" Package Version | paste -sd' ' | sed 's/^Package: /  /; s/ Version: / /'
  done
} >"$prefix/MANIFEST"

rm -rf "$out.new"
mv "$prefix" "$out.new"
rm -rf "$out"
mv "$out.new" "$out"
echo "make_bundle.sh: wrote $out ($((size / 1024 / 1024)) MiB, ${#packages[@]} packages + libgloo-dev's headers;" \
  "needs GLIBC_$glibc_max, GLIBCXX_$glibcxx_max)"
