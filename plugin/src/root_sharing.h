#pragma once
// Which ranks share the manager's root directory: one group for a root every rank sees (a shared
// file system, or one machine), one group per host for a node-local root (each host's own disk).
// A group's leader commits its directory and, with a remote tier, drains the files in it.

#include "rank_agreement.h"

#include <filesystem>
#include <string>
#include <vector>

namespace dcpp::detail {

struct RootSharing {
  /// By rank: the leader of the rank's group (the coordinator in its own group, else the group's
  /// lowest rank). Every rank holds the same vector.
  std::vector<int> leader_of;

  /// How many directories the ranks see as the root (1: shared).
  int groups() const;
  /// "ranks 0, 1 | ranks 2, 3": the groups, as the ranks that see one directory.
  std::string describe() const;
};

/// Collective: every rank writes a probe file named after a token the coordinator chose and its
/// rank into `root` (which must exist on every rank), lists the root once, and the ranks gather
/// whose probes each saw; the probes are removed. Throws CheckpointError (kUsage) on every rank,
/// naming the ranks and their hosts, when the ranks' views disagree (rank 1 sees rank 2's probe
/// but not the other way round: a directory that is not one file system's), or, unless
/// `node_local`, when any rank does not see the coordinator's directory.
RootSharing find_root_sharing(const ProcessGroupPtr& group, int rank, int world, int coordinator,
                              const std::filesystem::path& root, bool node_local);

}  // namespace dcpp::detail
