#pragma once
// Summary statistics of tensors, for `dcpp inspect --stats`: of one tensor, or of every tensor of
// a checkpoint, streamed chunk by chunk.

#include <dcpp/format/metadata.h>
#include <dcpp/storage/storage_reader.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

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

/// Gathers TensorStats over the pieces of one tensor, in any order; not thread-safe.
class StatsAccumulator {
 public:
  void add(const at::Tensor& piece);
  /// Adds the pieces `other` gathered.
  void merge(const StatsAccumulator& other);
  TensorStats result() const;

 private:
  TensorStats stats_;
  int64_t counted_ = 0;  // non-NaN elements
};

/// The stats of every tensor of the checkpoint `reader` reads: one load that plans every chunk of
/// every tensor at once (planning is linear in the number of chunks) and folds each chunk into its
/// tensor's stats as it is read, so memory holds a chunk per reading thread, never a whole tensor.
/// Throws CheckpointError as a load does.
std::map<std::string, TensorStats> checkpoint_tensor_stats(StorageReader& reader);

}  // namespace dcpp::tools
