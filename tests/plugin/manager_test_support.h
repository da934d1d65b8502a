#pragma once
// What the CheckpointManager's tests share: the steps of a listing, and a save request.

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <cstdint>
#include <vector>

namespace dcpp::test {

/// The steps of `infos`, in their order.
inline std::vector<int64_t> steps_of(const std::vector<CheckpointInfo>& infos) {
  std::vector<int64_t> steps;
  for (const auto& info : infos) steps.push_back(info.step);
  return steps;
}

/// A save of `step` recording the metric "loss".
inline SaveRequest request(int64_t step, double loss = 0) {
  SaveRequest r;
  r.step = step;
  r.metrics["loss"] = loss;
  return r;
}

}  // namespace dcpp::test
