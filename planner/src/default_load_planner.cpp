// DCP's DefaultLoadPlanner and _EmptyStateDictLoadPlanner. Each local chunk of each tensor is
// intersected with every saved chunk of its key; the overlaps become read items, so any saved
// sharding loads into any other. The saved chunks of a key must not overlap (checked once per key
// and load), and every element of every local chunk must be covered; when one is not, the error
// names the key and the region no saved chunk holds.

#include <dcpp/planner/load_planner.h>

#include "core/bounded_list.h"
#include "planner/planner_helpers.h"
#include "planner/saved_chunk_overlap.h"
#include "uncovered_region.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>

#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace dcpp {

namespace {

// A local chunk the saved chunks do not cover: names the key and the region no chunk holds.
[[noreturn]] void throw_uncovered(const std::string& key, const detail::LocalChunk& chunk,
                                  const TensorStorageMetadata& saved, int64_t covered) {
  const std::vector<int64_t> sizes = chunk.tensor.sizes().vec();
  const std::string local = "the local chunk at offsets " + detail::shape_string(chunk.offsets) +
                            " of sizes " + detail::shape_string(sizes);
  const auto region = detail::uncovered_region(chunk.offsets, sizes, saved.chunks);
  if (!region) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "key '" + key + "': the saved chunks cover " + std::to_string(covered) +
                              " of the " + std::to_string(chunk.tensor.numel()) + " elements of " +
                              local + "; the checkpoint is incomplete");
  }
  throw CheckpointError(
      ErrorKind::kCorrupt,
      "key '" + key + "': no saved chunk holds elements " +
          detail::region_string(region->offsets, region->sizes) + " of the tensor of shape " +
          detail::shape_string(saved.size) + " (" + std::to_string(region->elements) + " of the " +
          std::to_string(chunk.tensor.numel()) + " elements of " + local +
          " are missing); the checkpoint is incomplete (a save that did not finish, or a "
          "checkpoint saved without collectives whose last ranks' __<rank>.metadata files are "
          "missing): load a complete checkpoint, or leave this key out of the state dict");
}

}  // namespace

struct DefaultLoadPlanner::State {
  explicit State(bool allow_partial_load) : allow_partial_load(allow_partial_load) {}

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
    // Once per key, before any local chunk: with no two saved chunks overlapping, the elements
    // they give a local chunk are counted exactly, so a part that no chunk holds is found.
    detail::check_saved_chunks_disjoint(key, saved, *metadata);
    const std::vector<detail::LocalChunk>& chunks = chunk_cache[key] = detail::local_chunks(value);
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

