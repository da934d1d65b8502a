#pragma once
// The parameters and buffers of a module in PyTorch's state_dict order (each module's own
// parameters, then its own buffers, then its children's, depth first), with their FQNs.

#include <dcpp/state_dict/model_layout.h>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace dcpp::detail {

struct NamedTensor {
  std::string fqn;
  at::Tensor tensor;
  bool is_buffer;
};

/// Not thread-safe against concurrent changes to the module's structure.
std::vector<NamedTensor> module_tensors(const torch::nn::Module& module);

/// module_tensors(module) as placements, each whole under its own name.
std::vector<ParameterPlacement> whole_placements(const torch::nn::Module& module);

}  // namespace dcpp::detail
