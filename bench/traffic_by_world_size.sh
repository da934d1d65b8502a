#!/bin/bash
# The job's checkpoint traffic per save as the world grows (docs/performance.md, "The traffic of a
# whole save as the world grows"): 20,000 tensors split over N ranks, N = 2, 4, 8, 16, with the
# Metadata returned on the coordinator only (the default) and on every rank (DCP's behaviour, the
# baseline, in the same run). Run from the repository root after `make build`.
set -euo pipefail
build=${BUILD_DIR:-build}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for n in 2 4 8 16; do
  for flag in "" --metadata-everywhere; do
    "$build/tools/dcpp-launch" -n "$n" -- "$build/bench/metadata_bench" --tensors 20000 $flag \
      --dir "$scratch/$n" 2>&1 | grep -E "all [0-9]+ ranks"
  done
done
