#pragma once
// A rank's checkpoint in the memory tier (issue 40): what a save of the rank without collectives
// writes (its items and its Metadata, SaveOptions::use_collectives = false), with the manager's
// manifest, laid out as the bytes of one memory slot (memory_slots.h):
//
//   payload  := preamble | manifest | metadata | zeros to a multiple of 64 | data
//   preamble := "DCPPSTEP", u32 version (1), u32 rank, u32 world size, u32 0,
//               u64 manifest bytes, u64 metadata bytes, u64 data bytes      (little-endian)
//   manifest := the manager's CheckpointInfo as JSON (opaque here)
//   metadata := DCP's Metadata, pickled as `.metadata` is; its items live in the data file
//               `__<rank>_memory`, at offsets into `data`
//   data     := each tensor item as its chunk's elements, row-major, at an offset that is a
//               multiple of 64; each value item as a `torch.save` archive, as DCP writes it
//
// Tensors are raw (no `torch.save` archive around them), so the copy into the slot is the only
// pass over their bytes, and the slot's CRC-32 is their checksum. Read back through
// MemoryStepReader, one rank's step or several ranks' merged as a per-rank checkpoint is
// (per_rank_metadata.h), so a load reshards through the ordinary load planner.

#include "storage/memory_slots.h"

#include <dcpp/format/metadata.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// The data file name a rank's memory step gives its items.
std::string memory_data_file(int rank);

/// A payload, decoded: views into its bytes (which must outlive it) and the decoded Metadata.
struct MemoryPayload {
  int rank = 0;
  int world_size = 0;
  std::string_view manifest;
  Metadata metadata;
  std::string_view data;
};

/// Decodes a payload; `where` (a region name) names it in errors. Throws CheckpointError
/// (kCorrupt) naming `where` when the preamble, the sizes or the metadata do not hold together.
MemoryPayload decode_memory_payload(std::string_view bytes, const std::string& where);

/// The StorageWriter of a memory step: a save without collectives (set_up throws kUsage) whose
/// finish writes the payload into `slots` as `step` with `save_id`. write_data copies nothing: it
/// keeps the items' tensors (CPU copies of device tensors, compact copies of strided ones) and
/// the value items' archives until finish, which copies them into the slot once. One save per
/// writer.
class MemoryStepWriter final : public StorageWriter {
 public:
  MemoryStepWriter(MemorySlots& slots, int64_t step, std::string save_id, int world_size,
                   std::string manifest);

  void set_up(int rank, bool is_coordinator) override;
  void set_up_without_collectives(int rank) override;
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;

  /// The slot finish wrote (-1 before), and the bytes of the data section.
  int slot() const { return slot_; }
  int64_t data_bytes() const { return static_cast<int64_t>(data_bytes_); }

 private:
  MemorySlots& slots_;
  int64_t step_;
  std::string save_id_;
  int world_size_;
  std::string manifest_;
  int rank_ = -1;
  uint64_t data_bytes_ = 0;
  std::vector<BytePiece> data_pieces_;  // in order, padding included
  std::vector<at::Tensor> tensors_;     // what data_pieces_ point into
  std::deque<std::string> archives_;    // likewise (a deque: its strings never move)
  int slot_ = -1;
};

/// The StorageReader of one or more ranks' memory steps: their metadata merged (a single step's
/// as it is), each item read from its rank's payload. Keeps the steps' mappings alive.
class MemoryStepReader final : public StorageReader {
 public:
  /// `steps`: at most one per rank; throws CheckpointError (kCorrupt) naming the region when one
  /// does not decode, and (kUsage) when two hold the same rank.
  explicit MemoryStepReader(std::vector<MemoryStep> steps);

  Metadata read_metadata() override;
  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override;
  void read_data(const LoadPlan& plan, LoadPlanner& planner) override;

  /// The manifest of each step, by rank.
  std::map<int, std::string> manifests() const;

 private:
  struct Held {
    MemoryStep step;
    MemoryPayload payload;
  };
  const Held& held_of_file(const std::string& file, const std::string& key) const;
  void read_tensor(const ReadItem& item, LoadPlanner& planner) const;
  void read_value(const ReadItem& item, LoadPlanner& planner) const;
  const StorageInfo& storage_of(const MetadataIndex& index) const;

  std::vector<Held> held_;  // ascending by rank
  const Metadata* metadata_ = nullptr;
  std::map<MetadataIndex, const StorageInfo*> storage_;
};

}  // namespace dcpp::detail
