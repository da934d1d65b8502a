#include <dcpp/plugin/retention_policy.h>

#include <algorithm>
#include <set>

namespace dcpp {

std::vector<CheckpointInfo> checkpoints_to_delete(std::vector<CheckpointInfo> checkpoints,
                                                  const RetentionPolicy& policy) {
  if (!policy.prunes() || checkpoints.empty()) return {};
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  std::set<int64_t> keep{checkpoints.back().step};  // the latest is always kept
  const int n = static_cast<int>(checkpoints.size());
  for (int i = std::max(0, n - policy.keep_latest); i < n && policy.keep_latest > 0; ++i) {
    keep.insert(checkpoints[i].step);
  }
  if (policy.keep_every_steps > 0) {
    for (const auto& c : checkpoints) {
      if (c.step % policy.keep_every_steps == 0) keep.insert(c.step);
    }
  }
  if (policy.keep_best > 0) {
    std::vector<const CheckpointInfo*> ranked;
    for (const auto& c : checkpoints) {
      if (c.metrics.count(policy.best_metric) != 0) ranked.push_back(&c);
    }
    std::stable_sort(
        ranked.begin(), ranked.end(), [&](const CheckpointInfo* a, const CheckpointInfo* b) {
          const double x = a->metrics.at(policy.best_metric), y = b->metrics.at(policy.best_metric);
          return policy.lower_is_better ? x < y : x > y;
        });
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(policy.keep_best); ++i) {
      keep.insert(ranked[i]->step);
    }
  }
  std::vector<CheckpointInfo> doomed;
  for (auto& c : checkpoints) {
    if (keep.count(c.step) == 0) doomed.push_back(std::move(c));
  }
  return doomed;
}

}  // namespace dcpp
