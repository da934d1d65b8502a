#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/location.h>

#include <cctype>

namespace dcpp {

namespace {

constexpr std::string_view kSchemeEnd = "://";
constexpr std::string_view kFileUrl = "file://";

// The scheme of "scheme://rest" (RFC 3986: a letter, then letters, digits, '+', '-', '.'; taken
// as written: drivers register lower case schemes); "file" for anything else: a path.
std::string scheme_of(const std::string& url) {
  const std::size_t end = url.find(kSchemeEnd);
  if (end == std::string::npos || end == 0 || !std::isalpha(static_cast<unsigned char>(url[0]))) {
    return "file";
  }
  std::string scheme;
  for (std::size_t i = 0; i < end; ++i) {
    const auto c = static_cast<unsigned char>(url[i]);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return "file";
    scheme += static_cast<char>(c);
  }
  return scheme;
}

}  // namespace

Location::Location(std::string url) : url_(std::move(url)), scheme_(scheme_of(url_)) {
  if (scheme_ == "file" && url_.compare(0, kFileUrl.size(), kFileUrl) == 0) {
    url_.erase(0, kFileUrl.size());
  }
}

Location::Location(const char* url) : Location(std::string(url ? url : "")) {}

Location::Location(const std::filesystem::path& directory) : Location(directory.string()) {}

std::filesystem::path Location::path() const {
  if (!is_directory()) {
    throw CheckpointError(ErrorKind::kUsage, "'" + url_ + "' is not a directory but a " + scheme_ +
                                                 ":// location; this needs a directory");
  }
  return url_;
}

Location Location::child(const std::string& name) const {
  Location below = *this;
  if (is_directory()) {
    below.url_ = (std::filesystem::path(url_) / name).string();
  } else {
    below.url_ = url_ + (url_.empty() || url_.back() == '/' ? "" : "/") + name;
  }
  return below;
}

}  // namespace dcpp
