#include <dcpp/storage/storage_location.h>

#include "storage/location_defaults.h"

namespace dcpp {

std::unique_ptr<StorageWriter> make_storage_writer(const Location& location,
                                                   const FileSystemWriterOptions& layout) {
  std::unique_ptr<StorageWriter> dcp_files =
      location_driver(location)->make_writer(location, layout);
  if (location.layout().empty()) return dcp_files;
  return checkpoint_layout(location)->make_writer(location, std::move(dcp_files));
}

std::unique_ptr<StorageReader> make_storage_reader(const Location& location,
                                                   const FileSystemReaderOptions& reading) {
  return checkpoint_layout(location)->make_reader(location, reading);
}

std::unique_ptr<StorageWriter> make_storage_writer(const std::string& location,
                                                   const FileSystemWriterOptions& layout,
                                                   const S3Options& s3) {
  return make_storage_writer(detail::with_default_s3(location, s3), layout);
}

std::unique_ptr<StorageReader> make_storage_reader(const std::string& location,
                                                   const FileSystemReaderOptions& reading,
                                                   const S3Options& s3) {
  const Location resolved = detail::with_default_s3(location, s3);
  return location_driver(resolved)->make_reader(resolved, reading);
}

}  // namespace dcpp
