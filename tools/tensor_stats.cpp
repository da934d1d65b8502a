#include "tensor_stats.h"

#include <ATen/ATen.h>

namespace dcpp::tools {

TensorStats compute_stats(const at::Tensor& tensor) {
  at::Tensor values = tensor.is_complex() ? tensor.abs() : tensor;
  values = values.to(at::kDouble).reshape({-1});
  TensorStats stats;
  const at::Tensor is_nan = values.isnan();
  stats.nan = is_nan.sum().item<int64_t>();
  stats.inf = values.isinf().sum().item<int64_t>();
  const at::Tensor kept = values.masked_select(is_nan.logical_not());
  stats.sum = kept.sum().item<double>();
  stats.abs_sum = kept.abs().sum().item<double>();
  if (kept.numel() > 0) {
    stats.min = kept.min().item<double>();
    stats.max = kept.max().item<double>();
    stats.mean = stats.sum / static_cast<double>(kept.numel());
  }
  return stats;
}

}  // namespace dcpp::tools
