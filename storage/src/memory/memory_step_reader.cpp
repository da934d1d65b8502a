// MemoryStepReader and the payload's decoding: memory steps read as a checkpoint (memory_step.h).
// The bytes are the rank's own, checked by the slot's CRC-32 before they get here; every size and
// offset is still checked against them, so that a payload that does not hold together is an error
// naming the region, never a read out of bounds.

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "memory/step_crc_check.h"
#include "storage/memory_payload.h"
#include "storage/per_rank_metadata.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <algorithm>

namespace dcpp {
using detail::decode_memory_payload;
using detail::memory_data_file;
using detail::memory_step_corrupt;
using detail::MemoryPayload;

class MemoryStepReader::Impl {
 public:
  Impl(std::vector<MemoryStep> steps, bool verify_crc);
  Metadata read_metadata() const;
  void set_up(const Metadata& metadata);
  void read_data(const LoadPlan& plan, LoadPlanner& planner) const;
  std::map<int, std::string> manifests() const;
  std::map<int, int> world_sizes() const;

 private:
  struct Held {
    MemoryStep step;
    MemoryPayload payload;
    std::unique_ptr<detail::StepCrcCheck> check;  // verify_crc's, over `step`
  };
  const Held& held_of_file(const std::string& file, const std::string& key) const;
  void read_tensor(const ReadItem& item, LoadPlanner& planner) const;
  void read_value(const ReadItem& item, LoadPlanner& planner) const;
  const StorageInfo& storage_of(const MetadataIndex& index) const;

  std::vector<Held> held_;  // ascending by rank
  const Metadata* metadata_ = nullptr;
  std::map<MetadataIndex, const StorageInfo*> storage_;
};

MemoryStepReader::MemoryStepReader(std::vector<MemoryStep> steps, bool verify_crc)
    : impl_(std::make_unique<Impl>(std::move(steps), verify_crc)) {}
MemoryStepReader::~MemoryStepReader() = default;
Metadata MemoryStepReader::read_metadata() { return impl_->read_metadata(); }
void MemoryStepReader::set_up(const Metadata& metadata, int /*rank*/, bool /*is_coordinator*/) {
  impl_->set_up(metadata);
}
void MemoryStepReader::read_data(const LoadPlan& plan, LoadPlanner& planner) {
  impl_->read_data(plan, planner);
}
std::map<int, std::string> MemoryStepReader::manifests() const { return impl_->manifests(); }
std::map<int, int> MemoryStepReader::world_sizes() const { return impl_->world_sizes(); }

MemoryStepReader::Impl::Impl(std::vector<MemoryStep> steps, bool verify_crc) {
  for (MemoryStep& step : steps) {
    MemoryPayload payload = decode_memory_payload(step.bytes, step.region);
    held_.push_back(Held{std::move(step), std::move(payload), nullptr});
  }
  std::sort(held_.begin(), held_.end(),
            [](const Held& a, const Held& b) { return a.payload.rank < b.payload.rank; });
  if (verify_crc) {  // each check refers to its Held's step: made once held_ no longer moves
    for (Held& held : held_) held.check = std::make_unique<detail::StepCrcCheck>(held.step);
  }
  for (std::size_t i = 1; i < held_.size(); ++i) {
    if (held_[i].payload.rank == held_[i - 1].payload.rank) {
      throw CheckpointError(ErrorKind::kUsage, "memory steps " + held_[i - 1].step.region +
                                                   " and " + held_[i].step.region +
                                                   " both hold rank " +
                                                   std::to_string(held_[i].payload.rank));
    }
  }
}

Metadata MemoryStepReader::Impl::read_metadata() const {
  if (held_.empty()) {
    throw CheckpointError(ErrorKind::kNotFound, "no memory step to read");
  }
  if (held_.size() == 1) return held_.front().payload.metadata;
  std::vector<detail::RankMetadata> ranks;
  for (const Held& held : held_) {
    ranks.push_back(
        detail::RankMetadata{held.payload.rank, held.step.region, held.payload.metadata});
  }
  return detail::merge_rank_metadata(ranks);
}

void MemoryStepReader::Impl::set_up(const Metadata& metadata) {
  metadata_ = &metadata;
  storage_.clear();
  for (const auto& [index, info] : metadata.storage_data) storage_[index] = &info;
}

std::map<int, std::string> MemoryStepReader::Impl::manifests() const {
  std::map<int, std::string> by_rank;
  for (const Held& held : held_) by_rank[held.payload.rank] = std::string(held.payload.manifest);
  return by_rank;
}

std::map<int, int> MemoryStepReader::Impl::world_sizes() const {
  std::map<int, int> by_rank;
  for (const Held& held : held_) by_rank[held.payload.rank] = held.payload.world_size;
  return by_rank;
}

const StorageInfo& MemoryStepReader::Impl::storage_of(const MetadataIndex& index) const {
  const auto found = storage_.find(index);
  if (found == storage_.end()) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "memory step: no storage entry for a chunk of '" + index.fqn + "'");
  }
  return *found->second;
}

