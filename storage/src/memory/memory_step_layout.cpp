// A state checked against the layout of the memory step before it (memory_step_layout.h).

#include "storage/memory_step_layout.h"

#include "planner/planner_helpers.h"

#include <dcpp/state_dict/flatten.h>

namespace dcpp::detail {
namespace {

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
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const FlatEntry& entry = entries[i];
    if (entry.key != layout.planner_data[i].first || entry.path != layout.planner_data[i].second) {
      return false;
    }
    // The items the DefaultSavePlanner would plan for it, each the one recorded.
    for (LocalWriteItem& local : local_write_items(entry)) {
      if (next == layout.items.size() || !same_write_item(local.item, layout.items[next])) {
        return false;
      }
      LaidOutItem laid_out{&layout.items[next], at::Tensor(), nullptr};
      if (local.item.is_tensor()) {
        laid_out.tensor = kept_bytes(local.chunk);
        if (laid_out.tensor.nbytes() != layout.item_bytes[next]) return false;
      } else {
        laid_out.value = entry.value;
      }
      out.push_back(std::move(laid_out));
      ++next;
    }
  }
  return next == layout.items.size();
}

}  // namespace dcpp::detail
