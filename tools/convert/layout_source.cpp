// A checkpoint at a location as a CheckpointSource, through its layout's StorageReader (DCP's:
// `.metadata` lists the entries): a tensor is assembled from its chunks by the reader (CRC-32s
// checked), straight into one full tensor, so reading it costs that tensor's memory plus one small
// item at a time. A legacy Megatron-Core checkpoint's `common.pt` is the entry current Megatron
// writes its common state as, `common_state/shard_0_1`.

#include "common/chunk_coverage.h"
#include "convert/checkpoint_source.h"
#include "convert/conversion.h"

#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

namespace dcpp::tools {

namespace {

// Receives the items of one read: tensor boxes land in views of `full`, a value in `value`.
class AssemblingPlanner final : public LoadPlanner {
 public:
  at::Tensor full;
  c10::IValue value;

  void set_up(StateDict&, const Metadata&, bool) override {}
  LoadPlan create_local_plan() override { return {}; }
  std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) override { return plans; }
  LoadPlan finish_plan(LoadPlan plan) override { return plan; }
  at::Tensor resolve_tensor(const ReadItem& item) override {
    at::Tensor view = full;
    for (std::size_t d = 0; d < item.lengths.size(); ++d) {
      view = view.narrow(static_cast<int64_t>(d), item.dest_offsets[d], item.lengths[d]);
    }
    return view;
  }
  void commit_tensor(const ReadItem&, const at::Tensor&) override {}  // read in place
  void load_bytes(const ReadItem&, c10::IValue loaded) override { value = std::move(loaded); }
  IncompatibleKeys report() const override { return {}; }
};

class LayoutSource final : public CheckpointSource {
 public:
  LayoutSource(const Location& location, const CheckpointLayout& layout)
      : location_(location.url()),
        format_(layout.name() == kDcpLayout ? "dcp" : layout.name()),
        reader_(layout.make_reader(location, {})) {
    metadata_ = reader_->read_metadata();
    reader_->set_up(metadata_, 0, true);
    std::map<std::string, ObjectPath> paths(metadata_.planner_data.begin(),
                                            metadata_.planner_data.end());
    for (const auto& [key, stored] : metadata_.state_dict_metadata) {
      SourceEntry entry;
      entry.key = key;
      auto path = paths.find(key);
      entry.path = path != paths.end() ? path->second : ObjectPath{key};
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
        entry.is_tensor = true;
        entry.dtype = tensor->properties.dtype;
        entry.shape = tensor->size;
        tensors_.emplace(key, tensor);
      }
      entries_.push_back(std::move(entry));
    }
    legacy_common_ = legacy_megatron_common_state(location, layout, metadata_);
    if (legacy_common_) {
      SourceEntry entry;
      entry.key = kMegatronCommonStateKey;
      entry.path = ObjectPath{entry.key};
      entries_.push_back(std::move(entry));
    }
  }

  std::string format() const override { return format_; }
  const std::vector<SourceEntry>& entries() const override { return entries_; }

  at::Tensor read_tensor(const SourceEntry& entry) override {
    const TensorStorageMetadata& stored = *tensors_.at(entry.key);
    const std::vector<std::string> problems = chunk_coverage_problems(stored.size, stored.chunks);
    if (!problems.empty()) {
      throw CheckpointError(ErrorKind::kCorrupt, "checkpoint " + location_ + ", key '" + entry.key +
                                                     "': " + problems.front());
    }
    LoadPlan plan;
    for (std::size_t i = 0; i < stored.chunks.size(); ++i) {
      const ChunkStorageMetadata& chunk = stored.chunks[i];
      // A chunk without elements has nothing to read (and the item reader refuses some empty
      // shapes, e.g. (0, 3), as overflowing: see the report of issue 7).
      if (std::find(chunk.sizes.begin(), chunk.sizes.end(), 0) != chunk.sizes.end()) continue;
      ReadItem item;
      item.type = LoadItemType::kTensor;
      item.dest_index = MetadataIndex{entry.key, chunk.offsets, static_cast<int64_t>(i)};
      item.dest_offsets = chunk.offsets;
      item.storage_index = item.dest_index;
      item.storage_offsets.assign(chunk.offsets.size(), 0);
      item.lengths = chunk.sizes;
      plan.items.push_back(std::move(item));
    }
    AssemblingPlanner planner;
    planner.full = at::empty(stored.size, at::TensorOptions().dtype(stored.properties.dtype));
    reader_->read_data(plan, planner);
    return planner.full;
  }

  c10::IValue read_value(const SourceEntry& entry) override {
    if (legacy_common_ && entry.key == kMegatronCommonStateKey) return *legacy_common_;
    ReadItem item;
    item.type = LoadItemType::kBytes;
    item.dest_index = MetadataIndex{entry.key, std::nullopt, std::nullopt};
    item.storage_index = item.dest_index;
    LoadPlan plan;
    plan.items.push_back(item);
    AssemblingPlanner planner;
    reader_->read_data(plan, planner);
    return planner.value;
  }

 private:
  std::string location_;  // for messages
  std::string format_;
  std::unique_ptr<StorageReader> reader_;
  Metadata metadata_;
  std::vector<SourceEntry> entries_;
  std::map<std::string, const TensorStorageMetadata*> tensors_;
  std::optional<c10::IValue> legacy_common_;  // a legacy Megatron checkpoint's common.pt
};

}  // namespace

std::optional<c10::IValue> legacy_megatron_common_state(const Location& location,
                                                        const CheckpointLayout& layout,
                                                        const Metadata& metadata) {
  const auto has = [](const Metadata& m, const std::string& key) {
    return std::any_of(m.state_dict_metadata.begin(), m.state_dict_metadata.end(),
                       [&](const auto& entry) { return entry.first == key; });
  };
  if (layout.name() != kMegatronLayout || !location.is_directory() ||
      has(metadata, kMegatronCommonStateKey) ||
      !std::filesystem::is_regular_file(location.path() / kMegatronLegacyCommonFile)) {
    return std::nullopt;
  }
  c10::impl::GenericList payload(c10::AnyType::get());  // as current Megatron stores it
  payload.push_back(to_ivalue(StateValue(megatron::load_common_state_dict(location.path()))));
  return c10::IValue(std::move(payload));
}

std::unique_ptr<CheckpointSource> open_layout_source(const Location& location,
                                                     const CheckpointLayout& layout) {
  return std::make_unique<LayoutSource>(location, layout);
}

}  // namespace dcpp::tools
