// The record of this rank's saves (save_history.h).

#include "save_history.h"

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

std::exception_ptr SaveHistory::take_first_error() {
  std::exception_ptr error;
  std::lock_guard<std::mutex> lock(mutex_);
  std::swap(error, first_error_);
  return error;
}

}  // namespace dcpp::detail
