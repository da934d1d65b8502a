#!/bin/bash
# Runs `make` targets as the stages of a test run, timing each: prints a stage's wall time as it
# ends and a table of all of them at the end, so a stage that got slower shows on the run that made
# it so (docs/reliability.md, "Cost in CI").
#
#   run_stages.sh [-C DIR] STAGE...
#
# A STAGE is a make target, run as `$MAKE TARGET` (MAKE from the environment, else make). Written
# `TARGET&`, it starts in the background, its output kept in $STAGE_LOG_DIR/TARGET.log and shown
# when it ends; the following stages start at once. A stage that needs what a background stage
# makes waits for it through that target's own lock (reference_root.sh's); the background gains
# only where that work waits on the network or the disk. A failed stage does not stop the others
# (each stage is its own build directory or check); the run fails if any stage failed.
set -uo pipefail

if [[ ${1:-} == -C ]]; then cd "$2" || exit 2; shift 2; fi
(($# > 0)) || { echo "usage: $0 [-C DIR] STAGE..." >&2; exit 2; }
make_command=${MAKE:-make}
log_dir=${STAGE_LOG_DIR:-build/stages}
mkdir -p "$log_dir"

run_start=$(date +%s)
names=() results=() walls=() starts=()
declare -A background_pid background_index

seconds() {  # SECONDS -> "M min S s"
  local s=$1
  if ((s >= 60)); then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

finish() {  # INDEX RC END
  local index=$1 rc=$2 end=$3 result=passed
  ((rc == 0)) || result="FAILED (exit $rc)"
  results[index]=$result
  walls[index]=$((end - starts[index]))
  printf '==> stage %s: %s in %s (at %s of the run)\n' "${names[index]}" "$result" \
    "$(seconds "${walls[index]}")" "$(seconds $((end - run_start)))"
}

wait_background() {  # TARGET
  local target=$1 index=${background_index[$1]} rc=0
  wait "${background_pid[$target]}" || rc=$?
  echo "==> output of background stage $target ($log_dir/$target.log):"
  sed 's/^/    /' "$log_dir/$target.log"
  finish "$index" "$rc" "$(cat "$log_dir/$target.end")"
  unset "background_pid[$target]"
}

for stage in "$@"; do
  target=${stage%&}
  index=${#names[@]}
  names+=("$target") results+=("") walls+=(0) starts+=("$(date +%s)")
  if [[ $stage == *'&' ]]; then
    echo "==> stage $target: started in the background ($log_dir/$target.log)"
    rm -f "$log_dir/$target.end"  # a previous run's would report this one as ended
    ( $make_command "$target" >"$log_dir/$target.log" 2>&1; rc=$?
      date +%s >"$log_dir/$target.end"; exit $rc ) &
    background_pid[$target]=$!
    background_index[$target]=$index
    continue
  fi
  echo "==> stage $target: started"
  rc=0
  $make_command "$target" || rc=$?
  finish "$index" "$rc" "$(date +%s)"
  # Background stages that ended meanwhile report now, not at the very end.
  for pending in "${!background_pid[@]}"; do
    [[ -f $log_dir/$pending.end ]] && wait_background "$pending"
  done
done
for pending in "${!background_pid[@]}"; do wait_background "$pending"; done

total=$(($(date +%s) - run_start))
failed=0
echo
echo "Stages (wall time; background stages overlap the ones after them):"
printf '  %-22s %12s  %s\n' stage "wall time" result
for i in "${!names[@]}"; do
  printf '  %-22s %12s  %s\n' "${names[i]}" "$(seconds "${walls[i]}")" "${results[i]}"
  [[ ${results[i]} == passed ]] || failed=1
done
printf '  %-22s %12s  %s\n' "whole run" "$(seconds "$total")" "$( ((failed)) && echo FAILED || echo passed)"
exit $failed
