#include "storage/location_files.h"

#include "s3/s3_location_files.h"

#include <dcpp/storage/s3_storage.h>

#include <algorithm>
#include <filesystem>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;

class DirectoryFiles final : public LocationFiles {
 public:
  explicit DirectoryFiles(fs::path directory) : directory_(std::move(directory)) {}

  std::string describe(const std::string& name) const override {
    return (directory_ / name).string();
  }

  std::optional<std::string> read(const std::string& name) override {
    const std::unique_ptr<RandomAccessData> file = open(name);
    if (!file) return std::nullopt;
    std::string bytes(file->size(), '\0');
    file->read_exactly(0, bytes.data(), bytes.size());
    return bytes;
  }

  std::unique_ptr<RandomAccessData> open(const std::string& name) override {
    std::error_code error;
    if (!fs::is_regular_file(directory_ / name, error)) return nullptr;
    return std::make_unique<File>(directory_ / name, File::Mode::kRead);
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

std::unique_ptr<LocationFiles> open_location_files(const std::string& location,
                                                   const S3Options& s3) {
  if (is_s3_url(location)) return std::make_unique<S3LocationFiles>(location, s3);
  return std::make_unique<DirectoryFiles>(location);
}

}  // namespace dcpp::detail
