#pragma once
// The replica check of save() (SaveOptions::replica_check), in three parts:
//   the coordinator, planning globally: find_replicated_items() finds the items that several
//     ranks' local plans list, and marks for each rank which of its items those are;
//   every rank, while it writes: ReplicaChecksums gathers the content_crc32 of its marked items,
//     hashing on a thread of its own those another rank writes and taking those it writes from
//     its storage writer's results; they go to the coordinator with the write results;
//   the coordinator, before it commits: describe_differing_replicas() compares them.
// A rank hashes only items another rank also holds and writes: a fully sharded or pipelined state
// costs nothing, a data-parallel one on N ranks a CRC-32 of (N - 1) / N of the state on each.

#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>
#include <dcpp/planner/save_planner.h>

#include "core/caller_streams.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace dcpp::detail {

struct ReplicatedItems {
  /// Per rank: which items of its local plan other ranks list too, as sent to it (decode_marks).
  std::vector<std::string> marks;
  /// Per rank: those items, in the order of its local plan, as indices into `items`.
  std::vector<std::vector<uint32_t>> of_rank;
  /// Every item that several ranks list: its key, and its offsets when it is a shard.
  std::vector<MetadataIndex> items;
};

/// The coordinator: the items listed by more than one of `local_plans` (index = rank).
ReplicatedItems find_replicated_items(const std::vector<SavePlan>& local_plans);

/// The positions in a local plan of `plan_items` items that `marks` marks. Throws CheckpointError
/// (kCorrupt) when the marks do not fit the plan.
std::vector<std::size_t> decode_marks(const std::string& marks, std::size_t plan_items);

/// The content_crc32 (format/content_checksum.h) of the items at `positions` of `local_plan`, as
/// `planner.resolve_data` gives them. Those another rank writes are hashed on a thread of its own,
/// at nice 19, while the storage writer writes on the calling thread (or in take(), when no
/// thread can be started); those `written_plan` holds come from the writer's results, which
/// computed them as it wrote. The planner and the plans must outlive this object; the destructor
/// stops the thread after its current item and waits for it.
class ReplicaChecksums {
 public:
  ReplicaChecksums(const SavePlan& local_plan, std::vector<std::size_t> positions,
                   const SavePlan& written_plan, SavePlanner& planner);
  ~ReplicaChecksums();
  ReplicaChecksums(const ReplicaChecksums&) = delete;
  ReplicaChecksums& operator=(const ReplicaChecksums&) = delete;

  /// The checksums, in the order of `positions`, given what the storage writer returned for
  /// `written_plan`: an item it wrote without a content_crc32 is hashed now. Rethrows what
  /// computing them threw.
  std::vector<uint32_t> take(const std::vector<WriteResult>& written);

 private:
  uint32_t checksum_of(std::size_t position);
  void hash_others_items() noexcept;

  const SavePlan& plan_;
  std::vector<std::size_t> positions_;
  std::vector<bool> written_here_;  // per position: whether this rank writes the item
  SavePlanner& planner_;
  std::vector<uint32_t> checksums_;
  bool hashed_ = false;  // hash_others_items ran
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
  CallerStreams streams_;  // the constructing thread's: the hashing thread's device copies follow
  std::thread thread_;
};

std::string encode_checksums(const std::vector<uint32_t>& checksums);
std::vector<uint32_t> decode_checksums(const std::string& bytes);

/// The coordinator: what is wrong when replicas of an item hold different bytes, as the message of
/// the error or warning (naming the keys, and the ranks that agree with each other); empty when
/// every item's copies agree. `checksums[rank]` is what that rank sent for its marked items.
/// Throws CheckpointError (kCorrupt) when a rank sent another number of checksums.
std::string describe_differing_replicas(const ReplicatedItems& replicated,
                                        const std::vector<std::vector<uint32_t>>& checksums);

}  // namespace dcpp::detail
