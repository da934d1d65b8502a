#!/bin/bash
# Checkpoints saved without collectives (`__<rank>.metadata` per rank, no `.metadata`), both ways
# with PyTorch 2.14 (2.6 has no use_collectives), on 3 ranks each (check_per_rank.py):
# (a) dcpp saves from 3 ranks without collectives (and, to compare, with); Python's dcp.load on 3
#     ranks, each reading its own __<rank>.metadata, checks every value exactly.
# (b) Python saves with use_collectives=False on 3 ranks (and torch.save's the full values);
#     dcpp verifies it, compares its whole load with Python's values bit for bit (dcpp diff), loads
#     it resharded on 2 and 1 ranks (equal to the whole load), inspects and converts it.
source "$(dirname "$0")/interop_lib.sh"
worker=$DCPP_BUILD/tests/dcpp_reshard_worker
out=$DCPP_WORK

"$dcpp_launch" --fork -n 3 -- "$worker" save-local "$out/from_dcpp" chunk
"$dcpp_launch" --fork -n 3 -- "$worker" save "$out/from_dcpp_collective" chunk
"$dcpp" verify "$out/from_dcpp"
ref_python -n 3 tests/interop/check_per_rank.py load "$out/from_dcpp" "$out/from_dcpp_collective"

mkdir -p "$out/from_python"
ref_python -n 3 tests/interop/check_per_rank.py save "$out/from_python"
ckpt=$out/from_python/ckpt
"$dcpp" verify "$ckpt"
"$dcpp" diff "$out/from_python/ref.pt" "$ckpt"
for ranks in 2 1; do
  "$dcpp_launch" --fork -n "$ranks" -- "$worker" fixture "$ckpt" row
done
"$dcpp_launch" --fork -n 2 -- "$worker" fixture "$ckpt" col
"$dcpp" inspect --json --stats "$ckpt" > "$out/inspect.json"
"$dcpp" convert "$ckpt" "$out/from_python.pt" --to torch-save
"$dcpp" diff "$out/from_python/ref.pt" "$out/from_python.pt"
echo "per_rank: all checks passed"
