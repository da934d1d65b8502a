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

  /// Appends `record`. A failed one (`!record.ok`) becomes the first error unless there is one
  /// already or `thrown`: its error was thrown to the caller, so wait() does not report it again.
  void add(const SaveRecord& record, bool thrown = false);

  /// Every record added, in order.
  std::vector<SaveRecord> records() const;

  /// The first error (a CheckpointError with the failed record's message), or null; cleared, so
  /// that it is reported once.
  std::exception_ptr take_first_error();

 private:
  mutable std::mutex mutex_;  // guards everything below
  std::set<int64_t> saved_steps_;
  std::vector<SaveRecord> records_;
  std::exception_ptr first_error_;
};

}  // namespace dcpp::detail
