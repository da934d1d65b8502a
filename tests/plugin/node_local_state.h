#pragma once
// The state the node-local roots tests save and resume (node_local_test.cpp, and the ranks of
// node_local_hosts_test.cpp, worker/node_local_worker.cpp): "w", a 6 x 4 float64 tensor sharded
// by rows over the ranks, and "r", replicated; both depend on the step, exactly.

#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dcpp::test {

inline constexpr int64_t kNodeLocalRows = 6;

/// The global "w" of `step`: distinct values, exact in float64.
inline at::Tensor node_local_weights(int64_t step) {
  return at::arange(kNodeLocalRows * 4, at::kDouble)
      .reshape({kNodeLocalRows, 4})
      .add(static_cast<double>(step) * 100);
}

/// This rank's rows of "w" (near-equal parts) and "r", as of `step` (with `zeros`, zeros).
inline StateDict node_local_state(int64_t step, int rank, int world, bool zeros) {
  const at::Tensor full =
      zeros ? at::zeros({kNodeLocalRows, 4}, at::kDouble) : node_local_weights(step);
  const int64_t base = kNodeLocalRows / world, longer = kNodeLocalRows % world;
  const int64_t begin = rank * base + std::min<int64_t>(rank, longer);
  const int64_t rows = base + (rank < longer ? 1 : 0);
  std::vector<Shard> shards;
  if (rows > 0) shards.push_back({full.narrow(0, begin, rows).clone(), {begin, 0}});
  StateDict state;
  state.insert("w", ShardedTensor({kNodeLocalRows, 4}, std::move(shards), at::kDouble));
  state.insert("r", at::full({3}, zeros ? 0.0 : static_cast<double>(step), at::kDouble));
  return state;
}

/// Whether `state` holds what node_local_state(step, rank, world, false) holds, bit for bit.
inline bool node_local_state_equals(const StateDict& state, int64_t step, int rank, int world) {
  const StateDict expected = node_local_state(step, rank, world, false);
  const auto& got = state.at("w").sharded_tensor().local_shards();
  const auto& want = expected.at("w").sharded_tensor().local_shards();
  return got.size() == want.size() && (got.empty() || at::equal(got[0].tensor, want[0].tensor)) &&
         at::equal(state.at("r").tensor(), expected.at("r").tensor());
}

}  // namespace dcpp::test
