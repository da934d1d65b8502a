// LocationFiles' whole-file read, and a LocationFile as the RandomAccessData dcpp's readers take.

#include "storage/location_files.h"

namespace dcpp {

std::optional<std::string> LocationFiles::read(const std::string& name) {
  const std::unique_ptr<LocationFile> file = open(name);
  if (!file) return std::nullopt;
  std::string bytes(file->size(), '\0');
  file->read_exactly(0, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace dcpp

namespace dcpp::detail {

namespace {

class LocationFileData final : public RandomAccessData {
 public:
  explicit LocationFileData(std::unique_ptr<LocationFile> file) : file_(std::move(file)) {}
  uint64_t size() const override { return file_->size(); }
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override {
    file_->read_exactly(offset, dst, n);
  }
  std::size_t preferred_read_size() const override { return file_->preferred_read_size(); }

 private:
  std::unique_ptr<LocationFile> file_;
};

}  // namespace

std::unique_ptr<RandomAccessData> open_random_access(LocationFiles& files,
                                                     const std::string& name) {
  std::unique_ptr<LocationFile> file = files.open(name);
  if (!file) return nullptr;
  return std::make_unique<LocationFileData>(std::move(file));
}

}  // namespace dcpp::detail
