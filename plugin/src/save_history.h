#pragma once
// What this rank's saves did: the steps whose save committed (a second save of one is skipped),
// each save's SaveRecord (CheckpointManager::history()) and the first failure nobody was told of
// yet (rethrown once by CheckpointManager::wait()).

#include <dcpp/plugin/checkpoint_manager.h>

#include <cstdint>
#include <exception>
#include <mutex>
#include <set>
#include <vector>

namespace dcpp::detail {

/// Thread-safe: the training thread and the manager's background worker (finishing async saves)
/// both record here. Never throws but for allocation failures.
class SaveHistory {
 public:
  bool is_saved(int64_t step) const;
  /// The save of `step` committed on this rank.
  void mark_saved(int64_t step);

  /// Appends `record`. `unreported`: the error of a failed save that was not thrown to the caller
  /// (an async save's); it becomes the first error unless there is one already. A CheckpointError
  /// is kept as it is (its kind included); anything else becomes a CheckpointError (kIo) with the
  /// record's message.
  void add(const SaveRecord& record, std::exception_ptr unreported = nullptr);

  /// Every record kept, in order: every save of a step checkpoint or export, and the newest
  /// kKeptMemoryRecords of the memory tier's (a loop copies a step to memory every step: older
  /// ones are dropped, so the history does not grow with the steps).
  std::vector<SaveRecord> records() const;
  /// The newest `count` of records(), in order.
  std::vector<SaveRecord> newest_records(std::size_t count) const;

  static constexpr std::size_t kKeptMemoryRecords = 64;

  /// The first unreported error (a CheckpointError), or null; cleared, so that it is reported
  /// once.
  std::exception_ptr take_first_error();

 private:
  mutable std::mutex mutex_;  // guards everything below
  std::set<int64_t> saved_steps_;
  std::vector<SaveRecord> records_;
  std::exception_ptr first_error_;
  std::size_t memory_records_ = 0;  // of records_
};

}  // namespace dcpp::detail
