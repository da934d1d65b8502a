#pragma once
// The drivers that store checkpoints, one per URL scheme, in one registry (as tensorstore's
// kvstore/url_registry.h maps URLs to drivers): "file" (a directory) and "s3" are built in; a
// program adds its own with register_location_driver, and every entry point that takes a Location
// (location.h) reaches it without a change of its own.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/location.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp {

/// One file of a location, read at any offset. Errors are CheckpointErrors naming the file.
class DCPP_API LocationFile {
 public:
  virtual ~LocationFile() = default;
  virtual uint64_t size() const = 0;
  /// Reads exactly n bytes at `offset`; throws when the file is shorter ("truncated").
  virtual void read_exactly(uint64_t offset, void* dst, std::size_t n) const = 0;
  /// The read size that costs least per byte (an object store's: several MiB).
  virtual std::size_t preferred_read_size() const { return std::size_t{1} << 20; }
};

/// The files directly under a location: what a layout recognises itself by, and what the `dcpp`
/// command reads and checks there outside a save or a load. Errors are CheckpointErrors naming
/// the file; a missing file is not an error but an absent result.
class DCPP_API LocationFiles {
 public:
  virtual ~LocationFiles() = default;
  /// The file's path or URL, for messages.
  virtual std::string describe(const std::string& name) const = 0;
  /// The file, or null when there is none of that name.
  virtual std::unique_ptr<LocationFile> open(const std::string& name) = 0;
  /// The names of the files directly under the location (not of the folders below it), sorted;
  /// none when the location does not exist.
  virtual std::vector<std::string> list() = 0;
  /// The whole file, or nullopt when there is none of that name.
  virtual std::optional<std::string> read(const std::string& name);
};

/// What a scheme's driver provides: DCP's storage writer and reader at a location of it (the
/// layout options say how DCP's files are cut, whatever stores them), and its files.
class DCPP_API LocationDriver {
 public:
  virtual ~LocationDriver() = default;
  virtual std::unique_ptr<StorageWriter> make_writer(
      const Location& location, const FileSystemWriterOptions& layout) const = 0;
  virtual std::unique_ptr<StorageReader> make_reader(
      const Location& location, const FileSystemReaderOptions& reading) const = 0;
  virtual std::unique_ptr<LocationFiles> open_files(const Location& location) const = 0;
};

/// Makes `driver` the one for `scheme` ("gs", "memory"; lower case letters, digits, '+', '-',
/// '.'), replacing any before, the built-in ones included. Thread-safe.
DCPP_API void register_location_driver(const std::string& scheme,
                                       std::shared_ptr<const LocationDriver> driver);

/// The driver of `location`'s scheme. Throws CheckpointError (kUsage) naming the location and
/// the schemes there are drivers for when there is none.
DCPP_API std::shared_ptr<const LocationDriver> location_driver(const Location& location);

}  // namespace dcpp
