#pragma once
// The "file" scheme's driver: a directory, through FileSystemWriter and FileSystemReader.

#include <dcpp/storage/location_driver.h>

namespace dcpp::detail {

class DirectoryDriver final : public LocationDriver {
 public:
  std::unique_ptr<StorageWriter> make_writer(const Location& location,
                                             const FileSystemWriterOptions& layout) const override;
  std::unique_ptr<StorageReader> make_reader(const Location& location,
                                             const FileSystemReaderOptions& reading) const override;
  std::unique_ptr<LocationFiles> open_files(const Location& location) const override;
};

}  // namespace dcpp::detail
