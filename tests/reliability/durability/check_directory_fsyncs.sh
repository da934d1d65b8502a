#!/bin/bash
# A plain save into a directory it creates (two levels: run/ckpt) must, after committing .metadata,
# fsync the checkpoint directory and then every directory whose entries it changed by creating:
# ckpt's parent run/, and run's parent (docs/format.md, "Commit order").
# Usage: check_directory_fsyncs.sh SAVE_INTO FSYNC_RECORDER_SO
set -euo pipefail
save_into=$1 recorder=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/fsyncs.log
DCPP_FSYNC_LOG=$log LD_PRELOAD=$recorder "$save_into" "$work/run/ckpt"
[ -f "$work/run/ckpt/.metadata" ] || { echo "no .metadata: the save failed"; exit 1; }
echo "fsync'd, in order:"; sed "s|$work|<work>|" "$log"
# What comes after the last fsync of .metadata, whose rename is the commit.
last_metadata=$(grep -n "/ckpt/\.metadata" "$log" | tail -1 | cut -d: -f1)
[ -n "$last_metadata" ] || { echo "FAIL: .metadata was never fsync'd"; exit 1; }
after=$(tail -n +"$((last_metadata + 1))" "$log")
status=0
for directory in "$work/run/ckpt" "$work/run" "$work"; do
  if ! grep -qx "$directory" <<<"$after"; then
    echo "FAIL: ${directory/$work/<work>} was not fsync'd after the commit"
    status=1
  fi
done
exit $status
