#!/bin/sh
# Two hosts on one machine: two network namespaces joined by a veth pair, each with its own
# address (10.211.0.1 and .2), host name and (the second) PID namespace, sharing the file system as
# hosts share a parallel file system. Each host runs dcpp-launch with --nnodes and --node-rank,
# MASTER_ADDR on the first host's address; nothing may go through loopback between them.
#   1. 4 ranks, 2 a host, save a checkpoint (reshard_worker save, "row");
#   2. 3 ranks (ranks 0 and 2 on the first host, 1 on the second) load it as "col";
#   3. 4 ranks save again, and rank 3, on the second host, dies while writing: the survivors on
#      the first host must fail within the group's timeout, naming the second host.
# Prints each host's output; exits 0 only when all three hold.
#
#   two_hosts.sh DCPP_LAUNCH RESHARD_WORKER WORK_DIR
#
# Needs `unshare`, `nsenter` (util-linux) and `ip` (iproute2). Root needs nothing more; anyone
# else runs it in a user namespace of their own.
set -eu
launch=$1
worker=$2
work=$3

if [ "${DCPP_TWO_HOSTS_STAGE:-}" != "first-host" ]; then
  userns=""
  [ "$(id -u)" -eq 0 ] || userns="--user --map-root-user"
  rm -rf "$work" && mkdir -p "$work"
  # shellcheck disable=SC2086
  DCPP_TWO_HOSTS_STAGE=first-host exec unshare $userns --net --uts -- sh "$0" "$@"
fi

# The first host: this process's namespaces.
# sethostname(2) through `hostname`, or through /proc where a minimal root lacks `hostname` (root
# only: /proc's files are not a user namespace's).
set_host_name() { hostname "$1" 2>/dev/null || echo "$1" > /proc/sys/kernel/hostname; }
set_host_name dcpp-host-1
ip link set lo up
# The second host: namespaces held open by a sleeping process (the init of its PID namespace),
# which says when they exist through a FIFO.
mkfifo "$work/second-host-ready"
unshare --net --uts --mount --pid --fork --mount-proc --kill-child \
  sh -c 'echo ready > "$1" && exec sleep 600' sh "$work/second-host-ready" &
holder=$!
# --root and --wd: entering a mount namespace moves to its root, which in a chroot (the reference
# roots of `make test-libtorch`) is not this process's.
on_second_host() {
  nsenter --target "$holder" --net --uts --mount --root --wd \
    --pid="/proc/$holder/ns/pid_for_children" -- "$@"
}
trap 'kill -KILL "$holder" 2>/dev/null || true' EXIT  # unshare --fork ignores SIGTERM; its child dies with it
read -r _ < "$work/second-host-ready"
ip link add dcpp-veth1 type veth peer name dcpp-veth2
ip link set dcpp-veth2 netns "$holder"
ip addr add 10.211.0.1/24 dev dcpp-veth1
ip link set dcpp-veth1 up
on_second_host sh -c 'hostname dcpp-host-2 2>/dev/null || echo dcpp-host-2 > /proc/sys/kernel/hostname
  ip link set lo up &&
  ip addr add 10.211.0.2/24 dev dcpp-veth2 && ip link set dcpp-veth2 up'

port=29611
# run_job NAME NPROC "HOST HOST ..." ARGS...: one dcpp-launch of NPROC ranks of the worker (with
# ARGS) per node, on the host given for it (1 or 2), all at once; each node's output in
# WORK/NAME.<node>.out, its exit code in WORK/NAME.<node>.code. (Paths must not hold spaces.)
run_job() {
  name=$1 nproc=$2 hosts=$3
  shift 3
  args="$*"
  nnodes=$(echo $hosts | wc -w)
  port=$((port + 1))
  node=0
  pids=""
  for host in $hosts; do
    command="$launch --fork --nnodes $nnodes --node-rank $node --master-addr 10.211.0.1 --master-port $port -n $nproc -- $worker $args"
    [ "$host" = 1 ] && place="" || place=on_second_host
    (
      if $place $command > "$work/$name.$node.out" 2>&1; then code=0; else code=$?; fi
      echo "$code" > "$work/$name.$node.code"
    ) &
    pids="$pids $!"
    node=$((node + 1))
  done
  for pid in $pids; do wait "$pid"; done
  node=0
  for host in $hosts; do
    echo "== $name, node $node on host $host (exit $(cat "$work/$name.$node.code")):"
    cat "$work/$name.$node.out"
    node=$((node + 1))
  done
}
code() { cat "$work/$1.code"; }

run_job save 2 "1 2" save "$work/ckpt" row
[ "$(code save.0)" = 0 ] && [ "$(code save.1)" = 0 ] || { echo "FAILED: the save"; exit 1; }

run_job load 1 "1 2 1" load "$work/ckpt" col
for node in 0 1 2; do
  [ "$(code "load.$node")" = 0 ] || { echo "FAILED: the load on 3 ranks"; exit 1; }
done

run_job die 2 "1 2" die-save "$work/dying" 3
[ "$(code die.0)" = 0 ] || { echo "FAILED: the first host's ranks did not fail as expected"; exit 1; }
for rank in 0 1; do
  grep -q "^\[rank $rank\] failed as expected (rank failed) .*on other machines (host dcpp-host-2)" \
    "$work/die.0.out" || { echo "FAILED: rank $rank did not name the second host"; exit 1; }
done
echo "two hosts: saved on 4 ranks, loaded on 3, a rank lost on the second host named"
