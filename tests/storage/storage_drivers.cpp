#include "storage_drivers.h"

#include "dcpp_test.h"
#include "s3/config/s3_config.h"
#include "s3/driver/s3_location_url.h"
#include "s3/protocol/s3_client.h"
#include "s3_test_server.h"

#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/huggingface_storage.h>
#include <dcpp/storage/s3_storage.h>

#include <algorithm>
#include <filesystem>
#include <list>
#include <stdexcept>

namespace dcpp::test {

namespace {

namespace fs = std::filesystem;

class DirectoryDriver : public StorageDriver {
 public:
  std::string new_location() override {
    return (dirs_.emplace_back().path() / "checkpoint").string();
  }
  std::vector<std::string> list(const std::string& location) override {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(location, error)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string read(const std::string& location, const std::string& name) override {
    return read_file(fs::path(location) / name);
  }
  void write(const std::string& location, const std::string& name,
             const std::string& bytes) override {
    write_file(fs::path(location) / name, bytes);
  }
  std::string describe(const std::string& location, const std::string& name) const override {
    return (fs::path(location) / name).string();
  }

 private:
  std::list<TempDir> dirs_;
};

class FileSystemDriver final : public DirectoryDriver {
 public:
  std::string name() const override { return "filesystem"; }
  std::unique_ptr<StorageWriter> writer(const std::string& location,
                                        const FileSystemWriterOptions& layout) override {
    FileSystemWriterOptions options = layout;
    options.sync_files = false;
    return std::make_unique<FileSystemWriter>(location, options);
  }
  std::unique_ptr<StorageReader> reader(const std::string& location) override {
    return std::make_unique<FileSystemReader>(location);
  }
};

class HuggingFaceDriver final : public DirectoryDriver {
 public:
  std::string name() const override { return "huggingface"; }
  bool holds_values() const override { return false; }
  bool protects_existing() const override { return false; }
  std::unique_ptr<StorageWriter> writer(const std::string& location,
                                        const FileSystemWriterOptions&) override {
    return make_huggingface_writer(location, HuggingFaceWriterOptions().with_sync_files(false));
  }
  std::unique_ptr<StorageReader> reader(const std::string& location) override {
    return make_huggingface_reader(location);
  }
};

class S3Driver final : public StorageDriver {
 public:
  S3Driver()
      : server_(S3TestServer::get()),
        bucket_(server_.create_bucket("conformance")),
        direct_(direct_config(server_, bucket_)) {}

  std::string name() const override { return "s3"; }
  std::string new_location() override {
    return "s3://" + bucket_ + "/run/" + std::to_string(++locations_);
  }
  std::unique_ptr<StorageWriter> writer(const std::string& location,
                                        const FileSystemWriterOptions& layout) override {
    S3Options s3 = server_.options();
    s3.part_size = 5 << 20;  // S3's smallest: multipart uploads from 5 MiB on
    return std::make_unique<S3StorageWriter>(location, S3WriterOptions::from(layout, s3));
  }
  std::unique_ptr<StorageReader> reader(const std::string& location) override {
    S3ReaderOptions options;
    options.s3 = server_.options();
    return std::make_unique<S3StorageReader>(location, options);
  }
  std::vector<std::string> list(const std::string& location) override {
    const std::string prefix = detail::parse_s3_url(location).prefix;
    std::vector<std::string> names;
    for (const detail::S3ObjectInfo& object : direct_.list_objects(prefix)) {
      names.push_back(object.key.substr(prefix.size()));
    }
    return names;
  }
  std::string read(const std::string& location, const std::string& name) override {
    return direct_.get_object(detail::parse_s3_url(location).prefix + name);
  }
  void write(const std::string& location, const std::string& name,
             const std::string& bytes) override {
    direct_.put_object(detail::parse_s3_url(location).prefix + name, bytes);
  }
  std::string describe(const std::string& location, const std::string& name) const override {
    return location + "/" + name;
  }

 private:
  // Straight to the server, past the fault proxy: what the tests damage is not itself faulted.
  static detail::S3Config direct_config(const S3TestServer& server, const std::string& bucket) {
    S3Options options = server.options();
    options.endpoint_url = server.direct_endpoint();
    return detail::resolve_s3_config(options, bucket);
  }

  S3TestServer& server_;
  std::string bucket_;
  detail::S3Client direct_;
  int locations_ = 0;
};

}  // namespace

std::unique_ptr<StorageDriver> make_storage_driver(const std::string& name) {
  if (name == "filesystem") return std::make_unique<FileSystemDriver>();
  if (name == "huggingface") return std::make_unique<HuggingFaceDriver>();
  if (name == "s3") return std::make_unique<S3Driver>();
  throw std::invalid_argument("no storage driver named " + name);
}

}  // namespace dcpp::test
