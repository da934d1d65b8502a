#!/bin/bash
# The `dcpp convert` / `dcpp diff` / `dcpp verify` round trips with real PyTorch (docs/interop.md):
# 1. dcpp converts the PyTorch fixtures (torch-save, dcp, safetensors);
# 2. check_cli_conversions.py, in the reference root, checks them with torch.load, DCP and
#    safetensors, and writes PyTorch's own dcp_to_torch_save / torch_save_to_dcp outputs;
# 3. dcpp reads PyTorch's outputs back: they convert, verify and compare equal to the fixtures.
source "$(dirname "$0")/interop_lib.sh"
out=$DCPP_WORK
mkdir -p "$out/dcpp"
for name in single_rank_mixed model_optim_adam two_rank_sharded; do
  "$dcpp" convert "$fixtures_26/$name" "$out/dcpp/$name.pt" --to torch-save
done
"$dcpp" convert "$fixtures_26/torch_save_state_dict.pt" "$out/dcpp/from_pt" --to dcp
"$dcpp" convert "$fixtures_26/single_rank_mixed" "$out/dcpp/single_rank_mixed.safetensors" \
  --to safetensors
"$dcpp" convert "$fixtures_26/single_rank_mixed" "$out/dcpp/sharded.safetensors" --to safetensors \
  --max-shard-size 512

ref_python tests/interop/check_cli_conversions.py "$out" "$fixtures_26"

for name in single_rank_mixed model_optim_adam two_rank_sharded; do
  "$dcpp" diff "$fixtures_26/$name" "$out/python/$name.pt"
  "$dcpp" convert "$out/python/$name.pt" "$out/python/${name}_dcp" --to dcp
  "$dcpp" verify "$out/python/${name}_dcp"
  "$dcpp" diff "$fixtures_26/$name" "$out/python/${name}_dcp"
done
"$dcpp" verify "$out/python/from_pt"
"$dcpp" diff "$fixtures_26/torch_save_state_dict.pt" "$out/python/from_pt"
"$dcpp" diff "$out/dcpp/from_pt" "$out/python/from_pt"
echo "cli_conversions: all checks passed"
