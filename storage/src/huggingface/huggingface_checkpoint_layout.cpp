#include "huggingface/huggingface_checkpoint_layout.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

namespace dcpp::detail {

bool HuggingFaceCheckpointLayout::recognizes(const Location& location, LocationFiles&) const {
  return location.is_directory() && is_huggingface_directory(location.path());
}

std::unique_ptr<StorageReader> HuggingFaceCheckpointLayout::make_reader(
    const Location& location, const FileSystemReaderOptions& reading) const {
  if (!location.is_directory()) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "'" + location.url() + "': Hugging Face checkpoints are read from a directory only");
  }
  return make_huggingface_reader(
      location.path(), HuggingFaceReaderOptions().with_thread_count(reading.thread_count));
}

}  // namespace dcpp::detail
