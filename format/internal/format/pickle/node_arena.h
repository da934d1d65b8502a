#pragma once
// Storage for the nodes of an unpickled tree and their item pointers: blocks, so that a pickle of
// millions of small objects costs a few allocations per 4096 nodes, not one or more per node.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dcpp::detail {

struct PyObject;

class NodeArena {
 public:
  /// A node, value-initialised, whose address stays valid until reset() or destruction.
  PyObject* make_node();
  /// Storage for `n` item pointers, uninitialised, valid as long as the nodes.
  PyObject** make_items(std::size_t n);
  /// Forgets every node and item handed out; keeps the blocks for the next ones (large item blocks
  /// are freed).
  void reset();

  std::size_t node_count() const { return node_count_; }
  /// Bytes of blocks held, used or not.
  std::size_t bytes_held() const { return bytes_held_; }

 private:
  static constexpr std::size_t kFirstBlockSize = 16;
  static constexpr std::size_t kBlockSize = 4096;
  static constexpr std::size_t kItemBlockSize = std::size_t{1} << 16;  // pointers

  struct NodeBlock {
    std::unique_ptr<PyObject[]> nodes;
    std::size_t capacity;
  };
  // Blocks double from 16 nodes up to 4096, so that a small pickle (a tensor item's data.pkl) does
  // not construct thousands of nodes it never uses. Blocks before `block_` are full; those after it
  // are spares that reset() left.
  std::vector<NodeBlock> blocks_;
  std::size_t block_ = 0;       // the block nodes come from; blocks_.size() when none yet
  std::size_t block_used_ = 0;  // nodes handed out from it
  std::vector<std::unique_ptr<PyObject*[]>> item_blocks_;  // shared blocks of kItemBlockSize
  std::size_t item_block_ = 0;                             // as block_
  std::size_t item_block_used_ = 0;
  std::vector<std::unique_ptr<PyObject*[]>> large_items_;  // each a container's own
  std::size_t large_items_bytes_ = 0;
  std::size_t node_count_ = 0;
  std::size_t bytes_held_ = 0;
};

}  // namespace dcpp::detail