const MemoryStepReader::Impl::Held& MemoryStepReader::Impl::held_of_file(
    const std::string& file, const std::string& key) const {
  for (const Held& held : held_) {
    if (memory_data_file(held.payload.rank) == file) return held;
  }
  throw CheckpointError(ErrorKind::kCorrupt, "memory step: '" + key + "' lies in '" + file +
                                                 "', which no memory step read holds");
}

void MemoryStepReader::Impl::read_tensor(const ReadItem& item, LoadPlanner& planner) const {
  const std::string& key = item.storage_index.fqn;
  const StorageInfo& info = storage_of(item.storage_index);
  const Held& held = held_of_file(info.relative_path, key);
  const std::string& where = held.step.region;
  const detail::MemoryChunk chunk =
      detail::memory_chunk(*metadata_, item.storage_index, info, held.payload, where);
  const std::vector<int64_t>& sizes = chunk.chunk->sizes;
  if (item.storage_offsets.size() != sizes.size() || item.lengths.size() != sizes.size()) {
    memory_step_corrupt(where, "a read of '" + key +
                                   "' has another number of dimensions than "
                                   "its chunk");
  }
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (item.storage_offsets[d] < 0 || item.lengths[d] < 0 ||
        item.storage_offsets[d] + item.lengths[d] > sizes[d]) {
      memory_step_corrupt(where, "a read of '" + key + "' goes outside its chunk");
    }
  }
  // The payload is read-only; the view is only ever copied from.
  at::Tensor source = at::from_blob(const_cast<char*>(chunk.bytes.data()), sizes,
                                    at::TensorOptions().dtype(chunk.tensor->properties.dtype));
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    source = source.narrow(static_cast<int64_t>(d), item.storage_offsets[d], item.lengths[d]);
  }
  at::Tensor dest = planner.resolve_tensor(item);
  if (dest.sizes() != source.sizes()) {
    throw CheckpointError(ErrorKind::kUsage, "memory step " + where + ": the target of '" + key +
                                                 "' does not have the shape of the box read");
  }
  const bool whole_chunk = source.numel() == c10::multiply_integers(sizes);
  if (held.check && !held.check->finished() && whole_chunk && dest.device().is_cpu() &&
      dest.scalar_type() == source.scalar_type() && dest.is_contiguous()) {
    held.check->copy(chunk.bytes, dest.data_ptr());  // copied and checksummed in one pass
  } else {
    dest.copy_(source);  // the bytes are checksummed with the rest by read_data's end
  }
  planner.commit_tensor(item, dest);
}

void MemoryStepReader::Impl::read_value(const ReadItem& item, LoadPlanner& planner) const {
  const StorageInfo& info = storage_of(item.storage_index);
  const std::string& key = item.storage_index.fqn;
  const Held& held = held_of_file(info.relative_path, key);
  const detail::MemorySource source(
      detail::memory_value_bytes(info, held.payload, key, held.step.region),
      held.step.region + ", key '" + key + "'");
  planner.load_bytes(item, detail::read_bytes_item(source, /*verify_crc=*/true));
}

void MemoryStepReader::Impl::read_data(const LoadPlan& plan, LoadPlanner& planner) const {
  for (const ReadItem& item : plan.items) {
    if (item.type == LoadItemType::kTensor) {
      read_tensor(item, planner);
    } else {
      read_value(item, planner);
    }
  }
  for (const Held& held : held_) {
    if (held.check) held.check->finish();
  }
}

}  // namespace dcpp
