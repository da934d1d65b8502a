#!/bin/bash
# dcpp writes every dtype and value kind (write_checkpoints.cpp); Python loads it with
# _load_state_dict_from_keys and with dcp.load in place, and checks every value.
source "$(dirname "$0")/interop_lib.sh"
"$DCPP_BUILD/tests/dcpp_interop_writer" "$DCPP_WORK"
ref_python tests/interop/check_dcpp_checkpoints.py "$DCPP_WORK"
