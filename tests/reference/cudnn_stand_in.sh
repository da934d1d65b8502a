#!/bin/bash
# Run inside the trixie-cuda reference root (reference_root.sh): builds the stand-in libcudnn.so.9
# that Debian's libtorch_cuda.so links against, from the cudnn* symbols it references. Every
# function returns CUDNN_STATUS_NOT_INITIALIZED (1001), but the version queries (0) and
# cudnnGetErrorString (a message that names the stand-in). dcpp never calls cuDNN; libtorch calls it
# for convolutions and RNNs on a GPU, which no test of this root has.
set -euo pipefail
libdir=/usr/lib/x86_64-linux-gnu
torch_cuda=$libdir/libtorch_cuda.so
[[ -f $torch_cuda ]] || { echo "cudnn_stand_in.sh: no $torch_cuda" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each reference is versioned (cudnnCreate@libcudnn.so.9): the library defines them under that
# version node, or the loader refuses libtorch_cuda.so.
references=$(nm -D --undefined-only "$torch_cuda" | awk '{print $NF}' | grep '^cudnn' | sort -u)
symbols=$(sed 's/@.*//' <<<"$references" | sort -u)
versions=$(grep '@' <<<"$references" | sed 's/^[^@]*@*//' | sort -u || true)
[[ -n $symbols ]] || { echo "cudnn_stand_in.sh: $torch_cuda references no cudnn* symbol" >&2; exit 1; }
for version in ${versions:-libcudnn.so.9}; do
  echo "$version { global: cudnn*; };"
done >"$work/cudnn_stand_in.map"
{
  echo '#include <stddef.h>'
  for symbol in $symbols; do
    case $symbol in
      cudnnGetErrorString)
        echo 'const char* cudnnGetErrorString(int status) { (void)status;'
        echo '  return "cuDNN is not available (dcpp reference root: a stand-in libcudnn.so.9)"; }';;
      cudnnGetVersion|cudnnGetCudartVersion|cudnnGetMaxDeviceVersion)
        echo "size_t $symbol(void) { return 0; }";;
      *) echo "int $symbol(void) { return 1001; }";;
    esac
  done
} >"$work/cudnn_stand_in.c"
gcc -shared -fPIC -O1 -Wl,-soname,libcudnn.so.9 -Wl,--version-script,"$work/cudnn_stand_in.map" \
  -o "$libdir/libcudnn.so.9" "$work/cudnn_stand_in.c"
ln -sf libcudnn.so.9 "$libdir/libcudnn.so"
ldconfig
echo "cudnn_stand_in.sh: $libdir/libcudnn.so.9 stands in for cuDNN ($(wc -w <<<"$symbols") symbols)"
