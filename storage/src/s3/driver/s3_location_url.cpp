#include "s3/driver/s3_location_url.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_storage.h>

namespace dcpp {

namespace {

constexpr std::string_view kScheme = "s3://";

}  // namespace

bool is_s3_url(std::string_view location) { return location.substr(0, kScheme.size()) == kScheme; }

namespace detail {

std::string S3Url::text() const {
  std::string url = std::string(kScheme) + bucket;
  if (!prefix.empty()) url += "/" + prefix.substr(0, prefix.size() - 1);
  return url;
}

S3Url parse_s3_url(std::string_view url) {
  const auto refuse = [&](const std::string& why) {
    throw CheckpointError(ErrorKind::kUsage, "'" + std::string(url) +
                                                 "' is not a usable S3 location: " + why +
                                                 "; write s3://BUCKET/PREFIX");
  };
  if (!is_s3_url(url)) refuse("it does not start with s3://");
  std::string_view rest = url.substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  S3Url parsed;
  parsed.bucket = std::string(rest.substr(0, slash));
  if (parsed.bucket.size() < 3 || parsed.bucket.size() > 63) {
    refuse("a bucket name has 3 to 63 characters");
  }
  for (const char c : parsed.bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      refuse("a bucket name has only lowercase letters, digits, '.' and '-'");
    }
  }
  if (slash == std::string_view::npos) return parsed;
  std::string_view path = rest.substr(slash + 1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  std::size_t start = 0;
  while (start < path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      refuse("its prefix has an empty, '.' or '..' part");
    }
    start = end + 1;
  }
  if (!path.empty()) parsed.prefix = std::string(path) + "/";
  return parsed;
}

}  // namespace detail
}  // namespace dcpp
