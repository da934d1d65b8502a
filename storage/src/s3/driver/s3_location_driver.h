#pragma once
// The "s3" scheme's driver: an "s3://bucket/prefix", through S3StorageWriter and S3StorageReader,
// reached with the location's S3Options (Location::with_s3).

#include <dcpp/storage/location_driver.h>

namespace dcpp::detail {

class S3LocationDriver final : public LocationDriver {
 public:
  std::unique_ptr<StorageWriter> make_writer(const Location& location,
                                             const FileSystemWriterOptions& layout) const override;
  /// `reading`'s checks, and at least S3ReaderOptions' default threads.
  std::unique_ptr<StorageReader> make_reader(const Location& location,
                                             const FileSystemReaderOptions& reading) const override;
  std::unique_ptr<LocationFiles> open_files(const Location& location) const override;
};

}  // namespace dcpp::detail
