#pragma once
// A memory-tier job's files in /dev/shm (MemoryTierOptions::job): its regions, dcpp.<job>.*, and
// its ranks' job locks, dcpp-job.<job>.* (held while a rank runs, removed when it ends well).

#include <string>
#include <vector>

namespace memory_kills {

/// The names of the job's regions and lock files in /dev/shm, sorted.
std::vector<std::string> job_regions(const std::string& job);
/// Removes them; returns how many there were.
int remove_job_regions(const std::string& job);

}  // namespace memory_kills
