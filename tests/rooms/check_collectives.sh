#!/bin/sh
# Every c10d collective dcpp makes goes through core's GroupCalls (core/internal/core/group_calls.h,
# docs/design.md, "Rooms"), which waits for it and turns a dead peer or a timeout into an error that
# names the caller, the rank and the operation:
# check_collectives.sh SOURCE_DIR
# Prints each call on a process group (`->allreduce(`, `->broadcast(`, ...) made anywhere else in
# the rooms' sources and headers, and exits 1 on any.
set -eu
source_dir=$1
cd "$source_dir"
calls='->(allreduce|allreduce_coalesced|allgather|allgather_coalesced|allgather_into_tensor_coalesced|_allgather_base|broadcast|reduce|reduce_scatter|reduce_scatter_tensor_coalesced|_reduce_scatter_base|gather|scatter|alltoall|alltoall_base|barrier|send|recv|recvAnysource|monitoredBarrier)\('
found=$(grep -rnE -e "$calls" core state_dict format planner storage dist checkpoint async plugin parallel \
          --include='*.cpp' --include='*.h' | grep -v '^core/src/group_calls\.cpp:' || true)
if [ -n "$found" ]; then
  echo "$found"
  echo "c10d collectives called outside core/src/group_calls.cpp: use detail::GroupCalls"
  exit 1
fi
echo "every c10d collective goes through GroupCalls"
