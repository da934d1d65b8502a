#pragma once
// The files directly under a checkpoint location, a directory or an "s3://bucket/prefix": what
// the tools read, list and check there outside a storage driver's save and load protocol.

#include "format/file_io.h"

#include <dcpp/storage/s3_options.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Errors are CheckpointErrors naming the file or object.
class LocationFiles {
 public:
  virtual ~LocationFiles() = default;
  /// The file's path or URL, for messages.
  virtual std::string describe(const std::string& name) const = 0;
  /// The whole file, or nullopt when there is none of that name.
  virtual std::optional<std::string> read(const std::string& name) = 0;
  /// The file, to read at any offset; null when there is none of that name.
  virtual std::unique_ptr<RandomAccessData> open(const std::string& name) = 0;
  /// The names of the files directly under the location, sorted; none when it does not exist.
  virtual std::vector<std::string> list() = 0;
};

/// The files of `location`: an S3 prefix for an s3:// URL (reached with `s3`), else a directory.
std::unique_ptr<LocationFiles> open_location_files(const std::string& location,
                                                   const S3Options& s3 = {});

}  // namespace dcpp::detail
