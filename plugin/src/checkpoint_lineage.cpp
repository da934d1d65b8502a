// The lineage of managed checkpoints (checkpoint_lineage.h): abandoned, resumable, forks.

#include "checkpoint_lineage.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>

namespace dcpp::detail {

std::string new_save_id() {
  std::random_device source;
  std::string id;
  for (int word = 0; word < 4; ++word) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(source()));
    id += hex;
  }
  return id;
}

bool is_abandoned(const CheckpointInfo& checkpoint, const std::vector<CheckpointInfo>& all) {
  return std::any_of(all.begin(), all.end(), [&](const CheckpointInfo& other) {
    return other.generation > checkpoint.generation && other.branched_from < checkpoint.step;
  });
}

std::vector<CheckpointInfo> resumable(const std::vector<CheckpointInfo>& all) {
  std::map<int64_t, const CheckpointInfo*> by_step;
  for (const CheckpointInfo& checkpoint : all) {
    if (!is_abandoned(checkpoint, all)) by_step.emplace(checkpoint.step, &checkpoint);
  }
  std::vector<CheckpointInfo> found;
  for (const auto& [step, checkpoint] : by_step) found.push_back(*checkpoint);
  return found;
}

std::vector<CheckpointInfo> passed_abandoned(const std::vector<CheckpointInfo>& all) {
  const std::vector<CheckpointInfo> timeline = resumable(all);
  const int64_t newest = timeline.empty() ? INT64_MIN : timeline.back().step;
  std::vector<CheckpointInfo> passed;
  for (const CheckpointInfo& checkpoint : all) {
    if (checkpoint.step <= newest && is_abandoned(checkpoint, all)) passed.push_back(checkpoint);
  }
  return passed;
}

Lineage lineage_after_restore(const CheckpointInfo& restored,
                              const std::vector<CheckpointInfo>& all) {
  const std::vector<CheckpointInfo> timeline = resumable(all);
  const bool newer_exists = !timeline.empty() && timeline.back().step > restored.step;
  if (!newer_exists && !is_abandoned(restored, all)) {
    return Lineage{restored.generation, restored.branched_from};
  }
  return fork_after_restore(restored, all);
}

Lineage fork_after_restore(const CheckpointInfo& restored, const std::vector<CheckpointInfo>& all) {
  int64_t generation = restored.generation;
  for (const CheckpointInfo& other : all) generation = std::max(generation, other.generation);
  return Lineage{generation + 1, restored.step};
}

Lineage lineage_to_continue(const std::vector<CheckpointInfo>& all) {
  const std::vector<CheckpointInfo> timeline = resumable(all);
  if (timeline.empty()) return Lineage{};
  return Lineage{timeline.back().generation, timeline.back().branched_from};
}

bool replaces(const Lineage& lineage, const CheckpointInfo& existing) {
  return lineage.generation > existing.generation && lineage.branched_from < existing.step;
}

std::string encode_lineage(const Lineage& lineage) {
  return std::to_string(lineage.generation) + " " + std::to_string(lineage.branched_from);
}

Lineage decode_lineage(const std::string& text) {
  std::istringstream in(text);
  Lineage lineage;
  if (!(in >> lineage.generation >> lineage.branched_from)) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "the coordinator's lineage message '" + text +
                              "' is malformed; every rank must run the same dcpp build");
  }
  return lineage;
}

}  // namespace dcpp::detail
