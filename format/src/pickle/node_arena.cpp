#include "format/pickle/node_arena.h"

#include "format/pickle/pickle_reader.h"

#include <algorithm>

namespace dcpp::detail {

PyObject* NodeArena::make_node() {
  if (block_ == blocks_.size() || block_used_ == blocks_[block_].capacity) {
    if (block_ < blocks_.size()) ++block_;
    if (block_ == blocks_.size()) {
      const std::size_t capacity =
          blocks_.empty() ? kFirstBlockSize : std::min(kBlockSize, 2 * blocks_.back().capacity);
      blocks_.push_back({std::make_unique<PyObject[]>(capacity), capacity});
      bytes_held_ += capacity * sizeof(PyObject);
    }
    block_used_ = 0;
  }
  ++node_count_;
  PyObject* node = &blocks_[block_].nodes[block_used_++];
  *node = PyObject();  // a reused block holds the nodes of before
  return node;
}

PyObject** NodeArena::make_items(std::size_t n) {
  if (n > kItemBlockSize / 4) {
    // Large enough to own a block; the shared block's remainder stays usable.
    large_items_.push_back(std::unique_ptr<PyObject*[]>(new PyObject*[n]));
    bytes_held_ += n * sizeof(PyObject*);
    large_items_bytes_ += n * sizeof(PyObject*);
    return large_items_.back().get();
  }
  if (item_block_ == item_blocks_.size() || n > kItemBlockSize - item_block_used_) {
    if (item_block_ < item_blocks_.size()) ++item_block_;
    if (item_block_ == item_blocks_.size()) {
      item_blocks_.push_back(std::unique_ptr<PyObject*[]>(new PyObject*[kItemBlockSize]));
      bytes_held_ += kItemBlockSize * sizeof(PyObject*);
    }
    item_block_used_ = 0;
  }
  PyObject** items = item_blocks_[item_block_].get() + item_block_used_;
  item_block_used_ += n;
  return items;
}

void NodeArena::reset() {
  bytes_held_ -= large_items_bytes_;
  large_items_bytes_ = 0;
  large_items_.clear();
  block_ = 0;
  block_used_ = 0;
  item_block_ = 0;
  item_block_used_ = 0;
  node_count_ = 0;
}

}  // namespace dcpp::detail
