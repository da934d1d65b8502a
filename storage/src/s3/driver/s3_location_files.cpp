#include "s3/driver/s3_location_files.h"

#include "s3/config/s3_config.h"
#include "s3/driver/s3_object.h"

namespace dcpp::detail {

namespace {

class S3LocationFile final : public LocationFile {
 public:
  explicit S3LocationFile(std::unique_ptr<S3Object> object) : object_(std::move(object)) {}
  uint64_t size() const override { return object_->size(); }
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override {
    object_->read_exactly(offset, dst, n);
  }
  std::size_t preferred_read_size() const override { return object_->preferred_read_size(); }

 private:
  std::unique_ptr<S3Object> object_;
};

}  // namespace

S3LocationFiles::S3LocationFiles(const std::string& url, const S3Options& s3)
    : url_(parse_s3_url(url)), client_(resolve_s3_config(s3, url_.bucket)) {}

std::string S3LocationFiles::describe(const std::string& name) const {
  return client_.url_of(url_.prefix + name);
}

void S3LocationFiles::check_bucket_once() {
  if (!bucket_checked_) client_.check_bucket();
  bucket_checked_ = true;
}

std::optional<std::string> S3LocationFiles::read(const std::string& name) {
  check_bucket_once();
  return client_.get_object_if_exists(url_.prefix + name);
}

std::unique_ptr<LocationFile> S3LocationFiles::open(const std::string& name) {
  check_bucket_once();
  const std::optional<uint64_t> size = client_.head_object(url_.prefix + name);
  if (!size) return nullptr;
  return std::make_unique<S3LocationFile>(
      std::make_unique<S3Object>(client_, url_.prefix + name, *size, bytes_read_));
}

std::vector<std::string> S3LocationFiles::list() {
  check_bucket_once();
  std::vector<std::string> names;
  for (const S3ObjectInfo& object : client_.list_objects(url_.prefix)) {
    const std::string name = object.key.substr(url_.prefix.size());
    if (name.find('/') == std::string::npos) names.push_back(name);
  }
  return names;
}

}  // namespace dcpp::detail
