#pragma once
// Saving and restoring a training run (model and optimizer) through a ModelLayout, so that it can
// resume on another layout.

#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict.h>

#include <torch/optim/optimizer.h>

#include <string>

namespace dcpp::test {

/// Collective over `group` (null: this process alone): saves the model and optimizer state of
/// `layout` in `directory`, keyed by the unparallelized model's FQNs.
void save_training(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                   const std::string& directory,
                   const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Collective: restores what save_training saved (on any layout) into `layout` and `optimizer`.
void load_training(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                   const std::string& directory,
                   const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// This process's part of every tensor of `layout` under its FQN: a tensor when whole,
/// a ShardedTensor when sharded.
StateDict tensors_of(const ModelLayout& layout);

}  // namespace dcpp::test
