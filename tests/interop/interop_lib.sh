# Sourced by every interop test script (tests/interop/*.sh). ctest runs them (interop_tests.cmake)
# with DCPP_REF_SUITE (the reference root: trixie = PyTorch 2.6, sid = the newest Debian PyTorch),
# DCPP_SOURCE (the repository), DCPP_BUILD (the build directory) and DCPP_WORK (a scratch
# directory of this test and suite, emptied here). The script's working directory is DCPP_SOURCE.
#
# Gives: ref_python [-n RANKS] SCRIPT ARGS...   Python in the reference root (with -n, RANKS
#                                               processes with RANK, WORLD_SIZE, DCPP_REF_INIT set)
#        $dcpp, $dcpp_launch                    the command line and the launcher of this build
#        $fixtures_26, $fixtures_214            PyTorch's fixture checkpoints
# A missing reference root skips the test (exit 77): `make reference-roots` makes them, and
# `make test` always does before running these.
set -euo pipefail
: "${DCPP_REF_SUITE:?}" "${DCPP_SOURCE:?}" "${DCPP_BUILD:?}" "${DCPP_WORK:?}"
cd "$DCPP_SOURCE"
reference_root="$DCPP_SOURCE/tests/reference/reference_root.sh"
if [[ ! -f $("$reference_root" path "$DCPP_REF_SUITE")/.dcpp-ready-python ]]; then
  echo "no $DCPP_REF_SUITE reference root: run 'make reference-roots' (skipped)"
  exit 77
fi
rm -rf "$DCPP_WORK" && mkdir -p "$DCPP_WORK"
dcpp=$DCPP_BUILD/tools/dcpp
dcpp_launch=$DCPP_BUILD/tools/dcpp-launch
fixtures_26=$DCPP_SOURCE/tests/fixtures/pytorch-2.6
fixtures_214=$DCPP_SOURCE/tests/fixtures/pytorch-2.14

ref_python() {
  local ranks=()
  if [[ $1 == -n ]]; then ranks=(-n "$2"); shift 2; fi
  "$reference_root" run "$DCPP_REF_SUITE" "${ranks[@]}" -- python3 "$@"
}
