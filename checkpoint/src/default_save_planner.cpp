// DCP's DefaultSavePlanner: one write item per tensor, per local shard, and per non-tensor leaf;
// duplicates across ranks are written once (by the rank with the fewest planned bytes so far, as
// `dedup_save_plans` does); the coordinator builds the Metadata from all plans.

#include <dcpp/checkpoint/save_planner.h>

#include "planner_helpers.h"
#include "save_plan_validation.h"

#include <dcpp/core/checkpoint_error.h>

#include <map>
#include <unordered_map>

namespace dcpp {

int64_t WriteItem::tensor_storage_size() const {
  if (!tensor_data) {
    return 0;
  }
  int64_t numel = 1;
  for (int64_t s : tensor_data->chunk.sizes) {
    numel *= s;
  }
  return numel * static_cast<int64_t>(c10::elementSize(tensor_data->properties.dtype));
}

namespace {

TensorProperties properties_of(const at::Tensor& tensor) {
  TensorProperties properties;
  properties.dtype = tensor.scalar_type();
  properties.layout = tensor.layout();
  properties.requires_grad = tensor.requires_grad();
  return properties;
}

WriteItem tensor_write_item(const std::string& fqn, const detail::LocalChunk& chunk,
                            const std::vector<int64_t>& size, WriteItemType type) {
  WriteItem item;
  item.index = MetadataIndex{fqn, chunk.offsets, std::nullopt};
  item.type = type;
  item.tensor_data =
      TensorWriteData{ChunkStorageMetadata{chunk.offsets, chunk.tensor.sizes().vec()},
                      properties_of(chunk.tensor), size};
  return item;
}

// Removes items planned on several ranks from all but one: the rank with the fewest bytes planned
// so far, visiting items in the order they were first planned.
void dedup_save_plans(std::vector<SavePlan>& plans) {
  std::map<MetadataIndex, std::vector<std::size_t>> ranks_of;
  std::vector<const WriteItem*> first_seen;
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    for (const WriteItem& item : plans[rank].items) {
      auto& ranks = ranks_of[item.index];
      if (ranks.empty()) {
        first_seen.push_back(&item);
      }
      ranks.push_back(rank);
    }
  }
  std::vector<int64_t> planned_bytes(plans.size(), 0);
  std::map<MetadataIndex, std::size_t> writer_of;
  for (const WriteItem* item : first_seen) {
    const auto& ranks = ranks_of[item->index];
    std::size_t chosen = ranks.front();
    for (std::size_t rank : ranks) {
      if (planned_bytes[rank] < planned_bytes[chosen]) {
        chosen = rank;
      }
    }
    planned_bytes[chosen] += item->tensor_storage_size();
    writer_of.emplace(item->index, chosen);
  }
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    auto& items = plans[rank].items;
    items.erase(
        std::remove_if(items.begin(), items.end(),
                       [&](const WriteItem& item) { return writer_of[item.index] != rank; }),
        items.end());
  }
}

class DefaultSavePlanner final : public SavePlanner {
 public:
  void set_up(StateDict& state_dict, bool is_coordinator) override {
    entries_ = flatten_state_dict(state_dict);
    by_key_.clear();
    for (const FlatEntry& entry : entries_) {
      by_key_.emplace(entry.key, &entry);
    }
  }

  SavePlan create_local_plan() override {
    SavePlan plan;
    for (const FlatEntry& entry : entries_) {
      const StateValue& value = *entry.value;
      if (value.is_tensor()) {
        plan.items.push_back(tensor_write_item(entry.key, detail::local_chunks(value).front(),
                                               value.tensor().sizes().vec(),
                                               WriteItemType::kTensor));
      } else if (value.is_sharded_tensor()) {
        for (const detail::LocalChunk& chunk : detail::local_chunks(value)) {
          plan.items.push_back(tensor_write_item(
              entry.key, chunk, value.sharded_tensor().global_shape(), WriteItemType::kShard));
        }
      } else {
        WriteItem item;
        item.index = MetadataIndex{entry.key, std::nullopt, std::nullopt};
        item.type = WriteItemType::kBytes;
        plan.items.push_back(std::move(item));
      }
      plan.planner_data.emplace_back(entry.key, entry.path);
    }
    return plan;
  }

  std::pair<std::vector<SavePlan>, Metadata> create_global_plan(
      std::vector<SavePlan> plans) override {
    dedup_save_plans(plans);
    detail::validate_global_save_plan(plans);
    Metadata metadata;
    std::unordered_map<std::string, std::size_t> position;
    for (SavePlan& plan : plans) {
      for (WriteItem& item : plan.items) {
        auto [it, added] = position.emplace(item.index.fqn, metadata.state_dict_metadata.size());
        if (added) {
          metadata.state_dict_metadata.emplace_back(
              item.index.fqn, item.is_tensor()
                                  ? StorageMetadata(TensorStorageMetadata{
                                        item.tensor_data->properties, item.tensor_data->size, {}})
                                  : StorageMetadata(BytesStorageMetadata{}));
        }
        auto& stored = metadata.state_dict_metadata[it->second].second;
        if (item.is_tensor() != std::holds_alternative<TensorStorageMetadata>(stored)) {
          throw CheckpointError("key '" + item.index.fqn +
                                "' is a tensor on some ranks and a value on others");
        }
        if (auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
          item.index.index = static_cast<int64_t>(tensor->chunks.size());
          tensor->chunks.push_back(item.tensor_data->chunk);
        }
      }
    }
    std::unordered_map<std::string, bool> seen;
    for (const SavePlan& plan : plans) {
      for (const auto& [key, path] : plan.planner_data) {
        if (seen.emplace(key, true).second) {
          metadata.planner_data.emplace_back(key, path);
        }
      }
    }
    return {std::move(plans), std::move(metadata)};
  }

  SavePlan finish_plan(SavePlan central_plan) override { return central_plan; }

  WriteItemData resolve_data(const WriteItem& item) override {
    auto found = by_key_.find(item.index.fqn);
    if (found == by_key_.end()) {
      throw CheckpointError("save plan names key '" + item.index.fqn +
                            "', which is not in the state dict being saved");
    }
    const StateValue& value = *found->second->value;
    if (item.type == WriteItemType::kBytes) {
      return detail::to_saved_value(value);
    }
    for (const detail::LocalChunk& chunk : detail::local_chunks(value)) {
      if (item.index.offset == chunk.offsets) {
        return chunk.tensor.detach();
      }
    }
    throw CheckpointError("save plan names a chunk of '" + item.index.fqn + "' at offsets " +
                          detail::shape_string(item.index.offset.value_or(std::vector<int64_t>{})) +
                          " that this rank does not hold");
  }

 private:
  std::vector<FlatEntry> entries_;
  std::unordered_map<std::string, const FlatEntry*> by_key_;
};

}  // namespace

std::shared_ptr<SavePlanner> make_default_save_planner() {
  return std::make_shared<DefaultSavePlanner>();
}

}  // namespace dcpp
