#!/bin/bash
# PyTorch 2.14's item formats, both ways (docs/format.md):
# 1. dcpp writes zstd-compressed checkpoints (every dtype and value kind with dcpp_interop_writer
#    --zstd, and `dcpp convert --to dcp --compress zstd` of the 2.14 fixtures); PyTorch's dcp.load
#    reads them and every value is checked (check_dcpp_checkpoints.py, check_zstd.py);
# 2. PyTorch writes a fresh zstd checkpoint and a SAFETENSORS-format one
#    (write_zstd_safetensors.py); dcpp verifies them, compares them with PyTorch's torch.save of
#    the same state dict, and converts them.
source "$(dirname "$0")/interop_lib.sh"
out=$DCPP_WORK

"$DCPP_BUILD/tests/dcpp_interop_writer" "$out/writer" --zstd
ref_python tests/interop/check_dcpp_checkpoints.py "$out/writer"

mkdir -p "$out/dcpp"
for name in zstd_single safetensors_format single_rank_mixed model_optim_adam; do
  "$dcpp" convert "$fixtures_214/$name" "$out/dcpp/$name" --to dcp --compress zstd
  "$dcpp" verify "$out/dcpp/$name"
done
ref_python tests/interop/check_zstd.py "$out" "$fixtures_214"

ref_python tests/interop/write_zstd_safetensors.py "$out/python"
for format in zstd safetensors; do
  "$dcpp" verify "$out/python/$format"
  "$dcpp" diff "$out/python/$format" "$out/python/reference.pt"
  "$dcpp" inspect --stats "$out/python/$format" > "$out/python/$format.inspect"
  "$dcpp" convert "$out/python/$format" "$out/python/$format.pt" --to torch-save
  "$dcpp" diff "$out/python/$format.pt" "$out/python/reference.pt"
  "$dcpp" convert "$out/python/$format" "$out/python/${format}_dcpp" --to dcp --compress zstd
  "$dcpp" diff "$out/python/${format}_dcpp" "$out/python/reference.pt"
done
echo "zstd: all checks passed"
