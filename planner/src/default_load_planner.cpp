// DCP's DefaultLoadPlanner and _EmptyStateDictLoadPlanner. Each local chunk of each tensor is
// intersected with every saved chunk of its key; the overlaps become read items, so any saved
// sharding loads into any other. Every element of every local chunk must be covered; when one is
// not, the error names the key and the region no saved chunk holds.

#include <dcpp/planner/load_planner.h>

#include "planner_helpers.h"
#include "uncovered_region.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace dcpp {

namespace {

std::string key_list(const std::vector<std::string>& keys) {
  std::string joined;
  for (const std::string& key : keys) {
    joined += (joined.empty() ? "'" : ", '") + key + "'";
  }
  return joined;
}

class DefaultLoadPlanner : public LoadPlanner {
 public:
  explicit DefaultLoadPlanner(bool allow_partial_load) : allow_partial_load_(allow_partial_load) {}

  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override {
    metadata_ = &metadata;
    entries_ = flatten_state_dict(state_dict);
    by_key_.clear();
    for (const FlatEntry& entry : entries_) {
      by_key_.emplace(entry.key, &entry);
    }
  }

  LoadPlan create_local_plan() override {
    std::unordered_map<std::string, const StorageMetadata*> saved;
    for (const auto& [key, storage] : metadata_->state_dict_metadata) {
      saved.emplace(key, &storage);
    }
    report_ = IncompatibleKeys{};
    chunk_cache_.clear();
    LoadPlan plan;
    for (const FlatEntry& entry : entries_) {
      auto found = saved.find(entry.key);
      if (found == saved.end()) {
        report_.missing_keys.push_back(entry.key);
        continue;
      }
      const StateValue& value = *entry.value;
      const bool wants_tensor = value.is_tensor() || value.is_sharded_tensor();
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(found->second)) {
        if (!wants_tensor) {
          throw CheckpointError(ErrorKind::kIncompatible,
                                "key '" + entry.key + "' is a tensor in the checkpoint but a " +
                                    value.kind_name() + " in the state dict being loaded");
        }
        plan_tensor(entry.key, value, *tensor, plan);
      } else {
        if (wants_tensor) {
          throw CheckpointError(ErrorKind::kIncompatible,
                                "key '" + entry.key +
                                    "' is a non-tensor value in the checkpoint but a tensor in the "
                                    "state dict being loaded");
        }
        ReadItem item;
        item.type = LoadItemType::kBytes;
        item.dest_index = MetadataIndex{entry.key, std::nullopt, std::nullopt};
        item.storage_index = item.dest_index;
        plan.items.push_back(std::move(item));
      }
    }
    std::unordered_set<std::string> requested;
    for (const FlatEntry& entry : entries_) {
      requested.insert(entry.key);
    }
    for (const auto& [key, storage] : metadata_->state_dict_metadata) {
      if (requested.count(key) == 0) {
        report_.unexpected_keys.push_back(key);
      }
    }
    if (!report_.missing_keys.empty() && !allow_partial_load_) {
      throw CheckpointError(
          ErrorKind::kIncompatible,
          "the checkpoint lacks " + std::to_string(report_.missing_keys.size()) +
              " key(s) of the state dict being loaded: " + key_list(report_.missing_keys) +
              (report_.unexpected_keys.empty() ? std::string()
                                               : "; it has these keys that were not asked for: " +
                                                     key_list(report_.unexpected_keys)) +
              ". Load with allow_partial_load to load the rest");
    }
    return plan;
  }

