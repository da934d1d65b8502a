#include "convert/destination.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRemedy =
    "; convert never replaces anything: remove it or choose another destination";

}  // namespace

void require_new_file(const fs::path& file) {
  std::error_code error;
  if (fs::is_directory(fs::status(file, error))) {
    throw CheckpointError(ErrorKind::kUsage,
                          "destination " + file.string() + " is a directory, not a file name");
  }
  if (fs::exists(fs::symlink_status(file, error))) {  // a dangling link counts
    throw CheckpointError(ErrorKind::kUsage, file.string() + " exists" + kRemedy);
  }
}

void require_new_directory(const fs::path& directory) {
  std::error_code error;
  const fs::file_status status = fs::status(directory, error);
  if (!fs::exists(status)) {
    if (fs::exists(fs::symlink_status(directory, error))) {  // a dangling link
      throw CheckpointError(ErrorKind::kUsage, directory.string() + " exists" + kRemedy);
    }
    return;
  }
  if (!fs::is_directory(status)) {
    throw CheckpointError(ErrorKind::kUsage,
                          "destination " + directory.string() + " is a file, not a directory");
  }
  if (!fs::is_empty(directory, error) || error) {
    throw CheckpointError(ErrorKind::kUsage,
                          directory.string() + " exists and is not empty" + kRemedy);
  }
}

}  // namespace dcpp::tools
