#include "s3/driver/s3_location_driver.h"

#include "s3/driver/s3_location_files.h"

#include <dcpp/storage/s3_storage.h>

#include <algorithm>

namespace dcpp::detail {

namespace {

S3Options s3_options_of(const Location& location) {
  return location.s3() ? *location.s3() : S3Options();
}

}  // namespace

std::unique_ptr<StorageWriter> S3LocationDriver::make_writer(
    const Location& location, const FileSystemWriterOptions& layout) const {
  return std::make_unique<S3StorageWriter>(location.url(),
                                           S3WriterOptions::from(layout, s3_options_of(location)));
}

std::unique_ptr<StorageReader> S3LocationDriver::make_reader(
    const Location& location, const FileSystemReaderOptions& reading) const {
  S3ReaderOptions options;
  options.s3 = s3_options_of(location);
  options.thread_count = std::max(reading.thread_count, options.thread_count);
  options.verify_checksums = reading.verify_checksums;
  options.max_decompressed_value_size = reading.max_decompressed_value_size;
  return std::make_unique<S3StorageReader>(location.url(), options);
}

std::unique_ptr<LocationFiles> S3LocationDriver::open_files(const Location& location) const {
  return std::make_unique<S3LocationFiles>(location.url(), s3_options_of(location));
}

}  // namespace dcpp::detail
