#!/bin/sh
# The remote-tier part of `make demo`: a local S3 server (s3rver, installed by `make s3-server`),
# a 2-rank FSDP run whose checkpoints commit locally and drain to it, the local checkpoints then
# lost, and a 3-rank data parallel resume from the remote tier.
#
# Usage: demo_remote_tier.sh BUILD_DIR WORK_DIR STEPS SAVE_EVERY
set -eu

if [ $# -ne 4 ]; then
  echo "usage: $0 BUILD_DIR WORK_DIR STEPS SAVE_EVERY" >&2
  exit 2
fi
build=$1 work=$2 steps=$3 save_every=$4
server=$build/s3-server/node_modules/s3rver/bin/s3rver.js

rm -rf "$work" && mkdir -p "$work/s3-data"
node --openssl-legacy-provider "$server" -d "$work/s3-data" -a 127.0.0.1 -p 0 \
  --configure-bucket dcpp-demo >"$work/s3rver.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
port=
tries=0
while [ -z "$port" ]; do  # s3rver logs its port once it listens
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$work/s3rver.log" | head -n 1)
  tries=$((tries + 1))
  if [ -z "$port" ] && { [ $tries -gt 300 ] || ! kill -0 $server_pid 2>/dev/null; }; then
    echo "s3rver did not start; its log:" >&2
    cat "$work/s3rver.log" >&2
    exit 1
  fi
  [ -n "$port" ] || sleep 0.1
done

# The store, as the AWS SDKs (and dcpp) read it: s3rver's fixed credentials.
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export DCPP_DEMO_REMOTE=s3://dcpp-demo/char-lm
last=$(printf 'step-%08d' "$steps")

echo "== FSDP on 2 ranks; every $save_every steps a checkpoint commits in $work/checkpoints (keep 3),"
echo "   then drains to $DCPP_DEMO_REMOTE on the local S3 server (keep 10)"
"$build/tools/dcpp-launch" -n 2 -- "$build/examples/demo_char_lm" train "$work/checkpoints" \
  "$steps" "$save_every" 0
echo "== local: $(ls "$work/checkpoints" | tr '\n' ' ')"
echo "== the remote copy of the last step, checked object by object:"
"$build/tools/dcpp" verify "$DCPP_DEMO_REMOTE/$last"
rm -rf "$work/checkpoints"
echo "== the local checkpoints are lost; resumed on 3 ranks, data parallel, from the remote tier"
"$build/tools/dcpp-launch" -n 3 -- "$build/examples/demo_char_lm" resume "$work/checkpoints" \
  $((steps + save_every))
