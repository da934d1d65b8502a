#pragma once
// A location driver a program could register (location_driver.h): "alias://NAME" is the directory
// NAME under the root its AliasRoot options give, stored through the directory driver. The tests
// reach it only through Locations, as any entry point would.

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/location_driver.h>

#include <atomic>
#include <filesystem>

namespace dcpp::test {

/// The driver options an "alias://" location carries (Location::with_driver_options).
struct AliasRoot {
  std::filesystem::path root;
};

class AliasDriver final : public LocationDriver {
 public:
  std::unique_ptr<StorageWriter> make_writer(const Location& location,
                                             const FileSystemWriterOptions& layout) const override {
    ++writers;
    const Location directory = resolve(location);
    return location_driver(directory)->make_writer(directory, layout);
  }
  std::unique_ptr<StorageReader> make_reader(
      const Location& location, const FileSystemReaderOptions& reading) const override {
    ++readers;
    const Location directory = resolve(location);
    return location_driver(directory)->make_reader(directory, reading);
  }
  std::unique_ptr<LocationFiles> open_files(const Location& location) const override {
    const Location directory = resolve(location);
    return location_driver(directory)->open_files(directory);
  }

  mutable std::atomic<int> writers{0};
  mutable std::atomic<int> readers{0};
  /// The root of locations without AliasRoot options (as the `dcpp` command gives them: a URL
  /// alone), as an S3 location without options takes the environment's; empty: an error.
  std::filesystem::path default_root;

 private:
  Location resolve(const Location& location) const {
    const AliasRoot* options = location.driver_options<AliasRoot>();
    if (!options && default_root.empty()) {
      throw CheckpointError(ErrorKind::kUsage, location.url() + ": no AliasRoot options");
    }
    const std::filesystem::path root = options ? options->root : default_root;
    return Location(root / location.url().substr(std::string("alias://").size()));
  }
};

/// The driver, registered for "alias" on first use.
inline AliasDriver& alias_driver() {
  static const std::shared_ptr<AliasDriver> driver = [] {
    auto made = std::make_shared<AliasDriver>();
    register_location_driver("alias", made);
    return made;
  }();
  return *driver;
}

}  // namespace dcpp::test
