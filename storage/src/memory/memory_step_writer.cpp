// MemoryStepWriter: a rank's save without collectives laid out as a memory slot's payload
// (memory_step.h), copied into the slot once, in finish.

#include "dcp_item_writer.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "planner/planner_helpers.h"
#include "storage/memory_payload.h"
#include "storage/memory_step_cache_state.h"
#include "storage/memory_step_layout.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/save_planner.h>

#include <ATen/ATen.h>

#include <cstring>
#include <deque>
#include <optional>
#include <typeinfo>

namespace dcpp {
using detail::add_write_results;
using detail::encode_metadata;
using detail::encode_value_pickle;
using detail::MemorySink;
using detail::write_pickled_bytes_item;

namespace {

constexpr uint64_t kPayloadAlignment = 64;
const char kPayloadZeros[kPayloadAlignment] = {};

void append_payload_u32(std::string& to, uint32_t value) {
  for (int i = 0; i < 4; ++i) to.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void append_payload_u64(std::string& to, uint64_t value) {
  for (int i = 0; i < 8; ++i) to.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t payload_padding(uint64_t size) {
  return (kPayloadAlignment - size % kPayloadAlignment) % kPayloadAlignment;
}

}  // namespace

class MemoryStepWriter::Impl {
 public:
  Impl(MemorySlots& slots, int64_t step, std::string save_id, int world_size, std::string manifest,
       MemoryStepCache* cache)
      : slots_(slots),
        step_(step),
        save_id_(std::move(save_id)),
        world_size_(world_size),
        manifest_(std::move(manifest)),
        cache_(cache) {}

  void set_up(int rank);
  void set_up_without_collectives(int rank);
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans);
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner);
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results);
  bool write_as_before(const StateDict& resolved, int rank);

  int slot() const { return slot_; }
  int64_t data_bytes() const { return static_cast<int64_t>(data_bytes_); }

 private:
  MemorySlots& slots_;
  int64_t step_;
  std::string save_id_;
  int world_size_;
  std::string manifest_;
  MemoryStepCache* cache_;
  int rank_ = -1;
  uint64_t data_bytes_ = 0;
  std::vector<BytePiece> data_pieces_;  // in order, padding included
  std::vector<at::Tensor> tensors_;     // what data_pieces_ point into
  std::deque<std::string> archives_;    // likewise (a deque: its strings never move)
  int slot_ = -1;
  // The layout write_data laid out (with the DefaultSavePlanner only), for finish to keep.
  std::optional<detail::MemoryStepLayout> layout_;

  // Adds an item's bytes to the payload (padded to kPayloadAlignment); where they landed.
  StorageInfo add_piece(const void* data, uint64_t size);
  // A tensor item's bytes (on the CPU, contiguous), kept until finish.
  StorageInfo add_tensor(at::Tensor kept);
  // A value item's archive (from the cache when it holds no tensor), kept until finish.
  StorageInfo add_value(const std::string& key, const c10::IValue& value);
  // The payload (preamble, manifest, `pickled` Metadata, data) copied into a slot.
  void write_payload(const std::string& pickled);
};

MemoryStepWriter::MemoryStepWriter(MemorySlots& slots, int64_t step, std::string save_id,
                                   int world_size, std::string manifest, MemoryStepCache* cache)
    : impl_(std::make_unique<Impl>(slots, step, std::move(save_id), world_size, std::move(manifest),
                                   cache)) {}
MemoryStepWriter::~MemoryStepWriter() = default;
void MemoryStepWriter::set_up(int rank, bool /*is_coordinator*/) { impl_->set_up(rank); }
void MemoryStepWriter::set_up_without_collectives(int rank) {
  impl_->set_up_without_collectives(rank);
}
std::vector<SavePlan> MemoryStepWriter::prepare_global_plan(std::vector<SavePlan> plans) {
  return impl_->prepare_global_plan(std::move(plans));
}
std::vector<WriteResult> MemoryStepWriter::write_data(const SavePlan& plan, SavePlanner& planner) {
  return impl_->write_data(plan, planner);
}
void MemoryStepWriter::finish(Metadata metadata,
                              const std::vector<std::vector<WriteResult>>& results) {
  impl_->finish(std::move(metadata), results);
}
bool MemoryStepWriter::write_as_before(const StateDict& resolved, int rank) {
  return impl_->write_as_before(resolved, rank);
}
int MemoryStepWriter::slot() const { return impl_->slot(); }
int64_t MemoryStepWriter::data_bytes() const { return impl_->data_bytes(); }

void MemoryStepWriter::Impl::set_up(int rank) {
  throw CheckpointError(ErrorKind::kUsage,
                        "a memory step of rank " + std::to_string(rank) +
                            " is saved without collectives (SaveOptions::use_collectives = false)");
}

void MemoryStepWriter::Impl::set_up_without_collectives(int rank) {
  if (rank < 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          "a memory step needs this process's rank, not " + std::to_string(rank));
  }
  rank_ = rank;
}

std::vector<SavePlan> MemoryStepWriter::Impl::prepare_global_plan(std::vector<SavePlan> plans) {
  for (SavePlan& plan : plans) plan.storage_data = detail::memory_data_file(rank_);
  return plans;
}

