#!/bin/bash
# dcpp saves from 3 ranks with uneven row shards and a replicated tensor; Python loads it on 2
# ranks into DTensor targets with dcp.load.
source "$(dirname "$0")/interop_lib.sh"
"$dcpp_launch" --fork -n 3 -- "$DCPP_BUILD/tests/dcpp_reshard_worker" save "$DCPP_WORK/sharded" uneven
ref_python -n 2 tests/interop/check_dcpp_sharded.py "$DCPP_WORK/sharded"
