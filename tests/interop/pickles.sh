#!/bin/bash
# dcpp's data.pkl and .metadata pickles against Python's pickle, torch.save and DCP's classes.
source "$(dirname "$0")/interop_lib.sh"
DCPP_INTEROP_OUT=$DCPP_WORK "$DCPP_BUILD/tests/dcpp_checkpoint_tests" "[.interop]"
ref_python tests/interop/check_pickles.py "$DCPP_WORK" "$fixtures_26"