StorageInfo MemoryStepWriter::Impl::add_piece(const void* data, uint64_t size) {
  StorageInfo where{detail::memory_data_file(rank_),
                    static_cast<int64_t>(data_bytes_),
                    static_cast<int64_t>(size),
                    {}};
  if (size > 0) data_pieces_.push_back(BytePiece{data, static_cast<std::size_t>(size)});
  data_bytes_ += size;
  if (const uint64_t pad = payload_padding(data_bytes_); pad > 0) {
    data_pieces_.push_back(BytePiece{kPayloadZeros, static_cast<std::size_t>(pad)});
    data_bytes_ += pad;
  }
  return where;
}

StorageInfo MemoryStepWriter::Impl::add_tensor(at::Tensor kept) {
  tensors_.push_back(std::move(kept));
  return add_piece(tensors_.back().data_ptr(), tensors_.back().nbytes());
}

StorageInfo MemoryStepWriter::Impl::add_value(const std::string& key, const c10::IValue& value) {
  std::vector<at::Tensor> inside;
  const std::string pickle = encode_value_pickle(value, inside);
  if (cache_ != nullptr && inside.empty()) {
    const std::string& archive = cache_->state().value_archive(key, pickle);
    return add_piece(archive.data(), archive.size());
  }
  MemorySink sink;
  write_pickled_bytes_item(sink, pickle, inside);
  archives_.push_back(std::move(sink.buffer()));
  return add_piece(archives_.back().data(), archives_.back().size());
}

std::vector<WriteResult> MemoryStepWriter::Impl::write_data(const SavePlan& plan,
                                                            SavePlanner& planner) {
  // Only the DefaultSavePlanner's Metadata follows from the items alone (a subclass may
  // transform them): only its layout is kept for write_as_before.
  layout_.reset();
  if (cache_ != nullptr && typeid(planner) == typeid(DefaultSavePlanner)) {
    layout_.emplace();
    layout_->rank = rank_;
    layout_->items = plan.items;
    layout_->planner_data = plan.planner_data;
  }
  std::vector<WriteResult> results;
  for (const WriteItem& item : plan.items) {
    WriteItemData data = planner.resolve_data(item);
    WriteResult result;
    result.index = item.index;
    if (const auto* tensor = std::get_if<at::Tensor>(&data)) {
      at::Tensor kept = tensor->is_cpu() ? *tensor : tensor->to(at::kCPU);
      result.storage_data = add_tensor(kept.is_contiguous() ? kept : kept.contiguous());
    } else {
      result.storage_data = add_value(item.index.fqn, std::get<c10::IValue>(data));
    }
    result.size_in_bytes = result.storage_data.length;
    if (layout_) layout_->item_bytes.push_back(static_cast<uint64_t>(result.size_in_bytes));
    results.push_back(std::move(result));
  }
  return results;
}

void MemoryStepWriter::Impl::finish(Metadata metadata,
                                    const std::vector<std::vector<WriteResult>>& results) {
  add_write_results(metadata, results);
  if (cache_ == nullptr) {
    write_payload(encode_metadata(metadata));
    return;
  }
  MemoryStepCache::State& cache = cache_->state();
  const std::string& pickled = cache.pickled_metadata(metadata);
  cache.layout = std::move(layout_);  // the layout of the Metadata just pickled (or none)
  write_payload(pickled);
}

bool MemoryStepWriter::Impl::write_as_before(const StateDict& resolved, int rank) {
  if (cache_ == nullptr || !cache_->state().layout || cache_->state().layout->rank != rank) {
    return false;
  }
  const detail::MemoryStepLayout& layout = *cache_->state().layout;
  std::vector<detail::LaidOutItem> items;
  if (!detail::lay_out_as(resolved, layout, items)) return false;
  rank_ = rank;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const StorageInfo where =
        items[i].value == nullptr
            ? add_tensor(std::move(items[i].tensor))
            : add_value(items[i].item->index.fqn, detail::to_saved_value(*items[i].value));
    if (static_cast<uint64_t>(where.length) != layout.item_bytes[i]) {
      // A value's archive changed size: the Metadata's offsets would not hold.
      data_pieces_.clear();
      tensors_.clear();
      archives_.clear();
      data_bytes_ = 0;
      return false;
    }
  }
  write_payload(cache_->state().metadata_pickle);
  ++cache_->state().layouts_repeated;
  return true;
}

void MemoryStepWriter::Impl::write_payload(const std::string& pickled) {
  std::string preamble = "DCPPSTEP";
  append_payload_u32(preamble, 1);
  append_payload_u32(preamble, static_cast<uint32_t>(rank_));
  append_payload_u32(preamble, static_cast<uint32_t>(world_size_));
  append_payload_u32(preamble, 0);
  append_payload_u64(preamble, manifest_.size());
  append_payload_u64(preamble, pickled.size());
  append_payload_u64(preamble, data_bytes_);
  const uint64_t head = preamble.size() + manifest_.size() + pickled.size();
  std::vector<BytePiece> pieces = {
      {preamble.data(), preamble.size()},
      {manifest_.data(), manifest_.size()},
      {pickled.data(), pickled.size()},
      {kPayloadZeros, static_cast<std::size_t>(payload_padding(head))}};
  pieces.insert(pieces.end(), data_pieces_.begin(), data_pieces_.end());
  slot_ = slots_.write(step_, save_id_, pieces);
  data_pieces_.clear();
  tensors_.clear();
  archives_.clear();
}

}  // namespace dcpp
