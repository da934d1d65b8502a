#pragma once
// A rank's checkpoint in a memory slot (memory_slots.h): what a save of the rank without
// collectives writes (its items and its Metadata, SaveOptions::use_collectives = false), with an
// opaque manifest (the CheckpointManager's), laid out as the slot's bytes:
//
//   payload  := preamble | manifest | metadata | zeros to a multiple of 64 | data
//   preamble := "DCPPSTEP", u32 version (1), u32 rank, u32 world size, u32 0,
//               u64 manifest bytes, u64 metadata bytes, u64 data bytes      (little-endian)
//   metadata := DCP's Metadata, pickled as `.metadata` is; its items live in the data file
//               `__<rank>_memory`, at offsets into `data`
//   data     := each tensor item as its chunk's elements, row-major, at an offset that is a
//               multiple of 64; each value item as a `torch.save` archive, as DCP writes it
//
// Tensors are raw (no `torch.save` archive around them), so the copy into the slot is the only
// pass over their bytes, and the slot's CRC-32 is their checksum. Read back through
// MemoryStepReader: one rank's step, or several ranks' merged as a checkpoint saved without
// collectives is, so that a load reshards through the ordinary load planner.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dcpp {

/// What one rank's series of memory steps reuses from the step before (give every
/// MemoryStepWriter of the series the same cache): the pickled Metadata while it equals the last
/// one (the same keys, shapes, dtypes and offsets: a training loop's state from step to step), the
/// layout of the last step the DefaultSavePlanner planned (MemoryStepWriter::write_as_before), and
/// each value item's `torch.save` archive while its pickle is the same. Not thread-safe: one save
/// at a time.
class DCPP_API MemoryStepCache {
 public:
  MemoryStepCache();
  ~MemoryStepCache();
  MemoryStepCache(const MemoryStepCache&) = delete;
  MemoryStepCache& operator=(const MemoryStepCache&) = delete;

  /// Steps whose Metadata pickle was reused, and steps that pickled it.
  int64_t reused_metadata() const;
  int64_t pickled_metadata() const;
  /// Steps written by MemoryStepWriter::write_as_before, without planning.
  int64_t repeated_layouts() const;

  struct State;  // storage/internal/storage/memory_step_cache_state.h
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

/// The StorageWriter of a memory step: for a save without collectives (set_up throws kUsage),
/// whose finish writes the payload into `slots` as `step` with `save_id`. write_data copies
/// nothing: it keeps the items' tensors (CPU copies of device tensors, compact copies of strided
/// ones) and the value items' archives until finish, which copies them into the slot once
/// (MemorySlots::write). One save per writer.
class DCPP_API MemoryStepWriter final : public StorageWriter {
 public:
  /// `world_size`: the job's, recorded in the payload; `manifest`: any bytes, read back by
  /// MemoryStepReader::manifests(); `cache` (optional): the series' MemoryStepCache.
  MemoryStepWriter(MemorySlots& slots, int64_t step, std::string save_id, int world_size,
                   std::string manifest, MemoryStepCache* cache = nullptr);
  ~MemoryStepWriter() override;
  MemoryStepWriter(const MemoryStepWriter&) = delete;
  MemoryStepWriter& operator=(const MemoryStepWriter&) = delete;

  void set_up(int rank, bool is_coordinator) override;
  void set_up_without_collectives(int rank) override;
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;

  /// A save without planning, for a step whose state has the structure of the last step planned
  /// in full through this writer's cache by the DefaultSavePlanner (what dcpp::save gives a
  /// writer by default), as rank `rank`: the same flat keys and paths in the same order, and for
  /// each tensor the same dtype, layout, requires_grad, shape and local shards; each value item's
  /// archive of the same size. Then that step's Metadata holds for this one: the payload is laid
  /// out as that step's was and written to the slot (what finish does), and it returns true.
  /// Otherwise (no cache, no such step, another structure or rank) it writes nothing and returns
  /// false: save through dcpp::save, which plans in full and records the layout for the next
  /// step. `resolved` holds no Stateful (resolve_statefuls). Throws what finish throws.
  bool write_as_before(const StateDict& resolved, int rank);

  /// The slot finish wrote (-1 before), and the bytes of the step's data section.
  int slot() const;
  int64_t data_bytes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// The StorageReader of one or more ranks' memory steps: their metadata merged (a single step's
/// as it is), each item read from its rank's bytes. Keeps the steps' mappings alive.
class DCPP_API MemoryStepReader final : public StorageReader {
 public:
  /// `steps`: at most one per rank. Throws CheckpointError (kCorrupt) naming the region when one
  /// does not decode, and (kUsage) when two hold the same rank.
  ///
  /// `verify_crc`: read_data checks each step's bytes against its `crc32` in the same pass as it
  /// copies them (a tensor read whole into a contiguous CPU tensor of its dtype is checksummed
  /// from the destination while in cache; the bytes no read covered are checksummed at the end of
  /// read_data), so that a step taken by MemorySlots::complete_steps_unchecked() needs no
  /// crc_matches() of its own: one pass over the bytes instead of two. A mismatch fails read_data
  /// with CheckpointError (kCorrupt) naming the region, after the copies: the load's targets then
  /// hold bytes not to be used, to be loaded again from another step.
  explicit MemoryStepReader(std::vector<MemoryStep> steps, bool verify_crc = false);
  ~MemoryStepReader() override;
  MemoryStepReader(const MemoryStepReader&) = delete;
  MemoryStepReader& operator=(const MemoryStepReader&) = delete;

  Metadata read_metadata() override;
  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override;
  void read_data(const LoadPlan& plan, LoadPlanner& planner) override;

  /// Each step's manifest, by the rank that saved it.
  std::map<int, std::string> manifests() const;
  /// Each step's world size (the job's that saved it), by the rank that saved it.
  std::map<int, int> world_sizes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// Writes `steps` (at most one per rank, each of a different rank) as a DCP checkpoint in
/// `directory` (created when missing): each rank's data file `__<rank>_0.distcp`, its tensors as
/// `torch.save` archives and its values as they are, then the merged `.metadata` through
/// `.metadata.tmp`, fsync and rename (the fsyncs only with `sync_files`). What PyTorch and dcpp
/// load as any checkpoint, resharded. Returns its Metadata. Throws CheckpointError naming the
/// region of a step that does not decode, or the file that cannot be written; `.metadata` is then
/// not written.
DCPP_API Metadata write_memory_steps_as_checkpoint(std::vector<MemoryStep> steps,
                                                   const std::filesystem::path& directory,
                                                   bool sync_files = true);

}  // namespace dcpp
