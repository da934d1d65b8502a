// Finding which ranks share the root (root_sharing.h): probe files, one readdir per rank, one
// all-gather of each rank's leader.

#include "root_sharing.h"
#include "host_name.h"

#include "checkpoint_lineage.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kProbePrefix = ".dcpp-root-probe-";

// The ranks whose probes named after `token` are in `root`.
std::set<int> ranks_seen(const fs::path& root, const std::string& token) {
  const std::string prefix = kProbePrefix + token + "-";
  std::set<int> seen;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    try {
      seen.insert(std::stoi(name.substr(prefix.size())));
    } catch (const std::exception&) {
      // not a probe of this manager's
    }
  }
  return seen;
}

}  // namespace

int RootSharing::groups() const {
  return static_cast<int>(std::set<int>(leader_of.begin(), leader_of.end()).size());
}

std::string RootSharing::describe() const {
  std::map<int, std::string> ranks_by_leader;
  for (size_t r = 0; r < leader_of.size(); ++r) {
    std::string& ranks = ranks_by_leader[leader_of[r]];
    ranks += (ranks.empty() ? "ranks " : ", ") + std::to_string(r);
  }
  std::string text;
  for (const auto& [leader, ranks] : ranks_by_leader) text += (text.empty() ? "" : " | ") + ranks;
  return text;
}

RootSharing find_root_sharing(const ProcessGroupPtr& group, int rank, int world, int coordinator,
                              const fs::path& root, bool node_local) {
  RootSharing sharing;
  if (world <= 1) {
    sharing.leader_of = {0};
    return sharing;
  }
  // A new name each time: no cache of a network file system can hold it as missing.
  const std::string token = broadcast_text_from(group, new_save_id(), coordinator);
  const fs::path probe = root / (kProbePrefix + token + "-" + std::to_string(rank));
  std::ofstream probe_file(probe);
  probe_file << "written by rank " << rank << " to find which ranks see this root; "
             << "removed at once\n";
  probe_file.close();
  const bool written = !probe_file.fail();
  every_rank_ok(group, true);  // every probe written before any rank looks
  const std::set<int> seen = ranks_seen(root, token);
  const int leader = seen.count(coordinator) != 0 ? coordinator
                     : seen.empty()               ? rank
                                                  : *seen.begin();
  const std::vector<int64_t> leaders = values_of_ranks(group, leader);
  std::error_code ignored;
  fs::remove(probe, ignored);  // every rank has looked
  sharing.leader_of.assign(leaders.begin(), leaders.end());

  std::string problem;
  std::error_code error;
  const auto same_group =
      static_cast<size_t>(std::count(sharing.leader_of.begin(), sharing.leader_of.end(), leader));
  const bool consistent =
      seen.count(rank) != 0 && same_group == seen.size() &&
      std::all_of(seen.begin(), seen.end(), [&](int r) { return sharing.leader_of[r] == leader; });
  if (!fs::is_directory(root, error)) {
    problem = "on host " + host_name() + ", '" + root.string() + "' is not a directory";
  } else if (!written) {
    problem = "on host " + host_name() + ", '" + probe.string() +
              "' cannot be written: give a root every rank can write";
  } else if (!consistent) {
    problem = "on host " + host_name() + ", '" + root.string() + "' shows the probes of ranks ";
    for (const int r : seen) problem += std::to_string(r) + " ";
    problem += "(the ranks disagree on who shares it)";
  } else if (!node_local && leader != coordinator) {
    problem = "on host " + host_name() + ", the coordinator's probe in '" + root.string() +
              "' is not there";
  }
  const std::string failures = failures_of_ranks(group, rank, problem);
  if (failures.empty()) return sharing;
  throw CheckpointError(
      ErrorKind::kUsage,
      "checkpoint root '" + root.string() + "' is not one directory that every rank sees: " +
          "each rank wrote a file there that other ranks do not see (" + failures + "). " +
          (node_local
               ? std::string("A node-local root must be one directory per host, which the ranks "
                             "on that host share")
               : std::string("The manager commits a step with a rename on the coordinator and "
                             "resumes by reading every rank's files from one directory. Give "
                             "CheckpointManagerOptions::root a directory on a file system every "
                             "host mounts, or, for a root on each host's own disk, set "
                             "CheckpointManagerOptions::node_local_root with a remote tier the "
                             "hosts drain to")) +
          " (docs/storage.md)");
}

}  // namespace dcpp::detail
