// A state checked against the layout of the memory step before it (memory_step_layout.h).

#include "storage/memory_step_layout.h"

#include "planner/planner_helpers.h"

#include <dcpp/state_dict/flatten.h>

#include <algorithm>

namespace dcpp::detail {
namespace {

// Whether `tensor`, a chunk at `offsets` of a tensor of shape `global`, is what `item` recorded
// (the DefaultSavePlanner's tensor_write_item of it).
bool matches(const WriteItem& item, const std::string& key, WriteItemType type,
             const at::Tensor& tensor, const std::vector<int64_t>& offsets,
             const std::vector<int64_t>& global) {
  if (item.type != type || !item.tensor_data || item.index.fqn != key ||
      item.index.offset != offsets) {
    return false;
  }
  const TensorWriteData& data = *item.tensor_data;
  return data.properties.dtype == tensor.scalar_type() &&
         data.properties.layout == tensor.layout() &&
         data.properties.requires_grad == tensor.requires_grad() && data.size == global &&
         tensor.sizes().equals(data.chunk.sizes);
}

// The bytes write_data keeps of a tensor item: on the CPU, contiguous.
at::Tensor kept_bytes(const at::Tensor& tensor) {
  at::Tensor kept = tensor.detach();
  if (!kept.is_cpu()) kept = kept.to(at::kCPU);
  return kept.is_contiguous() ? kept : kept.contiguous();
}

}  // namespace

bool lay_out_as(const StateDict& state_dict, const MemoryStepLayout& layout,
                std::vector<LaidOutItem>& out) {
  out.clear();
  // flatten_state_dict hands out mutable pointers into the tree; nothing here writes through them.
  const std::vector<FlatEntry> entries = flatten_state_dict(const_cast<StateDict&>(state_dict));
  if (entries.size() != layout.planner_data.size()) return false;
  std::size_t next = 0;  // the next of layout.items
  const auto take = [&](const std::string& key, WriteItemType type, const at::Tensor& tensor,
                        const std::vector<int64_t>& offsets, const std::vector<int64_t>& global) {
    if (next == layout.items.size() ||
        !matches(layout.items[next], key, type, tensor, offsets, global)) {
      return false;
    }
    out.push_back(LaidOutItem{&layout.items[next++], kept_bytes(tensor), nullptr});
    return out.back().tensor.nbytes() == layout.item_bytes[next - 1];
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const FlatEntry& entry = entries[i];
    if (entry.key != layout.planner_data[i].first || entry.path != layout.planner_data[i].second) {
      return false;
    }
    const StateValue& value = *entry.value;
    if (value.is_tensor() || value.is_sharded_tensor()) {
      // As the DefaultSavePlanner's create_local_plan: a plain tensor is one item; a sharded
      // one an item per local shard, an empty shard left out unless the tensor is empty.
      const std::vector<int64_t> global = global_shape(value);
      const bool tensor_is_empty = std::find(global.begin(), global.end(), 0) != global.end();
      const WriteItemType type = value.is_tensor() ? WriteItemType::kTensor : WriteItemType::kShard;
      for (const LocalChunk& chunk : local_chunks(value)) {
        if (type == WriteItemType::kShard && chunk.tensor.numel() == 0 && !tensor_is_empty) {
          continue;
        }
        if (!take(entry.key, type, chunk.tensor, chunk.offsets, global)) return false;
      }
    } else {
      if (next == layout.items.size() || layout.items[next].type != WriteItemType::kBytes ||
          layout.items[next].index.fqn != entry.key) {
        return false;
      }
      out.push_back(LaidOutItem{&layout.items[next++], at::Tensor(), &value});
    }
  }
  return next == layout.items.size();
}

}  // namespace dcpp::detail