  std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) override { return plans; }
  LoadPlan finish_plan(LoadPlan central_plan) override { return central_plan; }

  // CPU destinations are read into in place; others (CUDA) through a CPU scratch tensor that
  // commit_tensor copies over, as DCP does.
  at::Tensor resolve_tensor(const ReadItem& item) override {
    const detail::LocalChunk& chunk = find_chunk(item.dest_index);
    at::Tensor view = detail::narrow_to_box(chunk.tensor, item.dest_offsets, item.lengths);
    return view.device().is_cpu() ? view : at::empty(view.sizes(), view.options().device(at::kCPU));
  }

  void commit_tensor(const ReadItem& item, const at::Tensor& tensor) override {
    const detail::LocalChunk& chunk = find_chunk(item.dest_index);
    if (!chunk.tensor.device().is_cpu()) {
      detail::narrow_to_box(chunk.tensor, item.dest_offsets, item.lengths).copy_(tensor);
    }
  }

  void load_bytes(const ReadItem& item, c10::IValue value) override {
    auto found = by_key_.find(item.dest_index.fqn);
    if (found == by_key_.end()) {
      throw CheckpointError(ErrorKind::kUsage,
                            "load plan names key '" + item.dest_index.fqn +
                                "', which is not in the state dict being loaded");
    }
    std::lock_guard<std::mutex> lock(bytes_mutex_);
    *found->second->value = StateValue(std::move(value));
  }

  IncompatibleKeys report() const override { return report_; }

 private:
  void plan_tensor(const std::string& key, const StateValue& value,
                   const TensorStorageMetadata& saved, LoadPlan& plan) {
    const std::vector<int64_t> shape = detail::global_shape(value);
    const at::ScalarType dtype = detail::value_dtype(value);
    if (shape != saved.size || dtype != saved.properties.dtype) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            "key '" + key + "': the checkpoint holds " +
                                c10::toString(saved.properties.dtype) + " of shape " +
                                detail::shape_string(saved.size) + ", the state dict expects " +
                                c10::toString(dtype) + " of shape " + detail::shape_string(shape) +
                                "; convert one of them or load with another state dict");
    }
    const std::vector<detail::LocalChunk>& chunks = chunk_cache_[key] = detail::local_chunks(value);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      int64_t covered = 0;
      std::vector<ReadItem> items = detail::read_items_for_chunk(
          key, chunks[i], static_cast<int64_t>(i), saved.chunks, &covered);
      if (covered != chunks[i].tensor.numel()) {
        throw_uncovered(key, chunks[i], saved, covered);
      }
      plan.items.insert(plan.items.end(), std::make_move_iterator(items.begin()),
                        std::make_move_iterator(items.end()));
    }
  }

  // A local chunk the saved chunks do not cover: names the key and the region no chunk holds.
  [[noreturn]] static void throw_uncovered(const std::string& key, const detail::LocalChunk& chunk,
                                           const TensorStorageMetadata& saved, int64_t covered) {
    const std::vector<int64_t> sizes = chunk.tensor.sizes().vec();
    const std::string local = "the local chunk at offsets " + detail::shape_string(chunk.offsets) +
                              " of sizes " + detail::shape_string(sizes);
    const auto region = detail::uncovered_region(chunk.offsets, sizes, saved.chunks);
    if (!region) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "key '" + key + "': the saved chunks cover " + std::to_string(covered) +
                                " of the " + std::to_string(chunk.tensor.numel()) +
                                " elements of " + local +
                                "; the checkpoint is incomplete or its chunks overlap");
    }
    throw CheckpointError(
        ErrorKind::kCorrupt,
        "key '" + key + "': no saved chunk holds elements " +
            detail::region_string(region->offsets, region->sizes) + " of the tensor of shape " +
            detail::shape_string(saved.size) + " (" + std::to_string(region->elements) +
            " of the " + std::to_string(chunk.tensor.numel()) + " elements of " + local +
            " are missing); the checkpoint is incomplete (a save that did not finish, or a "
            "checkpoint saved without collectives whose last ranks' __<rank>.metadata files are "
            "missing): load a complete checkpoint, or leave this key out of the state dict");
  }

  const detail::LocalChunk& find_chunk(const MetadataIndex& index) {
    // Filled while planning, read-only while the storage reader's threads call in.
    auto cached = chunk_cache_.find(index.fqn);
    if (cached == chunk_cache_.end()) {
      throw CheckpointError(ErrorKind::kUsage,
                            "load plan names key '" + index.fqn +
                                "', which is not a tensor of the state dict being loaded");
    }
    const auto& chunks = cached->second;
    const int64_t hint = index.index.value_or(-1);
    if (hint >= 0 && hint < static_cast<int64_t>(chunks.size()) &&
        chunks[static_cast<std::size_t>(hint)].offsets == index.offset) {
      return chunks[static_cast<std::size_t>(hint)];
    }
    for (const auto& chunk : chunks) {
      if (chunk.offsets == index.offset) {
        return chunk;
      }
    }
    throw CheckpointError(ErrorKind::kUsage, "load plan names a chunk of '" + index.fqn +
                                                 "' that this rank does not hold");
  }

 protected:
  bool allow_partial_load_;
  const Metadata* metadata_ = nullptr;
  std::vector<FlatEntry> entries_;
  std::unordered_map<std::string, const FlatEntry*> by_key_;
  std::unordered_map<std::string, std::vector<detail::LocalChunk>> chunk_cache_;
  std::mutex bytes_mutex_;
  IncompatibleKeys report_;
};

