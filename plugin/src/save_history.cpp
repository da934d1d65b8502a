// The record of this rank's saves (save_history.h).

#include "save_history.h"

#include <algorithm>

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

bool SaveHistory::is_saved(int64_t step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return saved_steps_.count(step) != 0;
}

void SaveHistory::mark_saved(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  saved_steps_.insert(step);
}

void SaveHistory::add(const SaveRecord& record, std::exception_ptr unreported) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.push_back(record);
  if (record.in_memory && ++memory_records_ > kKeptMemoryRecords) {
    records_.erase(std::find_if(records_.begin(), records_.end(),
                                [](const SaveRecord& kept) { return kept.in_memory; }));
    --memory_records_;
  }
  if (!unreported || first_error_) return;
  try {
    std::rethrow_exception(unreported);
  } catch (const CheckpointError&) {
    first_error_ = unreported;  // its kind and message as the save threw them
  } catch (...) {
    first_error_ = std::make_exception_ptr(CheckpointError(ErrorKind::kIo, record.error));
  }
}

std::vector<SaveRecord> SaveHistory::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

std::vector<SaveRecord> SaveHistory::newest_records(std::size_t count) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t first = records_.size() > count ? records_.size() - count : 0;
  return std::vector<SaveRecord>(records_.begin() + static_cast<std::ptrdiff_t>(first),
                                 records_.end());
}

std::exception_ptr SaveHistory::take_first_error() {
  std::exception_ptr error;
  std::lock_guard<std::mutex> lock(mutex_);
  std::swap(error, first_error_);
  return error;
}

}  // namespace dcpp::detail