  const detail::LocalChunk& find_chunk(const MetadataIndex& index) const {
    // Filled while planning, read-only while the storage reader's threads call in.
    auto cached = chunk_cache.find(index.fqn);
    if (cached == chunk_cache.end()) {
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

  const bool allow_partial_load;
  StateDict* state_dict = nullptr;
  const Metadata* metadata = nullptr;
  bool is_coordinator = false;
  std::vector<FlatEntry> entries;
  std::unordered_map<std::string, const FlatEntry*> by_key;
  std::unordered_map<std::string, std::vector<detail::LocalChunk>> chunk_cache;
  std::mutex bytes_mutex;
  IncompatibleKeys report;
};

DefaultLoadPlanner::DefaultLoadPlanner(bool allow_partial_load)
    : state_(std::make_unique<State>(allow_partial_load)) {}
DefaultLoadPlanner::~DefaultLoadPlanner() = default;

void DefaultLoadPlanner::set_up(StateDict& state_dict, const Metadata& metadata,
                                bool is_coordinator) {
  state_->state_dict = &state_dict;
  state_->metadata = &metadata;
  state_->is_coordinator = is_coordinator;
  state_->entries = flatten_state_dict(state_dict);
  state_->by_key.clear();
  for (const FlatEntry& entry : state_->entries) {
    state_->by_key.emplace(entry.key, &entry);
  }
}

LoadPlan DefaultLoadPlanner::create_local_plan() {
  State& s = *state_;
  std::unordered_map<std::string, const StorageMetadata*> saved;
  for (const auto& [key, storage] : metadata().state_dict_metadata) {
    saved.emplace(key, &storage);
  }
  s.report = IncompatibleKeys{};
  s.chunk_cache.clear();
  LoadPlan plan;
  for (const FlatEntry& entry : s.entries) {
    auto found = saved.find(entry.key);
    if (found == saved.end()) {
      s.report.missing_keys.push_back(entry.key);
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
      s.plan_tensor(entry.key, value, *tensor, plan);
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
  for (const FlatEntry& entry : s.entries) {
    requested.insert(entry.key);
  }
  for (const auto& [key, storage] : metadata().state_dict_metadata) {
    if (requested.count(key) == 0) {
      s.report.unexpected_keys.push_back(key);
    }
  }
  if (!s.report.missing_keys.empty() && !s.allow_partial_load) {
    // Each list names a few keys and counts the rest: every rank prints this message.
    const std::vector<std::string>& unexpected = s.report.unexpected_keys;
    throw CheckpointError(
        ErrorKind::kIncompatible,
        "the checkpoint lacks " + std::to_string(s.report.missing_keys.size()) +
            " key(s) of the state dict being loaded: " +
            detail::quoted_list(s.report.missing_keys) +
            (unexpected.empty()
                 ? std::string()
                 : "; it has " + std::to_string(unexpected.size()) +
                       " key(s) that were not asked for: " + detail::quoted_list(unexpected)) +
            ". Load with allow_partial_load to load the rest");
  }
  return plan;
}

std::vector<LoadPlan> DefaultLoadPlanner::create_global_plan(std::vector<LoadPlan> plans) {
  return plans;
}

LoadPlan DefaultLoadPlanner::finish_plan(LoadPlan central_plan) { return central_plan; }

// A destination off the CPU is read into host memory first, then copied over by commit_tensor:
// page-locked memory for a CUDA destination (libtorch's caching host allocator reuses it from one
// item to the next), so the copy to the device goes straight from it.
at::Tensor DefaultLoadPlanner::resolve_tensor(const ReadItem& item) {
  at::Tensor destination = transform_tensor(item, lookup_tensor(item.dest_index));
  if (destination.device().is_cpu()) {
    return destination;
  }
  return at::empty(destination.sizes(), destination.options().device(at::kCPU).pinned_memory(
                                            destination.device().is_cuda()));
}

void DefaultLoadPlanner::commit_tensor(const ReadItem& item, const at::Tensor& tensor) {
  at::Tensor destination = transform_tensor(item, lookup_tensor(item.dest_index));
  if (!destination.device().is_cpu()) {
    destination.copy_(tensor);
  }
}

void DefaultLoadPlanner::load_bytes(const ReadItem& item, c10::IValue value) {
  auto found = state_->by_key.find(item.dest_index.fqn);
  if (found == state_->by_key.end()) {
    throw CheckpointError(ErrorKind::kUsage, "load plan names key '" + item.dest_index.fqn +
                                                 "', which is not in the state dict being loaded");
  }
  std::lock_guard<std::mutex> lock(state_->bytes_mutex);
  StateValue& target = *found->second->value;
  const bool whole = target.is_value() && whole_value_of(target.value()) != nullptr;
  target = StateValue(whole ? whole_value(std::move(value)) : std::move(value));
}

IncompatibleKeys DefaultLoadPlanner::report() const { return state_->report; }

at::Tensor DefaultLoadPlanner::lookup_tensor(const MetadataIndex& index) {
  return state_->find_chunk(index).tensor;
}

at::Tensor DefaultLoadPlanner::transform_tensor(const ReadItem& item, const at::Tensor& tensor) {
  return detail::narrow_to_box(tensor, item.dest_offsets, item.lengths);
}

StateDict& DefaultLoadPlanner::state_dict() const {
  if (state_->state_dict == nullptr) {
    throw CheckpointError(ErrorKind::kUsage, "DefaultLoadPlanner::state_dict() before set_up()");
  }
  return *state_->state_dict;
}

const Metadata& DefaultLoadPlanner::metadata() const {
  if (state_->metadata == nullptr) {
    throw CheckpointError(ErrorKind::kUsage, "DefaultLoadPlanner::metadata() before set_up()");
  }
  return *state_->metadata;
}

bool DefaultLoadPlanner::is_coordinator() const { return state_->is_coordinator; }
bool DefaultLoadPlanner::allow_partial_load() const { return state_->allow_partial_load; }

namespace {

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

std::shared_ptr<LoadPlanner> make_empty_state_dict_load_planner(std::vector<std::string> keys) {
  return std::make_shared<EmptyStateDictLoadPlanner>(std::move(keys));
}

}  // namespace dcpp
