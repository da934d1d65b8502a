#pragma once
// Naming the rank that died: each rank's process, identified well enough that another process on
// the same machine can tell whether it still runs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

struct ProcessIdentity {
  std::string host;     // the host name, for messages
  std::string machine;  // boot id and PID namespace: another container counts as another machine
  int64_t pid = 0;
  uint64_t start_time = 0;  // in clock ticks since boot, so that a reused pid is not taken for it
};

/// The calling process (read anew each call: a forked child is another process).
ProcessIdentity this_process();

std::string encode_process_identity(const ProcessIdentity& process);
/// `bytes`, as `rank` sent it. Throws CheckpointError naming `rank` when they are not what
/// encode_process_identity writes.
ProcessIdentity decode_process_identity(std::string_view bytes, int rank);

enum class ProcessState { kRunning, kExited, kOnAnotherMachine };
ProcessState process_state(const ProcessIdentity& process);

/// For the error of a failed collective: which ranks of `peers` (indexed by rank; `self` is the
/// caller) have exited, e.g. "rank 1 (pid 4242 on host a) has exited", or that every rank that can
/// be checked still runs, and which ranks are on other machines and could not be checked.
std::string describe_peer_processes(const std::vector<ProcessIdentity>& peers, int self);

}  // namespace dcpp::detail
