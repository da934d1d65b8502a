#pragma once
// save() and load(): DCP's `torch.distributed.checkpoint.save` / `load`, on one process or SPMD on
// every rank of a process group.

#include <dcpp/checkpoint/read_once.h>
#include <dcpp/checkpoint/replica_check.h>
#include <dcpp/checkpoint/save_plan_cache.h>
#include <dcpp/core/deprecated_field.h>
#include <dcpp/core/export.h>
#include <dcpp/dist/ranks.h>
#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/incompatible_keys.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/storage/filesystem_reader_options.h>
#include <dcpp/storage/filesystem_writer_options.h>
#include <dcpp/storage/location.h>
#include <dcpp/storage/s3_options.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dcpp {

// The extension points an option may name (<dcpp/extend.h> declares them).
class LoadPlanner;
class SavePlanner;
class StorageReader;
class StorageWriter;

struct DCPP_API SaveOptions {
  /// Used when no storage writer is given: how DCP's files are cut (files per rank, threads,
  /// compression), whatever driver stores them: a directory's, or an s3:// location's
  /// (S3WriterOptions::from).
  FileSystemWriterOptions file_system;
  /// The object store of an s3:// location that carries no S3 options of its own
  /// (Location::with_s3 wins; docs/storage.md); empty fields come from the environment and the
  /// AWS shared files.
  S3Options s3;
  /// Default: a DefaultSavePlanner.
  std::shared_ptr<SavePlanner> planner;
  /// The ranks saving together (default: this process alone); for a save without collectives and
  /// without a group, `ranks.rank` names this process (with a group, it must be -1 or the
  /// group's rank).
  Ranks ranks;
  /// Deprecated in 0.2, removed in 0.3: what `ranks.process_group` and `ranks.coordinator_rank`
  /// were called in 0.1. A value assigned here is honoured when `ranks` leaves that field at its
  /// default; assigned here and set there to another value, the call fails (kUsage).
  DeprecatedField<c10::intrusive_ptr<c10d::ProcessGroup>> process_group;
  DeprecatedField<int> coordinator_rank;
  /// DCP's `use_collectives`. When false, this rank saves alone, for jobs whose ranks must not
  /// coordinate: it plans only what it holds (nothing is deduplicated across ranks: a replicated
  /// tensor or a value every rank holds is written by every rank), writes its own data files
  /// `__<rank>_<n>.distcp`, then `__<rank>.checksums` and `__<rank>.metadata` (each via `.tmp`,
  /// fsync, rename, fsync of the directory), and issues no collective at all, not even DCP's
  /// closing barrier: when save returns, only this rank's part is committed. The returned Metadata
  /// describes this rank's part. dcpp loads such a checkpoint, once every rank has saved, by
  /// merging the ranks' metadata, onto any number of ranks (docs/distributed.md); DCP loads it only
  /// on the same ranks, each reading its own `__<rank>.metadata`.
  bool use_collectives = true;
  /// Deprecated in 0.2, removed in 0.3: `ranks.rank` (with_rank()).
  DeprecatedRanksField<int> rank;
  /// Plan caching (DCP's enable_plan_caching): give every save of a periodic series the same
  /// cache on each rank, and a save whose state has the structure of the last one skips the
  /// global planning and sends tokens instead of plans (SavePlanCache). Null (the default): every
  /// save plans in full. Ignored without collectives.
  std::shared_ptr<SavePlanCache> plan_cache;
  /// What save returns on the ranks other than the coordinator. false (the default): the part of
  /// the Metadata this rank wrote (its keys, its chunks, its storage entries), which it knows
  /// without a message, so a save's traffic does not grow with the world. true: the whole
  /// committed Metadata, as DCP returns it on every rank, which the coordinator sends to every
  /// rank (at 1,024 ranks and a 133 MB `.metadata`, about 136 GB per save). The coordinator
  /// returns the whole Metadata either way; any rank can read it with read_metadata(). Every rank
  /// must pass the same value.
  bool metadata_on_every_rank = false;
  /// What the save does when ranks that list the same item (a whole tensor or value several ranks
  /// hold, or the same shard) hold different bytes: fail on every rank before committing (the
  /// default), warn, or not check (ReplicaCheck). The coordinator's setting counts; give every
  /// rank the same. Costs a CRC-32 of every such item on each rank that holds it, computed while
  /// the rank writes (docs/distributed.md, "Replication"). Ignored without collectives.
  ReplicaCheck replica_check = ReplicaCheck::kFail;

