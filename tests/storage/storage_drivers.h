#pragma once
// The storage drivers the conformance suite runs against (tests/storage/conformance_test.cpp),
// each with raw access to the bytes behind a location, so that tests can damage them.

#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <memory>
#include <string>
#include <vector>

namespace dcpp::test {

class StorageDriver {
 public:
  virtual ~StorageDriver() = default;
  /// "filesystem", "s3", "huggingface".
  virtual std::string name() const = 0;
  /// What the layout can hold: values other than tensors (a Hugging Face directory holds tensors
  /// only), and a protected replace (overwrite refused unless asked, old data removed after).
  virtual bool holds_values() const { return true; }
  virtual bool protects_existing() const { return true; }
  /// A fresh, empty location.
  virtual std::string new_location() = 0;
  /// The driver's writer and reader for `location`.
  virtual std::unique_ptr<StorageWriter> writer(const std::string& location,
                                                const FileSystemWriterOptions& layout) = 0;
  virtual std::unique_ptr<StorageReader> reader(const std::string& location) = 0;
  /// The names of the files or objects directly under `location`, sorted.
  virtual std::vector<std::string> list(const std::string& location) = 0;
  virtual std::string read(const std::string& location, const std::string& name) = 0;
  virtual void write(const std::string& location, const std::string& name,
                     const std::string& bytes) = 0;
  /// What error messages name for the file: a path or a URL.
  virtual std::string describe(const std::string& location, const std::string& name) const = 0;
};

/// "filesystem", "s3" (the test S3 server, s3_test_server.h) or "huggingface".
std::unique_ptr<StorageDriver> make_storage_driver(const std::string& name);

}  // namespace dcpp::test
