#pragma once
// Which managed checkpoints to keep: the latest K, every P-th step forever, the best K by a metric.

#include <dcpp/core/export.h>
#include <dcpp/plugin/checkpoint_info.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp {

/// A checkpoint is kept when any rule keeps it; the latest complete checkpoint is always kept.
/// With every rule off (the default) nothing is ever deleted.
struct DCPP_API RetentionPolicy {
  /// Keep the `keep_latest` checkpoints with the highest steps; 0: this rule is off.
  int keep_latest = 0;
  /// Keep forever every checkpoint whose step is a multiple of `keep_every_steps`; 0: off.
  int64_t keep_every_steps = 0;
  /// Keep the `keep_best` checkpoints with the best value of `best_metric` (smallest when
  /// `lower_is_better`); 0: off. Checkpoints without the metric are never "best".
  int keep_best = 0;
  std::string best_metric = "loss";
  bool lower_is_better = true;

  /// Whether any rule is on (else nothing is pruned).
  bool prunes() const { return keep_latest > 0 || keep_every_steps > 0 || keep_best > 0; }

  RetentionPolicy& with_keep_latest(int k) {
    keep_latest = k;
    return *this;
  }
  RetentionPolicy& with_keep_every_steps(int64_t p) {
    keep_every_steps = p;
    return *this;
  }
  RetentionPolicy& with_keep_best(int k, std::string metric, bool lower = true) {
    keep_best = k;
    best_metric = std::move(metric);
    lower_is_better = lower;
    return *this;
  }
};

/// The checkpoints of `checkpoints` (complete, any order) that `policy` does not keep, ascending
/// by step. Pure function; never throws.
DCPP_API std::vector<CheckpointInfo> checkpoints_to_delete(std::vector<CheckpointInfo> checkpoints,
                                                           const RetentionPolicy& policy);

}  // namespace dcpp