  SaveOptions& with_file_system(FileSystemWriterOptions value) {
    file_system = std::move(value);
    return *this;
  }
  SaveOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  SaveOptions& with_planner(std::shared_ptr<SavePlanner> value) {
    planner = std::move(value);
    return *this;
  }
  SaveOptions& with_ranks(Ranks value) {
    ranks = std::move(value);
    return *this;
  }
  SaveOptions& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    ranks.with_process_group(std::move(value));
    return *this;
  }
  SaveOptions& with_coordinator_rank(int value) {
    ranks.with_coordinator_rank(value);
    return *this;
  }
  SaveOptions& with_use_collectives(bool value) {
    use_collectives = value;
    return *this;
  }
  SaveOptions& with_rank(int value) {
    ranks.with_rank(value);
    return *this;
  }
  SaveOptions& with_plan_cache(std::shared_ptr<SavePlanCache> value) {
    plan_cache = std::move(value);
    return *this;
  }
  SaveOptions& with_metadata_on_every_rank(bool value) {
    metadata_on_every_rank = value;
    return *this;
  }
  SaveOptions& with_replica_check(ReplicaCheck value) {
    replica_check = value;
    return *this;
  }
};

struct DCPP_API LoadOptions {
  /// Used when no storage reader is given, whatever the location's driver and layout: the
  /// checks and threads of the reading.
  FileSystemReaderOptions file_system;
  /// The object store of an s3:// location that carries no S3 options of its own
  /// (Location::with_s3 wins; docs/storage.md).
  S3Options s3;
  /// Default: a DefaultLoadPlanner(allow_partial_load).
  std::shared_ptr<LoadPlanner> planner;
  /// Load what the checkpoint has and leave the rest untouched, instead of failing on keys the
  /// checkpoint lacks (DCP's `allow_partial_load`).
  bool allow_partial_load = false;
  /// The ranks loading together (default: this process alone).
  Ranks ranks;
  /// Deprecated in 0.2, removed in 0.3: what `ranks.process_group` and `ranks.coordinator_rank`
  /// were called in 0.1. A value assigned here is honoured when `ranks` leaves that field at its
  /// default; assigned here and set there to another value, the call fails (kUsage).
  DeprecatedField<c10::intrusive_ptr<c10d::ProcessGroup>> process_group;
  DeprecatedField<int> coordinator_rank;
  /// Read and verify everything into scratch copies first, and copy into the state dict's tensors
  /// (and hand Statefuls their state) only once every rank has succeeded: a failed load, on any
  /// rank, leaves every rank's state dict exactly as it was. Costs one extra copy, on its device,
  /// of every tensor in the state dict being loaded while the load runs, and a copy back at the
  /// end. (Only a throwing load_state_dict() or copy in that last step can still fail on one rank
  /// after others applied theirs; every rank then throws.) Off (the default), the reader writes
  /// straight into the tensors: a failure found while reading (a corrupt chunk, another rank
  /// failing) leaves some tensors loaded and others not, and each rank whose own reads succeeded
  /// has already handed its Statefuls their state.
  bool all_or_nothing = false;
  /// Read shared bytes once (ReadOnce; docs/distributed.md, "Read-once loads"). Only exact
  /// duplicates are shared: the same box of the same saved chunk, as a data-parallel resume or a
  /// replicated tensor has; partly overlapping reads of a resharded load are read by each rank.
  /// A rank that reads for others keeps a copy of those bytes until it has sent them. Ignored
  /// on one rank.
  ReadOnce read_once = ReadOnce::kAuto;

  LoadOptions& with_file_system(FileSystemReaderOptions value) {
    file_system = std::move(value);
    return *this;
  }
  LoadOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  LoadOptions& with_planner(std::shared_ptr<LoadPlanner> value) {
    planner = std::move(value);
    return *this;
  }
  LoadOptions& with_allow_partial_load(bool value) {
    allow_partial_load = value;
    return *this;
  }
  LoadOptions& with_ranks(Ranks value) {
    ranks = std::move(value);
    return *this;
  }
  LoadOptions& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    ranks.with_process_group(std::move(value));
    return *this;
  }
  LoadOptions& with_coordinator_rank(int value) {
    ranks.with_coordinator_rank(value);
    return *this;
  }
  LoadOptions& with_all_or_nothing(bool value) {
    all_or_nothing = value;
    return *this;
  }
  LoadOptions& with_read_once(ReadOnce value) {
    read_once = value;
    return *this;
  }
};

