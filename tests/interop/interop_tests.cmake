# Interop tests: dcpp against real PyTorch, run in the reference roots that
# tests/reference/reference_root.sh makes (docs/interop.md). Each is a script
# tests/interop/<name>.sh run once per suite as `interop.<suite>.<name>`, labelled "interop":
# `make test-interop` makes the roots and runs them; the plain stage leaves them out.

set(DCPP_INTEROP_DIR ${CMAKE_CURRENT_LIST_DIR})
set(DCPP_INTEROP_SUITES trixie sid CACHE STRING "Reference roots the interop tests run against")

# dcpp_interop_test(<name> [SUITES suite...] [TIMEOUT seconds]): the script's environment is
# interop_lib.sh's. The timeout (default 180 s) is about three times the test's length on two busy
# cores (docs/reliability.md, "Flaky tests").
function(dcpp_interop_test name)
  cmake_parse_arguments(arg "" "TIMEOUT" "SUITES" ${ARGN})
  if(NOT arg_SUITES)
    set(arg_SUITES ${DCPP_INTEROP_SUITES})
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 180)
  endif()
  foreach(suite IN LISTS arg_SUITES)
    set(test interop.${suite}.${name})
    add_test(NAME ${test} COMMAND bash ${DCPP_INTEROP_DIR}/${name}.sh)
    set_tests_properties(${test} PROPERTIES
      LABELS interop TIMEOUT ${arg_TIMEOUT} SKIP_RETURN_CODE 77
      ENVIRONMENT "DCPP_REF_SUITE=${suite};DCPP_SOURCE=${PROJECT_SOURCE_DIR};DCPP_BUILD=${CMAKE_BINARY_DIR};DCPP_WORK=${CMAKE_BINARY_DIR}/interop/${suite}/${name}")
  endforeach()
endfunction()

dcpp_interop_test(dcpp_checkpoints)  # every dtype and value kind, dcpp -> Python
dcpp_interop_test(pickles)           # data.pkl and .metadata pickles, both ways
dcpp_interop_test(sharded)           # 3 dcpp ranks -> 2 Python ranks with DTensors
dcpp_interop_test(mesh)              # tensor x data parallel 2 x 2 -> DTensors on a 2-D mesh
dcpp_interop_test(model_optim)       # a libtorch model and Adam resume in Python
dcpp_interop_test(cli_conversions)   # dcpp convert / diff / verify against format_utils
dcpp_interop_test(optimizers)        # SGD, Adam, AdamW, Adagrad, RMSprop, LBFGS both ways
dcpp_interop_test(zstd SUITES sid TIMEOUT 240)  # zstd items both ways; PyTorch's SAFETENSORS items read
dcpp_interop_test(huggingface SUITES sid TIMEOUT 300)  # Hugging Face directories, both ways (safetensors)
dcpp_interop_test(per_rank SUITES sid)  # use_collectives=False both ways (PyTorch 2.6 lacks it)
