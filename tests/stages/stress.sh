#!/bin/bash
# Runs tests again and again while other work loads every core: what shows a test that depends on
# timing (a rank that exits early, a closing collective, a timeout too near the test's length).
#
#   stress.sh BUILD_DIR TIMES [CTEST_REGEX]
#
# Runs `ctest -R CTEST_REGEX --repeat until-fail:TIMES -j<cores>` in BUILD_DIR beside
# `stress-ng --cpu <cores>` (Debian's stress-ng, installed when missing), and prints how long it
# took. CTEST_REGEX defaults to the tests that start several processes or a server, and the
# interop tests (docs/reliability.md, "Flaky tests").
set -euo pipefail

(($# >= 2)) || { echo "usage: $0 BUILD_DIR TIMES [CTEST_REGEX]" >&2; exit 2; }
build=$1 times=$2
regex=${3:-'^(distributed|reshard|parallel|faults):|^async:multi_rank|^plugin:(multi_rank|remote_tier)|^storage:(s3_driver|conformance)|^reshard\.|^reliability\.crash_consistency|^interop\.'}
cores=$(nproc)

if ! command -v stress-ng >/dev/null; then
  sudo=; ((EUID == 0)) || sudo=sudo
  $sudo apt-get install -y -qq stress-ng >/dev/null
fi
stress-ng --cpu "$cores" --quiet &
stress=$!
trap 'kill $stress 2>/dev/null || true' EXIT

start=$(date +%s)
rc=0
(cd "$build" && ctest --output-on-failure -j"$cores" -R "$regex" --repeat until-fail:"$times") || rc=$?
echo "stress.sh: $times runs of '$regex' beside stress-ng --cpu $cores: exit $rc in $(($(date +%s) - start)) s"
exit $rc
