#pragma once
// The contiguous byte runs of a box of a row-major tensor: how the Hugging Face reader and writer
// read and write part of a tensor stored whole (safetensors) without touching the rest.

#include <cstdint>
#include <functional>
#include <vector>

namespace dcpp::detail {

/// The runs of the box [offsets, offsets + lengths) of a row-major tensor of `shape` whose
/// elements are `element_size` bytes. The trailing dimensions the box covers whole, and the last
/// one it does not, make one run; the dimensions before it are iterated in row-major order, so
/// a box of whole rows is one run and a column block is one run per row.
struct BoxRuns {
  uint64_t run_bytes = 0;  // bytes of every run (0: the box is empty, there are no runs)
  uint64_t count = 0;      // how many runs
  /// Calls `run(tensor_offset, box_offset)` for every run in order: its first byte relative to the
  /// tensor's first byte, and relative to the box's first byte when the box is stored contiguously
  /// (always run index * run_bytes). Tensor offsets strictly increase.
  void for_each(const std::function<void(uint64_t tensor_offset, uint64_t box_offset)>& run) const;

  std::vector<uint64_t> strides;  // element strides of the iterated dimensions
  std::vector<int64_t> starts;    // the box's first index in each iterated dimension
  std::vector<int64_t> lengths;   // the box's length in each iterated dimension
  uint64_t first = 0;             // byte offset of the first run
};

/// The box must lie inside the tensor (checked by the caller); sizes must be non-negative.
BoxRuns box_runs(const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
                 const std::vector<int64_t>& lengths, uint64_t element_size);

}  // namespace dcpp::detail
