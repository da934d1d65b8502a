#include "peer_processes.h"

#include <dcpp/core/checkpoint_error.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace dcpp::detail {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What /proc/<pid>/stat says of a process; false when there is no such process.
struct ProcStat {
  char state = 0;           // field 3
  uint64_t flags = 0;       // field 9
  uint64_t start_time = 0;  // field 22
};

bool read_stat(int64_t pid, ProcStat* out) {
  const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t name_end = stat.rfind(')');  // the command name may hold spaces and ')'
  if (name_end == std::string::npos) return false;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  if (!(fields >> out->state)) return false;
  for (int i = 4; i <= 22 && fields >> field; ++i) {
    try {
      if (i == 9) out->flags = std::stoull(field);
      if (i == 22) {
        out->start_time = std::stoull(field);
        return true;
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

// The kernel's PF_EXITING: set when a process starts exiting, before its sockets close.
constexpr uint64_t kProcessExiting = 0x4;

ProcessIdentity read_this_process() {
  ProcessIdentity self;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) self.host = host;
  self.pid = static_cast<int64_t>(getpid());
  const std::string boot_id = first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  ProcStat stat;
  if (!boot_id.empty() && n > 0 && read_stat(self.pid, &stat)) {
    self.start_time = stat.start_time;
    self.machine = boot_id + "/" + std::string(ns, static_cast<std::size_t>(n));
  }
  return self;
}

std::string describe(int rank, const ProcessIdentity& process) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(process.pid) + " on host " +
         process.host + ")";
}

// "rank 3" or "ranks 3, 4".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  return out;
}

// "host a" or "hosts a, b": the hosts of `ranks` among `peers`, each once, in rank order.
std::string host_list(const std::vector<ProcessIdentity>& peers, const std::vector<int>& ranks) {
  std::vector<std::string> hosts;
  for (int rank : ranks) {
    const std::string& host = peers[static_cast<std::size_t>(rank)].host;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  std::string out = hosts.size() == 1 ? "host " : "hosts ";
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    out += (i == 0 ? "" : ", ") + hosts[i];
  }
  return out;
}

}  // namespace

ProcessIdentity this_process() { return read_this_process(); }

std::string encode_process_identity(const ProcessIdentity& process) {
  return process.host + '\n' + process.machine + '\n' + std::to_string(process.pid) + '\n' +
         std::to_string(process.start_time);
}

ProcessIdentity decode_process_identity(std::string_view bytes, int rank) {
  const auto malformed = [rank] {
    return CheckpointError(ErrorKind::kCorrupt,
                           "the process identity rank " + std::to_string(rank) +
                               " sent is malformed; every rank must run the same dcpp build");
  };
  std::istringstream in{std::string(bytes)};
  ProcessIdentity process;
  std::string pid, start_time;
  if (!std::getline(in, process.host) || !std::getline(in, process.machine) ||
      !std::getline(in, pid) || !std::getline(in, start_time)) {
    throw malformed();
  }
  try {
    process.pid = std::stoll(pid);
    process.start_time = std::stoull(start_time);
  } catch (const std::exception&) {
    throw malformed();
  }
  return process;
}

ProcessState process_state(const ProcessIdentity& process) {
  if (process.machine.empty() || process.machine != this_process().machine) {
    return ProcessState::kOnAnotherMachine;
  }
  ProcStat stat;
  if (!read_stat(process.pid, &stat)) return ProcessState::kExited;
  // Exiting or a zombie (its parent has not reaped it yet): exited. Another start time: the pid
  // was reused by another process.
  if ((stat.flags & kProcessExiting) != 0 || stat.state == 'Z' || stat.state == 'X' ||
      stat.start_time != process.start_time) {
    return ProcessState::kExited;
  }
  return ProcessState::kRunning;
}

std::string describe_peer_processes(const std::vector<ProcessIdentity>& peers, int self) {
  std::string exited;
  std::vector<int> elsewhere;
  for (int rank = 0; rank < static_cast<int>(peers.size()); ++rank) {
    if (rank == self) continue;
    switch (process_state(peers[static_cast<std::size_t>(rank)])) {
      case ProcessState::kExited:
        exited += (exited.empty() ? "" : "; ") +
                  describe(rank, peers[static_cast<std::size_t>(rank)]) + " has exited";
        break;
      case ProcessState::kOnAnotherMachine:
        elsewhere.push_back(rank);
        break;
      case ProcessState::kRunning:
        break;
    }
  }
  std::string out = exited;
  if (out.empty()) {
    out = elsewhere.size() + 1 == peers.size()
              ? "no other rank runs on this machine"
              : "every other rank on this machine is still running (hung, or the network failed?)";
  }
  if (!elsewhere.empty() && elsewhere.size() + 1 < peers.size()) {
    out += "; " + rank_list(elsewhere) + " on other machines (" + host_list(peers, elsewhere) +
           ") could not be checked";
  } else if (!elsewhere.empty()) {
    out += ": " + rank_list(elsewhere) + " (on " + host_list(peers, elsewhere) +
           ") could not be checked";
  }
  return out;
}

}  // namespace dcpp::detail
