#!/bin/bash
# dcpp trains an MLP as 2-way tensor parallel x 2-way data parallel on a DeviceMesh and saves it;
# Python loads it on a 2 x 2 init_device_mesh into DTensors (Shard(0), Shard(1), Replicate).
source "$(dirname "$0")/interop_lib.sh"
"$dcpp_launch" --fork -n 4 -- "$DCPP_BUILD/tests/dcpp_train_worker" mlp-f64 tp2dp2 save 3 \
  "$DCPP_WORK/ckpt" "$DCPP_WORK/result"
ref_python -n 4 tests/interop/check_dcpp_mesh.py "$DCPP_WORK/ckpt/mlp-f64" "$DCPP_WORK/result/mlp-f64"
