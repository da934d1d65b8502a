#pragma once
// The memory tier's regions of one job: the files /dev/shm/dcpp.<job>.* (MemoryTierOptions::job).

#include <string>
#include <vector>

namespace memory_kills {

/// The names of the job's regions in /dev/shm, sorted.
std::vector<std::string> job_regions(const std::string& job);
/// Removes them; returns how many there were.
int remove_job_regions(const std::string& job);

}  // namespace memory_kills
