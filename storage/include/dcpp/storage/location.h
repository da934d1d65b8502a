#pragma once
// Location: where a checkpoint lives, said once. Every entry point that reads or writes a
// checkpoint (save, load, load_from_keys, read_metadata, the AsyncCheckpointer, the `dcpp`
// command) takes one and resolves it through the registries of location_driver.h (which driver
// stores it) and checkpoint_layout.h (which format is there).

#include <dcpp/core/export.h>
#include <dcpp/storage/s3_options.h>

#include <any>
#include <filesystem>
#include <string>
#include <utility>

namespace dcpp {

/// A directory ("runs/step_100", "/data/ckpt", "file:///data/ckpt") or a URL whose scheme names a
/// registered driver ("s3://bucket/prefix"), with what that driver needs to reach it (its
/// options) and, optionally, the layout to read it as. Implicit from a string or a path, so
/// `save(state, "runs/step_100")` and `load(state, directory)` read as they always did.
class DCPP_API Location {
 public:
  Location(std::string url);  // NOLINT(google-explicit-constructor): a location reads as its URL
  Location(const char* url);  // NOLINT(google-explicit-constructor)
  Location(const std::filesystem::path& directory);  // NOLINT(google-explicit-constructor)

  /// As given ("file://" removed: a directory's URL is its path).
  const std::string& url() const { return url_; }
  /// The driver's scheme: "file" for a directory, else what comes before "://" ("s3").
  const std::string& scheme() const { return scheme_; }
  bool is_directory() const { return scheme_ == "file"; }
  /// The directory. Throws CheckpointError (kUsage) naming the URL for any other scheme.
  std::filesystem::path path() const;
  /// The location `name` below this one (a file or a sub-directory), with the same options.
  Location child(const std::string& name) const;

  /// The object store's options for an s3:// location (docs/storage.md). Without them, the
  /// options struct's `s3` field is used, then the environment and the AWS shared files.
  Location& with_s3(S3Options options) { return with_driver_options(std::move(options)); }
  /// This location's S3 options, or null when it carries none.
  const S3Options* s3() const { return driver_options<S3Options>(); }

  /// Options of a driver registered by a program (location_driver.h), by their type: one value
  /// per location, replacing any before.
  template <typename Options>
  Location& with_driver_options(Options options) {
    driver_options_ = std::move(options);
    return *this;
  }
  /// The driver options of type `Options`, or null when the location carries none of that type.
  template <typename Options>
  const Options* driver_options() const {
    return std::any_cast<Options>(&driver_options_);
  }

  /// Reads the location as this layout (checkpoint_layout.h: "pytorch-dcp", "huggingface",
  /// "megatron-core") instead of finding it from the files there, and saves in it (DCP's layout
  /// when none is named; "megatron-core", megatron_storage.h).
  Location& with_layout(std::string name) {
    layout_ = std::move(name);
    return *this;
  }
  /// The layout asked for with with_layout(); empty: found from the files.
  const std::string& layout() const { return layout_; }

 private:
  std::string url_;
  std::string scheme_;
  std::any driver_options_;
  std::string layout_;
};

}  // namespace dcpp