/// Saves `state_dict` as a DCP checkpoint at `location`: a directory, an "s3://bucket/prefix" URL
/// (S3StorageWriter, docs/storage.md) or a URL of a registered driver (location_driver.h), through
/// the writer make_storage_writer(location, options.file_system) makes. Stateful values are saved
/// as their
/// `state_dict()`. Tensors on other devices are copied to the CPU to be written. Blocks until the
/// checkpoint is committed; returns its Metadata (on a rank other than the coordinator, the part
/// of it that rank wrote, unless SaveOptions::metadata_on_every_rank). With a process group, every
/// rank calls save with its own shards; a chunk several ranks hold is written once. When any rank
/// fails (planning, writing, committing), save throws on every rank a CheckpointError listing each
/// failed rank and its message, and nothing is committed. A failed save never damages a checkpoint
/// already there. Without collectives (SaveOptions::use_collectives = false) each rank saves alone
/// and a failure throws on that rank only.
DCPP_API Metadata save(const StateDict& state_dict, const Location& location,
                       const SaveOptions& options = {});
DCPP_API Metadata save(const StateDict& state_dict, StorageWriter& storage_writer,
                       const SaveOptions& options = {});

/// Loads a checkpoint into `state_dict` in place: tensors (plain or sharded, any sharding) are
/// filled from the saved chunks, whatever sharding saved them; other values are replaced; Stateful
/// values get `load_state_dict()` with their loaded state (less the keys the checkpoint lacks that
/// the Stateful says may be missing: `Stateful::may_be_missing`). Dtypes and global shapes must
/// match. Throws CheckpointError listing missing keys (unless `allow_partial_load`) and naming the
/// key and file on any mismatch or corruption; with a process group, every rank throws, listing
/// each failed rank, including a Stateful's load_state_dict() that threw on one rank. What a failed
/// load leaves in `state_dict`: LoadOptions::all_or_nothing. Returns the keys found on one side
/// only. The Location overload reads the checkpoint in the layout found there
/// (checkpoint_layout.h; Location::with_layout names one): DCP's, from a directory, an
/// "s3://bucket/prefix" URL (S3StorageReader) or a registered driver's URL, or a Hugging Face
/// directory (no `.metadata`; `model.safetensors.index.json` or `*.safetensors` files), through
/// make_storage_reader(location, options.file_system). A layout other than DCP's is logged.
DCPP_API IncompatibleKeys load(StateDict& state_dict, const Location& location,
                               const LoadOptions& options = {});
DCPP_API IncompatibleKeys load(StateDict& state_dict, StorageReader& storage_reader,
                               const LoadOptions& options = {});

/// Loads without a target (DCP's `_load_state_dict_from_keys`): everything, or only the given keys
/// and what lies under them, as a nested state dict of CPU tensors and values, read as load()
/// reads `location` (a Hugging Face directory's keys stay flat: "model.embed.weight").
/// `options.planner` must be null (this chooses its own); the other options apply.
DCPP_API StateDict load_from_keys(const Location& location,
                                  const std::vector<std::string>& keys = {},
                                  const LoadOptions& options = {});

/// The Metadata of the checkpoint at `location` (in any layout, as load() reads it), without
/// reading any data. For a checkpoint saved without collectives (`__<rank>.metadata` files, no
/// `.metadata`), the merge of every rank's metadata, as load() sees it (docs/format.md).
DCPP_API Metadata read_metadata(const Location& location);

/// Deprecated in 0.2, removed in 0.3: the reading options travel in LoadOptions and the S3
/// options with the location.
[[deprecated(
    "use load_from_keys(Location(url).with_s3(s3), keys, LoadOptions().with_file_system("
    "options)); this overload goes in 0.3")]] DCPP_API StateDict
load_from_keys(const std::filesystem::path& directory, const std::vector<std::string>& keys,
               const FileSystemReaderOptions& options, const S3Options& s3 = {});
/// Deprecated in 0.2, removed in 0.3: the S3 options travel with the location.
[[deprecated(
    "use read_metadata(Location(url).with_s3(s3)); this overload goes in 0.3")]] DCPP_API Metadata
read_metadata(const std::filesystem::path& directory, const S3Options& s3);

}  // namespace dcpp
