#include "tensor_runs.h"

namespace dcpp::detail {

BoxRuns box_runs(const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
                 const std::vector<int64_t>& lengths, uint64_t element_size) {
  BoxRuns runs;
  const std::size_t dims = shape.size();
  for (std::size_t d = 0; d < dims; ++d) {
    if (lengths[d] == 0) return runs;  // empty box: no runs
  }
  // The dimensions from `k` on make one run: those after k are covered whole.
  std::size_t k = dims;
  uint64_t inner = 1;  // elements of one index of dimension k - 1 (product of shape[k..])
  while (k > 0 && offsets[k - 1] == 0 && lengths[k - 1] == shape[k - 1]) {
    --k;
    inner *= static_cast<uint64_t>(shape[k]);
  }
  // The last dimension the box does not cover whole joins the run with its length.
  uint64_t run_elements = inner;
  uint64_t stride = inner;
  std::size_t outer = k;
  if (k > 0) {
    outer = k - 1;
    run_elements = inner * static_cast<uint64_t>(lengths[outer]);
  }
  runs.run_bytes = run_elements * element_size;
  uint64_t first = (k > 0 ? static_cast<uint64_t>(offsets[outer]) * stride : 0);
  // Dimensions [0, outer) are iterated; strides in elements, row-major.
  std::vector<uint64_t> strides(outer);
  uint64_t s = k > 0 ? stride * static_cast<uint64_t>(shape[outer]) : 1;
  for (std::size_t d = outer; d-- > 0;) {
    strides[d] = s;
    s *= static_cast<uint64_t>(shape[d]);
  }
  runs.count = 1;
  for (std::size_t d = 0; d < outer; ++d) {
    first += static_cast<uint64_t>(offsets[d]) * strides[d];
    runs.count *= static_cast<uint64_t>(lengths[d]);
    runs.strides.push_back(strides[d] * element_size);
    runs.starts.push_back(offsets[d]);
    runs.lengths.push_back(lengths[d]);
  }
  runs.first = first * element_size;
  return runs;
}

void BoxRuns::for_each(
    const std::function<void(uint64_t tensor_offset, uint64_t box_offset)>& run) const {
  if (count == 0) return;
  const std::size_t dims = lengths.size();
  std::vector<int64_t> index(dims, 0);
  uint64_t offset = first;
  for (uint64_t n = 0; n < count; ++n) {
    run(offset, n * run_bytes);
    // Advance the row-major counter over the iterated dimensions.
    for (std::size_t d = dims; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < lengths[d]) break;
      offset -= strides[d] * static_cast<uint64_t>(lengths[d]);
      index[d] = 0;
    }
  }
}

}  // namespace dcpp::detail
