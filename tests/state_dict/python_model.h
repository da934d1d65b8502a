#pragma once
// The model of PyTorch's model_optim fixtures and of what the interop tests write for Python:
// Python's nn.Sequential(Linear(4, 8), ReLU(), Linear(8, 2)), initialised from `seed`.

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdint>

namespace dcpp::test {

inline torch::nn::Sequential python_model(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 2));
}

}  // namespace dcpp::test