// Selects flat keys equal to a requested key or lying under one, by their object paths.
bool is_selected(const std::string& key, const ObjectPath* path,
                 const std::unordered_set<std::string>& keys) {
  if (keys.empty() || keys.count(key) > 0) {
    return true;
  }
  if (path == nullptr) {
    return false;
  }
  ObjectPath prefix;
  for (const PathElement& step : *path) {
    prefix.push_back(step);
    if (keys.count(join_path(prefix)) > 0) {
      return true;
    }
  }
  return false;
}

class EmptyStateDictLoadPlanner final : public DefaultLoadPlanner {
 public:
  explicit EmptyStateDictLoadPlanner(std::vector<std::string> keys)
      : DefaultLoadPlanner(/*allow_partial_load=*/false), keys_(keys.begin(), keys.end()) {}

  // Fills `state_dict`, which must be empty (as DCP asserts): entries inserted into a dict that
  // holds others could move them, and other steps of the load hold pointers to those.
  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override {
    if (!state_dict.empty()) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "the empty-state-dict load planner (load_from_keys) builds its state dict from the "
          "checkpoint, but was given one with " +
              std::to_string(state_dict.size()) + " keys (the first: '" + state_dict.begin()->key +
              "'); pass an empty StateDict, or load into this one with the default planner");
    }
    std::unordered_map<std::string, const ObjectPath*> paths;
    for (const auto& [key, path] : metadata.planner_data) {
      paths.emplace(key, &path);
    }
    for (const auto& [key, storage] : metadata.state_dict_metadata) {
      auto found = paths.find(key);
      const ObjectPath* path = found == paths.end() ? nullptr : found->second;
      if (!is_selected(key, path, keys_)) {
        continue;
      }
      StateValue value;
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
        value = at::empty(tensor->size, at::TensorOptions().dtype(tensor->properties.dtype));
      }
      if (path != nullptr) {
        set_element(state_dict, *path, std::move(value));
      } else {
        state_dict.insert(key, std::move(value));
      }
    }
    DefaultLoadPlanner::set_up(state_dict, metadata, is_coordinator);
  }

 private:
  std::unordered_set<std::string> keys_;
};

}  // namespace

std::shared_ptr<LoadPlanner> make_default_load_planner(bool allow_partial_load) {
  return std::make_shared<DefaultLoadPlanner>(allow_partial_load);
}

std::shared_ptr<LoadPlanner> make_empty_state_dict_load_planner(std::vector<std::string> keys) {
  return std::make_shared<EmptyStateDictLoadPlanner>(std::move(keys));
}

}  // namespace dcpp
