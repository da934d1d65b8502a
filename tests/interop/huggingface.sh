#!/bin/bash
# Hugging Face directories both ways, against PyTorch 2.14 and the safetensors library:
#  dcpp -> Python: dcpp's writer on 3 ranks (row shards) and on 2 (column shards), every rank
#    writing into the consolidated files, and `dcpp convert --to hf`; Python reads them with
#    safetensors (load_file, safe_open) and with dcp.load(HuggingFaceStorageReader), exactly.
#  Python -> dcpp: HuggingFaceStorageWriter in one file, with fqn_to_index_mapping over 2 files,
#    and save_distributed + enable_consolidation on 2 ranks; dcpp loads each resharded on 2 ranks
#    (and the unconsolidated shard files too), checking every element, and verifies them.
source "$(dirname "$0")/interop_lib.sh"
worker=$DCPP_BUILD/tests/dcpp_reshard_worker
W=$DCPP_WORK

echo "== dcpp -> Python"
"$dcpp_launch" --fork -n 3 -- "$worker" hf-save "$W/dcpp_rows" row
ref_python tests/interop/check_dcpp_huggingface.py "$W/dcpp_rows" worker
"$dcpp_launch" --fork -n 2 -- "$worker" hf-save "$W/dcpp_cols" col
ref_python tests/interop/check_dcpp_huggingface.py "$W/dcpp_cols" worker
"$dcpp" convert "$fixtures_26/two_rank_sharded" "$W/converted" --to hf --max-shard-size 300
ref_python tests/interop/check_dcpp_huggingface.py "$W/converted" dcp "$fixtures_26/two_rank_sharded"

echo "== Python -> dcpp"
ref_python tests/interop/write_python_huggingface.py "$W/py" single
ref_python tests/interop/write_python_huggingface.py "$W/py" mapped
ref_python -n 2 tests/interop/write_python_huggingface.py "$W/py" dist
for dir in single mapped dist dist/sharded; do
  echo "-- dcpp loads Python's $dir on 2 ranks (columns) and 3 ranks (rows)"
  only=""
  [[ $dir == dist* ]] && only=":floats"  # see write_python_huggingface.py
  "$dcpp_launch" --fork -n 2 -- "$worker" hf-load "$W/py/$dir" "col$only"
  "$dcpp_launch" --fork -n 3 -- "$worker" hf-load "$W/py/$dir" "row$only"
  "$dcpp" verify "$W/py/$dir"
done
"$dcpp" inspect "$W/py/mapped"
echo "huggingface interop: all checks passed"
