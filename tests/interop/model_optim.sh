#!/bin/bash
# A libtorch model and Adam saved by dcpp resume in Python (dcp.load into get_state_dict's target,
# set_state_dict) with the same losses.
source "$(dirname "$0")/interop_lib.sh"
DCPP_INTEROP_OUT=$DCPP_WORK "$DCPP_BUILD/tests/dcpp_state_dict_tests" "[.interop]"
ref_python tests/interop/check_dcpp_model_optim.py "$DCPP_WORK"
