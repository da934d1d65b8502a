#!/bin/bash
# Every libtorch optimizer dcpp knows (SGD, Adam, AdamW, Adagrad, RMSprop, LBFGS), both ways with
# this suite's PyTorch, strict loads, the same losses (tests/interop/optimizers.py):
#   libtorch -> Python: dcpp_state_dict_tests writes each trained optimizer with get_state_dict;
#                       Python resumes it with dcp.load into get_state_dict's target and
#                       set_state_dict (and once more from the whole checkpoint).
#   Python -> libtorch: Python writes each with dcp.save(get_state_dict(...)); dcpp resumes it
#                       through make_optimizer_stateful.
source "$(dirname "$0")/interop_lib.sh"
tests=$DCPP_BUILD/tests/dcpp_state_dict_tests
DCPP_INTEROP_OUT=$DCPP_WORK/from_libtorch "$tests" "[.optimizer_interop_write]"
ref_python tests/interop/optimizers.py check "$DCPP_WORK/from_libtorch"
ref_python tests/interop/optimizers.py write "$DCPP_WORK/from_python"
status=0
DCPP_INTEROP_IN=$DCPP_WORK/from_python "$tests" "[.optimizer_interop_read]" || status=$?
cat "$DCPP_WORK/from_python/resumed.txt"   # what the test compared, one line per loss
exit $status
