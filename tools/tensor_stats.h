#pragma once
// Summary statistics of a tensor, for `dcpp inspect --stats`.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace dcpp::tools {

/// Over the whole tensor, in float64 (complex tensors: over magnitudes). sum, abs_sum, min, max
/// and mean skip NaNs; `nan` and `inf` count them. min, max and mean are empty for a tensor with
/// no non-NaN element.
struct TensorStats {
  double sum = 0;
  double abs_sum = 0;
  std::optional<double> min;
  std::optional<double> max;
  std::optional<double> mean;
  int64_t nan = 0;
  int64_t inf = 0;
};

TensorStats compute_stats(const at::Tensor& tensor);

}  // namespace dcpp::tools
