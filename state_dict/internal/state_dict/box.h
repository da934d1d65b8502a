#pragma once
// Boxes of a tensor: a chunk, a shard or a piece at `offsets` with `sizes`.

#include <c10/util/ArrayRef.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace dcpp::detail {

/// Whether the box at `offsets` with `sizes` lies inside a tensor of `shape`: as many dimensions,
/// offsets and sizes not negative, and offset + size within the shape in every dimension (an empty
/// box may sit at the end). Safe for any int64 values (no overflow).
inline bool box_lies_inside(c10::ArrayRef<int64_t> offsets, c10::ArrayRef<int64_t> sizes,
                            c10::ArrayRef<int64_t> shape) {
  if (offsets.size() != shape.size() || sizes.size() != shape.size()) return false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > shape[d] ||
        sizes[d] > shape[d] - offsets[d]) {
      return false;
    }
  }
  return true;
}

/// A box as `first_overlap` reads it; views of the caller's vectors.
struct BoxView {
  c10::ArrayRef<int64_t> offsets;
  c10::ArrayRef<int64_t> sizes;
};

/// Where a box of `size` > 0 at `offset` ends, saturated at INT64_MAX instead of overflowing.
inline int64_t box_end(int64_t offset, int64_t size) {
  return offset > std::numeric_limits<int64_t>::max() - size ? std::numeric_limits<int64_t>::max()
                                                             : offset + size;
}

/// Whether two boxes of as many dimensions share an element (a box with a size of 0 or less shares
/// none). Safe for any int64 values.
inline bool boxes_overlap(const BoxView& a, const BoxView& b) {
  for (std::size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.sizes[d] <= 0 || b.sizes[d] <= 0 || a.offsets[d] >= box_end(b.offsets[d], b.sizes[d]) ||
        b.offsets[d] >= box_end(a.offsets[d], a.sizes[d])) {
      return false;
    }
  }
  return true;
}

/// A pair (i, j), i < j, of `boxes` that share an element, or none when no two do. Every box has
/// as many dimensions; any int64 values are safe. A sweep along the dimension in which the
/// boxes' offsets differ most compares each box only with those still open where it starts:
/// O(n log n) for boxes split along one dimension (FSDP's rows, tensor parallel's columns) or a
/// grid, where comparing every pair took minutes at a million chunks.
inline std::optional<std::pair<std::size_t, std::size_t>> first_overlap(
    const std::vector<BoxView>& boxes) {
  std::vector<std::size_t> order;  // boxes that hold elements
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const auto sizes = boxes[i].sizes;
    if (std::all_of(sizes.begin(), sizes.end(), [](int64_t s) { return s > 0; })) {
      order.push_back(i);
    }
  }
  if (order.size() < 2) return std::nullopt;
  const std::size_t dims = boxes[order.front()].offsets.size();
  if (dims == 0) return std::make_pair(order[0], order[1]);  // both are the one element
  std::size_t sweep = 0, most_distinct = 0;
  std::vector<int64_t> offsets(order.size());
  for (std::size_t d = 0; d < dims; ++d) {
    for (std::size_t k = 0; k < order.size(); ++k) offsets[k] = boxes[order[k]].offsets[d];
    std::sort(offsets.begin(), offsets.end());
    const auto distinct =
        static_cast<std::size_t>(std::unique(offsets.begin(), offsets.end()) - offsets.begin());
    if (distinct > most_distinct) {
      most_distinct = distinct;
      sweep = d;
    }
  }
  const auto start = [&](std::size_t i) { return boxes[i].offsets[sweep]; };
  const auto end = [&](std::size_t i) { return box_end(start(i), boxes[i].sizes[sweep]); };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return start(a) < start(b); });
  std::vector<std::size_t> open;  // boxes that start before the current one and end after it
  for (const std::size_t i : order) {
    open.erase(
        std::remove_if(open.begin(), open.end(), [&](std::size_t o) { return end(o) <= start(i); }),
        open.end());
    for (const std::size_t o : open) {
      if (boxes_overlap(boxes[i], boxes[o])) return std::make_pair(std::min(i, o), std::max(i, o));
    }
    open.push_back(i);
  }
  return std::nullopt;
}

}  // namespace dcpp::detail
