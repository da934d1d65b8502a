#pragma once
// Small models, data and comparisons shared by the state-dict helper tests.

#include "dcpp_test.h"

#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/model_layout.h>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

namespace dcpp::test {

/// Linear(4, 8) -> Tanh -> Linear(8, 3), initialised from `seed`: FQNs "0.weight", "0.bias",
/// "2.weight", "2.bias".
inline torch::nn::Sequential small_model(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 3));
}

struct Batch {
  at::Tensor x;
  at::Tensor y;
};

inline Batch small_batch() {
  torch::manual_seed(99);
  Batch batch;
  batch.x = torch::randn({16, 4});
  batch.y = torch::randn({16, 3});
  return batch;
}

/// One optimizer step through a closure (LBFGS needs one; the others call it once). Returns the
/// loss the closure computed first.
inline float train_step(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                        const Batch& batch) {
  auto closure = [&] {
    optimizer.zero_grad();
    at::Tensor loss = torch::nn::functional::mse_loss(model->forward(batch.x), batch.y);
    loss.backward();
    return loss;
  };
  return optimizer.step(closure).item<float>();
}

/// Every leaf of two state dicts equal: same keys, tensors (and shards) equal to the bit, values
/// equal. Returns the first difference, or "".
inline std::string first_difference(StateDict a, StateDict b) {
  auto flat_a = flatten_state_dict(a);
  auto flat_b = flatten_state_dict(b);
  if (flat_a.size() != flat_b.size()) {
    return "sizes " + std::to_string(flat_a.size()) + " vs " + std::to_string(flat_b.size());
  }
  for (std::size_t i = 0; i < flat_a.size(); ++i) {
    const StateValue& x = *flat_a[i].value;
    const StateValue& y = *flat_b[i].value;
    if (flat_a[i].key != flat_b[i].key || x.kind() != y.kind()) {
      return flat_a[i].key + " vs " + flat_b[i].key;
    }
    if (x.is_tensor() && !bitwise_equal(x.tensor(), y.tensor())) {
      return flat_a[i].key + ": tensors differ";
    }
    if (x.is_sharded_tensor()) {
      const auto& sx = x.sharded_tensor().local_shards();
      const auto& sy = y.sharded_tensor().local_shards();
      if (sx.size() != sy.size() ||
          (!sx.empty() && (!bitwise_equal(sx[0].tensor, sy[0].tensor) ||
                           sx[0].offsets != sy[0].offsets))) {
        return flat_a[i].key + ": shards differ";
      }
    }
    if (x.is_value() && !(x.value() == y.value())) {
      return flat_a[i].key + ": values differ";
    }
    if (x.is_list() && x.list().size() != y.list().size()) {
      return flat_a[i].key + ": lists differ";
    }
  }
  return "";
}

/// A layout given as a list of placements (and a group): how tests describe sharded layouts.
class ListedLayout : public ModelLayout {
 public:
  explicit ListedLayout(std::vector<ParameterPlacement> placements,
                        c10::intrusive_ptr<c10d::ProcessGroup> group = {})
      : placements_(std::move(placements)), group_(std::move(group)) {}
  std::vector<ParameterPlacement> placements() const override { return placements_; }
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override { return group_; }

 private:
  std::vector<ParameterPlacement> placements_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

inline ParameterPlacement whole(std::string fqn, at::Tensor tensor, bool is_buffer = false) {
  ParameterPlacement placement;
  placement.fqn = std::move(fqn);
  placement.local = std::move(tensor);
  placement.is_buffer = is_buffer;
  return placement;
}

inline ParameterPlacement piece(std::string fqn, at::Tensor local, std::vector<int64_t> global,
                                std::vector<int64_t> offsets) {
  ParameterPlacement placement;
  placement.fqn = std::move(fqn);
  placement.local = std::move(local);
  placement.global_shape = std::move(global);
  placement.offsets = std::move(offsets);
  return placement;
}

}  // namespace dcpp::test
