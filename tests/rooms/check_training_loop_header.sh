#!/bin/sh
# <dcpp/dcpp.h> is what a training loop reads (docs/design.md, "Tiers"): the headers it includes,
# directly or through others, hold no extension point of <dcpp/extend.h> (planners, storage
# readers and writers, drivers and layouts, optimizer codecs). Those an option names are declared
# ahead instead.
# check_training_loop_header.sh SOURCE_DIR GENERATED_INCLUDE_DIR (where dcpp/version.h is made)
# Prints the headers dcpp.h reaches and their lines; exits 1, naming each, on a forbidden one.
set -eu
source_dir=$1
generated_dir=$2

# The public header `dcpp/...` as a file, from the include/ folder of whichever room has it.
header_file() {
  for include_dir in "$source_dir"/include "$source_dir"/*/include "$generated_dir"; do
    if [ -f "$include_dir/$1" ]; then echo "$include_dir/$1"; return; fi
  done
}

reached=""
pending="dcpp/dcpp.h"
while [ -n "$pending" ]; do
  set -- $pending
  header=$1
  shift
  pending="$*"
  case " $reached " in *" $header "*) continue ;; esac
  reached="$reached $header"
  file=$(header_file "$header")
  [ -n "$file" ] || { echo "dcpp.h reaches $header, which no room's include/ has"; exit 1; }
  pending="$pending $(sed -n 's|^#include <\(dcpp/[^>]*\)>.*|\1|p' "$file")"
done

status=0
lines=0
count=0
for header in $reached; do
  n=$(wc -l < "$(header_file "$header")")
  lines=$((lines + n))
  count=$((count + 1))
  case "$header" in
    dcpp/planner/* | dcpp/storage/storage_reader.h | dcpp/storage/storage_writer.h | \
    dcpp/storage/filesystem_reader.h | dcpp/storage/filesystem_writer.h | \
    dcpp/storage/s3_storage.h | dcpp/storage/s3_prefix.h | dcpp/storage/huggingface_storage.h | \
    dcpp/storage/location_driver.h | dcpp/storage/checkpoint_layout.h | \
    dcpp/storage/storage_location.h | dcpp/state_dict/optimizer_state_codec.h | \
    dcpp/state_dict/stateful_swap.h | dcpp/extend.h | dcpp/dist.h)
      echo "dcpp.h reaches $header, an extension point: include it from <dcpp/extend.h> or" \
           "<dcpp/dist.h> only, and declare what an option names ahead"
      status=1 ;;
  esac
done
echo "dcpp.h reaches $count headers, $lines lines"
exit $status
