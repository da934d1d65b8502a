#include "filesystem/directory_driver.h"

#include "format/file_io.h"

#include <algorithm>
#include <filesystem>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;

class DirectoryFile final : public LocationFile {
 public:
  explicit DirectoryFile(const fs::path& path) : file_(path, File::Mode::kRead) {}
  uint64_t size() const override { return file_.size(); }
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override {
    file_.read_exactly(offset, dst, n);
  }

 private:
  File file_;
};

class DirectoryFiles final : public LocationFiles {
 public:
  explicit DirectoryFiles(fs::path directory) : directory_(std::move(directory)) {}

  std::string describe(const std::string& name) const override {
    return (directory_ / name).string();
  }

  std::unique_ptr<LocationFile> open(const std::string& name) override {
    std::error_code error;
    if (!fs::is_regular_file(directory_ / name, error)) return nullptr;
    return std::make_unique<DirectoryFile>(directory_ / name);
  }

  std::vector<std::string> list() override {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory_, error)) {
      if (entry.is_regular_file(error)) names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path directory_;
};

}  // namespace

std::unique_ptr<StorageWriter> DirectoryDriver::make_writer(
    const Location& location, const FileSystemWriterOptions& layout) const {
  return std::make_unique<FileSystemWriter>(location.path(), layout);
}

std::unique_ptr<StorageReader> DirectoryDriver::make_reader(
    const Location& location, const FileSystemReaderOptions& reading) const {
  return std::make_unique<FileSystemReader>(location.path(), reading);
}

std::unique_ptr<LocationFiles> DirectoryDriver::open_files(const Location& location) const {
  return std::make_unique<DirectoryFiles>(location.path());
}

}  // namespace dcpp::detail
