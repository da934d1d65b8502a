#pragma once
// The layout of a memory step: its write items in payload order, as the DefaultSavePlanner made
// them, and its flat keys. A step whose state has the same layout has the same Metadata, so the
// next memory step of a training loop can be written without planning (MemoryStepWriter::
// write_as_before).

#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

struct MemoryStepLayout {
  int rank = -1;                            // whose data file the Metadata names
  std::vector<WriteItem> items;             // in payload order
  std::vector<uint64_t> item_bytes;         // what each item took in the payload (no padding)
  OrderedEntries<ObjectPath> planner_data;  // every flat key and its path, in flatten order
};

/// One item of a state to write as a layout says: a tensor's bytes (a CPU, contiguous tensor)
/// or a value item (its flat key and value, to be archived).
struct LaidOutItem {
  const WriteItem* item = nullptr;
  at::Tensor tensor;                  // defined for tensor items
  const StateValue* value = nullptr;  // for value items
};

/// The items of `state_dict` (no Stateful left) in `layout`'s order, each checked against it: the
/// same flat keys and paths, in the same order, and for each key the write items the
/// DefaultSavePlanner would plan (planner_helpers.h, local_write_items: dtype, layout,
/// requires_grad, global shape, local chunks) equal to those recorded. Device tensors are copied to
/// the CPU and strided ones made contiguous, as write_data does. Returns false when anything
/// differs (nothing else to learn from it: plan the save).
bool lay_out_as(const StateDict& state_dict, const MemoryStepLayout& layout,
                std::vector<LaidOutItem>& out);

}  // namespace dcpp::detail
