#pragma once
// Boxes of a tensor: a chunk, a shard or a piece at `offsets` with `sizes`.

#include <c10/util/ArrayRef.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <queue>
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
/// boxes' offsets differ most: where the boxes differ in two dimensions at most (split along one,
/// FSDP's rows or tensor parallel's columns, or a grid of any proportions), the boxes still open
/// where a box starts are disjoint in the other, and an ordered map of them finds the one it could
/// meet: O(n log n). Where they differ in more, each box is compared with every box still open
/// where it starts. Comparing every pair took minutes at a million chunks; the plain sweep, 4 s
/// for a 1,000 x 1,000 grid (bench/chunk_overlap_bench).
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
  const auto pair_of = [](std::size_t a, std::size_t b) {
    return std::make_pair(std::min(a, b), std::max(a, b));
  };
  // The dimensions in which boxes differ; in the others every box spans the same range.
  const BoxView& first = boxes[order.front()];
  std::vector<std::size_t> varying;
  for (std::size_t d = 0; d < first.offsets.size(); ++d) {
    for (const std::size_t k : order) {
      if (boxes[k].offsets[d] != first.offsets[d] || boxes[k].sizes[d] != first.sizes[d]) {
        varying.push_back(d);
        break;
      }
    }
  }
  if (varying.empty()) return pair_of(order[0], order[1]);  // equal boxes, or 0-d: one element
  std::size_t sweep = varying.front(), most_distinct = 0;
  std::vector<int64_t> offsets(order.size());
  for (const std::size_t d : varying) {
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
  {  // by start along the sweep, then position: sorted by value, not through the boxes' vectors
    std::vector<std::pair<int64_t, std::size_t>> by_start(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) by_start[k] = {start(order[k]), order[k]};
    std::sort(by_start.begin(), by_start.end());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = by_start[k].second;
  }
  if (varying.size() == 2) {
    // The open boxes hold the sweep's position, so while no two overlap they are disjoint across
    // (the other dimension): of those that start across before a box ends, only the last one can
    // reach into it.
    const std::size_t across = varying[0] == sweep ? varying[1] : varying[0];
    const auto begin_across = [&](std::size_t i) { return boxes[i].offsets[across]; };
    const auto end_across = [&](std::size_t i) {
      return box_end(begin_across(i), boxes[i].sizes[across]);
    };
    std::map<int64_t, std::size_t> open;              // where an open box starts across -> the box
    using Closing = std::pair<int64_t, std::size_t>;  // where an open box ends, along the sweep
    std::priority_queue<Closing, std::vector<Closing>, std::greater<Closing>> closing;
    for (const std::size_t i : order) {
      for (; !closing.empty() && closing.top().first <= start(i); closing.pop()) {
        open.erase(begin_across(closing.top().second));
      }
      const auto after = open.lower_bound(end_across(i));
      if (after != open.begin() && end_across(std::prev(after)->second) > begin_across(i)) {
        return pair_of(i, std::prev(after)->second);
      }
      open.emplace(begin_across(i), i);
      closing.emplace(end(i), i);
    }
    return std::nullopt;
  }
  std::vector<std::size_t> open;  // boxes that start before the current one and end after it
  for (const std::size_t i : order) {
    open.erase(
        std::remove_if(open.begin(), open.end(), [&](std::size_t o) { return end(o) <= start(i); }),
        open.end());
    for (const std::size_t o : open) {
      if (boxes_overlap(boxes[i], boxes[o])) return pair_of(i, o);
    }
    open.push_back(i);
  }
  return std::nullopt;
}

}  // namespace dcpp::detail
